/*
 * ingest.h: one upload, from its first byte to a ready (or failed) artifact.
 *
 *   caller's thread: bytes -> sha256, body cap, raw copy --------> writer thread
 *                          -> inflate (gzip by magic) -> parser thread: detect
 *                             kind, parse, batches of events ------^
 *
 * The caller (the HTTP handler, a test, a tool) feeds bytes as they arrive;
 * a parser thread and a writer thread (with a private database connection)
 * take them through bounded channels, so memory stays flat whatever the
 * upload size (ingest.c says how). The raw bytes go to the store with the
 * events, so a body that fails to parse is still kept.
 */
#ifndef INGEST_H
#define INGEST_H

#include <stdint.h>

#include "ingest/trace.h"
#include "store/store.h"
#include "tp.h"

struct ingest_limits {
	uint64_t max_body;		/* bytes as sent */
	uint64_t max_inflated;		/* bytes after gunzip */
	uint32_t max_ratio;		/* inflated/sent, checked past 16 MiB */
	uint64_t max_pickle_values;	/* values in a snapshot pickle (each costs ~24-100 bytes) */
	struct trace_limits trace;
};
extern const struct ingest_limits ingest_default_limits;

struct overlap_cache;

struct ingest_request {
	const char *run;
	int rank;			/* -1: from the trace's distributedInfo, else 0 */
	const char *name;
	const char *kind;		/* NULL or "": detect */
	const char *device;		/* memory timeline exports: "cuda:N" or "cpu" (NULL: cuda:0) */
	int content_gzip;		/* sent with Content-Encoding: gzip: the file is what the gzip holds */
	uint64_t length;		/* the body's bytes when told (Content-Length), else 0 */
	struct overlap_cache *overlaps;	/* the server's (runrank_overlaps; NULL: none): a trace's events are
					 * fingerprinted as they are parsed, for its overlap check (overlap.h) */
};

struct overlap_prints;

/* What came of an upload. */
struct ingest_result {
	int64_t artifact;		/* the artifact that holds these bytes (0 if none) */
	int duplicate;			/* the same bytes were already there: artifact is the earlier one */
	int rc;				/* TP_OK, or why the upload failed */
	struct tp_errbuf err;		/* when rc != TP_OK */
	int kept;			/* the raw bytes were kept as an 'error' artifact */
	int rank_pending;		/* a trace that joined its rank: derived at the run's next read (runrank.h) */
	int rank;			/* that rank */
	/* a new trace's fingerprints, for the next uploads of its rank: overlap_prints_done() them
	 * once the answer is sent (pipeline/overlap.h; NULL: none) */
	struct overlap_prints *keep;
};

struct ingest;

/* Begin an upload: creates the run if needed and an 'ingesting' artifact. */
int ingest_begin(struct store *st, const struct ingest_limits *lim, const struct ingest_request *req,
		 struct ingest **out, struct tp_errbuf *err);
/*
 * The next bytes of the body. Returns TP_OK or TP_ERR_TOOBIG (max_body passed):
 * then the caller stops feeding and calls ingest_abort(). A parse error does
 * not stop the feed (the rest of the raw bytes must still be kept); it is
 * reported by ingest_end().
 */
int ingest_feed(struct ingest *ig, const void *data, size_t len);
/* End of body: finishes the artifact and fills *res. Frees ig. */
void ingest_end(struct ingest *ig, struct ingest_result *res);
/* The upload is refused or the client went away: nothing of it is kept. Frees ig. */
void ingest_abort(struct ingest *ig);
/* Frees the buffers and ends the threads kept for the next uploads (at exit, so that leak checkers see none). */
void ingest_pool_drain(void);

/* Whether kind names one of the formats taken (pipeline/formats.c's table). */
int ingest_kind_known(const char *kind);
/* Their names as a message lists them: "trace, memory_snapshot, ... or canary_metrics". */
void ingest_kind_names(char *buf, size_t size);

/* Whole-buffer convenience for tests and tools. */
void ingest_buffer(struct store *st, const struct ingest_limits *lim, const struct ingest_request *req,
		   const void *data, size_t len, struct ingest_result *res);

#endif
