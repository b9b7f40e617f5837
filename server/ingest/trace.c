/*
 * trace.c: Chrome trace JSON -> struct tp_event, streaming (see trace.h).
 *
 * jtok.c tokenizes; our callbacks keep a little state:
 *   depth        open containers; the root is depth 1
 *   ev_depth     depth of an event object's members (0 until traceEvents opens):
 *                3 for {"traceEvents": [ {...} ]}, 2 for the bare array form [ {...} ]
 *   key / akey   the member being read, at event level and inside "args"
 * Anything deeper than an event's args (Input Dims, occupancy dicts, ...) is
 * skipped. Top-level members other than traceEvents are built into a small
 * jansson object (trace_meta), up to max_meta_bytes.
 *
 * The tokenizer bounds every token by max_token, whether it lies in one fed
 * piece or straddles several: a 100 MB string costs us nothing.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "jtok.h"
#include "num.h"
#include "trace.h"
#include "utf8.h"

#define LOG_PREFIX "trace"

const struct trace_limits trace_default_limits = {
	.max_depth = 64,
	.max_token = 8u << 20,
	.max_events = 1ull << 31,
	.max_strings_bytes = 256u << 20,
	.max_meta_bytes = 1u << 20,
};

/* ---- interned strings: open addressing over ids, bytes in an arena ---- */

#define ARENA_BLOCK (64 * 1024)

struct arena_block {
	struct arena_block *next;
	size_t used, size;
	char data[];
};

struct strtab {
	uint32_t *slots;	/* id, 0 = empty */
	uint32_t mask;
	char **str;		/* id -> string */
	uint32_t *len, *hash;
	uint32_t n, cap;	/* ids in use (1-based), capacity of the arrays */
	struct arena_block *arena;
	uint64_t bytes;
};

static uint32_t hash_bytes(const char *s, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	h ^= h >> 29;
	return (uint32_t)h;
}

static char *arena_copy(struct strtab *t, const char *s, size_t len)
{
	struct arena_block *b = t->arena;
	char *out;

	if (!b || b->size - b->used < len + 1) {
		size_t size = len + 1 > ARENA_BLOCK / 4 ? len + 1 : ARENA_BLOCK;
		b = tp_malloc(sizeof(*b) + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		if (size == ARENA_BLOCK || !t->arena) {
			b->next = t->arena;
			t->arena = b;
		} else {
			/* a big string gets its own block behind the current one */
			b->next = t->arena->next;
			t->arena->next = b;
		}
	}
	out = b->data + b->used;
	memcpy(out, s, len);
	out[len] = 0;
	b->used += len + 1;
	return out;
}

static int strtab_grow(struct strtab *t)
{
	uint32_t newcap = t->cap ? t->cap * 2 : 1024, i;
	char **str = tp_realloc(t->str, (size_t)newcap * sizeof(*str));
	if (!str)
		return -1;
	t->str = str;
	uint32_t *len = tp_realloc(t->len, (size_t)newcap * sizeof(*len));
	if (!len)
		return -1;
	t->len = len;
	uint32_t *hash = tp_realloc(t->hash, (size_t)newcap * sizeof(*hash));
	if (!hash)
		return -1;
	t->hash = hash;
	/* slots: twice the capacity keeps the load under one half */
	uint32_t nslots = newcap * 2;
	uint32_t *slots = tp_calloc(nslots, sizeof(*slots));
	if (!slots)
		return -1;
	for (i = 1; i <= t->n; i++) {
		uint32_t j = t->hash[i] & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = i;
	}
	tp_free(t->slots);
	t->slots = slots;
	t->mask = nslots - 1;
	t->cap = newcap;
	return 0;
}

static void strtab_release(struct strtab *t)
{
	while (t->arena) {
		struct arena_block *next = t->arena->next;
		tp_free(t->arena);
		t->arena = next;
	}
	tp_free(t->slots);
	tp_free(t->str);
	tp_free(t->len);
	tp_free(t->hash);
	memset(t, 0, sizeof(*t));
}

/* ---- the parser ---- */

enum key {
	K_NONE, K_OTHER, K_PH, K_NAME, K_CAT, K_PID, K_TID, K_TS, K_DUR, K_ARGS, K_ID,
	/* inside args */
	A_EXT, A_CORR, A_EV_IDX, A_DEV_TYPE, A_DEV_ID, A_ADDR, A_BYTES, A_TOTAL_ALLOC,
	A_TOTAL_RES, A_BPS, A_OCC, A_STREAM, A_DEVICE, A_SEQ, A_FWD_TID, A_NAME, A_LABELS, A_SORT,
	/* collectives (event.h) */
	A_COLL, A_PG, A_DTYPE, A_IN_NELEMS, A_OUT_NELEMS, A_GROUP_SIZE, A_COLL_SEQ,
};

struct trace_parser {
	struct jtok *jt;
	struct trace_limits lim;
	struct trace_sink sink;
	struct strtab strings;
	struct tp_errbuf *err;	/* valid during feed/finish */
	int rc;			/* first error raised inside a callback */

	int depth;
	int ev_depth;		/* see the top of the file */
	int root;		/* 0 none yet, '{' or '[' */
	int saw_events;		/* a traceEvents array (or a bare array) was opened */
	int in_args;
	enum key key, akey;
	struct tp_event ev;
	uint64_t nevents;
	uint64_t fed;		/* bytes fed before the current piece */

	/* top-level metadata */
	json_t *meta;
	char *meta_key;		/* the depth-1 key whose value is being built */
	int meta_skip;		/* the value at hand is not kept */
	json_t *mstack[64];
	char *mkeys[64];	/* the pending key inside each open object */
	int mdepth;
	uint64_t meta_bytes;
	int64_t base_ns;
	int have_base;
};

/* Record the first error and return 0, which makes the tokenizer cancel the parse. */
static int fail(struct trace_parser *p, int rc, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(struct trace_parser *p, int rc, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (!p->rc)
		p->rc = rc;
	va_start(ap, fmt);
	tp_failv(p->err, rc, code, fmt, ap);
	va_end(ap);
	return 0;
}

#define NEV(p) ((unsigned long long)(p)->nevents)


/* RFC 3629 throughout */
static int utf8_valid(const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str, *end = s + len;
	size_t n;

	for (; s < end; s += n)
		if (!(n = tp_utf8_len(s, end)))
			return 0;
	return 1;
}

static int intern(struct trace_parser *p, const char *s, size_t len, uint32_t *id_out)
{
	struct strtab *t = &p->strings;
	uint32_t h = hash_bytes(s, len), j, id;
	char *copy;
	int rc;

	if (t->slots) {
		for (j = h & t->mask; (id = t->slots[j]); j = (j + 1) & t->mask)
			if (t->hash[id] == h && t->len[id] == len && !memcmp(t->str[id], s, len)) {
				*id_out = id;
				return TP_OK;
			}
	}
	if (!utf8_valid(s, len)) {
		p->rc = TP_ERR_INVALID;
		tp_fail(p->err, TP_ERR_INVALID, "invalid_json", "a name that is not UTF-8 near byte %llu",
			(unsigned long long)jtok_offset(p->jt));
		return TP_ERR_INVALID;
	}
	if (len > UINT32_MAX || t->bytes + len > p->lim.max_strings_bytes) {
		p->rc = TP_ERR_TOOBIG;
		tp_fail(p->err, TP_ERR_TOOBIG, "too_many_names",
			"distinct names exceed the cap of %llu bytes",
			(unsigned long long)p->lim.max_strings_bytes);
		return TP_ERR_TOOBIG;
	}
	if (t->n + 1 >= t->cap && strtab_grow(t))
		goto nomem;
	if (!(copy = arena_copy(t, s, len)))
		goto nomem;
	id = ++t->n;
	t->str[id] = copy;
	t->len[id] = (uint32_t)len;
	t->hash[id] = h;
	for (j = h & t->mask; t->slots[j]; j = (j + 1) & t->mask)
		;
	t->slots[j] = id;
	t->bytes += len;
	if (p->sink.string && (rc = p->sink.string(p->sink.payload, id, copy, len))) {
		p->rc = rc;
		return rc;
	}
	*id_out = id;
	return TP_OK;
nomem:
	p->rc = TP_ERR_NOMEM;
	tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory interning names");
	return TP_ERR_NOMEM;
}

#define KEYIS(lit) (len == sizeof(lit) - 1 && !memcmp(k, lit, sizeof(lit) - 1))

static enum key event_key(const char *k, size_t len)
{
	switch (len) {
	case 2:
		if (KEYIS("ph")) return K_PH;
		if (KEYIS("ts")) return K_TS;
		if (KEYIS("id")) return K_ID;
		break;
	case 3:
		if (KEYIS("cat")) return K_CAT;
		if (KEYIS("pid")) return K_PID;
		if (KEYIS("tid")) return K_TID;
		if (KEYIS("dur")) return K_DUR;
		break;
	case 4:
		if (KEYIS("name")) return K_NAME;
		if (KEYIS("args")) return K_ARGS;
		break;
	}
	return K_OTHER;
}

static enum key args_key(const char *k, size_t len)
{
	switch (len) {
	case 3: if (KEYIS("Seq")) return A_COLL_SEQ; break;
	case 4:
		if (KEYIS("name")) return A_NAME;
		if (KEYIS("Addr")) return A_ADDR;
		break;
	case 5:
		if (KEYIS("Bytes") || KEYIS("bytes")) return A_BYTES;
		if (KEYIS("dtype")) return A_DTYPE;
		break;
	case 6:
		if (KEYIS("Ev Idx")) return A_EV_IDX;
		if (KEYIS("stream")) return A_STREAM;
		if (KEYIS("device")) return A_DEVICE;
		if (KEYIS("labels")) return A_LABELS;
		break;
	case 9: if (KEYIS("Device Id")) return A_DEV_ID; break;
	case 10:
		if (KEYIS("sort_index")) return A_SORT;
		if (KEYIS("Group size")) return A_GROUP_SIZE;
		break;
	case 11:
		if (KEYIS("External id") || KEYIS("external id")) return A_EXT;
		if (KEYIS("correlation")) return A_CORR;
		if (KEYIS("Device Type")) return A_DEV_TYPE;
		break;
	case 13:
		if (KEYIS("blocks per SM")) return A_BPS;
		if (KEYIS("Fwd thread id")) return A_FWD_TID;
		if (KEYIS("In msg nelems")) return A_IN_NELEMS;
		break;
	case 14:
		if (KEYIS("Total Reserved")) return A_TOTAL_RES;
		if (KEYIS("Out msg nelems")) return A_OUT_NELEMS;
		break;
	case 15:
		if (KEYIS("Total Allocated")) return A_TOTAL_ALLOC;
		if (KEYIS("Sequence number")) return A_SEQ;
		if (KEYIS("Collective name")) return A_COLL;
		break;
	case 18: if (KEYIS("Process Group Name")) return A_PG; break;
	case 25: if (KEYIS("est. achieved occupancy %")) return A_OCC; break;
	}
	return K_OTHER;
}

/* ---- metadata builder (top-level keys other than traceEvents) ---- */

static void meta_put(struct trace_parser *p, json_t *v, size_t cost)
{
	if (!v)
		return;
	p->meta_bytes += cost;
	if (p->meta_bytes > p->lim.max_meta_bytes) {
		json_decref(v);
		p->meta_skip = 1;
		return;
	}
	if (p->mdepth == 0) {
		json_object_set_new(p->meta, p->meta_key, v);
	} else {
		json_t *top = p->mstack[p->mdepth - 1];
		if (json_is_array(top))
			json_array_append_new(top, v);
		else if (p->mkeys[p->mdepth - 1])
			json_object_set_new(top, p->mkeys[p->mdepth - 1], v);
		else
			json_decref(v);
	}
}

static int meta_active(const struct trace_parser *p)
{
	return p->meta_key && !p->meta_skip && p->depth >= 1;
}

/* ---- tokenizer callbacks ---- */

static int in_event(const struct trace_parser *p)
{
	return p->ev_depth && p->depth == p->ev_depth;
}

static int in_event_args(const struct trace_parser *p)
{
	return p->ev_depth && p->in_args && p->depth == p->ev_depth + 1;
}

static int set_i64(struct trace_parser *p, const char *s, size_t l, int64_t *dst, uint32_t bit)
{
	int64_t v;

	if (num_to_i64(s, l, &v) < 0)
		return 1;	/* not representable: leave the field absent */
	*dst = v;
	p->ev.have |= bit;
	return 1;
}

/* "Collective name", "Process Group Name", "dtype": interned, as a name is (1, or 0 failed) */
static int set_coll_string(struct trace_parser *p, const char *s, size_t l)
{
	struct tp_event *e = &p->ev;
	uint32_t id;

	if (!l)
		return 1;
	if (intern(p, s, l, &id))
		return 0;
	switch (p->akey) {
	case A_COLL: e->coll = id; e->have |= TH_COLL; break;
	case A_PG: e->pg = id; e->have |= TH_PG; break;
	default: e->dtype = id; e->have |= TH_DTYPE; break;
	}
	return 1;
}

static int on_number(void *ctx, const char *s, size_t l)
{
	struct trace_parser *p = ctx;
	struct tp_event *e = &p->ev;

	if (in_event(p)) {
		switch (p->key) {
		case K_TS:
			if (num_us_to_ns(s, l, &e->ts_ns))
				return fail(p, TP_ERR_INVALID, "bad_timestamp",
					    "traceEvents[%llu]: ts %.*s is not a number that fits in int64 ns",
					    NEV(p), (int)(l > 40 ? 40 : l), s);
			e->have |= TH_TS;
			return 1;
		case K_DUR:
			if (num_us_to_ns(s, l, &e->dur_ns))
				return fail(p, TP_ERR_INVALID, "bad_timestamp",
					    "traceEvents[%llu]: dur %.*s is not a number that fits in int64 ns",
					    NEV(p), (int)(l > 40 ? 40 : l), s);
			e->have |= TH_DUR;
			return 1;
		case K_PID: return set_i64(p, s, l, &e->pid, TH_PID);
		case K_TID: return set_i64(p, s, l, &e->tid, TH_TID);
		case K_ID: return set_i64(p, s, l, &e->flow_id, TH_FLOW);
		case K_NAME: {
			uint32_t id;
			if (intern(p, s, l, &id))
				return 0;
			e->name = id;
			return 1;
		}
		default:
			return 1;
		}
	}
	if (in_event_args(p)) {
		switch (p->akey) {
		case A_EXT: return set_i64(p, s, l, &e->ext_id, TH_EXT);
		case A_CORR: return set_i64(p, s, l, &e->corr, TH_CORR);
		case A_EV_IDX: return set_i64(p, s, l, &e->ev_idx, TH_EV_IDX);
		case A_DEV_TYPE: return set_i64(p, s, l, &e->dev_type, TH_DEV_TYPE);
		case A_DEV_ID: return set_i64(p, s, l, &e->dev_id, TH_DEV_ID);
		case A_ADDR: return set_i64(p, s, l, &e->addr, TH_ADDR);
		case A_BYTES: return set_i64(p, s, l, &e->bytes, TH_BYTES);
		case A_TOTAL_ALLOC: return set_i64(p, s, l, &e->total_alloc, TH_TOTAL_ALLOC);
		case A_TOTAL_RES: return set_i64(p, s, l, &e->total_reserved, TH_TOTAL_RES);
		case A_STREAM: return set_i64(p, s, l, &e->stream, TH_STREAM);
		case A_DEVICE: return set_i64(p, s, l, &e->device, TH_DEVICE);
		case A_SEQ: return set_i64(p, s, l, &e->seq, TH_SEQ);
		case A_FWD_TID: return set_i64(p, s, l, &e->fwd_tid, TH_FWD_TID);
		case A_SORT: return set_i64(p, s, l, &e->sort_index, TH_SORT);
		case A_IN_NELEMS: return set_i64(p, s, l, &e->in_nelems, TH_IN_NELEMS);
		case A_OUT_NELEMS: return set_i64(p, s, l, &e->out_nelems, TH_OUT_NELEMS);
		case A_GROUP_SIZE: return set_i64(p, s, l, &e->group_size, TH_GROUP_SIZE);
		case A_COLL_SEQ: return set_i64(p, s, l, &e->coll_seq, TH_COLL_SEQ);
		case A_COLL: case A_PG: case A_DTYPE:	/* a number written where a name was: its text */
			return set_coll_string(p, s, l);
		case A_BPS:
			if (!num_to_double(s, l, &e->blocks_per_sm))
				e->have |= TH_BPS;
			return 1;
		case A_OCC:
			if (!num_to_double(s, l, &e->occupancy))
				e->have |= TH_OCC;
			return 1;
		default:
			return 1;
		}
	}
	if (p->ev_depth && p->depth == p->ev_depth - 1)
		return fail(p, TP_ERR_INVALID, "invalid_trace",
			    "traceEvents[%llu] is a number, not an event object", NEV(p));
	if (p->depth == 1 && p->root == '{' && p->key == K_NONE && p->meta_key &&
	    !strcmp(p->meta_key, "baseTimeNanoseconds")) {
		int64_t v;
		if (num_to_i64(s, l, &v) == 0) {
			p->base_ns = v;
			p->have_base = 1;
		}
	}
	if (meta_active(p)) {
		int64_t v;
		double d;
		/* integers above INT64_MAX come back bit-cast (num.h): keep those as reals */
		if (num_to_i64(s, l, &v) == 0 && (s[0] == '-' || v >= 0))
			meta_put(p, json_integer(v), l);
		else if (!num_to_double(s, l, &d))
			meta_put(p, json_real(d), l);
	}
	return 1;
}

static int on_string(void *ctx, const unsigned char *us, size_t l)
{
	struct trace_parser *p = ctx;
	struct tp_event *e = &p->ev;
	const char *s = (const char *)us;
	uint32_t id;

	if (in_event(p)) {
		switch (p->key) {
		case K_PH:
			e->ph = l ? s[0] : 0;
			return 1;
		case K_NAME:
			if (intern(p, s, l, &id))
				return 0;
			e->name = id;
			return 1;
		case K_CAT:
			if (intern(p, s, l, &id))
				return 0;
			e->cat = id;
			return 1;
		case K_PID:
		case K_TID:
			if (intern(p, s, l, &id))
				return 0;
			if (p->key == K_PID)
				e->pid_s = p->strings.str[id], e->pid_sid = id, e->have |= TH_PID;
			else
				e->tid_s = p->strings.str[id], e->tid_sid = id, e->have |= TH_TID;
			return 1;
		case K_TS:
		case K_DUR:
			return fail(p, TP_ERR_INVALID, "bad_timestamp",
				    "traceEvents[%llu]: %s must be a number, not a string",
				    NEV(p), p->key == K_TS ? "ts" : "dur");
		default:
			return 1;
		}
	}
	if (in_event_args(p)) {
		if (p->akey == A_COLL || p->akey == A_PG || p->akey == A_DTYPE)
			return set_coll_string(p, s, l);
		if (p->akey == A_NAME || p->akey == A_LABELS) {	/* M events: a name, or process_labels' labels */
			if (intern(p, s, l, &id))
				return 0;
			e->arg = id;
		} else if ((p->akey == A_BPS || p->akey == A_OCC) && l == 3 && !memcmp(s, "inf", 3)) {
			if (p->akey == A_BPS)
				e->blocks_per_sm = INFINITY, e->have |= TH_BPS;
			else
				e->occupancy = INFINITY, e->have |= TH_OCC;
		}
		return 1;
	}
	if (p->ev_depth && p->depth == p->ev_depth - 1)
		return fail(p, TP_ERR_INVALID, "invalid_trace",
			    "traceEvents[%llu] is a string, not an event object", NEV(p));
	if (meta_active(p))
		meta_put(p, json_stringn(s, l), l);	/* NULL (dropped) when not UTF-8 */
	return 1;
}

static int on_null(void *ctx)
{
	struct trace_parser *p = ctx;

	if (p->ev_depth && p->depth == p->ev_depth - 1)
		return fail(p, TP_ERR_INVALID, "invalid_trace",
			    "traceEvents[%llu] is null, not an event object", NEV(p));
	if (meta_active(p) && !in_event(p))
		meta_put(p, json_null(), 4);
	return 1;
}

static int on_boolean(void *ctx, int b)
{
	struct trace_parser *p = ctx;

	if (in_event(p) && (p->key == K_TS || p->key == K_DUR))
		return fail(p, TP_ERR_INVALID, "bad_timestamp",
			    "traceEvents[%llu]: %s must be a number, not a boolean",
			    NEV(p), p->key == K_TS ? "ts" : "dur");
	if (p->ev_depth && p->depth == p->ev_depth - 1)
		return fail(p, TP_ERR_INVALID, "invalid_trace",
			    "traceEvents[%llu] is a boolean, not an event object", NEV(p));
	if (meta_active(p) && !in_event(p))
		meta_put(p, json_boolean(b), 4);
	return 1;
}

static int open_container(struct trace_parser *p, int is_map)
{
	if (p->depth >= (int)p->lim.max_depth)
		return fail(p, TP_ERR_TOOBIG, "too_deep",
			    "JSON nesting deeper than the cap of %u levels at byte %llu",
			    p->lim.max_depth,
			    (unsigned long long)jtok_offset(p->jt));

	if (p->depth == 0) {
		p->root = is_map ? '{' : '[';
		if (!is_map) {
			/* the bare array form: the root is the event list */
			p->ev_depth = 2;
			p->saw_events = 1;
		}
	} else if (p->depth == 1 && p->root == '{' && p->meta_key &&
		   !strcmp(p->meta_key, "traceEvents")) {
		if (is_map)
			return fail(p, TP_ERR_INVALID, "invalid_trace", "traceEvents is an object, not an array");
		p->ev_depth = 3;
		p->saw_events = 1;
		tp_free(p->meta_key);
		p->meta_key = NULL;
	} else if (p->ev_depth && p->depth == p->ev_depth - 1) {
		if (!is_map)
			return fail(p, TP_ERR_INVALID, "invalid_trace",
				    "traceEvents[%llu] is an array, not an event object", NEV(p));
		memset(&p->ev, 0, sizeof(p->ev));
		p->key = K_NONE;
	} else if (in_event(p)) {
		if (p->key == K_TS || p->key == K_DUR)
			return fail(p, TP_ERR_INVALID, "bad_timestamp",
				    "traceEvents[%llu]: %s must be a number, not an %s", NEV(p),
				    p->key == K_TS ? "ts" : "dur", is_map ? "object" : "array");
		p->in_args = is_map && p->key == K_ARGS;
		p->akey = K_NONE;
	} else if (meta_active(p) && !p->ev_depth) {
		json_t *c = is_map ? json_object() : json_array();
		if (p->mdepth < (int)(sizeof(p->mstack) / sizeof(p->mstack[0])) && c) {
			p->mstack[p->mdepth] = c;
			p->mkeys[p->mdepth] = NULL;
			p->mdepth++;
		} else {
			json_decref(c);
			p->meta_skip = 1;
		}
	}
	p->depth++;
	return 1;
}

static int emit_event(struct trace_parser *p)
{
	int rc;

	p->nevents++;
	if (p->nevents > p->lim.max_events)
		return fail(p, TP_ERR_TOOBIG, "too_many_events",
			    "more events than the cap of %llu", (unsigned long long)p->lim.max_events);
	if (!p->ev.ph)
		return 1;	/* no phase: nothing a viewer would draw */
	if (p->ev.ph != 'M' && !(p->ev.have & TH_TS))
		return 1;	/* nothing to place on a timeline */
	if ((rc = p->sink.event(p->sink.payload, &p->ev))) {
		p->rc = rc;
		return 0;
	}
	return 1;
}

static int close_container(struct trace_parser *p)
{
	p->depth--;
	if (p->ev_depth && p->depth == p->ev_depth - 1)
		return emit_event(p);
	if (p->ev_depth && p->depth == p->ev_depth) {
		p->in_args = 0;
		return 1;
	}
	if (p->ev_depth && p->depth == p->ev_depth - 2) {
		/* the traceEvents array closed; back to the root object */
		p->ev_depth = 0;
		p->key = K_NONE;
		return 1;
	}
	if (!p->ev_depth && p->meta_key && p->depth >= 1 && p->mdepth > 0 && !p->meta_skip) {
		json_t *c = p->mstack[--p->mdepth];
		tp_free(p->mkeys[p->mdepth]);
		p->mkeys[p->mdepth] = NULL;
		meta_put(p, c, 2);
	}
	return 1;
}

static int on_start_map(void *ctx) { return open_container(ctx, 1); }
static int on_start_array(void *ctx) { return open_container(ctx, 0); }
static int on_end_map(void *ctx) { return close_container(ctx); }
static int on_end_array(void *ctx) { return close_container(ctx); }

static int on_map_key(void *ctx, const unsigned char *uk, size_t len)
{
	struct trace_parser *p = ctx;
	const char *k = (const char *)uk;

	if (in_event(p)) {
		p->key = event_key(k, len);
		return 1;
	}
	if (in_event_args(p)) {
		p->akey = args_key(k, len);
		return 1;
	}
	if (p->depth == 1 && p->root == '{') {
		/* a new top-level member */
		while (p->mdepth > 0) {
			json_decref(p->mstack[--p->mdepth]);
			tp_free(p->mkeys[p->mdepth]);
			p->mkeys[p->mdepth] = NULL;
		}
		tp_free(p->meta_key);
		p->meta_key = tp_strndup(k, len);
		p->meta_skip = 0;
		p->key = K_NONE;
		if (!p->meta_key)
			return fail(p, TP_ERR_NOMEM, NULL, "out of memory");
		return 1;
	}
	if (meta_active(p) && !p->ev_depth && p->mdepth > 0 &&
	    p->depth == 1 + p->mdepth) {
		tp_free(p->mkeys[p->mdepth - 1]);
		p->mkeys[p->mdepth - 1] = tp_strndup(k, len);
	}
	return 1;
}

static const struct jtok_callbacks callbacks = {
	.null = on_null,
	.boolean = on_boolean,
	.number = on_number,
	.string = on_string,
	.start_map = on_start_map,
	.map_key = on_map_key,
	.end_map = on_end_map,
	.start_array = on_start_array,
	.end_array = on_end_array,
};

static const char *const known[] = {
	[TRACE_S_MEMORY] = "[memory]",
	[TRACE_S_OOM] = "[OutOfMemory]",
	[TRACE_S_USER_ANNOTATION] = "user_annotation",
	[TRACE_S_GPU_USER_ANNOTATION] = "gpu_user_annotation",
	[TRACE_S_AC2G] = "ac2g",
	[TRACE_S_ASYNC] = "async",
	[TRACE_S_ASYNC_CPU_TO_GPU] = "async_cpu_to_gpu",
	[TRACE_S_OPERATOR] = "Operator",
	[TRACE_S_CPU_OP] = "cpu_op",
};

const char *trace_known_string(uint32_t id)
{
	return id && id < TRACE_S_KNOWN_END ? known[id] : NULL;
}

struct trace_parser *trace_parser_new(const struct trace_limits *lim, const struct trace_sink *sink)
{
	struct trace_parser *p = tp_calloc(1, sizeof(*p));
	uint32_t id;
	int i;

	if (!p)
		return NULL;
	p->lim = lim ? *lim : trace_default_limits;
	if (p->lim.max_depth > 64)
		p->lim.max_depth = 64;	/* the metadata stack is sized for it */
	p->sink = *sink;
	p->meta = json_object();
	/* one level more than open_container() allows, so its message is the one given;
	 * strings we keep are validated in intern() and meta_put(), the rest are skipped */
	p->jt = jtok_new(&callbacks, p, p->lim.max_token, p->lim.max_depth + 1);
	if (!p->meta || !p->jt)
		goto fail;
	for (i = 1; i < TRACE_S_KNOWN_END; i++)
		if (intern(p, known[i], strlen(known[i]), &id) || id != (uint32_t)i)
			goto fail;
	return p;
fail:
	trace_parser_free(p);
	return NULL;
}

static int token_too_long(struct trace_parser *p, int string, uint64_t at)
{
	if (!p->rc)
		p->rc = TP_ERR_TOOBIG;
	tp_fail(p->err, TP_ERR_TOOBIG, string ? "string_too_long" : "token_too_long",
		"a %s longer than the cap of %llu bytes at byte %llu", string ? "string" : "token",
		(unsigned long long)p->lim.max_token, (unsigned long long)at);
	return p->rc;
}

/* The tokenizer stopped: say why, unless a callback already did. */
static int tokenizer_failed(struct trace_parser *p, int st)
{
	if (p->rc)
		return p->rc;	/* raised by a callback, message already set */
	switch (st) {
	case JTOK_TOO_LONG:
		return token_too_long(p, jtok_error_in_string(p->jt), jtok_error_at(p->jt));
	case JTOK_NOMEM:
		p->rc = TP_ERR_NOMEM;
		return tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory");
	case JTOK_TOO_DEEP:
		p->rc = TP_ERR_TOOBIG;
		return tp_fail(p->err, TP_ERR_TOOBIG, "too_deep",
			       "JSON nesting deeper than the cap of %u levels at byte %llu", p->lim.max_depth,
			       (unsigned long long)jtok_error_at(p->jt));
	default:
		p->rc = TP_ERR_INVALID;
		return tp_fail(p->err, TP_ERR_INVALID, "invalid_json", "invalid JSON at byte %llu: %s",
			       (unsigned long long)jtok_error_at(p->jt), jtok_message(p->jt));
	}
}

int trace_parser_feed(struct trace_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	int st;

	if (p->rc)
		return p->rc;
	p->err = err;
	if ((st = jtok_feed(p->jt, data, len)))
		return tokenizer_failed(p, st);
	p->fed += len;
	return TP_OK;
}

int trace_parser_finish(struct trace_parser *p, struct tp_errbuf *err)
{
	int st;

	if (p->rc)
		return p->rc;
	p->err = err;
	if (p->fed == 0 && p->depth == 0 && !p->root) {
		/* nothing at all: say so, rather than where the value should start */
		p->rc = TP_ERR_INVALID;
		return tp_fail(err, TP_ERR_INVALID, "empty_body", "the upload is empty");
	}
	if ((st = jtok_finish(p->jt)))
		return tokenizer_failed(p, st);
	if (!p->saw_events) {
		p->rc = TP_ERR_INVALID;
		return tp_fail(err, TP_ERR_INVALID, "invalid_trace",
			       "not a Chrome trace: no traceEvents array");
	}
	return TP_OK;
}

const char *trace_string(const struct trace_parser *p, uint32_t id)
{
	return id && id <= p->strings.n ? p->strings.str[id] : NULL;
}

uint64_t trace_event_count(const struct trace_parser *p)
{
	return p->nevents;
}

int trace_base_ns(const struct trace_parser *p, int64_t *out)
{
	if (p->have_base)
		*out = p->base_ns;
	return p->have_base;
}

json_t *trace_meta(const struct trace_parser *p)
{
	return p->meta;
}

void trace_parser_free(struct trace_parser *p)
{
	if (!p)
		return;
	jtok_free(p->jt);
	while (p->mdepth > 0) {
		json_decref(p->mstack[--p->mdepth]);
		tp_free(p->mkeys[p->mdepth]);
	}
	tp_free(p->meta_key);
	json_decref(p->meta);
	strtab_release(&p->strings);
	tp_free(p);
}
