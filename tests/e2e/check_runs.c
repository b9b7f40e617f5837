/*
 * check_runs.c: a run as the unit: DELETE of runs and artifacts (atomic, write
 * token, answers and cache after it), and a database from before the memory
 * points were packed upgraded on either engine.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/db.h"
#include "store/store.h"
#include "suites.h"
#include "testutil.h"

/* the migrations, generated from schemas/migrations/ (build/server/migrations_gen.c) */
extern const char *const store_migrations[];
extern const int store_nmigrations;

static struct tu_server srv;

static void start(void)
{
	ck_assert_int_eq(tu_server_start(&srv, NULL), 0);
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

/* method path through server s, expecting status; the body as JSON */
static json_t *call_on(const struct tu_server *s, const char *method, const char *path, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(s, method, path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* method path (body), expecting status; the body as JSON */
static json_t *call(const char *method, const char *path, const void *body, size_t len, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, method, path, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* upload a fixture to run at rank; its artifact id */
static long long upload(const char *run, int rank, const char *fixture)
{
	char *path = tu_fixture(fixture), url[256];
	size_t len;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j;
	long long id;

	ck_assert_ptr_nonnull(b);
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=%d&name=%s", run, rank, strrchr(fixture, '/') + 1);
	j = call("POST", url, b, len, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	json_decref(j);
	free(b);
	free(path);
	return id;
}

static size_t nranks(const char *run)
{
	char url[256];
	json_t *j;
	size_t n;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/ranks", run);
	j = call("GET", url, NULL, 0, 200);
	n = json_array_size(json_object_get(j, "ranks"));
	json_decref(j);
	return n;
}

static long long rows_of(long long artifact)
{
	char sql[1024];

	snprintf(sql, sizeof(sql), "SELECT (SELECT COUNT(*) FROM event_blocks WHERE key>>32=%lld)"
		 " + (SELECT COUNT(*) FROM raw_chunks WHERE key>>32=%lld) + (SELECT COUNT(*) FROM strings WHERE key>>32=%lld)"
		 " + (SELECT COUNT(*) FROM steps WHERE artifact_id=%lld) + (SELECT COUNT(*) FROM op_stats WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_point_blocks WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_series WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_groups WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_segments WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_blocks WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM artifacts WHERE id=%lld)", artifact, artifact, artifact, artifact, artifact,
		 artifact, artifact, artifact, artifact, artifact, artifact);
	return tu_db_scalar(srv.db, sql);
}

START_TEST(test_delete_artifact)
{
	long long a0 = upload("two", 0, "traces/hta_sampled_rank0.json.gz");
	long long a1 = upload("two", 1, "traces/hta_sampled_rank1.json.gz");
	char url[256];
	json_t *j;

	ck_assert_uint_eq(nranks("two"), 2);
	ck_assert_int_gt(rows_of(a1), 3);
	json_decref(call("GET", "/api/v1/runs/two/steps?rank=1", NULL, 0, 200));	/* cached now */

	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = call("DELETE", url, NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "run")), "two");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "deleted_artifacts")), 1);
	ck_assert(json_is_false(json_object_get(j, "run_deleted")));
	json_decref(j);
	ck_assert_int_eq(rows_of(a1), 0);
	ck_assert_int_gt(rows_of(a0), 3);

	/* the run answers as its remaining artifact: one rank, rank 1 gone (not the cached answer) */
	ck_assert_uint_eq(nranks("two"), 1);
	j = call("GET", "/api/v1/runs/two/steps?rank=1", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "rank_not_found");
	json_decref(j);
	j = call("GET", "/api/v1/runs/two", NULL, 0, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "artifacts")), 1);
	json_decref(j);
	j = call("GET", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld/raw", a1);
	json_decref(call("GET", url, NULL, 0, 404));
	/* twice: 404; an artifact of another run: 404 */
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = call("DELETE", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	long long other = upload("other", 0, "traces/hta_sampled_rank1.json.gz");
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", other);
	json_decref(call("DELETE", url, NULL, 0, 404));
	ck_assert_int_gt(rows_of(other), 3);

	/* the same bytes uploaded again are new, not a duplicate of what was deleted */
	a1 = upload("two", 1, "traces/hta_sampled_rank1.json.gz");
	ck_assert_uint_eq(nranks("two"), 2);

	/* the last artifact takes its run along */
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a0);
	json_decref(call("DELETE", url, NULL, 0, 200));
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = call("DELETE", url, NULL, 0, 200);
	ck_assert(json_is_true(json_object_get(j, "run_deleted")));
	json_decref(j);
	j = call("GET", "/api/v1/runs/two", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM runs WHERE name='two'"), 0);
}
END_TEST

/* a run of two snapshots: /memory/segments answers the newest, then, that one deleted, the other */
START_TEST(test_delete_snapshot_segments)
{
	long long a = upload("snaps", 0, "memory/docubox_state_only_snapshot.pickle");
	long long b = upload("snaps", 0, "memory/cs336_memory_snapshot.pickle");
	char url[256];
	json_t *j;

	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_blocks"), 116 + 455);
	j = call("GET", "/api/v1/runs/snaps/memory/segments", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "artifact")), b);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "segments")), 216);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "snapshots")), 2);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/snaps/artifacts/%lld", b);
	json_decref(call("DELETE", url, NULL, 0, 200));
	ck_assert_int_eq(rows_of(b), 0);
	j = call("GET", "/api/v1/runs/snaps/memory/segments", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "artifact")), a);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "segments")), 12);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "reserved_bytes")), 109051904);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/snaps/memory/segments?artifact=%lld", b);
	j = call("GET", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "no_segments");
	json_decref(j);
	json_decref(call("DELETE", "/api/v1/runs/snaps", NULL, 0, 200));
	ck_assert_int_eq(rows_of(a), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_segments"), 0);
}
END_TEST

START_TEST(test_delete_run)
{
	static const char metrics[] = "{\"step\":1,\"name\":\"loss\",\"value\":2.5}\n";
	long long a[3];
	json_t *j;

	a[0] = upload("gone", 0, "traces/hta_sampled_rank0.json.gz");
	a[1] = upload("gone", 0, "memory/hta_memory_timeline.raw.json.gz");
	a[2] = upload("gone", 1, "traces/hta_sampled_rank1.json.gz");
	json_decref(call("POST", "/api/v1/runs/gone/metrics", metrics, strlen(metrics), 200));
	json_decref(call("PATCH", "/api/v1/runs/gone", "{\"tags\":[\"x\"]}", 14, 200));
	json_decref(call("GET", "/api/v1/runs", NULL, 0, 200));
	j = call("DELETE", "/api/v1/runs/gone", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "deleted_artifacts")), 3);
	ck_assert(json_is_true(json_object_get(j, "run_deleted")));
	json_decref(j);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(rows_of(a[i]), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM runs WHERE name='gone'"), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM metrics"), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_series"), 0);
	/* every answer forgets it, cached or not */
	j = call("GET", "/api/v1/runs", NULL, 0, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "runs")), 0);
	json_decref(j);
	j = call("GET", "/api/v1/runs/gone/steps", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	j = call("DELETE", "/api/v1/runs/gone", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	j = call("DELETE", "/api/v1/runs/gone/artifacts/abc", NULL, 0, 400);
	json_decref(j);
	ck_assert_int_eq(tu_db_integrity_ok(srv.db), 1);
}
END_TEST

/* A reader polling the run while it is deleted sees it whole (4 artifacts, 2 ranks) or not at all. */
struct poll {
	int stop, whole, absent, torn;
};

static void *poller(void *arg)
{
	struct poll *p = arg;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		struct tu_resp r;
		if (tu_http(&srv, "GET", "/api/v1/runs/whole", NULL, 0, NULL, &r))
			continue;
		if (r.status == 404) {
			__atomic_add_fetch(&p->absent, 1, __ATOMIC_RELEASE);
		} else {
			json_error_t je;
			json_t *j = json_loads(r.body, 0, &je);
			if (r.status == 200 && json_array_size(json_object_get(j, "artifacts")) == 4)
				__atomic_add_fetch(&p->whole, 1, __ATOMIC_RELEASE);
			else
				__atomic_add_fetch(&p->torn, 1, __ATOMIC_RELEASE);
			json_decref(j);
		}
		tu_resp_free(&r);
	}
	return NULL;
}

START_TEST(test_delete_is_atomic)
{
	struct poll p = { 0 };
	pthread_t t;

	upload("whole", 0, "traces/hta_sampled_rank0.json.gz");
	upload("whole", 1, "traces/hta_sampled_rank1.json.gz");
	upload("whole", 0, "memory/hta_memory_timeline.raw.json.gz");
	upload("whole", 0, "traces/hta_alexnet.json.gz");
	ck_assert_int_eq(pthread_create(&t, NULL, poller, &p), 0);
	while (!__atomic_load_n(&p.whole, __ATOMIC_ACQUIRE))
		;
	json_decref(call("DELETE", "/api/v1/runs/whole", NULL, 0, 200));
	while (!__atomic_load_n(&p.absent, __ATOMIC_ACQUIRE))
		;
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_int_gt(p.whole, 0);
	ck_assert_int_gt(p.absent, 0);
	ck_assert_int_eq(p.torn, 0);
}
END_TEST

START_TEST(test_delete_needs_write_token)
{
	struct tu_server s;
	char tokfile[600], *dir = tu_tmpdir();
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char file[] = "secret-token-0123456789\nread reader-token-0123456789\n";
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
	const char *w = "Authorization: Bearer secret-token-0123456789";
	struct tu_resp r;

	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	ck_assert_int_eq(tu_write_file(tokfile, file, strlen(file)), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/t/artifacts", body, strlen(body), w, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 401);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t/artifacts/1", NULL, 0,
				 "Authorization: Bearer reader-token-0123456789", &r), 0);
	ck_assert(r.status == 401 || r.status == 403);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/t/artifacts/1", NULL, 0,
				 "Authorization: Bearer reader-token-0123456789", &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t/artifacts/1", NULL, 0, w, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- chunks answer as the whole file ---- */

/* End of the JSON value starting at p (an object or array; strings skipped), or NULL. */
static const char *value_end(const char *p, const char *end)
{
	int depth = 0, str = 0;

	for (; p < end; p++) {
		if (str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				str = 0;
		} else if (*p == '"') {
			str = 1;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

struct cut {
	const char *head, *tail;	/* the file up to traceEvents' '[' (included); from its ']' */
	size_t nhead, ntail;
	const char **ev;		/* each event's first byte; ev[n] the ']' */
	size_t n;
};

/* Find traceEvents' elements in the (inflated) trace text. */
static void cut_find(const char *s, size_t len, struct cut *c)
{
	const char *end = s + len, *p = strstr(s, "\"traceEvents\"");
	size_t cap = 1024;

	ck_assert_ptr_nonnull(p);
	p = strchr(p, '[');
	c->head = s;
	c->nhead = (size_t)(p + 1 - s);
	c->ev = malloc(cap * sizeof(*c->ev));
	c->n = 0;
	for (p++;;) {
		while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == ',')
			p++;
		if (*p == ']')
			break;
		ck_assert_int_eq(*p, '{');
		if (c->n + 1 >= cap)
			c->ev = realloc(c->ev, (cap *= 2) * sizeof(*c->ev));
		c->ev[c->n++] = p;
		ck_assert_ptr_nonnull(p = value_end(p, end));
	}
	c->ev[c->n] = p;
	c->tail = p;
	c->ntail = (size_t)(end - p);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Upload the events [from, to) of c as one trace to run, rank 0, through server s. */
static void upload_chunk_via(const struct tu_server *s, const struct cut *c, size_t from, size_t to,
			     const char *run, size_t part)
{
	size_t body = (size_t)(c->ev[to] - c->ev[from]);
	char *buf = malloc(c->nhead + body + c->ntail + 1), url[256];
	size_t len = 0;

	memcpy(buf, c->head, c->nhead);
	len = c->nhead;
	memcpy(buf + len, c->ev[from], body);
	len += body;
	while (len > c->nhead && buf[len - 1] != '}')	/* the comma after the last event */
		len--;
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=part%zu.json", run, part);
	{
		struct tu_resp r;
		ck_assert_int_eq(tu_http(s, "POST", url, buf, len, NULL, &r), 0);
		ck_assert_msg(r.status == 201, "POST %s: %ld %s", url, r.status, r.body);
		tu_resp_free(&r);
	}
	free(buf);
}

static void upload_chunk(const struct cut *c, size_t from, size_t to, const char *run, size_t part)
{
	upload_chunk_via(&srv, c, from, to, run, part);
}

/* GET tail of run whole through sa and of run cut through sb: the same bytes. */
static void same_answer_via(const struct tu_server *sa, const char *whole, const struct tu_server *sb,
			    const char *cut, const char *tail)
{
	char a[256], b[256];
	struct tu_resp ra, rb;

	snprintf(a, sizeof(a), "/api/v1/runs/%s%s", whole, tail);
	snprintf(b, sizeof(b), "/api/v1/runs/%s%s", cut, tail);
	ck_assert_int_eq(tu_http(sa, "GET", a, NULL, 0, NULL, &ra), 0);
	ck_assert_int_eq(tu_http(sb, "GET", b, NULL, 0, NULL, &rb), 0);
	ck_assert_msg(ra.status == 200 && rb.status == 200, "%s: %ld / %ld: %s", tail, ra.status, rb.status, rb.body);
	if (ra.len != rb.len || memcmp(ra.body, rb.body, ra.len)) {
		size_t i = 0;
		while (i < ra.len && i < rb.len && ra.body[i] == rb.body[i])
			i++;
		ck_abort_msg("%s differs at byte %zu of %zu/%zu:\n whole: %.160s\n   cut: %.160s", tail, i, ra.len, rb.len,
			     ra.body + (i > 40 ? i - 40 : 0), rb.body + (i > 40 ? i - 40 : 0));
	}
	tu_resp_free(&ra);
	tu_resp_free(&rb);
}

static void same_answer(const char *whole, const char *cut, const char *tail)
{
	same_answer_via(&srv, whole, &srv, cut, tail);
}

static const char *const answers[] = {
	"/steps", "/ops?device=cpu&limit=100000", "/ops?device=gpu&limit=100000", "/kernels?kind=kernel&limit=100000",
	"/kernels?kind=memcpy&limit=100000", "/kernels?kind=memset&limit=100000", "/ranks", "/diagnosis",
	"/memory?points=0", "/memory/peak",
};

/*
 * The fixture cut into k chunks at arbitrary event boundaries (every chunk keeps the file's
 * other keys, as the collector's do), uploaded in shuffled order: every answer is the whole
 * file's, byte for byte.
 */
static void chunks_as_whole(const char *fixture, size_t k, int memory, int restart)
{
	char *path = tu_fixture(fixture), whole[64], cut[64], sql[512];
	size_t glen, len, *at = calloc(k + 1, sizeof(size_t)), *order = calloc(k, sizeof(size_t)), i;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct cut c;

	ck_assert_ptr_nonnull(text);
	snprintf(whole, sizeof(whole), "whole-%zu", k);
	snprintf(cut, sizeof(cut), "cut-%zu", k);
	cut_find((const char *)text, len, &c);
	ck_assert_uint_gt(c.n, 1000);
	/* k - 1 distinct cut points */
	for (;;) {
		at[0] = 0;
		at[k] = c.n;
		for (i = 1; i < k; i++)
			at[i] = 1 + next_rand() % (c.n - 1);
		qsort(at, k + 1, sizeof(*at), cmp_size);
		for (i = 1; i <= k && at[i] > at[i - 1]; i++)
			;
		if (i > k)
			break;
	}
	for (i = 0; i < k; i++)
		order[i] = i;
	for (i = k - 1; i > 0; i--) {
		size_t j = next_rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	{
		char url[256];
		snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=whole.json.gz", whole);
		json_decref(call("POST", url, gz, glen, 201));
	}
	for (i = 0; i < k; i++)
		upload_chunk(&c, at[order[i]], at[order[i] + 1], cut, order[i]);
	/* the uploads did not replay the rank: each after the first marked it, and its tables are one chunk's */
	snprintf(sql, sizeof(sql), "SELECT COALESCE(SUM(p.seq), 0) FROM rank_pending p JOIN runs r ON r.id=p.run_id"
		 " WHERE r.name='%s'", cut);
	ck_assert_int_eq(tu_db_scalar(srv.db, sql), (long long)k - 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(DISTINCT o.artifact_id) FROM op_stats o JOIN artifacts a"
		 " ON a.id=o.artifact_id JOIN runs r ON r.id=a.run_id WHERE r.name='%s'", cut);
	ck_assert_int_eq(tu_db_scalar(srv.db, sql), 1);
	if (restart) {
		/* the marks outlive the process: the next one derives them on the first read */
		ck_assert_int_eq(tu_server_stop(&srv), 0);
		ck_assert_int_eq(tu_server_restart(&srv, NULL), 0);
	}
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		if (memory || strncmp(answers[i], "/memory", 7))
			same_answer(whole, cut, answers[i]);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM rank_pending");
	ck_assert_int_eq(tu_db_scalar(srv.db, sql), 0);

	/* a chunk removed: the run answers without it; uploaded again, as the whole once more */
	{
		char url[256];
		json_t *run, *a = NULL;
		size_t n;
		struct tu_resp r;
		snprintf(url, sizeof(url), "/api/v1/runs/%s", cut);
		run = call("GET", url, NULL, 0, 200);
		ck_assert_uint_eq(json_array_size(json_object_get(run, "artifacts")), k);
		json_array_foreach(json_object_get(run, "artifacts"), n, a)
			if (!strcmp(json_string_value(json_object_get(a, "name")), "part0.json"))
				break;
		snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts/%lld", cut,
			 (long long)json_integer_value(json_object_get(a, "id")));
		json_decref(run);
		json_decref(call("DELETE", url, NULL, 0, 200));
		snprintf(url, sizeof(url), "/api/v1/runs/%s/ops?device=cpu&limit=100000", cut);
		ck_assert_int_eq(tu_http(&srv, "GET", url, NULL, 0, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		tu_resp_free(&r);
		upload_chunk(&c, at[0], at[1], cut, 0);
		for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
			if (memory || strncmp(answers[i], "/memory", 7))
				same_answer(whole, cut, answers[i]);
	}
	free(c.ev);
	free(text);
	free(gz);
	free(path);
	free(at);
	free(order);
}

/*
 * A trace that joins its rank is stored without its own analysis (the rank is
 * analysed as a whole at the next read): with the rank's first trace deleted,
 * the one that joined answers alone, as it does uploaded alone.
 */
START_TEST(test_joined_trace_alone)
{
	long long first = upload("joined", 0, "traces/hta_sampled_rank0.json.gz");
	char url[256];
	size_t i;

	upload("joined", 0, "traces/hta_sampled_rank1.json.gz");
	upload("alone", 0, "traces/hta_sampled_rank1.json.gz");
	/* the joining trace has no tables of its own, and the rank is marked */
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM op_stats o JOIN artifacts a ON a.id=o.artifact_id"
				      " JOIN runs r ON r.id=a.run_id WHERE r.name='joined' AND a.id<>(SELECT MIN(id)"
				      " FROM artifacts WHERE run_id=r.id)"), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM rank_pending p JOIN runs r ON r.id=p.run_id"
				      " WHERE r.name='joined'"), 1);
	snprintf(url, sizeof(url), "/api/v1/runs/joined/artifacts/%lld", first);
	json_decref(call("DELETE", url, NULL, 0, 200));
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		if (strncmp(answers[i], "/memory", 7))	/* (the fixture has none) */
			same_answer("alone", "joined", answers[i]);
}
END_TEST

START_TEST(test_chunks_answer_as_whole_v100)
{
	chunks_as_whole("traces/hta_v100_train_memory.json.gz", 2, 1, 1);
	chunks_as_whole("traces/hta_v100_train_memory.json.gz", 7, 1, 0);
}
END_TEST

START_TEST(test_chunks_answer_as_whole_resnet)
{
	chunks_as_whole("traces/kineto_resnet50_workers0.json.gz", 5, 1, 0);
}
END_TEST

/* ---- the whole training: /timeline ---- */

/* A trace of one profiling cycle: steps first..first+2, each dur_ms long, from start_s seconds. */
static long long upload_cycle(const char *run, int first, int start_s, int dur_ms)
{
	char body[2048], url[256];
	size_t len = 0;
	long long id;
	json_t *j;

	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"traceEvents\":[");
	for (int k = 0; k < 3; k++)
		len += (size_t)snprintf(body + len, sizeof(body) - len,
					"%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
					"\"tid\":1,\"ts\":%lld,\"dur\":%d}", k ? "," : "", first + k,
					(long long)start_s * 1000000 + (long long)k * dur_ms * 1000, dur_ms * 1000);
	len += (size_t)snprintf(body + len, sizeof(body) - len, "]}");
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=cycle%d.json", run, first);
	j = call("POST", url, body, len, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	json_decref(j);
	return id;
}

START_TEST(test_timeline)
{
	long long ids[4];
	json_t *j, *steps, *f, *x;
	size_t i;

	/* four cycles of 3 steps, 10 steps apart, uploaded out of order, each slower than the last */
	for (int c = 3; c >= 0; c--)
		ids[c] = upload_cycle("long", 1 + 10 * c, 100 * c, 100 + 20 * c);
	j = call("GET", "/api/v1/runs/long/timeline", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_total")), 12);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cycles")), 4);
	ck_assert(json_is_null(json_object_get(j, "device")));
	steps = json_object_get(j, "steps");
	ck_assert_uint_eq(json_array_size(steps), 12);
	for (i = 0; i < 12; i++) {
		x = json_array_get(steps, i);
		ck_assert_int_eq(json_integer_value(json_object_get(x, "step")), (json_int_t)(1 + 10 * (i / 3) + i % 3));
		ck_assert_int_eq(json_integer_value(json_object_get(x, "cycle")), (json_int_t)(i / 3));
		ck_assert_int_eq(json_integer_value(json_object_get(x, "dur_ns")), (json_int_t)(100 + 20 * (i / 3)) * 1000000);
		/* the artifact its span came from, though the rank's steps are stored once */
		ck_assert_int_eq(json_integer_value(json_object_get(x, "artifact_id")), ids[i / 3]);
		ck_assert(json_is_null(json_object_get(x, "allocated_bytes")));
	}
	x = json_array_get(json_object_get(j, "cycles"), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "first_step")), 31);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "mean_step_ns")), 160000000);
	f = json_object_get(j, "findings");
	ck_assert_uint_eq(json_array_size(f), 1);
	x = json_object_get(json_array_get(f, 0), "evidence");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "id")), "cycle_drift");
	ck_assert_int_eq(json_integer_value(json_object_get(x, "first_cycle_step")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "last_cycle_step")), 31);
	/* /diagnosis has it too, the same, after the rank's own findings */
	json_t *d = call("GET", "/api/v1/runs/long/diagnosis", NULL, 0, 200), *df = json_object_get(d, "findings");
	ck_assert_uint_ge(json_array_size(df), 2);	/* no_gpu_activity first */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(df, json_array_size(df) - 1), "id")), "cycle_drift");
	ck_assert(json_equal(json_array_get(df, json_array_size(df) - 1), json_array_get(f, 0)));
	json_decref(d);
	json_decref(j);

	/* downsampled: the first, the last, the slowest of each stretch */
	j = call("GET", "/api/v1/runs/long/timeline?points=4", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "points")), 4);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 4);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "steps"), 3), "step")), 33);
	json_decref(j);

	/* a trace with memory: allocated at each step's end */
	upload("memrun", 0, "traces/hta_v100_train_memory.json.gz");
	j = call("GET", "/api/v1/runs/memrun/timeline", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:1");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 5);
	json_array_foreach(json_object_get(j, "steps"), i, x)
		ck_assert_int_gt(json_integer_value(json_object_get(x, "allocated_bytes")), 1000000000);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cycles")), 1);
	json_decref(j);

	json_decref(call("GET", "/api/v1/runs/long/timeline?points=-1", NULL, 0, 400));
	json_decref(call("GET", "/api/v1/runs/nope/timeline", NULL, 0, 404));
}
END_TEST

/* ---- memory over the whole training: recordings stitched, gaps where none recorded ---- */

/* A cycle of 3 steps from start_s seconds, each allocating 1 MiB at its start (never freed). */
static void upload_mem_cycle(const char *run, int first, int start_s, long long *allocated)
{
	char body[4096], url[256];
	size_t len = 0;

	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"traceEvents\":[");
	for (int k = 0; k < 3; k++) {
		long long ts = (long long)start_s * 1000000 + (long long)k * 100000;
		*allocated += 1 << 20;
		len += (size_t)snprintf(body + len, sizeof(body) - len,
					"%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
					"\"tid\":1,\"ts\":%lld,\"dur\":90000},"
					"{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":%lld,"
					"\"args\":{\"Device Type\":1,\"Device Id\":0,\"Addr\":%lld,\"Bytes\":1048576,"
					"\"Total Allocated\":%lld,\"Total Reserved\":1073741824}}",
					k ? "," : "", first + k, ts, ts + 10, 4096LL * (first + k), *allocated);
	}
	len += (size_t)snprintf(body + len, sizeof(body) - len, "]}");
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=mcycle%d.json", run, first);
	json_decref(call("POST", url, body, len, 201));
}

/* the gaps of a /memory answer equal the [start, end) pairs given */
static void gaps_are(json_t *mem, const long long *want, size_t n)
{
	json_t *g = json_object_get(mem, "gaps");

	ck_assert_msg(json_is_array(g), "no gaps array");
	ck_assert_uint_eq(json_array_size(g), n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(g, i), "start_ns")), want[2 * i]);
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(g, i), "end_ns")), want[2 * i + 1]);
	}
}

START_TEST(test_memory_across_cycles)
{
	long long allocated = 0, want[4];
	json_t *tl, *mem, *all, *cy, *t;
	size_t i;

	/* three profiling cycles of a trace, uploaded out of order: one series, a gap between cycles */
	upload_mem_cycle("mcycles", 21, 20, &(long long){ 6 << 20 });
	upload_mem_cycle("mcycles", 1, 0, &allocated);
	allocated += 2 << 20;	/* the third cycle's first allocation follows the second's last */
	upload_mem_cycle("mcycles", 11, 10, &(long long){ 3 << 20 });
	tl = call("GET", "/api/v1/runs/mcycles/timeline", NULL, 0, 200);
	cy = json_object_get(tl, "cycles");
	ck_assert_uint_eq(json_array_size(cy), 3);
	for (i = 0; i < 2; i++) {
		want[2 * i] = json_integer_value(json_object_get(json_array_get(cy, i), "end_ns"));
		want[2 * i + 1] = json_integer_value(json_object_get(json_array_get(cy, i + 1), "start_ns"));
		ck_assert_int_lt(want[2 * i], want[2 * i + 1]);
	}
	mem = call("GET", "/api/v1/runs/mcycles/memory", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(mem, "source")), "trace");
	gaps_are(mem, want, 2);
	/* every cycle's allocations are in it: 9 MiB at the end */
	t = json_object_get(mem, "allocated");
	ck_assert_int_eq(json_integer_value(json_array_get(t, json_array_size(t) - 1)), 9LL << 20);
	/* no point falls inside a gap */
	json_array_foreach(json_object_get(mem, "t_ns"), i, t)
		for (size_t g = 0; g < 2; g++)
			ck_assert(!(json_integer_value(t) > want[2 * g] && json_integer_value(t) < want[2 * g + 1]));
	all = call("GET", "/api/v1/runs/mcycles/memory?points=0", NULL, 0, 200);
	gaps_are(all, want, 2);
	ck_assert(json_equal(json_object_get(all, "t_ns"), json_object_get(mem, "t_ns")));
	json_decref(all);
	json_decref(mem);
	json_decref(tl);

	/* PyTorch's export of two cycles, 100 s apart: one series, stitched, the gap between them */
	char *path = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	size_t glen, len;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	json_t *rows = json_loadb((const char *)text, len, 0, NULL), *row;
	ck_assert_ptr_nonnull(rows);
	json_decref(call("POST", "/api/v1/runs/mexp/artifacts?rank=0&name=cycle1.json.gz", gz, glen, 201));
	json_t *one = call("GET", "/api/v1/runs/mexp/memory?points=0", NULL, 0, 200);
	json_t *t1 = json_object_get(one, "t_ns");
	long long n1 = json_integer_value(json_object_get(one, "points_total"));
	gaps_are(one, NULL, 0);
	json_array_foreach(rows, i, row)
		if (json_integer_value(json_array_get(row, 0)) >= 0)
			json_array_set_new(row, 0, json_integer(json_integer_value(json_array_get(row, 0)) + 100000000000LL));
	char *shifted = json_dumps(rows, JSON_COMPACT);
	json_decref(call("POST", "/api/v1/runs/mexp/artifacts?rank=0&name=cycle2.json", shifted, strlen(shifted), 201));
	mem = call("GET", "/api/v1/runs/mexp/memory?points=0", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(mem, "source")), "pytorch");
	ck_assert_int_eq(json_integer_value(json_object_get(mem, "points_total")), 2 * n1);
	t = json_object_get(mem, "t_ns");
	want[0] = json_integer_value(json_array_get(t1, json_array_size(t1) - 1));
	want[1] = json_integer_value(json_array_get(t1, 0)) + 100000000000LL;
	gaps_are(mem, want, 1);
	ck_assert_int_eq(json_integer_value(json_array_get(t, (size_t)n1 - 1)), want[0]);
	ck_assert_int_eq(json_integer_value(json_array_get(t, (size_t)n1)), want[1]);
	/* the peak is the higher of the two, here the same bytes: the first recording's */
	ck_assert(json_equal(json_object_get(json_object_get(mem, "peak"), "bytes"),
			     json_object_get(json_object_get(one, "peak"), "bytes")));
	json_decref(mem);
	/* downsampled, the same gaps and both ends kept */
	mem = call("GET", "/api/v1/runs/mexp/memory?points=100", NULL, 0, 200);
	gaps_are(mem, want, 1);
	t = json_object_get(mem, "t_ns");
	ck_assert_int_eq(json_integer_value(json_array_get(t, json_array_size(t) - 1)),
			 json_integer_value(json_array_get(t1, json_array_size(t1) - 1)) + 100000000000LL);
	json_decref(mem);
	json_decref(one);
	free(shifted);
	json_decref(rows);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/* ---- a database from before the points were packed ---- */

struct legacy_series {
	int64_t artifact;
	char device[64];
	size_t n;
	int64_t (*row)[MEM_POINT_COLS];
	uint8_t *nul;
};

/* run sql (a statement list) through db, failing the test with the engine's message */
static void db_ok(struct db *db, int rc, const char *what)
{
	ck_assert_msg(rc == DB_OK, "%s: %s", what, db_errmsg(db));
}

/*
 * Take the database at where back to the schema before migration 015 (the
 * third last: 016 adds step columns, 017 an index), as a server before it left it: every series' points (read with the store's own cursor)
 * written as rows of memory_points, the blocks and 015's columns gone. The
 * same on SQLite and PostgreSQL: the table is made by db_migrate, as the
 * migrations make theirs. Returns the points moved.
 */
static size_t downgrade_before_015(const char *where)
{
	struct tp_errbuf err = { 0 };
	struct legacy_series *ser = NULL;
	struct store *st;
	struct store_reader *rd;
	struct store_mem_points *c;
	struct db *db;
	struct db_stmt *q;
	size_t nser = 0, i, k, moved = 0;
	int v015;
	int64_t seq;

	ck_assert_int_eq(store_open(where, &st, &err), 0);
	ck_assert_int_eq(store_reader_open(st, &rd, &err), 0);
	ck_assert_int_eq(db_open(where, 0, &db, &err), 0);
	db_ok(db, db_prepare(db, "SELECT artifact_id, device FROM memory_series ORDER BY artifact_id, device", 0, &q),
	      "series");
	while (db_step(q) == DB_ROW) {
		ser = realloc(ser, (nser + 1) * sizeof(*ser));
		memset(&ser[nser], 0, sizeof(ser[nser]));
		ser[nser].artifact = db_column_int64(q, 0);
		snprintf(ser[nser].device, sizeof(ser[nser].device), "%s", (const char *)db_column_text(q, 1));
		nser++;
	}
	db_finalize(q);
	for (i = 0; i < nser; i++) {
		struct legacy_series *e = &ser[i];
		int64_t row[MEM_POINT_COLS];
		uint8_t nul;
		ck_assert_int_eq(store_mem_points_open(rd, e->artifact, e->device, -1, &c, &err), 0);
		while (store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err) == 1) {
			ck_assert_int_eq(seq, (int64_t)e->n);
			e->row = realloc(e->row, (e->n + 1) * sizeof(*e->row));
			e->nul = realloc(e->nul, e->n + 1);
			memcpy(e->row[e->n], row, sizeof(row));
			e->nul[e->n++] = nul;
		}
		ck_assert_str_eq(err.code, "");
		store_mem_points_close(c);
	}
	store_reader_close(rd);
	store_close(st);

	/* back to the schema before 015 (and 016, which only adds step columns, 017, an index, and 018,
	 * a column of event blocks) */
	for (v015 = 0; v015 < store_nmigrations && strncmp(store_migrations[v015], "-- 015:", 7); v015++)
		;
	ck_assert_int_eq(v015, store_nmigrations - 4);
	ck_assert(!strncmp(store_migrations[v015 + 1], "-- 016:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 2], "-- 017:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 3], "-- 018:", 7));
	db_ok(db, db_exec(db, "BEGIN"), "begin");
	db_ok(db, db_migrate(db, v015, "ALTER TABLE event_blocks DROP COLUMN max_ts; DROP INDEX artifacts_by_rank;"
				     " ALTER TABLE steps DROP COLUMN cpu_end_ns;"
				     " ALTER TABLE steps DROP COLUMN sync_calls; ALTER TABLE steps DROP COLUMN sync_ns;"
				     " CREATE TABLE memory_points (artifact_id INTEGER NOT NULL, device TEXT NOT NULL,"
				     " seq INTEGER NOT NULL, t_ns INTEGER NOT NULL, parameter INTEGER NOT NULL,"
				     " optimizer_state INTEGER NOT NULL, input INTEGER NOT NULL, temporary INTEGER NOT NULL,"
				     " activation INTEGER NOT NULL, gradient INTEGER NOT NULL, autograd_detail INTEGER NOT NULL,"
				     " unknown INTEGER NOT NULL, allocated INTEGER NOT NULL, reserved INTEGER,"
				     " PRIMARY KEY (artifact_id, device, seq)) WITHOUT ROWID;"
				     " DROP TABLE memory_point_blocks;"
				     " ALTER TABLE memory_series DROP COLUMN first_t_ns;"
				     " ALTER TABLE memory_series DROP COLUMN peak_allocated;"
				     " ALTER TABLE memory_series DROP COLUMN max_reserved;"), "the schema before");
	db_ok(db, db_prepare(db, "INSERT INTO memory_points VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
				 " ?13, ?14)", 0, &q), "insert");
	for (i = 0; i < nser; i++) {
		for (k = 0; k < ser[i].n; k++) {
			db_bind_int64(q, 1, ser[i].artifact);
			db_bind_text(q, 2, ser[i].device, -1, DB_TRANSIENT);
			db_bind_int64(q, 3, (int64_t)k);
			for (int col = 0; col < MEM_POINT_COLS; col++)
				db_bind_int64(q, 4 + col, ser[i].row[k][col]);
			if (ser[i].nul[k])
				db_bind_null(q, 4 + MEM_COL_RESERVED);
			ck_assert_msg(db_step(q) == DB_DONE, "%s", db_errmsg(db));
			db_reset(q);
			moved++;
		}
		free(ser[i].row);
		free(ser[i].nul);
	}
	db_finalize(q);
	free(ser);
	if (db_is_postgres(where)) {
		char sql[96];
		snprintf(sql, sizeof(sql), "DELETE FROM trainscope.schema_version WHERE version >= %d", v015 + 1);
		db_ok(db, db_exec(db, sql), "version");
	}
	db_ok(db, db_exec(db, "COMMIT"), "commit");
	ck_assert_int_eq(db_schema_version(db), v015);
	db_close(db);
	return moved;
}

/*
 * A database from before migration 015 (points a row each) on either engine: the server upgrades it as it starts, and every memory
 * answer is what it was before the points were taken back to rows.
 */
START_TEST(test_upgrade_packs_points)
{
	static const char *const paths[] = {
		"/api/v1/runs/upexp/memory?points=0", "/api/v1/runs/upexp/memory?points=100",
		"/api/v1/runs/upexp/memory/peak", "/api/v1/runs/uptrace/memory?points=0",
		"/api/v1/runs/uptrace/memory", "/api/v1/runs/uptrace/diagnosis", "/api/v1/runs/uptrace/timeline",
	};
	enum { NP = sizeof(paths) / sizeof(paths[0]) };
	char *before[NP];
	long long blocks, points, peaks;
	struct tu_resp r;
	size_t i, moved;

	upload("upexp", 0, "memory/hta_memory_timeline.raw.json.gz");
	upload("uptrace", 0, "traces/hta_v100_train_memory.json.gz");
	for (i = 0; i < NP; i++) {
		ck_assert_int_eq(tu_http(&srv, "GET", paths[i], NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status == 200, "%s: %ld %s", paths[i], r.status, r.body);
		before[i] = strdup(r.body);
		tu_resp_free(&r);
	}
	blocks = tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_point_blocks");
	points = tu_db_scalar(srv.db, "SELECT SUM(n) FROM memory_point_blocks");
	peaks = tu_db_scalar(srv.db, "SELECT SUM(peak_allocated) FROM memory_series");
	ck_assert_int_gt(blocks, 2);
	ck_assert_int_eq(tu_server_stop(&srv), 0);

	moved = downgrade_before_015(srv.db);
	ck_assert_int_eq((long long)moved, points);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_points"), points);

	ck_assert_int_eq(tu_server_restart(&srv, NULL), 0);
	ck_assert_int_eq(tu_db_scalar(srv.db, db_is_postgres(srv.db) ? "SELECT MAX(version) FROM schema_version"
							: "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM memory_point_blocks"), blocks);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT SUM(n) FROM memory_point_blocks"), points);
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT SUM(peak_allocated) FROM memory_series"), peaks);
	ck_assert_int_eq(tu_db_scalar(srv.db, db_is_postgres(srv.db)
				      ? "SELECT COUNT(*) FROM information_schema.tables WHERE table_name='memory_points'"
				      : "SELECT COUNT(*) FROM sqlite_master WHERE name='memory_points'"), 0);
	for (i = 0; i < NP; i++) {
		ck_assert_int_eq(tu_http(&srv, "GET", paths[i], NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status == 200 && !strcmp(r.body, before[i]), "%s differs after the upgrade: %.300s",
			      paths[i], r.body);
		tu_resp_free(&r);
		free(before[i]);
	}
}
END_TEST

/* ---- reads derive a run once, however many read it at once ---- */

struct reader_arg {
	char *body;
	long status;
};

static void *read_steps(void *arg)
{
	struct reader_arg *a = arg;
	struct tu_resp r;

	if (tu_http(&srv, "GET", "/api/v1/runs/conc/steps", NULL, 0, NULL, &r) == 0) {
		a->status = r.status;
		a->body = strdup(r.body);
		tu_resp_free(&r);
	}
	return NULL;
}

/* the value of a metric line "name value" in /metrics, -1 when absent */
static double metric_on(const struct tu_server *s, const char *name)
{
	struct tu_resp r;
	double v = -1;
	size_t n = strlen(name);

	ck_assert_int_eq(tu_http(s, "GET", "/metrics", NULL, 0, NULL, &r), 0);
	for (const char *p = r.body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			v = strtod(p + n + 1, NULL);
	tu_resp_free(&r);
	return v;
}

static double metric(const char *name)
{
	return metric_on(&srv, name);
}

START_TEST(test_reads_derive_once)
{
	struct reader_arg a[8] = { { 0 } };
	pthread_t th[8];
	int i;

	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 0);
	/* three traces joined rank 0: one derivation, by whichever read came first */
	for (i = 0; i < 3; i++)
		upload_cycle("conc", 1 + 10 * i, 10 * i, 100);
	/* the run's info and the list read nothing derived (the live page polls them): no derivation */
	json_decref(call("GET", "/api/v1/runs/conc", NULL, 0, 200));
	json_decref(call("GET", "/api/v1/runs", NULL, 0, 200));
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 0);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, read_steps, &a[i]), 0);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(a[i].status, 200);
		ck_assert_str_eq(a[i].body, a[0].body);
	}
	json_t *j = json_loads(a[0].body, 0, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 9);
	json_decref(j);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 1);
	/* a fourth: derived once more, by the next read */
	upload_cycle("conc", 31, 30, 100);
	json_decref(call("GET", "/api/v1/runs/conc/ops", NULL, 0, 200));
	json_decref(call("GET", "/api/v1/runs/conc/steps", NULL, 0, 200));
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 2);
	for (i = 0; i < 8; i++)
		free(a[i].body);
}
END_TEST


/* the run's analysis_pending, from GET /runs/{run} */
static int pending(const char *run)
{
	char url[128];
	json_t *j;
	int v;

	snprintf(url, sizeof(url), "/api/v1/runs/%s", run);
	j = call("GET", url, NULL, 0, 200);
	ck_assert(json_is_boolean(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	v = json_is_true(json_object_get(json_object_get(j, "run"), "analysis_pending"));
	json_decref(j);
	return v;
}

/* the run's analysis_pending and steps in the list (GET /runs), which derives nothing */
static int listed_pending(const char *run, long long *steps)
{
	json_t *j = call("GET", "/api/v1/runs", NULL, 0, 200), *r;
	size_t i;
	int v = -1;

	json_array_foreach(json_object_get(j, "runs"), i, r)
		if (!strcmp(json_string_value(json_object_get(r, "name")), run)) {
			ck_assert(json_is_boolean(json_object_get(r, "analysis_pending")));
			v = json_is_true(json_object_get(r, "analysis_pending"));
			*steps = json_integer_value(json_object_get(r, "steps"));
		}
	json_decref(j);
	ck_assert_int_ge(v, 0);
	return v;
}

static size_t steps_of(const char *url)
{
	json_t *j = call("GET", url, NULL, 0, 200);
	size_t n = json_array_size(json_object_get(j, "steps"));

	json_decref(j);
	return n;
}

/* ?wait=0: the analysis as it stands, the joined traces derived in the background */
START_TEST(test_read_without_waiting)
{
	int i;

	upload_cycle("grow", 1, 0, 100);
	ck_assert(!pending("grow"));
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=0"), 3);
	/* a second cycle joins: pending until something derives it */
	upload_cycle("grow", 11, 10, 100);
	ck_assert(pending("grow"));
	/* the list says so too, with the steps as they stand, and derives nothing */
	long long listed;
	ck_assert_int_eq(listed_pending("grow", &listed), 1);
	ck_assert_int_eq(listed, 3);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 0);
	/* answered from the first cycle's analysis, a derivation started behind it */
	size_t n = steps_of("/api/v1/runs/grow/steps?wait=0");
	ck_assert(n == 3 || n == 6);	/* 6 only if the background one was quicker than this read */
	for (i = 0; i < 300 && pending("grow"); i++)
		usleep(20000);
	ck_assert(!pending("grow"));
	ck_assert_int_eq(listed_pending("grow", &listed), 0);
	ck_assert_int_eq(listed, 6);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 1);
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=0"), 6);
	/* the same bytes as a read that waits, and nothing left to derive for it */
	json_t *a = call("GET", "/api/v1/runs/grow/ops?wait=0", NULL, 0, 200);
	json_t *b = call("GET", "/api/v1/runs/grow/ops", NULL, 0, 200);
	ck_assert(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == 1);
	/* a read that waits still answers for every trace before it */
	upload_cycle("grow", 21, 20, 100);
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=1"), 9);
	ck_assert(!pending("grow"));
	/* wait is 0 or 1 */
	json_t *e = call("GET", "/api/v1/runs/grow/steps?wait=yes", NULL, 0, 400);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "error"), "code")), "invalid_parameter");
	json_decref(e);
	/* a server stopped while a background derivation runs waits for it (the fixture's stop) */
	upload_cycle("grow", 31, 30, 100);
	json_decref(call("GET", "/api/v1/runs/grow/kernels?wait=0", NULL, 0, 200));
}
END_TEST

/* one server's half of a run's chunks: every other one, from first */
struct half {
	const struct tu_server *s;
	const struct cut *c;
	const size_t *at;
	size_t k, first;
};

static void *upload_half(void *arg)
{
	const struct half *h = arg;

	for (size_t i = h->first; i < h->k; i += 2)
		upload_chunk_via(h->s, h->c, h->at[i], h->at[i + 1], "shared-cut", i);
	return NULL;
}

/*
 * Two servers on one PostgreSQL: a run uploaded through one is read through
 * the other at once (its cached answers do not outlive the other's write),
 * the two answer alike, and the chunks of one run sent to both at the same
 * time give the whole file's answers, byte for byte.
 */
START_TEST(test_two_servers_one_run)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t glen, len, at[7], i, k = 6;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct tu_server b;
	struct cut c;
	json_t *runs;
	pthread_t t;
	struct half ha, hb;

	ck_assert_int_eq(tu_server_start_on(&b, srv.db, NULL), 0);
	runs = call_on(&b, "GET", "/api/v1/runs", 200);
	ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 0);
	json_decref(runs);
	json_decref(call("POST", "/api/v1/runs/shared-whole/artifacts?rank=0&name=whole.json.gz", gz, glen, 201));
	runs = call_on(&b, "GET", "/api/v1/runs", 200);
	ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 1);
	json_decref(runs);
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		same_answer_via(&srv, "shared-whole", &b, "shared-whole", answers[i]);
	/* six chunks at even cuts, three through each server at once */
	cut_find((const char *)text, len, &c);
	for (i = 0; i <= k; i++)
		at[i] = c.n * i / k;
	ha = (struct half){ &srv, &c, at, k, 0 };
	hb = (struct half){ &b, &c, at, k, 1 };
	ck_assert_int_eq(pthread_create(&t, NULL, upload_half, &hb), 0);
	upload_half(&ha);
	pthread_join(t, NULL);
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		same_answer_via(&srv, "shared-whole", &srv, "shared-cut", answers[i]);
		same_answer_via(&srv, "shared-whole", &b, "shared-cut", answers[i]);
	}
	tu_server_cleanup(&b);
	free(c.ev);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/*
 * Background derivations are paced (--derive-pace k: a run's next starts no sooner than k
 * times the last one's length after it): the second waits, a read that waits derives at
 * once all the same, and a stop cuts the pause short, deriving what it waited for.
 */
START_TEST(test_background_paced)
{
	const char *const paced[] = { "--derive-pace", "1000", NULL };
	struct timespec t0, t1;
	int i;

	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, paced), 0);
	upload("paced", 0, "traces/hta_v100_train_memory.json.gz");
	upload("paced", 0, "traces/hta_ns_resolution.json.gz");
	ck_assert(pending("paced"));
	/* the first background derivation starts at once (a few tenths of a second of work) */
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps?wait=0"), 0);
	for (i = 0; i < 1500 && pending("paced"); i++)
		usleep(20000);
	ck_assert(!pending("paced"));
	double derived = metric("trainscope_rank_derivation_seconds_count");
	/* the next waits 1000 times that: still pending a second later */
	upload("paced", 0, "traces/hta_event_sync.json.gz");
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps?wait=0"), 0);
	sleep(1);
	ck_assert(pending("paced"));
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == derived);
	/* a read that waits derives now */
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps"), 0);
	ck_assert(!pending("paced"));
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == derived + 1);
	/* the paused one still waits; one more trace, then a stop: the pause is cut short */
	upload("paced", 0, "traces/hta_alexnet.json.gz");
	json_decref(call("GET", "/api/v1/runs/paced/kernels?wait=0", NULL, 0, 200));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 60);	/* the pause: 1000 x a few tenths of a second */
	ck_assert_int_eq(tu_server_restart(&srv, NULL), 0);
	ck_assert(!pending("paced"));	/* the stop derived it */
}
END_TEST

/*
 * --derive-quiet S: a trace that joins its rank starts a derivation of the server's own,
 * once the run has had no upload for S seconds. A burst of cycles is derived once, after
 * its last, with no read asking (the list, which derives nothing, sees the run pending,
 * then not), and answers as a run a read derived does. A read with ?wait=0 cuts the wait
 * short; a stop while it waits derives nothing (the next read does); with 0 (the tests'
 * default: testutil.c), nothing is derived until a read.
 */
START_TEST(test_quiet_derivation)
{
	const char *const quiet[] = { "--derive-quiet", "3", NULL }, *const long_quiet[] = { "--derive-quiet", "600",
											   NULL };
	/* what a trace of steps alone answers */
	const char *const of_steps[] = { "/steps", "/ops?device=cpu&limit=100000", "/ranks", "/diagnosis" };
	long long steps;
	double d0;
	int i;

	/* off: pending for as long as nobody reads */
	upload_cycle("off", 1, 0, 100);
	upload_cycle("off", 11, 100, 100);
	sleep(2);
	ck_assert(listed_pending("off", &steps));

	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, quiet), 0);
	for (i = 0; i < 3; i++)
		upload_cycle("ref", 1 + 10 * i, 100 * i, 100);
	ck_assert_uint_eq(steps_of("/api/v1/runs/ref/steps"), 9);	/* derived by this read */
	d0 = metric("trainscope_rank_derivation_seconds_count");
	for (i = 0; i < 3; i++)
		upload_cycle("burst", 1 + 10 * i, 100 * i, 100);
	ck_assert(listed_pending("burst", &steps));	/* within 3 s of its last upload */
	for (i = 0; i < 1500 && listed_pending("burst", &steps); i++)
		usleep(20000);
	ck_assert(!listed_pending("burst", &steps));
	ck_assert_int_eq(steps, 9);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == d0 + 1);	/* once for the burst */
	for (size_t k = 0; k < sizeof(of_steps) / sizeof(of_steps[0]); k++)
		same_answer("ref", "burst", of_steps[k]);
	ck_assert(metric("trainscope_rank_derivation_seconds_count") == d0 + 1);	/* the reads derived nothing */

	/* ?wait=0 does not wait for the quiet */
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, long_quiet), 0);
	upload_cycle("page", 1, 0, 100);
	upload_cycle("page", 11, 100, 100);
	ck_assert(listed_pending("page", &steps));
	json_decref(call("GET", "/api/v1/runs/page/steps?wait=0", NULL, 0, 200));
	for (i = 0; i < 1500 && listed_pending("page", &steps); i++)
		usleep(20000);
	ck_assert(!listed_pending("page", &steps));
	ck_assert_int_eq(steps, 6);

	/* a stop does not wait for the quiet, nor derive */
	upload_cycle("page", 21, 200, 100);
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, NULL), 0);
	ck_assert(listed_pending("page", &steps));
	ck_assert_uint_eq(steps_of("/api/v1/runs/page/steps"), 9);
}
END_TEST

/*
 * --spill-at N: an analysis past N host spans sorts them into runs in a temporary file
 * ($TMPDIR), and parks its [memory] events there. Runs of 500 spans answer what one run in
 * memory does, byte for byte, at every endpoint; with no temporary file to be had, the upload
 * is refused (507, temp_file) and nothing of it is kept, so the same file uploads once there is.
 */
START_TEST(test_spill_at)
{
	const char *const spill[] = { "--spill-at", "500", NULL };
	const char *fx = "traces/hta_v100_train_memory.json.gz", *old = getenv("TMPDIR");
	char *path = tu_fixture(fx), *keep = old ? strdup(old) : NULL;
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j;

	ck_assert_ptr_nonnull(b);
	upload("inmem", 0, fx);
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	setenv("TMPDIR", "/nonexistent/trainscope", 1);
	ck_assert_int_eq(tu_server_restart(&srv, spill), 0);
	if (keep)
		setenv("TMPDIR", keep, 1);
	else
		unsetenv("TMPDIR");
	j = call("POST", "/api/v1/runs/spilled/artifacts?rank=0&name=v100", b, len, 507);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "temp_file");
	json_decref(j);
	json_decref(call("GET", "/api/v1/runs/spilled", NULL, 0, 404));
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, spill), 0);
	upload("spilled", 0, fx);
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		same_answer("inmem", "spilled", answers[i]);
	free(keep);
	free(b);
	free(path);
}
END_TEST

/*
 * A run read after each chunk, as a live page reads it: a derivation
 * replays only the chunks that joined since the last (the rank's analysis
 * is kept between them: runrank.c), and answers what the same chunks
 * uploaded and read at once do, and at the end what the whole file does.
 * Deleted and uploaded again cut otherwise (SQLite gives the ids again),
 * the run is replayed from its start.
 */
static void grown_same(const char *a, const char *b)
{
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		same_answer(a, b, answers[i]);
}

START_TEST(test_grown_chunk_by_chunk)
{
	static const char *replayed = "trainscope_rank_replay_artifacts_total{how=\"replayed\"}",
			  *kept = "trainscope_rank_replay_artifacts_total{how=\"kept\"}";
	const char *const none[] = { "--derive-keep", "0", NULL };
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t glen, len, i, k = 4, at[6];
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct cut c;

	ck_assert_ptr_nonnull(text);
	cut_find((const char *)text, len, &c);
	for (i = 0; i <= k; i++)
		at[i] = c.n * i / k;
	json_decref(call("POST", "/api/v1/runs/whole/artifacts?rank=0&name=whole.json.gz", gz, glen, 201));
	upload_chunk(&c, at[0], at[1], "two", 0);
	upload_chunk(&c, at[1], at[2], "two", 1);
	for (i = 0; i < k; i++) {
		double r0 = metric(replayed), k0 = metric(kept);
		upload_chunk(&c, at[i], at[i + 1], "grow", i);
		json_decref(call("GET", "/api/v1/runs/grow/steps", NULL, 0, 200));
		/* the first chunk was analysed as it came; the second joined it: both replayed; then one each */
		ck_assert_msg(metric(replayed) == r0 + (i == 0 ? 0 : i == 1 ? 2 : 1), "chunk %zu: %g replayed", i,
			      metric(replayed) - r0);
		ck_assert_msg(metric(kept) == k0 + (i < 2 ? 0 : (double)i), "chunk %zu: %g kept", i, metric(kept) - k0);
		if (i == 1)
			grown_same("two", "grow");
	}
	grown_same("whole", "grow");

	json_decref(call("DELETE", "/api/v1/runs/grow", NULL, 0, 200));
	for (i = 0; i <= 5; i++)
		at[i] = c.n * i / 5;
	double r0 = metric(replayed);
	for (i = 0; i < 5; i++)
		upload_chunk(&c, at[i], at[i + 1], "grow", i);
	json_decref(call("GET", "/api/v1/runs/grow/steps", NULL, 0, 200));
	ck_assert_msg(metric(replayed) == r0 + 5, "%g replayed", metric(replayed) - r0);
	grown_same("whole", "grow");

	/* --derive-keep 0: none kept, each derivation replays every chunk, the answers the same */
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	ck_assert_int_eq(tu_server_restart(&srv, none), 0);
	for (i = 0; i < 3; i++) {
		r0 = metric(replayed);
		upload_chunk(&c, at[i], at[i + 1], "none", i);
		json_decref(call("GET", "/api/v1/runs/none/steps", NULL, 0, 200));
		ck_assert_msg(metric(replayed) == r0 + (i ? (double)i + 1 : 0), "chunk %zu: %g replayed", i,
			      metric(replayed) - r0);
	}
	ck_assert(metric(kept) == 0);
	for (; i < 5; i++)
		upload_chunk(&c, at[i], at[i + 1], "none", i);
	grown_same("whole", "none");
	free(c.ev);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/* upload body as artifact name of run on s, then (read) derive it on s */
static void upload_to(const struct tu_server *s, const char *run, const char *name, const void *body, size_t len,
		      int read)
{
	char url[256];

	struct tu_resp r;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=%s", run, name);
	ck_assert_int_eq(tu_http(s, "POST", url, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "%s: %ld: %s", url, r.status, r.body);
	tu_resp_free(&r);
	if (read) {
		snprintf(url, sizeof(url), "/api/v1/runs/%s/steps", run);
		json_decref(call_on(s, "GET", url, 200));
	}
}

static int is_trace(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 17 && !strcmp(d->d_name + n - 17, ".pt.trace.json.gz");
}

/* every answer of run on a, byte for byte, on b */
static void same_answers_via(const struct tu_server *a, const struct tu_server *b, const char *run)
{
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++)
		same_answer_via(a, run, b, run, answers[i]);
	same_answer_via(a, run, b, run, "/timeline");
	same_answer_via(a, run, b, run, "/memory");
	same_answer_via(a, run, b, run, "/distributed");
}

/*
 * The rows of the collectives table, every column and its place (n) in a sum (the parts'
 * first ones are left as a write before stored them: they must be the whole's).
 */
static long long colls_sum(const struct tu_server *s)
{
	return tu_db_scalar(s->db, "SELECT COUNT(*) + COALESCE(SUM((n % 1000 + 1) * ((COALESCE(step, -1) * 7919"
				   " + length(kind) * 31 + length(pg) * 37 + COALESCE(seq, -1) * 131 + launch_ns % 1000003"
				   " + start_ns % 999983 * 3 + end_ns % 999979 * 5 + time_ns % 1000033 * 11 + kernels * 17"
				   " + COALESCE(bytes, -1) % 1000003 * 19 + COALESCE(group_size, -1) * 23"
				   " + length(COALESCE(before_op, '')) * 29 + before_ns % 1000003 * 41) % 1000000007)), 0)"
				   " FROM collectives");
}

/*
 * Profiling cycles in parts (pipeline/runrank.c): the ten cycles of the GPU fixtures' QLoRA
 * schedule (1 step in 10), uploaded in time order with a read after each, close a part each
 * (nine: every derivation finishes the cycle that joined, not the run), and answer byte for byte
 * as a server that analyses the rank whole (--derive-parts off); so do they uploaded shuffled.
 * The same cycle twice, its times moved on: the second's ids run into the first's, the parts do
 * not meet, and the rank is analysed whole (rebuilt), as the other server does.
 */
START_TEST(test_cycles_in_parts)
{
	static const char *closed = "trainscope_rank_parts_total{how=\"closed\"}",
			  *rebuilt = "trainscope_rank_parts_total{how=\"rebuilt\"}",
			  *went_on = "trainscope_rank_memory_models_total{how=\"went_on\"}",
			  *made = "trainscope_rank_memory_models_total{how=\"made\"}";
	static const size_t shuffled[] = { 3, 0, 7, 1, 9, 2, 4, 8, 5, 6 };
	const char *const off[] = { "--derive-parts", "off", NULL };
	char *dir = tu_source_path("tests/fixtures/gpu/train"), path[512];
	struct tu_server whole;
	struct dirent **ents;
	uint8_t *body[10];
	size_t len[10], i;
	int n = scandir(dir, &ents, is_trace, alphasort);

	ck_assert_int_eq(n, 10);	/* their names count up with their times */
	ck_assert_int_eq(tu_server_start(&whole, off), 0);
	for (i = 0; i < 10; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		ck_assert_ptr_nonnull(body[i] = tu_read_file(path, &len[i]));
	}
	double c0 = metric(closed), r0 = metric(rebuilt), w0 = metric(went_on), m0 = metric(made);
	for (i = 0; i < 10; i++) {
		upload_to(&srv, "cycles", ents[i]->d_name, body[i], len[i], 1);
		upload_to(&whole, "cycles", ents[i]->d_name, body[i], len[i], 0);
		ck_assert_msg(metric(closed) == c0 + (double)i, "cycle %zu: %g parts closed", i, metric(closed) - c0);
	}
	ck_assert(metric(rebuilt) == r0);
	/* each cycle's 708 [memory] events fed to the model of the cycles before */
	ck_assert_msg(metric(went_on) >= w0 + 9, "%g went on", metric(went_on) - w0);
	ck_assert(metric(made) == m0);
	same_answers_via(&whole, &srv, "cycles");

	for (i = 0; i < 10; i++) {
		upload_to(&srv, "shuffled", ents[shuffled[i]]->d_name, body[shuffled[i]], len[shuffled[i]], 1);
		upload_to(&whole, "shuffled", ents[shuffled[i]]->d_name, body[shuffled[i]], len[shuffled[i]], 0);
	}
	same_answers_via(&whole, &srv, "shuffled");

	/* the first cycle again, 10 s on: its correlation ids are the first's */
	size_t tlen, k;
	char *text = (char *)tu_gunzip(body[0], len[0], &tlen), *p = strstr(text, "\"baseTimeNanoseconds\"");
	ck_assert_ptr_nonnull(p);
	p = strchr(p, ':') + 1;
	while (*p == ' ')
		p++;
	ck_assert(strspn(p, "0123456789") == 19 && p[8] < '9');	/* 10^10 ns a unit of its ninth digit */
	r0 = metric(rebuilt);
	upload_to(&srv, "again", "first.json", text, tlen, 1);
	upload_to(&whole, "again", "first.json", text, tlen, 0);
	p[8]++;
	upload_to(&srv, "again", "moved.json", text, tlen, 1);
	upload_to(&whole, "again", "moved.json", text, tlen, 0);
	ck_assert_msg(metric(rebuilt) == r0 + 1, "%g rebuilt", metric(rebuilt) - r0);
	same_answers_via(&whole, &srv, "again");

	for (k = 0; k < 10; k++) {
		free(body[k]);
		free(ents[k]);
	}
	free(ents);
	free(text);
	free(dir);
	tu_server_cleanup(&whole);
}
END_TEST

/* The events of c written in [lo, hi) (lo INT64_MIN: those without a time too), as one chunk of run on s. */
static void upload_window(const struct tu_server *s, const struct cut *c, const int64_t *ts, int64_t lo, int64_t hi,
			  const char *run, const char *name)
{
	size_t cap = c->nhead + c->ntail + (size_t)(c->ev[c->n] - c->ev[0]) + 1, len = c->nhead, k = 0;
	char *buf = malloc(cap);

	memcpy(buf, c->head, c->nhead);
	for (size_t i = 0; i < c->n; i++) {
		const char *e = c->ev[i], *end = c->ev[i + 1];
		if (ts[i] < lo || ts[i] >= hi)
			continue;
		while (end > e && end[-1] != '}')	/* the comma after it */
			end--;
		if (k++)
			buf[len++] = ',';
		memcpy(buf + len, e, (size_t)(end - e));
		len += (size_t)(end - e);
	}
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	upload_to(s, run, name, buf, len, 1);
	free(buf);
}

static const char *ts_in(const char *p, const char *end);

/* One operator at lo (the first event's "ts", as written), on a thread of its own, to run on s. */
static void upload_late(const struct tu_server *s, const struct cut *c, const int64_t *ts, int64_t lo, const char *run)
{
	const char *t = NULL, *end;
	char ev[256];
	size_t i, len;
	char *buf;

	for (i = 0; i < c->n && !t; i++)
		if (ts[i] == lo)
			t = ts_in(c->ev[i], c->ev[i + 1]) + 5;
	ck_assert_ptr_nonnull(t);
	for (end = t; *end != ',' && *end != '}'; end++)
		;
	snprintf(ev, sizeof(ev), "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"late\",\"pid\":1,\"tid\":424242,"
		 "\"ts\":%.*s,\"dur\":1}", (int)(end - t), t);
	buf = malloc(c->nhead + strlen(ev) + c->ntail);
	memcpy(buf, c->head, c->nhead);
	len = c->nhead;
	memcpy(buf + len, ev, strlen(ev));
	len += strlen(ev);
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	upload_to(s, run, "late.json", buf, len, 1);
	free(buf);
}

/*
 * A trace's events cut in k windows of time (the collector's chunks: one a second), uploaded
 * in order with a read after each to a server that cuts a part holding more than 1 byte, and
 * to one that analyses the rank whole: at least cuts parts are cut, none rebuilt, and every
 * answer is byte for byte the other server's. With memory, the [memory] events' model goes on
 * from the parts before at each derivation, never made again, and the points stored before stay
 * (some not even read again). Then an operator on a thread of its own at the trace's first
 * instant (the same events again would be refused: pipeline/overlap.h): it reaches back before
 * the cuts, the parts no longer meet, and the rank is analysed whole (rebuilt), as the other
 * server does.
 */
/* "ts": in [p, end), not past it (strstr() would read to the file's end at each event) */
static const char *ts_in(const char *p, const char *end)
{
	for (; end - p >= 5; p++)
		if (!memcmp(p, "\"ts\":", 5))
			return p;
	return NULL;
}

static void windows_cut_in_parts(const char *path, size_t k, double cuts, int memory)
{
	static const char *cut = "trainscope_rank_parts_total{how=\"cut\"}",
			  *rebuilt = "trainscope_rank_parts_total{how=\"rebuilt\"}",
			  *went_on = "trainscope_rank_memory_models_total{how=\"went_on\"}",
			  *made = "trainscope_rank_memory_models_total{how=\"made\"}",
			  *kept = "trainscope_rank_memory_blocks_total{how=\"kept\"}",
			  *unread = "trainscope_rank_memory_blocks_total{how=\"unread\"}",
			  *colls_kept = "trainscope_rank_collectives_total{how=\"kept\"}";
	const char *const off[] = { "--derive-parts", "off", NULL }, *const small[] = { "--derive-split", "1", NULL };
	char name[32];
	struct tu_server whole, cutting;
	size_t glen, len, i;
	int64_t lo = INT64_MAX, hi = INT64_MIN, *ts;
	struct cut c;

	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	ck_assert_ptr_nonnull(text);
	cut_find((const char *)text, len, &c);
	ck_assert_ptr_nonnull(ts = malloc(c.n * sizeof(*ts)));
	for (i = 0; i < c.n; i++) {	/* "ts" in us, as the fixtures write it */
		const char *t = ts_in(c.ev[i], c.ev[i + 1]);
		ts[i] = t ? (int64_t)(strtod(t + 5, NULL) * 1000) : INT64_MIN;
		if (ts[i] != INT64_MIN) {
			lo = ts[i] < lo ? ts[i] : lo;
			hi = ts[i] > hi ? ts[i] : hi;
		}
	}
	ck_assert(lo < hi);
	ck_assert_int_eq(tu_server_start(&whole, off), 0);
	ck_assert_int_eq(tu_server_start(&cutting, small), 0);
	for (i = 0; i < k; i++) {
		int64_t from = i ? lo + (hi - lo) / (int64_t)k * (int64_t)i : INT64_MIN,
			to = i + 1 < k ? lo + (hi - lo) / (int64_t)k * (int64_t)(i + 1) : INT64_MAX;
		snprintf(name, sizeof(name), "second%zu.json", i);
		upload_window(&cutting, &c, ts, from, to, "live", name);
		upload_window(&whole, &c, ts, from, to, "live", name);
	}
	ck_assert_msg(metric_on(&cutting, cut) >= cuts, "%g cut", metric_on(&cutting, cut));
	ck_assert(metric_on(&cutting, rebuilt) == 0);
	if (memory) {
		ck_assert_msg(metric_on(&cutting, went_on) >= 1, "%g went on", metric_on(&cutting, went_on));
		ck_assert(metric_on(&cutting, made) == 0);
		/* the first windows' points, stored once: later derivations left their blocks as they were */
		ck_assert_msg(metric_on(&cutting, kept) >= 1, "%g blocks kept", metric_on(&cutting, kept));
		/* and the blocks before where the model's points could differ were not even read; on
		 * PostgreSQL every block is (another server may have written it since) */
		if (tu_postgres())
			ck_assert(metric_on(&cutting, unread) == 0);
		else
			ck_assert_msg(metric_on(&cutting, unread) >= 1, "%g blocks unread", metric_on(&cutting, unread));
	}
	same_answers_via(&whole, &cutting, "live");
	ck_assert_int_eq(colls_sum(&cutting), colls_sum(&whole));
	/* the parts' collectives, left as a write before stored them (the V100 trace's NCCL calls) */
	if (tu_db_scalar(whole.db, "SELECT COUNT(*) FROM collectives") && !tu_postgres())
		ck_assert_msg(metric_on(&cutting, colls_kept) >= 1, "%g collectives kept", metric_on(&cutting, colls_kept));

	upload_late(&cutting, &c, ts, lo, "live");
	upload_late(&whole, &c, ts, lo, "live");
	ck_assert(metric_on(&cutting, rebuilt) == 1);
	same_answers_via(&whole, &cutting, "live");
	ck_assert_int_eq(colls_sum(&cutting), colls_sum(&whole));

	tu_server_cleanup(&cutting);
	tu_server_cleanup(&whole);
	free(ts);
	free(c.ev);
	free(text);
	free(gz);
}

/*
 * The sync fixture waits for the GPU at every step's end (loss.item()), so nothing crosses its
 * step boundaries: five steps, four boundaries, each cut once the chunk after it has come; its
 * 3,559 [memory] events go on from part to part.
 */
START_TEST(test_chunks_cut_in_parts)
{
	char *dir = tu_source_path("tests/fixtures/gpu/sync"), path[512];
	struct dirent **ents;
	int n = scandir(dir, &ents, is_trace, alphasort);

	ck_assert_int_eq(n, 1);
	snprintf(path, sizeof(path), "%s/%s", dir, ents[0]->d_name);
	windows_cut_in_parts(path, 10, 3, 1);
	free(ents[0]);
	free(ents);
	free(dir);
}
END_TEST

/*
 * The V100 trace's 28,010 [memory] events: allocations made in one part and freed in a later
 * one, a model that goes on from part to part, the memory answers (timeline, peak) the whole
 * rank's to the byte.
 */
START_TEST(test_chunks_cut_with_memory)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");

	windows_cut_in_parts(path, 10, 1, 1);
	free(path);
}
END_TEST

Suite *suite_runs(void)
{
	Suite *s = suite_create("runs");
	TCase *tc = tcase_create("delete");

	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, test_delete_artifact);
	tcase_add_test(tc, test_delete_snapshot_segments);
	tcase_add_test(tc, test_delete_run);
	tcase_add_test(tc, test_delete_is_atomic);
	tcase_add_test(tc, test_delete_needs_write_token);
	tcase_add_test(tc, test_timeline);
	tcase_add_test(tc, test_memory_across_cycles);
	tcase_add_test(tc, test_reads_derive_once);
	tcase_add_test(tc, test_read_without_waiting);
	tcase_add_test(tc, test_background_paced);
	tcase_add_test(tc, test_spill_at);
	tcase_add_test(tc, test_joined_trace_alone);
	tcase_add_test(tc, test_upgrade_packs_points);
	suite_add_tcase(s, tc);
	tc = tcase_create("chunks");
	tcase_add_checked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_chunks_answer_as_whole_v100);
	tcase_add_test(tc, test_chunks_answer_as_whole_resnet);
	tcase_add_test(tc, test_grown_chunk_by_chunk);
	tcase_add_test(tc, test_cycles_in_parts);
	tcase_add_test(tc, test_chunks_cut_in_parts);
	tcase_add_test(tc, test_chunks_cut_with_memory);
	tcase_add_test(tc, test_quiet_derivation);
	if (tu_postgres())	/* several servers share a PostgreSQL database only */
		tcase_add_test(tc, test_two_servers_one_run);
	suite_add_tcase(s, tc);
	return s;
}
