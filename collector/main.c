/*
 * main.c: trainscope-collect SUBCOMMAND [flags] ...: the table of
 * subcommands, the flags they share, and the process-wide setup (libcurl,
 * SIGPIPE, the jitter's seed). Everything else is in the subcommands.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "port.h"

static const struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
} subcommands[] = {
	{ "upload", upload_main, "upload files as artifacts of a run, then exit" },
	{ "watch", watch_main, "ship every finished file that appears in folders, each once" },
	{ "run", run_main, "run a command with the CUPTI library and ship its trace chunks" },
	{ "compare", compare_main, "compare two runs (or one with its baseline); exit 5 on a regression,"
				   " 6 when not comparable" },
};

/* the flags every subcommand takes */
#define FLAGS_HELP                                                                                      \
	"\n"                                                                                             \
	"  --server URL   the server (env TRAINSCOPE_SERVER, default " CLIENT_DEFAULT_SERVER ")\n"       \
	"  --run NAME     the run, [A-Za-z0-9._-]{1,128} (env TRAINSCOPE_RUN)\n"                        \
	"  --rank R       the rank, 0 to 65535 (env TRAINSCOPE_RANK, else RANK, else 0)\n"              \
	"  --help         this text\n"

const char collect_common_help[] = FLAGS_HELP "\nToken, retries and exit codes: trainscope-collect --help\n";

/* What all subcommands share, once, in the top-level help (not repeated in each subcommand's). */
static const char shared_help[] =
	"\n"
	"Environment: TRAINSCOPE_TOKEN is sent as 'Authorization: Bearer TOKEN'. Connection\n"
	"errors, 5xx and 429 (server busy) answers are retried with exponential backoff and jitter, from\n"
	"TRAINSCOPE_RETRY_BASE_MS (500) doubling up to TRAINSCOPE_RETRY_MAX_MS (30000);\n"
	"TRAINSCOPE_RETRY_ATTEMPTS (8; 0 = no limit) bounds the attempts of `upload`.\n"
	"Any other 4xx answer is never retried: the server's message is printed.\n"
	"\n"
	"Exit codes (upload, watch): 0 everything shipped (watch without --once: stopped by\n"
	"SIGINT or SIGTERM); 1 the server rejected something (4xx, its message printed);\n"
	"2 bad usage; 3 the server could not be reached or kept failing (5xx) after the\n"
	"retries; 4 a local error (file, folder, state file).\n"
	"compare: 0 no regression, 5 a regression, 6 the runs cannot be compared, 1 to 4 as above.\n"
	"run exits with the command's status (128+N when a signal N ended it, 127 when it\n"
	"could not be started, 2 for bad usage).\n";

int collect_common_option(struct client *c, int opt, const char *arg)
{
	switch (opt) {
	case 'S':
		if (tp_url_port(arg) < 0) {
			fprintf(stderr, "trainscope-collect: --server %s: expected http(s)://HOST[:PORT] with a port from"
				" 1 to 65535\n", arg);
			return -1;
		}
		client_set_server(c, arg);
		return 0;
	case 'R':
		c->run = arg;
		return 0;
	case 'K':
		if (client_parse_rank(arg, &c->rank)) {
			fprintf(stderr, "trainscope-collect: --rank %s: expected 0 to 65535\n", arg);
			return -1;
		}
		return 0;
	default:
		return 1;
	}
}

int collect_need_run(const struct client *c)
{
	if (!c->run) {
		fprintf(stderr, "trainscope-collect: which run? give --run NAME or set TRAINSCOPE_RUN\n");
		return -1;
	}
	if (!client_valid_run(c->run)) {
		fprintf(stderr, "trainscope-collect: run '%s': expected 1 to 128 of A-Z a-z 0-9 . _ -\n", c->run);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: trainscope-collect SUBCOMMAND [flags] ...\n\n");
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n'trainscope-collect SUBCOMMAND --help' for its flags. Every subcommand takes:\n%s%s",
		FLAGS_HELP, shared_help);
}

int main(int argc, char **argv)
{
	size_t i;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLIENT_EXIT_USAGE : CLIENT_EXIT_OK;
	}
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			break;
	if (i == sizeof(subcommands) / sizeof(subcommands[0])) {
		fprintf(stderr, "trainscope-collect: unknown subcommand '%s'\n", argv[1]);
		usage(stderr);
		return CLIENT_EXIT_USAGE;
	}
	/* a server that closes the connection must not kill us: curl sees EPIPE instead */
	signal(SIGPIPE, SIG_IGN);
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "trainscope-collect: libcurl did not initialise\n");
		return CLIENT_EXIT_LOCAL;
	}
	rc = subcommands[i].main(argc - 1, argv + 1);
	curl_global_cleanup();
	return rc;
}
