/*
 * inflate.h: the first stage of every upload. Bytes go in as they arrive;
 * if they start with the gzip magic (1f 8b) they are inflated with zlib as a
 * stream (concatenated members too), otherwise passed through. Output is
 * handed to a sink in pieces of at most INFLATE_OUT_SIZE bytes.
 *
 * Caps, checked before memory is spent: max_out bytes of output in all, and
 * an output/input ratio of max_ratio once the output passes 16 MiB (zip bombs).
 */
#ifndef INFLATE_H
#define INFLATE_H

#include <stdint.h>
#include <zlib.h>

#include "tp.h"

#define INFLATE_OUT_SIZE (256 * 1024)

/* Returns 0 to go on, or a negative tp_err to stop (passed back to the caller). */
typedef int (*inflate_sink)(void *payload, const uint8_t *data, size_t len);

struct inflate_stage {
	z_stream zs;
	int state;		/* enum in inflate.c */
	uint8_t magic[2];
	int nmagic;
	int gzip;		/* the input started with the gzip magic */
	uint64_t in_total, out_total, max_out;
	uint32_t max_ratio;
	uint8_t *out;
	uint32_t crc, isize;	/* of the member being inflated (inflate.c checks its trailer) */
	uint8_t tail[8];	/* the last bytes inflate consumed */
	inflate_sink sink;
	void *payload;
};

int inflate_init(struct inflate_stage *st, uint64_t max_out, uint32_t max_ratio,
		 inflate_sink sink, void *payload);
/* Feed input. Errors: TP_ERR_INVALID (corrupt gzip), TP_ERR_TOOBIG, or the sink's. */
int inflate_feed(struct inflate_stage *st, const uint8_t *in, size_t len, struct tp_errbuf *err);
/* End of input: flushes, and fails with TP_ERR_INVALID on a truncated gzip stream. */
int inflate_finish(struct inflate_stage *st, struct tp_errbuf *err);
/* 1 when the input was gzip (known after the first two bytes). */
int inflate_is_gzip(const struct inflate_stage *st);
void inflate_release(struct inflate_stage *st);

#endif
