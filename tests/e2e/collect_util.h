/*
 * collect_util.h: what the collector suites (check_collect*.c) share: the
 * server each test starts, trainscope-collect spawned against it, the run's
 * artifacts read back, small traces put in the watched folder, and a fake
 * server on a socket of its own that takes uploads as they come.
 */
#ifndef COLLECT_UTIL_H
#define COLLECT_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "testutil.h"

extern struct tu_server cl_srv;
extern char *cl_dir;	/* a fresh temporary folder per test */
/* The checked fixture: a server on loopback and a fresh cl_dir per test; stopped and removed after. */
void cl_start(void);
void cl_stop(void);
/* cl_dir/name (malloc'd) */
char *cl_path_in(const char *name);
/*
 * Start trainscope-collect with args (NULL-terminated) and extra environment
 * entries "K=V" (NULL-terminated, may be NULL), stdout and stderr to
 * cl_dir/<tag>.out and cl_dir/<tag>.err. The environment is made hermetic: this
 * server, short backoffs, no token/run/rank from the caller's shell.
 */
pid_t cl_spawn(const char *tag, const char *const args[], const char *const env[]);
/* Exit status as a shell gives it: the code, or 128 + the signal. */
int cl_reap(pid_t pid);
/* cl_spawn and cl_reap */
int cl_collect(const char *tag, const char *const args[], const char *const env[]);
/* What the collector wrote: cl_dir/<tag>.out or .err (malloc'd, NUL-terminated). */
char *cl_output(const char *tag, const char *ext);
/* GET path of the server; its JSON answer (new reference) */
json_t *cl_get(const char *path);
/* The run's artifacts (new reference); an empty array when the run does not exist yet. */
json_t *cl_artifacts(const char *run);
/* json_array_size(cl_artifacts(run)) */
size_t cl_count_artifacts(const char *run);
/* How many artifacts of the run have this name. */
int cl_named(json_t *arts, const char *name);
/* The artifact of arts with this name; fails the test when there is none. */
json_t *cl_by_name(json_t *arts, const char *name);
/* nanosleep for ms milliseconds */
void cl_sleep_ms(long ms);
/* Poll until the run has at least n artifacts (10 s at most); returns how many it has. */
size_t cl_wait_artifacts(const char *run, size_t n);
/* Uploads the server answered with this status, from /metrics. */
long cl_uploads_answered(int status);
/*
 * cl_uploads_answered, once it has reached n (2 s at most): the server counts a
 * request when its connection is done with, which may be just after the
 * client has its answer.
 */
long cl_answered(int status, long n);
/* A small Kineto-form trace whose bytes are unique to (tag, i). */
char *cl_trace_text(const char *tag, int i);
/* Write name in cl_dir, with its mtime age_s seconds in the past (0: now). */
void cl_put_file(const char *name, const char *text, int age_s);
/* Whether s starts with prefix. */
int cl_starts(const char *s, const char *prefix);
/*
 * A server that reads slowly (32 KiB every 10 ms, about 3 MB/s, from a small
 * receive buffer), so that an upload takes seconds, then answers 201:
 * upload's progress bar has a rate and an ETA to show.
 */
int cl_slow_listener(int *port);
/* A connection on lfd within ms, or -1. */
int cl_accept_within(int lfd, int ms);
/*
 * Read one upload from c as the collector sends a plain file (chunked,
 * gzip'd on the way) and put its name= into name.
 */
void cl_read_upload(int c, char *name, size_t cap);
/* Answer the upload on c with status (201, 415 or 503) and close c. */
void cl_answer_upload(int c, int status, const char *name);
/* The same, the connection kept open for the next request when keep (no Connection: close). */
void cl_answer_upload_keep(int c, int status, const char *name, int keep);
/*
 * The first two uploads on lfd, sent before either is answered, with no
 * third opened meanwhile: those of names a and b, in either order (each on
 * a connection of its own). *ca and *cb get their connections.
 */
void cl_accept_pair(int lfd, const char *a, const char *b, int *ca, int *cb);

#endif
