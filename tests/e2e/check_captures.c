/*
 * check_captures.c: on-demand captures through the real server (issue 52,
 * docs/api.md "Captures"): create, list, get, bad bodies; a collector's
 * next with and without wait, a second rank, done and failed, cancel; the
 * long poll's cap; expiry, and a rank that took a capture and went quiet
 * (TRAINSCOPE_CAPTURE_TTL=2); read tokens refused on every write; uploads
 * with ?capture=ID; a run's delete taking its captures; a restart
 * mid-capture; a stop during a long poll; the log lines; a collector's poll
 * listing a run that has no upload yet.
 */
#define _GNU_SOURCE	/* asprintf */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"
#include "suites.h"
#include "testutil.h"

#define TTL 2	/* seconds: TRAINSCOPE_CAPTURE_TTL of every server here */

static struct tu_server srv;
static char *logdir, logpath[600];

/* Start s with extra, its stderr (the log) appended to logpath. */
static void start_logged(struct tu_server *s, const char *const extra[], int restart)
{
	int saved = dup(2), fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);

	ck_assert(saved >= 0 && fd >= 0);
	setenv("TRAINSCOPE_CAPTURE_TTL", "2", 1);
	dup2(fd, 2);
	ck_assert_int_eq(restart ? tu_server_restart(s, extra) : tu_server_start(s, extra), 0);
	dup2(saved, 2);
	close(saved);
	close(fd);
}

static void start(void)
{
	static const char *const extra[] = { "--log-level", "info", NULL };
	logdir = tu_tmpdir();
	snprintf(logpath, sizeof(logpath), "%s/server.log", logdir);
	start_logged(&srv, extra, 0);
	tu_upload_fixture(&srv, "live", "traces/hta_alexnet.json.gz");
	tu_upload_fixture(&srv, "other", "traces/hta_alexnet.json.gz");
}

static void stop(void)
{
	size_t len;
	char *text;

	tu_server_cleanup(&srv);
	/* a sanitizer's report, written as the server exits, is in its log: the run fails with it */
	text = (char *)tu_read_file(logpath, &len);
	if (text && strstr(text, "Sanitizer")) {
		fprintf(stderr, "the server's log holds a sanitizer's report:\n%s", text);
		abort();
	}
	free(text);
	tu_rmtree(logdir);
	free(logdir);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* method path (body, header) through s, expecting status; the body as JSON (NULL when empty) */
static json_t *call_on(const struct tu_server *s, const char *method, const char *path, const char *body,
		       const char *header, long status)
{
	struct tu_resp r;
	json_t *j = NULL;

	ck_assert_int_eq(tu_http(s, method, path, body, body ? strlen(body) : 0, header, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	if (r.len)
		j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

static json_t *call(const char *method, const char *path, const char *body, long status)
{
	return call_on(&srv, method, path, body, NULL, status);
}

/* A new capture of run with body: its id */
static long long create(const char *run, const char *body)
{
	char path[128];
	json_t *j;
	long long id;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/captures", run);
	j = call("POST", path, body, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "capture"), "id"));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "capture"), "state")), "pending");
	json_decref(j);
	return id;
}

/* GET next for rank of run with wait: the id taken, or 0 on 204 */
static long long next(const char *run, int rank, int wait)
{
	char path[128];
	struct tu_resp r;
	long long id = 0;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/captures/next?rank=%d&wait=%d", run, rank, wait);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200 || r.status == 204, "%s: %ld %s", path, r.status, r.body);
	if (r.status == 200) {
		json_t *j = tu_json(&r), *c = json_object_get(j, "capture"), *by = json_object_get(c, "by_rank"), *p;
		size_t i;
		int found = 0;
		id = json_integer_value(json_object_get(c, "id"));
		json_array_foreach(by, i, p)
			found |= json_integer_value(json_object_get(p, "rank")) == rank &&
				 !strcmp(json_string_value(json_object_get(p, "state")), "running");
		ck_assert_msg(found, "rank %d is not running in %s", rank, r.body);
		json_decref(j);
	} else {
		ck_assert_uint_eq(r.len, 0);
	}
	tu_resp_free(&r);
	return id;
}

/* The capture as GET /captures/{id} answers it (new reference) */
static json_t *get_capture(long long id)
{
	char path[64];
	json_t *j, *c;

	snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
	j = call("GET", path, NULL, 200);
	c = json_incref(json_object_get(j, "capture"));
	json_decref(j);
	return c;
}

static const char *state_of(json_t *c)
{
	return json_string_value(json_object_get(c, "state"));
}

/* rank's entry in c's by_rank (borrowed), or NULL */
static json_t *part(json_t *c, int rank)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(c, "by_rank"), i, p)
		if (json_integer_value(json_object_get(p, "rank")) == rank)
			return p;
	return NULL;
}

static void end_part(long long id, int rank, const char *body, long status, const char *code)
{
	char path[96];
	json_t *j;

	snprintf(path, sizeof(path), "/api/v1/captures/%lld/ranks/%d", id, rank);
	j = call("POST", path, body, status);
	if (code)
		ck_assert_str_eq(tu_error_code(j), code);
	json_decref(j);
}

/* 1 when the server's log holds a line with each of a and b */
static int logged(const char *a, const char *b)
{
	size_t len;
	char *text = (char *)tu_read_file(logpath, &len), *line, *save = NULL;
	int found = 0;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line && !found; line = strtok_r(NULL, "\n", &save))
		found = strstr(line, a) && strstr(line, b);
	free(text);
	return found;
}

START_TEST(test_bad_bodies)
{
	static const char *const bad[] = {
		"", "[]", "not json", "{}", "{\"steps\": 5, \"seconds\": 5}", "{\"steps\": 0}", "{\"steps\": 10001}",
		"{\"steps\": 1.5}", "{\"steps\": \"5\"}", "{\"seconds\": 3601}", "{\"seconds\": 0}",
		"{\"steps\": 5, \"ranks\": []}", "{\"steps\": 5, \"ranks\": [-1]}", "{\"steps\": 5, \"ranks\": [65536]}",
		"{\"steps\": 5, \"ranks\": \"some\"}", "{\"steps\": 5, \"ranks\": [\"0\"]}",
		"{\"steps\": 5, \"activities\": [\"gpu\"]}", "{\"steps\": 5, \"activities\": []}",
		"{\"steps\": 5, \"activities\": \"cpu\"}", "{\"steps\": 5, \"requested_by\": 7}",
		"{\"steps\": 5, \"requested_by\": \"a\\nb\"}", "{\"steps\": 5, \"colour\": 1}",
		"{\"steps\": 5, \"steps\": 6}",
	};
	char longname[300];
	json_t *j;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		j = call("POST", "/api/v1/runs/live/captures", bad[i], 400);
		ck_assert_msg(!strcmp(tu_error_code(j), "invalid_capture") || !strcmp(tu_error_code(j), "invalid_json"),
			      "%s: %s", bad[i], tu_error_code(j));
		json_decref(j);
	}
	/* 201 characters of requested_by; 4097 ranks; a body past 64 KiB */
	snprintf(longname, sizeof(longname), "{\"steps\": 5, \"requested_by\": \"%0201d\"}", 0);
	json_decref(call("POST", "/api/v1/runs/live/captures", longname, 400));
	{
		size_t cap = 80 * 1024, n;
		char *big = malloc(cap);
		ck_assert_ptr_nonnull(big);
		n = (size_t)snprintf(big, cap, "{\"steps\": 5, \"ranks\": [0");
		for (i = 1; i < 4097; i++)
			n += (size_t)snprintf(big + n, cap - n, ",%zu", i % 60000);
		snprintf(big + n, cap - n, "]}");
		j = call("POST", "/api/v1/runs/live/captures", big, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_capture");
		json_decref(j);
		memset(big, ' ', cap - 1);
		big[0] = '{';
		big[cap - 2] = '}';
		big[cap - 1] = 0;
		j = call("POST", "/api/v1/runs/live/captures", big, 413);
		ck_assert_str_eq(tu_error_code(j), "body_too_large");
		json_decref(j);
		free(big);
	}
	/* a run with no upload: 404, as the other run routes */
	j = call("POST", "/api/v1/runs/nosuch/captures", "{\"steps\": 5}", 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	json_decref(call("GET", "/api/v1/runs/nosuch/captures", NULL, 404));
	j = call("GET", "/api/v1/captures/999999", NULL, 404);
	ck_assert_str_eq(tu_error_code(j), "capture_not_found");
	json_decref(j);
	/* nothing of them was kept */
	j = call("GET", "/api/v1/runs/live/captures", NULL, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "captures")), 0);
	json_decref(j);
	/* next wants a rank, and waits 0 to 30 s */
	json_decref(call("GET", "/api/v1/runs/live/captures/next", NULL, 400));
	json_decref(call("GET", "/api/v1/runs/live/captures/next?rank=0&wait=31", NULL, 400));
	json_decref(call("GET", "/api/v1/runs/live/captures/next?rank=x", NULL, 400));
	json_decref(call("POST", "/api/v1/captures/1/ranks/x", "{\"state\": \"done\"}", 400));
}
END_TEST

START_TEST(test_create_list_get)
{
	long long a = create("live", "{\"steps\": 20, \"requested_by\": \"alice\"}");
	long long b = create("live", "{\"seconds\": 30, \"ranks\": [3, 0, 3], \"activities\": [\"stacks\", \"cpu\","
			     " \"memory\", \"cpu\"]}");
	json_t *j = call("GET", "/api/v1/runs/live/captures", NULL, 200), *l = json_object_get(j, "captures"), *c;
	double created;

	/* newest first */
	ck_assert_uint_ge(json_array_size(l), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(l, 0), "id")), b);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(l, 1), "id")), a);
	json_decref(j);
	c = get_capture(a);
	ck_assert_str_eq(json_string_value(json_object_get(c, "run")), "live");
	ck_assert_str_eq(json_string_value(json_object_get(c, "requested_by")), "alice");
	ck_assert(json_is_null(json_object_get(c, "token")));	/* the server has no tokens */
	ck_assert_int_eq(json_integer_value(json_object_get(c, "steps")), 20);
	ck_assert(json_is_null(json_object_get(c, "seconds")));
	ck_assert_str_eq(json_string_value(json_object_get(c, "ranks")), "all");
	ck_assert_uint_eq(json_array_size(json_object_get(c, "activities")), 2);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "activities"), 0)), "cpu");
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "activities"), 1)), "cuda");
	created = json_real_value(json_object_get(c, "created_at"));
	ck_assert_double_eq_tol(json_real_value(json_object_get(c, "expires_at")) - created, TTL, 0.02);
	ck_assert_double_eq_tol(created, (double)time(NULL), 5);
	ck_assert_uint_eq(json_array_size(json_object_get(c, "by_rank")), 0);
	json_decref(c);
	c = get_capture(b);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "seconds")), 30);
	ck_assert(json_is_null(json_object_get(c, "steps")));
	/* ranks sorted, each once; activities in their order, each once */
	ck_assert_uint_eq(json_array_size(json_object_get(c, "ranks")), 2);
	ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(c, "ranks"), 1)), 3);
	ck_assert_uint_eq(json_array_size(json_object_get(c, "activities")), 3);
	ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "activities"), 2)), "stacks");
	json_decref(c);
	/* the other run lists none of them */
	j = call("GET", "/api/v1/runs/other/captures", NULL, 200);
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(j, "captures"), i, e)
		ck_assert_int_ne(json_integer_value(json_object_get(e, "id")), a);
	json_decref(j);
	ck_assert(logged("created", "requested by 'alice'"));
	/* cancelled, so that no later test's rank takes them */
	{
		char path[64];
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", a);
		json_decref(call("DELETE", path, NULL, 200));
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", b);
		json_decref(call("DELETE", path, NULL, 200));
	}
}
END_TEST

START_TEST(test_next_ranks_done_failed)
{
	long long id = create("live", "{\"steps\": 5, \"ranks\": [0, 3]}"), any;
	json_t *c;

	/* rank 1 is not asked for */
	ck_assert_int_eq(next("live", 1, 0), 0);
	ck_assert_int_eq(next("live", 0, 0), id);
	c = get_capture(id);
	ck_assert_str_eq(state_of(c), "running");
	ck_assert(json_is_null(json_object_get(part(c, 0), "ended_at")));
	json_decref(c);
	/* taken once per rank */
	ck_assert_int_eq(next("live", 0, 0), 0);
	ck_assert_int_eq(next("live", 3, 0), id);
	end_part(id, 0, "{\"state\": \"done\"}", 200, NULL);
	end_part(id, 0, "{\"state\": \"done\"}", 409, "capture_rank_ended");
	end_part(id, 5, "{\"state\": \"done\"}", 409, "capture_not_taken");
	end_part(id, 3, "{\"state\": \"over\"}", 400, "invalid_capture");
	end_part(id, 3, "{\"state\": \"failed\", \"extra\": 1}", 400, "invalid_capture");
	c = get_capture(id);
	ck_assert_str_eq(state_of(c), "running");	/* rank 3 still at it */
	json_decref(c);
	end_part(id, 3, "{\"state\": \"failed\", \"reason\": \"CUPTI said no\"}", 200, NULL);
	c = get_capture(id);
	/* done with one done, failed with none */
	ck_assert_str_eq(state_of(c), "done");
	ck_assert_str_eq(json_string_value(json_object_get(part(c, 3), "state")), "failed");
	ck_assert_str_eq(json_string_value(json_object_get(part(c, 3), "reason")), "CUPTI said no");
	ck_assert(json_real_value(json_object_get(part(c, 0), "ended_at")) >=
		  json_real_value(json_object_get(part(c, 0), "started_at")));
	json_decref(c);
	end_part(999999, 0, "{\"state\": \"done\"}", 404, "capture_not_found");

	any = create("live", "{\"seconds\": 5}");
	ck_assert_int_eq(next("live", 7, 0), any);
	ck_assert_int_eq(next("live", 8, 0), any);
	end_part(any, 7, "{\"state\": \"failed\"}", 200, NULL);
	end_part(any, 8, "{\"state\": \"failed\", \"reason\": null}", 200, NULL);
	c = get_capture(any);
	ck_assert_str_eq(state_of(c), "failed");
	ck_assert(json_is_null(json_object_get(part(c, 8), "reason")));
	json_decref(c);
	ck_assert(logged("taken by rank 3", "ranks 0,3"));
	ck_assert(logged("rank 3 failed: CUPTI said no", "requested by"));
}
END_TEST

struct later {
	const char *run, *body;
	double after;
};

static void *create_later(void *arg)
{
	struct later *l = arg;
	struct tu_resp r;
	char path[96];

	usleep((useconds_t)(l->after * 1e6));
	snprintf(path, sizeof(path), "/api/v1/runs/%s/captures", l->run);
	if (tu_http(&srv, "POST", path, l->body, strlen(l->body), NULL, &r) == 0)
		tu_resp_free(&r);
	return NULL;
}

START_TEST(test_long_poll)
{
	struct later l = { "other", "{\"steps\": 3}", 0.5 };
	pthread_t t;
	double t0 = now_s(), took;
	long long id;

	/* nothing for wait seconds: 204 after them */
	ck_assert_int_eq(next("other", 0, 1), 0);
	took = now_s() - t0;
	ck_assert_msg(took >= 0.95 && took < 3, "wait=1 took %.2f s", took);
	/* a capture made while it waits ends the wait early */
	ck_assert_int_eq(pthread_create(&t, NULL, create_later, &l), 0);
	t0 = now_s();
	id = next("other", 0, 20);
	took = now_s() - t0;
	pthread_join(t, NULL);
	ck_assert_int_gt(id, 0);
	ck_assert_msg(took >= 0.4 && took < 3, "woken after %.2f s", took);
	end_part(id, 0, "{\"state\": \"done\"}", 200, NULL);
}
END_TEST

struct waiter {
	const struct tu_server *s;
	long status;
	double took;
};

static void *wait_next(void *arg)
{
	struct waiter *w = arg;
	struct tu_resp r;
	double t0 = now_s();

	if (tu_http(w->s, "GET", "/api/v1/runs/capped/captures/next?rank=0&wait=3", NULL, 0, NULL, &r) == 0) {
		w->status = r.status;
		tu_resp_free(&r);
	}
	w->took = now_s() - t0;
	return NULL;
}

/* --threads 4: one request waits at once; another is told 204 at once, with Retry-After */
START_TEST(test_long_poll_capped)
{
	static const char *const extra[] = { "--threads", "4", NULL };
	struct tu_server s;
	struct waiter w = { &s, 0, 0 };
	struct tu_resp r;
	pthread_t t;
	double t0;

	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	tu_upload_fixture(&s, "capped", "traces/hta_alexnet.json.gz");
	ck_assert_int_eq(pthread_create(&t, NULL, wait_next, &w), 0);
	usleep(500000);
	t0 = now_s();
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/capped/captures/next?rank=1&wait=3", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 204);
	ck_assert_msg(now_s() - t0 < 1, "turned away after %.2f s", now_s() - t0);
	ck_assert_msg(strstr(r.headers, "Retry-After: 5") != NULL, "%s", r.headers);
	tu_resp_free(&r);
	/* reads go on meanwhile */
	json_decref(call_on(&s, "GET", "/api/v1/runs/capped/captures", NULL, NULL, 200));
	pthread_join(t, NULL);
	ck_assert_int_eq(w.status, 204);
	ck_assert_msg(w.took >= 2.9, "the waiter waited %.2f s", w.took);
	/* its place is free again: the next one waits */
	t0 = now_s();
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/capped/captures/next?rank=1&wait=1", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 204);
	ck_assert(now_s() - t0 >= 0.95);
	ck_assert(strstr(r.headers, "Retry-After") == NULL);
	tu_resp_free(&r);
	/* a stop does not wait for a long poll: the waiter is answered 204 and the server exits at once */
	w.status = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, wait_next, &w), 0);
	usleep(500000);
	t0 = now_s();
	ck_assert_int_eq(tu_server_stop(&s), 0);
	ck_assert_msg(now_s() - t0 < 2, "the stop took %.2f s", now_s() - t0);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.status, 204);
	ck_assert_msg(w.took < 2, "the waiter was answered after %.2f s", w.took);
	tu_server_cleanup(&s);
}
END_TEST

START_TEST(test_cancel)
{
	long long id = create("other", "{\"steps\": 2, \"ranks\": [4]}"), taken;
	json_t *j;

	j = call("DELETE", "/api/v1/captures/999999", NULL, 404);
	json_decref(j);
	j = call("DELETE", "/api/v1/captures/1x", NULL, 400);
	json_decref(j);
	j = call("DELETE", "/api/v1/captures/" "0", NULL, 404);
	json_decref(j);
	{
		char path[64];
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
		j = call("DELETE", path, NULL, 200);
		ck_assert_str_eq(state_of(json_object_get(j, "capture")), "cancelled");
		json_decref(j);
		j = call("DELETE", path, NULL, 409);
		ck_assert_str_eq(tu_error_code(j), "capture_not_pending");
		json_decref(j);
	}
	/* no rank takes a cancelled capture */
	ck_assert_int_eq(next("other", 4, 0), 0);
	/* nor can a running one be cancelled */
	taken = create("other", "{\"steps\": 2, \"ranks\": [4]}");
	ck_assert_int_eq(next("other", 4, 0), taken);
	{
		char path[64];
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", taken);
		j = call("DELETE", path, NULL, 409);
		json_decref(j);
	}
	end_part(taken, 4, "{\"state\": \"done\"}", 200, NULL);
	ck_assert(logged("cancelled", "ranks 4"));
}
END_TEST

/* A pending capture expires; a rank that took one and never ended it (its collector gone) fails after the
 * capture's expiry with "no word from the rank"; a listed rank that never came leaves it to its parts. */
START_TEST(test_expiry_and_rank_gone)
{
	long long pending = create("live", "{\"steps\": 5, \"ranks\": [40]}");
	long long gone = create("live", "{\"steps\": 5, \"ranks\": [41]}");
	long long half = create("live", "{\"steps\": 5, \"ranks\": [42, 43]}");
	json_t *c;

	ck_assert_int_eq(next("live", 41, 0), gone);
	ck_assert_int_eq(next("live", 42, 0), half);
	end_part(half, 42, "{\"state\": \"done\"}", 200, NULL);
	c = get_capture(half);
	ck_assert_str_eq(state_of(c), "running");	/* rank 43 may still come */
	json_decref(c);
	c = get_capture(gone);
	ck_assert_str_eq(state_of(c), "running");
	json_decref(c);
	sleep(TTL + 1);
	c = get_capture(pending);
	ck_assert_str_eq(state_of(c), "expired");
	json_decref(c);
	c = get_capture(gone);
	ck_assert_str_eq(state_of(c), "failed");
	ck_assert_str_eq(json_string_value(json_object_get(part(c, 41), "state")), "failed");
	ck_assert_str_eq(json_string_value(json_object_get(part(c, 41), "reason")), "no word from the rank");
	json_decref(c);
	c = get_capture(half);
	ck_assert_str_eq(state_of(c), "done");
	json_decref(c);
	/* nobody takes an expired one; its late rank's end is refused */
	ck_assert_int_eq(next("live", 40, 0), 0);
	ck_assert_int_eq(next("live", 43, 0), 0);
	end_part(gone, 41, "{\"state\": \"done\"}", 409, "capture_rank_ended");
	ck_assert(logged("expired", "ranks 40"));
	ck_assert(logged("rank 41 failed: no word from the rank", "ranks 41"));
}
END_TEST

START_TEST(test_tokens)
{
	struct tu_server s;
	char *dir = tu_tmpdir(), tokfile[600], want[65];
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char file[] = "secret-token-0123456789\nread reader-token-0123456789\n";
	const char *w = "Authorization: Bearer secret-token-0123456789";
	const char *rd = "Authorization: Bearer reader-token-0123456789";
	struct sha256 sh;
	json_t *j;
	long long id;
	char path[96];

	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	ck_assert_int_eq(tu_write_file(tokfile, file, strlen(file)), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	j = call_on(&s, "POST", "/api/v1/runs/t/artifacts?rank=0", "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]", w,
		    201);
	json_decref(j);
	json_decref(call_on(&s, "POST", "/api/v1/runs/t/captures", "{\"steps\": 1}", rd, 403));
	json_decref(call_on(&s, "POST", "/api/v1/runs/t/captures", "{\"steps\": 1}", NULL, 401));
	j = call_on(&s, "POST", "/api/v1/runs/t/captures", "{\"steps\": 1}", w, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "capture"), "id"));
	sha256_init(&sh);
	sha256_update(&sh, "secret-token-0123456789", 23);
	sha256_final_hex(&sh, want);
	want[8] = 0;
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "capture"), "token")), want);
	json_decref(j);
	json_decref(call_on(&s, "GET", "/api/v1/runs/t/captures/next?rank=0", NULL, rd, 403));
	snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
	json_decref(call_on(&s, "DELETE", path, NULL, rd, 403));
	snprintf(path, sizeof(path), "/api/v1/captures/%lld/ranks/0", id);
	json_decref(call_on(&s, "POST", path, "{\"state\": \"done\"}", rd, 403));
	/* the read token reads; nothing was taken nor cancelled */
	j = call_on(&s, "GET", "/api/v1/runs/t/captures", NULL, rd, 200);
	ck_assert_str_eq(state_of(json_array_get(json_object_get(j, "captures"), 0)), "pending");
	json_decref(j);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ?capture=ID: the artifact is listed in by_rank[R].artifacts; another run's capture is refused, nothing kept */
START_TEST(test_upload_for_capture)
{
	static const char trace[] = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#9\",\"ts\":1,\"dur\":5}]";
	long long id = create("live", "{\"steps\": 1, \"ranks\": [9]}"), art;
	struct tu_resp r;
	json_t *j, *c, *a;
	size_t before;

	ck_assert_int_eq(next("live", 9, 0), id);
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/live/artifacts?rank=9&name=t.json&capture=0", trace,
				 strlen(trace), NULL, &r), 0);
	ck_assert_int_eq(r.status, 400);
	tu_resp_free(&r);
	j = call("GET", "/api/v1/runs/other", NULL, 200);
	before = (size_t)json_integer_value(json_object_get(json_object_get(j, "run"), "artifacts"));
	json_decref(j);
	{
		char path[128];
		snprintf(path, sizeof(path), "/api/v1/runs/other/artifacts?rank=9&name=t.json&capture=%lld", id);
		j = call("POST", path, trace, 400);
		ck_assert_str_eq(tu_error_code(j), "invalid_parameter");
		json_decref(j);
		snprintf(path, sizeof(path), "/api/v1/runs/live/artifacts?rank=9&name=t.json&capture=%lld", id);
		j = call("POST", path, trace, 201);
		art = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
		json_decref(j);
	}
	j = call("GET", "/api/v1/runs/other", NULL, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "run"), "artifacts")), (long long)before);
	json_decref(j);
	c = get_capture(id);
	a = json_object_get(part(c, 9), "artifacts");
	ck_assert_uint_eq(json_array_size(a), 1);
	ck_assert_int_eq(json_integer_value(json_array_get(a, 0)), art);
	json_decref(c);
	end_part(id, 9, "{\"state\": \"done\"}", 200, NULL);
}
END_TEST

/* The server restarts mid-capture: the capture, its rank's part and its artifacts are as they were */
START_TEST(test_restart_mid_capture)
{
	struct tu_server s, *keep;
	long long id, art;
	json_t *c, *j;

	/* a server of this test's own: a test runs in a child, which can stop only what it started */
	ck_assert_int_eq(tu_server_start(&s, NULL), 0);
	tu_upload_fixture(&s, "re", "traces/hta_alexnet.json.gz");
	j = call_on(&s, "POST", "/api/v1/runs/re/captures", "{\"seconds\": 60, \"ranks\": [11, 12]}", NULL, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "capture"), "id"));
	json_decref(j);
	json_decref(call_on(&s, "GET", "/api/v1/runs/re/captures/next?rank=11", NULL, NULL, 200));
	json_decref(call_on(&s, "GET", "/api/v1/runs/re/captures/next?rank=12", NULL, NULL, 200));
	{
		static const char trace[] = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#3\",\"ts\":1,\"dur\":5}]";
		char path[128];
		snprintf(path, sizeof(path), "/api/v1/runs/re/artifacts?rank=11&name=c.json&capture=%lld", id);
		j = call_on(&s, "POST", path, trace, NULL, 201);
		art = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
		json_decref(j);
		snprintf(path, sizeof(path), "/api/v1/captures/%lld/ranks/12", id);
		json_decref(call_on(&s, "POST", path, "{\"state\": \"failed\", \"reason\": \"x\"}", NULL, 200));
	}
	ck_assert_int_eq(tu_server_stop(&s), 0);
	ck_assert_int_eq(tu_server_restart(&s, NULL), 0);
	keep = &s;
	{
		char path[96];
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
		j = call_on(keep, "GET", path, NULL, NULL, 200);
		c = json_object_get(j, "capture");
		ck_assert_str_eq(state_of(c), "running");
		ck_assert_str_eq(json_string_value(json_object_get(part(c, 11), "state")), "running");
		ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(part(c, 11), "artifacts"), 0)), art);
		ck_assert_str_eq(json_string_value(json_object_get(part(c, 12), "reason")), "x");
		json_decref(j);
		/* taken once, before the restart as after */
		ck_assert_ptr_null(call_on(keep, "GET", "/api/v1/runs/re/captures/next?rank=11", NULL, NULL, 204));
		snprintf(path, sizeof(path), "/api/v1/captures/%lld/ranks/11", id);
		json_decref(call_on(keep, "POST", path, "{\"state\": \"done\"}", NULL, 200));
		snprintf(path, sizeof(path), "/api/v1/captures/%lld/ranks/12", id);
		json_decref(call_on(keep, "POST", path, "{\"state\": \"done\"}", NULL, 409));
		snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
		j = call_on(keep, "GET", path, NULL, NULL, 200);
		ck_assert_str_eq(state_of(json_object_get(j, "capture")), "done");
		json_decref(j);
	}
	tu_server_cleanup(&s);
}
END_TEST

/* A run deleted takes its captures along: a run made again under its name starts with none */
START_TEST(test_run_delete_takes_captures)
{
	long long id;
	char path[64];
	json_t *j;

	tu_upload_fixture(&srv, "gone", "traces/hta_alexnet.json.gz");
	id = create("gone", "{\"steps\": 2}");
	ck_assert_int_eq(next("gone", 0, 0), id);
	json_decref(call("DELETE", "/api/v1/runs/gone", NULL, 200));
	snprintf(path, sizeof(path), "/api/v1/captures/%lld", id);
	j = call("GET", path, NULL, 404);
	ck_assert_str_eq(tu_error_code(j), "capture_not_found");
	json_decref(j);
	tu_upload_fixture(&srv, "gone", "traces/hta_alexnet.json.gz");
	j = call("GET", "/api/v1/runs/gone/captures", NULL, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "captures")), 0);
	json_decref(j);
	ck_assert_int_eq(next("gone", 0, 0), 0);
}
END_TEST

/* 1 when the runs list holds run, waiting for its first capture */
static int listed_waiting(const char *run)
{
	json_t *j = call("GET", "/api/v1/runs", NULL, 200), *e;
	size_t i;
	int found = 0;

	json_array_foreach(json_object_get(j, "runs"), i, e)
		found |= !strcmp(json_string_value(json_object_get(e, "name")), run) &&
			 json_is_true(json_object_get(e, "waiting_for_capture"));
	json_decref(j);
	return found;
}

/*
 * A collector's poll for a run the server does not have makes it (issue 52: in on-demand mode
 * nothing is uploaded before the first capture): listed at once (the cached list moves),
 * waiting, with when it polled, logged; a capture can be asked for it and taken. A second poll
 * within 10 s writes nothing (the stamp stays). Its last artifact deleted, the run stays. A poll
 * refused for its parameters makes no run.
 */
START_TEST(test_poll_lists_run)
{
	json_t *j, *p;
	double at;
	long long id;

	json_decref(call("POST", "/api/v1/runs/first/captures", "{\"steps\": 1}", 404));
	json_decref(call("GET", "/api/v1/runs/first/captures", NULL, 404));
	ck_assert(!listed_waiting("first"));	/* and the list is cached now */
	/* a poll refused (no rank, a bad one, a wait out of range) makes nothing */
	json_decref(call("GET", "/api/v1/runs/first/captures/next", NULL, 400));
	json_decref(call("GET", "/api/v1/runs/first/captures/next?rank=65536", NULL, 400));
	json_decref(call("GET", "/api/v1/runs/first/captures/next?rank=0&wait=31", NULL, 400));
	json_decref(call("GET", "/api/v1/runs/first", NULL, 404));
	ck_assert_int_eq(next("first", 2, 0), 0);
	ck_assert(listed_waiting("first"));
	ck_assert(logged("run 'first' listed, waiting for its first capture", "rank 2's collector polled"));
	j = call("GET", "/api/v1/runs/first/captures", NULL, 200);
	p = json_object_get(j, "polled");
	at = json_number_value(json_object_get(p, "at"));
	ck_assert(at > 1.7e9);
	ck_assert_int_ge(json_integer_value(json_object_get(p, "ago_s")), 0);
	ck_assert_int_le(json_integer_value(json_object_get(p, "ago_s")), 5);
	json_decref(j);
	ck_assert_int_eq(next("first", 2, 0), 0);
	j = call("GET", "/api/v1/runs/first/captures", NULL, 200);
	ck_assert(json_number_value(json_object_get(json_object_get(j, "polled"), "at")) == at);
	json_decref(j);
	id = create("first", "{\"steps\": 2}");
	ck_assert_int_eq(next("first", 2, 0), id);
	/* its capture's trace lands (no longer waiting); that artifact deleted, the run stays, waiting again */
	{
		static const char trace[] = "[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"ts\":1,\"dur\":5}]";
		char path[128];
		long long art;
		snprintf(path, sizeof(path), "/api/v1/runs/first/artifacts?rank=2&name=c.json&capture=%lld", id);
		j = call("POST", path, trace, 201);
		art = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
		json_decref(j);
		ck_assert(!listed_waiting("first"));
		snprintf(path, sizeof(path), "/api/v1/runs/first/artifacts/%lld", art);
		j = call("DELETE", path, NULL, 200);
		ck_assert(json_is_false(json_object_get(j, "run_deleted")));
		json_decref(j);
		ck_assert(listed_waiting("first"));
	}
	/* a run with uploads that no collector polled for: polled null */
	tu_upload_fixture(&srv, "plain", "traces/hta_alexnet.json.gz");
	j = call("GET", "/api/v1/runs/plain/captures", NULL, 200);
	ck_assert(json_is_null(json_object_get(j, "polled")));
	json_decref(j);
}
END_TEST

Suite *suite_captures(void)
{
	Suite *s = suite_create("captures");
	TCase *tc = tcase_create("captures");

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_bad_bodies);
	tcase_add_test(tc, test_create_list_get);
	tcase_add_test(tc, test_next_ranks_done_failed);
	tcase_add_test(tc, test_long_poll);
	tcase_add_test(tc, test_long_poll_capped);
	tcase_add_test(tc, test_cancel);
	tcase_add_test(tc, test_expiry_and_rank_gone);
	tcase_add_test(tc, test_tokens);
	tcase_add_test(tc, test_upload_for_capture);
	tcase_add_test(tc, test_run_delete_takes_captures);
	tcase_add_test(tc, test_poll_lists_run);
	tcase_add_test(tc, test_restart_mid_capture);
	suite_add_tcase(s, tc);
	return s;
}
