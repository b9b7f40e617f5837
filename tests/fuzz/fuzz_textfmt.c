/*
 * fuzz_textfmt.c: libFuzzer target for the other profilers' text reports
 * (server/ingest/textfmt*.c, fmt_*.c). The first byte picks the kind (or, 0 mod 5,
 * detection from the content) and the piece size. Checks: no crash, no leak,
 * an error code from the documented set with a message, and when a parse
 * succeeds: frames sorted by total with self <= total, self summing to the
 * weights, gpu columns within their count; no figure the tools cannot print
 * (negative calls or totals, a share or percentage over 100 %; a key_averages
 * Self time may be negative, as torch prints it).
 */
#include <stdint.h>
#include <stdlib.h>

#include "ingest/textfmt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct textfmt_parser *p;
	struct tp_errbuf err = { 0 };
	struct tf_limits lim = { .max_line = 512, .max_rows = 256, .max_held = 1 << 20 };
	const struct tf_result *r;
	size_t piece, i;
	int kind, rc = TP_OK;

	if (size < 1)
		return 0;
	kind = data[0] % 5;
	piece = (size_t)(data[0] / 5) % 47 + 1;
	data++, size--;
	if (!kind) {
		kind = textfmt_detect(data, size < TF_SNIFF ? size : TF_SNIFF, 1);
		if (kind < 0)
			abort();	/* at the end detection always decides */
		if (kind == TF_NONE)
			return 0;
	}
	if (!(p = textfmt_parser_new(kind, &lim)))
		return 0;
	for (i = 0; i < size && rc == TP_OK; i += piece)
		rc = textfmt_parser_feed(p, data + i, size - i < piece ? size - i : piece, &err);
	if (rc == TP_OK)
		rc = textfmt_parser_finish(p, &r, &err);
	if (rc != TP_OK && rc != TP_ERR_INVALID && rc != TP_ERR_TOOBIG && rc != TP_ERR_NOMEM)
		abort();
	if (rc != TP_OK && (!err.msg[0] || !err.code[0]))
		abort();
	if (rc == TP_OK && kind == TF_STACKS) {
		int64_t self = 0;
		for (i = 0; i < r->nframes; i++) {
			if (r->frames[i].self > r->frames[i].total || (i && r->frames[i - 1].total < r->frames[i].total))
				abort();
			self += r->frames[i].self;
		}
		if (self != r->stacks_total)
			abort();
	}
	if (rc == TP_OK && kind == TF_GPULOG && r->ngpu_cols > TF_GPU_MAX_COLS)
		abort();
	if (rc == TP_OK && kind == TF_GPULOG)
		for (i = 0; i < r->ngpu_rows; i++)
			for (size_t k = 0; k < r->ngpu_cols; k++)
				if (r->gpu_rows[i].v[k] < 0 || (r->gpu_units[k][0] == '%' && r->gpu_rows[i].v[k] > 100))
					abort();	/* NaN compares false */
	if (rc == TP_OK && kind == TF_LIGHTNING)
		for (i = 0; i < r->nactions; i++)
			if (r->actions[i].calls < -1 || r->actions[i].mean_ns < -1 || r->actions[i].share_bp > 10000 ||
			    r->actions[i].total_ns < -1)
				abort();
	/* calls and totals are never negative (a Self column may be: torch prints it so) */
	if (rc == TP_OK && kind == TF_KEYAVG)
		for (int role = TF_KA_CALLS; role <= TF_KA_DEV_TOTAL; role++) {
			int c = r->ka_col[role];
			if (c < 0 || role == TF_KA_SELF_CPU || role == TF_KA_SELF_DEV)
				continue;
			for (i = 0; i < r->nops; i++)
				if (r->ops[i].v[c] < 0 && r->ops[i].v[c] != INT64_MIN)
					abort();
		}
	textfmt_parser_free(p);
	return 0;
}
