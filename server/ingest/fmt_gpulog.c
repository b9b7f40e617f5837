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
		else if (!tf_dec_scaled(c[k], cn[k], 0, &(int64_t){ 0 }))
			nm = "temperature.gpu", u = "C";
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

int tf_gpu_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *c[TF_GPU_MAX_COLS + 1];
	size_t cn[TF_GPU_MAX_COLS + 1], nc;
	const char *t = s;
	size_t tn = n;

	tf_trim(&t, &tn);
	if (!tn)
		return TP_OK;
	nc = csv_cells(t, tn, c, cn, TF_GPU_MAX_COLS);
	if (nc > TF_GPU_MAX_COLS)
		return tf_bad(p, err, "more columns than --query-gpu gives");
	if (tf_gpu_header_like(t, tn)) {
		if (p->ghdr) {
			if (strlen(p->ghdr) != tn || memcmp(p->ghdr, t, tn))
				return tf_bad(p, err, "a header that differs from the first one");
			return TP_OK;	/* a repeated header (nvidia-smi run in a loop) */
		}
		if (p->r.ngpu_rows)
			return tf_bad(p, err, "a header after rows without one");
		if (!(p->ghdr = tf_keep_str(p, t, tn)))
			return tf_toobig(p, err);
		for (size_t k = 0; k < nc; k++)
			if (gpu_col(p, k, c[k], cn[k]))
				return tf_bad(p, err, "a header column with a unit nvidia-smi does not write");
		p->r.ngpu_cols = nc;
		p->r.gpu_header = 1;
		return TP_OK;
	}
	if (!p->r.ngpu_cols && gpu_guess(p, c, cn, nc))
		return tf_toobig(p, err);
	if (nc != p->r.ngpu_cols)
		return tf_bad(p, err, nc < p->r.ngpu_cols ? "a column is missing" : "more columns than the header");
	if (tf_grow((void **)&p->grows, &p->cap_grows, p->r.ngpu_rows, sizeof(*p->grows), p->lim.max_rows))
		return tf_toobig(p, err);
	struct tf_gpu_row *r = &p->grows[p->r.ngpu_rows];
	r->t_ns = INT64_MIN;
	r->gpu = 0;
	for (size_t k = 0; k < nc; k++) {
		const char *v = c[k];
		size_t vn = cn[k];
		const char *u = p->gunit[k];
		size_t ul = strlen(u);
		int64_t x;
		r->v[k] = NAN;
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
		if (!*u || (vn && v[0] == '['))
			continue;	/* text (name, pstate) or [N/A] / [Not Supported] */
		/* the unit as printed: "%" , "MiB", "W", "MHz"; temperature bare (nounits: all bare) */
		static const char *const printed[] = { "%", "MiB", "W", "MHz" };
		for (size_t q = 0; q < 4; q++) {
			size_t pl = strlen(printed[q]);
			if (vn > pl + 1 && !memcmp(v + vn - pl, printed[q], pl) && v[vn - pl - 1] == ' ') {
				vn -= pl + 1;
				break;
			}
		}
		(void)ul;
		if (tf_dec_scaled(v, vn, 2, &x)) {
			char what[96];
			snprintf(what, sizeof(what), "column \"%.40s\": not a number", p->gcol[k]);
			return tf_bad(p, err, what);
		}
		r->v[k] = (double)x / 100.0 * p->gscale[k];
	}
	p->r.ngpu_rows++;
	return TP_OK;
}
