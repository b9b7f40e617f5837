/*
 * cupti_host.c: a process without CUDA that loads the injection library the
 * way the driver and the NVTX loader do (dlopen, then InitializeInjection
 * and InitializeInjectionNvtx2), then exits normally so that the library's
 * atexit runs too. check_cupti.c checks its exit status and output.
 * Exit codes: 0 ran through; 2 cannot load the library; 3 a wrong return.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *lib;
	int (*init)(void);
	int (*nvtx2)(void *);

	if (argc != 2 || !(lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) {
		fprintf(stderr, "cupti_host: %s\n", argc == 2 ? dlerror() : "usage: cupti_host LIB");
		return 2;
	}
	*(void **)&init = dlsym(lib, "InitializeInjection");
	*(void **)&nvtx2 = dlsym(lib, "InitializeInjectionNvtx2");
	if (!init || !nvtx2 || init() != 1 || init() != 1)
		return 3;
	/* tracing is off here (no spool, or no GPU): NVTX is not taken over */
	if (nvtx2(NULL) != 0)
		return 3;
	return 0;
}
