/*
 * finish_bench.c: what a derivation's passes cost on one trace, without the
 * server (issue 15: a kept rank's derivation is a fork of its analysis,
 * finished: server/pipeline/runrank.c). Parses FILE into one analysis, as
 * the rank's replay does, holding what it has spilled every CHUNK_MB MiB of
 * the file (a run of its records per chunk, as the kept rank of a run of
 * chunks has them), then forks it and finishes the fork ROUNDS times, timing
 * each finish; the fork shares the spilled runs, as the server's does.
 *
 *   build-release/bench/finish_bench FILE [ROUNDS [CHUNK_MB]]
 *
 * Prints the parse time and each finish's (wall), then the median and the
 * minimum. Exits 1 when the trace does not parse or a finish fails, or when
 * the forks disagree on the steps, operators or kernels they found.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "analysis/analysis.h"
#include "ingest/trace.h"

struct feed {
	struct trace_parser *tp;
	struct analysis *an;
	struct tp_errbuf err;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *str_of(void *p, uint32_t id)
{
	const char *s = trace_string(p, id);

	return s ? s : "";
}

static int no_string(void *p, uint32_t id, const char *str, size_t len)
{
	(void)p, (void)id, (void)str, (void)len;
	return 0;
}

static int to_analysis(void *p, const struct tp_event *e)
{
	struct feed *f = p;

	return analysis_event(f->an, e, &f->err);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct feed f = { 0 };
	struct trace_sink sink = { .string = no_string, .event = to_analysis, .payload = &f };
	static unsigned char buf[1 << 20];
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	size_t chunk = (argc > 3 ? (size_t)atoi(argv[3]) : 4) << 20, fed = 0;
	size_t nsteps = 0, nops = 0, nkernels = 0;
	double t0, *times;
	FILE *in;
	size_t n;

	if (argc < 2 || rounds < 1 || !chunk || !(times = calloc((size_t)rounds, sizeof(*times)))) {
		fprintf(stderr, "usage: finish_bench FILE [ROUNDS]\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!(in = fopen(argv[1], "rb"))) {
		perror(argv[1]);
		return 1;
	}
	f.tp = trace_parser_new(&trace_default_limits, &sink);
	f.an = f.tp ? analysis_new(str_of, f.tp) : NULL;
	if (!f.an) {
		fprintf(stderr, "finish_bench: out of memory\n");
		return 1;
	}
	t0 = now();
	while ((n = fread(buf, 1, sizeof(buf), in))) {
		if (trace_parser_feed(f.tp, buf, n, &f.err)) {
			fprintf(stderr, "finish_bench: %s\n", f.err.msg);
			return 1;
		}
		if ((fed += n) >= chunk && analysis_hold(f.an, 1u << 20, &f.err)) {
			fprintf(stderr, "finish_bench: %s\n", f.err.msg);
			return 1;
		}
		fed %= chunk;
	}
	fclose(in);
	if (trace_parser_finish(f.tp, &f.err)) {
		fprintf(stderr, "finish_bench: %s\n", f.err.msg);
		return 1;
	}
	printf("parse %.3f s\n", now() - t0);
	for (int i = 0; i < rounds; i++) {
		struct tp_errbuf err = { 0 };
		const struct an_result *res;
		struct analysis *fk = analysis_fork(f.an, NULL, &err);

		t0 = now();
		if (!fk || analysis_finish(fk, &res, &err)) {
			fprintf(stderr, "finish_bench: %s\n", err.msg);
			return 1;
		}
		times[i] = now() - t0;
		if (i && (res->nsteps != nsteps || res->nops != nops || res->nkernels != nkernels)) {
			fprintf(stderr, "finish_bench: fork %d found %zu steps, %zu ops, %zu kernels, not %zu, %zu, %zu\n",
				i, res->nsteps, res->nops, res->nkernels, nsteps, nops, nkernels);
			return 1;
		}
		nsteps = res->nsteps, nops = res->nops, nkernels = res->nkernels;
		printf("finish %d: %.3f s (%zu steps, %zu operators, %zu kernels)\n", i, times[i], nsteps, nops,
		       nkernels);
		analysis_free(fk);
	}
	qsort(times, (size_t)rounds, sizeof(*times), cmp_double);
	printf("finish: median %.3f s, min %.3f s, %d rounds\n", times[rounds / 2], times[0], rounds);
	analysis_free(f.an);
	trace_parser_free(f.tp);
	free(times);
	return 0;
}
