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

#endif
