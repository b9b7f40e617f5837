/*
 * store.h: the database. The only module that speaks SQL, through db.h: an
 * SQLite file (WAL), or a PostgreSQL database that several servers share.
 *
 * Writing: each ingest owns a struct store_writer (a private connection,
 * used from one thread). An artifact is begun (status 'ingesting', invisible
 * to every read), filled batch by batch, each batch its own short
 * transaction, then committed to 'ready' or failed to 'error' in one
 * transaction; a failed artifact keeps its raw bytes and loses every other
 * row. Artifacts still 'ingesting' when the server starts were interrupted
 * (a crash); store_open() removes them whole, since no client was told they
 * succeeded.
 *
 * Reading: a struct store_reader per request (a connection from a pool).
 * Reads return rows (struct store_rows) and structs, never JSON: the caller
 * owns them and frees each with the *_free or *_release function named
 * beside it, except what a function says it lends (borrowed until a later
 * call, or until the reader closes). The one JSON here is a run's:
 * store_run_patch takes a jansson patch (borrowed), and store_runs gives
 * its tags and metadata as JSON text.
 *
 * server/store/store_int.h says which file implements which part.
 */
#ifndef STORE_H
#define STORE_H

#include <jansson.h>
#include <stdint.h>

#include "analysis/analysis.h"
#include "analysis/compare.h"
#include "analysis/diagnosis.h"
#include "analysis/distributed.h"
#include "canarymodel.h"
#include "event.h"
#include "memmodel.h"
#include "tp.h"

struct store;
struct store_writer;
struct store_reader;

/*
 * Open (creating and migrating if needed) the database at path, and remove
 * interrupted ingests. *out is freed with store_close().
 */
int store_open(const char *path, struct store **out, struct tp_errbuf *err);
/*
 * A number that changes whenever a write commits: answers computed from
 * reads at one generation stay true until it changes (the HTTP layer's cache).
 */
uint64_t store_generation(struct store *st);
/*
 * Whether the database answers: always for a file; for PostgreSQL, a query
 * (TP_ERR_UNAVAILABLE while it is down or was never reached).
 */
int store_health(struct store *st, struct tp_errbuf *err);
/* 1 when other servers may write the database too (PostgreSQL), 0 for an SQLite file. */
int store_shared(const struct store *st);
/* Checkpoint the WAL and close. NULL is a no-op. */
void store_close(struct store *st);

/*
 * Tests: from the n-th file write, truncate or sync on (0 = the next), every
 * one fails as on a full disk; n < 0 turns that off.
 */
void store_fail_io_after(long n);
/* How many were refused since the last store_fail_io_after(). */
long store_io_failures(void);

/* ---- writing ---- */

struct store_string {
	uint32_t id, len;
	const char *s;			/* borrowed */
};

/* One batch of rows for an artifact; every pointer is borrowed. */
struct store_batch {
	const struct tp_event *ev;	/* for the events table */
	size_t nev;
	uint64_t ev_first;		/* ordinal of ev[0] within the artifact */
	const struct tp_event *mev;	/* [memory] and [OutOfMemory] events */
	size_t nmev;
	uint64_t mev_first;
	const struct store_string *str;
	size_t nstr;
	const uint8_t *raw;		/* the next piece of the stored raw bytes */
	size_t nraw;
	uint32_t raw_seq;
};

/* What an artifact ends with. */
struct store_final;

/*
 * A format's own rows: f->result (its parser's result) under artifact, in the writer's open
 * transaction; 0 or a tp_err. One per format that has rows of its own, in its own file
 * store/fmt_*.c with its header (pipeline/formats.c's table names it); its tables are listed
 * in format_tables by its migration, so that deleting an artifact deletes their rows.
 */
typedef int (*store_fmt_fn)(struct store_writer *w, int64_t artifact, const struct store_final *f,
			    struct tp_errbuf *err);

struct store_final {
	const char *sha256;		/* of the upload as sent */
	uint64_t bytes;			/* upload size as sent */
	uint64_t events;
	int64_t base_ns;
	int rank;
	const char *kind;
	const char *raw_encoding;	/* "upload", "gzip" (as sent), "zstd-frames" (pipeline/ingest.c) or, kept
					 * before 2026-11-29, "gzip-members" */
	const char *meta_json;		/* may be NULL */
	int64_t peak_allocated;		/* -1: no memory data */
	const struct an_result *analysis;	/* steps, ops, kernels (times as written); may be NULL */
	const int64_t *step_src;	/* per analysis step, the artifact its span came from (0, or NULL: this one) */
	size_t same_colls;		/* store_rank_replace: the first collectives, stored as they are by the last write */
	an_string_fn str;		/* names of the analysis' string ids */
	void *str_payload;
	const struct mem_series *mem;	/* memory timelines, one per device (times as written) */
	size_t nmem;
	store_fmt_fn store;		/* writes the format's own rows of result (pipeline/formats.c); may be NULL */
	const void *result;		/* its parser's result, as store reads it */
	const char *error_code;		/* for store_artifact_fail */
	const char *error_msg;
};

int store_writer_open(struct store *st, struct store_writer **out, struct tp_errbuf *err);
void store_writer_close(struct store_writer *w);
/*
 * One transaction around several writes (each store_* write below then joins it rather than
 * committing alone): readers see all of them or none. After a failed write, roll back.
 */
int store_tx_begin(struct store_writer *w, struct tp_errbuf *err);
int store_tx_commit(struct store_writer *w, struct tp_errbuf *err);
void store_tx_rollback(struct store_writer *w);
/* Reads on the writer's own connection (they see its open transaction); owned by w, not closed. */
struct store_reader *store_writer_reader(struct store_writer *w);
/*
 * The derived tables of (run, rank) from all of its trace artifacts: replace the rank's steps,
 * operators, kernels and collectives (keyed by (run, rank)) and every trace artifact's memory
 * timelines by f's (analysis, mem, str, base_ns), the memory timelines stored under owner, the
 * rank's first trace (0: none, nothing stored); owner's memory points are gone over
 * block by block, a block already stored as f has it staying (counted in *count, when not NULL,
 * once written); a series' blocks before its same (memmodel.h) and f's first same_colls
 * collectives stay unread, unless another server may write the store (PostgreSQL). One
 * transaction, or part of one.
 */
struct store_blocks {
	int64_t kept, written;	/* memory point blocks (of MEM_PT_BLOCK points) found as stored, written */
	int64_t unread;		/* known stored by the last write (mem_series.same), not read */
	int64_t colls_kept, colls_written;	/* collectives' rows: left as stored (same_colls), written */
};
int store_rank_replace(struct store_writer *w, const char *run, int rank, int64_t owner,
		       const struct store_final *f, struct store_blocks *count, struct tp_errbuf *err);

/* Create the run if needed and an artifact in status 'ingesting'. */
int store_artifact_begin(struct store_writer *w, const char *run, int rank, const char *kind,
			 const char *name, int64_t *id_out, struct tp_errbuf *err);
int store_write_batch(struct store_writer *w, int64_t artifact, const struct store_batch *b,
		      struct tp_errbuf *err);
/*
 * Make the artifact 'ready'. If the run already has an artifact (ready or
 * error) with the same sha256, this one is removed instead and that one's id
 * is returned in *existing_out (else *existing_out = 0). A trace's analysis
 * (f->analysis, its memory timelines) is stored as its rank's, keyed by (run,
 * rank), when the rank has no other ready trace; else it is not stored, and
 * the rank is derived again (store_rank_defer).
 */
int store_artifact_commit(struct store_writer *w, int64_t artifact, const struct store_final *f,
			  int64_t *existing_out, struct tp_errbuf *err);
/* Mark 'error' keeping the raw bytes; same duplicate rule as commit. */
int store_artifact_fail(struct store_writer *w, int64_t artifact, const struct store_final *f,
			int64_t *existing_out, struct tp_errbuf *err);
/* Remove the artifact entirely (the upload was refused), and its run if now empty. */
int store_artifact_drop(struct store_writer *w, int64_t artifact);

/*
 * Apply a validated patch to an existing run, in one transaction: "project"
 * (string, or null to clear), "tags" (array of strings, replaced),
 * "metadata" (an RFC 7386 merge patch: null deletes a key, objects merge),
 * "baseline" (true makes this run its project's only baseline). Borrowed.
 * TP_ERR_NOTFOUND when there is no such run; TP_ERR_TOOBIG (metadata_too_large)
 * when the merged metadata would pass STORE_METADATA_MAX bytes of JSON.
 */
#define STORE_METADATA_MAX (64 * 1024)
int store_run_patch(struct store_writer *w, const char *run, json_t *patch, struct tp_errbuf *err);

/*
 * Remove artifact (0: every artifact, the metrics and the run itself) of run, in one
 * transaction: readers see the run as it was or without them, never between. *deleted: how
 * many artifacts went; *run_gone: whether the run went too (a single artifact takes its run
 * along when the run has nothing else); *trace_rank: the rank of the artifact when it was a
 * ready trace (its rank's analysis must be derived again: runrank.h; it goes here when that was
 * the rank's last trace, as every rank's does with the whole run), else -1. TP_ERR_NOTFOUND when there is no such run or
 * artifact, TP_ERR_CONFLICT ("ingest_in_progress") while one of them is still being ingested.
 */
int store_run_delete(struct store_writer *w, const char *run, int64_t artifact, int64_t *deleted,
		     int *run_gone, int *trace_rank, struct tp_errbuf *err);

/* One per-step metric (POST /api/v1/runs/{run}/metrics); name borrowed. */
struct store_metric {
	int64_t step;
	const char *name;
	double value;
};
/*
 * Write n metrics of an existing run, all or none (one transaction); a
 * (name, step) the run already has is replaced. TP_ERR_NOTFOUND when there is no such run.
 */
int store_metrics_put(struct store_writer *w, const char *run, const struct store_metric *m, size_t n,
		      struct tp_errbuf *err);

/* ---- reading ---- */

int store_reader_open(struct store *st, struct store_reader **out, struct tp_errbuf *err);
void store_reader_close(struct store_reader *r);

/*
 * A run as GET /runs and /runs/{run} show it (answer.h shapes it). Owned;
 * NULL strings and -1 numbers are what the database does not have.
 */
struct store_run_info {
	char *name, *project;
	int64_t created_ns;
	char *tags_json, *metadata_json;	/* as stored (JSON text) */
	int baseline;
	int64_t artifacts;			/* not ingesting */
	int64_t ranks;				/* with a ready artifact */
	int64_t peak_allocated;			/* the highest of its ready artifacts */
	int analysis_pending;			/* traces joined a rank since its analysis (runrank.h) */
	int polled;				/* a collector polled for its captures (migration 021) */
	int64_t *step_dur_ns;			/* the complete steps of its lowest rank with steps */
	size_t nsteps;
};
/* Every run, newest first (run NULL), or the one named run (TP_ERR_NOTFOUND run_not_found). */
int store_runs(struct store_reader *r, const char *run, struct store_run_info **out, size_t *n,
	       struct tp_errbuf *err);
void store_runs_free(struct store_run_info *v, size_t n);

/* An artifact as GET /runs/{run}/artifacts/{id} and the upload's answer show it. Owned. */
struct store_artifact_info {
	int64_t id, rank, bytes, events, created_ns;	/* -1: NULL */
	char *run, *kind, *name, *sha256, *status;
	char *error_code, *error;		/* NULL: no error */
};
/* The artifacts of run, any status but ingesting, by id (id 0), or the one with id
 * (TP_ERR_NOTFOUND artifact_not_found). *out may be NULL when there are none. */
int store_artifacts(struct store_reader *r, const char *run, int64_t id, struct store_artifact_info **out,
		    size_t *n, struct tp_errbuf *err);
void store_artifacts_free(struct store_artifact_info *v, size_t n);
/*
 * Per-rank analysis, summed over the rank's ready artifacts; rank -1: the
 * run's lowest rank with data. TP_ERR_NOTFOUND in err when no such run.
 */
/* A step of a rank as stored (GET /runs/{run}/steps shapes them). */
struct store_step {
	int64_t step, start_ns, dur_ns;
	int64_t cpu_dur_ns;			/* the ProfilerStep span on the host (rows before 007: dur_ns) */
	int64_t comp_ns[AN_NCOMP];
	int64_t comm_overlap_ns;
	int64_t gpu_busy_ns;			/* any kernel running (rows before 007: kernel) */
	int incomplete;				/* enum in analysis.h: 0, or why (an_incomplete_notes) */
	int whole_trace;
};
/* The rank's steps in time order (*out tp_free'd, NULL when none); *rank_out the rank read. */
int store_steps(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_step **out,
		size_t *n, struct tp_errbuf *err);
/*
 * The rank's steps across the whole run (runline.h), in time order, with allocated memory at
 * each step's end from the series /memory answers by default (its device in device, "" when
 * none; device NULL: steps alone, alloc not set). *out (tp_free) may be NULL when there are no steps.
 */
struct rl_step;
int store_timeline(struct store_reader *r, const char *run, int rank, struct rl_step **out, size_t *n,
		   int *rank_out, char device[16], struct tp_errbuf *err);
/*
 * A result set as the engine gives it: ncols named columns (static names), nrows rows of
 * typed values, row-major. What answer.c turns into a JSON array of objects.
 */
enum store_type { SV_NULL, SV_INT, SV_REAL, SV_TEXT };
struct store_val {
	int type;			/* enum store_type */
	int64_t i;
	double r;
	char *s;			/* SV_TEXT, owned */
};
struct store_rows {
	size_t ncols, nrows;
	const char *const *cols;
	struct store_val *v;		/* v[row * ncols + col] */
};
void store_rows_free(struct store_rows *rows);

/* A rank's table of operators or kernels: the rows asked for, and the total over all. */
struct store_table {
	int rank;
	int sel;			/* ops: enum an_device; kernels: enum an_gpu_kind */
	struct store_rows list, total;
	/* ops only */
	const char *source;		/* "trace" or "key_averages" (static) */
	struct store_rows communication;	/* the collectives among the operators, summed */
	struct store_rows footers;	/* key_averages: its tables' footers (ncols 0 otherwise) */
};
void store_table_free(struct store_table *t);
/* The rank's operators on device (enum an_device), sorted by "self_ns", "total_ns", "calls" or
 * "name", at most limit rows: {name, calls, self_ns, total_ns[, mem_bytes, self_mem_bytes]}. */
int store_ops(struct store_reader *r, const char *run, int rank, int device, const char *sort, long limit,
	      struct store_table *out, struct tp_errbuf *err);
/* The rank's GPU spans of kind (enum an_gpu_kind) by name, largest total first. */
int store_kernels(struct store_reader *r, const char *run, int rank, int kind, long limit, struct store_table *out,
		  struct tp_errbuf *err);
/* A rank of a run: its complete steps' durations and its memory devices, /memory's order. */
struct store_rank {
	int rank;
	int64_t *dur_ns;		/* in time order */
	size_t nsteps;
	char **devices;
	size_t ndevices;
};
/* The run's ranks with a ready artifact, in order (TP_ERR_NOTFOUND run_not_found). */
int store_ranks(struct store_reader *r, const char *run, struct store_rank **out, size_t *n,
		struct tp_errbuf *err);
void store_ranks_free(struct store_rank *v, size_t n);
/*
 * The memory series a rank's memory reads answer from (analysis/memseries.h
 * stitches it): on device (NULL: the rank's first GPU with memory data, else
 * cpu), from the best source (PyTorch's export, then a snapshot, then trace
 * inference); every recording of that source on that device, in the order
 * of their first point, with each one's baseline (what was allocated before
 * it began); artifact and peak_seq are the recording and point of the
 * highest peak (peak_seq -1: none). A recording is an export's or snapshot's
 * artifact, or 0: the rank's trace series (the one recording of a trace
 * source; keyed by run_id and rank, migration 024). TP_ERR_NOTFOUND
 * no_memory_data.
 */
struct store_mem_series {
	int rank;
	int64_t run_id;
	char device[16], source[16];	/* source: "pytorch", "snapshot" or "trace" */
	int64_t artifact, peak_seq;
	int64_t *recordings, *baselines;
	size_t nrecordings;
	int64_t param_bytes;		/* the run's metadata param_bytes (0: none, or PyTorch's own categories) */
};
int store_mem_series(struct store_reader *r, const char *run, int rank, const char *device,
		     struct store_mem_series *out, struct tp_errbuf *err);
void store_mem_series_free(struct store_mem_series *s);
/*
 * A recording's points on device in order, one at a time (artifact 0: the
 * trace series of rank of the run run_id; only_seq >= 0: that
 * point alone): next gives the columns of a row that cols names (bit k: row[k]
 * of memmodel.h's MEM_POINT_COLS, as stored; with MEM_COL_RESERVED whether it
 * is unknown; STORE_MEM_SEQ: the point's seq), the others left as they were:
 * 1, 0 at the end, or a tp_err. A walk of one column reads only it (a read of
 * every point walks the series once per column).
 */
#define STORE_MEM_SEQ (1u << MEM_POINT_COLS)
#define STORE_MEM_ALL ((1u << (MEM_POINT_COLS + 1)) - 1)
struct store_mem_points;
int store_mem_points_open(struct store_reader *r, int64_t run_id, int rank, int64_t artifact, const char *device,
			  int64_t only_seq, struct store_mem_points **out, struct tp_errbuf *err);
int store_mem_points_next(struct store_mem_points *c, uint32_t cols, int64_t row[MEM_POINT_COLS],
			  uint8_t *reserved_null, int64_t *seq, struct tp_errbuf *err);
void store_mem_points_close(struct store_mem_points *c);
/* What was alive at a recording's peak on device: {category, op, bytes, count} (op null: pre-existing or an export). */
int store_mem_groups(struct store_reader *r, int64_t run_id, int rank, int64_t artifact, const char *device,
		     struct store_rows *out, struct tp_errbuf *err);
/*
 * The rank's Lightning actions {artifact, action, calls, mean_ns, total_ns, share_bp, n}, largest
 * total first, the first STORE_ACTIONS_MAX of them, and their AdvancedProfiler's cProfile rows
 * {artifact, action (its n), location, ncalls, primitive_calls, tottime_ns, cumtime_ns} by artifact,
 * action, row (TP_ERR_NOTFOUND no_actions).
 */
#define STORE_ACTIONS_MAX 1000
int store_run_actions(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_rows *actions,
		      struct store_rows *functions, struct tp_errbuf *err);
/*
 * The nvidia-smi logs' samples of (run, rank) {gpu, name, unit, t_ns, value, samples, mean, min, max} by
 * GPU index, column name and time (TP_ERR_NOTFOUND no_gpu_log when none). A log of more than
 * STORE_GPU_POINTS rows comes as about that many, one in every rows / STORE_GPU_POINTS rounded up;
 * samples, mean, min and max are its column's over all the samples.
 */
#define STORE_GPU_POINTS 2000
int store_run_gpu(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_rows *out,
		  struct tp_errbuf *err);
/*
 * The newest rlhf-canary metrics.json of (run, rank) into *m (canary_metrics_clear frees it, also
 * on failure), its artifact and rank (TP_ERR_NOTFOUND no_canary when the rank has none).
 */
int store_run_canary(struct store_reader *r, const char *run, int rank, int *rank_out, struct canary_metrics *m,
		     int64_t *artifact, struct tp_errbuf *err);
/* The rank's folded stacks' frames {frame, self, total}, the top by total (TP_ERR_NOTFOUND no_stacks). */
int store_run_stacks(struct store_reader *r, const char *run, int rank, int top, int *rank_out,
		     struct store_rows *out, struct tp_errbuf *err);
/*
 * A snapshot's segments at dump time: the rank's snapshot with segments on device (NULL: as
 * store_mem_series picks, the first GPU), the newest unless artifact names another of them; rows
 * {seg, address, total_size, stream, segment_type, offset, size, requested_size, state, category,
 * op} by segment then block (a segment without blocks: one row, its block columns null; a block
 * with a category was alive at dump time). TP_ERR_NOTFOUND no_segments when there is none.
 */
struct store_segments {
	int rank;
	char device[16];
	int64_t artifact;		/* the snapshot read */
	int64_t *snapshots;		/* the rank's snapshots with segments on device, newest first */
	size_t nsnapshots;
	struct store_rows rows;
};
int store_memory_segments(struct store_reader *r, const char *run, int rank, const char *device, int64_t artifact,
			  struct store_segments *out, struct tp_errbuf *err);
void store_segments_free(struct store_segments *s);

/* The figures diagnosis works from; *durs (the complete steps' durations, in time order) and,
 * when nums is not NULL, *nums (their step numbers) are freed by the caller, also on failure. */
int store_diag_input(struct store_reader *r, const char *run, int rank, struct diag_input *in,
		     int64_t **durs, int64_t **nums, struct tp_errbuf *err);

/*
 * What GET /runs/{run}/distributed reads (distributed.h): the run's trace ranks, their steps
 * and collectives. Released with dist_input_release, also on failure. TP_ERR_NOTFOUND when
 * there is no such run.
 */
int store_dist_input(struct store_reader *r, const char *run, struct dist_input *in, struct tp_errbuf *err);

/* The run's metrics as rows {step, name, value} by name then step; name NULL: every name.
 * TP_ERR_NOTFOUND run_not_found when there is no such run. */
int store_metrics(struct store_reader *r, const char *run, const char *name, struct store_rows *out,
		  struct tp_errbuf *err);
/*
 * The baseline of run's project (runs without a project share one): its name
 * into out (129 bytes); TP_ERR_NOTFOUND ("no_baseline") when the project has none.
 */
int store_baseline_of(struct store_reader *r, const char *run, char out[129], struct tp_errbuf *err);
/*
 * One run's figures for compare_runs() at rank (-1: its lowest rank with
 * data): step durations and breakdown, host operators, GPU kernels (a
 * trace's rank with complete steps: the work inside them, in_steps), the
 * memory peak of its first GPU with memory data (else cpu), the means of its
 * metrics. *out is released with compare_run_release, also on failure.
 * TP_ERR_NOTFOUND when there is no such run.
 */
int store_compare_input(struct store_reader *r, const char *run, int rank, struct compare_run *out,
			struct tp_errbuf *err);

/*
 * An artifact's events of one kind, STORE_EVENTS or STORE_MEMORY_EVENTS, in
 * file order, at most 512 at a time: fn gets n events, with string pid/tid
 * resolved; events and strings are borrowed until fn returns. Returns 0, fn's nonzero return, or a
 * negative tp_err.
 */
enum { STORE_EVENTS = 0, STORE_MEMORY_EVENTS = 1 };
typedef int (*store_events_fn)(void *payload, const struct tp_event *ev, size_t n);
int store_events_each(struct store_reader *r, int64_t artifact, int kind, store_events_fn fn, void *payload,
		      struct tp_errbuf *err);

/*
 * The trace events of one rank (its ready trace artifacts in upload order;
 * in each, the events, then the [memory] events) that may overlap [start_ns, end_ns) (absolute; INT64_MIN / INT64_MAX for
 * no bound), block by block: the caller filters each event. r must outlive t.
 */
struct store_trace;
int store_trace_open(struct store_reader *r, const char *run, int rank, int64_t start_ns, int64_t end_ns,
		     struct store_trace **out, int *rank_out, struct tp_errbuf *err);
/* The next events, in order, a block's or part of one: 1 with *ev (the caller's to read and change
 * until the next call), *n and their artifact's base; 0 at the end. */
int store_trace_next(struct store_trace *t, struct tp_event **ev, size_t *n, int64_t *base_ns,
		     struct tp_errbuf *err);
/*
 * What the export's top level repeats: the first trace artifact's top-level
 * members as uploaded (deviceProperties, distributedInfo, ...: JSON text in
 * *meta, tp_malloc'd, NULL when none) and its baseTimeNanoseconds (*base_ns,
 * 0 when its times are absolute).
 */
int store_trace_header(struct store_trace *t, char **meta, int64_t *base_ns, struct tp_errbuf *err);
/* Start at the k-th artifact (store_trace_artifacts' order), before the first store_trace_next. */
void store_trace_skip(struct store_trace *t, size_t k);
/* The window of the artifacts store_trace_next begins after this call (as store_trace_open's). */
void store_trace_window(struct store_trace *t, int64_t start_ns, int64_t end_ns);
/* Only the blocks that hold an event that starts in the window, and has a time (their
 * max_ts; max_end in blocks written before migration 018), before the first store_trace_next:
 * a long span that began before the window does not bring its block. */
void store_trace_starts(struct store_trace *t);
/*
 * Before a block is decoded, keep(payload, ev, m, base_ns) gets its m events that have a ts, each
 * its phase, ts as written and dur alone (store/evpack.h: the rest skipped, not decoded), and its
 * artifact's base: 1 decodes and gives the block, 0 skips it, a negative TP_ERR_* is
 * store_trace_next's answer. NULL (the default): every block is decoded.
 */
struct evpack_time;
typedef int (*store_trace_keep_fn)(void *payload, const struct evpack_time *ev, size_t m, int64_t base_ns);
void store_trace_prefilter(struct store_trace *t, store_trace_keep_fn keep, void *payload);
/* Stop before the k-th (store_trace_next gives 0 there; a later call may move it on). */
void store_trace_limit(struct store_trace *t, size_t k);
/* *id: the run's lowest artifact id still being uploaded (any rank or kind), as t's reader sees it
 * (in the snapshot that listed t's artifacts, when it reads from one); INT64_MAX when none is. Ready
 * traces of higher ids were uploaded faster than it. */
int store_trace_inflight(struct store_trace *t, int64_t *id, struct tp_errbuf *err);
/* The store, among those this process opened (an identity a closed one's address cannot take). */
uint64_t store_serial(const struct store *st);
uint64_t store_reader_serial(const struct store_reader *r);
/* The written times the k-th artifact's events cover, from its blocks' bounds (*lo > *hi: none). */
int store_trace_bounds(struct store_trace *t, size_t k, int64_t *lo, int64_t *hi, struct tp_errbuf *err);
/* The artifact of the events store_trace_next gave last. */
int64_t store_trace_artifact(const struct store_trace *t);
/* The artifacts t reads, in order, and their base_ns. */
size_t store_trace_artifacts(const struct store_trace *t, const int64_t **ids, const int64_t **bases);
/* Names (cat, name, M args) of the events store_trace_next gave last. */
const char *store_trace_string(const struct store_trace *t, uint32_t id);
void store_trace_close(struct store_trace *t);

/*
 * Ranks waiting to be derived again (pipeline/runrank.h). A trace that joins a
 * rank which already has one is committed without its analysis (the rank's
 * stays as it was: store_artifact_commit) and the rank marked, so an upload
 * costs its own size, not the rank's; the first read of the run derives it
 * (runrank_settle).
 */
/* In w's transaction: when (run, rank) has a ready trace artifact other than
 * artifact, or always when force (artifact was stored without its analysis),
 * mark the rank and set *deferred. */
int store_rank_defer(struct store_writer *w, const char *run, int rank, int64_t artifact, int force,
		     int *deferred, struct tp_errbuf *err);
/* *has: (run, rank) has a ready trace artifact (an upload to it joins a timeline). */
int store_rank_has_trace(struct store_writer *w, const char *run, int rank, int *has, struct tp_errbuf *err);
struct store_pending {
	char *run;			/* tp_malloc'd */
	int rank;
	int64_t seq;
};
/* The marked ranks of run (of every run when NULL), *out freed with store_pending_free. */
int store_rank_pending(struct store_reader *r, const char *run, struct store_pending **out, size_t *n,
		       struct tp_errbuf *err);
void store_pending_free(struct store_pending *p, size_t n);
/* 0 when no rank can be marked: none at open, none marked since the last store_rank_pending(NULL) found none. */
int store_maybe_pending(struct store *st);
/* The rank's mark (0: none). */
int store_rank_seq(struct store_reader *r, const char *run, int rank, int64_t *seq, struct tp_errbuf *err);
/* In w's transaction: unmark the rank if its mark is still seq (whatever it is when seq < 0). */
int store_rank_settled(struct store_writer *w, const char *run, int rank, int64_t seq, struct tp_errbuf *err);
/* Hold one read snapshot across r's statements (on), or let it go (off). */
int store_read_snapshot(struct store_reader *r, int on, struct tp_errbuf *err);

/*
 * ---- on-demand captures (captures.c; issue 52, docs/api.md) ----
 * A capture asks the collectors of a run's ranks to profile the next steps or
 * seconds. Its state: pending (no rank took it), running, done, failed,
 * expired (pending at expires_ns), cancelled; each rank that takes it has a
 * part of its own: running, then done or failed. Times are unix ns.
 */
struct store_capture_rank {
	int rank;
	char state[8];			/* running, done, failed */
	char *reason;			/* NULL: none */
	int64_t started_ns, ended_ns;	/* ended_ns 0: still running */
	int64_t *artifacts;		/* uploaded with ?capture=ID from this rank, by id */
	size_t nartifacts;
};
struct store_capture {
	int64_t id;
	char *run;
	int64_t created_ns, expires_ns;
	char *requested_by, *token, *client;	/* NULL: none */
	int steps, seconds;		/* one of them 0 */
	char *ranks;			/* "all", or ",0,3," (each rank between commas, ascending) */
	char *activities;		/* "cpu,cuda" */
	char state[12];
	struct store_capture_rank *by_rank;	/* by rank */
	size_t nby_rank;
};
/* The most captures a run's listing gives (the newest). */
#define STORE_CAPTURES_LIST_MAX 200
void store_captures_free(struct store_capture *v, size_t n);
/* A new pending capture of c->run (its other fields as given; id and state ignored): *id.
 * TP_ERR_NOTFOUND run_not_found when the run does not exist (no upload, no collector's poll). */
int store_capture_create(struct store_writer *w, const struct store_capture *c, int64_t *id, struct tp_errbuf *err);
/* The captures of run, newest first (id 0), or capture id (run NULL: of any run; TP_ERR_NOTFOUND
 * capture_not_found, or run_not_found for a run that does not exist). *out may be NULL when none. */
int store_captures_read(struct store_reader *r, const char *run, int64_t id, struct store_capture **out, size_t *n,
			struct tp_errbuf *err);
/*
 * A collector's poll for run's captures at now: the run is created when missing, as an upload
 * creates it, and its polled_ns set to now, written only when unset or older than
 * STORE_POLL_STAMP_NS (a poll that changes nothing takes no write lock). *appeared: 1 when the
 * run was not listed before (the store's generation moves then, not on later stamps).
 */
#define STORE_POLL_STAMP_NS 10000000000LL
int store_capture_poll(struct store_writer *w, const char *run, int64_t now, int *appeared, struct tp_errbuf *err);
/* When a collector last polled for run's captures: *ns (0: never). TP_ERR_NOTFOUND run_not_found. */
int store_run_polled(struct store_reader *r, const char *run, int64_t *ns, struct tp_errbuf *err);
/* The oldest capture of run, pending or running and not expired, that targets rank and that rank has
 * not taken, taken by it at now: *id (0: none). */
int store_capture_take(struct store_writer *w, const char *run, int rank, int64_t now, int64_t *id,
		       struct tp_errbuf *err);
/* End rank's part of capture id at now, done (ok) or failed with reason (may be NULL). TP_ERR_NOTFOUND
 * capture_not_found; TP_ERR_CONFLICT when the rank never took it or its part has ended. */
int store_capture_end(struct store_writer *w, int64_t id, int rank, int ok, const char *reason, int64_t now,
		      struct tp_errbuf *err);
/* Cancel capture id; TP_ERR_CONFLICT capture_not_pending unless it is pending. */
int store_capture_cancel(struct store_writer *w, int64_t id, struct tp_errbuf *err);
/*
 * Settle what time decides, at now: a pending capture past its expiry is expired, a rank's part
 * running ttl_ns plus the capture's seconds after it was taken fails ("no word from the rank"), a
 * capture for listed ranks that some never took ends at its expiry. fn (may be NULL) is told each
 * capture changed, once committed, with what happened ("expired", "rank 3 failed: ..."). Writes
 * nothing when nothing is due.
 */
typedef void (*store_capture_fn)(const struct store_capture *c, const char *what, void *arg);
int store_captures_sweep(struct store_writer *w, int64_t now, int64_t ttl_ns, store_capture_fn fn, void *arg,
			 struct tp_errbuf *err);
/* 0 when id is a capture of run, else TP_ERR_NOTFOUND capture_not_found. */
int store_capture_of_run(struct store_reader *r, const char *run, int64_t id, struct tp_errbuf *err);
/* Record artifact as one of capture id's, under the artifact's rank. */
int store_capture_artifact(struct store_writer *w, int64_t id, int64_t artifact, struct tp_errbuf *err);

/* What the store holds, for metrics. */
struct store_counts {
	int64_t runs, ready, error, ingesting;
	int64_t db_bytes;	/* the database file and its WAL */
	int64_t folds;		/* the WAL folded back by the store's own thread (SQLite) */
};
int store_counts(struct store *st, struct store_counts *out, struct tp_errbuf *err);

/* The stored raw bytes of an artifact, chunk by chunk. */
struct store_raw_info {
	char encoding[16];	/* "upload" or "gzip" */
	char name[256];
	uint64_t bytes;		/* upload size */
	uint32_t nchunks;
};
int store_raw_info(struct store_reader *r, const char *run, int64_t id, struct store_raw_info *out,
		   struct tp_errbuf *err);
/* Chunk seq: *data borrowed until the next call on r. */
int store_raw_chunk(struct store_reader *r, int64_t id, uint32_t seq, const void **data, size_t *len,
		    struct tp_errbuf *err);

#endif
