/*
 * h_trace.c: GET /api/v1/runs/{run}/trace?rank=R&start_ns=A&end_ns=B
 *
 * A Chrome trace (the JSON object form that Perfetto and chrome://tracing
 * load) of the rank's events that overlap [A, B), the whole rank without a
 * window. Streamed block by block from the store, gzipped on the fly when
 * the client accepts it, so memory stays flat whatever the window.
 *
 * As PyTorch writes a trace: the top-level members of the rank's first
 * trace as uploaded (deviceProperties, distributedInfo, schemaVersion, ...),
 * the events, and baseTimeNanoseconds at the end when its times were
 * relative to one (times are then written relative to it). Times are
 * microseconds with the exact nanosecond fraction ("ts": 1669783687389324.125),
 * which our own ingest reads back exactly: the output re-uploads into the
 * same events, and the same window of it answers the same bytes.
 * Metadata events (process and thread names, labels, sort indexes) are in
 * every window, [memory] events too.
 *
 * Flows from CPU calls to GPU work are not stored (their "correlation" args
 * are): they are written again as PyTorch 2 writes them (cat and name ac2g):
 * an "f" (bp e) after each kernel, memcpy and memset with a correlation, and
 * after each runtime call (cuda_runtime, cuda_driver) an "s" when GPU work in
 * the window has its correlation, else an "f" (Kineto ends a flow on a call
 * that launched nothing). Which correlations have GPU work is read first, in
 * a pass over the window that keeps them sorted: 8 bytes per GPU event.
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
	struct tp_event *ev;	/* the slice store_trace_next gave last (at most 512) */
	size_t n, i;
	int64_t base;
	int64_t file_base;		/* baseTimeNanoseconds written (0: absolute times) */
	char *meta;			/* the first trace's top-level members (JSON), NULL when none */
	int64_t *gpu_corr;		/* correlations of GPU work in the window, sorted */
	size_t ngpu;
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

/* Which side of a CPU -> GPU flow an event is: 1 a runtime call, 2 GPU work, 0 neither. */
static int flow_side(const struct trace_stream *s, const struct tp_event *e)
{
	const char *cat;

	if (e->ph != 'X' || !(e->have & TH_CORR) || !e->cat)
		return 0;
	cat = store_trace_string(s->t, e->cat);
	if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver") || !strcmp(cat, "Runtime"))
		return 1;
	if (!strcmp(cat, "kernel") || !strcmp(cat, "gpu_memcpy") || !strcmp(cat, "gpu_memset") ||
	    !strcmp(cat, "Kernel") || !strcmp(cat, "Memcpy") || !strcmp(cat, "Memset"))
		return 2;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int gpu_has(const struct trace_stream *s, int64_t corr)
{
	return bsearch(&corr, s->gpu_corr, s->ngpu, sizeof(corr), cmp_i64) != NULL;
}

/* ts as written: the event's absolute time less the file's base */
static void put_ts(struct trace_stream *s, const struct tp_event *e)
{
	put_us(s, tp_sat_sub(tp_sat_add(s->base, e->ts_ns), s->file_base));
}

/* ,"pid":P,"tid":T,"ts":TS of e, those it has */
static void put_where(struct trace_stream *s, const struct tp_event *e)
{
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
		put_ts(s, e);
	}
}

/* The flow event PyTorch writes after e (flow_side(e) != 0). */
static void put_flow(struct trace_stream *s, const struct tp_event *e, int side)
{
	int start = side == 1 && gpu_has(s, e->corr);

	s->count++;
	puts_(s, start ? ",\n{\"ph\":\"s\",\"id\":" : ",\n{\"ph\":\"f\",\"id\":");
	put_id(s, e->corr, NULL);
	put_where(s, e);
	puts_(s, start ? ",\"cat\":\"ac2g\",\"name\":\"ac2g\"}" : ",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"bp\":\"e\"}");
}

static void put_event(struct trace_stream *s, const struct tp_event *e)
{
	char ph[2] = { e->ph, 0 };
	int first = 1, side;
	const char *name = e->name ? store_trace_string(s->t, e->name) : NULL;

	puts_(s, s->count++ ? ",\n{\"ph\":" : "\n{\"ph\":");
	put_str(s, ph);
	if (e->cat) {
		puts_(s, ",\"cat\":");
		put_str(s, store_trace_string(s->t, e->cat));
	}
	if (name) {
		puts_(s, ",\"name\":");
		put_str(s, name);
	}
	put_where(s, e);
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
		puts_(s, name && !strcmp(name, "process_labels") ? "\"labels\":" : "\"name\":");
		put_str(s, store_trace_string(s->t, e->arg));
		first = 0;
	}
	if (e->have & TH_SORT)
		put_arg_i(s, &first, "sort_index", e->sort_index);
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
	if ((side = flow_side(s, e)))
		put_flow(s, e, side);
}

/* Metadata events (names, labels, sort indexes) belong to every window; the rest when they overlap it. */
static int in_window(int64_t start, int64_t end, int64_t base, const struct tp_event *e)
{
	if (!(e->have & TH_TS) || e->ph == 'M')
		return 1;
	int64_t a = tp_sat_add(base, e->ts_ns);
	int64_t b = tp_sat_add(a, (e->have & TH_DUR) && e->dur_ns > 0 ? e->dur_ns : 0);
	return a < end && b >= start;
}

/* The top level before traceEvents: the first trace's members, less those written here. */
static void put_header(struct trace_stream *s)
{
	json_t *meta = s->meta ? json_loads(s->meta, 0, NULL) : NULL, *v;
	const char *key;

	puts_(s, "{");
	json_object_foreach(meta, key, v) {
		char *text;
		if (!strcmp(key, "traceEvents") || !strcmp(key, "baseTimeNanoseconds") ||
		    !(text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))))
			continue;
		put_str(s, key);
		puts_(s, ":");
		puts_(s, text);
		puts_(s, ",");
		free(text);
	}
	if (!json_object_get(meta, "displayTimeUnit"))
		puts_(s, "\"displayTimeUnit\":\"ns\",");
	puts_(s, "\"traceEvents\":[");
	json_decref(meta);
}

/* Format the next piece of text into s->text; 0 at the end, -1 on failure. */
static int refill(struct trace_stream *s)
{
	s->len = s->off = 0;
	if (s->phase == 0) {
		put_header(s);
		s->phase = 1;
	}
	while (s->phase == 1 && s->len < FILL && !s->oom) {
		if (s->i == s->n) {
			int rc = store_trace_next(s->t, &s->ev, &s->n, &s->base, NULL);
			if (rc < 0)
				return -1;
			s->i = 0;
			if (rc == 0) {
				char b[64];
				s->n = 0;
				if (s->file_base)
					snprintf(b, sizeof(b), "\n],\"baseTimeNanoseconds\":%" PRId64 "}\n", s->file_base);
				else
					snprintf(b, sizeof(b), "\n]}\n");
				puts_(s, b);
				s->phase = 2;
			}
			continue;
		}
		const struct tp_event *e = &s->ev[s->i++];
		if (in_window(s->start, s->end, s->base, e))
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
	tp_free(s->meta);
	tp_free(s->gpu_corr);
	tp_free(s);
}

/* The first pass: the correlations of GPU work in the window, sorted, into s->gpu_corr. */
static int read_gpu_corr(struct trace_stream *s, const char *run, int rank, struct tp_errbuf *err)
{
	struct tp_event *ev;
	struct store_trace *t;
	size_t n, i, cap = 0;
	int64_t base;
	int rc, rank_out;

	if ((rc = store_trace_open(s->r, run, rank, s->start, s->end, &t, &rank_out, err)))
		return rc;
	s->t = t;	/* flow_side reads its strings */
	while ((rc = store_trace_next(t, &ev, &n, &base, err)) > 0)
		for (i = 0; i < n; i++) {
			if (flow_side(s, &ev[i]) != 2 || !in_window(s->start, s->end, base, &ev[i]))
				continue;
			if (s->ngpu == cap) {
				int64_t *nc = tp_realloc(s->gpu_corr, (cap = cap ? cap * 2 : 4096) * sizeof(*nc));
				if (!nc) {
					rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
					goto out;
				}
				s->gpu_corr = nc;
			}
			s->gpu_corr[s->ngpu++] = ev[i].corr;
		}
	if (s->ngpu)
		qsort(s->gpu_corr, s->ngpu, sizeof(*s->gpu_corr), cmp_i64);
out:
	s->t = NULL;
	store_trace_close(t);
	return rc < 0 ? rc : TP_OK;
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
	    (rc = read_gpu_corr(s, req->params[0], (int)rank, &err)) ||
	    (rc = store_trace_open(s->r, req->params[0], (int)rank, s->start, s->end, &s->t, &rank_out, &err)) ||
	    (rc = store_trace_header(s->t, &s->meta, &s->file_base, &err))) {
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
