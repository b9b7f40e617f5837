/*
 * routes.h: a route table and its matcher: the server's table is
 * server_routes (routes.c, the only file that names handlers); the matcher
 * (router.c) takes the table it is given.
 *
 * A pattern is a path with {run} and {id} segments. The dispatcher checks,
 * before any handler runs: the path (404), the method (405), the {run} name
 * ([A-Za-z0-9._-]{1,128}, else 400) and {id} (digits), the token (401: a
 * write token for ROUTE_WRITE routes, a read token for the rest when the
 * server has one; 403: a read token on a write), ?format= (csv only where
 * ROUTE_CSV, else 400), and that only ROUTE_BODY routes get a body (413).
 */
#ifndef ROUTES_H
#define ROUTES_H

#include <stddef.h>

struct request;

#define ROUTE_MAX_PARAMS 2

enum route_flags {
	ROUTE_WRITE = 1 << 0,	/* needs the write token when one is configured */
	ROUTE_BODY = 1 << 1,	/* takes a request body, streamed to on_data */
	ROUTE_UPLOAD = 1 << 2,	/* an upload: counted as such in metrics */
	ROUTE_OPEN = 1 << 3,	/* never needs a token (health checks) */
	ROUTE_CACHE = 1 << 4,	/* a read whose answer depends only on the store (http.c caches it) */
	ROUTE_CSV = 1 << 5,	/* answers ?format=csv; elsewhere anything but json is refused (400) */
	ROUTE_DERIVED = 1 << 6,	/* reads a rank's derived tables: its run's marked ranks are derived first */
	ROUTE_LONGPOLL = 1 << 7,	/* takes ?wait= as seconds to wait (its handler checks it), not 0 or 1 */
};

struct route {
	const char *method;
	const char *pattern;
	unsigned flags;
	/* first call: answer now, or (ROUTE_BODY) prepare for the body */
	int (*on_begin)(struct request *req);
	/* ROUTE_BODY: the next piece of the body */
	int (*on_data)(struct request *req, const char *data, size_t len);
	/* ROUTE_BODY: the body is complete; answer */
	int (*on_end)(struct request *req);
	/* the request is over (completed or not): free req->state */
	void (*cleanup)(struct request *req, int completed);
};

struct route_table {
	const struct route *route;
	size_t n;
};

/* routes.c: the server's routes, which main.c hands to server_start */
extern const struct route_table server_routes;

enum route_match { ROUTE_FOUND, ROUTE_NO_PATH, ROUTE_NO_METHOD, ROUTE_BAD_PARAM };

/*
 * Find t's route for method and path, filling params (each a new string the
 * caller frees). On ROUTE_NO_METHOD, allow gets the allowed methods.
 */
enum route_match route_match(const struct route_table *t, const char *method, const char *path,
			     const struct route **out, char *params[], char *allow, size_t allow_size,
			     const char **bad_param);

/* r's index in t (for metrics), or -1 when r is NULL or not t's. */
int route_index(const struct route_table *t, const struct route *r);

/* 1 when s is a valid run name. */
int route_valid_run_name(const char *s);

#endif
