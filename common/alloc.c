/*
 * alloc.c: the allocation hooks (see alloc.h). The countdown is one atomic
 * counter shared by all threads; when it is off (the normal case) the cost
 * is one relaxed load per allocation.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "alloc.h"

static atomic_long countdown = -1;	/* allocations left before failures start; -1 off */
static atomic_long failures;

static int refuse(void)
{
	long left = atomic_load_explicit(&countdown, memory_order_relaxed);

	if (left < 0)
		return 0;
	if (left == 0 || atomic_fetch_sub(&countdown, 1) <= 0) {
		atomic_store(&countdown, 0);
		atomic_fetch_add(&failures, 1);
		return 1;
	}
	return 0;
}

void *tp_malloc(size_t n)
{
	return refuse() ? NULL : malloc(n ? n : 1);
}

void *tp_calloc(size_t count, size_t n)
{
	return refuse() ? NULL : calloc(count ? count : 1, n ? n : 1);
}

void *tp_realloc(void *p, size_t n)
{
	return refuse() ? NULL : realloc(p, n ? n : 1);
}

void tp_free(void *p)
{
	free(p);
}

void tp_prefault(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	long n = sysconf(_SC_PAGESIZE);	/* from the auxiliary vector: no system call */
	uintptr_t page = n > 0 ? (uintptr_t)n : 4096, a, b;

	a = ((uintptr_t)p + page - 1) & ~(page - 1);
	b = ((uintptr_t)p + len) & ~(page - 1);
	if (p && b > a)
		(void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)len;
#endif
}

void *tp_map(size_t n)
{
	size_t len = (n + TP_HUGE_PAGE - 1) & ~(TP_HUGE_PAGE - 1);
	uint8_t *m, *a;

	if (!n || len < n || refuse())
		return NULL;
	/* a huge page's worth more, to align in; what lies outside [a, a + len) is unmapped */
	m = mmap(NULL, len + TP_HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	a = (uint8_t *)(((uintptr_t)m + TP_HUGE_PAGE - 1) & ~(uintptr_t)(TP_HUGE_PAGE - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	munmap(a + len, (size_t)(m + TP_HUGE_PAGE - a));
#ifdef MADV_HUGEPAGE
	(void)madvise(a, len, MADV_HUGEPAGE);
#endif
	return a;
}

void tp_unmap(void *p, size_t n)
{
	if (p)
		munmap(p, (n + TP_HUGE_PAGE - 1) & ~(TP_HUGE_PAGE - 1));
}

int tp_grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t c = *cap ? *cap : 64, bytes;
	void *np;

	if (need <= *cap)
		return 0;
	while (c < need)
		if (__builtin_mul_overflow(c, 2, &c))
			return -1;
	if (__builtin_mul_overflow(c, size, &bytes) || !(np = tp_realloc(*p, bytes)))
		return -1;
	*p = np;
	*cap = c;
	return 0;
}

char *tp_strdup(const char *s)
{
	return tp_strndup(s, strlen(s));
}

char *tp_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = tp_malloc(len + 1);

	if (d) {
		memcpy(d, s, len);
		d[len] = 0;
	}
	return d;
}

void *tp_zalloc(void *opaque, unsigned items, unsigned size)
{
	(void)opaque;
	return tp_calloc(items, size);
}

void tp_zfree(void *opaque, void *p)
{
	(void)opaque;
	free(p);
}

void tp_alloc_fail_after(long n)
{
	atomic_store(&failures, 0);
	atomic_store(&countdown, n < 0 ? -1 : n);
}

long tp_alloc_failures(void)
{
	return atomic_load(&failures);
}

static void install(void)
{
	json_set_alloc_funcs(tp_malloc, tp_free);
}

void tp_alloc_install(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, install);
}
