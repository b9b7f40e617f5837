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
 *
 * On-demand mode (TRAINSCOPE_CAPTURE_MODE=ondemand, issue 52): setup enables
 * no activity kind. The worker looks for the collector's $TRAINSCOPE_SPOOL/
 * .capture every ONDEMAND_POLL_MS (a stat, no CUDA call) and opens a window:
 * the kinds the request's activities name are enabled (from the worker, as
 * Kineto's on-demand traces enable them from its profiler thread), and with
 * steps asked, CUPTI's NVTX callbacks count the starts of ranges matching the
 * step patterns on the threads that push them. The window closes at the
 * start of step N+1, after S seconds, after STEPLESS_S seconds when no step
 * range began, at ONDEMAND_MAX_S, or at exit: the kinds are disabled, a
 * forced flush writes the last chunk, every chunk of the window named
 * trace-<pid>-<seq>-c<ID>.pt.trace.json; then .capture-<ID>.done says "ok"
 * or "failed: why" and .capture is removed (ondemand.h).
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

#include <fnmatch.h>
#include <generated_nvtx_meta.h>
#include <sys/stat.h>

#include "convert.h"
#include "ondemand.h"
#include "spool.h"

#define EXPORT __attribute__((visibility("default")))

#define BUF_SIZE (4u << 20)
#define MAX_BUFFERS 32		/* handed to CUPTI or queued: 128 MiB at most */
#define EXIT_WAIT_S 10
#define TRIMONTH_NS (7889238LL * 1000000000LL)	/* Kineto's baseTimeNanoseconds granularity */
#define ONDEMAND_POLL_MS 100	/* how often the worker looks for .capture */
#define STEPLESS_S 30		/* a steps window in which no step range began ends then (TRAINSCOPE_CAPTURE_STEPLESS_S) */

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
	uint64_t events;	/* events written into chunks so far */
	/* on-demand mode: the window, the worker's (step_* also the NVTX callback's) */
	int ondemand;
	struct {
		int open, nvtx;
		struct ondemand_req req;
		size_t nkinds;
		CUpti_ActivityKind kinds[16];
		long long started_ms, ends_ms, stepless_ms, next_flush_ms;
		uint64_t events0, dropped0;
	} win;
	long long next_look_ms;
	long stepless_s;
	char last_id[ONDEMAND_ID_MAX + 1];	/* the request answered last */
	char **step_patterns;
	atomic_long step_starts, step_limit;
	atomic_int step_end;
} g = { .once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER };

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_OVERHEAD,
};

/* The kinds of each activity a request may name (ondemand.h); the "always" mode enables kinds[] above. */
static const struct {
	unsigned activity;
	CUpti_ActivityKind kind;
} activity_kinds[] = {
	{ ONDEMAND_CPU, CUPTI_ACTIVITY_KIND_RUNTIME },
	{ ONDEMAND_CPU, CUPTI_ACTIVITY_KIND_MARKER },
	{ ONDEMAND_CUDA, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL },
	{ ONDEMAND_CUDA, CUPTI_ACTIVITY_KIND_MEMCPY },
	{ ONDEMAND_CUDA, CUPTI_ACTIVITY_KIND_MEMSET },
	{ ONDEMAND_CUDA, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION },
	{ ONDEMAND_CUDA, CUPTI_ACTIVITY_KIND_OVERHEAD },
	{ ONDEMAND_MEMORY, CUPTI_ACTIVITY_KIND_MEMORY2 },
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* The message of an NVTX range start or push, or NULL (another call, or not ASCII). */
static const char *nvtx_range_name(CUpti_CallbackId cbid, const CUpti_NvtxData *d)
{
	const nvtxEventAttributes_t *a = NULL;

	switch (cbid) {
	case CUPTI_CBID_NVTX_nvtxRangePushA:
		return ((const nvtxRangePushA_params *)d->functionParams)->message;
	case CUPTI_CBID_NVTX_nvtxRangeStartA:
		return ((const nvtxRangeStartA_params *)d->functionParams)->message;
	case CUPTI_CBID_NVTX_nvtxRangePushEx:
		a = ((const nvtxRangePushEx_params *)d->functionParams)->eventAttrib;
		break;
	case CUPTI_CBID_NVTX_nvtxRangeStartEx:
		a = ((const nvtxRangeStartEx_params *)d->functionParams)->eventAttrib;
		break;
	case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
		a = ((const nvtxDomainRangePushEx_params *)d->functionParams)->core.eventAttrib;
		break;
	case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
		a = ((const nvtxDomainRangeStartEx_params *)d->functionParams)->core.eventAttrib;
		break;
	default:
		return NULL;
	}
	return a && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii : NULL;
}

static int is_step(const char *name)
{
	char **p;

	for (p = g.step_patterns; p && *p; p++)
		if (!fnmatch(*p, name, 0))
			return 1;
	return 0;
}

/*
 * Records still in CUPTI's buffers would be lost by a device reset. NVTX
 * callbacks come only while a steps window is open (on the thread that
 * pushed the range): the start of step N+1 closes it.
 */
static void CUPTIAPI on_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
	const CUpti_CallbackData *cb = data;
	const char *name;

	if (domain == CUPTI_CB_DOMAIN_NVTX) {
		if (data && (name = nvtx_range_name(cbid, data)) && is_step(name) &&
		    atomic_fetch_add(&g.step_starts, 1) == atomic_load(&g.step_limit) && active_here()) {
			pthread_mutex_lock(&g.mu);
			atomic_store(&g.step_end, 1);
			pthread_cond_signal(&g.cv);
			pthread_mutex_unlock(&g.mu);
		}
		return;
	}

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
	else if (chunk.nevents && !spool_write(&g.spool, chunk.data, chunk.len))
		g.events += chunk.nevents;
	cupti_out_release(&chunk);
}

/* Writes what is queued as one chunk (on the worker's thread, g.mu not held). */
static void write_queued(void)
{
	struct qbuf q[MAX_BUFFERS];
	int n;

	pthread_mutex_lock(&g.mu);
	n = g.nq;
	memcpy(q, g.q, (size_t)n * sizeof(q[0]));
	g.nq = 0;
	pthread_mutex_unlock(&g.mu);
	if (n)
		write_chunk(q, n);
	pthread_mutex_lock(&g.mu);
	g.outstanding -= n;
	pthread_mutex_unlock(&g.mu);
}

static void request_path(char *path, size_t size)
{
	snprintf(path, size, "%s/" ONDEMAND_REQUEST, g.spool.dir);
}

/* Answers request id (when it has one) and removes .capture: it is done with. */
static void answer(const char *id, const char *text)
{
	char path[4096];

	if (id[0] && ondemand_done(g.spool.dir, id, text))
		fprintf(stderr, "trainscope-cupti: capture %s: cannot write its .done file in %s: %s\n", id, g.spool.dir,
			strerror(errno));
	request_path(path, sizeof(path));
	unlink(path);
	snprintf(g.last_id, sizeof(g.last_id), "%s", id);
}

static const char *result_text(CUptiResult r)
{
	const char *s = NULL;

	return cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s ? s : "unknown error";
}

/* .capture there and not answered yet: open the window it asks for, or answer why not. */
static void window_open(void)
{
	struct ondemand_req *r = &g.win.req;
	char why[256], text[320], tag[8 + ONDEMAND_ID_MAX];
	CUptiResult cr = CUPTI_SUCCESS;
	long long now = now_ms();
	size_t i;
	int valid;

	if (!ondemand_read(g.spool.dir, r, &valid, why, sizeof(why)) || (r->id[0] && !strcmp(r->id, g.last_id)))
		return;
	if (!valid) {
		fprintf(stderr, "trainscope-cupti: capture request %s: %s\n", r->id[0] ? r->id : "without an id", why);
		snprintf(text, sizeof(text), "failed: bad request: %s", why);
		answer(r->id, text);
		return;
	}
	g.win.nkinds = 0;
	for (i = 0; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]) && cr == CUPTI_SUCCESS; i++)
		if ((r->activities & activity_kinds[i].activity) &&
		    (cr = cuptiActivityEnable(activity_kinds[i].kind)) == CUPTI_SUCCESS)
			g.win.kinds[g.win.nkinds++] = activity_kinds[i].kind;
	if (cr != CUPTI_SUCCESS) {
		while (g.win.nkinds)
			cuptiActivityDisable(g.win.kinds[--g.win.nkinds]);
		snprintf(text, sizeof(text), "failed: cuptiActivityEnable: %s (%d)", result_text(cr), (int)cr);
		fprintf(stderr, "trainscope-cupti: capture %s %s\n", r->id, text);
		answer(r->id, text);
		return;
	}
	/* device records only feed deviceProperties: optional */
	if ((r->activities & ONDEMAND_CUDA) && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE) == CUPTI_SUCCESS)
		g.win.kinds[g.win.nkinds++] = CUPTI_ACTIVITY_KIND_DEVICE;
	atomic_store(&g.step_starts, 0);
	atomic_store(&g.step_limit, r->steps);
	atomic_store(&g.step_end, 0);
	g.win.nvtx = r->steps > 0 && cuptiEnableDomain(1, g.sub, CUPTI_CB_DOMAIN_NVTX) == CUPTI_SUCCESS;
	snprintf(tag, sizeof(tag), "c%s", r->id);
	spool_set_tag(&g.spool, tag);
	g.win.open = 1;
	g.win.started_ms = now;
	g.win.ends_ms = now + (r->seconds ? r->seconds : ONDEMAND_MAX_S) * 1000LL;
	g.win.stepless_ms = r->steps ? now + g.stepless_s * 1000LL : g.win.ends_ms;
	g.win.next_flush_ms = now + g.flush_ms;
	g.win.events0 = g.events;
	g.win.dropped0 = g.spool.dropped;
	if (r->steps)
		fprintf(stderr, "trainscope-cupti: capture %s: tracing the next %ld step(s)%s\n", r->id, r->steps,
			g.win.nvtx ? "" : " (no NVTX callbacks: by time)");
	else
		fprintf(stderr, "trainscope-cupti: capture %s: tracing for %ld s\n", r->id, r->seconds);
}

/* Closes the open window: kinds off, the last chunk, the answer. at_exit: the process is exiting. */
static void window_close(int at_exit)
{
	const struct ondemand_req *r = &g.win.req;
	long steps = atomic_load(&g.step_starts);
	uint64_t events, dropped;
	char text[320], what[96];

	if (g.win.nvtx)
		cuptiEnableDomain(0, g.sub, CUPTI_CB_DOMAIN_NVTX);
	while (g.win.nkinds)
		cuptiActivityDisable(g.win.kinds[--g.win.nkinds]);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	write_queued();
	spool_set_tag(&g.spool, NULL);
	g.win.open = 0;
	events = g.events - g.win.events0;
	dropped = g.spool.dropped - g.win.dropped0;
	if (r->steps && steps)
		snprintf(what, sizeof(what), "%ld of %ld step(s)", steps > r->steps ? r->steps : steps, r->steps);
	else
		snprintf(what, sizeof(what), "%.1f s%s", (double)(now_ms() - g.win.started_ms) / 1000,
			 r->steps ? " without a step range" : "");
	if (events)
		snprintf(text, sizeof(text), "ok");
	else if (dropped)
		snprintf(text, sizeof(text), "failed: the spool %s was full: %llu chunk(s) dropped", g.spool.dir,
			 (unsigned long long)dropped);
	else
		snprintf(text, sizeof(text), "failed: no CUDA activity in %s%s", what,
			 at_exit ? " (the process exited)" : "");
	fprintf(stderr, "trainscope-cupti: capture %s: %s, %llu event(s)%s: %s\n", r->id, what,
		(unsigned long long)events, at_exit ? ", ended by the exit" : "", text);
	answer(r->id, text);
}

/* The worker's on-demand turn: look for a request, or close the window when it is over, or flush it. */
static void ondemand_tick(int stop)
{
	long long now = now_ms();

	if (!g.win.open) {
		if (!stop && now >= g.next_look_ms) {
			g.next_look_ms = now + ONDEMAND_POLL_MS;
			window_open();
		}
		return;
	}
	if (stop || atomic_load(&g.step_end) || now >= g.win.ends_ms ||
	    (now >= g.win.stepless_ms && !atomic_load(&g.step_starts))) {
		window_close(stop);
		return;
	}
	if (now >= g.win.next_flush_ms) {
		cuptiActivityFlushAll(0);
		g.win.next_flush_ms = now + g.flush_ms;
	}
}

static void *worker(void *arg)
{
	int stop;

	/* what top -H and perf show for the thread the library adds to the program */
	pthread_setname_np(pthread_self(), "ts-cupti");
	pthread_mutex_lock(&g.mu);
	for (;;) {
		int timed_out = 0;
		if (!g.nq && !g.stop && !atomic_load(&g.step_end)) {
			long ms = g.ondemand ? ONDEMAND_POLL_MS : g.flush_ms;
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_sec += ms / 1000;
			dl.tv_nsec += (ms % 1000) * 1000000L;
			if (dl.tv_nsec >= 1000000000L)
				dl.tv_sec++, dl.tv_nsec -= 1000000000L;
			timed_out = pthread_cond_timedwait(&g.cv, &g.mu, &dl) == ETIMEDOUT;
		}
		stop = g.stop;
		if (g.ondemand) {
			/* opens, flushes and closes windows itself */
			pthread_mutex_unlock(&g.mu);
			ondemand_tick(stop);
			pthread_mutex_lock(&g.mu);
		} else if (timed_out || stop) {
			/* buffer_completed runs inside the flush, on this thread: unlock */
			pthread_mutex_unlock(&g.mu);
			cuptiActivityFlushAll(stop ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
			pthread_mutex_lock(&g.mu);
		}
		pthread_mutex_unlock(&g.mu);
		write_queued();
		if (stop)
			return NULL;
		pthread_mutex_lock(&g.mu);
	}
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

/* The comma-separated patterns as a NULL-terminated array (one allocation), or NULL when out of memory. */
static char **split_patterns(const char *list)
{
	size_t n = 2, len = strlen(list);
	const char *p;
	char **v, *copy;

	for (p = list; *p; p++)
		n += *p == ',';
	if (!(v = malloc(n * sizeof(*v) + len + 1)))
		return NULL;
	copy = memcpy((char *)(v + n), list, len + 1);
	n = 0;
	for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ","))
		v[n++] = tok;
	v[n] = NULL;
	return v;
}

static void setup(void)
{
	const char *dir = getenv("TRAINSCOPE_SPOOL"), *mode = getenv("TRAINSCOPE_CAPTURE_MODE");
	const char *steps = getenv("TRAINSCOPE_STEP_PATTERN");
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
	if (mode && *mode && strcmp(mode, "always") && strcmp(mode, "ondemand")) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: TRAINSCOPE_CAPTURE_MODE=%s: expected always or ondemand\n",
			mode);
		return;
	}
	g.ondemand = mode && !strcmp(mode, "ondemand");
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
	g.stepless_s = env_long("TRAINSCOPE_CAPTURE_STEPLESS_S", STEPLESS_S, 1, ONDEMAND_MAX_S);
	if (!(g.step_patterns = split_patterns(steps && *steps ? steps : CUPTI_DEFAULT_STEP_PATTERNS))) {
		fprintf(stderr, "trainscope-cupti: tracing disabled: out of memory\n");
		goto fail;
	}
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
	/* on demand: every kind waits for a window (window_open) */
	for (; !g.ondemand && enabled < sizeof(kinds) / sizeof(kinds[0]); enabled++)
		TRY(cuptiActivityEnable(kinds[enabled]));
#undef TRY
	/* device records only feed deviceProperties and blocks per SM: optional */
	if (!g.ondemand)
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
	if (g.ondemand)
		fprintf(stderr, "trainscope-cupti: on-demand mode: tracing waits for a capture request in %s/" ONDEMAND_REQUEST
			"\n", dir);
	return;
fail:
	while (enabled--)
		cuptiActivityDisable(kinds[enabled]);
	if (subscribed)
		cuptiUnsubscribe(g.sub);
	cupti_conv_free(g.conv);
	g.conv = NULL;
	free(g.step_patterns);
	g.step_patterns = NULL;
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
