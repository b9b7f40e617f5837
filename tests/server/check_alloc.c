/*
 * check_alloc.c: allocation failure N, for N = 0, 1, 2 ... through a whole
 * ingest and through the reads that answer for it, until the operation
 * succeeds with nothing refused (SQLite's and Expat's allocation tests).
 * Every failure must end in a clean error (no crash; ASan and LSan watch
 * for corruption and leaks in CI), and the database must stay whole: it
 * opens clean, nothing is left half-written, and the same ingest then
 * succeeds. Each turn checks the database through one connection of its own
 * (tu_db_open): a connection reads the whole schema first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "alloc.h"
#include "pipeline/ingest.h"
#include "pipeline/runrank.h"
#include "analysis/diagnosis.h"
#include "reads.h"
#include "store/store.h"
#include "suites.h"
#include "testutil.h"

#define MAX_N 20000

static int allowed(int rc)
{
	return rc == TP_OK || rc == TP_ERR_NOMEM || rc == TP_ERR_DB || rc == TP_ERR_IO;
}

/*
 * db as a new database, migrated and empty: a copy of one made once per test
 * process (migrating it anew at every N took most of these loops' time).
 */
static void fresh(const char *db)
{
	static uint8_t *tmpl;
	static size_t tlen;
	char side[600];

	snprintf(side, sizeof(side), "%s-wal", db);
	remove(side);
	snprintf(side, sizeof(side), "%s-shm", db);
	remove(side);
	remove(db);
	if (!tmpl) {
		struct tp_errbuf err = { 0 };
		struct store *st;
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		store_close(st);
		ck_assert_ptr_nonnull(tmpl = tu_read_file(db, &tlen));
		return;
	}
	ck_assert_int_eq(tu_write_file(db, tmpl, tlen), 0);
}

/* One ingest of data with allocation n failing; returns whether anything was refused. */
static int ingest_failing_at(long n, const char *db, const uint8_t *data, size_t len, int plain)
{
	struct tp_errbuf err = { 0 };
	struct ingest_request req = { .run = "r", .rank = 0, .name = "t.json" };
	struct ingest_result res;
	struct store *st;
	sqlite3 *chk;
	long refused;

	fresh(db);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	tp_alloc_fail_after(n);
	ingest_buffer(st, NULL, &req, data, len, &res);
	refused = tp_alloc_failures();
	tp_alloc_fail_after(-1);
	store_close(st);
	ck_assert_msg(allowed(res.rc), "N=%ld (%s): rc %d %s: %s", n, plain ? "plain" : "gzip", res.rc,
		      res.err.code, res.err.msg);
	if (!refused)
		ck_assert_int_eq(res.rc, 0);
	if (res.rc)
		ck_assert_msg(res.err.msg[0], "N=%ld: an error without a message", n);

	/* the database opens clean, with nothing half-written, and the same ingest now succeeds */
	chk = tu_db_open(db);
	ck_assert_msg(tu_db_integrity_ok_on(chk), "N=%ld: integrity_check failed", n);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM artifacts WHERE status NOT IN ('ready','error')"), 0);
	if (res.rc == 0)
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM artifacts WHERE status='ready'"), 1);
	sqlite3_close(chk);
	ingest_buffer(st, NULL, &req, data, len, &res);
	ck_assert_int_eq(res.rc, 0);
	store_close(st);
	return refused > 0;
}

/* These loops create hundreds of databases: in memory-backed /dev/shm when there is one. */
static char *scratch_dir(void)
{
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	return tu_tmpdir();
}

static void every_n(const uint8_t *data, size_t len, int plain)
{
	char *dir = scratch_dir(), db[512];
	long n;

	snprintf(db, sizeof(db), "%s/a.db", dir);
	for (n = 0; n < MAX_N; n++)
		if (!ingest_failing_at(n, db, data, len, plain))
			break;
	ck_assert_msg(n < MAX_N, "still failing after %d allocations", MAX_N);
	ck_assert_int_gt(n, 50);	/* the loop did reach deep into the ingest */
	fprintf(stderr, "alloc: %s ingest met a failed allocation at each N = 0..%ld, then succeeded\n",
		plain ? "plain" : "gzip", n - 1);
	tu_rmtree(dir);
	free(dir);
}

START_TEST(test_ingest_gzip)
{
	char *path = tu_fixture("traces/hta_event_sync.json.gz");
	size_t len;
	uint8_t *data = tu_read_file(path, &len);

	every_n(data, len, 0);
	free(data);
	free(path);
}
END_TEST

START_TEST(test_ingest_plain_with_memory_events)
{
	static const char t[] =
		"{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":3},\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":100},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":\"stream 7\",\"ts\":20,\"dur\":5,"
		" \"args\":{\"correlation\":1,\"blocks per SM\":\"inf\"}},"
		"{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":30,"
		" \"args\":{\"Device Type\":1,\"Device Id\":0,\"Addr\":1,\"Bytes\":512,\"Total Allocated\":512,"
		" \"Total Reserved\":2048}},"
		"{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"main\"}}"
		"],\"baseTimeNanoseconds\":1700000000000000000}";

	every_n((const uint8_t *)t, strlen(t), 1);
}
END_TEST

START_TEST(test_ingest_snapshot)
{
	/* a small snapshot of every trace action on two devices (the fuzzer's seed, less its first byte) */
	char *path = tu_source_path("tests/fuzz/seeds/pickle/snapshot_p4.pickle");
	size_t len;
	uint8_t *data = tu_read_file(path, &len);

	ck_assert_ptr_nonnull(data);
	every_n(data + 1, len - 1, 1);
	free(data);
	free(path);
}
END_TEST

/* A parse failure while allocations fail: still a clean error, still the raw bytes or nothing. */
START_TEST(test_failed_parse)
{
	static const char t[] = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1},{\"ph\": oops";
	char *dir = scratch_dir(), db[512];
	struct tp_errbuf err = { 0 };
	struct ingest_request req = { .run = "r", .rank = 0, .name = "bad.json" };
	struct ingest_result res;
	struct store *st;
	long n, refused = 1;

	snprintf(db, sizeof(db), "%s/b.db", dir);
	for (n = 0; n < MAX_N && refused; n++) {
		fresh(db);
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		tp_alloc_fail_after(n);
		ingest_buffer(st, NULL, &req, t, strlen(t), &res);
		refused = tp_alloc_failures();
		tp_alloc_fail_after(-1);
		store_close(st);
		ck_assert_msg(res.rc == TP_ERR_INVALID || allowed(res.rc), "N=%ld: rc %d", n, res.rc);
		ck_assert(res.rc != TP_OK);
		ck_assert(tu_db_integrity_ok(db));
		/* what cleanup could not remove, the next open does (as after a crash) */
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		store_close(st);
		ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM event_blocks"), 0);
	}
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_int_eq(res.kept, 1);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* The reads: every allocation failure gives NULL and an error, never a crash or a half answer. */
START_TEST(test_reads)
{
	char *dir = scratch_dir(), db[512], *path = tu_fixture("traces/hta_compare_base.json.gz");
	struct tp_errbuf err = { 0 };
	struct ingest_request req = { .run = "r", .rank = 0, .name = "t" };
	struct ingest_result res;
	struct store *st;
	struct store_reader *r;
	size_t len;
	uint8_t *data = tu_read_file(path, &len);
	long n, refused = 1;

	snprintf(db, sizeof(db), "%s/r.db", dir);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ingest_buffer(st, NULL, &req, data, len, &res);
	ck_assert_int_eq(res.rc, 0);
	for (n = 0; n < MAX_N && refused; n++) {
		/* every read a request can make, the analysis ones included */
		json_t *j[7] = { NULL };
		struct diag_input in;
		int64_t *durs = NULL, *nums = NULL;
		int opened, k, ok = 1;
		memset(&err, 0, sizeof(err));
		tp_alloc_fail_after(n);
		opened = store_reader_open(st, &r, &err) == TP_OK;
		if (opened) {
			j[0] = read_runs(r, &err);
			j[1] = read_run(r, "r", &err);
			j[2] = read_steps(r, "r", -1, &err);
			j[3] = read_ops(r, "r", -1, AN_DEV_CPU, "self_ns", 50, &err);
			j[4] = read_kernels(r, "r", -1, AN_GPU_KERNEL, 50, &err);
			j[5] = read_ranks(r, "r", &err);
			if (store_diag_input(r, "r", -1, &in, &durs, &nums, &err) == TP_OK)
				j[6] = diagnosis_run(&in);
			free(durs);
			free(nums);
			store_reader_close(r);
		}
		refused = tp_alloc_failures();
		tp_alloc_fail_after(-1);
		for (k = 0; k < 7; k++)
			ok &= j[k] != NULL;
		if (!refused)
			ck_assert(ok);
		if (!ok && err.rc == 0)
			ck_assert_msg(!j[6] && j[5], "only diagnosis_run may fail without an errbuf");
		for (k = 0; k < 7; k++)
			json_decref(j[k]);
	}
	ck_assert_int_gt(n, 20);
	store_close(st);
	tu_rmtree(dir);
	free(dir);
	free(data);
	free(path);
}
END_TEST


/* The length of run m's every-point memory stream, read whole. */
static size_t stream_len(struct store *st)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct mem_text *m;
	char buf[4096];
	size_t got = 0, g;

	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(read_memory_text(r, "m", -1, NULL, INT64_MIN, INT64_MAX, NULL, 0, &m, &err), 0);
	while ((g = mem_text_read(m, buf, sizeof(buf))))
		got += g;
	ck_assert(!mem_text_failed(m));
	mem_text_free(m);
	return got;
}

/*
 * Run m's memory reads of one kind (0: the timeline, a window, the peak; 1:
 * the segments; 2: the every-point stream) while allocation N fails, for N =
 * 0, 1, 2 ... until none is refused: NULL and an error, or a stream cut short
 * and said failed, never a crash, a leak or a half answer. One kind a loop:
 * each loop's cost grows with the square of its allocations.
 */
static void memory_reads_failing(struct store *st, int kind, size_t whole)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long n, refused = 1;
	char buf[4096];

	for (n = 0; n < MAX_N && refused; n++) {
		json_t *j[3] = { NULL };
		struct mem_text *m = NULL;
		size_t got = 0, k;
		int ok = 1, failed = 1;
		memset(&err, 0, sizeof(err));
		tp_alloc_fail_after(n);
		if (kind < 2 && store_reader_open(st, &r, &err) == TP_OK) {
			if (kind == 0) {
				j[0] = read_memory(r, "m", -1, NULL, 12, INT64_MIN, INT64_MAX, NULL, 0, &err);
				j[1] = read_memory(r, "m", -1, NULL, 3, 0, INT64_MAX - 1, NULL, 0, &err);	/* a window */
				j[2] = read_memory_peak(r, "m", -1, NULL, &err);
			} else {
				j[0] = read_segments(r, "m", -1, NULL, 0, &err);
			}
			store_reader_close(r);
		}
		/* the stream owns its reader */
		if (kind == 2 && store_reader_open(st, &r, &err) == TP_OK &&
		    read_memory_text(r, "m", -1, NULL, INT64_MIN, INT64_MAX, NULL, 0, &m, &err) == TP_OK) {
			size_t g;
			while ((g = mem_text_read(m, buf, sizeof(buf))))
				got += g;
			failed = mem_text_failed(m);
			mem_text_free(m);
		}
		refused = tp_alloc_failures();
		tp_alloc_fail_after(-1);
		for (k = 0; k < (kind == 0 ? 3u : kind == 1 ? 1u : 0u); k++)
			ok &= j[k] != NULL;
		/* a stream that ends without saying it failed is whole */
		if (kind == 2 && !failed)
			ck_assert_uint_eq(got, whole);
		if (!refused) {
			ck_assert(ok);
			ck_assert(kind != 2 || !failed);
			if (kind == 0) {
				ck_assert_int_eq(json_integer_value(json_object_get(j[0], "points_total")),
						 json_integer_value(json_object_get(j[1], "points_total")));
				ck_assert_uint_eq(json_array_size(json_object_get(j[0], "t_ns")), 12);
			}
		}
		for (k = 0; k < 3; k++)
			json_decref(j[k]);
	}
	ck_assert_int_gt(n, 20);
}

/* The memory reads of a snapshot (a timeline and segments) under every allocation failure. */
START_TEST(test_memory_reads)
{
	char *dir = scratch_dir(), db[512], *path = tu_fixture("memory/cs336_memory_snapshot.pickle");
	struct tp_errbuf err = { 0 };
	struct ingest_request req = { .run = "m", .rank = 0, .name = "s.pickle" };
	struct ingest_result res;
	struct store *st;
	size_t len, whole;
	uint8_t *data = tu_read_file(path, &len);

	snprintf(db, sizeof(db), "%s/m.db", dir);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ingest_buffer(st, NULL, &req, data, len, &res);
	ck_assert_int_eq(res.rc, 0);
	whole = stream_len(st);
	ck_assert_uint_gt(whole, 1000);
	for (int kind = 0; kind < 3; kind++)
		memory_reads_failing(st, kind, whole);
	store_close(st);
	tu_rmtree(dir);
	free(dir);
	free(data);
	free(path);
}
END_TEST

/*
 * Disk full: write, truncate or sync N fails, for N = 0, 1, 2 ... through an
 * ingest. A clean storage error, the database whole, nothing half-written,
 * and the same ingest succeeds once the disk has room again.
 */
/*
 * A rank of two chunks derived by its first read (runrank_settle) while
 * allocation N fails: a clean error, the rank still marked for the next read,
 * the database whole; with nothing refused, the rank is derived and unmarked.
 */
START_TEST(test_settle)
{
	static const char a[] =
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,"
		"\"tid\":1,\"ts\":10,\"dur\":100},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,"
		"\"tid\":1,\"ts\":20,\"dur\":150}]}";
	static const char b[] =
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#2\",\"pid\":1,"
		"\"tid\":1,\"ts\":200,\"dur\":100},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,"
		"\"tid\":1,\"ts\":210,\"dur\":5}]}";
	static const char c[] =
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#3\",\"pid\":1,"
		"\"tid\":1,\"ts\":400,\"dur\":100},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mul\",\"pid\":1,"
		"\"tid\":1,\"ts\":410,\"dur\":7}]}";
	char *dir = scratch_dir(), db[512];
	struct tp_errbuf err = { 0 };
	struct ingest_request ra = { .run = "c", .rank = 0, .name = "a.json" }, rb = ra, rc3 = ra;
	struct ingest_result res;
	struct store *st;
	struct deriver *dv;
	sqlite3 *chk;
	long n, refused = 1;
	int rc = -1;

	rb.name = "b.json";
	rc3.name = "c.json";
	snprintf(db, sizeof(db), "%s/s.db", dir);
	for (n = 0; n < MAX_N && refused; n++) {
		fresh(db);
		ck_assert_ptr_nonnull(dv = deriver_new(NULL));
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		ingest_buffer(st, NULL, &ra, a, strlen(a), &res);
		ck_assert_int_eq(res.rc, 0);
		ingest_buffer(st, NULL, &rb, b, strlen(b), &res);
		ck_assert_int_eq(res.rc, 0);
		ck_assert_int_eq(res.rank_pending, 1);
		memset(&err, 0, sizeof(err));
		tp_alloc_fail_after(n);
		rc = runrank_settle(dv, st, "c", &err);
		refused = tp_alloc_failures();
		tp_alloc_fail_after(-1);
		ck_assert_msg(allowed(rc), "N=%ld: rc %d %s", n, rc, err.msg);
		chk = tu_db_open(db);
		if (!refused)
			ck_assert_int_eq(rc, 0);
		ck_assert(tu_db_integrity_ok_on(chk));
		/* failed: still marked, and the next read derives it */
		if (rc)
			ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM rank_pending"), 1);
		ck_assert_int_eq(runrank_settle(dv, st, "c", &err), 0);
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM rank_pending"), 0);
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM steps"), 2);
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM (SELECT DISTINCT run_id, rank FROM op_stats) k"), 1);
		/* a third chunk, derived from the analysis kept of the first two, as allocation N fails */
		ingest_buffer(st, NULL, &rc3, c, strlen(c), &res);
		ck_assert_int_eq(res.rc, 0);
		memset(&err, 0, sizeof(err));
		tp_alloc_fail_after(n);
		rc = runrank_settle(dv, st, "c", &err);
		refused |= tp_alloc_failures();
		tp_alloc_fail_after(-1);
		ck_assert_msg(allowed(rc), "N=%ld, third: rc %d %s", n, rc, err.msg);
		ck_assert(tu_db_integrity_ok_on(chk));
		ck_assert_int_eq(runrank_settle(dv, st, "c", &err), 0);
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM steps"), 3);
		ck_assert_int_eq(tu_db_scalar_on(chk, "SELECT COUNT(*) FROM op_stats WHERE calls=1"), 3);
		sqlite3_close(chk);
		runrank_drain(dv, st);
		deriver_free(dv);
		store_close(st);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_gt(n, 20);
	tu_rmtree(dir);
	free(dir);
}
END_TEST

START_TEST(test_ingest_disk_full)
{
	char *dir = scratch_dir(), db[512], *path = tu_fixture("traces/hta_event_sync.json.gz");
	struct tp_errbuf err = { 0 };
	struct ingest_request req = { .run = "r", .rank = 0, .name = "t" };
	struct ingest_result res;
	struct store *st;
	size_t len;
	uint8_t *data = tu_read_file(path, &len);
	long n, refused = 1;

	snprintf(db, sizeof(db), "%s/io.db", dir);
	for (n = 0; n < MAX_N && refused; n++) {
		fresh(db);
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		store_fail_io_after(n);
		ingest_buffer(st, NULL, &req, data, len, &res);
		refused = store_io_failures();
		store_fail_io_after(-1);
		if (res.rc) {
			/* the disk has room again: the next upload drops the failed one's row, not a restart */
			struct ingest_request req2 = { .run = "r2", .rank = 0, .name = "t" };
			struct ingest_result res2;
			ingest_buffer(st, NULL, &req2, data, len, &res2);
			ck_assert_int_eq(res2.rc, 0);
			ck_assert_msg(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='ingesting'") == 0,
				      "N=%ld: a failed upload is left ingesting", n);
			ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts a JOIN runs r ON r.id=a.run_id"
							  " WHERE r.name='r' AND a.status='ready'"), 0);
		}
		store_close(st);
		ck_assert_msg(allowed(res.rc), "N=%ld: rc %d %s", n, res.rc, res.err.msg);
		if (res.rc)
			ck_assert_msg(!strcmp(res.err.code, "storage_error") || !strcmp(res.err.code, "database_error"),
				      "N=%ld: code %s", n, res.err.code);
		ck_assert_msg(tu_db_integrity_ok(db), "N=%ld: integrity_check failed", n);
		ck_assert_int_eq(store_open(db, &st, &err), 0);
		ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status NOT IN ('ready','error')"), 0);
		ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts a JOIN runs r ON r.id=a.run_id"
						  " WHERE r.name='r' AND a.status='ready'"), res.rc ? 0 : 1);
		ingest_buffer(st, NULL, &req, data, len, &res);
		ck_assert_int_eq(res.rc, 0);
		store_close(st);
	}
	ck_assert_int_gt(n, 5);
	fprintf(stderr, "alloc: ingest met a failed write/sync at each N = 0..%ld, then succeeded\n", n - 2);
	tu_rmtree(dir);
	free(dir);
	free(data);
	free(path);
}
END_TEST

/*
 * A test case a test, so that ctest runs them side by side (a ctest test a case), all
 * tagged slow: thousands of databases; scripts/valgrind.sh leaves them out
 * (CK_EXCLUDE_TAGS=slow).
 */
static void add_case(Suite *s, TCase *tc, const TTest *test)
{
	tcase_set_tags(tc, "slow");
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}

Suite *suite_alloc(void)
{
	Suite *s = suite_create("alloc");

	add_case(s, tcase_create("ingest_gzip"), test_ingest_gzip);
	add_case(s, tcase_create("ingest_plain"), test_ingest_plain_with_memory_events);
	add_case(s, tcase_create("ingest_snapshot"), test_ingest_snapshot);
	add_case(s, tcase_create("failed_parse"), test_failed_parse);
	add_case(s, tcase_create("reads"), test_reads);
	add_case(s, tcase_create("memory_reads"), test_memory_reads);
	add_case(s, tcase_create("disk_full"), test_ingest_disk_full);
	add_case(s, tcase_create("settle"), test_settle);
	return s;
}
