/*
 * check_cupti.c: the CUPTI injection library without a GPU.
 *   convert: synthetic CUPTI records packed into a buffer, walked with the
 *            real cuptiActivityGetNextRecord by collector/cupti/convert.c,
 *            and the chunk read back with the server's own trace parser and
 *            analysis: every event, field by field, and the NVTX step;
 *   spool:   the spool contract (temporary '.' name, then rename; bounded);
 *   inject:  the library loaded into a process without CUDA returns from
 *            InitializeInjection, writes nothing to stdout, one line to stderr;
 *   e2e:     a converted chunk uploaded to the real server, read back.
 */
#include <cupti.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "analysis/analysis.h"
#include "convert.h"
#include "ingest/trace.h"
#include "spool.h"
#include "suites.h"
#include "testutil.h"

#define BASE 1700000000000000000LL		/* baseTimeNanoseconds of the chunks */
#define T0 (BASE + 5000000123LL)		/* the records' times, ns */
#define PID 4242
#define TID 777

/* ---- packing records as CUPTI lays them out ---- */

struct pack {
	_Alignas(8) uint8_t buf[16384];
	size_t len;
	size_t off[64];		/* where each record went */
	int n;
};

static void *pack(struct pack *p, CUpti_ActivityKind kind, size_t size)
{
	void *r = p->buf + p->len;

	ck_assert_uint_le(p->len + size, sizeof(p->buf));
	memset(r, 0, size);
	((CUpti_Activity *)r)->kind = kind;
	p->off[p->n++] = p->len;
	p->len += size;
	return r;
}

static void api(struct pack *p, uint32_t cbid, int64_t start, int64_t end, uint32_t corr, uint32_t tid)
{
	CUpti_ActivityAPI *a = pack(p, CUPTI_ACTIVITY_KIND_RUNTIME, sizeof(*a));
	a->cbid = cbid;
	a->start = (uint64_t)start;
	a->end = (uint64_t)end;
	a->processId = PID;
	a->threadId = tid;
	a->correlationId = corr;
}

static void mem(struct pack *p, int release, uint64_t addr, uint64_t bytes, int64_t ts, uint32_t corr)
{
	CUpti_ActivityMemory4 *m = pack(p, CUPTI_ACTIVITY_KIND_MEMORY2, sizeof(*m));
	m->memoryOperationType = release ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE
					 : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m->address = addr;
	m->bytes = release ? 0 : bytes;	/* a release may not carry the size: the converter knows it */
	m->timestamp = (uint64_t)ts;
	m->processId = PID;
	m->deviceId = 0;
	m->contextId = 1;
	m->streamId = CUPTI_INVALID_STREAM_ID;
	m->correlationId = corr;
}

static void marker(struct pack *p, int start, uint32_t id, const char *name, int64_t ts)
{
	CUpti_ActivityMarker2 *m = pack(p, CUPTI_ACTIVITY_KIND_MARKER, sizeof(*m));
	m->flags = start ? CUPTI_ACTIVITY_FLAG_MARKER_START : CUPTI_ACTIVITY_FLAG_MARKER_END;
	m->timestamp = (uint64_t)ts;
	m->id = id;
	m->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	m->objectId.pt.processId = PID;
	m->objectId.pt.threadId = TID;
	m->name = start ? name : NULL;
}

/* One of everything the library enables, around an NVTX range "step 7". */
static void pack_all(struct pack *p)
{
	CUpti_ActivityDevice5 *d = pack(p, CUPTI_ACTIVITY_KIND_DEVICE, sizeof(*d));
	d->id = 0;
	d->name = "NVIDIA H200";
	d->numMultiprocessors = 132;
	d->numThreadsPerWarp = 32;
	d->globalMemorySize = 150754820096ull;
	d->computeCapabilityMajor = 9;

	marker(p, 1, 1, "step 7", T0 - 1000);
	api(p, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0, T0 + 5000, 10, TID);

	CUpti_ActivityKernel10 *k = pack(p, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sizeof(*k));
	k->start = T0 + 10000;
	k->end = T0 + 30500;
	k->deviceId = 0;
	k->contextId = 1;
	k->streamId = 7;
	k->correlationId = 10;
	k->gridX = 264, k->gridY = 1, k->gridZ = 1;
	k->blockX = 256, k->blockY = 1, k->blockZ = 1;
	k->registersPerThread = 32;
	k->staticSharedMemory = 1024;
	k->dynamicSharedMemory = 2048;
	k->name = "_Z6addOnePfi";

	api(p, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, T0 + 31000, T0 + 39000, 11, TID);
	CUpti_ActivityMemcpy6 *c = pack(p, CUPTI_ACTIVITY_KIND_MEMCPY, sizeof(*c));
	c->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	c->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	c->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	c->bytes = 1 << 20;
	c->start = T0 + 32000;
	c->end = T0 + 36096;
	c->deviceId = 0, c->contextId = 1, c->streamId = 7, c->correlationId = 11;

	CUpti_ActivityMemset4 *s = pack(p, CUPTI_ACTIVITY_KIND_MEMSET, sizeof(*s));
	s->bytes = 4096;
	s->start = T0 + 36500;
	s->end = T0 + 37500;
	s->deviceId = 0, s->contextId = 1, s->streamId = 7, s->correlationId = 12;
	s->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;

	/* the [memory] record comes before its cudaMalloc's API record, as in CUPTI */
	mem(p, 0, 0x7f0000000000ull, 1 << 20, T0 + 1500, 13);
	api(p, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, T0 + 1000, T0 + 2000, 13, TID);
	mem(p, 0, 0x7f0000200000ull, 4096, T0 + 2500, 14);
	mem(p, 1, 0x7f0000000000ull, 0, T0 + 38000, 15);

	CUpti_ActivitySynchronization2 *y = pack(p, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sizeof(*y));
	y->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	y->start = T0 + 37000;
	y->end = T0 + 38500;
	y->correlationId = 16, y->contextId = 1, y->streamId = 7;
	y->cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;

	CUpti_ActivityOverhead3 *o = pack(p, CUPTI_ACTIVITY_KIND_OVERHEAD, sizeof(*o));
	o->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION;
	o->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	o->objectId.pt.processId = PID;
	o->objectId.pt.threadId = TID;
	o->start = T0 + 100;
	o->end = T0 + 300;

	marker(p, 1, 2, "forward \"x\"", T0 + 200);
	marker(p, 0, 2, NULL, T0 + 900);
	marker(p, 0, 1, NULL, T0 + 40000);
}

static char *fake_demangle(const char *m)
{
	return strcmp(m, "_Z6addOnePfi") ? NULL : strdup("addOne(float*, int)");
}

/* Converts buffers (a NULL-terminated list of packs) into one chunk; malloc'd. */
static char *convert(struct cupti_conv *c, struct pack *const *packs, size_t *len)
{
	struct cupti_out out = { 0 };
	char *s;

	cupti_chunk_begin(c, &out);
	for (; *packs; packs++)
		ck_assert_int_eq(cupti_convert(c, (*packs)->buf, (*packs)->len, &out), 0);
	ck_assert_int_eq(cupti_chunk_end(c, &out), 0);
	*len = out.len;
	s = out.data;
	return s;
}

/* ---- reading a chunk back with the server's parser ---- */

struct parsed {
	struct trace_parser *p;
	struct tp_event ev[64];
	int n;
	int64_t base;
};

static int on_event(void *payload, const struct tp_event *e)
{
	struct parsed *r = payload;

	ck_assert_int_lt(r->n, 64);
	r->ev[r->n++] = *e;
	return 0;
}

static void parse(struct parsed *r, const char *chunk, size_t len)
{
	struct trace_sink sink = { .event = on_event, .payload = r };
	struct tp_errbuf err = { 0 };

	memset(r, 0, sizeof(*r));
	r->p = trace_parser_new(&trace_default_limits, &sink);
	ck_assert_ptr_nonnull(r->p);
	ck_assert_msg(trace_parser_feed(r->p, (const uint8_t *)chunk, len, &err) == 0, "%s", err.msg);
	ck_assert_msg(trace_parser_finish(r->p, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(trace_base_ns(r->p, &r->base), 1);
}

static const char *str(const struct parsed *r, uint32_t id)
{
	const char *s = trace_string(r->p, id);
	return s ? s : "";
}

/* The i-th event (from 0) with this category. */
static const struct tp_event *nth(const struct parsed *r, const char *cat, int i)
{
	int k;

	for (k = 0; k < r->n; k++)
		if (!strcmp(str(r, r->ev[k].cat), cat) && i-- == 0)
			return &r->ev[k];
	ck_abort_msg("no event %d of cat %s", i, cat);
	return NULL;
}

static int count(const struct parsed *r, const char *cat)
{
	int k, n = 0;

	for (k = 0; k < r->n; k++)
		n += !strcmp(str(r, r->ev[k].cat), cat);
	return n;
}

static void assert_span(const struct parsed *r, const struct tp_event *e, char ph, const char *name,
			int64_t pid, int64_t tid, int64_t start, int64_t dur)
{
	ck_assert_int_eq(e->ph, ph);
	ck_assert_str_eq(str(r, e->name), name);
	ck_assert(e->have & TH_PID);
	ck_assert(e->have & TH_TID);
	ck_assert_int_eq(e->pid, pid);
	ck_assert_int_eq(e->tid, tid);
	ck_assert_int_eq(r->base + e->ts_ns, start);
	if (ph == 'X') {
		ck_assert(e->have & TH_DUR);
		ck_assert_int_eq(e->dur_ns, dur);
	}
}

static void assert_gpu(const struct tp_event *e, int64_t corr)
{
	ck_assert_int_eq(e->have & (TH_CORR | TH_STREAM | TH_DEVICE), TH_CORR | TH_STREAM | TH_DEVICE);
	ck_assert_int_eq(e->corr, corr);
	ck_assert_int_eq(e->stream, 7);
	ck_assert_int_eq(e->device, 0);
}

static void assert_memory(const struct tp_event *e, int64_t ts, uint64_t addr, int64_t bytes, int64_t total,
			  int64_t tid, int64_t ev_idx)
{
	ck_assert_int_eq(e->ph, 'i');
	ck_assert_int_eq(e->name, TRACE_S_MEMORY);
	ck_assert_int_eq(e->ts_ns + BASE, ts);
	ck_assert_int_eq(e->pid, PID);
	ck_assert_int_eq(e->tid, tid);
	ck_assert_int_eq(e->addr, (int64_t)addr);
	ck_assert_int_eq(e->bytes, bytes);
	ck_assert_int_eq(e->total_alloc, total);
	ck_assert_int_eq(e->total_reserved, total);
	ck_assert_int_eq(e->dev_type, 1);
	ck_assert_int_eq(e->dev_id, 0);
	ck_assert_int_eq(e->ev_idx, ev_idx);
}

/* The library walks with cuptiActivityGetNextRecord: it must take our packing. */
START_TEST(test_walk_layout)
{
	struct pack p = { .len = 0 };
	CUpti_Activity *rec = NULL;
	int i = 0;

	pack_all(&p);
	while (cuptiActivityGetNextRecord(p.buf, p.len, &rec) == CUPTI_SUCCESS) {
		ck_assert_int_lt(i, p.n);
		ck_assert_uint_eq((size_t)((uint8_t *)rec - p.buf), p.off[i]);
		i++;
	}
	ck_assert_int_eq(i, p.n);
	ck_assert_uint_eq(sizeof(CUpti_ActivityKernel10), 216);
	ck_assert_uint_eq(sizeof(CUpti_ActivityMemory4), 128);
}
END_TEST

START_TEST(test_convert_every_kind)
{
	static struct pack p;
	struct pack *packs[] = { &p, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){ .base_ns = BASE,
									   .demangle = fake_demangle });
	struct parsed r;
	const struct tp_event *e;
	size_t len;
	char *chunk;

	memset(&p, 0, sizeof(p));
	pack_all(&p);
	chunk = convert(c, packs, &len);
	parse(&r, chunk, len);
	ck_assert_int_eq(r.base, BASE);
	ck_assert_int_eq(r.n, 13);

	e = nth(&r, "kernel", 0);
	assert_span(&r, e, 'X', "addOne(float*, int)", 0, 7, T0 + 10000, 20500);
	assert_gpu(e, 10);
	ck_assert(e->have & TH_BPS);
	ck_assert(fabs(e->blocks_per_sm - 2.0) < 1e-9);	/* 264 blocks / 132 SMs */
	ck_assert(strstr(chunk, "\"registers per thread\":32,\"shared memory\":3072"));
	ck_assert(strstr(chunk, "\"warps per SM\":16.000000,\"grid\":[264,1,1],\"block\":[256,1,1]"));

	e = nth(&r, "gpu_memcpy", 0);
	assert_span(&r, e, 'X', "Memcpy HtoD (Pageable -> Device)", 0, 7, T0 + 32000, 4096);
	assert_gpu(e, 11);
	ck_assert(e->have & TH_BYTES);
	ck_assert_int_eq(e->bytes, 1 << 20);
	ck_assert(strstr(chunk, "\"memory bandwidth (GB/s)\":256.000000"));

	e = nth(&r, "gpu_memset", 0);
	assert_span(&r, e, 'X', "Memset (Device)", 0, 7, T0 + 36500, 1000);
	assert_gpu(e, 12);
	ck_assert_int_eq(e->bytes, 4096);

	ck_assert_int_eq(count(&r, "cuda_runtime"), 3);
	e = nth(&r, "cuda_runtime", 0);
	assert_span(&r, e, 'X', "cudaLaunchKernel", PID, TID, T0, 5000);
	ck_assert_int_eq(e->corr, 10);
	assert_span(&r, nth(&r, "cuda_runtime", 1), 'X', "cudaMemcpy", PID, TID, T0 + 31000, 8000);
	assert_span(&r, nth(&r, "cuda_runtime", 2), 'X', "cudaMalloc", PID, TID, T0 + 1000, 1000);
	ck_assert_int_eq(nth(&r, "cuda_runtime", 2)->corr, 13);

	/* the alloc learns its thread from the later API record; 14 has none */
	ck_assert_int_eq(count(&r, "cpu_instant_event"), 3);
	assert_memory(nth(&r, "cpu_instant_event", 0), T0 + 1500, 0x7f0000000000ull, 1 << 20, 1 << 20, TID, 0);
	assert_memory(nth(&r, "cpu_instant_event", 1), T0 + 2500, 0x7f0000200000ull, 4096, (1 << 20) + 4096, 0, 1);
	assert_memory(nth(&r, "cpu_instant_event", 2), T0 + 38000, 0x7f0000000000ull, -(1 << 20), 4096, 0, 2);

	e = nth(&r, "cuda_sync", 0);
	assert_span(&r, e, 'X', "Stream Sync", 0, 7, T0 + 37000, 1500);
	ck_assert_int_eq(e->corr, 16);
	ck_assert_int_eq(e->stream, 7);

	assert_span(&r, nth(&r, "overhead", 0), 'X', "Instrumentation", PID, TID, T0 + 100, 200);

	/* NVTX: "step 7" matches step*, "forward" stays a range, both on the thread */
	ck_assert_int_eq(count(&r, "user_annotation"), 2);
	assert_span(&r, nth(&r, "user_annotation", 0), 'X', "forward \"x\"", PID, TID, T0 + 200, 700);
	assert_span(&r, nth(&r, "user_annotation", 1), 'X', "ProfilerStep#7", PID, TID, T0 - 1000, 41000);
	ck_assert(strstr(chunk, "\"NVTX range\":\"step 7\""));

	/* deviceProperties from the DEVICE record */
	json_t *dp = json_object_get(trace_meta(r.p), "deviceProperties");
	ck_assert_int_eq(json_array_size(dp), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(dp, 0), "name")), "NVIDIA H200");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(dp, 0), "numSms")), 132);

	ck_assert_uint_eq(cupti_conv_stats(c)->records, (uint64_t)p.n);
	ck_assert_uint_eq(cupti_conv_stats(c)->untimed, 0);
	trace_parser_free(r.p);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

static const char *an_str(void *payload, uint32_t id)
{
	const char *s = trace_string(payload, id);
	return s ? s : "";
}

/* The server's analysis finds the NVTX step, and the kernel inside it. */
/* cudaGetDevice, cudaSetDevice and cudaGetLastError are left out, as Kineto leaves them
 * (PyTorch calls cudaGetDevice thousands of times a step); the calls beside them stay */
START_TEST(test_convert_skips_noise)
{
	static struct pack p;
	struct pack *packs[] = { &p, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){ .base_ns = BASE });
	size_t len;
	char *chunk;

	memset(&p, 0, sizeof(p));
	api(&p, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, T0, T0 + 100, 1, TID);
	api(&p, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, T0 + 200, T0 + 5000, 2, TID);
	api(&p, CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020, T0 + 5100, T0 + 5200, 3, TID);
	api(&p, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020, T0 + 5300, T0 + 5400, 4, TID);
	api(&p, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, T0 + 5500, T0 + 9000, 5, TID);
	chunk = convert(c, packs, &len);
	ck_assert_ptr_nonnull(strstr(chunk, "\"cudaLaunchKernel\""));
	ck_assert_ptr_nonnull(strstr(chunk, "\"cudaStreamSynchronize\""));
	ck_assert_ptr_null(strstr(chunk, "cudaGetDevice"));
	ck_assert_ptr_null(strstr(chunk, "cudaGetLastError"));
	ck_assert_ptr_null(strstr(chunk, "cudaSetDevice"));
	ck_assert_uint_eq(cupti_conv_stats(c)->skipped_calls, 3);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

START_TEST(test_convert_step_analysis)
{
	static struct pack p;
	struct pack *packs[] = { &p, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){ .base_ns = BASE });
	struct tp_errbuf err = { 0 };
	const struct an_result *res;
	struct analysis *an;
	struct parsed r;
	size_t len, i;
	char *chunk;
	int k;

	memset(&p, 0, sizeof(p));
	pack_all(&p);
	chunk = convert(c, packs, &len);
	parse(&r, chunk, len);
	an = analysis_new(an_str, r.p);
	for (k = 0; k < r.n; k++)
		ck_assert_int_eq(analysis_event(an, &r.ev[k], &err), 0);
	ck_assert_msg(analysis_finish(an, &res, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(res->nsteps, 1);
	ck_assert_int_eq(res->steps[0].step, 7);
	ck_assert_int_eq(res->steps[0].start_ns + BASE, T0 - 1000);
	ck_assert_int_eq(res->steps[0].dur_ns, 41000);
	ck_assert_int_eq(res->steps[0].comp_ns[AN_KERNEL], 20500);
	ck_assert_int_eq(res->steps[0].comp_ns[AN_MEMCPY], 4096);
	ck_assert_int_eq(res->steps[0].comp_ns[AN_MEMSET], 1000);
	/* without a demangler the raw name is kept */
	for (i = 0; i < res->nkernels; i++)
		if (res->kernels[i].kind == AN_GPU_KERNEL)
			break;
	ck_assert_uint_lt(i, res->nkernels);
	ck_assert_str_eq(an_str(r.p, res->kernels[i].name), "_Z6addOnePfi");
	ck_assert_int_eq(res->kernels[i].total_ns, 20500);
	/* the memory timeline: 1 MiB + 4 KiB at the peak */
	ck_assert_uint_eq(res->nmem_series, 1);
	analysis_free(an);
	trace_parser_free(r.p);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

/* State across buffers: a range ending in a later buffer, a later free, numbering, patterns. */
START_TEST(test_convert_across_buffers)
{
	static struct pack a, b, d;
	struct pack *first[] = { &a, NULL }, *second[] = { &b, &d, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){
		.base_ns = BASE, .step_patterns = "iter*,,train step*" });
	struct parsed r;
	size_t len;
	char *chunk;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&d, 0, sizeof(d));
	marker(&a, 1, 1, "train step", T0);
	marker(&a, 1, 2, "step 3", T0 + 10);	/* not a step with these patterns */
	mem(&a, 0, 0x1000, 512, T0 + 20, 1);
	CUpti_ActivityKernel10 *k = pack(&a, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sizeof(*k));
	k->name = "untimed";	/* start 0: no timestamps collected */
	chunk = convert(c, first, &len);
	parse(&r, chunk, len);
	ck_assert_int_eq(r.n, 1);
	assert_memory(&r.ev[0], T0 + 20, 0x1000, 512, 512, 0, 0);
	ck_assert_uint_eq(cupti_conv_stats(c)->untimed, 1);
	trace_parser_free(r.p);
	free(chunk);

	marker(&b, 0, 2, NULL, T0 + 50);
	marker(&b, 0, 1, NULL, T0 + 100);
	marker(&b, 0, 9, NULL, T0 + 101);	/* never started */
	mem(&d, 1, 0x1000, 0, T0 + 200, 2);
	marker(&d, 1, 3, "iteration", T0 + 300);
	marker(&d, 0, 3, NULL, T0 + 400);
	/* a context sync of a context no GPU record named: on the calling thread */
	api(&d, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, T0 + 500, T0 + 900, 20, TID);
	CUpti_ActivitySynchronization2 *y = pack(&d, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sizeof(*y));
	y->type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
	y->start = T0 + 600;
	y->end = T0 + 800;
	y->correlationId = 20, y->contextId = 5;
	y->streamId = y->cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	chunk = convert(c, second, &len);
	parse(&r, chunk, len);
	ck_assert_int_eq(r.n, 6);
	assert_span(&r, &r.ev[5], 'X', "Context Sync", PID, TID, T0 + 600, 200);
	ck_assert_int_eq(r.ev[5].have & (TH_STREAM | TH_DEVICE), 0);
	assert_span(&r, &r.ev[0], 'X', "step 3", PID, TID, T0 + 10, 40);
	assert_span(&r, &r.ev[1], 'X', "ProfilerStep#0", PID, TID, T0, 100);
	assert_memory(&r.ev[2], T0 + 200, 0x1000, -512, 0, 0, 1);
	assert_span(&r, &r.ev[3], 'X', "ProfilerStep#1", PID, TID, T0 + 300, 100);
	ck_assert_uint_eq(cupti_conv_stats(c)->unmatched_ends, 1);
	trace_parser_free(r.p);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

/* Names are escaped and made UTF-8, or the server would reject the whole chunk. */
START_TEST(test_convert_bad_names)
{
	static struct pack p;
	struct pack *packs[] = { &p, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){ .base_ns = BASE });
	struct parsed r;
	size_t len;
	char *chunk;

	memset(&p, 0, sizeof(p));
	marker(&p, 1, 1, "a\\b\n\xff\xc3\xa9", T0);
	marker(&p, 0, 1, NULL, T0 + 1);
	chunk = convert(c, packs, &len);
	parse(&r, chunk, len);
	ck_assert_int_eq(r.n, 1);
	ck_assert_str_eq(str(&r, r.ev[0].name), "a\\b\n?\xc3\xa9");
	trace_parser_free(r.p);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

/* ---- spool ---- */

static int list(const char *dir, char names[][256], int max)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < max)
			snprintf(names[n++], 256, "%s", e->d_name);
	closedir(d);
	return n;
}

START_TEST(test_spool_contract)
{
	char *dir = tu_tmpdir(), sub[512], want[1024], names[8][256];
	struct spool s;
	char big[3000];
	size_t len;
	uint8_t *b;

	memset(big, 'x', sizeof(big));
	snprintf(sub, sizeof(sub), "%s/spool", dir);
	ck_assert_int_eq(spool_open(&s, sub, 5000), 0);	/* created */
	ck_assert_int_eq(spool_write(&s, "{\"traceEvents\":[]}", 18), 0);
	ck_assert_int_eq(spool_write(&s, big, sizeof(big)), 0);
	ck_assert_uint_eq(spool_used(&s), 3018);
	/* 3018 + 3000 > 5000: dropped, not waited for */
	ck_assert_int_eq(spool_write(&s, big, sizeof(big)), 1);
	ck_assert_uint_eq(s.dropped, 1);
	ck_assert_int_eq(list(sub, names, 8), 2);
	snprintf(want, sizeof(want), "%s/trace-%d-0.pt.trace.json", sub, (int)getpid());
	b = tu_read_file(want, &len);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(len, 18);
	free(b);
	snprintf(want, sizeof(want), "%s/trace-%d-1.pt.trace.json", sub, (int)getpid());
	ck_assert_int_eq(access(want, R_OK), 0);
	/* the agent ships (removes) a chunk: room again, and the sequence goes on */
	ck_assert_int_eq(unlink(want), 0);
	ck_assert_int_eq(spool_write(&s, big, sizeof(big)), 0);
	snprintf(want, sizeof(want), "%s/trace-%d-2.pt.trace.json", sub, (int)getpid());
	ck_assert_int_eq(access(want, R_OK), 0);
	spool_release(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- the library in a process without CUDA ---- */

struct run {
	int status;
	char out[4096], err[4096];
};

static void slurp(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
}

/* Runs cupti_host (it dlopens the library and calls its entry points) with env set. */
static void run_host(const char *spool, struct run *out)
{
	int po[2], pe[2];
	pid_t pid;

	ck_assert_int_eq(pipe(po), 0);
	ck_assert_int_eq(pipe(pe), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		if (spool)
			setenv("TRAINSCOPE_SPOOL", spool, 1);
		else
			unsetenv("TRAINSCOPE_SPOOL");
		execl(CUPTI_HOST_BIN, CUPTI_HOST_BIN, CUPTI_LIB, (char *)NULL);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	slurp(po[0], out->out, sizeof(out->out));
	slurp(pe[0], out->err, sizeof(out->err));
	close(po[0]);
	close(pe[0]);
	ck_assert_int_eq(waitpid(pid, &out->status, 0), pid);
}

static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(test_inject_no_spool)
{
	struct run r;

	run_host(NULL, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d, stderr %s", r.status, r.err);
	ck_assert_str_eq(r.out, "");
	ck_assert_str_eq(r.err, "trainscope-cupti: tracing disabled: TRAINSCOPE_SPOOL is not set\n");
}
END_TEST

/* No GPU, no driver: CUPTI refuses, the library says so once and the host runs on. */
START_TEST(test_inject_no_gpu)
{
	char *dir = tu_tmpdir(), names[4][256];
	struct run r;

	run_host(dir, &r);
	ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0, "status %d, stderr %s", r.status, r.err);
	ck_assert_str_eq(r.out, "");
	ck_assert_int_eq(lines(r.err), 1);
	ck_assert_msg(!strncmp(r.err, "trainscope-cupti: tracing disabled: cupti", 41), "%s", r.err);
	ck_assert_int_eq(list(dir, names, 4), 0);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- end to end: a chunk into the real server ---- */

START_TEST(test_e2e_upload_chunk)
{
	static struct pack p;
	struct pack *packs[] = { &p, NULL };
	struct cupti_conv *c = cupti_conv_new(&(struct cupti_conv_config){ .base_ns = BASE,
									   .demangle = fake_demangle });
	struct tu_server srv;
	struct tu_resp resp;
	json_t *j, *s;
	size_t len;
	char *chunk;

	memset(&p, 0, sizeof(p));
	pack_all(&p);
	chunk = convert(c, packs, &len);
	ck_assert_int_eq(tu_server_start(&srv, NULL), 0);
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/cupti/artifacts?rank=0&name=trace-4242-0.pt.trace.json",
				 chunk, len, NULL, &resp), 0);
	ck_assert_msg(resp.status == 201, "%ld %s", resp.status, resp.body);
	tu_resp_free(&resp);

	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/cupti/steps", NULL, 0, NULL, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	j = tu_json(&resp);
	s = json_array_get(json_object_get(j, "steps"), 0);
	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "step")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "start_ns")), T0 - 1000);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "dur_ns")), 41000);
	json_decref(j);
	tu_resp_free(&resp);

	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/cupti/kernels", NULL, 0, NULL, &resp), 0);
	ck_assert_int_eq(resp.status, 200);
	j = tu_json(&resp);
	s = json_array_get(json_object_get(j, "kernels"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(s, "name")), "addOne(float*, int)");
	ck_assert_int_eq(json_integer_value(json_object_get(s, "calls")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "total_ns")), 20500);
	json_decref(j);
	tu_resp_free(&resp);

	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/cupti/memory/peak", NULL, 0, NULL, &resp), 0);
	ck_assert_msg(resp.status == 200, "%ld %s", resp.status, resp.body);
	j = tu_json(&resp);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes")), (1 << 20) + 4096);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "t_ns")), T0 + 2500);
	json_decref(j);
	tu_resp_free(&resp);

	tu_server_cleanup(&srv);
	free(chunk);
	cupti_conv_free(c);
}
END_TEST

Suite *suite_cupti(void)
{
	Suite *s = suite_create("cupti");
	TCase *tc;

	tc = tcase_create("convert");
	tcase_add_test(tc, test_walk_layout);
	tcase_add_test(tc, test_convert_every_kind);
	tcase_add_test(tc, test_convert_skips_noise);
	tcase_add_test(tc, test_convert_step_analysis);
	tcase_add_test(tc, test_convert_across_buffers);
	tcase_add_test(tc, test_convert_bad_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("spool");
	tcase_add_test(tc, test_spool_contract);
	suite_add_tcase(s, tc);

	tc = tcase_create("inject");
	tcase_add_test(tc, test_inject_no_spool);
	tcase_add_test(tc, test_inject_no_gpu);
	suite_add_tcase(s, tc);

	tc = tcase_create("e2e");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_e2e_upload_chunk);
	suite_add_tcase(s, tc);
	return s;
}
