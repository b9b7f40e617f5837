/*
 * distributed.c: the ranks of a run side by side (distributed.h).
 *
 * Straggler rules (TraceLens' collective report, PyTorch's straggler RFC):
 * a collective instance is the same call on every rank of its process
 * group. Instances are matched by (process group, "Seq") where the trace
 * writes a sequence number, else by (process group, kind, its order among
 * that rank's collectives of that group and kind): the n-th all_reduce of
 * group 0 on rank 0 is the n-th on rank 1. An instance seen on at least two
 * ranks is matched. A rank arrives when its host launches the collective
 * (the outermost communication operator starts, analysis.h); the rank that
 * arrives last holds everyone else, each of whom waits from its own arrival
 * to the last one (an instance where all arrive at once has no last rank).
 * by_rank: last_arrival_pct is the share of the matched instances the rank
 * took part in where it arrived last; wait_caused_ns the waits of the
 * others in those; wait_ns its own waiting.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/analysis.h"
#include "analysis/distributed.h"
#include "tp.h"

double dist_busbw_factor(int kind, int64_t n)
{
	if (n <= 0)
		return 0;
	switch (kind) {
	case AN_CK_ALL_REDUCE: return 2.0 * (double)(n - 1) / (double)n;
	case AN_CK_ALL_GATHER: case AN_CK_REDUCE_SCATTER: case AN_CK_ALL_TO_ALL:
		return (double)(n - 1) / (double)n;
	default: return 1.0;
	}
}

void dist_input_release(struct dist_input *in)
{
	for (size_t i = 0; i < in->nstrs; i++)
		tp_free(in->strs[i]);
	tp_free(in->strs);
	tp_free(in->ranks);
	tp_free(in->steps);
	tp_free(in->colls);
	tp_free(in->clock_off);
	tp_free(in->clock_n);
	memset(in, 0, sizeof(*in));
}

/* a JSON number, or null when the value is unknown (< 0) */
static json_t *int_or_null(int64_t v)
{
	return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

/* 100 * part / whole, or null without a whole */
static json_t *pct_or_null(int64_t part, int64_t whole)
{
	return whole > 0 ? json_real(100.0 * (double)part / (double)whole) : json_null();
}

/* the position of rank in in->ranks; -1 when absent */
static long rank_pos(const struct dist_input *in, int rank)
{
	size_t lo = 0, hi = in->nranks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (in->ranks[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < in->nranks && in->ranks[lo] == rank ? (long)lo : -1;
}

/* ---- ranks: the step breakdown side by side ---- */

/* time any communication kernel runs; rows stored before gpu_busy_ns: exposed plus overlapped */
static int64_t comm_total(const struct dist_step *s)
{
	return s->comm_total_ns >= 0 ? s->comm_total_ns : s->overlap_ns + s->communication_ns;
}

static json_t *step_json(const struct dist_step *s)
{
	return json_pack("{s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:b, s:b}", "step",
			 s->whole_trace ? json_null() : json_integer((json_int_t)s->step), "start_ns",
			 (json_int_t)s->start_ns, "dur_ns", (json_int_t)s->dur_ns, "compute_ns", (json_int_t)s->compute_ns,
			 "communication_ns", (json_int_t)s->communication_ns, "overlap_ns", (json_int_t)s->overlap_ns,
			 "idle_ns", (json_int_t)s->idle_ns,
			 "overlap_pct", pct_or_null(s->overlap_ns, comm_total(s)),
			 "incomplete", s->incomplete != 0, "whole_trace", s->whole_trace != 0);
}

static json_t *ranks_json(const struct dist_input *in, int has_step, int64_t step)
{
	json_t *out = json_array();
	size_t i, k = 0;

	if (!out)
		return NULL;
	for (i = 0; i < in->nranks; i++) {
		struct dist_step tot = { .rank = in->ranks[i] };
		int64_t n = 0;
		json_t *steps = json_array(), *o;
		if (!steps)
			goto oom;
		for (; k < in->nsteps && in->steps[k].rank < in->ranks[i]; k++)
			;
		for (; k < in->nsteps && in->steps[k].rank == in->ranks[i]; k++) {
			const struct dist_step *s = &in->steps[k];
			if (has_step && (s->step != step || s->whole_trace))
				continue;
			if (json_array_append_new(steps, step_json(s))) {
				json_decref(steps);
				goto oom;
			}
			if (s->incomplete)
				continue;
			n++;
			tot.dur_ns = tp_sat_add(tot.dur_ns, s->dur_ns);
			tot.compute_ns = tp_sat_add(tot.compute_ns, s->compute_ns);
			tot.communication_ns = tp_sat_add(tot.communication_ns, s->communication_ns);
			tot.overlap_ns = tp_sat_add(tot.overlap_ns, s->overlap_ns);
			tot.idle_ns = tp_sat_add(tot.idle_ns, s->idle_ns);
			tot.comm_total_ns = tp_sat_add(tot.comm_total_ns, comm_total(s));
		}
		o = json_pack("{s:i, s:I, s:I, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o}}", "rank", in->ranks[i],
			      "clock_offset_ns", (json_int_t)in->clock_off[i], "clock_collectives", (json_int_t)in->clock_n[i],
			      "steps", steps,
			      "total", "steps", (json_int_t)n, "dur_ns", (json_int_t)tot.dur_ns, "compute_ns",
			      (json_int_t)tot.compute_ns, "communication_ns", (json_int_t)tot.communication_ns,
			      "overlap_ns", (json_int_t)tot.overlap_ns, "idle_ns", (json_int_t)tot.idle_ns,
			      "overlap_pct", pct_or_null(tot.overlap_ns, tot.comm_total_ns),
			      "exposed_communication_pct", pct_or_null(tot.communication_ns, tot.dur_ns));
		if (json_array_append_new(out, o))
			goto oom;
	}
	return out;
oom:
	json_decref(out);
	return NULL;
}

/* ---- collectives per rank, kind and process group ---- */

struct cagg {
	int rank, kind;
	const char *pg;
	int64_t calls, kernels, time_ns, bytes, bytes_time_ns, group_size;
	int have_bytes;
};

static json_t *cagg_json(const struct cagg *a)
{
	/* GB/s = bytes per ns; over the calls whose bytes the trace gave */
	double alg = a->have_bytes && a->bytes_time_ns > 0 ? (double)a->bytes / (double)a->bytes_time_ns : -1;
	double f = dist_busbw_factor(a->kind, a->group_size);

	return json_pack("{s:i, s:s, s:s, s:o, s:I, s:I, s:I, s:o, s:o, s:o}", "rank", a->rank, "kind",
			 an_ckind_names[a->kind], "pg", a->pg, "group_size", a->group_size > 0 ? json_integer(a->group_size) : json_null(),
			 "calls", (json_int_t)a->calls, "kernels", (json_int_t)a->kernels, "time_ns", (json_int_t)a->time_ns,
			 "bytes", a->have_bytes ? json_integer((json_int_t)a->bytes) : json_null(),
			 "algbw_gbps", alg >= 0 ? json_real(alg) : json_null(),
			 "busbw_gbps", alg >= 0 && f > 0 ? json_real(alg * f) : json_null());
}

static json_t *collectives_json(const struct dist_input *in, int has_step, int64_t step)
{
	struct cagg *agg = NULL;
	size_t n = 0, cap = 0, first = 0, i, k;
	json_t *out = json_array();

	if (!out)
		return NULL;
	for (i = 0; i < in->ncolls; i++) {
		const struct dist_coll *c = &in->colls[i];
		if (has_step && c->step != step)
			continue;
		if (n && agg[n - 1].rank != c->rank)
			first = n;	/* colls are by rank: a rank's groups are agg[first..n) */
		for (k = first; k < n && (agg[k].kind != c->kind || strcmp(agg[k].pg, c->pg)); k++)
			;
		if (k == n) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct cagg *na = tp_realloc(agg, nc * sizeof(*na));
				if (!na)
					goto oom;
				agg = na;
				cap = nc;
			}
			agg[n++] = (struct cagg){ .rank = c->rank, .kind = c->kind, .pg = c->pg };
		}
		struct cagg *a = &agg[k];
		a->calls++;
		a->kernels += c->kernels;
		a->time_ns = tp_sat_add(a->time_ns, c->time_ns);
		if (c->bytes >= 0) {
			a->have_bytes = 1;
			a->bytes = tp_sat_add(a->bytes, c->bytes);
			a->bytes_time_ns = tp_sat_add(a->bytes_time_ns, c->time_ns);
		}
		if (c->group_size > a->group_size)
			a->group_size = c->group_size;
	}
	for (i = 0; i < n; i++)
		if (json_array_append_new(out, cagg_json(&agg[i])))
			goto oom;
	tp_free(agg);
	return out;
oom:
	tp_free(agg);
	json_decref(out);
	return NULL;
}

/* ---- stragglers ---- */

struct mkey {
	const char *pg;
	int kind;		/* -1 when matched by seq */
	int64_t num;		/* seq, or the order within (rank, pg, kind) */
	size_t coll;		/* index in in->colls */
};

static int cmp_mkey(const void *a, const void *b)
{
	const struct mkey *x = a, *y = b;
	int c = strcmp(x->pg, y->pg);

	if (c)
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	return x->coll < y->coll ? -1 : x->coll > y->coll;
}

struct inst {
	size_t first, n;	/* in the sorted keys */
	int64_t min_launch, max_launch;
	int last_rank;		/* -1: all arrived at once */
	int64_t step;
};

static int cmp_inst(const void *a, const void *b)
{
	const struct inst *x = a, *y = b;

	return x->min_launch < y->min_launch ? -1 : x->min_launch > y->min_launch;
}

struct rank_acc {
	int64_t matched, last, wait_caused, wait;
};

static json_t *instance_json(const struct dist_input *in, const struct mkey *keys, const struct inst *t)
{
	const struct dist_coll *c0 = &in->colls[keys[t->first].coll];
	json_t *arr = json_array(), *o;

	if (!arr)
		return NULL;
	for (size_t j = t->first; j < t->first + t->n; j++) {
		const struct dist_coll *c = &in->colls[keys[j].coll];
		if (json_array_append_new(arr, json_pack("{s:i, s:I, s:I, s:I, s:o, s:I}", "rank", c->rank, "launch_ns",
							 (json_int_t)c->launch_ns, "wait_ns",
							 (json_int_t)(t->max_launch - c->launch_ns), "time_ns",
							 (json_int_t)c->time_ns, "before_op",
							 c->before_op ? json_string(c->before_op) : json_null(),
							 "before_ns", (json_int_t)c->before_ns))) {
			json_decref(arr);
			return NULL;
		}
	}
	o = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:o}", "pg", c0->pg, "kind", an_ckind_names[c0->kind],
		      "seq", int_or_null(keys[t->first].kind < 0 ? keys[t->first].num : -1),
		      "order", int_or_null(keys[t->first].kind >= 0 ? keys[t->first].num : -1),
		      "step", int_or_null(t->step), "last_rank", t->last_rank >= 0 ? json_integer(t->last_rank) : json_null(),
		      "skew_ns", (json_int_t)(t->max_launch - t->min_launch), "ranks", arr);
	return o;
}

static int cmp_step_rank(const void *a, const void *b)
{
	const struct dist_step *x = *(const struct dist_step *const *)a, *y = *(const struct dist_step *const *)b;

	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* Per step, the slowest and the fastest rank (the lower rank on a tie). */
static json_t *slowest_json(const struct dist_input *in, int has_step, int64_t step)
{
	const struct dist_step **v = tp_malloc((in->nsteps + 1) * sizeof(*v));
	json_t *out = json_array();
	size_t n = 0, i, j;

	if (!out || !v)
		goto fail;
	for (i = 0; i < in->nsteps; i++)
		if (!in->steps[i].whole_trace && (!has_step || in->steps[i].step == step))
			v[n++] = &in->steps[i];
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_step_rank);
	for (i = 0; i < n; i = j) {
		const struct dist_step *slow = v[i], *fast = v[i];
		for (j = i; j < n && v[j]->step == v[i]->step; j++) {
			if (v[j]->dur_ns > slow->dur_ns)
				slow = v[j];
			if (v[j]->dur_ns < fast->dur_ns)
				fast = v[j];
		}
		if (json_array_append_new(out, json_pack("{s:I, s:I, s:i, s:I, s:i, s:I}", "step", (json_int_t)v[i]->step,
							  "ranks", (json_int_t)(j - i), "slowest_rank", slow->rank, "dur_ns",
							  (json_int_t)slow->dur_ns, "fastest_rank", fast->rank,
							  "fastest_dur_ns", (json_int_t)fast->dur_ns)))
			goto fail;
	}
	tp_free(v);
	return out;
fail:
	tp_free(v);
	json_decref(out);
	return NULL;
}

/* The match key of each collective (keys[i] for in->colls[i], unsorted): its process group and
 * seq where written, else its order within (rank, process group, kind). -1 when out of memory. */
static int match_keys(const struct dist_input *in, struct mkey *keys)
{
	struct { const char *pg; int kind; int64_t n; } *ord = NULL;
	size_t nord = 0, ocap = 0, i, k, rank_first = 0;

	/* colls are by rank, then launch */
	for (i = 0; i < in->ncolls; i++) {
		const struct dist_coll *c = &in->colls[i];
		if (i && c->rank != in->colls[i - 1].rank)
			rank_first = nord;
		if (c->seq >= 0) {
			keys[i] = (struct mkey){ c->pg, -1, c->seq, i };
			continue;
		}
		for (k = rank_first; k < nord && (ord[k].kind != c->kind || strcmp(ord[k].pg, c->pg)); k++)
			;
		if (k == nord) {
			if (nord == ocap) {
				size_t nc = ocap ? ocap * 2 : 16;
				void *no = tp_realloc(ord, nc * sizeof(*ord));
				if (!no)
					goto oom;
				ord = no;
				ocap = nc;
			}
			ord[nord].pg = c->pg;
			ord[nord].kind = c->kind;
			ord[nord++].n = 0;
		}
		keys[i] = (struct mkey){ c->pg, c->kind, ord[k].n++, i };
	}
	tp_free(ord);
	return 0;
oom:
	tp_free(ord);
	return -1;
}

int dist_match(const struct dist_input *in, size_t *inst)
{
	struct mkey *keys = tp_malloc((in->ncolls + 1) * sizeof(*keys));
	size_t i, j, k, n = 0;

	if (!keys || match_keys(in, keys)) {
		tp_free(keys);
		return -1;
	}
	if (in->ncolls > 1)
		qsort(keys, in->ncolls, sizeof(*keys), cmp_mkey);
	for (i = 0; i < in->ncolls; i = j) {
		for (j = i; j < in->ncolls && !strcmp(keys[j].pg, keys[i].pg) && keys[j].kind == keys[i].kind &&
			    keys[j].num == keys[i].num; j++)
			;
		for (k = i; k < j; k++)
			inst[keys[k].coll] = j - i > 1 ? n : SIZE_MAX;
		n += j - i > 1;
	}
	tp_free(keys);
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int dist_align(struct dist_input *in)
{
	size_t *inst = NULL, ninst = 0, i, n;
	int64_t *ref = NULL, *d = NULL;
	int rc = -1;

	if (in->clock_off)
		return 0;
	in->clock_off = tp_calloc(in->nranks + 1, sizeof(*in->clock_off));
	in->clock_n = tp_calloc(in->nranks + 1, sizeof(*in->clock_n));
	inst = tp_malloc((in->ncolls + 1) * sizeof(*inst));
	d = tp_malloc((in->ncolls + 1) * sizeof(*d));
	if (!in->clock_off || !in->clock_n || !inst || !d || dist_match(in, inst))
		goto done;
	for (i = 0; i < in->ncolls; i++)
		if (inst[i] != SIZE_MAX && inst[i] + 1 > ninst)
			ninst = inst[i] + 1;
	if (!(ref = tp_malloc((ninst + 1) * sizeof(*ref))))
		goto done;
	for (i = 0; i < ninst; i++)
		ref[i] = INT64_MIN;
	/* the reference rank's end of each instance (the first, should it have two) */
	for (i = 0; in->nranks && i < in->ncolls; i++)
		if (in->colls[i].rank == in->ranks[0] && inst[i] != SIZE_MAX && ref[inst[i]] == INT64_MIN)
			ref[inst[i]] = in->colls[i].end_ns;
	/* colls are by rank: each other rank's differences, their median */
	for (i = 0; i < in->ncolls; i += n) {
		const struct dist_coll *c = &in->colls[i];
		long p = rank_pos(in, c->rank);
		size_t nd = 0;
		for (n = 0; i + n < in->ncolls && in->colls[i + n].rank == c->rank; n++) {
			size_t k = inst[i + n];
			if (k != SIZE_MAX && ref[k] != INT64_MIN)
				d[nd++] = tp_sat_sub(in->colls[i + n].end_ns, ref[k]);	/* hostile clocks saturate */
		}
		if (p <= 0 || nd < DIST_CLOCK_MIN)
			continue;
		qsort(d, nd, sizeof(*d), cmp_i64);
		in->clock_off[p] = nd % 2 ? d[nd / 2] : tp_mid(d[nd / 2 - 1], d[nd / 2]);
		in->clock_n[p] = nd;
	}
	for (i = 0; i < in->nsteps; i++) {
		long p = rank_pos(in, in->steps[i].rank);
		if (p > 0)
			in->steps[i].start_ns = tp_sat_sub(in->steps[i].start_ns, in->clock_off[p]);
	}
	for (i = 0; i < in->ncolls; i++) {
		long p = rank_pos(in, in->colls[i].rank);
		if (p > 0) {
			in->colls[i].launch_ns = tp_sat_sub(in->colls[i].launch_ns, in->clock_off[p]);
			in->colls[i].start_ns = tp_sat_sub(in->colls[i].start_ns, in->clock_off[p]);
			in->colls[i].end_ns = tp_sat_sub(in->colls[i].end_ns, in->clock_off[p]);
		}
	}
	rc = 0;
done:
	if (rc) {
		tp_free(in->clock_off);
		tp_free(in->clock_n);
		in->clock_off = NULL;
		in->clock_n = NULL;
	}
	tp_free(inst);
	tp_free(ref);
	tp_free(d);
	return rc;
}

static json_t *stragglers_json(struct dist_input *in, int has_step, int64_t step)
{
	struct mkey *keys = tp_malloc((in->ncolls + 1) * sizeof(*keys));
	struct inst *insts = tp_malloc((in->ncolls + 1) * sizeof(*insts));
	struct rank_acc *acc = tp_calloc(in->nranks + 1, sizeof(*acc));
	size_t ninst = 0, listed = 0, i, j, k;
	json_t *list = NULL, *by = NULL, *out = NULL, *slow = NULL;

	if (!keys || !insts || !acc || !(list = json_array()) || !(by = json_array()))
		goto done;
	if (match_keys(in, keys))
		goto done;
	if (in->ncolls > 1)
		qsort(keys, in->ncolls, sizeof(*keys), cmp_mkey);
	for (i = 0; i < in->ncolls; i = j) {
		struct inst t = { .first = i, .min_launch = INT64_MAX, .max_launch = INT64_MIN, .last_rank = -1, .step = -1 };
		int in_step = !has_step;
		for (j = i; j < in->ncolls && !strcmp(keys[j].pg, keys[i].pg) && keys[j].kind == keys[i].kind &&
			    keys[j].num == keys[i].num; j++) {
			const struct dist_coll *c = &in->colls[keys[j].coll];
			if (c->launch_ns < t.min_launch)
				t.min_launch = c->launch_ns;
			if (c->launch_ns > t.max_launch) {
				t.max_launch = c->launch_ns;
				t.last_rank = c->rank;
				t.step = c->step;
			}
			in_step |= c->step == step;
		}
		t.n = j - i;
		if (t.n < 2 || !in_step)
			continue;
		if (t.max_launch == t.min_launch)
			t.last_rank = -1;
		insts[ninst++] = t;
		for (k = t.first; k < j; k++) {
			const struct dist_coll *c = &in->colls[keys[k].coll];
			long p = rank_pos(in, c->rank);
			if (p < 0)
				continue;
			acc[p].matched++;
			acc[p].wait = tp_sat_add(acc[p].wait, t.max_launch - c->launch_ns);
			if (c->rank == t.last_rank)
				acc[p].last++;
			else if (t.last_rank >= 0) {
				long q = rank_pos(in, t.last_rank);
				if (q >= 0)
					acc[q].wait_caused = tp_sat_add(acc[q].wait_caused, t.max_launch - c->launch_ns);
			}
		}
	}
	if (ninst > 1)
		qsort(insts, ninst, sizeof(*insts), cmp_inst);
	for (i = 0, k = 0; i < ninst && i < DIST_INSTANCES_MAX && k + insts[i].n <= DIST_ENTRIES_MAX; k += insts[i++].n)
		if (json_array_append_new(list, instance_json(in, keys, &insts[i])))
			goto done;
	listed = i;
	for (i = 0; i < in->nranks; i++)
		if (json_array_append_new(by, json_pack("{s:i, s:I, s:I, s:o, s:I, s:I}", "rank", in->ranks[i], "matched",
							 (json_int_t)acc[i].matched, "last_arrivals", (json_int_t)acc[i].last,
							 "last_arrival_pct", pct_or_null(acc[i].last, acc[i].matched),
							 "wait_caused_ns", (json_int_t)acc[i].wait_caused, "wait_ns",
							 (json_int_t)acc[i].wait)))
			goto done;
	if (!(slow = slowest_json(in, has_step, step)))
		goto done;
	out = json_pack("{s:I, s:I, s:o, s:o, s:o}", "matched", (json_int_t)ninst, "listed", (json_int_t)listed,
			"instances", list, "by_rank", by,
			"steps", slow);
	list = by = slow = NULL;
done:
	json_decref(list);
	json_decref(by);
	json_decref(slow);
	tp_free(keys);
	tp_free(insts);
	tp_free(acc);
	return out;
}

/* {"reference_rank", "min_collectives", "note"}: what dist_align estimated, and which ranks it could not */
static json_t *clock_json(const struct dist_input *in)
{
	char list[300], note[440];
	size_t len = 0, i;

	list[0] = 0;
	for (i = 1; i < in->nranks; i++)
		if (!in->clock_n[i] && len < sizeof(list) - 40)
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", len ? ", " : "", in->ranks[i]);
	if (len)
		snprintf(note, sizeof(note), "too few collectives shared with rank %d (fewer than %d) to estimate the"
			 " clock offset of rank%s %s: taken as 0", in->ranks[0], DIST_CLOCK_MIN,
			 strchr(list, ',') ? "s" : "", list);
	return json_pack("{s:o, s:i, s:o}", "reference_rank", in->nranks ? json_integer(in->ranks[0]) : json_null(),
			 "min_collectives", DIST_CLOCK_MIN, "note", len ? json_string(note) : json_null());
}

json_t *distributed_run(struct dist_input *in, int has_step, int64_t step)
{
	if (dist_align(in))
		return NULL;
	json_t *ranks = ranks_json(in, has_step, step);
	json_t *colls = ranks ? collectives_json(in, has_step, step) : NULL;
	json_t *strag = colls ? stragglers_json(in, has_step, step) : NULL;

	if (!strag) {
		json_decref(ranks);
		json_decref(colls);
		return NULL;
	}
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "step", has_step ? json_integer((json_int_t)step) : json_null(),
			 "ranks", ranks, "collectives", colls, "stragglers", strag, "clock", clock_json(in));
}

/* ---- findings ---- */

static int add_finding(json_t *out, const char *id, const char *title, json_t *evidence, const char *advice)
{
	json_t *f = evidence ? json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", id, "severity", "warning", "title", title,
					 "evidence", evidence, "advice", advice)
			     : NULL;

	return !f || json_array_append_new(out, f) ? -1 : 0;
}

/*
 * What kept rank late, from the listed instances it launched last: its
 * before_op there, less what the other ranks spent in an operator of that
 * name before the same collective (their mean; 0 when theirs was another),
 * summed by name: the DIST_DELAY_OPS names with the most extra time.
 */
#define DIST_DELAY_OPS 3
static json_t *delaying_ops(json_t *body, json_int_t rank)
{
	struct agg { const char *name; int64_t extra, count; } *a = NULL;
	json_t *inst, *e, *out;
	size_t n = 0, i, j, k;

	json_array_foreach(json_object_get(json_object_get(body, "stragglers"), "instances"), i, inst) {
		json_t *last = json_object_get(inst, "last_rank"), *mine = NULL;
		const char *name;
		int64_t others = 0, nothers = 0;
		if (!json_is_integer(last) || json_integer_value(last) != rank)
			continue;
		json_array_foreach(json_object_get(inst, "ranks"), j, e)
			if (json_integer_value(json_object_get(e, "rank")) == rank)
				mine = e;
		if (!mine || !(name = json_string_value(json_object_get(mine, "before_op"))))
			continue;
		json_array_foreach(json_object_get(inst, "ranks"), j, e) {
			const char *theirs = json_string_value(json_object_get(e, "before_op"));
			if (e == mine)
				continue;
			nothers++;
			if (theirs && !strcmp(theirs, name))
				others += json_integer_value(json_object_get(e, "before_ns"));
		}
		int64_t extra = json_integer_value(json_object_get(mine, "before_ns")) - (nothers ? others / nothers : 0);
		for (k = 0; k < n && strcmp(a[k].name, name); k++)
			;
		if (k == n) {
			void *na = tp_realloc(a, (n + 1) * sizeof(*a));
			if (!na) {
				tp_free(a);
				return NULL;
			}
			a = na;
			a[n++] = (struct agg){ name, 0, 0 };
		}
		a[k].extra += extra;
		a[k].count++;
	}
	if (!(out = json_array())) {
		tp_free(a);
		return NULL;
	}
	for (int picked = 0; picked < DIST_DELAY_OPS; picked++) {
		size_t best = n;
		for (k = 0; k < n; k++)
			if (a[k].extra > 0 && (best == n || a[k].extra > a[best].extra))
				best = k;
		if (best == n)
			break;
		if (json_array_append_new(out, json_pack("{s:s, s:I, s:I}", "name", a[best].name, "extra_ns",
							  (json_int_t)a[best].extra, "collectives", (json_int_t)a[best].count))) {
			json_decref(out);
			out = NULL;
			break;
		}
		a[best].extra = 0;
	}
	tp_free(a);
	return out;
}

/*
 * The steps where rank arrived last, with the waits it caused there (summed over the listed
 * instances); *caused: their sum.
 */
static json_t *straggler_steps(json_t *body, json_int_t rank, int64_t *caused)
{
	json_t *out = json_array(), *inst, *e, *row;
	size_t i, j;

	*caused = 0;
	if (!out)
		return NULL;
	json_array_foreach(json_object_get(json_object_get(body, "stragglers"), "instances"), i, inst) {
		json_t *last = json_object_get(inst, "last_rank"), *step = json_object_get(inst, "step");
		int64_t w = 0;
		if (!json_is_integer(last) || json_integer_value(last) != rank || !json_is_integer(step))
			continue;
		json_array_foreach(json_object_get(inst, "ranks"), j, e)
			w += json_integer_value(json_object_get(e, "wait_ns"));
		*caused += w;
		json_array_foreach(out, j, row)
			if (json_integer_value(json_object_get(row, "step")) == json_integer_value(step))
				break;
		if (j == json_array_size(out) &&
		    json_array_append_new(out, json_pack("{s:O, s:I, s:I}", "step", step, "collectives", (json_int_t)0,
							 "wait_caused_ns", (json_int_t)0))) {
			json_decref(out);
			return NULL;
		}
		row = json_array_get(out, j);
		json_object_set_new(row, "collectives",
				    json_integer(json_integer_value(json_object_get(row, "collectives")) + 1));
		json_object_set_new(row, "wait_caused_ns",
				    json_integer(json_integer_value(json_object_get(row, "wait_caused_ns")) + w));
	}
	return out;
}

/* the mean complete step of the ranks other than rank; 0 when none */
static double others_step_ns(json_t *body, json_int_t rank)
{
	json_t *r;
	double sum = 0, n = 0;
	size_t i;

	json_array_foreach(json_object_get(body, "ranks"), i, r) {
		json_t *t = json_object_get(r, "total");
		if (json_integer_value(json_object_get(r, "rank")) == rank)
			continue;
		sum += (double)json_integer_value(json_object_get(t, "dur_ns"));
		n += (double)json_integer_value(json_object_get(t, "steps"));
	}
	return n > 0 ? sum / n : 0;
}

static int rule_straggler(json_t *body, size_t nranks, json_t *out)
{
	json_t *by = json_object_get(json_object_get(body, "stragglers"), "by_rank"), *b;
	double need = 150.0 / (double)nranks, all_caused = 0;
	char title[200];
	size_t i;

	if (need < DIST_STRAGGLER_PCT)
		need = DIST_STRAGGLER_PCT;
	json_array_foreach(by, i, b)
		all_caused += (double)json_integer_value(json_object_get(b, "wait_caused_ns"));
	json_array_foreach(by, i, b) {
		json_int_t matched = json_integer_value(json_object_get(b, "matched"));
		json_int_t rank = json_integer_value(json_object_get(b, "rank"));
		double pct = json_number_value(json_object_get(b, "last_arrival_pct"));
		double caused = (double)json_integer_value(json_object_get(b, "wait_caused_ns"));
		double share = all_caused > 0 ? 100.0 * caused / all_caused : 0, step_ns, per_step, step_pct;
		int64_t in_steps;
		json_t *steps;
		if (matched < DIST_STRAGGLER_MIN || pct < DIST_STRAGGLER_PCT ||
		    (pct < need && share < DIST_STRAGGLER_WAIT_SHARE_PCT))
			continue;
		if (!(steps = straggler_steps(body, rank, &in_steps)))
			return -1;
		step_ns = others_step_ns(body, rank);
		per_step = json_array_size(steps) ? (double)in_steps / (double)json_array_size(steps) : 0;
		step_pct = step_ns > 0 ? 100.0 * per_step / step_ns : 0;
		snprintf(title, sizeof(title), "Rank %lld arrives last at %lld of %lld collectives%s: the others wait"
			 " for it %.1f ms a step (%.1f%% of their step)", (long long)rank,
			 (long long)json_integer_value(json_object_get(b, "last_arrivals")), (long long)matched,
			 pct >= need ? "" : ", and causes most of the waiting", per_step / 1e6, step_pct);
		if (add_finding(out, "persistent_straggler", title,
				json_pack("{s:I, s:f, s:I, s:I, s:O, s:f, s:o, s:f, s:f, s:b, s:o, s:f, s:f}", "rank", rank,
					  "last_arrival_pct", pct,
					  "last_arrivals", json_integer_value(json_object_get(b, "last_arrivals")),
					  "matched", matched, "wait_caused_ns", json_object_get(b, "wait_caused_ns"),
					  "wait_caused_share_pct", share, "steps", steps,
					  "wait_per_step_ns", per_step, "step_share_pct", step_pct,
					  "explains_step_time", step_pct >= DIST_STRAGGLER_EXPLAINS_PCT,
					  "delaying_ops", delaying_ops(body, rank), "threshold_pct", need,
					  "wait_share_threshold_pct", DIST_STRAGGLER_WAIT_SHARE_PCT),
				"The other ranks wait in their collectives until this one arrives, so its delay is every"
				" rank's. delaying_ops names the top-level operators this rank spent more time in than the"
				" others before the collectives it launched last. Look at this rank's critical path"
				" (/critical_path?step=N): its host_gap is time it ran no operator at all (a sleep, data"
				" loading or other work outside the profiler); compare its host work with another rank's"
				" (/ops?rank=R, /timeline?rank=R): uneven data loading or input sizes (sequence lengths,"
				" batches of different shapes), host-side work only it does (logging, checkpointing,"
				" evaluation on rank 0), or a slower or throttled GPU. Balance the inputs (bucketing by"
				" length), move rank-0-only work off the critical path, and check the device with"
				" nvidia-smi."))
			return -1;
	}
	return 0;
}

static int rule_exposed(json_t *body, json_t *out)
{
	json_t *ranks = json_object_get(body, "ranks"), *r, *list = json_array();
	double worst = 0;
	char title[160];
	size_t i;

	if (!list)
		return -1;
	json_array_foreach(ranks, i, r) {
		json_t *pct = json_object_get(json_object_get(r, "total"), "exposed_communication_pct");
		if (!json_is_number(pct) || json_number_value(pct) <= DIST_EXPOSED_PCT)
			continue;
		if (json_number_value(pct) > worst)
			worst = json_number_value(pct);
		if (json_array_append_new(list, json_pack("{s:O, s:O, s:O}", "rank", json_object_get(r, "rank"),
							   "exposed_communication_pct", pct, "overlap_pct",
							   json_object_get(json_object_get(r, "total"), "overlap_pct")))) {
			json_decref(list);
			return -1;
		}
	}
	if (!json_array_size(list)) {
		json_decref(list);
		return 0;
	}
	snprintf(title, sizeof(title), "%zu of %zu ranks spend over %.0f%% of their steps in communication that"
		 " computation does not hide (up to %.1f%%)", json_array_size(list), json_array_size(ranks),
		 DIST_EXPOSED_PCT, worst);
	return add_finding(out, "exposed_communication_ranks", title,
			   json_pack("{s:o, s:f}", "ranks", list, "threshold_pct", DIST_EXPOSED_PCT),
			   "Overlap communication with computation: DistributedDataParallel and FSDP start each"
			   " bucket's collective as soon as its gradients are ready, so tune bucket_cap_mb, prefetch"
			   " FSDP's all_gather (forward_prefetch, backward_prefetch), and with gradient accumulation"
			   " communicate only on the last micro-batch (no_sync()). Where communication is exposed on"
			   " some ranks only, they are waiting for a straggler (persistent_straggler).");
}

static int rule_imbalance(json_t *body, json_t *out)
{
	json_t *ranks = json_object_get(body, "ranks"), *r, *hi = NULL, *lo = NULL;
	double hiv = -1, lov = -1, pct;
	char title[160];
	size_t i;

	json_array_foreach(ranks, i, r) {
		json_t *t = json_object_get(r, "total");
		json_int_t n = json_integer_value(json_object_get(t, "steps"));
		if (n <= 0)
			continue;
		double v = (double)json_integer_value(json_object_get(t, "compute_ns")) / (double)n;
		if (!hi || v > hiv)
			hi = r, hiv = v;
		if (!lo || v < lov)
			lo = r, lov = v;
	}
	if (!hi || hi == lo || lov <= 0 || (pct = (hiv / lov - 1) * 100) <= DIST_IMBALANCE_PCT)
		return 0;
	snprintf(title, sizeof(title), "Rank %lld computes %.1f%% longer per step than rank %lld",
		 (long long)json_integer_value(json_object_get(hi, "rank")), pct,
		 (long long)json_integer_value(json_object_get(lo, "rank")));
	return add_finding(out, "compute_imbalance", title,
			   json_pack("{s:O, s:I, s:O, s:I, s:f, s:f}", "busiest_rank", json_object_get(hi, "rank"),
				     "busiest_compute_ns_per_step", (json_int_t)(hiv + 0.5), "least_busy_rank",
				     json_object_get(lo, "rank"), "least_busy_compute_ns_per_step", (json_int_t)(lov + 0.5),
				     "imbalance_pct", pct, "threshold_pct", DIST_IMBALANCE_PCT),
			   "Ranks should do the same work per step: check that each gets an equal share of the batch"
			   " (DistributedSampler, drop_last), that variable-length inputs are bucketed, and that model"
			   " or pipeline partitions are balanced; every collective waits for the busiest rank.");
}

/*
 * What a GPU's links reach, as nccl-tests' all_reduce bus bandwidth within one
 * node: about 80 % of the link's one-direction rate (NVLink 2 on V100 SXM2
 * 150 GB/s, NVLink 3 on A100 SXM 300 GB/s, NVLink 4 on H100/H200 SXM 450 GB/s;
 * the export models' halved links; PCIe 4.0 x16 about 25 GB/s, 5.0 x16 about
 * 50 GB/s). The topology is not in the trace (cards may sit on PCIe alone, or
 * across nodes on the network), hence the generous threshold, DIST_BW_PCT.
 * PCIe first: "A100-PCIE-40GB" and "H100 PCIe" are the same chips on PCIe.
 */
static const struct {
	const char *match;
	double busbw;
	const char *link;
} links[] = {
	{ "PCIE", 20, "PCIe 4.0 x16" }, { "PCIe", 20, "PCIe 4.0 x16" },
	{ "H100", 360, "NVLink 4" }, { "H200", 360, "NVLink 4" }, { "H800", 160, "NVLink 4 (H800)" },
	{ "A100", 230, "NVLink 3" }, { "A800", 160, "NVLink 3 (A800)" }, { "V100", 120, "NVLink 2" },
	{ "B200", 720, "NVLink 5" },
};

double dist_link_busbw(const char *name, const char **link)
{
	for (size_t i = 0; name && i < sizeof(links) / sizeof(links[0]); i++)
		if (strstr(name, links[i].match)) {
			if (link)
				*link = links[i].link;
			return links[i].busbw;
		}
	return 0;
}

/*
 * Per collective kind and process group, the best rank's bus bandwidth: a
 * collective's kernel also runs while it waits for the last rank, so the rank
 * that waited least shows the transfer itself.
 */
static int rule_bandwidth(json_t *body, const char *device, json_t *out)
{
	const char *link = NULL;
	double peak = dist_link_busbw(device, &link), worst = -1;
	json_t *colls = json_object_get(body, "collectives"), *c, *list = json_array();
	char title[200];
	size_t i, k;

	if (!list)
		return -1;
	json_array_foreach(colls, i, c) {
		json_t *bw = json_object_get(c, "busbw_gbps"), *bytes = json_object_get(c, "bytes"), *x, *dup = NULL;
		json_int_t calls = json_integer_value(json_object_get(c, "calls"));
		if (peak <= 0 || !json_is_number(bw) || !json_is_integer(bytes) || calls <= 0 ||
		    json_integer_value(bytes) / calls < DIST_BW_MIN_BYTES)
			continue;
		json_array_foreach(list, k, x)
			if (json_equal(json_object_get(x, "kind"), json_object_get(c, "kind")) &&
			    json_equal(json_object_get(x, "pg"), json_object_get(c, "pg")))
				dup = x;
		if (dup && json_number_value(json_object_get(dup, "best_busbw_gbps")) >= json_number_value(bw))
			continue;
		json_t *e = json_pack("{s:O, s:O, s:O, s:I, s:O, s:O}", "kind", json_object_get(c, "kind"), "pg",
				      json_object_get(c, "pg"), "best_rank", json_object_get(c, "rank"), "mean_bytes",
				      json_integer_value(bytes) / calls, "calls", json_object_get(c, "calls"),
				      "best_busbw_gbps", bw);
		if (!e || (dup ? json_object_update(dup, e) : json_array_append(list, e))) {
			json_decref(e);
			json_decref(list);
			return -1;
		}
		json_decref(e);
	}
	/* keep those under the threshold */
	for (i = json_array_size(list); i-- > 0;) {
		double b = json_number_value(json_object_get(json_array_get(list, i), "best_busbw_gbps"));
		if (b < peak * DIST_BW_PCT / 100) {
			if (worst < 0 || b < worst)
				worst = b;
		} else if (json_array_remove(list, i)) {
			json_decref(list);
			return -1;
		}
	}
	if (!json_array_size(list)) {
		json_decref(list);
		return 0;
	}
	snprintf(title, sizeof(title), "Collectives move data at %.1f GB/s of bus bandwidth, under %.0f%% of the"
		 " %.0f GB/s %s reaches on %s", worst, DIST_BW_PCT, peak, link, device);
	return add_finding(out, "collective_bandwidth_low", title,
			   json_pack("{s:s, s:s, s:f, s:o, s:f, s:I}", "device", device, "link", link,
				     "expected_busbw_gbps", peak, "collectives", list, "threshold_pct", DIST_BW_PCT,
				     "min_bytes_per_call", (json_int_t)DIST_BW_MIN_BYTES),
			   "Run with NCCL_DEBUG=INFO and read which transport NCCL chose (P2P/NVLink, SHM, NET):"
			   " P2P disabled (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL), GPUs split across PCIe switches or NUMA"
			   " nodes (nvidia-smi topo -m), or traffic over the network between nodes all run far below"
			   " the links. If the GPUs are PCIe cards or on several nodes, this expectation is too high."
			   " Bandwidth is measured on the rank that waited least; where every rank is slow, check"
			   " with nccl-tests (all_reduce_perf) what the machine reaches.");
}

json_t *distributed_findings(json_t *body, const char *device)
{
	json_t *out = json_array();
	size_t n = json_array_size(json_object_get(body, "ranks"));

	if (!out || n < 2)
		return out;
	if (rule_straggler(body, n, out) || rule_exposed(body, out) || rule_imbalance(body, out) ||
	    rule_bandwidth(body, device, out)) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* ---- two runs' distributed figures side by side (GET /compare) ---- */

struct dsum {
	int64_t ranks, rank_steps, dur, compute, comm, overlap, idle, matched;
	double worst_last_pct;
	int worst_rank;
};

static int64_t jint(json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

static void dsum_of(json_t *body, struct dsum *d)
{
	json_t *r, *b;
	size_t i;

	memset(d, 0, sizeof(*d));
	d->worst_rank = -1;
	json_array_foreach(json_object_get(body, "ranks"), i, r) {
		json_t *t = json_object_get(r, "total");
		d->ranks++;
		d->rank_steps += jint(t, "steps");
		d->dur += jint(t, "dur_ns");
		d->compute += jint(t, "compute_ns");
		d->comm += jint(t, "communication_ns");
		d->overlap += jint(t, "overlap_ns");
		d->idle += jint(t, "idle_ns");
	}
	d->matched = jint(json_object_get(body, "stragglers"), "matched");
	json_array_foreach(json_object_get(json_object_get(body, "stragglers"), "by_rank"), i, b) {
		json_t *p = json_object_get(b, "last_arrival_pct");
		if (json_is_number(p) && json_number_value(p) > d->worst_last_pct) {
			d->worst_last_pct = json_number_value(p);
			d->worst_rank = (int)jint(b, "rank");
		}
	}
}

static json_t *dsum_json(const struct dsum *d)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:o, s:o}", "ranks", (json_int_t)d->ranks,
			 "rank_steps", (json_int_t)d->rank_steps, "dur_ns", (json_int_t)d->dur, "compute_ns",
			 (json_int_t)d->compute, "communication_ns", (json_int_t)d->comm, "overlap_ns",
			 (json_int_t)d->overlap, "idle_ns", (json_int_t)d->idle, "exposed_communication_pct",
			 pct_or_null(d->comm, d->dur), "matched", (json_int_t)d->matched, "last_rank",
			 d->worst_rank >= 0 ? json_integer(d->worst_rank) : json_null(), "last_arrival_pct",
			 d->worst_rank >= 0 ? json_real(d->worst_last_pct) : json_null());
}

/* the change of the mean per rank and step, in % to 0.1; null when either has no step or base none */
static json_t *mean_delta(int64_t b, int64_t bn, int64_t t, int64_t tn)
{
	double mb, mt;

	if (bn <= 0 || tn <= 0 || b <= 0)
		return json_null();
	mb = (double)b / (double)bn;
	mt = (double)t / (double)tn;
	return json_real(round((mt - mb) * 1000.0 / mb) / 10.0);
}

json_t *distributed_compare(json_t *base, json_t *target)
{
	struct dsum b, t;

	dsum_of(base, &b);
	dsum_of(target, &t);
	return json_pack("{s:o, s:o, s:{s:o, s:o, s:o, s:o, s:o}}", "base", dsum_json(&b), "target", dsum_json(&t),
			 "delta_pct", "dur_ns", mean_delta(b.dur, b.rank_steps, t.dur, t.rank_steps), "compute_ns",
			 mean_delta(b.compute, b.rank_steps, t.compute, t.rank_steps), "communication_ns",
			 mean_delta(b.comm, b.rank_steps, t.comm, t.rank_steps), "overlap_ns",
			 mean_delta(b.overlap, b.rank_steps, t.overlap, t.rank_steps), "idle_ns",
			 mean_delta(b.idle, b.rank_steps, t.idle, t.rank_steps));
}
