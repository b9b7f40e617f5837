/*
 * fuzz_pickle.c: libFuzzer target for the pickle reader
 * (server/ingest/pickle.c) and the snapshot timeline over what it reads
 * (server/ingest/snapshot.c). The first byte picks the piece size.
 * Checks: no crash, no leak, no hang, an error code from the documented set
 * with a message, and timelines whose categories are never negative.
 */
#include <stdint.h>
#include <stdlib.h>

#include "ingest/snapshot.h"
#include "ingest/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int known(int rc)
{
	return rc == TP_ERR_INVALID || rc == TP_ERR_TOOBIG || rc == TP_ERR_NOMEM;
}

/* no category below zero but the baseline's, which a free of more than it held may take there */
static int check_point(void *arg, const struct mem_point *p)
{
	for (int c = 0; c < MEM_NCAT; c++)
		if (p->cat[c] < 0 && c != CAT_PARAMETER)
			abort();
	++*(size_t *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct pk_limits lim = { .max_objects = 1u << 16, .max_string = 1u << 16, .max_marks = 64 };
	struct pickle_parser *p;
	struct snap_reader *rd;
	struct tp_errbuf err = { 0 };
	const struct pk_obj *root;
	const struct mem_series *s;
	struct snap_result *r;
	struct snap_stats st;
	size_t piece, i, n;
	int rc = TP_OK;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 61 + 1;
	data++, size--;
	if (!(p = pickle_parser_new(&lim)))
		return 0;
	if (!(rd = snap_reader_new(p, lim.max_objects))) {
		pickle_parser_free(p);
		return 0;
	}
	for (i = 0; i < size && rc == TP_OK; i += piece)
		rc = pickle_parser_feed(p, data + i, size - i < piece ? size - i : piece, &err);
	if (rc == TP_OK)
		rc = pickle_parser_finish(p, &root, &err);
	if (rc == TP_OK) {
		rc = snap_timeline(rd, root, &r, &s, &n, &st, &err);
		if (rc == TP_OK) {
			for (i = 0; i < n; i++) {
				size_t count = 0;
				if (mem_series_each(&s[i], check_point, &count) || count != s[i].n)
					abort();
			}
			snap_result_free(r);
		}
	}
	if (rc != TP_OK && (!known(rc) || !err.msg[0] || !err.code[0]))
		abort();
	snap_reader_free(rd);
	pickle_parser_free(p);
	return 0;
}
