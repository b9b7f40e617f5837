/*
 * check_upload.c: the real server on loopback: every fixture uploaded with a
 * real HTTP client, the figures of shared/fixtures/README.md read back over
 * the API, idempotent retries, raw downloads, tokens, and a clean stop.
 */
#define _GNU_SOURCE	/* strcasestr */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	if (tu_server_start(&srv, NULL)) {
		fprintf(stderr, "cannot start %s\n", SERVER_BIN);
		abort();
	}
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

static uint8_t *fixture(const char *rel, size_t *len)
{
	char *path = tu_fixture(rel);
	uint8_t *b = tu_read_file(path, len);

	ck_assert_msg(b != NULL, "cannot read %s", path);
	free(path);
	return b;
}

/* POST a body; returns the parsed answer and sets *status. */
static json_t *upload(const char *run, const char *query, const void *data, size_t len, long *status)
{
	struct tu_resp r;
	char path[512];
	json_t *j;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?%s", run, query);
	ck_assert_int_eq(tu_http(&srv, "POST", path, data, len, NULL, &r), 0);
	*status = r.status;
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

static json_t *get(const char *path, long expect)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == expect, "GET %s: %ld, expected %ld: %s", path, r.status, expect, r.body);
	ck_assert_str_eq(r.content_type, "application/json");
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/*
 * nsteps: the entries of /steps (a trace without steps has one, the whole
 * trace: first_step -1); complete: the steps /runs counts (incomplete ones
 * left out); cpu_dur_ns: the ProfilerStep#N spans as written. The first
 * step lasts at least its span, unless first_dur_ns says otherwise: it starts
 * when the GPU work queued before it ends (analysis.c's queued(), as
 * torch-tb-profiler has it; tb_dump.py's steps_bounds give the figure).
 */
static const struct fx {
	const char *file;
	json_int_t events;
	int nsteps, complete;
	json_int_t first_step;
	json_int_t cpu_dur_ns[6];
	json_int_t first_dur_ns;
} fixtures[] = {
	{ "traces/hta_v100_train_memory.json.gz", 216092, 5, 5, 2,
	  { 345770000, 365256000, 346097000, 344269000, 336328000 }, 0 },
	{ "traces/kineto_resnet50_workers0.json.gz", 75718, 6, 6, 5,
	  { 176078000, 173992000, 176918000, 181259000, 176468000, 164261000 }, 0 },
	{ "traces/hta_nccl_rel_ts.json.gz", 40573, 3, 3, 4, { 222442191, 219726905, 224936243 }, 0 },
	{ "traces/hta_ns_resolution.json.gz", 68692, 5, 5, 101,
	  { 35115869, 72077474, 95697341, 95551087, 95699037 }, 0 },
	{ "traces/hta_alexnet.json.gz", 1408, 1, 0, -1, { 43425365000 }, 0 },
	/* #2, 49 us after a 9.3 ms step, launches nothing: incomplete */
	{ "traces/hta_amd_mi250.json.gz", 220, 2, 1, 1, { 9288291, 49073 }, 0 },
	/* HTA's cut-down traces: step 1009's own GPU work starts 100 ms on, at the end of what was queued */
	{ "traces/hta_compare_base.json.gz", 33, 2, 2, 1009, { 100298000, 122149000 }, 135000 },
	{ "traces/hta_compare_test.json.gz", 34, 2, 2, 1009, { 100298000, 122149000 }, 135000 },
	{ "traces/hta_cpu_only.json.gz", 30, 1, 1, 551, { 210109162 }, 0 },
	{ "traces/hta_event_sync.json.gz", 92, 1, 1, 100, { 3154000 }, 0 },
	{ "traces/hta_large_integer.json.gz", 2, 1, 0, -1, { 200000 }, 0 },
	{ "traces/hta_triton_tiny.json.gz", 71, 1, 1, 1, { 13336315805 }, 0 },
};

START_TEST(test_fixture_upload)
{
	const struct fx *f = &fixtures[_i];
	char run[64], path[128];
	size_t len;
	uint8_t *data = fixture(f->file, &len);
	json_t *j, *a, *steps;
	long status;
	json_int_t id;

	snprintf(run, sizeof(run), "fixture-%d", _i);
	j = upload(run, "rank=0&name=trace.json.gz", data, len, &status);
	ck_assert_msg(status == 201, "%s: %ld %s", f->file, status, json_dumps(j, 0));
	a = json_object_get(j, "artifact");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "trace");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), f->events);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), (json_int_t)len);
	ck_assert_uint_eq(strlen(json_string_value(json_object_get(a, "sha256"))), 64);
	id = json_integer_value(json_object_get(a, "id"));
	json_decref(j);

	/* the client got its answer: the data is queryable at once */
	snprintf(path, sizeof(path), "/api/v1/runs/%s/steps?rank=0", run);
	j = get(path, 200);
	steps = json_object_get(j, "steps");
	ck_assert_int_eq(json_array_size(steps), f->nsteps);
	for (int k = 0; k < f->nsteps; k++) {
		json_t *s = json_array_get(steps, (size_t)k);
		if (f->first_step < 0)
			ck_assert(json_is_null(json_object_get(s, "step")) && json_is_true(json_object_get(s, "whole_trace")));
		else
			ck_assert_int_eq(json_integer_value(json_object_get(s, "step")), f->first_step + k);
		ck_assert_int_eq(json_integer_value(json_object_get(s, "cpu_dur_ns")), f->cpu_dur_ns[k]);
		if (!k && f->first_dur_ns)
			ck_assert_int_eq(json_integer_value(json_object_get(s, "dur_ns")), f->first_dur_ns);
		else
			ck_assert_int_ge(json_integer_value(json_object_get(s, "dur_ns")), k ? 0 : f->cpu_dur_ns[k]);
		ck_assert(json_integer_value(json_object_get(s, "start_ns")) > (f->first_step < 0 ? 0 : 1600000000000000000LL));
	}
	json_decref(j);

	/* a retry of the same bytes is the same artifact */
	j = upload(run, "rank=0&name=trace.json.gz", data, len, &status);
	ck_assert_int_eq(status, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "artifact"), "id")), id);
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	j = get(path, 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "artifacts")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "run"), "steps")), f->complete);
	json_decref(j);
	free(data);
}
END_TEST

START_TEST(test_raw_round_trip)
{
	size_t zlen, len;
	uint8_t *z = fixture("traces/hta_alexnet.json.gz", &zlen), *plain = tu_gunzip(z, zlen, &len);
	struct tu_resp r;
	long status;
	json_int_t idz, idp;
	char path[128];
	json_t *j;

	j = upload("raw", "name=a.json.gz", z, zlen, &status);
	ck_assert_int_eq(status, 201);
	idz = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	json_decref(j);
	/* the same events, to a rank of their own (twice in one rank they would be refused: 409) */
	j = upload("raw", "name=a.json&rank=1", plain, len, &status);
	ck_assert_int_eq(status, 201);
	idp = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "artifact"), "events")), 1408);
	json_decref(j);

	/* the gzip upload comes back byte for byte */
	snprintf(path, sizeof(path), "/api/v1/runs/raw/artifacts/%lld/raw", (long long)idz);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, zlen);
	ck_assert(!memcmp(r.body, z, zlen));
	tu_resp_free(&r);
	/* the plain upload, stored as zstd frames, comes back plain... */
	snprintf(path, sizeof(path), "/api/v1/runs/raw/artifacts/%lld/raw", (long long)idp);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, len);
	ck_assert(!memcmp(r.body, plain, len));
	tu_resp_free(&r);
	/* ...to a client that takes gzip too (copies stored before 2026-11-29 are many gzip
	 * members, and curl, among others, would read only the first of a Content-Encoding: gzip) */
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, "Accept-Encoding: gzip", &r), 0);
	ck_assert_str_eq(r.content_encoding, "");
	ck_assert_uint_eq(r.len, len);
	ck_assert(!memcmp(r.body, plain, len));
	tu_resp_free(&r);
	/* a gzip of two members and a blank after them, sent with Content-Encoding: gzip, is kept as
	 * sent; a client that does not take gzip gets both members' bytes */
	{
		static const char doc[] = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"two\", \"ts\": 1,"
					  " \"dur\": 2, \"pid\": 1, \"tid\": 1}]}";
		size_t n = sizeof(doc) - 1, h = n / 2, z1, z2;
		uint8_t *g1 = tu_gzip(doc, h, &z1), *g2 = tu_gzip(doc + h, n - h, &z2);
		uint8_t *two = malloc(z1 + z2 + 1);
		memcpy(two, g1, z1);
		memcpy(two + z1, g2, z2);
		two[z1 + z2] = '\n';
		ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/raw/artifacts?name=two.json&rank=2", two,
					 z1 + z2 + 1, "Content-Encoding: gzip", &r), 0);
		ck_assert_int_eq(r.status, 201);
		j = json_loadb(r.body, r.len, 0, NULL);
		snprintf(path, sizeof(path), "/api/v1/runs/raw/artifacts/%" JSON_INTEGER_FORMAT "/raw",
			 json_integer_value(json_object_get(json_object_get(j, "artifact"), "id")));
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "artifact"), "events")), 1);
		json_decref(j);
		tu_resp_free(&r);
		ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		ck_assert_uint_eq(r.len, n);
		ck_assert(!memcmp(r.body, doc, n));
		tu_resp_free(&r);
		free(g1);
		free(g2);
		free(two);
	}
	/* a plain body of many frames over more than one stored row (names that do not compress
	 * well: 1 MiB rows of 256 KiB frames) comes back byte for byte */
	{
		size_t cap = 6u << 20, n = 0;
		char *big = malloc(cap);
		uint64_t x = 88172645463325252ull;
		n += (size_t)sprintf(big + n, "{\"traceEvents\": [");
		for (int i = 0; n < cap - 256; i++) {
			unsigned long long h[3];
			for (int k = 0; k < 3; k++)
				x ^= x << 13, x ^= x >> 7, x ^= x << 17, h[k] = x;
			n += (size_t)sprintf(big + n, "%s{\"ph\": \"X\", \"name\": \"op_%016llx%016llx%016llx\","
					     " \"ts\": %d, \"dur\": 1, \"pid\": 1, \"tid\": 1}", i ? ", " : "",
					     h[0], h[1], h[2], 2 * i);
		}
		n += (size_t)sprintf(big + n, "]}");
		ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/raw/artifacts?name=big.json&rank=3", big, n,
					 NULL, &r), 0);
		ck_assert_int_eq(r.status, 201);
		j = json_loadb(r.body, r.len, 0, NULL);
		snprintf(path, sizeof(path), "/api/v1/runs/raw/artifacts/%" JSON_INTEGER_FORMAT "/raw",
			 json_integer_value(json_object_get(json_object_get(j, "artifact"), "id")));
		json_decref(j);
		tu_resp_free(&r);
		ck_assert_int_gt(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM raw_chunks r JOIN artifacts a"
					  " ON r.key>>32=a.id WHERE a.name='big.json' AND a.raw_encoding='zstd-frames'"), 1);
		ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		ck_assert_uint_eq(r.len, n);
		ck_assert(!memcmp(r.body, big, n));
		tu_resp_free(&r);
		free(big);
	}
	/* the artifact itself */
	snprintf(path, sizeof(path), "/api/v1/runs/raw/artifacts/%lld", (long long)idp);
	j = get(path, 200);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "artifact"), "name")), "a.json");
	json_decref(j);
	j = get("/api/v1/runs/raw/artifacts/999999/raw", 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	j = get("/api/v1/runs/raw/artifacts/999999", 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	free(plain);
	free(z);
}
END_TEST

START_TEST(test_runs_list_and_gzip_answers)
{
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	long status;
	json_t *j, *runs, *run = NULL;
	size_t i;

	json_decref(upload("listed", "name=v.json.gz", data, len, &status));
	ck_assert_int_eq(status, 201);
	j = get("/api/v1/runs", 200);
	runs = json_object_get(j, "runs");
	for (i = 0; i < json_array_size(runs); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(runs, i), "name")), "listed"))
			run = json_array_get(runs, i);
	ck_assert_ptr_nonnull(run);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "steps")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "peak_allocated_bytes")), 6629508096LL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(run, "step_time_ns"), "mean")),
			 347544000);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "ranks")), 1);
	json_decref(j);
	/* rank 1 came from the trace's distributedInfo; steps without ?rank= find it */
	j = get("/api/v1/runs/listed/steps", 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "rank")), 1);
	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), 5);
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs", NULL, 0, "Accept-Encoding: gzip", &r), 0);
	ck_assert_str_eq(r.content_encoding, "gzip");
	ck_assert_ptr_nonnull(strstr(r.headers, "Content-Security-Policy: default-src 'none'"));
	ck_assert_ptr_nonnull(strstr(r.headers, "X-Content-Type-Options: nosniff"));
	ck_assert_ptr_null(strcasestr(r.headers, "Access-Control-Allow-Origin"));
	tu_resp_free(&r);
	j = get("/healthz", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ok");
	json_decref(j);
	free(data);
}
END_TEST

/* ---- PATCH a run ---- */

static json_t *patch(const char *run, const char *body, long expect)
{
	struct tu_resp r;
	char path[128];
	json_t *j;

	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	ck_assert_int_eq(tu_http(&srv, "PATCH", path, body, strlen(body), NULL, &r), 0);
	ck_assert_msg(r.status == expect, "PATCH %s %s: %ld %s", path, body, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

START_TEST(test_patch_run)
{
	const char trace[] = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"cat\":\"user_annotation\",\"ts\":1,\"dur\":5}]";
	const char trace2[] = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"cat\":\"user_annotation\",\"ts\":1,\"dur\":6}]";
	char big[70000];
	long status;
	json_t *j, *run, *meta;

	json_decref(upload("patched", "name=a.json", trace, strlen(trace), &status));
	ck_assert_int_eq(status, 201);
	json_decref(upload("patched2", "name=a.json", trace2, strlen(trace2), &status));
	ck_assert_int_eq(status, 201);

	j = patch("patched", "{\"project\":\"resnet\",\"tags\":[\"bs64\",\"amp\"],"
			     "\"metadata\":{\"param_bytes\":102440608,\"x\":{\"y\":1,\"z\":2}}}", 200);
	run = json_object_get(j, "run");
	ck_assert_str_eq(json_string_value(json_object_get(run, "project")), "resnet");
	ck_assert_int_eq(json_array_size(json_object_get(run, "tags")), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(run, "metadata"), "param_bytes")),
			 102440608);
	json_decref(j);
	/* metadata is a merge patch: null deletes, objects merge, the rest stays */
	j = patch("patched", "{\"metadata\":{\"x\":{\"z\":null},\"w\":true}}", 200);
	meta = json_object_get(json_object_get(j, "run"), "metadata");
	ck_assert_int_eq(json_integer_value(json_object_get(meta, "param_bytes")), 102440608);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(meta, "x"), "y")), 1);
	ck_assert_ptr_null(json_object_get(json_object_get(meta, "x"), "z"));
	ck_assert(json_is_true(json_object_get(meta, "w")));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "run"), "project")), "resnet");
	json_decref(j);
	/* one baseline per project */
	json_decref(patch("patched2", "{\"project\":\"resnet\"}", 200));
	j = patch("patched", "{\"baseline\":true}", 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "baseline")));
	json_decref(j);
	json_decref(patch("patched2", "{\"baseline\":true}", 200));
	j = get("/api/v1/runs/patched", 200);
	ck_assert(json_is_false(json_object_get(json_object_get(j, "run"), "baseline")));
	json_decref(j);
	/* clearing the project */
	j = patch("patched", "{\"project\":null}", 200);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "run"), "project")));
	json_decref(j);
	/* refusals, each leaving the run as it was */
	j = patch("patched", "{\"owner\":\"me\"}", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_field");
	json_decref(j);
	j = patch("patched", "{\"tags\":\"a\"}", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_field");
	json_decref(j);
	j = patch("patched", "{\"baseline\":1}", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_field");
	json_decref(j);
	j = patch("patched", "[1]", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_field");
	json_decref(j);
	j = patch("patched", "{\"project\":", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_json");
	json_decref(j);
	j = patch("patched", "", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_json");
	json_decref(j);
	j = patch("no-such-run", "{\"project\":\"p\"}", 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	memset(big, ' ', sizeof(big) - 3);
	strcpy(big + sizeof(big) - 3, "{}");
	j = patch("patched", big, 413);
	ck_assert_str_eq(tu_error_code(j), "body_too_large");
	json_decref(j);
	/* each PATCH fits, but their merge is capped too: 18 MB after 300 PATCHes before */
	for (int i = 0; i < 4; i++) {
		int n = snprintf(big, sizeof(big), "{\"metadata\":{\"k%d\":\"", i);
		memset(big + n, 'v', 20000);
		strcpy(big + n + 20000, "\"}}");
		j = patch("patched", big, i < 3 ? 200 : 413);
		if (i == 3)
			ck_assert_str_eq(tu_error_code(j), "metadata_too_large");
		json_decref(j);
	}
	j = get("/api/v1/runs/patched", 200);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "run"), "project")));
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "run"), "tags")), 2);
	meta = json_object_get(json_object_get(j, "run"), "metadata");
	ck_assert_ptr_nonnull(json_object_get(meta, "k2"));
	ck_assert_ptr_null(json_object_get(meta, "k3"));
	json_decref(j);
	/* a patch that deletes keys makes room again */
	json_decref(patch("patched", "{\"metadata\":{\"k0\":null,\"k1\":null}}", 200));
}
END_TEST

/* ---- metrics ---- */

/* The value of the exposition line that starts with `series` followed by a space, or -1. */
static double metric(const char *text, const char *series)
{
	size_t n = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return atof(p + n + 1);
		p += n;
	}
	return -1;
}


START_TEST(test_metrics)
{
	struct tu_resp r;

	ck_assert_int_eq(tu_http(&srv, "GET", "/no/such/route", NULL, 0, NULL, &r), 0);
	tu_resp_free(&r);
	/* a request is counted when libmicrohttpd says it completed, which may be just after its
	 * client has the answer: wait (up to 5 s) for the 404 to show */
	for (int i = 0;; i++) {
		ck_assert_int_eq(tu_http(&srv, "GET", "/metrics", NULL, 0, NULL, &r), 0);
		if (i == 50 || metric(r.body, "trainscope_http_requests_total{route=\"- unmatched\",status=\"404\"}") >= 1)
			break;
		tu_resp_free(&r);
		usleep(100 * 1000);
	}
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.content_type, "text/plain; version=0.0.4");
	/* the fixture uploads before this test: 12 new artifacts and their 12 retries, and more */
	ck_assert(metric(r.body, "trainscope_http_requests_total{route=\"POST /api/v1/runs/{run}/artifacts\","
				 "status=\"201\"}") >= 12);
	ck_assert(metric(r.body, "trainscope_http_requests_total{route=\"POST /api/v1/runs/{run}/artifacts\","
				 "status=\"200\"}") >= 12);
	ck_assert(metric(r.body, "trainscope_http_requests_total{route=\"- unmatched\",status=\"404\"}") >= 1);
	ck_assert(metric(r.body, "trainscope_upload_bytes_total") >= 5e6);
	ck_assert(metric(r.body, "trainscope_upload_seconds_count") >= 24);
	ck_assert(metric(r.body, "trainscope_upload_seconds_sum") > 0);
	ck_assert(metric(r.body, "trainscope_artifacts{status=\"ready\"}") >= 12);
	ck_assert(metric(r.body, "trainscope_artifacts{status=\"ingesting\"}") == 0);
	ck_assert(metric(r.body, "trainscope_runs") >= 12);
	ck_assert(metric(r.body, "trainscope_database_bytes") > 1e6);
	tu_resp_free(&r);
}
END_TEST

/*
 * What uploads free goes back to the system once they pause (http.c: trim_after), not while
 * they go on: a fresh server takes 17 MiB (blank space inside a trace), then for two seconds an
 * upload as soon as the last is answered, and counts no trim; within ten seconds of the last
 * one, /metrics counts one.
 */
static double trims_of(const struct tu_server *s)
{
	struct tu_resp r;
	double n;

	ck_assert_int_eq(tu_http(s, "GET", "/metrics", NULL, 0, NULL, &r), 0);
	n = metric(r.body, "trainscope_heap_trims_total");
	tu_resp_free(&r);
	return n;
}

START_TEST(test_heap_given_back_when_uploads_pause)
{
	static const char head[] = "{\"traceEvents\": [", tail[] = "]}", small[] = "{\"traceEvents\": []}";
	size_t n = 17u << 20;
	char *body = malloc(n);
	struct tu_server s;
	struct tu_resp r;
	struct timespec t0, t;
	double trims = -1;

	ck_assert_ptr_nonnull(body);
	memset(body, ' ', n);
	memcpy(body, head, strlen(head));
	memcpy(body + n - strlen(tail), tail, strlen(tail));
	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/blank/artifacts?name=blank.json", body, n, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/blank/artifacts?name=small.json", small,
					 strlen(small), NULL, &r), 0);
		ck_assert(r.status == 201 || r.status == 200);
		tu_resp_free(&r);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 2);
	ck_assert(trims_of(&s) == 0);
	for (int i = 0; i < 100 && trims < 1; i++) {
		usleep(100 * 1000);
		trims = trims_of(&s);
	}
	ck_assert(trims == 1);
	tu_server_cleanup(&s);
	free(body);
}
END_TEST

/*
 * The write-ahead log is folded back into the database file by the store's
 * own thread (store.c: fold_main), not by the commits of the upload that
 * filled it: 40,000 spans with names of 512 random characters put some
 * 40 MB in the log, past the 16 MiB that starts a fold. Without the
 * writers' hook (db_wal_kick), SQLite folds inline and the count stays 0.
 */
START_TEST(test_wal_folded_by_its_own_thread)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";
	size_t cap = 24u << 20, len = 0;
	char *body = malloc(cap);
	uint64_t x = 88172645463325252ull;
	struct tu_server s;
	struct tu_resp r;
	double folds = 0;

	ck_assert_ptr_nonnull(body);
	len += (size_t)sprintf(body + len, "{\"traceEvents\": [");
	for (int i = 0; i < 40000; i++) {
		len += (size_t)sprintf(body + len, "%s{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%d,\"dur\":1,\"name\":\"",
				       i ? "," : "", 2 * i);
		for (int k = 0; k < 512; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			body[len++] = alpha[x & 63];
		}
		body[len++] = '"';
		body[len++] = '}';
	}
	len += (size_t)sprintf(body + len, "]}");
	ck_assert_uint_lt(len, cap);
	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/wide/artifacts?name=wide.json", body, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	for (int i = 0; i < 100 && folds < 1; i++) {
		ck_assert_int_eq(tu_http(&s, "GET", "/metrics", NULL, 0, NULL, &r), 0);
		folds = metric(r.body, "trainscope_wal_folds_total");
		tu_resp_free(&r);
		if (folds < 1)
			usleep(50 * 1000);
	}
	ck_assert(folds >= 1);
	tu_server_cleanup(&s);
	free(body);
}
END_TEST

/* ---- tokens ---- */

static long status_of(const struct tu_server *s, const char *method, const char *path, const char *body,
		      const char *header)
{
	struct tu_resp r;
	long st;

	ck_assert_int_eq(tu_http(s, method, path, body, body ? strlen(body) : 0, header, &r), 0);
	st = r.status;
	if (st == 401) {
		json_t *j = tu_json(&r);
		ck_assert_str_eq(tu_error_code(j), "unauthorized");
		json_decref(j);
	}
	tu_resp_free(&r);
	return st;
}

START_TEST(test_tokens)
{
	struct tu_server s;
	char tokfile[600];
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
	const char *w = "Authorization: Bearer secret-token-0123456789";
	const char *rd = "Authorization: Bearer reader-token-0123456789";
	char *dir = tu_tmpdir();
	const char file[] = "# team tokens\nsecret-token-0123456789\n";
	const char file2[] = "secret-token-0123456789\nread reader-token-0123456789\n";

	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	/* write tokens only: writes need one, reads stay open */
	ck_assert_int_eq(tu_write_file(tokfile, file, strlen(file)), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, NULL), 401);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body,
				   "Authorization: Bearer secret-token-012345678X"), 401);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, "Authorization: Bearer "), 401);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, w), 201);
	ck_assert_int_eq(status_of(&s, "PATCH", "/api/v1/runs/t", "{\"tags\":[\"x\"]}", NULL), 401);
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs/t", NULL, NULL), 200);
	tu_server_stop(&s);
	/* and a read token: reads need a token too, and a read token cannot write */
	ck_assert_int_eq(tu_write_file(tokfile, file2, strlen(file2)), 0);
	ck_assert_int_eq(tu_server_restart(&s, extra), 0);
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs/t", NULL, NULL), 401);
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs/t", NULL, rd), 200);
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs", NULL, w), 200);
	ck_assert_int_eq(status_of(&s, "GET", "/metrics", NULL, NULL), 401);
	ck_assert_int_eq(status_of(&s, "GET", "/healthz", NULL, NULL), 200);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, rd), 403);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, w), 200);
	tu_server_cleanup(&s);
	/* a token file with no write token does not start */
	ck_assert_int_eq(tu_write_file(tokfile, "read reader-token-0123456789\n", 29), 0);
	ck_assert_int_ne(tu_server_start(&s, extra), 0);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/*
 * The server started with a token file from tests/hostile/: its exit status,
 * and what it wrote (stdout and stderr) in out.
 */
static int server_with_tokens(const char *hostile, char *out, size_t cap)
{
	char *tok = tu_source_path(hostile), *dir = tu_tmpdir(), cmd[2048];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "timeout 20 '%s' --listen 127.0.0.1:0 --db '%s/t.db' --token-file '%s' 2>&1 </dev/null",
		 SERVER_BIN, dir, tok);
	ck_assert_ptr_nonnull(p = popen(cmd, "r"));
	while (n + 1 < cap && fgets(out + n, (int)(cap - n), p))
		n += strlen(out + n);
	out[n] = 0;
	st = pclose(p);
	tu_rmtree(dir);
	free(dir);
	free(tok);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A flag's value that is no size (negative, 0 where a size must be one, text) stops the server at start, naming it. */
START_TEST(test_bad_flag_values)
{
	static const char *const bad[][2] = {
		{ "--derive-keep", "-1" }, { "--derive-keep", "x" }, { "--max-body", "-5" }, { "--max-body", "0" },
		{ "--spill-at", "-7" }, { "--max-inflated", "1Q" }, { "--derive-quiet", "-1" }, { "--derive-quiet", "2s" },
		{ "--derive-quiet", "86401" }, { "--derive-parts", "1" }, { "--derive-parts", "yes" },
		{ "--derive-split", "-1" }, { "--derive-split", "on" },
	};
	char *dir = tu_tmpdir(), cmd[2048], out[1024], want[128];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = 0;
		snprintf(cmd, sizeof(cmd), "timeout 20 '%s' --listen 127.0.0.1:0 --db '%s/t.db' %s '%s' 2>&1 </dev/null",
			 SERVER_BIN, dir, bad[i][0], bad[i][1]);
		FILE *p = popen(cmd, "r");
		ck_assert_ptr_nonnull(p);
		while (n + 1 < sizeof(out) && fgets(out + n, (int)(sizeof(out) - n), p))
			n += strlen(out + n);
		out[n] = 0;
		int st = pclose(p);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 124, "%s %s: %d %s",
			      bad[i][0], bad[i][1], st, out);
		snprintf(want, sizeof(want), "bad value '%s' for %s", bad[i][1], bad[i][0]);
		ck_assert_msg(strstr(out, want), "%s", out);
	}
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/*
 * A token file line that does not fit is refused, naming it: read in 512-byte
 * pieces, a 600-character read line's last 94 characters were a write token.
 */
START_TEST(test_token_file_limits)
{
	struct tu_server s;
	char out[4096], tokfile[600], line[600];
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
	char *dir = tu_tmpdir();

	ck_assert_int_ne(server_with_tokens("tests/hostile/tokens/tokens_long_read_line.txt", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "line 2 is longer than 512 characters"), "%s", out);
	ck_assert_int_ne(server_with_tokens("tests/hostile/tokens/tokens_nul.txt", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "line 2 holds a NUL byte"), "%s", out);
	ck_assert_int_ne(server_with_tokens("tests/hostile/tokens/tokens_33.txt", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "line 33: at most 32 tokens"), "%s", out);
	/* a line of exactly 512 characters is whole: its read token reads and cannot write */
	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	memset(line, 'r', sizeof(line));
	memcpy(line, "secret-token-0123456789\nread ", 29);
	line[24 + 512] = '\n';
	ck_assert_int_eq(tu_write_file(tokfile, line, 24 + 513), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	memcpy(line, "Authorization: Bearer ", 22);
	memset(line + 22, 'r', 507);
	line[22 + 507] = 0;
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs", NULL, line), 200);
	ck_assert_int_eq(status_of(&s, "POST", "/api/v1/runs/t/artifacts", body, line), 403);
	line[22 + 506] = 0;
	ck_assert_int_eq(status_of(&s, "GET", "/api/v1/runs", NULL, line), 401);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- slow clients, connections per address ---- */

static void run_absent(const struct tu_server *s, const char *run);

/* A connection from a loopback address of our choosing (127.0.0.N) to the server. */
static int connect_from(const struct tu_server *s, const char *from)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
	struct sockaddr_in b = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	inet_pton(AF_INET, from, &b.sin_addr);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&b, sizeof(b)), 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Send a GET of /healthz on fd; 1 when it is answered 200. */
static int healthz_on(int fd)
{
	const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	char buf[512];
	ssize_t n;

	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return strstr(buf, "HTTP/1.1 200") == buf;
}

/* Seconds until the server closes fd while we send one byte of `text` every 200 ms (or 30 s). */
static double trickle(int fd, const char *text)
{
	struct timespec t0, t1;
	char c;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0;; i++) {
		struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 };
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > 30)
			break;
		if (select(fd + 1, &rd, NULL, NULL, &tv) > 0 && read(fd, &c, 1) <= 0)
			break;	/* closed (or answered and closed) */
		if (send(fd, text + i % strlen(text), 1, MSG_NOSIGNAL) < 0)
			break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
}

/*
 * One address cannot hold every connection (520 idle ones blocked every
 * other client), and a client trickling a byte at a time, never idle, is
 * closed once its headers or its body take longer than --timeout.
 */
START_TEST(test_slow_clients_and_connections_per_address)
{
	struct tu_server s;
	const char *extra[] = { "--max-client-connections", "4", "--timeout", "2", NULL };
	int fds[8], fd, open_ok = 0;
	double secs;

	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	for (int i = 0; i < 8; i++)
		fds[i] = connect_from(&s, "127.0.0.1");
	usleep(300 * 1000);
	/* past the 4th, each is closed at once; the first 4 stay open */
	for (int i = 0; i < 8; i++) {
		char c;
		struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
		fd_set rd;
		FD_ZERO(&rd);
		FD_SET(fds[i], &rd);
		if (!(select(fds[i] + 1, &rd, NULL, NULL, &tv) > 0 && read(fds[i], &c, 1) <= 0))
			open_ok++;
	}
	ck_assert_int_eq(open_ok, 4);
	/* another address is served meanwhile */
	fd = connect_from(&s, "127.0.0.2");
	ck_assert(healthz_on(fd));
	close(fd);
	for (int i = 0; i < 8; i++)
		close(fds[i]);
	usleep(300 * 1000);
	/* request headers a byte at a time: closed after about --timeout, not served forever */
	fd = connect_from(&s, "127.0.0.3");
	secs = trickle(fd, "GET /healthz HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	close(fd);
	ck_assert_msg(secs >= 1.5 && secs < 10, "slow headers closed after %.1f s", secs);
	/* a body a byte at a time, likewise; nothing of it is kept */
	fd = connect_from(&s, "127.0.0.3");
	{
		const char head[] = "POST /api/v1/runs/slow/artifacts?name=s.json HTTP/1.1\r\nHost: x\r\n"
				    "Content-Length: 100000\r\n\r\n";
		ck_assert_int_eq(write(fd, head, sizeof(head) - 1), (ssize_t)(sizeof(head) - 1));
	}
	secs = trickle(fd, "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1},");
	close(fd);
	ck_assert_msg(secs >= 1.5 && secs < 10, "slow body closed after %.1f s", secs);
	/* and a normal client is served on as before */
	fd = connect_from(&s, "127.0.0.3");
	ck_assert(healthz_on(fd));
	close(fd);
	run_absent(&s, "slow");
	tu_server_cleanup(&s);
}
END_TEST

/* ---- stop and restart ---- */

START_TEST(test_clean_stop_and_restart)
{
	struct tu_server s;
	size_t len;
	uint8_t *data = fixture("traces/kineto_resnet50_workers0.json.gz", &len);
	struct tu_resp r;
	char wal[600];

	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/keep/artifacts?name=r.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_server_stop(&s), 0);
	/* the WAL was folded back: the database is one clean file at rest */
	snprintf(wal, sizeof(wal), "%s-wal", s.db);
	ck_assert(access(wal, F_OK) != 0 || tu_read_file(wal, &len) == NULL || len == 0);
	ck_assert(tu_db_integrity_ok(s.db));
	ck_assert_int_eq(tu_server_restart(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/keep/steps", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"cpu_dur_ns\":176078000"));
	tu_resp_free(&r);
	tu_server_cleanup(&s);
	free(data);
}
END_TEST

/* SIGTERM while an upload is in flight: the upload finishes, then the server exits 0. */
START_TEST(test_stop_waits_for_in_flight_upload)
{
	struct tu_server s;
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	pid_t child;
	int status;

	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	child = fork();
	if (child == 0) {
		/* signal once the upload below is under way: its artifact exists, still ingesting */
		for (int i = 0; i < 2000; i++) {
			struct tu_resp m;
			double ingesting = -1;
			if (tu_http(&s, "GET", "/metrics", NULL, 0, NULL, &m) == 0) {
				ingesting = metric(m.body, "trainscope_artifacts{status=\"ingesting\"}");
				tu_resp_free(&m);
			}
			if (ingesting >= 1)
				break;
			usleep(5 * 1000);
		}
		kill(s.pid, SIGTERM);
		_exit(0);
	}
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/inflight/artifacts?name=v.json.gz", data, len,
				 NULL, &r), 0);
	waitpid(child, &status, 0);
	ck_assert_int_eq(r.status, 201);
	ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"ready\""));
	tu_resp_free(&r);
	ck_assert_int_eq(waitpid(s.pid, &status, 0), s.pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	s.pid = 0;
	ck_assert(tu_db_integrity_ok(s.db));
	tu_server_cleanup(&s);
	free(data);
}
END_TEST

/* ---- interrupted uploads ---- */

/* Open a raw connection and send the head of an upload that promises `total` bytes, then `sent` of them. */
static int partial_upload(const struct tu_server *s, const char *run, size_t total, const uint8_t *body,
			  size_t sent)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
	char head[256];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	snprintf(head, sizeof(head),
		 "POST /api/v1/runs/%s/artifacts?name=cut.json.gz HTTP/1.1\r\nHost: x\r\n"
		 "Content-Length: %zu\r\n\r\n", run, total);
	ck_assert_int_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
	ck_assert_int_eq(write(fd, body, sent), (ssize_t)sent);
	return fd;
}

/* Wait (up to 60 s) until the server has exactly n artifacts ingesting. */
static int wait_ingesting_on(const struct tu_server *s, double n)
{
	for (int i = 0; i < 240; i++) {
		struct tu_resp r;
		double v;
		ck_assert_int_eq(tu_http(s, "GET", "/metrics", NULL, 0, NULL, &r), 0);
		v = metric(r.body, "trainscope_artifacts{status=\"ingesting\"}");
		tu_resp_free(&r);
		if (v == n)
			return 1;
		usleep(250 * 1000);
	}
	return 0;
}

static int wait_ingesting(double n)
{
	return wait_ingesting_on(&srv, n);
}

static void run_absent(const struct tu_server *s, const char *run)
{
	struct tu_resp r;
	char path[128];

	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	ck_assert_int_eq(tu_http(s, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 404, "%s: %ld %s", path, r.status, r.body);
	tu_resp_free(&r);
}

START_TEST(test_client_gone_mid_body_keeps_nothing)
{
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	int fd = partial_upload(&srv, "cut", len, data, len / 2);

	ck_assert_msg(wait_ingesting(1), "the upload never started");
	close(fd);
	run_absent(&srv, "cut");	/* never visible */
	/* and once the server has noticed (it finishes the bytes it has first), removed */
	ck_assert_msg(wait_ingesting(0), "the interrupted upload is still there after 60 s");
	run_absent(&srv, "cut");
	free(data);
}
END_TEST

/* One address holds at most --max-client-uploads uploads at once; the next gets 429 until one ends. */
START_TEST(test_uploads_per_client_bounded)
{
	static const char *const extra[] = { "--max-client-uploads", "1", NULL };
	static const char small[] = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2}]}";
	struct tu_server s;
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	json_t *j;
	int fd;

	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	fd = partial_upload(&s, "slow", len, data, 4096);
	ck_assert_msg(wait_ingesting_on(&s, 1), "the slow upload never started");
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/second/artifacts?name=a.json", small, strlen(small), NULL,
				 &r), 0);
	ck_assert_msg(r.status == 429, "%ld %s", r.status, r.body);
	j = tu_json(&r);
	ck_assert_str_eq(tu_error_code(j), "too_many_uploads");
	json_decref(j);
	tu_resp_free(&r);
	/* reads go on meanwhile */
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	close(fd);
	ck_assert_msg(wait_ingesting_on(&s, 0), "the cut upload is still there");
	/* its slot is given back when libmicrohttpd reports the request done, just after the artifact goes */
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/second/artifacts?name=a.json", small, strlen(small),
					 NULL, &r), 0);
		if (r.status != 429)
			break;
		tu_resp_free(&r);
		usleep(100 * 1000);
	}
	ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_server_stop(&s), 0);
	tu_server_cleanup(&s);
	free(data);
}
END_TEST

START_TEST(test_kill_9_mid_upload_then_restart)
{
	struct tu_server s;
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	int fd, status;

	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/before/artifacts?name=v.json.gz", data, len, NULL,
				 &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	fd = partial_upload(&s, "cut", len, data, len / 2);
	usleep(300 * 1000);
	kill(s.pid, SIGKILL);
	waitpid(s.pid, &status, 0);
	s.pid = 0;
	close(fd);
	ck_assert(tu_db_integrity_ok(s.db));
	ck_assert_int_eq(tu_server_restart(&s, NULL), 0);
	run_absent(&s, "cut");
	/* the acknowledged upload is whole, and a retry of the cut one succeeds once */
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/before/steps", NULL, 0, NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(r.body, "\"dur_ns\":345770000"));
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/cut/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/cut/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	tu_server_cleanup(&s);
	free(data);
}
END_TEST

/* ---- concurrent uploads ---- */

struct up_arg {
	const char *file, *run;
	long status;
	json_int_t events;
};

static void *upload_thread(void *p)
{
	struct up_arg *a = p;
	char path[256], *fx = tu_fixture(a->file);
	size_t len;
	uint8_t *data = tu_read_file(fx, &len);
	struct tu_resp r = { 0 };

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=f.json.gz", a->run);
	/*
	 * five at once from one address: past --max-client-uploads (4) the server
	 * says 429 and closes; retry. A 429 that lands while the body is still
	 * being sent reaches the client as a reset connection (seen on a loaded
	 * machine), so a transport error is retried too, as the collector does.
	 */
	for (int i = 0; data && i < 600; i++) {
		if (!tu_http(&srv, "POST", path, data, len, NULL, &r) && r.status != 429)
			break;
		tu_resp_free(&r);
		r.status = 0;
		usleep(100 * 1000);
	}
	if (r.status) {
		json_t *j = json_loadb(r.body, r.len, 0, NULL);
		a->status = r.status;
		a->events = json_integer_value(json_object_get(json_object_get(j, "artifact"), "events"));
		json_decref(j);
		tu_resp_free(&r);
	}
	free(data);
	free(fx);
	return NULL;
}

START_TEST(test_concurrent_uploads)
{
	struct up_arg args[] = {
		{ "traces/hta_v100_train_memory.json.gz", "par", 0, 0 },
		{ "traces/kineto_resnet50_workers0.json.gz", "par", 0, 0 },
		{ "traces/hta_nccl_rel_ts.json.gz", "par2", 0, 0 },
		{ "traces/hta_ns_resolution.json.gz", "par2", 0, 0 },
		{ "traces/hta_alexnet.json.gz", "par3", 0, 0 },
	};
	static const json_int_t events[] = { 216092, 75718, 40573, 68692, 1408 };
	pthread_t t[5];
	size_t i;

	for (i = 0; i < 5; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, upload_thread, &args[i]), 0);
	for (i = 0; i < 5; i++)
		pthread_join(t[i], NULL);
	for (i = 0; i < 5; i++) {
		ck_assert_msg(args[i].status == 201, "%s: %ld", args[i].file, args[i].status);
		ck_assert_int_eq(args[i].events, events[i]);
	}
	json_t *j = get("/api/v1/runs/par", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "artifacts")), 2);
	json_decref(j);
}
END_TEST

/*
 * Two servers on one PostgreSQL: one is killed mid-upload; the other never
 * shows the cut upload, drops it once the dead server has been silent for
 * TRAINSCOPE_DEAD_AFTER, and takes the retry.
 */
START_TEST(test_two_servers_kill_9_mid_upload)
{
	struct tu_server a, b;
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	long long raw;
	int fd, status;

	setenv("TRAINSCOPE_DEAD_AFTER", "2", 1);
	ck_assert_int_eq(tu_server_start(&a, NULL), 0);
	ck_assert_int_eq(tu_server_start_on(&b, a.db, NULL), 0);
	unsetenv("TRAINSCOPE_DEAD_AFTER");
	/* acknowledged through a, read through b at once */
	ck_assert_int_eq(tu_http(&a, "POST", "/api/v1/runs/before/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&b, "GET", "/api/v1/runs/before/steps", NULL, 0, NULL, &r), 0);
	ck_assert_ptr_nonnull(strstr(r.body, "\"dur_ns\":345770000"));
	tu_resp_free(&r);
	raw = tu_db_scalar(a.db, "SELECT COUNT(*) FROM raw_chunks");
	fd = partial_upload(&a, "cut", len, data, len / 2);
	ck_assert_msg(wait_ingesting_on(&b, 1), "b never saw a's upload begin");
	run_absent(&b, "cut");
	kill(a.pid, SIGKILL);
	waitpid(a.pid, &status, 0);
	a.pid = 0;
	close(fd);
	ck_assert_msg(wait_ingesting_on(&b, 0), "b never dropped the dead server's upload");
	run_absent(&b, "cut");
	ck_assert_int_eq(tu_db_scalar(b.db, "SELECT COUNT(*) FROM raw_chunks"), raw);
	ck_assert_int_eq(tu_http(&b, "POST", "/api/v1/runs/cut/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	tu_server_cleanup(&b);
	tu_server_cleanup(&a);
	free(data);
}
END_TEST

static int wait_status(const struct tu_server *s, const char *path, long status);

struct starter {
	struct tu_server *s;
	int rc, hold[2];
};

/* Start a server, then stay until told (a child is sent SIGTERM when the thread that forked it ends). */
static void *start_b(void *arg)
{
	struct starter *st = arg;
	char c;

	st->rc = tu_server_restart(st->s, NULL);
	while (read(st->hold[0], &c, 1) < 0)
		;
	return NULL;
}

/* Two servers started at once on an empty database: one applies each migration, both serve. */
START_TEST(test_two_servers_start_together)
{
	struct tu_server a, b;
	struct starter sb = { .s = &b };
	pthread_t t;
	int ra;

	ck_assert_int_eq(tu_server_prepare(&a), 0);
	memset(&b, 0, sizeof(b));
	b.dir = tu_tmpdir();
	snprintf(b.db, sizeof(b.db), "%s", a.db);
	ck_assert_int_eq(pipe(sb.hold), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, start_b, &sb), 0);
	ra = tu_server_restart(&a, NULL);
	while (!b.port && !sb.rc)	/* b's start, seen from here */
		usleep(10 * 1000);
	ck_assert_int_eq(ra, 0);
	ck_assert_int_eq(sb.rc, 0);
	ck_assert_int_eq(tu_db_scalar(a.db, "SELECT COUNT(*) FROM schema_version"),
			 tu_db_scalar(a.db, "SELECT COUNT(DISTINCT version) FROM schema_version"));
	ck_assert_int_eq(tu_db_scalar(a.db, "SELECT COUNT(*) FROM schema_version"),
			 tu_db_scalar(a.db, "SELECT MAX(version) FROM schema_version"));
	ck_assert_int_ge(tu_db_scalar(a.db, "SELECT MAX(version) FROM schema_version"), 13);
	ck_assert(wait_status(&a, "/healthz", 200));
	ck_assert(wait_status(&b, "/healthz", 200));
	tu_server_cleanup(&b);
	ck_assert_int_eq(write(sb.hold[1], "x", 1), 1);
	pthread_join(t, NULL);
	close(sb.hold[0]);
	close(sb.hold[1]);
	tu_server_cleanup(&a);
}
END_TEST

/* scripts/pg.sh stop|start on the suite's cluster */
static void pg_ctl(const char *what)
{
	char *script = tu_source_path("scripts/pg.sh"), cmd[1024];

	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' >/dev/null", script, what, getenv("TRAINSCOPE_TEST_PG"));
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	free(script);
}

/* GET path until it answers status (up to 30 s); 1 if it did */
static int wait_status(const struct tu_server *s, const char *path, long status)
{
	for (int i = 0; i < 120; i++) {
		struct tu_resp r;
		long got;
		ck_assert_int_eq(tu_http(s, "GET", path, NULL, 0, NULL, &r), 0);
		got = r.status;
		tu_resp_free(&r);
		if (got == status)
			return 1;
		usleep(250 * 1000);
	}
	return 0;
}

/*
 * PostgreSQL stopped under a server and started again: meanwhile every
 * request is a 503 (uploads too, which the collector retries) and /healthz
 * says so; after, reads and uploads work again by themselves. A server
 * started while it is down waits for it the same way.
 */
START_TEST(test_postgres_restart)
{
	struct tu_server a, b;
	size_t len;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	struct tu_resp r;
	int fd;

	ck_assert_int_eq(tu_server_start(&a, NULL), 0);
	ck_assert_int_eq(tu_http(&a, "POST", "/api/v1/runs/before/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	/* an upload in flight when the database goes */
	fd = partial_upload(&a, "inflight", len, data, len / 2);
	ck_assert_msg(wait_ingesting_on(&a, 1), "the upload never started");
	pg_ctl("stop");
	ck_assert_int_eq(write(fd, data + len / 2, len - len / 2), (ssize_t)(len - len / 2));
	{
		char buf[512];
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		ck_assert_int_gt(n, 0);
		buf[n] = 0;
		ck_assert_msg(strstr(buf, "HTTP/1.1 503"), "in-flight upload: %s", buf);
	}
	close(fd);
	ck_assert(wait_status(&a, "/healthz", 503));
	ck_assert_int_eq(tu_http(&a, "GET", "/api/v1/runs/before/steps", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 503);
	{
		json_t *j = tu_json(&r);
		ck_assert_str_eq(tu_error_code(j), "database_unavailable");
		json_decref(j);
	}
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&a, "POST", "/api/v1/runs/during/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 503);
	tu_resp_free(&r);
	/* a server started now waits for the database, answering 503 */
	ck_assert_int_eq(tu_server_start_on(&b, a.db, NULL), 0);
	ck_assert(wait_status(&b, "/healthz", 503));
	pg_ctl("start");
	ck_assert_msg(wait_status(&a, "/healthz", 200), "a never saw the database back");
	ck_assert_msg(wait_status(&b, "/healthz", 200), "b never set up");
	ck_assert(wait_status(&a, "/api/v1/runs/before/steps", 200));
	ck_assert(wait_status(&b, "/api/v1/runs/before/steps", 200));
	run_absent(&b, "inflight");
	ck_assert_int_eq(tu_http(&b, "POST", "/api/v1/runs/during/artifacts?name=v.json.gz", data, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert(wait_status(&a, "/api/v1/runs/during/steps", 200));
	tu_server_cleanup(&b);
	tu_server_cleanup(&a);
	free(data);
}
END_TEST

Suite *suite_upload(void)
{
	Suite *s = suite_create("upload");
	TCase *tc = tcase_create("fixtures");
	tcase_set_timeout(tc, 120);

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_add_loop_test(tc, test_fixture_upload, 0, (int)(sizeof(fixtures) / sizeof(fixtures[0])));
	tcase_add_test(tc, test_raw_round_trip);
	tcase_add_test(tc, test_runs_list_and_gzip_answers);
	tcase_add_test(tc, test_client_gone_mid_body_keeps_nothing);
	tcase_add_test(tc, test_concurrent_uploads);
	tcase_add_test(tc, test_patch_run);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_heap_given_back_when_uploads_pause);
	if (!tu_postgres())	/* SQLite's write-ahead log: PostgreSQL has none to fold */
		tcase_add_test(tc, test_wal_folded_by_its_own_thread);
	suite_add_tcase(s, tc);
	tc = tcase_create("process");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_tokens);
	tcase_add_test(tc, test_token_file_limits);
	tcase_add_test(tc, test_bad_flag_values);
	tcase_add_test(tc, test_slow_clients_and_connections_per_address);
	tcase_add_test(tc, test_clean_stop_and_restart);
	tcase_add_test(tc, test_stop_waits_for_in_flight_upload);
	tcase_add_test(tc, test_kill_9_mid_upload_then_restart);
	tcase_add_test(tc, test_uploads_per_client_bounded);
	if (tu_postgres())	/* several servers share a PostgreSQL database only */
		tcase_add_test(tc, test_two_servers_kill_9_mid_upload);
	if (tu_postgres())
		tcase_add_test(tc, test_two_servers_start_together);
	suite_add_tcase(s, tc);
	/* it stops the cluster every test shares: a case of its own, which ctest runs alone
	 * (RUN_SERIAL, tests/CMakeLists.txt) */
	tc = tcase_create("postgres_stop");
	tcase_set_timeout(tc, 120);
	if (tu_postgres())
		tcase_add_test(tc, test_postgres_restart);
	suite_add_tcase(s, tc);
	return s;
}
