/*
 * check_timeline.c: PyTorch memory timeline exports (server/ingest/timeline.c):
 * the raw fixture against HTA's figures, the [times, sizes] form, every
 * piece size, and hostile documents.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/timeline.h"
#include "suites.h"
#include "testutil.h"

static int take(void *arg, const struct mem_point *pt)
{
	struct mem_point **at = arg;

	*(*at)++ = *pt;
	return 0;
}

/* Parse text in pieces of `piece` bytes; returns the rc, points via *out (copied, malloc). */
static int parse(const void *text, size_t len, size_t piece, uint64_t max, struct mem_point **out, size_t *n,
		 const char **form, struct tp_errbuf *err)
{
	struct timeline_parser *p = timeline_parser_new(max);
	const uint8_t *b = text;
	int rc = TP_OK;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len && !rc; i += piece)
		rc = timeline_parser_feed(p, b + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = timeline_parser_finish(p, n, form, err);
	if (!rc && out) {
		struct mem_point *at = *out = malloc(*n * sizeof(**out) + 1);
		ck_assert_int_eq(timeline_replay(p, take, &at), 0);
		ck_assert_ptr_eq(at, *out + *n);
	}
	timeline_parser_free(p);
	return rc;
}

static void check_row(const struct mem_point *p, const int64_t *want)
{
	for (int c = 0; c < MEM_NCAT; c++)
		ck_assert_msg(p->cat[c] == want[c], "category %d: %lld, want %lld", c, (long long)p->cat[c],
			      (long long)want[c]);
}

START_TEST(test_raw_fixture)
{
	/* shared/fixtures/README.md, from HTA's own test */
	static const int64_t row744[] = { 102440608, 102228128, 19395584, 0, 2618160128, 58417152, 41811968, 25494440 };
	static const int64_t last[] = { 102440608, 102228128, 19395584, 0, 128000, 107868160, 0, 424 };
	static const size_t pieces[] = { 1, 7, 4096, 1 << 20 };
	char *path = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	size_t glen, len, n;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct tp_errbuf err = { 0 };
	struct mem_point *pts;
	const char *form;
	int64_t maxsum = 0;

	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(parse(text, len, pieces[_i], 1000000, &pts, &n, &form, &err), 0);
	ck_assert_str_eq(form, "raw");
	ck_assert_uint_eq(n, 7721);
	check_row(&pts[744], row744);
	check_row(&pts[n - 1], last);
	for (size_t i = 0; i < n; i++) {
		int64_t sum = 0;
		for (int c = 0; c < MEM_NCAT; c++)
			sum += pts[i].cat[c];
		if (sum > maxsum)
			maxsum = sum;
		if (i)
			ck_assert_int_le(pts[i - 1].t_ns, pts[i].t_ns);
	}
	ck_assert_int_eq(maxsum, 3082832104LL);
	/* the pre-existing rows (t = -1) sit at the first real time */
	ck_assert_int_eq(pts[0].t_ns, pts[1].t_ns);
	ck_assert_int_gt(pts[0].t_ns, 1600000000000000000LL);
	free(pts);
	free(text);
	free(gz);
	free(path);
}
END_TEST

START_TEST(test_times_sizes)
{
	/* PyTorch >= 2.2: times in us, rows [0, eight categories] */
	static const char us[] = "[[1700000000000000, 1700000000000005],"
				 " [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 10, 0, 0, 0, 0, 0, 0, 0]]]";
	/* PyTorch 2.1: ns and floats */
	static const char ns[] = "[[1700000000000000000, 1700000000000000007], [[0.0, 1.0, 0, 0, 0, 0, 0, 0, 0],"
				 " [0.0, 2.0, 0, 0, 0, 0, 0, 0, 0]]]";
	struct tp_errbuf err = { 0 };
	struct mem_point *pts;
	const char *form;
	size_t n;

	ck_assert_int_eq(parse(us, strlen(us), 3, 100, &pts, &n, &form, &err), 0);
	ck_assert_str_eq(form, "times_sizes");
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(pts[0].t_ns, 1700000000000000000LL);
	ck_assert_int_eq(pts[1].t_ns, 1700000000000005000LL);
	ck_assert_int_eq(pts[0].cat[0], 1);
	ck_assert_int_eq(pts[0].cat[7], 8);
	ck_assert_int_eq(pts[1].cat[0], 10);
	free(pts);
	ck_assert_int_eq(parse(ns, strlen(ns), 1000, 100, &pts, &n, &form, &err), 0);
	ck_assert_int_eq(pts[1].t_ns, 1700000000000000007LL);
	ck_assert_int_eq(pts[1].cat[0], 2);
	free(pts);
}
END_TEST

/*
 * The times of [times, sizes] are held as differences (zigzag varints):
 * every time comes back, the extremes and steps across the sign included,
 * in ns (times over 1e17 are ns already; the sort puts them in order).
 */
START_TEST(test_times_packed)
{
	static const char doc[] = "[[9223372036854775807, -9223372036854775808, 0, -1, 1, 127, -64, 64, 8192,"
				  " 300000000000000000],"
				  " [[0,1,0,0,0,0,0,0,0],[0,2,0,0,0,0,0,0,0],[0,3,0,0,0,0,0,0,0],[0,4,0,0,0,0,0,0,0],"
				  " [0,5,0,0,0,0,0,0,0],[0,6,0,0,0,0,0,0,0],[0,7,0,0,0,0,0,0,0],[0,8,0,0,0,0,0,0,0],"
				  " [0,9,0,0,0,0,0,0,0],[0,10,0,0,0,0,0,0,0]]]";
	static const int64_t want_t[] = { INT64_MIN, -64, -1, 0, 1, 64, 127, 8192, 300000000000000000LL, INT64_MAX };
	static const int64_t want_c0[] = { 2, 7, 4, 3, 5, 8, 6, 9, 10, 1 };
	struct tp_errbuf err = { 0 };
	struct mem_point *pts;
	const char *form;
	size_t n;

	ck_assert_int_eq(parse(doc, strlen(doc), 3, 100, &pts, &n, &form, &err), 0);
	ck_assert_str_eq(form, "times_sizes");
	ck_assert_uint_eq(n, 10);
	for (size_t i = 0; i < n; i++) {
		ck_assert_msg(pts[i].t_ns == want_t[i], "point %zu: t %lld, want %lld", i, (long long)pts[i].t_ns,
			      (long long)want_t[i]);
		ck_assert_int_eq(pts[i].cat[0], want_c0[i]);
	}
	free(pts);
}
END_TEST

START_TEST(test_hostile)
{
	static const struct { const char *text; int rc; } cases[] = {
		{ "", TP_ERR_INVALID },
		{ "[[1, 1, 2", TP_ERR_INVALID },			/* truncated */
		{ "[[1, 1, 2, 9]]", TP_ERR_INVALID },			/* category out of range */
		{ "[[1, 1, 2, -1]]", TP_ERR_INVALID },
		{ "[[1, 1, 2]]", TP_ERR_INVALID },			/* a short row */
		{ "[[1, 1, 2, 3], [1, 1, 2, 3, 4]]", TP_ERR_INVALID },	/* a long row */
		{ "[[1, 1, \"x\", 3]]", TP_ERR_INVALID },		/* a string */
		{ "[[1, 1, {}, 3]]", TP_ERR_INVALID },
		{ "[[1, 1, null, 3]]", TP_ERR_INVALID },
		{ "[[[[1]]]]", TP_ERR_INVALID },			/* too deep */
		{ "[[1, 2], [[0,1,2,3,4,5,6,7,8]]]", TP_ERR_INVALID },	/* 2 times, 1 row */
		{ "[[1], [[0,1,2,3,4,5,6,7,8]], [3]]", TP_ERR_INVALID },	/* a third element */
		{ "[[1, 1, 99999999999999999999999, 3]]", TP_ERR_INVALID },	/* int64 overflow */
		{ "[[1, 1, 1e300, 3]]", TP_ERR_INVALID },
		{ "[]", TP_ERR_INVALID },
		{ "[[1, 1, 2, 3]] x", TP_ERR_INVALID },
		{ "[[1,1,1,1],[2,1,1,1],[3,1,1,1],[4,1,1,1]]", TP_ERR_TOOBIG },	/* more than 3 points */
	};
	struct tp_errbuf err;
	size_t n;
	const char *form;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&err, 0, sizeof(err));
		int rc = parse(cases[i].text, strlen(cases[i].text), 2, 3, NULL, &n, &form, &err);
		ck_assert_msg(rc == cases[i].rc, "case %zu (%s): rc %d", i, cases[i].text, rc);
		ck_assert_msg(err.msg[0] && err.code[0], "case %zu: no message", i);
	}
	/* a number of a million digits is refused, not buffered */
	size_t big = 1 << 20;
	char *t = malloc(big + 16);
	memcpy(t, "[[1, 1, ", 8);
	memset(t + 8, '7', big);
	memcpy(t + 8 + big, ", 3]]", 6);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(parse(t, strlen(t), 4096, 10, NULL, &n, &form, &err), TP_ERR_INVALID);
	ck_assert_ptr_nonnull(strstr(err.msg, "too long"));
	free(t);
	/* a first row of times longer than the point cap is refused as it streams, not kept */
	big = 100000;
	t = malloc(big * 2 + 64);
	strcpy(t, "[[");
	for (size_t i = 0; i < big; i++)
		memcpy(t + 2 + 2 * i, "0,", 2);
	strcpy(t + 2 + 2 * big - 1, "], [[0,1,2,3,4,5,6,7,8]]]");
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(parse(t, strlen(t), 4096, 1000, NULL, &n, &form, &err), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "too_many_points");
	free(t);
	/* raw rows whose t goes 1, 0, 1, 0: a point each, out of time order: sorted unpacked (80 bytes a
	 * point) up to 2^20 of them, refused past (a 970 KB gzip of them made 23 million: issue 50) */
	for (size_t pairs = (1 << 19) - 1; pairs <= (1 << 19); pairs++) {
		static const char pair[] = "[1,0,512,2],[0,0,-512,2],";
		size_t len = 1 + pairs * (sizeof(pair) - 1);
		t = malloc(len + 16);
		t[0] = '[';
		for (size_t i = 0; i < pairs; i++)
			memcpy(t + 1 + i * (sizeof(pair) - 1), pair, sizeof(pair) - 1);
		strcpy(t + len, "[2,0,0,0]]");	/* one point more */
		memset(&err, 0, sizeof(err));
		struct mem_point *pts = NULL;
		int rc = parse(t, strlen(t), 1 << 20, 1ull << 31, &pts, &n, &form, &err);
		if (pairs < (1 << 19)) {
			ck_assert_int_eq(rc, TP_OK);
			ck_assert_uint_eq(n, 2 * pairs + 1);
			ck_assert_int_eq(pts[0].t_ns, 0);	/* sorted: every t = 0 first, 512 bytes fewer */
			ck_assert_int_eq(pts[n - 1].t_ns, 2);
			ck_assert_int_eq(pts[n - 1].cat[2], 0);
			ck_assert_int_eq(pts[n - 2].cat[2], 512);
		} else {
			ck_assert_int_eq(rc, TP_ERR_TOOBIG);
			ck_assert_str_eq(err.code, "too_many_points");
			ck_assert_ptr_nonnull(strstr(err.msg, "out of time order"));
		}
		free(pts);
		free(t);
	}
}
END_TEST

Suite *suite_timeline(void)
{
	Suite *s = suite_create("timeline");
	TCase *tc = tcase_create("exports");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_raw_fixture, 0, 4);
	tcase_add_test(tc, test_times_sizes);
	tcase_add_test(tc, test_times_packed);
	tcase_add_test(tc, test_hostile);
	suite_add_tcase(s, tc);
	return s;
}
