/*
 * h_trace.c: GET /api/v1/runs/{run}/trace?rank=R&start_ns=A&end_ns=B
 *
 * A Chrome trace (the JSON object form that Perfetto and chrome://tracing
 * load) of the rank's events that overlap [A, B), the whole rank without a
 * window. Streamed block by block from the store, gzipped on the fly when
 * the client accepts it, so memory stays flat whatever the window.
 *
 * Times are written as absolute microseconds with the exact nanosecond
 * fraction ("ts": 1669783687389324.125), which our own ingest reads back
 * exactly: the output re-uploads into the same events. Metadata events
 * (process and thread names) are always included, [memory] events too.
 * Flows from CPU calls to GPU work are not stored (their "correlation" args
 * are), so they are not written.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <microhttpd.h>
#include <zlib.h>

#include "alloc.h"
#include "handlers.h"
#include "http.h"

#define FILL 65536		/* text formatted per refill */

struct trace_stream {
	struct store_reader *r;
	struct store_trace *t;
	int64_t start, end;
	const struct tp_event *ev;	/* current block */
	size_t n, i;
	int64_t base;
	int phase;			/* 0 header, 1 events, 2 footer written, 3 end */
	int count;			/* events written */
	char *text;			/* pending text */
	size_t len, off, cap;
	int oom;
	int gzip;
	z_stream zs;
	int zdone;
};

static void put(struct trace_stream *s, const char *p, size_t n)
{
	if (s->oom || !n)
		return;
	if (s->len + n > s->cap) {
		size_t cap = s->cap ? s->cap : FILL * 2;
		while (cap < s->len + n)
			cap *= 2;
		char *np = tp_realloc(s->text, cap);
		if (!np) {
			s->oom = 1;
			return;
		}
		s->text = np;
		s->cap = cap;
	}
	memcpy(s->text + s->len, p, n);
	s->len += n;
}

static void puts_(struct trace_stream *s, const char *p)
{
	put(s, p, strlen(p));
}

static void put_str(struct trace_stream *s, const char *p)
{
	static const char hex[] = "0123456789abcdef";
	const char *run = p;

	put(s, "\"", 1);
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(s, run, (size_t)(p - run));
		run = p + 1;
		if (c == '"' || c == '\\') {
			char e[2] = { '\\', (char)c };
			put(s, e, 2);
		} else {
			char e[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
			put(s, e, 6);
		}
	}
	put(s, run, (size_t)(p - run));
	put(s, "\"", 1);
}

/* ns as microseconds with the exact fraction */
static void put_us(struct trace_stream *s, int64_t ns)
{
	char b[48];
	uint64_t u = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;

	snprintf(b, sizeof(b), "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", u / 1000, (unsigned)(u % 1000));
	puts_(s, b);
}

static void put_id(struct trace_stream *s, int64_t num, const char *str)
{
	char b[32];

	if (str) {
		put_str(s, str);
	} else {
		snprintf(b, sizeof(b), "%" PRId64, num);
		puts_(s, b);
	}
}

static void put_arg_i(struct trace_stream *s, int *first, const char *key, int64_t v)
{
	char b[96];

	snprintf(b, sizeof(b), "%s\"%s\":%" PRId64, *first ? "" : ",", key, v);
	*first = 0;
	puts_(s, b);
}

static void put_arg_f(struct trace_stream *s, int *first, const char *key, double v)
{
	char b[96];

	if (v != v || v > 1e300 || v < -1e300)
		snprintf(b, sizeof(b), "%s\"%s\":\"inf\"", *first ? "" : ",", key);
	else
		snprintf(b, sizeof(b), "%s\"%s\":%.17g", *first ? "" : ",", key, v);
	*first = 0;
	puts_(s, b);
}

static void put_event(struct trace_stream *s, const struct tp_event *e)
{
	char ph[2] = { e->ph, 0 };
	int first = 1;

	puts_(s, s->count++ ? ",\n{\"ph\":" : "\n{\"ph\":");
	put_str(s, ph);
	if (e->cat) {
		puts_(s, ",\"cat\":");
		put_str(s, store_trace_string(s->t, e->cat));
	}
	if (e->name) {
		puts_(s, ",\"name\":");
		put_str(s, store_trace_string(s->t, e->name));
	}
	if (e->have & TH_PID) {
		puts_(s, ",\"pid\":");
		put_id(s, e->pid, e->pid_sid ? e->pid_s : NULL);
	}
	if (e->have & TH_TID) {
		puts_(s, ",\"tid\":");
		put_id(s, e->tid, e->tid_sid ? e->tid_s : NULL);
	}
	if (e->have & TH_TS) {
		puts_(s, ",\"ts\":");
		put_us(s, tp_sat_add(s->base, e->ts_ns));
	}
	if (e->have & TH_DUR) {
		puts_(s, ",\"dur\":");
		put_us(s, e->dur_ns);
	}
	if (e->have & TH_FLOW) {
		put_arg_i(s, &(int){ 0 }, "id", e->flow_id);
		if (e->ph == 'f')
			puts_(s, ",\"bp\":\"e\"");
	}
	puts_(s, ",\"args\":{");
	if (e->ph == 'M' && e->arg) {
		puts_(s, "\"name\":");
		put_str(s, store_trace_string(s->t, e->arg));
		first = 0;
	}
	if (e->have & TH_EXT)
		put_arg_i(s, &first, "External id", e->ext_id);
	if (e->have & TH_CORR)
		put_arg_i(s, &first, "correlation", e->corr);
	if (e->have & TH_DEVICE)
		put_arg_i(s, &first, "device", e->device);
	if (e->have & TH_STREAM)
		put_arg_i(s, &first, "stream", e->stream);
	if (e->have & TH_BYTES)
		put_arg_i(s, &first, e->ph == 'i' ? "Bytes" : "bytes", e->bytes);
	if (e->have & TH_ADDR)
		put_arg_i(s, &first, "Addr", e->addr);
	if (e->have & TH_TOTAL_ALLOC)
		put_arg_i(s, &first, "Total Allocated", e->total_alloc);
	if (e->have & TH_TOTAL_RES)
		put_arg_i(s, &first, "Total Reserved", e->total_reserved);
	if (e->have & TH_DEV_TYPE)
		put_arg_i(s, &first, "Device Type", e->dev_type);
	if (e->have & TH_DEV_ID)
		put_arg_i(s, &first, "Device Id", e->dev_id);
	if (e->have & TH_EV_IDX)
		put_arg_i(s, &first, "Ev Idx", e->ev_idx);
	if (e->have & TH_SEQ)
		put_arg_i(s, &first, "Sequence number", e->seq);
	if (e->have & TH_FWD_TID)
		put_arg_i(s, &first, "Fwd thread id", e->fwd_tid);
	if (e->have & TH_BPS)
		put_arg_f(s, &first, "blocks per SM", e->blocks_per_sm);
	if (e->have & TH_OCC)
		put_arg_f(s, &first, "est. achieved occupancy %", e->occupancy);
	puts_(s, "}}");
}

static int in_window(const struct trace_stream *s, const struct tp_event *e)
{
	if (!(e->have & TH_TS))
		return 1;
	int64_t a = tp_sat_add(s->base, e->ts_ns);
	int64_t b = tp_sat_add(a, (e->have & TH_DUR) && e->dur_ns > 0 ? e->dur_ns : 0);
	return a < s->end && b >= s->start;
}

/* Format the next piece of text into s->text; 0 at the end, -1 on failure. */
static int refill(struct trace_stream *s)
{
	s->len = s->off = 0;
	if (s->phase == 0) {
		puts_(s, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
		s->phase = 1;
	}
	while (s->phase == 1 && s->len < FILL && !s->oom) {
		if (s->i == s->n) {
			int rc = store_trace_next(s->t, &s->ev, &s->n, &s->base, NULL);
			if (rc < 0)
				return -1;
			s->i = 0;
			if (rc == 0) {
				s->n = 0;
				puts_(s, "\n]}\n");
				s->phase = 2;
			}
			continue;
		}
		const struct tp_event *e = &s->ev[s->i++];
		if (in_window(s, e))
			put_event(s, e);
	}
	if (s->oom)
		return -1;
	if (!s->len && s->phase == 2)
		s->phase = 3;
	return s->len ? 1 : 0;
}

static ssize_t trace_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct trace_stream *s = cls;
	int rc;

	(void)pos;
	if (!s->gzip) {
		while (s->off == s->len)
			if ((rc = refill(s)) <= 0)
				return rc ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
		size_t take = s->len - s->off < max ? s->len - s->off : max;
		memcpy(buf, s->text + s->off, take);
		s->off += take;
		return (ssize_t)take;
	}
	if (s->zdone)
		return MHD_CONTENT_READER_END_OF_STREAM;
	s->zs.next_out = (Bytef *)buf;
	s->zs.avail_out = (uInt)(max > (1u << 30) ? (1u << 30) : max);
	size_t room = s->zs.avail_out;
	while (s->zs.avail_out == room && !s->zdone) {
		int flush = Z_NO_FLUSH;
		if (s->off == s->len) {
			if ((rc = refill(s)) < 0)
				return MHD_CONTENT_READER_END_WITH_ERROR;
			if (rc == 0)
				flush = Z_FINISH;
		}
		s->zs.next_in = (Bytef *)s->text + s->off;
		s->zs.avail_in = (uInt)(s->len - s->off);
		int zr = deflate(&s->zs, flush);
		s->off = s->len - s->zs.avail_in;
		if (zr == Z_STREAM_END)
			s->zdone = 1;
		else if (zr == Z_STREAM_ERROR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	return (ssize_t)(room - s->zs.avail_out);
}

static void trace_free(void *cls)
{
	struct trace_stream *s = cls;

	if (s->gzip)
		deflateEnd(&s->zs);
	store_trace_close(s->t);
	store_reader_close(s->r);
	tp_free(s->text);
	tp_free(s);
}

int h_run_trace(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct trace_stream *s;
	struct MHD_Response *resp;
	long long rank, a, b;
	char disp[300];
	int rc, rank_out;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "start_ns", 0, INT64_MAX, 0, &a) ||
	    h_arg_int(req, "end_ns", 1, INT64_MAX, INT64_MAX, &b))
		return 0;
	if (a >= b)
		return http_reply_error(req, 400, "invalid_parameter", NULL, "start_ns must be below end_ns");
	if (!(s = tp_calloc(1, sizeof(*s))))
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	s->start = http_arg(req, "start_ns") ? a : INT64_MIN;
	s->end = b;
	if ((rc = store_reader_open(http_store(req), &s->r, &err)) ||
	    (rc = store_trace_open(s->r, req->params[0], (int)rank, s->start, s->end, &s->t, &rank_out, &err))) {
		trace_free(s);
		return http_reply_fail(req, rc, &err, NULL);
	}
	if (req->accepts_gzip) {
		s->zs.zalloc = tp_zalloc;
		s->zs.zfree = tp_zfree;
		if (deflateInit2(&s->zs, 1, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			trace_free(s);
			return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
		}
		s->gzip = 1;
	}
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, trace_read, s, trace_free);
	if (!resp) {
		trace_free(s);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
	if (s->gzip)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s.rank%d.pt.trace.json\"", req->params[0], rank_out);
	MHD_add_response_header(resp, "Content-Disposition", disp);
	return http_reply_response(req, 200, resp);
}
