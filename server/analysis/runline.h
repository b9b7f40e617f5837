/*
 * runline.h: a rank's whole training as one line of steps (GET
 * /api/v1/runs/{run}/timeline): the steps of every cycle and chunk in time
 * order, numbered into profiling cycles, downsampled for long runs, and what
 * only shows across cycles (step time drifting, memory at step ends rising,
 * one cycle much slower than its neighbours). Pure: no SQL, no HTTP.
 */
#ifndef RUNLINE_H
#define RUNLINE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/analysis.h"

struct rl_step {
	int64_t step, start_ns, dur_ns;
	int64_t comp_ns[AN_NCOMP];
	int64_t host_end_ns;		/* the ProfilerStep#N span's end (start_ns + dur_ns in rows before 016) */
	int64_t alloc;			/* allocated at host_end_ns; -1: not known */
	int64_t artifact;		/* whose ProfilerStep span it is */
	int cycle;			/* set by runline_cycles, from 0 */
};

/*
 * Number the cycles of steps s (in time order): a new cycle starts where the
 * step number does not follow the previous one, or where the gap since the
 * previous step's end is longer than that step (a stretch not profiled).
 * Returns how many cycles.
 */
int runline_cycles(struct rl_step *s, size_t n);

/*
 * At most points of the n steps (0: all), as indices into s in order: the
 * slowest step of each of points equal stretches, and always the first and
 * the last (a long run stays readable, and slow steps are never averaged away).
 */
size_t runline_pick(const struct rl_step *s, size_t n, size_t points, size_t *keep);

/* The findings across cycles, as diagnosis.h shapes them; NULL when out of memory. */
json_t *runline_findings(const struct rl_step *s, size_t n, int ncycles);

/*
 * nvidia-smi writes its timestamps in the node's local time, without a zone; traces
 * carry UTC epoch times. The offset (ns) to add to the steps' times to put them on a
 * log's clock whose samples span [first, last] (read as UTC): 0 when the steps fall
 * in that span as they are, else the whole quarter-hour within -12 h .. +14 h (the
 * zones there are) that puts the most step starts in it, the smallest such shift
 * on a tie. Returns how many step starts fall in the span with it: 0, no alignment.
 */
#define RUNLINE_TZ_STEP_NS (15 * 60 * 1000000000LL)
size_t runline_log_offset(const struct rl_step *s, size_t n, int64_t first, int64_t last, int64_t *offset);

/* Thresholds */
#define RL_DRIFT_PCT 20.0		/* last cycle's mean step over the run's start (the median of its first third) */
#define RL_START_MAX 16			/* the start is the median of at most this many first cycles */
#define RL_SLOW_CYCLE_RATIO 1.5		/* a cycle's mean step over its neighbours' */
#define RL_MEM_GROWTH_PCT 5.0		/* allocated at the last cycle's end over the first's */
#define RL_MEM_GROWTH_MIN (64ll << 20)

#endif
