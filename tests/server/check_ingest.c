/*
 * check_ingest.c: the upload pipeline and the store together
 * (server/pipeline/ingest.c, server/store/store.c), on a temporary database, against
 * the real fixtures and their independently computed figures.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "metrics.h"
#include "pipeline/formats.h"
#include "pipeline/ingest.h"
#include "pipeline/overlap.h"
#include "pipeline/runrank.h"
#include "pipeline/runrank_int.h"
#include "pipeline/workers.h"
#include "ingest/trace.h"
#include "reads.h"
#include "store/store.h"
#include "suites.h"
#include "testutil.h"

static char *dir;
static char db[512];
static struct store *st;
static struct deriver *dv;	/* the derivations' object, a server's in main.c */

static void setup(void)
{
	struct tp_errbuf err = { 0 };

	dir = tu_tmpdir();
	ck_assert_ptr_nonnull(dir);
	snprintf(db, sizeof(db), "%s/t.db", dir);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ck_assert_ptr_nonnull(dv = deriver_new(NULL));
}

static void teardown(void)
{
	runrank_drain(dv, st);
	deriver_free(dv);
	store_close(st);
	tu_rmtree(dir);
	free(dir);
}

static uint8_t *fixture(const char *rel, size_t *len)
{
	char *path = tu_fixture(rel);
	uint8_t *b = tu_read_file(path, len);

	ck_assert_msg(b != NULL, "cannot read %s", path);
	free(path);
	return b;
}

static void ingest(const char *run, int rank, const void *data, size_t len, struct ingest_result *res)
{
	struct ingest_request req = { .run = run, .rank = rank, .name = "f.json" };

	ingest_buffer(st, NULL, &req, data, len, res);
}

static json_t *query_steps(const char *run, int rank)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *j;

	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	j = read_steps(r, run, rank, &err);
	store_reader_close(r);
	ck_assert_ptr_nonnull(j);
	return j;
}

static json_t *query_artifact(const char *run, int64_t id)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *j;

	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	j = read_artifact(r, run, id, &err);
	store_reader_close(r);
	return j;
}

/* Figures from shared/fixtures/README.md (durations) and the files themselves (starts). */
static const struct fx {
	const char *file;
	uint64_t events;
	int rank;			/* from distributedInfo, or 0 */
	int nsteps;
	int64_t first_step;
	int64_t start_ns[6];		/* the ProfilerStep#N spans (fixtures README) */
	int64_t cpu_dur_ns[6];
} fixtures[] = {
	{ "traces/hta_v100_train_memory.json.gz", 216092, 1, 5, 2,
	  { 1669783687384669000LL, 1669783687730492000LL, 1669783688095792000LL,
	    1669783688441933000LL, 1669783688786243000LL },
	  { 345770000, 365256000, 346097000, 344269000, 336328000 } },
	{ "traces/kineto_resnet50_workers0.json.gz", 75718, 0, 6, 5,
	  { 1623142623460172000LL, 1623142623636318000LL, 1623142623810379000LL,
	    1623142623987366000LL, 1623142624168693000LL, 1623142624345228000LL },
	  { 176078000, 173992000, 176918000, 181259000, 176468000, 164261000 } },
	{ "traces/hta_nccl_rel_ts.json.gz", 40573, 0, 3, 4,
	  { 1716423322416788066LL, 1716423322639291351LL, 1716423322859077781LL },
	  { 222442191, 219726905, 224936243 } },
	{ "traces/hta_ns_resolution.json.gz", 68692, 0, 5, 101,
	  { 1712195495502094565LL, 1712195495537248299LL, 1712195495609361776LL,
	    1712195495705090232LL, 1712195495800674876LL },
	  { 35115869, 72077474, 95697341, 95551087, 95699037 } },
};

START_TEST(test_fixture_figures)
{
	const struct fx *f = &fixtures[_i];
	struct ingest_result res;
	size_t len;
	uint8_t *data = fixture(f->file, &len);
	json_t *root, *steps, *a;
	int k;

	ingest("fx", -1, data, len, &res);
	ck_assert_msg(res.rc == 0, "%s: %s", f->file, res.err.msg);
	ck_assert_int_eq(res.duplicate, 0);
	a = query_artifact("fx", res.artifact);
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "artifact"), "events")),
			 (json_int_t)f->events);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a, "artifact"), "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "artifact"), "rank")), f->rank);
	json_decref(a);
	root = query_steps("fx", f->rank);
	steps = json_object_get(root, "steps");
	ck_assert_int_eq(json_array_size(steps), f->nsteps);
	for (k = 0; k < f->nsteps; k++) {
		json_t *s = json_array_get(steps, (size_t)k);
		ck_assert_int_eq(json_integer_value(json_object_get(s, "step")), f->first_step + k);
		json_int_t start = json_integer_value(json_object_get(s, "start_ns"));
		json_int_t dur = json_integer_value(json_object_get(s, "dur_ns"));
		/* the CPU span as written; the step starts there, or where the step before ended when that
		 * is later, and ends at the CPU end or later (the GPU work it launched) */
		ck_assert_int_eq(json_integer_value(json_object_get(s, "cpu_dur_ns")), f->cpu_dur_ns[k]);
		if (k == 0)
			ck_assert_int_eq(start, f->start_ns[k]);
		else
			ck_assert_int_ge(start, f->start_ns[k]);
		ck_assert_int_ge(start + dur, f->start_ns[k] + f->cpu_dur_ns[k]);
	}
	json_decref(root);
	free(data);
}
END_TEST

/*
 * The overlap check's fingerprints of an upload taken as it is parsed (pipeline/overlap.h) are
 * those of its events as the store keeps them: the same file sent again with a trailing space
 * repeats every one of its timed events, whether the first copy's fingerprints are read from the
 * store (sent without the server's cache) or held in the cache, and whether the second's are
 * taken as it is parsed or read back from the store (store_events_each, as for an upload of more
 * than 2^20 events).
 */
static void refused_whole(const char *run, const char *text, size_t len, int cached, int parsed)
{
	struct ingest_request a = { .run = run, .rank = 0, .name = "a.json",
				    .overlaps = cached ? runrank_overlaps(dv) : NULL };
	struct ingest_request b = { .run = run, .rank = 0, .name = "b.json",
				    .overlaps = parsed ? runrank_overlaps(dv) : NULL };
	struct ingest_result res;
	unsigned long long dups = 0, timed = 0;
	char *again = malloc(len + 1);
	const char *at;

	ingest_buffer(st, NULL, &a, text, len, &res);
	ck_assert_int_eq(res.rc, 0);
	memcpy(again, text, len);
	again[len] = ' ';
	ingest_buffer(st, NULL, &b, again, len + 1, &res);
	free(again);
	ck_assert_msg(res.rc == TP_ERR_CONFLICT, "%s: rc %d %s", run, res.rc, res.err.msg);
	ck_assert_int_eq(sscanf(res.err.msg, "%llu events of artifact", &dups), 1);
	ck_assert_ptr_nonnull(at = strstr(res.err.msg, "the trace has "));
	ck_assert_int_eq(sscanf(at, "the trace has %llu events with a time", &timed), 1);
	ck_assert_msg(dups == timed && dups > 0, "%s: %llu of %llu events found again", run, dups, timed);
}

START_TEST(test_overlap_prints_as_stored)
{
	/* string pid and tid, kernel, memory and collective fields, a flow the ingest drops, 'M' events */
	static const char synth[] =
		"{\"traceEvents\":["
		"{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":\"Spans\",\"tid\":0,\"args\":{\"name\":\"Spans\"}},"
		"{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#1\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":90},"
		"{\"ph\":\"X\",\"cat\":\"Trace\",\"name\":\"PyTorch Profiler\",\"pid\":\"Spans\",\"tid\":\"PyTorch Profiler\","
		"\"ts\":100,\"dur\":95},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":110,\"dur\":20,"
		"\"args\":{\"External id\":7,\"Sequence number\":3,\"Fwd thread id\":1}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"gemm\",\"pid\":0,\"tid\":7,\"ts\":120,\"dur\":30,"
		"\"args\":{\"External id\":7,\"correlation\":9,\"stream\":7,\"device\":0,\"blocks per SM\":1.5,"
		"\"est. achieved occupancy %\":25}},"
		"{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"pid\":1,\"tid\":1,\"ts\":111,\"id\":9},"
		"{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":112,\"s\":\"t\","
		"\"args\":{\"Device Type\":1,\"Device Id\":0,\"Addr\":1024,\"Bytes\":512,\"Total Allocated\":512,"
		"\"Total Reserved\":2048,\"Ev Idx\":4}},"
		"{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"ncclKernel_AllReduce\",\"pid\":0,\"tid\":7,\"ts\":160,\"dur\":10,"
		"\"args\":{\"Collective name\":\"allreduce\",\"Process Group Name\":\"0\",\"dtype\":\"Float\","
		"\"In msg nelems\":64,\"Out msg nelems\":64,\"Group size\":2,\"Seq\":1}}"
		"]}";
	size_t glen, len;
	uint8_t *gz = fixture("traces/hta_nccl_rel_ts.json.gz", &glen);
	char *text = (char *)tu_gunzip(gz, glen, &len);

	ck_assert_ptr_nonnull(text);
	refused_whole("synth-store", synth, strlen(synth), 0, 1);
	refused_whole("synth-cache", synth, strlen(synth), 1, 1);
	refused_whole("synth-read", synth, strlen(synth), 1, 0);
	refused_whole("nccl-store", text, len, 0, 1);
	refused_whole("nccl-cache", text, len, 1, 1);
	refused_whole("nccl-read", text, len, 0, 0);
	free(text);
	free(gz);
}
END_TEST

/*
 * An upload's fingerprints are kept once it is answered (overlap_prints_done after ingest_end):
 * a chunk that repeats one not kept yet is refused all the same (read from the store), and a
 * removal in between drops them (the ids they name may be given again).
 */
static void chunk(const char *run, const char *name, const char *body, struct ingest_result *res)
{
	struct ingest_request req = { .run = run, .rank = 0, .name = name, .overlaps = runrank_overlaps(dv) };
	struct tp_errbuf err = { 0 };
	struct ingest *ig;

	ck_assert_int_eq(ingest_begin(st, NULL, &req, &ig, &err), 0);
	ck_assert_int_eq(ingest_feed(ig, body, strlen(body)), 0);
	ingest_end(ig, res);
}

START_TEST(test_overlap_prints_kept_after)
{
	static const char a[] = "{\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":20},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::add\",\"pid\":1,\"tid\":1,\"ts\":130,\"dur\":5}]}";
	static const char b[] = "{\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":140,\"dur\":5},"
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":100,\"dur\":20}]}";
	static const char c[] = "{\"traceEvents\":["
		"{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::relu\",\"pid\":1,\"tid\":1,\"ts\":150,\"dur\":5}]}";
	struct overlap_cache *oc = runrank_overlaps(dv);
	struct ingest_result ra, rb, rc;

	chunk("kept", "a.json", a, &ra);
	ck_assert_int_eq(ra.rc, 0);
	ck_assert_ptr_nonnull(ra.keep);
	ck_assert_uint_eq(overlap_cache_held(oc), 0);
	/* not kept yet: the repeat is found in the store */
	chunk("kept", "b.json", b, &rb);
	ck_assert_int_eq(rb.rc, TP_ERR_CONFLICT);
	ck_assert_ptr_null(rb.keep);
	overlap_prints_done(ra.keep);
	ck_assert_uint_eq(overlap_cache_held(oc), 2);
	/* kept: found in the cache, and said the same way */
	chunk("kept", "b2.json", b, &rb);
	ck_assert_int_eq(rb.rc, TP_ERR_CONFLICT);
	ck_assert_ptr_nonnull(strstr(rb.err.msg, "1 events of artifact"));
	/* a removal between an upload's answer and its keep: not kept */
	chunk("kept", "c.json", c, &rc);
	ck_assert_int_eq(rc.rc, 0);
	ck_assert_ptr_nonnull(rc.keep);
	overlap_cache_forget(oc, 0, "another run");
	overlap_prints_done(rc.keep);
	ck_assert_uint_eq(overlap_cache_held(oc), 2);
}
END_TEST

/*
 * A small plain body goes to the writer in batches of 2,048 events, so that the writer keeps up
 * with the parser (ingest.c: SMALL_BODY); one of unknown length keeps batches of 8,192. The
 * blocks differ, the events and the answers do not.
 */
static json_t *stored_with_length(const char *run, const char *text, size_t len, uint64_t length,
				  long long *blocks, long long *largest)
{
	struct ingest_request req = { .run = run, .rank = 0, .name = "f.json", .length = length };
	struct tp_errbuf err = { 0 };
	struct ingest_result res;
	struct ingest *ig;
	char sql[256];

	ck_assert_int_eq(ingest_begin(st, NULL, &req, &ig, &err), 0);
	ck_assert_int_eq(ingest_feed(ig, text, len), 0);
	ingest_end(ig, &res);
	ck_assert_int_eq(res.rc, 0);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM event_blocks WHERE key >> 32 = %lld AND kind = 0",
		 (long long)res.artifact);
	*blocks = tu_db_scalar(db, sql);
	snprintf(sql, sizeof(sql), "SELECT MAX(n) FROM event_blocks WHERE key >> 32 = %lld AND kind = 0",
		 (long long)res.artifact);
	*largest = tu_db_scalar(db, sql);
	return query_steps(run, 0);
}

START_TEST(test_small_body_batches)
{
	size_t glen, len;
	uint8_t *gz = fixture("traces/hta_sampled_rank0.json.gz", &glen);
	char *text = (char *)tu_gunzip(gz, glen, &len);
	long long nsmall, lsmall, nbig, lbig;
	json_t *small, *big;

	ck_assert_ptr_nonnull(text);
	small = stored_with_length("small", text, len, len, &nsmall, &lsmall);
	big = stored_with_length("unknown", text, len, 0, &nbig, &lbig);
	ck_assert_int_le(lsmall, 2048);
	ck_assert_int_gt(nsmall, nbig);
	ck_assert_int_gt(lbig, 2048);
	ck_assert_int_gt(json_array_size(json_object_get(small, "steps")), 0);
	ck_assert(json_equal(small, big));
	json_decref(small);
	json_decref(big);
	free(text);
	free(gz);
}
END_TEST

START_TEST(test_same_bytes_one_artifact)
{
	struct ingest_result a, b;
	size_t len;
	uint8_t *data = fixture("traces/hta_alexnet.json.gz", &len);

	ingest("dup", 0, data, len, &a);
	ingest("dup", 0, data, len, &b);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_int_eq(a.duplicate, 0);
	ck_assert_int_eq(b.duplicate, 1);
	ck_assert_int_eq(a.artifact, b.artifact);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 1);
	/* the second copy's rows are gone: only one artifact's events remain */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(DISTINCT key >> 32) FROM event_blocks"), 1);
	/* another run is another artifact */
	ingest("dup2", 0, data, len, &b);
	ck_assert_int_eq(b.duplicate, 0);
	ck_assert_int_ne(b.artifact, a.artifact);
	free(data);
}
END_TEST

/* read an artifact's raw bytes back as uploaded */
static uint8_t *raw_back(int64_t id, const char *run, size_t *len)
{
	struct tp_errbuf err = { 0 };
	struct store_raw_info info;
	struct store_reader *r;
	uint8_t *all = NULL, *out;
	size_t n = 0;

	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_raw_info(r, run, id, &info, &err), 0);
	for (uint32_t i = 0; i < info.nchunks; i++) {
		const void *d;
		size_t l;
		ck_assert_int_eq(store_raw_chunk(r, id, i, &d, &l, &err), 0);
		all = realloc(all, n + l);
		memcpy(all + n, d, l);
		n += l;
	}
	store_reader_close(r);
	if (!strcmp(info.encoding, "gzip") || !strcmp(info.encoding, "zstd-frames")) {
		out = info.encoding[0] == 'g' ? tu_gunzip(all, n, len) : tu_unzstd(all, n, len);
		ck_assert_ptr_nonnull(out);
		free(all);
		return out;
	}
	*len = n;
	return all;
}

START_TEST(test_failed_parse_keeps_raw_and_no_rows)
{
	struct ingest_result res;
	size_t n = 60000, len, i, back_len;
	char *t = malloc(n * 40 + 64);
	uint8_t *back;

	/* many valid events (several batches are written), then garbage */
	strcpy(t, "{\"traceEvents\": [");
	len = strlen(t);
	for (i = 0; i < n; i++)
		len += (size_t)sprintf(t + len, "{\"ph\":\"X\",\"name\":\"op\",\"ts\":%zu},", i);
	strcpy(t + len, "{\"ph\": oops");
	len += strlen("{\"ph\": oops");
	ingest("bad", 0, t, len, &res);
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_str_eq(res.err.code, "invalid_json");
	ck_assert_int_eq(res.kept, 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM event_blocks"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM strings"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='error'"), 1);
	/* a plain body is kept as zstd frames, smaller than it was */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE raw_encoding='zstd-frames'"), 1);
	ck_assert_int_lt(tu_db_scalar(db, "SELECT SUM(length(data)) FROM raw_chunks"), (long long)len / 4);
	back = raw_back(res.artifact, "bad", &back_len);
	ck_assert_uint_eq(back_len, len);
	ck_assert(!memcmp(back, t, len));
	free(back);
	free(t);
}
END_TEST

START_TEST(test_truncated_gzip_kept_as_sent)
{
	struct ingest_result res;
	size_t len, back_len;
	uint8_t *data = fixture("traces/hta_alexnet.json.gz", &len), *back;

	ingest("trunc", 0, data, len / 2, &res);
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_int_eq(res.kept, 1);
	back = raw_back(res.artifact, "trunc", &back_len);
	ck_assert_uint_eq(back_len, len / 2);
	ck_assert(!memcmp(back, data, back_len));
	free(back);
	free(data);
}
END_TEST

START_TEST(test_body_cap_keeps_nothing)
{
	struct ingest_limits lim = ingest_default_limits;
	struct ingest_request req = { .run = "big", .rank = 0, .name = "x" };
	struct ingest_result res;
	size_t len;
	uint8_t *data = fixture("traces/hta_alexnet.json.gz", &len);

	lim.max_body = 1000;
	ingest_buffer(st, &lim, &req, data, len, &res);
	ck_assert_int_eq(res.rc, TP_ERR_TOOBIG);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM runs"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM raw_chunks"), 0);
	free(data);
}
END_TEST

START_TEST(test_interrupted_ingest_removed_on_open)
{
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	int64_t id;
	uint8_t raw[100] = { 0 };
	struct store_batch b = { .raw = raw, .nraw = sizeof(raw) };
	struct ingest_result ok;
	size_t len;
	uint8_t *data = fixture("traces/hta_cpu_only.json.gz", &len);

	ingest("kept", 0, data, len, &ok);
	ck_assert_int_eq(ok.rc, 0);
	ck_assert_int_eq(store_writer_open(st, &w, &err), 0);
	ck_assert_int_eq(store_artifact_begin(w, "crash", 0, "trace", "x", &id, &err), 0);
	ck_assert_int_eq(store_write_batch(w, id, &b, &err), 0);
	store_writer_close(w);	/* as if the process died here */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='ingesting'"), 1);
	store_close(st);
	ck_assert_int_eq(store_open(db, &st, &err), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='ingesting'"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM raw_chunks WHERE key >> 32 = 2"), 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM runs WHERE name='crash'"), 0);
	/* the finished one is untouched */
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE status='ready'"), 1);
	free(data);
}
END_TEST

START_TEST(test_rank_given_wins)
{
	struct ingest_result res;
	size_t len;
	uint8_t *data = fixture("traces/hta_compare_base.json.gz", &len);
	json_t *a;

	/* the file says rank 1; the request says 3 */
	ingest("r", 3, data, len, &res);
	ck_assert_int_eq(res.rc, 0);
	a = query_artifact("r", res.artifact);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "artifact"), "rank")), 3);
	json_decref(a);
	free(data);
}
END_TEST

START_TEST(test_other_kinds)
{
	static const uint8_t pickle[] = { 0x80, 0x04, 0x95, 0x05, 0, 0, 0, 0, 0, 0, 0, '}', 0x94, '.' };
	static const char timeline[] = "[[1696966047192849263, 1, 1024, 0]]";
	struct ingest_result res;

	/* a pickle that is no snapshot (an empty dict) is refused and kept */
	ingest("k", 0, pickle, sizeof(pickle), &res);
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_str_eq(res.err.code, "bad_snapshot");
	ck_assert_int_eq(res.kept, 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE kind='memory_snapshot'"), 1);
	/* memory timeline exports are analysed: one point, stored with its series */
	ingest("k", 0, timeline, strlen(timeline), &res);
	ck_assert_int_eq(res.rc, 0);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts WHERE kind='memory_timeline'"
					  " AND status='ready' AND events=1"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT n FROM memory_point_blocks"), 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT peak_allocated FROM memory_series"), 1024);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM memory_series WHERE source='pytorch'"
					  " AND device='cuda:0' AND peak_seq=0"), 1);
	/* and a broken one is kept as an error, with no points */
	ingest("k", 0, "[[1, 1, 1024, 12]]", 18, &res);
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_int_eq(res.kept, 1);
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM memory_point_blocks"), 1);
}
END_TEST

START_TEST(test_empty_body)
{
	struct ingest_result res;

	ingest("e", 0, "", 0, &res);
	ck_assert_int_eq(res.rc, TP_ERR_INVALID);
	ck_assert_str_eq(res.err.code, "empty_body");
	ck_assert_int_eq(tu_db_scalar(db, "SELECT COUNT(*) FROM artifacts"), 0);
}
END_TEST

struct memcheck {
	struct tp_event *dev1;	/* CUDA device 1 */
	size_t n, cap, all;
};

static int collect_mem(void *payload, const struct tp_event *ev, size_t n)
{
	struct memcheck *m = payload;

	for (size_t i = 0; i < n; i++) {
		m->all++;
		ck_assert_int_eq(ev[i].name, TRACE_S_MEMORY);
		ck_assert_int_eq(ev[i].ph, 'i');
		if (ev[i].dev_type == 1 && ev[i].dev_id == 1) {
			if (m->n == m->cap)
				m->dev1 = realloc(m->dev1, (m->cap = m->cap ? m->cap * 2 : 1024) * sizeof(*m->dev1));
			m->dev1[m->n++] = ev[i];
		}
	}
	return 0;
}

static int by_ts_then_idx(const void *a, const void *b)
{
	const struct tp_event *x = a, *y = b;

	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	return x->ev_idx < y->ev_idx ? -1 : x->ev_idx > y->ev_idx;
}

static int count_events(void *payload, const struct tp_event *ev, size_t n)
{
	(void)ev;
	*(size_t *)payload += n;
	return 0;
}

/* shared/fixtures/README.md's figures for the V100 [memory] events, read back through the store */
START_TEST(test_memory_events_round_trip)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct ingest_result res;
	struct memcheck m = { 0 };
	size_t len, i, stored = 0;
	uint8_t *data = fixture("traces/hta_v100_train_memory.json.gz", &len);
	int64_t peak = 0;
	json_t *runs, *run;

	ingest("mem", 1, data, len, &res);
	ck_assert_int_eq(res.rc, 0);
	ck_assert_int_eq(store_reader_open(st, &r, &err), 0);
	ck_assert_int_eq(store_events_each(r, res.artifact, STORE_MEMORY_EVENTS, collect_mem, &m, &err), 0);
	/* every event but the 28,010 [memory] ones and the 64,663 ac2g flow events */
	ck_assert_int_eq(store_events_each(r, res.artifact, STORE_EVENTS, count_events, &stored, &err), 0);
	runs = read_runs(r, &err);
	store_reader_close(r);
	ck_assert_uint_eq(m.all, 28010);
	ck_assert_uint_eq(m.n, 26770);
	ck_assert_uint_eq(stored, 216092 - 28010 - 64663);
	qsort(m.dev1, m.n, sizeof(*m.dev1), by_ts_then_idx);
	ck_assert_int_eq(m.dev1[0].total_alloc, 4121780224LL);
	ck_assert_int_eq(m.dev1[m.n - 1].total_alloc, 4096614400LL);
	for (i = 0; i < m.n; i++) {
		ck_assert_int_eq(m.dev1[i].total_reserved, 12782141440LL);
		if (i)
			ck_assert_int_eq(m.dev1[i].total_alloc, m.dev1[i - 1].total_alloc + m.dev1[i].bytes);
		if (m.dev1[i].total_alloc > peak)
			peak = m.dev1[i].total_alloc;
	}
	ck_assert_int_eq(peak, 6629508096LL);
	run = json_array_get(json_object_get(runs, "runs"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "peak_allocated_bytes")), 6629508096LL);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "steps")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(run, "step_time_ns"), "median")),
			 345770000);
	json_decref(runs);
	free(m.dev1);
	free(data);
}
END_TEST

/* ---- the ranks' analyses kept between derivations (pipeline/runrank.c) ---- */

/* Trace artifacts replayed by derivations so far (the process's metric). */
static long replayed(void)
{
	static const char key[] = "trainscope_rank_replay_artifacts_total{how=\"replayed\"} ";
	char *m = metrics_render(st, NULL), *p;
	long n;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(p = strstr(m, key));
	n = strtol(p + sizeof(key) - 1, NULL, 10);
	free(m);
	return n;
}

/* Chunk k: step k and an operator of its own. */
static void chunk_body(char *body, size_t size, int k)
{
	snprintf(body, size,
		 "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
		 "\"tid\":1,\"ts\":%d,\"dur\":100},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"op%d\",\"pid\":1,"
		 "\"tid\":1,\"ts\":%d,\"dur\":50}]}", k, 200 * k, k, 200 * k + 10);
}

/* The run's first read after the chunks that came (derivations: its replays); it answers nsteps steps. */
static long read_replays(const char *run, size_t nsteps)
{
	struct tp_errbuf err = { 0 };
	long before = replayed();

	ck_assert_int_eq(runrank_settle(dv, st, run, &err), 0);
	json_t *j = query_steps(run, 0);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), nsteps);
	json_decref(j);
	return replayed() - before;
}

/* Chunk k of run, then the run's first read: its replays (the run has steps 1..k). */
static long chunk_then_read(const char *run, int k)
{
	char body[512];
	struct ingest_result res;

	chunk_body(body, sizeof(body), k);
	ingest(run, 0, body, strlen(body), &res);
	ck_assert_int_eq(res.rc, 0);
	return read_replays(run, (size_t)k);
}

/*
 * RUNRANK_KEPT_RANKS ranks are kept, the most recently derived: one more puts
 * out the oldest, whose next derivation replays every chunk. Past the bytes
 * they may take, none is kept; one not derived for the idle time is dropped.
 */
START_TEST(test_kept_ranks)
{
	char run[16], last[16];
	int r;

	for (r = 0; r <= RUNRANK_KEPT_RANKS; r++) {
		snprintf(run, sizeof(run), "r%d", r);
		ck_assert_int_eq(chunk_then_read(run, 1), 0);	/* analysed as it came */
		ck_assert_int_eq(chunk_then_read(run, 2), 2);
	}
	snprintf(last, sizeof(last), "r%d", RUNRANK_KEPT_RANKS);
	ck_assert_int_eq(chunk_then_read(last, 3), 1);
	ck_assert_int_eq(chunk_then_read("r1", 3), 1);
	ck_assert_int_eq(chunk_then_read("r0", 3), 3);	/* put out by the last */
	runrank_set_kept_bytes(dv, 1);
	ck_assert_int_eq(chunk_then_read(last, 4), 1);	/* kept from before; not kept after */
	ck_assert_int_eq(chunk_then_read(last, 5), 5);
	runrank_set_kept_bytes(dv, 2ULL << 30);
	ck_assert_int_eq(chunk_then_read(last, 6), 6);
	ck_assert_int_eq(chunk_then_read(last, 7), 1);
	/* one not derived for the idle time goes at the next derivation */
	runrank_set_kept_idle(dv, 0);
	ck_assert_int_eq(chunk_then_read(last, 8), 8);
	runrank_set_kept_idle(dv, 600);
	ck_assert_int_eq(chunk_then_read(last, 9), 1);
	runrank_drain(dv, st);
}
END_TEST

/*
 * A rank growing ahead (runrank_grow) takes the place of the least recently
 * used of those kept (RUNRANK_KEPT_RANKS) once that one has gone unused for
 * the yield time (runrank.c: GROWN_YIELD_S); until then its chunks are left
 * to its read.
 */
START_TEST(test_grow_takes_idle_place)
{
	struct ingest_result res;
	char run[16], body[512];
	int r, rank = 0;
	long before;

	for (r = 0; r < RUNRANK_KEPT_RANKS; r++) {
		snprintf(run, sizeof(run), "r%d", r);
		ck_assert_int_eq(chunk_then_read(run, 1), 0);
		ck_assert_int_eq(chunk_then_read(run, 2), 2);	/* kept from now on */
	}
	for (int k = 1; k <= 2; k++) {	/* a new run's two chunks, not read */
		chunk_body(body, sizeof(body), k);
		ingest("n", 0, body, strlen(body), &res);
		ck_assert_int_eq(res.rc, 0);
	}
	before = replayed();
	runrank_grow(dv, st, "n", &rank, 1);	/* all were just used: no place */
	ck_assert_int_eq(replayed(), before);
	runrank_set_kept_yield(dv, 0);
	runrank_grow(dv, st, "n", &rank, 1);	/* it takes r0's */
	ck_assert_int_eq(replayed(), before + 2);
	ck_assert_int_eq(read_replays("n", 2), 0);
	runrank_set_kept_yield(dv, 600);
	ck_assert_int_eq(chunk_then_read("r1", 3), 1);
	ck_assert_int_eq(chunk_then_read("r0", 3), 3);	/* put out by n */
	runrank_drain(dv, st);
}
END_TEST

/*
 * A chunk still uploading when a later one is ready and read: the read
 * answers without it, and the rank's analysis kept stops before the later
 * one (which only that read's copy took), so that once the first is ready
 * the next read replays the two, not the rank. Both answer as the chunks
 * uploaded in order and read once.
 */
START_TEST(test_inflight_chunk)
{
	struct ingest_request req = { .run = "f", .rank = 0, .name = "slow.json" };
	struct ingest_result res;
	struct ingest *ig;
	char body[512];
	int k;

	ck_assert_int_eq(chunk_then_read("f", 1), 0);
	ck_assert_int_eq(chunk_then_read("f", 2), 2);
	struct tp_errbuf err = { 0 };
	ck_assert_int_eq(ingest_begin(st, NULL, &req, &ig, &err), 0);	/* chunk 3, its body yet to come */
	chunk_body(body, sizeof(body), 4);
	ingest("f", 0, body, strlen(body), &res);
	ck_assert_int_eq(res.rc, 0);
	ck_assert_int_eq(read_replays("f", 3), 1);
	chunk_body(body, sizeof(body), 3);
	ck_assert_int_eq(ingest_feed(ig, body, strlen(body)), 0);
	ingest_end(ig, &res);
	ck_assert_int_eq(res.rc, 0);
	ck_assert_int_eq(read_replays("f", 4), 2);	/* 3 and 4 after the kept 1 and 2 */
	ck_assert_int_eq(chunk_then_read("f", 5), 1);
	for (k = 1; k <= 5; k++) {
		chunk_body(body, sizeof(body), k);
		ingest("once", 0, body, strlen(body), &res);
		ck_assert_int_eq(res.rc, 0);
	}
	ck_assert_int_eq(read_replays("once", 5), 5);
	json_t *a = query_steps("f", 0), *b = query_steps("once", 0);
	char *sa = json_dumps(json_object_get(a, "steps"), JSON_SORT_KEYS), *sb = json_dumps(json_object_get(b, "steps"), JSON_SORT_KEYS);
	ck_assert_str_eq(sa, sb);
	free(sa);
	free(sb);
	json_decref(a);
	json_decref(b);
	runrank_drain(dv, st);
}
END_TEST

/* The first bytes of each format, and the edge cases detection has rules for (formats.c). */
static const struct sample {
	const char *what, *file;	/* file: of tests/formats/, its first FMT_SNIFF bytes (text: NULL) */
	const char *text;
	int at_end;
	const char *kind;		/* the row told; NULL: none of them; "": more bytes needed */
} samples[] = {
	{ "trace array", NULL, "[{\"ph\":\"X\",\"name\":\"a\",\"ts\":1}]", 1, "trace" },
	{ "trace object", NULL, " \n{\"traceEvents\": []}", 1, "trace" },
	{ "blank, all of it", NULL, " \n\t ", 1, "trace" },
	{ "blank so far", NULL, " \n\t ", 0, "" },
	{ "a bracket so far", NULL, "[ ", 0, "" },
	{ "a bracket, all of it", NULL, "[", 1, "trace" },
	{ "timeline", NULL, "[ [1696966047192849263, 1, 1024, 0]]", 1, "memory_timeline" },
	{ "pickle", NULL, "\x80\x04\x95", 1, "memory_snapshot" },
	{ "stacks", NULL, "main;train;step 12\nmain;load 3\n", 1, "stacks" },
	{ "stacks from [unknown]", NULL, "[unknown];main;step 12\n[unknown];load 3\n", 1, "stacks" },
	{ "plain text", NULL, "this is not JSON at all", 1, NULL },
	/* '[' then what no trace or timeline holds first (their elements are objects or arrays) */
	{ "a numbered line", NULL, "[1] Smith, J. (2024). Training at scale.\n", 1, NULL },
	{ "an array of numbers", NULL, "[1, 2, 3]", 1, NULL },
	{ "an array of strings", NULL, "[\"a\", \"b\"]", 1, NULL },
	{ "an empty trace array", NULL, "[]", 1, "trace" },
	{ "canary", "canary_baseline.json", NULL, 1, "canary_metrics" },
	{ "lightning", "lightning_simple_pl2_generated.txt", NULL, 1, "lightning_report" },
	{ "key_averages", "key_averages_memory.txt", NULL, 1, "key_averages" },
	{ "nvidia-smi dmon", "nvidia_smi_dmon_generated.txt", NULL, 1, "gpu_log" },
	{ "nvidia-smi screen", "nvidia_smi_screen_535_generated.txt", NULL, 1, "gpu_log" },
};

/*
 * Each sample is told as the rows say, and at most one row says it is its format (formats.h:
 * their answers exclude one another, so the table's order does not decide).
 */
START_TEST(test_detect_sample)
{
	const struct sample *x = &samples[_i];
	const struct format *fmt = NULL, *yes = NULL;
	uint8_t *data = NULL;
	size_t len, i, n;
	int told, more = 0;

	if (x->file) {
		char rel[128], *path;
		snprintf(rel, sizeof(rel), "tests/formats/%s", x->file);
		path = tu_source_path(rel);
		data = tu_read_file(path, &len);
		ck_assert_msg(data != NULL, "cannot read %s", path);
		free(path);
	} else {
		len = strlen(x->text);
		data = malloc(len + 1);
		memcpy(data, x->text, len + 1);
	}
	n = len < FMT_SNIFF ? len : FMT_SNIFF;
	told = format_detect(data, n, x->at_end && n == len, &fmt);
	ck_assert_int_eq(told, x->kind == NULL || x->kind[0]);
	if (!x->kind)
		ck_assert_ptr_null(fmt);
	else if (x->kind[0])
		ck_assert_str_eq(fmt->name, x->kind);
	for (i = 0; i < nformats; i++) {
		struct fmt_sniff s = { .p = data, .n = n, .full = x->at_end && n == len ? 1 : n >= FMT_SNIFF ? 2 : 0,
				       .text = FMT_NOT_ASKED };
		int r;
		while (s.n && (*s.p == ' ' || *s.p == '\n' || *s.p == '\r' || *s.p == '\t'))
			s.p++, s.n--;
		if (!s.n)
			break;
		r = formats[i].detect(&s, formats[i].arg);
		ck_assert_msg(!(r > 0 && yes), "%s: both %s and %s say yes", x->what, yes ? yes->name : "",
			      formats[i].name);
		if (r > 0)
			yes = &formats[i];
		more |= r < 0;
	}
	if (told && fmt && len)
		ck_assert_msg(yes == fmt || (!yes && !more && fmt == &formats[0]), "%s", x->what);
	free(data);
}
END_TEST

/* The kinds' names once, in the table: each found by its name, and the messages that list them. */
START_TEST(test_table_names)
{
	char buf[512];
	size_t i, k;

	for (i = 0; i < nformats; i++) {
		ck_assert_ptr_eq(format_named(formats[i].name), &formats[i]);
		ck_assert(ingest_kind_known(formats[i].name));
		for (k = 0; k < i; k++)
			ck_assert_str_ne(formats[k].name, formats[i].name);
		ck_assert_msg(formats[i].detect && formats[i].open && formats[i].feed && formats[i].finish &&
				      formats[i].free, "%s", formats[i].name);
		/* a format with rows of its own hands them a result */
		ck_assert_msg(!formats[i].store || formats[i].result, "%s", formats[i].name);
	}
	ck_assert(!ingest_kind_known("unknown"));
	ck_assert(!ingest_kind_known("zip"));
	ck_assert(!ingest_kind_known(""));
	ingest_kind_names(buf, sizeof(buf));
	ck_assert_str_eq(buf, "trace, memory_snapshot, memory_timeline, lightning_report, key_averages, stacks, gpu_log"
			      " or canary_metrics");
	format_expected(buf, sizeof(buf));
	ck_assert_str_eq(buf, "a Kineto trace, a memory snapshot or timeline, a Lightning profiler report, a"
			      " key_averages() table, folded stacks, an nvidia-smi log (CSV, screen or dmon) or an"
			      " rlhf-canary metrics.json");
	/* a buffer too small is cut, still a string */
	ingest_kind_names(buf, 12);
	ck_assert_str_eq(buf, "trace, memo");
}
END_TEST

/* Workers: every job runs once; the threads of jobs waited for run the next ones (four kept) */
struct wjob {
	long self;	/* the kernel's thread id: not given again soon, unlike a pthread_t */
	int runs;
	pthread_barrier_t *all;	/* NULL: alone */
};

static void *wjob_main(void *arg)
{
	struct wjob *j = arg;

	j->self = syscall(SYS_gettid);
	j->runs++;
	if (j->all)
		pthread_barrier_wait(j->all);	/* every job on a thread of its own at once */
	return NULL;
}

START_TEST(test_workers_kept)
{
	struct wjob a[6] = { 0 }, b[4] = { 0 };
	struct worker *w[6];
	pthread_barrier_t all;
	int i, k, reused = 0;

	workers_drain();
	pthread_barrier_init(&all, NULL, 6);
	for (i = 0; i < 6; i++) {
		a[i].all = &all;
		ck_assert_int_eq(worker_start(&w[i], wjob_main, &a[i]), 0);
	}
	for (i = 0; i < 6; i++)
		worker_wait(w[i]);
	pthread_barrier_destroy(&all);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(a[i].runs, 1);
		for (k = 0; k < i; k++)
			ck_assert_int_ne(a[i].self, a[k].self);
	}
	/* one after another: each on a thread kept from the first six */
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(worker_start(&w[0], wjob_main, &b[i]), 0);
		worker_wait(w[0]);
		ck_assert_int_eq(b[i].runs, 1);
		for (k = 0; k < 6; k++)
			reused += b[i].self == a[k].self;
	}
	ck_assert_int_eq(reused, 4);
	workers_drain();
	/* none kept now: a new thread */
	ck_assert_int_eq(worker_start(&w[0], wjob_main, &b[0]), 0);
	worker_wait(w[0]);
	ck_assert_int_eq(b[0].runs, 2);
	for (k = 0; k < 6; k++)
		ck_assert_int_ne(b[0].self, a[k].self);
	workers_drain();
}
END_TEST

Suite *suite_ingest(void)
{
	Suite *s = suite_create("ingest");
	TCase *tc = tcase_create("fixtures");
	tcase_set_timeout(tc, 60);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_loop_test(tc, test_fixture_figures, 0, (int)(sizeof(fixtures) / sizeof(fixtures[0])));
	tcase_add_test(tc, test_memory_events_round_trip);
	suite_add_tcase(s, tc);
	tc = tcase_create("artifacts");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_same_bytes_one_artifact);
	tcase_add_test(tc, test_failed_parse_keeps_raw_and_no_rows);
	tcase_add_test(tc, test_truncated_gzip_kept_as_sent);
	tcase_add_test(tc, test_body_cap_keeps_nothing);
	tcase_add_test(tc, test_interrupted_ingest_removed_on_open);
	tcase_add_test(tc, test_rank_given_wins);
	tcase_add_test(tc, test_other_kinds);
	tcase_add_test(tc, test_empty_body);
	tcase_add_test(tc, test_kept_ranks);
	tcase_add_test(tc, test_grow_takes_idle_place);
	tcase_add_test(tc, test_inflight_chunk);
	tcase_add_test(tc, test_overlap_prints_as_stored);
	tcase_add_test(tc, test_overlap_prints_kept_after);
	tcase_add_test(tc, test_small_body_batches);
	tcase_add_test(tc, test_workers_kept);
	suite_add_tcase(s, tc);
	tc = tcase_create("table");
	tcase_add_loop_test(tc, test_detect_sample, 0, (int)(sizeof(samples) / sizeof(samples[0])));
	tcase_add_test(tc, test_table_names);
	suite_add_tcase(s, tc);
	return s;
}
