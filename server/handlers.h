/*
 * handlers.h: one handler file per resource (h_*.c); the route table in
 * routes.c is their only caller, and h_common.c what they share.
 */
#ifndef HANDLERS_H
#define HANDLERS_H

#include <jansson.h>
#include <stddef.h>

struct request;
struct store_reader;
struct tp_errbuf;

/* h_health.c */
int h_health_get(struct request *req);
int h_metrics_get(struct request *req);
/* GET /api/v1/openapi.yaml and /api/v1/api/{name} (its schemas): schemas/, compiled in */
int h_openapi_get(struct request *req);
int h_schema_get(struct request *req);

/* h_runs.c */
int h_runs_list(struct request *req);
int h_run_get(struct request *req);
int h_run_patch_begin(struct request *req);
int h_run_patch_end(struct request *req);
/* POST /api/v1/runs/{run}/metrics: begin, then h_body_data / h_body_cleanup */
int h_run_metrics_begin(struct request *req);
int h_run_metrics_end(struct request *req);
int h_run_metrics(struct request *req);
int h_run_delete(struct request *req);
int h_artifact_delete(struct request *req);

/* h_compare.c */
int h_compare(struct request *req);

/* h_analysis.c */
int h_run_steps(struct request *req);
int h_run_ops(struct request *req);
int h_run_kernels(struct request *req);
int h_run_ranks(struct request *req);
int h_run_diagnosis(struct request *req);
int h_run_distributed(struct request *req);
int h_run_critical_path(struct request *req);
int h_run_trace(struct request *req);

/* h_timeline.c */
int h_run_timeline(struct request *req);

/* h_memory.c */
int h_run_memory(struct request *req);
int h_run_memory_peak(struct request *req);
int h_run_memory_segments(struct request *req);
int h_run_actions(struct request *req);
int h_run_stacks(struct request *req);
int h_run_gpu(struct request *req);
int h_run_canary(struct request *req);

/* h_web.c: the dashboards' HTML shell and bundled assets */
int h_web_page(struct request *req);
int h_web_asset(struct request *req);
int h_web_docs(struct request *req);
int h_web_viewer(struct request *req);

/* h_artifacts.c */
int h_artifact_upload_begin(struct request *req);
int h_artifact_upload_data(struct request *req, const char *data, size_t len);
int h_artifact_upload_end(struct request *req);
void h_artifact_upload_cleanup(struct request *req, int completed);
int h_artifact_get(struct request *req);
int h_artifact_raw(struct request *req);

/* h_captures.c: on-demand captures; the two POSTs share the body reader (begin, data, cleanup) */
int h_capture_body_begin(struct request *req);
int h_capture_create_end(struct request *req);
int h_captures_list(struct request *req);
int h_capture_next(struct request *req);
int h_capture_get(struct request *req);
int h_capture_cancel(struct request *req);
int h_capture_rank_end(struct request *req);

/* h_common.c, what every handler may call (no handler calls another):
 * open a reader (answering the failure), and answer with body, closing r (NULL body: the
 * error in err; csv: body's member as CSV). */
int h_reader_open(struct request *req, struct store_reader **r);
int h_answer(struct request *req, json_t *body, struct store_reader *r, const struct tp_errbuf *err,
	     const char *member, int csv);
/* "cpu" or "cuda:N", N from 0 to 1023 without leading zeros. */
int h_valid_device(const char *d);
/* An integer query argument in [lo, hi], or def when absent. -1 on a bad value (answered). */
int h_arg_int(struct request *req, const char *name, long long lo, long long hi, long long def,
	      long long *out);
/*
 * A small request body read whole into req->state (struct h_body): h_body_begin with the most
 * the route takes (answers 503 when out of memory), h_body_data as a route's data callback (past
 * cap the rest is dropped and too_big set: the end answers 413), h_body_cleanup as its cleanup.
 * data is NUL-terminated (NULL when nothing came).
 */
struct h_body {
	char *data;
	size_t len, cap;
	int too_big;
};
int h_body_begin(struct request *req, size_t cap);
int h_body_data(struct request *req, const char *data, size_t len);
void h_body_cleanup(struct request *req, int completed);

#endif
