/*
 * check_runs_chunks.c: a run uploaded in chunks answers as the whole file:
 * chunks cut at arbitrary event boundaries, grown chunk by chunk, profiling
 * cycles in parts, windows cut with and without memory events, and a trace
 * joined from its chunks answering as the same trace alone.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runs_util.h"
#include "suites.h"

/* ---- chunks answer as the whole file ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

static void upload_chunk(const struct cut *c, size_t from, size_t to, const char *run, size_t part)
{
	ru_upload_chunk_via(&ru_srv, c, from, to, run, part);
}

/*
 * The fixture cut into k chunks at arbitrary event boundaries (every chunk keeps the file's
 * other keys, as the collector's do), uploaded in shuffled order: every answer is the whole
 * file's, byte for byte.
 */
static void chunks_as_whole(const char *fixture, size_t k, int memory, int restart)
{
	char *path = tu_fixture(fixture), whole[64], cut[64], sql[512];
	size_t glen, len, *at = calloc(k + 1, sizeof(size_t)), *order = calloc(k, sizeof(size_t)), i;
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct cut c;

	ck_assert_ptr_nonnull(text);
	snprintf(whole, sizeof(whole), "whole-%zu", k);
	snprintf(cut, sizeof(cut), "cut-%zu", k);
	ru_cut_find((const char *)text, len, &c);
	ck_assert_uint_gt(c.n, 1000);
	/* k - 1 distinct cut points */
	for (;;) {
		at[0] = 0;
		at[k] = c.n;
		for (i = 1; i < k; i++)
			at[i] = 1 + next_rand() % (c.n - 1);
		qsort(at, k + 1, sizeof(*at), cmp_size);
		for (i = 1; i <= k && at[i] > at[i - 1]; i++)
			;
		if (i > k)
			break;
	}
	for (i = 0; i < k; i++)
		order[i] = i;
	for (i = k - 1; i > 0; i--) {
		size_t j = next_rand() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	{
		char url[256];
		snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=whole.json.gz", whole);
		json_decref(ru_call("POST", url, gz, glen, 201));
	}
	for (i = 0; i < k; i++)
		upload_chunk(&c, at[order[i]], at[order[i] + 1], cut, order[i]);
	/* the uploads did not replay the rank: each after the first marked it, and its tables are one chunk's */
	snprintf(sql, sizeof(sql), "SELECT COALESCE(SUM(p.seq), 0) FROM rank_pending p JOIN runs r ON r.id=p.run_id"
		 " WHERE r.name='%s'", cut);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, sql), (long long)k - 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM (SELECT DISTINCT o.rank FROM op_stats o JOIN runs r"
		 " ON r.id=o.run_id WHERE r.name='%s') k", cut);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, sql), 1);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM steps s JOIN runs r ON r.id=s.run_id WHERE r.name='%s'"
		 " AND s.source_artifact<>(SELECT MIN(id) FROM artifacts WHERE run_id=r.id)", cut);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, sql), 0);
	if (restart) {
		/* the marks outlive the process: the next one derives them on the first read */
		ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
		ck_assert_int_eq(tu_server_restart(&ru_srv, NULL), 0);
	}
	for (i = 0; i < ru_nanswers; i++)
		if (memory || strncmp(ru_answers[i], "/memory", 7))
			ru_same_answer(whole, cut, ru_answers[i]);
	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM rank_pending");
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, sql), 0);

	/* a chunk removed: the run answers without it; uploaded again, as the whole once more */
	{
		char url[256];
		json_t *run, *a = NULL;
		size_t n;
		struct tu_resp r;
		snprintf(url, sizeof(url), "/api/v1/runs/%s", cut);
		run = ru_call("GET", url, NULL, 0, 200);
		ck_assert_uint_eq(json_array_size(json_object_get(run, "artifacts")), k);
		json_array_foreach(json_object_get(run, "artifacts"), n, a)
			if (!strcmp(json_string_value(json_object_get(a, "name")), "part0.json"))
				break;
		snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts/%lld", cut,
			 (long long)json_integer_value(json_object_get(a, "id")));
		json_decref(run);
		json_decref(ru_call("DELETE", url, NULL, 0, 200));
		snprintf(url, sizeof(url), "/api/v1/runs/%s/ops?device=cpu&limit=100000", cut);
		ck_assert_int_eq(tu_http(&ru_srv, "GET", url, NULL, 0, NULL, &r), 0);
		ck_assert_int_eq(r.status, 200);
		tu_resp_free(&r);
		upload_chunk(&c, at[0], at[1], cut, 0);
		for (i = 0; i < ru_nanswers; i++)
			if (memory || strncmp(ru_answers[i], "/memory", 7))
				ru_same_answer(whole, cut, ru_answers[i]);
	}
	free(c.ev);
	free(text);
	free(gz);
	free(path);
	free(at);
	free(order);
}

/*
 * A trace that joins its rank is stored without its own analysis (the rank is
 * analysed as a whole at the next read): with the rank's first trace deleted,
 * the one that joined answers alone, as it does uploaded alone.
 */
START_TEST(test_joined_trace_alone)
{
	long long first = ru_upload("joined", 0, "traces/hta_sampled_rank0.json.gz");
	char url[256];
	size_t i;

	ru_upload("joined", 0, "traces/hta_sampled_rank1.json.gz");
	ru_upload("alone", 0, "traces/hta_sampled_rank1.json.gz");
	/* the joining trace's analysis is not stored (the rank's is the first's), and the rank is marked */
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM steps s JOIN runs r ON r.id=s.run_id"
				      " WHERE r.name='joined'"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM steps s JOIN runs r ON r.id=s.run_id"
				      " WHERE r.name='joined' AND s.source_artifact<>(SELECT MIN(id) FROM artifacts"
				      " WHERE run_id=r.id)"), 0);
	ck_assert_int_eq(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM rank_pending p JOIN runs r ON r.id=p.run_id"
				      " WHERE r.name='joined'"), 1);
	snprintf(url, sizeof(url), "/api/v1/runs/joined/artifacts/%lld", first);
	json_decref(ru_call("DELETE", url, NULL, 0, 200));
	for (i = 0; i < ru_nanswers; i++)
		if (strncmp(ru_answers[i], "/memory", 7))	/* (the fixture has none) */
			ru_same_answer("alone", "joined", ru_answers[i]);
}
END_TEST

START_TEST(test_chunks_answer_as_whole_v100)
{
	chunks_as_whole("traces/hta_v100_train_memory.json.gz", 2, 1, 1);
	chunks_as_whole("traces/hta_v100_train_memory.json.gz", 7, 1, 0);
}
END_TEST

START_TEST(test_chunks_answer_as_whole_resnet)
{
	chunks_as_whole("traces/kineto_resnet50_workers0.json.gz", 5, 1, 0);
}
END_TEST

/*
 * A run read after each chunk, as a live page reads it: a derivation
 * replays only the chunks that joined since the last (the rank's analysis
 * is kept between them: runrank.c), and answers what the same chunks
 * uploaded and read at once do, and at the end what the whole file does.
 * Deleted and uploaded again cut otherwise (SQLite gives the ids again),
 * the run is replayed from its start.
 */
static void grown_same(const char *a, const char *b)
{
	for (size_t i = 0; i < ru_nanswers; i++)
		ru_same_answer(a, b, ru_answers[i]);
}

/* the artifacts derivations replayed, and those they found replayed in the analysis kept */
static const char *const replayed = "trainscope_rank_replay_artifacts_total{how=\"replayed\"}",
		  *const kept_grown = "trainscope_rank_replay_artifacts_total{how=\"kept\"}";

START_TEST(test_grown_chunk_by_chunk)
{
	const char *const none[] = { "--derive-keep", "0", NULL };
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t glen, len, i, k = 4, at[6];
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct cut c;

	ck_assert_ptr_nonnull(text);
	ru_cut_find((const char *)text, len, &c);
	for (i = 0; i <= k; i++)
		at[i] = c.n * i / k;
	json_decref(ru_call("POST", "/api/v1/runs/whole/artifacts?rank=0&name=whole.json.gz", gz, glen, 201));
	upload_chunk(&c, at[0], at[1], "two", 0);
	upload_chunk(&c, at[1], at[2], "two", 1);
	for (i = 0; i < k; i++) {
		double r0 = ru_metric(replayed), k0 = ru_metric(kept_grown);
		upload_chunk(&c, at[i], at[i + 1], "grow", i);
		json_decref(ru_call("GET", "/api/v1/runs/grow/steps", NULL, 0, 200));
		/* the first chunk was analysed as it came; the second joined it: both replayed; then one each */
		ck_assert_msg(ru_metric(replayed) == r0 + (i == 0 ? 0 : i == 1 ? 2 : 1), "chunk %zu: %g replayed", i,
			      ru_metric(replayed) - r0);
		ck_assert_msg(ru_metric(kept_grown) == k0 + (i < 2 ? 0 : (double)i), "chunk %zu: %g kept", i, ru_metric(kept_grown) - k0);
		if (i == 1)
			grown_same("two", "grow");
	}
	grown_same("whole", "grow");

	json_decref(ru_call("DELETE", "/api/v1/runs/grow", NULL, 0, 200));
	for (i = 0; i <= 5; i++)
		at[i] = c.n * i / 5;
	double r0 = ru_metric(replayed);
	for (i = 0; i < 5; i++)
		upload_chunk(&c, at[i], at[i + 1], "grow", i);
	json_decref(ru_call("GET", "/api/v1/runs/grow/steps", NULL, 0, 200));
	ck_assert_msg(ru_metric(replayed) == r0 + 5, "%g replayed", ru_metric(replayed) - r0);
	grown_same("whole", "grow");

	/* --derive-keep 0: none kept, each derivation replays every chunk, the answers the same */
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, none), 0);
	for (i = 0; i < 3; i++) {
		r0 = ru_metric(replayed);
		upload_chunk(&c, at[i], at[i + 1], "none", i);
		json_decref(ru_call("GET", "/api/v1/runs/none/steps", NULL, 0, 200));
		ck_assert_msg(ru_metric(replayed) == r0 + (i ? (double)i + 1 : 0), "chunk %zu: %g replayed", i,
			      ru_metric(replayed) - r0);
	}
	ck_assert(ru_metric(kept_grown) == 0);
	for (; i < 5; i++)
		upload_chunk(&c, at[i], at[i + 1], "none", i);
	grown_same("whole", "none");
	free(c.ev);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/*
 * Growing ahead (runrank.c: grow_rank): with --derive-quiet on, a chunk that joins its rank is
 * replayed into the rank's kept analysis while the run's uploads go on, without a derivation
 * (the rank stays marked, nothing is written); the read that derives it then replays none, and
 * answers as the whole file does. With --derive-quiet 0 (the tests' default) nothing is replayed
 * before a read: test_grown_chunk_by_chunk.
 */
START_TEST(test_grown_ahead)
{
	static const char *derived = "trainscope_rank_derivation_seconds_count";
	const char *const quiet[] = { "--derive-quiet", "600", NULL };
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");
	size_t glen, len, i, k = 5, at[6];
	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	struct cut c;
	int waited;

	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, quiet), 0);
	ru_cut_find((const char *)text, len, &c);
	for (i = 0; i <= k; i++)
		at[i] = c.n * i / k;
	json_decref(ru_call("POST", "/api/v1/runs/whole/artifacts?rank=0&name=whole.json.gz", gz, glen, 201));
	double r0 = ru_metric(replayed), k0 = ru_metric(kept_grown), d0 = ru_metric(derived);
	for (i = 0; i < k; i++) {
		upload_chunk(&c, at[i], at[i + 1], "ahead", i);
		/* the first chunk was analysed as it came; from the second on, all are replayed as they join */
		for (waited = 0; waited < 3000 && ru_metric(replayed) < r0 + (i ? (double)i + 1 : 0); waited++)
			usleep(10000);
		ck_assert_msg(ru_metric(replayed) == r0 + (i ? (double)i + 1 : 0), "chunk %zu: %g replayed", i,
			      ru_metric(replayed) - r0);
	}
	ck_assert(ru_metric(derived) == d0);	/* replayed, not derived: the rank is still marked */
	ck_assert(ru_metric(kept_grown) == k0);
	json_decref(ru_call("GET", "/api/v1/runs/ahead/steps", NULL, 0, 200));
	ck_assert(ru_metric(derived) == d0 + 1);
	ck_assert_msg(ru_metric(kept_grown) == k0 + (double)k, "%g kept", ru_metric(kept_grown) - k0);
	ck_assert_msg(ru_metric(replayed) == r0 + (double)k, "%g replayed", ru_metric(replayed) - r0);
	grown_same("whole", "ahead");

	/* deleted while it grows, and cut otherwise: SQLite gives the ids again, so what was grown before
	 * the removal must not be taken for what is grown after it */
	upload_chunk(&c, at[0], at[2], "again", 0);
	upload_chunk(&c, at[2], at[3], "again", 1);
	json_decref(ru_call("DELETE", "/api/v1/runs/again", NULL, 0, 200));
	upload_chunk(&c, at[0], at[1], "again", 0);
	upload_chunk(&c, at[1], at[4], "again", 1);
	upload_chunk(&c, at[4], at[5], "again", 2);
	grown_same("whole", "again");

	/* nothing kept (--derive-keep 0): the first two chunks are grown, then none, rather than the
	 * whole rank again at each upload; the read replays all five */
	const char *const keep_none[] = { "--derive-quiet", "600", "--derive-keep", "0", NULL };
	ck_assert_int_eq(tu_server_stop(&ru_srv), 0);
	ck_assert_int_eq(tu_server_restart(&ru_srv, keep_none), 0);
	r0 = ru_metric(replayed);
	for (i = 0; i < k; i++)
		upload_chunk(&c, at[i], at[i + 1], "none", i);
	for (waited = 0; waited < 3000 && ru_metric(replayed) < r0 + 2; waited++)
		usleep(10000);
	usleep(300000);	/* time for more, were there any */
	ck_assert_msg(ru_metric(replayed) == r0 + 2, "%g replayed", ru_metric(replayed) - r0);
	json_decref(ru_call("GET", "/api/v1/runs/none/steps", NULL, 0, 200));
	ck_assert_msg(ru_metric(replayed) == r0 + 2 + (double)k, "%g replayed", ru_metric(replayed) - r0);
	grown_same("whole", "none");
	free(c.ev);
	free(text);
	free(gz);
	free(path);
}
END_TEST

/* upload body as artifact name of run on s, then (read) derive it on s */
static void upload_to(const struct tu_server *s, const char *run, const char *name, const void *body, size_t len,
		      int read)
{
	char url[256];

	struct tu_resp r;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=%s", run, name);
	ck_assert_int_eq(tu_http(s, "POST", url, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "%s: %ld: %s", url, r.status, r.body);
	tu_resp_free(&r);
	if (read) {
		snprintf(url, sizeof(url), "/api/v1/runs/%s/steps", run);
		json_decref(ru_call_on(s, "GET", url, 200));
	}
}

static int is_trace(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 17 && !strcmp(d->d_name + n - 17, ".pt.trace.json.gz");
}

/* every answer of run on a, byte for byte, on b */
static void same_answers_via(const struct tu_server *a, const struct tu_server *b, const char *run)
{
	for (size_t i = 0; i < ru_nanswers; i++)
		ru_same_answer_via(a, run, b, run, ru_answers[i]);
	ru_same_answer_via(a, run, b, run, "/timeline");
	ru_same_answer_via(a, run, b, run, "/memory");
	ru_same_answer_via(a, run, b, run, "/distributed");
}

/*
 * The rows of the collectives table, every column and its place (n) in a sum (the parts'
 * first ones are left as a write before stored them: they must be the whole's).
 */
static long long colls_sum(const struct tu_server *s)
{
	return tu_db_scalar(s->db, "SELECT COUNT(*) + COALESCE(SUM((n % 1000 + 1) * ((COALESCE(step, -1) * 7919"
				   " + length(kind) * 31 + length(pg) * 37 + COALESCE(seq, -1) * 131 + launch_ns % 1000003"
				   " + start_ns % 999983 * 3 + end_ns % 999979 * 5 + time_ns % 1000033 * 11 + kernels * 17"
				   " + COALESCE(bytes, -1) % 1000003 * 19 + COALESCE(group_size, -1) * 23"
				   " + length(COALESCE(before_op, '')) * 29 + before_ns % 1000003 * 41) % 1000000007)), 0)"
				   " FROM collectives");
}

/* The rows of inside_steps (compare's work inside the steps), every column, in a sum. */
static long long inside_sum(const struct tu_server *s)
{
	return tu_db_scalar(s->db, "SELECT COUNT(*) + COALESCE(SUM((run_id * 7 + rank * 11 + gpu * 13 + kind * 17"
				   " + length(name) * 31 + calls * 37 + ns % 1000003 * 41) % 1000000007), 0) FROM inside_steps");
}

/*
 * Profiling cycles in parts (pipeline/runrank.c): the ten cycles of the GPU fixtures' QLoRA
 * schedule (1 step in 10), uploaded in time order with a read after each, close a part each
 * (nine: every derivation finishes the cycle that joined, not the run), and answer byte for byte
 * as a server that analyses the rank whole (--derive-parts off); so do they uploaded shuffled.
 * The same cycle twice, its times moved on: the second's ids run into the first's, the parts do
 * not meet, and the rank is analysed whole (rebuilt), as the other server does.
 */
START_TEST(test_cycles_in_parts)
{
	static const char *closed = "trainscope_rank_parts_total{how=\"closed\"}",
			  *rebuilt = "trainscope_rank_parts_total{how=\"rebuilt\"}",
			  *went_on = "trainscope_rank_memory_models_total{how=\"went_on\"}",
			  *made = "trainscope_rank_memory_models_total{how=\"made\"}";
	static const size_t shuffled[] = { 3, 0, 7, 1, 9, 2, 4, 8, 5, 6 };
	const char *const off[] = { "--derive-parts", "off", NULL };
	char *dir = tu_source_path("tests/fixtures/gpu/train"), path[512];
	struct tu_server whole;
	struct dirent **ents;
	uint8_t *body[10];
	size_t len[10], i;
	int n = scandir(dir, &ents, is_trace, alphasort);

	ck_assert_int_eq(n, 10);	/* their names count up with their times */
	ck_assert_int_eq(tu_server_start(&whole, off), 0);
	for (i = 0; i < 10; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
		ck_assert_ptr_nonnull(body[i] = tu_read_file(path, &len[i]));
	}
	double c0 = ru_metric(closed), r0 = ru_metric(rebuilt), w0 = ru_metric(went_on), m0 = ru_metric(made);
	for (i = 0; i < 10; i++) {
		upload_to(&ru_srv, "cycles", ents[i]->d_name, body[i], len[i], 1);
		upload_to(&whole, "cycles", ents[i]->d_name, body[i], len[i], 0);
		ck_assert_msg(ru_metric(closed) == c0 + (double)i, "cycle %zu: %g parts closed", i, ru_metric(closed) - c0);
	}
	ck_assert(ru_metric(rebuilt) == r0);
	/* each cycle's 708 [memory] events fed to the model of the cycles before */
	ck_assert_msg(ru_metric(went_on) >= w0 + 9, "%g went on", ru_metric(went_on) - w0);
	ck_assert(ru_metric(made) == m0);
	same_answers_via(&whole, &ru_srv, "cycles");

	for (i = 0; i < 10; i++) {
		upload_to(&ru_srv, "shuffled", ents[shuffled[i]]->d_name, body[shuffled[i]], len[shuffled[i]], 1);
		upload_to(&whole, "shuffled", ents[shuffled[i]]->d_name, body[shuffled[i]], len[shuffled[i]], 0);
	}
	same_answers_via(&whole, &ru_srv, "shuffled");
	/* compare's work inside the steps, summed over the parts' steps as over the whole's */
	ck_assert_int_gt(tu_db_scalar(ru_srv.db, "SELECT COUNT(*) FROM inside_steps"), 0);
	ck_assert_int_eq(inside_sum(&ru_srv), inside_sum(&whole));

	/* the first cycle again, 10 s on: its correlation ids are the first's */
	size_t tlen, k;
	char *text = (char *)tu_gunzip(body[0], len[0], &tlen), *p = strstr(text, "\"baseTimeNanoseconds\"");
	ck_assert_ptr_nonnull(p);
	p = strchr(p, ':') + 1;
	while (*p == ' ')
		p++;
	ck_assert(strspn(p, "0123456789") == 19 && p[8] < '9');	/* 10^10 ns a unit of its ninth digit */
	r0 = ru_metric(rebuilt);
	upload_to(&ru_srv, "again", "first.json", text, tlen, 1);
	upload_to(&whole, "again", "first.json", text, tlen, 0);
	p[8]++;
	upload_to(&ru_srv, "again", "moved.json", text, tlen, 1);
	upload_to(&whole, "again", "moved.json", text, tlen, 0);
	ck_assert_msg(ru_metric(rebuilt) == r0 + 1, "%g rebuilt", ru_metric(rebuilt) - r0);
	same_answers_via(&whole, &ru_srv, "again");

	for (k = 0; k < 10; k++) {
		free(body[k]);
		free(ents[k]);
	}
	free(ents);
	free(text);
	free(dir);
	tu_server_cleanup(&whole);
}
END_TEST

/* The events of c written in [lo, hi) (lo INT64_MIN: those without a time too), as one chunk of run on s. */
static void upload_window(const struct tu_server *s, const struct cut *c, const int64_t *ts, int64_t lo, int64_t hi,
			  const char *run, const char *name)
{
	size_t cap = c->nhead + c->ntail + (size_t)(c->ev[c->n] - c->ev[0]) + 1, len = c->nhead, k = 0;
	char *buf = malloc(cap);

	memcpy(buf, c->head, c->nhead);
	for (size_t i = 0; i < c->n; i++) {
		const char *e = c->ev[i], *end = c->ev[i + 1];
		if (ts[i] < lo || ts[i] >= hi)
			continue;
		while (end > e && end[-1] != '}')	/* the comma after it */
			end--;
		if (k++)
			buf[len++] = ',';
		memcpy(buf + len, e, (size_t)(end - e));
		len += (size_t)(end - e);
	}
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	upload_to(s, run, name, buf, len, 1);
	free(buf);
}

static const char *ts_in(const char *p, const char *end);

/* One operator at lo (the first event's "ts", as written), on a thread of its own, to run on s. */
static void upload_late(const struct tu_server *s, const struct cut *c, const int64_t *ts, int64_t lo, const char *run)
{
	const char *t = NULL, *end;
	char ev[256];
	size_t i, len;
	char *buf;

	for (i = 0; i < c->n && !t; i++)
		if (ts[i] == lo)
			t = ts_in(c->ev[i], c->ev[i + 1]) + 5;
	ck_assert_ptr_nonnull(t);
	for (end = t; *end != ',' && *end != '}'; end++)
		;
	snprintf(ev, sizeof(ev), "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"late\",\"pid\":1,\"tid\":424242,"
		 "\"ts\":%.*s,\"dur\":1}", (int)(end - t), t);
	buf = malloc(c->nhead + strlen(ev) + c->ntail);
	memcpy(buf, c->head, c->nhead);
	len = c->nhead;
	memcpy(buf + len, ev, strlen(ev));
	len += strlen(ev);
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	upload_to(s, run, "late.json", buf, len, 1);
	free(buf);
}

/*
 * A trace's events cut in k windows of time (the collector's chunks: one a second), uploaded
 * in order with a read after each to a server that cuts a part holding more than 1 byte, and
 * to one that analyses the rank whole: at least cuts parts are cut, none rebuilt, and every
 * answer is byte for byte the other server's. With memory, the [memory] events' model goes on
 * from the parts before at each derivation, never made again, and the points stored before stay
 * (some not even read again). Then an operator on a thread of its own at the trace's first
 * instant (the same events again would be refused: pipeline/overlap.h): it reaches back before
 * the cuts, the parts no longer meet, and the rank is analysed whole (rebuilt), as the other
 * server does.
 */
/* "ts": in [p, end), not past it (strstr() would read to the file's end at each event) */
static const char *ts_in(const char *p, const char *end)
{
	for (; end - p >= 5; p++)
		if (!memcmp(p, "\"ts\":", 5))
			return p;
	return NULL;
}

static void windows_cut_in_parts(const char *path, size_t k, double cuts, int memory)
{
	static const char *cut = "trainscope_rank_parts_total{how=\"cut\"}",
			  *rebuilt = "trainscope_rank_parts_total{how=\"rebuilt\"}",
			  *went_on = "trainscope_rank_memory_models_total{how=\"went_on\"}",
			  *made = "trainscope_rank_memory_models_total{how=\"made\"}",
			  *kept = "trainscope_rank_memory_blocks_total{how=\"kept\"}",
			  *unread = "trainscope_rank_memory_blocks_total{how=\"unread\"}",
			  *colls_kept = "trainscope_rank_collectives_total{how=\"kept\"}";
	const char *const off[] = { "--derive-parts", "off", NULL }, *const small[] = { "--derive-split", "1", NULL };
	char name[32];
	struct tu_server whole, cutting;
	size_t glen, len, i;
	int64_t lo = INT64_MAX, hi = INT64_MIN, *ts;
	struct cut c;

	uint8_t *gz = tu_read_file(path, &glen), *text = tu_gunzip(gz, glen, &len);
	ck_assert_ptr_nonnull(text);
	ru_cut_find((const char *)text, len, &c);
	ck_assert_ptr_nonnull(ts = malloc(c.n * sizeof(*ts)));
	for (i = 0; i < c.n; i++) {	/* "ts" in us, as the fixtures write it */
		const char *t = ts_in(c.ev[i], c.ev[i + 1]);
		ts[i] = t ? (int64_t)(strtod(t + 5, NULL) * 1000) : INT64_MIN;
		if (ts[i] != INT64_MIN) {
			lo = ts[i] < lo ? ts[i] : lo;
			hi = ts[i] > hi ? ts[i] : hi;
		}
	}
	ck_assert(lo < hi);
	ck_assert_int_eq(tu_server_start(&whole, off), 0);
	ck_assert_int_eq(tu_server_start(&cutting, small), 0);
	for (i = 0; i < k; i++) {
		int64_t from = i ? lo + (hi - lo) / (int64_t)k * (int64_t)i : INT64_MIN,
			to = i + 1 < k ? lo + (hi - lo) / (int64_t)k * (int64_t)(i + 1) : INT64_MAX;
		snprintf(name, sizeof(name), "second%zu.json", i);
		upload_window(&cutting, &c, ts, from, to, "live", name);
		upload_window(&whole, &c, ts, from, to, "live", name);
	}
	ck_assert_msg(ru_metric_on(&cutting, cut) >= cuts, "%g cut", ru_metric_on(&cutting, cut));
	ck_assert(ru_metric_on(&cutting, rebuilt) == 0);
	if (memory) {
		ck_assert_msg(ru_metric_on(&cutting, went_on) >= 1, "%g went on", ru_metric_on(&cutting, went_on));
		ck_assert(ru_metric_on(&cutting, made) == 0);
		/* the first windows' points, stored once: later derivations left their blocks as they were */
		ck_assert_msg(ru_metric_on(&cutting, kept) >= 1, "%g blocks kept", ru_metric_on(&cutting, kept));
		/* and the blocks before where the model's points could differ were not even read; on
		 * PostgreSQL every block is (another server may have written it since) */
		if (tu_postgres())
			ck_assert(ru_metric_on(&cutting, unread) == 0);
		else
			ck_assert_msg(ru_metric_on(&cutting, unread) >= 1, "%g blocks unread", ru_metric_on(&cutting, unread));
	}
	same_answers_via(&whole, &cutting, "live");
	ck_assert_int_eq(colls_sum(&cutting), colls_sum(&whole));
	/* the parts' collectives, left as a write before stored them (the V100 trace's NCCL calls) */
	if (tu_db_scalar(whole.db, "SELECT COUNT(*) FROM collectives") && !tu_postgres())
		ck_assert_msg(ru_metric_on(&cutting, colls_kept) >= 1, "%g collectives kept", ru_metric_on(&cutting, colls_kept));

	upload_late(&cutting, &c, ts, lo, "live");
	upload_late(&whole, &c, ts, lo, "live");
	ck_assert(ru_metric_on(&cutting, rebuilt) == 1);
	same_answers_via(&whole, &cutting, "live");
	ck_assert_int_eq(colls_sum(&cutting), colls_sum(&whole));

	tu_server_cleanup(&cutting);
	tu_server_cleanup(&whole);
	free(ts);
	free(c.ev);
	free(text);
	free(gz);
}

/*
 * The sync fixture waits for the GPU at every step's end (loss.item()), so nothing crosses its
 * step boundaries: five steps, four boundaries, each cut once the chunk after it has come; its
 * 3,559 [memory] events go on from part to part.
 */
START_TEST(test_chunks_cut_in_parts)
{
	char *dir = tu_source_path("tests/fixtures/gpu/sync"), path[512];
	struct dirent **ents;
	int n = scandir(dir, &ents, is_trace, alphasort);

	ck_assert_int_eq(n, 1);
	snprintf(path, sizeof(path), "%s/%s", dir, ents[0]->d_name);
	windows_cut_in_parts(path, 10, 3, 1);
	free(ents[0]);
	free(ents);
	free(dir);
}
END_TEST

/*
 * The V100 trace's 28,010 [memory] events: allocations made in one part and freed in a later
 * one, a model that goes on from part to part, the memory answers (timeline, peak) the whole
 * rank's to the byte.
 */
START_TEST(test_chunks_cut_with_memory)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz");

	windows_cut_in_parts(path, 10, 1, 1);
	free(path);
}
END_TEST

Suite *suite_runs_chunks(void)
{
	Suite *s = suite_create("runs_chunks");
	/* the tcases as before the split of check_runs.c: "delete" with the default timeout, "chunks" with 600 s */
	TCase *tc = tcase_create("delete");

	tcase_add_checked_fixture(tc, ru_start, ru_stop);
	tcase_add_test(tc, test_joined_trace_alone);
	suite_add_tcase(s, tc);
	tc = tcase_create("chunks");
	tcase_add_checked_fixture(tc, ru_start, ru_stop);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_chunks_answer_as_whole_v100);
	tcase_add_test(tc, test_chunks_answer_as_whole_resnet);
	tcase_add_test(tc, test_grown_chunk_by_chunk);
	tcase_add_test(tc, test_grown_ahead);
	tcase_add_test(tc, test_cycles_in_parts);
	tcase_add_test(tc, test_chunks_cut_in_parts);
	tcase_add_test(tc, test_chunks_cut_with_memory);
	suite_add_tcase(s, tc);
	return s;
}
