/*
 * h_compare.c: GET /api/v1/compare?base=RUN&target=RUN[&rank=R][&threshold_pct=P][&alpha=A][&limit=N]:
 * two runs side by side (server/analysis/compare.c computes; this reads the
 * arguments and gathers both runs' figures). Without base, the target's
 * project baseline (PATCH /api/v1/runs/{run} {"baseline": true}). Without
 * rank, each run's lowest rank with data. base == target is allowed (every
 * delta 0, p = 1). When either run has several ranks, "distributed": both runs'
 * figures over all their ranks (analysis/distributed.h: distributed_compare).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/distributed.h"
#include "handlers.h"
#include "hmap.h"
#include "http.h"

#define LIMIT_DEFAULT 100
#define LIMIT_MAX 100000

/* ?name= a finite number in [lo, hi] (lo excluded when open_lo), def when absent; -1 when answered. */
static int arg_double(struct request *req, const char *name, double lo, int open_lo, double hi, double def,
		      double *out)
{
	const char *s = http_arg(req, name);
	char *end;
	double v;

	if (!s) {
		*out = def;
		return 0;
	}
	v = strtod(s, &end);
	if (!*s || *end || !isfinite(v) || v < lo || (open_lo && v == lo) || v > hi) {
		http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' must be a number from %g%s to %g",
				 name, lo, open_lo ? " (excluded)" : "", hi);
		return -1;
	}
	*out = v;
	return 0;
}

/* ?name= a run name; NULL when absent, "" when invalid (answered) */
static const char *arg_run(struct request *req, const char *name)
{
	const char *s = http_arg(req, name);

	if (!s || route_valid_run_name(s))
		return s;
	http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' must be a run name ([A-Za-z0-9._-], 1 to 128)",
			 name);
	return "";
}

/* The distributed figures of every step of run (distributed.h); NULL with err set. */
static json_t *distributed_all(struct store_reader *r, const char *run, size_t *nranks, struct tp_errbuf *err)
{
	struct dist_input in;
	json_t *d = NULL;

	if (store_dist_input(r, run, &in, err))
		return NULL;
	*nranks = in.nranks;
	if (!(d = distributed_run(&in, 0, 0)))
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	dist_input_release(&in);
	return d;
}

/* body's "distributed" (distributed_compare) when either run has more than one rank; -1 with err set */
static int distributed_of(struct store_reader *r, const char *base, const char *target, json_t *body,
			  struct tp_errbuf *err)
{
	size_t nb = 0, nt = 0;
	json_t *db = distributed_all(r, base, &nb, err), *dt = db ? distributed_all(r, target, &nt, err) : NULL, *c;
	int rc = 0;

	if (!db || !dt)
		rc = -1;
	else if ((nb > 1 || nt > 1) &&
		 (!(c = distributed_compare(db, dt)) || json_object_set_new(body, "distributed", c))) {
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		rc = -1;
	}
	json_decref(db);
	json_decref(dt);
	return rc;
}

/* ---- operators and kernels within the steps ---- */

/*
 * A run's operators and kernels per step count only the work inside its
 * complete steps, the steps the step breakdown sums (store_diag_input:
 * incomplete=0, not a whole trace), read from the rank's events at request
 * time, as the critical path reads its step's: the operator and kernel
 * tables are whole-trace totals, which hold the GPU work queued before a
 * profiling window's first step and what runs between and after steps (on
 * the H200 run healthy: 161.9 ms of kernels in the trace, 115.7 ms inside
 * its 5 steps). A GPU span counts the part of it inside a step's span
 * ([start_ns, start_ns + dur_ns), the breakdown's clip, so that the
 * kernels' times add up to its kernel time where they do not overlap), and
 * a call when it starts inside one. A host span (operator, annotation,
 * runtime call; not ProfilerStep#N) counts, with its self time, when it
 * starts inside its step's ProfilerStep#N span on the host: a window's
 * first step starts only when the GPU work queued before it ends, after
 * most of its host work. That span is the ProfilerStep#N of the step's
 * number and host duration that starts last at or before the step does
 * (the step's own span when the events hold none). Self time as
 * analysis.c's tables pass has it, nested per thread, a child clipped to its
 * parent, an operator whose only child (runtime calls aside) is an operator
 * of the same name one call with it. The rank's events are read from its
 * start to the last step's end: a step's host span may start long before its
 * span does.
 */
struct in_items {
	struct compare_item *v;
	size_t n, cap;
	struct hmap map;	/* name hash (mixed with kind) -> index in v */
};

struct hspan {
	int64_t s, e;
	uint64_t thread;
	uint32_t op;		/* index in ops */
	uint32_t ord;
	uint8_t runtime, ann;
};

struct win {
	int64_t s, e;
	int64_t step, cpu_dur;	/* (steps) its number and host duration, to find its host span */
};

struct in_steps {
	struct win *w, *cw;	/* the complete steps' spans, by start; their host spans (in_cpu_windows()) */
	size_t nw;
	struct win *ps;		/* the ProfilerStep#N spans read */
	size_t nps, pscap;
	struct hmap memo;	/* (category, name) string ids -> item << 3 | class (in_event()) */
	struct in_items ops, kernels;
	struct hspan *h;
	size_t nh, hcap;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ULL;
	return h;
}

/* The index of (kind, name) in it, added with no calls when missing; UINT32_MAX: out of memory. */
static uint32_t item_of(struct in_items *it, int kind, const char *name)
{
	uint64_t key = hmap_mix(str_hash(name) ^ (uint64_t)kind);

	for (;;) {
		uint32_t *v = hmap_put(&it->map, key, (uint32_t)it->n);
		if (!v)
			return UINT32_MAX;
		if (*v != it->n) {
			if (it->v[*v].kind == kind && !strcmp(it->v[*v].name, name))
				return *v;
			key = hmap_mix(key + 1);	/* another name with this hash: the next key */
			continue;
		}
		if (tp_grow((void **)&it->v, &it->cap, it->n + 1, sizeof(*it->v)))
			return UINT32_MAX;
		if (!(it->v[it->n].name = tp_strdup(name)))
			return UINT32_MAX;
		it->v[it->n].kind = kind;
		it->v[it->n].calls = 0;
		it->v[it->n].ns = 0;
		return (uint32_t)it->n++;
	}
}

static void items_free(struct in_items *it)
{
	for (size_t i = 0; i < it->n; i++)
		tp_free(it->v[i].name);
	tp_free(it->v);
	hmap_free(&it->map);
	memset(it, 0, sizeof(*it));
}

/* Whether one of the n spans w (by start, not overlapping) holds t. */
static int window_at(const struct win *w, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {	/* the first starting after t */
		size_t mid = lo + (hi - lo) / 2;
		if (w[mid].s <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && t < w[lo - 1].e;
}

/* The time of [a, b) inside the steps' spans. */
static int64_t inside(const struct in_steps *s, int64_t a, int64_t b)
{
	size_t lo = 0, hi = s->nw;
	int64_t ns = 0;

	while (lo < hi) {	/* the first step that ends after a */
		size_t mid = lo + (hi - lo) / 2;
		if (s->w[mid].e <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < s->nw && s->w[lo].s < b; lo++) {
		int64_t x = a > s->w[lo].s ? a : s->w[lo].s;
		ns += (b < s->w[lo].e ? b : s->w[lo].e) - x;
	}
	return ns;
}

static uint64_t id_key(int64_t num, const char *str)
{
	return str ? hmap_mix(str_hash(str)) | 1ULL << 63 : (uint64_t)num;
}

static int cat_is(const char *cat, const char *const *names)
{
	for (; *names; names++)
		if (!strcmp(cat, *names))
			return 1;
	return 0;
}

/* What an event is by its category (and name, for ProfilerStep#N) */
enum { C_NONE, C_KERNEL, C_MEMCPY, C_MEMSET, C_OP, C_RUNTIME, C_ANN, C_STEP };

/* e's class, and its item in kernels or ops (*item); UINT32_MAX: out of memory */
static uint32_t classify(struct in_steps *s, const char *name, const char *cat, uint32_t *item)
{
	static const char *const kernel[] = { "kernel", "Kernel", NULL }, *const memcpy_[] = { "gpu_memcpy", "Memcpy", NULL },
		*const memset_[] = { "gpu_memset", "Memset", NULL }, *const op[] = { "cpu_op", "Operator", NULL },
		*const runtime[] = { "cuda_runtime", "cuda_driver", "Runtime", NULL };
	uint32_t c = C_NONE;

	*item = 0;
	if (!name || !cat)
		return C_NONE;
	if (cat_is(cat, kernel))
		c = C_KERNEL;
	else if (cat_is(cat, memcpy_))
		c = C_MEMCPY;
	else if (cat_is(cat, memset_))
		c = C_MEMSET;
	else if (!strcmp(cat, "user_annotation"))
		c = C_ANN;
	else if (cat_is(cat, op))
		c = C_OP;
	else if (cat_is(cat, runtime))
		c = C_RUNTIME;
	if (c >= C_OP && !strncmp(name, "ProfilerStep#", 13))
		return C_STEP;
	if (c != C_NONE)
		*item = c <= C_MEMSET ? item_of(&s->kernels, (int)c - C_KERNEL, name) : item_of(&s->ops, 0, name);
	return *item == UINT32_MAX ? UINT32_MAX : c;
}

/*
 * One event of a block: a GPU span into kernels, a host span into s->h; -1: out of memory. Its
 * class and item are found once a block for each (category, name) of string ids (s->memo).
 */
static int in_event(struct in_steps *s, const struct store_trace *t, const struct tp_event *e, int64_t base)
{
	uint64_t key = (uint64_t)e->cat << 32 | e->name;
	uint32_t i, c, v;
	int64_t a, b, dur;

	if (e->ph != 'X' || !(e->have & TH_TS))
		return 0;
	if ((v = hmap_get(&s->memo, key)) != UINT32_MAX) {
		c = v & 7;
		i = v >> 3;
	} else {
		const char *name = store_trace_string(t, e->name);
		if ((c = classify(s, name, store_trace_string(t, e->cat), &i)) == UINT32_MAX || i >= UINT32_MAX >> 3 ||
		    !hmap_put(&s->memo, key, i << 3 | c))
			return -1;
	}
	if (c == C_NONE)
		return 0;
	dur = (e->have & TH_DUR) && e->dur_ns > 0 ? e->dur_ns : 0;
	a = tp_sat_add(e->ts_ns, base);
	b = tp_sat_add(a, dur);
	if (c <= C_MEMSET) {
		int64_t ns = inside(s, a, b);
		int starts = window_at(s->w, s->nw, a);
		s->kernels.v[i].calls += starts;
		s->kernels.v[i].ns = tp_sat_add(s->kernels.v[i].ns, ns);
		return 0;
	}
	if (c == C_STEP) {
		const char *name = store_trace_string(t, e->name);
		char *end;
		long long n = strtoll(name + 13, &end, 10);
		if (*end || end == name + 13)
			return 0;
		if (tp_grow((void **)&s->ps, &s->pscap, s->nps + 1, sizeof(*s->ps)))
			return -1;
		s->ps[s->nps++] = (struct win){ .s = a, .e = b, .step = n, .cpu_dur = dur };
		return 0;
	}
	if (tp_grow((void **)&s->h, &s->hcap, s->nh + 1, sizeof(*s->h)))
		return -1;
	s->h[s->nh] = (struct hspan){ .s = a, .e = b, .op = i, .ord = (uint32_t)s->nh, .ann = c == C_ANN,
				      .runtime = c == C_RUNTIME,
				      .thread = hmap_mix(id_key(e->pid, e->pid_s)) ^ id_key(e->tid, e->tid_s) };
	s->nh++;
	return 0;
}

/* analysis.c's hrec_less: by thread, then start, the longer first, an operator before its runtime call */
static int cmp_hspan(const void *x, const void *y)
{
	const struct hspan *p = x, *q = y;

	if (p->thread != q->thread)
		return p->thread < q->thread ? -1 : 1;
	if (p->s != q->s)
		return p->s < q->s ? -1 : 1;
	if (p->e != q->e)
		return p->e > q->e ? -1 : 1;
	if (p->runtime != q->runtime)
		return p->runtime ? 1 : -1;
	return p->ord < q->ord ? -1 : p->ord > q->ord;
}

struct hrow {
	int64_t s, self;
	uint32_t op;
	uint8_t runtime, ann;
};

struct hframe {
	int64_t end;		/* clipped to the parent's */
	struct hrow me, pend;	/* pend: its first child other than runtime calls */
	uint32_t kids;
};

static void count_row(struct in_steps *s, const struct hrow *r)
{
	if (window_at(s->cw, s->nw, r->s)) {
		s->ops.v[r->op].calls++;
		s->ops.v[r->op].ns = tp_sat_add(s->ops.v[r->op].ns, r->self);
	}
}

/* analysis.c's ops_pop(): f's row, or its parent's first child's */
static void pop(struct in_steps *s, struct hframe *f, struct hframe *p)
{
	if (f->kids) {
		if (f->kids == 1 && !f->pend.runtime && !f->pend.ann && !f->me.runtime && !f->me.ann &&
		    f->pend.op == f->me.op)
			f->me.self += f->pend.self;
		else
			count_row(s, &f->pend);
	}
	if (p && !f->me.runtime && ++p->kids == 1) {
		p->pend = f->me;
		return;
	}
	count_row(s, &f->me);
}

/* The host spans' self times, thread by thread; -1: out of memory. */
static int in_ops(struct in_steps *s)
{
	struct hframe *st = NULL;
	size_t depth = 0, cap = 0, i;

	if (s->nh > 1)		/* s->h is NULL when there is none */
		qsort(s->h, s->nh, sizeof(*s->h), cmp_hspan);
	for (i = 0; i <= s->nh; i++) {
		const struct hspan *h = i < s->nh ? &s->h[i] : NULL;
		int other = h && depth && s->h[i - 1].thread != h->thread;
		while (depth && (!h || other || h->s >= st[depth - 1].end)) {
			pop(s, &st[depth - 1], depth > 1 ? &st[depth - 2] : NULL);
			depth--;
		}
		if (!h)
			break;
		if (tp_grow((void **)&st, &cap, depth + 1, sizeof(*st))) {
			tp_free(st);
			return -1;
		}
		struct hframe *f = &st[depth], *p = depth ? f - 1 : NULL;
		f->end = p && h->e > p->end ? p->end : h->e;
		f->me = (struct hrow){ .s = h->s, .self = f->end - h->s, .op = h->op, .runtime = h->runtime, .ann = h->ann };
		f->kids = 0;
		if (p)
			p->me.self -= f->end - h->s;
		depth++;
	}
	tp_free(st);
	return 0;
}

static int cmp_win(const void *x, const void *y)
{
	const struct win *p = x, *q = y;

	return p->s != q->s ? (p->s < q->s ? -1 : 1) : (p->e > q->e) - (p->e < q->e);
}

/* Each step's host span (see the top) into s->cw, by start; -1: out of memory. */
static int in_cpu_windows(struct in_steps *s)
{
	if (!(s->cw = tp_malloc((s->nw + 1) * sizeof(*s->cw))))
		return -1;
	for (size_t i = 0; i < s->nw; i++) {
		const struct win *best = NULL;
		for (size_t k = 0; k < s->nps; k++)
			if (s->ps[k].step == s->w[i].step && s->ps[k].cpu_dur == s->w[i].cpu_dur && s->ps[k].s <= s->w[i].s &&
			    (!best || s->ps[k].s > best->s))
				best = &s->ps[k];
		s->cw[i] = best ? *best : s->w[i];
	}
	if (s->nw > 1)
		qsort(s->cw, s->nw, sizeof(*s->cw), cmp_win);
	return 0;
}

/* items (every one with calls or time) into a compare list, replacing *v; -1: out of memory. */
static int take_items(struct in_items *it, struct compare_item **v, size_t *n)
{
	struct compare_item *out = tp_calloc(it->n + 1, sizeof(*out));
	size_t i, k = 0;

	if (!out)
		return -1;
	for (i = 0; i < it->n; i++) {
		if (!it->v[i].calls && !it->v[i].ns)
			continue;
		out[k] = it->v[i];
		it->v[i].name = NULL;
		k++;
	}
	for (i = 0; i < *n; i++)
		tp_free((*v)[i].name);
	tp_free(*v);
	*v = out;
	*n = k;
	return 0;
}

/*
 * c's operators and kernels (read whole-trace by store_compare_input) as
 * the work inside its complete steps (see above); unchanged when it has no
 * step. c->in_steps says which.
 */
static int read_in_steps(struct store_reader *r, struct compare_run *c, struct tp_errbuf *err)
{
	struct in_steps s = { 0 };
	struct store_step *v = NULL;	/* the rank's steps */
	struct store_trace *t = NULL;
	const struct tp_event *ev;
	size_t n = 0, i, k = 0;
	int64_t base;
	int rc, got;

	if (!c->nsteps || (c->ops_source && strcmp(c->ops_source, "trace")))
		return TP_OK;
	if ((rc = store_steps(r, c->run, c->rank, &got, &v, &n, err)))
		return rc;
	if (!(s.w = tp_malloc((n + 1) * sizeof(*s.w)))) {
		tp_free(v);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	for (i = 0; i < n; i++)
		if (!v[i].incomplete && !v[i].whole_trace)
			s.w[k++] = (struct win){ .s = v[i].start_ns, .e = tp_sat_add(v[i].start_ns, v[i].dur_ns),
						 .step = v[i].step, .cpu_dur = v[i].cpu_dur_ns };
	tp_free(v);
	s.nw = k;
	if (k != c->nsteps) {	/* the steps changed between the reads (an upload): per trace, as the tables */
		tp_free(s.w);
		return TP_OK;
	}
	rc = store_trace_open(r, c->run, c->rank, INT64_MIN, s.w[k - 1].e, &t, &got, err);
	while (!rc && (rc = store_trace_next(t, &ev, &n, &base, err)) == 1) {
		rc = 0;
		hmap_free(&s.memo);	/* the string ids are the block's */
		for (i = 0; i < n && !rc; i++)
			if (in_event(&s, t, &ev[i], base))
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	if (t)
		store_trace_close(t);
	if (!rc && (in_cpu_windows(&s) || in_ops(&s) || take_items(&s.ops, &c->ops, &c->nops) ||
		    take_items(&s.kernels, &c->kernels, &c->nkernels)))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (!rc)
		c->in_steps = 1;
	items_free(&s.ops);
	items_free(&s.kernels);
	hmap_free(&s.memo);
	tp_free(s.h);
	tp_free(s.w);
	tp_free(s.cw);
	tp_free(s.ps);
	return rc;
}

int h_compare(struct request *req)
{
	struct compare_opts o = { 0 };
	struct compare_run a = { 0 }, b = { 0 };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	char baseline[129];
	const char *base, *target;
	long long rank, limit;
	json_t *body = NULL;

	if ((target = arg_run(req, "target")) && !*target)
		return 0;
	if (!target)
		return http_reply_error(req, 400, "missing_parameter", NULL,
					"query parameter 'target' is required (base defaults to the target's project baseline)");
	if (((base = arg_run(req, "base")) && !*base) || h_arg_int(req, "rank", 0, 65535, -1, &rank) ||
	    h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    arg_double(req, "threshold_pct", 0, 0, 1e6, COMPARE_THRESHOLD_PCT, &o.threshold_pct) ||
	    arg_double(req, "alpha", 0, 1, 1, COMPARE_ALPHA, &o.alpha) || h_reader_open(req, &r))
		return 0;
	o.limit = (long)limit;
	if (!base) {
		if (store_baseline_of(r, target, baseline, &err))
			return h_answer(req, NULL, r, &err, NULL, 0);
		base = baseline;
		o.from_baseline = 1;
	}
	if (!store_compare_input(r, base, (int)rank, &a, &err) && !store_compare_input(r, target, (int)rank, &b, &err) &&
	    !read_in_steps(r, &a, &err) && !read_in_steps(r, &b, &err) && !(body = compare_runs(&a, &b, &o)))
		tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	compare_run_release(&a);
	compare_run_release(&b);
	if (body && distributed_of(r, base, target, body, &err)) {
		json_decref(body);
		body = NULL;
	}
	return h_answer(req, body, r, &err, NULL, 0);
}
