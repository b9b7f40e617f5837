/*
 * check_api_contract.c: what every endpoint of the real server promises
 * alike: CSV with a header always and a rank column, ?format=csv answered or
 * refused (never JSON in its place), an unknown ?rank a 404, the OpenAPI
 * description served as compiled in, 403 for a read token on a write, a
 * compare that says when two runs cannot be compared, and trace exports as
 * complete as the uploads (flows, names, sort indexes, device properties,
 * distributedInfo, baseTimeNanoseconds), checked against the fixtures; every
 * run route on a run a collector polled for, with no artifact yet.
 */
#define _GNU_SOURCE	/* asprintf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"
#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	static const char mem[] = "[[1,0,1000000,0],[2,1,200000,3],[3,3,-200000,3]]";

	if (tu_server_start(&srv, NULL)) {
		fprintf(stderr, "cannot start %s\n", SERVER_BIN);
		abort();
	}
	tu_upload_fixture(&srv, "v100", "traces/hta_v100_train_memory.json.gz");
	tu_upload_fixture(&srv, "resnet", "traces/kineto_resnet50_workers0.json.gz");
	tu_upload_fixture(&srv, "alexnet", "traces/hta_alexnet.json.gz");	/* no ProfilerStep spans */
	tu_upload_fixture(&srv, "cmp_base", "traces/hta_compare_base.json.gz");
	tu_upload_fixture(&srv, "cmp_test", "traces/hta_compare_test.json.gz");
	tu_upload(&srv, "memonly", "m.json", mem, strlen(mem));			/* a memory timeline, no trace */
	tu_upload_fixture(&srv, "nccl", "traces/hta_nccl_rel_ts.json.gz");	/* relative times + baseTimeNanoseconds */
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

static struct tu_resp get_resp(const char *path, long status)
{
	struct tu_resp r;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "GET %s: %ld, expected %ld: %s", path, r.status, status, r.body);
	return r;
}

static json_t *get(const char *path, long status)
{
	struct tu_resp r = get_resp(path, status);
	json_t *j = tu_json(&r);

	tu_resp_free(&r);
	return j;
}

/* The first line of a CSV body, without its CRLF (static). */
static const char *header_of(const char *body)
{
	static char line[1024];
	size_t n = strcspn(body, "\r\n");

	ck_assert_uint_lt(n, sizeof(line));
	memcpy(line, body, n);
	line[n] = 0;
	return line;
}

static size_t count_lines(const char *body)
{
	size_t n = 0;

	for (const char *p = body; (p = strstr(p, "\r\n")); p += 2)
		n++;
	return n;
}

START_TEST(test_csv_header_always_and_rank_column)
{
	static const struct { const char *path, *member; } tables[] = {
		{ "/api/v1/runs/v100/steps", "steps" },
		{ "/api/v1/runs/v100/ops?limit=3", "ops" },
		{ "/api/v1/runs/v100/ops?limit=3&device=gpu", "ops" },
		{ "/api/v1/runs/v100/kernels?limit=3", "kernels" },
		{ "/api/v1/runs/v100/kernels?limit=3&kind=memcpy", "kernels" },
		{ "/api/v1/runs/v100/ranks", "ranks" },
	};
	char path[256], want[1024];

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		json_t *j = get(tables[i].path, 200), *rows = json_object_get(j, tables[i].member);
		json_t *row = json_array_get(rows, 0), *v, *w;
		const char *key, *sub;
		struct tu_resp r;
		size_t n = 0;

		ck_assert_msg(json_array_size(rows) > 0, "%s has rows", tables[i].path);
		/* the header is the JSON row's keys in order, nested ones as key.sub, after a rank column */
		n = (size_t)snprintf(want, sizeof(want), "%s", strcmp(tables[i].member, "ranks") ? "rank" : "");
		json_object_foreach(row, key, v) {
			if (json_is_array(v))	/* lists (a rank's memory_devices) have no cell */
				continue;
			if (json_is_object(v))
				json_object_foreach(v, sub, w)
					n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s.%s", n ? "," : "", key, sub);
			else
				n += (size_t)snprintf(want + n, sizeof(want) - n, "%s%s", n ? "," : "", key);
		}
		snprintf(path, sizeof(path), "%s%sformat=csv", tables[i].path, strchr(tables[i].path, '?') ? "&" : "?");
		r = get_resp(path, 200);
		ck_assert_msg(!strncmp(r.content_type, "text/csv", 8), "%s: %s", path, r.content_type);
		ck_assert_str_eq(header_of(r.body), want);
		ck_assert_uint_eq(count_lines(r.body), json_array_size(rows) + 1);
		/* every row starts with the answer's rank (1: distributedInfo of the V100 trace) */
		ck_assert_msg(!strncmp(strstr(r.body, "\r\n") + 2, "1,", 2), "%s: %s", path, r.body);
		tu_resp_free(&r);
		json_decref(j);
	}

	/* an empty table is its header, not 0 bytes (pandas reads it as 0 rows) */
	struct tu_resp r = get_resp("/api/v1/runs/memonly/steps?format=csv", 200);
	ck_assert_str_eq(r.body, "rank,step,start_ns,dur_ns,cpu_dur_ns,comm_overlap_ns,incomplete,whole_trace,"
				 "breakdown_ns.kernel,breakdown_ns.memcpy,breakdown_ns.memset,breakdown_ns.communication,"
				 "breakdown_ns.runtime,breakdown_ns.dataloader,breakdown_ns.cpu,breakdown_ns.idle,"
				 "gpu_utilization_pct,note\r\n");
	tu_resp_free(&r);
	r = get_resp("/api/v1/runs/memonly/kernels?format=csv", 200);
	ck_assert_str_eq(r.body, "rank,name,calls,total_ns,mean_ns,max_ns,min_ns,blocks_per_sm,achieved_occupancy_pct,class\r\n");
	tu_resp_free(&r);
	r = get_resp("/api/v1/runs/memonly/ops?format=csv&device=gpu", 200);
	ck_assert_str_eq(r.body, "rank,name,calls,self_ns,total_ns,group\r\n");
	tu_resp_free(&r);
}
END_TEST

START_TEST(test_format_answered_or_refused_everywhere)
{
	/* every GET that is not a table: csv is refused with 400, never answered as JSON */
	static const char *const json_only[] = {
		"/api/v1/runs", "/api/v1/runs/v100", "/api/v1/runs/v100/metrics", "/api/v1/runs/v100/diagnosis",
		"/api/v1/runs/v100/trace", "/api/v1/runs/v100/memory", "/api/v1/runs/v100/memory/peak",
		"/api/v1/runs/v100/artifacts/1", "/api/v1/runs/v100/artifacts/1/raw", "/api/v1/compare?base=v100&target=v100",
		"/healthz", "/api/v1/openapi.yaml",
	};
	static const char *const tables[] = { "/api/v1/runs/v100/steps", "/api/v1/runs/v100/ops",
					      "/api/v1/runs/v100/kernels", "/api/v1/runs/v100/ranks" };
	char path[256];
	json_t *j;

	for (size_t i = 0; i < sizeof(json_only) / sizeof(json_only[0]); i++) {
		const char *sep = strchr(json_only[i], '?') ? "&" : "?";
		snprintf(path, sizeof(path), "%s%sformat=csv", json_only[i], sep);
		j = get(path, 400);
		ck_assert_msg(!strcmp(tu_error_code(j), "format_not_supported"), "%s: %s", path, tu_error_code(j));
		json_decref(j);
		snprintf(path, sizeof(path), "%s%sformat=xml", json_only[i], sep);
		j = get(path, 400);
		ck_assert_msg(!strcmp(tu_error_code(j), "invalid_parameter"), "%s: %s", path, tu_error_code(j));
		json_decref(j);
		snprintf(path, sizeof(path), "%s%sformat=json", json_only[i], sep);
		struct tu_resp r = get_resp(path, 200);
		tu_resp_free(&r);
	}
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		snprintf(path, sizeof(path), "%s?format=xml", tables[i]);
		j = get(path, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_parameter");
		json_decref(j);
	}
	/* a write with ?format=csv is refused before its body is read */
	struct tu_resp r;
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/fmt/artifacts?name=a.json&format=csv", "[]", 2, NULL, &r), 0);
	ck_assert_int_eq(r.status, 400);
	tu_resp_free(&r);
	j = get("/api/v1/runs/fmt", 404);
	json_decref(j);
}
END_TEST

START_TEST(test_unknown_rank_404)
{
	static const char *const paths[] = {
		"/api/v1/runs/v100/steps?rank=7", "/api/v1/runs/v100/ops?rank=7", "/api/v1/runs/v100/kernels?rank=7",
		"/api/v1/runs/v100/diagnosis?rank=7", "/api/v1/runs/v100/trace?rank=7", "/api/v1/runs/v100/memory?rank=7",
		"/api/v1/runs/v100/memory/peak?rank=7", "/api/v1/runs/v100/steps?rank=7&format=csv",
		"/api/v1/compare?base=v100&target=v100&rank=7", "/api/v1/runs/v100/steps?rank=0",
	};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct tu_resp r = get_resp(paths[i], 404);
		json_t *j = tu_json(&r);
		ck_assert_str_eq(r.content_type, "application/json");
		ck_assert_msg(!strcmp(tu_error_code(j), "rank_not_found"), "%s: %s", paths[i], tu_error_code(j));
		json_decref(j);
		tu_resp_free(&r);
	}
	/* the rank the run has still answers */
	json_decref(get("/api/v1/runs/v100/steps?rank=1", 200));
	json_decref(get("/api/v1/runs/memonly/memory?rank=0", 200));
}
END_TEST

START_TEST(test_openapi_served)
{
	char *path = tu_source_path("schemas/openapi.yaml");
	size_t len;
	uint8_t *want = tu_read_file(path, &len);
	struct tu_resp r = get_resp("/api/v1/openapi.yaml", 200);

	ck_assert_ptr_nonnull(want);
	ck_assert_str_eq(r.content_type, "application/yaml; charset=utf-8");
	ck_assert_uint_eq(r.len, len);
	ck_assert(!memcmp(r.body, want, len));
	tu_resp_free(&r);
	free(want);
	free(path);

	/* and the schemas it refers to, where its relative $refs lead */
	path = tu_source_path("schemas/api/compare.schema.json");
	want = tu_read_file(path, &len);
	r = get_resp("/api/v1/api/compare.schema.json", 200);
	ck_assert_uint_eq(r.len, len);
	ck_assert(!memcmp(r.body, want, len));
	tu_resp_free(&r);
	free(want);
	free(path);
	json_decref(get("/api/v1/api/openapi.yaml", 404));
	json_decref(get("/api/v1/api/nope.schema.json", 404));
}
END_TEST

static long status_with(const struct tu_server *s, const char *method, const char *path, const char *body,
			const char *header, const char *code)
{
	struct tu_resp r;
	long st;

	ck_assert_int_eq(tu_http(s, method, path, body, body ? strlen(body) : 0, header, &r), 0);
	st = r.status;
	if (code) {
		json_t *j = tu_json(&r);
		ck_assert_msg(!strcmp(tu_error_code(j), code), "%s %s: %s", method, path, r.body);
		json_decref(j);
	}
	tu_resp_free(&r);
	return st;
}

START_TEST(test_read_token_on_write_403)
{
	struct tu_server s;
	char *dir = tu_tmpdir(), tokfile[600];
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char file[] = "secret-token-0123456789\nread reader-token-0123456789\n";
	const char *w = "Authorization: Bearer secret-token-0123456789";
	const char *rd = "Authorization: Bearer reader-token-0123456789";
	const char *bad = "Authorization: Bearer reader-token-012345678X";
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";

	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	ck_assert_int_eq(tu_write_file(tokfile, file, strlen(file)), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	ck_assert_int_eq(status_with(&s, "POST", "/api/v1/runs/t/artifacts", body, rd, "forbidden"), 403);
	ck_assert_int_eq(status_with(&s, "PATCH", "/api/v1/runs/t", "{\"tags\":[]}", rd, "forbidden"), 403);
	ck_assert_int_eq(status_with(&s, "POST", "/api/v1/runs/t/metrics", "", rd, "forbidden"), 403);
	/* no token, or one the server does not know: 401 */
	ck_assert_int_eq(status_with(&s, "POST", "/api/v1/runs/t/artifacts", body, bad, "unauthorized"), 401);
	ck_assert_int_eq(status_with(&s, "POST", "/api/v1/runs/t/artifacts", body, NULL, "unauthorized"), 401);
	ck_assert_int_eq(status_with(&s, "GET", "/api/v1/runs", NULL, bad, "unauthorized"), 401);
	/* nothing was written; the write token writes; the description needs no token */
	ck_assert_int_eq(status_with(&s, "GET", "/api/v1/runs/t", NULL, rd, "run_not_found"), 404);
	ck_assert_int_eq(status_with(&s, "POST", "/api/v1/runs/t/artifacts", body, w, NULL), 201);
	ck_assert_int_eq(status_with(&s, "GET", "/api/v1/openapi.yaml", NULL, NULL, NULL), 200);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

static int says(json_t *j, const char *text)
{
	size_t i;
	json_t *v;

	json_array_foreach(json_object_get(j, "reasons"), i, v)
		if (strstr(json_string_value(v), text))
			return 1;
	return 0;
}

START_TEST(test_compare_not_comparable)
{
	static const struct { const char *base, *target, *verdict, *reason; } cases[] = {
		/* different models: ResNet-50 against the V100 training job (30 % of operator names shared) */
		{ "v100", "resnet", "not_comparable", "different models by their operators" },
		/* steps in one run only */
		{ "alexnet", "v100", "not_comparable", "base 'alexnet' has no ProfilerStep spans" },
		/* a memory timeline against a trace: no steps in one, and nothing to set side by side */
		{ "memonly", "v100", "not_comparable", "has no ProfilerStep spans" },
		/* neither has steps, and only one has memory */
		{ "alexnet", "memonly", "not_comparable", "only one has memory data" },
		/* the same model, as before */
		/* (steps own the GPU work they launched: 137.3 -> 111.2 ms over 2 steps each, not significant) */
		{ "cmp_base", "cmp_test", "no_change", "not significant at alpha 0.05" },
		{ "v100", "v100", "no_change", "within the 5% threshold" },
	};
	char path[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), "/api/v1/compare?base=%s&target=%s", cases[i].base, cases[i].target);
		json_t *j = get(path, 200);
		ck_assert_msg(!strcmp(json_string_value(json_object_get(j, "verdict")), cases[i].verdict), "%s: %s", path,
			      json_string_value(json_object_get(j, "verdict")));
		ck_assert_msg(says(j, cases[i].reason), "%s: no reason '%s'", path, cases[i].reason);
		/* the reasons why not come first */
		if (!strcmp(cases[i].verdict, "not_comparable"))
			ck_assert(!strncmp(json_string_value(json_array_get(json_object_get(j, "reasons"), 0)),
					   "not comparable: ", 16));
		else
			ck_assert(!says(j, "not comparable"));
		json_decref(j);
	}
}
END_TEST

/* ---- trace exports ---- */

/* A fixture trace, parsed (new reference). */
static json_t *fixture_json(const char *rel)
{
	char *path = tu_fixture(rel);
	size_t zlen, len;
	uint8_t *z = tu_read_file(path, &zlen), *text = z ? tu_gunzip(z, zlen, &len) : NULL;
	json_t *j = text ? json_loadb((const char *)text, len, 0, NULL) : NULL;

	ck_assert_msg(j != NULL, "cannot read %s", path);
	free(text);
	free(z);
	free(path);
	return j;
}

static json_t *get_trace(const char *path)
{
	struct tu_resp r = get_resp(path, 200);
	json_t *j = json_loadb(r.body, r.len, 0, NULL);

	ck_assert_msg(j != NULL, "%s: not JSON", path);
	tu_resp_free(&r);
	return j;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The CPU->GPU flows (cat ac2g) and metadata events of a trace, one line
 * each ("ph id pid tid ts name args"), sorted and joined (malloc'd); their
 * counts in *nflows and *nmeta.
 */
static char *flows_and_meta(json_t *trace, size_t *nflows, size_t *nmeta)
{
	json_t *e;
	size_t i, n = 0, total = 1;
	char **lines = calloc(json_array_size(json_object_get(trace, "traceEvents")) + 1, sizeof(*lines)), *out;

	*nflows = *nmeta = 0;
	json_array_foreach(json_object_get(trace, "traceEvents"), i, e) {
		const char *ph = json_string_value(json_object_get(e, "ph")), *cat = json_string_value(json_object_get(e, "cat"));
		int meta = ph && !strcmp(ph, "M");
		if (!meta && !(ph && (!strcmp(ph, "s") || !strcmp(ph, "f")) && cat && !strcmp(cat, "ac2g")))
			continue;
		*(meta ? nmeta : nflows) += 1;
		char *pid = json_dumps(json_object_get(e, "pid"), JSON_ENCODE_ANY);
		char *tid = json_dumps(json_object_get(e, "tid"), JSON_ENCODE_ANY);
		char *args = json_dumps(json_object_get(e, "args"), JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
		ck_assert_int_ge(asprintf(&lines[n++], "%s %lld %s %s %.3f %s %s %s\n", ph,
					  (long long)json_integer_value(json_object_get(e, "id")), pid, tid,
					  json_number_value(json_object_get(e, "ts")), json_string_value(json_object_get(e, "name")),
					  meta ? args : "", ph[0] == 'f' ? json_string_value(json_object_get(e, "bp")) : ""), 0);
		total += strlen(lines[n - 1]);
		free(pid);
		free(tid);
		free(args);
	}
	qsort(lines, n, sizeof(*lines), cmp_str);
	out = malloc(total);
	out[0] = 0;
	for (i = 0, total = 0; i < n; i++) {
		memcpy(out + total, lines[i], strlen(lines[i]) + 1);
		total += strlen(lines[i]);
		free(lines[i]);
	}
	free(lines);
	return out;
}

START_TEST(test_trace_export_complete)
{
	json_t *orig = fixture_json("traces/hta_v100_train_memory.json.gz"), *out = get_trace("/api/v1/runs/v100/trace");
	size_t of, om, xf, xm;
	char *a = flows_and_meta(orig, &of, &om), *b = flows_and_meta(out, &xf, &xm);

	/* the 64,663 flows (fixtures/README.md) as PyTorch wrote them, and every metadata event */
	ck_assert_uint_eq(of, 64663);
	ck_assert_uint_eq(xf, of);
	ck_assert_uint_eq(xm, om);
	ck_assert_msg(!strcmp(a, b), "flows or metadata differ from the upload");
	ck_assert_uint_eq(json_array_size(json_object_get(out, "traceEvents")),
			  json_array_size(json_object_get(orig, "traceEvents")));
	/* the top level as uploaded */
	ck_assert(json_equal(json_object_get(out, "deviceProperties"), json_object_get(orig, "deviceProperties")));
	ck_assert(json_equal(json_object_get(out, "distributedInfo"), json_object_get(orig, "distributedInfo")));
	ck_assert(json_equal(json_object_get(out, "schemaVersion"), json_object_get(orig, "schemaVersion")));
	ck_assert_ptr_null(json_object_get(out, "baseTimeNanoseconds"));	/* absolute times, as uploaded */
	free(a);
	free(b);
	json_decref(orig);
	json_decref(out);
}
END_TEST

START_TEST(test_trace_window_has_names_and_properties)
{
	/* ProfilerStep#3 of the V100 trace, far from the metadata events' own ts */
	json_t *w = get_trace("/api/v1/runs/v100/trace?start_ns=1669783687730492000&end_ns=1669783688095748000");
	json_t *e, *dp = json_object_get(w, "deviceProperties");
	size_t i, s = 0, f = 0, names = 0, sorts = 0, labels = 0;

	json_array_foreach(json_object_get(w, "traceEvents"), i, e) {
		const char *ph = json_string_value(json_object_get(e, "ph")), *name = json_string_value(json_object_get(e, "name"));
		json_t *args = json_object_get(e, "args");
		s += !strcmp(ph, "s");
		f += !strcmp(ph, "f");
		if (strcmp(ph, "M"))
			continue;
		names += (!strcmp(name, "process_name") || !strcmp(name, "thread_name")) &&
			 json_is_string(json_object_get(args, "name"));
		sorts += (!strcmp(name, "process_sort_index") || !strcmp(name, "thread_sort_index")) &&
			 json_is_integer(json_object_get(args, "sort_index"));
		labels += !strcmp(name, "process_labels") && json_is_string(json_object_get(args, "labels"));
	}
	ck_assert_uint_gt(names, 0);
	ck_assert_uint_gt(sorts, 0);
	ck_assert_uint_gt(labels, 0);
	ck_assert_uint_gt(s, 1000);
	ck_assert_uint_gt(f, s);
	/* the top level as uploaded (the whole export is compared with the fixture above) */
	ck_assert_uint_eq(json_array_size(dp), 2);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(dp, 1), "name")), "Tesla V100-SXM2-32GB");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(w, "distributedInfo"), "rank")), 1);
	json_decref(w);
}
END_TEST

START_TEST(test_trace_base_time)
{
	/* relative times and baseTimeNanoseconds, as PyTorch 2 writes them, come back the same way */
	json_t *orig = fixture_json("traces/hta_nccl_rel_ts.json.gz"), *out = get_trace("/api/v1/runs/nccl/trace"), *e;
	json_t *oev = json_object_get(orig, "traceEvents"), *xev = json_object_get(out, "traceEvents");
	size_t i, checked = 0, j = 0;

	ck_assert(json_equal(json_object_get(out, "baseTimeNanoseconds"), json_object_get(orig, "baseTimeNanoseconds")));
	ck_assert(json_integer_value(json_object_get(out, "baseTimeNanoseconds")) > 0);
	ck_assert_uint_eq(json_array_size(xev), json_array_size(oev));
	/* the first complete events, in order, at the same relative ts */
	json_array_foreach(oev, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "ph")), "X") || checked == 100)
			continue;
		while (strcmp(json_string_value(json_object_get(json_array_get(xev, j), "ph")), "X"))
			j++;
		json_t *x = json_array_get(xev, j++);
		ck_assert_str_eq(json_string_value(json_object_get(x, "name")), json_string_value(json_object_get(e, "name")));
		ck_assert_msg(json_number_value(json_object_get(x, "ts")) == json_number_value(json_object_get(e, "ts")),
			      "%s: ts %f, uploaded %f", json_string_value(json_object_get(e, "name")),
			      json_number_value(json_object_get(x, "ts")), json_number_value(json_object_get(e, "ts")));
		checked++;
	}
	ck_assert_uint_eq(checked, 100);
	json_decref(orig);
	json_decref(out);
}
END_TEST

/* One request of the waiting run's loop below: its status, the body as JSON in *j (NULL when not JSON). */
static long fresh_call(const char *method, const char *path, const char *body, json_t **j)
{
	struct tu_resp r;
	json_error_t e;
	long status;

	ck_assert_int_eq(tu_http(&srv, method, path, body, body ? strlen(body) : 0, NULL, &r), 0);
	*j = r.len ? json_loadb(r.body, r.len, 0, &e) : NULL;
	status = r.status;
	tu_resp_free(&r);
	return status;
}

/* "/api/v1/runs/fresh" and tail into out, its {id} as 1 */
static void fresh_path(char *out, size_t size, const char *tail)
{
	const char *id = strstr(tail, "{id}");

	if (id)
		snprintf(out, size, "/api/v1/runs/fresh%.*s1%s", (int)(id - tail), tail, id + 4);
	else
		snprintf(out, size, "/api/v1/runs/fresh%s", tail);
}

/*
 * A run that a collector polled for and that has no artifact yet (issue 52: it waits for its
 * first capture) answers every run route of server/routes.c cleanly: reads 200 (empty lists) or
 * 404 with a JSON error that is not run_not_found (an answer that needs data); the writes as
 * listed; compare says not comparable; an upload ends the waiting; the delete takes it.
 * A run route added to the table without a case here fails the test.
 */
START_TEST(test_run_routes_without_artifacts)
{
	/* the run routes that are not reads, in the order they are sent (the delete last) */
	static const struct { const char *method, *tail, *body; long status; } writes[] = {
		{ "POST", "/captures", "{\"steps\": 3}", 201 },
		{ "PATCH", "", "{\"tags\": [\"fresh\"]}", 200 },
		{ "POST", "/metrics", "{\"step\": 1, \"name\": \"tokens_per_step\", \"value\": 5}", 200 },
		{ "DELETE", "/artifacts/{id}", NULL, 404 },
		{ "POST", "/artifacts?rank=0&name=t.json", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":5}]", 201 },
		{ "DELETE", "", NULL, 200 },
	};
	static const char prefix[] = "/api/v1/runs/{run}";
	const struct route *rt = server_routes.route;
	size_t nw = sizeof(writes) / sizeof(writes[0]), i, k, reads = 0, done[8] = { 0 };
	char path[512];
	json_t *j, *run;
	long st;

	/* a collector's poll makes the run: listed, waiting, no artifact */
	ck_assert_int_eq(fresh_call("GET", "/api/v1/runs/fresh/captures/next?rank=0", NULL, &j), 204);
	j = get("/api/v1/runs/fresh", 200);
	run = json_object_get(j, "run");
	ck_assert_int_eq(json_integer_value(json_object_get(run, "artifacts")), 0);
	ck_assert(json_is_true(json_object_get(run, "waiting_for_capture")));
	ck_assert_uint_eq(json_array_size(json_object_get(j, "artifacts")), 0);
	json_decref(j);
	j = get("/api/v1/runs", 200);
	for (i = 0, k = 0; i < json_array_size(json_object_get(j, "runs")); i++) {
		json_t *e = json_array_get(json_object_get(j, "runs"), i);
		k += !strcmp(json_string_value(json_object_get(e, "name")), "fresh") &&
		     json_is_true(json_object_get(e, "waiting_for_capture"));
		/* the others have uploads: not waiting */
		ck_assert(!strcmp(json_string_value(json_object_get(e, "name")), "fresh") ||
			  json_is_false(json_object_get(e, "waiting_for_capture")));
	}
	ck_assert_uint_eq(k, 1);
	json_decref(j);

	/* every read first, on the bare run */
	for (i = 0; i < server_routes.n; i++) {
		const char *tail = rt[i].pattern + sizeof(prefix) - 1;
		if (strncmp(rt[i].pattern, prefix, sizeof(prefix) - 1) || (*tail && *tail != '/') ||
		    strcmp(rt[i].method, "GET"))
			continue;
		fresh_path(path, sizeof(path), tail);
		/* the parameters two routes require */
		if (!strcmp(tail, "/captures/next"))
			strcat(path, "?rank=0");
		else if (!strcmp(tail, "/critical_path"))
			strcat(path, "?step=1");
		st = fresh_call("GET", path, NULL, &j);
		ck_assert_msg(st == 200 || st == 204 || st == 404, "GET %s: %ld", path, st);
		if (st == 404) {
			ck_assert_msg(tu_error_code(j) && strcmp(tu_error_code(j), "run_not_found") &&
				      json_is_string(json_object_get(json_object_get(j, "error"), "message")),
				      "GET %s: 404 without its JSON error, or run_not_found", path);
		} else if (st == 200 && strcmp(tail, "/trace")) {
			ck_assert_msg(j != NULL, "GET %s: 200 without JSON", path);
		}
		json_decref(j);
		reads++;
	}
	ck_assert_uint_ge(reads, 20);
	/* the runs page's compare: not comparable, with the reason */
	j = get("/api/v1/compare?base=fresh&target=v100", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "not_comparable");
	json_decref(j);
	/* the run page itself */
	st = fresh_call("GET", "/runs/fresh", NULL, &j);
	ck_assert_int_eq(st, 200);
	json_decref(j);

	/* the writes, each run route that is not a read covered */
	for (i = 0; i < server_routes.n; i++) {
		const char *tail = rt[i].pattern + sizeof(prefix) - 1;
		if (strncmp(rt[i].pattern, prefix, sizeof(prefix) - 1) || (*tail && *tail != '/') ||
		    !strcmp(rt[i].method, "GET"))
			continue;
		for (k = 0; k < nw; k++)
			if (!strcmp(writes[k].method, rt[i].method) && !strncmp(writes[k].tail, tail, strlen(tail)) &&
			    (writes[k].tail[strlen(tail)] == 0 || writes[k].tail[strlen(tail)] == '?'))
				break;
		ck_assert_msg(k < nw, "%s %s: no case for a run without artifacts", rt[i].method, rt[i].pattern);
	}
	for (k = 0; k < nw; k++) {
		fresh_path(path, sizeof(path), writes[k].tail);
		st = fresh_call(writes[k].method, path, writes[k].body, &j);
		ck_assert_msg(st == writes[k].status, "%s %s: %ld, expected %ld", writes[k].method, path, st,
			      writes[k].status);
		if (st >= 400)
			ck_assert_msg(tu_error_code(j) && strcmp(tu_error_code(j), "run_not_found"), "%s %s",
				      writes[k].method, path);
		json_decref(j);
		done[k] = 1;
		/* the upload ends the waiting */
		if (!strcmp(writes[k].tail, "/artifacts?rank=0&name=t.json")) {
			j = get("/api/v1/runs/fresh", 200);
			run = json_object_get(j, "run");
			ck_assert_int_eq(json_integer_value(json_object_get(run, "artifacts")), 1);
			ck_assert(json_is_false(json_object_get(run, "waiting_for_capture")));
			json_decref(j);
		}
	}
	for (k = 0; k < nw; k++)
		ck_assert(done[k]);
	/* deleted: gone until a collector polls again */
	json_decref(get("/api/v1/runs/fresh", 404));
}
END_TEST

Suite *suite_api_contract(void)
{
	Suite *s = suite_create("api_contract");
	TCase *tc = tcase_create("api_contract");

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 300);	/* a whole export of 216,092 events and the fixture, parsed, under ASan */
	tcase_add_test(tc, test_csv_header_always_and_rank_column);
	tcase_add_test(tc, test_format_answered_or_refused_everywhere);
	tcase_add_test(tc, test_unknown_rank_404);
	tcase_add_test(tc, test_openapi_served);
	tcase_add_test(tc, test_read_token_on_write_403);
	tcase_add_test(tc, test_compare_not_comparable);
	tcase_add_test(tc, test_trace_export_complete);
	tcase_add_test(tc, test_trace_window_has_names_and_properties);
	tcase_add_test(tc, test_trace_base_time);
	tcase_add_test(tc, test_run_routes_without_artifacts);
	suite_add_tcase(s, tc);
	return s;
}
