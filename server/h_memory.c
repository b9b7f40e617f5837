/*
 * h_memory.c: memory timelines of a rank:
 *   GET /api/v1/runs/{run}/memory?rank=R&device=D&points=N&start_ns=A&end_ns=B
 *   GET /api/v1/runs/{run}/memory/peak?rank=R&device=D
 *   GET /api/v1/runs/{run}/memory/segments?rank=R&device=D&artifact=ID
 * Without device, the rank's first GPU with memory data (else cpu); without
 * rank, the run's lowest rank with data. points: at most N points (default
 * 2000), each the highest of its stretch so the peak survives; 0 for all.
 * start_ns/end_ns: only that window (a chart zoomed in asks for its detail).
 */

#include <microhttpd.h>
#include <string.h>
#include <sys/types.h>

#include "alloc.h"
#include "analysis/runline.h"
#include "handlers.h"
#include "reads.h"
#include "http.h"
#include "store/store.h"

#define POINTS_DEFAULT 2000
#define POINTS_MAX 1000000

/* ?device=: NULL when absent; "" when invalid (answered) */
static const char *arg_device(struct request *req)
{
	const char *d = http_arg(req, "device");

	if (!d || h_valid_device(d))
		return d;
	http_reply_error(req, 400, "invalid_parameter", NULL, "device must be cpu or cuda:N (N from 0 to 1023)");
	return "";
}

static ssize_t text_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	size_t n = mem_text_read(cls, buf, max);

	(void)pos;
	if (n)
		return (ssize_t)n;
	/* the database failed mid-way: the client sees the answer cut off, never a short JSON that parses */
	return mem_text_failed(cls) ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
}

static void text_free(void *cls)
{
	mem_text_free(cls);
}

/* points=0: every point, as text made while it is sent (a JSON tree of a million points was 486 MB) */
static int all_points(struct request *req, struct store_reader *r, int rank, const char *device, int64_t start,
		      int64_t end, const int64_t *gaps, size_t ngaps)
{
	struct tp_errbuf err = { 0 };
	struct mem_text *m = NULL;
	struct MHD_Response *resp;
	/* r is the stream's now: it reads the points again for each column, in one snapshot */
	int rc = read_memory_text(r, req->params[0], rank, device, start, end, gaps, ngaps, &m, &err);

	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	if (!(resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, text_read, m, text_free))) {
		mem_text_free(m);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return http_reply_response(req, 200, resp);
}

/* [start, end) pairs between the rank's profiling cycles (runline.h); none when it has no steps */
static int cycle_gaps(struct store_reader *r, const char *run, int rank, int64_t **out, size_t *n,
		      struct tp_errbuf *err)
{
	struct rl_step *s = NULL;
	size_t ns = 0, i;
	int rc, got;

	*out = NULL;
	*n = 0;
	if ((rc = store_timeline(r, run, rank, &s, &ns, &got, NULL, err)))
		return rc == TP_ERR_NOTFOUND ? (memset(err, 0, sizeof(*err)), TP_OK) : rc;
	runline_cycles(s, ns);
	for (i = 1; i < ns; i++) {
		int64_t end = s[i - 1].start_ns + s[i - 1].dur_ns;
		if (s[i].cycle == s[i - 1].cycle || s[i].start_ns <= end)
			continue;
		int64_t *g = tp_realloc(*out, (*n + 1) * 2 * sizeof(*g));
		if (!g) {
			tp_free(s);
			tp_free(*out);
			*out = NULL;
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		}
		g[*n * 2] = end;
		g[*n * 2 + 1] = s[i].start_ns;
		*out = g;
		(*n)++;
	}
	tp_free(s);
	return TP_OK;
}

static int answer(struct request *req, int peak)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, points = POINTS_DEFAULT, start = INT64_MIN, end = INT64_MAX;
	const char *device;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) ||
	    (!peak && (h_arg_int(req, "points", 0, POINTS_MAX, POINTS_DEFAULT, &points) ||
		       h_arg_int(req, "start_ns", 0, INT64_MAX, INT64_MIN, &start) ||
		       h_arg_int(req, "end_ns", 0, INT64_MAX, INT64_MAX, &end))))
		return 0;
	if (start >= end)
		return http_reply_error(req, 400, "invalid_parameter", NULL, "start_ns must be below end_ns");
	if (((device = arg_device(req)) && !*device) || h_reader_open(req, &r))
		return 0;
	if (peak)
		return h_answer(req, read_memory_peak(r, req->params[0], (int)rank, device, &err), r, &err, NULL, 0);
	/* a trace's memory is not recorded between its profiling cycles: those are its gaps */
	int64_t *gaps = NULL;
	size_t ngaps = 0;
	int rc;
	if ((rc = cycle_gaps(r, req->params[0], (int)rank, &gaps, &ngaps, &err))) {
		store_reader_close(r);
		return http_reply_fail(req, rc, &err, NULL);
	}
	if (points == 0) {
		rc = all_points(req, r, (int)rank, device, start, end, gaps, ngaps);
		tp_free(gaps);
		return rc;
	}
	json_t *o = read_memory(r, req->params[0], (int)rank, device, (long)points, start, end, gaps, ngaps, &err);
	tp_free(gaps);
	return h_answer(req, o, r, &err, NULL, 0);
}

int h_run_memory(struct request *req)
{
	return answer(req, 0);
}

int h_run_memory_peak(struct request *req)
{
	return answer(req, 1);
}

/* a Lightning report's actions (GET /runs/{run}/actions) */
int h_run_actions(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_actions(r, req->params[0], (int)rank, &err), r, &err, NULL, 0);
}

/* rlhf-canary metrics.json (GET /runs/{run}/canary) */
int h_run_canary(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_canary(r, req->params[0], (int)rank, &err), r, &err, NULL, 0);
}

/* nvidia-smi logs per GPU (GET /runs/{run}/gpu) */
/* The first and last timestamps of every column of a /gpu answer; 0 when it has none. */
static int log_span(json_t *o, int64_t *first, int64_t *last)
{
	json_t *g, *c, *t;
	size_t i, j, k;
	int any = 0;

	json_array_foreach(json_object_get(o, "gpus"), i, g)
		json_array_foreach(json_object_get(g, "columns"), j, c)
			json_array_foreach(json_object_get(c, "t_ns"), k, t) {
				int64_t v = json_integer_value(t);
				if (!json_is_integer(t))
					continue;
				*first = any && *first < v ? *first : v;
				*last = any && *last > v ? *last : v;
				any = 1;
			}
	return any;
}

/*
 * The rank's trace steps on the log's clock ("steps" of /gpu): shifted by the node's
 * UTC offset, given (?utc_offset_min) or found (runline_log_offset); null when the log
 * has no timestamps, the rank no trace steps, or no shift puts a step in the log's span.
 */
static json_t *steps_on_log(struct store_reader *r, const char *run, int rank, json_t *o, long long given,
			    struct tp_errbuf *err)
{
	struct rl_step *s = NULL;
	size_t n = 0, inside, i;
	int64_t first = 0, last = 0, off;
	int got;
	json_t *list, *out;

	if (!log_span(o, &first, &last))
		return json_null();
	if (store_timeline(r, run, rank, &s, &n, &got, NULL, err)) {
		if (err->rc != TP_ERR_NOTFOUND)
			return NULL;
		memset(err, 0, sizeof(*err));
		return json_null();
	}
	if (given != INT64_MIN) {
		off = given * 60 * 1000000000LL;
		for (inside = 0, i = 0; i < n; i++)
			inside += s[i].start_ns + off >= first && s[i].start_ns + off <= last;
	} else
		inside = runline_log_offset(s, n, first, last, &off);
	if (!n || (given == INT64_MIN && !inside)) {
		tp_free(s);
		return json_null();
	}
	list = json_array();
	for (i = 0; list && i < n; i++)
		if (json_array_append_new(list, json_pack("{s:I, s:I, s:I}", "step", (json_int_t)s[i].step, "start_ns",
							  (json_int_t)tp_sat_add(s[i].start_ns, off), "end_ns",
							  (json_int_t)tp_sat_add(tp_sat_add(s[i].start_ns, s[i].dur_ns), off))))
			json_decref(list), list = NULL;
	tp_free(s);
	out = list ? json_pack("{s:s, s:I, s:f, s:I, s:o}", "clock", given != INT64_MIN ? "given" : off ? "shifted" : "utc",
			       "offset_ns", (json_int_t)off, "utc_offset_min", (double)off / 60e9, "inside", (json_int_t)inside,
			       "steps", list) : NULL;
	if (!out)
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	return out;
}

int h_run_gpu(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, given;
	json_t *o, *steps;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) ||
	    h_arg_int(req, "utc_offset_min", -12 * 60, 14 * 60, INT64_MIN, &given) || h_reader_open(req, &r))
		return 0;
	o = read_gpu(r, req->params[0], (int)rank, &err);
	if (o && (!(steps = steps_on_log(r, req->params[0], (int)json_integer_value(json_object_get(o, "rank")), o,
					 given, &err)) || json_object_set_new(o, "steps", steps))) {
		json_decref(o);
		o = NULL;
	}
	return h_answer(req, o, r, &err, NULL, 0);
}

/* folded stacks' frames, by total (GET /runs/{run}/stacks?top=N) */
int h_run_stacks(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, top;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "top", 1, 100000, 50, &top) ||
	    h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_stacks(r, req->params[0], (int)rank, (int)top, &err), r, &err, NULL, 0);
}

/* a snapshot's segments and blocks at dump time (the newest, or ?artifact) */
int h_run_memory_segments(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, artifact;
	const char *device;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "artifact", 1, INT64_MAX, 0, &artifact))
		return 0;
	if (((device = arg_device(req)) && !*device) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_segments(r, req->params[0], (int)rank, device, artifact, &err), r, &err, NULL, 0);
}
