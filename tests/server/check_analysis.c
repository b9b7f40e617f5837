/*
 * check_analysis.c: steps, breakdowns, operator and kernel tables and the
 * diagnosis rules (server/analysis/), through the real ingest and store:
 * against the fixtures' independently computed figures, and against small
 * synthetic traces built here, one per rule, each way.
 */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/analysis.h"
#include "analysis/compare.h"
#include "analysis/diagnosis.h"
#include "analysis/distributed.h"
#include "analysis/memory.h"
#include "analysis/runs.h"
#include "hmap.h"
#include "pipeline/ingest.h"
#include "ingest/timeline.h"
#include "ingest/trace.h"
#include "reads.h"
#include "store/store.h"
#include "suites.h"
#include "testutil.h"

static char *dir;
static struct store *st;

static void setup(void)
{
	struct tp_errbuf err = { 0 };
	char db[512];

	dir = tu_tmpdir();
	ck_assert_ptr_nonnull(dir);
	snprintf(db, sizeof(db), "%s/t.db", dir);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
}

static void teardown(void)
{
	store_close(st);
	tu_rmtree(dir);
	free(dir);
}

static void ingest(const char *run, const void *data, size_t len)
{
	struct ingest_request req = { .run = run, .rank = 0, .name = "t.json" };
	struct ingest_result res;

	ingest_buffer(st, NULL, &req, data, len, &res);
	ck_assert_msg(res.rc == 0, "ingest %s: %s", run, res.err.msg);
}

static void ingest_fixture(const char *run, const char *rel)
{
	char *path = tu_fixture(rel);
	size_t len;
	uint8_t *b = tu_read_file(path, &len);

	ck_assert_msg(b != NULL, "cannot read %s", path);
	ingest(run, b, len);
	free(b);
	free(path);
}

enum q { Q_STEPS, Q_OPS_CPU, Q_OPS_GPU, Q_KERNELS, Q_MEMCPY, Q_RANKS };

static json_t *query(const char *run, enum q what)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *j = NULL;

	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	switch (what) {
	case Q_STEPS: j = read_steps(r, run, 0, &err); break;
	case Q_OPS_CPU: j = read_ops(r, run, 0, AN_DEV_CPU, "self_ns", 100000, &err); break;
	case Q_OPS_GPU: j = read_ops(r, run, 0, AN_DEV_GPU, "self_ns", 100000, &err); break;
	case Q_KERNELS: j = read_kernels(r, run, 0, AN_GPU_KERNEL, 100000, &err); break;
	case Q_MEMCPY: j = read_kernels(r, run, 0, AN_GPU_MEMCPY, 100000, &err); break;
	case Q_RANKS: j = read_ranks(r, run, &err); break;
	}
	store_reader_close(r);
	ck_assert_msg(j != NULL, "query %s: %s", run, err.msg);
	return j;
}

static json_int_t iget(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

/* Every step's components are non-negative and sum to its duration. */
static void check_breakdown_sums(const char *run, size_t nsteps)
{
	json_t *j = query(run, Q_STEPS), *s;
	size_t i;

	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), nsteps);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		json_t *bd = json_object_get(s, "breakdown_ns");
		json_int_t sum = 0;
		for (int c = 0; c < AN_NCOMP; c++) {
			json_int_t v = iget(bd, an_comp_names[c]);
			ck_assert_int_ge(v, 0);
			sum += v;
		}
		ck_assert_int_eq(sum, iget(s, "dur_ns"));
		ck_assert_int_gt(sum, 0);
	}
	json_decref(j);
}

START_TEST(test_v100_kernels_and_steps)
{
	json_t *k, *top;

	ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	k = query("v100", Q_KERNELS);
	/* shared/fixtures/README.md: 19,370 kernels, 977,859 us; the top one is NCCL's all-reduce */
	ck_assert_int_eq(iget(json_object_get(k, "total"), "calls"), 19370);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "total_ns"), 977859000);
	top = json_array_get(json_object_get(k, "kernels"), 0);
	ck_assert_msg(!strncmp(json_string_value(json_object_get(top, "name")), "ncclKernel_AllReduce_RING_LL_Sum_float(", 39),
		      "top kernel: %s", json_string_value(json_object_get(top, "name")));
	ck_assert_int_eq(iget(top, "total_ns"), 357343000);
	ck_assert_int_eq(iget(top, "mean_ns"), iget(top, "total_ns") / iget(top, "calls"));
	ck_assert_int_ge(iget(top, "max_ns"), iget(top, "mean_ns"));
	ck_assert(json_is_real(json_object_get(top, "blocks_per_sm")));
	json_decref(k);
	check_breakdown_sums("v100", 5);
}
END_TEST

START_TEST(test_resnet_and_nccl_figures)
{
	json_t *k;

	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	k = query("resnet", Q_KERNELS);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "calls"), 8772);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "total_ns"), 591532000);
	json_decref(k);
	check_breakdown_sums("resnet", 6);
	{
		/* PyTorch 1.9 [memory] events have neither Addr nor totals: no category goes below zero
		 * (the web helper saw parameter at -952,836,608 before the baseline was estimated) */
		struct tp_errbuf err = { 0 };
		struct store_reader *r;
		json_t *m, *a;
		size_t i, c;
		ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
		m = read_memory(r, "resnet", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
		store_reader_close(r);
		ck_assert_msg(m != NULL, "%s", err.msg);
		for (c = 0; c < MEM_NCAT; c++)
			json_array_foreach(json_object_get(json_object_get(m, "categories"), mem_cat_names[c]), i, a)
				ck_assert_msg(json_integer_value(a) >= 0, "%s at %zu: %lld", mem_cat_names[c], i,
					      (long long)json_integer_value(a));
		json_decref(m);
	}


	ingest_fixture("nccl", "traces/hta_nccl_rel_ts.json.gz");
	k = query("nccl", Q_KERNELS);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "calls"), 2700);
	/* 162,532.3 us: float-us times, summed exactly in ns */
	ck_assert_int_ge(iget(json_object_get(k, "total"), "total_ns"), 162532250);
	ck_assert_int_le(iget(json_object_get(k, "total"), "total_ns"), 162532350);
	json_decref(k);
	check_breakdown_sums("nccl", 3);
}
END_TEST

/* Collective kinds and element sizes as PyTorch and NCCL write them; nccl-tests' bus factors. */
START_TEST(test_collective_names)
{
	static const struct { const char *s; int k; } kinds[] = {
		{ "allreduce", AN_CK_ALL_REDUCE }, { "nccl:all_reduce", AN_CK_ALL_REDUCE }, { "_allgather_base", AN_CK_ALL_GATHER },
		{ "allgather_into_tensor_coalesced", AN_CK_ALL_GATHER }, { "_reduce_scatter_base", AN_CK_REDUCE_SCATTER },
		{ "reduce_scatter_tensor_coalesced", AN_CK_REDUCE_SCATTER }, { "alltoall_base", AN_CK_ALL_TO_ALL },
		{ "nccl:all_to_all", AN_CK_ALL_TO_ALL }, { "broadcast", AN_CK_BROADCAST }, { "reduce", AN_CK_REDUCE },
		{ "send", AN_CK_SEND }, { "recv", AN_CK_RECV }, { "barrier", AN_CK_BARRIER }, { "gather", AN_CK_GATHER },
		{ "scatter", AN_CK_SCATTER },
		{ "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", AN_CK_ALL_REDUCE },
		{ "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", AN_CK_REDUCE_SCATTER },
		{ "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", AN_CK_SEND_RECV },
		{ "ncclKernel_Broadcast_RING_LL_Sum_int8_t", AN_CK_BROADCAST }, { "ncclDevKernel_Generic", -1 }, { "", -1 },
	};
	static const struct { const char *s; int n; } sizes[] = {
		{ "Float", 4 }, { "BFloat16", 2 }, { "Half", 2 }, { "c10::Half", 2 }, { "Double", 8 }, { "Long", 8 },
		{ "long int", 8 }, { "Int", 4 }, { "signed char", 1 }, { "Byte", 1 }, { "Bool", 1 },
		{ "Float8_e4m3fn", 1 }, { "ComplexFloat", 8 }, { "Quaternion", 0 }, { "", 0 },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		ck_assert_msg(an_coll_kind(kinds[i].s) == kinds[i].k, "%s: %d", kinds[i].s, an_coll_kind(kinds[i].s));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		ck_assert_msg(an_dtype_size(sizes[i].s) == sizes[i].n, "%s", sizes[i].s);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_ALL_REDUCE, 8), 1.75, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_ALL_GATHER, 8), 0.875, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_REDUCE_SCATTER, 4), 0.75, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_ALL_TO_ALL, 2), 0.5, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_BROADCAST, 8), 1, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_SEND, 2), 1, 1e-12);
	ck_assert_double_eq_tol(dist_busbw_factor(AN_CK_ALL_REDUCE, 0), 0, 1e-12);
}
END_TEST

/*
 * dist_align on a hand-made input: ranks 0, 1 and 2; rank 1's clock 5 ms ahead, its four
 * all_reduce ends 5 ms and -2 to +6 ns off rank 0's (median +5,000,002 ns); rank 2 shares two
 * collectives only (fewer than DIST_CLOCK_MIN): not estimated, 0, named in clock.note.
 */
START_TEST(test_dist_align)
{
	static int ranks[] = { 0, 1, 2 };
	static const int64_t jitter[4] = { 0, 4, -2, 6 };	/* ns, rank 1's end against rank 0's */
	struct dist_coll c[10];
	struct dist_step steps[3] = { { .rank = 0, .step = 1, .start_ns = 1000000 },
				      { .rank = 1, .step = 1, .start_ns = 6000100 },
				      { .rank = 2, .step = 1, .start_ns = 1000200 } };
	struct dist_input in = { 0 };
	json_t *d, *r;
	size_t n = 0;

	for (int rank = 0; rank < 3; rank++)
		for (int k = 0; k < (rank == 2 ? 2 : 4); k++) {
			int64_t shift = rank == 1 ? 5000000 + jitter[k] : 0;
			c[n++] = (struct dist_coll){ .rank = rank, .step = 1, .kind = AN_CK_ALL_REDUCE, .pg = "0", .seq = k,
						     .launch_ns = 1100000 + 100000 * k + 1000 * rank + (rank == 1 ? 5000000 : 0),
						     .start_ns = 1150000 + 100000 * k + shift, .end_ns = 1180000 + 100000 * k + shift,
						     .time_ns = 30000, .kernels = 1, .bytes = -1 };
		}
	in.ranks = ranks;
	in.nranks = 3;
	in.colls = c;
	in.ncolls = n;
	in.steps = steps;
	in.nsteps = 3;
	ck_assert_int_eq(dist_align(&in), 0);
	ck_assert_int_eq(in.clock_off[0], 0);
	ck_assert_int_eq(in.clock_off[1], 5000002);	/* between the middle two, 5,000,000 and 5,000,004 */
	ck_assert_uint_eq(in.clock_n[1], 4);
	ck_assert_int_eq(in.clock_off[2], 0);
	ck_assert_uint_eq(in.clock_n[2], 0);
	ck_assert_int_eq(steps[1].start_ns, 6000100 - 5000002);
	ck_assert_int_eq(c[4].launch_ns, 1101000 - 2);	/* rank 1's first: 1 us after rank 0's, less 2 ns */
	ck_assert_int_eq(c[4].end_ns, 1180000 - 2);
	/* once only */
	ck_assert_int_eq(dist_align(&in), 0);
	ck_assert_int_eq(steps[1].start_ns, 6000100 - 5000002);
	ck_assert_ptr_nonnull(d = distributed_run(&in, 0, 0));
	r = json_array_get(json_object_get(d, "ranks"), 1);
	ck_assert_int_eq(iget(r, "clock_offset_ns"), 5000002);
	ck_assert_int_eq(iget(r, "clock_collectives"), 4);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(d, "clock"), "note")), "rank 2"));
	/* rank 2 launches last at each of its two (1 us after rank 1): who is last survives the alignment */
	r = json_array_get(json_object_get(json_object_get(d, "stragglers"), "instances"), 0);
	ck_assert_int_eq(iget(r, "last_rank"), 2);
	json_decref(d);
	tp_free(in.clock_off);
	tp_free(in.clock_n);
}
END_TEST

/*
 * hta_nccl_rel_ts's collectives. From the file (Python, Decimal): its NCCL kernels carry the args;
 * allreduce: 15 kernels, max(In, Out msg nelems) x 4 (Float) summed 306,684,384 B in
 * 46,762,159 ns; broadcast: 6, 638,712 B in 114,334 ns; group "0" of 2.
 */
START_TEST(test_nccl_collectives)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct dist_input in;
	json_t *d, *c;
	size_t i;
	int seen = 0;

	ingest_fixture("nccl", "traces/hta_nccl_rel_ts.json.gz");
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_dist_input(r, "nccl", &in, &err), 0);
	ck_assert_uint_eq(in.ncolls, 21);
	ck_assert_ptr_nonnull(d = distributed_run(&in, 0, 0));
	json_array_foreach(json_object_get(d, "collectives"), i, c) {
		const char *kind = json_string_value(json_object_get(c, "kind"));
		int ar = !strcmp(kind, "all_reduce");
		ck_assert_msg(ar || !strcmp(kind, "broadcast"), "%s", kind);
		seen |= ar ? 1 : 2;
		ck_assert_str_eq(json_string_value(json_object_get(c, "pg")), "0");
		ck_assert_int_eq(iget(c, "group_size"), 2);
		ck_assert_int_eq(iget(c, "calls"), ar ? 15 : 6);
		ck_assert_int_eq(iget(c, "bytes"), ar ? 306684384 : 638712);
		ck_assert_int_eq(iget(c, "time_ns"), ar ? 46762159 : 114334);
		ck_assert_double_eq_tol(json_real_value(json_object_get(c, "algbw_gbps")),
					ar ? 306684384.0 / 46762159 : 638712.0 / 114334, 1e-9);
	}
	ck_assert_int_eq(seen, 3);
	/* one rank: nothing to match */
	ck_assert_int_eq(iget(json_object_get(d, "stragglers"), "matched"), 0);
	json_decref(d);
	dist_input_release(&in);
	store_reader_close(r);
}
END_TEST

/* GPU time of operators: all of it comes from kernels, and an op's total covers its self. */
START_TEST(test_gpu_time_of_ops)
{
	json_t *g, *k, *o, *c;
	size_t i;
	json_int_t self = 0, gpu_all;

	ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	g = query("v100", Q_OPS_GPU);
	k = query("v100", Q_KERNELS);
	json_array_foreach(json_object_get(g, "ops"), i, o) {
		ck_assert_int_le(iget(o, "self_ns"), iget(o, "total_ns"));
		self += iget(o, "self_ns");
	}
	ck_assert_int_eq(self, iget(json_object_get(g, "total"), "self_ns"));
	/* GPU self time is attributed kernel, memcpy and memset time: never more than there is */
	c = query("v100", Q_MEMCPY);
	gpu_all = iget(json_object_get(k, "total"), "total_ns") + iget(json_object_get(c, "total"), "total_ns");
	ck_assert_int_le(self, gpu_all + 100000000 /* memsets */);
	/* and nearly all kernel time finds its operator through the correlation id */
	ck_assert_int_ge(self, iget(json_object_get(k, "total"), "total_ns") * 95 / 100);
	/* the all-reduce kernels are launched by nccl:all_reduce */
	o = json_array_get(json_object_get(g, "ops"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(o, "name")), "nccl:all_reduce");
	ck_assert_int_eq(iget(o, "self_ns"), 357343000);
	json_decref(g);
	json_decref(k);
	json_decref(c);
}
END_TEST

/* ---- op self times against each thread's busy time, computed here independently ---- */

struct busy {
	struct trace_parser *tp;
	struct analysis *an;
	int64_t key[256][2];		/* (pid, tid) in first-seen order */
	size_t nthreads;
	int64_t (*span)[2];		/* per thread: spans, appended */
	size_t *nspan, *cap;
	int64_t **spans;
	int fail_ok;			/* spill_event(): an analysis error stops the parse */
	struct tp_errbuf an_err;
};

/* Two ProfilerStep spans over one instant: the one left empty never overlaps the next (the fuzzer's find). */
START_TEST(test_steps_tied)
{
	char *path = tu_source_path("tests/hostile/trace/steps_tied.json");
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j, *steps, *x;
	json_int_t end = INT64_MIN;

	ck_assert_ptr_nonnull(b);
	ingest("tied", b, len);
	j = query("tied", Q_STEPS);
	steps = json_object_get(j, "steps");
	ck_assert_uint_eq(json_array_size(steps), 3);
	json_array_foreach(steps, i, x) {
		ck_assert_int_ge(iget(x, "start_ns"), end);
		ck_assert_int_ge(iget(x, "dur_ns"), 0);
		end = iget(x, "start_ns") + iget(x, "dur_ns");
	}
	/* #1 from 1 us to its end at 101 us; #3 empty there; #2 from there to its kernel's end (53 us) or its own (102 us) */
	ck_assert_int_eq(iget(json_array_get(steps, 0), "step"), 1);
	ck_assert_int_eq(iget(json_array_get(steps, 1), "step"), 3);
	ck_assert_int_eq(iget(json_array_get(steps, 1), "dur_ns"), 0);
	ck_assert_int_eq(iget(json_array_get(steps, 1), "start_ns"), 101000);
	ck_assert_int_eq(iget(json_array_get(steps, 2), "step"), 2);
	ck_assert_int_eq(iget(json_array_get(steps, 2), "start_ns"), 101000);
	ck_assert_int_eq(iget(json_array_get(steps, 2), "dur_ns"), 1000);
	json_decref(j);
	free(b);
	free(path);
}
END_TEST

static const char *str_of(void *p, uint32_t id)
{
	const char *s = trace_string(p, id);

	return s ? s : "";
}

/* The result's collectives, read back from their runs into an array the caller frees. */
static struct an_coll *colls_of(const struct an_result *r)
{
	struct an_coll *v = calloc(r->ncolls + 1, sizeof(*v));
	const struct an_coll *c;
	struct rcur cur;
	size_t n = 0;

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(an_colls_open(r, &cur), 0);
	for (; (c = rcur_next(&cur)); n++)
		if (n < r->ncolls)
			v[n] = *c;
	ck_assert_int_eq(cur.err, 0);
	rcur_close(&cur);
	ck_assert_uint_eq(n, r->ncolls);
	return v;
}

static int busy_string(void *p, uint32_t id, const char *s, size_t len)
{
	(void)p, (void)id, (void)s, (void)len;
	return 0;
}

static int busy_event(void *p, const struct tp_event *e)
{
	struct busy *b = p;
	struct tp_errbuf err = { 0 };
	const char *cat = str_of(b->tp, e->cat), *name = str_of(b->tp, e->name);
	size_t t;

	ck_assert_int_eq(analysis_event(b->an, e, &err), 0);
	if (e->ph != 'X' || !(e->have & TH_TS) || !strncmp(name, "ProfilerStep#", 13))
		return 0;
	if (strcmp(cat, "cpu_op") && strcmp(cat, "user_annotation") && strcmp(cat, "cuda_runtime") &&
	    strcmp(cat, "cuda_driver") && strcmp(cat, "Operator") && strcmp(cat, "Runtime"))
		return 0;
	/* pid and tid may be strings: then their interned ids stand for them */
	int64_t pid = e->pid_sid ? -(int64_t)e->pid_sid : e->pid, tid = e->tid_sid ? -(int64_t)e->tid_sid : e->tid;
	for (t = 0; t < b->nthreads && (b->key[t][0] != pid || b->key[t][1] != tid); t++)
		;
	if (t == b->nthreads) {
		ck_assert_uint_lt(t, 256);
		b->key[t][0] = pid;
		b->key[t][1] = tid;
		b->nthreads++;
	}
	if (b->nspan[t] + 2 > b->cap[t]) {
		b->cap[t] = b->cap[t] ? b->cap[t] * 2 : 1024;
		b->spans[t] = realloc(b->spans[t], b->cap[t] * sizeof(int64_t));
		ck_assert_ptr_nonnull(b->spans[t]);
	}
	b->spans[t][b->nspan[t]++] = e->ts_ns;
	b->spans[t][b->nspan[t]++] = e->ts_ns + ((e->have & TH_DUR) && e->dur_ns > 0 ? e->dur_ns : 0);
	return 0;
}

/* every event to the analysis only */
static int spill_event(void *p, const struct tp_event *e)
{
	struct busy *b = p;
	int rc = analysis_event(b->an, e, &b->an_err);

	if (!b->fail_ok)
		ck_assert_msg(rc == 0, "%s", b->an_err.msg);
	return rc;
}

static int cmp_pair(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static int64_t union_len(int64_t *v, size_t n)
{
	int64_t len = 0, s = 0, e = INT64_MIN;

	qsort(v, n / 2, 2 * sizeof(int64_t), cmp_pair);
	for (size_t i = 0; i < n; i += 2) {
		if (v[i] > e) {
			if (e > s)
				len += e - s;
			s = v[i];
			e = v[i + 1];
		} else if (v[i + 1] > e) {
			e = v[i + 1];
		}
	}
	if (e > s)
		len += e - s;
	return len;
}

START_TEST(test_self_time_within_thread_busy_time)
{
	static const char *const files[] = { "traces/hta_v100_train_memory.json.gz",
					     "traces/kineto_resnet50_workers0.json.gz",
					     "traces/hta_nccl_rel_ts.json.gz" };
	struct busy b = { 0 };
	struct tp_errbuf err = { 0 };
	const struct an_result *res;
	char *path = tu_fixture(files[_i]);
	size_t len, glen, t;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	struct trace_sink sink = { .string = busy_string, .event = busy_event, .payload = &b };
	int64_t self_all = 0;

	ck_assert_ptr_nonnull(json);
	b.nspan = calloc(256, sizeof(size_t));
	b.cap = calloc(256, sizeof(size_t));
	b.spans = calloc(256, sizeof(int64_t *));
	b.tp = trace_parser_new(&trace_default_limits, &sink);
	b.an = analysis_new(str_of, b.tp);
	ck_assert_int_eq(trace_parser_feed(b.tp, json, glen, &err), 0);
	ck_assert_int_eq(trace_parser_finish(b.tp, &err), 0);
	ck_assert_int_eq(analysis_finish(b.an, &res, &err), 0);
	ck_assert_uint_eq(res->nthreads, b.nthreads);
	for (t = 0; t < b.nthreads; t++) {
		int64_t busy = union_len(b.spans[t], b.nspan[t]);
		ck_assert_msg(res->thread_self_ns[t] <= busy, "%s thread %zu: self %lld > busy %lld", files[_i], t,
			      (long long)res->thread_self_ns[t], (long long)busy);
		ck_assert_int_ge(res->thread_self_ns[t], 0);
		self_all += res->thread_self_ns[t];
		free(b.spans[t]);
	}
	ck_assert_int_gt(self_all, 0);
	/* and the operator table adds up to the same self time */
	int64_t ops_self = 0;
	for (size_t i = 0; i < res->nops; i++)
		if (res->ops[i].device == AN_DEV_CPU)
			ops_self += res->ops[i].self_ns;
	ck_assert_int_eq(ops_self, self_all);
	analysis_free(b.an);
	trace_parser_free(b.tp);
	free(b.nspan);
	free(b.cap);
	free(b.spans);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/* ---- synthetic traces: one knob per diagnosis rule ---- */

struct synth {
	int steps;
	int64_t step_us, drift_us;	/* step i lasts step_us + i * drift_us */
	int kernels;
	int64_t kernel_us;
	int64_t dataloader_us, cpu_us, sync_us, memcpy_us;
	const char *memcpy_name;	/* NULL: "Memcpy DtoH (Device -> Pageable)" */
	int64_t start_us;		/* added to the first step's start */
	int64_t act_bytes;		/* per step: allocated at its start, freed at its end */
	int64_t leak_bytes;		/* per step: allocated and never freed */
	int64_t capacity;		/* deviceProperties totalGlobalMem of device 0; 0: none */
	int64_t stub_us;		/* a last ProfilerStep this long that launches nothing */
	int64_t nccl_us;		/* per step: an all-reduce on stream 8 from 1 ms before the kernels end */
	int no_steps;			/* leave out the ProfilerStep spans */
	int cut;			/* the last step's last kernels: launched, never recorded */
};

/* A healthy loop: 10 ms steps, the GPU busy 90% of it with 1 ms kernels. */
static const struct synth healthy = { .steps = 10, .step_us = 10000, .kernels = 9, .kernel_us = 1000, .cpu_us = 100 };

struct text {
	char *p;
	size_t n, cap;
};

static void emit(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
		va_end(ap);
		if ((size_t)n < t->cap - t->n)
			break;
		t->cap = t->cap * 2 + (size_t)n + 1024;
		t->p = realloc(t->p, t->cap);
		ck_assert_ptr_nonnull(t->p);
	}
	t->n += (size_t)n;
}

static void span(struct text *t, const char *cat, const char *name, int pid, int tid, int64_t ts, int64_t dur,
		 const char *args)
{
	emit(t, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,"
		"\"args\":{%s}}", t->n > 20 ? ",\n" : "", cat, name, pid, tid, (long long)ts, (long long)dur, args);
}

static void mem_event(struct text *t, int tid, int64_t ts, int64_t addr, int64_t bytes, int64_t total, int idx);

/* The trace of s: host ops on pid 1 tid 1, GPU work on pid 0 stream 7; times in us from 1e9. */
static char *synth_trace(const struct synth *s, size_t *len)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	int64_t t0 = 1000000000 + s->start_us, corr = 1, total = 0;
	char args[96];
	int idx = 0;

	emit(&t, "{\"traceEvents\":[");
	for (int i = 0; i < s->steps; i++) {
		int64_t dur = s->step_us + i * s->drift_us, x = t0, g;
		char name[32];
		snprintf(name, sizeof(name), "ProfilerStep#%d", i);
		if (!s->no_steps)
			span(&t, "user_annotation", name, 1, 1, t0, dur, "");
		if (s->dataloader_us)
			span(&t, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 1,
			     x, s->dataloader_us, "");
		x += s->dataloader_us;
		if (s->cpu_us)
			span(&t, "cpu_op", "aten::cat", 1, 1, x, s->cpu_us, "");
		x += s->cpu_us;
		if (s->act_bytes) {
			mem_event(&t, 1, t0 + 1, 0x10000000 + i * 0x1000, s->act_bytes, total += s->act_bytes, idx++);
			mem_event(&t, 1, t0 + dur - 1, 0x10000000 + i * 0x1000, -s->act_bytes, total -= s->act_bytes, idx++);
		}
		if (s->leak_bytes)
			mem_event(&t, 1, t0 + 2, 0x20000000 + i * 0x1000, s->leak_bytes, total += s->leak_bytes, idx++);
		/* one operator launches every kernel, 1 us per launch */
		span(&t, "cpu_op", "aten::mm", 1, 1, x, s->kernels + 1, "");
		g = x + 1;
		for (int k = 0; k < s->kernels; k++, corr++) {
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, x + k, 1, args);
			if (g < x + k + 1)
				g = x + k + 1;
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":7", (long long)corr);
			if (i < s->steps - 1 || k < s->kernels - s->cut)
				span(&t, "kernel", "gemm_kernel", 0, 7, g, s->kernel_us, args);
			g += s->kernel_us;
		}
		x += s->kernels + 1;
		if (s->nccl_us) {	/* the collective on the host launches the kernel */
			span(&t, "cpu_op", "nccl:all_reduce", 1, 1, x, 2, "");
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, x, 1, args);
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":8", (long long)corr++);
			span(&t, "kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
			     0, 8, g - 1000, s->nccl_us, args);
			x += 2;
		}
		if (s->memcpy_us) {
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			span(&t, "cuda_runtime", "cudaMemcpyAsync", 1, 1, x, 1, args);
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":7", (long long)corr++);
			span(&t, "gpu_memcpy", s->memcpy_name ? s->memcpy_name : "Memcpy DtoH (Device -> Pageable)", 0, 7, g,
			     s->memcpy_us, args);
			x += 1;
		}
		if (s->sync_us) {
			span(&t, "cpu_op", "aten::item", 1, 1, x, s->sync_us, "");
			span(&t, "cpu_op", "aten::_local_scalar_dense", 1, 1, x, s->sync_us, "");
			span(&t, "cuda_runtime", "cudaStreamSynchronize", 1, 1, x + 1, s->sync_us - 2, "");
		}
		t0 += dur;
	}
	if (s->stub_us) {
		span(&t, "user_annotation", "ProfilerStep#999", 1, 1, t0, s->stub_us, "");
		span(&t, "cpu_op", "aten::zeros", 1, 1, t0 + 1, s->stub_us / 2, "");
	}
	emit(&t, "]");
	if (s->capacity)
		emit(&t, ",\"deviceProperties\":[{\"id\":0,\"name\":\"Synthetic GPU\",\"totalGlobalMem\":%lld}]",
		     (long long)s->capacity);
	emit(&t, "}");
	*len = t.n;
	return t.p;
}

/* Diagnose s; returns the findings (new reference). */
static json_t *diagnose(const char *run, const struct synth *s)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct diag_input in;
	int64_t *durs;
	size_t len;
	char *text = synth_trace(s, &len);
	json_t *j;

	ingest(run, text, len);
	free(text);
	check_breakdown_sums(run, s->no_steps ? 1 : (size_t)s->steps + (s->stub_us > 0));
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_diag_input(r, run, -1, &in, &durs, NULL, &err), 0);
	j = diagnosis_run(&in);
	free(durs);
	store_reader_close(r);
	ck_assert_ptr_nonnull(j);
	return j;
}

static json_t *finding(json_t *d, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach(json_object_get(d, "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	return NULL;
}

START_TEST(test_healthy_trace_has_no_findings)
{
	json_t *d = diagnose("healthy", &healthy), *s;

	ck_assert_msg(json_array_size(json_object_get(d, "findings")) == 0, "findings: %s",
		      json_dumps(d, JSON_COMPACT));
	json_decref(d);
	/* and its breakdown is what the trace was built with */
	d = query("healthy", Q_STEPS);
	s = json_array_get(json_object_get(d, "steps"), 0);
	ck_assert_int_eq(iget(json_object_get(s, "breakdown_ns"), "kernel"), 9000000);
	ck_assert_int_eq(iget(json_object_get(s, "breakdown_ns"), "cpu"), 100000);		/* aten::cat */
	ck_assert_int_eq(iget(json_object_get(s, "breakdown_ns"), "runtime"), 1000);	/* the first launch */
	ck_assert_int_eq(iget(json_object_get(s, "breakdown_ns"), "idle"), 10000000 - 9000000 - 101000);
	ck_assert_int_eq(iget(json_object_get(s, "breakdown_ns"), "dataloader"), 0);
	json_decref(d);
}
END_TEST

/* Each rule: its knob turned fires it with its evidence; the healthy trace (above) does not. */
/* The Lightning and nvidia-smi rules at their thresholds, from a diag_input made here. */
START_TEST(test_rule_reports_thresholds)
{
	struct diag_action acts[] = {
		{ "[Callback]ModelCheckpoint{'monitor': 'val_loss'}.on_train_epoch_end", 3, 1500000000, 4500000000, 900 },
		{ "on_validation_epoch_end", 2, DIAG_CALLBACK_SLOW_NS, 2 * DIAG_CALLBACK_SLOW_NS, 500 },	/* not over */
		{ "[Callback]TQDMProgressBar.setup", -1, -1, 1200000000, -1 },	/* AdvancedProfiler: its total */
		{ "optimizer_step_and_closure_0", 10, 1000, 10000, DIAG_OPTIMIZER_SHARE_BP },	/* not over */
		{ "validation_step", 5, 1000, 5000, DIAG_VALIDATION_SHARE_BP + 1 },
	};
	struct diag_gpu gpus[] = {
		{ .index = 0, .util_samples = 4, .util_low = 1, .util_mean_pct = 79.9, .mem_used_bytes = 95, .mem_total_bytes = 100 },
		{ .index = 1, .util_samples = 4, .util_low = 0, .util_mean_pct = DIAG_GPU_UTIL_LOW_PCT, .mem_used_bytes = 94.9,
		  .mem_total_bytes = 100 },
		{ .index = 2, .util_samples = 0, .util_mean_pct = NAN },	/* no utilization column */
	};
	struct diag_input in = { .actions = acts, .nactions = 5, .gpus = gpus, .ngpus = 3 };
	json_t *d = diagnosis_run(&in), *f, *e;

	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(f = finding(d, "lightning_slow_callback"));
	e = json_object_get(json_object_get(f, "evidence"), "callbacks");
	ck_assert_uint_eq(json_array_size(e), 2);	/* the checkpoint (1.5 s a call) and the 1.2 s total */
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "title")), "ModelCheckpoint"));
	ck_assert_ptr_null(finding(d, "lightning_optimizer_step"));
	ck_assert_ptr_nonnull(finding(d, "lightning_validation"));
	/* GPU 0 under 80 % and at 95 % of its memory; GPU 1 at 80 % and 94.9 %: neither */
	ck_assert_ptr_nonnull(f = finding(d, "gpu_log_low_utilization"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "gpu")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "info");
	ck_assert_ptr_nonnull(f = finding(d, "gpu_log_memory_full"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "gpu")), 0);
	ck_assert_int_eq(json_array_size(json_object_get(d, "findings")), 5);	/* and no_trace */
	json_decref(d);
	acts[3].share_bp++;
	d = diagnosis_run(&in);
	ck_assert_ptr_nonnull(finding(d, "lightning_optimizer_step"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_dataloader)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.dataloader_us = 2000;
	s.kernels = 7;
	d = diagnose("dl", &s);
	ck_assert_ptr_nonnull(f = finding(d, "dataloader"));
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "warning");
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "dataloader_ns"), 10 * 2000000);
	ck_assert_ptr_null(finding(d, "low_gpu_utilization"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_low_util_not_cpu_bound)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.kernels = 3;		/* GPU busy 30%, the host mostly idle too */
	d = diagnose("util", &s);
	ck_assert_ptr_nonnull(f = finding(d, "low_gpu_utilization"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "gpu_utilization_pct")) < 31);
	ck_assert_ptr_null(finding(d, "cpu_bound"));
	ck_assert_ptr_null(finding(d, "dataloader"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_cpu_bound)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.kernels = 1;
	s.cpu_us = 8000;
	d = diagnose("cpu", &s);
	ck_assert_ptr_nonnull(f = finding(d, "cpu_bound"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "ratio")) > 7.9);
	json_decref(d);
}
END_TEST

START_TEST(test_rule_memcpy)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.kernels = 6;
	s.memcpy_us = 2000;
	d = diagnose("copy", &s);
	ck_assert_ptr_nonnull(f = finding(d, "memcpy_share"));
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "dtoh_calls"), 10);
	ck_assert(iget(json_object_get(f, "evidence"), "pageable_ns") > 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "pin_memory=True"));
	ck_assert_ptr_null(finding(d, "low_gpu_utilization"));
	json_decref(d);

	/* device-to-device copies: no pin_memory advice, which would not help them */
	s.memcpy_name = "Memcpy DtoD (Device -> Device)";
	d = diagnose("copy-dtod", &s);
	ck_assert_ptr_nonnull(f = finding(d, "memcpy_share"));
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "dtod_ns"), iget(json_object_get(f, "evidence"), "memcpy_ns"));
	ck_assert_ptr_null(strstr(json_string_value(json_object_get(f, "advice")), "pin_memory"));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "device to device"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_sync)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.kernels = 8;
	s.sync_us = 1000;
	d = diagnose("sync", &s);
	ck_assert_ptr_nonnull(f = finding(d, "gpu_sync"));
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "warning");
	/* item -> _local_scalar_dense -> cudaStreamSynchronize: one wait per step, counted once */
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "sync_calls"), 10);
	json_decref(d);
}
END_TEST

START_TEST(test_rule_drift)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.drift_us = 500;	/* 10 ms to 14.5 ms */
	d = diagnose("drift", &s);
	ck_assert_ptr_nonnull(f = finding(d, "step_drift"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "rise_pct")) > 40);
	json_decref(d);
	/* noise without a trend is not drift */
	s.drift_us = 0;
	s.steps = 6;
	d = diagnose("nodrift", &s);
	ck_assert_ptr_null(finding(d, "step_drift"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_tiny_kernels)
{
	struct synth s = healthy;
	json_t *d, *f;

	s.kernels = 300;
	s.kernel_us = 5;
	d = diagnose("tiny", &s);
	ck_assert_ptr_nonnull(f = finding(d, "tiny_kernels"));
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "tiny_calls"), 3000);
	json_decref(d);
	/* many kernels that are not tiny do not fire it */
	s.kernels = 80;
	s.kernel_us = 100;
	d = diagnose("nottiny", &s);
	ck_assert_ptr_null(finding(d, "tiny_kernels"));
	json_decref(d);
}
END_TEST

START_TEST(test_resnet_dataloader_finding)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct diag_input in;
	int64_t *durs;
	json_t *d, *f;

	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_diag_input(r, "resnet", -1, &in, &durs, NULL, &err), 0);
	d = diagnosis_run(&in);
	free(durs);
	ck_assert_ptr_nonnull(f = finding(d, "dataloader"));
	double share = json_real_value(json_object_get(json_object_get(f, "evidence"), "dataloader_pct"));
	ck_assert_msg(share > 5 && share < 100, "share %f%%", share);
	json_decref(d);
	/* the V100 run loads no data in its steps */
	ck_assert_int_eq(store_diag_input(r, "v100", -1, &in, &durs, NULL, &err), 0);
	d = diagnosis_run(&in);
	free(durs);
	ck_assert_ptr_null(finding(d, "dataloader"));
	json_decref(d);
	store_reader_close(r);
}
END_TEST

START_TEST(test_ranks_name_the_straggler)
{
	struct ingest_request req = { .run = "multi", .name = "t.json" };
	struct ingest_result res;
	struct synth s = healthy;
	size_t len;
	char *text;
	json_t *j;

	for (int rank = 0; rank < 4; rank++) {
		s.step_us = rank == 2 ? 13000 : 10000;
		s.start_us = rank;	/* different bytes: not one upload four times */
		text = synth_trace(&s, &len);
		req.rank = rank;
		ingest_buffer(st, NULL, &req, text, len, &res);
		ck_assert_int_eq(res.rc, 0);
		free(text);
	}
	j = query("multi", Q_RANKS);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 4);
	ck_assert_int_eq(iget(j, "slowest_rank"), 2);
	ck_assert_int_eq(json_array_size(json_object_get(j, "stragglers")), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "stragglers"), 0)), 2);
	ck_assert_int_eq(iget(json_array_get(json_object_get(j, "ranks"), 2), "mean_ns"), 13000000);
	json_decref(j);
}
END_TEST

Suite *suite_analysis(void);
static void add_memory_tests(TCase *tc);
static void add_pytorch_fixture_tests(TCase *tc);
static void add_spill_tests(TCase *tc);
static void add_pytorch_rule_tests(TCase *tc);

Suite *suite_analysis(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("fixtures");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_v100_kernels_and_steps);
	tcase_add_test(tc, test_dist_align);
	tcase_add_test(tc, test_resnet_and_nccl_figures);
	tcase_add_test(tc, test_gpu_time_of_ops);
	tcase_add_test(tc, test_steps_tied);
	tcase_add_test(tc, test_collective_names);
	tcase_add_test(tc, test_nccl_collectives);
	tcase_add_loop_test(tc, test_self_time_within_thread_busy_time, 0, 3);
	tcase_add_test(tc, test_resnet_dataloader_finding);
	suite_add_tcase(s, tc);
	/* five whole fixtures each: too slow for valgrind's pass (CK_EXCLUDE_TAGS=slow), run by every other */
	tc = tcase_create("pytorch_fixtures");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "slow");
	add_pytorch_fixture_tests(tc);
	suite_add_tcase(s, tc);
	/* every fixture three times over: slow too */
	tc = tcase_create("spill");
	tcase_set_timeout(tc, 300);
	tcase_set_tags(tc, "slow");
	add_spill_tests(tc);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_healthy_trace_has_no_findings);
	tcase_add_test(tc, test_rule_dataloader);
	tcase_add_test(tc, test_rule_reports_thresholds);
	tcase_add_test(tc, test_rule_low_util_not_cpu_bound);
	tcase_add_test(tc, test_rule_cpu_bound);
	tcase_add_test(tc, test_rule_memcpy);
	tcase_add_test(tc, test_rule_sync);
	tcase_add_test(tc, test_rule_drift);
	tcase_add_test(tc, test_rule_tiny_kernels);
	tcase_add_test(tc, test_ranks_name_the_straggler);
	add_memory_tests(tc);
	add_pytorch_rule_tests(tc);
	suite_add_tcase(s, tc);
	return s;
}

START_TEST(test_memory_near_capacity)
{
	struct synth s = healthy;
	json_t *d, *f;

	/* 1e9 bytes of activations at the peak of a 1 GiB device: 93% */
	s.act_bytes = 1000000000;
	s.capacity = 1 << 30;
	d = diagnose("memfull", &s);
	f = finding(d, "memory_near_capacity");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f, "evidence"), "dominant_category")),
			 "activation");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "peak_bytes")), 1000000000);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "checkpoint"));
	ck_assert_ptr_null(finding(d, "memory_growth"));	/* freed every step: flat */
	json_decref(d);
	/* the same run on a 2 GiB device: no finding */
	s.capacity = 2LL << 30;
	d = diagnose("memroom", &s);
	ck_assert_ptr_null(finding(d, "memory_near_capacity"));
	json_decref(d);
}
END_TEST

START_TEST(test_memory_growth)
{
	struct synth s = healthy;
	json_t *d, *f;

	/* 64 MiB kept from every one of 10 steps */
	s.act_bytes = 1 << 20;
	s.leak_bytes = 64 << 20;
	d = diagnose("leak", &s);
	f = finding(d, "memory_growth");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "per_step_bytes")), 64 << 20);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "steps")), 10);
	ck_assert_ptr_null(finding(d, "memory_near_capacity"));	/* no deviceProperties: capacity unknown */
	json_decref(d);
}
END_TEST

/* ---- memory categories from [memory] events (server/analysis/memory.c) ---- */

struct memcase {
	int64_t ts, bytes, addr;
	const char *want;		/* category of the allocation; NULL for a free */
};

static void mem_event(struct text *t, int tid, int64_t ts, int64_t addr, int64_t bytes, int64_t total, int idx)
{
	emit(t, ",\n{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":%d,"
		"\"ts\":%lld,\"args\":{\"Ev Idx\":%d,\"Device Type\":1,\"Device Id\":0,\"Addr\":%lld,\"Bytes\":%lld,"
		"\"Total Allocated\":%lld,\"Total Reserved\":1000000000}}", tid, (long long)ts, idx, (long long)addr,
	     (long long)bytes, (long long)total);
}

/*
 * One allocation per rule, each with its own size, in a small training step:
 * thread 1 runs forward and the optimizer, thread 2 is the autograd thread.
 */
START_TEST(test_memory_rules)
{
	static const struct { int tid; int64_t s, dur; const char *cat, *name; } spans[] = {
		{ 1, 0, 50, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__" },
		{ 1, 20, 10, "cpu_op", "aten::to" },
		{ 1, 60, 20, "cpu_op", "aten::relu" },
		{ 1, 100, 100, "cpu_op", "aten::linear" },
		{ 1, 110, 10, "cpu_op", "aten::mm" },
		{ 2, 400, 20, "cpu_op", "autograd::engine::evaluate_function: MmBackward0" },
		{ 2, 440, 20, "cpu_op", "autograd::engine::evaluate_function: ReluBackward0" },
		{ 2, 470, 10, "cpu_op", "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad" },
		{ 2, 471, 5, "cpu_op", "torch::autograd::AccumulateGrad" },
		{ 1, 500, 100, "user_annotation", "Optimizer.step#Adam.step" },
		{ 1, 510, 10, "cpu_op", "aten::zeros_like" },
		{ 1, 525, 15, "cpu_op", "aten::mul" },
		{ 1, 560, 10, "cpu_op", "aten::add_" },
		{ 1, 700, 30, "user_annotation", "Optimizer.zero_grad#Adam.zero_grad" },
	};
	/* time order; sizes distinct so each allocation is recognisable */
	static const struct { int tid; int64_t ts, addr, bytes; const char *want; } ev[] = {
		{ 1, 25, 0x1000, 1 << 10, "input" },		/* aten::to under the DataLoader */
		{ 1, 65, 0x2000, 1 << 11, "activation" },	/* forward, freed by backward */
		{ 1, 112, 0x3000, 1 << 12, "temporary" },	/* made and freed inside aten::linear */
		{ 1, 118, 0x3000, -(1 << 12), NULL },
		{ 1, 150, 0x4000, 1 << 13, "activation" },	/* forward (in aten::linear), alive at the end */
		{ 2, 405, 0x5000, 1 << 14, "autograd_detail" },	/* backward, freed in backward */
		{ 2, 410, 0x6000, 1 << 15, "gradient" },	/* backward, alive at the optimizer step */
		{ 2, 445, 0x5000, -(1 << 14), NULL },
		{ 2, 450, 0x2000, -(1 << 11), NULL },
		{ 2, 473, 0x7000, 1 << 16, "gradient" },	/* AccumulateGrad */
		{ 1, 515, 0x8000, 1 << 17, "optimizer_state" },	/* made in step, kept */
		{ 1, 530, 0x9000, 1 << 18, "temporary" },	/* made in step, freed in it */
		{ 1, 565, 0x9000, -(1 << 18), NULL },
		{ 1, 580, 0xa000, 1 << 19, "gradient" },	/* freed by zero_grad */
		{ 1, 710, 0xa000, -(1 << 19), NULL },
		{ 1, 800, 0xb000, 1 << 20, "unknown" },	/* in no operator, alive at the end */
	};
	struct text t = { .p = malloc(1024), .cap = 1024 };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	int64_t total = 1000000;	/* allocated before the trace */
	json_t *j, *cats;
	size_t i, k;

	emit(&t, "{\"traceEvents\":[");
	for (i = 0; i < sizeof(spans) / sizeof(spans[0]); i++)
		span(&t, spans[i].cat, spans[i].name, 1, spans[i].tid, 1000000 + spans[i].s, spans[i].dur, "");
	for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		total += ev[i].bytes;
		mem_event(&t, ev[i].tid, 1000000 + ev[i].ts, ev[i].addr, ev[i].bytes, total, (int)i);
	}
	emit(&t, "]}");
	ingest("mem", t.p, t.n);
	free(t.p);
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	j = read_memory(r, "mem", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
	store_reader_close(r);
	ck_assert_msg(j != NULL, "%s", err.msg);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "trace");
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:0");
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), sizeof(ev) / sizeof(ev[0]));
	cats = json_object_get(j, "categories");
	/* each allocation shows as a rise of its size in the expected category, and nowhere else */
	for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		if (!ev[i].want)
			continue;
		for (k = 0; k < MEM_NCAT; k++) {
			json_t *a = json_object_get(cats, mem_cat_names[k]);
			json_int_t now = json_integer_value(json_array_get(a, i));
			json_int_t before = i ? json_integer_value(json_array_get(a, i - 1)) : (k == 0 ? 1000000 : 0);
			json_int_t want = !strcmp(mem_cat_names[k], ev[i].want) ? ev[i].bytes : 0;
			ck_assert_msg(now - before == want, "event %zu (%s): %s rose by %lld", i, ev[i].want,
				      mem_cat_names[k], (long long)(now - before));
		}
	}
	/* the memory from before the trace is pre-existing, under parameter */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "baseline"), "bytes")), 1000000);
	json_decref(j);
}
END_TEST

/* The V100 trace on cuda:1: allocated is the trace's own Total Allocated at every event. */
START_TEST(test_memory_v100)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *j, *alloc, *cats;
	size_t i, n;

	ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	j = read_memory(r, "v100", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
	store_reader_close(r);
	ck_assert_msg(j != NULL, "%s", err.msg);
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:1");
	alloc = json_object_get(j, "allocated");
	cats = json_object_get(j, "categories");
	n = json_array_size(alloc);
	ck_assert_uint_eq(n, 26770);	/* shared/fixtures/README.md: 26,770 events on CUDA device 1 */
	for (i = 0; i < n; i++) {
		json_int_t sum = 0;
		for (int c = 0; c < MEM_NCAT; c++)
			sum += json_integer_value(json_array_get(json_object_get(cats, mem_cat_names[c]), i));
		ck_assert_int_eq(sum, json_integer_value(json_array_get(alloc, i)));
	}
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "peak"), "bytes")), 6629508096LL);
	/* the first event's Total Allocated less its own bytes, and the last as given */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "baseline"), "bytes")), 4121780224LL - 25165824);
	ck_assert_int_eq(json_integer_value(json_array_get(alloc, n - 1)), 4096614400LL);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "reserved"), 0)), 12782141440LL);
	json_decref(j);
}
END_TEST

static void add_memory_tests(TCase *tc)
{
	tcase_add_test(tc, test_memory_rules);
	tcase_add_test(tc, test_memory_near_capacity);
	tcase_add_test(tc, test_memory_growth);
	tcase_add_test(tc, test_memory_v100);
}

/* ---- agreement with PyTorch (torch-tb-profiler, key_averages, HTA) ---- */

/*
 * kineto's own expected results for this trace (pytorch/kineto
 * tb_plugin/test/result_check_file.txt @ 041e7ce9, run
 * resnet50_num_workers_0, worker0 span 1 = the fixture's file): the overview's
 * steps in us, Kernel, Memcpy, Memset, Runtime, DataLoader, CPU Exec, Other,
 * and their total. The CPU spans are the fixture README's.
 */
static const int64_t tb_resnet_steps[6][10] = {
	/* step, total, kernel, memcpy, memset, runtime, dataloader, cpu, other, CPU span */
	{ 5, 187948, 98598, 1941, 90, 2796, 69317, 14091, 1115, 176078 },
	{ 6, 175153, 98570, 1947, 89, 2762, 57669, 12968, 1148, 173992 },
	{ 7, 179733, 98596, 1931, 91, 2877, 61257, 13768, 1213, 176918 },
	{ 8, 174564, 98623, 1938, 89, 2841, 56453, 13420, 1200, 181259 },
	{ 9, 182172, 98504, 1937, 87, 2788, 62690, 15025, 1141, 176468 },
	{ 10, 165983, 98641, 1798, 88, 3381, 48185, 12773, 1117, 164261 },
};

START_TEST(test_resnet_steps_as_tb_profiler)
{
	static const char *const comps[] = { "kernel", "memcpy", "memset", "runtime", "dataloader", "cpu", "idle" };
	json_t *j, *s;
	size_t i;

	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	j = query("resnet", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 6);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		const int64_t *want = tb_resnet_steps[i];
		json_t *bd = json_object_get(s, "breakdown_ns");
		ck_assert_int_eq(iget(s, "step"), want[0]);
		ck_assert_int_eq(iget(s, "dur_ns"), want[1] * 1000);
		ck_assert_int_eq(iget(s, "cpu_dur_ns"), want[9] * 1000);
		for (int c = 0; c < 7; c++)
			ck_assert_msg(iget(bd, comps[c]) == want[2 + c] * 1000, "step %lld %s: %lld, tb %lld",
				      (long long)want[0], comps[c], (long long)iget(bd, comps[c]), (long long)want[2 + c]);
		ck_assert_int_eq(iget(bd, "communication"), 0);
		ck_assert(json_is_false(json_object_get(s, "incomplete")));
		/* steps follow each other: the next starts where this one ends or later */
		if (i)
			ck_assert_int_ge(iget(s, "start_ns"), iget(json_array_get(json_object_get(j, "steps"), i - 1), "start_ns") +
						      iget(json_array_get(json_object_get(j, "steps"), i - 1), "dur_ns"));
	}
	json_decref(j);
}
END_TEST

/* The same file's operator table (result_check_file.txt line 3): name, calls, host self, host total,
 * device self, device total, in us; key_averages() semantics (same-name nesting merged). */
static const struct { const char *name; int64_t calls, hself, htotal, dself, dtotal; } tb_resnet_ops[] = {
	{ "aten::cudnn_convolution_backward_weight", 318, 22804, 40246, 142461, 142461 },
	{ "aten::cudnn_convolution_backward_input", 312, 29324, 41445, 130967, 130967 },
	{ "aten::cudnn_convolution", 318, 33121, 56998, 126619, 126619 },
	{ "aten::cudnn_batch_norm_backward", 318, 12238, 30460, 61939, 61939 },
	{ "aten::cudnn_batch_norm", 318, 19843, 71527, 34245, 34245 },
	{ "aten::threshold_backward", 294, 6090, 9482, 27298, 27298 },
	{ "aten::add_", 2994, 51013, 78125, 24098, 24098 },
	{ "aten::clamp_min", 294, 7106, 10311, 17860, 17860 },
	{ "aten::add", 414, 14329, 19289, 16038, 16038 },
	{ "aten::copy_", 588, 40255, 52853, 11492, 11492 },
	{ "aten::max_pool2d_with_indices_backward", 6, 176, 411, 3822, 4677 },
	{ "aten::mul_", 966, 20515, 29081, 2409, 2409 },
	{ "aten::fill_", 978, 9879, 17059, 1887, 1887 },
	{ "aten::max_pool2d_with_indices", 6, 477, 562, 1420, 1420 },
	{ "aten::mm", 12, 575, 860, 275, 275 },
	{ "aten::mean", 6, 234, 445, 212, 212 },
	{ "aten::addmm", 6, 639, 1034, 197, 197 },
	{ "aten::div", 198, 20135, 35158, 144, 144 },
	{ "aten::_log_softmax_backward_data", 6, 108, 306, 53, 53 },
	{ "aten::sum", 6, 153, 327, 44, 44 },
	{ "aten::_log_softmax", 6, 170, 433, 42, 42 },
	{ "aten::nll_loss_forward", 6, 266, 346, 18, 18 },
	{ "aten::nll_loss_backward", 6, 388, 614, 18, 18 },
	{ "aten::empty", 4404, 68147, 68147, 0, 0 },
	{ "aten::zero_", 996, 10693, 27597, 0, 1881 },
	{ "aten::zeros", 24, 659, 1105, 0, 0 },
	{ "aten::view", 846, 14027, 14027, 0, 0 },
	{ "aten::as_strided", 432, 7600, 7600, 0, 0 },
	{ "aten::permute", 192, 5515, 9775, 0, 0 },
	{ "aten::empty_like", 528, 11742, 26064, 0, 0 },
	{ "aten::contiguous", 192, 5510, 31137, 0, 0 },
	{ "aten::empty_strided", 402, 11829, 11829, 0, 0 },
	{ "aten::to", 414, 14834, 64332, 0, 11492 },
	{ "aten::unsqueeze", 192, 3574, 6603, 0, 0 },
	{ "aten::resize_", 1902, 12406, 12406, 0, 0 },
	{ "aten::slice", 6, 123, 223, 0, 0 },
	{ "aten::narrow", 6, 127, 350, 0, 0 },
	{ "aten::_cat", 6, 16282, 16933, 0, 0 },
	{ "aten::cat", 6, 152, 17085, 0, 0 },
	{ "aten::stack", 6, 658, 24346, 0, 0 },
	{ "detach_", 6, 100, 100, 0, 0 },
	{ "aten::detach_", 6, 108, 208, 0, 0 },
	{ "aten::_convolution", 318, 7245, 64243, 0, 126619 },
	{ "aten::convolution", 318, 6151, 70394, 0, 126619 },
	{ "aten::conv2d", 318, 7387, 77781, 0, 126619 },
	{ "aten::_batch_norm_impl_index", 318, 6544, 78071, 0, 34245 },
	{ "aten::batch_norm", 318, 9906, 87977, 0, 34245 },
	{ "aten::clamp_min_", 294, 5354, 15665, 0, 17860 },
	{ "aten::relu_", 294, 8516, 24181, 0, 17860 },
	{ "aten::max_pool2d", 6, 125, 687, 0, 1420 },
	{ "aten::adaptive_avg_pool2d", 6, 116, 561, 0, 212 },
	{ "aten::flatten", 6, 84, 164, 0, 0 },
	{ "aten::transpose", 30, 197, 329, 0, 0 },
	{ "aten::t", 30, 255, 584, 0, 0 },
	{ "aten::expand", 12, 150, 229, 0, 0 },
	{ "aten::linear", 6, 124, 1408, 0, 197 },
	{ "aten::log_softmax", 6, 90, 567, 0, 42 },
	{ "aten::nll_loss", 6, 68, 414, 0, 18 },
	{ "aten::nll_loss_nd", 6, 81, 495, 0, 18 },
	{ "aten::cross_entropy_loss", 6, 118, 1180, 0, 60 },
	{ "aten::ones_like", 6, 95, 452, 0, 6 },
	{ "NllLossBackward", 6, 102, 716, 0, 18 },
	{ "LogSoftmaxBackward", 6, 53, 359, 0, 53 },
	{ "aten::conj", 12, 12, 12, 0, 0 },
	{ "AddmmBackward", 6, 182, 1303, 0, 275 },
	{ "torch::autograd::AccumulateGrad", 966, 5457, 28494, 0, 3030 },
	{ "TBackward", 6, 18, 103, 0, 0 },
	{ "aten::reshape", 6, 29, 55, 0, 0 },
	{ "ViewBackward", 6, 25, 80, 0, 0 },
	{ "MeanBackward1", 6, 541, 987, 0, 144 },
	{ "ReluBackward1", 294, 2174, 11656, 0, 27298 },
	{ "AddBackward0", 96, 175, 175, 0, 0 },
	{ "CudnnBatchNormBackward", 318, 4148, 34608, 0, 61939 },
	{ "aten::cudnn_convolution_backward", 318, 6081, 87772, 0, 273428 },
	{ "CudnnConvolutionBackward", 318, 3217, 90989, 0, 273428 },
	{ "MaxPool2DWithIndicesBackward", 6, 73, 484, 0, 4677 },
};

START_TEST(test_resnet_ops_as_key_averages)
{
	json_t *c, *g, *o;
	size_t i, k;

	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	c = query("resnet", Q_OPS_CPU);
	g = query("resnet", Q_OPS_GPU);
	ck_assert_uint_eq(sizeof(tb_resnet_ops) / sizeof(tb_resnet_ops[0]), 76);
	for (k = 0; k < sizeof(tb_resnet_ops) / sizeof(tb_resnet_ops[0]); k++) {
		json_t *cr = NULL, *gr = NULL;
		json_array_foreach(json_object_get(c, "ops"), i, o)
			if (!strcmp(json_string_value(json_object_get(o, "name")), tb_resnet_ops[k].name))
				cr = o;
		json_array_foreach(json_object_get(g, "ops"), i, o)
			if (!strcmp(json_string_value(json_object_get(o, "name")), tb_resnet_ops[k].name))
				gr = o;
		ck_assert_msg(cr != NULL, "no row %s", tb_resnet_ops[k].name);
		ck_assert_msg(iget(cr, "calls") == tb_resnet_ops[k].calls && iget(cr, "self_ns") == tb_resnet_ops[k].hself * 1000 &&
			      iget(cr, "total_ns") == tb_resnet_ops[k].htotal * 1000,
			      "%s: calls %lld self %lld total %lld", tb_resnet_ops[k].name, (long long)iget(cr, "calls"),
			      (long long)iget(cr, "self_ns"), (long long)iget(cr, "total_ns"));
		ck_assert_int_eq(gr ? iget(gr, "self_ns") : 0, tb_resnet_ops[k].dself * 1000);
		ck_assert_int_eq(gr ? iget(gr, "total_ns") : 0, tb_resnet_ops[k].dtotal * 1000);
	}
	json_decref(c);
	json_decref(g);
}
END_TEST

/* PyTorch 1.9 [memory] events carry no Total Allocated: /runs shows the rebuilt series' peak. */
START_TEST(test_runs_peak_from_rebuilt_series)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *runs, *mem;

	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	runs = read_runs(r, &err);
	mem = read_memory(r, "resnet", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
	store_reader_close(r);
	ck_assert_ptr_nonnull(runs);
	ck_assert_ptr_nonnull(mem);
	json_t *peak = json_object_get(json_array_get(json_object_get(runs, "runs"), 0), "peak_allocated_bytes");
	ck_assert_msg(json_is_integer(peak), "peak_allocated_bytes is not a number");
	ck_assert_int_eq(json_integer_value(peak), iget(json_object_get(mem, "peak"), "bytes"));
	ck_assert_int_gt(json_integer_value(peak), 2000000000);	/* 2.79 GB */
	json_decref(runs);
	json_decref(mem);
}
END_TEST

/* ---- each step's kernel time is the union of the kernels it launched, computed here ---- */

struct launched {
	struct trace_parser *tp;
	struct analysis *an;
	int64_t (*steps)[2];
	size_t nsteps;
	int64_t (*rt)[2], (*op)[2];	/* (correlation or External id, ts) */
	size_t nrt, nop;
	int64_t (*k)[4];		/* computation kernels: corr, ext, start, end */
	size_t nk;
};

/* grows by doubling, at each power of two: ASan's realloc always moves, so one more each time was quadratic */
#define PUSH(arr, n, ...) do { \
	if (((n) & ((n) - 1)) == 0) { \
		(arr) = realloc((arr), ((n) ? 2 * (n) : 1) * sizeof(*(arr))); \
		ck_assert_ptr_nonnull(arr); \
	} \
	int64_t v_[] = { __VA_ARGS__ }; \
	memcpy((arr)[(n)++], v_, sizeof(v_)); \
} while (0)

static int launched_event(void *p, const struct tp_event *e)
{
	struct launched *l = p;
	struct tp_errbuf err = { 0 };
	const char *cat = str_of(l->tp, e->cat), *name = str_of(l->tp, e->name);
	int64_t end = e->ts_ns + ((e->have & TH_DUR) ? e->dur_ns : 0);

	ck_assert_int_eq(analysis_event(l->an, e, &err), 0);
	if (e->ph != 'X' || !(e->have & TH_TS))
		return 0;
	if (!strncmp(name, "ProfilerStep#", 13) && strcmp(cat, "gpu_user_annotation"))
		PUSH(l->steps, l->nsteps, e->ts_ns, end);
	else if ((!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver") || !strcmp(cat, "Runtime")) &&
		 (e->have & TH_CORR))
		PUSH(l->rt, l->nrt, e->corr, e->ts_ns);
	else if ((!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator") || !strcmp(cat, "user_annotation")) &&
		 (e->have & TH_EXT))
		PUSH(l->op, l->nop, e->ext_id, e->ts_ns);
	else if ((!strcmp(cat, "kernel") || !strcmp(cat, "Kernel")) &&
		 an_kernel_class(name, AN_GPU_KERNEL) == AN_KC_COMPUTATION)
		PUSH(l->k, l->nk, (e->have & TH_CORR) ? e->corr : -1, (e->have & TH_EXT) ? e->ext_id : -1, e->ts_ns, end);
	return 0;
}

START_TEST(test_kernel_time_is_what_the_step_launched)
{
	static const char *const files[] = { "traces/hta_v100_train_memory.json.gz",
					     "traces/kineto_resnet50_workers0.json.gz",
					     "traces/hta_nccl_rel_ts.json.gz", "traces/hta_ns_resolution.json.gz",
					     "traces/hta_sampled_rank0.json.gz" };
	struct launched l = { 0 };
	struct tp_errbuf err = { 0 };
	const struct an_result *res;
	char *path = tu_fixture(files[_i]);
	size_t len, glen, i, s;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	struct trace_sink sink = { .string = busy_string, .event = launched_event, .payload = &l };

	ck_assert_ptr_nonnull(json);
	l.tp = trace_parser_new(&trace_default_limits, &sink);
	l.an = analysis_new(str_of, l.tp);
	ck_assert_int_eq(trace_parser_feed(l.tp, json, glen, &err), 0);
	ck_assert_int_eq(trace_parser_finish(l.tp, &err), 0);
	ck_assert_int_eq(analysis_finish(l.an, &res, &err), 0);
	ck_assert_uint_eq(res->nsteps, l.nsteps);
	qsort(l.steps, l.nsteps, sizeof(*l.steps), cmp_pair);
	qsort(l.rt, l.nrt, sizeof(*l.rt), cmp_pair);
	qsort(l.op, l.nop, sizeof(*l.op), cmp_pair);
	for (s = 0; s < l.nsteps; s++) {
		/* the kernels launched in step s: by correlation, else External id; their union */
		int64_t *iv = NULL, want;
		size_t n = 0;
		for (i = 0; i < l.nk; i++) {
			int64_t t = INT64_MIN, *hit = NULL;
			if (l.k[i][0] >= 0)
				hit = bsearch(l.k[i], l.rt, l.nrt, sizeof(*l.rt), cmp_pair);
			if (!hit && l.k[i][1] >= 0)
				hit = bsearch(&l.k[i][1], l.op, l.nop, sizeof(*l.op), cmp_pair);
			if (hit)
				t = hit[1];
			if (t < l.steps[s][0] || t >= l.steps[s][1])
				continue;
			if ((n & (n - 1)) == 0) {	/* n even: 0, 2, 4, 8, ... */
				iv = realloc(iv, (n ? 2 * n : 2) * sizeof(int64_t));
				ck_assert_ptr_nonnull(iv);
			}
			iv[n++] = l.k[i][2];
			iv[n++] = l.k[i][3];
		}
		want = n ? union_len(iv, n) : 0;
		free(iv);
		ck_assert_msg(llabs(res->steps[s].comp_ns[AN_KERNEL] - want) <= want / 100,
			      "%s step %lld: kernel %lld, launched %lld", files[_i], (long long)res->steps[s].step,
			      (long long)res->steps[s].comp_ns[AN_KERNEL], (long long)want);
		ck_assert_int_gt(want, 0);
	}
	analysis_free(l.an);
	trace_parser_free(l.tp);
	free(l.steps);
	free(l.rt);
	free(l.op);
	free(l.k);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/* Sum of member over steps [from, to) of a /steps answer. */
static json_int_t steps_sum(json_t *j, size_t from, size_t to, const char *member)
{
	json_int_t sum = 0;

	for (size_t i = from; i < to; i++) {
		json_t *s = json_array_get(json_object_get(j, "steps"), i);
		json_t *v = json_object_get(json_object_get(s, "breakdown_ns"), member);
		sum += json_integer_value(v ? v : json_object_get(s, member));
	}
	return sum;
}

/* GPU utilization over all the steps of a /steps answer: busy time over their time. */
static double utilization(json_t *j)
{
	double busy = 0, all = 0;
	json_t *s;
	size_t i;

	json_array_foreach(json_object_get(j, "steps"), i, s) {
		busy += json_real_value(json_object_get(s, "gpu_utilization_pct")) / 100 * (double)iget(s, "dur_ns");
		all += (double)iget(s, "dur_ns");
	}
	return all > 0 ? busy / all : 0;
}

/*
 * Where the peers agree with us (tests/peers/README.md): HTA's temporal and
 * kernel breakdowns cover the steps but the last; torch-tb-profiler's GPU
 * utilization is the time any kernel runs over the steps' time.
 */
START_TEST(test_figures_peers_agree_on)
{
	json_t *j;
	double u;

	ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	j = query("v100", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 4, "kernel"), 496485000);		/* HTA compute_time, steps 2-5 */
	/* HTA's COMMUNICATION kernels (238,274 us: none under computation), and the host's
	 * nccl:all_reduce spans where no GPU work runs (42,618 us: torch-tb-profiler's Communication
	 * column, to the us; its Kernel holds these NCCL kernels): tb's Runtime, CPU Exec and Other
	 * are then our runtime, cpu and idle to the us */
	ck_assert_int_eq(steps_sum(j, 0, 4, "communication"), 238274000 + 42618000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "runtime"), 19690000 + 21615000 + 19046000 + 19153000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "cpu"), 115751000 + 132224000 + 117143000 + 115300000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "idle"), 11545000 + 11656000 + 11445000 + 11149000);
	ck_assert_int_eq(steps_sum(j, 0, 5, "comm_overlap_ns"), 0);
	ck_assert_msg(fabs(utilization(j) - 0.562666) < 0.0001, "v100 GPU utilization %f, tb 56.2666%%", utilization(j));
	json_decref(j);
	ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	j = query("resnet", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 5, "kernel"), 492891000);		/* HTA compute_time, steps 5-9 */
	ck_assert_msg(fabs(utilization(j) - 0.555141) < 0.0001, "resnet GPU utilization %f, tb 55.5141%%", utilization(j));
	json_decref(j);
	ingest_fixture("r0", "traces/hta_sampled_rank0.json.gz");
	j = query("r0", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 1, "kernel"), 106252000);		/* HTA compute_time, step 551 */
	ck_assert_int_eq(steps_sum(j, 0, 2, "dur_ns"), 607312000 + 622928000);	/* fixtures README */
	ck_assert_msg(fabs((u = utilization(j)) - 0.444857) < 0.0001, "r0 GPU utilization %f, tb 44.4857%%", u);
	json_decref(j);
	ingest_fixture("r1", "traces/hta_sampled_rank1.json.gz");
	j = query("r1", Q_STEPS);
	ck_assert_msg(fabs((u = utilization(j)) - 0.464637) < 0.0001, "r1 GPU utilization %f, tb 46.4637%%", u);
	json_decref(j);
}
END_TEST

static void add_pytorch_fixture_tests(TCase *tc)
{
	tcase_add_test(tc, test_figures_peers_agree_on);
	tcase_add_loop_test(tc, test_kernel_time_is_what_the_step_launched, 0, 5);
	tcase_add_test(tc, test_resnet_steps_as_tb_profiler);
	tcase_add_test(tc, test_resnet_ops_as_key_averages);
	tcase_add_test(tc, test_runs_peak_from_rebuilt_series);
}

static void ingest_text(const char *run, struct text *t)
{
	emit(t, "]}");
	ingest(run, t->p, t->n);
	free(t->p);
}

static void launch(struct text *t, int64_t at, int64_t corr, int stream, const char *kernel, int64_t ks, int64_t kd)
{
	char args[96];

	snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
	span(t, "cuda_runtime", "cudaLaunchKernel", 1, 1, at, 1, args);
	snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":%d", (long long)corr, stream);
	span(t, "kernel", kernel, 0, stream, ks, kd, args);
}

/*
 * Which operator launched a GPU span (link_maps()): the one above the
 * runtime call its correlation id names; else, when that call is under no
 * operator or no call has the id, the operator its External id names;
 * the first of two calls with one id (in start order) is the one; a CUDA
 * graph's kernels share their launch's id. Answers as before the maps held
 * only the ids GPU spans name.
 */
START_TEST(test_gpu_launchers)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	const char *names[] = { "opA", "opB", "opC", "opD", "opE", "opG" };
	const json_int_t want[] = { 10000, 20000, 40000, 3000, 0, 9000 };
	json_t *g, *o;
	size_t i, k;
	int seen = 0;

	emit(&t, "{\"traceEvents\":[");
	span(&t, "cpu_op", "opA", 1, 1, b, 100, "\"External id\":1");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 10, 5, "\"correlation\":100");
	/* under no operator: its kernel goes to the External id's, opB */
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 200, 5, "\"correlation\":101");
	span(&t, "cpu_op", "opB", 1, 1, b + 300, 50, "\"External id\":2");
	span(&t, "cpu_op", "opC", 1, 1, b + 400, 50, "\"External id\":3");
	/* two calls with correlation 102: the earlier one, under opD, launched it */
	span(&t, "cpu_op", "opE", 1, 1, b + 700, 50, "\"External id\":5");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 710, 5, "\"correlation\":102");
	span(&t, "cpu_op", "opD", 1, 1, b + 600, 50, "\"External id\":4");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 610, 5, "\"correlation\":102");
	/* a CUDA graph: one launch, one correlation id, three kernels */
	span(&t, "cpu_op", "opG", 1, 1, b + 1000, 50, "\"External id\":6");
	span(&t, "cuda_runtime", "cudaGraphLaunch", 1, 1, b + 1010, 5, "\"correlation\":103");
	span(&t, "kernel", "g1", 0, 7, b + 1020, 2, "\"correlation\":103");
	span(&t, "kernel", "g2", 0, 7, b + 1022, 3, "\"correlation\":103");
	span(&t, "kernel", "g3", 0, 7, b + 1025, 4, "\"correlation\":103");
	/* correlation found under opA: its External id (opC's) is not asked */
	span(&t, "kernel", "k1", 0, 7, b + 20, 10, "\"correlation\":100,\"External id\":3");
	span(&t, "kernel", "k2", 0, 7, b + 210, 20, "\"correlation\":101,\"External id\":2");
	/* no runtime call has correlation 999 */
	span(&t, "kernel", "k3", 0, 7, b + 500, 40, "\"correlation\":999,\"External id\":3");
	span(&t, "kernel", "k4", 0, 7, b + 800, 3, "\"correlation\":102");
	/* nothing names a launcher */
	span(&t, "kernel", "k5", 0, 7, b + 900, 8, "");
	span(&t, "kernel", "k6", 0, 7, b + 950, 8, "\"correlation\":998,\"External id\":77");
	ingest_text("launchers", &t);
	g = query("launchers", Q_OPS_GPU);
	json_array_foreach(json_object_get(g, "ops"), i, o) {
		const char *n = json_string_value(json_object_get(o, "name"));
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (!strcmp(n, names[k])) {
				ck_assert_msg(iget(o, "self_ns") == want[k], "%s: GPU self %lld, want %lld", n,
					      (long long)iget(o, "self_ns"), (long long)want[k]);
				ck_assert_int_eq(iget(o, "total_ns"), want[k]);
				seen |= 1 << k;
			}
	}
	/* opE launched nothing: no GPU row */
	ck_assert_int_eq(seen, 0x2f);
	ck_assert_int_eq(iget(json_object_get(g, "total"), "self_ns"), 82000);
	json_decref(g);
}
END_TEST

/* The analysis's map: reserve makes room without growing later, find changes a value in place. */
START_TEST(test_hmap_reserve_find)
{
	struct hmap m = { 0 };
	uint32_t *v;
	size_t cap;

	ck_assert_ptr_null(hmap_find(&m, 7));
	ck_assert_uint_eq(hmap_get(&m, 7), UINT32_MAX);
	ck_assert_int_eq(hmap_reserve(&m, 100000), 0);
	cap = m.cap;
	ck_assert_uint_ge(cap, 200000);
	for (uint64_t k = 0; k < 100000; k++)
		ck_assert_ptr_nonnull(hmap_put(&m, k * 0x9e3779b97f4a7c15ULL, (uint32_t)k));
	ck_assert_uint_eq(m.cap, cap);	/* no growth: room was made */
	ck_assert_uint_eq(m.n, 100000);
	ck_assert_int_eq(hmap_reserve(&m, 10), 0);	/* never shrinks */
	ck_assert_uint_eq(m.cap, cap);
	ck_assert_ptr_nonnull(v = hmap_find(&m, 5 * 0x9e3779b97f4a7c15ULL));
	ck_assert_uint_eq(*v, 5);
	*v = 77;
	ck_assert_uint_eq(hmap_get(&m, 5 * 0x9e3779b97f4a7c15ULL), 77);
	ck_assert_ptr_null(hmap_find(&m, 3));	/* not a key: nothing inserted */
	ck_assert_uint_eq(m.n, 100000);
	/* put keeps the first value */
	ck_assert_uint_eq(*hmap_put(&m, 0, 9), 0);
	/* growth past the reservation keeps every key */
	for (uint64_t k = 100000; k < 300000; k++)
		ck_assert_ptr_nonnull(hmap_put(&m, k * 0x9e3779b97f4a7c15ULL, (uint32_t)k));
	ck_assert_uint_gt(m.cap, cap);
	for (uint64_t k = 0; k < 300000; k += 997)
		ck_assert_uint_eq(hmap_get(&m, k * 0x9e3779b97f4a7c15ULL), k == 5 ? 77 : (uint32_t)k);
	hmap_free(&m);
}
END_TEST

static int no_string(void *p, uint32_t id, const char *str, size_t len)
{
	(void)p, (void)id, (void)str, (void)len;
	return 0;
}

struct parsed {
	struct trace_parser *tp;
	struct analysis *an;
};

static int to_analysis(void *p, const struct tp_event *e)
{
	struct tp_errbuf err = { 0 };

	return analysis_event(((struct parsed *)p)->an, e, &err);
}

/* t's trace through the parser into pa's analysis, finished (analysis_free and trace_parser_free pa's). */
static const struct an_result *analyse(struct parsed *pa, const struct text *t)
{
	struct trace_sink sink = { .string = no_string, .event = to_analysis, .payload = pa };
	struct tp_errbuf err = { 0 };
	const struct an_result *res;

	pa->tp = trace_parser_new(&trace_default_limits, &sink);
	pa->an = analysis_new(str_of, pa->tp);
	ck_assert_ptr_nonnull(pa->an);
	ck_assert_int_eq(trace_parser_feed(pa->tp, (const uint8_t *)t->p, t->n, &err), 0);
	ck_assert_int_eq(trace_parser_finish(pa->tp, &err), 0);
	ck_assert_int_eq(analysis_finish(pa->an, &res, &err), 0);
	return res;
}

/*
 * What a rank did before each collective (an_coll.before_op): the
 * top-level operator with the most time between the thread's previous
 * launch (or the step's start) and this one, a long one that began before
 * the window included, its children never. Two collectives launched inside
 * "bwd": the second's window lies wholly inside it.
 */
START_TEST(test_before_op_top_level)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000, at[3] = { 300, 800, 985 };
	const char *const want[3] = { "bwd", "bwd", "opt" };
	const int64_t want_ns[3] = { 200000, 500000, 120000 };
	struct parsed pa;
	const struct an_result *res;
	char args[64];

	emit(&t, "{\"traceEvents\":[");
	span(&t, "user_annotation", "ProfilerStep#1", 1, 1, b, 1000, "");
	span(&t, "cpu_op", "fwd", 1, 1, b, 100, "");
	span(&t, "cpu_op", "bwd", 1, 1, b + 100, 750, "");
	span(&t, "cpu_op", "mm", 1, 1, b + 150, 100, "");
	span(&t, "cpu_op", "mm", 1, 1, b + 350, 400, "");
	span(&t, "cpu_op", "opt", 1, 1, b + 860, 120, "");
	for (int k = 0; k < 3; k++) {
		span(&t, "cpu_op", "record_param_comms", 1, 1, b + at[k], 4, "");
		snprintf(args, sizeof(args), "\"correlation\":%d", k + 1);
		span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + at[k] + 1, 2, args);
		span(&t, "kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 0, 7, b + at[k] + 20, 10, args);
	}
	emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->ncolls, 3);
	struct an_coll *cs = colls_of(res);
	for (int k = 0; k < 3; k++) {
		const struct an_coll *c = &cs[k];
		ck_assert_int_eq(c->launch_ns, (b + at[k]) * 1000);
		ck_assert_str_eq(str_of(pa.tp, c->before_op), want[k]);
		ck_assert_int_eq(c->before_ns, want_ns[k]);
	}
	free(cs);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * exposed_communication_ranks lists the ranks over DIST_EXPOSED_PCT only: at
 * 10.0 % exactly, or under, a rank is left out (check_distributed's two-rank
 * trace has both its ranks over the line since the host's nccl:all_reduce
 * counts as communication).
 */
START_TEST(test_exposed_ranks_threshold)
{
	json_t *body = json_pack("{s:[{s:i, s:{s:f, s:f}}, {s:i, s:{s:f, s:f}}, {s:i, s:{s:f, s:f}}]}", "ranks",
				 "rank", 0, "total", "exposed_communication_pct", 22.0, "overlap_pct", 31.25,
				 "rank", 1, "total", "exposed_communication_pct", 9.1, "overlap_pct", 66.7,
				 "rank", 2, "total", "exposed_communication_pct", DIST_EXPOSED_PCT, "overlap_pct", 50.0);
	json_t *out, *f = NULL, *x;
	size_t i;

	ck_assert_ptr_nonnull(body);
	out = distributed_findings(body, NULL);
	ck_assert_ptr_nonnull(out);
	json_array_foreach(out, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "id")), "exposed_communication_ranks"))
			f = x;
	ck_assert_ptr_nonnull(f);
	json_t *ranks = json_object_get(json_object_get(f, "evidence"), "ranks");
	ck_assert_uint_eq(json_array_size(ranks), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ranks, 0), "rank")), 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "title")), "1 of 3 ranks"));
	json_decref(out);
	json_decref(body);
}
END_TEST

/*
 * A profiling window's first step starts when the GPU work queued before it
 * ends (torch-tb-profiler's rule: breakdown()'s queued()). Window one: step 5
 * launches its kernel at 1 ms while a kernel no call in the trace launched
 * (queued before the window) runs until 29 ms; step 5 runs from 29 ms to
 * its kernel's end at 40 (10 ms of kernel), not from the host's 0. Window two: steps 15
 * and 16, with queued work before each: 15 starts after its own (which ends
 * before 15's kernel starts), 16 (not a window's first) right after 15. Step
 * 30 launches nothing: the host's span.
 */
START_TEST(test_window_first_step)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	struct parsed pa;
	const struct an_result *res;

	emit(&t, "{\"traceEvents\":[");
	span(&t, "user_annotation", "ProfilerStep#5", 1, 1, b, 10000, "");
	span(&t, "kernel", "queued_gemm", 0, 7, b + 2000, 27000, "\"correlation\":100");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1000, 5, "\"correlation\":1");
	span(&t, "kernel", "own_gemm", 0, 7, b + 30000, 10000, "\"correlation\":1");
	/* window two, 1 s on */
	span(&t, "user_annotation", "ProfilerStep#15", 1, 1, b + 1000000, 10000, "");
	span(&t, "user_annotation", "ProfilerStep#16", 1, 1, b + 1010000, 10000, "");
	span(&t, "kernel", "queued_gemm", 0, 7, b + 1001000, 8000, "\"correlation\":101");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1002000, 5, "\"correlation\":2");
	span(&t, "kernel", "own_gemm", 0, 7, b + 1010000, 4000, "\"correlation\":2");
	span(&t, "kernel", "queued_gemm", 0, 7, b + 1014000, 3000, "\"correlation\":102");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1011000, 5, "\"correlation\":3");
	span(&t, "kernel", "own_gemm", 0, 7, b + 1017000, 4000, "\"correlation\":3");
	span(&t, "user_annotation", "ProfilerStep#30", 1, 1, b + 2000000, 5000, "");
	emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->nsteps, 4);
	const struct an_step *sp = res->steps;
	ck_assert_int_eq(sp[0].step, 5);
	ck_assert_int_eq(sp[0].start_ns, (b + 29000) * 1000);
	ck_assert_int_eq(sp[0].dur_ns, 11000 * 1000);
	ck_assert_int_eq(sp[0].comp_ns[AN_KERNEL], 10000 * 1000);
	ck_assert_int_eq(sp[0].cpu_dur_ns, 10000 * 1000);
	ck_assert_int_eq(sp[1].step, 15);
	ck_assert_int_eq(sp[1].start_ns, (b + 1009000) * 1000);	/* after the queued kernel's end */
	ck_assert_int_eq(sp[1].dur_ns, 5000 * 1000);	/* to 1014 ms: its kernel's end */
	ck_assert_int_eq(sp[1].comp_ns[AN_KERNEL], 4000 * 1000);
	ck_assert_int_eq(sp[2].step, 16);
	ck_assert_int_eq(sp[2].start_ns, (b + 1014000) * 1000);	/* step 15's end: not after 16's queued one */
	ck_assert_int_eq(sp[2].dur_ns, 7000 * 1000);
	/* a kernel no call launched counts for the step it starts in (gpu_launch()) */
	ck_assert_int_eq(sp[2].comp_ns[AN_KERNEL], 7000 * 1000);
	ck_assert_int_eq(sp[3].step, 30);
	ck_assert_int_eq(sp[3].start_ns, (b + 2000000) * 1000);
	ck_assert_int_eq(sp[3].dur_ns, 5000 * 1000);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * gloo collectives run on host threads: each outermost gloo:* span with no
 * communication kernel is one collective (launch, start and end its span,
 * no kernels); a gloo:* span inside another is part of it, and one above a
 * communication kernel is that kernel's collective, not a second.
 */
START_TEST(test_gloo_host_collectives)
{
	struct text t = { .p = malloc(2048), .cap = 2048 };
	const int64_t b = 1000000;
	struct parsed pa;
	const struct an_result *res;

	emit(&t, "{\"traceEvents\":[");
	span(&t, "user_annotation", "ProfilerStep#3", 1, 1, b, 1000, "");
	span(&t, "cpu_op", "c10d::allreduce_", 1, 1, b + 10, 2, "");
	span(&t, "user_annotation", "gloo:all_reduce", 1, 9, b + 20, 300, "");
	span(&t, "user_annotation", "gloo:broadcast", 1, 9, b + 50, 20, "");	/* inside the all_reduce */
	span(&t, "user_annotation", "gloo:all_gather", 1, 8, b + 400, 100, "");
	/* a gloo:* span above a communication kernel: the kernel's collective */
	span(&t, "user_annotation", "gloo:reduce_scatter", 1, 1, b + 600, 50, "");
	span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 601, 2, "\"correlation\":5");
	span(&t, "kernel", "ncclKernel_ReduceScatter_RING_LL_Sum_float", 0, 7, b + 620, 10, "\"correlation\":5");
	emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->ncolls, 3);
	struct an_coll *cs = colls_of(res);
	/* by launch */
	ck_assert_int_eq(cs[0].kind, AN_CK_ALL_REDUCE);
	ck_assert_int_eq(cs[0].launch_ns, (b + 20) * 1000);
	ck_assert_int_eq(cs[0].start_ns, (b + 20) * 1000);
	ck_assert_int_eq(cs[0].end_ns, (b + 320) * 1000);
	ck_assert_int_eq(cs[0].time_ns, 300000);
	ck_assert_int_eq(cs[0].kernels, 0);
	ck_assert_int_eq(cs[0].step, 3);
	ck_assert_int_eq(cs[1].kind, AN_CK_ALL_GATHER);
	ck_assert_int_eq(cs[1].time_ns, 100000);
	ck_assert_int_eq(cs[2].kind, AN_CK_REDUCE_SCATTER);
	ck_assert_int_eq(cs[2].kernels, 1);
	ck_assert_int_eq(cs[2].time_ns, 10000);
	free(cs);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * The CPU runs two steps ahead of the GPU: step k (CPU [100k, 100k + 100))
 * launches two 90 us kernels that run at [50 + 180k, 230 + 180k). The GPU
 * mirrors are made up, shorter than the work for steps 0 and 1 and longer
 * for 2 and 3: they must not clip it. Each step owns its 180 us of kernels
 * and ends when they do (torch-tb-profiler's step span).
 */
START_TEST(test_steps_own_what_they_launched)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	json_t *j, *s;
	size_t i;
	char name[32];

	emit(&t, "{\"traceEvents\":[");
	for (int k = 0; k < 4; k++) {
		int64_t c = b + 100 * k, g = b + 50 + 180 * k;
		snprintf(name, sizeof(name), "ProfilerStep#%d", k);
		span(&t, "user_annotation", name, 1, 1, c, 100, "");
		span(&t, "gpu_user_annotation", name, 0, 7, k < 2 ? g : g - 100, k < 2 ? 50 : 380, "");
		span(&t, "cpu_op", "aten::mm", 1, 1, c + 10, 20, "");
		launch(&t, c + 10, 2 * k + 1, 7, "gemm", g, 90);
		launch(&t, c + 20, 2 * k + 2, 7, "gemm", g + 90, 90);
	}
	ingest_text("ahead", &t);
	check_breakdown_sums("ahead", 4);
	j = query("ahead", Q_STEPS);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		json_t *bd = json_object_get(s, "breakdown_ns");
		ck_assert_int_eq(iget(s, "cpu_dur_ns"), 100000);
		ck_assert_int_eq(iget(bd, "kernel"), 180000);
		/* step 0 from its CPU start, the others from the end of the one before */
		ck_assert_int_eq(iget(s, "start_ns"), i ? (b + 50 + 180 * (int64_t)i) * 1000 : b * 1000);
		ck_assert_int_eq(iget(s, "dur_ns"), i ? 180000 : 230000);
		ck_assert(json_is_false(json_object_get(s, "incomplete")));
		ck_assert(json_is_false(json_object_get(s, "whole_trace")));
	}
	json_decref(j);
}
END_TEST

/*
 * key_averages(): aten::mm in aten::mm in aten::mm, each the only child, is
 * one call with the 8 us kernel once; aten::add with two children is not
 * merged. Two kernels overlapping on one stream both count.
 */
START_TEST(test_same_name_nesting_and_overlap)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	json_t *c, *g, *k, *o, *sj;
	size_t i;
	int seen = 0;

	emit(&t, "{\"traceEvents\":[");
	span(&t, "user_annotation", "ProfilerStep#1", 1, 1, b, 100, "");
	span(&t, "cpu_op", "aten::mm", 1, 1, b + 10, 40, "");
	span(&t, "cpu_op", "aten::mm", 1, 1, b + 11, 38, "");
	span(&t, "cpu_op", "aten::mm", 1, 1, b + 12, 36, "");
	launch(&t, b + 13, 1, 7, "gemm", b + 20, 8);
	span(&t, "cpu_op", "aten::add", 1, 1, b + 60, 30, "");
	span(&t, "cpu_op", "aten::add", 1, 1, b + 61, 9, "");
	span(&t, "cpu_op", "aten::copy_", 1, 1, b + 71, 9, "");
	launch(&t, b + 62, 2, 7, "add_kernel", b + 24, 10);	/* overlaps gemm on stream 7 */
	ingest_text("dups", &t);
	c = query("dups", Q_OPS_CPU);
	g = query("dups", Q_OPS_GPU);
	json_array_foreach(json_object_get(c, "ops"), i, o) {
		const char *n = json_string_value(json_object_get(o, "name"));
		if (!strcmp(n, "aten::mm")) {
			ck_assert_int_eq(iget(o, "calls"), 1);
			ck_assert_int_eq(iget(o, "total_ns"), 40000);
			ck_assert_int_eq(iget(o, "self_ns"), 40000 - 1000);	/* less its runtime call */
			seen |= 1;
		} else if (!strcmp(n, "aten::add")) {
			ck_assert_int_eq(iget(o, "calls"), 2);
			seen |= 2;
		}
	}
	json_array_foreach(json_object_get(g, "ops"), i, o)
		if (!strcmp(json_string_value(json_object_get(o, "name")), "aten::mm")) {
			ck_assert_int_eq(iget(o, "self_ns"), 8000);
			ck_assert_int_eq(iget(o, "total_ns"), 8000);
			seen |= 4;
		}
	ck_assert_int_eq(seen, 7);
	k = query("dups", Q_KERNELS);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "calls"), 2);
	ck_assert_int_eq(iget(json_object_get(k, "total"), "total_ns"), 18000);
	sj = query("dups", Q_STEPS);
	ck_assert_int_eq(iget(json_object_get(json_array_get(json_object_get(sj, "steps"), 0), "breakdown_ns"), "kernel"),
			 14000);	/* their union, [20, 34) */
	json_decref(c);
	json_decref(g);
	json_decref(k);
	json_decref(sj);
}
END_TEST

/* A stub tail step is incomplete: out of the mean, and it does not make drift. */
START_TEST(test_stub_tail_step_incomplete)
{
	struct synth s = healthy;
	json_t *d, *j, *last;

	s.steps = 5;
	s.stub_us = 49;
	d = diagnose("stub", &s);
	ck_assert_ptr_null(finding(d, "step_drift"));
	json_decref(d);
	j = query("stub", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 6);
	last = json_array_get(json_object_get(j, "steps"), 5);
	ck_assert(json_is_true(json_object_get(last, "incomplete")));
	ck_assert_ptr_nonnull(json_object_get(last, "note"));
	ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(j, "steps"), 0), "incomplete")));
	ck_assert_uint_eq(json_array_size(json_object_get(j, "notes")), 1);
	json_decref(j);
	j = query("stub", Q_RANKS);
	ck_assert_int_eq(iget(json_array_get(json_object_get(j, "ranks"), 0), "mean_ns"), 10000000);
	ck_assert_int_eq(iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 5);
	json_decref(j);
}
END_TEST

/* The trace ends before the last step's last kernels were recorded: incomplete too. */
START_TEST(test_cut_tail_step_incomplete)
{
	struct synth s = healthy;
	json_t *d, *j, *last;

	s.steps = 5;
	s.drift_us = 0;
	s.cut = 3;
	d = diagnose("cut", &s);
	json_decref(d);
	j = query("cut", Q_STEPS);
	last = json_array_get(json_object_get(j, "steps"), 4);
	ck_assert(json_is_true(json_object_get(last, "incomplete")));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(last, "note")), "no record"));
	ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(j, "steps"), 3), "incomplete")));
	json_decref(j);
	j = query("cut", Q_RANKS);
	ck_assert_int_eq(iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 4);
	json_decref(j);
}
END_TEST

/* No ProfilerStep: one whole-trace entry, with its breakdown and the step rules. */
START_TEST(test_whole_trace_without_steps)
{
	struct synth s = healthy;
	json_t *d, *j, *w;

	s.no_steps = 1;
	s.kernels = 3;
	d = diagnose("nosteps", &s);
	ck_assert_ptr_nonnull(finding(d, "no_steps"));
	ck_assert_ptr_nonnull(finding(d, "low_gpu_utilization"));
	ck_assert_ptr_null(finding(d, "step_drift"));
	json_decref(d);
	j = query("nosteps", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 1);
	w = json_array_get(json_object_get(j, "steps"), 0);
	ck_assert(json_is_null(json_object_get(w, "step")));
	ck_assert(json_is_true(json_object_get(w, "whole_trace")));
	ck_assert_int_eq(iget(json_object_get(w, "breakdown_ns"), "kernel"), 10 * 3000000);
	ck_assert(json_real_value(json_object_get(w, "gpu_utilization_pct")) > 29);
	json_decref(j);
	j = query("nosteps", Q_RANKS);
	ck_assert_int_eq(iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 0);
	json_decref(j);
}
END_TEST

/* An all-reduce that computation hides for 1 ms of its 3: 2 ms exposed per 10 ms step. */
START_TEST(test_exposed_communication)
{
	struct synth s = healthy;
	json_t *d, *f, *j, *o;
	size_t i;
	int seen = 0;

	s.kernels = 5;
	s.nccl_us = 3000;
	d = diagnose("comm", &s);
	f = finding(d, "exposed_communication");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "communication_ns"), 10 * 2000000);
	ck_assert_int_eq(iget(json_object_get(f, "evidence"), "comm_overlap_ns"), 10 * 1000000);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "no_sync"));
	json_decref(d);
	j = query("comm", Q_STEPS);
	o = json_array_get(json_object_get(j, "steps"), 3);
	ck_assert_int_eq(iget(json_object_get(o, "breakdown_ns"), "communication"), 2000000);
	ck_assert_int_eq(iget(json_object_get(o, "breakdown_ns"), "kernel"), 5000000);
	ck_assert_int_eq(iget(o, "comm_overlap_ns"), 1000000);
	json_decref(j);
	j = query("comm", Q_KERNELS);
	json_array_foreach(json_object_get(j, "kernels"), i, o) {
		const char *cls = json_string_value(json_object_get(o, "class"));
		int nccl = !strncmp(json_string_value(json_object_get(o, "name")), "ncclKernel", 10);
		ck_assert_str_eq(cls, nccl ? "communication" : "computation");
		seen |= nccl ? 1 : 2;
	}
	json_decref(j);
	j = query("comm", Q_OPS_CPU);
	json_array_foreach(json_object_get(j, "ops"), i, o) {
		if (strcmp(json_string_value(json_object_get(o, "name")), "nccl:all_reduce")) {
			ck_assert(json_is_null(json_object_get(o, "group")));
			continue;
		}
		ck_assert_str_eq(json_string_value(json_object_get(o, "group")), "communication");
		seen |= 4;
	}
	ck_assert_int_eq(iget(json_object_get(j, "communication"), "calls"), 10);
	json_decref(j);
	ck_assert_int_eq(seen, 7);
	/* without the collective: no finding */
	s.nccl_us = 0;
	d = diagnose("nocomm", &s);
	ck_assert_ptr_null(finding(d, "exposed_communication"));
	json_decref(d);
}
END_TEST

/* compare: the same time and calls per step is unchanged, whatever the step counts. */
START_TEST(test_compare_status_per_step)
{
	struct compare_item ia = { .name = "aten::mm", .calls = 10, .ns = 2000 }, ib = { .name = "aten::mm", .calls = 15, .ns = 3000 };
	int64_t da[] = { 5000, 5000 }, db[] = { 5000, 5000, 5000 };
	struct compare_run a = { .run = "a", .dur_ns = da, .nsteps = 2, .ops = &ia, .nops = 1 };
	struct compare_run b = { .run = "b", .dur_ns = db, .nsteps = 3, .ops = &ib, .nops = 1 };
	struct compare_opts o = { .threshold_pct = 5, .alpha = 0.05, .limit = 10 };
	json_t *j = compare_runs(&a, &b, &o);

	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "ops"), 0), "status")),
			 "unchanged");
	ck_assert_int_eq(iget(json_object_get(j, "ops_counts"), "changed"), 0);
	json_decref(j);
}
END_TEST

static void add_pytorch_rule_tests(TCase *tc)
{
	tcase_add_test(tc, test_steps_own_what_they_launched);
	tcase_add_test(tc, test_gpu_launchers);
	tcase_add_test(tc, test_hmap_reserve_find);
	tcase_add_test(tc, test_before_op_top_level);
	tcase_add_test(tc, test_window_first_step);
	tcase_add_test(tc, test_exposed_ranks_threshold);
	tcase_add_test(tc, test_gloo_host_collectives);
	tcase_add_test(tc, test_same_name_nesting_and_overlap);
	tcase_add_test(tc, test_stub_tail_step_incomplete);
	tcase_add_test(tc, test_cut_tail_step_incomplete);
	tcase_add_test(tc, test_whole_trace_without_steps);
	tcase_add_test(tc, test_exposed_communication);
	tcase_add_test(tc, test_compare_status_per_step);
}

/* ---- host spans in spilled runs: the same answers as in one ---- */

/* Everything an analysis answers, as text. */
static int dump_point(void *arg, const struct mem_point *p)
{
	FILE *f = arg;

	fprintf(f, "pt %lld %lld", (long long)p->t_ns, (long long)p->reserved);
	for (int c = 0; c < MEM_NCAT; c++)
		fprintf(f, " %lld", (long long)p->cat[c]);
	fputc('\n', f);
	return 0;
}

/* What an analysis answers (finished: r), as text; tp gives its strings. */
static char *result_dump(const struct an_result *r, struct trace_parser *tp)
{
	char *out = NULL;
	size_t olen = 0, i;
	FILE *f = open_memstream(&out, &olen);

	ck_assert_ptr_nonnull(f);
	for (i = 0; i < r->nsteps; i++) {
		const struct an_step *s = &r->steps[i];
		fprintf(f, "step %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %d %d", (long long)s->step,
			(long long)s->start_ns, (long long)s->dur_ns, (long long)s->cpu_dur_ns, (long long)s->comm_overlap_ns,
			(long long)s->gpu_busy_ns, (long long)s->gpu_calls, (long long)s->cpu_end_ns,
			(long long)s->sync_calls, (long long)s->sync_ns, s->incomplete, s->whole_trace);
		for (int c = 0; c < AN_NCOMP; c++)
			fprintf(f, " %lld", (long long)s->comp_ns[c]);
		fputc('\n', f);
	}
	for (i = 0; i < r->nops; i++)
		fprintf(f, "op %s %d %lld %lld %lld\n", str_of(tp, r->ops[i].name), r->ops[i].device,
			(long long)r->ops[i].calls, (long long)r->ops[i].self_ns, (long long)r->ops[i].total_ns);
	for (i = 0; i < r->nkernels; i++)
		fprintf(f, "kernel %s %lld %lld\n", str_of(tp, r->kernels[i].name), (long long)r->kernels[i].calls,
			(long long)r->kernels[i].total_ns);
	struct an_coll *cs = colls_of(r);
	for (i = 0; i < r->ncolls; i++) {
		const struct an_coll *c = &cs[i];
		fprintf(f, "coll %lld %d %u %lld %lld %lld %lld %lld %lld %lld %lld %s %lld %u\n", (long long)c->step,
			c->kind, c->pg, (long long)c->seq, (long long)c->launch_ns, (long long)c->start_ns,
			(long long)c->end_ns, (long long)c->time_ns, (long long)c->kernels, (long long)c->bytes,
			(long long)c->group_size, c->before_op ? str_of(tp, c->before_op) : "-",
			(long long)c->before_ns, c->thread);
	}
	free(cs);
	for (i = 0; i < r->nthreads; i++)
		fprintf(f, "thread %zu %lld\n", i, (long long)r->thread_self_ns[i]);
	for (i = 0; i < r->nmem_series; i++) {
		const struct mem_series *s = &r->mem_series[i];
		fprintf(f, "series %s %zu %lld\n", s->device, s->n, (long long)s->baseline);
		ck_assert_int_eq(mem_series_each(s, dump_point, f), 0);
		for (size_t g = 0; g < s->ngroups; g++)
			fprintf(f, "group %d %s %lld %lld\n", s->groups[g].cat, s->groups[g].op ? s->groups[g].op : "-",
				(long long)s->groups[g].bytes, (long long)s->groups[g].count);
	}
	fclose(f);
	return out;
}

/* Events up to a count, and forks on the way (test_forks_answer_alike). */
struct forking {
	struct busy b;
	size_t seen, stop;		/* events given; stop: give no more after that many (0: all) */
	const size_t *at;		/* fork after these many events */
	size_t nat, next;
	char **dumps;			/* each fork's answers */
};

static int fork_event(void *p, const struct tp_event *e)
{
	struct forking *k = p;
	struct tp_errbuf err = { 0 };
	const struct an_result *r;

	if (k->stop && k->seen == k->stop)
		return 0;
	ck_assert_msg(analysis_event(k->b.an, e, &err) == 0, "%s", err.msg);
	k->seen++;
	while (k->next < k->nat && k->seen == k->at[k->next]) {
		/* as runrank.c does: what the original holds goes to its files, then the fork shares them */
		ck_assert_msg(analysis_hold(k->b.an, k->next % 2 ? 64 : 1u << 20, &err) == 0, "%s", err.msg);
		struct analysis *f = analysis_fork(k->b.an, NULL, &err);
		ck_assert_msg(f != NULL, "%s", err.msg);
		ck_assert_msg(analysis_finish(f, &r, &err) == 0, "%s", err.msg);
		k->dumps[k->next++] = result_dump(r, k->b.tp);
		analysis_free(f);
	}
	return 0;
}

/* The answers of json's first stop events (0: all), in runs of run spans (0: the default), forking at at[]. */
static char *analyse_forking(const uint8_t *json, size_t len, size_t run, size_t stop, const size_t *at, size_t nat,
			     char **dumps, size_t *seen)
{
	struct tp_errbuf err = { 0 };
	struct forking k = { .stop = stop, .at = at, .nat = nat, .dumps = dumps };
	struct trace_sink sink = { .string = busy_string, .event = fork_event, .payload = &k };
	const struct an_result *r;
	char *out;

	k.b.tp = trace_parser_new(&trace_default_limits, &sink);
	k.b.an = analysis_new(str_of, k.b.tp);
	if (run)
		analysis_set_run(k.b.an, run);
	ck_assert_int_eq(trace_parser_feed(k.b.tp, json, len, &err), 0);
	ck_assert_int_eq(trace_parser_finish(k.b.tp, &err), 0);
	ck_assert_msg(analysis_finish(k.b.an, &r, &err) == 0, "%s", err.msg);
	/* a finished analysis is not forked */
	ck_assert_ptr_null(analysis_fork(k.b.an, NULL, &err));
	out = result_dump(r, k.b.tp);
	analysis_free(k.b.an);
	trace_parser_free(k.b.tp);
	if (seen)
		*seen = k.seen;
	return out;
}

static char *analyse_dump(const uint8_t *json, size_t len, size_t run)
{
	return analyse_forking(json, len, run, 0, NULL, 0, NULL, NULL);
}

static const char *const spill_files[] = {
	"traces/hta_v100_train_memory.json.gz", "traces/kineto_resnet50_workers0.json.gz",
	"traces/hta_nccl_rel_ts.json.gz", "traces/hta_sampled_rank0.json.gz", "traces/hta_cpu_only.json.gz",
	"traces/hta_amd_mi250.json.gz", "traces/hta_event_sync.json.gz", "traces/hta_compare_base.json.gz",
	"traces/hta_triton_tiny.json.gz", "traces/hta_alexnet.json.gz", "traces/hta_large_integer.json.gz",
	"traces/hta_ns_resolution.json.gz",
	/* the H200 recordings: CUDA graphs, torch.compile, gloo across ranks, optimizer state */
	"gpu/cudagraphs", "gpu/compiled", "gpu/dist", "gpu/train", "gpu/growth",
};

/* A fixture's trace: shared/fixtures/<rel>, or the first .pt.trace.json.gz of tests/fixtures/<rel>/. */
static char *spill_path(const char *rel)
{
	char *p = NULL, sub[256], *gdir;

	if (strncmp(rel, "gpu/", 4))
		return tu_fixture(rel);
	snprintf(sub, sizeof(sub), "tests/fixtures/%s", rel);
	gdir = tu_source_path(sub);
	DIR *d = opendir(gdir);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *de; !p && (de = readdir(d));)
		if (strstr(de->d_name, ".pt.trace.json.gz")) {
			size_t n = strlen(gdir) + strlen(de->d_name) + 2;
			p = malloc(n);
			ck_assert_ptr_nonnull(p);
			snprintf(p, n, "%s/%s", gdir, de->d_name);
		}
	closedir(d);
	free(gdir);
	ck_assert_ptr_nonnull(p);
	return p;
}

/*
 * The analysis reads its host spans back from sorted runs merged; a trace
 * past one run is spilled. Runs of 1000 and of 7 spans (hundreds of runs
 * on the larger fixtures) answer what one run in memory does, byte for
 * byte: steps, operators, kernels, collectives, threads, memory series.
 * So do runs of 7 when the filter of communication kernels' ids says yes
 * to every runtime call (what its false positives do).
 */
START_TEST(test_spilled_runs_answer_alike)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	static const size_t runs[] = { 1000, 7, 7 };

	ck_assert_ptr_nonnull(json);
	char *whole = analyse_dump(json, glen, 0);
	ck_assert_msg(strlen(whole) > 100, "%s: nothing analysed", spill_files[_i]);
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		analysis_comm_filter_all(k == 2);
		char *spilled = analyse_dump(json, glen, runs[k]);
		analysis_comm_filter_all(0);
		if (strcmp(whole, spilled)) {
			size_t at = 0;
			while (whole[at] == spilled[at])
				at++;
			ck_abort_msg("%s, runs of %zu%s: differs at byte %zu: ...%.120s... against ...%.120s...",
				     spill_files[_i], runs[k], k == 2 ? ", the filter saying yes to all" : "", at, whole + (at > 40 ? at - 40 : 0),
				     spilled + (at > 40 ? at - 40 : 0));
		}
		free(spilled);
	}
	free(whole);
	free(json);
	free(gz);
	free(path);
}
END_TEST

static void same_dump(const char *what, size_t runs, const char *want, const char *got)
{
	size_t at = 0;

	if (!strcmp(want, got))
		return;
	while (want[at] == got[at])
		at++;
	ck_abort_msg("%s, runs of %zu: differs at byte %zu: ...%.120s... against ...%.120s...", what, runs, at,
		     want + (at > 40 ? at - 40 : 0), got + (at > 40 ? at - 40 : 0));
}

/*
 * A rank's analysis grows chunk by chunk and is forked to be finished
 * after each (server/pipeline/runrank.c). A fork after k events answers
 * what an analysis of those k alone does, byte for byte, and the original,
 * going on past its forks (they shared its spilled runs, and it spilled
 * what it held at each), answers what one analysis of every event does.
 */
START_TEST(test_forks_answer_alike)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen, total;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	static const size_t runs[] = { 0, 7 };

	ck_assert_ptr_nonnull(json);
	char *whole = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, &total);
	size_t at[] = { total / 5 ? total / 5 : 1, total / 2 ? total / 2 : 1, total - total / 7 };
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		char *dumps[3] = { NULL, NULL, NULL };
		char *grown = analyse_forking(json, glen, runs[k], 0, at, 3, dumps, NULL);
		same_dump(spill_files[_i], runs[k], whole, grown);
		for (size_t i = 0; i < 3; i++) {
			ck_assert_ptr_nonnull(dumps[i]);
			char *prefix = analyse_forking(json, glen, runs[k], at[i], NULL, 0, NULL, NULL);
			same_dump(spill_files[_i], runs[k], prefix, dumps[i]);
			free(prefix);
			free(dumps[i]);
		}
		free(grown);
	}
	free(whole);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * The peak a memory model keeps as its records come (allocator totals on every one) is the one
 * a walk of its records finds: what was alive there answers the same. The V100 trace's, the
 * first, is kept.
 */
START_TEST(test_peak_kept_as_walked)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);

	ck_assert_ptr_nonnull(json);
	mem_peak_test(0);
	char *kept = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, NULL);
	unsigned long n = mem_peak_test(1);
	char *walked = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, NULL);
	ck_assert_uint_eq(mem_peak_test(0), 0);
	same_dump(spill_files[_i], 0, walked, kept);
	if (_i == 0)
		ck_assert_uint_gt(n, 0);
	free(kept);
	free(walked);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * What a memory model takes counts its records (48 B an event) and grows with them; a
 * copy counts only the records written after what it shares (analysis_held_bytes() adds it,
 * and the ranks kept between derivations are bounded by that: runrank.c's grown_bytes()).
 */
START_TEST(test_model_bytes)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_model *m = mem_model_new(), *c;
	struct mem_rec x = { .ctx = { .top = -1 } };
	uint64_t at[3];

	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(mem_model_bytes(NULL), 0);
	/* a block made and freed again and again at one address: the records are what grows */
	x.ev = (struct mem_event){ .dev_type = 1, .has_addr = 1, .has_totals = 1, .addr = 0x10000 };
	for (int i = 0; i < 3000; i++) {
		x.ev.ts = x.ev.ev_idx = i;
		x.ev.bytes = i % 2 ? -512 : 512;
		x.ev.total_alloc += x.ev.bytes;
		ck_assert_int_eq(mem_model_add(m, &in, &x, &err), 0);
		if (i == 0 || i == 999)
			at[i ? 1 : 0] = mem_model_bytes(m);
	}
	ck_assert_int_eq(mem_model_sync(m, &err), 0);
	at[2] = mem_model_bytes(m);
	ck_assert_uint_ge(at[1], at[0] + 999 * 48);
	ck_assert_uint_ge(at[2], at[1] + 2000 * 48);
	ck_assert_int_eq(mem_model_copy(m, &c, &err), 0);
	ck_assert_uint_lt(mem_model_bytes(c), at[2] - 2999 * 48);
	mem_model_free(c);
	mem_model_free(m);
}
END_TEST

/*
 * The scripted device of test_marks_go_on: a block made and freed again and again at one
 * address, and at event keep a block at another, freed at event freed (-1: never), both with
 * nothing around them (made in forward: alive, unknown; freed, an activation).
 */
static void mark_feed(struct mem_model *m, int from, int to, int keep, int freed)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_rec x = { .ctx = { .top = -1 } };

	for (int i = from; i < to; i++) {
		int j = i - (i > keep) - (freed >= 0 && i > freed), y = i >= keep && (freed < 0 || i < freed);
		x.ev = (struct mem_event){ .dev_type = 1, .has_addr = 1, .has_totals = 1, .ts = i, .ev_idx = i,
					   .total_alloc = (1 << 20) + (j % 2 ? 0 : 512) + (y ? 4096 : 0) };
		if (i == keep || i == freed) {
			x.ev.addr = 0x20000;
			x.ev.bytes = i == keep ? 4096 : -4096;
			x.ev.total_alloc = (1 << 20) + (j % 2 ? 512 : 0) + (y ? 4096 : 0);
		} else {
			x.ev.addr = 0x10000;
			x.ev.bytes = j % 2 ? -512 : 512;
		}
		ck_assert_int_eq(mem_model_add(m, &in, &x, &err), 0);
	}
	ck_assert_int_eq(mem_model_sync(m, &err), 0);
}

struct pts {
	struct mem_point *v;
	size_t n, cap;
};

static int pts_add(void *arg, const struct mem_point *p)
{
	struct pts *x = arg;

	if (tp_grow((void **)&x->v, &x->cap, x->n + 1, sizeof(*x->v)))
		return TP_ERR_NOMEM;
	x->v[x->n++] = *p;
	return 0;
}

/*
 * A copy of m (its events [0, n) of the script) gone on with events [n, n + 40): its result,
 * its single series in *s, told by mark (may be NULL) which of its points are the same. Its
 * points from s->same on must be a walk's from the start, and s->pre what the ones before
 * come to; out (may be NULL): its mark, once replayed.
 */
static struct mem_result *mark_result(struct mem_model *m, int n, int freed, const struct mem_mark *mark,
				      const struct mem_series **s, struct mem_mark **out)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_model *c;
	struct mem_result *r;
	struct pts all = { 0 }, tail = { 0 };
	struct mem_prefix pre = MEM_PREFIX_INIT;
	size_t ns, i;

	ck_assert_int_eq(mem_model_copy(m, &c, &err), 0);
	mark_feed(c, n, n + 40, 1500, freed);
	ck_assert_int_eq(mem_model_result(c, &in, &r, s, &ns, &err), 0);
	ck_assert_uint_eq(ns, 1);
	ck_assert_int_eq(mem_result_follow(r, mark), 0);
	ck_assert_uint_eq((*s)->same % MEM_PT_BLOCK, 0);
	ck_assert_int_eq(mem_series_each_from(*s, (*s)->same, pts_add, &tail), 0);
	if (out) {
		*out = mem_result_mark(r);
		ck_assert_ptr_nonnull(*out);
	}
	ck_assert_int_eq(mem_series_each(*s, pts_add, &all), 0);
	ck_assert_uint_eq(all.n, (size_t)n + 40);
	ck_assert_uint_eq(tail.n, all.n - (*s)->same);
	ck_assert_mem_eq(tail.v, all.v + (*s)->same, tail.n * sizeof(*tail.v));
	for (i = 0; i < (*s)->same; i++)
		mem_prefix_add(&pre, &all.v[i]);
	if ((*s)->same)
		ck_assert_mem_eq(&pre, &(*s)->pre, sizeof(pre));
	tp_free(all.v);
	tp_free(tail.v);
	return r;
}

/*
 * A copy's points are the same as the last marked copy of the model's up to the records that
 * one shared, and before the first allocation alive in its model whose category changed since:
 * the block made at event 1500 is alive (unknown) at the first copy and an activation by the
 * second, whose points are then new from block 1 (1,024) on, not from the 3,000 records shared;
 * with nothing changed, the third's are from the 5,000 shared (block 4); a model of the same
 * events that is another's is not followed.
 */
START_TEST(test_marks_go_on)
{
	struct mem_model *m = mem_model_new(), *o = mem_model_new();
	struct mem_mark *m1, *m2;
	struct mem_result *r;
	const struct mem_series *s;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(o);
	mark_feed(m, 0, 3000, 1500, 3050);
	r = mark_result(m, 3000, -1, NULL, &s, &m1);	/* its 40 events stop before the free at 3,050 */
	ck_assert_uint_eq(s->same, 0);
	mem_result_free(r);
	mark_feed(m, 3000, 5000, 1500, 3050);
	r = mark_result(m, 5000, 3050, m1, &s, &m2);
	ck_assert_uint_eq(s->same, 1024);
	mem_result_free(r);
	mark_feed(m, 5000, 9000, 1500, 3050);
	r = mark_result(m, 9000, 3050, m2, &s, NULL);
	ck_assert_uint_eq(s->same, 4096);
	mem_result_free(r);
	mark_feed(o, 0, 9000, 1500, 3050);
	r = mark_result(o, 9000, 3050, m2, &s, NULL);
	ck_assert_uint_eq(s->same, 0);
	mem_result_free(r);
	mem_mark_free(m1);
	mem_mark_free(m2);
	mem_model_free(m);
	mem_model_free(o);
}
END_TEST

/* A spill that cannot be written fails the analysis with a message, and leaks nothing. */
START_TEST(test_spill_failure)
{
	char *path = tu_fixture("traces/hta_nccl_rel_ts.json.gz");
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	struct tp_errbuf err = { 0 };
	struct busy b = { 0 };
	struct trace_sink sink = { .string = busy_string, .event = spill_event, .payload = &b };
	const char *old = getenv("TMPDIR");
	char *keep = old ? strdup(old) : NULL;

	setenv("TMPDIR", "/nonexistent/trainscope", 1);
	b.tp = trace_parser_new(&trace_default_limits, &sink);
	b.an = analysis_new(str_of, b.tp);
	analysis_set_run(b.an, 100);
	b.fail_ok = 1;
	ck_assert_int_ne(trace_parser_feed(b.tp, json, glen, &err), 0);
	ck_assert_int_eq(b.an_err.rc, TP_ERR_IO);
	ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "%s", b.an_err.msg);
	if (keep)
		setenv("TMPDIR", keep, 1);
	else
		unsetenv("TMPDIR");
	free(keep);
	analysis_free(b.an);
	trace_parser_free(b.tp);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * The passes make temporary files of their own (the runtime calls, the
 * steps' GPU spans, the host's busy intervals, the memory series...): each
 * in turn fails to be made, and the analysis fails with a message, whether
 * it was streaming or finishing, and leaks nothing (ASan), until every file
 * is made and the answer is the one made without failures.
 */
START_TEST(test_spill_failure_each_file)
{
	static const char *const files[] = { "traces/hta_v100_train_memory.json.gz", "traces/hta_nccl_rel_ts.json.gz" };
	static const size_t run[] = { 20000, 50 };
	char *path = tu_fixture(files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	long n;

	ck_assert_ptr_nonnull(json);
	for (n = 0; n < 64; n++) {
		struct tp_errbuf err = { 0 };
		struct busy b = { .fail_ok = 1 };
		struct trace_sink sink = { .string = busy_string, .event = spill_event, .payload = &b };
		const struct an_result *r;
		int rc;

		b.tp = trace_parser_new(&trace_default_limits, &sink);
		b.an = analysis_new(str_of, b.tp);
		analysis_set_run(b.an, run[_i]);
		spill_fail_after(n);
		rc = trace_parser_feed(b.tp, json, glen, &err);
		if (!rc)
			rc = trace_parser_finish(b.tp, &err);
		if (rc) {
			ck_assert_int_eq(b.an_err.rc, TP_ERR_IO);
			ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "%s", b.an_err.msg);
		} else if ((rc = analysis_finish(b.an, &r, &b.an_err))) {
			ck_assert_int_eq(rc, TP_ERR_IO);
			ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "N=%ld: %s", n, b.an_err.msg);
		}
		spill_fail_after(-1);
		analysis_free(b.an);
		trace_parser_free(b.tp);
		if (!rc)
			break;
	}
	ck_assert_msg(n >= 6 && n < 64, "%s: %ld temporary files", files[_i], n);
	char *whole = analyse_dump(json, glen, 0), *spilled = analyse_dump(json, glen, run[_i]);
	ck_assert_str_eq(whole, spilled);
	free(whole);
	free(spilled);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/* ---- parts (analysis_merge()) ---- */

/* the synthetic trace's events, those from cut on moved on by gap, to whole and to part a (before cut) or b */
struct parting {
	struct analysis *whole, *a, *b;
	int64_t cut, gap;
	int pass;		/* 0: whole and a; 1: b */
};

static int parting_event(void *p, const struct tp_event *ev)
{
	struct parting *pt = p;
	struct tp_event e = *ev;
	struct tp_errbuf err = { 0 };
	int late = (e.have & TH_TS) && e.ts_ns >= pt->cut;

	if (late)
		e.ts_ns += pt->gap;
	if (!pt->pass) {
		ck_assert_int_eq(analysis_event(pt->whole, &e, &err), 0);
		if (!late)
			ck_assert_int_eq(analysis_event(pt->a, &e, &err), 0);
	} else if (late) {
		ck_assert_int_eq(analysis_event(pt->b, &e, &err), 0);
	}
	return 0;
}

static int point_into(void *arg, const struct mem_point *p)
{
	struct mem_point **v = arg;

	**v = *p;
	(*v)++;
	return 0;
}

/* the points of s, in an array the caller frees */
static struct mem_point *points_of(const struct mem_series *s)
{
	struct mem_point *v = calloc(s->n + 1, sizeof(*v)), *at = v;

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mem_series_each(s, point_into, &at), 0);
	ck_assert_uint_eq((size_t)(at - v), s->n);
	return v;
}

static void same_results(const struct an_result *x, const struct an_result *y)
{
	ck_assert_uint_eq(x->nsteps, y->nsteps);
	for (size_t i = 0; i < x->nsteps; i++)
		ck_assert_msg(!memcmp(&x->steps[i], &y->steps[i], sizeof(x->steps[i])), "step %zu (#%lld) differs", i,
			      (long long)x->steps[i].step);
	ck_assert_uint_eq(x->nops, y->nops);
	ck_assert(!memcmp(x->ops, y->ops, x->nops * sizeof(*x->ops)));
	ck_assert_uint_eq(x->nkernels, y->nkernels);
	ck_assert(!memcmp(x->kernels, y->kernels, x->nkernels * sizeof(*x->kernels)));
	ck_assert_uint_eq(x->nthreads, y->nthreads);
	ck_assert(!memcmp(x->thread_self_ns, y->thread_self_ns, x->nthreads * sizeof(*x->thread_self_ns)));
	ck_assert_uint_eq(x->ncolls, y->ncolls);
	struct an_coll *cx = colls_of(x), *cy = colls_of(y);
	ck_assert(!memcmp(cx, cy, x->ncolls * sizeof(*cx)));
	free(cx);
	free(cy);
	ck_assert_uint_eq(x->nmem_series, y->nmem_series);
	for (size_t i = 0; i < x->nmem_series; i++) {
		const struct mem_series *a = &x->mem_series[i], *b = &y->mem_series[i];
		ck_assert_str_eq(a->device, b->device);
		ck_assert_uint_eq(a->n, b->n);
		ck_assert_int_eq(a->baseline, b->baseline);
		ck_assert_uint_eq(a->ngroups, b->ngroups);
		ck_assert(!memcmp(a->groups, b->groups, a->ngroups * sizeof(*a->groups)));
		struct mem_point *pa = points_of(a), *pb = points_of(b);
		ck_assert(!memcmp(pa, pb, a->n * sizeof(*pa)));
		free(pa);
		free(pb);
	}
}

/*
 * A loop of 10 steps cut before step k, the steps from it moved on by a gap: part a before
 * the cut, part b (analysis_new_after(a)) from it, merged, give one analysis's result of them
 * all, to the byte: steps (b's first is no window's first: its number follows a's last), operator
 * and kernel tables, threads, collectives and the memory model (a leak made in a, alive in b).
 * Without the gap the parts touch (a's last step ends where b's first begins): refused. An
 * operator's External id in b below one's in a (the autograd thread's are) joins nothing: merged;
 * a kernel in b that no call launched, whose External id names an operator in a, joins them:
 * refused (analysis_follows() says as the merge does). The memory model: a thread whose
 * allocation a placed with no spans to go by, which b's spans put in backward, makes it again
 * from all the events; without that allocation, a's model goes on with b's events (an
 * allocation made in a and freed in b among them): the same points and peak either way.
 */
START_TEST(test_parts_merge_as_one)
{
	struct synth s = healthy;
	size_t len;

	s.act_bytes = 1 << 20;
	s.leak_bytes = 4096;
	s.nccl_us = 500;
	s.sync_us = 200;
	char *base = synth_trace(&s, &len);
	/* and a thread whose allocation comes in a, its spans (backward) only in b */
	struct text t = { .p = base, .n = len - 2, .cap = len };
	ck_assert_str_eq(base + len - 2, "]}");
	size_t n0 = t.n;
	mem_event(&t, 2, 1000000000 + s.step_us + 50, 0x30000000, 2 << 20, 2 << 20, 10000);
	size_t n1 = t.n;
	span(&t, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, 2, 1000000000 + 6 * s.step_us + 5000,
	     50, "");
	/* and an allocation in step 0's first operator, freed in step 4's: the first place of a and of b, the
	 * same operator to a merge that did not move b's places past a's */
	mem_event(&t, 1, 1000000000 + 3, 0x40000000, 3 << 20, 3 << 20, 10001);
	mem_event(&t, 1, 1000000000 + 4 * s.step_us + 3, 0x40000000, -(3 << 20), 0, 10002);
	/* External ids: an operator's in a above one's in b (as the autograd thread's are): nothing joins them */
	span(&t, "cpu_op", "tagged", 1, 1, 1000000000 + 10, 1, "\"External id\":500");
	span(&t, "cpu_op", "tagged_bwd", 1, 2, 1000000000 + 6 * s.step_us + 5060, 1, "\"External id\":100");
	size_t nbase = t.n;
	emit(&t, "]}");
	/* and a copy with a kernel in b that no call launched, whose External id is the operator's in a */
	struct text o = { .p = malloc(t.n + 512), .n = nbase, .cap = t.n + 512 };
	memcpy(o.p, t.p, nbase);
	span(&o, "kernel", "orphan", 0, 7, 1000000000 + 7 * s.step_us + 10, 5, "\"External id\":500");
	emit(&o, "]}");
	/* and a copy without the thread's allocation in a: a's memory model goes on with b's events */
	struct text q = { .p = malloc(t.n), .n = t.n - (n1 - n0), .cap = t.n };
	memcpy(q.p, t.p, n0);
	memcpy(q.p + n0, t.p + n1, t.n - n1);
	for (int round = 0; round < 4; round++) {
		int gap = round > 0, joined = round == 2;	/* joined: the merge must refuse */
		char *json = joined ? o.p : round == 3 ? q.p : t.p;
		len = joined ? o.n : round == 3 ? q.n : t.n;
		struct parting pt = { .cut = (1000000000LL + 4 * s.step_us) * 1000, .gap = gap ? 1000000000LL : 0 };
		struct trace_sink sink = { .string = busy_string, .event = parting_event, .payload = &pt };
		struct trace_parser *p0 = trace_parser_new(&trace_default_limits, &sink), *p1;
		const struct an_result *rw, *ra, *rb;
		struct analysis *acc, *all;
		struct tp_errbuf err = { 0 };

		pt.whole = analysis_new(str_of, p0);
		pt.a = analysis_new(str_of, p0);
		analysis_set_part(pt.a);
		ck_assert_int_eq(trace_parser_feed(p0, (const uint8_t *)json, len, &err), 0);
		ck_assert_int_eq(trace_parser_finish(p0, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.whole, &rw, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.a, &ra, &err), 0);
		ck_assert_uint_eq(ra->nsteps, 4);
		acc = NULL;
		ck_assert_int_eq(analysis_absorb(&acc, pt.a, &err), 0);
		/* b: the same text parsed again (the same string ids), from the cut on */
		ck_assert_ptr_nonnull(pt.b = analysis_new_after(pt.a, &err));
		pt.pass = 1;
		p1 = trace_parser_new(&trace_default_limits, &sink);
		ck_assert_int_eq(trace_parser_feed(p1, (const uint8_t *)json, len, &err), 0);
		ck_assert_int_eq(trace_parser_finish(p1, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.b, &rb, &err), 0);
		ck_assert_uint_eq(rb->nsteps, 6);
		int rc = analysis_merge(acc, pt.b, &all, &err);
		ck_assert_int_eq(analysis_follows(pt.a, pt.b), rc == 0);
		if (!gap || joined) {
			ck_assert_int_eq(rc, TP_ERR_UNSUPPORTED);
			ck_assert_str_eq(err.code, "parts_overlap");
		} else {
			ck_assert_msg(rc == 0, "%s", err.msg);
			ck_assert_uint_eq(rw->nsteps, 10);
			ck_assert_uint_gt(rw->ncolls, 0);
			ck_assert_uint_gt(rw->nmem_series, 0);
			same_results(rw, analysis_merged(all));
			/* round 1: a placed the thread's allocation outside backward, which b's spans put in it */
			ck_assert_int_eq(analysis_memory_went_on(all), round == 3);
			analysis_free(all);
		}
		analysis_free(acc);
		analysis_free(pt.b);
		analysis_free(pt.a);
		analysis_free(pt.whole);
		trace_parser_free(p1);
		trace_parser_free(p0);
	}
	free(q.p);
	free(o.p);
	free(t.p);
}
END_TEST

/* the synthetic trace's events in three parts, cut at cut[0] and cut[1], each part moved on by a gap more */
struct thirds {
	struct analysis *whole, *p[3];
	int64_t cut[2], gap;
	int pass;		/* 0: whole and p[0]; k: p[k] */
};

static int thirds_event(void *arg, const struct tp_event *ev)
{
	struct thirds *th = arg;
	struct tp_event e = *ev;
	struct tp_errbuf err = { 0 };
	int k = !(e.have & TH_TS) ? 0 : e.ts_ns >= th->cut[1] ? 2 : e.ts_ns >= th->cut[0] ? 1 : 0;

	if (e.have & TH_TS)
		e.ts_ns += k * th->gap;
	if (!th->pass)
		ck_assert_int_eq(analysis_event(th->whole, &e, &err), 0);
	if (k == th->pass)
		ck_assert_int_eq(analysis_event(th->p[k], &e, &err), 0);
	return 0;
}

/*
 * A rank in three parts, absorbed one by one and merged with the third: a thread's allocation in
 * the first, with no spans there to place it, its backward spans in the second; absorbing the
 * second makes the memory model again from both parts' events (the first's model placed the
 * allocation outside backward), and the merge with the third goes on from that one. The result
 * is one analysis's of it all, to the byte.
 */
START_TEST(test_parts_model_made_again)
{
	struct synth s = healthy;
	size_t len;

	s.act_bytes = 1 << 20;
	s.leak_bytes = 4096;
	char *base = synth_trace(&s, &len);
	struct text t = { .p = base, .n = len - 2, .cap = len };
	ck_assert_str_eq(base + len - 2, "]}");
	mem_event(&t, 2, 1000000000 + s.step_us + 50, 0x30000000, 2 << 20, 2 << 20, 10000);
	span(&t, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, 2, 1000000000 + 5 * s.step_us + 5000,
	     50, "");
	mem_event(&t, 1, 1000000000 + 3, 0x40000000, 3 << 20, 3 << 20, 10001);	/* freed in the second part */
	mem_event(&t, 1, 1000000000 + 4 * s.step_us + 3, 0x40000000, -(3 << 20), 0, 10002);
	emit(&t, "]}");
	struct thirds th = { .cut = { (1000000000LL + 4 * s.step_us) * 1000, (1000000000LL + 7 * s.step_us) * 1000 },
			     .gap = 1000000000LL };
	struct trace_sink sink = { .string = busy_string, .event = thirds_event, .payload = &th };
	struct trace_parser *ps[3];
	const struct an_result *rw, *r;
	struct analysis *acc = NULL, *all;
	struct tp_errbuf err = { 0 };
	static const size_t nsteps[3] = { 4, 3, 3 };

	ps[0] = trace_parser_new(&trace_default_limits, &sink);
	th.whole = analysis_new(str_of, ps[0]);
	th.p[0] = analysis_new(str_of, ps[0]);
	analysis_set_part(th.p[0]);
	for (int k = 0; k < 3; k++) {
		th.pass = k;
		if (k) {
			ck_assert_ptr_nonnull(th.p[k] = analysis_new_after(th.p[k - 1], &err));
			ps[k] = trace_parser_new(&trace_default_limits, &sink);	/* the same text: the same string ids */
		}
		ck_assert_int_eq(trace_parser_feed(ps[k], (const uint8_t *)t.p, t.n, &err), 0);
		ck_assert_int_eq(trace_parser_finish(ps[k], &err), 0);
		if (!k)
			ck_assert_int_eq(analysis_finish(th.whole, &rw, &err), 0);
		ck_assert_int_eq(analysis_finish(th.p[k], &r, &err), 0);
		ck_assert_uint_eq(r->nsteps, nsteps[k]);
		if (k < 2) {
			ck_assert_msg(analysis_absorb(&acc, th.p[k], &err) == 0, "part %d: %s", k, err.msg);
			/* the first starts a model; the second's thread makes it again */
			ck_assert_int_eq(analysis_memory_went_on(acc), k == 0);
		}
	}
	ck_assert_msg(analysis_merge(acc, th.p[2], &all, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(analysis_memory_went_on(all), 1);
	ck_assert_uint_eq(rw->nsteps, 10);
	ck_assert_uint_gt(rw->nmem_series, 0);
	same_results(rw, analysis_merged(all));
	analysis_free(all);
	analysis_free(acc);
	for (int k = 0; k < 3; k++) {
		analysis_free(th.p[k]);
		trace_parser_free(ps[k]);
	}
	analysis_free(th.whole);
	free(t.p);
}
END_TEST

static void add_spill_tests(TCase *tc)
{
	tcase_add_test(tc, test_parts_merge_as_one);
	tcase_add_test(tc, test_parts_model_made_again);
	tcase_add_loop_test(tc, test_spill_failure_each_file, 0, 2);
	tcase_add_loop_test(tc, test_spilled_runs_answer_alike, 0, (int)(sizeof(spill_files) / sizeof(spill_files[0])));
	tcase_add_loop_test(tc, test_forks_answer_alike, 0, (int)(sizeof(spill_files) / sizeof(spill_files[0])));
	tcase_add_loop_test(tc, test_peak_kept_as_walked, 0, (int)(sizeof(spill_files) / sizeof(spill_files[0])));
	tcase_add_test(tc, test_model_bytes);
	tcase_add_test(tc, test_marks_go_on);
	tcase_add_test(tc, test_spill_failure);
}
