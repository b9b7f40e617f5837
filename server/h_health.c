/*
 * h_health.c: GET /healthz, for load balancers and the tests: answers once
 * the server serves, without touching the database.
 */
#include "handlers.h"
#include "http.h"

int h_health_get(struct request *req)
{
	return http_reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}
