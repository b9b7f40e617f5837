/*
 * canary.h: rlhf-canary's metrics.json (shared/fixtures/formats/FORMATS.md),
 * into a struct canary_metrics (canarymodel.h).
 *
 * The file is small (a few KB: pydantic's dump of one run's summary), so the
 * parser keeps the bytes, up to a cap, and reads them whole with jansson:
 * bounded memory, and every member checked for its type and range, an error
 * naming its path (perf.step_time.mean). Pure: no SQL.
 */
#ifndef CANARY_H
#define CANARY_H

#include <stddef.h>
#include <stdint.h>

#include "canarymodel.h"
#include "tp.h"

/*
 * Whether a JSON text is a canary metrics.json, from its first top-level
 * keys: 1 when one of the canary's own (run_id, duration_seconds, perf,
 * stability) comes before any key the canary never writes, 0 when not (a
 * Kineto trace's schemaVersion or traceEvents, an array, text), -1 when more
 * bytes are needed (never when at_end).
 */
int canary_detect(const uint8_t *p, size_t n, int at_end);

/* The most bytes taken: pydantic writes 2 to 20 KB (100 loss values, 20 ops). */
#define CANARY_MAX_BYTES (1u << 20)

struct canary_parser;

/* NULL when out of memory. */
struct canary_parser *canary_parser_new(size_t max_bytes);
/* TP_ERR_TOOBIG (canary_too_large) past max_bytes, TP_ERR_NOMEM. */
int canary_parser_feed(struct canary_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/* End of input: the metrics, borrowed until free; TP_ERR_INVALID (invalid_canary) naming what is wrong. */
int canary_parser_finish(struct canary_parser *p, const struct canary_metrics **out, struct tp_errbuf *err);
void canary_parser_free(struct canary_parser *p);

#endif
