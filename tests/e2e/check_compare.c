/*
 * check_compare.c: run comparison over HTTP against the real server:
 * GET /api/v1/compare on HTA's trace_compare pair, a run against itself, the
 * V100 trace against a copy of it slowed down by this test, two memory
 * timelines that differ in one category; project baselines; per-step
 * metrics (POST all or none, GET) and the throughput they give; the H200
 * recordings' per-step kernels against their step breakdown, and the memory
 * at their peaks by allocation site; errors.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	if (tu_server_start(&srv, NULL)) {
		fprintf(stderr, "cannot start %s\n", SERVER_BIN);
		abort();
	}
	tu_upload_fixture(&srv, "cmp_base", "traces/hta_compare_base.json.gz");
	tu_upload_fixture(&srv, "cmp_test", "traces/hta_compare_test.json.gz");
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

/* method path [body], expecting status; the answer as JSON */
static json_t *call(const char *method, const char *path, const char *body, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, method, path, body, body ? strlen(body) : 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

static json_t *get(const char *path, long status)
{
	return call("GET", path, NULL, status);
}

/* The entry of list named name, or NULL. */
static json_t *entry(json_t *list, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e)
		if (!strcmp(json_string_value(json_object_get(e, "name")), name))
			return e;
	return NULL;
}

static double num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_number(v), "%s is not a number", key);
	return json_number_value(v);
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	ck_assert_msg(s != NULL, "%s is not a string", key);
	return s;
}

/* Some reason contains text. */
static int says(json_t *j, const char *text)
{
	size_t i;
	json_t *r;

	json_array_foreach(json_object_get(j, "reasons"), i, r)
		if (strstr(json_string_value(r), text))
			return 1;
	return 0;
}

#define ADD_INT "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<int>, " \
	"at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<int>, at::detail::Array<char*, 3>)"

START_TEST(test_fixture_pair)
{
	static const char *const added[] = { "All2All_Pooled_Req", "CatBackward0", "AddmmBackward0" };
	json_t *j = get("/api/v1/compare?base=cmp_base&target=cmp_test", 200), *ops, *kernels, *e;
	size_t i;

	ck_assert_str_eq(str(j, "verdict"), "no_change");
	ck_assert(json_is_false(json_object_get(j, "baseline")));
	json_t *st = json_object_get(j, "step_time");
	/* identical CPU spans (fixtures README), but a step lasts until the GPU work it launched
	 * ends: test lacks the kernel that ended base's step #1010 (135 + 117,128 us against
	 * 135 + 65,084 us: step #1009, a window's first, starts when the GPU work queued before it
	 * ends, 135 us before its own does, as torch-tb-profiler has both); two steps a run cannot
	 * tell that from noise */
	ck_assert_int_eq(num(st, "base_ns"), 58631500);
	ck_assert_int_eq(num(st, "target_ns"), 32609500);
	ck_assert(num(st, "p_value") > 0.05 && json_is_false(json_object_get(st, "significant")));
	ck_assert_int_eq(num(st, "base_steps"), 2);

	/* the three operators only test has, marked added; nccl:all_reduce once a step... twice in all, now once */
	ops = json_object_get(j, "ops");
	for (i = 0; i < 3; i++) {
		ck_assert_msg((e = entry(ops, added[i])) != NULL, "%s missing", added[i]);
		ck_assert_str_eq(str(e, "status"), "added");
		ck_assert(json_is_null(json_object_get(e, "base_calls_per_step")));
		ck_assert(num(e, "target_calls_per_step") == 0.5);	/* once in 2 steps */
	}
	e = entry(ops, "nccl:all_reduce");
	ck_assert_str_eq(str(e, "status"), "changed");
	ck_assert(num(e, "base_calls_per_step") == 1 && num(e, "target_calls_per_step") == 0.5);
	ck_assert(num(e, "delta_calls_per_step") == -0.5);
	/* and nothing else differs */
	json_t *counts = json_object_get(j, "ops_counts");
	ck_assert_int_eq(num(counts, "added"), 3);
	ck_assert_int_eq(num(counts, "removed"), 0);
	ck_assert_int_eq(num(counts, "changed"), 1);
	json_array_foreach(ops, i, e)
		if (strcmp(str(e, "status"), "added") && strcmp(str(e, "name"), "nccl:all_reduce"))
			ck_assert_msg(!strcmp(str(e, "status"), "unchanged") && num(e, "delta_ns_per_step") == 0 &&
				      num(e, "delta_calls_per_step") == 0, "%s changed", str(e, "name"));

	/* kernels count the work inside the steps: the add kernel runs 3 times in base's trace, 2 of
	 * them inside its steps (1 a step), and once inside test's shorter steps (0.5); base's step
	 * #1010 lasts until its copy ends, which test's never runs inside its steps */
	ck_assert(json_is_true(json_object_get(j, "in_steps")) && json_is_null(json_object_get(j, "per_note")));
	kernels = json_object_get(j, "kernels");
	e = entry(kernels, ADD_INT);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(str(e, "status"), "changed");
	ck_assert_str_eq(str(e, "kind"), "kernel");
	ck_assert(num(e, "base_calls_per_step") == 1 && num(e, "target_calls_per_step") == 0.5);
	e = entry(kernels, "Memcpy HtoD (Pinned -> Device)");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(str(e, "status"), "removed");
	counts = json_object_get(j, "kernels_counts");
	ck_assert_int_eq(num(counts, "removed"), 1);
	ck_assert_int_eq(num(counts, "changed") + num(counts, "unchanged") + num(counts, "removed"), num(counts, "total"));
	ck_assert(says(j, "3 operators only in target"));
	ck_assert(says(j, "step time -44.4%") && says(j, "not significant"));
	json_decref(j);

	/* the other way round, the three are removed */
	j = get("/api/v1/compare?base=cmp_test&target=cmp_base", 200);
	for (i = 0; i < 3; i++)
		ck_assert_str_eq(str(entry(json_object_get(j, "ops"), added[i]), "status"), "removed");
	ck_assert_str_eq(str(j, "verdict"), "no_change");
	json_decref(j);
}
END_TEST

START_TEST(test_against_itself)
{
	json_t *j = get("/api/v1/compare?base=cmp_test&target=cmp_test", 200), *e;
	json_t *st = json_object_get(j, "step_time");
	size_t i;

	ck_assert_str_eq(str(j, "verdict"), "no_change");
	ck_assert(num(st, "p_value") == 1 && num(st, "delta_pct") == 0 && num(st, "t") == 0);
	json_array_foreach(json_object_get(j, "breakdown"), i, e)
		ck_assert_msg(num(e, "delta_ns") == 0, "%s", str(e, "component"));
	json_array_foreach(json_object_get(j, "ops"), i, e)
		ck_assert(!strcmp(str(e, "status"), "unchanged") && num(e, "delta_ns_per_step") == 0 &&
			  num(e, "delta_calls_per_step") == 0);
	json_array_foreach(json_object_get(j, "kernels"), i, e)
		ck_assert(!strcmp(str(e, "status"), "unchanged") && num(e, "delta_ns_per_step") == 0);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), num(json_object_get(j, "ops_counts"), "unchanged"));
	json_decref(j);
}
END_TEST

/* The V100 trace's first "ts": the slowed copy stretches time away from it. */
#define V100_T0 1669783687352244LL

/* Copy line to out, the integer after key (when the line has it) replaced by f(value) x 1.5 + off. */
static void put_scaled(char *out, size_t cap, size_t *len, const char *line, const char *key, long long off)
{
	const char *d = strstr(line, key);
	char *num_end;
	long long v, k = (long long)strlen(key);

	if (!d) {
		*len += (size_t)snprintf(out + *len, cap - *len, "%s", line);
		return;
	}
	v = strtoll(d + k, &num_end, 10) - off;
	ck_assert(num_end > d + k);
	/* 1.5 x integer us is exact with one decimal: ns stay exact */
	int w = snprintf(out + *len, cap - *len, "%.*s%lld%s%s", (int)(d + k - line), line, v * 3 / 2 + off,
			 v % 2 ? ".5" : "", num_end);
	ck_assert(w > 0 && (size_t)w < cap - *len);
	*len += (size_t)w;
}

/*
 * The V100 trace 1.5 times slower: every event's time stretched away from
 * the first, and every kernel's and every ProfilerStep's duration times 1.5
 * (so each step, which ends with the kernels it launched, lasts exactly 1.5
 * times as long; copies and memsets and host spans keep their durations), by
 * a text transform of Kineto's layout (each event's "ph"/"cat"/"name" line,
 * then its "ts"/"dur" line); the counts it must find are the fixtures
 * README's, so a transform that missed events fails here.
 */
static char *slowed_v100(size_t *len)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t zlen, n, cap, kernels = 0, steps = 0;
	uint8_t *z = tu_read_file(path, &zlen), *in = z ? tu_gunzip(z, zlen, &n) : NULL;
	char *out, *p, *end;
	int pending = 0;

	ck_assert_ptr_nonnull(in);
	cap = n + n / 8;
	out = malloc(cap);
	ck_assert_ptr_nonnull(out);
	*len = 0;
	for (p = (char *)in, end = p + n; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		char line[4096];

		ck_assert_uint_lt(ll, sizeof(line));
		memcpy(line, p, ll);
		line[ll] = 0;
		p += ll;
		if (strstr(line, "\"ph\": \"X\"") && strstr(line, "\"cat\": \"kernel\"")) {
			pending = 1;
			kernels++;
		} else if (strstr(line, "\"ph\": \"X\"") && strstr(line, "\"name\": \"ProfilerStep#")) {
			pending = 1;
			steps++;
		} else if (strstr(line, "\"ts\": ")) {
			char mid[4200];
			size_t ml = 0;
			put_scaled(mid, sizeof(mid), &ml, line, "\"ts\": ", V100_T0);
			if (pending && strstr(mid, "\"dur\": "))
				put_scaled(out, cap, len, mid, "\"dur\": ", 0);
			else
				put_scaled(out, cap, len, mid, "\"no such key\"", 0);
			pending = 0;
			continue;
		}
		memcpy(out + *len, line, ll);
		*len += ll;
	}
	ck_assert_uint_eq(kernels, 19370);
	ck_assert_uint_eq(steps, 5);
	ck_assert_int_eq(pending, 0);
	free(in);
	free(z);
	free(path);
	return out;
}

START_TEST(test_v100_slowed)
{
	size_t len, i;
	char *slow = slowed_v100(&len);
	json_t *j, *st, *e, *kernels;
	int seen_other = 0;

	tu_upload_fixture(&srv, "v100", "traces/hta_v100_train_memory.json.gz");
	tu_upload(&srv, "v100_slow", "slow.json", slow, len);
	free(slow);
	j = get("/api/v1/compare?base=v100&target=v100_slow&limit=100000", 200);
	ck_assert_str_eq(str(j, "verdict"), "regression");
	st = json_object_get(j, "step_time");
	/* every step is exactly 1.5 times as long (the durations stay exact in ns): only the
	 * double arithmetic of the means and their ratio can move it, far below 1e-9 */
	ck_assert_msg(fabs(num(st, "delta_pct") - 50) < 1e-9, "delta_pct %.12f", num(st, "delta_pct"));
	ck_assert(num(st, "p_value") < 0.001);
	ck_assert(json_is_true(json_object_get(st, "significant")));
	/* steps 2 to 6: one profiling window, its first left out of the test */
	ck_assert_int_eq(num(st, "base_steps"), 4);
	ck_assert_int_eq(num(st, "base_left_out"), 1);
	ck_assert(says(j, "step time +50.0%"));
	ck_assert(says(j, "over 4 and 4 steps, each profiling window's first left out"));
	ck_assert(says(j, "the largest contributor: kernel time"));
	ck_assert(says(j, "led by ncclKernel_AllReduce_RING_LL_Sum_float"));

	/* the scaled kernels first, each +50% of itself, the largest (the all-reduce) on top;
	 * memcpy and memset were not scaled: unchanged, after every kernel */
	kernels = json_object_get(j, "kernels");
	e = json_array_get(kernels, 0);
	ck_assert(!strncmp(str(e, "name"), "ncclKernel_AllReduce_RING_LL_Sum_float", 38));
	ck_assert_int_eq(num(e, "base_ns_per_step"), 357343000 / 5);	/* fixtures README: 357,343 us in 5 steps */
	json_array_foreach(kernels, i, e) {
		if (!strcmp(str(e, "kind"), "kernel")) {
			ck_assert_msg(!seen_other, "kernel %s after an unscaled entry", str(e, "name"));
			ck_assert_str_ne(str(e, "status"), "added");
			/* the per-step figures are rounded to whole ns each: at most 1 ns off */
			ck_assert_msg(fabs(num(e, "delta_ns_per_step") - num(e, "base_ns_per_step") / 2) <= 1, "%s",
				      str(e, "name"));
		} else {
			seen_other = 1;
			ck_assert_str_eq(str(e, "status"), "unchanged");
		}
	}
	ck_assert(seen_other);
	/* the same [memory] events: the same peak */
	ck_assert_int_eq(num(json_object_get(j, "memory"), "delta_bytes"), 0);
	ck_assert_int_eq(num(json_object_get(j, "memory"), "base_peak_bytes"), 6629508096LL);
	json_decref(j);

	/* thresholds: a 60% threshold, or an alpha no test reaches, make it no change */
	j = get("/api/v1/compare?base=v100&target=v100_slow&threshold_pct=60", 200);
	ck_assert_str_eq(str(j, "verdict"), "no_change");
	ck_assert(says(j, "within the 60% threshold"));
	json_decref(j);
	j = get("/api/v1/compare?base=v100&target=v100_slow&alpha=1e-12", 200);
	ck_assert_str_eq(str(j, "verdict"), "no_change");
	ck_assert(says(j, "not significant at alpha 1e-12"));
	json_decref(j);
	/* and the other way it is an improvement */
	j = get("/api/v1/compare?base=v100_slow&target=v100&limit=3", 200);
	ck_assert_str_eq(str(j, "verdict"), "improvement");
	ck_assert_int_eq(json_array_size(json_object_get(j, "kernels")), 3);
	json_decref(j);
}
END_TEST

START_TEST(test_memory_categories)
{
	/* raw export rows [t_ns, action, bytes, category]: parameters, a temporary, and activations (4)
	 * that differ: 500,000 B in one run, 800,000 B in the other */
	static const char a[] = "[[1,0,1000000,0],[2,1,200000,3],[2,1,500000,4],[3,3,-500000,4],[3,3,-200000,3],[4,1,0,0]]";
	static const char b[] = "[[1,0,1000000,0],[2,1,200000,3],[2,1,800000,4],[3,3,-800000,4],[3,3,-200000,3],[4,1,0,0]]";
	json_t *j, *mem, *v;
	const char *key;

	tu_upload(&srv, "mem_a", "a.json", a, strlen(a));
	tu_upload(&srv, "mem_b", "b.json", b, strlen(b));
	j = get("/api/v1/compare?base=mem_a&target=mem_b", 200);
	mem = json_object_get(j, "memory");
	ck_assert_int_eq(num(mem, "base_peak_bytes"), 1700000);
	ck_assert_int_eq(num(mem, "target_peak_bytes"), 2000000);
	ck_assert_int_eq(json_object_size(json_object_get(mem, "by_category")), 8);
	json_object_foreach(json_object_get(mem, "by_category"), key, v)
		ck_assert_msg(json_integer_value(v) == (strcmp(key, "activation") ? 0 : 300000), "%s: %lld", key,
			      (long long)json_integer_value(v));
	/* +17.6% of peak: a regression, and the reason names the category */
	ck_assert_str_eq(str(j, "verdict"), "regression");
	ck_assert(says(j, "the largest contributor: activation +293.0 KiB"));
	/* a memory timeline export records no allocations at its peak: no sites, none in the reason */
	ck_assert(json_is_array(json_object_get(mem, "by_site")));
	ck_assert_int_eq(json_array_size(json_object_get(mem, "by_site")), 0);
	ck_assert(!says(j, "by site"));
	/* no steps in either run: step time not compared, per-trace figures */
	ck_assert(json_is_null(json_object_get(json_object_get(j, "step_time"), "p_value")));
	ck_assert_str_eq(str(j, "per"), "trace");
	ck_assert(json_is_false(json_object_get(j, "in_steps")));
	ck_assert_str_eq(str(j, "per_note"), "neither run has ProfilerStep spans: operators and kernels are whole-trace"
			 " totals, not per step");
	ck_assert(says(j, "step time not compared"));
	json_decref(j);
}
END_TEST

START_TEST(test_baseline)
{
	json_t *j;

	/* no baseline in the (empty) project yet */
	j = get("/api/v1/compare?target=cmp_test", 404);
	ck_assert_str_eq(tu_error_code(j), "no_baseline");
	json_decref(j);
	j = call("PATCH", "/api/v1/runs/cmp_base", "{\"baseline\": true}", 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "baseline")));
	json_decref(j);
	j = get("/api/v1/runs/cmp_base", 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "baseline")));
	json_decref(j);
	j = get("/api/v1/compare?target=cmp_test", 200);
	ck_assert_str_eq(str(j, "base"), "cmp_base");
	ck_assert_str_eq(str(j, "target"), "cmp_test");
	ck_assert(json_is_true(json_object_get(j, "baseline")));
	ck_assert_str_eq(str(j, "verdict"), "no_change");
	json_decref(j);
	/* another project has its own baseline (none here) */
	json_decref(call("PATCH", "/api/v1/runs/cmp_test", "{\"project\": \"other\"}", 200));
	j = get("/api/v1/compare?target=cmp_test", 404);
	ck_assert_str_eq(tu_error_code(j), "no_baseline");
	json_decref(j);
	json_decref(call("PATCH", "/api/v1/runs/cmp_test", "{\"project\": null}", 200));
	json_decref(call("PATCH", "/api/v1/runs/cmp_base", "{\"baseline\": false}", 200));
}
END_TEST

START_TEST(test_metrics)
{
	json_t *j, *t;
	char body[512];

	/* compare first, so that the answer is cached: the POST must invalidate it */
	j = get("/api/v1/compare?base=cmp_base&target=cmp_test", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "throughput")), 0);
	json_decref(j);

	j = call("POST", "/api/v1/runs/cmp_base/metrics",
		 "{\"step\": 1009, \"name\": \"tokens_per_step\", \"value\": 4096}\n"
		 "\r\n"
		 "{\"step\": 1010, \"name\": \"tokens_per_step\", \"value\": 4096}\r\n"
		 "{\"step\": 1009, \"name\": \"loss\", \"value\": 2.5}", 200);
	ck_assert_int_eq(num(j, "written"), 3);
	json_decref(j);
	json_decref(call("POST", "/api/v1/runs/cmp_test/metrics",
			 "{\"step\": 1009, \"name\": \"tokens_per_step\", \"value\": 2048}\n"
			 "{\"step\": 1010, \"name\": \"tokens_per_step\", \"value\": 2048}\n", 200));
	j = get("/api/v1/runs/cmp_base/metrics", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "metrics")), 3);
	t = json_array_get(json_object_get(j, "metrics"), 0);	/* by name, then step */
	ck_assert_str_eq(str(t, "name"), "loss");
	ck_assert(num(t, "value") == 2.5 && num(t, "step") == 1009);
	json_decref(j);
	j = get("/api/v1/runs/cmp_base/metrics?name=tokens_per_step", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "metrics")), 2);
	json_decref(j);

	/* throughput: tokens per step over the mean step time (58,631,500 and 32,609,500 ns) */
	j = get("/api/v1/compare?base=cmp_base&target=cmp_test", 200);
	t = json_array_get(json_object_get(j, "throughput"), 0);
	ck_assert_str_eq(str(t, "metric"), "tokens_per_step");
	ck_assert(fabs(num(t, "base_per_s") - 4096 / 0.0586315) < 1e-6);
	ck_assert(fabs(num(t, "target_per_s") - 2048 / 0.0326095) < 1e-6);
	ck_assert(fabs(num(t, "delta_pct") - ((2048 / 0.0326095) / (4096 / 0.0586315) - 1) * 100) < 1e-9);
	ck_assert(says(j, "the runs do different work per step"));
	json_decref(j);

	/* a repost replaces; a bad line rejects the whole body, naming the line, writing nothing */
	json_decref(call("POST", "/api/v1/runs/cmp_base/metrics", "{\"step\": 1009, \"name\": \"loss\", \"value\": 2}", 200));
	static const char *const bad[] = {
		"{\"step\": 1, \"name\": \"loss\"}",
		"{\"step\": -1, \"name\": \"loss\", \"value\": 1}",
		"{\"step\": 1.5, \"name\": \"loss\", \"value\": 1}",
		"{\"step\": 1, \"name\": \"\", \"value\": 1}",
		"{\"step\": 1, \"name\": \"loss\", \"value\": \"1\"}",
		"{\"step\": 1, \"name\": \"loss\", \"value\": 1, \"rank\": 0}",
		"{\"step\": 1, \"name\": \"loss\", \"value\": 1",
		"[1, \"loss\", 1]",
		"{\"step\": 1, \"name\": \"loss\", \"value\": 1e999}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"step\": 7, \"name\": \"loss\", \"value\": 1}\n"
			 "{\"step\": 8, \"name\": \"loss\", \"value\": 1}\n%s\n", bad[i]);
		j = call("POST", "/api/v1/runs/cmp_base/metrics", body, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_metrics");
		ck_assert_msg(num(j, "line") == 3, "%s", bad[i]);
		ck_assert(!strncmp(json_string_value(json_object_get(json_object_get(j, "error"), "message")), "line 3: ", 8));
		json_decref(j);
	}
	j = call("POST", "/api/v1/runs/cmp_base/metrics", "\n  \n", 400);
	ck_assert_str_eq(tu_error_code(j), "invalid_metrics");
	json_decref(j);
	j = get("/api/v1/runs/cmp_base/metrics?name=loss", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "metrics")), 1);
	ck_assert(num(json_array_get(json_object_get(j, "metrics"), 0), "value") == 2);
	json_decref(j);

	/* unknown runs */
	json_decref(call("POST", "/api/v1/runs/nope/metrics", "{\"step\": 1, \"name\": \"loss\", \"value\": 1}", 404));
	json_decref(get("/api/v1/runs/nope/metrics", 404));
}
END_TEST

/* The trace of tests/fixtures/gpu/<scenario> as run h200-<scenario>. */
static void upload_h200(const char *scenario)
{
	char rel[128], run[64], path[512];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(rel, sizeof(rel), "tests/fixtures/gpu/%s", scenario);
	char *dir = tu_source_path(rel);
	ck_assert_msg((dp = opendir(dir)) != NULL, "no %s", dir);
	snprintf(run, sizeof(run), "h200-%s", scenario);
	while ((d = readdir(dp))) {
		size_t len = strlen(d->d_name), blen;
		if (len < 17 || strcmp(d->d_name + len - 17, ".pt.trace.json.gz"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		uint8_t *b = tu_read_file(path, &blen);
		ck_assert_ptr_nonnull(b);
		tu_upload(&srv, run, d->d_name, b, blen);
		free(b);
		n++;
	}
	closedir(dp);
	free(dir);
	ck_assert_int_eq(n, 1);
}

/* The sum of side's per-step figures of the kernels rows of kind, and how many rows gave one. */
static double kernel_sum(json_t *j, const char *kind, const char *side, size_t *rows)
{
	char key[32];
	double sum = 0;
	size_t i;
	json_t *e;

	snprintf(key, sizeof(key), "%s_ns_per_step", side);
	*rows = 0;
	json_array_foreach(json_object_get(j, "kernels"), i, e)
		if (!strcmp(str(e, "kind"), kind) && json_is_number(json_object_get(e, key))) {
			sum += num(e, key);
			(*rows)++;
		}
	return sum;
}

/* The mean of /steps' breakdown component over run's complete steps. */
static double steps_mean(const char *run, const char *comp)
{
	char path[128];
	size_t i, n = 0;
	double sum = 0;
	json_t *e;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/steps", run);
	json_t *j = get(path, 200);
	json_array_foreach(json_object_get(j, "steps"), i, e)
		if (json_is_false(json_object_get(e, "incomplete"))) {
			sum += num(json_object_get(e, "breakdown_ns"), comp);
			n++;
		}
	json_decref(j);
	ck_assert_uint_gt(n, 0);
	return sum / (double)n;
}

/*
 * The H200 runs (tests/fixtures/gpu): operators and kernels a step count the work inside the
 * steps the breakdown sums. healthy's trace holds 161.9 ms of kernels, 115.7 ms of them in its
 * 5 steps: divided whole, the gemm moved -1.7 ms a step while the kernel time moved +26 us. The
 * kernels run on one stream, one at a time: their times inside the steps add up to the
 * breakdown's kernel (and memcpy, memset) time, each row and the breakdown rounded to whole ns,
 * so within 1 ns a row.
 */
START_TEST(test_h200_in_steps)
{
	static const char *const pairs[][2] = { { "healthy", "healthy_b" }, { "healthy", "dataloader" } };
	static const char *const kinds[][2] = { { "kernel", "kernel" }, { "memcpy", "memcpy" }, { "memset", "memset" } };
	static const char *const sides[] = { "base", "target" };
	char path[160], run[64];
	size_t p, k, s, rows, i;
	json_t *e;

	upload_h200("healthy");
	upload_h200("healthy_b");
	upload_h200("dataloader");
	for (p = 0; p < 2; p++) {
		snprintf(path, sizeof(path), "/api/v1/compare?base=h200-%s&target=h200-%s&limit=100000", pairs[p][0],
			 pairs[p][1]);
		json_t *j = get(path, 200);
		ck_assert_str_eq(str(j, "verdict"), p ? "regression" : "no_change");
		ck_assert_str_eq(str(j, "per"), "step");
		ck_assert(json_is_true(json_object_get(j, "in_steps")) && json_is_null(json_object_get(j, "per_note")));
		/* a long name in a reason keeps its function: the random tokens' kernel, in healthy's steps only
		 * (void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, ...>(...)) */
		if (p)
			ck_assert(says(j, "1 kernel only in base: ...native::distribution_elementwise_grid_stride_kernel<...>"));
		for (s = 0; s < 2; s++) {
			snprintf(run, sizeof(run), "h200-%s", pairs[p][s]);
			for (k = 0; k < 3; k++) {
				double sum = kernel_sum(j, kinds[k][0], sides[s], &rows), bd = NAN;
				json_array_foreach(json_object_get(j, "breakdown"), i, e)
					if (!strcmp(str(e, "component"), kinds[k][1]))
						bd = num(e, s ? "target_ns" : "base_ns");
				ck_assert_msg(rows > 0 && fabs(sum - bd) <= (double)rows, "%s %s %s: %.0f ns a step in %zu rows,"
					      " breakdown %.0f", path, sides[s], kinds[k][0], sum, rows, bd);
				/* "totals" sums before rounding: the breakdown's to the ns */
				json_t *tot = json_object_get(json_object_get(j, "totals"), kinds[k][0]);
				ck_assert_msg(num(tot, s ? "target_ns_per_step" : "base_ns_per_step") == bd, "%s %s totals %s", path,
					      sides[s], kinds[k][0]);
				/* and the breakdown is /steps' over the same steps */
				ck_assert_msg(fabs(bd - steps_mean(run, kinds[k][1])) <= 0.5, "%s %s", run, kinds[k][1]);
			}
			/* each operator a subset of its whole-trace row: no more calls, no more self time */
			snprintf(path, sizeof(path), "/api/v1/runs/%s/ops?limit=100000", run);
			json_t *ops = get(path, 200), *st = json_object_get(j, "step_time");
			double steps = num(st, s ? "target_steps" : "base_steps") + num(st, s ? "target_left_out" : "base_left_out");
			size_t seen = 0;
			json_array_foreach(json_object_get(j, "ops"), i, e) {
				char key[32];
				snprintf(key, sizeof(key), "%s_ns_per_step", sides[s]);
				if (!json_is_number(json_object_get(e, key)))
					continue;
				json_t *w = entry(json_object_get(ops, "ops"), str(e, "name"));
				ck_assert_msg(w != NULL, "%s: no %s in /ops", run, str(e, "name"));
				snprintf(key, sizeof(key), "%s_calls_per_step", sides[s]);
				double calls = num(e, key) * steps;
				snprintf(key, sizeof(key), "%s_ns_per_step", sides[s]);
				ck_assert_msg(calls <= num(w, "calls") + 1e-6 && num(e, key) * steps <= num(w, "self_ns") + steps,
					      "%s %s: %.1f calls, %.0f ns in steps; %.0f, %.0f in all", run, str(e, "name"), calls,
					      num(e, key) * steps, num(w, "calls"), num(w, "self_ns"));
				seen++;
			}
			ck_assert_msg(seen > 10, "%s: %zu operators", run, seen);
			json_decref(ops);
		}
		json_decref(j);
	}
	/* healthy: what the trace holds outside its steps stays out: 161.9 ms of kernels against
	 * 115.7 ms, and the cudaDeviceSynchronize (72.4 ms) Kineto makes after the last step's host span */
	json_t *j = get("/api/v1/compare?base=h200-healthy&target=h200-healthy_b&limit=100000", 200);
	json_t *ops = get("/api/v1/runs/h200-healthy/ops?limit=100000", 200);
	ck_assert(num(entry(json_object_get(ops, "ops"), "cudaDeviceSynchronize"), "self_ns") > 72e6);
	ck_assert_ptr_null(entry(json_object_get(j, "ops"), "cudaDeviceSynchronize"));
	json_decref(ops);
	json_t *kern = get("/api/v1/runs/h200-healthy/kernels?limit=100000", 200);
	double whole = 0, in = kernel_sum(j, "kernel", "base", &rows) * 5;
	json_array_foreach(json_object_get(kern, "kernels"), i, e)
		whole += num(e, "total_ns");
	ck_assert_msg(fabs(whole - 161902397) < 1 && fabs(in - 115663660) <= 5.0 * (double)rows, "%.0f, %.0f", whole, in);
	json_decref(kern);
	json_decref(j);
}
END_TEST

/*
 * Activation checkpointing on and off (the same model and batch): the sites
 * at each peak, folded by (category, site), say which allocations checkpointing
 * took away; by category they sum to the category's change, and the memory
 * reason names the largest. A run against itself: no site changed.
 */
START_TEST(test_memory_sites)
{
	json_t *j, *mem, *sites, *e, *cat;
	const char *key, *first;
	size_t i;

	upload_h200("ckpt_off");
	upload_h200("ckpt_on");
	j = get("/api/v1/compare?base=h200-ckpt_off&target=h200-ckpt_on", 200);
	mem = json_object_get(j, "memory");
	sites = json_object_get(mem, "by_site");
	/* fewer than the 20 listed: every changed site is here, so the sums below are whole */
	ck_assert_msg(json_array_size(sites) > 0 && json_array_size(sites) < 20, "%zu sites", json_array_size(sites));
	e = json_array_get(sites, 0);
	ck_assert_str_eq(str(e, "category"), "activation");
	ck_assert(num(e, "delta_bytes") < 0 && num(e, "delta_bytes") == num(e, "target_bytes") - num(e, "base_bytes"));
	first = str(e, "site");
	json_object_foreach(json_object_get(mem, "by_category"), key, cat) {
		double sum = 0, prev = INFINITY;
		json_array_foreach(sites, i, e) {
			ck_assert_msg(fabs(num(e, "delta_bytes")) <= prev, "by_site is not sorted by change at %zu", i);
			prev = fabs(num(e, "delta_bytes"));
			if (!strcmp(str(e, "category"), key))
				sum += num(e, "delta_bytes");
		}
		ck_assert_msg(sum == (double)json_integer_value(cat), "%s: sites sum to %.0f, the category changed %lld", key,
			      sum, (long long)json_integer_value(cat));
	}
	char want[256];
	snprintf(want, sizeof(want), "; by site, activation at %s -", first);
	ck_assert_msg(says(j, want), "no reason says \"%s\"", want);
	json_decref(j);

	j = get("/api/v1/compare?base=h200-ckpt_on&target=h200-ckpt_on", 200);
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(j, "memory"), "by_site")), 0);
	ck_assert(!says(j, "by site"));
	json_decref(j);
}
END_TEST

START_TEST(test_errors)
{
	static const struct { const char *path; long status; const char *code; } cases[] = {
		{ "/api/v1/compare?base=cmp_base&target=nope", 404, "run_not_found" },
		{ "/api/v1/compare?base=nope&target=cmp_base", 404, "run_not_found" },
		{ "/api/v1/compare?target=nope", 404, "run_not_found" },
		{ "/api/v1/compare?base=cmp_base", 400, "missing_parameter" },
		{ "/api/v1/compare?base=a%20b&target=cmp_base", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=..", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&alpha=0", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&alpha=1.5", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&alpha=nan", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&threshold_pct=-1", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&threshold_pct=x", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&rank=65536", 400, "invalid_parameter" },
		{ "/api/v1/compare?base=cmp_base&target=cmp_test&limit=0", 400, "invalid_parameter" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *j = get(cases[i].path, cases[i].status);
		ck_assert_msg(!strcmp(tu_error_code(j), cases[i].code), "%s: %s", cases[i].path, tu_error_code(j));
		json_decref(j);
	}
	/* a rank neither run has: 404, not a comparison of nothing */
	json_t *j = get("/api/v1/compare?base=cmp_base&target=cmp_test&rank=7", 404);
	ck_assert_str_eq(tu_error_code(j), "rank_not_found");
	json_decref(j);
}
END_TEST

Suite *suite_compare(void)
{
	Suite *s = suite_create("compare");
	TCase *tc = tcase_create("compare");

	tcase_set_timeout(tc, 240);
	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_add_test(tc, test_fixture_pair);
	tcase_add_test(tc, test_against_itself);
	tcase_add_test(tc, test_v100_slowed);
	tcase_add_test(tc, test_memory_categories);
	tcase_add_test(tc, test_baseline);
	tcase_add_test(tc, test_metrics);
	tcase_add_test(tc, test_h200_in_steps);
	tcase_add_test(tc, test_memory_sites);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);
	return s;
}
