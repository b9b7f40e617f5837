/*
 * store_int.h: what the files of server/store/ share, and nothing outside
 * server/store/ includes: the structs behind store.h's handles, the shared
 * SQL fragments, and the helpers more than one file calls. store.h is the
 * interface; each file is one concern:
 *
 *   base.c     what every file calls and which calls none of them: failures,
 *              exec, text binding, an artifact's rows deleted, a rank's
 *              analysis rows deleted
 *   schema.c   the store made ready once: the schema and its migrations,
 *              interrupted uploads, the heartbeat of a shared database
 *   store.c    opening, health, counts, closing
 *   fold.c     the thread that folds SQLite's write-ahead log back
 *   writer.c   the writer, its nesting transactions, batches, an artifact's
 *              begin, commit, failure and drop
 *   insert.c   the derived rows of a finished upload: a trace's analysis, memory
 *              series, and the format's own rows through its store function
 *   fmt_*.c    a format's own rows (fmt_lightning.c, fmt_keyavg.c, fmt_stacks.c,
 *              fmt_gpulog.c, fmt_canary.c), each with its header for formats.c
 *   patch.c    PATCH of a run, delete, a rank's tables replaced, metrics
 *   reader.c   the reader, the generation, the row reader, run and rank lookups,
 *              what a diagnosis input lent freed
 *   runs.c     the runs and artifacts listed, metrics, a project's baseline
 *   tables.c   a rank's steps, operators and kernels
 *   memory.c   memory timelines, point blocks, groups, segments, the step timeline
 *   reports.c  rlhf-canary metrics, Lightning actions, nvidia-smi samples, stacks
 *   inputs.c   what analysis/ computes from: ranks, distributed, diagnosis, compare
 *   trace.c    an artifact's events and raw bytes, a window of a rank's trace
 *   pending.c  ranks waiting to be derived again
 *   captures.c on-demand captures, their ranks' parts and artifacts
 *
 * Reads return rows and structs (store_rows for plain tables, structs where
 * the reader computes: store_steps, store_ranks, store_mem_series and its
 * point cursor, store_diag_input, store_compare_input, store_timeline, ...),
 * never JSON: analysis/ computes from them, answer.c shapes them, reads.c and
 * memread.c glue the two (scripts/answers.py guards every answer's bytes).
 * The one JSON left is the run's metadata, a JSON document by nature, merged
 * by PATCH in its write transaction.
 */
#ifndef STORE_INT_H
#define STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store/db.h"
#include "store/store.h"

#define LOG_PREFIX "store"

/* Idle read connections kept for the next request (opening one costs more than most queries). */
#define READER_POOL 32
/* a fresh connection reads the schema and starts with a cold page cache: a millisecond per upload of a
 * run of 1 MiB chunks */
#define WRITER_POOL 4

struct store {
	char *path;
	pthread_mutex_t mu;		/* guards idle */
	struct db *idle[READER_POOL];
	int nidle;
	struct store_writer *widle[WRITER_POOL];	/* writers closed with no transaction open, kept warm */
	int nwidle;
	struct db *spare;		/* setup()'s connection, read-write, for the first writer (guarded by mu) */
	_Atomic uint64_t gen;		/* bumped by every write that commits */
	uint64_t serial;		/* this store among those the process opened (store_serial()) */
	/* PostgreSQL: other servers write too, so the generation is the database's (table generation) */
	int shared;
	/* PostgreSQL: this server in table servers, its heartbeat (which also drops uploads of servers gone) */
	int64_t server_id;
	pthread_t beat;
	int beating, stopping;
	pthread_cond_t beat_cv;
	/* SQLite: the thread that folds the write-ahead log back into the main file when a writer's
	 * commit kicks it (db_wal_kick), so that no upload waits for the fold and its fsyncs */
	int fold_on;			/* a SQLite store: its writers' commits kick the thread */
	pthread_t fold;
	int folding;			/* the thread started (made at the first kick) */
	pthread_mutex_t fold_mu;	/* guards folding, fold_kicked, fold_stop, fold_pages */
	pthread_cond_t fold_cv;
	int fold_kicked, fold_stop;
	int fold_pages;			/* the log's, at the last kick */
	_Atomic uint64_t folds;		/* folds done (store_counts) */
	/* setup() done (migrations, recovery, registration); waiting: the database was down at start */
	pthread_mutex_t setup_mu;
	_Atomic int ready;
	int waiting;
	/* uploads whose drop failed (a full disk): dropped by the next writer (under mu) */
	int64_t undropped[16];
	int nundropped;
	/* rank_pending: marks made, and the count when a full listing last found none */
	_Atomic uint64_t marks, marks_clear;
};

enum wstmt { W_BLOCK, W_STR, W_RAW, W_BEGIN, W_COMMIT, W_ROLLBACK, W_NSTMT };

struct store_writer {
	struct store *store;
	struct db *db;
	struct db_stmt *st[W_NSTMT];
	uint32_t next_block;	/* of the artifact being written */
	uint8_t *pack;		/* evpack buffer */
	size_t pack_cap;
	int depth;		/* of store_begin() calls inside the open transaction (store_tx_begin nests them) */
	int quiet;		/* the open transaction changes no answer (store_write_batch): no new generation */
	struct store_reader *as_reader;	/* reads on this connection (store_writer_reader) */
};

struct store_reader {
	struct store *store;
	struct db *db;
	struct db_stmt *raw;	/* kept for chunk-by-chunk reads */
	struct canary_metrics canary;	/* what store_diag_input lends (diag_input.canary) */
	struct diag_action *actions;	/* and diag_input.actions, their names after them */
	size_t nactions;
	struct diag_gpu *gpus;		/* and diag_input.gpus */
};

/* Points per row of memory_point_blocks (migration 015). */
#define PT_BLOCK MEM_PT_BLOCK

/* The columns of the step components, in enum an_comp order. */
#define STEP_COMPS "kernel_ns, memcpy_ns, memset_ns, communication_ns, runtime_ns, dataloader_ns, cpu_ns, idle_ns"

/* The rows of one rank of a run in the tables its traces derive (steps, op_stats, kernel_stats,
 * collectives; migration 020), for WHERE (?1 run name, ?2 rank). */
#define RANK_ROWS "run_id=(SELECT id FROM runs WHERE name=?1) AND rank=?2"

/* The ready artifacts of one rank of a run, for joins (?1 run name, ?2 rank). */
#define RANK_ARTIFACTS "SELECT a.id FROM artifacts a JOIN runs r ON r.id=a.run_id" \
	" WHERE r.name=?1 AND a.rank=?2 AND a.status='ready'"

/* ---- base.c ---- */

/* Log what failed and set err from db's last error (storage_error, database_unavailable or
 * database_error); returns that tp_err. */
int store_db_fail(struct tp_errbuf *err, struct db *db, const char *what);
/* Run sql on db: 0, or store_db_fail's error. */
int store_exec(struct db *db, const char *sql, struct tp_errbuf *err);
/* Delete the artifact's rows in every per-artifact table, except (keep_raw) its raw bytes: those
 * keyed by its row keys, the memory series', and each table format_tables lists (the tables a
 * format keeps its own rows in, listed by the migration that makes them): 0 or a tp_err. */
int store_delete_rows(struct db *db, int64_t artifact, int keep_raw, struct tp_errbuf *err);
/* The tables a rank's trace analysis is stored in, keyed by (run_id, rank) (migrations 020, 022,
 * 024: its memory series last, their point blocks the very last). */
extern const char *const store_rank_analysis[8];
/* Delete the rows of (run_id, rank) (rank < 0: of every rank of the run) in store_rank_analysis,
 * but the collectives before the colls_from-th and (keep_points) the memory point blocks: 0 or a
 * tp_err. */
int store_rank_rows_delete(struct db *db, int64_t run_id, int rank, int64_t colls_from, int keep_points,
			   struct tp_errbuf *err);
/* Delete the artifact's rows and the artifact: 0 or a tp_err. */
int store_drop_artifact(struct db *db, int64_t artifact, struct tp_errbuf *err);
/* Delete the runs left with nothing: no artifact, metadata, tags, project, metrics or collector poll. */
extern const char store_empty_runs_sql[];

/* Bind text (copied) or NULL. */
void store_bind_text(struct db_stmt *st, int col, const char *s);
/* Bind v, or NULL when v < 0 (a count or time the file does not give). */
void store_bind_opt(struct db_stmt *st, int col, int64_t v);
/* Bind v, or NULL when v is NaN. */
void store_bind_real(struct db_stmt *st, int col, double v);
/* Run st (its binds done) to DONE and reset it: 0, or store_db_fail's error ("insert rows"). */
int store_step_reset(struct db *db, struct db_stmt *st, struct tp_errbuf *err);

/* ---- schema.c ---- */

/* 0 once the store is set up (migrated, recovered), setting it up if not yet; else the error. */
int store_ready(struct store *st, struct tp_errbuf *err);
/* The fold thread (fold.c), SQLite's: a writer's connection calls store_fold_kick (db_wal_kick)
 * when the log wants folding, which makes the thread the first time; store_close stops it. */
void store_fold_kick(void *store, int pages);
void store_fold_stop(struct store *st);
/* The heartbeat thread of a server sharing its database (store_open starts it). */
void *store_beat_main(void *arg);

/* ---- writer.c ---- */

/* Free a writer and close its connection (no pooling). NULL is a no-op. */
void store_writer_free(struct store_writer *w);
/* The writer's transaction, nesting: only the outermost begin and commit reach the database; an
 * inner failure leaves the rollback to the outermost level. 0 or a tp_err (begin, commit). */
int store_begin(struct store_writer *w, struct tp_errbuf *err);
int store_commit(struct store_writer *w, struct tp_errbuf *err);
void store_rollback(struct store_writer *w);
/* ---- insert.c ---- */

/* n points of (key, device) from first_seq as one row of memory_point_blocks (ins; rank >= 0:
 * rank_memory_point_blocks', key the run's id), unless old finds that row holds them already:
 * 0 or a tp_err. */
int store_put_point_block(struct db *db, struct db_stmt *ins, struct db_stmt *old, int64_t key, int rank,
			  const char *device, int64_t first_seq, const int64_t (*rows)[MEM_POINT_COLS],
			  const uint8_t *nul, size_t n, uint8_t *buf, struct store_blocks *count, struct tp_errbuf *err);
/* Delete the point blocks of the rank's trace series on device from point n on (device NULL: of
 * every device no series of the rank has): 0 or a tp_err. */
int store_drop_points_after(struct db *db, int64_t run_id, int rank, const char *device, int64_t n,
			    struct tp_errbuf *err);
/* Insert f's derived rows (keep, same_colls: store_rank_replace's): its trace analysis and memory
 * series under the rank (run_id, f->rank), its steps' spans from artifact unless f->step_src
 * names another; the rest (an export's or snapshot's memory series, a report's rows) under
 * artifact. 0 or a tp_err. */
int store_insert_analysis(struct store_writer *w, int64_t artifact, int64_t run_id, const struct store_final *f,
			  struct store_blocks *keep, size_t same_colls, struct tp_errbuf *err);

/* ---- patch.c ---- */

/* The derived tables of a rank (steps, operators, kernels, the trace's memory timelines, collectives). */
extern const char *const store_rank_tables[7];

/* ---- reader.c ---- */

/* sql prepared on r, or NULL with err set. */
struct db_stmt *store_prepare(struct store_reader *r, const char *sql, struct tp_errbuf *err);
/* Every row of st (bound, not yet stepped; finalized here) into out, its columns named cols:
 * 0 or a tp_err (out empty). */
int store_rows_read(struct store_reader *r, struct db_stmt *st, const char *const *cols, int ncols,
		    struct store_rows *out, struct tp_errbuf *err);
/*
 * The SQL condition for a run (alias r) that exists as the API sees it: it has an artifact
 * not ingesting, or a collector polled for its captures (migration 021: a run waiting for
 * its first capture).
 */
#define STORE_RUN_LISTED "(r.polled_ns IS NOT NULL OR EXISTS (SELECT 1 FROM artifacts a" \
	" WHERE a.run_id=r.id AND a.status!='ingesting'))"
/* 0 when the run exists (STORE_RUN_LISTED), else a tp_err (run_not_found: TP_ERR_NOTFOUND). */
int store_run_exists(struct store_reader *r, const char *run, struct tp_errbuf *err);
/* Check the run (and rank, when given) and resolve rank -1 to its lowest rank; -1 with err set on failure. */
int store_rank_of(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);
/* sql prepared on r with ?1 run and ?2 rank bound, or NULL with err set. */
struct db_stmt *store_prepare_rank(struct store_reader *r, const char *sql, const char *run, int rank,
				   struct tp_errbuf *err);
/* st's rows' two integer columns appended to *a and *b (*n of them): the last db_step, DB_ROW when
 * out of memory. */
int store_read_pairs(struct db_stmt *st, int64_t **a, int64_t **b, size_t *n);
/* Free what an earlier store_diag_input on r lent. */
void store_diag_lent_clear(struct store_reader *r);

/* ---- tables.c ---- */

/* Where a rank's operators come from (store_ops_source): its traces, or its key_averages tables. */
enum { OPS_TRACE, OPS_KEYAVG };
/* Their names as answers give them, and their rows (artifact_id, name, calls, self_ns, total_ns)
 * of device ?3 as a subquery, by enum above. */
extern const char *const store_ops_sources[];
extern const char *const store_ops_from[];
/* OPS_KEYAVG when the rank has key_averages tables and no trace, else OPS_TRACE; -1 on failure. */
int store_ops_source(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);

/* ---- memory.c ---- */

/* A memory series as the reads pick it: its run's id and rank, the recording with its highest peak
 * (an artifact, or 0: the rank's trace series), that peak's point. */
struct series {
	int rank;
	int64_t run_id, artifact, peak_seq;
	char device[16], source[16];
};
/* The series a memory read answers from (device NULL: the first GPU, else cpu): 0, or a tp_err
 * (no_memory_data: TP_ERR_NOTFOUND). */
int store_pick_series(struct store_reader *r, const char *run, int rank, const char *device, struct series *out,
		      struct tp_errbuf *err);
/* The peak point of series s, split as /memory reads it: 1, 0 when it has none, or a tp_err. */
int store_series_peak(struct store_reader *r, const char *run, const struct series *s, int64_t row[MEM_POINT_COLS],
		      struct tp_errbuf *err);

/* ---- reports.c ---- */

/* The newest rlhf-canary metrics.json of (run, rank) into *m and its artifact into *artifact (0 when
 * the rank has none): 0 or a tp_err. */
int store_canary_load(struct store_reader *r, const char *run, int rank, struct canary_metrics *m,
		      int64_t *artifact, struct tp_errbuf *err);


#endif
