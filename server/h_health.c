/*
 * h_health.c: GET /healthz, for load balancers and the tests: answers once
 * the server serves, without touching the database; and GET /metrics, for
 * Prometheus.
 */
#include <microhttpd.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"
#include "http.h"
#include "metrics.h"

int h_health_get(struct request *req)
{
	return http_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

int h_metrics_get(struct request *req)
{
	char *text = metrics_render(http_store(req));
	struct MHD_Response *resp;

	if (!text)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		tp_free(text);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
	return http_reply_response(req, 200, resp);
}
