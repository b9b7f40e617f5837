/*
 * check_analysis_spill.c: runs the analysis (server/analysis/) spills to
 * files, forks, or takes in parts answer as one taken whole; the memory
 * model's marks and bytes; a spill that fails at each file.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "analysis/memory.h"
#include "suites.h"
#include "synth.h"

/* ---- host spans in spilled runs: the same answers as in one ---- */

/* Everything an analysis answers, as text. */
static int dump_point(void *arg, const struct mem_point *p)
{
	FILE *f = arg;

	fprintf(f, "pt %lld %lld", (long long)p->t_ns, (long long)p->reserved);
	for (int c = 0; c < MEM_NCAT; c++)
		fprintf(f, " %lld", (long long)p->cat[c]);
	fputc('\n', f);
	return 0;
}

/* What an analysis answers (finished: r), as text; tp gives its strings. */
static char *result_dump(const struct an_result *r, struct trace_parser *tp)
{
	char *out = NULL;
	size_t olen = 0, i;
	FILE *f = open_memstream(&out, &olen);

	ck_assert_ptr_nonnull(f);
	for (i = 0; i < r->nsteps; i++) {
		const struct an_step *s = &r->steps[i];
		fprintf(f, "step %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %d %d", (long long)s->step,
			(long long)s->start_ns, (long long)s->dur_ns, (long long)s->cpu_dur_ns, (long long)s->comm_overlap_ns,
			(long long)s->gpu_busy_ns, (long long)s->gpu_calls, (long long)s->cpu_end_ns,
			(long long)s->sync_calls, (long long)s->sync_ns, s->incomplete, s->whole_trace);
		for (int c = 0; c < AN_NCOMP; c++)
			fprintf(f, " %lld", (long long)s->comp_ns[c]);
		fputc('\n', f);
	}
	for (i = 0; i < r->nops; i++)
		fprintf(f, "op %s %d %lld %lld %lld\n", synth_str_of(tp, r->ops[i].name), r->ops[i].device,
			(long long)r->ops[i].calls, (long long)r->ops[i].self_ns, (long long)r->ops[i].total_ns);
	for (i = 0; i < r->nkernels; i++)
		fprintf(f, "kernel %s %lld %lld\n", synth_str_of(tp, r->kernels[i].name), (long long)r->kernels[i].calls,
			(long long)r->kernels[i].total_ns);
	struct an_coll *cs = synth_colls_of(r);
	for (i = 0; i < r->ncolls; i++) {
		const struct an_coll *c = &cs[i];
		fprintf(f, "coll %lld %d %u %lld %lld %lld %lld %lld %lld %lld %lld %s %lld %u\n", (long long)c->step,
			c->kind, c->pg, (long long)c->seq, (long long)c->launch_ns, (long long)c->start_ns,
			(long long)c->end_ns, (long long)c->time_ns, (long long)c->kernels, (long long)c->bytes,
			(long long)c->group_size, c->before_op ? synth_str_of(tp, c->before_op) : "-",
			(long long)c->before_ns, c->thread);
	}
	free(cs);
	for (i = 0; i < r->nthreads; i++)
		fprintf(f, "thread %zu %lld\n", i, (long long)r->thread_self_ns[i]);
	for (i = 0; i < r->nmem_series; i++) {
		const struct mem_series *s = &r->mem_series[i];
		fprintf(f, "series %s %zu %lld\n", s->device, s->n, (long long)s->baseline);
		ck_assert_int_eq(mem_series_each(s, dump_point, f), 0);
		for (size_t g = 0; g < s->ngroups; g++)
			fprintf(f, "group %d %s %lld %lld\n", s->groups[g].cat, s->groups[g].op ? s->groups[g].op : "-",
				(long long)s->groups[g].bytes, (long long)s->groups[g].count);
	}
	fclose(f);
	return out;
}

/* Events up to a count, and forks on the way (test_forks_answer_alike). */
struct forking {
	struct busy b;
	size_t seen, stop;		/* events given; stop: give no more after that many (0: all) */
	const size_t *at;		/* fork after these many events */
	size_t nat, next;
	char **dumps;			/* each fork's answers */
};

static int fork_event(void *p, const struct tp_event *e)
{
	struct forking *k = p;
	struct tp_errbuf err = { 0 };
	const struct an_result *r;

	if (k->stop && k->seen == k->stop)
		return 0;
	ck_assert_msg(analysis_event(k->b.an, e, &err) == 0, "%s", err.msg);
	k->seen++;
	while (k->next < k->nat && k->seen == k->at[k->next]) {
		/* as runrank.c does: what the original holds goes to its files, then the fork shares them */
		ck_assert_msg(analysis_hold(k->b.an, k->next % 2 ? 64 : 1u << 20, &err) == 0, "%s", err.msg);
		struct analysis *f = analysis_fork(k->b.an, NULL, &err);
		ck_assert_msg(f != NULL, "%s", err.msg);
		ck_assert_msg(analysis_finish(f, &r, &err) == 0, "%s", err.msg);
		k->dumps[k->next++] = result_dump(r, k->b.tp);
		analysis_free(f);
	}
	return 0;
}

/* The analyses below spill their host spans' runs on a thread (analysis_spill_behind()), as uploads do. */
static int behind;

/* The answers of json's first stop events (0: all), in runs of run spans (0: the default), forking at at[]. */
static char *analyse_forking(const uint8_t *json, size_t len, size_t run, size_t stop, const size_t *at, size_t nat,
			     char **dumps, size_t *seen)
{
	struct tp_errbuf err = { 0 };
	struct forking k = { .stop = stop, .at = at, .nat = nat, .dumps = dumps };
	struct trace_sink sink = { .string = synth_busy_string, .event = fork_event, .payload = &k };
	const struct an_result *r;
	char *out;

	k.b.tp = trace_parser_new(&trace_default_limits, &sink);
	k.b.an = analysis_new(synth_str_of, k.b.tp);
	ck_assert_int_eq(behind ? analysis_spill_behind(k.b.an) : 0, 0);
	if (run)
		analysis_set_run(k.b.an, run);
	ck_assert_int_eq(trace_parser_feed(k.b.tp, json, len, &err), 0);
	ck_assert_int_eq(trace_parser_finish(k.b.tp, &err), 0);
	ck_assert_msg(analysis_finish(k.b.an, &r, &err) == 0, "%s", err.msg);
	/* a finished analysis is not forked */
	ck_assert_ptr_null(analysis_fork(k.b.an, NULL, &err));
	out = result_dump(r, k.b.tp);
	analysis_free(k.b.an);
	trace_parser_free(k.b.tp);
	if (seen)
		*seen = k.seen;
	return out;
}

static char *analyse_dump(const uint8_t *json, size_t len, size_t run)
{
	return analyse_forking(json, len, run, 0, NULL, 0, NULL, NULL);
}

static const char *const spill_files[] = {
	"traces/hta_v100_train_memory.json.gz", "traces/kineto_resnet50_workers0.json.gz",
	"traces/hta_nccl_rel_ts.json.gz", "traces/hta_sampled_rank0.json.gz", "traces/hta_cpu_only.json.gz",
	"traces/hta_amd_mi250.json.gz", "traces/hta_event_sync.json.gz", "traces/hta_compare_base.json.gz",
	"traces/hta_triton_tiny.json.gz", "traces/hta_alexnet.json.gz", "traces/hta_large_integer.json.gz",
	"traces/hta_ns_resolution.json.gz",
	/* the H200 recordings: CUDA graphs, torch.compile, gloo across ranks, optimizer state */
	"gpu/cudagraphs", "gpu/compiled", "gpu/dist", "gpu/train", "gpu/growth",
};

/* A fixture's trace: shared/fixtures/<rel>, or the first .pt.trace.json.gz of tests/fixtures/<rel>/. */
static char *spill_path(const char *rel)
{
	char *p = NULL, sub[256], *gdir;

	if (strncmp(rel, "gpu/", 4))
		return tu_fixture(rel);
	snprintf(sub, sizeof(sub), "tests/fixtures/%s", rel);
	gdir = tu_source_path(sub);
	DIR *d = opendir(gdir);
	ck_assert_ptr_nonnull(d);
	for (struct dirent *de; !p && (de = readdir(d));)
		if (strstr(de->d_name, ".pt.trace.json.gz")) {
			size_t n = strlen(gdir) + strlen(de->d_name) + 2;
			p = malloc(n);
			ck_assert_ptr_nonnull(p);
			snprintf(p, n, "%s/%s", gdir, de->d_name);
		}
	closedir(d);
	free(gdir);
	ck_assert_ptr_nonnull(p);
	return p;
}

/*
 * The analysis reads its host spans back from sorted runs merged; a trace
 * past one run is spilled. Runs of 1000 and of 7 spans (hundreds of runs
 * on the larger fixtures) answer what one run in memory does, byte for
 * byte: steps, operators, kernels, collectives, threads, memory series.
 * So do runs of 7 when the filter of communication kernels' ids says yes
 * to every runtime call (what its false positives do), and runs of 7
 * sorted and written on a thread of their own, as an upload's are (the
 * first five fixtures: the thread is the same code for each).
 */
START_TEST(test_spilled_runs_answer_alike)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	static const size_t runs[] = { 1000, 7, 7, 7 };

	ck_assert_ptr_nonnull(json);
	char *whole = analyse_dump(json, glen, 0);
	ck_assert_msg(strlen(whole) > 100, "%s: nothing analysed", spill_files[_i]);
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		if (k >= 3 && _i >= 5)
			break;
		analysis_comm_filter_all(k == 2);
		behind = k >= 3;
		char *spilled = analyse_dump(json, glen, runs[k]);
		analysis_comm_filter_all(0);
		behind = 0;
		if (strcmp(whole, spilled)) {
			size_t at = 0;
			while (whole[at] == spilled[at])
				at++;
			ck_abort_msg("%s, runs of %zu%s: differs at byte %zu: ...%.120s... against ...%.120s...",
				     spill_files[_i], runs[k], k == 2 ? ", the filter saying yes to all" : k >= 3 ? ", behind" : "",
				     at, whole + (at > 40 ? at - 40 : 0),
				     spilled + (at > 40 ? at - 40 : 0));
		}
		free(spilled);
	}
	free(whole);
	free(json);
	free(gz);
	free(path);
}
END_TEST

static void same_dump(const char *what, size_t runs, const char *want, const char *got)
{
	size_t at = 0;

	if (!strcmp(want, got))
		return;
	while (want[at] == got[at])
		at++;
	ck_abort_msg("%s, runs of %zu: differs at byte %zu: ...%.120s... against ...%.120s...", what, runs, at,
		     want + (at > 40 ? at - 40 : 0), got + (at > 40 ? at - 40 : 0));
}

/*
 * A rank's analysis grows chunk by chunk and is forked to be finished
 * after each (server/pipeline/runrank.c). A fork after k events answers
 * what an analysis of those k alone does, byte for byte, and the original,
 * going on past its forks (they shared its spilled runs, and it spilled
 * what it held at each), answers what one analysis of every event does;
 * also when the original's runs are written on a thread of their own (the
 * first five fixtures).
 */
START_TEST(test_forks_answer_alike)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen, total;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	static const size_t runs[] = { 0, 7, 7 };

	ck_assert_ptr_nonnull(json);
	char *whole = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, &total);
	size_t at[] = { total / 5 ? total / 5 : 1, total / 2 ? total / 2 : 1, total - total / 7 };
	for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
		char *dumps[3] = { NULL, NULL, NULL };
		if (k == 2 && _i >= 5)
			break;
		behind = k == 2;
		char *grown = analyse_forking(json, glen, runs[k], 0, at, 3, dumps, NULL);
		behind = 0;
		same_dump(spill_files[_i], runs[k], whole, grown);
		for (size_t i = 0; i < 3; i++) {
			ck_assert_ptr_nonnull(dumps[i]);
			char *prefix = analyse_forking(json, glen, runs[k], at[i], NULL, 0, NULL, NULL);
			same_dump(spill_files[_i], runs[k], prefix, dumps[i]);
			free(prefix);
			free(dumps[i]);
		}
		free(grown);
	}
	free(whole);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * The peak a memory model keeps as its records come (allocator totals on every one) is the one
 * a walk of its records finds: what was alive there answers the same. The V100 trace's, the
 * first, is kept.
 */
START_TEST(test_peak_kept_as_walked)
{
	char *path = spill_path(spill_files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);

	ck_assert_ptr_nonnull(json);
	mem_peak_test(0);
	char *kept = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, NULL);
	unsigned long n = mem_peak_test(1);
	char *walked = analyse_forking(json, glen, 0, 0, NULL, 0, NULL, NULL);
	ck_assert_uint_eq(mem_peak_test(0), 0);
	same_dump(spill_files[_i], 0, walked, kept);
	if (_i == 0)
		ck_assert_uint_gt(n, 0);
	free(kept);
	free(walked);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * What a memory model takes counts its records (48 B an event) and grows with them; a
 * copy counts only the records written after what it shares (analysis_held_bytes() adds it,
 * and the ranks kept between derivations are bounded by that: runrank.c's grown_bytes()).
 */
START_TEST(test_model_bytes)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_model *m = mem_model_new(), *c;
	struct mem_rec x = { .ctx = { .top = -1 } };
	uint64_t at[3];

	ck_assert_ptr_nonnull(m);
	ck_assert_uint_eq(mem_model_bytes(NULL), 0);
	/* a block made and freed again and again at one address: the records are what grows */
	x.ev = (struct mem_event){ .dev_type = 1, .has_addr = 1, .has_totals = 1, .addr = 0x10000 };
	for (int i = 0; i < 3000; i++) {
		x.ev.ts = x.ev.ev_idx = i;
		x.ev.bytes = i % 2 ? -512 : 512;
		x.ev.total_alloc += x.ev.bytes;
		ck_assert_int_eq(mem_model_add(m, &in, &x, &err), 0);
		if (i == 0 || i == 999)
			at[i ? 1 : 0] = mem_model_bytes(m);
	}
	ck_assert_int_eq(mem_model_sync(m, &err), 0);
	at[2] = mem_model_bytes(m);
	ck_assert_uint_ge(at[1], at[0] + 999 * 48);
	ck_assert_uint_ge(at[2], at[1] + 2000 * 48);
	ck_assert_int_eq(mem_model_copy(m, &c, &err), 0);
	ck_assert_uint_lt(mem_model_bytes(c), at[2] - 2999 * 48);
	mem_model_free(c);
	mem_model_free(m);
}
END_TEST

/*
 * The scripted device of test_marks_go_on: a block made and freed again and again at one
 * address, and at event keep a block at another, freed at event freed (-1: never), both with
 * nothing around them (made in forward: alive, unknown; freed, an activation).
 */
static void mark_feed(struct mem_model *m, int from, int to, int keep, int freed)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_rec x = { .ctx = { .top = -1 } };

	for (int i = from; i < to; i++) {
		int j = i - (i > keep) - (freed >= 0 && i > freed), y = i >= keep && (freed < 0 || i < freed);
		x.ev = (struct mem_event){ .dev_type = 1, .has_addr = 1, .has_totals = 1, .ts = i, .ev_idx = i,
					   .total_alloc = (1 << 20) + (j % 2 ? 0 : 512) + (y ? 4096 : 0) };
		if (i == keep || i == freed) {
			x.ev.addr = 0x20000;
			x.ev.bytes = i == keep ? 4096 : -4096;
			x.ev.total_alloc = (1 << 20) + (j % 2 ? 512 : 0) + (y ? 4096 : 0);
		} else {
			x.ev.addr = 0x10000;
			x.ev.bytes = j % 2 ? -512 : 512;
		}
		ck_assert_int_eq(mem_model_add(m, &in, &x, &err), 0);
	}
	ck_assert_int_eq(mem_model_sync(m, &err), 0);
}

struct pts {
	struct mem_point *v;
	size_t n, cap;
};

static int pts_add(void *arg, const struct mem_point *p)
{
	struct pts *x = arg;

	if (tp_grow((void **)&x->v, &x->cap, x->n + 1, sizeof(*x->v)))
		return TP_ERR_NOMEM;
	x->v[x->n++] = *p;
	return 0;
}

/*
 * A copy of m (its events [0, n) of the script) gone on with events [n, n + 40): its result,
 * its single series in *s, told by mark (may be NULL) which of its points are the same. Its
 * points from s->same on must be a walk's from the start, and s->pre what the ones before
 * come to; out (may be NULL): its mark, once replayed.
 */
static struct mem_result *mark_result(struct mem_model *m, int n, int freed, const struct mem_mark *mark,
				      const struct mem_series **s, struct mem_mark **out)
{
	const struct mem_input in = { 0 };
	struct tp_errbuf err = { 0 };
	struct mem_model *c;
	struct mem_result *r;
	struct pts all = { 0 }, tail = { 0 };
	struct mem_prefix pre = MEM_PREFIX_INIT;
	size_t ns, i;

	ck_assert_int_eq(mem_model_copy(m, &c, &err), 0);
	mark_feed(c, n, n + 40, 1500, freed);
	ck_assert_int_eq(mem_model_result(c, &in, &r, s, &ns, &err), 0);
	ck_assert_uint_eq(ns, 1);
	ck_assert_int_eq(mem_result_follow(r, mark), 0);
	ck_assert_uint_eq((*s)->same % MEM_PT_BLOCK, 0);
	ck_assert_int_eq(mem_series_each_from(*s, (*s)->same, pts_add, &tail), 0);
	if (out) {
		*out = mem_result_mark(r);
		ck_assert_ptr_nonnull(*out);
	}
	ck_assert_int_eq(mem_series_each(*s, pts_add, &all), 0);
	ck_assert_uint_eq(all.n, (size_t)n + 40);
	ck_assert_uint_eq(tail.n, all.n - (*s)->same);
	ck_assert_mem_eq(tail.v, all.v + (*s)->same, tail.n * sizeof(*tail.v));
	for (i = 0; i < (*s)->same; i++)
		mem_prefix_add(&pre, &all.v[i]);
	if ((*s)->same)
		ck_assert_mem_eq(&pre, &(*s)->pre, sizeof(pre));
	tp_free(all.v);
	tp_free(tail.v);
	return r;
}

/*
 * A copy's points are the same as the last marked copy of the model's up to the records that
 * one shared, and before the first allocation alive in its model whose category changed since:
 * the block made at event 1500 is alive (unknown) at the first copy and an activation by the
 * second, whose points are then new from block 1 (1,024) on, not from the 3,000 records shared;
 * with nothing changed, the third's are from the 5,000 shared (block 4); a model of the same
 * events that is another's is not followed.
 */
START_TEST(test_marks_go_on)
{
	struct mem_model *m = mem_model_new(), *o = mem_model_new();
	struct mem_mark *m1, *m2;
	struct mem_result *r;
	const struct mem_series *s;

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(o);
	mark_feed(m, 0, 3000, 1500, 3050);
	r = mark_result(m, 3000, -1, NULL, &s, &m1);	/* its 40 events stop before the free at 3,050 */
	ck_assert_uint_eq(s->same, 0);
	mem_result_free(r);
	mark_feed(m, 3000, 5000, 1500, 3050);
	r = mark_result(m, 5000, 3050, m1, &s, &m2);
	ck_assert_uint_eq(s->same, 1024);
	mem_result_free(r);
	mark_feed(m, 5000, 9000, 1500, 3050);
	r = mark_result(m, 9000, 3050, m2, &s, NULL);
	ck_assert_uint_eq(s->same, 4096);
	mem_result_free(r);
	mark_feed(o, 0, 9000, 1500, 3050);
	r = mark_result(o, 9000, 3050, m2, &s, NULL);
	ck_assert_uint_eq(s->same, 0);
	mem_result_free(r);
	mem_mark_free(m1);
	mem_mark_free(m2);
	mem_model_free(m);
	mem_model_free(o);
}
END_TEST

/* A spill that cannot be written fails the analysis with a message, and leaks nothing. */
START_TEST(test_spill_failure)
{
	char *path = tu_fixture("traces/hta_nccl_rel_ts.json.gz");
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	struct tp_errbuf err = { 0 };
	struct busy b = { 0 };
	struct trace_sink sink = { .string = synth_busy_string, .event = synth_spill_event, .payload = &b };
	const char *old = getenv("TMPDIR");
	char *keep = old ? strdup(old) : NULL;

	setenv("TMPDIR", "/nonexistent/trainscope", 1);
	b.tp = trace_parser_new(&trace_default_limits, &sink);
	b.an = analysis_new(synth_str_of, b.tp);
	analysis_set_run(b.an, 100);
	b.fail_ok = 1;
	ck_assert_int_ne(trace_parser_feed(b.tp, json, glen, &err), 0);
	ck_assert_int_eq(b.an_err.rc, TP_ERR_IO);
	ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "%s", b.an_err.msg);
	if (keep)
		setenv("TMPDIR", keep, 1);
	else
		unsetenv("TMPDIR");
	free(keep);
	analysis_free(b.an);
	trace_parser_free(b.tp);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/*
 * The passes make temporary files of their own (the runtime calls, the
 * steps' GPU spans, the host's busy intervals, the memory series...): each
 * in turn fails to be made, and the analysis fails with a message, whether
 * it was streaming or finishing, and leaks nothing (ASan), until every file
 * is made and the answer is the one made without failures.
 */
START_TEST(test_spill_failure_each_file)
{
	static const char *const files[] = { "traces/hta_v100_train_memory.json.gz", "traces/hta_nccl_rel_ts.json.gz" };
	static const size_t run[] = { 20000, 50 };
	char *path = tu_fixture(files[_i]);
	size_t len, glen;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	long n;

	ck_assert_ptr_nonnull(json);
	for (n = 0; n < 64; n++) {
		struct tp_errbuf err = { 0 };
		struct busy b = { .fail_ok = 1 };
		struct trace_sink sink = { .string = synth_busy_string, .event = synth_spill_event, .payload = &b };
		const struct an_result *r;
		int rc;

		b.tp = trace_parser_new(&trace_default_limits, &sink);
		b.an = analysis_new(synth_str_of, b.tp);
		analysis_set_run(b.an, run[_i]);
		spill_fail_after(n);
		rc = trace_parser_feed(b.tp, json, glen, &err);
		if (!rc)
			rc = trace_parser_finish(b.tp, &err);
		if (rc) {
			ck_assert_int_eq(b.an_err.rc, TP_ERR_IO);
			ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "%s", b.an_err.msg);
		} else if ((rc = analysis_finish(b.an, &r, &b.an_err))) {
			ck_assert_int_eq(rc, TP_ERR_IO);
			ck_assert_msg(strstr(b.an_err.msg, "temporary file"), "N=%ld: %s", n, b.an_err.msg);
		}
		spill_fail_after(-1);
		analysis_free(b.an);
		trace_parser_free(b.tp);
		if (!rc)
			break;
	}
	ck_assert_msg(n >= 6 && n < 64, "%s: %ld temporary files", files[_i], n);
	char *whole = analyse_dump(json, glen, 0), *spilled = analyse_dump(json, glen, run[_i]);
	ck_assert_str_eq(whole, spilled);
	free(whole);
	free(spilled);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/* ---- parts (analysis_merge()) ---- */

/* the synthetic trace's events, those from cut on moved on by gap, to whole and to part a (before cut) or b */
struct parting {
	struct analysis *whole, *a, *b;
	int64_t cut, gap;
	int pass;		/* 0: whole and a; 1: b */
};

static int parting_event(void *p, const struct tp_event *ev)
{
	struct parting *pt = p;
	struct tp_event e = *ev;
	struct tp_errbuf err = { 0 };
	int late = (e.have & TH_TS) && e.ts_ns >= pt->cut;

	if (late)
		e.ts_ns += pt->gap;
	if (!pt->pass) {
		ck_assert_int_eq(analysis_event(pt->whole, &e, &err), 0);
		if (!late)
			ck_assert_int_eq(analysis_event(pt->a, &e, &err), 0);
	} else if (late) {
		ck_assert_int_eq(analysis_event(pt->b, &e, &err), 0);
	}
	return 0;
}

static int point_into(void *arg, const struct mem_point *p)
{
	struct mem_point **v = arg;

	**v = *p;
	(*v)++;
	return 0;
}

/* the points of s, in an array the caller frees */
static struct mem_point *points_of(const struct mem_series *s)
{
	struct mem_point *v = calloc(s->n + 1, sizeof(*v)), *at = v;

	ck_assert_ptr_nonnull(v);
	ck_assert_int_eq(mem_series_each(s, point_into, &at), 0);
	ck_assert_uint_eq((size_t)(at - v), s->n);
	return v;
}

static void same_results(const struct an_result *x, const struct an_result *y)
{
	ck_assert_uint_eq(x->nsteps, y->nsteps);
	for (size_t i = 0; i < x->nsteps; i++)
		ck_assert_msg(!memcmp(&x->steps[i], &y->steps[i], sizeof(x->steps[i])), "step %zu (#%lld) differs", i,
			      (long long)x->steps[i].step);
	ck_assert_uint_eq(x->nops, y->nops);
	ck_assert(!memcmp(x->ops, y->ops, x->nops * sizeof(*x->ops)));
	ck_assert_uint_eq(x->nkernels, y->nkernels);
	ck_assert(!memcmp(x->kernels, y->kernels, x->nkernels * sizeof(*x->kernels)));
	ck_assert_uint_eq(x->nthreads, y->nthreads);
	ck_assert(!memcmp(x->thread_self_ns, y->thread_self_ns, x->nthreads * sizeof(*x->thread_self_ns)));
	ck_assert_uint_eq(x->ncolls, y->ncolls);
	struct an_coll *cx = synth_colls_of(x), *cy = synth_colls_of(y);
	ck_assert(!memcmp(cx, cy, x->ncolls * sizeof(*cx)));
	free(cx);
	free(cy);
	ck_assert_uint_eq(x->nmem_series, y->nmem_series);
	for (size_t i = 0; i < x->nmem_series; i++) {
		const struct mem_series *a = &x->mem_series[i], *b = &y->mem_series[i];
		ck_assert_str_eq(a->device, b->device);
		ck_assert_uint_eq(a->n, b->n);
		ck_assert_int_eq(a->baseline, b->baseline);
		ck_assert_uint_eq(a->ngroups, b->ngroups);
		ck_assert(!memcmp(a->groups, b->groups, a->ngroups * sizeof(*a->groups)));
		struct mem_point *pa = points_of(a), *pb = points_of(b);
		ck_assert(!memcmp(pa, pb, a->n * sizeof(*pa)));
		free(pa);
		free(pb);
	}
}

/*
 * A loop of 10 steps cut before step k, the steps from it moved on by a gap: part a before
 * the cut, part b (analysis_new_after(a)) from it, merged, give one analysis's result of them
 * all, to the byte: steps (b's first is no window's first: its number follows a's last), operator
 * and kernel tables, threads, collectives and the memory model (a leak made in a, alive in b).
 * Without the gap the parts touch (a's last step ends where b's first begins): refused. An
 * operator's External id in b below one's in a (the autograd thread's are) joins nothing: merged;
 * a kernel in b that no call launched, whose External id names an operator in a, joins them:
 * refused (analysis_follows() says as the merge does). The memory model: a thread whose
 * allocation a placed with no spans to go by, which b's spans put in backward, makes it again
 * from all the events; without that allocation, a's model goes on with b's events (an
 * allocation made in a and freed in b among them): the same points and peak either way.
 */
START_TEST(test_parts_merge_as_one)
{
	struct synth s = synth_healthy;
	size_t len;

	s.act_bytes = 1 << 20;
	s.leak_bytes = 4096;
	s.nccl_us = 500;
	s.sync_us = 200;
	char *base = synth_trace(&s, &len);
	/* and a thread whose allocation comes in a, its spans (backward) only in b */
	struct text t = { .p = base, .n = len - 2, .cap = len };
	ck_assert_str_eq(base + len - 2, "]}");
	size_t n0 = t.n;
	synth_mem_event(&t, 2, 1000000000 + s.step_us + 50, 0x30000000, 2 << 20, 2 << 20, 10000);
	size_t n1 = t.n;
	synth_span(&t, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, 2, 1000000000 + 6 * s.step_us + 5000,
	     50, "");
	/* and an allocation in step 0's first operator, freed in step 4's: the first place of a and of b, the
	 * same operator to a merge that did not move b's places past a's */
	synth_mem_event(&t, 1, 1000000000 + 3, 0x40000000, 3 << 20, 3 << 20, 10001);
	synth_mem_event(&t, 1, 1000000000 + 4 * s.step_us + 3, 0x40000000, -(3 << 20), 0, 10002);
	/* External ids: an operator's in a above one's in b (as the autograd thread's are): nothing joins them */
	synth_span(&t, "cpu_op", "tagged", 1, 1, 1000000000 + 10, 1, "\"External id\":500");
	synth_span(&t, "cpu_op", "tagged_bwd", 1, 2, 1000000000 + 6 * s.step_us + 5060, 1, "\"External id\":100");
	size_t nbase = t.n;
	synth_emit(&t, "]}");
	/* and a copy with a kernel in b that no call launched, whose External id is the operator's in a */
	struct text o = { .p = malloc(t.n + 512), .n = nbase, .cap = t.n + 512 };
	memcpy(o.p, t.p, nbase);
	synth_span(&o, "kernel", "orphan", 0, 7, 1000000000 + 7 * s.step_us + 10, 5, "\"External id\":500");
	synth_emit(&o, "]}");
	/* and a copy without the thread's allocation in a: a's memory model goes on with b's events */
	struct text q = { .p = malloc(t.n), .n = t.n - (n1 - n0), .cap = t.n };
	memcpy(q.p, t.p, n0);
	memcpy(q.p + n0, t.p + n1, t.n - n1);
	for (int round = 0; round < 4; round++) {
		int gap = round > 0, joined = round == 2;	/* joined: the merge must refuse */
		char *json = joined ? o.p : round == 3 ? q.p : t.p;
		len = joined ? o.n : round == 3 ? q.n : t.n;
		struct parting pt = { .cut = (1000000000LL + 4 * s.step_us) * 1000, .gap = gap ? 1000000000LL : 0 };
		struct trace_sink sink = { .string = synth_busy_string, .event = parting_event, .payload = &pt };
		struct trace_parser *p0 = trace_parser_new(&trace_default_limits, &sink), *p1;
		const struct an_result *rw, *ra, *rb;
		struct analysis *acc, *all;
		struct tp_errbuf err = { 0 };

		pt.whole = analysis_new(synth_str_of, p0);
		pt.a = analysis_new(synth_str_of, p0);
		analysis_set_part(pt.a);
		ck_assert_int_eq(trace_parser_feed(p0, (const uint8_t *)json, len, &err), 0);
		ck_assert_int_eq(trace_parser_finish(p0, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.whole, &rw, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.a, &ra, &err), 0);
		ck_assert_uint_eq(ra->nsteps, 4);
		acc = NULL;
		ck_assert_int_eq(analysis_absorb(&acc, pt.a, &err), 0);
		/* b: the same text parsed again (the same string ids), from the cut on */
		ck_assert_ptr_nonnull(pt.b = analysis_new_after(pt.a, &err));
		pt.pass = 1;
		p1 = trace_parser_new(&trace_default_limits, &sink);
		ck_assert_int_eq(trace_parser_feed(p1, (const uint8_t *)json, len, &err), 0);
		ck_assert_int_eq(trace_parser_finish(p1, &err), 0);
		ck_assert_int_eq(analysis_finish(pt.b, &rb, &err), 0);
		ck_assert_uint_eq(rb->nsteps, 6);
		int rc = analysis_merge(acc, pt.b, &all, &err);
		ck_assert_int_eq(analysis_follows(pt.a, pt.b), rc == 0);
		if (!gap || joined) {
			ck_assert_int_eq(rc, TP_ERR_UNSUPPORTED);
			ck_assert_str_eq(err.code, "parts_overlap");
		} else {
			ck_assert_msg(rc == 0, "%s", err.msg);
			ck_assert_uint_eq(rw->nsteps, 10);
			ck_assert_uint_gt(rw->ncolls, 0);
			ck_assert_uint_gt(rw->nmem_series, 0);
			same_results(rw, analysis_merged(all));
			/* round 1: a placed the thread's allocation outside backward, which b's spans put in it */
			ck_assert_int_eq(analysis_memory_went_on(all), round == 3);
			analysis_free(all);
		}
		analysis_free(acc);
		analysis_free(pt.b);
		analysis_free(pt.a);
		analysis_free(pt.whole);
		trace_parser_free(p1);
		trace_parser_free(p0);
	}
	free(q.p);
	free(o.p);
	free(t.p);
}
END_TEST

/* the synthetic trace's events in three parts, cut at cut[0] and cut[1], each part moved on by a gap more */
struct thirds {
	struct analysis *whole, *p[3];
	int64_t cut[2], gap;
	int pass;		/* 0: whole and p[0]; k: p[k] */
};

static int thirds_event(void *arg, const struct tp_event *ev)
{
	struct thirds *th = arg;
	struct tp_event e = *ev;
	struct tp_errbuf err = { 0 };
	int k = !(e.have & TH_TS) ? 0 : e.ts_ns >= th->cut[1] ? 2 : e.ts_ns >= th->cut[0] ? 1 : 0;

	if (e.have & TH_TS)
		e.ts_ns += k * th->gap;
	if (!th->pass)
		ck_assert_int_eq(analysis_event(th->whole, &e, &err), 0);
	if (k == th->pass)
		ck_assert_int_eq(analysis_event(th->p[k], &e, &err), 0);
	return 0;
}

/*
 * A rank in three parts, absorbed one by one and merged with the third: a thread's allocation in
 * the first, with no spans there to place it, its backward spans in the second; absorbing the
 * second makes the memory model again from both parts' events (the first's model placed the
 * allocation outside backward), and the merge with the third goes on from that one. The result
 * is one analysis's of it all, to the byte.
 */
START_TEST(test_parts_model_made_again)
{
	struct synth s = synth_healthy;
	size_t len;

	s.act_bytes = 1 << 20;
	s.leak_bytes = 4096;
	char *base = synth_trace(&s, &len);
	struct text t = { .p = base, .n = len - 2, .cap = len };
	ck_assert_str_eq(base + len - 2, "]}");
	synth_mem_event(&t, 2, 1000000000 + s.step_us + 50, 0x30000000, 2 << 20, 2 << 20, 10000);
	synth_span(&t, "cpu_op", "autograd::engine::evaluate_function: MmBackward0", 1, 2, 1000000000 + 5 * s.step_us + 5000,
	     50, "");
	synth_mem_event(&t, 1, 1000000000 + 3, 0x40000000, 3 << 20, 3 << 20, 10001);	/* freed in the second part */
	synth_mem_event(&t, 1, 1000000000 + 4 * s.step_us + 3, 0x40000000, -(3 << 20), 0, 10002);
	synth_emit(&t, "]}");
	struct thirds th = { .cut = { (1000000000LL + 4 * s.step_us) * 1000, (1000000000LL + 7 * s.step_us) * 1000 },
			     .gap = 1000000000LL };
	struct trace_sink sink = { .string = synth_busy_string, .event = thirds_event, .payload = &th };
	struct trace_parser *ps[3];
	const struct an_result *rw, *r;
	struct analysis *acc = NULL, *all;
	struct tp_errbuf err = { 0 };
	static const size_t nsteps[3] = { 4, 3, 3 };

	ps[0] = trace_parser_new(&trace_default_limits, &sink);
	th.whole = analysis_new(synth_str_of, ps[0]);
	th.p[0] = analysis_new(synth_str_of, ps[0]);
	analysis_set_part(th.p[0]);
	for (int k = 0; k < 3; k++) {
		th.pass = k;
		if (k) {
			ck_assert_ptr_nonnull(th.p[k] = analysis_new_after(th.p[k - 1], &err));
			ps[k] = trace_parser_new(&trace_default_limits, &sink);	/* the same text: the same string ids */
		}
		ck_assert_int_eq(trace_parser_feed(ps[k], (const uint8_t *)t.p, t.n, &err), 0);
		ck_assert_int_eq(trace_parser_finish(ps[k], &err), 0);
		if (!k)
			ck_assert_int_eq(analysis_finish(th.whole, &rw, &err), 0);
		ck_assert_int_eq(analysis_finish(th.p[k], &r, &err), 0);
		ck_assert_uint_eq(r->nsteps, nsteps[k]);
		if (k < 2) {
			ck_assert_msg(analysis_absorb(&acc, th.p[k], &err) == 0, "part %d: %s", k, err.msg);
			/* the first starts a model; the second's thread makes it again */
			ck_assert_int_eq(analysis_memory_went_on(acc), k == 0);
		}
	}
	ck_assert_msg(analysis_merge(acc, th.p[2], &all, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(analysis_memory_went_on(all), 1);
	ck_assert_uint_eq(rw->nsteps, 10);
	ck_assert_uint_gt(rw->nmem_series, 0);
	same_results(rw, analysis_merged(all));
	analysis_free(all);
	analysis_free(acc);
	for (int k = 0; k < 3; k++) {
		analysis_free(th.p[k]);
		trace_parser_free(ps[k]);
	}
	analysis_free(th.whole);
	free(t.p);
}
END_TEST

/* runs_fork() faults its copy's pages in first (tp_prefault): the bytes already there stay */
START_TEST(test_prefault_keeps_bytes)
{
	size_t n = (3u << 20) + 123;
	unsigned char *b = malloc(n);

	ck_assert_ptr_nonnull(b);
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 2654435761u >> 13);
	tp_prefault(b, n);
	tp_prefault(b + 77, n - 77 - 4099);	/* neither end on a page */
	tp_prefault(b + 5, 100);		/* inside one page: nothing */
	tp_prefault(NULL, 0);
	for (size_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 2654435761u >> 13))
			ck_abort_msg("byte %zu changed", i);
	/* and pages never written before are there to write */
	unsigned char *c = malloc(n);
	ck_assert_ptr_nonnull(c);
	tp_prefault(c, n);
	memset(c, 0xa5, n);
	ck_assert_int_eq(c[n - 1], 0xa5);
	free(c);
	free(b);
}
END_TEST

/* the test case TC, tagged slow, in S */
static TCase *add_case(Suite *s, TCase *tc)
{
	/* every fixture three times over: too slow for valgrind's pass (CK_EXCLUDE_TAGS=slow) */
	tcase_set_timeout(tc, 300);
	tcase_set_tags(tc, "slow");
	suite_add_tcase(s, tc);
	return tc;
}

/* the loops over every fixture in cases of their own, so that ctest runs them side by side */
Suite *suite_analysis_spill(void)
{
	Suite *s = suite_create("analysis_spill");
	const int nfiles = (int)(sizeof(spill_files) / sizeof(spill_files[0]));
	TCase *tc = add_case(s, tcase_create("spill"));

	tcase_add_test(tc, test_parts_merge_as_one);
	tcase_add_test(tc, test_parts_model_made_again);
	tcase_add_loop_test(tc, test_spill_failure_each_file, 0, 2);
	tcase_add_test(tc, test_model_bytes);
	tcase_add_test(tc, test_marks_go_on);
	tcase_add_test(tc, test_spill_failure);
	tcase_add_test(tc, test_prefault_keeps_bytes);
	tcase_add_loop_test(add_case(s, tcase_create("spilled_runs")), test_spilled_runs_answer_alike, 0, nfiles);
	tcase_add_loop_test(add_case(s, tcase_create("forks")), test_forks_answer_alike, 0, nfiles);
	tcase_add_loop_test(add_case(s, tcase_create("peaks")), test_peak_kept_as_walked, 0, nfiles);
	return s;
}
