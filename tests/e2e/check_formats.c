/*
 * check_formats.c: every sample in shared/fixtures/formats/ (other profilers'
 * text reports) uploaded to one run of the real server: each is detected from
 * its content whatever its name, stored as a ready artifact of its kind with
 * as many rows as the file has (counted here from the file itself), text that
 * is none of them answers 415 naming what is taken, and a truncated table 400
 * naming its line, keeping only the failed upload's raw bytes. Then the
 * key_averages table as /ops (its cells read here from the file apart), the
 * compare of two such tables, and rlhf-canary metrics.json: /canary, the
 * notebook's quick-diagnosis findings and a baseline/slow compare, each
 * figure computed here from tests/formats/'s files.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void start(void)
{
	if (tu_server_start(&srv, NULL))
		abort();
}

static void stop(void)
{
	tu_server_cleanup(&srv);
}

static uint8_t *sample(const char *name, size_t *len)
{
	char rel[128], *path;
	uint8_t *d;

	snprintf(rel, sizeof(rel), "formats/%s", name);
	path = tu_fixture(rel);
	d = tu_read_file(path, len);
	ck_assert_msg(d != NULL, "cannot read %s", path);
	free(path);
	return d;
}

/* Lines of d that satisfy what the format counts as a row. */
static long count_lines(const uint8_t *d, size_t len, int (*is_row)(const char *, size_t))
{
	long n = 0;

	for (size_t a = 0; a < len;) {
		const uint8_t *nl = memchr(d + a, '\n', len - a);
		size_t b = nl ? (size_t)(nl - d) : len;
		n += is_row((const char *)d + a, b - a);
		a = b + 1;
	}
	return n;
}

static int nonempty(const char *s, size_t n)
{
	return n > 0 && s[0] != '\r';
}

static int smi_row(const char *s, size_t n)
{
	return n > 0 && s[0] >= '0' && s[0] <= '9';
}

static int section(const char *s, size_t n)
{
	return n > 19 && !memcmp(s, "Profile stats for: ", 19);
}

/* Upload under a name that says nothing of the format; returns the artifact. */
static json_t *upload(const char *run, const char *file, long status, const char *kind, json_int_t events)
{
	size_t len;
	uint8_t *d = sample(file, &len);
	struct tu_resp r;
	json_t *j, *full;

	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/formats/artifacts?name=upload.bin", d, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s: status %ld: %.300s", file, r.status, r.body);
	full = tu_json(&r);
	tu_resp_free(&r);
	j = json_incref(json_object_get(full, "artifact"));
	json_decref(full);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), kind);
	ck_assert_str_eq(json_string_value(json_object_get(j, "status")), "ready");
	ck_assert_msg(json_integer_value(json_object_get(j, "events")) == events, "%s: %lld rows, expected %lld", file,
		      (long long)json_integer_value(json_object_get(j, "events")), (long long)events);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes")), (json_int_t)len);
	free(d);
	(void)run;
	return j;
}

START_TEST(test_every_sample)
{
	size_t len;
	uint8_t *d;
	long n, actions;
	struct tu_resp r;
	json_t *j;

	/* SimpleProfiler: the rows between '|' but the header and Total */
	d = sample("lightning_simple_pl1.2_hannah.txt", &len);
	n = count_lines(d, len, nonempty);	/* header, Total and dash lines: 4 of them */
	free(d);
	json_decref(upload("formats", "lightning_simple_pl1.2_hannah.txt", 201, "lightning_report", n - 4));
	actions = n - 4;
	d = sample("lightning_advanced_pl1.4_doc_robustness.txt", &len);
	n = count_lines(d, len, section);
	free(d);
	json_decref(upload("formats", "lightning_advanced_pl1.4_doc_robustness.txt", 201, "lightning_report", n));
	actions += n;
	d = sample("lightning_advanced_pl2.2_diffusion_policy.txt", &len);
	n = count_lines(d, len, section);
	free(d);
	json_decref(upload("formats", "lightning_advanced_pl2.2_diffusion_policy.txt", 201, "lightning_report", n));
	actions += n;
	/* key_averages: all lines but 3 dash lines, the header and 2 footers */
	d = sample("key_averages_cuda_kernelheim.txt", &len);
	n = count_lines(d, len, nonempty);
	free(d);
	json_decref(upload("formats", "key_averages_cuda_kernelheim.txt", 201, "key_averages", n - 6));
	d = sample("export_stacks_gpt2_profile.txt", &len);
	n = count_lines(d, len, nonempty);
	free(d);
	json_decref(upload("formats", "export_stacks_gpt2_profile.txt", 201, "stacks", n));
	d = sample("nvidia_smi_noheader_plato.csv", &len);
	n = count_lines(d, len, smi_row);
	free(d);
	json_decref(upload("formats", "nvidia_smi_noheader_plato.csv", 201, "gpu_log", n));
	d = sample("nvidia_smi_repeated_header_slowfast.csv", &len);
	n = count_lines(d, len, smi_row);
	free(d);
	json_decref(upload("formats", "nvidia_smi_repeated_header_slowfast.csv", 201, "gpu_log", n));

	/* the run holds all seven, ready */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/formats", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_int_eq(json_array_size(json_object_get(j, "artifacts")), 7);
	json_decref(j);

	/* the three Lightning reports' actions, largest total first (computed from the files apart):
	 * the 2.2 report (two fits appended) has run_training_epoch at 57.732 s and 46.728 s, then
	 * train_dataloader_next at 39.732 s and 28.570 s; fifth the 1.2 table's run_training_epoch */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/formats/actions", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	json_t *acts = json_object_get(j, "actions");
	ck_assert_int_eq(json_array_size(acts), actions);
	json_t *top = json_array_get(acts, 0), *second = json_array_get(acts, 4);
	ck_assert_str_eq(json_string_value(json_object_get(top, "action")), "run_training_epoch");
	ck_assert_int_eq(json_integer_value(json_object_get(top, "total_ns")), 57732000000LL);
	ck_assert(json_is_null(json_object_get(top, "calls")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(acts, 1), "total_ns")), 46728000000LL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(acts, 3), "total_ns")), 28570000000LL);
	ck_assert_str_eq(json_string_value(json_object_get(second, "action")), "run_training_epoch");
	ck_assert_int_eq(json_integer_value(json_object_get(second, "total_ns")), 21692000000LL);
	ck_assert_int_eq(json_integer_value(json_object_get(second, "calls")), 1);
	ck_assert_double_eq_tol(json_real_value(json_object_get(second, "share")), 73.73, 1e-9);
	json_decref(j);
	/* the stacks: the top frames by total (nn.Module:_ResNet and resnet.py's _forward_impl are in
	 * stacks weighing 113,992 us each), and the conv2d leaf's self time, 85,379 us */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/formats/stacks?top=100", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	acts = json_object_get(j, "frames");
	ck_assert_int_eq(json_array_size(acts), 37);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(acts, 0), "total")), 113992);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(acts, 1), "total")), 113992);
	{
		json_int_t conv = -1, self = 0;
		for (size_t i = 0; i < json_array_size(acts); i++) {
			json_t *x = json_array_get(acts, i);
			self += json_integer_value(json_object_get(x, "self"));
			if (!strcmp(json_string_value(json_object_get(x, "frame")),
				    "<built-in_method_conv2d_of_type_object_at_0x7f9e8897a760>"))
				conv = json_integer_value(json_object_get(x, "self"));
		}
		ck_assert_int_eq(conv, 85379);
		ck_assert_int_eq(self, 122353);	/* every stack's weight, once, at its leaf */
	}
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/formats/stacks?top=2", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_int_eq(json_array_size(json_object_get(j, "frames")), 2);
	json_decref(j);
	/* the two nvidia-smi logs (no index column: both GPU 0): utilization.gpu over their 1,963
	 * samples, 6,543 % in all; memory.used (plato only) in bytes, 2 to 20,137 MiB */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/formats/gpu", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_int_eq(json_array_size(json_object_get(j, "gpus")), 1);
	{
		json_t *g = json_array_get(json_object_get(j, "gpus"), 0), *cols = json_object_get(g, "columns");
		int seen = 0;
		ck_assert_int_eq(json_integer_value(json_object_get(g, "index")), 0);
		for (size_t i = 0; i < json_array_size(cols); i++) {
			json_t *c = json_array_get(cols, i);
			const char *nm = json_string_value(json_object_get(c, "name"));
			if (!strcmp(nm, "utilization.gpu")) {
				ck_assert_int_eq(json_array_size(json_object_get(c, "values")), 1963);
				ck_assert_double_eq_tol(json_real_value(json_object_get(c, "mean")), 6543.0 / 1963, 1e-9);
				ck_assert_str_eq(json_string_value(json_object_get(c, "unit")), "%");
				seen++;
			}
			if (!strcmp(nm, "memory.used")) {
				ck_assert_double_eq(json_real_value(json_object_get(c, "max")), 21115174912.0);
				ck_assert_double_eq(json_real_value(json_object_get(c, "min")), 2097152.0);
				ck_assert_str_eq(json_string_value(json_object_get(c, "unit")), "B");
				seen++;
			}
		}
		ck_assert_int_eq(seen, 2);
	}
	json_decref(j);
	/* no report in a run: 404 */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/prose/actions", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 404);
	tu_resp_free(&r);
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/prose/gpu", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 404);
	tu_resp_free(&r);
}
END_TEST

static json_t *refused(const char *run, const char *query, const void *body, size_t len, long status, const char *code)
{
	struct tu_resp r;
	char path[256];
	json_t *j;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?%s", run, query);
	ck_assert_int_eq(tu_http(&srv, "POST", path, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "status %ld, expected %ld: %.300s", r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_str_eq(tu_error_code(j), code);
	return j;
}

static const char *message(json_t *j)
{
	return json_string_value(json_object_get(json_object_get(j, "error"), "message"));
}

START_TEST(test_refused)
{
	static const char prose[] = "Epoch 1: loss 0.25, accuracy 91 %\nEpoch 2: loss 0.21\n";
	size_t len, cut = 0;
	uint8_t *d;
	json_t *j;
	struct tu_resp r;

	j = refused("prose", "name=gpu_usage.csv", prose, sizeof(prose) - 1, 415, "unsupported_format");
	ck_assert_ptr_nonnull(strstr(message(j), "nvidia-smi"));
	ck_assert_ptr_nonnull(strstr(message(j), "key_averages"));
	json_decref(j);

	/* a key_averages table cut after its fifth line */
	d = sample("key_averages_cuda_kernelheim.txt", &len);
	for (int nl = 0; cut < len && nl < 5; cut++)
		nl += d[cut] == '\n';
	j = refused("cut", "name=key_averages.txt", d, cut, 400, "invalid_table");
	ck_assert_ptr_nonnull(strstr(message(j), "line 6"));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "artifact"), "status")), "error");
	json_decref(j);
	/* a row with a column missing */
	{
		char *t = malloc(len);
		memcpy(t, d, len);
		char *row = strstr(t, "aten::to");
		char *nl = strchr(row, '\n');
		memset(nl - 20, ' ', 20);	/* blank out "# of Calls" and the cell before it */
		memmove(nl - 20, nl, (size_t)(t + len - nl));
		j = refused("missing", "name=k.txt", t, len - 20, 400, "invalid_table");
		ck_assert_ptr_nonnull(strstr(message(j), "line 7"));
		json_decref(j);
		free(t);
	}
	/* the kind given must be the kind found */
	j = refused("hint", "name=k.txt&kind=stacks", d, len, 400, "kind_mismatch");
	json_decref(j);
	free(d);
	/* nothing of the refused runs has rows */
	ck_assert_int_eq(tu_http(&srv, "GET", "/api/v1/runs/cut/steps", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"steps\":[]"));
	tu_resp_free(&r);
}
END_TEST

/* ---- key_averages as the operator table ---- */

static json_t *get_json(const char *path, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "GET %s: %ld: %.300s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_ptr_nonnull(j);
	return j;
}

static void post(const char *run, const char *name, const void *d, size_t len, long status)
{
	char path[256];
	struct tu_resp r;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=%s", run, name);
	ck_assert_int_eq(tu_http(&srv, "POST", path, d, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s: %ld: %.300s", path, r.status, r.body);
	tu_resp_free(&r);
}

/* A printed time ("12.979us", "1.763ms", "2.549s") in ns, read here apart from the server's parser. */
static long long printed_ns(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	ck_assert_msg(end != s, "not a time: %s", s);
	if (!strcmp(end, "us"))
		return llround(v * 1e3);
	if (!strcmp(end, "ms"))
		return llround(v * 1e6);
	ck_assert_msg(!strcmp(end, "s"), "not a time: %s", s);
	return llround(v * 1e9);
}

/* The kernelheim table's columns, in the order its header prints them (checked below). */
enum { KA_NAME, KA_SELF_CPU_PCT, KA_SELF_CPU, KA_CPU_TOTAL_PCT, KA_CPU_TOTAL, KA_CPU_AVG, KA_SELF_CUDA, KA_SELF_CUDA_PCT,
       KA_CUDA_TOTAL, KA_CUDA_AVG, KA_CALLS, KA_NCOLS };

struct ka_file {
	char rows[16][KA_NCOLS][64];	/* the data rows' cells (names have no spaces in this file) */
	int nrows;
	long long self_cpu_total, self_cuda_total;	/* the footers */
};

static void read_kernelheim(const uint8_t *d, size_t len, struct ka_file *f)
{
	char *text = strndup((const char *)d, len), *save = NULL, *line;
	int dashes = 0;

	memset(f, 0, sizeof(*f));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "-----", 5)) {
			dashes++;
			continue;
		}
		if (dashes == 1)
			ck_assert_ptr_nonnull(strstr(line, "Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time"
							   " avg     Self CUDA   Self CUDA %    CUDA total  CUDA time avg    # of Calls"));
		if (dashes == 2) {
			ck_assert_int_lt(f->nrows, 16);
			ck_assert_int_eq(sscanf(line, "%63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s",
						f->rows[f->nrows][0], f->rows[f->nrows][1], f->rows[f->nrows][2],
						f->rows[f->nrows][3], f->rows[f->nrows][4], f->rows[f->nrows][5],
						f->rows[f->nrows][6], f->rows[f->nrows][7], f->rows[f->nrows][8],
						f->rows[f->nrows][9], f->rows[f->nrows][10]), KA_NCOLS);
			f->nrows++;
		}
		if (!strncmp(line, "Self CPU time total: ", 21))
			f->self_cpu_total = printed_ns(line + 21);
		if (!strncmp(line, "Self CUDA time total: ", 22))
			f->self_cuda_total = printed_ns(line + 22);
	}
	free(text);
}

static json_t *op_named(json_t *ops, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(ops, i, o)
		if (!strcmp(json_string_value(json_object_get(o, "name")), name))
			return o;
	ck_abort_msg("no op %s", name);
	return NULL;
}

START_TEST(test_key_averages_ops)
{
	size_t len;
	uint8_t *d = sample("key_averages_cuda_kernelheim.txt", &len);
	struct ka_file f;
	long long self = 0, calls = 0, cuda = 0, best = -1;
	int ncuda = 0, top = 0;
	json_t *j, *o;

	read_kernelheim(d, len, &f);
	ck_assert_int_eq(f.nrows, 7);
	for (int i = 0; i < f.nrows; i++) {
		long long s = printed_ns(f.rows[i][KA_SELF_CPU]), c = printed_ns(f.rows[i][KA_SELF_CUDA]);
		self += s, cuda += c, calls += atoll(f.rows[i][KA_CALLS]);
		ncuda += c != 0 || printed_ns(f.rows[i][KA_CUDA_TOTAL]) != 0;
		if (s > best)
			best = s, top = i;
	}
	post("keyavg", "key_averages.txt", d, len, 201);

	/* CPU: every row, Self CPU and CPU total to the ns as printed; the largest first */
	j = get_json("/api/v1/runs/keyavg/ops", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "key_averages");
	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), f.nrows);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "ops"), 0), "name")),
			 f.rows[top][KA_NAME]);
	/* the table's top row, aten::square: 12.979us self, 130.642us total, 1 call */
	ck_assert_str_eq(f.rows[0][KA_NAME], "aten::square");
	o = op_named(json_object_get(j, "ops"), f.rows[0][KA_NAME]);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_ns")), printed_ns(f.rows[0][KA_SELF_CPU]));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_ns")), 12979);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "total_ns")), printed_ns(f.rows[0][KA_CPU_TOTAL]));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "calls")), atoll(f.rows[0][KA_CALLS]));
	ck_assert(json_is_null(json_object_get(o, "mem_bytes")));	/* no profile_memory columns */
	/* the totals: the rows' sums, and the footers as printed (Self CPU sums to 1.720ms as rounded) */
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "self_ns")), self);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "calls")), calls);
	ck_assert_int_eq(llabs(self - f.self_cpu_total) < 500, 1);
	o = json_object_get(j, "key_averages");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_cpu_time_total_ns")), f.self_cpu_total);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_cpu_time_total_ns")), 1720000);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_device_time_total_ns")), f.self_cuda_total);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_device_time_total_ns")), 1763000);
	ck_assert_str_eq(json_string_value(json_object_get(o, "device")), "CUDA");
	json_decref(j);

	/* GPU: the rows with CUDA time, Self CUDA and CUDA total; their self times sum to the footer */
	j = get_json("/api/v1/runs/keyavg/ops?device=gpu", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), ncuda);
	o = op_named(json_object_get(j, "ops"), f.rows[0][KA_NAME]);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_ns")), printed_ns(f.rows[0][KA_SELF_CUDA]));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "total_ns")), printed_ns(f.rows[0][KA_CUDA_TOTAL]));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "self_ns")), cuda);
	ck_assert_int_eq(cuda, f.self_cuda_total);
	json_decref(j);

	/* a table with memory columns (tests/formats/key_averages_memory.txt): in bytes, 1024-based as torch
	 * prints them; on the GPU the rows with CUDA time or CUDA memory (aten::empty allocates, runs nothing) */
	{
		char *path = tu_source_path("tests/formats/key_averages_memory.txt");
		size_t ml;
		uint8_t *md = tu_read_file(path, &ml);
		ck_assert_ptr_nonnull(md);
		ck_assert_ptr_nonnull(strstr((char *)md, "aten::mm        10.13%       1.204ms        12.40%       1.474ms"));
		ck_assert_ptr_nonnull(strstr((char *)md, "aten::empty         0.84%      99.870us         0.84%      99.870us"
						     "       1.248us       0.000us         0.00%       0.000us       0.000us"
						     "     256.00 Kb     256.00 Kb      48.00 Mb      48.00 Mb            80"));
		post("kamem", "key_averages.txt", md, ml, 201);
		free(md);
		free(path);
	}
	j = get_json("/api/v1/runs/kamem/ops", 200);
	o = op_named(json_object_get(j, "ops"), "aten::mm");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_ns")), printed_ns("1.204ms"));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "total_ns")), printed_ns("1.474ms"));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "mem_bytes")), 0);
	o = op_named(json_object_get(j, "ops"), "aten::empty");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "mem_bytes")), 256 * 1024);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_mem_bytes")), 256 * 1024);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "key_averages"), "self_cpu_time_total_ns")),
			 printed_ns("11.886ms"));
	json_decref(j);
	j = get_json("/api/v1/runs/kamem/ops?device=gpu", 200);
	ck_assert_int_eq(json_array_size(json_object_get(j, "ops")), 4);	/* not cudaLaunchKernel */
	o = op_named(json_object_get(j, "ops"), "aten::mm");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_ns")), printed_ns("2.311ms"));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "mem_bytes")), 40 * 1024 * 1024);
	o = op_named(json_object_get(j, "ops"), "aten::empty");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "self_mem_bytes")), 48 * 1024 * 1024);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "total"), "self_ns")), printed_ns("3.769ms"));
	json_decref(j);

	/* a trace's run says its source */
	tu_upload_fixture(&srv, "katrace", "traces/hta_alexnet.json.gz");
	j = get_json("/api/v1/runs/katrace/ops?limit=1", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "source")), "trace");
	ck_assert_ptr_null(json_object_get(j, "key_averages"));
	json_decref(j);

	/* compare: the same table with aten::pow's Self CPU 100 us longer (81.962us -> 181.962us) */
	{
		char *t = malloc(len + 1), *cell;
		memcpy(t, d, len);
		t[len] = 0;
		ck_assert_ptr_nonnull(cell = strstr(t, "      81.962us"));
		memcpy(cell, "     181.962us", 14);	/* same width: the columns stay where the dash line says */
		post("keyavg2", "key_averages.txt", t, len, 201);
		free(t);
	}
	j = get_json("/api/v1/compare?base=keyavg&target=keyavg2", 200);
	o = json_array_get(json_object_get(j, "ops"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(o, "name")), "aten::pow");
	ck_assert_str_eq(json_string_value(json_object_get(o, "status")), "changed");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "base_ns_per_step")), printed_ns("81.962us"));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "delta_ns_per_step")),
			 printed_ns("181.962us") - printed_ns("81.962us"));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "ops_counts"), "changed")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "ops_counts"), "unchanged")), f.nrows - 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "ops_source"), "target")), "key_averages");
	{
		int said = 0;
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(j, "reasons"), i, x)
			said |= strstr(json_string_value(x), "the one that grew most, aten::pow +100.0 us") != NULL;
		ck_assert_msg(said, "%s", json_dumps(json_object_get(j, "reasons"), 0));
	}
	/* no steps and no memory in either table: the verdict cannot be decided */
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "not_comparable");
	json_decref(j);
	free(d);
}
END_TEST

/* ---- rlhf-canary metrics.json ---- */

static json_t *canary_file(const char *name, uint8_t **d, size_t *len)
{
	char rel[64], *path;
	json_t *j;

	snprintf(rel, sizeof(rel), "tests/formats/%s", name);
	path = tu_source_path(rel);
	*d = tu_read_file(path, len);
	ck_assert_ptr_nonnull(*d);
	ck_assert_ptr_nonnull(j = json_load_file(path, 0, NULL));
	free(path);
	return j;
}

/* a number of the file at a path of keys ("perf", "step_time", "mean", NULL) */
static double at(json_t *j, ...)
{
	va_list ap;
	const char *k;

	va_start(ap, j);
	while ((k = va_arg(ap, const char *)))
		j = json_object_get(j, k);
	va_end(ap);
	ck_assert_msg(json_is_number(j), "not a number");
	return json_number_value(j);
}

static json_t *finding(json_t *diag, const char *id)
{
	json_t *f;
	size_t i;

	json_array_foreach(json_object_get(diag, "findings"), i, f)
		if (!strcmp(json_string_value(json_object_get(f, "id")), id))
			return json_object_get(f, "evidence");
	return NULL;
}

/* the copy share the canary's notebook computes over top_cuda_ops, Memcpy kernels counted too */
static double copy_share(json_t *m)
{
	double copy = 0, all = 0;
	json_t *op;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(m, "profiler"), "top_cuda_ops"), i, op) {
		const char *n = json_string_value(json_object_get(op, "name"));
		double ms = json_number_value(json_object_get(op, "self_cuda_time_ms"));
		all += ms;
		if (strstr(n, "copy") || strstr(n, "Memcpy"))
			copy += ms;
	}
	return copy / all;
}

/* A SimpleProfiler row's fields: "action | mean | calls | total | percentage |" (generation 1.2). */
struct lrow {
	char action[128];
	double share;
};

static size_t lightning_rows(const uint8_t *d, size_t len, struct lrow *out, size_t max)
{
	size_t n = 0;

	for (size_t a = 0; a < len && n < max;) {
		const uint8_t *nl = memchr(d + a, '\n', len - a);
		size_t b = nl ? (size_t)(nl - d) : len, k = 0;
		char line[512], *f[6], *save = NULL, *t;
		snprintf(line, sizeof(line), "%.*s", (int)(b - a), (const char *)d + a);
		a = b + 1;
		for (t = strtok_r(line, "|", &save); t && k < 6; t = strtok_r(NULL, "|", &save))
			f[k++] = t;
		if (k < 5 || !strchr(f[4], '.'))	/* the header, the Total row (100 %) */
			continue;
		sscanf(f[0], " %127s", out[n].action);
		out[n].share = strtod(f[4], NULL);
		n++;
	}
	return n;
}

/* The guides' rules on a Lightning report and an nvidia-smi log, figures read from the files;
 * a log uploaded again after it grew counts each sample once. */
START_TEST(test_report_findings)
{
	size_t len, slen, n, i;
	uint8_t *d = sample("lightning_simple_pl1.2_hannah.txt", &len), *smi = sample("nvidia_smi_noheader_plato.csv", &slen);
	struct lrow rows[64];
	const struct lrow *opt = NULL, *val = NULL;
	double sum = 0, fullest = 0;
	long low = 0, samples = 0;
	json_t *j, *o;

	n = lightning_rows(d, len, rows, 64);
	ck_assert_uint_eq(n, 33);
	for (i = 0; i < n; i++) {
		if (strstr(rows[i].action, "optimizer_step") && (!opt || rows[i].share > opt->share))
			opt = &rows[i];
		if (strstr(rows[i].action, "validation") && (!val || rows[i].share > val->share))
			val = &rows[i];
	}
	ck_assert(opt && val && opt->share > 20 && val->share > 10);
	post("guided", "profile.txt", d, len, 201);
	/* the log: utilization.gpu the second column, memory.used and memory.free the fourth and fifth */
	for (size_t a = 0; a < slen;) {
		const uint8_t *nl = memchr(smi + a, '\n', slen - a);
		size_t b = nl ? (size_t)(nl - smi) : slen;
		char line[256];
		double u, used, freeb;
		snprintf(line, sizeof(line), "%.*s", (int)(b - a), (const char *)smi + a);
		a = b + 1;
		if (sscanf(line, "%*[^,], %lf %%, %*[^,], %lf MiB, %lf MiB", &u, &used, &freeb) != 3)
			continue;
		sum += u;
		samples++;
		low += u < 80;
		if (used / (used + freeb) > fullest)
			fullest = used / (used + freeb);
	}
	ck_assert_int_eq(samples, 1923);
	post("guided", "gpu.csv", smi, slen, 201);
	/* the same log grown by a row, shipped again (watch does so): its samples count once */
	{
		const char extra[] = "2026/04/25 16:20:40.000, 100 %, 0 %, 2 MiB, 20146 MiB, 27, 11.00 W\n";
		uint8_t *grown = malloc(slen + sizeof(extra));
		ck_assert_ptr_nonnull(grown);
		memcpy(grown, smi, slen);
		memcpy(grown + slen, extra, sizeof(extra) - 1);
		post("guided", "gpu.csv", grown, slen + sizeof(extra) - 1, 201);
		free(grown);
	}
	j = get_json("/api/v1/runs/guided/diagnosis", 200);
	ck_assert_ptr_nonnull(o = finding(j, "lightning_optimizer_step"));
	ck_assert_str_eq(json_string_value(json_object_get(o, "action")), opt->action);
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "share_pct")), opt->share,
				0.005);
	ck_assert_ptr_nonnull(o = finding(j, "lightning_validation"));
	ck_assert_str_eq(json_string_value(json_object_get(o, "action")), val->action);
	/* 1.2's hooks are named on_*: none runs for a second a call here */
	ck_assert_ptr_null(finding(j, "lightning_slow_callback"));
	ck_assert_ptr_nonnull(o = finding(j, "gpu_log_low_utilization"));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "samples")), samples + 1);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "samples_under_threshold")), low);
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "mean_utilization_pct")), (sum + 100) / (samples + 1), 1e-9);
	ck_assert_ptr_nonnull(o = finding(j, "gpu_log_memory_full"));
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "used_pct")), fullest * 100,
				1e-9);
	ck_assert(fullest >= 0.95);
	json_decref(j);
	free(d);
	free(smi);
}
END_TEST

/* Replace the first occurrence of from in d (len) with to: a copy, malloc'd. */
static uint8_t *edited(const uint8_t *d, size_t len, const char *from, const char *to, size_t *out_len)
{
	size_t a = 0, f = strlen(from), t = strlen(to);
	uint8_t *o;

	while (a + f <= len && memcmp(d + a, from, f))
		a++;
	ck_assert_msg(a + f <= len, "no %s", from);
	o = malloc(len - f + t);
	ck_assert_ptr_nonnull(o);
	memcpy(o, d, a);
	memcpy(o + a, to, t);
	memcpy(o + a + t, d + a + f, len - a - f);
	*out_len = len - f + t;
	return o;
}

static json_t *row_named(json_t *list, const char *name)
{
	json_t *r;
	size_t i;

	json_array_foreach(list, i, r)
		if (!strcmp(json_string_value(json_object_get(r, "name")), name))
			return r;
	return NULL;
}

/* Compare for the other profilers' kinds against the same kind: a Lightning report whose
 * optimizer step took longer, and folded stacks where one stack weighs more (copies edited
 * here from the fixtures): what grew, by how much, first. */
START_TEST(test_compare_reports)
{
	size_t len, elen, slen, eslen;
	uint8_t *d = sample("lightning_simple_pl1.2_hannah.txt", &len), *s = sample("export_stacks_gpt2_profile.txt", &slen);
	/* optimizer_step_and_closure_0's total 8.7402 s printed as 10.7402 s: 2 s more */
	uint8_t *e = edited(d, len, "|  8.7402 ", "|  10.7402", &elen), *es;
	const char *nl = memchr(s, '\n', slen), *sp;
	char line[4096], grown[4200];
	long long w;
	json_t *j, *r;

	post("lbase", "profile.txt", d, len, 201);
	post("lslow", "profile.txt", e, elen, 201);
	j = get_json("/api/v1/compare?base=lbase&target=lslow", 200);
	r = json_array_get(json_object_get(j, "actions"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(r, "name")), "optimizer_step_and_closure_0");
	ck_assert_int_eq(json_integer_value(json_object_get(r, "delta_total_ns")), 2000000000);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "base_total_ns")), 8740200000);
	ck_assert_str_eq(json_string_value(json_object_get(r, "status")), "changed");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "actions"), 1), "status")),
			 "unchanged");
	ck_assert(json_is_null(json_object_get(j, "frames")));
	json_decref(j);

	/* the stacks: the first line's weight doubled; its leaf frame's self and every frame's total on it grow */
	ck_assert_ptr_nonnull(nl);
	snprintf(line, sizeof(line), "%.*s", (int)((const uint8_t *)nl - s), (const char *)s);
	ck_assert_ptr_nonnull(sp = strrchr(line, ' '));
	w = atoll(sp + 1);
	ck_assert_int_gt(w, 0);
	snprintf(grown, sizeof(grown), "%.*s %lld", (int)(sp - line), line, 2 * w);
	es = edited(s, slen, line, grown, &eslen);
	post("sbase", "stacks.txt", s, slen, 201);
	post("sslow", "stacks.txt", es, eslen, 201);
	j = get_json("/api/v1/compare?base=sbase&target=sslow&limit=100000", 200);
	ck_assert(json_is_array(json_object_get(j, "frames")));
	r = json_array_get(json_object_get(j, "frames"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(r, "delta_total")), w);
	/* every frame of that stack grew by w in total, no other frame changed */
	{
		char copy[4096], *save = NULL, *f;
		size_t nframes = 0, changed = 0, i;
		snprintf(copy, sizeof(copy), "%.*s", (int)(sp - line), line);
		for (f = strtok_r(copy, ";", &save); f; f = strtok_r(NULL, ";", &save), nframes++) {
			json_t *row = row_named(json_object_get(j, "frames"), f);
			ck_assert_msg(row != NULL, "frame %s", f);
			ck_assert_int_eq(json_integer_value(json_object_get(row, "delta_total")), w);
		}
		json_array_foreach(json_object_get(j, "frames"), i, r)
			changed += strcmp(json_string_value(json_object_get(r, "status")), "unchanged") != 0;
		ck_assert_uint_eq(changed, nframes);
	}
	json_decref(j);
	free(d);
	free(e);
	free(s);
	free(es);
}
END_TEST

/* AdvancedProfiler: each action's cProfile rows, the first 20 as printed. Every table of the
 * file is read here (action, rows, a row's figures) and checked against /actions. */
START_TEST(test_advanced_functions)
{
	size_t len, nact = 0, checked = 0;
	uint8_t *d = sample("lightning_advanced_pl1.4_doc_robustness.txt", &len);
	char action[1024] = "", line[1024];
	long rows = -1;
	json_t *j, *acts, *a, *f;
	size_t i;

	post("advanced", "profile.txt", d, len, 201);
	j = get_json("/api/v1/runs/advanced/actions", 200);
	acts = json_object_get(j, "actions");
	for (size_t at = 0; at < len;) {
		const uint8_t *nl = memchr(d + at, '\n', len - at);
		size_t b = nl ? (size_t)(nl - d) : len;
		long long calls, prim;
		double tot, per, cum;
		char loc[512];
		int got;
		snprintf(line, sizeof(line), "%.*s", (int)(b - at), (const char *)d + at);
		at = b + 1;
		if (!strncmp(line, "Profile stats for: ", 19)) {
			snprintf(action, sizeof(action), "%s", line + 19);
			rows = -1;
			nact++;
			continue;
		}
		if (strstr(line, "ncalls") && strstr(line, "cumtime")) {
			rows = 0;
			continue;
		}
		if (rows < 0 || (got = sscanf(line, " %lld/%lld %lf %lf %lf %*f %511[^\n]", &calls, &prim, &tot, &per, &cum, loc)) < 1)
			continue;
		if (got != 6) {
			prim = calls;
			if (sscanf(line, " %lld %lf %lf %lf %*f %511[^\n]", &calls, &tot, &per, &cum, loc) != 5) {
				rows = -1;
				continue;
			}
		}
		if (rows >= 20) {
			rows++;
			continue;
		}
		/* its action in the answer (its name is unique in this file), then the row at the same place */
		a = NULL;
		json_array_foreach(acts, i, a)
			if (!strcmp(json_string_value(json_object_get(a, "action")), action))
				break;
		ck_assert_msg(a != NULL && i < json_array_size(acts), "action %s", action);
		f = json_array_get(json_object_get(a, "functions"), (size_t)rows);
		ck_assert_msg(f != NULL, "%s: row %ld", action, rows);
		ck_assert_str_eq(json_string_value(json_object_get(f, "location")), loc);
		ck_assert_int_eq(json_integer_value(json_object_get(f, "ncalls")), calls);
		ck_assert_int_eq(json_integer_value(json_object_get(f, "primitive_calls")), prim);
		ck_assert_int_eq(json_integer_value(json_object_get(f, "cumtime_ns")), llround(cum * 1e9));
		ck_assert_int_eq(json_integer_value(json_object_get(f, "tottime_ns")), llround(tot * 1e9));
		rows++;
		checked++;
	}
	ck_assert_uint_eq(nact, 35);
	ck_assert_uint_gt(checked, 300);
	/* no action has more than 20 rows, and one that printed more has exactly 20 */
	json_array_foreach(acts, i, a)
		ck_assert_uint_le(json_array_size(json_object_get(a, "functions")), 20);
	json_decref(j);
	free(d);
}
END_TEST

/* nvidia-smi writes local time: a log written at UTC-5 over the V100 trace's steps (2022-11-30
 * 04:48:07 UTC) has its steps shifted by -5 h onto its clock; ?utc_offset_min gives the offset */
START_TEST(test_gpu_log_steps)
{
	char *path = tu_fixture("traces/hta_v100_train_memory.json.gz"), log[4096];
	size_t len, n = 0, inside = 0, k;
	uint8_t *d = tu_read_file(path, &len);
	const long long t0 = 1669765685000LL;	/* 2022-11-29 23:48:05.000 local = 04:48:05 UTC, in ms */
	json_t *j, *st, *steps, *s;

	ck_assert_ptr_nonnull(d);
	post("smi_steps", "trace.json.gz&rank=0", d, len, 201);	/* (its distributedInfo says rank 1) */
	n += (size_t)snprintf(log + n, sizeof(log) - n, "timestamp, index, utilization.gpu [%%], memory.used [MiB], memory.free [MiB]\n");
	for (int i = 0; i < 8; i++) {	/* 23:48:05.000 to 23:48:08.500, every 500 ms */
		long long ms = t0 + i * 500LL;
		n += (size_t)snprintf(log + n, sizeof(log) - n, "2022/11/29 23:48:%02lld.%03lld, 0, %d %%, 1000 MiB, 9000 MiB\n",
				      (ms / 1000) % 60, ms % 1000, 50 + i);
	}
	post("smi_steps", "gpu.csv&rank=0", log, n, 201);
	j = get_json("/api/v1/runs/smi_steps/steps", 200);
	steps = json_object_get(j, "steps");
	json_array_foreach(steps, k, s) {
		long long at = (long long)(json_integer_value(json_object_get(s, "start_ns")) / 1000000) - 5 * 3600 * 1000LL;
		inside += at >= t0 && at <= t0 + 3500;
	}
	ck_assert_msg(inside > 0, "%zu steps, first at %lld", json_array_size(steps),
		      (long long)json_integer_value(json_object_get(json_array_get(steps, 0), "start_ns")));
	st = get_json("/api/v1/runs/smi_steps/gpu", 200);
	s = json_object_get(st, "steps");
	ck_assert_str_eq(json_string_value(json_object_get(s, "clock")), "shifted");
	ck_assert_int_eq(json_integer_value(json_object_get(s, "offset_ns")), -5 * 3600 * 1000000000LL);
	ck_assert_int_eq(json_integer_value(json_object_get(s, "inside")), (json_int_t)inside);
	ck_assert_uint_eq(json_array_size(json_object_get(s, "steps")), json_array_size(steps));
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(s, "steps"), 0), "start_ns")),
			 json_integer_value(json_object_get(json_array_get(steps, 0), "start_ns")) - 5 * 3600 * 1000000000LL);
	json_decref(st);
	st = get_json("/api/v1/runs/smi_steps/gpu?utc_offset_min=-300", 200);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "steps"), "clock")), "given");
	json_decref(st);
	/* an offset past the zones there are is refused; a log of another time has no steps */
	json_decref(get_json("/api/v1/runs/smi_steps/gpu?utc_offset_min=900", 400));
	st = get_json("/api/v1/runs/smi_steps/gpu?utc_offset_min=0", 200);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(st, "steps"), "inside")), 0);
	json_decref(st);
	json_decref(j);
	free(d);
	free(path);
}
END_TEST

START_TEST(test_canary)
{
	uint8_t *bd, *sd;
	size_t bl, sl;
	json_t *b = canary_file("canary_baseline.json", &bd, &bl), *s = canary_file("canary_slow.json", &sd, &sl), *j, *o;
	double m1 = at(b, "perf", "step_time", "mean", NULL), m2 = at(s, "perf", "step_time", "mean", NULL);
	double sd1 = at(b, "perf", "step_time", "std", NULL), sd2 = at(s, "perf", "step_time", "std", NULL);
	double n1 = at(b, "perf", "step_time", "count", NULL), n2 = at(s, "perf", "step_time", "count", NULL);
	double t1 = at(b, "perf", "approx_tokens_per_sec", NULL), t2 = at(s, "perf", "approx_tokens_per_sec", NULL);
	double mem1 = at(b, "perf", "max_mem_mb", NULL), mem2 = at(s, "perf", "max_mem_mb", NULL);

	post("canary_base", "metrics.json", bd, bl, 201);
	post("canary_slow", "baseline.json", sd, sl, 201);	/* the name says nothing: the content does */

	/* the slow run's figures in ns and bytes, from the file's seconds, MiB and ms */
	j = get_json("/api/v1/runs/canary_slow/canary", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "run_id")), json_string_value(json_object_get(s, "run_id")));
	o = json_object_get(j, "step_time");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "count")), (json_int_t)n2);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "mean_ns")), llround(m2 * 1e9));
	ck_assert_int_eq(json_integer_value(json_object_get(o, "mean_ns")), 640000000);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "p95_ns")), llround(at(s, "perf", "step_time", "p95", NULL) * 1e9));
	ck_assert_double_eq(json_real_value(json_object_get(j, "tokens_per_s")), t2);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "max_mem_bytes")), llround(mem2 * 1048576));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "config"), "batch_size")), 1);
	o = json_object_get(j, "profiler");
	ck_assert_int_eq(json_integer_value(json_object_get(o, "cuda_time_total_ns")),
			 llround(at(s, "profiler", "cuda_time_total_ms", NULL) * 1e6));
	ck_assert_int_eq(json_array_size(json_object_get(o, "top_cuda_ops")),
			 json_array_size(json_object_get(json_object_get(s, "profiler"), "top_cuda_ops")));
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(o, "top_cpu_ops"), 1), "self_ns")),
			 llround(json_number_value(json_object_get(json_array_get(json_object_get(json_object_get(s, "profiler"),
				 "top_cpu_ops"), 1), "self_cpu_time_ms")) * 1e6));
	json_decref(j);

	/* the notebook's quick diagnosis: CPU over twice CUDA in both; copies over 30 % in the slow run only */
	j = get_json("/api/v1/runs/canary_slow/diagnosis", 200);
	ck_assert_ptr_nonnull(o = finding(j, "canary_cpu_bound"));
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "ratio")),
				at(s, "profiler", "cpu_time_total_ms", NULL) / at(s, "profiler", "cuda_time_total_ms", NULL), 1e-9);
	ck_assert_ptr_nonnull(o = finding(j, "canary_copies"));
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "copy_pct")), copy_share(s) * 100, 1e-9);
	ck_assert(copy_share(s) > 0.30);
	ck_assert_int_eq(json_array_size(json_object_get(o, "copies")), 2);
	json_decref(j);
	j = get_json("/api/v1/runs/canary_base/diagnosis", 200);
	ck_assert_ptr_nonnull(finding(j, "canary_cpu_bound"));
	ck_assert_ptr_null(finding(j, "canary_copies"));
	ck_assert(copy_share(b) <= 0.30);
	json_decref(j);

	/* compare as the notebook does: step time +25.0 %, tokens/s -20.0 %, memory -256 MB, and Welch's test */
	j = get_json("/api/v1/compare?base=canary_base&target=canary_slow", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "regression");
	o = json_object_get(json_object_get(j, "canary"), "step_time");
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "delta_pct")), (m2 - m1) / m1 * 100, 1e-9);
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "delta_pct")), 25.0, 1e-9);
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "t")), (m2 - m1) / sqrt(sd1 * sd1 / n1 + sd2 * sd2 / n2),
				1e-6);
	ck_assert(json_is_true(json_object_get(o, "significant")));
	o = json_object_get(json_object_get(j, "canary"), "tokens_per_s");
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "delta_pct")), (t2 - t1) / t1 * 100, 1e-9);
	ck_assert_double_eq_tol(json_real_value(json_object_get(o, "delta_pct")), -20.0, 1e-9);
	o = json_object_get(json_object_get(j, "canary"), "max_mem");
	ck_assert_double_eq(json_real_value(json_object_get(o, "delta_mb")), mem2 - mem1);
	ck_assert_double_eq(json_real_value(json_object_get(o, "delta_mb")), -256.0);
	ck_assert_int_eq(json_integer_value(json_object_get(o, "delta_bytes")), llround((mem2 - mem1) * 1048576));
	json_decref(j);
	/* the other way step time falls 20 % but memory rises (2048.5 - 1792.5) / 1792.5 = 14.3 %: past the
	 * default 5 % that is a regression; with a 15 % threshold only the step time counts, an improvement */
	ck_assert((mem1 - mem2) / mem2 * 100 > 5 && (mem1 - mem2) / mem2 * 100 < 15 && (m2 - m1) / m2 * 100 > 15);
	j = get_json("/api/v1/compare?base=canary_slow&target=canary_base", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "regression");
	ck_assert_double_eq_tol(json_real_value(json_object_get(json_object_get(json_object_get(j, "canary"), "max_mem"),
								"delta_pct")), (mem1 - mem2) / mem2 * 100, 1e-9);
	json_decref(j);
	j = get_json("/api/v1/compare?base=canary_slow&target=canary_base&threshold_pct=15", 200);
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "improvement");
	json_decref(j);

	/* cut: 400 naming where, and nothing of it kept but the raw bytes */
	j = refused("canary_cut", "name=metrics.json", sd, sl / 2, 400, "invalid_canary");
	ck_assert_ptr_nonnull(strstr(message(j), "line "));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "artifact"), "kind")), "canary_metrics");
	json_decref(j);
	json_decref(get_json("/api/v1/runs/canary_cut/canary", 404));
	/* a JSON object of neither kind keeps the trace's error */
	j = refused("neither", "name=x.json", "{\"run\": 1}", 10, 400, "invalid_trace");
	json_decref(j);
	free(bd);
	free(sd);
	json_decref(b);
	json_decref(s);
}
END_TEST

/* ---- the formats as people have them, on a server run with --max-events 3000 ---- */

static struct tu_server srv_small;

static void start_small(void)
{
	static const char *const extra[] = { "--max-events", "3000", NULL };

	if (tu_server_start(&srv_small, extra))
		abort();
}

static void stop_small(void)
{
	tu_server_cleanup(&srv_small);
}

/* tests/formats/'s file (README.md there). */
static uint8_t *own(const char *name, size_t *len)
{
	char rel[160], *path;
	uint8_t *d;

	snprintf(rel, sizeof(rel), "tests/formats/%s", name);
	path = tu_source_path(rel);
	d = tu_read_file(path, len);
	ck_assert_msg(d != NULL, "cannot read %s", path);
	free(path);
	return d;
}

/* POST to srv_small as run/upload.bin; the answer's JSON, the status checked. */
static json_t *post_small(const char *run, const void *d, size_t len, long status)
{
	char path[160];
	struct tu_resp r;
	json_t *j;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=upload.bin", run);
	ck_assert_int_eq(tu_http(&srv_small, "POST", path, d, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s: status %ld, expected %ld: %.300s", run, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_ptr_nonnull(j);
	return j;
}

/* The artifact of a 201: its kind and events as stated. */
static void stored_as(const char *run, const void *d, size_t len, const char *kind, json_int_t events)
{
	json_t *j = post_small(run, d, len, 201), *a = json_object_get(j, "artifact");

	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), kind);
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_msg(json_integer_value(json_object_get(a, "events")) == events, "%s: %lld events, expected %lld", run,
		      (long long)json_integer_value(json_object_get(a, "events")), (long long)events);
	json_decref(j);
}

/* A 4xx: its code, and its message holding each of the words given (NULL-terminated). */
static void refused_small(const char *run, const void *d, size_t len, long status, const char *code, ...)
{
	json_t *j = post_small(run, d, len, status);
	const char *msg = message(j), *w;
	va_list ap;

	ck_assert_str_eq(tu_error_code(j), code);
	va_start(ap, code);
	while ((w = va_arg(ap, const char *)))
		ck_assert_msg(msg && strstr(msg, w), "\"%s\" does not say %s", msg ? msg : "", w);
	va_end(ap);
	json_decref(j);
}

START_TEST(test_as_people_have_them)
{
	size_t len, n;
	uint8_t *d = own("lightning_simple_pl2_notebook_generated.txt", &len);
	char *t = malloc(len * 2 + 8192), *u;

	/* Lightning 2.x in a notebook cell under a progress bar: its five actions */
	stored_as("pl2_notebook", d, len, "lightning_report", 5);
	/* the same in UTF-16 with its BOM (PowerShell's '>'): the ASCII/UTF-8 text as UTF-16LE */
	n = 0;
	t[n++] = (char)0xff, t[n++] = (char)0xfe;
	for (size_t i = 0; i < len;) {
		unsigned c = d[i], k = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
		unsigned cp = k == 1 ? c : c & (0x7f >> k);
		for (unsigned q = 1; q < k; q++)
			cp = cp << 6 | (d[i + q] & 0x3f);
		i += k;
		ck_assert_uint_lt(cp, 0x10000);	/* no surrogates in this file */
		t[n++] = (char)(cp & 0xff), t[n++] = (char)(cp >> 8);
	}
	stored_as("pl2_utf16", t, n, "lightning_report", 5);
	/* CR-only line ends */
	memcpy(t, d, len);
	for (size_t i = 0; i < len; i++)
		if (t[i] == '\n')
			t[i] = '\r';
	stored_as("pl2_cr", t, len, "lightning_report", 5);
	/* 5000 bytes of blank space before it: still a report, not a trace */
	memset(t, ' ', 5000);
	t[4999] = '\n';
	memcpy(t + 5000, d, len);
	stored_as("pl2_blank", t, 5000 + len, "lightning_report", 5);
	/* a header unit Lightning never writes: 400 naming the line and the unit */
	memcpy(t, d, len);
	u = strstr(t, "Total time (s)");
	u[12] = 'h';
	refused_small("pl2_hours", t, len, 400, "invalid_table", "line 6", "\"(h)\"", NULL);
	free(d);
	/* a training log's 8,000 bytes of lines, then its key_averages sections (the layout of
	 * nanogpt-fp8-mxfp8's profile_output.txt, CORPUS.md): told within the sniff, its 4 ops */
	d = own("key_averages_pytorchprofiler_generated.txt", &len);
	char *log = malloc(8000 + len);
	for (n = 0; n + 40 <= 8000;)
		n += (size_t)sprintf(log + n, "  [TIMED] step %6zu: loss = 7.4520\n", n);
	memcpy(log + n, d, len);
	stored_as("keyavg_after_log", log, n + len, "key_averages", 4);
	free(log);
	free(d);

	/* a trace after a UTF-8 BOM */
	static const char trace[] = "\xef\xbb\xbf{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\","
				    "\"pid\":0,\"tid\":7,\"ts\":1000,\"dur\":10}]}";
	stored_as("bom_trace", trace, sizeof(trace) - 1, "trace", 1);
	/* folded stacks whose root is [unknown] or {built-in ...}: not JSON */
	static const char unk[] = "[unknown];main;train 10\n[unknown];main;eval 5\n";
	stored_as("stacks_unknown", unk, sizeof(unk) - 1, "stacks", 2);
	static const char brace[] = "{built-in method exec};main;run 3\n";
	stored_as("stacks_brace", brace, sizeof(brace) - 1, "stacks", 1);
	/* prose: 415 listing the kinds, not another kind's error */
	static const char prose[] = "{draft} Notes on training.\n[see below]\n";
	refused_small("prose", prose, sizeof(prose) - 1, 415, "unsupported_format", "Lightning", "nvidia-smi", NULL);

	free(t);
	/* 10,000 distinct frames under --max-events 3000: 413 */
	char *big = malloc(10000 * 16);
	n = 0;
	for (int i = 0; i < 10000; i++)
		n += (size_t)sprintf(big + n, "a;f%d 1\n", i);
	refused_small("frames", big, n, 413, "too_many_rows", NULL);
	/* and 10,000 nvidia-smi rows */
	n = (size_t)sprintf(big, "utilization.gpu [%%]\n");
	for (int i = 0; i < 10000; i++)
		n += (size_t)sprintf(big + n, "%d %%\n", i % 100);
	refused_small("smi_rows", big, n, 413, "too_many_rows", NULL);
	free(big);
}
END_TEST

/* A saved nvidia-smi screen: one sample per GPU on /gpu, its figures as printed. */
START_TEST(test_smi_screen_gpu)
{
	size_t len;
	uint8_t *d = own("nvidia_smi_screen_535_generated.txt", &len);
	struct tu_resp r;
	json_t *j, *gpus;

	stored_as("screen", d, len, "gpu_log", 2);
	free(d);
	ck_assert_int_eq(tu_http(&srv_small, "GET", "/api/v1/runs/screen/gpu", NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld %.300s", r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	gpus = json_object_get(j, "gpus");
	ck_assert_uint_eq(json_array_size(gpus), 2);
	for (size_t g = 0; g < 2; g++) {
		json_t *cols = json_object_get(json_array_get(gpus, g), "columns"), *c;
		size_t i;
		int seen = 0;
		ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(gpus, g), "index")), (json_int_t)g);
		json_array_foreach(cols, i, c) {
			const char *name = json_string_value(json_object_get(c, "name"));
			double v = json_real_value(json_array_get(json_object_get(c, "values"), 0));
			ck_assert_uint_eq(json_array_size(json_object_get(c, "values")), 1);	/* one sample */
			double want = !strcmp(name, "utilization.gpu") ? (g ? 85 : 87)
				      : !strcmp(name, "memory.used") ? (g ? 96498.0 : 96512.0) * 1048576
				      : !strcmp(name, "power.draw")  ? (g ? 398 : 412)
								     : NAN;
			if (!isnan(want)) {
				ck_assert_double_eq(v, want);
				seen++;
			}
		}
		ck_assert_int_eq(seen, 3);
	}
	json_decref(j);
}
END_TEST

/* trainscope-collect upload without --rank: a rank-1 trace lands as rank 1; --rank 0 disagrees. */
START_TEST(test_collect_trace_rank)
{
	static const char trace[] = "{\"schemaVersion\":1,\"distributedInfo\":{\"backend\":\"nccl\",\"rank\":1,"
				    "\"world_size\":2,\"pg_config\":[{\"pg_name\":\"0\",\"ranks\":[0,1]}]},"
				    "\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,"
				    "\"tid\":7,\"ts\":1000,\"dur\":10}]}";
	char dirt[] = "/tmp/ts-rank-XXXXXX", path[96], cmd[512];
	struct tu_resp r;
	json_t *j;

	ck_assert_ptr_nonnull(mkdtemp(dirt));
	snprintf(path, sizeof(path), "%s/rank1.json", dirt);
	ck_assert_int_eq(tu_write_file(path, trace, sizeof(trace) - 1), 0);
	snprintf(cmd, sizeof(cmd),
		 "env -u RANK -u TRAINSCOPE_RANK -u TRAINSCOPE_TOKEN TRAINSCOPE_SERVER=%s %s upload --run ranked %s"
		 " >/dev/null 2>&1",
		 srv_small.base, COLLECT_BIN, path);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd),
		 "env -u RANK -u TRAINSCOPE_RANK -u TRAINSCOPE_TOKEN TRAINSCOPE_SERVER=%s %s upload --run forced --rank 0 %s"
		 " >/dev/null 2>&1",
		 srv_small.base, COLLECT_BIN, path);
	ck_assert_int_ne(system(cmd), 0);	/* the trace says rank 1 */
	ck_assert_int_eq(tu_http(&srv_small, "GET", "/api/v1/runs/ranked", NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld %.300s", r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(json_object_get(j, "artifacts"), 0), "rank")),
			 1);
	json_decref(j);
	ck_assert_int_eq(tu_http(&srv_small, "GET", "/api/v1/runs/forced", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 404);	/* nothing sent */
	tu_resp_free(&r);
	unlink(path);
	rmdir(dirt);
}
END_TEST

/* The tables formats keep their own rows in, as migration 023 lists them in format_tables. */
static const char *const own_tables[] = { "lightning_actions", "lightning_functions", "keyavg_ops", "keyavg_tables",
					  "stack_frames", "gpu_samples", "canary_metrics", "canary_ops" };
#define NOWN (sizeof(own_tables) / sizeof(own_tables[0]))

/* Rows of table under the artifacts from lo to hi. */
static long long own_rows(const char *table, json_int_t lo, json_int_t hi)
{
	char sql[160];

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s WHERE artifact_id BETWEEN %lld AND %lld", table, (long long)lo,
		 (long long)hi);
	return tu_db_scalar(srv.db, sql);
}

/*
 * Deleting an artifact, and a run, deletes the rows each format keeps in its own tables: one
 * upload per format that has some, each table holding rows of them before, none after. The
 * tables are the ones format_tables lists, every one of them, and every table keyed by
 * artifact_id is listed there but the memory series' (which several formats fill) and a
 * capture's record of the artifacts it made (the run's delete takes it).
 */
START_TEST(test_delete_takes_own_rows)
{
	static const char *const files[] = { "lightning_advanced_pl1.4_doc_robustness.txt", "key_averages_cuda_kernelheim.txt",
					     "export_stacks_gpt2_profile.txt", "nvidia_smi_noheader_plato.csv",
					     "canary_metrics_example_SYNTHETIC.json" };
	json_int_t id[5];
	char path[128], in[512];
	struct tu_resp r;
	size_t i, len;

	for (i = 0; i < 5; i++) {
		uint8_t *d = sample(files[i], &len);
		json_t *j;
		ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/gone/artifacts?name=upload.bin", d, len, NULL, &r), 0);
		ck_assert_msg(r.status == 201, "%s: %ld: %.300s", files[i], r.status, r.body);
		j = tu_json(&r);
		tu_resp_free(&r);
		id[i] = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
		json_decref(j);
		free(d);
		ck_assert_int_eq(id[i], i ? id[i - 1] + 1 : id[0]);	/* one after the other: a range of ids */
	}
	/* format_tables lists these tables and no other */
	ck_assert_int_eq(tu_db_scalar(srv.db, "SELECT COUNT(*) FROM format_tables"), NOWN);
	snprintf(in, sizeof(in), "'%s'", own_tables[0]);
	for (i = 1; i < NOWN; i++)
		snprintf(in + strlen(in), sizeof(in) - strlen(in), ", '%s'", own_tables[i]);
	{
		char sql[1024];
		snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM format_tables WHERE name IN (%s)", in);
		ck_assert_int_eq(tu_db_scalar(srv.db, sql), NOWN);
		/* no table keyed by artifact_id is left out, but the shared ones */
		snprintf(sql, sizeof(sql), tu_postgres()
				 ? "SELECT COUNT(*) FROM information_schema.columns WHERE column_name='artifact_id'"
				   " AND table_schema=current_schema() AND table_name NOT IN (%s, %s)"
				 : "SELECT COUNT(*) FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type='table'"
				   " AND p.name='artifact_id' AND m.name NOT IN (%s, %s)",
			 in, "'memory_series', 'memory_point_blocks', 'memory_groups', 'memory_segments', 'memory_blocks',"
			     " 'capture_artifacts'");
		ck_assert_int_eq(tu_db_scalar(srv.db, sql), 0);
	}
	for (i = 0; i < NOWN; i++)
		ck_assert_msg(own_rows(own_tables[i], id[0], id[4]) > 0, "%s: no rows to delete", own_tables[i]);
	/* the canary's artifact alone: its two tables lose its rows, the others keep theirs */
	snprintf(path, sizeof(path), "/api/v1/runs/gone/artifacts/%lld", (long long)id[4]);
	ck_assert_int_eq(tu_http(&srv, "DELETE", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld: %.300s", r.status, r.body);
	tu_resp_free(&r);
	ck_assert_int_eq(own_rows("canary_metrics", id[4], id[4]) + own_rows("canary_ops", id[4], id[4]), 0);
	ck_assert_int_gt(own_rows("stack_frames", id[0], id[3]), 0);
	/* the run: every table loses the rest */
	ck_assert_int_eq(tu_http(&srv, "DELETE", "/api/v1/runs/gone", NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld: %.300s", r.status, r.body);
	tu_resp_free(&r);
	for (i = 0; i < NOWN; i++)
		ck_assert_msg(own_rows(own_tables[i], id[0], id[4]) == 0, "%s: rows left", own_tables[i]);
}
END_TEST

/*
 * Long reports are read as what they answer (issue 50): a log of 5,001 rows of two columns comes as
 * one row in 3 (rows / 2000 rounded up), its mean, min and max over every sample; a Lightning
 * report of 1,200 actions as its 1,000 largest.
 */
START_TEST(test_long_reports)
{
	size_t cap = 5001 * 16 + 64, n = 0, k;
	char *log = malloc(cap), *rep;
	json_t *j, *col, *v;

	n += (size_t)snprintf(log + n, cap - n, "utilization.gpu [%%], memory.used [MiB]\n");
	for (int i = 0; i < 5001; i++)
		n += (size_t)snprintf(log + n, cap - n, "%d %%, %d MiB\n", i % 101, i == 4000 ? 9 : 1);
	post("long_log", "gpu.csv", log, n, 201);
	j = get_json("/api/v1/runs/long_log/gpu", 200);
	ck_assert_uint_eq(json_array_size(json_object_get(json_array_get(json_object_get(j, "gpus"), 0), "columns")), 2);
	json_array_foreach(json_object_get(json_array_get(json_object_get(j, "gpus"), 0), "columns"), k, col) {
		const char *name = json_string_value(json_object_get(col, "name"));
		ck_assert_uint_eq(json_array_size(json_object_get(col, "values")), 1667);	/* rows 0, 3, ... 4998 */
		v = json_object_get(col, "values");
		if (!strcmp(name, "utilization.gpu")) {
			ck_assert_int_eq((int)json_number_value(json_array_get(v, 1)), 3);
			ck_assert_int_eq((int)json_number_value(json_object_get(col, "max")), 100);
			double mean = 0;
			for (int i = 0; i < 5001; i++)
				mean += i % 101;
			ck_assert_double_eq_tol(json_number_value(json_object_get(col, "mean")), mean / 5001, 1e-9);
		} else {	/* row 4000 is not one of those read, but its 9 MiB is the column's max */
			ck_assert_str_eq(name, "memory.used");
			ck_assert_double_eq(json_number_value(json_object_get(col, "max")), 9.0 * 1048576);
			ck_assert_double_eq(json_number_value(json_object_get(col, "min")), 1048576.0);
		}
	}
	json_decref(j);
	free(log);
	cap = 1200 * 64 + 512, n = 0;
	rep = malloc(cap);
	n += (size_t)snprintf(rep + n, cap - n, "Action  |  Mean duration (s)  |Num calls  |  Total time (s)  |  Percentage %%  |\n"
			      "----------\nTotal  |  -  |_  |  2000  |  100 %%  |\n----------\n");
	for (int i = 0; i < 1200; i++)
		n += (size_t)snprintf(rep + n, cap - n, "a%d  |  %d  |1  |  %d  |  0.1  |\n", i, i + 1, i + 1);
	post("many_actions", "profile.txt", rep, n, 201);
	j = get_json("/api/v1/runs/many_actions/actions", 200);
	v = json_object_get(j, "actions");
	ck_assert_uint_eq(json_array_size(v), 1000);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(v, 0), "action")), "a1199");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(v, 999), "action")), "a200");
	json_decref(j);
	free(rep);
}
END_TEST

Suite *suite_formats(void)
{
	Suite *s = suite_create("formats");
	TCase *tc = tcase_create("formats");

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_every_sample);
	tcase_add_test(tc, test_refused);
	tcase_add_test(tc, test_key_averages_ops);
	tcase_add_test(tc, test_canary);
	tcase_add_test(tc, test_report_findings);
	tcase_add_test(tc, test_compare_reports);
	tcase_add_test(tc, test_advanced_functions);
	tcase_add_test(tc, test_gpu_log_steps);
	tcase_add_test(tc, test_delete_takes_own_rows);
	tcase_add_test(tc, test_long_reports);
	suite_add_tcase(s, tc);
	tc = tcase_create("as_people_have_them");
	tcase_add_unchecked_fixture(tc, start_small, stop_small);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_as_people_have_them);
	tcase_add_test(tc, test_smi_screen_gpu);
	tcase_add_test(tc, test_collect_trace_rank);
	suite_add_tcase(s, tc);
	return s;
}
