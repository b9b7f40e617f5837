/*
 * runline.c: a rank's steps across the whole run (runline.h).
 */
#include <stdlib.h>

#include "alloc.h"
#include "analysis/runline.h"

int runline_cycles(struct rl_step *s, size_t n)
{
	int c = 0;

	for (size_t i = 0; i < n; i++) {
		if (i) {
			const struct rl_step *p = &s[i - 1];
			int64_t gap = s[i].start_ns - (p->start_ns + p->dur_ns);
			if (s[i].step != p->step + 1 || gap > p->dur_ns)
				c++;
		}
		s[i].cycle = c;
	}
	return n ? c + 1 : 0;
}

size_t runline_pick(const struct rl_step *s, size_t n, size_t points, size_t *keep)
{
	size_t k = 0, b;

	if (!points || n <= points || points < 3) {
		for (b = 0; b < n && (!points || b < points || n <= points); b++)
			keep[k++] = b;
		return k;
	}
	keep[k++] = 0;
	/* points - 2 stretches of the steps in between */
	for (b = 0; b < points - 2; b++) {
		size_t lo = 1 + (n - 2) * b / (points - 2), hi = 1 + (n - 2) * (b + 1) / (points - 2), best = lo;
		if (lo >= hi)
			continue;
		for (size_t i = lo + 1; i < hi; i++)
			if (s[i].dur_ns > s[best].dur_ns)
				best = i;
		keep[k++] = best;
	}
	keep[k++] = n - 1;
	return k;
}

/* Per cycle: mean step time, its start, its first step, allocated at its last known step end. */
struct cyc {
	int64_t sum, steps, start, first, last_alloc;
};

static json_t *finding(const char *id, const char *title, json_t *evidence, const char *advice)
{
	if (!evidence)
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", id, "severity", "warning", "title", title, "evidence",
			 evidence, "advice", advice);
}

static int add(json_t *arr, json_t *f)
{
	return !f || json_array_append_new(arr, f);
}

static double mean(const struct cyc *c)
{
	return c->steps ? (double)c->sum / (double)c->steps : 0;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* The median of the first third of the cycles' mean step times (at least one cycle). */
static double start_mean(const struct cyc *c, int ncycles)
{
	double v[RL_START_MAX];
	int k = (ncycles + 2) / 3;

	if (k > RL_START_MAX)
		k = RL_START_MAX;
	for (int i = 0; i < k; i++)
		v[i] = mean(&c[i]);
	qsort(v, (size_t)k, sizeof(*v), cmp_double);
	return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

json_t *runline_findings(const struct rl_step *s, size_t n, int ncycles)
{
	json_t *out = json_array();
	struct cyc *c;
	int i;

	if (!out || ncycles < 3)
		return out;
	if (!(c = tp_calloc((size_t)ncycles, sizeof(*c)))) {
		json_decref(out);
		return NULL;
	}
	for (i = 0; i < ncycles; i++)
		c[i].last_alloc = -1;
	for (size_t k = 0; k < n; k++) {
		struct cyc *y = &c[s[k].cycle];
		if (!y->steps) {
			y->start = s[k].start_ns;
			y->first = s[k].step;
		}
		y->steps++;
		y->sum += s[k].dur_ns;
		if (s[k].alloc >= 0)
			y->last_alloc = s[k].alloc;
	}
	const struct cyc *a = &c[0], *z = &c[ncycles - 1];
	int bad = 0;

	/*
	 * step time drifting up: the last cycle slower than where the run started, and more
	 * cycles rising than falling. Where it started is the median of the first third of
	 * the cycles (of three, the first alone; at most RL_START_MAX): one odd first cycle is
	 * not where the run started. (On an H200, 10 cycles of 1 step each: the first 46.8 ms,
	 * the nine others 94.9 to 95.9, the backlog of GPU work the first active step of a
	 * cycle waits behind being shorter in the first; steps 19 to 99 did not drift.)
	 */
	int up = 0, down = 0;
	for (i = 1; i < ncycles; i++)
		up += mean(&c[i]) > mean(&c[i - 1]), down += mean(&c[i]) < mean(&c[i - 1]);
	double base = start_mean(c, ncycles);
	if (base > 0 && (mean(z) / base - 1) * 100 > RL_DRIFT_PCT && up > down)
		bad |= add(out, finding("cycle_drift", "Step time drifts up across the run's profiling cycles",
			json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "cycles", ncycles,
				  "first_cycle_step", (json_int_t)a->first, "first_cycle_start_ns", (json_int_t)a->start,
				  "first_cycle_mean_ns", (json_int_t)(mean(a) + 0.5),
				  "start_mean_ns", (json_int_t)(base + 0.5),
				  "last_cycle_step", (json_int_t)z->first, "last_cycle_start_ns", (json_int_t)z->start,
				  "last_cycle_mean_ns", (json_int_t)(mean(z) + 0.5), "change_pct",
				  (mean(z) / base - 1) * 100),
			"Training slows down as it goes: compare the first and last cycles' operators and kernels "
			"(/compare of two runs, or the trace window of each). Usual causes: a growing Python-side "
			"structure (lists of losses or tensors kept alive), data loading falling behind, memory "
			"fragmentation, thermal throttling."));

	/* memory at step ends rising from cycle to cycle */
	int known = 0, rising = 1;
	int64_t first_alloc = -1, prev = -1;
	for (i = 0; i < ncycles; i++) {
		if (c[i].last_alloc < 0)
			continue;
		if (first_alloc < 0)
			first_alloc = c[i].last_alloc;
		else if (c[i].last_alloc < prev)
			rising = 0;
		prev = c[i].last_alloc;
		known++;
	}
	if (known >= 3 && rising && first_alloc > 0 && prev - first_alloc >= RL_MEM_GROWTH_MIN &&
	    (double)(prev - first_alloc) * 100.0 / (double)first_alloc > RL_MEM_GROWTH_PCT)
		bad |= add(out, finding("cycle_memory_growth", "Allocated memory at step ends rises across cycles",
			json_pack("{s:i, s:I, s:I, s:I}", "cycles", known, "first_cycle_allocated_bytes",
				  (json_int_t)first_alloc, "last_cycle_allocated_bytes", (json_int_t)prev,
				  "growth_bytes", (json_int_t)(prev - first_alloc)),
			"Memory that outlives its step accumulates: look for tensors kept across steps (a loss "
			"appended without .item(), caches, hooks, graph kept by retain_graph). The memory peak "
			"of the last cycle shows what is alive."));

	/* one cycle much slower than its neighbours */
	for (i = 0; i < ncycles; i++) {
		double nb = 0;
		int m = 0;
		if (i > 0)
			nb += mean(&c[i - 1]), m++;
		if (i + 1 < ncycles)
			nb += mean(&c[i + 1]), m++;
		nb /= m;
		if (nb > 0 && mean(&c[i]) / nb > RL_SLOW_CYCLE_RATIO)
			bad |= add(out, finding("slow_cycle", "One profiling cycle is much slower than its neighbours",
				json_pack("{s:i, s:I, s:I, s:I, s:I, s:f}", "cycle", i, "first_step", (json_int_t)c[i].first,
					  "start_ns", (json_int_t)c[i].start, "mean_step_ns", (json_int_t)(mean(&c[i]) + 0.5),
					  "neighbours_mean_step_ns", (json_int_t)(nb + 0.5), "ratio", mean(&c[i]) / nb),
				"Something else ran then: a checkpoint save, evaluation, another job on the node, "
				"or a data shard that loads slowly. Open that cycle's trace window."));
	}
	tp_free(c);
	if (bad) {
		json_decref(out);
		return NULL;
	}
	return out;
}

static size_t starts_within(const struct rl_step *s, size_t n, int64_t first, int64_t last, int64_t off)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t t = tp_sat_add(s[i].start_ns, off);
		k += t >= first && t <= last;
	}
	return k;
}

size_t runline_log_offset(const struct rl_step *s, size_t n, int64_t first, int64_t last, int64_t *offset)
{
	size_t best = starts_within(s, n, first, last, 0), k;
	int64_t q;

	*offset = 0;
	if (best == n)
		return best;
	/* nearer shifts first, east before west: the first of the most wins */
	for (int64_t d = 1; d <= 14 * 4; d++)
		for (int sign = 1; sign >= -1; sign -= 2) {
			if (sign < 0 && d > 12 * 4)
				continue;
			q = sign * d * RUNLINE_TZ_STEP_NS;
			if ((k = starts_within(s, n, first, last, q)) > best) {
				best = k;
				*offset = q;
			}
		}
	return best;
}
