/*
 * steps.c: steps: their bounds, the calls that wait for the GPU, queued
 * work, incomplete steps, and each step's breakdown by component.
 */
#include "analysis/analysis_int.h"

/*
 * The incomplete steps, once every step's GPU work is known (none when no
 * step launched any): one that launched none, or one that launched kernels
 * no GPU span names after last, the latest launch one names (the GPU
 * records stop while the launches go on; a record missing in the middle is
 * not a cut). unrec_ns: each step's latest launch that no GPU span names
 * (gjoin_skip()).
 */
void an_mark_incomplete(struct an_step *v, size_t n, int64_t last)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += v[i].gpu_calls > 0;
	for (i = 0; i < n; i++)
		v[i].incomplete = !k ? AN_COMPLETE : !v[i].gpu_calls ? AN_INC_NO_GPU
			: v[i].unrec_ns > last ? AN_INC_CUT : AN_COMPLETE;
}

/* The steps in start order; a trace with none is one step, whole. */
int an_steps_prepare(struct analysis *an)
{
	if (!an->ncs && (an->nh || an->ng)) {	/* the whole trace, as one step */
		int64_t a = an->hmin < an->gmin ? an->hmin : an->gmin, b = an->hmax > an->gmax ? an->hmax : an->gmax;
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, 1, sizeof(*an->cpu_steps)))
			return -1;
		an->cpu_steps[an->ncs++] = (struct srec){ .step = 0, .s = a, .e = an_fit_end(a, b) };
		an->whole = 1;
	}
	if (an->ncs > 1)
		qsort(an->cpu_steps, an->ncs, sizeof(*an->cpu_steps), an_cmp_srec);
	an->last_step = an->ncs ? an->cpu_steps[an->ncs - 1].step : 0;
	if (!(an->gend = tp_malloc((an->ncs + 1) * sizeof(*an->gend))) ||
	    !(an->gfirst = tp_malloc((an->ncs + 1) * sizeof(*an->gfirst))) ||
	    !(an->syncn = tp_calloc(an->ncs + 1, sizeof(*an->syncn))) ||
	    !(an->syncns = tp_calloc(an->ncs + 1, sizeof(*an->syncns))) ||
	    !(an->csmax = tp_malloc((an->ncs + 1) * sizeof(*an->csmax))) ||
	    !(an->unrec = tp_malloc((an->ncs + 1) * sizeof(*an->unrec))))
		return -1;
	for (size_t i = 0; i < an->ncs; i++) {
		an->csmax[i] = i && an->csmax[i - 1] > an->cpu_steps[i].e ? an->csmax[i - 1] : an->cpu_steps[i].e;
		an->unrec[i] = INT64_MIN;
	}
	return 0;
}

/*
 * A runtime call that waits for the GPU (an_is_sync()), [s, e), counted in
 * each step it starts in: inside the ProfilerStep#N span. Kineto's own
 * synchronize when a cycle stops, after the last step, belongs to none; an
 * aten::item() on a CPU tensor (AdamW reads its step counts so, once a
 * parameter) makes none.
 */
void an_sync_call(struct analysis *an, int64_t s, int64_t e)
{
	size_t lo = an_steps_by(an, s);

	/* those of them that end after s (steps may overlap) */
	for (; lo > 0 && an->csmax[lo - 1] > s; lo--)
		if (an->cpu_steps[lo - 1].e > s) {
			an->syncn[lo - 1]++;
			an->syncns[lo - 1] = tp_sat_add(an->syncns[lo - 1], e - s);
		}
}

/*
 * Steps and their breakdown.
 *
 * A step owns the GPU work it launched (owners(), above): the CPU runs
 * ahead of the GPU, so the kernels running while ProfilerStep#N's CPU span
 * is open are often step N-1's, and counting GPU work by where it runs
 * would move it between steps at random. A step's span is then the one
 * torch-tb-profiler gives it (event_parser.py, _update_steps_duration):
 * from its CPU start to the later of its CPU end and the end of the last
 * GPU span it launched, starting no earlier than the step before it ends,
 * so that steps never overlap and each instant is in one step at most.
 * cpu_dur_ns is the ProfilerStep#N span as written. The gpu_user_annotation
 * mirror of a step is not used: it may be shorter or longer than the work
 * the step launched, and clipping to it lost that work.
 *
 * The span is split so that every instant is counted once, in the first of
 * these that is active then (torch-tb-profiler's overview priority, with
 * communication after the other GPU work as it has it): kernel (computation
 * kernels the step launched, on any stream), memcpy, memset, communication
 * (NCCL/RCCL/gloo kernels it launched, where no computation kernel or copy
 * runs: exposed communication), runtime (CUDA runtime/driver calls), dataloader
 * (enumerate(DataLoader)#... spans), cpu (any other operator or annotation,
 * on any thread), else idle; the host parts count whatever runs on the host
 * in the step's span. So the components sum to the duration exactly.
 * comm_overlap_ns is the step's communication under its computation kernels,
 * gpu_busy_ns the time any kernel it launched runs (torch-tb-profiler's GPU
 * busy time, over which it reports GPU utilization).
 * Kernels that overlap on one stream are all kept: each counts in the
 * kernel table, and their union in the breakdown.
 *
 * A trace without steps is one step over its whole span, owning all of
 * its GPU work. A step is incomplete (left out of means, medians, compare
 * and drift) when it launched no GPU work while another step did, or when
 * it launched kernels after the last one the trace recorded (launches whose
 * correlation id no GPU span has): the profiler stopped before their
 * records came. (torch-tb-profiler drops a tail step that launched under 80% of
 * the GPU work of the one before; that also drops a complete last step
 * that copies less than the first, as on hta_compare_base.)
 */
/* Each step's runtime calls that wait for the GPU (an_sync_call()). */
static void step_syncs(struct analysis *an)
{
	for (size_t i = 0; i < an->ncs && i < an->res.nsteps; i++) {
		an->res.steps[i].cpu_end_ns = an->cpu_steps[i].e;
		an->res.steps[i].sync_calls = an->syncn[i];
		an->res.steps[i].sync_ns = an->syncns[i];
		an->res.steps[i].unrec_ns = an->unrec[i];
	}
}

/*
 * A profiling window's first step starts when the GPU work queued before
 * it ends, as torch-tb-profiler has it (event_parser.py: the first step
 * starts at the latest end, before its own first GPU span, of the GPU spans
 * no step launched). The host runs ahead of the GPU, so when a window opens
 * the GPU is still busy with what the steps before it launched, recorded or
 * not; counted from the host's start, the step took that backlog for its own
 * time (the QLoRA schedule, 1 step in 10: 95 ms steps for 24 ms of kernels,
 * low GPU utilization and "CPU-bound" on a loop the GPU held back). A
 * window's first step is the first of a run of consecutive step numbers, so
 * that cycles stitched into one run get the rule each, and chunks of one
 * window do not. out[k]: the instant step k starts no sooner than, INT64_MIN
 * for the others. TP_OK, or the failure (in err).
 */
static int queued(struct analysis *an, int64_t *out, struct tp_errbuf *err)
{
	size_t *first = NULL, n = 0, i;
	const int64_t *e;
	int64_t last = INT64_MIN;
	struct rcur c;
	int rc = TP_OK;

	memset(&c, 0, sizeof(c));
	for (i = 0; i < an->ncs; i++)
		out[i] = INT64_MIN;
	if (an->whole || !an->ncs || !(first = tp_malloc(an->ncs * sizeof(*first))))
		return an->whole || !an->ncs ? TP_OK : an_nomem(err);
	for (i = 0; i < an->ncs; i++) {
		/* the step before it: the part before's last, for a part's first (analysis_new_after()) */
		int has = i || an->has_prev;
		int64_t before = i ? an->cpu_steps[i - 1].step : an->prev_step;
		if (an->gfirst[i] != INT64_MAX && (!has || before != an->cpu_steps[i].step - 1))
			first[n++] = i;
	}
	/* by their first GPU span's start (they are in start order, and so, nearly, are those) */
	for (i = 1; i < n; i++)
		for (size_t k = i; k && an->gfirst[first[k - 1]] > an->gfirst[first[k]]; k--) {
			size_t t = first[k];
			first[k] = first[k - 1];
			first[k - 1] = t;
		}
	if (n && rcur_open(&c, &an->ub)) {
		rc = an_rcur_fail(&c, err);
		goto out;
	}
	e = n ? rcur_next(&c) : NULL;
	for (i = 0; i < n; i++) {
		for (; e && *e < an->gfirst[first[i]]; e = rcur_next(&c))
			last = *e;
		out[first[i]] = last;
	}
	if (c.err)
		rc = an_rcur_fail(&c, err);
	else
		rcur_close(&c);
out:
	tp_free(first);
	runs_free(&an->ub);
	return rc;
}

int an_breakdown(struct analysis *an, struct tp_errbuf *err)
{
	struct ivals cat[AN_IDLE] = { { 0 } }, win = { 0 }, cum = { 0 }, tmp = { 0 }, comm = { 0 };
	const int64_t *end = an->gend;	/* of each step's GPU spans */
	const struct brec *br;
	size_t i, k;
	struct rcur bc;
	struct hunion hu[AN_IDLE];	/* the host's busy time per category (link_host()) */
	int64_t prev_end = INT64_MIN, last, *from = NULL;
	int c, whole = an->whole, rc = TP_ERR_NOMEM;

	memset(&bc, 0, sizeof(bc));
	memset(hu, 0, sizeof(hu));
	if (!an->owned && (rc = an_gpu_owners(an, err)))
		goto out;
	rc = TP_ERR_NOMEM;
	if (!(from = tp_malloc((an->ncs + 1) * sizeof(*from))))
		goto out;
	if ((rc = queued(an, from, err)))
		goto out;
	last = an->glast;
	rc = TP_ERR_NOMEM;
	if (rcur_open(&bc, &an->bs))
		goto out;
	for (c = AN_COMM; c < AN_IDLE; c++)
		if (an_hunion_open(&hu[c], &an->hc[c]))
			goto out;
	br = rcur_next(&bc);
	an->res.steps = tp_calloc(an->ncs + 1, sizeof(*an->res.steps));
	if (!an->res.steps)
		goto out;
	for (i = 0; i < an->ncs; i++) {
		const struct srec *s = &an->cpu_steps[i];
		struct an_step *st = &an->res.steps[an->res.nsteps++];
		int64_t a = s->s > prev_end ? s->s : prev_end, b = s->e > end[i] ? s->e : end[i];
		int64_t covered = 0, len, klen = 0, clen = 0;
		if (from[i] > a)	/* a window's first step, after the GPU work queued before it */
			a = from[i];
		if (b < a)
			b = a;
		prev_end = b = an_fit_end(a, b);
		*st = (struct an_step){ .step = s->step, .start_ns = a, .dur_ns = b - a, .cpu_dur_ns = s->e - s->s,
					.whole_trace = whole };
		for (c = AN_KERNEL; c <= AN_COMM; c++)
			cat[c].n = 0;
		for (; br && br->step == (int32_t)i; br = rcur_next(&bc)) {
			st->gpu_calls++;
			if (an_ivals_add(&cat[br->cat], br->s > a ? br->s : a, br->e < b ? br->e : b))
				goto out;
		}
		if (bc.err)
			goto out;
		cum.n = 0;
		for (c = 0; c < AN_IDLE; c++) {
			/* the step's own GPU work, or the host's in its span */
			const struct ivals *x = c < AN_COMM ? &cat[c] : &win;
			if (c <= AN_COMM)
				an_ivals_union(&cat[c]);
			if (c >= AN_COMM && an_hunion_window(&hu[c], a, b, &win))
				goto out;
			if (c == AN_COMM) {	/* its communication kernels, and the host's collectives */
				if (an_merge_measure(&cat[c], &win, &comm, &len))
					goto out;
				x = &comm;
			}
			if (an_merge_measure(&cum, x, &tmp, &len))
				goto out;
			struct ivals t = cum;
			cum = tmp;
			tmp = t;
			st->comp_ns[c] = len - covered;
			covered = len;
			if (c == AN_KERNEL)
				klen = len;
		}
		st->comp_ns[AN_IDLE] = st->dur_ns - covered;
		/* communication kernels under computation: |kernel| + |comm| - |kernel u comm| (the
		 * host's collectives are not: they wait, the GPU does not) */
		for (k = 0; k < cat[AN_COMM].n; k++)
			clen += cat[AN_COMM].v[k].e - cat[AN_COMM].v[k].s;
		if (clen && an_merge_measure(&cat[AN_KERNEL], &cat[AN_COMM], &tmp, &len))
			goto out;
		st->comm_overlap_ns = clen ? klen - (len - clen) : 0;	/* no overflow: len >= clen, len - clen <= klen */
		st->gpu_busy_ns = clen ? len : klen;
	}
	for (c = AN_COMM; c < AN_IDLE; c++)
		if (hu[c].c.err)
			goto out;
	step_syncs(an);
	if (!whole)
		an_mark_incomplete(an->res.steps, an->res.nsteps, last);
	rc = TP_OK;
out:
	tp_free(from);
	for (c = 0; c < AN_IDLE; c++)
		tp_free(cat[c].v);
	tp_free(comm.v);
	tp_free(win.v);
	tp_free(cum.v);
	tp_free(tmp.v);
	for (c = AN_COMM; c < AN_IDLE; c++) {
		if (hu[c].c.err && !bc.err)
			bc.err = hu[c].c.err;
		rcur_close(&hu[c].c);
		runs_free(&an->hc[c]);
	}
	if (bc.err && !err->rc) {
		errno = bc.err;
		spill_fail(err, "cannot read");
	}
	rcur_close(&bc);
	runs_free(&an->bs);
	if (rc == TP_ERR_NOMEM && !err->rc)
		return an_nomem(err);
	return rc ? err->rc : TP_OK;
}
