/*
 * cupti_host.c: a process without CUDA that loads the injection library the
 * way the driver and the NVTX loader do (dlopen, then InitializeInjection
 * and InitializeInjectionNvtx2), then exits normally so that the library's
 * atexit runs too. check_cupti.c checks its exit status and output.
 *
 *   cupti_host LIB                  tracing is off (no spool, or no GPU)
 *   cupti_host LIB FAKE CMD...      the fake libcupti (fake_cupti.c) loaded
 *                                   first, so LIB binds to it; then CMDs:
 *     step:NAME   an NVTX range push named NAME
 *     kernel      a kernel ran
 *     sleep:MS    sleep MS milliseconds
 *     wait:PATH   wait (10 s at most) until PATH exists
 *     gone:PATH   wait (10 s at most) until PATH no longer exists
 *     capture:LINE  write LINE to $TRAINSCOPE_SPOOL/.capture as the collector does
 *     steps:N:MS  N steps: a range push "ProfilerStep#k", a kernel, MS ms of sleep
 *                 (a training loop for bench/capture_idle.py)
 * Exit codes: 0 ran through; 2 cannot load a library; 3 a wrong return;
 * 4 a wait timed out; 5 a bad CMD.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Until PATH exists (want 1) or not (want 0), 10 s at most: 0, or -1. */
static int wait_for(const char *path, int want)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if ((access(path, F_OK) == 0) == want)
			return 0;
		sleep_ms(10);
	}
	return -1;
}

int main(int argc, char **argv)
{
	void *lib, *fake = NULL;
	int (*init)(void);
	int (*nvtx2)(void *);
	void (*kernel)(void) = NULL;
	void (*push)(const char *) = NULL;
	int i;

	if (argc < 2 || argc == 3) {
		fprintf(stderr, "cupti_host: usage: cupti_host LIB [FAKE_CUPTI CMD...]\n");
		return 2;
	}
	/* loaded first and global: LIB's libcupti.so.13 is this one (same SONAME) */
	if (argc > 3 && !(fake = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL))) {
		fprintf(stderr, "cupti_host: %s\n", dlerror());
		return 2;
	}
	if (!(lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "cupti_host: %s\n", dlerror());
		return 2;
	}
	*(void **)&init = dlsym(lib, "InitializeInjection");
	*(void **)&nvtx2 = dlsym(lib, "InitializeInjectionNvtx2");
	if (!init || !nvtx2 || init() != 1 || init() != 1)
		return 3;
	if (!fake)
		/* tracing is off here (no spool, or no GPU): NVTX is not taken over */
		return nvtx2(NULL) != 0 ? 3 : 0;
	*(void **)&kernel = dlsym(fake, "fake_cupti_kernel");
	*(void **)&push = dlsym(fake, "fake_cupti_nvtx_push");
	if (!kernel || !push)
		return 2;
	/* tracing is on against the fake: NVTX is taken over (0 when the library disabled itself) */
	fprintf(stderr, "cupti_host: NVTX %s\n", nvtx2(NULL) ? "taken over" : "not taken over");
	for (i = 3; i < argc; i++) {
		const char *a = argv[i];
		if (!strncmp(a, "step:", 5))
			push(a + 5);
		else if (!strcmp(a, "kernel"))
			kernel();
		else if (!strncmp(a, "sleep:", 6))
			sleep_ms(atol(a + 6));
		else if (!strncmp(a, "wait:", 5) || !strncmp(a, "gone:", 5)) {
			if (wait_for(a + 5, a[0] == 'w')) {
				fprintf(stderr, "cupti_host: %s: timed out\n", a);
				return 4;
			}
		} else if (!strncmp(a, "steps:", 6)) {
			long n = atol(a + 6), ms = strchr(a + 6, ':') ? atol(strchr(a + 6, ':') + 1) : 0, k;
			char name[48];
			for (k = 0; k < n; k++) {
				snprintf(name, sizeof(name), "ProfilerStep#%ld", k);
				push(name);
				kernel();
				sleep_ms(ms);
			}
		} else if (!strncmp(a, "capture:", 8)) {
			char tmp[4096], final[4096];
			FILE *f;
			snprintf(tmp, sizeof(tmp), "%s/.capture.tmp", getenv("TRAINSCOPE_SPOOL"));
			snprintf(final, sizeof(final), "%s/.capture", getenv("TRAINSCOPE_SPOOL"));
			if (!(f = fopen(tmp, "w")) || fprintf(f, "%s\n", a + 8) < 0 || fclose(f) || rename(tmp, final))
				return 5;
		} else {
			fprintf(stderr, "cupti_host: unknown command %s\n", a);
			return 5;
		}
	}
	return 0;
}
