/*
 * trace.c: a trace's stored events. An artifact's events in file order
 * (store_events_each), its raw bytes chunk by chunk, and a window of a rank's
 * events block by block (store_trace_*).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

#define TRACE_SLICE 512	/* events given at most per store_trace_next or store_events_each call: 140 KiB */

/* id -> string of one artifact, for resolving string pid/tid */
struct strmap {
	char **s;
	uint32_t n;
};

static void strmap_free(struct strmap *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		tp_free(m->s[i]);
	tp_free(m->s);
	m->s = NULL;
	m->n = 0;
}

static int strmap_load(struct store_reader *r, int64_t artifact, struct strmap *m, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT key & 4294967295, s FROM strings WHERE key BETWEEN ?1 AND ?2"
				      " ORDER BY key", err);
	int rc = TP_OK;

	memset(m, 0, sizeof(*m));
	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, artifact << 32);
	db_bind_int64(st, 2, artifact << 32 | 0xffffffffLL);
	while (db_step(st) == DB_ROW) {
		uint32_t id = (uint32_t)db_column_int64(st, 0);
		if (id >= m->n) {
			uint32_t n = id + 1 > m->n * 2 ? id + 1 : m->n * 2;
			char **ns = tp_realloc(m->s, n * sizeof(*ns));
			if (!ns) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
			memset(ns + m->n, 0, (n - m->n) * sizeof(*ns));
			m->s = ns;
			m->n = n;
		}
		tp_free(m->s[id]);
		if (!(m->s[id] = tp_strdup((const char *)db_column_text(st, 1)))) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			break;
		}
	}
	db_finalize(st);
	return rc;
}

static const char *strmap_get(const struct strmap *m, uint32_t id)
{
	return id < m->n && m->s[id] ? m->s[id] : "";
}

int store_events_each(struct store_reader *r, int64_t artifact, int kind, store_events_fn fn, void *payload,
		      struct tp_errbuf *err)
{
	struct strmap strs;
	struct tp_event *ev;
	struct db_stmt *st;
	int rc;

	if ((rc = strmap_load(r, artifact, &strs, err)))
		return rc;
	ev = tp_malloc(TRACE_SLICE * sizeof(*ev));
	st = ev ? store_prepare(r, "SELECT n, data FROM event_blocks WHERE key BETWEEN ?1 AND ?2 AND kind=?3"
				" ORDER BY key", err) : NULL;
	if (!st) {
		rc = ev ? TP_ERR_DB : tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		tp_free(ev);
		strmap_free(&strs);
		return rc;
	}
	db_bind_int64(st, 1, artifact << 32);
	db_bind_int64(st, 2, artifact << 32 | 0xffffffffLL);
	db_bind_int(st, 3, kind);
	while (rc == TP_OK && db_step(st) == DB_ROW) {
		struct evpack_dec d;
		long m;

		evpack_dec_init(&d, db_column_blob(st, 1), (size_t)db_column_bytes(st, 1),
				(size_t)db_column_int64(st, 0));
		while (rc == TP_OK && (m = evpack_dec_next(&d, ev, TRACE_SLICE)) != 0) {
			if (m < 0) {
				rc = tp_fail(err, TP_ERR_DB, "database_error", "event block of artifact %lld is corrupt",
					     (long long)artifact);
				break;
			}
			for (long i = 0; i < m; i++) {
				if (ev[i].pid_sid)
					ev[i].pid_s = strmap_get(&strs, ev[i].pid_sid);
				if (ev[i].tid_sid)
					ev[i].tid_s = strmap_get(&strs, ev[i].tid_sid);
			}
			rc = fn(payload, ev, (size_t)m);
		}
	}
	db_finalize(st);
	tp_free(ev);
	strmap_free(&strs);
	return rc;
}

int store_raw_info(struct store_reader *r, const char *run, int64_t id, struct store_raw_info *out,
		   struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT a.raw_encoding, a.name, a.bytes,"
				      " (SELECT COUNT(*) FROM raw_chunks WHERE key BETWEEN a.id<<32 AND (a.id<<32)|4294967295)"
				      " FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.id=?2 AND a.status!='ingesting'", err);
	int rc = TP_OK;

	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	db_bind_int64(st, 2, id);
	if (db_step(st) == DB_ROW) {
		snprintf(out->encoding, sizeof(out->encoding), "%s", db_column_text(st, 0));
		snprintf(out->name, sizeof(out->name), "%s", db_column_text(st, 1));
		out->bytes = (uint64_t)db_column_int64(st, 2);
		out->nchunks = (uint32_t)db_column_int64(st, 3);
	} else {
		rc = tp_fail(err, TP_ERR_NOTFOUND, "artifact_not_found", "run '%s' has no artifact %lld",
			     run, (long long)id);
	}
	db_finalize(st);
	return rc;
}

int store_raw_chunk(struct store_reader *r, int64_t id, uint32_t seq, const void **data, size_t *len,
		    struct tp_errbuf *err)
{
	if (!r->raw && !(r->raw = store_prepare(r, "SELECT data FROM raw_chunks WHERE key=?1", err)))
		return TP_ERR_DB;
	db_reset(r->raw);
	db_bind_int64(r->raw, 1, (id << 32) | seq);
	if (db_step(r->raw) != DB_ROW)
		return tp_fail(err, TP_ERR_NOTFOUND, "raw_missing", "raw chunk %u of artifact %lld is missing",
			       seq, (long long)id);
	*data = db_column_blob(r->raw, 0);
	*len = (size_t)db_column_bytes(r->raw, 0);
	return TP_OK;
}

/* ---- a window of a rank's trace events, block by block ---- */


struct store_trace {
	struct store_reader *r;
	int64_t *ids, *bases;		/* the rank's ready trace artifacts */
	size_t nart, cur, lim;		/* read [cur, lim) */
	int starts;			/* only blocks with an event that starts in the window (store_trace_starts) */
	int64_t strs_of;		/* the artifact whose strings strs holds (0: none loaded) */
	char *run;
	int64_t start, end;		/* absolute ns */
	struct db_stmt *blocks;		/* of artifact ids[cur - 1]: one of prep, being read (NULL: none) */
	struct db_stmt *prep[2];	/* the blocks' query, prepared once a cursor (by starts), and bounds' */
	struct db_stmt *bounds;
	struct strmap strs;
	/*
	 * The block being given (borrowed from blocks' row), TRACE_SLICE events at a time into ev:
	 * a block's 8,192 events decoded at once took 2.2 MiB, written then read back, its pages
	 * faulted in again at every cursor; in slices the replay of 20 chunks decodes in half the
	 * time (bench/results/derive_slices-20261130.txt)
	 */
	struct evpack_dec dec;
	struct tp_event *ev;
	store_trace_keep_fn keep;	/* store_trace_prefilter's */
	void *keep_payload;
	struct evpack_time *ts;		/* a block's times, for keep */
	size_t ts_cap;
};

void store_trace_close(struct store_trace *t)
{
	if (!t)
		return;
	db_finalize(t->prep[0]);
	db_finalize(t->prep[1]);
	db_finalize(t->bounds);
	strmap_free(&t->strs);
	tp_free(t->ids);
	tp_free(t->bases);
	tp_free(t->ev);
	tp_free(t->ts);
	tp_free(t->run);
	tp_free(t);
}

int store_trace_open(struct store_reader *r, const char *run, int rank, int64_t start_ns, int64_t end_ns,
		     struct store_trace **out, int *rank_out, struct tp_errbuf *err)
{
	struct store_trace *t;
	struct db_stmt *st;
	int step;

	if ((rank = store_rank_of(r, run, rank, err)) < 0)
		return err->rc ? err->rc : TP_ERR_DB;
	if (!(t = tp_calloc(1, sizeof(*t))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	t->r = r;
	t->start = start_ns;
	t->end = end_ns;
	if (!(st = store_prepare_rank(r, "SELECT a.id, a.base_ns FROM artifacts a JOIN runs r ON r.id=a.run_id"
				   " WHERE r.name=?1 AND a.rank=?2 AND a.status='ready' AND a.kind='trace' ORDER BY a.id",
				run, rank, err))) {
		store_trace_close(t);
		return TP_ERR_DB;
	}
	step = store_read_pairs(st, &t->ids, &t->bases, &t->nart);
	db_finalize(st);
	if (step != DB_DONE) {
		store_trace_close(t);
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read artifacts");
	}
	t->lim = t->nart;
	if (!(t->run = tp_strdup(run))) {
		store_trace_close(t);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	*out = t;
	*rank_out = rank;
	return TP_OK;
}

int store_trace_header(struct store_trace *t, char **meta, int64_t *base_ns, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*meta = NULL;
	*base_ns = t->nart ? t->bases[0] : 0;
	if (!t->nart)
		return TP_OK;
	if (!(st = store_prepare(t->r, "SELECT meta FROM artifacts WHERE id=?1", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, t->ids[0]);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) == DB_TEXT &&
	    !(*meta = tp_strdup((const char *)db_column_text(st, 0)))) {
		db_finalize(st);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read artifact");
}

int store_trace_next(struct store_trace *t, struct tp_event **ev, size_t *n, int64_t *base_ns,
		     struct tp_errbuf *err)
{
	for (;;) {
		/* the block being given, a slice at a time */
		if (t->dec.left) {
			long m;
			if (!t->ev && !(t->ev = tp_malloc(TRACE_SLICE * sizeof(*t->ev))))
				return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			if ((m = evpack_dec_next(&t->dec, t->ev, TRACE_SLICE)) < 0)
				return tp_fail(err, TP_ERR_DB, "database_error", "an event block is corrupt");
			for (long i = 0; i < m; i++) {
				if (t->ev[i].pid_sid)
					t->ev[i].pid_s = strmap_get(&t->strs, t->ev[i].pid_sid);
				if (t->ev[i].tid_sid)
					t->ev[i].tid_s = strmap_get(&t->strs, t->ev[i].tid_sid);
			}
			*ev = t->ev;
			*n = (size_t)m;
			*base_ns = t->bases[t->cur - 1];
			return 1;
		}
		if (!t->blocks) {
			int64_t a, base;
			if (t->cur >= t->lim)
				return 0;
			a = t->ids[t->cur];
			base = t->bases[t->cur++];
			/*
			 * blocks that may hold events in the window (written times), and those without times.
			 * max_ts came in a later migration, so SQLite keeps it after the block's data: reading
			 * it walks the data's overflow pages. max_end (>= max_ts) and min_ts, before the data,
			 * rule out the blocks outside the window first (SQLite tests the terms in this order):
			 * without them, a run's 1,015th chunk of 1 MiB read every block of its rank's chunks the
			 * overlap check had no fingerprints of (pipeline/overlap.h), 42 ms a chunk, not 8.
			 */
			if (!t->prep[t->starts] &&
			    !(t->prep[t->starts] = store_prepare(t->r, t->starts
							? "SELECT n, data FROM event_blocks WHERE key BETWEEN ?1 AND ?2"
							  " AND min_ts IS NOT NULL AND min_ts < ?4 AND max_end >= ?3"
							  " AND COALESCE(max_ts, max_end) >= ?3 ORDER BY kind, key"
							: "SELECT n, data FROM event_blocks WHERE key BETWEEN ?1 AND ?2"
							  " AND (min_ts IS NULL OR (max_end >= ?3 AND min_ts < ?4))"
							  " ORDER BY kind, key", err)))
				return TP_ERR_DB;
			t->blocks = t->prep[t->starts];
			db_bind_int64(t->blocks, 1, a << 32);
			db_bind_int64(t->blocks, 2, a << 32 | 0xffffffffLL);
			int64_t lo, hi;
			if (t->start == INT64_MIN || __builtin_sub_overflow(t->start, base, &lo))
				lo = INT64_MIN;
			if (t->end == INT64_MAX || __builtin_sub_overflow(t->end, base, &hi))
				hi = INT64_MAX;
			db_bind_int64(t->blocks, 3, lo);
			db_bind_int64(t->blocks, 4, hi);
		}
		int step = db_step(t->blocks);
		if (step == DB_DONE) {
			db_reset(t->blocks);
			t->blocks = NULL;
			continue;
		}
		if (step != DB_ROW)
			return store_db_fail(err, t->r->db, "read events");
		size_t cnt = (size_t)db_column_int64(t->blocks, 0);
		const uint8_t *data = db_column_blob(t->blocks, 1);
		size_t len = (size_t)db_column_bytes(t->blocks, 1);
		if (cnt > (1u << 24))
			return tp_fail(err, TP_ERR_DB, "database_error", "an event block is corrupt");
		if (t->keep) {
			size_t m;
			int keep;
			if (cnt > t->ts_cap) {
				struct evpack_time *nt = tp_realloc(t->ts, cnt * sizeof(*nt));
				if (!nt)
					return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				t->ts = nt;
				t->ts_cap = cnt;
			}
			if (evpack_times(data, len, cnt, t->ts, &m))
				return tp_fail(err, TP_ERR_DB, "database_error", "an event block is corrupt");
			if ((keep = t->keep(t->keep_payload, t->ts, m, t->bases[t->cur - 1])) < 0)
				return keep;
			if (!keep)
				continue;
		}
		/* the artifact's strings, loaded with its first block given (none given, no load) */
		if (t->strs_of != t->ids[t->cur - 1]) {
			int rc;
			strmap_free(&t->strs);
			t->strs_of = 0;
			if ((rc = strmap_load(t->r, t->ids[t->cur - 1], &t->strs, err)))
				return rc;
			t->strs_of = t->ids[t->cur - 1];
		}
		evpack_dec_init(&t->dec, data, len, cnt);
	}
}

int store_trace_bounds(struct store_trace *t, size_t k, int64_t *lo, int64_t *hi, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*lo = INT64_MAX;
	*hi = INT64_MIN;
	if (k >= t->nart)
		return TP_OK;
	if (!t->bounds &&
	    !(t->bounds = store_prepare(t->r, "SELECT MIN(min_ts), MAX(max_end) FROM event_blocks"
						 " WHERE key BETWEEN ?1 AND ?2 AND min_ts IS NOT NULL", err)))
		return TP_ERR_DB;
	st = t->bounds;
	db_bind_int64(st, 1, t->ids[k] << 32);
	db_bind_int64(st, 2, t->ids[k] << 32 | 0xffffffffLL);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) != DB_NULL) {
		*lo = db_column_int64(st, 0);
		*hi = db_column_int64(st, 1);
	}
	db_reset(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read event bounds");
}

void store_trace_skip(struct store_trace *t, size_t k)
{
	if (!t->blocks && t->cur < k)
		t->cur = k < t->nart ? k : t->nart;
}

void store_trace_window(struct store_trace *t, int64_t start_ns, int64_t end_ns)
{
	t->start = start_ns;
	t->end = end_ns;
}

void store_trace_starts(struct store_trace *t)
{
	t->starts = 1;
}

void store_trace_prefilter(struct store_trace *t, store_trace_keep_fn keep, void *payload)
{
	t->keep = keep;
	t->keep_payload = payload;
}

void store_trace_limit(struct store_trace *t, size_t k)
{
	t->lim = k < t->nart ? k : t->nart;
}

int store_trace_inflight(struct store_trace *t, int64_t *id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*id = INT64_MAX;
	if (!(st = store_prepare(t->r, "SELECT MIN(a.id) FROM artifacts a JOIN runs r ON r.id=a.run_id"
				 " WHERE r.name=?1 AND a.status='ingesting'", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, t->run);
	step = db_step(st);
	if (step == DB_ROW && db_column_type(st, 0) != DB_NULL)
		*id = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, t->r->db, "read artifacts");
}

int64_t store_trace_artifact(const struct store_trace *t)
{
	return t->cur ? t->ids[t->cur - 1] : 0;
}

size_t store_trace_artifacts(const struct store_trace *t, const int64_t **ids, const int64_t **bases)
{
	*ids = t->ids;
	*bases = t->bases;
	return t->nart;
}

const char *store_trace_string(const struct store_trace *t, uint32_t id)
{
	return strmap_get(&t->strs, id);
}
