/*
 * db_pg.c: db.h on PostgreSQL (libpq), for several servers on one dataset.
 *
 * Statements: the store's SQL is rewritten once at prepare (translate()):
 * ?N parameters become $N, INSERT OR IGNORE becomes ON CONFLICT DO NOTHING,
 * BEGIN IMMEDIATE a plain BEGIN (the write lock is db_begin_write's advisory
 * lock, so writers are serialized across servers as SQLite serializes them),
 * two-argument max()/min() GREATEST()/LEAST(). Each step runs the statement
 * with its parameters (typed: int8, float8, bytea; text left for the server
 * to infer) and keeps the whole result; columns come back as text and are
 * converted as SQLite converts them.
 *
 * Schema: the SQLite migrations, with their types mapped (schema()): INTEGER
 * is BIGINT, REAL DOUBLE PRECISION, BLOB BYTEA, TEXT TEXT COLLATE "C" (so
 * text sorts bytewise, as SQLite's BINARY); an INTEGER PRIMARY KEY is an
 * identity column. A schema "trainscope" holds the tables and the functions
 * that make SQLite's semantics hold: sum() over integers is a bigint that
 * saturates, as db_sqlite.c's is, and total() a double. Migrations are
 * recorded in trainscope.schema_version and applied under the write lock,
 * so the first of several servers starting at once applies them.
 */
#include <ctype.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "store/db.h"

#define LOG_PREFIX "store"

/* pg_type OIDs (catalog/pg_type_d.h, stable across versions) */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_FLOAT4 700
#define OID_FLOAT8 701
#define OID_NUMERIC 1700

/* the advisory lock every write transaction takes: writers one at a time, on every server */
#define WRITE_LOCK "SELECT pg_advisory_xact_lock(7411202611)"

struct pg_db {
	struct db base;
	PGconn *c;
	int64_t changes;
	int nstmts;		/* not finalized */
	int tx;			/* inside BEGIN ... COMMIT/ROLLBACK, as we sent them (a lost connection forgets) */
	/*
	 * A batch (db_batch_begin): plain inserts become rows of one COPY ... FROM STDIN (copy_st's,
	 * in copy, text format), other statements are pipelined (piped; pending: sent since the last
	 * sync); a failure is kept for db_batch_end (batch_failed).
	 */
	int batch, piped, pending, batch_failed;
	struct pg_stmt *copy_st;
	char *copy;
	size_t ncopy, copy_cap;
	enum db_errkind kind;
	char err[256];
};

struct pg_param {
	char num[24];		/* an integer's text (no allocation per number: COPY sends millions) */
	char *own;		/* our copy, or NULL */
	const char *val;	/* NULL: SQL NULL */
	int len, fmt;
	Oid type;
};

struct pg_stmt {
	struct db_stmt base;
	struct pg_db *db;
	char *sql;
	int nparams;
	uint64_t null_tested;	/* see translate() */
	struct pg_param *p;
	PGresult *res;
	int row, nrows;		/* row: the current one, -1 before the first step */
	char *copy_sql;		/* "COPY t(cols) FROM STDIN" when sql is a plain INSERT of $1..$n, else NULL */
	unsigned char *blob;	/* a bytea column decoded, for the current row */
	int blob_col;
	size_t blob_len, blob_cap;
};

/* the most parameters a statement binds */
#define MAX_PARAMS 64

#define PDB(db) ((struct pg_db *)(db))
#define PST(st) ((struct pg_stmt *)(st))

static void set_err(struct pg_db *db, const char *msg)
{
	size_t n;

	db->kind = PQstatus(db->c) != CONNECTION_OK ? DB_ERR_UNAVAILABLE : DB_ERR_OTHER;
	snprintf(db->err, sizeof(db->err), "%s", msg && *msg ? msg : "PostgreSQL error");
	n = strlen(db->err);
	while (n && (db->err[n - 1] == '\n' || db->err[n - 1] == ' '))
		db->err[--n] = 0;
}

/*
 * A connection lost between transactions is made again (a restarted
 * PostgreSQL); 0 when usable. Inside one it is not: the statements after
 * would run alone, outside the transaction; they fail until its ROLLBACK.
 */
static int ensure(struct pg_db *db)
{
	if (PQstatus(db->c) == CONNECTION_OK)
		return 0;
	if (db->tx) {
		set_err(db, "the connection to the database was lost inside a transaction");
		db->kind = DB_ERR_UNAVAILABLE;
		return -1;
	}
	PQreset(db->c);
	if (PQstatus(db->c) != CONNECTION_OK) {
		set_err(db, PQerrorMessage(db->c));
		db->kind = DB_ERR_UNAVAILABLE;
		return -1;
	}
	/* a new session: its settings again */
	PQclear(PQexec(db->c, "SET search_path = trainscope, pg_catalog"));
	return 0;
}

/* Note BEGIN, COMMIT and ROLLBACK (ensure()); a ROLLBACK ends the transaction even when it fails. */
static void track(struct pg_db *db, const char *sql, int ok)
{
	if (!strncmp(sql, "BEGIN", 5))
		db->tx = ok || db->tx;
	else if (!strncmp(sql, "ROLLBACK", 8) || (ok && !strncmp(sql, "COMMIT", 6)))
		db->tx = 0;
}

/* Run sql, no rows wanted; 0 or DB_ERROR. */
static int run(struct pg_db *db, const char *sql)
{
	PGresult *res;
	int ok;

	if (!strncmp(sql, "ROLLBACK", 8) && PQstatus(db->c) != CONNECTION_OK) {
		db->tx = 0;	/* nothing to roll back on a lost connection: the server did */
		return DB_OK;
	}
	if (ensure(db))
		return DB_ERROR;
	res = PQexec(db->c, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		set_err(db, res ? PQresultErrorMessage(res) : PQerrorMessage(db->c));
	else
		db->kind = DB_ERR_NONE;
	PQclear(res);
	track(db, sql, ok);
	return ok ? DB_OK : DB_ERROR;
}

/* ---- SQL translation ---- */

struct sbuf {
	char *p;
	size_t n, cap;
	int fail;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
	if (b->fail)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = (b->n + n + 1) * 2;
		char *p = tp_realloc(b->p, cap);
		if (!p) {
			b->fail = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

static int is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* s at a keyword kw (case-insensitive), whole word */
static int at_word(const char *start, const char *s, const char *kw)
{
	size_t n = strlen(kw);

	return !strncasecmp(s, kw, n) && !is_ident(s[n]) && (s == start || !is_ident(s[-1]));
}

/* The closing parenthesis of the one at s, and whether a comma is directly inside. */
static const char *close_paren(const char *s, int *comma)
{
	int depth = 0;

	*comma = 0;
	for (; *s; s++) {
		if (*s == '\'') {
			for (s++; *s && *s != '\''; s++)
				;
			if (!*s)
				return NULL;
		} else if (*s == '(') {
			depth++;
		} else if (*s == ')') {
			if (--depth == 0)
				return s;
		} else if (*s == ',' && depth == 1) {
			*comma = 1;
		}
	}
	return NULL;
}

/* the next word after s, past blanks */
static const char *next_word(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n')
		s++;
	return s;
}

/*
 * The closing parentheses of subqueries in FROM that have no alias (SQLite
 * allows that, PostgreSQL 15 does not), at most max of them; how many.
 */
static int unaliased(const char *sql, const char **out, int max)
{
	const char *s = sql, *e, *w;
	int n = 0, comma;
	static const char *const follow[] = { "WHERE", "GROUP", "ORDER", "LIMIT", "JOIN", "LEFT", "UNION", "ON",
					       "EXCEPT", "INTERSECT" };
	size_t i;

	for (; *s && n < max; s++) {
		if (*s == '\'') {
			for (s++; *s && *s != '\''; s++)
				;
			if (!*s)
				break;
			continue;
		}
		if (!at_word(sql, s, "FROM") || *(w = next_word(s + 4)) != '(' || !(e = close_paren(w, &comma)) ||
		    (s - sql >= 9 && !strncasecmp(s - 9, "DISTINCT ", 9)))	/* IS NOT DISTINCT FROM (...) */
			continue;
		w = next_word(e + 1);
		for (i = 0; i < sizeof(follow) / sizeof(follow[0]) && !at_word(sql, w, follow[i]); i++)
			;
		if (!*w || *w == ')' || *w == ',' || *w == ';' || i < sizeof(follow) / sizeof(follow[0]))
			out[n++] = e;
	}
	return n;
}

/* The store's SQL in PostgreSQL's dialect (see the top); a new string or NULL. null_tested: the
 * parameters written "?N IS NULL" (bit N-1), which need a type when bound NULL. */
static char *translate(const char *sql, int *nparams, uint64_t *null_tested)
{
	struct sbuf b = { 0 };
	const char *s = sql, *alias[16];
	int next = 0, ignore = 0, nalias = unaliased(sql, alias, 16), k;
	char num[32];

	*nparams = 0;
	*null_tested = 0;
	sb_put(&b, "", 0);
	while (*s) {
		for (k = 0; k < nalias && alias[k] != s; k++)
			;
		if (k < nalias) {
			snprintf(num, sizeof(num), ") AS _q%d", k);
			sb_str(&b, num);
			s++;
		} else if (*s == '\'') {	/* a literal, as is */
			const char *e = s + 1;
			while (*e && !(*e == '\'' && e[1] != '\''))
				e += *e == '\'' ? 2 : 1;
			if (*e)
				e++;
			sb_put(&b, s, (size_t)(e - s));
			s = e;
		} else if (*s == '?') {
			int n = 0;
			s++;
			if (*s >= '0' && *s <= '9')
				while (*s >= '0' && *s <= '9')
					n = n * 10 + (*s++ - '0');
			else
				n = ++next;
			if (n > *nparams)
				*nparams = n;
			if (n <= 64 && at_word(sql, next_word(s), "IS"))
				*null_tested |= 1ull << (n - 1);
			snprintf(num, sizeof(num), "$%d", n);
			sb_str(&b, num);
		} else if (at_word(sql, s, "INSERT OR IGNORE")) {
			sb_str(&b, "INSERT");
			s += 16;
			ignore = 1;
		} else if (at_word(sql, s, "BEGIN IMMEDIATE")) {
			sb_str(&b, "BEGIN");
			s += 15;
		} else if (!strncmp(s, "offset", 6) && at_word(sql, s, "offset")) {	/* a column, reserved here */
			sb_str(&b, "\"offset\"");
			s += 6;
		} else if (at_word(sql, s, "INTEGER")) {	/* CAST(x AS INTEGER): SQLite's integers are 64-bit */
			sb_str(&b, "BIGINT");
			s += 7;
		} else if (at_word(sql, s, "REAL")) {
			sb_str(&b, "DOUBLE PRECISION");
			s += 4;
		} else if ((at_word(sql, s, "max") || at_word(sql, s, "min")) && s[3] == '(') {
			int comma;
			const char *e = close_paren(s + 3, &comma);
			sb_str(&b, e && comma ? (tolower((unsigned char)s[1]) == 'a' ? "GREATEST" : "LEAST") :
					     (tolower((unsigned char)s[1]) == 'a' ? "max" : "min"));
			s += 3;
		} else {
			sb_put(&b, s, 1);
			s++;
		}
	}
	if (ignore)
		sb_str(&b, " ON CONFLICT DO NOTHING");
	if (b.fail) {
		tp_free(b.p);
		return NULL;
	}
	return b.p;
}

/* A SQLite migration's schema in PostgreSQL's types (see the top); a new string or NULL. */
static char *schema(const char *sql)
{
	static const struct {
		const char *from, *to;
	} map[] = {
		{ "INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" },
		{ "INTEGER", "BIGINT" },
		{ "REAL", "DOUBLE PRECISION" },
		{ "BLOB", "BYTEA" },
		{ "TEXT", "TEXT COLLATE \"C\"" },
		{ "WITHOUT ROWID", "" },
		{ "offset", "\"offset\"" },	/* a column name, a reserved word here */
	};
	struct sbuf b = { 0 };
	const char *s = sql;
	size_t i;

	sb_put(&b, "", 0);
	while (*s) {
		if (s[0] == '-' && s[1] == '-') {	/* a comment: to the end of the line */
			const char *e = strchr(s, '\n');
			size_t n = e ? (size_t)(e - s) : strlen(s);
			sb_put(&b, s, n);
			s += n;
			continue;
		}
		if (*s == '\'') {
			const char *e = strchr(s + 1, '\'');
			size_t n = e ? (size_t)(e + 1 - s) : strlen(s);
			sb_put(&b, s, n);
			s += n;
			continue;
		}
		for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
			if (!strncmp(s, map[i].from, strlen(map[i].from)) && !is_ident(s[strlen(map[i].from)]) &&
			    (s == sql || !is_ident(s[-1])))
				break;
		if (i < sizeof(map) / sizeof(map[0])) {
			sb_str(&b, map[i].to);
			s += strlen(map[i].from);
		} else {
			sb_put(&b, s, 1);
			s++;
		}
	}
	if (b.fail) {
		tp_free(b.p);
		return NULL;
	}
	return b.p;
}

/* ---- connection ---- */

static void pg_close(struct db *db)
{
	tp_free(PDB(db)->copy);
	PQfinish(PDB(db)->c);
	tp_free(db);
}

static int pg_exec(struct db *db, const char *sql)
{
	uint64_t nt;
	int n, rc;
	char *t;

	/* a reader's snapshot (store_read_snapshot) sees one state of the database, as SQLite's does */
	if (!strcmp(sql, "BEGIN"))
		return run(PDB(db), "BEGIN ISOLATION LEVEL REPEATABLE READ");
	if (!(t = translate(sql, &n, &nt))) {
		set_err(PDB(db), "out of memory");
		return DB_ERROR;
	}
	rc = run(PDB(db), t);
	tp_free(t);
	return rc;
}

/* The one value sql answers, as an integer, into *v: 0, or -1 (the error kept when keep_err). */
static int scalar(struct pg_db *d, const char *sql, int keep_err, int64_t *v)
{
	PGresult *res;
	int rc = -1;

	if (ensure(d))
		return -1;
	res = PQexec(d->c, sql);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		*v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		rc = 0;
	} else if (keep_err) {
		set_err(d, PQresultErrorMessage(res));
	}
	PQclear(res);
	return rc;
}

static int pg_schema_version(struct db *db)
{
	int64_t v;

	return scalar(PDB(db), "SELECT COALESCE(MAX(version), 0) FROM trainscope.schema_version", 1, &v) ? -1 : (int)v;
}

static int pg_migrate(struct db *db, int version, const char *sql)
{
	char *t = schema(sql), bump[96];
	int rc;

	if (!t) {
		set_err(PDB(db), "out of memory");
		return DB_ERROR;
	}
	rc = run(PDB(db), t);
	tp_free(t);
	/*
	 * The big values (measured on the 1 GB trace, bench/results/ingest_engines-20261126.txt): raw
	 * uploads are gzip already, so not compressed again; event blocks in lz4 rather than pglz
	 * (4x smaller, faster), where this PostgreSQL has it.
	 */
	if (!rc && version == 1) {
		rc = run(PDB(db), "ALTER TABLE raw_chunks ALTER COLUMN data SET STORAGE EXTERNAL");
		if (!rc && !run(PDB(db), "SAVEPOINT lz4") &&
		    run(PDB(db), "ALTER TABLE event_blocks ALTER COLUMN data SET COMPRESSION lz4"))
			rc = run(PDB(db), "ROLLBACK TO SAVEPOINT lz4");
	}
	snprintf(bump, sizeof(bump), "INSERT INTO trainscope.schema_version(version) VALUES(%d)", version);
	return rc ? rc : run(PDB(db), bump);
}

static int pg_begin_write(struct db *db)
{
	return run(PDB(db), WRITE_LOCK);
}

static int pg_checkpoint(struct db *db, int all, int *log)
{
	(void)db;
	(void)all;
	if (log)
		*log = 0;
	return 0;
}

static void pg_wal_kick(struct db *db, void (*kick)(void *, int), void *arg)
{
	(void)db;
	(void)kick;
	(void)arg;
}

static int pg_in_tx(struct db *db)
{
	PGTransactionStatusType t = PQtransactionStatus(PDB(db)->c);

	return PDB(db)->tx || t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

static int pg_busy(struct db *db)
{
	return PDB(db)->nstmts > 0;
}

static int64_t pg_changes(struct db *db)
{
	return PDB(db)->changes;
}

static int64_t pg_size(struct db *db)
{
	int64_t v;

	return scalar(PDB(db), "SELECT pg_database_size(current_database())", 0, &v) ? -1 : v;
}

static const char *pg_errmsg(struct db *db)
{
	return PDB(db)->err;
}

static const char *pg_errstr(struct db *db)
{
	return PDB(db)->kind == DB_ERR_UNAVAILABLE ? "database unavailable" : "database error";
}

static enum db_errkind pg_errkind(struct db *db)
{
	return PDB(db)->kind;
}

/* ---- batches: pipeline mode ---- */

/* statements sent before a sync: their results (a few dozen bytes each) must fit the socket's buffers */
#define PIPELINE_MAX 256
/* a batch's COPY rows sent once they reach this many bytes */
#define COPY_MAX (4 << 20)

/* Sync, and read every result sent since the last; DB_ERROR (the first failure kept) if one failed. */
static int drain(struct pg_db *db)
{
	int failed = 0;

	if (!PQpipelineSync(db->c)) {
		set_err(db, PQerrorMessage(db->c));
		return DB_ERROR;
	}
	for (;;) {
		PGresult *res = PQgetResult(db->c);
		ExecStatusType s;
		if (!res) {	/* the end of one statement's results */
			if (PQstatus(db->c) != CONNECTION_OK) {
				set_err(db, PQerrorMessage(db->c));
				failed = 1;
				break;
			}
			continue;
		}
		s = PQresultStatus(res);
		if (s == PGRES_FATAL_ERROR && !failed) {
			set_err(db, PQresultErrorMessage(res));
			failed = 1;
		}
		PQclear(res);
		if (s == PGRES_PIPELINE_SYNC)
			break;
	}
	db->pending = 0;
	return failed ? DB_ERROR : DB_OK;
}

/* Append n bytes to the COPY buffer; -1 when out of memory. */
static int copy_put(struct pg_db *db, const char *p, size_t n)
{
	if (db->ncopy + n > db->copy_cap) {
		size_t cap = (db->ncopy + n) * 2;
		char *q = tp_realloc(db->copy, cap);
		if (!q)
			return -1;
		db->copy = q;
		db->copy_cap = cap;
	}
	memcpy(db->copy + db->ncopy, p, n);
	db->ncopy += n;
	return 0;
}

/* One row of st's parameters in COPY's text format. */
static int copy_row(struct pg_db *db, const struct pg_stmt *st)
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < st->nparams; i++) {
		const struct pg_param *p = &st->p[i];
		if (i && copy_put(db, "\t", 1))
			return -1;
		if (!p->val) {
			if (copy_put(db, "\\N", 2))
				return -1;
		} else if (p->fmt) {	/* bytea: \x and hex digits, the backslash escaped */
			if (copy_put(db, "\\\\x", 3))
				return -1;
			for (int k = 0; k < p->len; k++) {
				char h[2] = { hex[(unsigned char)p->val[k] >> 4], hex[(unsigned char)p->val[k] & 15] };
				if (copy_put(db, h, 2))
					return -1;
			}
		} else {
			for (const char *c = p->val; *c; c++) {
				const char *e = *c == '\\' ? "\\\\" : *c == '\n' ? "\\n" : *c == '\r' ? "\\r" :
						*c == '\t' ? "\\t" : NULL;
				if (e ? copy_put(db, e, 2) : copy_put(db, c, 1))
					return -1;
			}
		}
	}
	return copy_put(db, "\n", 1);
}

/* Send the buffered rows as one COPY; DB_ERROR (kept for db_batch_end) if it failed. */
static int copy_flush(struct pg_db *db)
{
	PGresult *res;
	int ok;

	if (!db->copy_st)
		return DB_OK;
	res = PQexec(db->c, db->copy_st->copy_sql);
	ok = PQresultStatus(res) == PGRES_COPY_IN;
	PQclear(res);
	if (ok) {
		ok = PQputCopyData(db->c, db->copy, (int)db->ncopy) == 1;
		ok = PQputCopyEnd(db->c, ok ? NULL : "cut short") == 1 && ok;
		while ((res = PQgetResult(db->c))) {
			if (PQresultStatus(res) != PGRES_COMMAND_OK && ok) {
				set_err(db, PQresultErrorMessage(res));
				ok = 0;
			}
			PQclear(res);
		}
	} else {
		set_err(db, PQerrorMessage(db->c));
	}
	db->copy_st = NULL;
	db->ncopy = 0;
	if (!ok)
		db->batch_failed = 1;
	return ok ? DB_OK : DB_ERROR;
}

/* Leave pipeline mode, its results read; DB_ERROR (kept) if one failed. */
static int unpipe(struct pg_db *db)
{
	int rc;

	if (!db->piped)
		return DB_OK;
	rc = drain(db);
	PQexitPipelineMode(db->c);
	db->piped = 0;
	if (rc)
		db->batch_failed = 1;
	return rc;
}

static int pg_batch_begin(struct db *db)
{
	if (ensure(PDB(db)))
		return DB_ERROR;
	PDB(db)->batch = 1;
	PDB(db)->batch_failed = 0;
	return DB_OK;
}

static int pg_batch_end(struct db *db)
{
	struct pg_db *d = PDB(db);

	if (!d->batch)
		return DB_OK;
	copy_flush(d);
	unpipe(d);
	d->batch = 0;
	return d->batch_failed ? DB_ERROR : DB_OK;
}

/*
 * "COPY t(cols) FROM STDIN" for a translated INSERT INTO t(cols) VALUES($1, ..., $n) with nothing
 * else (no conflict clause, no RETURNING, no expression); NULL otherwise.
 */
static char *copy_of(const char *sql, int nparams)
{
	const char *v = strstr(sql, ") VALUES("), *p;
	char *out;
	int i;

	if (strncmp(sql, "INSERT INTO ", 12) || !v || nparams < 1)
		return NULL;
	p = v + 9;
	for (i = 1; i <= nparams; i++) {
		char want[16];
		int n = snprintf(want, sizeof(want), i < nparams ? "$%d," : "$%d)", i);
		while (*p == ' ')
			p++;
		if (strncmp(p, want, (size_t)n))
			return NULL;
		p += n;
	}
	if (*p)
		return NULL;
	if (!(out = tp_malloc((size_t)(v + 1 - sql) + 32)))
		return NULL;
	snprintf(out, (size_t)(v + 1 - sql) + 32, "COPY %.*s FROM STDIN", (int)(v + 1 - (sql + 12)), sql + 12);
	return out;
}

/* ---- statements ---- */

static const struct db_ops pg_ops;

static int pg_prepare(struct db *db, const char *sql, int persistent, struct db_stmt **out)
{
	struct pg_stmt *st = tp_calloc(1, sizeof(*st));

	(void)persistent;
	*out = NULL;
	if (!st || !(st->sql = translate(sql, &st->nparams, &st->null_tested)) ||
	    (st->nparams && !(st->p = tp_calloc((size_t)st->nparams, sizeof(*st->p))))) {
		if (st)
			tp_free(st->sql);
		tp_free(st);
		set_err(PDB(db), "out of memory");
		return DB_ERROR;
	}
	st->base.ops = &pg_ops;
	st->db = PDB(db);
	st->copy_sql = copy_of(st->sql, st->nparams);	/* NULL also when out of memory: then pipelined */
	st->row = -1;
	st->blob_col = -1;
	PDB(db)->nstmts++;
	*out = &st->base;
	return DB_OK;
}

static struct pg_param *param(struct pg_stmt *st, int i)
{
	struct pg_param *p;

	if (i < 1 || i > st->nparams)
		return NULL;
	p = &st->p[i - 1];
	tp_free(p->own);
	p->own = NULL;
	p->val = NULL;
	p->len = p->fmt = 0;
	p->type = 0;
	return p;
}

static void pg_bind_int64(struct db_stmt *s, int i, int64_t v)
{
	struct pg_param *p = param(PST(s), i);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	char tmp[24], *e = tmp + sizeof(tmp);

	if (!p)
		return;
	*--e = 0;
	do
		*--e = (char)('0' + u % 10);
	while ((u /= 10));
	if (v < 0)
		*--e = '-';
	memcpy(p->num, e, (size_t)(tmp + sizeof(tmp) - e));
	p->val = p->num;
	p->type = OID_INT8;
}

static void pg_bind_double(struct db_stmt *s, int i, double v)
{
	struct pg_param *p = param(PST(s), i);

	if (p && (p->own = tp_malloc(32))) {
		if (isnan(v))
			snprintf(p->own, 32, "NaN");
		else if (isinf(v))
			snprintf(p->own, 32, v > 0 ? "Infinity" : "-Infinity");
		else
			snprintf(p->own, 32, "%.17g", v);
		p->val = p->own;
		p->type = OID_FLOAT8;
	}
}

static void pg_bind_null(struct db_stmt *s, int i)
{
	param(PST(s), i);
}

static void pg_bind_text(struct db_stmt *s, int i, const char *v, int n, db_free_fn fn)
{
	struct pg_param *p = param(PST(s), i);
	size_t len = n < 0 ? strlen(v) : (size_t)n;

	if (p && (p->own = tp_malloc(len + 1))) {
		memcpy(p->own, v, len);
		p->own[len] = 0;
		p->val = p->own;
	}
	if (fn != DB_STATIC && fn != DB_TRANSIENT)
		fn((void *)v);
}

static void pg_bind_blob(struct db_stmt *s, int i, const void *v, int n, db_free_fn fn)
{
	struct pg_param *p = param(PST(s), i);

	if (!p)
		return;
	p->fmt = 1;
	p->type = OID_BYTEA;
	p->len = n;
	if (fn == DB_STATIC) {
		p->val = n ? v : "";
	} else if ((p->own = tp_malloc((size_t)n + 1))) {
		memcpy(p->own, v, (size_t)n);
		p->val = p->own;
		if (fn != DB_TRANSIENT)
			fn((void *)v);
	}
}

static int pg_step(struct db_stmt *s)
{
	struct pg_stmt *st = PST(s);
	struct pg_db *db = st->db;

	if (st->row < 0) {
		const char *vals[MAX_PARAMS];
		int lens[MAX_PARAMS], fmts[MAX_PARAMS];
		Oid types[MAX_PARAMS];
		ExecStatusType status;
		int i;

		if (st->nparams > MAX_PARAMS) {
			set_err(db, "too many parameters");
			return DB_ERROR;
		}
		if (!strncmp(st->sql, "ROLLBACK", 8) && PQstatus(db->c) != CONNECTION_OK) {
			db->tx = 0;
			st->row = st->nrows = 0;
			return DB_DONE;
		}
		if (ensure(db))
			return DB_ERROR;
		for (i = 0; i < st->nparams; i++) {
			vals[i] = st->p[i].val;
			lens[i] = st->p[i].len;
			fmts[i] = st->p[i].fmt;
			/* "?N IS NULL" alone types nothing: such parameters are text (the store's optional filters) */
			types[i] = st->p[i].type || i >= 64 || !(st->null_tested >> i & 1) ? st->p[i].type : 25;
		}
		PQclear(st->res);
		st->res = NULL;
		if (db->batch && st->copy_sql) {	/* a row of the batch's COPY */
			if ((db->copy_st != st && copy_flush(db)) || unpipe(db))
				return DB_ERROR;
			db->copy_st = st;
			if (copy_row(db, st)) {
				set_err(db, "out of memory");
				db->batch_failed = 1;
				return DB_ERROR;
			}
			if (db->ncopy >= COPY_MAX && copy_flush(db))
				return DB_ERROR;
			st->row = st->nrows = 0;
			return DB_DONE;
		}
		if (db->batch) {	/* sent; its result read at the next sync */
			if (copy_flush(db))
				return DB_ERROR;
			if (!db->piped) {
				if (!PQenterPipelineMode(db->c)) {
					set_err(db, PQerrorMessage(db->c));
					return DB_ERROR;
				}
				db->piped = 1;
			}
			if (!PQsendQueryParams(db->c, st->sql, st->nparams, types, vals, lens, fmts, 0)) {
				set_err(db, PQerrorMessage(db->c));
				db->batch_failed = 1;
				return DB_ERROR;
			}
			if (++db->pending >= PIPELINE_MAX && drain(db)) {
				db->batch_failed = 1;
				return DB_ERROR;
			}
			st->row = st->nrows = 0;
			return DB_DONE;
		}
		st->res = PQexecParams(db->c, st->sql, st->nparams, types, vals, lens, fmts, 0);
		status = PQresultStatus(st->res);
		track(db, st->sql, status == PGRES_COMMAND_OK);
		if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
			set_err(db, st->res ? PQresultErrorMessage(st->res) : PQerrorMessage(db->c));
			return DB_ERROR;
		}
		db->kind = DB_ERR_NONE;
		db->changes = strtoll(PQcmdTuples(st->res), NULL, 10);
		st->nrows = status == PGRES_TUPLES_OK ? PQntuples(st->res) : 0;
	}
	st->blob_col = -1;
	if (st->row + 1 < st->nrows) {
		st->row++;
		return DB_ROW;
	}
	st->row = st->nrows;
	return DB_DONE;
}

static int valid(struct pg_stmt *st, int i)
{
	return st->res && st->row >= 0 && st->row < st->nrows && i >= 0 && i < PQnfields(st->res) &&
	       !PQgetisnull(st->res, st->row, i);
}

static int pg_column_type(struct db_stmt *s, int i)
{
	struct pg_stmt *st = PST(s);

	if (!valid(st, i))
		return DB_NULL;
	switch (PQftype(st->res, i)) {
	case OID_INT8: case OID_INT4: case OID_INT2: case OID_BOOL:
		return DB_INTEGER;
	case OID_FLOAT4: case OID_FLOAT8:
		return DB_FLOAT;
	case OID_NUMERIC:
		return strpbrk(PQgetvalue(st->res, st->row, i), ".eEN") ? DB_FLOAT : DB_INTEGER;
	case OID_BYTEA:
		return DB_BLOB;
	default:
		return DB_TEXT;
	}
}

static double pg_column_double(struct db_stmt *s, int i)
{
	struct pg_stmt *st = PST(s);
	const char *v;

	if (!valid(st, i))
		return 0;
	v = PQgetvalue(st->res, st->row, i);
	if (PQftype(st->res, i) == OID_BOOL)
		return *v == 't';
	return strtod(v, NULL);
}

static int64_t pg_column_int64(struct db_stmt *s, int i)
{
	struct pg_stmt *st = PST(s);
	const char *v;
	double d;

	if (!valid(st, i))
		return 0;
	v = PQgetvalue(st->res, st->row, i);
	switch (pg_column_type(s, i)) {
	case DB_INTEGER:
		return PQftype(st->res, i) == OID_BOOL ? *v == 't' : strtoll(v, NULL, 10);
	case DB_FLOAT:	/* as SQLite: truncated, saturated */
		d = strtod(v, NULL);
		return isnan(d) ? 0 : d >= 9.2233720368547758e18 ? INT64_MAX : d <= -9.2233720368547758e18 ? INT64_MIN :
		       (int64_t)d;
	default:
		return strtoll(v, NULL, 10);
	}
}

static int hexval(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* The current row's bytea column i decoded (text results give "\x" and hex digits). */
static const unsigned char *decoded(struct pg_stmt *st, int i)
{
	const char *v;
	size_t n, k;

	if (st->blob_col == i)
		return st->blob;
	v = PQgetvalue(st->res, st->row, i);
	n = (size_t)PQgetlength(st->res, st->row, i);
	if (n < 2 || v[0] != '\\' || v[1] != 'x')
		return NULL;
	n = (n - 2) / 2;
	if (n + 1 > st->blob_cap) {
		unsigned char *p = tp_realloc(st->blob, n + 1);
		if (!p)
			return NULL;
		st->blob = p;
		st->blob_cap = n + 1;
	}
	for (k = 0; k < n; k++)
		st->blob[k] = (unsigned char)(hexval(v[2 + 2 * k]) << 4 | hexval(v[3 + 2 * k]));
	st->blob[n] = 0;
	st->blob_len = n;
	st->blob_col = i;
	return st->blob;
}

static const unsigned char *pg_column_text(struct db_stmt *s, int i)
{
	struct pg_stmt *st = PST(s);

	if (!valid(st, i))
		return NULL;
	if (PQftype(st->res, i) == OID_BYTEA)
		return decoded(st, i);
	return (const unsigned char *)PQgetvalue(st->res, st->row, i);
}

static const void *pg_column_blob(struct db_stmt *s, int i)
{
	return pg_column_text(s, i);
}

static int pg_column_bytes(struct db_stmt *s, int i)
{
	struct pg_stmt *st = PST(s);

	if (!valid(st, i))
		return 0;
	if (PQftype(st->res, i) == OID_BYTEA)
		return decoded(st, i) ? (int)st->blob_len : 0;
	return PQgetlength(st->res, st->row, i);
}

static void pg_reset(struct db_stmt *s)
{
	struct pg_stmt *st = PST(s);

	PQclear(st->res);
	st->res = NULL;
	st->row = -1;
	st->nrows = 0;
	st->blob_col = -1;
}

static void pg_clear_bindings(struct db_stmt *s)
{
	struct pg_stmt *st = PST(s);
	int i;

	for (i = 1; i <= st->nparams; i++)
		param(st, i);
}

static void pg_finalize(struct db_stmt *s)
{
	struct pg_stmt *st = PST(s);

	if (st->db->copy_st == st)	/* its rows go before it does */
		copy_flush(st->db);
	pg_reset(s);
	pg_clear_bindings(s);
	st->db->nstmts--;
	tp_free(st->copy_sql);
	tp_free(st->p);
	tp_free(st->sql);
	tp_free(st->blob);
	tp_free(st);
}

static const struct db_ops pg_ops = {
	.close = pg_close, .exec = pg_exec, .schema_version = pg_schema_version, .migrate = pg_migrate,
	.begin_write = pg_begin_write, .checkpoint = pg_checkpoint, .wal_kick = pg_wal_kick, .in_tx = pg_in_tx, .busy = pg_busy,
	.changes = pg_changes, .size = pg_size, .errmsg = pg_errmsg, .errstr = pg_errstr, .errkind = pg_errkind,
	.batch_begin = pg_batch_begin, .batch_end = pg_batch_end, .prepare = pg_prepare, .bind_int64 = pg_bind_int64, .bind_double = pg_bind_double,
	.bind_null = pg_bind_null, .bind_text = pg_bind_text, .bind_blob = pg_bind_blob, .step = pg_step,
	.column_type = pg_column_type, .column_int64 = pg_column_int64, .column_double = pg_column_double,
	.column_text = pg_column_text, .column_blob = pg_column_blob, .column_bytes = pg_column_bytes,
	.reset = pg_reset, .clear_bindings = pg_clear_bindings, .finalize = pg_finalize,
};

/*
 * The schema the tables live in, and SQLite's semantics where PostgreSQL's
 * differ: sum() of integers an int8 that saturates (PostgreSQL's is numeric),
 * total() a double sum. Made once, under a session lock, by whichever server
 * gets there first.
 */
static const char setup_sql[] =
	"CREATE SCHEMA IF NOT EXISTS trainscope;"
	"CREATE TABLE IF NOT EXISTS trainscope.schema_version(version BIGINT NOT NULL);"
	/* the store's generation, bumped by every write transaction: one answer cache rule on every server */
	"CREATE TABLE IF NOT EXISTS trainscope.generation(n BIGINT NOT NULL);"
	"INSERT INTO trainscope.generation SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM trainscope.generation);"
	"CREATE OR REPLACE FUNCTION trainscope.sat_add(a bigint, b bigint) RETURNS bigint"
	" LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN b IS NULL THEN a WHEN a IS NULL THEN b"
	"  ELSE GREATEST(LEAST(a::numeric + b, 9223372036854775807), -9223372036854775808)::bigint END $$;"
	"CREATE OR REPLACE AGGREGATE trainscope.sum(bigint) (SFUNC = trainscope.sat_add, STYPE = bigint);"
	"CREATE OR REPLACE FUNCTION trainscope.bool_add(a bigint, b boolean) RETURNS bigint"
	" LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN b IS NULL THEN a ELSE COALESCE(a, 0) + b::int END $$;"
	"CREATE OR REPLACE AGGREGATE trainscope.sum(boolean) (SFUNC = trainscope.bool_add, STYPE = bigint);"
	"CREATE OR REPLACE FUNCTION trainscope.total_add(a double precision, b double precision)"
	" RETURNS double precision LANGUAGE sql IMMUTABLE AS $$ SELECT a + COALESCE(b, 0) $$;"
	"CREATE OR REPLACE AGGREGATE trainscope.total(double precision)"
	" (SFUNC = trainscope.total_add, STYPE = double precision, INITCOND = '0');";

/*
 * setup_sql under a session lock, taken and released apart from it: its
 * statements commit together, and before the lock goes, so the next server
 * sees them done (in one query string, the unlock would come before the commit).
 */
static int setup(struct pg_db *db)
{
	int rc;

	if (run(db, "SELECT pg_advisory_lock(7411202611)"))
		return DB_ERROR;
	rc = run(db, setup_sql);
	if (run(db, "SELECT pg_advisory_unlock(7411202611)"))
		rc = DB_ERROR;
	return rc;
}

static void quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

int db_pg_open(const char *uri, int flags, struct db **out, struct tp_errbuf *err)
{
	struct pg_db *db;

	*out = NULL;
	if (!(db = tp_calloc(1, sizeof(*db))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	db->base.ops = &pg_ops;
	{
		/* a host that does not answer fails a request in 10 s rather than hang it (the URI may say otherwise) */
		static const char *const keys[] = { "connect_timeout", "dbname", NULL };
		const char *vals[] = { "10", uri, NULL };
		db->c = PQconnectdbParams(keys, vals, 1);
	}
	if (PQstatus(db->c) != CONNECTION_OK) {
		/* the reason in the log (once per 10 s while it lasts); a client is told no more than that */
		static _Atomic int64_t logged;
		int64_t now = tp_now_ns(), last = atomic_load(&logged);
		int rc = tp_fail(err, TP_ERR_UNAVAILABLE, "database_unavailable", "database unavailable");
		if (now - last > 10000000000LL && atomic_compare_exchange_strong(&logged, &last, now))
			tp_warn("cannot connect to PostgreSQL: %s", db->c ? PQerrorMessage(db->c) : "out of memory");
		pg_close(&db->base);
		return rc;
	}
	PQsetNoticeProcessor(db->c, quiet, NULL);
	if (((flags & DB_OPEN_CREATE) && setup(db)) ||
	    run(db, "SET search_path = trainscope, pg_catalog")) {
		int rc = tp_fail(err, TP_ERR_DB, "database_error", "set up %s: %s", "PostgreSQL", db->err);
		pg_close(&db->base);
		return rc;
	}
	*out = &db->base;
	return TP_OK;
}
