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

uint64_t store_serial(const struct store *st)
{
	return st->serial;
}
