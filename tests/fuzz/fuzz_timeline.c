/*
 * fuzz_timeline.c: libFuzzer target for PyTorch memory timeline exports
 * (server/ingest/timeline.c). The first byte picks the piece size. Checks:
 * no crash, no leak, an error code from the documented set with a message,
 * and points in time order when it succeeds.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ingest/timeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the points come in time order (*last from INT64_MIN) */
static int in_order(void *arg, const struct mem_point *pt)
{
	int64_t *last = arg;

	if (pt->t_ns < *last)
		abort();
	*last = pt->t_ns;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct timeline_parser *p;
	struct tp_errbuf err = { 0 };
	const char *form;
	size_t piece, i, n;
	int rc = TP_OK;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 61 + 1;
	data++, size--;
	if (!(p = timeline_parser_new(4096)))
		return 0;
	for (i = 0; i < size && rc == TP_OK; i += piece)
		rc = timeline_parser_feed(p, data + i, size - i < piece ? size - i : piece, &err);
	if (rc == TP_OK)
		rc = timeline_parser_finish(p, &n, &form, &err);
	if (rc != TP_OK && rc != TP_ERR_INVALID && rc != TP_ERR_TOOBIG && rc != TP_ERR_NOMEM)
		abort();
	if (rc != TP_OK && (!err.msg[0] || !err.code[0]))
		abort();
	if (rc == TP_OK)
		timeline_replay(p, in_order, &(int64_t){ INT64_MIN });
	timeline_parser_free(p);
	return 0;
}
