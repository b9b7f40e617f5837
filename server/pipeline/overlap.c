/*
 * overlap.c: refuse a trace upload that repeats events of its rank
 * (overlap.h says what and why).
 */
#include <stdio.h>
#include <string.h>

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

static int fp_add(struct fpset *s, uint64_t h)
{
	h = h ? h : 1;
	if ((s->n + 1) * 2 > s->cap) {
		struct fpset g = { tp_calloc(s->cap ? s->cap * 2 : 1024, sizeof(uint64_t)), s->n,
				   s->cap ? s->cap * 2 : 1024 };
		if (!g.v)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->v[i])
				fp_put(&g, s->v[i]);
		tp_free(s->v);
		*s = g;
	}
	s->n += (size_t)fp_put(s, h);
	return 0;
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

static uint64_t mix_id(uint64_t h, uint64_t id, struct names_h *m)
{
	uint64_t x;

	if (!id || id < TRACE_S_KNOWN_END || id > UINT32_MAX)
		return mix(mix(h, 1), id);
	if (id < m->n && m->h[id])
		return mix(h, m->h[id]);
	x = mix_text(2, m->str(m->payload, (uint32_t)id));
	x = x ? x : 1;
	if (id >= m->n) {
		size_t n = m->n ? m->n : 1024;
		uint64_t *nh;
		while (n <= id)
			n *= 2;
		if (!(nh = tp_realloc(m->h, n * sizeof(*nh))))
			return mix(h, x);	/* not kept: hashed again next time */
		memset(nh + m->n, 0, (n - m->n) * sizeof(*nh));
		m->h = nh;
		m->n = n;
	}
	m->h[id] = x;
	return mix(h, x);
}

static uint64_t bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/* Everything the store keeps of an event, ts on the common base; its strings by their text. */
static uint64_t fingerprint(const struct tp_event *e, int64_t ts, struct names_h *m)
{
	uint64_t h = mix(0x7472616365ULL, (uint8_t)e->ph);

	h = mix(mix(mix(mix(mix(h, e->have), (uint64_t)ts), (uint64_t)e->dur_ns), (uint64_t)e->pid), (uint64_t)e->tid);
	h = mix_id(mix_id(mix_id(h, e->name, m), e->cat, m), e->arg, m);
	h = mix_text(mix_text(h, e->pid_s), e->tid_s);
	h = mix(mix(mix(mix(h, (uint64_t)e->ext_id), (uint64_t)e->corr), (uint64_t)e->stream), (uint64_t)e->device);
	h = mix(mix(mix(mix(h, (uint64_t)e->bytes), (uint64_t)e->seq), (uint64_t)e->fwd_tid), (uint64_t)e->flow_id);
	h = mix(mix(h, bits(e->blocks_per_sm)), bits(e->occupancy));
	h = mix(mix(mix(mix(h, (uint64_t)e->ev_idx), (uint64_t)e->dev_type), (uint64_t)e->dev_id), (uint64_t)e->addr);
	h = mix(mix(mix(h, (uint64_t)e->total_alloc), (uint64_t)e->total_reserved), (uint64_t)e->sort_index);
	h = e->have & TH_COLL ? mix_id(h, (uint64_t)e->coll, m) : mix(h, (uint64_t)e->coll);
	h = e->have & TH_PG ? mix_id(h, (uint64_t)e->pg, m) : mix(h, (uint64_t)e->pg);
	h = e->have & TH_DTYPE ? mix_id(h, (uint64_t)e->dtype, m) : mix(h, (uint64_t)e->dtype);
	return mix(mix(mix(mix(h, (uint64_t)e->in_nelems), (uint64_t)e->out_nelems), (uint64_t)e->group_size),
		   (uint64_t)e->coll_seq);
}

/* Events with a time, but not metadata ('M': process and thread names, which a file may repeat
 * and chunks may each carry; the analysis takes them once whatever their number). */
static int timed(const struct tp_event *e)
{
	return (e->have & TH_TS) && e->ph != 'M';
}

/* What a repeated event has the same of, read without decoding it: the key of struct check's times. */
static uint64_t time_key(char ph, uint32_t have, int64_t ts, int64_t dur)
{
	return mix(mix(mix(mix(0, (uint8_t)ph), have), (uint64_t)ts), (uint64_t)dur);
}

static const char *trace_text(void *payload, uint32_t id)
{
	return store_trace_string(payload, id);
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
	const struct tp_event *ev;
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

int overlap_check(struct store_writer *w, const char *run, int rank, int64_t artifact, int64_t base_ns,
		  int64_t lo, int64_t hi, overlap_str_fn str, void *payload, struct tp_errbuf *err)
{
	struct store_reader *r = store_writer_reader(w);
	struct check c = { .base = base_ns, .str = str, .payload = payload, .r = r, .artifact = artifact, .err = err };
	struct store_trace *t;
	const int64_t *ids, *bases;
	size_t n, k;
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
	store_trace_close(t);
	if ((k > 0 && (rc = scan(r, run, rank, artifact, &c, 0, k, err))) ||
	    (k + 1 < n && (rc = scan(r, run, rank, artifact, &c, k + 1, n, err))) || !c.dups)
		goto out;
	rc = tp_fail(err, TP_ERR_CONFLICT, "overlapping_upload",
		     "%llu events of artifact %lld of rank %d are in this trace too (the first: '%c' event \"%s\" at "
		     "%lld ns; the trace has %llu events with a time): the same events twice would be counted "
		     "twice; send only the events the rank lacks, or delete that artifact first",
		     (unsigned long long)c.dups, (long long)c.first_artifact, rank, c.first_ph, c.first_name,
		     (long long)c.first_ts, (unsigned long long)c.timed);
out:
	tp_free(c.set.v);
	tp_free(c.times.v);
	tp_free(c.nh.h);
	return rc;
}
