/*
 * routes.c: the server's route table (see routes.h); router.c matches
 * requests against it. main.c hands it to server_start.
 */
#include <stddef.h>

#include "handlers.h"
#include "routes.h"

static const struct route routes[] = {
	{ "GET", "/healthz", ROUTE_OPEN, h_health_get, NULL, NULL, NULL },
	{ "GET", "/metrics", 0, h_metrics_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/openapi.yaml", ROUTE_OPEN, h_openapi_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/api/{name}", ROUTE_OPEN, h_schema_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs", ROUTE_CACHE, h_runs_list, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}", ROUTE_CACHE, h_run_get, NULL, NULL, NULL },
	{ "PATCH", "/api/v1/runs/{run}", ROUTE_WRITE | ROUTE_BODY, h_run_patch_begin, h_body_data,
	  h_run_patch_end, h_body_cleanup },
	{ "DELETE", "/api/v1/runs/{run}", ROUTE_WRITE, h_run_delete, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/metrics", ROUTE_CACHE, h_run_metrics, NULL, NULL, NULL },
	{ "POST", "/api/v1/runs/{run}/metrics", ROUTE_WRITE | ROUTE_BODY, h_run_metrics_begin, h_body_data,
	  h_run_metrics_end, h_body_cleanup },
	{ "GET", "/api/v1/compare", ROUTE_CACHE | ROUTE_DERIVED, h_compare, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/steps", ROUTE_CACHE | ROUTE_DERIVED | ROUTE_CSV, h_run_steps, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/ops", ROUTE_CACHE | ROUTE_DERIVED | ROUTE_CSV, h_run_ops, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/kernels", ROUTE_CACHE | ROUTE_DERIVED | ROUTE_CSV, h_run_kernels, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/ranks", ROUTE_CACHE | ROUTE_DERIVED | ROUTE_CSV, h_run_ranks, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/diagnosis", ROUTE_CACHE | ROUTE_DERIVED, h_run_diagnosis, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/distributed", ROUTE_CACHE | ROUTE_DERIVED, h_run_distributed, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/critical_path", ROUTE_CACHE | ROUTE_DERIVED, h_run_critical_path, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/trace", 0, h_run_trace, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/timeline", ROUTE_CACHE | ROUTE_DERIVED, h_run_timeline, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/memory", ROUTE_CACHE | ROUTE_DERIVED, h_run_memory, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/memory/peak", ROUTE_CACHE | ROUTE_DERIVED, h_run_memory_peak, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/memory/segments", ROUTE_CACHE | ROUTE_DERIVED, h_run_memory_segments, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/actions", ROUTE_CACHE, h_run_actions, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/stacks", ROUTE_CACHE, h_run_stacks, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/gpu", ROUTE_CACHE | ROUTE_DERIVED, h_run_gpu, NULL, NULL, NULL },	/* its steps */
	{ "GET", "/api/v1/runs/{run}/canary", ROUTE_CACHE, h_run_canary, NULL, NULL, NULL },
	/* on-demand captures (h_captures.c): next is the collectors' long poll */
	{ "POST", "/api/v1/runs/{run}/captures", ROUTE_WRITE | ROUTE_BODY, h_capture_body_begin, h_body_data,
	  h_capture_create_end, h_body_cleanup },
	{ "GET", "/api/v1/runs/{run}/captures", 0, h_captures_list, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/captures/next", ROUTE_WRITE | ROUTE_LONGPOLL, h_capture_next, NULL, NULL, NULL },
	{ "GET", "/api/v1/captures/{id}", 0, h_capture_get, NULL, NULL, NULL },
	{ "DELETE", "/api/v1/captures/{id}", ROUTE_WRITE, h_capture_cancel, NULL, NULL, NULL },
	{ "POST", "/api/v1/captures/{id}/ranks/{rank}", ROUTE_WRITE | ROUTE_BODY, h_capture_body_begin,
	  h_body_data, h_capture_rank_end, h_body_cleanup },
	{ "POST", "/api/v1/runs/{run}/artifacts", ROUTE_WRITE | ROUTE_BODY | ROUTE_UPLOAD, h_artifact_upload_begin,
	  h_artifact_upload_data, h_artifact_upload_end, h_artifact_upload_cleanup },
	{ "GET", "/api/v1/runs/{run}/artifacts/{id}", ROUTE_CACHE, h_artifact_get, NULL, NULL, NULL },
	{ "DELETE", "/api/v1/runs/{run}/artifacts/{id}", ROUTE_WRITE, h_artifact_delete, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/artifacts/{id}/raw", 0, h_artifact_raw, NULL, NULL, NULL },
	/* the dashboards: code and styles, no data (the pages read the API, with its token) */
	{ "GET", "/", ROUTE_OPEN, h_web_page, NULL, NULL, NULL },
	{ "GET", "/runs/{run}", ROUTE_OPEN, h_web_page, NULL, NULL, NULL },
	{ "GET", "/compare", ROUTE_OPEN, h_web_page, NULL, NULL, NULL },
	{ "GET", "/assets/{name}", ROUTE_OPEN, h_web_asset, NULL, NULL, NULL },
	{ "GET", "/api/docs", ROUTE_OPEN, h_web_docs, NULL, NULL, NULL },
	{ "GET", "/viewer/", ROUTE_OPEN, h_web_viewer, NULL, NULL, NULL },
	{ "GET", "/viewer/{name}", ROUTE_OPEN, h_web_viewer, NULL, NULL, NULL },
};

const struct route_table server_routes = { routes, sizeof(routes) / sizeof(routes[0]) };
