/*
 * h_analysis.c: what analysis stored, per rank of a run:
 *   GET /api/v1/runs/{run}/steps?rank=R[&format=csv]
 *   GET /api/v1/runs/{run}/ops?rank=R&device=cpu|gpu&sort=self_ns&limit=N[&format=csv]
 *   GET /api/v1/runs/{run}/kernels?rank=R&kind=kernel|memcpy|memset&limit=N[&format=csv]
 *   GET /api/v1/runs/{run}/ranks
 *   GET /api/v1/runs/{run}/diagnosis?rank=R
 * Without rank, the run's lowest rank with data.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "analysis/diagnosis.h"
#include "handlers.h"
#include "http.h"

#define LIMIT_DEFAULT 100
#define LIMIT_MAX 100000

/* ---- CSV: an array of flat objects, nested objects flattened as "key.sub" ---- */

struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const char *s, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->n + len + 1)
			cap *= 2;
		char *np = tp_realloc(b->p, cap);
		if (!np) {
			b->oom = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, len);
	b->n += len;
	b->p[b->n] = 0;
}

static void put_s(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* RFC 4180: quote when needed, doubling quotes */
static void put_field(struct buf *b, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		put_s(b, s);
		return;
	}
	put_s(b, "\"");
	for (const char *q; (q = strchr(s, '"')); s = q + 1) {
		put(b, s, (size_t)(q - s));
		put_s(b, "\"\"");
	}
	put_s(b, s);
	put_s(b, "\"");
}

static void put_value(struct buf *b, json_t *v)
{
	char num[64];

	switch (json_typeof(v)) {
	case JSON_STRING: put_field(b, json_string_value(v)); break;
	case JSON_INTEGER: snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v)); put_s(b, num); break;
	case JSON_REAL: snprintf(num, sizeof(num), "%.12g", json_real_value(v)); put_s(b, num); break;
	case JSON_TRUE: put_s(b, "true"); break;
	case JSON_FALSE: put_s(b, "false"); break;
	default: break;		/* null: empty */
	}
}

/* The header (names) or one row (values) of object o. */
static void put_row(struct buf *b, json_t *o, int names)
{
	const char *key, *sub;
	json_t *v, *w;
	int first = 1;

	json_object_foreach(o, key, v) {
		if (json_is_object(v)) {
			json_object_foreach(v, sub, w) {
				put_s(b, first ? "" : ",");
				first = 0;
				if (names) {
					char name[256];
					snprintf(name, sizeof(name), "%s.%s", key, sub);
					put_field(b, name);
				} else {
					put_value(b, w);
				}
			}
			continue;
		}
		put_s(b, first ? "" : ",");
		first = 0;
		if (names)
			put_field(b, key);
		else
			put_value(b, v);
	}
	put_s(b, "\r\n");
}

/* Answer body (stolen) as JSON, or its array member as CSV when ?format=csv. */
static int reply(struct request *req, json_t *body, const char *member, int csv)
{
	struct buf b = { 0 };
	json_t *rows, *row;
	size_t i;

	if (!csv || !body)
		return http_reply_json(req, 200, body);
	rows = json_object_get(body, member);
	json_array_foreach(rows, i, row) {
		if (!i)
			put_row(&b, row, 1);
		put_row(&b, row, 0);
	}
	json_decref(body);
	put(&b, "", 0);		/* an empty table is an empty body */
	if (b.oom) {
		tp_free(b.p);
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	}
	return http_reply_text(req, 200, "text/csv; charset=utf-8", b.p, b.n);
}

/* ?format=json|csv: 1 for csv, 0 for json, -1 when answered with an error */
static int want_csv(struct request *req)
{
	const char *f = http_arg(req, "format");

	if (!f || !strcmp(f, "json"))
		return 0;
	if (!strcmp(f, "csv"))
		return 1;
	http_reply_error(req, 400, "invalid_parameter", NULL, "format must be json or csv");
	return -1;
}

/* ?name= one of choices (def when absent): its index, or -1 when answered with an error */
static int arg_choice(struct request *req, const char *name, const char *const *choices, int n, int def)
{
	const char *v = http_arg(req, name);
	int i;

	if (!v)
		return def;
	for (i = 0; i < n; i++)
		if (!strcmp(v, choices[i]))
			return i;
	http_reply_error(req, 400, "invalid_parameter", NULL, "query parameter '%s' has an unknown value", name);
	return -1;
}

int h_reader_open(struct request *req, struct store_reader **r)
{
	struct tp_errbuf err = { 0 };
	int rc = store_reader_open(http_store(req), r, &err);

	if (rc)
		http_reply_fail(req, rc, &err, NULL);
	return rc;
}

int h_answer(struct request *req, json_t *body, struct store_reader *r, const struct tp_errbuf *err,
	     const char *member, int csv)
{
	store_reader_close(r);
	if (!body)
		return http_reply_fail(req, err->rc ? err->rc : TP_ERR_NOMEM, err, NULL);
	return reply(req, body, member, csv);
}

int h_run_steps(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank;
	int csv;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || (csv = want_csv(req)) < 0 || h_reader_open(req, &r))
		return 0;
	return h_answer(req, store_steps(r, req->params[0], (int)rank, &err), r, &err, "steps", csv);
}

int h_run_ops(struct request *req)
{
	static const char *const devices[] = { "cpu", "gpu" };
	static const char *const sorts[] = { "self_ns", "total_ns", "calls", "name" };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, limit;
	int csv, dev, sort;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    (csv = want_csv(req)) < 0 || (dev = arg_choice(req, "device", devices, 2, AN_DEV_CPU)) < 0 ||
	    (sort = arg_choice(req, "sort", sorts, 4, 0)) < 0 || h_reader_open(req, &r))
		return 0;
	return h_answer(req, store_ops(r, req->params[0], (int)rank, dev, sorts[sort], (long)limit, &err), r, &err,
		      "ops", csv);
}

int h_run_kernels(struct request *req)
{
	static const char *const kinds[] = { "kernel", "memcpy", "memset" };
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	long long rank, limit;
	int csv, kind;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || h_arg_int(req, "limit", 1, LIMIT_MAX, LIMIT_DEFAULT, &limit) ||
	    (csv = want_csv(req)) < 0 || (kind = arg_choice(req, "kind", kinds, 3, AN_GPU_KERNEL)) < 0 ||
	    h_reader_open(req, &r))
		return 0;
	return h_answer(req, store_kernels(r, req->params[0], (int)rank, kind, (long)limit, &err), r, &err,
		      "kernels", csv);
}

int h_run_ranks(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	int csv;

	if ((csv = want_csv(req)) < 0 || h_reader_open(req, &r))
		return 0;
	return h_answer(req, store_ranks(r, req->params[0], &err), r, &err, "ranks", csv);
}

int h_run_diagnosis(struct request *req)
{
	struct tp_errbuf err = { 0 };
	struct store_reader *r;
	struct diag_input in;
	int64_t *durs;
	long long rank;
	int csv;
	json_t *body = NULL;

	if (h_arg_int(req, "rank", 0, 65535, -1, &rank) || (csv = want_csv(req)) < 0 || h_reader_open(req, &r))
		return 0;
	if (csv) {
		store_reader_close(r);
		return http_reply_error(req, 400, "invalid_parameter", NULL, "diagnosis answers JSON only");
	}
	if (!store_diag_input(r, req->params[0], (int)rank, &in, &durs, &err) && !(body = diagnosis_run(&in)))
		tp_fail(&err, TP_ERR_NOMEM, NULL, "out of memory");
	tp_free(durs);
	return h_answer(req, body, r, &err, "findings", 0);
}
