/*
 * reports.c: the other profilers' outputs as stored: an rlhf-canary
 * metrics.json, a Lightning report's actions, nvidia-smi samples and folded
 * stacks.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

static double col_real(struct db_stmt *st, int i)
{
	return db_column_type(st, i) == DB_NULL ? NAN : db_column_double(st, i);
}

static int64_t col_i64_opt(struct db_stmt *st, int i)
{
	return db_column_type(st, i) == DB_NULL ? -1 : db_column_int64(st, i);
}

/* A text column copied into *out (NULL stays NULL); -1 when out of memory. */
static int col_dup(struct db_stmt *st, int i, char **out)
{
	const char *t = (const char *)db_column_text(st, i);

	*out = NULL;
	return t && !(*out = tp_strdup(t)) ? -1 : 0;
}

static void canary_row(struct db_stmt *st, struct canary_metrics *m)
{
	struct canary_perf *f = &m->perf;
	int c = 7;

	m->duration_s = col_real(st, 4);
	f->steps = db_column_int64(st, c++);
	for (int i = 0; i < CANARY_NSTAT; i++)
		f->step_s[i] = col_real(st, c++);
	f->tokens_per_s = col_real(st, c++);
	f->max_mem_mb = col_real(st, c++);
	f->gpu_util_pct = col_real(st, c++);
	f->dataloader_wait_pct = col_real(st, c++);
	m->nan_steps = col_i64_opt(st, c++);
	m->inf_steps = col_i64_opt(st, c++);
	m->final_loss = col_real(st, c++);
	m->loss_diverged = (int)col_i64_opt(st, c++);
	f->has_profiler = db_column_int(st, c++);
	c++;	/* trace_path, copied with the strings */
	f->cuda_total_ms = col_real(st, c++);
	f->cpu_total_ms = col_real(st, c++);
	f->self_cuda_total_ms = col_real(st, c++);
}

static int canary_ops_load(struct store_reader *r, int64_t artifact, struct canary_metrics *m, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT device, name, self_ms, count FROM canary_ops WHERE artifact_id=?1"
				      " ORDER BY device, n", err);
	int step, d;

	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, artifact);
	while ((step = db_step(st)) == DB_ROW) {
		d = db_column_int(st, 0) & 1;
		struct canary_op *ops = tp_realloc(m->ops[d], (m->nops[d] + 1) * sizeof(*ops));
		if (!ops)
			break;
		m->ops[d] = ops;
		ops += m->nops[d];
		memset(ops, 0, sizeof(*ops));
		m->nops[d]++;
		ops->self_ms = db_column_double(st, 2);
		ops->count = db_column_int64(st, 3);
		if (col_dup(st, 1, &ops->name))
			break;
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read canary");
}

/*
 * The newest rlhf-canary metrics.json of (run, rank) into *m (cleared first; canary_metrics_clear
 * frees it) and its artifact into *artifact, 0 when the rank has none.
 */
int store_canary_load(struct store_reader *r, const char *run, int rank, struct canary_metrics *m, int64_t *artifact,
		       struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT * FROM canary_metrics WHERE artifact_id=(SELECT MAX(id) FROM ("
				       RANK_ARTIFACTS " AND a.kind='canary_metrics'))", run, rank, err);
	int step, oom = 0;

	canary_metrics_clear(m);
	*artifact = 0;
	if (!st)
		return TP_ERR_DB;
	if ((step = db_step(st)) == DB_ROW) {
		*artifact = db_column_int64(st, 0);
		canary_row(st, m);
		oom = col_dup(st, 1, &m->run_id) || col_dup(st, 2, &m->timestamp) || col_dup(st, 3, &m->status) ||
		      col_dup(st, 5, &m->env_json) || col_dup(st, 6, &m->config_json) || col_dup(st, 25, &m->trace_path);
	}
	db_finalize(st);
	if (oom)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (step != DB_ROW && step != DB_DONE)
		return store_db_fail(err, r->db, "read canary");
	return *artifact ? canary_ops_load(r, *artifact, m, err) : TP_OK;
}

int store_run_canary(struct store_reader *r, const char *run, int rank, int *rank_out, struct canary_metrics *m,
		     int64_t *artifact, struct tp_errbuf *err)
{
	memset(m, 0, sizeof(*m));
	if ((rank = store_rank_of(r, run, rank, err)) < 0 || store_canary_load(r, run, rank, m, artifact, err))
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	if (!*artifact)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_canary", "run '%s' has no rlhf-canary metrics.json for rank %d",
			       run, rank);
	return TP_OK;
}

int store_run_actions(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_rows *actions,
		      struct store_rows *functions, struct tp_errbuf *err)
{
	static const char *const acols[] = { "artifact", "action", "calls", "mean_ns", "total_ns", "share_bp", "n" };
	static const char *const fcols[] = { "artifact", "action", "location", "ncalls", "primitive_calls", "tottime_ns",
					     "cumtime_ns" };
	struct db_stmt *st;

	memset(actions, 0, sizeof(*actions));
	memset(functions, 0, sizeof(*functions));
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	/* the first STORE_ACTIONS_MAX: a read holds what it answers (a million actions, 135 KB of gzip,
	 * were 91 MB of JSON and took the server to 1,168 MiB: issue 50) */
	if (!(st = store_prepare_rank(r, "SELECT artifact_id, action, calls, mean_ns, total_ns, share_bp, n FROM lightning_actions"
				   " WHERE artifact_id IN (" RANK_ARTIFACTS ") ORDER BY total_ns IS NULL, total_ns DESC,"
				   " artifact_id, n LIMIT ?3", run, rank, err)))
		return err->rc ? err->rc : TP_ERR_DB;
	db_bind_int(st, 3, STORE_ACTIONS_MAX);
	if (store_rows_read(r, st, acols, 7, actions, err))
		return err->rc ? err->rc : TP_ERR_DB;
	if (!actions->nrows)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_actions", "run '%s' has no Lightning profiler report for rank %d",
			       run, rank);
	/* the rows of those actions alone */
	if (!(st = store_prepare_rank(r, "SELECT f.artifact_id, f.action, location, ncalls, primitive_calls, tottime_ns,"
				   " cumtime_ns FROM lightning_functions f JOIN (SELECT artifact_id, n FROM lightning_actions"
				   " WHERE artifact_id IN (" RANK_ARTIFACTS ") ORDER BY total_ns IS NULL, total_ns DESC,"
				   " artifact_id, n LIMIT ?3) a ON f.artifact_id=a.artifact_id AND f.action=a.n"
				   " ORDER BY f.artifact_id, f.action, f.n", run, rank, err)) ||
	    (db_bind_int(st, 3, STORE_ACTIONS_MAX), store_rows_read(r, st, fcols, 7, functions, err))) {
		store_rows_free(actions);
		return err->rc ? err->rc : TP_ERR_DB;
	}
	return TP_OK;
}

int store_run_gpu(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_rows *out,
		  struct tp_errbuf *err)
{
	static const char *const cols[] = { "gpu", "name", "unit", "t_ns", "value", "samples", "mean", "min", "max" };
	struct db_stmt *st;

	memset(out, 0, sizeof(*out));
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	/*
	 * A long log is read one row in s, s = its rows / ?3 rounded up, so that a read holds about
	 * what it answers and sorts only that (4 M samples of one column, a 45 KB gzip'd log, were
	 * 36 MB of JSON and took the server to 1,053 MiB: issue 50); samples, mean, min and max are
	 * each column's over all of them (c).
	 */
	if (!(st = store_prepare_rank(r, "SELECT g.gpu, g.name, unit, t_ns, value, samples, mean, lo, hi FROM gpu_samples g"
				   " JOIN (SELECT artifact_id AS id, MAX(n) / ?3 + 1 AS s FROM gpu_samples"
				   " WHERE artifact_id IN (" RANK_ARTIFACTS ") GROUP BY artifact_id) a ON g.artifact_id=a.id"
				   " JOIN (SELECT gpu, name, COUNT(*) AS samples, AVG(value) AS mean, MIN(value) AS lo,"
				   " MAX(value) AS hi FROM gpu_samples WHERE artifact_id IN (" RANK_ARTIFACTS ")"
				   " GROUP BY gpu, name) c ON c.gpu=g.gpu AND c.name=g.name"
				   " WHERE g.n % a.s = 0 ORDER BY g.gpu, g.name, t_ns, g.artifact_id, g.n",
				run, rank, err)))
		return err->rc ? err->rc : TP_ERR_DB;
	db_bind_int(st, 3, STORE_GPU_POINTS);
	if (store_rows_read(r, st, cols, 9, out, err))
		return err->rc ? err->rc : TP_ERR_DB;
	if (!out->nrows)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_gpu_log", "run '%s' has no nvidia-smi log for rank %d", run, rank);
	return TP_OK;
}

int store_run_stacks(struct store_reader *r, const char *run, int rank, int top, int *rank_out,
		     struct store_rows *out, struct tp_errbuf *err)
{
	static const char *const cols[] = { "frame", "self", "total" };
	struct db_stmt *st;

	memset(out, 0, sizeof(*out));
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	/* SUM of int64 weights that may overflow: TOTAL() is a double and never fails */
	if (!(st = store_prepare_rank(r, "SELECT frame, CAST(MIN(TOTAL(self), 9.2e18) AS INTEGER),"
				   " CAST(MIN(TOTAL(total), 9.2e18) AS INTEGER) FROM stack_frames"
				   " WHERE artifact_id IN (" RANK_ARTIFACTS ") GROUP BY frame ORDER BY 3 DESC, 2 DESC, frame LIMIT ?3",
				run, rank, err)))
		return TP_ERR_DB;
	db_bind_int(st, 3, top);
	if (store_rows_read(r, st, cols, 3, out, err))
		return err->rc;
	if (!out->nrows)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_stacks", "run '%s' has no folded stacks for rank %d", run, rank);
	return TP_OK;
}
