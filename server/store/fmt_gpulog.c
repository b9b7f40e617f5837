/*
 * fmt_gpulog.c: an nvidia-smi log's own rows: its numeric cells, one row
 * each (gpu_samples), under the artifact; text columns such as name and
 * pstate are not kept.
 */
#include <math.h>

#include "ingest/textfmt.h"
#include "store/fmt_gpulog.h"
#include "store/store_int.h"

int store_insert_gpulog(struct store_writer *w, int64_t artifact, const struct store_final *f, struct tp_errbuf *err)
{
	const struct tf_result *t = f->result;
	struct db_stmt *st = NULL;
	int rc = TP_OK;

	if (db_prepare(w->db, "INSERT INTO gpu_samples(artifact_id, n, col, gpu, t_ns, name, unit, value)"
				      " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", 0, &st) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	for (size_t i = 0; i < t->ngpu_rows && !rc; i++) {
		const struct tf_gpu_row *g = &t->gpu_rows[i];
		for (size_t k = 0; k < t->ngpu_cols && !rc; k++) {
			if (!t->gpu_units[k][0])
				continue;	/* timestamp, index, name, pstate */
			db_bind_int64(st, 1, artifact);
			db_bind_int64(st, 2, (int64_t)i);
			db_bind_int64(st, 3, (int64_t)k);
			db_bind_int(st, 4, g->gpu);
			if (g->t_ns == INT64_MIN)
				db_bind_null(st, 5);
			else
				db_bind_int64(st, 5, g->t_ns);
			store_bind_text(st, 6, t->gpu_cols[k]);
			store_bind_text(st, 7, t->gpu_units[k]);
			store_bind_real(st, 8, g->v[k]);
			rc = store_step_reset(w->db, st, err);
		}
	}
	db_finalize(st);
	return rc;
}
