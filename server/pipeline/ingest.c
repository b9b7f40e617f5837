/*
 * ingest.c: the upload pipeline (see ingest.h).
 *
 * Three stages on three threads, joined by bounded channels:
 *
 *   A  caller (HTTP) thread: sha256, body cap, raw blocks ----------------+
 *        inflate -> inflated blocks --> B  parser thread: detect kind,   |
 *                                          parse, fill event batches --> C  writer thread:
 *                                                                           raw chunks, event rows
 *
 * Measured on a 296 MB trace (2 cores): inflate 0.9 s, parse 1.2 s, SQLite
 * 0.9 s; run one after another on one thread they cap ingest at about
 * 130 MB/s, pipelined they share both cores. Buffers circulate between a
 * free channel and a work channel per kind, so memory is bounded (NRAW raw
 * blocks, NINF inflated blocks, NBATCH event batches) and a stage that falls
 * behind makes the others wait. Channel capacities exceed the buffers in
 * circulation, so a send never blocks; only taking a free buffer does, and
 * the writer, which every buffer returns through, waits on nothing but its
 * own input: no cycle, no deadlock.
 *
 * Errors: a parse failure stops parsing but not the raw copy (a body that
 * does not parse is kept); a writer failure stops everything. The writer
 * always drains its input, so no producer waits forever.
 *
 * What is stored: every event except [memory] ones (their own table) and
 * CPU->GPU flow events (cat ac2g, or async/async_cpu_to_gpu in older traces),
 * which only repeat the kernel's "correlation" arg and make up 30 % of a
 * trace's rows. ProfilerStep#N spans are collected on the way.
 *
 * Raw bytes: a gzip upload is kept as sent; anything else is compressed by
 * the writer with zstd (level 1, a frame per 256 KiB: compress_raw),
 * raw_encoding "zstd-frames" (before 2026-11-29: gzip members,
 * "gzip-members", which /raw still reads). The file is the body, unless
 * the body came with Content-Encoding: gzip (the collector gzips plain
 * files in transit): then the file is what the gzip holds, kept gzipped as
 * sent (raw_encoding "gzip"), and its sha256 and size are the inflated
 * bytes'. So the same file sent either way is one artifact, and /raw gives
 * it back as it was.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_createCCtx_advanced: its memory through tp_malloc */
#include <zstd.h>
#include <zstd_errors.h>

#include "alloc.h"
#include "analysis/analysis.h"
#include "ingest/inflate.h"
#include "pipeline/formats.h"
#include "pipeline/runrank.h"
#include "pipeline/ingest.h"
#include "pipeline/overlap.h"
#include "pipeline/workers.h"
#include "sha256.h"

#define LOG_PREFIX "ingest"

#define NRAW 4
#define NINF 4
#define NBATCH 3
#define RAW_BLOCK (1u << 20)	/* raw bytes per stored chunk */
#define INF_BLOCK (256u << 10)
#define BATCH_EVENTS 8192	/* 2.2 MiB of events: 16,384 cost every upload 6.7 MiB more, at the same speed */
#define BATCH_MEM_EVENTS 4096
/*
 * A small plain body's batches are a quarter of that: a 2 MiB chunk's 7 K events made one
 * batch, which the writer took only once the parser had ended, 0.7-1.2 ms it then waited for
 * (a quarter: 0.4). Each batch is a commit of its own, so a large body keeps the larger: the
 * 1 GB trace in batches of 2,048 took 3.4-3.8 s, not 2.9-3.5 (bench/results/small_batches-20261130.txt).
 */
#define SMALL_BODY (16ull << 20)

const struct ingest_limits ingest_default_limits = {
	.max_body = 16ull << 30,
	.max_inflated = 64ull << 30,
	.max_ratio = 250,
	.max_pickle_values = 1ull << 25,
	.trace = {
		.max_depth = 64,
		.max_token = 8u << 20,
		.max_events = 1ull << 31,
		.max_strings_bytes = 256u << 20,
		.max_meta_bytes = 1u << 20,
	},
};

enum { ENC_UNKNOWN, ENC_UTF8, ENC_UTF16LE, ENC_UTF16BE };

/* ---- channels ---- */

enum item_kind { IT_RAW, IT_INFLATED, IT_EVENTS, IT_END };

struct item {
	enum item_kind kind;
	void *ptr;
};

struct chan {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item ring[16];
	size_t head, n;
};

static void chan_init(struct chan *c)
{
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->head = c->n = 0;
}

static void chan_destroy(struct chan *c)
{
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
}

static void chan_send(struct chan *c, enum item_kind kind, void *ptr)
{
	pthread_mutex_lock(&c->mu);
	while (c->n == sizeof(c->ring) / sizeof(c->ring[0]))
		pthread_cond_wait(&c->cv, &c->mu);	/* not reached: see the top of the file */
	c->ring[(c->head + c->n++) % (sizeof(c->ring) / sizeof(c->ring[0]))] =
		(struct item){ kind, ptr };
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static struct item chan_recv(struct chan *c)
{
	struct item it;

	pthread_mutex_lock(&c->mu);
	while (c->n == 0)
		pthread_cond_wait(&c->cv, &c->mu);
	it = c->ring[c->head];
	c->head = (c->head + 1) % (sizeof(c->ring) / sizeof(c->ring[0]));
	c->n--;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return it;
}

/* ---- buffers ---- */

struct block {
	uint8_t *data;
	size_t len;
};

struct batch {
	struct tp_event *ev, *mev;
	size_t nev, nmev;
	uint64_t ev_first, mev_first;
	struct store_string *str;
	size_t nstr, strcap;
};

struct ingest {
	struct ingest_limits lim;
	struct store_writer *w;
	int64_t artifact;
	char run[129];
	int req_rank;
	int joins;		/* req_rank already has a trace: a trace upload skips its own analysis */
	struct overlap_cache *oc;	/* the request's overlaps */
	uint64_t store;			/* store_serial */
	struct overlap_prints *prints;	/* a trace's events' fingerprints, when oc (NULL past its cap) */
	char kind_hint[32];
	atomic_int stop;	/* the writer failed, or the upload is abandoned */
	atomic_int parse_failed;	/* B failed: A need not inflate any more */

	struct block raw[NRAW], inf[NINF];
	struct batch batches[NBATCH];
	struct chan raw_free, inf_free, batch_free;	/* buffers not in use */
	struct chan parse_in, write_in;			/* work for B and C */
	struct worker *parser, *writer;	/* kept threads (workers.h) */
	int threads;		/* how many of parser, writer were started */

	/* A: the caller's thread */
	struct sha256 sha;	/* of the file: C hashes a body kept as sent, A an encoded one's inflated bytes */
	uint64_t body;
	int too_big;
	int started;		/* the first bytes were seen */
	int compressing;	/* raw is plain: the writer compresses it (set by A before the first raw block) */
	int content_gzip;	/* the request said Content-Encoding: gzip */
	uint64_t length;	/* the body's bytes when told, else 0 */
	size_t batch_ev, batch_mev;	/* events a batch holds before it goes to the writer (SMALL_BODY) */
	int encoded;		/* and the body is gzip: the file is its inflated bytes (hashed in on_inflated) */
	uint64_t inflated;	/* inflated bytes so far (the file's size when encoded) */
	struct inflate_stage inf_stage;
	int a_rc;		/* inflate failure */
	struct tp_errbuf a_err;
	struct block *raw_cur, *inf_cur;

	/* B: the parser thread */
	int told;		/* the format is known: fmt (NULL: none of them, 415) */
	const struct format *fmt;
	void *ps;		/* fmt's parser */
	uint8_t sniff[FMT_SNIFF];	/* a text report may need a few lines to tell */
	size_t nsniff;
	int enc;		/* ENC_*: a byte order mark read as such */
	uint8_t bom[3];		/* the first bytes, until the mark is told */
	size_t nbom;
	uint8_t odd;		/* UTF-16: a code unit's first byte, when a piece ends in it */
	int nodd;
	uint32_t hi;		/* UTF-16: a high surrogate waiting for its low one; 0 none */
	uint8_t *u8;		/* UTF-16 pieces as UTF-8 */
	size_t u8cap;
	struct trace_parser *tp;	/* ps, when fmt is the trace's (fmt->events) */
	int b_rc;		/* detect or parse failure */
	struct tp_errbuf b_err;
	struct batch *cur;
	uint64_t nev, nmev;
	struct analysis *an;	/* steps, ops, kernels: computed as the events pass */
	char device[16];
	int64_t peak_alloc;
	int64_t first_ts;	/* of the first event with a ts; 0 before */
	int64_t ts_lo, ts_hi;	/* the timed events' ts as written, but 'M' ones (ts_lo > ts_hi: none): overlap_check's */

	/* C: the writer thread */
	int c_rc;
	struct tp_errbuf c_err;
	ZSTD_CCtx *zc;		/* the raw copy's compressor (compress_raw) */
	uint8_t *zout;
	size_t nzout;
	uint32_t raw_seq;
};

static void batch_reset(struct batch *b)
{
	b->nev = b->nmev = b->nstr = 0;
}

/* ---- C: the writer ---- */

static int put_raw(struct ingest *ig, const uint8_t *data, size_t len)
{
	struct store_batch sb = { .raw = data, .nraw = len, .raw_seq = ig->raw_seq++ };

	return store_write_batch(ig->w, ig->artifact, &sb, &ig->c_err);
}

/* zstd allocates through tp_malloc (counted, and failed on purpose by the tests) */
static void *zc_malloc(void *opaque, size_t n) { (void)opaque; return tp_malloc(n); }
static void zc_free(void *opaque, void *p) { (void)opaque; tp_free(p); }

/*
 * Compress a plain body's bytes for its raw copy: each piece the writer
 * gets (INF_BLOCK, the last one shorter) becomes a zstd frame of its own,
 * at level 1: on the V100 fixture 960 MB/s and 16.8x against libdeflate's
 * gzip at level 1, 441 MB/s and 12.2x, which this replaced (the writer,
 * which bounds a plain upload, spent 57 % of its time in it). Frames are
 * gathered in zout and stored with the next batch of events (write_events),
 * or as a row of their own once another might not fit, so rows stay under
 * RAW_BLOCK. The rows, one after another, are one zstd stream (raw_encoding
 * "zstd-frames"). last: store what zout holds.
 */
static int compress_raw(struct ingest *ig, const uint8_t *data, size_t len, int last)
{
	size_t bound, n;
	int rc;

	/* both kept with the pooled buffers (bufset): made by an upload's first raw piece */
	if (!ig->zout && !(ig->zout = tp_malloc(RAW_BLOCK)))
		return tp_fail(&ig->c_err, TP_ERR_NOMEM, NULL, "out of memory");
	if (!ig->zc) {
		ZSTD_customMem mem = { zc_malloc, zc_free, NULL };
		if (!(ig->zc = ZSTD_createCCtx_advanced(mem)))
			return tp_fail(&ig->c_err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	bound = len ? ZSTD_compressBound(len) : 0;
	if (ig->nzout && (last || ig->nzout + bound > RAW_BLOCK)) {
		if ((rc = put_raw(ig, ig->zout, ig->nzout)))
			return rc;
		ig->nzout = 0;
	}
	if (!len)
		return TP_OK;
	if (bound > RAW_BLOCK)	/* pieces are INF_BLOCK at most */
		return tp_fail(&ig->c_err, TP_ERR_IO, NULL, "a raw piece of %zu bytes is too long", len);
	n = ZSTD_compressCCtx(ig->zc, ig->zout + ig->nzout, RAW_BLOCK - ig->nzout, data, len, 1);
	if (ZSTD_isError(n))
		return tp_fail(&ig->c_err, ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ? TP_ERR_NOMEM
												    : TP_ERR_IO,
			       NULL, "compressing the raw copy failed: %s", ZSTD_getErrorName(n));
	ig->nzout += n;
	return TP_OK;
}

/*
 * A batch of events, and the raw copy's frames compressed since the last one, in one
 * transaction. Stored alone at the end, a 2 MiB chunk's frames were a commit more after the
 * parser's last batch: the writer ended 1.2-1.7 ms after the parser, now 0.5-0.6 ms (medians
 * of 20 chunks in each of four sittings; the answer waits for the writer).
 */
static int write_events(struct ingest *ig, const struct batch *b)
{
	struct store_batch sb = {
		.ev = b->ev, .nev = b->nev, .ev_first = b->ev_first,
		.mev = b->mev, .nmev = b->nmev, .mev_first = b->mev_first,
		.str = b->str, .nstr = b->nstr,
	};
	int rc;

	if (!sb.nev && !sb.nmev && !sb.nstr)
		return TP_OK;
	if (ig->compressing && ig->nzout) {
		sb.raw = ig->zout;
		sb.nraw = ig->nzout;
		sb.raw_seq = ig->raw_seq++;
	}
	if (!(rc = store_write_batch(ig->w, ig->artifact, &sb, &ig->c_err)))
		ig->nzout = 0;
	return rc;
}

static void *writer_main(void *arg)
{
	struct ingest *ig = arg;
	int ends = 0;

	tp_thread_name("ts-store");
	while (ends < 2) {
		struct item it = chan_recv(&ig->write_in);
		if (it.kind == IT_RAW) {
			struct block *b = it.ptr;
			/* the bytes as sent, in order: their sha256 here, off the HTTP thread (an encoded
			 * body's is of its inflated bytes: on_inflated) */
			if (!ig->encoded)
				sha256_update(&ig->sha, b->data, b->len);
			if (!ig->c_rc && b->len)
				ig->c_rc = ig->compressing ? compress_raw(ig, b->data, b->len, 0)
							 : put_raw(ig, b->data, b->len);
			b->len = 0;
			chan_send(&ig->raw_free, IT_RAW, b);
		} else if (it.kind == IT_EVENTS) {
			struct batch *b = it.ptr;
			if (!ig->c_rc)
				ig->c_rc = write_events(ig, b);
			batch_reset(b);
			chan_send(&ig->batch_free, IT_EVENTS, b);
		} else {
			ends++;
		}
		if (ig->c_rc)
			atomic_store(&ig->stop, 1);	/* after a failure, items are only drained */
	}
	if (!ig->c_rc && ig->compressing && !atomic_load(&ig->stop))
		ig->c_rc = compress_raw(ig, NULL, 0, 1);
	return NULL;
}

/* ---- B: the parser ---- */

static int next_batch(struct ingest *ig)
{
	chan_send(&ig->write_in, IT_EVENTS, ig->cur);
	ig->cur = chan_recv(&ig->batch_free).ptr;
	ig->cur->ev_first = ig->nev;
	ig->cur->mev_first = ig->nmev;
	return atomic_load(&ig->stop) ? TP_ERR_DB : TP_OK;
}

static int sink_string(void *payload, uint32_t id, const char *s, size_t len)
{
	struct ingest *ig = payload;
	struct batch *b = ig->cur;

	if (b->nstr == b->strcap) {
		size_t cap = b->strcap ? b->strcap * 2 : 1024;
		struct store_string *ns = tp_realloc(b->str, cap * sizeof(*ns));
		if (!ns)
			return tp_fail(&ig->b_err, TP_ERR_NOMEM, NULL, "out of memory");
		b->str = ns;
		b->strcap = cap;
	}
	b->str[b->nstr++] = (struct store_string){ .id = id, .len = (uint32_t)len, .s = s };
	return TP_OK;
}

/* e, as stored, into ig's prints (dropped when they are too many: the check reads the store instead) */
static void take_print(struct ingest *ig, const struct tp_event *e)
{
	if (ig->prints && overlap_prints_add(ig->prints, e)) {
		overlap_prints_free(ig->prints);
		ig->prints = NULL;
	}
}

static int sink_event(void *payload, const struct tp_event *e)
{
	struct ingest *ig = payload;
	struct batch *b = ig->cur;
	int rc;

	if (!ig->first_ts && (e->have & TH_TS))
		ig->first_ts = e->ts_ns;
	if ((e->have & TH_TS) && e->ph != 'M') {
		ig->ts_lo = e->ts_ns < ig->ts_lo ? e->ts_ns : ig->ts_lo;
		ig->ts_hi = e->ts_ns > ig->ts_hi ? e->ts_ns : ig->ts_hi;
	}
	if (e->ph == 'i' && (e->name == TRACE_S_MEMORY || e->name == TRACE_S_OOM)) {
		take_print(ig, e);
		if (ig->an && (rc = analysis_event(ig->an, e, &ig->b_err)))
			return rc;
		b->mev[b->nmev++] = *e;
		ig->nmev++;
		if ((e->have & TH_TOTAL_ALLOC) && e->dev_type != 0 && e->total_alloc > ig->peak_alloc)
			ig->peak_alloc = e->total_alloc;
		return b->nmev == ig->batch_mev ? next_batch(ig) : TP_OK;
	}
	if ((e->ph == 's' || e->ph == 'f' || e->ph == 't') &&
	    (e->cat == TRACE_S_AC2G || e->cat == TRACE_S_ASYNC || e->cat == TRACE_S_ASYNC_CPU_TO_GPU))
		return TP_OK;
	take_print(ig, e);
	if (ig->an && (rc = analysis_event(ig->an, e, &ig->b_err)))
		return rc;
	b->ev[b->nev++] = *e;
	ig->nev++;
	return b->nev == ig->batch_ev ? next_batch(ig) : TP_OK;
}

/* The format from the first bytes (formats.c); 1 when told, 0 when more bytes are needed. */
static int detect(struct ingest *ig, int at_end)
{
	if (!format_detect(ig->sniff, ig->nsniff, at_end, &ig->fmt))
		return 0;
	ig->told = 1;
	return 1;
}

static const char *an_string(void *payload, uint32_t id)
{
	const char *s = trace_string(payload, id);

	return s ? s : "";
}

static int start_parser(struct ingest *ig)
{
	struct trace_sink sink = { .string = sink_string, .event = sink_event, .payload = ig };
	const char *name = ig->fmt ? ig->fmt->name : "unknown";
	char expected[512];

	if (ig->kind_hint[0] && strcmp(ig->kind_hint, name))
		return tp_fail(&ig->b_err, TP_ERR_INVALID, "kind_mismatch",
			       "kind=%s was given but the upload looks like a %s", ig->kind_hint, name);
	if (!ig->fmt) {
		format_expected(expected, sizeof(expected));
		return tp_fail(&ig->b_err, TP_ERR_UNSUPPORTED, "unsupported_format",
			       "the upload is none of the formats taken; expected %s", expected);
	}
	ig->ps = ig->fmt->open(&(struct fmt_open){ .lim = &ig->lim, .sink = &sink, .device = ig->device,
						   .arg = ig->fmt->arg });
	if (!ig->ps)
		return tp_fail(&ig->b_err, TP_ERR_NOMEM, NULL, "out of memory");
	if (!ig->fmt->events)
		return TP_OK;
	ig->tp = ig->ps;
	/* without them (out of memory) the overlap check reads the upload back from the store */
	if (ig->oc)
		ig->prints = overlap_prints_new(ig->oc, ig->store, ig->joins, an_string, ig->tp);
	/* a trace joining its rank is analysed with the rank, at the next read (runrank.h) */
	if (!ig->joins && (!(ig->an = analysis_new(an_string, ig->tp)) || analysis_spill_behind(ig->an)))
		return tp_fail(&ig->b_err, TP_ERR_NOMEM, NULL, "out of memory");
	return TP_OK;
}

static int feed_parser(struct ingest *ig, const uint8_t *data, size_t len)
{
	return ig->fmt->feed(ig->ps, data, len, &ig->b_err);
}

static int parse_text(struct ingest *ig, const uint8_t *data, size_t len)
{
	int rc;

	while (!ig->told) {
		size_t take = sizeof(ig->sniff) - ig->nsniff < len ? sizeof(ig->sniff) - ig->nsniff : len;
		memcpy(ig->sniff + ig->nsniff, data, take);
		ig->nsniff += take;
		data += take;
		len -= take;
		if (!detect(ig, 0)) {
			if (ig->nsniff < sizeof(ig->sniff))
				return TP_OK;
			ig->nsniff = 0;	/* a full sniff of blank space before the content: passed over */
			if (!len)
				return TP_OK;
			continue;
		}
		if ((rc = start_parser(ig)) || (rc = feed_parser(ig, ig->sniff, ig->nsniff)))
			return rc;
	}
	return len ? feed_parser(ig, data, len) : TP_OK;
}

/* UTF-16 (after its BOM; PowerShell's ">" writes it) to UTF-8, piece by piece. */
static int parse_utf16(struct ingest *ig, const uint8_t *data, size_t len)
{
	size_t need = (len + 1) / 2 * 3 + 4, o = 0;

	if (need > ig->u8cap) {
		uint8_t *b = tp_realloc(ig->u8, need);
		if (!b)
			return tp_fail(&ig->b_err, TP_ERR_NOMEM, NULL, "out of memory");
		ig->u8 = b, ig->u8cap = need;
	}
	for (size_t i = 0; i < len; i++) {
		if (!ig->nodd) {
			ig->odd = data[i], ig->nodd = 1;
			continue;
		}
		ig->nodd = 0;
		uint32_t u = ig->enc == ENC_UTF16LE ? (uint32_t)ig->odd | (uint32_t)data[i] << 8
						    : (uint32_t)ig->odd << 8 | data[i];
		if (ig->hi) {
			if (u < 0xdc00 || u > 0xdfff)
				return tp_fail(&ig->b_err, TP_ERR_INVALID, "invalid_text", "not UTF-16 text: a lone surrogate");
			u = 0x10000 + ((ig->hi - 0xd800) << 10) + (u - 0xdc00);
			ig->hi = 0;
		} else if (u >= 0xd800 && u <= 0xdbff) {
			ig->hi = u;
			continue;
		} else if (u >= 0xdc00 && u <= 0xdfff) {
			return tp_fail(&ig->b_err, TP_ERR_INVALID, "invalid_text", "not UTF-16 text: a lone surrogate");
		}
		if (u < 0x80) {
			ig->u8[o++] = (uint8_t)u;
		} else if (u < 0x800) {
			ig->u8[o++] = (uint8_t)(0xc0 | u >> 6);
			ig->u8[o++] = (uint8_t)(0x80 | (u & 0x3f));
		} else if (u < 0x10000) {
			ig->u8[o++] = (uint8_t)(0xe0 | u >> 12);
			ig->u8[o++] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
			ig->u8[o++] = (uint8_t)(0x80 | (u & 0x3f));
		} else {
			ig->u8[o++] = (uint8_t)(0xf0 | u >> 18);
			ig->u8[o++] = (uint8_t)(0x80 | (u >> 12 & 0x3f));
			ig->u8[o++] = (uint8_t)(0x80 | (u >> 6 & 0x3f));
			ig->u8[o++] = (uint8_t)(0x80 | (u & 0x3f));
		}
	}
	return parse_text(ig, ig->u8, o);
}

/*
 * The upload's first bytes: a UTF-8 byte order mark is passed over, a
 * UTF-16 one turns the rest to UTF-8; then the kind is told from the text.
 */
static int parse_bytes(struct ingest *ig, const uint8_t *data, size_t len)
{
	static const char *const marks[] = { "\xef\xbb\xbf", "\xff\xfe", "\xfe\xff" };
	static const int encs[] = { ENC_UTF8, ENC_UTF16LE, ENC_UTF16BE };
	int rc;

	while (ig->enc == ENC_UNKNOWN && len) {
		int prefix = 0;
		ig->bom[ig->nbom++] = *data++;
		len--;
		for (int m = 0; m < 3; m++) {
			if (memcmp(ig->bom, marks[m], ig->nbom))
				continue;
			if (ig->nbom == strlen(marks[m]))
				ig->enc = encs[m];
			prefix = 1;
		}
		if (!prefix) {
			ig->enc = ENC_UTF8;	/* no mark: the bytes are the text's */
			if ((rc = parse_text(ig, ig->bom, ig->nbom)))
				return rc;
		}
	}
	if (!len)
		return TP_OK;
	return ig->enc == ENC_UTF8 ? parse_text(ig, data, len) : parse_utf16(ig, data, len);
}

static int parse_end(struct ingest *ig)
{
	int rc;

	if (ig->enc == ENC_UNKNOWN && ig->nbom) {
		ig->enc = ENC_UTF8;	/* fewer bytes than a mark: they are the text */
		if ((rc = parse_text(ig, ig->bom, ig->nbom)))
			return rc;
	}
	if (ig->nodd || ig->hi)
		return tp_fail(&ig->b_err, TP_ERR_INVALID, "invalid_text", "not UTF-16 text: it ends inside a character");
	if (!ig->told) {
		detect(ig, 1);
		if ((rc = start_parser(ig)) || (rc = feed_parser(ig, ig->sniff, ig->nsniff)))
			return rc;
	}
	return ig->fmt->finish(ig->ps, &ig->b_err);
}

static int highest(void *arg, const struct mem_point *p)
{
	int64_t *best = arg;

	if (mem_point_total(p) > *best)
		*best = mem_point_total(p);
	return 0;
}

static void *parser_main(void *arg)
{
	struct ingest *ig = arg;

	tp_thread_name("ts-parse");
	for (;;) {
		struct item it = chan_recv(&ig->parse_in);
		if (it.kind == IT_END) {
			/* it.ptr: A saw the whole body and the inflate stage ended well */
			if (!ig->b_rc && it.ptr && !atomic_load(&ig->stop))
				ig->b_rc = parse_end(ig);
			break;
		}
		struct block *b = it.ptr;
		if (!ig->b_rc && !atomic_load(&ig->stop) && (ig->b_rc = parse_bytes(ig, b->data, b->len)))
			atomic_store(&ig->parse_failed, 1);
		b->len = 0;
		chan_send(&ig->inf_free, IT_INFLATED, b);
	}
	chan_send(&ig->write_in, IT_EVENTS, ig->cur);
	ig->cur = NULL;
	chan_send(&ig->write_in, IT_END, NULL);
	return NULL;
}

/* ---- A: the caller's thread ---- */

/* Append to the block in *cur (taken from pool when NULL); full blocks go to dest. */
static void block_append(struct block **cur, struct chan *pool, struct chan *dest, enum item_kind kind,
			 size_t cap, const uint8_t *data, size_t len)
{
	while (len) {
		struct block *b = *cur;
		size_t take;
		if (!b)
			b = *cur = chan_recv(pool).ptr;
		take = cap - b->len < len ? cap - b->len : len;
		memcpy(b->data + b->len, data, take);
		b->len += take;
		data += take;
		len -= take;
		if (b->len == cap) {
			chan_send(dest, kind, b);
			*cur = NULL;
		}
	}
}

/* inflate's sink: inflated bytes, into blocks for the parser */
static int on_inflated(void *payload, const uint8_t *data, size_t len)
{
	struct ingest *ig = payload;

	ig->inflated += len;
	if (ig->encoded)
		sha256_update(&ig->sha, data, len);
	block_append(&ig->inf_cur, &ig->inf_free, &ig->parse_in, IT_INFLATED, INF_BLOCK, data, len);
	return atomic_load(&ig->stop) ? TP_ERR_DB : TP_OK;
}

int ingest_feed(struct ingest *ig, const void *data, size_t len)
{
	if (ig->too_big)
		return TP_ERR_TOOBIG;
	if (atomic_load(&ig->stop))
		return TP_ERR_DB;
	ig->body += len;
	if (ig->body > ig->lim.max_body) {
		ig->too_big = 1;
		return TP_ERR_TOOBIG;
	}
	if (!len)
		return TP_OK;
	if (!ig->started) {
		/* the first bytes decide how the raw copy is stored */
		ig->started = 1;
		ig->compressing = !(len >= 2 && ((const uint8_t *)data)[0] == 0x1f &&
				  ((const uint8_t *)data)[1] == 0x8b);
		ig->encoded = ig->content_gzip && !ig->compressing;
		/* set before the parser sees a byte (the block that brings it goes after this) */
		if (ig->compressing && !ig->content_gzip && ig->length && ig->length <= SMALL_BODY) {
			ig->batch_ev = BATCH_EVENTS / 4;
			ig->batch_mev = BATCH_MEM_EVENTS / 4;
		}
	}
	/* a body the writer compresses goes to it in smaller blocks, so that it compresses while
	 * the parser parses (a 1 MiB chunk would otherwise be compressed only once it has all
	 * arrived); the rows it stores are RAW_BLOCK of zstd all the same. A gzip body is stored
	 * in its blocks. */
	block_append(&ig->raw_cur, &ig->raw_free, &ig->write_in, IT_RAW, ig->compressing ? INF_BLOCK : RAW_BLOCK,
		     data, len);
	/* after an inflate failure, or once the parser has failed, only the raw copy goes on
	 * (an encoded body inflates to the end all the same: its sha256 is of the inflated bytes) */
	if (!ig->a_rc && (ig->encoded || !atomic_load(&ig->parse_failed)))
		ig->a_rc = inflate_feed(&ig->inf_stage, data, len, &ig->a_err);
	return atomic_load(&ig->stop) ? TP_ERR_DB : TP_OK;
}

/* Let B and C run out and wait for them (their threads go back to workers.c). ok: the body ended and inflated well. */
static void finish_threads(struct ingest *ig, int ok)
{
	if (ig->threads < 2)
		return;
	if (ig->inf_cur && ig->inf_cur->len)
		chan_send(&ig->parse_in, IT_INFLATED, ig->inf_cur);
	else if (ig->inf_cur)
		chan_send(&ig->inf_free, IT_INFLATED, ig->inf_cur);
	ig->inf_cur = NULL;
	chan_send(&ig->parse_in, IT_END, ok ? ig : NULL);
	if (ig->raw_cur)
		chan_send(&ig->write_in, IT_RAW, ig->raw_cur);
	ig->raw_cur = NULL;
	chan_send(&ig->write_in, IT_END, NULL);
	worker_wait(ig->parser);
	worker_wait(ig->writer);
	ig->threads = 0;
}

/*
 * The buffers of finished uploads, kept for the next ones: fresh ones cost a
 * page fault per page touched, and returning them costs a madvise, which
 * made up a quarter of the HTTP thread's time in a run of 1 MiB chunks.
 * One set is kept (22 MiB once a large upload has touched it all, and
 * 1.6 MiB more for the raw copy's compressor and its output): a collector
 * sends one chunk at a time, and idle memory is what a team server's host
 * notices.
 */
#define POOL 1
#define BIG_UPLOAD (128ull << 20)	/* inflated bytes: its buffers are freed before its analysis finishes */
struct bufset {
	uint8_t *raw[NRAW], *inf[NINF];
	struct tp_event *ev[NBATCH], *mev[NBATCH];
	ZSTD_CCtx *zc;		/* the raw copy's compressor and its output (compress_raw): NULL */
	uint8_t *zout;		/* until an upload compressed */
};
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct bufset pool[POOL];
static int npool;

static void bufset_free(struct bufset *b)
{
	int i;

	for (i = 0; i < NRAW; i++)
		tp_free(b->raw[i]);
	for (i = 0; i < NINF; i++)
		tp_free(b->inf[i]);
	for (i = 0; i < NBATCH; i++) {
		tp_free(b->ev[i]);
		tp_free(b->mev[i]);
	}
	ZSTD_freeCCtx(b->zc);
	tp_free(b->zout);
}

/* Take a pooled set, or allocate one; 0 or -1 (out of memory, nothing held). */
static int bufset_get(struct bufset *b)
{
	int i, ok = 1;

	pthread_mutex_lock(&pool_mu);
	if (npool) {
		*b = pool[--npool];
		pthread_mutex_unlock(&pool_mu);
		return 0;
	}
	pthread_mutex_unlock(&pool_mu);
	memset(b, 0, sizeof(*b));
	for (i = 0; i < NRAW; i++)
		ok &= (b->raw[i] = tp_malloc(RAW_BLOCK)) != NULL;
	for (i = 0; i < NINF; i++)
		ok &= (b->inf[i] = tp_malloc(INF_BLOCK)) != NULL;
	for (i = 0; i < NBATCH; i++) {
		ok &= (b->ev[i] = tp_malloc(BATCH_EVENTS * sizeof(*b->ev[i]))) != NULL;
		ok &= (b->mev[i] = tp_malloc(BATCH_MEM_EVENTS * sizeof(*b->mev[i]))) != NULL;
	}
	if (!ok)
		bufset_free(b);
	return ok ? 0 : -1;
}

/* ig's buffers back to the pool when keep (else, or when it is full, freed), once. */
static void buffers_put(struct ingest *ig, int keep)
{
	struct bufset b;
	int i;

	if (!ig->raw[0].data)
		return;
	for (i = 0; i < NRAW; i++)
		b.raw[i] = ig->raw[i].data;
	for (i = 0; i < NINF; i++)
		b.inf[i] = ig->inf[i].data;
	for (i = 0; i < NBATCH; i++) {
		b.ev[i] = ig->batches[i].ev;
		b.mev[i] = ig->batches[i].mev;
	}
	b.zc = ig->zc;
	b.zout = ig->zout;
	ig->zc = NULL;
	ig->zout = NULL;
	ig->raw[0].data = NULL;
	pthread_mutex_lock(&pool_mu);
	if (keep && npool < POOL) {
		pool[npool++] = b;
		pthread_mutex_unlock(&pool_mu);
		return;
	}
	pthread_mutex_unlock(&pool_mu);
	bufset_free(&b);
}

void ingest_pool_drain(void)
{
	pthread_mutex_lock(&pool_mu);
	while (npool)
		bufset_free(&pool[--npool]);
	pthread_mutex_unlock(&pool_mu);
	workers_drain();
}

static void ingest_free(struct ingest *ig)
{
	int i;

	inflate_release(&ig->inf_stage);
	if (ig->ps)
		ig->fmt->free(ig->ps);
	tp_free(ig->u8);
	buffers_put(ig, 1);
	ZSTD_freeCCtx(ig->zc);	/* when they had no buffers to go with (NULL: they went) */
	tp_free(ig->zout);
	for (i = 0; i < NBATCH; i++)
		tp_free(ig->batches[i].str);
	analysis_free(ig->an);
	overlap_prints_free(ig->prints);
	store_writer_close(ig->w);
	chan_destroy(&ig->raw_free);
	chan_destroy(&ig->inf_free);
	chan_destroy(&ig->batch_free);
	chan_destroy(&ig->parse_in);
	chan_destroy(&ig->write_in);
	tp_free(ig);
}

static int alloc_buffers(struct ingest *ig)
{
	struct bufset b;
	int i;

	if (bufset_get(&b))
		return -1;
	for (i = 0; i < NRAW; i++) {
		ig->raw[i].data = b.raw[i];
		chan_send(&ig->raw_free, IT_RAW, &ig->raw[i]);
	}
	for (i = 0; i < NINF; i++) {
		ig->inf[i].data = b.inf[i];
		chan_send(&ig->inf_free, IT_INFLATED, &ig->inf[i]);
	}
	for (i = 0; i < NBATCH; i++) {
		ig->batches[i].ev = b.ev[i];
		ig->batches[i].mev = b.mev[i];
		if (i)
			chan_send(&ig->batch_free, IT_EVENTS, &ig->batches[i]);
	}
	ig->cur = &ig->batches[0];
	ig->zc = b.zc;
	ig->zout = b.zout;
	return 0;
}

int ingest_begin(struct store *st, const struct ingest_limits *lim, const struct ingest_request *req,
		 struct ingest **out, struct tp_errbuf *err)
{
	struct ingest *ig = tp_calloc(1, sizeof(*ig));
	int rc;

	if (!ig)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	ig->lim = lim ? *lim : ingest_default_limits;
	ig->req_rank = req->rank;
	ig->oc = req->overlaps;
	ig->store = store_serial(st);
	ig->content_gzip = req->content_gzip;
	ig->length = req->length;
	ig->batch_ev = BATCH_EVENTS;
	ig->batch_mev = BATCH_MEM_EVENTS;
	snprintf(ig->run, sizeof(ig->run), "%s", req->run);
	ig->peak_alloc = -1;
	ig->ts_lo = INT64_MAX;
	ig->ts_hi = INT64_MIN;
	snprintf(ig->kind_hint, sizeof(ig->kind_hint), "%s", req->kind ? req->kind : "");
	snprintf(ig->device, sizeof(ig->device), "%s", req->device ? req->device : "");
	sha256_init(&ig->sha);
	inflate_init(&ig->inf_stage, ig->lim.max_inflated, ig->lim.max_ratio, on_inflated, ig);
	chan_init(&ig->raw_free);
	chan_init(&ig->inf_free);
	chan_init(&ig->batch_free);
	chan_init(&ig->parse_in);
	chan_init(&ig->write_in);
	if (alloc_buffers(ig)) {
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		goto fail;
	}
	if ((rc = store_writer_open(st, &ig->w, err)) ||
	    (rc = store_artifact_begin(ig->w, req->run, req->rank < 0 ? 0 : req->rank,
				       ig->kind_hint[0] ? ig->kind_hint : "unknown", req->name,
				       &ig->artifact, err)) ||
	    (req->rank >= 0 && (rc = store_rank_has_trace(ig->w, req->run, req->rank, &ig->joins, err))))
		goto fail;
	if (worker_start(&ig->parser, parser_main, ig))
		goto nothread;
	if (worker_start(&ig->writer, writer_main, ig)) {
		chan_send(&ig->parse_in, IT_END, NULL);
		worker_wait(ig->parser);
		goto nothread;
	}
	ig->threads = 2;
	*out = ig;
	return TP_OK;
nothread:
	rc = tp_fail(err, TP_ERR_NOMEM, NULL, "cannot start ingest threads");
	store_artifact_drop(ig->w, ig->artifact);
fail:
	ingest_free(ig);
	return rc;
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
	int rc, parse_rc, deferred = 0;
	const struct tp_errbuf *perr;

	memset(res, 0, sizeof(*res));
	if (!ig->body) {
		/* nothing to keep */
		res->rc = tp_fail(&res->err, TP_ERR_INVALID, "empty_body", "the upload is empty");
		ingest_abort(ig);
		return;
	}
	if (!ig->a_rc)
		ig->a_rc = inflate_finish(&ig->inf_stage, &ig->a_err);
	finish_threads(ig, !ig->a_rc);
	/* a large upload's analysis needs the memory more than the next upload needs them warm */
	if (ig->inflated >= BIG_UPLOAD)
		buffers_put(ig, 0);
	rc = ig->c_rc;
	/*
	 * The first failure in stream order. The parser only sees bytes inflated
	 * before any inflate failure, so its error, when it has one, came first.
	 */
	parse_rc = ig->b_rc ? ig->b_rc : ig->a_rc;
	perr = ig->b_rc ? &ig->b_err : &ig->a_err;
	if (ig->encoded && ig->a_rc) {
		/* without the whole file there is no sha256 of it to keep it by */
		res->rc = ig->a_rc;
		res->err = ig->a_err;
		ingest_abort(ig);
		return;
	}
	sha256_final_hex(&ig->sha, sha);
	f.sha256 = sha;
	f.bytes = ig->encoded ? ig->inflated : ig->body;
	f.kind = ig->fmt ? ig->fmt->name : "unknown";
	f.raw_encoding = ig->compressing ? "zstd-frames" : ig->encoded ? "gzip" : "upload";
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
	if (!rc && !parse_rc && ig->fmt && ig->fmt->result) {
		/* the format's result: its memory series, or its own rows (formats.h) */
		ig->fmt->result(ig->ps, &f);
		f.store = ig->fmt->store;
	}
	if (!rc && !parse_rc && ig->an) {
		const struct an_result *ar;
		if ((parse_rc = analysis_finish(ig->an, &ar, &ig->b_err)))
			perr = &ig->b_err;
		else
			f.analysis = ar;
		if (!parse_rc) {
			f.mem = ar->mem_series;
			f.nmem = ar->nmem_series;
		}
		f.str = an_string;
		f.str_payload = ig->tp;
	}
	/* the peak /runs shows: the highest of the rebuilt device series, for every source
	 * (PyTorch 1.9 traces' [memory] events carry no Total Allocated) */
	for (size_t k = 0; k < f.nmem; k++)
		if (strcmp(f.mem[k].device, "cpu"))
			mem_series_each(&f.mem[k], highest, &f.peak_allocated);
	if (rc) {
		/* the database failed: nothing of this upload can be trusted */
		res->rc = rc;
		res->err = ig->c_err;
		store_artifact_drop(ig->w, ig->artifact);
	} else if (parse_rc == TP_ERR_NOMEM || parse_rc == TP_ERR_IO) {
		/* the server's own trouble (memory, the analysis's temporary file), not the upload's:
		 * kept as failed, the same file could never be tried again (it would be a duplicate) */
		res->rc = parse_rc;
		res->err = *perr;
		store_artifact_drop(ig->w, ig->artifact);
	} else if (parse_rc) {
		res->rc = parse_rc;
		res->err = *perr;
		f.error_code = perr->code;
		f.error_msg = perr->msg;
		if ((rc = store_artifact_fail(ig->w, ig->artifact, &f, &res->artifact, &res->err))) {
			res->rc = rc;
			store_artifact_drop(ig->w, ig->artifact);
		} else {
			res->duplicate = res->artifact != 0;
			if (!res->artifact)
				res->artifact = ig->artifact;
			res->kept = 1;
		}
	} else if ((rc = store_tx_begin(ig->w, &res->err)) ||
		   (rc = store_artifact_commit(ig->w, ig->artifact, &f, &res->artifact, &res->err)) ||
		   /* a new trace joins its rank's timeline: marked in the same transaction (runrank.h) */
		   (!res->artifact && ig->tp &&
		    (rc = store_rank_defer(ig->w, ig->run, f.rank, ig->artifact, !ig->an, &deferred, &res->err))) ||
		   /* and when it joins one, events the rank has already would count twice: refused
		    * (pipeline/overlap.h) */
		   (deferred && (rc = overlap_check(ig->w, ig->run, f.rank, ig->artifact, f.base_ns, ig->ts_lo,
						    ig->ts_hi, an_string, ig->tp, ig->prints, &res->err))) ||
		   (rc = store_tx_commit(ig->w, &res->err))) {
		store_tx_rollback(ig->w);
		res->rc = rc;
		res->artifact = 0;
		store_artifact_drop(ig->w, ig->artifact);
	} else {
		res->duplicate = res->artifact != 0;
		if (!res->artifact)
			res->artifact = ig->artifact;
		res->rank_pending = deferred;
		res->rank = f.rank;
		/* a new trace: the next uploads of its rank are checked against it in memory, once
		 * the caller has answered (ingest.h) */
		if (!res->duplicate && ig->tp && ig->prints &&
		    !overlap_prints_note(ig->prints, ig->run, f.rank, ig->artifact, f.base_ns, ig->ts_lo, ig->ts_hi)) {
			res->keep = ig->prints;
			ig->prints = NULL;
		}
	}
	tp_free(meta);
	ingest_free(ig);
}

void ingest_abort(struct ingest *ig)
{
	if (!ig)
		return;
	atomic_store(&ig->stop, 1);
	finish_threads(ig, 0);
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
	overlap_prints_done(res->keep);
	res->keep = NULL;
}
