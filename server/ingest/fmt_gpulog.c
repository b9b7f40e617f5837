/*
 * fmt_gpulog.c: nvidia-smi logs (see textfmt.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt_int.h"

/* -- nvidia-smi -- */

/* Split at ", " into at most max cells. */
static size_t csv_cells(const char *s, size_t n, const char **c, size_t *cn, size_t max)
{
	size_t k = 0, a = 0;

	for (size_t i = 0; i <= n && k < max + 1; i++) {
		if (i == n || s[i] == ',') {
			if (k == max)
				return max + 1;
			c[k] = s + a, cn[k] = i - a;
			tf_trim(&c[k], &cn[k]);
			k++;
			a = i + 1;
		}
	}
	return k;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int smi_time(const char *s, size_t n, int64_t *ns)
{
	int64_t ms = 0;
	int y, mo, d, h, mi, se;

	if (!tf_is_smi_time(s, n))
		return -1;
	y = atoi(s), mo = atoi(s + 5), d = atoi(s + 8), h = atoi(s + 11), mi = atoi(s + 14), se = atoi(s + 17);
	if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -1;
	if (n > 19 && (s[19] != '.' || tf_dec_scaled(s + 20, n - 20, 0, &ms) || n - 20 > 3 || ms < 0))
		return -1;
	if (n > 19)
		for (size_t k = n - 20; k < 3; k++)
			ms *= 10;
	*ns = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se) * 1000 + ms) * 1000000;
	return 0;
}

/* Name and unit of a column from its header cell ("memory.used [MiB]"). */
static int gpu_col(struct textfmt_parser *p, size_t k, const char *c, size_t cn)
{
	const char *br = memchr(c, '[', cn);
	size_t nn = br ? (size_t)(br - c) : cn;
	const char *u = br ? br + 1 : "";
	size_t un = br ? (size_t)(c + cn - br - 2) : 0;

	while (nn && c[nn - 1] == ' ')
		nn--;
	if (br && c[cn - 1] != ']')
		return -1;
	if (!(p->gcol[k] = tf_keep_str(p, c, nn)))
		return -1;
	p->gscale[k] = 1;
	if (un == 3 && !memcmp(u, "MiB", 3))
		p->gunit[k] = "B", p->gscale[k] = 1048576;
	else if (un == 3 && !memcmp(u, "MHz", 3))
		p->gunit[k] = "Hz", p->gscale[k] = 1e6;
	else if (un == 1 && u[0] == '%')
		p->gunit[k] = "%";
	else if (un == 1 && u[0] == 'W')
		p->gunit[k] = "W";
	else if (un == 2 && (!memcmp(u, "us", 2) || !memcmp(u, "ms", 2)))
		p->gunit[k] = "s", p->gscale[k] = u[0] == 'u' ? 1e-6 : 1e-3;	/* clocks_event_reasons_counters.* */
	else if ((un == 3 && !memcmp(u, "W/s", 3)) || (un == 7 && !memcmp(u, "seconds", 7)))
		p->gunit[k] = "";	/* driver 610's power_smoothing ramp rates and bbx.time_run: only [N/A] seen, kept as text */
	else if (un)
		return -1;	/* a unit nvidia-smi does not write */
	else if (!strcmp(p->gcol[k], "temperature.gpu") || !strcmp(p->gcol[k], "temperature.memory"))
		p->gunit[k] = "C";
	else
		p->gunit[k] = "";
	if (!strcmp(p->gcol[k], "index"))
		p->gidx_col = (int)k;
	return 0;
}

/* No header: name the columns from the first row's shapes. */
static int gpu_guess(struct textfmt_parser *p, const char **c, size_t *cn, size_t nc)
{
	int npct = 0, nmib = 0;
	static const char *const pct[] = { "utilization.gpu", "utilization.memory" };
	static const char *const mib[] = { "memory.used", "memory.free", "memory.total" };
	char buf[32];
	int units = 0, ntemp = 0;

	/* csv,noheader prints every unit but temperature's: a bare number there is the temperature; with
	 * nounits too, nothing tells what the numbers are: they are kept unnamed (and not stored) */
	for (size_t k = 0; k < nc; k++) {
		const char *e = c[k] + cn[k];
		units |= (cn[k] > 2 && (!memcmp(e - 2, " %", 2) || !memcmp(e - 2, " W", 2))) ||
			 (cn[k] > 4 && (!memcmp(e - 4, " MiB", 4) || !memcmp(e - 4, " MHz", 4)));
	}
	for (size_t k = 0; k < nc; k++) {
		const char *nm;
		const char *u = "";
		double sc = 1;
		if (tf_is_smi_time(c[k], cn[k]))
			nm = "timestamp";
		else if (cn[k] > 2 && !memcmp(c[k] + cn[k] - 2, " %", 2))
			nm = npct < 2 ? pct[npct] : "utilization", npct++, u = "%";
		else if (cn[k] > 4 && !memcmp(c[k] + cn[k] - 4, " MiB", 4))
			nm = nmib < 3 ? mib[nmib] : "memory", nmib++, u = "B", sc = 1048576;
		else if (cn[k] > 2 && !memcmp(c[k] + cn[k] - 2, " W", 2))
			nm = "power.draw", u = "W";
		else if (cn[k] > 4 && !memcmp(c[k] + cn[k] - 4, " MHz", 4))
			nm = "clocks", u = "Hz", sc = 1e6;
		else if (units && !ntemp && !tf_dec_scaled(c[k], cn[k], 0, &(int64_t){ 0 }))
			nm = "temperature.gpu", u = "C", ntemp++;
		else {
			snprintf(buf, sizeof(buf), "column%zu", k + 1);
			nm = buf;
		}
		if (!(p->gcol[k] = tf_keep_str(p, nm, strlen(nm))))
			return -1;
		p->gunit[k] = u, p->gscale[k] = sc;
	}
	p->r.ngpu_cols = nc;
	return 0;
}

/* The values of a new row (ngpu_cols of them, NaN), and the row; NULL past the caps. */
static double *new_row(struct textfmt_parser *p, struct tf_gpu_row **row)
{
	size_t nc = p->r.ngpu_cols, i = p->r.ngpu_rows;

	size_t old = p->cap_gvals;

	if (tf_grow(p, (void **)&p->grows, &p->cap_grows, i, sizeof(*p->grows)) ||
	    (nc && i + 1 > SIZE_MAX / nc) || tp_grow((void **)&p->gvals, &p->cap_gvals, (i + 1) * nc, sizeof(double)) ||
	    tf_held(p, (p->cap_gvals - old) * sizeof(double)))
		return NULL;
	*row = &p->grows[i];
	**row = (struct tf_gpu_row){ .t_ns = p->gtime, .gpu = 0 };
	double *v = p->gvals + i * nc;
	for (size_t k = 0; k < nc; k++)
		v[k] = NAN;
	p->r.ngpu_rows++;
	return v;
}

/*
 * A number in column k's unit, as nvidia-smi prints it: "45 %", "1024 MiB",
 * "250.00 W", "1410 MHz", or bare (nounits, and temperature always). A unit
 * the column does not have, a negative value or a percentage over 100 is an
 * error naming the line.
 */
static int cell_value(struct textfmt_parser *p, size_t k, const char *v, size_t vn, double *out,
		      struct tp_errbuf *err)
{
	static const char *const printed[][2] = { { "%", "%" }, { "B", "MiB" }, { "W", "W" }, { "Hz", "MHz" } };
	const char *u = p->gunit[k];
	char what[160];
	int64_t x;
	size_t e = vn;

	if (vn == 3 && !memcmp(v, "N/A", 3))
		return TP_OK;
	while (e && !((v[e - 1] >= '0' && v[e - 1] <= '9') || v[e - 1] == '.'))
		e--;	/* the unit after the number */
	const char *un = v + e;
	size_t unn = vn - e;
	while (unn && *un == ' ')
		un++, unn--;
	if (unn) {
		int ok = 0;
		for (size_t q = 0; q < sizeof(printed) / sizeof(printed[0]); q++)
			if (!strcmp(u, printed[q][0]) && strlen(printed[q][1]) == unn && !memcmp(un, printed[q][1], unn))
				ok = 1;
		if (!strcmp(u, "s") && unn == 2 && un[1] == 's' && un[0] == (p->gscale[k] < 1e-3 ? 'u' : 'm'))
			ok = 1;	/* "0 us" under [us], "5 ms" under [ms] */
		if (!ok) {
			snprintf(what, sizeof(what), "column \"%.40s\": the unit \"%.*s\" is not one nvidia-smi prints there",
				 p->gcol[k], (int)(unn < 16 ? unn : 16), un);
			return tf_bad(p, err, what);
		}
	}
	while (e && v[e - 1] == ' ')
		e--;
	if (tf_dec_scaled(v, e, 2, &x)) {
		snprintf(what, sizeof(what), "column \"%.40s\": not a number", p->gcol[k]);
		return tf_bad(p, err, what);
	}
	if (x < 0 || (!strcmp(u, "%") && x > 10000)) {
		snprintf(what, sizeof(what), "column \"%.40s\": %.*s is outside what nvidia-smi prints", p->gcol[k],
			 (int)(vn < 24 ? vn : 24), v);
		return tf_bad(p, err, what);
	}
	*out = (double)x / 100.0 * p->gscale[k];
	return TP_OK;
}

/*
 * A header again (a loop of nvidia-smi calls appending to one file): its
 * columns are read again, so one with the same columns in another order
 * still puts each figure under its name; other columns than the first
 * header's are a 400 (the rows so far would mean other things).
 */
static int csv_reheader(struct textfmt_parser *p, const char **c, const size_t *cn, size_t nc, struct tp_errbuf *err)
{
	const char *h[TF_GPU_MAX_COLS + 1];
	size_t hn[TF_GPU_MAX_COLS + 1];
	size_t n0 = csv_cells(p->ghdr, strlen(p->ghdr), h, hn, TF_GPU_MAX_COLS);
	unsigned char used[TF_GPU_MAX_COLS] = { 0 };

	if (n0 != nc)
		return tf_bad(p, err, "a header with other columns than the first one");
	for (size_t k = 0; k < nc; k++) {
		size_t j = 0;
		while (j < n0 && (used[j] || hn[j] != cn[k] || memcmp(h[j], c[k], cn[k])))
			j++;
		if (j == n0)
			return tf_bad(p, err, "a header with other columns than the first one");
		used[j] = 1;
		p->gperm[k] = (int)j;
	}
	return TP_OK;
}

static int csv_line(struct textfmt_parser *p, const char *t, size_t tn, struct tp_errbuf *err)
{
	const char *c[TF_GPU_MAX_COLS + 1];
	size_t cn[TF_GPU_MAX_COLS + 1], nc;

	nc = csv_cells(t, tn, c, cn, TF_GPU_MAX_COLS);
	if (nc > TF_GPU_MAX_COLS)
		return tf_bad(p, err, "more columns than --query-gpu gives");
	if (tf_gpu_header_like(t, tn)) {
		if (p->ghdr)
			return csv_reheader(p, c, cn, nc, err);	/* a repeated header (nvidia-smi run in a loop) */
		if (p->r.ngpu_rows)
			return tf_bad(p, err, "a header after rows without one");
		if (!(p->ghdr = tf_keep_str(p, t, tn)))
			return tf_toobig(p, err);
		for (size_t k = 0; k < nc; k++)
			if (gpu_col(p, k, c[k], cn[k]))
				return tf_bad(p, err, "a header column with a unit nvidia-smi does not write");
		p->r.ngpu_cols = nc;
		p->r.gpu_header = 1;
		for (size_t k = 0; k < nc; k++)
			p->gperm[k] = (int)k;
		return TP_OK;
	}
	if (!p->r.ngpu_cols && gpu_guess(p, c, cn, nc))
		return tf_toobig(p, err);
	if (nc != p->r.ngpu_cols)
		return tf_bad(p, err, nc < p->r.ngpu_cols ? "a column is missing" : "more columns than the header");
	struct tf_gpu_row *r;
	double *val = new_row(p, &r);
	if (!val)
		return tf_toobig(p, err);
	for (size_t i = 0; i < nc; i++) {
		const char *v = c[i];
		size_t vn = cn[i], k = p->r.gpu_header ? (size_t)p->gperm[i] : i;	/* the first header's column */
		int64_t x;
		if (!strcmp(p->gcol[k], "timestamp")) {
			if (smi_time(v, vn, &r->t_ns))
				return tf_bad(p, err, "a timestamp that is not YYYY/MM/DD HH:MM:SS.mmm");
			continue;
		}
		if ((int)k == p->gidx_col) {
			if (tf_dec_scaled(v, vn, 0, &x) || x < 0 || x > 4096)
				return tf_bad(p, err, "an index that is not a GPU index");
			r->gpu = (int)x;
			continue;
		}
		if (!*p->gunit[k] || (vn && v[0] == '['))
			continue;	/* text (name, pstate) or [N/A] / [Not Supported] */
		if (cell_value(p, k, v, vn, &val[k], err))
			return TP_ERR_INVALID;
	}
	return TP_OK;
}

/* "Mon Nov 29 00:00:00 2026" (the first line of nvidia-smi's screen), read as UTC. */
static int ctime_line(const char *s, size_t n, int64_t *ns)
{
	static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
	char mon[4];
	int d, h, mi, se, y, used = 0;
	char buf[64];

	if (n >= sizeof(buf) || n < 20)
		return -1;
	memcpy(buf, s, n);
	buf[n] = 0;
	if (sscanf(buf, "%*3s %3s %d %d:%d:%d %d%n", mon, &d, &h, &mi, &se, &y, &used) != 6 || (size_t)used != n)
		return -1;
	const char *m = strstr(months, mon);
	if (!m || strlen(mon) != 3 || (m - months) % 3 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
	    se < 0 || se > 60 || y < 1970 || y > 2200)
		return -1;
	*ns = ((days_from_civil(y, (unsigned)((m - months) / 3 + 1), (unsigned)d) * 86400 + h * 3600 + mi * 60 + se) *
	       (int64_t)1000000000);
	return 0;
}

/* The cells of a screen line between '|' (at most max). */
static size_t bar_cells(const char *t, size_t tn, const char **c, size_t *cn, size_t max)
{
	size_t k = 0;
	const char *e = t + tn;

	if (tn && *t == '|')
		t++;
	while (t < e && k < max) {
		const char *bar = memchr(t, '|', (size_t)(e - t));
		c[k] = t, cn[k] = (size_t)((bar ? bar : e) - t);
		tf_trim(&c[k], &cn[k]);
		k++;
		if (!bar)
			break;
		t = bar + 1;
	}
	if (k && !cn[k - 1])
		k--;
	return k;
}

/* The next space-separated token of [*s, e). */
static int token(const char **s, const char *e, const char **t, size_t *tn)
{
	while (*s < e && (**s == ' ' || **s == '\t'))
		(*s)++;
	if (*s == e)
		return 0;
	*t = *s;
	while (*s < e && **s != ' ' && **s != '\t')
		(*s)++;
	*tn = (size_t)(*s - *t);
	return 1;
}

/* A screen figure "34C", "41W", "0MiB", "45%": NaN for N/A, ERR!, [N/A]; -1 for another unit. */
static int screen_value(struct textfmt_parser *p, size_t k, const char *v, size_t vn, double *out,
			struct tp_errbuf *err)
{
	if ((vn == 3 && !memcmp(v, "N/A", 3)) || (vn == 4 && !memcmp(v, "ERR!", 4)) || (vn && v[0] == '['))
		return TP_OK;
	if (k == SCR_TEMP) {	/* the only unit the CSV prints bare */
		int64_t x;
		if (vn < 2 || v[vn - 1] != 'C' || tf_dec_scaled(v, vn - 1, 2, &x) || x < 0)
			return tf_bad(p, err, "a temperature that is not \"NNC\" as nvidia-smi prints it");
		*out = (double)x / 100.0;
		return TP_OK;
	}
	return cell_value(p, k, v, vn, out, err);
}

/* The screen's columns, in this order. */
static const char *const scr_cols[SCR_NCOLS] = { "utilization.gpu", "memory.used", "memory.total", "temperature.gpu",
					       "power.draw", "power.limit", "fan.speed", "processes.used_memory" };
static const char *const scr_units[SCR_NCOLS] = { "%", "B", "B", "C", "W", "W", "%", "B" };

/*
 * The plain nvidia-smi screen: per GPU two lines, "|   0  NVIDIA H200  On |
 * ..." then "| N/A 28C P0 76W / 700W | 1MiB / 143771MiB | 0% Default |";
 * each GPU gives one sample (at the time of the line above the screen, when
 * there is one). The processes table adds each process's memory to its GPU's
 * sample. A file of screens (watch, a loop) gives one sample per GPU each.
 * The "MIG devices:" table (GPUs in MIG mode) is passed over: its rows start
 * with a GPU index too, but are MIG instances, not GPUs.
 */
static int screen_line(struct textfmt_parser *p, const char *t, size_t tn, struct tp_errbuf *err)
{
	const char *c[4];
	size_t cn[4], nc;

	if (tf_find(t, tn, "NVIDIA-SMI ")) {
		p->gscreen = 1;
		p->gscreen_first = p->r.ngpu_rows;
		p->gpend = 0;
		return TP_OK;
	}
	if (tf_find(t, tn, "MIG devices:")) {
		p->gscreen = 3;
		p->gpend = 0;
		return TP_OK;
	}
	if (tf_find(t, tn, "Processes:")) {
		p->gscreen = 2;
		for (size_t i = p->gscreen_first; i < p->r.ngpu_rows; i++)
			p->gvals[i * SCR_NCOLS + SCR_PROCS] = 0;
		return TP_OK;
	}
	if (t[0] != '|') {
		p->gpend = 0;
		(void)ctime_line(t, tn, &p->gtime);	/* borders, blank space, the time line of the next screen */
		return TP_OK;
	}
	if (p->gscreen == 3)
		return TP_OK;
	nc = bar_cells(t, tn, c, cn, 4);
	if (!nc)
		return TP_OK;
	const char *a = c[0], *e = c[0] + cn[0], *tok;
	size_t tokn;
	int64_t idx;
	if (p->gscreen == 2) {
		/* "|    0   N/A  N/A   1234    C   python   1234MiB |": GPU first, memory last */
		const char *last = NULL;
		size_t lastn = 0;
		if (!token(&a, e, &tok, &tokn) || tf_dec_scaled(tok, tokn, 0, &idx))
			return TP_OK;	/* its header, "No running processes found" */
		while (token(&a, e, &last, &lastn))
			;
		double mib = NAN;
		if (!last || screen_value(p, SCR_PROCS, last, lastn, &mib, err))
			return last ? TP_ERR_INVALID : tf_bad(p, err, "a process row without its memory");
		for (size_t i = p->gscreen_first; i < p->r.ngpu_rows; i++)
			if (p->grows[i].gpu == idx && !isnan(mib))
				p->gvals[i * SCR_NCOLS + SCR_PROCS] += mib;
		return TP_OK;
	}
	if (p->gpend) {
		/* "N/A 34C P0 41W / 300W | 0MiB / 16160MiB | 0% Default" */
		struct tf_gpu_row *r;
		double *v;
		int gpu = p->gpend - 1;
		p->gpend = 0;
		if (nc < 3)
			return tf_bad(p, err, "a GPU's figures line without its three cells");
		if (!(v = new_row(p, &r)))
			return tf_toobig(p, err);
		r->gpu = gpu;
		const char *tk[8];
		size_t tkn[8], nt = 0;
		while (nt < 8 && token(&a, e, &tk[nt], &tkn[nt]))
			nt++;
		/* fan, temperature, perf, power draw, "/", power cap */
		if (nt < 6 || tkn[4] != 1 || tk[4][0] != '/')
			return tf_bad(p, err, "not \"Fan Temp Perf Pwr:Usage/Cap\" as nvidia-smi prints it");
		if (screen_value(p, SCR_FAN, tk[0], tkn[0], &v[SCR_FAN], err) ||
		    screen_value(p, SCR_TEMP, tk[1], tkn[1], &v[SCR_TEMP], err) ||
		    screen_value(p, SCR_PDRAW, tk[3], tkn[3], &v[SCR_PDRAW], err) ||
		    screen_value(p, SCR_PCAP, tk[5], tkn[5], &v[SCR_PCAP], err))
			return TP_ERR_INVALID;
		a = c[1], e = c[1] + cn[1], nt = 0;
		while (nt < 4 && token(&a, e, &tk[nt], &tkn[nt]))
			nt++;
		if (nt != 3 || tkn[1] != 1 || tk[1][0] != '/')
			return tf_bad(p, err, "not \"used / total\" memory as nvidia-smi prints it");
		if (screen_value(p, SCR_USED, tk[0], tkn[0], &v[SCR_USED], err) ||
		    screen_value(p, SCR_TOTAL, tk[2], tkn[2], &v[SCR_TOTAL], err))
			return TP_ERR_INVALID;
		a = c[2], e = c[2] + cn[2];
		if (!token(&a, e, &tk[0], &tkn[0]) || screen_value(p, SCR_UTIL, tk[0], tkn[0], &v[SCR_UTIL], err))
			return p->failed ? TP_ERR_INVALID : tf_bad(p, err, "a GPU without its utilization");
		return TP_OK;
	}
	/* "|   0  Tesla V100-SXM2...  On   | ...": a GPU's first line; its figures come next */
	if (p->gscreen == 1 && token(&a, e, &tok, &tokn) && !tf_dec_scaled(tok, tokn, 0, &idx) && idx >= 0 &&
	    idx <= 4096 && token(&a, e, &tok, &tokn))
		p->gpend = (int)idx + 1;
	return TP_OK;
}

/* dmon -o DT's "20231004" (days since 1970 into *out) or "10:15:32" (seconds of the day). */
static int dmon_when(const char *s, size_t n, int date, int64_t *out)
{
	int64_t v;

	if (date) {
		if (n != 8 || tf_dec_scaled(s, n, 0, &v))
			return -1;
		int64_t y = v / 10000, m = v / 100 % 100, d = v % 100;
		if (y < 1970 || y > 2200 || m < 1 || m > 12 || d < 1 || d > 31)
			return -1;
		*out = days_from_civil(y, (unsigned)m, (unsigned)d);
		return 0;
	}
	int64_t h, mi, se;
	if (n != 8 || s[2] != ':' || s[5] != ':' || tf_dec_scaled(s, 2, 0, &h) || tf_dec_scaled(s + 3, 2, 0, &mi) ||
	    tf_dec_scaled(s + 6, 2, 0, &se) || h < 0 || h > 23 || mi < 0 || mi > 59 || se < 0 || se > 60)
		return -1;
	*out = h * 3600 + mi * 60 + se;
	return 0;
}

/* dmon's columns: its name, ours, and the unit its second header line must give. */
static const struct {
	const char *dmon, *name, *unit, *ours;
	double scale;
} dmon_cols[] = {
	{ "pwr", "power.draw", "W", "W", 1 },		{ "gtemp", "temperature.gpu", "C", "C", 1 },
	{ "mtemp", "temperature.memory", "C", "C", 1 },	{ "sm", "utilization.gpu", "%", "%", 1 },
	{ "mem", "utilization.memory", "%", "%", 1 },	{ "enc", "utilization.encoder", "%", "%", 1 },
	{ "dec", "utilization.decoder", "%", "%", 1 },	{ "jpg", "utilization.jpeg", "%", "%", 1 },
	{ "ofa", "utilization.ofa", "%", "%", 1 },	{ "mclk", "clocks.mem", "MHz", "Hz", 1e6 },
	{ "pclk", "clocks.sm", "MHz", "Hz", 1e6 },	{ "fb", "memory.used", "MB", "B", 1048576 },
	{ "bar1", "memory.bar1", "MB", "B", 1048576 },	{ "ccpm", "memory.ccpm", "MB", "B", 1048576 },
};

/*
 * nvidia-smi dmon: "# gpu pwr gtemp ..." then "# Idx W C ..." (repeated
 * every screenful, the same each time), then one row per GPU per second,
 * "-" where a figure is not measured. Columns dmon adds that are not known
 * here are kept as text (not stored).
 */
static int dmon_line(struct textfmt_parser *p, const char *t, size_t tn, struct tp_errbuf *err)
{
	const char *a = t, *e = t + tn, *tok;
	size_t tokn, k = 0;

	if (t[0] == '#') {
		a++;
		if (p->ghdr && !p->gdmon_units) {	/* the units line under the first header */
			for (; token(&a, e, &tok, &tokn); k++) {
				if (k >= p->r.ngpu_cols)
					return tf_bad(p, err, "more units than columns in dmon's header");
				if (!*p->gunit[k] || (tokn == 3 && !memcmp(tok, "Idx", 3)))
					continue;
				const char *want = p->gdmon_want[k];
				if (strlen(want) != tokn || memcmp(tok, want, tokn)) {
					char what[120];
					snprintf(what, sizeof(what), "dmon column \"%.20s\": the unit \"%.*s\" is not one dmon prints there, \"%s\"",
						 p->gcol[k], (int)(tokn < 12 ? tokn : 12), tok, want);
					return tf_bad(p, err, what);
				}
			}
			p->gdmon_units = 1;
			return TP_OK;
		}
		if (p->ghdr) {
			if (p->gdmon_units == 1 && strlen(p->ghdr) == tn && !memcmp(p->ghdr, t, tn)) {
				p->gdmon_units = 2;	/* a repeated header: its units line follows */
				return TP_OK;
			}
			if (p->gdmon_units == 2) {
				p->gdmon_units = 1;
				return TP_OK;
			}
			return tf_bad(p, err, "a dmon header that differs from the first one");
		}
		if (!(p->ghdr = tf_keep_str(p, t, tn)))
			return tf_toobig(p, err);
		for (; token(&a, e, &tok, &tokn); k++) {
			if (k == TF_GPU_MAX_COLS)
				return tf_bad(p, err, "more columns than dmon prints");
			const char *name = NULL;
			p->gunit[k] = "", p->gscale[k] = 1, p->gdmon_want[k] = "";
			if (tokn == 3 && !memcmp(tok, "gpu", 3))
				p->gidx_col = (int)k, name = "index";
			else if ((tokn == 4 && !memcmp(tok, "Date", 4)) || (tokn == 4 && !memcmp(tok, "Time", 4)))
				name = tok[0] == 'D' ? "date" : "time";	/* -o DT: the sample's local time, read as UTC */
			for (size_t q = 0; !name && q < sizeof(dmon_cols) / sizeof(dmon_cols[0]); q++)
				if (strlen(dmon_cols[q].dmon) == tokn && !memcmp(dmon_cols[q].dmon, tok, tokn)) {
					name = dmon_cols[q].name, p->gunit[k] = dmon_cols[q].ours;
					p->gscale[k] = dmon_cols[q].scale, p->gdmon_want[k] = dmon_cols[q].unit;
				}
			if (!(p->gcol[k] = name ? tf_keep_str(p, name, strlen(name)) : tf_keep_str(p, tok, tokn)))
				return tf_toobig(p, err);
		}
		p->r.ngpu_cols = k;
		p->r.gpu_header = 1;
		return TP_OK;
	}
	if (!p->ghdr)
		return tf_bad(p, err, "a dmon row before its header");
	struct tf_gpu_row *r;
	double *v = new_row(p, &r);
	if (!v)
		return tf_toobig(p, err);
	int64_t day = INT64_MIN, sec = INT64_MIN;
	for (; token(&a, e, &tok, &tokn); k++) {
		if (k >= p->r.ngpu_cols)
			return tf_bad(p, err, "more figures than dmon's header has columns");
		if (!strcmp(p->gcol[k], "date") || !strcmp(p->gcol[k], "time")) {
			if (dmon_when(tok, tokn, p->gcol[k][0] == 'd', p->gcol[k][0] == 'd' ? &day : &sec))
				return tf_bad(p, err, "a dmon date or time that is not YYYYMMDD or HH:MM:SS");
			continue;
		}
		if ((int)k == p->gidx_col) {
			int64_t x;
			if (tf_dec_scaled(tok, tokn, 0, &x) || x < 0 || x > 4096)
				return tf_bad(p, err, "an index that is not a GPU index");
			r->gpu = (int)x;
		} else if (*p->gunit[k] && !(tokn == 1 && tok[0] == '-') && cell_value(p, k, tok, tokn, &v[k], err)) {
			return TP_ERR_INVALID;
		}
	}
	if (k != p->r.ngpu_cols)
		return tf_bad(p, err, "a column is missing");
	if (day != INT64_MIN && sec != INT64_MIN)
		r->t_ns = (day * 86400 + sec) * (int64_t)1000000000;
	return TP_OK;
}

int tf_gpu_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *t = s;
	size_t tn = n;

	tf_trim(&t, &tn);
	if (!tn)
		return TP_OK;
	if (!p->gform) {
		/* the layout from the first line that tells: the screen, dmon or CSV */
		if (!ctime_line(t, tn, &p->gtime))
			return TP_OK;	/* the time line above a screen */
		if (tf_find(t, tn, "NVIDIA-SMI ") || (tn > 1 && t[0] == '+' && t[1] == '-'))
			p->gform = 2;
		else if (tf_dmon_header(t, tn))
			p->gform = 3;
		else if (tf_gpu_header_like(t, tn) || (t[0] >= '0' && t[0] <= '9') || t[0] == '[')
			p->gform = 1;
		else
			return TP_OK;	/* before the log: the time line above a screen, a shell prompt */
		if (p->gform == 2) {
			for (size_t k = 0; k < SCR_NCOLS; k++) {
				p->gcol[k] = (char *)scr_cols[k];
				p->gunit[k] = scr_units[k];
				p->gscale[k] = !strcmp(scr_units[k], "B") ? 1048576 : 1;
			}
			p->r.ngpu_cols = SCR_NCOLS;
			p->r.gpu_header = 1;
		}
	}
	if (p->gform == 2)
		return screen_line(p, t, tn, err);
	if (p->gform == 3)
		return dmon_line(p, t, tn, err);
	return csv_line(p, t, tn, err);
}
