/*
 * db_sqlite.c: db.h on SQLite, the embedded engine (a file path).
 *
 * Every connection allocates through alloc.h (so tests can fail allocation
 * N) and writes through a VFS that can refuse writes as a full disk would
 * (store_fail_io_after). SUM() is replaced by one that saturates instead of
 * failing. A writer's database is in WAL mode with 16 KiB pages and
 * synchronous=NORMAL (measured: shared/design.md).
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/db.h"
#include "store/store.h"

#define LOG_PREFIX "store"

#define BUSY_TIMEOUT_MS 60000

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* SQLite's allocator interface, on top of ours (alloc.h), so tests can fail allocation N */
static void *sq_malloc(int n)
{
	return tp_malloc((size_t)n);
}

static void *sq_realloc(void *p, int n)
{
	return tp_realloc(p, (size_t)n);
}

static int sq_size(void *p)
{
	return p ? (int)malloc_usable_size(p) : 0;
}

static int sq_roundup(int n)
{
	return (n + 7) & ~7;
}

static int sq_init(void *app)
{
	(void)app;
	return SQLITE_OK;
}

static void sq_shutdown(void *app)
{
	(void)app;
}

/*
 * I/O faults for tests (store_fail_io_after): a VFS over the default one,
 * used by every connection, whose writes, truncates and syncs fail from the
 * n-th on, as a full disk would. Off, it costs one atomic load per write.
 */
static sqlite3_vfs *base_vfs;
static sqlite3_vfs fault_vfs;
static atomic_long io_countdown = -1;
static atomic_long io_failures;

struct fault_file {
	sqlite3_file base;
	sqlite3_file *real;	/* the base VFS's file, allocated right after this struct */
};

static int io_refuse(void)
{
	long left = atomic_load_explicit(&io_countdown, memory_order_relaxed);

	if (left < 0)
		return 0;
	if (left == 0 || atomic_fetch_sub(&io_countdown, 1) <= 0) {
		atomic_store(&io_countdown, 0);
		atomic_fetch_add(&io_failures, 1);
		return 1;
	}
	return 0;
}

void store_fail_io_after(long n)
{
	atomic_store(&io_failures, 0);
	atomic_store(&io_countdown, n < 0 ? -1 : n);
}

long store_io_failures(void)
{
	return atomic_load(&io_failures);
}

#define REAL(f) (((struct fault_file *)(f))->real)

static int f_close(sqlite3_file *f)
{
	int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
	return rc;
}
static int f_read(sqlite3_file *f, void *b, int n, sqlite3_int64 off)
{
	return REAL(f)->pMethods->xRead(REAL(f), b, n, off);
}
static int f_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 off)
{
	return io_refuse() ? SQLITE_FULL : REAL(f)->pMethods->xWrite(REAL(f), b, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return io_refuse() ? SQLITE_IOERR_TRUNCATE : REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags)
{
	return io_refuse() ? SQLITE_IOERR_FSYNC : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int f_unlock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int f_check_lock(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int f_device(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **p)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, p);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int f_shm_unmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **p)
{
	return REAL(f)->pMethods->xFetch(REAL(f), off, n, p);
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

static const sqlite3_io_methods fault_methods = {
	3, f_close, f_read, f_write, f_truncate, f_sync, f_size, f_lock, f_unlock, f_check_lock,
	f_control, f_sector, f_device, f_shm_map, f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch,
	f_unfetch,
};

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags)
{
	struct fault_file *ff = (struct fault_file *)file;
	int rc;

	(void)vfs;
	ff->real = (sqlite3_file *)(ff + 1);
	rc = base_vfs->xOpen(base_vfs, name, ff->real, flags, out_flags);
	/* xClose is called even when xOpen fails, as long as pMethods is set */
	ff->base.pMethods = &fault_methods;
	return rc;
}

static int f_delete(sqlite3_vfs *v, const char *name, int sync)
{
	(void)v;
	return base_vfs->xDelete(base_vfs, name, sync);
}
static int f_access(sqlite3_vfs *v, const char *name, int flags, int *out)
{
	(void)v;
	return base_vfs->xAccess(base_vfs, name, flags, out);
}
static int f_fullpath(sqlite3_vfs *v, const char *name, int n, char *out)
{
	(void)v;
	return base_vfs->xFullPathname(base_vfs, name, n, out);
}
static int f_random(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return base_vfs->xRandomness(base_vfs, n, out);
}
static int f_sleep(sqlite3_vfs *v, int us)
{
	(void)v;
	return base_vfs->xSleep(base_vfs, us);
}
static int f_time(sqlite3_vfs *v, sqlite3_int64 *out)
{
	(void)v;
	return base_vfs->xCurrentTimeInt64(base_vfs, out);
}
static int f_time_d(sqlite3_vfs *v, double *out)
{
	(void)v;
	return base_vfs->xCurrentTime(base_vfs, out);
}
static void *f_dlopen(sqlite3_vfs *v, const char *name)
{
	(void)v;
	return base_vfs->xDlOpen(base_vfs, name);
}
static void f_dlerror(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	base_vfs->xDlError(base_vfs, n, out);
}
static void (*f_dlsym(sqlite3_vfs *v, void *h, const char *sym))(void)
{
	(void)v;
	return base_vfs->xDlSym(base_vfs, h, sym);
}
static void f_dlclose(sqlite3_vfs *v, void *h)
{
	(void)v;
	base_vfs->xDlClose(base_vfs, h);
}
static int f_last_error(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return base_vfs->xGetLastError(base_vfs, n, out);
}

static void register_fault_vfs(void)
{
	base_vfs = sqlite3_vfs_find(NULL);
	fault_vfs = (sqlite3_vfs){
		.iVersion = 2,
		.szOsFile = (int)sizeof(struct fault_file) + base_vfs->szOsFile,
		.mxPathname = base_vfs->mxPathname,
		.zName = "trainscope",
		.xOpen = f_open,
		.xDelete = f_delete,
		.xAccess = f_access,
		.xFullPathname = f_fullpath,
		.xRandomness = f_random,
		.xSleep = f_sleep,
		.xCurrentTime = f_time_d,
		.xDlOpen = f_dlopen,
		.xDlError = f_dlerror,
		.xDlSym = f_dlsym,
		.xDlClose = f_dlclose,
		.xGetLastError = f_last_error,
		.xCurrentTimeInt64 = f_time,
	};
	sqlite3_vfs_register(&fault_vfs, 1);	/* the default for every connection */
}

static void global_init(void)
{
	static const sqlite3_mem_methods mem = { sq_malloc, tp_free, sq_realloc, sq_size, sq_roundup,
						 sq_init, sq_shutdown, NULL };

	tp_alloc_install();
	sqlite3_config(SQLITE_CONFIG_MALLOC, &mem);	/* before SQLite initializes */
	/* no global memory statistics: they take a mutex on every allocation */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_initialize();
	register_fault_vfs();
}

/*
 * SUM() over integers, saturated at the int64 range instead of failing with
 * "integer overflow": a run's durations and sizes come from its uploads, and
 * no accepted upload may make a later read fail. It replaces SQLite's own
 * sum() on every connection; over reals (or a mix) it is their double sum,
 * as sum() is. Aggregate only: a window SUM() OVER (...) would need xInverse.
 */
struct sat_sum {
	int64_t i;
	double d;
	int any, real;
};

static void sat_sum_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	struct sat_sum *a = sqlite3_aggregate_context(ctx, (int)sizeof(*a));

	(void)argc;
	if (!a) {
		sqlite3_result_error_nomem(ctx);
		return;
	}
	switch (sqlite3_value_numeric_type(argv[0])) {
	case SQLITE_NULL:
		return;
	case SQLITE_INTEGER:
		a->i = tp_sat_add(a->i, sqlite3_value_int64(argv[0]));
		break;
	default:
		a->real = 1;
		break;
	}
	a->d += sqlite3_value_double(argv[0]);
	a->any = 1;
}

static void sat_sum_final(sqlite3_context *ctx)
{
	struct sat_sum *a = sqlite3_aggregate_context(ctx, 0);

	if (!a || !a->any)
		sqlite3_result_null(ctx);
	else if (a->real)
		sqlite3_result_double(ctx, a->d);
	else
		sqlite3_result_int64(ctx, a->i);
}

/*
 * Statements finalized by their user are kept, reset and unbound, for the next prepare of the same
 * text on the connection: compiling one (parsing, name lookups, planning) cost more than running it
 * for most of an upload's and a read's statements, some 20 of them an upload. Each connection keeps
 * at most STMT_CACHE, the oldest kept dropped first.
 */
#define STMT_CACHE 24

struct sq_cached {
	sqlite3_stmt *h;
	uint64_t hash;		/* of its text (sql_hash) */
};

struct sq_db {
	struct db base;
	sqlite3 *h;
	int nomem;		/* the last failure was ours (a wrapper's allocation), not SQLite's */
	struct sq_cached cache[STMT_CACHE];	/* cache[0, ncache): oldest kept first */
	unsigned ncache;
	void (*kick)(void *, int);	/* db_wal_kick() */
	void *kick_arg;
};

struct sq_stmt {
	struct db_stmt base;
	sqlite3_stmt *h;
	struct sq_db *db;
	uint64_t hash;
};

#define H(db) (((struct sq_db *)(db))->h)
#define SQ(db) ((struct sq_db *)(db))
#define S(st) (((struct sq_stmt *)(st))->h)

static void sq_close(struct db *db)
{
	struct sq_db *d = (struct sq_db *)db;

	while (d->ncache)
		sqlite3_finalize(d->cache[--d->ncache].h);
	sqlite3_close(d->h);
	tp_free(db);
}

/* FNV-1a of sql: which kept statements to compare it with. */
static uint64_t sql_hash(const char *sql)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *sql; sql++)
		h = (h ^ (uint8_t)*sql) * 0x100000001b3ULL;
	return h;
}

static int sq_exec(struct db *db, const char *sql)
{
	((struct sq_db *)db)->nomem = 0;
	return sqlite3_exec(H(db), sql, NULL, NULL, NULL) == SQLITE_OK ? DB_OK : DB_ERROR;
}

static int sq_schema_version(struct db *db)
{
	sqlite3_stmt *st;
	int v = -1;

	if (sqlite3_prepare_v2(H(db), "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int sq_migrate(struct db *db, int version, const char *sql)
{
	char bump[64];

	snprintf(bump, sizeof(bump), "PRAGMA user_version=%d;", version);
	return sq_exec(db, sql) || sq_exec(db, bump) ? DB_ERROR : DB_OK;
}

static int sq_begin_write(struct db *db)
{
	(void)db;
	return DB_OK;	/* BEGIN IMMEDIATE took it */
}

static int sq_checkpoint(struct db *db, int all, int *log)
{
	int n = 0, done = 0;

	if (sqlite3_wal_checkpoint_v2(H(db), NULL, all ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE, &n,
				      &done) != SQLITE_OK)
		return -1;
	if (log)
		*log = n > 0 ? n : 0;
	return n > done ? n - done : 0;
}

/* SQLite's WAL hook (in place of its autocheckpoint): after each commit, the pages in the log */
static int sq_wal_hook(void *arg, sqlite3 *h, const char *name, int pages)
{
	struct sq_db *db = arg;

	if (pages >= DB_WAL_MAX)
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	else if (pages >= DB_WAL_KICK)
		db->kick(db->kick_arg, pages);
	return SQLITE_OK;
}

static void sq_wal_kick(struct db *db, void (*kick)(void *, int), void *arg)
{
	SQ(db)->kick = kick;
	SQ(db)->kick_arg = arg;
	sqlite3_wal_hook(H(db), sq_wal_hook, db);
}

static int sq_in_tx(struct db *db)
{
	return !sqlite3_get_autocommit(H(db));
}

/* A statement is held: one prepared and not finalized (those kept for the next prepare are not). */
static int sq_busy(struct db *db)
{
	unsigned n = 0;

	for (sqlite3_stmt *st = sqlite3_next_stmt(H(db), NULL); st; st = sqlite3_next_stmt(H(db), st))
		n++;
	return n > ((struct sq_db *)db)->ncache;
}

static int64_t sq_changes(struct db *db)
{
	return sqlite3_changes(H(db));
}

static int64_t sq_dbsize(struct db *db)
{
	sqlite3_stmt *st;
	int64_t v = -1;

	if (sqlite3_prepare_v2(H(db), "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size", -1,
			       &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static const char *sq_errmsg(struct db *db)
{
	return ((struct sq_db *)db)->nomem ? "out of memory" : sqlite3_errmsg(H(db));
}

static const char *sq_errstr(struct db *db)
{
	return ((struct sq_db *)db)->nomem ? "out of memory" : sqlite3_errstr(sqlite3_errcode(H(db)));
}

static enum db_errkind sq_errkind(struct db *db)
{
	int code = sqlite3_errcode(H(db));

	if (((struct sq_db *)db)->nomem)
		return DB_ERR_OTHER;
	if (code == SQLITE_FULL || code == SQLITE_IOERR)
		return DB_ERR_IO;
	return code == SQLITE_OK || code == SQLITE_ROW || code == SQLITE_DONE ? DB_ERR_NONE : DB_ERR_OTHER;
}

static const struct db_ops sq_ops;

static int sq_batch(struct db *db)
{
	(void)db;
	return DB_OK;
}

static int sq_prepare(struct db *db, const char *sql, int persistent, struct db_stmt **out)
{
	struct sq_db *d = (struct sq_db *)db;
	struct sq_stmt *st = tp_malloc(sizeof(*st));
	unsigned i;

	*out = NULL;
	d->nomem = !st;
	if (!st)
		return DB_ERROR;
	st->base.ops = &sq_ops;
	st->db = d;
	st->hash = sql_hash(sql);
	for (i = d->ncache; i-- > 0;)
		if (d->cache[i].hash == st->hash && !strcmp(sqlite3_sql(d->cache[i].h), sql)) {
			st->h = d->cache[i].h;
			memmove(&d->cache[i], &d->cache[i + 1], (d->ncache - i - 1) * sizeof(d->cache[0]));
			d->ncache--;
			*out = &st->base;
			return DB_OK;
		}
	if (sqlite3_prepare_v3(H(db), sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0, &st->h, NULL) !=
	    SQLITE_OK) {
		tp_free(st);
		return DB_ERROR;
	}
	*out = &st->base;
	return DB_OK;
}

static void sq_bind_int64(struct db_stmt *st, int i, int64_t v)
{
	sqlite3_bind_int64(S(st), i, v);
}

static void sq_bind_double(struct db_stmt *st, int i, double v)
{
	sqlite3_bind_double(S(st), i, v);
}

static void sq_bind_null(struct db_stmt *st, int i)
{
	sqlite3_bind_null(S(st), i);
}

static void sq_bind_text(struct db_stmt *st, int i, const char *s, int n, db_free_fn fn)
{
	sqlite3_bind_text(S(st), i, s, n, fn == DB_TRANSIENT ? SQLITE_TRANSIENT : fn);
}

static void sq_bind_blob(struct db_stmt *st, int i, const void *p, int n, db_free_fn fn)
{
	sqlite3_bind_blob(S(st), i, p, n, fn == DB_TRANSIENT ? SQLITE_TRANSIENT : fn);
}

static int sq_step(struct db_stmt *st)
{
	int r = sqlite3_step(S(st));

	return r == SQLITE_ROW ? DB_ROW : r == SQLITE_DONE ? DB_DONE : DB_ERROR;
}

static int sq_column_type(struct db_stmt *st, int i)
{
	return sqlite3_column_type(S(st), i);	/* the same numbers */
}

static int64_t sq_column_int64(struct db_stmt *st, int i)
{
	return sqlite3_column_int64(S(st), i);
}

static double sq_column_double(struct db_stmt *st, int i)
{
	return sqlite3_column_double(S(st), i);
}

static const unsigned char *sq_column_text(struct db_stmt *st, int i)
{
	return sqlite3_column_text(S(st), i);
}

static const void *sq_column_blob(struct db_stmt *st, int i)
{
	return sqlite3_column_blob(S(st), i);
}

static int sq_column_bytes(struct db_stmt *st, int i)
{
	return sqlite3_column_bytes(S(st), i);
}

static void sq_reset(struct db_stmt *st)
{
	sqlite3_reset(S(st));
}

static void sq_clear_bindings(struct db_stmt *st)
{
	sqlite3_clear_bindings(S(st));
}

/* Kept for the next prepare of its text (reset, its bindings cleared), or finalized. */
static void sq_finalize(struct db_stmt *st)
{
	struct sq_stmt *s = (struct sq_stmt *)st;
	struct sq_db *d;

	if (!st)
		return;
	d = s->db;
	if (s->h) {
		sqlite3_reset(s->h);
		sqlite3_clear_bindings(s->h);
		if (d->ncache == STMT_CACHE) {
			sqlite3_finalize(d->cache[0].h);
			memmove(&d->cache[0], &d->cache[1], (STMT_CACHE - 1) * sizeof(d->cache[0]));
			d->ncache--;
		}
		d->cache[d->ncache++] = (struct sq_cached){ s->h, s->hash };
	}
	tp_free(st);
}

static const struct db_ops sq_ops = {
	.close = sq_close, .exec = sq_exec, .schema_version = sq_schema_version, .migrate = sq_migrate,
	.begin_write = sq_begin_write, .checkpoint = sq_checkpoint, .wal_kick = sq_wal_kick, .in_tx = sq_in_tx, .busy = sq_busy,
	.changes = sq_changes, .size = sq_dbsize, .errmsg = sq_errmsg, .errstr = sq_errstr, .errkind = sq_errkind, .batch_begin = sq_batch, .batch_end = sq_batch, .prepare = sq_prepare,
	.bind_int64 = sq_bind_int64, .bind_double = sq_bind_double, .bind_null = sq_bind_null,
	.bind_text = sq_bind_text, .bind_blob = sq_bind_blob, .step = sq_step, .column_type = sq_column_type,
	.column_int64 = sq_column_int64, .column_double = sq_column_double, .column_text = sq_column_text,
	.column_blob = sq_column_blob, .column_bytes = sq_column_bytes, .reset = sq_reset,
	.clear_bindings = sq_clear_bindings, .finalize = sq_finalize,
};

int db_sqlite_open(const char *path, int flags, struct db **out, struct tp_errbuf *err)
{
	struct sq_db *db;
	sqlite3 *h = NULL;
	int oflags = SQLITE_OPEN_NOMUTEX | (flags & DB_OPEN_READONLY ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE);

	*out = NULL;
	pthread_once(&global_once, global_init);
	if (flags & DB_OPEN_CREATE)
		oflags |= SQLITE_OPEN_CREATE;
	if (!(db = tp_calloc(1, sizeof(*db))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	db->base.ops = &sq_ops;
	if (sqlite3_open_v2(path, &h, oflags, NULL) != SQLITE_OK) {
		int rc = tp_fail(err, TP_ERR_IO, "storage_error", "cannot open database %s: %s", path,
				 h ? sqlite3_errmsg(h) : "out of memory");
		sqlite3_close(h);
		tp_free(db);
		return rc;
	}
	db->h = h;
	sqlite3_busy_timeout(h, BUSY_TIMEOUT_MS);
	sqlite3_extended_result_codes(h, 0);
	if (sqlite3_create_function(h, "sum", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, NULL, sat_sum_step,
				    sat_sum_final) != SQLITE_OK ||
	    sq_exec(&db->base, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=OFF; PRAGMA temp_store=MEMORY;"
					 " PRAGMA journal_size_limit=67108864;") ||
	    /* page_size only takes effect before the first table exists */
	    ((flags & DB_OPEN_CREATE) && sq_exec(&db->base, "PRAGMA page_size=16384; PRAGMA journal_mode=WAL;"))) {
		int code = sqlite3_errcode(h);
		int rc = code == SQLITE_FULL || code == SQLITE_IOERR ?
			 tp_fail(err, TP_ERR_IO, "storage_error", "open %s: %s", path, sqlite3_errmsg(h)) :
			 tp_fail(err, TP_ERR_DB, "database_error", "open %s: %s", path, sqlite3_errmsg(h));
		sq_close(&db->base);
		return rc;
	}
	*out = &db->base;
	return TP_OK;
}
