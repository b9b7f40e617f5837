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
 * The points are held packed too (struct packed, put_point): for each, the
 * difference of its time (raw form), a byte that says which categories
 * changed and their differences, so that a point costs what changed in it,
 * not 80 bytes (a 970 KB gzip of raw rows whose t went 0, 1, 0, 1 made 23
 * million points and held 1.6 GiB: issue 50); timeline_replay makes them
 * again. PyTorch writes both forms in time order; one that is not is
 * unpacked and sorted, 80 bytes a point, at most SORT_MAX points (413 past).
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
#define SORT_MAX (1u << 20)	/* points of an export out of time order: sorted unpacked, 80 MiB */

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
	/* out: npts points packed (put_point), or once finished out of time order, sorted */
	struct packed pts;
	size_t npts;
	int64_t last_t, last_cat[MEM_NCAT];	/* the point before, for the differences */
	int64_t tmin;			/* raw form: the first time > 0 (-1: none yet) */
	int64_t scale;			/* sizes form: times' scale to ns */
	struct mem_point *sorted;
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

/* Room for n more bytes in a. */
static int room(struct packed *a, size_t n)
{
	if (a->cap - a->len < n) {
		size_t cap = a->cap ? a->cap * 2 : 1024;
		uint8_t *nb = tp_realloc(a->b, cap);
		if (!nb)
			return -1;
		a->b = nb;
		a->cap = cap;
	}
	return 0;
}

/* v - last as a zigzag varint (room for 10 bytes made by the caller) */
static void put_diff(struct packed *a, int64_t v, int64_t last)
{
	uint64_t d = (uint64_t)v - (uint64_t)last, z = d << 1 ^ (0 - (d >> 63));

	do {
		a->b[a->len++] = (uint8_t)(z & 0x7f) | (z > 0x7f ? 0x80 : 0);
		z >>= 7;
	} while (z);
}

static int push(struct packed *a, int64_t v)
{
	if (room(a, 10))
		return -1;
	put_diff(a, v, (int64_t)a->last);
	a->last = (uint64_t)v;
	a->n++;
	return 0;
}

/* The number whose difference from last is next in a, from *at. */
static int64_t get_diff(const struct packed *a, size_t *at, int64_t last)
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
	return (int64_t)((uint64_t)last + (z >> 1 ^ (0 - (z & 1))));
}

/* The next number of a, from *at (a cursor from 0) and *prev (from 0). */
static int64_t next_packed(const struct packed *a, size_t *at, uint64_t *prev)
{
	*prev = (uint64_t)get_diff(a, at, (int64_t)*prev);
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

/*
 * A point, packed: in the raw form its time's difference from the point
 * before; a byte whose bit c says category c changed; the changed ones'
 * differences. 0: stopped (the cap, or out of memory).
 */
static int put_point(struct timeline_parser *p, int64_t t, const int64_t *cat)
{
	uint8_t mask = 0;
	size_t at;

	if (p->npts >= p->max_points)
		return fail(p, TP_ERR_TOOBIG, "too_many_points", "more time points than the cap");
	if (room(&p->pts, 11 + 10 * MEM_NCAT))
		return fail(p, TP_ERR_NOMEM, NULL, "out of memory");
	if (p->form == F_RAW) {
		put_diff(&p->pts, t, p->last_t);
		p->last_t = t;
		if (t > 0 && (p->tmin < 0 || t < p->tmin))
			p->tmin = t;
	}
	at = p->pts.len++;
	for (int c = 0; c < MEM_NCAT; c++)
		if (cat[c] != p->last_cat[c]) {
			mask |= (uint8_t)(1u << c);
			put_diff(&p->pts, cat[c], p->last_cat[c]);
			p->last_cat[c] = cat[c];
		}
	p->pts.b[at] = mask;
	p->npts++;
	return 1;
}

/* Point i's time in the raw form as stored: pre-existing rows (t < 0) at the first real time. */
static int64_t raw_time(const struct timeline_parser *p, int64_t t)
{
	return t < 0 ? (p->tmin < 0 ? 0 : p->tmin) : t;
}

int timeline_replay(const void *src, mem_point_fn fn, void *arg)
{
	const struct timeline_parser *p = src;
	struct mem_point pt = { .reserved = -1 };
	size_t at = 0, tat = 0;
	uint64_t tprev = 0;
	int64_t t = 0;
	int rc = 0;

	for (size_t i = 0; i < p->npts && !rc; i++) {
		if (p->sorted) {
			rc = fn(arg, &p->sorted[i]);
			continue;
		}
		if (p->form == F_RAW) {
			t = get_diff(&p->pts, &at, t);
			pt.t_ns = raw_time(p, t);
		} else {
			t = next_packed(&p->first, &tat, &tprev);
			if (__builtin_mul_overflow(t, p->scale, &pt.t_ns))
				pt.t_ns = t < 0 ? INT64_MIN : INT64_MAX;
		}
		uint8_t mask = p->pts.b[at++];
		for (int c = 0; c < MEM_NCAT; c++)
			if (mask & (1u << c))
				pt.cat[c] = get_diff(&p->pts, &at, pt.cat[c]);
		rc = fn(arg, &pt);
	}
	return rc;
}

/* One raw row: a new point when t changes (HTA's MemoryAnalysis._process_raw_events). */
static int raw_row(struct timeline_parser *p, const int64_t *r, size_t n)
{
	if (n != 4)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "a raw row must be [t_ns, action, bytes, category]");
	if (r[3] < 0 || r[3] >= MEM_NCAT)
		return fail(p, TP_ERR_INVALID, "invalid_timeline", "a category must be 0 to 7");
	if (p->have_cur && r[0] != p->cur_t && !put_point(p, p->cur_t, p->cats))
		return 0;
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

	if (p->depth == 2 && p->form == F_RAW && !raw_row(p, p->row, p->nrow))
		return 0;
	if (p->depth == 3) {
		/* [0, c0..c7] (the 0 pads PyTorch's cumsum); 8 numbers are taken as c0..c7 */
		if (p->nrow != 9 && p->nrow != 8)
			return fail(p, TP_ERR_INVALID, "invalid_timeline", "a sizes row must have 9 numbers");
		if (!put_point(p, 0, p->row + (p->nrow - 8)))	/* its time from times, at the end */
			return 0;
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
	p->tmin = -1;
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
	tp_free(p->pts.b);
	tp_free(p->sorted);
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

/* a point of the replay into an array (the sort of an export out of time order) */
static int take_point(void *arg, const struct mem_point *pt)
{
	struct mem_point **at = arg;

	*(*at)++ = *pt;
	return 0;
}

/* the replay's points go back in time (*last from INT64_MIN) */
static int went_back(void *arg, const struct mem_point *pt)
{
	int64_t *last = arg;

	if (pt->t_ns < *last)
		return 1;
	*last = pt->t_ns;
	return 0;
}

int timeline_parser_finish(struct timeline_parser *p, size_t *n, const char **form, struct tp_errbuf *err)
{
	size_t i;

	p->err = err;
	if (p->rc || status(p, jtok_finish(p->jt)))
		return p->rc;
	if (p->form == F_UNKNOWN && p->outer == 1) {
		p->form = F_RAW;	/* one raw row */
		if (!first_as_row(p))
			return p->rc;
	}
	if (p->form == F_RAW) {
		if (p->have_cur && !put_point(p, p->cur_t, p->cats))
			return p->rc;
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
		p->scale = tmax < 100000000000000000LL ? 1000 : 1;
		*form = "times_sizes";
	} else {
		tp_fail(err, TP_ERR_INVALID, "invalid_timeline", "not a memory timeline export: expected [[t, action, bytes, category], ...] or [times, sizes]");
		return p->rc = TP_ERR_INVALID;
	}
	/* exports are in time order; one that is not is sorted (then equal times keep no order) */
	if (timeline_replay(p, went_back, &(int64_t){ INT64_MIN })) {
		struct mem_point *all, *at;
		if (p->npts > SORT_MAX) {
			tp_fail(err, TP_ERR_TOOBIG, "too_many_points",
				"a memory timeline out of time order (PyTorch writes them in order) is sorted in memory,"
				" at most %u points; this one has %zu", SORT_MAX, p->npts);
			return p->rc = TP_ERR_TOOBIG;
		}
		if (!(at = all = tp_malloc(p->npts * sizeof(*all) + 1)))
			return p->rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		timeline_replay(p, take_point, &at);
		qsort(all, p->npts, sizeof(*all), cmp_point);
		tp_free(p->pts.b);
		p->pts = (struct packed){ 0 };
		p->sorted = all;	/* the replay's from now on */
	}
	*n = p->npts;
	return TP_OK;
}
