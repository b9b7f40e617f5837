/*
 * textfmt.c: other profilers' text reports (see textfmt.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ingest/textfmt.h"
#include "utf8.h"

const char *const tf_kind_names[TF_NKINDS] = { "none", "lightning_report", "key_averages", "stacks", "gpu_log" };

const struct tf_limits tf_default_limits = {
	.max_line = 64u << 10,
	.max_rows = 1u << 22,
	.max_strings = 256u << 20,
};

/* ---- small helpers ---- */

static int is_sp(int c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static void trim(const char **s, size_t *n)
{
	while (*n && is_sp((unsigned char)**s))
		(*s)++, (*n)--;
	while (*n && is_sp((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

static int starts(const char *s, size_t n, const char *pre)
{
	size_t k = strlen(pre);

	return n >= k && !memcmp(s, pre, k);
}

static const char *find(const char *s, size_t n, const char *needle)
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
static int dec_scaled(const char *s, size_t n, int scale, int64_t *out)
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
static int parse_time(const char *s, size_t n, int64_t *ns)
{
	if (n > 2 && !memcmp(s + n - 2, "us", 2))
		return dec_scaled(s, n - 2, 3, ns);
	if (n > 2 && !memcmp(s + n - 2, "ms", 2))
		return dec_scaled(s, n - 2, 6, ns);
	if (n > 1 && s[n - 1] == 's')
		return dec_scaled(s, n - 1, 9, ns);
	return -1;
}

/* "256.00 Kb", "0 b", "-1.70 MB", "256 B" -> bytes (1024-based) */
static int parse_mem(const char *s, size_t n, int64_t *b)
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
		if (dec_scaled(s, (size_t)(sp - s), 2, &h))	/* hundredths */
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
static int parse_pct(const char *s, size_t n, int64_t *bp)
{
	if (n > 1 && s[n - 1] == '%') {
		n--;
		while (n && s[n - 1] == ' ')
			n--;
	}
	return dec_scaled(s, n, 2, bp);
}

/* ---- detection ---- */

/* The next line of [p, end): its bounds; returns 0 when no complete line (unless at_end). */
static int next_line(const uint8_t **p, const uint8_t *end, int at_end, const char **ls, size_t *ln)
{
	const uint8_t *nl;

	/* nothing left: no line (an empty one here forever kept the key_averages look-ahead
	 * looping on "---------" alone: fuzz_textfmt's timeout) */
	if (*p >= end)
		return 0;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	if (!nl && !at_end)
		return 0;
	if (!nl)
		nl = end;
	*ls = (const char *)*p;
	*ln = (size_t)(nl - *p);
	if (*ln && (*ls)[*ln - 1] == '\r')
		(*ln)--;
	*p = nl < end ? nl + 1 : end;
	return 1;
}

static int is_dashes(const char *s, size_t n)
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

static int gpu_header_like(const char *s, size_t n)
{
	return starts(s, n, "timestamp") || starts(s, n, "index") || starts(s, n, "utilization.") ||
	       starts(s, n, "memory.") || starts(s, n, "power.") || starts(s, n, "temperature.") ||
	       starts(s, n, "name, ") || starts(s, n, "clocks.");
}

/* YYYY/MM/DD HH:MM:SS.mmm */
static int is_smi_time(const char *s, size_t n)
{
	static const char pat[] = "dddd/dd/dd dd:dd:dd";

	if (n < sizeof(pat) - 1)
		return 0;
	for (size_t i = 0; i < sizeof(pat) - 1; i++)
		if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != pat[i])
			return 0;
	return 1;
}

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
	while (next_line(&p, end, at_end, &ls, &ln)) {
		const char *t = ls;
		size_t tn = ln;
		trim(&t, &tn);
		if (!tn) {
			if (p == end && at_end)
				break;
			continue;
		}
		seen++;
		if (find(t, tn, "Profiler Report") || starts(t, tn, "Profile stats for:"))
			return TF_LIGHTNING;
		if (starts(t, tn, "Action") && memchr(t, '|', tn))
			return TF_LIGHTNING;
		if (is_dashes(t, tn) || (tn > 8 && t[0] == '=' && t[tn - 1] == '=')) {
			/* key_averages: the header names Self CPU */
			const char *h;
			size_t hn;
			while (next_line(&p, end, at_end, &h, &hn))
				if (find(h, hn, "Self CPU") && find(h, hn, "Name"))
					return TF_KEYAVG;
				else if (!is_dashes(h, hn) && hn && h[0] != '=' && !find(h, hn, "This report"))
					return TF_NONE;
			return at_end ? TF_NONE : -1;
		}
		if (gpu_header_like(t, tn) || is_smi_time(t, tn))
			return TF_GPULOG;
		if (stack_line_like(t, tn))
			return TF_STACKS;
		return TF_NONE;
	}
	return at_end || seen ? TF_NONE : -1;
}

/* ---- the parser ---- */

struct fslot {
	uint32_t idx1;			/* frame index + 1; 0: empty */
};

struct textfmt_parser {
	int kind;
	struct tf_limits lim;
	char *line;
	size_t nline;
	uint64_t lineno;
	int failed;
	struct tf_result r;
	/* strings */
	char **strs;
	size_t nstrs, capstrs, strbytes;
	/* lightning */
	struct tf_action *act;
	size_t cap_act;
	struct tf_function *fn;
	size_t cap_fn;
	int fn_rows;			/* -1: before the current action's table header; else its rows kept */
	int lcol[5];			/* header: which '|' cell holds name, mean, calls, total, share */
	int have_lhdr;
	/* key_averages */
	int ka_state;			/* 0 before, 1 header seen, 2 rows, 3 after */
	size_t cs[TF_MAX_COLS], ce[TF_MAX_COLS];
	char *colname[TF_MAX_COLS];
	int colunit[TF_MAX_COLS];
	struct tf_op *ops;
	size_t cap_ops;
	/* stacks */
	struct tf_frame *fr;
	int64_t *first_sum, *last_sum;
	uint64_t *stamp;
	uint8_t *ends;			/* 1: some stack's first frame, 2: some stack's last */
	size_t cap_fr;
	struct fslot *ht;
	size_t htcap;
	/* gpu */
	char *gcol[TF_GPU_MAX_COLS];
	const char *gunit[TF_GPU_MAX_COLS];
	double gscale[TF_GPU_MAX_COLS];
	int gidx_col;
	struct tf_gpu_row *grows;
	size_t cap_grows;
	char *ghdr;			/* the header line as first seen */
};

static char *keep_str(struct textfmt_parser *p, const char *s, size_t n)
{
	char *c;

	if (p->strbytes + n + 1 > p->lim.max_strings)
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
	p->strbytes += n + 1;
	return p->strs[p->nstrs++] = c;
}

/* Room in *arr for n + 1 items of size sz, within max; -1: past max or out of memory. */
static int grow(void **arr, size_t *cap, size_t n, size_t sz, uint64_t max)
{
	return n >= *cap && n >= max ? -1 : tp_grow(arr, cap, n + 1, sz);
}

static int bad(struct textfmt_parser *p, struct tp_errbuf *err, const char *what)
{
	p->failed = 1;
	return tp_fail(err, TP_ERR_INVALID, "invalid_table", "%s: line %llu: %s", tf_kind_names[p->kind],
		       (unsigned long long)p->lineno, what);
}

static int toobig(struct textfmt_parser *p, struct tp_errbuf *err)
{
	p->failed = 1;
	return tp_fail(err, TP_ERR_TOOBIG, "too_many_rows", "%s: line %llu: more rows or names than the caps allow",
		       tf_kind_names[p->kind], (unsigned long long)p->lineno);
}

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
			return bad(p, err, "a cProfile row has fewer than six columns");
	}
	while (c < e && (*c == ' ' || *c == '\t'))
		c++;
	if (c == e)
		return bad(p, err, "a cProfile row has no location");
	slash = memchr(f[0], '/', fn[0]);
	if (dec_scaled(f[0], slash ? (size_t)(slash - f[0]) : fn[0], 0, &calls) ||
	    (slash ? dec_scaled(slash + 1, fn[0] - (size_t)(slash + 1 - f[0]), 0, &prim) : (prim = calls, 0)) ||
	    calls < 0 || prim < 0 || dec_scaled(f[1], fn[1], 9, &tot) || dec_scaled(f[2], fn[2], 9, &per) ||
	    dec_scaled(f[3], fn[3], 9, &cum) || dec_scaled(f[4], fn[4], 9, &per) || tot < 0 || cum < 0)
		return bad(p, err, "a cProfile row's calls or times are not numbers");
	if (p->fn_rows >= TF_FUNCTIONS_PER_ACTION)
		return TP_OK;
	if (grow((void **)&p->fn, &p->cap_fn, p->r.nfunctions, sizeof(*p->fn), p->lim.max_rows))
		return toobig(p, err);
	struct tf_function *x = &p->fn[p->r.nfunctions];
	*x = (struct tf_function){ .action = p->r.nactions - 1, .ncalls = calls, .primitive_calls = prim,
				   .tottime_ns = tot, .cumtime_ns = cum };
	if (!(x->location = keep_str(p, c, (size_t)(e - c))))
		return toobig(p, err);
	p->r.nfunctions++;
	p->fn_rows++;
	return TP_OK;
}

static int lightning_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *t = s;
	size_t tn = n;

	trim(&t, &tn);
	if (!tn)
		return TP_OK;
	if (starts(t, tn, "Profile stats for:")) {
		const char *a = t + 18;
		size_t an = tn - 18;
		trim(&a, &an);
		if (grow((void **)&p->act, &p->cap_act, p->r.nactions, sizeof(*p->act), p->lim.max_rows))
			return toobig(p, err);
		struct tf_action *x = &p->act[p->r.nactions];
		if (!(x->name = keep_str(p, a, an)))
			return toobig(p, err);
		x->calls = x->mean_ns = x->total_ns = x->share_bp = -1;
		p->r.nactions++;
		p->r.advanced = 1;
		p->fn_rows = -1;
		return TP_OK;
	}
	if (p->r.advanced) {
		const char *in = find(t, tn, " function calls");
		const char *sec = find(t, tn, " seconds");
		if (in && sec && p->r.nactions && p->act[p->r.nactions - 1].total_ns < 0) {
			const char *v = find(t, tn, " in ");
			if (!v || v > sec || dec_scaled(v + 4, (size_t)(sec - v - 4), 9, &p->act[p->r.nactions - 1].total_ns))
				return bad(p, err, "a section's total time is not a number");
			return TP_OK;
		}
		if (starts(t, tn, "ncalls") && find(t, tn, "cumtime")) {
			p->fn_rows = 0;
			return TP_OK;
		}
		if (p->r.nactions && p->fn_rows >= 0 && *t >= '0' && *t <= '9')
			return function_row(p, t, tn, err);
		p->fn_rows = -1;	/* the table ended: a title, another report, a note */
		return TP_OK;
	}
	if (!memchr(t, '|', tn))
		return TP_OK;	/* title, dashes, a log prefix line */
	/* cells between '|' */
	const char *cell[8];
	size_t cn[8], nc = 0;
	const char *c = t, *e = t + tn;
	while (c < e && nc < 8) {
		const char *bar = memchr(c, '|', (size_t)(e - c));
		const char *ce = bar ? bar : e;
		cell[nc] = c, cn[nc] = (size_t)(ce - c);
		trim(&cell[nc], &cn[nc]);
		nc++;
		if (!bar)
			break;
		c = bar + 1;
	}
	if (nc && !cn[nc - 1])
		nc--;	/* the trailing '|' */
	if (!p->have_lhdr) {
		if (!starts(cell[0], cn[0], "Action"))
			return bad(p, err, "a Lightning table row before its header");
		for (int k = 0; k < 5; k++)
			p->lcol[k] = -1;
		p->lcol[0] = 0;
		for (size_t k = 1; k < nc; k++) {
			if (starts(cell[k], cn[k], "Mean duration"))
				p->lcol[1] = (int)k;
			else if (starts(cell[k], cn[k], "Num calls"))
				p->lcol[2] = (int)k;
			else if (starts(cell[k], cn[k], "Total time"))
				p->lcol[3] = (int)k;
			else if (starts(cell[k], cn[k], "Percentage"))
				p->lcol[4] = (int)k;
		}
		if (p->lcol[3] < 0 && p->lcol[1] < 0)
			return bad(p, err, "the header has neither a mean nor a total column");
		p->have_lhdr = 1;
		p->r.total_ns = -1;
		return TP_OK;
	}
	if (starts(cell[0], cn[0], "Action"))
		return TP_OK;	/* an appended second report repeats the header */
	int maxc = 0;
	for (int k = 0; k < 5; k++)
		if (p->lcol[k] > maxc)
			maxc = p->lcol[k];
	if ((int)nc <= maxc)
		return bad(p, err, "a column is missing");
	int64_t v[5] = { -1, -1, -1, -1, -1 };
	for (int k = 1; k < 5; k++) {
		if (p->lcol[k] < 0)
			continue;
		const char *x = cell[p->lcol[k]];
		size_t xn = cn[p->lcol[k]];
		if (xn == 1 && (x[0] == '-' || x[0] == '_'))
			continue;
		int rc = k == 2 ? dec_scaled(x, xn, 0, &v[k]) : k == 4 ? parse_pct(x, xn, &v[k]) : dec_scaled(x, xn, 9, &v[k]);
		if (rc)
			return bad(p, err, "a cell is not a number in the unit the header says");
	}
	if (cn[0] == 5 && !memcmp(cell[0], "Total", 5)) {
		p->r.total_ns = v[3];
		return TP_OK;
	}
	if (grow((void **)&p->act, &p->cap_act, p->r.nactions, sizeof(*p->act), p->lim.max_rows))
		return toobig(p, err);
	struct tf_action *a = &p->act[p->r.nactions];
	if (!(a->name = keep_str(p, cell[0], cn[0])))
		return toobig(p, err);
	a->mean_ns = v[1], a->calls = v[2], a->total_ns = v[3], a->share_bp = v[4];
	if (a->total_ns < 0 && a->mean_ns >= 0 && a->calls >= 0 &&
	    __builtin_mul_overflow(a->mean_ns, a->calls, &a->total_ns))
		return bad(p, err, "a mean times its calls is past any duration");
	p->r.nactions++;
	return TP_OK;
}

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
 * The columns by meaning. The device word is the X of a time column "Self X"
 * other than CPU (torch prints use_device.upper(): CUDA, XPU, MTIA, NPU).
 * Every table since torch 1.7 has Self CPU, CPU total and # of Calls: without
 * them the rows cannot be an operator table.
 */
static int keyavg_roles(struct textfmt_parser *p, struct tp_errbuf *err)
{
	static const char *const cpu[][2] = {
		[TF_KA_SELF_CPU] = { "Self ", "" }, [TF_KA_CPU_TOTAL] = { "", " total" },
		[TF_KA_CPU_MEM] = { "", " Mem" }, [TF_KA_SELF_CPU_MEM] = { "Self ", " Mem" },
	};
	static const int dev_of[] = { [TF_KA_SELF_CPU] = TF_KA_SELF_DEV, [TF_KA_CPU_TOTAL] = TF_KA_DEV_TOTAL,
				      [TF_KA_CPU_MEM] = TF_KA_DEV_MEM, [TF_KA_SELF_CPU_MEM] = TF_KA_SELF_DEV_MEM };
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
	if (col[TF_KA_CALLS] < 0)
		return bad(p, err, "the header has no \"# of Calls\" column");
	if (col[TF_KA_SELF_CPU] < 0 || col[TF_KA_CPU_TOTAL] < 0)
		return bad(p, err, "the header has no \"Self CPU\" and \"CPU total\" columns");
	return TP_OK;
}

static void cut(const char *s, size_t n, size_t a, size_t b, const char **c, size_t *cn)
{
	if (a >= n) {
		*c = s + n, *cn = 0;
		return;
	}
	if (b > n)
		b = n;
	*c = s + a, *cn = b - a;
	trim(c, cn);
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

static int keyavg_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *t = s;
	size_t tn = n;

	trim(&t, &tn);
	if (p->ka_state == 0) {
		if (!tn || (t[0] == '=') || find(t, tn, "This report"))
			return TP_OK;
		if (!is_dashes(t, tn))
			return bad(p, err, "expected the table's dash line");
		size_t nc = 0, i = 0;
		while (i < n) {
			while (i < n && s[i] == ' ')
				i++;
			if (i >= n || s[i] != '-')
				break;
			if (nc == TF_MAX_COLS)
				return bad(p, err, "more columns than a key_averages table has");
			p->cs[nc] = i;
			while (i < n && s[i] == '-')
				i++;
			p->ce[nc++] = i;
		}
		p->r.ncols = nc;
		p->ka_state = 1;
		return TP_OK;
	}
	if (p->ka_state == 1) {
		if (is_dashes(t, tn)) {
			if (!p->colname[0])
				return bad(p, err, "no header between the dash lines");
			p->ka_state = 2;
			return keyavg_roles(p, err);
		}
		const char *c[TF_MAX_COLS + 1];
		size_t cn[TF_MAX_COLS + 1];
		cut(s, n, p->cs[0], p->ce[0], &c[0], &cn[0]);
		if (wide_cells(s, n, p->ce[0], c + 1, cn + 1, TF_MAX_COLS) != p->r.ncols - 1)
			return bad(p, err, "the header does not have a title per column");
		for (size_t k = 0; k < p->r.ncols; k++) {
			if (!(p->colname[k] = keep_str(p, c[k], cn[k])))
				return toobig(p, err);
			p->colunit[k] = col_unit(p->colname[k]);
		}
		if (strcmp(p->colname[0], "Name"))
			return bad(p, err, "the first column is not Name");
		return TP_OK;
	}
	if (p->ka_state == 2) {
		if (is_dashes(t, tn)) {
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
		if (wide_cells(s, n, p->ce[0], cc + 1, ccn + 1, TF_MAX_COLS) != p->r.ncols - 1)
			return bad(p, err, "a row without a value per column: a column is missing");
		if (grow((void **)&p->ops, &p->cap_ops, p->r.nops, sizeof(*p->ops), p->lim.max_rows))
			return toobig(p, err);
		struct tf_op *o = &p->ops[p->r.nops];
		if (!(o->name = keep_str(p, c, cn)))
			return toobig(p, err);
		o->v[0] = INT64_MIN;
		for (size_t k = 1; k < p->r.ncols; k++) {
			int rc = 0;
			o->v[k] = INT64_MIN;
			c = cc[k], cn = ccn[k];
			if (p->colunit[k] == TF_U_TEXT || p->colunit[k] == TF_U_OTHER)
				continue;
			if (p->colunit[k] == TF_U_NS)
				rc = parse_time(c, cn, &o->v[k]);
			else if (p->colunit[k] == TF_U_BYTES)
				rc = parse_mem(c, cn, &o->v[k]);
			else if (p->colunit[k] == TF_U_BP)
				rc = cn == 3 && !memcmp(c, "NaN", 3) ? (o->v[k] = INT64_MIN, 0) : parse_pct(c, cn, &o->v[k]);
			else
				rc = dec_scaled(c, cn, 0, &o->v[k]);
			if (rc) {
				char what[96];
				snprintf(what, sizeof(what), "column \"%.40s\": not a value in a unit the profiler writes",
					 p->colname[k]);
				return bad(p, err, what);
			}
		}
		p->r.nops++;
		return TP_OK;
	}
	/* footers */
	if (!tn)
		return TP_OK;
	const char *colon = memchr(t, ':', tn);
	if (colon && starts(t, tn, "Self ") && find(t, tn, " time total:")) {
		const char *v = colon + 1;
		size_t vn = (size_t)(t + tn - v);
		int64_t ns;
		trim(&v, &vn);
		if (parse_time(v, vn, &ns))
			return bad(p, err, "a footer total is not a time");
		if (starts(t, tn, "Self CPU time total:"))
			p->r.self_cpu_total_ns = ns;
		else
			p->r.self_dev_total_ns = ns;
		return TP_OK;
	}
	return bad(p, err, "text after the table that is not a footer");
}

/* -- stacks -- */

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

static int rehash(struct textfmt_parser *p)
{
	size_t nc = p->htcap ? p->htcap * 2 : 1024;
	struct fslot *nt = tp_calloc(nc, sizeof(*nt));

	if (!nt)
		return -1;
	for (size_t i = 0; i < p->r.nframes; i++) {
		const char *nm = p->fr[i].name;
		size_t h = (size_t)fnv(nm, strlen(nm)) & (nc - 1);
		while (nt[h].idx1)
			h = (h + 1) & (nc - 1);
		nt[h].idx1 = (uint32_t)(i + 1);
	}
	tp_free(p->ht);
	p->ht = nt, p->htcap = nc;
	return 0;
}

/* The frame's index, added when new; -1 over the caps. */
static long frame_of(struct textfmt_parser *p, const char *s, size_t n)
{
	size_t h;

	if ((p->r.nframes + 1) * 2 > p->htcap && rehash(p))
		return -1;
	h = (size_t)fnv(s, n) & (p->htcap - 1);
	while (p->ht[h].idx1) {
		const char *nm = p->fr[p->ht[h].idx1 - 1].name;
		if (strlen(nm) == n && !memcmp(nm, s, n))
			return (long)p->ht[h].idx1 - 1;
		h = (h + 1) & (p->htcap - 1);
	}
	size_t old = p->cap_fr, i = p->r.nframes;
	if (i >= p->lim.max_rows || i >= UINT32_MAX - 1)
		return -1;
	if (i == p->cap_fr) {
		size_t nc = old ? old * 2 : 256;
		struct tf_frame *a = tp_realloc(p->fr, nc * sizeof(*a));
		if (!a)
			return -1;
		p->fr = a;
		int64_t *f = tp_realloc(p->first_sum, nc * sizeof(*f));
		if (!f)
			return -1;
		p->first_sum = f;
		int64_t *l = tp_realloc(p->last_sum, nc * sizeof(*l));
		if (!l)
			return -1;
		p->last_sum = l;
		uint64_t *st = tp_realloc(p->stamp, nc * sizeof(*st));
		if (!st)
			return -1;
		p->stamp = st;
		uint8_t *en = tp_realloc(p->ends, nc);
		if (!en)
			return -1;
		p->ends = en;
		p->cap_fr = nc;
	}
	if (!(p->fr[i].name = keep_str(p, s, n)))
		return -1;
	p->fr[i].self = p->fr[i].total = 0;
	p->first_sum[i] = p->last_sum[i] = 0;
	p->stamp[i] = 0;
	p->ends[i] = 0;
	p->ht[h].idx1 = (uint32_t)(i + 1);
	p->r.nframes++;
	return (long)i;
}

static int sat_add(int64_t *a, int64_t b)
{
	if (*a > INT64_MAX - b)
		return -1;
	*a += b;
	return 0;
}

static int stacks_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	size_t i = n;
	int64_t w;

	if (!n)
		return TP_OK;
	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	if (i == n || i < 2 || s[i - 1] != ' ')
		return bad(p, err, "not \"frame;frame;... weight\"");
	if (dec_scaled(s + i, n - i, 0, &w))
		return bad(p, err, "the weight does not fit");
	size_t fn = i - 1;
	long first = -1, last = -1;
	p->r.nstacks++;
	for (size_t a = 0; a <= fn;) {
		const char *semi = memchr(s + a, ';', fn - a);
		size_t b = semi ? (size_t)(semi - s) : fn;
		if (b == a)
			return bad(p, err, "an empty frame");
		long f = frame_of(p, s + a, b - a);
		if (f < 0)
			return toobig(p, err);
		if (first < 0)
			first = f;
		last = f;
		if (p->stamp[f] != p->r.nstacks) {	/* a frame counts once per stack (recursion) */
			p->stamp[f] = p->r.nstacks;
			if (sat_add(&p->fr[f].total, w))
				return bad(p, err, "the weights overflow");
		}
		a = b + 1;
		if (!semi)
			break;
	}
	p->ends[first] |= 1;
	p->ends[last] |= 2;
	if (sat_add(&p->first_sum[first], w) || sat_add(&p->last_sum[last], w) || sat_add(&p->r.stacks_total, w))
		return bad(p, err, "the weights overflow");
	return TP_OK;
}

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
			trim(&c[k], &cn[k]);
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

	if (!is_smi_time(s, n))
		return -1;
	y = atoi(s), mo = atoi(s + 5), d = atoi(s + 8), h = atoi(s + 11), mi = atoi(s + 14), se = atoi(s + 17);
	if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return -1;
	if (n > 19 && (s[19] != '.' || dec_scaled(s + 20, n - 20, 0, &ms) || n - 20 > 3 || ms < 0))
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
	if (!(p->gcol[k] = keep_str(p, c, nn)))
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
		if (is_smi_time(c[k], cn[k]))
			nm = "timestamp";
		else if (cn[k] > 2 && !memcmp(c[k] + cn[k] - 2, " %", 2))
			nm = npct < 2 ? pct[npct] : "utilization", npct++, u = "%";
		else if (cn[k] > 4 && !memcmp(c[k] + cn[k] - 4, " MiB", 4))
			nm = nmib < 3 ? mib[nmib] : "memory", nmib++, u = "B", sc = 1048576;
		else if (cn[k] > 2 && !memcmp(c[k] + cn[k] - 2, " W", 2))
			nm = "power.draw", u = "W";
		else if (cn[k] > 4 && !memcmp(c[k] + cn[k] - 4, " MHz", 4))
			nm = "clocks", u = "Hz", sc = 1e6;
		else if (!dec_scaled(c[k], cn[k], 0, &(int64_t){ 0 }))
			nm = "temperature.gpu", u = "C";
		else {
			snprintf(buf, sizeof(buf), "column%zu", k + 1);
			nm = buf;
		}
		if (!(p->gcol[k] = keep_str(p, nm, strlen(nm))))
			return -1;
		p->gunit[k] = u, p->gscale[k] = sc;
	}
	p->r.ngpu_cols = nc;
	return 0;
}

static int gpu_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	const char *c[TF_GPU_MAX_COLS + 1];
	size_t cn[TF_GPU_MAX_COLS + 1], nc;
	const char *t = s;
	size_t tn = n;

	trim(&t, &tn);
	if (!tn)
		return TP_OK;
	nc = csv_cells(t, tn, c, cn, TF_GPU_MAX_COLS);
	if (nc > TF_GPU_MAX_COLS)
		return bad(p, err, "more columns than --query-gpu gives");
	if (gpu_header_like(t, tn)) {
		if (p->ghdr) {
			if (strlen(p->ghdr) != tn || memcmp(p->ghdr, t, tn))
				return bad(p, err, "a header that differs from the first one");
			return TP_OK;	/* a repeated header (nvidia-smi run in a loop) */
		}
		if (p->r.ngpu_rows)
			return bad(p, err, "a header after rows without one");
		if (!(p->ghdr = keep_str(p, t, tn)))
			return toobig(p, err);
		for (size_t k = 0; k < nc; k++)
			if (gpu_col(p, k, c[k], cn[k]))
				return bad(p, err, "a header column with a unit nvidia-smi does not write");
		p->r.ngpu_cols = nc;
		p->r.gpu_header = 1;
		return TP_OK;
	}
	if (!p->r.ngpu_cols && gpu_guess(p, c, cn, nc))
		return toobig(p, err);
	if (nc != p->r.ngpu_cols)
		return bad(p, err, nc < p->r.ngpu_cols ? "a column is missing" : "more columns than the header");
	if (grow((void **)&p->grows, &p->cap_grows, p->r.ngpu_rows, sizeof(*p->grows), p->lim.max_rows))
		return toobig(p, err);
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
				return bad(p, err, "a timestamp that is not YYYY/MM/DD HH:MM:SS.mmm");
			continue;
		}
		if ((int)k == p->gidx_col) {
			if (dec_scaled(v, vn, 0, &x) || x < 0 || x > 4096)
				return bad(p, err, "an index that is not a GPU index");
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
		if (dec_scaled(v, vn, 2, &x)) {
			char what[96];
			snprintf(what, sizeof(what), "column \"%.40s\": not a number", p->gcol[k]);
			return bad(p, err, what);
		}
		r->v[k] = (double)x / 100.0 * p->gscale[k];
	}
	p->r.ngpu_rows++;
	return TP_OK;
}

/* ---- lines ---- */

static int line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err)
{
	p->lineno++;
	if (n && s[n - 1] == '\r')
		n--;
	for (size_t i = 0; i < n;) {
		size_t k = tp_utf8_len((const unsigned char *)s + i, (const unsigned char *)s + n);
		if (!k || (s[i] < 0x20 && s[i] != '\t' && s[i] >= 0))
			return bad(p, err, "not UTF-8 text");
		i += k;
	}
	switch (p->kind) {
	case TF_LIGHTNING:
		return lightning_line(p, s, n, err);
	case TF_KEYAVG:
		return keyavg_line(p, s, n, err);
	case TF_STACKS:
		return stacks_line(p, s, n, err);
	default:
		return gpu_line(p, s, n, err);
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

static int by_total(const void *a, const void *b)
{
	const struct tf_frame *x = a, *y = b;

	return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
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
			return bad(p, err, "the report ends before any action");
		break;
	case TF_KEYAVG:
		if (p->ka_state < 3)
			return bad(p, err, "the table is truncated: it ends before its closing dash line");
		break;
	case TF_STACKS: {
		size_t nfirst = 0, nlast = 0;
		if (!p->r.nframes)
			return bad(p, err, "no stacks");
		for (size_t i = 0; i < p->r.nframes; i++)
			nfirst += (p->ends[i] & 1) != 0, nlast += (p->ends[i] & 2) != 0;
		/* the root end has fewer distinct frames */
		p->r.leaf_first = nlast < nfirst;
		for (size_t i = 0; i < p->r.nframes; i++)
			p->fr[i].self = p->r.leaf_first ? p->first_sum[i] : p->last_sum[i];
		qsort(p->fr, p->r.nframes, sizeof(*p->fr), by_total);
		tp_free(p->ht);
		p->ht = NULL, p->htcap = 0;	/* the order changed: no more lookups */
		break;
	}
	default:
		if (!p->r.ngpu_rows)
			return bad(p, err, "no rows");
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
