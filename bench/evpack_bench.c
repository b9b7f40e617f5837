/*
 * evpack_bench.c: what the event block codec (server/store/evpack.c) costs
 * an event, without the server. Parses FILE (a trace, not gzipped) with the
 * trace parser, packs its events in blocks of 8,192 as the upload's writer
 * does, then ROUNDS times decodes every block (as a rank's replay reads
 * them: evpack_dec_next, 4,096 at a time) and encodes every block again,
 * timing each.
 *
 *   build-release/bench/evpack_bench FILE [ROUNDS]
 *
 * Prints the events and blocks, then the median ns an event of decoding and
 * of encoding. Exits 1 when the trace does not parse, or when a block does
 * not decode, or decodes to events that do not encode back to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ingest/trace.h"
#include "store/evpack.h"

#define BLOCK 8192	/* pipeline/ingest.c: BATCH_EVENTS */
#define SLICE 4096	/* store/trace.c: TRACE_SLICE */

struct blocks {
	struct tp_event *ev;	/* the events, as parsed */
	size_t n, cap;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int no_string(void *p, uint32_t id, const char *str, size_t len)
{
	(void)p, (void)id, (void)str, (void)len;
	return 0;
}

static int keep(void *p, const struct tp_event *e)
{
	struct blocks *b = p;

	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 1 << 16;
		struct tp_event *ev = realloc(b->ev, cap * sizeof(*ev));
		if (!ev)
			return -1;
		b->ev = ev;
		b->cap = cap;
	}
	b->ev[b->n] = *e;
	b->ev[b->n].pid_s = b->ev[b->n].tid_s = NULL;	/* the parser's, gone after the event */
	b->n++;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct blocks b = { 0 };
	struct trace_sink sink = { .string = no_string, .event = keep, .payload = &b };
	struct tp_errbuf err = { 0 };
	static unsigned char buf[1 << 20];
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	struct trace_parser *tp;
	struct tp_event *out;
	uint8_t **blk, *again;
	size_t *len, nblk, n;
	double *dec, *enc;
	FILE *in;

	if (argc < 2 || rounds < 1) {
		fprintf(stderr, "usage: evpack_bench FILE [ROUNDS]\n");
		return 2;
	}
	if (!(in = fopen(argv[1], "rb"))) {
		perror(argv[1]);
		return 1;
	}
	if (!(tp = trace_parser_new(&trace_default_limits, &sink))) {
		fprintf(stderr, "evpack_bench: out of memory\n");
		return 1;
	}
	while ((n = fread(buf, 1, sizeof(buf), in)))
		if (trace_parser_feed(tp, buf, n, &err)) {
			fprintf(stderr, "evpack_bench: %s\n", err.msg);
			return 1;
		}
	fclose(in);
	if (trace_parser_finish(tp, &err)) {
		fprintf(stderr, "evpack_bench: %s\n", err.msg);
		return 1;
	}
	trace_parser_free(tp);
	nblk = (b.n + BLOCK - 1) / BLOCK;
	blk = calloc(nblk + 1, sizeof(*blk));
	len = calloc(nblk + 1, sizeof(*len));
	out = malloc(SLICE * sizeof(*out));
	again = malloc(evpack_bound(BLOCK));
	dec = calloc((size_t)rounds, sizeof(*dec));
	enc = calloc((size_t)rounds, sizeof(*enc));
	if (!blk || !len || !out || !again || !dec || !enc) {
		fprintf(stderr, "evpack_bench: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < nblk; i++) {
		size_t k = i + 1 < nblk ? BLOCK : b.n - i * BLOCK;
		int64_t lo, hi;
		if (!(blk[i] = malloc(evpack_bound(k)))) {
			fprintf(stderr, "evpack_bench: out of memory\n");
			return 1;
		}
		len[i] = evpack_encode(blk[i], b.ev + i * BLOCK, k, &lo, &hi);
	}
	printf("%zu events in %zu blocks\n", b.n, nblk);
	/* each block decodes to events that encode back to its bytes */
	struct tp_event *all = malloc(BLOCK * sizeof(*all));
	if (!all) {
		fprintf(stderr, "evpack_bench: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < nblk; i++) {
		size_t k = i + 1 < nblk ? BLOCK : b.n - i * BLOCK;
		int64_t lo, hi;
		if (evpack_decode(blk[i], len[i], k, all) || evpack_encode(again, all, k, &lo, &hi) != len[i] ||
		    memcmp(again, blk[i], len[i])) {
			fprintf(stderr, "evpack_bench: block %zu does not decode to its events\n", i);
			return 1;
		}
	}
	free(all);
	for (int r = 0; r < rounds; r++) {
		double t0 = now();
		for (size_t i = 0; i < nblk; i++) {
			size_t k = i + 1 < nblk ? BLOCK : b.n - i * BLOCK, got = 0;
			struct evpack_dec d;
			long m;
			evpack_dec_init(&d, blk[i], len[i], k);
			while ((m = evpack_dec_next(&d, out, SLICE)) > 0)
				got += (size_t)m;
			if (m < 0 || got != k) {
				fprintf(stderr, "evpack_bench: block %zu does not decode\n", i);
				return 1;
			}
		}
		dec[r] = now() - t0;
		t0 = now();
		for (size_t i = 0; i < nblk; i++) {
			size_t k = i + 1 < nblk ? BLOCK : b.n - i * BLOCK;
			int64_t lo, hi;
			if (evpack_encode(again, b.ev + i * BLOCK, k, &lo, &hi) != len[i] || memcmp(again, blk[i], len[i])) {
				fprintf(stderr, "evpack_bench: block %zu encodes to other bytes\n", i);
				return 1;
			}
		}
		enc[r] = now() - t0;
	}
	qsort(dec, (size_t)rounds, sizeof(*dec), cmp_double);
	qsort(enc, (size_t)rounds, sizeof(*enc), cmp_double);
	printf("decode: median %.1f ns an event (%.2f ms a pass)\n", dec[rounds / 2] * 1e9 / (double)b.n,
	       dec[rounds / 2] * 1e3);
	printf("encode: median %.1f ns an event (%.2f ms a pass), %d rounds\n", enc[rounds / 2] * 1e9 / (double)b.n,
	       enc[rounds / 2] * 1e3, rounds);
	for (size_t i = 0; i < nblk; i++)
		free(blk[i]);
	free(blk);
	free(len);
	free(out);
	free(again);
	free(dec);
	free(enc);
	free(b.ev);
	return 0;
}
