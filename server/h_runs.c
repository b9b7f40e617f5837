/*
 * h_runs.c: runs and their steps: GET /api/v1/runs, /api/v1/runs/{run},
 * /api/v1/runs/{run}/steps?rank=R.
 */
#include <stdlib.h>

#include "handlers.h"
#include "http.h"

int h_arg_int(struct request *req, const char *name, long long lo, long long hi, long long def,
	      long long *out)
{
	const char *s = http_arg(req, name);
	char *end;
	long long v;

	if (!s) {
		*out = def;
		return 0;
	}
	v = strtoll(s, &end, 10);
	if (!*s || *end || v < lo || v > hi) {
		http_reply_error(req, 400, "invalid_parameter", NULL,
				 "query parameter '%s' must be an integer from %lld to %lld", name, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* Run a store query with a fresh reader and answer with its result. */
static int answer(struct request *req, json_t *(*query)(struct store_reader *, const char *, int,
							 struct tp_errbuf *),
		  const char *run, int rank)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *body;
	int rc;

	if ((rc = store_reader_open(http_store(req), &r, &err)))
		return http_reply_fail(req, rc, &err, NULL);
	body = query(r, run, rank, &err);
	store_reader_close(r);
	if (!body)
		return http_reply_fail(req, err.rc ? err.rc : TP_ERR_NOMEM, &err, NULL);
	return http_reply_json(req, 200, body);
}

static json_t *q_runs(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	(void)run, (void)rank;
	return store_runs_list(r, err);
}

static json_t *q_run(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	(void)rank;
	return store_run_get(r, run, err);
}

int h_runs_list(struct request *req)
{
	return answer(req, q_runs, NULL, 0);
}

int h_run_get(struct request *req)
{
	return answer(req, q_run, req->params[0], 0);
}

int h_run_steps(struct request *req)
{
	long long rank;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank))
		return 0;
	return answer(req, store_steps, req->params[0], (int)rank);
}
