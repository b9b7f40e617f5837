/*
 * inside.c: the work inside the complete steps (struct an_inside), what
 * compare sets side by side per step: the operator and kernel tables are
 * whole-trace totals, which hold the GPU work queued before a profiling
 * window's first step and what runs between and after steps (on the H200
 * run healthy: 161.9 ms of kernels in the trace, 115.7 ms inside its 5
 * steps).
 *
 * Each step's share is kept (an->si), keyed by the step's start, because
 * whether a step is complete is known only once every step's GPU work is
 * (an_mark_incomplete()), and a merge of parts marks its steps again: the
 * sum over the complete steps is made at finish and again at each merge.
 *
 * An operator row (the tables pass: self time nested per thread, a child
 * clipped to its parent, an operator whose only child is an operator of the
 * same name one call with it) counts in the step whose ProfilerStep#N span
 * on the host holds its start: a window's first step starts only when the
 * GPU work queued before it ends, after most of its host work. A GPU span
 * counts the part of it inside each step's span ([start_ns, start_ns +
 * dur_ns), the breakdown's clip, so that the kernels' times add up to the
 * step's kernel time where they do not overlap), and a call in the step
 * whose span holds its start. A trace with no step (one step, whole) has
 * none.
 */
#include "analysis/analysis_int.h"

/* The index of (step, gpu, kind, name) in an->si, added empty when missing; -1: out of memory. */
static int64_t item_at(struct analysis *an, size_t step, int gpu, int kind, uint32_t name)
{
	uint64_t key = (uint64_t)step << 35 | (uint64_t)(gpu << 2 | kind) << 32 | name;
	uint32_t *v = hmap_put(&an->simap, key, (uint32_t)an->nsi);

	if (!v)
		return -1;
	if (*v != an->nsi)
		return *v;
	if (tp_grow((void **)&an->si, &an->sicap, an->nsi + 1, sizeof(*an->si)))
		return -1;
	an->si[an->nsi] = (struct an_stepitem){ .step_start = an->res.steps[step].start_ns,
						.v = { .name = name, .gpu = (uint8_t)gpu, .kind = (uint8_t)kind } };
	return (int64_t)an->nsi++;
}

int an_inside_op(struct analysis *an, uint32_t name, int64_t t, int64_t self)
{
	size_t lo = 0, hi = an->ncs;
	int64_t i;

	if (an->whole)
		return 0;
	while (lo < hi) {	/* the first ProfilerStep span starting after t */
		size_t mid = lo + (hi - lo) / 2;
		if (an->cpu_steps[mid].s <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || t >= an->cpu_steps[lo - 1].e)
		return 0;
	if ((i = item_at(an, lo - 1, 0, 0, name)) < 0)
		return -1;
	an->si[i].v.calls++;
	an->si[i].v.ns = tp_sat_add(an->si[i].v.ns, self);
	return 0;
}

int an_inside_gpu(struct analysis *an, struct tp_errbuf *err)
{
	const struct an_step *st = an->res.steps;
	size_t n = an->res.nsteps;
	const struct grec *g;
	struct rcur c;

	if (an->whole || !n || !an->ng)
		return TP_OK;
	if (rcur_open(&c, &an->gr))
		return an_rcur_fail(&c, err);
	while ((g = rcur_next(&c))) {
		size_t lo = 0, hi = n, k;
		int64_t i;
		while (lo < hi) {	/* the first step starting after g's start */
			size_t mid = lo + (hi - lo) / 2;
			if (st[mid].start_ns <= g->s)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* the steps' spans follow one another: the one holding g's start is its call's */
		if (lo && g->s < tp_sat_add(st[lo - 1].start_ns, st[lo - 1].dur_ns)) {
			if ((i = item_at(an, lo - 1, 1, g->kind, g->name)) < 0)
				goto nomem;
			an->si[i].v.calls++;
		}
		for (k = lo ? lo - 1 : 0; k < n && st[k].start_ns < g->e; k++) {
			int64_t e = tp_sat_add(st[k].start_ns, st[k].dur_ns), a = g->s > st[k].start_ns ? g->s : st[k].start_ns;
			int64_t b = g->e < e ? g->e : e;
			if (b <= a)
				continue;
			if ((i = item_at(an, k, 1, g->kind, g->name)) < 0)
				goto nomem;
			an->si[i].v.ns = tp_sat_add(an->si[i].v.ns, b - a);
		}
	}
	if (c.err)
		return an_rcur_fail(&c, err);
	rcur_close(&c);
	return TP_OK;
nomem:
	rcur_close(&c);
	return an_nomem(err);
}

int an_inside_sum(struct analysis *an)
{
	struct hmap done = { 0 }, m = { 0 };
	size_t i, n = 0;
	int rc = -1;

	tp_free(an->res.inside);
	an->res.inside = NULL;
	an->res.ninside = 0;
	for (i = 0; i < an->res.nsteps; i++)
		if (!an->res.steps[i].incomplete && !an->res.steps[i].whole_trace &&
		    !hmap_put(&done, hmap_mix((uint64_t)an->res.steps[i].start_ns), 1))
			goto out;
	if (!(an->res.inside = tp_malloc((an->nsi + 1) * sizeof(*an->res.inside))))
		goto out;
	for (i = 0; i < an->nsi; i++) {
		const struct an_inside *v = &an->si[i].v;
		uint32_t *slot;
		if (hmap_get(&done, hmap_mix((uint64_t)an->si[i].step_start)) == UINT32_MAX)
			continue;
		if (!(slot = hmap_put(&m, (uint64_t)v->name << 3 | (uint64_t)(v->gpu << 2 | v->kind), (uint32_t)n)))
			goto out;
		if (*slot == n) {
			an->res.inside[n++] = *v;
			continue;
		}
		an->res.inside[*slot].calls += v->calls;
		an->res.inside[*slot].ns = tp_sat_add(an->res.inside[*slot].ns, v->ns);
	}
	an->res.ninside = n;
	rc = 0;
out:
	hmap_free(&done);
	hmap_free(&m);
	return rc;
}

int an_inside_combine(struct analysis *o, const struct analysis *a, const struct analysis *b)
{
	size_t na = a ? a->nsi : 0;
	struct an_stepitem *v = tp_malloc((na + b->nsi + 1) * sizeof(*v));

	if (!v)
		return -1;
	if (na)
		memcpy(v, a->si, na * sizeof(*v));
	if (b->nsi)
		memcpy(v + na, b->si, b->nsi * sizeof(*v));
	tp_free(o->si);	/* o may be a: its items are copied by now */
	o->si = v;
	o->nsi = na + b->nsi;
	o->sicap = o->nsi + 1;
	return an_inside_sum(o);
}
