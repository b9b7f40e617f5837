/*
 * diagnosis.h: findings about one rank of a run, from the figures analysis
 * stored at ingest (the store gathers them into struct diag_input). Pure:
 * no SQL, no HTTP.
 */
#ifndef DIAGNOSIS_H
#define DIAGNOSIS_H

#include <jansson.h>
#include <stdint.h>

#include "analysis/analysis.h"
#include "canarymodel.h"
#include "memmodel.h"

/* GPU->CPU synchronisation points, counted from the operator table */
#define DIAG_NSYNC 6
#define DIAG_MAX_STEPS 256
extern const char *const diag_sync_names[DIAG_NSYNC];

/* A Lightning report's action; -1 where the report does not print the figure. */
struct diag_action {
	const char *name;
	int64_t calls, mean_ns, total_ns;
	int64_t share_bp;			/* of the report's total, hundredths of a percent */
};

/* The training guide: "GPU utilization should be > 80 %"; memory this full is near capacity. */
#define DIAG_GPU_UTIL_LOW_PCT 80
#define DIAG_GPU_MEM_FULL 0.95
/* The guides' Lightning rules: a callback over a second, an optimizer step over 20 % of the
 * report's total, validation (or visualisation) between epochs over 10 %. */
#define DIAG_CALLBACK_SLOW_NS 1000000000LL
#define DIAG_OPTIMIZER_SHARE_BP 2000
#define DIAG_VALIDATION_SHARE_BP 1000

/* One GPU of the rank's nvidia-smi logs: utilization.gpu over its samples, and the fullest
 * memory sample (memory.used over used + free, or over memory.total). */
struct diag_gpu {
	int index;
	int64_t util_samples, util_low;		/* samples with utilization.gpu, those under DIAG_GPU_UTIL_LOW_PCT */
	double util_mean_pct;			/* NaN: no samples */
	double mem_used_bytes, mem_total_bytes;	/* at the fullest sample; 0: no memory columns */
};

struct diag_input {
	int rank;
	int64_t traces;			/* ready trace artifacts of the rank */
	/* complete steps in time order */
	size_t nsteps;
	const int64_t *step_dur_ns;
	int64_t steps_ns;			/* their sum */
	int64_t comp_ns[AN_NCOMP];		/* step components summed over complete steps (or the whole trace) */
	int64_t comm_overlap_ns;		/* communication under computation, summed likewise */
	int64_t gpu_busy_ns;			/* any kernel running (computation or communication), likewise */
	int whole_trace;			/* no steps: comp_ns and steps_ns are the whole trace's */
	/* GPU activity of the whole trace */
	int64_t kernel_calls, kernel_ns, tiny_calls, tiny_ns;
	int64_t memcpy_calls, memcpy_ns, memset_ns;
	int64_t dtoh_calls, dtoh_ns;		/* device-to-host copies ("Memcpy DtoH ...") */
	int64_t dtod_ns, pageable_ns, pinned_ns;	/* copy time by "DtoD", "Pageable", "Pinned" in its name */
	/* host side: calls and time of each diag_sync_names[i] */
	int64_t sync_calls[DIAG_NSYNC], sync_ns[DIAG_NSYNC];
	/* the runtime waits started inside complete steps (steps.sync_calls, sync_ns);
	 * step_sync_known 0: rows analysed before migration 016, the counts above then */
	int64_t step_sync_calls, step_sync_ns;
	int step_sync_known;
	/* memory: the rank's timeline, as /memory answers it (mem_source "": none) */
	char mem_source[16], mem_device[16];
	int64_t mem_peak, mem_peak_cat[MEM_NCAT];
	int64_t mem_capacity;			/* the device's totalGlobalMem (deviceProperties); 0: unknown */
	size_t nstep_alloc;
	int64_t step_alloc[DIAG_MAX_STEPS];	/* allocated at the end of each of the first steps */
	/* the rank's newest rlhf-canary metrics.json (borrowed); NULL: none */
	const struct canary_metrics *canary;
	/* the rank's newest Lightning profiler report (borrowed) */
	const struct diag_action *actions;
	size_t nactions;
	/* the rank's nvidia-smi logs, per GPU index (borrowed) */
	const struct diag_gpu *gpus;
	size_t ngpus;
};


/* {"findings": [...]} for shared/api.md; NULL when out of memory. */
json_t *diagnosis_run(const struct diag_input *in);

#endif
