/*
 * diagnosis.c: the rules. Each looks at figures analysis stored at ingest
 * and, when it fires, gives the measured evidence and what to do. Severity
 * "warning": worth fixing; "info": worth knowing. A trace with no problem
 * gives no warning.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "analysis/diagnosis.h"

/*
 * Thresholds. Where torch-tb-profiler had a rule (profiler/data.py:analyze,
 * shared/reference/anchors.md 1.3) we keep its number so results agree with
 * what users know.
 */
/* tb-profiler: "DataLoader > 5% of step time -> suggest num_workers" */
#define DATALOADER_SHARE_WARN 0.05
/* tb-profiler: "any GPU utilization < 50% -> suggest a larger batch" */
#define GPU_UTIL_WARN 0.50
/* host-only time (CPU busy while no GPU work runs) at least twice the GPU's
 * busy time: the GPU waits on Python/dispatch far more than it computes */
#define CPU_GPU_RATIO_WARN 2.0
/* copies above 10% of GPU busy time (tb-profiler's threshold for
 * communication, the other non-compute GPU time, is also 10%) */
#define MEMCPY_SHARE_WARN 0.10
/* tb-profiler: communication above 10% of step time that no computation
 * hides ("exposed") -> suggest overlapping it */
#define COMM_SHARE_WARN 0.10
/* host blocked in GPU->CPU syncs for 5% of step time or more */
#define SYNC_SHARE_WARN 0.05
/* step time rising by 10% or more from first to last step along a
 * least-squares line that fits well (Pearson r >= 0.7), over 4+ steps */
#define DRIFT_MIN_STEPS 4
#define DRIFT_RISE_WARN 0.10
#define DRIFT_MIN_R 0.7
/* half the kernels shorter than AN_TINY_KERNEL_NS while the GPU is busy
 * less than 70% of the step: launch overhead, not the GPU, sets the pace */
#define TINY_SHARE_WARN 0.50
#define TINY_UTIL_MAX 0.70
/* peak allocated within 10% of the device's memory: the caching allocator
 * needs room for fragmentation (reserved runs above allocated) and for the
 * next block, so small changes from here end in out-of-memory errors */
#define MEM_NEAR_CAPACITY 0.90
/* allocated memory at the end of each step higher than at the end of the
 * one before, over 3+ steps, and by 1% of the peak or more in all: something
 * made in every step outlives it. Strictly rising, so that a first step that
 * creates optimizer state and then stays flat is no leak */
#define GROWTH_MIN_STEPS 3
#define GROWTH_MIN_SHARE 0.01
/* rlhf-canary's "quick diagnosis" (notebooks/02_profiler_deep_dive.ipynb),
 * on its metrics.json profiler block, with its numbers: CPU time over
 * twice CUDA time; copies over 30% of the CUDA time of the top CUDA ops */
#define CANARY_CPU_RATIO_WARN 2.0
#define CANARY_COPY_SHARE_WARN 0.30

const char *const diag_sync_names[DIAG_NSYNC] = {
	"aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize",
	"cudaEventSynchronize", "cudaMemcpy",
};
/* which of those are runtime calls (the rest are operators that end in one) */
static const int sync_is_runtime[DIAG_NSYNC] = { 0, 0, 1, 1, 1, 1 };

static double share(int64_t part, int64_t whole)
{
	return whole > 0 ? (double)part / (double)whole : 0;
}

static int add(json_t *findings, const char *id, const char *severity, const char *title, json_t *evidence,
	       const char *advice)
{
	json_t *f = evidence ? json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", id, "severity", severity, "title",
					 title, "evidence", evidence, "advice", advice)
			     : NULL;

	return !f || json_array_append_new(findings, f) ? -1 : 0;
}

static int rule_dataloader(const struct diag_input *in, json_t *out)
{
	double s = share(in->comp_ns[AN_DATALOADER], in->steps_ns);
	char title[160];

	if (s <= DATALOADER_SHARE_WARN)
		return 0;
	snprintf(title, sizeof(title), "Data loading takes %.1f%% of step time", s * 100);
	return add(out, "dataloader", "warning", title,
		   json_pack("{s:f, s:I, s:I, s:f}", "dataloader_pct", s * 100, "dataloader_ns",
			     (json_int_t)in->comp_ns[AN_DATALOADER], "steps_ns", (json_int_t)in->steps_ns,
			     "threshold_pct", DATALOADER_SHARE_WARN * 100),
		   "Load batches in background workers: DataLoader(num_workers=N) with N about the CPU cores"
		   " per GPU, persistent_workers=True so workers survive epochs, pin_memory=True with"
		   " .to(device, non_blocking=True), and prefetch_factor >= 2.");
}

/* tb-profiler's GPU utilization: the share of step time with any kernel running
 * (computation or communication) */
static double gpu_util(const struct diag_input *in)
{
	return share(in->gpu_busy_ns, in->steps_ns);
}

static int rule_gpu_util(const struct diag_input *in, json_t *out)
{
	double u = gpu_util(in);
	double idle = share(in->comp_ns[AN_IDLE], in->steps_ns);
	char title[160];

	if (u >= GPU_UTIL_WARN)
		return 0;
	snprintf(title, sizeof(title), "The GPU runs kernels only %.1f%% of the step time", u * 100);
	return add(out, "low_gpu_utilization", "warning", title,
		   json_pack("{s:f, s:f, s:I, s:I, s:I, s:f}", "gpu_utilization_pct", u * 100, "idle_pct", idle * 100,
			     "gpu_busy_ns", (json_int_t)in->gpu_busy_ns, "kernel_ns", (json_int_t)in->comp_ns[AN_KERNEL],
			     "steps_ns", (json_int_t)in->steps_ns, "threshold_pct", GPU_UTIL_WARN * 100),
		   "Give the GPU more work per launch: a larger batch size, mixed precision (torch.autocast),"
		   " and fewer host-side pauses (see the other findings for where the step waits).");
}

static int rule_cpu_bound(const struct diag_input *in, json_t *out)
{
	int64_t host = tp_sat_add(tp_sat_add(in->comp_ns[AN_RUNTIME], in->comp_ns[AN_DATALOADER]), in->comp_ns[AN_CPU]);
	int64_t gpu = tp_sat_add(tp_sat_add(tp_sat_add(in->comp_ns[AN_KERNEL], in->comp_ns[AN_MEMCPY]), in->comp_ns[AN_MEMSET]),
				 in->comp_ns[AN_COMM]);
	double ratio = gpu > 0 ? (double)host / (double)gpu : INFINITY;
	char title[160];

	if (ratio < CPU_GPU_RATIO_WARN || !host)
		return 0;
	snprintf(title, sizeof(title), "CPU-only time is %.1fx the GPU's busy time", isinf(ratio) ? 0 : ratio);
	return add(out, "cpu_bound", "warning", title,
		   json_pack("{s:I, s:I, s:o, s:f}", "host_only_ns", (json_int_t)host, "gpu_busy_ns", (json_int_t)gpu,
			     "ratio", isinf(ratio) ? json_null() : json_real(ratio), "threshold_ratio", CPU_GPU_RATIO_WARN),
		   "The host, not the GPU, sets the pace: torch.compile or CUDA graphs cut Python and dispatch"
		   " overhead; move per-step host work (logging, metrics, data preparation) out of the loop"
		   " or into DataLoader workers.");
}

/* the advice follows where the copy time goes: device to device, pageable or pinned host memory */
static int rule_memcpy(const struct diag_input *in, json_t *out)
{
	int64_t busy = tp_sat_add(tp_sat_add(in->kernel_ns, in->memcpy_ns), in->memset_ns);
	double s = share(in->memcpy_ns, busy);
	const char *advice;
	char title[160];

	if (s <= MEMCPY_SHARE_WARN)
		return 0;
	snprintf(title, sizeof(title), "Memory copies take %.1f%% of GPU time", s * 100);
	if (2 * in->dtod_ns >= in->memcpy_ns)
		advice = "Most of the copy time is device to device: copies between tensors on the GPU (.clone(),"
			 " .contiguous(), torch.cat, .to() between devices or dtypes), which pinned host memory does not"
			 " help. Copy less: in-place ops, views instead of .contiguous(), preallocated buffers.";
	else if (in->pinned_ns > in->pageable_ns)
		advice = "The host copies already use pinned memory: overlap them with compute (non_blocking=True,"
			 " the next batch copied while this one runs) or copy less, and avoid .cpu()/.numpy() on"
			 " intermediate results.";
	else
		advice = "Copy less and overlap the rest: keep tensors on the GPU between steps, use pinned host"
			 " memory (pin_memory=True) with non_blocking=True copies, and avoid .cpu()/.numpy() on"
			 " intermediate results.";
	return add(out, "memcpy_share", "warning", title,
		   json_pack("{s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "memcpy_pct", s * 100, "memcpy_ns",
			     (json_int_t)in->memcpy_ns, "memcpy_calls", (json_int_t)in->memcpy_calls, "gpu_busy_ns",
			     (json_int_t)busy, "dtoh_calls", (json_int_t)in->dtoh_calls, "dtod_ns", (json_int_t)in->dtod_ns,
			     "pageable_ns", (json_int_t)in->pageable_ns, "pinned_ns", (json_int_t)in->pinned_ns,
			     "threshold_pct", MEMCPY_SHARE_WARN * 100),
		   advice);
}

static int rule_comm(const struct diag_input *in, json_t *out)
{
	int64_t exposed = in->comp_ns[AN_COMM], all = tp_sat_add(exposed, in->comm_overlap_ns);
	double s = share(exposed, in->steps_ns);
	char title[160];

	if (s <= COMM_SHARE_WARN)
		return 0;
	snprintf(title, sizeof(title), "Communication no computation hides takes %.1f%% of step time", s * 100);
	return add(out, "exposed_communication", "warning", title,
		   json_pack("{s:f, s:I, s:I, s:f, s:I, s:f}", "exposed_pct", s * 100, "communication_ns", (json_int_t)exposed,
			     "comm_overlap_ns", (json_int_t)in->comm_overlap_ns, "overlapped_pct",
			     share(in->comm_overlap_ns, all) * 100, "steps_ns", (json_int_t)in->steps_ns,
			     "threshold_pct", COMM_SHARE_WARN * 100),
		   "Overlap gradient communication with the backward pass: DistributedDataParallel and FSDP"
		   " start each bucket's all-reduce as soon as its gradients are ready, so tune bucket_cap_mb"
		   " (smaller buckets start sooner, larger ones cost fewer launches) and keep the first"
		   " buckets small; with gradient accumulation, wrap the steps that do not update in"
		   " model.no_sync() so only the last one communicates; check the interconnect (NCCL_DEBUG=INFO)"
		   " when even overlapped collectives are slow. When one rank arrives last at the collectives"
		   " (the run's distributed view names it), the others' wait for it shows here: the fix is"
		   " that rank's work, not the network.");
}

static int rule_sync(const struct diag_input *in, json_t *out)
{
	int64_t rt_calls = 0, rt_ns = 0, op_calls, op_ns;
	json_t *calls = json_object();
	char title[200];
	int i;

	if (!calls)
		return -1;
	for (i = 0; i < DIAG_NSYNC; i++) {
		if (sync_is_runtime[i]) {
			rt_calls = tp_sat_add(rt_calls, in->sync_calls[i]);
			rt_ns = tp_sat_add(rt_ns, in->sync_ns[i]);
		}
		if (in->sync_calls[i] && json_object_set_new(calls, diag_sync_names[i],
							     json_integer((json_int_t)in->sync_calls[i]))) {
			json_decref(calls);
			return -1;
		}
	}
	/* the waits inside complete steps, when the rows say (a CUDA tensor's .item() ends in
	 * cudaStreamSynchronize there; a CPU tensor's, as AdamW's step counts, in none, and the
	 * profiler's own synchronize after the last step is in no step). Rows analysed before
	 * migration 016: the whole trace's, where aten::item calls aten::_local_scalar_dense,
	 * which ends in a runtime sync: the innermost that the trace has, never the same wait twice */
	op_calls = in->sync_calls[1] ? in->sync_calls[1] : in->sync_calls[0];
	op_ns = in->sync_calls[1] ? in->sync_ns[1] : in->sync_ns[0];
	int64_t n = rt_calls > op_calls ? rt_calls : op_calls;
	int64_t ns = rt_ns > op_ns ? rt_ns : op_ns;
	if (in->step_sync_known) {
		n = in->step_sync_calls;
		ns = in->step_sync_ns;
	}
	double per_step = in->nsteps ? (double)n / (double)in->nsteps : 0;
	double s = share(ns, in->steps_ns);
	const char *sev = s >= SYNC_SHARE_WARN ? "warning" : per_step >= 1 ? "info" : NULL;
	if (!sev) {
		json_decref(calls);
		return 0;
	}
	snprintf(title, sizeof(title), "The host waits for the GPU %.1f times per step (%.1f%% of step time)",
		 per_step, s * 100);
	return add(out, "gpu_sync", sev, title,
		   json_pack("{s:I, s:f, s:I, s:f, s:o, s:I, s:f}", "sync_calls", (json_int_t)n, "per_step", per_step,
			     "sync_ns", (json_int_t)ns, "sync_pct", s * 100, "calls_by_name", calls, "dtoh_copies",
			     (json_int_t)in->dtoh_calls, "threshold_pct", SYNC_SHARE_WARN * 100),
		   "Each .item(), .cpu(), print(tensor) or torch.cuda.synchronize() in the loop stalls the"
		   " CPU until the GPU catches up: accumulate metrics on the GPU and read them every N steps,"
		   " and drop explicit synchronize() calls outside of timing code.");
}

static int rule_drift(const struct diag_input *in, json_t *out)
{
	size_t n = in->nsteps, i;
	double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0, slope, r, mean, rise;
	char title[160];

	if (n < DRIFT_MIN_STEPS)
		return 0;
	for (i = 0; i < n; i++) {
		double x = (double)i, y = (double)in->step_dur_ns[i];
		sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
	}
	double vx = (double)n * sxx - sx * sx, vy = (double)n * syy - sy * sy, cxy = (double)n * sxy - sx * sy;
	if (vx <= 0 || vy <= 0)
		return 0;
	slope = cxy / vx;
	r = cxy / sqrt(vx * vy);
	mean = sy / (double)n;
	rise = slope * (double)(n - 1) / (mean - slope * (double)(n - 1) / 2);	/* vs the fitted first step */
	if (rise < DRIFT_RISE_WARN || r < DRIFT_MIN_R)
		return 0;
	snprintf(title, sizeof(title), "Step time grows %.1f%% from the first step to the last", rise * 100);
	return add(out, "step_drift", "warning", title,
		   json_pack("{s:I, s:f, s:f, s:f, s:I, s:I}", "steps", (json_int_t)n, "slope_ns_per_step", slope,
			     "rise_pct", rise * 100, "r", r, "first_ns", (json_int_t)in->step_dur_ns[0], "last_ns",
			     (json_int_t)in->step_dur_ns[n - 1]),
		   "Something accumulates across steps: tensors kept alive in Python lists (losses without"
		   " .item()/detach()), a growing autograd graph, allocator fragmentation (see the memory"
		   " timeline), or thermal throttling; compare the first and last steps' operators.");
}

/* what to do when a category dominates the peak, in mem_cat_names order */
static const char *const mem_advice[MEM_NCAT] = {
	"Parameters fill the device: shard them (FSDP / ZeRO-3), keep weights in bf16, or use a smaller model"
	" per device (tensor or pipeline parallelism).",
	"Optimizer state fills the device: a lighter optimizer (SGD with momentum, Adafactor, 8-bit Adam) or"
	" shard the state across ranks (ZeRO-1 / FSDP).",
	"Input batches fill the device: smaller batches per step, or keep preprocessing on the host.",
	"Temporaries fill the device: look for operators with large workspaces (attention without a memory-"
	"efficient kernel, large matmul workspaces); chunk them or use F.scaled_dot_product_attention.",
	"Activations fill the device: activation checkpointing (torch.utils.checkpoint) on the largest blocks,"
	" smaller micro-batches with gradient accumulation, or autocast to bf16/fp16.",
	"Gradients fill the device: shard them (ZeRO-2 / FSDP), accumulate in bf16, and zero_grad(set_to_none="
	"True) so they are freed between steps.",
	"Autograd's own buffers fill the device: fewer saved intermediates (checkpointing) or smaller"
	" micro-batches.",
	"Most of the peak has no known category: upload a memory snapshot (torch.cuda.memory._dump_snapshot)"
	" or PyTorch's export_memory_timeline of the run to see what it is.",
};

static json_t *by_category(const int64_t *cat)
{
	json_t *o = json_object();

	for (int c = 0; o && c < MEM_NCAT; c++)
		if (json_object_set_new(o, mem_cat_names[c], json_integer(cat[c]))) {
			json_decref(o);
			return NULL;
		}
	return o;
}

static int rule_mem_capacity(const struct diag_input *in, json_t *out)
{
	double s = share(in->mem_peak, in->mem_capacity);
	int dom = 0;
	char title[200];

	if (in->mem_capacity <= 0 || s < MEM_NEAR_CAPACITY)
		return 0;
	for (int c = 1; c < MEM_NCAT; c++)
		if (in->mem_peak_cat[c] > in->mem_peak_cat[dom])
			dom = c;
	snprintf(title, sizeof(title), "Peak memory is %.0f%% of %s's %.1f GiB; %s holds %.0f%% of it", s * 100,
		 in->mem_device, (double)in->mem_capacity / (1 << 30), mem_cat_names[dom],
		 share(in->mem_peak_cat[dom], in->mem_peak) * 100);
	return add(out, "memory_near_capacity", "warning", title,
		   json_pack("{s:s, s:s, s:I, s:I, s:f, s:s, s:I, s:o*, s:f}", "device", in->mem_device, "source",
			     in->mem_source, "peak_bytes", (json_int_t)in->mem_peak, "capacity_bytes",
			     (json_int_t)in->mem_capacity, "peak_pct", s * 100, "dominant_category", mem_cat_names[dom],
			     "dominant_bytes", (json_int_t)in->mem_peak_cat[dom], "by_category",
			     by_category(in->mem_peak_cat), "threshold_pct", MEM_NEAR_CAPACITY * 100),
		   mem_advice[dom]);
}

static int rule_mem_growth(const struct diag_input *in, json_t *out)
{
	size_t n = in->nstep_alloc, i;
	int64_t rise;
	char title[160];

	if (n < GROWTH_MIN_STEPS)
		return 0;
	for (i = 1; i < n; i++)
		if (in->step_alloc[i] <= in->step_alloc[i - 1])
			return 0;
	rise = tp_sat_sub(in->step_alloc[n - 1], in->step_alloc[0]);
	if ((double)rise < GROWTH_MIN_SHARE * (double)in->mem_peak)
		return 0;
	snprintf(title, sizeof(title), "Allocated memory grows by %.1f MiB every step",
		 (double)rise / (double)(n - 1) / (1 << 20));
	return add(out, "memory_growth", "warning", title,
		   json_pack("{s:s, s:I, s:I, s:I, s:I}", "device", in->mem_device, "steps", (json_int_t)n,
			     "first_step_bytes", (json_int_t)in->step_alloc[0], "last_step_bytes",
			     (json_int_t)in->step_alloc[n - 1], "per_step_bytes", (json_int_t)(rise / (int64_t)(n - 1))),
		   "Tensors made in each step outlive it: a running loss summed without .item() or .detach()"
		   " (it keeps every step's graph), outputs or activations appended to a list, hooks that store"
		   " tensors. A memory snapshot (torch.cuda.memory._record_memory_history) shows which"
		   " allocations are never freed, and where they were made.");
}

static int rule_tiny_kernels(const struct diag_input *in, json_t *out)
{
	double s = share(in->tiny_calls, in->kernel_calls);
	double u = gpu_util(in);
	char title[160];

	if (s < TINY_SHARE_WARN || (in->nsteps && u >= TINY_UTIL_MAX))
		return 0;
	snprintf(title, sizeof(title), "%.0f%% of kernels run shorter than %d us: launch overhead dominates",
		 s * 100, AN_TINY_KERNEL_NS / 1000);
	return add(out, "tiny_kernels", in->nsteps ? "warning" : "info", title,
		   json_pack("{s:I, s:I, s:f, s:I, s:I, s:f}", "kernel_calls", (json_int_t)in->kernel_calls,
			     "tiny_calls", (json_int_t)in->tiny_calls, "tiny_pct", s * 100, "tiny_ns",
			     (json_int_t)in->tiny_ns, "tiny_threshold_ns", (json_int_t)AN_TINY_KERNEL_NS,
			     "gpu_utilization_pct", u * 100),
		   "Fuse small kernels and launch fewer of them: torch.compile (mode=\"reduce-overhead\" adds"
		   " CUDA graphs), CUDA graphs for static shapes, fused optimizers (foreach=True or"
		   " fused=True), or a larger batch so each kernel does more.");
}

/* ---- rlhf-canary metrics.json ---- */

static int rule_canary_cpu(const struct canary_metrics *m, json_t *out)
{
	const struct canary_perf *f = &m->perf;
	double ratio = f->cpu_total_ms / f->cuda_total_ms;
	char title[160];

	if (!(f->cpu_total_ms > 0 && f->cuda_total_ms > 0) || ratio <= CANARY_CPU_RATIO_WARN)
		return 0;
	snprintf(title, sizeof(title), "CPU time is %.1fx CUDA time in the canary's profiled steps", ratio);
	return add(out, "canary_cpu_bound", "warning", title,
		   json_pack("{s:s, s:I, s:I, s:f, s:f}", "run_id", m->run_id, "cpu_time_total_ns",
			     (json_int_t)tp_round_i64(f->cpu_total_ms * 1e6), "cuda_time_total_ns",
			     (json_int_t)tp_round_i64(f->cuda_total_ms * 1e6), "ratio", ratio, "threshold",
			     CANARY_CPU_RATIO_WARN),
		   "The canary's rule: CPU time over twice CUDA time suggests a CPU bottleneck (dataloader,"
		   " tokenization or Python overhead); a larger batch gives each launch more work. Both totals sum"
		   " inclusive times over every operator (nested ones counted again), as the canary computes them:"
		   " a ratio, not a share of wall time. A torch.profiler trace of the same steps shows where the"
		   " host time goes.");
}

static int rule_canary_no_cuda(const struct canary_metrics *m, json_t *out)
{
	const struct canary_perf *f = &m->perf;

	if (f->cuda_total_ms != 0 || !(f->cpu_total_ms > 0))
		return 0;
	return add(out, "canary_no_cuda_times", "info", "The canary recorded no CUDA time",
		   json_pack("{s:s, s:I, s:I}", "run_id", m->run_id, "cpu_time_total_ns",
			     (json_int_t)tp_round_i64(f->cpu_total_ms * 1e6), "cuda_time_total_ns", (json_int_t)0),
		   "The canary's notebook puts this down to CUPTI being unavailable (common on some cloud GPUs);"
		   " the canary also reads cuda_time_total from key_averages() rows, which newer torch names"
		   " device_time_total, so a GPU run can read 0 there. The CPU side is still recorded.");
}

/* name contains needle, ignoring ASCII case */
static int contains_nocase(const char *name, const char *needle)
{
	size_t n = strlen(needle);

	for (; *name; name++) {
		size_t i = 0;
		while (i < n && name[i] && tolower((unsigned char)name[i]) == needle[i])
			i++;
		if (i == n)
			return 1;
	}
	return 0;
}

static int rule_canary_copies(const struct canary_metrics *m, json_t *out)
{
	const struct canary_op *ops = m->ops[CANARY_CUDA];
	double copy = 0, total = 0;
	json_t *names = json_array();
	char title[160];

	for (size_t i = 0; names && i < m->nops[CANARY_CUDA]; i++) {
		total += ops[i].self_ms;
		/* the notebook's 'copy' in the name (aten::copy_), and Memcpy kernels, which it means too */
		if (contains_nocase(ops[i].name, "copy") || contains_nocase(ops[i].name, "memcpy")) {
			copy += ops[i].self_ms;
			if (json_array_append_new(names, json_string(ops[i].name)))
				return json_decref(names), -1;
		}
	}
	if (!names || !(total > 0) || copy / total <= CANARY_COPY_SHARE_WARN)
		return json_decref(names), names ? 0 : -1;
	snprintf(title, sizeof(title), "Memory copies are %.0f%% of the canary's top CUDA time", copy / total * 100);
	return add(out, "canary_copies", "warning", title,
		   json_pack("{s:s, s:I, s:I, s:f, s:I, s:o}", "run_id", m->run_id, "copy_ns",
			     (json_int_t)tp_round_i64(copy * 1e6), "top_cuda_ns", (json_int_t)tp_round_i64(total * 1e6),
			     "copy_pct", copy / total * 100, "top_cuda_ops", (json_int_t)m->nops[CANARY_CUDA], "copies",
			     names),
		   "CPU<->GPU transfers take the GPU's time: keep tensors on the GPU between steps, move batches"
		   " once with pin_memory=True and non_blocking=True, and look for dtype or device conversions"
		   " (.to(), .cpu(), .item()) inside the step. The share is of the top CUDA operators the canary"
		   " lists (at most 10), as its notebook computes it.");
}

/* ---- Lightning profiler reports ---- */

/* A callback's hook: "[Callback]Class.hook" (Lightning >= 1.6), or "on_*" (1.x reports, where the
 * hooks of every callback are timed together under the hook's name). */
static int is_callback(const char *name)
{
	return !strncmp(name, "[Callback]", 10) || !strncmp(name, "on_", 3);
}

static int rule_slow_callbacks(const struct diag_input *in, json_t *out)
{
	json_t *slow = json_array();
	int64_t worst = 0;
	char title[200];
	const char *worst_name = NULL;

	for (size_t i = 0; slow && i < in->nactions; i++) {
		const struct diag_action *a = &in->actions[i];
		/* per call when the report prints a mean; AdvancedProfiler's prints a total only */
		int64_t t = a->mean_ns >= 0 ? a->mean_ns : a->total_ns;
		if (!is_callback(a->name) || t <= DIAG_CALLBACK_SLOW_NS)
			continue;
		if (json_array_append_new(slow, json_pack("{s:s, s:I, s:I, s:I}", "action", a->name, "calls",
							   (json_int_t)a->calls, "mean_ns", (json_int_t)a->mean_ns,
							   "total_ns", (json_int_t)a->total_ns)))
			return json_decref(slow), -1;
		if (t > worst) {
			worst = t;
			worst_name = a->name;
		}
	}
	if (!slow || !json_array_size(slow))
		return json_decref(slow), slow ? 0 : -1;
	snprintf(title, sizeof(title), "%s takes %.2f s%s", worst_name, (double)worst / 1e9,
		 json_array_size(slow) > 1 ? " (and other callbacks over a second)" : "");
	return add(out, "lightning_slow_callback", "warning", title,
		   json_pack("{s:o, s:I}", "callbacks", slow, "threshold_ns", (json_int_t)DIAG_CALLBACK_SLOW_NS),
		   "A callback that runs for seconds stops training while it runs (checkpointing, logging images,"
		   " computing metrics on the whole validation set). Run it less often (every_n_epochs,"
		   " every_n_train_steps), make it asynchronous (save checkpoints with an async CheckpointIO,"
		   " log fewer samples), or move the work to a separate process.");
}

/* The action with the largest printed share among those whose name contains one of words. */
static const struct diag_action *largest_share(const struct diag_input *in, const char *const *words, size_t nwords)
{
	const struct diag_action *best = NULL;

	for (size_t i = 0; i < in->nactions; i++) {
		const struct diag_action *a = &in->actions[i];
		size_t k = 0;
		while (k < nwords && !contains_nocase(a->name, words[k]))
			k++;
		if (k < nwords && a->share_bp >= 0 && (!best || a->share_bp > best->share_bp))
			best = a;
	}
	return best;
}

static int rule_optimizer_share(const struct diag_input *in, json_t *out)
{
	static const char *const words[] = { "optimizer_step" };
	const struct diag_action *a = largest_share(in, words, 1);
	char title[200];

	if (!a || a->share_bp <= DIAG_OPTIMIZER_SHARE_BP)
		return 0;
	snprintf(title, sizeof(title), "The optimizer step (%s) is %.1f%% of the Lightning report's time", a->name,
		 a->share_bp / 100.0);
	return add(out, "lightning_optimizer_step", "warning", title,
		   json_pack("{s:s, s:I, s:I, s:f, s:f}", "action", a->name, "calls", (json_int_t)a->calls,
			     "total_ns", (json_int_t)a->total_ns, "share_pct", a->share_bp / 100.0, "threshold_pct",
			     DIAG_OPTIMIZER_SHARE_BP / 100.0),
		   "Lightning times the closure (forward and backward) inside optimizer_step, so a large share"
		   " is often the model itself; past that: a fused or foreach optimizer (torch.optim.AdamW(...,"
		   " fused=True)), fewer optimizer steps (accumulate_grad_batches), and no per-step"
		   " .item() or logging of every parameter. A torch.profiler trace of a few steps shows which.");
}

static int rule_validation_share(const struct diag_input *in, json_t *out)
{
	static const char *const words[] = { "validation", "visuali" };
	const struct diag_action *a = largest_share(in, words, 2);
	char title[200];

	if (!a || a->share_bp <= DIAG_VALIDATION_SHARE_BP)
		return 0;
	snprintf(title, sizeof(title), "Validation between epochs (%s) takes %.1f%% of the Lightning report's time",
		 a->name, a->share_bp / 100.0);
	return add(out, "lightning_validation", "info", title,
		   json_pack("{s:s, s:I, s:I, s:f, s:f}", "action", a->name, "calls", (json_int_t)a->calls,
			     "total_ns", (json_int_t)a->total_ns, "share_pct", a->share_bp / 100.0, "threshold_pct",
			     DIAG_VALIDATION_SHARE_BP / 100.0),
		   "Training waits while validation (and any visualisation hooked to it) runs: validate less"
		   " often (check_val_every_n_epoch, val_check_interval), on fewer batches (limit_val_batches),"
		   " and keep image or plot logging out of the validation loop.");
}

/* ---- nvidia-smi logs ---- */

static int rule_smi_util(const struct diag_input *in, json_t *out)
{
	for (size_t i = 0; i < in->ngpus; i++) {
		const struct diag_gpu *g = &in->gpus[i];
		char title[160];
		if (!g->util_samples || !(g->util_mean_pct < DIAG_GPU_UTIL_LOW_PCT))
			continue;
		snprintf(title, sizeof(title), "GPU %d was %.1f%% utilized on average in the nvidia-smi log", g->index,
			 g->util_mean_pct);
		if (add(out, "gpu_log_low_utilization", g->util_mean_pct < 50 ? "warning" : "info", title,
			json_pack("{s:i, s:f, s:I, s:I, s:f, s:i}", "gpu", g->index, "mean_utilization_pct",
				  g->util_mean_pct, "samples", (json_int_t)g->util_samples, "samples_under_threshold",
				  (json_int_t)g->util_low, "share_under_threshold_pct",
				  100.0 * (double)g->util_low / (double)g->util_samples, "threshold_pct",
				  DIAG_GPU_UTIL_LOW_PCT),
			"The training guide's mark is over 80 %. A GPU below it waits: for data (more DataLoader"
			" workers, pin_memory, prefetching), for the host (launch overhead: torch.compile, CUDA"
			" graphs, a larger batch), or for other ranks. nvidia-smi's utilization counts any kernel"
			" running, not how busy it keeps the GPU: a profiler trace of the same steps says which."))
			return -1;
	}
	return 0;
}

static int rule_smi_memory(const struct diag_input *in, json_t *out)
{
	for (size_t i = 0; i < in->ngpus; i++) {
		const struct diag_gpu *g = &in->gpus[i];
		char title[160];
		if (!(g->mem_total_bytes > 0) || g->mem_used_bytes / g->mem_total_bytes < DIAG_GPU_MEM_FULL)
			continue;
		snprintf(title, sizeof(title), "GPU %d's memory reached %.1f%% of its capacity in the nvidia-smi log",
			 g->index, 100 * g->mem_used_bytes / g->mem_total_bytes);
		if (add(out, "gpu_log_memory_full", "warning", title,
			json_pack("{s:i, s:f, s:f, s:f, s:f}", "gpu", g->index, "used_bytes", g->mem_used_bytes,
				  "capacity_bytes", g->mem_total_bytes, "used_pct",
				  100 * g->mem_used_bytes / g->mem_total_bytes, "threshold_pct", DIAG_GPU_MEM_FULL * 100),
			"Memory this close to capacity is one allocation from an out-of-memory error, and the"
			" caching allocator may be freeing and retrying already (cudaMalloc retries in a memory"
			" snapshot). Lower the batch or sequence length, use activation checkpointing or mixed"
			" precision, or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against"
			" fragmentation. nvidia-smi counts every process's memory and the allocator's cache."))
			return -1;
	}
	return 0;
}

json_t *diagnosis_run(const struct diag_input *in)
{
	json_t *f = json_array();
	int has_gpu = in->kernel_calls > 0 || in->memcpy_calls > 0;

	if (!f)
		return NULL;
	if (!in->traces) {
		if (add(f, "no_trace", "info", "This rank has no profiler trace to diagnose",
			json_pack("{s:i}", "traces", 0),
			"Upload a torch.profiler trace (*.pt.trace.json[.gz]) for this run and rank."))
			goto oom;
		goto done;
	}
	if (!in->nsteps &&
	    add(f, "no_steps", "info", "The trace has no ProfilerStep spans: the whole trace is analysed as one span",
		json_pack("{s:i, s:b}", "steps", 0, "whole_trace", in->whole_trace),
		"Per-step findings (step time, drift) need torch.profiler.profile(schedule=...) with"
		" prof.step() called once per iteration."))
		goto oom;
	if (!has_gpu && add(f, "no_gpu_activity", "info", "The trace has no GPU kernels or copies",
			    json_pack("{s:i}", "kernels", 0),
			    "Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] to see GPU time."))
		goto oom;
	/* step rules: over the complete steps, or the whole trace when it has none */
	int spans = in->nsteps || in->whole_trace;
	if (spans && rule_dataloader(in, f))
		goto oom;
	if (spans && has_gpu && (rule_gpu_util(in, f) || rule_cpu_bound(in, f) || rule_comm(in, f)))
		goto oom;
	if (has_gpu && (rule_memcpy(in, f) || rule_sync(in, f)))
		goto oom;
	if (rule_drift(in, f) || (in->kernel_calls && rule_tiny_kernels(in, f)))
		goto oom;
done:
	if (in->mem_source[0] && (rule_mem_capacity(in, f) || rule_mem_growth(in, f)))
		goto oom;
	if (in->canary && in->canary->perf.has_profiler &&
	    (rule_canary_cpu(in->canary, f) || rule_canary_no_cuda(in->canary, f) || rule_canary_copies(in->canary, f)))
		goto oom;
	if (rule_slow_callbacks(in, f) || rule_optimizer_share(in, f) || rule_validation_share(in, f) ||
	    rule_smi_util(in, f) || rule_smi_memory(in, f))
		goto oom;
	json_t *o = json_pack("{s:i, s:o}", "rank", in->rank, "findings", f);
	return o;
oom:
	json_decref(f);
	return NULL;
}
