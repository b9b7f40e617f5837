/* check_trace.c: the streaming trace parser (server/ingest/trace.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/trace.h"
#include "suites.h"
#include "testutil.h"

struct got {
	struct tp_event *ev;
	size_t n, cap;
	int strings;
	struct trace_parser *p;
};

static int on_string(void *payload, uint32_t id, const char *s, size_t len)
{
	struct got *g = payload;

	(void)id, (void)s, (void)len;
	g->strings++;
	return TP_OK;
}

static int on_event(void *payload, const struct tp_event *e)
{
	struct got *g = payload;

	if (g->n == g->cap) {
		g->cap = g->cap ? g->cap * 2 : 64;
		g->ev = realloc(g->ev, g->cap * sizeof(*g->ev));
	}
	g->ev[g->n++] = *e;
	return TP_OK;
}

/* Parse text in pieces of `piece` bytes with limits lim (NULL: defaults). */
static int parse(struct got *g, const char *text, size_t len, size_t piece,
		 const struct trace_limits *lim, struct tp_errbuf *err)
{
	struct trace_sink sink = { .string = on_string, .event = on_event, .payload = g };
	size_t i;
	int rc = 0;

	memset(g, 0, sizeof(*g));
	g->p = trace_parser_new(lim, &sink);
	ck_assert_ptr_nonnull(g->p);
	for (i = 0; i < len && !rc; i += piece)
		rc = trace_parser_feed(g->p, (const uint8_t *)text + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = trace_parser_finish(g->p, err);
	return rc;
}

static int parse_str(struct got *g, const char *text, struct tp_errbuf *err)
{
	return parse(g, text, strlen(text), strlen(text) + 1, NULL, err);
}

static void got_free(struct got *g)
{
	trace_parser_free(g->p);
	free(g->ev);
}

static const char *name_of(struct got *g, const struct tp_event *e)
{
	return trace_string(g->p, e->name);
}

START_TEST(test_object_and_array_forms)
{
	static const char *forms[] = {
		"{\"traceEvents\": [{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":10,\"dur\":5},"
		" {\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":11,\"dur\":1}]}",
		"[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":10,\"dur\":5},"
		" {\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":11,\"dur\":1}]",
	};
	for (int i = 0; i < 2; i++) {
		struct tp_errbuf err = { 0 };
		struct got g;
		ck_assert_int_eq(parse_str(&g, forms[i], &err), 0);
		ck_assert_uint_eq(g.n, 2);
		ck_assert_uint_eq(trace_event_count(g.p), 2);
		ck_assert_str_eq(name_of(&g, &g.ev[0]), "a");
		ck_assert_str_eq(name_of(&g, &g.ev[1]), "b");
		ck_assert_int_eq(g.ev[0].ts_ns, 10000);
		ck_assert_int_eq(g.ev[0].dur_ns, 5000);
		ck_assert_int_eq(g.ev[0].pid, 1);
		ck_assert_int_eq(g.ev[0].tid, 2);
		ck_assert_int_eq(g.ev[0].ph, 'X');
		got_free(&g);
	}
}
END_TEST

START_TEST(test_timestamp_generations)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	int64_t base = 0;
	/* relative float µs, with baseTimeNanoseconds after traceEvents (Kineto before 2025-03) */
	const char *t =
		"{\"schemaVersion\": 1, \"traceEvents\": ["
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#4\",\"pid\":1,\"tid\":1,"
		" \"ts\": 4458676416788.066, \"dur\": 222442.191},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"abs\",\"pid\":1,\"tid\":1,"
		" \"ts\": 1712195495519689.047, \"dur\": 0.040},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"int\",\"pid\":1,\"tid\":1,"
		" \"ts\": 1669783687464181, \"dur\": 345770}],"
		" \"traceName\": \"x\", \"displayTimeUnit\": \"ms\", \"baseTimeNanoseconds\": 1711964646000000000}";

	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_uint_eq(g.n, 3);
	ck_assert_int_eq(g.ev[0].ts_ns, 4458676416788066LL);
	ck_assert_int_eq(g.ev[0].dur_ns, 222442191LL);
	ck_assert_int_eq(g.ev[1].ts_ns, 1712195495519689047LL);
	ck_assert_int_eq(g.ev[1].dur_ns, 40);
	ck_assert_int_eq(g.ev[2].ts_ns, 1669783687464181000LL);
	ck_assert_int_eq(trace_base_ns(g.p, &base), 1);
	ck_assert_int_eq(base, 1711964646000000000LL);
	ck_assert_int_eq(g.ev[0].cat, TRACE_S_USER_ANNOTATION);
	/* metadata kept */
	ck_assert_int_eq(json_integer_value(json_object_get(trace_meta(g.p), "schemaVersion")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(trace_meta(g.p), "traceName")), "x");
	ck_assert_ptr_null(json_object_get(trace_meta(g.p), "traceEvents"));
	got_free(&g);
}
END_TEST

START_TEST(test_legacy_and_odd_events)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	/* PyTorch 1.9: cat Operator/Kernel, string tid, [memory] without cat, Addr or totals */
	const char *t =
		"{\"traceEvents\": ["
		"{\"ph\":\"X\",\"cat\":\"Operator\",\"name\":\"ProfilerStep#5\",\"pid\":25738,\"tid\":\"25738\","
		" \"ts\":1623142623460172,\"dur\":176078,\"args\":{}},"
		"{\"ph\":\"X\",\"cat\":\"Kernel\",\"name\":\"k\",\"pid\":0,\"tid\":\"stream 7\",\"ts\":1,\"dur\":2,"
		" \"args\":{\"correlation\":73689,\"external id\":12,\"blocks per SM\":\"inf\","
		"           \"est. achieved occupancy %\":50,\"grid\":[1,2,3],\"stream\":7,\"device\":0}},"
		"{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":5,"
		" \"args\":{\"Device Type\":0,\"Device Id\":-1,\"Bytes\":4}},"
		"{\"ph\":\"X\",\"name\":\"no args, no cat\",\"pid\":\"Spans\",\"tid\":\"PyTorch Profiler\",\"ts\":3,\"dur\":1},"
		"{\"name\":\"no phase\",\"ts\":3},"
		"{\"ph\":\"X\",\"name\":\"no ts\"},"
		"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"thread 1 (main)\"}}"
		"]}";

	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_uint_eq(trace_event_count(g.p), 7);
	ck_assert_uint_eq(g.n, 5);	/* no phase and no ts: counted, not emitted */
	ck_assert_int_eq(g.ev[0].cat, TRACE_S_OPERATOR);
	ck_assert_str_eq(g.ev[0].tid_s, "25738");
	ck_assert_ptr_null(g.ev[0].pid_s);
	ck_assert_str_eq(g.ev[1].tid_s, "stream 7");
	ck_assert_int_eq(g.ev[1].corr, 73689);
	ck_assert_int_eq(g.ev[1].ext_id, 12);
	ck_assert(isinf(g.ev[1].blocks_per_sm));
	ck_assert(g.ev[1].occupancy == 50.0);
	ck_assert_int_eq(g.ev[1].stream, 7);
	ck_assert(g.ev[1].have & TH_DEVICE);
	ck_assert_int_eq(g.ev[2].name, TRACE_S_MEMORY);
	ck_assert_int_eq(g.ev[2].bytes, 4);
	ck_assert_int_eq(g.ev[2].dev_id, -1);
	ck_assert(!(g.ev[2].have & TH_ADDR));
	ck_assert_int_eq(g.ev[3].cat, 0);
	ck_assert_str_eq(g.ev[3].pid_s, "Spans");
	ck_assert_int_eq(g.ev[4].ph, 'M');
	ck_assert_str_eq(trace_string(g.p, g.ev[4].arg), "thread 1 (main)");
	got_free(&g);
}
END_TEST

START_TEST(test_memory_event_args)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	const char *t =
		"{\"traceEvents\":[{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\","
		"\"pid\":783658,\"tid\":785244,\"ts\":1669783687464300,"
		"\"args\":{\"Ev Idx\":42070,\"Device Type\":1,\"Device Id\":1,\"Addr\":139926520725504,"
		"\"Bytes\":-5242880,\"Total Allocated\":5435638784,\"Total Reserved\":12782141440}}]}";

	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_uint_eq(g.n, 1);
	ck_assert_int_eq(g.ev[0].ev_idx, 42070);
	ck_assert_int_eq(g.ev[0].dev_type, 1);
	ck_assert_int_eq(g.ev[0].addr, 139926520725504LL);
	ck_assert_int_eq(g.ev[0].bytes, -5242880);
	ck_assert_int_eq(g.ev[0].total_alloc, 5435638784LL);
	ck_assert_int_eq(g.ev[0].total_reserved, 12782141440LL);
	got_free(&g);
}
END_TEST

/* the collective's args, on record_param_comms and on a kernel (hta_nccl_rel_ts's), a number as a group name */
START_TEST(test_collective_args)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	const char *t =
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"record_param_comms\",\"pid\":1,\"tid\":2,"
		"\"ts\":4458676524648.797,\"dur\":189.626,\"args\":{\"External id\":2099,\"Process Group Name\":\"0\","
		"\"Out msg nelems\":2049000,\"Process Group Ranks\":\"[0, 1]\",\"Group size\":2,\"In msg nelems\":2049001,"
		"\"dtype\":\"Float\",\"Collective name\":\"allreduce\",\"Seq\":17}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_Broadcast_RING_LL_Sum_int8_t\",\"pid\":0,\"tid\":40,"
		"\"ts\":1,\"dur\":2,\"args\":{\"Collective name\":\"broadcast\",\"Process Group Name\":5,\"dtype\":\"\"}},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":2,\"ts\":1,\"dur\":2}]}";

	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_uint_eq(g.n, 3);
	ck_assert_uint_eq(g.ev[0].have & (TH_COLL | TH_PG | TH_DTYPE | TH_IN_NELEMS | TH_OUT_NELEMS | TH_GROUP_SIZE | TH_COLL_SEQ),
			  TH_COLL | TH_PG | TH_DTYPE | TH_IN_NELEMS | TH_OUT_NELEMS | TH_GROUP_SIZE | TH_COLL_SEQ);
	ck_assert_str_eq(trace_string(g.p, (uint32_t)g.ev[0].coll), "allreduce");
	ck_assert_str_eq(trace_string(g.p, (uint32_t)g.ev[0].pg), "0");
	ck_assert_str_eq(trace_string(g.p, (uint32_t)g.ev[0].dtype), "Float");
	ck_assert_int_eq(g.ev[0].in_nelems, 2049001);
	ck_assert_int_eq(g.ev[0].out_nelems, 2049000);
	ck_assert_int_eq(g.ev[0].group_size, 2);
	ck_assert_int_eq(g.ev[0].coll_seq, 17);
	ck_assert_int_eq(g.ev[0].ext_id, 2099);
	ck_assert_str_eq(trace_string(g.p, (uint32_t)g.ev[1].coll), "broadcast");
	ck_assert_str_eq(trace_string(g.p, (uint32_t)g.ev[1].pg), "5");
	ck_assert(!(g.ev[1].have & (TH_DTYPE | TH_IN_NELEMS | TH_COLL_SEQ)));	/* an empty dtype is none */
	ck_assert(!(g.ev[2].have & (TH_COLL | TH_PG | TH_DTYPE)));
	got_free(&g);
}
END_TEST

START_TEST(test_ids_above_int64_max)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	size_t zlen, len;
	char *path = tu_fixture("traces/hta_large_integer.json.gz");
	uint8_t *z = tu_read_file(path, &zlen), *text = tu_gunzip(z, zlen, &len);
	const char *t = "[{\"ph\":\"X\",\"name\":\"x\",\"ts\":1,\"dur\":1,\"args\":{\"External id\":18446744073709551615}}]";

	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(parse(&g, (const char *)text, len, 17, NULL, &err), 0);
	ck_assert_uint_eq(g.n, 2);
	got_free(&g);
	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_uint_eq((uint64_t)g.ev[0].ext_id, UINT64_MAX);
	got_free(&g);
	free(text);
	free(z);
	free(path);
}
END_TEST

/* Every fixture, whole and in small pieces: the same events either way. */
START_TEST(test_fixtures_any_piece_size)
{
	static const struct {
		const char *file;
		uint64_t events;
	} fx[] = {
		{ "traces/hta_alexnet.json.gz", 1408 }, { "traces/hta_amd_mi250.json.gz", 220 },
		{ "traces/hta_compare_base.json.gz", 33 }, { "traces/hta_cpu_only.json.gz", 30 },
		{ "traces/hta_event_sync.json.gz", 92 }, { "traces/hta_triton_tiny.json.gz", 71 },
		{ "traces/kineto_resnet50_workers0.json.gz", 75718 },
	};
	for (size_t i = 0; i < sizeof(fx) / sizeof(fx[0]); i++) {
		char *path = tu_fixture(fx[i].file);
		size_t zlen, len;
		uint8_t *z = tu_read_file(path, &zlen), *text = tu_gunzip(z, zlen, &len);
		struct tp_errbuf err = { 0 };
		struct got whole, bits;

		ck_assert_msg(text != NULL, "%s", path);
		ck_assert_int_eq(parse(&whole, (const char *)text, len, len, NULL, &err), 0);
		ck_assert_int_eq(parse(&bits, (const char *)text, len, 4093, NULL, &err), 0);
		ck_assert_uint_eq(trace_event_count(whole.p), fx[i].events);
		ck_assert_uint_eq(whole.n, bits.n);
		for (size_t k = 0; k < whole.n; k++) {
			ck_assert_int_eq(whole.ev[k].ts_ns, bits.ev[k].ts_ns);
			ck_assert_int_eq(whole.ev[k].name, bits.ev[k].name);
		}
		got_free(&whole);
		got_free(&bits);
		free(text);
		free(z);
		free(path);
	}
}
END_TEST

static void expect_error(const char *text, int rc, const char *code)
{
	struct tp_errbuf err = { 0 };
	struct got g;

	ck_assert_int_eq(parse_str(&g, text, &err), rc);
	ck_assert_msg(!strcmp(err.code, code), "'%.60s': code %s, expected %s (%s)", text, err.code, code,
		      err.msg);
	ck_assert(err.msg[0]);
	got_free(&g);
}

START_TEST(test_bad_documents)
{
	expect_error("", TP_ERR_INVALID, "empty_body");
	expect_error("hello", TP_ERR_INVALID, "invalid_json");
	expect_error("{\"traceEvents\": [{\"ph\":\"X\"", TP_ERR_INVALID, "invalid_json");
	expect_error("{\"a\": 1}", TP_ERR_INVALID, "invalid_trace");
	expect_error("5", TP_ERR_INVALID, "invalid_trace");
	expect_error("{\"traceEvents\": {}}", TP_ERR_INVALID, "invalid_trace");
	expect_error("[1, 2]", TP_ERR_INVALID, "invalid_trace");
	expect_error("[[1]]", TP_ERR_INVALID, "invalid_trace");
	expect_error("[{\"ph\":\"X\",\"ts\":\"123\"}]", TP_ERR_INVALID, "bad_timestamp");
	expect_error("[{\"ph\":\"X\",\"ts\":1,\"dur\":{}}]", TP_ERR_INVALID, "bad_timestamp");
	expect_error("[{\"ph\":\"X\",\"ts\":true}]", TP_ERR_INVALID, "bad_timestamp");
	expect_error("[{\"ph\":\"X\",\"ts\":[1]}]", TP_ERR_INVALID, "bad_timestamp");
	expect_error("[{\"ph\":\"X\",\"ts\":1e300}]", TP_ERR_INVALID, "bad_timestamp");
	expect_error("{\"traceEvents\": []} trailing", TP_ERR_INVALID, "invalid_json");
}
END_TEST

START_TEST(test_error_names_the_byte)
{
	struct tp_errbuf err = { 0 };
	struct got g;

	ck_assert_int_eq(parse_str(&g, "{\"traceEvents\": [{\"ph\": X}]}", &err), TP_ERR_INVALID);
	ck_assert_msg(strstr(err.msg, "at byte 25") != NULL, "%s", err.msg);
	got_free(&g);
}
END_TEST

START_TEST(test_deep_nesting)
{
	size_t n = 100000, i;
	char *t = malloc(2 * n + 1);

	for (i = 0; i < n; i++) {
		t[i] = '[';
		t[n + i] = ']';
	}
	t[2 * n] = 0;
	/* nested in the top-level metadata */
	memcpy(t, "{\"x\":", 5);
	t[2 * n - 1] = '}';
	expect_error(t, TP_ERR_TOOBIG, "too_deep");
	/* a bare array of arrays is refused before it gets deep */
	t[0] = t[1] = t[2] = t[3] = t[4] = '[';
	t[2 * n - 1] = ']';
	expect_error(t, TP_ERR_INVALID, "invalid_trace");
	/* nested inside an event's args */
	memcpy(t, "[{\"args\":", 9);
	expect_error(t, TP_ERR_TOOBIG, "too_deep");
	free(t);
}
END_TEST

START_TEST(test_long_strings_and_tokens)
{
	struct trace_limits lim = trace_default_limits;
	struct tp_errbuf err = { 0 };
	struct got g;
	size_t n = 100000, i;
	char *t = malloc(n + 64);

	lim.max_token = 10000;
	/* a long string of escaped quotes and backslashes: the escapes must not end it early */
	strcpy(t, "[{\"ph\":\"X\",\"name\":\"");
	n = strlen(t) + (n - strlen(t)) / 4 * 4;
	for (i = strlen(t); i < n; i += 4)
		memcpy(t + i, "\\\"\\\\", 4);
	strcpy(t + n, "\",\"ts\":1}]");
	for (size_t piece = 1; piece <= 4097; piece += 4096) {
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(parse(&g, t, strlen(t), piece, &lim, &err), TP_ERR_TOOBIG);
		ck_assert_str_eq(err.code, "string_too_long");
		got_free(&g);
	}
	/* the same text parses under a cap it fits in */
	lim.max_token = 2 * n;
	ck_assert_int_eq(parse(&g, t, strlen(t), 777, &lim, &err), 0);
	ck_assert_uint_eq(strlen(name_of(&g, &g.ev[0])), (n - 18) / 2);
	got_free(&g);
	/* a long run with no quotes (a number) */
	lim.max_token = 10000;
	strcpy(t, "[{\"ph\":\"X\",\"ts\":");
	for (i = strlen(t); i < n; i++)
		t[i] = '1';
	strcpy(t + n, "}]");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(parse(&g, t, strlen(t), 1000, &lim, &err), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "token_too_long");
	got_free(&g);
	/* long runs of whitespace and short tokens are fine: nothing is buffered for them */
	memset(t, ' ', n);
	t[0] = '[';
	size_t objs = 1;
	for (i = 1; i + 3 < n / 2; i += 3, objs++)
		memcpy(t + i, "{},", 3);
	strcpy(t + n, "{}]");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(parse(&g, t, strlen(t), 1000, &lim, &err), 0);
	ck_assert_uint_eq(trace_event_count(g.p), objs);
	got_free(&g);
	free(t);
}
END_TEST

START_TEST(test_event_cap)
{
	struct trace_limits lim = trace_default_limits;
	struct tp_errbuf err = { 0 };
	struct got g;
	const char *t = "[{\"ph\":\"X\",\"ts\":1},{\"ph\":\"X\",\"ts\":2},{\"ph\":\"X\",\"ts\":3}]";

	lim.max_events = 2;
	ck_assert_int_eq(parse(&g, t, strlen(t), 100, &lim, &err), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "too_many_events");
	got_free(&g);
}
END_TEST

START_TEST(test_strings_interned_once)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	const char *t = "[{\"ph\":\"X\",\"name\":\"aten::mm\",\"ts\":1},{\"ph\":\"X\",\"name\":\"aten::mm\",\"ts\":2},"
			"{\"ph\":\"X\",\"name\":\"aten::add\",\"ts\":3}]";

	ck_assert_int_eq(parse_str(&g, t, &err), 0);
	ck_assert_int_eq(g.ev[0].name, g.ev[1].name);
	ck_assert_int_ne(g.ev[0].name, g.ev[2].name);
	/* the well-known strings, then "X" is not a string but aten::mm and aten::add are */
	ck_assert_int_eq(g.strings, TRACE_S_KNOWN_END - 1 + 2);
	got_free(&g);
}
END_TEST

/* Escaped names: decoded, a lone surrogate or \u0000 as U+FFFD (so a name never holds a NUL),
 * the same escape written raw or escaped one name; a raw byte that is not UTF-8 refused. */
START_TEST(test_escaped_names)
{
	struct tp_errbuf err = { 0 };
	struct got g;
	const char *t = "[{\"ph\":\"X\",\"name\":\"caf\\u00e9\",\"ts\":1},{\"ph\":\"X\",\"name\":\"caf\xc3\xa9\",\"ts\":2},"
			"{\"ph\":\"X\",\"name\":\"a\\ud800b\",\"ts\":3},{\"ph\":\"X\",\"name\":\"x\\u0000y\",\"ts\":4},"
			"{\"ph\":\"X\",\"name\":\"\\ud83d\\ude00\\t\",\"ts\":5}]";

	for (size_t piece = 1; piece <= strlen(t) + 1; piece += 7) {
		ck_assert_int_eq(parse(&g, t, strlen(t), piece, NULL, &err), 0);
		ck_assert_int_eq(g.n, 5);
		ck_assert_str_eq(name_of(&g, &g.ev[0]), "caf\xc3\xa9");
		ck_assert_int_eq(g.ev[0].name, g.ev[1].name);
		ck_assert_str_eq(name_of(&g, &g.ev[2]), "a\xef\xbf\xbd" "b");
		ck_assert_str_eq(name_of(&g, &g.ev[3]), "x\xef\xbf\xbd" "y");
		ck_assert_str_eq(name_of(&g, &g.ev[4]), "\xf0\x9f\x98\x80\t");
		got_free(&g);
	}
	ck_assert_int_eq(parse_str(&g, "[{\"ph\":\"X\",\"name\":\"a\xff" "b\",\"ts\":1}]", &err), TP_ERR_INVALID);
	ck_assert_str_eq(err.code, "invalid_json");
	got_free(&g);
}
END_TEST

Suite *suite_trace(void)
{
	Suite *s = suite_create("trace");
	TCase *tc = tcase_create("forms");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_object_and_array_forms);
	tcase_add_test(tc, test_timestamp_generations);
	tcase_add_test(tc, test_legacy_and_odd_events);
	tcase_add_test(tc, test_memory_event_args);
	tcase_add_test(tc, test_collective_args);
	tcase_add_test(tc, test_ids_above_int64_max);
	tcase_add_test(tc, test_fixtures_any_piece_size);
	tcase_add_test(tc, test_strings_interned_once);
	tcase_add_test(tc, test_escaped_names);
	suite_add_tcase(s, tc);
	tc = tcase_create("hostile");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bad_documents);
	tcase_add_test(tc, test_error_names_the_byte);
	tcase_add_test(tc, test_deep_nesting);
	tcase_add_test(tc, test_long_strings_and_tokens);
	tcase_add_test(tc, test_event_cap);
	suite_add_tcase(s, tc);
	return s;
}
