/* check_sha256.c: common/sha256.c against FIPS 180-4 test vectors. */
#include <string.h>

#include "sha256.h"
#include "suites.h"

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
	hex_of(million, sizeof(million), 4099, hex);
	ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

Suite *suite_sha256(void)
{
	Suite *s = suite_create("sha256");
	TCase *tc = tcase_create("vectors");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_vectors);
	suite_add_tcase(s, tc);
	return s;
}
