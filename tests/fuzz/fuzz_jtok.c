/*
 * fuzz_jtok.c: libFuzzer target for the JSON tokenizer (server/ingest/jtok.c),
 * differential against yajl, which the trace parser used before it.
 *
 * The first byte picks the piece size jtok is fed in (yajl gets the whole
 * input at once). Checks: no crash, no leak; both accept or both refuse; when
 * both accept, the same tokens in the same order with the same text. Strings
 * are compared byte for byte unless the input has a \u escape: the two map a
 * lone surrogate and \u0000 differently on purpose (jtok.h), so there only
 * the token kinds and lengths' presence are compared. A refusal from jtok
 * comes with a message and a byte within the input (or just past it).
 * Nesting is capped at 64 for jtok; deeper inputs are only checked for no crash.
 */
#define _GNU_SOURCE	/* memmem */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "ingest/jtok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rec {
	uint8_t *b;
	size_t n, cap;
	int texts;	/* record strings' bytes */
};

static void put(struct rec *r, const void *p, size_t n)
{
	if (!n)
		return;
	if (r->n + n > r->cap) {
		size_t cap = r->cap ? r->cap : 256;
		while (cap < r->n + n)
			cap *= 2;
		if (!(r->b = realloc(r->b, cap)))
			abort();
		r->cap = cap;
	}
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

static int tok(void *ctx, char kind, const void *s, size_t n, int text)
{
	struct rec *r = ctx;

	put(r, &kind, 1);
	if (text || r->texts) {
		put(r, &n, sizeof(n));
		put(r, s, n);
	}
	return 1;
}

static int r_null(void *c) { return tok(c, 'n', NULL, 0, 0); }
static int r_bool(void *c, int v) { return tok(c, v ? 't' : 'f', NULL, 0, 0); }
static int r_num(void *c, const char *s, size_t n) { return tok(c, '0', s, n, 1); }
static int r_str(void *c, const unsigned char *s, size_t n) { return tok(c, 's', s, n, 0); }
static int r_key(void *c, const unsigned char *s, size_t n) { return tok(c, 'k', s, n, 0); }
static int r_sm(void *c) { return tok(c, '{', NULL, 0, 0); }
static int r_em(void *c) { return tok(c, '}', NULL, 0, 0); }
static int r_sa(void *c) { return tok(c, '[', NULL, 0, 0); }
static int r_ea(void *c) { return tok(c, ']', NULL, 0, 0); }

static const struct jtok_callbacks jcb = { r_null, r_bool, r_num, r_str, r_sm, r_key, r_em, r_sa, r_ea };
static const yajl_callbacks ycb = { r_null, r_bool, NULL, NULL, r_num, r_str, r_sm, r_key, r_em, r_sa, r_ea };

/* Whether brackets outside strings nest deeper than cap somewhere. */
static int depth_over(const uint8_t *d, size_t n, int cap)
{
	int depth = 0, in_str = 0;

	for (size_t i = 0; i < n; i++) {
		if (in_str) {
			if (d[i] == '\\')
				i++;
			else if (d[i] == '"')
				in_str = 0;
		} else if (d[i] == '"') {
			in_str = 1;
		} else if (d[i] == '[' || d[i] == '{') {
			if (++depth > cap)
				return 1;
		} else if ((d[i] == ']' || d[i] == '}') && depth > 0) {
			depth--;
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rec a = { 0 }, b = { 0 };
	struct jtok *t;
	yajl_handle y;
	size_t piece, i;
	int jrc = JTOK_OK, yok, blank = 1, escapes;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 61 + 1;
	data++, size--;
	escapes = memmem(data, size, "\\u", 2) != NULL;
	a.texts = b.texts = !escapes;

	if (!(t = jtok_new(&jcb, &a, 1u << 20, 64)))
		abort();
	for (i = 0; i < size && jrc == JTOK_OK; i += piece)
		jrc = jtok_feed(t, data + i, size - i < piece ? size - i : piece);
	if (jrc == JTOK_OK)
		jrc = jtok_finish(t);
	if (jrc != JTOK_OK && jrc != JTOK_INVALID && jrc != JTOK_TOO_DEEP)
		abort();	/* no callback cancels, no token passes 1 MiB within max_len */
	if (jrc != JTOK_OK && (!jtok_message(t)[0] || jtok_error_at(t) < 1 || jtok_error_at(t) > size + 1))
		abort();

	if (!(y = yajl_alloc(&ycb, NULL, &b)))
		abort();
	yajl_config(y, yajl_dont_validate_strings, 1);
	yok = yajl_parse(y, data, size) == yajl_status_ok && yajl_complete_parse(y) == yajl_status_ok;
	yajl_free(y);

	for (i = 0; i < size; i++)
		if (data[i] != ' ' && data[i] != '\t' && data[i] != '\n' && data[i] != '\r')
			blank = 0;
	/* yajl takes an empty document as complete, and \v and \f as whitespace; jtok refuses
	 * both, as RFC 8259 (and Python's json) do */
	if (!blank && !depth_over(data, size, 64) && !memchr(data, '\v', size) && !memchr(data, '\f', size)) {
		/* yajl misses trailing garbage that opens a token it never sees end ("1 \"x") */
		int trailing = jrc == JTOK_INVALID && !strcmp(jtok_message(t), "something after the document's value");
		if ((jrc == JTOK_OK) != yok && !(yok && trailing))
			abort();
		if (yok && (a.n != b.n || memcmp(a.b, b.b, a.n)))
			abort();
	}
	jtok_free(t);
	free(a.b);
	free(b.b);
	return 0;
}
