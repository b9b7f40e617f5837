/*
 * fmt_lightning.c: Lightning profiler reports (see textfmt.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt_int.h"

/* -- Lightning -- */

/*
 * A row of cProfile's table: "ncalls tottime percall cumtime percall location", ncalls
 * "3" or "3/1" (calls/primitive calls), the location the rest of the line (it may hold
 * spaces: "{method 'disable' of '_lsprof.Profiler' objects}"). The first
 * TF_FUNCTIONS_PER_ACTION of each action are kept; the others only checked.
 */
static int function_row(struct textfmt_parser *p, const char *t, size_t tn, struct tp_errbuf *err)
{
	const char *f[5], *e = t + tn, *c = t;
	size_t fn[5], k;
	int64_t calls, prim, tot, cum, per;
	const char *slash;

	for (k = 0; k < 5; k++) {
		while (c < e && (*c == ' ' || *c == '\t'))
			c++;
		f[k] = c;
		while (c < e && *c != ' ' && *c != '\t')
			c++;
		fn[k] = (size_t)(c - f[k]);
		if (!fn[k])
			return tf_bad(p, err, "a cProfile row has fewer than six columns");
	}
	while (c < e && (*c == ' ' || *c == '\t'))
		c++;
	if (c == e)
		return tf_bad(p, err, "a cProfile row has no location");
	slash = memchr(f[0], '/', fn[0]);
	if (tf_dec_scaled(f[0], slash ? (size_t)(slash - f[0]) : fn[0], 0, &calls) ||
	    (slash ? tf_dec_scaled(slash + 1, fn[0] - (size_t)(slash + 1 - f[0]), 0, &prim) : (prim = calls, 0)) ||
	    calls < 0 || prim < 0 || tf_dec_scaled(f[1], fn[1], 9, &tot) || tf_dec_scaled(f[2], fn[2], 9, &per) ||
	    tf_dec_scaled(f[3], fn[3], 9, &cum) || tf_dec_scaled(f[4], fn[4], 9, &per) || tot < 0 || cum < 0)
		return tf_bad(p, err, "a cProfile row's calls or times are not numbers");
	if (p->fn_rows >= TF_FUNCTIONS_PER_ACTION)
		return TP_OK;
	if (tf_grow(p, (void **)&p->fn, &p->cap_fn, p->r.nfunctions, sizeof(*p->fn)))
		return tf_toobig(p, err);
	struct tf_function *x = &p->fn[p->r.nfunctions];
	*x = (struct tf_function){ .action = p->r.nactions - 1, .ncalls = calls, .primitive_calls = prim,
				   .tottime_ns = tot, .cumtime_ns = cum };
	if (!(x->location = tf_keep_str(p, c, (size_t)(e - c))))
		return tf_toobig(p, err);
	p->r.nfunctions++;
	p->fn_rows++;
	return TP_OK;
}

/*
 * A SimpleProfiler header: the column of each figure, by its title. The
 * unit in a title is the one Lightning writes, "(s)" (and "%" for the
 * share); any other is refused rather than read as seconds.
 */
static int lightning_header(struct textfmt_parser *p, const char **cell, const size_t *cn, size_t nc,
			    struct tp_errbuf *err)
{
	static const char *const titles[] = { NULL, "Mean duration", "Num calls", "Total time", "Percentage" };

	for (int k = 0; k < 5; k++)
		p->lcol[k] = -1;
	p->lcol[0] = 0;
	for (size_t k = 1; k < nc; k++) {
		for (int r = 1; r < 5; r++) {
			if (!tf_starts(cell[k], cn[k], titles[r]))
				continue;
			const char *u = cell[k] + strlen(titles[r]);
			size_t un = cn[k] - strlen(titles[r]);
			tf_trim(&u, &un);
			int ok = r == 2 ? un == 0 : r == 4 ? un == 0 || (un == 1 && *u == '%') : un == 3 && !memcmp(u, "(s)", 3);
			if (!ok) {
				char what[120];
				snprintf(what, sizeof(what), "header \"%s\": the unit \"%.*s\" is not one Lightning writes, %s",
					 titles[r], (int)(un < 12 ? un : 12), u, r == 4 ? "\"%\"" : r == 2 ? "none" : "\"(s)\"");
				return tf_bad(p, err, what);
			}
			p->lcol[r] = (int)k;
		}
	}
	if (p->lcol[3] < 0 && p->lcol[1] < 0)
		return tf_bad(p, err, "the header has neither a mean nor a total column");
	p->lin = 1;
	return TP_OK;
}

int tf_lightning_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *t = s;
	size_t tn = n;

	tf_trim(&t, &tn);
	if (!tn) {
		if (p->lin == 2)
			p->lin = 0;	/* a blank line after the rows: the table ended (1.x has no closing dash line) */
		return TP_OK;
	}
	if (tf_starts(t, tn, "Profile stats for:")) {
		const char *a = t + 18;
		size_t an = tn - 18;
		tf_trim(&a, &an);
		if (tf_grow(p, (void **)&p->act, &p->cap_act, p->r.nactions, sizeof(*p->act)))
			return tf_toobig(p, err);
		struct tf_action *x = &p->act[p->r.nactions];
		if (!(x->name = tf_keep_str(p, a, an)))
			return tf_toobig(p, err);
		x->calls = x->mean_ns = x->total_ns = x->share_bp = -1;
		p->r.nactions++;
		p->r.advanced = 1;
		p->fn_rows = -1;
		return TP_OK;
	}
	if (p->r.advanced) {
		const char *in = tf_find(t, tn, " function calls");
		const char *sec = tf_find(t, tn, " seconds");
		if (in && sec && p->r.nactions && p->act[p->r.nactions - 1].total_ns < 0) {
			const char *v = tf_find(t, tn, " in ");
			if (!v || v > sec || tf_dec_scaled(v + 4, (size_t)(sec - v - 4), 9, &p->act[p->r.nactions - 1].total_ns) ||
			    p->act[p->r.nactions - 1].total_ns < 0)
				return tf_bad(p, err, "a section's total time is not a number of seconds cProfile prints");
			return TP_OK;
		}
		if (tf_starts(t, tn, "ncalls") && tf_find(t, tn, "cumtime")) {
			p->fn_rows = 0;
			return TP_OK;
		}
		if (p->r.nactions && p->fn_rows >= 0 && *t >= '0' && *t <= '9')
			return function_row(p, t, tn, err);
		p->fn_rows = -1;	/* the table ended: a title, another report, a note */
		return TP_OK;
	}
	/*
	 * SimpleProfiler tables: text around a whole table (a title, a log line,
	 * a progress bar with '|' in it) is passed over; inside one (its header
	 * seen, up to a dash line, a blank line or text after its rows) every line is
	 * a row. A repeated header (an appended report) is read again for its
	 * columns.
	 */
	if (!memchr(t, '|', tn)) {
		if (p->lin == 2)
			p->lin = 0;	/* a dash line or text after the rows: the table ended */
		return TP_OK;
	}
	/* cells between '|' (Lightning 2.x frames each row: "|  name\t|  ...\t|") */
	const char *cell[8];
	size_t cn[8], nc = 0;
	const char *c = t, *e = t + tn;
	if (*c == '|')
		c++;
	while (c < e && nc < 8) {
		const char *bar = memchr(c, '|', (size_t)(e - c));
		const char *ce = bar ? bar : e;
		cell[nc] = c, cn[nc] = (size_t)(ce - c);
		tf_trim(&cell[nc], &cn[nc]);
		nc++;
		if (!bar)
			break;
		c = bar + 1;
	}
	if (nc && !cn[nc - 1])
		nc--;	/* the trailing '|' */
	if (nc && tf_starts(cell[0], cn[0], "Action"))
		return lightning_header(p, cell, cn, nc, err);
	if (!p->lin)
		return TP_OK;	/* not in a table: a progress bar, a log line */
	int maxc = 0;
	for (int k = 0; k < 5; k++)
		if (p->lcol[k] > maxc)
			maxc = p->lcol[k];
	if ((int)nc <= maxc)
		return tf_bad(p, err, "a column is missing");
	int64_t v[5] = { -1, -1, -1, -1, -1 };
	for (int k = 1; k < 5; k++) {
		if (p->lcol[k] < 0)
			continue;
		const char *x = cell[p->lcol[k]];
		size_t xn = cn[p->lcol[k]];
		if (xn == 1 && (x[0] == '-' || x[0] == '_'))
			continue;
		int rc = k == 2 ? tf_dec_scaled(x, xn, 0, &v[k]) : k == 4 ? tf_parse_pct(x, xn, &v[k]) : tf_dec_scaled(x, xn, 9, &v[k]);
		if (rc) {
			char what[120];
			snprintf(what, sizeof(what), "cell \"%.*s\" is not a bare number (%s)", (int)(xn < 40 ? xn : 40), x,
				 k == 2 ? "calls" : k == 4 ? "a percentage" : "seconds");
			return tf_bad(p, err, what);
		}
		if (v[k] < 0 || (k == 4 && v[k] > 10000)) {
			char what[120];
			snprintf(what, sizeof(what), "cell \"%.*s\": Lightning never prints a %s", (int)(xn < 40 ? xn : 40), x,
				 k == 4 ? "percentage outside 0-100" : k == 2 ? "negative count of calls" : "negative time");
			return tf_bad(p, err, what);
		}
	}
	if (cn[0] == 5 && !memcmp(cell[0], "Total", 5)) {
		p->r.total_ns = v[3];
		return TP_OK;
	}
	p->lin = 2;
	if (tf_grow(p, (void **)&p->act, &p->cap_act, p->r.nactions, sizeof(*p->act)))
		return tf_toobig(p, err);
	struct tf_action *a = &p->act[p->r.nactions];
	if (!(a->name = tf_keep_str(p, cell[0], cn[0])))
		return tf_toobig(p, err);
	a->mean_ns = v[1], a->calls = v[2], a->total_ns = v[3], a->share_bp = v[4];
	if (a->total_ns < 0 && a->mean_ns >= 0 && a->calls >= 0 &&
	    __builtin_mul_overflow(a->mean_ns, a->calls, &a->total_ns))
		return tf_bad(p, err, "a mean times its calls is past any duration");
	p->r.nactions++;
	return TP_OK;
}
