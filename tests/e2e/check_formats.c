/*
 * check_formats.c: every sample in shared/fixtures/formats/ (other profilers'
 * text reports) uploaded to one run of the real server: each is detected from
 * its content whatever its name, stored as a ready artifact of its kind with
 * as many rows as the file has (counted here from the file itself), text that
 * is none of them answers 415 naming what is taken, and a truncated table 400
 * naming its line, keeping only the failed upload's raw bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

Suite *suite_formats(void)
{
	Suite *s = suite_create("formats");
	TCase *tc = tcase_create("formats");

	tcase_add_unchecked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_every_sample);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return s;
}
