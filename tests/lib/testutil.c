/*
 * testutil.c: see testutil.h.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <libpq-fe.h>
#include "store/db.h"
#include <sqlite3.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "testutil.h"

char *tu_tmpdir(void)
{
	const char *t = getenv("TMPDIR");
	char *p;

	if (asprintf(&p, "%s/trainscope-test-XXXXXX", t && *t ? t : "/tmp") < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

void tu_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint8_t *tu_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int tu_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int ok;

	if (!f)
		return -1;
	ok = fwrite(data, 1, len, f) == len;
	return fclose(f) == 0 && ok ? 0 : -1;
}

uint8_t *tu_gzip(const void *data, size_t len, size_t *out_len)
{
	z_stream zs = { 0 };
	uint8_t *out;
	size_t cap;

	if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&zs, len) + 64;
	out = malloc(cap);
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	if (!out || deflate(&zs, Z_FINISH) != Z_STREAM_END) {
		free(out);
		out = NULL;
	} else {
		*out_len = zs.total_out;
	}
	deflateEnd(&zs);
	return out;
}

uint8_t *tu_gunzip(const void *data, size_t len, size_t *out_len)
{
	z_stream zs = { 0 };
	size_t cap = len * 8 + 1024, n = 0;
	uint8_t *out = malloc(cap);
	int zr = Z_OK;

	if (!out || inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return NULL;
	}
	zs.next_in = (Bytef *)data;
	zs.avail_in = (uInt)len;
	while (zr != Z_STREAM_END) {
		if (n == cap) {
			uint8_t *o = realloc(out, cap *= 2);
			if (!o)
				break;
			out = o;
		}
		zs.next_out = out + n;
		zs.avail_out = (uInt)(cap - n);
		zr = inflate(&zs, Z_NO_FLUSH);
		n = cap - zs.avail_out;
		if (zr == Z_STREAM_END && zs.avail_in) {	/* another member */
			if (inflateReset(&zs) != Z_OK)
				break;
			zr = Z_OK;
		}
		if (zr != Z_OK && zr != Z_STREAM_END)
			break;
	}
	inflateEnd(&zs);
	if (zr != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	*out_len = n;
	return out;
}

uint8_t *tu_unzstd(const void *data, size_t len, size_t *out_len)
{
	ZSTD_DStream *zd = ZSTD_createDStream();
	ZSTD_inBuffer in = { data, len, 0 };
	size_t cap = len * 8 + 1024, r = 0;
	uint8_t *out = malloc(cap);
	ZSTD_outBuffer ob = { out, cap, 0 };

	if (!zd || !out) {
		ZSTD_freeDStream(zd);
		free(out);
		return NULL;
	}
	while (in.pos < in.size || ob.pos == ob.size) {
		if (ob.pos == ob.size) {
			uint8_t *o = realloc(out, cap *= 2);
			if (!o)
				break;
			out = o;
			ob.dst = out;
			ob.size = cap;
		}
		r = ZSTD_decompressStream(zd, &ob, &in);
		if (ZSTD_isError(r))
			break;
	}
	ZSTD_freeDStream(zd);
	if (in.pos < in.size || r != 0) {	/* an error, or a copy that ends inside a frame */
		free(out);
		return NULL;
	}
	*out_len = ob.pos;
	return out;
}

char *tu_fixture(const char *rel)
{
	char *p;

	return asprintf(&p, "%s/%s", FIXTURES_DIR, rel) < 0 ? NULL : p;
}

char *tu_source_path(const char *rel)
{
	char *p;

	return asprintf(&p, "%s/%s", SOURCE_DIR, rel) < 0 ? NULL : p;
}

static int start_on(struct tu_server *s, const char *listen, const char *const extra[]);

/* Run one statement on the PostgreSQL cluster's maintenance database; 0 on success. */
static int pg_admin(const char *host, const char *sql)
{
	char uri[600];
	PGconn *c;
	PGresult *res;
	int ok;

	snprintf(uri, sizeof(uri), "postgresql:///postgres?host=%s&user=trainscope", host);
	c = PQconnectdb(uri);
	res = PQexec(c, sql);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "testutil: %s: %s", sql, PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
	return ok ? 0 : -1;
}

int tu_server_start(struct tu_server *s, const char *const extra[])
{
	return tu_server_prepare(s) ? -1 : tu_server_restart(s, extra);
}

int tu_server_prepare(struct tu_server *s)
{
	static int seq;
	const char *pg = getenv("TRAINSCOPE_TEST_PG");

	memset(s, 0, sizeof(*s));
	if (!(s->dir = tu_tmpdir()))
		return -1;
	snprintf(s->db, sizeof(s->db), "%s/t.db", s->dir);
	if (pg && *pg) {	/* a database of its own on the suite's PostgreSQL (scripts/pg.sh) */
		char sql[128];
		snprintf(s->pgname, sizeof(s->pgname), "t%d_%d", (int)getpid(), seq++);
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", s->pgname);
		if (pg_admin(pg, sql))
			return -1;
		snprintf(s->db, sizeof(s->db), "postgresql:///%s?host=%s&user=trainscope", s->pgname, pg);
	}
	return 0;
}

int tu_server_start_on(struct tu_server *s, const char *db, const char *const extra[])
{
	memset(s, 0, sizeof(*s));
	if (!(s->dir = tu_tmpdir()))
		return -1;
	snprintf(s->db, sizeof(s->db), "%s", db);
	return tu_server_restart(s, extra);
}

int tu_postgres(void)
{
	const char *pg = getenv("TRAINSCOPE_TEST_PG");

	return pg && *pg;
}

int tu_server_restart(struct tu_server *s, const char *const extra[])
{
	return start_on(s, "127.0.0.1:0", extra);
}

int tu_server_restart_same_port(struct tu_server *s, const char *const extra[])
{
	char listen[32];

	snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
	return start_on(s, listen, extra);
}

static int start_on(struct tu_server *s, const char *listen, const char *const extra[])
{
	int pipefd[2], i, n = 0;
	char line[256];
	const char *argv[32];
	FILE *f;

	if (pipe(pipefd))
		return -1;
	argv[n++] = SERVER_BIN;
	argv[n++] = "--listen";
	argv[n++] = listen;
	argv[n++] = "--db";
	argv[n++] = s->db;
	argv[n++] = "--log-level";
	argv[n++] = "warn";
	/* a read derives what it asks for, when the test reads: no derivation of the server's own
	 * once a run's uploads pause (check_runs' test_quiet_derivation turns it on: extra wins) */
	argv[n++] = "--derive-quiet";
	argv[n++] = "0";
	for (i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	s->pid = fork();
	if (s->pid < 0)
		return -1;
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);	/* never outlive the test runner */
		dup2(pipefd[1], 1);
		close(pipefd[0]);
		close(pipefd[1]);
		execv(SERVER_BIN, (char *const *)argv);
		_exit(127);
	}
	close(pipefd[1]);
	f = fdopen(pipefd[0], "r");
	if (!f || !fgets(line, sizeof(line), f)) {
		if (f)
			fclose(f);
		tu_server_stop(s);
		return -1;
	}
	fclose(f);
	{
		char *p = strstr(line, "127.0.0.1:");
		if (!p)
			return -1;
		s->port = atoi(p + 10);
	}
	snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
	return s->port > 0 ? 0 : -1;
}

void tu_server_cleanup(struct tu_server *s)
{
	tu_server_stop(s);
	if (s->pgname[0]) {
		char sql[128];
		snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)", s->pgname);
		pg_admin(getenv("TRAINSCOPE_TEST_PG"), sql);
		s->pgname[0] = 0;
	}
	tu_rmtree(s->dir);
	free(s->dir);
	s->dir = NULL;
}

int tu_server_stop(struct tu_server *s)
{
	int status = -1;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		if (waitpid(s->pid, &status, 0) == s->pid && WIFEXITED(status))
			status = WEXITSTATUS(status);
		else
			status = -1;
		s->pid = 0;
	}
	return status;
}

struct source {
	const char *data;
	size_t len, off;
};

static size_t on_read(char *buf, size_t size, size_t nitems, void *userdata)
{
	struct source *src = userdata;
	size_t n = size * nitems;

	if (n > src->len - src->off)
		n = src->len - src->off;
	memcpy(buf, src->data + src->off, n);
	src->off += n;
	return n;
}

struct sink {
	char *buf;
	size_t len, cap;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct sink *s = userdata;
	size_t n = size * nmemb;

	if (s->len + n + 1 > s->cap) {
		size_t cap = (s->len + n + 1) * 2;
		char *b = realloc(s->buf, cap);
		if (!b)
			return 0;
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	s->buf[s->len] = 0;
	return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct tu_resp *r = userdata;
	size_t n = size * nmemb, used = strlen(r->headers);

	if (used + n < sizeof(r->headers)) {
		memcpy(r->headers + used, data, n);
		r->headers[used + n] = 0;
	}

	if (n > 14 && !strncasecmp(data, "Content-Type:", 13))
		snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int)strcspn(data + 14, "\r\n"),
			 data + 14);
	if (n > 18 && !strncasecmp(data, "Content-Encoding:", 17))
		snprintf(r->content_encoding, sizeof(r->content_encoding), "%.*s",
			 (int)strcspn(data + 18, "\r\n"), data + 18);
	return n;
}

int tu_http(const struct tu_server *s, const char *method, const char *path, const void *body,
	    size_t len, const char *header, struct tu_resp *out)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct sink sink = { 0 };
	struct source src = { body, len, 0 };
	char url[4096];
	CURLcode cc;

	memset(out, 0, sizeof(*out));
	if (!c)
		return -1;
	snprintf(url, sizeof(url), "%s%s", s->base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body && header && strstr(header, "chunked")) {
		/* streamed with no Content-Length, as a collector piping a file would */
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, &src);
	} else if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	} else if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	}
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (header)
		hdrs = curl_slist_append(hdrs, header);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	out->body = sink.buf ? sink.buf : strdup("");
	out->len = sink.len;
	/* an early answer (413 mid-body) may end in a send error: the status still counts */
	return cc == CURLE_OK || out->status > 0 ? 0 : -1;
}

void tu_resp_free(struct tu_resp *r)
{
	free(r->body);
	r->body = NULL;
}

void tu_upload(const struct tu_server *s, const char *run, const char *name, const void *body, size_t len)
{
	struct tu_resp r;
	char path[256];

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=%s", run, name);
	if (tu_http(s, "POST", path, body, len, NULL, &r) || r.status != 201) {
		fprintf(stderr, "upload %s: %ld %s\n", path, r.status, r.body);
		abort();
	}
	tu_resp_free(&r);
}

void tu_upload_fixture(const struct tu_server *s, const char *run, const char *rel)
{
	char *path = tu_fixture(rel);
	size_t len;
	uint8_t *b = tu_read_file(path, &len);

	if (!b) {
		fprintf(stderr, "cannot read %s\n", path);
		abort();
	}
	tu_upload(s, run, "trace.json.gz", b, len);
	free(b);
	free(path);
}

json_t *tu_json(const struct tu_resp *r)
{
	json_error_t e;
	json_t *j = json_loadb(r->body, r->len, 0, &e);

	ck_assert_msg(j != NULL, "not JSON (%s): %.200s", e.text, r->body);
	return j;
}

const char *tu_error_code(json_t *j)
{
	const char *c = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
	return c ? c : "";
}

/* The first column of the first row, on PostgreSQL (the store's schema first in the path). */
static long long pg_scalar(const char *db, const char *sql)
{
	PGconn *c = PQconnectdb(db);
	PGresult *res;
	long long v = -1;

	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PQclear(PQexec(c, "SET search_path = trainscope, pg_catalog"));
	res = PQexec(c, sql);
	ck_assert_msg(PQresultStatus(res) == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	if (PQntuples(res) > 0)
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	PQfinish(c);
	return v;
}

sqlite3 *tu_db_open(const char *db)
{
	sqlite3 *h = NULL;

	ck_assert_msg(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open %s", db);
	return h;
}

long long tu_db_scalar_on(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *s;
	long long v = -1;

	ck_assert_msg(sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

int tu_db_integrity_ok_on(sqlite3 *h)
{
	sqlite3_stmt *s;
	int ok = 0;

	ck_assert_int_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		ok = !strcmp((const char *)sqlite3_column_text(s, 0), "ok");
	sqlite3_finalize(s);
	return ok;
}

long long tu_db_scalar(const char *db, const char *sql)
{
	sqlite3 *h;
	long long v;

	if (db_is_postgres(db))
		return pg_scalar(db, sql);
	h = tu_db_open(db);
	v = tu_db_scalar_on(h, sql);
	sqlite3_close(h);
	return v;
}

int tu_db_integrity_ok(const char *db)
{
	sqlite3 *h;
	int ok;

	/* PostgreSQL keeps its own: that the store's tables answer is what is asked */
	if (db_is_postgres(db))
		return pg_scalar(db, "SELECT COUNT(*) FROM artifacts") >= 0;
	h = tu_db_open(db);
	ok = tu_db_integrity_ok_on(h);
	sqlite3_close(h);
	return ok;
}
