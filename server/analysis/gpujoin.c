/*
 * gpujoin.c: the GPU spans joined with the runtime calls that launched
 * them, by correlation id (struct gjoin), each span's launching operator
 * and step (an_gpu_owner()), and the steps' lookups by instant.
 */
#include "analysis/analysis_int.h"

/* The link an id names in m (struct link); UINT32_MAX: none. */
uint32_t an_link_by(const struct hmap *m, int64_t id)
{
	uint32_t j = id >= 0 ? hmap_get(m, (uint64_t)id) : UINT32_MAX;

	return j == NO_HOST ? UINT32_MAX : j;
}

/* The steps (sorted by start) that start at or before instant t: [0, the result). */
size_t an_steps_by(const struct analysis *an, int64_t t)
{
	size_t lo = 0, hi = an->ncs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (an->cpu_steps[mid].s <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The step whose CPU span holds instant t; -1: none. */
int32_t an_step_at(const struct analysis *an, int64_t t)
{
	size_t lo = an_steps_by(an, t);

	return lo && t < an->cpu_steps[lo - 1].e ? (int32_t)(lo - 1) : -1;
}



/* TP_OK, or the failure (j closed) */
int an_gjoin_open(struct gjoin *j, struct analysis *an, int unrec, struct tp_errbuf *err)
{
	memset(j, 0, sizeof(*j));
	j->an = an;
	j->unrec = unrec;
	if (rcur_open(&j->g, &an->gr) || rcur_open(&j->l, &an->lr)) {
		j->nomem = 1;	/* unless a read failed, which an_gjoin_close() reports first */
		return an_gjoin_close(j, err);
	}
	j->next = rcur_next(&j->l);
	return TP_OK;
}

/* The calls of ids below id (INT64_MAX: all): their ids name no GPU span. */
static void gjoin_skip(struct gjoin *j, int64_t id)
{
	struct analysis *an = j->an;

	int32_t k;

	for (; j->next && j->next->corr < id; j->next = rcur_next(&j->l))
		if (j->unrec && j->next->launch && an->ng && (k = an_step_at(an, j->next->s)) >= 0 &&
		    j->next->s > an->unrec[k])
			an->unrec[k] = j->next->s;
}

/* The next GPU span, j->linked and j->call its id's call; NULL at the end or on a failure. */
const struct grec *an_gjoin_next(struct gjoin *j)
{
	const struct grec *g = rcur_next(&j->g);

	if (!g) {
		if (!j->g.err)
			gjoin_skip(j, INT64_MAX);
		return NULL;
	}
	if (!j->started || g->corr != j->corr) {
		j->started = 1;
		j->corr = g->corr;
		j->linked = 0;
		gjoin_skip(j, g->corr);
		if (j->next && j->next->corr == g->corr) {
			j->call = *j->next;	/* one call, many GPU spans: a CUDA graph's launch */
			j->linked = 1;
			while (j->next && j->next->corr == g->corr)
				j->next = rcur_next(&j->l);
		}
	}
	return j->nomem ? NULL : g;
}

int an_gjoin_close(struct gjoin *j, struct tp_errbuf *err)
{
	int e = j->g.err ? j->g.err : j->l.err;

	rcur_close(&j->g);
	rcur_close(&j->l);
	if (e) {
		errno = e;
		return spill_fail(err, "cannot read");
	}
	return j->nomem ? an_nomem(err) : TP_OK;
}

/* A span's operator and launch instant: its call's, else its External id's, else none and its start. */
static int32_t gpu_launch(const struct analysis *an, const struct gjoin *j, const struct grec *g, int64_t *t,
			  int *known)
{
	int32_t op = j->linked ? j->call.op : -1;
	uint32_t k = op < 0 ? an_link_by(&an->ext, g->ext) : UINT32_MAX;

	*t = j->linked ? j->call.s : k != UINT32_MAX ? an->links[k].s : g->s;
	*known = j->linked || k != UINT32_MAX;
	return op >= 0 || k == UINT32_MAX ? op : an->linkop[k];
}


/* b, or less, so that b - a fits in int64 (traces' times are untrusted) */
int64_t an_fit_end(int64_t a, int64_t b)
{
	int64_t d;

	return __builtin_sub_overflow(b, a, &d) ? a + INT64_MAX : b;
}

int an_cmp_srec(const void *a, const void *b)
{
	const struct srec *x = a, *y = b;

	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}


/*
 * The step that launched each GPU span: the one whose CPU span holds the
 * runtime call its correlation id names, else the operator its External id
 * names (traces that kept no runtime event), else the span's own start
 * (gpu_launch()); none when that instant is in no step (an_steps_prepare()
 * sorted them). Into runs by step for an_breakdown(), with, into runs by place
 * for the tables pass, the GPU time each operator launched itself; gend[k]:
 * the latest end of step k's spans, glast: the latest launch instant.
 */
int an_gpu_owner(struct analysis *an, const struct gjoin *j, const struct grec *g, struct tp_errbuf *err)
{
	int64_t t;
	int known;
	int32_t op = gpu_launch(an, j, g, &t, &known), st = 0;
	int rc;

	if (!an->whole) {
		st = an_step_at(an, t);
		if (t > an->glast)
			an->glast = t;
		/* what the window-first rule needs (queued()) */
		if (known && st >= 0) {
			if (g->s < an->gfirst[st])
				an->gfirst[st] = g->s;
		} else if ((rc = runs_add(&an->ub, &g->e, err))) {
			return rc;
		}
	}
	if (op >= 0 && (rc = runs_add(&an->gp, &(struct gpair){ .pos = (uint32_t)op, .dur = g->e - g->s }, err)))
		return rc;
	if (st < 0)
		return TP_OK;
	if (g->e > an->gend[st])
		an->gend[st] = g->e;
	struct brec b = { .s = g->s, .e = g->e, .step = st,
			  .cat = g->comm ? AN_COMM : g->kind == AN_GPU_KERNEL ? AN_KERNEL :
			  g->kind == AN_GPU_MEMCPY ? AN_MEMCPY : AN_MEMSET };
	return runs_add(&an->bs, &b, err);
}

/* an_gpu_owner()'s records, none yet: room for them */
void an_owners_begin(struct analysis *an)
{
	runs_free(&an->bs);
	runs_free(&an->gp);
	runs_free(&an->ub);
	an->bs.limit = an_run_records(an, sizeof(struct brec));
	an->gp.limit = an_run_records(an, sizeof(struct gpair));
	an->ub.limit = an_run_records(an, sizeof(int64_t));
	an->glast = INT64_MIN;
	for (size_t i = 0; i < an->ncs; i++) {
		an->gend[i] = INT64_MIN;
		an->gfirst[i] = INT64_MAX;
	}
	an->owned = 0;
}

int an_owners_end(struct analysis *an, struct tp_errbuf *err)
{
	int rc = runs_seal(&an->bs, err);

	if (!rc)
		rc = runs_seal(&an->gp, err);
	if (!rc)
		rc = runs_seal(&an->ub, err);
	an->owned = !rc;
	return rc;
}

/* an_gpu_owner() for every span, in a join of its own (an_link_gpu()'s first join could not: see there) */
int an_gpu_owners(struct analysis *an, struct tp_errbuf *err)
{
	const struct grec *g;
	struct gjoin j;
	int rc = TP_OK, jrc;

	an_owners_begin(an);
	if ((rc = an_gjoin_open(&j, an, 0, err)))
		return rc;
	while (!rc && (g = an_gjoin_next(&j)))
		rc = an_gpu_owner(an, &j, g, err);
	jrc = an_gjoin_close(&j, err);
	if (rc || jrc)
		return rc ? rc : jrc;
	return an_owners_end(an, err);
}
