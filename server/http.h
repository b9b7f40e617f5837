/*
 * http.h: the HTTP server (libmicrohttpd glue) and what handlers see of it.
 *
 * One struct request per HTTP request, allocated on MHD's first callback
 * and freed only when MHD reports the request completed; everything a
 * handler allocates for the request hangs off it (req->state, freed by
 * route->cleanup). Handlers answer with the http_reply_* functions, which
 * take care of JSON encoding, gzip, the error body of shared/api.md and the
 * security headers.
 */
#ifndef HTTP_H
#define HTTP_H

#include <jansson.h>
#include <stdint.h>

#include "pipeline/ingest.h"
#include "routes.h"
#include "store/store.h"
#include "tp.h"

struct MHD_Connection;
struct MHD_Response;
struct route;

/*
 * What the server calls that lives above it, installed by main.c, so that
 * http.c names neither the derivation pipeline nor a handler. NULL members
 * (or no hooks): reads derive nothing first. Each is given deriver, the
 * derivations' object (pipeline/runrank.h), which http.c only passes on.
 */
struct deriver;
struct derive_hooks {
	struct deriver *deriver;
	/* wait=0 reads: the run's marked ranks derived in the background; non-zero when that failed to start */
	int (*kick)(struct deriver *dv, struct store *st, const char *run);
	/* other reads of derived tables: the run's (NULL: every run's) marked ranks derived first */
	int (*settle)(struct deriver *dv, struct store *st, const char *run, struct tp_errbuf *err);
	/* at stop, before the store closes: the background derivations finished */
	void (*drain)(struct deriver *dv, struct store *st);
};

struct server_config {
	const struct route_table *routes;	/* what requests are matched against (routes.c's server_routes) */
	const struct derive_hooks *derive;	/* may be NULL */
	const char *listen;		/* "HOST:PORT"; port 0 picks a free one */
	const char *db_path;
	const char *token_file;		/* NULL: writes need no token */
	unsigned threads;		/* MHD thread pool size */
	unsigned conn_timeout_s;
	unsigned grace_s;		/* how long shutdown waits for requests in flight */
	unsigned max_uploads;		/* uploads at once, all clients; 0: half the threads */
	unsigned max_client_uploads;	/* uploads at once from one address; 0: 4 */
	unsigned max_client_connections;	/* open connections from one address; 0: 64 */
	struct ingest_limits limits;
};

struct server;

struct request {
	struct server *srv;
	struct MHD_Connection *conn;
	const struct route *route;
	const char *method;
	char *params[ROUTE_MAX_PARAMS];	/* path captures ({run}, {id}) */
	int accepts_gzip;
	int replied;			/* a response is queued (or held, below) */
	int in_body;			/* inside on_data: MHD takes no response until the body ends */
	int deferred;			/* bodyless: the handler runs on MHD's last call */
	struct MHD_Response *held;	/* an answer given mid-body, queued when the body ends */
	unsigned held_status;
	struct conn_watch *cw;		/* its connection, for the slow-client watchdog; may be NULL */
	uint64_t discarded;		/* body bytes dropped after an early answer */
	uint64_t body_bytes;		/* received so far */
	unsigned status;		/* of the answer given, 0 before */
	double t0;			/* monotonic seconds at the first callback */
	char path[256];			/* for the access log, truncated */
	void *state;			/* the handler's, freed by route->cleanup */
	char *cache_key;		/* ROUTE_CACHE: where its answer is kept */
	uint64_t cache_gen;		/* the store generation the answer is computed at */
	int upload_slot;		/* the client's entry in the upload table + 1; 0: none held */
	/* work that need not hold the answer back: run once it is sent (or the request ends
	 * otherwise), before route->cleanup (NULL: none) */
	void (*after)(void *arg);
	void *after_arg;
};

int server_start(const struct server_config *cfg, struct server **out, struct tp_errbuf *err);
uint16_t server_port(const struct server *srv);
/* Stop accepting, wait up to cfg.grace_s for requests in flight, stop, close the store. */
void server_stop(struct server *srv);

struct store *http_store(const struct request *req);
/* The derivations' object the hooks were given (NULL: no hooks). */
struct deriver *http_deriver(const struct request *req);
const struct route_table *http_routes(const struct request *req);
const struct ingest_limits *http_limits(const struct request *req);
/* A query-string argument (borrowed), or NULL. */
const char *http_arg(const struct request *req, const char *name);
const char *http_header(const struct request *req, const char *name);

/* The first 8 hex of the SHA-256 of the request's bearer token into out, 1; 0 (out "") when the
 * server has no tokens or the request carries none. */
int http_token_prefix(const struct request *req, char out[9]);
/* The client's address as text ("unknown" when it cannot be told). */
void http_client(const struct request *req, char *out, size_t size);

/*
 * Long polls (ROUTE_LONGPOLL): a waiting request holds its pool thread, so at
 * most a quarter of --threads (at least 1) wait at once. http_wait_take takes
 * a place (0), or -1 when all are taken or the server stops; http_wait_give
 * hands it back. http_wait sleeps until a http_poke after seen (http_pokes),
 * seconds pass, or the server stops (-1).
 */
int http_wait_take(struct request *req);
void http_wait_give(struct request *req);
uint64_t http_pokes(const struct request *req);
void http_poke(struct request *req);
int http_wait(struct request *req, uint64_t seen, double seconds);

/* Answer with body (steals it). */
int http_reply_json(struct request *req, unsigned status, json_t *body);
/* Answer with text of content_type (steals text, from tp_malloc), gzipped when accepted. */
int http_reply_text(struct request *req, unsigned status, const char *content_type, char *text, size_t len);
/* Answer with the error body {"error": {"code", "message"}}, plus extra members (steals extra, may be NULL). */
int http_reply_error(struct request *req, unsigned status, const char *code, json_t *extra,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Answer for a failed tp_err with its errbuf: the status comes from the code. */
int http_reply_fail(struct request *req, int rc, const struct tp_errbuf *err, json_t *extra);
/* The HTTP status for a tp_err code. */
unsigned http_status_of(int rc);
/* Answer with a response built by the handler (steals it); adds the common headers. */
int http_reply_response(struct request *req, unsigned status, struct MHD_Response *resp);

#endif
