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
	.max_held = 128u << 20,	/* what a row holds, not what it is called: a key_averages row of a few
				 * cells held 232 bytes, so 978 KB of gzip reached 512 MiB (issue 50) */
};

/* ---- detection ---- */

static int stack_line_like(const char *s, size_t n)
{
	size_t i = n;

	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	return i < n && i > 1 && s[i - 1] == ' ';
}

/* A Lightning SimpleProfiler header: "Action" in the first cell, with or without the leading '|'. */
static int lightning_header_like(const char *t, size_t tn)
{
	if (tn && t[0] == '|') {
		t++, tn--;
		tf_trim(&t, &tn);
	}
	return tf_starts(t, tn, "Action") && memchr(t, '|', tn);
}

/* The next non-blank line's bounds, trimmed; 0 when none is complete. */
static int next_text(const uint8_t **p, const uint8_t *end, int at_end, const char **t, size_t *tn)
{
	while (tf_next_line(p, end, at_end, t, tn)) {
		tf_trim(t, tn);
		if (*tn)
			return 1;
	}
	return 0;
}

/*
 * After a dash line (or a "Profile stats for:" title): whether a
 * key_averages header follows (1), something else (0), or the bytes end
 * first (-1).
 */
static int keyavg_follows(const uint8_t *p, const uint8_t *end, int at_end)
{
	const char *h;
	size_t hn;

	while (next_text(&p, end, at_end, &h, &hn))
		if (tf_find(h, hn, "Self CPU") && tf_find(h, hn, "Name"))
			return 1;
		else if (!tf_is_dashes(h, hn) && h[0] != '=' && !tf_find(h, hn, "This report"))
			return 0;
	return -1;
}

/*
 * Lines that are none of the formats (a log line, a progress bar, a notebook
 * cell's prompt) are passed over until one says its kind; folded stacks have
 * no such preamble: their first lines are all "frames weight".
 */
int textfmt_detect(const uint8_t *p, size_t n, int at_end)
{
	const uint8_t *end = p + n;
	const char *t;
	size_t tn;
	int seen = 0, stacky = 1;
	/* the bytes may end inside a line: at_end 2, or a full sniff with more to come */
	int cut = at_end == 2 || (!at_end && n >= TF_SNIFF);

	at_end = at_end || n >= TF_SNIFF;
	/* a first line longer than the sniff: only folded stacks have those (deep Python stacks) */
	if (cut && !memchr(p, '\n', n) && !memchr(p, '\r', n) && memchr(p, ';', n) &&
	    !memchr(p, '|', n) && p[0] != '{' && p[0] != '[')
		return TF_STACKS;
	while (next_text(&p, end, at_end, &t, &tn)) {
		if (p == end && cut && end[-1] != '\n' && end[-1] != '\r')
			break;	/* a line the sniff may have cut: not judged */
		seen++;
		if (tf_find(t, tn, "Profiler Report")) {
			/* "FIT Profiler Report": SimpleProfiler's table, AdvancedProfiler's or PyTorchProfiler's sections */
			const uint8_t *q = p;
			if (!next_text(&q, end, at_end, &t, &tn))
				return at_end ? TF_LIGHTNING : -1;
			if (!tf_starts(t, tn, "Profile stats for:"))
				return TF_LIGHTNING;
			p = q;
		}
		if (tf_starts(t, tn, "Profile stats for:")) {
			int k = keyavg_follows(p, end, at_end);
			if (k < 0)
				return at_end ? TF_LIGHTNING : -1;
			return k ? TF_KEYAVG : TF_LIGHTNING;	/* PyTorchProfiler's operator tables, else cProfile's */
		}
		if (lightning_header_like(t, tn))
			return TF_LIGHTNING;
		if (tf_is_dashes(t, tn) || (tn > 8 && t[0] == '=' && t[tn - 1] == '=')) {
			int k = keyavg_follows(p, end, at_end);
			if (k > 0)
				return TF_KEYAVG;
			if (k < 0 && !at_end)
				return -1;
		}
		if (tf_gpu_header_like(t, tn) || tf_is_smi_time(t, tn) || tf_find(t, tn, "NVIDIA-SMI ") ||
		    tf_dmon_header(t, tn))
			return TF_GPULOG;
		stacky = stacky && stack_line_like(t, tn);
		if (stacky && seen >= 8)
			return TF_STACKS;
	}
	if (!at_end)
		return -1;	/* a preamble: the report may start further on */
	return seen && stacky ? TF_STACKS : TF_NONE;
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
	p->gtime = INT64_MIN;
	return p;
}

int textfmt_parser_feed(struct textfmt_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	int rc;

	if (p->failed)
		return tp_fail(err, TP_ERR_INVALID, "invalid_table", "the parser already failed");
	/* a UTF-8 byte order mark before the first line: not text */
	for (; len && p->bom < 3 && !p->lineno && !p->nline; data++, len--, p->bom++)
		if (*data != (uint8_t)"\xef\xbb\xbf"[p->bom]) {
			if (p->bom)	/* a partial mark: its bytes are the text's */
				memcpy(p->line, "\xef\xbb\xbf", p->nline = (size_t)p->bom);
			p->bom = 3;
			break;
		}
	while (len) {
		if (p->after_cr && *data == '\n') {
			data++, len--;	/* the LF of a CRLF split between pieces */
			p->after_cr = 0;
			continue;
		}
		p->after_cr = 0;
		const uint8_t *nl = data;
		while (nl < data + len && *nl != '\n' && *nl != '\r')
			nl++;
		if (nl == data + len)
			nl = NULL;
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
			p->after_cr = *nl == '\r';	/* LF, CRLF and a lone CR all end a line */
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
	for (size_t i = 0; i < p->r.ngpu_rows; i++)
		p->grows[i].v = p->gvals + i * p->r.ngpu_cols;
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
	tp_free(p->gvals);
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
