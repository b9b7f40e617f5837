/*
 * jtok_bench.c: how fast the trace parser's tokenizer (server/ingest/jtok.c)
 * reads a JSON file, against yajl's, which it replaced, on the same bytes in
 * the same run. Callbacks only count, so this is the tokenizers alone; both
 * are fed 256 KiB pieces, as the ingest pipeline feeds them. Best of 5.
 *
 *   build/bench/jtok_bench FILE [PIECE_BYTES]
 *
 * Prints one line; exits 1 if either refuses the file or they disagree on
 * what it holds (the count of tokens and of their bytes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <yajl/yajl_parse.h>

#include "ingest/jtok.h"

static unsigned long long ntok, nbytes;

static int c_plain(void *c) { (void)c; ntok++; return 1; }
static int c_bool(void *c, int v) { (void)c; (void)v; ntok++; return 1; }
static int c_num(void *c, const char *s, size_t l) { (void)c; (void)s; ntok++; nbytes += l; return 1; }
static int c_str(void *c, const unsigned char *s, size_t l) { (void)c; (void)s; ntok++; nbytes += l; return 1; }

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int run_yajl(const unsigned char *b, size_t n, size_t piece)
{
	static const yajl_callbacks cb = { c_plain, c_bool, NULL, NULL, c_num, c_str, c_plain, c_str,
					   c_plain, c_plain, c_plain };
	yajl_handle y = yajl_alloc(&cb, NULL, NULL);
	int ok = y != NULL;

	if (ok)
		yajl_config(y, yajl_dont_validate_strings, 1);	/* as trace.c had it */
	for (size_t o = 0; ok && o < n; o += piece)
		ok = yajl_parse(y, b + o, n - o < piece ? n - o : piece) == yajl_status_ok;
	ok = ok && yajl_complete_parse(y) == yajl_status_ok;
	if (y)
		yajl_free(y);
	return ok;
}

static int run_jtok(const unsigned char *b, size_t n, size_t piece)
{
	static const struct jtok_callbacks cb = { c_plain, c_bool, c_num, c_str, c_plain, c_str, c_plain,
						  c_plain, c_plain };
	struct jtok *t = jtok_new(&cb, NULL, 8u << 20, 64);
	int ok = t != NULL;

	for (size_t o = 0; ok && o < n; o += piece)
		ok = jtok_feed(t, b + o, n - o < piece ? n - o : piece) == JTOK_OK;
	ok = ok && jtok_finish(t) == JTOK_OK;
	jtok_free(t);
	return ok;
}

int main(int argc, char **argv)
{
	FILE *f;
	unsigned char *b;
	long sz;
	size_t piece = argc > 2 ? (size_t)atol(argv[2]) : 256u << 10;
	double best[2] = { 1e9, 1e9 };
	unsigned long long tok[2], bytes[2];

	if (argc < 2 || !piece || !(f = fopen(argv[1], "rb"))) {
		fprintf(stderr, "usage: jtok_bench FILE [PIECE_BYTES]\n");
		return 2;
	}
	if (fseek(f, 0, SEEK_END) || (sz = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET) ||
	    !(b = malloc((size_t)sz)) || fread(b, 1, (size_t)sz, f) != (size_t)sz) {
		fprintf(stderr, "jtok_bench: cannot read %s\n", argv[1]);
		return 2;
	}
	fclose(f);
	for (int rep = 0; rep < 5; rep++) {
		for (int k = 0; k < 2; k++) {
			double t0 = now();
			ntok = nbytes = 0;
			if (!(k ? run_jtok(b, (size_t)sz, piece) : run_yajl(b, (size_t)sz, piece))) {
				fprintf(stderr, "jtok_bench: %s refused the file\n", k ? "jtok" : "yajl");
				return 1;
			}
			double t = now() - t0;
			if (t < best[k])
				best[k] = t;
			tok[k] = ntok;
			bytes[k] = nbytes;
		}
	}
	if (tok[0] != tok[1] || bytes[0] != bytes[1]) {
		fprintf(stderr, "jtok_bench: they disagree: %llu tokens (%llu bytes) vs %llu (%llu)\n", tok[0],
			bytes[0], tok[1], bytes[1]);
		return 1;
	}
	printf("jtok_bench: %.1f MB in pieces of %zu, %llu tokens: yajl %.3f s (%.0f MB/s), jtok %.3f s "
	       "(%.0f MB/s), %.2fx\n", (double)sz / 1e6, piece, tok[1], best[0], (double)sz / 1e6 / best[0],
	       best[1], (double)sz / 1e6 / best[1], best[0] / best[1]);
	free(b);
	return 0;
}
