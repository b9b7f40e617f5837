/* check_num.c: exact number text conversions (server/ingest/num.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/num.h"
#include "suites.h"

static int64_t ns(const char *s)
{
	int64_t v = 0;

	ck_assert_msg(num_us_to_ns(s, strlen(s), &v) == 0, "'%s' should convert", s);
	return v;
}

START_TEST(test_us_to_ns_generations)
{
	/* integer µs since the epoch (PyTorch <= 2.3) */
	ck_assert_int_eq(ns("1669783687464181"), 1669783687464181000LL);
	/* absolute float µs with a ns fraction (2024 builds): 19 digits, more than a double holds */
	ck_assert_int_eq(ns("1712195495519689.047"), 1712195495519689047LL);
	/* relative µs (PyTorch >= 2.4) */
	ck_assert_int_eq(ns("4458676522690.655"), 4458676522690655LL);
	ck_assert_int_eq(ns("0.040"), 40);
	ck_assert_int_eq(ns("0"), 0);
	ck_assert_int_eq(ns("0.5"), 500);
	ck_assert_int_eq(ns("-5"), -5000);
}
END_TEST

START_TEST(test_us_to_ns_rounding_and_exponents)
{
	ck_assert_int_eq(ns("1.0005"), 1001);
	ck_assert_int_eq(ns("1.0004999"), 1000);
	ck_assert_int_eq(ns("1.5e3"), 1500000);
	ck_assert_int_eq(ns("2E-3"), 2);
	ck_assert_int_eq(ns("1e-9"), 0);
	ck_assert_int_eq(ns("0.000000001"), 0);
	ck_assert_int_eq(ns("9223372036854775.807"), INT64_MAX);
	/* the int64 range is not symmetric: INT64_MIN fits, one below does not */
	ck_assert_int_eq(ns("-9223372036854775.808"), INT64_MIN);
	ck_assert_int_eq(ns("-9223372036854775.807"), INT64_MIN + 1);
}
END_TEST

START_TEST(test_us_to_ns_rejects)
{
	int64_t v;

	ck_assert_int_eq(num_us_to_ns("9223372036854775.808", 20, &v), -1);
	ck_assert_int_eq(num_us_to_ns("-9223372036854775.809", 21, &v), -1);
	ck_assert_int_eq(num_us_to_ns("99999999999999999999", 20, &v), -1);
	ck_assert_int_eq(num_us_to_ns("1e400", 5, &v), -1);
	ck_assert_int_eq(num_us_to_ns("abc", 3, &v), -1);
	ck_assert_int_eq(num_us_to_ns("", 0, &v), -1);
	ck_assert_int_eq(num_us_to_ns("1e", 2, &v), -1);
}
END_TEST

START_TEST(test_i64)
{
	int64_t v;

	ck_assert_int_eq(num_to_i64("139926520725504", 15, &v), 0);
	ck_assert_int_eq(v, 139926520725504LL);
	/* "Comms Id" above INT64_MAX: same bits */
	ck_assert_int_eq(num_to_i64("10159970886766084423", 20, &v), 0);
	ck_assert_uint_eq((uint64_t)v, 10159970886766084423ULL);
	ck_assert_int_eq(num_to_i64("18446744073709551615", 20, &v), 0);
	ck_assert_int_eq(num_to_i64("18446744073709551616", 20, &v), -1);
	ck_assert_int_eq(num_to_i64("-9223372036854775808", 20, &v), 0);
	ck_assert_int_eq(v, INT64_MIN);
	ck_assert_int_eq(num_to_i64("-9223372036854775809", 20, &v), -1);
	ck_assert_int_eq(num_to_i64("12.7", 4, &v), 1);
	ck_assert_int_eq(v, 13);
	ck_assert_int_eq(num_to_i64("-", 1, &v), -1);
}
END_TEST

/* eight digits at a time (num.c: eight_digits), against strtoll: every length, a dot or a letter
 * at every place */
START_TEST(test_digits_any_length)
{
	const char *digits = "98765432109876543210";
	char buf[32];
	int64_t v;

	for (size_t n = 1; n <= 18; n++) {
		memcpy(buf, digits, n);
		buf[n] = 0;
		ck_assert_int_eq(num_to_i64(buf, n, &v), 0);
		ck_assert_int_eq(v, strtoll(buf, NULL, 10));
		if (n <= 15) {
			ck_assert_int_eq(num_us_to_ns(buf, n, &v), 0);
			ck_assert_int_eq(v, strtoll(buf, NULL, 10) * 1000);
		}
		for (size_t k = 0; k < n; k++) {
			char c = buf[k];
			buf[k] = 'x';
			ck_assert_int_eq(num_to_i64(buf, n, &v), -1);
			ck_assert_int_eq(num_us_to_ns(buf, n, &v), -1);
			buf[k] = c;
		}
	}
	/* "1234567890123.4" and the like: the dot at every place */
	for (size_t k = 1; k < 15; k++) {
		size_t n = 15;
		double want;
		memcpy(buf, digits, k);
		buf[k] = '.';
		memcpy(buf + k + 1, digits + k, n - k - 1);
		buf[n] = 0;
		want = strtod(buf, NULL) * 1000;
		ck_assert_int_eq(num_us_to_ns(buf, n, &v), 0);
		ck_assert_msg(v - want < 1 && want - v < 1, "%s: %lld, not %.1f", buf, (long long)v, want);
	}
}
END_TEST

START_TEST(test_double)
{
	double d;

	ck_assert_int_eq(num_to_double("0.25", 4, &d), 0);
	ck_assert(d == 0.25);
	ck_assert_int_eq(num_to_double("1e3", 3, &d), 0);
	ck_assert(d == 1000.0);
	ck_assert_int_eq(num_to_double("x", 1, &d), -1);
}
END_TEST

Suite *suite_num(void)
{
	Suite *s = suite_create("num");
	TCase *tc = tcase_create("conversions");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_us_to_ns_generations);
	tcase_add_test(tc, test_us_to_ns_rounding_and_exponents);
	tcase_add_test(tc, test_us_to_ns_rejects);
	tcase_add_test(tc, test_i64);
	tcase_add_test(tc, test_digits_any_length);
	tcase_add_test(tc, test_double);
	suite_add_tcase(s, tc);
	return s;
}
