/*
 * collectives.c: collectives from their kernels and host spans, and
 * analysis_finish(), which runs the passes in order.
 */
#include "analysis/analysis_int.h"

/* ---- collectives ---- */

/*
 * A communication kernel and what the call that launched it says
 * (coll_kernels()): runs by its collective's instance, then arrival.
 */
struct kjoin {
	uint64_t key;		/* the instance: its outermost operator's place, else 1 << 63 | ord */
	int64_t s, e, launch, seq, src_bytes, own_bytes, gsize;
	uint32_t ord, thread, pg;
	int32_t kind;
	uint8_t own;		/* it says what its collective is itself: its own bytes are summed */
};

static inline int kjoin_less(const struct kjoin *x, const struct kjoin *y)
{
	return x->key != y->key ? x->key < y->key : x->ord < y->ord;
}

RUNS_DEFINE(kjoin, struct kjoin, kjoin_less)


/*
 * Each communication kernel (by correlation id) with the first call of its
 * id (by id and place, link_host()), else its External id's link: its
 * launching thread and instant, and the chain of operators above the call.
 */
static int coll_kernels(struct analysis *an, struct runs *out, struct tp_errbuf *err)
{
	const struct ccall *call;
	const struct crec *k;
	struct rcur kc, cc;
	int rc;

	if (rcur_open(&kc, &an->kcr))
		return an_rcur_fail(&kc, err);
	if (rcur_open(&cc, &an->cc)) {
		rcur_close(&kc);
		return an_rcur_fail(&cc, err);
	}
	call = rcur_next(&cc);
	while ((k = rcur_next(&kc))) {
		const struct chain *ch = NULL;
		const struct cwhat *src;
		int64_t launch = k->s;
		uint32_t thread = UINT32_MAX, j;
		int kind = -1;
		while (call && call->corr < k->corr)
			call = rcur_next(&cc);
		if (k->corr >= 0 && call && call->corr == k->corr) {
			launch = call->s;
			thread = call->thread;
			ch = &call->ch;
		} else if ((j = an_link_by(&an->ext, k->ext)) != UINT32_MAX) {
			thread = an->links[j].thread;
			ch = an->links[j].chain != UINT32_MAX ? &an->chains[an->links[j].chain] : NULL;
		}
		src = ch && ch->src.says ? &ch->src : NULL;
		if (ch && ch->top >= 0)
			launch = ch->top_s;
		if (k->coll)
			kind = an_coll_kind(an->str(an->payload, k->coll));
		if (kind < 0 && src && src->coll)
			kind = an_coll_kind(an->str(an->payload, src->coll));
		if (kind < 0 && ch)
			kind = ch->name_kind;
		if (kind < 0)
			kind = an_coll_kind(an->str(an->payload, k->name));
		int own = k->coll || k->in >= 0 || k->out >= 0;
		struct kjoin r = {
			/* the instance: one per outermost operator, else one per kernel */
			.key = ch && ch->top >= 0 ? (uint64_t)ch->top : (1ULL << 63) | k->ord, .ord = k->ord,
			.s = k->s, .e = k->e, .launch = launch, .thread = thread, .kind = kind,
			.pg = k->pg ? k->pg : src ? src->pg : 0, .seq = k->seq >= 0 ? k->seq : src ? src->seq : -1,
			.src_bytes = src ? src->bytes : -1,
			.gsize = k->gsize > 0 ? k->gsize : src && src->gsize > 0 ? src->gsize : 0,
			.own = (uint8_t)own, .own_bytes = own ? an_coll_bytes(an, k) : -1,
		};
		if ((rc = runs_add(out, &r, err))) {
			rcur_close(&kc);
			rcur_close(&cc);
			return rc;
		}
	}
	if (kc.err || cc.err) {
		rcur_close(kc.err ? &cc : &kc);
		return an_rcur_fail(kc.err ? &kc : &cc, err);
	}
	rcur_close(&kc);
	rcur_close(&cc);
	return runs_seal(out, err);
}

static int cmp_hcand(const void *a, const void *b)
{
	const struct hcand *x = a, *y = b;

	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return x->c.ord < y->c.ord ? -1 : x->c.ord > y->c.ord;
}

/*
 * Collectives that run on the host: ProcessGroupGloo's gloo:* spans (its
 * worker threads run them, and copy GPU tensors to and from the host around
 * them), each of which is one collective when no communication kernel made
 * it one already and no gloo:* span is above it (an->hcand). Its span is
 * its launch (the rank's arrival), its time and its start and end; it has
 * no kernels.
 */
static int host_collective(struct analysis *an, const struct crec *k, struct runs *out, struct tp_errbuf *err)
{
	int kind = k->coll ? an_coll_kind(an->str(an->payload, k->coll)) : -1;
	int32_t st = an_step_at(an, k->s);

	if (kind < 0)
		kind = an_coll_kind(an->str(an->payload, k->name) + 5);
	struct kcoll c = { .made = 1ULL << 32 | k->ord, .c = {
		.step = st >= 0 ? an->cpu_steps[st].step : -1, .kind = kind < 0 ? AN_CK_OTHER : kind,
		.pg = k->pg, .seq = k->seq, .launch_ns = k->s, .start_ns = k->s, .end_ns = k->e,
		.time_ns = k->e - k->s, .bytes = an_coll_bytes(an, k), .group_size = k->gsize > 0 ? k->gsize : 0,
		.thread = k->thread,
	} };
	return runs_add(out, &c, err);
}

/* The collective of an instance's first kernel (struct kjoin), its kernels added by coll_add(). */
static struct kcoll coll_new(const struct analysis *an, const struct kjoin *k)
{
	int32_t st = an_step_at(an, k->launch);

	return (struct kcoll){ .made = k->ord, .c = {
		.step = st >= 0 ? an->cpu_steps[st].step : -1, .kind = k->kind < 0 ? AN_CK_OTHER : k->kind,
		.pg = k->pg, .seq = k->seq, .launch_ns = k->launch, .start_ns = k->s, .end_ns = k->e,
		.bytes = k->own ? -1 : k->src_bytes,	/* the kernels' own, summed, when they say */
		.group_size = k->gsize, .thread = k->thread,
	} };
}

static void coll_add(struct an_coll *c, const struct kjoin *k)
{
	if (k->own && k->own_bytes >= 0)
		c->bytes = c->bytes < 0 ? k->own_bytes : tp_sat_add(c->bytes, k->own_bytes);
	c->start_ns = k->s < c->start_ns ? k->s : c->start_ns;
	c->end_ns = k->e > c->end_ns ? k->e : c->end_ns;
	c->time_ns = tp_sat_add(c->time_ns, k->e - k->s);
	c->kernels++;
}

/* Each instance's kernels into one collective, and the gloo:* ones no kernel's is; into out. */
static int coll_instances(struct analysis *an, const struct runs *kj, struct runs *out, struct tp_errbuf *err)
{
	const struct kjoin *k;
	struct kcoll c = { 0 };
	struct rcur cur;
	size_t h = 0;
	int has = 0, rc = TP_OK;

	if (an->nhcand > 1)
		qsort(an->hcand, an->nhcand, sizeof(*an->hcand), cmp_hcand);
	if (rcur_open(&cur, kj))
		return an_rcur_fail(&cur, err);
	uint64_t key = 0;
	while (!rc && (k = rcur_next(&cur))) {
		if (has && k->key == key) {
			coll_add(&c.c, k);
			continue;
		}
		if (has && (rc = runs_add(out, &c, err)))
			break;
		/* the gloo:* operators before this instance's are none's; its own is its */
		for (; !rc && h < an->nhcand && an->hcand[h].pos < k->key; h++)
			rc = host_collective(an, &an->hcand[h].c, out, err);
		for (; h < an->nhcand && an->hcand[h].pos == k->key; h++)
			;
		has = 1;
		key = k->key;
		c = coll_new(an, k);
		coll_add(&c.c, k);
	}
	if (!rc && cur.err)
		return an_rcur_fail(&cur, err);
	rcur_close(&cur);
	if (!rc && has)
		rc = runs_add(out, &c, err);
	for (; !rc && h < an->nhcand; h++)
		rc = host_collective(an, &an->hcand[h].c, out, err);
	return rc ? rc : runs_seal(out, err);
}

/*
 * Each communication kernel joins the collective of the outermost
 * communication operator above the call that launched it (by correlation,
 * else by External id). What the collective is (kind, group, bytes, group
 * size, sequence number) is taken from the kernel's own args when it has
 * them (newer PyTorch writes them on NCCL kernels), else from the nearest
 * operator above it that has them (record_param_comms), else the kind from
 * the nearest nccl:* / gloo:* range above it (older traces, where
 * all_to_all runs as SendRecv kernels), else from the kernel's name. The
 * kernels, their instances and the collectives go through runs: only the
 * collectives, sorted by launch, are held (an->res.colls).
 */
static int collectives(struct analysis *an, struct tp_errbuf *err)
{
	struct runs kj;
	int rc;

	runs_init(&kj, sizeof(struct kjoin), (an_run_records(an, sizeof(struct kjoin)) + 3) / 4, "comm", kjoin_order,
		  kjoin_sort);
	an->cw.limit = an->co.limit = (an_run_records(an, sizeof(struct kcoll)) + 3) / 4;
	if (!(rc = coll_kernels(an, &kj, err)))
		rc = coll_instances(an, &kj, &an->cw, err);
	runs_free(&kj);
	an->res.ncolls = an->cw.n;
	for (size_t i = 0; i < an->cw.nruns; i++)
		an->res.ncolls += an->cw.run_n[i];
	return rc;
}

int an_colls_open(const struct an_result *r, struct rcur *c)
{
	static const struct runs none = { .size = sizeof(struct kcoll), .fd = -1 };

	return rcur_open(c, r->colls ? r->colls : &none);
}

static int cmp_step(const void *a, const void *b)
{
	const struct an_step *x = a, *y = b;

	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	/* a step left empty by one before it (two ProfilerStep spans over one instant) starts
	 * where the next one does: it goes first, or the two would overlap in this order */
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns < y->dur_ns ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* What the memory model reads of an: its optimizer steps, its [memory] events, its names. */
struct mem_input an_mem_input_of(struct analysis *an)
{
	return (struct mem_input){ .opt_starts = an->opt, .opt_ends = an->opte, .nopt = an->nopt, .recs = &an->d,
				   .str = an->str, .payload = an->payload };
}

/*
 * The passes. Host spans come back sorted by thread and start (runs.h),
 * nested on a stack as they come (struct walk): a first pass writes the
 * runtime calls GPU spans' ids may name, which the GPU spans are joined with
 * (an_link_gpu()); an_breakdown() and collectives() work from that; a third pass
 * adds the operator tables, each collective's before_op and each [memory]
 * event's context, and the memory model runs last. What grows with the
 * trace is in sorted runs (host spans, GPU spans, runtime calls, [memory]
 * events, busy intervals, communication records, collectives) or
 * aggregated as it comes (per step: the calls that wait for the GPU, the
 * latest launch no GPU span names; the communication kernels' ids in a
 * filter of 1 MiB); what stays in memory grows with the steps, the names,
 * the gloo:* collectives and the largest step's GPU spans.
 */
int analysis_finish(struct analysis *an, const struct an_result **out, struct tp_errbuf *err)
{
	struct tables t = { .an = an, .err = err };
	int rc;

	an->finishing = 1;
	if ((rc = runs_seal(&an->h, err)))
		return rc;
	rc = TP_ERR_NOMEM;
	if (!(an->bwd = tp_calloc(an->threads.n + 1, 1)) || an_steps_prepare(an))
		goto fail;
	if ((rc = an_link_gpu(an, err)) || (rc = an_breakdown(an, err)) || (rc = an_inside_gpu(an, err)))
		goto fail;
	/* done with: the GPU spans gave their time to the operators that launched them (an->gp) */
	runs_free(&an->gr);
	runs_free(&an->lr);
	if ((rc = collectives(an, err)))
		goto fail;
	if (an->res.ncolls) {	/* before_op()'s windows */
		if (rcur_open(&t.wc, &an->cw)) {
			rc = t.wc.err ? TP_ERR_IO : TP_ERR_NOMEM;
			goto fail;
		}
		t.wn = rcur_next(&t.wc);
		an_window_read(&t);
	}
	rc = TP_ERR_NOMEM;
	hmap_free(&an->ext);
	hmap_free(&an->cext);
	runs_free(&an->hcr);
	runs_free(&an->kcr);
	runs_free(&an->cc);
	tp_free(an->hcand);
	an->hcand = NULL;
	an->nhcand = an->hcandcap = 0;
	tp_free(an->links);
	an->links = NULL;
	tp_free(an->linkop);
	an->linkop = NULL;
	tp_free(an->chains);
	an->chains = NULL;
	an->res.nthreads = an->threads.n;
	if (!(an->res.thread_self_ns = tp_calloc(an->threads.n + 1, sizeof(int64_t))))
		goto fail;
	if (an->nmev) {
		if ((rc = an_mev_threads(an, err)))
			goto fail;
		if (rcur_open(&t.mc, &an->m)) {
			rc = TP_ERR_NOMEM;
			goto fail;
		}
		an->d.limit = an_run_records(an, sizeof(struct mem_rec));
		t.me = rcur_next(&t.mc);
	}
	if (rcur_open(&t.gc, &an->gp)) {
		rc = t.gc.err ? TP_ERR_IO : TP_ERR_NOMEM;
		goto fail;
	}
	t.gn = rcur_next(&t.gc);
	if ((rc = an_walk_all(an, an_tables_visit, an_ops_pop, &t, err))) {
		rc = err->rc ? err->rc : rc;
		goto fail;
	}
	while (t.has_win)	/* the windows no span reached */
		if (an_window_done(&t)) {
			rc = err->rc;
			goto fail;
		}
	if (t.mc.err || t.gc.err || t.wc.err) {
		rc = TP_ERR_IO;
		goto fail;
	}
	rcur_close(&t.mc);
	rcur_close(&t.gc);
	rcur_close(&t.wc);
	runs_free(&an->m);
	runs_free(&an->gp);
	runs_free(&an->cw);
	if ((rc = runs_seal(&an->d, err)) || (rc = runs_seal(&an->co, err)))
		goto fail;
	an->res.colls = &an->co;
	rc = TP_ERR_NOMEM;
	if (an_order_ops(an, t.first, t.fthread))
		goto fail;
	/* done with: the memory model's peak is not theirs */
	tp_free(t.first);
	tp_free(t.fthread);
	hmap_free(&t.m);
	t.first = NULL;
	t.fthread = NULL;
	runs_free(&an->h);
	if (an->nopt > 1)
		qsort(an->opt, an->nopt, sizeof(*an->opt), cmp_i64);
	if (an->nmev && !an->part) {	/* a part's run over all parts (analysis_merge()) */
		struct mem_input in = an_mem_input_of(an);
		if ((rc = mem_infer(&in, &an->mem, &an->res.mem_series, &an->res.nmem_series, err)))
			goto fail;
		runs_free(&an->d);	/* the series replay from a file of their own */
	}
	rc = TP_ERR_NOMEM;
	hmap_free(&an->simap);
	if (an_inside_sum(an))
		goto fail;
	if (an->res.nsteps > 1)
		qsort(an->res.steps, an->res.nsteps, sizeof(*an->res.steps), cmp_step);
	rc = TP_OK;
	an->finished = 1;
	*out = &an->res;
fail:
	hmap_free(&t.m);
	tp_free(t.first);
	tp_free(t.fthread);
	if ((t.mc.err || t.gc.err || t.wc.err) && !err->rc) {
		errno = t.mc.err ? t.mc.err : t.gc.err ? t.gc.err : t.wc.err;
		spill_fail(err, "cannot read");
	}
	rcur_close(&t.mc);
	rcur_close(&t.gc);
	rcur_close(&t.wc);
	runs_free(&an->h);
	if (rc == TP_ERR_NOMEM && !err->rc)
		return an_nomem(err);
	return rc && err->rc ? err->rc : rc;	/* the first failure's, which err keeps */
}
