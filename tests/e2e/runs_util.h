/*
 * runs_util.h: what the run suites (check_runs*.c) share: the server each
 * test starts, requests and uploads through it, a trace cut into its
 * events and uploaded in chunks, and the answers a run gives compared
 * byte for byte between two runs.
 */
#ifndef RUNS_UTIL_H
#define RUNS_UTIL_H

#include <stddef.h>

#include "testutil.h"

/* The checked fixture: a server on loopback (ru_srv), started and stopped. */
extern struct tu_server ru_srv;
void ru_start(void);
void ru_stop(void);

/* method path through server s, expecting status; the body as JSON */
json_t *ru_call_on(const struct tu_server *s, const char *method, const char *path, long status);
/* method path (body), expecting status; the body as JSON */
json_t *ru_call(const char *method, const char *path, const void *body, size_t len, long status);
/* upload a fixture to run at rank; its artifact id */
long long ru_upload(const char *run, int rank, const char *fixture);
/* A trace of one profiling cycle: steps first..first+2, each dur_ms long, from start_s seconds; its artifact id. */
long long ru_upload_cycle(const char *run, int first, int start_s, int dur_ms);

struct cut {
	const char *head, *tail;	/* the file up to traceEvents' '[' (included); from its ']' */
	size_t nhead, ntail;
	const char **ev;		/* each event's first byte; ev[n] the ']' */
	size_t n;
};

/* End of the JSON value starting at p (an object or array; strings skipped), or NULL. */
const char *ru_value_end(const char *p, const char *end);
/* Find traceEvents' elements in the (inflated) trace text. */
void ru_cut_find(const char *s, size_t len, struct cut *c);
/* Upload the events [from, to) of c as one trace to run, rank 0, through server s. */
void ru_upload_chunk_via(const struct tu_server *s, const struct cut *c, size_t from, size_t to,
			 const char *run, size_t part);

/* GET tail of run whole through sa and of run cut through sb: the same bytes. */
void ru_same_answer_via(const struct tu_server *sa, const char *whole, const struct tu_server *sb,
			const char *cut, const char *tail);
/* ru_same_answer_via() through ru_srv both */
void ru_same_answer(const char *whole, const char *cut, const char *tail);
/* The run's answers (URL tails) the chunked and whole runs are compared on; ru_nanswers of them. */
extern const char *const ru_answers[];
extern const size_t ru_nanswers;

/* the value of a metric line "name value" in /metrics of s (ru_metric: of ru_srv), -1 when absent */
double ru_metric_on(const struct tu_server *s, const char *name);
double ru_metric(const char *name);

#endif
