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
#include <sys/types.h>

#include "handlers.h"
#include "http.h"
#include "store.h"

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
	size_t n = store_mem_text_read(cls, buf, max);

	(void)pos;
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void text_free(void *cls)
{
	store_mem_text_free(cls);
}

/* points=0: every point, as text made while it is sent (a JSON tree of a million points was 486 MB) */
static int all_points(struct request *req, struct store_reader *r, int rank, const char *device, int64_t start,
		      int64_t end)
{
	struct tp_errbuf err = { 0 };
	struct store_mem_text *m = NULL;
	struct MHD_Response *resp;
	int rc = store_memory_text(r, req->params[0], rank, device, start, end, &m, &err);

	store_reader_close(r);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	if (!(resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256 * 1024, text_read, m, text_free))) {
		store_mem_text_free(m);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	return http_reply_response(req, 200, resp);
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
	if (!peak && points == 0)
		return all_points(req, r, (int)rank, device, start, end);
	return h_answer(req, peak ? store_memory_peak(r, req->params[0], (int)rank, device, &err)
				  : store_memory(r, req->params[0], (int)rank, device, (long)points, start, end, &err),
			r, &err, NULL, 0);
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
	return h_answer(req, store_run_actions(r, req->params[0], (int)rank, &err), r, &err, NULL, 0);
}

/* nvidia-smi logs per GPU (GET /runs/{run}/gpu) */
int h_run_gpu(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_reader_open(req, &r))
		return 0;
	return h_answer(req, store_run_gpu(r, req->params[0], (int)rank, &err), r, &err, NULL, 0);
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
	return h_answer(req, store_run_stacks(r, req->params[0], (int)rank, (int)top, &err), r, &err, NULL, 0);
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
	return h_answer(req, store_memory_segments(r, req->params[0], (int)rank, device, artifact, &err), r, &err, NULL, 0);
}
