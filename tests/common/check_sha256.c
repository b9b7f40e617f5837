/* check_sha256.c: common/sha256.c against FIPS 180-4 test vectors; common's thread names and mapped tables. */
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>

#include "alloc.h"
#include "sha256.h"
#include "suites.h"
#include "tp.h"

static void hex_of(const char *s, size_t len, size_t piece, char out[65])
{
	struct sha256 h;
	size_t i;

	sha256_init(&h);
	for (i = 0; i < len; i += piece)
		sha256_update(&h, s + i, len - i < piece ? len - i : piece);
	sha256_final_hex(&h, out);
}

START_TEST(test_vectors)
{
	char hex[65];
	static char million[1000000];

	hex_of("", 0, 1, hex);
	ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	hex_of("abc", 3, 1, hex);
	ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, 7, hex);
	ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	memset(million, 'a', sizeof(million));
	for (int portable = 0; portable < 2; portable++) {
		sha256_use_portable(portable);
		hex_of(million, sizeof(million), 4099, hex);
		ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	}
	sha256_use_portable(0);
}
END_TEST

/* The hardware path (where the CPU has one) agrees with the portable one on odd lengths and splits. */
START_TEST(test_paths_agree)
{
	static uint8_t data[100003];
	char a[65], b[65];
	struct sha256 h;
	size_t i, lens[] = { 0, 1, 55, 56, 63, 64, 65, 127, 128, 1000, 100003 };

	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 2654435761u >> 13);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		sha256_use_portable(1);
		sha256_init(&h);
		sha256_update(&h, data, lens[i]);
		sha256_final_hex(&h, a);
		sha256_use_portable(0);
		sha256_init(&h);
		sha256_update(&h, data, lens[i] / 3);
		sha256_update(&h, data + lens[i] / 3, lens[i] - lens[i] / 3);
		sha256_final_hex(&h, b);
		ck_assert_str_eq(a, b);
	}
}
END_TEST

/* tp_thread_name: what PR_GET_NAME reads back, cut to the kernel's 15 bytes */
START_TEST(test_thread_name)
{
	char got[16] = { 0 };

	tp_thread_name("ts-parse");
	ck_assert_int_eq(prctl(PR_GET_NAME, got, 0, 0, 0), 0);
	ck_assert_str_eq(got, "ts-parse");
	tp_thread_name("a-name-longer-than-fifteen");
	ck_assert_int_eq(prctl(PR_GET_NAME, got, 0, 0, 0), 0);
	ck_assert_str_eq(got, "a-name-longer-t");
	tp_thread_name("check_unit");
}
END_TEST

/* tp_map: zeroed, aligned to 2 MiB, writable to its end, refused like any allocation */
START_TEST(test_map)
{
	size_t sizes[] = { 1, 4096, TP_HUGE_PAGE, TP_HUGE_PAGE + (1 << 20) + 5 };
	uint8_t *p;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		ck_assert_ptr_nonnull(p = tp_map(sizes[i]));
		ck_assert_uint_eq((uintptr_t)p % TP_HUGE_PAGE, 0);
		ck_assert_uint_eq(p[0], 0);
		ck_assert_uint_eq(p[sizes[i] - 1], 0);
		memset(p, 0xab, sizes[i]);
		ck_assert_uint_eq(p[sizes[i] / 2], 0xab);
		tp_unmap(p, sizes[i]);
	}
	ck_assert_ptr_null(tp_map(0));
	ck_assert_ptr_null(tp_map(SIZE_MAX - 4096));
	tp_alloc_fail_after(0);
	p = tp_map(4096);
	ck_assert_int_eq(tp_alloc_failures(), 1);
	tp_alloc_fail_after(-1);
	ck_assert_ptr_null(p);
	tp_unmap(NULL, 4096);	/* nothing */
}
END_TEST

Suite *suite_sha256(void)
{
	Suite *s = suite_create("sha256");
	TCase *tc = tcase_create("vectors");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_vectors);
	tcase_add_test(tc, test_paths_agree);
	tcase_add_test(tc, test_thread_name);
	tcase_add_test(tc, test_map);
	suite_add_tcase(s, tc);
	return s;
}
