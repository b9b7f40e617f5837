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
#include <fcntl.h>
#include <stdatomic.h>
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
	/* 8. made by an operator outside backward, the optimizer and data loading, and still
	 *    alive at the end: an output of forward the loop still holds (the logits) or a tensor
	 *    saved for a backward after the trace; PyTorch calls both activations (on a path from
	 *    the loss's gradient) */
	if (a->top >= 0)
		return CAT_ACTIVATION;
	/* 9. alive at the end and made by no operator: nothing tells what it is */
	return CAT_UNKNOWN;
}

/*
 * A device's series, made again at each walk from files instead of held: a
 * record per event (struct rp) of what the walk needs, written as the events
 * are paired. An allocation's category, known at its free after its record is
 * written, is found in acat. A model copied from another (mem_model_copy())
 * reads the other's records from a file the two share, and writes its own.
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

/* A walk's state at a block's first point (MEM_PT_BLOCK), enough to go on from there. */
struct ck {
	int64_t live[MEM_NCAT], base;
	struct mem_prefix pre;	/* of the points before */
};

struct cks {
	struct ck *v;
	size_t n, cap;		/* v[0, n): blocks 0 to n - 1 */
};

/* An allocation alive in the model a copy was made from: its number, its record, its category at the end. */
struct alive0 {
	int32_t k;
	uint8_t cat;
	size_t r;
};

struct trace_src {
	int pfd;		/* the first pn records, from the model this one was copied from; -1: none */
	int fd;			/* the rest, from the first byte; -1: none yet */
	size_t pn, n;
	uint8_t *acat;		/* per allocation */
	int64_t base;		/* allocated before the first event */
	/*
	 * A copy's (mem_model_copy()): the model it copied (its serial; 0: not a copy) and what
	 * was alive there, by number; its result's: the last walk's state at each block (NULL: none,
	 * not a copy's: nothing marks it).
	 */
	uint64_t from;
	struct alive0 *al;
	size_t nal0;
	struct cks *ck;
};

struct mem_result {
	struct mem_series *series;
	struct trace_src *src;
	struct mem_group **groups;
	size_t nseries;
};

static void cks_free(struct cks *c)
{
	if (c)
		tp_free(c->v);
	tp_free(c);
}

static void src_free(struct trace_src *t)
{
	tp_free(t->acat);
	tp_free(t->al);
	cks_free(t->ck);
	if (t->pfd >= 0)
		close(t->pfd);
	if (t->fd >= 0)
		close(t->fd);
}

void mem_result_free(struct mem_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nseries; i++) {
		src_free(&r->src[i]);
		tp_free(r->groups[i]);
	}
	tp_free(r->series);
	tp_free(r->src);
	tp_free(r->groups);
	tp_free(r);
}

/* A device's records [0, upto) read back in order. */
struct rpread {
	const struct trace_src *t;
	struct rp *b;
	size_t i, upto, bi, bn;
	int err;		/* errno of a failed read; ENOMEM when there was no buffer */
};

static void rp_open(struct rpread *r, const struct trace_src *t, size_t from, size_t upto)
{
	*r = (struct rpread){ .t = t, .i = from, .upto = upto < t->n ? upto : t->n };
	if (!(r->b = tp_malloc(RP_BUF * sizeof(*r->b))))
		r->err = ENOMEM;
}

/* NULL at the end, or when a read failed (r->err) */
static const struct rp *rp_next(struct rpread *r)
{
	if (r->err || r->i >= r->upto)
		return NULL;
	if (r->bi == r->bn) {
		const struct trace_src *t = r->t;
		size_t want = r->upto - r->i < RP_BUF ? r->upto - r->i : RP_BUF;
		int fd = t->fd;
		off_t off = (off_t)((r->i - t->pn) * sizeof(*r->b));
		if (r->i < t->pn) {	/* the records shared with the model this one was copied from */
			if (want > t->pn - r->i)
				want = t->pn - r->i;
			fd = t->pfd;
			off = (off_t)(r->i * sizeof(*r->b));
		}
		if ((r->err = spill_read(fd, r->b, want * sizeof(*r->b), off)))
			return NULL;
		r->bi = 0;
		r->bn = want;
	}
	r->i++;
	return &r->b[r->bi++];
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

/* The state at block b's first point into c; -1: out of memory */
static int ck_put(struct cks *c, size_t b, const int64_t *live, int64_t base, const struct mem_prefix *pre)
{
	if (b >= c->n && tp_grow((void **)&c->v, &c->cap, b + 1, sizeof(*c->v)))
		return -1;
	memcpy(c->v[b].live, live, sizeof(c->v[b].live));
	c->v[b].base = base;
	c->v[b].pre = *pre;
	if (b >= c->n)
		c->n = b + 1;
	return 0;
}

/*
 * The points from from on (0, or the first of a block t->ck holds), each block's state kept in
 * t->ck on the way when mark (a replay's: the store's walk, that the next result goes on from).
 */
static int walk(const struct trace_src *t, size_t from, int mark, walk_fn fn, void *arg)
{
	int64_t live[MEM_NCAT] = { 0 }, base = t->base;
	struct mem_prefix pre = MEM_PREFIX_INIT;
	struct mem_point p;
	struct rpread rd;
	const struct rp *e;
	int rc = 0, rrc;

	if (from) {
		const struct ck *c = &t->ck->v[from / MEM_PT_BLOCK];
		memcpy(live, c->live, sizeof(live));
		base = c->base;
		pre = c->pre;
	}
	mark = mark && t->ck;
	rp_open(&rd, t, from, t->n);
	for (size_t i = from; !rc && (e = rp_next(&rd)); i++) {
		int32_t a = e->a;
		int64_t sum, allocated;
		if (mark && i % MEM_PT_BLOCK == 0 && ck_put(t->ck, i / MEM_PT_BLOCK, live, base, &pre)) {
			rc = TP_ERR_NOMEM;
			break;
		}
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
		if (mark)
			mem_prefix_add(&pre, &p);
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

	return walk(src, 0, 1, each_point, &x);
}

static int replay_from(const void *src, size_t from, mem_point_fn fn, void *arg)
{
	const struct trace_src *t = src;
	struct each x = { fn, arg };

	if (from % MEM_PT_BLOCK || (from && (!t->ck || from / MEM_PT_BLOCK >= t->ck->n)))
		return TP_ERR_UNSUPPORTED;
	return walk(t, from, 1, each_point, &x);
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
	size_t r;		/* its record */
};

/* One device's events so far: their records, and what pairing the next ones needs. */
struct dev {
	struct mem_event last;	/* the latest event: the next must not be before it */
	int totals;		/* its first event had the allocator's totals */
	int64_t sum, low;	/* the sum of Bytes, and the deepest it went below 0 */
	struct trace_src t;	/* the records; t.base from the first event's totals */
	size_t nal, acap;	/* allocations, and t.acat's room */
	struct mem_amap m;	/* address -> the allocation alive there (lv[]) */
	struct live *lv;
	size_t nlv, lvcap;
	int32_t free;		/* the first unused lv[], -1: none */
	struct rp *wb;		/* records not written yet */
	size_t nw;
	/*
	 * The peak as walk() finds it (struct peak), kept as the records come while each has the
	 * allocator's totals (the bytes allocated there are its, whatever the categories) and none
	 * frees what is not paired without an address (how much that takes from the baseline
	 * depends on them): else (walk_peak) dev_series() walks the records for it.
	 */
	struct peak pk;
	int64_t base;		/* the baseline after the records so far */
	int walk_peak;
};

struct mem_model {
	struct dev *dev;	/* in the order their first events came */
	size_t n, cap, cur;	/* cur: the device of the latest event */
	uint64_t serial;	/* a model's own, for its copies' marks */
};

static atomic_ullong model_serial;

/* *out as a copy of n bytes of p (NULL when n is 0); -1: out of memory */
static int dup_bytes(void **out, const void *p, size_t n)
{
	*out = NULL;
	if (!n)
		return 0;
	if (!(*out = tp_malloc(n)))
		return -1;
	memcpy(*out, p, n);
	return 0;
}

static void dev_free(struct dev *d)
{
	src_free(&d->t);
	mem_amap_free(&d->m);
	tp_free(d->lv);
	tp_free(d->wb);
}

void mem_model_free(struct mem_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		dev_free(&m->dev[i]);
	tp_free(m->dev);
	tp_free(m);
}

struct mem_model *mem_model_new(void)
{
	struct mem_model *m = tp_calloc(1, sizeof(struct mem_model));

	if (m)
		m->serial = atomic_fetch_add(&model_serial, 1) + 1;
	return m;
}

/* x's device, new when it is the first of its events; NULL: out of memory */
static struct dev *dev_of(struct mem_model *m, const struct mem_event *x)
{
	struct dev *d;

	if (m->cur < m->n && m->dev[m->cur].last.dev_type == x->dev_type && m->dev[m->cur].last.dev_id == x->dev_id)
		return &m->dev[m->cur];
	for (m->cur = 0; m->cur < m->n; m->cur++)
		if (m->dev[m->cur].last.dev_type == x->dev_type && m->dev[m->cur].last.dev_id == x->dev_id)
			return &m->dev[m->cur];
	if (tp_grow((void **)&m->dev, &m->cap, m->n + 1, sizeof(*m->dev)))
		return NULL;
	d = &m->dev[m->n];
	*d = (struct dev){ .last = *x, .t = { .pfd = -1, .fd = -1 }, .free = -1 };
	if (!(d->wb = tp_malloc(RP_BUF * sizeof(*d->wb))) || mem_amap_init(&d->m, 64)) {
		dev_free(d);
		return NULL;
	}
	/* what was there before: the first event's total less its own bytes; with no allocator totals
	 * (PyTorch 1.9), at least what the frees ahead of their allocations need, the deepest the
	 * sum of Bytes goes below 0 (at the end) */
	d->totals = x->has_totals;
	d->t.base = d->totals ? tp_sat_sub(x->total_alloc, x->bytes) : 0;
	d->pk.best = INT64_MIN;
	d->base = d->t.base;
	m->cur = m->n++;
	return d;
}

static int dev_flush(struct dev *d, struct tp_errbuf *err)
{
	int rc;

	if (!d->nw)
		return TP_OK;
	if ((rc = spill_append(&d->t.fd, "memory", d->wb, d->nw * sizeof(*d->wb), err)))
		return rc;
	d->nw = 0;
	return TP_OK;
}

/* The category of an allocation alive at the end (or lost: its address reused without a free). */
static uint8_t alive_cat(const struct mem_input *in, const struct live *l)
{
	return (uint8_t)categorize(&l->ctx, NULL, -1, in->opt_ends, next_opt(in->opt_starts, in->nopt, l->ta));
}

/* A new allocation's number in *o, alive in the slot *slot; -1: out of memory. */
static int alloc_begin(struct dev *d, const struct mem_input *in, int32_t *slot, const struct mem_rec *x, struct rp *o)
{
	int32_t li;

	if (*slot >= 0) {	/* a new block at an address reused without a free: the old one is lost */
		struct live *l = &d->lv[*slot];
		d->t.acat[l->k] = alive_cat(in, l);
		l->next = d->free;
		d->free = *slot;
	}
	if (tp_grow((void **)&d->t.acat, &d->acap, d->nal + 1, 1))
		return -1;
	if (d->free >= 0) {
		li = d->free;
		d->free = d->lv[li].next;
	} else {
		if (tp_grow((void **)&d->lv, &d->lvcap, d->nlv + 1, sizeof(*d->lv)))
			return -1;
		li = (int32_t)d->nlv++;
	}
	d->lv[li] = (struct live){ .ta = x->ev.ts, .size = x->ev.bytes, .ctx = x->ctx, .k = (int32_t)d->nal, .r = d->t.n - 1 };
	d->t.acat[d->nal] = UINT8_MAX;
	*slot = li;
	o->a = (int32_t)d->nal++;
	if (x->ctx.op) {
		o->op_name = x->ctx.op_name;
		o->flags |= RP_OP;
	}
	return 0;
}

/* The free of the allocation alive in *slot: its category, and the record's size its size. */
static void alloc_end(struct dev *d, const struct mem_input *in, int32_t *slot, const struct mem_rec *x, struct rp *o)
{
	struct live *l = &d->lv[*slot];

	d->t.acat[l->k] = (uint8_t)categorize(&l->ctx, &x->ctx, x->ev.ts, in->opt_ends,
					      next_opt(in->opt_starts, in->nopt, l->ta));
	o->a = l->k;
	o->bytes = tp_sat_sub(0, l->size);
	l->next = d->free;
	d->free = *slot;
	*slot = -2;
}

static atomic_int peak_walked;	/* mem_peak_test() */
static atomic_ulong peaks_kept;

unsigned long mem_peak_test(int walk)
{
	atomic_store(&peak_walked, walk);
	return atomic_exchange(&peaks_kept, 0);
}

/* The record o, the last, to d's peak (walk(), at_peak()) */
static void peak_add(struct dev *d, const struct rp *o)
{
	if (d->walk_peak)
		return;
	if (!(o->flags & RP_TOTALS) || (o->a < 0 && o->bytes <= 0 && !(o->bytes < 0 && (o->flags & RP_ADDR)))) {
		d->walk_peak = 1;
		return;
	}
	if (o->a < 0 && o->bytes < 0)	/* a block from before the window */
		d->base = tp_sat_add(d->base, o->bytes);
	if (o->total_alloc > d->pk.best)
		d->pk = (struct peak){ .best = o->total_alloc, .at = d->t.n - 1, .base = d->base };
}

int mem_model_add(struct mem_model *m, const struct mem_input *in, const struct mem_rec *x, struct tp_errbuf *err)
{
	const struct mem_event *e = &x->ev;
	struct dev *d = dev_of(m, e);
	struct rp *o;

	if (!d)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (event_less(e, &d->last))
		return TP_ERR_UNSUPPORTED;
	d->last = *e;
	o = &d->wb[d->nw++];
	*o = (struct rp){ .ts = e->ts, .bytes = e->bytes, .total_alloc = e->total_alloc, .total_res = e->total_res,
			  .a = -1, .flags = (uint8_t)((e->has_addr ? RP_ADDR : 0) | (e->has_totals ? RP_TOTALS : 0)) };
	if ((d->sum = tp_sat_add(d->sum, e->bytes)) < d->low)
		d->low = d->sum;
	d->t.n++;
	/* pair allocations and frees by address; an allocation's category once its free is known */
	if (e->has_addr && e->bytes) {
		int32_t *slot = mem_amap_put(&d->m, e->addr);
		if (!slot || (e->bytes > 0 && alloc_begin(d, in, slot, x, o)))
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		if (e->bytes < 0 && *slot >= 0)
			alloc_end(d, in, slot, x, o);
	}
	peak_add(d, o);
	return d->nw == RP_BUF ? dev_flush(d, err) : TP_OK;
}

int mem_model_sync(struct mem_model *m, struct tp_errbuf *err)
{
	int rc = TP_OK;

	for (size_t i = 0; i < m->n && !rc; i++)
		rc = dev_flush(&m->dev[i], err);
	return rc;
}

uint64_t mem_model_bytes(const struct mem_model *m)
{
	uint64_t n = 0;

	if (!m)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct dev *d = &m->dev[i];
		n += (uint64_t)(d->t.n - d->t.pn) * sizeof(struct rp) + RP_BUF * sizeof(struct rp) + d->acap +
		     d->t.nal0 * sizeof(struct alive0) +
		     d->lvcap * sizeof(struct live) + d->m.cap * (sizeof(*d->m.key) + sizeof(*d->m.val));
	}
	return n + m->cap * sizeof(*m->dev);
}

static int alive0_less(const void *x, const void *y)
{
	const struct alive0 *a = x, *b = y;

	return (a->k > b->k) - (a->k < b->k);
}

/* What is alive in s, as its copy d's marks need it (trace_src.al); -1: out of memory */
static int alive_then(struct dev *d, const struct dev *s)
{
	size_t n = 0, j;

	for (j = 0; j < s->m.cap; j++)
		n += s->m.val[j] >= 0;
	if (n && !(d->t.al = tp_malloc(n * sizeof(*d->t.al))))
		return -1;
	for (j = 0; j < s->m.cap; j++)
		if (s->m.val[j] >= 0) {
			const struct live *l = &s->lv[s->m.val[j]];
			d->t.al[d->t.nal0++] = (struct alive0){ .k = l->k, .r = l->r };
		}
	if (n)
		qsort(d->t.al, n, sizeof(*d->t.al), alive0_less);
	return 0;
}

int mem_model_copy(const struct mem_model *m, struct mem_model **out, struct tp_errbuf *err)
{
	struct mem_model *c = mem_model_new();
	int rc = TP_ERR_NOMEM;

	*out = NULL;
	if (!c || (m->n && tp_grow((void **)&c->dev, &c->cap, m->n, sizeof(*c->dev))))
		goto fail;
	for (size_t i = 0; i < m->n; i++) {
		const struct dev *s = &m->dev[i];
		struct dev *d = &c->dev[i];
		if (s->nw || s->t.pfd >= 0) {	/* not synced, or a copy itself */
			rc = TP_ERR_UNSUPPORTED;
			goto fail;
		}
		*d = *s;
		d->t = (struct trace_src){ .pfd = -1, .fd = -1, .pn = s->t.n, .n = s->t.n, .base = s->t.base,
					   .from = m->serial };
		d->m = (struct mem_amap){ 0 };
		d->lv = NULL;
		d->wb = NULL;
		d->acap = d->nal;
		d->lvcap = d->nlv;
		c->n++;	/* what it holds is freed with the rest */
		if (s->t.fd >= 0 && (d->t.pfd = fcntl(s->t.fd, F_DUPFD_CLOEXEC, 0)) < 0) {
			rc = spill_fail(err, "cannot share");
			goto fail;
		}
		if (!(d->wb = tp_malloc(RP_BUF * sizeof(*d->wb))) || mem_amap_copy(&d->m, &s->m) ||
		    dup_bytes((void **)&d->t.acat, s->t.acat, s->nal) ||
		    dup_bytes((void **)&d->lv, s->lv, s->nlv * sizeof(*s->lv)) || alive_then(d, s))
			goto fail;
	}
	c->cur = m->cur;
	*out = c;
	return TP_OK;
fail:
	mem_model_free(c);
	return rc == TP_ERR_NOMEM ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : rc;
}

/*
 * A device's series from its model, which it takes the records of: the
 * categories of what is still alive, the baseline, and what was alive at the
 * peak, by category and allocating operator, in the allocations' order.
 */
static int dev_series(const struct mem_input *in, struct dev *d, struct mem_series *s, struct trace_src *t,
		      struct mem_group **groups_out)
{
	struct peak pk = { .best = INT64_MIN };
	struct mem_group *g;
	uint8_t *alive;
	const struct rp *e;
	struct rpread rd;
	size_t ng = 0, j;
	int rc;

	for (j = 0; j < d->m.cap; j++)	/* alive at the end */
		if (d->m.val[j] >= 0)
			d->t.acat[d->lv[d->m.val[j]].k] = alive_cat(in, &d->lv[d->m.val[j]]);
	if (!d->totals)
		d->t.base = tp_sat_sub(0, d->low);
	for (j = 0; j < d->t.nal0; j++)	/* a copy's: what became of what was alive in the model it copied */
		d->t.al[j].cat = d->t.acat[d->t.al[j].k];
	if (d->t.from && !d->t.ck && !(d->t.ck = tp_calloc(1, sizeof(*d->t.ck))))	/* a copy's walks, for its mark */
		return TP_ERR_NOMEM;
	*t = d->t;
	d->t = (struct trace_src){ .pfd = -1, .fd = -1 };
	s->baseline = t->base;
	if (!d->walk_peak && !atomic_load_explicit(&peak_walked, memory_order_relaxed)) {
		pk = d->pk;
		atomic_fetch_add_explicit(&peaks_kept, 1, memory_order_relaxed);
	} else if ((rc = walk(t, 0, 0, at_peak, &pk)))
		return rc;
	g = tp_calloc(MEM_MAX_GROUPS + 2, sizeof(*g));
	alive = tp_calloc(d->nal + 1, 1);
	if (!g || !alive) {
		tp_free(g);
		tp_free(alive);
		return TP_ERR_NOMEM;
	}
	rp_open(&rd, t, 0, pk.at + 1);
	while ((e = rp_next(&rd)))
		if (e->a >= 0)
			alive[e->a] = e->bytes > 0;
	if (!(rc = rp_close(&rd)))
		rp_open(&rd, t, 0, pk.at + 1);
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
		return rc;
	}
	if (pk.base > 0 && ng < MEM_MAX_GROUPS + 2)
		g[ng++] = (struct mem_group){ .cat = CAT_PARAMETER, .op = NULL, .bytes = pk.base, .count = -1 };
	mem_groups_sort(g, ng);
	*groups_out = g;
	s->groups = g;
	s->ngroups = ng;
	if (d->last.dev_type == 0)
		snprintf(s->device, sizeof(s->device), "cpu");
	else
		snprintf(s->device, sizeof(s->device), "cuda:%d", d->last.dev_id < 0 ? 0 : d->last.dev_id);
	s->source = "trace";
	s->pts = NULL;
	s->n = t->n;
	s->replay = replay;
	s->replay_from = replay_from;
	s->src = t;
	return TP_OK;
}

static int dev_less(const struct dev *x, const struct dev *y)
{
	if (x->last.dev_type != y->last.dev_type)
		return x->last.dev_type < y->last.dev_type;
	return x->last.dev_id < y->last.dev_id;
}

int mem_model_result(struct mem_model *m, const struct mem_input *in, struct mem_result **out,
		     const struct mem_series **series, size_t *nseries, struct tp_errbuf *err)
{
	struct mem_result *r = tp_calloc(1, sizeof(*r));
	int rc = TP_ERR_NOMEM;
	size_t i, k;

	if (!r || (rc = mem_model_sync(m, err)))
		goto out;
	rc = TP_ERR_NOMEM;
	for (i = 1; i < m->n; i++)	/* by device, as the events sort */
		for (k = i; k > 0 && dev_less(&m->dev[k], &m->dev[k - 1]); k--) {
			struct dev x = m->dev[k];
			m->dev[k] = m->dev[k - 1];
			m->dev[k - 1] = x;
		}
	if (m->n && (!(r->series = tp_calloc(m->n, sizeof(*r->series))) || !(r->src = tp_calloc(m->n, sizeof(*r->src))) ||
		     !(r->groups = tp_calloc(m->n, sizeof(*r->groups)))))
		goto out;
	for (rc = TP_OK, i = 0; i < m->n && !rc; i++) {
		r->src[i] = (struct trace_src){ .pfd = -1, .fd = -1 };
		r->nseries++;	/* what it takes is freed with the rest */
		rc = dev_series(in, &m->dev[i], &r->series[i], &r->src[i], &r->groups[i]);
	}
out:
	mem_model_free(m);
	if (rc) {
		mem_result_free(r);
		if (rc == TP_ERR_NOMEM && !err->rc)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		if (rc == TP_ERR_IO && !err->rc) {
			errno = EIO;
			return spill_fail(err, "cannot read");
		}
		return err->rc ? err->rc : rc;
	}
	*out = r;
	*series = r->series;
	*nseries = r->nseries;
	return TP_OK;
}

/* A series' mark: of its source, the copy it came from and its last walk's state at each block. */
struct mark_dev {
	char device[16];
	struct trace_src t;	/* from, pn, base, al, nal0, ck; no records */
};

struct mem_mark {
	size_t n;
	struct mark_dev d[];
};

void mem_mark_free(struct mem_mark *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		src_free(&m->d[i].t);
	tp_free(m);
}

uint64_t mem_mark_bytes(const struct mem_mark *m)
{
	uint64_t n = 0;

	if (!m)
		return 0;
	for (size_t i = 0; i < m->n; i++)
		n += m->d[i].t.nal0 * sizeof(struct alive0) + m->d[i].t.ck->cap * sizeof(struct ck);
	return n + sizeof(*m) + m->n * sizeof(m->d[0]);
}

struct mem_mark *mem_result_mark(struct mem_result *r)
{
	struct mem_mark *m;
	size_t i, n = 0;

	for (i = 0; i < r->nseries; i++)
		n += r->src[i].from && r->src[i].ck && r->src[i].ck->n;
	if (!n || !(m = tp_calloc(1, sizeof(*m) + n * sizeof(m->d[0]))))
		return NULL;
	for (i = 0; i < r->nseries; i++) {
		struct trace_src *t = &r->src[i];
		if (!t->from || !t->ck || !t->ck->n)
			continue;
		m->d[m->n].t = (struct trace_src){ .pfd = -1, .fd = -1, .pn = t->pn, .base = t->base, .from = t->from,
						   .al = t->al, .nal0 = t->nal0, .ck = t->ck };
		memcpy(m->d[m->n++].device, r->series[i].device, sizeof(m->d[0].device));
		t->al = NULL;
		t->nal0 = 0;
		t->ck = NULL;
	}
	return m;
}

/*
 * A point of a copy's series differs from the mark's only past the records the two share (pn)
 * or from the record of the first allocation alive in the model copied whose category is not
 * the mark's: the rest of a point is its records and its allocations' categories, and the
 * categories of those not alive there were found in the model copied.
 */
int mem_result_follow(struct mem_result *r, const struct mem_mark *m)
{
	for (size_t i = 0; m && i < r->nseries; i++) {
		struct trace_src *t = &r->src[i];
		struct mem_series *s = &r->series[i];
		const struct trace_src *md = NULL;
		size_t j, same, b;
		for (j = 0; j < m->n && !md; j++)
			if (!strcmp(m->d[j].device, s->device))
				md = &m->d[j].t;
		if (!md || !t->from || !t->ck || md->from != t->from || t->pn < md->pn || md->base != t->base)
			continue;
		for (same = md->pn, j = 0; j < md->nal0; j++)
			if (t->acat[md->al[j].k] != md->al[j].cat) {	/* by number: the first made */
				if (md->al[j].r < same)
					same = md->al[j].r;
				break;
			}
		b = same / MEM_PT_BLOCK;
		if (b >= md->ck->n)
			b = md->ck->n - 1;
		if (!b)
			continue;
		if (tp_grow((void **)&t->ck->v, &t->ck->cap, b + 1, sizeof(*t->ck->v)))
			return -1;
		memcpy(t->ck->v, md->ck->v, (b + 1) * sizeof(*t->ck->v));
		t->ck->n = b + 1;
		s->same = b * MEM_PT_BLOCK;
		s->pre = md->ck->v[b].pre;
	}
	return 0;
}

int mem_infer(const struct mem_input *in, struct mem_result **out, const struct mem_series **series,
	      size_t *nseries, struct tp_errbuf *err)
{
	struct mem_model *m = mem_model_new();
	const struct mem_rec *x;
	struct rcur c;
	int rc = TP_OK;

	if (!m)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	memset(&c, 0, sizeof(c));
	if (rcur_open(&c, in->recs))
		rc = c.err ? TP_ERR_IO : tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	while (!rc && (x = rcur_next(&c)))
		rc = mem_model_add(m, in, x, err);
	if (!rc && c.err)
		rc = TP_ERR_IO;
	if (rc == TP_ERR_IO && !err->rc) {
		errno = c.err ? c.err : EIO;
		spill_fail(err, "cannot read");
	}
	rcur_close(&c);
	if (rc) {
		mem_model_free(m);
		return err->rc ? err->rc : rc;
	}
	return mem_model_result(m, in, out, series, nseries, err);
}
