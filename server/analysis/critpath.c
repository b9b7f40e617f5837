/*
 * critpath.c: the critical path of a step across ranks (see critpath.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "critpath.h"
#include "tp.h"

static const char *const kind_names[CP_NKINDS] = { "cpu_op", "runtime", "sync", "kernel", "memcpy", "memset",
						   "collective", "idle", "host_gap" };

const char *cp_kind_name(int kind)
{
	return kind >= 0 && kind < CP_NKINDS ? kind_names[kind] : "unknown";
}

int cp_add_window(struct cp_input *in, int rank, int64_t start_ns, int64_t end_ns)
{
	if (tp_grow((void **)&in->win, &in->wcap, in->nwin + 1, sizeof(*in->win)))
		return -1;
	in->win[in->nwin++] = (struct cp_window){ rank, start_ns, end_ns };
	return 0;
}

int cp_add_coll(struct cp_input *in, int rank, int64_t start_ns, int64_t launch_ns, size_t inst)
{
	if (tp_grow((void **)&in->colls, &in->ccap, in->ncolls + 1, sizeof(*in->colls)))
		return -1;
	in->colls[in->ncolls++] = (struct cp_coll){ rank, start_ns, launch_ns, inst };
	return 0;
}

/*
 * The window of rank: the last one found when it is that rank's (each
 * rank's events come together), else a scan. Scanned for every event, a
 * 10,000-rank step spent 17 % of /critical_path here (issue 50).
 */
static const struct cp_window *window_of(struct cp_input *in, int rank)
{
	if (in->wlast < in->nwin && in->win[in->wlast].rank == rank)
		return &in->win[in->wlast];
	for (size_t i = 0; i < in->nwin; i++)
		if (in->win[i].rank == rank)
			return &in->win[in->wlast = i];
	return NULL;
}

static int is_sync(const char *name)
{
	return !strcmp(name, "cudaStreamSynchronize") || !strcmp(name, "cudaDeviceSynchronize") ||
	       !strcmp(name, "cudaEventSynchronize");
}

/* a host operator of a collective: gloo's spans, NCCL's CPU side */
static int host_collective(const char *name)
{
	return !strncmp(name, "gloo:", 5) || !strncmp(name, "nccl:", 5) || !strncmp(name, "c10d::", 6) ||
	       !strcmp(name, "record_param_comms");
}

/* enum cp_kind of an event of category cat, -1 when not on any path */
static int kind_of(const char *name, const char *cat)
{
	if (!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator") || !strcmp(cat, "user_annotation"))
		return strncmp(name, "ProfilerStep#", 13) ? host_collective(name) ? CP_COLLECTIVE : CP_CPU_OP : -1;
	if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver") || !strcmp(cat, "Runtime"))
		return is_sync(name) ? CP_SYNC : CP_RUNTIME;
	if (!strcmp(cat, "kernel") || !strcmp(cat, "Kernel"))
		return CP_KERNEL;
	if (!strcmp(cat, "gpu_memcpy") || !strcmp(cat, "Memcpy"))
		return CP_MEMCPY;
	if (!strcmp(cat, "gpu_memset") || !strcmp(cat, "Memset"))
		return CP_MEMSET;
	return -1;
}

static int on_device(int kind)
{
	return kind == CP_KERNEL || kind == CP_MEMCPY || kind == CP_MEMSET;
}

int cp_add_event(struct cp_input *in, int rank, const struct tp_event *e, int64_t base_ns, const char *name,
		 const char *cat)
{
	const struct cp_window *w;
	struct cp_node *n;
	int64_t start, end;
	int kind;

	if (e->ph != 'X' || (e->have & (TH_TS | TH_DUR)) != (TH_TS | TH_DUR) || e->dur_ns < 0 || !name || !cat ||
	    (kind = kind_of(name, cat)) < 0 || !(w = window_of(in, rank)))
		return 0;
	start = tp_sat_add(e->ts_ns, base_ns);
	end = tp_sat_add(start, e->dur_ns);
	/* an empty host event holds no time, and would let the walk go round inside its parent; one
	 * around the whole step is its context (as ProfilerStep# is), not work in it */
	if (start >= w->end_ns || end <= w->start_ns || (!on_device(kind) && end == start) ||
	    (!on_device(kind) && start <= w->start_ns && end >= w->end_ns))
		return 0;
	if (tp_grow((void **)&in->nodes, &in->cap, in->n + 1, sizeof(*in->nodes)))
		return -1;
	n = &in->nodes[in->n];
	*n = (struct cp_node){ .rank = rank, .kind = kind, .dev = on_device(kind), .start_ns = start, .end_ns = end,
			       .pid = (e->have & TH_PID) ? e->pid : 0, .tid = (e->have & TH_TID) ? e->tid : 0,
			       .device = (e->have & TH_DEVICE) ? e->device : (e->have & TH_PID) ? e->pid : 0,
			       .stream = (e->have & TH_STREAM) ? e->stream : (e->have & TH_TID) ? e->tid : 0,
			       .corr = (e->have & TH_CORR) ? e->corr : -1, .inst = SIZE_MAX };
	if (e->pid_s)
		n->pid = (int64_t)e->pid_sid << 1 | 1;
	if (e->tid_s)
		n->tid = (int64_t)e->tid_sid << 1 | 1;
	if (!(n->name = tp_strdup(name)))
		return -1;
	in->n++;
	return 0;
}

void cp_input_release(struct cp_input *in)
{
	for (size_t i = 0; i < in->n; i++)
		tp_free(in->nodes[i].name);
	tp_free(in->nodes);
	tp_free(in->colls);
	tp_free(in->win);
	memset(in, 0, sizeof(*in));
}

/* nodes by rank, start, longest first, then name (a stable order for equal events) */
static int cmp_node(const void *a, const void *b)
{
	const struct cp_node *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	if (x->end_ns != y->end_ns)
		return x->end_ns > y->end_ns ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_coll(const void *a, const void *b)
{
	const struct cp_coll *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* A node's thread (host) or stream (device), for the walk's lists of them. */
struct gkey {
	int rank, dev;
	int64_t a, b;
	size_t idx;
};

static int cmp_gkey(const void *x_, const void *y_)
{
	const struct gkey *x = x_, *y = y_;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->a != y->a)
		return x->a < y->a ? -1 : 1;
	if (x->b != y->b)
		return x->b < y->b ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* A launch: a runtime call's correlation id. */
struct ckey {
	int rank;
	int64_t corr;
	size_t idx;
};

static int cmp_ckey(const void *x_, const void *y_)
{
	const struct ckey *x = x_, *y = y_;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->corr != y->corr)
		return x->corr < y->corr ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

struct walk {
	const struct cp_input *in;
	size_t *rank_lo, *rank_hi;	/* by node: the node range of its rank */
	/* each thread's and stream's nodes in node order, one list after the other: by position,
	 * the node, its list's bounds and the latest end in its list up to it */
	size_t *gnode, *glo, *ghi, *gpos;	/* gpos: by node, its position */
	int64_t *gmax;
	size_t *thr, nthr;		/* the host threads' lists: their first positions, by rank */
	struct ckey *launch;		/* host nodes with a correlation id, by rank and id */
	size_t nlaunch;
	int64_t *last_launch;		/* by instance */
	int *last_rank;
	size_t ninst;
};

static int walk_index(struct walk *w)
{
	const struct cp_input *in = w->in;
	struct gkey *k = tp_malloc((in->n + 1) * sizeof(*k));
	size_t i, j;

	w->gnode = tp_malloc((in->n + 1) * sizeof(*w->gnode));
	w->glo = tp_malloc((in->n + 1) * sizeof(*w->glo));
	w->ghi = tp_malloc((in->n + 1) * sizeof(*w->ghi));
	w->gpos = tp_malloc((in->n + 1) * sizeof(*w->gpos));
	w->gmax = tp_malloc((in->n + 1) * sizeof(*w->gmax));
	w->launch = tp_malloc((in->n + 1) * sizeof(*w->launch));
	w->thr = tp_malloc((in->n + 1) * sizeof(*w->thr));
	if (!k || !w->thr || !w->gnode || !w->glo || !w->ghi || !w->gpos || !w->gmax || !w->launch) {
		tp_free(k);
		return -1;
	}
	for (i = 0; i < in->n; i++) {
		const struct cp_node *n = &in->nodes[i];
		int dev = n->dev;
		k[i] = (struct gkey){ n->rank, dev, dev ? n->device : n->pid, dev ? n->stream : n->tid, i };
		if (!dev && n->corr >= 0)
			w->launch[w->nlaunch++] = (struct ckey){ n->rank, n->corr, i };
	}
	if (in->n > 1)
		qsort(k, in->n, sizeof(*k), cmp_gkey);
	if (w->nlaunch > 1)
		qsort(w->launch, w->nlaunch, sizeof(*w->launch), cmp_ckey);
	for (i = 0; i < in->n; i = j) {
		for (j = i; j < in->n && k[j].rank == k[i].rank && k[j].dev == k[i].dev && k[j].a == k[i].a &&
			    k[j].b == k[i].b; j++)
			;
		if (!k[i].dev)
			w->thr[w->nthr++] = i;
		for (size_t q = i; q < j; q++) {
			int64_t e = in->nodes[k[q].idx].end_ns;
			w->gnode[q] = k[q].idx;
			w->gpos[k[q].idx] = q;
			w->glo[q] = i;
			w->ghi[q] = j;
			w->gmax[q] = q > i && w->gmax[q - 1] > e ? w->gmax[q - 1] : e;
		}
	}
	tp_free(k);
	return 0;
}

static void walk_free(struct walk *w)
{
	tp_free(w->rank_lo);
	tp_free(w->rank_hi);
	tp_free(w->gnode);
	tp_free(w->glo);
	tp_free(w->ghi);
	tp_free(w->gpos);
	tp_free(w->gmax);
	tp_free(w->launch);
	tp_free(w->thr);
	tp_free(w->last_launch);
	tp_free(w->last_rank);
}

/* The innermost host event of node i's thread around it (sorted longest first: the last
 * such before it); SIZE_MAX when none. */
static size_t encloser(const struct walk *w, size_t i)
{
	const struct cp_node *nodes = w->in->nodes, *c = &nodes[i];
	size_t g = w->gpos[i];

	if (c->dev)
		return SIZE_MAX;
	for (size_t q = g; q-- > w->glo[g];) {
		const struct cp_node *p = &nodes[w->gnode[q]];
		if (w->gmax[q] < c->end_ns)
			break;		/* nothing before ends late enough */
		if (p->start_ns <= c->start_ns && p->end_ns >= c->end_ns)
			return w->gnode[q];
	}
	return SIZE_MAX;
}

/*
 * A collective (its kernel, or its host span on a rank that was still in it, arrival before
 * until) waits for its last rank's arrival: that rank's host operator starting then, ready
 * then, when later than *r. 1 when it moved *r and *best there.
 */
static int cross_rank(const struct walk *w, const struct cp_node *c, int64_t until, int64_t *r, size_t *best)
{
	const struct cp_node *nodes = w->in->nodes;
	size_t a = 0, b = w->in->n, cand = SIZE_MAX;
	int rank;
	int64_t at;

	if (c->inst == SIZE_MAX || c->inst >= w->ninst || (rank = w->last_rank[c->inst]) == c->rank ||
	    (at = w->last_launch[c->inst]) <= *r || at >= until)
		return 0;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		const struct cp_node *p = &nodes[m];
		if (p->rank < rank || (p->rank == rank && p->start_ns < at))
			a = m + 1;
		else
			b = m;
	}
	for (; a < w->in->n && nodes[a].rank == rank && nodes[a].start_ns == at; a++)
		if (!nodes[a].dev)
			cand = a;	/* the innermost: the last of those starting then */
	if (cand == SIZE_MAX)
		return 0;
	*r = at;
	*best = cand;
	return 1;
}

/*
 * A host event at the top of its thread, the thread idle before it (its own predecessor, *best,
 * ready at *r, earlier than its start): what another thread of its rank did then. The innermost
 * event running on another thread at its start (not a collective nor a synchronization: they
 * wait) handed it the work (ready at its start: *encl set, the walk goes on inside that one); else
 * the event of another thread that ended last before it woke it (a collective's return, a
 * backward pass's end), when later than *r.
 */
static void other_threads(const struct walk *w, size_t i, int64_t *r, size_t *best, int *encl)
{
	const struct cp_node *nodes = w->in->nodes, *c = &nodes[i];
	size_t own = w->glo[w->gpos[i]];

	for (size_t t = 0; t < w->nthr; t++) {
		size_t lo = w->thr[t], hi = w->ghi[lo], a = lo, b = hi, q;
		if (lo == own || nodes[w->gnode[lo]].rank != c->rank)
			continue;
		while (a < b) {	/* the first of the thread's events starting at c's start or later */
			size_t m = a + (b - a) / 2;
			if (nodes[w->gnode[m]].start_ns < c->start_ns)
				a = m + 1;
			else
				b = m;
		}
		for (q = a; q-- > lo;) {
			const struct cp_node *p = &nodes[w->gnode[q]];
			if (w->gmax[q] <= *r)
				break;	/* nothing before ends later than what is found */
			if (p->end_ns > c->start_ns) {
				if (p->kind == CP_COLLECTIVE || p->kind == CP_SYNC || *encl)
					continue;	/* waiting, it hands out no work */
				*r = c->start_ns;
				*best = w->gnode[q];
				*encl = 1;
				break;	/* the innermost: the latest to start */
			} else if (p->end_ns > *r) {
				*r = p->end_ns;
				*best = w->gnode[q];
				*encl = 0;
			}
		}
	}
}

/*
 * The predecessor of node i, reached at cursor, that was ready last (its index, *ready),
 * SIZE_MAX when none: for a host event, the last to end of its thread's events inside it or
 * before it, or, when its thread was last busy in the event around it, that one (ready at i's
 * start: *encl set).
 */
static size_t pred_of(const struct walk *w, size_t i, int64_t cursor, int64_t *ready, int *encl)
{
	const struct cp_node *nodes = w->in->nodes, *c = &nodes[i];
	size_t best = SIZE_MAX, lo = w->rank_lo[i], hi = w->rank_hi[i], g = w->gpos[i], q;
	int64_t r = INT64_MIN;

	*encl = 0;
	if (!c->dev) {
		size_t e = encloser(w, i);
		/* before it on the thread: the latest end, the inner (later) one at a tie */
		for (q = g; q-- > w->glo[g];) {
			const struct cp_node *p = &nodes[w->gnode[q]];
			if (best != SIZE_MAX && w->gmax[q] <= r)
				break;
			if (p->end_ns <= c->start_ns && p->end_ns > r) {
				r = p->end_ns;
				best = w->gnode[q];
			}
		}
		/* inside it: the event of its thread ending last before the cursor (the inner one at a tie) */
		for (q = g + 1; q < w->ghi[g]; q++) {
			const struct cp_node *p = &nodes[w->gnode[q]];
			if (p->start_ns > cursor)
				break;
			if (p->end_ns > c->end_ns || p->end_ns > cursor)
				continue;
			if (p->end_ns > r || (p->end_ns == r && w->gnode[q] > best)) {
				r = p->end_ns;
				best = w->gnode[q];
			}
		}
		if (c->kind == CP_SYNC)
			for (size_t j = lo; j < hi; j++) {
				const struct cp_node *p = &nodes[j];
				if (p->dev && p->end_ns <= c->end_ns && p->end_ns <= cursor && p->end_ns > r &&
				    p->end_ns > c->start_ns) {
					r = p->end_ns;
					best = j;
				}
			}
		if (e != SIZE_MAX && nodes[e].start_ns >= r && (best == SIZE_MAX || r <= c->start_ns)) {
			*encl = 1;
			r = c->start_ns;
			best = e;
		}
		/* a host collective waits in its span for the last rank's arrival, also between
		 * the events inside it (gloo's copies to and from the device around the wait) */
		if ((c->kind == CP_COLLECTIVE && cross_rank(w, c, c->end_ns, &r, &best)) ||
		    (e != SIZE_MAX && nodes[e].kind == CP_COLLECTIVE && cross_rank(w, &nodes[e], c->start_ns, &r, &best)))
			*encl = 0;
		else if (e == SIZE_MAX && (best == SIZE_MAX || r < c->start_ns))
			other_threads(w, i, &r, &best, encl);
		*ready = r;
		return best;
	}
	/* the previous one on its stream: ready at its end (at i's start when later), the earlier at a tie */
	for (q = g; q-- > w->glo[g];) {
		const struct cp_node *p = &nodes[w->gnode[q]];
		int64_t t = p->end_ns < c->start_ns ? p->end_ns : c->start_ns;
		if (best != SIZE_MAX && w->gmax[q] < r)
			break;
		if (t >= r) {
			r = t;
			best = w->gnode[q];
		}
	}
	/* its launch: the runtime call of the same correlation id */
	if (c->corr >= 0) {
		struct ckey key = { c->rank, c->corr, 0 };
		size_t a = 0, b = w->nlaunch;
		while (a < b) {
			size_t m = a + (b - a) / 2;
			if (cmp_ckey(&w->launch[m], &key) < 0)
				a = m + 1;
			else
				b = m;
		}
		for (; a < w->nlaunch && w->launch[a].rank == c->rank && w->launch[a].corr == c->corr; a++) {
			const struct cp_node *p = &nodes[w->launch[a].idx];
			int64_t t = p->end_ns < c->start_ns ? p->end_ns : c->start_ns;
			if ((p->kind == CP_RUNTIME || p->kind == CP_SYNC) &&
			    (t > r || (t == r && w->launch[a].idx < best))) {
				r = t;
				best = w->launch[a].idx;
			}
		}
	}
	/* a collective's kernel waits for its last rank's arrival */
	cross_rank(w, c, INT64_MAX, &r, &best);
	*ready = r;
	return best;
}

struct seg {
	int rank, kind;
	const char *name;
	int64_t start_ns, dur_ns;
};

struct cat {
	int rank, kind;
	const char *name;
	int64_t ns;
};

static int cmp_cat_key(const void *a, const void *b)
{
	const struct cat *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_cat_ns(const void *a, const void *b)
{
	const struct cat *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	return cmp_cat_key(a, b);
}

static json_t *pct(int64_t part, int64_t whole)
{
	return whole > 0 ? json_real(round((double)part * 1000.0 / (double)whole) / 10.0) : json_real(0.0);
}

/* at most this many categories are listed (all are counted in by_kind) */
#define CP_CATEGORIES_MAX 50

static json_t *answer(const struct cp_input *in, int64_t step, struct seg *seg, size_t nseg)
{
	int64_t start = nseg ? seg[0].start_ns : 0, end = nseg ? seg[nseg - 1].start_ns + seg[nseg - 1].dur_ns : 0;
	int64_t total = end - start, by_kind[CP_NKINDS] = { 0 };
	struct cat *cats = tp_malloc((nseg + 1) * sizeof(*cats));
	json_t *segs = json_array(), *kinds = json_array(), *list = json_array(), *ranks = json_array(), *out = NULL;
	size_t ncat = 0, i;

	if (!cats || !segs || !kinds || !list || !ranks)
		goto done;
	for (i = 0; i < in->nwin; i++)
		if (json_array_append_new(ranks, json_pack("{s:i, s:I, s:I}", "rank", in->win[i].rank, "start_ns",
							    (json_int_t)in->win[i].start_ns, "end_ns",
							    (json_int_t)in->win[i].end_ns)))
			goto done;
	for (i = 0; i < nseg; i++) {
		if (json_array_append_new(segs, json_pack("{s:i, s:s, s:s, s:I, s:I}", "rank", seg[i].rank, "kind",
							   cp_kind_name(seg[i].kind), "name", seg[i].name, "start_ns",
							   (json_int_t)seg[i].start_ns, "dur_ns",
							   (json_int_t)seg[i].dur_ns)))
			goto done;
		by_kind[seg[i].kind] += seg[i].dur_ns;
		cats[i] = (struct cat){ seg[i].rank, seg[i].kind, seg[i].name, seg[i].dur_ns };
	}
	if (nseg > 1)
		qsort(cats, nseg, sizeof(*cats), cmp_cat_key);
	for (i = 0; i < nseg; i++)
		if (ncat && !cmp_cat_key(&cats[ncat - 1], &cats[i]))
			cats[ncat - 1].ns += cats[i].ns;
		else
			cats[ncat++] = cats[i];
	if (ncat > 1)
		qsort(cats, ncat, sizeof(*cats), cmp_cat_ns);
	for (i = 0; i < ncat && i < CP_CATEGORIES_MAX; i++)
		if (json_array_append_new(list, json_pack("{s:i, s:s, s:s, s:I, s:o}", "rank", cats[i].rank, "kind",
							   cp_kind_name(cats[i].kind), "name", cats[i].name, "ns",
							   (json_int_t)cats[i].ns, "pct", pct(cats[i].ns, total))))
			goto done;
	for (i = 0; i < CP_NKINDS; i++)
		if (by_kind[i] && json_array_append_new(kinds, json_pack("{s:s, s:I, s:o}", "kind", cp_kind_name((int)i),
									"ns", (json_int_t)by_kind[i], "pct",
									pct(by_kind[i], total))))
			goto done;
	out = json_pack("{s:I, s:o, s:I, s:I, s:I, s:o, s:o, s:o}", "step", (json_int_t)step, "ranks", ranks,
			"start_ns", (json_int_t)start, "end_ns", (json_int_t)end, "dur_ns", (json_int_t)total,
			"segments", segs, "by_kind", kinds, "by_category", list);
	segs = kinds = list = ranks = NULL;
done:
	json_decref(segs);
	json_decref(kinds);
	json_decref(list);
	json_decref(ranks);
	tp_free(cats);
	return out;
}

static int push_seg(struct seg **seg, size_t *n, size_t *cap, int rank, int kind, const char *name, int64_t s,
		    int64_t e)
{
	if (e <= s)
		return 0;
	if (tp_grow((void **)seg, cap, *n + 1, sizeof(**seg)))
		return -1;
	(*seg)[(*n)++] = (struct seg){ rank, kind, name, s, e - s };
	return 0;
}

/* before a host event with none around it, its thread ran nothing: the rank's host gap; before
 * a device event, the device waited: idle */
static int gap_kind(const struct cp_node *n)
{
	return n->dev ? CP_IDLE : CP_HOST_GAP;
}

/* the collectives by rank and arrival */
static int cmp_coll_launch(const void *a, const void *b)
{
	const struct cp_coll *x = a, *y = b;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->launch_ns < y->launch_ns ? -1 : x->launch_ns > y->launch_ns;
}

json_t *critpath_run(struct cp_input *in, int64_t step)
{
	struct walk w = { .in = in };
	struct seg *seg = NULL;
	size_t nseg = 0, scap = 0, cur = SIZE_MAX, i, j, e, guard;
	int64_t c = INT64_MIN;
	json_t *out = NULL;
	int oom = 0;

	if (in->n > 1)
		qsort(in->nodes, in->n, sizeof(*in->nodes), cmp_node);
	if (in->ncolls > 1)
		qsort(in->colls, in->ncolls, sizeof(*in->colls), cmp_coll);
	w.rank_lo = tp_malloc((in->n + 1) * sizeof(*w.rank_lo));
	w.rank_hi = tp_malloc((in->n + 1) * sizeof(*w.rank_hi));
	for (i = 0; i < in->ncolls; i++)
		if (in->colls[i].inst != SIZE_MAX && in->colls[i].inst + 1 > w.ninst)
			w.ninst = in->colls[i].inst + 1;
	w.last_launch = tp_malloc((w.ninst + 1) * sizeof(*w.last_launch));
	w.last_rank = tp_malloc((w.ninst + 1) * sizeof(*w.last_rank));
	if (!w.rank_lo || !w.rank_hi || !w.last_launch || !w.last_rank)
		goto done;
	if (walk_index(&w))
		goto done;
	for (i = 0; i < w.ninst; i++) {
		w.last_launch[i] = INT64_MIN;
		w.last_rank[i] = -1;
	}
	for (i = 0; i < in->ncolls; i++) {
		const struct cp_coll *k = &in->colls[i];
		if (k->inst != SIZE_MAX && k->launch_ns > w.last_launch[k->inst]) {
			w.last_launch[k->inst] = k->launch_ns;
			w.last_rank[k->inst] = k->rank;
		}
	}
	for (i = 0; i < in->n; i = j) {
		for (j = i; j < in->n && in->nodes[j].rank == in->nodes[i].rank; j++)
			;
		for (size_t k = i; k < j; k++) {
			w.rank_lo[k] = i;
			w.rank_hi[k] = j;
		}
	}
	/* a kernel starting where a matched collective's first kernel starts is that collective */
	for (i = 0; i < in->n; i++) {
		struct cp_node *n = &in->nodes[i];
		struct cp_coll key = { .rank = n->rank, .start_ns = n->start_ns }, *k;
		if (n->kind != CP_KERNEL || !in->ncolls ||
		    !(k = bsearch(&key, in->colls, in->ncolls, sizeof(*in->colls), cmp_coll)))
			continue;
		n->kind = CP_COLLECTIVE;
		n->inst = k->inst;
	}
	/* a host collective's operator starting at its arrival is that collective */
	if (in->ncolls > 1)
		qsort(in->colls, in->ncolls, sizeof(*in->colls), cmp_coll_launch);
	for (i = 0; i < in->n; i++) {
		struct cp_node *n = &in->nodes[i];
		struct cp_coll key = { .rank = n->rank, .launch_ns = n->start_ns }, *k;
		if (n->kind == CP_COLLECTIVE && !n->dev && in->ncolls &&
		    (k = bsearch(&key, in->colls, in->ncolls, sizeof(*in->colls), cmp_coll_launch)))
			n->inst = k->inst;
		else if (n->kind == CP_COLLECTIVE && !n->dev && (e = encloser(&w, i)) != SIZE_MAX &&
			 in->nodes[e].kind == CP_COLLECTIVE)
			n->inst = in->nodes[e].inst;	/* inside the collective's operator: the same one */
	}
	/* the end: the event ending last, on the lowest rank at a tie */
	for (i = 0; i < in->n; i++)
		if (in->nodes[i].end_ns > c) {
			c = in->nodes[i].end_ns;
			cur = i;
		}
	for (guard = 0; cur != SIZE_MAX && guard < 8 * in->n + 16; guard++) {
		const struct cp_node *n = &in->nodes[cur];
		const struct cp_window *win = window_of(in, n->rank);
		int64_t lower = win ? win->start_ns : n->start_ns, ready, s;
		int encl;
		size_t p = pred_of(&w, cur, c, &ready, &encl);

		if (p == SIZE_MAX || ready <= lower || n->start_ns <= lower) {
			s = n->start_ns > lower ? n->start_ns : lower;
			oom |= push_seg(&seg, &nseg, &scap, n->rank, n->kind, n->name, s < c ? s : c, c);
			if (p == SIZE_MAX || !encl || n->start_ns <= lower) {
				/* from the rank's step start: nothing on the path */
				oom |= push_seg(&seg, &nseg, &scap, n->rank, gap_kind(n), "", lower, s < c ? s : c);
				break;
			}
			/* the event around it goes on before it */
			c = s < c ? s : c;
			cur = p;
			continue;
		}
		if (ready > c)
			ready = c;
		s = n->start_ns > ready ? n->start_ns : ready;
		if (s > c)
			s = c;
		oom |= push_seg(&seg, &nseg, &scap, n->rank, n->kind, n->name, s, c);
		/* between the predecessor's readiness and its start: the host event around it, else idle */
		if ((e = encloser(&w, cur)) != SIZE_MAX && in->nodes[e].start_ns <= ready)
			oom |= push_seg(&seg, &nseg, &scap, n->rank, in->nodes[e].kind, in->nodes[e].name, ready, s);
		else
			oom |= push_seg(&seg, &nseg, &scap, n->rank, gap_kind(n), "", ready, s);
		c = ready;
		cur = p;
	}
	if (oom)
		goto done;
	for (i = 0; i < nseg / 2; i++) {
		struct seg t = seg[i];
		seg[i] = seg[nseg - 1 - i];
		seg[nseg - 1 - i] = t;
	}
	out = answer(in, step, seg, nseg);
done:
	tp_free(seg);
	walk_free(&w);
	return out;
}
