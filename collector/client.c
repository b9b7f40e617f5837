/*
 * client.c: see client.h. A request that succeeded leaves its curl handle,
 * and the connection libcurl keeps in it, for the next (struct client_conns):
 * a backlog of chunks shipped one after another then goes on one connection,
 * not a TCP (and TLS) set-up each. A request that failed drops its handle: a
 * fresh one after a failure is one less state to reason about.
 *
 * Outcomes: 2xx OK; 4xx REJECTED (the request itself is wrong: a retry gets
 * the same answer); 5xx, 429 (the server's upload slots are taken) and
 * transport errors TRANSIENT (a server restarting or busy, a network blip:
 * try again later); FAILED when nothing was sent.
 */
#define _GNU_SOURCE	/* asprintf */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "port.h"

/* an answer is a small JSON document; more than this is not one of ours */
#define MAX_ANSWER (1u << 20)

/* Handles kept for the next requests: as many as requests go at once (upload: two). */
#define CONNS_MAX 4

struct client_conns {
	pthread_mutex_t mu;
	CURL *idle[CONNS_MAX];
	int n;
};

struct client_conns *client_conns_new(void)
{
	struct client_conns *k = calloc(1, sizeof(*k));

	if (k)
		pthread_mutex_init(&k->mu, NULL);
	return k;
}

static void conns_free(struct client_conns *k)
{
	if (!k)
		return;
	while (k->n)
		curl_easy_cleanup(k->idle[--k->n]);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

/* A kept handle, reset (its connection stays), else a new one; NULL when out of memory. */
static CURL *conn_take(const struct client *c)
{
	CURL *h = NULL;

	if (c->conns) {
		pthread_mutex_lock(&c->conns->mu);
		if (c->conns->n)
			h = c->conns->idle[--c->conns->n];
		pthread_mutex_unlock(&c->conns->mu);
	}
	if (!h)
		return curl_easy_init();
	curl_easy_reset(h);
	return h;
}

/* h back for the next request when keep (and there is room), else cleaned up. */
static void conn_give(const struct client *c, CURL *h, int keep)
{
	if (h && keep && c->conns) {
		pthread_mutex_lock(&c->conns->mu);
		if (c->conns->n < CONNS_MAX) {
			c->conns->idle[c->conns->n++] = h;
			h = NULL;
		}
		pthread_mutex_unlock(&c->conns->mu);
	}
	curl_easy_cleanup(h);
}

/* libcurl's sockets, close-on-exec: a kept connection is no file of the command `run` starts */
static curl_socket_t open_socket(void *payload, curlsocktype purpose, struct curl_sockaddr *a)
{
	(void)payload, (void)purpose;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static int env_long(const char *name, long min, long max, long *out)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		fprintf(stderr, "trainscope-collect: %s=%s: expected an integer from %ld to %ld\n", name, v,
			min, max);
		return -1;
	}
	*out = n;
	return 0;
}

int client_parse_rank(const char *s, int *out)
{
	char *end;
	long n;

	if (!s || !*s)
		return -1;
	errno = 0;
	n = strtol(s, &end, 10);
	if (errno || *end || n < 0 || n > 65535)
		return -1;
	*out = (int)n;
	return 0;
}

int client_valid_run(const char *name)
{
	size_t n = strlen(name);

	return n >= 1 && n <= 128 && strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					       "0123456789._-") == n;
}

void client_set_server(struct client *c, const char *url)
{
	size_t n = strlen(url);

	while (n > 0 && url[n - 1] == '/')
		n--;
	free(c->server);
	c->server = strndup(url, n);
}

int client_init(struct client *c)
{
	const char *v, *rank_var = "TRAINSCOPE_RANK";
	long attempts = 8, silence = 120;

	memset(c, 0, sizeof(*c));
	c->cancel_fd = -1;
	c->retry_base_ms = 500;
	c->retry_max_ms = 30000;
	v = getenv("TRAINSCOPE_SERVER");
	if (v && *v && tp_url_port(v) < 0) {
		fprintf(stderr, "trainscope-collect: TRAINSCOPE_SERVER=%s: expected http(s)://HOST[:PORT] with a port"
			" from 1 to 65535\n", v);
		return -1;
	}
	client_set_server(c, v && *v ? v : CLIENT_DEFAULT_SERVER);
	v = getenv("TRAINSCOPE_TOKEN");
	c->token = v && *v ? v : NULL;
	v = getenv("TRAINSCOPE_RUN");
	c->run = v && *v ? v : NULL;
	v = getenv(rank_var);
	if (!v || !*v)
		v = getenv(rank_var = "RANK");
	if (v && *v && client_parse_rank(v, &c->rank)) {
		fprintf(stderr, "trainscope-collect: %s=%s: expected a rank from 0 to 65535\n", rank_var, v);
		client_release(c);
		return -1;
	}
	if (!c->server || env_long("TRAINSCOPE_RETRY_BASE_MS", 1, 3600000, &c->retry_base_ms) ||
	    env_long("TRAINSCOPE_RETRY_MAX_MS", 1, 3600000, &c->retry_max_ms) ||
	    env_long("TRAINSCOPE_RETRY_ATTEMPTS", 0, INT_MAX, &attempts) ||
	    env_long("TRAINSCOPE_SILENCE_S", 1, 86400, &silence)) {
		client_release(c);
		return -1;
	}
	c->max_attempts = (int)attempts;
	c->silence_s = silence;
	c->conns = client_conns_new();	/* NULL: a handle a request, as before */
	return 0;
}

void client_release(struct client *c)
{
	free(c->server);
	c->server = NULL;
	conns_free(c->conns);
	c->conns = NULL;
}

void client_resp_release(struct client_resp *r)
{
	json_decref(r->json);
	free(r->body);
	r->json = NULL;
	r->body = NULL;
}

static size_t on_answer(char *data, size_t size, size_t nmemb, void *payload)
{
	struct client_resp *r = payload;
	size_t n = size * nmemb;
	char *b;

	if (r->len + n > MAX_ANSWER || !(b = realloc(r->body, r->len + n + 1)))
		return 0;
	memcpy(b + r->len, data, n);
	r->body = b;
	r->len += n;
	b[r->len] = 0;
	return n;
}

static int on_xfer(void *payload, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	const struct client_body *b = payload;

	(void)dltotal, (void)dlnow, (void)ultotal;
	return b->progress(ulnow, b->payload);
}

/* cancel_aborts: a readable cancel_fd ends the request in flight */
static int on_cancel(void *payload, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
	const struct client *c = payload;
	struct pollfd p = { .fd = c->cancel_fd, .events = POLLIN };

	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return poll(&p, 1, 0) > 0;
}

static int on_seek(void *payload, curl_off_t offset, int origin)
{
	const struct client_body *b = payload;

	/* curl rewinds to send the body again (a reused connection that closed); only 0 is needed */
	if (origin != SEEK_SET || offset != 0 || !b->rewind || b->rewind(b->payload))
		return CURL_SEEKFUNC_CANTSEEK;
	return CURL_SEEKFUNC_OK;
}

void client_escape(char *dst, size_t size, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)src;
	size_t n = 0;

	if (!size)
		return;
	for (; *u && n + 1 < size; u++) {
		int c1 = u[0] == 0xC2 && u[1] >= 0x80 && u[1] <= 0x9F;
		if (*u >= 0x20 && *u != 0x7f && !c1) {
			dst[n++] = (char)*u;
			continue;
		}
		if (c1)
			u++;	/* U+0080..U+009F: its second byte names it */
		if (n + 5 > size)
			break;
		dst[n++] = '\\';
		dst[n++] = 'x';
		dst[n++] = hex[*u >> 4];
		dst[n++] = hex[*u & 15];
	}
	dst[n] = 0;
}

/* The server's {"error":{"code","message"}} as "code: message", else the body's start; escaped. */
static void answer_error(struct client_resp *r)
{
	json_t *e = json_object_get(r->json, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	char raw[sizeof(r->error)];

	if (code && msg)
		snprintf(raw, sizeof(raw), "%ld %s: %s", r->status, code, msg);
	else
		snprintf(raw, sizeof(raw), "%ld: %.200s", r->status, r->body ? r->body : "");
	client_escape(r->error, sizeof(r->error), raw);
}

enum client_outcome client_try(const struct client *c, const char *method, const char *path,
			       const struct client_body *body, struct client_resp *out)
{
	struct curl_slist *hdrs = NULL, *h;
	char *url = NULL, *auth = NULL, curl_err[CURL_ERROR_SIZE] = "", ce[64];
	CURL *curl;
	CURLcode cc;

	memset(out, 0, sizeof(*out));
	out->outcome = CLIENT_FAILED;
	if (!(curl = conn_take(c)) || asprintf(&url, "%s%s", c->server, path) < 0) {
		url = NULL;
		snprintf(out->error, sizeof(out->error), "out of memory");
		goto out;
	}
	if (c->token && (asprintf(&auth, "Authorization: Bearer %s", c->token) < 0 ||
			 !(hdrs = curl_slist_append(hdrs, auth)))) {
		snprintf(out->error, sizeof(out->error), "out of memory");
		goto out;
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
	/*
	 * A stalled transfer (no byte either way for silence_s, 120 s unless
	 * TRAINSCOPE_SILENCE_S says) is given up, not retried: a server that
	 * took the connection and says nothing kept a request waiting 300 s an
	 * attempt, 8 attempts (issue 50). The server answers an upload once it
	 * is ingested, a while after its last byte for a trace of many GB: set
	 * it higher for those.
	 */
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, c->silence_s > 0 ? c->silence_s : 120L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "trainscope-collect");
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_answer);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
	if (body) {
		curl_easy_setopt(curl, CURLOPT_POST, 1L);
		curl_easy_setopt(curl, CURLOPT_READFUNCTION, body->read);
		curl_easy_setopt(curl, CURLOPT_READDATA, body->payload);
		curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(curl, CURLOPT_SEEKDATA, (void *)body);
		if (body->size >= 0)
			curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, body->size);
		else if ((h = curl_slist_append(hdrs, "Transfer-Encoding: chunked")))
			hdrs = h;
		if (body->encoding && snprintf(ce, sizeof(ce), "Content-Encoding: %s", body->encoding) < (int)sizeof(ce) &&
		    (h = curl_slist_append(hdrs, ce)))
			hdrs = h;
		if (body->progress) {
			curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
			curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
			curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)body);
		}
	}
	if (c->cancel_aborts && c->cancel_fd >= 0 && !(body && body->progress)) {
		curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_cancel);
		curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)c);
	}
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	cc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status);
	if (out->body)
		out->json = json_loadb(out->body, out->len, 0, NULL);
	if (cc == CURLE_ABORTED_BY_CALLBACK || cc == CURLE_READ_ERROR) {
		/* our own callbacks stopped it: nothing the server said matters */
		snprintf(out->error, sizeof(out->error), "%s", curl_err[0] ? curl_err : curl_easy_strerror(cc));
	} else if (cc == CURLE_OPERATION_TIMEDOUT && out->status < 200) {
		/* no answer (a "100 Continue" is none) for silence_s */
		out->outcome = CLIENT_TRANSIENT;
		out->silent = 1;
		snprintf(out->error, sizeof(out->error), "%s sent nothing for %ld s (TRAINSCOPE_SILENCE_S); gave up",
			 c->server, c->silence_s > 0 ? c->silence_s : 120L);
	} else if (out->status == 0) {
		out->outcome = CLIENT_TRANSIENT;
		snprintf(out->error, sizeof(out->error), "%s: %s", c->server,
			 curl_err[0] ? curl_err : curl_easy_strerror(cc));
	} else if (out->status >= 500 || out->status == 429 || (out->status < 300 && cc != CURLE_OK)) {
		out->outcome = CLIENT_TRANSIENT;
		answer_error(out);
	} else if (out->status < 300) {
		out->outcome = CLIENT_OK;
	} else {
		/* 4xx (and 3xx, which we do not follow): the same request gets the same answer.
		 * An early answer (401 before the body) may end in a send error: the answer counts. */
		out->outcome = CLIENT_REJECTED;
		answer_error(out);
	}
out:
	curl_slist_free_all(hdrs);
	conn_give(c, curl, out->outcome == CLIENT_OK);
	free(auth);
	free(url);
	return out->outcome;
}

static long long monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long client_backoff_ms(const struct client *c, int n)
{
	long d = c->retry_base_ms;

	while (--n > 0 && d < c->retry_max_ms)
		d *= 2;
	if (d > c->retry_max_ms)
		d = c->retry_max_ms;
	/* jitter: ranks that lost the server together do not come back together */
	return d / 2 + (long)(random() % (d / 2 + 1));
}

int client_sleep(const struct client *c, long ms)
{
	struct timespec now, end;
	struct pollfd p = { .fd = c->cancel_fd, .events = POLLIN };
	long left;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000;
	if (end.tv_nsec >= 1000000000) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
		if (left <= 0)
			return 0;
		if (poll(&p, c->cancel_fd >= 0 ? 1 : 0, (int)(left > INT_MAX ? INT_MAX : left)) > 0)
			return 1;
	}
}

long long client_wait_bound_ms(const struct client *c)
{
	long long sum = 0, d = c->retry_base_ms;
	int n;

	if (!c->max_attempts)
		return -1;
	for (n = 1; n < c->max_attempts && d < c->retry_max_ms; n++, d *= 2)
		sum += d;
	/* the waits left are all at the cap */
	return sum + (long long)(c->max_attempts - n) * c->retry_max_ms;
}

/* What a transient failure was, for a line: "server not reachable (curl's reason)" or the 5xx/429 answer. */
static void transient_reason(const struct client_resp *r, char *buf, size_t size)
{
	if (r->status == 0)
		snprintf(buf, size, "server not reachable (%s)", r->error);
	else
		snprintf(buf, size, "server answered %s", r->error);
}

enum client_outcome client_request(const struct client *c, const char *method, const char *path,
				   const struct client_body *body, struct client_resp *out)
{
	long long started = monotonic_ms(), bound = client_wait_bound_ms(c);
	char why[600];
	int attempt;

	for (attempt = 1;; attempt++) {
		enum client_outcome o = client_try(c, method, path, body, out);
		out->attempts = attempt;
		out->elapsed_ms = monotonic_ms() - started;
		if (o != CLIENT_TRANSIENT || out->silent || (c->max_attempts && attempt >= c->max_attempts))
			return o;
		long ms = client_backoff_ms(c, attempt);
		if (c->verbose) {
			transient_reason(out, why, sizeof(why));
			if (bound < 0)
				fprintf(stderr, "trainscope-collect: %s %s: %s; retrying in %ld ms (attempt %d, no limit)\n",
					method, path, why, ms, attempt);
			else
				fprintf(stderr, "trainscope-collect: %s %s: %s; retrying in %ld ms (attempt %d of %d, at most"
					" %.1f s of waiting in all)\n", method, path, why, ms, attempt, c->max_attempts,
					(double)bound / 1000);
		}
		client_resp_release(out);
		if (client_sleep(c, ms)) {
			snprintf(out->error, sizeof(out->error), "interrupted");
			return out->outcome = CLIENT_FAILED;
		}
		if (body && body->rewind && body->rewind(body->payload)) {
			snprintf(out->error, sizeof(out->error), "cannot read the body again");
			return out->outcome = CLIENT_FAILED;
		}
	}
}

void client_print_error(const char *what, const struct client_resp *r)
{
	char why[600];

	if (r->outcome == CLIENT_TRANSIENT && r->attempts > 1) {
		transient_reason(r, why, sizeof(why));
		fprintf(stderr, "trainscope-collect: %s: gave up after %d attempts in %.1f s: %s\n", what, r->attempts,
			(double)r->elapsed_ms / 1000, why);
		return;
	}
	fprintf(stderr, "trainscope-collect: %s: %s\n", what, r->error[0] ? r->error : "failed");
}
