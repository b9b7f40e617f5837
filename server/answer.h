/*
 * answer.h: the JSON and CSV of GET answers, shaped from what the store returns
 * (store/store.h's rows and structs) and what analysis computes from them.
 * The store speaks SQL and returns data; analysis computes; this shapes; the
 * handlers glue them (reads.c, memread.c). Not yet here: the answers that
 * analysis/ builds as JSON itself (diagnosis, distributed, critical path,
 * compare, the run's timeline findings).
 */
#ifndef ANSWER_H
#define ANSWER_H

#include <jansson.h>

#include "store/store.h"

/* {"runs": [...]} (GET /runs); NULL when out of memory. */
json_t *answer_runs(const struct store_run_info *v, size_t n);
/* {"run": {...}, "artifacts": [...]} (GET /runs/{run}). */
json_t *answer_run(const struct store_run_info *run, const struct store_artifact_info *a, size_t n);
/* {"artifact": {...}} (GET /runs/{run}/artifacts/{id}, an upload's answer). */
json_t *answer_artifact(const struct store_artifact_info *a);

/* {"rank", "steps": [...], "notes": [...]} (GET /runs/{run}/steps). */
json_t *answer_steps(int rank, const struct store_step *v, size_t n);

/* {"rank", "device", "ops": [...], "total", "source", "communication"[, "key_averages"]} (GET /ops). */
json_t *answer_ops(const struct store_table *t);
/* {"rank", "kind", "kernels": [...], "total"} (GET /kernels). */
json_t *answer_kernels(const struct store_table *t);

/* {"ranks": [...], "slowest_rank", "stragglers", "straggler_threshold_pct"} (GET /ranks); NULL when out
 * of memory. Sorts each rank's durations. */
json_t *answer_ranks(struct store_rank *v, size_t n);

/* {"run", "metrics": [...]} (GET /metrics). */
json_t *answer_metrics(const char *run, const struct store_rows *rows);
/* {"run", "rank", "frames": [...]} (GET /stacks). */
json_t *answer_stacks(const char *run, int rank, const struct store_rows *rows);

/* {"run", "rank", "actions": [...]} (GET /actions): each action with its cProfile rows, where it has any. */
json_t *answer_actions(const char *run, int rank, const struct store_rows *actions, const struct store_rows *functions);

/* {"run", "rank", "artifact", "run_id", "step_time", "tokens_per_s", "max_mem_bytes", "profiler", ...} (GET /canary):
 * the metrics in ns and bytes. */
json_t *answer_canary(const char *run, int rank, int64_t artifact, const struct canary_metrics *m);

/* {"run", "rank", "gpus": [{"index", "columns": [{"name", "unit", "t_ns", "values", "mean", "min", "max"}]}]}
 * (GET /gpu, less its steps): samples grouped by GPU and column, as store_run_gpu reads them. */
json_t *answer_gpu(const char *run, int rank, const struct store_rows *rows);

/* {"rank", "device", "artifact", "snapshots", "reserved_bytes", "allocated_bytes", "segments": [{..., "blocks"}]}
 * (GET /memory/segments): the store's rows grouped by segment, the bytes reserved and alive summed. */
json_t *answer_segments(const struct store_segments *g);

/* What a memory answer says besides its points. */
struct answer_mem {
	const struct store_mem_series *s;
	size_t total;			/* points_total: the stitched series' */
	const int64_t *peak;		/* the peak's row (NULL: none) */
	int64_t baseline;		/* what was allocated before the first recording began */
	const int64_t *gaps;		/* [start, end) pairs where nothing recorded */
	size_t ngaps;
	long window_points;		/* -1: no window asked */
};
/*
 * {"rank", "source", "device", "points_total", "t_ns", "categories": {...}, "allocated", "reserved",
 * "peak", "baseline", "gaps"[, "window_points"]} (GET /memory): the n points row.
 */
json_t *answer_memory(const struct answer_mem *m, const int64_t (*row)[MEM_POINT_COLS], const uint8_t *reserved_null,
		      size_t n);
/* The same less its arrays, in the order points=0 sends them (the arrays follow, column after column). */
json_t *answer_memory_head(const struct answer_mem *m);
/* {"rank", "source", "device", "t_ns", "bytes", "groups"} (GET /memory/peak): peak is the split peak row. */
json_t *answer_memory_peak(const struct store_mem_series *s, const int64_t *peak, const struct store_rows *groups);

/* Whether an answer's table member (steps, ops, kernels, ranks) has a CSV form (?format=csv). */
int answer_csv_table(const char *member);
/*
 * That table as CSV (RFC 4180, a header always, the body's "rank" as a first column where the
 * table is per rank, fields a spreadsheet would run as formulas neutralised): text to tp_free
 * and its length; NULL when out of memory. member must have a CSV form.
 */
char *answer_csv(const json_t *body, const char *member, size_t *len);

#endif
