/*
 * check_runs.c: a run as the unit: DELETE of runs and artifacts (atomic, write
 * token, answers and cache after it), the whole training's /timeline and
 * memory across profiling cycles, and a database from before the memory
 * points were packed upgraded on either engine. Chunked uploads are in
 * check_runs_chunks.c, derivation in check_runs_derive.c; the helpers in
 * runs_util.c.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runs_util.h"
#include "store/db.h"
#include "store/store.h"
#include "suites.h"

/* the migrations, generated from schemas/migrations/ (build/server/migrations_gen.c) */
extern const char *const store_migrations[];
extern const int store_nmigrations;

static size_t nranks(const char *run)
{
	char url[256];
	json_t *j;
	size_t n;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/ranks", run);
	j = ru_call("GET", url, NULL, 0, 200);
	n = json_array_size(json_object_get(j, "ranks"));
	json_decref(j);
	return n;
}

/* The rows of artifact, and of the analysis of its rank of run (its only trace there). */
static long long rows_of(const char *run, int rank, long long artifact)
{
	char sql[1400];

	snprintf(sql, sizeof(sql), "SELECT (SELECT COUNT(*) FROM event_blocks WHERE key>>32=%lld)"
		 " + (SELECT COUNT(*) FROM raw_chunks WHERE key>>32=%lld) + (SELECT COUNT(*) FROM strings WHERE key>>32=%lld)"
		 " + (SELECT COUNT(*) FROM steps s JOIN runs r ON r.id=s.run_id WHERE r.name='%s' AND s.rank=%d)"
		 " + (SELECT COUNT(*) FROM op_stats o JOIN runs r ON r.id=o.run_id WHERE r.name='%s' AND o.rank=%d)"
		 " + (SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON r.id=m.run_id WHERE r.name='%s' AND m.rank=%d)"
		 " + (SELECT COUNT(*) FROM rank_memory_point_blocks b JOIN runs r ON r.id=b.run_id WHERE r.name='%s'"
		 " AND b.rank=%d)"
		 " + (SELECT COUNT(*) FROM memory_point_blocks WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_series WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_groups WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_segments WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM memory_blocks WHERE artifact_id=%lld)"
		 " + (SELECT COUNT(*) FROM artifacts WHERE id=%lld)", artifact, artifact, artifact, run, rank, run, rank,
		 run, rank, run, rank, artifact, artifact, artifact, artifact, artifact, artifact);
	return tu_db_scalar(ru_srv.db, sql);
}

START_TEST(test_delete_artifact)
{
	long long a0 = ru_upload("two", 0, "traces/hta_sampled_rank0.json.gz");
	long long a1 = ru_upload("two", 1, "traces/hta_sampled_rank1.json.gz");
	char url[256];
	json_t *j;

	ck_assert_uint_eq(nranks("two"), 2);
	ck_assert_int_gt(rows_of("two", 1, a1), 3);
	json_decref(ru_call("GET", "/api/v1/runs/two/steps?rank=1", NULL, 0, 200));	/* cached now */

	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = ru_call("DELETE", url, NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "run")), "two");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "deleted_artifacts")), 1);
	ck_assert(json_is_false(json_object_get(j, "run_deleted")));
	json_decref(j);
	ck_assert_int_eq(rows_of("two", 1, a1), 0);
	ck_assert_int_gt(rows_of("two", 0, a0), 3);

	/* the run answers as its remaining artifact: one rank, rank 1 gone (not the cached answer) */
	ck_assert_uint_eq(nranks("two"), 1);
	j = ru_call("GET", "/api/v1/runs/two/steps?rank=1", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "rank_not_found");
	json_decref(j);
	j = ru_call("GET", "/api/v1/runs/two", NULL, 0, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "artifacts")), 1);
	json_decref(j);
	j = ru_call("GET", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld/raw", a1);
	json_decref(ru_call("GET", url, NULL, 0, 404));
	/* twice: 404; an artifact of another run: 404 */
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = ru_call("DELETE", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "artifact_not_found");
	json_decref(j);
	long long other = ru_upload("other", 0, "traces/hta_sampled_rank1.json.gz");
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", other);
	json_decref(ru_call("DELETE", url, NULL, 0, 404));
	ck_assert_int_gt(rows_of("other", 0, other), 3);

	/* the same bytes uploaded again are new, not a duplicate of what was deleted */
	a1 = ru_upload("two", 1, "traces/hta_sampled_rank1.json.gz");
	ck_assert_uint_eq(nranks("two"), 2);

	/* the last artifact takes its run along */
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a0);
	json_decref(ru_call("DELETE", url, NULL, 0, 200));
	snprintf(url, sizeof(url), "/api/v1/runs/two/artifacts/%lld", a1);
	j = ru_call("DELETE", url, NULL, 0, 200);
	ck_assert(json_is_true(json_object_get(j, "run_deleted")));
	json_decref(j);
	j = ru_call("GET", "/api/v1/runs/two", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM runs WHERE name='two'"), 0);
}
END_TEST

/* The body of GET url (status 200). */
static char *body_of(const char *url)
{
	struct tu_resp r;
	char *b;

	ck_assert_int_eq(tu_http(&ru_srv, "GET", url, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%s: %ld %s", url, r.status, r.body);
	b = strdup(r.body);
	tu_resp_free(&r);
	return b;
}

/*
 * A rank's trace memory is the rank's (migration 023): with the trace it was first stored for
 * deleted, the rank answers what its other trace alone gives; with its last trace, it has none.
 */
START_TEST(test_delete_trace_memory)
{
	static const char *const tails[] = { "/memory?points=0", "/memory/peak", "/memory?points=50" };
	long long a = ru_upload("memdel", 0, "traces/hta_v100_train_memory.json.gz");
	long long b = ru_upload("memdel", 0, "traces/kineto_resnet50_workers0.json.gz");
	char url[256], *want, *got, *first;
	json_t *j;

	ru_upload("memdel", 1, "traces/hta_sampled_rank1.json.gz");
	ru_upload("memone", 0, "traces/kineto_resnet50_workers0.json.gz");
	first = body_of("/api/v1/runs/memdel/memory?points=0");	/* derives the rank from both traces */
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON r.id=m.run_id"
				      " WHERE r.name='memdel' AND m.rank=0"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_series"), 0);
	snprintf(url, sizeof(url), "/api/v1/runs/memdel/artifacts/%lld", a);
	json_decref(ru_call("DELETE", url, NULL, 0, 200));
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		snprintf(url, sizeof(url), "/api/v1/runs/memone%s", tails[i]);
		want = body_of(url);
		snprintf(url, sizeof(url), "/api/v1/runs/memdel%s", tails[i]);
		got = body_of(url);
		ck_assert_msg(!strcmp(got, want), "%s: %.300s, want %.300s", url, got, want);
		if (!i)
			ck_assert_str_ne(got, first);
		free(got);
		free(want);
	}
	free(first);
	/* its last trace gone, rank 0 has no memory rows left; rank 1 stays */
	snprintf(url, sizeof(url), "/api/v1/runs/memdel/artifacts/%lld", b);
	json_decref(ru_call("DELETE", url, NULL, 0, 200));
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT (SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON"
				      " r.id=m.run_id WHERE r.name='memdel') + (SELECT COUNT(*) FROM rank_memory_point_blocks b"
				      " JOIN runs r ON r.id=b.run_id WHERE r.name='memdel') + (SELECT COUNT(*) FROM"
				      " rank_memory_groups g JOIN runs r ON r.id=g.run_id WHERE r.name='memdel')"), 0);
	j = ru_call("GET", "/api/v1/runs/memdel/memory?rank=0", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "rank_not_found");
	json_decref(j);
	ck_assert_uint_eq(nranks("memdel"), 1);
}
END_TEST

/* a run of two snapshots: /memory/segments answers the newest, then, that one deleted, the other */
START_TEST(test_delete_snapshot_segments)
{
	long long a = ru_upload("snaps", 0, "memory/docubox_state_only_snapshot.pickle");
	long long b = ru_upload("snaps", 0, "memory/cs336_memory_snapshot.pickle");
	char url[256];
	json_t *j;

	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_blocks"), 116 + 455);
	j = ru_call("GET", "/api/v1/runs/snaps/memory/segments", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "artifact")), b);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "segments")), 216);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "snapshots")), 2);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/snaps/artifacts/%lld", b);
	json_decref(ru_call("DELETE", url, NULL, 0, 200));
	ck_assert_int_eq(rows_of("snaps", 0, b), 0);
	j = ru_call("GET", "/api/v1/runs/snaps/memory/segments", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "artifact")), a);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "segments")), 12);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "reserved_bytes")), 109051904);
	json_decref(j);
	snprintf(url, sizeof(url), "/api/v1/runs/snaps/memory/segments?artifact=%lld", b);
	j = ru_call("GET", url, NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "no_segments");
	json_decref(j);
	json_decref(ru_call("DELETE", "/api/v1/runs/snaps", NULL, 0, 200));
	ck_assert_int_eq(rows_of("snaps", 0, a), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_segments"), 0);
}
END_TEST

START_TEST(test_delete_run)
{
	static const char metrics[] = "{\"step\":1,\"name\":\"loss\",\"value\":2.5}\n";
	long long a[3];
	json_t *j;

	a[0] = ru_upload("gone", 0, "traces/hta_sampled_rank0.json.gz");
	a[1] = ru_upload("gone", 0, "memory/hta_memory_timeline.raw.json.gz");
	a[2] = ru_upload("gone", 1, "traces/hta_sampled_rank1.json.gz");
	json_decref(ru_call("POST", "/api/v1/runs/gone/metrics", metrics, strlen(metrics), 200));
	json_decref(ru_call("PATCH", "/api/v1/runs/gone", "{\"tags\":[\"x\"]}", 14, 200));
	json_decref(ru_call("GET", "/api/v1/runs", NULL, 0, 200));
	j = ru_call("DELETE", "/api/v1/runs/gone", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "deleted_artifacts")), 3);
	ck_assert(json_is_true(json_object_get(j, "run_deleted")));
	json_decref(j);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(rows_of("gone", i == 2, a[i]), 0);
	/* the ranks' analyses went with the run (they are keyed by its id, not by an artifact) */
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT (SELECT COUNT(*) FROM steps) + (SELECT COUNT(*) FROM op_stats)"
				      " + (SELECT COUNT(*) FROM kernel_stats) + (SELECT COUNT(*) FROM collectives)"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM runs WHERE name='gone'"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM metrics"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_series"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT (SELECT COUNT(*) FROM rank_memory_series) + (SELECT COUNT(*) FROM"
				      " rank_memory_point_blocks) + (SELECT COUNT(*) FROM rank_memory_groups)"), 0);
	/* every answer forgets it, cached or not */
	j = ru_call("GET", "/api/v1/runs", NULL, 0, 200);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "runs")), 0);
	json_decref(j);
	j = ru_call("GET", "/api/v1/runs/gone/steps", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	j = ru_call("DELETE", "/api/v1/runs/gone", NULL, 0, 404);
	ck_assert_str_eq(tu_error_code(j), "run_not_found");
	json_decref(j);
	j = ru_call("DELETE", "/api/v1/runs/gone/artifacts/abc", NULL, 0, 400);
	json_decref(j);
	ck_assert_int_eq(tu_db_integrity_ok(ru_srv.db), 1);
}
END_TEST

/* A reader polling the run while it is deleted sees it whole (4 artifacts, 2 ranks) or not at all. */
struct poll {
	int stop, whole, absent, torn;
};

static void *poller(void *arg)
{
	struct poll *p = arg;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		struct tu_resp r;
		if (tu_http(&ru_srv, "GET", "/api/v1/runs/whole", NULL, 0, NULL, &r))
			continue;
		if (r.status == 404) {
			__atomic_add_fetch(&p->absent, 1, __ATOMIC_RELEASE);
		} else {
			json_error_t je;
			json_t *j = json_loads(r.body, 0, &je);
			if (r.status == 200 && json_array_size(json_object_get(j, "artifacts")) == 4)
				__atomic_add_fetch(&p->whole, 1, __ATOMIC_RELEASE);
			else
				__atomic_add_fetch(&p->torn, 1, __ATOMIC_RELEASE);
			json_decref(j);
		}
		tu_resp_free(&r);
	}
	return NULL;
}

START_TEST(test_delete_is_atomic)
{
	struct poll p = { 0 };
	pthread_t t;

	ru_upload("whole", 0, "traces/hta_sampled_rank0.json.gz");
	ru_upload("whole", 1, "traces/hta_sampled_rank1.json.gz");
	ru_upload("whole", 0, "memory/hta_memory_timeline.raw.json.gz");
	ru_upload("whole", 0, "traces/hta_alexnet.json.gz");
	ck_assert_int_eq(pthread_create(&t, NULL, poller, &p), 0);
	while (!__atomic_load_n(&p.whole, __ATOMIC_ACQUIRE))
		;
	json_decref(ru_call("DELETE", "/api/v1/runs/whole", NULL, 0, 200));
	while (!__atomic_load_n(&p.absent, __ATOMIC_ACQUIRE))
		;
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	ck_assert_int_gt(p.whole, 0);
	ck_assert_int_gt(p.absent, 0);
	ck_assert_int_eq(p.torn, 0);
}
END_TEST

START_TEST(test_delete_needs_write_token)
{
	struct tu_server s;
	char tokfile[600], *dir = tu_tmpdir();
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char file[] = "secret-token-0123456789\nread reader-token-0123456789\n";
	const char body[] = "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1,\"dur\":1}]";
	const char *w = "Authorization: Bearer secret-token-0123456789";
	struct tu_resp r;

	snprintf(tokfile, sizeof(tokfile), "%s/tokens", dir);
	ck_assert_int_eq(tu_write_file(tokfile, file, strlen(file)), 0);
	ck_assert_int_eq(tu_server_start(&s, extra), 0);
	ck_assert_int_eq(tu_http(&s, "POST", "/api/v1/runs/t/artifacts", body, strlen(body), w, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 401);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t/artifacts/1", NULL, 0,
				 "Authorization: Bearer reader-token-0123456789", &r), 0);
	ck_assert(r.status == 401 || r.status == 403);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "GET", "/api/v1/runs/t/artifacts/1", NULL, 0,
				 "Authorization: Bearer reader-token-0123456789", &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&s, "DELETE", "/api/v1/runs/t/artifacts/1", NULL, 0, w, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	tu_server_cleanup(&s);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* ---- the whole training: /timeline ---- */

START_TEST(test_timeline)
{
	long long ids[4];
	json_t *j, *steps, *f, *x;
	size_t i;

	/* four cycles of 3 steps, 10 steps apart, uploaded out of order, each slower than the last */
	for (int c = 3; c >= 0; c--)
		ids[c] = ru_upload_cycle("long", 1 + 10 * c, 100 * c, 100 + 20 * c);
	j = ru_call("GET", "/api/v1/runs/long/timeline", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_total")), 12);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cycles")), 4);
	ck_assert(json_is_null(json_object_get(j, "device")));
	steps = json_object_get(j, "steps");
	ck_assert_uint_eq(json_array_size(steps), 12);
	for (i = 0; i < 12; i++) {
		x = json_array_get(steps, i);
		ck_assert_int_eq(json_integer_value(json_object_get(x, "step")), (json_int_t)(1 + 10 * (i / 3) + i % 3));
		ck_assert_int_eq(json_integer_value(json_object_get(x, "cycle")), (json_int_t)(i / 3));
		ck_assert_int_eq(json_integer_value(json_object_get(x, "dur_ns")), (json_int_t)(100 + 20 * (i / 3)) * 1000000);
		/* the artifact its span came from, though the rank's steps are stored once */
		ck_assert_int_eq(json_integer_value(json_object_get(x, "artifact_id")), ids[i / 3]);
		ck_assert(json_is_null(json_object_get(x, "allocated_bytes")));
	}
	x = json_array_get(json_object_get(j, "cycles"), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "first_step")), 31);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "mean_step_ns")), 160000000);
	f = json_object_get(j, "findings");
	ck_assert_uint_eq(json_array_size(f), 1);
	x = json_object_get(json_array_get(f, 0), "evidence");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "id")), "cycle_drift");
	ck_assert_int_eq(json_integer_value(json_object_get(x, "first_cycle_step")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(x, "last_cycle_step")), 31);
	/* /diagnosis has it too, the same, after the rank's own findings */
	json_t *d = ru_call("GET", "/api/v1/runs/long/diagnosis", NULL, 0, 200), *df = json_object_get(d, "findings");
	ck_assert_uint_ge(json_array_size(df), 2);	/* no_gpu_activity first */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(df, json_array_size(df) - 1), "id")), "cycle_drift");
	ck_assert(json_equal(json_array_get(df, json_array_size(df) - 1), json_array_get(f, 0)));
	json_decref(d);
	json_decref(j);

	/* downsampled: the first, the last, the slowest of each stretch */
	j = ru_call("GET", "/api/v1/runs/long/timeline?points=4", NULL, 0, 200);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "points")), 4);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 4);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "steps"), 3), "step")), 33);
	json_decref(j);

	/* a trace with memory: allocated at each step's end */
	ru_upload("memrun", 0, "traces/hta_v100_train_memory.json.gz");
	j = ru_call("GET", "/api/v1/runs/memrun/timeline", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:1");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 5);
	json_array_foreach(json_object_get(j, "steps"), i, x)
		ck_assert_int_gt(json_integer_value(json_object_get(x, "allocated_bytes")), 1000000000);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cycles")), 1);
	json_decref(j);

	json_decref(ru_call("GET", "/api/v1/runs/long/timeline?points=-1", NULL, 0, 400));
	json_decref(ru_call("GET", "/api/v1/runs/nope/timeline", NULL, 0, 404));
}
END_TEST

/* ---- memory over the whole training: recordings stitched, gaps where none recorded ---- */

/* A cycle of 3 steps from start_s seconds, each allocating 1 MiB at its start (never freed). */
static void upload_mem_cycle(const char *run, int first, int start_s, long long *allocated)
{
	char body[4096], url[256];
	size_t len = 0;

	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"traceEvents\":[");
	for (int k = 0; k < 3; k++) {
		long long ts = (long long)start_s * 1000000 + (long long)k * 100000;
		*allocated += 1 << 20;
		len += (size_t)snprintf(body + len, sizeof(body) - len,
					"%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
					"\"tid\":1,\"ts\":%lld,\"dur\":90000},"
					"{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":%lld,"
					"\"args\":{\"Device Type\":1,\"Device Id\":0,\"Addr\":%lld,\"Bytes\":1048576,"
					"\"Total Allocated\":%lld,\"Total Reserved\":1073741824}}",
					k ? "," : "", first + k, ts, ts + 10, 4096LL * (first + k), *allocated);
	}
	len += (size_t)snprintf(body + len, sizeof(body) - len, "]}");
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=mcycle%d.json", run, first);
	json_decref(ru_call("POST", url, body, len, 201));
}

/* the gaps of a /memory answer equal the [start, end) pairs given */
static void gaps_are(json_t *mem, const long long *want, size_t n)
{
	json_t *g = json_object_get(mem, "gaps");

	ck_assert_msg(json_is_array(g), "no gaps array");
	ck_assert_uint_eq(json_array_size(g), n);
	for (size_t i = 0; i < n; i++) {
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(g, i), "start_ns")), want[2 * i]);
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(g, i), "end_ns")), want[2 * i + 1]);
	}
}

START_TEST(test_memory_across_cycles)
{
	long long allocated = 0, want[4];
	json_t *tl, *mem, *all, *cy, *t;
	size_t i;

	/* three profiling cycles of a trace, uploaded out of order: one series, a gap between cycles */
	upload_mem_cycle("mcycles", 21, 20, &(long long){ 6 << 20 });
	upload_mem_cycle("mcycles", 1, 0, &allocated);
	allocated += 2 << 20;	/* the third cycle's first allocation follows the second's last */
	upload_mem_cycle("mcycles", 11, 10, &(long long){ 3 << 20 });
	tl = ru_call("GET", "/api/v1/runs/mcycles/timeline", NULL, 0, 200);
	cy = json_object_get(tl, "cycles");
	ck_assert_uint_eq(json_array_size(cy), 3);
	for (i = 0; i < 2; i++) {
		want[2 * i] = json_integer_value(json_object_get(json_array_get(cy, i), "end_ns"));
		want[2 * i + 1] = json_integer_value(json_object_get(json_array_get(cy, i + 1), "start_ns"));
		ck_assert_int_lt(want[2 * i], want[2 * i + 1]);
	}
	mem = ru_call("GET", "/api/v1/runs/mcycles/memory", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(mem, "source")), "trace");
	gaps_are(mem, want, 2);
	/* every cycle's allocations are in it: 9 MiB at the end */
	t = json_object_get(mem, "allocated");
	ck_assert_int_eq(json_integer_value(json_array_get(t, json_array_size(t) - 1)), 9LL << 20);
	/* no point falls inside a gap */
	json_array_foreach(json_object_get(mem, "t_ns"), i, t)
		for (size_t g = 0; g < 2; g++)
			ck_assert(!(json_integer_value(t) > want[2 * g] && json_integer_value(t) < want[2 * g + 1]));
	all = ru_call("GET", "/api/v1/runs/mcycles/memory?points=0", NULL, 0, 200);
	gaps_are(all, want, 2);
	ck_assert(json_equal(json_object_get(all, "t_ns"), json_object_get(mem, "t_ns")));
	json_decref(all);
	json_decref(mem);
	json_decref(tl);

	/* PyTorch's export of two cycles, 100 s apart: one series, stitched, the gap between them */
	char *path = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	size_t glen, len;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	json_t *rows = json_loadb((const char *)text, len, 0, NULL), *row;
	ck_assert_ptr_nonnull(rows);
	json_decref(ru_call("POST", "/api/v1/runs/mexp/artifacts?rank=0&name=cycle1.json.gz", gz, glen, 201));
	json_t *one = ru_call("GET", "/api/v1/runs/mexp/memory?points=0", NULL, 0, 200);
	json_t *t1 = json_object_get(one, "t_ns");
	long long n1 = json_integer_value(json_object_get(one, "points_total"));
	gaps_are(one, NULL, 0);
	json_array_foreach(rows, i, row)
		if (json_integer_value(json_array_get(row, 0)) >= 0)
			json_array_set_new(row, 0, json_integer(json_integer_value(json_array_get(row, 0)) + 100000000000LL));
	char *shifted = json_dumps(rows, JSON_COMPACT);
	json_decref(ru_call("POST", "/api/v1/runs/mexp/artifacts?rank=0&name=cycle2.json", shifted, strlen(shifted), 201));
	mem = ru_call("GET", "/api/v1/runs/mexp/memory?points=0", NULL, 0, 200);
	ck_assert_str_eq(json_string_value(json_object_get(mem, "source")), "pytorch");
	ck_assert_int_eq(json_integer_value(json_object_get(mem, "points_total")), 2 * n1);
	t = json_object_get(mem, "t_ns");
	want[0] = json_integer_value(json_array_get(t1, json_array_size(t1) - 1));
	want[1] = json_integer_value(json_array_get(t1, 0)) + 100000000000LL;
	gaps_are(mem, want, 1);
	ck_assert_int_eq(json_integer_value(json_array_get(t, (size_t)n1 - 1)), want[0]);
	ck_assert_int_eq(json_integer_value(json_array_get(t, (size_t)n1)), want[1]);
	/* the peak is the higher of the two, here the same bytes: the first recording's */
	ck_assert(json_equal(json_object_get(json_object_get(mem, "peak"), "bytes"),
			     json_object_get(json_object_get(one, "peak"), "bytes")));
	json_decref(mem);
	/* downsampled, the same gaps and both ends kept */
	mem = ru_call("GET", "/api/v1/runs/mexp/memory?points=100", NULL, 0, 200);
	gaps_are(mem, want, 1);
	t = json_object_get(mem, "t_ns");
	ck_assert_int_eq(json_integer_value(json_array_get(t, json_array_size(t) - 1)),
			 json_integer_value(json_array_get(t1, json_array_size(t1) - 1)) + 100000000000LL);
	json_decref(mem);
	json_decref(one);
	free(shifted);
	json_decref(rows);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/* ---- a database from before the points were packed ---- */

struct legacy_series {
	int64_t artifact, run_id;	/* run_id: a rank's trace series (rank_memory_series), artifact its owner then */
	int rank;
	char device[64];
	size_t n, cap;
	int64_t (*row)[MEM_POINT_COLS];
	uint8_t *nul;
};

/* run sql (a statement list) through db, failing the test with the engine's message */
static void db_ok(struct db *db, int rc, const char *what)
{
	ck_assert_msg(rc == DB_OK, "%s: %s", what, db_errmsg(db));
}

/* Migration 021 undone: the runs' polled_ns gone */
static const char undo_021[] = "ALTER TABLE runs DROP COLUMN polled_ns;";

/*
 * Migration 020 undone: a rank's analysis rows keyed by its first ready trace artifact again
 * (step sources NULL where that artifact gave them), as servers before it stored them.
 */
static const char undo_020[] =
	"CREATE TABLE owners (run_id INTEGER NOT NULL, rank INTEGER NOT NULL, artifact_id INTEGER NOT NULL,"
	" PRIMARY KEY (run_id, rank));"
	" INSERT INTO owners SELECT run_id, rank, MIN(id) FROM artifacts WHERE status='ready' AND kind='trace'"
	" GROUP BY run_id, rank;"
	" CREATE TABLE old_steps (artifact_id INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER NOT NULL,"
	" dur_ns INTEGER NOT NULL, kernel_ns INTEGER NOT NULL DEFAULT 0, memcpy_ns INTEGER NOT NULL DEFAULT 0,"
	" memset_ns INTEGER NOT NULL DEFAULT 0, runtime_ns INTEGER NOT NULL DEFAULT 0,"
	" dataloader_ns INTEGER NOT NULL DEFAULT 0, cpu_ns INTEGER NOT NULL DEFAULT 0, idle_ns INTEGER NOT NULL DEFAULT 0,"
	" source_artifact INTEGER, cpu_dur_ns INTEGER, communication_ns INTEGER NOT NULL DEFAULT 0,"
	" comm_overlap_ns INTEGER NOT NULL DEFAULT 0, incomplete INTEGER NOT NULL DEFAULT 0,"
	" whole_trace INTEGER NOT NULL DEFAULT 0, gpu_busy_ns INTEGER, cpu_end_ns INTEGER, sync_calls INTEGER,"
	" sync_ns INTEGER, PRIMARY KEY (artifact_id, step, start_ns)) WITHOUT ROWID;"
	" INSERT INTO old_steps SELECT o.artifact_id, s.step, s.start_ns, s.dur_ns, s.kernel_ns, s.memcpy_ns,"
	" s.memset_ns, s.runtime_ns, s.dataloader_ns, s.cpu_ns, s.idle_ns, NULLIF(s.source_artifact, o.artifact_id),"
	" s.cpu_dur_ns, s.communication_ns, s.comm_overlap_ns, s.incomplete, s.whole_trace, s.gpu_busy_ns,"
	" s.cpu_end_ns, s.sync_calls, s.sync_ns FROM steps s JOIN owners o ON o.run_id=s.run_id AND o.rank=s.rank;"
	" DROP TABLE steps; ALTER TABLE old_steps RENAME TO steps;"
	" CREATE TABLE old_ops (artifact_id INTEGER NOT NULL, device INTEGER NOT NULL, name TEXT NOT NULL,"
	" calls INTEGER NOT NULL, self_ns INTEGER NOT NULL, total_ns INTEGER NOT NULL,"
	" PRIMARY KEY (artifact_id, device, name)) WITHOUT ROWID;"
	" INSERT INTO old_ops SELECT o.artifact_id, x.device, x.name, x.calls, x.self_ns, x.total_ns FROM op_stats x"
	" JOIN owners o ON o.run_id=x.run_id AND o.rank=x.rank;"
	" DROP TABLE op_stats; ALTER TABLE old_ops RENAME TO op_stats;"
	" CREATE TABLE old_kernels (artifact_id INTEGER NOT NULL, kind INTEGER NOT NULL, name TEXT NOT NULL,"
	" calls INTEGER NOT NULL, total_ns INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
	" tiny_calls INTEGER NOT NULL, tiny_ns INTEGER NOT NULL, bps_ns INTEGER NOT NULL, bps_sum REAL NOT NULL,"
	" occ_ns INTEGER NOT NULL, occ_sum REAL NOT NULL, PRIMARY KEY (artifact_id, kind, name)) WITHOUT ROWID;"
	" INSERT INTO old_kernels SELECT o.artifact_id, x.kind, x.name, x.calls, x.total_ns, x.min_ns, x.max_ns,"
	" x.tiny_calls, x.tiny_ns, x.bps_ns, x.bps_sum, x.occ_ns, x.occ_sum FROM kernel_stats x"
	" JOIN owners o ON o.run_id=x.run_id AND o.rank=x.rank;"
	" DROP TABLE kernel_stats; ALTER TABLE old_kernels RENAME TO kernel_stats;"
	" CREATE TABLE old_colls (artifact_id INTEGER NOT NULL, n INTEGER NOT NULL, step INTEGER, kind TEXT NOT NULL,"
	" pg TEXT NOT NULL, seq INTEGER, launch_ns INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
	" time_ns INTEGER NOT NULL, kernels INTEGER NOT NULL, bytes INTEGER, group_size INTEGER, before_op TEXT,"
	" before_ns INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (artifact_id, n)) WITHOUT ROWID;"
	" INSERT INTO old_colls SELECT o.artifact_id, x.n, x.step, x.kind, x.pg, x.seq, x.launch_ns, x.start_ns,"
	" x.end_ns, x.time_ns, x.kernels, x.bytes, x.group_size, x.before_op, x.before_ns FROM collectives x"
	" JOIN owners o ON o.run_id=x.run_id AND o.rank=x.rank;"
	" DROP TABLE collectives; ALTER TABLE old_colls RENAME TO collectives;"
	" DROP TABLE owners;";

/* Migration 022 undone: no work inside the steps stored (compare walked the events for it). */
static const char undo_022[] = "DROP TABLE inside_steps;";
/* Migration 023 undone: no list of the formats' own tables (store_delete_rows named them). */
static const char undo_023[] = "DROP TABLE format_tables;";

/*
 * Migration 024 undone: a rank's trace memory series stored under its first ready trace artifact
 * again, as servers before it stored them.
 */
static const char undo_024[] =
	"CREATE TABLE mem_owners (run_id INTEGER NOT NULL, rank INTEGER NOT NULL, artifact_id INTEGER NOT NULL,"
	" PRIMARY KEY (run_id, rank));"
	" INSERT INTO mem_owners SELECT run_id, rank, MIN(id) FROM artifacts WHERE status='ready' AND kind='trace'"
	" GROUP BY run_id, rank;"
	" INSERT INTO memory_series(artifact_id, device, source, points, peak_seq, baseline, first_t_ns, peak_allocated,"
	" max_reserved) SELECT o.artifact_id, m.device, 'trace', m.points, m.peak_seq, m.baseline, m.first_t_ns,"
	" m.peak_allocated, m.max_reserved FROM rank_memory_series m JOIN mem_owners o ON o.run_id=m.run_id AND o.rank=m.rank;"
	" INSERT INTO memory_point_blocks(artifact_id, device, first_seq, n, data) SELECT o.artifact_id, b.device,"
	" b.first_seq, b.n, b.data FROM rank_memory_point_blocks b JOIN mem_owners o ON o.run_id=b.run_id AND o.rank=b.rank;"
	" INSERT INTO memory_groups(artifact_id, device, n, category, op, bytes, count) SELECT o.artifact_id, g.device, g.n,"
	" g.category, g.op, g.bytes, g.count FROM rank_memory_groups g JOIN mem_owners o ON o.run_id=g.run_id"
	" AND o.rank=g.rank;"
	" DROP TABLE rank_memory_series; DROP TABLE rank_memory_point_blocks; DROP TABLE rank_memory_groups;"
	" DROP TABLE mem_owners;";

/* Migration 025 undone: the run's uploads in flight found by a scan of its artifacts. */
static const char undo_025[] = "DROP INDEX artifacts_inflight;";

/*
 * Take the database at where back to the schema before migration 015 (016 adds step columns,
 * 017 an index, 018 a column of event blocks, 019 the captures, 020 keys the analysis rows by
 * rank, 021 a column of runs, 022 the work inside the steps, 023 the list of the formats' own
 * tables, 024 keys the trace memory series by rank, 025 an index), as a server before it left it:
 * every series' points (read with the store's own cursor)
 * written as rows of memory_points, the blocks and 015's columns gone. The
 * same on SQLite and PostgreSQL: the table is made by db_migrate, as the
 * migrations make theirs. Returns the points moved.
 */
static size_t downgrade_before_015(const char *where)
{
	struct tp_errbuf err = { 0 };
	struct legacy_series *ser = NULL;
	struct store *st;
	struct store_reader *rd;
	struct store_mem_points *c;
	struct db *db;
	struct db_stmt *q;
	size_t nser = 0, i, k, moved = 0;
	int v015;
	int64_t seq;

	ck_assert_int_eq(store_open(where, &st, &err), 0);
	ck_assert_int_eq(store_reader_open(st, &rd, &err), 0);
	ck_assert_int_eq(db_open(where, 0, &db, &err), 0);
	db_ok(db, db_prepare(db, "SELECT artifact_id, device, 0, 0 FROM memory_series UNION ALL"
				 " SELECT (SELECT MIN(a.id) FROM artifacts a WHERE a.run_id=m.run_id AND a.rank=m.rank"
				 " AND a.status='ready' AND a.kind='trace'), device, run_id, rank FROM rank_memory_series m"
				 " ORDER BY 1, 2", 0, &q),
	      "series");
	while (db_step(q) == DB_ROW) {
		ser = realloc(ser, (nser + 1) * sizeof(*ser));
		memset(&ser[nser], 0, sizeof(ser[nser]));
		ser[nser].artifact = db_column_int64(q, 0);
		snprintf(ser[nser].device, sizeof(ser[nser].device), "%s", (const char *)db_column_text(q, 1));
		ser[nser].run_id = db_column_int64(q, 2);
		ser[nser].rank = db_column_int(q, 3);
		nser++;
	}
	db_finalize(q);
	for (i = 0; i < nser; i++) {
		struct legacy_series *e = &ser[i];
		int64_t row[MEM_POINT_COLS];
		uint8_t nul;
		ck_assert_int_eq(store_mem_points_open(rd, e->run_id, e->rank, e->run_id ? 0 : e->artifact, e->device, -1, &c,
						       &err), 0);
		while (store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err) == 1) {
			ck_assert_int_eq(seq, (int64_t)e->n);
			/* doubled, not grown by one: under ASan every realloc copies, which made this loop quadratic */
			if (e->n == e->cap) {
				e->cap = e->cap ? 2 * e->cap : 1024;
				ck_assert_ptr_nonnull(e->row = realloc(e->row, e->cap * sizeof(*e->row)));
				ck_assert_ptr_nonnull(e->nul = realloc(e->nul, e->cap));
			}
			memcpy(e->row[e->n], row, sizeof(row));
			e->nul[e->n++] = nul;
		}
		ck_assert_str_eq(err.code, "");
		store_mem_points_close(c);
	}
	store_reader_close(rd);
	store_close(st);

	/* back to the schema before 015 (and 016, which only adds step columns, 017, an index, 018,
	 * a column of event blocks, 019, the captures' tables, 020, the analysis rows keyed by rank,
	 * 021, the runs' polled_ns, 022, the work inside the steps, 023, format_tables, 024, the
	 * trace memory series keyed by rank, and 025, an index) */
	for (v015 = 0; v015 < store_nmigrations && strncmp(store_migrations[v015], "-- 015:", 7); v015++)
		;
	ck_assert_int_eq(v015, store_nmigrations - 11);
	ck_assert(!strncmp(store_migrations[v015 + 1], "-- 016:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 2], "-- 017:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 3], "-- 018:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 4], "-- 019:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 5], "-- 020:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 6], "-- 021:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 7], "-- 022:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 8], "-- 023:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 9], "-- 024:", 7));
	ck_assert(!strncmp(store_migrations[v015 + 10], "-- 025:", 7));
	db_ok(db, db_exec(db, "BEGIN"), "begin");
	db_ok(db, db_migrate(db, v015, undo_025), "migration 025 undone");
	db_ok(db, db_migrate(db, v015, undo_024), "migration 024 undone");
	db_ok(db, db_migrate(db, v015, undo_023), "migration 023 undone");
	db_ok(db, db_migrate(db, v015, undo_022), "migration 022 undone");
	db_ok(db, db_migrate(db, v015, undo_021), "migration 021 undone");
	db_ok(db, db_migrate(db, v015, undo_020), "migration 020 undone");
	db_ok(db, db_migrate(db, v015, "DROP TABLE capture_artifacts; DROP TABLE capture_ranks; DROP TABLE captures;"
				     " ALTER TABLE event_blocks DROP COLUMN max_ts; DROP INDEX artifacts_by_rank;"
				     " ALTER TABLE steps DROP COLUMN cpu_end_ns;"
				     " ALTER TABLE steps DROP COLUMN sync_calls; ALTER TABLE steps DROP COLUMN sync_ns;"
				     " CREATE TABLE memory_points (artifact_id INTEGER NOT NULL, device TEXT NOT NULL,"
				     " seq INTEGER NOT NULL, t_ns INTEGER NOT NULL, parameter INTEGER NOT NULL,"
				     " optimizer_state INTEGER NOT NULL, input INTEGER NOT NULL, temporary INTEGER NOT NULL,"
				     " activation INTEGER NOT NULL, gradient INTEGER NOT NULL, autograd_detail INTEGER NOT NULL,"
				     " unknown INTEGER NOT NULL, allocated INTEGER NOT NULL, reserved INTEGER,"
				     " PRIMARY KEY (artifact_id, device, seq)) WITHOUT ROWID;"
				     " DROP TABLE memory_point_blocks;"
				     " ALTER TABLE memory_series DROP COLUMN first_t_ns;"
				     " ALTER TABLE memory_series DROP COLUMN peak_allocated;"
				     " ALTER TABLE memory_series DROP COLUMN max_reserved;"), "the schema before");
	db_ok(db, db_prepare(db, "INSERT INTO memory_points VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
				 " ?13, ?14)", 0, &q), "insert");
	for (i = 0; i < nser; i++) {
		for (k = 0; k < ser[i].n; k++) {
			db_bind_int64(q, 1, ser[i].artifact);
			db_bind_text(q, 2, ser[i].device, -1, DB_TRANSIENT);
			db_bind_int64(q, 3, (int64_t)k);
			for (int col = 0; col < MEM_POINT_COLS; col++)
				db_bind_int64(q, 4 + col, ser[i].row[k][col]);
			if (ser[i].nul[k])
				db_bind_null(q, 4 + MEM_COL_RESERVED);
			ck_assert_msg(db_step(q) == DB_DONE, "%s", db_errmsg(db));
			db_reset(q);
			moved++;
		}
		free(ser[i].row);
		free(ser[i].nul);
	}
	db_finalize(q);
	free(ser);
	if (db_is_postgres(where)) {
		char sql[96];
		snprintf(sql, sizeof(sql), "DELETE FROM trainscope.schema_version WHERE version >= %d", v015 + 1);
		db_ok(db, db_exec(db, sql), "version");
	}
	db_ok(db, db_exec(db, "COMMIT"), "commit");
	ck_assert_int_eq(db_schema_version(db), v015);
	db_close(db);
	return moved;
}

/* The point blocks, points and peaks of every series, an artifact's or a rank's (migration 023). */
#define ALL_BLOCKS "SELECT (SELECT COUNT(*) FROM memory_point_blocks) + (SELECT COUNT(*) FROM rank_memory_point_blocks)"
#define ALL_POINTS "SELECT (SELECT SUM(n) FROM memory_point_blocks) + (SELECT SUM(n) FROM rank_memory_point_blocks)"
#define ALL_PEAKS "SELECT (SELECT SUM(peak_allocated) FROM memory_series) + (SELECT SUM(peak_allocated)" \
	" FROM rank_memory_series)"

/*
 * A database from before migration 015 (points a row each) on either engine: the server upgrades it as it starts, and every memory
 * answer is what it was before the points were taken back to rows.
 */
START_TEST(test_upgrade_packs_points)
{
	static const char *const paths[] = {
		"/api/v1/runs/upexp/memory?points=0", "/api/v1/runs/upexp/memory?points=100",
		"/api/v1/runs/upexp/memory/peak", "/api/v1/runs/uptrace/memory?points=0",
		"/api/v1/runs/uptrace/memory", "/api/v1/runs/uptrace/diagnosis", "/api/v1/runs/uptrace/timeline",
	};
	enum { NP = sizeof(paths) / sizeof(paths[0]) };
	char *before[NP];
	long long blocks, points, peaks;
	struct tu_resp r;
	size_t i, moved;

	ru_upload("upexp", 0, "memory/hta_memory_timeline.raw.json.gz");
	ru_upload("uptrace", 0, "traces/hta_v100_train_memory.json.gz");
	for (i = 0; i < NP; i++) {
		ck_assert_int_eq(tu_http(&ru_srv, "GET", paths[i], NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status == 200, "%s: %ld %s", paths[i], r.status, r.body);
		before[i] = strdup(r.body);
		tu_resp_free(&r);
	}
	blocks = tu_db_scalar(ru_srv.db, ALL_BLOCKS);
	points = tu_db_scalar(ru_srv.db, ALL_POINTS);
	peaks = tu_db_scalar(ru_srv.db, ALL_PEAKS);
	ck_assert_int_gt(blocks, 2);
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_point_blocks"), 0);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);

	moved = downgrade_before_015(ru_srv.db);
	ck_assert_int_eq((long long)moved, points);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_points"), points);

	ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, db_is_postgres(ru_srv.db) ? "SELECT MAX(version) FROM schema_version"
							: "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, ALL_BLOCKS), blocks);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, ALL_POINTS), points);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, ALL_PEAKS), peaks);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM memory_series WHERE source='trace'"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, db_is_postgres(ru_srv.db)
				      ? "SELECT COUNT(*) FROM information_schema.tables WHERE table_name='memory_points'"
				      : "SELECT COUNT(*) FROM sqlite_master WHERE name='memory_points'"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, db_is_postgres(ru_srv.db)
				      ? "SELECT COUNT(*) FROM pg_indexes WHERE indexname='artifacts_inflight'"
				      : "SELECT COUNT(*) FROM sqlite_master WHERE name='artifacts_inflight'"), 1);
	for (i = 0; i < NP; i++) {
		ck_assert_int_eq(tu_http(&ru_srv, "GET", paths[i], NULL, 0, NULL, &r), 0);
		ck_assert_msg(r.status == 200 && !strcmp(r.body, before[i]), "%s differs after the upgrade: %.300s",
			      paths[i], r.body);
		tu_resp_free(&r);
		free(before[i]);
	}
}
END_TEST

/*
 * A database from before migration 020 (a rank's analysis stored under its first trace artifact;
 * before 005, under each of its traces) on either engine: the upgrade keys the rows by rank and
 * every answer is what it was; a rank whose rows were under two artifacts loses them and is
 * marked, and its first read derives it again from its events, as it was.
 */
START_TEST(test_upgrade_keys_by_rank)
{
	static const char *const runs[] = { "kept", "legacy" };
	enum { NA = 12 };
	char *before[2][NA], url[256];
	long status[2][NA];
	struct tu_resp r;
	struct tp_errbuf err = { 0 };
	struct db *db;
	json_t *j;
	size_t i, k, na = 0;
	int v020;

	ru_upload("kept", 0, "traces/hta_sampled_rank0.json.gz");
	ru_upload("kept", 1, "traces/hta_sampled_rank1.json.gz");
	ru_upload("legacy", 0, "traces/hta_v100_train_memory.json.gz");
	ru_upload("legacy", 0, "traces/kineto_resnet50_workers0.json.gz");
	for (k = 0; k < 2; k++) {
		for (i = 0, na = 0; i < ru_nanswers + 2 && na < NA; i++, na++) {
			const char *tail = i < ru_nanswers ? ru_answers[i] : i == ru_nanswers ? "/distributed" : "/timeline";
			snprintf(url, sizeof(url), "/api/v1/runs/%s%s", runs[k], tail);
			ck_assert_int_eq(tu_http(&ru_srv, "GET", url, NULL, 0, NULL, &r), 0);
			/* 404 no_memory_data for "kept" (its traces have none) */
			ck_assert_msg(r.status == 200 || (k == 0 && !strncmp(tail, "/memory", 7) && r.status == 404),
				      "%s: %ld %s", url, r.status, r.body);
			status[k][na] = r.status;
			before[k][na] = strdup(r.body);
			tu_resp_free(&r);
		}
	}
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM collectives"), 0);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);

	/* back to 019 (025, 024, 023, 022 and 021 undone first), and "legacy"'s operators stored under both its traces, as before 005 */
	for (v020 = 0; v020 < store_nmigrations && strncmp(store_migrations[v020], "-- 020:", 7); v020++)
		;
	ck_assert_int_lt(v020, store_nmigrations);
	ck_assert_int_eq(db_open(ru_srv.db, 0, &db, &err), 0);
	db_ok(db, db_exec(db, "BEGIN"), "begin");
	db_ok(db, db_migrate(db, v020, undo_025), "migration 025 undone");
	db_ok(db, db_migrate(db, v020, undo_024), "migration 024 undone");
	db_ok(db, db_migrate(db, v020, undo_023), "migration 023 undone");
	db_ok(db, db_migrate(db, v020, undo_022), "migration 022 undone");
	db_ok(db, db_migrate(db, v020, undo_021), "migration 021 undone");
	db_ok(db, db_migrate(db, v020, undo_020), "migration 020 undone");
	db_ok(db, db_exec(db, "INSERT INTO op_stats SELECT a.id, o.device, o.name, o.calls, o.self_ns, o.total_ns"
			  " FROM op_stats o JOIN artifacts a ON a.id<>o.artifact_id AND a.run_id=(SELECT run_id FROM"
			  " artifacts WHERE id=o.artifact_id) JOIN runs r ON r.id=a.run_id WHERE r.name='legacy'"), "copy");
	if (db_is_postgres(ru_srv.db)) {
		char sql[96];
		snprintf(sql, sizeof(sql), "DELETE FROM trainscope.schema_version WHERE version >= %d", v020 + 1);
		db_ok(db, db_exec(db, sql), "version");
	}
	db_ok(db, db_exec(db, "COMMIT"), "commit");
	ck_assert_int_eq(db_schema_version(db), v020);
	db_close(db);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(DISTINCT artifact_id) FROM op_stats"), 4);

	ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, db_is_postgres(ru_srv.db) ? "SELECT MAX(version) FROM schema_version"
							: "PRAGMA user_version"), store_nmigrations);
	/* "legacy" waits to be derived again (its run's info derives nothing); "kept" moved as it was */
	j = ru_call("GET", "/api/v1/runs/legacy", NULL, 0, 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	json_decref(j);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM op_stats o JOIN runs r ON r.id=o.run_id"
				      " WHERE r.name='legacy'"), 0);
	/* "kept" moved as it was, and waits too, for 022's work inside its steps */
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM op_stats o JOIN runs r ON r.id=o.run_id"
				      " WHERE r.name='kept'"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM inside_steps"), 0);
	j = ru_call("GET", "/api/v1/runs/kept", NULL, 0, 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	json_decref(j);
	for (k = 0; k < 2; k++)
		for (i = 0; i < na; i++) {
			const char *tail = i < ru_nanswers ? ru_answers[i] : i == ru_nanswers ? "/distributed" : "/timeline";
			snprintf(url, sizeof(url), "/api/v1/runs/%s%s", runs[k], tail);
			ck_assert_int_eq(tu_http(&ru_srv, "GET", url, NULL, 0, NULL, &r), 0);
			ck_assert_msg(r.status == status[k][i] && !strcmp(r.body, before[k][i]), "%s differs after the upgrade: %.300s",
				      url, r.body);
			tu_resp_free(&r);
			free(before[k][i]);
		}
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_pending"), 0);
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM inside_steps i JOIN runs r ON r.id=i.run_id"
				      " WHERE r.name='kept'"), 0);
}
END_TEST

/*
 * A database from before migration 023 (a rank's trace memory series stored under its first
 * trace artifact; before 005, under each of its traces) on either engine: the upgrade keys them
 * by rank and every memory answer is what it was; a rank whose series were under two artifacts
 * loses them and is marked, and its first read derives them again from its events, as they were.
 */
START_TEST(test_upgrade_memory_by_rank)
{
	static const char *const runs[] = { "mone", "mtwo" };
	static const char *const tails[] = { "/memory?points=0", "/memory/peak", "/memory?points=100", "/timeline",
					     "/diagnosis", "/ranks" };
	enum { NT = sizeof(tails) / sizeof(tails[0]) };
	char *before[2][NT], url[256];
	struct tp_errbuf err = { 0 };
	struct db *db;
	json_t *j;
	long long series, one;
	size_t i, k;
	int v024;

	ru_upload("mone", 0, "traces/hta_v100_train_memory.json.gz");
	ru_upload("mtwo", 0, "traces/hta_v100_train_memory.json.gz");
	ru_upload("mtwo", 0, "traces/kineto_resnet50_workers0.json.gz");
	for (k = 0; k < 2; k++)
		for (i = 0; i < NT; i++) {
			snprintf(url, sizeof(url), "/api/v1/runs/%s%s", runs[k], tails[i]);
			before[k][i] = body_of(url);
		}
	series = tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series");
	one = tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON r.id=m.run_id"
				      " WHERE r.name='mone'");
	ck_assert_int_gt(one, 0);
	ck_assert_int_gt(series, one);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);

	/* back to 023, and "mtwo"'s trace series stored under both its traces, as before 005 */
	for (v024 = 0; v024 < store_nmigrations && strncmp(store_migrations[v024], "-- 024:", 7); v024++)
		;
	ck_assert_int_lt(v024, store_nmigrations);
	ck_assert_int_eq(db_open(ru_srv.db, 0, &db, &err), 0);
	db_ok(db, db_exec(db, "BEGIN"), "begin");
	db_ok(db, db_migrate(db, v024, undo_025), "migration 025 undone");
	db_ok(db, db_migrate(db, v024, undo_024), "migration 024 undone");
	db_ok(db, db_exec(db, "INSERT INTO memory_series(artifact_id, device, source, points, peak_seq, baseline,"
			  " first_t_ns, peak_allocated, max_reserved) SELECT b.id, m.device, m.source, m.points, m.peak_seq,"
			  " m.baseline, m.first_t_ns, m.peak_allocated, m.max_reserved FROM memory_series m"
			  " JOIN artifacts a ON a.id=m.artifact_id JOIN artifacts b ON b.run_id=a.run_id AND b.rank=a.rank"
			  " AND b.id<>a.id JOIN runs r ON r.id=a.run_id WHERE r.name='mtwo'"), "copy");
	if (db_is_postgres(ru_srv.db)) {
		char sql[96];
		snprintf(sql, sizeof(sql), "DELETE FROM trainscope.schema_version WHERE version >= %d", v024 + 1);
		db_ok(db, db_exec(db, sql), "version");
	}
	db_ok(db, db_exec(db, "COMMIT"), "commit");
	ck_assert_int_eq(db_schema_version(db), v024);
	db_close(db);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(DISTINCT artifact_id) FROM memory_series"), 3);

	ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, db_is_postgres(ru_srv.db) ? "SELECT MAX(version) FROM schema_version"
							: "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT (SELECT COUNT(*) FROM memory_series) + (SELECT COUNT(*) FROM"
				      " memory_point_blocks) + (SELECT COUNT(*) FROM memory_groups)"), 0);
	/* "mone" moved as it was; "mtwo" lost its series and waits to be derived again */
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON r.id=m.run_id"
				      " WHERE r.name='mone'"), one);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series m JOIN runs r ON r.id=m.run_id"
				      " WHERE r.name='mtwo'"), 0);
	j = ru_call("GET", "/api/v1/runs/mone", NULL, 0, 200);
	ck_assert(json_is_false(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	json_decref(j);
	j = ru_call("GET", "/api/v1/runs/mtwo", NULL, 0, 200);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "run"), "analysis_pending")));
	json_decref(j);
	for (k = 0; k < 2; k++)
		for (i = 0; i < NT; i++) {
			char *got;
			snprintf(url, sizeof(url), "/api/v1/runs/%s%s", runs[k], tails[i]);
			got = body_of(url);
			ck_assert_msg(!strcmp(got, before[k][i]), "%s differs after the upgrade: %.300s", url, got);
			free(got);
			free(before[k][i]);
		}
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_pending"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_memory_series"), series);
}
END_TEST

Suite *suite_runs(void)
{
	Suite *s = suite_create("runs");
	TCase *tc = tcase_create("delete");

	tcase_add_checked_fixture(tc, ru_start, ru_stop);
	/* the upgrades rewrite every point and derive the marked ranks again: past check's 4 s on a busy
	 * machine's PostgreSQL */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_delete_artifact);
	tcase_add_test(tc, test_delete_snapshot_segments);
	tcase_add_test(tc, test_delete_trace_memory);
	tcase_add_test(tc, test_delete_run);
	tcase_add_test(tc, test_delete_is_atomic);
	tcase_add_test(tc, test_delete_needs_write_token);
	tcase_add_test(tc, test_timeline);
	tcase_add_test(tc, test_memory_across_cycles);
	tcase_add_test(tc, test_upgrade_packs_points);
	tcase_add_test(tc, test_upgrade_keys_by_rank);
	tcase_add_test(tc, test_upgrade_memory_by_rank);
	suite_add_tcase(s, tc);
	return s;
}
