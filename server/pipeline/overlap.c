/*
 * overlap.c: refuse a trace upload that repeats events of its rank
 * (overlap.h says what and why).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "event.h"
#include "pipeline/overlap.h"
#include "store/evpack.h"

/* Fingerprints in an open-addressed table: 0 marks an empty slot (a hash of 0 is stored as 1). */
struct fpset {
	uint64_t *v;
	size_t n, cap;
};

static int fp_put(struct fpset *s, uint64_t h)
{
	size_t i = (size_t)(h ^ h >> 29) & (s->cap - 1);

	while (s->v[i] && s->v[i] != h)
		i = (i + 1) & (s->cap - 1);
	if (s->v[i])
		return 0;
	s->v[i] = h;
	return 1;
}

/* A table of cap slots, zeroed: from 2 MiB on in huge pages (tp_map), smaller ones from the heap. */
#define FP_MAPPED (TP_HUGE_PAGE / sizeof(uint64_t))
static uint64_t *fp_table(size_t cap)
{
	return cap >= FP_MAPPED ? tp_map(cap * sizeof(uint64_t)) : tp_calloc(cap, sizeof(uint64_t));
}

static void fp_free(struct fpset *s)
{
	if (s->cap >= FP_MAPPED)
		tp_unmap(s->v, s->cap * sizeof(uint64_t));
	else
		tp_free(s->v);
	s->v = NULL;
}

/* Room for n fingerprints in all, at most half full: -1 when out of memory (s as it was). */
static int fp_reserve(struct fpset *s, size_t n)
{
	size_t cap = s->cap ? s->cap : 1024;

	while (n * 2 > cap)
		cap *= 2;
	if (cap == s->cap)
		return 0;
	struct fpset g = { fp_table(cap), s->n, cap };
	if (!g.v)
		return -1;
	for (size_t i = 0; i < s->cap; i++)
		if (s->v[i])
			fp_put(&g, s->v[i]);
	fp_free(s);
	*s = g;
	return 0;
}

static int fp_add(struct fpset *s, uint64_t h)
{
	h = h ? h : 1;
	if (fp_reserve(s, s->n + 1))
		return -1;
	s->n += (size_t)fp_put(s, h);
	return 0;
}

/* How far ahead of their lookups fingerprints' slots are fetched (cached_hit, keep) */
#define FP_AHEAD 8

/* Start fetching the slot where a search for h in s begins (w: to write it). */
static void fp_fetch(const struct fpset *s, uint64_t h, int w)
{
	const uint64_t *slot;

	h = h ? h : 1;
	if (!s->cap)
		return;
	slot = &s->v[(size_t)(h ^ h >> 29) & (s->cap - 1)];
	if (w)
		__builtin_prefetch(slot, 1);
	else
		__builtin_prefetch(slot, 0);
}

static int fp_has(const struct fpset *s, uint64_t h)
{
	h = h ? h : 1;
	if (!s->cap)
		return 0;
	for (size_t i = (size_t)(h ^ h >> 29) & (s->cap - 1); s->v[i]; i = (i + 1) & (s->cap - 1))
		if (s->v[i] == h)
			return 1;
	return 0;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v * 0x9e3779b97f4a7c15ULL;
	h = (h << 27 | h >> 37) * 0xff51afd7ed558ccdULL;
	return h ^ h >> 31;
}

static uint64_t mix_text(uint64_t h, const char *s)
{
	uint64_t x = 0xcbf29ce484222325ULL;

	for (; s && *s; s++)
		x = (x ^ (uint8_t)*s) * 0x100000001b3ULL;
	return mix(h, x);
}

/*
 * String ids by their text, each hashed once per artifact (an event's name is read far more often
 * than it differs); ids below TRACE_S_KNOWN_END are the same in every artifact.
 */
struct names_h {
	overlap_str_fn str;
	void *payload;
	uint64_t *h;		/* by id; 0: not hashed yet */
	size_t n;
};

static void names_h_reset(struct names_h *m, overlap_str_fn str, void *payload)
{
	m->str = str;
	m->payload = payload;
	if (m->n)
		memset(m->h, 0, m->n * sizeof(*m->h));
}

/* A string id's hash: of its text, hashed once per artifact; of the id when absent or known. */
static uint64_t str_h(uint64_t id, struct names_h *m)
{
	uint64_t x;

	if (!id || id < TRACE_S_KNOWN_END || id > UINT32_MAX)
		return mix(1, id);
	if (id < m->n && m->h[id])
		return m->h[id];
	x = mix_text(2, m->str(m->payload, (uint32_t)id));
	x = x ? x : 1;
	if (id >= m->n) {
		size_t n = m->n ? m->n : 1024;
		uint64_t *nh;
		while (n <= id)
			n *= 2;
		if (!(nh = tp_realloc(m->h, n * sizeof(*nh))))
			return x;	/* not kept: hashed again next time */
		memset(nh + m->n, 0, (n - m->n) * sizeof(*nh));
		m->h = nh;
		m->n = n;
	}
	m->h[id] = x;
	return x;
}

static uint64_t bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/* The collectives' fields that hold string ids: fp_rest hashes their text, not the id. */
#define STRING_INTS ((uint32_t)(TH_COLL | TH_PG | TH_DTYPE))

/*
 * Everything the store keeps of an event but its ts; its strings by their text. Only the fields
 * its have bits name are read (the store keeps no others: evpack.c), so that an event as parsed
 * (struct overlap_prints) hashes as the same event read back from the store. The values, in an
 * order have says, go round four hashes at once: one chain of mix() through every field, absent
 * ones as 0, was most of the parser's time in overlap_prints_add().
 */
static uint64_t fp_rest(const struct tp_event *e, struct names_h *m)
{
	const uint32_t hv = e->have;
	uint64_t v[40], h0 = 0x7472616365ULL, h1 = 0x6576656e74ULL, h2 = 0x70726e74ULL, h3 = 0x72657374ULL;
	size_t k = 0, i = 0;

	v[k++] = (uint64_t)(uint8_t)e->ph << 32 | hv;
	v[k++] = str_h(e->name, m);
	v[k++] = str_h(e->cat, m);
	v[k++] = str_h(e->arg, m);
	if (hv & TH_PID)
		v[k++] = e->pid_s ? mix_text(3, e->pid_s) : (uint64_t)e->pid;
	if (hv & TH_TID)
		v[k++] = e->tid_s ? mix_text(3, e->tid_s) : (uint64_t)e->tid;
	for (uint32_t b = hv & ~(uint32_t)(TH_TS | TH_PID | TH_TID | TH_BPS | TH_OCC); b; b &= b - 1) {
		unsigned f = (unsigned)__builtin_ctz(b);
		int64_t x;
		if (!evpack_int_off[f])
			continue;	/* a bit no field has */
		memcpy(&x, (const char *)e + evpack_int_off[f], sizeof(x));
		v[k++] = (1u << f) & STRING_INTS ? str_h((uint64_t)x, m) : (uint64_t)x;
	}
	if (hv & TH_BPS)
		v[k++] = bits(e->blocks_per_sm);
	if (hv & TH_OCC)
		v[k++] = bits(e->occupancy);
	for (; i + 4 <= k; i += 4) {
		h0 = mix(h0, v[i]);
		h1 = mix(h1, v[i + 1]);
		h2 = mix(h2, v[i + 2]);
		h3 = mix(h3, v[i + 3]);
	}
	for (; i < k; i++)
		h0 = mix(h0, v[i]);
	return mix(mix(mix(h0, h1), h2), h3);
}

/* The event's fingerprint with ts on the common base. */
static uint64_t fingerprint(const struct tp_event *e, int64_t ts, struct names_h *m)
{
	return mix(fp_rest(e, m), (uint64_t)ts);
}

/* Events with a time, but not metadata ('M': process and thread names, which a file may repeat
 * and chunks may each carry; the analysis takes them once whatever their number). */
static int timed(const struct tp_event *e)
{
	return (e->have & TH_TS) && e->ph != 'M';
}

/* What a repeated event has the same of, read without decoding it: the key of struct check's times
 * (time_rest's, then ts). */
static uint64_t time_rest(char ph, uint32_t have, int64_t dur)
{
	return mix(mix(mix(0, (uint8_t)ph), have), (uint64_t)dur);
}

static uint64_t time_key(char ph, uint32_t have, int64_t ts, int64_t dur)
{
	return mix(time_rest(ph, have, dur), (uint64_t)ts);
}

static const char *trace_text(void *payload, uint32_t id)
{
	return store_trace_string(payload, id);
}

/* ---- an upload's events, fingerprinted as they are parsed ---- */

#define PRINTS_MAX (1u << 20)	/* events: past it (24 MiB), the upload is read back from the store instead */
#define KEEP_MAX (64u << 10)	/* events: a larger upload's are not kept (a whole trace: chunks are smaller) */

struct print {
	uint64_t rest, times;	/* fp_rest's and time_rest's */
	int64_t ts;		/* as written */
};

struct overlap_prints {
	struct overlap_cache *oc;	/* where they are kept once the upload is committed (NULL: nowhere) */
	size_t max;			/* events taken at most */
	uint64_t store;			/* the upload's store (store_serial) */
	uint64_t forgets;		/* oc's overlap_cache_forget()s when they were begun */
	struct names_h nh;
	struct print *v;
	size_t n, cap;
	/* the commit they are kept for (overlap_prints_note; run NULL: none) */
	char *run;
	int rank;
	int64_t artifact, base_ns, lo, hi;
};

static void cache_counts(struct overlap_cache *oc, size_t *prints, uint64_t *forgets);

struct overlap_prints *overlap_prints_new(struct overlap_cache *oc, uint64_t store, int checked, overlap_str_fn str,
					  void *payload)
{
	struct overlap_prints *p = tp_calloc(1, sizeof(*p));
	size_t held;

	if (!p)
		return NULL;
	p->oc = oc;
	p->max = checked ? PRINTS_MAX : KEEP_MAX;
	p->store = store;
	cache_counts(oc, &held, &p->forgets);
	names_h_reset(&p->nh, str, payload);
	return p;
}

void overlap_prints_free(struct overlap_prints *p)
{
	if (!p)
		return;
	tp_free(p->v);
	tp_free(p->nh.h);
	tp_free(p->run);
	tp_free(p);
}

int overlap_prints_add(struct overlap_prints *p, const struct tp_event *e)
{
	if (!timed(e))
		return 0;
	if (p->n >= p->max || tp_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return -1;
	p->v[p->n++] = (struct print){ fp_rest(e, &p->nh), time_rest(e->ph, e->have, e->have & TH_DUR ? e->dur_ns : 0),
				       e->ts_ns };
	return 0;
}

/* ---- the fingerprints of the ranks checked last ---- */

#define CACHE_RANKS 8
#define CACHE_PRINTS (1u << 20)	/* fingerprints held in all: 16 MiB of full segments, a last one of 2 MiB a rank */
/*
 * A rank's fingerprints are held in segments of SEG_PRINTS (a table of 2 MiB at most, in huge pages:
 * fp_table), filled one after another and never rehashed once full: one table for the whole rank was
 * rehashed each time it doubled, 17-30 ms in one call for the 20 chunks' 216 K
 * (bench/results/overlap_segments-20261130.txt).
 */
#define SEG_PRINTS (128u << 10)
#define CACHE_IDLE_S 600.0	/* a rank neither checked nor added to for this long is dropped at the next call */

struct cached_rank {
	uint64_t store;		/* store_serial */
	char *run;		/* NULL: a free slot */
	int rank;
	/*
	 * The rank's artifacts committed since the slot was taken: each with its timed events' span
	 * on the common base (lo > hi: none) and whether segs hold every one of their fingerprints
	 * (printed). An upload need not read one that is printed, nor one whose span misses its own.
	 */
	struct cached_art { int64_t id, base, lo, hi; int printed; } *arts;
	size_t narts, caparts;
	/* the fingerprints, each segment with the span of their times on the common base */
	struct fpseg { struct fpset set; int64_t lo, hi; } *segs;
	size_t nsegs, capsegs;
	size_t nprints;		/* in all segments */
	uint64_t used;		/* when last checked or added to (overlap_cache.tick) */
	double at;		/* and then, s (CLOCK_MONOTONIC) */
};

struct overlap_cache {
	pthread_mutex_t mu;
	struct cached_rank r[CACHE_RANKS];
	uint64_t tick;
	size_t prints;		/* the fingerprints held, all ranks' */
	uint64_t forgets;	/* overlap_cache_forget()s so far */
};

struct overlap_cache *overlap_cache_new(void)
{
	struct overlap_cache *oc = tp_calloc(1, sizeof(*oc));

	if (oc)
		pthread_mutex_init(&oc->mu, NULL);
	return oc;
}

/* Empty the slot (oc->mu held). */
static void cached_drop(struct overlap_cache *oc, struct cached_rank *cr)
{
	oc->prints -= cr->nprints;
	tp_free(cr->run);
	tp_free(cr->arts);
	for (size_t i = 0; i < cr->nsegs; i++)
		fp_free(&cr->segs[i].set);
	tp_free(cr->segs);
	memset(cr, 0, sizeof(*cr));
}

void overlap_cache_free(struct overlap_cache *oc)
{
	if (!oc)
		return;
	overlap_cache_forget(oc, 0, NULL);
	pthread_mutex_destroy(&oc->mu);
	tp_free(oc);
}

void overlap_cache_forget(struct overlap_cache *oc, uint64_t store, const char *run)
{
	if (!oc)
		return;
	pthread_mutex_lock(&oc->mu);
	oc->forgets++;
	for (int i = 0; i < CACHE_RANKS; i++)
		if (oc->r[i].run && (!store || oc->r[i].store == store) && (!run || !strcmp(oc->r[i].run, run)))
			cached_drop(oc, &oc->r[i]);
	pthread_mutex_unlock(&oc->mu);
}

/* oc's prints held and overlap_cache_forget()s so far, under its lock (NULL: 0 and 0) */
static void cache_counts(struct overlap_cache *oc, size_t *prints, uint64_t *forgets)
{
	*prints = 0;
	*forgets = 0;
	if (oc) {
		pthread_mutex_lock(&oc->mu);
		*prints = oc->prints;
		*forgets = oc->forgets;
		pthread_mutex_unlock(&oc->mu);
	}
}

size_t overlap_cache_held(struct overlap_cache *oc)
{
	size_t n;
	uint64_t f;

	cache_counts(oc, &n, &f);
	return n;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* cr was checked or added to now (oc->mu held). */
static void cached_used(struct overlap_cache *oc, struct cached_rank *cr)
{
	cr->used = ++oc->tick;
	cr->at = now_s();
}

/* The slot of store's run's rank, or NULL; the ranks idle for CACHE_IDLE_S dropped first (oc->mu held) */
static struct cached_rank *cached_find(struct overlap_cache *oc, uint64_t store, const char *run, int rank)
{
	double now = now_s();

	for (int i = 0; i < CACHE_RANKS; i++)
		if (oc->r[i].run && now - oc->r[i].at > CACHE_IDLE_S)
			cached_drop(oc, &oc->r[i]);
	for (int i = 0; i < CACHE_RANKS; i++)
		if (oc->r[i].run && oc->r[i].store == store && oc->r[i].rank == rank && !strcmp(oc->r[i].run, run))
			return &oc->r[i];
	return NULL;
}

/* The slot least recently used but keep (oc->mu held). */
static struct cached_rank *cached_lru(struct overlap_cache *oc, const struct cached_rank *keep)
{
	struct cached_rank *lru = NULL;

	for (int i = 0; i < CACHE_RANKS; i++)
		if (&oc->r[i] != keep && (!lru || !oc->r[i].run || (lru->run && oc->r[i].used < lru->used)))
			lru = &oc->r[i];
	return lru;
}

int overlap_prints_note(struct overlap_prints *p, const char *run, int rank, int64_t artifact, int64_t base_ns,
			int64_t lo, int64_t hi)
{
	if (!p->oc)
		return 0;
	tp_free(p->run);
	if (!(p->run = tp_strdup(run)))
		return -1;
	p->rank = rank;
	p->artifact = artifact;
	p->base_ns = base_ns;
	p->lo = lo;
	p->hi = hi;
	/* the parser's strings are gone by then: only the prints are kept */
	tp_free(p->nh.h);
	p->nh.h = NULL;
	return 0;
}

/*
 * h, of a print at ts on the common base, into cr's last segment, or a new one when it is full;
 * left: the prints still to come, this one's too. A rank's first upload makes a table for its own
 * prints (up to SEG_PRINTS); once a second has come the rank grows by uploads, and its segments
 * are made whole (2 MiB) at once: doubled as they filled, each doubling rehashed what the table
 * held. -1 when out of memory.
 */
static int seg_add(struct cached_rank *cr, uint64_t h, int64_t ts, size_t left)
{
	struct fpseg *g = cr->nsegs ? &cr->segs[cr->nsegs - 1] : NULL;
	size_t before, want = cr->narts > 1 || left > SEG_PRINTS ? SEG_PRINTS : left;

	if (!g || g->set.n >= SEG_PRINTS) {
		if (tp_grow((void **)&cr->segs, &cr->capsegs, cr->nsegs + 1, sizeof(*cr->segs)))
			return -1;
		g = &cr->segs[cr->nsegs];
		*g = (struct fpseg){ { NULL, 0, 0 }, INT64_MAX, INT64_MIN };
		if (fp_reserve(&g->set, want))
			return -1;
		cr->nsegs++;
	} else if ((g->set.n + 1) * 2 > g->set.cap && fp_reserve(&g->set, want > g->set.n + 1 ? want : g->set.n + 1)) {
		return -1;
	}
	before = g->set.n;
	if (fp_add(&g->set, h))
		return -1;
	cr->nprints += g->set.n - before;
	g->lo = ts < g->lo ? ts : g->lo;
	g->hi = ts > g->hi ? ts : g->hi;
	return 0;
}

/* p's noted commit into its rank's (oc->mu held) */
static void keep(struct overlap_cache *oc, const struct overlap_prints *p)
{
	const char *run = p->run;
	int rank = p->rank;
	int64_t base_ns = p->base_ns, lo = p->lo, hi = p->hi;
	struct cached_rank *cr, *lru;
	struct cached_art *a;
	size_t before;

	if (!(cr = cached_find(oc, p->store, run, rank))) {
		cr = cached_lru(oc, NULL);
		if (cr->run)
			cached_drop(oc, cr);
		if (!(cr->run = tp_strdup(run)))
			return;
		cr->store = p->store;
		cr->rank = rank;
	}
	cached_used(oc, cr);
	if (tp_grow((void **)&cr->arts, &cr->caparts, cr->narts + 1, sizeof(*cr->arts))) {
		cached_drop(oc, cr);
		return;
	}
	a = &cr->arts[cr->narts++];
	*a = (struct cached_art){ p->artifact, base_ns, lo <= hi ? tp_sat_add(lo, base_ns) : 1,
				  lo <= hi ? tp_sat_add(hi, base_ns) : 0, 0 };
	/* its fingerprints, unless a whole trace's (too many) or the rank's own are too many already */
	if (p->n > KEEP_MAX)
		return;
	while (oc->prints + p->n > CACHE_PRINTS && (lru = cached_lru(oc, cr)) && lru->run)
		cached_drop(oc, lru);
	if (oc->prints + p->n > CACHE_PRINTS)
		return;
	before = cr->nprints;
	for (size_t i = 0; i < p->n; i++) {
		int64_t ts = tp_sat_add(p->v[i].ts, base_ns);
		if (i + FP_AHEAD < p->n && cr->nsegs) {	/* the slot of a print to come, in the last segment */
			int64_t ta = tp_sat_add(p->v[i + FP_AHEAD].ts, base_ns);
			fp_fetch(&cr->segs[cr->nsegs - 1].set, mix(p->v[i + FP_AHEAD].rest, (uint64_t)ta), 1);
		}
		if (seg_add(cr, mix(p->v[i].rest, (uint64_t)ts), ts, p->n - i)) {
			/* what it holds of this artifact is no harm (a fingerprint found is checked in the store) */
			oc->prints += cr->nprints - before;
			return;
		}
	}
	oc->prints += cr->nprints - before;
	a->printed = 1;
}

void overlap_prints_done(struct overlap_prints *p)
{
	struct overlap_cache *oc = p ? p->oc : NULL;

	if (oc && p->run) {
		pthread_mutex_lock(&oc->mu);
		/* a removal since they were begun may give the ids again: what they say of one is not kept */
		if (oc->forgets == p->forgets)
			keep(oc, p);
		pthread_mutex_unlock(&oc->mu);
	}
	overlap_prints_free(p);
}

/*
 * The upload's events (read back once, and only when another trace of the rank has an event in
 * their span of time): their fingerprints and time keys (time_key); then the rank's other events
 * in that span, each looked up by its time key first, and hashed whole only when an upload's
 * event has it.
 */
struct check {
	struct fpset set, times;
	int built;
	int64_t base, lo, hi;	/* lo, hi: on the common base */
	overlap_str_fn str;	/* the upload's strings */
	void *payload;
	const struct overlap_prints *prints;	/* the upload's fingerprints, when they were taken as it was parsed */
	struct names_h nh;	/* of the artifact whose events are being read */
	int64_t nh_of;
	struct store_reader *r;	/* where the upload's events are read back from, and their artifact */
	int64_t artifact;
	struct tp_errbuf *err;
	uint64_t dups, timed;
	int64_t first_artifact, first_ts;	/* the first repeated event: where, when, its phase and name */
	char first_ph;
	char first_name[100];
};

static void copy_name(char *out, size_t cap, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n >= cap) {
		n = cap - 1;
		while (n && ((uint8_t)s[n] & 0xc0) == 0x80)	/* not inside a UTF-8 sequence */
			n--;
	}
	memcpy(out, s ? s : "", n);
	out[n] = 0;
}

static int upload_block(void *payload, const struct tp_event *ev, size_t n)
{
	struct check *c = payload;

	for (size_t i = 0; i < n; i++) {
		int64_t ts;
		if (!timed(&ev[i]))
			continue;
		c->timed++;
		ts = tp_sat_add(ev[i].ts_ns, c->base);
		if (fp_add(&c->set, fingerprint(&ev[i], ts, &c->nh)) ||
		    fp_add(&c->times, time_key(ev[i].ph, ev[i].have, ts, ev[i].dur_ns)))
			return TP_ERR_NOMEM;
	}
	return 0;
}

/* t's strings when the block store_trace_next gave last is of another artifact than the last's. */
static void names_of(struct check *c, struct store_trace *t)
{
	if (store_trace_artifact(t) != c->nh_of) {
		c->nh_of = store_trace_artifact(t);
		names_h_reset(&c->nh, trace_text, t);
	}
}

/* The upload's fingerprints and times, when first needed. */
static int build(struct store_reader *r, int64_t artifact, struct check *c, struct tp_errbuf *err)
{
	int rc;

	c->built = 1;
	if (c->prints) {
		if (fp_reserve(&c->set, c->prints->n) || fp_reserve(&c->times, c->prints->n))
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		for (size_t i = 0; i < c->prints->n; i++) {
			const struct print *p = &c->prints->v[i];
			int64_t ts = tp_sat_add(p->ts, c->base);
			if (fp_add(&c->set, mix(p->rest, (uint64_t)ts)) || fp_add(&c->times, mix(p->times, (uint64_t)ts)))
				return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		c->timed = c->prints->n;
		return TP_OK;
	}
	names_h_reset(&c->nh, c->str, c->payload);
	c->nh_of = 0;
	if ((rc = store_events_each(r, artifact, STORE_EVENTS, upload_block, c, err)) ||
	    (rc = store_events_each(r, artifact, STORE_MEMORY_EVENTS, upload_block, c, err)))
		return rc == TP_ERR_NOMEM ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : rc;
	return TP_OK;
}

/*
 * store_trace_prefilter's: a block of another artifact is decoded only when one of its events has
 * a time in the upload's span and a phase, fields, time and length among the upload's; most have
 * none. Chunks cut in file order, each a mix of a step's CPU ops, kernels and flows, meet in time,
 * and a flow's ends have the times of its ops: of the 81 chunks of 1 MiB of a 64 MiB trace
 * (bench/make_big_trace.py), the check read 3.7 M events of the others, 1.0 M of them in blocks
 * with a time of the upload's and 61 K in blocks with a phase, time and length of it.
 */
static int keep_block(void *payload, const struct evpack_time *ev, size_t m, int64_t base)
{
	struct check *c = payload;
	int rc;

	for (size_t i = 0; i < m; i++) {
		int64_t t = tp_sat_add(ev[i].ts_ns, base);
		if (ev[i].ph == 'M' || t < c->lo || t > c->hi)
			continue;
		if (!c->built && (rc = build(c->r, c->artifact, c, c->err)))
			return rc;
		if (fp_has(&c->times, time_key(ev[i].ph, ev[i].have, t, ev[i].dur_ns)))
			return 1;
	}
	return 0;
}

/* The events of the rank's artifacts [from, to) that start in [c->lo, c->hi], each looked up. */
static int scan(struct store_reader *r, const char *run, int rank, int64_t artifact, struct check *c, size_t from,
		size_t to, struct tp_errbuf *err)
{
	struct store_trace *t;
	struct tp_event *ev;
	size_t n;
	int64_t b;
	int rc, got;

	if ((rc = store_trace_open(r, run, rank, c->lo, tp_sat_add(c->hi, 1), &t, &got, err)))
		return rc;
	store_trace_skip(t, from);
	store_trace_limit(t, to);
	store_trace_starts(t);
	store_trace_prefilter(t, keep_block, c);
	while ((rc = store_trace_next(t, &ev, &n, &b, err)) == 1) {
		for (size_t i = 0; i < n; i++) {
			int64_t ts = tp_sat_add(ev[i].ts_ns, b);
			if (!timed(&ev[i]) || ts < c->lo || ts > c->hi)
				continue;
			if (!c->built && (rc = build(r, artifact, c, err)))
				break;
			if (!fp_has(&c->times, time_key(ev[i].ph, ev[i].have, ts, ev[i].dur_ns)))
				continue;
			names_of(c, t);
			if (!fp_has(&c->set, fingerprint(&ev[i], ts, &c->nh)) || c->dups++)
				continue;
			c->first_artifact = store_trace_artifact(t);
			c->first_ts = ts;
			c->first_ph = ev[i].ph;
			copy_name(c->first_name, sizeof(c->first_name), store_trace_string(t, ev[i].name));
		}
		if (rc < 0)
			break;
	}
	store_trace_close(t);
	return rc < 0 ? rc : TP_OK;
}

/*
 * Whether some fingerprint of the upload is one of cr's (oc->mu held). The segments' tables are
 * larger than the caches: each print's slots are fetched FP_AHEAD prints before they are read
 * (20 chunks of 2 MiB: 0.26-0.29 ms a check, not 0.34-0.44).
 */
static int cached_hit(const struct cached_rank *cr, const struct overlap_prints *p, int64_t base)
{
	uint64_t hs[FP_AHEAD];
	int64_t ts[FP_AHEAD];

	for (size_t i = 0; i < p->n + FP_AHEAD; i++) {
		size_t k = i % FP_AHEAD;
		if (i >= FP_AHEAD) {	/* print i - FP_AHEAD, fetched */
			for (size_t j = 0; j < cr->nsegs; j++)
				if (ts[k] >= cr->segs[j].lo && ts[k] <= cr->segs[j].hi && fp_has(&cr->segs[j].set, hs[k]))
					return 1;
		}
		if (i < p->n) {
			ts[k] = tp_sat_add(p->v[i].ts, base);
			hs[k] = mix(p->v[i].rest, (uint64_t)ts[k]);
			for (size_t j = 0; j < cr->nsegs; j++)
				if (ts[k] >= cr->segs[j].lo && ts[k] <= cr->segs[j].hi)
					fp_fetch(&cr->segs[j].set, hs[k], 0);
		}
	}
	return 0;
}

/*
 * Mark in cov the rank's artifacts (ids, bases: n of them, by id; k: the upload's) that oc holds
 * every fingerprint of, when the upload repeats none of them, and those whose span misses the
 * upload's, [wlo, whi] on the common base. oc's are dropped when one of them is no longer the
 * rank's (removed: its id may be given again), and cov left empty when the upload repeats one:
 * the store says which, and how many.
 */
static void cached_cover(const char *run, int rank, const int64_t *ids, const int64_t *bases, size_t n, size_t k,
			 const struct overlap_prints *p, int64_t base, int64_t wlo, int64_t whi, uint8_t *cov)
{
	struct overlap_cache *oc = p->oc;
	struct cached_rank *cr;

	pthread_mutex_lock(&oc->mu);
	if ((cr = cached_find(oc, p->store, run, rank))) {
		cached_used(oc, cr);
		for (size_t j = 0; cr && j < cr->narts; j++) {
			size_t lo = 0, hi = n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (ids[mid] < cr->arts[j].id)
					lo = mid + 1;
				else
					hi = mid;
			}
			const struct cached_art *a = &cr->arts[j];
			if (lo < n && lo != k && ids[lo] == a->id && bases[lo] == a->base) {
				cov[lo] = a->printed || a->lo > a->hi || a->hi < wlo || a->lo > whi;
			} else {
				cached_drop(oc, cr);
				cr = NULL;
			}
		}
		if (!cr || cached_hit(cr, p, base))
			memset(cov, 0, n);
	}
	pthread_mutex_unlock(&oc->mu);
}

int overlap_check(struct store_writer *w, const char *run, int rank, int64_t artifact, int64_t base_ns,
		  int64_t lo, int64_t hi, overlap_str_fn str, void *payload, const struct overlap_prints *prints,
		  struct tp_errbuf *err)
{
	struct store_reader *r = store_writer_reader(w);
	struct check c = { .base = base_ns, .str = str, .payload = payload, .prints = prints, .r = r,
			   .artifact = artifact, .err = err };
	struct store_trace *t;
	const int64_t *ids, *bases;
	uint8_t *cov = NULL;
	size_t n, k, a, b;
	int rc, got;

	if (lo > hi)
		return TP_OK;
	c.lo = tp_sat_add(lo, base_ns);
	c.hi = tp_sat_add(hi, base_ns);
	/* the rank's traces: every one but this upload's (its own blocks are not read) */
	if ((rc = store_trace_open(r, run, rank, c.lo, tp_sat_add(c.hi, 1), &t, &got, err)))
		return rc == TP_ERR_NOTFOUND ? TP_OK : rc;
	n = store_trace_artifacts(t, &ids, &bases);
	for (k = 0; k < n && ids[k] != artifact; k++)
		;
	/* the ones whose fingerprints the server holds need not be read (none of them repeated) */
	if (prints && prints->oc && n && (cov = tp_calloc(n, 1)))
		cached_cover(run, rank, ids, bases, n, k, prints, base_ns, c.lo, c.hi, cov);
	store_trace_close(t);
	/* the others, in runs of neighbours */
	rc = TP_OK;
	for (a = 0; a < n && !rc; a = b) {
		if (a == k || (cov && cov[a])) {
			b = a + 1;
			continue;
		}
		for (b = a + 1; b < n && b != k && !(cov && cov[b]); b++)
			;
		rc = scan(r, run, rank, artifact, &c, a, b, err);
	}
	tp_free(cov);
	if (rc || !c.dups)
		goto out;
	rc = tp_fail(err, TP_ERR_CONFLICT, "overlapping_upload",
		     "%llu events of artifact %lld of rank %d are in this trace too (the first: '%c' event \"%s\" at "
		     "%lld ns; the trace has %llu events with a time): the same events twice would be counted "
		     "twice; send only the events the rank lacks, or delete that artifact first",
		     (unsigned long long)c.dups, (long long)c.first_artifact, rank, c.first_ph, c.first_name,
		     (long long)c.first_ts, (unsigned long long)c.timed);
out:
	fp_free(&c.set);
	fp_free(&c.times);
	tp_free(c.nh.h);
	return rc;
}
