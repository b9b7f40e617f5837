/*
 * fmt_lightning.c: a Lightning profiler report's own rows: its actions
 * (lightning_actions) and an AdvancedProfiler's cProfile rows per action
 * (lightning_functions), under the artifact.
 */
#include "ingest/textfmt.h"
#include "store/fmt_lightning.h"
#include "store/store_int.h"

int store_insert_lightning(struct store_writer *w, int64_t artifact, const struct store_final *f, struct tp_errbuf *err)
{
	const struct tf_result *t = f->result;
	struct db_stmt *st = NULL;
	int rc = TP_OK;

	if (db_prepare(w->db, "INSERT INTO lightning_actions(artifact_id, n, action, calls, mean_ns, total_ns,"
				      " share_bp) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", 0, &st) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	for (size_t i = 0; i < t->nactions && !rc; i++) {
		const struct tf_action *x = &t->actions[i];
		db_bind_int64(st, 1, artifact);
		db_bind_int64(st, 2, (int64_t)i);
		store_bind_text(st, 3, x->name);
		store_bind_opt(st, 4, x->calls);
		store_bind_opt(st, 5, x->mean_ns);
		store_bind_opt(st, 6, x->total_ns);
		store_bind_opt(st, 7, x->share_bp);
		rc = store_step_reset(w->db, st, err);
	}
	db_finalize(st);
	st = NULL;
	if (!rc && t->nfunctions &&
	    db_prepare(w->db, "INSERT INTO lightning_functions(artifact_id, action, n, location, ncalls,"
				      " primitive_calls, tottime_ns, cumtime_ns) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", 0, &st) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	for (size_t i = 0, k = 0; i < t->nfunctions && !rc; i++) {
		const struct tf_function *fn = &t->functions[i];
		k = i && fn->action == t->functions[i - 1].action ? k + 1 : 0;
		db_bind_int64(st, 1, artifact);
		db_bind_int64(st, 2, (int64_t)fn->action);
		db_bind_int64(st, 3, (int64_t)k);
		store_bind_text(st, 4, fn->location);
		db_bind_int64(st, 5, fn->ncalls);
		db_bind_int64(st, 6, fn->primitive_calls);
		db_bind_int64(st, 7, fn->tottime_ns);
		db_bind_int64(st, 8, fn->cumtime_ns);
		rc = store_step_reset(w->db, st, err);
	}
	db_finalize(st);
	return rc;
}
