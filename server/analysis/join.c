/*
 * join.c: the first and second passes over the host spans: their busy
 * time and calls, communication operators met as collectives, the External
 * ids GPU spans fall back on, and link_gpu(), which joins each GPU span to
 * the operator that launched it.
 */
#include "analysis/analysis_int.h"

/* The MS_* flags of a span (memory.h). */
uint16_t an_ms_flags(struct analysis *an, const struct frame *f)
{
	uint16_t nc;

	if (an_cls_of(an, f->name, &nc))
		nc = 0;
	return (uint16_t)((f->kind == H_RUNTIME ? MS_RUNTIME : 0) | (f->ann ? MS_ANNOTATION : 0) |
			  (f->kind == H_DATALOADER ? MS_DATALOADER : 0) | (nc & N_OPT_STEP ? MS_OPT_STEP : 0) |
			  (nc & N_ZERO_GRAD ? MS_ZERO_GRAD : 0) | (nc & N_BACKWARD ? MS_BACKWARD : 0) |
			  (nc & N_ACCUM_GRAD ? MS_ACCUM_GRAD : 0) | (nc & N_COPY ? MS_COPY : 0));
}

/* max(In, Out msg nelems) x dtype size; -1 when c does not say */
int64_t an_coll_bytes(const struct analysis *an, const struct crec *c)
{
	int64_t n = c->in > c->out ? c->in : c->out, b;
	int size = c->dtype ? an_dtype_size(an->str(an->payload, c->dtype)) : 0;

	if (n < 0 || !size || __builtin_mul_overflow(n, (int64_t)size, &b))
		return -1;
	return b;
}

static struct cwhat cwhat_of(const struct analysis *an, const struct crec *c)
{
	return (struct cwhat){ .seq = c->seq, .bytes = an_coll_bytes(an, c), .gsize = c->gsize, .coll = c->coll,
			       .pg = c->pg, .says = c->coll || c->in >= 0 || c->out >= 0 };
}

/*
 * Communication operators as host spans: a crec is made from the first
 * span in sorted order of its thread, start, end and name that is no
 * runtime call. Their runs, by (thread, start), are read as the spans come,
 * a group of one thread and start at a time, sorted by (name, end, arrival)
 * so that a span finds its crecs by a search: a group is consumed a (name,
 * end) at a time (50,000 alike at one instant took 2 s when each span
 * scanned the group); each pass over the spans meets them the same way.
 */
struct cgroup {
	struct rcur cur;
	const struct crec *next;	/* the next one read */
	struct cslot {
		struct crec c;
		int used;		/* made from a span already */
	} *g;				/* the group of the span at hand's thread and start */
	size_t n, cap;
	uint32_t thread;
	int64_t s;
	int open, has;
	int gloo;			/* note the gloo:* operators that may be collectives (gloo_made()) */
};

static inline int cslot_less(const struct cslot *x, const struct cslot *y)
{
	if (x->c.name != y->c.name)
		return x->c.name < y->c.name;
	return x->c.e != y->c.e ? x->c.e < y->c.e : x->c.ord < y->c.ord;
}

SORT_DEFINE(sort_cslot, struct cslot, cslot_less)

static int cgroup_open(struct cgroup *cg, struct analysis *an, int gloo)
{
	memset(cg, 0, sizeof(*cg));
	cg->gloo = gloo;
	if (!an->hcr.n && !an->hcr.nruns)
		return 0;
	cg->open = 1;
	if (rcur_open(&cg->cur, &an->hcr))
		return -1;
	cg->next = rcur_next(&cg->cur);
	return 0;
}

/* 0 or errno of a failed read */
static int cgroup_close(struct cgroup *cg)
{
	int e = cg->open ? cg->cur.err : 0;

	if (cg->open)
		rcur_close(&cg->cur);
	tp_free(cg->g);
	memset(cg, 0, sizeof(*cg));
	return e;
}

static int gloo_made(struct analysis *an, const struct crec *c, const struct walk *w);

/* The crecs made from the span on top of w's stack: f->comm, and f->what from the first. -1: out of memory. */
static int cgroup_join(struct analysis *an, struct cgroup *cg, const struct walk *w)
{
	struct frame *f = &w->st[w->depth - 1];
	size_t q;

	if (!cg->open)
		return 0;
	if (!cg->has || cg->thread != f->thread || cg->s != f->s) {
		cg->has = 1;
		cg->thread = f->thread;
		cg->s = f->s;
		cg->n = 0;
		while (cg->next && (cg->next->thread < f->thread || (cg->next->thread == f->thread && cg->next->s < f->s)))
			cg->next = rcur_next(&cg->cur);
		for (; cg->next && cg->next->thread == f->thread && cg->next->s == f->s; cg->next = rcur_next(&cg->cur)) {
			if (tp_grow((void **)&cg->g, &cg->cap, cg->n + 1, sizeof(*cg->g)))
				return -1;
			cg->g[cg->n++] = (struct cslot){ *cg->next, 0 };
		}
		if (cg->n > 1)
			sort_cslot(cg->g, cg->n);
	}
	if (f->kind == H_RUNTIME)
		return 0;
	size_t lo = 0, hi = cg->n;
	while (lo < hi) {	/* the first of f's name and end */
		size_t mid = lo + (hi - lo) / 2;
		const struct crec *c = &cg->g[mid].c;
		if (c->name < f->name || (c->name == f->name && c->e < f->e))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* all of them are made from the first span of theirs: f, unless one was before it */
	for (q = lo; q < cg->n && !cg->g[q].used && cg->g[q].c.name == f->name && cg->g[q].c.e == f->e; q++) {
		const struct crec *c = &cg->g[q].c;
		cg->g[q].used = 1;
		if (!f->comm) {
			f->comm = 1;
			f->what = cwhat_of(an, c);
		}
		if (cg->gloo && gloo_made(an, c, w))
			return -1;
	}
	return 0;
}

static int is_gloo(const struct analysis *an, uint32_t name)
{
	return !strncmp(an->str(an->payload, name), "gloo:", 5);
}

/*
 * What a communication kernel's collective takes from the spans above its
 * launch, st[d - 1] (nearest) down to st[0]: the outermost communication
 * operator (a crec's span, or one an_op_is_comm() names), the nearest crec
 * that says what the collective is, the nearest nccl:* / gloo:* range.
 */
static struct chain chain_of(const struct analysis *an, const struct frame *st, size_t d)
{
	struct chain ch = { .top = -1, .name_kind = -1 };

	while (d-- > 0) {
		const struct frame *o = &st[d];
		const char *nm = an->str(an->payload, o->name);
		if (!o->comm && !an_op_is_comm(nm))
			continue;
		ch.top = (int32_t)o->pos;
		ch.top_s = o->s;
		if (!ch.src.says && o->comm && o->what.says)
			ch.src = o->what;
		if (ch.name_kind < 0 && (!strncmp(nm, "nccl:", 5) || !strncmp(nm, "gloo:", 5)))
			ch.name_kind = an_coll_kind(nm + 5);
	}
	return ch;
}

/* chain_of() kept for an External id's link (an->chains); UINT32_MAX - 1: out of memory */
static uint32_t add_chain(struct analysis *an, const struct frame *st, size_t d)
{
	if (tp_grow((void **)&an->chains, &an->chaincap, an->nchains + 1, sizeof(*an->chains)))
		return UINT32_MAX - 1;
	an->chains[an->nchains] = chain_of(an, st, d);
	return (uint32_t)an->nchains++;
}

/* An External id's link: the span f, its op and chain as given. */
static int add_link(struct analysis *an, uint32_t *slot, const struct frame *f, int32_t op, uint32_t chain)
{
	/* room for one per key of ext, made before the pass (an_link_gpu()) */
	if (chain == UINT32_MAX - 1 || an->nlinks == an->linkcap)
		return -1;
	an->links[an->nlinks] = (struct link){ .s = f->s, .thread = f->thread, .chain = chain };
	an->linkop[an->nlinks] = op;
	*slot = (uint32_t)an->nlinks++;
	return 0;
}

/* a gloo:* span above st[d - 1] */
static int gloo_above(const struct analysis *an, const struct frame *st, size_t d)
{
	while (d-- > 0)
		if (is_gloo(an, st[d].name))
			return 1;
	return 0;
}


/* c, made from the span on top of w's stack in the first pass: a gloo:* operator that may be a collective of its own */
static int gloo_made(struct analysis *an, const struct crec *c, const struct walk *w)
{
	if (!is_gloo(an, c->name) || gloo_above(an, w->st, w->depth - 1))
		return 0;
	if (tp_grow((void **)&an->hcand, &an->hcandcap, an->nhcand + 1, sizeof(*an->hcand)))
		return -1;
	an->hcand[an->nhcand++] = (struct hcand){ *c, w->st[w->depth - 1].pos };
	return 0;
}

/* id may be a communication kernel's correlation id (an_cc_build()) */
static int is_comm_corr(const struct analysis *an, int64_t id)
{
	size_t w;
	uint64_t m;

	if (an_cc_all || !an->nccorr)
		return an_cc_all;
	m = an_cc_mask(id, &w, an);
	return (an->ccset[w] & m) == m;
}

struct linking {
	struct analysis *an;
	struct cgroup cg;
	struct ival run[AN_IDLE];	/* per host category, the interval being extended (its thread's) */
	uint32_t thread[AN_IDLE];
	uint8_t has[AN_IDLE];
	struct tp_errbuf *err;
};


/*
 * The first pass: the host's busy time per category and its bounds
 * (an_breakdown()), the calls that wait for the GPU (step_syncs()), the
 * launches no GPU span names (gjoin_skip()), what the memory model needs
 * (the autograd threads, the optimizer steps), the crecs' spans, and the
 * runtime calls GPU spans name by correlation: the first of each id, with
 * the operator above it (not a runtime call) and, for communication
 * kernels, the chain above it (add_chain()).
 */
static int link_host(struct walk *w, const struct hrec *r)
{
	struct linking *lk = w->arg;
	struct analysis *an = lk->an;
	struct frame *f;
	struct ival *run;
	size_t d;
	uint16_t nc;
	int c;

	if (!r) {
		for (c = AN_COMM; c < AN_IDLE; c++)
			if (lk->has[c] && runs_add(&an->hc[c], &lk->run[c], lk->err))
				return -1;
		return 0;
	}
	if (!(f = an_walk_push(w, r)) || an_cls_of(an, r->name, &nc))
		return -1;
	/* each thread's run of overlapping spans of a category is one interval before the
	 * union across threads (a list of every span was 40 MiB for a 1 GB trace) */
	c = r->kind == H_RUNTIME ? AN_RUNTIME : r->kind == H_DATALOADER ? AN_DATALOADER :
	    (nc & N_COMM_SPAN) ? AN_COMM : AN_CPU;
	run = &lk->run[c];
	if (r->e > r->s) {
		if (lk->has[c] && lk->thread[c] == r->thread && r->s <= run->e) {
			if (r->e > run->e)
				run->e = r->e;
		} else {
			if (lk->has[c] && runs_add(&an->hc[c], run, lk->err))
				return -1;
			*run = (struct ival){ r->s, r->e };
			lk->has[c] = 1;
		}
		lk->thread[c] = r->thread;
	}
	if (r->kind == H_RUNTIME && r->e >= r->s && (nc & N_SYNC))
		an_sync_call(an, r->s, r->e);
	if (an->nmev) {
		f->ms = an_ms_flags(an, f);
		if (f->ms & MS_BACKWARD)
			an->bwd[r->thread] = 1;
		if (f->ms & MS_OPT_STEP) {
			if (tp_grow((void **)&an->opt, &an->optcap, an->nopt + 1, sizeof(*an->opt)) ||
			    tp_grow((void **)&an->opte, &an->optecap, an->nopt + 1, sizeof(*an->opte)))
				return -1;
			an->opt[an->nopt] = r->s;
			an->opte[an->nopt++] = r->e;
		}
	}
	if (cgroup_join(an, &lk->cg, w))
		return -1;
	if (r->kind != H_RUNTIME || r->id < 0)
		return 0;
	/* joined with the GPU spans its id names once the pass is done (struct gjoin) */
	struct lrec *l = runs_reserve(&an->lr, 1, lk->err);
	if (!l)
		return -1;
	*l = (struct lrec){ .corr = r->id, .s = r->s, .pos = f->pos, .op = -1, .launch = r->launch };
	for (d = w->depth - 1; d-- > 0;)	/* the operator its GPU spans count for: not a runtime call */
		if (w->st[d].kind != H_RUNTIME) {
			l->op = (int32_t)w->st[d].pos;
			break;
		}
	runs_commit(&an->lr, 1);
	if (is_comm_corr(an, r->id)) {	/* and with the communication kernels (collectives()) */
		struct ccall cl = { .corr = r->id, .s = r->s, .pos = f->pos, .thread = r->thread,
				    .ch = chain_of(an, w->st, w->depth - 1) };
		return runs_add(&an->cc, &cl, lk->err) ? -1 : 0;
	}
	return 0;
}

static int link_ext(struct walk *w, const struct hrec *r)
{
	struct linking *lk = w->arg;
	struct analysis *an = lk->an;
	struct frame *f;
	uint32_t *v;

	if (!r)
		return 0;
	if (!(f = an_walk_push(w, r)))
		return -1;
	if (cgroup_join(an, &lk->cg, w))
		return -1;
	if (r->kind == H_RUNTIME || r->id < 0 || !(v = hmap_find(&an->ext, (uint64_t)r->id)) || *v != NO_HOST)
		return 0;
	uint32_t ch = hmap_get(&an->cext, (uint64_t)r->id) != UINT32_MAX ? add_chain(an, w->st, w->depth) : UINT32_MAX;
	return add_link(an, v, f, (int32_t)f->pos, ch);
}

/* A pass of link_host() or link_ext(), the communication operators met as it goes (struct cgroup). */
static int link_walk(struct analysis *an, visit_fn visit, struct tp_errbuf *err)
{
	struct linking lk = { .an = an, .err = err };
	int rc, e;

	if (cgroup_open(&lk.cg, an, visit == link_host)) {
		e = cgroup_close(&lk.cg);
		if (!e)
			return an_nomem(err);
		errno = e;
		return spill_fail(err, "cannot read");
	}
	rc = an_walk_all(an, visit, NULL, &lk, err);
	if ((e = cgroup_close(&lk.cg)) && !err->rc) {
		errno = e;
		return spill_fail(err, "cannot read");
	}
	return rc ? rc : e ? err->rc : TP_OK;
}

/* The External ids of the communication kernels: their links get a chain (link_ext()). */
static int comm_exts(struct analysis *an, struct tp_errbuf *err)
{
	const struct crec *k;
	struct rcur c;

	if (rcur_open(&c, &an->kcr))
		return an_rcur_fail(&c, err);
	while ((k = rcur_next(&c)))
		if (k->ext >= 0 && !hmap_put(&an->cext, (uint64_t)k->ext, 0))
			return an_rcur_fail(&c, err);	/* no read failed: out of memory */
	if (c.err)
		return an_rcur_fail(&c, err);
	rcur_close(&c);
	return TP_OK;
}

/*
 * The operator that launched each GPU span: its correlation id names the
 * runtime call (cudaLaunchKernel, ...), whose nearest enclosing operator is
 * the launcher. Traces where that fails (no runtime event kept) fall back
 * to the span's External id, which Kineto sets to the launching operator's.
 * The first pass writes the runtime calls with ids into runs by id, and the
 * GPU spans, in runs by id already, are joined with them (struct gjoin):
 * no map of ids (a map of every span's ids was 96 MiB at the peak of a
 * 1 GB trace), and no array of the spans (30 MiB).
 */
int an_link_gpu(struct analysis *an, struct tp_errbuf *err)
{
	const struct grec *g;
	struct gjoin j;
	int rc;

	if ((rc = runs_seal(&an->gr, err)) || (rc = runs_seal(&an->hcr, err)) || (rc = runs_seal(&an->kcr, err)))
		return rc;
	if (an->nccorr) {
		struct rcur c;
		if (an_cc_build(an, &c))
			return an_rcur_fail(&c, err);
		rcur_close(&c);
	}
	an->lr.limit = an_run_records(an, sizeof(struct lrec));
	an->cc.limit = (an_run_records(an, sizeof(struct ccall)) + 3) / 4;
	/* the three fill at once; the host's collectives are few (a quarter of the room each cost
	 * 4.3 MiB more peak on the 1 GB bench trace: bench/results/finish_bench-20261128.txt) */
	for (int c = AN_RUNTIME; c < AN_IDLE; c++)
		an->hc[c].limit = (an_run_records(an, sizeof(struct ival)) + 2) / 3;
	an->hc[AN_COMM].limit = (an_run_records(an, sizeof(struct ival)) + 15) / 16;
	if ((rc = link_walk(an, link_host, err)) || (rc = runs_seal(&an->lr, err)) || (rc = runs_seal(&an->cc, err)))
		return rc;
	for (int c = AN_COMM; c < AN_IDLE; c++)
		if ((rc = runs_seal(&an->hc[c], err)))
			return rc;
	/*
	 * The launches no span names, the External ids to fall back on; and each
	 * span's step and operator (an_gpu_owner()), which stand unless a span falls
	 * back on its External id, known once the walk for them is done: then
	 * an_breakdown() joins again.
	 */
	an_owners_begin(an);
	if ((rc = an_gjoin_open(&j, an, 1, err)))
		return rc;
	while ((g = an_gjoin_next(&j))) {
		if (!an->ext.n && (rc = an_gpu_owner(an, &j, g, err))) {
			j.nomem = 1;
			break;
		}
		if ((!j.linked || j.call.op < 0) && g->ext >= 0) {
			if (!hmap_put(&an->ext, (uint64_t)g->ext, NO_HOST)) {
				j.nomem = 1;
				break;
			}
			an_widen(&an->xmin, &an->xmax, g->ext);
		}
	}
	if ((rc = an_gjoin_close(&j, err)))
		return rc;
	if (!an->ext.n)
		return an_owners_end(an, err);
	runs_free(&an->bs);
	runs_free(&an->gp);
	an->linkcap = an->ext.n;
	if (!(an->links = tp_malloc((an->linkcap + 1) * sizeof(*an->links))) ||
	    !(an->linkop = tp_malloc((an->linkcap + 1) * sizeof(*an->linkop))))
		return an_nomem(err);
	if ((rc = comm_exts(an, err)))
		return rc;
	return link_walk(an, link_ext, err);
}
