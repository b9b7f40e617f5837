/*
 * evpack.c: the packed event block codec (see evpack.h for the layout).
 */
#include <string.h>

#include "store/evpack.h"

/* ph, have, name, cat, flags, ts, 26 more integers, 2 doubles, arg */
#define EVENT_MAX_BYTES (1 + 5 + 5 + 5 + 1 + 10 + 26 * 10 + 2 * 8 + 5)

/* A block holds the integer fields an event has in bit order, so the codec walks the set bits. */
const uint16_t evpack_int_off[32] = {
#define F(bit, f) [__builtin_ctz(bit)] = offsetof(struct tp_event, f)
	F(TH_DUR, dur_ns),
	F(TH_EXT, ext_id),
	F(TH_CORR, corr),
	F(TH_STREAM, stream),
	F(TH_DEVICE, device),
	F(TH_BYTES, bytes),
	F(TH_SEQ, seq),
	F(TH_FWD_TID, fwd_tid),
	F(TH_FLOW, flow_id),
	F(TH_EV_IDX, ev_idx),
	F(TH_DEV_TYPE, dev_type),
	F(TH_DEV_ID, dev_id),
	F(TH_ADDR, addr),
	F(TH_TOTAL_ALLOC, total_alloc),
	F(TH_TOTAL_RES, total_reserved),
	F(TH_SORT, sort_index),
	F(TH_COLL, coll),
	F(TH_PG, pg),
	F(TH_DTYPE, dtype),
	F(TH_IN_NELEMS, in_nelems),
	F(TH_OUT_NELEMS, out_nelems),
	F(TH_GROUP_SIZE, group_size),
	F(TH_COLL_SEQ, coll_seq),
#undef F
};

/* The bits of evpack_int_off's fields. */
static uint32_t int_bits(void)
{
	uint32_t m = 0;

	for (unsigned b = 0; b < 32; b++)
		if (evpack_int_off[b])
			m |= 1u << b;
	return m;
}

size_t evpack_bound(size_t n)
{
	return n * EVENT_MAX_BYTES;
}

static uint8_t *put_u(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint8_t *put_s(uint8_t *p, int64_t v)
{
	return put_u(p, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static int64_t field(const struct tp_event *e, size_t off)
{
	int64_t v;
	memcpy(&v, (const char *)e + off, sizeof(v));
	return v;
}

size_t evpack_encode(uint8_t *out, const struct tp_event *ev, size_t n, int64_t *min_ts, int64_t *max_end)
{
	uint8_t *p = out;
	int64_t prev = 0;
	uint32_t ints = int_bits();
	size_t i;

	*min_ts = INT64_MAX;
	*max_end = INT64_MIN;
	for (i = 0; i < n; i++) {
		const struct tp_event *e = &ev[i];
		unsigned flags = (e->pid_s ? 1u : 0) | (e->tid_s ? 2u : 0) | (e->arg ? 4u : 0);
		*p++ = (uint8_t)e->ph;
		p = put_u(p, e->have);
		p = put_u(p, e->name);
		p = put_u(p, e->cat);
		*p++ = (uint8_t)flags;
		if (e->have & TH_TS) {
			p = put_s(p, (int64_t)((uint64_t)e->ts_ns - (uint64_t)prev));
			prev = e->ts_ns;
			int64_t end = (e->have & TH_DUR) && e->dur_ns > 0 && e->ts_ns <= INT64_MAX - e->dur_ns
					      ? e->ts_ns + e->dur_ns : e->ts_ns;
			if (e->ts_ns < *min_ts)
				*min_ts = e->ts_ns;
			if (end > *max_end)
				*max_end = end;
		}
		if (e->have & TH_PID)
			p = e->pid_s ? put_u(p, e->pid_sid) : put_s(p, e->pid);
		if (e->have & TH_TID)
			p = e->tid_s ? put_u(p, e->tid_sid) : put_s(p, e->tid);
		for (uint32_t m = e->have & ints; m; m &= m - 1)
			p = put_s(p, field(e, evpack_int_off[__builtin_ctz(m)]));
		if (e->have & TH_BPS) {
			memcpy(p, &e->blocks_per_sm, 8);
			p += 8;
		}
		if (e->have & TH_OCC) {
			memcpy(p, &e->occupancy, 8);
			p += 8;
		}
		if (flags & 4)
			p = put_u(p, e->arg);
	}
	return (size_t)(p - out);
}

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t get_u_long(struct rd *r);

/* A varint: most are one byte, taken without the loop. */
static inline uint64_t get_u(struct rd *r)
{
	if (r->p < r->end && !(*r->p & 0x80))
		return *r->p++;
	return get_u_long(r);
}

static uint64_t get_u_long(struct rd *r)
{
	uint64_t v = 0;
	int shift = 0;

	while (r->p < r->end && shift < 64) {
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
	}
	r->bad = 1;
	return 0;
}

static int64_t get_s(struct rd *r)
{
	uint64_t u = get_u(r);
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static uint32_t get_id(struct rd *r)
{
	uint64_t v = get_u(r);
	if (v > UINT32_MAX)
		r->bad = 1;
	return (uint32_t)v;
}

static double get_d(struct rd *r)
{
	double d = 0;

	if (r->end - r->p < 8) {
		r->bad = 1;
		return 0;
	}
	memcpy(&d, r->p, 8);
	r->p += 8;
	return d;
}

void evpack_dec_init(struct evpack_dec *d, const uint8_t *data, size_t len, size_t n)
{
	*d = (struct evpack_dec){ data, data + len, 0, n };
}

/*
 * *e = 0, in 32-byte stores: the memset this was compiles to rep stos at -O2 and -O3 (GCC
 * 12), whose start-up took a third of the decoder's time (with the loops below: 35-42 ns an
 * event before, 14 after, bench/evpack_bench.c).
 */
static inline void zero_event(struct tp_event *e)
{
	typedef uint64_t v4 __attribute__((vector_size(32), aligned(1), may_alias));
	typedef uint64_t u8 __attribute__((aligned(1), may_alias));
	const v4 z = { 0 };
	size_t o;

	for (o = 0; o + sizeof(v4) <= sizeof(*e); o += sizeof(v4))
		*(v4 *)((char *)e + o) = z;
	for (; o + sizeof(u8) <= sizeof(*e); o += sizeof(u8))
		*(u8 *)((char *)e + o) = 0;
	if (o < sizeof(*e))
		memset((char *)e + o, 0, sizeof(*e) - o);
}

long evpack_dec_next(struct evpack_dec *d, struct tp_event *out, size_t max)
{
	struct rd r = { d->p, d->end, 0 };
	int64_t prev = d->prev;
	uint32_t ints = int_bits();
	size_t i, n = d->left < max ? d->left : max;

	for (i = 0; i < n && !r.bad; i++) {
		struct tp_event *e = &out[i];
		unsigned flags;
		zero_event(e);
		if (r.p >= r.end)
			return -1;
		e->ph = (char)*r.p++;
		e->have = (uint32_t)get_u(&r);
		e->name = get_id(&r);
		e->cat = get_id(&r);
		if (r.p >= r.end)
			return -1;
		flags = *r.p++;
		if (e->have & TH_TS) {
			prev = (int64_t)((uint64_t)prev + (uint64_t)get_s(&r));
			e->ts_ns = prev;
		}
		if (e->have & TH_PID) {
			if (flags & 1)
				e->pid_sid = get_id(&r);
			else
				e->pid = get_s(&r);
		}
		if (e->have & TH_TID) {
			if (flags & 2)
				e->tid_sid = get_id(&r);
			else
				e->tid = get_s(&r);
		}
		for (uint32_t m = e->have & ints; m; m &= m - 1) {
			int64_t v = get_s(&r);
			memcpy((char *)e + evpack_int_off[__builtin_ctz(m)], &v, sizeof(v));
		}
		if (e->have & TH_BPS)
			e->blocks_per_sm = get_d(&r);
		if (e->have & TH_OCC)
			e->occupancy = get_d(&r);
		if (flags & 4)
			e->arg = get_id(&r);
	}
	if (r.bad || i < n)
		return -1;
	d->p = r.p;
	d->prev = prev;
	d->left -= n;
	return (long)n;
}

int evpack_decode(const uint8_t *data, size_t len, size_t n, struct tp_event *out)
{
	struct evpack_dec d;

	evpack_dec_init(&d, data, len, n);
	return evpack_dec_next(&d, out, n) == (long)n ? 0 : -1;
}

/* Past one varint; r->bad when it runs off the end. */
static void skip_u(struct rd *r)
{
	while (r->p < r->end && *r->p & 0x80)
		r->p++;
	if (r->p < r->end)
		r->p++;
	else
		r->bad = 1;
}

int evpack_times(const uint8_t *data, size_t len, size_t n, struct evpack_time *out, size_t *m)
{
	struct rd r = { data, data + len, 0 };
	uint32_t ints = int_bits();
	int64_t prev = 0;
	size_t i, got = 0;

	for (i = 0; i < n && !r.bad; i++) {
		struct evpack_time *t = &out[got];
		uint32_t have;
		unsigned flags, skip;
		if (r.end - r.p < 1)
			return -1;
		t->ph = (char)*r.p++;
		t->have = have = (uint32_t)get_u(&r);
		skip_u(&r);	/* name */
		skip_u(&r);	/* cat */
		if (r.p >= r.end)
			return -1;
		flags = *r.p++;
		if (have & TH_TS)
			t->ts_ns = prev = (int64_t)((uint64_t)prev + (uint64_t)get_s(&r));
		if (have & TH_PID)
			skip_u(&r);
		if (have & TH_TID)
			skip_u(&r);
		t->dur_ns = have & TH_DUR ? get_s(&r) : 0;	/* the first of evpack_int_off's */
		skip = (unsigned)__builtin_popcount(have & ints & ~(uint32_t)TH_DUR);
		while (skip--)
			skip_u(&r);
		skip = (have & TH_BPS ? 8u : 0) + (have & TH_OCC ? 8u : 0);
		if ((size_t)(r.end - r.p) < skip)
			return -1;
		r.p += skip;
		if (flags & 4)
			skip_u(&r);
		got += !!(have & TH_TS);
	}
	*m = got;
	return r.bad || i < n ? -1 : 0;
}

size_t ptpack_bound(size_t n)
{
	return n * MEM_POINT_COLS * 10;
}

size_t ptpack_encode(uint8_t *out, const int64_t (*rows)[MEM_POINT_COLS], const uint8_t *reserved_null, size_t n)
{
	uint64_t prev[MEM_POINT_COLS] = { 0 };
	uint8_t *p = out;

	for (size_t i = 0; i < n; i++)
		for (int k = 0; k < MEM_POINT_COLS; k++) {
			uint64_t v = (uint64_t)rows[i][k];
			if (k == MEM_COL_RESERVED)
				v = reserved_null[i] ? 0 : v + 1;
			p = put_s(p, (int64_t)(v - prev[k]));
			prev[k] = v;
		}
	return (size_t)(p - out);
}

int ptpack_decode(const uint8_t *data, size_t len, size_t n, int64_t (*rows)[MEM_POINT_COLS], uint8_t *reserved_null)
{
	struct rd r = { data, data + len, 0 };
	uint64_t prev[MEM_POINT_COLS] = { 0 };

	for (size_t i = 0; i < n && !r.bad; i++)
		for (int k = 0; k < MEM_POINT_COLS; k++) {
			uint64_t v = prev[k] + (uint64_t)get_s(&r);
			prev[k] = v;
			if (k == MEM_COL_RESERVED) {
				reserved_null[i] = !v;
				v = v ? v - 1 : 0;
			}
			rows[i][k] = (int64_t)v;
		}
	return r.bad || r.p != r.end ? -1 : 0;
}
