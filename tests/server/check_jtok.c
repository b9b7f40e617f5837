/*
 * check_jtok.c: the streaming JSON tokenizer (server/ingest/jtok.c): tokens
 * and their text whatever the pieces, unescaping, the number grammar, the
 * byte an error names, the token and depth caps, cancelling.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/jtok.h"
#include "suites.h"

/* What the callbacks saw, as text: one token per line, "kind text", and each token's end offset. */
struct seen {
	char *s;
	size_t n, cap;
	struct jtok *t;
	uint64_t ends[64];
	size_t nends;
	int cancel_at;	/* cancel on this token (1-based); 0: never */
	int count;
};

static int add(struct seen *w, char kind, const void *text, size_t len)
{
	size_t need = w->n + len + 4;

	if (need > w->cap) {
		w->cap = need * 2;
		w->s = realloc(w->s, w->cap);
		ck_assert_ptr_nonnull(w->s);
	}
	w->s[w->n++] = kind;
	w->s[w->n++] = ' ';
	memcpy(w->s + w->n, text, len);
	w->n += len;
	w->s[w->n++] = '\n';
	w->s[w->n] = 0;
	if (w->nends < 64)
		w->ends[w->nends++] = jtok_offset(w->t);
	return ++w->count != w->cancel_at;
}

static int s_null(void *c) { return add(c, 'n', "", 0); }
static int s_bool(void *c, int v) { return add(c, 'b', v ? "1" : "0", 1); }
static int s_num(void *c, const char *s, size_t n) { return add(c, '0', s, n); }
static int s_str(void *c, const unsigned char *s, size_t n) { return add(c, 's', s, n); }
static int s_key(void *c, const unsigned char *s, size_t n) { return add(c, 'k', s, n); }
static int s_sm(void *c) { return add(c, '{', "", 0); }
static int s_em(void *c) { return add(c, '}', "", 0); }
static int s_sa(void *c) { return add(c, '[', "", 0); }
static int s_ea(void *c) { return add(c, ']', "", 0); }
static const struct jtok_callbacks cbs = { s_null, s_bool, s_num, s_str, s_sm, s_key, s_em, s_sa, s_ea };

/* Tokenize text in pieces of `piece` bytes (0: one piece); returns the status, w keeps what was seen. */
static int tokenize_with(struct seen *w, const char *text, size_t len, size_t piece, size_t max_token,
			 unsigned depth)
{
	int rc = JTOK_OK;

	memset(w, 0, sizeof(*w));
	w->t = jtok_new(&cbs, w, max_token, depth);
	ck_assert_ptr_nonnull(w->t);
	if (!piece)
		piece = len ? len : 1;
	for (size_t i = 0; i < len && rc == JTOK_OK; i += piece)
		rc = jtok_feed(w->t, (const uint8_t *)text + i, len - i < piece ? len - i : piece);
	if (rc == JTOK_OK)
		rc = jtok_finish(w->t);
	return rc;
}

static int tokenize(struct seen *w, const char *text, size_t piece)
{
	return tokenize_with(w, text, strlen(text), piece, 1 << 20, 64);
}

static void seen_free(struct seen *w)
{
	jtok_free(w->t);
	free(w->s);
}

static const char *doc =
	"{\"traceEvents\": [ {\"ph\":\"X\", \"name\":\"aten::mm\\u00e9\\n\", \"ts\": 1.5e3, \"dur\":-0.25,"
	"\"args\":{\"x\":[true,false,null,{}],\"\":[]}} ],\r\n\t\"n\": 12345678901234567890123}";
static const char *doc_tokens =
	"{ \nk traceEvents\n[ \n{ \nk ph\ns X\nk name\ns aten::mm\xc3\xa9\n\nk ts\n0 1.5e3\nk dur\n0 -0.25\n"
	"k args\n{ \nk x\n[ \nb 1\nb 0\nn \n{ \n} \n] \nk \n[ \n] \n} \n} \n] \nk n\n0 12345678901234567890123\n} \n";

START_TEST(test_tokens_whatever_the_pieces)
{
	struct seen whole, w;
	size_t len = strlen(doc);

	ck_assert_int_eq(tokenize(&whole, doc, 0), JTOK_OK);
	ck_assert_str_eq(whole.s, doc_tokens);
	for (size_t piece = 1; piece <= len; piece++) {
		ck_assert_int_eq(tokenize(&w, doc, piece), JTOK_OK);
		ck_assert_msg(!strcmp(w.s, whole.s), "pieces of %zu: %s", piece, w.s);
		/* each token's end is the same byte however the document was cut */
		ck_assert_uint_eq(w.nends, whole.nends);
		for (size_t k = 0; k < w.nends; k++)
			ck_assert_uint_eq(w.ends[k], whole.ends[k]);
		seen_free(&w);
	}
	/* every cut in two */
	for (size_t cut = 1; cut < len; cut++) {
		memset(&w, 0, sizeof(w));
		w.t = jtok_new(&cbs, &w, 1 << 20, 64);
		ck_assert_int_eq(jtok_feed(w.t, (const uint8_t *)doc, cut), JTOK_OK);
		ck_assert_int_eq(jtok_feed(w.t, (const uint8_t *)doc + cut, len - cut), JTOK_OK);
		ck_assert_int_eq(jtok_finish(w.t), JTOK_OK);
		ck_assert_msg(!strcmp(w.s, whole.s), "cut at %zu: %s", cut, w.s);
		seen_free(&w);
	}
	/* the key "traceEvents" ends at byte 14, the '[' after it at 17 */
	ck_assert_uint_eq(whole.ends[1], 14);
	ck_assert_uint_eq(whole.ends[2], 17);
	seen_free(&whole);
}
END_TEST

static void expect_string(const char *json, const char *decoded)
{
	struct seen w;
	char want[256];

	snprintf(want, sizeof(want), "s %s\n", decoded);
	for (size_t piece = 0; piece <= 3; piece++) {
		ck_assert_int_eq(tokenize(&w, json, piece), JTOK_OK);
		ck_assert_msg(!strcmp(w.s, want), "%s: got %s", json, w.s);
		seen_free(&w);
	}
}

static void expect_status(const char *json, int status)
{
	struct seen w;

	for (size_t piece = 0; piece <= 2; piece++) {
		ck_assert_msg(tokenize(&w, json, piece) == status, "%s in pieces of %zu: %s", json, piece,
			      jtok_message(w.t));
		if (status != JTOK_OK)
			ck_assert(jtok_message(w.t)[0]);
		seen_free(&w);
	}
}

START_TEST(test_unescape)
{
	expect_string("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"", "a\"b\\c/d\be\ff\ng\rh\ti");
	expect_string("\"\\u00e9\\u20AC\"", "\xc3\xa9\xe2\x82\xac");
	/* a surrogate pair is one code point */
	expect_string("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");
	/* a lone surrogate, either half, and \u0000 become U+FFFD */
	expect_string("\"x\\ud83dy\"", "x\xef\xbf\xbdy");
	expect_string("\"\\ude00\"", "\xef\xbf\xbd");
	expect_string("\"\\ud83d\\u0041\"", "\xef\xbf\xbd" "A");
	expect_string("\"a\\u0000b\"", "a\xef\xbf\xbd" "b");
	/* bytes are passed as they are: UTF-8 is the caller's to check */
	expect_string("\"\xff\xfe\"", "\xff\xfe");
	expect_status("\"\\x\"", JTOK_INVALID);
	expect_status("\"\\u12G4\"", JTOK_INVALID);
	expect_status("\"\\u12\"", JTOK_INVALID);
	expect_status("\"a\tb\"", JTOK_INVALID);	/* a raw control character */
	expect_status("\"open", JTOK_INVALID);
	expect_status("\"open\\", JTOK_INVALID);
}
END_TEST

START_TEST(test_numbers)
{
	static const char *good[] = { "0", "-0", "7", "-12", "0.5", "-0.5e10", "1E+2", "1e-2", "123.456E789",
				      "99999999999999999999999" };
	static const char *bad[] = { "01", "-", "1.", ".5", "1e", "+1", "1e+", "--1", "1.e3", "0x10", "1-2",
				     "Infinity", "NaN" };
	char buf[64];
	struct seen w;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(buf, sizeof(buf), "[%s]", good[i]);
		for (size_t piece = 0; piece <= 2; piece++) {
			ck_assert_int_eq(tokenize(&w, buf, piece), JTOK_OK);
			ck_assert(strstr(w.s, good[i]) != NULL);
			seen_free(&w);
		}
		/* and as the whole document, ended by the end of the input */
		expect_status(good[i], JTOK_OK);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "[%s]", bad[i]);
		expect_status(buf, JTOK_INVALID);
	}
}
END_TEST

static void expect_error_at(const char *json, int status, uint64_t at)
{
	struct seen w;

	for (size_t piece = 0; piece <= 3; piece++) {
		ck_assert_int_eq(tokenize(&w, json, piece), status);
		ck_assert_msg(jtok_error_at(w.t) == at, "%s in pieces of %zu: at %llu, not %llu (%s)", json,
			      piece, (unsigned long long)jtok_error_at(w.t), (unsigned long long)at,
			      jtok_message(w.t));
		seen_free(&w);
	}
}

START_TEST(test_errors_name_the_byte)
{
	/* 1-based: the offending byte */
	expect_error_at("{\"traceEvents\": [{\"ph\": X}]}", JTOK_INVALID, 25);
	expect_error_at("[1,]", JTOK_INVALID, 4);
	expect_error_at("{\"a\" 1}", JTOK_INVALID, 6);
	expect_error_at("{\"a\":1,}", JTOK_INVALID, 8);
	expect_error_at("[1 2]", JTOK_INVALID, 4);
	expect_error_at("[}", JTOK_INVALID, 2);
	expect_error_at("{]", JTOK_INVALID, 2);
	expect_error_at("[tru]", JTOK_INVALID, 2);
	expect_error_at("[truex]", JTOK_INVALID, 2);
	expect_error_at("{} x", JTOK_INVALID, 4);
	expect_error_at("{}{}", JTOK_INVALID, 3);
	/* \v and \f are not JSON whitespace */
	expect_error_at("\v{}", JTOK_INVALID, 1);
	/* ending early: the byte after the last */
	expect_error_at("{\"a\": [1, 2", JTOK_INVALID, 12);
	expect_error_at("", JTOK_INVALID, 1);
	expect_error_at("   ", JTOK_INVALID, 4);
	expect_error_at("[\"abc", JTOK_INVALID, 6);
}
END_TEST

START_TEST(test_token_cap)
{
	struct seen w;
	char *t = malloc(2000);

	/* a string of exactly the cap passes; one byte more does not, in one piece or many */
	memset(t, 'a', 1000);
	t[0] = '"';
	t[101] = '"';
	for (size_t piece = 0; piece <= 7; piece++) {
		ck_assert_int_eq(tokenize_with(&w, t, 102, piece, 100, 64), JTOK_OK);
		seen_free(&w);
		t[101] = 'a';
		t[102] = '"';
		ck_assert_int_eq(tokenize_with(&w, t, 103, piece, 100, 64), JTOK_TOO_LONG);
		ck_assert_int_eq(jtok_error_in_string(w.t), 1);
		ck_assert_uint_eq(jtok_error_at(w.t), 1);	/* where the string starts */
		seen_free(&w);
		t[101] = '"';
	}
	/* escapes count as written, and do not end the string early */
	strcpy(t, "[\"");
	for (size_t i = 2; i < 402; i += 2)
		memcpy(t + i, "\\\"", 2);
	strcpy(t + 402, "\"]");
	for (size_t piece = 1; piece <= 5; piece++) {
		ck_assert_int_eq(tokenize_with(&w, t, strlen(t), piece, 100, 64), JTOK_TOO_LONG);
		ck_assert_uint_eq(jtok_error_at(w.t), 2);
		seen_free(&w);
		ck_assert_int_eq(tokenize_with(&w, t, strlen(t), piece, 400, 64), JTOK_OK);
		ck_assert_uint_eq(strlen(w.s), 3 + 203 + 3);	/* "[ \n", "s " + 200 quotes + "\n", "] \n" */
		seen_free(&w);
	}
	/* a number */
	t[0] = '[';
	memset(t + 1, '7', 150);
	strcpy(t + 151, "]");
	for (size_t piece = 0; piece <= 3; piece++) {
		ck_assert_int_eq(tokenize_with(&w, t, strlen(t), piece, 100, 64), JTOK_TOO_LONG);
		ck_assert_int_eq(jtok_error_in_string(w.t), 0);
		seen_free(&w);
	}
	free(t);
}
END_TEST

START_TEST(test_depth_cap)
{
	struct seen w;

	ck_assert_int_eq(tokenize_with(&w, "[[{\"a\":[]}]]", 12, 0, 100, 4), JTOK_OK);
	seen_free(&w);
	ck_assert_int_eq(tokenize_with(&w, "[[{\"a\":[[]]}]]", 14, 0, 100, 4), JTOK_TOO_DEEP);
	ck_assert_uint_eq(jtok_error_at(w.t), 9);
	seen_free(&w);
}
END_TEST

START_TEST(test_cancel)
{
	struct seen w;

	memset(&w, 0, sizeof(w));
	w.t = jtok_new(&cbs, &w, 100, 64);
	w.cancel_at = 3;	/* the first number */
	ck_assert_int_eq(jtok_feed(w.t, (const uint8_t *)"{\"a\":12,", 8), JTOK_CANCELLED);
	ck_assert_int_eq(w.count, 3);
	/* a stopped tokenizer stays stopped, and calls nothing more */
	ck_assert_int_eq(jtok_feed(w.t, (const uint8_t *)"\"b\":1}", 6), JTOK_CANCELLED);
	ck_assert_int_eq(jtok_finish(w.t), JTOK_CANCELLED);
	ck_assert_int_eq(w.count, 3);
	seen_free(&w);
}
END_TEST

Suite *suite_jtok(void)
{
	Suite *s = suite_create("jtok");
	TCase *tc = tcase_create("tokens");
	tcase_set_timeout(tc, 60);

	tcase_add_test(tc, test_tokens_whatever_the_pieces);
	tcase_add_test(tc, test_unescape);
	tcase_add_test(tc, test_numbers);
	tcase_add_test(tc, test_errors_name_the_byte);
	tcase_add_test(tc, test_token_cap);
	tcase_add_test(tc, test_depth_cap);
	tcase_add_test(tc, test_cancel);
	suite_add_tcase(s, tc);
	return s;
}
