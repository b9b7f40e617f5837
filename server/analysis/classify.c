/*
 * classify.c: what names say: sync calls, kernel classes, communication
 * operators and collectives, dtype sizes, step numbers, and each interned
 * string's category and name flags (an_cls_of()).
 */
#include "analysis/analysis_int.h"

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

int an_step_number(const char *s, int64_t *n)
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
	if (an_step_number(s, &n))
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

/* an_cls_of()'s slow path: an->cls grown to hold id, and id classified: 0, or -1 when out of memory */
int an_cls_fill(struct analysis *an, uint32_t id)
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
	return 0;
}
