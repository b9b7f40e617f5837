/*
 * fmt_stacks.c: folded stacks (see textfmt.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt_int.h"

/* -- stacks -- */

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

static int rehash(struct textfmt_parser *p)
{
	size_t nc = p->htcap ? p->htcap * 2 : 1024;
	struct fslot *nt = tp_calloc(nc, sizeof(*nt));

	if (!nt)
		return -1;
	for (size_t i = 0; i < p->r.nframes; i++) {
		const char *nm = p->fr[i].name;
		size_t h = (size_t)fnv(nm, strlen(nm)) & (nc - 1);
		while (nt[h].idx1)
			h = (h + 1) & (nc - 1);
		nt[h].idx1 = (uint32_t)(i + 1);
	}
	tp_free(p->ht);
	p->ht = nt, p->htcap = nc;
	return 0;
}

/* The frame's index, added when new; -1 over the caps. */
static long frame_of(struct textfmt_parser *p, const char *s, size_t n)
{
	size_t h;

	if ((p->r.nframes + 1) * 2 > p->htcap && rehash(p))
		return -1;
	h = (size_t)fnv(s, n) & (p->htcap - 1);
	while (p->ht[h].idx1) {
		const char *nm = p->fr[p->ht[h].idx1 - 1].name;
		if (strlen(nm) == n && !memcmp(nm, s, n))
			return (long)p->ht[h].idx1 - 1;
		h = (h + 1) & (p->htcap - 1);
	}
	size_t old = p->cap_fr, i = p->r.nframes;
	if (i >= p->lim.max_rows || i >= UINT32_MAX - 1)
		return -1;
	if (i == p->cap_fr) {
		size_t nc = old ? old * 2 : 256;
		/* a frame: its tf_frame, two sums, a stamp, an end byte and two slots of the table */
		if (tf_held(p, (nc - old) * (sizeof(struct tf_frame) + 3 * 8 + 1 + 2 * sizeof(*p->ht))))
			return -1;
		struct tf_frame *a = tp_realloc(p->fr, nc * sizeof(*a));
		if (!a)
			return -1;
		p->fr = a;
		int64_t *f = tp_realloc(p->first_sum, nc * sizeof(*f));
		if (!f)
			return -1;
		p->first_sum = f;
		int64_t *l = tp_realloc(p->last_sum, nc * sizeof(*l));
		if (!l)
			return -1;
		p->last_sum = l;
		uint64_t *st = tp_realloc(p->stamp, nc * sizeof(*st));
		if (!st)
			return -1;
		p->stamp = st;
		uint8_t *en = tp_realloc(p->ends, nc);
		if (!en)
			return -1;
		p->ends = en;
		p->cap_fr = nc;
	}
	if (!(p->fr[i].name = tf_keep_str(p, s, n)))
		return -1;
	p->fr[i].self = p->fr[i].total = 0;
	p->first_sum[i] = p->last_sum[i] = 0;
	p->stamp[i] = 0;
	p->ends[i] = 0;
	p->ht[h].idx1 = (uint32_t)(i + 1);
	p->r.nframes++;
	return (long)i;
}

static int sat_add(int64_t *a, int64_t b)
{
	if (*a > INT64_MAX - b)
		return -1;
	*a += b;
	return 0;
}

int tf_stacks_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	size_t i = n;
	int64_t w;

	if (!n)
		return TP_OK;
	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	if (i == n || i < 2 || s[i - 1] != ' ')
		return tf_bad(p, err, "not \"frame;frame;... weight\"");
	if (tf_dec_scaled(s + i, n - i, 0, &w))
		return tf_bad(p, err, "the weight does not fit");
	size_t fn = i - 1;
	long first = -1, last = -1;
	p->r.nstacks++;
	for (size_t a = 0; a <= fn;) {
		const char *semi = memchr(s + a, ';', fn - a);
		size_t b = semi ? (size_t)(semi - s) : fn;
		if (b == a)
			return tf_bad(p, err, "an empty frame");
		long f = frame_of(p, s + a, b - a);
		if (f < 0)
			return tf_toobig(p, err);
		if (first < 0)
			first = f;
		last = f;
		if (p->stamp[f] != p->r.nstacks) {	/* a frame counts once per stack (recursion) */
			p->stamp[f] = p->r.nstacks;
			if (sat_add(&p->fr[f].total, w))
				return tf_bad(p, err, "the weights overflow");
		}
		a = b + 1;
		if (!semi)
			break;
	}
	p->ends[first] |= 1;
	p->ends[last] |= 2;
	if (sat_add(&p->first_sum[first], w) || sat_add(&p->last_sum[last], w) || sat_add(&p->r.stacks_total, w))
		return tf_bad(p, err, "the weights overflow");
	return TP_OK;
}

static int by_total(const void *a, const void *b)
{
	const struct tf_frame *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}

/* End of input: self from the leaf end, frames by total. */
int tf_stacks_finish(struct textfmt_parser *p, struct tp_errbuf *err)
{
	size_t nfirst = 0, nlast = 0;

	if (!p->r.nframes)
		return tf_bad(p, err, "no stacks");
	for (size_t i = 0; i < p->r.nframes; i++)
		nfirst += (p->ends[i] & 1) != 0, nlast += (p->ends[i] & 2) != 0;
	/* the root end has fewer distinct frames */
	p->r.leaf_first = nlast < nfirst;
	for (size_t i = 0; i < p->r.nframes; i++)
		p->fr[i].self = p->r.leaf_first ? p->first_sum[i] : p->last_sum[i];
	qsort(p->fr, p->r.nframes, sizeof(*p->fr), by_total);
	tp_free(p->ht);
	p->ht = NULL, p->htcap = 0;	/* the order changed: no more lookups */
	return TP_OK;
}
