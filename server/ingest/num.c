/*
 * num.c: exact decimal conversions for trace numbers (see num.h).
 *
 * num_us_to_ns() splits the text into sign, digits and a decimal exponent,
 * then scales by 10^3 in integer arithmetic: value = digits * 10^(exp + 3).
 * Digits past the ns are rounded (half away from zero) and dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "num.h"

struct decimal {
	int neg;
	char digits[40];	/* significant digits, leading zeros dropped */
	int ndigits;
	int dropped;		/* digits beyond the 40 kept, all below ns anyway */
	long exp;		/* value = digits * 10^exp */
};

/*
 * Eight ASCII digits at s as their value, or -1 when a byte of them is not a
 * digit: all eight at once (a trace's ts has 16 digits, its ids fewer than
 * eight, so num_to_i64 goes a digit at a time), little-endian SWAR: each
 * byte's high nibble must be 3, and stay 3 with 6 added; then pairs, fours
 * and the eight are combined by three multiplies.
 */
static inline int64_t eight_digits(const char *s)
{
	uint64_t v;

	memcpy(&v, s, 8);
	if (((v & 0xF0F0F0F0F0F0F0F0u) | (((v + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) !=
	    0x3333333333333333u)
		return -1;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	v -= 0x3030303030303030u;
	v = v * 10 + (v >> 8);
	v = ((v & 0x000000FF000000FFu) * (100 + (1000000ull << 32)) +
	     ((v >> 16) & 0x000000FF000000FFu) * (1 + (10000ull << 32))) >> 32;
	return (int64_t)v;
}

static int decimal_parse(const char *s, size_t len, struct decimal *d)
{
	size_t i = 0;
	int any = 0, seen_dot = 0;

	memset(d, 0, sizeof(*d));
	if (i < len && (s[i] == '-' || s[i] == '+'))
		d->neg = s[i++] == '-';
	for (; i < len; i++) {
		char c = s[i];
		if (c >= '0' && c <= '9') {
			any = 1;
			if (d->ndigits == 0 && c == '0') {
				if (seen_dot)
					d->exp--;
				continue;
			}
			if (d->ndigits < (int)sizeof(d->digits)) {
				d->digits[d->ndigits++] = c;
				if (seen_dot)
					d->exp--;
			} else {
				if (!seen_dot)
					d->exp++;
				d->dropped = d->dropped || c != '0';
			}
		} else if (c == '.' && !seen_dot) {
			seen_dot = 1;
		} else {
			break;
		}
	}
	if (!any)
		return -1;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		long e = 0;
		int eneg = 0, edig = 0;
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			eneg = s[i++] == '-';
		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, edig++)
			if (e < 100000)
				e = e * 10 + (s[i] - '0');
		if (!edig)
			return -1;
		d->exp += eneg ? -e : e;
	}
	return i == len ? 0 : -1;
}

/* digits * 10^(exp + shift), rounded to an integer; -1 on overflow */
static int decimal_scale(const struct decimal *d, int shift, int64_t *out)
{
	long e = d->exp + shift;
	uint64_t v = 0;
	int i, n = d->ndigits, round_up = 0;

	if (n == 0) {
		*out = 0;
		return 0;
	}
	if (e < 0) {
		long keep = n + e;	/* digits left of the point */
		if (keep < 0) {
			*out = 0;
			return 0;
		}
		round_up = keep < n && d->digits[keep] >= '5';
		n = (int)keep;
		e = 0;
	}
	for (i = 0; i < n; i++) {
		unsigned dig = (unsigned)(d->digits[i] - '0');
		if (v > (UINT64_MAX - dig) / 10)
			return -1;
		v = v * 10 + dig;
	}
	for (; e > 0; e--) {
		if (v > UINT64_MAX / 10)
			return -1;
		v *= 10;
	}
	v += (uint64_t)round_up;
	if (v > (uint64_t)INT64_MAX + d->neg)	/* INT64_MIN fits, its negation does not */
		return -1;
	*out = d->neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

/* The largest integer part (µs) whose ns, plus 999, fits in int64. */
#define FAST_MAX_US ((uint64_t)(INT64_MAX - 999) / 1000)

int num_us_to_ns(const char *s, size_t len, int64_t *out)
{
	struct decimal d;
	size_t i = 0, dot;
	uint64_t v = 0;

	/*
	 * The common shapes, "123456" and "123456.789", are done directly while
	 * the integer part stays below FAST_MAX_US, where no overflow is possible.
	 */
	for (int64_t e; i + 8 <= len && i + 8 <= 16 && (e = eight_digits(s + i)) >= 0; i += 8)
		v = v * 100000000 + (uint64_t)e;
	while (i < len && i < 16 && s[i] >= '0' && s[i] <= '9')
		v = v * 10 + (uint64_t)(s[i++] - '0');
	if (i > 0 && v <= FAST_MAX_US) {
		if (i == len) {
			*out = (int64_t)(v * 1000);
			return 0;
		}
		dot = i;
		if (s[i] == '.' && len - dot - 1 <= 3 && len - dot - 1 > 0) {
			uint64_t frac = 0;
			for (i = dot + 1; i < len && s[i] >= '0' && s[i] <= '9'; i++)
				frac = frac * 10 + (uint64_t)(s[i] - '0');
			if (i == len) {
				for (size_t k = len - dot - 1; k < 3; k++)
					frac *= 10;
				*out = (int64_t)(v * 1000 + frac);
				return 0;
			}
		}
	}
	if (decimal_parse(s, len, &d))
		return -1;
	return decimal_scale(&d, 3, out);
}

int num_to_i64(const char *s, size_t len, int64_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	int neg = 0;

	if (i < len && s[i] == '-')
		neg = 1, i++;
	if (i == len)
		return -1;
	/* 18 digits cannot overflow: no check for them (a division per digit costs) */
	for (size_t fast = i + 18; i < len && i < fast && s[i] >= '0' && s[i] <= '9'; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		unsigned dig = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - dig) / 10)
			return -1;
		v = v * 10 + dig;
	}
	if (i < len) {
		/* a fraction or exponent: fall back to the exact decimal path */
		struct decimal d;
		if (decimal_parse(s, len, &d) || decimal_scale(&d, 0, out))
			return -1;
		return 1;
	}
	if (neg) {
		if (v > (uint64_t)INT64_MAX + 1)
			return -1;
		*out = (int64_t)(0 - v);
	} else {
		*out = (int64_t)v;	/* above INT64_MAX: same bits, see num.h */
	}
	return 0;
}

int num_to_double(const char *s, size_t len, double *out)
{
	char buf[64], *end;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = 0;
	*out = strtod(buf, &end);
	return *end ? -1 : 0;
}
