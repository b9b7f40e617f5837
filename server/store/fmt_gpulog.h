/*
 * fmt_gpulog.h: an nvidia-smi log's own rows (fmt_gpulog.c), the store
 * function pipeline/formats.c's row names. Its table: gpu_samples
 * (migration 011).
 */
#ifndef STORE_FMT_GPULOG_H
#define STORE_FMT_GPULOG_H

#include "store/store.h"

/* textfmt.h's tf_result in f->result: the log's numeric cells (store_fmt_fn). */
int store_insert_gpulog(struct store_writer *w, int64_t artifact, const struct store_final *f,
			struct tp_errbuf *err);

#endif
