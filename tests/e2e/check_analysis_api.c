/*
 * check_analysis_api.c: the analysis endpoints of the real server over HTTP:
 * steps, ops, kernels, ranks, diagnosis, CSV, the trace window (and its
 * round trip through our own upload), and their errors.
 */
#define _GNU_SOURCE	/* strcasestr */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/timeline.h"
#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t len;
	uint8_t *b = tu_read_file(path, &len);
	struct tu_resp r;

	if (!b || tu_server_start(&srv, NULL) ||
	    tu_http(&srv, "POST", "/api/v1/runs/v100/artifacts?name=v100.json.gz", b, len, NULL, &r) ||
	    r.status != 201) {
		fprintf(stderr, "cannot start %s with the V100 fixture\n", SERVER_BIN);
		abort();
	}
	tu_resp_free(&r);
	free(b);
	free(path);
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

/* GET path, expecting status; the body as JSON when want_json. */
static json_t *get(const char *path, long status, struct tu_resp *keep)
{
	struct tu_resp r;
	json_t *j = NULL;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s: %ld, expected %ld: %s", path, r.status, status, r.body);
	if (keep)
		*keep = r;
	else {
		j = tu_json(&r);
		tu_resp_free(&r);
	}
	return j;
}

START_TEST(test_endpoints_answer)
{
	json_t *j = get("/api/v1/runs/v100/steps", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "rank")), 1);	/* from distributedInfo */
	json_decref(j);

	j = get("/api/v1/runs/v100/kernels?limit=1", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "kernels")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "total_ns")), 977859000);
	json_decref(j);

	j = get("/api/v1/runs/v100/ops?limit=3&sort=calls", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), 3);
	json_int_t c0 = json_integer_value(json_object_get(json_array_get(json_object_get(j, "ops"), 0), "calls"));
	json_int_t c1 = json_integer_value(json_object_get(json_array_get(json_object_get(j, "ops"), 1), "calls"));
	ck_assert_int_ge(c0, c1);
	json_decref(j);

	j = get("/api/v1/runs/v100/ops?device=gpu&rank=1", 200, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "gpu");
	ck_assert_int_gt(json_array_size(json_object_get(j, "ops")), 0);
	json_decref(j);

	j = get("/api/v1/runs/v100/diagnosis", 200, NULL);
	ck_assert(json_is_array(json_object_get(j, "findings")));
	json_decref(j);

	j = get("/api/v1/runs/v100/ranks", 200, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "slowest_rank")), 1);
	/* the trace's [memory] events give rank 1 a timeline on its GPU */
	json_t *devs = json_object_get(json_array_get(json_object_get(j, "ranks"), 0), "memory_devices");
	ck_assert_int_ge(json_array_size(devs), 1);
	ck_assert_str_eq(json_string_value(json_array_get(devs, 0)), "cuda:1");
	json_decref(j);

	/* a run with no trace at all: diagnosis says so instead of guessing */
	struct tu_resp r;
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/memonly/artifacts?name=m.json", "[[1,0,64,0]]", 12,
				 NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	j = get("/api/v1/runs/memonly/ranks", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(json_array_get(json_object_get(j, "ranks"), 0),
							 "memory_devices")), 1);
	json_decref(j);
	j = get("/api/v1/runs/memonly/diagnosis", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "findings")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "findings"), 0), "id")),
			 "no_trace");
	json_decref(j);

	/* a rank the run does not have is a 404, not an empty table */
	j = get("/api/v1/runs/v100/kernels?rank=7", 404, NULL);
	ck_assert_str_eq(tu_error_code(j), "rank_not_found");
	json_decref(j);
}
END_TEST

START_TEST(test_bad_queries)
{
	static const struct { const char *path; long status; const char *code; } cases[] = {
		{ "/api/v1/runs/nope/steps", 404, "run_not_found" },
		{ "/api/v1/runs/nope/diagnosis", 404, "run_not_found" },
		{ "/api/v1/runs/nope/trace", 404, "run_not_found" },
		{ "/api/v1/runs/v100/ops?limit=0", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/ops?limit=100001", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/ops?device=tpu", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/ops?sort=name;DROP", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/kernels?kind=tensor", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/steps?format=xml", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/diagnosis?format=csv", 400, "format_not_supported" },
		{ "/api/v1/runs/v100/steps?rank=-1", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/trace?start_ns=5&end_ns=5", 400, "invalid_parameter" },
		{ "/api/v1/runs/v100/trace?end_ns=abc", 400, "invalid_parameter" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = get(cases[i].path, cases[i].status, NULL);
		ck_assert_msg(!strcmp(tu_error_code(j), cases[i].code), "%s: %s", cases[i].path, tu_error_code(j));
		json_decref(j);
	}
}
END_TEST

START_TEST(test_csv)
{
	struct tu_resp r;
	char *line, *save;
	int rows = 0;

	get("/api/v1/runs/v100/kernels?format=csv&limit=5", 200, &r);
	ck_assert(!strncmp(r.content_type, "text/csv", 8));
	/* reads keep the connection open (answered after MHD's first call) */
	ck_assert_ptr_null(strcasestr(r.headers, "Connection: close"));
	line = strtok_r(r.body, "\r\n", &save);
	ck_assert_str_eq(line, "rank,name,calls,total_ns,mean_ns,max_ns,min_ns,blocks_per_sm,achieved_occupancy_pct,class");
	line = strtok_r(NULL, "\r\n", &save);
	static const char top[] = "1,ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem),2020,357343000,";
	ck_assert_msg(!strncmp(line, top, sizeof(top) - 1), "%s", line);
	for (rows = 1; strtok_r(NULL, "\r\n", &save); rows++)
		;
	ck_assert_int_eq(rows, 5);
	tu_resp_free(&r);

	/* names with commas and quotes are quoted (RFC 4180) */
	get("/api/v1/runs/v100/kernels?format=csv&limit=2", 200, &r);
	ck_assert_ptr_nonnull(strstr(r.body, "\r\n1,\"void at::native::vectorized_elementwise_kernel<4, "));
	tu_resp_free(&r);

	get("/api/v1/runs/v100/steps?format=csv", 200, &r);
	static const char head[] = "rank,step,start_ns,dur_ns,cpu_dur_ns,comm_overlap_ns,incomplete,whole_trace,"
				   "breakdown_ns.kernel,breakdown_ns.memcpy,breakdown_ns.memset,breakdown_ns.communication,";
	ck_assert_msg(!strncmp(r.body, head, sizeof(head) - 1), "%s", r.body);
	/* V100 steps end with their CPU span: dur_ns and cpu_dur_ns agree */
	ck_assert_ptr_nonnull(strstr(r.body, "\r\n1,2,1669783687384669000,345770000,345770000,"));
	tu_resp_free(&r);
}
END_TEST

/* The events of ProfilerStep#3 on the V100 trace: [start, start + dur) */
#define W_START 1669783687730492000LL
#define W_END (W_START + 365256000LL)

START_TEST(test_trace_window_round_trip)
{
	struct tu_resp a, b, gz;
	char path[256];
	json_t *j, *ev, *e;
	size_t i, n, plain_len;
	uint8_t *plain;

	snprintf(path, sizeof(path), "/api/v1/runs/v100/trace?start_ns=%lld&end_ns=%lld", W_START, W_END);
	get(path, 200, &a);
	ck_assert_str_eq(a.content_type, "application/json");
	j = tu_json(&a);
	ev = json_object_get(j, "traceEvents");
	n = json_array_size(ev);
	ck_assert_int_gt(n, 1000);
	/* every timed event overlaps the window, but for the metadata (names, sort indexes): in every window */
	json_array_foreach(ev, i, e) {
		json_t *ts = json_object_get(e, "ts");
		if (!ts || !strcmp(json_string_value(json_object_get(e, "ph")), "M"))
			continue;
		double t = json_number_value(ts) * 1000, d = json_number_value(json_object_get(e, "dur")) * 1000;
		ck_assert_msg(t < (double)W_END + 1000 && t + d >= (double)W_START - 1000, "event outside: %f", t);
	}
	json_decref(j);

	/* gzip when accepted, the same bytes inside */
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, "Accept-Encoding: gzip", &gz), 0);
	ck_assert_str_eq(gz.content_encoding, "gzip");
	plain = tu_gunzip(gz.body, gz.len, &plain_len);
	ck_assert_uint_eq(plain_len, a.len);
	ck_assert(!memcmp(plain, a.body, a.len));
	free(plain);
	tu_resp_free(&gz);

	/* our own output uploads, and the same window of it gives the same events, byte for byte */
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/window/artifacts?name=w.json&rank=1", a.body, a.len,
				 NULL, &b), 0);
	ck_assert_msg(b.status == 201, "%ld %s", b.status, b.body);
	tu_resp_free(&b);
	snprintf(path, sizeof(path), "/api/v1/runs/window/trace?start_ns=%lld&end_ns=%lld", W_START, W_END);
	get(path, 200, &b);
	ck_assert_uint_eq(b.len, a.len);
	ck_assert(!memcmp(a.body, b.body, a.len));
	tu_resp_free(&b);

	/* and its step is the same step */
	j = get("/api/v1/runs/window/steps", 200, NULL);
	ck_assert_int_ge(json_array_size(json_object_get(j, "steps")), 1);
	json_t *s3 = NULL;
	json_array_foreach(json_object_get(j, "steps"), i, e)
		if (json_integer_value(json_object_get(e, "step")) == 3)
			s3 = e;
	ck_assert_ptr_nonnull(s3);
	ck_assert_int_eq(json_integer_value(json_object_get(s3, "start_ns")), W_START);
	ck_assert_int_eq(json_integer_value(json_object_get(s3, "dur_ns")), 365256000);
	json_decref(j);
	tu_resp_free(&a);
}
END_TEST

START_TEST(test_whole_trace)
{
	struct tu_resp a;
	json_t *j;

	get("/api/v1/runs/v100/trace", 200, &a);
	j = tu_json(&a);
	/* all 216,092 events: the 64,663 CPU->GPU flows written again from the correlation ids */
	ck_assert_int_eq(json_array_size(json_object_get(j, "traceEvents")), 216092);
	json_decref(j);
	tu_resp_free(&a);
}
END_TEST

/* Answers are cached between writes: a new upload must show at once, in plain and gzip answers. */
START_TEST(test_cached_answers_follow_writes)
{
	struct tu_resp r, g;
	json_t *j;
	char *path = tu_fixture("traces/hta_triton_tiny.json.gz");
	size_t len, plen;
	uint8_t *b = tu_read_file(path, &len), *plain;

	j = get("/api/v1/runs/v100/kernels?limit=1", 200, NULL);
	json_int_t before = json_integer_value(json_object_get(json_object_get(j, "total"), "calls"));
	json_decref(j);
	j = get("/api/v1/runs/v100/kernels?limit=1", 200, NULL);	/* from the cache */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "calls")), before);
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/v100/kernels?limit=1", NULL, 0, "Accept-Encoding: gzip", &g), 0);
	tu_resp_free(&g);
	/* one more trace for rank 1, with one Triton kernel */
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/v100/artifacts?name=tiny.json.gz&rank=1", b, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	j = get("/api/v1/runs/v100/kernels?limit=1", 200, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "calls")), before + 1);
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/v100/kernels?limit=1", NULL, 0, "Accept-Encoding: gzip", &g), 0);
	ck_assert_int_eq(g.status, 200);
	plain = strcmp(g.content_encoding, "gzip") ? NULL : tu_gunzip(g.body, g.len, &plen);
	struct tu_resp fake = { .status = 200, .body = plain ? (char *)plain : g.body, .len = plain ? plen : g.len };
	j = tu_json(&fake);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "calls")), before + 1);
	json_decref(j);
	free(plain);
	tu_resp_free(&g);
	free(b);
	free(path);
}
END_TEST

/* The cache keys on each decoded key and value: an encoded '&' and '=' inside a value is another request. */
START_TEST(test_cache_key_unambiguous)
{
	json_t *j = get("/api/v1/runs/v100/ops?device=gpu&limit=3", 200, NULL);

	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), 3);
	json_decref(j);
	json_decref(get("/api/v1/runs/v100/ops?device=gpu%26limit%3D3", 400, NULL));
	json_decref(get("/api/v1/runs/v100/ops?device=gpu&limit=3", 200, NULL));
	json_decref(get("/api/v1/runs/v100/ops?device%3Dgpu%26limit=3", 200, NULL));	/* a key of its own: ignored */
}
END_TEST

START_TEST(test_memory_timeline_export)
{
	char *path = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	struct tu_resp r;
	json_t *j, *v;
	json_int_t peak = 0;
	int seen_peak = 0;

	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/memraw/artifacts?name=m.raw.json.gz&device=cuda:1", b, len,
				 NULL, &r), 0);
	ck_assert_msg(r.status == 201, "%s", r.body);
	tu_resp_free(&r);
	j = get("/api/v1/runs/memraw/memory?points=0", 200, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "pytorch");
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:1");
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 7721);
	ck_assert_int_eq(json_array_size(json_object_get(j, "allocated")), 7721);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(json_object_get(j, "categories"), "activation"), 744)),
			 2618160128LL);
	peak = json_integer_value(json_object_get(json_object_get(j, "peak"), "bytes"));
	ck_assert_int_eq(peak, 3082832104LL);
	json_int_t t_first = json_integer_value(json_array_get(json_object_get(j, "t_ns"), 0));
	json_int_t t_last = json_integer_value(json_array_get(json_object_get(j, "t_ns"), 7720));
	json_int_t t1000 = json_integer_value(json_array_get(json_object_get(j, "t_ns"), 1000));
	json_int_t t2000 = json_integer_value(json_array_get(json_object_get(j, "t_ns"), 2000));
	/* points=0 is written as it is sent, not built as a JSON tree: the same answer as all points asked for */
	{
		json_t *tree = get("/api/v1/runs/memraw/memory?points=1000000", 200, NULL);
		ck_assert(json_equal(j, tree));
		json_decref(tree);
		char u[300];
		snprintf(u, sizeof(u), "/api/v1/runs/memraw/memory?points=1000000&start_ns=%lld&end_ns=%lld",
			 (long long)t1000, (long long)t2000);
		tree = get(u, 200, NULL);
		snprintf(u, sizeof(u), "/api/v1/runs/memraw/memory?points=0&start_ns=%lld&end_ns=%lld", (long long)t1000,
			 (long long)t2000);
		json_t *text = get(u, 200, NULL);
		ck_assert(json_equal(text, tree));
		ck_assert_int_eq(json_integer_value(json_object_get(text, "window_points")), 1001);
		json_decref(tree);
		json_decref(text);
	}
	json_decref(j);

	/* a window (a zoomed chart): its points, from the state it opens with; the peak stays the run's */
	char url[256];
	snprintf(url, sizeof(url), "/api/v1/runs/memraw/memory?points=0&start_ns=%lld&end_ns=%lld", (long long)t1000,
		 (long long)t2000);
	j = get(url, 200, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "window_points")), 1001);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "points_total")), 7721);
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 1001);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 0)), t1000);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 1000)), t2000);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "peak"), "bytes")), peak);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/memraw/memory?points=50&start_ns=%lld&end_ns=%lld", (long long)t1000 + 1,
		 (long long)t2000);
	j = get(url, 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 50);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 0)), t1000);	/* the state at start */
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 49)), t2000);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/memraw/memory?start_ns=%lld&end_ns=%lld", (long long)t2000,
		 (long long)t1000);
	json_decref(get(url, 400, NULL));

	/* downsampled: 100 points, the peak among them */
	j = get("/api/v1/runs/memraw/memory?points=100", 200, NULL);
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 100);
	/* and it spans the whole run */
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 0)), t_first);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "t_ns"), 99)), t_last);
	json_array_foreach(json_object_get(j, "allocated"), i, v)
		seen_peak |= json_integer_value(v) == peak;
	ck_assert(seen_peak);
	json_decref(j);

	j = get("/api/v1/runs/memraw/memory/peak", 200, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes")), peak);
	json_int_t sum = 0;
	json_array_foreach(json_object_get(j, "groups"), i, v)
		sum += json_integer_value(json_object_get(v, "bytes"));
	ck_assert_int_eq(sum, peak);
	json_decref(j);

	j = get("/api/v1/runs/memraw/memory?device=cuda:0", 404, NULL);
	ck_assert_str_eq(tu_error_code(j), "no_memory_data");
	json_decref(j);
	j = get("/api/v1/runs/memraw/memory?device=gpu0", 400, NULL);
	json_decref(j);
	j = get("/api/v1/runs/memraw/memory?points=-1", 400, NULL);
	json_decref(j);
	free(b);
	free(path);
}
END_TEST

/* upload a fixture to run; 201 */
static void upload_fixture(const char *rel, const char *run)
{
	char *path = tu_fixture(rel), url[256];
	size_t len;
	uint8_t *b = tu_read_file(path, &len);
	struct tu_resp r;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?name=fixture", run);
	ck_assert_int_eq(tu_http(&srv, "POST", url, b, len, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "%s", r.body);
	tu_resp_free(&r);
	free(b);
	free(path);
}

START_TEST(test_memory_snapshot)
{
	json_t *j, *v, *cats;
	size_t i, n;
	json_int_t peak = 0;

	/* figures from Python's pickle over the same file */
	upload_fixture("memory/cs336_memory_snapshot.pickle", "snap");
	j = get("/api/v1/runs/snap/memory?points=0", 200, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "snapshot");
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:0");
	n = json_array_size(json_object_get(j, "allocated"));
	ck_assert_uint_eq(n, 3442);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "reserved"), n - 1)), 14180941824LL);
	cats = json_object_get(j, "categories");
	json_array_foreach(json_object_get(j, "allocated"), i, v) {
		json_int_t sum = 0;
		for (int c = 0; c < MEM_NCAT; c++)
			sum += json_integer_value(json_array_get(json_object_get(cats, mem_cat_names[c]), i));
		ck_assert_msg(sum == json_integer_value(v), "point %zu: categories %lld, allocated %lld", i,
			      (long long)sum, (long long)json_integer_value(v));
		if (json_integer_value(v) > peak)
			peak = json_integer_value(v);
	}
	ck_assert_int_eq(peak, 13927831556LL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "peak"), "bytes")), peak);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "baseline"), "bytes")), 1377753092LL);
	json_decref(j);

	j = get("/api/v1/runs/snap/memory/peak", 200, NULL);
	v = json_array_get(json_object_get(j, "groups"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(v, "category")), "activation");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(v, "op")), ".py:"));
	json_int_t sum = 0;
	json_array_foreach(json_object_get(j, "groups"), i, v)
		sum += json_integer_value(json_object_get(v, "bytes"));
	ck_assert_int_eq(sum, peak);
	json_decref(j);

	/* a state-only snapshot: one point, the live blocks */
	upload_fixture("memory/docubox_state_only_snapshot.pickle", "snapstate");
	j = get("/api/v1/runs/snapstate/memory?points=0", 200, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "points_total")), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "allocated"), 0)), 90861056);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "reserved"), 0)), 109051904);
	json_decref(j);
}
END_TEST

Suite *suite_analysis_api(void)
{
	Suite *s = suite_create("analysis_api");
	TCase *tc = tcase_create("v100");

	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_add_test(tc, test_endpoints_answer);
	tcase_add_test(tc, test_bad_queries);
	tcase_add_test(tc, test_csv);
	tcase_add_test(tc, test_trace_window_round_trip);
	tcase_add_test(tc, test_whole_trace);
	tcase_add_test(tc, test_cached_answers_follow_writes);
	tcase_add_test(tc, test_cache_key_unambiguous);
	tcase_add_test(tc, test_memory_timeline_export);
	tcase_add_test(tc, test_memory_snapshot);
	suite_add_tcase(s, tc);
	return s;
}
