/*
 * fmt_lightning.h: a Lightning profiler report's own rows (fmt_lightning.c),
 * the store function pipeline/formats.c's row names. Its tables:
 * lightning_actions, lightning_functions (migrations 011, 013).
 */
#ifndef STORE_FMT_LIGHTNING_H
#define STORE_FMT_LIGHTNING_H

#include "store/store.h"

/* textfmt.h's tf_result in f->result: its actions and cProfile rows (store_fmt_fn). */
int store_insert_lightning(struct store_writer *w, int64_t artifact, const struct store_final *f,
			   struct tp_errbuf *err);

#endif
