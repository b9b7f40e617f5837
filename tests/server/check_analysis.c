/*
 * check_analysis.c: steps, breakdowns, operator and kernel tables and the
 * diagnosis rules (server/analysis/), through the real ingest and store:
 * against the fixtures' independently computed figures, and against small
 * synthetic traces built here, one per rule, each way.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "analysis/diagnosis.h"
#include "ingest/ingest.h"
#include "ingest/timeline.h"
#include "ingest/trace.h"
#include "store.h"
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
	case Q_STEPS: j = store_steps(r, run, 0, &err); break;
	case Q_OPS_CPU: j = store_ops(r, run, 0, AN_DEV_CPU, "self_ns", 100000, &err); break;
	case Q_OPS_GPU: j = store_ops(r, run, 0, AN_DEV_GPU, "self_ns", 100000, &err); break;
	case Q_KERNELS: j = store_kernels(r, run, 0, AN_GPU_KERNEL, 100000, &err); break;
	case Q_MEMCPY: j = store_kernels(r, run, 0, AN_GPU_MEMCPY, 100000, &err); break;
	case Q_RANKS: j = store_ranks(r, run, &err); break;
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
		m = store_memory(r, "resnet", -1, NULL, 0, INT64_MIN, INT64_MAX, &err);
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
};

static const char *str_of(void *p, uint32_t id)
{
	const char *s = trace_string(p, id);

	return s ? s : "";
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
	int64_t start_us;		/* added to the first step's start */
	int64_t act_bytes;		/* per step: allocated at its start, freed at its end */
	int64_t leak_bytes;		/* per step: allocated and never freed */
	int64_t capacity;		/* deviceProperties totalGlobalMem of device 0; 0: none */
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
			span(&t, "kernel", "gemm_kernel", 0, 7, g, s->kernel_us, args);
			g += s->kernel_us;
		}
		x += s->kernels + 1;
		if (s->memcpy_us) {
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			span(&t, "cuda_runtime", "cudaMemcpyAsync", 1, 1, x, 1, args);
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":7", (long long)corr++);
			span(&t, "gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 0, 7, g, s->memcpy_us, args);
			x += 1;
		}
		if (s->sync_us) {
			span(&t, "cpu_op", "aten::item", 1, 1, x, s->sync_us, "");
			span(&t, "cpu_op", "aten::_local_scalar_dense", 1, 1, x, s->sync_us, "");
			span(&t, "cuda_runtime", "cudaStreamSynchronize", 1, 1, x + 1, s->sync_us - 2, "");
		}
		t0 += dur;
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
	check_breakdown_sums(run, (size_t)s->steps);
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_diag_input(r, run, -1, &in, &durs, &err), 0);
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
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "gpu_utilization")) < 0.31);
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
	ck_assert_ptr_null(finding(d, "low_gpu_utilization"));
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
	ck_assert(json_real_value(json_object_get(json_object_get(f, "evidence"), "rise")) > 0.4);
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
	ck_assert_int_eq(store_diag_input(r, "resnet", -1, &in, &durs, &err), 0);
	d = diagnosis_run(&in);
	free(durs);
	ck_assert_ptr_nonnull(f = finding(d, "dataloader"));
	double share = json_real_value(json_object_get(json_object_get(f, "evidence"), "dataloader_share"));
	ck_assert_msg(share > 0.05 && share < 1, "share %f", share);
	json_decref(d);
	/* the V100 run loads no data in its steps */
	ck_assert_int_eq(store_diag_input(r, "v100", -1, &in, &durs, &err), 0);
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

Suite *suite_analysis(void)
{
	Suite *s = suite_create("analysis");
	TCase *tc = tcase_create("fixtures");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_v100_kernels_and_steps);
	tcase_add_test(tc, test_resnet_and_nccl_figures);
	tcase_add_test(tc, test_gpu_time_of_ops);
	tcase_add_loop_test(tc, test_self_time_within_thread_busy_time, 0, 3);
	tcase_add_test(tc, test_resnet_dataloader_finding);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_healthy_trace_has_no_findings);
	tcase_add_test(tc, test_rule_dataloader);
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
		{ 1, 150, 0x4000, 1 << 13, "unknown" },	/* forward, never freed */
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
	j = store_memory(r, "mem", -1, NULL, 0, INT64_MIN, INT64_MAX, &err);
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
	j = store_memory(r, "v100", -1, NULL, 0, INT64_MIN, INT64_MAX, &err);
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
