/*
 * check_bad_input.c: hostile and broken uploads against the real server.
 * Each one must get its 4xx with the JSON error body, keep what it should
 * keep (the raw bytes of a body that was accepted but did not parse) and
 * nothing else, and leave the server serving with earlier runs intact.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <sqlite3.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;
static json_int_t good_id;

#define MAX_BODY (128u << 20)

static void start(void)
{
	static const char *const extra[] = { "--max-body", "128M", "--max-inflated", "64M",
					     "--max-ratio", "100000", "--max-string", "1M", NULL };
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t len;
	uint8_t *data = tu_read_file(path, &len);
	struct tu_resp r;

	if (!data || tu_server_start(&srv, extra) ||
	    tu_http(&srv, "POST", "/api/v1/runs/good/artifacts?rank=0&name=v.json.gz", data, len, NULL, &r) ||
	    r.status != 201) {
		fprintf(stderr, "bad_input: cannot start the server and upload the good run\n");
		abort();
	}
	good_id = atoll(strstr(r.body, "\"id\":") + 5);
	tu_resp_free(&r);
	free(data);
	free(path);
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

/* The server still answers, and the good run is whole. */
static void server_intact(void)
{
	struct tu_resp r;
	json_t *j, *a;

	ck_assert_int_eq(tu_http(&srv, "GET", "/healthz", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/good", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_int_eq(json_array_size(json_object_get(j, "artifacts")), 1);
	a = json_array_get(json_object_get(j, "artifacts"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "id")), good_id);
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 216092);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "run"), "steps")), 5);
	json_decref(j);
}

/*
 * Send a request and check status and error code; returns the answer
 * (new reference). header may be NULL.
 */
static json_t *expect(const char *method, const char *path, const void *body, size_t len,
		      const char *header, long status, const char *code)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, method, path, body, len, header, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: status %ld, expected %ld: %.300s", method, path,
		      r.status, status, r.body);
	ck_assert_str_eq(r.content_type, "application/json");
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_msg(!strcmp(tu_error_code(j), code), "%s %s: code '%s', expected '%s'", method, path,
		      tu_error_code(j), code);
	ck_assert(strlen(json_string_value(json_object_get(json_object_get(j, "error"), "message"))) > 10);
	server_intact();
	return j;
}

/* The upload failed to parse but its bytes were kept: the answer names the artifact, raw returns them. */
static void kept(json_t *answer, const char *run, const void *body, size_t len)
{
	json_t *a = json_object_get(answer, "artifact");
	struct tu_resp r;
	char path[256];

	ck_assert_ptr_nonnull(a);
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "error");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 0);
	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts/%lld/raw", run,
		 (long long)json_integer_value(json_object_get(a, "id")));
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_uint_eq(r.len, len);
	ck_assert(!memcmp(r.body, body, len));
	tu_resp_free(&r);
	/* and no steps leaked from it */
	snprintf(path, sizeof(path), "/api/v1/runs/%s/steps", run);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"steps\":[]"));
	tu_resp_free(&r);
}

static void absent(const char *run)
{
	char path[256];

	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	json_decref(expect("GET", path, NULL, 0, NULL, 404, "run_not_found"));
}

#define UP(run) "/api/v1/runs/" run "/artifacts?name=x.json"

START_TEST(test_empty_body)
{
	json_decref(expect("POST", UP("empty"), "", 0, NULL, 400, "empty_body"));
	absent("empty");
}
END_TEST

START_TEST(test_not_json)
{
	/* text that is none of the formats taken (issue 21): 415, naming what is */
	const char body[] = "this is not JSON at all";
	json_t *j = expect("POST", UP("notjson"), body, strlen(body), NULL, 415, "unsupported_format");

	/* the list comes from pipeline/formats.c's table: the message as it was written out */
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			 "the upload is none of the formats taken; expected a Kineto trace, a memory snapshot or"
			 " timeline, a Lightning profiler report, a key_averages() table, folded stacks, an nvidia-smi"
			 " log (CSV, screen or dmon) or an rlhf-canary metrics.json");
	kept(j, "notjson", body, strlen(body));
	json_decref(j);
}
END_TEST

START_TEST(test_truncated_json)
{
	size_t zlen, len;
	char *path = tu_fixture("traces/hta_alexnet.json.gz");
	uint8_t *z = tu_read_file(path, &zlen), *plain = tu_gunzip(z, zlen, &len);
	json_t *j = expect("POST", UP("truncjson"), plain, len / 2, NULL, 400, "invalid_json");

	kept(j, "truncjson", plain, len / 2);
	json_decref(j);
	free(plain);
	free(z);
	free(path);
}
END_TEST

START_TEST(test_truncated_gzip)
{
	size_t zlen;
	char *path = tu_fixture("traces/hta_alexnet.json.gz");
	uint8_t *z = tu_read_file(path, &zlen);
	json_t *j = expect("POST", UP("truncgz"), z, zlen - 100, NULL, 400, "truncated_gzip");

	kept(j, "truncgz", z, zlen - 100);
	json_decref(j);
	free(z);
	free(path);
}
END_TEST

START_TEST(test_gzip_of_garbage)
{
	uint8_t garbage[4096], bad[512];
	size_t zlen, i;
	uint8_t *z;
	json_t *j;

	srand(7);
	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)rand();
	z = tu_gzip(garbage, sizeof(garbage), &zlen);
	j = expect("POST", UP("gzgarbage"), z, zlen, NULL, 415, "unsupported_format");	/* none of the formats */
	kept(j, "gzgarbage", z, zlen);
	json_decref(j);
	free(z);
	/* the gzip magic followed by garbage */
	memcpy(bad, garbage, sizeof(bad));
	bad[0] = 0x1f;
	bad[1] = 0x8b;
	j = expect("POST", UP("badgz"), bad, sizeof(bad), NULL, 400, "bad_gzip");
	kept(j, "badgz", bad, sizeof(bad));
	json_decref(j);
}
END_TEST

START_TEST(test_zip_bomb)
{
	/* 256 MiB of spaces (valid JSON whitespace) inflates past the 64 MiB cap */
	size_t n = 256u << 20, zlen;
	char *spaces = malloc(n);
	uint8_t *z;
	json_t *j;

	memset(spaces, ' ', n);
	z = tu_gzip(spaces, n, &zlen);
	free(spaces);
	ck_assert_uint_lt(zlen, 1u << 20);
	j = expect("POST", UP("bomb"), z, zlen, NULL, 413, "inflated_too_large");
	kept(j, "bomb", z, zlen);
	json_decref(j);
	free(z);
}
END_TEST

START_TEST(test_body_past_cap)
{
	size_t n = MAX_BODY + 1;
	char *body = malloc(n);

	memset(body, ' ', n);
	/* with a Content-Length: refused before the body is read */
	json_decref(expect("POST", UP("toobig"), body, n, NULL, 413, "body_too_large"));
	absent("toobig");
	/* streamed without one: refused when the cap is passed, nothing kept */
	json_decref(expect("POST", UP("toobig2"), body, n, "Transfer-Encoding: chunked", 413, "body_too_large"));
	absent("toobig2");
	free(body);
}
END_TEST

START_TEST(test_deep_nesting)
{
	size_t n = 100000, i;
	char *t = malloc(2 * n + 32);

	strcpy(t, "{\"traceEvents\":");
	for (i = 0; i < n; i++)
		t[15 + i] = '[';
	for (i = 0; i < n; i++)
		t[15 + n + i] = ']';
	strcpy(t + 15 + 2 * n, "}");
	json_decref(expect("POST", UP("deep"), t, strlen(t), NULL, 400, "invalid_trace"));
	strcpy(t, "{\"traceEvents\":[{\"args\":");
	for (i = 0; i < n; i++)
		t[24 + i] = '[';
	t[24 + n] = 0;
	json_decref(expect("POST", UP("deep2"), t, strlen(t), NULL, 413, "too_deep"));
	free(t);
}
END_TEST

START_TEST(test_huge_string)
{
	/* a 100 MB string: refused at the 1 MiB string cap, in constant memory */
	size_t n = 100u << 20, zlen;
	char *t = malloc(n + 64);
	uint8_t *z;
	json_t *j;

	strcpy(t, "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"");
	memset(t + strlen(t), 'a', n - strlen(t));
	strcpy(t + n, "\",\"ts\":1}]}");
	j = expect("POST", UP("hugestr"), t, strlen(t), NULL, 413, "string_too_long");
	json_decref(j);
	/* and gzipped */
	z = tu_gzip(t, strlen(t), &zlen);
	j = expect("POST", UP("hugestr2"), z, zlen, NULL, 413, "string_too_long");
	kept(j, "hugestr2", z, zlen);
	json_decref(j);
	free(z);
	free(t);
}
END_TEST

START_TEST(test_wrong_types)
{
	static const char *const bodies[] = {
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":\"123\",\"dur\":1}]}",
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":{\"us\":1}}]}",
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":[1]}]}",
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1e30}]}",
	};
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		json_t *j = expect("POST", UP("types"), bodies[i], strlen(bodies[i]), NULL, 400, "bad_timestamp");
		kept(j, "types", bodies[i], strlen(bodies[i]));
		json_decref(j);
	}
	json_decref(expect("POST", UP("types"), "{\"traceEvents\":{}}", 18, NULL, 400, "invalid_trace"));
	/* an array no trace or timeline starts so (their elements are objects, arrays): none of the kinds */
	json_decref(expect("POST", UP("types"), "[1,2,3]", 7, NULL, 415, "unsupported_format"));
	json_decref(expect("POST", UP("types"), "[1] Smith, J. (2024)\n", 21, NULL, 415, "unsupported_format"));
	json_decref(expect("POST", UP("types"), "[{\"ph\":1}, 2]", 14, NULL, 400, "invalid_trace"));
}
END_TEST

START_TEST(test_bad_names_and_parameters)
{
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]";
	char path[400];
	json_t *j;

	json_decref(expect("POST", "/api/v1/runs/bad$name/artifacts", body, strlen(body), NULL, 400,
			   "invalid_run_name"));
	json_decref(expect("POST", "/api/v1/runs/..%2F..%2Fetc/artifacts", body, strlen(body), NULL, 404,
			   "not_found"));
	json_decref(expect("GET", "/api/v1/runs/a%20b", NULL, 0, NULL, 400, "invalid_run_name"));
	strcpy(path, "/api/v1/runs/");
	memset(path + 13, 'r', 129);
	strcpy(path + 13 + 129, "/artifacts");
	json_decref(expect("POST", path, body, strlen(body), NULL, 400, "invalid_run_name"));
	json_decref(expect("POST", "/api/v1/runs/ok/artifacts?rank=abc", body, strlen(body), NULL, 400,
			   "invalid_parameter"));
	json_decref(expect("POST", "/api/v1/runs/ok/artifacts?rank=70000", body, strlen(body), NULL, 400,
			   "invalid_parameter"));
	j = expect("POST", "/api/v1/runs/ok/artifacts?kind=zip", body, strlen(body), NULL, 400, "invalid_parameter");
	/* the names come from pipeline/formats.c's table, in its order: the message as it was written out */
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
			 "'kind' must be trace, memory_snapshot, memory_timeline, lightning_report, key_averages, stacks,"
			 " gpu_log or canary_metrics");
	json_decref(j);
	json_decref(expect("POST", "/api/v1/runs/ok/artifacts?name=a%2Fb", body, strlen(body), NULL, 400,
			   "invalid_parameter"));
	/* a name that is not UTF-8 could not be answered in JSON: refused, nothing committed */
	json_decref(expect("POST", "/api/v1/runs/ok/artifacts?name=%ff%fe.json", body, strlen(body), NULL, 400,
			   "invalid_parameter"));
	json_decref(expect("POST", "/api/v1/runs/ok/artifacts?name=%c0%af.json", body, strlen(body), NULL, 400,
			   "invalid_parameter"));
	json_decref(expect("GET", "/api/v1/runs/good/steps?rank=-1", NULL, 0, NULL, 400, "invalid_parameter"));
	json_decref(expect("GET", "/api/v1/runs/good/artifacts/1x", NULL, 0, NULL, 400, "invalid_parameter"));
	absent("ok");
}
END_TEST

/*
 * An escaped control character in the path or query (issue 50): "%00" once
 * ended the decoded C string, so /runs/good%00x/steps answered run "good".
 * Every route answers 400; a name with a right-to-left override is refused;
 * a stored name's Content-Disposition carries filename*= (RFC 6266).
 */
START_TEST(test_control_characters_in_paths)
{
	static const char *const paths[] = { "/api/v1/runs/good%00x/steps", "/api/v1/runs/good%00",
					     "/api/v1/api/run.schema.json%00.txt", "/api/v1/runs/good%1b/steps",
					     "/api/v1/runs/good/steps%7F", "/api/v1/runs/good/steps?rank=0%00",
					     "/api/v1/runs?x%0a=1", "/healthz%09" };
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]";
	struct tu_resp r;
	char path[128];
	json_t *j;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		json_decref(expect("GET", paths[i], NULL, 0, NULL, 400, "invalid_request"));
	json_decref(expect("POST", "/api/v1/runs/ctl%00x/artifacts", body, strlen(body), NULL, 400,
			   "invalid_request"));
	json_decref(expect("POST", "/api/v1/runs/ctl/artifacts?name=x%00.txt", body, strlen(body), NULL, 400,
			   "invalid_request"));
	json_decref(expect("POST", "/api/v1/runs/ctl/artifacts?name=%E2%80%AEgnp.exe", body, strlen(body), NULL,
			   400, "invalid_parameter"));
	json_decref(expect("POST", "/api/v1/runs/ctl/artifacts?name=a%E2%81%A6b.json", body, strlen(body), NULL,
			   400, "invalid_parameter"));
	json_decref(expect("POST", "/api/v1/runs/ctl/artifacts?name=a%C2%85b.json", body, strlen(body), NULL,
			   400, "invalid_parameter"));
	absent("ctl");
	/* the same connection's next request is not marked by the last one's escape */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/good/steps", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);

	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/named/artifacts?name=caf%C3%A9%20%25.json", body,
				 strlen(body), NULL, &r), 0);
	ck_assert_msg(r.status == 201, "upload: %ld %.300s", r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	snprintf(path, sizeof(path), "/api/v1/runs/named/artifacts/%lld/raw",
		 (long long)json_integer_value(json_object_get(json_object_get(j, "artifact"), "id")));
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.headers, "filename=\"caf_ %.json\"; filename*=UTF-8''caf%C3%A9%20%25.json"),
		      "Content-Disposition: %s", r.headers);
	tu_resp_free(&r);
}
END_TEST

/*
 * Under the default --max-pickle-values (32 million): one entry dict named
 * 498,000 times in a list used by 64 devices, 1,835 bytes gzip'd, was 31.9
 * million entries counted one each (201, 490 MiB). Copies now count what
 * they hold (issue 50): 413, and nothing of it is kept as data.
 */
START_TEST(test_pickle_copies_default_caps)
{
	char *at = tu_source_path("tests/hostile/pickle/memo_entry_x64.pickle.gz");
	size_t len;
	uint8_t *body = tu_read_file(at, &len);
	json_t *j;

	ck_assert_ptr_nonnull(body);
	ck_assert_uint_lt(len, 4096);
	j = expect("POST", "/api/v1/runs/copies/artifacts?name=s.pickle", body, len, "Content-Encoding: gzip", 413,
		   "pickle_too_big");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(j, "error"), "message")),
				     "used again"));
	json_decref(j);
	json_decref(expect("GET", "/api/v1/runs/copies/memory", NULL, 0, NULL, 404, "no_memory_data"));
	free(body);
	free(at);
}
END_TEST

/*
 * What an input costs under the default caps (issue 50; tests/hostile/make.py writes the files):
 * raw timeline rows whose t goes back and forth, a point each, past the 2^20 a sort may hold (a 970
 * KB gzip of them held 1.6 GiB): 413; 4 million nvidia-smi rows of one column, past the bytes a
 * text report may hold: 413; 100,000 of them pass, and GET /gpu answers one row in 50 of them,
 * with the mean of all.
 */
START_TEST(test_cost_default_caps)
{
	static const struct { const char *file, *run, *code; long status; } cases[] = {
		{ "tests/hostile/timeline/raw_t_back_and_forth.json.gz", "cost_tl", "too_many_points", 413 },
		{ "tests/hostile/formats/smi_4m_rows.csv.gz", "cost_smi", "too_many_rows", 413 },
		{ "tests/hostile/formats/smi_100k_rows.csv.gz", "cost_smi_ok", NULL, 201 },
	};
	char path[160];
	struct tu_resp r;
	json_t *j, *col;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *at = tu_source_path(cases[i].file);
		size_t len;
		uint8_t *body = tu_read_file(at, &len);
		ck_assert_ptr_nonnull(body);
		ck_assert_uint_lt(len, 1 << 20);
		snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=x.gz", cases[i].run);
		if (cases[i].code) {
			json_decref(expect("POST", path, body, len, NULL, cases[i].status, cases[i].code));
		} else {
			ck_assert_int_eq(tu_http(&srv, "POST", path, body, len, NULL, &r), 0);
			ck_assert_msg(r.status == cases[i].status, "%s: %ld: %.300s", path, r.status, r.body);
			tu_resp_free(&r);
		}
		free(body);
		free(at);
	}
	json_decref(expect("GET", "/api/v1/runs/cost_tl/memory", NULL, 0, NULL, 404, "no_memory_data"));
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/cost_smi_ok/gpu", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	col = json_array_get(json_object_get(json_array_get(json_object_get(j, "gpus"), 0), "columns"), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(col, "values")), 2000);	/* rows 0, 50, ... 99950 */
	ck_assert_double_eq_tol(json_number_value(json_object_get(col, "mean")), 49.99, 0.01);
	ck_assert_double_eq(json_number_value(json_object_get(col, "max")), 100.0);
	json_decref(j);
}
END_TEST

START_TEST(test_unknown_routes_and_methods)
{
	json_decref(expect("GET", "/nope", NULL, 0, NULL, 404, "not_found"));
	json_decref(expect("GET", "/api/v2/runs", NULL, 0, NULL, 404, "not_found"));
	json_decref(expect("GET", "/api/v1/runs/nosuchrun", NULL, 0, NULL, 404, "run_not_found"));
	json_decref(expect("GET", "/api/v1/runs/nosuchrun/steps", NULL, 0, NULL, 404, "run_not_found"));
	json_decref(expect("DELETE", "/api/v1/runs", NULL, 0, NULL, 405, "method_not_allowed"));
	json_decref(expect("PUT", "/healthz", "x", 1, NULL, 405, "method_not_allowed"));
	json_decref(expect("GET", "/api/v1/runs/good/artifacts", NULL, 0, NULL, 405, "method_not_allowed"));
}
END_TEST

START_TEST(test_kind_mismatch_and_unsupported)
{
	const char trace[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]";
	static const uint8_t pickle[] = { 0x80, 0x04, 0x95, 0x05, 0, 0, 0, 0, 0, 0, 0, '}', 0x94, '.' };
	static const char evil[] = "\x80\x02" "cos\nsystem\n(S'true'\ntR.";
	static const char huge[] = "\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x10";
	json_t *j;

	j = expect("POST", "/api/v1/runs/kinds/artifacts?kind=memory_snapshot", trace, strlen(trace), NULL,
		   400, "kind_mismatch");
	kept(j, "kinds", trace, strlen(trace));
	json_decref(j);
	/* a pickle, but no snapshot; and one that would build a Python object: refused, kept */
	j = expect("POST", "/api/v1/runs/kinds/artifacts?name=s.pickle", pickle, sizeof(pickle), NULL, 400,
		   "bad_snapshot");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "artifact"), "kind")),
			 "memory_snapshot");
	kept(j, "kinds", pickle, sizeof(pickle));
	json_decref(j);
	j = expect("POST", "/api/v1/runs/kinds/artifacts?name=evil.pickle", evil, sizeof(evil) - 1, NULL, 400,
		   "bad_pickle");
	kept(j, "kinds", evil, sizeof(evil) - 1);
	json_decref(j);
	j = expect("POST", "/api/v1/runs/kinds/artifacts?name=big.pickle", huge, sizeof(huge) - 1, NULL, 413,
		   "pickle_too_big");
	json_decref(j);
}
END_TEST

static int raw_connect(const struct tu_server *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* One raw HTTP/1.1 exchange on a new connection; the answer's status (0: none), its text in out. */
static int raw_exchange(const struct tu_server *s, const char *req, char *out, size_t cap)
{
	int fd = raw_connect(s), status = 0;
	size_t n = 0;
	ssize_t k;

	ck_assert_int_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	shutdown(fd, SHUT_WR);
	while (n + 1 < cap && (k = read(fd, out + n, cap - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = 0;
	close(fd);
	sscanf(out, "HTTP/1.1 %d", &status);
	return status;
}

/* How many files process pid has open. */
static int open_fds(pid_t pid)
{
	char path[64];
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	ck_assert_ptr_nonnull(d = opendir(path));
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/*
 * A Content-Length past the cap is answered 413 as the headers arrive. A
 * client that writes its body before it looks for the answer, as libcurl may,
 * must still read that 413: the server reads and drops what keeps arriving
 * (linger.h) rather than close on unread bytes, which the kernel answers with
 * a reset (the client's next write fails, and the answer may go unread). A
 * client that sends nothing more and does not close is closed after 2 s.
 */
START_TEST(test_early_answer_lingers)
{
	static char chunk[1 << 16];
	char head[256], out[4096];
	size_t sent = 0, n = 0;
	ssize_t k;
	int fd, status = 0, before, i;

	memset(chunk, ' ', sizeof(chunk));
	snprintf(head, sizeof(head), "POST /api/v1/runs/linger/artifacts?name=a.json HTTP/1.1\r\nHost: x\r\n"
		 "Content-Length: %u\r\n\r\n", MAX_BODY + 1);
	fd = raw_connect(&srv);
	ck_assert_int_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	/* 16 MiB, past what the sockets' buffers hold: the server must be reading them */
	while (sent < (16u << 20)) {
		k = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL);
		ck_assert_msg(k > 0, "write %zu bytes into the body: %s", sent, strerror(errno));
		sent += (size_t)k;
	}
	while (n + 1 < sizeof(out) && (k = read(fd, out + n, sizeof(out) - 1 - n)) > 0)
		n += (size_t)k;
	out[n] = 0;
	sscanf(out, "HTTP/1.1 %d", &status);
	ck_assert_msg(status == 413, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "body_too_large"));
	close(fd);
	/* one that keeps its socket open and sends nothing more: answered, and closed by the server in time */
	before = open_fds(srv.pid);
	fd = raw_connect(&srv);
	ck_assert_int_eq(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	n = 0;
	while ((k = read(fd, out, sizeof(out))) > 0)
		n += (size_t)k;
	ck_assert_uint_gt(n, 0);
	for (i = 0; i < 100 && open_fds(srv.pid) > before; i++)
		usleep(100000);
	ck_assert_int_le(open_fds(srv.pid), before);
	close(fd);
	absent("linger");
	server_intact();
}
END_TEST

/*
 * Two framings of one body (RFC 9112 6.3): Content-Length headers that
 * disagree, or one beside Transfer-Encoding, are refused; a proxy in front
 * could take the other framing and smuggle a request through.
 */
START_TEST(test_ambiguous_framing)
{
	char out[4096];
	const char *body = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
	char req[1024];

	snprintf(req, sizeof(req),
		 "POST /api/v1/runs/smuggle/artifacts?name=a.json HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
		 "Content-Length: 5\r\nConnection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_msg(raw_exchange(&srv, req, out, sizeof(out)) == 400, "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "invalid_request"));
	snprintf(req, sizeof(req),
		 "POST /api/v1/runs/smuggle/artifacts?name=a.json HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_msg(raw_exchange(&srv, req, out, sizeof(out)) == 400, "%s", out);
	snprintf(req, sizeof(req),
		 "POST /api/v1/runs/smuggle/artifacts?name=a.json HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
		 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n", strlen(body), body);
	ck_assert_msg(raw_exchange(&srv, req, out, sizeof(out)) == 400, "%s", out);
	snprintf(req, sizeof(req), "GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 1\r\n"
		 "Connection: close\r\n\r\n");
	ck_assert_msg(raw_exchange(&srv, req, out, sizeof(out)) == 400, "%s", out);
	absent("smuggle");
	/* the same length twice says one thing: taken */
	snprintf(req, sizeof(req),
		 "POST /api/v1/runs/smuggle/artifacts?name=a.json HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), strlen(body), body);
	ck_assert_msg(raw_exchange(&srv, req, out, sizeof(out)) == 201, "%s", out);
	server_intact();
}
END_TEST

/* ---- the hostile corpus (tests/hostile/MANIFEST) ---- */

static struct tu_server hsrv;

static void hostile_start(void)
{
	static const char *const extra[] = { "--max-events", "3000", "--max-pickle-values", "20000", NULL };

	if (tu_server_start(&hsrv, extra)) {
		fprintf(stderr, "bad_input: cannot start the server for the hostile corpus\n");
		abort();
	}
}

static void hostile_stop(void)
{
	tu_server_cleanup(&hsrv);
}

/* Every read of a run answers below 500 (a 4xx such as no_memory_data is fine), and its JSON parses. */
static void reads_answer(const char *run, const char *file)
{
	static const char *const reads[] = {
		"", "/steps", "/steps?format=csv", "/ops", "/ops?device=gpu", "/ops?format=csv", "/kernels",
		"/kernels?format=csv", "/ranks", "/ranks?format=csv", "/diagnosis", "/memory", "/memory?points=0",
		"/memory?points=3", "/memory/peak", "/trace", "/metrics", "/actions", "/stacks", "/gpu", "/canary",
	};
	char path[512];
	struct tu_resp r;

	for (size_t i = 0; i <= sizeof(reads) / sizeof(reads[0]); i++) {
		if (i < sizeof(reads) / sizeof(reads[0]))
			snprintf(path, sizeof(path), "/api/v1/runs/%s%s", run, reads[i]);
		else
			snprintf(path, sizeof(path), "/api/v1/compare?base=%s&target=%s", run, run);
		ck_assert_int_eq(tu_http(&hsrv, "GET", path, NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status > 0 && r.status < 500, "%s: GET %s answered %ld: %.300s", file, path, r.status,
			      r.body);
		if (!strcmp(r.content_type, "application/json")) {
			json_t *j = tu_json(&r);
			ck_assert_msg(j != NULL, "%s: GET %s: not JSON", file, path);
			json_decref(j);
		}
		tu_resp_free(&r);
	}
}

/* No CSV field of the answer starts (inside its quotes or not) with what a spreadsheet runs as a formula. */
static void csv_inert(const char *run, const char *table, const char *must)
{
	char path[256];
	struct tu_resp r;
	int quoted = 0, start = 1;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/%s?format=csv", run, table);
	ck_assert_int_eq(tu_http(&hsrv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, must), "%s lacks %s: %s", path, must, r.body);
	for (const char *c = r.body; *c; c++) {
		if (start && *c == '"') {
			quoted = 1;
			continue;
		}
		if (start && !(*c == ',' || (*c == '\r' && c[1] == '\n')))	/* not an empty field */
			ck_assert_msg(!strchr("=+-@\t\r", *c) || (*c == '-' && c[1] >= '0' && c[1] <= '9' && !quoted),
				      "%s: a field starts with '%c': %s", path, *c, r.body);
		start = 0;
		if (*c == '"' && quoted)
			quoted = c[1] == '"' ? (c++, 1) : 0;
		else if (!quoted && (*c == ',' || *c == '\n'))
			start = 1;
	}
	tu_resp_free(&r);
}

/* What a run answers that a refused upload must leave as it was ('+' lines of the manifest). */
static const char *const same_reads[4] = { "/steps", "/ops", "/kernels", "/memory" };

static char *run_read(const char *run, const char *what)
{
	char path[256], *out;
	struct tu_resp r;

	snprintf(path, sizeof(path), "/api/v1/runs/%s%s", run, what);
	ck_assert_int_eq(tu_http(&hsrv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "GET %s: %ld %.300s", path, r.status, r.body);
	out = strdup(r.body);
	tu_resp_free(&r);
	return out;
}

START_TEST(test_hostile_corpus)
{
	char *manifest = tu_source_path("tests/hostile/MANIFEST"), line[512];
	FILE *f = fopen(manifest, "r");
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		char file[256], query[256], rel[300], path[600], run[32];
		long want;
		struct tu_resp r;
		size_t len;
		uint8_t *body;
		char *at;

		char *before[4] = { NULL };
		int same_run;

		if (line[0] == '#' || sscanf(line, "%255s %255s %ld", file, query, &want) != 3)
			continue;
		/* '+': to the run of the line before */
		same_run = file[0] == '+' && n > 0;
		snprintf(rel, sizeof(rel), "tests/hostile/%s", file + (file[0] == '+'));
		at = tu_source_path(rel);
		ck_assert_msg((body = tu_read_file(at, &len)) != NULL, "cannot read %s", at);
		snprintf(run, sizeof(run), "hostile-%d", same_run ? n : ++n);
		for (size_t k = 0; same_run && k < 4; k++)
			before[k] = run_read(run, same_reads[k]);
		snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?%s", run, query);
		ck_assert_int_eq(tu_http(&hsrv, "POST", path, body, len, NULL, &r), 0);
		ck_assert_msg(r.status == want, "%s ?%s: %ld, expected %ld: %.300s", file, query, r.status, want, r.body);
		if (want >= 400) {
			json_t *j = tu_json(&r);
			ck_assert_msg(j && tu_error_code(j)[0], "%s: no JSON error", file);
			json_decref(j);
		}
		tu_resp_free(&r);
		for (size_t k = 0; same_run && k < 4; k++) {
			char *after = run_read(run, same_reads[k]);
			/* a refused upload leaves nothing of itself */
			ck_assert_msg(want < 400 || !strcmp(before[k], after), "%s: %s changed: %.300s then %.300s", file,
				      same_reads[k], before[k], after);
			free(before[k]);
			free(after);
		}
		reads_answer(run, file);
		if (strstr(file, "formula") && want == 201) {
			csv_inert(run, "ops", "\"'=HYPERLINK(\"\"http://example.invalid/x\"\",\"\"click\"\")\"");
			csv_inert(run, "ops", "\"'@SUM(A1)\"");
			csv_inert(run, "kernels", "\"'=cmd|\"\" /C calc\"\"!A0\"");
		}
		free(body);
		free(at);
	}
	fclose(f);
	free(manifest);
	ck_assert_int_ge(n, 15);
	/* and each run against the next: extremes on one side only */
	for (int k = 1; k < n; k++) {
		char path[128];
		struct tu_resp r;
		snprintf(path, sizeof(path), "/api/v1/compare?base=hostile-%d&target=hostile-%d", k, k + 1);
		ck_assert_int_eq(tu_http(&hsrv, "GET", path, NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status > 0 && r.status < 500, "GET %s answered %ld: %.300s", path, r.status, r.body);
		tu_resp_free(&r);
		snprintf(path, sizeof(path), "/api/v1/compare?base=hostile-%d&target=hostile-%d", k + 1, k);
		ck_assert_int_eq(tu_http(&hsrv, "GET", path, NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status > 0 && r.status < 500, "GET %s answered %ld: %.300s", path, r.status, r.body);
		tu_resp_free(&r);
	}
	{
		struct tu_resp r;
		ck_assert_int_eq(tu_http(&hsrv, "GET", "/api/v1/runs", NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status == 200, "/api/v1/runs: %ld %.300s", r.status, r.body);
		tu_resp_free(&r);
	}
}
END_TEST

/*
 * A row an older server wrote before names were checked (not UTF-8) still
 * reads: its bad bytes answer as '?', never a 503.
 */
START_TEST(test_legacy_non_utf8_rows_read)
{
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":2}]";
	struct tu_server s;
	struct tu_resp r;
	sqlite3 *db;
	json_t *j;

	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/legacy/artifacts?name=ok.json", body, strlen(body), NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_server_stop(&s), 0);
	ck_assert_int_eq(sqlite3_open(s.db, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "UPDATE artifacts SET name=CAST(X'6f6bff2e6a736f6e' AS TEXT)", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	ck_assert_int_eq(tu_server_restart(&s, NULL), 0);
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/legacy", NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld: %s", r.status, r.body);
	j = tu_json(&r);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "artifacts"), 0), "name")),
			 "ok?.json");
	json_decref(j);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	tu_server_cleanup(&s);
}
END_TEST

Suite *suite_bad_input(void)
{
	Suite *s = suite_create("bad_input");
	TCase *tc = tcase_create("uploads");
	tcase_set_timeout(tc, 120);

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_add_test(tc, test_empty_body);
	tcase_add_test(tc, test_not_json);
	tcase_add_test(tc, test_truncated_json);
	tcase_add_test(tc, test_truncated_gzip);
	tcase_add_test(tc, test_gzip_of_garbage);
	tcase_add_test(tc, test_zip_bomb);
	tcase_add_test(tc, test_body_past_cap);
	tcase_add_test(tc, test_early_answer_lingers);
	tcase_add_test(tc, test_deep_nesting);
	tcase_add_test(tc, test_huge_string);
	tcase_add_test(tc, test_wrong_types);
	tcase_add_test(tc, test_bad_names_and_parameters);
	tcase_add_test(tc, test_unknown_routes_and_methods);
	tcase_add_test(tc, test_control_characters_in_paths);
	tcase_add_test(tc, test_pickle_copies_default_caps);
	tcase_add_test(tc, test_cost_default_caps);
	tcase_add_test(tc, test_kind_mismatch_and_unsupported);
	tcase_add_test(tc, test_ambiguous_framing);
	suite_add_tcase(s, tc);
	tc = tcase_create("legacy");
	/* rows an older server wrote into its SQLite file: PostgreSQL never held such text (CK_EXCLUDE_TAGS=sqlite) */
	tcase_set_tags(tc, "sqlite");
	tcase_add_test(tc, test_legacy_non_utf8_rows_read);
	suite_add_tcase(s, tc);
	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 300);
	tcase_add_unchecked_fixture(tc, hostile_start, hostile_stop);
	tcase_add_test(tc, test_hostile_corpus);
	suite_add_tcase(s, tc);
	return s;
}
