/*
 * fuzz_canary.c: libFuzzer target for rlhf-canary metrics.json
 * (server/ingest/canary.c). The first byte is the piece size; detection runs
 * on the head as the upload pipeline does. Checks: no crash, no leak,
 * detection decided at the end, an error code from the documented set with a
 * message, and when a parse succeeds: every figure within the ranges the
 * parser promises (seconds, MiB and ms that fit int64 ns and bytes).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "ingest/canary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct canary_metrics *m)
{
	const struct canary_perf *f = &m->perf;

	if (!m->run_id || f->steps < 0 || !(isnan(f->max_mem_mb) || (f->max_mem_mb >= 0 && f->max_mem_mb * 1048576.0 < 9.3e18)))
		abort();
	for (int i = 0; i < CANARY_NSTAT; i++)
		if (!isnan(f->step_s[i]) && !(f->step_s[i] >= 0 && f->step_s[i] * 1e9 < 9.3e18))
			abort();
	for (int d = 0; d < 2; d++) {
		if (m->nops[d] > CANARY_MAX_OPS)
			abort();
		for (size_t i = 0; i < m->nops[d]; i++)
			if (!m->ops[d][i].name || m->ops[d][i].count < 0 || !(fabs(m->ops[d][i].self_ms) * 1e6 < 9.3e18))
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct canary_parser *p;
	struct tp_errbuf err = { 0 };
	const struct canary_metrics *m;
	size_t piece, i;
	int rc = TP_OK;

	if (size < 1)
		return 0;
	piece = data[0] % 61 + 1;
	data++, size--;
	if (canary_detect(data, size < 4096 ? size : 4096, 1) < 0)
		abort();	/* at the end detection always decides */
	if (!(p = canary_parser_new(1 << 16)))
		return 0;
	for (i = 0; i < size && rc == TP_OK; i += piece)
		rc = canary_parser_feed(p, data + i, size - i < piece ? size - i : piece, &err);
	if (rc == TP_OK)
		rc = canary_parser_finish(p, &m, &err);
	if (rc != TP_OK && rc != TP_ERR_INVALID && rc != TP_ERR_TOOBIG && rc != TP_ERR_NOMEM)
		abort();
	if (rc != TP_OK && (!err.msg[0] || !err.code[0]))
		abort();
	if (rc == TP_OK)
		check(m);
	canary_parser_free(p);
	return 0;
}
