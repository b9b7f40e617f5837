/*
 * spool.h: the spool folder the injection library writes chunks into and
 * trainscope-collect ships from (the contract of issue 7):
 *   - each chunk is written to a temporary file whose name starts with '.',
 *     then renamed to trace-<pid>-<seq>.pt.trace.json (seq from 0, per process),
 *     or trace-<pid>-<seq>-<tag>.pt.trace.json while a tag is set (tag
 *     "c<ID>" during an on-demand capture window, issue 52);
 *   - the folder is bounded: when the files in it (every process's, shipped
 *     files being removed by the agent) plus the chunk would exceed max
 *     bytes, the chunk is dropped and counted, never waited for.
 * Errors go to stderr, one line each time the state changes (first drop,
 * first write error), and spool_release() says how many were dropped.
 */
#ifndef CUPTI_SPOOL_H
#define CUPTI_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPOOL_DEFAULT_MAX (1ull << 30)

struct spool {
	char *dir;
	uint64_t max;
	pid_t pid;
	unsigned long long seq;
	unsigned long long dropped, dropped_bytes;
	int warned;		/* a drop was reported */
	char tag[80];		/* "" or the name's tag (spool_set_tag) */
};

/* Creates dir if missing (one level). 0, or -1 with errno set. */
int spool_open(struct spool *s, const char *dir, uint64_t max);
/* 0 written, 1 dropped because the spool is full, -1 write error (dropped too). */
int spool_write(struct spool *s, const void *data, size_t len);
/* Tag the names of the chunks written from now on ("" or NULL: none); at most 79 bytes kept. */
void spool_set_tag(struct spool *s, const char *tag);
/* Bytes in the spool's regular files now. */
uint64_t spool_used(const struct spool *s);
/* Reports drops on stderr (one line) and frees. */
void spool_release(struct spool *s);

#endif
