/*
 * h_common.c: what the handlers share, so that none calls another: query
 * arguments, small request bodies read whole, a reader opened with its
 * failure answered, an answer as JSON or CSV. Handlers call this file and http.c; routes.c alone names handlers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "answer.h"
#include "handlers.h"
#include "http.h"
#include "store/store.h"

int h_arg_int(struct request *req, const char *name, long long lo, long long hi, long long def,
	      long long *out)
{
	const char *s = http_arg(req, name);
	char *end;
	long long v;

	if (!s) {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (!*s || *end || errno == ERANGE || v < lo || v > hi) {
		http_reply_error(req, 400, "invalid_parameter", NULL,
				 "query parameter '%s' must be an integer from %lld to %lld", name, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

int h_valid_device(const char *d)
{
	size_t i;

	if (!strcmp(d, "cpu"))
		return 1;
	if (strncmp(d, "cuda:", 5) || !d[5] || strlen(d) > 9 || (d[5] == '0' && d[6]))
		return 0;
	for (i = 5; d[i]; i++)
		if (d[i] < '0' || d[i] > '9')
			return 0;
	return atoi(d + 5) < 1024;
}

/* Answer body (stolen) as JSON, or its table member as CSV when csv (?format=csv). */
static int reply(struct request *req, json_t *body, const char *member, int csv)
{
	size_t len;
	char *text;

	if (!csv || !body || !answer_csv_table(member))
		return http_reply_json(req, 200, body);
	text = answer_csv(body, member, &len);
	json_decref(body);
	if (!text)
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	return http_reply_text(req, 200, "text/csv; charset=utf-8", text, len);
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

int h_body_begin(struct request *req, size_t cap)
{
	struct h_body *b = tp_calloc(1, sizeof(*b));

	if (!(req->state = b))
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	b->cap = cap;
	return 0;
}

int h_body_data(struct request *req, const char *data, size_t len)
{
	struct h_body *b = req->state;
	char *nd;

	if (b->too_big || len > b->cap - b->len) {
		b->too_big = 1;
		return 0;
	}
	if (!(nd = tp_realloc(b->data, b->len + len + 1)))
		return http_reply_error(req, 503, "out_of_memory", NULL, "out of memory");
	memcpy(nd + b->len, data, len);
	b->data = nd;
	b->len += len;
	nd[b->len] = '\0';
	return 0;
}

void h_body_cleanup(struct request *req, int completed)
{
	struct h_body *b = req->state;

	(void)completed;
	if (b)
		tp_free(b->data);
	tp_free(b);
	req->state = NULL;
}
