/*
 * trace.h: streaming parser for Chrome trace JSON as written by PyTorch's
 * profiler (Kineto), every generation in shared/reference/formats.md.
 *
 * Bytes go in with trace_parser_feed() in pieces of any size; each complete
 * event comes out through the sink as a struct tp_event (event.h), in file order,
 * with its strings interned: a new string is announced through sink->string
 * before the first event that uses it. Memory stays bounded whatever the file
 * size: one event, the interned strings, and the top-level metadata.
 *
 * Timestamps are nanoseconds exactly as written (ts text in µs times 1000).
 * When the file has baseTimeNanoseconds (relative timestamps, PyTorch >= 2.4)
 * the caller adds it; it may come after traceEvents in the file, so it is
 * only known at trace_parser_finish().
 */
#ifndef TRACE_H
#define TRACE_H

#include <jansson.h>
#include <stdint.h>

#include "tp.h"
#include "event.h"

struct trace_sink {
	/* A new interned string; s is NUL-terminated and lives as long as the parser. */
	int (*string)(void *payload, uint32_t id, const char *s, size_t len);
	int (*event)(void *payload, const struct tp_event *ev);
	void *payload;
};

struct trace_limits {
	uint32_t max_depth;		/* JSON nesting */
	uint64_t max_token;		/* bytes in one string or between two quotes */
	uint64_t max_events;
	uint64_t max_strings_bytes;	/* all distinct interned strings together */
	uint64_t max_meta_bytes;	/* top-level metadata kept (beyond it, dropped) */
};
extern const struct trace_limits trace_default_limits;

struct trace_parser;

/* New parser; NULL on allocation failure. The sink is copied. */
struct trace_parser *trace_parser_new(const struct trace_limits *lim, const struct trace_sink *sink);
/*
 * Feed the next piece. Returns 0, or TP_ERR_INVALID (malformed JSON, not a
 * trace, wrong types), TP_ERR_TOOBIG (a limit), TP_ERR_NOMEM, or a negative
 * code a sink callback returned; err says what and at which byte.
 */
int trace_parser_feed(struct trace_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/* End of input: fails on a truncated document or a document that is no trace. */
int trace_parser_finish(struct trace_parser *p, struct tp_errbuf *err);

/* The interned string with this id (borrowed), or NULL. */
const char *trace_string(const struct trace_parser *p, uint32_t id);
/* Elements of traceEvents seen so far, stored or not. */
uint64_t trace_event_count(const struct trace_parser *p);
/* 1 and *out set when the file had baseTimeNanoseconds, else 0. */
int trace_base_ns(const struct trace_parser *p, int64_t *out);
/* Top-level keys other than traceEvents (borrowed; never NULL after new). */
json_t *trace_meta(const struct trace_parser *p);
void trace_parser_free(struct trace_parser *p);

#endif
