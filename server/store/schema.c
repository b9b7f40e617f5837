/*
 * schema.c: the store made ready, once, before its first reader or writer
 * (store_ready()): the schema and its migrations, the removal of
 * interrupted uploads, and the heartbeat of servers sharing a PostgreSQL
 * database.
 *
 * Schema: schemas/migrations/NNN_*.sql, compiled in (migrations_gen.c) and
 * applied in order inside one transaction each; PRAGMA user_version counts
 * what is applied.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

extern const char *const store_migrations[];
extern const int store_nmigrations;

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
					rc = store_put_point_block(db, ins, NULL, artifact, -1, device, first, (const int64_t (*)[MEM_POINT_COLS])rows,
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
			rc = store_put_point_block(db, ins, NULL, artifact, -1, device, first, (const int64_t (*)[MEM_POINT_COLS])rows, nul, n,
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

/* name: what the one line a migration logs calls the database (a path; never a URI: it may hold a password) */
static int migrate(struct db *db, const char *name, struct tp_errbuf *err)
{
	int version = db_schema_version(db), i, from = version, applied = 0;

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
		tp_dbg("applied migration %d", i + 1);
		applied++;
	}
	if (applied && !from)
		tp_info("created database %s, schema version %d", name, store_nmigrations);
	else if (applied)
		tp_info("migrated database %s from schema version %d to %d", name, from, store_nmigrations);
	return TP_OK;
}

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
void *store_beat_main(void *arg)
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
	if (!(rc = db_open(st->path, DB_OPEN_CREATE, &db, err)) && !(rc = migrate(db, db_is_postgres(st->path) ? "(PostgreSQL)" : st->path, err)) &&
	    !(rc = recover(db, st->shared, tp_now_ns() - DEAD_NS, err)) &&
	    !(rc = st->shared ? beat_once(db, st->server_id, err) : TP_OK)) {
		atomic_store(&st->ready, 1);
		if (st->waiting)
			tp_info("the database is back");
		/* the first writer takes it (store_writer_open): its schema is read already */
		pthread_mutex_lock(&st->mu);
		if (!st->spare) {
			st->spare = db;
			db = NULL;
		}
		pthread_mutex_unlock(&st->mu);
	}
	db_close(db);
	pthread_mutex_unlock(&st->setup_mu);
	return rc;
}

int store_ready(struct store *st, struct tp_errbuf *err)
{
	return atomic_load(&st->ready) ? TP_OK : setup(st, err);
}
