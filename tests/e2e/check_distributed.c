/*
 * check_distributed.c: GET /api/v1/runs/{run}/distributed on the real
 * server: synthetic 2- and 4-rank runs written here with answers known by
 * construction (times exact to the ns, percentages to 0.1), the same run
 * uploaded in chunks, the real hta_sampled rank 0 / rank 1 pair with figures
 * computed from the files in Python (below), and bad parameters.
 */
#define _GNU_SOURCE	/* open_memstream */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	ck_assert_int_eq(tu_server_start(&srv, NULL), 0);
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

static json_t *get(const char *path, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s: %ld, expected %ld: %s", path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* ---- a trace written event by event (times in integer us, so ns are exact) ---- */

struct tr {
	FILE *f;
	char *buf;
	size_t len;
	int n;
};

/* correlation ids, increasing across a process's chunks as CUPTI's do */
static long corr_next = 100;

/* the GPU's name in deviceProperties (upload_two's); NULL: none */
static const char *tr_device;

static void tr_begin(struct tr *t, int rank, int world)
{
	memset(t, 0, sizeof(*t));
	t->f = open_memstream(&t->buf, &t->len);
	ck_assert_ptr_nonnull(t->f);
	fprintf(t->f, "{\"schemaVersion\": 1, \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": %d, \"world_size\": %d},",
		rank, world);
	if (tr_device)
		fprintf(t->f, " \"deviceProperties\": [{\"id\": 0, \"name\": \"%s\", \"totalGlobalMem\": 85899345920}],",
			tr_device);
	fprintf(t->f, " \"traceEvents\": [");
}

static void tr_ev(struct tr *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tr_ev(struct tr *t, const char *fmt, ...)
{
	va_list ap;

	fputs(t->n++ ? ",\n" : "\n", t->f);
	va_start(ap, fmt);
	vfprintf(t->f, fmt, ap);
	va_end(ap);
}

/* a host span on the main thread */
static void tr_host(struct tr *t, const char *cat, const char *name, long ts, long dur, const char *args)
{
	tr_ev(t, "{\"ph\": \"X\", \"cat\": \"%s\", \"name\": \"%s\", \"pid\": 1, \"tid\": 1, \"ts\": %ld, \"dur\": %ld,"
	      " \"args\": {%s}}", cat, name, ts, dur, args ? args : "");
}

/* cudaLaunchKernel at ts (5 us) and its kernel on stream at [ks, ks + kdur) */
static void tr_launch(struct tr *t, long ts, const char *kernel, int stream, long ks, long kdur, const char *kargs)
{
	long c = ++corr_next;

	tr_ev(t, "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1,"
	      " \"ts\": %ld, \"dur\": 5, \"args\": {\"correlation\": %ld}}", ts, c);
	tr_ev(t, "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"%s\", \"pid\": 0, \"tid\": %d, \"ts\": %ld, \"dur\": %ld,"
	      " \"args\": {\"device\": 0, \"stream\": %d, \"correlation\": %ld%s%s}}", kernel, stream, ks, kdur, stream, c,
	      kargs ? ", " : "", kargs ? kargs : "");
}

static void tr_step(struct tr *t, int n, long ts, long dur)
{
	char name[32];

	snprintf(name, sizeof(name), "ProfilerStep#%d", n);
	tr_host(t, "user_annotation", name, ts, dur, NULL);
}

static void tr_upload(struct tr *t, const char *run, const char *name)
{
	fputs("\n]}\n", t->f);
	fclose(t->f);
	tu_upload(&srv, run, name, t->buf, t->len);
	free(t->buf);
}

#define AR_KERNEL "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"
#define AG_KERNEL "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
#define MM_KERNEL "volta_sgemm_128x64_nn"

/*
 * Two ranks, one step each (rank 0 [1000, 2000) us, rank 1 [1000, 2100) us):
 * a computation kernel [1100, 1400) on both; an all_reduce of 1048576 Float
 * (c10d::allreduce_ > record_param_comms > nccl:all_reduce > launch) whose
 * kernel is partly under it on rank 0 ([1300, 1500)) and wholly on rank 1
 * ([1150, 1350)), launched at 1050 on rank 0 and 1080 on rank 1 (rank 1 is
 * 30 us late); then an all_gather (In 1000, Out 2000 BFloat16) at [1700,
 * 1800), not overlapped, launched at 1600 on rank 0 and 1590 on rank 1
 * (rank 0 is 10 us late).
 */
static void upload_two(void)
{
	static const char ar_args[] = "\"Collective name\": \"allreduce\", \"Process Group Name\": \"0\","
		" \"In msg nelems\": 1048576, \"Out msg nelems\": 1048576, \"dtype\": \"Float\", \"Group size\": 2";
	static const char ag_args[] = "\"Collective name\": \"_allgather_base\", \"Process Group Name\": \"0\","
		" \"In msg nelems\": 1000, \"Out msg nelems\": 2000, \"dtype\": \"BFloat16\", \"Group size\": 2";
	struct tr t;

	for (int rank = 0; rank < 2; rank++) {
		long ar = rank ? 1080 : 1050, ag = rank ? 1590 : 1600;
		tr_begin(&t, rank, 2);
		tr_step(&t, 1, 1000, rank ? 1100 : 1000);
		tr_host(&t, "cpu_op", "aten::mm", 1005, 20, NULL);
		tr_launch(&t, 1010, MM_KERNEL, 7, 1100, 300, NULL);
		tr_host(&t, "cpu_op", "c10d::allreduce_", ar, 30, NULL);
		tr_host(&t, "cpu_op", "record_param_comms", ar + 2, 26, ar_args);
		tr_host(&t, "user_annotation", "nccl:all_reduce", ar + 4, 20, NULL);
		tr_launch(&t, ar + 6, AR_KERNEL, 9, rank ? 1150 : 1300, 200, NULL);
		tr_host(&t, "cpu_op", "record_param_comms", ag, 30, ag_args);
		tr_host(&t, "user_annotation", "nccl:_all_gather_base", ag + 2, 20, NULL);
		tr_launch(&t, ag + 4, AG_KERNEL, 9, 1700, 100, NULL);
		tr_upload(&t, "two", rank ? "rank1.json" : "rank0.json");
	}
}

static json_t *member(json_t *arr, const char *key, json_int_t v)
{
	size_t i;
	json_t *o;

	json_array_foreach(arr, i, o)
		if (json_integer_value(json_object_get(o, key)) == v)
			return o;
	ck_abort_msg("no %s %lld", key, (long long)v);
	return NULL;
}

static json_int_t ival(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

static double rval(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_number(v), "%s is not a number", key);
	return json_number_value(v);
}

/* the collective of rank and kind */
static json_t *coll(json_t *body, int rank, const char *kind)
{
	size_t i;
	json_t *o;

	json_array_foreach(json_object_get(body, "collectives"), i, o)
		if (ival(o, "rank") == rank && !strcmp(json_string_value(json_object_get(o, "kind")), kind))
			return o;
	ck_abort_msg("no %s on rank %d", kind, rank);
	return NULL;
}

START_TEST(test_two_ranks)
{
	json_t *j, *r0, *r1, *s, *c, *st, *by, *in;

	upload_two();
	j = get("/api/v1/runs/two/distributed", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 2);
	ck_assert(json_is_null(json_object_get(j, "step")));

	/* rank 0: compute 300 us, the all_reduce's [1400, 1500), the all_gather's 100 us and the host's
	 * nccl:all_reduce [1054, 1074) (torch-tb-profiler's communication where no GPU work runs) exposed,
	 * 100 us of kernels overlapped; the host spans cover 20 + 5 + 30 + 30 us outside the kernels: idle
	 * 1000 - 580 */
	r0 = member(json_object_get(j, "ranks"), "rank", 0);
	s = json_array_get(json_object_get(r0, "steps"), 0);
	ck_assert_int_eq(ival(s, "step"), 1);
	ck_assert_int_eq(ival(s, "dur_ns"), 1000000);
	ck_assert_int_eq(ival(s, "compute_ns"), 300000);
	ck_assert_int_eq(ival(s, "communication_ns"), 220000);
	ck_assert_int_eq(ival(s, "overlap_ns"), 100000);
	ck_assert_int_eq(ival(s, "idle_ns"), 420000);
	ck_assert_double_eq_tol(rval(s, "overlap_pct"), 100.0 / 3, 0.05);
	ck_assert_double_eq_tol(rval(json_object_get(r0, "total"), "exposed_communication_pct"), 22.0, 0.05);
	/* rank 1: the all_reduce wholly under the computation; its c10d span [1080, 1110) runs into the
	 * kernel's [1100, ...): host 20 + 20 + 30 us outside kernels, GPU 300 + 100: idle 1100 - 470; its
	 * nccl:all_reduce [1084, 1104) is 16 us of exposed communication */
	r1 = member(json_object_get(j, "ranks"), "rank", 1);
	s = json_array_get(json_object_get(r1, "steps"), 0);
	ck_assert_int_eq(ival(s, "dur_ns"), 1100000);
	ck_assert_int_eq(ival(s, "compute_ns"), 300000);
	ck_assert_int_eq(ival(s, "communication_ns"), 116000);
	ck_assert_int_eq(ival(s, "overlap_ns"), 200000);
	ck_assert_int_eq(ival(s, "idle_ns"), 630000);
	ck_assert_double_eq_tol(rval(s, "overlap_pct"), 200.0 / 3, 0.05);

	/* collectives: 4 MiB in 200 us = 20.97152 GB/s, busbw x 2(2-1)/2; 4000 B in 100 us, busbw x 1/2 */
	for (int rank = 0; rank < 2; rank++) {
		c = coll(j, rank, "all_reduce");
		ck_assert_str_eq(json_string_value(json_object_get(c, "pg")), "0");
		ck_assert_int_eq(ival(c, "group_size"), 2);
		ck_assert_int_eq(ival(c, "calls"), 1);
		ck_assert_int_eq(ival(c, "bytes"), 4194304);
		ck_assert_int_eq(ival(c, "time_ns"), 200000);
		ck_assert_double_eq_tol(rval(c, "algbw_gbps"), 20.97152, 1e-9);
		ck_assert_double_eq_tol(rval(c, "busbw_gbps"), 20.97152, 1e-9);
		c = coll(j, rank, "all_gather");
		ck_assert_int_eq(ival(c, "bytes"), 4000);
		ck_assert_int_eq(ival(c, "time_ns"), 100000);
		ck_assert_double_eq_tol(rval(c, "algbw_gbps"), 0.04, 1e-12);
		ck_assert_double_eq_tol(rval(c, "busbw_gbps"), 0.02, 1e-12);
	}
	ck_assert_int_eq(json_array_size(json_object_get(j, "collectives")), 4);

	/* stragglers: the all_reduce waits 30 us for rank 1, the all_gather 10 us for rank 0 */
	st = json_object_get(j, "stragglers");
	ck_assert_int_eq(ival(st, "matched"), 2);
	in = json_array_get(json_object_get(st, "instances"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(in, "kind")), "all_reduce");
	ck_assert_int_eq(ival(in, "last_rank"), 1);
	ck_assert_int_eq(ival(in, "skew_ns"), 30000);
	ck_assert_int_eq(ival(in, "order"), 0);
	ck_assert(json_is_null(json_object_get(in, "seq")));
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 0), "wait_ns"), 30000);
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 0), "launch_ns"), 1050000);
	in = json_array_get(json_object_get(st, "instances"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(in, "kind")), "all_gather");
	ck_assert_int_eq(ival(in, "last_rank"), 0);
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 1), "wait_ns"), 10000);
	by = json_object_get(st, "by_rank");
	for (int rank = 0; rank < 2; rank++) {
		json_t *b = member(by, "rank", rank);
		ck_assert_int_eq(ival(b, "matched"), 2);
		ck_assert_int_eq(ival(b, "last_arrivals"), 1);
		ck_assert_double_eq_tol(rval(b, "last_arrival_pct"), 50.0, 0.05);
		ck_assert_int_eq(ival(b, "wait_caused_ns"), rank ? 30000 : 10000);
		ck_assert_int_eq(ival(b, "wait_ns"), rank ? 10000 : 30000);
	}
	s = json_array_get(json_object_get(st, "steps"), 0);
	ck_assert_int_eq(ival(s, "step"), 1);
	ck_assert_int_eq(ival(s, "slowest_rank"), 1);
	ck_assert_int_eq(ival(s, "dur_ns"), 1100000);
	ck_assert_int_eq(ival(s, "fastest_rank"), 0);
	json_decref(j);
}
END_TEST

/*
 * Four ranks, two steps ([1000, 2000) and [2000, 3000) us; rank 2's second
 * [2000, 3200)), three all_reduce of 256 Half in group "7" of 4, matched by
 * Seq: rank 3's trace starts after seq 10 (order would pair its first with
 * the others' first). Launches (us):
 *           r0    r1    r2    r3
 *   seq 10  1100  1102  1150  -
 *   seq 11  1300  1300  1301  1306
 *   seq 12  2100  2110  2160  2105
 * Rank 3 writes the args on its kernels (newer PyTorch), the others on
 * record_param_comms. Each kernel runs 20 us, from 30 us after the last
 * rank's launch: a collective's kernels end together on every rank, which
 * is what the clocks are aligned on (they are aligned already: offset 0).
 * Before each launch a top-level "prep" operator ends 5 us before it,
 * 35 us long on rank 2 and 10 us on the others.
 */
static const long launches[3][4] = { { 1100, 1102, 1150, -1 }, { 1300, 1300, 1301, 1306 }, { 2100, 2110, 2160, 2105 } };

static void four_rank(struct tr *t, int rank, int from, int to)
{
	char args[512];

	for (int k = from; k < to; k++) {
		long l = launches[k][rank], last = 0;
		if (l < 0)
			continue;
		for (int r = 0; r < 4; r++)
			last = launches[k][r] > last ? launches[k][r] : last;
		tr_host(t, "cpu_op", "prep", l - (rank == 2 ? 40 : 15), rank == 2 ? 35 : 10, NULL);
		snprintf(args, sizeof(args), "\"Collective name\": \"allreduce\", \"Process Group Name\": \"7\", \"Seq\": %d,"
			 " \"In msg nelems\": 256, \"Out msg nelems\": 256, \"dtype\": \"Half\", \"Group size\": 4", 10 + k);
		tr_host(t, "cpu_op", "record_param_comms", l, 40, rank == 3 ? NULL : args);
		tr_launch(t, l + 2, "ncclDevKernel_AllReduce_Sum_f16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 9,
			  last + 30, 20, rank == 3 ? args : NULL);
	}
}

static void upload_four(int chunked)
{
	struct tr t;

	for (int rank = 0; rank < 4; rank++) {
		char name[32];
		if (chunked && rank == 0) {	/* rank 0 in two chunks, a step each */
			tr_begin(&t, 0, 4);
			tr_step(&t, 1, 1000, 1000);
			four_rank(&t, 0, 0, 2);
			tr_upload(&t, "four", "rank0.a.json");
			tr_begin(&t, 0, 4);
			tr_step(&t, 2, 2000, 1000);
			four_rank(&t, 0, 2, 3);
			tr_upload(&t, "four", "rank0.b.json");
			continue;
		}
		tr_begin(&t, rank, 4);
		tr_step(&t, 1, 1000, 1000);
		tr_step(&t, 2, 2000, rank == 2 ? 1200 : 1000);
		four_rank(&t, rank, 0, 3);
		snprintf(name, sizeof(name), "rank%d.json", rank);
		tr_upload(&t, "four", name);
	}
}

static void check_four(void)
{
	static const json_int_t last[4] = { 0, 0, 2, 1 }, matched[4] = { 3, 3, 3, 2 };
	static const json_int_t caused[4] = { 0, 0, 98000 + 165000, 17000 }, waited[4] = { 116000, 104000, 5000, 55000 };
	json_t *j = get("/api/v1/runs/four/distributed", 200), *st, *in, *b, *c;

	st = json_object_get(j, "stragglers");
	ck_assert_int_eq(ival(st, "matched"), 3);
	in = json_array_get(json_object_get(st, "instances"), 0);
	ck_assert_int_eq(ival(in, "seq"), 10);
	ck_assert(json_is_null(json_object_get(in, "order")));
	ck_assert_str_eq(json_string_value(json_object_get(in, "pg")), "7");
	ck_assert_int_eq(json_array_size(json_object_get(in, "ranks")), 3);
	ck_assert_int_eq(ival(in, "last_rank"), 2);
	ck_assert_int_eq(ival(in, "skew_ns"), 50000);
	ck_assert_int_eq(ival(in, "step"), 1);
	in = json_array_get(json_object_get(st, "instances"), 1);
	ck_assert_int_eq(ival(in, "seq"), 11);
	ck_assert_int_eq(ival(in, "last_rank"), 3);
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 2), "wait_ns"), 5000);
	ck_assert_str_eq(json_string_value(json_object_get(member(json_object_get(in, "ranks"), "rank", 2), "before_op")), "prep");
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 2), "before_ns"), 35000);
	ck_assert_int_eq(ival(member(json_object_get(in, "ranks"), "rank", 0), "before_ns"), 10000);
	in = json_array_get(json_object_get(st, "instances"), 2);
	ck_assert_int_eq(ival(in, "seq"), 12);
	ck_assert_int_eq(ival(in, "step"), 2);
	ck_assert_int_eq(ival(in, "skew_ns"), 60000);
	for (int rank = 0; rank < 4; rank++) {
		b = member(json_object_get(st, "by_rank"), "rank", rank);
		ck_assert_int_eq(ival(b, "matched"), matched[rank]);
		ck_assert_int_eq(ival(b, "last_arrivals"), last[rank]);
		ck_assert_double_eq_tol(rval(b, "last_arrival_pct"), 100.0 * (double)last[rank] / (double)matched[rank], 0.05);
		ck_assert_int_eq(ival(b, "wait_caused_ns"), caused[rank]);
		ck_assert_int_eq(ival(b, "wait_ns"), waited[rank]);
		/* 512 B per call in 20 us: 0.0256 GB/s, busbw x 2(4-1)/4 */
		c = coll(j, rank, "all_reduce");
		ck_assert_int_eq(ival(c, "calls"), rank == 3 ? 2 : 3);
		ck_assert_int_eq(ival(c, "bytes"), rank == 3 ? 1024 : 1536);
		ck_assert_int_eq(ival(c, "time_ns"), rank == 3 ? 40000 : 60000);
		ck_assert_int_eq(ival(c, "group_size"), 4);
		ck_assert_double_eq_tol(rval(c, "algbw_gbps"), 0.0256, 1e-12);
		ck_assert_double_eq_tol(rval(c, "busbw_gbps"), 0.0384, 1e-12);
		/* step 1: two all_reduce kernels (one on rank 3) exposed, nothing to overlap */
		json_t *s = json_array_get(json_object_get(member(json_object_get(j, "ranks"), "rank", rank), "steps"), 0);
		ck_assert_int_eq(ival(s, "communication_ns"), rank == 3 ? 20000 : 40000);
		ck_assert_int_eq(ival(s, "overlap_ns"), 0);
		ck_assert_int_eq(ival(s, "compute_ns"), 0);
	}
	b = member(json_object_get(st, "steps"), "step", 2);
	ck_assert_int_eq(ival(b, "slowest_rank"), 2);
	ck_assert_int_eq(ival(b, "dur_ns"), 1200000);
	json_decref(j);

	/* step 2 alone: seq 12, where rank 2 was last */
	j = get("/api/v1/runs/four/distributed?step=2", 200);
	ck_assert_int_eq(ival(j, "step"), 2);
	st = json_object_get(j, "stragglers");
	ck_assert_int_eq(ival(st, "matched"), 1);
	b = member(json_object_get(st, "by_rank"), "rank", 2);
	ck_assert_double_eq_tol(rval(b, "last_arrival_pct"), 100.0, 0.05);
	ck_assert_int_eq(ival(b, "wait_caused_ns"), 165000);
	ck_assert_int_eq(ival(coll(j, 0, "all_reduce"), "calls"), 1);
	ck_assert_int_eq(json_array_size(json_object_get(member(json_object_get(j, "ranks"), "rank", 1), "steps")), 1);
	json_decref(j);
}

START_TEST(test_four_ranks_by_seq)
{
	upload_four(0);
	check_four();
}
END_TEST

/* rank 0 uploaded as two chunks: the rank's analysis is derived again from both, collectives included */
START_TEST(test_four_ranks_chunked)
{
	upload_four(1);
	check_four();
}
END_TEST

/*
 * The real pair. Figures from the files, in Python (json, no Trainscope):
 * communication kernels (names with nccl / sendrecv / alltoall), each
 * joined by its correlation to the cudaLaunchKernel, its kind from the
 * nccl:* range around the launch, its arrival the start of the outermost
 * c10d:: / record_param_comms / nccl:* span around it; matched by kind and
 * order. Kernel time by kind (us): rank 0 all_to_all 182403 (4),
 * all_reduce 107656 (4), _all_gather_base 106140 (2); rank 1 229700,
 * 44446, 104907. Rank 0 arrives last in 6 of 10 (60.0 %), causing 243994
 * us of waits; rank 1 in 4 (40.0 %), causing 418051 us. The server first
 * aligns rank 1's clock on the collectives' ends (the median of its
 * kernels' ends minus rank 0's over the 10: +170 us, though both ran on
 * one host: NCCL's kernels end within a few hundred us of each other here),
 * so each arrival of rank 1 is 170 us earlier: rank 0 causes 243994 + 6 x
 * 170 = 245014 us, rank 1 418051 - 4 x 170 = 417371 us. HTA's comm/comp
 * overlap (union of communication kernels under the union of computation
 * kernels, over the communication union): rank 0 59216 of 396199 us
 * (14.95 %), rank 1 75530 of 379053 us (19.93 %).
 */
START_TEST(test_hta_sampled_pair)
{
	static const struct { int rank; const char *kind; json_int_t calls, time_ns; } want[] = {
		{ 0, "all_to_all", 4, 182403000 }, { 0, "all_reduce", 4, 107656000 }, { 0, "all_gather", 2, 106140000 },
		{ 1, "all_to_all", 4, 229700000 }, { 1, "all_reduce", 4, 44446000 }, { 1, "all_gather", 2, 104907000 },
	};
	json_t *j, *c, *b, *tot;

	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank0.json.gz");
	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank1.json.gz");
	j = get("/api/v1/runs/sampled/distributed", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "collectives")), 6);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		c = coll(j, want[i].rank, want[i].kind);
		ck_assert_int_eq(ival(c, "calls"), want[i].calls);
		ck_assert_int_eq(ival(c, "time_ns"), want[i].time_ns);
		ck_assert(json_is_null(json_object_get(c, "bytes")));	/* this 2023 trace writes no msg nelems */
	}
	ck_assert_int_eq(ival(json_object_get(j, "stragglers"), "matched"), 10);
	b = member(json_object_get(json_object_get(j, "stragglers"), "by_rank"), "rank", 0);
	ck_assert_int_eq(ival(b, "last_arrivals"), 6);
	ck_assert_double_eq_tol(rval(b, "last_arrival_pct"), 60.0, 0.05);
	ck_assert_int_eq(ival(b, "wait_caused_ns"), 245014000);
	b = member(json_object_get(json_object_get(j, "stragglers"), "by_rank"), "rank", 1);
	ck_assert_int_eq(ival(b, "last_arrivals"), 4);
	ck_assert_int_eq(ival(b, "wait_caused_ns"), 417371000);
	ck_assert_int_eq(ival(member(json_object_get(j, "ranks"), "rank", 1), "clock_offset_ns"), 170000);
	ck_assert_int_eq(ival(member(json_object_get(j, "ranks"), "rank", 1), "clock_collectives"), 10);
	ck_assert(json_is_null(json_object_get(json_object_get(j, "clock"), "note")));
	tot = json_object_get(member(json_object_get(j, "ranks"), "rank", 0), "total");
	ck_assert_int_eq(ival(tot, "overlap_ns"), 59216000);
	ck_assert_double_eq_tol(rval(tot, "overlap_pct"), 14.95, 0.05);
	tot = json_object_get(member(json_object_get(j, "ranks"), "rank", 1), "total");
	ck_assert_int_eq(ival(tot, "overlap_ns"), 75530000);
	ck_assert_double_eq_tol(rval(tot, "overlap_pct"), 19.93, 0.05);
	/* steps (fixtures README): r0 607312 / 622928 us, r1 607904 / 630639: rank 1 is the slower in both */
	b = member(json_object_get(json_object_get(j, "stragglers"), "steps"), "step", 552);
	ck_assert_int_eq(ival(b, "slowest_rank"), 1);
	ck_assert_int_eq(ival(b, "dur_ns"), 630639000);
	ck_assert_int_eq(ival(b, "fastest_dur_ns"), 622928000);
	json_decref(j);
}
END_TEST

/* the findings of id in /diagnosis of run (rank 0), counted */
static json_t *finding(json_t *diag, const char *id, int *n)
{
	json_t *f, *hit = NULL;
	size_t i;

	*n = 0;
	json_array_foreach(json_object_get(diag, "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id)) {
			hit = f;
			(*n)++;
		}
	return hit;
}

START_TEST(test_findings)
{
	json_t *j, *f, *e;
	int n;

	upload_two();
	upload_four(0);
	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank0.json.gz");
	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank1.json.gz");

	/* four: rank 2 last in 2 of 3 (66.7 % >= 50 %, and 1.5 x 25 %); rank 3's 1 of 2 is too few */
	j = get("/api/v1/runs/four/diagnosis", 200);
	f = finding(j, "persistent_straggler", &n);
	ck_assert_int_eq(n, 1);
	e = json_object_get(f, "evidence");
	ck_assert_int_eq(ival(e, "rank"), 2);
	ck_assert_double_eq_tol(rval(e, "last_arrival_pct"), 200.0 / 3, 0.05);
	ck_assert_int_eq(ival(e, "wait_caused_ns"), 263000);
	/* what kept it: its prep, 35 us against the others' 10, in seq 10 and 12 */
	e = json_array_get(json_object_get(e, "delaying_ops"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(e, "name")), "prep");
	ck_assert_int_eq(ival(e, "extra_ns"), 2 * 25000);
	ck_assert_int_eq(ival(e, "collectives"), 2);
	ck_assert_int_eq(json_array_size(json_object_get(json_object_get(f, "evidence"), "delaying_ops")), 1);
	ck_assert(!finding(j, "compute_imbalance", &n));	/* no computation kernels at all */
	json_decref(j);

	/* two: rank 0's exposed communication is 22 % of its step, rank 1's 116 of 1100 us (10.5 %,
	 * over the 10 %: the host's nccl:all_reduce adds 16 us to the all_gather's 100); both compute
	 * 300 us: balanced; 1 of 2 last each: no straggler */
	j = get("/api/v1/runs/two/diagnosis?rank=1", 200);
	f = finding(j, "exposed_communication_ranks", &n);
	ck_assert_int_eq(n, 1);
	e = json_object_get(f, "evidence");
	ck_assert_int_eq(json_array_size(json_object_get(e, "ranks")), 2);
	ck_assert_int_eq(ival(json_array_get(json_object_get(e, "ranks"), 0), "rank"), 0);
	ck_assert_double_eq_tol(rval(json_array_get(json_object_get(e, "ranks"), 0), "exposed_communication_pct"), 22.0, 0.05);
	ck_assert_int_eq(ival(json_array_get(json_object_get(e, "ranks"), 1), "rank"), 1);
	ck_assert_double_eq_tol(rval(json_array_get(json_object_get(e, "ranks"), 1), "exposed_communication_pct"),
				11600.0 / 1100, 0.05);
	ck_assert(!finding(j, "compute_imbalance", &n));
	ck_assert(!finding(j, "persistent_straggler", &n));
	json_decref(j);

	/* the real pair: computation kernels' union (Python, from the files) 210320 us on rank 0, 271973 us
	 * on rank 1, over two steps each: rank 1 computes 29.3 % longer */
	j = get("/api/v1/runs/sampled/diagnosis", 200);
	f = finding(j, "compute_imbalance", &n);
	ck_assert_int_eq(n, 1);
	e = json_object_get(f, "evidence");
	ck_assert_int_eq(ival(e, "busiest_rank"), 1);
	ck_assert_int_eq(ival(e, "busiest_compute_ns_per_step"), 271973000 / 2);
	ck_assert_int_eq(ival(e, "least_busy_compute_ns_per_step"), 105160000);
	ck_assert_double_eq_tol(rval(e, "imbalance_pct"), (271973.0 / 210320.0 - 1) * 100, 0.05);
	ck_assert(!finding(j, "persistent_straggler", &n));	/* 60 % of 10 with two ranks: under 75 % */
	json_decref(j);

	/* two's all_reduce: 4 MiB in 200 us on both ranks, 20.97152 GB/s of bus bandwidth (n = 2: factor 1),
	 * under 10 % of the 230 GB/s of NVLink 3 on an A100 SXM; on PCIe cards, 20 GB/s: no finding;
	 * its all_gather (4,000 bytes a call) is too small to count */
	for (int pcie = 0; pcie < 2; pcie++) {
		tr_device = pcie ? "NVIDIA A100-PCIE-40GB" : "NVIDIA A100-SXM4-80GB";
		struct tu_resp r;
		ck_assert_int_eq(tu_http(&srv, "DELETE", "/api/v1/runs/two", NULL, 0, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		tu_resp_free(&r);
		upload_two();
		tr_device = NULL;
		j = get("/api/v1/runs/two/diagnosis", 200);
		f = finding(j, "collective_bandwidth_low", &n);
		if (pcie) {
			ck_assert(!f);
			json_decref(j);
			continue;
		}
		ck_assert_int_eq(n, 1);
		e = json_object_get(f, "evidence");
		ck_assert_str_eq(json_string_value(json_object_get(e, "device")), "NVIDIA A100-SXM4-80GB");
		ck_assert_double_eq_tol(rval(e, "expected_busbw_gbps"), 230, 1e-9);
		ck_assert_int_eq(json_array_size(json_object_get(e, "collectives")), 1);
		e = json_array_get(json_object_get(e, "collectives"), 0);
		ck_assert_str_eq(json_string_value(json_object_get(e, "kind")), "all_reduce");
		ck_assert_int_eq(ival(e, "mean_bytes"), 4194304);
		ck_assert_double_eq_tol(rval(e, "best_busbw_gbps"), 4194304.0 / 200000.0, 1e-9);
		json_decref(j);
	}

	/* one rank: none of them */
	tu_upload_fixture(&srv, "single", "traces/hta_sampled_rank0.json.gz");
	j = get("/api/v1/runs/single/diagnosis", 200);
	ck_assert(!finding(j, "exposed_communication_ranks", &n) && !finding(j, "compute_imbalance", &n));
	json_decref(j);
}
END_TEST

START_TEST(test_bad_params)
{
	static const char *const bad[] = { "?step=x", "?step=-1", "?step=", "?step=1.5", "?step=99999999999999999999" };
	json_t *j;

	upload_two();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/api/v1/runs/two/distributed%s", bad[i]);
		j = get(path, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_parameter");
		json_decref(j);
	}
	j = get("/api/v1/runs/nope/distributed", 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	/* a step no rank has: empty, not an error */
	j = get("/api/v1/runs/two/distributed?step=7", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "collectives")), 0);
	ck_assert_int_eq(ival(json_object_get(j, "stragglers"), "matched"), 0);
	ck_assert_int_eq(json_array_size(json_object_get(member(json_object_get(j, "ranks"), "rank", 0), "steps")), 0);
	json_decref(j);
}
END_TEST

/* ---- GET /critical_path ---- */

/* the segments of a critical path against want (rank, kind, name, start us, dur us), in order */
struct seg_want {
	int rank;
	const char *kind, *name;
	long start_us, dur_us;
};

static void check_segments(json_t *j, const struct seg_want *want, size_t n)
{
	json_t *segs = json_object_get(j, "segments"), *s;

	ck_assert_msg(json_array_size(segs) == n, "%zu segments, expected %zu", json_array_size(segs), n);
	for (size_t i = 0; i < n; i++) {
		s = json_array_get(segs, i);
		ck_assert_int_eq(ival(s, "rank"), want[i].rank);
		ck_assert_str_eq(json_string_value(json_object_get(s, "kind")), want[i].kind);
		ck_assert_str_eq(json_string_value(json_object_get(s, "name")), want[i].name);
		ck_assert_int_eq(ival(s, "start_ns"), want[i].start_us * 1000);
		ck_assert_int_eq(ival(s, "dur_ns"), want[i].dur_us * 1000);
	}
}

/* the by_category entry of rank, kind and name */
static json_t *category(json_t *j, int rank, const char *kind, const char *name)
{
	json_t *c;
	size_t i;

	json_array_foreach(json_object_get(j, "by_category"), i, c)
		if (ival(c, "rank") == rank && !strcmp(json_string_value(json_object_get(c, "kind")), kind) &&
		    !strcmp(json_string_value(json_object_get(c, "name")), name))
			return c;
	ck_abort_msg("no category %d %s %s", rank, kind, name);
	return NULL;
}

#define LOADER "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"

/*
 * Two ranks, step 1 at [1000, 2000) us on both. Rank 0 enters an all_reduce at 1200
 * (c10d::allreduce_ [1200, 1230) > record_param_comms > launch at 1206, kernel [1210, 1700));
 * rank 1 runs aten::to [1050, 1090), then loads data for 300 us [1100, 1400), and enters the
 * all_reduce at 1400 (kernel [1410, 1700)). The path: rank 1's host gap (no operator) until
 * 1050, aten::to, a host gap of 10 us, the data loading, then the all_reduce from rank 1's
 * arrival (1400) to its end (1700), on rank 0 (the lowest rank ending last): 700 us, 300 of
 * them (42.9 %) rank 1's data loading.
 */
static void upload_straggler(void)
{
	static const char ar_args[] = "\"Collective name\": \"allreduce\", \"Process Group Name\": \"0\","
		" \"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2";
	struct tr t;

	for (int rank = 0; rank < 2; rank++) {
		long ar = rank ? 1400 : 1200;
		tr_begin(&t, rank, 2);
		tr_step(&t, 1, 1000, 1000);
		if (rank) {
			tr_host(&t, "cpu_op", "aten::to", 1050, 40, NULL);
			tr_host(&t, "cpu_op", LOADER, 1100, 300, NULL);
		}
		tr_host(&t, "cpu_op", "c10d::allreduce_", ar, 30, NULL);
		tr_host(&t, "cpu_op", "record_param_comms", ar + 2, 26, ar_args);
		tr_launch(&t, ar + 6, AR_KERNEL, 9, ar + 10, 1700 - (ar + 10), NULL);
		tr_upload(&t, "strag", rank ? "rank1.json" : "rank0.json");
	}
}

START_TEST(test_critical_path_straggler)
{
	static const struct seg_want want[] = {
		{ 1, "host_gap", "", 1000, 50 }, { 1, "cpu_op", "aten::to", 1050, 40 }, { 1, "host_gap", "", 1090, 10 },
		{ 1, "cpu_op", LOADER, 1100, 300 }, { 0, "collective", AR_KERNEL, 1400, 300 },
	};
	json_t *j, *c;

	upload_straggler();
	j = get("/api/v1/runs/strag/critical_path?step=1", 200);
	ck_assert_int_eq(ival(j, "step"), 1);
	ck_assert_int_eq(ival(j, "start_ns"), 1000000);
	ck_assert_int_eq(ival(j, "end_ns"), 1700000);
	ck_assert_int_eq(ival(j, "dur_ns"), 700000);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 2);
	check_segments(j, want, sizeof(want) / sizeof(want[0]));
	c = category(j, 1, "cpu_op", LOADER);
	ck_assert_int_eq(ival(c, "ns"), 300000);
	ck_assert_double_eq_tol(rval(c, "pct"), 42.9, 0.05);
	/* the largest category first */
	c = json_array_get(json_object_get(j, "by_category"), 0);
	ck_assert_int_eq(ival(c, "ns"), 300000);
	c = member(json_object_get(j, "by_kind"), "ns", 60000);
	ck_assert_str_eq(json_string_value(json_object_get(c, "kind")), "host_gap");
	ck_assert_double_eq_tol(rval(c, "pct"), 8.6, 0.05);
	json_decref(j);
}
END_TEST

#define ADD_KERNEL "vectorized_elementwise_kernel"

/*
 * One rank, step 1 at [1000, 2000) us: aten::mm [1010, 1030) launches (at 1015, 5 us) a kernel
 * [1020, 1320) on stream 7; aten::add [1030, 1040) launches (at 1032) one that waits for it in the
 * stream, [1320, 1380); cudaDeviceSynchronize [1045, 1381) waits for both; then optimizer.step
 * [1385, 1485). The path: a host gap of 10, aten::mm 5 (to the launch), the launch 5, the first kernel 300,
 * the second 60 (stream order, not its launch), the sync's last 1 us, a host gap of 4, optimizer.step 100.
 */
START_TEST(test_critical_path_one_rank)
{
	static const struct seg_want want[] = {
		{ 0, "host_gap", "", 1000, 10 }, { 0, "cpu_op", "aten::mm", 1010, 5 },
		{ 0, "runtime", "cudaLaunchKernel", 1015, 5 }, { 0, "kernel", MM_KERNEL, 1020, 300 },
		{ 0, "kernel", ADD_KERNEL, 1320, 60 }, { 0, "sync", "cudaDeviceSynchronize", 1380, 1 },
		{ 0, "host_gap", "", 1381, 4 }, { 0, "cpu_op", "optimizer.step", 1385, 100 },
	};
	struct tr t;
	json_t *j;

	tr_begin(&t, 0, 1);
	tr_step(&t, 1, 1000, 1000);
	tr_host(&t, "cpu_op", "aten::mm", 1010, 20, NULL);
	tr_launch(&t, 1015, MM_KERNEL, 7, 1020, 300, NULL);
	tr_host(&t, "cpu_op", "aten::add", 1030, 10, NULL);
	tr_launch(&t, 1032, ADD_KERNEL, 7, 1320, 60, NULL);
	tr_host(&t, "cuda_runtime", "cudaDeviceSynchronize", 1045, 336, NULL);
	tr_host(&t, "cpu_op", "optimizer.step", 1385, 100, NULL);
	tr_host(&t, "cpu_op", "aten::empty", 1385, 0, NULL);	/* empty: holds no time on the path */
	tr_upload(&t, "one", "rank0.json");
	j = get("/api/v1/runs/one/critical_path?step=1", 200);
	ck_assert_int_eq(ival(j, "dur_ns"), 485000);
	check_segments(j, want, sizeof(want) / sizeof(want[0]));
	ck_assert_double_eq_tol(rval(member(json_object_get(j, "by_kind"), "ns", 360000), "pct"), 74.2, 0.05);
	json_decref(j);
}
END_TEST

/*
 * A chain across three ranks, step 1 at [1000, 3000) us on each, two all_reduces in group 0:
 *   rank 0 enters both at once (1010, 1100; kernels [1020, 1500), [1500, 1800) on stream 9);
 *   rank 1 enters the first at 1010 (kernel [1020, 1500)), waits for it in cudaStreamSynchronize
 *     [1050, 1501), runs opt [1510, 1610), enters the second at 1620 (kernel [1630, 1800));
 *   rank 2 loads data [1100, 1300), enters the first at 1300 (kernel [1310, 1500)), the second
 *     at 1400 (kernel [1500, 1800)).
 * The path back from rank 0's second kernel: rank 1's arrival in it (1620), a host gap of 10, opt,
 * a host gap of 9, the sync's last 1 us, rank 1's first kernel from rank 2's arrival (1300), rank 2's
 * data loading, a host gap from its step start: 800 us in all.
 */
static void upload_chain(void)
{
	static const char ar_args[] = "\"Collective name\": \"allreduce\", \"Process Group Name\": \"0\","
		" \"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 3";
	static const long enter[3][2] = { { 1010, 1100 }, { 1010, 1620 }, { 1300, 1400 } };
	static const long kern[3][2][2] = { { { 1020, 1500 }, { 1500, 1800 } }, { { 1020, 1500 }, { 1630, 1800 } },
					    { { 1310, 1500 }, { 1500, 1800 } } };
	struct tr t;


	for (int rank = 0; rank < 3; rank++) {
		tr_begin(&t, rank, 3);
		tr_step(&t, 1, 1000, 2000);
		if (rank == 2)
			tr_host(&t, "cpu_op", "load", 1100, 200, NULL);
		if (rank == 1) {
			tr_host(&t, "cuda_runtime", "cudaStreamSynchronize", 1050, 451, NULL);
			tr_host(&t, "cpu_op", "opt", 1510, 100, NULL);
		}
		for (int k = 0; k < 2; k++) {
			tr_host(&t, "cpu_op", "c10d::allreduce_", enter[rank][k], 30, NULL);
			tr_host(&t, "cpu_op", "record_param_comms", enter[rank][k] + 2, 26, ar_args);
			tr_launch(&t, enter[rank][k] + 6, AR_KERNEL, 9, kern[rank][k][0], kern[rank][k][1] - kern[rank][k][0],
				  NULL);
		}
		tr_upload(&t, "chain", rank == 0 ? "rank0.json" : rank == 1 ? "rank1.json" : "rank2.json");
	}
}

START_TEST(test_critical_path_chain)
{
	static const struct seg_want want[] = {
		{ 2, "host_gap", "", 1000, 100 }, { 2, "cpu_op", "load", 1100, 200 }, { 1, "collective", AR_KERNEL, 1300, 200 },
		{ 1, "sync", "cudaStreamSynchronize", 1500, 1 }, { 1, "host_gap", "", 1501, 9 }, { 1, "cpu_op", "opt", 1510, 100 },
		{ 1, "host_gap", "", 1610, 10 }, { 0, "collective", AR_KERNEL, 1620, 180 },
	};
	json_t *j;

	upload_chain();
	j = get("/api/v1/runs/chain/critical_path?step=1", 200);
	ck_assert_int_eq(ival(j, "dur_ns"), 800000);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 3);
	check_segments(j, want, sizeof(want) / sizeof(want[0]));
	ck_assert_double_eq_tol(rval(category(j, 2, "cpu_op", "load"), "pct"), 25.0, 0.05);
	ck_assert_double_eq_tol(rval(member(json_object_get(j, "by_kind"), "ns", 380000), "pct"), 47.5, 0.05);
	json_decref(j);
}
END_TEST

/*
 * GET /compare of the 2-rank straggler run (base) and the 3-rank chain (target): one step per
 * rank, 1000 us against 2000 (+100.0 % per rank and step); exposed communication (no
 * computation kernel) 490 + 290 us against 780 + 480 + 170 + 190 + 300 us, 390 against 640
 * per rank and step (+64.1 %); 1 matched collective (rank 1 last) against 2 (ranks 2 and 1 last,
 * 50 % each: the lower rank named).
 */
START_TEST(test_compare_distributed)
{
	json_t *j, *d, *b, *t;
	struct tr t1;

	upload_straggler();
	upload_chain();
	j = get("/api/v1/compare?base=strag&target=chain", 200);
	d = json_object_get(j, "distributed");
	ck_assert_ptr_nonnull(d);
	b = json_object_get(d, "base");
	t = json_object_get(d, "target");
	ck_assert_int_eq(ival(b, "ranks"), 2);
	ck_assert_int_eq(ival(t, "ranks"), 3);
	ck_assert_int_eq(ival(b, "rank_steps"), 2);
	ck_assert_int_eq(ival(t, "rank_steps"), 3);
	ck_assert_int_eq(ival(b, "dur_ns"), 2000000);
	ck_assert_int_eq(ival(t, "dur_ns"), 6000000);
	ck_assert_int_eq(ival(b, "communication_ns"), 780000);
	ck_assert_int_eq(ival(t, "communication_ns"), 1920000);
	ck_assert_int_eq(ival(b, "matched"), 1);
	ck_assert_int_eq(ival(t, "matched"), 2);
	ck_assert_int_eq(ival(b, "last_rank"), 1);
	ck_assert_double_eq_tol(rval(b, "last_arrival_pct"), 100.0, 0.05);
	ck_assert_int_eq(ival(t, "last_rank"), 1);
	ck_assert_double_eq_tol(rval(t, "last_arrival_pct"), 50.0, 0.05);
	ck_assert_double_eq_tol(rval(json_object_get(d, "delta_pct"), "dur_ns"), 100.0, 0.05);
	ck_assert_double_eq_tol(rval(json_object_get(d, "delta_pct"), "communication_ns"), 64.1, 0.05);
	ck_assert(json_is_null(json_object_get(json_object_get(d, "delta_pct"), "compute_ns")));
	json_decref(j);
	/* ?rank picks the rank of the rest; the distributed figures stay over all ranks */
	j = get("/api/v1/compare?base=strag&target=chain&rank=1", 200);
	ck_assert_int_eq(ival(json_object_get(json_object_get(j, "distributed"), "target"), "ranks"), 3);
	json_decref(j);
	/* one rank on each side: none */
	tr_begin(&t1, 0, 1);
	tr_step(&t1, 1, 1000, 1000);
	tr_host(&t1, "cpu_op", "aten::mm", 1010, 20, NULL);
	tr_upload(&t1, "solo", "rank0.json");
	j = get("/api/v1/compare?base=solo&target=solo", 200);
	ck_assert_ptr_null(json_object_get(j, "distributed"));
	json_decref(j);
}
END_TEST

/*
 * The real pair, step 552 (python over the files: the ProfilerStep#552 spans are
 * [1682725898686653, 1682725899309581) us on rank 0 and [1682725898687438, 1682725899318077) on
 * rank 1; of the host operators, runtime calls and GPU events overlapping them, the last to end is
 * rank 1's "## sdd_wait_tensors ##" at 1682725899313681 us, rank 0's last ends at 1682725899305169):
 * the path runs from rank 1's step start to that end, and its segments tile it, both 170 us
 * earlier on rank 0's clock (rank 1's clock offset: test_hta_sampled_pair).
 */
START_TEST(test_critical_path_hta_sampled)
{
	json_t *j, *segs, *s, *k;
	json_int_t at, sum = 0;
	size_t i;

	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank0.json.gz");
	tu_upload_fixture(&srv, "sampled", "traces/hta_sampled_rank1.json.gz");
	j = get("/api/v1/runs/sampled/critical_path?step=552", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 2);
	ck_assert_int_eq(ival(j, "start_ns"), 1682725898687438000LL - 170000);
	ck_assert_int_eq(ival(j, "end_ns"), 1682725899313681000LL - 170000);
	ck_assert_int_eq(ival(j, "dur_ns"), 626243000);
	segs = json_object_get(j, "segments");
	ck_assert_uint_gt(json_array_size(segs), 1);
	s = json_array_get(segs, json_array_size(segs) - 1);
	ck_assert_int_eq(ival(s, "rank"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(s, "name")), "## sdd_wait_tensors ##");
	ck_assert_int_eq(ival(s, "start_ns") + ival(s, "dur_ns"), 1682725899313681000LL - 170000);
	at = ival(j, "start_ns");
	json_array_foreach(segs, i, s) {
		ck_assert_int_eq(ival(s, "start_ns"), at);
		ck_assert_int_gt(ival(s, "dur_ns"), 0);
		at += ival(s, "dur_ns");
	}
	json_array_foreach(json_object_get(j, "by_kind"), i, k)
		sum += ival(k, "ns");
	ck_assert_int_eq(sum, 626243000);
	json_decref(j);
	j = get("/api/v1/runs/sampled/critical_path?step=550", 404);
	json_decref(j);
}
END_TEST

/* ---- the real 2-rank gloo run (tests/fixtures/gpu/dist), as recorded and with rank 1's clock shifted ---- */

/*
 * Uploads the two ranks' traces of tests/fixtures/gpu/dist as run, rank 1's baseTimeNanoseconds
 * moved by shift_ns (its clock that much ahead, as on another host).
 */
static void upload_gloo(const char *run, long long shift_ns)
{
	static const char key[] = "\"baseTimeNanoseconds\": ";
	char *dir = tu_source_path("tests/fixtures/gpu/dist"), path[600], name[128];
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0;

	ck_assert_ptr_nonnull(dp);
	while ((d = readdir(dp))) {
		size_t len, tlen;
		size_t nl = strlen(d->d_name);
		if (nl < 17 || strcmp(d->d_name + nl - 17, ".pt.trace.json.gz"))
			continue;
		int rank = !strncmp(d->d_name, "rank1.", 6);
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		uint8_t *gz = tu_read_file(path, &len);
		ck_assert_ptr_nonnull(gz);
		char *t = (char *)tu_gunzip(gz, len, &tlen);
		ck_assert_ptr_nonnull(t);
		if (rank && shift_ns) {
			char *at = memmem(t, tlen, key, sizeof(key) - 1), digits[32];
			ck_assert_ptr_nonnull(at);
			at += sizeof(key) - 1;
			long long base = strtoll(at, NULL, 10);
			/* the same number of digits: written in place */
			int w = snprintf(digits, sizeof(digits), "%lld", base + shift_ns);
			ck_assert_int_eq(w, snprintf(NULL, 0, "%lld", base));
			memcpy(at, digits, (size_t)w);
		}
		snprintf(name, sizeof(name), "rank%d.pt.trace.json&rank=%d", rank, rank);
		tu_upload(&srv, run, name, t, tlen);
		free(t);
		free(gz);
		n++;
	}
	closedir(dp);
	free(dir);
	ck_assert_int_eq(n, 2);
}

/* the path's time on rank of kind (NULL: any) */
static json_int_t path_ns(json_t *cp, int rank, const char *kind)
{
	json_t *s;
	json_int_t ns = 0;
	size_t i;

	json_array_foreach(json_object_get(cp, "segments"), i, s)
		if (ival(s, "rank") == rank && (!kind || !strcmp(json_string_value(json_object_get(s, "kind")), kind)))
			ns += ival(s, "dur_ns");
	return ns;
}

/*
 * Rank 1 sleeps 30 ms a step before its forward (tests/fixtures/gpu/README.md), and rank 0
 * waits for it in gloo:all_reduce. The path of steps 5 to 8 crosses to rank 1 at its arrival
 * and names the sleep as rank 1's host gap (30.0-30.8 ms a step); rank 0's idle, which was
 * 72.7 and 76.6 ms of steps 5 and 6 before gloo's spans were edges of the path, is under 20 %.
 */
START_TEST(test_critical_path_gloo)
{
	char path[128];

	upload_gloo("gloo", 0);
	for (int step = 5; step <= 8; step++) {
		snprintf(path, sizeof(path), "/api/v1/runs/gloo/critical_path?step=%d", step);
		json_t *j = get(path, 200);
		json_int_t dur = ival(j, "dur_ns");
		ck_assert_int_gt(dur, 70000000);
		ck_assert_msg(path_ns(j, 1, NULL) >= 25000000, "step %d: %lld ns on rank 1", step,
			      (long long)path_ns(j, 1, NULL));
		ck_assert_msg(path_ns(j, 1, "host_gap") >= 25000000, "step %d: rank 1's host gap %lld ns", step,
			      (long long)path_ns(j, 1, "host_gap"));
		ck_assert_msg(path_ns(j, 0, "idle") * 5 <= dur, "step %d: rank 0 idle %lld of %lld ns", step,
			      (long long)path_ns(j, 0, "idle"), (long long)dur);
		json_decref(j);
	}
}
END_TEST

/*
 * The same run with rank 1's clock 5 ms ahead: its offset is estimated 5 ms more than on the
 * recorded run (there -24 us: one host, the 15 gloo all_reduces end within -369..+234 us of
 * each other), and once it is subtracted the stragglers, the critical paths and the diagnosis
 * are those of the recorded run: rank 1 last at 12 of 15 all_reduces, rank 0 waiting 301 ms,
 * persistent_straggler first.
 */
START_TEST(test_clock_offset_gloo)
{
	json_t *a, *b, *ra, *rb, *f, *e;
	char path[128];
	int n;

	upload_gloo("gloo", 0);
	upload_gloo("gloo5", 5000000);
	a = get("/api/v1/runs/gloo/distributed", 200);
	b = get("/api/v1/runs/gloo5/distributed", 200);
	ra = json_object_get(a, "ranks");
	rb = json_object_get(b, "ranks");
	ck_assert_int_eq(ival(member(ra, "rank", 0), "clock_offset_ns"), 0);
	ck_assert_int_eq(ival(member(rb, "rank", 0), "clock_offset_ns"), 0);
	ck_assert_int_eq(ival(member(ra, "rank", 1), "clock_collectives"), 15);
	json_int_t off_a = ival(member(ra, "rank", 1), "clock_offset_ns");
	json_int_t off_b = ival(member(rb, "rank", 1), "clock_offset_ns");
	ck_assert_int_lt(llabs(off_a), 100000);			/* one host: about 0 */
	ck_assert_int_lt(llabs(off_b - 5000000), 100000);
	ck_assert_int_eq(off_b - off_a, 5000000);
	ck_assert(json_is_null(json_object_get(json_object_get(b, "clock"), "note")));
	/* the same stragglers and steps, to the ns */
	ck_assert(json_equal(json_object_get(a, "stragglers"), json_object_get(b, "stragglers")));
	ck_assert(json_equal(json_object_get(json_array_get(ra, 1), "steps"),
			     json_object_get(json_array_get(rb, 1), "steps")));
	f = member(json_object_get(json_object_get(a, "stragglers"), "by_rank"), "rank", 1);
	ck_assert_int_eq(ival(f, "matched"), 15);
	ck_assert_int_ge(ival(f, "last_arrivals"), 11);
	ck_assert_int_gt(ival(f, "wait_caused_ns"), 250000000);
	json_decref(a);
	json_decref(b);
	for (int step = 4; step <= 8; step++) {
		snprintf(path, sizeof(path), "/api/v1/runs/gloo/critical_path?step=%d", step);
		a = get(path, 200);
		snprintf(path, sizeof(path), "/api/v1/runs/gloo5/critical_path?step=%d", step);
		b = get(path, 200);
		ck_assert_msg(json_equal(json_object_get(a, "segments"), json_object_get(b, "segments")), "step %d", step);
		ck_assert_int_eq(ival(a, "dur_ns"), ival(b, "dur_ns"));
		json_decref(a);
		json_decref(b);
	}
	/* both ranks' diagnosis lead with rank 1 as the straggler, ahead of the batch-size advice */
	for (int rank = 0; rank < 2; rank++) {
		snprintf(path, sizeof(path), "/api/v1/runs/gloo5/diagnosis?rank=%d", rank);
		a = get(path, 200);
		f = finding(a, "persistent_straggler", &n);
		ck_assert_int_eq(n, 1);
		ck_assert_ptr_eq(f, json_array_get(json_object_get(a, "findings"), 0));
		e = json_object_get(f, "evidence");
		ck_assert_int_eq(ival(e, "rank"), 1);
		ck_assert(json_is_true(json_object_get(e, "explains_step_time")));
		ck_assert_double_gt(rval(e, "step_share_pct"), 50.0);
		ck_assert_double_gt(rval(e, "wait_caused_share_pct"), 90.0);
		ck_assert_int_eq(json_array_size(json_object_get(e, "steps")), 5);
		json_decref(a);
	}
}
END_TEST

/*
 * HTA's critical_path_analysis on its own test trace (HolisticTraceAnalysis
 * tests/data/critical_path/alexnet, our traces/hta_alexnet.json.gz: the same bytes), for the
 * second "[param|pytorch.model.alex_net|0|0|0|measure|forward]" span (rank 0, instance_id 1, as
 * HTA's test_critical_path_inter_stream_sync asks), run with ../shared/reference/peers' setup:
 * the sum of its path's edge weights is 35,834 us, its events span 36,025 us (the annotation's
 * 36,356), through 19 host operators and runtime calls and 13 kernels. Here that span is step 1
 * (renamed ProfilerStep#1). Our path, from its first event to the step's end, is 36,033 us
 * (+0.02 % of HTA's span, +0.6 % of its weights: HTA weighs no time in which a thread waits), with
 * all of HTA's 19 host names and 10 of its 13 kernels. The 3 left out (two fft2d_r2c_32x32, an
 * ampere_gcgemm_64x64_nt and an fft2d_c2r_32x32 of one convolution, [32274, 32851) us into the
 * step) ran while the host was still launching the next layers: our walk takes at each event the
 * predecessor that was ready last, the host's launch; HTA takes the longest weighted path of its
 * graph, where a kernel's duration weighs and the host's later launch does not.
 */
#define ALEX_FORWARD "\"[param|pytorch.model.alex_net|0|0|0|measure|forward]\""

START_TEST(test_critical_path_hta_alexnet)
{
	static const char *const host[] = {
		"aten::_convolution", "aten::add_", "aten::clamp_min_", "aten::conv2d", "aten::convolution",
		"aten::cudnn_convolution", "aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::relu_",
		"aten::reshape", "aten::view", "cudaDeviceGetStreamPriorityRange", "cudaDeviceSynchronize",
		"cudaEventRecord", "cudaLaunchKernel", "cudaMalloc", "cudaStreamGetPriority", "cudaStreamIsCapturing",
		"cudaStreamWaitEvent",
	};
	char *path = tu_fixture("traces/hta_alexnet.json.gz");
	size_t len, tlen, i;
	uint8_t *gz = tu_read_file(path, &len);
	char *t, *at, *out;
	json_t *j, *segs, *s;
	json_int_t first_event = 0, kernels = 0;

	ck_assert_ptr_nonnull(gz);
	t = (char *)tu_gunzip(gz, len, &tlen);
	ck_assert_ptr_nonnull(t);
	/* the second measure|forward span is step 1 */
	at = strstr(t, ALEX_FORWARD);
	ck_assert_ptr_nonnull(at);
	at = strstr(at + 1, ALEX_FORWARD);
	ck_assert_ptr_nonnull(at);
	out = malloc(tlen + 1);
	ck_assert_ptr_nonnull(out);
	size_t head = (size_t)(at - t), tail = tlen - head - (sizeof(ALEX_FORWARD) - 1);
	memcpy(out, t, head);
	memcpy(out + head, "\"ProfilerStep#1\"", 16);
	memcpy(out + head + 16, at + sizeof(ALEX_FORWARD) - 1, tail);
	tu_upload(&srv, "alexnet", "hta_alexnet.json&rank=0", out, head + 16 + tail);
	free(out);
	free(t);
	free(gz);
	free(path);
	j = get("/api/v1/runs/alexnet/critical_path?step=1", 200);
	segs = json_object_get(j, "segments");
	/* the path's time after its leading gap (from the step's start to its first event) */
	s = json_array_get(segs, 0);
	if (!strcmp(json_string_value(json_object_get(s, "kind")), "host_gap"))
		first_event = ival(s, "dur_ns");
	double ours = (double)(ival(j, "dur_ns") - first_event) / 1000.0;
	ck_assert_msg(fabs(ours - 36025.0) <= 0.01 * 36025.0, "%.0f us against HTA's span of 36,025", ours);
	ck_assert_msg(fabs(ours - 35834.0) <= 0.01 * 35834.0, "%.0f us against HTA's weights of 35,834", ours);
	for (i = 0; i < sizeof(host) / sizeof(host[0]); i++) {
		size_t k;
		json_array_foreach(segs, k, s)
			if (!strcmp(json_string_value(json_object_get(s, "name")), host[i]))
				break;
		ck_assert_msg(k < json_array_size(segs), "%s is not on the path", host[i]);
	}
	/* HTA's kernels on the path but the convolution's fft and gcgemm: 10 distinct names */
	{
		const char *seen[64];
		size_t n = 0, k;
		json_array_foreach(segs, i, s) {
			const char *name = json_string_value(json_object_get(s, "name"));
			if (strcmp(json_string_value(json_object_get(s, "kind")), "kernel") &&
			    strcmp(json_string_value(json_object_get(s, "kind")), "memset"))
				continue;
			ck_assert_msg(!strstr(name, "fft2d") && !strstr(name, "gcgemm"), "%s", name);
			for (k = 0; k < n && strcmp(seen[k], name); k++)
				;
			if (k == n && n < 64)
				seen[n++] = name;
		}
		kernels = (json_int_t)n;
	}
	ck_assert_int_eq(kernels, 10);
	json_decref(j);
}
END_TEST

/*
 * Hostile clocks: rank 1's times about 9e18 ns (near the int64 limit) and rank 0's about 1e9,
 * three all_reduces each. The offset (about 9e18 ns) is estimated and applied exactly (the
 * arithmetic saturates where it cannot hold a result), every answer is 200 and whole, and the
 * path's segments still tile it.
 */
START_TEST(test_clock_offset_hostile)
{
	static const char ar_args[] = "\"Collective name\": \"allreduce\", \"Process Group Name\": \"0\","
		" \"In msg nelems\": 1024, \"Out msg nelems\": 1024, \"dtype\": \"Float\", \"Group size\": 2";
	struct tr t;
	json_t *j, *s;
	json_int_t at, sum = 0;
	size_t i;

	for (int rank = 0; rank < 2; rank++) {
		long base = rank ? 9000000000000000L : 1000000L;	/* us */
		tr_begin(&t, rank, 2);
		tr_step(&t, 1, base, 1000);
		for (int k = 0; k < 3; k++) {
			long ar = base + 100 + 200 * k + (rank ? 50 : 0);
			tr_host(&t, "cpu_op", "record_param_comms", ar, 20, ar_args);
			tr_launch(&t, ar + 5, AR_KERNEL, 9, base + 160 + 200 * k, 40, NULL);
		}
		tr_upload(&t, "wild", rank ? "rank1.json" : "rank0.json");
	}
	j = get("/api/v1/runs/wild/distributed", 200);
	ck_assert_int_eq(ival(json_object_get(j, "stragglers"), "matched"), 3);
	ck_assert_int_gt(ival(member(json_object_get(j, "ranks"), "rank", 1), "clock_offset_ns"), 8000000000000000000LL);
	ck_assert_int_eq(ival(member(json_object_get(j, "ranks"), "rank", 1), "clock_collectives"), 3);
	/* aligned, rank 1 arrives 50 us after rank 0 at each */
	json_array_foreach(json_object_get(json_object_get(j, "stragglers"), "instances"), i, s) {
		ck_assert_int_eq(ival(s, "last_rank"), 1);
		ck_assert_int_eq(ival(s, "skew_ns"), 50000);
	}
	json_decref(j);
	j = get("/api/v1/runs/wild/critical_path?step=1", 200);
	at = ival(j, "start_ns");
	json_array_foreach(json_object_get(j, "segments"), i, s) {
		ck_assert_int_eq(ival(s, "start_ns"), at);
		at += ival(s, "dur_ns");
		sum += ival(s, "dur_ns");
	}
	ck_assert_int_eq(sum, ival(j, "dur_ns"));
	ck_assert_int_le(ival(j, "dur_ns"), 1000000);
	json_decref(j);
}
END_TEST

START_TEST(test_critical_path_bad_params)
{
	static const char *const bad[] = { "", "?step=x", "?step=-1", "?step=" };
	json_t *j;

	upload_straggler();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char path[128];
		snprintf(path, sizeof(path), "/api/v1/runs/strag/critical_path%s", bad[i]);
		j = get(path, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_parameter");
		json_decref(j);
	}
	j = get("/api/v1/runs/strag/critical_path?step=7", 404);
	ck_assert_str_eq(tu_error_code(j), "step_not_found");
	json_decref(j);
	j = get("/api/v1/runs/nope/critical_path?step=1", 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
}
END_TEST

Suite *suite_distributed(void)
{
	Suite *s = suite_create("distributed");
	TCase *tc = tcase_create("distributed");

	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, test_two_ranks);
	tcase_add_test(tc, test_four_ranks_by_seq);
	tcase_add_test(tc, test_four_ranks_chunked);
	tcase_add_test(tc, test_hta_sampled_pair);
	tcase_add_test(tc, test_findings);
	tcase_add_test(tc, test_bad_params);
	tcase_add_test(tc, test_critical_path_straggler);
	tcase_add_test(tc, test_critical_path_one_rank);
	tcase_add_test(tc, test_critical_path_chain);
	tcase_add_test(tc, test_compare_distributed);
	tcase_add_test(tc, test_critical_path_hta_sampled);
	tcase_add_test(tc, test_critical_path_bad_params);
	tcase_add_test(tc, test_critical_path_gloo);
	tcase_add_test(tc, test_clock_offset_gloo);
	tcase_add_test(tc, test_critical_path_hta_alexnet);
	tcase_add_test(tc, test_clock_offset_hostile);
	suite_add_tcase(s, tc);
	return s;
}
