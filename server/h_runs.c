/*
 * h_runs.c: runs: GET /api/v1/runs, /api/v1/runs/{run}, PATCH /api/v1/runs/{run} (project,
 * tags, metadata, baseline; a small JSON body read whole, up to 64 KiB), and a run's per-step
 * metrics: POST /api/v1/runs/{run}/metrics (JSON lines, up to 8 MiB, all or none) and
 * GET /api/v1/runs/{run}/metrics[?name=]; DELETE /api/v1/runs/{run} and
 * DELETE /api/v1/runs/{run}/artifacts/{id} (one transaction each).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "reads.h"
#include "handlers.h"
#include "http.h"
#include "pipeline/runrank.h"

/* Run a store query with a fresh reader and answer with its result. */
static int answer(struct request *req, json_t *(*query)(struct store_reader *, const char *, int,
							 struct tp_errbuf *),
		  const char *run, int rank)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	json_t *body;
	int rc;

	if ((rc = store_reader_open(http_store(req), &r, &err)))
		return http_reply_fail(req, rc, &err, NULL);
	body = query(r, run, rank, &err);
	store_reader_close(r);
	if (!body)
		return http_reply_fail(req, err.rc ? err.rc : TP_ERR_NOMEM, &err, NULL);
	return http_reply_json(req, 200, body);
}

static json_t *q_runs(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	(void)run, (void)rank;
	return read_runs(r, err);
}

static json_t *q_run(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	(void)rank;
	return read_run(r, run, err);
}

int h_runs_list(struct request *req)
{
	return answer(req, q_runs, NULL, 0);
}

int h_run_get(struct request *req)
{
	return answer(req, q_run, req->params[0], 0);
}

/* DELETE: {"run", "deleted_artifacts": N, "run_deleted": bool} */
static int delete(struct request *req, int64_t artifact)
{
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	int64_t n = 0;
	int rc, gone = 0, rank = -1;

	rc = store_writer_open(http_store(req), &w, &err);
	if (!rc) {
		/* a trace's rank is derived again from the traces left, in the same transaction */
		if (!(rc = store_tx_begin(w, &err)) &&
		    !(rc = store_run_delete(w, req->params[0], artifact, &n, &gone, &rank, &err)) &&
		    !(rc = rank >= 0 && !gone ? runrank_derive(http_deriver(req), w, req->params[0], rank, &err) : TP_OK))
			rc = store_tx_commit(w, &err);
		if (rc)
			store_tx_rollback(w);
		store_writer_close(w);
		/* ids of artifacts removed may be given again: derive the run's ranks from their start next */
		runrank_forget(http_deriver(req), http_store(req), req->params[0]);
	}
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	return http_reply_json(req, 200, json_pack("{s:s, s:I, s:b}", "run", req->params[0], "deleted_artifacts",
						   (json_int_t)n, "run_deleted", gone));
}

int h_run_delete(struct request *req)
{
	return delete(req, 0);
}

int h_artifact_delete(struct request *req)
{
	return delete(req, strtoll(req->params[1], NULL, 10));
}

/* ---- request bodies read whole (PATCH, metrics) ---- */

#define PATCH_MAX_BODY (64 * 1024)
#define METRICS_MAX_BODY (8 * 1024 * 1024)

int h_run_patch_begin(struct request *req)
{
	return h_body_begin(req, PATCH_MAX_BODY);
}

/* NULL when the patch is acceptable, else what is wrong with it. */
static const char *patch_problem(json_t *patch)
{
	const char *key;
	json_t *v, *t;
	size_t i;

	if (!json_is_object(patch))
		return "the body must be a JSON object";
	json_object_foreach(patch, key, v) {
		if (!strcmp(key, "project")) {
			if (!json_is_null(v) && (!json_is_string(v) || !json_string_length(v) ||
						 json_string_length(v) > 128))
				return "'project' must be a string of 1 to 128 bytes, or null";
		} else if (!strcmp(key, "tags")) {
			if (!json_is_array(v) || json_array_size(v) > 64)
				return "'tags' must be an array of at most 64 strings";
			json_array_foreach(v, i, t)
				if (!json_is_string(t) || !json_string_length(t) || json_string_length(t) > 64)
					return "each tag must be a string of 1 to 64 bytes";
		} else if (!strcmp(key, "metadata")) {
			if (!json_is_object(v))
				return "'metadata' must be an object (a merge patch: null removes a key)";
		} else if (!strcmp(key, "baseline")) {
			if (!json_is_boolean(v))
				return "'baseline' must be true or false";
		} else {
			return "only project, tags, metadata and baseline can be set";
		}
	}
	return NULL;
}

int h_run_patch_end(struct request *req)
{
	struct h_body *b = req->state;
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	json_error_t je;
	json_t *patch;
	const char *problem;
	int rc;

	if (b->too_big)
		return http_reply_error(req, 413, "body_too_large", NULL, "a run patch is at most %d bytes",
					PATCH_MAX_BODY);
	patch = json_loadb(b->data ? b->data : "", b->len, JSON_REJECT_DUPLICATES, &je);
	if (!patch)
		return http_reply_error(req, 400, "invalid_json", NULL, "invalid JSON at byte %d: %s",
					je.position, je.text);
	if ((problem = patch_problem(patch))) {
		json_decref(patch);
		return http_reply_error(req, 400, "invalid_field", NULL, "%s", problem);
	}
	rc = store_writer_open(http_store(req), &w, &err);
	if (!rc) {
		rc = store_run_patch(w, req->params[0], patch, &err);
		store_writer_close(w);
	}
	json_decref(patch);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	return answer(req, q_run, req->params[0], 0);
}

/* ---- per-step metrics ---- */

int h_run_metrics_begin(struct request *req)
{
	return h_body_begin(req, METRICS_MAX_BODY);
}

#define METRIC_NAME_MAX 128

/* NULL when line is a valid metric {"step", "name", "value"}, else what is wrong with it. */
static const char *metric_problem(json_t *line)
{
	const char *key, *name;
	json_t *v;

	if (!json_is_object(line))
		return "a line must be a JSON object {\"step\": N, \"name\": \"...\", \"value\": X}";
	json_object_foreach(line, key, v)
		if (strcmp(key, "step") && strcmp(key, "name") && strcmp(key, "value"))
			return "unknown key (a line has only step, name and value)";
	v = json_object_get(line, "step");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return "'step' must be an integer of at least 0";
	v = json_object_get(line, "name");
	if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > METRIC_NAME_MAX)
		return "'name' must be a string of 1 to 128 bytes";
	for (name = json_string_value(v); *name; name++)
		if (iscntrl((unsigned char)*name))
			return "'name' must not hold control characters";
	if (!json_is_number(json_object_get(line, "value")))
		return "'value' must be a number";
	return NULL;
}

int h_run_metrics_end(struct request *req)
{
	struct h_body *b = req->state;
	struct tp_errbuf err = { 0 };
	struct store_writer *w;
	struct store_metric *m = NULL;
	json_t *lines = json_array();
	size_t at = 0, lineno = 0, n = 0, i;
	int rc;

	if (b->too_big) {
		json_decref(lines);
		return http_reply_error(req, 413, "body_too_large", NULL, "a metrics body is at most %d bytes (post"
					" long runs in parts)", METRICS_MAX_BODY);
	}
	if (!lines)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	/* every line is checked before anything is written: a bad line rejects the whole body */
	while (at < b->len) {
		const char *s = b->data + at, *nl = memchr(s, '\n', b->len - at);
		size_t len = nl ? (size_t)(nl - s) : b->len - at, k;
		json_error_t je;
		json_t *line;
		const char *problem;

		at += len + (nl != NULL);
		lineno++;
		for (k = 0; k < len && isspace((unsigned char)s[k]); k++)
			;
		if (k == len)
			continue;	/* blank */
		if (!(line = json_loadb(s, len, JSON_REJECT_DUPLICATES, &je))) {
			json_decref(lines);
			return http_reply_error(req, 400, "invalid_metrics", json_pack("{s:I}", "line", (json_int_t)lineno),
						"line %zu: invalid JSON at column %d: %s", lineno, je.column, je.text);
		}
		if ((problem = metric_problem(line)) || json_array_append_new(lines, line)) {
			if (problem)
				json_decref(line);
			json_decref(lines);
			if (!problem)
				return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
			return http_reply_error(req, 400, "invalid_metrics", json_pack("{s:I}", "line", (json_int_t)lineno),
						"line %zu: %s", lineno, problem);
		}
	}
	if (!(n = json_array_size(lines))) {
		json_decref(lines);
		return http_reply_error(req, 400, "invalid_metrics", NULL, "the body holds no metric lines");
	}
	if (!(m = tp_calloc(n, sizeof(*m)))) {
		json_decref(lines);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	for (i = 0; i < n; i++) {
		json_t *l = json_array_get(lines, i);
		m[i].step = json_integer_value(json_object_get(l, "step"));
		m[i].name = json_string_value(json_object_get(l, "name"));
		m[i].value = json_number_value(json_object_get(l, "value"));
	}
	rc = store_writer_open(http_store(req), &w, &err);
	if (!rc) {
		rc = store_metrics_put(w, req->params[0], m, n, &err);
		store_writer_close(w);
	}
	tp_free(m);
	json_decref(lines);
	if (rc)
		return http_reply_fail(req, rc, &err, NULL);
	return http_reply_json(req, 200, json_pack("{s:s, s:I}", "run", req->params[0], "written", (json_int_t)n));
}

int h_run_metrics(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;

	if (h_reader_open(req, &r))
		return 0;
	return h_answer(req, read_metrics(r, req->params[0], http_arg(req, "name"), &err), r, &err, "metrics", 0);
}
