/* check_evpack.c: the packed event block codec (server/store/evpack.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/evpack.h"
#include "suites.h"

static void fill(struct tp_event *e, size_t n, unsigned seed)
{
	static const int64_t edge[] = { 0, 1, -1, INT64_MAX, INT64_MIN, 1669783687464181000LL, 127, 128,
					-64, -65, 4294967296LL };
	srand(seed);
	for (size_t i = 0; i < n; i++) {
		memset(&e[i], 0, sizeof(e[i]));
		e[i].ph = "XiMsfBE"[rand() % 7];
		e[i].have = (uint32_t)rand() & ((1u << 28) - 1);
		e[i].name = (uint32_t)rand();
		e[i].cat = (uint32_t)(rand() % 3);
		e[i].ts_ns = rand() % 3 ? 1669783687464181000LL + rand() : edge[rand() % 11];
		e[i].dur_ns = edge[rand() % 11];
		if (rand() % 4 == 0)
			e[i].pid_sid = (uint32_t)rand() | 1, e[i].pid_s = "Spans";
		else
			e[i].pid = edge[rand() % 11];
		if (rand() % 4 == 0)
			e[i].tid_sid = UINT32_MAX, e[i].tid_s = "stream 7";
		else
			e[i].tid = rand();
		e[i].ext_id = edge[rand() % 11];
		e[i].corr = rand();
		e[i].stream = 7;
		e[i].device = -1;
		e[i].bytes = -5242880;
		e[i].seq = edge[rand() % 11];
		e[i].fwd_tid = 3;
		e[i].flow_id = INT64_MIN;
		e[i].blocks_per_sm = rand() % 2 ? INFINITY : 0.25;
		e[i].occupancy = 50;
		e[i].ev_idx = 42070;
		e[i].dev_type = 1;
		e[i].dev_id = -1;
		e[i].addr = 139926520725504LL;
		e[i].total_alloc = INT64_MAX;
		e[i].total_reserved = 12782141440LL;
		e[i].sort_index = edge[rand() % 11];
		e[i].arg = rand() % 2 ? (uint32_t)rand() : 0;
		e[i].coll = rand();
		e[i].pg = UINT32_MAX;
		e[i].dtype = 1;
		e[i].in_nelems = edge[rand() % 11];
		e[i].out_nelems = 2049000;
		e[i].group_size = 128;
		e[i].coll_seq = edge[rand() % 11];
	}
}

/* what must come back: the fields `have` names, string pid/tid as ids */
static void same(const struct tp_event *a, const struct tp_event *b)
{
	ck_assert_int_eq(a->ph, b->ph);
	ck_assert_uint_eq(a->have, b->have);
	ck_assert_uint_eq(a->name, b->name);
	ck_assert_uint_eq(a->cat, b->cat);
	ck_assert_uint_eq(a->arg, b->arg);
#define F(bit, f) if (a->have & (bit)) ck_assert_int_eq(a->f, b->f)
	F(TH_TS, ts_ns); F(TH_DUR, dur_ns); F(TH_EXT, ext_id); F(TH_CORR, corr); F(TH_STREAM, stream);
	F(TH_DEVICE, device); F(TH_BYTES, bytes); F(TH_SEQ, seq); F(TH_FWD_TID, fwd_tid);
	F(TH_FLOW, flow_id); F(TH_EV_IDX, ev_idx); F(TH_DEV_TYPE, dev_type); F(TH_DEV_ID, dev_id);
	F(TH_ADDR, addr); F(TH_TOTAL_ALLOC, total_alloc); F(TH_TOTAL_RES, total_reserved);
	F(TH_SORT, sort_index); F(TH_COLL, coll); F(TH_PG, pg); F(TH_DTYPE, dtype); F(TH_IN_NELEMS, in_nelems);
	F(TH_OUT_NELEMS, out_nelems); F(TH_GROUP_SIZE, group_size); F(TH_COLL_SEQ, coll_seq);
#undef F
	if (a->have & TH_PID) {
		if (a->pid_s)
			ck_assert_uint_eq(a->pid_sid, b->pid_sid);
		else
			ck_assert_int_eq(a->pid, b->pid);
	}
	if (a->have & TH_TID) {
		if (a->tid_s)
			ck_assert_uint_eq(a->tid_sid, b->tid_sid);
		else
			ck_assert_int_eq(a->tid, b->tid);
	}
	if (a->have & TH_BPS)
		ck_assert(a->blocks_per_sm == b->blocks_per_sm);
	if (a->have & TH_OCC)
		ck_assert(a->occupancy == b->occupancy);
}

START_TEST(test_round_trip)
{
	size_t n = 5000, len, i;
	struct tp_event *in = malloc(n * sizeof(*in)), *out = malloc(n * sizeof(*out));
	uint8_t *buf = malloc(evpack_bound(n));
	int64_t min_ts, max_end, want_min = INT64_MAX;
	struct evpack_time *ts = malloc(n * sizeof(*ts));
	size_t m, k = 0;

	fill(in, n, (unsigned)_i + 1);
	len = evpack_encode(buf, in, n, &min_ts, &max_end);
	ck_assert_uint_le(len, evpack_bound(n));
	ck_assert_int_eq(evpack_decode(buf, len, n, out), 0);
	/* the times alone: of the events that have one, in order, with their phase, fields and dur */
	ck_assert_int_eq(evpack_times(buf, len, n, ts, &m), 0);
	for (i = 0; i < n; i++) {
		same(&in[i], &out[i]);
		if (in[i].have & TH_TS) {
			ck_assert_uint_lt(k, m);
			ck_assert_int_eq(ts[k].ts_ns, in[i].ts_ns);
			ck_assert_int_eq(ts[k].dur_ns, in[i].have & TH_DUR ? in[i].dur_ns : 0);
			ck_assert_uint_eq(ts[k].have, in[i].have);
			ck_assert_int_eq(ts[k++].ph, in[i].ph);
		}
		if ((in[i].have & TH_TS) && in[i].ts_ns < want_min)
			want_min = in[i].ts_ns;
	}
	ck_assert_uint_eq(k, m);
	ck_assert_uint_gt(m, 0);
	ck_assert_uint_lt(m, n);
	ck_assert_int_eq(min_ts, want_min);
	ck_assert_int_ge(max_end, min_ts);
	free(ts);
	free(in);
	free(out);
	free(buf);
}
END_TEST

START_TEST(test_malformed_blocks)
{
	size_t n = 200, len, cut;
	struct tp_event *in = malloc(n * sizeof(*in)), *out = malloc((n + 1) * sizeof(*out));
	uint8_t *buf = malloc(evpack_bound(n));
	int64_t a, b;
	struct evpack_time ts[201];
	size_t m;

	fill(in, n, 99);
	len = evpack_encode(buf, in, n, &a, &b);
	/* every truncation fails cleanly, never reading past the end (ASan watches) */
	for (cut = 0; cut < len; cut += 1 + cut / 8) {
		uint8_t *t = malloc(cut ? cut : 1);
		memcpy(t, buf, cut);
		ck_assert_int_eq(evpack_decode(t, cut, n, out), -1);
		ck_assert_int_eq(evpack_times(t, cut, n, ts, &m), -1);
		free(t);
	}
	/* asking for more events than there are fails too */
	ck_assert_int_eq(evpack_decode(buf, len, n + 1, out), -1);
	ck_assert_int_eq(evpack_times(buf, len, n + 1, ts, &m), -1);
	memset(buf, 0xff, 64);
	ck_assert_int_eq(evpack_decode(buf, 64, n, out), -1);
	ck_assert_int_eq(evpack_times(buf, 64, n, ts, &m), -1);
	free(in);
	free(out);
	free(buf);
}
END_TEST

/* A block given a few events at a time (evpack_dec_next) is the block decoded at once. */
START_TEST(test_slices)
{
	size_t n = 3000, len, at = 0;
	struct tp_event *in = malloc(n * sizeof(*in)), *out = malloc(n * sizeof(*out)), part[7];
	uint8_t *buf = malloc(evpack_bound(n));
	struct evpack_dec d;
	int64_t a, b;
	long got;

	fill(in, n, 7);
	len = evpack_encode(buf, in, n, &a, &b);
	evpack_dec_init(&d, buf, len, n);
	while ((got = evpack_dec_next(&d, part, 1 + at % 7)) > 0) {
		ck_assert_uint_le(at + (size_t)got, n);
		memcpy(out + at, part, (size_t)got * sizeof(*part));
		at += (size_t)got;
	}
	ck_assert_int_eq(got, 0);
	ck_assert_uint_eq(at, n);
	for (size_t i = 0; i < n; i++)
		same(&in[i], &out[i]);
	/* cut short: the slices before the cut, then -1, and the decoder left where it was */
	evpack_dec_init(&d, buf, len / 2, n);
	at = 0;
	while ((got = evpack_dec_next(&d, part, 7)) > 0)
		at += (size_t)got;
	ck_assert_int_eq(got, -1);
	ck_assert_uint_gt(at, 0);
	ck_assert_uint_lt(at, n);
	ck_assert_uint_eq(d.left, n - at);
	ck_assert_int_eq(evpack_dec_next(&d, part, 7), -1);
	free(in);
	free(out);
	free(buf);
}
END_TEST

/* Memory points: extremes of every column come back, and damaged blocks are refused. */
START_TEST(test_points)
{
	enum { N = 6 };
	static const int64_t v[N] = { 0, -1, INT64_MIN, INT64_MAX, 1, 123456789012345LL };
	int64_t rows[N][MEM_POINT_COLS], back[N][MEM_POINT_COLS];
	uint8_t nul[N], bnul[N], buf[N * MEM_POINT_COLS * 10];
	size_t len;

	for (int i = 0; i < N; i++) {
		for (int k = 0; k < MEM_POINT_COLS; k++)
			rows[i][k] = v[(i + k) % N];
		nul[i] = i % 3 == 0;
		if (nul[i])
			rows[i][MEM_COL_RESERVED] = 0;	/* unknown reads back as 0 */
	}
	ck_assert_uint_le(ptpack_bound(N), sizeof(buf));
	len = ptpack_encode(buf, (const int64_t (*)[MEM_POINT_COLS])rows, nul, N);
	ck_assert_int_eq(ptpack_decode(buf, len, N, back, bnul), 0);
	ck_assert_mem_eq(back, rows, sizeof(rows));
	ck_assert_mem_eq(bnul, nul, sizeof(nul));
	/* one byte short, one too many, too few points asked, a varint that never ends */
	ck_assert_int_eq(ptpack_decode(buf, len - 1, N, back, bnul), -1);
	buf[len] = 0;
	ck_assert_int_eq(ptpack_decode(buf, len + 1, N, back, bnul), -1);
	ck_assert_int_eq(ptpack_decode(buf, len, N - 1, back, bnul), -1);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_int_eq(ptpack_decode(buf, sizeof(buf), 1, back, bnul), -1);
}
END_TEST

Suite *suite_evpack(void)
{
	Suite *s = suite_create("evpack");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip, 0, 4);
	tcase_add_test(tc, test_malformed_blocks);
	tcase_add_test(tc, test_slices);
	tcase_add_test(tc, test_points);
	suite_add_tcase(s, tc);
	return s;
}
