/*
 * h_artifacts.c: uploads and artifacts.
 *
 *   POST /api/v1/runs/{run}/artifacts?rank=R&name=F[&kind=K][&capture=ID]
 *     begin: check the arguments and Content-Length, start an ingest
 *     data:  feed each piece as MHD hands it over (never the whole body)
 *     end:   finish the ingest; 201 new, 200 same bytes already there,
 *            4xx with the error body (and the kept artifact) when the body
 *            could not be parsed
 *   GET /api/v1/runs/{run}/artifacts/{id}       the artifact
 *   GET /api/v1/runs/{run}/artifacts/{id}/raw   the bytes as uploaded, streamed
 */
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY	/* ZSTD_createDStream_advanced: its memory through tp_malloc */
#include <zstd.h>

#include "alloc.h"
#include "reads.h"
#include "handlers.h"
#include "http.h"
#include "pipeline/overlap.h"
#include "pipeline/runrank.h"
#include "utf8.h"

#define LOG_PREFIX "artifacts"

/*
 * A C1 control (U+0080..U+009F) or a bidirectional format character (U+061C,
 * U+200E, U+200F, U+202A..U+202E, U+2066..U+2069): "\u202egnp.exe" shows as
 * "exe.png" wherever the name is printed.
 */
static int bidi_or_c1(const unsigned char *u, size_t len)
{
	unsigned cp;

	if (len == 2) {
		cp = (u[0] & 0x1Fu) << 6 | (u[1] & 0x3Fu);
		return cp <= 0x9F || cp == 0x61C;
	}
	if (len != 3)
		return 0;
	cp = (u[0] & 0x0Fu) << 12 | (u[1] & 0x3Fu) << 6 | (u[2] & 0x3Fu);
	return cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

static int valid_file_name(const char *s)
{
	size_t n = strlen(s), i;

	if (n == 0 || n > 255)
		return 0;
	for (i = 0; i < n; i++) {
		const unsigned char *u = (const unsigned char *)s + i;
		size_t len = tp_utf8_len(u, (const unsigned char *)s + n);
		/* not UTF-8: a JSON answer could not name it (answered 503 once, yet committed) */
		if (!len || *u < 0x20 || *u == 0x7f || *u == '/' || *u == '\\' || *u == '"' || bidi_or_c1(u, len))
			return 0;
		i += len - 1;
	}
	return 1;
}

/*
 * Content-Disposition for a stored name (RFC 6266): an ASCII filename= with
 * '_' for each other character, and the exact name in filename*=UTF-8''...,
 * percent-encoded, so that no raw UTF-8 (a right-to-left override stored
 * before names were checked) reaches the header.
 */
static void disposition(char *out, size_t size, const char *name)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *u = (const unsigned char *)name, *end = u + strlen(name);
	char ascii[256], pct[256 * 3 + 1];
	size_t a = 0, p = 0;

	for (; u < end && a + 1 < sizeof(ascii); u++) {
		if (*u >= 0x80 && (*u & 0xC0) == 0x80)
			continue;	/* a continuation byte: its character's '_' is written */
		ascii[a++] = *u < 0x20 || *u >= 0x7f || *u == '"' || *u == '\\' ? '_' : (char)*u;
	}
	ascii[a] = 0;
	for (u = (const unsigned char *)name; u < end && p + 4 < sizeof(pct); u++) {
		if ((*u >= 'a' && *u <= 'z') || (*u >= 'A' && *u <= 'Z') || (*u >= '0' && *u <= '9') ||
		    strchr("!#$&+-.^_`|~", *u)) {
			pct[p++] = (char)*u;
		} else {
			pct[p++] = '%';
			pct[p++] = hex[*u >> 4];
			pct[p++] = hex[*u & 15];
		}
	}
	pct[p] = 0;
	snprintf(out, size, "attachment; filename=\"%s\"; filename*=UTF-8''%s", ascii, pct);
}

int h_artifact_upload_begin(struct request *req)
{
	const struct ingest_limits *lim = http_limits(req);
	struct ingest_request ir = { .run = req->params[0], .rank = -1, .overlaps = runrank_overlaps(http_deriver(req)) };
	const char *cl, *enc, *kind = http_arg(req, "kind");
	struct tp_errbuf err = { 0 };
	struct ingest *ig;
	long long rank;
	char kinds[256];
	int rc;

	if (http_arg(req, "rank")) {
		if (h_arg_int(req, "rank", 0, 65535, 0, &rank))
			return 0;
		ir.rank = (int)rank;
	}
	ir.name = http_arg(req, "name");
	if (!ir.name)
		ir.name = "upload";
	if (!valid_file_name(ir.name))
		return http_reply_error(req, 400, "invalid_parameter", NULL,
					"'name' must be 1 to 255 bytes of UTF-8 without control characters, "
					"bidirectional overrides, quotes or slashes");
	if (kind && *kind) {
		if (!ingest_kind_known(kind)) {
			ingest_kind_names(kinds, sizeof(kinds));
			return http_reply_error(req, 400, "invalid_parameter", NULL, "'kind' must be %s", kinds);
		}
		ir.kind = kind;
	}
	if ((enc = http_header(req, MHD_HTTP_HEADER_CONTENT_ENCODING)) && strcasecmp(enc, "identity")) {
		if (strcasecmp(enc, "gzip") && strcasecmp(enc, "x-gzip"))
			return http_reply_error(req, 415, "unsupported_encoding", NULL,
						"Content-Encoding must be gzip or identity, not '%s'", enc);
		ir.content_gzip = 1;
	}
	ir.device = http_arg(req, "device");
	if (ir.device && !h_valid_device(ir.device))
		return http_reply_error(req, 400, "invalid_parameter", NULL,
					"'device' must be cpu or cuda:N (N from 0 to 1023)");
	/* an upload made for a capture (?capture=ID) must name one of this run's, checked before a byte is kept */
	if (http_arg(req, "capture")) {
		struct store_reader *r;
		long long capture;
		if (h_arg_int(req, "capture", 1, INT64_MAX, 0, &capture))
			return 0;
		if ((rc = store_reader_open(http_store(req), &r, &err)))
			return http_reply_fail(req, rc, &err, NULL);
		rc = store_capture_of_run(r, req->params[0], capture, &err);
		store_reader_close(r);
		if (rc == TP_ERR_NOTFOUND)
			return http_reply_error(req, 400, "invalid_parameter", NULL, "capture %lld is no capture of run '%s'",
						capture, req->params[0]);
		if (rc)
			return http_reply_fail(req, rc, &err, NULL);
	}
	cl = http_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > lim->max_body)
		return http_reply_error(req, 413, "body_too_large", NULL,
					"the upload (%s bytes) exceeds the cap of %llu bytes", cl,
					(unsigned long long)lim->max_body);
	ir.length = cl ? strtoull(cl, NULL, 10) : 0;
	if ((rc = ingest_begin(http_store(req), lim, &ir, &ig, &err)))
		return http_reply_fail(req, rc, &err, NULL);
	req->state = ig;
	return 0;
}

int h_artifact_upload_data(struct request *req, const char *data, size_t len)
{
	struct ingest *ig = req->state;
	int rc;

	if (!ig)
		return 0;	/* already answered: the rest is discarded */
	if ((rc = ingest_feed(ig, data, len))) {
		ingest_abort(ig);
		req->state = NULL;
		if (rc == TP_ERR_TOOBIG)
			return http_reply_error(req, 413, "body_too_large", NULL,
						"the upload exceeds the cap of %llu bytes",
						(unsigned long long)http_limits(req)->max_body);
		return http_reply_error(req, 503, "storage_error", NULL,
					"the upload could not be stored; retry later");
	}
	return 0;
}

/* {"artifact": ...} for id of this run, or NULL with err set (err->rc says why). */
static json_t *artifact_json(struct request *req, int64_t id, struct tp_errbuf *err)
{
	struct store_reader *r;
	json_t *a = NULL;

	if (store_reader_open(http_store(req), &r, err) == TP_OK) {
		a = read_artifact(r, req->params[0], id, err);
		store_reader_close(r);
	}
	return a;
}

static void keep_prints(void *prints)
{
	overlap_prints_done(prints);
}

int h_artifact_upload_end(struct request *req)
{
	struct ingest *ig = req->state;
	struct tp_errbuf err = { 0 };
	struct ingest_result res;
	json_t *a;

	if (!ig)
		return 0;
	req->state = NULL;
	ingest_end(ig, &res);
	/* the next uploads of the rank are checked against its fingerprints once this one is answered
	 * (pipeline/overlap.h): 0.1-0.7 ms a 2 MiB chunk (4-10 when it makes a segment), not waited for */
	if (res.keep) {
		req->after = keep_prints;
		req->after_arg = res.keep;
	}
	if (res.rc && !res.kept)
		return http_reply_fail(req, res.rc, &res.err, NULL);
	/* derived in the background once the run's uploads pause (runrank.h), for the next read */
	if (!res.rc && res.rank_pending && runrank_uploaded(http_deriver(req), http_store(req), req->params[0], res.rank))
		tp_warn("could not start deriving run '%s' in the background", req->params[0]);
	/* ?capture=ID (checked at begin): the artifact is one of the capture's */
	if (res.artifact && http_arg(req, "capture")) {
		struct store_writer *w = NULL;
		int64_t capture = strtoll(http_arg(req, "capture"), NULL, 10);
		if (store_writer_open(http_store(req), &w, &err) ||
		    store_capture_artifact(w, capture, res.artifact, &err))
			tp_warn("artifact %lld of run '%s' could not be recorded as capture %lld's: %s",
				(long long)res.artifact, req->params[0], (long long)capture, err.msg);
		store_writer_close(w);
		memset(&err, 0, sizeof(err));
	}
	if (!(a = artifact_json(req, res.artifact, &err)))
		return http_reply_fail(req, err.rc ? err.rc : TP_ERR_DB, &err, NULL);
	if (res.rc)
		return http_reply_fail(req, res.rc, &res.err, a);
	return http_reply_json(req, res.duplicate ? 200 : 201, a);
}

void h_artifact_upload_cleanup(struct request *req, int completed)
{
	/* the client went away mid-body, or the server is stopping: keep nothing */
	if (req->state) {
		ingest_abort(req->state);
		req->state = NULL;
	}
	(void)completed;
}

int h_artifact_get(struct request *req)
{
	struct tp_errbuf err = { 0 };
	json_t *a = artifact_json(req, strtoll(req->params[1], NULL, 10), &err);

	/* 404 artifact_not_found from the store when there is none; 5xx when it cannot tell */
	if (!a)
		return http_reply_fail(req, err.rc ? err.rc : TP_ERR_DB, &err, NULL);
	return http_reply_json(req, 200, a);
}

/* ---- raw bytes, streamed chunk by chunk ---- */

struct raw_stream {
	struct store_reader *r;
	int64_t id;
	uint32_t seq, nchunks;
	const uint8_t *chunk;
	size_t len, off;
	int inflating;		/* stored gzip, client wants the original bytes */
	z_stream zs;
	int between;		/* a gzip member has ended; the next may begin */
	int zdone;
	ZSTD_DStream *zd;	/* stored as zstd frames (pipeline/ingest.c): decoded */
	ZSTD_inBuffer in;
	size_t zleft;		/* ZSTD_decompressStream's last hint: 0 when a frame has ended */
	int zeof;		/* no chunk is left */
};

static void raw_free(void *cls)
{
	struct raw_stream *rs = cls;

	if (rs->inflating)
		inflateEnd(&rs->zs);
	ZSTD_freeDStream(rs->zd);
	store_reader_close(rs->r);
	tp_free(rs);
}

static void *zs_malloc(void *opaque, size_t n) { (void)opaque; return tp_malloc(n); }
static void zs_free(void *opaque, void *p) { (void)opaque; tp_free(p); }

/* the next stored chunk into rs->chunk; 0 at the end */
static int next_chunk(struct raw_stream *rs)
{
	const void *data;

	if (rs->seq >= rs->nchunks)
		return 0;
	if (store_raw_chunk(rs->r, rs->id, rs->seq++, &data, &rs->len, NULL))
		return -1;
	rs->chunk = data;
	rs->off = 0;
	return 1;
}

/* zstd frames into buf, as much as fits; a copy that ends inside a frame is an error */
static ssize_t unzstd_read(struct raw_stream *rs, char *buf, size_t max)
{
	ZSTD_outBuffer out = { buf, max, 0 };
	int n;

	while (out.pos < out.size) {
		size_t before = out.pos, r;
		if (rs->in.pos == rs->in.size && !rs->zeof) {
			if ((n = next_chunk(rs)) < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (n == 0)
				rs->zeof = 1;
			else
				rs->in = (ZSTD_inBuffer){ rs->chunk, rs->len, 0 };
		}
		r = ZSTD_decompressStream(rs->zd, &out, &rs->in);
		if (ZSTD_isError(r))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		rs->zleft = r;
		if (rs->zeof && out.pos == before)
			break;
	}
	if (out.pos)
		return (ssize_t)out.pos;
	return rs->zleft ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
}

static ssize_t raw_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct raw_stream *rs = cls;
	int n;

	(void)pos;
	if (rs->zd)
		return unzstd_read(rs, buf, max);
	if (!rs->inflating) {
		while (rs->off >= rs->len)
			if ((n = next_chunk(rs)) <= 0)
				return n ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		size_t take = rs->len - rs->off < max ? rs->len - rs->off : max;
		memcpy(buf, rs->chunk + rs->off, take);
		rs->off += take;
		return (ssize_t)take;
	}
	rs->zs.next_out = (Bytef *)buf;
	rs->zs.avail_out = (uInt)(max > (1u << 30) ? (1u << 30) : max);
	while (rs->zs.avail_out == max && !rs->zdone) {
		if (rs->zs.avail_in == 0) {
			if ((n = next_chunk(rs)) < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (n == 0) {
				if (rs->between)	/* the last member ended the copy */
					rs->zdone = 1;
				break;
			}
			rs->zs.next_in = (Bytef *)rs->chunk;
			rs->zs.avail_in = (uInt)rs->len;
		}
		if (rs->between) {
			/* after a member: another one, or the NULs and blanks ingest tolerates too
			 * (ingest/inflate.c) */
			uint8_t c = *rs->zs.next_in;
			if (c == 0x1f) {
				if (inflateReset(&rs->zs) != Z_OK)
					return MHD_CONTENT_READER_END_WITH_ERROR;
				rs->between = 0;
			} else if (c == 0 || c == '\n' || c == ' ' || c == '\r' || c == '\t') {
				rs->zs.next_in++;
				rs->zs.avail_in--;
				continue;
			} else {
				return MHD_CONTENT_READER_END_WITH_ERROR;
			}
		}
		int zr = inflate(&rs->zs, Z_NO_FLUSH);
		if (zr == Z_STREAM_END)
			rs->between = 1;	/* the writer's raw copies are many members */
		else if (zr != Z_OK && zr != Z_BUF_ERROR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (rs->zs.avail_out == max)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)(max - rs->zs.avail_out);
}

int h_artifact_raw(struct request *req)
{
	struct store_raw_info info;
	struct tp_errbuf err = { 0 };
	struct raw_stream *rs = tp_calloc(1, sizeof(*rs));
	struct MHD_Response *resp;
	char disp[1100];
	int rc, gz_out = 0;

	if (!rs)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	rs->id = strtoll(req->params[1], NULL, 10);
	if ((rc = store_reader_open(http_store(req), &rs->r, &err)) ||
	    (rc = store_raw_info(rs->r, req->params[0], rs->id, &info, &err))) {
		raw_free(rs);
		return http_reply_fail(req, rc, &err, NULL);
	}
	rs->nchunks = info.nchunks;
	if (!strcmp(info.encoding, "zstd-frames")) {
		ZSTD_customMem mem = { zs_malloc, zs_free, NULL };
		if (!(rs->zd = ZSTD_createDStream_advanced(mem)) || ZSTD_isError(ZSTD_initDStream(rs->zd))) {
			raw_free(rs);
			return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
		}
	} else if (!strcmp(info.encoding, "gzip") || !strcmp(info.encoding, "gzip-members")) {
		/* a gzip of one member, as sent, is the transfer encoding; one of many is inflated
		 * (curl, among others, reads only the first member of a Content-Encoding: gzip) */
		if (req->accepts_gzip && !strcmp(info.encoding, "gzip")) {
			gz_out = 1;
		} else {
			rs->zs.zalloc = tp_zalloc;
			rs->zs.zfree = tp_zfree;
			if (inflateInit2(&rs->zs, 16 + MAX_WBITS) != Z_OK) {
				raw_free(rs);
				return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
			}
			rs->inflating = 1;
		}
	}
	resp = MHD_create_response_from_callback(gz_out ? MHD_SIZE_UNKNOWN : info.bytes, 256 * 1024,
						 raw_read, rs, raw_free);
	if (!resp) {
		raw_free(rs);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	if (gz_out)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	disposition(disp, sizeof(disp), info.name);
	MHD_add_response_header(resp, "Content-Disposition", disp);
	return http_reply_response(req, 200, resp);
}
