/*
 * fmt_canary.h: an rlhf-canary metrics.json's own rows (fmt_canary.c), the
 * store function pipeline/formats.c's row names. Its tables: canary_metrics,
 * canary_ops (migration 012).
 */
#ifndef STORE_FMT_CANARY_H
#define STORE_FMT_CANARY_H

#include "store/store.h"

/* canarymodel.h's canary_metrics in f->result: its figures and top ops (store_fmt_fn). */
int store_insert_canary(struct store_writer *w, int64_t artifact, const struct store_final *f,
			struct tp_errbuf *err);

#endif
