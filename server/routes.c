/*
 * routes.c: the route table and the matcher (see routes.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "handlers.h"
#include "routes.h"

static const struct route routes[] = {
	{ "GET", "/healthz", ROUTE_OPEN, h_health_get, NULL, NULL, NULL },
	{ "GET", "/metrics", 0, h_metrics_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/openapi.yaml", ROUTE_OPEN, h_openapi_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/api/{name}", ROUTE_OPEN, h_schema_get, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs", ROUTE_CACHE, h_runs_list, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}", ROUTE_CACHE, h_run_get, NULL, NULL, NULL },
	{ "PATCH", "/api/v1/runs/{run}", ROUTE_WRITE | ROUTE_BODY, h_run_patch_begin, h_run_patch_data,
	  h_run_patch_end, h_run_patch_cleanup },
	{ "DELETE", "/api/v1/runs/{run}", ROUTE_WRITE, h_run_delete, NULL, NULL, NULL },
	{ "GET", "/api/v1/runs/{run}/metrics", ROUTE_CACHE, h_run_metrics, NULL, NULL, NULL },
	{ "POST", "/api/v1/runs/{run}/metrics", ROUTE_WRITE | ROUTE_BODY, h_run_metrics_begin, h_run_patch_data,
	  h_run_metrics_end, h_run_patch_cleanup },
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
	{ "GET", "/viewer/{name}", ROUTE_OPEN, h_web_viewer, NULL, NULL, NULL },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

size_t route_count(void)
{
	return NROUTES;
}

const struct route *route_at(size_t i)
{
	return i < NROUTES ? &routes[i] : NULL;
}

int route_index(const struct route *r)
{
	return r ? (int)(r - routes) : -1;
}

int route_valid_run_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
		if (n >= 128)
			return 0;
	}
	/* "." and ".." are valid by the pattern but read as path steps everywhere else */
	return n > 0 && strcmp(s, ".") && strcmp(s, "..");
}

static int valid_id(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (s[n] < '0' || s[n] > '9' || n >= 18)
			return 0;
	return n > 0;
}

/* Match path against pattern; captures point into path (lengths in caplen). */
static int match_one(const char *pattern, const char *path, const char *cap[], size_t caplen[], int *ncap)
{
	const char *p = pattern, *s = path;

	*ncap = 0;
	while (*p && *s) {
		if (*p == '{') {
			const char *pend = strchr(p, '}');
			const char *send = strchr(s, '/');
			if (!send)
				send = s + strlen(s);
			if (send == s || *ncap >= ROUTE_MAX_PARAMS)
				return 0;
			cap[*ncap] = s;
			caplen[(*ncap)++] = (size_t)(send - s);
			p = pend + 1;
			s = send;
		} else if (*p == *s) {
			p++, s++;
		} else {
			return 0;
		}
	}
	return !*p && !*s;
}

enum route_match route_match(const char *method, const char *path, const struct route **out,
			     char *params[], char *allow, size_t allow_size, const char **bad_param)
{
	const char *cap[ROUTE_MAX_PARAMS];
	size_t caplen[ROUTE_MAX_PARAMS], i, used = 0;
	int ncap, k, path_found = 0;

	if (allow_size)
		allow[0] = 0;
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (!match_one(routes[i].pattern, path, cap, caplen, &ncap))
			continue;
		if (strcmp(routes[i].method, method) &&
		    !(!strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET"))) {
			if (allow_size && used + strlen(routes[i].method) + 3 < allow_size)
				used += (size_t)snprintf(allow + used, allow_size - used, "%s%s",
							 used ? ", " : "", routes[i].method);
			path_found = 1;
			continue;
		}
		/* validate the captures by their placeholder names */
		const char *ph = routes[i].pattern;
		for (k = 0; k < ncap; k++) {
			char *v;
			ph = strchr(ph, '{');
			v = tp_strndup(cap[k], caplen[k]);
			params[k] = v;
			if (!v || (!strncmp(ph, "{run}", 5) && !route_valid_run_name(v)) ||
			    (!strncmp(ph, "{id}", 4) && !valid_id(v))) {
				*bad_param = !strncmp(ph, "{run}", 5) ? "run" : "id";
				return ROUTE_BAD_PARAM;
			}
			ph++;
		}
		*out = &routes[i];
		return ROUTE_FOUND;
	}
	return path_found ? ROUTE_NO_METHOD : ROUTE_NO_PATH;
}
