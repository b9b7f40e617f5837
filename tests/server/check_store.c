/*
 * check_store.c: the store on its own (server/store/store.c): migrations, the
 * artifact life cycle and what readers may see of it, duplicates, raw
 * chunks, packed events, and the JSON it answers with.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reads.h"
#include "store/db.h"
#include "store/store.h"
#include "suites.h"
#include "testutil.h"

/* migrations_gen.c: the schemas/migrations, in order */
extern const char *const store_migrations[];
extern const int store_nmigrations;

static char *dir;
static char db[512];
static struct store *st;
static struct store_writer *w;
static struct store_reader *r;

static void setup(void)
{
	struct tp_errbuf err = { 0 };

	dir = tu_tmpdir();
	snprintf(db, sizeof(db), "%s/s.db", dir);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ck_assert_int_eq(store_writer_open(st, &w, &err), 0);
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
}

static void teardown(void)
{
	store_reader_close(r);
	store_writer_close(w);
	store_close(st);
	tu_rmtree(dir);
	free(dir);
}

/* begin an artifact and give it two X events, a [memory]-like event, a string and a raw chunk */
static int64_t filled_artifact(const char *run)
{
	struct tp_errbuf err = { 0 };
	struct tp_event ev[2] = { { .ph = 'X', .name = 5, .have = TH_TS | TH_DUR | TH_PID | TH_TID,
				    .ts_ns = 1000, .dur_ns = 10, .pid = 1, .tid_s = "stream 7", .tid_sid = 6 },
				  { .ph = 'X', .name = 5, .have = TH_TS | TH_DUR, .ts_ns = 2000, .dur_ns = 20 } };
	struct tp_event mev = { .ph = 'i', .name = 1, .have = TH_TS | TH_BYTES, .ts_ns = 1500, .bytes = -4 };
	struct store_string strs[] = { { 5, 8, "aten::mm" }, { 6, 8, "stream 7" } };
	static const uint8_t raw[] = "raw bytes";
	struct store_batch b = { .ev = ev, .nev = 2, .mev = &mev, .nmev = 1, .str = strs, .nstr = 2,
				 .raw = raw, .nraw = sizeof(raw) };
	int64_t id;

	ck_assert_int_eq(store_artifact_begin(w, run, 0, "trace", "t.json", &id, &err), 0);
	ck_assert_int_eq(store_write_batch(w, id, &b, &err), 0);
	return id;
}

static const char *op_name(void *payload, uint32_t id)
{
	(void)payload;
	return id == 1 ? "aten::mm" : "?";
}

static struct store_final final(const char *sha)
{
	static struct an_step steps[] = { { .step = 7, .start_ns = 1000, .dur_ns = 1500,
					    .comp_ns = { 1000, 0, 0, 0, 0, 0, 500 } } };
	static struct an_op ops[] = { { .name = 1, .device = AN_DEV_CPU, .calls = 2, .self_ns = 5, .total_ns = 9 } };
	static const struct an_result an = { .steps = steps, .nsteps = 1, .ops = ops, .nops = 1 };
	struct store_final f = { .sha256 = sha, .bytes = 10, .events = 3, .base_ns = 1000000, .rank = 2,
				 .kind = "trace", .raw_encoding = "upload", .meta_json = "{\"a\":1}",
				 .peak_allocated = 4096, .analysis = &an, .str = op_name };
	return f;
}

START_TEST(test_reopen_keeps_schema_and_data)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("aa");
	int64_t id = filled_artifact("keep"), dup;

	ck_assert_int_eq(store_artifact_commit(w, id, &f, &dup, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(db, "PRAGMA page_size"), 16384);
	store_reader_close(r);
	store_writer_close(w);
	store_close(st);
	ck_assert_int_eq(store_open(db, &st, &err), 0);	/* no migration runs twice */
	ck_assert_int_eq(store_writer_open(st, &w, &err), 0);
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='ready'"), 1);
}
END_TEST

/*
 * A rank's artifacts (RANK_ARTIFACTS: run, rank, status) are found by the
 * index of migration 017, not by a scan of the run's artifacts for each rank:
 * a read over every rank of a 10,000-rank run was quadratic (issue 50).
 */
START_TEST(test_rank_reads_use_the_index)
{
	sqlite3 *h;
	sqlite3_stmt *q;
	int found = 0;

	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "EXPLAIN QUERY PLAN SELECT a.id FROM artifacts a JOIN runs r"
					    " ON r.id=a.run_id WHERE r.name='x' AND a.rank=3 AND a.status='ready'",
					    -1, &q, NULL), SQLITE_OK);
	while (sqlite3_step(q) == SQLITE_ROW)
		found |= strstr((const char *)sqlite3_column_text(q, 3), "artifacts_by_rank (run_id=? AND rank=? AND"
								    " status=?)") != NULL;
	sqlite3_finalize(q);
	sqlite3_close(h);
	ck_assert_msg(found, "the rank's artifacts are not read through artifacts_by_rank");
}
END_TEST

/* the statements run on the connections opened while trace_all is registered (sqlite3_auto_extension) */
static char *ran[64];
static int nran;

static int keep_sql(unsigned type, void *ctx, void *stmt, void *x)
{
	const char *sql = sqlite3_sql(stmt);
	int i;

	(void)type;
	(void)ctx;
	(void)x;
	for (i = 0; i < nran && strcmp(ran[i], sql); i++)
		;
	if (i == nran && nran < (int)(sizeof(ran) / sizeof(ran[0])))
		ran[nran++] = strdup(sql);
	return 0;
}

static int trace_all(sqlite3 *h, const char **msg, const struct sqlite3_api_routines *api)
{
	(void)msg;
	(void)api;
	sqlite3_trace_v2(h, SQLITE_TRACE_STMT, keep_sql, NULL);
	return SQLITE_OK;
}

/*
 * A rank's first trace replaces the rank's analysis (steps, op_stats,
 * kernel_stats, collectives, inside_steps): its DELETEs search the
 * (run_id, rank, ...) key by both, not by run_id alone, which read every
 * rank's rows of the run at each upload: 10,000 uploads were quadratic
 * (issue 50); and none of the statements the commit ran scans a table.
 */
START_TEST(test_rank_rows_deleted_by_key)
{
	static const char *const tables[] = { "steps", "op_stats", "kernel_stats", "collectives", "inside_steps" };
	struct tp_errbuf err = { 0 };
	struct store_final f = final("bb");
	struct store_writer *held;
	int64_t id, dup;
	sqlite3 *h;
	int i, checked = 0;

	/* a new connection: the pooled writer is held while the test's is opened */
	held = w;
	ck_assert_int_eq(sqlite3_auto_extension((void (*)(void))trace_all), SQLITE_OK);
	ck_assert_int_eq(store_writer_open(st, &w, &err), 0);
	store_writer_close(held);
	id = filled_artifact("big");
	ck_assert_int_eq(store_artifact_commit(w, id, &f, &dup, &err), 0);
	sqlite3_reset_auto_extension();
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM steps WHERE rank=2"), 1);

	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	for (i = 0; i < nran; i++) {
		char want[64], eqp[1024];
		sqlite3_stmt *q;
		size_t t;
		int found = 0;

		for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
			snprintf(want, sizeof(want), "DELETE FROM %s WHERE ", tables[t]);
			if (!strncmp(ran[i], want, strlen(want)))
				break;
		}
		snprintf(eqp, sizeof(eqp), "EXPLAIN QUERY PLAN %s", ran[i]);
		ck_assert_int_eq(sqlite3_prepare_v2(h, eqp, -1, &q, NULL), SQLITE_OK);
		while (sqlite3_step(q) == SQLITE_ROW) {
			const char *plan = (const char *)sqlite3_column_text(q, 3);
			/* nothing the commit runs reads a whole table */
			ck_assert_msg(strncmp(plan, "SCAN ", 5), "%s: %s", ran[i], plan);
			found |= strstr(plan, "(run_id=? AND rank=?") != NULL;
		}
		sqlite3_finalize(q);
		if (t == sizeof(tables) / sizeof(tables[0]))
			continue;
		ck_assert_msg(found, "%s: not searched by (run_id, rank)", ran[i]);
		checked++;
	}
	sqlite3_close(h);
	ck_assert_int_eq(checked, 5);
	while (nran)
		free(ran[--nran]);
}
END_TEST

START_TEST(test_ingesting_is_invisible)
{
	struct tp_errbuf err = { 0 };
	json_t *j;

	filled_artifact("hidden");
	j = read_runs(r, &err);
	ck_assert_int_eq(json_array_size(json_object_get(j, "runs")), 0);
	json_decref(j);
	ck_assert_ptr_null(read_run(r, "hidden", &err));
	ck_assert_int_eq(err.rc, TP_ERR_NOTFOUND);
	ck_assert_str_eq(err.code, "run_not_found");
	memset(&err, 0, sizeof(err));
	ck_assert_ptr_null(read_steps(r, "hidden", 0, &err));
	ck_assert_int_eq(err.rc, TP_ERR_NOTFOUND);
}
END_TEST

START_TEST(test_commit_answers)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("bb");
	int64_t id = filled_artifact("run1"), dup;
	json_t *j, *run, *a, *s;

	ck_assert_int_eq(store_artifact_commit(w, id, &f, &dup, &err), 0);
	ck_assert_int_eq(dup, 0);
	j = read_run(r, "run1", &err);
	ck_assert_ptr_nonnull(j);
	run = json_object_get(j, "run");
	ck_assert_str_eq(json_string_value(json_object_get(run, "name")), "run1");
	ck_assert_int_eq(json_integer_value(json_object_get(run, "artifacts")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "ranks")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "steps")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "peak_allocated_bytes")), 4096);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(run, "step_time_ns"), "mean")), 1500);
	ck_assert(json_is_object(json_object_get(run, "metadata")));
	ck_assert(json_is_array(json_object_get(run, "tags")));
	a = json_array_get(json_object_get(j, "artifacts"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "rank")), 2);
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_str_eq(json_string_value(json_object_get(a, "sha256")), "bb");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 3);
	json_decref(j);
	/* steps: start as written plus the artifact's base */
	j = read_steps(r, "run1", 2, &err);
	s = json_array_get(json_object_get(j, "steps"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "step")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "start_ns")), 1001000);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "dur_ns")), 1500);
	json_decref(j);
	j = read_steps(r, "run1", 0, &err);	/* another rank: none */
	ck_assert_int_eq(json_array_size(json_object_get(j, "steps")), 0);
	json_decref(j);
}
END_TEST

struct got {
	struct tp_event ev[8];
	char tid0[16];		/* strings are borrowed for the callback only */
	size_t n;
};

static int collect(void *payload, const struct tp_event *ev, size_t n)
{
	struct got *g = payload;

	for (size_t i = 0; i < n && g->n < 8; i++) {
		if (g->n == 0 && ev[i].tid_s)
			snprintf(g->tid0, sizeof(g->tid0), "%s", ev[i].tid_s);
		g->ev[g->n++] = ev[i];
	}
	return 0;
}

START_TEST(test_events_and_raw_read_back)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("cc");
	struct store_raw_info info;
	struct got got = { 0 };
	int64_t id = filled_artifact("ev"), dup;
	const void *data;
	size_t len;

	ck_assert_int_eq(store_artifact_commit(w, id, &f, &dup, &err), 0);
	ck_assert_int_eq(store_events_each(r, id, STORE_EVENTS, collect, &got, &err), 0);
	ck_assert_uint_eq(got.n, 2);
	ck_assert_int_eq(got.ev[0].ts_ns, 1000);
	ck_assert_int_eq(got.ev[1].dur_ns, 20);
	ck_assert_str_eq(got.tid0, "stream 7");	/* string tid resolved */
	ck_assert_int_eq(got.ev[0].pid, 1);
	memset(&got, 0, sizeof(got));
	ck_assert_int_eq(store_events_each(r, id, STORE_MEMORY_EVENTS, collect, &got, &err), 0);
	ck_assert_uint_eq(got.n, 1);
	ck_assert_int_eq(got.ev[0].bytes, -4);
	ck_assert_int_eq(store_raw_info(r, "ev", id, &info, &err), 0);
	ck_assert_uint_eq(info.nchunks, 1);
	ck_assert_str_eq(info.encoding, "upload");
	ck_assert_int_eq(store_raw_chunk(r, id, 0, &data, &len, &err), 0);
	ck_assert_uint_eq(len, 10);
	ck_assert_str_eq((const char *)data, "raw bytes");
	ck_assert_int_eq(store_raw_chunk(r, id, 1, &data, &len, &err), TP_ERR_NOTFOUND);
	ck_assert_int_eq(store_raw_info(r, "other-run", id, &info, &err), TP_ERR_NOTFOUND);
}
END_TEST

START_TEST(test_fail_keeps_raw_only)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("dd");
	int64_t id = filled_artifact("bad"), dup;
	json_t *j, *a;

	f.error_code = "invalid_json";
	f.error_msg = "invalid JSON at byte 3";
	ck_assert_int_eq(store_artifact_fail(w, id, &f, &dup, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM event_blocks"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM strings"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM steps"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM raw_chunks"), 1);
	j = read_artifact(r, "bad", id, &err);
	a = json_object_get(j, "artifact");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "error");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 0);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "error"), "code")), "invalid_json");
	json_decref(j);
}
END_TEST

START_TEST(test_duplicates_and_drop)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("ee");
	int64_t a = filled_artifact("d"), b, c, dup;

	ck_assert_int_eq(store_artifact_commit(w, a, &f, &dup, &err), 0);
	b = filled_artifact("d");
	ck_assert_int_eq(store_artifact_commit(w, b, &f, &dup, &err), 0);
	ck_assert_int_eq(dup, a);	/* same run, same sha256: the first one, the second removed */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(DISTINCT key >> 32) FROM raw_chunks"), 1);
	/* a failed upload of the same bytes is the same artifact too */
	c = filled_artifact("d");
	ck_assert_int_eq(store_artifact_fail(w, c, &f, &dup, &err), 0);
	ck_assert_int_eq(dup, a);
	/* drop removes everything, and the run once it is empty */
	c = filled_artifact("gone");
	ck_assert_int_eq(store_artifact_drop(w, c), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM runs WHERE name='gone'"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(DISTINCT key >> 32) FROM event_blocks"), 1);
}
END_TEST

START_TEST(test_delete_waits_for_ingest)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("ff");
	int64_t a = filled_artifact("busy"), b, dup, n = -1;
	int gone = -1, rank = -2;

	ck_assert_int_eq(store_artifact_commit(w, a, &f, &dup, &err), 0);
	b = filled_artifact("busy");	/* still ingesting */
	ck_assert_int_eq(store_run_delete(w, "busy", 0, &n, &gone, &rank, &err), TP_ERR_CONFLICT);
	ck_assert_str_eq(err.code, "ingest_in_progress");
	ck_assert_int_eq(n, 0);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(store_run_delete(w, "busy", b, &n, &gone, &rank, &err), TP_ERR_CONFLICT);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 2);	/* nothing went */
	/* the ready one can go on its own; the run stays with its upload */
	ck_assert_int_eq(store_run_delete(w, "busy", a, &n, &gone, &rank, &err), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(gone, 0);
	ck_assert_int_eq(rank, 2);	/* a ready trace of rank 2: its rank is to derive again */
	ck_assert_int_eq(store_run_delete(w, "nope", 0, &n, &gone, &rank, &err), TP_ERR_NOTFOUND);
	ck_assert_str_eq(err.code, "run_not_found");
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 1);
}
END_TEST

/*
 * Deleting an artifact deletes its rows in each table format_tables lists (migration 023); a
 * name there that is not one ([a-z0-9_]) is refused before it reaches SQL, and the delete
 * changes nothing.
 */
START_TEST(test_format_tables_names_checked)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("ee");
	int64_t a = filled_artifact("odd"), dup, n = -1;
	int gone = -1, rank = -2;
	sqlite3 *h;

	ck_assert_int_eq(store_artifact_commit(w, a, &f, &dup, &err), 0);
	ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "CREATE TABLE odd_rows(artifact_id INTEGER, v INTEGER);"
				      " INSERT INTO odd_rows VALUES(1, 1), (1, 2), (99, 3);"
				      " INSERT INTO format_tables(name) VALUES ('odd_rows'), ('runs WHERE 1=1; --')",
				      NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(a, 1);
	ck_assert_int_eq(store_run_delete(w, "odd", 0, &n, &gone, &rank, &err), TP_ERR_DB);
	ck_assert_str_eq(err.code, "database_error");
	ck_assert_ptr_nonnull(strstr(err.msg, "format_tables"));
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM odd_rows"), 3);
	ck_assert_int_eq(sqlite3_exec(h, "DELETE FROM format_tables WHERE name LIKE 'runs%'", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	memset(&err, 0, sizeof(err));
	ck_assert_int_eq(store_run_delete(w, "odd", 0, &n, &gone, &rank, &err), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM odd_rows"), 1);	/* another artifact's row stays */
}
END_TEST

/* The legacy point i of the test series: one column of each kind moving, reserved unknown on odd points. */
static void legacy_point(int64_t i, int64_t row[MEM_POINT_COLS], uint8_t *nul)
{
	row[0] = 1000000 + i * 1000 - (i % 7) * 3;
	for (int c = 0; c < MEM_NCAT; c++)
		row[1 + c] = (c == 3 ? (i * 4096) % 65536 : (int64_t)c << 20) + (c == 7 && i == 1500 ? INT64_MAX / 16 : 0);
	row[MEM_COL_ALLOCATED] = 0;
	for (int c = 0; c < MEM_NCAT; c++)
		row[MEM_COL_ALLOCATED] += row[1 + c];
	row[MEM_COL_RESERVED] = i % 2 ? 0 : (i == 0 ? 0 : INT64_MAX - i);
	*nul = i % 2;
}

/*
 * A database from before migration 015 keeps memory points as rows: the
 * upgrade packs them into blocks, drops the table, fills the series' new
 * columns, and the points read back as they were written.
 */
START_TEST(test_legacy_points_packed)
{
	struct tp_errbuf err = { 0 };
	struct store *ost;
	struct store_reader *orr;
	struct store_mem_points *c;
	char path[600], sql[256];
	sqlite3 *h;
	sqlite3_stmt *ins;
	int64_t row[MEM_POINT_COLS], want[MEM_POINT_COLS], seq;
	uint8_t nul, wnul;
	int i, n = 2500;

	snprintf(path, sizeof(path), "%s/old.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	/* the database as it was before migration 015 (memory_point_blocks); the rest run at open */
	int before = 0;
	while (before < store_nmigrations && !strstr(store_migrations[before], "CREATE TABLE memory_point_blocks"))
		before++;
	ck_assert_int_lt(before, store_nmigrations);
	for (i = 0; i < before; i++)
		ck_assert_int_eq(sqlite3_exec(h, store_migrations[i], NULL, NULL, NULL), SQLITE_OK);
	snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", before);
	ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "BEGIN; INSERT INTO memory_series(artifact_id, device, source, points, peak_seq,"
					 " baseline) VALUES(7, 'cuda:0', 'pytorch', 2500, 1500, 0), (7, 'cpu', 'snapshot', 0,"
					 " NULL, 5)", NULL, NULL, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(h, "INSERT INTO memory_points VALUES(7, 'cuda:0', ?1, ?2, ?3, ?4, ?5, ?6,"
					    " ?7, ?8, ?9, ?10, ?11, ?12)", -1, &ins, NULL), SQLITE_OK);
	for (i = 0; i < n; i++) {
		legacy_point(i, want, &wnul);
		sqlite3_bind_int64(ins, 1, i);
		for (int k = 0; k < MEM_POINT_COLS; k++)
			sqlite3_bind_int64(ins, 2 + k, want[k]);
		if (wnul)
			sqlite3_bind_null(ins, 2 + MEM_COL_RESERVED);
		ck_assert_int_eq(sqlite3_step(ins), SQLITE_DONE);
		sqlite3_reset(ins);
	}
	sqlite3_finalize(ins);
	ck_assert_int_eq(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	ck_assert_int_eq(store_open(path, &ost, &err), 0);
	ck_assert_int_eq(tu_db_scalar(path, "PRAGMA user_version"), store_nmigrations);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE name='memory_points'"), 0);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT COUNT(*) FROM memory_point_blocks"), 3);	/* 1024 + 1024 + 452 */
	ck_assert_int_eq(tu_db_scalar(path, "SELECT SUM(n) FROM memory_point_blocks"), n);
	legacy_point(0, want, &wnul);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT first_t_ns FROM memory_series WHERE device='cuda:0'"), want[0]);
	legacy_point(1500, want, &wnul);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT peak_allocated FROM memory_series WHERE device='cuda:0'"),
			 want[MEM_COL_ALLOCATED]);
	legacy_point(2, want, &wnul);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT max_reserved FROM memory_series WHERE device='cuda:0'"),
			 want[MEM_COL_RESERVED]);
	ck_assert_int_eq(tu_db_scalar(path, "SELECT COUNT(*) FROM memory_series WHERE device='cpu'"
					    " AND first_t_ns IS NULL AND peak_allocated IS NULL"), 1);

	ck_assert_int_eq(store_reader_open(ost, &orr, &err), 0);
	ck_assert_int_eq(store_mem_points_open(orr, 0, 0, 7, "cuda:0", -1, &c, &err), 0);
	for (i = 0; store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err) == 1; i++) {
		legacy_point(i, want, &wnul);
		ck_assert_int_eq(seq, i);
		ck_assert_int_eq(nul, wnul);
		ck_assert_mem_eq(row, want, sizeof(row));
	}
	ck_assert_int_eq(i, n);
	store_mem_points_close(c);
	/* one point by its seq, in the middle of a block and at a block's start */
	for (int64_t one = 1500; one <= 2048; one += 548) {
		ck_assert_int_eq(store_mem_points_open(orr, 0, 0, 7, "cuda:0", one, &c, &err), 0);
		ck_assert_int_eq(store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err), 1);
		legacy_point(one, want, &wnul);
		ck_assert_int_eq(seq, one);
		ck_assert_mem_eq(row, want, sizeof(row));
		ck_assert_int_eq(store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err), 0);
		store_mem_points_close(c);
	}
	ck_assert_int_eq(store_mem_points_open(orr, 0, 0, 7, "cuda:0", n, &c, &err), 0);	/* past the end: none */
	ck_assert_int_eq(store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err), 0);
	store_mem_points_close(c);
	store_reader_close(orr);
	store_close(ost);

	/* a damaged block is a database error, not a crash or a wrong point */
	ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(h, "UPDATE memory_point_blocks SET data=x'ffffffff' WHERE first_seq=1024",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	ck_assert_int_eq(store_open(path, &ost, &err), 0);
	ck_assert_int_eq(store_reader_open(ost, &orr, &err), 0);
	ck_assert_int_eq(store_mem_points_open(orr, 0, 0, 7, "cuda:0", -1, &c, &err), 0);
	for (i = 0; store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err) == 1; i++)
		;
	ck_assert_int_eq(i, 1024);
	ck_assert_int_eq(err.rc, TP_ERR_DB);
	ck_assert_str_eq(err.code, "database_error");
	store_mem_points_close(c);
	store_reader_close(orr);
	store_close(ost);
}
END_TEST

/* Point i of round k of test_rank_points_gone_over: round k changes the points from 2000 on. */
static void round_point(int k, int i, struct mem_point *p)
{
	memset(p, 0, sizeof(*p));
	p->t_ns = 1000 * (int64_t)i;
	p->cat[0] = 4096 + i + (i >= 2000 ? k : 0);
	p->reserved = i % 3 ? 1 << 20 : -1;
}

/* The points of the trace series of (run_id, rank) on cuda:0 read back: how many, each as round k made it. */
static int64_t points_read_back(int64_t run_id, int rank, int k)
{
	struct tp_errbuf err = { 0 };
	struct store_mem_points *c;
	struct mem_point p;
	int64_t row[MEM_POINT_COLS], seq, i;
	uint8_t nul;

	ck_assert_int_eq(store_mem_points_open(r, run_id, rank, 0, "cuda:0", -1, &c, &err), 0);
	for (i = 0; store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, &err) == 1; i++) {
		round_point(k, (int)i, &p);
		ck_assert_int_eq(seq, i);
		ck_assert_int_eq(row[0], p.t_ns);
		ck_assert_int_eq(row[1], p.cat[0]);
		ck_assert_int_eq(row[MEM_COL_ALLOCATED], p.cat[0]);
		ck_assert_int_eq(nul, p.reserved < 0);
	}
	ck_assert_int_eq(err.rc, 0);
	store_mem_points_close(c);
	return i;
}

/*
 * A rank's trace memory written again (store_rank_replace) goes over the rank's blocks: those
 * stored as they are stay, a changed one is written, the ones past the last point go, and a
 * device the rank no longer has loses its blocks; what reads back is always the last write's.
 */
START_TEST(test_rank_points_gone_over)
{
	struct tp_errbuf err = { 0 };
	struct store_final f = final("ab");
	struct mem_point *pts = calloc(5000, sizeof(*pts));
	struct mem_series ms = { .device = "cuda:0", .source = "trace", .pts = pts };
	struct store_blocks c;
	int64_t id = filled_artifact("gone-over"), dup, run_id;
	static const struct { int k, n; int64_t kept, written, blocks; } rounds[] = {
		{ 0, 5000, 0, 5, 5 },	/* first: every block written */
		{ 0, 5000, 5, 0, 5 },	/* as stored: none */
		{ 1, 5000, 1, 4, 5 },	/* points 2000.. changed: the block of 0..1023 stays */
		{ 1, 3000, 2, 1, 3 },	/* shorter: the block of 2048.. has 952 points now, the last two go */
		{ 2, 4096, 1, 3, 4 },	/* longer again, blocks 1024.. changed (round 2) */
	};

	ck_assert_ptr_nonnull(pts);
	f.mem = &ms;
	f.nmem = 1;
	ck_assert_int_eq(store_artifact_commit(w, id, &f, &dup, &err), 0);
	f.base_ns = 0;	/* the times read back as written */
	/* the commit wrote the trace's own series, with no points, as its rank's (migration 024) */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_series WHERE rank=2 AND device='cuda:0'"
				      " AND run_id=(SELECT id FROM runs WHERE name='gone-over')"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM memory_series"), 0);
	run_id = tu_db_scalar(db, "SELECT id FROM runs WHERE name='gone-over'");
	for (size_t j = 0; j < sizeof(rounds) / sizeof(rounds[0]); j++) {
		for (int i = 0; i < rounds[j].n; i++)
			round_point(rounds[j].k, i, &pts[i]);
		ms.n = (size_t)rounds[j].n;
		ck_assert_int_eq(store_rank_replace(w, "gone-over", f.rank, id, &f, &c, &err), 0);
		ck_assert_int_eq(c.kept, rounds[j].kept);
		ck_assert_int_eq(c.written, rounds[j].written);
		ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_point_blocks"), rounds[j].blocks);
		ck_assert_int_eq(points_read_back(run_id, f.rank, rounds[j].k), rounds[j].n);
	}
	/* the rank has memory on another device only now: cuda:0's blocks go */
	snprintf(ms.device, sizeof(ms.device), "cuda:1");
	ck_assert_int_eq(store_rank_replace(w, "gone-over", f.rank, id, &f, &c, &err), 0);
	ck_assert_int_eq(c.written, 4);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_point_blocks WHERE device='cuda:0'"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_point_blocks WHERE device='cuda:1'"), 4);
	/* a damaged block of the rank's is a database error that names the rank */
	{
		struct store_mem_points *pc;
		int64_t row[MEM_POINT_COLS], seq, i;
		uint8_t nul;
		sqlite3 *h;
		ck_assert_int_eq(sqlite3_open(db, &h), SQLITE_OK);
		ck_assert_int_eq(sqlite3_exec(h, "UPDATE rank_memory_point_blocks SET data=x'ffffffff' WHERE first_seq=1024",
					      NULL, NULL, NULL), SQLITE_OK);
		sqlite3_close(h);
		ck_assert_int_eq(store_mem_points_open(r, run_id, f.rank, 0, "cuda:1", -1, &pc, &err), 0);
		for (i = 0; store_mem_points_next(pc, STORE_MEM_ALL, row, &nul, &seq, &err) == 1; i++)
			;
		ck_assert_int_eq(i, 1024);
		ck_assert_int_eq(err.rc, TP_ERR_DB);
		ck_assert_str_eq(err.code, "database_error");
		ck_assert_ptr_nonnull(strstr(err.msg, "rank 2"));
		store_mem_points_close(pc);
		memset(&err, 0, sizeof(err));
	}
	/* and none */
	f.nmem = 0;
	ck_assert_int_eq(store_rank_replace(w, "gone-over", f.rank, id, &f, &c, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_point_blocks"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_series"), 0);
	/* written again, then the rank with no trace left (owner 0): nothing of its memory stays */
	ms.n = 100;
	f.nmem = 1;
	ck_assert_int_eq(store_rank_replace(w, "gone-over", f.rank, id, &f, &c, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM rank_memory_series"), 1);
	ck_assert_int_eq(store_rank_replace(w, "gone-over", f.rank, 0, &f, &c, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT (SELECT COUNT(*) FROM rank_memory_series) + (SELECT COUNT(*) FROM"
				      " rank_memory_point_blocks) + (SELECT COUNT(*) FROM rank_memory_groups)"), 0);
	free(pts);
}
END_TEST

/* The one integer a statement of a answers (db_prepare, db_step, db_finalize); -1: no row. */
static int64_t one_int(struct db *a, const char *sql, int bind, int64_t v)
{
	struct db_stmt *q;
	int64_t got = -1;

	ck_assert_int_eq(db_prepare(a, sql, 0, &q), DB_OK);
	if (bind)
		db_bind_int64(q, 1, v);
	if (db_step(q) == DB_ROW)
		got = db_column_int64(q, 0);
	db_finalize(q);
	return got;
}

/*
 * A statement finalized is kept for the next prepare of its text (db_sqlite.c): it comes back
 * reset and unbound, holds no lock and no read of its own, counts as no statement held, and
 * follows the schema when another connection changes it.
 */
START_TEST(test_kept_statements_start_clean)
{
	struct tp_errbuf err = { 0 };
	struct db *a, *b;
	struct db_stmt *q, *held;
	char sql[64];

	ck_assert_int_eq(db_open(db, 0, &a, &err), 0);
	ck_assert_int_eq(db_open(db, 0, &b, &err), 0);
	ck_assert_int_eq(db_exec(a, "CREATE TABLE k(x INTEGER); INSERT INTO k VALUES (1), (2), (3)"), DB_OK);
	/* bound, then again unbound: the first binding is gone (x = NULL matches nothing) */
	ck_assert_int_eq(one_int(a, "SELECT COUNT(*) FROM k WHERE x=?1", 1, 2), 1);
	ck_assert_int_eq(one_int(a, "SELECT COUNT(*) FROM k WHERE x=?1", 0, 0), 0);
	/* one row of three read, then finalized: no read left open on a */
	ck_assert_int_eq(db_prepare(a, "SELECT x FROM k ORDER BY x", 0, &q), DB_OK);
	ck_assert_int_eq(db_step(q), DB_ROW);
	ck_assert(db_busy(a));
	db_finalize(q);
	ck_assert(!db_busy(a));
	ck_assert(!db_in_tx(a));
	/* so b may change the table a's kept statements name, and a's next prepare reads it anew */
	ck_assert_int_eq(db_exec(b, "DROP TABLE k; CREATE TABLE k(x INTEGER, y INTEGER); INSERT INTO k VALUES (7, 8)"),
			 DB_OK);
	ck_assert_int_eq(db_exec(b, "PRAGMA wal_checkpoint(TRUNCATE)"), DB_OK);
	ck_assert_int_eq(one_int(a, "SELECT x FROM k ORDER BY x", 0, 0), 7);
	ck_assert_int_eq(one_int(a, "SELECT COUNT(*) FROM k WHERE x=?1", 1, 7), 1);
	/* a statement held is one held, whatever is kept beside it */
	ck_assert_int_eq(db_prepare(a, "SELECT y FROM k", 0, &held), DB_OK);
	ck_assert(db_busy(a));
	/* more texts than are kept: the oldest go, every one still answers */
	for (int i = 0; i < 100; i++) {
		snprintf(sql, sizeof(sql), "SELECT x + %d FROM k", i);
		ck_assert_int_eq(one_int(a, sql, 0, 0), 7 + i);
		ck_assert_int_eq(one_int(a, "SELECT x FROM k ORDER BY x", 0, 0), 7);
	}
	ck_assert(db_busy(a));
	ck_assert_int_eq(db_step(held), DB_ROW);
	ck_assert_int_eq(db_column_int64(held, 0), 8);
	db_finalize(held);
	ck_assert(!db_busy(a));
	db_close(a);
	db_close(b);
}
END_TEST

Suite *suite_store(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("life_cycle");

	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_reopen_keeps_schema_and_data);
	tcase_add_test(tc, test_rank_reads_use_the_index);
	tcase_add_test(tc, test_rank_rows_deleted_by_key);
	tcase_add_test(tc, test_ingesting_is_invisible);
	tcase_add_test(tc, test_commit_answers);
	tcase_add_test(tc, test_events_and_raw_read_back);
	tcase_add_test(tc, test_fail_keeps_raw_only);
	tcase_add_test(tc, test_duplicates_and_drop);
	tcase_add_test(tc, test_delete_waits_for_ingest);
	tcase_add_test(tc, test_format_tables_names_checked);
	tcase_add_test(tc, test_rank_points_gone_over);
	tcase_add_test(tc, test_legacy_points_packed);
	tcase_add_test(tc, test_kept_statements_start_clean);
	suite_add_tcase(s, tc);
	return s;
}
