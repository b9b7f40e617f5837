/*
 * check_runs_derive.c: reads derive a run once, however many read it at
 * once; a read does not wait for derivation; background derivation paced
 * and quiet; a run spilled to disk answers as one kept in memory; two
 * servers sharing one PostgreSQL database and one run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runs_util.h"
#include "suites.h"

/* ---- reads derive a run once, however many read it at once ---- */

struct reader_arg {
	char *body;
	long status;
};

static void *read_steps(void *arg)
{
	struct reader_arg *a = arg;
	struct tu_resp r;

	if (tu_http(&ru_srv, "GET", "/api/v1/runs/conc/steps", NULL, 0, NULL, &r) == 0) {
		a->status = r.status;
		a->body = strdup(r.body);
		tu_resp_free(&r);
	}
	return NULL;
}

START_TEST(test_reads_derive_once)
{
	struct reader_arg a[8] = { { 0 } };
	pthread_t th[8];
	int i;

	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 0);
	/* three traces joined rank 0: one derivation, by whichever read came first */
	for (i = 0; i < 3; i++)
		ru_upload_cycle("conc", 1 + 10 * i, 10 * i, 100);
	/* the run's info and the list read nothing derived (the live page polls them): no derivation */
	json_decref(ru_call("GET", "/api/v1/runs/conc", NULL, 0, 200));
	json_decref(ru_call("GET", "/api/v1/runs", NULL, 0, 200));
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 0);
	for (i = 0; i < 8; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, read_steps, &a[i]), 0);
	for (i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(a[i].status, 200);
		ck_assert_str_eq(a[i].body, a[0].body);
	}
	json_t *j = json_loads(a[0].body, 0, NULL);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 9);
	json_decref(j);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 1);
	/* a fourth: derived once more, by the next read */
	ru_upload_cycle("conc", 31, 30, 100);
	json_decref(ru_call("GET", "/api/v1/runs/conc/ops", NULL, 0, 200));
	json_decref(ru_call("GET", "/api/v1/runs/conc/steps", NULL, 0, 200));
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 2);
	for (i = 0; i < 8; i++)
		free(a[i].body);
}
END_TEST

/* the run's analysis_pending, from GET /runs/{run} */
static int pending(const char *run)
{
	char url[128];
	json_t *j;
	int v;

	snprintf(url, sizeof(url), "/api/v1/runs/%s", run);
	j = ru_call("GET", url, NULL, 0, 200);
	ck_assert(json_is_boolean(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	v = json_is_true(json_object_get(json_object_get(j, "run"), "analysis_pending"));
	json_decref(j);
	return v;
}

/* the run's analysis_pending and steps in the list (GET /runs), which derives nothing */
static int listed_pending(const char *run, long long *steps)
{
	json_t *j = ru_call("GET", "/api/v1/runs", NULL, 0, 200), *r;
	size_t i;
	int v = -1;

	json_array_foreach(json_object_get(j, "runs"), i, r)
		if (!strcmp(json_string_value(json_object_get(r, "name")), run)) {
			ck_assert(json_is_boolean(json_object_get(r, "analysis_pending")));
			v = json_is_true(json_object_get(r, "analysis_pending"));
			*steps = json_integer_value(json_object_get(r, "steps"));
		}
	json_decref(j);
	ck_assert_int_ge(v, 0);
	return v;
}

static size_t steps_of(const char *url)
{
	json_t *j = ru_call("GET", url, NULL, 0, 200);
	size_t n = json_array_size(json_object_get(j, "steps"));

	json_decref(j);
	return n;
}

/* ?wait=0: the analysis as it stands, the joined traces derived in the background */
START_TEST(test_read_without_waiting)
{
	int i;

	ru_upload_cycle("grow", 1, 0, 100);
	ck_assert(!pending("grow"));
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=0"), 3);
	/* a second cycle joins: pending until something derives it */
	ru_upload_cycle("grow", 11, 10, 100);
	ck_assert(pending("grow"));
	/* the list says so too, with the steps as they stand, and derives nothing */
	long long listed;
	ck_assert_int_eq(listed_pending("grow", &listed), 1);
	ck_assert_int_eq(listed, 3);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 0);
	/* answered from the first cycle's analysis, a derivation started behind it */
	size_t n = steps_of("/api/v1/runs/grow/steps?wait=0");
	ck_assert(n == 3 || n == 6);	/* 6 only if the background one was quicker than this read */
	for (i = 0; i < 300 && pending("grow"); i++)
		usleep(20000);
	ck_assert(!pending("grow"));
	ck_assert_int_eq(listed_pending("grow", &listed), 0);
	ck_assert_int_eq(listed, 6);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 1);
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=0"), 6);
	/* the same bytes as a read that waits, and nothing left to derive for it */
	json_t *a = ru_call("GET", "/api/v1/runs/grow/ops?wait=0", NULL, 0, 200);
	json_t *b = ru_call("GET", "/api/v1/runs/grow/ops", NULL, 0, 200);
	ck_assert(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == 1);
	/* a read that waits still answers for every trace before it */
	ru_upload_cycle("grow", 21, 20, 100);
	ck_assert_uint_eq(steps_of("/api/v1/runs/grow/steps?wait=1"), 9);
	ck_assert(!pending("grow"));
	/* wait is 0 or 1 */
	json_t *e = ru_call("GET", "/api/v1/runs/grow/steps?wait=yes", NULL, 0, 400);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "error"), "code")), "invalid_parameter");
	json_decref(e);
	/* a server stopped while a background derivation runs waits for it (the fixture's stop) */
	ru_upload_cycle("grow", 31, 30, 100);
	json_decref(ru_call("GET", "/api/v1/runs/grow/kernels?wait=0", NULL, 0, 200));
}
END_TEST

/* one server's half of a run's chunks: every other one, from first */
struct half {
	const struct tu_server *s;
	const struct cut *c;
	const size_t *at;
	size_t k, first;
};

static void *upload_half(void *arg)
{
	const struct half *h = arg;

	for (size_t i = h->first; i < h->k; i += 2)
		ru_upload_chunk_via(h->s, h->c, h->at[i], h->at[i + 1], "shared-cut", i);
	return NULL;
}

/*
 * Two servers on one PostgreSQL: a run uploaded through one is read through
 * the other at once (its cached answers do not outlive the other's write),
 * the two answer alike, and the chunks of one run sent to both at the same
 * time give the whole file's answers, byte for byte.
 */
START_TEST(test_two_servers_one_run)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t glen, len, at[7], i, k = 6;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct tu_server b;
	struct cut c;
	json_t *runs;
	pthread_t t;
	struct half ha, hb;

	ck_assert_int_eq(tu_server_start_on(&b, ru_srv.db, NULL), 0);
	runs = ru_call_on(&b, "GET", "/api/v1/runs", 200);
	ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 0);
	json_decref(runs);
	json_decref(ru_call("POST", "/api/v1/runs/shared-whole/artifacts?rank=0&name=whole.json.gz", gz, glen, 201));
	runs = ru_call_on(&b, "GET", "/api/v1/runs", 200);
	ck_assert_uint_eq(json_array_size(json_object_get(runs, "runs")), 1);
	json_decref(runs);
	for (i = 0; i < ru_nanswers; i++)
		ru_same_answer_via(&ru_srv, "shared-whole", &b, "shared-whole", ru_answers[i]);
	/* six chunks at even cuts, three through each server at once */
	ru_cut_find((const char *)text, len, &c);
	for (i = 0; i <= k; i++)
		at[i] = c.n * i / k;
	ha = (struct half){ &ru_srv, &c, at, k, 0 };
	hb = (struct half){ &b, &c, at, k, 1 };
	ck_assert_int_eq(pthread_create(&t, NULL, upload_half, &hb), 0);
	upload_half(&ha);
	pthread_join(t, NULL);
	for (i = 0; i < ru_nanswers; i++) {
		ru_same_answer_via(&ru_srv, "shared-whole", &ru_srv, "shared-cut", ru_answers[i]);
		ru_same_answer_via(&ru_srv, "shared-whole", &b, "shared-cut", ru_answers[i]);
	}
	tu_server_cleanup(&b);
	free(c.ev);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/*
 * Background derivations are paced (--derive-pace k: a run's next starts no sooner than k
 * times the last one's length after it): the second waits, a read that waits derives at
 * once all the same, and a stop cuts the pause short, deriving what it waited for.
 */
START_TEST(test_background_paced)
{
	const char *const paced[] = { "--derive-pace", "1000", NULL };
	struct timespec t0, t1;
	int i;

	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, paced), 0);
	ru_upload("paced", 0, "traces/hta_v100_train_memory.json.gz");
	ru_upload("paced", 0, "traces/hta_ns_resolution.json.gz");
	ck_assert(pending("paced"));
	/* the first background derivation starts at once (a few tenths of a second of work) */
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps?wait=0"), 0);
	for (i = 0; i < 1500 && pending("paced"); i++)
		usleep(20000);
	ck_assert(!pending("paced"));
	double derived = ru_metric("trainscope_rank_derivation_seconds_count");
	/* the next waits 1000 times that: still pending a second later */
	ru_upload("paced", 0, "traces/hta_event_sync.json.gz");
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps?wait=0"), 0);
	sleep(1);
	ck_assert(pending("paced"));
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == derived);
	/* a read that waits derives now */
	ck_assert_uint_gt(steps_of("/api/v1/runs/paced/steps"), 0);
	ck_assert(!pending("paced"));
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == derived + 1);
	/* the paused one still waits; one more trace, then a stop: the pause is cut short */
	ru_upload("paced", 0, "traces/hta_alexnet.json.gz");
	json_decref(ru_call("GET", "/api/v1/runs/paced/kernels?wait=0", NULL, 0, 200));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 60);	/* the pause: 1000 x a few tenths of a second */
	ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	ck_assert(!pending("paced"));	/* the stop derived it */
}
END_TEST

/*
 * --derive-quiet S: a trace that joins its rank starts a derivation of the server's own,
 * once the run has had no upload for S seconds. A burst of cycles is derived once, after
 * its last, with no read asking (the list, which derives nothing, sees the run pending,
 * then not), and answers as a run a read derived does. A read with ?wait=0 cuts the wait
 * short; a stop while it waits derives nothing (the next read does); with 0 (the tests'
 * default: testutil.c), nothing is derived until a read.
 */
START_TEST(test_quiet_derivation)
{
	const char *const quiet[] = { "--derive-quiet", "3", NULL }, *const long_quiet[] = { "--derive-quiet", "600",
											   NULL };
	/* what a trace of steps alone answers */
	const char *const of_steps[] = { "/steps", "/ops?device=cpu&limit=100000", "/ranks", "/diagnosis" };
	long long steps;
	double d0;
	int i;

	/* off: pending for as long as nobody reads */
	ru_upload_cycle("off", 1, 0, 100);
	ru_upload_cycle("off", 11, 100, 100);
	sleep(2);
	ck_assert(listed_pending("off", &steps));

	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, quiet), 0);
	for (i = 0; i < 3; i++)
		ru_upload_cycle("ref", 1 + 10 * i, 100 * i, 100);
	ck_assert_uint_eq(steps_of("/api/v1/runs/ref/steps"), 9);	/* derived by this read */
	d0 = ru_metric("trainscope_rank_derivation_seconds_count");
	for (i = 0; i < 3; i++)
		ru_upload_cycle("burst", 1 + 10 * i, 100 * i, 100);
	ck_assert(listed_pending("burst", &steps));	/* within 3 s of its last upload */
	for (i = 0; i < 1500 && listed_pending("burst", &steps); i++)
		usleep(20000);
	ck_assert(!listed_pending("burst", &steps));
	ck_assert_int_eq(steps, 9);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == d0 + 1);	/* once for the burst */
	for (size_t k = 0; k < sizeof(of_steps) / sizeof(of_steps[0]); k++)
		ru_same_answer("ref", "burst", of_steps[k]);
	ck_assert(ru_metric("trainscope_rank_derivation_seconds_count") == d0 + 1);	/* the reads derived nothing */

	/* ?wait=0 does not wait for the quiet */
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, long_quiet), 0);
	ru_upload_cycle("page", 1, 0, 100);
	ru_upload_cycle("page", 11, 100, 100);
	ck_assert(listed_pending("page", &steps));
	json_decref(ru_call("GET", "/api/v1/runs/page/steps?wait=0", NULL, 0, 200));
	for (i = 0; i < 1500 && listed_pending("page", &steps); i++)
		usleep(20000);
	ck_assert(!listed_pending("page", &steps));
	ck_assert_int_eq(steps, 6);

	/* a stop does not wait for the quiet, nor derive */
	ru_upload_cycle("page", 21, 200, 100);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	ck_assert(listed_pending("page", &steps));
	ck_assert_uint_eq(steps_of("/api/v1/runs/page/steps"), 9);
}
END_TEST

/*
 * --spill-at N: an analysis past N host spans sorts them into runs in a temporary file
 * ($TMPDIR), and parks its [memory] events there. Runs of 500 spans answer what one run in
 * memory does, byte for byte, at every endpoint; with no temporary file to be had, the upload
 * is refused (507, temp_file) and nothing of it is kept, so the same file uploads once there is.
 */
START_TEST(test_spill_at)
{
	const char *const spill[] = { "--spill-at", "500", NULL };
	const char *fx = "traces/hta_v100_train_memory.json.gz", *old = getenv("TMPDIR");
	char *path = tu_fixture(fx), *keep = old ? strdup(old) : NULL;
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j;

	ck_assert_ptr_nonnull(b);
	ru_upload("inmem", 0, fx);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	setenv("TMPDIR", "/nonexistent/trainscope", 1);
	ck_assert_int_eq(tu_server_restart(&ru_srv, spill), 0);
	if (keep)
		setenv("TMPDIR", keep, 1);
	else
		unsetenv("TMPDIR");
	j = ru_call("POST", "/api/v1/runs/spilled/artifacts?rank=0&name=v100", b, len, 507);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "error"), "code")), "temp_file");
	json_decref(j);
	json_decref(ru_call("GET", "/api/v1/runs/spilled", NULL, 0, 404));
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, spill), 0);
	ru_upload("spilled", 0, fx);
	for (i = 0; i < ru_nanswers; i++)
		ru_same_answer("inmem", "spilled", ru_answers[i]);
	free(keep);
	free(b);
	free(path);
}
END_TEST

Suite *suite_runs_derive(void)
{
	Suite *s = suite_create("runs_derive");
	/* the tcases as before the split of check_runs.c: "delete" with the default timeout, "chunks" with 600 s */
	TCase *tc = tcase_create("delete");

	tcase_add_checked_fixture(tc, ru_start, ru_stop);
	tcase_add_test(tc, test_reads_derive_once);
	tcase_add_test(tc, test_read_without_waiting);
	tcase_add_test(tc, test_background_paced);
	tcase_add_test(tc, test_spill_at);
	suite_add_tcase(s, tc);
	tc = tcase_create("chunks");
	tcase_add_checked_fixture(tc, ru_start, ru_stop);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_quiet_derivation);
	if (tu_postgres())	/* several servers share a PostgreSQL database only */
		tcase_add_test(tc, test_two_servers_one_run);
	suite_add_tcase(s, tc);
	return s;
}
