/*
 * check_stats.c: the statistics behind run comparison (server/analysis/stats.c)
 * against values known independently of it: closed forms of the incomplete
 * beta function and of Student's t for 1, 2 and 4 degrees of freedom, the
 * t tables' 5% critical values, factorials for ln Gamma, and Welch's test on
 * a sample small enough to work by hand. And sort.h's in-place sort against
 * qsort() on inputs made to hurt quicksorts.
 */
#include <math.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memseries.h"
#include "analysis/sort.h"
#include "analysis/stats.h"
#include "suites.h"

#define near(x, want, tol) \
	ck_assert_msg(fabs((x) - (want)) <= (tol), "%s = %.17g, want %.17g (+- %g)", #x, (double)(x), \
		      (double)(want), (double)(tol))

START_TEST(test_lgamma)
{
	/* Gamma(n) = (n - 1)!, Gamma(1/2) = sqrt(pi) */
	near(stats_lgamma(1), 0, 1e-14);
	near(stats_lgamma(2), 0, 1e-14);
	near(stats_lgamma(10), log(362880.0), 1e-12);
	near(stats_lgamma(21), log(2432902008176640000.0), 1e-11);
	near(stats_lgamma(0.5), 0.5 * log(M_PI), 1e-14);
	/* Gamma(x + 1) = x Gamma(x), across the reflection at 0.5 */
	near(stats_lgamma(1.3) - stats_lgamma(0.3), log(0.3), 1e-13);
	ck_assert(isnan(stats_lgamma(0)));
	ck_assert(isnan(stats_lgamma(-2)));
}
END_TEST

START_TEST(test_betai_closed_forms)
{
	static const double xs[] = { 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999 };

	for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
		double x = xs[i];
		near(stats_betai(1, 1, x), x, 1e-14);
		near(stats_betai(3.5, 1, x), pow(x, 3.5), 1e-13);
		near(stats_betai(1, 2.5, x), 1 - pow(1 - x, 2.5), 1e-13);
		/* I_x(2, 2) = 3x^2 - 2x^3 */
		near(stats_betai(2, 2, x), 3 * x * x - 2 * x * x * x, 1e-13);
		/* symmetry, on both sides of the switch point */
		near(stats_betai(7.3, 0.5, x) + stats_betai(0.5, 7.3, 1 - x), 1, 1e-13);
	}
	near(stats_betai(3.7, 3.7, 0.5), 0.5, 1e-14);
	near(stats_betai(500, 500, 0.5), 0.5, 1e-12);
	ck_assert(stats_betai(2, 3, 0) == 0);
	ck_assert(stats_betai(2, 3, 1) == 1);
	ck_assert(isnan(stats_betai(0, 1, 0.5)));
	ck_assert(isnan(stats_betai(1, 1, 1.5)));
	ck_assert(isnan(stats_betai(1, 1, NAN)));
}
END_TEST

/* Student's t, two-sided tail, where the CDF has a closed form (df 1: Cauchy; 2; 4). */
static double tail_df1(double t) { return 1 - 2 * atan(fabs(t)) / M_PI; }
static double tail_df2(double t) { return 1 - fabs(t) / sqrt(2 + t * t); }
static double tail_df4(double t)
{
	double u = 1 + t * t / 4, a = fabs(t);
	return 2 * (0.5 - 3.0 / 8 * a / sqrt(u) * (1 - t * t / (12 * u)));
}

START_TEST(test_t_closed_forms)
{
	static const double ts[] = { 0.1, 0.5, 1, 2, 3.674234614174767, 10, 100 };

	for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		double t = ts[i];
		near(stats_t_two_sided(t, 1), tail_df1(t), 1e-13);
		near(stats_t_two_sided(-t, 1), tail_df1(t), 1e-13);
		near(stats_t_two_sided(t, 2), tail_df2(t), 1e-13);
		near(stats_t_two_sided(t, 4), tail_df4(t), 1e-13);
	}
	ck_assert(stats_t_two_sided(0, 3.3) == 1);
	ck_assert(stats_t_two_sided(INFINITY, 3) == 0);
	ck_assert(isnan(stats_t_two_sided(1, 0)));
	ck_assert(isnan(stats_t_two_sided(NAN, 3)));
}
END_TEST

START_TEST(test_t_tables)
{
	/* two-sided 5% and 1% critical values, as printed in t tables (6-7 digits) */
	near(stats_t_two_sided(12.706205, 1), 0.05, 1e-7);
	near(stats_t_two_sided(2.570582, 5), 0.05, 1e-6);
	near(stats_t_two_sided(2.228139, 10), 0.05, 1e-6);
	near(stats_t_two_sided(2.042272, 30), 0.05, 1e-6);
	near(stats_t_two_sided(3.169273, 10), 0.01, 1e-7);
	/* many degrees of freedom: the normal's 1.959964 */
	near(stats_t_two_sided(1.959964, 1e6), 0.05, 1e-5);
}
END_TEST

START_TEST(test_summarise)
{
	int64_t x[] = { 5, 1, 4, 2 }, one[] = { 7 };
	struct stats_sample s;

	stats_summarise(x, 4, &s);
	ck_assert_uint_eq(s.n, 4);
	near(s.mean, 3, 0);
	near(s.var, 10.0 / 3, 1e-15);	/* deviations 2, -2, 1, -1 */
	ck_assert_int_eq(s.median, 3);
	stats_summarise(one, 1, &s);
	ck_assert_int_eq(s.median, 7);
	near(s.var, 0, 0);
	stats_summarise(NULL, 0, &s);
	ck_assert_uint_eq(s.n, 0);
}
END_TEST

START_TEST(test_welch)
{
	int64_t a[] = { 1, 2, 3 }, b[] = { 4, 5, 6 }, c[] = { 3, 1, 2 }, k1[] = { 9, 9 }, k2[] = { 9, 9 }, k3[] = { 8, 8 };
	struct stats_sample sa, sb, sc, s1, s2, s3;
	struct stats_welch w;

	stats_summarise(a, 3, &sa);
	stats_summarise(b, 3, &sb);
	stats_summarise(c, 3, &sc);
	/* by hand: means 2 and 5, variances 1, se = sqrt(2/3), t = 3 / se, df = (2/3)^2 / (2 (1/3)^2 / 2) = 4 */
	ck_assert_int_eq(stats_welch(&sa, &sb, &w), 0);
	near(w.t, 3 / sqrt(2.0 / 3), 1e-12);
	near(w.df, 4, 1e-12);
	near(w.p, tail_df4(3 / sqrt(2.0 / 3)), 1e-13);
	ck_assert_int_eq(stats_welch(&sb, &sa, &w), 0);
	near(w.t, -3 / sqrt(2.0 / 3), 1e-12);
	/* the same values: no difference at all */
	ck_assert_int_eq(stats_welch(&sa, &sc, &w), 0);
	ck_assert(w.t == 0 && w.p == 1);
	/* no noise: equal means p = 1, different means p = 0 */
	stats_summarise(k1, 2, &s1);
	stats_summarise(k2, 2, &s2);
	stats_summarise(k3, 2, &s3);
	ck_assert_int_eq(stats_welch(&s1, &s2, &w), 0);
	ck_assert(w.p == 1 && isnan(w.t) && isnan(w.df));
	ck_assert_int_eq(stats_welch(&s1, &s3, &w), 0);
	ck_assert(w.p == 0);
	/* fewer than two values: untestable */
	stats_summarise(k1, 1, &s1);
	ck_assert_int_eq(stats_welch(&s1, &sa, &w), -1);
	ck_assert_int_eq(stats_welch(&sa, &s1, &w), -1);
}
END_TEST

/* sort.h: a key with many ties, broken by the original position, as analysis.c does */
struct rec {
	int32_t key;
	uint32_t ord;
};
static inline int rec_less(const struct rec *a, const struct rec *b)
{
	return a->key != b->key ? a->key < b->key : a->ord < b->ord;
}
SORT_DEFINE(sort_rec, struct rec, rec_less)

static int rec_cmp(const void *a, const void *b)
{
	return rec_less(a, b) ? -1 : rec_less(b, a) ? 1 : 0;
}

/* pattern p of n keys: random with ties, sorted, reversed, all equal, organ pipe, sawtooth */
static int32_t key_of(int p, size_t i, size_t n, unsigned *seed)
{
	switch (p) {
	case 0: return (int32_t)(rand_r(seed) % 50);
	case 1: return (int32_t)i;
	case 2: return (int32_t)(n - i);
	case 3: return 7;
	case 4: return (int32_t)(i < n / 2 ? i : n - i);
	default: return (int32_t)(i % 17);
	}
}

START_TEST(test_sort_as_qsort)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 16, 17, 18, 100, 1000, 4097, 30000 };
	unsigned seed = 1;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		for (int p = 0; p < 6; p++) {
			size_t n = sizes[k];
			struct rec *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));
			ck_assert(a && b);
			for (size_t i = 0; i < n; i++)
				a[i] = b[i] = (struct rec){ key_of(p, i, n, &seed), (uint32_t)i };
			sort_rec(a, n);
			qsort(b, n, sizeof(*b), rec_cmp);
			for (size_t i = 0; i < n; i++)
				ck_assert_msg(a[i].key == b[i].key && a[i].ord == b[i].ord, "n %zu pattern %d at %zu", n,
					      p, i);
			/* the heapsort fallback (past the depth limit) sorts the same */
			for (size_t i = 0; i < n; i++)
				a[i] = (struct rec){ key_of(p, i, n, &seed), (uint32_t)i };
			sort_rec_heap(a, n);
			for (size_t i = 1; i < n; i++)
				ck_assert(rec_less(&a[i - 1], &a[i]));
			free(a);
			free(b);
		}
}
END_TEST

/* Ranks: means 100, 104 and 120 (median 104): the third is 15.4 % above it, a straggler; a rank
 * without steps has no figures and is never the slowest. */
START_TEST(test_ranks_stragglers)
{
	int64_t a[] = { 90, 110, 100 }, b[] = { 104 }, c[] = { 130, 110 };
	struct rank_steps v[4] = { { .dur_ns = a, .n = 3 }, { .dur_ns = b, .n = 1 }, { .dur_ns = c, .n = 2 },
				   { .dur_ns = NULL, .n = 0 } };

	ck_assert_int_eq(stats_ranks(v, 4), 2);
	ck_assert_int_eq(v[0].mean_ns, 100);
	ck_assert_int_eq(v[0].median_ns, 100);
	ck_assert_int_eq(v[0].min_ns, 90);
	ck_assert_int_eq(v[0].max_ns, 110);
	ck_assert_int_eq(v[2].median_ns, 120);	/* the mean of the middle two */
	near(v[2].vs_median_pct, (120.0 / 104 - 1) * 100, 1e-12);
	near(v[0].vs_median_pct, (100.0 / 104 - 1) * 100, 1e-12);
	ck_assert(!v[0].straggler && !v[1].straggler && v[2].straggler && !v[3].straggler);
	ck_assert(isnan(v[3].vs_median_pct));
	ck_assert_int_eq(v[3].mean_ns, -1);
	/* one rank alone is never a straggler; none with steps: no slowest */
	ck_assert_int_eq(stats_ranks(v + 2, 1), 0);
	ck_assert(!v[2].straggler);
	ck_assert_int_eq(stats_ranks(v + 3, 1), -1);
}
END_TEST


/* A point at t with allocated a (all of it in one category) */
static void mpoint(int64_t row[MEM_POINT_COLS], int64_t t, int64_t param, int64_t a)
{
	memset(row, 0, MEM_POINT_COLS * sizeof(row[0]));
	row[0] = t;
	row[1 + CAT_PARAMETER] = param;
	row[1 + CAT_ACTIVATION] = a - param;
	row[MEM_COL_ALLOCATED] = a;
	row[MEM_COL_RESERVED] = 2 * a;
}

/* memseries: recordings stitched in time, the baseline split, a chart's points */
START_TEST(test_memseries)
{
	/* three recordings: 10..40; 30..60 overlaps (joins after 40); 100..120 after a gap */
	static const int64_t rec[3][4] = { { 10, 20, 30, 40 }, { 30, 40, 50, 60 }, { 100, 110, 120, -1 } };
	int64_t kept[16][MEM_POINT_COLS], row[MEM_POINT_COLS];
	struct memstitch st;
	size_t n = 0;

	memstitch_init(&st, 300);
	for (size_t r = 0; r < 3; r++) {
		memstitch_recording(&st);
		for (size_t i = 0; i < 4 && rec[r][i] >= 0; i++) {
			mpoint(row, rec[r][i], 1000, 1000 + rec[r][i]);
			int k = memstitch_point(&st, r, row);
			ck_assert_int_ge(k, 0);
			if (k)
				memcpy(kept[n++], row, sizeof(row));
		}
	}
	ck_assert_uint_eq(n, 9);	/* 30 and 40 of the second are the first's */
	ck_assert_int_eq(kept[4][0], 50);
	ck_assert_uint_eq(st.first, 0);
	ck_assert_uint_eq(st.ngaps, 1);
	ck_assert_int_eq(st.gaps[0], 60);
	ck_assert_int_eq(st.gaps[1], 100);
	/* 1000 bytes before recording began, param_bytes 300: 300 parameters, twice that optimizer
	 * state (Adam's two moments), the 100 left over unknown */
	ck_assert_int_eq(kept[0][1 + CAT_PARAMETER], 300);
	ck_assert_int_eq(kept[0][1 + CAT_OPTIMIZER_STATE], 600);
	ck_assert_int_eq(kept[0][1 + CAT_UNKNOWN], 100);
	ck_assert_int_eq(kept[0][MEM_COL_ALLOCATED], 1010);
	memstitch_free(&st);

	/* a recording that starts exactly where the last point was is inside it */
	memstitch_init(&st, 0);
	mpoint(row, 5, 0, 1);
	ck_assert_int_eq(memstitch_point(&st, 0, row), 1);
	memstitch_recording(&st);
	mpoint(row, 5, 0, 2);
	ck_assert_int_eq(memstitch_point(&st, 1, row), 0);
	ck_assert_uint_eq(st.ngaps, 0);
	memstitch_free(&st);

	/* a chart's stretches: the ends alone, the inner points shared out */
	size_t bounds[16], w0, w1;
	ck_assert_uint_eq(memseries_buckets(0, 10, 4, bounds), 4);
	/* inner stretches [1, 5) and [5, 9) */
	ck_assert_uint_eq(bounds[0], 0);
	ck_assert_uint_eq(bounds[1], 1);
	ck_assert_uint_eq(bounds[2], 5);
	ck_assert_uint_eq(bounds[3], 9);
	ck_assert_uint_eq(bounds[4], 10);
	ck_assert_uint_eq(memseries_buckets(0, 10, 0, bounds), 10);	/* all */
	ck_assert_uint_eq(bounds[3], 3);
	ck_assert_uint_eq(memseries_buckets(0, 10, 50, bounds), 10);
	/* two stretches, no ends kept apart: [0, 5) and [5, 10) */
	ck_assert_uint_eq(memseries_buckets(0, 10, 2, bounds), 2);
	ck_assert_uint_eq(bounds[1], 5);
	ck_assert_uint_eq(bounds[2], 10);
	/* a window's points: 3 of 10 from 20 */
	ck_assert_uint_eq(memseries_buckets(20, 23, 3, bounds), 3);
	ck_assert_uint_eq(bounds[0], 20);
	ck_assert_uint_eq(bounds[1], 21);
	ck_assert_uint_eq(bounds[2], 22);
	ck_assert_uint_eq(bounds[3], 23);
	ck_assert_uint_eq(memseries_buckets(5, 5, 7, bounds), 0);

	/* a window opens with the state before it and ends at the last point at or before its end:
	 * times 0..9, [3, 7]: 4 at or before 3, 8 at or before 7 */
	memseries_window(10, 4, 8, &w0, &w1);
	ck_assert_uint_eq(w0, 3);
	ck_assert_uint_eq(w1, 8);
	memseries_window(10, 0, 0, &w0, &w1);	/* before the first point: the first alone */
	ck_assert_uint_eq(w0, 0);
	ck_assert_uint_eq(w1, 1);
	memseries_window(10, 10, 10, &w0, &w1);	/* after the last: the last alone */
	ck_assert_uint_eq(w0, 9);
	ck_assert_uint_eq(w1, 10);
	memseries_window(0, 0, 0, &w0, &w1);
	ck_assert_uint_eq(w1, 0);
}
END_TEST

Suite *suite_stats(void)
{
	Suite *s = suite_create("stats");
	TCase *tc = tcase_create("distributions");

	tcase_add_test(tc, test_lgamma);
	tcase_add_test(tc, test_betai_closed_forms);
	tcase_add_test(tc, test_t_closed_forms);
	tcase_add_test(tc, test_t_tables);
	suite_add_tcase(s, tc);
	tc = tcase_create("samples");
	tcase_add_test(tc, test_summarise);
	tcase_add_test(tc, test_welch);
	tcase_add_test(tc, test_ranks_stragglers);
	suite_add_tcase(s, tc);
	tcase_add_test(tc, test_memseries);
	tc = tcase_create("sort");
	tcase_set_timeout(tc, 60);	/* 66 patterns up to 30,000 elements, each checked element by element */
	tcase_add_test(tc, test_sort_as_qsort);
	suite_add_tcase(s, tc);
	return s;
}
