/*
 * client.h: the HTTP side of trainscope-collect, shared by every subcommand:
 * where the server is (flags over TRAINSCOPE_* environment variables), one
 * request with libcurl, retries with exponential backoff and jitter on
 * connection errors and 5xx (never on 4xx), and the server's JSON error
 * printed as one line on stderr.
 *
 *   client_init(&c)                  defaults from the environment
 *   ... set c.server / c.run / c.rank from flags ...
 *   client_request(&c, "GET", path, NULL, &r)      retried until c.max_attempts
 *   client_try(&c, "POST", path, &body, &r)        one attempt (callers that
 *                                                  schedule their own retries)
 *   client_resp_release(&r); client_release(&c)
 *
 * Needs curl_global_init() first (main does it).
 */
#ifndef CLIENT_H
#define CLIENT_H

#include <curl/curl.h>
#include <jansson.h>

#define CLIENT_DEFAULT_SERVER "http://127.0.0.1:8470"

/* Exit codes of the subcommands (documented in --help and README.md). */
enum client_exit {
	CLIENT_EXIT_OK = 0,
	CLIENT_EXIT_REJECTED = 1,	/* the server answered 4xx: its message was printed */
	CLIENT_EXIT_USAGE = 2,
	CLIENT_EXIT_UNREACHABLE = 3,	/* connection errors or 5xx until the retries ran out */
	CLIENT_EXIT_LOCAL = 4,		/* a local file, folder or system call failed */
};

struct client {
	char *server;		/* base URL without a trailing slash; owned */
	const char *token;	/* borrowed (environment); NULL: no Authorization header */
	const char *run;	/* borrowed; NULL until set */
	int rank;
	long retry_base_ms;	/* first backoff; doubles per attempt up to retry_max_ms */
	long retry_max_ms;
	int max_attempts;	/* 0: retry for ever */
	int cancel_fd;		/* readable: stop waiting between attempts; -1: none */
	int cancel_aborts;	/* 1: a readable cancel_fd also ends a request in flight (CLIENT_FAILED) */
	int verbose;		/* say each retry on stderr, with the wait left (client_request) */
	long silence_s;		/* a request that gets no byte for this long is given up, not retried */
	/* curl handles kept between requests, with their connections (client.c); owned: a copy of a
	 * client takes its own (client_conns_new) before either is released. NULL: none kept */
	struct client_conns *conns;
};

struct client_conns *client_conns_new(void);

/*
 * Defaults: TRAINSCOPE_SERVER, TRAINSCOPE_TOKEN, TRAINSCOPE_RUN, rank from
 * TRAINSCOPE_RANK else RANK else 0, backoff from TRAINSCOPE_RETRY_BASE_MS
 * (500) and TRAINSCOPE_RETRY_MAX_MS (30000), TRAINSCOPE_RETRY_ATTEMPTS (8),
 * TRAINSCOPE_SILENCE_S (120).
 * 0, or -1 with a message on stderr when an environment value is malformed
 * (then nothing is left to release).
 */
int client_init(struct client *c);
void client_release(struct client *c);
/* Replace the server URL (copied; a trailing slash is dropped). */
void client_set_server(struct client *c, const char *url);

/* 1 when name is a valid run name ([A-Za-z0-9._-]{1,128}). */
int client_valid_run(const char *name);
/* Parse a rank (0..65535); 0 on success, -1 otherwise. */
int client_parse_rank(const char *s, int *out);

/* A request body read by a callback: the same contract as CURLOPT_READFUNCTION. */
struct client_body {
	size_t (*read)(char *buf, size_t size, size_t nitems, void *payload);
	int (*rewind)(void *payload);	/* back to the first byte: 0, or -1 */
	curl_off_t size;		/* -1: unknown (sent chunked) */
	void *payload;
	/* optional progress: sent bytes so far (0 to size) */
	int (*progress)(curl_off_t sent, void *payload);
	/* the Content-Encoding header, NULL for none: "gzip" when the bytes are gzip'd on the way */
	const char *encoding;
};

enum client_outcome {
	CLIENT_OK,		/* 2xx */
	CLIENT_REJECTED,	/* 4xx: do not retry */
	CLIENT_TRANSIENT,	/* connection error or 5xx: worth retrying */
	CLIENT_FAILED,		/* could not even try (local error), or cancelled */
};

struct client_resp {
	enum client_outcome outcome;
	long status;		/* 0 when no answer came */
	json_t *json;		/* the answer's body as JSON, new; NULL when not JSON */
	char *body;		/* the raw answer body, NUL-terminated; owned */
	size_t len;
	char error[512];	/* why, for REJECTED/TRANSIENT/FAILED: the server's message or curl's */
	int attempts;		/* requests sent by client_request (1 by client_try) */
	long long elapsed_ms;	/* client_request's time from its first attempt to its answer */
	int silent;		/* no byte came for silence_s: given up, not retried */
};

/*
 * src into dst (always NUL-terminated), each control character (C0, DEL,
 * and C1 written in UTF-8) as \xNN: a server's message never reaches a
 * terminal as escape sequences.
 */
void client_escape(char *dst, size_t size, const char *src);

/*
 * One request to c->server + path (path starts with '/'). body may be NULL.
 * Always fills out (release it with client_resp_release). Returns out->outcome.
 */
enum client_outcome client_try(const struct client *c, const char *method, const char *path,
			       const struct client_body *body, struct client_resp *out);
/*
 * client_try, retried on CLIENT_TRANSIENT after client_backoff_ms(attempt)
 * (rewinding the body first) until max_attempts or cancel_fd is readable
 * (then CLIENT_FAILED with error "interrupted"). With c->verbose each retry
 * is a line on stderr: "METHOD PATH: server not reachable (why); retrying in
 * N ms (attempt K of M, at most S s of waiting in all)".
 */
enum client_outcome client_request(const struct client *c, const char *method, const char *path,
				   const struct client_body *body, struct client_resp *out);
void client_resp_release(struct client_resp *r);

/* The wait before attempt n+1 after n failed ones (n >= 1): base*2^(n-1), capped, jittered to [d/2, d]. */
long client_backoff_ms(const struct client *c, int n);
/* The most client_request waits between its attempts in all (the unjittered sum); -1 without a limit. */
long long client_wait_bound_ms(const struct client *c);
/* Wait ms, or less if cancel_fd becomes readable: 0 when the whole wait passed, 1 when cancelled. */
int client_sleep(const struct client *c, long ms);

/*
 * "trainscope-collect: WHAT: 401 unauthorized: the message" on stderr; after
 * retries, "trainscope-collect: WHAT: gave up after 8 attempts in 46.2 s:
 * server not reachable (...)".
 */
void client_print_error(const char *what, const struct client_resp *r);

#endif
