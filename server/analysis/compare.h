/*
 * compare.h: what changed between two runs (GET /api/v1/compare): step time
 * with a significance test over steps, the step breakdown, throughput from
 * posted metrics, peak memory by category, operators and kernels per step
 * joined by name, and a verdict with its reasons in words: regression,
 * improvement, no_change, or not_comparable when the runs cannot have one; for
 * runs with rlhf-canary metrics, what its notebook compares (step time,
 * tokens/s, peak memory) and, where no trace has steps, the verdict from
 * them; Lightning reports' actions and folded stacks' frames joined by name
 * (what grew). The store
 * gathers each run's figures into a struct compare_run; this module only
 * computes. Pure: no SQL, no HTTP.
 */
#ifndef COMPARE_H
#define COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/analysis.h"
#include "canarymodel.h"
#include "memmodel.h"

struct compare_item {
	char *name;
	int kind;			/* kernels: enum an_gpu_kind; ops: 0 */
	int64_t calls, ns;		/* ops: host self time; kernels: GPU time (compare_run's in_steps says over what) */
};

struct compare_metric {
	char *name;
	double mean;			/* over the steps posted */
	int64_t count;
};

/* One run's figures at one rank; every pointer owned (compare_run_release frees them). */
struct compare_run {
	char *run;
	int rank;
	int64_t *dur_ns;		/* the complete steps' durations, in time order */
	int64_t *step_no;		/* their ProfilerStep numbers; NULL: not known (no window left out) */
	size_t nsteps;
	int64_t comp_ns[AN_NCOMP];	/* the step breakdown summed over steps */
	struct compare_item *ops;	/* host operators, by name */
	size_t nops;
	struct compare_item *kernels;	/* GPU kernels, memcpys and memsets, by (kind, name) */
	size_t nkernels;
	int in_steps;			/* ops and kernels are the work inside the complete steps, else whole trace */
	int has_memory;			/* the fields below are set */
	char mem_device[16], mem_source[16];
	int64_t peak_bytes, peak_cat[MEM_NCAT];	/* the highest allocated point */
	int64_t reserved_bytes;		/* highest reserved; -1: the source does not know */
	/* the allocation sites live at the peak, as /memory/peak groups them: name = the site (a
	 * trace's op, a snapshot's user frame; "" when none names it), kind = its category's index
	 * in mem_cat_names, ns = its bytes, calls = its allocations */
	struct compare_item *sites;
	size_t nsites;
	struct compare_metric *metrics;
	size_t nmetrics;
	const char *ops_source;		/* "trace" or "key_averages" (static) */
	int has_canary;			/* canary is the rank's newest rlhf-canary metrics.json */
	struct canary_perf canary;
	struct compare_item *actions;	/* the newest Lightning report's actions: calls, ns = total */
	size_t nactions;
	struct compare_item *frames;	/* folded stacks' frames: calls = self, ns = total (the files' unit) */
	size_t nframes;
};

void compare_run_release(struct compare_run *r);

#define COMPARE_THRESHOLD_PCT 5.0
#define COMPARE_ALPHA 0.05
/* A profiling window of this many complete steps or more has its first left out of the step time test. */
#define COMPARE_WINDOW_MIN 3

struct compare_opts {
	double threshold_pct;		/* a change smaller than this (either way) is no change */
	double alpha;			/* step time changes count only when p < alpha */
	long limit;			/* at most this many ops and kernels each */
	int from_baseline;		/* base is the target's project baseline */
};

/* The answer of GET /api/v1/compare (new reference); NULL when out of memory. */
json_t *compare_runs(struct compare_run *base, struct compare_run *target, const struct compare_opts *o);

#endif
