/*
 * analysis.c: steps, their breakdown, operator and kernel tables, from the
 * events of one trace (analysis.h says when and why). This file takes the
 * events in (analysis_new(), analysis_event(), fork, hold, free); the passes
 * that finish the analysis are in the files analysis_int.h lists.
 *
 * Events are sorted into three kinds of compact record:
 *   host spans  (cpu_op / Operator, user_annotation, cuda_runtime / driver):
 *               nested per thread into call trees, for self times, for the
 *               runtime / dataloader / cpu components, and to find which
 *               operator launched a kernel; kept in sorted runs, spilled to
 *               a temporary file past the first, and read back merged by
 *               the passes of analysis_finish(), never held all at once;
 *   GPU spans   (kernel, memcpy, memset): for the GPU components and the
 *               GPU time of operators; kernels are also aggregated by name
 *               as they stream by;
 *   steps       (ProfilerStep#N on the CPU, and its gpu_user_annotation
 *               mirror on the GPU when the trace has one).
 */
#include "analysis/analysis_int.h"

static size_t default_run = AN_RUN_RECORDS;

/* Records of size bytes in a run: as many bytes as a run of host spans. */
size_t an_run_records(const struct analysis *an, size_t size)
{
	size_t k = an->h.limit * sizeof(struct hrec) / size;

	return k ? k : 1;
}

struct analysis *analysis_new(an_string_fn str, void *payload)
{
	struct analysis *an = tp_calloc(1, sizeof(*an));

	if (an) {
		an->str = str;
		an->payload = payload;
		runs_init(&an->h, sizeof(struct hrec), default_run, "spans", hrec_order, hrec_sort);
		runs_init(&an->m, sizeof(struct mem_event), 1, "memory", mevk_order, mevk_sort);
		an->m.split = mevk_split;
		runs_init(&an->d, sizeof(struct mem_rec), 1, "memory", mem_rec_less, mem_rec_sort);
		runs_init(&an->gr, sizeof(struct grec), 1, "gpu", grec_order, grec_sort);
		runs_init(&an->lr, sizeof(struct lrec), 1, "calls", lrec_order, lrec_sort);
		runs_init(&an->bs, sizeof(struct brec), 1, "steps", brec_order, brec_sort);
		runs_init(&an->gp, sizeof(struct gpair), 1, "gpu", gpair_order, gpair_sort);
		runs_init(&an->ub, sizeof(int64_t), 1, "gpu", i64_order, i64_sort);
		for (int c = AN_COMM; c < AN_IDLE; c++)
			runs_init(&an->hc[c], sizeof(struct ival), 1, "busy", hival_order, hival_sort);
		runs_init(&an->hcr, sizeof(struct crec), 1, "comm", hcrec_order, hcrec_sort);
		runs_init(&an->kcr, sizeof(struct crec), 1, "comm", kcrec_order, kcrec_sort);
		runs_init(&an->cc, sizeof(struct ccall), 1, "comm", ccall_order, ccall_sort);
		runs_init(&an->cw, sizeof(struct kcoll), 1, "comm", kcollw_order, kcollw_sort);
		runs_init(&an->co, sizeof(struct kcoll), 1, "comm", kcoll_order, kcoll_sort);
		analysis_set_run(an, default_run);
		an->gmin = an->hmin = an->tlo = an->cmin = an->emin = an->xmin = INT64_MAX;
		an->gmax = an->hmax = an->thi = an->cmax = an->emax = an->xmax = INT64_MIN;
	}
	return an;
}

/* The runs that fill as the trace streams in; the communication records, a few per collective, in smaller ones. */
void analysis_set_run(struct analysis *an, size_t spans)
{
	an->h.limit = spans ? spans : 1;
	an->gr.limit = an_run_records(an, sizeof(struct grec));
	an->m.limit = an_run_records(an, sizeof(struct mem_event));
	an->hcr.limit = (an_run_records(an, sizeof(struct crec)) + 3) / 4;
	an->kcr.limit = an->hcr.limit;
}

void analysis_set_default_run(size_t spans)
{
	default_run = spans ? spans : 1;
}

void analysis_free(struct analysis *an)
{
	if (!an)
		return;
	tp_free(an->cls);
	hmap_free(&an->threads);
	hmap_free(&an->kmap);
	hmap_free(&an->ext);
	hmap_free(&an->cext);
	tp_free(an->links);
	tp_free(an->linkop);
	tp_free(an->chains);
	tp_free(an->hcand);
	for (int c = AN_COMM; c < AN_IDLE; c++)
		runs_free(&an->hc[c]);
	tp_free(an->si);
	hmap_free(&an->simap);
	tp_free(an->res.inside);
	tp_free(an->syncn);
	tp_free(an->syncns);
	tp_free(an->csmax);
	tp_free(an->unrec);
	tp_free(an->bwd);
	tp_free(an->opt);
	tp_free(an->opte);
	runs_free(&an->h);
	runs_free(&an->m);
	runs_free(&an->d);
	runs_free(&an->gr);
	runs_free(&an->lr);
	runs_free(&an->bs);
	runs_free(&an->gp);
	tp_free(an->ccset);
	runs_free(&an->cc);
	tp_free(an->gend);
	tp_free(an->gfirst);
	runs_free(&an->ub);
	tp_free(an->cpu_steps);
	tp_free(an->res.steps);
	tp_free(an->res.ops);
	tp_free(an->res.kernels);
	tp_free(an->res.thread_self_ns);
	runs_free(&an->cw);
	runs_free(&an->co);
	runs_free(&an->hcr);
	runs_free(&an->kcr);
	mem_result_free(an->mem);
	mem_model_free(an->mm);
	tp_free(an->mmbwd);
	tp_free(an->mmres);
	tp_free(an->opfirst);
	tp_free(an->opthread);
	tp_free(an->oppart);
	hmap_free(&an->mthreads);
	tp_free(an->mkeys);
	tp_free(an);
}

int an_nomem(struct tp_errbuf *err)
{
	return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
}

/* pid and tid may be numbers or (interned) strings */
static uint64_t id_key(int64_t num, uint32_t sid)
{
	return sid ? (1ULL << 63) | sid : (uint64_t)num;
}

static int add_kernel(struct analysis *an, const struct tp_event *e, int kind, int64_t dur)
{
	uint32_t *slot = hmap_put(&an->kmap, (uint64_t)e->name * 4 + (uint64_t)kind, (uint32_t)an->res.nkernels);
	struct an_kernel *k;

	if (!slot)
		return -1;
	if (*slot == an->res.nkernels) {
		if (tp_grow((void **)&an->res.kernels, &an->kcap, an->res.nkernels + 1, sizeof(*k)))
			return -1;
		k = &an->res.kernels[an->res.nkernels++];
		memset(k, 0, sizeof(*k));
		k->name = e->name;
		k->kind = kind;
		k->min_ns = dur;
	}
	k = &an->res.kernels[*slot];
	k->calls++;
	k->total_ns = tp_sat_add(k->total_ns, dur);
	if (dur < k->min_ns)
		k->min_ns = dur;
	if (dur > k->max_ns)
		k->max_ns = dur;
	if (dur < AN_TINY_KERNEL_NS) {
		k->tiny_calls++;
		k->tiny_ns = tp_sat_add(k->tiny_ns, dur);
	}
	if ((e->have & TH_BPS) && e->blocks_per_sm == e->blocks_per_sm && e->blocks_per_sm < 1e12) {
		k->bps_ns = tp_sat_add(k->bps_ns, dur);
		k->bps_sum += e->blocks_per_sm * (double)dur;
	}
	if ((e->have & TH_OCC) && e->occupancy == e->occupancy && e->occupancy < 1e12) {
		k->occ_ns = tp_sat_add(k->occ_ns, dur);
		k->occ_sum += e->occupancy * (double)dur;
	}
	return 0;
}

/* key, a [memory] event's thread, in an->mkeys (mev_fix()); -1: out of memory */
int an_mem_thread_key(struct analysis *an, uint64_t key)
{
	uint32_t *slot = hmap_put(&an->mthreads, key, (uint32_t)an->nmkeys);

	if (!slot)
		return -1;
	if (*slot == an->nmkeys) {
		if (tp_grow((void **)&an->mkeys, &an->mkeycap, an->nmkeys + 1, sizeof(*an->mkeys)))
			return -1;
		an->mkeys[an->nmkeys++] = key;
	}
	return 0;
}

/* The thread number of an event's (pid, tid); NULL when out of memory. */
static uint32_t *thread_of(struct analysis *an, const struct tp_event *e)
{
	uint64_t tk = hmap_mix(id_key(e->pid, e->pid_sid)) ^ id_key(e->tid, e->tid_sid);

	return hmap_put(&an->threads, tk, (uint32_t)an->threads.n);
}

static int memory_event(struct analysis *an, const struct tp_event *e, struct tp_errbuf *err)
{
	struct mem_event ev = {
		.ts = e->ts_ns, .ev_idx = (e->have & TH_EV_IDX) ? e->ev_idx : 0, .addr = e->addr,
		.bytes = (e->have & TH_BYTES) ? e->bytes : 0, .total_alloc = e->total_alloc,
		.total_res = e->total_reserved,
		/* its number at the end (an_mev_threads()): a thread's spans may come after its allocations */
		.thread_key = hmap_mix(id_key(e->pid, e->pid_sid)) ^ id_key(e->tid, e->tid_sid),
		.dev_type = (e->have & TH_DEV_TYPE) ? (int32_t)e->dev_type : 0,
		.dev_id = (e->have & TH_DEV_ID) ? (int32_t)e->dev_id : -1,
		.has_addr = (e->have & TH_ADDR) != 0,
		.has_totals = (e->have & TH_TOTAL_ALLOC) && (e->have & TH_TOTAL_RES), .ord = (uint32_t)an->nmev,
	};
	int rc;

	if ((rc = an_mem_thread_key(an, ev.thread_key)) || (rc = runs_add(&an->m, &ev, err)))
		return rc == -1 ? an_nomem(err) : rc;
	an->nmev++;
	return TP_OK;
}

/*
 * The thread numbers of [memory] events read back (or held); a thread with no
 * spans is MEM_NO_SPANS | its index in an->mkeys: a merge of parts finds its
 * number in the part where its spans are (analysis_merge()).
 */
static void mev_fix(void *ctx, void *recs, size_t n)
{
	const struct analysis *an = ctx;
	struct mem_event *v = recs;

	for (size_t i = 0; i < n; i++) {
		uint32_t t = hmap_get(&an->threads, v[i].thread_key), k;
		if (t == UINT32_MAX && (k = hmap_get(&an->mthreads, v[i].thread_key)) < MEM_NO_SPANS)
			t = MEM_NO_SPANS | k;
		v[i].thread = t;
	}
}

/*
 * The [memory] events in the order of the tables pass, by thread number and
 * time (mev_less). They came into runs by thread key, each spilled run cut
 * where the key changes: each part is one thread's in time order, and merges
 * in mev_less's order once its records are given their thread's number as
 * they are read back (mev_fix()). Held ones are given theirs and sorted.
 */
int an_mev_threads(struct analysis *an, struct tp_errbuf *err)
{
	int rc;

	if (!an->m.nruns)
		mev_fix(an, an->m.buf, an->m.n);
	else if ((rc = runs_seal(&an->m, err)))
		return rc;
	an->m.less = mev_order;
	an->m.sort = mev_sort;
	an->m.fix = mev_fix;
	an->m.fixctx = an;
	return an->m.nruns ? TP_OK : runs_seal(&an->m, err);
}

/* A string id held in an int64 field (event.h); 0 when absent or out of range. */
static uint32_t sid64(const struct tp_event *e, uint32_t bit, int64_t v)
{
	return (e->have & bit) && v > 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : 0;
}

/*
 * The communication kernels' correlation ids, a filter link_host() asks of
 * every runtime call with an id: two bits of one 64-bit word, 32 bits an id,
 * built from the kernels' records once the trace is in (an_cc_build()). It may
 * say yes to an id that is none, which costs a struct ccall that no kernel
 * joins (collectives()), never an answer: at 2 ids a word on average, about
 * 4 of its 64 bits are set, so about (4/64)^2 = 0.4 % of the other calls say
 * yes (arithmetic, not measured).
 * Sized to the ids (256 KiB for the 50,500 of bench/make_big_trace.py's 1 GB
 * trace; none without), where it took 1 MiB whatever the trace, from the
 * first such kernel on, in every analysis and every fork of one.
 */
int an_cc_all;

void analysis_comm_filter_all(int on)
{
	an_cc_all = on;
}


/* The filter of the kernels in an->kcr (sealed); -1: out of memory, or a read failed (c->err). */
int an_cc_build(struct analysis *an, struct rcur *c)
{
	const struct crec *k;
	size_t w;

	memset(c, 0, sizeof(*c));
	for (an->ccwords = 8; an->ccwords < an->nccorr / 2; an->ccwords *= 2)
		;
	if (!(an->ccset = tp_calloc(an->ccwords, sizeof(*an->ccset))) || rcur_open(c, &an->kcr))
		return -1;
	while ((k = rcur_next(c)))
		if (k->corr >= 0) {
			uint64_t m = an_cc_mask(k->corr, &w, an);
			an->ccset[w] |= m;
		}
	return c->err ? -1 : 0;
}

static int comm_event(struct analysis *an, const struct tp_event *e, int64_t s, int64_t dur, uint32_t thread, int gpu,
		      struct tp_errbuf *err)
{
	struct crec c = {
		.s = s, .e = s + dur, .thread = thread, .name = e->name, .ord = (uint32_t)an->ncr,
		.corr = gpu && (e->have & TH_CORR) ? e->corr : -1, .ext = gpu && (e->have & TH_EXT) ? e->ext_id : -1,
		.in = (e->have & TH_IN_NELEMS) ? e->in_nelems : -1, .out = (e->have & TH_OUT_NELEMS) ? e->out_nelems : -1,
		.gsize = (e->have & TH_GROUP_SIZE) ? e->group_size : -1, .seq = (e->have & TH_COLL_SEQ) ? e->coll_seq : -1,
		.coll = sid64(e, TH_COLL, e->coll), .pg = sid64(e, TH_PG, e->pg), .dtype = sid64(e, TH_DTYPE, e->dtype),
	};
	int rc = runs_add(gpu ? &an->kcr : &an->hcr, &c, err);

	if (!rc)
		an->ncr++;
	return rc;
}

/* A copy of n elements of size bytes at p (NULL when n is 0); -1: out of memory. */
int an_dup_array(void *out, const void *p, size_t n, size_t size)
{
	void **o = out;

	*o = NULL;
	if (!n)
		return 0;
	if (!(*o = tp_malloc(n * size)))
		return -1;
	memcpy(*o, p, n * size);
	return 0;
}

/* The runs analysis_event() fills: what a fork shares, what is held between forks. */
#define EVENT_RUNS(an) { &(an)->h, &(an)->m, &(an)->gr, &(an)->hcr, &(an)->kcr }
#define NEVENT_RUNS 5

/*
 * What analysis_event() keeps, copied: the runs it fills (runs_fork()),
 * the thread numbers, the string classes, the kernel table and the step
 * spans. Every other field is the passes' and stays as analysis_new() left
 * it.
 */
struct analysis *analysis_fork(const struct analysis *an, void *payload, struct tp_errbuf *err)
{
	const struct runs *from[NEVENT_RUNS] = EVENT_RUNS(an);
	struct analysis *f;

	if (an->finishing) {
		tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "analysis_fork: the analysis is finished");
		return NULL;
	}
	if (!(f = analysis_new(an->str, payload ? payload : an->payload))) {
		an_nomem(err);
		return NULL;
	}
	struct runs *to[NEVENT_RUNS] = EVENT_RUNS(f);
	for (size_t i = 0; i < NEVENT_RUNS; i++)
		if (runs_fork(to[i], from[i], err)) {
			analysis_free(f);
			return NULL;
		}
	f->nh = an->nh, f->ng = an->ng, f->ncr = an->ncr, f->nmev = an->nmev, f->nccorr = an->nccorr;
	f->gmin = an->gmin, f->gmax = an->gmax, f->hmin = an->hmin, f->hmax = an->hmax;
	f->tlo = an->tlo, f->thi = an->thi, f->cmin = an->cmin, f->cmax = an->cmax, f->emin = an->emin, f->emax = an->emax;
	f->part = an->part, f->has_prev = an->has_prev, f->prev_step = an->prev_step, f->seeded = an->seeded;
	f->ncls = an->ncls, f->ncs = f->cscap = an->ncs, f->res.nkernels = f->kcap = an->res.nkernels;
	if (an_dup_array(&f->cls, an->cls, an->ncls, sizeof(*an->cls)) ||
	    an_dup_array(&f->cpu_steps, an->cpu_steps, an->ncs, sizeof(*an->cpu_steps)) ||
	    an_dup_array(&f->res.kernels, an->res.kernels, an->res.nkernels, sizeof(*an->res.kernels)) ||
	    hmap_copy(&f->threads, &an->threads) || hmap_copy(&f->kmap, &an->kmap) ||
	    hmap_copy(&f->mthreads, &an->mthreads) || an_dup_array(&f->mkeys, an->mkeys, an->nmkeys, sizeof(*an->mkeys))) {
		analysis_free(f);
		an_nomem(err);
		return NULL;
	}
	f->nmkeys = f->mkeycap = an->nmkeys;
	return f;
}

int analysis_spill_behind(struct analysis *an)
{
	return runs_behind(&an->h);
}

uint64_t analysis_held_bytes(const struct analysis *an)
{
	const struct runs *r[NEVENT_RUNS + 2] = { &an->h, &an->m, &an->gr, &an->hcr, &an->kcr, &an->d, &an->co };
	uint64_t n = 0;

	/* and what a merge of parts keeps (analysis_merge()), its memory model too */
	for (size_t i = 0; i < NEVENT_RUNS + 2; i++)
		n += (uint64_t)r[i]->end + r[i]->cap * r[i]->size;
	return n + mem_model_bytes(an->mm);
}

int analysis_hold(struct analysis *an, size_t keep, struct tp_errbuf *err)
{
	struct runs *r[NEVENT_RUNS] = EVENT_RUNS(an);
	int rc;

	for (size_t i = 0; i < NEVENT_RUNS; i++)
		if ((rc = runs_flush(r[i], keep, err)))
			return rc;
	return TP_OK;
}


/*
 * What analysis_merge() asks of parts: the instants and ids of the events the
 * passes read (a span they pass over, as the profiler's own window span
 * "PyTorch Profiler (0)" around the whole trace, joins nothing and crosses
 * no part).
 */
static inline void covers(struct analysis *an, const struct tp_event *e, int64_t s, int64_t dur, int op)
{
	an_widen(&an->tlo, &an->thi, s);
	an_widen(&an->tlo, &an->thi, s + dur);
	if (e->have & TH_CORR)
		an_widen(&an->cmin, &an->cmax, e->corr);
	if (op && (e->have & TH_EXT))	/* an operator's: a GPU span may fall back on it (an_link_gpu()) */
		an_widen(&an->emin, &an->emax, e->ext_id);
}

int analysis_event(struct analysis *an, const struct tp_event *e, struct tp_errbuf *err)
{
	uint16_t cc, nc;
	int64_t s, dur, n;

	if (e->ph == 'i' && e->name == TRACE_S_MEMORY && (e->have & TH_TS)) {
		an_widen(&an->tlo, &an->thi, e->ts_ns);
		return memory_event(an, e, err);
	}
	if (e->ph != 'X' || !(e->have & TH_TS))
		return TP_OK;
	if (an_cls_of(an, e->cat, &cc) || an_cls_of(an, e->name, &nc))
		return an_nomem(err);
	cc &= C_MASK;
	s = e->ts_ns;
	dur = (e->have & TH_DUR) && e->dur_ns > 0 ? e->dur_ns : 0;
	if (s > 0 && dur > INT64_MAX - s)
		dur = INT64_MAX - s;
	if (nc & N_STEP) {
		/* the GPU mirror (gpu_user_annotation) is not a step: GPU work belongs
		 * to the step that launched it, wherever the mirror says it ran */
		if (cc == C_GPU_ANN)
			return TP_OK;
		covers(an, e, s, dur, 0);
		an_step_number(an->str(an->payload, e->name), &n);
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, an->ncs + 1, sizeof(*an->cpu_steps)))
			return an_nomem(err);
		an->cpu_steps[an->ncs++] = (struct srec){ .step = n, .s = s, .e = s + dur };
		return TP_OK;
	}
	switch (cc) {
	case C_OP: case C_ANN: case C_RUNTIME: {
		uint32_t *t = thread_of(an, e);
		if (!t)
			return an_nomem(err);
		covers(an, e, s, dur, cc != C_RUNTIME);
		int rt = cc == C_RUNTIME;
		struct hrec r = {
			.s = s, .e = s + dur, .thread = *t, .name = e->name, .ann = cc == C_ANN, .ord = (uint32_t)an->nh,
			.launch = rt && (nc & N_LAUNCH),
			.kind = rt ? H_RUNTIME : (nc & N_DATALOADER) ? H_DATALOADER : H_OP,
			.id = rt ? ((e->have & TH_CORR) ? e->corr : -1) : ((e->have & TH_EXT) ? e->ext_id : -1),
		};
		int rc = runs_add(&an->h, &r, err);
		if (rc)
			return rc;
		an->nh++;
		an->hmin = r.s < an->hmin ? r.s : an->hmin;
		an->hmax = r.e > an->hmax ? r.e : an->hmax;
		if (!rt && ((nc & N_COMM_OP) || (e->have & TH_COLL)))
			return comm_event(an, e, s, dur, *t, 0, err);
		return TP_OK;
	}
	case C_KERNEL: case C_MEMCPY: case C_MEMSET: {
		int kind = cc == C_KERNEL ? AN_GPU_KERNEL : cc == C_MEMCPY ? AN_GPU_MEMCPY : AN_GPU_MEMSET;
		struct grec g = {
			.s = s, .e = s + dur, .kind = (uint8_t)kind, .comm = kind == AN_GPU_KERNEL && (nc & N_COMM),
			.corr = (e->have & TH_CORR) ? e->corr : -1, .ext = (e->have & TH_EXT) ? e->ext_id : -1,
			.ord = (uint32_t)an->ng, .name = e->name,
		};
		int rc;
		covers(an, e, s, dur, 0);
		if (add_kernel(an, e, kind, dur))
			return an_nomem(err);
		if ((rc = runs_add(&an->gr, &g, err)))
			return rc;
		an->ng++;
		an->gmin = g.s < an->gmin ? g.s : an->gmin;
		an->gmax = g.e > an->gmax ? g.e : an->gmax;
		an->nccorr += g.comm && g.corr >= 0;
		return g.comm ? comm_event(an, e, s, dur, 0, 1, err) : TP_OK;
	}
	default:
		return TP_OK;
	}
}

/* Closes c, and reports its read's failure, else (none failed) the one in err, else out of memory. */
int an_rcur_fail(struct rcur *c, struct tp_errbuf *err)
{
	int e = c->err;

	rcur_close(c);
	if (!e)
		return err->rc ? err->rc : an_nomem(err);
	errno = e;
	return spill_fail(err, "cannot read");
}
