/*
 * h_timeline.c: a rank's whole training, every cycle and chunk:
 *   GET /api/v1/runs/{run}/timeline?rank=R&points=N
 * Its steps in time order (number, cycle, start, duration, breakdown,
 * allocated memory at the step's end, the artifact whose span it is), at
 * most N of them (default 2000; 0 for all: runline_pick keeps each stretch's
 * slowest), the cycles, and the findings that only show across cycles.
 */
#include "alloc.h"
#include "analysis/runline.h"
#include "handlers.h"
#include "http.h"

#define POINTS_DEFAULT 2000
#define POINTS_MAX 1000000

static json_t *step_json(const struct rl_step *s)
{
	json_t *bd = json_object();

	for (int c = 0; bd && c < AN_NCOMP; c++)
		if (json_object_set_new(bd, an_comp_names[c], json_integer(s->comp_ns[c]))) {
			json_decref(bd);
			bd = NULL;
		}
	if (!bd)
		return NULL;
	return json_pack("{s:I, s:i, s:I, s:I, s:o, s:o, s:I}", "step", (json_int_t)s->step, "cycle", s->cycle,
			 "start_ns", (json_int_t)s->start_ns, "dur_ns", (json_int_t)s->dur_ns, "breakdown_ns", bd,
			 "allocated_bytes", s->alloc >= 0 ? json_integer(s->alloc) : json_null(),
			 "artifact_id", (json_int_t)s->artifact);
}

static json_t *cycles_json(const struct rl_step *s, size_t n, int ncycles)
{
	json_t *arr = json_array();
	size_t i = 0;

	for (int c = 0; arr && c < ncycles; c++) {
		size_t from = i;
		int64_t sum = 0;
		for (; i < n && s[i].cycle == c; i++)
			sum += s[i].dur_ns;
		const struct rl_step *a = &s[from], *z = &s[i - 1];
		if (json_array_append_new(arr, json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I}", "cycle", c,
							 "first_step", (json_int_t)a->step, "last_step", (json_int_t)z->step,
							 "steps", (json_int_t)(i - from), "start_ns", (json_int_t)a->start_ns,
							 "end_ns", (json_int_t)(z->start_ns + z->dur_ns), "mean_step_ns",
							 (json_int_t)((sum + (int64_t)(i - from) / 2) / (int64_t)(i - from))))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	return arr;
}

static json_t *timeline(struct store_reader *r, const char *run, int rank, long points, struct tp_errbuf *err)
{
	struct rl_step *s = NULL;
	size_t n, k, i, *keep = NULL;
	char device[16];
	json_t *steps = NULL, *o = NULL;
	int ncycles;

	if (store_timeline(r, run, rank, &s, &n, &rank, device, err))
		return NULL;
	ncycles = runline_cycles(s, n);
	if (!(keep = tp_malloc((n + 1) * sizeof(*keep))) || !(steps = json_array()))
		goto oom;
	k = runline_pick(s, n, (size_t)points, keep);
	for (i = 0; i < k; i++)
		if (json_array_append_new(steps, step_json(&s[keep[i]])))
			goto oom;
	o = json_pack("{s:i, s:o, s:I, s:I, s:o, s:o, s:o}", "rank", rank, "device",
		      device[0] ? json_string(device) : json_null(), "steps_total", (json_int_t)n, "points",
		      (json_int_t)k, "cycles", cycles_json(s, n, ncycles), "steps", steps, "findings",
		      runline_findings(s, n, ncycles));
	steps = NULL;
	if (!o)
		goto oom;
	tp_free(keep);
	tp_free(s);
	return o;
oom:
	json_decref(steps);
	tp_free(keep);
	tp_free(s);
	tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	return NULL;
}

int h_run_timeline(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, points;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) ||
	    h_arg_int(req, "points", 0, POINTS_MAX, POINTS_DEFAULT, &points) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, timeline(r, req->params[0], (int)rank, (long)points, &err), r, &err, NULL, 0);
}
