/*
 * canarymodel.h: what rlhf-canary's metrics.json says of a run
 * (shared/fixtures/formats/FORMATS.md, "rlhf-canary metrics.json"), in the
 * file's own units: seconds per optimizer step, MiB (max_memory_allocated /
 * 1024^2, "mb" in the canary's names), milliseconds in the profiler block.
 * The parser (ingest/canary.c) fills it, the store keeps and reads it back,
 * diagnosis and compare read it; it depends on none of them.
 */
#ifndef CANARYMODEL_H
#define CANARYMODEL_H

#include <stddef.h>
#include <stdint.h>

/* perf.step_time's members, in the file's order */
enum { CANARY_MEAN, CANARY_MEDIAN, CANARY_P50, CANARY_P95, CANARY_P99, CANARY_MIN, CANARY_MAX, CANARY_STD,
       CANARY_NSTAT };
extern const char *const canary_stat_names[CANARY_NSTAT];	/* "mean", ... */

/* The figures of one run; doubles are NaN where the file has null (or no such key). */
struct canary_perf {
	int64_t steps;				/* step_time.count: steps after the canary's warm-up */
	double step_s[CANARY_NSTAT];
	double tokens_per_s;			/* approx_tokens_per_sec: an upper bound (padding to max_length) */
	double max_mem_mb;
	double gpu_util_pct, dataloader_wait_pct;
	int has_profiler;			/* the profiler block is there and not null */
	double cuda_total_ms, cpu_total_ms, self_cuda_total_ms;
};

/* profiler.top_cpu_ops / top_cuda_ops */
enum { CANARY_CPU, CANARY_CUDA };
#define CANARY_MAX_OPS 100		/* the canary writes at most 10 a list */
struct canary_op {
	char *name;
	double self_ms;
	int64_t count;
};

struct canary_metrics {
	struct canary_perf perf;
	char *run_id, *timestamp, *status, *trace_path;	/* NULL: null or absent (run_id never) */
	char *env_json, *config_json;		/* the objects as compact JSON; NULL: absent */
	double duration_s;
	int64_t nan_steps, inf_steps;		/* -1: absent */
	double final_loss;
	int loss_diverged;			/* -1: absent */
	struct canary_op *ops[2];		/* [CANARY_CPU], [CANARY_CUDA] */
	size_t nops[2];
};

/* Free what m holds (not m) and zero it; NULL is a no-op. */
void canary_metrics_clear(struct canary_metrics *m);

#endif
