/*
 * convert.h: CUPTI activity records -> Chrome trace JSON in the form Kineto
 * writes (shared/reference/formats.md §1), so the server's one trace parser
 * (server/ingest/trace.c) reads the chunks the injection library spools.
 *
 * Pure apart from two read-only libcupti calls that need no GPU or driver
 * (cuptiActivityGetNextRecord, cuptiGetCallbackName): the tests feed it
 * synthetic buffers. State that spans buffers lives in struct cupti_conv:
 * NVTX ranges still open, live allocations (a free's size and the running
 * Total Allocated per device), context -> device, correlation -> thread,
 * the devices seen (deviceProperties), demangled kernel names.
 */
#ifndef CUPTI_CONVERT_H
#define CUPTI_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; oom is set (and appends stop) when memory runs out. */
struct cupti_out {
	char *data;
	size_t len, cap;
	uint64_t nevents;	/* events written into the current chunk */
	int oom;
};
void cupti_out_release(struct cupti_out *o);

/* Returns a malloc'd demangled name, or NULL to keep the raw one. */
typedef char *(*cupti_demangle_fn)(const char *mangled);

struct cupti_conv_config {
	int64_t base_ns;		/* baseTimeNanoseconds of every chunk; ts below it are clamped to it */
	const char *step_patterns;	/* fnmatch patterns, comma-separated; NULL: CUPTI_DEFAULT_STEP_PATTERNS */
	cupti_demangle_fn demangle;	/* may be NULL */
};
#define CUPTI_DEFAULT_STEP_PATTERNS "ProfilerStep#*,step*,Step*"

/* What a conversion skipped, for the chunk's metadata and the tests. */
struct cupti_conv_stats {
	uint64_t records;		/* records walked */
	uint64_t untimed;		/* GPU records without timestamps (start = 0) */
	uint64_t unmatched_ends;	/* NVTX range ends whose start was never seen */
	uint64_t other;			/* kinds not converted */
	uint64_t skipped_calls;		/* runtime calls left out as Kineto does (cudaGetDevice, ...) */
};

struct cupti_conv;

/* New converter (copies the config's strings); NULL when out of memory. */
struct cupti_conv *cupti_conv_new(const struct cupti_conv_config *cfg);
void cupti_conv_free(struct cupti_conv *c);
const struct cupti_conv_stats *cupti_conv_stats(const struct cupti_conv *c);

/* Starts a chunk in out (which is reset): the header and "traceEvents":[. */
void cupti_chunk_begin(struct cupti_conv *c, struct cupti_out *out);
/*
 * Appends the events of one activity buffer (valid bytes, as CUPTI handed
 * it over) to the chunk begun in out. Returns 0, or -1 when out of memory
 * (out->oom); a record CUPTI's walker rejects ends the buffer.
 */
int cupti_convert(struct cupti_conv *c, const uint8_t *buf, size_t valid, struct cupti_out *out);
/* Closes the chunk: "]", deviceProperties of the devices seen, "}". 0 or -1 (out of memory). */
int cupti_chunk_end(struct cupti_conv *c, struct cupti_out *out);

#endif
