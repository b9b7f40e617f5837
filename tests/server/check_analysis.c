/*
 * check_analysis.c: steps, breakdowns, operator and kernel tables and the
 * diagnosis rules (server/analysis/), through the real ingest and store:
 * against the fixtures' independently computed figures, and against small
 * synthetic traces (synth.c), one per rule, each way. Agreement with
 * PyTorch's figures is in check_analysis_pytorch.c, spilled runs in
 * check_analysis_spill.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/analysis_int.h"
#include "analysis/diagnosis.h"
#include "analysis/distributed.h"
#include "analysis/memory.h"
#include "pipeline/ingest.h"
#include "reads.h"
#include "store/store.h"
#include "suites.h"
#include "synth.h"

START_TEST(test_v100_kernels_and_steps)
{
	json_t *k, *top;

	synth_ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	k = synth_query("v100", Q_KERNELS);
	/* shared/fixtures/README.md: 19,370 kernels, 977,859 us; the top one is NCCL's all-reduce */
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "calls"), 19370);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "total_ns"), 977859000);
	top = json_array_get(json_object_get(k, "kernels"), 0);
	ck_assert_msg(!strncmp(json_string_value(json_object_get(top, "name")), "ncclKernel_AllReduce_RING_LL_Sum_float(", 39),
		      "top kernel: %s", json_string_value(json_object_get(top, "name")));
	ck_assert_int_eq(synth_iget(top, "total_ns"), 357343000);
	ck_assert_int_eq(synth_iget(top, "mean_ns"), synth_iget(top, "total_ns") / synth_iget(top, "calls"));
	ck_assert_int_ge(synth_iget(top, "max_ns"), synth_iget(top, "mean_ns"));
	ck_assert(json_is_real(json_object_get(top, "blocks_per_sm")));
	json_decref(k);
	synth_check_breakdown_sums("v100", 5);
}
END_TEST

START_TEST(test_resnet_and_nccl_figures)
{
	json_t *k;

	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	k = synth_query("resnet", Q_KERNELS);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "calls"), 8772);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "total_ns"), 591532000);
	json_decref(k);
	synth_check_breakdown_sums("resnet", 6);
	{
		/* PyTorch 1.9 [memory] events have neither Addr nor totals: no category goes below zero
		 * (the web helper saw parameter at -952,836,608 before the baseline was estimated) */
		struct tp_errbuf err = { 0 };
		struct store_reader *r;
		json_t *m, *a;
		size_t i, c;
		ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
		m = read_memory(r, "resnet", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
		store_reader_close(r);
		ck_assert_msg(m != NULL, "%s", err.msg);
		for (c = 0; c < MEM_NCAT; c++)
			json_array_foreach(json_object_get(json_object_get(m, "categories"), mem_cat_names[c]), i, a)
				ck_assert_msg(json_integer_value(a) >= 0, "%s at %zu: %lld", mem_cat_names[c], i,
					      (long long)json_integer_value(a));
		json_decref(m);
	}


	synth_ingest_fixture("nccl", "traces/hta_nccl_rel_ts.json.gz");
	k = synth_query("nccl", Q_KERNELS);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "calls"), 2700);
	/* 162,532.3 us: float-us times, summed exactly in ns */
	ck_assert_int_ge(synth_iget(json_object_get(k, "total"), "total_ns"), 162532250);
	ck_assert_int_le(synth_iget(json_object_get(k, "total"), "total_ns"), 162532350);
	json_decref(k);
	synth_check_breakdown_sums("nccl", 3);
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
	ck_assert_int_eq(synth_iget(r, "clock_offset_ns"), 5000002);
	ck_assert_int_eq(synth_iget(r, "clock_collectives"), 4);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(json_object_get(d, "clock"), "note")), "rank 2"));
	/* rank 2 launches last at each of its two (1 us after rank 1): who is last survives the alignment */
	r = json_array_get(json_object_get(json_object_get(d, "stragglers"), "instances"), 0);
	ck_assert_int_eq(synth_iget(r, "last_rank"), 2);
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

	synth_ingest_fixture("nccl", "traces/hta_nccl_rel_ts.json.gz");
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
	ck_assert_int_eq(store_dist_input(r, "nccl", &in, &err), 0);
	ck_assert_uint_eq(in.ncolls, 21);
	ck_assert_ptr_nonnull(d = distributed_run(&in, 0, 0));
	json_array_foreach(json_object_get(d, "collectives"), i, c) {
		const char *kind = json_string_value(json_object_get(c, "kind"));
		int ar = !strcmp(kind, "all_reduce");
		ck_assert_msg(ar || !strcmp(kind, "broadcast"), "%s", kind);
		seen |= ar ? 1 : 2;
		ck_assert_str_eq(json_string_value(json_object_get(c, "pg")), "0");
		ck_assert_int_eq(synth_iget(c, "group_size"), 2);
		ck_assert_int_eq(synth_iget(c, "calls"), ar ? 15 : 6);
		ck_assert_int_eq(synth_iget(c, "bytes"), ar ? 306684384 : 638712);
		ck_assert_int_eq(synth_iget(c, "time_ns"), ar ? 46762159 : 114334);
		ck_assert_double_eq_tol(json_real_value(json_object_get(c, "algbw_gbps")),
					ar ? 306684384.0 / 46762159 : 638712.0 / 114334, 1e-9);
	}
	ck_assert_int_eq(seen, 3);
	/* one rank: nothing to match */
	ck_assert_int_eq(synth_iget(json_object_get(d, "stragglers"), "matched"), 0);
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

	synth_ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	g = synth_query("v100", Q_OPS_GPU);
	k = synth_query("v100", Q_KERNELS);
	json_array_foreach(json_object_get(g, "ops"), i, o) {
		ck_assert_int_le(synth_iget(o, "self_ns"), synth_iget(o, "total_ns"));
		self += synth_iget(o, "self_ns");
	}
	ck_assert_int_eq(self, synth_iget(json_object_get(g, "total"), "self_ns"));
	/* GPU self time is attributed kernel, memcpy and memset time: never more than there is */
	c = synth_query("v100", Q_MEMCPY);
	gpu_all = synth_iget(json_object_get(k, "total"), "total_ns") + synth_iget(json_object_get(c, "total"), "total_ns");
	ck_assert_int_le(self, gpu_all + 100000000 /* memsets */);
	/* and nearly all kernel time finds its operator through the correlation id */
	ck_assert_int_ge(self, synth_iget(json_object_get(k, "total"), "total_ns") * 95 / 100);
	/* the all-reduce kernels are launched by nccl:all_reduce */
	o = json_array_get(json_object_get(g, "ops"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(o, "name")), "nccl:all_reduce");
	ck_assert_int_eq(synth_iget(o, "self_ns"), 357343000);
	json_decref(g);
	json_decref(k);
	json_decref(c);
}
END_TEST

/* ---- op self times against each thread's busy time, computed here independently ---- */

/* Two ProfilerStep spans over one instant: the one left empty never overlaps the next (the fuzzer's find). */
START_TEST(test_steps_tied)
{
	char *path = tu_source_path("tests/hostile/trace/steps_tied.json");
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j, *steps, *x;
	json_int_t end = INT64_MIN;

	ck_assert_ptr_nonnull(b);
	synth_ingest("tied", b, len);
	j = synth_query("tied", Q_STEPS);
	steps = json_object_get(j, "steps");
	ck_assert_uint_eq(json_array_size(steps), 3);
	json_array_foreach(steps, i, x) {
		ck_assert_int_ge(synth_iget(x, "start_ns"), end);
		ck_assert_int_ge(synth_iget(x, "dur_ns"), 0);
		end = synth_iget(x, "start_ns") + synth_iget(x, "dur_ns");
	}
	/* #1 from 1 us to its end at 101 us; #3 empty there; #2 from there to its kernel's end (53 us) or its own (102 us) */
	ck_assert_int_eq(synth_iget(json_array_get(steps, 0), "step"), 1);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 1), "step"), 3);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 1), "dur_ns"), 0);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 1), "start_ns"), 101000);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 2), "step"), 2);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 2), "start_ns"), 101000);
	ck_assert_int_eq(synth_iget(json_array_get(steps, 2), "dur_ns"), 1000);
	json_decref(j);
	free(b);
	free(path);
}
END_TEST

/*
 * Spans nested past AN_WALK_MAX_DEPTH (issue 50: 3.3 M operators at one instant on one thread, a
 * 1 MB upload, held 435 MiB of nesting stack): the stack stops growing there, and the operator
 * table still adds up to the thread's busy time, every self time at least 0.
 */
START_TEST(test_nesting_capped)
{
	enum { N = 3 * AN_WALK_MAX_DEPTH };
	struct walk w = { 0 };
	struct hrec r = { .s = 10000, .e = 110000, .thread = 1, .name = 1 };
	size_t i, len = 0, cap = 256 + (size_t)N * 120;
	char *b = malloc(cap);
	json_t *j, *ops, *x;
	json_int_t self = 0;

	for (i = 0; i < N; i++)
		ck_assert_ptr_nonnull(an_walk_push(&w, &r));
	ck_assert_uint_eq(w.depth, AN_WALK_MAX_DEPTH);
	ck_assert_uint_le(w.cap, 2 * AN_WALK_MAX_DEPTH);
	tp_free(w.st);

	ck_assert_ptr_nonnull(b);
	len += (size_t)snprintf(b + len, cap - len, "{\"traceEvents\": [{\"ph\": \"X\", \"cat\": \"cpu_op\", "
				"\"name\": \"outer\", \"pid\": 1, \"tid\": 1, \"ts\": 0, \"dur\": 1000}");
	for (i = 0; i < N; i++)
		len += (size_t)snprintf(b + len, cap - len, ", {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": "
					"\"aten::op%zu\", \"pid\": 1, \"tid\": 1, \"ts\": 10, \"dur\": 100}", i % 3);
	len += (size_t)snprintf(b + len, cap - len, "]}");
	synth_ingest("deep", b, len);
	j = synth_query("deep", Q_OPS_CPU);
	ops = json_object_get(j, "ops");
	ck_assert_uint_eq(json_array_size(ops), 4);
	json_array_foreach(ops, i, x) {
		ck_assert_int_ge(synth_iget(x, "self_ns"), 0);
		self += synth_iget(x, "self_ns");
		if (strcmp(json_string_value(json_object_get(x, "name")), "outer"))
			ck_assert_int_eq(synth_iget(x, "total_ns"), (json_int_t)(N / 3) * 100000);
	}
	ck_assert_int_eq(self, 1000000);	/* outer's microsecond, busy throughout */
	json_decref(j);
	free(b);
}
END_TEST

static int busy_event(void *p, const struct tp_event *e)
{
	struct busy *b = p;
	struct tp_errbuf err = { 0 };
	const char *cat = synth_str_of(b->tp, e->cat), *name = synth_str_of(b->tp, e->name);
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
	struct trace_sink sink = { .string = synth_busy_string, .event = busy_event, .payload = &b };
	int64_t self_all = 0;

	ck_assert_ptr_nonnull(json);
	b.nspan = calloc(256, sizeof(size_t));
	b.cap = calloc(256, sizeof(size_t));
	b.spans = calloc(256, sizeof(int64_t *));
	b.tp = trace_parser_new(&trace_default_limits, &sink);
	b.an = analysis_new(synth_str_of, b.tp);
	ck_assert_int_eq(trace_parser_feed(b.tp, json, glen, &err), 0);
	ck_assert_int_eq(trace_parser_finish(b.tp, &err), 0);
	ck_assert_int_eq(analysis_finish(b.an, &res, &err), 0);
	ck_assert_uint_eq(res->nthreads, b.nthreads);
	for (t = 0; t < b.nthreads; t++) {
		int64_t busy = synth_union_len(b.spans[t], b.nspan[t]);
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

START_TEST(test_healthy_trace_has_no_findings)
{
	json_t *d = synth_diagnose("healthy", &synth_healthy), *s;

	ck_assert_msg(json_array_size(json_object_get(d, "findings")) == 0, "findings: %s",
		      json_dumps(d, JSON_COMPACT));
	json_decref(d);
	/* and its breakdown is what the trace was built with */
	d = synth_query("healthy", Q_STEPS);
	s = json_array_get(json_object_get(d, "steps"), 0);
	ck_assert_int_eq(synth_iget(json_object_get(s, "breakdown_ns"), "kernel"), 9000000);
	ck_assert_int_eq(synth_iget(json_object_get(s, "breakdown_ns"), "cpu"), 100000);		/* aten::cat */
	ck_assert_int_eq(synth_iget(json_object_get(s, "breakdown_ns"), "runtime"), 1000);	/* the first launch */
	ck_assert_int_eq(synth_iget(json_object_get(s, "breakdown_ns"), "idle"), 10000000 - 9000000 - 101000);
	ck_assert_int_eq(synth_iget(json_object_get(s, "breakdown_ns"), "dataloader"), 0);
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
		{ "[Callback]TQDMProgressBar.synth_setup", -1, -1, 1200000000, -1 },	/* AdvancedProfiler: its total */
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
	ck_assert_ptr_nonnull(f = synth_finding(d, "lightning_slow_callback"));
	e = json_object_get(json_object_get(f, "evidence"), "callbacks");
	ck_assert_uint_eq(json_array_size(e), 2);	/* the checkpoint (1.5 s a call) and the 1.2 s total */
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "title")), "ModelCheckpoint"));
	ck_assert_ptr_null(synth_finding(d, "lightning_optimizer_step"));
	ck_assert_ptr_nonnull(synth_finding(d, "lightning_validation"));
	/* GPU 0 under 80 % and at 95 % of its memory; GPU 1 at 80 % and 94.9 %: neither */
	ck_assert_ptr_nonnull(f = synth_finding(d, "gpu_log_low_utilization"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "gpu")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "info");
	ck_assert_ptr_nonnull(f = synth_finding(d, "gpu_log_memory_full"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "gpu")), 0);
	ck_assert_int_eq(json_array_size(json_object_get(d, "findings")), 5);	/* and no_trace */
	json_decref(d);
	acts[3].share_bp++;
	d = diagnosis_run(&in);
	ck_assert_ptr_nonnull(synth_finding(d, "lightning_optimizer_step"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_dataloader)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.dataloader_us = 2000;
	s.kernels = 7;
	d = synth_diagnose("dl", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "dataloader"));
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "warning");
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "dataloader_ns"), 10 * 2000000);
	ck_assert_ptr_null(synth_finding(d, "low_gpu_utilization"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_low_util_not_cpu_bound)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.kernels = 3;		/* GPU busy 30%, the host mostly idle too */
	d = synth_diagnose("util", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "low_gpu_utilization"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "gpu_utilization_pct")) < 31);
	ck_assert_ptr_null(synth_finding(d, "cpu_bound"));
	ck_assert_ptr_null(synth_finding(d, "dataloader"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_cpu_bound)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.kernels = 1;
	s.cpu_us = 8000;
	d = synth_diagnose("cpu", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "cpu_bound"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "ratio")) > 7.9);
	json_decref(d);
}
END_TEST

START_TEST(test_rule_memcpy)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.kernels = 6;
	s.memcpy_us = 2000;
	d = synth_diagnose("copy", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "memcpy_share"));
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "dtoh_calls"), 10);
	ck_assert(synth_iget(json_object_get(f, "evidence"), "pageable_ns") > 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "pin_memory=True"));
	ck_assert_ptr_null(synth_finding(d, "low_gpu_utilization"));
	json_decref(d);

	/* device-to-device copies: no pin_memory advice, which would not help them */
	s.memcpy_name = "Memcpy DtoD (Device -> Device)";
	d = synth_diagnose("copy-dtod", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "memcpy_share"));
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "dtod_ns"), synth_iget(json_object_get(f, "evidence"), "memcpy_ns"));
	ck_assert_ptr_null(strstr(json_string_value(json_object_get(f, "advice")), "pin_memory"));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "device to device"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_sync)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.kernels = 8;
	s.sync_us = 1000;
	d = synth_diagnose("sync", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "gpu_sync"));
	ck_assert_str_eq(json_string_value(json_object_get(f, "severity")), "warning");
	/* item -> _local_scalar_dense -> cudaStreamSynchronize: one wait per step, counted once */
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "sync_calls"), 10);
	json_decref(d);
}
END_TEST

START_TEST(test_rule_drift)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.drift_us = 500;	/* 10 ms to 14.5 ms */
	d = synth_diagnose("drift", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "step_drift"));
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "rise_pct")) > 40);
	json_decref(d);
	/* noise without a trend is not drift */
	s.drift_us = 0;
	s.steps = 6;
	d = synth_diagnose("nodrift", &s);
	ck_assert_ptr_null(synth_finding(d, "step_drift"));
	json_decref(d);
}
END_TEST

START_TEST(test_rule_tiny_kernels)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	s.kernels = 300;
	s.kernel_us = 5;
	d = synth_diagnose("tiny", &s);
	ck_assert_ptr_nonnull(f = synth_finding(d, "tiny_kernels"));
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "tiny_calls"), 3000);
	json_decref(d);
	/* many kernels that are not tiny do not fire it */
	s.kernels = 80;
	s.kernel_us = 100;
	d = synth_diagnose("nottiny", &s);
	ck_assert_ptr_null(synth_finding(d, "tiny_kernels"));
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

	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	synth_ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
	ck_assert_int_eq(store_diag_input(r, "resnet", -1, &in, &durs, NULL, &err), 0);
	d = diagnosis_run(&in);
	free(durs);
	ck_assert_ptr_nonnull(f = synth_finding(d, "dataloader"));
	double share = json_real_value(json_object_get(json_object_get(f, "evidence"), "dataloader_pct"));
	ck_assert_msg(share > 5 && share < 100, "share %f%%", share);
	json_decref(d);
	/* the V100 run loads no data in its steps */
	ck_assert_int_eq(store_diag_input(r, "v100", -1, &in, &durs, NULL, &err), 0);
	d = diagnosis_run(&in);
	free(durs);
	ck_assert_ptr_null(synth_finding(d, "dataloader"));
	json_decref(d);
	store_reader_close(r);
}
END_TEST

START_TEST(test_ranks_name_the_straggler)
{
	struct ingest_request req = { .run = "multi", .name = "t.json" };
	struct ingest_result res;
	struct synth s = synth_healthy;
	size_t len;
	char *text;
	json_t *j;

	for (int rank = 0; rank < 4; rank++) {
		s.step_us = rank == 2 ? 13000 : 10000;
		s.start_us = rank;	/* different bytes: not one upload four times */
		text = synth_trace(&s, &len);
		req.rank = rank;
		ingest_buffer(synth_st, NULL, &req, text, len, &res);
		ck_assert_int_eq(res.rc, 0);
		free(text);
	}
	j = synth_query("multi", Q_RANKS);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ranks")), 4);
	ck_assert_int_eq(synth_iget(j, "slowest_rank"), 2);
	ck_assert_int_eq(json_array_size(json_object_get(j, "stragglers")), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(j, "stragglers"), 0)), 2);
	ck_assert_int_eq(synth_iget(json_array_get(json_object_get(j, "ranks"), 2), "mean_ns"), 13000000);
	json_decref(j);
}
END_TEST


START_TEST(test_memory_near_capacity)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	/* 1e9 bytes of activations at the peak of a 1 GiB device: 93% */
	s.act_bytes = 1000000000;
	s.capacity = 1 << 30;
	d = synth_diagnose("memfull", &s);
	f = synth_finding(d, "memory_near_capacity");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f, "evidence"), "dominant_category")),
			 "activation");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "peak_bytes")), 1000000000);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "checkpoint"));
	ck_assert_ptr_null(synth_finding(d, "memory_growth"));	/* freed every step: flat */
	json_decref(d);
	/* the same run on a 2 GiB device: no finding */
	s.capacity = 2LL << 30;
	d = synth_diagnose("memroom", &s);
	ck_assert_ptr_null(synth_finding(d, "memory_near_capacity"));
	json_decref(d);
}
END_TEST

START_TEST(test_memory_growth)
{
	struct synth s = synth_healthy;
	json_t *d, *f;

	/* 64 MiB kept from every one of 10 steps */
	s.act_bytes = 1 << 20;
	s.leak_bytes = 64 << 20;
	d = synth_diagnose("leak", &s);
	f = synth_finding(d, "memory_growth");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "per_step_bytes")), 64 << 20);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(f, "evidence"), "steps")), 10);
	ck_assert_ptr_null(synth_finding(d, "memory_near_capacity"));	/* no deviceProperties: capacity unknown */
	json_decref(d);
}
END_TEST

/* ---- memory categories from [memory] events (server/analysis/memory.c) ---- */

struct memcase {
	int64_t ts, bytes, addr;
	const char *want;		/* category of the allocation; NULL for a free */
};

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

	synth_emit(&t, "{\"traceEvents\":[");
	for (i = 0; i < sizeof(spans) / sizeof(spans[0]); i++)
		synth_span(&t, spans[i].cat, spans[i].name, 1, spans[i].tid, 1000000 + spans[i].s, spans[i].dur, "");
	for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		total += ev[i].bytes;
		synth_mem_event(&t, ev[i].tid, 1000000 + ev[i].ts, ev[i].addr, ev[i].bytes, total, (int)i);
	}
	synth_emit(&t, "]}");
	synth_ingest("mem", t.p, t.n);
	free(t.p);
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
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

	synth_ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
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

Suite *suite_analysis(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("fixtures");

	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_v100_kernels_and_steps);
	tcase_add_test(tc, test_dist_align);
	tcase_add_test(tc, test_resnet_and_nccl_figures);
	tcase_add_test(tc, test_gpu_time_of_ops);
	tcase_add_test(tc, test_steps_tied);
	tcase_add_test(tc, test_nesting_capped);
	tcase_add_test(tc, test_collective_names);
	tcase_add_test(tc, test_nccl_collectives);
	tcase_add_loop_test(tc, test_self_time_within_thread_busy_time, 0, 3);
	tcase_add_test(tc, test_resnet_dataloader_finding);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
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
	suite_add_tcase(s, tc);
	return s;
}
