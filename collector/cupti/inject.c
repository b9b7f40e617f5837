/*
 * inject.c: libtrainscope-cupti.so, the CUPTI injection library. The CUDA
 * driver loads it through CUDA_INJECTION64_PATH and calls InitializeInjection
 * during cuInit; the NVTX loader loads it through NVTX_INJECTION64_PATH and
 * calls InitializeInjectionNvtx2. Both run one setup (pthread_once):
 *
 *   TRAINSCOPE_SPOOL set?  cuptiGetVersion() as built?  cuptiSubscribe ->
 *   activity attributes and buffer callbacks -> cuptiActivityEnable each kind
 *   -> worker thread, atexit, atfork
 *
 * Any failure undoes what was done and leaves one line on stderr; the host
 * runs on untraced. Nothing here aborts, exits or writes to stdout.
 *
 * Threads: CUPTI hands full (or flushed) buffers to buffer_completed, which
 * only queues them. The worker thread, ours, converts them (convert.h) and
 * writes one chunk per wake-up into the spool (spool.h): when a buffer is
 * completed, and every TRAINSCOPE_FLUSH_MS after cuptiActivityFlushAll(0).
 * At exit (only in the process that initialised: forked children are
 * marked inactive) the worker does a forced flush and writes the last chunk;
 * the exit waits for it at most EXIT_WAIT_S. No CUDA call is made anywhere.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "convert.h"
#include "spool.h"

#define EXPORT __attribute__((visibility("default")))

#define BUF_SIZE (4u << 20)
#define MAX_BUFFERS 32		/* handed to CUPTI or queued: 128 MiB at most */
#define EXIT_WAIT_S 10
#define TRIMONTH_NS (7889238LL * 1000000000LL)	/* Kineto's baseTimeNanoseconds granularity */

/* Not in any public header, exported by libcupti (shared/reference/cupti_mhd.md §1.1). */
CUptiResult CUPTIAPI cuptiNvtxInitialize(void *pfnGetExportTable);
CUptiResult CUPTIAPI cuptiNvtxInitialize2(void *pfnGetExportTable);

EXPORT int InitializeInjection(void);
EXPORT int InitializeInjectionNvtx(void *p);
EXPORT int InitializeInjectionNvtx2(void *p);

struct qbuf {
	uint8_t *buf;
	size_t valid;
};

static struct {
	pthread_once_t once;
	atomic_int active;
	pid_t pid;
	CUpti_SubscriberHandle sub;
	pthread_t worker;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qbuf q[MAX_BUFFERS];	/* completed, not yet converted */
	int nq, outstanding, stop;
	long flush_ms;
	struct cupti_conv *conv;
	struct spool spool;
} g = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER };

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_OVERHEAD,
};

static int active_here(void)
{
	return atomic_load(&g.active) && getpid() == g.pid;
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	if (!active_here())
		return;
	pthread_mutex_lock(&g.mu);
	/* past the cap CUPTI drops records rather than the host's memory growing */
	if (g.outstanding < MAX_BUFFERS && (*buffer = calloc(1, BUF_SIZE))) {
		*size = BUF_SIZE;
		g.outstanding++;
	}
	pthread_mutex_unlock(&g.mu);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	if (!active_here()) {
		free(buf);
		return;
	}
	pthread_mutex_lock(&g.mu);
	/* nq < outstanding <= MAX_BUFFERS: there is always room */
	g.q[g.nq++] = (struct qbuf){ buf, valid };
	pthread_cond_signal(&g.cv);
	pthread_mutex_unlock(&g.mu);
}

/* Records still in CUPTI's buffers would be lost by a device reset. */
static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;

	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020 &&
	    cb->callbackSite == CUPTI_API_ENTER && active_here())
		cuptiActivityFlushAll(0);
}

/* Converts and frees n queued buffers into one chunk, and spools it. */
static void write_chunk(struct qbuf *q, int n)
{
	struct cupti_out chunk = { 0 };
	int i, rc = 0;

	cupti_chunk_begin(g.conv, &chunk);
	for (i = 0; i < n; i++) {
		if (!rc)
			rc = cupti_convert(g.conv, q[i].buf, q[i].valid, &chunk);
		free(q[i].buf);
	}
	if (!rc)
		rc = cupti_chunk_end(g.conv, &chunk);
	if (rc)
		fprintf(stderr, "trainscope-cupti: out of memory converting %d activity buffers; chunk dropped\n", n);
	else if (chunk.nevents)
		spool_write(&g.spool, chunk.data, chunk.len);
	cupti_out_release(&chunk);
}

static void *worker(void *arg)
{
	struct qbuf q[MAX_BUFFERS];
	int n, stop;

	/* what top -H and perf show for the thread the library adds to the program */
	pthread_setname_np(pthread_self(), "ts-cupti");
	pthread_mutex_lock(&g.mu);
	for (;;) {
		int timed_out = 0;
		if (!g.nq && !g.stop) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += g.flush_ms / 1000;
			dl.tv_nsec += (g.flush_ms % 1000) * 1000000L;
			if (dl.tv_nsec >= 1000000000L)
				dl.tv_sec++, dl.tv_nsec -= 1000000000L;
			timed_out = pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT;
		}
		stop = g.stop;
		if (timed_out || stop) {
			/* buffer_completed runs inside the flush, on this thread: unlock */
			pthread_mutex_unlock(&g.mu);
			cuptiActivityFlushAll(stop ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
			pthread_mutex_lock(&g.mu);
		}
		n = g.nq;
		memcpy(q, g.q, (size_t)n * sizeof(q[0]));
		g.nq = 0;
		pthread_mutex_unlock(&g.mu);
		if (n)
			write_chunk(q, n);
		pthread_mutex_lock(&g.mu);
		g.outstanding -= n;
		if (stop)
			break;
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

static void at_exit(void)
{
	struct timespec dl;

	if (!active_here())
		return;
	pthread_mutex_lock(&g.mu);
	g.stop = 1;
	pthread_cond_signal(&g.cv);
	pthread_mutex_unlock(&g.mu);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += EXIT_WAIT_S;
	/* a flush hung by CUDA's own teardown must not hold the host's exit */
	if (pthread_timedjoin_np(g.worker, NULL, &dl)) {
		fprintf(stderr, "trainscope-cupti: the last flush did not finish in %d s; its records are lost\n",
			EXIT_WAIT_S);
		return;
	}
	atomic_store(&g.active, 0);
	spool_release(&g.spool);
}

static void at_fork_child(void)
{
	/* the worker did not survive the fork; the parent owns the spool names */
	atomic_store(&g.active, 0);
}

static char *demangle(const char *mangled)
{
	static char *(*cxa)(const char *, char *, size_t *, int *);
	static int looked;
	int status = -1;
	char *s;

	/* libstdc++ when the host has it (every CUDA C++ program): no link-time dependency */
	if (!looked) {
		*(void **)&cxa = dlsym(RTLD_DEFAULT, "__cxa_demangle");
		/* a library the host loaded RTLD_LOCAL (Python's extensions, PyTorch's libstdc++)
		 * is not in the global scope: ask for it by name, without loading it */
		void *h = cxa ? NULL : dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			*(void **)&cxa = dlsym(h, "__cxa_demangle");
		looked = 1;
	}
	if (!cxa || strncmp(mangled, "_Z", 2))
		return NULL;
	s = cxa(mangled, NULL, NULL, &status);
	if (status) {
		free(s);
		return NULL;
	}
	return s;
}

static long env_long(const char *name, long def, long min, long max)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return def;
	errno = 0;
	n = strtol(v, &end, 10);
	return errno || *end || n < min || n > max ? def : n;
}

static void disable(const char *what, CUptiResult r)
{
	const char *s = NULL;

	if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		s = "unknown error";
	/* what is the call's text (TRY below): its function name is enough */
	fprintf(stderr, "trainscope-cupti: tracing disabled: %.*s: %s (%d)\n", (int)strcspn(what, "("), what, s,
		(int)r);
}

static void setup(void)
{
	const char *dir = getenv("TRAINSCOPE_SPOOL");
	uint8_t zeroed = 1;
	size_t zsize = sizeof(zeroed), enabled = 0;
	uint32_t version = 0;
	uint64_t now = 0;
	pthread_condattr_t ca;
	sigset_t all, old;
	CUptiResult r;
	int subscribed = 0, rc;

	if (!dir || !*dir) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: TRAINSCOPE_SPOOL is not set\n");
		return;
	}
	if ((r = cuptiGetVersion(&version)) != CUPTI_SUCCESS) {
		disable("cuptiGetVersion()", r);
		return;
	}
	/* records are read with the layouts of the headers built against */
	if (version / 10000 != CUPTI_API_VERSION / 10000 || version < CUPTI_API_VERSION) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: libcupti API %u, built for %d\n",
			(unsigned)version, CUPTI_API_VERSION);
		return;
	}
	if (spool_open(&g.spool, dir, (uint64_t)env_long("TRAINSCOPE_SPOOL_MAX", (long)SPOOL_DEFAULT_MAX, 1, LONG_MAX))) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: spool %s: %s\n", dir, strerror(errno));
		return;
	}
	g.flush_ms = env_long("TRAINSCOPE_FLUSH_MS", 1000, 10, 3600 * 1000);
	cuptiGetTimestamp(&now);
	g.conv = cupti_conv_new(&(struct cupti_conv_config){
		.base_ns = (int64_t)(now - now % TRIMONTH_NS),
		.step_patterns = getenv("TRAINSCOPE_STEP_PATTERN"),
		.demangle = demangle,
	});
	if (!g.conv) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: out of memory\n");
		goto fail;
	}
#define TRY(call)                          \
	if ((r = (call)) != CUPTI_SUCCESS) { \
		disable(#call, r);           \
		goto fail;                   \
	}
	/* the one subscriber slot: fails when another profiler (Nsight, Kineto) holds it */
	TRY(cuptiSubscribe(&g.sub, on_callback, NULL));
	subscribed = 1;
	TRY(cuptiEnableCallback(1, g.sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020));
	TRY(cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM));
	TRY(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zsize, &zeroed));
	TRY(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
	for (; enabled < sizeof(kinds) / sizeof(kinds[0]); enabled++)
		TRY(cuptiActivityEnable(kinds[enabled]));
#undef TRY
	/* device records only feed deviceProperties and blocks per SM: optional */
	cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE);

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.cv, &ca);
	pthread_condattr_destroy(&ca);
	g.pid = getpid();
	atomic_store(&g.active, 1);
	/* the host's signals are for the host's threads */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&g.worker, NULL, worker, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: cannot start a thread: %s\n", strerror(rc));
		atomic_store(&g.active, 0);
		goto fail;
	}
	pthread_atfork(NULL, NULL, at_fork_child);
	atexit(at_exit);
	return;
fail:
	while (enabled--)
		cuptiActivityDisable(kinds[enabled]);
	if (subscribed)
		cuptiUnsubscribe(g.sub);
	cupti_conv_free(g.conv);
	g.conv = NULL;
	spool_release(&g.spool);
}

int InitializeInjection(void)
{
	pthread_once(&g.once, setup);
	return 1;	/* as NVIDIA's samples and Kineto: tracing or not, the host goes on */
}

int InitializeInjectionNvtx(void *p)
{
	pthread_once(&g.once, setup);
	return atomic_load(&g.active) && cuptiNvtxInitialize(p) == CUPTI_SUCCESS;
}

int InitializeInjectionNvtx2(void *p)
{
	pthread_once(&g.once, setup);
	return atomic_load(&g.active) && cuptiNvtxInitialize2(p) == CUPTI_SUCCESS;
}
