/*
 * h_compare.c: GET /api/v1/compare?base=RUN&target=RUN[&rank=R][&threshold_pct=P][&alpha=A][&limit=N]:
 * two runs side by side (server/analysis/compare.c computes; this reads the
 * arguments and gathers both runs' figures). Without base, the target's
 * project baseline (PATCH /api/v1/runs/{run} {"baseline": true}). Without
 * rank, each run's lowest rank with data. base == target is allowed (every
 * delta 0, p = 1). When either run has several ranks, "distributed": both runs'
 * figures over all their ranks (analysis/distributed.h: distributed_compare).
 * A trace's operators and kernels are the work inside its complete steps
 * (in_steps), as its derivation stored them (analysis/inside.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/distributed.h"
#include "handlers.h"
#include "http.h"

#define LIMIT_DEFAULT 100
#define LIMIT_MAX 100000

/* ?name= a finite number in [lo, hi] (lo excluded when open_lo), def when absent; -1 when answered. */
static int arg_double(struct request *req, const char *name, double lo, int open_lo, double hi, double def,
		      double *out)
{
	const char *s = http_arg(req, name);
	char *end;
	double v;

	if (!s) {
		*out = def;
		return 0;
	}
	v = strtod(s, &end);
	if (!*s || *end || !isfinite(v) || v < lo || (open_lo && v == lo) || v > hi) {
		http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' must be a number from %g%s to %g",
				 name, lo, open_lo ? " (excluded)" : "", hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* ?name= a run name; NULL when absent, "" when invalid (answered) */
static const char *arg_run(struct request *req, const char *name)
{
	const char *s = http_arg(req, name);

	if (!s || route_valid_run_name(s))
		return s;
	http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' must be a run name ([A-Za-z0-9._-], 1 to 128)",
			 name);
	return "";
}

/* The distributed figures of every step of run (distributed.h); NULL with err set. */
static json_t *distributed_all(struct store_reader *r, const char *run, size_t *nranks, struct tp_errbuf *err)
{
	struct dist_input in;
	json_t *d = NULL;

	if (store_dist_input(r, run, &in, err))
		return NULL;
	*nranks = in.nranks;
	if (!(d = distributed_run(&in, 0, 0)))
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	dist_input_release(&in);
	return d;
}

/* body's "distributed" (distributed_compare) when either run has more than one rank; -1 with err set */
static int distributed_of(struct store_reader *r, const char *base, const char *target, json_t *body,
			  struct tp_errbuf *err)
{
	size_t nb = 0, nt = 0;
	json_t *db = distributed_all(r, base, &nb, err), *dt = db ? distributed_all(r, target, &nt, err) : NULL, *c;
	int rc = 0;

	if (!db || !dt)
		rc = -1;
	else if ((nb > 1 || nt > 1) &&
		 (!(c = distributed_compare(db, dt)) || json_object_set_new(body, "distributed", c))) {
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		rc = -1;
	}
	json_decref(db);
	json_decref(dt);
	return rc;
}

int h_compare(struct request *req)
{
	struct compare_opts o = { 0 };
	struct compare_run a = { 0 }, b = { 0 };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	char baseline[129];
	const char *base, *target;
	long long rank, limit;
	json_t *body = NULL;

	if ((target = arg_run(req, "target")) && !*target)
		return 0;
	if (!target)
		return http_reply_error(req, 400, "missing_parameter", NULL,
					"query parameter 'target' is required (base defaults to the target's project baseline)");
	if (((base = arg_run(req, "base")) && !*base) || h_arg_int(req, "rank", 0, 65535, -1, &rank) ||
	    h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    arg_double(req, "threshold_pct", 0, 0, 1e6, COMPARE_THRESHOLD_PCT, &o.threshold_pct) ||
	    arg_double(req, "alpha", 0, 1, 1, COMPARE_ALPHA, &o.alpha) || h_reader_open(req, &r))
		return 0;
	o.limit = (long)limit;
	if (!base) {
		if (store_baseline_of(r, target, baseline, &err))
			return h_answer(req, NULL, r, &err, NULL, 0);
		base = baseline;
		o.from_baseline = 1;
	}
	if (!store_compare_input(r, base, (int)rank, &a, &err) && !store_compare_input(r, target, (int)rank, &b, &err) &&
	    !(body = compare_runs(&a, &b, &o)))
		tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	compare_run_release(&a);
	compare_run_release(&b);
	if (body && distributed_of(r, base, target, body, &err)) {
		json_decref(body);
		body = NULL;
	}
	return h_answer(req, body, r, &err, NULL, 0);
}
