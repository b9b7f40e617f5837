/*
 * tables.c: the third pass: operator tables (self and total time, GPU
 * time launched), collectives' before_op windows, memory contexts.
 */
#include "analysis/analysis_int.h"

/* ---- the third pass: operator tables, collectives' before_op, memory contexts ---- */



static int add_op(struct tables *t, uint32_t name, int device, int64_t self, int64_t total, uint64_t first,
		  uint32_t thread)
{
	struct analysis *an = t->an;
	uint32_t *slot = hmap_put(&t->m, (uint64_t)name * 2 + (uint64_t)device, (uint32_t)an->res.nops);
	struct an_op *o;

	if (!slot)
		return -1;
	if (*slot == an->res.nops) {
		if (tp_grow((void **)&an->res.ops, &an->opcap, an->res.nops + 1, sizeof(*o)) ||
		    tp_grow((void **)&t->first, &t->firstcap, an->res.nops + 1, sizeof(*t->first)) ||
		    tp_grow((void **)&t->fthread, &t->fthreadcap, an->res.nops + 1, sizeof(*t->fthread)))
			return -1;
		o = &an->res.ops[an->res.nops];
		*o = (struct an_op){ .name = name, .device = device };
		t->fthread[an->res.nops] = thread;
		t->first[an->res.nops++] = first;
	}
	o = &an->res.ops[*slot];
	o->calls++;
	o->self_ns = tp_sat_add(o->self_ns, self);
	o->total_ns = tp_sat_add(o->total_ns, total);
	if (first < t->first[*slot]) {
		t->first[*slot] = first;
		t->fthread[*slot] = thread;
	}
	return 0;
}

static void emit(struct walk *w, const struct row *r)
{
	struct tables *t = w->arg;
	struct analysis *an = t->an;

	an->res.thread_self_ns[r->thread] = tp_sat_add(an->res.thread_self_ns[r->thread], r->self);
	if (an_inside_op(an, r->name, r->s, r->self) || add_op(t, r->name, AN_DEV_CPU, r->self, r->total, 2 * (uint64_t)r->pos, r->thread) ||
	    (r->gtotal > 0 && r->kind != H_RUNTIME &&
	     add_op(t, r->name, AN_DEV_GPU, r->gself, r->gtotal, 2 * (uint64_t)r->pos + 1, r->thread)))
		w->nomem = 1;
}

/* An operator proper: not a runtime call, not a user annotation. */
static int is_op(const struct row *r)
{
	return r->kind != H_RUNTIME && !r->ann;
}

/*
 * A span's row, once its subtree is done. PyTorch's
 * EventList._remove_dup_nodes (key_averages()), which torch-tb-profiler's
 * op tree repeats: an operator whose only child (runtime calls aside) is an
 * operator of the same name is one call, not two. The child's self time and
 * the GPU time it launched go to the parent, and the child is no row of its
 * own; a child's row waits in its parent's frame until the parent knows
 * whether it has one child. Deepest first, so that a chain of three becomes
 * one. gtotal: the GPU time launched in the subtree.
 */
void an_ops_pop(struct walk *w, struct frame *f, struct frame *p)
{
	struct row me;

	if (f->has_pend) {
		if (f->kids == 1 && is_op(&f->pend) && f->kind != H_RUNTIME && !f->ann && f->pend.name == f->name) {
			f->self += f->pend.self;
			f->gself = tp_sat_add(f->gself, f->pend.gself);
		} else {
			emit(w, &f->pend);
		}
	}
	me = (struct row){ .self = f->self, .total = f->e - f->s, .gself = f->gself, .gtotal = f->gtotal,
			   .s = f->s, .pos = f->pos, .name = f->name, .thread = f->thread, .kind = f->kind, .ann = f->ann };
	if (p)
		p->gtotal = tp_sat_add(p->gtotal, f->gtotal);
	if (p && f->kind != H_RUNTIME && ++p->kids == 1) {
		p->pend = me;
		p->has_pend = 1;
		return;
	}
	emit(w, &me);
}

/*
 * A [memory] event's context: what was around it on its thread, from the
 * spans open there (w's stack, when its top is the last span of the event's
 * thread that starts at or before it) going out, past the ones that ended
 * before it.
 */
static void mem_context(struct tables *t, const struct walk *w, const struct mem_event *e, struct mem_ctx *c)
{
	size_t d;

	*c = (struct mem_ctx){ .top = -1 };
	if (e->thread >= t->an->threads.n)
		return;
	c->backward = t->an->bwd[e->thread];
	if (!w->depth || w->st[w->depth - 1].thread != e->thread)
		return;
	for (d = w->depth; d-- > 0;) {
		const struct frame *s = &w->st[d];
		if (s->e <= e->ts && !(s->e == s->s && s->s == e->ts))
			continue;
		c->flags |= s->ms;
		if (!(s->ms & MS_RUNTIME)) {
			if (!c->op) {
				c->op = 1;
				c->op_name = s->name;
			}
			if (!(s->ms & MS_ANNOTATION))
				c->top = (int32_t)s->pos;	/* the last one met is the outermost */
		}
		if (s->ms & MS_OPT_STEP) {
			c->opt = s->opt;
		}
	}
	if (c->flags & MS_BACKWARD)
		c->backward = 1;
}

/* The next window into t->win (t->has_win: one was left). */
void an_window_read(struct tables *t)
{
	const struct analysis *an = t->an;
	const struct kcoll *k = t->wn;
	int64_t lo = INT64_MIN;
	int32_t st;

	if (!k) {
		t->has_win = 0;
		return;
	}
	/* the window before it on its thread (t->win, done) starts it */
	if (t->has_win && t->win.k.c.thread == k->c.thread)
		lo = t->win.k.c.launch_ns;
	t->has_win = 1;
	if ((st = an_step_at(an, k->c.launch_ns)) >= 0 && an->cpu_steps[st].s > lo)
		lo = an->cpu_steps[st].s;
	t->win = (struct window){ .k = *k, .lo = lo };
	t->wn = rcur_next(&t->wc);
}

/* t->win is final: into the result's runs (an->co), and the next read. -1: the write failed. */
int an_window_done(struct tables *t)
{
	if (runs_add(&t->an->co, &t->win.k, t->err))
		return -1;
	an_window_read(t);
	return 0;
}

/*
 * an_coll.before_op: on the launching thread, from the thread's previous
 * collective launch (or the step's start, whichever is later) to this
 * launch, the top-level operator (no parent; not a collective, not a
 * runtime call) with the most time there, the first of equals. Top-level
 * spans do not overlap, and neither do a thread's windows (by launch), so
 * they are swept together, a window at a time: one that a span ends after
 * is final. -1: a write failed.
 */
static int before_op(struct tables *t, const struct frame *f)
{
	struct an_coll *c = &t->win.k.c;
	uint16_t nc;

	while (t->has_win && (c->thread < f->thread || (c->thread == f->thread && c->launch_ns <= f->s)))
		if (an_window_done(t))
			return -1;
	if (f->kind == H_RUNTIME || an_cls_of(t->an, f->name, &nc) || (nc & N_COMM_OP))
		return 0;
	while (t->has_win && c->thread == f->thread && t->win.lo < f->e) {
		int64_t a = f->s > t->win.lo ? f->s : t->win.lo, b = f->e < c->launch_ns ? f->e : c->launch_ns;
		if (b - a > c->before_ns) {
			c->before_op = f->name;
			c->before_ns = b - a;
		}
		if (c->launch_ns > f->e)
			break;	/* a later span may reach it */
		if (an_window_done(t))
			return -1;
	}
	return 0;
}

/* m goes before span r in the tables pass: the spans of its thread that start at or before it are up */
static inline int mev_before(const struct mem_event *m, const struct hrec *r)
{
	return m->thread < r->thread || (m->thread == r->thread && m->ts < r->s);
}

int an_tables_visit(struct walk *w, const struct hrec *r)
{
	struct tables *t = w->arg;
	struct analysis *an = t->an;
	struct frame *f;

	/* each [memory] event with its context, into runs by device for the memory model */
	while (t->me && (!r || mev_before(t->me, r))) {
		struct mem_rec *o = runs_reserve(&an->d, 1, t->err);
		if (!o)
			return -1;
		o->ev = *t->me;
		mem_context(t, w, t->me, &o->ctx);
		runs_commit(&an->d, 1);
		t->me = rcur_next(&t->mc);
	}
	if (!r)
		return 0;
	if (!(f = an_walk_push(w, r)))
		return -1;
	f->self = f->end - f->s;
	f->gself = 0;
	f->kids = 0;
	f->has_pend = 0;
	if (w->depth > 1)
		w->st[w->depth - 2].self -= f->end - f->s;
	while (t->gn && t->gn->pos < f->pos)
		t->gn = rcur_next(&t->gc);
	for (; t->gn && t->gn->pos == f->pos; t->gn = rcur_next(&t->gc))
		f->gself = tp_sat_add(f->gself, t->gn->dur);
	f->gtotal = f->gself;
	if (an->nmev && (f->ms = an_ms_flags(an, f)) & MS_OPT_STEP)
		f->opt = ++t->nopt;	/* the first pass met them in this order too */
	return w->depth == 1 && t->has_win ? before_op(t, f) : 0;
}

struct opfirst {
	uint64_t first;
	uint32_t i;
};

static int cmp_opfirst(const void *a, const void *b)
{
	const struct opfirst *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

/* ops[] in the order its rows first came (the order of a walk over the sorted spans), and where (analysis_merge()) */
int an_order_ops(struct analysis *an, const uint64_t *first, const uint32_t *thread)
{
	size_t i, n = an->res.nops;
	struct opfirst *o = tp_malloc((n + 1) * sizeof(*o));
	struct an_op *v = tp_malloc((n + 1) * sizeof(*v));

	an->opfirst = tp_malloc((n + 1) * sizeof(*an->opfirst));
	an->opthread = tp_malloc((n + 1) * sizeof(*an->opthread));
	if (!o || !v || !an->opfirst || !an->opthread) {
		tp_free(o);
		tp_free(v);
		return -1;
	}
	for (i = 0; i < n; i++)
		o[i] = (struct opfirst){ first[i], (uint32_t)i };
	if (n > 1)
		qsort(o, n, sizeof(*o), cmp_opfirst);
	for (i = 0; i < n; i++) {
		v[i] = an->res.ops[o[i].i];
		an->opfirst[i] = o[i].first;
		an->opthread[i] = thread[o[i].i];
	}
	tp_free(an->res.ops);
	an->res.ops = v;
	an->opcap = n + 1;
	tp_free(o);
	return 0;
}
