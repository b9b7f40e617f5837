/*
 * metrics.c: see metrics.h. Requests are counted in a fixed table of
 * (route, status) cells: the routes of routes.c plus "unmatched", and the
 * statuses this server answers with plus "other".
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "metrics.h"
#include "routes.h"
#include "store/store.h"

#define MAX_ROUTES 64	/* more than routes.c has (44): a route past it would count as unmatched */

static const unsigned statuses[] = { 200, 201, 204, 400, 401, 404, 405, 413, 422, 500, 503, 507 };
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]) + 1)	/* + other */

static atomic_ullong requests[MAX_ROUTES + 1][NSTATUS];
static atomic_ullong heap_trims, upload_bytes, upload_count, upload_micros, derive_count, derive_micros, replayed, kept,
	parts[METRICS_PART_KINDS], mem_models[2], point_blocks[3], coll_rows[2];

void metrics_request(int route, unsigned status)
{
	size_t r = route < 0 || route >= MAX_ROUTES ? MAX_ROUTES : (size_t)route, s;

	for (s = 0; s < NSTATUS - 1 && statuses[s] != status; s++)
		;
	atomic_fetch_add_explicit(&requests[r][s], 1, memory_order_relaxed);
}

void metrics_derivation(double seconds)
{
	atomic_fetch_add_explicit(&derive_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&derive_micros, (unsigned long long)(seconds * 1e6), memory_order_relaxed);
}

void metrics_replay(uint64_t artifacts_replayed, uint64_t artifacts_kept)
{
	atomic_fetch_add_explicit(&replayed, artifacts_replayed, memory_order_relaxed);
	atomic_fetch_add_explicit(&kept, artifacts_kept, memory_order_relaxed);
}

void metrics_part(enum metrics_part how)
{
	atomic_fetch_add_explicit(&parts[how], 1, memory_order_relaxed);
}

void metrics_memory_model(int went_on)
{
	atomic_fetch_add_explicit(&mem_models[!!went_on], 1, memory_order_relaxed);
}

void metrics_point_blocks(int64_t same, int64_t written, int64_t unread)
{
	atomic_fetch_add_explicit(&point_blocks[0], (unsigned long long)same, memory_order_relaxed);
	atomic_fetch_add_explicit(&point_blocks[1], (unsigned long long)written, memory_order_relaxed);
	atomic_fetch_add_explicit(&point_blocks[2], (unsigned long long)unread, memory_order_relaxed);
}

void metrics_coll_rows(int64_t same, int64_t written)
{
	atomic_fetch_add_explicit(&coll_rows[0], (unsigned long long)same, memory_order_relaxed);
	atomic_fetch_add_explicit(&coll_rows[1], (unsigned long long)written, memory_order_relaxed);
}

void metrics_upload(uint64_t bytes_sent, double seconds)
{
	atomic_fetch_add_explicit(&upload_bytes, bytes_sent, memory_order_relaxed);
	atomic_fetch_add_explicit(&upload_count, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&upload_micros, (unsigned long long)(seconds * 1e6), memory_order_relaxed);
}

void metrics_trim(void)
{
	atomic_fetch_add_explicit(&heap_trims, 1, memory_order_relaxed);
}

struct text {
	char *buf;
	size_t len, cap;
	int failed;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		char *nb = tp_realloc(t->buf, t->cap * 2);
		if (!nb || n < 0) {
			t->failed = 1;
			return;
		}
		t->buf = nb;
		t->cap *= 2;
	}
}

char *metrics_render(struct store *st, const struct route_table *routes)
{
	struct text t = { tp_malloc(4096), 0, 4096, 0 };
	struct store_counts c = { 0 };
	size_t r, s, nroutes = routes ? routes->n : 0;

	if (!t.buf)
		return NULL;
	put(&t, "# HELP trainscope_http_requests_total HTTP requests by route and status.\n"
		"# TYPE trainscope_http_requests_total counter\n");
	for (r = 0; r <= MAX_ROUTES; r++) {
		const struct route *rt = r < nroutes && r < MAX_ROUTES ? &routes->route[r] : NULL;
		if (r < MAX_ROUTES && !rt)
			continue;
		for (s = 0; s < NSTATUS; s++) {
			unsigned long long v = atomic_load_explicit(&requests[r][s], memory_order_relaxed);
			if (!v)
				continue;
			if (s < NSTATUS - 1)
				put(&t, "trainscope_http_requests_total{route=\"%s %s\",status=\"%u\"} %llu\n",
				    rt ? rt->method : "-", rt ? rt->pattern : "unmatched", statuses[s], v);
			else
				put(&t, "trainscope_http_requests_total{route=\"%s %s\",status=\"other\"} %llu\n",
				    rt ? rt->method : "-", rt ? rt->pattern : "unmatched", v);
		}
	}
	put(&t, "# HELP trainscope_heap_trims_total Times the memory uploads freed was given back to the system.\n"
		"# TYPE trainscope_heap_trims_total counter\n"
		"trainscope_heap_trims_total %llu\n", (unsigned long long)atomic_load(&heap_trims));
	put(&t, "# HELP trainscope_upload_bytes_total Bytes received in uploads, as sent.\n"
		"# TYPE trainscope_upload_bytes_total counter\n"
		"trainscope_upload_bytes_total %llu\n", (unsigned long long)atomic_load(&upload_bytes));
	put(&t, "# HELP trainscope_upload_seconds From an upload's first byte to its answer (ingest included).\n"
		"# TYPE trainscope_upload_seconds summary\n"
		"trainscope_upload_seconds_sum %.6f\ntrainscope_upload_seconds_count %llu\n",
	    (double)atomic_load(&upload_micros) / 1e6, (unsigned long long)atomic_load(&upload_count));
	put(&t, "# HELP trainscope_rank_derivation_seconds Ranks derived again from their traces by a read,"
		" after uploads joined them (once per rank however many joined).\n"
		"# TYPE trainscope_rank_derivation_seconds summary\n"
		"trainscope_rank_derivation_seconds_sum %.6f\ntrainscope_rank_derivation_seconds_count %llu\n",
	    (double)atomic_load(&derive_micros) / 1e6, (unsigned long long)atomic_load(&derive_count));
	put(&t, "# HELP trainscope_rank_replay_artifacts_total Trace artifacts whose events a rank's derivation read"
		" (replayed), or took as analysed by the rank's derivation before (kept).\n"
		"# TYPE trainscope_rank_replay_artifacts_total counter\n"
		"trainscope_rank_replay_artifacts_total{how=\"replayed\"} %llu\n"
		"trainscope_rank_replay_artifacts_total{how=\"kept\"} %llu\n",
	    (unsigned long long)atomic_load(&replayed), (unsigned long long)atomic_load(&kept));
	put(&t, "# HELP trainscope_rank_parts_total Parts of ranks closed (a profiling cycle that began after"
		" the rank's last ended: derivations then finish the cycles since), parts cut inside their traces"
		" (cut: at a step that nothing crosses; uncut: no such step was found; crossed: one was, but"
		" something crossed it), and ranks derived again as one analysis because their parts did not meet"
		" (rebuilt).\n"
		"# TYPE trainscope_rank_parts_total counter\n"
		"trainscope_rank_parts_total{how=\"closed\"} %llu\n"
		"trainscope_rank_parts_total{how=\"cut\"} %llu\n"
		"trainscope_rank_parts_total{how=\"uncut\"} %llu\n"
		"trainscope_rank_parts_total{how=\"crossed\"} %llu\n"
		"trainscope_rank_parts_total{how=\"rebuilt\"} %llu\n",
	    (unsigned long long)atomic_load(&parts[METRICS_PART_CLOSED]),
	    (unsigned long long)atomic_load(&parts[METRICS_PART_CUT]),
	    (unsigned long long)atomic_load(&parts[METRICS_PART_UNCUT]),
	    (unsigned long long)atomic_load(&parts[METRICS_PART_CROSSED]),
	    (unsigned long long)atomic_load(&parts[METRICS_PART_REBUILT]));
	put(&t, "# HELP trainscope_rank_memory_models_total Memory models of ranks in parts, at each derivation:"
		" the parts before went on with the newest part's [memory] events (went_on), or the model was made"
		" again from every part's (made).\n"
		"# TYPE trainscope_rank_memory_models_total counter\n"
		"trainscope_rank_memory_models_total{how=\"went_on\"} %llu\n"
		"trainscope_rank_memory_models_total{how=\"made\"} %llu\n",
	    (unsigned long long)atomic_load(&mem_models[1]), (unsigned long long)atomic_load(&mem_models[0]));
	put(&t, "# HELP trainscope_rank_memory_blocks_total Blocks of a rank's memory timeline points at each"
		" derivation's write: those found stored as they were (kept), those written, those known to be"
		" stored by the last write and not read (unread).\n"
		"# TYPE trainscope_rank_memory_blocks_total counter\n"
		"trainscope_rank_memory_blocks_total{how=\"kept\"} %llu\n"
		"trainscope_rank_memory_blocks_total{how=\"written\"} %llu\n"
		"trainscope_rank_memory_blocks_total{how=\"unread\"} %llu\n",
	    (unsigned long long)atomic_load(&point_blocks[0]), (unsigned long long)atomic_load(&point_blocks[1]),
	    (unsigned long long)atomic_load(&point_blocks[2]));
	put(&t, "# HELP trainscope_rank_collectives_total Rows of a rank's collectives at each derivation's write:"
		" those the write before stored, left as they were (kept), those written.\n"
		"# TYPE trainscope_rank_collectives_total counter\n"
		"trainscope_rank_collectives_total{how=\"kept\"} %llu\n"
		"trainscope_rank_collectives_total{how=\"written\"} %llu\n",
	    (unsigned long long)atomic_load(&coll_rows[0]), (unsigned long long)atomic_load(&coll_rows[1]));
	if (store_counts(st, &c, NULL) == 0) {
		put(&t, "# HELP trainscope_artifacts Artifacts by status.\n# TYPE trainscope_artifacts gauge\n"
			"trainscope_artifacts{status=\"ready\"} %lld\ntrainscope_artifacts{status=\"error\"} %lld\n"
			"trainscope_artifacts{status=\"ingesting\"} %lld\n",
		    (long long)c.ready, (long long)c.error, (long long)c.ingesting);
		put(&t, "# HELP trainscope_runs Runs with at least one artifact.\n# TYPE trainscope_runs gauge\n"
			"trainscope_runs %lld\n", (long long)c.runs);
		put(&t, "# HELP trainscope_database_bytes Size of the database files (main and WAL).\n"
			"# TYPE trainscope_database_bytes gauge\ntrainscope_database_bytes %lld\n",
		    (long long)c.db_bytes);
		put(&t, "# HELP trainscope_wal_folds_total Times the store's own thread folded the write-ahead log"
			" back into the database file (SQLite), so that no upload waited for it.\n"
			"# TYPE trainscope_wal_folds_total counter\ntrainscope_wal_folds_total %lld\n", (long long)c.folds);
	}
	if (t.failed) {
		tp_free(t.buf);
		return NULL;
	}
	return t.buf;
}
