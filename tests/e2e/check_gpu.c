/*
 * check_gpu.c: the runs recorded on a real GPU (tests/fixtures/gpu/, made by
 * tests/gpu/record.py on an H200 with PyTorch 2.11; README there) through
 * the real server: operator and kernel tables against PyTorch's own
 * prof.key_averages() saved beside each cycle, every symptom run's finding
 * (and none on the healthy runs), the compare verdicts, and the ten cycles of
 * the QLoRA schedule stitched into one run.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	ck_assert_int_eq(tu_server_start(&srv, NULL), 0);
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

static json_t *get(const char *path)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%s: %ld: %s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* GET /api/v1/runs/gpu-<scenario>/<what> */
static json_t *get_run(const char *scenario, const char *what)
{
	char path[200];

	snprintf(path, sizeof(path), "/api/v1/runs/gpu-%s/%s", scenario, what);
	return get(path);
}

static char *fixture_dir(const char *scenario)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "tests/fixtures/gpu/%s", scenario);
	return tu_source_path(rel);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

/* uploads every trace, memory export and snapshot of the scenario as run "gpu-<scenario>" (rank by the
 * rankN. prefix); returns how many */
static int upload_scenario(const char *scenario)
{
	char *dir = fixture_dir(scenario), run[64], path[512], name[300];
	struct dirent *d;
	DIR *dp = opendir(dir);
	int n = 0;

	ck_assert_msg(dp != NULL, "no %s", dir);
	snprintf(run, sizeof(run), "gpu-%s", scenario);
	while ((d = readdir(dp))) {
		if (!ends_with(d->d_name, ".pt.trace.json.gz") && !ends_with(d->d_name, ".memory.raw.json.gz") &&
		    !ends_with(d->d_name, ".snapshot.pickle"))
			continue;
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		uint8_t *b = tu_read_file(path, &len);
		ck_assert_ptr_nonnull(b);
		int rank = !strncmp(d->d_name, "rank1.", 6);
		snprintf(name, sizeof(name), "%s&rank=%d", d->d_name, rank);
		tu_upload(&srv, run, name, b, len);
		free(b);
		n++;
	}
	closedir(dp);
	free(dir);
	return n;
}

/* PyTorch's key_averages rows of every cycle of the scenario, summed by (name, device) */
struct kavg {
	char *name;
	int cuda;
	long long calls;
	double self_cpu_us, self_dev_us;
};

static struct kavg *load_kavg(const char *scenario, size_t *n)
{
	char *dir = fixture_dir(scenario), path[512];
	struct kavg *v = NULL;
	struct dirent *d;
	size_t cap = 0;
	DIR *dp = opendir(dir);

	*n = 0;
	ck_assert_ptr_nonnull(dp);
	while ((d = readdir(dp))) {
		if (!ends_with(d->d_name, ".key_averages.json"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		json_error_t e;
		json_t *j = json_load_file(path, 0, &e), *row;
		size_t i, k;
		ck_assert_msg(j != NULL, "%s: %s", path, e.text);
		json_array_foreach(json_object_get(j, "rows"), i, row) {
			const char *nm = json_string_value(json_object_get(row, "name"));
			int cuda = strstr(json_string_value(json_object_get(row, "device_type")), "CUDA") != NULL;
			for (k = 0; k < *n; k++)
				if (v[k].cuda == cuda && !strcmp(v[k].name, nm))
					break;
			if (k == *n) {
				if (*n == cap) {
					cap = cap ? 2 * cap : 256;
					v = realloc(v, cap * sizeof(*v));
					ck_assert_ptr_nonnull(v);
				}
				memset(&v[k], 0, sizeof(v[k]));
				v[k].name = strdup(nm);
				ck_assert_ptr_nonnull(v[k].name);
				v[k].cuda = cuda;
				(*n)++;
			}
			v[k].calls += json_integer_value(json_object_get(row, "calls"));
			v[k].self_cpu_us += json_number_value(json_object_get(row, "self_cpu_us"));
			v[k].self_dev_us += json_number_value(json_object_get(row, "self_device_us"));
		}
		json_decref(j);
	}
	closedir(dp);
	free(dir);
	return v;
}

static json_t *find_named(json_t *rows, const char *name)
{
	size_t i;
	json_t *r;

	json_array_foreach(rows, i, r)
		if (!strcmp(json_string_value(json_object_get(r, "name")), name))
			return r;
	return NULL;
}

static int is_cpu_name(const struct kavg *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i].cuda && !strcmp(v[i].name, name))
			return 1;
	return 0;
}

/*
 * /ops and /kernels against key_averages(): every operator's calls equal and
 * its self time within 1 ns a call (the trace's times are us with three
 * decimals; PyTorch sums them as doubles), every kernel's calls and time the
 * same. PyTorch's table also has rows that are not operators or kernels, by
 * design left out of ours: "ProfilerStep*" (the steps, our /steps), Kineto's
 * "Command Buffer Full" overhead marks, the GPU mirrors of CPU annotations,
 * and Memcpy/Memset (the breakdown's memcpy and memset).
 */
static void check_tables(const char *scenario)
{
	size_t n, i, ops_seen = 0, kernels_seen = 0;
	struct kavg *v;
	json_t *ops, *kern, *r;

	upload_scenario(scenario);
	v = load_kavg(scenario, &n);
	ck_assert_uint_gt(n, 20);
	ops = get_run(scenario, "ops?limit=100000");
	kern = get_run(scenario, "kernels?limit=100000");
	for (i = 0; i < n; i++) {
		if (!strcmp(v[i].name, "ProfilerStep*") || !strcmp(v[i].name, "Command Buffer Full"))
			continue;
		if (!v[i].cuda) {
			r = find_named(json_object_get(ops, "ops"), v[i].name);
			ck_assert_msg(r != NULL, "%s: operator %s missing", scenario, v[i].name);
			ck_assert_msg(json_integer_value(json_object_get(r, "calls")) == v[i].calls,
				      "%s: %s calls %lld, PyTorch %lld", scenario, v[i].name,
				      json_integer_value(json_object_get(r, "calls")), v[i].calls);
			double ours = (double)json_integer_value(json_object_get(r, "self_ns")) / 1000;
			ck_assert_msg(fabs(ours - v[i].self_cpu_us) <= 0.001 * (double)v[i].calls + 0.01,
				      "%s: %s self %.3f us, PyTorch %.3f", scenario, v[i].name, ours, v[i].self_cpu_us);
			ops_seen++;
		} else if ((r = find_named(json_object_get(kern, "kernels"), v[i].name))) {
			ck_assert_int_eq(json_integer_value(json_object_get(r, "calls")), v[i].calls);
			double ours = (double)json_integer_value(json_object_get(r, "total_ns")) / 1000;
			ck_assert_msg(fabs(ours - v[i].self_dev_us) <= 0.001 * (double)v[i].calls + 0.01,
				      "%s: %s %.3f us, PyTorch %.3f", scenario, v[i].name, ours, v[i].self_dev_us);
			kernels_seen++;
		} else {
			/* a copy, a memset, or an annotation's GPU mirror (Triton's launchers name their kernels too) */
			ck_assert_msg(!strncmp(v[i].name, "Memcpy ", 7) || !strncmp(v[i].name, "Memset ", 7) ||
					      is_cpu_name(v, n, v[i].name),
				      "%s: kernel %s missing", scenario, v[i].name);
		}
	}
	/* and nothing of ours that PyTorch does not list */
	json_array_foreach(json_object_get(ops, "ops"), i, r)
		ck_assert_msg(is_cpu_name(v, n, json_string_value(json_object_get(r, "name"))), "%s: %s only ours",
			      scenario, json_string_value(json_object_get(r, "name")));
	ck_assert_uint_eq(ops_seen, json_array_size(json_object_get(ops, "ops")));
	ck_assert_uint_eq(kernels_seen, json_array_size(json_object_get(kern, "kernels")));
	json_decref(ops);
	json_decref(kern);
	for (i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

START_TEST(test_tables_healthy)
{
	check_tables("healthy");
	check_tables("sync");
	check_tables("dataloader");
}
END_TEST

START_TEST(test_tables_compiled)
{
	check_tables("compiled");
	check_tables("cudagraphs");
}
END_TEST

/*
 * The train run's memory timeline: PyTorch's export covers the first cycle alone (0.017 s of
 * 6.5 s), the snapshot's trace the last four, trace inference all ten, so /memory answers from
 * the traces (store/memory.c's pick_source): a point in each cycle's window (from the previous
 * cycle's end to its own: the host allocates ahead of the GPU step), and the one peak of that
 * series in the run list, /memory (the card) and /memory/peak.
 */
static void train_memory_covers_cycles(void)
{
	json_t *tl = get_run("train", "timeline"), *cycles = json_object_get(tl, "cycles"), *c;
	json_t *m = get_run("train", "memory?points=0"), *t = json_object_get(m, "t_ns");
	json_int_t from = INT64_MIN;
	size_t i, k = 0, n = json_array_size(t);

	ck_assert_str_eq(json_string_value(json_object_get(m, "source")), "trace");
	ck_assert_uint_eq(json_array_size(cycles), 10);
	json_array_foreach(cycles, i, c) {
		json_int_t end = json_integer_value(json_object_get(c, "end_ns")), inside = 0;
		for (; k < n && json_integer_value(json_array_get(t, k)) <= end; k++)
			inside += json_integer_value(json_array_get(t, k)) > from;
		ck_assert_msg(inside > 0, "cycle %zu (to %lld ns) has no memory point", i, (long long)end);
		from = end;
	}
	json_decref(tl);
	json_int_t card = json_integer_value(json_object_get(json_object_get(m, "peak"), "bytes"));
	json_decref(m);
	m = get_run("train", "memory/peak");
	ck_assert_str_eq(json_string_value(json_object_get(m, "source")), "trace");
	ck_assert_int_eq(json_integer_value(json_object_get(m, "bytes")), card);
	json_decref(m);
	m = get("/api/v1/runs");
	json_t *run = NULL;
	json_array_foreach(json_object_get(m, "runs"), i, c)
		if (!strcmp(json_string_value(json_object_get(c, "name")), "gpu-train"))
			run = c;
	ck_assert_ptr_nonnull(run);
	ck_assert_int_eq(json_integer_value(json_object_get(run, "peak_allocated_bytes")), card);
	/* the highest of every series: the export's first cycle peaked at 2,233,570,304 */
	ck_assert_int_eq(card, 2301727744LL);
	json_decref(m);
}

/* ten cycles of schedule(wait=7, warmup=2, active=1), with stacks and shapes: one run, ten steps, ten cycles */
START_TEST(test_train_cycles)
{
	check_tables("train");
	json_t *j = get_run("train", "timeline");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "steps_total")), 10);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "cycles")), 10);
	/* every cycle's step lasts 23.8 ms, flat: no drift (it was a cycle_drift of +105% when the
	 * first cycle was the start, and 46.8 ms then 94.9 to 95.9 ms before queued(), below) */
	ck_assert_uint_eq(json_array_size(json_object_get(j, "findings")), 0);
	json_decref(j);
	/*
	 * Each step is a profiling window's first: it starts when the GPU work the warm-up steps
	 * queued ends (analysis.c's queued()), as torch-tb-profiler has it. Step 19 in tb_dump.py
	 * (reference/peers): 23,820.29 us, kernel 23,153.45, memcpy 116.70, memset 36.90, runtime
	 * 513.24, GPU utilization 97.2%; counted from the host's start it was 94.9 ms at 28.9%, and
	 * the diagnosis said low_gpu_utilization and cpu_bound of a loop the GPU held back.
	 */
	j = get_run("train", "steps");
	json_t *s19 = json_array_get(json_object_get(j, "steps"), 1), *bd = json_object_get(s19, "breakdown_ns");
	ck_assert_int_eq(json_integer_value(json_object_get(s19, "step")), 19);
	ck_assert_int_eq(json_integer_value(json_object_get(s19, "dur_ns")), 23820293);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "kernel")), 23153457);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "memcpy")), 116702);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "memset")), 36895);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "runtime")), 513239);
	json_decref(j);
	j = get_run("train", "diagnosis");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "findings")), 0);
	json_decref(j);
	/* the snapshot's allocator state, as Python's pickle reads it (tests/fixtures/gpu/README.md):
	 * 42 segments, 2,453,667,840 bytes reserved, 588,812,800 in active blocks */
	j = get_run("train", "memory/segments?device=cuda:0");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "segments")), 42);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "reserved_bytes")), 2453667840LL);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "allocated_bytes")), 588812800LL);
	json_decref(j);
	j = get_run("train", "steps");
	json_t *s;
	size_t i;
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 10);
	json_array_foreach(json_object_get(j, "steps"), i, s)
		ck_assert_int_eq(json_integer_value(json_object_get(s, "step")), 9 + 10 * (json_int_t)i);
	json_decref(j);
	train_memory_covers_cycles();
}
END_TEST

/* a memory timeline's categories at each point (points=0: all of them) */
struct mtl {
	size_t n;
	json_int_t *t, (*cat)[8];
};

static const char *const agree_cats[8] = { "parameter", "optimizer_state", "input", "temporary",
					   "activation", "gradient", "autograd_detail", "unknown" };

static void mtl_read(const char *run, const char *source, struct mtl *m)
{
	char path[200];
	json_t *j, *cats;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/memory?device=cuda:0&points=0", run);
	j = get(path);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), source);
	m->n = json_array_size(json_object_get(j, "t_ns"));
	ck_assert_uint_gt(m->n, 1);
	m->t = calloc(m->n, sizeof(*m->t));
	m->cat = calloc(m->n, sizeof(*m->cat));
	cats = json_object_get(j, "categories");
	for (size_t i = 0; i < m->n; i++) {
		m->t[i] = json_integer_value(json_array_get(json_object_get(j, "t_ns"), i));
		for (int c = 0; c < 8; c++)
			m->cat[i][c] = json_integer_value(json_array_get(json_object_get(cats, agree_cats[c]), i));
	}
	json_decref(j);
}

/* the step function's point at t: the last at or before it (-1: none) */
static long mtl_at(const struct mtl *m, json_int_t t)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->t[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/*
 * The first train cycle's trace-inferred categories against PyTorch's own export_memory_timeline
 * of the same cycle, as tests/gpu/agreement.py measures them: the share of PyTorch's byte-time
 * that ours puts in the same category, over the time both cover (96.4% with the model's
 * parameter bytes, 84,029,440, in the run's metadata).
 */
START_TEST(test_train_memory_agreement)
{
	char *dir = fixture_dir("train"), path[512];
	const char *meta = "{\"metadata\":{\"param_bytes\":84029440}}";
	struct tu_resp r;
	struct mtl o, p;
	double same[8] = { 0 }, theirs[8] = { 0 }, s = 0, all = 0;
	size_t len;
	uint8_t *b;

	snprintf(path, sizeof(path), "%s/train.1795786446227183191.pt.trace.json.gz", dir);
	ck_assert_ptr_nonnull(b = tu_read_file(path, &len));
	tu_upload(&srv, "agree-trace", "train.pt.trace.json.gz", b, len);
	free(b);
	snprintf(path, sizeof(path), "%s/train.memory.raw.json.gz", dir);
	ck_assert_ptr_nonnull(b = tu_read_file(path, &len));
	tu_upload(&srv, "agree-pytorch", "train.memory.raw.json.gz", b, len);
	free(b);
	free(dir);
	ck_assert_int_eq(tu_http(&srv, "PATCH", "/api/v1/runs/agree-trace", meta, strlen(meta), NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	mtl_read("agree-trace", "trace", &o);
	mtl_read("agree-pytorch", "pytorch", &p);
	json_int_t start = o.t[0] > p.t[0] ? o.t[0] : p.t[0], end = o.t[o.n - 1] < p.t[p.n - 1] ? o.t[o.n - 1] : p.t[p.n - 1];
	ck_assert_int_gt(end, start);
	/* every time either changes, within both */
	json_int_t *edges = calloc(o.n + p.n, sizeof(*edges));
	size_t ne = 0, i = 0, k = 0;
	while (i < o.n || k < p.n) {
		json_int_t t = k == p.n || (i < o.n && o.t[i] <= p.t[k]) ? o.t[i++] : p.t[k++];
		if (t >= start && t <= end && (!ne || edges[ne - 1] != t))
			edges[ne++] = t;
	}
	for (size_t e = 0; e + 1 < ne; e++) {
		long a = mtl_at(&o, edges[e]), z = mtl_at(&p, edges[e]);
		double dt = (double)(edges[e + 1] - edges[e]);
		for (int c = 0; c < 8; c++) {
			double ours = a >= 0 ? (double)o.cat[a][c] : 0, pt = z >= 0 ? (double)p.cat[z][c] : 0;
			same[c] += (ours < pt ? ours : pt) * dt;
			theirs[c] += pt * dt;
		}
	}
	for (int c = 0; c < 8; c++) {
		s += same[c];
		all += theirs[c];
	}
	ck_assert_double_gt(all, 0);
	ck_assert_msg(s / all >= 0.90, "agreement %.1f%%", 100 * s / all);
	/* the categories that carry most of it: activation (the logits the loop holds), optimizer state
	 * (twice the parameters: AdamW's two moments), unknown (the last step's logits, from before the trace) */
	for (int c = 0; c < 8; c++)
		if (!strcmp(agree_cats[c], "activation") || !strcmp(agree_cats[c], "optimizer_state") ||
		    !strcmp(agree_cats[c], "unknown"))
			ck_assert_msg(same[c] >= 0.95 * theirs[c], "%s: %.1f%%", agree_cats[c], 100 * same[c] / theirs[c]);
	/* what was alive at the peak: the memory from before the trace split as the timeline splits it
	 * (parameters up to param_bytes, then optimizer state, then unknown), the same bytes at that instant
	 * (this read crashed the server once the run had param_bytes: its groups were packed wrong) */
	json_t *pk = get("/api/v1/runs/agree-trace/memory/peak?device=cuda:0"), *g;
	long at = mtl_at(&o, json_integer_value(json_object_get(pk, "t_ns")));
	json_int_t pre[8] = { 0 };
	size_t gi;
	ck_assert_int_ge(at, 0);
	json_array_foreach(json_object_get(pk, "groups"), gi, g)
		if (json_is_null(json_object_get(g, "op")))
			for (int c = 0; c < 8; c++)
				if (!strcmp(json_string_value(json_object_get(g, "category")), agree_cats[c]))
					pre[c] += json_integer_value(json_object_get(g, "bytes"));
	ck_assert_int_gt(pre[0], 0);
	ck_assert_int_le(pre[0], 84029440);
	ck_assert_int_le(pre[1], 2 * 84029440);
	ck_assert_int_eq(pre[0], o.cat[at][0]);
	json_decref(pk);
	free(edges);
	free(o.t);
	free(o.cat);
	free(p.t);
	free(p.cat);
	/* the export beside the trace of its own cycle: both reach that cycle, so the export answers */
	dir = fixture_dir("train");
	snprintf(path, sizeof(path), "%s/train.memory.raw.json.gz", dir);
	free(dir);
	ck_assert_ptr_nonnull(b = tu_read_file(path, &len));
	tu_upload(&srv, "agree-trace", "train.memory.raw.json.gz", b, len);
	free(b);
	json_t *j = get("/api/v1/runs/agree-trace/memory/peak");
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "pytorch");
	json_decref(j);
}
END_TEST

/* the finding ids of a run's answer at what (a diagnosis), comma-joined in order */
static void findings_of(const char *scenario, const char *what, char *out, size_t len)
{
	json_t *j = get_run(scenario, what), *f;
	size_t i, o = 0;

	out[0] = 0;
	json_array_foreach(json_object_get(j, "findings"), i, f)
		o += (size_t)snprintf(out + o, len - o, "%s%s", o ? "," : "", json_string_value(json_object_get(f, "id")));
	json_decref(j);
}

static void findings(const char *scenario, char *out, size_t len)
{
	findings_of(scenario, "diagnosis", out, len);
}

static json_t *finding(const char *scenario, const char *id)
{
	json_t *j = get_run(scenario, "diagnosis"), *f, *out = NULL;
	size_t i;

	json_array_foreach(json_object_get(j, "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			out = json_incref(json_object_get(f, "evidence"));
	json_decref(j);
	ck_assert_msg(out != NULL, "%s: no %s", scenario, id);
	return out;
}

/*
 * Each symptom run fires its finding and the healthy runs none. The healthy
 * loop calls aten::item 106 times a step (AdamW reads each parameter's step
 * count, a CPU tensor) and Kineto synchronizes after the last step: neither
 * waits for the GPU inside a step, so gpu_sync stays quiet. The data loader's
 * steps are what torch-tb-profiler makes them (41.6, 44.8, 47.2, 50.3 and
 * 52.6 ms, 49.0% GPU utilization) and the loop's own clock agrees that they
 * grew (dataloader.meta.json: 44.7, 45.5, 50.2, 53.0 ms for steps 4 to 7):
 * low utilization and the drift are true of it as well. (Its first step
 * counted the warm-up steps' queued GPU work as its own before queued() in
 * analysis.c, which hid both.)
 */
START_TEST(test_findings)
{
	static const char *const quiet[] = { "healthy", "healthy_b", "half_batch", "ckpt_on", "ckpt_off",
					     "compiled", "cudagraphs" };
	static const struct { const char *run, *ids; } fire[] = {
		{ "dataloader", "dataloader,low_gpu_utilization,step_drift" },
		{ "sync", "gpu_sync" },
		{ "growth", "memory_growth" },
		{ "tiny", "low_gpu_utilization,cpu_bound,tiny_kernels" },
	};
	char got[512];
	size_t i;

	for (i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		upload_scenario(quiet[i]);
		findings(quiet[i], got, sizeof(got));
		ck_assert_msg(!got[0], "%s: %s", quiet[i], got);
	}
	for (i = 0; i < sizeof(fire) / sizeof(fire[0]); i++) {
		upload_scenario(fire[i].run);
		findings(fire[i].run, got, sizeof(got));
		ck_assert_str_eq(got, fire[i].ids);
	}
	/* .item() and a .cpu() copy each step: two waits a step, over five steps */
	json_t *e = finding("sync", "gpu_sync");
	ck_assert_int_eq(json_integer_value(json_object_get(e, "sync_calls")), 10);
	ck_assert_int_eq(json_integer_value(json_object_get(e, "dtoh_copies")), 10);
	json_decref(e);
	/* each step keeps its logits: 32 x 256 x 8192 float32 = 256 MiB */
	e = finding("growth", "memory_growth");
	ck_assert_int_eq(json_integer_value(json_object_get(e, "per_step_bytes")), 32LL * 256 * 8192 * 4);
	json_decref(e);
	e = finding("dataloader", "dataloader");
	ck_assert_double_gt(json_number_value(json_object_get(e, "dataloader_pct")), 30);
	json_decref(e);
}
END_TEST

static json_t *compare(const char *base, const char *target)
{
	char path[200];

	snprintf(path, sizeof(path), "/api/v1/compare?base=gpu-%s&target=gpu-%s", base, target);
	return get(path);
}

static json_int_t step_int(json_t *j, const char *key)
{
	return json_integer_value(json_object_get(json_object_get(j, "step_time"), key));
}

/*
 * two runs of the same loop: no change; a data loader that doubles the step: a regression;
 * the rlhf-canary change (batch halved) and checkpointing. Each run's first step (78 ms
 * against 23.8: it runs behind the warm-up steps' GPU work) is left out of the test: with
 * it in, the data loader's +105% was "no_change" (p = 0.22).
 */
START_TEST(test_compare)
{
	json_t *j;

	upload_scenario("healthy");
	upload_scenario("healthy_b");
	upload_scenario("dataloader");
	upload_scenario("half_batch");
	upload_scenario("ckpt_off");
	upload_scenario("ckpt_on");
	j = compare("healthy", "healthy_b");
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "no_change");
	ck_assert_int_eq(step_int(j, "base_steps"), 4);
	ck_assert_int_eq(step_int(j, "base_left_out"), 1);
	ck_assert_int_eq(step_int(j, "target_left_out"), 1);
	/* the four steps kept are the steady ones: within 1% of their median */
	ck_assert_int_lt(llabs((long long)step_int(j, "base_ns") - (long long)step_int(j, "base_median_ns")),
			 step_int(j, "base_median_ns") / 100);
	json_decref(j);
	j = compare("healthy", "dataloader");
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "regression");
	ck_assert(json_is_true(json_object_get(json_object_get(j, "step_time"), "significant")));
	ck_assert_double_gt(json_number_value(json_object_get(json_object_get(j, "step_time"), "delta_pct")), 50);
	ck_assert(strstr(json_string_value(json_array_get(json_object_get(j, "reasons"), 0)), "dataloader time"));
	json_decref(j);
	/* half the batch: shorter steps, less memory */
	j = compare("healthy", "half_batch");
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "improvement");
	ck_assert_double_lt(json_number_value(json_object_get(json_object_get(j, "step_time"), "delta_pct")), -30);
	ck_assert_int_lt(json_integer_value(json_object_get(json_object_get(j, "step_time"), "target_median_ns")),
			 json_integer_value(json_object_get(json_object_get(j, "step_time"), "base_median_ns")));
	json_decref(j);
	/* checkpointing trades time for memory: activations down, the median step up */
	j = compare("ckpt_off", "ckpt_on");
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "regression");	/* in time */
	ck_assert_double_lt(json_number_value(json_object_get(json_object_get(j, "memory"), "delta_pct")), -20);
	ck_assert_int_gt(json_integer_value(json_object_get(json_object_get(j, "step_time"), "target_median_ns")),
			 json_integer_value(json_object_get(json_object_get(j, "step_time"), "base_median_ns")));
	json_decref(j);
}
END_TEST

/* two ranks over gloo (DDP on one GPU): both ranks' five steps, gloo's collectives matched across them */
START_TEST(test_dist)
{
	ck_assert_int_eq(upload_scenario("dist"), 2);
	json_t *j = get_run("dist", "ranks");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "ranks")), 2);
	json_decref(j);
	j = get_run("dist", "distributed");
	json_t *r;
	size_t i;
	ck_assert_uint_eq(json_array_size(json_object_get(j, "ranks")), 2);
	json_array_foreach(json_object_get(j, "ranks"), i, r)
		ck_assert_uint_eq(json_array_size(json_object_get(r, "steps")), 5);
	/*
	 * gloo runs each all_reduce on a host thread (a gloo:all_reduce span, no kernel): 3 a step
	 * on each rank, 15 matched. Rank 1 sleeps 30 ms a step before its backward, so it arrives
	 * last at the first two of each step's three, and rank 0 waits there about 28 ms each
	 * (at the third, the two arrive within microseconds: either may be last).
	 */
	json_t *sg = json_object_get(j, "stragglers"), *by = json_object_get(sg, "by_rank");
	ck_assert_int_eq(json_integer_value(json_object_get(sg, "matched")), 15);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(sg, "instances"), 0), "kind")),
			 "all_reduce");
	ck_assert_int_ge(json_integer_value(json_object_get(json_array_get(by, 1), "last_arrivals")), 10);
	ck_assert_int_gt(json_integer_value(json_object_get(json_array_get(by, 1), "wait_caused_ns")), 250000000);
	ck_assert_int_lt(json_integer_value(json_object_get(json_array_get(by, 0), "wait_caused_ns")), 5000000);
	json_array_foreach(json_object_get(j, "collectives"), i, r) {
		ck_assert_int_eq(json_integer_value(json_object_get(r, "calls")), 15);
		ck_assert_int_eq(json_integer_value(json_object_get(r, "kernels")), 0);
	}
	ck_assert_uint_eq(i, 2);
	json_decref(j);
	/*
	 * Rank 0 spends most of each step in gloo:all_reduce waiting for rank 1: communication in
	 * the breakdown, as torch-tb-profiler has it (tb_dump.py, step 4: Communication 52,928.46 us,
	 * Runtime 511.51, Kernel 23,254.89, step 81,345.60), not CPU time; so the diagnosis says
	 * exposed communication, not cpu_bound (what it said when gloo's wait counted as cpu).
	 */
	j = get_run("dist", "steps?rank=0");
	json_t *bd = json_object_get(json_array_get(json_object_get(j, "steps"), 0), "breakdown_ns");
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "steps"), 0), "dur_ns")),
			 81345599);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "communication")), 52928469);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "runtime")), 511514);
	ck_assert_int_eq(json_integer_value(json_object_get(bd, "kernel")), 23254888);
	json_decref(j);
	char got[512];
	findings_of("dist", "diagnosis?rank=0", got, sizeof(got));
	ck_assert_ptr_nonnull(strstr(got, "exposed_communication"));
	ck_assert_ptr_null(strstr(got, "cpu_bound"));
}
END_TEST

Suite *suite_gpu(void)
{
	Suite *s = suite_create("gpu");
	TCase *tc = tcase_create("gpu");

	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, start, stop);
	tcase_add_test(tc, test_tables_healthy);
	tcase_add_test(tc, test_tables_compiled);
	tcase_add_test(tc, test_train_cycles);
	tcase_add_test(tc, test_train_memory_agreement);
	tcase_add_test(tc, test_findings);
	tcase_add_test(tc, test_compare);
	tcase_add_test(tc, test_dist);
	suite_add_tcase(s, tc);
	return s;
}
