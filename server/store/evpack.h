/*
 * evpack.h: a block of events as one compact byte string, for the store.
 *
 * Measured (1 GB trace, 5.4 M events, 2 cores): one SQLite row per event
 * made the writer a third of all ingest CPU and took about 52 bytes of
 * database per stored event; packed blocks of up to 16384 events took under
 * a tenth of the CPU and about 28 bytes per event (blocks are the ingest's
 * batches: 8192 events since 2026-11-27, 0.2 % more database). Nothing reads single
 * events with SQL: analysis runs in C over whole blocks, and a block's time
 * range lets a trace window skip the blocks outside it.
 *
 * Layout per event: ph, then varints (LEB128; signed values zigzag-encoded):
 * have, name, cat, flags (1 pid is a string id, 2 tid is, 4 arg present),
 * ts as the difference to the previous event's ts in the block, then each
 * present field in the order of enum tp_have; doubles as 8 raw bytes.
 */
#ifndef EVPACK_H
#define EVPACK_H

#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "memmodel.h"

/*
 * The integer fields after ts (every int64_t of struct tp_event but ts_ns, pid and tid), by their
 * enum tp_have bit: their offsetof in struct tp_event, 0 for a bit that names none (no integer
 * field is at offset 0). A block keeps those an event has; so does an overlap fingerprint.
 */
extern const uint16_t evpack_int_off[32];

/* Upper bound of the packed size of n events. */
size_t evpack_bound(size_t n);

/*
 * Pack n events into out (at least evpack_bound(n) bytes). Returns the
 * length. *min_ts and *max_end get the smallest ts and the largest ts + dur
 * (INT64_MAX / INT64_MIN when no event has a ts).
 */
size_t evpack_encode(uint8_t *out, const struct tp_event *ev, size_t n, int64_t *min_ts, int64_t *max_end);

/*
 * Unpack n events from data. String-valued pid/tid come back as ids
 * (pid_sid/tid_sid) with pid_s/tid_s NULL; the caller resolves them.
 * Returns 0, or -1 when data is malformed (never reads past len).
 */
int evpack_decode(const uint8_t *data, size_t len, size_t n, struct tp_event *out);
/*
 * The same, a few events at a time: a decoder of the n events packed in data (which it borrows),
 * and its next ones, at most max, into out: how many (0 once all n are given), or -1 when data is
 * malformed (then the decoder is left as it was).
 */
struct evpack_dec {
	const uint8_t *p, *end;
	int64_t prev;		/* the last ts given */
	size_t left;		/* events not given yet */
};
void evpack_dec_init(struct evpack_dec *d, const uint8_t *data, size_t len, size_t n);
long evpack_dec_next(struct evpack_dec *d, struct tp_event *out, size_t max);

/* An event's phase, fields present, ts and dur (0 without TH_DUR), as evpack_times gives them. */
struct evpack_time {
	int64_t ts_ns, dur_ns;
	uint32_t have;
	char ph;
};

/*
 * Of n packed events, those that have a ts, into out (n entries at most; their count in *m), in
 * order, with only what struct evpack_time holds read, the rest skipped, not decoded. Returns 0,
 * or -1 when data is malformed (never reads past len).
 */
int evpack_times(const uint8_t *data, size_t len, size_t n, struct evpack_time *out, size_t *m);

/*
 * Memory timeline points, packed the same way (memory_point_blocks: insert.c
 * writes them, memory.c reads them): per point, each of memmodel.h's MEM_POINT_COLS columns as the zigzag varint
 * of its difference to the previous point's (the first point's to 0), the
 * reserved column as 0 when unknown, else reserved + 1 (wrapping arithmetic:
 * any int64 comes back). Measured on the 1 GB trace's 700,250 points: one
 * SQLite row per point took 0.73 s of the upload's commit.
 */
size_t ptpack_bound(size_t n);
/* Pack n points (reserved_null[i]: row i's reserved is unknown) into out; the length. */
size_t ptpack_encode(uint8_t *out, const int64_t (*rows)[MEM_POINT_COLS], const uint8_t *reserved_null, size_t n);
/* Unpack n points; 0, or -1 when data is malformed (never reads past len) or has bytes left over. */
int ptpack_decode(const uint8_t *data, size_t len, size_t n, int64_t (*rows)[MEM_POINT_COLS], uint8_t *reserved_null);

#endif
