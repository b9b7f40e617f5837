/*
 * parts.c: a rank analysed in parts (analysis.h): parts that follow one
 * another, merged into one analysis that answers as the whole would.
 */
#include "analysis/analysis_int.h"

/* ---- parts (analysis.h) ---- */

void analysis_set_part(struct analysis *an)
{
	an->part = 1;
}

void analysis_bounds(const struct analysis *an, int64_t *lo, int64_t *hi)
{
	*lo = an->tlo;
	*hi = an->thi;
}

size_t analysis_steps(const struct analysis *an)
{
	return an->ncs;
}

void analysis_step_span(const struct analysis *an, size_t i, int64_t *start, int64_t *end)
{
	*start = an->cpu_steps[i].s;
	*end = an->cpu_steps[i].e;
}

/* A part numbering threads as threads says and adding to kt's kernel table (NULL: none). */
static struct analysis *new_seeded(const struct analysis *like, const struct hmap *threads, const struct analysis *kt,
				   struct tp_errbuf *err)
{
	struct analysis *f = analysis_new(like->str, like->payload);

	if (!f) {
		an_nomem(err);
		return NULL;
	}
	analysis_set_run(f, like->h.limit);
	f->part = 1;
	if (hmap_copy(&f->threads, threads) ||
	    (kt && (hmap_copy(&f->kmap, &kt->kmap) ||
		    an_dup_array(&f->res.kernels, kt->res.kernels, kt->res.nkernels, sizeof(*kt->res.kernels))))) {
		analysis_free(f);
		an_nomem(err);
		return NULL;
	}
	if (kt)
		f->res.nkernels = f->kcap = kt->res.nkernels;
	return f;
}

struct analysis *analysis_new_after(const struct analysis *prev, struct tp_errbuf *err)
{
	struct analysis *f;

	if (!prev->finished || !prev->part || prev->nparts) {
		tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "analysis_new_after: not a finished part");
		return NULL;
	}
	if (!(f = new_seeded(prev, &prev->threads, prev, err)))
		return NULL;
	f->has_prev = prev->ncs > 0 && !prev->whole;
	f->prev_step = prev->last_step;
	f->seeded = prev->threads.n;
	return f;
}

struct analysis *analysis_new_like(const struct analysis *an, const struct analysis *kt, struct tp_errbuf *err)
{
	struct analysis *f;

	if (an->finishing || (kt && !kt->finished)) {
		tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "analysis_new_like: finished, or a table not");
		return NULL;
	}
	if (!(f = new_seeded(an, &an->threads, kt, err)))
		return NULL;
	f->part = an->part;
	f->has_prev = an->has_prev;
	f->prev_step = an->prev_step;
	f->seeded = an->seeded;
	return f;
}

/* Where a merge's op i first came, to order the merge's rows as one walk over all parts would. */
struct opkey {
	uint32_t thread, part;
	uint64_t first;
};

static struct opkey opkey_of(const struct analysis *an, size_t i, uint32_t part)
{
	return (struct opkey){ an->opthread[i], an->oppart ? an->oppart[i] : part, an->opfirst[i] };
}

static int opkey_less(const struct opkey *x, const struct opkey *y)
{
	if (x->thread != y->thread)
		return x->thread < y->thread;
	return x->part != y->part ? x->part < y->part : x->first < y->first;
}

struct oprow {
	struct an_op op;
	struct opkey key;
};

static int cmp_oprow(const void *a, const void *b)
{
	const struct oprow *x = a, *y = b;

	return opkey_less(&x->key, &y->key) ? -1 : opkey_less(&y->key, &x->key);
}

/* The operator rows of a (a merge; NULL: none) and b (a part), summed by name and device, into out's. */
static int merge_ops(struct analysis *out, const struct analysis *a, const struct analysis *b)
{
	size_t na = a ? a->res.nops : 0, n = 0, i;
	struct oprow *v = tp_malloc((na + b->res.nops + 1) * sizeof(*v));
	struct hmap m = { 0 };
	int rc = -1;

	if (!v)
		return -1;
	for (i = 0; i < na; i++) {
		const struct an_op *o = &a->res.ops[i];
		if (!hmap_put(&m, (uint64_t)o->name * 2 + (uint64_t)o->device, (uint32_t)n))
			goto out;
		v[n++] = (struct oprow){ *o, opkey_of(a, i, 0) };
	}
	for (i = 0; i < b->res.nops; i++) {
		const struct an_op *o = &b->res.ops[i];
		struct opkey k = opkey_of(b, i, a ? a->nparts : 0);
		uint32_t *slot = hmap_put(&m, (uint64_t)o->name * 2 + (uint64_t)o->device, (uint32_t)n);
		if (!slot)
			goto out;
		if (*slot == n) {
			v[n++] = (struct oprow){ *o, k };
			continue;
		}
		struct oprow *r = &v[*slot];
		r->op.calls += o->calls;
		r->op.self_ns = tp_sat_add(r->op.self_ns, o->self_ns);
		r->op.total_ns = tp_sat_add(r->op.total_ns, o->total_ns);
		if (opkey_less(&k, &r->key))
			r->key = k;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_oprow);
	struct an_op *ops = tp_malloc((n + 1) * sizeof(*ops));
	uint64_t *first = tp_malloc((n + 1) * sizeof(*first));
	uint32_t *thread = tp_malloc((n + 1) * sizeof(*thread)), *part = tp_malloc((n + 1) * sizeof(*part));
	if (!ops || !first || !thread || !part) {
		tp_free(ops), tp_free(first), tp_free(thread), tp_free(part);
		goto out;
	}
	for (i = 0; i < n; i++) {
		ops[i] = v[i].op;
		first[i] = v[i].key.first;
		thread[i] = v[i].key.thread;
		part[i] = v[i].key.part;
	}
	/* out may be a: its rows are read by now (the caller frees a's) */
	out->res.ops = ops;
	out->opfirst = first;
	out->opthread = thread;
	out->oppart = part;
	out->res.nops = n;
	out->opcap = n + 1;
	rc = 0;
out:
	hmap_free(&m);
	tp_free(v);
	return rc;
}

/* b's [memory] events as one analysis of all parts places them: after a's spans, optimizer steps, events */
struct memfix {
	int64_t pos;
	uint32_t opt, ord;
};

/*
 * And, read back for the memory model, their threads and backward as all the
 * parts know them: a thread with no spans in its part (MEM_NO_SPANS | its index
 * in the merge's mkeys, add_part_recs()) may have some in another.
 */
static void mem_resolve(void *ctx, void *recs, size_t n)
{
	const struct analysis *o = ctx;
	struct mem_rec *r = recs;

	for (size_t i = 0; i < n; i++) {
		uint32_t t = r[i].ev.thread;
		if (t != UINT32_MAX && (t & MEM_NO_SPANS) && (t & ~MEM_NO_SPANS) < o->nmkeys)
			t = hmap_get(&o->threads, o->mkeys[t & ~MEM_NO_SPANS]);
		/* mem_context(): the thread's, or what encloses it in backward */
		r[i].ctx.backward = t < o->threads.n && (o->bwd[t] || (r[i].ctx.flags & MS_BACKWARD));
	}
}

/*
 * b's collectives and [memory] events (placed after a's: f) into o's runs, not
 * sealed; and, while *fed, the events as o resolves them to feed, o's memory
 * model going on (*fed 0 when one is before those it has).
 */
static int add_part_recs(struct analysis *o, const struct analysis *b, const struct memfix *f,
			 struct mem_model *feed, int *fed, struct tp_errbuf *err)
{
	struct mem_input in = an_mem_input_of(o);
	const void *p;
	struct rcur c;
	int rc = TP_OK;

	if (rcur_open(&c, &b->co))
		return an_rcur_fail(&c, err);
	while (!rc && (p = rcur_next(&c)))
		rc = runs_add(&o->co, p, err);
	if (rc || c.err)
		return rc ? (rcur_close(&c), rc) : an_rcur_fail(&c, err);
	rcur_close(&c);
	if (!b->nmev)
		return TP_OK;
	if (rcur_open(&c, &b->d))
		return an_rcur_fail(&c, err);
	while ((p = rcur_next(&c))) {
		struct mem_rec *r = runs_reserve(&o->d, 1, err);
		if (!r) {
			rcur_close(&c);
			return err->rc;
		}
		*r = *(const struct mem_rec *)p;
		uint32_t t = r->ev.thread;
		if (t != UINT32_MAX && (t & MEM_NO_SPANS) && (t & ~MEM_NO_SPANS) < b->nmkeys) {	/* by the merge's index */
			uint64_t key = b->mkeys[t & ~MEM_NO_SPANS];
			if (an_mem_thread_key(o, key)) {
				rcur_close(&c);
				return an_nomem(err);
			}
			r->ev.thread = MEM_NO_SPANS | hmap_get(&o->mthreads, key);
		}
		if (r->ctx.top >= 0)
			r->ctx.top = (int32_t)(r->ctx.top + f->pos);
		if (r->ctx.opt)
			r->ctx.opt += f->opt;
		r->ev.ord += f->ord;
		if (*fed) {
			struct mem_rec x = *r;
			mem_resolve(o, &x, 1);
			if ((rc = mem_model_add(feed, &in, &x, err)) == TP_ERR_UNSUPPORTED)
				*fed = 0, rc = TP_OK;
			if (rc) {
				rcur_close(&c);
				return rc;
			}
		}
		runs_commit(&o->d, 1);
	}
	if (c.err)
		return an_rcur_fail(&c, err);
	rcur_close(&c);
	return TP_OK;
}

/* [lo1, hi1] and [lo2, hi2] (empty when lo > hi) share nothing */
static int apart(int64_t lo1, int64_t hi1, int64_t lo2, int64_t hi2)
{
	return lo1 > hi1 || lo2 > hi2 || hi1 < lo2 || hi2 < lo1;
}

/* What parts_meet() asks of a and b besides b's collectives. */
static int follows(const struct analysis *a, const struct analysis *b)
{
	int64_t pos;

	return b->has_prev && b->prev_step == a->last_step && b->seeded == a->threads.n && a->thi < b->tlo &&
	       (a->cmax == INT64_MIN || b->cmin == INT64_MAX || a->cmax < b->cmin) &&
	       /* (an operator's External id is not always above those before it: the autograd thread's) */
	       apart(a->xmin, a->xmax, b->emin, b->emax) && apart(b->xmin, b->xmax, a->emin, a->emax) &&
	       (a->ng > 0) == (b->ng > 0) && (a->nmev > 0) == (b->nmev > 0) &&
	       !__builtin_add_overflow((int64_t)a->nh, (int64_t)b->nh, &pos) && pos <= INT32_MAX;
}

/* b may follow a (a merge; NULL: none): nothing crosses from one to the other */
static int parts_meet(const struct analysis *a, const struct analysis *b, struct tp_errbuf *err)
{
	struct rcur c;
	const struct kcoll *k;
	int outside = 0;

	if (!b->finished || !b->part || b->nparts || b->whole || !b->ncs || (a && (!a->finished || !a->part)))
		goto no;
	if (!a) {
		if (b->has_prev)
			goto no;
		return TP_OK;
	}
	if (!follows(a, b))
		goto no;
	/* one of b's collectives outside a step could look back into a (before_op()) */
	if (rcur_open(&c, &b->co))
		return an_rcur_fail(&c, err);
	while ((k = rcur_next(&c)) && !outside)
		outside = k->c.step < 0;
	if (c.err)
		return an_rcur_fail(&c, err);
	rcur_close(&c);
	if (!outside)
		return TP_OK;
no:
	return tp_fail(err, TP_ERR_UNSUPPORTED, "parts_overlap", "the parts do not follow one another");
}

int analysis_follows(const struct analysis *a, const struct analysis *b)
{
	struct tp_errbuf err = { 0 };

	return !a->nparts && parts_meet(a, b, &err) == TP_OK;
}

/*
 * What o (a merge, or new) takes of a (o itself, a merge, or NULL) and b: steps, operator
 * rows, threads' self time and backward, optimizer steps, counts and bounds, and b's
 * kernel table and thread numbers (theirs so far); not the collectives and [memory]
 * events themselves (add_part_recs()).
 */
static int combine(struct analysis *o, const struct analysis *a, const struct analysis *b)
{
	size_t na = a ? a->res.nsteps : 0, nt = b->res.nthreads, i;
	struct an_op *ops = o->res.ops;
	uint64_t *first = o->opfirst;
	uint32_t *thread = o->opthread, *part = o->oppart;
	struct an_kernel *kernels = NULL;
	struct hmap threads = { 0 }, kmap = { 0 };
	int64_t *self;
	uint8_t *bwd;

	if (!(self = tp_calloc(nt + 1, sizeof(*self))))
		return -1;
	if (!(bwd = tp_calloc(b->threads.n + 1, 1))) {
		tp_free(self);
		return -1;
	}
	struct an_step *st = tp_malloc((na + b->res.nsteps + 1) * sizeof(*st));
	int64_t *opt = tp_malloc(((a ? a->nopt : 0) + b->nopt + 1) * sizeof(*opt));
	int64_t *opte = tp_malloc(((a ? a->nopt : 0) + b->nopt + 1) * sizeof(*opte));
	if (!st || !opt || !opte || hmap_copy(&threads, &b->threads) || hmap_copy(&kmap, &b->kmap) ||
	    an_dup_array(&kernels, b->res.kernels, b->res.nkernels, sizeof(*kernels)) || merge_ops(o, a, b)) {
		tp_free(st), tp_free(opt), tp_free(opte), tp_free(self), tp_free(bwd), tp_free(kernels);
		hmap_free(&threads);
		hmap_free(&kmap);
		return -1;
	}
	if (o == a) {	/* merge_ops() made o's rows anew */
		tp_free(ops), tp_free(first), tp_free(thread), tp_free(part);
	}
	/* steps, in start order: a's end before b's begin */
	if (na)
		memcpy(st, a->res.steps, na * sizeof(*st));
	if (b->res.nsteps)
		memcpy(st + na, b->res.steps, b->res.nsteps * sizeof(*st));
	for (i = 0; i < nt; i++)
		self[i] = tp_sat_add(b->res.thread_self_ns[i], a && i < a->res.nthreads ? a->res.thread_self_ns[i] : 0);
	for (i = 0; i < b->threads.n; i++)
		bwd[i] = (b->bwd && b->bwd[i]) || (a && a->bwd && i < a->threads.n && a->bwd[i]);
	if (a && a->nopt) {
		memcpy(opt, a->opt, a->nopt * sizeof(*opt));
		memcpy(opte, a->opte, a->nopt * sizeof(*opte));
	}
	if (b->nopt) {	/* after a's: add_part_recs() counts b's so */
		memcpy(opt + (a ? a->nopt : 0), b->opt, b->nopt * sizeof(*opt));
		memcpy(opte + (a ? a->nopt : 0), b->opte, b->nopt * sizeof(*opte));
	}
	/* the counts and bounds, from a's before o (which may be a) takes them */
	o->nh = (a ? a->nh : 0) + b->nh;
	o->ng = (a ? a->ng : 0) + b->ng;
	o->nmev = (a ? a->nmev : 0) + b->nmev;
	o->nopt = o->optcap = o->optecap = (a ? a->nopt : 0) + b->nopt;
	o->tlo = a ? a->tlo : b->tlo;
	o->thi = b->thi;
	o->cmin = a && a->cmin != INT64_MAX ? a->cmin : b->cmin;
	o->cmax = b->cmax != INT64_MIN ? b->cmax : a ? a->cmax : INT64_MIN;
	o->emin = a && a->emin < b->emin ? a->emin : b->emin;
	o->emax = a && a->emax > b->emax ? a->emax : b->emax;
	o->xmin = a && a->xmin < b->xmin ? a->xmin : b->xmin;
	o->xmax = a && a->xmax > b->xmax ? a->xmax : b->xmax;
	o->glast = a && a->glast > b->glast ? a->glast : b->glast;
	o->last_step = b->last_step;
	o->nparts = (a ? a->nparts : 0) + 1;
	o->res.ncolls = (a ? a->res.ncolls : 0) + b->res.ncolls;
	tp_free(o->res.steps), tp_free(o->res.thread_self_ns), tp_free(o->bwd), tp_free(o->opt), tp_free(o->opte);
	tp_free(o->res.kernels);
	hmap_free(&o->threads);
	hmap_free(&o->kmap);
	o->res.steps = st;
	o->res.nsteps = na + b->res.nsteps;
	an_mark_incomplete(o->res.steps, o->res.nsteps, o->glast);
	o->res.thread_self_ns = self;
	o->res.nthreads = nt;
	o->bwd = bwd;
	o->opt = opt;
	o->opte = opte;
	o->threads = threads;
	o->kmap = kmap;
	o->res.kernels = kernels;
	o->res.nkernels = o->kcap = b->res.nkernels;
	return an_inside_combine(o, a, b);
}

/* a new merge, empty, for parts like b */
static struct analysis *merge_new(const struct analysis *b)
{
	struct analysis *o = analysis_new(b->str, b->payload);

	if (o) {
		o->part = o->finished = 1;
		o->mwent = -1;
		o->co.limit = b->co.limit;
		o->d.limit = b->d.limit;
	}
	return o;
}

/*
 * a's memory model goes on in o, which takes b after a, as the model of all
 * of o's events would: a's events resolve their threads in o as they did in a
 * (mem_resolve()). The rest holds as the parts meet (parts_meet()): a's bounds
 * take its [memory] events, so b's events and optimizer steps (a free's
 * category asks for the first step after its allocation) all come after a's.
 */
static int model_holds(const struct analysis *a, const struct analysis *o)
{
	size_t i;

	if (!a->mm)
		return 0;
	for (i = 0; i < a->mmnt; i++)
		if ((i < o->threads.n && o->bwd && o->bwd[i]) != a->mmbwd[i])
			return 0;
	for (i = 0; i < a->mmnk; i++)
		if (i >= o->nmkeys || hmap_get(&o->threads, o->mkeys[i]) != a->mmres[i])
			return 0;
	return 1;
}

/* What o's model resolved its events' threads with, for model_holds() */
static int model_mark(struct analysis *o)
{
	uint8_t *bwd = tp_calloc(o->threads.n + 1, 1);
	uint32_t *res = tp_malloc((o->nmkeys + 1) * sizeof(*res));
	size_t i;

	if (!bwd || !res) {
		tp_free(bwd);
		tp_free(res);
		return -1;
	}
	for (i = 0; i < o->threads.n; i++)
		bwd[i] = o->bwd && o->bwd[i];
	for (i = 0; i < o->nmkeys; i++)
		res[i] = hmap_get(&o->threads, o->mkeys[i]);
	tp_free(o->mmbwd);
	tp_free(o->mmres);
	o->mmbwd = bwd;
	o->mmres = res;
	o->mmnt = o->threads.n;
	o->mmnk = o->nmkeys;
	return 0;
}

/* o's memory model made again from all its events (o->d, unsealed; kept) */
static int model_build(struct analysis *o, struct tp_errbuf *err)
{
	struct mem_input in = an_mem_input_of(o);
	struct runs d;
	struct rcur c;
	const struct mem_rec *x;
	int rc;

	mem_model_free(o->mm);
	o->mm = NULL;
	if ((rc = runs_fork(&d, &o->d, err)))
		return rc;
	if ((rc = runs_seal(&d, err)) || !(o->mm = mem_model_new())) {
		runs_free(&d);
		return rc ? rc : an_nomem(err);
	}
	d.fix = mem_resolve;
	d.fixctx = o;
	if (!d.nruns)
		mem_resolve(o, d.buf, d.n);
	if (rcur_open(&c, &d)) {
		runs_free(&d);
		return an_rcur_fail(&c, err);
	}
	while (!rc && (x = rcur_next(&c)))
		if ((rc = mem_model_add(o->mm, &in, x, err)) == TP_ERR_UNSUPPORTED)	/* sorted: not so */
			rc = tp_fail(err, TP_ERR_IO, NULL, "memory model: events out of order");
	if (!rc && c.err)
		rc = an_rcur_fail(&c, err);
	else
		rcur_close(&c);
	runs_free(&d);
	return rc ? rc : mem_model_sync(o->mm, err);
}

int analysis_absorb(struct analysis **acc, const struct analysis *b, struct tp_errbuf *err)
{
	struct analysis *a = *acc, *o = a;
	struct memfix f = { 0 };
	int rc, fed;

	if ((rc = parts_meet(a, b, err)))
		return rc;
	if (a)
		f = (struct memfix){ (int64_t)a->nh, (uint32_t)a->nopt, (uint32_t)a->nmev };
	if (!o && !(o = merge_new(b)))
		return an_nomem(err);
	if (combine(o, a, b)) {
		rc = an_nomem(err);
		goto fail;
	}
	/* the memory model of the parts so far goes on with b's events, or is made again */
	fed = o->nmev && (a && a->nmev ? model_holds(a, o) : (o->mm = mem_model_new()) != NULL);
	if ((rc = add_part_recs(o, b, &f, o->mm, &fed, err)))
		goto fail;
	if (o->nmev) {
		rc = fed ? mem_model_sync(o->mm, err) : model_build(o, err);
		o->mwent = fed;
		if (!rc && model_mark(o))
			rc = an_nomem(err);
		if (rc)
			goto fail;
	}
	*acc = o;
	return TP_OK;
fail:	/* a is left half way: dropped */
	if (o != a)
		analysis_free(o);
	return rc;
}

int analysis_merge(const struct analysis *a, const struct analysis *b, struct analysis **out, struct tp_errbuf *err)
{
	struct memfix f = { 0 };
	struct mem_model *feed = NULL;
	struct analysis *o;
	int rc, fed = 0;

	*out = NULL;
	if ((rc = parts_meet(a, b, err)))
		return rc;
	if (a)
		f = (struct memfix){ (int64_t)a->nh, (uint32_t)a->nopt, (uint32_t)a->nmev };
	if (!(o = merge_new(b)))
		return an_nomem(err);
	/* a's collectives and [memory] events shared, not copied (runs_fork()), b's after them */
	rc = TP_ERR_NOMEM;
	if (combine(o, a, b) ||
	    (a && (hmap_copy(&o->mthreads, &a->mthreads) || an_dup_array(&o->mkeys, a->mkeys, a->nmkeys, sizeof(*a->mkeys)))))
		goto fail;
	o->nmkeys = o->mkeycap = a ? a->nmkeys : 0;
	/* the memory model: a's going on with b's events (a copy), or made again from all of them */
	if (o->nmev && (!a || !a->nmev)) {
		if (!(feed = mem_model_new()))
			goto fail;
		fed = 1;
	} else if (o->nmev && model_holds(a, o)) {
		if ((rc = mem_model_copy(a->mm, &feed, err)) && rc != TP_ERR_UNSUPPORTED)
			goto fail;
		fed = !rc;
	}
	if ((a && ((rc = runs_fork(&o->co, &a->co, err)) || (rc = runs_fork(&o->d, &a->d, err)))) ||
	    (rc = add_part_recs(o, b, &f, feed, &fed, err)) || (rc = runs_seal(&o->co, err)))
		goto fail;
	o->res.colls = &o->co;
	if (o->nmev) {
		struct mem_input in = an_mem_input_of(o);
		o->mwent = fed;
		if (fed) {
			rc = mem_model_result(feed, &in, &o->mem, &o->res.mem_series, &o->res.nmem_series, err);
			feed = NULL;	/* freed */
		} else {	/* over all of them */
			mem_model_free(feed);
			feed = NULL;
			o->d.fix = mem_resolve;	/* the spilled runs, as they are read */
			o->d.fixctx = o;
			if (!(rc = runs_seal(&o->d, err))) {
				if (!o->d.nruns)
					mem_resolve(o, o->d.buf, o->d.n);
				rc = mem_infer(&in, &o->mem, &o->res.mem_series, &o->res.nmem_series, err);
			}
		}
		if (rc)
			goto fail;
	}
	runs_free(&o->d);
	*out = o;
	return TP_OK;
fail:
	mem_model_free(feed);
	analysis_free(o);
	return rc == TP_ERR_NOMEM && !err->rc ? an_nomem(err) : err->rc ? err->rc : rc;
}

int analysis_memory_went_on(const struct analysis *an)
{
	return an->mwent;
}

struct mem_mark *analysis_memory_mark(struct analysis *an)
{
	return an->mem ? mem_result_mark(an->mem) : NULL;
}

int analysis_memory_follow(struct analysis *an, const struct mem_mark *m)
{
	return an->mem && m ? mem_result_follow(an->mem, m) : 0;
}

const struct an_result *analysis_merged(const struct analysis *an)
{
	return &an->res;
}
