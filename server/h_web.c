/*
 * h_web.c: the dashboards. GET /, /runs/{run} and /compare answer the HTML
 * shell (index.html, run.html, compare.html: the same script, which reads
 * the path and draws the page from the JSON API, and links that preload the
 * modules that page loads); GET /assets/{name} answers the bundled scripts
 * and styles. Files come
 * only from the compiled-in table (web_assets.h), looked up by exact name:
 * no path from the request ever reaches the file system.
 *
 * Asset names carry a hash of their content, so they are cached for a year
 * (immutable); the shell is revalidated every time (no-cache + ETag, 304 on
 * If-None-Match). Pages get a CSP that allows only this origin's files: no
 * inline script or style, no CDN. GET /api/docs answers the API reference
 * page (the same CSP) and /viewer/{name} the offline trace viewer (speedscope),
 * whose CSP also allows inline styles (it sets them).
 */
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

#include "handlers.h"
#include "http.h"
#include "web_assets.h"

/* the trace viewer (speedscope) sets styles inline; it reads the trace the run page hands it as a blob: URL and compiles its
 * WebAssembly (JFR import; 'wasm-unsafe-eval' allows that, not JS eval) */
#define VIEWER_CSP "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; " \
		   "connect-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
#define PAGE_CSP "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
		 "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

static const struct web_asset *find(const char *name)
{
	size_t i;

	for (i = 0; i < web_nassets; i++)
		if (!strcmp(web_assets[i].name, name))
			return &web_assets[i];
	return NULL;
}

/* If-None-Match holds this ETag (or "*") */
static int not_modified(struct request *req, const char *etag)
{
	const char *inm = http_header(req, MHD_HTTP_HEADER_IF_NONE_MATCH);

	return inm && (strstr(inm, etag) || !strcmp(inm, "*"));
}

static int serve(struct request *req, const struct web_asset *a, const char *cache_control, const char *csp)
{
	int gz = req->accepts_gzip && a->gzlen < a->len, fresh;
	struct MHD_Response *resp;
	char etag[80];

	/* the gzip'd bytes are another representation: another ETag ("hash-gz") */
	snprintf(etag, sizeof(etag), "%.*s%s", (int)strlen(a->etag) - 1, a->etag, gz ? "-gz\"" : "\"");
	fresh = not_modified(req, etag);

	/* the table is static: MHD sends from it without copying */
	if (fresh)
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	else
		resp = MHD_create_response_from_buffer(gz ? a->gzlen : a->len, (void *)(gz ? a->gz : a->data),
						       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return -1;
	if (gz && !fresh)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, cache_control);
	MHD_add_response_header(resp, "Content-Security-Policy", csp);
	return http_reply_response(req, fresh ? 304 : 200, resp);
}

#define IMMUTABLE "public, max-age=31536000, immutable"

/* a page (an HTML file at the table's top level), revalidated every time */
static int serve_page(struct request *req, const char *name, const char *csp)
{
	const struct web_asset *a = find(name);

	if (!a)
		return http_reply_error(req, 404, "not_found", NULL, "this server was built without its pages");
	return serve(req, a, "no-cache", csp);
}

/* the file file in folder dir; cache: NULL for IMMUTABLE */
static int serve_in(struct request *req, const char *dir, const char *file, const char *cache, const char *csp)
{
	char name[160];
	const struct web_asset *a = NULL;

	if ((size_t)snprintf(name, sizeof(name), "%s/%s", dir, file) < sizeof(name))
		a = find(name);
	if (!a)
		return http_reply_error(req, 404, "not_found", NULL, "no such file: %s/%s", dir, file);
	return serve(req, a, cache ? cache : IMMUTABLE, csp);
}

/* each page's shell names the modules that page loads, for the browser to fetch at once (web/build.mjs) */
int h_web_page(struct request *req)
{
	const char *route = req->route ? req->route->pattern : "/";

	return serve_page(req, !strcmp(route, "/runs/{run}") ? "run.html" : !strcmp(route, "/compare") ? "compare.html" : "index.html",
			  PAGE_CSP);
}

int h_web_asset(struct request *req)
{
	return serve_in(req, "assets", req->params[0], NULL, PAGE_CSP);
}

/* GET /api/docs: the API reference page (web/src/docs.js), drawn from openapi.yaml */
int h_web_docs(struct request *req)
{
	return serve_page(req, "docs.html", PAGE_CSP);
}

/*
 * GET /viewer/{name}: speedscope's files as its package ships them; names
 * carry a hash but index.html does not, so only it is revalidated. A route
 * with no {name} (GET /viewer/) answers index.html.
 */
int h_web_viewer(struct request *req)
{
	const char *name = req->params[0] && *req->params[0] ? req->params[0] : "index.html";

	return serve_in(req, "viewer", name, strcmp(name, "index.html") ? NULL : "no-cache", VIEWER_CSP);
}
