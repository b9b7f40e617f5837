/*
 * compare.c: two runs side by side (see compare.h).
 *
 * The significance test is Welch's t-test over the per-step durations, not
 * Mann-Whitney U. A profiled run holds few steps (the fixtures: 2 to 6;
 * torch.profiler schedules usually record 3 to 5), and the exact U test's
 * smallest two-sided p-value is 2 / C(n1 + n2, n1): 0.33 with two steps a
 * run, 0.1 with three, so below four steps a run it can never report a real
 * change, however large. Welch's test works from two steps a run, and does
 * not assume the two runs are equally noisy (a change often changes the
 * noise too). Its cost is assuming roughly normal step times, so the usual
 * outlier is left out of it: the first step of each profiling window (a run
 * of consecutive step numbers) that holds COMPARE_WINDOW_MIN complete steps
 * or more. The profiler's schedule records no warm-up step, but the first
 * active one runs behind the warm-up steps' GPU work: on an H200
 * (tests/fixtures/gpu) it lasted 78 and 81 ms against 23.8 ms for each step
 * after it, and with it in, Welch's test over 5 steps called a loop made
 * twice as slow by its data loader no change (p = 0.22). A step now starts
 * when that queued work ends (analysis.c's queued(), torch-tb-profiler's
 * rule), which made those 23.8 ms too; the first step stays out because it
 * is still the usual outlier where nothing was queued: kineto_resnet50's is
 * its slowest (188 ms, the others 166 to 182), hta_ns_resolution's 101 ms
 * against 95.4 to 95.7. Means, medians and the test are over the steps
 * kept ("base_steps", "target_steps"; "base_left_out", "target_left_out");
 * operators and kernels stay per complete step.
 * When both runs have the same step times the difference is 0, t = 0 and
 * p = 1 exactly; with fewer than 2 steps in a run p is null and the answer
 * says why.
 *
 * Verdict: "regression" when step time rose by more than threshold_pct with
 * p < alpha, or peak allocated memory rose by more than threshold_pct (a
 * peak is one deterministic figure per run: there is no noise to test);
 * "improvement" when either fell that way and neither rose; else
 * "no_change". Throughput is reported with a reason but does not decide:
 * with the same work per step it is step time again, and with different
 * work per step the runs are different experiments, which the reason says.
 *
 * "not_comparable", before all of these, when the two runs cannot answer the
 * question (comparability(), with its reasons first): one run has steps and
 * the other none; neither has steps and they do not both have memory (no
 * figure could decide); they share no operator or kernel name; or their
 * operator sets say different models (under COMPARE_MIN_SHARED_OPS of the
 * names are shared: the fixtures' same-model pairs share 73 to 100 %, the
 * different models at most 30 %).
 *
 * Operators (host self time) and kernels (GPU time, with memcpy and memset)
 * are compared per step, so runs with different step counts compare
 * fairly: the work inside the complete steps (those the breakdown sums,
 * analysis/inside.c derives them) over their count, so that the kernels' times a
 * step add up to the breakdown's kernel time a step ("in_steps": true;
 * "totals": every row summed). When either run has no steps, per trace, and "per_note" says why. A run
 * without a trace has its operators from its key_averages tables ("ops_source").
 *
 * Memory: each run's peak allocated, by category, and by allocation site
 * (what /memory/peak groups: a trace's operator, a snapshot's user frame),
 * the sites of both peaks folded by (category, site), those that changed
 * listed largest change first (sites_json()).
 *
 * rlhf-canary metrics.json: what its profiler deep-dive notebook prints
 * for a baseline and a slow run (step time and tokens/s in %, memory in
 * its MB, which are MiB: KiB, MiB and GiB here as for traces), and Welch's test again, from the canary's own step count, mean and
 * standard deviation (it keeps no per-step times). When the runs have no
 * ProfilerStep spans to compare, these decide the verdict as the trace's
 * figures would: step time by the threshold and alpha, memory by the
 * threshold; the two runs are then comparable, though they hold no trace.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/compare.h"
#include "analysis/stats.h"
#include "tp.h"

static const char *const kind_names[] = { "kernel", "memcpy", "memset" };

void compare_run_release(struct compare_run *r)
{
	size_t i;

	if (!r)
		return;
	for (i = 0; i < r->nops; i++)
		tp_free(r->ops[i].name);
	for (i = 0; i < r->nkernels; i++)
		tp_free(r->kernels[i].name);
	for (i = 0; i < r->nmetrics; i++)
		tp_free(r->metrics[i].name);
	for (i = 0; i < r->nactions; i++)
		tp_free(r->actions[i].name);
	for (i = 0; i < r->nframes; i++)
		tp_free(r->frames[i].name);
	for (i = 0; i < r->nsites; i++)
		tp_free(r->sites[i].name);
	tp_free(r->sites);
	tp_free(r->actions);
	tp_free(r->frames);
	tp_free(r->ops);
	tp_free(r->kernels);
	tp_free(r->metrics);
	tp_free(r->dur_ns);
	tp_free(r->step_no);
	tp_free(r->run);
	memset(r, 0, sizeof(*r));
}

/* ---- numbers ---- */

static json_t *real_or_null(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *int_or_null(int have, double v)
{
	return have ? json_integer(tp_round_i64(v)) : json_null();
}

/* (b - a) / a in percent; NaN when a is 0 */
static double pct(double a, double b)
{
	return a != 0 ? (b - a) / fabs(a) * 100 : NAN;
}

/* A duration in words: "347.5 ms", "+12.0 us" (sign: with a + when positive). */
static void fmt_ns(char *out, size_t size, double ns, int sign)
{
	double a = fabs(ns);
	const char *s = sign && ns > 0 ? "+" : "";

	if (a >= 1e9)
		snprintf(out, size, "%s%.3f s", s, ns / 1e9);
	else if (a >= 1e6)
		snprintf(out, size, "%s%.1f ms", s, ns / 1e6);
	else if (a >= 1e3)
		snprintf(out, size, "%s%.1f us", s, ns / 1e3);
	else
		snprintf(out, size, "%s%.0f ns", s, ns);
}

static void fmt_bytes(char *out, size_t size, double b, int sign)
{
	double a = fabs(b);
	const char *s = sign && b > 0 ? "+" : "";

	if (a >= 1024.0 * 1024 * 1024)
		snprintf(out, size, "%s%.2f GiB", s, b / (1024.0 * 1024 * 1024));
	else if (a >= 1024.0 * 1024)
		snprintf(out, size, "%s%.1f MiB", s, b / (1024.0 * 1024));
	else if (a >= 1024)
		snprintf(out, size, "%s%.1f KiB", s, b / 1024);
	else
		snprintf(out, size, "%s%.0f B", s, b);
}

/*
 * A long name shortened for a sentence, keeping the function: past 60
 * characters, without a leading "void " and "(anonymous namespace)::", its
 * template arguments or parameters as "<...>" or "(...)", and a qualified
 * name still too long without its first namespaces ("...native::foo<...>"),
 * a name without arguments cut in its middle.
 * "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, ...>(...)"
 * reads "...native::distribution_elementwise_grid_stride_kernel<...>".
 */
static void fmt_name(char *out, size_t size, const char *name)
{
	static const char anon[] = "(anonymous namespace)::";
	char head[256];
	size_t n = 0, k;
	const char *p = name;

	if (strlen(name) <= 60) {
		snprintf(out, size, "%s", name);
		return;
	}
	if (!strncmp(p, "void ", 5))
		p += 5;
	for (;;) {
		if (!strncmp(p, anon, sizeof(anon) - 1)) {
			p += sizeof(anon) - 1;
			continue;
		}
		if (!*p || *p == '<' || *p == '(' || n == sizeof(head) - 1)
			break;
		head[n++] = *p++;
	}
	head[n] = 0;
	if (!*p && n > 60) {	/* no arguments (sm80_xmma_gemm_..._cublas): its start and its end */
		snprintf(out, size, "%.28s...%s", head, head + n - 28);
		return;
	}
	/* the fewest leading namespaces left out for the rest to fit in 52 characters; a function's own
	 * name longer than that keeps its last 49 */
	for (k = 0; n - k > 52;) {
		const char *c = strstr(head + k, "::");
		if (!c) {
			k = n - 49;
			break;
		}
		k = (size_t)(c - head) + 2;
	}
	snprintf(out, size, "%s%.52s%s", k ? "..." : "", head + k, *p == '<' ? "<...>" : *p == '(' ? "(...)" : "");
}

static int add_reason(json_t *reasons, const char *text)
{
	return json_array_append_new(reasons, json_string(text));
}

/* ---- step time ---- */

struct time_cmp {
	int64_t *ta, *tb;		/* the durations tested (tested_steps()) */
	struct stats_sample a, b;
	struct stats_welch w;
	int have, tested;		/* both runs have steps; the test could run */
	double delta_pct;
	int dir;			/* +1 slower beyond the threshold and significant, -1 faster, 0 */
};

static json_t *step_time_json(const struct time_cmp *tc, const struct compare_run *base,
			      const struct compare_run *target, double alpha)
{
	const char *note = NULL;

	if (!base->nsteps || !target->nsteps)
		note = "a run without ProfilerStep spans: step time not compared";
	else if (!tc->tested)
		note = "a run with a single step: no step-to-step noise to test against, p-value undefined";
	else if (isnan(tc->w.t))
		note = "every step of both runs lasts the same: no noise, p is 1 when the means are equal, else 0";
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:o, s:o, s:s, s:o, s:o, s:b, s:o}",
			 "base_ns", int_or_null(tc->a.n > 0, tc->a.mean),
			 "target_ns", int_or_null(tc->b.n > 0, tc->b.mean),
			 "delta_ns", int_or_null(tc->have, tc->b.mean - tc->a.mean),
			 "delta_pct", real_or_null(tc->have ? tc->delta_pct : NAN),
			 "p_value", real_or_null(tc->tested ? tc->w.p : NAN),
			 "base_median_ns", int_or_null(tc->a.n > 0, (double)tc->a.median),
			 "target_median_ns", int_or_null(tc->b.n > 0, (double)tc->b.median),
			 "base_steps", (json_int_t)tc->a.n, "target_steps", (json_int_t)tc->b.n,
			 "base_left_out", (json_int_t)(base->nsteps - tc->a.n),
			 "target_left_out", (json_int_t)(target->nsteps - tc->b.n),
			 "base_stddev_ns", real_or_null(tc->a.n > 1 ? sqrt(tc->a.var) : NAN),
			 "target_stddev_ns", real_or_null(tc->b.n > 1 ? sqrt(tc->b.var) : NAN),
			 "test", "welch_t", "t", real_or_null(tc->tested ? tc->w.t : NAN),
			 "df", real_or_null(tc->tested ? tc->w.df : NAN),
			 "significant", tc->tested && tc->w.p < alpha, "note", note ? json_string(note) : json_null());
}

/*
 * The durations the step time test runs on (a copy, in out, which it then
 * sorts): r's complete steps less the first of each window of consecutive
 * step numbers that holds COMPARE_WINDOW_MIN of them or more (see the top);
 * all of them when their numbers are not known.
 */
static size_t tested_steps(const struct compare_run *r, int64_t *out)
{
	size_t i, k, n = 0;

	if (!r->nsteps)		/* dur_ns may be NULL */
		return 0;
	if (!r->step_no) {
		memcpy(out, r->dur_ns, r->nsteps * sizeof(*out));
		return r->nsteps;
	}
	for (i = 0; i < r->nsteps; i = k) {
		for (k = i + 1; k < r->nsteps && r->step_no[k] == r->step_no[k - 1] + 1; k++)
			;
		/* steps i..k are one window */
		size_t from = k - i >= COMPARE_WINDOW_MIN ? i + 1 : i;
		memcpy(out + n, r->dur_ns + from, (k - from) * sizeof(*out));
		n += k - from;
	}
	return n;
}

/* ---- operators and kernels ---- */

struct row {
	const struct compare_item *a, *b;	/* NULL: not in that run */
	double a_ns, b_ns, a_calls, b_calls;	/* per step (or per trace) */
	long long delta_ns;
};

static int cmp_item(const struct compare_item *x, const struct compare_item *y)
{
	return x->kind != y->kind ? (x->kind < y->kind ? -1 : 1) : strcmp(x->name, y->name);
}

static int cmp_item_q(const void *x, const void *y)
{
	return cmp_item(x, y);
}

static const char *row_name(const struct row *r)
{
	return (r->a ? r->a : r->b)->name;
}

/* Largest absolute change first, then the larger change in calls, then by name. */
static int cmp_row(const void *x, const void *y)
{
	const struct row *p = x, *q = y;
	long long dp = llabs(p->delta_ns), dq = llabs(q->delta_ns);
	double cp = fabs(p->b_calls - p->a_calls), cq = fabs(q->b_calls - q->a_calls);

	if (dp != dq)
		return dp > dq ? -1 : 1;
	if (cp != cq)
		return cp > cq ? -1 : 1;
	return strcmp(row_name(p), row_name(q));
}

/* Join two name-sorted lists into rows (malloc'd), per-run figures divided by da and db. */
static struct row *join(struct compare_item *a, size_t na, struct compare_item *b, size_t nb, double da, double db,
			size_t *n_out)
{
	struct row *rows = tp_calloc(na + nb + 1, sizeof(*rows));
	size_t i = 0, j = 0, n = 0;

	if (!rows)
		return NULL;
	if (na)		/* a run without operators has a NULL list */
		qsort(a, na, sizeof(*a), cmp_item_q);
	if (nb)
		qsort(b, nb, sizeof(*b), cmp_item_q);
	while (i < na || j < nb) {
		int c = i == na ? 1 : j == nb ? -1 : cmp_item(&a[i], &b[j]);
		struct row *r = &rows[n++];
		if (c <= 0)
			r->a = &a[i++];
		if (c >= 0)
			r->b = &b[j++];
		if (r->a) {
			r->a_ns = (double)llround((double)r->a->ns / da);
			r->a_calls = (double)r->a->calls / da;
		}
		if (r->b) {
			r->b_ns = (double)llround((double)r->b->ns / db);
			r->b_calls = (double)r->b->calls / db;
		}
		r->delta_ns = tp_round_i64(r->b_ns - r->a_ns);
		if (r->delta_ns == INT64_MIN)	/* llabs (cmp_row) cannot take it */
			r->delta_ns = -INT64_MAX;
	}
	qsort(rows, n, sizeof(*rows), cmp_row);
	*n_out = n;
	return rows;
}

static const char *row_status(const struct row *r)
{
	if (!r->a)
		return "added";
	if (!r->b)
		return "removed";
	/* per step, as the rows show them: runs of different step counts compare fairly */
	return llround(r->a_calls * 1000) == llround(r->b_calls * 1000) && r->a_ns == r->b_ns ? "unchanged" : "changed";
}

static json_t *row_json(const struct row *r, int kernels)
{
	return json_pack("{s:s, s:s*, s:s, s:o, s:o, s:o, s:o, s:I, s:f, s:o}", "name", row_name(r), "kind",
			 kernels ? kind_names[(r->a ? r->a : r->b)->kind] : NULL, "status", row_status(r),
			 "base_ns_per_step", int_or_null(r->a != NULL, r->a_ns),
			 "target_ns_per_step", int_or_null(r->b != NULL, r->b_ns),
			 "base_calls_per_step", r->a ? json_real(r->a_calls) : json_null(),
			 "target_calls_per_step", r->b ? json_real(r->b_calls) : json_null(),
			 "delta_ns_per_step", (json_int_t)r->delta_ns, "delta_calls_per_step", r->b_calls - r->a_calls,
			 "delta_pct", real_or_null(r->a ? pct(r->a_ns, r->b_ns) : NAN));
}

struct table {
	struct row *rows;
	size_t n;
	size_t added, removed, changed;
};

/* "3 operators only in target: a, b, c" (at most 5 names; "1 operator" for one) */
static int only_reason(json_t *reasons, const struct table *t, const char *what, int added)
{
	char text[1024], name[80];
	size_t n = added ? t->added : t->removed, shown = 0, i;
	int len;

	if (!n)
		return 0;
	/* "1 kernel", "2 kernels" */
	len = snprintf(text, sizeof(text), "%zu %.*s only in %s:", n, (int)strlen(what) - (n == 1), what,
		       added ? "target" : "base");
	for (i = 0; i < t->n && shown < 5; i++) {
		if (added ? t->rows[i].a != NULL : t->rows[i].b != NULL)
			continue;
		fmt_name(name, sizeof(name), row_name(&t->rows[i]));
		len += snprintf(text + len, sizeof(text) - (size_t)len, "%s %s", shown ? "," : "", name);
		shown++;
	}
	if (n > shown)
		snprintf(text + len, sizeof(text) - (size_t)len, " and %zu more", n - shown);
	return add_reason(reasons, text);
}

/* The list (at most limit rows) and its counts; the table is kept for the reasons. */
static json_t *table_json(struct table *t, struct compare_item *a, size_t na, struct compare_item *b, size_t nb,
			  double da, double db, long limit, int kernels, json_t **counts)
{
	json_t *list = json_array();
	size_t i;

	*counts = NULL;
	if (!list || !(t->rows = join(a, na, b, nb, da, db, &t->n)))
		return json_decref(list), NULL;
	for (i = 0; i < t->n; i++) {
		const char *s = row_status(&t->rows[i]);
		t->added += !strcmp(s, "added");
		t->removed += !strcmp(s, "removed");
		t->changed += !strcmp(s, "changed");
		if ((long)i < limit && json_array_append_new(list, row_json(&t->rows[i], kernels)))
			return json_decref(list), NULL;
	}
	*counts = json_pack("{s:I, s:I, s:I, s:I, s:I}", "total", (json_int_t)t->n, "changed", (json_int_t)t->changed,
			    "unchanged", (json_int_t)(t->n - t->changed - t->added - t->removed),
			    "added", (json_int_t)t->added, "removed", (json_int_t)t->removed);
	if (!*counts)
		return json_decref(list), NULL;
	return list;
}

/* The row of t that moved most in direction dir (+1 up, -1 down), among kind (-1: any); NULL when none. */
static const struct row *top_row(const struct table *t, int dir, int kind)
{
	size_t i;

	for (i = 0; i < t->n; i++)	/* sorted by absolute change */
		if ((kind < 0 || (t->rows[i].a ? t->rows[i].a : t->rows[i].b)->kind == kind) &&
		    (dir > 0 ? t->rows[i].delta_ns > 0 : t->rows[i].delta_ns < 0))
			return &t->rows[i];
	return NULL;
}

/* ---- comparability ---- */

/* Operator sets sharing fewer of their names (|A and B| / |A or B|) are different models. */
#define COMPARE_MIN_SHARED_OPS 0.5

static size_t shared_rows(const struct table *t)
{
	size_t i, n = 0;

	for (i = 0; i < t->n; i++)
		n += t->rows[i].a && t->rows[i].b;
	return n;
}

/*
 * Whether the runs can be compared at all: 0 when they can; 1 when not, with
 * the reasons in out (new strings); -1 out of memory. Separate from the
 * figures so that none of them is read as a verdict on runs that cannot have one.
 */
static int comparability(const struct compare_run *a, const struct compare_run *b, const struct table *ops,
			 const struct table *kernels, json_t *out)
{
	char text[512];
	size_t shared_ops = shared_rows(ops), shared = shared_ops + shared_rows(kernels);
	int n = 0;

	if (a->has_canary && b->has_canary) {
		/* the canary's step times and memory decide */
	} else if (!a->nsteps != !b->nsteps) {
		snprintf(text, sizeof(text), "not comparable: %s '%s' has no ProfilerStep spans and %s '%s' has %zu,"
			 " so step time and per-step figures cannot be set side by side", a->nsteps ? "target" : "base",
			 a->nsteps ? b->run : a->run, a->nsteps ? "base" : "target", a->nsteps ? a->run : b->run,
			 a->nsteps ? a->nsteps : b->nsteps);
		if (add_reason(out, text))
			return -1;
		n++;
	} else if (!a->nsteps && !(a->has_memory && b->has_memory)) {
		snprintf(text, sizeof(text), "not comparable: neither run has ProfilerStep spans and %s, so no figure"
			 " can decide", !a->has_memory && !b->has_memory ? "neither has memory data"
			 : "only one has memory data");
		if (add_reason(out, text))
			return -1;
		n++;
	}
	if ((a->nops || a->nkernels) && (b->nops || b->nkernels) && !shared) {
		if (add_reason(out, "not comparable: the runs share no operator or kernel name"))
			return -1;
		n++;
	} else if (a->nops && b->nops && shared_ops < COMPARE_MIN_SHARED_OPS * (double)ops->n) {
		snprintf(text, sizeof(text), "not comparable: different models by their operators: %zu of %zu operator"
			 " names are shared (%.0f%%, under %.0f%%)", shared_ops, ops->n,
			 100.0 * (double)shared_ops / (double)ops->n, 100 * COMPARE_MIN_SHARED_OPS);
		if (add_reason(out, text))
			return -1;
		n++;
	}
	return n > 0;
}

/* Runs whose operators come from key_averages tables: what grew most, in words. */
static int keyavg_reason(json_t *reasons, const struct compare_run *a, const struct compare_run *b,
			 const struct table *ops)
{
	const struct row *r = top_row(ops, 1, -1);
	char text[512], name[80], d[32];
	int len;

	if (!a->ops_source || !b->ops_source || strcmp(a->ops_source, "key_averages") ||
	    strcmp(b->ops_source, "key_averages"))
		return 0;
	len = snprintf(text, sizeof(text), "operators from key_averages tables, compared table to table (a table does"
		       " not say how many steps it covers)");
	if (r) {
		fmt_name(name, sizeof(name), row_name(r));
		fmt_ns(d, sizeof(d), (double)r->delta_ns, 1);
		snprintf(text + len, sizeof(text) - (size_t)len, ": the one that grew most, %s %s of self CPU time", name, d);
	}
	return add_reason(reasons, text);
}

/* ---- rlhf-canary metrics ---- */

struct canary_cmp {
	int have;			/* both runs have canary metrics */
	struct stats_sample a, b;	/* step times in ns, from count, mean and std */
	struct stats_welch w;
	int tested, significant;	/* the test could run; p < alpha */
	double step_pct, tok_pct, mem_pct;
	int step_dir, mem_dir;		/* +1 up past the threshold (and significant, for steps), -1 down, 0 */
};

static void canary_sample(const struct canary_perf *c, struct stats_sample *s)
{
	double sd = c->step_s[CANARY_STD] * 1e9;

	s->n = c->steps > 0 && !isnan(c->step_s[CANARY_MEAN]) ? (size_t)c->steps : 0;
	s->mean = c->step_s[CANARY_MEAN] * 1e9;
	s->var = isnan(sd) ? 0 : sd * sd;
	s->median = isnan(c->step_s[CANARY_MEDIAN]) ? 0 : tp_round_i64(c->step_s[CANARY_MEDIAN] * 1e9);
}

static void canary_compare(const struct compare_run *base, const struct compare_run *target,
			   const struct compare_opts *o, struct canary_cmp *c)
{
	const struct canary_perf *a = &base->canary, *b = &target->canary;

	memset(c, 0, sizeof(*c));
	if (!(c->have = base->has_canary && target->has_canary))
		return;
	canary_sample(a, &c->a);
	canary_sample(b, &c->b);
	c->tested = c->a.n && c->b.n && !isnan(a->step_s[CANARY_STD]) && !isnan(b->step_s[CANARY_STD]) &&
		    !stats_welch(&c->a, &c->b, &c->w);
	c->significant = c->tested && c->w.p < o->alpha;
	c->step_pct = c->a.n && c->b.n ? pct(c->a.mean, c->b.mean) : NAN;
	c->tok_pct = pct(a->tokens_per_s, b->tokens_per_s);
	c->mem_pct = pct(a->max_mem_mb, b->max_mem_mb);
	if (c->significant && isfinite(c->step_pct) && fabs(c->step_pct) > o->threshold_pct)
		c->step_dir = c->step_pct > 0 ? 1 : -1;
	if (isfinite(c->mem_pct) && fabs(c->mem_pct) > o->threshold_pct)
		c->mem_dir = c->mem_pct > 0 ? 1 : -1;
}

/* The notebook's three lines, as sentences. */
static int canary_reasons(json_t *reasons, const struct canary_cmp *c, const struct compare_run *base,
			  const struct compare_run *target)
{
	const struct canary_perf *a = &base->canary, *b = &target->canary;
	char text[320], p[32], d[32], x[32], y[32];

	if (c->tested)
		snprintf(p, sizeof(p), "p=%.2g", c->w.p);
	else
		snprintf(p, sizeof(p), "p undefined");
	if (isfinite(c->step_pct)) {
		snprintf(text, sizeof(text), "canary step time %+.1f%% (%.4f s -> %.4f s, %s, Welch's t-test from the"
			 " canary's count, mean and std over %zu and %zu steps)", c->step_pct, a->step_s[CANARY_MEAN],
			 b->step_s[CANARY_MEAN], p, c->a.n, c->b.n);
		if (add_reason(reasons, text))
			return -1;
	}
	if (isfinite(c->tok_pct)) {
		snprintf(text, sizeof(text), "canary tokens/s %+.1f%% (%.0f -> %.0f; the canary's upper bound, padding"
			 " counted)", c->tok_pct, a->tokens_per_s, b->tokens_per_s);
		if (add_reason(reasons, text))
			return -1;
	}
	/* the canary's "MB" are MiB: bytes in binary units, as the memory of a trace */
	fmt_bytes(d, sizeof(d), (b->max_mem_mb - a->max_mem_mb) * 1048576.0, 1);
	fmt_bytes(x, sizeof(x), a->max_mem_mb * 1048576.0, 0);
	fmt_bytes(y, sizeof(y), b->max_mem_mb * 1048576.0, 0);
	snprintf(text, sizeof(text), "canary peak memory %s (%s -> %s, max_memory_allocated)", d, x, y);
	return add_reason(reasons, text);
}

static json_t *ns_or_null(double s)
{
	return isnan(s) ? json_null() : json_integer(tp_round_i64(s * 1e9));
}

/* base, target and their change of one profiler total (ms in the file, ns here) */
static json_t *canary_total_json(int have_a, double a_ms, int have_b, double b_ms)
{
	a_ms = have_a ? a_ms : NAN;
	b_ms = have_b ? b_ms : NAN;
	return json_pack("{s:o, s:o, s:o}", "base_ns", ns_or_null(a_ms / 1e3), "target_ns", ns_or_null(b_ms / 1e3),
			 "delta_pct", real_or_null(pct(a_ms, b_ms)));
}

static json_t *canary_json(const struct canary_cmp *c, const struct compare_run *base,
			   const struct compare_run *target)
{
	const struct canary_perf *a = &base->canary, *b = &target->canary;
	double mb = 1024.0 * 1024.0;

	if (!c->have)
		return json_null();
	return json_pack("{s:{s:o, s:o, s:o, s:I, s:I, s:o, s:o, s:s, s:o, s:o, s:o, s:b}, s:{s:o, s:o, s:o},"
			 " s:{s:I, s:I, s:I, s:f, s:o}, s:{s:o, s:o}}",
			 "step_time", "base_ns", ns_or_null(a->step_s[CANARY_MEAN]), "target_ns",
			 ns_or_null(b->step_s[CANARY_MEAN]), "delta_pct", real_or_null(c->step_pct),
			 "base_steps", (json_int_t)a->steps, "target_steps", (json_int_t)b->steps,
			 "base_stddev_ns", ns_or_null(a->step_s[CANARY_STD]), "target_stddev_ns",
			 ns_or_null(b->step_s[CANARY_STD]), "test", "welch_t", "p_value",
			 real_or_null(c->tested ? c->w.p : NAN), "t", real_or_null(c->tested ? c->w.t : NAN), "df",
			 real_or_null(c->tested ? c->w.df : NAN), "significant", c->significant,
			 "tokens_per_s", "base", real_or_null(a->tokens_per_s), "target", real_or_null(b->tokens_per_s),
			 "delta_pct", real_or_null(c->tok_pct),
			 "max_mem", "base_bytes", (json_int_t)tp_round_i64(a->max_mem_mb * mb), "target_bytes",
			 (json_int_t)tp_round_i64(b->max_mem_mb * mb), "delta_bytes",
			 (json_int_t)(tp_round_i64(b->max_mem_mb * mb) - tp_round_i64(a->max_mem_mb * mb)),
			 "delta_mb", b->max_mem_mb - a->max_mem_mb, "delta_pct", real_or_null(c->mem_pct),
			 "profiler", "cuda_time_total",
			 canary_total_json(a->has_profiler, a->cuda_total_ms, b->has_profiler, b->cuda_total_ms),
			 "cpu_time_total",
			 canary_total_json(a->has_profiler, a->cpu_total_ms, b->has_profiler, b->cpu_total_ms));
}

/* ---- the answer ---- */

/* The sum of items' ns (of kind; -1: any) over d, rounded to whole ns, saturated (traces' times are untrusted). */
static json_int_t total_of(const struct compare_item *v, size_t n, int kind, double d)
{
	double ns = 0;

	for (size_t i = 0; i < n; i++)
		if (kind < 0 || v[i].kind == kind)
			ns += (double)v[i].ns;
	return (json_int_t)tp_round_i64(ns / d);
}

static json_t *total_json(json_int_t a, json_int_t b)
{
	return json_pack("{s:I, s:I, s:I}", "base_ns_per_step", a, "target_ns_per_step", b, "delta_ns_per_step",
			 (json_int_t)tp_sat_sub(b, a));
}

/*
 * Every operator's self time and every kernel's, memcpy's and memset's GPU time, summed over all
 * rows (not only those listed), per step as the rows are: inside the steps, the kernels' equal
 * the breakdown's kernel time where no two of them overlap, the copies' and memsets' likewise.
 */
static json_t *totals_json(const struct compare_run *a, const struct compare_run *b, double da, double db)
{
	json_t *o = json_pack("{s:o}", "ops", total_json(total_of(a->ops, a->nops, -1, da), total_of(b->ops, b->nops, -1, db)));

	for (int k = 0; o && k < 3; k++)
		if (json_object_set_new(o, kind_names[k], total_json(total_of(a->kernels, a->nkernels, k, da),
								      total_of(b->kernels, b->nkernels, k, db))))
			return json_decref(o), NULL;
	return o;
}

static json_t *breakdown_json(const struct compare_run *a, const struct compare_run *b, double da, double db)
{
	json_t *list = json_array();
	int c;

	for (c = 0; list && c < AN_NCOMP; c++) {
		double x = (double)llround((double)a->comp_ns[c] / da), y = (double)llround((double)b->comp_ns[c] / db);
		if (json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:I, s:o}", "component", an_comp_names[c],
							  "base_ns", (json_int_t)x, "target_ns", (json_int_t)y,
							  "delta_ns", (json_int_t)tp_round_i64(y - x), "delta_pct",
							  real_or_null(pct(x, y)))))
			return json_decref(list), NULL;
	}
	return list;
}

static const struct compare_metric *find_metric(const struct compare_run *r, const char *name)
{
	for (size_t i = 0; i < r->nmetrics; i++)
		if (!strcmp(r->metrics[i].name, name))
			return &r->metrics[i];
	return NULL;
}

/* Samples or tokens per second from each *_per_step metric both runs have, over the mean step time. */
static json_t *throughput_json(const struct compare_run *a, const struct compare_run *b, const struct time_cmp *tc,
			       json_t *reasons)
{
	static const char *const metrics[][2] = { { "tokens_per_step", "tokens/s" }, { "samples_per_step", "samples/s" } };
	json_t *list = json_array();
	char text[256];

	for (size_t i = 0; list && i < 2; i++) {
		const struct compare_metric *ma = find_metric(a, metrics[i][0]), *mb = find_metric(b, metrics[i][0]);
		if (!ma || !mb || !tc->have || tc->a.mean <= 0 || tc->b.mean <= 0)
			continue;
		double ra = ma->mean / (tc->a.mean / 1e9), rb = mb->mean / (tc->b.mean / 1e9), d = pct(ra, rb);
		if (json_array_append_new(list, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:o}", "metric", metrics[i][0],
							  "unit", metrics[i][1], "base_per_step", ma->mean,
							  "target_per_step", mb->mean, "base_per_s", ra, "target_per_s", rb,
							  "delta_pct", real_or_null(d))))
			return json_decref(list), NULL;
		int len = snprintf(text, sizeof(text), "throughput %+.1f%% (%.4g -> %.4g %s)", isfinite(d) ? d : 0, ra, rb,
				   metrics[i][1]);
		if (ma->mean != mb->mean)
			snprintf(text + len, sizeof(text) - (size_t)len, "; %s differs (%.4g -> %.4g): the runs do"
				 " different work per step", metrics[i][0], ma->mean, mb->mean);
		if (add_reason(reasons, text))
			return json_decref(list), NULL;
	}
	return list;
}

/* b - a of uploaded byte counts, saturated (and never INT64_MIN, which llabs cannot take) */
static int64_t delta(int64_t b, int64_t a)
{
	int64_t d = tp_sat_sub(b, a);

	return d == INT64_MIN ? -INT64_MAX : d;
}

static json_t *categories_json(const int64_t *a, const int64_t *b)
{
	json_t *o = json_object();

	for (int c = 0; o && c < MEM_NCAT; c++)
		if (json_object_set_new(o, mem_cat_names[c], json_integer(b ? delta(b[c], a[c]) : a[c])))
			return json_decref(o), NULL;
	return o;
}

/* An allocation site's bytes at each run's peak (a: base, b: target). */
struct site_delta {
	const char *name;
	int cat;
	int64_t a, b;
};

static int site_key_cmp(const void *x, const void *y)
{
	const struct site_delta *p = x, *q = y;

	return p->cat != q->cat ? (p->cat > q->cat) - (p->cat < q->cat) : strcmp(p->name, q->name);
}

/* the largest change first; equal ones by category, then site */
static int site_delta_cmp(const void *x, const void *y)
{
	const struct site_delta *p = x, *q = y;
	int64_t dp = llabs(delta(p->b, p->a)), dq = llabs(delta(q->b, q->a));

	return dp != dq ? (dp < dq) - (dp > dq) : site_key_cmp(x, y);
}

#define COMPARE_SITES_MAX 20	/* sites listed in by_site */

/*
 * The sites whose bytes at the peak changed, the largest change first (at
 * most COMPARE_SITES_MAX), as [{category, site, base_bytes, target_bytes,
 * delta_bytes}]; a site is a category and what allocated (a trace's op, a
 * snapshot's user frame; null when nothing names it). *top: the largest
 * change in direction dir (any when dir is 0), or none (name NULL).
 */
static json_t *sites_json(const struct compare_run *a, const struct compare_run *b, int dir, struct site_delta *top)
{
	size_t n = a->nsites + b->nsites, m = 0, i;
	struct site_delta *d = n ? tp_calloc(n, sizeof(*d)) : NULL;
	json_t *list = json_array();

	memset(top, 0, sizeof(*top));
	if (!list || (n && !d))
		return tp_free(d), json_decref(list), NULL;
	if (!n)
		return list;	/* neither peak records what allocated (qsort takes no NULL, even of 0) */
	for (i = 0; i < n; i++) {
		const struct compare_item *it = i < a->nsites ? &a->sites[i] : &b->sites[i - a->nsites];
		d[i] = (struct site_delta){ .name = it->name, .cat = it->kind };
		*(i < a->nsites ? &d[i].a : &d[i].b) = it->ns;
	}
	/* one row per (category, site): the same site of both runs folded */
	qsort(d, n, sizeof(*d), site_key_cmp);
	for (i = 0; i < n; i++) {
		if (m && !site_key_cmp(&d[m - 1], &d[i])) {
			d[m - 1].a = tp_sat_add(d[m - 1].a, d[i].a);
			d[m - 1].b = tp_sat_add(d[m - 1].b, d[i].b);
		} else {
			d[m++] = d[i];
		}
	}
	qsort(d, m, sizeof(*d), site_delta_cmp);
	for (i = 0; i < m && json_array_size(list) < COMPARE_SITES_MAX; i++) {
		int64_t dd = delta(d[i].b, d[i].a);
		if (!dd)
			break;	/* sorted by size of change: the rest did not change */
		if (!top->name && (!dir || (dd > 0) == (dir > 0)))
			*top = d[i];
		if (json_array_append_new(list, json_pack("{s:s, s:o, s:I, s:I, s:I}", "category", mem_cat_names[d[i].cat],
							  "site", *d[i].name ? json_string(d[i].name) : json_null(),
							  "base_bytes", (json_int_t)d[i].a, "target_bytes",
							  (json_int_t)d[i].b, "delta_bytes", (json_int_t)dd))) {
			list = (json_decref(list), NULL);
			break;
		}
	}
	if (top->name && !*top->name)
		top->name = NULL;	/* nothing names it: the category already said it */
	tp_free(d);
	return list;
}

/* The memory part, its direction in *dir and its reason; NULL (JSON null) when a run has no memory data. */
static json_t *memory_json(const struct compare_run *a, const struct compare_run *b, double thr, int *dir,
			   json_t *reasons, int *fail)
{
	char text[512], x[32], y[32], d[32];
	double p;
	int c, top = -1;

	*dir = 0;
	if (!a->has_memory || !b->has_memory) {
		snprintf(text, sizeof(text), "memory not compared: no memory data in %s",
			 !a->has_memory && !b->has_memory ? "either run" : !a->has_memory ? "base" : "target");
		*fail = add_reason(reasons, text);
		return json_null();
	}
	p = pct((double)a->peak_bytes, (double)b->peak_bytes);
	if (isfinite(p) && fabs(p) > thr)
		*dir = p > 0 ? 1 : -1;
	fmt_bytes(x, sizeof(x), (double)a->peak_bytes, 0);
	fmt_bytes(y, sizeof(y), (double)b->peak_bytes, 0);
	int len = snprintf(text, sizeof(text), "peak allocated memory %+.1f%% (%s -> %s)", isfinite(p) ? p : 0, x, y);
	for (c = 0; c < MEM_NCAT; c++) {
		int64_t dc = delta(b->peak_cat[c], a->peak_cat[c]);
		if (dc && (*dir ? (dc > 0) == (*dir > 0) : 1) &&
		    (top < 0 || llabs(dc) > llabs(delta(b->peak_cat[top], a->peak_cat[top]))))
			top = c;
	}
	struct site_delta site;
	json_t *sites = sites_json(a, b, *dir, &site);
	if (!sites)
		return *fail = -1, NULL;
	if (*dir && top >= 0) {
		fmt_bytes(d, sizeof(d), (double)delta(b->peak_cat[top], a->peak_cat[top]), 1);
		len += snprintf(text + len, sizeof(text) - (size_t)len, "; the largest contributor: %s %s",
				mem_cat_names[top], d);
		if (site.name && len > 0 && (size_t)len < sizeof(text)) {
			fmt_bytes(d, sizeof(d), (double)delta(site.b, site.a), 1);
			snprintf(text + len, sizeof(text) - (size_t)len, "; by site, %s at %.160s %s", mem_cat_names[site.cat],
				 site.name, d);
		}
	} else {
		snprintf(text + len, sizeof(text) - (size_t)len, ": within the %g%% threshold", thr);
	}
	if ((*fail = add_reason(reasons, text)))
		return json_decref(sites), NULL;
	return json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
			 "base_device", a->mem_device, "target_device", b->mem_device, "base_source", a->mem_source,
			 "target_source", b->mem_source, "base_peak_bytes", (json_int_t)a->peak_bytes,
			 "target_peak_bytes", (json_int_t)b->peak_bytes,
			 "delta_bytes", (json_int_t)delta(b->peak_bytes, a->peak_bytes), "delta_pct", real_or_null(p),
			 "base_reserved_bytes", a->reserved_bytes < 0 ? json_null() : json_integer(a->reserved_bytes),
			 "target_reserved_bytes", b->reserved_bytes < 0 ? json_null() : json_integer(b->reserved_bytes),
			 "reserved_delta_bytes", a->reserved_bytes < 0 || b->reserved_bytes < 0 ? json_null()
				 : json_integer(delta(b->reserved_bytes, a->reserved_bytes)),
			 "by_category", categories_json(a->peak_cat, b->peak_cat),
			 "base_by_category", categories_json(a->peak_cat, NULL),
			 "target_by_category", categories_json(b->peak_cat, NULL), "by_site", sites);
}

/* The step time sentence, naming the largest contributor when it changed. */
static int time_reason(json_t *reasons, const struct time_cmp *tc, const struct compare_run *a,
		       const struct compare_run *b, const struct table *ops, const struct table *kernels,
		       double da, double db, const struct compare_opts *o)
{
	char text[1024], x[32], y[32], d[32], name[80], p[32];
	int len, c, top = -1;

	if (!tc->have) {
		snprintf(text, sizeof(text), "step time not compared: no ProfilerStep spans in %s",
			 !a->nsteps && !b->nsteps ? "either run" : !a->nsteps ? "base" : "target");
		return add_reason(reasons, text);
	}
	fmt_ns(x, sizeof(x), tc->a.mean, 0);
	fmt_ns(y, sizeof(y), tc->b.mean, 0);
	if (tc->tested)
		snprintf(p, sizeof(p), "p=%.2g", tc->w.p);
	else
		snprintf(p, sizeof(p), "p undefined");
	len = snprintf(text, sizeof(text), "step time %+.1f%% (%s -> %s, %s, Welch's t-test over %zu and %zu steps%s)",
		       tc->delta_pct, x, y, p, tc->a.n, tc->b.n,
		       tc->a.n < a->nsteps || tc->b.n < b->nsteps ? ", each profiling window's first left out" : "");
	if (!tc->dir) {
		if (fabs(tc->delta_pct) <= o->threshold_pct)
			snprintf(text + len, sizeof(text) - (size_t)len, ": within the %g%% threshold", o->threshold_pct);
		else if (!tc->tested)
			snprintf(text + len, sizeof(text) - (size_t)len, ": a run has a single step, so the change"
				 " cannot be told from noise");
		else
			snprintf(text + len, sizeof(text) - (size_t)len, ": not significant at alpha %g", o->alpha);
		return add_reason(reasons, text);
	}
	for (c = 0; c < AN_NCOMP; c++) {
		double dc = (double)b->comp_ns[c] / db - (double)a->comp_ns[c] / da;
		if ((tc->dir > 0 ? dc > 0 : dc < 0) &&
		    (top < 0 || fabs(dc) > fabs((double)b->comp_ns[top] / db - (double)a->comp_ns[top] / da)))
			top = c;
	}
	if (top >= 0) {
		fmt_ns(d, sizeof(d), (double)b->comp_ns[top] / db - (double)a->comp_ns[top] / da, 1);
		len += snprintf(text + len, sizeof(text) - (size_t)len, "; the largest contributor: %s time %s per step",
				an_comp_names[top], d);
		/* led by the kernel (GPU parts) or operator (host parts) that moved most that way */
		const struct row *r = top <= AN_COMM ? top_row(kernels, tc->dir, top == AN_COMM ? AN_GPU_KERNEL : top)
			: top == AN_IDLE ? NULL : top_row(ops, tc->dir, -1);
		if (r) {
			fmt_name(name, sizeof(name), row_name(r));
			fmt_ns(d, sizeof(d), (double)r->delta_ns, 1);
			snprintf(text + len, sizeof(text) - (size_t)len, ", led by %s %s per step", name, d);
		}
	}
	return add_reason(reasons, text);
}

/*
 * Two runs' Lightning actions or stacks' frames joined by name, largest change of ns first
 * (whole reports, not per step: a report does not say its steps), at most limit rows; JSON
 * null when either run has none. ns_key and calls_key name the figures ("total_ns" and "calls"
 * for actions, "total" and "self" for frames); *top: the row that grew most, NULL when none did.
 */
static json_t *items_json(struct compare_item *a, size_t na, struct compare_item *b, size_t nb, long limit,
			  const char *ns_key, const char *calls_key, struct row **rows_out, const struct row **top)
{
	json_t *list;
	size_t n, i;
	char k[6][32];

	*rows_out = NULL;
	*top = NULL;
	if (!na || !nb)
		return json_null();
	if (!(list = json_array()) || !(*rows_out = join(a, na, b, nb, 1, 1, &n)))
		return json_decref(list), NULL;
	snprintf(k[0], sizeof(k[0]), "base_%s", ns_key);
	snprintf(k[1], sizeof(k[1]), "target_%s", ns_key);
	snprintf(k[2], sizeof(k[2]), "delta_%s", ns_key);
	snprintf(k[3], sizeof(k[3]), "base_%s", calls_key);
	snprintf(k[4], sizeof(k[4]), "target_%s", calls_key);
	snprintf(k[5], sizeof(k[5]), "delta_%s", calls_key);
	for (i = 0; i < n; i++) {
		const struct row *r = &(*rows_out)[i];
		if (r->a && r->b && r->delta_ns > 0 && (!*top || r->delta_ns > (*top)->delta_ns))
			*top = r;
		if ((long)i >= limit)
			continue;
		if (json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:I}", "name",
				row_name(r), "status", row_status(r), k[0], int_or_null(r->a != NULL, r->a_ns),
				k[1], int_or_null(r->b != NULL, r->b_ns), k[2], (json_int_t)r->delta_ns,
				"delta_pct", real_or_null(r->a ? pct(r->a_ns, r->b_ns) : NAN),
				k[3], int_or_null(r->a != NULL, r->a_calls), k[4], int_or_null(r->b != NULL, r->b_calls),
				k[5], (json_int_t)llround(r->b_calls - r->a_calls))))
			return json_decref(list), NULL;
	}
	return list;
}

/* "Lightning action X grew by 1.2 s (+40.0 %)" for the row that grew most */
static int grew_reason(json_t *reasons, const struct row *r, const char *what, int times)
{
	char text[512], name[80], d[32];

	if (!r)
		return 0;
	fmt_name(name, sizeof(name), row_name(r));
	if (times)
		fmt_ns(d, sizeof(d), (double)r->delta_ns, 1);
	else
		snprintf(d, sizeof(d), "+%lld", (long long)r->delta_ns);
	snprintf(text, sizeof(text), "%s %s grew most: %s (%+.1f %%)", what, name, d, pct(r->a_ns, r->b_ns));
	return add_reason(reasons, text);
}

/* Why operators and kernels are not the work inside the steps a step; JSON null when they are. */
static json_t *per_note(const struct compare_run *a, const struct compare_run *b)
{
	char text[256];

	if (!a->nsteps || !b->nsteps) {
		snprintf(text, sizeof(text), "%s ProfilerStep spans: operators and kernels are whole-trace totals,"
			 " not per step", !a->nsteps && !b->nsteps ? "neither run has" : !a->nsteps ? "base has no"
			 : "target has no");
		return json_string(text);
	}
	if (!a->in_steps || !b->in_steps)
		return json_string("operators and kernels are whole-trace totals over the step count: they count"
				   " work outside the steps too");
	return json_null();
}

json_t *compare_runs(struct compare_run *base, struct compare_run *target, const struct compare_opts *o)
{
	struct time_cmp tc = { 0 };
	struct table ops = { 0 }, kernels = { 0 };
	json_t *reasons = json_array(), *out = NULL, *ops_j = NULL, *kern_j = NULL, *ops_c = NULL, *kern_c = NULL;
	json_t *mem = NULL, *thr = NULL, *why = NULL, *can = NULL, *acts = NULL, *frames = NULL;
	struct row *act_rows = NULL, *frame_rows = NULL;
	const struct row *act_top, *frame_top;
	struct canary_cmp cc;
	int per_step = base->nsteps > 0 && target->nsteps > 0, mem_dir = 0, fail = 0, nc;
	double da = per_step ? (double)base->nsteps : 1, db = per_step ? (double)target->nsteps : 1;
	const char *verdict;

	if (!reasons)
		return NULL;
	if (!(tc.ta = tp_malloc((base->nsteps + 1) * sizeof(*tc.ta))) ||
	    !(tc.tb = tp_malloc((target->nsteps + 1) * sizeof(*tc.tb))))
		goto out;
	stats_summarise(tc.ta, tested_steps(base, tc.ta), &tc.a);
	stats_summarise(tc.tb, tested_steps(target, tc.tb), &tc.b);
	tc.have = per_step;
	tc.tested = per_step && !stats_welch(&tc.a, &tc.b, &tc.w);
	tc.delta_pct = per_step ? pct(tc.a.mean, tc.b.mean) : NAN;
	if (tc.tested && tc.w.p < o->alpha && isfinite(tc.delta_pct) && fabs(tc.delta_pct) > o->threshold_pct)
		tc.dir = tc.delta_pct > 0 ? 1 : -1;

	if (!(ops_j = table_json(&ops, base->ops, base->nops, target->ops, target->nops, da, db, o->limit, 0, &ops_c)) ||
	    !(kern_j = table_json(&kernels, base->kernels, base->nkernels, target->kernels, target->nkernels, da, db,
				  o->limit, 1, &kern_c)) ||
	    time_reason(reasons, &tc, base, target, &ops, &kernels, da, db, o))
		goto out;
	mem = memory_json(base, target, o->threshold_pct, &mem_dir, reasons, &fail);
	canary_compare(base, target, o, &cc);
	if (!mem || fail || !(thr = throughput_json(base, target, &tc, reasons)) ||
	    (cc.have && canary_reasons(reasons, &cc, base, target)) || !(can = canary_json(&cc, base, target)) ||
	    keyavg_reason(reasons, base, target, &ops) ||
	    only_reason(reasons, &ops, "operators", 1) || only_reason(reasons, &ops, "operators", 0) ||
	    only_reason(reasons, &kernels, "kernels", 1) || only_reason(reasons, &kernels, "kernels", 0))
		goto out;
	if (!(acts = items_json(base->actions, base->nactions, target->actions, target->nactions, o->limit, "total_ns",
				"calls", &act_rows, &act_top)) ||
	    !(frames = items_json(base->frames, base->nframes, target->frames, target->nframes, o->limit, "total", "self",
				  &frame_rows, &frame_top)) ||
	    grew_reason(reasons, act_top, "Lightning action", 1) || grew_reason(reasons, frame_top, "stack frame", 0))
		goto out;
	if (!(why = json_array()) || (nc = comparability(base, target, &ops, &kernels, why)) < 0 ||
	    json_array_extend(why, reasons))
		goto out;
	json_decref(reasons);
	reasons = why;
	why = NULL;
	/* without steps or memory data of their own, the canary's figures decide */
	if (!tc.have)
		tc.dir = cc.step_dir;
	if (!base->has_memory || !target->has_memory)
		mem_dir = cc.mem_dir;
	verdict = nc ? "not_comparable" : tc.dir > 0 || mem_dir > 0 ? "regression"
		: tc.dir < 0 || mem_dir < 0 ? "improvement" : "no_change";
	out = json_pack("{s:s, s:s, s:i, s:i, s:b, s:{s:f, s:f}, s:s, s:s, s:O, s:o, s:o, s:O, s:O, s:O, s:O, s:O, s:O,"
			" s:{s:s, s:s}, s:O}",
			"base", base->run, "target", target->run, "base_rank", base->rank, "target_rank", target->rank,
			"baseline", o->from_baseline, "thresholds", "threshold_pct", o->threshold_pct, "alpha", o->alpha,
			"per", per_step ? "step" : "trace", "verdict", verdict, "reasons", reasons,
			"step_time", step_time_json(&tc, base, target, o->alpha), "breakdown", breakdown_json(base, target, da, db),
			"throughput", thr, "memory", mem, "ops", ops_j, "ops_counts", ops_c, "kernels", kern_j,
			"kernels_counts", kern_c, "ops_source", "base", base->ops_source ? base->ops_source : "trace",
			"target", target->ops_source ? target->ops_source : "trace", "canary", can);
	if (out && (json_object_set(out, "actions", acts) || json_object_set(out, "frames", frames) ||
		    json_object_set_new(out, "in_steps", json_boolean(per_step && base->in_steps && target->in_steps)) ||
		    json_object_set_new(out, "per_note", per_note(base, target)) ||
		    json_object_set_new(out, "totals", totals_json(base, target, da, db)))) {
		json_decref(out);
		out = NULL;
	}
out:
	tp_free(tc.ta);
	tp_free(tc.tb);
	tp_free(ops.rows);
	tp_free(kernels.rows);
	json_decref(reasons);
	json_decref(why);
	json_decref(ops_j);
	json_decref(kern_j);
	json_decref(ops_c);
	json_decref(kern_c);
	json_decref(mem);
	json_decref(thr);
	json_decref(can);
	json_decref(acts);
	json_decref(frames);
	tp_free(act_rows);
	tp_free(frame_rows);
	return out;
}
