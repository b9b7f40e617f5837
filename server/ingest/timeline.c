/*
 * timeline.c: PyTorch memory timeline exports, streaming (timeline.h).
 *
 * The document is arrays of numbers only, so the state is a depth and an
 * element count. Which form it is shows at the outer array's second
 * element: numbers (another [t, action, bytes, category] row) or arrays
 * (the rows of [times, sizes]). The first element is kept until then, and
 * in the sizes form (the times) to the end: as the differences between its
 * numbers, zigzag varints, a byte for each "0," rather than 8 (a first row
 * of 32 million zeros held 256 MiB before the document's 400: issue 50).
 * Anything but arrays and numbers is refused; the tokenizer (jtok.h) holds
 * no token longer than MAX_NUMBER bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "jtok.h"
#include "timeline.h"

#define MAX_NUMBER 64

enum form { F_UNKNOWN, F_RAW, F_SIZES };

/* numbers as zigzag varints of their differences, in order */
struct packed {
	uint8_t *b;
	size_t len, cap;	/* bytes */
	size_t n;		/* numbers */
	uint64_t last;
};

struct timeline_parser {
	struct jtok *jt;
	struct tp_errbuf *err;
	int rc;
	uint64_t max_points;
	int depth;			/* open arrays */
	size_t outer;			/* elements of the outer array begun */
	enum form form;
	struct packed first;		/* the outer array's first element, until the form is known */
	int64_t row[9];			/* the row being read */
	size_t nrow;
	/* raw form */
	int64_t cats[MEM_NCAT], cur_t;
	int have_cur;
	/* sizes form */
	size_t nsizes;
	/* out */
	struct mem_point *pts;
	size_t npts, cap;
};

static int fail(struct timeline_parser *p, int rc, const char *code, const char *what)
{
	if (!p->rc) {
		p->rc = rc;
		tp_fail(p->err, rc, code, "%s (memory timeline, near byte %llu)", what,
			(unsigned long long)jtok_offset(p->jt));
	}
	return 0;	/* stops the tokenizer */
}

static int raw_row(struct timeline_parser *p, const int64_t *r, size_t n);

static int push(struct packed *a, int64_t v)
{
	uint64_t d = (uint64_t)v - a->last, z = d << 1 ^ (0 - (d >> 63));

	if (a->cap - a->len < 10) {
		size_t cap = a->cap ? a->cap * 2 : 1024;
		uint8_t *nb = tp_realloc(a->b, cap);
		if (!nb)
			return -1;
		a->b = nb;
		a->cap = cap;
	}
	do {
		a->b[a->len++] = (uint8_t)(z & 0x7f) | (z > 0x7f ? 0x80 : 0);
		z >>= 7;
	} while (z);
	a->last = (uint64_t)v;
	a->n++;
	return 0;
}

/* The next number of a, from *at (a cursor from 0) and *prev (from 0). */
static int64_t next_packed(const struct packed *a, size_t *at, uint64_t *prev)
{
	uint64_t z = 0;
	int shift = 0;

	while (*at < a->len) {
		uint8_t c = a->b[(*at)++];
		z |= (uint64_t)(c & 0x7f) << shift;
		shift += 7;
		if (!(c & 0x80))
			break;
	}
	*prev += z >> 1 ^ (0 - (z & 1));
	return (int64_t)*prev;
}

/* The first row as a raw row: [t_ns, action, bytes, category] (raw_row refuses any other length). */
static int first_as_row(struct timeline_parser *p)
{
	int64_t r[9] = { 0 };
	size_t at = 0, i;
	uint64_t prev = 0;

	if (p->first.n > 9)
		return raw_row(p, r, p->first.n);
	for (i = 0; i < p->first.n; i++)
		r[i] = next_packed(&p->first, &at, &prev);
	return raw_row(p, r, p->first.n);
}

static struct mem_point *new_point(struct timeline_parser *p)
{
	if (p->npts >= p->max_points) {
		fail(p, TP_ERR_TOOBIG, "too_many_points", "more time points than the cap");
		return NULL;
	}
	if (p->npts == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 1024;
		struct mem_point *np = tp_realloc(p->pts, cap * sizeof(*np));
		if (!np) {
			fail(p, TP_ERR_NOMEM, NULL, "out of memory");
			return NULL;
		}
		p->pts = np;
		p->cap = cap;
	}
	return &p->pts[p->npts++];
}

/* One raw row: a new point when t changes (HTA's MemoryAnalysis._process_raw_events). */
static int raw_row(struct timeline_parser *p, const int64_t *r, size_t n)
{
	struct mem_point *pt;

	if (n != 4)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "a raw row must be [t_ns, action, bytes, category]");
	if (r[3] < 0 || r[3] >= MEM_NCAT)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "a category must be 0 to 7");
	if (p->have_cur && r[0] != p->cur_t) {
		if (!(pt = new_point(p)))
			return 0;
		pt->t_ns = p->cur_t;
		pt->reserved = -1;
		memcpy(pt->cat, p->cats, sizeof(pt->cat));
	}
	p->cur_t = r[0];
	p->have_cur = 1;
	p->cats[r[3]] = tp_sat_add(p->cats[r[3]], r[2]);
	return 1;
}

static int on_number(void *ctx, const char *s, size_t len)
{
	struct timeline_parser *p = ctx;
	char buf[MAX_NUMBER + 1];
	int64_t v;

	if (len > MAX_NUMBER)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "a number is too long");
	memcpy(buf, s, len);
	buf[len] = 0;
	if (strpbrk(buf, ".eE")) {
		double d = strtod(buf, NULL);	/* PyTorch 2.1 wrote 0.0 */
		if (!(d > -9.2e18 && d < 9.2e18))
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "a number is out of range");
		v = llround(d);
	} else {
		char *end;
		errno = 0;
		v = strtoll(buf, &end, 10);
		if (errno || *end)
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "a number is out of range");
	}
	if (p->depth == 2 && p->outer == 1 && p->form == F_UNKNOWN) {
		/* the times of the sizes form, one a point: the point cap bounds them */
		if (p->first.n >= 9 && p->first.n >= p->max_points)
			return fail(p, TP_ERR_TOOBIG, "too_many_points", "more time points than the cap");
		if (push(&p->first, v))
			return fail(p, TP_ERR_NOMEM, NULL, "out of memory");
		return 1;
	}
	if (p->depth == 2 && p->outer == 2 && p->form == F_UNKNOWN) {
		/* a second row of numbers: the raw form; the first element was a row too */
		p->form = F_RAW;
		if (!first_as_row(p))
			return 0;
	}
	if ((p->depth == 2 && p->form == F_RAW) || (p->depth == 3 && p->form == F_SIZES)) {
		if (p->nrow == 9)
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "a row has too many numbers");
		p->row[p->nrow++] = v;
		return 1;
	}
	return fail(p, TP_ERR_INVALID, "invalid_timeline", "a number where a memory timeline has none");
}

static int on_start_array(void *ctx)
{
	struct timeline_parser *p = ctx;

	if (++p->depth > 3)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "arrays nested deeper than a memory timeline's");
	if (p->depth == 2) {
		p->outer++;
		p->nrow = 0;
	} else if (p->depth == 3) {
		if (p->outer == 2 && p->form == F_UNKNOWN)
			p->form = F_SIZES;
		if (p->form != F_SIZES || p->outer != 2)
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "an array where a number belongs");
		p->nrow = 0;
	}
	return 1;
}

static int on_end_array(void *ctx)
{
	struct timeline_parser *p = ctx;
	struct mem_point *pt;

	if (p->depth == 2 && p->form == F_RAW && !raw_row(p, p->row, p->nrow))
		return 0;
	if (p->depth == 3) {
		/* [0, c0..c7] (the 0 pads PyTorch's cumsum); 8 numbers are taken as c0..c7 */
		if (p->nrow != 9 && p->nrow != 8)
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "a sizes row must have 9 numbers");
		if (!(pt = new_point(p)))
			return 0;
		pt->t_ns = 0;	/* from times, at the end */
		pt->reserved = -1;
		memcpy(pt->cat, p->row + (p->nrow - 8), sizeof(pt->cat));
	}
	p->depth--;
	return 1;
}

static int refuse(void *ctx)
{
	return fail(ctx, TP_ERR_INVALID, "invalid_timeline", "a memory timeline holds only arrays and numbers");
}

static int refuse_str(void *ctx, const unsigned char *s, size_t n)
{
	(void)s, (void)n;
	return refuse(ctx);
}

static int refuse_bool(void *ctx, int b)
{
	(void)b;
	return refuse(ctx);
}

static const struct jtok_callbacks callbacks = {
	.null = refuse,
	.boolean = refuse_bool,
	.number = on_number,
	.string = refuse_str,
	.start_map = refuse,
	.map_key = refuse_str,
	.end_map = refuse,
	.start_array = on_start_array,
	.end_array = on_end_array,
};

struct timeline_parser *timeline_parser_new(uint64_t max_points)
{
	struct timeline_parser *p = tp_calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->max_points = max_points;
	/* on_start_array refuses a fourth level; the tokenizer stops any deeper than that */
	if (!(p->jt = jtok_new(&callbacks, p, MAX_NUMBER, 4))) {
		tp_free(p);
		return NULL;
	}
	return p;
}

void timeline_parser_free(struct timeline_parser *p)
{
	if (!p)
		return;
	jtok_free(p->jt);
	tp_free(p->first.b);
	tp_free(p->pts);
	tp_free(p);
}

/* The tokenizer stopped: say why, unless a callback already did. */
static int status(struct timeline_parser *p, int st)
{
	if (p->rc || st == JTOK_OK)
		return p->rc;
	if (st == JTOK_TOO_LONG)
		tp_fail(p->err, TP_ERR_INVALID, "invalid_timeline",
			"%s too long (over %d bytes; memory timeline, near byte %llu)",
			jtok_error_in_string(p->jt) ? "a string" : "a number", MAX_NUMBER,
			(unsigned long long)jtok_error_at(p->jt));
	else if (st == JTOK_NOMEM)
		return p->rc = tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory");
	else
		tp_fail(p->err, TP_ERR_INVALID, "invalid_json", "invalid JSON at byte %llu: %s",
			(unsigned long long)jtok_error_at(p->jt), jtok_message(p->jt));
	return p->rc = TP_ERR_INVALID;
}

int timeline_parser_feed(struct timeline_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	p->err = err;
	if (p->rc)
		return p->rc;
	return status(p, jtok_feed(p->jt, data, len));
}

static int cmp_point(const void *a, const void *b)
{
	const struct mem_point *x = a, *y = b;

	return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

int timeline_parser_finish(struct timeline_parser *p, const struct mem_point **points, size_t *n,
			   const char **form, struct tp_errbuf *err)
{
	size_t i;
	struct mem_point *pt;

	p->err = err;
	if (p->rc || status(p, jtok_finish(p->jt)))
		return p->rc;
	if (p->form == F_UNKNOWN && p->outer == 1) {
		p->form = F_RAW;	/* one raw row */
		if (!first_as_row(p))
			return p->rc;
	}
	if (p->form == F_RAW) {
		int64_t tmin = -1;
		if (p->have_cur) {
			if (!(pt = new_point(p)))
				return p->rc;
			pt->t_ns = p->cur_t;
			pt->reserved = -1;
			memcpy(pt->cat, p->cats, sizeof(pt->cat));
		}
		/* pre-existing rows (t = -1) are put at the first real time */
		for (i = 0; i < p->npts; i++)
			if (p->pts[i].t_ns > 0 && (tmin < 0 || p->pts[i].t_ns < tmin))
				tmin = p->pts[i].t_ns;
		for (i = 0; i < p->npts; i++)
			if (p->pts[i].t_ns < 0)
				p->pts[i].t_ns = tmin < 0 ? 0 : tmin;
		*form = "raw";
	} else if (p->form == F_SIZES) {
		int64_t tmax = 0;
		size_t at = 0;
		uint64_t prev = 0;
		if (p->outer != 2 || p->first.n != p->npts) {
			tp_fail(err, TP_ERR_INVALID, "invalid_timeline",
				"[times, sizes]: %zu times but %zu rows of sizes", p->first.n, p->npts);
			return p->rc = TP_ERR_INVALID;
		}
		for (i = 0; i < p->npts; i++) {
			int64_t t = next_packed(&p->first, &at, &prev);
			if (t > tmax)
				tmax = t;
		}
		/* PyTorch >= 2.2 writes us (epoch us ~1.7e15), 2.1 wrote ns (~1.7e18) */
		int64_t scale = tmax < 100000000000000000LL ? 1000 : 1;
		at = 0, prev = 0;
		for (i = 0; i < p->npts; i++) {
			int64_t t = next_packed(&p->first, &at, &prev);
			if (__builtin_mul_overflow(t, scale, &p->pts[i].t_ns))
				p->pts[i].t_ns = t < 0 ? INT64_MIN : INT64_MAX;
		}
		*form = "times_sizes";
	} else {
		tp_fail(err, TP_ERR_INVALID, "invalid_timeline", "not a memory timeline export: expected [[t, action, bytes, category], ...] or [times, sizes]");
		return p->rc = TP_ERR_INVALID;
	}
	/* exports are in time order; one that is not is sorted (then equal times keep no order) */
	for (i = 1; i < p->npts && p->pts[i - 1].t_ns <= p->pts[i].t_ns; i++)
		;
	if (i < p->npts)
		qsort(p->pts, p->npts, sizeof(*p->pts), cmp_point);
	*points = p->pts;
	*n = p->npts;
	return TP_OK;
}
