/*
 * fmt_keyavg.h: a key_averages() table's own rows (fmt_keyavg.c), the store
 * function pipeline/formats.c's row names. Its tables: keyavg_ops,
 * keyavg_tables (migration 012).
 */
#ifndef STORE_FMT_KEYAVG_H
#define STORE_FMT_KEYAVG_H

#include "store/store.h"

/* textfmt.h's tf_result in f->result: the table's rows and its footers (store_fmt_fn). */
int store_insert_keyavg(struct store_writer *w, int64_t artifact, const struct store_final *f,
			struct tp_errbuf *err);

#endif
