/*
 * h_captures.c: on-demand captures (issue 52; docs/api.md, "Captures"):
 *
 *   POST   /api/v1/runs/{run}/captures              ask (write): steps or seconds, ranks, activities
 *   GET    /api/v1/runs/{run}/captures              the run's, newest first
 *   GET    /api/v1/runs/{run}/captures/next?rank=R&wait=S   a collector takes the next (write);
 *          the poll creates the run when it has none, waiting for its first capture
 *          (store_capture_poll), and stamps when a collector last polled
 *   GET    /api/v1/captures/{id}                    one
 *   DELETE /api/v1/captures/{id}                    cancel a pending one (write)
 *   POST   /api/v1/captures/{id}/ranks/{rank}       a rank ends its part (write)
 *
 * What time decides (expiry, a rank gone quiet) is settled by a sweep before
 * each of them reads or takes (store_captures_sweep). Every change is logged
 * with the capture's id, run, ranks and who asked.
 */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "handlers.h"
#include "http.h"

#define LOG_PREFIX "captures"

#define BODY_MAX (64 * 1024)
#define RANKS_MAX 4096
#define RANK_MAX 65535
#define WAIT_MAX 30
#define RETRY_AFTER "5"		/* seconds a collector turned away from the long poll waits */

static const char *const activities[] = { "cpu", "cuda", "memory", "stacks" };
#define NACTIVITIES (sizeof(activities) / sizeof(activities[0]))

/*
 * A pending capture expires, and a rank that took one and never ended it
 * fails, this long after (plus the capture's seconds, from when the rank took
 * it): 600 s, or TRAINSCOPE_CAPTURE_TTL seconds (1 to 3600; the tests use 2).
 */
static int64_t ttl_ns(void)
{
	const char *v = getenv("TRAINSCOPE_CAPTURE_TTL");
	long s = v ? strtol(v, NULL, 10) : 0;

	return (s >= 1 && s <= 3600 ? s : 600) * 1000000000LL;
}

/* ---- the capture object ---- */

static json_t *secs(int64_t ns)
{
	return json_real((double)ns / 1e9);
}

/* ",0,3," as [0, 3]; "all" as itself */
static json_t *ranks_json(const char *ranks)
{
	json_t *a;

	if (!strcmp(ranks, "all"))
		return json_string("all");
	a = json_array();
	for (const char *p = ranks; a && *p == ',' && p[1]; p = strchr(p + 1, ','))
		json_array_append_new(a, json_integer(atoi(p + 1)));
	return a;
}

static json_t *activities_json(const char *s)
{
	json_t *a = json_array();
	const char *p = s;

	while (a && *p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		json_array_append_new(a, json_stringn(p, n));
		p += n + (e != NULL);
	}
	return a;
}

static json_t *nullable(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *capture_json(const struct store_capture *c)
{
	json_t *by = json_array(), *o;
	size_t i, k;

	for (i = 0; by && i < c->nby_rank; i++) {
		const struct store_capture_rank *p = &c->by_rank[i];
		json_t *arts = json_array();
		for (k = 0; arts && k < p->nartifacts; k++)
			json_array_append_new(arts, json_integer(p->artifacts[k]));
		json_array_append_new(by, json_pack("{s:i, s:s, s:o, s:o, s:o, s:o*}", "rank", p->rank, "state", p->state,
						    "reason", nullable(p->reason), "started_at", secs(p->started_ns),
						    "ended_at", p->ended_ns ? secs(p->ended_ns) : json_null(),
						    "artifacts", arts));
	}
	o = json_pack("{s:I, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:o*}", "id", (json_int_t)c->id,
		      "run", c->run, "created_at", secs(c->created_ns), "requested_by", nullable(c->requested_by),
		      "token", nullable(c->token), "steps", c->steps ? json_integer(c->steps) : json_null(),
		      "seconds", c->seconds ? json_integer(c->seconds) : json_null(), "ranks", ranks_json(c->ranks),
		      "activities", activities_json(c->activities), "expires_at", secs(c->expires_ns), "state", c->state,
		      "by_rank", by);
	return o;
}

/* One line on the log for what happened to c (client: the address of the request that did it, or NULL). */
static void log_capture(const struct store_capture *c, const char *what, const char *client)
{
	char ranks[64];
	size_t n = strlen(c->ranks);

	/* ",0,3," as "0,3" (cut when long) */
	if (!strcmp(c->ranks, "all") || n < 2)
		snprintf(ranks, sizeof(ranks), "%s", c->ranks);
	else
		snprintf(ranks, sizeof(ranks), "%.*s%s", (int)(n - 2 < 50 ? n - 2 : 50), c->ranks + 1, n - 2 > 50 ? "..." : "");
	tp_info("capture %lld of run '%s' %s; ranks %s; requested by '%s', token %s, from %s%s%s", (long long)c->id,
		c->run, what, ranks, c->requested_by ? c->requested_by : "", c->token ? c->token : "none",
		c->client ? c->client : "unknown", client ? "; by " : "", client ? client : "");
}

static void log_swept(const struct store_capture *c, const char *what, void *arg)
{
	(void)arg;
	log_capture(c, what, NULL);
}

/* Settle what time decides; a failure is logged and the request goes on with what is stored. */
static void sweep(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_writer *w;

	if (store_writer_open(http_store(req), &w, &err))
		return;
	if (store_captures_sweep(w, tp_now_ns(), ttl_ns(), log_swept, NULL, &err))
		tp_warn("could not settle expired captures: %s", err.msg);
	store_writer_close(w);
}

/* Answer {"capture": ...} for id with status, logging what (when not NULL) with its details. */
static int answer_one(struct request *req, int64_t id, unsigned status, const char *what)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct store_capture *c = NULL;
	size_t n = 0;
	json_t *body = NULL;

	if (h_reader_open(req, &r))
		return 0;
	if (!store_captures_read(r, NULL, id, &c, &n, &err)) {
		if (what) {
			char client[64];
			http_client(req, client, sizeof(client));
			log_capture(c, what, client);
		}
		if (!(body = json_pack("{s:o}", "capture", capture_json(c))))
			tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	store_captures_free(c, n);
	if (!body) {
		store_reader_close(r);
		return http_reply_fail(req, err.rc ? err.rc : TP_ERR_NOMEM, &err, NULL);
	}
	store_reader_close(r);
	return http_reply_json(req, status, body);
}

/* ---- request bodies (small JSON, read whole) ---- */

int h_capture_body_begin(struct request *req)
{
	return h_body_begin(req, BODY_MAX);
}

/* The body as a JSON object (new reference), or NULL when answered 400/413. */
static json_t *body_object(struct request *req)
{
	struct h_body *b = req->state;
	json_error_t jerr;
	json_t *j;

	if (b->too_big) {
		http_reply_error(req, 413, "body_too_large", NULL, "the body exceeds %d bytes", BODY_MAX);
		return NULL;
	}
	j = b->len ? json_loadb(b->data, b->len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		http_reply_error(req, 400, "invalid_json", NULL, "the body must be a JSON object");
		return NULL;
	}
	return j;
}

/* 1 when s holds a control character (it would break the log line it goes on) */
static int has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* ",0,3," from the array (sorted, each once) into *out (tp_malloc); NULL when fine, else what is wrong. */
static const char *ranks_text(json_t *v, char **out)
{
	size_t n = json_array_size(v), i, k = 0, len = 1;
	int *r;
	char *s;

	if (!n || n > RANKS_MAX)
		return "'ranks' must be \"all\" or an array of 1 to 4096 ranks";
	if (!(r = tp_malloc(n * sizeof(*r))))
		return "out of memory";
	for (i = 0; i < n; i++) {
		json_t *e = json_array_get(v, i);
		if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) > RANK_MAX) {
			tp_free(r);
			return "'ranks' must hold integers from 0 to 65535";
		}
		r[i] = (int)json_integer_value(e);
	}
	qsort(r, n, sizeof(*r), cmp_int);
	if (!(s = tp_malloc(n * 7 + 2))) {
		tp_free(r);
		return "out of memory";
	}
	s[0] = ',';
	for (i = 0; i < n; i++)
		if (!i || r[i] != r[k])
			len += (size_t)sprintf(s + len, "%d,", r[k = i]);
	tp_free(r);
	*out = s;
	return NULL;
}

/* "cpu,cuda,..." in the order of activities[], each once; NULL when fine, else what is wrong */
static const char *activities_text(json_t *v, char out[32])
{
	unsigned seen = 0;
	size_t i, k, len = 0;

	if (!json_is_array(v) || !json_array_size(v))
		return "'activities' must be a non-empty array of cpu, cuda, memory, stacks";
	for (i = 0; i < json_array_size(v); i++) {
		const char *a = json_string_value(json_array_get(v, i));
		for (k = 0; a && k < NACTIVITIES && strcmp(a, activities[k]); k++)
			;
		if (!a || k == NACTIVITIES)
			return "'activities' may name only cpu, cuda, memory and stacks";
		seen |= 1u << k;
	}
	out[0] = 0;
	for (k = 0; k < NACTIVITIES; k++)
		if (seen & (1u << k))
			len += (size_t)snprintf(out + len, 32 - len, "%s%s", len ? "," : "", activities[k]);
	return NULL;
}

/* A whole number from lo to hi in j (0 with *out set), else -1 */
static int whole(json_t *j, long lo, long hi, int *out)
{
	if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
		return -1;
	*out = (int)json_integer_value(j);
	return 0;
}

int h_capture_create_end(struct request *req)
{
	json_t *j = body_object(req), *v;
	struct store_capture c = { .run = req->params[0] };
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	const char *key, *bad = NULL;
	char acts[32] = "cpu,cuda", token[9], client[64];
	char *ranks = NULL;
	int64_t id = 0;
	int rc;

	if (!j)
		return 0;
	json_object_foreach(j, key, v) {
		if (strcmp(key, "steps") && strcmp(key, "seconds") && strcmp(key, "ranks") && strcmp(key, "activities") &&
		    strcmp(key, "requested_by")) {
			bad = "unknown member: the body takes steps or seconds, ranks, activities, requested_by";
			break;
		}
	}
	if (!bad && !json_object_get(j, "steps") == !json_object_get(j, "seconds"))
		bad = "give exactly one of 'steps' (1 to 10000) and 'seconds' (1 to 3600)";
	else if (!bad && (v = json_object_get(j, "steps")) && whole(v, 1, 10000, &c.steps))
		bad = "'steps' must be an integer from 1 to 10000";
	else if (!bad && (v = json_object_get(j, "seconds")) && whole(v, 1, 3600, &c.seconds))
		bad = "'seconds' must be an integer from 1 to 3600";
	if (!bad && (v = json_object_get(j, "ranks")) && !(json_is_string(v) && !strcmp(json_string_value(v), "all")))
		bad = json_is_array(v) ? ranks_text(v, &ranks) : "'ranks' must be \"all\" or an array of ranks";
	if (!bad && (v = json_object_get(j, "activities")))
		bad = activities_text(v, acts);
	if (!bad && (v = json_object_get(j, "requested_by"))) {
		if (!json_is_string(v) || json_string_length(v) > 200 || has_control(json_string_value(v)))
			bad = "'requested_by' must be a string of at most 200 characters, no control characters";
		else
			c.requested_by = (char *)json_string_value(v);
	}
	if (bad) {
		rc = http_reply_error(req, 400, "invalid_capture", NULL, "%s", bad);
		json_decref(j);
		tp_free(ranks);
		return rc;
	}
	c.ranks = ranks ? ranks : (char *)"all";
	c.activities = acts;
	c.token = http_token_prefix(req, token) ? token : NULL;
	http_client(req, client, sizeof(client));
	c.client = client;
	c.created_ns = tp_now_ns();
	c.expires_ns = c.created_ns + ttl_ns();
	if (!(rc = store_writer_open(http_store(req), &w, &err))) {
		rc = store_capture_create(w, &c, &id, &err);
		store_writer_close(w);
	}
	json_decref(j);
	tp_free(ranks);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	/* the collectors waiting in GET .../captures/next look again */
	http_poke(req);
	return answer_one(req, id, 201, "created");
}

int h_captures_list(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct store_capture *c = NULL;
	size_t n = 0, i;
	json_t *a = NULL, *polled = NULL;
	int64_t polled_ns = 0, now = tp_now_ns();

	sweep(req);
	if (h_reader_open(req, &r))
		return 0;
	if (!store_run_polled(r, req->params[0], &polled_ns, &err) &&
	    !store_captures_read(r, req->params[0], 0, &c, &n, &err) && (a = json_array()))
		for (i = 0; i < n; i++)
			json_array_append_new(a, capture_json(&c[i]));
	store_captures_free(c, n);
	/* when a collector last polled (stamped every 10 s at most), and how long ago by this server's clock */
	if (a && polled_ns) {
		int64_t ago_s = (now - polled_ns) / 1000000000;
		polled = json_pack("{s:o, s:I}", "at", secs(polled_ns), "ago_s", (json_int_t)(ago_s > 0 ? ago_s : 0));
	}
	return h_answer(req, a ? json_pack("{s:o, s:o}", "captures", a, "polled", polled ? polled : json_null()) : NULL,
			r, &err, NULL, 0);
}

int h_capture_get(struct request *req)
{
	sweep(req);
	return answer_one(req, strtoll(req->params[0], NULL, 10), 200, NULL);
}

int h_capture_cancel(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	int64_t id = strtoll(req->params[0], NULL, 10);
	int rc;

	sweep(req);
	if (!(rc = store_writer_open(http_store(req), &w, &err))) {
		rc = store_capture_cancel(w, id, &err);
		store_writer_close(w);
	}
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	return answer_one(req, id, 200, "cancelled");
}

/* 204: nothing to take (retry: turned away from the long poll, come back in RETRY_AFTER seconds) */
static int no_capture(struct request *req, int retry)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);

	if (!resp)
		return -1;
	if (retry)
		MHD_add_response_header(resp, "Retry-After", RETRY_AFTER);
	return http_reply_response(req, 204, resp);
}

/*
 * The run polled for at now: created when it has no row (listed from then on, waiting for its
 * first capture, as issue 52 asks: in on-demand mode nothing is uploaded before a capture), its
 * polled_ns stamped. A run that appears is logged.
 */
static int poll_stamp(struct request *req, long long rank, struct tp_errbuf *err)
{
	struct store_writer *w;
	int rc, appeared = 0;

	if ((rc = store_writer_open(http_store(req), &w, err)))
		return rc;
	rc = store_capture_poll(w, req->params[0], tp_now_ns(), &appeared, err);
	store_writer_close(w);
	if (!rc && appeared) {
		char client[64];
		http_client(req, client, sizeof(client));
		tp_info("run '%s' listed, waiting for its first capture: rank %lld's collector polled from %s",
			req->params[0], rank, client);
	}
	return rc;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int h_capture_next(struct request *req)
{
	struct tp_errbuf err = { 0 };
	long long rank, wait;
	double deadline;
	int64_t id = 0;
	int rc = 0, waiting = 0, waited = 0;

	if (!strcmp(req->method, "HEAD"))
		return http_reply_error(req, 405, "method_not_allowed", NULL, "HEAD would take a capture; use GET");
	if (!http_arg(req, "rank"))
		return http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter 'rank' is required");
	if (h_arg_int(req, "rank", 0, RANK_MAX, 0, &rank) || h_arg_int(req, "wait", 0, WAIT_MAX, 0, &wait))
		return 0;
	if ((rc = poll_stamp(req, rank, &err)))
		return http_reply_fail(req, rc, &err, NULL);
	/* a waiting request holds its pool thread: past the cap, no wait */
	if (wait && http_wait_take(req))
		return no_capture(req, 1);
	waiting = wait > 0;
	deadline = mono() + (double)wait;
	for (;;) {
		uint64_t seen = http_pokes(req);
		struct store_writer *w;
		double left;
		/* once: what time settles changes no capture this rank may take (expired ones are not offered) */
		if (!waited++)
			sweep(req);
		if (!(rc = store_writer_open(http_store(req), &w, &err))) {
			rc = store_capture_take(w, req->params[0], (int)rank, tp_now_ns(), &id, &err);
			store_writer_close(w);
		}
		if (rc || id || (left = deadline - mono()) <= 0)
			break;
		/* woken by a capture made here; sharing the database, a second at most, for one made by another server */
		if (http_wait(req, seen, left < 1 || !store_shared(http_store(req)) ? left : 1))
			break;
	}
	if (waiting)
		http_wait_give(req);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	if (!id)
		return no_capture(req, 0);
	{
		char what[32];
		snprintf(what, sizeof(what), "taken by rank %lld", rank);
		return answer_one(req, id, 200, what);
	}
}

int h_capture_rank_end(struct request *req)
{
	json_t *j = body_object(req), *st, *reason;
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	const char *state, *why = NULL, *p = req->params[1];
	int64_t id = strtoll(req->params[0], NULL, 10);
	long rank = 0;
	char what[256];
	int rc;

	if (!j)
		return 0;
	for (; *p >= '0' && *p <= '9' && rank <= RANK_MAX; p++)
		rank = rank * 10 + (*p - '0');
	st = json_object_get(j, "state");
	state = json_string_value(st);
	reason = json_object_get(j, "reason");
	if (*p || !*req->params[1] || rank > RANK_MAX)
		rc = http_reply_error(req, 400, "invalid_parameter", NULL, "the rank must be an integer from 0 to 65535");
	else if (!state || (strcmp(state, "done") && strcmp(state, "failed")))
		rc = http_reply_error(req, 400, "invalid_capture", NULL, "'state' must be \"done\" or \"failed\"");
	else if (reason && !json_is_null(reason) &&
		 (!json_is_string(reason) || json_string_length(reason) > 1000 || has_control(json_string_value(reason))))
		rc = http_reply_error(req, 400, "invalid_capture", NULL,
				      "'reason' must be a string of at most 1000 characters, no control characters");
	else if (json_object_size(j) > (size_t)(1 + (reason != NULL)))
		rc = http_reply_error(req, 400, "invalid_capture", NULL, "the body takes 'state' and 'reason' only");
	else
		rc = 1;
	if (rc != 1) {
		json_decref(j);
		return rc;
	}
	why = json_string_value(reason);
	if (!(rc = store_writer_open(http_store(req), &w, &err))) {
		rc = store_capture_end(w, id, (int)rank, !strcmp(state, "done"), why, tp_now_ns(), &err);
		store_writer_close(w);
	}
	snprintf(what, sizeof(what), "rank %ld %s%s%.200s", rank, state, why ? ": " : "", why ? why : "");
	json_decref(j);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	return answer_one(req, id, 200, what);
}
