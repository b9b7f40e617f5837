/*
 * check_runline.c: a rank's steps across the run (server/analysis/runline.c):
 * cycles, downsampling, and the findings across cycles.
 */
#include <string.h>

#include "analysis/runline.h"
#include "suites.h"

/* cycles of steps: step numbers from first, durations dur[i] (ms), 10 ms apart within a cycle */
static size_t make(struct rl_step *s, int ncycles, int per, const double *mean_ms, const int64_t *alloc)
{
	size_t n = 0;
	int64_t t = 0;

	for (int c = 0; c < ncycles; c++) {
		for (int k = 0; k < per; k++) {
			memset(&s[n], 0, sizeof(s[n]));
			s[n].step = c * 100 + k;
			s[n].start_ns = t;
			s[n].dur_ns = (int64_t)(mean_ms[c] * 1e6);
			s[n].alloc = alloc ? alloc[c] : -1;
			t += s[n].dur_ns;
			n++;
		}
		t += 1000000000;	/* a gap: the steps not profiled */
	}
	return n;
}

static json_t *find(json_t *f, const char *id)
{
	size_t i;
	json_t *x;

	json_array_foreach(f, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "id")), id))
			return x;
	return NULL;
}

START_TEST(test_cycles)
{
	struct rl_step s[40];
	const double ms[] = { 100, 100, 100 };
	size_t n = make(s, 3, 4, ms, NULL);

	ck_assert_int_eq(runline_cycles(s, n), 3);
	ck_assert_int_eq(s[3].cycle, 0);
	ck_assert_int_eq(s[4].cycle, 1);
	ck_assert_int_eq(s[11].cycle, 2);
	/* step numbers that follow on without a gap: one cycle, even across chunks */
	for (size_t i = 0; i < n; i++) {
		s[i].step = (int64_t)i;
		s[i].start_ns = (int64_t)i * 100000000;
	}
	ck_assert_int_eq(runline_cycles(s, n), 1);
	/* a gap longer than a step, numbers following: still a new cycle */
	s[6].start_ns += 300000000;
	ck_assert_int_eq(runline_cycles(s, n), 2);
	ck_assert_int_eq(runline_cycles(s, 0), 0);
}
END_TEST

START_TEST(test_pick)
{
	struct rl_step s[100];
	size_t keep[100], k, i;
	const double ms[] = { 10 };

	make(s, 1, 100, ms, NULL);
	s[57].dur_ns = 99000000;	/* the slow one survives */
	k = runline_pick(s, 100, 10, keep);
	ck_assert_uint_eq(k, 10);
	ck_assert_uint_eq(keep[0], 0);
	ck_assert_uint_eq(keep[9], 99);
	for (i = 1; i < k; i++)
		ck_assert_uint_gt(keep[i], keep[i - 1]);
	for (i = 0; i < k && keep[i] != 57; i++)
		;
	ck_assert_uint_lt(i, k);
	ck_assert_uint_eq(runline_pick(s, 100, 0, keep), 100);
	ck_assert_uint_eq(runline_pick(s, 5, 10, keep), 5);
	ck_assert_uint_eq(runline_pick(s, 100, 2, keep), 2);
}
END_TEST

START_TEST(test_findings)
{
	struct rl_step s[64];
	const double flat[] = { 100, 101, 99, 100 }, drift[] = { 100, 120, 140, 160 }, spike[] = { 100, 100, 250, 100, 100 };
	const int64_t grow[] = { 1000ll << 20, 1100ll << 20, 1200ll << 20, 1300ll << 20 };
	json_t *f, *x;
	size_t n;

	n = make(s, 4, 3, flat, NULL);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_uint_eq(json_array_size(f), 0);
	json_decref(f);

	n = make(s, 4, 3, drift, grow);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_ptr_nonnull(x = find(f, "cycle_drift"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "first_cycle_mean_ns")), 100000000);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "last_cycle_mean_ns")), 160000000);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "last_cycle_step")), 300);
	ck_assert_ptr_nonnull(x = find(f, "cycle_memory_growth"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "growth_bytes")), 300ll << 20);
	ck_assert_ptr_null(find(f, "slow_cycle"));
	json_decref(f);

	n = make(s, 5, 3, spike, NULL);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_ptr_nonnull(x = find(f, "slow_cycle"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "cycle")), 2);
	ck_assert_ptr_null(find(f, "cycle_drift"));
	ck_assert_uint_eq(json_array_size(f), 1);
	json_decref(f);

	/*
	 * an odd first cycle is not where the run started: the H200 run's 10 cycles (ms), the
	 * first shorter, the rest flat, say nothing; drift after such a start still does
	 */
	const double odd[] = { 46.8, 94.9, 95.5, 95.8, 95.7, 95.7, 95.8, 95.6, 95.9, 95.9 };
	const double odd_drift[] = { 46.8, 94.9, 95.5, 95.8, 100, 105, 110, 115, 120, 125 };
	n = make(s, 10, 1, odd, NULL);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_ptr_null(find(f, "cycle_drift"));
	json_decref(f);
	n = make(s, 10, 1, odd_drift, NULL);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_ptr_nonnull(x = find(f, "cycle_drift"));
	/* the start: the median of the first 4 cycles, (94.9 + 95.5) / 2 ms */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "start_mean_ns")), 95200000);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(x, "evidence"), "first_cycle_mean_ns")), 46800000);
	json_decref(f);

	/* two cycles say nothing across cycles */
	n = make(s, 2, 3, drift, grow);
	f = runline_findings(s, n, runline_cycles(s, n));
	ck_assert_uint_eq(json_array_size(f), 0);
	json_decref(f);
}
END_TEST

/* Steps at UTC times, a log written in local time: the offset found is the zone's */
START_TEST(test_log_offset)
{
	struct rl_step st[6] = { { 0 } };
	const int64_t t0 = 1669783687000000000LL, s = 1000000000LL, h = 3600 * s;
	int64_t off;

	for (int i = 0; i < 6; i++) {
		st[i].step = i;
		st[i].start_ns = t0 + i * s;
		st[i].dur_ns = s;
	}
	/* the log read as UTC already covers the steps */
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 - s, t0 + 10 * s, &off), 6);
	ck_assert_int_eq(off, 0);
	/* a node at UTC-5 (New York in winter): its log is 5 h behind the trace */
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 - 5 * h - s, t0 - 5 * h + 3 * s, &off), 4);
	ck_assert_int_eq(off, -5 * h);
	/* UTC+5:30 (India): a half hour is a whole quarter */
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 + 5 * h + 30 * 60 * s, t0 + 5 * h + 30 * 60 * s + 10 * s, &off), 6);
	ck_assert_int_eq(off, 5 * h + 30 * 60 * s);
	/* a log of another day: nothing within 14 h puts a step in it */
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 + 48 * h, t0 + 49 * h, &off), 0);
	ck_assert_int_eq(off, 0);
	/* past the zones there are: -13 h is refused, +14 h taken */
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 - 13 * h, t0 - 13 * h + 10 * s, &off), 0);
	ck_assert_uint_eq(runline_log_offset(st, 6, t0 + 14 * h, t0 + 14 * h + 10 * s, &off), 6);
	ck_assert_int_eq(off, 14 * h);
}
END_TEST

Suite *suite_runline(void)
{
	Suite *s = suite_create("runline");
	TCase *tc = tcase_create("runline");

	tcase_add_test(tc, test_cycles);
	tcase_add_test(tc, test_pick);
	tcase_add_test(tc, test_findings);
	tcase_add_test(tc, test_log_offset);
	suite_add_tcase(s, tc);
	return s;
}
