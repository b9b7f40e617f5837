/*
 * collect.h: what the subcommands of trainscope-collect share: the flags
 * every one of them takes (--server, --run, --rank, --help) and the exit
 * codes. Each subcommand is one `<name>_main(argc, argv)` in the table of
 * main.c; a new one is a file with its _main and a row there.
 */
#ifndef COLLECT_H
#define COLLECT_H

#include <getopt.h>

#include "client.h"

/* getopt_long rows for the shared flags; each subcommand's table starts with them */
#define COLLECT_COMMON_OPTIONS                                         \
	{ "server", required_argument, NULL, 'S' },                    \
	{ "run", required_argument, NULL, 'R' },                       \
	{ "rank", required_argument, NULL, 'K' },                      \
	{ "help", no_argument, NULL, 'h' }

/* The shared part of every subcommand's --help: the shared flags, and where the rest is. */
extern const char collect_common_help[];

/*
 * Apply a shared flag to c: 0 when opt was one (and its value good), 1 when
 * opt is not a shared flag, -1 after a message on stderr for a bad value.
 */
int collect_common_option(struct client *c, int opt, const char *arg);
/* 0 when c->run is set and valid, else -1 after a message on stderr. */
int collect_need_run(const struct client *c);

int upload_main(int argc, char **argv);
int watch_main(int argc, char **argv);
int run_main(int argc, char **argv);
int compare_main(int argc, char **argv);

#endif
