/*
 * fmt_canary.c: an rlhf-canary metrics.json's own rows: its figures, one row
 * (canary_metrics, in the file's units), then its profiler block's top CPU
 * and CUDA ops (canary_ops), under the artifact.
 */
#include <math.h>

#include "store/fmt_canary.h"
#include "store/store_int.h"

int store_insert_canary(struct store_writer *w, int64_t artifact, const struct store_final *fin, struct tp_errbuf *err)
{
	const struct canary_metrics *m = fin->result;
	const struct canary_perf *f = &m->perf;
	struct db_stmt *st = NULL;
	int rc, c = 1;

	if (db_prepare(w->db, "INSERT INTO canary_metrics VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
				      " ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27,"
				      " ?28, ?29)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, c++, artifact);
	store_bind_text(st, c++, m->run_id);
	store_bind_text(st, c++, m->timestamp);
	store_bind_text(st, c++, m->status);
	store_bind_real(st, c++, m->duration_s);
	store_bind_text(st, c++, m->env_json);
	store_bind_text(st, c++, m->config_json);
	db_bind_int64(st, c++, f->steps);
	for (int i = 0; i < CANARY_NSTAT; i++)
		store_bind_real(st, c++, f->step_s[i]);
	store_bind_real(st, c++, f->tokens_per_s);
	store_bind_real(st, c++, f->max_mem_mb);
	store_bind_real(st, c++, f->gpu_util_pct);
	store_bind_real(st, c++, f->dataloader_wait_pct);
	store_bind_opt(st, c++, m->nan_steps);
	store_bind_opt(st, c++, m->inf_steps);
	store_bind_real(st, c++, m->final_loss);
	store_bind_opt(st, c++, m->loss_diverged);
	db_bind_int(st, c++, f->has_profiler);
	store_bind_text(st, c++, m->trace_path);
	store_bind_real(st, c++, f->has_profiler ? f->cuda_total_ms : NAN);
	store_bind_real(st, c++, f->has_profiler ? f->cpu_total_ms : NAN);
	store_bind_real(st, c++, f->has_profiler ? f->self_cuda_total_ms : NAN);
	rc = store_step_reset(w->db, st, err);
	db_finalize(st);
	if (rc || db_prepare(w->db, "INSERT INTO canary_ops(artifact_id, device, n, name, self_ms, count)"
					    " VALUES(?1, ?2, ?3, ?4, ?5, ?6)", 0, &st) != DB_OK)
		return rc ? rc : store_db_fail(err, w->db, "prepare");
	for (int d = 0; d < 2; d++)
		for (size_t i = 0; i < m->nops[d] && !rc; i++) {
			db_bind_int64(st, 1, artifact);
			db_bind_int(st, 2, d);
			db_bind_int64(st, 3, (int64_t)i);
			store_bind_text(st, 4, m->ops[d][i].name);
			db_bind_double(st, 5, m->ops[d][i].self_ms);
			db_bind_int64(st, 6, m->ops[d][i].count);
			rc = store_step_reset(w->db, st, err);
		}
	db_finalize(st);
	return rc;
}
