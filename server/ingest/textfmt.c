/*
 * textfmt.c: other profilers' text reports (see textfmt.h): detection and
 * the line loop; each format's lines are read in fmt_*.c, units in
 * textfmt_units.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ingest/textfmt_int.h"
#include "utf8.h"

const struct tf_limits tf_default_limits = {
	.max_line = 64u << 10,
	.max_rows = 1u << 22,
	.max_strings = 256u << 20,
};

/* ---- detection ---- */

static int stack_line_like(const char *s, size_t n)
{
	size_t i = n;

	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	return i < n && i > 1 && s[i - 1] == ' ';
}

int textfmt_detect(const uint8_t *p, size_t n, int at_end)
{
	const uint8_t *end = p + n;
	const char *ls;
	size_t ln;
	int seen = 0;

	if (n < TF_SNIFF && !at_end)
		at_end = 0;
	else
		at_end = 1;
	/* a first line longer than the sniff: only folded stacks have those (deep Python stacks) */
	if (at_end && n >= TF_SNIFF && !memchr(p, '\n', n) && memchr(p, ';', n) && !memchr(p, '|', n) && p[0] != '{' &&
	    p[0] != '[')
		return TF_STACKS;
	while (tf_next_line(&p, end, at_end, &ls, &ln)) {
		const char *t = ls;
		size_t tn = ln;
		tf_trim(&t, &tn);
		if (!tn) {
			if (p == end && at_end)
				break;
			continue;
		}
		seen++;
		if (tf_find(t, tn, "Profiler Report") || tf_starts(t, tn, "Profile stats for:"))
			return TF_LIGHTNING;
		if (tf_starts(t, tn, "Action") && memchr(t, '|', tn))
			return TF_LIGHTNING;
		if (tf_is_dashes(t, tn) || (tn > 8 && t[0] == '=' && t[tn - 1] == '=')) {
			/* key_averages: the header names Self CPU */
			const char *h;
			size_t hn;
			while (tf_next_line(&p, end, at_end, &h, &hn))
				if (tf_find(h, hn, "Self CPU") && tf_find(h, hn, "Name"))
					return TF_KEYAVG;
				else if (!tf_is_dashes(h, hn) && hn && h[0] != '=' && !tf_find(h, hn, "This report"))
					return TF_NONE;
			return at_end ? TF_NONE : -1;
		}
		if (tf_gpu_header_like(t, tn) || tf_is_smi_time(t, tn))
			return TF_GPULOG;
		if (stack_line_like(t, tn))
			return TF_STACKS;
		return TF_NONE;
	}
	return at_end || seen ? TF_NONE : -1;
}

/* ---- the parser ---- */

static int line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	p->lineno++;
	if (n && s[n - 1] == '\r')
		n--;
	for (size_t i = 0; i < n;) {
		size_t k = tp_utf8_len((const unsigned char *)s + i, (const unsigned char *)s + n);
		if (!k || (s[i] < 0x20 && s[i] != '\t' && s[i] >= 0))
			return tf_bad(p, err, "not UTF-8 text");
		i += k;
	}
	switch (p->kind) {
	case TF_LIGHTNING:
		return tf_lightning_line(p, s, n, err);
	case TF_KEYAVG:
		return tf_keyavg_line(p, s, n, err);
	case TF_STACKS:
		return tf_stacks_line(p, s, n, err);
	default:
		return tf_gpu_line(p, s, n, err);
	}
}

struct textfmt_parser *textfmt_parser_new(int kind, const struct tf_limits *lim)
{
	struct textfmt_parser *p;

	if (kind <= TF_NONE || kind >= TF_NKINDS || !(p = tp_calloc(1, sizeof(*p))))
		return NULL;
	p->kind = kind;
	p->lim = lim ? *lim : tf_default_limits;
	if (!(p->line = tp_malloc(p->lim.max_line + 1))) {
		tp_free(p);
		return NULL;
	}
	p->r.kind = kind;
	p->r.total_ns = p->r.self_cpu_total_ns = p->r.self_dev_total_ns = -1;
	p->gidx_col = -1;
	return p;
}

int textfmt_parser_feed(struct textfmt_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	int rc;

	if (p->failed)
		return tp_fail(err, TP_ERR_INVALID, "invalid_table", "the parser already failed");
	while (len) {
		const uint8_t *nl = memchr(data, '\n', len);
		size_t take = nl ? (size_t)(nl - data) : len;
		if (p->nline + take > p->lim.max_line) {
			p->failed = 1;
			return tp_fail(err, TP_ERR_TOOBIG, "line_too_long", "%s: line %llu is longer than %zu bytes",
				       tf_kind_names[p->kind], (unsigned long long)p->lineno + 1, p->lim.max_line);
		}
		memcpy(p->line + p->nline, data, take);
		p->nline += take;
		data += take, len -= take;
		if (nl) {
			data++, len--;
			if ((rc = line(p, p->line, p->nline, err)))
				return rc;
			p->nline = 0;
		}
	}
	return TP_OK;
}

int textfmt_parser_finish(struct textfmt_parser *p, const struct tf_result **res, struct tp_errbuf *err)
{
	int rc;

	if (p->failed)
		return tp_fail(err, TP_ERR_INVALID, "invalid_table", "the parser already failed");
	if (p->nline && (rc = line(p, p->line, p->nline, err)))
		return rc;
	p->nline = 0;
	p->lineno++;
	switch (p->kind) {
	case TF_LIGHTNING:
		if (!p->r.nactions)
			return tf_bad(p, err, "the report ends before any action");
		break;
	case TF_KEYAVG:
		if (p->ka_state < 3)
			return tf_bad(p, err, "the table is truncated: it ends before its closing dash line");
		break;
	case TF_STACKS:
		if ((rc = tf_stacks_finish(p, err)))
			return rc;
		break;
	default:
		if (!p->r.ngpu_rows)
			return tf_bad(p, err, "no rows");
	}
	p->r.actions = p->act;
	p->r.functions = p->fn;
	p->r.col_names = (const char *const *)p->colname;
	p->r.col_units = p->colunit;
	p->r.ops = p->ops;
	p->r.frames = p->fr;
	p->r.gpu_cols = (const char *const *)p->gcol;
	p->r.gpu_units = p->gunit;
	p->r.gpu_rows = p->grows;
	*res = &p->r;
	return TP_OK;
}

void textfmt_parser_free(struct textfmt_parser *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nstrs; i++)
		tp_free(p->strs[i]);
	tp_free(p->strs);
	tp_free(p->line);
	tp_free(p->act);
	tp_free(p->fn);
	tp_free(p->ops);
	tp_free(p->fr);
	tp_free(p->first_sum);
	tp_free(p->last_sum);
	tp_free(p->stamp);
	tp_free(p->ends);
	tp_free(p->ht);
	tp_free(p->grows);
	tp_free(p);
}

double tf_gpu_mean(const struct tf_result *r, size_t col, int gpu)
{
	double s = 0;
	size_t n = 0;

	for (size_t i = 0; i < r->ngpu_rows; i++)
		if (r->gpu_rows[i].gpu == gpu && !isnan(r->gpu_rows[i].v[col]))
			s += r->gpu_rows[i].v[col], n++;
	return n ? s / (double)n : NAN;
}

int tf_col(const struct tf_result *r, const char *name)
{
	size_t n = r->kind == TF_KEYAVG ? r->ncols : r->ngpu_cols;
	const char *const *c = r->kind == TF_KEYAVG ? r->col_names : r->gpu_cols;

	for (size_t i = 0; i < n; i++)
		if (c[i] && !strcmp(c[i], name))
			return (int)i;
	return -1;
}
