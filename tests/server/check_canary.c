/*
 * check_canary.c: rlhf-canary metrics.json (server/ingest/canary.c): its
 * detection among the JSON kinds, the synthetic example's figures read from
 * the file apart (jansson here, not the parser), fed in pieces; then the
 * members the canary can leave null, and what it never writes: a 400 naming
 * the member, a 413 past the cap.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/canary.h"
#include "suites.h"
#include "testutil.h"

static int detect(const char *s, int at_end)
{
	return canary_detect((const uint8_t *)s, strlen(s), at_end);
}

START_TEST(test_detect)
{
	/* the canary's first key (pydantic's field order), or its own keys after shared ones */
	ck_assert_int_eq(detect("{\n  \"run_id\": \"dpo_1\"", 0), 1);
	ck_assert_int_eq(detect("{\"timestamp\": \"x\", \"env\": {\"a\": [1, {\"b\": \"}\"}]}, \"perf\": {}}", 1), 1);
	/* a Kineto trace decides at its first key; a JSON of neither, at its first other key or its end */
	ck_assert_int_eq(detect("{\"schemaVersion\": 1, \"traceEvents\": []}", 0), 0);
	ck_assert_int_eq(detect("  {\"traceEvents\": [", 0), 0);
	ck_assert_int_eq(detect("{\"timestamp\": \"x\", \"traceEvents\": []}", 0), 0);
	ck_assert_int_eq(detect("{\"hello\": 1}", 1), 0);
	ck_assert_int_eq(detect("{\"timestamp\": \"x\"}", 1), 0);
	ck_assert_int_eq(detect("{}", 1), 0);
	ck_assert_int_eq(detect("[{\"run_id\": 1}]", 1), 0);
	/* more bytes needed, unless there are none */
	ck_assert_int_eq(detect("{", 0), -1);
	ck_assert_int_eq(detect("{\"run_", 0), -1);
	ck_assert_int_eq(detect("{\"timestamp\": \"2026-01", 0), -1);
	ck_assert_int_eq(detect("{\"timestamp\": \"2026-01", 1), 0);
	ck_assert_int_eq(detect("   ", 0), -1);
	/* an escaped quote does not end a key or value */
	ck_assert_int_eq(detect("{\"status\": \"a\\\"b\", \"run_id\": 1}", 1), 1);
}
END_TEST

static int parse(const void *d, size_t len, size_t piece, size_t cap, struct canary_parser **pp,
		 const struct canary_metrics **m, struct tp_errbuf *err)
{
	struct canary_parser *p = canary_parser_new(cap);
	int rc = TP_OK;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len && !rc; i += piece)
		rc = canary_parser_feed(p, (const uint8_t *)d + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = canary_parser_finish(p, m, err);
	*pp = p;
	return rc;
}

static double num(json_t *j, const char *a, const char *b, const char *c)
{
	j = json_object_get(j, a);
	if (b)
		j = json_object_get(j, b);
	if (c)
		j = json_object_get(j, c);
	ck_assert(json_is_number(j));
	return json_number_value(j);
}

START_TEST(test_example)
{
	char *path = tu_fixture("formats/canary_metrics_example_SYNTHETIC.json");
	size_t len;
	uint8_t *d = tu_read_file(path, &len);
	json_t *j = json_load_file(path, 0, NULL), *top;
	static const size_t pieces[] = { 1, 7, 4096 };

	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(j);
	ck_assert_int_eq(canary_detect(d, len < 4096 ? len : 4096, 0), 1);
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		struct canary_parser *p;
		const struct canary_metrics *m;
		struct tp_errbuf err = { 0 };
		ck_assert_int_eq(parse(d, len, pieces[k], CANARY_MAX_BYTES, &p, &m, &err), TP_OK);
		ck_assert_str_eq(m->run_id, json_string_value(json_object_get(j, "run_id")));
		ck_assert_str_eq(m->status, "completed");
		ck_assert_int_eq(m->perf.steps, (int64_t)num(j, "perf", "step_time", "count"));
		for (int i = 0; i < CANARY_NSTAT; i++)
			ck_assert_double_eq(m->perf.step_s[i], num(j, "perf", "step_time", canary_stat_names[i]));
		ck_assert_double_eq(m->perf.step_s[CANARY_MEAN], 0.512);
		ck_assert_double_eq(m->perf.tokens_per_s, num(j, "perf", "approx_tokens_per_sec", NULL));
		ck_assert_double_eq(m->perf.max_mem_mb, num(j, "perf", "max_mem_mb", NULL));
		ck_assert_double_eq(m->perf.gpu_util_pct, num(j, "perf", "gpu_utilization_avg", NULL));
		ck_assert_int_eq(m->perf.has_profiler, 1);
		ck_assert_double_eq(m->perf.cuda_total_ms, num(j, "profiler", "cuda_time_total_ms", NULL));
		ck_assert_double_eq(m->perf.cpu_total_ms, num(j, "profiler", "cpu_time_total_ms", NULL));
		top = json_object_get(json_object_get(j, "profiler"), "top_cuda_ops");
		ck_assert_int_eq(m->nops[CANARY_CUDA], json_array_size(top));
		ck_assert_str_eq(m->ops[CANARY_CUDA][1].name, json_string_value(json_object_get(json_array_get(top, 1), "name")));
		ck_assert_double_eq(m->ops[CANARY_CUDA][1].self_ms,
				    json_number_value(json_object_get(json_array_get(top, 1), "self_cuda_time_ms")));
		ck_assert_int_eq(m->ops[CANARY_CPU][0].count, 15000);
		ck_assert_int_eq(m->nan_steps, 0);
		ck_assert_int_eq(m->loss_diverged, 0);
		ck_assert_ptr_nonnull(strstr(m->env_json, "\"gpu_name\":\"NVIDIA H100 80GB HBM3\""));
		ck_assert_ptr_nonnull(strstr(m->config_json, "\"batch_size\":2"));
		canary_parser_free(p);
	}
	free(d);
	free(path);
	json_decref(j);
}
END_TEST

/* What the canary leaves null: no steps (all stats null), no profiler block, a first-commit file without one. */
START_TEST(test_nulls)
{
	static const char text[] = "{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 0, \"mean\": null, \"std\": null},"
				   " \"approx_tokens_per_sec\": null, \"max_mem_mb\": 0.0, \"gpu_utilization_avg\": null},"
				   " \"profiler\": null}";
	struct canary_parser *p;
	const struct canary_metrics *m;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(parse(text, sizeof(text) - 1, 4096, CANARY_MAX_BYTES, &p, &m, &err), TP_OK);
	ck_assert_int_eq(m->perf.steps, 0);
	ck_assert(isnan(m->perf.step_s[CANARY_MEAN]) && isnan(m->perf.tokens_per_s) && isnan(m->perf.gpu_util_pct));
	ck_assert_int_eq(m->perf.has_profiler, 0);
	ck_assert_int_eq(m->nan_steps, -1);
	ck_assert_int_eq(m->loss_diverged, -1);
	ck_assert_ptr_null(m->env_json);
	ck_assert_ptr_null(m->timestamp);
	canary_parser_free(p);
}
END_TEST

static void refused(const char *text, int rc, const char *says)
{
	struct canary_parser *p;
	const struct canary_metrics *m;
	struct tp_errbuf err = { 0 };

	ck_assert_msg(parse(text, strlen(text), 3, 4096, &p, &m, &err) == rc, "%s: not refused", text);
	ck_assert_msg(strstr(err.msg, says) != NULL, "%s: '%s' does not say '%s'", text, err.msg, says);
	canary_parser_free(p);
}

#define PERF(x) "{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2, \"mean\": 0.5, \"std\": 0.1}, \"max_mem_mb\": 1}" x "}"

START_TEST(test_refused)
{
	char big[5000];

	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2, \"mean\"", TP_ERR_INVALID, "line 1, column");
	refused("{\"perf\": {}}", TP_ERR_INVALID, "run_id: required");
	refused("{\"run_id\": 7}", TP_ERR_INVALID, "run_id: not a string");
	refused("{\"run_id\": \"r\"}", TP_ERR_INVALID, "perf: required");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2}, \"max_mem_mb\": 1}}", TP_ERR_INVALID,
		"perf.step_time.mean: required");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": -1}}}", TP_ERR_INVALID, "perf.step_time.count");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2, \"mean\": -0.5}}}", TP_ERR_INVALID,
		"perf.step_time.mean: below");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2, \"mean\": 1e10}}}", TP_ERR_INVALID,
		"perf.step_time.mean: past");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 0}, \"max_mem_mb\": 1, \"gpu_utilization_avg\": 101}}",
		TP_ERR_INVALID, "perf.gpu_utilization_avg: past");
	refused("{\"run_id\": \"r\", \"perf\": {\"step_time\": {\"count\": 2, \"mean\": 0.5}}}", TP_ERR_INVALID,
		"perf.max_mem_mb: required");
	refused(PERF(", \"profiler\": {\"cuda_time_total_ms\": 1, \"cpu_time_total_ms\": 1, \"top_cuda_ops\": [{\"name\": 3}]}"),
		TP_ERR_INVALID, "profiler.top_cuda_ops[0]: not a string");
	refused(PERF(", \"profiler\": {\"cuda_time_total_ms\": 1, \"cpu_time_total_ms\": 1, \"top_cpu_ops\": {}}"),
		TP_ERR_INVALID, "profiler.top_cpu_ops: not an array");
	refused(PERF(", \"profiler\": {\"cpu_time_total_ms\": 1}"), TP_ERR_INVALID, "profiler.cuda_time_total_ms");
	refused("{\"run_id\": \"r\", \"run_id\": \"s\"}", TP_ERR_INVALID, "duplicate");
	refused("{\"run_id\": \"r\\u0000\"}", TP_ERR_INVALID, "NUL");
	refused("{\"run_id\": \"\xff\"}", TP_ERR_INVALID, "unable to decode byte 0xff");
	refused("[1]", TP_ERR_INVALID, "not an object");
	/* past the cap: 413 */
	memset(big, ' ', sizeof(big));
	big[0] = '{';
	memcpy(big + sizeof(big) - 2, "}", 2);
	refused(big, TP_ERR_TOOBIG, "more than 4096 bytes");
}
END_TEST

Suite *suite_canary(void)
{
	Suite *s = suite_create("canary");
	TCase *tc = tcase_create("canary");

	tcase_add_test(tc, test_detect);
	tcase_add_test(tc, test_example);
	tcase_add_test(tc, test_nulls);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return s;
}
