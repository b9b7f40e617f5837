/*
 * metrics.h: process counters for GET /metrics (Prometheus text format,
 * version 0.0.4). Counting is lock-free (atomics); rendering reads the
 * counters and asks the store for what it holds.
 */
#ifndef METRICS_H
#define METRICS_H

#include <stdint.h>

struct store;
struct route_table;

/* One finished request: its route (index into the server's route table, -1 when none matched) and status. */
void metrics_request(int route, unsigned status);
void metrics_upload(uint64_t bytes_sent, double seconds);
/* The heap given back to the system (malloc_trim: http.c). */
void metrics_trim(void);
/* A rank derived again from its traces (pipeline/runrank.h), in seconds. */
void metrics_derivation(double seconds);
/* A derivation's trace artifacts: those it replayed, those it took from the rank's analysis kept. */
void metrics_replay(uint64_t artifacts_replayed, uint64_t artifacts_kept);

/* A rank's part closed (pipeline/runrank.c), cut inside its traces, or not (uncut: no instant was
 * found; crossed: the two parts did not meet), or (rebuilt) a rank derived as one analysis: its parts
 * did not meet. */
enum metrics_part { METRICS_PART_CLOSED, METRICS_PART_CUT, METRICS_PART_UNCUT, METRICS_PART_CROSSED, METRICS_PART_REBUILT,
		    METRICS_PART_KINDS };
void metrics_part(enum metrics_part how);
/* A rank in parts derived: its memory model went on from the parts before, or was made from all. */
void metrics_memory_model(int went_on);
/* A derivation's memory point blocks: found as stored, written, known stored and not read. */
void metrics_point_blocks(int64_t kept, int64_t written, int64_t unread);
/* A derivation's collectives' rows: left as the write before stored them, written. */
void metrics_coll_rows(int64_t kept, int64_t written);

/* The exposition text (malloc'd, caller frees with tp_free), or NULL when out of memory;
 * requests are labelled by routes, the table their indexes are into (NULL: all unmatched). */
char *metrics_render(struct store *st, const struct route_table *routes);

#endif
