/* db.c: db.h's functions, each passed to the connection's engine. */
#include <string.h>

#include "store/db.h"

int db_is_postgres(const char *where)
{
	return !strncmp(where, "postgresql://", 13) || !strncmp(where, "postgres://", 11);
}

int db_open(const char *where, int flags, struct db **out, struct tp_errbuf *err)
{
	return db_is_postgres(where) ? db_pg_open(where, flags, out, err) : db_sqlite_open(where, flags, out, err);
}

void db_close(struct db *db)
{
	if (db)
		db->ops->close(db);
}

int db_exec(struct db *db, const char *sql) { return db->ops->exec(db, sql); }
int db_schema_version(struct db *db) { return db->ops->schema_version(db); }
int db_migrate(struct db *db, int version, const char *sql) { return db->ops->migrate(db, version, sql); }
int db_begin_write(struct db *db) { return db->ops->begin_write(db); }
int db_checkpoint(struct db *db, int all, int *log) { return db->ops->checkpoint(db, all, log); }
void db_wal_kick(struct db *db, void (*kick)(void *, int), void *arg) { db->ops->wal_kick(db, kick, arg); }
int db_in_tx(struct db *db) { return db->ops->in_tx(db); }
int db_busy(struct db *db) { return db->ops->busy(db); }
int64_t db_changes(struct db *db) { return db->ops->changes(db); }
int64_t db_size(struct db *db) { return db->ops->size(db); }
const char *db_errmsg(struct db *db) { return db->ops->errmsg(db); }
const char *db_errstr(struct db *db) { return db->ops->errstr(db); }
enum db_errkind db_errkind(struct db *db) { return db->ops->errkind(db); }
int db_batch_begin(struct db *db) { return db->ops->batch_begin(db); }
int db_batch_end(struct db *db) { return db->ops->batch_end(db); }
int db_prepare(struct db *db, const char *sql, int persistent, struct db_stmt **out)
{
	return db->ops->prepare(db, sql, persistent, out);
}
void db_bind_int64(struct db_stmt *st, int i, int64_t v) { st->ops->bind_int64(st, i, v); }
void db_bind_int(struct db_stmt *st, int i, int v) { st->ops->bind_int64(st, i, v); }
void db_bind_double(struct db_stmt *st, int i, double v) { st->ops->bind_double(st, i, v); }
void db_bind_null(struct db_stmt *st, int i) { st->ops->bind_null(st, i); }
void db_bind_text(struct db_stmt *st, int i, const char *s, int n, db_free_fn fn)
{
	st->ops->bind_text(st, i, s, n, fn);
}
void db_bind_blob(struct db_stmt *st, int i, const void *p, int n, db_free_fn fn)
{
	st->ops->bind_blob(st, i, p, n, fn);
}
int db_step(struct db_stmt *st) { return st->ops->step(st); }
int db_column_type(struct db_stmt *st, int i) { return st->ops->column_type(st, i); }
int64_t db_column_int64(struct db_stmt *st, int i) { return st->ops->column_int64(st, i); }
int db_column_int(struct db_stmt *st, int i) { return (int)st->ops->column_int64(st, i); }
double db_column_double(struct db_stmt *st, int i) { return st->ops->column_double(st, i); }
const unsigned char *db_column_text(struct db_stmt *st, int i) { return st->ops->column_text(st, i); }
const void *db_column_blob(struct db_stmt *st, int i) { return st->ops->column_blob(st, i); }
int db_column_bytes(struct db_stmt *st, int i) { return st->ops->column_bytes(st, i); }
void db_reset(struct db_stmt *st) { st->ops->reset(st); }
void db_clear_bindings(struct db_stmt *st) { st->ops->clear_bindings(st); }
void db_finalize(struct db_stmt *st)
{
	if (st)
		st->ops->finalize(st);
}
