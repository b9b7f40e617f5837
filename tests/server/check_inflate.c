/* check_inflate.c: gzip detection and capped streaming inflate (server/ingest/inflate.c). */
#include <stdlib.h>
#include <string.h>

#include "ingest/inflate.h"
#include "suites.h"
#include "testutil.h"

struct out {
	uint8_t *buf;
	size_t len, cap;
};

static int collect(void *payload, const uint8_t *data, size_t len)
{
	struct out *o = payload;

	if (o->len + len > o->cap) {
		o->cap = (o->len + len) * 2;
		o->buf = realloc(o->buf, o->cap);
	}
	memcpy(o->buf + o->len, data, len);
	o->len += len;
	return TP_OK;
}

/* feed in pieces of `piece` bytes; returns the first error */
static int run(const uint8_t *in, size_t len, size_t piece, uint64_t max_out, uint32_t ratio,
	       struct out *o, struct tp_errbuf *err, int *gz)
{
	struct inflate_stage st;
	size_t i;
	int rc = 0;

	memset(o, 0, sizeof(*o));
	inflate_init(&st, max_out, ratio, collect, o);
	for (i = 0; i < len && !rc; i += piece)
		rc = inflate_feed(&st, in + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = inflate_finish(&st, err);
	if (gz)
		*gz = inflate_is_gzip(&st);
	inflate_release(&st);
	return rc;
}

static const char text[] = "{\"traceEvents\": [{\"ph\": \"X\", \"name\": \"aten::mm\", \"ts\": 1, \"dur\": 2}]}";

START_TEST(test_plain_passes_through)
{
	struct tp_errbuf err = { 0 };
	struct out o;
	int gz;

	ck_assert_int_eq(run((const uint8_t *)text, strlen(text), 1, 1 << 20, 0, &o, &err, &gz), 0);
	ck_assert_int_eq(gz, 0);
	ck_assert_uint_eq(o.len, strlen(text));
	ck_assert(!memcmp(o.buf, text, o.len));
	free(o.buf);
}
END_TEST

START_TEST(test_gzip_any_piece_size)
{
	size_t zlen, pieces[] = { 1, 2, 3, 7, 4096 }, i;
	uint8_t *z = tu_gzip(text, strlen(text), &zlen);

	for (i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		struct tp_errbuf err = { 0 };
		struct out o;
		int gz;
		ck_assert_int_eq(run(z, zlen, pieces[i], 1 << 20, 0, &o, &err, &gz), 0);
		ck_assert_int_eq(gz, 1);
		ck_assert_uint_eq(o.len, strlen(text));
		ck_assert(!memcmp(o.buf, text, o.len));
		free(o.buf);
	}
	free(z);
}
END_TEST

START_TEST(test_gzip_concatenated_members)
{
	size_t zlen;
	uint8_t *z = tu_gzip(text, strlen(text), &zlen), *two = malloc(2 * zlen);
	struct tp_errbuf err = { 0 };
	struct out o;

	memcpy(two, z, zlen);
	memcpy(two + zlen, z, zlen);
	ck_assert_int_eq(run(two, 2 * zlen, 5, 1 << 20, 0, &o, &err, NULL), 0);
	ck_assert_uint_eq(o.len, 2 * strlen(text));
	free(o.buf);
	free(two);
	free(z);
}
END_TEST

/* zlib's check is off: ours of the trailer's CRC-32 and size, whatever the pieces */
START_TEST(test_gzip_trailer_checked)
{
	size_t zlen, pieces[] = { 1, 3, 9, 4096 };
	uint8_t *z = tu_gzip(text, strlen(text), &zlen), *two = malloc(2 * zlen + 1);

	memcpy(two, z, zlen);
	two[zlen] = '\n';
	memcpy(two + zlen + 1, z, zlen);
	for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
		struct tp_errbuf err = { 0 };
		struct out o;
		/* two good members, a blank between them */
		ck_assert_int_eq(run(two, 2 * zlen + 1, pieces[i], 1 << 20, 0, &o, &err, NULL), 0);
		ck_assert_uint_eq(o.len, 2 * strlen(text));
		free(o.buf);
		/* the second member's CRC-32 off by a bit */
		two[2 * zlen + 1 - 8] ^= 1;
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(run(two, 2 * zlen + 1, pieces[i], 1 << 20, 0, &o, &err, NULL), TP_ERR_INVALID);
		ck_assert_str_eq(err.code, "bad_gzip");
		ck_assert_ptr_nonnull(strstr(err.msg, "incorrect data check"));
		two[2 * zlen + 1 - 8] ^= 1;
		free(o.buf);
		/* the first member's size */
		two[zlen - 1] ^= 1;
		memset(&err, 0, sizeof(err));
		ck_assert_int_eq(run(two, 2 * zlen + 1, pieces[i], 1 << 20, 0, &o, &err, NULL), TP_ERR_INVALID);
		ck_assert_ptr_nonnull(strstr(err.msg, "incorrect length check"));
		two[zlen - 1] ^= 1;
		free(o.buf);
	}
	free(two);
	free(z);
}
END_TEST

START_TEST(test_truncated_gzip)
{
	size_t zlen;
	uint8_t *z = tu_gzip(text, strlen(text), &zlen);
	struct tp_errbuf err = { 0 };
	struct out o;

	ck_assert_int_eq(run(z, zlen - 9, 4, 1 << 20, 0, &o, &err, NULL), TP_ERR_INVALID);
	ck_assert_str_eq(err.code, "truncated_gzip");
	free(o.buf);
	free(z);
}
END_TEST

START_TEST(test_gzip_of_garbage)
{
	uint8_t bad[64];
	struct tp_errbuf err = { 0 };
	struct out o;

	memset(bad, 0xAB, sizeof(bad));
	bad[0] = 0x1f;
	bad[1] = 0x8b;
	ck_assert_int_eq(run(bad, sizeof(bad), 64, 1 << 20, 0, &o, &err, NULL), TP_ERR_INVALID);
	ck_assert_str_eq(err.code, "bad_gzip");
	free(o.buf);
}
END_TEST

START_TEST(test_caps)
{
	size_t n = 64u << 20, zlen;
	uint8_t *zeros = calloc(1, n), *z = tu_gzip(zeros, n, &zlen);
	struct tp_errbuf err = { 0 };
	struct out o;

	free(zeros);
	/* inflated size */
	ck_assert_int_eq(run(z, zlen, 65536, 1u << 20, 0, &o, &err, NULL), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "inflated_too_large");
	ck_assert_uint_le(o.len, 1u << 20);
	free(o.buf);
	/* ratio: 64 MiB of zeros is about 1000:1 */
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(run(z, zlen, 65536, 1ull << 40, 100, &o, &err, NULL), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "inflate_ratio_exceeded");
	free(o.buf);
	/* and without caps it all comes out */
	ck_assert_int_eq(run(z, zlen, 65536, 1ull << 40, 0, &o, &err, NULL), 0);
	ck_assert_uint_eq(o.len, n);
	free(o.buf);
	free(z);
}
END_TEST

Suite *suite_inflate(void)
{
	Suite *s = suite_create("inflate");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_plain_passes_through);
	tcase_add_test(tc, test_gzip_any_piece_size);
	tcase_add_test(tc, test_gzip_concatenated_members);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_gzip_trailer_checked);
	tcase_add_test(tc, test_truncated_gzip);
	tcase_add_test(tc, test_gzip_of_garbage);
	tcase_add_test(tc, test_caps);
	suite_add_tcase(s, tc);
	return s;
}
