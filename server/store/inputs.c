/*
 * inputs.c: what analysis/ computes from, read in one go: a run's ranks,
 * the distributed view's steps and collectives, diagnosis' figures of a rank
 * and a compare's figures of a run.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

/* The rank's complete steps in time order: durations, and their numbers in *nums when asked for. */
static int rank_durations(struct store_reader *r, const char *run, int rank, int64_t **out, int64_t **nums,
			  size_t *n, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT step, start_ns, dur_ns FROM steps"
				       " WHERE " RANK_ROWS " AND incomplete=0 AND whole_trace=0"
				       " ORDER BY start_ns, dur_ns, step", run, rank, err);
	size_t cap = 0;
	int step;

	*out = NULL;
	if (nums)
		*nums = NULL;
	*n = 0;
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			size_t c = cap ? cap * 2 : 64;
			int64_t *nd = tp_realloc(*out, c * sizeof(**out));
			if (nd)
				*out = nd;
			if (nd && nums && (nd = tp_realloc(*nums, c * sizeof(**nums))))
				*nums = nd;
			if (!nd)
				break;
			cap = c;
		}
		if (nums)
			(*nums)[*n] = db_column_int64(st, 0);
		(*out)[(*n)++] = db_column_int64(st, 2);
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	tp_free(*out);
	*out = NULL;
	if (nums) {
		tp_free(*nums);
		*nums = NULL;
	}
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				  : store_db_fail(err, r->db, "read steps");
}

/* The devices with a memory timeline on a rank, GPUs first, as /memory picks. */
static int rank_devices(struct store_reader *r, const char *run, struct store_rank *k, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT device FROM (SELECT device FROM memory_series"
				       " WHERE artifact_id IN (" RANK_ARTIFACTS ") UNION"
				       " SELECT device FROM rank_memory_series WHERE " RANK_ROWS ") m"
				       " ORDER BY substr(device, 1, 5) = 'cuda:' DESC, length(device), device", run, k->rank, err);
	struct store_rows rows;
	int rc;

	if (!st || store_rows_read(r, st, (const char *const[]){ "device" }, 1, &rows, err))
		return err->rc ? err->rc : TP_ERR_DB;
	rc = TP_OK;
	if (rows.nrows && !(k->devices = tp_calloc(rows.nrows, sizeof(*k->devices))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; !rc && i < rows.nrows; i++) {
		k->devices[k->ndevices++] = rows.v[i].s;	/* taken from the rows */
		rows.v[i].s = NULL;
	}
	store_rows_free(&rows);
	return rc;
}

/* ---- GET /runs/{run}/distributed ---- */

/* room for need elements of size in *p (capacity *cap, doubling); -1 when out of memory */
static int grow_array(void **p, size_t *cap, size_t need, size_t size)
{
	size_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	while (nc < need)
		nc *= 2;
	if (!(np = tp_realloc(*p, nc * size)))
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

/* text kept for the life of in (dist_input.strs), the same one again when same (a run's process
 * groups are few: a linear search); NULL when out of memory */
static const char *dist_str(struct dist_input *in, size_t *cap, const unsigned char *s, int same)
{
	char *d;

	if (!s)
		s = (const unsigned char *)"";
	for (size_t i = in->nstrs; same && i-- > 0;)
		if (!strcmp(in->strs[i], (const char *)s))
			return in->strs[i];
	if (grow_array((void **)&in->strs, cap, in->nstrs + 1, sizeof(*in->strs)) || !(d = tp_strdup((const char *)s)))
		return NULL;
	return in->strs[in->nstrs++] = d;
}

static int dist_kind(const unsigned char *s)
{
	for (int k = 0; s && k < AN_NCKIND; k++)
		if (!strcmp((const char *)s, an_ckind_names[k]))
			return k;
	return AN_CK_OTHER;
}

#define RUN_TRACES "SELECT a.id, a.rank FROM artifacts a JOIN runs r ON r.id=a.run_id" \
	" WHERE r.name=?1 AND a.status='ready' AND a.kind='trace'"

int store_dist_input(struct store_reader *r, const char *run, struct dist_input *in, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	size_t cap = 0, scap = 0;
	int rc, step;

	memset(in, 0, sizeof(*in));
	if ((rc = store_run_exists(r, run, err)))
		return rc;
	if (!(st = store_prepare(r, "SELECT DISTINCT rank FROM (" RUN_TRACES ") ORDER BY rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (grow_array((void **)&in->ranks, &cap, in->nranks + 1, sizeof(*in->ranks)))
			goto oom;
		in->ranks[in->nranks++] = db_column_int(st, 0);
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	cap = 0;
	if (!(st = store_prepare(r, "SELECT s.rank, s.step, s.start_ns, s.dur_ns, s.kernel_ns, s.communication_ns,"
			      " s.comm_overlap_ns, s.idle_ns, s.incomplete, s.whole_trace, s.gpu_busy_ns FROM steps s"
			      " WHERE s.run_id=(SELECT id FROM runs WHERE name=?1) ORDER BY s.rank, s.start_ns, s.dur_ns, s.step", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (grow_array((void **)&in->steps, &cap, in->nsteps + 1, sizeof(*in->steps)))
			goto oom;
		in->steps[in->nsteps++] = (struct dist_step){
			.rank = db_column_int(st, 0), .step = db_column_int64(st, 1),
			.start_ns = db_column_int64(st, 2), .dur_ns = db_column_int64(st, 3),
			.compute_ns = db_column_int64(st, 4), .communication_ns = db_column_int64(st, 5),
			.overlap_ns = db_column_int64(st, 6), .idle_ns = db_column_int64(st, 7),
			.incomplete = db_column_int(st, 8), .whole_trace = db_column_int(st, 9),
			/* gpu_busy = |kernel u comm| = compute + |comm| - overlap */
			.comm_total_ns = db_column_type(st, 10) == DB_NULL ? -1
					 : db_column_int64(st, 10) - db_column_int64(st, 4) + db_column_int64(st, 6),
		};
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	cap = 0;
	if (!(st = store_prepare(r, "SELECT c.rank, c.step, c.kind, c.pg, c.seq, c.launch_ns, c.start_ns, c.end_ns,"
			      " c.time_ns, c.kernels, c.bytes, c.group_size, c.before_op, c.before_ns FROM collectives c"
			      " WHERE c.run_id=(SELECT id FROM runs WHERE name=?1) ORDER BY c.rank, c.launch_ns, c.start_ns", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		const char *pg = dist_str(in, &scap, db_column_text(st, 3), 1);
		const unsigned char *bt = db_column_text(st, 12);
		const char *before = bt ? dist_str(in, &scap, bt, 0) : NULL;
		if (!pg || (bt && !before) || grow_array((void **)&in->colls, &cap, in->ncolls + 1, sizeof(*in->colls)))
			goto oom;
		in->colls[in->ncolls++] = (struct dist_coll){
			.rank = db_column_int(st, 0),
			.step = db_column_type(st, 1) == DB_NULL ? -1 : db_column_int64(st, 1),
			.kind = dist_kind(db_column_text(st, 2)), .pg = pg,
			.seq = db_column_type(st, 4) == DB_NULL ? -1 : db_column_int64(st, 4),
			.launch_ns = db_column_int64(st, 5), .start_ns = db_column_int64(st, 6),
			.end_ns = db_column_int64(st, 7), .time_ns = db_column_int64(st, 8),
			.kernels = db_column_int64(st, 9),
			.bytes = db_column_type(st, 10) == DB_NULL ? -1 : db_column_int64(st, 10),
			.group_size = db_column_type(st, 11) == DB_NULL ? 0 : db_column_int64(st, 11),
			.before_op = before, .before_ns = db_column_int64(st, 13),
		};
	}
	if (step != DB_DONE)
		goto db;
	db_finalize(st);
	/* the GPU's model, for what bandwidth its links allow: the first trace's first deviceProperties */
	if (!(st = store_prepare(r, "SELECT a.meta FROM artifacts a JOIN (" RUN_TRACES ") t ON t.id=a.id"
			      " WHERE a.meta IS NOT NULL ORDER BY t.rank, a.id", err)))
		goto fail;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		json_t *meta = json_loads((const char *)db_column_text(st, 0), JSON_ALLOW_NUL, NULL);
		const char *name = json_string_value(
			json_object_get(json_array_get(json_object_get(meta, "deviceProperties"), 0), "name"));
		if (name)
			snprintf(in->device, sizeof(in->device), "%s", name);
		json_decref(meta);
		if (name)
			break;
	}
	if (step != DB_ROW && step != DB_DONE)
		goto db;
	db_finalize(st);
	return TP_OK;
oom:
	db_finalize(st);
	dist_input_release(in);
	return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
db:
	rc = store_db_fail(err, r->db, "read distributed");
	db_finalize(st);
	dist_input_release(in);
	return rc;
fail:
	dist_input_release(in);
	return TP_ERR_DB;
}

void store_ranks_free(struct store_rank *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		tp_free(v[i].dur_ns);
		for (size_t d = 0; d < v[i].ndevices; d++)
			tp_free(v[i].devices[d]);
		tp_free(v[i].devices);
	}
	tp_free(v);
}

int store_ranks(struct store_reader *r, const char *run, struct store_rank **out, size_t *n, struct tp_errbuf *err)
{
	struct db_stmt *st;
	struct store_rows rows;
	int rc = TP_OK;

	*out = NULL;
	*n = 0;
	if (store_run_exists(r, run, err))
		return err->rc;
	if (!(st = store_prepare(r, "SELECT DISTINCT a.rank FROM artifacts a JOIN runs r ON r.id=a.run_id"
			      " WHERE r.name=?1 AND a.status='ready' ORDER BY a.rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if (store_rows_read(r, st, (const char *const[]){ "rank" }, 1, &rows, err))
		return err->rc;
	if (rows.nrows && !(*out = tp_calloc(rows.nrows, sizeof(**out))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; !rc && i < rows.nrows; i++) {
		struct store_rank *k = &(*out)[(*n)++];
		k->rank = (int)rows.v[i].i;
		if (!(rc = rank_durations(r, run, k->rank, &k->dur_ns, NULL, &k->nsteps, err)))
			rc = rank_devices(r, run, k, err);
	}
	store_rows_free(&rows);
	if (rc) {
		store_ranks_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

struct step_end {
	int64_t end, seq, alloc;	/* seq: the last point at or before end (-1: none), alloc its allocated */
	size_t n;			/* the step's place in the answer */
};

static int cmp_step_end(const void *a, const void *b)
{
	const struct step_end *x = a, *y = b;

	return x->end < y->end ? -1 : x->end > y->end;
}

/*
 * Allocated at each step end st reads (in the answer's order): the point of
 * series s with the highest seq among those at or before the end, steps with
 * none left out, the first DIAG_MAX_STEPS kept. One walk of the series.
 */
static int ends_alloc(struct store_reader *r, struct db_stmt *st, const struct series *s, struct diag_input *in,
		      struct tp_errbuf *err)
{
	struct store_mem_points *c = NULL;
	struct step_end *e = NULL, *ne;
	size_t n = 0, cap = 0, i;
	int64_t row[MEM_POINT_COLS], seq;
	uint8_t nul;
	int step, rc;

	while ((step = db_step(st)) == DB_ROW) {
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			if (!(ne = tp_realloc(e, cap * sizeof(*e))))
				break;
			e = ne;
		}
		e[n] = (struct step_end){ db_column_int64(st, 0), -1, 0, n };
		n++;
	}
	db_finalize(st);
	if (step != DB_DONE) {
		tp_free(e);
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				      : store_db_fail(err, r->db, "read memory at steps");
	}
	if (!n)
		return TP_OK;
	qsort(e, n, sizeof(*e), cmp_step_end);
	/* a point counts for every step ending at or after it: mark the first, carry the best forward */
	if (!(rc = store_mem_points_open(r, s->run_id, s->rank, s->artifact, s->device, -1, &c, err)))
		while ((rc = store_mem_points_next(c, 1u | 1u << MEM_COL_ALLOCATED | STORE_MEM_SEQ, row, &nul, &seq,
						   err)) == 1) {
			size_t lo = 0, hi = n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (e[mid].end < row[0])
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < n && seq > e[lo].seq) {
				e[lo].seq = seq;
				e[lo].alloc = row[MEM_COL_ALLOCATED];
			}
		}
	store_mem_points_close(c);
	if (rc) {
		tp_free(e);
		return rc;
	}
	for (i = 1; i < n; i++)
		if (e[i - 1].seq > e[i].seq) {
			e[i].seq = e[i - 1].seq;
			e[i].alloc = e[i - 1].alloc;
		}
	/* back to the answer's order: slot n of e by its place */
	int64_t *by = tp_malloc(n * sizeof(*by));
	if (!by) {
		tp_free(e);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	for (i = 0; i < n; i++)
		by[e[i].n] = e[i].seq >= 0 ? e[i].alloc : INT64_MIN;
	for (i = 0; i < n && in->nstep_alloc < DIAG_MAX_STEPS; i++)
		if (by[i] != INT64_MIN)
			in->step_alloc[in->nstep_alloc++] = by[i];
	tp_free(by);
	tp_free(e);
	return TP_OK;
}

/*
 * The memory figures of diagnosis: the peak of the series /memory answers,
 * the device's capacity from any trace's deviceProperties, and allocated
 * memory at the end of each step (the last point at or before it).
 */
static int diag_memory(struct store_reader *r, const char *run, int rank, struct diag_input *in,
		       struct tp_errbuf *err)
{
	struct tp_errbuf none = { 0 };
	struct series s;
	int64_t row[MEM_POINT_COLS];
	struct db_stmt *st;
	int step, c, rc;

	if (store_pick_series(r, run, rank, NULL, &s, &none))
		return none.rc == TP_ERR_NOTFOUND ? TP_OK : (*err = none, none.rc);
	if ((rc = store_series_peak(r, run, &s, row, err)) < 0)
		return rc;
	if (rc) {
		snprintf(in->mem_source, sizeof(in->mem_source), "%s", s.source);
		snprintf(in->mem_device, sizeof(in->mem_device), "%s", s.device);
		in->mem_peak = row[MEM_COL_ALLOCATED];
		for (c = 0; c < MEM_NCAT; c++)
			in->mem_peak_cat[c] = row[1 + c];
	}
	if (!in->mem_source[0])
		return TP_OK;
	if (!strncmp(s.device, "cuda:", 5)) {
		/* the device's totalGlobalMem in the traces' deviceProperties: JSON read here, as every engine would */
		json_int_t id = atoi(s.device + 5);
		double best = -INFINITY;
		int best_int = 0;
		st = store_prepare_rank(r, "SELECT a.meta FROM artifacts a WHERE a.id IN (" RANK_ARTIFACTS ")"
				     " AND a.meta IS NOT NULL", run, rank, err);
		if (!st)
			return TP_ERR_DB;
		while ((step = db_step(st)) == DB_ROW) {
			json_t *meta = json_loads((const char *)db_column_text(st, 0), JSON_ALLOW_NUL, NULL), *d;
			size_t i;
			json_array_foreach(json_object_get(meta, "deviceProperties"), i, d) {
				json_t *dev = json_object_get(d, "id"), *mem = json_object_get(d, "totalGlobalMem");
				if (json_is_number(dev) && json_number_value(dev) == (double)id && json_is_number(mem) &&
				    json_number_value(mem) > best) {
					best = json_number_value(mem);
					best_int = json_is_integer(mem);
					if (best_int)
						in->mem_capacity = json_integer_value(mem);
				}
			}
			json_decref(meta);
		}
		if (!best_int)
			in->mem_capacity = 0;
		db_finalize(st);
		if (step != DB_DONE)
			return store_db_fail(err, r->db, "read device properties");
	}
	st = store_prepare_rank(r, "SELECT COALESCE(k.cpu_end_ns, k.start_ns + k.dur_ns) FROM (SELECT step, start_ns,"
			     " dur_ns, cpu_end_ns FROM steps"
			     " WHERE " RANK_ROWS ") k ORDER BY k.start_ns, k.dur_ns, k.step",
			     run, rank, err);
	if (!st)
		return TP_ERR_DB;
	return ends_alloc(r, st, &s, in, err);
}

static int64_t col_or(struct db_stmt *st, int i)
{
	return db_column_type(st, i) == DB_NULL ? -1 : db_column_int64(st, i);
}

/* The actions of the rank's newest Lightning report, lent from r (valid until it closes). */
static int diag_lightning(struct store_reader *r, const char *run, int rank, struct diag_input *in,
			  struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT action, calls, mean_ns, total_ns, share_bp FROM lightning_actions"
					   " WHERE artifact_id=(SELECT MAX(id) FROM (" RANK_ARTIFACTS
					   " AND a.kind='lightning_report')) ORDER BY n", run, rank, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	store_diag_lent_clear(r);
	while ((step = db_step(st)) == DB_ROW) {
		struct diag_action *a = tp_realloc(r->actions, (r->nactions + 1) * sizeof(*a));
		char *name = tp_strdup((const char *)db_column_text(st, 0));
		if (!a || !name) {
			if (a)
				r->actions = a;
			tp_free(name);
			db_finalize(st);
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		r->actions = a;
		r->actions[r->nactions++] = (struct diag_action){ .name = name, .calls = col_or(st, 1),
			.mean_ns = col_or(st, 2), .total_ns = col_or(st, 3), .share_bp = col_or(st, 4) };
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read lightning actions");
	in->actions = r->actions;
	in->nactions = r->nactions;
	return TP_OK;
}

/*
 * The rank's nvidia-smi samples per GPU index: utilization.gpu's mean and samples under
 * DIAG_GPU_UTIL_LOW_PCT, and the fullest memory sample (used over used + free, or over
 * memory.total), lent from r. A sample shipped twice (a log uploaded again after it grew)
 * counts once: samples are told apart by GPU, time and column.
 */
static int diag_gpu(struct store_reader *r, const char *run, int rank, struct diag_input *in, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r,
		"WITH s AS (SELECT gpu, t_ns, n, artifact_id, name, value FROM gpu_samples"
		" WHERE artifact_id IN (" RANK_ARTIFACTS " AND a.kind='gpu_log')),"
		" u AS (SELECT gpu, AVG(value) mean, COUNT(*) k, SUM(value < ?3) low FROM"
		"  (SELECT gpu, MIN(value) value FROM s WHERE name='utilization.gpu' AND value IS NOT NULL"
		"   GROUP BY gpu, COALESCE(t_ns, artifact_id * 1000000000 + n)) GROUP BY gpu),"
		" m AS (SELECT x.gpu, x.value used, x.value + y.value total FROM s x JOIN s y ON y.artifact_id=x.artifact_id"
		"  AND y.n=x.n AND y.gpu=x.gpu AND y.name='memory.free' WHERE x.name='memory.used'"
		"  UNION ALL SELECT x.gpu, x.value, y.value FROM s x JOIN s y ON y.artifact_id=x.artifact_id"
		"  AND y.n=x.n AND y.gpu=x.gpu AND y.name='memory.total' WHERE x.name='memory.used'),"
		" f AS (SELECT gpu, used, total FROM (SELECT gpu, used, total, ROW_NUMBER() OVER (PARTITION BY gpu"
		"  ORDER BY used / total DESC) k FROM m WHERE total > 0) WHERE k=1)"
		" SELECT g.gpu, u.mean, COALESCE(u.k, 0), COALESCE(u.low, 0), f.used, f.total"
		" FROM (SELECT DISTINCT gpu FROM s) g LEFT JOIN u ON u.gpu=g.gpu LEFT JOIN f ON f.gpu=g.gpu ORDER BY g.gpu",
		run, rank, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	db_bind_int(st, 3, DIAG_GPU_UTIL_LOW_PCT);
	while ((step = db_step(st)) == DB_ROW) {
		struct diag_gpu *g = tp_realloc(r->gpus, (in->ngpus + 1) * sizeof(*g));
		if (!g) {
			db_finalize(st);
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		r->gpus = g;
		r->gpus[in->ngpus++] = (struct diag_gpu){ .index = db_column_int(st, 0),
			.util_mean_pct = db_column_type(st, 1) == DB_NULL ? NAN : db_column_double(st, 1),
			.util_samples = db_column_int64(st, 2), .util_low = db_column_int64(st, 3),
			.mem_used_bytes = db_column_double(st, 4), .mem_total_bytes = db_column_double(st, 5) };
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read gpu samples");
	in->gpus = r->gpus;
	return TP_OK;
}

/* The rank's newest canary metrics, lent from r (valid until it closes). */
static int diag_canary(struct store_reader *r, const char *run, int rank, struct diag_input *in, struct tp_errbuf *err)
{
	int64_t artifact;
	int rc = store_canary_load(r, run, rank, &r->canary, &artifact, err);

	in->canary = !rc && artifact ? &r->canary : NULL;
	return rc;
}

int store_diag_input(struct store_reader *r, const char *run, int rank, struct diag_input *in,
		     int64_t **durs, int64_t **nums, struct tp_errbuf *err)
{
	struct db_stmt *st;
	size_t i;
	int step, c;

	memset(in, 0, sizeof(*in));
	*durs = NULL;
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	in->rank = rank;
	if (!(st = store_prepare_rank(r, "SELECT COUNT(*) FROM (" RANK_ARTIFACTS " AND a.kind='trace')", run, rank, err)))
		return TP_ERR_DB;
	step = db_step(st);
	in->traces = step == DB_ROW ? db_column_int64(st, 0) : 0;
	db_finalize(st);
	if (step != DB_ROW)
		return store_db_fail(err, r->db, "read artifacts");
	if (rank_durations(r, run, rank, durs, nums, &in->nsteps, err))
		return err->rc;
	in->step_dur_ns = *durs;
	/* complete steps, or the whole trace when it has none */
	st = store_prepare_rank(r, "SELECT COALESCE(SUM(dur_ns), 0), COALESCE(SUM(kernel_ns), 0), COALESCE(SUM(memcpy_ns), 0),"
			     " COALESCE(SUM(memset_ns), 0), COALESCE(SUM(communication_ns), 0), COALESCE(SUM(runtime_ns), 0),"
			     " COALESCE(SUM(dataloader_ns), 0), COALESCE(SUM(cpu_ns), 0), COALESCE(SUM(idle_ns), 0),"
			     " COALESCE(SUM(comm_overlap_ns), 0), COALESCE(SUM(whole_trace), 0),"
			     " COALESCE(SUM(COALESCE(gpu_busy_ns, kernel_ns)), 0), COALESCE(SUM(sync_calls), 0),"
			     " COALESCE(SUM(sync_ns), 0), COUNT(sync_ns) FROM (SELECT step,"
			     " start_ns, dur_ns, " STEP_COMPS ", comm_overlap_ns, whole_trace, gpu_busy_ns, sync_calls,"
			     " sync_ns FROM steps WHERE " RANK_ROWS " AND incomplete=0)", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	if ((step = db_step(st)) == DB_ROW) {
		in->steps_ns = db_column_int64(st, 0);
		for (c = 0; c < AN_NCOMP; c++)
			in->comp_ns[c] = db_column_int64(st, 1 + c);
		in->comm_overlap_ns = db_column_int64(st, 1 + AN_NCOMP);
		in->whole_trace = db_column_int64(st, 2 + AN_NCOMP) > 0;
		in->gpu_busy_ns = db_column_int64(st, 3 + AN_NCOMP);
		in->step_sync_calls = db_column_int64(st, 4 + AN_NCOMP);
		in->step_sync_ns = db_column_int64(st, 5 + AN_NCOMP);
		in->step_sync_known = db_column_int64(st, 6 + AN_NCOMP) > 0;
	}
	db_finalize(st);
	if (step != DB_ROW)
		return store_db_fail(err, r->db, "read steps");
	st = store_prepare_rank(r, "SELECT kind, COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0),"
			     " COALESCE(SUM(tiny_calls), 0), COALESCE(SUM(tiny_ns), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtoh%' THEN calls END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtoh%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%dtod%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%pageable%' THEN total_ns END), 0),"
			     " COALESCE(SUM(CASE WHEN lower(name) LIKE '%pinned%' THEN total_ns END), 0)"
			     " FROM kernel_stats WHERE " RANK_ROWS " GROUP BY kind", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		int kind = db_column_int(st, 0);
		int64_t calls = db_column_int64(st, 1), ns = db_column_int64(st, 2);
		if (kind == AN_GPU_KERNEL) {
			in->kernel_calls = calls;
			in->kernel_ns = ns;
			in->tiny_calls = db_column_int64(st, 3);
			in->tiny_ns = db_column_int64(st, 4);
		} else if (kind == AN_GPU_MEMCPY) {
			in->memcpy_calls = calls;
			in->memcpy_ns = ns;
			in->dtoh_calls = db_column_int64(st, 5);
			in->dtoh_ns = db_column_int64(st, 6);
			in->dtod_ns = db_column_int64(st, 7);
			in->pageable_ns = db_column_int64(st, 8);
			in->pinned_ns = db_column_int64(st, 9);
		} else if (kind == AN_GPU_MEMSET) {
			in->memset_ns = ns;
		}
	}
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, r->db, "read kernels");
	st = store_prepare_rank(r, "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(total_ns), 0) FROM op_stats"
			     " WHERE " RANK_ROWS " AND device=0 AND name=?3", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	for (i = 0; i < DIAG_NSYNC; i++) {
		db_reset(st);
		store_bind_text(st, 3, diag_sync_names[i]);
		if ((step = db_step(st)) != DB_ROW)
			break;
		in->sync_calls[i] = db_column_int64(st, 0);
		in->sync_ns[i] = db_column_int64(st, 1);
	}
	db_finalize(st);
	if (i != DIAG_NSYNC)
		return store_db_fail(err, r->db, "read ops");
	return diag_memory(r, run, rank, in, err) || diag_canary(r, run, rank, in, err) ||
	       diag_lightning(r, run, rank, in, err) || diag_gpu(r, run, rank, in, err) ? err->rc : TP_OK;
}

/* Rows (name, calls, ns[, kind]) of st (bound) into items; finalizes st. */
static int load_items(struct store_reader *r, struct db_stmt *st, struct compare_item **items, size_t *n,
		      struct tp_errbuf *err)
{
	size_t cap = 0;
	int step;

	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			struct compare_item *ni = tp_realloc(*items, (cap = cap ? cap * 2 : 64) * sizeof(**items));
			if (!ni)
				break;
			*items = ni;
		}
		struct compare_item *it = &(*items)[*n];
		if (!(it->name = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		it->calls = db_column_int64(st, 1);
		it->ns = db_column_int64(st, 2);
		it->kind = db_column_int(st, 3);
		(*n)++;
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read");
}

/* The groups at the peak of series s, as /memory/peak lists them, into out's sites. */
static int compare_sites(struct store_reader *r, const struct series *s, struct compare_run *out, struct tp_errbuf *err)
{
	struct store_rows g;
	int rc = store_mem_groups(r, s->run_id, s->rank, s->artifact, s->device, &g, err);

	if (rc)
		return rc;
	if (g.nrows && !(out->sites = tp_calloc(g.nrows, sizeof(*out->sites))))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (size_t i = 0; !rc && i < g.nrows; i++) {
		const struct store_val *v = &g.v[i * g.ncols];	/* category, op, bytes, count */
		struct compare_item *it = &out->sites[out->nsites];
		int c = 0;

		while (c < MEM_NCAT && !(v[0].s && !strcmp(v[0].s, mem_cat_names[c])))
			c++;
		if (c == MEM_NCAT || v[2].type != SV_INT)
			continue;	/* a category this build does not know: left out, as the peak's split does */
		if (!(it->name = tp_strdup(v[1].s ? v[1].s : ""))) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			break;
		}
		it->kind = c;
		it->ns = v[2].i;
		it->calls = v[3].type == SV_INT ? v[3].i : 0;
		out->nsites++;
	}
	store_rows_free(&g);
	return rc;
}

/* The peak of the series memory reads answer from, when there is one. */
static int compare_memory(struct store_reader *r, const char *run, struct compare_run *out, struct tp_errbuf *err)
{
	struct tp_errbuf none = { 0 };
	struct series s;
	int64_t row[MEM_POINT_COLS];
	struct db_stmt *st;
	int rc = store_pick_series(r, run, out->rank, NULL, &s, &none), step;

	if (rc == TP_ERR_NOTFOUND)
		return TP_OK;
	if (rc)
		return tp_fail(err, rc, none.code, "%s", none.msg);
	if (s.peak_seq < 0)
		return TP_OK;
	if ((rc = store_series_peak(r, run, &s, row, err)) < 0)
		return rc;
	if (rc) {
		out->has_memory = 1;
		snprintf(out->mem_device, sizeof(out->mem_device), "%s", s.device);
		snprintf(out->mem_source, sizeof(out->mem_source), "%s", s.source);
		memcpy(out->peak_cat, &row[1], sizeof(out->peak_cat));
		out->peak_bytes = row[MEM_COL_ALLOCATED];
		if ((rc = compare_sites(r, &s, out, err)))
			return rc;
	}
	if (!(st = store_prepare(r, s.artifact ? "SELECT max_reserved FROM memory_series WHERE artifact_id=?1 AND device=?2"
					       : "SELECT max_reserved FROM rank_memory_series WHERE run_id=?1 AND device=?2"
						 " AND rank=?3", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, s.artifact ? s.artifact : s.run_id);
	store_bind_text(st, 2, s.device);
	if (!s.artifact)
		db_bind_int(st, 3, s.rank);
	step = db_step(st);
	out->reserved_bytes = step == DB_ROW && db_column_type(st, 0) != DB_NULL ? db_column_int64(st, 0) : -1;
	db_finalize(st);
	return step == DB_ROW ? TP_OK : store_db_fail(err, r->db, "read memory");
}

int store_compare_input(struct store_reader *r, const char *run, int rank, struct compare_run *out,
			struct tp_errbuf *err)
{
	struct diag_input in;
	struct db_stmt *st;
	size_t cap = 0;
	int rc, step, src;
	char sql[1024];

	memset(out, 0, sizeof(*out));
	if (!(out->run = tp_strdup(run)))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	/* the steps and their breakdown, as diagnosis reads them */
	if ((rc = store_diag_input(r, run, rank, &in, &out->dur_ns, &out->step_no, err)))
		return rc;
	out->rank = in.rank;
	out->nsteps = in.nsteps;
	memcpy(out->comp_ns, in.comp_ns, sizeof(out->comp_ns));
	if ((out->has_canary = in.canary != NULL))
		out->canary = in.canary->perf;
	if ((src = store_ops_source(r, run, out->rank, err)) < 0)
		return err->rc;
	out->ops_source = store_ops_sources[src];
	/* a trace's rank with complete steps: the work inside them (inside_steps, analysis/inside.c); else the whole tables */
	out->in_steps = out->nsteps && !strcmp(out->ops_source, "trace");
	if (out->in_steps)
		snprintf(sql, sizeof(sql), "SELECT name, calls, ns, kind FROM inside_steps WHERE " RANK_ROWS " AND gpu=0");
	else
		snprintf(sql, sizeof(sql), "SELECT name, SUM(calls), SUM(self_ns), 0 FROM %s GROUP BY name",
			 store_ops_from[src]);
	if (!(st = store_prepare_rank(r, sql, run, out->rank, err)))
		return TP_ERR_DB;
	if (!out->in_steps)
		db_bind_int(st, 3, AN_DEV_CPU);
	if ((rc = load_items(r, st, &out->ops, &out->nops, err)))
		return rc;
	if (!(st = store_prepare_rank(r, out->in_steps ? "SELECT name, calls, ns, kind FROM inside_steps WHERE " RANK_ROWS
					  " AND gpu=1"
					: "SELECT name, SUM(calls), SUM(total_ns), kind FROM kernel_stats WHERE " RANK_ROWS
					  " GROUP BY kind, name", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->kernels, &out->nkernels, err)))
		return rc ? rc : TP_ERR_DB;
	if ((rc = compare_memory(r, run, out, err)))
		return rc;
	/* the newest Lightning report's actions (one name may be printed twice: summed), the stacks' frames */
	if (!(st = store_prepare_rank(r, "SELECT action, COALESCE(SUM(calls), 0), SUM(total_ns), 0 FROM lightning_actions"
			       " WHERE artifact_id=(SELECT MAX(id) FROM (" RANK_ARTIFACTS " AND a.kind='lightning_report'))"
			       " AND total_ns IS NOT NULL GROUP BY action", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->actions, &out->nactions, err)))
		return rc ? rc : TP_ERR_DB;
	if (!(st = store_prepare_rank(r, "SELECT frame, SUM(self), SUM(total), 0 FROM stack_frames WHERE artifact_id IN ("
			       RANK_ARTIFACTS " AND a.kind='stacks') GROUP BY frame", run, out->rank, err)) ||
	    (rc = load_items(r, st, &out->frames, &out->nframes, err)))
		return rc ? rc : TP_ERR_DB;
	if (!(st = store_prepare(r, "SELECT m.name, AVG(m.value), COUNT(*) FROM metrics m JOIN runs r ON r.id=m.run_id"
			      " WHERE r.name=?1 GROUP BY m.name", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (out->nmetrics == cap) {
			struct compare_metric *nm = tp_realloc(out->metrics, (cap = cap ? cap * 2 : 8) * sizeof(*nm));
			if (!nm)
				break;
			out->metrics = nm;
		}
		struct compare_metric *m = &out->metrics[out->nmetrics];
		if (!(m->name = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		m->mean = db_column_double(st, 1);
		m->count = db_column_int64(st, 2);
		out->nmetrics++;
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read metrics");
}
