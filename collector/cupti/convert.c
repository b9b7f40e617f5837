/*
 * convert.c: CUPTI activity records -> Kineto-style Chrome trace events
 * (convert.h). One record becomes at most one event:
 *
 *   CONCURRENT_KERNEL -> X "kernel"       pid device, tid stream
 *   MEMCPY            -> X "gpu_memcpy"   "Memcpy HtoD (Pageable -> Device)"
 *   MEMSET            -> X "gpu_memset"   "Memset (Device)"
 *   SYNCHRONIZATION   -> X "cuda_sync"    "Stream Sync", ... on the GPU row
 *   RUNTIME           -> X "cuda_runtime" pid, tid of the calling thread
 *   OVERHEAD          -> X "overhead"
 *   MARKER start/end  -> X "user_annotation" on the thread, emitted at the end;
 *                        a name matching a step pattern becomes ProfilerStep#N
 *   MARKER instant    -> i "user_annotation"
 *   MEMORY2           -> i "cpu_instant_event" "[memory]" with Addr, Bytes
 *                        (negative on free), Total Allocated/Reserved per device
 *   DEVICE            -> nothing; kept for deviceProperties and blocks per SM
 *
 * Times are written like Kineto >= 2.4: µs relative to baseTimeNanoseconds
 * as "{us}.{ns:03}", so the server reads them back to the nanosecond.
 * Strings are escaped and made valid UTF-8 (the server rejects a trace with
 * a name that is not).
 */
#include <cupti.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert.h"
#include "utf8.h"

#if CUPTI_API_VERSION < 130000
#error "convert.c reads the CUDA 13 record layouts (Kernel10, Memcpy6, Memory4, ...)"
#endif

/* ---- output ---- */

void cupti_out_release(struct cupti_out *o)
{
	free(o->data);
	memset(o, 0, sizeof(*o));
}

static int reserve(struct cupti_out *o, size_t more)
{
	size_t cap;
	char *nd;

	if (o->oom)
		return -1;
	if (o->len + more < o->cap)
		return 0;
	cap = o->cap ? o->cap : 64 * 1024;
	while (cap <= o->len + more)
		cap *= 2;
	if (!(nd = realloc(o->data, cap))) {
		o->oom = 1;
		return -1;
	}
	o->data = nd;
	o->cap = cap;
	return 0;
}

static void put(struct cupti_out *o, const char *s, size_t n)
{
	if (reserve(o, n))
		return;
	memcpy(o->data + o->len, s, n);
	o->len += n;
	o->data[o->len] = 0;
}

#define PUTS(o, lit) put((o), (lit), sizeof(lit) - 1)

static void putf(struct cupti_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct cupti_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (reserve(o, 256))
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->data + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= o->cap - o->len) {
		if (reserve(o, (size_t)n + 1))
			return;
		va_start(ap, fmt);
		vsnprintf(o->data + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
	}
	o->len += (size_t)n;
}

/* A JSON string; bytes that are not UTF-8 become '?'. */
static void put_str(struct cupti_out *o, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : ""), *end = s + strlen((const char *)s);

	PUTS(o, "\"");
	while (s < end) {
		size_t n = tp_utf8_len(s, end);
		if (n == 0) {
			PUTS(o, "?");
			s++;
		} else if (*s == '"' || *s == '\\') {
			put(o, "\\", 1);
			put(o, (const char *)s, 1);
			s++;
		} else if (*s < 0x20) {
			putf(o, "\\u%04x", *s);
			s++;
		} else {
			put(o, (const char *)s, n);
			s += n;
		}
	}
	PUTS(o, "\"");
}

/* ---- u64 -> u64 map, linear probing with backward-shift deletion ---- */

struct map {
	uint64_t *k, *v;
	uint8_t *used;
	size_t cap, n;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static void map_release(struct map *m)
{
	free(m->k);
	free(m->v);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

static int map_put(struct map *m, uint64_t key, uint64_t val);

static int map_grow(struct map *m)
{
	struct map nm = { 0 };
	size_t i;

	nm.cap = m->cap ? m->cap * 2 : 64;
	nm.k = malloc(nm.cap * sizeof(*nm.k));
	nm.v = malloc(nm.cap * sizeof(*nm.v));
	nm.used = calloc(nm.cap, 1);
	if (!nm.k || !nm.v || !nm.used) {
		map_release(&nm);
		return -1;
	}
	for (i = 0; i < m->cap; i++)
		if (m->used[i])
			map_put(&nm, m->k[i], m->v[i]);
	map_release(m);
	*m = nm;
	return 0;
}

static int map_put(struct map *m, uint64_t key, uint64_t val)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap && map_grow(m))
		return -1;
	for (j = mix(key) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == key) {
			m->v[j] = val;
			return 0;
		}
	m->used[j] = 1;
	m->k[j] = key;
	m->v[j] = val;
	m->n++;
	return 0;
}

static uint64_t *map_get(const struct map *m, uint64_t key)
{
	size_t j;

	if (!m->cap)
		return NULL;
	for (j = mix(key) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == key)
			return &m->v[j];
	return NULL;
}

static void map_del(struct map *m, uint64_t key)
{
	uint64_t *v = map_get(m, key);
	size_t i, j, h;

	if (!v)
		return;
	i = (size_t)(v - m->v);
	m->used[i] = 0;
	m->n--;
	/* shift back the entries after the hole that probed past it */
	for (j = (i + 1) & (m->cap - 1); m->used[j]; j = (j + 1) & (m->cap - 1)) {
		h = mix(m->k[j]) & (m->cap - 1);
		if (((j - h) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			m->used[i] = 1;
			m->used[j] = 0;
			i = j;
		}
	}
}

/* ---- the converter ---- */

#define CORR_RING 8192		/* correlation -> thread, for [memory] and cuda_sync */
#define MAX_OPEN_RANGES 65536
#define MAX_NAMES 65536
#define MAX_DEVICES 64

struct range {			/* an NVTX range whose end has not come yet */
	int64_t start;
	uint32_t pid, tid;
	char name[];
};

struct kname {			/* a kernel name pointer CUPTI shares across records */
	char *mangled, *shown;
};

struct device {
	int seen;
	char *name;
	uint64_t mem;
	uint32_t sms, major, minor, threads_block, threads_sm, regs_block, regs_sm, warp, smem_block, smem_sm;
};

struct cupti_conv {
	int64_t base_ns;
	char **patterns;
	size_t npatterns;
	cupti_demangle_fn demangle;
	int64_t next_step;		/* for step ranges whose name has no number */
	struct map ranges;		/* marker id -> struct range * */
	struct map allocs;		/* address -> bytes */
	struct map totals;		/* (device type << 32 | device id) -> Total Allocated */
	struct map ctx_dev;		/* context id -> device id */
	struct map names;		/* kernel name pointer -> struct kname * */
	struct { uint32_t corr, pid, tid; } corr_tid[CORR_RING];
	int64_t mem_idx;		/* "Ev Idx" of [memory] events */
	struct device dev[MAX_DEVICES];
	struct cupti_conv_stats stats;
};

struct cupti_conv *cupti_conv_new(const struct cupti_conv_config *cfg)
{
	struct cupti_conv *c = calloc(1, sizeof(*c));
	const char *p = cfg->step_patterns ? cfg->step_patterns : CUPTI_DEFAULT_STEP_PATTERNS;

	if (!c)
		return NULL;
	c->base_ns = cfg->base_ns;
	c->demangle = cfg->demangle;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n) {
			char **np = realloc(c->patterns, (c->npatterns + 1) * sizeof(*np));
			if (!np)
				goto nomem;
			c->patterns = np;
			if (!(c->patterns[c->npatterns] = strndup(p, n)))
				goto nomem;
			c->npatterns++;
		}
		p += n + (p[n] == ',');
	}
	return c;
nomem:
	cupti_conv_free(c);
	return NULL;
}

void cupti_conv_free(struct cupti_conv *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->npatterns; i++)
		free(c->patterns[i]);
	free(c->patterns);
	for (i = 0; i < c->ranges.cap; i++)
		if (c->ranges.used[i])
			free((void *)(uintptr_t)c->ranges.v[i]);
	for (i = 0; i < c->names.cap; i++)
		if (c->names.used[i]) {
			struct kname *k = (void *)(uintptr_t)c->names.v[i];
			if (k->shown != k->mangled)
				free(k->shown);
			free(k->mangled);
			free(k);
		}
	for (i = 0; i < MAX_DEVICES; i++)
		free(c->dev[i].name);
	map_release(&c->ranges);
	map_release(&c->allocs);
	map_release(&c->totals);
	map_release(&c->ctx_dev);
	map_release(&c->names);
	free(c);
}

const struct cupti_conv_stats *cupti_conv_stats(const struct cupti_conv *c)
{
	return &c->stats;
}

/* ---- event pieces ---- */

/* "ts" as µs relative to the base, with the ns as 3 decimals. */
static void put_time(struct cupti_out *o, const char *key, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	putf(o, ",\"%s\":%lld.%03lld", key, (long long)(ns / 1000), (long long)(ns % 1000));
}

/* Opens an event: separator, ph, cat, name, pid, tid, ts and (X) dur; the caller adds args and "}". */
static void ev_open(struct cupti_conv *c, struct cupti_out *o, char ph, const char *cat, const char *name,
		    int64_t pid, int64_t tid, uint64_t start, uint64_t end)
{
	if (o->nevents++)
		PUTS(o, ",\n");
	putf(o, "{\"ph\":\"%c\",\"cat\":\"%s\",\"name\":", ph, cat);
	put_str(o, name);
	putf(o, ",\"pid\":%lld,\"tid\":%lld", (long long)pid, (long long)tid);
	put_time(o, "ts", (int64_t)start - c->base_ns);
	if (ph == 'X')
		put_time(o, "dur", end > start ? (int64_t)(end - start) : 0);
	else
		PUTS(o, ",\"s\":\"t\"");
}

static void learn_ctx(struct cupti_conv *c, uint32_t ctx, uint32_t dev)
{
	if (ctx != CUPTI_INVALID_CONTEXT_ID && !map_get(&c->ctx_dev, ctx))
		map_put(&c->ctx_dev, ctx, dev);
}

static void remember_thread(struct cupti_conv *c, const CUpti_ActivityAPI *a)
{
	c->corr_tid[a->correlationId % CORR_RING].corr = a->correlationId;
	c->corr_tid[a->correlationId % CORR_RING].pid = a->processId;
	c->corr_tid[a->correlationId % CORR_RING].tid = a->threadId;
}

/* The thread that made the API call with this correlation id, or 0 when not seen. */
static uint32_t thread_of(const struct cupti_conv *c, uint32_t corr)
{
	return corr && c->corr_tid[corr % CORR_RING].corr == corr ? c->corr_tid[corr % CORR_RING].tid : 0;
}

/* And its process. */
static uint32_t process_of(const struct cupti_conv *c, uint32_t corr)
{
	return corr && c->corr_tid[corr % CORR_RING].corr == corr ? c->corr_tid[corr % CORR_RING].pid : 0;
}

static const char *kernel_name(struct cupti_conv *c, const char *mangled)
{
	uint64_t *v;
	struct kname *k;

	if (!mangled)
		return "Kernel";
	if (!c->demangle)
		return mangled;
	v = map_get(&c->names, (uintptr_t)mangled);
	if (v) {
		k = (void *)(uintptr_t)*v;
		if (!strcmp(k->mangled, mangled))
			return k->shown;
	}
	if (c->names.n >= MAX_NAMES || !(k = calloc(1, sizeof(*k))))
		return mangled;
	if (!(k->mangled = strdup(mangled))) {
		free(k);
		return mangled;
	}
	k->shown = c->demangle(mangled);
	if (!k->shown)
		k->shown = k->mangled;
	if (v) {	/* the pointer now names another kernel: replace the entry */
		struct kname *old = (void *)(uintptr_t)*v;
		if (old->shown != old->mangled)
			free(old->shown);
		free(old->mangled);
		free(old);
		*v = (uintptr_t)k;
	} else if (map_put(&c->names, (uintptr_t)mangled, (uintptr_t)k)) {
		const char *shown = mangled;
		if (k->shown != k->mangled)
			free(k->shown);
		free(k->mangled);
		free(k);
		return shown;
	}
	return k->shown;
}

static const char *const memcpy_kinds[] = {
	"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP",
};
static const char *const memory_kinds[] = {
	"Unknown", "Pageable", "Pinned", "Device", "Array", "Managed", "Device Static", "Managed Static",
};
#define KIND_STR(tab, i) ((size_t)(i) < sizeof(tab) / sizeof(tab[0]) ? tab[i] : "Unknown")

static void kernel(struct cupti_conv *c, const CUpti_ActivityKernel10 *k, struct cupti_out *o)
{
	const struct device *d = k->deviceId < MAX_DEVICES ? &c->dev[k->deviceId] : NULL;
	int64_t blocks = (int64_t)k->gridX * k->gridY * k->gridZ;
	int64_t threads = (int64_t)k->blockX * k->blockY * k->blockZ;

	learn_ctx(c, k->contextId, k->deviceId);
	if (!k->start) {
		c->stats.untimed++;
		return;
	}
	ev_open(c, o, 'X', "kernel", kernel_name(c, k->name), k->deviceId, k->streamId, k->start, k->end);
	putf(o, ",\"args\":{\"device\":%u,\"context\":%u,\"stream\":%u,\"correlation\":%u,"
	     "\"registers per thread\":%u,\"shared memory\":%d,",
	     k->deviceId, k->contextId, k->streamId, k->correlationId, k->registersPerThread,
	     k->staticSharedMemory + k->dynamicSharedMemory);
	if (d && d->seen && d->sms && d->warp)
		putf(o, "\"blocks per SM\":%.6f,\"warps per SM\":%.6f,", (double)blocks / d->sms,
		     (double)(blocks * ((threads + d->warp - 1) / d->warp)) / d->sms);
	putf(o, "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]}}", k->gridX, k->gridY, k->gridZ, k->blockX,
	     k->blockY, k->blockZ);
}

static void memcpy_rec(struct cupti_conv *c, const CUpti_ActivityMemcpy6 *m, struct cupti_out *o)
{
	char name[96];
	uint64_t dur = m->end > m->start ? m->end - m->start : 0;

	learn_ctx(c, m->contextId, m->deviceId);
	if (!m->start) {
		c->stats.untimed++;
		return;
	}
	snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)", KIND_STR(memcpy_kinds, m->copyKind),
		 KIND_STR(memory_kinds, m->srcKind), KIND_STR(memory_kinds, m->dstKind));
	ev_open(c, o, 'X', "gpu_memcpy", name, m->deviceId, m->streamId, m->start, m->end);
	putf(o, ",\"args\":{\"device\":%u,\"context\":%u,\"stream\":%u,\"correlation\":%u,\"bytes\":%llu,"
	     "\"memory bandwidth (GB/s)\":%.6f}}",
	     m->deviceId, m->contextId, m->streamId, m->correlationId, (unsigned long long)m->bytes,
	     dur ? (double)m->bytes / (double)dur : 0.0);
}

static void memset_rec(struct cupti_conv *c, const CUpti_ActivityMemset4 *m, struct cupti_out *o)
{
	char name[64];
	uint64_t dur = m->end > m->start ? m->end - m->start : 0;

	learn_ctx(c, m->contextId, m->deviceId);
	if (!m->start) {
		c->stats.untimed++;
		return;
	}
	snprintf(name, sizeof(name), "Memset (%s)", KIND_STR(memory_kinds, m->memoryKind));
	ev_open(c, o, 'X', "gpu_memset", name, m->deviceId, m->streamId, m->start, m->end);
	putf(o, ",\"args\":{\"device\":%u,\"context\":%u,\"stream\":%u,\"correlation\":%u,\"bytes\":%llu,"
	     "\"memory bandwidth (GB/s)\":%.6f}}",
	     m->deviceId, m->contextId, m->streamId, m->correlationId, (unsigned long long)m->bytes,
	     dur ? (double)m->bytes / (double)dur : 0.0);
}

static void memory_rec(struct cupti_conv *c, const CUpti_ActivityMemory4 *m, struct cupti_out *o)
{
	int host = m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
		   m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
	int dev_type = host ? 0 : 1;	/* c10::DeviceType CPU, CUDA */
	int64_t dev_id = host ? -1 : (int64_t)m->deviceId, bytes;
	uint64_t key = (uint64_t)dev_type << 32 | (uint32_t)dev_id, *total, *size;

	learn_ctx(c, m->contextId, m->deviceId);
	if (!(total = map_get(&c->totals, key))) {
		if (map_put(&c->totals, key, 0) || !(total = map_get(&c->totals, key))) {
			o->oom = 1;
			return;
		}
	}
	if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
		/* the size is the allocation's: a release record may not carry it */
		size = map_get(&c->allocs, m->address);
		bytes = size ? (int64_t)*size : (int64_t)m->bytes;
		map_del(&c->allocs, m->address);
		*total = *total >= (uint64_t)bytes ? *total - (uint64_t)bytes : 0;
		bytes = -bytes;
	} else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) {
		if (map_put(&c->allocs, m->address, m->bytes)) {
			o->oom = 1;
			return;
		}
		bytes = (int64_t)m->bytes;
		*total += m->bytes;
	} else {
		c->stats.other++;
		return;
	}
	ev_open(c, o, 'i', "cpu_instant_event", "[memory]", m->processId, thread_of(c, m->correlationId),
		m->timestamp, m->timestamp);
	putf(o, ",\"args\":{\"Ev Idx\":%lld,\"Device Type\":%d,\"Device Id\":%lld,\"Addr\":%lld,"
	     "\"Bytes\":%lld,\"Total Allocated\":%llu,\"Total Reserved\":%llu,\"correlation\":%u}}",
	     (long long)c->mem_idx++, dev_type, (long long)dev_id, (long long)m->address, (long long)bytes,
	     (unsigned long long)*total, (unsigned long long)*total, m->correlationId);
}

static void runtime_rec(struct cupti_conv *c, const CUpti_ActivityAPI *a, struct cupti_out *o)
{
	const char *name = NULL;
	char buf[128];
	size_t n;

	/* as Kineto: the calls PyTorch makes thousands of times a step, which say nothing
	 * (cudaGetDevice was 82% of a transformer loop's records, 3,440 a step on an H200) */
	if (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020 ||
	    a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020 ||
	    a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020) {
		c->stats.skipped_calls++;
		return;
	}
	if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS || !name)
		name = "cudaUnknownCall";
	/* "cudaMalloc_v3020" -> "cudaMalloc", as Kineto names them */
	n = strlen(name);
	snprintf(buf, sizeof(buf), "%s", name);
	if (n < sizeof(buf)) {
		char *v = strstr(buf, "_v");
		if (v && v[2] >= '0' && v[2] <= '9' && strspn(v + 2, "0123456789") == strlen(v + 2))
			*v = 0;
	}
	ev_open(c, o, 'X', "cuda_runtime", buf, a->processId, a->threadId, a->start, a->end);
	putf(o, ",\"args\":{\"cbid\":%u,\"correlation\":%u}}", (unsigned)a->cbid, a->correlationId);
}

static void sync_rec(struct cupti_conv *c, const CUpti_ActivitySynchronization2 *s, struct cupti_out *o)
{
	static const char *const names[] = {
		"Unknown Sync", "Event Sync", "Stream Wait Event", "Stream Sync", "Context Sync",
	};
	const uint64_t *dev = map_get(&c->ctx_dev, s->contextId);
	int has_stream = s->streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	const char *name = KIND_STR(names, s->type);

	/* on the GPU row like Kineto when the context's device is known, else on the host thread */
	if (dev)
		ev_open(c, o, 'X', "cuda_sync", name, (int64_t)*dev, has_stream ? s->streamId : 0, s->start, s->end);
	else
		ev_open(c, o, 'X', "cuda_sync", name, process_of(c, s->correlationId), thread_of(c, s->correlationId),
			s->start, s->end);
	putf(o, ",\"args\":{\"cuda_sync_kind\":\"%s\",\"correlation\":%u,\"context\":%u", name,
	     s->correlationId, s->contextId);
	if (dev)
		putf(o, ",\"device\":%llu", (unsigned long long)*dev);
	if (has_stream)
		putf(o, ",\"stream\":%u", s->streamId);
	if (s->cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		putf(o, ",\"wait_on_cuda_event_id\":%u", s->cudaEventId);
	PUTS(o, "}}");
}

static int is_step(const struct cupti_conv *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->npatterns; i++)
		if (!fnmatch(c->patterns[i], name, 0))
			return 1;
	return 0;
}

/* The step number: the last run of digits in the name, else the next one in order. */
static int64_t step_number(struct cupti_conv *c, const char *name)
{
	const char *end = name + strlen(name), *p;
	int64_t n = 0;

	while (end > name && (end[-1] < '0' || end[-1] > '9'))
		end--;
	p = end;
	while (p > name && p[-1] >= '0' && p[-1] <= '9' && end - p < 18)
		p--;
	if (p == end)
		return c->next_step++;
	for (; p < end; p++)
		n = n * 10 + (*p - '0');
	if (n >= c->next_step)
		c->next_step = n + 1;
	return n;
}

static void marker_rec(struct cupti_conv *c, const CUpti_ActivityMarker2 *m, struct cupti_out *o)
{
	uint32_t pid = 0, tid = 0;
	uint64_t *v;
	struct range *r;

	if (m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS || m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
		pid = m->objectId.pt.processId;
		tid = m->objectId.pt.threadId;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		/* the name is copied: a range may end in a later buffer */
		const char *name = m->name ? m->name : "";
		size_t n = strlen(name);
		if (c->ranges.n >= MAX_OPEN_RANGES || !(r = malloc(sizeof(*r) + n + 1))) {
			c->stats.other++;
			return;
		}
		r->start = (int64_t)m->timestamp;
		r->pid = pid;
		r->tid = tid;
		memcpy(r->name, name, n + 1);
		v = map_get(&c->ranges, m->id);
		if (v)
			free((void *)(uintptr_t)*v);
		if (map_put(&c->ranges, m->id, (uintptr_t)r)) {
			free(r);
			o->oom = 1;
		}
		return;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		char step[40];
		const char *name;
		if (!(v = map_get(&c->ranges, m->id))) {
			c->stats.unmatched_ends++;
			return;
		}
		r = (void *)(uintptr_t)*v;
		map_del(&c->ranges, m->id);
		name = r->name;
		if (is_step(c, r->name)) {
			snprintf(step, sizeof(step), "ProfilerStep#%lld", (long long)step_number(c, r->name));
			name = step;
		}
		ev_open(c, o, 'X', "user_annotation", name, r->pid, r->tid, (uint64_t)r->start, m->timestamp);
		if (name == step) {
			PUTS(o, ",\"args\":{\"NVTX range\":");
			put_str(o, r->name);
			PUTS(o, "}}");
		} else {
			PUTS(o, "}");
		}
		free(r);
		return;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
		ev_open(c, o, 'i', "user_annotation", m->name, pid, tid, m->timestamp, m->timestamp);
		PUTS(o, "}");
		return;
	}
	c->stats.other++;
}

static void overhead_rec(struct cupti_conv *c, const CUpti_ActivityOverhead3 *h, struct cupti_out *o)
{
	const char *name;
	int thread = h->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD || h->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS;

	switch (h->overheadKind) {
	case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: name = "Driver Compiler"; break;
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: name = "Buffer Flush"; break;
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: name = "Instrumentation"; break;
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: name = "Resource"; break;
	case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING: name = "Module Loading"; break;
	case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING: name = "Lazy Function Loading"; break;
	case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL: name = "Command Buffer Full"; break;
	case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: name = "Activity Buffer Request"; break;
	default: name = "Unknown Overhead"; break;
	}
	if (!h->start) {
		c->stats.untimed++;
		return;
	}
	/* Kineto keeps pid -1 for overhead when it has no thread */
	ev_open(c, o, 'X', "overhead", name, thread ? (int64_t)h->objectId.pt.processId : -1,
		thread ? (int64_t)h->objectId.pt.threadId : 0, h->start, h->end);
	PUTS(o, "}");
}

static void device_rec(struct cupti_conv *c, const CUpti_ActivityDevice5 *d)
{
	struct device *x;

	if (d->id >= MAX_DEVICES) {
		c->stats.other++;
		return;
	}
	x = &c->dev[d->id];
	free(x->name);
	*x = (struct device){
		.seen = 1, .name = strdup(d->name ? d->name : ""), .mem = d->globalMemorySize,
		.sms = d->numMultiprocessors, .major = d->computeCapabilityMajor,
		.minor = d->computeCapabilityMinor, .threads_block = d->maxThreadsPerBlock,
		.threads_sm = d->maxWarpsPerMultiprocessor * d->numThreadsPerWarp,
		.regs_block = d->maxRegistersPerBlock, .regs_sm = d->maxRegistersPerMultiprocessor,
		.warp = d->numThreadsPerWarp, .smem_block = d->maxSharedMemoryPerBlock,
		.smem_sm = d->maxSharedMemoryPerMultiprocessor,
	};
}

void cupti_chunk_begin(struct cupti_conv *c, struct cupti_out *out)
{
	out->len = 0;
	out->nevents = 0;
	out->oom = 0;
	putf(out, "{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"baseTimeNanoseconds\":%lld,\"traceEvents\":[\n",
	     (long long)c->base_ns);
}

int cupti_convert(struct cupti_conv *c, const uint8_t *buf, size_t valid, struct cupti_out *out)
{
	CUpti_Activity *rec = NULL;

	/*
	 * Two walks: the first learns which thread made each API call, so that
	 * a [memory] record written before its cudaMalloc's own record (the API
	 * record is written when the call returns) still gets the right thread.
	 */
	while (cuptiActivityGetNextRecord((uint8_t *)buf, valid, &rec) == CUPTI_SUCCESS)
		if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME)
			remember_thread(c, (const void *)rec);
	rec = NULL;
	while (!out->oom && cuptiActivityGetNextRecord((uint8_t *)buf, valid, &rec) == CUPTI_SUCCESS) {
		c->stats.records++;
		switch (rec->kind) {
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
			kernel(c, (const void *)rec, out);
			break;
		case CUPTI_ACTIVITY_KIND_MEMCPY: memcpy_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_MEMSET: memset_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_MEMORY2: memory_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_RUNTIME: runtime_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: sync_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_MARKER: marker_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_OVERHEAD: overhead_rec(c, (const void *)rec, out); break;
		case CUPTI_ACTIVITY_KIND_DEVICE: device_rec(c, (const void *)rec); break;
		default: c->stats.other++; break;
		}
	}
	return out->oom ? -1 : 0;
}

int cupti_chunk_end(struct cupti_conv *c, struct cupti_out *out)
{
	int first = 1, i;

	PUTS(out, "\n],\"deviceProperties\":[");
	for (i = 0; i < MAX_DEVICES; i++) {
		const struct device *d = &c->dev[i];
		if (!d->seen)
			continue;
		if (!first)
			PUTS(out, ",");
		PUTS(out, "\n{");
		first = 0;
		putf(out, "\"id\":%d,\"name\":", i);
		put_str(out, d->name);
		putf(out, ",\"totalGlobalMem\":%llu,\"computeMajor\":%u,\"computeMinor\":%u,"
		     "\"maxThreadsPerBlock\":%u,\"maxThreadsPerMultiprocessor\":%u,\"regsPerBlock\":%u,"
		     "\"regsPerMultiprocessor\":%u,\"warpSize\":%u,\"sharedMemPerBlock\":%u,"
		     "\"sharedMemPerMultiprocessor\":%u,\"numSms\":%u}",
		     (unsigned long long)d->mem, d->major, d->minor, d->threads_block, d->threads_sm,
		     d->regs_block, d->regs_sm, d->warp, d->smem_block, d->smem_sm, d->sms);
	}
	PUTS(out, "]}\n");
	return out->oom ? -1 : 0;
}
