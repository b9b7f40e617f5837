/*
 * memory.c: memory timelines. The series a memory read answers from,
 * its point blocks one point at a time, the groups at its peak, a snapshot's
 * segments, and a rank's steps with allocated memory at each step's end.
 *
 * A series is recorded by an export's or snapshot's artifact (memory_series
 * and its tables, by artifact_id), or by the rank's traces (rank_memory_series
 * and its tables, by (run_id, rank): migration 024); the reads name the
 * rank's trace series recording 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "store/evpack.h"
#include "analysis/runline.h"
#include "store/store_int.h"

/* One recording of a candidate series: its source and the span of its points. */
struct rec_span {
	int source;			/* index of its source among those met, in preference order */
	int64_t artifact, points, first_t, last_t;
};

/* The time of the last point of a recording on device (points of them): 1, 0 when it has none, or a tp_err. */
static int recording_end(struct store_reader *r, int64_t run_id, int rank, int64_t artifact, const char *device,
			 int64_t points, int64_t *t, struct tp_errbuf *err)
{
	struct store_mem_points *c;
	int64_t row[MEM_POINT_COLS], seq;
	uint8_t nul;
	int rc;

	if (points < 1)
		return 0;
	if ((rc = store_mem_points_open(r, run_id, rank, artifact, device, points - 1, &c, err)))
		return rc;
	if ((rc = store_mem_points_next(c, 1u, row, &nul, &seq, err)) == 1)
		*t = row[0];
	store_mem_points_close(c);
	return rc;
}

/*
 * How many of the rank's profiling cycles each source's recordings reach, into
 * covered[]. A cycle is one trace's steps (the rows of one source_artifact),
 * from the earliest host start of a ProfilerStep#N span to the latest end, host
 * or device; a recording reaches it when the span of its points, first to
 * last, overlaps it.
 */
static int sources_cover(struct store_reader *r, const char *run, int rank, const struct rec_span *v, size_t n,
			 size_t *covered, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare_rank(r, "SELECT MIN(MIN(start_ns, COALESCE(cpu_end_ns - cpu_dur_ns, start_ns))),"
					     " MAX(MAX(start_ns + dur_ns, COALESCE(cpu_end_ns, start_ns))) FROM steps"
					     " WHERE " RANK_ROWS " GROUP BY source_artifact", run, rank, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		int64_t from = db_column_int64(st, 0), to = db_column_int64(st, 1);
		int counted = -1;
		/* v is in source order: a source counts once a cycle */
		for (size_t i = 0; i < n; i++)
			if (v[i].source != counted && v[i].first_t <= to && v[i].last_t >= from) {
				covered[v[i].source]++;
				counted = v[i].source;
			}
	}
	db_finalize(st);
	return step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read steps");
}

/*
 * The device and source a memory read answers from: device given, else the first GPU, else
 * cpu; the source whose recordings reach the most of the rank's profiling cycles
 * (sources_cover), so that the timeline spans the run where one source does, and among
 * sources that reach as many the best (PyTorch's own export, then a snapshot, then trace
 * inference). 1, 0 when the rank has no memory series there, or a tp_err.
 */
static int pick_source(struct store_reader *r, const char *run, int64_t run_id, int rank, const char *device,
		       char dev[16], char source[16], struct tp_errbuf *err)
{
	struct db_stmt *st;
	struct rec_span *v = NULL;
	char names[3][16];
	size_t n = 0, cap = 0, covered[3] = { 0 }, i;
	int nsources = 0, best = 0, step, rc = 0;

	st = store_prepare_rank(r, "SELECT device, source, artifact_id, first_t_ns, points FROM"
			     " (SELECT device, source, artifact_id, first_t_ns, points FROM memory_series"
			     " WHERE artifact_id IN (" RANK_ARTIFACTS ") UNION ALL"
			     " SELECT device, 'trace', 0, first_t_ns, points FROM rank_memory_series WHERE " RANK_ROWS ") m"
			     " WHERE (?3 IS NULL OR device=?3) ORDER BY substr(device, 1, 5) = 'cuda:' DESC, length(device), device,"
			     " CASE source WHEN 'pytorch' THEN 0 WHEN 'snapshot' THEN 1 ELSE 2 END, first_t_ns",
			     run, rank, err);
	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 3, device);
	dev[0] = 0;
	while ((step = db_step(st)) == DB_ROW) {
		const char *d = (const char *)db_column_text(st, 0), *src = (const char *)db_column_text(st, 1);
		if (dev[0] && strcmp(dev, d))
			break;
		snprintf(dev, 16, "%s", d);
		if (!nsources || strcmp(names[nsources - 1], src)) {
			if (nsources == 3)	/* pytorch, snapshot, trace: no other is written */
				break;
			snprintf(names[nsources++], sizeof(names[0]), "%s", src);
		}
		if (n == cap) {
			struct rec_span *nv = tp_realloc(v, (cap = cap ? cap * 2 : 16) * sizeof(*nv));
			if (!nv) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
			v = nv;
		}
		v[n].source = nsources - 1;
		v[n].artifact = db_column_int64(st, 2);
		v[n].first_t = db_column_type(st, 3) == DB_NULL ? INT64_MAX : db_column_int64(st, 3);
		v[n].points = db_column_int64(st, 4);
		v[n].last_t = INT64_MIN;
		n++;
	}
	if (!rc && step != DB_ROW && step != DB_DONE)
		rc = store_db_fail(err, r->db, "read memory");
	db_finalize(st);
	/* one source: nothing to weigh */
	for (i = 0; !rc && nsources > 1 && i < n; i++)
		if ((rc = recording_end(r, run_id, rank, v[i].artifact, dev, v[i].points, &v[i].last_t, err)) > 0)
			rc = 0;
	if (!rc && nsources > 1 && !(rc = sources_cover(r, run, rank, v, n, covered, err)))
		for (int k = 1; k < nsources; k++)
			if (covered[k] > covered[best])
				best = k;
	tp_free(v);
	if (rc)
		return rc;
	snprintf(source, 16, "%.15s", nsources ? names[best] : "");
	return dev[0] != 0;
}

/* The id of run (0: none). */
static int run_id_of(struct store_reader *r, const char *run, int64_t *out, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT id FROM runs WHERE name=?1", err);
	int step;

	*out = 0;
	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if ((step = db_step(st)) == DB_ROW)
		*out = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read run");
}

/*
 * The series a memory read answers from: pick_source's device and source. Every recording
 * of that source on that device is one series, stitched in time (load_points); artifact is
 * the one that holds its highest peak (the newest of equal ones; 0: the rank's trace series,
 * the one recording of a trace source).
 */
int store_pick_series(struct store_reader *r, const char *run, int rank, const char *device, struct series *out,
		       struct tp_errbuf *err)
{
	struct db_stmt *st;
	char dev[16], source[16];
	int step;

	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	out->rank = rank;
	if (run_id_of(r, run, &out->run_id, err))
		return TP_ERR_DB;
	if ((step = pick_source(r, run, out->run_id, rank, device, dev, source, err)) < 0)
		return step;
	if (!step)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_memory_data", "run '%s' has no memory data for rank %d%s%s",
			       run, rank, device ? " on " : "", device ? device : "");
	st = store_prepare_rank(r, strcmp(source, "trace") ? "SELECT artifact_id, device, source, peak_seq FROM memory_series"
							 " WHERE artifact_id IN (" RANK_ARTIFACTS ") AND device=?3 AND source=?4"
							 " ORDER BY peak_allocated DESC, artifact_id DESC LIMIT 1"
						       : "SELECT 0, device, 'trace', peak_seq FROM rank_memory_series"
							 " WHERE " RANK_ROWS " AND device=?3",
				run, rank, err);
	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 3, dev);
	if (strcmp(source, "trace"))
		store_bind_text(st, 4, source);
	step = db_step(st);
	if (step == DB_ROW) {
		out->artifact = db_column_int64(st, 0);
		snprintf(out->device, sizeof(out->device), "%s", db_column_text(st, 1));
		snprintf(out->source, sizeof(out->source), "%s", db_column_text(st, 2));
		out->peak_seq = db_column_type(st, 3) == DB_NULL ? -1 : db_column_int64(st, 3);
	}
	db_finalize(st);
	if (step == DB_ROW)
		return TP_OK;
	return store_db_fail(err, r->db, "read memory");
}

/* The run's metadata param_bytes for a series of source (PyTorch's export has its own categories: 0). */
static int param_bytes_of(struct store_reader *r, const char *run, const char *source, int64_t *out,
			  struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*out = 0;
	if (!strcmp(source, "pytorch"))
		return TP_OK;
	if (!(st = store_prepare(r, "SELECT metadata FROM runs WHERE name=?1", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if ((step = db_step(st)) == DB_ROW) {
		/* a JSON document: read here, so that every engine reads it alike */
		json_t *meta = json_loads((const char *)db_column_text(st, 0), 0, NULL),
		       *v = json_object_get(meta, "param_bytes");
		if (json_is_integer(v) && json_integer_value(v) > 0)
			*out = json_integer_value(v);
		json_decref(meta);
		step = DB_DONE;
	}
	db_finalize(st);
	return step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read memory");
}

void store_mem_series_free(struct store_mem_series *s)
{
	tp_free(s->recordings);
	tp_free(s->baselines);
	s->recordings = s->baselines = NULL;
	s->nrecordings = 0;
}

int store_mem_series(struct store_reader *r, const char *run, int rank, const char *device,
		     struct store_mem_series *out, struct tp_errbuf *err)
{
	struct series s;
	struct db_stmt *st;
	int step;

	memset(out, 0, sizeof(*out));
	if (store_pick_series(r, run, rank, device, &s, err))
		return err->rc ? err->rc : TP_ERR_DB;
	out->rank = s.rank;
	out->run_id = s.run_id;
	out->artifact = s.artifact;
	out->peak_seq = s.peak_seq;
	memcpy(out->device, s.device, sizeof(out->device));
	memcpy(out->source, s.source, sizeof(out->source));
	if (!(st = store_prepare_rank(r, strcmp(s.source, "trace") ? "SELECT m.artifact_id, m.baseline FROM memory_series m"
									 " WHERE m.artifact_id IN (" RANK_ARTIFACTS ") AND"
									 " m.device=?3 AND m.source=?4 ORDER BY"
									 " m.first_t_ns, m.artifact_id"
								       : "SELECT 0, baseline FROM rank_memory_series WHERE "
									 RANK_ROWS " AND device=?3",
				      run, s.rank, err)))
		return TP_ERR_DB;
	store_bind_text(st, 3, s.device);
	if (strcmp(s.source, "trace"))
		store_bind_text(st, 4, s.source);
	step = store_read_pairs(st, &out->recordings, &out->baselines, &out->nrecordings);
	db_finalize(st);
	if (step != DB_DONE) {
		store_mem_series_free(out);
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read memory");
	}
	if (param_bytes_of(r, run, s.source, &out->param_bytes, err)) {
		store_mem_series_free(out);
		return TP_ERR_DB;
	}
	return TP_OK;
}

/* A walk over a recording's blocks (memory_point_blocks, or the rank's rank_memory_point_blocks), one decoded at a time. */
struct store_mem_points {
	struct store_reader *r;
	struct db_stmt *st;
	int64_t artifact, seq, only;	/* artifact 0: the rank's trace series; seq: the next point's; only: the one point wanted, or -1 */
	int rank;
	int64_t (*rows)[MEM_POINT_COLS];
	uint8_t *nul;
	size_t n, i, cap;		/* rows decoded, the next to give, room */
};

int store_mem_points_open(struct store_reader *r, int64_t run_id, int rank, int64_t artifact, const char *device,
			  int64_t only_seq, struct store_mem_points **out, struct tp_errbuf *err)
{
	static const char *const sql[2][2] = {
		{ "SELECT first_seq, n, data FROM memory_point_blocks WHERE artifact_id=?1 AND device=?2 ORDER BY first_seq",
		  "SELECT first_seq, n, data FROM memory_point_blocks WHERE artifact_id=?1 AND device=?2 AND first_seq <= ?3"
		  " ORDER BY first_seq DESC LIMIT 1" },
		{ "SELECT first_seq, n, data FROM rank_memory_point_blocks WHERE run_id=?1 AND device=?2 AND rank=?3"
		  " ORDER BY first_seq",
		  "SELECT first_seq, n, data FROM rank_memory_point_blocks WHERE run_id=?1 AND device=?2 AND rank=?3"
		  " AND first_seq <= ?4 ORDER BY first_seq DESC LIMIT 1" },
	};
	struct store_mem_points *c = tp_calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	c->r = r;
	c->artifact = artifact;
	c->rank = rank;
	c->only = only_seq;
	if (db_prepare(r->db, sql[!artifact][only_seq >= 0], 0, &c->st) != DB_OK) {
		tp_free(c);
		return store_db_fail(err, r->db, "prepare");
	}
	db_bind_int64(c->st, 1, artifact ? artifact : run_id);
	store_bind_text(c->st, 2, device);
	if (!artifact)
		db_bind_int(c->st, 3, rank);
	if (only_seq >= 0)
		db_bind_int64(c->st, artifact ? 3 : 4, only_seq);
	*out = c;
	return TP_OK;
}

/* The next block into c's rows: 1, 0 after the last, or a tp_err. */
static int points_block(struct store_mem_points *c, struct tp_errbuf *err)
{
	int step = db_step(c->st);
	int64_t first, n;

	if (step == DB_DONE)
		return 0;
	if (step != DB_ROW)
		return store_db_fail(err, c->r->db, "read memory");
	first = db_column_int64(c->st, 0);
	n = db_column_int64(c->st, 1);
	if (n < 1 || n > (1 << 16) || first < 0)	/* blocks are PT_BLOCK */
		goto corrupt;
	if ((size_t)n > c->cap) {
		int64_t (*nr)[MEM_POINT_COLS] = tp_realloc(c->rows, (size_t)n * sizeof(*nr));
		uint8_t *nn = nr ? tp_realloc(c->nul, (size_t)n) : NULL;
		if (nr)
			c->rows = nr;
		if (!nn)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		c->nul = nn;
		c->cap = (size_t)n;
	}
	if (ptpack_decode(db_column_blob(c->st, 2), (size_t)db_column_bytes(c->st, 2), (size_t)n, c->rows, c->nul))
		goto corrupt;
	c->n = (size_t)n;
	c->i = 0;
	c->seq = first;
	if (c->only >= 0) {
		if (c->only - first >= n) {
			c->n = c->i = 0;
			return 0;
		}
		c->i = (size_t)(c->only - first);
		c->n = c->i + 1;
		c->seq = c->only;
	}
	return 1;
corrupt:
	if (!c->artifact)
		return tp_fail(err, TP_ERR_DB, "database_error", "a memory point block of rank %d's traces is corrupt",
			       c->rank);
	return tp_fail(err, TP_ERR_DB, "database_error", "a memory point block of artifact %lld is corrupt",
		       (long long)c->artifact);
}

int store_mem_points_next(struct store_mem_points *c, uint32_t cols, int64_t row[MEM_POINT_COLS],
			  uint8_t *reserved_null, int64_t *seq, struct tp_errbuf *err)
{
	int rc;

	if (c->i == c->n) {
		if (c->only >= 0 && c->n)
			return 0;
		if ((rc = points_block(c, err)) <= 0)
			return rc;
	}
	for (int k = 0; k < MEM_POINT_COLS; k++)
		if (cols & (1u << k))
			row[k] = c->rows[c->i][k];
	if (cols & (1u << MEM_COL_RESERVED))
		*reserved_null = c->nul[c->i];
	if (cols & STORE_MEM_SEQ)
		*seq = c->seq;
	c->i++;
	c->seq++;
	return 1;
}

void store_mem_points_close(struct store_mem_points *c)
{
	if (!c)
		return;
	db_finalize(c->st);
	tp_free(c->rows);
	tp_free(c->nul);
	tp_free(c);
}

int store_mem_groups(struct store_reader *r, int64_t run_id, int rank, int64_t artifact, const char *device,
		     struct store_rows *out, struct tp_errbuf *err)
{
	static const char *const cols[] = { "category", "op", "bytes", "count" };
	struct db_stmt *st = store_prepare(r, artifact ? "SELECT category, op, bytes, count FROM memory_groups WHERE artifact_id=?1"
						 " AND device=?2 ORDER BY n"
					       : "SELECT category, op, bytes, count FROM rank_memory_groups WHERE run_id=?1"
						 " AND device=?2 AND rank=?3 ORDER BY n", err);

	memset(out, 0, sizeof(*out));
	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, artifact ? artifact : run_id);
	store_bind_text(st, 2, device);
	if (!artifact)
		db_bind_int(st, 3, rank);
	return store_rows_read(r, st, cols, 4, out, err);
}

/* The peak point of series s, split as /memory reads it: 1, 0 when it has none, or a tp_err. */
int store_series_peak(struct store_reader *r, const char *run, const struct series *s, int64_t row[MEM_POINT_COLS],
		       struct tp_errbuf *err)
{
	struct store_mem_points *c;
	int64_t param, seq;
	uint8_t nul;
	int rc;

	if (s->peak_seq < 0)
		return 0;
	if ((rc = param_bytes_of(r, run, s->source, &param, err)) ||
	    (rc = store_mem_points_open(r, s->run_id, s->rank, s->artifact, s->device, s->peak_seq, &c, err)))
		return rc;
	if ((rc = store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, err)) == 1)
		mem_split_param(row, param);
	store_mem_points_close(c);
	return rc;
}

/*
 * A snapshot's segments at dump time: the rank's snapshot with segments on
 * device (default as store_pick_series: the first GPU), the newest unless artifact
 * names another of them.
 */
int store_memory_segments(struct store_reader *r, const char *run, int rank, const char *device, int64_t artifact,
			  struct store_segments *out, struct tp_errbuf *err)
{
	static const char *const cols[] = { "seg", "address", "total_size", "stream", "segment_type", "offset", "size",
					    "requested_size", "state", "category", "op" };
	struct db_stmt *st = NULL;
	int step;

	memset(out, 0, sizeof(*out));
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	out->rank = rank;
	if (!(st = store_prepare_rank(r, "SELECT device, artifact_id FROM memory_segments"
				   " WHERE artifact_id IN (" RANK_ARTIFACTS ") AND (?3 IS NULL OR device=?3) GROUP BY device, artifact_id"
				   " ORDER BY substr(device, 1, 5) = 'cuda:' DESC, length(device), device, artifact_id DESC",
				run, rank, err)))
		return TP_ERR_DB;
	store_bind_text(st, 3, device);
	while ((step = db_step(st)) == DB_ROW) {
		const char *d = (const char *)db_column_text(st, 0);
		int64_t id = db_column_int64(st, 1), *v;
		if (out->device[0] && strcmp(out->device, d))
			break;
		snprintf(out->device, sizeof(out->device), "%s", d);
		if (!out->artifact || id == artifact)
			out->artifact = id;
		if (!(v = tp_realloc(out->snapshots, (out->nsnapshots + 1) * sizeof(*v)))) {
			db_finalize(st);
			store_segments_free(out);
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		out->snapshots = v;
		v[out->nsnapshots++] = id;
	}
	db_finalize(st);
	if (step != DB_ROW && step != DB_DONE) {
		store_segments_free(out);
		return store_db_fail(err, r->db, "read segments");
	}
	if (!out->device[0] || (artifact && out->artifact != artifact)) {
		int found = out->device[0] != 0;
		char dev[sizeof(out->device)];
		memcpy(dev, out->device, sizeof(dev));
		store_segments_free(out);
		if (artifact && found)
			return tp_fail(err, TP_ERR_NOTFOUND, "no_segments", "artifact %lld of run '%s' is not a snapshot with"
				       " segments for rank %d on %s", (long long)artifact, run, rank, dev);
		return tp_fail(err, TP_ERR_NOTFOUND, "no_segments", "run '%s' has no memory snapshot with segments for"
			       " rank %d%s%s", run, rank, device ? " on " : "", device ? device : "");
	}
	/* segments and their blocks in one pass: the join keeps a segment without blocks */
	if (!(st = store_prepare(r, "SELECT s.n, s.address, s.total_size, s.stream, s.segment_type, b.offset, b.size,"
			      " b.requested_size, b.state, b.category, b.op FROM memory_segments s LEFT JOIN memory_blocks b"
			      " ON b.artifact_id=s.artifact_id AND b.device=s.device AND b.seg=s.n"
			      " WHERE s.artifact_id=?1 AND s.device=?2 ORDER BY s.n, b.n", err))) {
		store_segments_free(out);
		return TP_ERR_DB;
	}
	db_bind_int64(st, 1, out->artifact);
	store_bind_text(st, 2, out->device);
	if (store_rows_read(r, st, cols, 11, &out->rows, err)) {
		store_segments_free(out);
		return err->rc ? err->rc : TP_ERR_DB;
	}
	return TP_OK;
}

void store_segments_free(struct store_segments *s)
{
	tp_free(s->snapshots);
	store_rows_free(&s->rows);
	memset(s, 0, sizeof(*s));
}

/* A rank's step durations, in time order. */
static int cmp_end(const void *a, const void *b)
{
	const struct rl_step *x = *(struct rl_step *const *)a, *y = *(struct rl_step *const *)b;
	return x->host_end_ns < y->host_end_ns ? -1 : x->host_end_ns > y->host_end_ns;
}

/* Each step's allocated memory at its host end (the ProfilerStep#N span's: the host allocates,
 * ahead of the GPU work that ends dur_ns): the last point of series s at or before it. */
static int step_allocs(struct store_reader *r, const struct series *s, struct rl_step *v, size_t n,
		       struct tp_errbuf *err)
{
	struct rl_step **by_end = tp_malloc((n + 1) * sizeof(*by_end));
	struct store_mem_points *c = NULL;
	int64_t row[MEM_POINT_COLS], seq, last = -1;
	uint8_t nul;
	size_t k = 0, i;
	int rc;

	if (!by_end)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	for (i = 0; i < n; i++)
		by_end[i] = &v[i];
	qsort(by_end, n, sizeof(*by_end), cmp_end);
	if (!(rc = store_mem_points_open(r, s->run_id, s->rank, s->artifact, s->device, -1, &c, err)))
		while ((rc = store_mem_points_next(c, 1u | 1u << MEM_COL_ALLOCATED, row, &nul, &seq, err)) == 1) {
			for (; k < n && by_end[k]->host_end_ns < row[0]; k++)
				by_end[k]->alloc = last;
			last = row[MEM_COL_ALLOCATED];
		}
	for (; k < n; k++)
		by_end[k]->alloc = last;
	store_mem_points_close(c);
	tp_free(by_end);
	return rc;
}

int store_timeline(struct store_reader *r, const char *run, int rank, struct rl_step **out, size_t *n,
		   int *rank_out, char device[16], struct tp_errbuf *err)
{
	struct tp_errbuf none = { 0 };
	struct series ser;
	struct db_stmt *st;
	size_t cap = 0;
	int step, c;

	*out = NULL;
	*n = 0;
	if (device)
		device[0] = 0;
	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	*rank_out = rank;
	st = store_prepare_rank(r, "SELECT step, start_ns, dur_ns, " STEP_COMPS ","
			     " source_artifact, COALESCE(cpu_end_ns, start_ns + dur_ns) FROM steps"
			     " WHERE " RANK_ROWS " ORDER BY start_ns, dur_ns, step", run, rank, err);
	if (!st)
		return TP_ERR_DB;
	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			struct rl_step *nv = tp_realloc(*out, (cap = cap ? cap * 2 : 256) * sizeof(*nv));
			if (!nv)
				break;
			*out = nv;
		}
		struct rl_step *s = &(*out)[(*n)++];
		s->step = db_column_int64(st, 0);
		s->start_ns = db_column_int64(st, 1);
		s->dur_ns = db_column_int64(st, 2);
		for (c = 0; c < AN_NCOMP; c++)
			s->comp_ns[c] = db_column_int64(st, 3 + c);
		s->artifact = db_column_int64(st, 3 + AN_NCOMP);
		s->host_end_ns = db_column_int64(st, 4 + AN_NCOMP);
		s->alloc = -1;
		s->cycle = 0;
	}
	db_finalize(st);
	if (step != DB_DONE) {
		tp_free(*out);
		*out = NULL;
		*n = 0;
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read steps");
	}
	/* memory as /memory answers it by default */
	if (!device)
		return TP_OK;
	if (store_pick_series(r, run, rank, NULL, &ser, &none))
		return none.rc == TP_ERR_NOTFOUND ? TP_OK : (*err = none, none.rc);
	snprintf(device, 16, "%s", ser.device);
	return *n ? step_allocs(r, &ser, *out, *n, err) : TP_OK;
}
