/*
 * h_analysis.c: what analysis stored, per rank of a run:
 *   GET /api/v1/runs/{run}/steps?rank=R[&format=csv]
 *   GET /api/v1/runs/{run}/ops?rank=R&device=cpu|gpu&sort=self_ns&limit=N[&format=csv]
 *   GET /api/v1/runs/{run}/kernels?rank=R&kind=kernel|memcpy|memset&limit=N[&format=csv]
 *   GET /api/v1/runs/{run}/ranks
 *   GET /api/v1/runs/{run}/diagnosis?rank=R
 *   GET /api/v1/runs/{run}/distributed[?step=N]   (all ranks)
 *   GET /api/v1/runs/{run}/critical_path?step=N   (all ranks)
 * Without rank, the run's lowest rank with data.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "analysis/critpath.h"
#include "analysis/diagnosis.h"
#include "analysis/distributed.h"
#include "analysis/runline.h"
#include "answer.h"
#include "handlers.h"
#include "reads.h"
#include "http.h"

#define LIMIT_DEFAULT 100
#define LIMIT_MAX 100000

/* ?format=csv (the dispatcher refuses other values, and csv where the route has no ROUTE_CSV) */
static int want_csv(struct request *req)
{
	const char *f = http_arg(req, "format");

	return f && !strcmp(f, "csv");
}

/* ?name= one of choices (def when absent): its index, or -1 when answered with an error */
static int arg_choice(struct request *req, const char *name, const char *const *choices, int n, int def)
{
	const char *v = http_arg(req, name);
	int i;

	if (!v)
		return def;
	for (i = 0; i < n; i++)
		if (!strcmp(v, choices[i]))
			return i;
	http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' has an unknown value", name);
	return -1;
}

int h_run_steps(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank;
	int csv = want_csv(req);

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_steps(r, req->params[0], (int)rank, &err), r, &err, "steps", csv);
}

int h_run_ops(struct request *req)
{
	static const char *const devices[] = { "cpu", "gpu" };
	static const char *const sorts[] = { "self_ns", "total_ns", "calls", "name" };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, limit;
	int csv = want_csv(req), dev, sort;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    (dev = arg_choice(req, "device", devices, 2, AN_DEV_CPU)) < 0 ||
	    (sort = arg_choice(req, "sort", sorts, 4, 0)) < 0 || h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_ops(r, req->params[0], (int)rank, dev, sorts[sort], (long)limit, &err), r, &err,
		      "ops", csv);
}

int h_run_kernels(struct request *req)
{
	static const char *const kinds[] = { "kernel", "memcpy", "memset" };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, limit;
	int csv = want_csv(req), kind;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    (kind = arg_choice(req, "kind", kinds, 3, AN_GPU_KERNEL)) < 0 ||
	    h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_kernels(r, req->params[0], (int)rank, kind, (long)limit, &err), r, &err,
		      "kernels", csv);
}

int h_run_ranks(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	int csv = want_csv(req);

	if (h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_ranks(r, req->params[0], &err), r, &err, "ranks", csv);
}

/*
 * What only shows across the rank's profiling cycles (runline.h: cycle_drift,
 * cycle_memory_growth, slow_cycle), after the findings of body.
 */
static int cycle_findings(struct store_reader *r, const char *run, int rank, json_t *body, struct tp_errbuf *err)
{
	json_t *all = json_object_get(body, "findings"), *more;
	struct rl_step *s = NULL;
	size_t n;
	char device[16];
	int rc = store_timeline(r, run, rank, &s, &n, &rank, device, err);

	if (rc)
		return rc;
	more = runline_findings(s, n, runline_cycles(s, n));
	tp_free(s);
	if (!more)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	rc = json_array_extend(all, more);
	json_decref(more);
	return rc ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : TP_OK;
}

/*
 * What only shows across the run's ranks (distributed.h: distributed_findings), after the findings
 * of body; a persistent straggler whose waits explain the step time first (the rank's own findings,
 * low utilization say, follow from the waiting).
 */
static int run_findings(struct store_reader *r, const char *run, json_t *body, struct tp_errbuf *err)
{
	struct dist_input in;
	json_t *all = json_object_get(body, "findings"), *d = NULL, *more = NULL, *f;
	size_t i, first = 0;
	int rc = store_dist_input(r, run, &in, err);

	if (rc)
		return rc;
	if (in.nranks > 1 && (!(d = distributed_run(&in, 0, 0)) || !(more = distributed_findings(d, in.device))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	json_array_foreach(more, i, f)
		if (!rc && (json_is_true(json_object_get(json_object_get(f, "evidence"), "explains_step_time")) ?
			    json_array_insert(all, first++, f) : json_array_append(all, f)))
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	json_decref(d);
	json_decref(more);
	dist_input_release(&in);
	return rc;
}

int h_run_diagnosis(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct diag_input in;
	int64_t *durs;
	long long rank;
	json_t *body = NULL;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_reader_open(req, &r))
		return 0;
	if (!store_diag_input(r, req->params[0], (int)rank, &in, &durs, NULL, &err) && !(body = diagnosis_run(&in)))
		tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	tp_free(durs);
	if (body && (cycle_findings(r, req->params[0], in.rank, body, &err) ||
		     run_findings(r, req->params[0], body, &err))) {
		json_decref(body);
		body = NULL;
	}
	return h_answer(req, body, r, &err, "findings", 0);
}

int h_run_distributed(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct dist_input in;
	long long step;
	json_t *body = NULL;

	if (h_arg_int(req, "step", 0, INT64_MAX, -1, &step) || h_reader_open(req, &r))
		return 0;
	if (!store_dist_input(r, req->params[0], &in, &err) && !(body = distributed_run(&in, step >= 0, step)))
		tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	dist_input_release(&in);
	return h_answer(req, body, r, &err, "ranks", 0);
}

/* The events of rank's step window (the window added to cp before, on the aligned clock; off: the
 * rank's clock offset, dist_align) into cp, their times aligned. */
static int cp_read_rank(struct store_reader *r, const char *run, int rank, struct cp_input *cp,
			int64_t start_ns, int64_t end_ns, int64_t off, struct tp_errbuf *err)
{
	struct store_trace *t = NULL;
	struct tp_event *ev;
	size_t n;
	int64_t base;
	int rc, got;

	if ((rc = store_trace_open(r, run, rank, tp_sat_add(start_ns, off), tp_sat_add(end_ns, off), &t, &got, err)))
		return rc;
	while ((rc = store_trace_next(t, &ev, &n, &base, err)) == 1)
		for (size_t i = 0; i < n; i++)
			if (ev[i].ph == 'X' &&
			    cp_add_event(cp, rank, &ev[i], tp_sat_sub(base, off), store_trace_string(t, ev[i].name),
					 store_trace_string(t, ev[i].cat))) {
				store_trace_close(t);
				return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			}
	store_trace_close(t);
	return rc;
}

/*
 * Read at request time from the events of step's window on each rank (analysis/critpath.h): a
 * step's events are a small part of a run, and the path depends on every rank's at once.
 */
int h_run_critical_path(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct dist_input in;
	struct cp_input cp = { 0 };
	size_t *inst = NULL, i;
	long long step;
	json_t *body = NULL;
	int rc;

	if (h_arg_int(req, "step", 0, INT64_MAX, -1, &step))
		return 0;
	if (step < 0)
		return http_reply_error(req, 400, "invalid_parameter", NULL, "step is required");
	if (h_reader_open(req, &r))
		return 0;
	if ((rc = store_dist_input(r, req->params[0], &in, &err)))
		return h_answer(req, NULL, r, &err, NULL, 0);
	if (dist_align(&in))	/* each rank's times on the reference rank's clock */
		goto oom;
	for (i = 0; i < in.nsteps; i++)
		if (in.steps[i].step == step &&
		    cp_add_window(&cp, in.steps[i].rank, in.steps[i].start_ns,
				  tp_sat_add(in.steps[i].start_ns, in.steps[i].dur_ns)))
			goto oom;
	if (!cp.nwin) {
		tp_fail(&err, TP_ERR_NOTFOUND, "step_not_found", "run '%s' has no step %lld", req->params[0], step);
		goto out;
	}
	if (!(inst = tp_malloc((in.ncolls + 1) * sizeof(*inst))) || dist_match(&in, inst))
		goto oom;
	for (i = 0; i < in.ncolls; i++)
		if (inst[i] != SIZE_MAX &&
		    cp_add_coll(&cp, in.colls[i].rank, in.colls[i].start_ns, in.colls[i].launch_ns, inst[i]))
			goto oom;
	for (i = 0; i < cp.nwin; i++) {
		size_t k;
		for (k = 0; k < in.nranks && in.ranks[k] != cp.win[i].rank; k++)
			;
		if (cp_read_rank(r, req->params[0], cp.win[i].rank, &cp, cp.win[i].start_ns, cp.win[i].end_ns,
				 k < in.nranks ? in.clock_off[k] : 0, &err))
			goto out;
	}
	if (!(body = critpath_run(&cp, step)))
		goto oom;
	goto out;
oom:
	tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
out:
	tp_free(inst);
	cp_input_release(&cp);
	dist_input_release(&in);
	return h_answer(req, body, r, &err, "segments", 0);
}
