/*
 * jtok.c: a streaming JSON tokenizer (see jtok.h).
 *
 * One loop over the piece, dispatching on the byte; the grammar is a state
 * (what may come next) and a stack of open containers. A string without
 * escapes is found with a 16-byte scan and handed over in place: trace
 * files are mostly short keys and names, and this path is most of the
 * work. On the V100 fixture this reads 1,290 MB/s where yajl, which it
 * replaced on the trace path, reads 670 (bench/jtok_bench.c, 2-core EPYC).
 *
 * A token cut by the end of a piece is copied into `carry` (up to
 * max_token), completed from the next piece, then run through the same
 * loop as a piece of its own that ends exactly at the token's end.
 */
#include <stdio.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "alloc.h"
#include "jtok.h"

enum state {
	S_VALUE,	/* a value: the document's, after ':', after ',' in an array */
	S_ARRAY_FIRST,	/* after '[': a value or ']' */
	S_KEY_FIRST,	/* after '{': a key or '}' */
	S_KEY,		/* after ',' in an object */
	S_COLON,
	S_AFTER,	/* after a value inside a container: ',' or its end */
	S_DONE,		/* the document's value is complete */
};

enum carry_kind { C_NONE, C_STRING, C_NUMBER, C_LITERAL };

struct jtok {
	struct jtok_callbacks cb;
	void *ctx;
	size_t max_token;
	unsigned max_depth, depth;
	uint8_t *stack;		/* '{' or '[' per open container */
	enum state state;
	int status;
	uint64_t fed;		/* bytes fed before the piece at hand */

	/* offsets during a callback: byte p of the buffer being run is at adj + (p - run_start) */
	const uint8_t *run_start, *cur;
	uint64_t adj;

	/* a token cut by the end of a piece */
	enum carry_kind ckind;
	int cesc;		/* a string's carried part ends inside an escape */
	uint8_t *carry;
	size_t nc, ccap;
	uint64_t cstart;	/* where it starts in the document */

	uint8_t *sbuf;		/* an unescaped string */
	size_t scap;

	char msg[96];
	uint64_t err_at;
	int err_string;
};

/* bytes a number's text is made of (constant: tokenizers run on several threads at once) */
static const uint8_t num_char[256] = {
	['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
	['-'] = 1, ['+'] = 1, ['.'] = 1, ['e'] = 1, ['E'] = 1,
};

/* a byte that ends the fast scan of a string: '"', '\\' or a control character */
static inline int str_stop(uint8_t c)
{
	return c < 0x20 || c == '"' || c == '\\';
}

struct jtok *jtok_new(const struct jtok_callbacks *cb, void *ctx, size_t max_token, unsigned max_depth)
{
	struct jtok *t = tp_calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->cb = *cb;
	t->ctx = ctx;
	t->max_token = max_token;
	t->max_depth = max_depth ? max_depth : 1;
	if (!(t->stack = tp_malloc(t->max_depth))) {
		tp_free(t);
		return NULL;
	}
	return t;
}

void jtok_free(struct jtok *t)
{
	if (!t)
		return;
	tp_free(t->stack);
	tp_free(t->carry);
	tp_free(t->sbuf);
	tp_free(t);
}

const char *jtok_message(const struct jtok *t) { return t->msg; }
uint64_t jtok_error_at(const struct jtok *t) { return t->err_at; }
int jtok_error_in_string(const struct jtok *t) { return t->err_string; }
uint64_t jtok_offset(const struct jtok *t) { return t->adj + (uint64_t)(t->cur - t->run_start); }

/* Offset (1-based) of byte p of the buffer being run. */
static uint64_t at(const struct jtok *t, const uint8_t *p)
{
	return t->adj + (uint64_t)(p - t->run_start) + 1;
}

static int fail(struct jtok *t, int status, uint64_t where, const char *what)
{
	t->status = status;
	t->err_at = where;
	snprintf(t->msg, sizeof(t->msg), "%s", what);
	return status;
}

static int bad(struct jtok *t, const uint8_t *p, const char *what)
{
	if (t->state == S_DONE)
		what = "something after the document's value";
	return fail(t, JTOK_INVALID, at(t, p), what);
}

static int too_long(struct jtok *t, uint64_t where, int string)
{
	t->err_string = string;
	return fail(t, JTOK_TOO_LONG, where, string ? "string too long" : "token too long");
}

static int cancelled(struct jtok *t)
{
	return fail(t, JTOK_CANCELLED, jtok_offset(t), "cancelled");
}

static enum state after_value(const struct jtok *t)
{
	return t->depth ? S_AFTER : S_DONE;
}

static int is_value_state(enum state s)
{
	return s == S_VALUE || s == S_ARRAY_FIRST;
}

/* The first byte from s on that ends the fast string scan, or end. */
static const uint8_t *scan_string(const uint8_t *s, const uint8_t *end)
{
#if defined(__SSE2__)
	const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1f);

	while (end - s >= 16) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
					 _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v));
		int mask = _mm_movemask_epi8(m);
		if (mask)
			return s + __builtin_ctz((unsigned)mask);
		s += 16;
	}
#endif
	while (s < end && !str_stop(*s))
		s++;
	return s;
}

static int hex4(const uint8_t *s, unsigned *out)
{
	unsigned v = 0;

	for (int i = 0; i < 4; i++) {
		uint8_t c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(uint8_t *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (uint8_t)(0xc0 | cp >> 6);
		o[1] = (uint8_t)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (uint8_t)(0xe0 | cp >> 12);
		o[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (uint8_t)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (uint8_t)(0xf0 | cp >> 18);
	o[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (uint8_t)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Unescape the string between s and its closing quote q (both checked to
 * be well formed as far as '\\' pairs go) into sbuf. An escape's output is
 * never longer than its text (\uXXXX: 6 bytes for at most 3; a pair: 12 for 4).
 */
static int unescape(struct jtok *t, const uint8_t *s, const uint8_t *q, size_t *len)
{
	size_t n = (size_t)(q - s);
	uint8_t *o;

	if (tp_grow((void **)&t->sbuf, &t->scap, n, 1))
		return fail(t, JTOK_NOMEM, at(t, s), "out of memory");
	o = t->sbuf;
	while (s < q) {
		unsigned cp, lo;
		if (*s != '\\') {
			*o++ = *s++;
			continue;
		}
		switch (s[1]) {
		case '"': *o++ = '"'; s += 2; continue;
		case '\\': *o++ = '\\'; s += 2; continue;
		case '/': *o++ = '/'; s += 2; continue;
		case 'b': *o++ = '\b'; s += 2; continue;
		case 'f': *o++ = '\f'; s += 2; continue;
		case 'n': *o++ = '\n'; s += 2; continue;
		case 'r': *o++ = '\r'; s += 2; continue;
		case 't': *o++ = '\t'; s += 2; continue;
		case 'u':
			break;
		default:
			return bad(t, s + 1, "an invalid escape in a string");
		}
		if (q - s < 6 || hex4(s + 2, &cp))
			return bad(t, s + 1, "an invalid \\u escape in a string");
		s += 6;
		if (cp >= 0xd800 && cp <= 0xdbff && q - s >= 6 && s[0] == '\\' && s[1] == 'u' &&
		    !hex4(s + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			s += 6;
		} else if ((cp >= 0xd800 && cp <= 0xdfff) || cp == 0) {
			cp = 0xfffd;
		}
		o += put_utf8(o, cp);
	}
	*len = (size_t)(o - t->sbuf);
	return JTOK_OK;
}

/* Keep the start of a token the piece cut, to complete from the next. */
static int carry(struct jtok *t, const uint8_t *p, const uint8_t *end, enum carry_kind kind, int esc)
{
	size_t n = (size_t)(end - p);

	if (n > t->max_token + 2)
		return too_long(t, at(t, p), kind == C_STRING);
	if (tp_grow((void **)&t->carry, &t->ccap, n, 1))
		return fail(t, JTOK_NOMEM, at(t, p), "out of memory");
	memcpy(t->carry, p, n);
	t->nc = n;
	t->ckind = kind;
	t->cesc = esc;
	t->cstart = at(t, p);
	return JTOK_OK;
}

/* A string that has an escape or a control character, or runs past the piece. */
static int slow_string(struct jtok *t, const uint8_t *p, const uint8_t *end, int key, const uint8_t **next)
{
	const uint8_t *s = p + 1, *q = s;
	size_t len;
	int ok;

	for (;;) {
		q = scan_string(q, end);
		if (q == end) {
			*next = end;
			return carry(t, p, end, C_STRING, 0);
		}
		if (*q == '"')
			break;
		if (*q != '\\')
			return bad(t, q, "a control character in a string");
		if (end - q < 2) {	/* the piece ends inside the escape */
			*next = end;
			return carry(t, p, end, C_STRING, 1);
		}
		q += 2;
	}
	if ((size_t)(q - s) > t->max_token)
		return too_long(t, at(t, p), 1);
	if (unescape(t, s, q, &len))
		return t->status;
	t->cur = q + 1;
	ok = key ? t->cb.map_key(t->ctx, t->sbuf, len) : t->cb.string(t->ctx, t->sbuf, len);
	if (!ok)
		return cancelled(t);
	t->state = key ? S_COLON : after_value(t);
	*next = q + 1;
	return JTOK_OK;
}

static int valid_number(const uint8_t *s, size_t n)
{
	size_t i = 0;

	if (s[i] == '-')
		i++;
	if (i == n)
		return 0;
	if (s[i] == '0')
		i++;
	else if (s[i] >= '1' && s[i] <= '9')
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return 0;
	if (i < n && s[i] == '.') {
		if (++i == n || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i == n || s[i] < '0' || s[i] > '9')
			return 0;
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	}
	return i == n;
}

/*
 * The ',' after a value, when it comes next (with a blank after it): taken
 * here instead of by another turn of run()'s switch, as is the ':' after a
 * key. A trace is mostly "key":value, pairs, so this halves the switch's
 * turns per token; what it takes, and the state it leaves, are the
 * switch's own.
 */
static inline const uint8_t *comma_after(struct jtok *t, const uint8_t *p, const uint8_t *end)
{
	if (p < end && *p == ',' && t->state == S_AFTER) {
		t->state = t->stack[t->depth - 1] == '{' ? S_KEY : S_VALUE;
		if (++p < end && (*p == ' ' || *p == '\n'))
			p++;
	}
	return p;
}

/*
 * Tokenize buf[0, n). whole: buf ends exactly where its last token does (a
 * carried token, completed), so a number or literal at the end is complete.
 */
static int run(struct jtok *t, const uint8_t *buf, size_t n, uint64_t adj, int whole)
{
	const uint8_t *p = buf, *end = buf + n, *q;
	size_t len;
	int ok;

	t->run_start = buf;
	t->adj = adj;
	while (p < end) {
		uint8_t c = *p;
		switch (c) {
		case ' ': case '\n': case '\r': case '\t':
			p++;
			continue;
		case '{': case '[':
			if (!is_value_state(t->state))
				return bad(t, p, c == '{' ? "an object where none may be" : "an array where none may be");
			if (t->depth >= t->max_depth)
				return fail(t, JTOK_TOO_DEEP, at(t, p), "nesting too deep");
			t->stack[t->depth++] = c;
			t->cur = p + 1;
			if (!(c == '{' ? t->cb.start_map(t->ctx) : t->cb.start_array(t->ctx)))
				return cancelled(t);
			t->state = c == '{' ? S_KEY_FIRST : S_ARRAY_FIRST;
			p++;
			continue;
		case '}': case ']':
			if (!t->depth || t->stack[t->depth - 1] != (c == '}' ? '{' : '[') ||
			    !(t->state == S_AFTER || t->state == (c == '}' ? S_KEY_FIRST : S_ARRAY_FIRST)))
				return bad(t, p, c == '}' ? "a '}' where none may be" : "a ']' where none may be");
			t->depth--;
			t->cur = p + 1;
			if (!(c == '}' ? t->cb.end_map(t->ctx) : t->cb.end_array(t->ctx)))
				return cancelled(t);
			t->state = after_value(t);
			p = comma_after(t, p + 1, end);
			continue;
		case ',':
			if (t->state != S_AFTER)
				return bad(t, p, "a ',' where none may be");
			t->state = t->stack[t->depth - 1] == '{' ? S_KEY : S_VALUE;
			p++;
			continue;
		case ':':
			if (t->state != S_COLON)
				return bad(t, p, "a ':' where none may be");
			t->state = S_VALUE;
			p++;
			continue;
		case '"': {
			int key = t->state == S_KEY || t->state == S_KEY_FIRST;
			if (!key && !is_value_state(t->state))
				return bad(t, p, t->state == S_COLON ? "a string where a ':' should be"
								      : "a string where none may be");
			q = scan_string(p + 1, end);
			if (q < end && *q == '"') {
				len = (size_t)(q - p - 1);
				if (len > t->max_token)
					return too_long(t, at(t, p), 1);
				t->cur = q + 1;
				ok = key ? t->cb.map_key(t->ctx, p + 1, len) : t->cb.string(t->ctx, p + 1, len);
				if (!ok)
					return cancelled(t);
				p = q + 1;
				if (!key) {
					t->state = after_value(t);
					p = comma_after(t, p, end);
				} else if (p < end && *p == ':') {
					t->state = S_VALUE;
					if (++p < end && *p == ' ')
						p++;
				} else {
					t->state = S_COLON;
				}
				continue;
			}
			if (slow_string(t, p, end, key, &p))
				return t->status;
			continue;
		}
		case '-': case '0': case '1': case '2': case '3': case '4':
		case '5': case '6': case '7': case '8': case '9':
			if (!is_value_state(t->state))
				return bad(t, p, "a number where none may be");
			for (q = p + 1; q < end && num_char[*q]; q++)
				;
			if (q == end && !whole)
				return carry(t, p, end, C_NUMBER, 0);
			len = (size_t)(q - p);
			if (len > t->max_token)
				return too_long(t, at(t, p), 0);
			if (!valid_number(p, len))
				return bad(t, p, "a malformed number");
			t->cur = q;
			if (!t->cb.number(t->ctx, (const char *)p, len))
				return cancelled(t);
			t->state = after_value(t);
			p = comma_after(t, q, end);
			continue;
		case 't': case 'f': case 'n':
			if (!is_value_state(t->state))
				return bad(t, p, "a literal where none may be");
			for (q = p + 1; q < end && *q >= 'a' && *q <= 'z' && q - p <= 5; q++)
				;
			if (q == end && !whole)
				return carry(t, p, end, C_LITERAL, 0);
			len = (size_t)(q - p);
			t->cur = q;
			if (len == 4 && !memcmp(p, "true", 4))
				ok = t->cb.boolean(t->ctx, 1);
			else if (len == 5 && !memcmp(p, "false", 5))
				ok = t->cb.boolean(t->ctx, 0);
			else if (len == 4 && !memcmp(p, "null", 4))
				ok = t->cb.null(t->ctx);
			else
				return bad(t, p, "an invalid literal (not true, false or null)");
			if (!ok)
				return cancelled(t);
			t->state = after_value(t);
			p = comma_after(t, q, end);
			continue;
		default:
			return bad(t, p, "an invalid character");
		}
	}
	return JTOK_OK;
}

/* How much of data completes the carried token; *done when it ends there. */
static size_t complete_carry(struct jtok *t, const uint8_t *data, size_t len, int *done)
{
	size_t k = 0;

	*done = 0;
	switch (t->ckind) {
	case C_STRING:
		for (; k < len; k++) {
			if (t->cesc)
				t->cesc = 0;
			else if (data[k] == '\\')
				t->cesc = 1;
			else if (data[k] == '"') {
				*done = 1;
				return k + 1;
			}
		}
		return k;
	case C_NUMBER:
		while (k < len && num_char[data[k]])
			k++;
		break;
	default:
		while (k < len && data[k] >= 'a' && data[k] <= 'z' && t->nc + k <= 5)
			k++;
		break;
	}
	*done = k < len;
	return k;
}

int jtok_feed(struct jtok *t, const uint8_t *data, size_t len)
{
	int rc;

	if (t->status)
		return t->status;
	if (t->ckind != C_NONE) {
		int done;
		size_t k = complete_carry(t, data, len, &done);
		size_t limit = t->max_token + (t->ckind == C_STRING ? 2 : 0);

		if (t->nc + k > limit)
			return too_long(t, t->cstart, t->ckind == C_STRING);
		if (tp_grow((void **)&t->carry, &t->ccap, t->nc + k, 1))
			return fail(t, JTOK_NOMEM, t->cstart, "out of memory");
		memcpy(t->carry + t->nc, data, k);
		t->nc += k;
		if (!done) {
			t->fed += len;
			return JTOK_OK;
		}
		t->ckind = C_NONE;
		rc = run(t, t->carry, t->nc, t->fed + k - t->nc, 1);
		t->nc = 0;
		if (rc)
			return rc;
		data += k;
		len -= k;
		t->fed += k;
	}
	rc = run(t, data, len, t->fed, 0);
	t->fed += len;
	return rc;
}

int jtok_finish(struct jtok *t)
{
	if (t->status)
		return t->status;
	if (t->ckind == C_NUMBER || t->ckind == C_LITERAL) {
		t->ckind = C_NONE;
		if (run(t, t->carry, t->nc, t->fed - t->nc, 1))
			return t->status;
	}
	if (t->ckind == C_STRING || t->state != S_DONE)
		return fail(t, JTOK_INVALID, t->fed + 1, "the document ends before its value does");
	return JTOK_OK;
}
