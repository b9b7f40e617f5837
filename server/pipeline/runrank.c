/*
 * runrank.c: one analysis per run and rank (runrank.h).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_PREFIX "runrank"

#include "alloc.h"
#include "analysis/analysis.h"
#include "analysis/memory.h"
#include "metrics.h"
#include "pipeline/names.h"
#include "pipeline/overlap.h"
#include "pipeline/runrank.h"
#include "pipeline/runrank_int.h"
#include "ingest/trace.h"

/* The current artifact's string ids in the shared space, as they are met (0: not yet). */
struct idmap {
	int64_t artifact;
	uint32_t *v;
	size_t n;
};

/* An artifact string id in the shared space; 0 stays 0 (absent). */
static int remap(struct names *nm, struct idmap *m, const struct store_trace *t, uint32_t *id,
		 struct tp_errbuf *err)
{
	uint32_t g;

	if (!*id || *id < TRACE_S_KNOWN_END)
		return TP_OK;
	if (*id < m->n && m->v[*id]) {
		*id = m->v[*id];
		return TP_OK;
	}
	if (*id >= m->n) {
		size_t n = m->n ? m->n : 1024;
		while (n <= *id)
			n *= 2;
		uint32_t *nv = tp_realloc(m->v, n * sizeof(*nv));
		if (!nv)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		memset(nv + m->n, 0, (n - m->n) * sizeof(*nv));
		m->v = nv;
		m->n = n;
	}
	if (!(g = names_id(nm, store_trace_string(t, *id))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	m->v[*id] = g;
	*id = g;
	return TP_OK;
}

/* The collective's string fields (event.h: ids held in int64); one out of range is dropped. */
static int remap64(struct names *nm, struct idmap *m, const struct store_trace *t, int64_t *v, uint32_t bit,
		   uint32_t *have, struct tp_errbuf *err)
{
	uint32_t id;
	int rc;

	if (!(*have & bit))
		return TP_OK;
	if (*v <= 0 || *v > (int64_t)UINT32_MAX) {
		*have &= ~bit;
		return TP_OK;
	}
	id = (uint32_t)*v;
	if ((rc = remap(nm, m, t, &id, err)))
		return rc;
	*v = id;
	return TP_OK;
}

/* Where each ProfilerStep span came from. */
struct span_src {
	int64_t step, ts, artifact;
};

struct spans {
	struct span_src *v;
	size_t n, cap;
};

static int note_step(struct spans *sp, const char *name, int64_t ts, int64_t artifact)
{
	static const char prefix[] = "ProfilerStep#";
	int64_t n = 0;
	const char *p;

	if (strncmp(name, prefix, sizeof(prefix) - 1))
		return TP_OK;
	for (p = name + sizeof(prefix) - 1; *p >= '0' && *p <= '9' && n < INT64_MAX / 10 - 9; p++)
		n = n * 10 + (*p - '0');
	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 64;
		struct span_src *nv = tp_realloc(sp->v, cap * sizeof(*nv));
		if (!nv)
			return TP_ERR_NOMEM;
		sp->v = nv;
		sp->cap = cap;
	}
	sp->v[sp->n++] = (struct span_src){ n, ts, artifact };
	return TP_OK;
}

/* The artifact each step of ar came from: the span with its number and start, else its number. */
static int64_t *step_sources(const struct an_result *ar, const struct spans *sp)
{
	int64_t *src = tp_calloc(ar->nsteps + 1, sizeof(*src));

	for (size_t i = 0; src && i < ar->nsteps; i++)
		for (size_t k = 0; k < sp->n; k++)
			if (sp->v[k].step == ar->steps[i].step) {
				if (!src[i] || sp->v[k].ts == ar->steps[i].start_ns)
					src[i] = sp->v[k].artifact;
				if (sp->v[k].ts == ar->steps[i].start_ns)
					break;
			}
	return src;
}

/*
 * t's next artifacts into an, on base; of the events with a time, only those in [from, to)
 * on base (the window a part takes of them: split()). Their steps into sp (NULL: noted
 * before).
 */
static int replay_in(struct store_trace *t, struct analysis *an, struct names *nm, int64_t base,
		     struct spans *sp, int64_t from, int64_t to, struct tp_errbuf *err)
{
	struct tp_event *ev;
	struct idmap m = { 0 };
	size_t n;
	int64_t b;
	int rc, bad = TP_OK;

	while ((rc = store_trace_next(t, &ev, &n, &b, err)) == 1) {
		if (store_trace_artifact(t) != m.artifact) {
			m.artifact = store_trace_artifact(t);
			if (m.n)
				memset(m.v, 0, m.n * sizeof(*m.v));
		}
		for (size_t i = 0; i < n; i++) {
			struct tp_event *e = &ev[i];	/* changed in place: a copy of its 280 bytes cost more */
			/* string pid/tid: their text names the thread, as name and cat name the event */
			if ((bad = remap(nm, &m, t, &e->name, err)) || (bad = remap(nm, &m, t, &e->cat, err)) ||
			    (e->pid_s && (bad = remap(nm, &m, t, &e->pid_sid, err))) ||
			    (e->tid_s && (bad = remap(nm, &m, t, &e->tid_sid, err))) ||
			    (bad = remap64(nm, &m, t, &e->coll, TH_COLL, &e->have, err)) ||
			    (bad = remap64(nm, &m, t, &e->pg, TH_PG, &e->have, err)) ||
			    (bad = remap64(nm, &m, t, &e->dtype, TH_DTYPE, &e->have, err)))
				break;
			if ((e->have & TH_TS) && b != base)
				e->ts_ns = tp_sat_add(e->ts_ns, b - base);
			if ((e->have & TH_TS) && (e->ts_ns < from || e->ts_ns >= to))
				continue;
			if (sp && e->ph == 'X' && (e->have & TH_TS) &&
			    note_step(sp, names_get(nm, e->name), e->ts_ns, store_trace_artifact(t))) {
				bad = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
			if ((bad = analysis_event(an, e, err)))
				break;
		}
		if (bad)
			break;
	}
	tp_free(m.v);
	return bad ? bad : rc;
}

static int replay(struct store_trace *t, struct analysis *an, struct names *nm, int64_t base,
		  struct spans *sp, struct tp_errbuf *err)
{
	return replay_in(t, an, nm, base, sp, INT64_MIN, INT64_MAX, err);
}

/*
 * A rank's analysis as its trace artifacts came, kept between derivations
 * (not finished: each derivation finishes a fork of it, analysis_fork()).
 * The next derivation of the rank replays only the artifacts that joined
 * after these, when they come after them in replay order (by id) and leave
 * the base alone; anything else (an artifact removed, an earlier base)
 * replays the rank from its start. An artifact ready while one of a lower
 * id is still uploading goes into that derivation's fork only, so that the
 * analysis kept stays a prefix of the artifacts in id order. So a chunk's
 * replay costs the chunk, not the run: bench/results/derive_cost-*.
 */
struct grown {
	uint64_t store;			/* store_reader_serial() */
	char *run;
	int rank;
	struct names nm;
	struct spans sp;
	/*
	 * Parts (analysis.h): the artifacts before the last that began after all
	 * the ones before it ended, merged and finished (acc; NULL: none), and an,
	 * the analysis of those since (the part still growing). A profiling cycle
	 * that comes after the last closes the part before it: a derivation then
	 * finishes that part and the cycles since, not the run. noparts: the
	 * parts did not meet (analysis_merge()); the rank is one analysis, as
	 * before parts.
	 */
	struct analysis *acc;
	int noparts;
	struct analysis *an;
	/*
	 * an's artifacts: from pfirst on (those before are all in acc); of those before
	 * floor_n, only the events from floor on (the part was cut inside them: split()).
	 * ext: an's steps when the rank was last derived, by start; split_at: held
	 * bytes before the next try to cut an (the last found nothing to cut at).
	 */
	size_t pfirst, floor_n;
	int64_t floor;
	int64_t lo_max;		/* the latest first instant of an artifact so far */
	size_t back;		/* the last artifact that began before it (0: none) */
	struct ext { int64_t s, e; } *ext;
	size_t n_ext;		/* ext's steps */
	uint64_t split_at;
	int64_t base;
	int64_t *ids, *bases;		/* the artifacts replayed, in order */
	size_t n;
	/*
	 * What the rank's last committed write stored, with mark_owner its owner then, for the next
	 * with that owner to go on from: its memory points (analysis_memory_mark(); NULL: not
	 * known, every block is gone over), and acc's collectives then, the first rows of its
	 * collectives (0: none known)
	 */
	struct mem_mark *mark;
	int64_t mark_owner;
	size_t mark_colls;
	uint64_t used;			/* the cache's clock when it was last given back */
	struct timespec at;		/* and then (CLOCK_MONOTONIC) */
};

static void grown_free(struct grown *g)
{
	if (!g)
		return;
	analysis_free(g->an);
	analysis_free(g->acc);
	mem_mark_free(g->mark);
	tp_free(g->ext);
	names_free(&g->nm);
	tp_free(g->sp.v);
	tp_free(g->ids);
	tp_free(g->bases);
	tp_free(g->run);
	tp_free(g);
}

/*
 * Ranks kept: the most recently derived, at most MAX_GROWN, each holding at
 * most GROWN_HOLD bytes of each kind of record in memory, the rest in its
 * temporary files (187 MiB for a 1 GB trace: bench/results/derive_cost-*),
 * at most GROWN_BYTES in all (the oldest go first; a rank larger than that
 * alone is not kept, and replays whole each time, as all did before). One
 * not derived for GROWN_IDLE_S goes at the next derivation of any: a run
 * that stopped growing stops holding files (a server that derives nothing
 * keeps them until it does, or stops). A rank growing ahead (grow_rank)
 * takes a free slot, else that of the least recently used rank once it has
 * gone GROWN_YIELD_S unused: without that, the ranks of runs read in the
 * last ten minutes kept a new run from growing ahead, and its first read
 * replayed every chunk (20 chunks of the V100 fixture: 114 ms, not 47;
 * bench/runs_in_turn.py).
 */
#define MAX_GROWN RUNRANK_KEPT_RANKS
#define GROWN_HOLD (1u << 20)
#define GROWN_BYTES (2ULL << 30)
#define GROWN_IDLE_S 600
#define GROWN_YIELD_S 10
struct grown_set {
	pthread_mutex_t mu;
	struct grown *g[MAX_GROWN];
	uint64_t clock;
	uint64_t epoch;		/* runrank_forget()s so far */
	uint64_t bytes;		/* at most, in all (--derive-keep, runrank_set_kept_bytes()) */
	double idle_s;		/* runrank_set_kept_idle() */
	double yield_s;		/* runrank_set_kept_yield() */
};

/* The runs being derived now (claim()): two reads of one run derive it once, the second waits. */
#define MAX_SETTLING 64
struct settling_set {
	pthread_mutex_t mu;
	pthread_cond_t done;
	char *run[MAX_SETTLING];
};

struct deriver {
	struct deriver_opts o;	/* o.kept_bytes and o.kept_idle_s are grown's, under its mutex */
	struct grown_set grown;
	struct settling_set settling;
	struct kick_set *kicked;	/* schedule.c's */
	struct overlap_cache *overlaps;	/* runrank_overlaps */
};

void deriver_opts_default(struct deriver_opts *o)
{
	*o = (struct deriver_opts){ .pace_k = RUNRANK_PACE, .quiet_s = RUNRANK_QUIET, .parts = 1,
				    .split_bytes = RUNRANK_SPLIT, .kept_bytes = GROWN_BYTES, .kept_idle_s = GROWN_IDLE_S };
}

struct deriver *runrank_new(const struct deriver_opts *o, struct kick_set *ks)
{
	struct deriver *dv = tp_calloc(1, sizeof(*dv));

	if (!dv)
		return NULL;
	if (!(dv->overlaps = overlap_cache_new())) {
		tp_free(dv);
		return NULL;
	}
	dv->kicked = ks;
	if (o)
		dv->o = *o;
	else
		deriver_opts_default(&dv->o);
	dv->grown.bytes = dv->o.kept_bytes;
	dv->grown.idle_s = dv->o.kept_idle_s;
	dv->grown.yield_s = GROWN_YIELD_S;
	pthread_mutex_init(&dv->grown.mu, NULL);
	pthread_mutex_init(&dv->settling.mu, NULL);
	pthread_cond_init(&dv->settling.done, NULL);
	return dv;
}

void runrank_free(struct deriver *dv)
{
	if (!dv)
		return;
	for (int i = 0; i < MAX_GROWN; i++)
		grown_free(dv->grown.g[i]);
	pthread_mutex_destroy(&dv->grown.mu);
	pthread_mutex_destroy(&dv->settling.mu);
	pthread_cond_destroy(&dv->settling.done);
	overlap_cache_free(dv->overlaps);
	tp_free(dv);
}

struct kick_set *runrank_kicks(struct deriver *dv)
{
	return dv->kicked;
}

const struct deriver_opts *runrank_opts(const struct deriver *dv)
{
	return &dv->o;
}

struct overlap_cache *runrank_overlaps(struct deriver *dv)
{
	return dv ? dv->overlaps : NULL;
}

void runrank_set_kept_idle(struct deriver *dv, double seconds)
{
	pthread_mutex_lock(&dv->grown.mu);
	dv->grown.idle_s = seconds;
	pthread_mutex_unlock(&dv->grown.mu);
}

void runrank_set_kept_yield(struct deriver *dv, double seconds)
{
	pthread_mutex_lock(&dv->grown.mu);
	dv->grown.yield_s = seconds;
	pthread_mutex_unlock(&dv->grown.mu);
}

/* Take out those not derived for dv->grown.idle_s into out (dv->grown.mu held); how many. */
static int grown_expire(struct deriver *dv, struct grown **out)
{
	int n = 0;

	for (int i = 0; i < MAX_GROWN; i++)
		if (dv->grown.g[i] && runrank_since(&dv->grown.g[i]->at) > dv->grown.idle_s) {
			out[n++] = dv->grown.g[i];
			dv->grown.g[i] = NULL;
		}
	return n;
}

void runrank_set_kept_bytes(struct deriver *dv, uint64_t n)
{
	pthread_mutex_lock(&dv->grown.mu);
	dv->grown.bytes = n;
	pthread_mutex_unlock(&dv->grown.mu);
}

/*
 * Read before the artifacts are: an analysis of artifacts listed before a
 * removal is not kept after it (the removed ids may be given again).
 */
static uint64_t grown_epoch(struct deriver *dv)
{
	uint64_t e;

	pthread_mutex_lock(&dv->grown.mu);
	e = dv->grown.epoch;
	pthread_mutex_unlock(&dv->grown.mu);
	return e;
}

/* g is kept for store's (run, rank) */
static int grown_is(const struct grown *g, uint64_t store, const char *run, int rank)
{
	return g && g->store == store && g->rank == rank && !strcmp(g->run, run);
}

/* (run, rank)'s analysis, taken out of the cache (NULL: none kept). */
static struct grown *grown_take(struct deriver *dv, uint64_t store, const char *run, int rank)
{
	struct grown *g = NULL, *out[MAX_GROWN];
	int nout;

	pthread_mutex_lock(&dv->grown.mu);
	nout = grown_expire(dv, out);
	for (int i = 0; i < MAX_GROWN && !g; i++)
		if (grown_is(dv->grown.g[i], store, run, rank)) {
			g = dv->grown.g[i];
			dv->grown.g[i] = NULL;
		}
	pthread_mutex_unlock(&dv->grown.mu);
	while (nout)
		grown_free(out[--nout]);
	return g;
}

/*
 * Whether (run, rank) has an analysis kept, or one more could be kept without dropping another's
 * but one unused for dv->grown.yield_s (grown_give() drops the least recently used first).
 */
static int grown_room(struct deriver *dv, uint64_t store, const char *run, int rank)
{
	int room = 0;

	pthread_mutex_lock(&dv->grown.mu);
	for (int i = 0; i < MAX_GROWN && !room; i++)
		room = !dv->grown.g[i] || grown_is(dv->grown.g[i], store, run, rank) ||
		       runrank_since(&dv->grown.g[i]->at) >= dv->grown.yield_s;
	pthread_mutex_unlock(&dv->grown.mu);
	return room;
}

static uint64_t grown_bytes(const struct grown *g)
{
	return analysis_held_bytes(g->an) + (g->acc ? analysis_held_bytes(g->acc) : 0) + mem_mark_bytes(g->mark);
}

/* Keep g for the rank's next derivation, in place of the least recently kept when full. */
static void grown_give(struct deriver *dv, struct grown *g, uint64_t epoch)
{
	struct grown *out[MAX_GROWN + 1] = { NULL };
	int at = -1, i, nout;

	pthread_mutex_lock(&dv->grown.mu);
	if (epoch != dv->grown.epoch || !dv->grown.bytes) {	/* a removal came after its artifacts were listed; none kept */
		pthread_mutex_unlock(&dv->grown.mu);
		grown_free(g);
		return;
	}
	nout = grown_expire(dv, out);
	g->used = ++dv->grown.clock;
	clock_gettime(CLOCK_MONOTONIC, &g->at);
	/* one of the rank derived meanwhile goes (this one is newer) */
	for (i = 0; i < MAX_GROWN; i++)
		if (grown_is(dv->grown.g[i], g->store, g->run, g->rank)) {
			out[nout++] = dv->grown.g[i];
			dv->grown.g[i] = NULL;
		}
	/* then the oldest, while there is no place or the bytes are too many */
	for (;;) {
		int free_at = -1, oldest = -1;
		uint64_t total = grown_bytes(g);
		for (i = 0; i < MAX_GROWN; i++) {
			if (!dv->grown.g[i]) {
				free_at = i;
				continue;
			}
			total += grown_bytes(dv->grown.g[i]);
			if (oldest < 0 || dv->grown.g[i]->used < dv->grown.g[oldest]->used)
				oldest = i;
		}
		if (total <= dv->grown.bytes && free_at >= 0) {
			at = free_at;
			break;
		}
		if (oldest < 0)
			break;	/* g alone is too large */
		out[nout++] = dv->grown.g[oldest];
		dv->grown.g[oldest] = NULL;
	}
	if (at >= 0)
		dv->grown.g[at] = g;
	else
		out[nout++] = g;
	pthread_mutex_unlock(&dv->grown.mu);
	for (i = 0; i < nout; i++)
		grown_free(out[i]);
}

void runrank_forget(struct deriver *dv, struct store *st, const char *run)
{
	struct grown *out[MAX_GROWN] = { NULL };
	uint64_t store;

	if (!st)
		return;
	store = store_serial(st);
	overlap_cache_forget(dv->overlaps, store, run);
	pthread_mutex_lock(&dv->grown.mu);
	dv->grown.epoch++;
	for (int i = 0; i < MAX_GROWN; i++)
		if (dv->grown.g[i] && dv->grown.g[i]->store == store && (!run || !strcmp(dv->grown.g[i]->run, run))) {
			out[i] = dv->grown.g[i];
			dv->grown.g[i] = NULL;
		}
	pthread_mutex_unlock(&dv->grown.mu);
	for (int i = 0; i < MAX_GROWN; i++)
		grown_free(out[i]);
}

/* g, when it replayed a prefix of the artifacts (ids, bases) now are, on their base. */
static int grown_fits(const struct grown *g, const int64_t *ids, const int64_t *bases, size_t n, int64_t base)
{
	if (g->base != base || g->n > n)
		return 0;
	for (size_t i = 0; i < g->n; i++)
		if (g->ids[i] != ids[i] || g->bases[i] != bases[i])
			return 0;
	return 1;
}

static struct grown *grown_new(uint64_t store, const char *run, int rank, int64_t base)
{
	struct grown *g = tp_calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->store = store;
	g->rank = rank;
	g->base = base;
	g->lo_max = INT64_MIN;
	if (!(g->run = tp_strdup(run)) || names_init(&g->nm) || !(g->an = analysis_new(names_get, &g->nm))) {
		grown_free(g);
		return NULL;
	}
	return g;
}

/* A rank's timeline computed from its stored events (compute), to be written (store_rank_replace). */
struct derived {
	struct deriver *dv;	/* whose g is */
	struct grown *g;	/* the rank's analysis before this one finished; kept again after */
	struct analysis *an;	/* the fork of g->an that finished */
	struct analysis *merged;	/* and with g->acc, when the rank is in parts: the result's */
	/* the fork's own names and steps, when it took artifacts g did not (ready before one still
	 * uploading: the next derivation lists that one before them); else g's are */
	struct names nm;
	struct spans sp;
	int own;
	const struct an_result *ar;
	int64_t *src;
	int64_t base, owner;
	size_t n;		/* trace artifacts read */
	size_t same_colls;	/* the first collectives, as the rank's last write stored them */
	uint64_t epoch;		/* grown_epoch(dv) before they were listed */
};

static void derived_reset(struct derived *d, int give)
{
	tp_free(d->src);
	analysis_free(d->merged);
	analysis_free(d->an);
	if (d->own) {
		names_free(&d->nm);
		tp_free(d->sp.v);
	}
	if (d->g && give)
		grown_give(d->dv, d->g, d->epoch);
	else
		grown_free(d->g);
	d->src = NULL, d->merged = d->an = NULL, d->own = 0, d->g = NULL, d->ar = NULL;
}

static void derived_free(struct derived *d)
{
	derived_reset(d, 1);
}

/* the parts did not meet: derive the rank again as one analysis */
#define PARTS_REBUILD 1000

/*
 * Artifact a is about to join g: when it begins after all of g->an's events
 * end, g->an is a part, closed (finished and merged into g->acc), and a
 * starts the next (analysis.h). PARTS_REBUILD when the parts do not meet.
 */
static int cut_before(struct store_trace *t, struct grown *g, size_t a, const int64_t *bases, struct tp_errbuf *err)
{
	int64_t tlo, thi, lo, hi;
	struct analysis *next;
	const struct an_result *ar;
	int rc;

	if (g->noparts)
		return TP_OK;
	if ((rc = store_trace_bounds(t, a, &lo, &hi, err)))
		return rc;
	if (lo > hi)
		return TP_OK;
	lo = tp_sat_add(lo, bases[a] - g->base);	/* replay() moves it so (no overflow: base <= bases[a]) */
	if (lo < g->lo_max)
		g->back = a;
	else
		g->lo_max = lo;
	analysis_bounds(g->an, &tlo, &thi);
	if (tlo > thi || !analysis_steps(g->an) || lo <= thi)	/* a trace without steps is one */
		return TP_OK;
	analysis_set_part(g->an);
	if ((rc = analysis_finish(g->an, &ar, err)))
		return rc;
	if ((rc = analysis_absorb(&g->acc, g->an, err)))
		return rc == TP_ERR_UNSUPPORTED ? PARTS_REBUILD : rc;
	if (!(next = analysis_new_after(g->an, err)))
		return err->rc;
	analysis_free(g->an);
	g->an = next;
	g->pfirst = g->floor_n = a;
	g->n_ext = 0;
	g->split_at = 0;
	metrics_part(METRICS_PART_CLOSED);
	return TP_OK;
}

/*
 * Cutting a part inside its traces. Artifacts that overlap in time (the chunks of one
 * trace) are one part however long it grows, and each derivation would finish it whole. So
 * once it holds split_bytes (analysis_held_bytes()), it is taken again in two (struct cut):
 * the events before an instant, a part closed (finished, and absorbed once the derivation has
 * finished the rest), and those from it on, the part that grows. The instant is the start of
 * one of its steps that every step before it had ended by (GPU work included, where the
 * rank's last derivation says), and that the newest of its artifacts begins after, while each of
 * the part's artifacts began after the ones before it did (chunks in time order, as the collector
 * writes them: the next begin after it too). Nothing else may cross it: a span, a launch's
 * kernel, an id, another thread's work; when something does (analysis_follows(),
 * analysis_absorb()), or no step is such, the part stays whole and the next try waits until it
 * holds twice as much. A later artifact that reaches back before the instant makes the parts
 * not meet: the rank is derived again as one (compute()).
 */

static int ext_less(const void *x, const void *y)
{
	const struct ext *a = x, *b = y;

	return (a->s > b->s) - (a->s < b->s);
}

/* The steps of ar (g->an's, finished): how far their GPU work went (split_instant()). */
static int note_ext(struct grown *g, const struct an_result *ar)
{
	struct ext *v = NULL;
	size_t n = 0;

	if (ar->nsteps && !ar->steps[0].whole_trace) {
		if (!(v = tp_malloc(ar->nsteps * sizeof(*v))))
			return TP_ERR_NOMEM;
		for (size_t i = 0; i < ar->nsteps; i++)
			v[n++] = (struct ext){ ar->steps[i].start_ns, tp_sat_add(ar->steps[i].start_ns, ar->steps[i].dur_ns) };
		qsort(v, n, sizeof(*v), ext_less);
	}
	tp_free(g->ext);
	g->ext = v;
	g->n_ext = n;
	return TP_OK;
}

/*
 * The latest start of a step of g->an after floor and at most limit that the steps before
 * it have ended by: their spans, and their GPU work where g->ext knows it; INT64_MIN: none
 * (or out of memory).
 */
static int64_t split_instant(const struct grown *g, int64_t limit)
{
	size_t n = analysis_steps(g->an), k = 0;
	struct ext *v = tp_malloc((n + 1) * sizeof(*v));
	int64_t end = INT64_MIN, at = INT64_MIN;

	if (!v)
		return INT64_MIN;
	for (size_t i = 0; i < n; i++)
		analysis_step_span(g->an, i, &v[i].s, &v[i].e);
	qsort(v, n, sizeof(*v), ext_less);
	for (size_t i = 0; i < n; i++) {
		while (k < g->n_ext && g->ext[k].s < v[i].s)
			k++;
		if (k < g->n_ext && g->ext[k].s == v[i].s && g->ext[k].e > v[i].e)
			v[i].e = g->ext[k].e;
		if (i && v[i].s > end && v[i].s > g->floor && v[i].s <= limit)
			at = v[i].s;
		end = v[i].e > end ? v[i].e : end;
	}
	tp_free(v);
	return at;
}

/* a's bounds on g's base ([lo, hi]: lo > hi when it has no times) */
static int bounds_on(struct store_trace *t, const struct grown *g, size_t a, int64_t *lo, int64_t *hi,
		     struct tp_errbuf *err)
{
	int rc = store_trace_bounds(t, a, lo, hi, err);

	if (!rc && *lo <= *hi) {	/* no overflow: g->base <= g->bases[a] */
		*lo = tp_sat_add(*lo, g->bases[a] - g->base);
		*hi = tp_sat_add(*hi, g->bases[a] - g->base);
	}
	return rc;
}

/*
 * g's artifacts [g->pfirst, g->n) into an again, the events in [from, to) (those before
 * g->floor of the ones before g->floor_n: none), skipping an artifact with none there.
 */
static int replay_part(struct store_reader *r, const char *run, int rank, struct grown *g, struct analysis *an,
		       int64_t from, int64_t to, struct tp_errbuf *err)
{
	struct store_trace *t;
	const int64_t *ids, *bases;
	int rc, got;

	if ((rc = store_trace_open(r, run, rank, INT64_MIN, INT64_MAX, &t, &got, err)))
		return rc;
	if (store_trace_artifacts(t, &ids, &bases) < g->n || memcmp(ids, g->ids, g->n * sizeof(*ids)) ||
	    memcmp(bases, g->bases, g->n * sizeof(*bases))) {
		store_trace_close(t);
		return tp_fail(err, TP_ERR_UNSUPPORTED, NULL, "the rank's artifacts changed");
	}
	for (size_t a = g->pfirst; a < g->n && !rc; a++) {
		int64_t lo, hi, f = a < g->floor_n && g->floor > from ? g->floor : from;
		if ((rc = bounds_on(t, g, a, &lo, &hi, err)) || lo > hi || hi < f || lo >= to)
			continue;
		store_trace_skip(t, a);
		store_trace_limit(t, a + 1);
		store_trace_window(t, f == INT64_MIN ? f : tp_sat_add(f, g->base), to == INT64_MAX ? to : tp_sat_add(to, g->base));
		rc = replay_in(t, an, &g->nm, g->base, NULL, f, to, err);
	}
	store_trace_close(t);
	return rc;
}

/* g->an taken again in two at c: a, finished, and b, growing (split(), cut_end()) */
struct cut {
	struct analysis *a, *b;
	int64_t c;
};

static void cut_free(struct cut *k)
{
	analysis_free(k->a);
	analysis_free(k->b);
	memset(k, 0, sizeof(*k));
}

/* g->an in two (*k) when it is due and can be (above); 0 whether or not it was, else a failure. */
static int split(struct deriver *dv, struct store_reader *r, struct store_trace *t, const char *run, int rank, struct grown *g,
		 struct cut *k, struct tp_errbuf *err)
{
	uint64_t held = analysis_held_bytes(g->an), at = dv->o.split_bytes;
	const struct an_result *ar;
	int64_t lo, hi;
	int rc;

	memset(k, 0, sizeof(*k));
	if (!at || g->noparts || !g->n || held < at || held < g->split_at)
		return TP_OK;
	g->split_at = held * 2;	/* unless it is cut */
	if ((rc = bounds_on(t, g, g->n - 1, &lo, &hi, err)))
		return rc;
	/* the chunks of one trace cut in the order it was written (kineto writes the host's events, then
	 * the GPU's: each chunk reaches back to where the file's section began) give no such instant */
	if (lo > hi || g->back > g->pfirst || (k->c = split_instant(g, lo)) == INT64_MIN) {
		metrics_part(METRICS_PART_UNCUT);
		return TP_OK;
	}
	if (!(k->a = analysis_new_like(g->an, g->acc, err)))
		return err->rc;
	analysis_set_part(k->a);
	if ((rc = replay_part(r, run, rank, g, k->a, INT64_MIN, k->c, err)) ||
	    (rc = analysis_finish(k->a, &ar, err)) || (!(k->b = analysis_new_after(k->a, err)) && (rc = err->rc)) ||
	    (rc = replay_part(r, run, rank, g, k->b, k->c, INT64_MAX, err)))
		cut_free(k);
	return rc;
}

/*
 * The cut k made (b, finished as bf): 1 when the parts meet, a absorbed and b now g->an; 0
 * when they do not, k dropped (the caller finishes g->an instead); else a failure, after which
 * g->acc may be half changed.
 */
static int cut_end(struct grown *g, struct cut *k, const struct analysis *bf, struct store_trace *t,
		   struct tp_errbuf *err)
{
	int rc = TP_OK;

	if (!analysis_follows(k->a, bf) || (rc = analysis_absorb(&g->acc, k->a, err)) == TP_ERR_UNSUPPORTED) {
		memset(err, 0, sizeof(*err));
		cut_free(k);
		metrics_part(METRICS_PART_CROSSED);
		return 0;
	}
	if (rc)
		return rc;
	analysis_free(g->an);
	g->an = k->b;
	k->b = NULL;
	for (; g->pfirst < g->n; g->pfirst++) {	/* of the artifacts, those that reach c are b's */
		int64_t lo, hi;
		if ((rc = bounds_on(t, g, g->pfirst, &lo, &hi, err)))
			return rc;
		if (lo <= hi && hi >= k->c)
			break;
	}
	g->floor = k->c;
	g->floor_n = g->n;
	g->split_at = 0;
	cut_free(k);
	metrics_part(METRICS_PART_CUT);
	return 1;
}


/* The artifacts' common base: the earliest of their bases (0: none). */
static int64_t base_of(const int64_t *bases, size_t n)
{
	int64_t base = INT64_MAX;

	for (size_t i = 0; i < n; i++)
		base = bases[i] < base ? bases[i] : base;
	return n ? base : 0;
}

/*
 * (run, rank)'s kept analysis when it replayed a prefix of the artifacts (ids, bases: n of them)
 * on their base, and with parts as noparts asks; else a new one. NULL when out of memory.
 */
static struct grown *grown_fitting(struct deriver *dv, uint64_t store, const char *run, int rank, const int64_t *ids,
				   const int64_t *bases, size_t n, int noparts)
{
	struct grown *g = grown_take(dv, store, run, rank);

	if (g && (!grown_fits(g, ids, bases, n, base_of(bases, n)) || (noparts && !g->noparts))) {
		grown_free(g);
		g = NULL;
	}
	if (!g && !(g = grown_new(store, run, rank, base_of(bases, n))))
		return NULL;
	g->noparts |= noparts;
	return g;
}

/*
 * Replay into g t's artifacts (ids, bases: n of them) from g->n on, up to the run's first
 * still being uploaded (*k: where g stops now); the ones after it, ready first, are left to
 * the derivation's fork, so that g stays a prefix of what the next derivation lists. On
 * failure g is gone: freed when it took part of an artifact or closed a part of it, else kept
 * again (epoch: grown_epoch() before they were listed).
 */
static int grow(struct deriver *dv, struct grown *g, struct store_trace *t, const int64_t *ids, const int64_t *bases,
		size_t n, uint64_t epoch, size_t *k, struct tp_errbuf *err)
{
	int64_t inflight, *ni, *nb;
	int rc;

	*k = g->n;
	if ((rc = store_trace_inflight(t, &inflight, err))) {
		grown_give(dv, g, epoch);	/* as it was */
		return rc;
	}
	while (*k < n && ids[*k] < inflight)
		++*k;
	store_trace_skip(t, g->n);
	for (size_t a = g->n; a < *k; a++) {	/* one at a time: each may begin a part */
		store_trace_limit(t, a + 1);
		if ((rc = cut_before(t, g, a, bases, err)) || (rc = replay(t, g->an, &g->nm, g->base, &g->sp, err))) {
			grown_free(g);
			return rc;
		}
	}
	/* what it has replayed now */
	ni = tp_malloc((*k + 1) * sizeof(*ni));
	nb = tp_malloc((*k + 1) * sizeof(*nb));
	if (!ni || !nb) {
		tp_free(ni);
		tp_free(nb);
		grown_free(g);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	memcpy(ni, ids, *k * sizeof(*ids));
	memcpy(nb, bases, *k * sizeof(*bases));
	tp_free(g->ids);
	tp_free(g->bases);
	g->ids = ni;
	g->bases = nb;
	g->n = *k;
	return TP_OK;
}

/* d is set up even on failure (derived_free it); PARTS_REBUILD: reset d, dropping g, and try again with noparts. */
static int compute_once(struct deriver *dv, struct store_reader *r, const char *run, int rank, uint64_t epoch, int noparts,
			struct derived *d, struct tp_errbuf *err)
{
	struct store_trace *t = NULL;
	const int64_t *ids, *bases;
	struct grown *g;
	int rc, got;

	memset(d, 0, sizeof(*d));
	d->dv = dv;
	d->epoch = epoch;
	if ((rc = store_trace_open(r, run, rank, INT64_MIN, INT64_MAX, &t, &got, err)))
		return rc;
	d->n = store_trace_artifacts(t, &ids, &bases);
	for (size_t i = 0; i < d->n; i++)
		if (!d->owner || ids[i] < d->owner)	/* the first: it stays while chunks join */
			d->owner = ids[i];
	d->base = base_of(bases, d->n);
	if (!(g = grown_fitting(dv, store_reader_serial(r), run, got, ids, bases, d->n, noparts))) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	metrics_replay(d->n - g->n, g->n);
	size_t k;
	if ((rc = grow(dv, g, t, ids, bases, d->n, d->epoch, &k, err)))
		goto out;
	/* g->an due to be cut in two (split()), when no artifact joins this derivation's fork alone */
	struct cut cut = { 0 };
	if (k == d->n && (rc = split(d->dv, r, t, run, got, g, &cut, err))) {
		grown_free(g);
		goto out;
	}
	d->g = g;
	if (k < d->n) {
		if (names_copy(&d->nm, &g->nm) ||
		    (g->sp.n && !(d->sp.v = tp_malloc(g->sp.n * sizeof(*d->sp.v))))) {
			names_free(&d->nm);
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto out;
		}
		if (g->sp.n)
			memcpy(d->sp.v, g->sp.v, g->sp.n * sizeof(*d->sp.v));
		d->sp.n = d->sp.cap = g->sp.n;
		d->own = 1;
	}
	for (;;) {	/* the part that grows (b, when g->an is cut), finished in a fork */
		struct analysis *grow = cut.b ? cut.b : g->an;
		/* what it holds past GROWN_HOLD goes to its files first: the fork copies the rest */
		if ((rc = analysis_hold(grow, GROWN_HOLD, err)) ||
		    !(d->an = analysis_fork(grow, d->own ? &d->nm : NULL, err))) {
			rc = rc ? rc : err->rc;
			cut_free(&cut);
			grown_free(g);	/* kept only when all went well */
			d->g = NULL;
			goto out;
		}
		store_trace_limit(t, d->n);
		if (d->own && (rc = replay(t, d->an, &d->nm, g->base, &d->sp, err)))
			goto out;
		if ((rc = analysis_finish(d->an, &d->ar, err))) {
			cut_free(&cut);
			goto out;
		}
		if (!cut.b || (rc = cut_end(g, &cut, d->an, t, err)) == 1)
			break;
		if (rc) {
			cut_free(&cut);
			grown_free(g);	/* its parts may be half changed */
			d->g = NULL;
			goto out;
		}
		analysis_free(d->an);	/* not cut: the part grows whole */
		d->an = NULL;
	}
	rc = TP_OK;
	if (note_ext(g, d->ar)) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	if (g->acc) {	/* the parts before this one's, and it */
		if ((rc = analysis_merge(g->acc, d->an, &d->merged, err))) {
			rc = rc == TP_ERR_UNSUPPORTED ? PARTS_REBUILD : rc;	/* compute() drops g with d */
			goto out;
		}
		d->ar = analysis_merged(d->merged);
		if (analysis_memory_went_on(d->merged) >= 0)
			metrics_memory_model(analysis_memory_went_on(d->merged));
		/* what the last write stored already: the parts' first collectives, memory points */
		if (g->mark_owner == d->owner) {
			d->same_colls = g->mark_colls;
			if (analysis_memory_follow(d->merged, g->mark)) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				goto out;
			}
		}
	}
	if (!(d->src = step_sources(d->ar, d->own ? &d->sp : &g->sp)))
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
out:
	store_trace_close(t);
	return rc;
}

/*
 * (run, rank)'s timeline from its stored events, into d (set up even on
 * failure: derived_free it). In parts while they meet; else, from its start,
 * as one analysis (analysis_merge()).
 */
static int compute(struct deriver *dv, struct store_reader *r, const char *run, int rank, uint64_t epoch, struct derived *d,
		   struct tp_errbuf *err)
{
	int rc = compute_once(dv, r, run, rank, epoch, !dv->o.parts, d, err);

	if (rc == PARTS_REBUILD) {
		memset(err, 0, sizeof(*err));
		derived_reset(d, 0);
		metrics_part(METRICS_PART_REBUILT);
		rc = compute_once(dv, r, run, rank, epoch, 1, d, err);
	}
	return rc;
}

static int write_rank(struct store_writer *w, const char *run, int rank, const struct derived *d,
		      struct tp_errbuf *err)
{
	struct store_final f = { .base_ns = d->base, .analysis = d->ar, .step_src = d->src, .same_colls = d->same_colls,
				 .str = names_get,
				 .str_payload = d->own ? (void *)&d->nm : (void *)&d->g->nm, .mem = d->ar ? d->ar->mem_series : NULL,
				 .nmem = d->ar ? d->ar->nmem_series : 0 };
	struct store_blocks c;
	int rc = store_rank_replace(w, run, rank, d->owner, &f, &c, err);

	if (!rc) {
		metrics_point_blocks(c.kept, c.written, c.unread);
		metrics_coll_rows(c.colls_kept, c.colls_written);
	}
	return rc;
}

/*
 * d's write committed (stored 1: alone, in a transaction of its own): the rank's next
 * derivation goes on from the memory points it stored; else from none.
 */
static void derived_stored(struct derived *d, int stored)
{
	if (!d->g)
		return;
	mem_mark_free(d->g->mark);
	d->g->mark = stored && d->merged ? analysis_memory_mark(d->merged) : NULL;
	d->g->mark_owner = d->owner;
	/* acc's collectives come first in the merge's, and stay as they are while acc grows */
	d->g->mark_colls = stored && d->merged && d->g->acc ? analysis_merged(d->g->acc)->ncolls : 0;
}

/* The run, or this rank of it, has nothing ready left: nothing to derive. */
static int nothing_left(int rc, struct tp_errbuf *err)
{
	if (rc == TP_ERR_NOTFOUND && (!strcmp(err->code, "run_not_found") || !strcmp(err->code, "rank_not_found"))) {
		memset(err, 0, sizeof(*err));
		return 1;
	}
	return 0;
}

int runrank_derive(struct deriver *dv, struct store_writer *w, const char *run, int rank, struct tp_errbuf *err)
{
	struct store_reader *r = store_writer_reader(w);
	struct derived d;
	int rc;

	if (!r)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if ((rc = store_tx_begin(w, err)))
		return rc;
	rc = compute(dv, r, run, rank, grown_epoch(dv), &d, err);	/* under the write lock: no removal meanwhile */
	if (!rc)
		rc = write_rank(w, run, rank, &d, err);
	if (!rc)
		rc = store_rank_settled(w, run, rank, -1, err);
	derived_stored(&d, 0);	/* maybe inside a transaction that is yet to commit (a DELETE's) */
	derived_free(&d);
	if (nothing_left(rc, err))
		rc = store_rank_settled(w, run, rank, -1, err);
	if (!rc)
		rc = store_tx_commit(w, err);
	else
		store_tx_rollback(w);
	return rc;
}

/* Derive one marked rank: replay from a read snapshot, write only when no trace joined meanwhile. */
static int settle_rank(struct deriver *dv, struct store *st, struct store_writer *w, const struct store_pending *p,
		       struct tp_errbuf *err)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int attempt = 0; attempt < 3; attempt++) {
		struct store_reader *r;
		struct derived d;
		int64_t seq = 0, now = 0;
		uint64_t epoch = grown_epoch(dv);	/* before the snapshot */
		int rc;

		memset(&d, 0, sizeof(d));
		if ((rc = store_reader_open(st, &r, err)))
			return rc;
		if (!(rc = store_read_snapshot(r, 1, err))) {
			if (!(rc = store_rank_seq(r, p->run, p->rank, &seq, err)))
				rc = compute(dv, r, p->run, p->rank, epoch, &d, err);
			store_read_snapshot(r, 0, NULL);
		}
		store_reader_close(r);
		if (!rc && !seq) {
			/* settled by a DELETE meanwhile */
			derived_free(&d);
			return TP_OK;
		}
		if (nothing_left(rc, err)) {
			derived_free(&d);
			if ((rc = store_tx_begin(w, err)))
				return rc;
			if ((rc = store_rank_settled(w, p->run, p->rank, -1, err)) || (rc = store_tx_commit(w, err)))
				store_tx_rollback(w);
			return rc;
		}
		if (rc) {
			derived_free(&d);
			return rc;
		}
		/* the write: what the snapshot saw, when it is still all there is */
		if (!(rc = store_tx_begin(w, err))) {
			struct store_reader *wr = store_writer_reader(w);
			if (!(rc = wr ? store_rank_seq(wr, p->run, p->rank, &now, err)
				      : tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")) && now == seq &&
			    !(rc = write_rank(w, p->run, p->rank, &d, err)) &&
			    !(rc = store_rank_settled(w, p->run, p->rank, seq, err))) {
				if (!(rc = store_tx_commit(w, err))) {
					metrics_derivation(runrank_since(&t0));
					derived_stored(&d, 1);
				}
				derived_free(&d);
				return rc;
			}
			store_tx_rollback(w);
		}
		derived_free(&d);
		if (rc)
			return rc;
	}
	/* traces kept joining: derive under the write lock */
	return runrank_derive(dv, w, p->run, p->rank, err);
}

/*
 * The runs being derived now, so that two reads of one run derive it once
 * (the second waits, then finds it done) and a read of another run waits
 * for nobody.
 */

static int settling_has(struct deriver *dv, const char *run)
{
	for (int i = 0; i < MAX_SETTLING; i++)
		if (dv->settling.run[i] && !strcmp(dv->settling.run[i], run))
			return 1;
	return 0;
}

/* Claim run (waiting while another thread derives it); -1 when out of memory. */
static int claim(struct deriver *dv, const char *run)
{
	char *copy = tp_strdup(run);
	int i;

	if (!copy)
		return -1;
	pthread_mutex_lock(&dv->settling.mu);
	for (;;) {
		for (i = 0; i < MAX_SETTLING && dv->settling.run[i]; i++)
			;
		if (!settling_has(dv, run) && i < MAX_SETTLING)
			break;
		pthread_cond_wait(&dv->settling.done, &dv->settling.mu);
	}
	dv->settling.run[i] = copy;
	pthread_mutex_unlock(&dv->settling.mu);
	return 0;
}

static void release(struct deriver *dv, const char *run)
{
	pthread_mutex_lock(&dv->settling.mu);
	for (int i = 0; i < MAX_SETTLING; i++)
		if (dv->settling.run[i] && !strcmp(dv->settling.run[i], run)) {
			tp_free(dv->settling.run[i]);
			dv->settling.run[i] = NULL;
			break;
		}
	pthread_cond_broadcast(&dv->settling.done);
	pthread_mutex_unlock(&dv->settling.mu);
}

int runrank_pending_of(struct store *st, const char *run, struct store_pending **p, size_t *n, struct tp_errbuf *err)
{
	struct store_reader *r;
	int rc;

	*p = NULL;
	*n = 0;
	if ((rc = store_reader_open(st, &r, err)))
		return rc;
	rc = store_rank_pending(r, run, p, n, err);
	store_reader_close(r);
	return rc;
}

int runrank_settle(struct deriver *dv, struct store *st, const char *run, struct tp_errbuf *err)
{
	struct store_pending *all = NULL, *p = NULL;
	struct store_writer *w = NULL;
	size_t nall = 0, n = 0, i, k;
	int rc;

	if (!store_maybe_pending(st))
		return TP_OK;
	if ((rc = runrank_pending_of(st, run, &all, &nall, err)) || !nall)
		return rc;
	for (i = 0; i < nall && !rc; i = k) {
		for (k = i + 1; k < nall && !strcmp(all[k].run, all[i].run); k++)
			;
		if (claim(dv, all[i].run)) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			break;
		}
		/* again, now that it is ours: a read before us may have derived it */
		if (!(rc = runrank_pending_of(st, all[i].run, &p, &n, err)) && n && !w)
			rc = store_writer_open(st, &w, err);
		for (size_t j = 0; j < n && !rc; j++)
			rc = settle_rank(dv, st, w, &p[j], err);
		store_pending_free(p, n);
		p = NULL;
		n = 0;
		release(dv, all[i].run);
	}
	store_writer_close(w);
	store_pending_free(all, nall);
	return rc;
}

/*
 * Growing ahead: the artifacts that joined (run, rank) since it was last
 * derived or grown, replayed into its kept analysis (struct grown) from a
 * read snapshot, and not finished: nothing is written and the rank stays
 * marked. An upload's background derivation does it while it waits for the
 * run to go quiet (schedule.c), so the chunks of a run are replayed one by
 * one as they land, on the core their uploads leave idle, and the read that
 * derives the rank has only them to finish: 20 chunks of the V100 fixture
 * spent 33-35 ms of that read's 81-94 ms replaying them. Left to its read:
 * a rank with no analysis kept and no slot for one (a free one, or one
 * unused for GROWN_YIELD_S: growing would drop another rank's that may be
 * read soon; the kept bytes' bound, --derive-keep, still drops the oldest
 * as after a derivation); one with none kept past its first two
 * traces (dropped, too large to keep, --derive-keep 0), which would be
 * replayed whole at each upload; and a failure: the read replays what is
 * missing.
 */
static int grow_rank(struct deriver *dv, struct store *st, const char *run, int rank, struct tp_errbuf *err)
{
	struct store_reader *r;
	struct store_trace *t;
	const int64_t *ids, *bases;
	struct grown *g;
	uint64_t epoch = grown_epoch(dv);	/* before the snapshot */
	size_t n, k, had;
	int rc, got;

	if (!grown_room(dv, store_serial(st), run, rank))
		return TP_OK;
	if ((rc = store_reader_open(st, &r, err)))
		return rc;
	if ((rc = store_read_snapshot(r, 1, err)))
		goto close;
	if ((rc = store_trace_open(r, run, rank, INT64_MIN, INT64_MAX, &t, &got, err))) {
		rc = rc == TP_ERR_NOTFOUND ? TP_OK : rc;
		goto snap;
	}
	n = store_trace_artifacts(t, &ids, &bases);
	if (!(g = grown_fitting(dv, store_reader_serial(r), run, got, ids, bases, n, !dv->o.parts))) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	} else if (!g->n && n > 2) {
		grown_free(g);	/* none kept past its first chunks: the read makes one (above) */
	} else if (had = g->n, !(rc = grow(dv, g, t, ids, bases, n, epoch, &k, err))) {
		metrics_replay(k - had, 0);
		if ((rc = analysis_hold(g->an, GROWN_HOLD, err)))
			grown_free(g);	/* it may be half held */
		else
			grown_give(dv, g, epoch);
	}
	store_trace_close(t);
snap:
	store_read_snapshot(r, 0, NULL);
close:
	store_reader_close(r);
	return rc;
}

void runrank_grow(struct deriver *dv, struct store *st, const char *run, const int *ranks, size_t n)
{
	struct tp_errbuf err = { 0 };

	if (!*run || claim(dv, run))
		return;
	for (size_t i = 0; i < n && !grow_rank(dv, st, run, ranks[i], &err); i++)
		;
	release(dv, run);
}
