/*
 * synth.c: the analysis suites' shared helpers (synth.h): the per-test
 * store, ingest and queries through it, the synthetic-trace builder, and
 * the sinks that feed a parse into an analysis.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/diagnosis.h"
#include "pipeline/ingest.h"
#include "reads.h"
#include "store/store.h"
#include "synth.h"

char *dir;
struct store *synth_st;

void synth_setup(void)
{
	struct tp_errbuf err = { 0 };
	char db[512];

	dir = tu_tmpdir();
	ck_assert_ptr_nonnull(dir);
	snprintf(db, sizeof(db), "%s/t.db", dir);
	ck_assert_int_eq(store_open(db, &synth_st, &err), 0);
}

void synth_teardown(void)
{
	store_close(synth_st);
	tu_rmtree(dir);
	free(dir);
}

void synth_ingest(const char *run, const void *data, size_t len)
{
	struct ingest_request req = { .run = run, .rank = 0, .name = "t.json" };
	struct ingest_result res;

	ingest_buffer(synth_st, NULL, &req, data, len, &res);
	ck_assert_msg(res.rc == 0, "ingest %s: %s", run, res.err.msg);
}

void synth_ingest_fixture(const char *run, const char *rel)
{
	char *path = tu_fixture(rel);
	size_t len;
	uint8_t *b = tu_read_file(path, &len);

	ck_assert_msg(b != NULL, "cannot read %s", path);
	synth_ingest(run, b, len);
	free(b);
	free(path);
}

json_t *synth_query(const char *run, enum synth_q what)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *j = NULL;

	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
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

json_int_t synth_iget(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	ck_assert_msg(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

/* Every step's components are non-negative and sum to its duration. */
void synth_check_breakdown_sums(const char *run, size_t nsteps)
{
	json_t *j = synth_query(run, Q_STEPS), *s;
	size_t i;

	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), nsteps);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		json_t *bd = json_object_get(s, "breakdown_ns");
		json_int_t sum = 0;
		for (int c = 0; c < AN_NCOMP; c++) {
			json_int_t v = synth_iget(bd, an_comp_names[c]);
			ck_assert_int_ge(v, 0);
			sum += v;
		}
		ck_assert_int_eq(sum, synth_iget(s, "dur_ns"));
		ck_assert_int_gt(sum, 0);
	}
	json_decref(j);
}

const char *synth_str_of(void *p, uint32_t id)
{
	const char *s = trace_string(p, id);

	return s ? s : "";
}

/* The result's collectives, read back from their runs into an array the caller frees. */
struct an_coll *synth_colls_of(const struct an_result *r)
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

int synth_busy_string(void *p, uint32_t id, const char *s, size_t len)
{
	(void)p, (void)id, (void)s, (void)len;
	return 0;
}

/* every event to the analysis only */
int synth_spill_event(void *p, const struct tp_event *e)
{
	struct busy *b = p;
	int rc = analysis_event(b->an, e, &b->an_err);

	if (!b->fail_ok)
		ck_assert_msg(rc == 0, "%s", b->an_err.msg);
	return rc;
}

int synth_cmp_pair(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

int64_t synth_union_len(int64_t *v, size_t n)
{
	int64_t len = 0, s = 0, e = INT64_MIN;

	qsort(v, n / 2, 2 * sizeof(int64_t), synth_cmp_pair);
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

const struct synth synth_healthy = { .steps = 10, .step_us = 10000, .kernels = 9, .kernel_us = 1000, .cpu_us = 100 };

void synth_emit(struct text *t, const char *fmt, ...)
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

void synth_span(struct text *t, const char *cat, const char *name, int pid, int tid, int64_t ts, int64_t dur,
		const char *args)
{
	synth_emit(t, "%s{\"ph\":\"X\",\"cat\":\"%s\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%lld,\"dur\":%lld,"
		"\"args\":{%s}}", t->n > 20 ? ",\n" : "", cat, name, pid, tid, (long long)ts, (long long)dur, args);
}

void synth_mem_event(struct text *t, int tid, int64_t ts, int64_t addr, int64_t bytes, int64_t total, int idx)
{
	synth_emit(t, ",\n{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":%d,"
		"\"ts\":%lld,\"args\":{\"Ev Idx\":%d,\"Device Type\":1,\"Device Id\":0,\"Addr\":%lld,\"Bytes\":%lld,"
		"\"Total Allocated\":%lld,\"Total Reserved\":1000000000}}", tid, (long long)ts, idx, (long long)addr,
	     (long long)bytes, (long long)total);
}

/* The trace of s: host ops on pid 1 tid 1, GPU work on pid 0 stream 7; times in us from 1e9. */
char *synth_trace(const struct synth *s, size_t *len)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	int64_t t0 = 1000000000 + s->start_us, corr = 1, total = 0;
	char args[96];
	int idx = 0;

	synth_emit(&t, "{\"traceEvents\":[");
	for (int i = 0; i < s->steps; i++) {
		int64_t dur = s->step_us + i * s->drift_us, x = t0, g;
		char name[32];
		snprintf(name, sizeof(name), "ProfilerStep#%d", i);
		if (!s->no_steps)
			synth_span(&t, "user_annotation", name, 1, 1, t0, dur, "");
		if (s->dataloader_us)
			synth_span(&t, "user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, 1,
			     x, s->dataloader_us, "");
		x += s->dataloader_us;
		if (s->cpu_us)
			synth_span(&t, "cpu_op", "aten::cat", 1, 1, x, s->cpu_us, "");
		x += s->cpu_us;
		if (s->act_bytes) {
			synth_mem_event(&t, 1, t0 + 1, 0x10000000 + i * 0x1000, s->act_bytes, total += s->act_bytes, idx++);
			synth_mem_event(&t, 1, t0 + dur - 1, 0x10000000 + i * 0x1000, -s->act_bytes, total -= s->act_bytes, idx++);
		}
		if (s->leak_bytes)
			synth_mem_event(&t, 1, t0 + 2, 0x20000000 + i * 0x1000, s->leak_bytes, total += s->leak_bytes, idx++);
		/* one operator launches every kernel, 1 us per launch */
		synth_span(&t, "cpu_op", "aten::mm", 1, 1, x, s->kernels + 1, "");
		g = x + 1;
		for (int k = 0; k < s->kernels; k++, corr++) {
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, x + k, 1, args);
			if (g < x + k + 1)
				g = x + k + 1;
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":7", (long long)corr);
			if (i < s->steps - 1 || k < s->kernels - s->cut)
				synth_span(&t, "kernel", "gemm_kernel", 0, 7, g, s->kernel_us, args);
			g += s->kernel_us;
		}
		x += s->kernels + 1;
		if (s->nccl_us) {	/* the collective on the host launches the kernel */
			synth_span(&t, "cpu_op", "nccl:all_reduce", 1, 1, x, 2, "");
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, x, 1, args);
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":8", (long long)corr++);
			synth_span(&t, "kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
			     0, 8, g - 1000, s->nccl_us, args);
			x += 2;
		}
		if (s->memcpy_us) {
			snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
			synth_span(&t, "cuda_runtime", "cudaMemcpyAsync", 1, 1, x, 1, args);
			snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":7", (long long)corr++);
			synth_span(&t, "gpu_memcpy", s->memcpy_name ? s->memcpy_name : "Memcpy DtoH (Device -> Pageable)", 0, 7, g,
			     s->memcpy_us, args);
			x += 1;
		}
		if (s->sync_us) {
			synth_span(&t, "cpu_op", "aten::item", 1, 1, x, s->sync_us, "");
			synth_span(&t, "cpu_op", "aten::_local_scalar_dense", 1, 1, x, s->sync_us, "");
			synth_span(&t, "cuda_runtime", "cudaStreamSynchronize", 1, 1, x + 1, s->sync_us - 2, "");
		}
		t0 += dur;
	}
	if (s->stub_us) {
		synth_span(&t, "user_annotation", "ProfilerStep#999", 1, 1, t0, s->stub_us, "");
		synth_span(&t, "cpu_op", "aten::zeros", 1, 1, t0 + 1, s->stub_us / 2, "");
	}
	synth_emit(&t, "]");
	if (s->capacity)
		synth_emit(&t, ",\"deviceProperties\":[{\"id\":0,\"name\":\"Synthetic GPU\",\"totalGlobalMem\":%lld}]",
		     (long long)s->capacity);
	synth_emit(&t, "}");
	*len = t.n;
	return t.p;
}

/* Diagnose s; returns the findings (new reference). */
json_t *synth_diagnose(const char *run, const struct synth *s)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct diag_input in;
	int64_t *durs;
	size_t len;
	char *text = synth_trace(s, &len);
	json_t *j;

	synth_ingest(run, text, len);
	free(text);
	synth_check_breakdown_sums(run, s->no_steps ? 1 : (size_t)s->steps + (s->stub_us > 0));
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
	ck_assert_int_eq(store_diag_input(r, run, -1, &in, &durs, NULL, &err), 0);
	j = diagnosis_run(&in);
	free(durs);
	store_reader_close(r);
	ck_assert_ptr_nonnull(j);
	return j;
}

json_t *synth_finding(json_t *d, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach(json_object_get(d, "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return f;
	return NULL;
}
