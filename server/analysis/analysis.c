/*
 * analysis.c: steps, their breakdown, operator and kernel tables, from the
 * events of one trace (analysis.h says when and why).
 *
 * Events are sorted into three kinds of compact record:
 *   host spans  (cpu_op / Operator, user_annotation, cuda_runtime / driver):
 *               nested per thread into call trees, for self times, for the
 *               runtime / dataloader / cpu components, and to find which
 *               operator launched a kernel;
 *   GPU spans   (kernel, memcpy, memset): for the GPU components and the
 *               GPU time of operators; kernels are also aggregated by name
 *               as they stream by;
 *   steps       (ProfilerStep#N on the CPU, and its gpu_user_annotation
 *               mirror on the GPU when the trace has one).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "analysis/analysis.h"
#include "analysis/memory.h"
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
	N_SYNC = 0x4000,
};

enum hkind { H_OP, H_DATALOADER, H_RUNTIME };

/*
 * A host span. A 1 GB trace holds 2.5 M of them, so fields that are done
 * with give their place to what ops_table() computes: id once the spans are
 * found by id (link_maps(), unrecorded()), ord once they are sorted.
 */
struct hrec {
	int64_t s, e;
	union {
		int64_t id;	/* runtime: correlation; op: External id; -1 when absent */
		int64_t self;	/* then: self time (nest(), merge_dups()) */
	};
	uint32_t thread, name;
	union {
		uint32_t ord;	/* arrival order: the last tie-break of the sort */
		uint32_t kids;	/* then: children other than runtime calls (merge_dups()) */
	};
	uint8_t kind;		/* enum hkind */
	uint8_t ann;		/* a user annotation */
	uint8_t launch;		/* a runtime call that launches kernels */
	uint8_t gone;		/* merged into its parent (merge_dups()): no row of its own */
};

struct grec {			/* a GPU span */
	int64_t s, e, corr, ext;	/* -1 when absent */
	int32_t op;		/* the operator that launched it (link_maps()); -1: none found */
	uint8_t kind;		/* enum an_gpu_kind */
	uint8_t comm;		/* a communication kernel */
};

struct srec {			/* a step span */
	int64_t step, s, e;
};

struct crec {			/* a communication operator or kernel, with what it says of its collective */
	int64_t s, e, corr, ext;	/* corr, ext: kernels only; -1 when absent */
	int64_t in, out, gsize, seq;	/* -1 when absent */
	uint32_t thread, name, coll, pg, dtype;	/* coll, pg, dtype: 0 when absent */
	uint8_t gpu;
};

struct analysis {
	an_string_fn str;
	void *payload;
	uint16_t *cls;		/* per string id, 0: not classified yet */
	size_t ncls;
	struct hmap threads;	/* (pid, tid) -> thread number */
	struct hrec *h;
	size_t nh, hcap;
	struct grec *g;
	size_t ng, gcap;
	struct srec *cpu_steps;
	size_t ncs, cscap;
	struct hmap kmap;	/* name * 4 + kind -> kernels[] */
	struct crec *c;		/* communication operators and kernels */
	size_t nc, ccap;
	struct mem_event *mev;	/* [memory] events */
	size_t nmev, mevcap;
	int32_t *parent;	/* of each host span, once nested */
	struct hmap corr, ext;	/* host spans by the ids GPU spans name, once nested (link_maps) */
	struct mem_result *mem;
	struct an_result res;
	size_t kcap, opcap;
};

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

struct analysis *analysis_new(an_string_fn str, void *payload)
{
	struct analysis *an = tp_calloc(1, sizeof(*an));

	if (an) {
		an->str = str;
		an->payload = payload;
	}
	return an;
}

void analysis_free(struct analysis *an)
{
	if (!an)
		return;
	tp_free(an->cls);
	hmap_free(&an->threads);
	hmap_free(&an->kmap);
	hmap_free(&an->corr);
	hmap_free(&an->ext);
	tp_free(an->h);
	tp_free(an->g);
	tp_free(an->cpu_steps);
	tp_free(an->res.steps);
	tp_free(an->res.ops);
	tp_free(an->res.kernels);
	tp_free(an->res.thread_self_ns);
	tp_free(an->res.colls);
	tp_free(an->c);
	tp_free(an->mev);
	tp_free(an->parent);
	mem_result_free(an->mem);
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

/* The thread number of an event's (pid, tid); NULL when out of memory. */
static uint32_t *thread_of(struct analysis *an, const struct tp_event *e)
{
	uint64_t tk = hmap_mix(id_key(e->pid, e->pid_sid)) ^ id_key(e->tid, e->tid_sid);

	return hmap_put(&an->threads, tk, (uint32_t)an->threads.n);
}

static int memory_event(struct analysis *an, const struct tp_event *e)
{
	if (tp_grow((void **)&an->mev, &an->mevcap, an->nmev + 1, sizeof(*an->mev)))
		return -1;
	an->mev[an->nmev] = (struct mem_event){
		.ts = e->ts_ns, .ev_idx = (e->have & TH_EV_IDX) ? e->ev_idx : 0, .addr = e->addr,
		.bytes = (e->have & TH_BYTES) ? e->bytes : 0, .total_alloc = e->total_alloc,
		.total_res = e->total_reserved,
		/* resolved at the end: a thread's spans may come after its allocations */
		.thread_key = hmap_mix(id_key(e->pid, e->pid_sid)) ^ id_key(e->tid, e->tid_sid),
		.dev_type = (e->have & TH_DEV_TYPE) ? (int32_t)e->dev_type : 0,
		.dev_id = (e->have & TH_DEV_ID) ? (int32_t)e->dev_id : -1,
		.has_addr = (e->have & TH_ADDR) != 0,
		.has_totals = (e->have & TH_TOTAL_ALLOC) && (e->have & TH_TOTAL_RES), .ord = (uint32_t)an->nmev,
	};
	an->nmev++;
	return 0;
}

/* A string id held in an int64 field (event.h); 0 when absent or out of range. */
static uint32_t sid64(const struct tp_event *e, uint32_t bit, int64_t v)
{
	return (e->have & bit) && v > 0 && v <= (int64_t)UINT32_MAX ? (uint32_t)v : 0;
}

static int comm_event(struct analysis *an, const struct tp_event *e, int64_t s, int64_t dur, uint32_t thread, int gpu)
{
	if (tp_grow((void **)&an->c, &an->ccap, an->nc + 1, sizeof(*an->c)))
		return -1;
	an->c[an->nc++] = (struct crec){
		.s = s, .e = s + dur, .thread = thread, .name = e->name, .gpu = (uint8_t)gpu,
		.corr = gpu && (e->have & TH_CORR) ? e->corr : -1, .ext = gpu && (e->have & TH_EXT) ? e->ext_id : -1,
		.in = (e->have & TH_IN_NELEMS) ? e->in_nelems : -1, .out = (e->have & TH_OUT_NELEMS) ? e->out_nelems : -1,
		.gsize = (e->have & TH_GROUP_SIZE) ? e->group_size : -1, .seq = (e->have & TH_COLL_SEQ) ? e->coll_seq : -1,
		.coll = sid64(e, TH_COLL, e->coll), .pg = sid64(e, TH_PG, e->pg), .dtype = sid64(e, TH_DTYPE, e->dtype),
	};
	return 0;
}

int analysis_event(struct analysis *an, const struct tp_event *e, struct tp_errbuf *err)
{
	uint16_t cc, nc;
	int64_t s, dur, n;

	if (e->ph == 'i' && e->name == TRACE_S_MEMORY && (e->have & TH_TS))
		return memory_event(an, e) ? nomem(err) : TP_OK;
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
		step_number(an->str(an->payload, e->name), &n);
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, an->ncs + 1, sizeof(*an->cpu_steps)))
			return nomem(err);
		an->cpu_steps[an->ncs++] = (struct srec){ .step = n, .s = s, .e = s + dur };
		return TP_OK;
	}
	switch (cc) {
	case C_OP: case C_ANN: case C_RUNTIME: {
		uint32_t *t = thread_of(an, e);
		if (!t || tp_grow((void **)&an->h, &an->hcap, an->nh + 1, sizeof(*an->h)))
			return nomem(err);
		int rt = cc == C_RUNTIME;
		an->h[an->nh] = (struct hrec){
			.s = s, .e = s + dur, .thread = *t, .name = e->name, .ann = cc == C_ANN, .ord = (uint32_t)an->nh,
			.launch = rt && (nc & N_LAUNCH),
			.kind = rt ? H_RUNTIME : (nc & N_DATALOADER) ? H_DATALOADER : H_OP,
			.id = rt ? ((e->have & TH_CORR) ? e->corr : -1) : ((e->have & TH_EXT) ? e->ext_id : -1),
		};
		an->nh++;
		if (!rt && ((nc & N_COMM_OP) || (e->have & TH_COLL)) &&
		    comm_event(an, e, s, dur, *t, 0))
			return nomem(err);
		return TP_OK;
	}
	case C_KERNEL: case C_MEMCPY: case C_MEMSET: {
		int kind = cc == C_KERNEL ? AN_GPU_KERNEL : cc == C_MEMCPY ? AN_GPU_MEMCPY : AN_GPU_MEMSET;
		if (tp_grow((void **)&an->g, &an->gcap, an->ng + 1, sizeof(*an->g)) || add_kernel(an, e, kind, dur))
			return nomem(err);
		an->g[an->ng++] = (struct grec){
			.s = s, .e = s + dur, .kind = (uint8_t)kind, .comm = kind == AN_GPU_KERNEL && (nc & N_COMM),
			.corr = (e->have & TH_CORR) ? e->corr : -1, .ext = (e->have & TH_EXT) ? e->ext_id : -1,
		};
		if (an->g[an->ng - 1].comm && comm_event(an, e, s, dur, 0, 1))
			return nomem(err);
		return TP_OK;
	}
	default:
		return TP_OK;
	}
}

/* ---- call trees: self time and the operator that launched each GPU span ---- */

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

SORT_DEFINE(sort_hrec, struct hrec, hrec_less)

struct frame {
	size_t i;
	int64_t end;		/* clipped to the parent's */
};

/*
 * Nest each thread's spans (sorted by start, longer first) with a stack.
 * A span that starts inside another is its child; one that ends after its
 * parent is clipped to it (traces do have such overlaps), so children never
 * count for more than their parent, self time is never negative, and the
 * self times of a thread add up to at most its busy time. With self 0 it
 * only finds the parents (the spans' ids are still needed: self time takes
 * their place).
 */
static int nest(struct analysis *an, int32_t *parent, int self)
{
	struct frame *stack = NULL;
	size_t depth = 0, cap = 0, i;

	for (i = 0; i < an->nh; i++) {
		struct hrec *r = &an->h[i];
		if (i && r->thread != an->h[i - 1].thread)
			depth = 0;
		while (depth && r->s >= stack[depth - 1].end)
			depth--;
		int64_t end = r->e;
		if (depth && end > stack[depth - 1].end)
			end = stack[depth - 1].end;
		parent[i] = depth ? (int32_t)stack[depth - 1].i : -1;
		if (self) {
			r->self = end - r->s;
			if (depth)
				an->h[stack[depth - 1].i].self -= end - r->s;
		}
		if (tp_grow((void **)&stack, &cap, depth + 1, sizeof(*stack))) {
			tp_free(stack);
			return -1;
		}
		stack[depth++] = (struct frame){ i, end };
	}
	tp_free(stack);
	return 0;
}

/*
 * GPU time of operators. A GPU span belongs to the operator that launched
 * it: its correlation id names the runtime call (cudaLaunchKernel, ...),
 * whose nearest enclosing operator is the launcher. Traces where that fails
 * (no runtime event kept) fall back to the span's External id, which Kineto
 * sets to the launching operator's (link_maps() finds it). gpu_self: spans
 * launched by the operator itself; gpu_total: by it and everything it called.
 */
#define NO_HOST (UINT32_MAX - 1)	/* in link_maps()'s maps: an id no host span has */

/* The host span that id names in m (link_maps()); UINT32_MAX: none. */
static uint32_t host_by(const struct hmap *m, int64_t id)
{
	uint32_t j = id >= 0 ? hmap_get(m, (uint64_t)id) : UINT32_MAX;

	return j == NO_HOST ? UINT32_MAX : j;
}

/* The operator a runtime call is under (the nearest ancestor that is no runtime call); -1: none. */
static int64_t op_above(const struct analysis *an, const int32_t *parent, uint32_t j)
{
	int64_t op = parent[j];

	while (op >= 0 && an->h[op].kind == H_RUNTIME)
		op = parent[op];
	return op;
}

/*
 * Host spans by the ids GPU spans name, the first in the spans' order:
 * runtime calls by correlation (corr has every GPU span's correlation id,
 * NO_HOST when no runtime call has it: unrecorded() asks which launches have
 * a GPU span), and operators by External id, for the GPU spans whose
 * correlation names no runtime call under an operator (the fallback of
 * owners() and collectives()). Maps of every span's ids were 96 MiB at the
 * peak of a 1 GB trace; these hold what GPU spans ask for. Also sets each
 * GPU span's op (gpu_time(), which runs once the maps are freed).
 */
static int link_maps(struct analysis *an, const int32_t *parent)
{
	size_t i, n = 0;
	uint32_t *v, j;

	for (i = 0; i < an->ng; i++)
		n += an->g[i].corr >= 0;
	if (hmap_reserve(&an->corr, n))
		return -1;
	for (i = 0; i < an->ng; i++)
		if (an->g[i].corr >= 0 && !hmap_put(&an->corr, (uint64_t)an->g[i].corr, NO_HOST))
			return -1;
	for (i = 0; i < an->nh; i++) {
		const struct hrec *r = &an->h[i];
		if (r->kind == H_RUNTIME && r->id >= 0 && (v = hmap_find(&an->corr, (uint64_t)r->id)) &&
		    *v == NO_HOST)
			*v = (uint32_t)i;
	}
	for (i = 0; i < an->ng; i++) {
		struct grec *g = &an->g[i];
		j = host_by(&an->corr, g->corr);
		g->op = j != UINT32_MAX ? (int32_t)op_above(an, parent, j) : -1;
		if (g->op < 0 && g->ext >= 0 && !hmap_put(&an->ext, (uint64_t)g->ext, NO_HOST))
			return -1;
	}
	if (!an->ext.n)
		return 0;
	for (i = 0; i < an->nh; i++) {
		const struct hrec *r = &an->h[i];
		if (r->kind != H_RUNTIME && r->id >= 0 && (v = hmap_find(&an->ext, (uint64_t)r->id)) &&
		    *v == NO_HOST)
			*v = (uint32_t)i;
	}
	for (i = 0; i < an->ng; i++)
		if (an->g[i].op < 0 && (j = host_by(&an->ext, an->g[i].ext)) != UINT32_MAX)
			an->g[i].op = (int32_t)j;
	return 0;
}

static void gpu_time(const struct analysis *an, int64_t *gpu_self)
{
	for (size_t i = 0; i < an->ng; i++) {
		const struct grec *g = &an->g[i];
		if (g->op >= 0)
			gpu_self[g->op] = tp_sat_add(gpu_self[g->op], g->e - g->s);
	}
}

/* gpu_total: gpu_self summed over each span's subtree. */
static void gpu_subtree(const struct analysis *an, const int32_t *parent, const int64_t *gpu_self, int64_t *gpu_total)
{
	memcpy(gpu_total, gpu_self, (an->nh + 1) * sizeof(*gpu_total));
	/* a parent sorts before its children */
	for (size_t i = an->nh; i-- > 0;)
		if (parent[i] >= 0)
			gpu_total[parent[i]] = tp_sat_add(gpu_total[parent[i]], gpu_total[i]);
}

static int add_op(struct analysis *an, struct hmap *m, uint32_t name, int device, int64_t self, int64_t total)
{
	uint32_t *slot = hmap_put(m, (uint64_t)name * 2 + (uint64_t)device, (uint32_t)an->res.nops);
	struct an_op *o;

	if (!slot)
		return -1;
	if (*slot == an->res.nops) {
		if (tp_grow((void **)&an->res.ops, &an->opcap, an->res.nops + 1, sizeof(*o)))
			return -1;
		o = &an->res.ops[an->res.nops++];
		*o = (struct an_op){ .name = name, .device = device };
	}
	o = &an->res.ops[*slot];
	o->calls++;
	o->self_ns = tp_sat_add(o->self_ns, self);
	o->total_ns = tp_sat_add(o->total_ns, total);
	return 0;
}

/* An operator proper: not a runtime call, not a user annotation. */
static int is_op(const struct hrec *r)
{
	return r->kind != H_RUNTIME && !r->ann;
}

/*
 * PyTorch's EventList._remove_dup_nodes (key_averages()), which
 * torch-tb-profiler's op tree repeats: an operator whose only child (runtime
 * calls aside) is an operator of the same name is one call, not two. The
 * child's self time and the GPU time it launched go to the parent, and the
 * child is no row of its own. Deepest first, so that a chain of three
 * becomes one. Marks merged spans gone.
 */
static void merge_dups(struct analysis *an, const int32_t *parent, int64_t *gself)
{
	struct hrec *h = an->h;
	size_t i;

	for (i = 0; i < an->nh; i++)
		h[i].kids = 0;
	for (i = 0; i < an->nh; i++)
		if (parent[i] >= 0 && h[i].kind != H_RUNTIME)
			h[parent[i]].kids++;
	for (i = an->nh; i-- > 0;) {
		int32_t p = parent[i];
		if (p < 0 || h[p].kids != 1 || !is_op(&h[i]) || !is_op(&h[p]) || h[i].name != h[p].name)
			continue;
		h[p].self += h[i].self;
		if (gself)
			gself[p] = tp_sat_add(gself[p], gself[i]);
		h[i].gone = 1;
	}
}

static int ops_table(struct analysis *an)
{
	int32_t *parent = an->parent;
	int64_t *gself = an->ng ? tp_calloc(an->nh + 1, sizeof(*gself)) : NULL, *gtotal = NULL;
	struct hmap m = { 0 };
	int rc = -1;
	size_t i;

	an->res.nthreads = an->threads.n;
	an->res.thread_self_ns = tp_calloc(an->threads.n + 1, sizeof(int64_t));
	if ((an->ng && !gself) || !an->res.thread_self_ns)
		goto out;
	if (nest(an, parent, 1))
		goto out;
	if (an->ng) {
		gpu_time(an, gself);
		/* the GPU spans' last reader: their place goes to gtotal (20 MiB each for a 1 GB trace) */
		tp_free(an->g);
		an->g = NULL;
		an->ng = an->gcap = 0;
		if (!(gtotal = tp_malloc((an->nh + 1) * sizeof(*gtotal))))
			goto out;
		gpu_subtree(an, parent, gself, gtotal);
	}
	merge_dups(an, parent, gself);
	for (i = 0; i < an->nh; i++) {
		const struct hrec *r = &an->h[i];
		if (r->gone)	/* its self time is its parent's now */
			continue;
		an->res.thread_self_ns[r->thread] = tp_sat_add(an->res.thread_self_ns[r->thread], r->self);
		if (add_op(an, &m, r->name, AN_DEV_CPU, r->self, r->e - r->s))
			goto out;
		if (gtotal && gtotal[i] > 0 && r->kind != H_RUNTIME &&
		    add_op(an, &m, r->name, AN_DEV_GPU, gself[i], gtotal[i]))
			goto out;
	}
	rc = 0;
out:
	hmap_free(&m);
	tp_free(gself);
	tp_free(gtotal);
	return rc;
}

/* ---- step breakdown ---- */

struct ival {
	int64_t s, e;
};

struct ivals {
	struct ival *v;
	size_t n, cap;
};

static inline int ival_less(const struct ival *x, const struct ival *y)
{
	return x->s < y->s;	/* ties in any order: the union below takes the longest */
}

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

/* Append the parts of the disjoint list l that lie in [a, b) to out (sorted). */
static int ivals_window(const struct ivals *l, int64_t a, int64_t b, struct ivals *out)
{
	size_t lo = 0, hi = l->n;

	out->n = 0;
	while (lo < hi) {	/* the first interval that ends after a */
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid].e <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < l->n && l->v[lo].s < b; lo++)
		if (ivals_add(out, l->v[lo].s > a ? l->v[lo].s : a, l->v[lo].e < b ? l->v[lo].e : b))
			return -1;
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

/* The step whose CPU span holds instant t (steps sorted by start); -1: none. */
static int32_t step_at(const struct analysis *an, int64_t t)
{
	size_t lo = 0, hi = an->ncs;

	while (lo < hi) {	/* the first step that starts after t */
		size_t mid = lo + (hi - lo) / 2;
		if (an->cpu_steps[mid].s <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && t < an->cpu_steps[lo - 1].e ? (int32_t)(lo - 1) : -1;
}

/*
 * How many of each step's kernel launches have no GPU span in the trace and
 * come after the last launch that has one (after: the GPU records stop
 * while the launches go on; a record missing in the middle is not a cut).
 */
static void unrecorded(const struct analysis *an, int64_t last, int64_t *missing)
{
	size_t i;
	int32_t k;

	for (i = 0; i < an->nh; i++) {
		const struct hrec *h = &an->h[i];
		/* an->corr has every GPU span's correlation id as a key (link_maps()) */
		if (h->launch && h->id >= 0 && h->s > last && hmap_get(&an->corr, (uint64_t)h->id) == UINT32_MAX &&
		    (k = step_at(an, h->s)) >= 0)
			missing[k]++;
	}
}

/*
 * The step that launched each GPU span: the one whose CPU span holds the
 * runtime call its correlation id names, else the operator its External id
 * names (traces that kept no runtime event), else the span's own start;
 * -1 when that instant is in no step. Steps are sorted by start. *last:
 * the latest launch instant.
 */
static void owners(struct analysis *an, int32_t *own, int64_t *last)
{
	size_t i;
	uint32_t j;

	for (i = 0; i < an->ng; i++) {
		const struct grec *g = &an->g[i];
		int64_t t = g->s;
		if ((j = host_by(&an->corr, g->corr)) != UINT32_MAX || (j = host_by(&an->ext, g->ext)) != UINT32_MAX)
			t = an->h[j].s;
		own[i] = step_at(an, t);
		if (t > *last)
			*last = t;
	}
}

/* Order GPU span indices by owner (counting sort); first[k]..first[k + 1] are step k's. */
static void group_by_owner(const struct analysis *an, const int32_t *own, size_t nsteps, uint32_t *idx, size_t *first)
{
	size_t i;

	memset(first, 0, (nsteps + 2) * sizeof(*first));
	for (i = 0; i < an->ng; i++)
		if (own[i] >= 0)
			first[own[i] + 2]++;
	for (i = 2; i < nsteps + 2; i++)
		first[i] += first[i - 1];
	for (i = 0; i < an->ng; i++)
		if (own[i] >= 0)
			idx[first[own[i] + 1]++] = (uint32_t)i;
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
static int cmp_ival_start(const void *x, const void *y)
{
	const struct ival *a = x, *b = y;
	return (a->s > b->s) - (a->s < b->s);
}

/*
 * Each step's runtime calls that wait for the GPU (an_is_sync()), by where
 * they start: inside the ProfilerStep#N span. Kineto's own synchronize when
 * a cycle stops, after the last step, belongs to none; an aten::item() on a
 * CPU tensor (AdamW reads its step counts so, once a parameter) makes none.
 */
static int step_syncs(struct analysis *an)
{
	struct ivals v = { 0 };
	uint16_t nc;
	size_t i;

	for (i = 0; i < an->nh; i++) {
		const struct hrec *h = &an->h[i];
		if (h->kind != H_RUNTIME || h->e < h->s)
			continue;
		if (cls_of(an, h->name, &nc) ||
		    ((nc & N_SYNC) && tp_grow((void **)&v.v, &v.cap, v.n + 1, sizeof(*v.v)))) {
			tp_free(v.v);
			return -1;
		}
		if (nc & N_SYNC)
			v.v[v.n++] = (struct ival){ h->s, h->e };
	}
	if (v.n > 1)
		qsort(v.v, v.n, sizeof(*v.v), cmp_ival_start);
	for (i = 0; i < an->ncs && i < an->res.nsteps; i++) {
		const struct srec *cs = &an->cpu_steps[i];
		struct an_step *st = &an->res.steps[i];
		size_t lo = 0, hi = v.n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (v.v[mid].s < cs->s)
				lo = mid + 1;
			else
				hi = mid;
		}
		st->cpu_end_ns = cs->e;
		for (; lo < v.n && v.v[lo].s < cs->e; lo++) {
			st->sync_calls++;
			st->sync_ns = tp_sat_add(st->sync_ns, v.v[lo].e - v.v[lo].s);
		}
	}
	tp_free(v.v);
	return 0;
}

static int breakdown(struct analysis *an)
{
	struct ivals cat[AN_IDLE] = { { 0 } }, win = { 0 }, cum = { 0 }, tmp = { 0 };
	uint32_t thread[AN_IDLE] = { 0 };	/* of cat[c]'s last interval */
	int32_t *own = tp_malloc((an->ng + 1) * sizeof(*own));
	uint32_t *idx = tp_malloc((an->ng + 1) * sizeof(*idx));
	size_t *first = NULL, i, k;
	int64_t prev_end = INT64_MIN, last = INT64_MIN;
	int c, whole = 0, rc = -1;

	if (!own || !idx)
		goto out;
	/* the host's busy time per category: spans come sorted by thread and start, so each
	 * thread's run of overlapping spans is one interval before the union across threads
	 * (a list of every span was 40 MiB, the peak of a 1 GB trace's analysis) */
	for (i = 0; i < an->nh; i++) {
		const struct hrec *h = &an->h[i];
		struct ival *run;
		c = h->kind == H_RUNTIME ? AN_RUNTIME : h->kind == H_DATALOADER ? AN_DATALOADER : AN_CPU;
		if (h->e <= h->s)
			continue;
		run = cat[c].n ? &cat[c].v[cat[c].n - 1] : NULL;
		if (run && thread[c] == h->thread && h->s <= run->e) {
			if (h->e > run->e)
				run->e = h->e;
		} else if (ivals_add(&cat[c], h->s, h->e)) {
			goto out;
		}
		thread[c] = h->thread;
	}
	for (c = AN_RUNTIME; c < AN_IDLE; c++)
		ivals_union(&cat[c]);
	if (!an->ncs && (an->nh || an->ng)) {	/* the whole trace, as one step */
		int64_t a = INT64_MAX, b = INT64_MIN;
		for (i = 0; i < an->nh; i++) {
			a = an->h[i].s < a ? an->h[i].s : a;
			b = an->h[i].e > b ? an->h[i].e : b;
		}
		for (i = 0; i < an->ng; i++) {
			a = an->g[i].s < a ? an->g[i].s : a;
			b = an->g[i].e > b ? an->g[i].e : b;
		}
		if (tp_grow((void **)&an->cpu_steps, &an->cscap, 1, sizeof(*an->cpu_steps)))
			goto out;
		an->cpu_steps[an->ncs++] = (struct srec){ .step = 0, .s = a, .e = fit_end(a, b) };
		whole = 1;
	}
	if (an->ncs > 1)
		qsort(an->cpu_steps, an->ncs, sizeof(*an->cpu_steps), cmp_srec);
	if (!(first = tp_malloc((an->ncs + 2) * sizeof(*first))))
		goto out;
	if (whole)
		memset(own, 0, (an->ng + 1) * sizeof(*own));
	else
		owners(an, own, &last);
	group_by_owner(an, own, an->ncs, idx, first);
	an->res.steps = tp_calloc(an->ncs + 1, sizeof(*an->res.steps));
	if (!an->res.steps)
		goto out;
	for (i = 0; i < an->ncs; i++) {
		const struct srec *s = &an->cpu_steps[i];
		struct an_step *st = &an->res.steps[an->res.nsteps++];
		int64_t a = s->s > prev_end ? s->s : prev_end, b = s->e, covered = 0, len, klen = 0, clen = 0;
		for (k = first[i]; k < first[i + 1]; k++)
			if (an->g[idx[k]].e > b)
				b = an->g[idx[k]].e;
		if (b < a)
			b = a;
		prev_end = b = fit_end(a, b);
		*st = (struct an_step){ .step = s->step, .start_ns = a, .dur_ns = b - a, .cpu_dur_ns = s->e - s->s,
					.gpu_calls = (int64_t)(first[i + 1] - first[i]), .whole_trace = whole };
		for (c = AN_KERNEL; c <= AN_COMM; c++)
			cat[c].n = 0;
		for (k = first[i]; k < first[i + 1]; k++) {
			const struct grec *g = &an->g[idx[k]];
			c = g->comm ? AN_COMM : g->kind == AN_GPU_KERNEL ? AN_KERNEL : g->kind == AN_GPU_MEMCPY ? AN_MEMCPY : AN_MEMSET;
			if (ivals_add(&cat[c], g->s > a ? g->s : a, g->e < b ? g->e : b))
				goto out;
		}
		cum.n = 0;
		for (c = 0; c < AN_IDLE; c++) {
			/* the step's own GPU work, or the host's in its span */
			if (c <= AN_COMM)
				ivals_union(&cat[c]);
			else if (ivals_window(&cat[c], a, b, &win))
				goto out;
			if (merge_measure(&cum, c <= AN_COMM ? &cat[c] : &win, &tmp, &len))
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
		/* communication under computation: |kernel| + |comm| - |kernel u comm| */
		for (k = 0; k < cat[AN_COMM].n; k++)
			clen += cat[AN_COMM].v[k].e - cat[AN_COMM].v[k].s;
		if (clen && merge_measure(&cat[AN_KERNEL], &cat[AN_COMM], &tmp, &len))
			goto out;
		st->comm_overlap_ns = clen ? klen - (len - clen) : 0;	/* no overflow: len >= clen, len - clen <= klen */
		st->gpu_busy_ns = clen ? len : klen;
	}
	if (step_syncs(an))
		goto out;
	/* incomplete steps, once every step's GPU work is known */
	for (i = 0, k = 0; i < an->res.nsteps; i++)
		k += an->res.steps[i].gpu_calls > 0;
	if (k && !whole) {
		int64_t *missing = tp_calloc(an->ncs + 1, sizeof(*missing));
		if (!missing)
			goto out;
		unrecorded(an, last, missing);
		for (i = 0; i < an->res.nsteps; i++) {
			struct an_step *st = &an->res.steps[i];
			if (!st->gpu_calls)
				st->incomplete = AN_INC_NO_GPU;
			else if (missing[i])
				st->incomplete = AN_INC_CUT;
		}
		tp_free(missing);
	}
	rc = 0;
out:
	for (c = 0; c < AN_IDLE; c++)
		tp_free(cat[c].v);
	tp_free(win.v);
	tp_free(cum.v);
	tp_free(tmp.v);
	tp_free(own);
	tp_free(idx);
	tp_free(first);
	return rc;
}

/* Memory timelines by category, when the trace has [memory] events (memory.c). */
/*
 * The memory model's input: the host spans, sorted and nested, become its
 * spans in place (memory runs last: nothing reads them as host spans after),
 * and the parents go with them. A copy was 80 MiB at the peak of a 1 GB
 * trace's analysis (bench/results/ingest_memory_profile-20261124.txt).
 */
static struct mem_span *spans_in_place(struct analysis *an)
{
	struct mem_span *sp = (struct mem_span *)(void *)an->h;
	size_t i;

	_Static_assert(sizeof(struct mem_span) <= sizeof(struct hrec), "mem_span must fit in an hrec's place");
	for (i = 0; i < an->nh; i++) {
		/* sp[i] ends before h[i + 1] begins: only h[i], read first, is overwritten */
		const struct hrec h = an->h[i];
		uint16_t nc;
		if (cls_of(an, h.name, &nc))
			nc = 0;
		sp[i] = (struct mem_span){
			.s = h.s, .e = h.e, .thread = h.thread, .name = h.name, .parent = an->parent[i],
			.flags = (uint16_t)((h.kind == H_RUNTIME ? MS_RUNTIME : 0) | (h.ann ? MS_ANNOTATION : 0) |
					    (h.kind == H_DATALOADER ? MS_DATALOADER : 0) |
					    (nc & N_OPT_STEP ? MS_OPT_STEP : 0) | (nc & N_ZERO_GRAD ? MS_ZERO_GRAD : 0) |
					    (nc & N_BACKWARD ? MS_BACKWARD : 0) | (nc & N_ACCUM_GRAD ? MS_ACCUM_GRAD : 0) |
					    (nc & N_COPY ? MS_COPY : 0)),
		};
	}
	an->h = NULL;
	an->hcap = 0;
	tp_free(an->parent);
	an->parent = NULL;
	return sp;
}

static int memory(struct analysis *an, struct tp_errbuf *err)
{
	struct mem_span *sp;
	size_t *first, i, t;
	struct mem_input in;
	int rc;

	if (!an->nmev)
		return TP_OK;
	if (!(first = tp_calloc(an->threads.n + 2, sizeof(*first))))
		return nomem(err);
	/* spans are sorted by thread: where each thread's begin */
	for (t = 0, i = 0; t <= an->threads.n; t++) {
		while (i < an->nh && an->h[i].thread < t)
			i++;
		first[t] = i;
	}
	first[an->threads.n + 1] = an->nh;
	for (i = 0; i < an->nmev; i++)
		an->mev[i].thread = hmap_get(&an->threads, an->mev[i].thread_key);	/* UINT32_MAX: no spans */
	sp = an->nh ? spans_in_place(an) : NULL;
	in = (struct mem_input){ .spans = sp, .nspans = an->nh, .thread_first = first, .nthreads = an->threads.n,
				 .ev = an->mev, .nev = an->nmev, .str = an->str, .payload = an->payload };
	rc = mem_infer(&in, &an->mem, &an->res.mem_series, &an->res.nmem_series, err);
	tp_free(sp);
	tp_free(first);
	return rc;
}

/* ---- collectives ---- */

/* The host span (sorted by analysis_finish()) that crec c was made from; -1 when not found. */
static int64_t host_of(const struct analysis *an, const struct crec *c)
{
	size_t lo = 0, hi = an->nh;

	while (lo < hi) {	/* the first span of c's thread that starts at or after c */
		size_t mid = lo + (hi - lo) / 2;
		const struct hrec *h = &an->h[mid];
		if (h->thread < c->thread || (h->thread == c->thread && h->s < c->s))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < an->nh && an->h[lo].thread == c->thread && an->h[lo].s == c->s; lo++)
		if (an->h[lo].name == c->name && an->h[lo].e == c->e && an->h[lo].kind != H_RUNTIME)
			return (int64_t)lo;
	return -1;
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

/* a collective by launching thread, then launch */
struct coll_at {
	uint32_t thread, i;
	int64_t launch;
};

static int cmp_coll_at(const void *a, const void *b)
{
	const struct coll_at *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->launch < y->launch ? -1 : x->launch > y->launch;
}

/*
 * an_coll.before_op: on the launching thread, from the thread's previous
 * collective launch (or the step's start, whichever is later) to this
 * launch, the top-level operator (no parent; not a collective, not a
 * runtime call) with the most time there. Only top-level spans are read
 * (top[]: their indices, in the spans' order), and each thread's windows
 * follow one another, so they are read about once in all. (Reading every
 * span from the window's top-level span on read a long operator's whole
 * subtree again for each collective it launched: 90 % of the analysis's
 * finish on the V100 fixture, a tenth of its upload.)
 */
static int before_ops(struct analysis *an)
{
	struct coll_at *at = tp_malloc((an->res.ncolls + 1) * sizeof(*at));
	uint32_t *top = NULL;
	size_t n = 0, ntop = 0, i, j;

	if (!at)
		return -1;
	for (i = 0; i < an->res.ncolls; i++)
		if (an->res.colls[i].thread != UINT32_MAX)
			at[n++] = (struct coll_at){ an->res.colls[i].thread, (uint32_t)i, an->res.colls[i].launch_ns };
	if (n) {
		for (j = 0; j < an->nh; j++)
			ntop += an->parent[j] < 0;
		if (!(top = tp_malloc((ntop + 1) * sizeof(*top)))) {
			tp_free(at);
			return -1;
		}
		for (j = 0, ntop = 0; j < an->nh; j++)
			if (an->parent[j] < 0)
				top[ntop++] = (uint32_t)j;
	}
	if (n > 1)
		qsort(at, n, sizeof(*at), cmp_coll_at);
	for (i = 0; i < n; i++) {
		struct an_coll *c = &an->res.colls[at[i].i];
		int64_t lo = INT64_MIN, best = 0;
		int32_t st = step_at(an, c->launch_ns);
		size_t k = 0, hi = ntop;
		if (i && at[i - 1].thread == c->thread)
			lo = at[i - 1].launch;
		if (st >= 0 && an->cpu_steps[st].s > lo)
			lo = an->cpu_steps[st].s;
		while (k < hi) {	/* the thread's first top-level span that starts at or after lo */
			size_t mid = k + (hi - k) / 2;
			const struct hrec *h = &an->h[top[mid]];
			if (h->thread < c->thread || (h->thread == c->thread && h->s < lo))
				k = mid + 1;
			else
				hi = mid;
		}
		/* the one before it may run into the window: top-level spans do not overlap */
		if (k > 0 && an->h[top[k - 1]].thread == c->thread)
			k--;
		for (; k < ntop && an->h[top[k]].thread == c->thread && an->h[top[k]].s < c->launch_ns; k++) {
			const struct hrec *h = &an->h[top[k]];
			uint16_t nc;
			if (h->kind == H_RUNTIME || cls_of(an, h->name, &nc) || (nc & N_COMM_OP))
				continue;
			int64_t a = h->s > lo ? h->s : lo, b = h->e < c->launch_ns ? h->e : c->launch_ns;
			if (b - a > best) {
				best = b - a;
				c->before_op = h->name;
				c->before_ns = best;
			}
		}
	}
	tp_free(top);
	tp_free(at);
	return 0;
}

static int cmp_coll(const void *a, const void *b)
{
	const struct an_coll *x = a, *y = b;

	if (x->launch_ns != y->launch_ns)
		return x->launch_ns < y->launch_ns ? -1 : 1;
	return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

static int is_gloo(const struct analysis *an, uint32_t name)
{
	return !strncmp(an->str(an->payload, name), "gloo:", 5);
}

/*
 * Collectives that run on the host: ProcessGroupGloo's gloo:* spans (its
 * worker threads run them, and copy GPU tensors to and from the host around
 * them), each of which is one collective when no communication kernel made
 * it one already and no gloo:* span is above it. Its span is its launch (the
 * rank's arrival), its time and its start and end; it has no kernels. inst:
 * collectives() instances, by their outermost operator.
 */
static void host_collectives(struct analysis *an, const struct hmap *inst)
{
	for (size_t i = 0; i < an->nc; i++) {
		const struct crec *k = &an->c[i];
		int64_t h, op, bytes;
		int kind;
		if (k->gpu || !is_gloo(an, k->name) || (h = host_of(an, k)) < 0 ||
		    hmap_get(inst, (uint64_t)h) != UINT32_MAX)
			continue;
		for (op = an->parent[h]; op >= 0 && !is_gloo(an, an->h[op].name); op = an->parent[op])
			;
		if (op >= 0)
			continue;
		kind = k->coll ? an_coll_kind(an->str(an->payload, k->coll)) : -1;
		if (kind < 0)
			kind = an_coll_kind(an->str(an->payload, k->name) + 5);
		bytes = coll_bytes(an, k);
		int32_t st = step_at(an, k->s);
		an->res.colls[an->res.ncolls++] = (struct an_coll){
			.step = st >= 0 ? an->cpu_steps[st].step : -1, .kind = kind < 0 ? AN_CK_OTHER : kind,
			.pg = k->pg, .seq = k->seq, .launch_ns = k->s, .start_ns = k->s, .end_ns = k->e,
			.time_ns = k->e - k->s, .bytes = bytes, .group_size = k->gsize > 0 ? k->gsize : 0,
			.thread = k->thread,
		};
	}
}

/*
 * Each communication kernel joins the collective of the outermost
 * communication operator above the call that launched it (by correlation,
 * else by External id). What the collective is (kind, group, bytes, group
 * size, sequence number) is taken from the kernel's own args when it has
 * them (newer PyTorch writes them on NCCL kernels), else from the nearest
 * operator above it that has them (record_param_comms), else the kind from
 * the nearest nccl:* / gloo:* range above it (older traces, where
 * all_to_all runs as SendRecv kernels), else from the kernel's name.
 */
static int collectives(struct analysis *an)
{
	struct hmap hc = { 0 }, inst = { 0 };
	int rc = -1;
	size_t i;

	if (!an->nc)
		return 0;
	if (!(an->res.colls = tp_calloc(an->nc, sizeof(*an->res.colls))))
		goto out;
	for (i = 0; i < an->nc; i++) {	/* host span -> its crec */
		int64_t h;
		if (!an->c[i].gpu && (h = host_of(an, &an->c[i])) >= 0 && !hmap_put(&hc, (uint64_t)h, (uint32_t)i))
			goto out;
	}
	for (i = 0; i < an->nc; i++) {
		const struct crec *k = &an->c[i], *src = NULL;
		int64_t op = -1, top = -1, launch = k->s, bytes;
		int kind = -1, name_kind = -1;
		uint32_t j, *slot;
		if (!k->gpu)
			continue;
		uint32_t thread = UINT32_MAX;
		if ((j = host_by(&an->corr, k->corr)) != UINT32_MAX) {
			launch = an->h[j].s;
			op = an->parent[j];
			thread = an->h[j].thread;
		} else if ((j = host_by(&an->ext, k->ext)) != UINT32_MAX) {
			op = j;
			thread = an->h[j].thread;
		}
		for (; op >= 0; op = an->parent[op]) {
			const char *nm = an->str(an->payload, an->h[op].name);
			uint32_t ci = hmap_get(&hc, (uint64_t)op);
			if (ci == UINT32_MAX && !an_op_is_comm(nm))
				continue;
			top = op;
			if (!src && ci != UINT32_MAX && (an->c[ci].coll || an->c[ci].in >= 0 || an->c[ci].out >= 0))
				src = &an->c[ci];
			if (name_kind < 0 && (!strncmp(nm, "nccl:", 5) || !strncmp(nm, "gloo:", 5)))
				name_kind = an_coll_kind(nm + 5);
		}
		if (top >= 0)
			launch = an->h[top].s;
		if (k->coll)
			kind = an_coll_kind(an->str(an->payload, k->coll));
		if (kind < 0 && src && src->coll)
			kind = an_coll_kind(an->str(an->payload, src->coll));
		if (kind < 0)
			kind = name_kind;
		if (kind < 0)
			kind = an_coll_kind(an->str(an->payload, k->name));
		/* the instance: one per outermost operator, else one per kernel */
		if (!(slot = hmap_put(&inst, top >= 0 ? (uint64_t)top : (1ULL << 63) | i, (uint32_t)an->res.ncolls)))
			goto out;
		struct an_coll *c = &an->res.colls[*slot];
		if (*slot == an->res.ncolls) {
			int32_t st = step_at(an, launch);
			an->res.ncolls++;
			*c = (struct an_coll){
				.step = st >= 0 ? an->cpu_steps[st].step : -1, .kind = kind < 0 ? AN_CK_OTHER : kind,
				.pg = k->pg ? k->pg : src ? src->pg : 0,
				.seq = k->seq >= 0 ? k->seq : src ? src->seq : -1,
				.launch_ns = launch, .start_ns = k->s, .end_ns = k->e,
				.bytes = src ? coll_bytes(an, src) : -1,
				.group_size = k->gsize > 0 ? k->gsize : src && src->gsize > 0 ? src->gsize : 0,
				.thread = thread,
			};
			if (k->coll || k->in >= 0 || k->out >= 0)
				c->bytes = -1;	/* the kernels' own, summed below */
		}
		if ((k->coll || k->in >= 0 || k->out >= 0) && (bytes = coll_bytes(an, k)) >= 0)
			c->bytes = c->bytes < 0 ? bytes : tp_sat_add(c->bytes, bytes);
		c->start_ns = k->s < c->start_ns ? k->s : c->start_ns;
		c->end_ns = k->e > c->end_ns ? k->e : c->end_ns;
		c->time_ns = tp_sat_add(c->time_ns, k->e - k->s);
		c->kernels++;
	}
	host_collectives(an, &inst);
	if (an->res.ncolls > 1)
		qsort(an->res.colls, an->res.ncolls, sizeof(*an->res.colls), cmp_coll);
	rc = before_ops(an);
out:
	hmap_free(&hc);
	hmap_free(&inst);
	return rc;
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

int analysis_finish(struct analysis *an, const struct an_result **out, struct tp_errbuf *err)
{
	/*
	 * Host spans sorted by thread and start, nested (which of them GPU spans
	 * need found depends on their parents), and found by the ids GPU spans
	 * name (link_maps()): for the operator that launched each GPU span, by
	 * breakdown() for the step, collectives() for the collective. ops_table()
	 * adds their self times.
	 */
	if (an->nh > 1)
		sort_hrec(an->h, an->nh);
	if (!(an->parent = tp_malloc((an->nh + 1) * sizeof(*an->parent))) || nest(an, an->parent, 0) ||
	    (an->ng && link_maps(an, an->parent)) || breakdown(an) || collectives(an))
		return nomem(err);
	/* done with: the peaks of ops_table() and the memory model are not theirs
	 * (ops_table() frees the GPU spans once it has their time) */
	hmap_free(&an->corr);
	hmap_free(&an->ext);
	tp_free(an->c);
	an->c = NULL;
	an->nc = an->ccap = 0;
	if (ops_table(an))
		return nomem(err);
	if (memory(an, err))
		return err->rc ? err->rc : nomem(err);
	if (an->res.nsteps > 1)
		qsort(an->res.steps, an->res.nsteps, sizeof(*an->res.steps), cmp_step);
	*out = &an->res;
	return TP_OK;
}
