/*
 * fmt_keyavg.c: key_averages() tables (see textfmt.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt_int.h"

/* -- key_averages -- */

static int col_unit(const char *name)
{
	if (strchr(name, '%'))
		return TF_U_BP;
	if (!strcmp(name, "# of Calls"))
		return TF_U_COUNT;
	if (strstr(name, " Mem"))
		return TF_U_BYTES;
	if (strstr(name, "Self ") == name || strstr(name, " total") || strstr(name, "time avg"))
		return TF_U_NS;
	if (!strcmp(name, "Name") || !strcmp(name, "Overload Name") || !strcmp(name, "Input Shapes") ||
	    !strcmp(name, "Source Location"))
		return TF_U_TEXT;
	return TF_U_OTHER;
}

/* Whether title is pre + word + post (word the device's: "CUDA" in "Self CUDA Mem"). */
static int titled(const char *title, const char *pre, const char *word, const char *post)
{
	size_t a = strlen(pre), b = strlen(word);

	return !strncmp(title, pre, a) && !strncmp(title + a, word, b) && !strcmp(title + a + b, post);
}

/*
 * The columns by meaning, over every column the file's tables have shown. The
 * device word is the X of a time column "Self X" other than CPU (torch prints
 * use_device.upper(): CUDA, XPU, MTIA, NPU). Every table since torch 1.7 has
 * Self CPU, CPU total and # of Calls: a table without them (the current one,
 * p->ka_map) cannot be an operator table.
 */
static int keyavg_roles(struct textfmt_parser *p, struct tp_errbuf *err)
{
	static const char *const cpu[][2] = {
		[TF_KA_SELF_CPU] = { "Self ", "" }, [TF_KA_CPU_TOTAL] = { "", " total" },
		[TF_KA_CPU_MEM] = { "", " Mem" }, [TF_KA_SELF_CPU_MEM] = { "Self ", " Mem" },
	};
	static const int dev_of[] = { [TF_KA_SELF_CPU] = TF_KA_SELF_DEV, [TF_KA_CPU_TOTAL] = TF_KA_DEV_TOTAL,
				      [TF_KA_CPU_MEM] = TF_KA_DEV_MEM, [TF_KA_SELF_CPU_MEM] = TF_KA_SELF_DEV_MEM };
	static const int need[] = { TF_KA_CALLS, TF_KA_SELF_CPU, TF_KA_CPU_TOTAL };
	int *col = p->r.ka_col;

	for (int k = 0; k < TF_KA_NROLES; k++)
		col[k] = -1;
	for (size_t k = 1; k < p->r.ncols; k++) {
		const char *t = p->colname[k];
		if (p->colunit[k] == TF_U_NS && !strncmp(t, "Self ", 5) && strcmp(t, "Self CPU") && !p->r.ka_device[0] &&
		    strlen(t + 5) < sizeof(p->r.ka_device))
			snprintf(p->r.ka_device, sizeof(p->r.ka_device), "%s", t + 5);
	}
	for (size_t k = 1; k < p->r.ncols; k++) {
		const char *t = p->colname[k];
		if (!strcmp(t, "# of Calls"))
			col[TF_KA_CALLS] = (int)k;
		for (int role = TF_KA_SELF_CPU; role <= TF_KA_SELF_CPU_MEM; role++) {
			if (!cpu[role][0])
				continue;	/* a device role */
			if (titled(t, cpu[role][0], "CPU", cpu[role][1]))
				col[role] = (int)k;
			else if (p->r.ka_device[0] && titled(t, cpu[role][0], p->r.ka_device, cpu[role][1]))
				col[dev_of[role]] = (int)k;
		}
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		size_t k = 0;
		while (k < p->ka_nc && p->ka_map[k] != col[need[i]])
			k++;
		if (col[need[i]] < 0 || k == p->ka_nc)
			return tf_bad(p, err, need[i] == TF_KA_CALLS ? "the header has no \"# of Calls\" column"
								     : "the header has no \"Self CPU\" and \"CPU total\" columns");
	}
	return TP_OK;
}

/*
 * The byte offset of a line's chars-th character: torch pads with Python's
 * str formatting, which counts characters, not bytes ("数据加载" is 4 wide,
 * 12 bytes). The dash line is ASCII, so its offsets are character counts.
 */
static size_t byte_at(const char *s, size_t n, size_t chars)
{
	size_t i = 0;

	for (; i < n && chars; chars--)
		for (i++; i < n && ((unsigned char)s[i] & 0xc0) == 0x80; i++)
			;
	return i + chars;	/* past the end: as far past as the characters asked */
}

static void cut(const char *s, size_t n, size_t a, size_t b, const char **c, size_t *cn)
{
	a = byte_at(s, n, a), b = byte_at(s, n, b);
	if (a >= n) {
		*c = s + n, *cn = 0;
		return;
	}
	if (b > n)
		b = n;
	*c = s + a, *cn = b - a;
	tf_trim(c, cn);
}

/*
 * Cells after the name column, split at runs of two or more spaces (a title
 * or value wider than its column shifts the rest, so widths alone do not do).
 */
static size_t wide_cells(const char *s, size_t n, size_t from, const char **c, size_t *cn, size_t max)
{
	size_t k = 0, i = from;

	while (i < n) {
		while (i < n && s[i] == ' ')
			i++;
		if (i >= n)
			break;
		size_t a = i;
		while (i < n && !(s[i] == ' ' && (i + 1 >= n || s[i + 1] == ' ')))
			i++;
		if (k == max)
			return max + 1;
		c[k] = s + a, cn[k] = i - a;
		k++;
	}
	return k;
}

int tf_keyavg_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *t = s;
	size_t tn = n;

	tf_trim(&t, &tn);
	if (p->ka_state == 0 || (p->ka_state == 3 && tf_is_dashes(t, tn))) {
		/* before a table: a title ("Profile stats for: records"), a log line, "=====" */
		if (!tf_is_dashes(t, tn))
			return TP_OK;
		size_t nc = 0, i = 0;
		while (i < n) {
			while (i < n && s[i] == ' ')
				i++;
			if (i >= n || s[i] != '-')
				break;
			if (nc == TF_MAX_COLS)
				return tf_bad(p, err, "more columns than a key_averages table has");
			p->cs[nc] = i;
			while (i < n && s[i] == '-')
				i++;
			p->ce[nc++] = i;
		}
		if (nc < 3)
			return TP_OK;	/* a log's rule ("-----"): a table has Name, Self CPU, CPU total, # of Calls */
		p->ka_nc = nc;
		p->ka_state = 1;
		p->ka_header = 0;
		return TP_OK;
	}
	if (p->ka_state == 1) {
		if (tf_is_dashes(t, tn)) {
			if (!p->ka_header)
				return tf_bad(p, err, "no header between the dash lines");
			p->ka_state = 2;
			p->ka_tables++;
			return keyavg_roles(p, err);
		}
		const char *c[TF_MAX_COLS + 1];
		size_t cn[TF_MAX_COLS + 1];
		cut(s, n, p->cs[0], p->ce[0], &c[0], &cn[0]);
		if (!(cn[0] == 4 && !memcmp(c[0], "Name", 4))) {
			p->ka_state = 0;	/* a dash line of some other text: not the table */
			return TP_OK;
		}
		if (wide_cells(s, n, byte_at(s, n, p->ce[0]), c + 1, cn + 1, TF_MAX_COLS) != p->ka_nc - 1)
			return tf_bad(p, err, "the header does not have a title per column");
		/* Each table is read by its own header: a later one may add columns (group_by_input_shape's
		 * "Input Shapes", "Total FLOPs") or drop some; a title seen before keeps its column, so every
		 * row's figure lands under its title whatever table it came from. */
		for (size_t k = 0; k < p->ka_nc; k++) {
			size_t j = 0;
			while (j < p->r.ncols && (strlen(p->colname[j]) != cn[k] || memcmp(p->colname[j], c[k], cn[k])))
				j++;
			for (size_t i = 0; i < k; i++)
				if (p->ka_map[i] == (int)j)
					return tf_bad(p, err, "a header with the same title twice");
			p->ka_map[k] = (int)j;
			if (j < p->r.ncols)
				continue;
			if (j == TF_MAX_COLS)
				return tf_bad(p, err, "more columns than a key_averages table has");
			if (!(p->colname[j] = tf_keep_str(p, c[k], cn[k])))
				return tf_toobig(p, err);
			p->colunit[j] = col_unit(p->colname[j]);
			p->r.ncols++;
		}
		p->ka_header = 1;
		return TP_OK;
	}
	if (p->ka_state == 2) {
		if (tf_is_dashes(t, tn)) {
			p->ka_state = 3;
			return TP_OK;
		}
		if (!tn)
			return TP_OK;	/* the empty row after a Source Location's continuation */
		const char *c;
		size_t cn;
		cut(s, n, p->cs[0], p->ce[0], &c, &cn);
		if (!cn)
			return TP_OK;	/* a Source Location continuation row */
		const char *cc[TF_MAX_COLS + 1];
		size_t ccn[TF_MAX_COLS + 1];
		if (wide_cells(s, n, byte_at(s, n, p->ce[0]), cc + 1, ccn + 1, TF_MAX_COLS) != p->ka_nc - 1)
			return tf_bad(p, err, "a row without a value per column: a column is missing");
		if (tf_grow(p, (void **)&p->ops, &p->cap_ops, p->r.nops, sizeof(*p->ops)))
			return tf_toobig(p, err);
		struct tf_op *o = &p->ops[p->r.nops];
		if (!(o->name = tf_keep_str(p, c, cn)))
			return tf_toobig(p, err);
		for (size_t k = 0; k < TF_MAX_COLS; k++)
			o->v[k] = INT64_MIN;	/* the columns this row's table does not have too */
		for (size_t kt = 1; kt < p->ka_nc; kt++) {
			int rc = 0;
			size_t k = (size_t)p->ka_map[kt];
			c = cc[kt], cn = ccn[kt];
			if (p->colunit[k] == TF_U_TEXT || p->colunit[k] == TF_U_OTHER)
				continue;
			if (p->colunit[k] == TF_U_NS)
				rc = tf_parse_time(c, cn, &o->v[k]);
			else if (p->colunit[k] == TF_U_BYTES)
				rc = tf_parse_mem(c, cn, &o->v[k]);
			else if (p->colunit[k] == TF_U_BP)
				rc = cn == 3 && !memcmp(c, "NaN", 3) ? (o->v[k] = INT64_MIN, 0) : tf_parse_pct(c, cn, &o->v[k]);
			else
				rc = tf_dec_scaled(c, cn, 0, &o->v[k]);
			if (rc) {
				char what[160];
				snprintf(what, sizeof(what), "column \"%.40s\": \"%.*s\" is not a value in a unit the profiler writes",
					 p->colname[k], (int)(cn < 24 ? cn : 24), c);
				return tf_bad(p, err, what);
			}
			/* torch prints a self time as the total less its children's, unchecked: where scopes
			 * overlap (Lightning's [pl][module] records) it prints "-95.000us" and "-0.00%" in the
			 * Self columns (CORPUS.md, Thiggel's report). Calls, totals and averages are never negative. */
			if (o->v[k] != INT64_MIN && o->v[k] < 0 && p->colunit[k] != TF_U_BYTES &&
			    strncmp(p->colname[k], "Self ", 5)) {
				char what[120];
				snprintf(what, sizeof(what), "column \"%.40s\": torch never prints a negative count or time",
					 p->colname[k]);
				return tf_bad(p, err, what);
			}
			/* Shares torch prints over 100, read as printed (CORPUS.md): a device's Self share,
			 * where a GPU user annotation's time (record_function ranges on the device) is in its
			 * row but not in the footer it divides by ("GNN_backward ... 22642.68%"); a "... total %"
			 * share, an op's total over the sum of self times, where the op nests in itself and its
			 * total counts the inner call again ("aten::copy_ ... 185.95%", TurboDiffusion's XPU
			 * table). The Self CPU share is of the footer it sums to: over 100 is a 400. */
			size_t nl = strlen(p->colname[k]);
			int total_share = nl > 8 && !strcmp(p->colname[k] + nl - 8, " total %");
			if (p->colunit[k] == TF_U_BP && o->v[k] != INT64_MIN && o->v[k] > 10000 && !total_share &&
			    !(!strncmp(p->colname[k], "Self ", 5) && strncmp(p->colname[k], "Self CPU", 8))) {
				char what[120];
				snprintf(what, sizeof(what), "column \"%.40s\": a percentage over 100", p->colname[k]);
				return tf_bad(p, err, what);
			}
		}
		p->r.nops++;
		return TP_OK;
	}
	/* footers */
	if (!tn)
		return TP_OK;
	const char *colon = memchr(t, ':', tn);
	if (colon && tf_starts(t, tn, "Self ") && tf_find(t, tn, " time total:")) {
		const char *v = colon + 1;
		size_t vn = (size_t)(t + tn - v);
		int64_t ns;
		tf_trim(&v, &vn);
		if (tf_parse_time(v, vn, &ns))
			return tf_bad(p, err, "a footer total is not a time");
		/* several tables (PyTorchProfiler, one per action): their rows are all kept, so the totals add up */
		int64_t *tot = tf_starts(t, tn, "Self CPU time total:") ? &p->r.self_cpu_total_ns : &p->r.self_dev_total_ns;
		if (*tot >= 0 && __builtin_add_overflow(*tot, ns, &ns))
			return tf_bad(p, err, "the footer totals overflow");
		*tot = ns;
		return TP_OK;
	}
	return TP_OK;	/* text after the table (a log line): passed over */
}
