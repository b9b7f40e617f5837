/*
 * check_analysis_pytorch.c: the analysis (server/analysis/) against
 * PyTorch's own figures for the fixtures (torch-tb-profiler, key_averages,
 * HTA), and against small PyTorch-shaped traces (synth.c): which operator
 * and step launched a kernel, what a rank did before a collective, step
 * windows, incomplete tail steps, exposed communication.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/compare.h"
#include "analysis/runs.h"
#include "hmap.h"
#include "reads.h"
#include "store/store.h"
#include "suites.h"
#include "synth.h"

/* ---- agreement with PyTorch (torch-tb-profiler, key_averages, HTA) ---- */

/*
 * kineto's own expected results for this trace (pytorch/kineto
 * tb_plugin/test/result_check_file.txt @ 041e7ce9, run
 * resnet50_num_workers_0, worker0 span 1 = the fixture's file): the overview's
 * steps in us, Kernel, Memcpy, Memset, Runtime, DataLoader, CPU Exec, Other,
 * and their total. The CPU spans are the fixture README's.
 */
static const int64_t tb_resnet_steps[6][10] = {
	/* step, total, kernel, memcpy, memset, runtime, dataloader, cpu, other, CPU span */
	{ 5, 187948, 98598, 1941, 90, 2796, 69317, 14091, 1115, 176078 },
	{ 6, 175153, 98570, 1947, 89, 2762, 57669, 12968, 1148, 173992 },
	{ 7, 179733, 98596, 1931, 91, 2877, 61257, 13768, 1213, 176918 },
	{ 8, 174564, 98623, 1938, 89, 2841, 56453, 13420, 1200, 181259 },
	{ 9, 182172, 98504, 1937, 87, 2788, 62690, 15025, 1141, 176468 },
	{ 10, 165983, 98641, 1798, 88, 3381, 48185, 12773, 1117, 164261 },
};

START_TEST(test_resnet_steps_as_tb_profiler)
{
	static const char *const comps[] = { "kernel", "memcpy", "memset", "runtime", "dataloader", "cpu", "idle" };
	json_t *j, *s;
	size_t i;

	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	j = synth_query("resnet", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 6);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		const int64_t *want = tb_resnet_steps[i];
		json_t *bd = json_object_get(s, "breakdown_ns");
		ck_assert_int_eq(synth_iget(s, "step"), want[0]);
		ck_assert_int_eq(synth_iget(s, "dur_ns"), want[1] * 1000);
		ck_assert_int_eq(synth_iget(s, "cpu_dur_ns"), want[9] * 1000);
		for (int c = 0; c < 7; c++)
			ck_assert_msg(synth_iget(bd, comps[c]) == want[2 + c] * 1000, "step %lld %s: %lld, tb %lld",
				      (long long)want[0], comps[c], (long long)synth_iget(bd, comps[c]), (long long)want[2 + c]);
		ck_assert_int_eq(synth_iget(bd, "communication"), 0);
		ck_assert(json_is_false(json_object_get(s, "incomplete")));
		/* steps follow each other: the next starts where this one ends or later */
		if (i)
			ck_assert_int_ge(synth_iget(s, "start_ns"), synth_iget(json_array_get(json_object_get(j, "steps"), i - 1), "start_ns") +
						      synth_iget(json_array_get(json_object_get(j, "steps"), i - 1), "dur_ns"));
	}
	json_decref(j);
}
END_TEST

/* The same file's operator table (result_check_file.txt line 3): name, calls, host self, host total,
 * device self, device total, in us; key_averages() semantics (same-name nesting merged). */
static const struct { const char *name; int64_t calls, hself, htotal, dself, dtotal; } tb_resnet_ops[] = {
	{ "aten::cudnn_convolution_backward_weight", 318, 22804, 40246, 142461, 142461 },
	{ "aten::cudnn_convolution_backward_input", 312, 29324, 41445, 130967, 130967 },
	{ "aten::cudnn_convolution", 318, 33121, 56998, 126619, 126619 },
	{ "aten::cudnn_batch_norm_backward", 318, 12238, 30460, 61939, 61939 },
	{ "aten::cudnn_batch_norm", 318, 19843, 71527, 34245, 34245 },
	{ "aten::threshold_backward", 294, 6090, 9482, 27298, 27298 },
	{ "aten::add_", 2994, 51013, 78125, 24098, 24098 },
	{ "aten::clamp_min", 294, 7106, 10311, 17860, 17860 },
	{ "aten::add", 414, 14329, 19289, 16038, 16038 },
	{ "aten::copy_", 588, 40255, 52853, 11492, 11492 },
	{ "aten::max_pool2d_with_indices_backward", 6, 176, 411, 3822, 4677 },
	{ "aten::mul_", 966, 20515, 29081, 2409, 2409 },
	{ "aten::fill_", 978, 9879, 17059, 1887, 1887 },
	{ "aten::max_pool2d_with_indices", 6, 477, 562, 1420, 1420 },
	{ "aten::mm", 12, 575, 860, 275, 275 },
	{ "aten::mean", 6, 234, 445, 212, 212 },
	{ "aten::addmm", 6, 639, 1034, 197, 197 },
	{ "aten::div", 198, 20135, 35158, 144, 144 },
	{ "aten::_log_softmax_backward_data", 6, 108, 306, 53, 53 },
	{ "aten::sum", 6, 153, 327, 44, 44 },
	{ "aten::_log_softmax", 6, 170, 433, 42, 42 },
	{ "aten::nll_loss_forward", 6, 266, 346, 18, 18 },
	{ "aten::nll_loss_backward", 6, 388, 614, 18, 18 },
	{ "aten::empty", 4404, 68147, 68147, 0, 0 },
	{ "aten::zero_", 996, 10693, 27597, 0, 1881 },
	{ "aten::zeros", 24, 659, 1105, 0, 0 },
	{ "aten::view", 846, 14027, 14027, 0, 0 },
	{ "aten::as_strided", 432, 7600, 7600, 0, 0 },
	{ "aten::permute", 192, 5515, 9775, 0, 0 },
	{ "aten::empty_like", 528, 11742, 26064, 0, 0 },
	{ "aten::contiguous", 192, 5510, 31137, 0, 0 },
	{ "aten::empty_strided", 402, 11829, 11829, 0, 0 },
	{ "aten::to", 414, 14834, 64332, 0, 11492 },
	{ "aten::unsqueeze", 192, 3574, 6603, 0, 0 },
	{ "aten::resize_", 1902, 12406, 12406, 0, 0 },
	{ "aten::slice", 6, 123, 223, 0, 0 },
	{ "aten::narrow", 6, 127, 350, 0, 0 },
	{ "aten::_cat", 6, 16282, 16933, 0, 0 },
	{ "aten::cat", 6, 152, 17085, 0, 0 },
	{ "aten::stack", 6, 658, 24346, 0, 0 },
	{ "detach_", 6, 100, 100, 0, 0 },
	{ "aten::detach_", 6, 108, 208, 0, 0 },
	{ "aten::_convolution", 318, 7245, 64243, 0, 126619 },
	{ "aten::convolution", 318, 6151, 70394, 0, 126619 },
	{ "aten::conv2d", 318, 7387, 77781, 0, 126619 },
	{ "aten::_batch_norm_impl_index", 318, 6544, 78071, 0, 34245 },
	{ "aten::batch_norm", 318, 9906, 87977, 0, 34245 },
	{ "aten::clamp_min_", 294, 5354, 15665, 0, 17860 },
	{ "aten::relu_", 294, 8516, 24181, 0, 17860 },
	{ "aten::max_pool2d", 6, 125, 687, 0, 1420 },
	{ "aten::adaptive_avg_pool2d", 6, 116, 561, 0, 212 },
	{ "aten::flatten", 6, 84, 164, 0, 0 },
	{ "aten::transpose", 30, 197, 329, 0, 0 },
	{ "aten::t", 30, 255, 584, 0, 0 },
	{ "aten::expand", 12, 150, 229, 0, 0 },
	{ "aten::linear", 6, 124, 1408, 0, 197 },
	{ "aten::log_softmax", 6, 90, 567, 0, 42 },
	{ "aten::nll_loss", 6, 68, 414, 0, 18 },
	{ "aten::nll_loss_nd", 6, 81, 495, 0, 18 },
	{ "aten::cross_entropy_loss", 6, 118, 1180, 0, 60 },
	{ "aten::ones_like", 6, 95, 452, 0, 6 },
	{ "NllLossBackward", 6, 102, 716, 0, 18 },
	{ "LogSoftmaxBackward", 6, 53, 359, 0, 53 },
	{ "aten::conj", 12, 12, 12, 0, 0 },
	{ "AddmmBackward", 6, 182, 1303, 0, 275 },
	{ "torch::autograd::AccumulateGrad", 966, 5457, 28494, 0, 3030 },
	{ "TBackward", 6, 18, 103, 0, 0 },
	{ "aten::reshape", 6, 29, 55, 0, 0 },
	{ "ViewBackward", 6, 25, 80, 0, 0 },
	{ "MeanBackward1", 6, 541, 987, 0, 144 },
	{ "ReluBackward1", 294, 2174, 11656, 0, 27298 },
	{ "AddBackward0", 96, 175, 175, 0, 0 },
	{ "CudnnBatchNormBackward", 318, 4148, 34608, 0, 61939 },
	{ "aten::cudnn_convolution_backward", 318, 6081, 87772, 0, 273428 },
	{ "CudnnConvolutionBackward", 318, 3217, 90989, 0, 273428 },
	{ "MaxPool2DWithIndicesBackward", 6, 73, 484, 0, 4677 },
};

START_TEST(test_resnet_ops_as_key_averages)
{
	json_t *c, *g, *o;
	size_t i, k;

	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	c = synth_query("resnet", Q_OPS_CPU);
	g = synth_query("resnet", Q_OPS_GPU);
	ck_assert_uint_eq(sizeof(tb_resnet_ops) / sizeof(tb_resnet_ops[0]), 76);
	for (k = 0; k < sizeof(tb_resnet_ops) / sizeof(tb_resnet_ops[0]); k++) {
		json_t *cr = NULL, *gr = NULL;
		json_array_foreach(json_object_get(c, "ops"), i, o)
			if (!strcmp(json_string_value(json_object_get(o, "name")), tb_resnet_ops[k].name))
				cr = o;
		json_array_foreach(json_object_get(g, "ops"), i, o)
			if (!strcmp(json_string_value(json_object_get(o, "name")), tb_resnet_ops[k].name))
				gr = o;
		ck_assert_msg(cr != NULL, "no row %s", tb_resnet_ops[k].name);
		ck_assert_msg(synth_iget(cr, "calls") == tb_resnet_ops[k].calls && synth_iget(cr, "self_ns") == tb_resnet_ops[k].hself * 1000 &&
			      synth_iget(cr, "total_ns") == tb_resnet_ops[k].htotal * 1000,
			      "%s: calls %lld self %lld total %lld", tb_resnet_ops[k].name, (long long)synth_iget(cr, "calls"),
			      (long long)synth_iget(cr, "self_ns"), (long long)synth_iget(cr, "total_ns"));
		ck_assert_int_eq(gr ? synth_iget(gr, "self_ns") : 0, tb_resnet_ops[k].dself * 1000);
		ck_assert_int_eq(gr ? synth_iget(gr, "total_ns") : 0, tb_resnet_ops[k].dtotal * 1000);
	}
	json_decref(c);
	json_decref(g);
}
END_TEST

/* PyTorch 1.9 [memory] events carry no Total Allocated: /runs shows the rebuilt series' peak. */
START_TEST(test_runs_peak_from_rebuilt_series)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *runs, *mem;

	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	ck_assert_int_eq(store_reader_open(synth_st, &r, &err), 0);
	runs = read_runs(r, &err);
	mem = read_memory(r, "resnet", -1, NULL, 0, INT64_MIN, INT64_MAX, NULL, 0, &err);
	store_reader_close(r);
	ck_assert_ptr_nonnull(runs);
	ck_assert_ptr_nonnull(mem);
	json_t *peak = json_object_get(json_array_get(json_object_get(runs, "runs"), 0), "peak_allocated_bytes");
	ck_assert_msg(json_is_integer(peak), "peak_allocated_bytes is not a number");
	ck_assert_int_eq(json_integer_value(peak), synth_iget(json_object_get(mem, "peak"), "bytes"));
	ck_assert_int_gt(json_integer_value(peak), 2000000000);	/* 2.79 GB */
	json_decref(runs);
	json_decref(mem);
}
END_TEST

/* ---- each step's kernel time is the union of the kernels it launched, computed here ---- */

struct launched {
	struct trace_parser *tp;
	struct analysis *an;
	int64_t (*steps)[2];
	size_t nsteps;
	int64_t (*rt)[2], (*op)[2];	/* (correlation or External id, ts) */
	size_t nrt, nop;
	int64_t (*k)[4];		/* computation kernels: corr, ext, start, end */
	size_t nk;
};

/* grows by doubling, at each power of two: ASan's realloc always moves, so one more each time was quadratic */
#define PUSH(arr, n, ...) do { \
	if (((n) & ((n) - 1)) == 0) { \
		(arr) = realloc((arr), ((n) ? 2 * (n) : 1) * sizeof(*(arr))); \
		ck_assert_ptr_nonnull(arr); \
	} \
	int64_t v_[] = { __VA_ARGS__ }; \
	memcpy((arr)[(n)++], v_, sizeof(v_)); \
} while (0)

static int launched_event(void *p, const struct tp_event *e)
{
	struct launched *l = p;
	struct tp_errbuf err = { 0 };
	const char *cat = synth_str_of(l->tp, e->cat), *name = synth_str_of(l->tp, e->name);
	int64_t end = e->ts_ns + ((e->have & TH_DUR) ? e->dur_ns : 0);

	ck_assert_int_eq(analysis_event(l->an, e, &err), 0);
	if (e->ph != 'X' || !(e->have & TH_TS))
		return 0;
	if (!strncmp(name, "ProfilerStep#", 13) && strcmp(cat, "gpu_user_annotation"))
		PUSH(l->steps, l->nsteps, e->ts_ns, end);
	else if ((!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver") || !strcmp(cat, "Runtime")) &&
		 (e->have & TH_CORR))
		PUSH(l->rt, l->nrt, e->corr, e->ts_ns);
	else if ((!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator") || !strcmp(cat, "user_annotation")) &&
		 (e->have & TH_EXT))
		PUSH(l->op, l->nop, e->ext_id, e->ts_ns);
	else if ((!strcmp(cat, "kernel") || !strcmp(cat, "Kernel")) &&
		 an_kernel_class(name, AN_GPU_KERNEL) == AN_KC_COMPUTATION)
		PUSH(l->k, l->nk, (e->have & TH_CORR) ? e->corr : -1, (e->have & TH_EXT) ? e->ext_id : -1, e->ts_ns, end);
	return 0;
}

START_TEST(test_kernel_time_is_what_the_step_launched)
{
	static const char *const files[] = { "traces/hta_v100_train_memory.json.gz",
					     "traces/kineto_resnet50_workers0.json.gz",
					     "traces/hta_nccl_rel_ts.json.gz", "traces/hta_ns_resolution.json.gz",
					     "traces/hta_sampled_rank0.json.gz" };
	struct launched l = { 0 };
	struct tp_errbuf err = { 0 };
	const struct an_result *res;
	char *path = tu_fixture(files[_i]);
	size_t len, glen, i, s;
	uint8_t *gz = tu_read_file(path, &len), *json = tu_gunzip(gz, len, &glen);
	struct trace_sink sink = { .string = synth_busy_string, .event = launched_event, .payload = &l };

	ck_assert_ptr_nonnull(json);
	l.tp = trace_parser_new(&trace_default_limits, &sink);
	l.an = analysis_new(synth_str_of, l.tp);
	ck_assert_int_eq(trace_parser_feed(l.tp, json, glen, &err), 0);
	ck_assert_int_eq(trace_parser_finish(l.tp, &err), 0);
	ck_assert_int_eq(analysis_finish(l.an, &res, &err), 0);
	ck_assert_uint_eq(res->nsteps, l.nsteps);
	qsort(l.steps, l.nsteps, sizeof(*l.steps), synth_cmp_pair);
	qsort(l.rt, l.nrt, sizeof(*l.rt), synth_cmp_pair);
	qsort(l.op, l.nop, sizeof(*l.op), synth_cmp_pair);
	for (s = 0; s < l.nsteps; s++) {
		/* the kernels launched in step s: by correlation, else External id; their union */
		int64_t *iv = NULL, want;
		size_t n = 0;
		for (i = 0; i < l.nk; i++) {
			int64_t t = INT64_MIN, *hit = NULL;
			if (l.k[i][0] >= 0)
				hit = bsearch(l.k[i], l.rt, l.nrt, sizeof(*l.rt), synth_cmp_pair);
			if (!hit && l.k[i][1] >= 0)
				hit = bsearch(&l.k[i][1], l.op, l.nop, sizeof(*l.op), synth_cmp_pair);
			if (hit)
				t = hit[1];
			if (t < l.steps[s][0] || t >= l.steps[s][1])
				continue;
			if ((n & (n - 1)) == 0) {	/* n even: 0, 2, 4, 8, ... */
				iv = realloc(iv, (n ? 2 * n : 2) * sizeof(int64_t));
				ck_assert_ptr_nonnull(iv);
			}
			iv[n++] = l.k[i][2];
			iv[n++] = l.k[i][3];
		}
		want = n ? synth_union_len(iv, n) : 0;
		free(iv);
		ck_assert_msg(llabs(res->steps[s].comp_ns[AN_KERNEL] - want) <= want / 100,
			      "%s step %lld: kernel %lld, launched %lld", files[_i], (long long)res->steps[s].step,
			      (long long)res->steps[s].comp_ns[AN_KERNEL], (long long)want);
		ck_assert_int_gt(want, 0);
	}
	analysis_free(l.an);
	trace_parser_free(l.tp);
	free(l.steps);
	free(l.rt);
	free(l.op);
	free(l.k);
	free(json);
	free(gz);
	free(path);
}
END_TEST

/* Sum of member over steps [from, to) of a /steps answer. */
static json_int_t steps_sum(json_t *j, size_t from, size_t to, const char *member)
{
	json_int_t sum = 0;

	for (size_t i = from; i < to; i++) {
		json_t *s = json_array_get(json_object_get(j, "steps"), i);
		json_t *v = json_object_get(json_object_get(s, "breakdown_ns"), member);
		sum += json_integer_value(v ? v : json_object_get(s, member));
	}
	return sum;
}

/* GPU utilization over all the steps of a /steps answer: busy time over their time. */
static double utilization(json_t *j)
{
	double busy = 0, all = 0;
	json_t *s;
	size_t i;

	json_array_foreach(json_object_get(j, "steps"), i, s) {
		busy += json_real_value(json_object_get(s, "gpu_utilization_pct")) / 100 * (double)synth_iget(s, "dur_ns");
		all += (double)synth_iget(s, "dur_ns");
	}
	return all > 0 ? busy / all : 0;
}

/*
 * Where the peers agree with us (tests/peers/README.md): HTA's temporal and
 * kernel breakdowns cover the steps but the last; torch-tb-profiler's GPU
 * utilization is the time any kernel runs over the steps' time.
 */
START_TEST(test_figures_peers_agree_on)
{
	json_t *j;
	double u;

	synth_ingest_fixture("v100", "traces/hta_v100_train_memory.json.gz");
	j = synth_query("v100", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 4, "kernel"), 496485000);		/* HTA compute_time, steps 2-5 */
	/* HTA's COMMUNICATION kernels (238,274 us: none under computation), and the host's
	 * nccl:all_reduce spans where no GPU work runs (42,618 us: torch-tb-profiler's Communication
	 * column, to the us; its Kernel holds these NCCL kernels): tb's Runtime, CPU Exec and Other
	 * are then our runtime, cpu and idle to the us */
	ck_assert_int_eq(steps_sum(j, 0, 4, "communication"), 238274000 + 42618000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "runtime"), 19690000 + 21615000 + 19046000 + 19153000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "cpu"), 115751000 + 132224000 + 117143000 + 115300000);
	ck_assert_int_eq(steps_sum(j, 0, 4, "idle"), 11545000 + 11656000 + 11445000 + 11149000);
	ck_assert_int_eq(steps_sum(j, 0, 5, "comm_overlap_ns"), 0);
	ck_assert_msg(fabs(utilization(j) - 0.562666) < 0.0001, "v100 GPU utilization %f, tb 56.2666%%", utilization(j));
	json_decref(j);
	synth_ingest_fixture("resnet", "traces/kineto_resnet50_workers0.json.gz");
	j = synth_query("resnet", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 5, "kernel"), 492891000);		/* HTA compute_time, steps 5-9 */
	ck_assert_msg(fabs(utilization(j) - 0.555141) < 0.0001, "resnet GPU utilization %f, tb 55.5141%%", utilization(j));
	json_decref(j);
	synth_ingest_fixture("r0", "traces/hta_sampled_rank0.json.gz");
	j = synth_query("r0", Q_STEPS);
	ck_assert_int_eq(steps_sum(j, 0, 1, "kernel"), 106252000);		/* HTA compute_time, step 551 */
	ck_assert_int_eq(steps_sum(j, 0, 2, "dur_ns"), 607312000 + 622928000);	/* fixtures README */
	ck_assert_msg(fabs((u = utilization(j)) - 0.444857) < 0.0001, "r0 GPU utilization %f, tb 44.4857%%", u);
	json_decref(j);
	synth_ingest_fixture("r1", "traces/hta_sampled_rank1.json.gz");
	j = synth_query("r1", Q_STEPS);
	ck_assert_msg(fabs((u = utilization(j)) - 0.464637) < 0.0001, "r1 GPU utilization %f, tb 46.4637%%", u);
	json_decref(j);
}
END_TEST

static void add_pytorch_fixture_tests(TCase *tc)
{
	tcase_add_test(tc, test_figures_peers_agree_on);
	tcase_add_loop_test(tc, test_kernel_time_is_what_the_step_launched, 0, 5);
	tcase_add_test(tc, test_resnet_steps_as_tb_profiler);
	tcase_add_test(tc, test_resnet_ops_as_key_averages);
	tcase_add_test(tc, test_runs_peak_from_rebuilt_series);
}

static void ingest_text(const char *run, struct text *t)
{
	synth_emit(t, "]}");
	synth_ingest(run, t->p, t->n);
	free(t->p);
}

static void launch(struct text *t, int64_t at, int64_t corr, int stream, const char *kernel, int64_t ks, int64_t kd)
{
	char args[96];

	snprintf(args, sizeof(args), "\"correlation\":%lld", (long long)corr);
	synth_span(t, "cuda_runtime", "cudaLaunchKernel", 1, 1, at, 1, args);
	snprintf(args, sizeof(args), "\"correlation\":%lld,\"stream\":%d", (long long)corr, stream);
	synth_span(t, "kernel", kernel, 0, stream, ks, kd, args);
}

/*
 * Which operator launched a GPU span (link_maps()): the one above the
 * runtime call its correlation id names; else, when that call is under no
 * operator or no call has the id, the operator its External id names;
 * the first of two calls with one id (in start order) is the one; a CUDA
 * graph's kernels share their launch's id. Answers as before the maps held
 * only the ids GPU spans name.
 */
START_TEST(test_gpu_launchers)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	const char *names[] = { "opA", "opB", "opC", "opD", "opE", "opG" };
	const json_int_t want[] = { 10000, 20000, 40000, 3000, 0, 9000 };
	json_t *g, *o;
	size_t i, k;
	int seen = 0;

	synth_emit(&t, "{\"traceEvents\":[");
	synth_span(&t, "cpu_op", "opA", 1, 1, b, 100, "\"External id\":1");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 10, 5, "\"correlation\":100");
	/* under no operator: its kernel goes to the External id's, opB */
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 200, 5, "\"correlation\":101");
	synth_span(&t, "cpu_op", "opB", 1, 1, b + 300, 50, "\"External id\":2");
	synth_span(&t, "cpu_op", "opC", 1, 1, b + 400, 50, "\"External id\":3");
	/* two calls with correlation 102: the earlier one, under opD, launched it */
	synth_span(&t, "cpu_op", "opE", 1, 1, b + 700, 50, "\"External id\":5");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 710, 5, "\"correlation\":102");
	synth_span(&t, "cpu_op", "opD", 1, 1, b + 600, 50, "\"External id\":4");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 610, 5, "\"correlation\":102");
	/* a CUDA graph: one launch, one correlation id, three kernels */
	synth_span(&t, "cpu_op", "opG", 1, 1, b + 1000, 50, "\"External id\":6");
	synth_span(&t, "cuda_runtime", "cudaGraphLaunch", 1, 1, b + 1010, 5, "\"correlation\":103");
	synth_span(&t, "kernel", "g1", 0, 7, b + 1020, 2, "\"correlation\":103");
	synth_span(&t, "kernel", "g2", 0, 7, b + 1022, 3, "\"correlation\":103");
	synth_span(&t, "kernel", "g3", 0, 7, b + 1025, 4, "\"correlation\":103");
	/* correlation found under opA: its External id (opC's) is not asked */
	synth_span(&t, "kernel", "k1", 0, 7, b + 20, 10, "\"correlation\":100,\"External id\":3");
	synth_span(&t, "kernel", "k2", 0, 7, b + 210, 20, "\"correlation\":101,\"External id\":2");
	/* no runtime call has correlation 999 */
	synth_span(&t, "kernel", "k3", 0, 7, b + 500, 40, "\"correlation\":999,\"External id\":3");
	synth_span(&t, "kernel", "k4", 0, 7, b + 800, 3, "\"correlation\":102");
	/* nothing names a launcher */
	synth_span(&t, "kernel", "k5", 0, 7, b + 900, 8, "");
	synth_span(&t, "kernel", "k6", 0, 7, b + 950, 8, "\"correlation\":998,\"External id\":77");
	ingest_text("launchers", &t);
	g = synth_query("launchers", Q_OPS_GPU);
	json_array_foreach(json_object_get(g, "ops"), i, o) {
		const char *n = json_string_value(json_object_get(o, "name"));
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (!strcmp(n, names[k])) {
				ck_assert_msg(synth_iget(o, "self_ns") == want[k], "%s: GPU self %lld, want %lld", n,
					      (long long)synth_iget(o, "self_ns"), (long long)want[k]);
				ck_assert_int_eq(synth_iget(o, "total_ns"), want[k]);
				seen |= 1 << k;
			}
	}
	/* opE launched nothing: no GPU row */
	ck_assert_int_eq(seen, 0x2f);
	ck_assert_int_eq(synth_iget(json_object_get(g, "total"), "self_ns"), 82000);
	json_decref(g);
}
END_TEST

/* The analysis's map: reserve makes room without growing later, find changes a value in place. */
START_TEST(test_hmap_reserve_find)
{
	struct hmap m = { 0 };
	uint32_t *v;
	size_t cap;

	ck_assert_ptr_null(hmap_find(&m, 7));
	ck_assert_uint_eq(hmap_get(&m, 7), UINT32_MAX);
	ck_assert_int_eq(hmap_reserve(&m, 100000), 0);
	cap = m.cap;
	ck_assert_uint_ge(cap, 200000);
	for (uint64_t k = 0; k < 100000; k++)
		ck_assert_ptr_nonnull(hmap_put(&m, k * 0x9e3779b97f4a7c15ULL, (uint32_t)k));
	ck_assert_uint_eq(m.cap, cap);	/* no growth: room was made */
	ck_assert_uint_eq(m.n, 100000);
	ck_assert_int_eq(hmap_reserve(&m, 10), 0);	/* never shrinks */
	ck_assert_uint_eq(m.cap, cap);
	ck_assert_ptr_nonnull(v = hmap_find(&m, 5 * 0x9e3779b97f4a7c15ULL));
	ck_assert_uint_eq(*v, 5);
	*v = 77;
	ck_assert_uint_eq(hmap_get(&m, 5 * 0x9e3779b97f4a7c15ULL), 77);
	ck_assert_ptr_null(hmap_find(&m, 3));	/* not a key: nothing inserted */
	ck_assert_uint_eq(m.n, 100000);
	/* put keeps the first value */
	ck_assert_uint_eq(*hmap_put(&m, 0, 9), 0);
	/* growth past the reservation keeps every key */
	for (uint64_t k = 100000; k < 300000; k++)
		ck_assert_ptr_nonnull(hmap_put(&m, k * 0x9e3779b97f4a7c15ULL, (uint32_t)k));
	ck_assert_uint_gt(m.cap, cap);
	for (uint64_t k = 0; k < 300000; k += 997)
		ck_assert_uint_eq(hmap_get(&m, k * 0x9e3779b97f4a7c15ULL), k == 5 ? 77 : (uint32_t)k);
	hmap_free(&m);
}
END_TEST

static int no_string(void *p, uint32_t id, const char *str, size_t len)
{
	(void)p, (void)id, (void)str, (void)len;
	return 0;
}

struct parsed {
	struct trace_parser *tp;
	struct analysis *an;
};

static int to_analysis(void *p, const struct tp_event *e)
{
	struct tp_errbuf err = { 0 };

	return analysis_event(((struct parsed *)p)->an, e, &err);
}

/* t's trace through the parser into pa's analysis, finished (analysis_free and trace_parser_free pa's). */
static const struct an_result *analyse(struct parsed *pa, const struct text *t)
{
	struct trace_sink sink = { .string = no_string, .event = to_analysis, .payload = pa };
	struct tp_errbuf err = { 0 };
	const struct an_result *res;

	pa->tp = trace_parser_new(&trace_default_limits, &sink);
	pa->an = analysis_new(synth_str_of, pa->tp);
	ck_assert_ptr_nonnull(pa->an);
	ck_assert_int_eq(trace_parser_feed(pa->tp, (const uint8_t *)t->p, t->n, &err), 0);
	ck_assert_int_eq(trace_parser_finish(pa->tp, &err), 0);
	ck_assert_int_eq(analysis_finish(pa->an, &res, &err), 0);
	return res;
}

/*
 * What a rank did before each collective (an_coll.before_op): the
 * top-level operator with the most time between the thread's previous
 * launch (or the step's start) and this one, a long one that began before
 * the window included, its children never. Two collectives launched inside
 * "bwd": the second's window lies wholly inside it.
 */
START_TEST(test_before_op_top_level)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000, at[3] = { 300, 800, 985 };
	const char *const want[3] = { "bwd", "bwd", "opt" };
	const int64_t want_ns[3] = { 200000, 500000, 120000 };
	struct parsed pa;
	const struct an_result *res;
	char args[64];

	synth_emit(&t, "{\"traceEvents\":[");
	synth_span(&t, "user_annotation", "ProfilerStep#1", 1, 1, b, 1000, "");
	synth_span(&t, "cpu_op", "fwd", 1, 1, b, 100, "");
	synth_span(&t, "cpu_op", "bwd", 1, 1, b + 100, 750, "");
	synth_span(&t, "cpu_op", "mm", 1, 1, b + 150, 100, "");
	synth_span(&t, "cpu_op", "mm", 1, 1, b + 350, 400, "");
	synth_span(&t, "cpu_op", "opt", 1, 1, b + 860, 120, "");
	for (int k = 0; k < 3; k++) {
		synth_span(&t, "cpu_op", "record_param_comms", 1, 1, b + at[k], 4, "");
		snprintf(args, sizeof(args), "\"correlation\":%d", k + 1);
		synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + at[k] + 1, 2, args);
		synth_span(&t, "kernel", "ncclKernel_AllReduce_RING_LL_Sum_float", 0, 7, b + at[k] + 20, 10, args);
	}
	synth_emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->ncolls, 3);
	struct an_coll *cs = synth_colls_of(res);
	for (int k = 0; k < 3; k++) {
		const struct an_coll *c = &cs[k];
		ck_assert_int_eq(c->launch_ns, (b + at[k]) * 1000);
		ck_assert_str_eq(synth_str_of(pa.tp, c->before_op), want[k]);
		ck_assert_int_eq(c->before_ns, want_ns[k]);
	}
	free(cs);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * exposed_communication_ranks lists the ranks over DIST_EXPOSED_PCT only: at
 * 10.0 % exactly, or under, a rank is left out (check_distributed's two-rank
 * trace has both its ranks over the line since the host's nccl:all_reduce
 * counts as communication).
 */
START_TEST(test_exposed_ranks_threshold)
{
	json_t *body = json_pack("{s:[{s:i, s:{s:f, s:f}}, {s:i, s:{s:f, s:f}}, {s:i, s:{s:f, s:f}}]}", "ranks",
				 "rank", 0, "total", "exposed_communication_pct", 22.0, "overlap_pct", 31.25,
				 "rank", 1, "total", "exposed_communication_pct", 9.1, "overlap_pct", 66.7,
				 "rank", 2, "total", "exposed_communication_pct", DIST_EXPOSED_PCT, "overlap_pct", 50.0);
	json_t *out, *f = NULL, *x;
	size_t i;

	ck_assert_ptr_nonnull(body);
	out = distributed_findings(body, NULL);
	ck_assert_ptr_nonnull(out);
	json_array_foreach(out, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "id")), "exposed_communication_ranks"))
			f = x;
	ck_assert_ptr_nonnull(f);
	json_t *ranks = json_object_get(json_object_get(f, "evidence"), "ranks");
	ck_assert_uint_eq(json_array_size(ranks), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ranks, 0), "rank")), 0);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "title")), "1 of 3 ranks"));
	json_decref(out);
	json_decref(body);
}
END_TEST

/*
 * A profiling window's first step starts when the GPU work queued before it
 * ends (torch-tb-profiler's rule: breakdown()'s queued()). Window one: step 5
 * launches its kernel at 1 ms while a kernel no call in the trace launched
 * (queued before the window) runs until 29 ms; step 5 runs from 29 ms to
 * its kernel's end at 40 (10 ms of kernel), not from the host's 0. Window two: steps 15
 * and 16, with queued work before each: 15 starts after its own (which ends
 * before 15's kernel starts), 16 (not a window's first) right after 15. Step
 * 30 launches nothing: the host's span.
 */
START_TEST(test_window_first_step)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	struct parsed pa;
	const struct an_result *res;

	synth_emit(&t, "{\"traceEvents\":[");
	synth_span(&t, "user_annotation", "ProfilerStep#5", 1, 1, b, 10000, "");
	synth_span(&t, "kernel", "queued_gemm", 0, 7, b + 2000, 27000, "\"correlation\":100");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1000, 5, "\"correlation\":1");
	synth_span(&t, "kernel", "own_gemm", 0, 7, b + 30000, 10000, "\"correlation\":1");
	/* window two, 1 s on */
	synth_span(&t, "user_annotation", "ProfilerStep#15", 1, 1, b + 1000000, 10000, "");
	synth_span(&t, "user_annotation", "ProfilerStep#16", 1, 1, b + 1010000, 10000, "");
	synth_span(&t, "kernel", "queued_gemm", 0, 7, b + 1001000, 8000, "\"correlation\":101");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1002000, 5, "\"correlation\":2");
	synth_span(&t, "kernel", "own_gemm", 0, 7, b + 1010000, 4000, "\"correlation\":2");
	synth_span(&t, "kernel", "queued_gemm", 0, 7, b + 1014000, 3000, "\"correlation\":102");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 1011000, 5, "\"correlation\":3");
	synth_span(&t, "kernel", "own_gemm", 0, 7, b + 1017000, 4000, "\"correlation\":3");
	synth_span(&t, "user_annotation", "ProfilerStep#30", 1, 1, b + 2000000, 5000, "");
	synth_emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->nsteps, 4);
	const struct an_step *sp = res->steps;
	ck_assert_int_eq(sp[0].step, 5);
	ck_assert_int_eq(sp[0].start_ns, (b + 29000) * 1000);
	ck_assert_int_eq(sp[0].dur_ns, 11000 * 1000);
	ck_assert_int_eq(sp[0].comp_ns[AN_KERNEL], 10000 * 1000);
	ck_assert_int_eq(sp[0].cpu_dur_ns, 10000 * 1000);
	ck_assert_int_eq(sp[1].step, 15);
	ck_assert_int_eq(sp[1].start_ns, (b + 1009000) * 1000);	/* after the queued kernel's end */
	ck_assert_int_eq(sp[1].dur_ns, 5000 * 1000);	/* to 1014 ms: its kernel's end */
	ck_assert_int_eq(sp[1].comp_ns[AN_KERNEL], 4000 * 1000);
	ck_assert_int_eq(sp[2].step, 16);
	ck_assert_int_eq(sp[2].start_ns, (b + 1014000) * 1000);	/* step 15's end: not after 16's queued one */
	ck_assert_int_eq(sp[2].dur_ns, 7000 * 1000);
	/* a kernel no call launched counts for the step it starts in (gpu_launch()) */
	ck_assert_int_eq(sp[2].comp_ns[AN_KERNEL], 7000 * 1000);
	ck_assert_int_eq(sp[3].step, 30);
	ck_assert_int_eq(sp[3].start_ns, (b + 2000000) * 1000);
	ck_assert_int_eq(sp[3].dur_ns, 5000 * 1000);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * gloo collectives run on host threads: each outermost gloo:* span with no
 * communication kernel is one collective (launch, start and end its span,
 * no kernels); a gloo:* span inside another is part of it, and one above a
 * communication kernel is that kernel's collective, not a second.
 */
START_TEST(test_gloo_host_collectives)
{
	struct text t = { .p = malloc(2048), .cap = 2048 };
	const int64_t b = 1000000;
	struct parsed pa;
	const struct an_result *res;

	synth_emit(&t, "{\"traceEvents\":[");
	synth_span(&t, "user_annotation", "ProfilerStep#3", 1, 1, b, 1000, "");
	synth_span(&t, "cpu_op", "c10d::allreduce_", 1, 1, b + 10, 2, "");
	synth_span(&t, "user_annotation", "gloo:all_reduce", 1, 9, b + 20, 300, "");
	synth_span(&t, "user_annotation", "gloo:broadcast", 1, 9, b + 50, 20, "");	/* inside the all_reduce */
	synth_span(&t, "user_annotation", "gloo:all_gather", 1, 8, b + 400, 100, "");
	/* a gloo:* span above a communication kernel: the kernel's collective */
	synth_span(&t, "user_annotation", "gloo:reduce_scatter", 1, 1, b + 600, 50, "");
	synth_span(&t, "cuda_runtime", "cudaLaunchKernel", 1, 1, b + 601, 2, "\"correlation\":5");
	synth_span(&t, "kernel", "ncclKernel_ReduceScatter_RING_LL_Sum_float", 0, 7, b + 620, 10, "\"correlation\":5");
	synth_emit(&t, "]}");
	res = analyse(&pa, &t);
	ck_assert_uint_eq(res->ncolls, 3);
	struct an_coll *cs = synth_colls_of(res);
	/* by launch */
	ck_assert_int_eq(cs[0].kind, AN_CK_ALL_REDUCE);
	ck_assert_int_eq(cs[0].launch_ns, (b + 20) * 1000);
	ck_assert_int_eq(cs[0].start_ns, (b + 20) * 1000);
	ck_assert_int_eq(cs[0].end_ns, (b + 320) * 1000);
	ck_assert_int_eq(cs[0].time_ns, 300000);
	ck_assert_int_eq(cs[0].kernels, 0);
	ck_assert_int_eq(cs[0].step, 3);
	ck_assert_int_eq(cs[1].kind, AN_CK_ALL_GATHER);
	ck_assert_int_eq(cs[1].time_ns, 100000);
	ck_assert_int_eq(cs[2].kind, AN_CK_REDUCE_SCATTER);
	ck_assert_int_eq(cs[2].kernels, 1);
	ck_assert_int_eq(cs[2].time_ns, 10000);
	free(cs);
	analysis_free(pa.an);
	trace_parser_free(pa.tp);
	free(t.p);
}
END_TEST

/*
 * The CPU runs two steps ahead of the GPU: step k (CPU [100k, 100k + 100))
 * launches two 90 us kernels that run at [50 + 180k, 230 + 180k). The GPU
 * mirrors are made up, shorter than the work for steps 0 and 1 and longer
 * for 2 and 3: they must not clip it. Each step owns its 180 us of kernels
 * and ends when they do (torch-tb-profiler's step span).
 */
START_TEST(test_steps_own_what_they_launched)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	json_t *j, *s;
	size_t i;
	char name[32];

	synth_emit(&t, "{\"traceEvents\":[");
	for (int k = 0; k < 4; k++) {
		int64_t c = b + 100 * k, g = b + 50 + 180 * k;
		snprintf(name, sizeof(name), "ProfilerStep#%d", k);
		synth_span(&t, "user_annotation", name, 1, 1, c, 100, "");
		synth_span(&t, "gpu_user_annotation", name, 0, 7, k < 2 ? g : g - 100, k < 2 ? 50 : 380, "");
		synth_span(&t, "cpu_op", "aten::mm", 1, 1, c + 10, 20, "");
		launch(&t, c + 10, 2 * k + 1, 7, "gemm", g, 90);
		launch(&t, c + 20, 2 * k + 2, 7, "gemm", g + 90, 90);
	}
	ingest_text("ahead", &t);
	synth_check_breakdown_sums("ahead", 4);
	j = synth_query("ahead", Q_STEPS);
	json_array_foreach(json_object_get(j, "steps"), i, s) {
		json_t *bd = json_object_get(s, "breakdown_ns");
		ck_assert_int_eq(synth_iget(s, "cpu_dur_ns"), 100000);
		ck_assert_int_eq(synth_iget(bd, "kernel"), 180000);
		/* step 0 from its CPU start, the others from the end of the one before */
		ck_assert_int_eq(synth_iget(s, "start_ns"), i ? (b + 50 + 180 * (int64_t)i) * 1000 : b * 1000);
		ck_assert_int_eq(synth_iget(s, "dur_ns"), i ? 180000 : 230000);
		ck_assert(json_is_false(json_object_get(s, "incomplete")));
		ck_assert(json_is_false(json_object_get(s, "whole_trace")));
	}
	json_decref(j);
}
END_TEST

/*
 * key_averages(): aten::mm in aten::mm in aten::mm, each the only child, is
 * one call with the 8 us kernel once; aten::add with two children is not
 * merged. Two kernels overlapping on one stream both count.
 */
START_TEST(test_same_name_nesting_and_overlap)
{
	struct text t = { .p = malloc(1024), .cap = 1024 };
	const int64_t b = 1000000;
	json_t *c, *g, *k, *o, *sj;
	size_t i;
	int seen = 0;

	synth_emit(&t, "{\"traceEvents\":[");
	synth_span(&t, "user_annotation", "ProfilerStep#1", 1, 1, b, 100, "");
	synth_span(&t, "cpu_op", "aten::mm", 1, 1, b + 10, 40, "");
	synth_span(&t, "cpu_op", "aten::mm", 1, 1, b + 11, 38, "");
	synth_span(&t, "cpu_op", "aten::mm", 1, 1, b + 12, 36, "");
	launch(&t, b + 13, 1, 7, "gemm", b + 20, 8);
	synth_span(&t, "cpu_op", "aten::add", 1, 1, b + 60, 30, "");
	synth_span(&t, "cpu_op", "aten::add", 1, 1, b + 61, 9, "");
	synth_span(&t, "cpu_op", "aten::copy_", 1, 1, b + 71, 9, "");
	launch(&t, b + 62, 2, 7, "add_kernel", b + 24, 10);	/* overlaps gemm on stream 7 */
	ingest_text("dups", &t);
	c = synth_query("dups", Q_OPS_CPU);
	g = synth_query("dups", Q_OPS_GPU);
	json_array_foreach(json_object_get(c, "ops"), i, o) {
		const char *n = json_string_value(json_object_get(o, "name"));
		if (!strcmp(n, "aten::mm")) {
			ck_assert_int_eq(synth_iget(o, "calls"), 1);
			ck_assert_int_eq(synth_iget(o, "total_ns"), 40000);
			ck_assert_int_eq(synth_iget(o, "self_ns"), 40000 - 1000);	/* less its runtime call */
			seen |= 1;
		} else if (!strcmp(n, "aten::add")) {
			ck_assert_int_eq(synth_iget(o, "calls"), 2);
			seen |= 2;
		}
	}
	json_array_foreach(json_object_get(g, "ops"), i, o)
		if (!strcmp(json_string_value(json_object_get(o, "name")), "aten::mm")) {
			ck_assert_int_eq(synth_iget(o, "self_ns"), 8000);
			ck_assert_int_eq(synth_iget(o, "total_ns"), 8000);
			seen |= 4;
		}
	ck_assert_int_eq(seen, 7);
	k = synth_query("dups", Q_KERNELS);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "calls"), 2);
	ck_assert_int_eq(synth_iget(json_object_get(k, "total"), "total_ns"), 18000);
	sj = synth_query("dups", Q_STEPS);
	ck_assert_int_eq(synth_iget(json_object_get(json_array_get(json_object_get(sj, "steps"), 0), "breakdown_ns"), "kernel"),
			 14000);	/* their union, [20, 34) */
	json_decref(c);
	json_decref(g);
	json_decref(k);
	json_decref(sj);
}
END_TEST

/* A stub tail step is incomplete: out of the mean, and it does not make drift. */
START_TEST(test_stub_tail_step_incomplete)
{
	struct synth s = synth_healthy;
	json_t *d, *j, *last;

	s.steps = 5;
	s.stub_us = 49;
	d = synth_diagnose("stub", &s);
	ck_assert_ptr_null(synth_finding(d, "step_drift"));
	json_decref(d);
	j = synth_query("stub", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 6);
	last = json_array_get(json_object_get(j, "steps"), 5);
	ck_assert(json_is_true(json_object_get(last, "incomplete")));
	ck_assert_ptr_nonnull(json_object_get(last, "note"));
	ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(j, "steps"), 0), "incomplete")));
	ck_assert_uint_eq(json_array_size(json_object_get(j, "notes")), 1);
	json_decref(j);
	j = synth_query("stub", Q_RANKS);
	ck_assert_int_eq(synth_iget(json_array_get(json_object_get(j, "ranks"), 0), "mean_ns"), 10000000);
	ck_assert_int_eq(synth_iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 5);
	json_decref(j);
}
END_TEST

/* The trace ends before the last step's last kernels were recorded: incomplete too. */
START_TEST(test_cut_tail_step_incomplete)
{
	struct synth s = synth_healthy;
	json_t *d, *j, *last;

	s.steps = 5;
	s.drift_us = 0;
	s.cut = 3;
	d = synth_diagnose("cut", &s);
	json_decref(d);
	j = synth_query("cut", Q_STEPS);
	last = json_array_get(json_object_get(j, "steps"), 4);
	ck_assert(json_is_true(json_object_get(last, "incomplete")));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(last, "note")), "no record"));
	ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(j, "steps"), 3), "incomplete")));
	json_decref(j);
	j = synth_query("cut", Q_RANKS);
	ck_assert_int_eq(synth_iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 4);
	json_decref(j);
}
END_TEST

/* No ProfilerStep: one whole-trace entry, with its breakdown and the step rules. */
START_TEST(test_whole_trace_without_steps)
{
	struct synth s = synth_healthy;
	json_t *d, *j, *w;

	s.no_steps = 1;
	s.kernels = 3;
	d = synth_diagnose("nosteps", &s);
	ck_assert_ptr_nonnull(synth_finding(d, "no_steps"));
	ck_assert_ptr_nonnull(synth_finding(d, "low_gpu_utilization"));
	ck_assert_ptr_null(synth_finding(d, "step_drift"));
	json_decref(d);
	j = synth_query("nosteps", Q_STEPS);
	ck_assert_uint_eq(json_array_size(json_object_get(j, "steps")), 1);
	w = json_array_get(json_object_get(j, "steps"), 0);
	ck_assert(json_is_null(json_object_get(w, "step")));
	ck_assert(json_is_true(json_object_get(w, "whole_trace")));
	ck_assert_int_eq(synth_iget(json_object_get(w, "breakdown_ns"), "kernel"), 10 * 3000000);
	ck_assert(json_real_value(json_object_get(w, "gpu_utilization_pct")) > 29);
	json_decref(j);
	j = synth_query("nosteps", Q_RANKS);
	ck_assert_int_eq(synth_iget(json_array_get(json_object_get(j, "ranks"), 0), "steps"), 0);
	json_decref(j);
}
END_TEST

/* An all-reduce that computation hides for 1 ms of its 3: 2 ms exposed per 10 ms step. */
START_TEST(test_exposed_communication)
{
	struct synth s = synth_healthy;
	json_t *d, *f, *j, *o;
	size_t i;
	int seen = 0;

	s.kernels = 5;
	s.nccl_us = 3000;
	d = synth_diagnose("comm", &s);
	f = synth_finding(d, "exposed_communication");
	ck_assert_msg(f != NULL, "%s", json_dumps(d, JSON_COMPACT));
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "communication_ns"), 10 * 2000000);
	ck_assert_int_eq(synth_iget(json_object_get(f, "evidence"), "comm_overlap_ns"), 10 * 1000000);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(f, "advice")), "no_sync"));
	json_decref(d);
	j = synth_query("comm", Q_STEPS);
	o = json_array_get(json_object_get(j, "steps"), 3);
	ck_assert_int_eq(synth_iget(json_object_get(o, "breakdown_ns"), "communication"), 2000000);
	ck_assert_int_eq(synth_iget(json_object_get(o, "breakdown_ns"), "kernel"), 5000000);
	ck_assert_int_eq(synth_iget(o, "comm_overlap_ns"), 1000000);
	json_decref(j);
	j = synth_query("comm", Q_KERNELS);
	json_array_foreach(json_object_get(j, "kernels"), i, o) {
		const char *cls = json_string_value(json_object_get(o, "class"));
		int nccl = !strncmp(json_string_value(json_object_get(o, "name")), "ncclKernel", 10);
		ck_assert_str_eq(cls, nccl ? "communication" : "computation");
		seen |= nccl ? 1 : 2;
	}
	json_decref(j);
	j = synth_query("comm", Q_OPS_CPU);
	json_array_foreach(json_object_get(j, "ops"), i, o) {
		if (strcmp(json_string_value(json_object_get(o, "name")), "nccl:all_reduce")) {
			ck_assert(json_is_null(json_object_get(o, "group")));
			continue;
		}
		ck_assert_str_eq(json_string_value(json_object_get(o, "group")), "communication");
		seen |= 4;
	}
	ck_assert_int_eq(synth_iget(json_object_get(j, "communication"), "calls"), 10);
	json_decref(j);
	ck_assert_int_eq(seen, 7);
	/* without the collective: no finding */
	s.nccl_us = 0;
	d = synth_diagnose("nocomm", &s);
	ck_assert_ptr_null(synth_finding(d, "exposed_communication"));
	json_decref(d);
}
END_TEST

/* compare: the same time and calls per step is unchanged, whatever the step counts. */
START_TEST(test_compare_status_per_step)
{
	struct compare_item ia = { .name = "aten::mm", .calls = 10, .ns = 2000 }, ib = { .name = "aten::mm", .calls = 15, .ns = 3000 };
	int64_t da[] = { 5000, 5000 }, db[] = { 5000, 5000, 5000 };
	struct compare_run a = { .run = "a", .dur_ns = da, .nsteps = 2, .ops = &ia, .nops = 1 };
	struct compare_run b = { .run = "b", .dur_ns = db, .nsteps = 3, .ops = &ib, .nops = 1 };
	struct compare_opts o = { .threshold_pct = 5, .alpha = 0.05, .limit = 10 };
	json_t *j = compare_runs(&a, &b, &o);

	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "ops"), 0), "status")),
			 "unchanged");
	ck_assert_int_eq(synth_iget(json_object_get(j, "ops_counts"), "changed"), 0);
	json_decref(j);
}
END_TEST

static void add_pytorch_rule_tests(TCase *tc)
{
	tcase_add_test(tc, test_steps_own_what_they_launched);
	tcase_add_test(tc, test_gpu_launchers);
	tcase_add_test(tc, test_hmap_reserve_find);
	tcase_add_test(tc, test_before_op_top_level);
	tcase_add_test(tc, test_window_first_step);
	tcase_add_test(tc, test_exposed_ranks_threshold);
	tcase_add_test(tc, test_gloo_host_collectives);
	tcase_add_test(tc, test_same_name_nesting_and_overlap);
	tcase_add_test(tc, test_stub_tail_step_incomplete);
	tcase_add_test(tc, test_cut_tail_step_incomplete);
	tcase_add_test(tc, test_whole_trace_without_steps);
	tcase_add_test(tc, test_exposed_communication);
	tcase_add_test(tc, test_compare_status_per_step);
}

Suite *suite_analysis_pytorch(void)
{
	Suite *s = suite_create("analysis_pytorch");
	/* five whole fixtures each: too slow for valgrind's pass (CK_EXCLUDE_TAGS=slow), run by every other */
	TCase *tc = tcase_create("pytorch_fixtures");

	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "slow");
	add_pytorch_fixture_tests(tc);
	suite_add_tcase(s, tc);
	tc = tcase_create("rules");
	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
	tcase_set_timeout(tc, 60);
	add_pytorch_rule_tests(tc);
	suite_add_tcase(s, tc);
	return s;
}
