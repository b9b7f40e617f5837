/*
 * fmt_stacks.h: folded stacks' own rows (fmt_stacks.c), the store function
 * pipeline/formats.c's row names. Its table: stack_frames (migration 011).
 */
#ifndef STORE_FMT_STACKS_H
#define STORE_FMT_STACKS_H

#include "store/store.h"

/* textfmt.h's tf_result in f->result: each frame's self and total (store_fmt_fn). */
int store_insert_stacks(struct store_writer *w, int64_t artifact, const struct store_final *f,
			struct tp_errbuf *err);

#endif
