/*
 * reads.h: GET answers made of one store read and its shaping (answer.h), for
 * the handlers and for tests that read a store without a server. New
 * reference, or NULL with err set.
 */
#ifndef READS_H
#define READS_H

#include <jansson.h>
#include <stdint.h>

#include "store/store.h"
#include "tp.h"

/* GET /runs */
json_t *read_runs(struct store_reader *r, struct tp_errbuf *err);
/* GET /runs/{run} */
json_t *read_run(struct store_reader *r, const char *run, struct tp_errbuf *err);
/* GET /runs/{run}/artifacts/{id} */
json_t *read_artifact(struct store_reader *r, const char *run, int64_t id, struct tp_errbuf *err);

/* GET /runs/{run}/steps (rank -1: the run's lowest with data) */
json_t *read_steps(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);

/* GET /runs/{run}/ops and /kernels */
json_t *read_ops(struct store_reader *r, const char *run, int rank, int device, const char *sort, long limit,
		 struct tp_errbuf *err);
json_t *read_kernels(struct store_reader *r, const char *run, int rank, int kind, long limit, struct tp_errbuf *err);

/* GET /runs/{run}/ranks */
json_t *read_ranks(struct store_reader *r, const char *run, struct tp_errbuf *err);

/* GET /runs/{run}/metrics (name NULL: every name) and /stacks */
json_t *read_metrics(struct store_reader *r, const char *run, const char *name, struct tp_errbuf *err);
json_t *read_stacks(struct store_reader *r, const char *run, int rank, int top, struct tp_errbuf *err);

/* GET /runs/{run}/actions */
json_t *read_actions(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);

/* GET /runs/{run}/canary */
json_t *read_canary(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);

/* GET /runs/{run}/gpu, less its "steps" (h_memory.c puts them on the log's clock) */
json_t *read_gpu(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err);

/* GET /runs/{run}/memory/segments */
json_t *read_segments(struct store_reader *r, const char *run, int rank, const char *device, int64_t artifact,
		      struct tp_errbuf *err);

/*
 * GET /runs/{run}/memory (memread.c): the rank's series on device (NULL: as store_mem_series picks), at
 * most points points (0: all), the window [start_ns, end_ns] (INT64_MIN/INT64_MAX: none); a trace's gaps
 * are cycle_gaps ([start, end) pairs between the rank's profiling cycles, runline.h).
 */
json_t *read_memory(struct store_reader *r, const char *run, int rank, const char *device, long points,
		    int64_t start_ns, int64_t end_ns, const int64_t *cycle_gaps, size_t ncycle_gaps,
		    struct tp_errbuf *err);
/* GET /runs/{run}/memory/peak: what was alive at the series' peak. */
json_t *read_memory_peak(struct store_reader *r, const char *run, int rank, const char *device,
			 struct tp_errbuf *err);
/*
 * GET /runs/{run}/memory?points=0: every point of read_memory's series, as JSON
 * text made while it is sent (a JSON tree of a million points was 486 MB for
 * one read, an array of them 88 MB): the same members, no point held; the
 * points are read again for each column, in one read snapshot of r. r is the
 * stream's, whatever the result: mem_text_free (or the failure) closes it.
 * mem_text_read fills buf, 0 at the end; then mem_text_failed says whether the
 * end was a failure (the database), the text cut short.
 */
struct mem_text;
int read_memory_text(struct store_reader *r, const char *run, int rank, const char *device, int64_t start_ns,
		     int64_t end_ns, const int64_t *cycle_gaps, size_t ncycle_gaps, struct mem_text **out,
		     struct tp_errbuf *err);
size_t mem_text_read(struct mem_text *m, char *buf, size_t max);
int mem_text_failed(const struct mem_text *m);
void mem_text_free(struct mem_text *m);

#endif
