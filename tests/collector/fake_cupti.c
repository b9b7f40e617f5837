/*
 * fake_cupti.c: a stand-in for libcupti.so.13 (same SONAME and symbol
 * version), for testing the injection library without a GPU. It exports
 * every cupti* function libtrainscope-cupti.so calls, and:
 *   - logs each cuptiActivityEnable/Disable and cuptiEnableDomain to the file
 *     $FAKE_CUPTI_LOG, one line each ("enable KIND", "disable KIND",
 *     "domain nvtx 1"), for the test to read after the process ended;
 *   - fake_cupti_kernel(): a kernel the "GPU" ran: recorded only while
 *     CONCURRENT_KERNEL is enabled, handed to the library by the next
 *     cuptiActivityFlushAll through its buffer callbacks, as CUPTI does;
 *   - fake_cupti_nvtx_push(name): an nvtxRangePushA, passed to the
 *     subscriber's callback only while the NVTX domain is enabled.
 * cupti_host.c drives it.
 */
#include <cupti.h>
#include <generated_nvtx_meta.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_PENDING 4096

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static CUpti_CallbackFunc subscriber;
static void *subscriber_data;
static CUpti_BuffersCallbackRequestFunc requested;
static CUpti_BuffersCallbackCompleteFunc completed;
static int enabled[CUPTI_ACTIVITY_KIND_COUNT], nvtx_domain;
static uint64_t pending[MAX_PENDING];	/* kernel start times */
static int npending;
static uint32_t correlation;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* the library's calls not in CUPTI's headers, and what the host calls */
EXPORT CUptiResult cuptiNvtxInitialize(void *p);
EXPORT CUptiResult cuptiNvtxInitialize2(void *p);
EXPORT void fake_cupti_kernel(void);
EXPORT void fake_cupti_nvtx_push(const char *name);

static void log_line(const char *what, int a, int b)
{
	const char *path = getenv("FAKE_CUPTI_LOG");
	char line[64];
	int fd, n;

	if (!path || (fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0)
		return;
	n = b < 0 ? snprintf(line, sizeof(line), "%s %d\n", what, a) : snprintf(line, sizeof(line), "%s %d %d\n", what, a, b);
	if (write(fd, line, (size_t)n) != n)
		perror("fake_cupti: log");
	close(fd);
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char **s)
{
	*s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
	*ts = now_ns();
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *h, CUpti_CallbackFunc cb, void *ud)
{
	subscriber = cb;
	subscriber_data = ud;
	*h = (CUpti_SubscriberHandle)&subscriber;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle h)
{
	(void)h;
	subscriber = NULL;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableCallback(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d,
				       CUpti_CallbackId id)
{
	(void)on, (void)h, (void)d, (void)id;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiEnableDomain(uint32_t on, CUpti_SubscriberHandle h, CUpti_CallbackDomain d)
{
	(void)h;
	if (d != CUPTI_CB_DOMAIN_NVTX)
		return CUPTI_ERROR_INVALID_PARAMETER;
	__atomic_store_n(&nvtx_domain, (int)on, __ATOMIC_SEQ_CST);
	log_line("domain nvtx", (int)on, -1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType t)
{
	(void)t;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute a, size_t *size, void *value)
{
	(void)a, (void)size, (void)value;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc comp)
{
	requested = req;
	completed = comp;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&mu);
	enabled[kind] = 1;
	pthread_mutex_unlock(&mu);
	log_line("enable", (int)kind, -1);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	if ((int)kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&mu);
	enabled[kind] = 0;
	pthread_mutex_unlock(&mu);
	log_line("disable", (int)kind, -1);
	return CUPTI_SUCCESS;
}

/* The pending kernels in one buffer the library asked for, handed back complete. */
EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	uint8_t *buf = NULL;
	size_t size = 0, max = 0, valid = 0;
	int i, n;

	(void)flag;
	pthread_mutex_lock(&mu);
	n = npending;
	if (!n || !requested || !completed) {
		pthread_mutex_unlock(&mu);
		return CUPTI_SUCCESS;
	}
	requested(&buf, &size, &max);
	for (i = 0; buf && i < n && valid + sizeof(CUpti_ActivityKernel10) <= size; i++) {
		CUpti_ActivityKernel10 *k = (void *)(buf + valid);
		memset(k, 0, sizeof(*k));
		k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k->start = pending[i];
		k->end = pending[i] + 20000;
		k->streamId = 7;
		k->contextId = 1;
		k->correlationId = ++correlation;
		k->gridX = k->gridY = k->gridZ = 1;
		k->blockX = 128, k->blockY = k->blockZ = 1;
		k->name = "fake_kernel";
		valid += sizeof(*k);
	}
	npending = 0;
	pthread_mutex_unlock(&mu);
	if (buf)
		completed(NULL, 0, buf, size, valid);
	return CUPTI_SUCCESS;
}

/* Walks the fake buffers: kernel records only, back to back. */
EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, CUpti_Activity **rec)
{
	uint8_t *next = *rec ? (uint8_t *)*rec + sizeof(CUpti_ActivityKernel10) : buf;

	if (next + sizeof(CUpti_ActivityKernel10) > buf + valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*rec = (CUpti_Activity *)next;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t id, const char **name)
{
	(void)d, (void)id;
	*name = "cudaLaunchKernel";
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiNvtxInitialize(void *p)
{
	(void)p;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiNvtxInitialize2(void *p)
{
	(void)p;
	return CUPTI_SUCCESS;
}

/* ---- what the host drives ---- */

EXPORT void fake_cupti_kernel(void)
{
	pthread_mutex_lock(&mu);
	if (enabled[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && npending < MAX_PENDING)
		pending[npending++] = now_ns();
	pthread_mutex_unlock(&mu);
}

EXPORT void fake_cupti_nvtx_push(const char *name)
{
	nvtxRangePushA_params params = { .message = name };
	CUpti_NvtxData d = { .functionName = "nvtxRangePushA", .functionParams = &params };

	if (__atomic_load_n(&nvtx_domain, __ATOMIC_SEQ_CST) && subscriber)
		subscriber(subscriber_data, CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA, &d);
}
