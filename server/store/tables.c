/*
 * tables.c: a rank's steps, and its operator and kernel tables.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

/* Reshape one /steps row: components into breakdown_ns, utilization, flags as booleans, a note. */
int store_steps(struct store_reader *r, const char *run, int rank, int *rank_out, struct store_step **out,
		size_t *n, struct tp_errbuf *err)
{
	struct db_stmt *st;
	size_t cap = 0;
	int step, c;

	*out = NULL;
	*n = 0;
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	st = store_prepare_rank(r, "SELECT step, start_ns, dur_ns, COALESCE(cpu_dur_ns, dur_ns), " STEP_COMPS ","
			     " comm_overlap_ns, incomplete, whole_trace, COALESCE(gpu_busy_ns, kernel_ns) FROM steps"
			     " WHERE " RANK_ROWS " ORDER BY start_ns, dur_ns, step", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		struct store_step *s;
		if (*n == cap) {
			struct store_step *nv = tp_realloc(*out, (cap = cap ? cap * 2 : 64) * sizeof(*nv));
			if (!nv)
				break;
			*out = nv;
		}
		s = &(*out)[(*n)++];
		s->step = db_column_int64(st, 0);
		s->start_ns = db_column_int64(st, 1);
		s->dur_ns = db_column_int64(st, 2);
		s->cpu_dur_ns = db_column_int64(st, 3);
		for (c = 0; c < AN_NCOMP; c++)
			s->comp_ns[c] = db_column_int64(st, 4 + c);
		s->comm_overlap_ns = db_column_int64(st, 4 + AN_NCOMP);
		s->incomplete = db_column_int(st, 5 + AN_NCOMP);
		s->whole_trace = db_column_int(st, 6 + AN_NCOMP) != 0;
		s->gpu_busy_ns = db_column_int64(st, 7 + AN_NCOMP);
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	tp_free(*out);
	*out = NULL;
	*n = 0;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read steps");
}

void store_table_free(struct store_table *t)
{
	store_rows_free(&t->list);
	store_rows_free(&t->total);
	store_rows_free(&t->communication);
	store_rows_free(&t->footers);
}

/*
 * A rank's table and its total row into out. Both queries take ?1 run, ?2 rank, ?3 sel; the
 * list also ?4 limit.
 */
static int table(struct store_reader *r, const char *run, int rank, int sel, long limit, const char *list_sql,
		 const char *const *cols, int ncols, const char *total_sql, const char *const *tcols,
		 struct store_table *out, struct tp_errbuf *err)
{
	struct db_stmt *st;

	out->rank = rank;
	out->sel = sel;
	if (!(st = store_prepare_rank(r, list_sql, run, rank, err)))
		return TP_ERR_DB;
	db_bind_int(st, 3, sel);
	db_bind_int64(st, 4, limit);
	if (store_rows_read(r, st, cols, ncols, &out->list, err))
		return err->rc;
	if (!(st = store_prepare_rank(r, total_sql, run, rank, err)))
		return TP_ERR_DB;
	db_bind_int(st, 3, sel);
	return store_rows_read(r, st, tcols, 3, &out->total, err);
}

static const char *const op_sorts[] = { "self_ns", "total_ns", "calls", "name" };

/*
 * Where a rank's operators come from, as rows (name, calls, self_ns, total_ns) of device ?3 of
 * the rank (?1 run, ?2 rank): its traces' op_stats, or, when it has no trace, its key_averages tables (their
 * Self CPU / CPU total, or the device's columns; on the GPU only the rows with device time or
 * device memory, as a trace has only operators that launched GPU work).
 */
const char *const store_ops_sources[] = { "trace", "key_averages" };
const char *const store_ops_from[] = {
	"(SELECT name, calls, self_ns, total_ns FROM op_stats WHERE " RANK_ROWS " AND device=?3)",
	"(SELECT name, calls, CASE ?3 WHEN 0 THEN self_cpu_ns ELSE self_dev_ns END self_ns,"
	" CASE ?3 WHEN 0 THEN cpu_total_ns ELSE dev_total_ns END total_ns,"
	" CASE ?3 WHEN 0 THEN cpu_mem_bytes ELSE dev_mem_bytes END mem_bytes,"
	" CASE ?3 WHEN 0 THEN self_cpu_mem_bytes ELSE self_dev_mem_bytes END self_mem_bytes FROM keyavg_ops"
	" WHERE artifact_id IN (" RANK_ARTIFACTS ") AND (?3=0 OR COALESCE(self_dev_ns, 0)!=0"
	" OR COALESCE(dev_total_ns, 0)!=0 OR COALESCE(dev_mem_bytes, 0)!=0 OR COALESCE(self_dev_mem_bytes, 0)!=0))",
};

/* OPS_KEYAVG when the rank has key_averages tables and no trace, else OPS_TRACE; -1 on failure. */
int store_ops_source(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT EXISTS (" RANK_ARTIFACTS " AND a.kind='key_averages'),"
				       " EXISTS (" RANK_ARTIFACTS " AND a.kind='trace')", run, rank, err);
	int step, src;

	if (!st)
		return -1;
	step = db_step(st);
	src = step == DB_ROW && db_column_int(st, 0) && !db_column_int(st, 1) ? OPS_KEYAVG : OPS_TRACE;
	db_finalize(st);
	return step == DB_ROW ? src : (store_db_fail(err, r->db, "read artifacts"), -1);
}

int store_ops(struct store_reader *r, const char *run, int rank, int device, const char *sort, long limit,
	      struct store_table *out, struct tp_errbuf *err)
{
	static const char *const cols[] = { "name", "calls", "self_ns", "total_ns", "mem_bytes", "self_mem_bytes" };
	static const char *const tcols[] = { "names", "calls", "self_ns" };
	static const char *const ccols[] = { "names", "calls", "self_ns", "total_ns" };
	static const char *const fcols[] = { "tables", "device", "self_cpu_time_total_ns", "self_device_time_total_ns" };
	char sql[2048], total[2048];
	struct db_stmt *st;
	size_t i;
	int src;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < sizeof(op_sorts) / sizeof(op_sorts[0]) && strcmp(sort, op_sorts[i]); i++)
		;
	if (i == sizeof(op_sorts) / sizeof(op_sorts[0]))
		return tp_fail(err, TP_ERR_INVALID, "invalid_parameter", "sort must be self_ns, total_ns, calls or name");
	if ((rank = store_rank_of(r, run, rank, err)) < 0 || (src = store_ops_source(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	out->source = store_ops_sources[src];
	/* memory columns only where key_averages printed them */
	snprintf(sql, sizeof(sql), "SELECT name, SUM(calls) calls, SUM(self_ns) self_ns, SUM(total_ns) total_ns%s"
		 " FROM %s GROUP BY name ORDER BY %s%s, name LIMIT ?4",
		 src == OPS_KEYAVG ? ", SUM(mem_bytes), SUM(self_mem_bytes)" : "", store_ops_from[src], op_sorts[i],
		 i < 3 ? " DESC" : "");
	snprintf(total, sizeof(total), "SELECT COUNT(DISTINCT name), COALESCE(SUM(calls), 0), COALESCE(SUM(self_ns), 0)"
		 " FROM %s", store_ops_from[src]);
	if (table(r, run, rank, device, limit, sql, cols, src == OPS_KEYAVG ? 6 : 4, total, tcols, out, err))
		goto fail;
	/* the host-side collectives among them, as a group (the prefixes are an_op_is_comm's) */
	snprintf(sql, sizeof(sql), "SELECT COUNT(DISTINCT name), COALESCE(SUM(calls), 0), COALESCE(SUM(self_ns), 0),"
		 " COALESCE(SUM(total_ns), 0) FROM %s"
		 " WHERE (substr(name, 1, 5) IN ('nccl:', 'gloo:') OR substr(name, 1, 6) = 'c10d::'"
		 " OR name = 'record_param_comms')",
		 store_ops_from[src]);
	if (!(st = store_prepare_rank(r, sql, run, rank, err)))
		goto fail;
	db_bind_int(st, 3, device);
	if (store_rows_read(r, st, ccols, 4, &out->communication, err))
		goto fail;
	/* a key_averages answer's footers, summed over the rank's tables, and their device word */
	if (src == OPS_KEYAVG) {
		if (!(st = store_prepare_rank(r, "SELECT COUNT(*), MAX(device), SUM(self_cpu_total_ns), SUM(self_dev_total_ns)"
				       " FROM keyavg_tables WHERE artifact_id IN (" RANK_ARTIFACTS ")", run, rank, err)) ||
		    store_rows_read(r, st, fcols, 4, &out->footers, err))
			goto fail;
	}
	return TP_OK;
fail:
	store_table_free(out);
	return err->rc ? err->rc : TP_ERR_DB;
}

int store_kernels(struct store_reader *r, const char *run, int rank, int kind, long limit, struct store_table *out,
		  struct tp_errbuf *err)
{
	static const char *const cols[] = { "name", "calls", "total_ns", "mean_ns", "max_ns", "min_ns",
					    "blocks_per_sm", "achieved_occupancy_pct" };
	static const char *const tcols[] = { "names", "calls", "total_ns" };

	memset(out, 0, sizeof(*out));
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	if (table(r, run, rank, kind, limit,
		  "SELECT name, SUM(calls), SUM(total_ns), SUM(total_ns) / SUM(calls), MAX(max_ns),"
		  " MIN(min_ns), SUM(bps_sum) / NULLIF(SUM(bps_ns), 0), SUM(occ_sum) / NULLIF(SUM(occ_ns), 0)"
		  " FROM kernel_stats WHERE " RANK_ROWS " AND kind=?3"
		  " GROUP BY name ORDER BY 3 DESC, name LIMIT ?4", cols, 8,
		  "SELECT COUNT(DISTINCT name), COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0)"
		  " FROM kernel_stats WHERE " RANK_ROWS " AND kind=?3", tcols, out, err)) {
		store_table_free(out);
		return err->rc ? err->rc : TP_ERR_DB;
	}
	return TP_OK;
}
