/*
 * walk.c: interval lists (host busy time per category) and the nesting
 * stack the passes over the host spans walk (an_walk_all()).
 */
#include "analysis/analysis_int.h"

/* ---- interval lists ---- */

SORT_DEFINE(sort_ival, struct ival, ival_less)

int an_ivals_add(struct ivals *l, int64_t s, int64_t e)
{
	if (e <= s)
		return 0;
	if (tp_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -1;
	l->v[l->n++] = (struct ival){ s, e };
	return 0;
}

/* Sort and merge into disjoint intervals, in place. */
void an_ivals_union(struct ivals *l)
{
	size_t i, o = 0;

	if (l->n > 1)
		sort_ival(l->v, l->n);
	for (i = 0; i < l->n; i++) {
		if (o && l->v[i].s <= l->v[o - 1].e) {
			if (l->v[i].e > l->v[o - 1].e)
				l->v[o - 1].e = l->v[i].e;
		} else {
			l->v[o++] = l->v[i];
		}
	}
	l->n = o;
}


static void hunion_advance(struct hunion *h)
{
	if (!(h->has = h->next != NULL))
		return;
	h->u = *h->next;
	for (h->next = rcur_next(&h->c); h->next && h->next->s <= h->u.e; h->next = rcur_next(&h->c))
		if (h->next->e > h->u.e)
			h->u.e = h->next->e;
}

int an_hunion_open(struct hunion *h, const struct runs *r)
{
	if (rcur_open(&h->c, r))
		return -1;
	h->next = rcur_next(&h->c);
	hunion_advance(h);
	return 0;
}

/* The parts of the united intervals in [a, b) into out (sorted); a is no less than the last b. */
int an_hunion_window(struct hunion *h, int64_t a, int64_t b, struct ivals *out)
{
	out->n = 0;
	while (h->has && h->u.e <= a)
		hunion_advance(h);
	for (; h->has && h->u.s < b; hunion_advance(h)) {
		if (an_ivals_add(out, h->u.s > a ? h->u.s : a, h->u.e < b ? h->u.e : b))
			return -1;
		if (h->u.e > b)
			break;	/* the rest is the next window's */
	}
	return 0;
}

/* out = x united with y (both sorted, disjoint); returns the covered length. */
int an_merge_measure(const struct ivals *x, const struct ivals *y, struct ivals *out, int64_t *len)
{
	size_t i = 0, j = 0;

	out->n = 0;
	*len = 0;
	while (i < x->n || j < y->n) {
		struct ival v = j >= y->n || (i < x->n && x->v[i].s <= y->v[j].s) ? x->v[i++] : y->v[j++];
		if (out->n && v.s <= out->v[out->n - 1].e) {
			if (v.e > out->v[out->n - 1].e) {
				*len += v.e - out->v[out->n - 1].e;
				out->v[out->n - 1].e = v.e;
			}
		} else {
			if (an_ivals_add(out, v.s, v.e))
				return -1;
			*len += v.e - v.s;
		}
	}
	return 0;
}

/* ---- the passes over the host spans: a nesting stack (pushed and popped: analysis_int.h) ---- */

static int walk_open(struct walk *w, struct analysis *an)
{
	memset(w, 0, sizeof(*w));
	return rcur_open(&w->cur, &an->h);
}

/* Closes w; -1 when its read failed. */
static int walk_close(struct walk *w, struct tp_errbuf *err)
{
	int e = w->cur.err;

	rcur_close(&w->cur);
	tp_free(w->st);
	w->st = NULL;
	if (e) {
		errno = e;
		return spill_fail(err, "cannot read");
	}
	return !w->nomem ? TP_OK : err->rc ? err->rc : an_nomem(err);
}


int an_walk_all(struct analysis *an, visit_fn visit, void (*pop)(struct walk *, struct frame *, struct frame *),
		    void *arg, struct tp_errbuf *err)
{
	const struct hrec *r;
	struct walk w;

	if (walk_open(&w, an))
		return walk_close(&w, err) ? err->rc : an_nomem(err);
	w.pop = pop;
	w.arg = arg;
	while ((r = rcur_next(&w.cur)) && !w.nomem)
		if (visit(&w, r))
			w.nomem = 1;
	if (!w.cur.err && !w.nomem && visit(&w, NULL))
		w.nomem = 1;
	an_walk_unwind(&w, 0, 1);
	return walk_close(&w, err);
}
