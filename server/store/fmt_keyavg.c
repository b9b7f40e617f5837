/*
 * fmt_keyavg.c: a key_averages() table's own rows: its operators
 * (keyavg_ops, in file order; textfmt made sure the table has # of Calls) and
 * its footers and device word (keyavg_tables), under the artifact.
 */
#include "ingest/textfmt.h"
#include "store/fmt_keyavg.h"
#include "store/store_int.h"

/* A cell by its meaning (textfmt's roles): NULL when the table has no such column. */
static void bind_cell(struct db_stmt *st, int i, const struct tf_result *t, const struct tf_op *o, int role)
{
	int c = t->ka_col[role];

	if (c < 0 || o->v[c] == INT64_MIN)
		db_bind_null(st, i);
	else
		db_bind_int64(st, i, o->v[c]);
}

/* The table's rows, in one batch. */
static int insert_ops(struct store_writer *w, int64_t artifact, const struct tf_result *t, struct tp_errbuf *err)
{
	static const int roles[] = { TF_KA_CALLS, TF_KA_SELF_CPU, TF_KA_CPU_TOTAL, TF_KA_SELF_DEV, TF_KA_DEV_TOTAL,
				     TF_KA_CPU_MEM, TF_KA_SELF_CPU_MEM, TF_KA_DEV_MEM, TF_KA_SELF_DEV_MEM };
	struct db_stmt *st;
	int rc = TP_OK;

	if (!t->nops)
		return TP_OK;
	if (db_prepare(w->db, "INSERT INTO keyavg_ops(artifact_id, n, name, calls, self_cpu_ns, cpu_total_ns,"
			      " self_dev_ns, dev_total_ns, cpu_mem_bytes, self_cpu_mem_bytes, dev_mem_bytes,"
			      " self_dev_mem_bytes) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	if (db_batch_begin(w->db))
		rc = store_db_fail(err, w->db, "insert analysis");
	for (size_t i = 0; i < t->nops && !rc; i++) {
		const struct tf_op *o = &t->ops[i];
		db_bind_int64(st, 1, artifact);
		db_bind_int64(st, 2, (int64_t)i);
		db_bind_text(st, 3, o->name, -1, DB_STATIC);
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++)
			bind_cell(st, 4 + (int)k, t, o, roles[k]);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "insert analysis");
		db_reset(st);
	}
	if (db_batch_end(w->db) && !rc)
		rc = store_db_fail(err, w->db, "insert analysis");
	db_finalize(st);
	return rc;
}

int store_insert_keyavg(struct store_writer *w, int64_t artifact, const struct store_final *f, struct tp_errbuf *err)
{
	const struct tf_result *t = f->result;
	struct db_stmt *st = NULL;
	int rc;

	if ((rc = insert_ops(w, artifact, t, err)))
		return rc;
	if (db_prepare(w->db, "INSERT INTO keyavg_tables(artifact_id, device, self_cpu_total_ns,"
				      " self_dev_total_ns) VALUES(?1, ?2, ?3, ?4)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, 1, artifact);
	store_bind_text(st, 2, t->ka_device[0] ? t->ka_device : NULL);
	store_bind_opt(st, 3, t->self_cpu_total_ns);
	store_bind_opt(st, 4, t->self_dev_total_ns);
	rc = store_step_reset(w->db, st, err);
	db_finalize(st);
	return rc;
}
