/*
 * analysis_int.h: what the files of one trace's analysis share: the
 * records, the analysis itself, the passes' state, and the functions one
 * file calls in another. Included only by server/analysis/'s analysis.c,
 * classify.c, walk.c, join.c, gpujoin.c, tables.c, steps.c,
 * collectives.c and parts.c (analysis.h is the interface).
 */
#ifndef ANALYSIS_INT_H
#define ANALYSIS_INT_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc.h"
#include "analysis/analysis.h"
#include "analysis/memory.h"
#include "analysis/runs.h"
#include "analysis/sort.h"
#include "hmap.h"

/* ---- growable arrays ---- */

/* ---- classification of interned strings ---- */

enum {
	/* as a category */
	C_OTHER = 1, C_OP, C_ANN, C_RUNTIME, C_KERNEL, C_MEMCPY, C_MEMSET, C_GPU_ANN,
	C_MASK = 0x0f,
	/* as a name */
	N_STEP = 0x10, N_DATALOADER = 0x20, N_OPT_STEP = 0x40, N_ZERO_GRAD = 0x80, N_BACKWARD = 0x100,
	N_ACCUM_GRAD = 0x200, N_COPY = 0x400, N_COMM = 0x800, N_LAUNCH = 0x1000, N_COMM_OP = 0x2000,
	N_SYNC = 0x4000, N_COMM_SPAN = 0x8000,
};

enum hkind { H_OP, H_DATALOADER, H_RUNTIME };

/*
 * A host span. A 1 GB trace holds 2.5 M of them: they are kept in sorted
 * runs (runs.h), not in memory, and what the passes compute of
 * each lives on the nesting stack (struct frame) while the span is open.
 */
struct hrec {
	int64_t s, e;
	int64_t id;		/* runtime: correlation; op: External id; -1 when absent */
	uint32_t thread, name;
	uint32_t ord;		/* arrival order: the last tie-break of the sort */
	uint8_t kind;		/* enum hkind */
	uint8_t ann;		/* a user annotation */
	uint8_t launch;		/* a runtime call that launches kernels */
};

/*
 * Host spans in sorted runs (runs.h): sorted and written to a temporary file
 * a run at a time as the trace streams in, read back merged by the passes of
 * analysis_finish(). The [memory] events go the same way, a run's worth of
 * bytes at a time.
 */
#define AN_RUN_RECORDS (1u << 17)	/* spans in a sorted run: 5 MiB */
#define NO_HOST (UINT32_MAX - 1)	/* in the ext map: an id no host span has (yet) */


struct link {			/* a host span a GPU span's External id names (link_ext()) */
	int64_t s;		/* its start */
	uint32_t thread;
	uint32_t chain;		/* what is above it (an->chains), for communication kernels; UINT32_MAX: none */
};

struct grec {			/* a GPU span: runs by correlation id, joined with the runtime calls' (struct gjoin) */
	int64_t s, e, corr, ext;	/* -1 when absent */
	uint32_t name;
	uint32_t ord;		/* arrival: the sort's last tie-break */
	uint8_t kind;		/* enum an_gpu_kind */
	uint8_t comm;		/* a communication kernel */
};

struct lrec {			/* a runtime call with a correlation id, as the first pass met it: runs by id, place */
	int64_t corr;
	int64_t s;		/* its start */
	uint32_t pos;		/* its place in sorted order */
	int32_t op;		/* the operator above it (not a runtime call), by its place; -1: none */
	uint8_t launch;
};

struct brec {			/* a GPU span in the step that launched it: runs by step, for an_breakdown() */
	int64_t s, e;
	int32_t step;
	uint8_t cat;		/* AN_KERNEL..AN_COMM */
};

struct srec {			/* a step span */
	int64_t step, s, e;
};

/*
 * A communication operator or kernel, with what it says of its collective:
 * runs of the operators by (thread, start), to meet their host spans in the
 * passes (struct cgroup), and of the kernels by correlation id, to meet the
 * calls that launched them (collectives()).
 */
struct crec {
	int64_t s, e, corr, ext;	/* corr, ext: kernels only; -1 when absent */
	int64_t in, out, gsize, seq;	/* -1 when absent */
	uint32_t thread, name, coll, pg, dtype;	/* coll, pg, dtype: 0 when absent */
	uint32_t ord;		/* arrival among the crecs of both kinds */
};

struct cwhat {			/* what a communication operator says of its collective */
	int64_t seq, bytes, gsize;	/* -1, -1, -1 when absent */
	uint32_t coll, pg;	/* 0 when absent */
	uint8_t says;		/* it has a collective's name or sizes: a source for the kernels below */
};

struct ival {
	int64_t s, e;
};

struct ivals {
	struct ival *v;
	size_t n, cap;
};

struct chain {			/* what a collective takes from the spans above its launch (add_chain()) */
	int64_t top_s;		/* the outermost communication operator's start */
	int32_t top;		/* it (sorted place); -1: none */
	int32_t name_kind;	/* the nearest nccl:* / gloo:* range's kind; -1: none */
	struct cwhat src;	/* the nearest operator above that says what the collective is (src.says) */
};

struct ccall {			/* a runtime call whose id names a communication kernel: runs by id, place */
	int64_t corr, s;
	uint32_t pos, thread;
	struct chain ch;
};

struct analysis {
	an_string_fn str;
	void *payload;
	uint16_t *cls;		/* per string id, 0: not classified yet */
	size_t ncls;
	struct hmap threads;	/* (pid, tid) -> thread number */
	struct runs h;		/* the host spans */
	struct runs m;		/* the [memory] events by thread and time (struct mem_event) */
	struct runs d;		/* and with their context by device and time (struct mem_rec) */
	size_t nh;		/* host spans */
	struct runs gr;		/* the GPU spans (struct grec) */
	size_t ng;
	int64_t gmin, gmax;	/* their bounds */
	uint64_t *ccset;	/* the communication kernels' correlation ids, a filter (an_cc_build()) */
	size_t ccwords;		/* its 64-bit words, a power of two */
	size_t nccorr;		/* communication kernels with a correlation id */
	struct runs lr;		/* the runtime calls with ids (struct lrec, link_host()) */
	struct runs cc;		/* the calls whose ids name communication kernels (struct ccall, link_host()) */
	struct runs bs;		/* the GPU spans by the step that launched them (struct brec) */
	int64_t *gend;		/* per step: the latest end of its GPU spans */
	int64_t *gfirst;	/* and the first start of those a call in it launched (INT64_MAX: none) */
	struct runs ub;		/* the ends of the GPU spans no call in a step launched (int64_t: queued()) */
	int64_t glast;		/* the latest launch instant */
	int owned;		/* bs and gp are made (an_gpu_owners()) */
	int whole;		/* the trace is one step (an_steps_prepare()) */
	struct runs gp;		/* and the GPU time each operator launched itself (struct gpair) */
	struct srec *cpu_steps;
	size_t ncs, cscap;
	struct hmap kmap;	/* name * 4 + kind -> kernels[] */
	struct runs hcr;	/* communication operators (struct crec) */
	struct runs kcr;	/* and kernels */
	size_t ncr;
	size_t nmev;		/* [memory] events (in m) */
	/* the passes' (analysis_finish()) */
	struct hmap ext;	/* External ids of GPU spans no runtime call links -> links[] (an_link_gpu()) */
	struct hmap cext;	/* communication kernels' External ids: their links get a chain */
	struct link *links;
	int32_t *linkop;	/* the operator each of links[] is (its place) */
	size_t nlinks, linkcap;
	struct chain *chains;	/* the External ids' links' */
	size_t nchains, chaincap;
	struct hcand *hcand;	/* gloo:* operators that may be collectives of their own (host_collective()) */
	size_t nhcand, hcandcap;
	struct runs cw;		/* the collectives (struct kcoll) by launching thread and launch: before_op()'s windows */
	struct runs co;		/* and by launch, with their before_op: the result's (an->res.colls) */
	int64_t hmin, hmax;	/* the host spans' bounds */
	struct runs hc[AN_IDLE];	/* host busy time per category (AN_COMM..AN_CPU; struct ival, link_host()) */
	int64_t *syncn, *syncns;	/* per step (cpu_steps): the runtime calls in it that wait for the GPU */
	int64_t *csmax;		/* cpu_steps[0..i]'s latest end (an_steps_prepare()) */
	int64_t *unrec;		/* per step (cpu_steps): the latest start of a launch in it no GPU span names */
	uint8_t *bwd;		/* per thread: runs evaluate_function spans (memory) */
	int64_t *opt, *opte;	/* Optimizer.step#... starts and ends, as the passes meet them (memory) */
	size_t nopt, optcap, optecap;
	struct mem_result *mem;
	struct mem_model *mm;	/* a merge's memory model of its parts so far, to go on from (model_holds()) */
	uint8_t *mmbwd;		/* what resolved the threads of its events: per thread, backward (mem_resolve()); */
	uint32_t *mmres;	/* per memory-only thread (mkeys), the thread it was */
	size_t mmnt, mmnk;
	int mwent;		/* the merge's model went on from the parts before (1), or was made from all (0); -1: none */
	struct an_result res;
	struct an_stepitem *si;	/* the work inside each step (inside.c), to sum again at a merge */
	size_t nsi, sicap;
	struct hmap simap;	/* (step, gpu, kind, name) -> si[] while finishing */
	size_t kcap, opcap;
	int finishing;		/* analysis_finish() began: no more events, no fork */
	/* parts (analysis_merge()) */
	int part;		/* the finish keeps d and the opt arrays; no memory model */
	int finished;		/* analysis_finish() succeeded */
	int has_prev;		/* made by analysis_new_after(): */
	int64_t prev_step;	/* the part before's last step number */
	size_t seeded;		/* and its threads */
	int64_t tlo, thi;	/* the instants the events cover */
	int64_t cmin, cmax, emin, emax;	/* the correlation ids, the operators' External ids */
	int64_t xmin, xmax;	/* the External ids GPU spans fall back on (an->ext's, an_link_gpu()) */
	uint64_t *opfirst;	/* per ops[]: where it first came (struct tables' first) */
	uint32_t *opthread;	/* and on which thread */
	uint32_t *oppart;	/* a merge's: in which part (a part's are all its own, 0) */
	struct hmap mthreads;	/* the [memory] events' thread keys -> mkeys[] (mev_fix()) */
	uint64_t *mkeys;
	size_t nmkeys, mkeycap;
	uint32_t nparts;	/* a merge's: of how many (0: it is one part) */
	int64_t last_step;	/* the last step's number (an_steps_prepare()) */
};

/* ---- host spans: sorted runs, spilled, merged ---- */

static inline int hrec_less(const struct hrec *x, const struct hrec *y)
{
	if (x->thread != y->thread)
		return x->thread < y->thread;
	if (x->s != y->s)
		return x->s < y->s;
	if (x->e != y->e)
		return x->e > y->e;	/* the longer span first: it is the parent */
	/* equal spans: an operator encloses the runtime call it made */
	if ((x->kind == H_RUNTIME) != (y->kind == H_RUNTIME))
		return y->kind == H_RUNTIME;
	return x->ord < y->ord;
}

RUNS_DEFINE(hrec, struct hrec, hrec_less)

static inline int mev_less(const struct mem_event *x, const struct mem_event *y)
{
	if (x->thread != y->thread)
		return x->thread < y->thread;
	if (x->ts != y->ts)
		return x->ts < y->ts;
	return x->ord < y->ord;
}

/* the [memory] events by thread and time, to meet the spans of their thread (an_tables_visit()) */
RUNS_DEFINE(mev, struct mem_event, mev_less)

/* and as they come, by the thread's key: its number is known at the end (an_mev_threads()) */
static inline int mevk_less(const struct mem_event *x, const struct mem_event *y)
{
	if (x->thread_key != y->thread_key)
		return x->thread_key < y->thread_key;
	if (x->ts != y->ts)
		return x->ts < y->ts;
	return x->ord < y->ord;
}

RUNS_DEFINE(mevk, struct mem_event, mevk_less)

static inline int mevk_split(const void *a, const void *b)
{
	return ((const struct mem_event *)a)->thread_key != ((const struct mem_event *)b)->thread_key;
}

static inline int grec_less(const struct grec *x, const struct grec *y)
{
	return x->corr != y->corr ? x->corr < y->corr : x->ord < y->ord;
}

RUNS_DEFINE(grec, struct grec, grec_less)

static inline int lrec_less(const struct lrec *x, const struct lrec *y)
{
	return x->corr != y->corr ? x->corr < y->corr : x->pos < y->pos;
}

RUNS_DEFINE(lrec, struct lrec, lrec_less)

static inline int brec_less(const struct brec *x, const struct brec *y)
{
	if (x->step != y->step)
		return x->step < y->step;
	if (x->s != y->s)
		return x->s < y->s;
	return x->e != y->e ? x->e < y->e : x->cat < y->cat;	/* equal ones are alike */
}

RUNS_DEFINE(brec, struct brec, brec_less)

struct gpair {			/* GPU time an operator launched itself */
	uint32_t pos;
	int64_t dur;
};

static inline int gpair_less(const struct gpair *x, const struct gpair *y)
{
	return x->pos != y->pos ? x->pos < y->pos : x->dur < y->dur;
}

RUNS_DEFINE(gpair, struct gpair, gpair_less)

/* communication operators by thread and start, as the passes meet their spans */
static inline int hcrec_less(const struct crec *x, const struct crec *y)
{
	if (x->thread != y->thread)
		return x->thread < y->thread;
	return x->s != y->s ? x->s < y->s : x->ord < y->ord;
}

RUNS_DEFINE(hcrec, struct crec, hcrec_less)

/* communication kernels by correlation id, to meet their calls' (collectives()) */
static inline int kcrec_less(const struct crec *x, const struct crec *y)
{
	return x->corr != y->corr ? x->corr < y->corr : x->ord < y->ord;
}

RUNS_DEFINE(kcrec, struct crec, kcrec_less)

static inline int ccall_less(const struct ccall *x, const struct ccall *y)
{
	return x->corr != y->corr ? x->corr < y->corr : x->pos < y->pos;
}

RUNS_DEFINE(ccall, struct ccall, ccall_less)

struct kcoll {			/* a collective, and the order it was made in (the kernels' first, then gloo's) */
	struct an_coll c;	/* first: an_colls_open()'s records are these */
	uint64_t made;
};

/* the result's order: by launch, then start */
static inline int kcoll_less(const struct kcoll *x, const struct kcoll *y)
{
	if (x->c.launch_ns != y->c.launch_ns)
		return x->c.launch_ns < y->c.launch_ns;
	return x->c.start_ns != y->c.start_ns ? x->c.start_ns < y->c.start_ns : x->made < y->made;
}

RUNS_DEFINE(kcoll, struct kcoll, kcoll_less)

/* before_op()'s: by launching thread, then as the result */
static inline int kcollw_less(const struct kcoll *x, const struct kcoll *y)
{
	return x->c.thread != y->c.thread ? x->c.thread < y->c.thread : kcoll_less(x, y);
}

RUNS_DEFINE(kcollw, struct kcoll, kcollw_less)

/* by start, then end: the order of the interval lists below and of the host's busy intervals' runs */
static inline int ival_less(const struct ival *x, const struct ival *y)
{
	return x->s != y->s ? x->s < y->s : x->e < y->e;
}

RUNS_DEFINE(hival, struct ival, ival_less)

static inline int i64_less(const int64_t *x, const int64_t *y)
{
	return *x < *y;
}

RUNS_DEFINE(i64, int64_t, i64_less)


static inline uint64_t an_cc_mask(int64_t id, size_t *word, const struct analysis *an)
{
	uint64_t h = hmap_mix((uint64_t)id);

	*word = (size_t)(h >> 12) & (an->ccwords - 1);
	return (1ULL << (h & 63)) | (1ULL << ((h >> 6) & 63));
}

/* v into [*lo, *hi] */
static inline void an_widen(int64_t *lo, int64_t *hi, int64_t v)
{
	if (v < *lo)
		*lo = v;
	if (v > *hi)
		*hi = v;
}


/*
 * A host category's busy intervals (runs by start) united as they are read,
 * and cut to windows that only move forward: the steps' spans, which follow
 * one another.
 */
struct hunion {
	struct rcur c;
	const struct ival *next;	/* the next interval read */
	struct ival u;			/* the united one at hand */
	int has;
};

/*
 * A host span open on its thread's stack: a span that starts inside the
 * one on top is its child; one that ends after its parent is clipped to it
 * (traces do have such overlaps), so children never count for more than
 * their parent, self time is never negative, and the self times of a thread
 * add up to at most its busy time. The stack holds a span and its ancestors,
 * nearest last. pos: its place in sorted order, the span's name for maps.
 */
struct row {			/* an operator table row, held until its parent says whether it is one */
	int64_t self, total, gself, gtotal;
	int64_t s;		/* the span's start */
	uint32_t pos, name, thread;
	uint8_t kind, ann;
};

struct frame {
	int64_t s, e, end;	/* end: clipped to the parent's */
	uint32_t pos, name, thread;
	uint8_t comm;		/* a communication operator's span (struct cgroup) */
	struct cwhat what;	/* and what the first of them says */
	uint8_t kind, ann;
	uint16_t ms;		/* MS_* (memory.h) */
	uint32_t opt;		/* an Optimizer.step#...: 1 + its index in an->opte (the tables pass) */
	/* the tables pass (an_tables_visit(), an_ops_pop()) */
	int64_t self, gself, gtotal;
	uint32_t kids;		/* children other than runtime calls */
	int has_pend;
	struct row pend;	/* the first of them */
};

struct walk {
	struct rcur cur;
	struct frame *st;
	size_t depth, cap;
	uint32_t pos;
	void (*pop)(struct walk *w, struct frame *f, struct frame *parent);
	void *arg;
	int nomem;
};

/*
 * A pass: each span in sorted order to visit (which pushes it, an_walk_push()),
 * then visit(w, NULL) with the last span's stack still up; pop, when set,
 * sees each span leave the stack.
 */
typedef int (*visit_fn)(struct walk *w, const struct hrec *r);

/*
 * The GPU spans in correlation id order, each with the runtime call its id
 * names: the first of the id in sorted order (link_host() wrote them, by id
 * and place). A sort-merge join of two sets of runs: neither is held.
 */
struct gjoin {
	struct analysis *an;
	struct rcur g, l;
	const struct lrec *next;	/* the next call */
	struct lrec call;		/* the current id's, when linked */
	int64_t corr;
	int linked, started;
	int unrec;			/* note the launches no GPU span names (an->unrec) */
	int nomem;
};

struct hcand {			/* a gloo:* operator with no gloo:* span above it, and its span's place */
	struct crec c;
	uint32_t pos;
};

struct window {			/* before_op(): a collective's, [lo, its launch) on its launching thread */
	struct kcoll k;
	int64_t lo;
};

struct tables {
	struct analysis *an;
	struct hmap m;		/* (name, device) -> ops[] */
	uint64_t *first;	/* of each row of ops[]: where it first came, 2 * pos + device, */
	uint32_t *fthread;	/* and its thread */
	size_t firstcap, fthreadcap;
	struct rcur gc;		/* the GPU time operators launched themselves, by place */
	const struct gpair *gn;	/* the next of it; NULL: none left */
	struct rcur wc;		/* the collectives by launching thread and launch (an->cw) */
	const struct kcoll *wn;	/* the next of them */
	struct window win;	/* the window at hand: the first one a span may still reach */
	int has_win;
	struct rcur mc;		/* the [memory] events, by thread and time */
	const struct mem_event *me;	/* the next of them; NULL: none left */
	uint32_t nopt;		/* Optimizer.step#... spans met */
	struct tp_errbuf *err;
};

/* ---- inside.c: the work inside each step (struct an_inside) ---- */

struct an_stepitem {
	int64_t step_start;	/* its step's start_ns */
	struct an_inside v;
};

/* An operator row starting at t, its self time self, into its step's (the ProfilerStep#N span holding t); -1: out of memory. */
int an_inside_op(struct analysis *an, uint32_t name, int64_t t, int64_t self);
/* The GPU spans (an->gr) into the steps they start in and overlap; a tp_err. */
int an_inside_gpu(struct analysis *an, struct tp_errbuf *err);
/* an->res.inside from an->si over the complete steps of an->res.steps; -1: out of memory. */
int an_inside_sum(struct analysis *an);
/* o->si: a's (NULL: none) and b's; -1: out of memory. */
int an_inside_combine(struct analysis *o, const struct analysis *a, const struct analysis *b);

/* ---- inlined in every pass: the nesting stack (walk.c), string classes (classify.c) ---- */

/* The frames that end by t (all: every frame) popped, each handed to w->pop. */
static inline void an_walk_unwind(struct walk *w, int64_t t, int all)
{
	while (w->depth && (all || t >= w->st[w->depth - 1].end)) {
		struct frame *f = &w->st[w->depth - 1];
		if (w->pop)
			w->pop(w, f, w->depth > 1 ? f - 1 : NULL);
		w->depth--;
	}
}

/*
 * How deep spans nest on one thread before the deepest is closed where the
 * next begins (an_walk_push()). Python's own recursion stops at 1,000 frames;
 * a trace of millions of operators at one instant nested them all, 130 bytes
 * a level (issue 50: 435 MiB for a 1 MB upload).
 */
#define AN_WALK_MAX_DEPTH 4096

/*
 * r on the stack, the frames it does not start inside popped; NULL: out of
 * memory. At AN_WALK_MAX_DEPTH, the deepest frame ends where r begins: the
 * time it loses goes back to its parent's self time, and r is its sibling.
 */
static inline struct frame *an_walk_push(struct walk *w, const struct hrec *r)
{
	struct frame *f, *p;

	if (w->depth && w->st[w->depth - 1].thread != r->thread)
		an_walk_unwind(w, 0, 1);
	an_walk_unwind(w, r->s, 0);
	if (w->depth == AN_WALK_MAX_DEPTH) {
		f = &w->st[w->depth - 1];
		if (f->end > r->s) {
			f->self -= f->end - r->s;
			f[-1].self += f->end - r->s;
			f->end = r->s;
		}
		an_walk_unwind(w, r->s, 0);
	}
	if (tp_grow((void **)&w->st, &w->cap, w->depth + 1, sizeof(*w->st)))
		return NULL;
	f = &w->st[w->depth];
	p = w->depth ? f - 1 : NULL;
	/* what the tables pass adds (self, gself, ...) it sets itself */
	f->s = r->s;
	f->e = r->e;
	f->end = p && r->e > p->end ? p->end : r->e;
	f->pos = w->pos++;
	f->name = r->name;
	f->thread = r->thread;
	f->comm = 0;
	f->opt = 0;
	f->self = 0;	/* the tables pass sets its own; the depth cap above adds to it */
	f->kind = r->kind;
	f->ann = r->ann;
	f->ms = 0;
	w->depth++;
	return f;
}

/* The category and name flags of string id (C_*, N_*), classified on first use (an_cls_fill()); -1
 * when out of memory. */
int an_cls_fill(struct analysis *an, uint32_t id);
static inline int an_cls_of(struct analysis *an, uint32_t id, uint16_t *out)
{
	if ((id >= an->ncls || !an->cls[id]) && an_cls_fill(an, id))
		return -1;
	*out = an->cls[id];
	return 0;
}

/* classify.c */
int an_step_number(const char *s, int64_t *n);

/* analysis.c */
size_t an_run_records(const struct analysis *an, size_t size);
int an_nomem(struct tp_errbuf *err);
int an_mem_thread_key(struct analysis *an, uint64_t key);
int an_mev_threads(struct analysis *an, struct tp_errbuf *err);
extern int an_cc_all;
int an_cc_build(struct analysis *an, struct rcur *c);
int an_dup_array(void *out, const void *p, size_t n, size_t size);
int an_rcur_fail(struct rcur *c, struct tp_errbuf *err);

/* walk.c */
int an_ivals_add(struct ivals *l, int64_t s, int64_t e);
void an_ivals_union(struct ivals *l);
int an_hunion_open(struct hunion *h, const struct runs *r);
int an_hunion_window(struct hunion *h, int64_t a, int64_t b, struct ivals *out);
int an_merge_measure(const struct ivals *x, const struct ivals *y, struct ivals *out, int64_t *len);
int an_walk_all(struct analysis *an, visit_fn visit, void (*pop)(struct walk *, struct frame *, struct frame *),
		    void *arg, struct tp_errbuf *err);

/* join.c */
uint16_t an_ms_flags(struct analysis *an, const struct frame *f);
int64_t an_coll_bytes(const struct analysis *an, const struct crec *c);
int an_link_gpu(struct analysis *an, struct tp_errbuf *err);

/* gpujoin.c */
uint32_t an_link_by(const struct hmap *m, int64_t id);
size_t an_steps_by(const struct analysis *an, int64_t t);
int32_t an_step_at(const struct analysis *an, int64_t t);
int an_gjoin_open(struct gjoin *j, struct analysis *an, int unrec, struct tp_errbuf *err);
const struct grec *an_gjoin_next(struct gjoin *j);
int an_gjoin_close(struct gjoin *j, struct tp_errbuf *err);
int64_t an_fit_end(int64_t a, int64_t b);
int an_cmp_srec(const void *a, const void *b);
int an_gpu_owner(struct analysis *an, const struct gjoin *j, const struct grec *g, struct tp_errbuf *err);
void an_owners_begin(struct analysis *an);
int an_owners_end(struct analysis *an, struct tp_errbuf *err);
int an_gpu_owners(struct analysis *an, struct tp_errbuf *err);

/* tables.c */
void an_ops_pop(struct walk *w, struct frame *f, struct frame *p);
void an_window_read(struct tables *t);
int an_window_done(struct tables *t);
int an_tables_visit(struct walk *w, const struct hrec *r);
int an_order_ops(struct analysis *an, const uint64_t *first, const uint32_t *thread);

/* steps.c */
void an_mark_incomplete(struct an_step *v, size_t n, int64_t last);
int an_steps_prepare(struct analysis *an);
void an_sync_call(struct analysis *an, int64_t s, int64_t e);
int an_breakdown(struct analysis *an, struct tp_errbuf *err);

/* collectives.c */
struct mem_input an_mem_input_of(struct analysis *an);

#endif
