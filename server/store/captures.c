/*
 * captures.c: on-demand captures (migration 019; store.h says what each
 * function does, docs/api.md the API over them).
 *
 * A capture's state is kept in captures.state and set again (settle()) in
 * the transaction of every change to it or to its ranks' parts, from its
 * parts and the time: what a reader sees needs no computing. What time alone
 * changes (an expiry, a rank gone quiet) waits for store_captures_sweep,
 * which the handlers call before they read or take.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

static struct db_stmt *prep(struct db *db, const char *sql, struct tp_errbuf *err)
{
	struct db_stmt *st;

	if (db_prepare(db, sql, 0, &st) != DB_OK) {
		store_db_fail(err, db, "prepare");
		return NULL;
	}
	return st;
}

static char *dup_col(struct db_stmt *st, int i)
{
	return db_column_type(st, i) == DB_NULL ? NULL : tp_strdup((const char *)db_column_text(st, i));
}

void store_captures_free(struct store_capture *v, size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		tp_free(v[i].run);
		tp_free(v[i].requested_by);
		tp_free(v[i].token);
		tp_free(v[i].client);
		tp_free(v[i].ranks);
		tp_free(v[i].activities);
		for (k = 0; k < v[i].nby_rank; k++) {
			tp_free(v[i].by_rank[k].reason);
			tp_free(v[i].by_rank[k].artifacts);
		}
		tp_free(v[i].by_rank);
	}
	tp_free(v);
}

/* c's ranks' parts and their artifacts: 0 or a tp_err. */
static int load_ranks(struct db *db, struct store_capture *c, struct tp_errbuf *err)
{
	struct db_stmt *st;
	size_t cap = 0, k = 0;
	int step;

	if (!(st = prep(db, "SELECT rank, state, reason, started_ns, ended_ns FROM capture_ranks WHERE capture_id=?1"
			" ORDER BY rank", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, c->id);
	while ((step = db_step(st)) == DB_ROW) {
		struct store_capture_rank *p;
		if (c->nby_rank == cap) {
			size_t nc = cap ? cap * 2 : 4;
			if (!(p = tp_realloc(c->by_rank, nc * sizeof(*p))))
				break;
			c->by_rank = p;
			cap = nc;
		}
		p = &c->by_rank[c->nby_rank++];
		memset(p, 0, sizeof(*p));
		p->rank = db_column_int(st, 0);
		snprintf(p->state, sizeof(p->state), "%s", (const char *)db_column_text(st, 1));
		p->reason = dup_col(st, 2);
		p->started_ns = db_column_int64(st, 3);
		p->ended_ns = db_column_type(st, 4) == DB_NULL ? 0 : db_column_int64(st, 4);
	}
	db_finalize(st);
	if (step != DB_DONE)
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				      : store_db_fail(err, db, "read capture ranks");
	if (!c->nby_rank)
		return TP_OK;
	/* an artifact deleted since, or still being ingested, is not listed */
	if (!(st = prep(db, "SELECT ca.rank, ca.artifact_id FROM capture_artifacts ca JOIN artifacts a ON a.id=ca.artifact_id"
			" WHERE ca.capture_id=?1 AND a.status<>'ingesting' ORDER BY ca.rank, ca.artifact_id", err)))
		return TP_ERR_DB;
	db_bind_int64(st, 1, c->id);
	while ((step = db_step(st)) == DB_ROW) {
		int rank = db_column_int(st, 0);
		struct store_capture_rank *p;
		int64_t *a;
		while (k < c->nby_rank && c->by_rank[k].rank < rank)
			k++;
		if (k == c->nby_rank || c->by_rank[k].rank != rank)
			continue;	/* uploaded from a rank that never took it: not shown */
		p = &c->by_rank[k];
		if (!(a = tp_realloc(p->artifacts, (p->nartifacts + 1) * sizeof(*a))))
			break;
		p->artifacts = a;
		a[p->nartifacts++] = db_column_int64(st, 1);
	}
	db_finalize(st);
	if (step != DB_DONE)
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				      : store_db_fail(err, db, "read capture artifacts");
	return TP_OK;
}

/* The captures of run (NULL: any) and id (0: any), newest first, at most STORE_CAPTURES_LIST_MAX. */
static int load(struct db *db, const char *run, int64_t id, struct store_capture **out, size_t *n,
		struct tp_errbuf *err)
{
	struct store_capture *v = NULL;
	struct db_stmt *st;
	size_t cap = 0, i;
	int step, rc = TP_OK;

	*out = NULL;
	*n = 0;
	if (!(st = prep(db, "SELECT c.id, r.name, c.created_ns, c.expires_ns, c.requested_by, c.token, c.client,"
			" c.steps, c.seconds, c.ranks, c.activities, c.state FROM captures c JOIN runs r ON r.id=c.run_id"
			" WHERE (?1 IS NULL OR r.name=?1) AND (?2=0 OR c.id=?2) ORDER BY c.id DESC LIMIT 200", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	db_bind_int64(st, 2, id);
	while ((step = db_step(st)) == DB_ROW) {
		struct store_capture *c;
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			if (!(c = tp_realloc(v, nc * sizeof(*c))))
				break;
			v = c;
			cap = nc;
		}
		c = &v[(*n)++];
		memset(c, 0, sizeof(*c));
		c->id = db_column_int64(st, 0);
		c->run = dup_col(st, 1);
		c->created_ns = db_column_int64(st, 2);
		c->expires_ns = db_column_int64(st, 3);
		c->requested_by = dup_col(st, 4);
		c->token = dup_col(st, 5);
		c->client = dup_col(st, 6);
		c->steps = db_column_int(st, 7);
		c->seconds = db_column_int(st, 8);
		c->ranks = dup_col(st, 9);
		c->activities = dup_col(st, 10);
		snprintf(c->state, sizeof(c->state), "%s", (const char *)db_column_text(st, 11));
		if (!c->run || !c->ranks || !c->activities)
			break;
	}
	db_finalize(st);
	if (step != DB_DONE)
		rc = step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
				    : store_db_fail(err, db, "read captures");
	for (i = 0; !rc && i < *n; i++)
		rc = load_ranks(db, &v[i], err);
	if (rc) {
		store_captures_free(v, *n);
		*n = 0;
		return rc;
	}
	*out = v;
	return TP_OK;
}

/* 1 when every rank c lists has a part (never for "all") */
static int listed_all_taken(const struct store_capture *c)
{
	const char *p = c->ranks;
	size_t k = 0;

	if (!strcmp(p, "all"))
		return 0;
	while (*p == ',' && p[1]) {
		int rank = atoi(p + 1);
		while (k < c->nby_rank && c->by_rank[k].rank < rank)
			k++;
		if (k == c->nby_rank || c->by_rank[k].rank != rank)
			return 0;
		p = strchr(p + 1, ',');
	}
	return 1;
}

/* What c's state is at now, from its parts (see store.h). */
static const char *state_at(const struct store_capture *c, int64_t now)
{
	size_t i, running = 0, done = 0;

	if (!strcmp(c->state, "cancelled") || !strcmp(c->state, "expired"))
		return c->state;
	if (!c->nby_rank)
		return now >= c->expires_ns ? "expired" : "pending";
	for (i = 0; i < c->nby_rank; i++) {
		running += !strcmp(c->by_rank[i].state, "running");
		done += !strcmp(c->by_rank[i].state, "done");
	}
	/* listed ranks not yet heard from may still take it, until its expiry */
	if (running || (strcmp(c->ranks, "all") && now < c->expires_ns && !listed_all_taken(c)))
		return "running";
	return done ? "done" : "failed";
}

/* In w's transaction: set capture id's state from its parts at now; *c (may be NULL) the capture as settled. */
static int settle(struct store_writer *w, int64_t id, int64_t now, struct store_capture **c, struct tp_errbuf *err)
{
	struct store_capture *v;
	struct db_stmt *st;
	const char *state;
	size_t n;
	int rc;

	if ((rc = load(w->db, NULL, id, &v, &n, err)))
		return rc;
	if (!n)
		return tp_fail(err, TP_ERR_NOTFOUND, "capture_not_found", "no capture %lld", (long long)id);
	state = state_at(v, now);
	if (strcmp(state, v->state)) {
		if (!(st = prep(w->db, "UPDATE captures SET state=?2 WHERE id=?1", err))) {
			store_captures_free(v, n);
			return TP_ERR_DB;
		}
		db_bind_int64(st, 1, id);
		store_bind_text(st, 2, state);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "write capture");
		db_finalize(st);
		snprintf(v->state, sizeof(v->state), "%s", state);
	}
	if (!rc && c) {
		*c = v;
		return TP_OK;
	}
	store_captures_free(v, n);
	return rc;
}

/* The transactions here change no cached answer: none bumps the store's generation. */
static int begin(struct store_writer *w, struct tp_errbuf *err)
{
	int rc = store_begin(w, err);

	if (!rc)
		w->quiet = 1;
	return rc;
}

static int commit(struct store_writer *w, int rc, struct tp_errbuf *err)
{
	if (!rc)
		rc = store_commit(w, err);
	if (rc)
		store_rollback(w);
	w->quiet = 0;
	return rc;
}

int store_capture_create(struct store_writer *w, const struct store_capture *c, int64_t *id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc, step;

	*id = 0;
	if ((rc = begin(w, err)))
		return rc;
	if (!(st = prep(w->db, "INSERT INTO captures(run_id, created_ns, expires_ns, requested_by, token, client, steps,"
			" seconds, ranks, activities, state) SELECT r.id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, 'pending'"
			" FROM runs r WHERE r.name=?1 AND " STORE_RUN_LISTED " RETURNING id", err)))
		return commit(w, TP_ERR_DB, err);
	store_bind_text(st, 1, c->run);
	db_bind_int64(st, 2, c->created_ns);
	db_bind_int64(st, 3, c->expires_ns);
	store_bind_text(st, 4, c->requested_by);
	store_bind_text(st, 5, c->token);
	store_bind_text(st, 6, c->client);
	db_bind_int(st, 7, c->steps);
	db_bind_int(st, 8, c->seconds);
	store_bind_text(st, 9, c->ranks);
	store_bind_text(st, 10, c->activities);
	if ((step = db_step(st)) == DB_ROW)
		*id = db_column_int64(st, 0);
	else if (step == DB_DONE)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "run_not_found", "no run named '%s'", c->run);
	else
		rc = store_db_fail(err, w->db, "write capture");
	db_finalize(st);
	return commit(w, rc, err);
}

int store_captures_read(struct store_reader *r, const char *run, int64_t id, struct store_capture **out, size_t *n,
			struct tp_errbuf *err)
{
	int rc;

	if (run && (rc = store_run_exists(r, run, err)))
		return rc;
	if ((rc = load(r->db, run, id, out, n, err)))
		return rc;
	if (id && !*n)
		return tp_fail(err, TP_ERR_NOTFOUND, "capture_not_found", "no capture %lld", (long long)id);
	return TP_OK;
}

/* The capture rank would take (0: none), read on db. */
static int next_for(struct db *db, const char *run, int rank, int64_t now, int64_t *id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	char like[24];
	int step;

	*id = 0;
	snprintf(like, sizeof(like), "%%,%d,%%", rank);
	if (!(st = prep(db, "SELECT c.id FROM captures c JOIN runs r ON r.id=c.run_id WHERE r.name=?1"
			" AND c.state IN ('pending', 'running') AND c.expires_ns > ?3 AND (c.ranks='all' OR c.ranks LIKE ?2)"
			" AND NOT EXISTS (SELECT 1 FROM capture_ranks k WHERE k.capture_id=c.id AND k.rank=?4)"
			" ORDER BY c.id LIMIT 1", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	store_bind_text(st, 2, like);
	db_bind_int64(st, 3, now);
	db_bind_int(st, 4, rank);
	if ((step = db_step(st)) == DB_ROW)
		*id = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, db, "read captures");
}

int store_capture_take(struct store_writer *w, const char *run, int rank, int64_t now, int64_t *id,
		       struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc;

	/* a poll that finds nothing (the common case) takes no write lock */
	if ((rc = next_for(w->db, run, rank, now, id, err)) || !*id)
		return rc;
	if ((rc = begin(w, err)))
		return rc;
	/* again under the lock: another server's rank, or this one's other request, may have been first */
	if ((rc = next_for(w->db, run, rank, now, id, err)) || !*id)
		return commit(w, rc, err);
	if (!(st = prep(w->db, "INSERT INTO capture_ranks(capture_id, rank, state, started_ns) VALUES(?1, ?2, 'running', ?3)",
			err)))
		return commit(w, TP_ERR_DB, err);
	db_bind_int64(st, 1, *id);
	db_bind_int(st, 2, rank);
	db_bind_int64(st, 3, now);
	if (db_step(st) != DB_DONE)
		rc = store_db_fail(err, w->db, "take capture");
	db_finalize(st);
	if (!rc)
		rc = settle(w, *id, now, NULL, err);
	if ((rc = commit(w, rc, err)))
		*id = 0;
	return rc;
}

int store_capture_end(struct store_writer *w, int64_t id, int rank, int ok, const char *reason, int64_t now,
		      struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc, step;

	if ((rc = begin(w, err)))
		return rc;
	if (!(st = prep(w->db, "SELECT (SELECT state FROM capture_ranks WHERE capture_id=?1 AND rank=?2) FROM captures"
			" WHERE id=?1", err)))
		return commit(w, TP_ERR_DB, err);
	db_bind_int64(st, 1, id);
	db_bind_int(st, 2, rank);
	if ((step = db_step(st)) == DB_DONE)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "capture_not_found", "no capture %lld", (long long)id);
	else if (step != DB_ROW)
		rc = store_db_fail(err, w->db, "read capture");
	else if (db_column_type(st, 0) == DB_NULL)
		rc = tp_fail(err, TP_ERR_CONFLICT, "capture_not_taken", "rank %d never took capture %lld", rank,
			     (long long)id);
	else if (strcmp((const char *)db_column_text(st, 0), "running"))
		rc = tp_fail(err, TP_ERR_CONFLICT, "capture_rank_ended", "rank %d's part of capture %lld has ended (%s)",
			     rank, (long long)id, (const char *)db_column_text(st, 0));
	db_finalize(st);
	if (rc)
		return commit(w, rc, err);
	if (!(st = prep(w->db, "UPDATE capture_ranks SET state=?3, reason=?4, ended_ns=?5 WHERE capture_id=?1 AND rank=?2",
			err)))
		return commit(w, TP_ERR_DB, err);
	db_bind_int64(st, 1, id);
	db_bind_int(st, 2, rank);
	store_bind_text(st, 3, ok ? "done" : "failed");
	store_bind_text(st, 4, reason);
	db_bind_int64(st, 5, now);
	if (db_step(st) != DB_DONE)
		rc = store_db_fail(err, w->db, "end capture");
	db_finalize(st);
	if (!rc)
		rc = settle(w, id, now, NULL, err);
	return commit(w, rc, err);
}

int store_capture_cancel(struct store_writer *w, int64_t id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc, step;

	if ((rc = begin(w, err)))
		return rc;
	if (!(st = prep(w->db, "SELECT state FROM captures WHERE id=?1", err)))
		return commit(w, TP_ERR_DB, err);
	db_bind_int64(st, 1, id);
	if ((step = db_step(st)) == DB_DONE)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "capture_not_found", "no capture %lld", (long long)id);
	else if (step != DB_ROW)
		rc = store_db_fail(err, w->db, "read capture");
	else if (strcmp((const char *)db_column_text(st, 0), "pending"))
		rc = tp_fail(err, TP_ERR_CONFLICT, "capture_not_pending",
			     "capture %lld is %s: only a pending capture can be cancelled", (long long)id,
			     (const char *)db_column_text(st, 0));
	db_finalize(st);
	if (!rc && (st = prep(w->db, "UPDATE captures SET state='cancelled' WHERE id=?1", err))) {
		db_bind_int64(st, 1, id);
		if (db_step(st) != DB_DONE)
			rc = store_db_fail(err, w->db, "cancel capture");
		db_finalize(st);
	} else if (!rc) {
		rc = TP_ERR_DB;
	}
	return commit(w, rc, err);
}

/* Captures that time changes at now: up to 64 ids into ids; their count, or -1 (err set). */
static int due(struct db *db, int64_t now, int64_t ttl_ns, int64_t ids[64], struct tp_errbuf *err)
{
	struct db_stmt *st;
	int n = 0, step;

	if (!(st = prep(db, "SELECT c.id FROM captures c WHERE c.state IN ('pending', 'running') AND ("
			"(c.expires_ns <= ?1 AND NOT EXISTS (SELECT 1 FROM capture_ranks k WHERE k.capture_id=c.id"
			" AND k.state='running')) OR EXISTS (SELECT 1 FROM capture_ranks k WHERE k.capture_id=c.id"
			" AND k.state='running' AND k.started_ns + c.seconds * 1000000000 + ?2 <= ?1)) ORDER BY c.id LIMIT 64",
			err)))
		return -1;
	db_bind_int64(st, 1, now);
	db_bind_int64(st, 2, ttl_ns);
	while ((step = db_step(st)) == DB_ROW)
		ids[n++] = db_column_int64(st, 0);
	db_finalize(st);
	if (step != DB_DONE) {
		store_db_fail(err, db, "read captures");
		return -1;
	}
	return n;
}

int store_captures_sweep(struct store_writer *w, int64_t now, int64_t ttl_ns, store_capture_fn fn, void *arg,
			 struct tp_errbuf *err)
{
	struct store_capture *done[64] = { 0 };
	char what[64][96];
	int64_t ids[64];
	int n, i, rc;

	if ((n = due(w->db, now, ttl_ns, ids, err)) <= 0)
		return n < 0 ? TP_ERR_DB : TP_OK;
	if ((rc = begin(w, err)))
		return rc;
	/* again under the lock: another server may have settled them */
	if ((n = due(w->db, now, ttl_ns, ids, err)) < 0)
		return commit(w, TP_ERR_DB, err);
	for (i = 0; i < n && !rc; i++) {
		struct db_stmt *st;
		int failed = 0, first = -1;
		if (!(st = prep(w->db, "UPDATE capture_ranks SET state='failed', reason='no word from the rank', ended_ns=?2"
				" WHERE capture_id=?1 AND state='running' AND started_ns + ?3 + 1000000000 *"
				" (SELECT seconds FROM captures WHERE id=?1) <= ?2 RETURNING rank", err))) {
			rc = TP_ERR_DB;
			break;
		}
		db_bind_int64(st, 1, ids[i]);
		db_bind_int64(st, 2, now);
		db_bind_int64(st, 3, ttl_ns);
		while ((rc = db_step(st)) == DB_ROW) {
			if (first < 0)
				first = db_column_int(st, 0);
			failed++;
		}
		rc = rc == DB_DONE ? TP_OK : store_db_fail(err, w->db, "fail capture ranks");
		db_finalize(st);
		if (!rc)
			rc = settle(w, ids[i], now, &done[i], err);
		if (rc)
			break;
		if (failed == 1)
			snprintf(what[i], sizeof(what[i]), "rank %d failed: no word from the rank; now %s", first,
				 done[i]->state);
		else if (failed)
			snprintf(what[i], sizeof(what[i]), "%d ranks failed: no word from them; now %s", failed,
				 done[i]->state);
		else
			snprintf(what[i], sizeof(what[i]), "%s", done[i]->state);
	}
	rc = commit(w, rc, err);
	for (i = 0; i < n; i++) {
		if (!rc && fn && done[i])
			fn(done[i], what[i], arg);
		if (done[i])
			store_captures_free(done[i], 1);
	}
	return rc;
}

int store_capture_of_run(struct store_reader *r, const char *run, int64_t id, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT 1 FROM captures c JOIN runs r ON r.id=c.run_id"
					   " WHERE c.id=?1 AND r.name=?2", err);
	int step;

	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, id);
	store_bind_text(st, 2, run);
	step = db_step(st);
	db_finalize(st);
	if (step == DB_ROW)
		return TP_OK;
	if (step == DB_DONE)
		return tp_fail(err, TP_ERR_NOTFOUND, "capture_not_found", "run '%s' has no capture %lld", run,
			       (long long)id);
	return store_db_fail(err, r->db, "read capture");
}

int store_capture_artifact(struct store_writer *w, int64_t id, int64_t artifact, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc;

	if ((rc = begin(w, err)))
		return rc;
	if (!(st = prep(w->db, "INSERT INTO capture_artifacts(capture_id, rank, artifact_id) SELECT ?1, rank, id"
			" FROM artifacts WHERE id=?2 ON CONFLICT DO NOTHING", err)))
		return commit(w, TP_ERR_DB, err);
	db_bind_int64(st, 1, id);
	db_bind_int64(st, 2, artifact);
	if (db_step(st) != DB_DONE)
		rc = store_db_fail(err, w->db, "record capture artifact");
	db_finalize(st);
	return commit(w, rc, err);
}

int store_capture_poll(struct store_writer *w, const char *run, int64_t now, int *appeared, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc, step, listed = 0;
	int64_t polled = 0;

	*appeared = 0;
	/* most polls find the run stamped within STORE_POLL_STAMP_NS: a read, no write lock */
	if (!(st = prep(w->db, "SELECT r.polled_ns, " STORE_RUN_LISTED " FROM runs r WHERE r.name=?1", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if ((step = db_step(st)) == DB_ROW) {
		polled = db_column_type(st, 0) == DB_NULL ? 0 : db_column_int64(st, 0);
		listed = db_column_int(st, 1);
	}
	db_finalize(st);
	if (step != DB_ROW && step != DB_DONE)
		return store_db_fail(err, w->db, "read run");
	if (polled && polled > now - STORE_POLL_STAMP_NS)
		return TP_OK;
	/* a stamp alone changes no cached answer; a run that appears in the list does */
	if ((rc = listed ? begin(w, err) : store_begin(w, err)))
		return rc;
	if (!(st = prep(w->db, "INSERT INTO runs(name, created_ns, polled_ns) VALUES(?1, ?2, ?2)"
			" ON CONFLICT(name) DO UPDATE SET polled_ns=excluded.polled_ns", err)))
		return commit(w, TP_ERR_DB, err);
	store_bind_text(st, 1, run);
	db_bind_int64(st, 2, now);
	if (db_step(st) != DB_DONE)
		rc = store_db_fail(err, w->db, "stamp run");
	db_finalize(st);
	if (!(rc = commit(w, rc, err)))
		*appeared = !listed;
	return rc;
}

int store_run_polled(struct store_reader *r, const char *run, int64_t *ns, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc, step;

	*ns = 0;
	if ((rc = store_run_exists(r, run, err)))
		return rc;
	if (!(st = store_prepare(r, "SELECT polled_ns FROM runs WHERE name=?1", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if ((step = db_step(st)) == DB_ROW && db_column_type(st, 0) != DB_NULL)
		*ns = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read run");
}
