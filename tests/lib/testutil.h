/*
 * testutil.h: what the suites share: temporary folders, files, gzip, the
 * real fixtures, a running server, and a small HTTP client (libcurl).
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A new empty folder under $TMPDIR; the caller removes it with tu_rmtree. */
char *tu_tmpdir(void);
void tu_rmtree(const char *path);

/* Whole file into memory (malloc, NUL-terminated); NULL if unreadable. */
uint8_t *tu_read_file(const char *path, size_t *len);
int tu_write_file(const char *path, const void *data, size_t len);
/* gzip / gunzip a buffer (malloc'd result; gunzip reads every member). */
uint8_t *tu_gzip(const void *data, size_t len, size_t *out_len);
uint8_t *tu_gunzip(const void *data, size_t len, size_t *out_len);
/* The bytes of concatenated zstd frames, malloc'd (NULL: not zstd, or cut inside a frame). */
uint8_t *tu_unzstd(const void *data, size_t len, size_t *out_len);
/* A fixture under FIXTURES_DIR, e.g. "traces/hta_alexnet.json.gz" (path is malloc'd). */
char *tu_fixture(const char *rel);
/* A file of the project, e.g. "tests/fuzz/seeds/..." (path is malloc'd). */
char *tu_source_path(const char *rel);

/* A trainscope-server process on 127.0.0.1 with a fresh database. */
struct tu_server {
	pid_t pid;
	int port;
	char *dir;		/* temporary folder holding the database */
	char db[512];		/* its --db: a file in dir, or a PostgreSQL URI (TRAINSCOPE_TEST_PG) */
	char pgname[64];	/* the PostgreSQL database made for it, dropped by tu_server_cleanup */
	char base[64];		/* "http://127.0.0.1:PORT" */
};
/* 1 when the suite runs on PostgreSQL: TRAINSCOPE_TEST_PG names the socket folder of scripts/pg.sh's cluster */
int tu_postgres(void);
/* Its folder and empty database, not started (tu_server_restart starts it); 0 on success. */
int tu_server_prepare(struct tu_server *s);
/* Start with extra flags (NULL-terminated); 0 on success. */
int tu_server_start(struct tu_server *s, const char *const extra[]);
/* Start another server on db, another's (PostgreSQL: several servers, one dataset); cleanup leaves db. */
int tu_server_start_on(struct tu_server *s, const char *db, const char *const extra[]);
/* Start again on the same database (after a stop or a kill). */
int tu_server_restart(struct tu_server *s, const char *const extra[]);
/* Start again on the same database and the same port (clients that keep the URL). */
int tu_server_restart_same_port(struct tu_server *s, const char *const extra[]);
/* SIGTERM and wait; returns the exit status (or -1). */
int tu_server_stop(struct tu_server *s);
/* Stop if running, and remove the folder. */
void tu_server_cleanup(struct tu_server *s);

/* One HTTP exchange. */
struct tu_resp {
	long status;
	char *body;		/* NUL-terminated */
	size_t len;
	char content_type[128];
	char content_encoding[64];
	char headers[4096];	/* all response header lines, as received (truncated) */
};
/*
 * method, url path (appended to s->base), body (may be NULL), extra header (may be NULL).
 * With the header "Transfer-Encoding: chunked" the body is streamed without a Content-Length.
 */
int tu_http(const struct tu_server *s, const char *method, const char *path, const void *body,
	    size_t len, const char *header, struct tu_resp *out);
void tu_resp_free(struct tu_resp *r);
/* POST body to run as artifact name; aborts the test unless the answer is 201. */
void tu_upload(const struct tu_server *s, const char *run, const char *name, const void *body, size_t len);
/* The same with the fixture file rel (tu_fixture), named trace.json.gz. */
void tu_upload_fixture(const struct tu_server *s, const char *run, const char *rel);



/* The first column of the first row of sql, on the database file db (read-only); fails the test on error. */
long long tu_db_scalar(const char *db, const char *sql);
/* 1 when PRAGMA integrity_check says ok. */
int tu_db_integrity_ok(const char *db);
/*
 * The same on a read-only connection to a SQLite file held by the caller (tu_db_open, then
 * sqlite3_close): each call above opens one, and a connection reads the whole schema first, which
 * is most of a loop's time when it checks the database at every turn (check_alloc.c).
 */
struct sqlite3;
struct sqlite3 *tu_db_open(const char *db);
long long tu_db_scalar_on(struct sqlite3 *h, const char *sql);
int tu_db_integrity_ok_on(struct sqlite3 *h);

#include <jansson.h>
/* The response body as JSON (new reference); fails the test if it is not JSON. */
json_t *tu_json(const struct tu_resp *r);
/* The error code of an error body, or "" (borrowed from j). */
const char *tu_error_code(json_t *j);
#endif
