/*
 * insert.c: the derived rows an upload's results are stored as: a trace's
 * steps, collectives, operators and kernels (its rank's, keyed by (run,
 * rank)); the memory series with their point blocks, groups and a
 * snapshot's segments; and each format's own rows through the store function
 * its row of pipeline/formats.c names (store_fmt_fn, in store/fmt_*.c).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

/*
 * n points of (key, device) from first_seq as one row of memory_point_blocks (ins), unless
 * old (SELECT n, data of that row; NULL: none looked at) finds the row holds them already.
 * rank < 0: key is an artifact; else the row is rank_memory_point_blocks' of (run key, rank):
 * ins binds rank at ?6, old at ?4.
 */
int store_put_point_block(struct db *db, struct db_stmt *ins, struct db_stmt *old, int64_t key, int rank,
			   const char *device, int64_t first_seq, const int64_t (*rows)[MEM_POINT_COLS],
			   const uint8_t *nul, size_t n, uint8_t *buf, struct store_blocks *count, struct tp_errbuf *err)
{
	size_t len = ptpack_encode(buf, rows, nul, n);
	int r, same = 0;

	if (old) {
		db_bind_int64(old, 1, key);
		db_bind_text(old, 2, device, -1, DB_STATIC);
		db_bind_int64(old, 3, first_seq);
		if (rank >= 0)
			db_bind_int(old, 4, rank);
		if ((r = db_step(old)) == DB_ROW)
			same = db_column_int64(old, 0) == (int64_t)n && db_column_bytes(old, 1) == (int)len &&
			       !memcmp(db_column_blob(old, 1), buf, len);
		db_reset(old);
		if (r != DB_ROW && r != DB_DONE)
			return store_db_fail(err, db, "read memory");
		if (count)
			count->kept += same, count->written += !same;
		if (same)
			return TP_OK;
	}
	db_bind_int64(ins, 1, key);
	db_bind_text(ins, 2, device, -1, DB_STATIC);
	db_bind_int64(ins, 3, first_seq);
	db_bind_int64(ins, 4, (int64_t)n);
	db_bind_blob(ins, 5, buf, (int)len, DB_STATIC);
	if (rank >= 0)
		db_bind_int(ins, 6, rank);
	r = db_step(ins);
	db_reset(ins);
	return r == DB_DONE ? TP_OK : store_db_fail(err, db, "insert memory");
}

/* The blocks of the rank's trace series on device from point n on (device NULL: of every device no series has). */
int store_drop_points_after(struct db *db, int64_t run_id, int rank, const char *device, int64_t n,
			    struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc = TP_OK;

	if (db_prepare(db, device ? "DELETE FROM rank_memory_point_blocks WHERE run_id=?1 AND rank=?2 AND device=?3"
				    " AND first_seq >= ?4"
				  : "DELETE FROM rank_memory_point_blocks WHERE run_id=?1 AND rank=?2 AND device NOT IN"
				    " (SELECT device FROM rank_memory_series WHERE run_id=?1 AND rank=?2)", 0, &st) != DB_OK)
		return store_db_fail(err, db, "prepare");
	db_bind_int64(st, 1, run_id);
	db_bind_int(st, 2, rank);
	if (device) {
		db_bind_text(st, 3, device, -1, DB_STATIC);
		db_bind_int64(st, 4, n);
	}
	if (db_step(st) != DB_DONE)
		rc = store_db_fail(err, db, "delete memory");
	db_finalize(st);
	return rc;
}

/*
 * Where a trace's analysis rows go: the rank's (run_id, f->rank; migration 020). artifact is
 * what a step whose span f->step_src does not name came from (the artifact stored, or the
 * rank's first trace), and the key of the rows of a report (key_averages).
 */
struct rank_key {
	int64_t run_id, artifact;
};

/* Run one prepared statement per row: bind(st, i) binds row i. */
static int insert_rows(struct store_writer *w, const char *sql, size_t n,
		       void (*bind)(struct db_stmt *, const struct store_final *, const struct rank_key *, size_t),
		       const struct store_final *f, const struct rank_key *k, struct tp_errbuf *err)
{
	struct db_stmt *st;
	size_t i;
	int rc = TP_OK;

	if (!n)
		return TP_OK;
	if (db_prepare(w->db, sql, 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	if (db_batch_begin(w->db))
		rc = store_db_fail(err, w->db, "insert analysis");
	for (i = 0; i < n && !rc; i++) {
		bind(st, f, k, i);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "insert analysis");
		db_reset(st);
	}
	if (db_batch_end(w->db) && !rc)
		rc = store_db_fail(err, w->db, "insert analysis");
	db_finalize(st);
	return rc;
}

static void bind_step(struct db_stmt *st, const struct store_final *f, const struct rank_key *k, size_t i)
{
	const struct an_step *s = &f->analysis->steps[i];
	int c;

	db_bind_int64(st, 1, k->run_id);
	db_bind_int64(st, 2, s->step);
	db_bind_int64(st, 3, tp_sat_add(s->start_ns, f->base_ns));
	db_bind_int64(st, 4, s->dur_ns);
	for (c = 0; c < AN_NCOMP; c++)
		db_bind_int64(st, 5 + c, s->comp_ns[c]);
	db_bind_int64(st, 5 + AN_NCOMP, s->cpu_dur_ns);
	db_bind_int64(st, 6 + AN_NCOMP, s->comm_overlap_ns);
	db_bind_int(st, 7 + AN_NCOMP, s->incomplete);
	db_bind_int(st, 8 + AN_NCOMP, s->whole_trace);
	db_bind_int64(st, 9 + AN_NCOMP, s->gpu_busy_ns);
	db_bind_int64(st, 10 + AN_NCOMP, f->step_src && f->step_src[i] ? f->step_src[i] : k->artifact);
	db_bind_int64(st, 11 + AN_NCOMP, tp_sat_add(s->cpu_end_ns, f->base_ns));
	db_bind_int64(st, 12 + AN_NCOMP, s->sync_calls);
	db_bind_int64(st, 13 + AN_NCOMP, s->sync_ns);
	db_bind_int(st, 14 + AN_NCOMP, f->rank);
}

static void bind_op(struct db_stmt *st, const struct store_final *f, const struct rank_key *k, size_t i)
{
	const struct an_op *o = &f->analysis->ops[i];

	db_bind_int64(st, 1, k->run_id);
	db_bind_int(st, 2, o->device);
	db_bind_text(st, 3, f->str(f->str_payload, o->name), -1, DB_STATIC);
	db_bind_int64(st, 4, o->calls);
	db_bind_int64(st, 5, o->self_ns);
	db_bind_int64(st, 6, o->total_ns);
	db_bind_int(st, 7, f->rank);
}

static void bind_inside(struct db_stmt *st, const struct store_final *f, const struct rank_key *k, size_t i)
{
	const struct an_inside *v = &f->analysis->inside[i];

	db_bind_int64(st, 1, k->run_id);
	db_bind_int(st, 2, f->rank);
	db_bind_int(st, 3, v->gpu);
	db_bind_int(st, 4, v->kind);
	db_bind_text(st, 5, f->str(f->str_payload, v->name), -1, DB_STATIC);
	db_bind_int64(st, 6, v->calls);
	db_bind_int64(st, 7, v->ns);
}

static void bind_kernel(struct db_stmt *st, const struct store_final *f, const struct rank_key *rk, size_t i)
{
	const struct an_kernel *k = &f->analysis->kernels[i];

	db_bind_int64(st, 1, rk->run_id);
	db_bind_int(st, 2, k->kind);
	db_bind_text(st, 3, f->str(f->str_payload, k->name), -1, DB_STATIC);
	db_bind_int64(st, 4, k->calls);
	db_bind_int64(st, 5, k->total_ns);
	db_bind_int64(st, 6, k->min_ns);
	db_bind_int64(st, 7, k->max_ns);
	db_bind_int64(st, 8, k->tiny_calls);
	db_bind_int64(st, 9, k->tiny_ns);
	db_bind_int64(st, 10, k->bps_ns);
	db_bind_double(st, 11, k->bps_sum);
	db_bind_int64(st, 12, k->occ_ns);
	db_bind_double(st, 13, k->occ_sum);
	db_bind_int(st, 14, f->rank);
}

static void bind_coll(struct db_stmt *st, const struct store_final *f, const struct rank_key *k, size_t i,
		      const struct an_coll *c)
{
	db_bind_int64(st, 1, k->run_id);
	db_bind_int64(st, 2, (int64_t)i);
	if (c->step >= 0)
		db_bind_int64(st, 3, c->step);
	else
		db_bind_null(st, 3);
	db_bind_text(st, 4, an_ckind_names[c->kind], -1, DB_STATIC);
	db_bind_text(st, 5, c->pg ? f->str(f->str_payload, c->pg) : "", -1, DB_STATIC);
	if (c->seq >= 0)
		db_bind_int64(st, 6, c->seq);
	else
		db_bind_null(st, 6);
	db_bind_int64(st, 7, tp_sat_add(c->launch_ns, f->base_ns));
	db_bind_int64(st, 8, tp_sat_add(c->start_ns, f->base_ns));
	db_bind_int64(st, 9, tp_sat_add(c->end_ns, f->base_ns));
	db_bind_int64(st, 10, c->time_ns);
	db_bind_int64(st, 11, c->kernels);
	if (c->bytes >= 0)
		db_bind_int64(st, 12, c->bytes);
	else
		db_bind_null(st, 12);
	if (c->group_size > 0)
		db_bind_int64(st, 13, c->group_size);
	else
		db_bind_null(st, 13);
	if (c->before_op)
		db_bind_text(st, 14, f->str(f->str_payload, c->before_op), -1, DB_STATIC);
	else
		db_bind_null(st, 14);
	db_bind_int64(st, 15, c->before_ns);
	db_bind_int(st, 16, f->rank);
}

/*
 * f's collectives, read back from the analysis' runs as they are inserted (they are not held),
 * from the from-th on (store_rank_replace's: those before are stored already).
 */
static int insert_colls(struct store_writer *w, const struct rank_key *k, const struct store_final *f, size_t from,
			struct tp_errbuf *err)
{
	const struct an_coll *c;
	struct db_stmt *st;
	struct rcur cur;
	size_t i = 0;
	int rc = TP_OK;

	if (f->analysis->ncolls <= from)
		return TP_OK;
	if (db_prepare(w->db, "INSERT INTO collectives(run_id, n, step, kind, pg, seq, launch_ns, start_ns,"
			      " end_ns, time_ns, kernels, bytes, group_size, before_op, before_ns, rank)"
			      " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	if (an_colls_open(f->analysis, &cur))
		rc = cur.err ? TP_ERR_IO : tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	else if (db_batch_begin(w->db))
		rc = store_db_fail(err, w->db, "insert analysis");
	while (!rc && (c = rcur_next(&cur))) {
		if (i < from) {
			i++;
			continue;
		}
		bind_coll(st, f, k, i++, c);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "insert analysis");
		db_reset(st);
	}
	if (!rc && cur.err)
		rc = TP_ERR_IO;
	if (rc == TP_ERR_IO && !err->rc)
		tp_fail(err, rc, "temp_file", "collectives: cannot read their temporary file: %s", strerror(cur.err));
	if (db_batch_end(w->db) && !rc)
		rc = store_db_fail(err, w->db, "insert analysis");
	db_finalize(st);
	rcur_close(&cur);
	return rc;
}

static int insert_segments(struct store_writer *w, int64_t artifact, const struct mem_series *ms,
			   struct tp_errbuf *err);

struct point_ins {
	struct store_writer *w;
	int64_t key, base_ns;		/* key: the artifact, or (rank >= 0) the run's id; base_ns: added to the */
	int rank;			/* times of a source other than "pytorch" */
	const struct mem_series *ms;
	struct db_stmt *pt, *old;	/* old: the stored block looked at first (NULL: none) */
	struct store_blocks *count;
	struct tp_errbuf *err;
	struct mem_prefix pre;		/* of the points so far (pre.n: the next one's seq) */
	int64_t (*rows)[MEM_POINT_COLS];	/* the block being filled: PT_BLOCK rows */
	uint8_t *nul;
	uint8_t *buf;			/* ptpack_bound(PT_BLOCK) */
	size_t n;
};

/* The points gathered so far as one row of memory_point_blocks. */
static int flush_points(struct point_ins *x)
{
	size_t n = x->n;

	if (!n)
		return TP_OK;
	x->n = 0;
	return store_put_point_block(x->w->db, x->pt, x->old, x->key, x->rank, x->ms->device, x->pre.n - (int64_t)n,
			       (const int64_t (*)[MEM_POINT_COLS])x->rows, x->nul, n, x->buf, x->count, x->err);
}

static int insert_point(void *arg, const struct mem_point *p)
{
	struct point_ins *x = arg;
	int64_t *row = x->rows[x->n];

	row[0] = tp_sat_add(p->t_ns, x->base_ns);
	for (int c = 0; c < MEM_NCAT; c++)
		row[1 + c] = p->cat[c];
	row[MEM_COL_ALLOCATED] = mem_prefix_add(&x->pre, p);
	row[MEM_COL_RESERVED] = p->reserved >= 0 ? p->reserved : 0;
	x->nul[x->n++] = p->reserved < 0;
	return x->n == PT_BLOCK ? flush_points(x) : TP_OK;
}

/*
 * A series' points, groups and row, under key: an artifact (rank < 0), or the rank (run_id key,
 * rank) for a trace's series (migration 024). With old (store_rank_replace's), the points go over
 * the blocks stored under the rank: a block that holds them already stays, the ones past the last
 * point go (not in a batch: each block is looked at first). The blocks before ms->same stay
 * unread, when this server alone writes (another may have written them since).
 */
static int insert_series(struct store_writer *w, int64_t key, int rank, const struct store_final *f,
			 const struct mem_series *ms, struct db_stmt *pt, struct db_stmt *old, struct store_blocks *count,
			 struct db_stmt *se, struct db_stmt *gr, struct tp_errbuf *err)
{
	size_t same = old && !w->store->shared ? ms->same : 0;
	struct point_ins x = { .w = w, .key = key, .rank = rank, .ms = ms, .pt = pt, .old = old, .count = count, .err = err,
			       .pre = same ? ms->pre : MEM_PREFIX_INIT,
			       .base_ns = strcmp(ms->source, "pytorch") ? f->base_ns : 0 };
	int64_t peak;
	int rc = !old && db_batch_begin(w->db) ? store_db_fail(err, w->db, "insert memory") : TP_OK;
	size_t i;

	if (count)
		count->unread += (int64_t)(same / PT_BLOCK);

	x.rows = tp_malloc(PT_BLOCK * sizeof(*x.rows));
	x.nul = tp_malloc(PT_BLOCK);
	x.buf = tp_malloc(ptpack_bound(PT_BLOCK));
	if (!rc && (!x.rows || !x.nul || !x.buf))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (!rc && (rc = mem_series_each_from(ms, same, insert_point, &x)) && !err->rc)	/* a replay's own failure */
		rc = rc == TP_ERR_IO	       ? tp_fail(err, rc, "temp_file", "memory series: cannot read its temporary file")
		     : rc == TP_ERR_UNSUPPORTED ? tp_fail(err, rc, NULL, "memory series: cannot go on from its mark")
						: tp_fail(err, rc, NULL, "memory series: out of memory");
	if (!rc)
		rc = flush_points(&x);
	tp_free(x.rows);
	tp_free(x.nul);
	tp_free(x.buf);
	if (!rc && old)
		rc = store_drop_points_after(w->db, key, rank, ms->device, x.pre.n, err);
	if (!rc && old && db_batch_begin(w->db))
		rc = store_db_fail(err, w->db, "insert memory");
	peak = x.pre.best_at;
	for (i = 0; i < ms->ngroups && !rc; i++) {
		const struct mem_group *g = &ms->groups[i];
		db_bind_int64(gr, 1, key);
		db_bind_text(gr, 2, ms->device, -1, DB_STATIC);
		if (rank >= 0)
			db_bind_int(gr, 8, rank);
		db_bind_int64(gr, 3, (int64_t)i);
		db_bind_text(gr, 4, mem_cat_names[g->cat & 7], -1, DB_STATIC);
		store_bind_text(gr, 5, g->op);
		db_bind_int64(gr, 6, g->bytes);
		if (g->count >= 0)
			db_bind_int64(gr, 7, g->count);
		else
			db_bind_null(gr, 7);
		rc = store_step_reset(w->db, gr, err);
	}
	if (db_batch_end(w->db) && !rc)
		rc = store_db_fail(err, w->db, "insert memory");
	if (!rc && ms->nsegs && rank < 0)
		rc = insert_segments(w, key, ms, err);
	if (rc)
		return rc;
	db_bind_int64(se, 1, key);
	store_bind_text(se, 2, ms->device);
	if (rank < 0)
		store_bind_text(se, 3, ms->source);
	else
		db_bind_int(se, 3, rank);	/* the rank's series are the trace's */
	db_bind_int64(se, 4, (int64_t)ms->n);
	store_bind_opt(se, 5, peak);
	db_bind_int64(se, 6, ms->baseline);
	if (x.pre.n)
		db_bind_int64(se, 7, tp_sat_add(x.pre.first_t, x.base_ns));
	else
		db_bind_null(se, 7);
	if (peak >= 0)
		db_bind_int64(se, 8, x.pre.best);
	else
		db_bind_null(se, 8);
	store_bind_opt(se, 9, x.pre.max_reserved);
	return store_step_reset(w->db, se, err);
}

/* A snapshot's segments and their blocks at dump time. */
static int insert_segments(struct store_writer *w, int64_t artifact, const struct mem_series *ms,
			   struct tp_errbuf *err)
{
	struct db_stmt *sg = NULL, *bl = NULL;
	int rc = TP_OK;

	if (db_prepare(w->db, "INSERT INTO memory_segments(artifact_id, device, n, address, total_size, stream,"
				      " segment_type) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", 0, &sg) != DB_OK ||
	    db_prepare(w->db, "INSERT INTO memory_blocks(artifact_id, device, seg, n, offset, size, requested_size,"
				      " state, category, op) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)", 0, &bl) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	for (size_t i = 0; i < ms->nsegs && !rc; i++) {
		const struct mem_segment *x = &ms->segs[i];
		db_bind_int64(sg, 1, artifact);
		store_bind_text(sg, 2, ms->device);
		db_bind_int64(sg, 3, (int64_t)i);
		db_bind_int64(sg, 4, x->address);
		db_bind_int64(sg, 5, x->total_size);
		db_bind_int64(sg, 6, x->stream);
		store_bind_text(sg, 7, x->type[0] ? x->type : NULL);
		rc = store_step_reset(w->db, sg, err);
		for (size_t k = 0; k < x->nblocks && !rc; k++) {
			const struct mem_block *b = &x->blocks[k];
			db_bind_int64(bl, 1, artifact);
			store_bind_text(bl, 2, ms->device);
			db_bind_int64(bl, 3, (int64_t)i);
			db_bind_int64(bl, 4, (int64_t)k);
			db_bind_int64(bl, 5, b->offset);
			db_bind_int64(bl, 6, b->size);
			db_bind_int64(bl, 7, b->requested);
			store_bind_text(bl, 8, mem_block_states[b->state & 3]);
			store_bind_text(bl, 9, b->cat >= 0 ? mem_cat_names[b->cat & 7] : NULL);
			store_bind_text(bl, 10, b->op);
			rc = store_step_reset(w->db, bl, err);
		}
	}
	db_finalize(sg);
	db_finalize(bl);
	return rc;
}

/*
 * f's memory series: a trace's (f->analysis) under its rank (run_id, f->rank), the others under
 * artifact. keep (counting there): the rank's blocks are gone over, not new (insert_series).
 */
static int insert_memory(struct store_writer *w, int64_t artifact, int64_t run_id, const struct store_final *f,
			 struct store_blocks *keep, struct tp_errbuf *err)
{
	struct db_stmt *pt = NULL, *old = NULL, *se = NULL, *gr = NULL;
	int rank = f->analysis ? f->rank : -1, rc = TP_OK;
	size_t i;

	if (rank < 0 && (db_prepare(w->db, "INSERT INTO memory_point_blocks(artifact_id, device, first_seq, n, data)"
					   " VALUES(?1, ?2, ?3, ?4, ?5)", 0, &pt) != DB_OK ||
			 db_prepare(w->db, "INSERT INTO memory_series(artifact_id, device, source, points, peak_seq,"
					   " baseline, first_t_ns, peak_allocated, max_reserved)"
					   " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(artifact_id, device) DO UPDATE"
					   " SET source=excluded.source, points=excluded.points, peak_seq=excluded.peak_seq,"
					   " baseline=excluded.baseline, first_t_ns=excluded.first_t_ns,"
					   " peak_allocated=excluded.peak_allocated, max_reserved=excluded.max_reserved",
				    0, &se) != DB_OK ||
			 db_prepare(w->db, "INSERT INTO memory_groups(artifact_id, device, n, category, op, bytes, count)"
					   " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", 0, &gr) != DB_OK))
		rc = store_db_fail(err, w->db, "prepare");
	else if (rank >= 0 &&
		 (db_prepare(w->db, keep ? "INSERT INTO rank_memory_point_blocks(run_id, device, first_seq, n, data, rank)"
					   " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(run_id, rank, device, first_seq)"
					   " DO UPDATE SET n=excluded.n, data=excluded.data"
					 : "INSERT INTO rank_memory_point_blocks(run_id, device, first_seq, n, data, rank)"
					   " VALUES(?1, ?2, ?3, ?4, ?5, ?6)", 0, &pt) != DB_OK ||
		  (keep && db_prepare(w->db, "SELECT n, data FROM rank_memory_point_blocks WHERE run_id=?1 AND device=?2"
					     " AND first_seq=?3 AND rank=?4", 0, &old) != DB_OK) ||
		  db_prepare(w->db, "INSERT INTO rank_memory_series(run_id, device, rank, points, peak_seq,"
				    " baseline, first_t_ns, peak_allocated, max_reserved)"
				    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(run_id, rank, device) DO UPDATE"
				    " SET points=excluded.points, peak_seq=excluded.peak_seq,"
				    " baseline=excluded.baseline, first_t_ns=excluded.first_t_ns,"
				    " peak_allocated=excluded.peak_allocated, max_reserved=excluded.max_reserved",
			     0, &se) != DB_OK ||
		  db_prepare(w->db, "INSERT INTO rank_memory_groups(run_id, device, n, category, op, bytes, count, rank)"
				    " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", 0, &gr) != DB_OK))
		rc = store_db_fail(err, w->db, "prepare");
	for (i = 0; i < f->nmem && !rc; i++)
		rc = insert_series(w, rank < 0 ? artifact : run_id, rank, f, &f->mem[i], pt, old, keep, se, gr, err);
	db_finalize(pt);
	db_finalize(old);
	db_finalize(se);
	db_finalize(gr);
	return rc;
}

int store_insert_analysis(struct store_writer *w, int64_t artifact, int64_t run_id, const struct store_final *f,
			   struct store_blocks *keep, size_t same_colls, struct tp_errbuf *err)
{
	const struct an_result *a = f->analysis;
	const struct rank_key k = { .run_id = run_id, .artifact = artifact };
	int rc;

	/* the format's own rows (pipeline/formats.c's table names its store function) */
	if (f->store && (rc = f->store(w, artifact, f, err)))
		return rc;
	if (f->nmem && (rc = insert_memory(w, artifact, run_id, f, keep, err)))
		return rc;
	if (!a)
		return TP_OK;
	if ((rc = insert_rows(w, "INSERT OR IGNORE INTO steps(run_id, step, start_ns, dur_ns, " STEP_COMPS ","
				 " cpu_dur_ns, comm_overlap_ns, incomplete, whole_trace, gpu_busy_ns, source_artifact,"
				 " cpu_end_ns, sync_calls, sync_ns, rank) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
				 " ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
			      a->nsteps, bind_step, f, &k, err)))
		return rc;
	if ((rc = insert_colls(w, &k, f, same_colls, err)))
		return rc;
	if ((rc = insert_rows(w, "INSERT INTO inside_steps(run_id, rank, gpu, kind, name, calls, ns)"
				 " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", a->ninside, bind_inside, f, &k, err)))
		return rc;
	if ((rc = insert_rows(w, "INSERT INTO op_stats(run_id, device, name, calls, self_ns, total_ns, rank)"
				 " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)", a->nops, bind_op, f, &k, err)))
		return rc;
	return insert_rows(w, "INSERT INTO kernel_stats(run_id, kind, name, calls, total_ns, min_ns,"
			      " max_ns, tiny_calls, tiny_ns, bps_ns, bps_sum, occ_ns, occ_sum, rank)"
			      " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
			   a->nkernels, bind_kernel, f, &k, err);
}
