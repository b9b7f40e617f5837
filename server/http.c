/*
 * http.c: libmicrohttpd glue (see http.h).
 *
 * MHD runs a thread pool (poll); a request stays on one pool thread. The access
 * handler is called:
 *   1. once with *con_cls == NULL: allocate struct request, match the route,
 *      check method, path parameters, token; GET routes answer here;
 *   2. for ROUTE_BODY routes, with each piece of the body (on_data);
 *   3. once more with no data when the body is complete (on_end).
 * The request is freed in on_completed(), MHD's NOTIFY_COMPLETED callback,
 * which also tells the route whether the request finished normally.
 *
 * Status codes come from enum tp_err in one place, http_status_of().
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "alloc.h"
#include "cache.h"
#include "http.h"
#include "linger.h"
#include "metrics.h"
#include "routes.h"
#include "sha256.h"

#define LOG_PREFIX "http"

#define GZIP_MIN_BYTES 1024
/* after an early answer, how much more body is read (and dropped) before the connection is closed */
#define DISCARD_MAX (64u << 20)
#define MAX_TOKENS 32
#define TOKEN_LINE_MAX 512	/* characters on a token file line, without its newline */
#define CACHE_BYTES (64u << 20)	/* answers kept by the cache */
#define MAX_CLIENTS 256		/* addresses with uploads in flight at once */
#define MIN_BODY_RATE 1024	/* bytes a second a body must average, past --timeout seconds */

struct server {
	struct MHD_Daemon *daemon;
	struct store *store;
	struct server_config cfg;
	char *tokens[MAX_TOKENS];
	int readonly[MAX_TOKENS];	/* 1: a read token ("read TOKEN" in the file) */
	int ntokens, nread;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	int active;			/* requests in flight */
	uint16_t port;
	struct cache *cache;		/* answers of ROUTE_CACHE reads; NULL: none */
	/* uploads in flight, by client address (under mu) */
	struct { uint8_t addr[16]; unsigned n; } clients[MAX_CLIENTS];
	unsigned uploads;
	/* bytes uploaded since the heap was last given back, and when the last upload ended
	 * (under mu: trim_after) */
	uint64_t untrimmed;
	double upload_end;
	/* open connections, for the slow-client watchdog (under cw_mu) */
	pthread_mutex_t cw_mu;
	pthread_cond_t cw_stop;
	struct conn_watch *conns;
	pthread_t watchdog;
	int watchdog_on, stopping;
	struct lingering *linger;		/* closes connections answered before their body was read */
	/* long polls (http_wait): how many wait, the pokes so far, set at stop (under mu) */
	unsigned waits, max_waits;
	uint64_t pokes;
	int waits_stop;
	pthread_cond_t poked;
	/* the listening socket, accepted from by one thread of ours (acceptor_main) */
	int lfd;
	int accept_stop[2];		/* a pipe: written to at stop */
	pthread_t acceptor;
	int acceptor_on;
};

/*
 * One open connection as the watchdog sees it. libmicrohttpd's timeout is an
 * idle one: a client that sends a byte a second is never idle. So a request's
 * headers must be whole within --timeout seconds of the connection opening or
 * the last answer, and a body, once it has been arriving for --timeout seconds
 * (not counting the time our handlers take), must average MIN_BODY_RATE.
 */
enum { CW_HEADERS, CW_BODY, CW_ANSWER };
struct conn_watch {
	struct conn_watch *next;
	int fd, phase, shut;
	double since;			/* CW_HEADERS: waiting since; CW_BODY: body began */
	double busy;			/* seconds of the body spent in our handlers */
	double in_handler;		/* > 0: in a handler since then */
	uint64_t bytes;
	int ctl_escape;			/* this request's URL decoded to a control character */
	int unread;			/* a request ended before its body was read (linger.h) */
};

struct deriver *http_deriver(const struct request *req)
{
	return req->srv->cfg.derive ? req->srv->cfg.derive->deriver : NULL;
}

struct store *http_store(const struct request *req)
{
	return req->srv->store;
}

const struct route_table *http_routes(const struct request *req)
{
	return req->srv->cfg.routes;
}

const struct ingest_limits *http_limits(const struct request *req)
{
	return &req->srv->cfg.limits;
}

const char *http_arg(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_header(const struct request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

int http_token_prefix(const struct request *req, char out[9])
{
	const char *h = http_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
	struct sha256 sh;
	char hex[65];

	out[0] = 0;
	if (!req->srv->ntokens || !h || strncasecmp(h, "Bearer ", 7))
		return 0;
	sha256_init(&sh);
	sha256_update(&sh, h + 7, strlen(h + 7));
	sha256_final_hex(&sh, hex);
	memcpy(out, hex, 8);
	out[8] = 0;
	return 1;
}

void http_client(const struct request *req, char *out, size_t size)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const void *a = NULL;

	if (sa && sa->sa_family == AF_INET)
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	else if (sa && sa->sa_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (!a || !inet_ntop(sa->sa_family, a, out, (socklen_t)size))
		snprintf(out, size, "unknown");
}

/* ---- long polls ---- */

int http_wait_take(struct request *req)
{
	struct server *srv = req->srv;
	int ok;

	pthread_mutex_lock(&srv->mu);
	if ((ok = srv->waits < srv->max_waits && !srv->waits_stop))
		srv->waits++;
	pthread_mutex_unlock(&srv->mu);
	return ok ? 0 : -1;
}

void http_wait_give(struct request *req)
{
	pthread_mutex_lock(&req->srv->mu);
	req->srv->waits--;
	pthread_mutex_unlock(&req->srv->mu);
}

uint64_t http_pokes(const struct request *req)
{
	uint64_t n;

	pthread_mutex_lock(&req->srv->mu);
	n = req->srv->pokes;
	pthread_mutex_unlock(&req->srv->mu);
	return n;
}

void http_poke(struct request *req)
{
	pthread_mutex_lock(&req->srv->mu);
	req->srv->pokes++;
	pthread_cond_broadcast(&req->srv->poked);
	pthread_mutex_unlock(&req->srv->mu);
}

int http_wait(struct request *req, uint64_t seen, double seconds)
{
	struct server *srv = req->srv;
	struct timespec until;
	int64_t ns;
	int stop;

	clock_gettime(CLOCK_REALTIME, &until);
	ns = until.tv_nsec + (int64_t)(seconds * 1e9);
	until.tv_sec += (time_t)(ns / 1000000000LL);
	until.tv_nsec = (long)(ns % 1000000000LL);
	pthread_mutex_lock(&srv->mu);
	while (srv->pokes == seen && !srv->waits_stop)
		if (pthread_cond_timedwait(&srv->poked, &srv->mu, &until))
			break;
	stop = srv->waits_stop;
	pthread_mutex_unlock(&srv->mu);
	return stop ? -1 : 0;
}

unsigned http_status_of(int rc)
{
	switch (rc) {
	case TP_OK: return 200;
	case TP_ERR_INVALID: return 400;
	case TP_ERR_NOTFOUND: return 404;
	case TP_ERR_CONFLICT: return 409;
	case TP_ERR_TOOBIG: return 413;
	case TP_ERR_UNSUPPORTED: return 422;
	case TP_ERR_NOMEM: return 503;
	case TP_ERR_UNAVAILABLE: return 503;
	case TP_ERR_IO: return 507;
	default: return 500;
	}
}

static void common_headers(struct MHD_Response *resp)
{
	/* API answers are data, never pages: nothing may run or frame them (CORS stays off);
	 * the pages (h_web.c) set their own policy and caching */
	if (!MHD_get_response_header(resp, "Content-Security-Policy"))
		MHD_add_response_header(resp, "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
	if (!MHD_get_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL))
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
}

int http_reply_response(struct request *req, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result r;

	common_headers(resp);
	if (status == 429 || status == 503)
		MHD_add_response_header(resp, "Retry-After", "1");
	req->status = status;
	if (req->in_body) {
		/* MHD queues responses only before or after the body: hold it */
		req->held = resp;
		req->held_status = status;
		req->replied = 1;
		return 0;
	}
	r = MHD_queue_response(req->conn, status, resp);
	MHD_destroy_response(resp);
	req->replied = 1;
	return r == MHD_YES ? 0 : -1;
}

/* gzip buf into a new buffer; NULL when it does not pay or fails */
static void *gzip_buf(const char *buf, size_t len, size_t *out_len)
{
	z_stream zs = { .zalloc = tp_zalloc, .zfree = tp_zfree };
	size_t cap;
	uint8_t *out;

	if (deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return NULL;
	cap = deflateBound(&zs, len);
	if (!(out = tp_malloc(cap))) {
		deflateEnd(&zs);
		return NULL;
	}
	zs.next_in = (Bytef *)buf;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	if (deflate(&zs, Z_FINISH) != Z_STREAM_END || zs.total_out >= len) {
		deflateEnd(&zs);
		tp_free(out);
		return NULL;
	}
	*out_len = zs.total_out;
	deflateEnd(&zs);
	return out;
}

int http_reply_text(struct request *req, unsigned status, const char *content_type, char *text, size_t len)
{
	struct MHD_Response *resp;
	void *gz = NULL;
	size_t gzlen = 0;

	if (req->accepts_gzip && len >= GZIP_MIN_BYTES && (gz = gzip_buf(text, len, &gzlen))) {
		tp_free(text);
		if (req->cache_key && status == 200)
			cache_put(req->srv->cache, req->cache_key, req->cache_gen, gz, gzlen, content_type, 1);
		resp = MHD_create_response_from_buffer(gzlen, gz, MHD_RESPMEM_MUST_FREE);
		if (resp)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
		else
			tp_free(gz);
	} else {
		if (req->cache_key && status == 200)
			cache_put(req->srv->cache, req->cache_key, req->cache_gen, text, len, content_type, 0);
		resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
		if (!resp)
			tp_free(text);
	}
	if (!resp)
		return -1;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	return http_reply_response(req, status, resp);
}

int http_reply_json(struct request *req, unsigned status, json_t *body)
{
	char *text;

	if (!body)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(12));
	json_decref(body);
	if (!text)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	return http_reply_text(req, status, "application/json", text, strlen(text));
}

int http_reply_error(struct request *req, unsigned status, const char *code, json_t *extra,
		     const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	json_t *body;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	body = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	if (body && extra)
		json_object_update(body, extra);
	json_decref(extra);
	if (status >= 500)
		tp_warn("%s %s -> %u %s: %s", req->method, req->route ? req->route->pattern : "-", status,
			code, msg);
	return http_reply_json(req, status, body);
}

int http_reply_fail(struct request *req, int rc, const struct tp_errbuf *err, json_t *extra)
{
	const char *code = err && err->code[0] ? err->code : tp_strerror(rc);
	const char *msg = err && err->msg[0] ? err->msg : tp_strerror(rc);

	/* an upload of a format we do not take: 415, not the 422 of a well-formed one we refuse */
	return http_reply_error(req, rc == TP_ERR_UNSUPPORTED && !strcmp(code, "unsupported_format") ? 415
				: http_status_of(rc), code, extra, "%s", msg);
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- tokens ---- */

/* Compare in time that depends on the lengths only, not on where they differ. */
static int token_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), i;
	unsigned char d = (unsigned char)(la != lb);

	for (i = 0; i < la; i++)
		d |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return d == 0;
}

/*
 * Writes need a write token when the token file has one; reads need a read
 * or write token when it has a read token; ROUTE_OPEN routes need none.
 * Every token is compared, so the time taken does not say which matched.
 * Returns 0 when allowed, else the status to answer: 401 without a known
 * token, 403 for a read token on a write.
 */
static unsigned authorized(struct server *srv, struct request *req)
{
	int write = req->route->flags & ROUTE_WRITE, i, known = 0, ok = 0;
	const char *h;

	if (req->route->flags & ROUTE_OPEN)
		return 0;
	if (write ? srv->ntokens == srv->nread : srv->nread == 0)
		return 0;
	h = http_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 401;
	for (i = 0; i < srv->ntokens; i++) {
		int eq = token_equal(h + 7, srv->tokens[i]);
		known |= eq;
		ok |= eq & (!write | !srv->readonly[i]);
	}
	return ok ? 0 : known ? 403 : 401;
}

/* ?format=: json everywhere, csv where the route has ROUTE_CSV; else answered 400 (-1). */
static int check_format(struct request *req)
{
	const char *f = http_arg(req, "format");

	if (!f || !strcmp(f, "json") || (!strcmp(f, "csv") && (req->route->flags & ROUTE_CSV)))
		return 0;
	if (!strcmp(f, "csv"))
		http_reply_error(req, 400, "format_not_supported", NULL,
				 "this endpoint answers JSON only; CSV: /steps, /ops, /kernels and /ranks of a run");
	else
		http_reply_error(req, 400, "invalid_parameter", NULL, "format must be json or csv");
	return -1;
}

/*
 * One token per line, "#" comments; "read TOKEN" is a read-only token. A line
 * longer than TOKEN_LINE_MAX is refused, naming it: read in pieces, its tail
 * would be a token of its own (a read line's tail, a write token).
 */
static int load_tokens(struct server *srv, const char *path, struct tp_errbuf *err)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned lineno = 0;
	int rc = TP_OK;

	if (!f)
		return tp_fail(err, TP_ERR_IO, "config", "cannot read token file %s", path);
	while ((len = getline(&line, &cap, f)) > 0) {
		char *s = line, *e;
		int ro = 0;

		lineno++;
		if (memchr(line, 0, (size_t)len)) {
			rc = tp_fail(err, TP_ERR_INVALID, "config", "token file %s: line %u holds a NUL byte",
				     path, lineno);
			goto out;
		}
		if (len - (line[len - 1] == '\n') > TOKEN_LINE_MAX) {
			rc = tp_fail(err, TP_ERR_INVALID, "config",
				     "token file %s: line %u is longer than %d characters", path, lineno,
				     TOKEN_LINE_MAX);
			goto out;
		}
		while (*s == ' ' || *s == '\t')
			s++;
		e = s + strlen(s);
		while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
			*--e = 0;
		if (!*s || *s == '#')
			continue;
		if (!strncmp(s, "read ", 5) || !strncmp(s, "read\t", 5)) {
			ro = 1;
			for (s += 5; *s == ' ' || *s == '\t'; s++)
				;
		}
		if (srv->ntokens == MAX_TOKENS || strlen(s) < 16 || strpbrk(s, " \t")) {
			rc = tp_fail(err, TP_ERR_INVALID, "config",
				     "token file %s: line %u: at most %d tokens of at least 16 characters, no spaces",
				     path, lineno, MAX_TOKENS);
			goto out;
		}
		if (!(srv->tokens[srv->ntokens] = tp_strdup(s))) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto out;
		}
		srv->readonly[srv->ntokens++] = ro;
		srv->nread += ro;
	}
	if (ferror(f))
		rc = tp_fail(err, TP_ERR_IO, "config", "cannot read token file %s", path);
	else if (srv->ntokens == srv->nread)
		rc = tp_fail(err, TP_ERR_INVALID, "config", "token file %s holds no write token", path);
out:
	free(line);
	fclose(f);
	return rc;
}

/* ---- slow clients (struct conn_watch) ---- */

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct server *srv = cls;
	struct conn_watch *cw = *socket_context, **pp;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (!ci || !(cw = tp_calloc(1, sizeof(*cw))))
			return;
		cw->fd = ci->connect_fd;
		cw->since = mono_now();
		pthread_mutex_lock(&srv->cw_mu);
		cw->next = srv->conns;
		srv->conns = cw;
		pthread_mutex_unlock(&srv->cw_mu);
		*socket_context = cw;
		return;
	}
	if (!cw)
		return;
	/* answered (or given up) before the body was read: a copy of the socket lingers (linger.h) */
	if (cw->unread || cw->phase == CW_BODY) {
		int fd = fcntl(cw->fd, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0)
			linger_add(srv->linger, fd);
	}
	/* called before libmicrohttpd closes the socket: the watchdog never shuts a reused fd */
	pthread_mutex_lock(&srv->cw_mu);
	for (pp = &srv->conns; *pp && *pp != cw; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = cw->next;
	pthread_mutex_unlock(&srv->cw_mu);
	tp_free(cw);
	*socket_context = NULL;
}

static struct conn_watch *conn_watch_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/*
 * libmicrohttpd's unescaper for the path and every query key and value: %XX
 * decoded in place, as MHD_http_unescape does, except an escape that decodes
 * to a control character (below 0x20, or 0x7f): it stays as written and the
 * connection's request is marked, to be answered 400. Decoded, "%00" ended
 * the C string: /api/v1/runs/sec%00x/steps answered run "sec".
 */
static size_t unescape_url(void *cls, struct MHD_Connection *conn, char *s)
{
	struct conn_watch *cw = conn_watch_of(conn);
	char *r = s, *w = s;

	(void)cls;
	while (*r) {
		int hi = r[0] == '%' ? hexval(r[1]) : -1, lo = hi >= 0 ? hexval(r[2]) : -1;
		if (lo < 0) {
			*w++ = *r++;
			continue;
		}
		if (hi * 16 + lo < 0x20 || hi * 16 + lo == 0x7f) {
			if (cw)
				cw->ctl_escape = 1;
			*w++ = *r++;
			continue;
		}
		*w++ = (char)(hi * 16 + lo);
		r += 3;
	}
	*w = 0;
	return (size_t)(w - s);
}

/* A request's connection moves to phase (CW_HEADERS when its answer is done). */
static void conn_phase(struct server *srv, struct conn_watch *cw, int phase)
{
	if (!cw)
		return;
	pthread_mutex_lock(&srv->cw_mu);
	cw->phase = phase;
	cw->since = mono_now();
	cw->busy = cw->in_handler = 0;
	cw->bytes = 0;
	pthread_mutex_unlock(&srv->cw_mu);
}

/* Around our handling of n body bytes: entering (n counted) and leaving (the time is ours). */
static void conn_body(struct server *srv, struct conn_watch *cw, size_t n, int entering)
{
	if (!cw)
		return;
	pthread_mutex_lock(&srv->cw_mu);
	if (entering) {
		cw->bytes += n;
		cw->in_handler = mono_now();
	} else if (cw->in_handler > 0) {
		cw->busy += mono_now() - cw->in_handler;
		cw->in_handler = 0;
	}
	pthread_mutex_unlock(&srv->cw_mu);
}

static void trim_if_idle(struct server *srv);

static void *watchdog_main(void *arg)
{
	struct server *srv = arg;
	double limit = srv->cfg.conn_timeout_s;

	tp_thread_name("ts-watchdog");
	pthread_mutex_lock(&srv->cw_mu);
	while (!srv->stopping) {
		struct timespec ts;
		double now = mono_now();
		for (struct conn_watch *cw = srv->conns; cw; cw = cw->next) {
			double wait = now - cw->since - cw->busy;
			int slow = cw->phase == CW_HEADERS ? wait > limit
				 : cw->phase == CW_BODY && cw->in_handler == 0 && wait > limit &&
				   (double)cw->bytes < MIN_BODY_RATE * wait;
			if (slow && !cw->shut) {
				/* libmicrohttpd owns the socket: shut it, and it closes the connection */
				tp_warn("closing a connection %s too slowly (%.0f s)",
					cw->phase == CW_HEADERS ? "sending its request headers" : "sending its body", wait);
				shutdown(cw->fd, SHUT_RDWR);
				cw->shut = 1;
			}
		}
		pthread_mutex_unlock(&srv->cw_mu);
		trim_if_idle(srv);
		pthread_mutex_lock(&srv->cw_mu);
		if (srv->stopping)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&srv->cw_stop, &srv->cw_mu, &ts);
	}
	pthread_mutex_unlock(&srv->cw_mu);
	return NULL;
}

/* ---- MHD callbacks ---- */

static void request_free(struct request *req)
{
	int i;

	for (i = 0; i < ROUTE_MAX_PARAMS; i++)
		tp_free(req->params[i]);
	tp_free(req->cache_key);
	if (req->held)
		MHD_destroy_response(req->held);
	tp_free(req);
}

/* ---- the answer cache (cache.h) ---- */

struct keybuf {
	char s[1024];
	size_t n;
	int overflow;
};

static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct keybuf *k = cls;
	int n;

	(void)kind;
	/* each decoded key and value behind its length: "?device=gpu%26limit%3D3" and
	 * "?device=gpu&limit=3" were one key when joined with '&' and '=' */
	if (value)
		n = snprintf(k->s + k->n, sizeof(k->s) - k->n, " %zu:%s%zu:%s", strlen(key), key, strlen(value), value);
	else
		n = snprintf(k->s + k->n, sizeof(k->s) - k->n, " %zu:%s-", strlen(key), key);
	if (n < 0 || (size_t)n >= sizeof(k->s) - k->n)
		k->overflow = 1;
	else
		k->n += (size_t)n;
	return k->overflow ? MHD_NO : MHD_YES;
}

/* Answer a cacheable read from the cache, else run its handler and keep its answer. */
static int cached(struct request *req, const char *url)
{
	struct keybuf k = { .n = 0 };
	struct cache_hit hit;
	struct MHD_Response *resp;
	uint64_t gen = store_generation(req->srv->store);

	k.n = (size_t)snprintf(k.s, sizeof(k.s), "%s %zu:%s", req->accepts_gzip ? "gz" : "id", strlen(url), url);
	if (k.n >= sizeof(k.s))
		return req->route->on_begin(req);
	MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, add_arg, &k);
	if (k.overflow)
		return req->route->on_begin(req);
	if (cache_get(req->srv->cache, k.s, gen, &hit)) {
		resp = MHD_create_response_from_buffer(hit.len, hit.data, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			tp_free(hit.data);
			return -1;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, hit.content_type);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
		if (hit.gzip)
			MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
		return http_reply_response(req, 200, resp);
	}
	/* the generation read before the handler: a write during it makes this entry stale, never wrong */
	req->cache_gen = gen;
	req->cache_key = tp_strdup(k.s);
	return req->route->on_begin(req);
}

/* ---- upload slots ---- */

/* The client's address as 16 bytes (IPv4 mapped into IPv6); 0 when unknown. */
static int client_addr(struct MHD_Connection *conn, uint8_t out[16])
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	memset(out, 0, 16);
	if (sa && sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
		return 1;
	}
	if (sa && sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
		return 1;
	}
	return 0;
}

/*
 * Take an upload slot: at most max_uploads at once, so that reads keep
 * threads (an upload holds its pool thread while it ingests), and at most
 * max_client_uploads from one address, so that one node cannot take them all.
 * Returns 0, or the limit that was reached.
 */
static unsigned upload_take(struct server *srv, struct request *req)
{
	uint8_t addr[16];
	unsigned limit = 0;
	int i, slot = -1;

	client_addr(req->conn, addr);
	pthread_mutex_lock(&srv->mu);
	for (i = 0; i < MAX_CLIENTS; i++) {
		if (srv->clients[i].n && !memcmp(srv->clients[i].addr, addr, 16)) {
			slot = i;
			break;
		}
		if (!srv->clients[i].n && slot < 0)
			slot = i;
	}
	if (srv->uploads >= srv->cfg.max_uploads)
		limit = srv->cfg.max_uploads;
	else if (slot < 0 || srv->clients[slot].n >= srv->cfg.max_client_uploads)
		limit = srv->cfg.max_client_uploads;
	if (!limit) {
		memcpy(srv->clients[slot].addr, addr, 16);
		srv->clients[slot].n++;
		srv->uploads++;
		req->upload_slot = slot + 1;
	}
	pthread_mutex_unlock(&srv->mu);
	return limit;
}

static void upload_give(struct server *srv, struct request *req)
{
	if (!req->upload_slot)
		return;
	pthread_mutex_lock(&srv->mu);
	srv->clients[req->upload_slot - 1].n--;
	srv->uploads--;
	pthread_mutex_unlock(&srv->mu);
	req->upload_slot = 0;
}

static enum MHD_Result reply_result(struct request *req, int rc)
{
	/* a handler that failed without answering: the connection is closed */
	return rc == 0 || req->replied ? MHD_YES : MHD_NO;
}

/* Content-Length headers seen, and whether they disagree, or come with Transfer-Encoding */
struct framing {
	const char *length;
	int bad, chunked;
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		f->chunked = 1;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
		return MHD_YES;
	if (f->length && strcmp(f->length, value ? value : ""))
		f->bad = 1;
	f->length = value ? value : "";
	return MHD_YES;
}

/*
 * RFC 9112 6.3: Content-Length headers that disagree (libmicrohttpd takes the
 * first), or one beside Transfer-Encoding, frame the body in two ways; a proxy
 * in front may take the other one (request smuggling). Answered 400, closed.
 */
static int framing_ambiguous(struct MHD_Connection *conn)
{
	struct framing f = { 0 };

	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	return f.bad || (f.length && f.chunked);
}

static enum MHD_Result first_call(struct server *srv, struct MHD_Connection *conn, const char *url,
				  const char *method, void **con_cls)
{
	struct request *req = tp_calloc(1, sizeof(*req));
	const char *ae, *bad = NULL;
	char allow[64];
	enum route_match m;
	int ctl;

	if (!req)
		return MHD_NO;
	req->srv = srv;
	req->conn = conn;
	req->method = method;
	req->t0 = mono_now();
	snprintf(req->path, sizeof(req->path), "%s", url);
	*con_cls = req;
	req->cw = conn_watch_of(conn);
	conn_phase(srv, req->cw, CW_ANSWER);
	ctl = req->cw && req->cw->ctl_escape;
	if (req->cw)
		req->cw->ctl_escape = 0;
	pthread_mutex_lock(&srv->mu);
	srv->active++;
	pthread_mutex_unlock(&srv->mu);

	ae = http_header(req, MHD_HTTP_HEADER_ACCEPT_ENCODING);
	req->accepts_gzip = ae && strstr(ae, "gzip") != NULL;

	if (framing_ambiguous(conn))
		return reply_result(req, http_reply_error(req, 400, "invalid_request", NULL,
							  "conflicting Content-Length headers, or Content-Length with "
							  "Transfer-Encoding"));
	if (ctl)
		return reply_result(req, http_reply_error(req, 400, "invalid_request", NULL,
							  "the path or query holds an escaped control character "
							  "(%%00 to %%1F, or %%7F)"));
	m = route_match(srv->cfg.routes, method, url, &req->route, req->params, allow, sizeof(allow), &bad);
	switch (m) {
	case ROUTE_NO_PATH:
		return reply_result(req, http_reply_error(req, 404, "not_found", NULL,
							  "no such endpoint: %s %s", method, url));
	case ROUTE_NO_METHOD: {
		int rc = http_reply_error(req, 405, "method_not_allowed", NULL,
					  "%s is not allowed here; allowed: %s", method, allow);
		return reply_result(req, rc);
	}
	case ROUTE_BAD_PARAM:
		if (!strcmp(bad, "run"))
			return reply_result(req, http_reply_error(req, 400, "invalid_run_name", NULL,
								  "run names are 1 to 128 of A-Z a-z 0-9 . _ -"));
		return reply_result(req, http_reply_error(req, 400, "invalid_parameter", NULL,
							  "artifact ids are decimal integers"));
	case ROUTE_FOUND:
		break;
	}
	switch (authorized(srv, req)) {
	case 0:
		break;
	case 403:
		return reply_result(req, http_reply_error(req, 403, "forbidden", NULL,
							  "this token may read only; %s %s needs a write token",
							  method, req->route->pattern));
	default:
		return reply_result(req, http_reply_error(req, 401, "unauthorized", NULL,
							  "this server needs 'Authorization: Bearer TOKEN' with a %s token",
							  req->route->flags & ROUTE_WRITE ? "write" : "read or write"));
	}
	if (check_format(req))
		return reply_result(req, -1);
	/*
	 * A request without a body is answered on MHD's next call, not this
	 * first one: libmicrohttpd 0.9.75 closes the connection after an answer
	 * queued on the first call, and a new TCP connection (and a fresh 512 KiB
	 * connection pool) per request cost more than the request itself
	 * (bench/api_latency.sh: p99 24 ms -> 4 ms with 32 clients).
	 */
	if (!(req->route->flags & ROUTE_BODY)) {
		req->deferred = 1;
		return MHD_YES;
	}
	conn_phase(srv, req->cw, CW_BODY);
	if (req->route->flags & ROUTE_UPLOAD) {
		unsigned limit = upload_take(srv, req);
		if (limit) {
			int rc = http_reply_error(req, 429, "too_many_uploads", NULL,
						  "%u uploads are in flight %s; retry when one ends", limit,
						  limit == srv->cfg.max_uploads ? "on this server" : "from this address");
			return reply_result(req, rc);
		}
	}
	return reply_result(req, req->route->on_begin(req));
}

/* Run a bodyless request's handler, through the answer cache when it is cacheable. */
static int dispatch(struct request *req, const char *url)
{
	const char *p = req->route->pattern;
	const char *wait = http_arg(req, "wait");
	const char *run = !strncmp(p, "/api/v1/runs/{run}", 18) ? req->params[0] : NULL;
	const struct derive_hooks *derive = req->srv->cfg.derive;

	if (wait && strcmp(wait, "0") && strcmp(wait, "1") && !(req->route->flags & ROUTE_LONGPOLL))
		return http_reply_error(req, 400, "invalid_parameter", NULL, "wait must be 0 or 1");
	/*
	 * wait=0: the analysis as it stands, the newest traces derived in the
	 * background (the kick hook; GET /runs/{run} says analysis_pending until
	 * they are): a page that follows a growing run never waits for it.
	 */
	if (!derive || !(req->route->flags & ROUTE_DERIVED)) {
		/* nothing to derive first */
	} else if (wait && !strcmp(wait, "0")) {
		if (derive->kick && derive->kick(derive->deriver, req->srv->store, run))
			tp_warn("could not start deriving run '%s' in the background", run ? run : "*");
	} else if (derive->settle) {
		/* reads of what traces derive answer for every trace uploaded before them: marked ranks first */
		struct tp_errbuf err = { 0 };
		int rc = derive->settle(derive->deriver, req->srv->store, run, &err);
		/* never a failed read for it: the tables as they are (each trace's commit left them whole),
		 * the ranks still marked for the next read to derive */
		if (rc)
			tp_warn("deriving run '%s' for a read failed (%s); answered without its newest traces",
				run ? run : "*", err.msg);
	}
	if ((req->route->flags & ROUTE_CACHE) && !strcmp(req->method, "GET") && req->srv->cache)
		return cached(req, url);
	return req->route->on_begin(req);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **con_cls)
{
	struct server *srv = cls;
	struct request *req = *con_cls;
	int rc;

	(void)version;
	if (!req)
		return first_call(srv, conn, url, method, con_cls);
	if (*upload_data_size) {
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		req->body_bytes += n;
		if (req->replied) {
			/* answered early: drop the rest, but not forever */
			req->discarded += n;
			return req->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
		}
		req->in_body = 1;
		conn_body(srv, req->cw, n, 1);
		if (!(req->route->flags & ROUTE_BODY))
			rc = http_reply_error(req, 413, "body_not_allowed", NULL,
					      "this endpoint takes no request body");
		else
			rc = req->route->on_data(req, upload_data, n);
		conn_body(srv, req->cw, 0, 0);
		req->in_body = 0;
		return reply_result(req, rc);
	}
	if (req->cw && req->cw->phase == CW_BODY)	/* the body is whole (phase is ours to read) */
		conn_phase(srv, req->cw, CW_ANSWER);
	if (req->held) {
		struct MHD_Response *resp = req->held;
		enum MHD_Result r = MHD_queue_response(conn, req->held_status, resp);
		req->held = NULL;
		MHD_destroy_response(resp);
		return r;
	}
	if (req->replied)
		return MHD_YES;
	if (req->deferred) {
		req->deferred = 0;
		return reply_result(req, dispatch(req, url));
	}
	if (req->route && req->route->on_end) {
		rc = req->route->on_end(req);
		return reply_result(req, rc);
	}
	return MHD_YES;
}

/*
 * An ingest frees hundreds of MB in pieces glibc keeps: give them back
 * (main.c) once uploads have brought TRIM_BYTES since the last time and
 * none has come for TRIM_IDLE_S (the watchdog looks every second:
 * trim_if_idle), or, while they go on, after every TRIM_BUSY_BYTES.
 * malloc_trim() hands back every free page of every arena (an madvise that
 * flushes both cores' TLBs), and the next upload faults them in again, each
 * about 11 us on this project's VM: trimmed after every 16 MiB, a collector's
 * chunks of 2 MiB paid it every eighth chunk (bench/results/
 * chunk_faults-20261130.txt). bench/soak.sh's 1,000 uploads without a pause
 * peak at 117 MB with the valve at 128 MiB, 140 at 256. Without the
 * watchdog (--timeout 0), after every TRIM_BYTES.
 */
#define TRIM_BYTES (16u << 20)
#define TRIM_IDLE_S 1.0
#define TRIM_BUSY_BYTES (128u << 20)

static void give_heap_back(void)
{
	malloc_trim(0);
	metrics_trim();
}

static void trim_after(struct server *srv, uint64_t body)
{
	int now;

	pthread_mutex_lock(&srv->mu);
	srv->untrimmed += body;
	srv->upload_end = mono_now();
	now = !srv->watchdog_on && srv->untrimmed >= TRIM_BYTES;
	if (now)
		srv->untrimmed = 0;
	pthread_mutex_unlock(&srv->mu);
	if (now)
		give_heap_back();
}

/* The watchdog's second: the heap given back when uploads have paused (trim_after). */
static void trim_if_idle(struct server *srv)
{
	int due;

	pthread_mutex_lock(&srv->mu);
	due = srv->untrimmed >= TRIM_BYTES && !srv->uploads && mono_now() - srv->upload_end >= TRIM_IDLE_S;
	due |= srv->untrimmed >= TRIM_BUSY_BYTES;
	if (due)
		srv->untrimmed = 0;
	pthread_mutex_unlock(&srv->mu);
	if (due)
		give_heap_back();
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct server *srv = cls;
	struct request *req = *con_cls;

	(void)conn;
	if (!req)
		return;
	if (req->after)
		req->after(req->after_arg);
	if (req->route && req->route->cleanup)
		req->route->cleanup(req, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
	upload_give(srv, req);
	{
		double secs = mono_now() - req->t0;
		metrics_request(route_index(srv->cfg.routes, req->route), req->status);
		if (req->route && (req->route->flags & ROUTE_UPLOAD)) {
			metrics_upload(req->body_bytes, secs);
			trim_after(srv, req->body_bytes);
		}
		/* one access line per request; the query string is left out (it may name files) */
		tp_info("%s %s %u %llu %.1fms%s", req->method, req->path, req->status,
			(unsigned long long)req->body_bytes, secs * 1e3,
			toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (incomplete)");
	}
	/* ended before its body was read: libmicrohttpd closes the connection next, and it lingers */
	if (req->cw)
		req->cw->unread = req->cw->phase == CW_BODY;
	conn_phase(srv, req->cw, CW_HEADERS);	/* a kept-alive connection waits for its next request */
	request_free(req);
	*con_cls = NULL;
	pthread_mutex_lock(&srv->mu);
	if (--srv->active == 0)
		pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->mu);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = 0;
	tp_warn("libmicrohttpd: %s", msg);
}

/* ---- start and stop ---- */

static int resolve(const char *listen, struct sockaddr_storage *ss, socklen_t *len, int *v6,
		   struct tp_errbuf *err)
{
	char host[256];
	const char *colon = strrchr(listen, ':'), *port;
	struct addrinfo hints = { 0 }, *ai = NULL;
	size_t hl;

	if (!colon)
		return tp_fail(err, TP_ERR_INVALID, "config", "--listen wants HOST:PORT, got '%s'", listen);
	port = colon + 1;
	hl = (size_t)(colon - listen);
	if (hl >= 2 && listen[0] == '[' && listen[hl - 1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return tp_fail(err, TP_ERR_INVALID, "config", "--listen: host name too long");
	memcpy(host, listen, hl);
	host[hl] = 0;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if (getaddrinfo(hl ? host : NULL, port, &hints, &ai) || !ai)
		return tp_fail(err, TP_ERR_INVALID, "config", "--listen: cannot resolve '%s'", listen);
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	*v6 = ai->ai_family == AF_INET6;
	freeaddrinfo(ai);
	return TP_OK;
}

/*
 * The listening socket, bound and listening before the store is opened, so
 * that an address in use or refused leaves no database made or migrated;
 * acceptor_main accepts from it, and server_stop closes it.
 * The socket, or -1 with err set.
 */
static int listen_on(const char *addr, const struct sockaddr_storage *ss, socklen_t len, struct tp_errbuf *err)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

	if (fd < 0) {
		tp_fail(err, TP_ERR_IO, "config", "cannot listen on %s: %s", addr, strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, SOMAXCONN)) {
		tp_fail(err, TP_ERR_IO, "config", "cannot listen on %s: %s", addr, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * The one thread that accepts connections and hands each to libmicrohttpd,
 * which gives it to one of its workers (MHD_add_connection: its connection
 * limits apply as to the ones it accepts). With the listening socket in every
 * worker's poll set, each connection woke all of them (--threads, 16) and all
 * but one found nothing to accept: a GET /healthz took 0.24 ms and 0.13-0.17
 * ms of the server's CPU, now 0.15 ms and 0.07-0.10; a one-event upload 1.22-
 * 1.55 ms and 1.17-1.43 ms, now 1.10-1.15 and 1.03-1.07 (bench/upload_floor.py,
 * bench/results/accept_thread-20261130.txt).
 */
static void *acceptor_main(void *arg)
{
	struct server *srv = arg;
	struct pollfd p[2] = { { srv->lfd, POLLIN, 0 }, { srv->accept_stop[0], POLLIN, 0 } };

	tp_thread_name("ts-accept");
	for (;;) {
		struct sockaddr_storage a;
		socklen_t alen = sizeof(a);
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			tp_warn("no longer accepting connections: poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents)
			break;
		while ((fd = accept(srv->lfd, (struct sockaddr *)&a, &alen)) >= 0) {
			fcntl(fd, F_SETFD, FD_CLOEXEC);
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
			/* it closes fd when it cannot take it (its connection limits) */
			MHD_add_connection(srv->daemon, fd, (const struct sockaddr *)&a, alen);
			alen = sizeof(a);
		}
		/* out of descriptors or memory: the next try after a pause, not at once */
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
			poll(NULL, 0, 10);
	}
	return NULL;
}

int server_start(const struct server_config *cfg, struct server **out, struct tp_errbuf *err)
{
	struct server *srv = tp_calloc(1, sizeof(*srv));
	struct sockaddr_storage ss;
	/*
	 * poll, not epoll: with libmicrohttpd 0.9.75's epoll mode, a client that
	 * closed while its thread was busy in our callback (a slow ingest) went
	 * unnoticed until the idle timeout, keeping its half upload (found by
	 * the e2e test under ASan). poll sees it at once.
	 */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG |
			 MHD_USE_NO_LISTEN_SOCKET;
	socklen_t sslen = 0;
	int rc, v6 = 0, lfd = -1;

	if (!srv)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	srv->cfg = *cfg;
	srv->lfd = srv->accept_stop[0] = srv->accept_stop[1] = -1;
	if (!srv->cfg.max_uploads)
		srv->cfg.max_uploads = cfg->threads > 1 ? cfg->threads / 2 : 1;
	if (!srv->cfg.max_client_uploads)
		srv->cfg.max_client_uploads = 4;
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->idle, NULL);
	pthread_mutex_init(&srv->cw_mu, NULL);
	pthread_cond_init(&srv->cw_stop, NULL);
	pthread_cond_init(&srv->poked, NULL);
	srv->max_waits = cfg->threads / 4 ? cfg->threads / 4 : 1;
	if (!srv->cfg.max_client_connections)
		srv->cfg.max_client_connections = 64;
	if ((rc = resolve(cfg->listen, &ss, &sslen, &v6, err)))
		goto fail;
	if (cfg->token_file && (rc = load_tokens(srv, cfg->token_file, err)))
		goto fail;
	if ((lfd = listen_on(cfg->listen, &ss, sslen, err)) < 0) {
		rc = err->rc;
		goto fail;
	}
	if ((rc = store_open(cfg->db_path, &srv->store, err)))
		goto fail;
	srv->cache = cache_new(CACHE_BYTES);
	srv->linger = linger_new();
	if (v6)
		flags |= MHD_USE_IPv6;
	/*
	 * A connection's memory (its headers and read buffer) is libmicrohttpd's
	 * default, 32 KiB: its pool comes from malloc then, where a larger one is
	 * mapped anew for every connection and unmapped at its close, so every
	 * upload faulted in 128 pages for its 512 KiB (a collector opens a
	 * connection a chunk): 4-7 k of a server's 40 k page faults over three
	 * runs of 20 chunks. The V100 fixture's upload took no longer
	 * (bench/results/chunk_faults-20261130.txt).
	 */
	srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_access, srv,
				       MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
				       MHD_OPTION_THREAD_POOL_SIZE, cfg->threads ? cfg->threads : 16u,
				       MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s,
				       MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
				       MHD_OPTION_CONNECTION_LIMIT, 512u,
				       MHD_OPTION_PER_IP_CONNECTION_LIMIT, srv->cfg.max_client_connections,
				       MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
				       MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
				       MHD_OPTION_UNESCAPE_CALLBACK, unescape_url, NULL,
				       MHD_OPTION_END);
	if (!srv->daemon) {
		rc = tp_fail(err, TP_ERR_IO, "config", "cannot serve on %s", cfg->listen);
		goto fail;
	}
	srv->lfd = lfd;
	lfd = -1;	/* srv's now */
	if (pipe(srv->accept_stop) || fcntl(srv->accept_stop[0], F_SETFD, FD_CLOEXEC) ||
	    fcntl(srv->accept_stop[1], F_SETFD, FD_CLOEXEC) || pthread_create(&srv->acceptor, NULL, acceptor_main, srv)) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "cannot start the accepting thread");
		goto fail;
	}
	srv->acceptor_on = 1;
	if (cfg->conn_timeout_s && pthread_create(&srv->watchdog, NULL, watchdog_main, srv) == 0) {
		pthread_mutex_lock(&srv->mu);	/* trim_after reads it */
		srv->watchdog_on = 1;
		pthread_mutex_unlock(&srv->mu);
	}
	{
		struct sockaddr_storage bound;
		socklen_t blen = sizeof(bound);
		if (!getsockname(srv->lfd, (struct sockaddr *)&bound, &blen))
			srv->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
								      : ((struct sockaddr_in *)&bound)->sin_port);
	}
	*out = srv;
	return TP_OK;
fail:
	if (lfd >= 0)
		close(lfd);
	server_stop(srv);
	return rc;
}

uint16_t server_port(const struct server *srv)
{
	return srv->port;
}

void server_stop(struct server *srv)
{
	struct timespec deadline;
	int i;

	if (!srv)
		return;
	if (srv->daemon) {
		/* stop accepting, then let requests in flight finish */
		if (srv->acceptor_on) {
			ssize_t w = write(srv->accept_stop[1], "", 1);
			(void)w;
			pthread_join(srv->acceptor, NULL);
		}
		clock_gettime(CLOCK_REALTIME, &deadline);
		deadline.tv_sec += srv->cfg.grace_s;
		pthread_mutex_lock(&srv->mu);
		/* long polls answer now: a stop waits for no capture */
		srv->waits_stop = 1;
		pthread_cond_broadcast(&srv->poked);
		while (srv->active > 0)
			if (pthread_cond_timedwait(&srv->idle, &srv->mu, &deadline))
				break;
		if (srv->active)
			tp_warn("stopping with %d request(s) still in flight", srv->active);
		pthread_mutex_unlock(&srv->mu);
		MHD_stop_daemon(srv->daemon);
		if (srv->watchdog_on) {
			pthread_mutex_lock(&srv->cw_mu);
			srv->stopping = 1;
			pthread_cond_signal(&srv->cw_stop);
			pthread_mutex_unlock(&srv->cw_mu);
			pthread_join(srv->watchdog, NULL);
		}
	}
	if (srv->lfd >= 0)
		close(srv->lfd);
	for (i = 0; i < 2; i++)
		if (srv->accept_stop[i] >= 0)
			close(srv->accept_stop[i]);
	linger_free(srv->linger);	/* after MHD's threads, which add to it */
	/* the derivations reads started in the background use the store too */
	if (srv->cfg.derive && srv->cfg.derive->drain)
		srv->cfg.derive->drain(srv->cfg.derive->deriver, srv->store);
	store_close(srv->store);
	cache_free(srv->cache);
	for (i = 0; i < srv->ntokens; i++)
		tp_free(srv->tokens[i]);
	pthread_mutex_destroy(&srv->mu);
	pthread_cond_destroy(&srv->idle);
	pthread_mutex_destroy(&srv->cw_mu);
	pthread_cond_destroy(&srv->cw_stop);
	pthread_cond_destroy(&srv->poked);
	tp_free(srv);
}
