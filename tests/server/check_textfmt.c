/*
 * check_textfmt.c: other profilers' text reports (server/ingest/textfmt.c, textfmt_units.c, fmt_*.c)
 * against the real samples in shared/fixtures/formats/. The figures were
 * computed from the files with a separate Python script (Decimal arithmetic
 * on the cells as printed), not from this parser; every sample is parsed in
 * pieces of 1, 7 and 4096 bytes. Then tables cut short, a column missing,
 * units the tools never write, bytes that are not UTF-8 and overlong lines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/textfmt.h"
#include "suites.h"
#include "testutil.h"

static const size_t pieces[] = { 1, 7, 4096 };

static uint8_t *fixture(const char *name, size_t *len)
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

/* Parse in pieces; returns rc, *pp kept for the caller to inspect and free. */
static int parse(int kind, const void *text, size_t len, size_t piece, struct textfmt_parser **pp,
		 const struct tf_result **res, struct tp_errbuf *err)
{
	struct textfmt_parser *p = textfmt_parser_new(kind, NULL);
	const uint8_t *b = text;
	int rc = TP_OK;

	ck_assert_ptr_nonnull(p);
	for (size_t i = 0; i < len && !rc; i += piece)
		rc = textfmt_parser_feed(p, b + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = textfmt_parser_finish(p, res, err);
	*pp = p;
	return rc;
}

static int detect_file(const uint8_t *d, size_t len)
{
	return textfmt_detect(d, len < TF_SNIFF ? len : TF_SNIFF, len <= TF_SNIFF);
}

static const struct tf_action *action(const struct tf_result *r, const char *name)
{
	for (size_t i = 0; i < r->nactions; i++)
		if (!strcmp(r->actions[i].name, name))
			return &r->actions[i];
	return NULL;
}

static const struct tf_action *top_action(const struct tf_result *r)
{
	const struct tf_action *t = NULL;

	for (size_t i = 0; i < r->nactions; i++)
		if (!t || r->actions[i].total_ns > t->total_ns)
			t = &r->actions[i];
	return t;
}

START_TEST(test_lightning_simple)
{
	size_t len;
	uint8_t *d = fixture("lightning_simple_pl1.2_hannah.txt", &len);

	ck_assert_int_eq(detect_file(d, len), TF_LIGHTNING);
	for (size_t k = 0; k < 3; k++) {
		struct textfmt_parser *p;
		const struct tf_result *r;
		struct tp_errbuf err = { 0 };
		ck_assert_msg(parse(TF_LIGHTNING, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_int_eq(r->advanced, 0);
		ck_assert_uint_eq(r->nactions, 33);		/* rows other than Total */
		ck_assert_int_eq(r->total_ns, 29420000000LL);	/* Total: 29.42 s */
		const struct tf_action *t = top_action(r);
		ck_assert_str_eq(t->name, "run_training_epoch");
		ck_assert_int_eq(t->total_ns, 21692000000LL);
		ck_assert_int_eq(t->mean_ns, 21692000000LL);
		ck_assert_int_eq(t->calls, 1);
		ck_assert_int_eq(t->share_bp, 7373);		/* 73.733 % */
		/* exponent notation: on_epoch_end 1.4326e-05 s mean, 3 calls, 4.2978e-05 s total */
		t = action(r, "on_epoch_end");
		ck_assert_ptr_nonnull(t);
		ck_assert_int_eq(t->mean_ns, 14326);
		ck_assert_int_eq(t->calls, 3);
		ck_assert_int_eq(t->total_ns, 42978);
		textfmt_parser_free(p);
	}
	free(d);
}
END_TEST

START_TEST(test_lightning_advanced)
{
	static const struct {
		const char *file;
		size_t nactions;
		int64_t top_ns;
	} f[] = {
		{ "lightning_advanced_pl1.4_doc_robustness.txt", 35, 12497000000LL },
		{ "lightning_advanced_pl2.2_diffusion_policy.txt", 360, 57732000000LL },
	};

	for (size_t i = 0; i < 2; i++) {
		size_t len;
		uint8_t *d = fixture(f[i].file, &len);
		struct textfmt_parser *p;
		const struct tf_result *r;
		struct tp_errbuf err = { 0 };

		ck_assert_int_eq(detect_file(d, len), TF_LIGHTNING);
		ck_assert_msg(parse(TF_LIGHTNING, d, len, 4096, &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_int_eq(r->advanced, 1);
		ck_assert_uint_eq(r->nactions, f[i].nactions);
		ck_assert_str_eq(top_action(r)->name, "run_training_epoch");
		ck_assert_int_eq(top_action(r)->total_ns, f[i].top_ns);
		textfmt_parser_free(p);
		free(d);
	}
}
END_TEST

/* cProfile rows: "3/1" ncalls, locations with spaces, at most TF_FUNCTIONS_PER_ACTION per action,
 * the table ended by the next report's title; fed in pieces of 7 bytes */
START_TEST(test_lightning_functions)
{
	char text[8192];
	size_t n = 0;
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	static const char head[] = "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n";

	n += (size_t)snprintf(text + n, sizeof(text) - n, "FIT Profiler Report\nProfile stats for: a\n"
			      "         9 function calls (7 primitive calls) in 1.250 seconds\n\n   Ordered by: cumulative time\n\n%s"
			      "      3/1    0.001    0.000    1.250    1.250 train.py:10(step)\n"
			      "        2    0.250    0.125    0.250    0.125 {method 'disable' of '_lsprof.Profiler' objects}\n\n\n",
			      head);
	n += (size_t)snprintf(text + n, sizeof(text) - n, "FIT Profiler Report\nProfile stats for: b\n"
			      "         30 function calls in 0.030 seconds\n\n%s", head);
	for (int i = 0; i < 25; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "        1    0.001    0.001    0.%03d    0.001 m.py:%d(f)\n",
				      30 - i, i);
	ck_assert_msg(parse(TF_LIGHTNING, (const uint8_t *)text, n, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->nactions, 2);
	ck_assert_uint_eq(r->nfunctions, 2 + TF_FUNCTIONS_PER_ACTION);
	ck_assert_uint_eq(r->functions[0].action, 0);
	ck_assert_int_eq(r->functions[0].ncalls, 3);
	ck_assert_int_eq(r->functions[0].primitive_calls, 1);
	ck_assert_int_eq(r->functions[0].cumtime_ns, 1250000000);
	ck_assert_int_eq(r->functions[0].tottime_ns, 1000000);
	ck_assert_str_eq(r->functions[1].location, "{method 'disable' of '_lsprof.Profiler' objects}");
	ck_assert_int_eq(r->functions[1].ncalls, 2);
	ck_assert_int_eq(r->functions[1].primitive_calls, 2);
	ck_assert_uint_eq(r->functions[2].action, 1);
	ck_assert_str_eq(r->functions[2].location, "m.py:0(f)");
	ck_assert_int_eq(r->functions[2 + TF_FUNCTIONS_PER_ACTION - 1].cumtime_ns, (30 - TF_FUNCTIONS_PER_ACTION + 1) * 1000000);
	ck_assert_int_eq(r->actions[0].total_ns, 1250000000);
	textfmt_parser_free(p);
}
END_TEST

START_TEST(test_key_averages)
{
	size_t len;
	uint8_t *d = fixture("key_averages_cuda_kernelheim.txt", &len);

	ck_assert_int_eq(detect_file(d, len), TF_KEYAVG);
	for (size_t k = 0; k < 3; k++) {
		struct textfmt_parser *p;
		const struct tf_result *r;
		struct tp_errbuf err = { 0 };
		const struct tf_op *pow = NULL;
		ck_assert_msg(parse(TF_KEYAVG, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->ncols, 11);
		ck_assert_uint_eq(r->nops, 7);
		for (size_t i = 0; i < r->nops; i++)
			if (!strcmp(r->ops[i].name, "aten::pow"))
				pow = &r->ops[i];
		ck_assert_ptr_nonnull(pow);
		/* aten::pow  4.77%  81.962us  6.52%  112.112us  112.112us  1.737ms  98.53%  1.748ms  1.748ms  1 */
		ck_assert_int_eq(pow->v[tf_col(r, "Self CPU %")], 477);
		ck_assert_int_eq(pow->v[tf_col(r, "Self CPU")], 81962);
		ck_assert_int_eq(pow->v[tf_col(r, "CPU total")], 112112);
		ck_assert_int_eq(pow->v[tf_col(r, "Self CUDA")], 1737000);
		ck_assert_int_eq(pow->v[tf_col(r, "Self CUDA %")], 9853);
		ck_assert_int_eq(pow->v[tf_col(r, "CUDA total")], 1748000);
		ck_assert_int_eq(pow->v[tf_col(r, "# of Calls")], 1);
		ck_assert_int_eq(r->col_units[tf_col(r, "CUDA time avg")], TF_U_NS);
		ck_assert_int_eq(r->self_cpu_total_ns, 1720000);
		ck_assert_int_eq(r->self_dev_total_ns, 1763000);
		textfmt_parser_free(p);
	}
	free(d);
}
END_TEST

/* a table with memory columns, as torch prints it (widths from the dash line) */
static const char mem_table[] =
	"---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
	"           Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg       CPU Mem    # of Calls  \n"
	"---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
	"       aten::mm        10.00%       1.500ms        20.00%        2.549s      16.000us     256.00 Kb             3  \n"
	"    aten::empty         0.00%       0.000us         0.00%       0.000us       0.000us       1.50 Gb            12  \n"
	"     aten::add_         1.00%       2.000us         1.00%       2.000us       2.000us      -1.70 MB             1  \n"
	"    aten::zeros         1.00%       2.000us         1.00%       2.000us       2.000us         256 B             1  \n"
	"---------------  ------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
	"Self CPU time total: 5.490s\n";

START_TEST(test_key_averages_units)
{
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	int mem;

	ck_assert_int_eq(textfmt_detect((const uint8_t *)mem_table, sizeof(mem_table) - 1, 1), TF_KEYAVG);
	ck_assert_msg(parse(TF_KEYAVG, mem_table, sizeof(mem_table) - 1, 5, &p, &r, &err) == TP_OK, "%s", err.msg);
	mem = tf_col(r, "CPU Mem");
	ck_assert_int_ge(mem, 0);
	ck_assert_int_eq(r->col_units[mem], TF_U_BYTES);
	ck_assert_uint_eq(r->nops, 4);
	ck_assert_int_eq(r->ops[0].v[tf_col(r, "Self CPU")], 1500000);
	ck_assert_int_eq(r->ops[0].v[tf_col(r, "CPU total")], 2549000000LL);
	ck_assert_int_eq(r->ops[0].v[tf_col(r, "CPU time avg")], 16000);
	ck_assert_int_eq(r->ops[0].v[mem], 256 * 1024);
	ck_assert_int_eq(r->ops[1].v[mem], 3LL << 29);			/* 1.50 Gb */
	ck_assert_int_eq(r->ops[2].v[mem], -(170LL * 1048576 + 50) / 100);	/* -1.70 MB */
	ck_assert_int_eq(r->ops[3].v[mem], 256);
	ck_assert_int_eq(r->self_cpu_total_ns, 5490000000LL);
	ck_assert_int_eq(r->self_dev_total_ns, -1);
	textfmt_parser_free(p);
}
END_TEST

START_TEST(test_stacks)
{
	size_t len;
	uint8_t *d = fixture("export_stacks_gpt2_profile.txt", &len);

	ck_assert_int_eq(detect_file(d, len), TF_STACKS);
	for (size_t k = 1; k < 3; k++) {
		struct textfmt_parser *p;
		const struct tf_result *r;
		struct tp_errbuf err = { 0 };
		ck_assert_msg(parse(TF_STACKS, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->nstacks, 1620);
		ck_assert_int_eq(r->stacks_total, 122353);
		ck_assert_uint_eq(r->nframes, 37);
		ck_assert_int_eq(r->leaf_first, 1);	/* 11 distinct first frames, 3 distinct last */
		ck_assert_int_eq(r->frames[0].total, 113992);
		int64_t self_sum = 0, conv = -1;
		for (size_t i = 0; i < r->nframes; i++) {
			self_sum += r->frames[i].self;
			if (!strcmp(r->frames[i].name, "<built-in_method_conv2d_of_type_object_at_0x7f9e8897a760>"))
				conv = r->frames[i].self;
			if (i)
				ck_assert_int_ge(r->frames[i - 1].total, r->frames[i].total);
		}
		ck_assert_int_eq(self_sum, r->stacks_total);
		ck_assert_int_eq(conv, 85379);
		textfmt_parser_free(p);
	}
	free(d);
}
END_TEST

START_TEST(test_stacks_root_first)
{
	static const char t[] = "main;train;fwd;mm 5\nmain;train;fwd;add 3\nmain;train;bwd;mm 4\nmain;eval;mm 1\n"
				"main;train;train;opt 2\n";
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_msg(parse(TF_STACKS, t, sizeof(t) - 1, 3, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(r->leaf_first, 0);
	ck_assert_str_eq(r->frames[0].name, "main");
	ck_assert_int_eq(r->frames[0].total, 15);
	for (size_t i = 0; i < r->nframes; i++) {
		if (!strcmp(r->frames[i].name, "mm")) {
			ck_assert_int_eq(r->frames[i].self, 10);
			ck_assert_int_eq(r->frames[i].total, 10);
		}
		if (!strcmp(r->frames[i].name, "train")) {	/* recursion counts once */
			ck_assert_int_eq(r->frames[i].total, 14);
			ck_assert_int_eq(r->frames[i].self, 0);
		}
	}
	textfmt_parser_free(p);
}
END_TEST

START_TEST(test_gpu_noheader)
{
	size_t len;
	uint8_t *d = fixture("nvidia_smi_noheader_plato.csv", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	double maxmem = 0;

	ck_assert_int_eq(detect_file(d, len), TF_GPULOG);
	ck_assert_msg(parse(TF_GPULOG, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(r->gpu_header, 0);
	ck_assert_uint_eq(r->ngpu_rows, 1923);
	ck_assert_uint_eq(r->ngpu_cols, 7);
	int u = tf_col(r, "utilization.gpu"), m = tf_col(r, "memory.used"), w = tf_col(r, "power.draw");
	ck_assert_int_ge(u, 0);
	ck_assert_int_ge(m, 0);
	ck_assert_int_ge(w, 0);
	ck_assert_double_eq_tol(tf_gpu_mean(r, (size_t)u, 0), 1.4305772230889235, 1e-9);
	ck_assert_double_eq_tol(tf_gpu_mean(r, (size_t)w, 0), 16.520946437857514, 1e-9);
	for (size_t i = 0; i < r->ngpu_rows; i++)
		if (r->gpu_rows[i].v[m] > maxmem)
			maxmem = r->gpu_rows[i].v[m];
	ck_assert_double_eq(maxmem, 20137.0 * 1048576);
	/* 2026/04/25 16:06:06.780 read as UTC */
	ck_assert_int_eq(r->gpu_rows[0].t_ns, 1777133166780000000LL);
	textfmt_parser_free(p);
	free(d);
}
END_TEST

START_TEST(test_gpu_repeated_header)
{
	size_t len;
	uint8_t *d = fixture("nvidia_smi_repeated_header_slowfast.csv", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file(d, len), TF_GPULOG);
	ck_assert_msg(parse(TF_GPULOG, d, len, 1, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(r->gpu_header, 1);
	ck_assert_uint_eq(r->ngpu_rows, 40);
	ck_assert_double_eq_tol(tf_gpu_mean(r, 0, 0), 94.8, 1e-9);
	textfmt_parser_free(p);
	free(d);
}
END_TEST

START_TEST(test_gpu_multi)
{
	static const char t[] =
		"timestamp, index, name, utilization.gpu [%], memory.total [MiB], memory.used [MiB], power.draw [W]\n"
		"2024/11/23 12:23:29.950, 0, NVIDIA RTX A6000, 92 %, 49140 MiB, 25073 MiB, 33.09 W\n"
		"2024/11/23 12:23:29.951, 1, NVIDIA RTX A6000, 40 %, 49140 MiB, 1 MiB, [N/A]\n"
		"2024/11/23 12:23:30.950, 0, NVIDIA RTX A6000, 100 %, 49140 MiB, 25073 MiB, 22.67 W\n"
		"2024/11/23 12:23:30.951, 1, NVIDIA RTX A6000, 50 %, 49140 MiB, 1 MiB, 20.00 W\n";
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_msg(parse(TF_GPULOG, t, sizeof(t) - 1, 4096, &p, &r, &err) == TP_OK, "%s", err.msg);
	int u = tf_col(r, "utilization.gpu"), w = tf_col(r, "power.draw");
	ck_assert_double_eq_tol(tf_gpu_mean(r, (size_t)u, 0), 96, 1e-12);
	ck_assert_double_eq_tol(tf_gpu_mean(r, (size_t)u, 1), 45, 1e-12);
	ck_assert_double_eq_tol(tf_gpu_mean(r, (size_t)w, 1), 20, 1e-12);	/* [N/A] left out */
	ck_assert_str_eq(r->gpu_units[tf_col(r, "memory.used")], "B");
	ck_assert_double_eq(r->gpu_rows[0].v[tf_col(r, "memory.used")], 25073.0 * 1048576);
	textfmt_parser_free(p);
}
END_TEST

START_TEST(test_detect_none)
{
	static const char *const none[] = { "{\"traceEvents\": []}", "hello world\n", "a,b,c\n1,2,3\n",
					    "------------\nnot a header\n" };

	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		ck_assert_int_eq(textfmt_detect((const uint8_t *)none[i], strlen(none[i]), 1), TF_NONE);
	/* a first line longer than the sniff with ';' in it: deep folded stacks */
	{
		static uint8_t deep[TF_SNIFF];
		for (size_t i = 0; i < sizeof(deep); i++)
			deep[i] = i % 3 == 2 ? ';' : 'f';
		ck_assert_int_eq(textfmt_detect(deep, sizeof(deep), 0), TF_STACKS);
		ck_assert_int_eq(textfmt_detect(deep, sizeof(deep) - 1, 0), -1);
		memset(deep, 'x', sizeof(deep));
		ck_assert_int_eq(textfmt_detect(deep, sizeof(deep), 0), TF_NONE);
	}
	/* the first line of a table is not enough */
	ck_assert_int_eq(textfmt_detect((const uint8_t *)"------------  ----", 18, 0), -1);
}
END_TEST

/* A broken variant: rc TP_ERR_INVALID (or TOOBIG) and the message names the line. */
static void expect_bad(int kind, const char *t, size_t len, int want_rc, const char *line)
{
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	int rc = parse(kind, t, len, 4096, &p, &r, &err);

	ck_assert_msg(rc == want_rc, "rc %d for %.40s", rc, t);
	ck_assert_msg(strstr(err.msg, line) != NULL, "\"%s\" does not say %s", err.msg, line);
	textfmt_parser_free(p);
}

START_TEST(test_hostile)
{
	size_t len;
	uint8_t *d = fixture("key_averages_cuda_kernelheim.txt", &len);
	char *t = malloc(len + 1);

	/* cut after the sixth line: no closing dash line */
	size_t cut = 0;
	for (int nl = 0; cut < len && nl < 6; cut++)
		nl += d[cut] == '\n';
	expect_bad(TF_KEYAVG, (const char *)d, cut, TP_ERR_INVALID, "truncated");
	/* a unit torch never writes on line 5 */
	memcpy(t, d, len);
	t[len] = 0;
	char *us = strstr(strstr(t, "aten::pow"), "us");
	us[0] = 'x';
	expect_bad(TF_KEYAVG, t, len, TP_ERR_INVALID, "line 5");
	free(t);
	free(d);
	/* a column missing */
	expect_bad(TF_LIGHTNING, "Action | Mean duration (s) | Num calls | Total time (s) |\nfwd | 1.0 | 2\n", 71,
		   TP_ERR_INVALID, "line 2");
	expect_bad(TF_GPULOG, "timestamp, utilization.gpu [%]\n2024/11/23 12:23:29.950\n", 55, TP_ERR_INVALID, "line 2");
	expect_bad(TF_GPULOG, "utilization.gpu [furlongs]\n5 %\n", 31, TP_ERR_INVALID, "line 1");
	expect_bad(TF_STACKS, "a;b 3\na;b three\n", 16, TP_ERR_INVALID, "line 2");
	expect_bad(TF_STACKS, "a;;b 3\n", 7, TP_ERR_INVALID, "line 1");
	expect_bad(TF_STACKS, "a;b\xff 3\n", 7, TP_ERR_INVALID, "UTF-8");
	expect_bad(TF_LIGHTNING, "FIT Profiler Report\n\n", 21, TP_ERR_INVALID, "before any action");
	/* a line over the cap */
	struct tf_limits lim = { .max_line = 16, .max_rows = 4, .max_held = 1 << 20 };
	struct textfmt_parser *p = textfmt_parser_new(TF_STACKS, &lim);
	struct tp_errbuf err = { 0 };
	ck_assert_int_eq(textfmt_parser_feed(p, (const uint8_t *)"abcdefghijklmnopqrstuvwxyz 1\n", 29, &err),
			 TP_ERR_TOOBIG);
	textfmt_parser_free(p);
	/* more distinct frames than the cap */
	p = textfmt_parser_new(TF_STACKS, &lim);
	ck_assert_int_eq(textfmt_parser_feed(p, (const uint8_t *)"a;b;c;d;e 1\n", 12, &err), TP_ERR_TOOBIG);
	textfmt_parser_free(p);
	/* rows held past max_held, under max_rows: what a row holds counts, not the row (issue 50) */
	char sep[128], hdr[128], row[128];
	struct tf_limits held = { .max_line = 1024, .max_rows = 1 << 20, .max_held = 64 << 10 };
	int rc;
	snprintf(sep, sizeof(sep), "%s  %s  %s  %s  %s  \n", "-------------------------", "------------", "------------",
		 "------------", "------------");
	snprintf(hdr, sizeof(hdr), "%25s  %12s  %12s  %12s  %12s  \n", "Name", "Self CPU %", "Self CPU", "CPU total",
		 "# of Calls");
	snprintf(row, sizeof(row), "%25s  %12s  %12s  %12s  %12s  \n", "aten::mm", "1.00%", "1.0us", "1.0us", "1");
	p = textfmt_parser_new(TF_KEYAVG, &held);
	memset(&err, 0, sizeof(err));
	rc = textfmt_parser_feed(p, (const uint8_t *)sep, strlen(sep), &err);
	if (!rc)
		rc = textfmt_parser_feed(p, (const uint8_t *)hdr, strlen(hdr), &err);
	if (!rc)
		rc = textfmt_parser_feed(p, (const uint8_t *)sep, strlen(sep), &err);
	ck_assert_int_eq(rc, TP_OK);
	for (int i = 0; i < 2000 && rc == TP_OK; i++)
		rc = textfmt_parser_feed(p, (const uint8_t *)row, strlen(row), &err);
	ck_assert_int_eq(rc, TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "too_many_rows");
	ck_assert_ptr_nonnull(strstr(err.msg, "line "));
	textfmt_parser_free(p);
}
END_TEST

/* The columns by meaning, whatever the device word; memory columns when printed; the three that make an operator table. */
START_TEST(test_key_averages_roles)
{
	char *path = tu_source_path("tests/formats/key_averages_memory.txt");
	size_t len;
	uint8_t *d = tu_read_file(path, &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	/* the title of each role in that file's header */
	static const char *const titles[TF_KA_NROLES] = {
		[TF_KA_CALLS] = "# of Calls", [TF_KA_SELF_CPU] = "Self CPU", [TF_KA_CPU_TOTAL] = "CPU total",
		[TF_KA_SELF_DEV] = "Self CUDA", [TF_KA_DEV_TOTAL] = "CUDA total", [TF_KA_CPU_MEM] = "CPU Mem",
		[TF_KA_SELF_CPU_MEM] = "Self CPU Mem", [TF_KA_DEV_MEM] = "CUDA Mem", [TF_KA_SELF_DEV_MEM] = "Self CUDA Mem",
	};

	ck_assert_ptr_nonnull(d);
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		ck_assert_int_eq(parse(TF_KEYAVG, d, len, pieces[k], &p, &r, &err), TP_OK);
		ck_assert_str_eq(r->ka_device, "CUDA");
		for (int role = 0; role < TF_KA_NROLES; role++) {
			ck_assert_int_ge(r->ka_col[role], 1);
			ck_assert_str_eq(r->col_names[r->ka_col[role]], titles[role]);
		}
		/* aten::empty: 256.00 Kb of CPU memory, 48.00 Mb of CUDA memory, 80 calls */
		ck_assert_str_eq(r->ops[3].name, "aten::empty");
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CPU_MEM]], 256 * 1024);
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_SELF_DEV_MEM]], 48 * 1024 * 1024);
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CALLS]], 80);
		textfmt_parser_free(p);
	}
	free(d);
	free(path);

	/* an XPU table without memory: the device word is the table's */
	{
		static const char xpu[] =
			"-------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
			"         Name      Self CPU     CPU total      Self XPU     XPU total   Self XPU %    # of Calls  \n"
			"-------------  ------------  ------------  ------------  ------------  ------------  ------------  \n"
			"     aten::mm       1.000us       2.000us       3.000us       4.000us       100.00%             5  \n"
			"-------------  ------------  ------------  ------------  ------------  ------------  ------------  \n";
		ck_assert_int_eq(parse(TF_KEYAVG, xpu, sizeof(xpu) - 1, 4096, &p, &r, &err), TP_OK);
		ck_assert_str_eq(r->ka_device, "XPU");
		ck_assert_int_eq(r->ops[0].v[r->ka_col[TF_KA_DEV_TOTAL]], 4000);
		ck_assert_int_eq(r->ops[0].v[r->ka_col[TF_KA_SELF_DEV]], 3000);
		ck_assert_int_eq(r->ka_col[TF_KA_CPU_MEM], -1);
		ck_assert_int_eq(r->ka_col[TF_KA_DEV_MEM], -1);
		textfmt_parser_free(p);
	}
	/* no # of Calls: no operator table, 400 at the header's closing dash line */
	{
		static const char nocalls[] =
			"-------------  ------------  ------------  \n"
			"         Name      Self CPU     CPU total  \n"
			"-------------  ------------  ------------  \n"
			"     aten::mm       1.000us       2.000us  \n"
			"-------------  ------------  ------------  \n";
		ck_assert_int_eq(parse(TF_KEYAVG, nocalls, sizeof(nocalls) - 1, 4096, &p, &r, &err), TP_ERR_INVALID);
		ck_assert_ptr_nonnull(strstr(err.msg, "line 3"));
		ck_assert_ptr_nonnull(strstr(err.msg, "# of Calls"));
		textfmt_parser_free(p);
	}
}
END_TEST

/* A file of tests/formats/ (the samples written to the tools' layouts, README.md there). */
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

/* Lightning 2.x: '|' before every row, tabs, the Total row, the title; a name of 279 characters. */
START_TEST(test_lightning_2x)
{
	static const char *const files[] = { "lightning_simple_pl2_generated.txt",
					     "lightning_simple_pl2_notebook_generated.txt" };

	for (size_t f = 0; f < 2; f++) {
		size_t len;
		uint8_t *d = own(files[f], &len);
		ck_assert_int_eq(detect_file(d, len), TF_LIGHTNING);
		for (size_t k = 0; k < 3; k++) {
			struct textfmt_parser *p;
			const struct tf_result *r;
			struct tp_errbuf err = { 0 };
			ck_assert_msg(parse(TF_LIGHTNING, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s: %s", files[f],
				      err.msg);
			ck_assert_uint_eq(r->nactions, 5);
			ck_assert_int_eq(r->total_ns, 29410000000LL);	/* "29.41" */
			const struct tf_action *a = action(r, "run_training_batch");
			ck_assert_ptr_nonnull(a);
			ck_assert_int_eq(a->calls, 200);
			ck_assert_int_eq(a->mean_ns, 62500000);		/* "0.0625" */
			ck_assert_int_eq(a->total_ns, 12500000000LL);	/* "12.5" */
			ck_assert_int_eq(a->share_bp, 4250);		/* "42.5" */
			a = action(r, "[_TrainingEpochLoop].train_dataloader_next");
			ck_assert_ptr_nonnull(a);
			ck_assert_int_eq(a->mean_ns, 47152);		/* "4.7152e-05" */
			ck_assert_int_eq(a->share_bp, 3);		/* "0.032066" */
			a = &r->actions[4];
			ck_assert_uint_eq(strlen(a->name), 279);
			ck_assert_int_eq(a->calls, 2);
			ck_assert_int_eq(a->total_ns, 750000000);
			textfmt_parser_free(p);
		}
		free(d);
	}
}
END_TEST

/* Two reports appended, the second with its columns in another order: each read by its own header. */
START_TEST(test_lightning_second_header)
{
	size_t len;
	uint8_t *d = own("lightning_simple_pl2_two_reports_generated.txt", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_msg(parse(TF_LIGHTNING, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->nactions, 6);
	textfmt_parser_free(p);
	free(d);
	/* a 1.x table (no closing dash line), a blank line, then a progress bar with '|': not a row */
	d = fixture("lightning_simple_pl1.2_hannah.txt", &len);
	uint8_t *e = malloc(len + 64);
	memcpy(e, d, len);
	memcpy(e + len, "\nEpoch 2: 100%|##########| 10/10 [00:01<00:00]\n", 47);
	ck_assert_msg(parse(TF_LIGHTNING, e, len + 47, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	free(e);
	textfmt_parser_free(p);
	free(d);
	d = own("lightning_simple_pl2_two_reports_generated.txt", &len);
	ck_assert_msg(parse(TF_LIGHTNING, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	const struct tf_action *a = action(r, "val_step");
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(a->calls, 3);
	ck_assert_int_eq(a->mean_ns, 500000000);
	ck_assert_int_eq(a->total_ns, 1500000000);
	textfmt_parser_free(p);
	free(d);
}
END_TEST

/* Units and values Lightning never prints: 400 naming the line and the unit. */
START_TEST(test_lightning_strict)
{
	size_t len;
	uint8_t *d = own("lightning_simple_pl2_generated.txt", &len);
	char *t = malloc(len + 1), *u;

	memcpy(t, d, len);
	t[len] = 0;
	u = strstr(t, "Total time (s)");
	u[12] = 'h';	/* "Total time (h)" on line 5 */
	expect_bad(TF_LIGHTNING, t, len, TP_ERR_INVALID, "line 5");
	expect_bad(TF_LIGHTNING, t, len, TP_ERR_INVALID, "\"(h)\"");
	memcpy(t, d, len);
	u = strstr(t, "|  200            ");
	memcpy(u, "| -200", 5);	/* negative calls */
	expect_bad(TF_LIGHTNING, t, len, TP_ERR_INVALID, "negative count of calls");
	memcpy(t, d, len);
	u = strstr(t, "|  42.5 ");
	memcpy(u, "|  142.5", 7);
	expect_bad(TF_LIGHTNING, t, len, TP_ERR_INVALID, "outside 0-100");
	free(t);
	free(d);
}
END_TEST

/* key_averages with names padded by characters ("naïve_loader", "数据加载"), and PyTorchProfiler's sections. */
/* --query-gpu of every property (nvidia_gpu_exporter's H200 capture, 212 columns, a header of 6,570
 * bytes): detected, its [us] counters in seconds; appended twice (a loop), the header re-read. */
START_TEST(test_gpu_every_property)
{
	size_t len;
	uint8_t *d = own("corpus/nvidia_smi/linux_h200__590.48.01__idle_query.csv", &len);
	char *t = malloc(2 * len + 1), *u;
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	memcpy(t, d, len);
	memcpy(t + len, d, len);
	t[2 * len] = 0;
	ck_assert_int_eq(detect_file((const uint8_t *)t, 2 * len), TF_GPULOG);
	ck_assert_msg(parse(TF_GPULOG, t, 2 * len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->ngpu_cols, 212);
	ck_assert_uint_eq(r->ngpu_rows, 2);
	int c = tf_col(r, "clocks_event_reasons_counters.sw_power_cap");
	ck_assert_int_ge(c, 0);
	ck_assert_str_eq(r->gpu_units[c], "s");
	ck_assert_double_eq(r->gpu_rows[1].v[c], 0);
	c = tf_col(r, "memory.total");
	ck_assert_double_eq(r->gpu_rows[1].v[c], 143771.0 * 1048576);
	ck_assert_double_eq(r->gpu_rows[0].v[tf_col(r, "power.draw")], 77.71);
	textfmt_parser_free(p);
	/* a counter in ms under [us]: 400 naming the unit */
	u = strstr(t + len, ", 0 us,");
	ck_assert_ptr_nonnull(u);
	u[4] = 'm';
	expect_bad(TF_GPULOG, t, 2 * len, TP_ERR_INVALID, "the unit \"ms\"");
	free(t);
	free(d);
}
END_TEST

START_TEST(test_key_averages_utf8_sections)
{
	size_t len;
	uint8_t *d = own("key_averages_utf8_generated.txt", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file(d, len), TF_KEYAVG);
	for (size_t k = 0; k < 3; k++) {
		ck_assert_msg(parse(TF_KEYAVG, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->nops, 3);
		ck_assert_str_eq(r->ops[0].name, "na\xc3\xafve_loader");
		ck_assert_str_eq(r->ops[1].name, "\xe6\x95\xb0\xe6\x8d\xae\xe5\x8a\xa0\xe8\xbd\xbd");
		ck_assert_int_eq(r->ops[1].v[r->ka_col[TF_KA_SELF_CPU]], 1500000);
		ck_assert_int_eq(r->ops[1].v[r->ka_col[TF_KA_CALLS]], 2);
		textfmt_parser_free(p);
	}
	free(d);
	/* "FIT Profiler Report", "Profile stats for: records": PyTorchProfiler's operator tables, not actions */
	d = own("key_averages_pytorchprofiler_generated.txt", &len);
	ck_assert_int_eq(detect_file(d, len), TF_KEYAVG);
	ck_assert_msg(parse(TF_KEYAVG, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->nops, 4);
	ck_assert_str_eq(r->ops[3].name, "aten::mm");
	ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_SELF_CPU]], 4000);
	ck_assert_int_eq(r->self_cpu_total_ns, 16000000);	/* 15.000ms + 1.000ms */
	textfmt_parser_free(p);
	/* negative calls: 400 */
	char *t = malloc(len + 1), *u;
	memcpy(t, d, len);
	t[len] = 0;
	u = strstr(t, "             3  ");
	u[12] = '-';	/* "-3" */
	expect_bad(TF_KEYAVG, t, len, TP_ERR_INVALID, "negative");
	u[12] = ' ';
	/* a negative self time is printed by torch where scopes overlap ("-0.00%", "-95.000us" in a
	 * real PyTorchProfiler report, CORPUS.md): read as printed; a negative total is still a 400 */
	u = strstr(t, "aten::mm            10.00%       4.000us");
	ck_assert_ptr_nonnull(u);
	memcpy(u + 20, "-0.00%      -4.000us", 20);
	ck_assert_msg(parse(TF_KEYAVG, t, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_SELF_CPU]], -4000);
	ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CPU_TOTAL]], 4000);
	ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_SELF_CPU] - 1], 0);	/* "-0.00%" */
	textfmt_parser_free(p);
	memcpy(u + 60, "-4.000us", 8);	/* CPU total */
	expect_bad(TF_KEYAVG, t, len, TP_ERR_INVALID, "CPU total\": torch never prints a negative");
	memcpy(u + 60, "  4.000us", 8);
	memcpy(u + 19, "110.00%", 7);	/* a Self CPU share over 100: 400 (a device's may pass it) */
	expect_bad(TF_KEYAVG, t, len, TP_ERR_INVALID, "Self CPU %\": a percentage over 100");
	memcpy(t, d, len);	/* the sample as it is */
	/* a CPU total share over 100: an op nested in itself counts the inner call in its total
	 * (TurboDiffusion's aten::copy_ at 185.95 %, CORPUS.md), read as printed */
	memcpy(u + 47, "185.95%", 7);
	ck_assert_msg(parse(TF_KEYAVG, t, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CPU_TOTAL] - 1], 18595);
	textfmt_parser_free(p);
	free(t);
	free(d);
}
END_TEST

/* A log's rules ("-----" alone) and a title between two tables of one log are text, not a table:
 * the layout of nanogpt-fp8-mxfp8's profile_output.txt (CORPUS.md), the first table's rows as 2. */
START_TEST(test_key_averages_log_rules)
{
	size_t len;
	uint8_t *d = own("key_averages_pytorchprofiler_generated.txt", &len);
	const char *rule = "----------------------------------------------------------------------\n";
	const char *title = "Profile stats for: validation_step\n";
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };
	char *s = malloc(len + 1), *t = malloc(len + 400), *sec;

	memcpy(s, d, len);
	s[len] = 0;
	sec = strstr(s, title);
	ck_assert_ptr_nonnull(sec);
	*sec = 0;
	snprintf(t, len + 400, "%s%s%sTop 10 by self_cpu_time_total\n%s%s", rule, s, rule, rule, sec + strlen(title));
	free(s);
	ck_assert_int_eq(detect_file((const uint8_t *)t, strlen(t)), TF_KEYAVG);
	for (size_t k = 0; k < 3; k++) {
		ck_assert_msg(parse(TF_KEYAVG, t, strlen(t), pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->nops, 4);
		ck_assert_str_eq(r->ops[3].name, "aten::mm");
		ck_assert_int_eq(r->self_cpu_total_ns, 16000000);
		textfmt_parser_free(p);
	}
	free(t);
	/* a training log's lines before the table: told within TF_SNIFF bytes, none past it */
	for (size_t pre = 8000; pre <= 2 * TF_SNIFF; pre += 2 * TF_SNIFF - 8000) {
		char *log = malloc(pre + len + 1);
		size_t n = 0;
		while (n + 40 <= pre)
			n += (size_t)sprintf(log + n, "  [TIMED] step %6zu: loss = 7.4520\n", n);
		memcpy(log + n, d, len);
		ck_assert_int_eq(detect_file((const uint8_t *)log, n + len), pre < TF_SNIFF ? TF_KEYAVG : TF_NONE);
		free(log);
	}
	free(d);
}
END_TEST

/* Tables of one file with other columns (CORPUS.md, AndyBlocker's report: three sorts of a profile,
 * then group_by_input_shape's with "Input Shapes" and "Total FLOPs"): each is read by its own header,
 * every figure under its title; a table without the columns every table has is still a 400. */
START_TEST(test_key_averages_regrouped)
{
	static const char two[] =
		"Key Averages (CPU):\n"
		"-------------  ------------  ------------  ------------  ------------  \n"
		"         Name      Self CPU     CPU total     Self CUDA    # of Calls  \n"
		"-------------  ------------  ------------  ------------  ------------  \n"
		"     aten::mm       1.000us       2.000us       3.000us             5  \n"
		"    aten::add       4.000us       6.000us       1.000us             7  \n"
		"-------------  ------------  ------------  ------------  ------------  \n"
		"Self CPU time total: 5.000us\n"
		"\n"
		"Grouped by Input Shapes:\n"
		"-------------  ------------  ------------  ------------  --------------------  ------------  \n"
		"         Name     CPU total      Self CPU    # of Calls          Input Shapes   Total FLOPs  \n"
		"-------------  ------------  ------------  ------------  --------------------  ------------  \n"
		"     aten::mm       2.000us       1.000us             3    [[8, 32], [32, 4]]          2048  \n"
		"     aten::mm       9.000us       8.000us             2                    []            --  \n"
		"-------------  ------------  ------------  ------------  --------------------  ------------  \n"
		"Self CPU time total: 9.000us\n";
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file((const uint8_t *)two, sizeof(two) - 1), TF_KEYAVG);
	for (size_t k = 0; k < 3; k++) {
		ck_assert_msg(parse(TF_KEYAVG, two, sizeof(two) - 1, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->nops, 4);
		ck_assert_uint_eq(r->ncols, 7);	/* the first table's 5, then Input Shapes and Total FLOPs */
		ck_assert_int_ge(tf_col(r, "Input Shapes"), 5);
		ck_assert_int_ge(tf_col(r, "Total FLOPs"), 5);
		ck_assert_str_eq(r->col_names[r->ka_col[TF_KA_CPU_TOTAL]], "CPU total");
		/* the second table's columns in another order: its figures under their own titles */
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_SELF_CPU]], 8000);
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CPU_TOTAL]], 9000);
		ck_assert_int_eq(r->ops[3].v[r->ka_col[TF_KA_CALLS]], 2);
		ck_assert_int_eq(r->ops[2].v[r->ka_col[TF_KA_CALLS]], 3);
		/* Self CUDA: not in the second table; the first table's rows as printed */
		ck_assert(r->ops[2].v[r->ka_col[TF_KA_SELF_DEV]] == INT64_MIN);
		ck_assert_int_eq(r->ops[1].v[r->ka_col[TF_KA_SELF_DEV]], 1000);
		ck_assert_int_eq(r->self_cpu_total_ns, 14000);
		textfmt_parser_free(p);
	}
	/* a second table without # of Calls: 400 at its header's closing dash line */
	{
		char *t = malloc(sizeof(two) + 400);
		snprintf(t, sizeof(two) + 400, "%s%s", two,
			 "-------------  ------------  ------------  \n"
			 "         Name      Self CPU     CPU total  \n"
			 "-------------  ------------  ------------  \n");
		ck_assert_int_eq(parse(TF_KEYAVG, t, strlen(t), 4096, &p, &r, &err), TP_ERR_INVALID);
		ck_assert_ptr_nonnull(strstr(err.msg, "line 20"));
		ck_assert_ptr_nonnull(strstr(err.msg, "# of Calls"));
		textfmt_parser_free(p);
		free(t);
	}
	/* one title twice in a header: which of the two cells is the figure? */
	{
		static const char twice[] =
			"-------------  ------------  ------------  ------------  \n"
			"         Name      Self CPU     CPU total      Self CPU  \n"
			"-------------  ------------  ------------  ------------  \n";
		memset(&err, 0, sizeof(err));	/* a parser keeps the first error it was given */
		ck_assert_int_eq(parse(TF_KEYAVG, twice, sizeof(twice) - 1, 4096, &p, &r, &err), TP_ERR_INVALID);
		ck_assert_ptr_nonnull(strstr(err.msg, "line 2"));
		ck_assert_ptr_nonnull(strstr(err.msg, "the same title twice"));
		textfmt_parser_free(p);
	}
}
END_TEST

/* The plain nvidia-smi screen: one sample per GPU; its processes' memory. */
START_TEST(test_gpu_screen)
{
	size_t len;
	uint8_t *d = own("nvidia_smi_screen_535_generated.txt", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file(d, len), TF_GPULOG);
	for (size_t k = 0; k < 3; k++) {
		ck_assert_msg(parse(TF_GPULOG, d, len, pieces[k], &p, &r, &err) == TP_OK, "%s", err.msg);
		ck_assert_uint_eq(r->ngpu_rows, 2);
		ck_assert_int_eq(r->gpu_rows[1].gpu, 1);
		ck_assert_int_eq(r->gpu_rows[0].t_ns, 1795684442000000000LL);	/* Thu Nov 26 09:14:02 2026 UTC */
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.gpu"), 0), 87);
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "memory.used"), 1), 96498.0 * 1048576);
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "memory.total"), 0), 143771.0 * 1048576);
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "temperature.gpu"), 1), 37);
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "power.draw"), 0), 412);
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "power.limit"), 0), 700);
		ck_assert(isnan(tf_gpu_mean(r, (size_t)tf_col(r, "fan.speed"), 0)));
		ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "processes.used_memory"), 0), 96490.0 * 1048576);
		textfmt_parser_free(p);
	}
	free(d);
	d = own("nvidia_smi_screen_470_generated.txt", &len);
	ck_assert_msg(parse(TF_GPULOG, d, len, 1, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->ngpu_rows, 1);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "fan.speed"), 0), 30);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.gpu"), 0), 57);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "processes.used_memory"), 0), 0);	/* none running */
	textfmt_parser_free(p);
	/* -500 % and a unit nvidia-smi does not print there: 400 naming the line */
	char *t = malloc(len + 1), *u;
	memcpy(t, d, len);
	t[len] = 0;
	u = strstr(t, "    57%");
	memcpy(u, "-500%", 5);
	expect_bad(TF_GPULOG, t, len, TP_ERR_INVALID, "line 10");
	memcpy(t, d, len);
	u = strstr(t, "1234MiB");
	memcpy(u, "1234GiB", 7);
	expect_bad(TF_GPULOG, t, len, TP_ERR_INVALID, "\"GiB\"");
	free(t);
	free(d);
	/* a CSV cell in another unit than its column's, a percentage over 100 */
	expect_bad(TF_GPULOG, "utilization.gpu [%], memory.used [MiB]\n5 %, 12 W\n", 49, TP_ERR_INVALID, "\"W\"");
	expect_bad(TF_GPULOG, "utilization.gpu [%]\n101 %\n", 26, TP_ERR_INVALID, "line 2");
	/* noheader,nounits: nothing names the numbers; none is taken for a temperature */
	static const char bare[] = "2026/04/25 16:06:06.780, 0, 35, 27\n";
	ck_assert_msg(parse(TF_GPULOG, bare, sizeof(bare) - 1, 4096, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_int_eq(tf_col(r, "temperature.gpu"), -1);
	ck_assert_str_eq(r->gpu_units[1], "");
	textfmt_parser_free(p);
	/* a repeated header in another column order: each figure under its name; other columns: 400 */
	static const char reorder[] = "index, utilization.gpu [%], power.draw [W]\n0, 10 %, 100.00 W\n"
				      "power.draw [W], index, utilization.gpu [%]\n300.00 W, 0, 30 %\n";
	ck_assert_msg(parse(TF_GPULOG, reorder, sizeof(reorder) - 1, 3, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.gpu"), 0), 20);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "power.draw"), 0), 200);
	textfmt_parser_free(p);
	expect_bad(TF_GPULOG, "index, utilization.gpu [%]\n0, 10 %\nindex, memory.used [MiB]\n0, 5 MiB\n", 69,
		   TP_ERR_INVALID, "line 3");
}
END_TEST

/* nvidia-smi dmon: its names and units, repeated headers, "-" not measured. */
START_TEST(test_gpu_dmon)
{
	size_t len;
	uint8_t *d = own("nvidia_smi_dmon_generated.txt", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file(d, len), TF_GPULOG);
	ck_assert_msg(parse(TF_GPULOG, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->ngpu_rows, 4);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.gpu"), 0), 89);	/* 87, 91 */
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "power.draw"), 1), 399.5);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "clocks.sm"), 1), 1980e6);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.jpeg"), 0), 0);	/* "-" left out */
	textfmt_parser_free(p);
	free(d);
	expect_bad(TF_GPULOG, "# gpu    pwr\n# Idx     kW\n    0     41\n", 39, TP_ERR_INVALID, "\"kW\"");
	/* -o DT: each sample at its date and time */
	d = own("nvidia_smi_dmon_dt_generated.txt", &len);
	ck_assert_int_eq(detect_file(d, len), TF_GPULOG);
	ck_assert_msg(parse(TF_GPULOG, d, len, 5, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->ngpu_rows, 2);
	ck_assert_int_eq(r->gpu_rows[0].t_ns, 1795684442000000000LL);	/* 2026-11-26 09:14:02 */
	ck_assert_int_eq(r->gpu_rows[1].t_ns - r->gpu_rows[0].t_ns, 1000000000);
	ck_assert_double_eq(tf_gpu_mean(r, (size_t)tf_col(r, "utilization.gpu"), 0), 89);
	textfmt_parser_free(p);
	free(d);
}
END_TEST

/* What detection must not get wrong, and text as it is: CR line ends, a BOM. */
START_TEST(test_detect_edges)
{
	static const char unk[] = "[unknown];main;train 10\n[unknown];main;eval 5\n";
	static const char brace[] = "{built-in method exec};main 3\n";
	static const char prose[] = "Chapter 5\nIt was a dark night.\n";
	static const char cr[] = "a;b 3\ra;c 4\r";
	static const char bom[] = "\xef\xbb\xbf" "a;b 3\n";
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(textfmt_detect((const uint8_t *)unk, sizeof(unk) - 1, 1), TF_STACKS);
	ck_assert_int_eq(textfmt_detect((const uint8_t *)brace, sizeof(brace) - 1, 1), TF_STACKS);
	ck_assert_int_eq(textfmt_detect((const uint8_t *)prose, sizeof(prose) - 1, 1), TF_NONE);
	ck_assert_int_eq(textfmt_detect((const uint8_t *)cr, sizeof(cr) - 1, 1), TF_STACKS);
	for (size_t k = 1; k < 3; k++) {	/* the CRs split from or with their lines */
		ck_assert_int_eq(parse(TF_STACKS, cr, sizeof(cr) - 1, k, &p, &r, &err), TP_OK);
		ck_assert_uint_eq(r->nstacks, 2);
		ck_assert_int_eq(r->stacks_total, 7);
		textfmt_parser_free(p);
		ck_assert_int_eq(parse(TF_STACKS, bom, sizeof(bom) - 1, k, &p, &r, &err), TP_OK);
		ck_assert_str_eq(r->frames[0].name, "a");
		textfmt_parser_free(p);
	}
}
END_TEST

/* Lightning's own docs (Apache-2.0; tests/formats/CORPUS.md): the 2.x SimpleProfiler and AdvancedProfiler examples. */
START_TEST(test_lightning_docs)
{
	size_t len;
	uint8_t *d = own("lightning_simple_docs_profiler_basic.txt", &len);
	struct textfmt_parser *p;
	const struct tf_result *r;
	struct tp_errbuf err = { 0 };

	ck_assert_int_eq(detect_file(d, len), TF_LIGHTNING);
	ck_assert_msg(parse(TF_LIGHTNING, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->nactions, 12);
	ck_assert_int_eq(r->actions[0].mean_ns, 10000100000LL);	/* "10.0001" */
	ck_assert_int_eq(r->actions[0].total_ns, 20000000000LL);	/* "20.00" */
	ck_assert_int_eq(r->actions[0].calls, -1);			/* no Num calls column */
	ck_assert_int_eq(action(r, "[LightningModule]BoringModel.on_fit_start")->mean_ns, 1226);	/* "1.226e-06" */
	textfmt_parser_free(p);
	free(d);
	d = own("lightning_advanced_docs_profiler_basic.txt", &len);
	ck_assert_int_eq(detect_file(d, len), TF_LIGHTNING);
	ck_assert_msg(parse(TF_LIGHTNING, d, len, 7, &p, &r, &err) == TP_OK, "%s", err.msg);
	ck_assert_uint_eq(r->nactions, 1);
	ck_assert_int_eq(r->actions[0].total_ns, 18893000000LL);	/* "in 18.893 seconds" */
	ck_assert_uint_eq(r->nfunctions, 10);
	ck_assert_int_eq(r->functions[0].ncalls, 3752);
	ck_assert_int_eq(r->functions[0].primitive_calls, 1876);
	ck_assert_int_eq(r->functions[9].cumtime_ns, 5734000000LL);
	textfmt_parser_free(p);
	free(d);
}
END_TEST

/* The corpus of real outputs (tests/formats/corpus/, CORPUS.md): every file in MANIFEST.tsv is detected
 * as its kind and parsed in pieces of 7 and 4096 bytes; its count (GPU rows, stacks, actions, ops) and
 * first figure are those figures.py read from the text without this parser. */
static void corpus_check(const char *file, const char *kind, long long count, const char *fig, const char *val)
{
	char rel[140];
	size_t len;

	snprintf(rel, sizeof(rel), "corpus/%s", file);
	uint8_t *d = own(rel, &len);
	int k = detect_file(d, len);
	ck_assert_msg(k > 0 && !strcmp(tf_kind_names[k], kind), "%s: detected as %s, not %s", file,
		      k >= 0 ? tf_kind_names[k] : "?", kind);
	for (size_t i = 1; i < 3; i++) {
		struct textfmt_parser *p;
		const struct tf_result *r;
		struct tp_errbuf err = { 0 };
		ck_assert_msg(parse(k, d, len, pieces[i], &p, &r, &err) == TP_OK, "%s: %s", file, err.msg);
		if (k == TF_GPULOG) {
			int c = tf_col(r, fig);
			ck_assert_msg(r->ngpu_rows == (size_t)count, "%s: %zu rows, not %lld", file, r->ngpu_rows, count);
			ck_assert_msg(c >= 0, "%s: no column %s", file, fig);
			ck_assert_msg(r->gpu_rows[0].v[c] == strtod(val, NULL), "%s: %s %g, not %s", file, fig,
				      r->gpu_rows[0].v[c], val);
		} else if (k == TF_KEYAVG) {
			/* "67.016ms": torch's units us, ms, s */
			char *u;
			double x = strtod(val, &u);
			double scale = !strcmp(u, "us") ? 1e3 : !strcmp(u, "ms") ? 1e6 : !strcmp(u, "s") ? 1e9 : 0;
			ck_assert_msg(scale > 0, "%s: footer %s", file, val);
			ck_assert_msg(r->nops == (size_t)count, "%s: %zu ops, not %lld", file, r->nops, count);
			ck_assert_str_eq(fig, "self_cpu_total");
			ck_assert_int_eq(r->self_cpu_total_ns, llround(x * scale));
		} else if (k == TF_LIGHTNING) {
			ck_assert_msg(r->nactions == (size_t)count, "%s: %zu actions, not %lld", file, r->nactions, count);
			int64_t t = r->nactions ? r->actions[0].total_ns : -1;
			ck_assert_msg(!strcmp(fig, "total") || !strcmp(fig, "max_total"), "%s: figure %s", file, fig);
			for (size_t a = 1; fig[0] == 'm' && a < r->nactions; a++)	/* AdvancedProfiler: the largest */
				t = r->actions[a].total_ns > t ? r->actions[a].total_ns : t;
			ck_assert_int_eq(t, llround(strtod(val, NULL) * 1e9));	/* seconds as printed */
		} else if (k == TF_STACKS) {
			ck_assert_msg(r->nstacks == (uint64_t)count, "%s: %llu stacks, not %lld", file,
				      (unsigned long long)r->nstacks, count);
			ck_assert_str_eq(fig, "weight");
			ck_assert_int_eq(r->stacks_total, strtoll(val, NULL, 10));
		} else {
			ck_abort_msg("%s: no check for %s", file, kind);
		}
		textfmt_parser_free(p);
	}
	free(d);
}

START_TEST(test_corpus)
{
	char line[512], file[128], kind[32], fig[64], val[64];
	long long count;
	size_t n = 0;
	char *path = tu_source_path("tests/formats/corpus/MANIFEST.tsv");
	FILE *f = fopen(path, "r");

	ck_assert_msg(f != NULL, "cannot read %s", path);
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#')
			continue;
		ck_assert_msg(sscanf(line, "%127[^\t]\t%31[^\t]\t%lld\t%63[^\t]\t%63s", file, kind, &count, fig, val) == 5,
			      "MANIFEST.tsv: %s", line);
		corpus_check(file, kind, count, fig, val);
		n++;
	}
	fclose(f);
	free(path);
	ck_assert_uint_ge(n, 76);	/* as many as CORPUS.md lists kept */
}
END_TEST

Suite *suite_textfmt(void)
{
	Suite *s = suite_create("textfmt");
	TCase *tc = tcase_create("formats");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_lightning_simple);
	tcase_add_test(tc, test_lightning_advanced);
	tcase_add_test(tc, test_lightning_functions);
	tcase_add_test(tc, test_key_averages);
	tcase_add_test(tc, test_key_averages_units);
	tcase_add_test(tc, test_key_averages_roles);
	tcase_add_test(tc, test_stacks);
	tcase_add_test(tc, test_stacks_root_first);
	tcase_add_test(tc, test_gpu_noheader);
	tcase_add_test(tc, test_gpu_repeated_header);
	tcase_add_test(tc, test_gpu_every_property);
	tcase_add_test(tc, test_gpu_multi);
	tcase_add_test(tc, test_detect_none);
	tcase_add_test(tc, test_hostile);
	tcase_add_test(tc, test_lightning_2x);
	tcase_add_test(tc, test_lightning_second_header);
	tcase_add_test(tc, test_lightning_strict);
	tcase_add_test(tc, test_key_averages_utf8_sections);
	tcase_add_test(tc, test_key_averages_log_rules);
	tcase_add_test(tc, test_key_averages_regrouped);
	tcase_add_test(tc, test_gpu_screen);
	tcase_add_test(tc, test_gpu_dmon);
	tcase_add_test(tc, test_detect_edges);
	tcase_add_test(tc, test_lightning_docs);
	tcase_add_test(tc, test_corpus);
	suite_add_tcase(s, tc);
	return s;
}
