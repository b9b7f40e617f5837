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
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "analysis/memory.h"
#include "analysis/runs.h"
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
 * A device's series, made again at each walk from a file instead of held: a
 * record per event (struct rp) of what the walk needs, written as the events
 * are paired. An allocation's category, known at its free after its record is
 * written, is found in acat.
 */
enum { RP_ADDR = 1, RP_TOTALS = 2, RP_OP = 4 };

struct rp {
	int64_t ts;
	int64_t bytes;		/* an event paired to an allocation: + or - the allocation's size */
	int64_t total_alloc, total_res;
	int32_t a;		/* its allocation, -1 none */
	uint32_t op_name;	/* an allocation's maker (RP_OP) */
	uint8_t flags;		/* RP_* */
};

#define RP_BUF 1024		/* records read or written at once (48 KiB) */

struct trace_src {
	int fd;			/* the result's file */
	off_t off;		/* where the device's records start */
	size_t n;
	uint8_t *acat;		/* per allocation */
	int64_t base;		/* allocated before the first event */
};

struct mem_result {
	struct mem_series *series;
	struct trace_src *src;
	struct mem_group **groups;
	size_t nseries, scap, tcap, gcap;
	int fd;			/* the series' records, back to back; -1: none yet */
	off_t end;
};

void mem_result_free(struct mem_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nseries; i++) {
		tp_free(r->src[i].acat);
		tp_free(r->groups[i]);
	}
	tp_free(r->series);
	tp_free(r->src);
	tp_free(r->groups);
	if (r->fd >= 0)
		close(r->fd);
	tp_free(r);
}

/* A device's records [0, upto) read back in order. */
struct rpread {
	const struct trace_src *t;
	struct rp *b;
	size_t i, upto;
	int err;		/* errno of a failed read; ENOMEM when there was no buffer */
};

static void rp_open(struct rpread *r, const struct trace_src *t, size_t upto)
{
	*r = (struct rpread){ .t = t, .upto = upto < t->n ? upto : t->n };
	if (!(r->b = tp_malloc(RP_BUF * sizeof(*r->b))))
		r->err = ENOMEM;
}

/* NULL at the end, or when a read failed (r->err) */
static const struct rp *rp_next(struct rpread *r)
{
	size_t k = r->i % RP_BUF;

	if (r->err || r->i >= r->upto)
		return NULL;
	if (!k) {
		size_t want = r->upto - r->i < RP_BUF ? r->upto - r->i : RP_BUF;
		if ((r->err = spill_read(r->t->fd, r->b, want * sizeof(*r->b), r->t->off + (off_t)(r->i * sizeof(*r->b)))))
			return NULL;
	}
	r->i++;
	return &r->b[k];
}

/* TP_OK, or TP_ERR_NOMEM / TP_ERR_IO for what stopped r */
static int rp_close(struct rpread *r)
{
	tp_free(r->b);
	r->b = NULL;
	return !r->err ? TP_OK : r->err == ENOMEM ? TP_ERR_NOMEM : TP_ERR_IO;
}

/* Each event's point, in order, to fn with the baseline there and the bytes allocated */
typedef int (*walk_fn)(void *arg, size_t i, const struct mem_point *p, int64_t base, int64_t allocated);

static int walk(const struct trace_src *t, walk_fn fn, void *arg)
{
	int64_t live[MEM_NCAT] = { 0 }, base = t->base;
	struct mem_point p;
	struct rpread rd;
	const struct rp *e;
	int rc = 0, rrc;

	rp_open(&rd, t, t->n);
	for (size_t i = 0; !rc && (e = rp_next(&rd)); i++) {
		int32_t a = e->a;
		int64_t sum, allocated;
		if (a >= 0)
			live[t->acat[a]] = e->bytes > 0 ? tp_sat_add(live[t->acat[a]], e->bytes)
						       : tp_sat_sub(live[t->acat[a]], tp_sat_sub(0, e->bytes));
		else if (e->bytes < 0 && (e->flags & RP_ADDR))
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
		allocated = (e->flags & RP_TOTALS) ? e->total_alloc : sum;
		p.cat[CAT_UNKNOWN] = tp_sat_add(p.cat[CAT_UNKNOWN], tp_sat_sub(allocated, sum));
		p.t_ns = e->ts;
		p.reserved = (e->flags & RP_TOTALS) ? e->total_res : -1;
		rc = fn(arg, i, &p, base, allocated);
	}
	rrc = rp_close(&rd);
	return rrc ? rrc : rc;
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

static inline int rec_less(const struct mem_rec *x, const struct mem_rec *y)
{
	return event_less(&x->ev, &y->ev);
}

/* in place: qsort's merge sort copies what it sorts */
SORT_DEFINE(sort_recs, struct mem_rec, rec_less)

int mem_rec_less(const void *a, const void *b)
{
	return rec_less(a, b);
}

void mem_rec_sort(void *v, size_t n)
{
	sort_recs(v, n);
}

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

/* An allocation alive, until its free (or the end) gives it a category. */
struct live {
	int64_t ta, size;
	struct mem_ctx ctx;	/* at its allocation */
	int32_t k;		/* the allocation's number */
	int32_t next;		/* in the free list */
};

struct pairing {
	const struct mem_input *in;
	struct trace_src *t;
	struct live *lv;
	size_t nlv, lvcap;
	int32_t free;		/* the first unused lv[], -1: none */
	size_t nal, acap;
};

static void end_alive(struct pairing *p, int32_t li)
{
	const struct live *l = &p->lv[li];

	p->t->acat[l->k] = (uint8_t)categorize(&l->ctx, NULL, -1, p->in->opt_ends,
					       next_opt(p->in->opt_starts, p->in->nopt, l->ta));
	p->lv[li].next = p->free;
	p->free = li;
}

/* A new allocation's number in *o, alive in the slot *slot; -1: out of memory. */
static int alloc_begin(struct pairing *p, int32_t *slot, const struct mem_rec *x, struct rp *o)
{
	int32_t li;

	if (*slot >= 0)
		end_alive(p, *slot);	/* a new block at an address reused without a free: the old one is lost */
	if (tp_grow((void **)&p->t->acat, &p->acap, p->nal + 1, 1))
		return -1;
	if (p->free >= 0) {
		li = p->free;
		p->free = p->lv[li].next;
	} else {
		if (tp_grow((void **)&p->lv, &p->lvcap, p->nlv + 1, sizeof(*p->lv)))
			return -1;
		li = (int32_t)p->nlv++;
	}
	p->lv[li] = (struct live){ .ta = x->ev.ts, .size = x->ev.bytes, .ctx = x->ctx, .k = (int32_t)p->nal };
	p->t->acat[p->nal] = UINT8_MAX;
	*slot = li;
	o->a = (int32_t)p->nal++;
	if (x->ctx.op) {
		o->op_name = x->ctx.op_name;
		o->flags |= RP_OP;
	}
	return 0;
}

/* The free of the allocation alive in *slot: its category, and the record's size its size. */
static void alloc_end(struct pairing *p, int32_t *slot, const struct mem_rec *x, struct rp *o)
{
	struct live *l = &p->lv[*slot];

	p->t->acat[l->k] = (uint8_t)categorize(&l->ctx, &x->ctx, x->ev.ts, p->in->opt_ends,
					       next_opt(p->in->opt_starts, p->in->nopt, l->ta));
	o->a = l->k;
	o->bytes = tp_sat_sub(0, l->size);
	l->next = p->free;
	p->free = *slot;
	*slot = -2;
}

/*
 * One device's events, from *cur on while the device is the same (left at
 * the next device's first, or NULL): paired, their records written to the
 * result's file, the series into *s, replayed from *t.
 */
static int one_device(const struct mem_input *in, struct mem_result *r, struct rcur *c, const struct mem_rec **cur,
		      struct mem_series *s, struct trace_src *t, struct mem_group **groups_out, struct tp_errbuf *err)
{
	const struct mem_rec *x = *cur;
	const int32_t dev_type = x->ev.dev_type, dev_id = x->ev.dev_id;
	const int totals = x->ev.has_totals;
	struct rp *wb = tp_malloc(RP_BUF * sizeof(*wb));
	struct pairing p = { .in = in, .t = t, .free = -1 };
	struct mem_amap m = { 0 };
	struct peak pk = { .best = INT64_MIN };
	int64_t sum = 0, low = 0;
	size_t nw = 0, j;
	int rc = TP_ERR_NOMEM;

	*t = (struct trace_src){ .fd = -1, .off = r->end };
	/* what was there before: the first event's total less its own bytes; with no allocator totals
	 * (PyTorch 1.9), at least what the frees ahead of their allocations need, the deepest the
	 * sum of Bytes goes below 0 */
	t->base = totals ? tp_sat_sub(x->ev.total_alloc, x->ev.bytes) : 0;
	/* the map grows with the addresses, which the caching allocator reuses: not the events */
	if (!wb || mem_amap_init(&m, 64))
		goto out;
	/* pair allocations and frees by address; an allocation's category once its free is known */
	for (; x && x->ev.dev_type == dev_type && x->ev.dev_id == dev_id; x = rcur_next(c)) {
		const struct mem_event *e = &x->ev;
		struct rp *o = &wb[nw++];
		*o = (struct rp){ .ts = e->ts, .bytes = e->bytes, .total_alloc = e->total_alloc, .total_res = e->total_res,
				  .a = -1, .flags = (uint8_t)((e->has_addr ? RP_ADDR : 0) | (e->has_totals ? RP_TOTALS : 0)) };
		if ((sum = tp_sat_add(sum, e->bytes)) < low)
			low = sum;
		t->n++;
		if (e->has_addr && e->bytes) {
			int32_t *slot = mem_amap_put(&m, e->addr);
			if (!slot)
				goto out;
			if (e->bytes > 0) {
				if (alloc_begin(&p, slot, x, o))
					goto out;
			} else if (*slot >= 0) {
				alloc_end(&p, slot, x, o);
			}
		}
		if (nw == RP_BUF) {
			if ((rc = spill_append(&r->fd, "memory", wb, nw * sizeof(*wb), err)))
				goto out;
			r->end += (off_t)(nw * sizeof(*wb));
			nw = 0;
			rc = TP_ERR_NOMEM;
		}
	}
	*cur = x;
	if (c->err) {
		errno = c->err;
		rc = spill_fail(err, "cannot read");
		goto out;
	}
	if (nw && (rc = spill_append(&r->fd, "memory", wb, nw * sizeof(*wb), err)))
		goto out;
	r->end += (off_t)(nw * sizeof(*wb));
	t->fd = r->fd;
	for (j = 0; j < m.cap; j++)	/* alive at the end */
		if (m.val[j] >= 0)
			end_alive(&p, m.val[j]);
	mem_amap_free(&m);
	tp_free(p.lv);
	p.lv = NULL;
	if (!totals)
		t->base = tp_sat_sub(0, low);
	s->baseline = t->base;
	if ((rc = walk(t, at_peak, &pk)))
		goto out;

	/* what was alive at the peak, by category and allocating operator, in the allocations' order */
	{
		struct mem_group *g = tp_calloc(MEM_MAX_GROUPS + 2, sizeof(*g));
		uint8_t *alive = tp_calloc(p.nal + 1, 1);
		const struct rp *e;
		struct rpread rd;
		size_t ng = 0;
		rc = TP_ERR_NOMEM;
		if (!g || !alive) {
			tp_free(g);
			tp_free(alive);
			goto out;
		}
		rp_open(&rd, t, pk.at + 1);
		while ((e = rp_next(&rd)))
			if (e->a >= 0)
				alive[e->a] = e->bytes > 0;
		if (!(rc = rp_close(&rd)))
			rp_open(&rd, t, pk.at + 1);
		while (!rc && (e = rp_next(&rd))) {
			if (e->a < 0 || e->bytes <= 0 || !alive[e->a])
				continue;
			const char *op = (e->flags & RP_OP) ? in->str(in->payload, e->op_name) : NULL;
			struct mem_group *gx = mem_group_add(g, &ng, t->acat[e->a], op, NULL);
			if (gx) {
				gx->bytes = tp_sat_add(gx->bytes, e->bytes);
				gx->count++;
			}
		}
		if (!rc)
			rc = rp_close(&rd);
		tp_free(alive);
		if (rc) {
			tp_free(g);
			goto out;
		}
		if (pk.base > 0 && ng < MEM_MAX_GROUPS + 2)
			g[ng++] = (struct mem_group){ .cat = CAT_PARAMETER, .op = NULL, .bytes = pk.base, .count = -1 };
		mem_groups_sort(g, ng);
		*groups_out = g;
		s->groups = g;
		s->ngroups = ng;
	}
	if (dev_type == 0)
		snprintf(s->device, sizeof(s->device), "cpu");
	else
		snprintf(s->device, sizeof(s->device), "cuda:%d", dev_id < 0 ? 0 : dev_id);
	s->source = "trace";
	s->pts = NULL;
	s->n = t->n;
	s->replay = replay;
	s->src = t;
	rc = TP_OK;
out:
	tp_free(wb);
	tp_free(p.lv);
	mem_amap_free(&m);
	if (rc == TP_ERR_NOMEM)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (rc == TP_ERR_IO && !err->rc) {
		errno = EIO;
		return spill_fail(err, "cannot read");
	}
	return rc;
}

int mem_infer(const struct mem_input *in, struct mem_result **out, const struct mem_series **series,
	      size_t *nseries, struct tp_errbuf *err)
{
	struct mem_result *r = tp_calloc(1, sizeof(*r));
	const struct mem_rec *x = NULL;
	struct rcur c;
	int rc = TP_ERR_NOMEM;

	memset(&c, 0, sizeof(c));
	if (!r)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	r->fd = -1;
	if (rcur_open(&c, in->recs))
		goto fail;
	x = rcur_next(&c);
	while (x) {
		size_t k = r->nseries;
		if (tp_grow((void **)&r->series, &r->scap, k + 1, sizeof(*r->series)) ||
		    tp_grow((void **)&r->src, &r->tcap, k + 1, sizeof(*r->src)) ||
		    tp_grow((void **)&r->groups, &r->gcap, k + 1, sizeof(*r->groups))) {
			rc = TP_ERR_NOMEM;
			goto fail;
		}
		r->series[k] = (struct mem_series){ 0 };
		r->src[k] = (struct trace_src){ .fd = -1 };
		r->groups[k] = NULL;
		r->nseries++;	/* what it makes is freed with the rest */
		if ((rc = one_device(in, r, &c, &x, &r->series[k], &r->src[k], &r->groups[k], err)))
			goto fail;
	}
	if (c.err)
		goto fail;
	rcur_close(&c);
	for (size_t i = 0; i < r->nseries; i++)
		r->series[i].src = &r->src[i];	/* src[] moved as it grew */
	*out = r;
	*series = r->series;
	*nseries = r->nseries;
	return TP_OK;
fail:
	if (c.err && !err->rc) {
		errno = c.err;
		spill_fail(err, "cannot read");
	}
	rcur_close(&c);
	mem_result_free(r);
	return rc == TP_ERR_NOMEM && !err->rc ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : err->rc;
}
