/*
 * fuzz_evpack.c: libFuzzer target for the event and memory point block
 * decoders, which read database bytes: arbitrary blocks must fail cleanly,
 * and blocks that decode must encode back to the same events or points
 * (and skim to the same times: evpack_times; and decode a few at a time to
 * the same events: evpack_dec_next).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/evpack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tp_event ev[64], back[64];
	struct evpack_time ts[64];
	size_t n, len, m, k = 0;
	uint8_t *buf;
	int64_t a, b;

	if (size < 1)
		return 0;
	if (data[0] & 0x80) {	/* memory points */
		int64_t rows[64][MEM_POINT_COLS], again[64][MEM_POINT_COLS];
		uint8_t nul[64], nul2[64], out[64 * MEM_POINT_COLS * 10];
		n = data[0] % 64 + 1;
		if (ptpack_decode(data + 1, size - 1, n, rows, nul))
			return 0;
		len = ptpack_encode(out, (const int64_t (*)[MEM_POINT_COLS])rows, nul, n);
		if (len > size - 1 || ptpack_decode(out, len, n, again, nul2) ||
		    memcmp(again, rows, n * sizeof(rows[0])) || memcmp(nul2, nul, n))
			abort();
		return 0;
	}
	n = data[0] % 64 + 1;
	if (evpack_decode(data + 1, size - 1, n, ev))
		return 0;
	/* a block that decodes gives the same times, phases, fields and durs skimmed */
	if (evpack_times(data + 1, size - 1, n, ts, &m))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((ev[i].have & TH_TS) && (k >= m || ts[k].ts_ns != ev[i].ts_ns || ts[k].dur_ns != ev[i].dur_ns ||
					     ts[k].have != ev[i].have || ts[k++].ph != ev[i].ph))
			abort();
	if (k != m)
		abort();
	/* and a few events at a time, the same events */
	{
		struct evpack_dec d;
		size_t at = 0, step = (size_t)data[0] % 5 + 1;
		long got;
		evpack_dec_init(&d, data + 1, size - 1, n);
		while ((got = evpack_dec_next(&d, back + at, step)) > 0)
			at += (size_t)got;
		if (got || at != n || memcmp(back, ev, n * sizeof(*ev)))
			abort();
	}
	for (size_t i = 0; i < n; i++) {
		/* the encoder takes string ids only with a string beside them */
		ev[i].pid_s = ev[i].pid_sid ? "" : NULL;
		ev[i].tid_s = ev[i].tid_sid ? "" : NULL;
	}
	buf = malloc(evpack_bound(n));
	len = evpack_encode(buf, ev, n, &a, &b);
	if (evpack_decode(buf, len, n, back) || memcmp(&back[n - 1].ts_ns, &ev[n - 1].ts_ns, 8))
		abort();
	free(buf);
	return 0;
}
