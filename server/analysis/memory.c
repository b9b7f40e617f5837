/*
 * memory.c: per-category memory timelines from [memory] events (memory.h).
 *
 * Per device, events are put in order by (ts, Ev Idx) and an allocation is
 * paired with the free of the same address. Memory allocated before the
 * trace's window shows only in the first event's "Total Allocated": that
 * baseline is reported as pre-existing, under parameter (the reader may split
 * it with the run's param_bytes). A free of an address never allocated in the
 * window comes out of the baseline.
 *
 * Each allocation then gets a category from the context at its allocation
 * and at its free, found in the host spans of the thread that made the call:
 * the first rule below that matches wins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/memory.h"
#include "analysis/sort.h"

/*
 * The rules, in order. Each says why; a is the allocation's context, f the
 * free's and tf its time, f NULL when the allocation outlives the trace.
 */
static int categorize(const struct mem_ctx *a, const struct mem_ctx *f, int64_t tf, const int64_t *opt_ends,
		      int64_t next_opt)
{
	int freed = f != NULL;

	/* 1. made and released inside one top-level operator: a workspace or an intermediate
	 *    of that operator (PyTorch: TEMPORARY, "allocated and freed inside one node") */
	if (freed && a->top >= 0 && a->top == f->top)
		return CAT_TEMPORARY;
	/* 2. made by AccumulateGrad: the .grad it accumulates into */
	if (a->flags & MS_ACCUM_GRAD)
		return CAT_GRADIENT;
	/* 3. released by zero_grad(set_to_none=True): only gradients are */
	if (freed && (f->flags & MS_ZERO_GRAD))
		return CAT_GRADIENT;
	/* 4. made in optimizer.step and kept after it: exp_avg, exp_avg_sq, momentum buffers;
	 *    made and released inside it: the update's temporaries */
	if (a->opt)
		return !freed || tf >= opt_ends[a->opt - 1] ? CAT_OPTIMIZER_STATE : CAT_TEMPORARY;
	/* 5. made in backward and alive when the next optimizer step starts (or to the end):
	 *    a gradient, which lives until the optimizer consumes it; released sooner: the
	 *    backward's own intermediates */
	if (a->backward) {
		if (!freed || (next_opt >= 0 && tf >= next_opt))
			return CAT_GRADIENT;
		return CAT_AUTOGRAD_DETAIL;
	}
	/* 6. made while loading data or copying to the device outside backward: the batch */
	if (a->flags & (MS_DATALOADER | MS_COPY))
		return CAT_INPUT;
	/* 7. made in forward and released by backward: saved for backward, an activation;
	 *    released in forward by a later operator: an intermediate activation */
	if (freed)
		return CAT_ACTIVATION;
	/* 8. made in forward and still alive at the end: nothing tells what it is */
	return CAT_UNKNOWN;
}

/*
 * A device's series, made again from its events at each walk instead of held
 * (a point is 80 bytes; this keeps 4 a event and 9 an allocation). The
 * events are the analysis's, which outlives the result.
 */
struct trace_src {
	const struct mem_event *ev;
	size_t n;
	int32_t *aidx;		/* per event: its allocation, -1 none */
	int64_t *asize;		/* per allocation */
	uint8_t *acat;
	int64_t base;		/* allocated before the first event */
};

struct mem_result {
	struct mem_series *series;
	size_t nseries;
	struct trace_src *src;
	struct mem_group **groups;
	char **names;			/* group op names, copied */
	size_t nnames;
};

void mem_result_free(struct mem_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nseries; i++) {
		tp_free(r->src[i].aidx);
		tp_free(r->src[i].asize);
		tp_free(r->src[i].acat);
		tp_free(r->groups[i]);
	}
	tp_free(r->series);
	tp_free(r->src);
	tp_free(r->groups);
	tp_free(r);
}

/* Each event's point, in order, to fn with the baseline there and the bytes allocated */
typedef int (*walk_fn)(void *arg, size_t i, const struct mem_point *p, int64_t base, int64_t allocated);

static int walk(const struct trace_src *t, walk_fn fn, void *arg)
{
	int64_t live[MEM_NCAT] = { 0 }, base = t->base;
	struct mem_point p;
	int rc;

	for (size_t i = 0; i < t->n; i++) {
		const struct mem_event *e = &t->ev[i];
		int32_t a = t->aidx[i];
		int64_t sum, allocated;
		if (a >= 0)
			live[t->acat[a]] = e->bytes > 0 ? tp_sat_add(live[t->acat[a]], t->asize[a])
						       : tp_sat_sub(live[t->acat[a]], t->asize[a]);
		else if (e->bytes < 0 && e->has_addr)
			base = tp_sat_add(base, e->bytes);	/* a block from before the window */
		else if (e->bytes > 0)
			live[CAT_UNKNOWN] = tp_sat_add(live[CAT_UNKNOWN], e->bytes);	/* no address to pair by (PyTorch 1.9 traces) */
		else {
			/* a free with no address: of something unpaired, else of the baseline */
			int64_t freed = tp_sat_sub(0, e->bytes);
			int64_t take = freed < live[CAT_UNKNOWN] ? freed : live[CAT_UNKNOWN];
			live[CAT_UNKNOWN] = tp_sat_sub(live[CAT_UNKNOWN], take);
			base = tp_sat_add(base, tp_sat_add(e->bytes, take));
		}
		memcpy(p.cat, live, sizeof(live));
		p.cat[CAT_PARAMETER] = tp_sat_add(p.cat[CAT_PARAMETER], base);
		sum = mem_point_total(&p);
		/* the allocator's own total is the truth; what pairing missed is unknown */
		allocated = e->has_totals ? e->total_alloc : sum;
		p.cat[CAT_UNKNOWN] = tp_sat_add(p.cat[CAT_UNKNOWN], tp_sat_sub(allocated, sum));
		p.t_ns = e->ts;
		p.reserved = e->has_totals ? e->total_res : -1;
		if ((rc = fn(arg, i, &p, base, allocated)))
			return rc;
	}
	return 0;
}

struct each {
	mem_point_fn fn;
	void *arg;
};

static int each_point(void *arg, size_t i, const struct mem_point *p, int64_t base, int64_t allocated)
{
	const struct each *x = arg;

	(void)i, (void)base, (void)allocated;
	return x->fn(x->arg, p);
}

static int replay(const void *src, mem_point_fn fn, void *arg)
{
	struct each x = { fn, arg };

	return walk(src, each_point, &x);
}

struct peak {
	int64_t best, base;
	size_t at;
};

/* the first point of the most bytes allocated */
static int at_peak(void *arg, size_t i, const struct mem_point *p, int64_t base, int64_t allocated)
{
	struct peak *pk = arg;

	(void)p;
	if (allocated > pk->best) {
		pk->best = allocated;
		pk->at = i;
		pk->base = base;
	}
	return 0;
}

static inline int event_less(const struct mem_event *x, const struct mem_event *y)
{
	if (x->dev_type != y->dev_type)
		return x->dev_type < y->dev_type;
	if (x->dev_id != y->dev_id)
		return x->dev_id < y->dev_id;
	if (x->ts != y->ts)
		return x->ts < y->ts;
	if (x->ev_idx != y->ev_idx)
		return x->ev_idx < y->ev_idx;
	return x->ord < y->ord;
}

/* in place: qsort's merge sort copied the events (50 MiB for a 1 GB trace) */
SORT_DEFINE(sort_events, struct mem_event, event_less)

/* Where the first optimizer step that starts after t does; -1: none. */
static int64_t next_opt(const int64_t *opt_starts, size_t nopt, int64_t t)
{
	size_t lo = 0, hi = nopt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (opt_starts[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < nopt ? opt_starts[lo] : -1;
}

/* One device's events [ev, ev + n): its series into *s, replayed from *t. */
static int one_device(const struct mem_input *in, const struct mem_event *ev, size_t n, struct mem_series *s, struct trace_src *t,
		      struct mem_group **groups_out)
{
	/* per allocation (at most one per event) */
	int64_t *ta = tp_malloc((n + 1) * sizeof(*ta));
	uint32_t *aord = tp_malloc((n + 1) * sizeof(*aord));
	struct mem_amap m = { 0 };
	struct peak pk = { .best = INT64_MIN };
	size_t nal = 0, i;
	int rc = -1;

	*t = (struct trace_src){ .ev = ev, .n = n };
	/* the map grows with the addresses, which the caching allocator reuses: not the events */
	if (!ta || !aord || !(t->aidx = tp_malloc((n + 1) * sizeof(*t->aidx))) ||
	    !(t->asize = tp_malloc((n + 1) * sizeof(*t->asize))) || !(t->acat = tp_malloc(n + 1)) ||
	    mem_amap_init(&m, 64))
		goto out;

	/* pair allocations and frees by address; an allocation's category once its free is known */
	for (i = 0; i < n; i++) {
		const struct mem_event *e = &ev[i];
		t->aidx[i] = -1;
		if (!e->has_addr || !e->bytes)
			continue;
		int32_t *slot = mem_amap_put(&m, e->addr);
		if (!slot)
			goto out;
		if (e->bytes > 0) {
			t->asize[nal] = e->bytes;
			t->acat[nal] = UINT8_MAX;
			ta[nal] = e->ts;
			aord[nal] = e->ord;
			*slot = (int32_t)nal;	/* a new block at an address reused without a free: the old one is lost */
			t->aidx[i] = (int32_t)nal++;
		} else if (*slot >= 0) {
			int32_t k = *slot;
			t->acat[k] = (uint8_t)categorize(&in->ctx[aord[k]], &in->ctx[e->ord], e->ts, in->opt_ends,
							 next_opt(in->opt_starts, in->nopt, ta[k]));
			t->aidx[i] = k;
			*slot = -2;
		}
	}
	mem_amap_free(&m);
	for (i = 0; i < nal; i++)	/* alive at the end */
		if (t->acat[i] == UINT8_MAX)
			t->acat[i] = (uint8_t)categorize(&in->ctx[aord[i]], NULL, -1, in->opt_ends,
							 next_opt(in->opt_starts, in->nopt, ta[i]));

	/* the timeline: one point per event, found again at each walk */
	t->base = ev[0].has_totals ? tp_sat_sub(ev[0].total_alloc, ev[0].bytes) : 0;
	if (!ev[0].has_totals) {
		/* no allocator totals (PyTorch 1.9): what was there before is at least what the
		 * frees ahead of their allocations need, the deepest the sum of Bytes goes below 0 */
		int64_t sum = 0, low = 0;
		for (i = 0; i < n; i++)
			if ((sum = tp_sat_add(sum, ev[i].bytes)) < low)
				low = sum;
		t->base = tp_sat_sub(0, low);
	}
	s->baseline = t->base;
	walk(t, at_peak, &pk);

	/* what was alive at the peak, by category and allocating operator */
	{
		struct mem_group *g = tp_calloc(MEM_MAX_GROUPS + 2, sizeof(*g));
		uint8_t *alive = tp_calloc(nal + 1, 1);
		size_t ng = 0;
		if (!g || !alive) {
			tp_free(g);
			tp_free(alive);
			goto out;
		}
		for (i = 0; i <= pk.at; i++)
			if (t->aidx[i] >= 0)
				alive[t->aidx[i]] = ev[i].bytes > 0;
		for (i = 0; i < nal; i++) {
			if (!alive[i])
				continue;
			const struct mem_ctx *a = &in->ctx[aord[i]];
			const char *op = a->op ? in->str(in->payload, a->op_name) : NULL;
			struct mem_group *x = mem_group_add(g, &ng, t->acat[i], op, NULL);
			if (x) {
				x->bytes = tp_sat_add(x->bytes, t->asize[i]);
				x->count++;
			}
		}
		if (pk.base > 0 && ng < MEM_MAX_GROUPS + 2)
			g[ng++] = (struct mem_group){ .cat = CAT_PARAMETER, .op = NULL, .bytes = pk.base, .count = -1 };
		mem_groups_sort(g, ng);
		tp_free(alive);
		*groups_out = g;
		s->groups = g;
		s->ngroups = ng;
	}
	if (ev[0].dev_type == 0)
		snprintf(s->device, sizeof(s->device), "cpu");
	else
		snprintf(s->device, sizeof(s->device), "cuda:%d", ev[0].dev_id < 0 ? 0 : ev[0].dev_id);
	s->source = "trace";
	s->pts = NULL;
	s->n = n;
	s->replay = replay;
	s->src = t;
	rc = 0;
out:
	tp_free(ta);
	tp_free(aord);
	mem_amap_free(&m);
	return rc;
}

int mem_infer(const struct mem_input *in, struct mem_result **out, const struct mem_series **series,
	      size_t *nseries, struct tp_errbuf *err)
{
	struct mem_result *r = tp_calloc(1, sizeof(*r));
	size_t i, start, ndev = 0;

	if (!r)
		goto oom;
	if (in->nev > 1)
		sort_events(in->ev, in->nev);
	for (i = 0; i < in->nev; i++)
		if (!i || in->ev[i].dev_type != in->ev[i - 1].dev_type || in->ev[i].dev_id != in->ev[i - 1].dev_id)
			ndev++;
	r->series = tp_calloc(ndev + 1, sizeof(*r->series));
	r->src = tp_calloc(ndev + 1, sizeof(*r->src));
	r->groups = tp_calloc(ndev + 1, sizeof(*r->groups));
	if (!r->series || !r->src || !r->groups)
		goto oom;
	for (start = 0, i = 1; i <= in->nev; i++) {
		if (i < in->nev && in->ev[i].dev_type == in->ev[start].dev_type && in->ev[i].dev_id == in->ev[start].dev_id)
			continue;
		if (one_device(in, in->ev + start, i - start, &r->series[r->nseries],
			       &r->src[r->nseries], &r->groups[r->nseries])) {
			r->nseries++;	/* what it made is freed with the rest */
			goto oom;
		}
		r->nseries++;
		start = i;
	}
	*out = r;
	*series = r->series;
	*nseries = r->nseries;
	return TP_OK;
oom:
	mem_result_free(r);
	return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
}
