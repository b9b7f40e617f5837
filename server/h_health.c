/*
 * h_health.c: GET /healthz, for load balancers and the tests: answers once
 * the server serves, "ok" (200) or "database unavailable" (503: PostgreSQL
 * down; an SQLite file is not touched); and GET /metrics, for
 * Prometheus; and GET /api/v1/openapi.yaml with the JSON schemas it refers
 * to (GET /api/v1/api/NAME.schema.json, where its relative $refs lead): the
 * API's description, compiled in from schemas/, so it matches the binary.
 */
#include <microhttpd.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"
#include "http.h"
#include "metrics.h"
#include "store/store.h"

struct embedded_file {
	const char *name, *data;
	size_t len;
};
extern const struct embedded_file api_description[];	/* openapi.yaml, then schemas/api/ (EmbedFile.cmake) */

int h_health_get(struct request *req)
{
	struct tp_errbuf err = { 0 };

	if (store_health(http_store(req), &err))
		return http_reply_json(req, 503, json_pack("{s:s}", "status", "database unavailable"));
	return http_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

int h_metrics_get(struct request *req)
{
	char *text = metrics_render(http_store(req), http_routes(req));
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

static int reply_file(struct request *req, const char *name, const char *content_type)
{
	const struct embedded_file *f;
	char *text;

	for (f = api_description; f->name && strcmp(f->name, name); f++)
		;
	if (!f->name)
		return http_reply_error(req, 404, "not_found", NULL, "no such schema: %s", name);
	if (!(text = tp_malloc(f->len + 1)))
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	memcpy(text, f->data, f->len + 1);
	return http_reply_text(req, 200, content_type, text, f->len);
}

int h_openapi_get(struct request *req)
{
	return reply_file(req, "openapi.yaml", "application/yaml; charset=utf-8");
}

int h_schema_get(struct request *req)
{
	const char *name = req->params[0];
	size_t n = strlen(name);

	if (n < 12 || strcmp(name + n - 12, ".schema.json"))
		return http_reply_error(req, 404, "not_found", NULL, "no such schema: %s", name);
	return reply_file(req, name, "application/schema+json");
}
