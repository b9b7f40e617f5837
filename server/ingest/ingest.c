/*
 * ingest.c: the upload pipeline (see ingest.h).
 *
 * Threads: the caller's thread runs sha256, inflate and the parser, and
 * fills batches; one writer thread per upload drains them into the store.
 * NBATCH batches circulate between a free list and a ready queue under one
 * mutex, which bounds memory and makes the parser wait when the database
 * falls behind. The last batch carries `last`, after which the writer
 * finishes the raw stream and exits; ingest_end() joins it and commits.
 *
 * What is stored: every event except [memory] ones (their own table) and
 * CPU->GPU flow events (cat ac2g, or async/async_cpu_to_gpu in older traces),
 * which only repeat the kernel's "correlation" arg and make up 30 % of a
 * trace's rows. ProfilerStep#N spans are collected on the way.
 *
 * Raw bytes: a gzip upload is kept as sent; anything else is gzipped (level
 * 1) by the writer thread, which has spare time while SQLite works.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ingest/inflate.h"
#include "ingest/ingest.h"
#include "sha256.h"

#define LOG_PREFIX "ingest"

#define NBATCH 3
#define BATCH_EVENTS 16384
#define BATCH_MEM_EVENTS 4096
#define RAW_CHUNK (1u << 20)	/* raw bytes per stored chunk */
#define FEED_PIECE (256u << 10)

const struct ingest_limits ingest_default_limits = {
	.max_body = 16ull << 30,
	.max_inflated = 64ull << 30,
	.max_ratio = 250,
	.trace = {
		.max_depth = 64,
		.max_token = 8u << 20,
		.max_events = 1ull << 31,
		.max_strings_bytes = 256u << 20,
		.max_meta_bytes = 1u << 20,
	},
};

enum kind { KIND_UNKNOWN, KIND_TRACE, KIND_SNAPSHOT, KIND_TIMELINE };
static const char *const kind_names[] = { "unknown", "trace", "memory_snapshot", "memory_timeline" };

struct batch {
	struct tp_event *ev, *mev;
	uint8_t *oom;
	size_t nev, nmev;
	uint64_t ev_first, mev_first;
	struct store_string *str;
	size_t nstr, strcap;
	uint8_t *raw;
	size_t nraw;
	int last;
	struct batch *next;
};

struct ingest {
	struct store *store;
	struct store_writer *w;
	int64_t artifact;
	struct ingest_limits lim;
	int req_rank;
	char kind_hint[32];

	/* caller's thread */
	struct sha256 sha;
	uint64_t body;
	int too_big;
	struct inflate_stage inf;
	int inf_started;
	enum kind kind;
	uint8_t sniff[64];
	size_t nsniff;
	struct trace_parser *tp;
	int parse_rc;		/* first failure of inflate/detect/parse */
	struct tp_errbuf perr;
	struct batch *cur;
	uint64_t nev, nmev;
	uint8_t *is_step;	/* per string id: 1 for "ProfilerStep#<digits>" */
	size_t is_step_cap;
	struct store_step *steps;
	size_t nsteps, steps_cap;
	int64_t peak_alloc;
	int64_t first_ts;	/* of the first event with a ts; 0 before */

	/* shared, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct batch *free_list, *ready_head, *ready_tail;
	int writer_rc;
	struct tp_errbuf werr;
	pthread_t writer;
	int writer_started;

	/* writer thread */
	z_stream zs;
	int deflating;
	uint8_t *zout;
	uint32_t raw_seq;
	struct batch pool[NBATCH];
};

/* ---- batches ---- */

static int batch_alloc(struct batch *b)
{
	b->ev = malloc(BATCH_EVENTS * sizeof(*b->ev));
	b->mev = malloc(BATCH_MEM_EVENTS * sizeof(*b->mev));
	b->oom = malloc(BATCH_MEM_EVENTS);
	b->raw = malloc(RAW_CHUNK + FEED_PIECE);
	return b->ev && b->mev && b->oom && b->raw ? 0 : -1;
}

static void batch_release(struct batch *b)
{
	free(b->ev);
	free(b->mev);
	free(b->oom);
	free(b->raw);
	free(b->str);
}

static void batch_reset(struct batch *b)
{
	b->nev = b->nmev = b->nstr = b->nraw = 0;
	b->last = 0;
	b->next = NULL;
}

/* ---- writer thread ---- */

static int put_raw(struct ingest *ig, const uint8_t *data, size_t len)
{
	struct store_batch sb = { .raw = data, .nraw = len, .raw_seq = ig->raw_seq++ };
	return store_write_batch(ig->w, ig->artifact, &sb, &ig->werr);
}

/* gzip the batch's raw bytes into zout, storing each full RAW_CHUNK */
static int deflate_raw(struct ingest *ig, const uint8_t *data, size_t len, int last)
{
	int rc;

	ig->zs.next_in = (Bytef *)data;
	ig->zs.avail_in = (uInt)len;
	for (;;) {
		int zr = deflate(&ig->zs, last ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_ERROR)
			return tp_fail(&ig->werr, TP_ERR_NOMEM, NULL, "deflate failed");
		if (ig->zs.avail_out == 0 || (last && zr == Z_STREAM_END && ig->zs.avail_out < RAW_CHUNK)) {
			if ((rc = put_raw(ig, ig->zout, RAW_CHUNK - ig->zs.avail_out)))
				return rc;
			ig->zs.next_out = ig->zout;
			ig->zs.avail_out = RAW_CHUNK;
		}
		if (last ? zr == Z_STREAM_END : ig->zs.avail_in == 0)
			return TP_OK;
	}
}

static int write_batch(struct ingest *ig, struct batch *b)
{
	struct store_batch sb = {
		.ev = b->ev, .nev = b->nev, .ev_first = b->ev_first,
		.mev = b->mev, .mev_oom = b->oom, .nmev = b->nmev, .mev_first = b->mev_first,
		.str = b->str, .nstr = b->nstr,
	};
	int rc;

	if (!ig->deflating && b->nraw) {
		sb.raw = b->raw;
		sb.nraw = b->nraw;
		sb.raw_seq = ig->raw_seq++;
	}
	if ((sb.nev || sb.nmev || sb.nstr || sb.nraw) &&
	    (rc = store_write_batch(ig->w, ig->artifact, &sb, &ig->werr)))
		return rc;
	if (ig->deflating && (b->nraw || b->last))
		return deflate_raw(ig, b->raw, b->nraw, b->last);
	return TP_OK;
}

static void *writer_main(void *arg)
{
	struct ingest *ig = arg;
	struct batch *b;
	int last = 0, rc = TP_OK;

	while (!last) {
		pthread_mutex_lock(&ig->mu);
		while (!ig->ready_head)
			pthread_cond_wait(&ig->cond, &ig->mu);
		b = ig->ready_head;
		ig->ready_head = b->next;
		if (!ig->ready_head)
			ig->ready_tail = NULL;
		pthread_mutex_unlock(&ig->mu);

		last = b->last;
		if (!rc)
			rc = write_batch(ig, b);	/* after a failure, batches are only drained */

		pthread_mutex_lock(&ig->mu);
		if (rc && !ig->writer_rc)
			ig->writer_rc = rc;
		batch_reset(b);
		b->next = ig->free_list;
		ig->free_list = b;
		pthread_cond_broadcast(&ig->cond);
		pthread_mutex_unlock(&ig->mu);
	}
	return NULL;
}

/* ---- caller's thread: batches ---- */

static int submit(struct ingest *ig, int last)
{
	struct batch *b = ig->cur;
	int rc;

	b->last = last;
	pthread_mutex_lock(&ig->mu);
	if (ig->ready_tail)
		ig->ready_tail->next = b;
	else
		ig->ready_head = b;
	ig->ready_tail = b;
	pthread_cond_broadcast(&ig->cond);
	ig->cur = NULL;
	if (!last) {
		while (!ig->free_list)
			pthread_cond_wait(&ig->cond, &ig->mu);
		ig->cur = ig->free_list;
		ig->free_list = ig->cur->next;
		ig->cur->next = NULL;
		ig->cur->ev_first = ig->nev;
		ig->cur->mev_first = ig->nmev;
	}
	rc = ig->writer_rc;
	pthread_mutex_unlock(&ig->mu);
	return rc;
}

/* ---- caller's thread: the parser's sink ---- */

static int is_step_name(const char *s, size_t len, int64_t *n)
{
	static const char prefix[] = "ProfilerStep#";
	size_t i = sizeof(prefix) - 1;
	int64_t v = 0;

	if (len <= i || memcmp(s, prefix, i))
		return 0;
	for (; i < len; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (INT64_MAX - 9) / 10)
			return 0;
		v = v * 10 + (s[i] - '0');
	}
	*n = v;
	return 1;
}

static int sink_string(void *payload, uint32_t id, const char *s, size_t len)
{
	struct ingest *ig = payload;
	struct batch *b = ig->cur;
	int64_t n;

	if (b->nstr == b->strcap) {
		size_t cap = b->strcap ? b->strcap * 2 : 1024;
		struct store_string *ns = realloc(b->str, cap * sizeof(*ns));
		if (!ns)
			return tp_fail(&ig->perr, TP_ERR_NOMEM, NULL, "out of memory");
		b->str = ns;
		b->strcap = cap;
	}
	b->str[b->nstr++] = (struct store_string){ .id = id, .len = (uint32_t)len, .s = s };
	if (id >= ig->is_step_cap) {
		size_t cap = ig->is_step_cap ? ig->is_step_cap * 2 : 4096;
		while (cap <= id)
			cap *= 2;
		uint8_t *ns = realloc(ig->is_step, cap);
		if (!ns)
			return tp_fail(&ig->perr, TP_ERR_NOMEM, NULL, "out of memory");
		memset(ns + ig->is_step_cap, 0, cap - ig->is_step_cap);
		ig->is_step = ns;
		ig->is_step_cap = cap;
	}
	ig->is_step[id] = is_step_name(s, len, &n);
	return TP_OK;
}

static int add_step(struct ingest *ig, const struct tp_event *e)
{
	const char *name = trace_string(ig->tp, e->name);
	int64_t n = 0;

	is_step_name(name, strlen(name), &n);
	if (ig->nsteps == ig->steps_cap) {
		size_t cap = ig->steps_cap ? ig->steps_cap * 2 : 64;
		struct store_step *ns = realloc(ig->steps, cap * sizeof(*ns));
		if (!ns)
			return tp_fail(&ig->perr, TP_ERR_NOMEM, NULL, "out of memory");
		ig->steps = ns;
		ig->steps_cap = cap;
	}
	ig->steps[ig->nsteps++] = (struct store_step){ .step = n, .start_ns = e->ts_ns,
						       .dur_ns = e->have & TH_DUR ? e->dur_ns : 0 };
	return TP_OK;
}

static int sink_event(void *payload, const struct tp_event *e)
{
	struct ingest *ig = payload;
	struct batch *b = ig->cur;
	int rc;

	if (!ig->first_ts && (e->have & TH_TS))
		ig->first_ts = e->ts_ns;
	if (e->ph == 'i' && (e->name == TRACE_S_MEMORY || e->name == TRACE_S_OOM)) {
		b->oom[b->nmev] = e->name == TRACE_S_OOM;
		b->mev[b->nmev++] = *e;
		ig->nmev++;
		if ((e->have & TH_TOTAL_ALLOC) && e->dev_type != 0 && e->total_alloc > ig->peak_alloc)
			ig->peak_alloc = e->total_alloc;
		if (b->nmev == BATCH_MEM_EVENTS && (rc = submit(ig, 0)))
			return rc;
		return TP_OK;
	}
	if ((e->ph == 's' || e->ph == 'f' || e->ph == 't') &&
	    (e->cat == TRACE_S_AC2G || e->cat == TRACE_S_ASYNC || e->cat == TRACE_S_ASYNC_CPU_TO_GPU))
		return TP_OK;
	if (e->ph == 'X' && e->name < ig->is_step_cap && ig->is_step[e->name] &&
	    e->cat != TRACE_S_GPU_USER_ANNOTATION && (rc = add_step(ig, e)))
		return rc;
	b->ev[b->nev++] = *e;
	ig->nev++;
	if (b->nev == BATCH_EVENTS && (rc = submit(ig, 0)))
		return rc;
	return TP_OK;
}

/* ---- caller's thread: detection and parsing of the inflated bytes ---- */

static int parse_bytes(struct ingest *ig, const uint8_t *data, size_t len)
{
	if (ig->kind == KIND_TRACE)
		return trace_parser_feed(ig->tp, data, len, &ig->perr);
	return TP_OK;
}

static const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/*
 * Decide the kind from the first bytes: a pickle starts with PROTO (0x80);
 * '{' or '[' '{' is a trace; '[' '[' is PyTorch's memory timeline export.
 * Returns 1 when decided, 0 when more bytes are needed.
 */
static int detect(struct ingest *ig, int at_end)
{
	const uint8_t *p = ig->sniff, *end = ig->sniff + ig->nsniff;

	p = skip_ws(p, end);
	if (p == end)
		return at_end || ig->nsniff == sizeof(ig->sniff) ? (ig->kind = KIND_TRACE, 1) : 0;
	if (*p == 0x80) {
		ig->kind = KIND_SNAPSHOT;
	} else if (*p == '[') {
		const uint8_t *q = skip_ws(p + 1, end);
		if (q == end && !at_end && ig->nsniff < sizeof(ig->sniff))
			return 0;
		ig->kind = q < end && *q == '[' ? KIND_TIMELINE : KIND_TRACE;
	} else {
		ig->kind = KIND_TRACE;	/* anything else is judged by the trace parser */
	}
	return 1;
}

static int start_parser(struct ingest *ig, const char *hint)
{
	struct trace_sink sink = { .string = sink_string, .event = sink_event, .payload = ig };

	if (hint && *hint) {
		enum kind k = KIND_UNKNOWN;
		for (int i = 1; i < 4; i++)
			if (!strcmp(hint, kind_names[i]))
				k = (enum kind)i;
		if (k != ig->kind)
			return tp_fail(&ig->perr, TP_ERR_INVALID, "kind_mismatch",
				       "kind=%s was given but the upload looks like a %s", hint,
				       kind_names[ig->kind]);
	}
	if (ig->kind != KIND_TRACE)
		return tp_fail(&ig->perr, TP_ERR_UNSUPPORTED, "unsupported_kind",
			       "%s uploads are kept but not analysed by this server version",
			       kind_names[ig->kind]);
	ig->tp = trace_parser_new(&ig->lim.trace, &sink);
	if (!ig->tp)
		return tp_fail(&ig->perr, TP_ERR_NOMEM, NULL, "out of memory");
	return TP_OK;
}

/* inflate's sink: the inflated bytes */
static int on_inflated(void *payload, const uint8_t *data, size_t len)
{
	struct ingest *ig = payload;
	int rc;

	if (ig->kind == KIND_UNKNOWN) {
		size_t take = sizeof(ig->sniff) - ig->nsniff < len ? sizeof(ig->sniff) - ig->nsniff : len;
		memcpy(ig->sniff + ig->nsniff, data, take);
		ig->nsniff += take;
		data += take;
		len -= take;
		if (!detect(ig, 0))
			return TP_OK;
		if ((rc = start_parser(ig, ig->kind_hint)) ||
		    (rc = parse_bytes(ig, ig->sniff, ig->nsniff)))
			return rc;
	}
	return len ? parse_bytes(ig, data, len) : TP_OK;
}

/* ---- public ---- */

int ingest_begin(struct store *st, const struct ingest_limits *lim, const struct ingest_request *req,
		 struct ingest **out, struct tp_errbuf *err)
{
	struct ingest *ig = calloc(1, sizeof(*ig));
	int rc, i;

	if (!ig)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	ig->store = st;
	ig->lim = lim ? *lim : ingest_default_limits;
	ig->req_rank = req->rank;
	ig->peak_alloc = -1;
	snprintf(ig->kind_hint, sizeof(ig->kind_hint), "%s", req->kind ? req->kind : "");
	sha256_init(&ig->sha);
	inflate_init(&ig->inf, ig->lim.max_inflated, ig->lim.max_ratio, on_inflated, ig);
	pthread_mutex_init(&ig->mu, NULL);
	pthread_cond_init(&ig->cond, NULL);
	for (i = 0; i < NBATCH; i++) {
		if (batch_alloc(&ig->pool[i])) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto fail;
		}
		if (i) {
			ig->pool[i].next = ig->free_list;
			ig->free_list = &ig->pool[i];
		}
	}
	ig->cur = &ig->pool[0];
	if ((rc = store_writer_open(st, &ig->w, err)) ||
	    (rc = store_artifact_begin(ig->w, req->run, req->rank < 0 ? 0 : req->rank,
				       req->kind && *req->kind ? req->kind : "unknown", req->name,
				       &ig->artifact, err)))
		goto fail;
	if (pthread_create(&ig->writer, NULL, writer_main, ig)) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "cannot start the writer thread");
		store_artifact_drop(ig->w, ig->artifact);
		goto fail;
	}
	ig->writer_started = 1;
	*out = ig;
	return TP_OK;
fail:
	ig->artifact = 0;
	ingest_abort(ig);
	return rc;
}

static int feed_piece(struct ingest *ig, const uint8_t *data, size_t len)
{
	struct batch *b;

	if (!ig->inf_started) {
		/* the first two bytes decide how the raw copy is stored */
		ig->inf_started = 1;
		if (!(len >= 2 && data[0] == 0x1f && data[1] == 0x8b)) {
			ig->zout = malloc(RAW_CHUNK);
			if (!ig->zout || deflateInit2(&ig->zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8,
						      Z_DEFAULT_STRATEGY) != Z_OK)
				return tp_fail(&ig->perr, TP_ERR_NOMEM, NULL, "out of memory");
			ig->zs.next_out = ig->zout;
			ig->zs.avail_out = RAW_CHUNK;
			ig->deflating = 1;
		}
	}
	b = ig->cur;
	memcpy(b->raw + b->nraw, data, len);
	b->nraw += len;
	if (!ig->parse_rc)
		ig->parse_rc = inflate_feed(&ig->inf, data, len, &ig->perr);
	/* a parse failure may have submitted batches: cur is current again */
	if (ig->cur->nraw >= RAW_CHUNK)
		return submit(ig, 0);
	return TP_OK;
}

int ingest_feed(struct ingest *ig, const void *data, size_t len)
{
	const uint8_t *p = data;
	int rc;

	if (ig->too_big)
		return TP_ERR_TOOBIG;
	ig->body += len;
	if (ig->body > ig->lim.max_body) {
		ig->too_big = 1;
		return TP_ERR_TOOBIG;
	}
	sha256_update(&ig->sha, data, len);
	while (len) {
		size_t n = len < FEED_PIECE ? len : FEED_PIECE;
		if ((rc = feed_piece(ig, p, n))) {
			if (!ig->parse_rc)
				ig->parse_rc = rc;
			if (rc != TP_ERR_INVALID && rc != TP_ERR_TOOBIG && rc != TP_ERR_UNSUPPORTED)
				return rc;	/* the writer failed: nothing more can be kept */
		}
		p += n;
		len -= n;
	}
	return TP_OK;
}

/* Wait for the writer to finish; returns its result. */
static int drain(struct ingest *ig)
{
	int rc;

	if (!ig->writer_started)
		return TP_OK;
	if (ig->cur)
		submit(ig, 1);
	pthread_join(ig->writer, NULL);
	ig->writer_started = 0;
	rc = ig->writer_rc;
	return rc;
}

static void ingest_free(struct ingest *ig)
{
	int i;

	inflate_release(&ig->inf);
	trace_parser_free(ig->tp);
	if (ig->zout)
		deflateEnd(&ig->zs);
	free(ig->zout);
	for (i = 0; i < NBATCH; i++)
		batch_release(&ig->pool[i]);
	free(ig->is_step);
	free(ig->steps);
	store_writer_close(ig->w);
	pthread_mutex_destroy(&ig->mu);
	pthread_cond_destroy(&ig->cond);
	free(ig);
}

static int rank_from_meta(struct ingest *ig)
{
	json_t *di, *r;

	if (ig->req_rank >= 0)
		return ig->req_rank;
	if (ig->tp && (di = json_object_get(trace_meta(ig->tp), "distributedInfo")) &&
	    (r = json_object_get(di, "rank")) && json_is_integer(r) && json_integer_value(r) >= 0 &&
	    json_integer_value(r) <= 65535)
		return (int)json_integer_value(r);
	return 0;
}

void ingest_end(struct ingest *ig, struct ingest_result *res)
{
	struct store_final f = { 0 };
	char sha[65], *meta = NULL;
	int rc = TP_OK;

	memset(res, 0, sizeof(*res));
	if (!ig->body) {
		/* nothing to keep */
		res->rc = tp_fail(&res->err, TP_ERR_INVALID, "empty_body", "the upload is empty");
		ingest_abort(ig);
		return;
	}
	if (!ig->parse_rc) {
		if (!(ig->parse_rc = inflate_finish(&ig->inf, &ig->perr)) && ig->kind == KIND_UNKNOWN) {
			detect(ig, 1);
			if (!(ig->parse_rc = start_parser(ig, ig->kind_hint)))
				ig->parse_rc = parse_bytes(ig, ig->sniff, ig->nsniff);
		}
		if (!ig->parse_rc && ig->tp)
			ig->parse_rc = trace_parser_finish(ig->tp, &ig->perr);
	}
	rc = drain(ig);
	sha256_final_hex(&ig->sha, sha);
	f.sha256 = sha;
	f.bytes = ig->body;
	f.kind = ig->kind == KIND_UNKNOWN ? "unknown" : kind_names[ig->kind];
	f.raw_encoding = ig->deflating ? "gzip" : "upload";
	f.rank = rank_from_meta(ig);
	f.peak_allocated = ig->peak_alloc;
	if (ig->tp) {
		f.events = trace_event_count(ig->tp);
		trace_base_ns(ig->tp, &f.base_ns);
		/* an absolute trace that also names a base: its times are already epoch ns */
		if (ig->first_ts > 946684800000000000LL)
			f.base_ns = 0;
		meta = json_dumps(trace_meta(ig->tp), JSON_COMPACT);
		f.meta_json = meta;
	}
	f.steps = ig->steps;
	f.nsteps = ig->nsteps;
	if (rc) {
		/* the database failed: nothing of this upload can be trusted */
		res->rc = rc;
		res->err = ig->werr;
		store_artifact_drop(ig->w, ig->artifact);
	} else if (ig->parse_rc) {
		res->rc = ig->parse_rc;
		res->err = ig->perr;
		f.error_code = ig->perr.code;
		f.error_msg = ig->perr.msg;
		if ((rc = store_artifact_fail(ig->w, ig->artifact, &f, &res->artifact, &res->err))) {
			res->rc = rc;
			store_artifact_drop(ig->w, ig->artifact);
		} else {
			res->duplicate = res->artifact != 0;
			if (!res->artifact)
				res->artifact = ig->artifact;
			res->kept = 1;
		}
	} else if ((rc = store_artifact_commit(ig->w, ig->artifact, &f, &res->artifact, &res->err))) {
		res->rc = rc;
		store_artifact_drop(ig->w, ig->artifact);
	} else {
		res->duplicate = res->artifact != 0;
		if (!res->artifact)
			res->artifact = ig->artifact;
	}
	free(meta);
	ingest_free(ig);
}

void ingest_abort(struct ingest *ig)
{
	if (!ig)
		return;
	drain(ig);
	if (ig->artifact && ig->w)
		store_artifact_drop(ig->w, ig->artifact);
	ingest_free(ig);
}

void ingest_buffer(struct store *st, const struct ingest_limits *lim, const struct ingest_request *req,
		   const void *data, size_t len, struct ingest_result *res)
{
	struct ingest *ig;
	int rc;

	memset(res, 0, sizeof(*res));
	if ((rc = ingest_begin(st, lim, req, &ig, &res->err))) {
		res->rc = rc;
		return;
	}
	if ((rc = ingest_feed(ig, data, len))) {
		if (rc == TP_ERR_TOOBIG)
			tp_fail(&res->err, rc, "body_too_large", "the upload exceeds the cap of %llu bytes",
				(unsigned long long)ig->lim.max_body);
		res->rc = rc;
		ingest_abort(ig);
		return;
	}
	ingest_end(ig, res);
}
