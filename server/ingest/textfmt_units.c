/*
 * textfmt_units.c: what the text formats share (see textfmt_int.h): numbers
 * and units read exactly, lines, and the parser's strings, growth and errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt_int.h"

const char *const tf_kind_names[TF_NKINDS] = { "none", "lightning_report", "key_averages", "stacks", "gpu_log" };

/* ---- small helpers ---- */

int tf_is_sp(int c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

void tf_trim(const char **s, size_t *n)
{
	while (*n && tf_is_sp((unsigned char)**s))
		(*s)++, (*n)--;
	while (*n && tf_is_sp((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

int tf_starts(const char *s, size_t n, const char *pre)
{
	size_t k = strlen(pre);

	return n >= k && !memcmp(s, pre, k);
}

const char *tf_find(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(s + i, needle, k))
			return s + i;
	return NULL;
}

/*
 * A decimal (sign, digits, point, digits, exponent) times 10^scale, rounded
 * half away from zero, exactly. Returns 0, or -1 when it is not one or overflows.
 */
int tf_dec_scaled(const char *s, size_t n, int scale, int64_t *out)
{
	size_t i = 0;
	int neg = 0, digits = 0, frac = 0, ex = 0;
	uint64_t m = 0;
	int drop = 0, round = 0;

	if (i < n && (s[i] == '-' || s[i] == '+'))
		neg = s[i++] == '-';
	for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		if (m > (UINT64_MAX - 9) / 10) {
			drop++;	/* too many digits: scale instead */
			continue;
		}
		m = m * 10 + (uint64_t)(s[i] - '0');
	}
	if (i < n && s[i] == '.') {
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
			if (m > (UINT64_MAX - 9) / 10)
				continue;
			m = m * 10 + (uint64_t)(s[i] - '0');
			frac++;
		}
	}
	if (!digits)
		return -1;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		int eneg = 0, ed = 0;
		i++;
		if (i < n && (s[i] == '-' || s[i] == '+'))
			eneg = s[i++] == '-';
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, ed++)
			if (ex < 1000)
				ex = ex * 10 + (s[i] - '0');
		if (!ed)
			return -1;
		if (eneg)
			ex = -ex;
	}
	if (i != n)
		return -1;
	int p = scale + ex + drop - frac;	/* value = m * 10^p */
	while (p > 0) {
		if (m > UINT64_MAX / 10)
			return -1;
		m *= 10, p--;
	}
	while (p < 0) {
		round = (int)(m % 10);
		m /= 10, p++;
		if (!m && p < -20)
			break;
	}
	if (round >= 5)
		m++;
	if (m > (uint64_t)INT64_MAX)
		return -1;
	*out = neg ? -(int64_t)m : (int64_t)m;
	return 0;
}

/* "12.979us" / "1.5ms" / "2.549s" -> ns */
int tf_parse_time(const char *s, size_t n, int64_t *ns)
{
	if (n > 2 && !memcmp(s + n - 2, "us", 2))
		return tf_dec_scaled(s, n - 2, 3, ns);
	if (n > 2 && !memcmp(s + n - 2, "ms", 2))
		return tf_dec_scaled(s, n - 2, 6, ns);
	if (n > 1 && s[n - 1] == 's')
		return tf_dec_scaled(s, n - 1, 9, ns);
	return -1;
}

/* "256.00 Kb", "0 b", "-1.70 MB", "256 B" -> bytes (1024-based) */
int tf_parse_mem(const char *s, size_t n, int64_t *b)
{
	static const char *const units[] = { "b", "Kb", "Mb", "Gb", "B", "KB", "MB", "GB", "Tb", "TB" };
	static const int pw[] = { 0, 1, 2, 3, 0, 1, 2, 3, 4, 4 };
	const char *sp = memchr(s, ' ', n);
	int64_t h;

	if (!sp)
		return -1;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		size_t k = strlen(units[u]);
		if ((size_t)(s + n - sp - 1) != k || memcmp(sp + 1, units[u], k))
			continue;
		if (tf_dec_scaled(s, (size_t)(sp - s), 2, &h))	/* hundredths */
			return -1;
		int64_t mul = (int64_t)1 << (10 * pw[u]);
		if (h > INT64_MAX / mul || h < -(INT64_MAX / mul))
			return -1;
		int64_t x = h * mul;
		*b = (x >= 0 ? x + 50 : x - 50) / 100;
		return 0;
	}
	return -1;
}

/* "0.75%" -> 75 (hundredths of a percent) */
int tf_parse_pct(const char *s, size_t n, int64_t *bp)
{
	if (n > 1 && s[n - 1] == '%') {
		n--;
		while (n && s[n - 1] == ' ')
			n--;
	}
	return tf_dec_scaled(s, n, 2, bp);
}

/* ---- lines ---- */

/* The next line of [p, end): its bounds; returns 0 when no complete line (unless at_end). */
int tf_next_line(const uint8_t **p, const uint8_t *end, int at_end, const char **ls, size_t *ln)
{
	const uint8_t *nl = *p;

	/* nothing left: no line (an empty one here forever kept the key_averages look-ahead
	 * looping on "---------" alone: fuzz_textfmt's timeout) */
	if (*p >= end)
		return 0;
	/* a line ends at LF, CRLF or a lone CR (classic Mac OS, some editors' saves) */
	while (nl < end && *nl != '\n' && *nl != '\r')
		nl++;
	if (nl == end && !at_end)
		return 0;
	*ls = (const char *)*p;
	*ln = (size_t)(nl - *p);
	if (nl < end && *nl == '\r' && nl + 1 < end && nl[1] == '\n')
		nl++;
	*p = nl < end ? nl + 1 : end;
	return 1;
}

int tf_is_dashes(const char *s, size_t n)
{
	size_t d = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '-')
			d++;
		else if (s[i] != ' ')
			return 0;
	}
	return d >= 8;
}

int tf_gpu_header_like(const char *s, size_t n)
{
	return tf_starts(s, n, "timestamp") || tf_starts(s, n, "index") || tf_starts(s, n, "utilization.") ||
	       tf_starts(s, n, "memory.") || tf_starts(s, n, "power.") || tf_starts(s, n, "temperature.") ||
	       tf_starts(s, n, "name, ") || tf_starts(s, n, "clocks.");
}

/* nvidia-smi dmon's first header line: "# gpu pwr ..." or, with -o DT, "#Date Time gpu ...". */
int tf_dmon_header(const char *s, size_t n)
{
	return tf_starts(s, n, "# gpu ") || (tf_starts(s, n, "#Date") && tf_find(s, n, " gpu "));
}

/* YYYY/MM/DD HH:MM:SS.mmm */
int tf_is_smi_time(const char *s, size_t n)
{
	static const char pat[] = "dddd/dd/dd dd:dd:dd";

	if (n < sizeof(pat) - 1)
		return 0;
	for (size_t i = 0; i < sizeof(pat) - 1; i++)
		if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i])
			return 0;
	return 1;
}

/* ---- the parser's strings, growth and errors ---- */


char *tf_keep_str(struct textfmt_parser *p, const char *s, size_t n)
{
	char *c;

	if (tf_held(p, n + 1 + sizeof(char *) + 16))
		return NULL;
	if (p->nstrs == p->capstrs) {
		size_t nc = p->capstrs ? p->capstrs * 2 : 64;
		char **ns = tp_realloc(p->strs, nc * sizeof(*ns));
		if (!ns)
			return NULL;
		p->strs = ns, p->capstrs = nc;
	}
	if (!(c = tp_malloc(n + 1)))
		return NULL;
	memcpy(c, s, n);
	c[n] = 0;
	return p->strs[p->nstrs++] = c;
}

/* Room in *arr for n + 1 items of size sz, within max; -1: past max or out of memory. */
int tf_held(struct textfmt_parser *p, size_t bytes)
{
	if (bytes > p->lim.max_held - p->held)
		return -1;
	p->held += bytes;
	return 0;
}

int tf_grow(struct textfmt_parser *p, void **arr, size_t *cap, size_t n, size_t sz)
{
	size_t old = *cap;

	if (n < old)
		return 0;
	if (n >= p->lim.max_rows || tp_grow(arr, cap, n + 1, sz))
		return -1;
	return tf_held(p, (*cap - old) * sz);
}

int tf_bad(struct textfmt_parser *p, struct tp_errbuf *err, const char *what)
{
	p->failed = 1;
	return tp_fail(err, TP_ERR_INVALID, "invalid_table", "%s: line %llu: %s", tf_kind_names[p->kind],
		       (unsigned long long)p->lineno, what);
}

int tf_toobig(struct textfmt_parser *p, struct tp_errbuf *err)
{
	p->failed = 1;
	return tp_fail(err, TP_ERR_TOOBIG, "too_many_rows", "%s: line %llu: more rows or names than the caps allow",
		       tf_kind_names[p->kind], (unsigned long long)p->lineno);
}

