/*
 * store.c: the store itself (see store.h for the contract, store_int.h for
 * the files that share its work): opening it, the schema and its
 * migrations, the removal of interrupted uploads, the heartbeat of servers
 * sharing a PostgreSQL database, health, counts, and closing.
 *
 * Schema: schemas/migrations/NNN_*.sql, compiled in (migrations_gen.c) and
 * applied in order inside one transaction each; PRAGMA user_version counts
 * what is applied.
 *
 * Ingest speed (measured, shared/design.md and evpack.h): 16 KiB pages, WAL
 * with synchronous=NORMAL, one private NOMUTEX connection per writer, events
 * packed into one row per block, a transaction per batch, and no secondary
 * index on the tables written during ingest: their keys are
 * (artifact << 32 | ordinal), so rows arrive as B-tree appends.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

extern const char *const store_migrations[];
extern const int store_nmigrations;

int store_db_fail(struct tp_errbuf *err, struct db *db, const char *what)
{
	tp_err("%s: %s", what, db ? db_errmsg(db) : "no connection");
	switch (db ? db_errkind(db) : DB_ERR_OTHER) {
	case DB_ERR_IO:
		return tp_fail(err, TP_ERR_IO, "storage_error", "%s: %s", what, db_errstr(db));
	case DB_ERR_UNAVAILABLE:
		return tp_fail(err, TP_ERR_UNAVAILABLE, "database_unavailable", "%s: database unavailable", what);
	default:
		return tp_fail(err, TP_ERR_DB, "database_error", "%s: %s", what, db ? db_errstr(db) : "no connection");
	}
}

int store_exec(struct db *db, const char *sql, struct tp_errbuf *err)
{
	return db_exec(db, sql) ? store_db_fail(err, db, "exec") : TP_OK;
}

/*
 * Migration 015's second half, inside its transaction: memory_points' rows
 * packed into memory_point_blocks, a series at a time and 65,536 rows per
 * read (PostgreSQL keeps a whole result), then the table dropped.
 */
static int pack_legacy_points(struct db *db, struct tp_errbuf *err)
{
	struct db_stmt *se = NULL, *pt = NULL, *ins = NULL;
	int64_t (*rows)[MEM_POINT_COLS] = tp_malloc(PT_BLOCK * sizeof(*rows));
	uint8_t *nul = tp_malloc(PT_BLOCK), *buf = tp_malloc(ptpack_bound(PT_BLOCK));
	int rc = TP_OK, step = DB_DONE;

	if (!rows || !nul || !buf)
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	else if (db_prepare(db, "SELECT DISTINCT artifact_id, device FROM memory_points ORDER BY artifact_id, device",
			    0, &se) != DB_OK ||
		 db_prepare(db, "SELECT seq, t_ns, parameter, optimizer_state, input, temporary, activation, gradient,"
				" autograd_detail, unknown, allocated, reserved FROM memory_points WHERE artifact_id=?1"
				" AND device=?2 AND seq >= ?3 ORDER BY seq LIMIT 65536", 0, &pt) != DB_OK ||
		 db_prepare(db, "INSERT INTO memory_point_blocks(artifact_id, device, first_seq, n, data)"
				" VALUES(?1, ?2, ?3, ?4, ?5)", 0, &ins) != DB_OK)
		rc = store_db_fail(err, db, "prepare");
	while (!rc && (step = db_step(se)) == DB_ROW) {
		int64_t artifact = db_column_int64(se, 0), from = INT64_MIN, first = 0, next = 0;
		char *device = tp_strdup((const char *)db_column_text(se, 1));
		size_t n = 0, got;
		if (!device) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			break;
		}
		do {
			db_bind_int64(pt, 1, artifact);
			db_bind_text(pt, 2, device, -1, DB_STATIC);
			db_bind_int64(pt, 3, from);
			for (got = 0; !rc && (step = db_step(pt)) == DB_ROW; got++) {
				int64_t seq = db_column_int64(pt, 0);
				if (n && (n == PT_BLOCK || seq != next)) {
					rc = store_put_point_block(db, ins, NULL, artifact, device, first, (const int64_t (*)[MEM_POINT_COLS])rows,
							     nul, n, buf, NULL, err);
					n = 0;
				}
				if (!n)
					first = seq;
				for (int k = 0; k < MEM_POINT_COLS; k++)
					rows[n][k] = db_column_int64(pt, 1 + k);
				nul[n++] = db_column_type(pt, 1 + MEM_COL_RESERVED) == DB_NULL;
				next = seq + 1;
				from = next;
			}
			db_reset(pt);
			if (!rc && step != DB_DONE)
				rc = store_db_fail(err, db, "read memory");
		} while (!rc && got == 65536);
		if (!rc && n)
			rc = store_put_point_block(db, ins, NULL, artifact, device, first, (const int64_t (*)[MEM_POINT_COLS])rows, nul, n,
					     buf, NULL, err);
		tp_free(device);
	}
	if (!rc && step != DB_DONE)
		rc = store_db_fail(err, db, "read memory");
	db_finalize(se);
	db_finalize(pt);
	db_finalize(ins);
	tp_free(rows);
	tp_free(nul);
	tp_free(buf);
	return rc ? rc : store_exec(db, "DROP TABLE memory_points", err);
}

static int migrate(struct db *db, struct tp_errbuf *err)
{
	int version = db_schema_version(db), i;

	if (version < 0)
		return store_db_fail(err, db, "read schema version");
	if (version > store_nmigrations)
		return tp_fail(err, TP_ERR_DB, "database_error",
			       "the database has schema version %d, newer than this server's %d",
			       version, store_nmigrations);
	for (i = version; i < store_nmigrations; i++) {
		if (store_exec(db, "BEGIN IMMEDIATE", err) || (db_begin_write(db) && store_db_fail(err, db, "lock")))
			return TP_ERR_DB;
		/* another server may have applied it while this one waited for the lock */
		if ((version = db_schema_version(db)) > i) {
			if (store_exec(db, "COMMIT", err))
				return TP_ERR_DB;
			i = version - 1;
			continue;
		}
		if (db_migrate(db, i + 1, store_migrations[i])) {
			store_db_fail(err, db, "migrate");
			db_exec(db, "ROLLBACK");
			return TP_ERR_DB;
		}
		if (!strncmp(store_migrations[i], "-- 015:", 7) && pack_legacy_points(db, err)) {
			db_exec(db, "ROLLBACK");
			return err->rc ? err->rc : TP_ERR_DB;
		}
		if (store_exec(db, "COMMIT", err))
			return TP_ERR_DB;
		tp_info("applied migration %d", i + 1);
	}
	return TP_OK;
}

/* Rows of every per-artifact table, except (keep_raw) the raw bytes. */
int store_delete_rows(struct db *db, int64_t artifact, int keep_raw, struct tp_errbuf *err)
{
	static const char *const tables[] = { "event_blocks", "strings", "raw_chunks" };
	struct db_stmt *st;
	char sql[128];
	size_t i;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]) - (keep_raw ? 1 : 0); i++) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE key BETWEEN ?1 AND ?2", tables[i]);
		if (db_prepare(db, sql, 0, &st) != DB_OK)
			return store_db_fail(err, db, "prepare delete");
		db_bind_int64(st, 1, artifact << 32);
		db_bind_int64(st, 2, (artifact << 32) | 0xffffffffLL);
		int r = db_step(st);
		db_finalize(st);
		if (r != DB_DONE)
			return store_db_fail(err, db, "delete rows");
	}
	static const char *const by_id[] = { "steps", "op_stats", "kernel_stats", "memory_series", "memory_point_blocks",
					     "memory_groups", "memory_segments", "memory_blocks", "collectives",
					     "lightning_actions", "lightning_functions", "stack_frames", "gpu_samples", "keyavg_ops", "keyavg_tables",
					     "canary_metrics", "canary_ops" };
	for (i = 0; i < sizeof(by_id) / sizeof(by_id[0]); i++) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE artifact_id=?1", by_id[i]);
		if (db_prepare(db, sql, 0, &st) != DB_OK)
			return store_db_fail(err, db, "prepare delete");
		db_bind_int64(st, 1, artifact);
		int r = db_step(st);
		db_finalize(st);
		if (r != DB_DONE)
			return store_db_fail(err, db, "delete rows");
	}
	return TP_OK;
}

int store_drop_artifact(struct db *db, int64_t artifact, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc;

	if ((rc = store_delete_rows(db, artifact, 0, err)))
		return rc;
	if (db_prepare(db, "DELETE FROM artifacts WHERE id=?1", 0, &st) != DB_OK)
		return store_db_fail(err, db, "prepare delete");
	db_bind_int64(st, 1, artifact);
	rc = db_step(st) == DB_DONE ? TP_OK : store_db_fail(err, db, "delete artifact");
	db_finalize(st);
	return rc;
}

const char store_empty_runs_sql[] =
	"DELETE FROM runs WHERE NOT EXISTS (SELECT 1 FROM artifacts WHERE run_id=runs.id)"
	" AND metadata='{}' AND tags='[]' AND project IS NULL"
	" AND NOT EXISTS (SELECT 1 FROM metrics WHERE run_id=runs.id)";

/*
 * Interrupted ingests: see the top of store.h. Alone on the database
 * (shared 0), every upload still 'ingesting' was cut by a stop; sharing it,
 * those of servers that have not beaten since dead_ns.
 */
static int recover(struct db *db, int shared, int64_t dead_ns, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int64_t ids[256];
	int n, i, rc = TP_OK, total = 0;

	do {
		if (db_prepare(db, "SELECT id FROM artifacts WHERE status='ingesting' AND (?1 = 0 OR owner NOT IN"
				   " (SELECT id FROM servers WHERE alive_ns >= ?2)) LIMIT 256", 0, &st) != DB_OK)
			return store_db_fail(err, db, "recover");
		db_bind_int(st, 1, shared);
		db_bind_int64(st, 2, dead_ns);
		for (n = 0; n < 256 && db_step(st) == DB_ROW; n++)
			ids[n] = db_column_int64(st, 0);
		db_finalize(st);
		if (!n)
			break;
		if ((rc = store_exec(db, "BEGIN IMMEDIATE", err)))
			return rc;
		if (db_begin_write(db)) {
			rc = store_db_fail(err, db, "lock");
			db_exec(db, "ROLLBACK");
			return rc;
		}
		for (i = 0; i < n && !rc; i++)
			rc = store_drop_artifact(db, ids[i], err);
		if (!rc)
			rc = store_exec(db, store_empty_runs_sql, err);
		if (!rc && shared)
			rc = store_exec(db, "UPDATE generation SET n = n + 1", err);
		if (rc) {
			db_exec(db, "ROLLBACK");
			return rc;
		}
		if ((rc = store_exec(db, "COMMIT", err)))
			return rc;
		total += n;
	} while (n == 256);
	if (total)
		tp_warn("removed %d interrupted upload(s) left by %s", total, shared ? "a server gone" : "an earlier stop");
	return TP_OK;
}

static int setup(struct store *st, struct tp_errbuf *err);

/*
 * A server silent this long is gone, and its uploads are dropped: 30 s, or
 * TRAINSCOPE_DEAD_AFTER seconds (1 to 3600; the tests use 2). Servers beat
 * five times as often, at least every 2 s.
 */
static int64_t dead_after_ns(void)
{
	const char *v = getenv("TRAINSCOPE_DEAD_AFTER");
	long s = v ? strtol(v, NULL, 10) : 0;

	return (s >= 1 && s <= 3600 ? s : 30) * 1000000000LL;
}
#define DEAD_NS dead_after_ns()
#define BEAT_NS (DEAD_NS / 5 < 2000000000LL ? DEAD_NS / 5 : 2000000000LL)

/* Register (or beat for) server id at now; 0 or a db error. */
static int beat_once(struct db *db, int64_t id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc;

	if (db_prepare(db, "INSERT INTO servers(id, alive_ns) VALUES(?1, ?2)"
			   " ON CONFLICT(id) DO UPDATE SET alive_ns=excluded.alive_ns", 0, &st))
		return store_db_fail(err, db, "beat");
	db_bind_int64(st, 1, id);
	db_bind_int64(st, 2, tp_now_ns());
	rc = db_step(st) == DB_DONE ? TP_OK : store_db_fail(err, db, "beat");
	db_finalize(st);
	return rc;
}

/*
 * The heartbeat of a server sharing its database: beat every BEAT_NS, drop
 * the uploads of servers silent for DEAD_NS, and forget those servers. Its
 * own connection, made again after PostgreSQL comes back.
 */
static void *beat_main(void *arg)
{
	struct store *st = arg;
	struct db *db = NULL;

	pthread_mutex_lock(&st->mu);
	while (!st->stopping) {
		struct timespec until;
		struct tp_errbuf err = { 0 };
		pthread_mutex_unlock(&st->mu);
		if (!atomic_load(&st->ready) && setup(st, &err)) {
			/* still down */
		} else if (db || !db_open(st->path, 0, &db, NULL)) {
			int64_t dead = tp_now_ns() - DEAD_NS;
			if (beat_once(db, st->server_id, &err) || recover(db, 1, dead, &err)) {
				db_close(db);
				db = NULL;
			} else {
				struct db_stmt *q;
				if (!db_prepare(db, "DELETE FROM servers WHERE alive_ns < ?1 AND NOT EXISTS"
						    " (SELECT 1 FROM artifacts WHERE owner=servers.id AND status='ingesting')",
						0, &q)) {
					db_bind_int64(q, 1, dead);
					db_step(q);
				}
				db_finalize(q);
			}
		}
		clock_gettime(CLOCK_REALTIME, &until);
		{
			int64_t ns = until.tv_nsec + BEAT_NS;
			until.tv_sec += ns / 1000000000LL;
			until.tv_nsec = ns % 1000000000LL;
		}
		pthread_mutex_lock(&st->mu);
		if (!st->stopping)
			pthread_cond_timedwait(&st->beat_cv, &st->mu, &until);
	}
	pthread_mutex_unlock(&st->mu);
	if (db) {
		struct db_stmt *q;
		if (!db_prepare(db, "DELETE FROM servers WHERE id=?1", 0, &q)) {
			db_bind_int64(q, 1, st->server_id);
			db_step(q);
		}
		db_finalize(q);
		db_close(db);
	}
	return NULL;
}

/*
 * Migrate, drop interrupted uploads, and (sharing the database) register
 * this server: once, before the first reader or writer. 0, or the error.
 */
static int setup(struct store *st, struct tp_errbuf *err)
{
	struct db *db = NULL;
	int rc;

	pthread_mutex_lock(&st->setup_mu);
	if (atomic_load(&st->ready)) {
		pthread_mutex_unlock(&st->setup_mu);
		return TP_OK;
	}
	if (!(rc = db_open(st->path, DB_OPEN_CREATE, &db, err)) && !(rc = migrate(db, err)) &&
	    !(rc = recover(db, st->shared, tp_now_ns() - DEAD_NS, err)) &&
	    !(rc = st->shared ? beat_once(db, st->server_id, err) : TP_OK)) {
		atomic_store(&st->ready, 1);
		if (st->waiting)
			tp_info("the database is back");
	}
	db_close(db);
	pthread_mutex_unlock(&st->setup_mu);
	return rc;
}

int store_ready(struct store *st, struct tp_errbuf *err)
{
	return atomic_load(&st->ready) ? TP_OK : setup(st, err);
}

int store_open(const char *path, struct store **out, struct tp_errbuf *err)
{
	struct store *st = tp_calloc(1, sizeof(*st));
	int rc;

	if (!st || !(st->path = tp_strdup(path))) {
		tp_free(st);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	static _Atomic uint64_t serials;
	st->serial = atomic_fetch_add(&serials, 1) + 1;
	pthread_mutex_init(&st->mu, NULL);
	pthread_mutex_init(&st->setup_mu, NULL);
	pthread_cond_init(&st->beat_cv, NULL);
	/* marks left by an earlier process: the first read settles them */
	atomic_store(&st->marks, 1);
	st->shared = db_is_postgres(path);
	if (st->shared) {
		uint64_t id = 0;
		if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
			id = (uint64_t)tp_now_ns() ^ ((uint64_t)getpid() << 32);
		st->server_id = (int64_t)(id >> 1);
	}
	rc = setup(st, err);
	/* a PostgreSQL not there yet: serve 503s, and set up once it is (the heartbeat tries) */
	if (rc == TP_ERR_UNAVAILABLE) {
		tp_warn("%s: waiting for it; every request gets 503 until it answers", err->msg);
		st->waiting = 1;
		rc = TP_OK;
		memset(err, 0, sizeof(*err));
	}
	if (!rc && st->shared) {
		if (pthread_create(&st->beat, NULL, beat_main, st))
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "cannot start the heartbeat");
		else
			st->beating = 1;
	}
	if (rc) {
		pthread_cond_destroy(&st->beat_cv);
		pthread_mutex_destroy(&st->setup_mu);
		pthread_mutex_destroy(&st->mu);
		tp_free(st->path);
		tp_free(st);
		return rc;
	}
	*out = st;
	return TP_OK;
}

int store_health(struct store *st, struct tp_errbuf *err)
{
	uint64_t gen;

	if (!st->shared)
		return TP_OK;	/* a file: nothing to reach */
	if (store_ready(st, err))
		return err->rc ? err->rc : TP_ERR_UNAVAILABLE;
	gen = store_generation(st);
	return gen >> 63 ? tp_fail(err, TP_ERR_UNAVAILABLE, "database_unavailable", "database unavailable") : TP_OK;
}

void store_close(struct store *st)
{
	struct db *db;

	if (!st)
		return;
	if (st->beating) {
		pthread_mutex_lock(&st->mu);
		st->stopping = 1;
		pthread_cond_signal(&st->beat_cv);
		pthread_mutex_unlock(&st->mu);
		pthread_join(st->beat, NULL);
	}
	pthread_cond_destroy(&st->beat_cv);
	pthread_mutex_destroy(&st->setup_mu);
	while (st->nidle)
		db_close(st->idle[--st->nidle]);
	while (st->nwidle)
		store_writer_free(st->widle[--st->nwidle]);
	pthread_mutex_destroy(&st->mu);
	/* fold the WAL back into the main file so the database is one file at rest */
	if (!st->shared && db_open(st->path, 0, &db, NULL) == TP_OK) {
		db_checkpoint(db);
		db_close(db);
	}
	tp_free(st->path);
	tp_free(st);
}

/* The rank's complete steps in time order: durations, and their numbers in *nums when asked for. */
static int rank_durations(struct store_reader *r, const char *run, int rank, int64_t **out, int64_t **nums,
			  size_t *n, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT DISTINCT step, start_ns, dur_ns FROM steps"
				       " WHERE artifact_id IN (" RANK_ARTIFACTS ") AND incomplete=0 AND whole_trace=0"
				       " ORDER BY start_ns, dur_ns, step", run, rank, err);
	size_t cap = 0;
	int step;

	*out = NULL;
	if (nums)
		*nums = NULL;
	*n = 0;
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			size_t c = cap ? cap * 2 : 64;
			int64_t *nd = tp_realloc(*out, c * sizeof(**out));
			if (nd)
				*out = nd;
			if (nd && nums && (nd = tp_realloc(*nums, c * sizeof(**nums))))
				*nums = nd;
			if (!nd)
				break;
			cap = c;
		}
		if (nums)
			(*nums)[*n] = db_column_int64(st, 0);
		(*out)[(*n)++] = db_column_int64(st, 2);
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	tp_free(*out);
	*out = NULL;
	if (nums) {
		tp_free(*nums);
		*nums = NULL;
	}
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				  : store_db_fail(err, r->db, "read steps");
}

/* The devices with a memory timeline on a rank, GPUs first, as /memory picks. */
static int rank_devices(struct store_reader *r, const char *run, struct store_rank *k, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT device FROM memory_series"
				       " WHERE artifact_id IN (" RANK_ARTIFACTS ") GROUP BY device"
				       " ORDER BY substr(device, 1, 5) = 'cuda:' DESC, length(device), device", run, k->rank, err);
	struct store_rows rows;
	int rc;

	if (!st || store_rows_read(r, st, (const char *const[]){ "device" }, 1, &rows, err))
		return err->rc ? err->rc : TP_ERR_DB;
	rc = TP_OK;
	if (rows.nrows && !(k->devices = tp_calloc(rows.nrows, sizeof(*k->devices))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; !rc && i < rows.nrows; i++) {
		k->devices[k->ndevices++] = rows.v[i].s;	/* taken from the rows */
		rows.v[i].s = NULL;
	}
	store_rows_free(&rows);
	return rc;
}

/* ---- GET /runs/{run}/distributed ---- */

/* room for need elements of size in *p (capacity *cap, doubling); -1 when out of memory */
static int grow_array(void **p, size_t *cap, size_t need, size_t size)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	if (!(np = tp_realloc(*p, nc * size)))
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

/* text kept for the life of in (dist_input.strs), the same one again when same (a run's process
 * groups are few: a linear search); NULL when out of memory */
static const char *dist_str(struct dist_input *in, size_t *cap, const unsigned char *s, int same)
{
	char *d;

	if (!s)
		s = (const unsigned char *)"";
	for (size_t i = in->nstrs; same && i-- > 0;)
		if (!strcmp(in->strs[i], (const char *)s))
			return in->strs[i];
	if (grow_array((void **)&in->strs, cap, in->nstrs + 1, sizeof(*in->strs)) || !(d = tp_strdup((const char *)s)))
		return NULL;
	return in->strs[in->nstrs++] = d;
}

static int dist_kind(const unsigned char *s)
{
	for (int k = 0; s && k < AN_NCKIND; k++)
		if (!strcmp((const char *)s, an_ckind_names[k]))
			return k;
	return AN_CK_OTHER;
}

#define RUN_TRACES "SELECT a.id, a.rank FROM artifacts a JOIN runs r ON r.id=a.run_id" \
	" WHERE r.name=?1 AND a.status='ready' AND a.kind='trace'"

int store_dist_input(struct store_reader *r, const char *run, struct dist_input *in, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	size_t cap = 0, scap = 0;
	int rc, step;

	memset(in, 0, sizeof(*in));
	if ((rc = store_run_exists(r, run, err)))
		return rc;
	if (!(st = store_prepare(r, "SELECT DISTINCT rank FROM (" RUN_TRACES ") ORDER BY rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (grow_array((void **)&in->ranks, &cap, in->nranks + 1, sizeof(*in->ranks)))
			goto oom;
		in->ranks[in->nranks++] = db_column_int(st, 0);
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	cap = 0;
	if (!(st = store_prepare(r, "SELECT t.rank, s.step, s.start_ns, s.dur_ns, s.kernel_ns, s.communication_ns,"
			      " s.comm_overlap_ns, s.idle_ns, s.incomplete, s.whole_trace, s.gpu_busy_ns FROM steps s"
			      " JOIN (" RUN_TRACES ") t ON t.id=s.artifact_id ORDER BY t.rank, s.start_ns, s.dur_ns, s.step", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (grow_array((void **)&in->steps, &cap, in->nsteps + 1, sizeof(*in->steps)))
			goto oom;
		in->steps[in->nsteps++] = (struct dist_step){
			.rank = db_column_int(st, 0), .step = db_column_int64(st, 1),
			.start_ns = db_column_int64(st, 2), .dur_ns = db_column_int64(st, 3),
			.compute_ns = db_column_int64(st, 4), .communication_ns = db_column_int64(st, 5),
			.overlap_ns = db_column_int64(st, 6), .idle_ns = db_column_int64(st, 7),
			.incomplete = db_column_int(st, 8), .whole_trace = db_column_int(st, 9),
			/* gpu_busy = |kernel u comm| = compute + |comm| - overlap */
			.comm_total_ns = db_column_type(st, 10) == DB_NULL ? -1
					 : db_column_int64(st, 10) - db_column_int64(st, 4) + db_column_int64(st, 6),
		};
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	cap = 0;
	if (!(st = store_prepare(r, "SELECT t.rank, c.step, c.kind, c.pg, c.seq, c.launch_ns, c.start_ns, c.end_ns,"
			      " c.time_ns, c.kernels, c.bytes, c.group_size, c.before_op, c.before_ns FROM collectives c"
			      " JOIN (" RUN_TRACES ") t ON t.id=c.artifact_id ORDER BY t.rank, c.launch_ns, c.start_ns", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		const char *pg = dist_str(in, &scap, db_column_text(st, 3), 1);
		const unsigned char *bt = db_column_text(st, 12);
		const char *before = bt ? dist_str(in, &scap, bt, 0) : NULL;
		if (!pg || (bt && !before) || grow_array((void **)&in->colls, &cap, in->ncolls + 1, sizeof(*in->colls)))
			goto oom;
		in->colls[in->ncolls++] = (struct dist_coll){
			.rank = db_column_int(st, 0),
			.step = db_column_type(st, 1) == DB_NULL ? -1 : db_column_int64(st, 1),
			.kind = dist_kind(db_column_text(st, 2)), .pg = pg,
			.seq = db_column_type(st, 4) == DB_NULL ? -1 : db_column_int64(st, 4),
			.launch_ns = db_column_int64(st, 5), .start_ns = db_column_int64(st, 6),
			.end_ns = db_column_int64(st, 7), .time_ns = db_column_int64(st, 8),
			.kernels = db_column_int64(st, 9),
			.bytes = db_column_type(st, 10) == DB_NULL ? -1 : db_column_int64(st, 10),
			.group_size = db_column_type(st, 11) == DB_NULL ? 0 : db_column_int64(st, 11),
			.before_op = before, .before_ns = db_column_int64(st, 13),
		};
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	/* the GPU's model, for what bandwidth its links allow: the first trace's first deviceProperties */
	if (!(st = store_prepare(r, "SELECT a.meta FROM artifacts a JOIN (" RUN_TRACES ") t ON t.id=a.id"
			      " WHERE a.meta IS NOT NULL ORDER BY t.rank, a.id", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		json_t *meta = json_loads((const char *)db_column_text(st, 0), JSON_ALLOW_NUL, NULL);
		const char *name = json_string_value(
			json_object_get(json_array_get(json_object_get(meta, "deviceProperties"), 0), "name"));
		if (name)
			snprintf(in->device, sizeof(in->device), "%s", name);
		json_decref(meta);
		if (name)
			break;
	}
	if (step != DB_ROW && step != DB_DONE)
		goto db;
	db_finalize(st);
	return TP_OK;
oom:
	db_finalize(st);
	dist_input_release(in);
	return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
db:
	rc = store_db_fail(err, r->db, "read distributed");
	db_finalize(st);
	dist_input_release(in);
	return rc;
fail:
	dist_input_release(in);
	return TP_ERR_DB;
}

void store_ranks_free(struct store_rank *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		tp_free(v[i].dur_ns);
		for (size_t d = 0; d < v[i].ndevices; d++)
			tp_free(v[i].devices[d]);
		tp_free(v[i].devices);
	}
	tp_free(v);
}

int store_ranks(struct store_reader *r, const char *run, struct store_rank **out, size_t *n, struct tp_errbuf *err)
{
	struct db_stmt *st;
	struct store_rows rows;
	int rc = TP_OK;

	*out = NULL;
	*n = 0;
	if (store_run_exists(r, run, err))
		return err->rc;
	if (!(st = store_prepare(r, "SELECT DISTINCT a.rank FROM artifacts a JOIN runs r ON r.id=a.run_id"
			      " WHERE r.name=?1 AND a.status='ready' ORDER BY a.rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if (store_rows_read(r, st, (const char *const[]){ "rank" }, 1, &rows, err))
		return err->rc;
	if (rows.nrows && !(*out = tp_calloc(rows.nrows, sizeof(**out))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; !rc && i < rows.nrows; i++) {
		struct store_rank *k = &(*out)[(*n)++];
		k->rank = (int)rows.v[i].i;
		if (!(rc = rank_durations(r, run, k->rank, &k->dur_ns, NULL, &k->nsteps, err)))
			rc = rank_devices(r, run, k, err);
	}
	store_rows_free(&rows);
	if (rc) {
		store_ranks_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

struct step_end {
	int64_t end, seq, alloc;	/* seq: the last point at or before end (-1: none), alloc its allocated */
	size_t n;			/* the step's place in the answer */
};

static int cmp_step_end(const void *a, const void *b)
{
	const struct step_end *x = a, *y = b;

	return x->end < y->end ? -1 : x->end > y->end;
}

/*
 * Allocated at each step end st reads (in the answer's order): the point of
 * series s with the highest seq among those at or before the end, steps with
 * none left out, the first DIAG_MAX_STEPS kept. One walk of the series.
 */
static int ends_alloc(struct store_reader *r, struct db_stmt *st, const struct series *s, struct diag_input *in,
		      struct tp_errbuf *err)
{
	struct store_mem_points *c = NULL;
	struct step_end *e = NULL, *ne;
	size_t n = 0, cap = 0, i;
	int64_t row[MEM_POINT_COLS], seq;
	uint8_t nul;
	int step, rc;

	while ((step = db_step(st)) == DB_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if (!(ne = tp_realloc(e, cap * sizeof(*e))))
				break;
			e = ne;
		}
		e[n] = (struct step_end){ db_column_int64(st, 0), -1, 0, n };
		n++;
	}
	db_finalize(st);
	if (step != DB_DONE) {
		tp_free(e);
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				      : store_db_fail(err, r->db, "read memory at steps");
	}
	if (!n)
		return TP_OK;
	qsort(e, n, sizeof(*e), cmp_step_end);
	/* a point counts for every step ending at or after it: mark the first, carry the best forward */
	if (!(rc = store_mem_points_open(r, s->artifact, s->device, -1, &c, err)))
		while ((rc = store_mem_points_next(c, 1u | 1u << MEM_COL_ALLOCATED | STORE_MEM_SEQ, row, &nul, &seq,
						   err)) == 1) {
			size_t lo = 0, hi = n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (e[mid].end < row[0])
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < n && seq > e[lo].seq) {
				e[lo].seq = seq;
				e[lo].alloc = row[MEM_COL_ALLOCATED];
			}
		}
	store_mem_points_close(c);
	if (rc) {
		tp_free(e);
		return rc;
	}
	for (i = 1; i < n; i++)
		if (e[i - 1].seq > e[i].seq) {
			e[i].seq = e[i - 1].seq;
			e[i].alloc = e[i - 1].alloc;
		}
	/* back to the answer's order: slot n of e by its place */
	int64_t *by = tp_malloc(n * sizeof(*by));
	if (!by) {
		tp_free(e);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	for (i = 0; i < n; i++)
		by[e[i].n] = e[i].seq >= 0 ? e[i].alloc : INT64_MIN;
	for (i = 0; i < n && in->nstep_alloc < DIAG_MAX_STEPS; i++)
		if (by[i] != INT64_MIN)
			in->step_alloc[in->nstep_alloc++] = by[i];
	tp_free(by);
	tp_free(e);
	return TP_OK;
}

/*
 * The memory figures of diagnosis: the peak of the series /memory answers,
 * the device's capacity from any trace's deviceProperties, and allocated
 * memory at the end of each step (the last point at or before it).
 */
static int diag_memory(struct store_reader *r, const char *run, int rank, struct diag_input *in,
		       struct tp_errbuf *err)
{
	struct tp_errbuf none = { 0 };
	struct series s;
	int64_t row[MEM_POINT_COLS];
	struct db_stmt *st;
	int step, c, rc;

	if (store_pick_series(r, run, rank, NULL, &s, &none))
		return none.rc == TP_ERR_NOTFOUND ? TP_OK : (*err = none, none.rc);
	if ((rc = store_series_peak(r, run, &s, row, err)) < 0)
		return rc;
	if (rc) {
		snprintf(in->mem_source, sizeof(in->mem_source), "%s", s.source);
		snprintf(in->mem_device, sizeof(in->mem_device), "%s", s.device);
		in->mem_peak = row[MEM_COL_ALLOCATED];
		for (c = 0; c < MEM_NCAT; c++)
			in->mem_peak_cat[c] = row[1 + c];
	}
	if (!in->mem_source[0])
		return TP_OK;
	if (!strncmp(s.device, "cuda:", 5)) {
		/* the device's totalGlobalMem in the traces' deviceProperties: JSON read here, as every engine would */
		json_int_t id = atoi(s.device + 5);
		double best = -INFINITY;
		int best_int = 0;
		st = store_prepare_rank(r, "SELECT a.meta FROM artifacts a WHERE a.id IN (" RANK_ARTIFACTS ")"
				     " AND a.meta IS NOT NULL", run, rank, err);
		if (!st)
			return TP_ERR_DB;
		while ((step = db_step(st)) == DB_ROW) {
			json_t *meta = json_loads((const char *)db_column_text(st, 0), JSON_ALLOW_NUL, NULL), *d;
			size_t i;
			json_array_foreach(json_object_get(meta, "deviceProperties"), i, d) {
				json_t *dev = json_object_get(d, "id"), *mem = json_object_get(d, "totalGlobalMem");
				if (json_is_number(dev) && json_number_value(dev) == (double)id && json_is_number(mem) &&
				    json_number_value(mem) > best) {
					best = json_number_value(mem);
					best_int = json_is_integer(mem);
					if (best_int)
						in->mem_capacity = json_integer_value(mem);
				}
			}
			json_decref(meta);
		}
		if (!best_int)
			in->mem_capacity = 0;
		db_finalize(st);
		if (step != DB_DONE)
			return store_db_fail(err, r->db, "read device properties");
	}
	st = store_prepare_rank(r, "SELECT COALESCE(k.cpu_end_ns, k.start_ns + k.dur_ns) FROM (SELECT DISTINCT step, start_ns,"
			     " dur_ns, cpu_end_ns FROM steps"
			     " WHERE artifact_id IN (" RANK_ARTIFACTS ")) k ORDER BY k.start_ns, k.dur_ns, k.step",
			     run, rank, err);
	if (!st)
		return TP_ERR_DB;
	return ends_alloc(r, st, &s, in, err);
}

/* What an earlier store_diag_input on r lent. */
void store_diag_lent_clear(struct store_reader *r)
{
	for (size_t i = 0; i < r->nactions; i++)
		tp_free((char *)r->actions[i].name);
	tp_free(r->actions);
	tp_free(r->gpus);
	r->actions = NULL;
	r->nactions = 0;
	r->gpus = NULL;
}

static int64_t col_or(struct db_stmt *st, int i)
{
	return db_column_type(st, i) == DB_NULL ? -1 : db_column_int64(st, i);
}

/* The actions of the rank's newest Lightning report, lent from r (valid until it closes). */
static int diag_lightning(struct store_reader *r, const char *run, int rank, struct diag_input *in,
			  struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT action, calls, mean_ns, total_ns, share_bp FROM lightning_actions"
					   " WHERE artifact_id=(SELECT MAX(id) FROM (" RANK_ARTIFACTS
					   " AND a.kind='lightning_report')) ORDER BY n", run, rank, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	store_diag_lent_clear(r);
	while ((step = db_step(st)) == DB_ROW) {
		struct diag_action *a = tp_realloc(r->actions, (r->nactions + 1) * sizeof(*a));
		char *name = tp_strdup((const char *)db_column_text(st, 0));
		if (!a || !name) {
			if (a)
				r->actions = a;
			tp_free(name);
			db_finalize(st);
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		r->actions = a;
		r->actions[r->nactions++] = (struct diag_action){ .name = name, .calls = col_or(st, 1),
			.mean_ns = col_or(st, 2), .total_ns = col_or(st, 3), .share_bp = col_or(st, 4) };
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read lightning actions");
	in->actions = r->actions;
	in->nactions = r->nactions;
	return TP_OK;
}

/*
 * The rank's nvidia-smi samples per GPU index: utilization.gpu's mean and samples under
 * DIAG_GPU_UTIL_LOW_PCT, and the fullest memory sample (used over used + free, or over
 * memory.total), lent from r. A sample shipped twice (a log uploaded again after it grew)
 * counts once: samples are told apart by GPU, time and column.
 */
static int diag_gpu(struct store_reader *r, const char *run, int rank, struct diag_input *in, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r,
		"WITH s AS (SELECT gpu, t_ns, n, artifact_id, name, value FROM gpu_samples"
		" WHERE artifact_id IN (" RANK_ARTIFACTS " AND a.kind='gpu_log')),"
		" u AS (SELECT gpu, AVG(value) mean, COUNT(*) k, SUM(value < ?3) low FROM"
		"  (SELECT gpu, MIN(value) value FROM s WHERE name='utilization.gpu' AND value IS NOT NULL"
		"   GROUP BY gpu, COALESCE(t_ns, artifact_id * 1000000000 + n)) GROUP BY gpu),"
		" m AS (SELECT x.gpu, x.value used, x.value + y.value total FROM s x JOIN s y ON y.artifact_id=x.artifact_id"
		"  AND y.n=x.n AND y.gpu=x.gpu AND y.name='memory.free' WHERE x.name='memory.used'"
		"  UNION ALL SELECT x.gpu, x.value, y.value FROM s x JOIN s y ON y.artifact_id=x.artifact_id"
		"  AND y.n=x.n AND y.gpu=x.gpu AND y.name='memory.total' WHERE x.name='memory.used'),"
		" f AS (SELECT gpu, used, total FROM (SELECT gpu, used, total, ROW_NUMBER() OVER (PARTITION BY gpu"
		"  ORDER BY used / total DESC) k FROM m WHERE total > 0) WHERE k=1)"
		" SELECT g.gpu, u.mean, COALESCE(u.k, 0), COALESCE(u.low, 0), f.used, f.total"
		" FROM (SELECT DISTINCT gpu FROM s) g LEFT JOIN u ON u.gpu=g.gpu LEFT JOIN f ON f.gpu=g.gpu ORDER BY g.gpu",
		run, rank, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	db_bind_int(st, 3, DIAG_GPU_UTIL_LOW_PCT);
	while ((step = db_step(st)) == DB_ROW) {
		struct diag_gpu *g = tp_realloc(r->gpus, (in->ngpus + 1) * sizeof(*g));
		if (!g) {
			db_finalize(st);
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		r->gpus = g;
		r->gpus[in->ngpus++] = (struct diag_gpu){ .index = db_column_int(st, 0),
			.util_mean_pct = db_column_type(st, 1) == DB_NULL ? NAN : db_column_double(st, 1),
			.util_samples = db_column_int64(st, 2), .util_low = db_column_int64(st, 3),
			.mem_used_bytes = db_column_double(st, 4), .mem_total_bytes = db_column_double(st, 5) };
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read gpu samples");
	in->gpus = r->gpus;
	return TP_OK;
}

/* The rank's newest canary metrics, lent from r (valid until it closes). */
static int diag_canary(struct store_reader *r, const char *run, int rank, struct diag_input *in, struct tp_errbuf *err)
{
	int64_t artifact;
	int rc = store_canary_load(r, run, rank, &r->canary, &artifact, err);

	in->canary = !rc && artifact ? &r->canary : NULL;
	return rc;
}

int store_diag_input(struct store_reader *r, const char *run, int rank, struct diag_input *in,
		     int64_t **durs, int64_t **nums, struct tp_errbuf *err)
{
	struct db_stmt *st;
	size_t i;
	int step, c;

	memset(in, 0, sizeof(*in));
	*durs = NULL;
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	in->rank = rank;
	if (!(st = store_prepare_rank(r, "SELECT COUNT(*) FROM (" RANK_ARTIFACTS " AND a.kind='trace')", run, rank, err)))
		return TP_ERR_DB;
	step = db_step(st);
	in->traces = step == DB_ROW ? db_column_int64(st, 0) : 0;
	db_finalize(st);
	if (step != DB_ROW)
		return store_db_fail(err, r->db, "read artifacts");
	if (rank_durations(r, run, rank, durs, nums, &in->nsteps, err))
		return err->rc;
	in->step_dur_ns = *durs;
	/* complete steps, or the whole trace when it has none */
	st = store_prepare_rank(r, "SELECT COALESCE(SUM(dur_ns), 0), COALESCE(SUM(kernel_ns), 0), COALESCE(SUM(memcpy_ns), 0),"
			     " COALESCE(SUM(memset_ns), 0), COALESCE(SUM(communication_ns), 0), COALESCE(SUM(runtime_ns), 0),"
			     " COALESCE(SUM(dataloader_ns), 0), COALESCE(SUM(cpu_ns), 0), COALESCE(SUM(idle_ns), 0),"
			     " COALESCE(SUM(comm_overlap_ns), 0), COALESCE(SUM(whole_trace), 0),"
			     " COALESCE(SUM(COALESCE(gpu_busy_ns, kernel_ns)), 0), COALESCE(SUM(sync_calls), 0),"
			     " COALESCE(SUM(sync_ns), 0), COUNT(sync_ns) FROM (SELECT DISTINCT step,"
			     " start_ns, dur_ns, " STEP_COMPS ", comm_overlap_ns, whole_trace, gpu_busy_ns, sync_calls,"
			     " sync_ns FROM steps WHERE artifact_id IN (" RANK_ARTIFACTS ") AND incomplete=0)", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	if ((step = db_step(st)) == DB_ROW) {
		in->steps_ns = db_column_int64(st, 0);
		for (c = 0; c < AN_NCOMP; c++)
			in->comp_ns[c] = db_column_int64(st, 1 + c);
		in->comm_overlap_ns = db_column_int64(st, 1 + AN_NCOMP);
		in->whole_trace = db_column_int64(st, 2 + AN_NCOMP) > 0;
		in->gpu_busy_ns = db_column_int64(st, 3 + AN_NCOMP);
		in->step_sync_calls = db_column_int64(st, 4 + AN_NCOMP);
		in->step_sync_ns = db_column_int64(st, 5 + AN_NCOMP);
		in->step_sync_known = db_column_int64(st, 6 + AN_NCOMP) > 0;
	}
	db_finalize(st);
	if (step != DB_ROW)
		return store_db_fail(err, r->db, "read steps");
	st = store_prepare_rank(r, "SELECT kind, COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0),"
			     " COALESCE(SUM(tiny_calls), 0), COALESCE(SUM(tiny_ns), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtoh%' THEN calls END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtoh%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtod%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%pageable%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%pinned%' THEN total_ns END), 0)"
			     " FROM kernel_stats WHERE artifact_id IN (" RANK_ARTIFACTS ") GROUP BY kind", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		int kind = db_column_int(st, 0);
		int64_t calls = db_column_int64(st, 1), ns = db_column_int64(st, 2);
		if (kind == AN_GPU_KERNEL) {
			in->kernel_calls = calls;
			in->kernel_ns = ns;
			in->tiny_calls = db_column_int64(st, 3);
			in->tiny_ns = db_column_int64(st, 4);
		} else if (kind == AN_GPU_MEMCPY) {
			in->memcpy_calls = calls;
			in->memcpy_ns = ns;
			in->dtoh_calls = db_column_int64(st, 5);
			in->dtoh_ns = db_column_int64(st, 6);
			in->dtod_ns = db_column_int64(st, 7);
			in->pageable_ns = db_column_int64(st, 8);
			in->pinned_ns = db_column_int64(st, 9);
		} else if (kind == AN_GPU_MEMSET) {
			in->memset_ns = ns;
		}
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read kernels");
	st = store_prepare_rank(r, "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0) FROM op_stats"
			     " WHERE artifact_id IN (" RANK_ARTIFACTS ") AND device=0 AND name=?3", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	for (i = 0; i < DIAG_NSYNC; i++) {
		db_reset(st);
		store_bind_text(st, 3, diag_sync_names[i]);
		if ((step = db_step(st)) != DB_ROW)
			break;
		in->sync_calls[i] = db_column_int64(st, 0);
		in->sync_ns[i] = db_column_int64(st, 1);
	}
	db_finalize(st);
	if (i != DIAG_NSYNC)
		return store_db_fail(err, r->db, "read ops");
	return diag_memory(r, run, rank, in, err) || diag_canary(r, run, rank, in, err) ||
	       diag_lightning(r, run, rank, in, err) || diag_gpu(r, run, rank, in, err) ? err->rc : TP_OK;
}

/* Rows (name, calls, ns[, kind]) of st (bound) into items; finalizes st. */
static int load_items(struct store_reader *r, struct db_stmt *st, struct compare_item **items, size_t *n,
		      struct tp_errbuf *err)
{
	size_t cap = 0;
	int step;

	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			struct compare_item *ni = tp_realloc(*items, (cap = cap ? cap * 2 : 64) * sizeof(**items));
			if (!ni)
				break;
			*items = ni;
		}
		struct compare_item *it = &(*items)[*n];
		if (!(it->name = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		it->calls = db_column_int64(st, 1);
		it->ns = db_column_int64(st, 2);
		it->kind = db_column_int(st, 3);
		(*n)++;
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read");
}

/* The peak of the series memory reads answer from, when there is one. */
static int compare_memory(struct store_reader *r, const char *run, struct compare_run *out, struct tp_errbuf *err)
{
	struct tp_errbuf none = { 0 };
	struct series s;
	int64_t row[MEM_POINT_COLS];
	struct db_stmt *st;
	int rc = store_pick_series(r, run, out->rank, NULL, &s, &none), step;

	if (rc == TP_ERR_NOTFOUND)
		return TP_OK;
	if (rc)
		return tp_fail(err, rc, none.code, "%s", none.msg);
	if (s.peak_seq < 0)
		return TP_OK;
	if ((rc = store_series_peak(r, run, &s, row, err)) < 0)
		return rc;
	if (rc) {
		out->has_memory = 1;
		snprintf(out->mem_device, sizeof(out->mem_device), "%s", s.device);
		snprintf(out->mem_source, sizeof(out->mem_source), "%s", s.source);
		memcpy(out->peak_cat, &row[1], sizeof(out->peak_cat));
		out->peak_bytes = row[MEM_COL_ALLOCATED];
	}
	if (!(st = store_prepare(r, "SELECT max_reserved FROM memory_series WHERE artifact_id=?1 AND device=?2", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, s.artifact);
	store_bind_text(st, 2, s.device);
	step = db_step(st);
	out->reserved_bytes = step == DB_ROW && db_column_type(st, 0) != DB_NULL ? db_column_int64(st, 0) : -1;
	db_finalize(st);
	return step == DB_ROW ? TP_OK : store_db_fail(err, r->db, "read memory");
}

int store_compare_input(struct store_reader *r, const char *run, int rank, struct compare_run *out,
			struct tp_errbuf *err)
{
	struct diag_input in;
	struct db_stmt *st;
	size_t cap = 0;
	int rc, step, src;
	char sql[1024];

	memset(out, 0, sizeof(*out));
	if (!(out->run = tp_strdup(run)))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	/* the steps and their breakdown, as diagnosis reads them */
	if ((rc = store_diag_input(r, run, rank, &in, &out->dur_ns, &out->step_no, err)))
		return rc;
	out->rank = in.rank;
	out->nsteps = in.nsteps;
	memcpy(out->comp_ns, in.comp_ns, sizeof(out->comp_ns));
	if ((out->has_canary = in.canary != NULL))
		out->canary = in.canary->perf;
	if ((src = store_ops_source(r, run, out->rank, err)) < 0)
		return err->rc;
	out->ops_source = store_ops_sources[src];
	snprintf(sql, sizeof(sql), "SELECT name, SUM(calls), SUM(self_ns), 0 FROM %s WHERE artifact_id IN ("
		 RANK_ARTIFACTS ") GROUP BY name", store_ops_from[src]);
	if (!(st = store_prepare_rank(r, sql, run, out->rank, err)))
		return TP_ERR_DB;
	db_bind_int(st, 3, AN_DEV_CPU);
	if ((rc = load_items(r, st, &out->ops, &out->nops, err)))
		return rc;
	if (!(st = store_prepare_rank(r, "SELECT name, SUM(calls), SUM(total_ns), kind FROM kernel_stats WHERE artifact_id IN ("
			       RANK_ARTIFACTS ") GROUP BY kind, name", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->kernels, &out->nkernels, err)))
		return rc ? rc : TP_ERR_DB;
	if ((rc = compare_memory(r, run, out, err)))
		return rc;
	/* the newest Lightning report's actions (one name may be printed twice: summed), the stacks' frames */
	if (!(st = store_prepare_rank(r, "SELECT action, COALESCE(SUM(calls), 0), SUM(total_ns), 0 FROM lightning_actions"
			       " WHERE artifact_id=(SELECT MAX(id) FROM (" RANK_ARTIFACTS " AND a.kind='lightning_report'))"
			       " AND total_ns IS NOT NULL GROUP BY action", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->actions, &out->nactions, err)))
		return rc ? rc : TP_ERR_DB;
	if (!(st = store_prepare_rank(r, "SELECT frame, SUM(self), SUM(total), 0 FROM stack_frames WHERE artifact_id IN ("
			       RANK_ARTIFACTS " AND a.kind='stacks') GROUP BY frame", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->frames, &out->nframes, err)))
		return rc ? rc : TP_ERR_DB;
	if (!(st = store_prepare(r, "SELECT m.name, AVG(m.value), COUNT(*) FROM metrics m JOIN runs r ON r.id=m.run_id"
			      " WHERE r.name=?1 GROUP BY m.name", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (out->nmetrics == cap) {
			struct compare_metric *nm = tp_realloc(out->metrics, (cap = cap ? cap * 2 : 8) * sizeof(*nm));
			if (!nm)
				break;
			out->metrics = nm;
		}
		struct compare_metric *m = &out->metrics[out->nmetrics];
		if (!(m->name = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		m->mean = db_column_double(st, 1);
		m->count = db_column_int64(st, 2);
		out->nmetrics++;
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read metrics");
}

int store_counts(struct store *st, struct store_counts *out, struct tp_errbuf *err)
{
	struct store_reader *r;
	struct db_stmt *q;
	struct stat sb;
	char wal[4096];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = store_reader_open(st, &r, err)))
		return rc;
	q = store_prepare(r, "SELECT (SELECT COUNT(*) FROM runs),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='ready'),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='error'),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='ingesting')", err);
	if (!q) {
		store_reader_close(r);
		return TP_ERR_DB;
	}
	if (db_step(q) == DB_ROW) {
		out->runs = db_column_int64(q, 0);
		out->ready = db_column_int64(q, 1);
		out->error = db_column_int64(q, 2);
		out->ingesting = db_column_int64(q, 3);
		out->db_bytes = db_size(r->db);
	} else {
		rc = store_db_fail(err, r->db, "count");
	}
	db_finalize(q);
	store_reader_close(r);
	snprintf(wal, sizeof(wal), "%s-wal", st->path);
	if (!rc && stat(wal, &sb) == 0)
		out->db_bytes += (int64_t)sb.st_size;
	return rc;
}

/* id -> string of one artifact, for resolving string pid/tid */
struct strmap {
	char **s;
	uint32_t n;
};

static void strmap_free(struct strmap *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		tp_free(m->s[i]);
	tp_free(m->s);
}

static int strmap_load(struct store_reader *r, int64_t artifact, struct strmap *m, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT key & 4294967295, s FROM strings WHERE key BETWEEN ?1 AND ?2"
				      " ORDER BY key", err);
	int rc = TP_OK;

	memset(m, 0, sizeof(*m));
	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, artifact << 32);
	db_bind_int64(st, 2, artifact << 32 | 0xffffffffLL);
	while (db_step(st) == DB_ROW) {
		uint32_t id = (uint32_t)db_column_int64(st, 0);
		if (id >= m->n) {
			uint32_t n = id + 1 > m->n * 2 ? id + 1 : m->n * 2;
			char **ns = tp_realloc(m->s, n * sizeof(*ns));
			if (!ns) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
			memset(ns + m->n, 0, (n - m->n) * sizeof(*ns));
			m->s = ns;
			m->n = n;
		}
		tp_free(m->s[id]);
		if (!(m->s[id] = tp_strdup((const char *)db_column_text(st, 1)))) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			break;
		}
	}
	db_finalize(st);
	return rc;
}

static const char *strmap_get(const struct strmap *m, uint32_t id)
{
	return id < m->n && m->s[id] ? m->s[id] : "";
}

int store_events_each(struct store_reader *r, int64_t artifact, int kind, store_events_fn fn, void *payload,
		      struct tp_errbuf *err)
{
	struct strmap strs;
	struct tp_event *ev = NULL;
	size_t cap = 0, i;
	struct db_stmt *st;
	int rc;

	if ((rc = strmap_load(r, artifact, &strs, err)))
		return rc;
	st = store_prepare(r, "SELECT n, data FROM event_blocks WHERE key BETWEEN ?1 AND ?2 AND kind=?3 ORDER BY key",
		     err);
	if (!st) {
		strmap_free(&strs);
		return TP_ERR_DB;
	}
	db_bind_int64(st, 1, artifact << 32);
	db_bind_int64(st, 2, artifact << 32 | 0xffffffffLL);
	db_bind_int(st, 3, kind);
	while (rc == TP_OK && db_step(st) == DB_ROW) {
		size_t n = (size_t)db_column_int64(st, 0);
		const uint8_t *data = db_column_blob(st, 1);
		size_t len = (size_t)db_column_bytes(st, 1);
		if (n > (1u << 24)) {
			rc = tp_fail(err, TP_ERR_DB, "database_error", "event block of artifact %lld is corrupt",
				     (long long)artifact);
			break;
		}
		if (n > cap) {
			struct tp_event *ne = tp_realloc(ev, n * sizeof(*ev));
			if (!ne) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
			ev = ne;
			cap = n;
		}
		if (evpack_decode(data, len, n, ev)) {
			rc = tp_fail(err, TP_ERR_DB, "database_error", "event block of artifact %lld is corrupt",
				     (long long)artifact);
			break;
		}
		for (i = 0; i < n; i++) {
			if (ev[i].pid_sid)
				ev[i].pid_s = strmap_get(&strs, ev[i].pid_sid);
			if (ev[i].tid_sid)
				ev[i].tid_s = strmap_get(&strs, ev[i].tid_sid);
		}
		rc = fn(payload, ev, n);
	}
	db_finalize(st);
	tp_free(ev);
	strmap_free(&strs);
	return rc;
}

int store_raw_info(struct store_reader *r, const char *run, int64_t id, struct store_raw_info *out,
		   struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT a.raw_encoding, a.name, a.bytes,"
				      " (SELECT COUNT(*) FROM raw_chunks WHERE key BETWEEN a.id<<32 AND (a.id<<32)|4294967295)"
				      " FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.id=?2 AND a.status!='ingesting'", err);
	int rc = TP_OK;

	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	db_bind_int64(st, 2, id);
	if (db_step(st) == DB_ROW) {
		snprintf(out->encoding, sizeof(out->encoding), "%s", db_column_text(st, 0));
		snprintf(out->name, sizeof(out->name), "%s", db_column_text(st, 1));
		out->bytes = (uint64_t)db_column_int64(st, 2);
		out->nchunks = (uint32_t)db_column_int64(st, 3);
	} else {
		rc = tp_fail(err, TP_ERR_NOTFOUND, "artifact_not_found", "run '%s' has no artifact %lld",
			     run, (long long)id);
	}
	db_finalize(st);
	return rc;
}

int store_raw_chunk(struct store_reader *r, int64_t id, uint32_t seq, const void **data, size_t *len,
		    struct tp_errbuf *err)
{
	if (!r->raw && !(r->raw = store_prepare(r, "SELECT data FROM raw_chunks WHERE key=?1", err)))
		return TP_ERR_DB;
	db_reset(r->raw);
	db_bind_int64(r->raw, 1, (id << 32) | seq);
	if (db_step(r->raw) != DB_ROW)
		return tp_fail(err, TP_ERR_NOTFOUND, "raw_missing", "raw chunk %u of artifact %lld is missing",
			       seq, (long long)id);
	*data = db_column_blob(r->raw, 0);
	*len = (size_t)db_column_bytes(r->raw, 0);
	return TP_OK;
}

/* ---- a window of a rank's trace events, block by block ---- */

struct store_trace {
	struct store_reader *r;
	int64_t *ids, *bases;		/* the rank's ready trace artifacts */
	size_t nart, cur, lim;		/* read [cur, lim) */
	char *run;
	int64_t start, end;		/* absolute ns */
	struct db_stmt *blocks;		/* of artifact ids[cur - 1] */
	struct strmap strs;
	struct tp_event *ev;
	size_t cap;
};

void store_trace_close(struct store_trace *t)
{
	if (!t)
		return;
	db_finalize(t->blocks);
	strmap_free(&t->strs);
	tp_free(t->ids);
	tp_free(t->bases);
	tp_free(t->ev);
	tp_free(t->run);
	tp_free(t);
}

int store_trace_open(struct store_reader *r, const char *run, int rank, int64_t start_ns, int64_t end_ns,
		     struct store_trace **out, int *rank_out, struct tp_errbuf *err)
{
	struct store_trace *t;
	struct db_stmt *st;
	int step;

	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	if (!(t = tp_calloc(1, sizeof(*t))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	t->r = r;
	t->start = start_ns;
	t->end = end_ns;
	if (!(st = store_prepare_rank(r, "SELECT a.id, a.base_ns FROM artifacts a JOIN runs r ON r.id=a.run_id"
				   " WHERE r.name=?1 AND a.rank=?2 AND a.status='ready' AND a.kind='trace' ORDER BY a.id",
				run, rank, err))) {
		store_trace_close(t);
		return TP_ERR_DB;
	}
	step = store_read_pairs(st, &t->ids, &t->bases, &t->nart);
	db_finalize(st);
	if (step != DB_DONE) {
		store_trace_close(t);
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read artifacts");
	}
	t->lim = t->nart;
	if (!(t->run = tp_strdup(run))) {
		store_trace_close(t);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	*out = t;
	*rank_out = rank;
	return TP_OK;
}

int store_trace_header(struct store_trace *t, char **meta, int64_t *base_ns, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*meta = NULL;
	*base_ns = t->nart ? t->bases[0] : 0;
	if (!t->nart)
		return TP_OK;
	if (!(st = store_prepare(t->r, "SELECT meta FROM artifacts WHERE id=?1", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, t->ids[0]);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) == DB_TEXT &&
	    !(*meta = tp_strdup((const char *)db_column_text(st, 0)))) {
		db_finalize(st);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read artifact");
}

int store_trace_next(struct store_trace *t, const struct tp_event **ev, size_t *n, int64_t *base_ns,
		     struct tp_errbuf *err)
{
	for (;;) {
		if (!t->blocks) {
			int64_t a, base;
			int rc;
			if (t->cur >= t->lim)
				return 0;
			a = t->ids[t->cur];
			base = t->bases[t->cur++];
			strmap_free(&t->strs);
			if ((rc = strmap_load(t->r, a, &t->strs, err)))
				return rc;
			/* blocks that may hold events in the window (written times), and those without times */
			t->blocks = store_prepare(t->r, "SELECT n, data FROM event_blocks WHERE key BETWEEN ?1 AND ?2"
						  " AND (min_ts IS NULL OR (max_end >= ?3 AND min_ts < ?4))"
						  " ORDER BY kind, key", err);
			if (!t->blocks)
				return TP_ERR_DB;
			db_bind_int64(t->blocks, 1, a << 32);
			db_bind_int64(t->blocks, 2, a << 32 | 0xffffffffLL);
			int64_t lo, hi;
			if (t->start == INT64_MIN || __builtin_sub_overflow(t->start, base, &lo))
				lo = INT64_MIN;
			if (t->end == INT64_MAX || __builtin_sub_overflow(t->end, base, &hi))
				hi = INT64_MAX;
			db_bind_int64(t->blocks, 3, lo);
			db_bind_int64(t->blocks, 4, hi);
		}
		int step = db_step(t->blocks);
		if (step == DB_DONE) {
			db_finalize(t->blocks);
			t->blocks = NULL;
			continue;
		}
		if (step != DB_ROW)
			return store_db_fail(err, t->r->db, "read events");
		size_t cnt = (size_t)db_column_int64(t->blocks, 0);
		const uint8_t *data = db_column_blob(t->blocks, 1);
		size_t len = (size_t)db_column_bytes(t->blocks, 1);
		if (cnt > (1u << 24))
			return tp_fail(err, TP_ERR_DB, "database_error", "an event block is corrupt");
		if (cnt > t->cap) {
			struct tp_event *ne = tp_realloc(t->ev, cnt * sizeof(*ne));
			if (!ne)
				return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			t->ev = ne;
			t->cap = cnt;
		}
		if (evpack_decode(data, len, cnt, t->ev))
			return tp_fail(err, TP_ERR_DB, "database_error", "an event block is corrupt");
		for (size_t i = 0; i < cnt; i++) {
			if (t->ev[i].pid_sid)
				t->ev[i].pid_s = strmap_get(&t->strs, t->ev[i].pid_sid);
			if (t->ev[i].tid_sid)
				t->ev[i].tid_s = strmap_get(&t->strs, t->ev[i].tid_sid);
		}
		*ev = t->ev;
		*n = cnt;
		*base_ns = t->bases[t->cur - 1];
		return 1;
	}
}

int store_trace_bounds(struct store_trace *t, size_t k, int64_t *lo, int64_t *hi, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*lo = INT64_MAX;
	*hi = INT64_MIN;
	if (k >= t->nart)
		return TP_OK;
	if (!(st = store_prepare(t->r, "SELECT MIN(min_ts), MAX(max_end) FROM event_blocks WHERE key BETWEEN ?1 AND ?2"
				 " AND min_ts IS NOT NULL", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, t->ids[k] << 32);
	db_bind_int64(st, 2, t->ids[k] << 32 | 0xffffffffLL);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) != DB_NULL) {
		*lo = db_column_int64(st, 0);
		*hi = db_column_int64(st, 1);
	}
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read event bounds");
}

void store_trace_skip(struct store_trace *t, size_t k)
{
	if (!t->blocks && t->cur < k)
		t->cur = k < t->nart ? k : t->nart;
}

void store_trace_window(struct store_trace *t, int64_t start_ns, int64_t end_ns)
{
	t->start = start_ns;
	t->end = end_ns;
}

void store_trace_limit(struct store_trace *t, size_t k)
{
	t->lim = k < t->nart ? k : t->nart;
}

int store_trace_inflight(struct store_trace *t, int64_t *id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*id = INT64_MAX;
	if (!(st = store_prepare(t->r, "SELECT MIN(a.id) FROM artifacts a JOIN runs r ON r.id=a.run_id"
				 " WHERE r.name=?1 AND a.status='ingesting'", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, t->run);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) != DB_NULL)
		*id = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read artifacts");
}

uint64_t store_serial(const struct store *st)
{
	return st->serial;
}

int64_t store_trace_artifact(const struct store_trace *t)
{
	return t->cur ? t->ids[t->cur - 1] : 0;
}

size_t store_trace_artifacts(const struct store_trace *t, const int64_t **ids, const int64_t **bases)
{
	*ids = t->ids;
	*bases = t->bases;
	return t->nart;
}

const char *store_trace_string(const struct store_trace *t, uint32_t id)
{
	return strmap_get(&t->strs, id);
}

/* ---- ranks waiting to be derived again ---- */

/* The run id of (run, rank)'s first ready trace artifact other than artifact (0: none), or of run itself
 * when any_run. */
static int rank_trace_run(struct store_writer *w, const char *run, int rank, int64_t artifact, int any_run,
			  int64_t *run_id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*run_id = 0;
	if (db_prepare(w->db, any_run ? "SELECT id FROM runs WHERE name=?1" :
				      "SELECT a.run_id FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.rank=?2 AND a.status='ready' AND a.kind='trace'"
				      " AND a.id<>?3 LIMIT 1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	store_bind_text(st, 1, run);
	if (!any_run) {
		db_bind_int(st, 2, rank);
		db_bind_int64(st, 3, artifact);
	}
	if ((step = db_step(st)) == DB_ROW)
		*run_id = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, w->db, "read rank");
}

int store_rank_has_trace(struct store_writer *w, const char *run, int rank, int *has, struct tp_errbuf *err)
{
	int64_t run_id;
	int rc = rank_trace_run(w, run, rank, 0, 0, &run_id, err);

	*has = run_id != 0;
	return rc;
}

int store_rank_defer(struct store_writer *w, const char *run, int rank, int64_t artifact, int force,
		     int *deferred, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int64_t run_id = 0;
	int rc = TP_OK, step;
	size_t i;

	*deferred = 0;
	if ((rc = rank_trace_run(w, run, rank, artifact, 0, &run_id, err)) ||
	    (!run_id && force && (rc = rank_trace_run(w, run, rank, artifact, 1, &run_id, err))))
		return rc;
	if (!run_id)
		return TP_OK;
	if (db_prepare(w->db, "INSERT INTO rank_pending(run_id, rank, seq) VALUES(?1, ?2, 1)"
				      " ON CONFLICT(run_id, rank) DO UPDATE SET seq=rank_pending.seq+1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, 1, run_id);
	db_bind_int(st, 2, rank);
	step = db_step(st);
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, w->db, "mark rank");
	for (i = 0; i < sizeof(store_rank_tables) / sizeof(store_rank_tables[0]) && !rc; i++) {
		char sql[128];
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE artifact_id=?1", store_rank_tables[i]);
		if (db_prepare(w->db, sql, 0, &st) != DB_OK)
			return store_db_fail(err, w->db, "prepare");
		db_bind_int64(st, 1, artifact);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "defer rank analysis");
		db_finalize(st);
	}
	if (!rc) {
		atomic_fetch_add(&w->store->marks, 1);
		*deferred = 1;
	}
	return rc;
}

void store_pending_free(struct store_pending *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tp_free(p[i].run);
	tp_free(p);
}

int store_maybe_pending(struct store *st)
{
	/* another server's marks are not counted here: ask the database every time */
	return st->shared || atomic_load(&st->marks) != atomic_load(&st->marks_clear);
}

int store_rank_pending(struct store_reader *r, const char *run, struct store_pending **out, size_t *n,
		       struct tp_errbuf *err)
{
	uint64_t marks = atomic_load(&r->store->marks);
	struct store_pending *v = NULL;
	size_t cap = 0;
	struct db_stmt *st;
	int step;

	*out = NULL;
	*n = 0;
	if (!(st = store_prepare(r, "SELECT r.name, p.rank, p.seq FROM rank_pending p JOIN runs r ON r.id=p.run_id"
			      " WHERE ?1 IS NULL OR r.name=?1 ORDER BY r.name, p.rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct store_pending *nv = tp_realloc(v, nc * sizeof(*nv));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		if (!(v[*n].run = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		v[*n].rank = db_column_int(st, 1);
		v[(*n)++].seq = db_column_int64(st, 2);
	}
	db_finalize(st);
	if (step != DB_DONE) {
		store_pending_free(v, *n);
		*n = 0;
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read pending ranks");
	}
	if (!run && !*n)
		atomic_store(&r->store->marks_clear, marks);
	*out = v;
	return TP_OK;
}

int store_rank_seq(struct store_reader *r, const char *run, int rank, int64_t *seq, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*seq = 0;
	if (!(st = store_prepare(r, "SELECT p.seq FROM rank_pending p JOIN runs r ON r.id=p.run_id"
			      " WHERE r.name=?1 AND p.rank=?2", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	if ((step = db_step(st)) == DB_ROW)
		*seq = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read pending rank");
}

int store_rank_settled(struct store_writer *w, const char *run, int rank, int64_t seq, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	if (db_prepare(w->db, "DELETE FROM rank_pending WHERE rank=?2 AND (?3 < 0 OR seq=?3)"
				      " AND run_id=(SELECT id FROM runs WHERE name=?1)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	db_bind_int64(st, 3, seq);
	step = db_step(st);
	db_finalize(st);
	return step == DB_DONE ? TP_OK : store_db_fail(err, w->db, "unmark rank");
}
