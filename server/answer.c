/*
 * answer.c: GET answers' JSON from the store's rows (answer.h). Members are
 * inserted in the order the API has always written them: answers stay byte
 * for byte what they were (scripts/answers.py).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "analysis/stats.h"
#include "answer.h"
#include "utf8.h"

/* A string (NULL: null); text that is not UTF-8 (stored before it was checked) has '?' for each bad byte. */
static json_t *str(const char *s)
{
	size_t len;
	json_t *j;
	char *copy;

	if (!s)
		return json_null();
	len = strlen(s);
	if ((j = json_stringn(s, len)) || !(copy = tp_malloc(len + 1)))
		return j;
	for (size_t i = 0; i < len;) {
		size_t n = tp_utf8_len((const unsigned char *)s + i, (const unsigned char *)s + len);
		if (!n) {
			copy[i++] = '?';
			continue;
		}
		memcpy(copy + i, s + i, n);
		i += n;
	}
	j = json_stringn(copy, len);
	tp_free(copy);
	return j;
}

/* An integer, or null for -1 (what the store has no value for). */
static json_t *int_or_null(int64_t v)
{
	return v == -1 ? json_null() : json_integer((json_int_t)v);
}

/* JSON text we wrote, parsed; fallback (stolen) when there is none. */
static json_t *parsed(const char *s, json_t *fallback)
{
	if (!s)
		return fallback;
	json_decref(fallback);
	return json_loads(s, 0, NULL);	/* NULL only when out of memory */
}

static json_t *run_object(const struct store_run_info *r, int full)
{
	struct stats_sample s;
	json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o}", "name", str(r->name), "project", str(r->project),
			      "created_ns", int_or_null(r->created_ns), "artifacts", int_or_null(r->artifacts), "ranks",
			      int_or_null(r->ranks), "peak_allocated_bytes", int_or_null(r->peak_allocated), "baseline",
			      r->baseline, "tags", parsed(r->tags_json, json_array()));
	json_t *times;

	if (!o)
		return NULL;
	if (full && json_object_set_new(o, "metadata", parsed(r->metadata_json, json_object())))
		goto oom;
	if (r->nsteps) {
		/* mean and median of a copy: the rows stay as the store gave them */
		int64_t *d = tp_malloc(r->nsteps * sizeof(*d));
		if (!d)
			goto oom;
		memcpy(d, r->step_dur_ns, r->nsteps * sizeof(*d));
		stats_summarise(d, r->nsteps, &s);
		tp_free(d);
		times = json_pack("{s:I, s:I}", "mean", (json_int_t)tp_round_i64(s.mean), "median", (json_int_t)s.median);
	} else
		times = json_pack("{s:n, s:n}", "mean", "median");
	if (json_object_set_new(o, "steps", json_integer((json_int_t)r->nsteps))) {
		json_decref(times);
		goto oom;
	}
	if (json_object_set_new(o, "step_time_ns", times))
		goto oom;
	/* the list too: its steps and step times are the analysis as it stands, a page says so */
	if (json_object_set_new(o, "analysis_pending", json_boolean(r->analysis_pending)))
		goto oom;
	/* listed by a collector's poll alone (migration 021): nothing uploaded until a capture is taken */
	if (json_object_set_new(o, "waiting_for_capture", json_boolean(r->polled && r->artifacts == 0)))
		goto oom;
	return o;
oom:
	json_decref(o);
	return NULL;
}

json_t *answer_runs(const struct store_run_info *v, size_t n)
{
	json_t *runs = json_array();

	for (size_t i = 0; runs && i < n; i++)
		if (json_array_append_new(runs, run_object(&v[i], 0))) {
			json_decref(runs);
			return NULL;
		}
	return runs ? json_pack("{s:o}", "runs", runs) : NULL;
}

static json_t *artifact_object(const struct store_artifact_info *a)
{
	json_t *o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", int_or_null(a->id), "run",
			      str(a->run), "rank", int_or_null(a->rank), "kind", str(a->kind), "name", str(a->name),
			      "sha256", str(a->sha256), "bytes", int_or_null(a->bytes), "status", str(a->status),
			      "events", int_or_null(a->events), "created_ns", int_or_null(a->created_ns));

	if (o && a->error && json_object_set_new(o, "error", json_pack("{s:o, s:o}", "code", str(a->error_code),
								       "message", str(a->error)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *answer_run(const struct store_run_info *run, const struct store_artifact_info *a, size_t n)
{
	json_t *arts = json_array();

	for (size_t i = 0; arts && i < n; i++)
		if (json_array_append_new(arts, artifact_object(&a[i]))) {
			json_decref(arts);
			return NULL;
		}
	return arts ? json_pack("{s:o, s:o}", "run", run_object(run, 1), "artifacts", arts) : NULL;
}

json_t *answer_artifact(const struct store_artifact_info *a)
{
	return json_pack("{s:o}", "artifact", artifact_object(a));
}

static json_t *step_object(const struct store_step *s)
{
	json_t *bd = json_object(), *o;
	int c;

	for (c = 0; bd && c < AN_NCOMP; c++)
		if (json_object_set_new(bd, an_comp_names[c], json_integer((json_int_t)s->comp_ns[c])))
			json_decref(bd), bd = NULL;
	/* torch-tb-profiler's GPU utilization: the share of the step with any kernel running,
	 * computation or communication */
	o = json_pack("{s:o, s:I, s:I, s:I, s:I, s:b, s:b, s:o, s:f, s:o}", "step",
		      s->whole_trace ? json_null() : json_integer((json_int_t)s->step), "start_ns", (json_int_t)s->start_ns,
		      "dur_ns", (json_int_t)s->dur_ns, "cpu_dur_ns", (json_int_t)s->cpu_dur_ns, "comm_overlap_ns",
		      (json_int_t)s->comm_overlap_ns, "incomplete", s->incomplete > 0, "whole_trace", s->whole_trace,
		      "breakdown_ns", bd, "gpu_utilization_pct",
		      s->dur_ns > 0 ? 100.0 * (double)s->gpu_busy_ns / (double)s->dur_ns : 0.0, "note",
		      s->incomplete > 0 && s->incomplete < 3 ? json_string(an_incomplete_notes[s->incomplete]) : json_null());
	return o;
}

json_t *answer_steps(int rank, const struct store_step *v, size_t n)
{
	json_t *steps = json_array(), *notes = json_array();
	int inc = 0;
	char text[160];

	for (size_t i = 0; steps && i < n; i++) {
		inc += v[i].incomplete > 0;
		if (json_array_append_new(steps, step_object(&v[i])))
			json_decref(steps), steps = NULL;
	}
	if (inc && notes) {
		snprintf(text, sizeof(text), "%d incomplete step%s left out of means, medians, compare and drift", inc,
			 inc > 1 ? "s are" : " is");
		if (json_array_append_new(notes, json_string(text)))
			json_decref(notes), notes = NULL;
	}
	if (!steps || !notes) {
		json_decref(steps);
		json_decref(notes);
		return NULL;
	}
	return json_pack("{s:i, s:o, s:o}", "rank", rank, "steps", steps, "notes", notes);
}

/* One value as JSON. */
static json_t *val_json(const struct store_val *x)
{
	return x->type == SV_INT ? json_integer((json_int_t)x->i) : x->type == SV_REAL ? json_real(x->r)
		: x->type == SV_TEXT ? str(x->s) : json_null();
}

/* Row i of rows as an object of its columns, in their order. */
static json_t *row_object(const struct store_rows *rows, size_t i)
{
	json_t *o = json_object();

	for (size_t c = 0; o && c < rows->ncols; c++) {
		if (json_object_set_new(o, rows->cols[c], val_json(&rows->v[i * rows->ncols + c])))
			json_decref(o), o = NULL;
	}
	return o;
}

static json_t *rows_array(const struct store_rows *rows)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < rows->nrows; i++)
		if (json_array_append_new(a, row_object(rows, i)))
			json_decref(a), a = NULL;
	return a;
}

/* The first row of a one-row result (an aggregate), or null when it has none. */
static json_t *first_row(const struct store_rows *rows)
{
	return rows->nrows ? row_object(rows, 0) : json_null();
}

/* {"rank", key: label, member: list, "total": first row of total}; each list row given extra's member. */
static json_t *table_object(const struct store_table *t, const char *key, const char *label, const char *member,
			    const char *extra, json_t *(*value)(const char *name, int sel))
{
	json_t *list = rows_array(&t->list), *row;
	size_t i;

	json_array_foreach(list, i, row)
		if (json_object_set_new(row, extra, value(json_string_value(json_object_get(row, "name")), t->sel))) {
			json_decref(list);
			return NULL;
		}
	return list ? json_pack("{s:i, s:s, s:o, s:o}", "rank", t->rank, key, label, member, list, "total",
				first_row(&t->total)) : NULL;
}

/* an operator's group: the host-side collectives are "communication" */
static json_t *op_group(const char *name, int sel)
{
	(void)sel;
	return name && an_op_is_comm(name) ? json_string("communication") : json_null();
}

static json_t *kernel_class(const char *name, int kind)
{
	return json_string(an_kclass_names[an_kernel_class(name ? name : "", kind)]);
}

json_t *answer_ops(const struct store_table *t)
{
	json_t *o = table_object(t, "device", t->sel == AN_DEV_GPU ? "gpu" : "cpu", "ops", "group", op_group);

	if (o && (json_object_set_new(o, "source", json_string(t->source)) ||
		  json_object_set_new(o, "communication", first_row(&t->communication)) ||
		  (t->footers.ncols && json_object_set_new(o, "key_averages", first_row(&t->footers))))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *answer_kernels(const struct store_table *t)
{
	static const char *const kinds[] = { "kernel", "memcpy", "memset" };

	return table_object(t, "kind", kinds[t->sel], "kernels", "class", kernel_class);
}

json_t *answer_ranks(struct store_rank *v, size_t n)
{
	struct rank_steps *rs = tp_calloc(n + 1, sizeof(*rs));
	json_t *ranks = json_array(), *strag = json_array(), *o = NULL;
	int slowest;
	size_t i;

	if (!rs || !ranks || !strag)
		goto out;
	for (i = 0; i < n; i++)
		rs[i] = (struct rank_steps){ .dur_ns = v[i].dur_ns, .n = v[i].nsteps };
	if ((slowest = stats_ranks(rs, n)) == -2)
		goto out;
	for (i = 0; i < n; i++) {
		const struct rank_steps *k = &rs[i];
		json_t *devs = json_array();
		for (size_t d = 0; devs && d < v[i].ndevices; d++)
			if (json_array_append_new(devs, str(v[i].devices[d])))
				json_decref(devs), devs = NULL;
		if (json_array_append_new(ranks, json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "rank",
				v[i].rank, "steps", (json_int_t)k->n, "mean_ns", int_or_null(k->mean_ns), "median_ns",
				int_or_null(k->median_ns), "min_ns", int_or_null(k->min_ns), "max_ns", int_or_null(k->max_ns),
				"memory_devices", devs, "vs_median_pct", isnan(k->vs_median_pct) ? json_null()
				: json_real(k->vs_median_pct), "straggler", k->straggler)) ||
		    (k->straggler && json_array_append_new(strag, json_integer(v[i].rank))))
			goto out;
	}
	o = json_pack("{s:O, s:o, s:O, s:f}", "ranks", ranks, "slowest_rank",
		      slowest >= 0 ? json_integer(v[slowest].rank) : json_null(), "stragglers", strag,
		      "straggler_threshold_pct", STATS_STRAGGLER_PCT);
out:
	tp_free(rs);
	json_decref(ranks);
	json_decref(strag);
	return o;
}

json_t *answer_metrics(const char *run, const struct store_rows *rows)
{
	return json_pack("{s:s, s:o}", "run", run, "metrics", rows_array(rows));
}

json_t *answer_stacks(const char *run, int rank, const struct store_rows *rows)
{
	return json_pack("{s:s, s:i, s:o}", "run", run, "rank", rank, "frames", rows_array(rows));
}

static int64_t int_at(const struct store_rows *rows, size_t row, size_t col)
{
	return rows->v[row * rows->ncols + col].i;
}

/* The first of functions (by artifact, action) at or after (artifact, action). */
static size_t functions_of(const struct store_rows *f, int64_t artifact, int64_t action)
{
	size_t lo = 0, hi = f->nrows;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int64_t a = int_at(f, mid, 0), n = int_at(f, mid, 1);
		if (a < artifact || (a == artifact && n < action))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

json_t *answer_actions(const char *run, int rank, const struct store_rows *actions, const struct store_rows *functions)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < actions->nrows; i++) {
		const struct store_val *v = &actions->v[i * actions->ncols];
		int64_t artifact = v[0].i, n = v[6].i;
		json_t *a = json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "artifact", (json_int_t)artifact, "action",
				      v[1].type == SV_TEXT ? str(v[1].s) : json_null(), "calls", val_json(&v[2]), "mean_ns",
				      val_json(&v[3]), "total_ns", val_json(&v[4]), "share",
				      v[5].type == SV_INT ? json_real((double)v[5].i / 100.0) : json_null());
		json_t *fns = NULL;
		for (size_t k = functions_of(functions, artifact, n);
		     a && k < functions->nrows && int_at(functions, k, 0) == artifact && int_at(functions, k, 1) == n; k++) {
			const struct store_val *f = &functions->v[k * functions->ncols];
			if ((!fns && (!(fns = json_array()) || json_object_set_new(a, "functions", fns))) ||
			    json_array_append_new(fns, json_pack("{s:o, s:I, s:I, s:I, s:I}", "location", str(f[2].s),
					"ncalls", (json_int_t)f[3].i, "primitive_calls", (json_int_t)f[4].i,
					"tottime_ns", (json_int_t)f[5].i, "cumtime_ns", (json_int_t)f[6].i)))
				json_decref(a), a = NULL;
		}
		if (json_array_append_new(list, a))
			json_decref(list), list = NULL;
	}
	return list ? json_pack("{s:s, s:i, s:o}", "run", run, "rank", rank, "actions", list) : NULL;
}

/* ---- rlhf-canary metrics ---- */

static json_t *canary_ops_json(const struct canary_metrics *m, int d)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < m->nops[d]; i++)
		if (json_array_append_new(a, json_pack("{s:o, s:I, s:I}", "name", str(m->ops[d][i].name), "self_ns",
							(json_int_t)tp_round_i64(m->ops[d][i].self_ms * 1e6), "calls",
							(json_int_t)m->ops[d][i].count)))
			return json_decref(a), NULL;
	return a;
}

/* seconds (or ms with scale 1e6) as integer ns; null for NaN */
static json_t *ns_json(double v, double scale)
{
	return isnan(v) ? json_null() : json_integer(tp_round_i64(v * scale));
}

static json_t *real_json(double v)
{
	return isnan(v) ? json_null() : json_real(v);
}

static json_t *canary_profiler_json(const struct canary_metrics *m)
{
	const struct canary_perf *f = &m->perf;

	if (!f->has_profiler)
		return json_null();
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "trace_path", m->trace_path ? json_string(m->trace_path)
			 : json_null(), "cuda_time_total_ns", ns_json(f->cuda_total_ms, 1e6), "cpu_time_total_ns",
			 ns_json(f->cpu_total_ms, 1e6), "self_cuda_time_total_ns", ns_json(f->self_cuda_total_ms, 1e6),
			 "top_cuda_ops", canary_ops_json(m, CANARY_CUDA), "top_cpu_ops", canary_ops_json(m, CANARY_CPU));
}

static json_t *canary_step_json(const struct canary_perf *f)
{
	json_t *o = json_pack("{s:I}", "count", (json_int_t)f->steps);
	char key[16];

	for (int i = 0; o && i < CANARY_NSTAT; i++) {
		snprintf(key, sizeof(key), "%s_ns", canary_stat_names[i]);
		if (json_object_set_new(o, key, ns_json(f->step_s[i], 1e9)))
			return json_decref(o), NULL;
	}
	return o;
}

/* A stored object member (env, config): the JSON text as kept, null when none. */
static json_t *kept_json(const char *text)
{
	json_t *j = text ? json_loads(text, 0, NULL) : NULL;

	return j ? j : json_null();
}

json_t *answer_canary(const char *run, int rank, int64_t artifact, const struct canary_metrics *m)
{
	return json_pack("{s:s, s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o,"
			 " s:{s:o, s:o, s:o, s:o}, s:o}",
			 "run", run, "rank", rank, "artifact", (json_int_t)artifact, "run_id", str(m->run_id),
			 "timestamp", str(m->timestamp), "status", str(m->status), "duration_ns", ns_json(m->duration_s, 1e9),
			 "env", kept_json(m->env_json), "config", kept_json(m->config_json),
			 "step_time", canary_step_json(&m->perf), "tokens_per_s", real_json(m->perf.tokens_per_s),
			 "max_mem_bytes", (json_int_t)tp_round_i64(m->perf.max_mem_mb * 1048576.0),
			 "gpu_utilization_pct", real_json(m->perf.gpu_util_pct),
			 "dataloader_wait_pct", real_json(m->perf.dataloader_wait_pct),
			 "stability", "nan_steps", int_or_null(m->nan_steps < 0 ? -1 : m->nan_steps),
			 "inf_steps", int_or_null(m->inf_steps < 0 ? -1 : m->inf_steps),
			 "final_loss", real_json(m->final_loss),
			 "loss_diverged", m->loss_diverged < 0 ? json_null() : json_boolean(m->loss_diverged),
			 "profiler", canary_profiler_json(m));
}

/* ---- nvidia-smi logs ---- */

/* Column c of row i as a number (values were stored as REAL; NaN for null). */
static double real_at(const struct store_rows *rows, size_t i, size_t c)
{
	const struct store_val *x = &rows->v[i * rows->ncols + c];

	return x->type == SV_REAL ? x->r : x->type == SV_INT ? (double)x->i : NAN;
}

/* The samples' column from row i on (same GPU and name): {"name", "unit", "t_ns", "values", "mean", "min", "max"}. */
static json_t *gpu_column(const struct store_rows *rows, size_t i, size_t *next)
{
	const struct store_val *row = &rows->v[i * rows->ncols];
	json_t *ts = json_array(), *vs = json_array(), *col;
	double sum = 0, mn = 0, mx = 0;
	size_t nv = 0, j;

	col = json_pack("{s:o, s:o, s:o, s:o}", "name", val_json(&row[1]), "unit", val_json(&row[2]), "t_ns", ts,
			"values", vs);
	for (j = i; col && j < rows->nrows; j++) {
		const struct store_val *x = &rows->v[j * rows->ncols];
		if (x[0].i != row[0].i || strcmp(x[1].s ? x[1].s : "", row[1].s ? row[1].s : ""))
			break;
		double v = real_at(rows, j, 4);
		if (json_array_append_new(ts, val_json(&x[3])) || json_array_append_new(vs, isnan(v) ? json_null()
														       : json_real(v)))
			json_decref(col), col = NULL;
		if (isnan(v))
			continue;
		mn = nv && mn < v ? mn : v;
		mx = nv && mx > v ? mx : v;
		sum += v, nv++;
	}
	*next = j;
	if (row[5].i > (int64_t)(j - i)) {	/* one sample in a few of a long log: its figures are the store's */
		double m = real_at(rows, i, 6);
		nv = !isnan(m), sum = m, mn = real_at(rows, i, 7), mx = real_at(rows, i, 8);
	}
	if (col && (json_object_set_new(col, "mean", nv ? json_real(sum / (double)nv) : json_null()) ||
		    json_object_set_new(col, "min", nv ? json_real(mn) : json_null()) ||
		    json_object_set_new(col, "max", nv ? json_real(mx) : json_null())))
		json_decref(col), col = NULL;
	return col;
}

json_t *answer_gpu(const char *run, int rank, const struct store_rows *rows)
{
	json_t *gpus = json_array(), *gpu = NULL, *cols = NULL;
	int64_t cur = -1;
	size_t i = 0;

	while (gpus && i < rows->nrows) {
		int64_t g = rows->v[i * rows->ncols].i;
		if (!gpu || g != cur) {
			cols = json_array();
			gpu = json_pack("{s:I, s:o}", "index", (json_int_t)g, "columns", cols);
			if (json_array_append_new(gpus, gpu)) {
				json_decref(gpus);
				return NULL;
			}
			cur = g;
		}
		if (json_array_append_new(cols, gpu_column(rows, i, &i))) {
			json_decref(gpus);
			return NULL;
		}
	}
	return gpus ? json_pack("{s:s, s:i, s:o}", "run", run, "rank", rank, "gpus", gpus) : NULL;
}

/* ---- a snapshot's segments ---- */

/* the segment last appended to segs is closed with the bytes alive in it; -1 when out of memory */
static int seg_close(json_t *segs, int64_t alloc)
{
	return json_object_set_new(json_array_get(segs, json_array_size(segs) - 1), "allocated_bytes",
				   json_integer((json_int_t)alloc));
}

json_t *answer_segments(const struct store_segments *g)
{
	const struct store_rows *rows = &g->rows;
	json_t *snaps = json_array(), *segs = json_array(), *blocks = NULL;
	int64_t reserved = 0, allocated = 0, seg_alloc = 0;
	int bad = !snaps || !segs;
	size_t i;

	for (i = 0; !bad && i < g->nsnapshots; i++)
		bad = json_array_append_new(snaps, json_integer((json_int_t)g->snapshots[i]));
	for (i = 0; !bad && i < rows->nrows; i++) {
		const struct store_val *x = &rows->v[i * rows->ncols];
		if (!i || x[0].i != x[-(ptrdiff_t)rows->ncols].i) {
			if (i && seg_close(segs, seg_alloc))
				break;
			allocated = tp_sat_add(allocated, seg_alloc);
			seg_alloc = 0;
			reserved = tp_sat_add(reserved, x[2].i);
			blocks = json_array();
			bad = json_array_append_new(segs, json_pack("{s:o, s:o, s:o, s:o, s:o}", "address", val_json(&x[1]),
								    "total_size", val_json(&x[2]), "stream",
								    val_json(&x[3]), "segment_type", val_json(&x[4]),
								    "blocks", blocks));
		}
		if (bad || x[5].type == SV_NULL)
			continue;
		if (x[9].type != SV_NULL)	/* alive at dump time */
			seg_alloc = tp_sat_add(seg_alloc, x[6].i);
		bad = json_array_append_new(blocks, json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "offset", val_json(&x[5]),
							      "size", val_json(&x[6]), "requested_size",
							      val_json(&x[7]), "state", val_json(&x[8]), "category",
							      val_json(&x[9]), "op", val_json(&x[10])));
	}
	bad = bad || i < rows->nrows || (rows->nrows && seg_close(segs, seg_alloc));
	allocated = tp_sat_add(allocated, seg_alloc);
	if (bad) {
		json_decref(snaps);
		json_decref(segs);
		return NULL;
	}
	return json_pack("{s:i, s:s, s:I, s:o, s:I, s:I, s:o}", "rank", g->rank, "device", g->device, "artifact",
			 (json_int_t)g->artifact, "snapshots", snaps, "reserved_bytes", (json_int_t)reserved,
			 "allocated_bytes", (json_int_t)allocated, "segments", segs);
}

/* ---- memory timelines ---- */

/* A point as {"t_ns", "bytes", "by_category": {...}}; all null when row is NULL (the series has no peak). */
static json_t *point_json(const int64_t *row)
{
	json_t *by;

	if (!row)
		return json_pack("{s:n, s:n, s:n}", "t_ns", "bytes", "by_category");
	by = json_object();
	for (int c = 0; by && c < MEM_NCAT; c++)
		if (json_object_set_new(by, mem_cat_names[c], json_integer((json_int_t)row[1 + c])))
			json_decref(by), by = NULL;
	return by ? json_pack("{s:I, s:I, s:o}", "t_ns", (json_int_t)row[0], "bytes",
			      (json_int_t)row[MEM_COL_ALLOCATED], "by_category", by) : NULL;
}

/* {"bytes", "param_bytes", "note"}: how the memory from before recording began is reported (null: PyTorch's export) */
static json_t *baseline_json(const struct store_mem_series *s, int64_t base)
{
	const char *when = !strcmp(s->source, "trace") ? "before the trace began" : "before recording began";

	if (!strcmp(s->source, "pytorch"))
		return json_null();
	if (s->param_bytes)
		return json_pack("{s:I, s:I, s:s++}", "bytes", (json_int_t)base, "param_bytes",
				 (json_int_t)s->param_bytes, "note", "memory allocated ", when,
				 ": parameter holds the run's param_bytes, optimizer_state up to"
				 " twice that (Adam's two moments), unknown the rest");
	return json_pack("{s:I, s:n, s:s++}", "bytes", (json_int_t)base, "param_bytes", "note", "memory allocated ", when,
			 ", reported as parameter; PATCH the run's metadata with param_bytes to split it into"
			 " parameters and optimizer state");
}

static json_t *gaps_json(const int64_t *g, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_pack("{s:I, s:I}", "start_ns", (json_int_t)g[2 * i], "end_ns",
						       (json_int_t)g[2 * i + 1])))
			json_decref(a), a = NULL;
	return a;
}

json_t *answer_memory_head(const struct answer_mem *m)
{
	json_t *o = json_pack("{s:i, s:s, s:s, s:I, s:o, s:o, s:o}", "rank", m->s->rank, "source", m->s->source,
			      "device", m->s->device, "points_total", (json_int_t)m->total, "peak", point_json(m->peak),
			      "baseline", baseline_json(m->s, m->baseline), "gaps", gaps_json(m->gaps, m->ngaps));

	if (o && m->window_points >= 0 &&
	    json_object_set_new(o, "window_points", json_integer((json_int_t)m->window_points)))
		json_decref(o), o = NULL;
	return o;
}

json_t *answer_memory(const struct answer_mem *m, const int64_t (*row)[MEM_POINT_COLS], const uint8_t *reserved_null,
		      size_t n)
{
	json_t *arr[MEM_POINT_COLS] = { NULL }, *cats = json_object(), *o = NULL;
	int c, bad = !cats;

	for (c = 0; c < MEM_POINT_COLS; c++)
		bad |= !(arr[c] = json_array());
	for (size_t i = 0; !bad && i < n; i++)
		for (c = 0; !bad && c < MEM_POINT_COLS; c++)
			bad = json_array_append_new(arr[c], c == MEM_COL_RESERVED && reserved_null[i]
								    ? json_null() : json_integer((json_int_t)row[i][c]));
	for (c = 0; !bad && c < MEM_NCAT; c++) {
		bad = json_object_set_new(cats, mem_cat_names[c], arr[1 + c]);
		arr[1 + c] = NULL;
	}
	if (!bad)
		o = json_pack("{s:i, s:s, s:s, s:I, s:O, s:O, s:O, s:O, s:o, s:o, s:o}", "rank", m->s->rank, "source",
			      m->s->source, "device", m->s->device, "points_total", (json_int_t)m->total, "t_ns", arr[0],
			      "categories", cats, "allocated", arr[MEM_COL_ALLOCATED], "reserved", arr[MEM_COL_RESERVED],
			      "peak", point_json(m->peak), "baseline", baseline_json(m->s, m->baseline), "gaps",
			      gaps_json(m->gaps, m->ngaps));
	if (o && m->window_points >= 0 &&
	    json_object_set_new(o, "window_points", json_integer((json_int_t)m->window_points)))
		json_decref(o), o = NULL;
	for (c = 0; c < MEM_POINT_COLS; c++)
		json_decref(arr[c]);
	json_decref(cats);
	return o;
}

json_t *answer_memory_peak(const struct store_mem_series *s, const int64_t *peak, const struct store_rows *groups)
{
	json_t *a = json_array();
	int bad = !a;

	for (size_t i = 0; !bad && i < groups->nrows; i++) {
		const struct store_val *x = &groups->v[i * groups->ncols];
		int64_t bytes = x[2].i;
		if (x[1].type == SV_NULL && s->param_bytes) {
			/* what was there before recording began, split as the timeline splits it
			 * (mem_split_param): parameters, optimizer state, the rest unknown */
			int64_t row[MEM_POINT_COLS] = { 0 };
			static const int cats[] = { CAT_PARAMETER, CAT_OPTIMIZER_STATE, CAT_UNKNOWN };
			row[1 + CAT_PARAMETER] = bytes;
			mem_split_param(row, s->param_bytes);
			for (size_t k = 0; !bad && k < sizeof(cats) / sizeof(cats[0]); k++)
				bad = row[1 + cats[k]] > 0 &&
				      json_array_append_new(a, json_pack("{s:s, s:n, s:I, s:n}", "category",
									 mem_cat_names[cats[k]], "op", "bytes",
									 (json_int_t)row[1 + cats[k]], "count"));
			continue;
		}
		bad = json_array_append_new(a, json_pack("{s:o, s:o, s:o, s:o}", "category", val_json(&x[0]), "op",
							 val_json(&x[1]), "bytes", val_json(&x[2]), "count",
							 val_json(&x[3])));
	}
	/* an export: the categories alone */
	for (int c = 0; !bad && !groups->nrows && c < MEM_NCAT; c++)
		bad = peak[1 + c] > 0 && json_array_append_new(a, json_pack("{s:s, s:n, s:I, s:n}", "category",
									 mem_cat_names[c], "op", "bytes",
									 (json_int_t)peak[1 + c], "count"));
	if (bad) {
		json_decref(a);
		return NULL;
	}
	return json_pack("{s:i, s:s, s:s, s:I, s:I, s:o}", "rank", s->rank, "source", s->source, "device", s->device,
			 "t_ns", (json_int_t)peak[0], "bytes", (json_int_t)peak[MEM_COL_ALLOCATED], "groups", a);
}

/* ---- CSV: a table member of an answer, its rows flattened ("key.sub" for nested objects) ---- */

struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const char *s, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *np = tp_realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
}

static void put_s(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/*
 * A text field a spreadsheet would run as a formula (OWASP's CSV injection
 * rule: it starts with = + - @, a tab or a carriage return): an operator named
 * "=HYPERLINK(...)" is written as the text '=HYPERLINK(...), quoted.
 */
static int csv_formula(const char *s)
{
	return s[0] && strchr("=+-@\t\r", s[0]) != NULL;
}

/* RFC 4180: quote when needed, doubling quotes; formulas neutralised */
static void put_field(struct buf *b, const char *s)
{
	int formula = csv_formula(s);

	if (!formula && !strpbrk(s, ",\"\r\n")) {
		put_s(b, s);
		return;
	}
	put_s(b, formula ? "\"'" : "\"");
	for (const char *q; (q = strchr(s, '"')); s = q + 1) {
		put(b, s, (size_t)(q - s));
		put_s(b, "\"\"");
	}
	put_s(b, s);
	put_s(b, "\"");
}

static void put_value(struct buf *b, const json_t *v)
{
	char num[64];

	switch (json_typeof(v)) {
	case JSON_STRING: put_field(b, json_string_value(v)); break;
	case JSON_INTEGER: snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v)); put_s(b, num); break;
	case JSON_REAL: snprintf(num, sizeof(num), "%.12g", json_real_value(v)); put_s(b, num); break;
	case JSON_TRUE: put_s(b, "true"); break;
	case JSON_FALSE: put_s(b, "false"); break;
	default: break;		/* null: empty */
	}
}

/*
 * The columns of each CSV table, in order: the header is written from these,
 * so an empty table is still a header, and each row is read by them, so the
 * two always agree ("a.b" is member b of object a). A test checks them
 * against the JSON rows.
 */
static const char *const steps_cols[] = { "step", "start_ns", "dur_ns", "cpu_dur_ns", "comm_overlap_ns",
	"incomplete", "whole_trace", "breakdown_ns.kernel", "breakdown_ns.memcpy", "breakdown_ns.memset",
	"breakdown_ns.communication", "breakdown_ns.runtime", "breakdown_ns.dataloader", "breakdown_ns.cpu",
	"breakdown_ns.idle", "gpu_utilization_pct", "note", NULL };
static const char *const ops_cols[] = { "name", "calls", "self_ns", "total_ns", "group", NULL };
static const char *const kernels_cols[] = { "name", "calls", "total_ns", "mean_ns", "max_ns", "min_ns",
	"blocks_per_sm", "achieved_occupancy_pct", "class", NULL };
static const char *const ranks_cols[] = { "rank", "steps", "mean_ns", "median_ns", "min_ns", "max_ns",
	"vs_median_pct", "straggler", NULL };

struct csv_table {
	const char *member;		/* the array of rows in the JSON body */
	const char *const *cols;
	int ranked;			/* a first column "rank", from the body's "rank" */
};

static const struct csv_table csv_tables[] = {
	{ "steps", steps_cols, 1 },
	{ "ops", ops_cols, 1 },
	{ "kernels", kernels_cols, 1 },
	{ "ranks", ranks_cols, 0 },
};

/* column col ("a" or "a.b") of row o; NULL when absent */
static const json_t *column(const json_t *o, const char *col)
{
	const char *dot = strchr(col, '.');
	char head[64];

	if (!dot)
		return json_object_get(o, col);
	snprintf(head, sizeof(head), "%.*s", (int)(dot - col), col);
	return json_object_get(json_object_get(o, head), dot + 1);
}

static const struct csv_table *csv_table_of(const char *member)
{
	for (size_t k = 0; k < sizeof(csv_tables) / sizeof(csv_tables[0]); k++)
		if (!strcmp(csv_tables[k].member, member))
			return &csv_tables[k];
	return NULL;
}

int answer_csv_table(const char *member)
{
	return csv_table_of(member) != NULL;
}

char *answer_csv(const json_t *body, const char *member, size_t *len)
{
	const struct csv_table *t = csv_table_of(member);
	struct buf b = { 0 };
	const json_t *rows, *rank;
	size_t i, k;

	put_s(&b, t->ranked ? "rank" : "");
	for (k = 0; t->cols[k]; k++) {
		put_s(&b, k || t->ranked ? "," : "");
		put_field(&b, t->cols[k]);
	}
	put_s(&b, "\r\n");
	rows = json_object_get(body, member);
	rank = json_object_get(body, "rank");
	for (i = 0; i < json_array_size(rows); i++) {
		const json_t *row = json_array_get(rows, i);
		if (t->ranked)
			put_value(&b, rank);
		for (k = 0; t->cols[k]; k++) {
			put_s(&b, k || t->ranked ? "," : "");
			put_value(&b, column(row, t->cols[k]));
		}
		put_s(&b, "\r\n");
	}
	if (b.oom) {
		tp_free(b.p);
		return NULL;
	}
	*len = b.n;
	return b.p;
}
