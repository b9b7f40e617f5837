/*
 * analysis.c: steps, their breakdown, operator and kernel tables, from the
 * events of one trace (analysis.h says when and why).
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

const char *const an_comp_names[AN_NCOMP] = {
	"kernel", "memcpy", "memset", "communication", "runtime", "dataloader", "cpu", "idle",
};

const char *const an_incomplete_notes[3] = {
	NULL,
	"launched no GPU work while the trace's other steps did",
	"launched GPU work the trace has no record of: the profiler stopped before it was recorded",
};

const char *const an_kclass_names[3] = { "computation", "communication", "memory" };

/* Does s contain w, ignoring ASCII case? */
static int has_word(const char *s, const char *w)
{
	size_t n = strlen(w);

	for (; *s; s++)
		if (!strncasecmp(s, w, n))
			return 1;
	return 0;
}

/*
 * HTA's classes (hta/common/trace_symbol_table.py and the kernel breakdown):
 * copies and memsets are memory; kernels of the collective libraries (NCCL,
 * RCCL, gloo) and the point-to-point and all-to-all kernels they launch are
 * communication; every other kernel is computation.
 */
int an_is_sync(const char *name)
{
	static const char *const names[] = {
		"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
		"cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return 1;
	return 0;
}

int an_kernel_class(const char *name, int kind)
{
	static const char *const comm[] = { "nccl", "rccl", "gloo", "sendrecv", "alltoall", "all_to_all" };

	if (kind != AN_GPU_KERNEL)
		return AN_KC_MEMORY;
	for (size_t i = 0; i < sizeof(comm) / sizeof(comm[0]); i++)
		if (has_word(name, comm[i]))
			return AN_KC_COMMUNICATION;
	return AN_KC_COMPUTATION;
}

int an_op_is_comm(const char *name)
{
	return !strncmp(name, "nccl:", 5) || !strncmp(name, "gloo:", 5) || !strncmp(name, "c10d::", 6) ||
	       !strcmp(name, "record_param_comms");
}

const char *const an_ckind_names[AN_NCKIND] = {
	"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "send", "recv",
	"send_recv", "gather", "scatter", "barrier", "other",
};

int an_coll_kind(const char *name)
{
	/* tested in this order on the name's letters, lowercased, without '_' and ':' */
	static const struct { const char *w; int k; } words[] = {
		{ "allreduce", AN_CK_ALL_REDUCE }, { "reducescatter", AN_CK_REDUCE_SCATTER },
		{ "allgather", AN_CK_ALL_GATHER }, { "alltoall", AN_CK_ALL_TO_ALL }, { "sendrecv", AN_CK_SEND_RECV },
		{ "broadcast", AN_CK_BROADCAST }, { "barrier", AN_CK_BARRIER }, { "send", AN_CK_SEND },
		{ "recv", AN_CK_RECV }, { "reduce", AN_CK_REDUCE }, { "gather", AN_CK_GATHER },
		{ "scatter", AN_CK_SCATTER },
	};
	char sq[256];
	size_t n = 0, i;

	for (; *name && n < sizeof(sq) - 1; name++)
		if (*name != '_' && *name != ':')
			sq[n++] = (char)(*name >= 'A' && *name <= 'Z' ? *name - 'A' + 'a' : *name);
	sq[n] = 0;
	for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(sq, words[i].w))
			return words[i].k;
	return -1;
}

int an_dtype_size(const char *d)
{
	static const struct { const char *s; int n; } sizes[] = {
		{ "float", 4 }, { "float32", 4 }, { "double", 8 }, { "float64", 8 }, { "half", 2 }, { "float16", 2 },
		{ "c10::half", 2 }, { "bfloat16", 2 }, { "c10::bfloat16", 2 }, { "long", 8 }, { "long int", 8 },
		{ "int64", 8 }, { "int", 4 }, { "int32", 4 }, { "short", 2 }, { "int16", 2 }, { "char", 1 },
		{ "signed char", 1 }, { "int8", 1 }, { "byte", 1 }, { "unsigned char", 1 }, { "uint8", 1 },
		{ "bool", 1 }, { "uint16", 2 }, { "uint32", 4 }, { "uint64", 8 }, { "complexhalf", 4 },
		{ "complexfloat", 8 }, { "complexdouble", 16 }, { "c10::complex<float>", 8 },
		{ "c10::complex<double>", 16 },
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (!strcasecmp(d, sizes[i].s))
			return sizes[i].n;
	if (!strncasecmp(d, "float8", 6))
		return 1;
	return 0;
}

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

struct brec {			/* a GPU span in the step that launched it: runs by step, for breakdown() */
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
	uint64_t *ccset;	/* the communication kernels' correlation ids, a filter (cc_build()) */
	size_t ccwords;		/* its 64-bit words, a power of two */
	size_t nccorr;		/* communication kernels with a correlation id */
	struct runs lr;		/* the runtime calls with ids (struct lrec, link_host()) */
	struct runs cc;		/* the calls whose ids name communication kernels (struct ccall, link_host()) */
	struct runs bs;		/* the GPU spans by the step that launched them (struct brec) */
	int64_t *gend;		/* per step: the latest end of its GPU spans */
	int64_t *gfirst;	/* and the first start of those a call in it launched (INT64_MAX: none) */
	struct runs ub;		/* the ends of the GPU spans no call in a step launched (int64_t: queued()) */
	int64_t glast;		/* the latest launch instant */
	int owned;		/* bs and gp are made (gpu_owners()) */
	int whole;		/* the trace is one step (steps_prepare()) */
	struct runs gp;		/* and the GPU time each operator launched itself (struct gpair) */
	struct srec *cpu_steps;
	size_t ncs, cscap;
	struct hmap kmap;	/* name * 4 + kind -> kernels[] */
	struct runs hcr;	/* communication operators (struct crec) */
	struct runs kcr;	/* and kernels */
	size_t ncr;
	size_t nmev;		/* [memory] events (in m) */
	/* the passes' (analysis_finish()) */
	struct hmap ext;	/* External ids of GPU spans no runtime call links -> links[] (link_gpu()) */
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
	int64_t *csmax;		/* cpu_steps[0..i]'s latest end (steps_prepare()) */
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
	int64_t xmin, xmax;	/* the External ids GPU spans fall back on (an->ext's, link_gpu()) */
	uint64_t *opfirst;	/* per ops[]: where it first came (struct tables' first) */
	uint32_t *opthread;	/* and on which thread */
	uint32_t *oppart;	/* a merge's: in which part (a part's are all its own, 0) */
	struct hmap mthreads;	/* the [memory] events' thread keys -> mkeys[] (mev_fix()) */
	uint64_t *mkeys;
	size_t nmkeys, mkeycap;
	uint32_t nparts;	/* a merge's: of how many (0: it is one part) */
	int64_t last_step;	/* the last step's number (steps_prepare()) */
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

/* the [memory] events by thread and time, to meet the spans of their thread (tables_visit()) */
RUNS_DEFINE(mev, struct mem_event, mev_less)

/* and as they come, by the thread's key: its number is known at the end (mev_threads()) */
static inline int mevk_less(const struct mem_event *x, const struct mem_event *y)
{
	if (x->thread_key != y->thread_key)
		return x->thread_key < y->thread_key;
	if (x->ts != y->ts)
		return x->ts < y->ts;
	return x->ord < y->ord;
}

RUNS_DEFINE(mevk, struct mem_event, mevk_less)

static int mevk_split(const void *a, const void *b)
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

static int step_number(const char *s, int64_t *n)
{
	static const char prefix[] = "ProfilerStep#";
	size_t i = sizeof(prefix) - 1;
	int64_t v = 0;

	*n = 0;
	if (strncmp(s, prefix, i) || !s[i])
		return 0;
	for (; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	*n = v;
	return 1;
}

/*
 * A host span the step breakdown counts as communication, where no GPU work
 * runs: torch-tb-profiler's (trace.py's NcclOpNameSet and GlooOpNameSet).
 * Other collectives (nccl:all_to_all, gloo:send, ...) are CPU time there,
 * and so here: the breakdown is its.
 */
static int comm_span(const char *s)
{
	static const char *const ops[] = { "broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter" };

	if (strncmp(s, "nccl:", 5) && strncmp(s, "gloo:", 5))
		return 0;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(s + 5, ops[i]))
			return 1;
	return 0;
}

static uint16_t classify_string(const char *s)
{
	static const struct { const char *s; uint8_t c; } cats[] = {
		{ "cpu_op", C_OP }, { "Operator", C_OP }, { "user_annotation", C_ANN },
		{ "cuda_runtime", C_RUNTIME }, { "cuda_driver", C_RUNTIME }, { "Runtime", C_RUNTIME },
		{ "kernel", C_KERNEL }, { "Kernel", C_KERNEL }, { "gpu_memcpy", C_MEMCPY },
		{ "Memcpy", C_MEMCPY }, { "gpu_memset", C_MEMSET }, { "Memset", C_MEMSET },
		{ "gpu_user_annotation", C_GPU_ANN },
	};
	uint16_t c = C_OTHER;
	int64_t n;
	size_t i;

	for (i = 0; i < sizeof(cats) / sizeof(cats[0]); i++)
		if (!strcmp(s, cats[i].s))
			c = cats[i].c;
	if (step_number(s, &n))
		c |= N_STEP;
	/* torch.utils.data: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" */
	if (!strncmp(s, "enumerate(DataLoader)#", 22))
		c |= N_DATALOADER;
	/* what memory categories are inferred from (memory.c) */
	if (!strncmp(s, "Optimizer.step#", 15))
		c |= N_OPT_STEP;
	if (!strncmp(s, "Optimizer.zero_grad#", 20))
		c |= N_ZERO_GRAD;
	if (!strncmp(s, "autograd::engine::evaluate_function: ", 37))
		c |= N_BACKWARD;
	if (strstr(s, "AccumulateGrad"))
		c |= N_ACCUM_GRAD;
	if (!strcmp(s, "aten::to") || !strcmp(s, "aten::_to_copy") || !strcmp(s, "aten::copy_"))
		c |= N_COPY;
	if (an_is_sync(s))
		c |= N_SYNC;
	if (an_kernel_class(s, AN_GPU_KERNEL) == AN_KC_COMMUNICATION)
		c |= N_COMM;
	if (an_op_is_comm(s))
		c |= N_COMM_OP;
	if (comm_span(s))
		c |= N_COMM_SPAN;
	/* runtime calls that launch kernels: cudaLaunchKernel, cuLaunchKernel, hipLaunchKernel,
	 * cudaGraphLaunch, ... (not copies and memsets: CUPTI does not record every cudaMemsetAsync) */
	if (strstr(s, "Launch"))
		c |= N_LAUNCH;
	return c;
}

static int cls_of(struct analysis *an, uint32_t id, uint16_t *out)
{
	if (id >= an->ncls) {
		size_t n = an->ncls ? an->ncls : 1024;
		while (n <= id)
			n *= 2;
		uint16_t *nc = tp_realloc(an->cls, n * sizeof(*nc));
		if (!nc)
			return -1;
		memset(nc + an->ncls, 0, (n - an->ncls) * sizeof(*nc));
		an->cls = nc;
		an->ncls = n;
	}
	if (!an->cls[id])
		an->cls[id] = classify_string(an->str(an->payload, id));
	*out = an->cls[id];
	return 0;
}

static size_t default_run = AN_RUN_RECORDS;

/* Records of size bytes in a run: as many bytes as a run of host spans. */
static size_t run_records(const struct analysis *an, size_t size)
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
	an->gr.limit = run_records(an, sizeof(struct grec));
	an->m.limit = run_records(an, sizeof(struct mem_event));
	an->hcr.limit = (run_records(an, sizeof(struct crec)) + 3) / 4;
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

static int nomem(struct tp_errbuf *err)
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
static int mem_thread_key(struct analysis *an, uint64_t key)
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
		/* its number at the end (mev_threads()): a thread's spans may come after its allocations */
		.thread_key = hmap_mix(id_key(e->pid, e->pid_sid)) ^ id_key(e->tid, e->tid_sid),
		.dev_type = (e->have & TH_DEV_TYPE) ? (int32_t)e->dev_type : 0,
		.dev_id = (e->have & TH_DEV_ID) ? (int32_t)e->dev_id : -1,
		.has_addr = (e->have & TH_ADDR) != 0,
		.has_totals = (e->have & TH_TOTAL_ALLOC) && (e->have & TH_TOTAL_RES), .ord = (uint32_t)an->nmev,
	};
	int rc;

	if ((rc = mem_thread_key(an, ev.thread_key)) || (rc = runs_add(&an->m, &ev, err)))
		return rc == -1 ? nomem(err) : rc;
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
static int mev_threads(struct analysis *an, struct tp_errbuf *err)
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
 * built from the kernels' records once the trace is in (cc_build()). It may
 * say yes to an id that is none, which costs a struct ccall that no kernel
 * joins (collectives()), never an answer: at 2 ids a word on average, about
 * 4 of its 64 bits are set, so about (4/64)^2 = 0.4 % of the other calls say
 * yes (arithmetic, not measured).
 * Sized to the ids (256 KiB for the 50,500 of bench/make_big_trace.py's 1 GB
 * trace; none without), where it took 1 MiB whatever the trace, from the
 * first such kernel on, in every analysis and every fork of one.
 */
static int cc_all;

void analysis_comm_filter_all(int on)
{
	cc_all = on;
}

static inline uint64_t cc_mask(int64_t id, size_t *word, const struct analysis *an)
{
	uint64_t h = hmap_mix((uint64_t)id);

	*word = (size_t)(h >> 12) & (an->ccwords - 1);
	return (1ULL << (h & 63)) | (1ULL << ((h >> 6) & 63));
}

/* The filter of the kernels in an->kcr (sealed); -1: out of memory, or a read failed (c->err). */
static int cc_build(struct analysis *an, struct rcur *c)
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
			uint64_t m = cc_mask(k->corr, &w, an);
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
static int dup_array(void *out, const void *p, size_t n, size_t size)
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
		nomem(err);
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
	if (dup_array(&f->cls, an->cls, an->ncls, sizeof(*an->cls)) ||
	    dup_array(&f->cpu_steps, an->cpu_steps, an->ncs, sizeof(*an->cpu_steps)) ||
	    dup_array(&f->res.kernels, an->res.kernels, an->res.nkernels, sizeof(*an->res.kernels)) ||
	    hmap_copy(&f->threads, &an->threads) || hmap_copy(&f->kmap, &an->kmap) ||
	    hmap_copy(&f->mthreads, &an->mthreads) || dup_array(&f->mkeys, an->mkeys, an->nmkeys, sizeof(*an->mkeys))) {
		analysis_free(f);
		nomem(err);
		return NULL;
	}
	f->nmkeys = f->mkeycap = an->nmkeys;
	return f;
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

/* v into [*lo, *hi] */
static inline void widen(int64_t *lo, int64_t *hi, int64_t v)
{
	if (v < *lo)
		*lo = v;
	if (v > *hi)
		*hi = v;
}

/*
 * What analysis_merge() asks of parts: the instants and ids of the events the
 * passes read (a span they pass over, as the profiler's own window span
 * "PyTorch Profiler (0)" around the whole trace, joins nothing and crosses
 * no part).
 */
static inline void covers(struct analysis *an, const struct tp_event *e, int64_t s, int64_t dur, int op)
{
	widen(&an->tlo, &an->thi, s);
	widen(&an->tlo, &an->thi, s + dur);
	if (e->have & TH_CORR)
		widen(&an->cmin, &an->cmax, e->corr);
	if (op && (e->have & TH_EXT))	/* an operator's: a GPU span may fall back on it (link_gpu()) */
		widen(&an->emin, &an->emax, e->ext_id);
}

int analysis_event(struct analysis *an, const struct tp_event *e, struct tp_errbuf *err)
{
	uint16_t cc, nc;
	int64_t s, dur, n;

	if (e->ph == 'i' && e->name == TRACE_S_MEMORY && (e->have & TH_TS)) {
		widen(&an->tlo, &an->thi, e->ts_ns);
		return memory_event(an, e, err);
	}
	if (e->ph != 'X' || !(e->have & TH_TS))
		return TP_OK;
	if (cls_of(an, e->cat, &cc) || cls_of(an, e->name, &nc))
		return nomem(err);
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
		step_number(an->str(an->payload, e->name), &n);
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, an->ncs + 1, sizeof(*an->cpu_steps)))
			return nomem(err);
		an->cpu_steps[an->ncs++] = (struct srec){ .step = n, .s = s, .e = s + dur };
		return TP_OK;
	}
	switch (cc) {
	case C_OP: case C_ANN: case C_RUNTIME: {
		uint32_t *t = thread_of(an, e);
		if (!t)
			return nomem(err);
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
			.ord = (uint32_t)an->ng,
		};
		int rc;
		covers(an, e, s, dur, 0);
		if (add_kernel(an, e, kind, dur))
			return nomem(err);
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

/* ---- interval lists ---- */

SORT_DEFINE(sort_ival, struct ival, ival_less)

static int ivals_add(struct ivals *l, int64_t s, int64_t e)
{
	if (e <= s)
		return 0;
	if (tp_grow((void **)&l->v, &l->cap, l->n + 1, sizeof(*l->v)))
		return -1;
	l->v[l->n++] = (struct ival){ s, e };
	return 0;
}

/* Sort and merge into disjoint intervals, in place. */
static void ivals_union(struct ivals *l)
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

static void hunion_advance(struct hunion *h)
{
	if (!(h->has = h->next != NULL))
		return;
	h->u = *h->next;
	for (h->next = rcur_next(&h->c); h->next && h->next->s <= h->u.e; h->next = rcur_next(&h->c))
		if (h->next->e > h->u.e)
			h->u.e = h->next->e;
}

static int hunion_open(struct hunion *h, const struct runs *r)
{
	if (rcur_open(&h->c, r))
		return -1;
	h->next = rcur_next(&h->c);
	hunion_advance(h);
	return 0;
}

/* The parts of the united intervals in [a, b) into out (sorted); a is no less than the last b. */
static int hunion_window(struct hunion *h, int64_t a, int64_t b, struct ivals *out)
{
	out->n = 0;
	while (h->has && h->u.e <= a)
		hunion_advance(h);
	for (; h->has && h->u.s < b; hunion_advance(h)) {
		if (ivals_add(out, h->u.s > a ? h->u.s : a, h->u.e < b ? h->u.e : b))
			return -1;
		if (h->u.e > b)
			break;	/* the rest is the next window's */
	}
	return 0;
}

/* out = x united with y (both sorted, disjoint); returns the covered length. */
static int merge_measure(const struct ivals *x, const struct ivals *y, struct ivals *out, int64_t *len)
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
			if (ivals_add(out, v.s, v.e))
				return -1;
			*len += v.e - v.s;
		}
	}
	return 0;
}

/* ---- the passes over the host spans: a nesting stack ---- */

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
	/* the tables pass (tables_visit(), ops_pop()) */
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

static void walk_unwind(struct walk *w, int64_t t, int all)
{
	while (w->depth && (all || t >= w->st[w->depth - 1].end)) {
		struct frame *f = &w->st[w->depth - 1];
		if (w->pop)
			w->pop(w, f, w->depth > 1 ? f - 1 : NULL);
		w->depth--;
	}
}

/* r on the stack, the frames it does not start inside popped; NULL: out of memory */
static struct frame *walk_push(struct walk *w, const struct hrec *r)
{
	struct frame *f, *p;

	if (w->depth && w->st[w->depth - 1].thread != r->thread)
		walk_unwind(w, 0, 1);
	walk_unwind(w, r->s, 0);
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
	f->kind = r->kind;
	f->ann = r->ann;
	f->ms = 0;
	w->depth++;
	return f;
}

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
	return !w->nomem ? TP_OK : err->rc ? err->rc : nomem(err);
}

/*
 * A pass: each span in sorted order to visit (which pushes it, walk_push()),
 * then visit(w, NULL) with the last span's stack still up; pop, when set,
 * sees each span leave the stack.
 */
typedef int (*visit_fn)(struct walk *w, const struct hrec *r);

static int walk_all(struct analysis *an, visit_fn visit, void (*pop)(struct walk *, struct frame *, struct frame *),
		    void *arg, struct tp_errbuf *err)
{
	const struct hrec *r;
	struct walk w;

	if (walk_open(&w, an))
		return walk_close(&w, err) ? err->rc : nomem(err);
	w.pop = pop;
	w.arg = arg;
	while ((r = rcur_next(&w.cur)) && !w.nomem)
		if (visit(&w, r))
			w.nomem = 1;
	if (!w.cur.err && !w.nomem && visit(&w, NULL))
		w.nomem = 1;
	walk_unwind(&w, 0, 1);
	return walk_close(&w, err);
}

/* The MS_* flags of a span (memory.h). */
static uint16_t ms_flags(struct analysis *an, const struct frame *f)
{
	uint16_t nc;

	if (cls_of(an, f->name, &nc))
		nc = 0;
	return (uint16_t)((f->kind == H_RUNTIME ? MS_RUNTIME : 0) | (f->ann ? MS_ANNOTATION : 0) |
			  (f->kind == H_DATALOADER ? MS_DATALOADER : 0) | (nc & N_OPT_STEP ? MS_OPT_STEP : 0) |
			  (nc & N_ZERO_GRAD ? MS_ZERO_GRAD : 0) | (nc & N_BACKWARD ? MS_BACKWARD : 0) |
			  (nc & N_ACCUM_GRAD ? MS_ACCUM_GRAD : 0) | (nc & N_COPY ? MS_COPY : 0));
}

/* max(In, Out msg nelems) x dtype size; -1 when c does not say */
static int64_t coll_bytes(const struct analysis *an, const struct crec *c)
{
	int64_t n = c->in > c->out ? c->in : c->out, b;
	int size = c->dtype ? an_dtype_size(an->str(an->payload, c->dtype)) : 0;

	if (n < 0 || !size || __builtin_mul_overflow(n, (int64_t)size, &b))
		return -1;
	return b;
}

static struct cwhat cwhat_of(const struct analysis *an, const struct crec *c)
{
	return (struct cwhat){ .seq = c->seq, .bytes = coll_bytes(an, c), .gsize = c->gsize, .coll = c->coll,
			       .pg = c->pg, .says = c->coll || c->in >= 0 || c->out >= 0 };
}

/*
 * Communication operators as host spans: a crec is made from the first
 * span in sorted order of its thread, start, end and name that is no
 * runtime call. Their runs, by (thread, start), are read as the spans come,
 * a group of one thread and start at a time, sorted by (name, end, arrival)
 * so that a span finds its crecs by a search: a group is consumed a (name,
 * end) at a time (50,000 alike at one instant took 2 s when each span
 * scanned the group); each pass over the spans meets them the same way.
 */
struct cgroup {
	struct rcur cur;
	const struct crec *next;	/* the next one read */
	struct cslot {
		struct crec c;
		int used;		/* made from a span already */
	} *g;				/* the group of the span at hand's thread and start */
	size_t n, cap;
	uint32_t thread;
	int64_t s;
	int open, has;
	int gloo;			/* note the gloo:* operators that may be collectives (gloo_made()) */
};

static inline int cslot_less(const struct cslot *x, const struct cslot *y)
{
	if (x->c.name != y->c.name)
		return x->c.name < y->c.name;
	return x->c.e != y->c.e ? x->c.e < y->c.e : x->c.ord < y->c.ord;
}

SORT_DEFINE(sort_cslot, struct cslot, cslot_less)

static int cgroup_open(struct cgroup *cg, struct analysis *an, int gloo)
{
	memset(cg, 0, sizeof(*cg));
	cg->gloo = gloo;
	if (!an->hcr.n && !an->hcr.nruns)
		return 0;
	cg->open = 1;
	if (rcur_open(&cg->cur, &an->hcr))
		return -1;
	cg->next = rcur_next(&cg->cur);
	return 0;
}

/* 0 or errno of a failed read */
static int cgroup_close(struct cgroup *cg)
{
	int e = cg->open ? cg->cur.err : 0;

	if (cg->open)
		rcur_close(&cg->cur);
	tp_free(cg->g);
	memset(cg, 0, sizeof(*cg));
	return e;
}

static int gloo_made(struct analysis *an, const struct crec *c, const struct walk *w);

/* The crecs made from the span on top of w's stack: f->comm, and f->what from the first. -1: out of memory. */
static int cgroup_join(struct analysis *an, struct cgroup *cg, const struct walk *w)
{
	struct frame *f = &w->st[w->depth - 1];
	size_t q;

	if (!cg->open)
		return 0;
	if (!cg->has || cg->thread != f->thread || cg->s != f->s) {
		cg->has = 1;
		cg->thread = f->thread;
		cg->s = f->s;
		cg->n = 0;
		while (cg->next && (cg->next->thread < f->thread || (cg->next->thread == f->thread && cg->next->s < f->s)))
			cg->next = rcur_next(&cg->cur);
		for (; cg->next && cg->next->thread == f->thread && cg->next->s == f->s; cg->next = rcur_next(&cg->cur)) {
			if (tp_grow((void **)&cg->g, &cg->cap, cg->n + 1, sizeof(*cg->g)))
				return -1;
			cg->g[cg->n++] = (struct cslot){ *cg->next, 0 };
		}
		if (cg->n > 1)
			sort_cslot(cg->g, cg->n);
	}
	if (f->kind == H_RUNTIME)
		return 0;
	size_t lo = 0, hi = cg->n;
	while (lo < hi) {	/* the first of f's name and end */
		size_t mid = lo + (hi - lo) / 2;
		const struct crec *c = &cg->g[mid].c;
		if (c->name < f->name || (c->name == f->name && c->e < f->e))
			lo = mid + 1;
		else
			hi = mid;
	}
	/* all of them are made from the first span of theirs: f, unless one was before it */
	for (q = lo; q < cg->n && !cg->g[q].used && cg->g[q].c.name == f->name && cg->g[q].c.e == f->e; q++) {
		const struct crec *c = &cg->g[q].c;
		cg->g[q].used = 1;
		if (!f->comm) {
			f->comm = 1;
			f->what = cwhat_of(an, c);
		}
		if (cg->gloo && gloo_made(an, c, w))
			return -1;
	}
	return 0;
}

static int is_gloo(const struct analysis *an, uint32_t name)
{
	return !strncmp(an->str(an->payload, name), "gloo:", 5);
}

/*
 * What a communication kernel's collective takes from the spans above its
 * launch, st[d - 1] (nearest) down to st[0]: the outermost communication
 * operator (a crec's span, or one an_op_is_comm() names), the nearest crec
 * that says what the collective is, the nearest nccl:* / gloo:* range.
 */
static struct chain chain_of(const struct analysis *an, const struct frame *st, size_t d)
{
	struct chain ch = { .top = -1, .name_kind = -1 };

	while (d-- > 0) {
		const struct frame *o = &st[d];
		const char *nm = an->str(an->payload, o->name);
		if (!o->comm && !an_op_is_comm(nm))
			continue;
		ch.top = (int32_t)o->pos;
		ch.top_s = o->s;
		if (!ch.src.says && o->comm && o->what.says)
			ch.src = o->what;
		if (ch.name_kind < 0 && (!strncmp(nm, "nccl:", 5) || !strncmp(nm, "gloo:", 5)))
			ch.name_kind = an_coll_kind(nm + 5);
	}
	return ch;
}

/* chain_of() kept for an External id's link (an->chains); UINT32_MAX - 1: out of memory */
static uint32_t add_chain(struct analysis *an, const struct frame *st, size_t d)
{
	if (tp_grow((void **)&an->chains, &an->chaincap, an->nchains + 1, sizeof(*an->chains)))
		return UINT32_MAX - 1;
	an->chains[an->nchains] = chain_of(an, st, d);
	return (uint32_t)an->nchains++;
}

/* An External id's link: the span f, its op and chain as given. */
static int add_link(struct analysis *an, uint32_t *slot, const struct frame *f, int32_t op, uint32_t chain)
{
	/* room for one per key of ext, made before the pass (link_gpu()) */
	if (chain == UINT32_MAX - 1 || an->nlinks == an->linkcap)
		return -1;
	an->links[an->nlinks] = (struct link){ .s = f->s, .thread = f->thread, .chain = chain };
	an->linkop[an->nlinks] = op;
	*slot = (uint32_t)an->nlinks++;
	return 0;
}

/* The link an id names in m (struct link); UINT32_MAX: none. */
static uint32_t link_by(const struct hmap *m, int64_t id)
{
	uint32_t j = id >= 0 ? hmap_get(m, (uint64_t)id) : UINT32_MAX;

	return j == NO_HOST ? UINT32_MAX : j;
}

/* a gloo:* span above st[d - 1] */
static int gloo_above(const struct analysis *an, const struct frame *st, size_t d)
{
	while (d-- > 0)
		if (is_gloo(an, st[d].name))
			return 1;
	return 0;
}

struct hcand {			/* a gloo:* operator with no gloo:* span above it, and its span's place */
	struct crec c;
	uint32_t pos;
};

/* c, made from the span on top of w's stack in the first pass: a gloo:* operator that may be a collective of its own */
static int gloo_made(struct analysis *an, const struct crec *c, const struct walk *w)
{
	if (!is_gloo(an, c->name) || gloo_above(an, w->st, w->depth - 1))
		return 0;
	if (tp_grow((void **)&an->hcand, &an->hcandcap, an->nhcand + 1, sizeof(*an->hcand)))
		return -1;
	an->hcand[an->nhcand++] = (struct hcand){ *c, w->st[w->depth - 1].pos };
	return 0;
}

/* id may be a communication kernel's correlation id (cc_build()) */
static int is_comm_corr(const struct analysis *an, int64_t id)
{
	size_t w;
	uint64_t m;

	if (cc_all || !an->nccorr)
		return cc_all;
	m = cc_mask(id, &w, an);
	return (an->ccset[w] & m) == m;
}

struct linking {
	struct analysis *an;
	struct cgroup cg;
	struct ival run[AN_IDLE];	/* per host category, the interval being extended (its thread's) */
	uint32_t thread[AN_IDLE];
	uint8_t has[AN_IDLE];
	struct tp_errbuf *err;
};

static void sync_call(struct analysis *an, int64_t s, int64_t e);

/*
 * The first pass: the host's busy time per category and its bounds
 * (breakdown()), the calls that wait for the GPU (step_syncs()), the
 * launches no GPU span names (gjoin_skip()), what the memory model needs
 * (the autograd threads, the optimizer steps), the crecs' spans, and the
 * runtime calls GPU spans name by correlation: the first of each id, with
 * the operator above it (not a runtime call) and, for communication
 * kernels, the chain above it (add_chain()).
 */
static int link_host(struct walk *w, const struct hrec *r)
{
	struct linking *lk = w->arg;
	struct analysis *an = lk->an;
	struct frame *f;
	struct ival *run;
	size_t d;
	uint16_t nc;
	int c;

	if (!r) {
		for (c = AN_COMM; c < AN_IDLE; c++)
			if (lk->has[c] && runs_add(&an->hc[c], &lk->run[c], lk->err))
				return -1;
		return 0;
	}
	if (!(f = walk_push(w, r)) || cls_of(an, r->name, &nc))
		return -1;
	/* each thread's run of overlapping spans of a category is one interval before the
	 * union across threads (a list of every span was 40 MiB for a 1 GB trace) */
	c = r->kind == H_RUNTIME ? AN_RUNTIME : r->kind == H_DATALOADER ? AN_DATALOADER :
	    (nc & N_COMM_SPAN) ? AN_COMM : AN_CPU;
	run = &lk->run[c];
	if (r->e > r->s) {
		if (lk->has[c] && lk->thread[c] == r->thread && r->s <= run->e) {
			if (r->e > run->e)
				run->e = r->e;
		} else {
			if (lk->has[c] && runs_add(&an->hc[c], run, lk->err))
				return -1;
			*run = (struct ival){ r->s, r->e };
			lk->has[c] = 1;
		}
		lk->thread[c] = r->thread;
	}
	if (r->kind == H_RUNTIME && r->e >= r->s && (nc & N_SYNC))
		sync_call(an, r->s, r->e);
	if (an->nmev) {
		f->ms = ms_flags(an, f);
		if (f->ms & MS_BACKWARD)
			an->bwd[r->thread] = 1;
		if (f->ms & MS_OPT_STEP) {
			if (tp_grow((void **)&an->opt, &an->optcap, an->nopt + 1, sizeof(*an->opt)) ||
			    tp_grow((void **)&an->opte, &an->optecap, an->nopt + 1, sizeof(*an->opte)))
				return -1;
			an->opt[an->nopt] = r->s;
			an->opte[an->nopt++] = r->e;
		}
	}
	if (cgroup_join(an, &lk->cg, w))
		return -1;
	if (r->kind != H_RUNTIME || r->id < 0)
		return 0;
	/* joined with the GPU spans its id names once the pass is done (struct gjoin) */
	struct lrec *l = runs_reserve(&an->lr, 1, lk->err);
	if (!l)
		return -1;
	*l = (struct lrec){ .corr = r->id, .s = r->s, .pos = f->pos, .op = -1, .launch = r->launch };
	for (d = w->depth - 1; d-- > 0;)	/* the operator its GPU spans count for: not a runtime call */
		if (w->st[d].kind != H_RUNTIME) {
			l->op = (int32_t)w->st[d].pos;
			break;
		}
	runs_commit(&an->lr, 1);
	if (is_comm_corr(an, r->id)) {	/* and with the communication kernels (collectives()) */
		struct ccall cl = { .corr = r->id, .s = r->s, .pos = f->pos, .thread = r->thread,
				    .ch = chain_of(an, w->st, w->depth - 1) };
		return runs_add(&an->cc, &cl, lk->err) ? -1 : 0;
	}
	return 0;
}

static int link_ext(struct walk *w, const struct hrec *r)
{
	struct linking *lk = w->arg;
	struct analysis *an = lk->an;
	struct frame *f;
	uint32_t *v;

	if (!r)
		return 0;
	if (!(f = walk_push(w, r)))
		return -1;
	if (cgroup_join(an, &lk->cg, w))
		return -1;
	if (r->kind == H_RUNTIME || r->id < 0 || !(v = hmap_find(&an->ext, (uint64_t)r->id)) || *v != NO_HOST)
		return 0;
	uint32_t ch = hmap_get(&an->cext, (uint64_t)r->id) != UINT32_MAX ? add_chain(an, w->st, w->depth) : UINT32_MAX;
	return add_link(an, v, f, (int32_t)f->pos, ch);
}

/* The steps (sorted by start) that start at or before instant t: [0, the result). */
static size_t steps_by(const struct analysis *an, int64_t t)
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
static int32_t step_at(const struct analysis *an, int64_t t)
{
	size_t lo = steps_by(an, t);

	return lo && t < an->cpu_steps[lo - 1].e ? (int32_t)(lo - 1) : -1;
}

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

static int gjoin_close(struct gjoin *j, struct tp_errbuf *err);

/* TP_OK, or the failure (j closed) */
static int gjoin_open(struct gjoin *j, struct analysis *an, int unrec, struct tp_errbuf *err)
{
	memset(j, 0, sizeof(*j));
	j->an = an;
	j->unrec = unrec;
	if (rcur_open(&j->g, &an->gr) || rcur_open(&j->l, &an->lr)) {
		j->nomem = 1;	/* unless a read failed, which gjoin_close() reports first */
		return gjoin_close(j, err);
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
		if (j->unrec && j->next->launch && an->ng && (k = step_at(an, j->next->s)) >= 0 &&
		    j->next->s > an->unrec[k])
			an->unrec[k] = j->next->s;
}

/* The next GPU span, j->linked and j->call its id's call; NULL at the end or on a failure. */
static const struct grec *gjoin_next(struct gjoin *j)
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

static int gjoin_close(struct gjoin *j, struct tp_errbuf *err)
{
	int e = j->g.err ? j->g.err : j->l.err;

	rcur_close(&j->g);
	rcur_close(&j->l);
	if (e) {
		errno = e;
		return spill_fail(err, "cannot read");
	}
	return j->nomem ? nomem(err) : TP_OK;
}

/* A span's operator and launch instant: its call's, else its External id's, else none and its start. */
static int32_t gpu_launch(const struct analysis *an, const struct gjoin *j, const struct grec *g, int64_t *t,
			  int *known)
{
	int32_t op = j->linked ? j->call.op : -1;
	uint32_t k = op < 0 ? link_by(&an->ext, g->ext) : UINT32_MAX;

	*t = j->linked ? j->call.s : k != UINT32_MAX ? an->links[k].s : g->s;
	*known = j->linked || k != UINT32_MAX;
	return op >= 0 || k == UINT32_MAX ? op : an->linkop[k];
}

static int cmp_i64(const void *a, const void *b);
static int gpu_owner(struct analysis *an, const struct gjoin *j, const struct grec *g, struct tp_errbuf *err);
static void owners_begin(struct analysis *an);
static int owners_end(struct analysis *an, struct tp_errbuf *err);

/* Closes c, and reports its read's failure, else (none failed) the one in err, else out of memory. */
static int rcur_fail(struct rcur *c, struct tp_errbuf *err)
{
	int e = c->err;

	rcur_close(c);
	if (!e)
		return err->rc ? err->rc : nomem(err);
	errno = e;
	return spill_fail(err, "cannot read");
}

/* A pass of link_host() or link_ext(), the communication operators met as it goes (struct cgroup). */
static int link_walk(struct analysis *an, visit_fn visit, struct tp_errbuf *err)
{
	struct linking lk = { .an = an, .err = err };
	int rc, e;

	if (cgroup_open(&lk.cg, an, visit == link_host)) {
		e = cgroup_close(&lk.cg);
		if (!e)
			return nomem(err);
		errno = e;
		return spill_fail(err, "cannot read");
	}
	rc = walk_all(an, visit, NULL, &lk, err);
	if ((e = cgroup_close(&lk.cg)) && !err->rc) {
		errno = e;
		return spill_fail(err, "cannot read");
	}
	return rc ? rc : e ? err->rc : TP_OK;
}

/* The External ids of the communication kernels: their links get a chain (link_ext()). */
static int comm_exts(struct analysis *an, struct tp_errbuf *err)
{
	const struct crec *k;
	struct rcur c;

	if (rcur_open(&c, &an->kcr))
		return rcur_fail(&c, err);
	while ((k = rcur_next(&c)))
		if (k->ext >= 0 && !hmap_put(&an->cext, (uint64_t)k->ext, 0))
			return rcur_fail(&c, err);	/* no read failed: out of memory */
	if (c.err)
		return rcur_fail(&c, err);
	rcur_close(&c);
	return TP_OK;
}

/*
 * The operator that launched each GPU span: its correlation id names the
 * runtime call (cudaLaunchKernel, ...), whose nearest enclosing operator is
 * the launcher. Traces where that fails (no runtime event kept) fall back
 * to the span's External id, which Kineto sets to the launching operator's.
 * The first pass writes the runtime calls with ids into runs by id, and the
 * GPU spans, in runs by id already, are joined with them (struct gjoin):
 * no map of ids (a map of every span's ids was 96 MiB at the peak of a
 * 1 GB trace), and no array of the spans (30 MiB).
 */
static int link_gpu(struct analysis *an, struct tp_errbuf *err)
{
	const struct grec *g;
	struct gjoin j;
	int rc;

	if ((rc = runs_seal(&an->gr, err)) || (rc = runs_seal(&an->hcr, err)) || (rc = runs_seal(&an->kcr, err)))
		return rc;
	if (an->nccorr) {
		struct rcur c;
		if (cc_build(an, &c))
			return rcur_fail(&c, err);
		rcur_close(&c);
	}
	an->lr.limit = run_records(an, sizeof(struct lrec));
	an->cc.limit = (run_records(an, sizeof(struct ccall)) + 3) / 4;
	/* the three fill at once; the host's collectives are few (a quarter of the room each cost
	 * 4.3 MiB more peak on the 1 GB bench trace: bench/results/finish_bench-20261128.txt) */
	for (int c = AN_RUNTIME; c < AN_IDLE; c++)
		an->hc[c].limit = (run_records(an, sizeof(struct ival)) + 2) / 3;
	an->hc[AN_COMM].limit = (run_records(an, sizeof(struct ival)) + 15) / 16;
	if ((rc = link_walk(an, link_host, err)) || (rc = runs_seal(&an->lr, err)) || (rc = runs_seal(&an->cc, err)))
		return rc;
	for (int c = AN_COMM; c < AN_IDLE; c++)
		if ((rc = runs_seal(&an->hc[c], err)))
			return rc;
	/*
	 * The launches no span names, the External ids to fall back on; and each
	 * span's step and operator (gpu_owner()), which stand unless a span falls
	 * back on its External id, known once the walk for them is done: then
	 * breakdown() joins again.
	 */
	owners_begin(an);
	if ((rc = gjoin_open(&j, an, 1, err)))
		return rc;
	while ((g = gjoin_next(&j))) {
		if (!an->ext.n && (rc = gpu_owner(an, &j, g, err))) {
			j.nomem = 1;
			break;
		}
		if ((!j.linked || j.call.op < 0) && g->ext >= 0) {
			if (!hmap_put(&an->ext, (uint64_t)g->ext, NO_HOST)) {
				j.nomem = 1;
				break;
			}
			widen(&an->xmin, &an->xmax, g->ext);
		}
	}
	if ((rc = gjoin_close(&j, err)))
		return rc;
	if (!an->ext.n)
		return owners_end(an, err);
	runs_free(&an->bs);
	runs_free(&an->gp);
	an->linkcap = an->ext.n;
	if (!(an->links = tp_malloc((an->linkcap + 1) * sizeof(*an->links))) ||
	    !(an->linkop = tp_malloc((an->linkcap + 1) * sizeof(*an->linkop))))
		return nomem(err);
	if ((rc = comm_exts(an, err)))
		return rc;
	return link_walk(an, link_ext, err);
}

/* b, or less, so that b - a fits in int64 (traces' times are untrusted) */
static int64_t fit_end(int64_t a, int64_t b)
{
	int64_t d;

	return __builtin_sub_overflow(b, a, &d) ? a + INT64_MAX : b;
}

static int cmp_srec(const void *a, const void *b)
{
	const struct srec *x = a, *y = b;

	if (x->s != y->s)
		return x->s < y->s ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}


/* ---- the third pass: operator tables, collectives' before_op, memory contexts ---- */

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

static int add_op(struct tables *t, uint32_t name, int device, int64_t self, int64_t total, uint64_t first,
		  uint32_t thread)
{
	struct analysis *an = t->an;
	uint32_t *slot = hmap_put(&t->m, (uint64_t)name * 2 + (uint64_t)device, (uint32_t)an->res.nops);
	struct an_op *o;

	if (!slot)
		return -1;
	if (*slot == an->res.nops) {
		if (tp_grow((void **)&an->res.ops, &an->opcap, an->res.nops + 1, sizeof(*o)) ||
		    tp_grow((void **)&t->first, &t->firstcap, an->res.nops + 1, sizeof(*t->first)) ||
		    tp_grow((void **)&t->fthread, &t->fthreadcap, an->res.nops + 1, sizeof(*t->fthread)))
			return -1;
		o = &an->res.ops[an->res.nops];
		*o = (struct an_op){ .name = name, .device = device };
		t->fthread[an->res.nops] = thread;
		t->first[an->res.nops++] = first;
	}
	o = &an->res.ops[*slot];
	o->calls++;
	o->self_ns = tp_sat_add(o->self_ns, self);
	o->total_ns = tp_sat_add(o->total_ns, total);
	if (first < t->first[*slot]) {
		t->first[*slot] = first;
		t->fthread[*slot] = thread;
	}
	return 0;
}

static void emit(struct walk *w, const struct row *r)
{
	struct tables *t = w->arg;
	struct analysis *an = t->an;

	an->res.thread_self_ns[r->thread] = tp_sat_add(an->res.thread_self_ns[r->thread], r->self);
	if (add_op(t, r->name, AN_DEV_CPU, r->self, r->total, 2 * (uint64_t)r->pos, r->thread) ||
	    (r->gtotal > 0 && r->kind != H_RUNTIME &&
	     add_op(t, r->name, AN_DEV_GPU, r->gself, r->gtotal, 2 * (uint64_t)r->pos + 1, r->thread)))
		w->nomem = 1;
}

/* An operator proper: not a runtime call, not a user annotation. */
static int is_op(const struct row *r)
{
	return r->kind != H_RUNTIME && !r->ann;
}

/*
 * A span's row, once its subtree is done. PyTorch's
 * EventList._remove_dup_nodes (key_averages()), which torch-tb-profiler's
 * op tree repeats: an operator whose only child (runtime calls aside) is an
 * operator of the same name is one call, not two. The child's self time and
 * the GPU time it launched go to the parent, and the child is no row of its
 * own; a child's row waits in its parent's frame until the parent knows
 * whether it has one child. Deepest first, so that a chain of three becomes
 * one. gtotal: the GPU time launched in the subtree.
 */
static void ops_pop(struct walk *w, struct frame *f, struct frame *p)
{
	struct row me;

	if (f->has_pend) {
		if (f->kids == 1 && is_op(&f->pend) && f->kind != H_RUNTIME && !f->ann && f->pend.name == f->name) {
			f->self += f->pend.self;
			f->gself = tp_sat_add(f->gself, f->pend.gself);
		} else {
			emit(w, &f->pend);
		}
	}
	me = (struct row){ .self = f->self, .total = f->e - f->s, .gself = f->gself, .gtotal = f->gtotal,
			   .pos = f->pos, .name = f->name, .thread = f->thread, .kind = f->kind, .ann = f->ann };
	if (p)
		p->gtotal = tp_sat_add(p->gtotal, f->gtotal);
	if (p && f->kind != H_RUNTIME && ++p->kids == 1) {
		p->pend = me;
		p->has_pend = 1;
		return;
	}
	emit(w, &me);
}

/*
 * A [memory] event's context: what was around it on its thread, from the
 * spans open there (w's stack, when its top is the last span of the event's
 * thread that starts at or before it) going out, past the ones that ended
 * before it.
 */
static void mem_context(struct tables *t, const struct walk *w, const struct mem_event *e, struct mem_ctx *c)
{
	size_t d;

	*c = (struct mem_ctx){ .top = -1 };
	if (e->thread >= t->an->threads.n)
		return;
	c->backward = t->an->bwd[e->thread];
	if (!w->depth || w->st[w->depth - 1].thread != e->thread)
		return;
	for (d = w->depth; d-- > 0;) {
		const struct frame *s = &w->st[d];
		if (s->e <= e->ts && !(s->e == s->s && s->s == e->ts))
			continue;
		c->flags |= s->ms;
		if (!(s->ms & MS_RUNTIME)) {
			if (!c->op) {
				c->op = 1;
				c->op_name = s->name;
			}
			if (!(s->ms & MS_ANNOTATION))
				c->top = (int32_t)s->pos;	/* the last one met is the outermost */
		}
		if (s->ms & MS_OPT_STEP) {
			c->opt = s->opt;
		}
	}
	if (c->flags & MS_BACKWARD)
		c->backward = 1;
}

/* The next window into t->win (t->has_win: one was left). */
static void window_read(struct tables *t)
{
	const struct analysis *an = t->an;
	const struct kcoll *k = t->wn;
	int64_t lo = INT64_MIN;
	int32_t st;

	if (!k) {
		t->has_win = 0;
		return;
	}
	/* the window before it on its thread (t->win, done) starts it */
	if (t->has_win && t->win.k.c.thread == k->c.thread)
		lo = t->win.k.c.launch_ns;
	t->has_win = 1;
	if ((st = step_at(an, k->c.launch_ns)) >= 0 && an->cpu_steps[st].s > lo)
		lo = an->cpu_steps[st].s;
	t->win = (struct window){ .k = *k, .lo = lo };
	t->wn = rcur_next(&t->wc);
}

/* t->win is final: into the result's runs (an->co), and the next read. -1: the write failed. */
static int window_done(struct tables *t)
{
	if (runs_add(&t->an->co, &t->win.k, t->err))
		return -1;
	window_read(t);
	return 0;
}

/*
 * an_coll.before_op: on the launching thread, from the thread's previous
 * collective launch (or the step's start, whichever is later) to this
 * launch, the top-level operator (no parent; not a collective, not a
 * runtime call) with the most time there, the first of equals. Top-level
 * spans do not overlap, and neither do a thread's windows (by launch), so
 * they are swept together, a window at a time: one that a span ends after
 * is final. -1: a write failed.
 */
static int before_op(struct tables *t, const struct frame *f)
{
	struct an_coll *c = &t->win.k.c;
	uint16_t nc;

	while (t->has_win && (c->thread < f->thread || (c->thread == f->thread && c->launch_ns <= f->s)))
		if (window_done(t))
			return -1;
	if (f->kind == H_RUNTIME || cls_of(t->an, f->name, &nc) || (nc & N_COMM_OP))
		return 0;
	while (t->has_win && c->thread == f->thread && t->win.lo < f->e) {
		int64_t a = f->s > t->win.lo ? f->s : t->win.lo, b = f->e < c->launch_ns ? f->e : c->launch_ns;
		if (b - a > c->before_ns) {
			c->before_op = f->name;
			c->before_ns = b - a;
		}
		if (c->launch_ns > f->e)
			break;	/* a later span may reach it */
		if (window_done(t))
			return -1;
	}
	return 0;
}

/* m goes before span r in the tables pass: the spans of its thread that start at or before it are up */
static inline int mev_before(const struct mem_event *m, const struct hrec *r)
{
	return m->thread < r->thread || (m->thread == r->thread && m->ts < r->s);
}

static int tables_visit(struct walk *w, const struct hrec *r)
{
	struct tables *t = w->arg;
	struct analysis *an = t->an;
	struct frame *f;

	/* each [memory] event with its context, into runs by device for the memory model */
	while (t->me && (!r || mev_before(t->me, r))) {
		struct mem_rec *o = runs_reserve(&an->d, 1, t->err);
		if (!o)
			return -1;
		o->ev = *t->me;
		mem_context(t, w, t->me, &o->ctx);
		runs_commit(&an->d, 1);
		t->me = rcur_next(&t->mc);
	}
	if (!r)
		return 0;
	if (!(f = walk_push(w, r)))
		return -1;
	f->self = f->end - f->s;
	f->gself = 0;
	f->kids = 0;
	f->has_pend = 0;
	if (w->depth > 1)
		w->st[w->depth - 2].self -= f->end - f->s;
	while (t->gn && t->gn->pos < f->pos)
		t->gn = rcur_next(&t->gc);
	for (; t->gn && t->gn->pos == f->pos; t->gn = rcur_next(&t->gc))
		f->gself = tp_sat_add(f->gself, t->gn->dur);
	f->gtotal = f->gself;
	if (an->nmev && (f->ms = ms_flags(an, f)) & MS_OPT_STEP)
		f->opt = ++t->nopt;	/* the first pass met them in this order too */
	return w->depth == 1 && t->has_win ? before_op(t, f) : 0;
}

struct opfirst {
	uint64_t first;
	uint32_t i;
};

static int cmp_opfirst(const void *a, const void *b)
{
	const struct opfirst *x = a, *y = b;

	return (x->first > y->first) - (x->first < y->first);
}

/* ops[] in the order its rows first came (the order of a walk over the sorted spans), and where (analysis_merge()) */
static int order_ops(struct analysis *an, const uint64_t *first, const uint32_t *thread)
{
	size_t i, n = an->res.nops;
	struct opfirst *o = tp_malloc((n + 1) * sizeof(*o));
	struct an_op *v = tp_malloc((n + 1) * sizeof(*v));

	an->opfirst = tp_malloc((n + 1) * sizeof(*an->opfirst));
	an->opthread = tp_malloc((n + 1) * sizeof(*an->opthread));
	if (!o || !v || !an->opfirst || !an->opthread) {
		tp_free(o);
		tp_free(v);
		return -1;
	}
	for (i = 0; i < n; i++)
		o[i] = (struct opfirst){ first[i], (uint32_t)i };
	if (n > 1)
		qsort(o, n, sizeof(*o), cmp_opfirst);
	for (i = 0; i < n; i++) {
		v[i] = an->res.ops[o[i].i];
		an->opfirst[i] = o[i].first;
		an->opthread[i] = thread[o[i].i];
	}
	tp_free(an->res.ops);
	an->res.ops = v;
	an->opcap = n + 1;
	tp_free(o);
	return 0;
}
/*
 * The incomplete steps, once every step's GPU work is known (none when no
 * step launched any): one that launched none, or one that launched kernels
 * no GPU span names after last, the latest launch one names (the GPU
 * records stop while the launches go on; a record missing in the middle is
 * not a cut). unrec_ns: each step's latest launch that no GPU span names
 * (gjoin_skip()).
 */
static void mark_incomplete(struct an_step *v, size_t n, int64_t last)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += v[i].gpu_calls > 0;
	for (i = 0; i < n; i++)
		v[i].incomplete = !k ? AN_COMPLETE : !v[i].gpu_calls ? AN_INC_NO_GPU
			: v[i].unrec_ns > last ? AN_INC_CUT : AN_COMPLETE;
}

/*
 * The step that launched each GPU span: the one whose CPU span holds the
 * runtime call its correlation id names, else the operator its External id
 * names (traces that kept no runtime event), else the span's own start
 * (gpu_launch()); none when that instant is in no step (steps_prepare()
 * sorted them). Into runs by step for breakdown(), with, into runs by place
 * for the tables pass, the GPU time each operator launched itself; gend[k]:
 * the latest end of step k's spans, glast: the latest launch instant.
 */
static int gpu_owner(struct analysis *an, const struct gjoin *j, const struct grec *g, struct tp_errbuf *err)
{
	int64_t t;
	int known;
	int32_t op = gpu_launch(an, j, g, &t, &known), st = 0;
	int rc;

	if (!an->whole) {
		st = step_at(an, t);
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

/* gpu_owner()'s records, none yet: room for them */
static void owners_begin(struct analysis *an)
{
	runs_free(&an->bs);
	runs_free(&an->gp);
	runs_free(&an->ub);
	an->bs.limit = run_records(an, sizeof(struct brec));
	an->gp.limit = run_records(an, sizeof(struct gpair));
	an->ub.limit = run_records(an, sizeof(int64_t));
	an->glast = INT64_MIN;
	for (size_t i = 0; i < an->ncs; i++) {
		an->gend[i] = INT64_MIN;
		an->gfirst[i] = INT64_MAX;
	}
	an->owned = 0;
}

static int owners_end(struct analysis *an, struct tp_errbuf *err)
{
	int rc = runs_seal(&an->bs, err);

	if (!rc)
		rc = runs_seal(&an->gp, err);
	if (!rc)
		rc = runs_seal(&an->ub, err);
	an->owned = !rc;
	return rc;
}

/* gpu_owner() for every span, in a join of its own (link_gpu()'s first join could not: see there) */
static int gpu_owners(struct analysis *an, struct tp_errbuf *err)
{
	const struct grec *g;
	struct gjoin j;
	int rc = TP_OK, jrc;

	owners_begin(an);
	if ((rc = gjoin_open(&j, an, 0, err)))
		return rc;
	while (!rc && (g = gjoin_next(&j)))
		rc = gpu_owner(an, &j, g, err);
	jrc = gjoin_close(&j, err);
	if (rc || jrc)
		return rc ? rc : jrc;
	return owners_end(an, err);
}

/* The steps in start order; a trace with none is one step, whole. */
static int steps_prepare(struct analysis *an)
{
	if (!an->ncs && (an->nh || an->ng)) {	/* the whole trace, as one step */
		int64_t a = an->hmin < an->gmin ? an->hmin : an->gmin, b = an->hmax > an->gmax ? an->hmax : an->gmax;
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, 1, sizeof(*an->cpu_steps)))
			return -1;
		an->cpu_steps[an->ncs++] = (struct srec){ .step = 0, .s = a, .e = fit_end(a, b) };
		an->whole = 1;
	}
	if (an->ncs > 1)
		qsort(an->cpu_steps, an->ncs, sizeof(*an->cpu_steps), cmp_srec);
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
static void sync_call(struct analysis *an, int64_t s, int64_t e)
{
	size_t lo = steps_by(an, s);

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
/* Each step's runtime calls that wait for the GPU (sync_call()). */
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
		return an->whole || !an->ncs ? TP_OK : nomem(err);
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
		rc = rcur_fail(&c, err);
		goto out;
	}
	e = n ? rcur_next(&c) : NULL;
	for (i = 0; i < n; i++) {
		for (; e && *e < an->gfirst[first[i]]; e = rcur_next(&c))
			last = *e;
		out[first[i]] = last;
	}
	if (c.err)
		rc = rcur_fail(&c, err);
	else
		rcur_close(&c);
out:
	tp_free(first);
	runs_free(&an->ub);
	return rc;
}

static int breakdown(struct analysis *an, struct tp_errbuf *err)
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
	if (!an->owned && (rc = gpu_owners(an, err)))
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
		if (hunion_open(&hu[c], &an->hc[c]))
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
		prev_end = b = fit_end(a, b);
		*st = (struct an_step){ .step = s->step, .start_ns = a, .dur_ns = b - a, .cpu_dur_ns = s->e - s->s,
					.whole_trace = whole };
		for (c = AN_KERNEL; c <= AN_COMM; c++)
			cat[c].n = 0;
		for (; br && br->step == (int32_t)i; br = rcur_next(&bc)) {
			st->gpu_calls++;
			if (ivals_add(&cat[br->cat], br->s > a ? br->s : a, br->e < b ? br->e : b))
				goto out;
		}
		if (bc.err)
			goto out;
		cum.n = 0;
		for (c = 0; c < AN_IDLE; c++) {
			/* the step's own GPU work, or the host's in its span */
			const struct ivals *x = c < AN_COMM ? &cat[c] : &win;
			if (c <= AN_COMM)
				ivals_union(&cat[c]);
			if (c >= AN_COMM && hunion_window(&hu[c], a, b, &win))
				goto out;
			if (c == AN_COMM) {	/* its communication kernels, and the host's collectives */
				if (merge_measure(&cat[c], &win, &comm, &len))
					goto out;
				x = &comm;
			}
			if (merge_measure(&cum, x, &tmp, &len))
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
		if (clen && merge_measure(&cat[AN_KERNEL], &cat[AN_COMM], &tmp, &len))
			goto out;
		st->comm_overlap_ns = clen ? klen - (len - clen) : 0;	/* no overflow: len >= clen, len - clen <= klen */
		st->gpu_busy_ns = clen ? len : klen;
	}
	for (c = AN_COMM; c < AN_IDLE; c++)
		if (hu[c].c.err)
			goto out;
	step_syncs(an);
	if (!whole)
		mark_incomplete(an->res.steps, an->res.nsteps, last);
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
		return nomem(err);
	return rc ? err->rc : TP_OK;
}

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
		return rcur_fail(&kc, err);
	if (rcur_open(&cc, &an->cc)) {
		rcur_close(&kc);
		return rcur_fail(&cc, err);
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
		} else if ((j = link_by(&an->ext, k->ext)) != UINT32_MAX) {
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
			.own = (uint8_t)own, .own_bytes = own ? coll_bytes(an, k) : -1,
		};
		if ((rc = runs_add(out, &r, err))) {
			rcur_close(&kc);
			rcur_close(&cc);
			return rc;
		}
	}
	if (kc.err || cc.err) {
		rcur_close(kc.err ? &cc : &kc);
		return rcur_fail(kc.err ? &kc : &cc, err);
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
	int32_t st = step_at(an, k->s);

	if (kind < 0)
		kind = an_coll_kind(an->str(an->payload, k->name) + 5);
	struct kcoll c = { .made = 1ULL << 32 | k->ord, .c = {
		.step = st >= 0 ? an->cpu_steps[st].step : -1, .kind = kind < 0 ? AN_CK_OTHER : kind,
		.pg = k->pg, .seq = k->seq, .launch_ns = k->s, .start_ns = k->s, .end_ns = k->e,
		.time_ns = k->e - k->s, .bytes = coll_bytes(an, k), .group_size = k->gsize > 0 ? k->gsize : 0,
		.thread = k->thread,
	} };
	return runs_add(out, &c, err);
}

/* The collective of an instance's first kernel (struct kjoin), its kernels added by coll_add(). */
static struct kcoll coll_new(const struct analysis *an, const struct kjoin *k)
{
	int32_t st = step_at(an, k->launch);

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
		return rcur_fail(&cur, err);
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
		return rcur_fail(&cur, err);
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

	runs_init(&kj, sizeof(struct kjoin), (run_records(an, sizeof(struct kjoin)) + 3) / 4, "comm", kjoin_order,
		  kjoin_sort);
	an->cw.limit = an->co.limit = (run_records(an, sizeof(struct kcoll)) + 3) / 4;
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
static struct mem_input mem_input_of(struct analysis *an)
{
	return (struct mem_input){ .opt_starts = an->opt, .opt_ends = an->opte, .nopt = an->nopt, .recs = &an->d,
				   .str = an->str, .payload = an->payload };
}

/*
 * The passes. Host spans come back sorted by thread and start (runs.h),
 * nested on a stack as they come (struct walk): a first pass writes the
 * runtime calls GPU spans' ids may name, which the GPU spans are joined with
 * (link_gpu()); breakdown() and collectives() work from that; a third pass
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
	if (!(an->bwd = tp_calloc(an->threads.n + 1, 1)) || steps_prepare(an))
		goto fail;
	if ((rc = link_gpu(an, err)) || (rc = breakdown(an, err)))
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
		window_read(&t);
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
		if ((rc = mev_threads(an, err)))
			goto fail;
		if (rcur_open(&t.mc, &an->m)) {
			rc = TP_ERR_NOMEM;
			goto fail;
		}
		an->d.limit = run_records(an, sizeof(struct mem_rec));
		t.me = rcur_next(&t.mc);
	}
	if (rcur_open(&t.gc, &an->gp)) {
		rc = t.gc.err ? TP_ERR_IO : TP_ERR_NOMEM;
		goto fail;
	}
	t.gn = rcur_next(&t.gc);
	if ((rc = walk_all(an, tables_visit, ops_pop, &t, err))) {
		rc = err->rc ? err->rc : rc;
		goto fail;
	}
	while (t.has_win)	/* the windows no span reached */
		if (window_done(&t)) {
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
	if (order_ops(an, t.first, t.fthread))
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
		struct mem_input in = mem_input_of(an);
		if ((rc = mem_infer(&in, &an->mem, &an->res.mem_series, &an->res.nmem_series, err)))
			goto fail;
		runs_free(&an->d);	/* the series replay from a file of their own */
	}
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
		return nomem(err);
	return rc && err->rc ? err->rc : rc;	/* the first failure's, which err keeps */
}

/* ---- parts (analysis.h) ---- */

void analysis_set_part(struct analysis *an)
{
	an->part = 1;
}

void analysis_bounds(const struct analysis *an, int64_t *lo, int64_t *hi)
{
	*lo = an->tlo;
	*hi = an->thi;
}

size_t analysis_steps(const struct analysis *an)
{
	return an->ncs;
}

void analysis_step_span(const struct analysis *an, size_t i, int64_t *start, int64_t *end)
{
	*start = an->cpu_steps[i].s;
	*end = an->cpu_steps[i].e;
}

/* A part numbering threads as threads says and adding to kt's kernel table (NULL: none). */
static struct analysis *new_seeded(const struct analysis *like, const struct hmap *threads, const struct analysis *kt,
				   struct tp_errbuf *err)
{
	struct analysis *f = analysis_new(like->str, like->payload);

	if (!f) {
		nomem(err);
		return NULL;
	}
	analysis_set_run(f, like->h.limit);
	f->part = 1;
	if (hmap_copy(&f->threads, threads) ||
	    (kt && (hmap_copy(&f->kmap, &kt->kmap) ||
		    dup_array(&f->res.kernels, kt->res.kernels, kt->res.nkernels, sizeof(*kt->res.kernels))))) {
		analysis_free(f);
		nomem(err);
		return NULL;
	}
	if (kt)
		f->res.nkernels = f->kcap = kt->res.nkernels;
	return f;
}

struct analysis *analysis_new_after(const struct analysis *prev, struct tp_errbuf *err)
{
	struct analysis *f;

	if (!prev->finished || !prev->part || prev->nparts) {
		tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "analysis_new_after: not a finished part");
		return NULL;
	}
	if (!(f = new_seeded(prev, &prev->threads, prev, err)))
		return NULL;
	f->has_prev = prev->ncs > 0 && !prev->whole;
	f->prev_step = prev->last_step;
	f->seeded = prev->threads.n;
	return f;
}

struct analysis *analysis_new_like(const struct analysis *an, const struct analysis *kt, struct tp_errbuf *err)
{
	struct analysis *f;

	if (an->finishing || (kt && !kt->finished)) {
		tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "analysis_new_like: finished, or a table not");
		return NULL;
	}
	if (!(f = new_seeded(an, &an->threads, kt, err)))
		return NULL;
	f->part = an->part;
	f->has_prev = an->has_prev;
	f->prev_step = an->prev_step;
	f->seeded = an->seeded;
	return f;
}

/* Where a merge's op i first came, to order the merge's rows as one walk over all parts would. */
struct opkey {
	uint32_t thread, part;
	uint64_t first;
};

static struct opkey opkey_of(const struct analysis *an, size_t i, uint32_t part)
{
	return (struct opkey){ an->opthread[i], an->oppart ? an->oppart[i] : part, an->opfirst[i] };
}

static int opkey_less(const struct opkey *x, const struct opkey *y)
{
	if (x->thread != y->thread)
		return x->thread < y->thread;
	return x->part != y->part ? x->part < y->part : x->first < y->first;
}

struct oprow {
	struct an_op op;
	struct opkey key;
};

static int cmp_oprow(const void *a, const void *b)
{
	const struct oprow *x = a, *y = b;

	return opkey_less(&x->key, &y->key) ? -1 : opkey_less(&y->key, &x->key);
}

/* The operator rows of a (a merge; NULL: none) and b (a part), summed by name and device, into out's. */
static int merge_ops(struct analysis *out, const struct analysis *a, const struct analysis *b)
{
	size_t na = a ? a->res.nops : 0, n = 0, i;
	struct oprow *v = tp_malloc((na + b->res.nops + 1) * sizeof(*v));
	struct hmap m = { 0 };
	int rc = -1;

	if (!v)
		return -1;
	for (i = 0; i < na; i++) {
		const struct an_op *o = &a->res.ops[i];
		if (!hmap_put(&m, (uint64_t)o->name * 2 + (uint64_t)o->device, (uint32_t)n))
			goto out;
		v[n++] = (struct oprow){ *o, opkey_of(a, i, 0) };
	}
	for (i = 0; i < b->res.nops; i++) {
		const struct an_op *o = &b->res.ops[i];
		struct opkey k = opkey_of(b, i, a ? a->nparts : 0);
		uint32_t *slot = hmap_put(&m, (uint64_t)o->name * 2 + (uint64_t)o->device, (uint32_t)n);
		if (!slot)
			goto out;
		if (*slot == n) {
			v[n++] = (struct oprow){ *o, k };
			continue;
		}
		struct oprow *r = &v[*slot];
		r->op.calls += o->calls;
		r->op.self_ns = tp_sat_add(r->op.self_ns, o->self_ns);
		r->op.total_ns = tp_sat_add(r->op.total_ns, o->total_ns);
		if (opkey_less(&k, &r->key))
			r->key = k;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_oprow);
	struct an_op *ops = tp_malloc((n + 1) * sizeof(*ops));
	uint64_t *first = tp_malloc((n + 1) * sizeof(*first));
	uint32_t *thread = tp_malloc((n + 1) * sizeof(*thread)), *part = tp_malloc((n + 1) * sizeof(*part));
	if (!ops || !first || !thread || !part) {
		tp_free(ops), tp_free(first), tp_free(thread), tp_free(part);
		goto out;
	}
	for (i = 0; i < n; i++) {
		ops[i] = v[i].op;
		first[i] = v[i].key.first;
		thread[i] = v[i].key.thread;
		part[i] = v[i].key.part;
	}
	/* out may be a: its rows are read by now (the caller frees a's) */
	out->res.ops = ops;
	out->opfirst = first;
	out->opthread = thread;
	out->oppart = part;
	out->res.nops = n;
	out->opcap = n + 1;
	rc = 0;
out:
	hmap_free(&m);
	tp_free(v);
	return rc;
}

/* b's [memory] events as one analysis of all parts places them: after a's spans, optimizer steps, events */
struct memfix {
	int64_t pos;
	uint32_t opt, ord;
};

/*
 * And, read back for the memory model, their threads and backward as all the
 * parts know them: a thread with no spans in its part (MEM_NO_SPANS | its index
 * in the merge's mkeys, add_part_recs()) may have some in another.
 */
static void mem_resolve(void *ctx, void *recs, size_t n)
{
	const struct analysis *o = ctx;
	struct mem_rec *r = recs;

	for (size_t i = 0; i < n; i++) {
		uint32_t t = r[i].ev.thread;
		if (t != UINT32_MAX && (t & MEM_NO_SPANS) && (t & ~MEM_NO_SPANS) < o->nmkeys)
			t = hmap_get(&o->threads, o->mkeys[t & ~MEM_NO_SPANS]);
		/* mem_context(): the thread's, or what encloses it in backward */
		r[i].ctx.backward = t < o->threads.n && (o->bwd[t] || (r[i].ctx.flags & MS_BACKWARD));
	}
}

/*
 * b's collectives and [memory] events (placed after a's: f) into o's runs, not
 * sealed; and, while *fed, the events as o resolves them to feed, o's memory
 * model going on (*fed 0 when one is before those it has).
 */
static int add_part_recs(struct analysis *o, const struct analysis *b, const struct memfix *f,
			 struct mem_model *feed, int *fed, struct tp_errbuf *err)
{
	struct mem_input in = mem_input_of(o);
	const void *p;
	struct rcur c;
	int rc = TP_OK;

	if (rcur_open(&c, &b->co))
		return rcur_fail(&c, err);
	while (!rc && (p = rcur_next(&c)))
		rc = runs_add(&o->co, p, err);
	if (rc || c.err)
		return rc ? (rcur_close(&c), rc) : rcur_fail(&c, err);
	rcur_close(&c);
	if (!b->nmev)
		return TP_OK;
	if (rcur_open(&c, &b->d))
		return rcur_fail(&c, err);
	while ((p = rcur_next(&c))) {
		struct mem_rec *r = runs_reserve(&o->d, 1, err);
		if (!r) {
			rcur_close(&c);
			return err->rc;
		}
		*r = *(const struct mem_rec *)p;
		uint32_t t = r->ev.thread;
		if (t != UINT32_MAX && (t & MEM_NO_SPANS) && (t & ~MEM_NO_SPANS) < b->nmkeys) {	/* by the merge's index */
			uint64_t key = b->mkeys[t & ~MEM_NO_SPANS];
			if (mem_thread_key(o, key)) {
				rcur_close(&c);
				return nomem(err);
			}
			r->ev.thread = MEM_NO_SPANS | hmap_get(&o->mthreads, key);
		}
		if (r->ctx.top >= 0)
			r->ctx.top = (int32_t)(r->ctx.top + f->pos);
		if (r->ctx.opt)
			r->ctx.opt += f->opt;
		r->ev.ord += f->ord;
		if (*fed) {
			struct mem_rec x = *r;
			mem_resolve(o, &x, 1);
			if ((rc = mem_model_add(feed, &in, &x, err)) == TP_ERR_UNSUPPORTED)
				*fed = 0, rc = TP_OK;
			if (rc) {
				rcur_close(&c);
				return rc;
			}
		}
		runs_commit(&o->d, 1);
	}
	if (c.err)
		return rcur_fail(&c, err);
	rcur_close(&c);
	return TP_OK;
}

/* [lo1, hi1] and [lo2, hi2] (empty when lo > hi) share nothing */
static int apart(int64_t lo1, int64_t hi1, int64_t lo2, int64_t hi2)
{
	return lo1 > hi1 || lo2 > hi2 || hi1 < lo2 || hi2 < lo1;
}

/* What parts_meet() asks of a and b besides b's collectives. */
static int follows(const struct analysis *a, const struct analysis *b)
{
	int64_t pos;

	return b->has_prev && b->prev_step == a->last_step && b->seeded == a->threads.n && a->thi < b->tlo &&
	       (a->cmax == INT64_MIN || b->cmin == INT64_MAX || a->cmax < b->cmin) &&
	       /* (an operator's External id is not always above those before it: the autograd thread's) */
	       apart(a->xmin, a->xmax, b->emin, b->emax) && apart(b->xmin, b->xmax, a->emin, a->emax) &&
	       (a->ng > 0) == (b->ng > 0) && (a->nmev > 0) == (b->nmev > 0) &&
	       !__builtin_add_overflow((int64_t)a->nh, (int64_t)b->nh, &pos) && pos <= INT32_MAX;
}

/* b may follow a (a merge; NULL: none): nothing crosses from one to the other */
static int parts_meet(const struct analysis *a, const struct analysis *b, struct tp_errbuf *err)
{
	struct rcur c;
	const struct kcoll *k;
	int outside = 0;

	if (!b->finished || !b->part || b->nparts || b->whole || !b->ncs || (a && (!a->finished || !a->part)))
		goto no;
	if (!a) {
		if (b->has_prev)
			goto no;
		return TP_OK;
	}
	if (!follows(a, b))
		goto no;
	/* one of b's collectives outside a step could look back into a (before_op()) */
	if (rcur_open(&c, &b->co))
		return rcur_fail(&c, err);
	while ((k = rcur_next(&c)) && !outside)
		outside = k->c.step < 0;
	if (c.err)
		return rcur_fail(&c, err);
	rcur_close(&c);
	if (!outside)
		return TP_OK;
no:
	return tp_fail(err, TP_ERR_UNSUPPORTED, "parts_overlap", "the parts do not follow one another");
}

int analysis_follows(const struct analysis *a, const struct analysis *b)
{
	struct tp_errbuf err = { 0 };

	return !a->nparts && parts_meet(a, b, &err) == TP_OK;
}

/*
 * What o (a merge, or new) takes of a (o itself, a merge, or NULL) and b: steps, operator
 * rows, threads' self time and backward, optimizer steps, counts and bounds, and b's
 * kernel table and thread numbers (theirs so far); not the collectives and [memory]
 * events themselves (add_part_recs()).
 */
static int combine(struct analysis *o, const struct analysis *a, const struct analysis *b)
{
	size_t na = a ? a->res.nsteps : 0, nt = b->res.nthreads, i;
	struct an_op *ops = o->res.ops;
	uint64_t *first = o->opfirst;
	uint32_t *thread = o->opthread, *part = o->oppart;
	struct an_kernel *kernels = NULL;
	struct hmap threads = { 0 }, kmap = { 0 };
	int64_t *self;
	uint8_t *bwd;

	if (!(self = tp_calloc(nt + 1, sizeof(*self))))
		return -1;
	if (!(bwd = tp_calloc(b->threads.n + 1, 1))) {
		tp_free(self);
		return -1;
	}
	struct an_step *st = tp_malloc((na + b->res.nsteps + 1) * sizeof(*st));
	int64_t *opt = tp_malloc(((a ? a->nopt : 0) + b->nopt + 1) * sizeof(*opt));
	int64_t *opte = tp_malloc(((a ? a->nopt : 0) + b->nopt + 1) * sizeof(*opte));
	if (!st || !opt || !opte || hmap_copy(&threads, &b->threads) || hmap_copy(&kmap, &b->kmap) ||
	    dup_array(&kernels, b->res.kernels, b->res.nkernels, sizeof(*kernels)) || merge_ops(o, a, b)) {
		tp_free(st), tp_free(opt), tp_free(opte), tp_free(self), tp_free(bwd), tp_free(kernels);
		hmap_free(&threads);
		hmap_free(&kmap);
		return -1;
	}
	if (o == a) {	/* merge_ops() made o's rows anew */
		tp_free(ops), tp_free(first), tp_free(thread), tp_free(part);
	}
	/* steps, in start order: a's end before b's begin */
	if (na)
		memcpy(st, a->res.steps, na * sizeof(*st));
	if (b->res.nsteps)
		memcpy(st + na, b->res.steps, b->res.nsteps * sizeof(*st));
	for (i = 0; i < nt; i++)
		self[i] = tp_sat_add(b->res.thread_self_ns[i], a && i < a->res.nthreads ? a->res.thread_self_ns[i] : 0);
	for (i = 0; i < b->threads.n; i++)
		bwd[i] = (b->bwd && b->bwd[i]) || (a && a->bwd && i < a->threads.n && a->bwd[i]);
	if (a && a->nopt) {
		memcpy(opt, a->opt, a->nopt * sizeof(*opt));
		memcpy(opte, a->opte, a->nopt * sizeof(*opte));
	}
	if (b->nopt) {	/* after a's: add_part_recs() counts b's so */
		memcpy(opt + (a ? a->nopt : 0), b->opt, b->nopt * sizeof(*opt));
		memcpy(opte + (a ? a->nopt : 0), b->opte, b->nopt * sizeof(*opte));
	}
	/* the counts and bounds, from a's before o (which may be a) takes them */
	o->nh = (a ? a->nh : 0) + b->nh;
	o->ng = (a ? a->ng : 0) + b->ng;
	o->nmev = (a ? a->nmev : 0) + b->nmev;
	o->nopt = o->optcap = o->optecap = (a ? a->nopt : 0) + b->nopt;
	o->tlo = a ? a->tlo : b->tlo;
	o->thi = b->thi;
	o->cmin = a && a->cmin != INT64_MAX ? a->cmin : b->cmin;
	o->cmax = b->cmax != INT64_MIN ? b->cmax : a ? a->cmax : INT64_MIN;
	o->emin = a && a->emin < b->emin ? a->emin : b->emin;
	o->emax = a && a->emax > b->emax ? a->emax : b->emax;
	o->xmin = a && a->xmin < b->xmin ? a->xmin : b->xmin;
	o->xmax = a && a->xmax > b->xmax ? a->xmax : b->xmax;
	o->glast = a && a->glast > b->glast ? a->glast : b->glast;
	o->last_step = b->last_step;
	o->nparts = (a ? a->nparts : 0) + 1;
	o->res.ncolls = (a ? a->res.ncolls : 0) + b->res.ncolls;
	tp_free(o->res.steps), tp_free(o->res.thread_self_ns), tp_free(o->bwd), tp_free(o->opt), tp_free(o->opte);
	tp_free(o->res.kernels);
	hmap_free(&o->threads);
	hmap_free(&o->kmap);
	o->res.steps = st;
	o->res.nsteps = na + b->res.nsteps;
	mark_incomplete(o->res.steps, o->res.nsteps, o->glast);
	o->res.thread_self_ns = self;
	o->res.nthreads = nt;
	o->bwd = bwd;
	o->opt = opt;
	o->opte = opte;
	o->threads = threads;
	o->kmap = kmap;
	o->res.kernels = kernels;
	o->res.nkernels = o->kcap = b->res.nkernels;
	return 0;
}

/* a new merge, empty, for parts like b */
static struct analysis *merge_new(const struct analysis *b)
{
	struct analysis *o = analysis_new(b->str, b->payload);

	if (o) {
		o->part = o->finished = 1;
		o->mwent = -1;
		o->co.limit = b->co.limit;
		o->d.limit = b->d.limit;
	}
	return o;
}

/*
 * a's memory model goes on in o, which takes b after a, as the model of all
 * of o's events would: a's events resolve their threads in o as they did in a
 * (mem_resolve()). The rest holds as the parts meet (parts_meet()): a's bounds
 * take its [memory] events, so b's events and optimizer steps (a free's
 * category asks for the first step after its allocation) all come after a's.
 */
static int model_holds(const struct analysis *a, const struct analysis *o)
{
	size_t i;

	if (!a->mm)
		return 0;
	for (i = 0; i < a->mmnt; i++)
		if ((i < o->threads.n && o->bwd && o->bwd[i]) != a->mmbwd[i])
			return 0;
	for (i = 0; i < a->mmnk; i++)
		if (i >= o->nmkeys || hmap_get(&o->threads, o->mkeys[i]) != a->mmres[i])
			return 0;
	return 1;
}

/* What o's model resolved its events' threads with, for model_holds() */
static int model_mark(struct analysis *o)
{
	uint8_t *bwd = tp_calloc(o->threads.n + 1, 1);
	uint32_t *res = tp_malloc((o->nmkeys + 1) * sizeof(*res));
	size_t i;

	if (!bwd || !res) {
		tp_free(bwd);
		tp_free(res);
		return -1;
	}
	for (i = 0; i < o->threads.n; i++)
		bwd[i] = o->bwd && o->bwd[i];
	for (i = 0; i < o->nmkeys; i++)
		res[i] = hmap_get(&o->threads, o->mkeys[i]);
	tp_free(o->mmbwd);
	tp_free(o->mmres);
	o->mmbwd = bwd;
	o->mmres = res;
	o->mmnt = o->threads.n;
	o->mmnk = o->nmkeys;
	return 0;
}

/* o's memory model made again from all its events (o->d, unsealed; kept) */
static int model_build(struct analysis *o, struct tp_errbuf *err)
{
	struct mem_input in = mem_input_of(o);
	struct runs d;
	struct rcur c;
	const struct mem_rec *x;
	int rc;

	mem_model_free(o->mm);
	o->mm = NULL;
	if ((rc = runs_fork(&d, &o->d, err)))
		return rc;
	if ((rc = runs_seal(&d, err)) || !(o->mm = mem_model_new())) {
		runs_free(&d);
		return rc ? rc : nomem(err);
	}
	d.fix = mem_resolve;
	d.fixctx = o;
	if (!d.nruns)
		mem_resolve(o, d.buf, d.n);
	if (rcur_open(&c, &d)) {
		runs_free(&d);
		return rcur_fail(&c, err);
	}
	while (!rc && (x = rcur_next(&c)))
		if ((rc = mem_model_add(o->mm, &in, x, err)) == TP_ERR_UNSUPPORTED)	/* sorted: not so */
			rc = tp_fail(err, TP_ERR_IO, NULL, "memory model: events out of order");
	if (!rc && c.err)
		rc = rcur_fail(&c, err);
	else
		rcur_close(&c);
	runs_free(&d);
	return rc ? rc : mem_model_sync(o->mm, err);
}

int analysis_absorb(struct analysis **acc, const struct analysis *b, struct tp_errbuf *err)
{
	struct analysis *a = *acc, *o = a;
	struct memfix f = { 0 };
	int rc, fed;

	if ((rc = parts_meet(a, b, err)))
		return rc;
	if (a)
		f = (struct memfix){ (int64_t)a->nh, (uint32_t)a->nopt, (uint32_t)a->nmev };
	if (!o && !(o = merge_new(b)))
		return nomem(err);
	if (combine(o, a, b)) {
		rc = nomem(err);
		goto fail;
	}
	/* the memory model of the parts so far goes on with b's events, or is made again */
	fed = o->nmev && (a && a->nmev ? model_holds(a, o) : (o->mm = mem_model_new()) != NULL);
	if ((rc = add_part_recs(o, b, &f, o->mm, &fed, err)))
		goto fail;
	if (o->nmev) {
		rc = fed ? mem_model_sync(o->mm, err) : model_build(o, err);
		o->mwent = fed;
		if (!rc && model_mark(o))
			rc = nomem(err);
		if (rc)
			goto fail;
	}
	*acc = o;
	return TP_OK;
fail:	/* a is left half way: dropped */
	if (o != a)
		analysis_free(o);
	return rc;
}

int analysis_merge(const struct analysis *a, const struct analysis *b, struct analysis **out, struct tp_errbuf *err)
{
	struct memfix f = { 0 };
	struct mem_model *feed = NULL;
	struct analysis *o;
	int rc, fed = 0;

	*out = NULL;
	if ((rc = parts_meet(a, b, err)))
		return rc;
	if (a)
		f = (struct memfix){ (int64_t)a->nh, (uint32_t)a->nopt, (uint32_t)a->nmev };
	if (!(o = merge_new(b)))
		return nomem(err);
	/* a's collectives and [memory] events shared, not copied (runs_fork()), b's after them */
	rc = TP_ERR_NOMEM;
	if (combine(o, a, b) ||
	    (a && (hmap_copy(&o->mthreads, &a->mthreads) || dup_array(&o->mkeys, a->mkeys, a->nmkeys, sizeof(*a->mkeys)))))
		goto fail;
	o->nmkeys = o->mkeycap = a ? a->nmkeys : 0;
	/* the memory model: a's going on with b's events (a copy), or made again from all of them */
	if (o->nmev && (!a || !a->nmev)) {
		if (!(feed = mem_model_new()))
			goto fail;
		fed = 1;
	} else if (o->nmev && model_holds(a, o)) {
		if ((rc = mem_model_copy(a->mm, &feed, err)) && rc != TP_ERR_UNSUPPORTED)
			goto fail;
		fed = !rc;
	}
	if ((a && ((rc = runs_fork(&o->co, &a->co, err)) || (rc = runs_fork(&o->d, &a->d, err)))) ||
	    (rc = add_part_recs(o, b, &f, feed, &fed, err)) || (rc = runs_seal(&o->co, err)))
		goto fail;
	o->res.colls = &o->co;
	if (o->nmev) {
		struct mem_input in = mem_input_of(o);
		o->mwent = fed;
		if (fed) {
			rc = mem_model_result(feed, &in, &o->mem, &o->res.mem_series, &o->res.nmem_series, err);
			feed = NULL;	/* freed */
		} else {	/* over all of them */
			mem_model_free(feed);
			feed = NULL;
			o->d.fix = mem_resolve;	/* the spilled runs, as they are read */
			o->d.fixctx = o;
			if (!(rc = runs_seal(&o->d, err))) {
				if (!o->d.nruns)
					mem_resolve(o, o->d.buf, o->d.n);
				rc = mem_infer(&in, &o->mem, &o->res.mem_series, &o->res.nmem_series, err);
			}
		}
		if (rc)
			goto fail;
	}
	runs_free(&o->d);
	*out = o;
	return TP_OK;
fail:
	mem_model_free(feed);
	analysis_free(o);
	return rc == TP_ERR_NOMEM && !err->rc ? nomem(err) : err->rc ? err->rc : rc;
}

int analysis_memory_went_on(const struct analysis *an)
{
	return an->mwent;
}

struct mem_mark *analysis_memory_mark(struct analysis *an)
{
	return an->mem ? mem_result_mark(an->mem) : NULL;
}

int analysis_memory_follow(struct analysis *an, const struct mem_mark *m)
{
	return an->mem && m ? mem_result_follow(an->mem, m) : 0;
}

const struct an_result *analysis_merged(const struct analysis *an)
{
	return &an->res;
}
