/*
 * overlap.c: refuse a trace upload that repeats events of its rank
 * (overlap.h says what and why).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "event.h"
#include "pipeline/overlap.h"

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

/* A string id by its text: ids below TRACE_S_KNOWN_END are the same in every artifact. */
static uint64_t mix_id(uint64_t h, uint64_t id, overlap_str_fn str, void *payload)
{
	if (!id || id < TRACE_S_KNOWN_END || id > UINT32_MAX)
		return mix(mix(h, 1), id);
	return mix_text(mix(h, 2), str(payload, (uint32_t)id));
}

static uint64_t bits(double d)
{
	uint64_t u;

	memcpy(&u, &d, sizeof(u));
	return u;
}

/* Everything the store keeps of an event, ts on the common base; its strings by their text. */
static uint64_t fingerprint(const struct tp_event *e, int64_t ts, overlap_str_fn str, void *payload)
{
	uint64_t h = mix(0x7472616365ULL, (uint8_t)e->ph);

	h = mix(mix(mix(mix(mix(h, e->have), (uint64_t)ts), (uint64_t)e->dur_ns), (uint64_t)e->pid), (uint64_t)e->tid);
	h = mix_id(mix_id(mix_id(h, e->name, str, payload), e->cat, str, payload), e->arg, str, payload);
	h = mix_text(mix_text(h, e->pid_s), e->tid_s);
	h = mix(mix(mix(mix(h, (uint64_t)e->ext_id), (uint64_t)e->corr), (uint64_t)e->stream), (uint64_t)e->device);
	h = mix(mix(mix(mix(h, (uint64_t)e->bytes), (uint64_t)e->seq), (uint64_t)e->fwd_tid), (uint64_t)e->flow_id);
	h = mix(mix(h, bits(e->blocks_per_sm)), bits(e->occupancy));
	h = mix(mix(mix(mix(h, (uint64_t)e->ev_idx), (uint64_t)e->dev_type), (uint64_t)e->dev_id), (uint64_t)e->addr);
	h = mix(mix(mix(h, (uint64_t)e->total_alloc), (uint64_t)e->total_reserved), (uint64_t)e->sort_index);
	h = e->have & TH_COLL ? mix_id(h, (uint64_t)e->coll, str, payload) : mix(h, (uint64_t)e->coll);
	h = e->have & TH_PG ? mix_id(h, (uint64_t)e->pg, str, payload) : mix(h, (uint64_t)e->pg);
	h = e->have & TH_DTYPE ? mix_id(h, (uint64_t)e->dtype, str, payload) : mix(h, (uint64_t)e->dtype);
	return mix(mix(mix(mix(h, (uint64_t)e->in_nelems), (uint64_t)e->out_nelems), (uint64_t)e->group_size),
		   (uint64_t)e->coll_seq);
}

/* Events with a time, but not metadata ('M': process and thread names, which a file may repeat
 * and chunks may each carry; the analysis takes them once whatever their number). */
static int timed(const struct tp_event *e)
{
	return (e->have & TH_TS) && e->ph != 'M';
}

static const char *trace_text(void *payload, uint32_t id)
{
	return store_trace_string(payload, id);
}

/* The upload's events read back, each looked up among the rank's others. */
struct check {
	struct fpset set;
	int64_t base, lo, hi;	/* lo, hi: on the common base */
	overlap_str_fn str;
	void *payload;
	uint64_t dups, timed;
	uint64_t first;		/* the first repeated event: its fingerprint, ts, phase and name */
	int64_t first_ts;
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

static int check_block(void *payload, const struct tp_event *ev, size_t n)
{
	struct check *c = payload;

	for (size_t i = 0; i < n; i++) {
		const struct tp_event *e = &ev[i];
		int64_t ts;
		uint64_t h;
		if (!timed(e))
			continue;
		c->timed++;
		ts = tp_sat_add(e->ts_ns, c->base);
		if (ts < c->lo || ts > c->hi || !fp_has(&c->set, h = fingerprint(e, ts, c->str, c->payload)))
			continue;
		if (!c->dups++) {
			c->first = h;
			c->first_ts = ts;
			c->first_ph = e->ph;
			copy_name(c->first_name, sizeof(c->first_name), c->str(c->payload, e->name));
		}
	}
	return 0;
}

/* The other artifact that holds the event whose fingerprint is h at ts (0: none found). */
static int64_t holder(struct store_reader *r, const char *run, int rank, int64_t artifact, uint64_t h, int64_t ts,
		      struct tp_errbuf *err)
{
	struct store_trace *t;
	const struct tp_event *ev;
	size_t n;
	int64_t b, found = 0;
	int got;

	if (store_trace_open(r, run, rank, ts, tp_sat_add(ts, 1), &t, &got, err))
		return 0;
	while (!found && store_trace_next(t, &ev, &n, &b, err) == 1)
		for (size_t i = 0; i < n && !found && store_trace_artifact(t) != artifact; i++)
			if (timed(&ev[i]) && tp_sat_add(ev[i].ts_ns, b) == ts &&
			    fingerprint(&ev[i], ts, trace_text, t) == h)
				found = store_trace_artifact(t);
	store_trace_close(t);
	return found;
}

int overlap_check(struct store_writer *w, const char *run, int rank, int64_t artifact, int64_t base_ns,
		  int64_t lo, int64_t hi, overlap_str_fn str, void *payload, struct tp_errbuf *err)
{
	struct store_reader *r = store_writer_reader(w);
	struct check c = { .base = base_ns, .str = str, .payload = payload };
	struct store_trace *t;
	const struct tp_event *ev;
	size_t n;
	int64_t b, other;
	int rc, got;

	if (lo > hi)
		return TP_OK;
	c.lo = tp_sat_add(lo, base_ns);
	c.hi = tp_sat_add(hi, base_ns);
	if ((rc = store_trace_open(r, run, rank, c.lo, tp_sat_add(c.hi, 1), &t, &got, err)))
		return rc == TP_ERR_NOTFOUND ? TP_OK : rc;
	while ((rc = store_trace_next(t, &ev, &n, &b, err)) == 1) {
		if (store_trace_artifact(t) == artifact)
			continue;
		for (size_t i = 0; i < n; i++) {
			int64_t ts = tp_sat_add(ev[i].ts_ns, b);
			if (!timed(&ev[i]) || ts < c.lo || ts > c.hi)
				continue;
			if (fp_add(&c.set, fingerprint(&ev[i], ts, trace_text, t))) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				break;
			}
		}
		if (rc < 0)
			break;
	}
	store_trace_close(t);
	if (rc < 0 || !c.set.n) {
		tp_free(c.set.v);
		return rc < 0 ? rc : TP_OK;
	}
	if ((rc = store_events_each(r, artifact, STORE_EVENTS, check_block, &c, err)) ||
	    (rc = store_events_each(r, artifact, STORE_MEMORY_EVENTS, check_block, &c, err))) {
		tp_free(c.set.v);
		return rc;
	}
	tp_free(c.set.v);
	if (!c.dups)
		return TP_OK;
	other = holder(r, run, rank, artifact, c.first, c.first_ts, err);
	return tp_fail(err, TP_ERR_CONFLICT, "overlapping_upload",
		       "%llu of this trace's %llu timed events are already in artifact %lld of rank %d (the first: "
		       "'%c' event \"%s\" at %lld ns): the same events twice would be counted twice; send only "
		       "the events the rank lacks, or delete that artifact first",
		       (unsigned long long)c.dups, (unsigned long long)c.timed, (long long)other, rank, c.first_ph,
		       c.first_name, (long long)c.first_ts);
}
