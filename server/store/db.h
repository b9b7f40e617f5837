/*
 * db.h: one SQL connection, whichever engine holds the data: SQLite (a file
 * path, db_sqlite.c) or PostgreSQL (a postgresql:// URI, db_pg.c). The
 * store's files (store_int.h lists them) speak only this, so one store
 * serves both engines.
 *
 * The interface is SQLite's statement API, narrowed to what the store uses:
 * prepare, bind (1-based), step to DB_ROW or DB_DONE, read columns
 * (0-based), reset, finalize. SQL is written once, in the dialect both
 * engines share, with ?N parameters; PostgreSQL's engine rewrites what
 * differs (see db_pg.c). Every function but db_open and db_prepare is safe
 * on a failed connection; errors are read back with db_errmsg and db_errkind.
 */
#ifndef DB_H
#define DB_H

#include <stdint.h>

#include "tp.h"

struct db;
struct db_stmt;

enum { DB_OK = 0, DB_ERROR = 1, DB_ROW = 100, DB_DONE = 101 };
/* a column's type in the current row, as SQLite names them */
enum { DB_INTEGER = 1, DB_FLOAT = 2, DB_TEXT = 3, DB_BLOB = 4, DB_NULL = 5 };
/* what a failure was: the storage (a full disk), the engine gone (PostgreSQL down), anything else */
enum db_errkind { DB_ERR_NONE, DB_ERR_IO, DB_ERR_UNAVAILABLE, DB_ERR_OTHER };
/* bound data the caller keeps until the next reset or bind (STATIC), or that the engine copies */
typedef void (*db_free_fn)(void *);
#define DB_STATIC ((db_free_fn)0)
#define DB_TRANSIENT ((db_free_fn)-1)

/* open flags */
#define DB_OPEN_READONLY 1
#define DB_OPEN_CREATE 2	/* create the database if missing, set it up for writing (WAL) */

/* 1 when where names a PostgreSQL database (a postgresql:// or postgres:// URI) */
int db_is_postgres(const char *where);
/* A connection; *out is NULL and err set on failure. */
int db_open(const char *where, int flags, struct db **out, struct tp_errbuf *err);
void db_close(struct db *db);
/* Run one or more statements with no parameters and no rows wanted; 0 or DB_ERROR. */
int db_exec(struct db *db, const char *sql);
/* The schema version this database is at (0: empty), or -1 on failure. */
int db_schema_version(struct db *db);
/* Apply migration number version (1-based, its SQLite text) and record it, in the open transaction. */
int db_migrate(struct db *db, int version, const char *sqlite_sql);
/* Take the database-wide write lock for the open transaction (PostgreSQL; SQLite's BEGIN IMMEDIATE has it). */
int db_begin_write(struct db *db);
/*
 * Fold the write-ahead log back into the main file (SQLite), nothing for
 * PostgreSQL: all: all of it, waiting for readers, and the log truncated
 * (at close); else what readers let it, waiting for nobody (checkpoint
 * PASSIVE). Returns the log's pages left unfolded (readers hold them, or they
 * came meanwhile), and the pages it held in *log when log is not NULL; 0 for
 * PostgreSQL; -1 when the fold failed.
 */
int db_checkpoint(struct db *db, int all, int *log);
/*
 * After a commit on this connection leaves the write-ahead log at DB_WAL_KICK
 * pages or more, call kick(arg, pages) on the committing thread (it must not block)
 * instead of folding the log back there; past DB_WAL_MAX pages the connection
 * folds what it can itself all the same. SQLite; nothing for PostgreSQL.
 * Without it a connection folds the log back on the commit that passes
 * DB_WAL_KICK pages (SQLite's autocheckpoint).
 */
#define DB_WAL_KICK 1000	/* SQLite's own default: 16 MiB at our 16 KiB pages */
#define DB_WAL_MAX 32768	/* 512 MiB */
void db_wal_kick(struct db *db, void (*kick)(void *arg, int pages), void *arg);
/* 1 when the connection is inside a transaction */
int db_in_tx(struct db *db);
/* 1 when a statement on the connection is not finalized */
int db_busy(struct db *db);
/* the database's size on disk in bytes, or -1 */
int64_t db_size(struct db *db);
/* rows changed by the last INSERT, UPDATE or DELETE */
int64_t db_changes(struct db *db);
/* the last failure: in full (for the log), and in general words (for a client) */
const char *db_errmsg(struct db *db);
const char *db_errstr(struct db *db);
enum db_errkind db_errkind(struct db *db);

/*
 * Many statements that return no rows (inserts), sent without waiting for
 * each: between begin and end, db_step answers DB_DONE at once and a failure
 * is told by db_batch_end (PostgreSQL's pipeline mode: one round trip per
 * few hundred rows instead of one per row; nothing for SQLite, which has no
 * round trips). Nothing else may run on the connection in between.
 */
int db_batch_begin(struct db *db);
int db_batch_end(struct db *db);
/* 0 or DB_ERROR. persistent: kept for many uses (SQLite's hint). */
int db_prepare(struct db *db, const char *sql, int persistent, struct db_stmt **out);
void db_bind_int64(struct db_stmt *st, int i, int64_t v);
void db_bind_int(struct db_stmt *st, int i, int v);
void db_bind_double(struct db_stmt *st, int i, double v);
void db_bind_null(struct db_stmt *st, int i);
/* n < 0: up to the NUL */
void db_bind_text(struct db_stmt *st, int i, const char *s, int n, db_free_fn fn);
void db_bind_blob(struct db_stmt *st, int i, const void *p, int n, db_free_fn fn);
int db_step(struct db_stmt *st);
int db_column_type(struct db_stmt *st, int i);
int64_t db_column_int64(struct db_stmt *st, int i);
int db_column_int(struct db_stmt *st, int i);
double db_column_double(struct db_stmt *st, int i);
const unsigned char *db_column_text(struct db_stmt *st, int i);
const void *db_column_blob(struct db_stmt *st, int i);
int db_column_bytes(struct db_stmt *st, int i);
void db_reset(struct db_stmt *st);
void db_clear_bindings(struct db_stmt *st);
void db_finalize(struct db_stmt *st);

/* The engines, behind the functions above. */
struct db_ops {
	void (*close)(struct db *);
	int (*exec)(struct db *, const char *);
	int (*schema_version)(struct db *);
	int (*migrate)(struct db *, int, const char *);
	int (*begin_write)(struct db *);
	int (*checkpoint)(struct db *, int, int *);
	void (*wal_kick)(struct db *, void (*)(void *, int), void *);
	int (*in_tx)(struct db *);
	int (*busy)(struct db *);
	int64_t (*changes)(struct db *);
	int64_t (*size)(struct db *);
	const char *(*errmsg)(struct db *);
	const char *(*errstr)(struct db *);
	enum db_errkind (*errkind)(struct db *);
	int (*batch_begin)(struct db *);
	int (*batch_end)(struct db *);
	int (*prepare)(struct db *, const char *, int, struct db_stmt **);
	void (*bind_int64)(struct db_stmt *, int, int64_t);
	void (*bind_double)(struct db_stmt *, int, double);
	void (*bind_null)(struct db_stmt *, int);
	void (*bind_text)(struct db_stmt *, int, const char *, int, db_free_fn);
	void (*bind_blob)(struct db_stmt *, int, const void *, int, db_free_fn);
	int (*step)(struct db_stmt *);
	int (*column_type)(struct db_stmt *, int);
	int64_t (*column_int64)(struct db_stmt *, int);
	double (*column_double)(struct db_stmt *, int);
	const unsigned char *(*column_text)(struct db_stmt *, int);
	const void *(*column_blob)(struct db_stmt *, int);
	int (*column_bytes)(struct db_stmt *, int);
	void (*reset)(struct db_stmt *);
	void (*clear_bindings)(struct db_stmt *);
	void (*finalize)(struct db_stmt *);
};

struct db {
	const struct db_ops *ops;
};

struct db_stmt {
	const struct db_ops *ops;
};

int db_sqlite_open(const char *path, int flags, struct db **out, struct tp_errbuf *err);
int db_pg_open(const char *uri, int flags, struct db **out, struct tp_errbuf *err);

#endif
