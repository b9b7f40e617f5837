/*
 * runs_util.c: the run suites' shared helpers (runs_util.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs_util.h"

struct tu_server ru_srv;

void ru_start(void)
{
	ck_assert_int_eq(tu_server_start(&ru_srv, NULL), 0);
}

void ru_stop(void)
{
	tu_server_cleanup(&ru_srv);
}

/* method path through server s, expecting status; the body as JSON */
json_t *ru_call_on(const struct tu_server *s, const char *method, const char *path, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(s, method, path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* method path (body), expecting status; the body as JSON */
json_t *ru_call(const char *method, const char *path, const void *body, size_t len, long status)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&ru_srv, method, path, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* upload a fixture to run at rank; its artifact id */
long long ru_upload(const char *run, int rank, const char *fixture)
{
	char *path = tu_fixture(fixture), url[256];
	size_t len;
	uint8_t *b = tu_read_file(path, &len);
	json_t *j;
	long long id;

	ck_assert_ptr_nonnull(b);
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=%d&name=%s", run, rank, strrchr(fixture, '/') + 1);
	j = ru_call("POST", url, b, len, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	json_decref(j);
	free(b);
	free(path);
	return id;
}

const char *ru_value_end(const char *p, const char *end)
{
	int depth = 0, str = 0;

	for (; p < end; p++) {
		if (str) {
			if (*p == '\\')
				p++;
			else if (*p == '"')
				str = 0;
		} else if (*p == '"') {
			str = 1;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if ((*p == '}' || *p == ']') && --depth == 0) {
			return p + 1;
		}
	}
	return NULL;
}

/* Find traceEvents' elements in the (inflated) trace text. */
void ru_cut_find(const char *s, size_t len, struct cut *c)
{
	const char *end = s + len, *p = strstr(s, "\"traceEvents\"");
	size_t cap = 1024;

	ck_assert_ptr_nonnull(p);
	p = strchr(p, '[');
	c->head = s;
	c->nhead = (size_t)(p + 1 - s);
	c->ev = malloc(cap * sizeof(*c->ev));
	c->n = 0;
	for (p++;;) {
		while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == ',')
			p++;
		if (*p == ']')
			break;
		ck_assert_int_eq(*p, '{');
		if (c->n + 1 >= cap)
			c->ev = realloc(c->ev, (cap *= 2) * sizeof(*c->ev));
		c->ev[c->n++] = p;
		ck_assert_ptr_nonnull(p = ru_value_end(p, end));
	}
	c->ev[c->n] = p;
	c->tail = p;
	c->ntail = (size_t)(end - p);
}

/* Upload the events [from, to) of c as one trace to run, rank 0, through server s. */
void ru_upload_chunk_via(const struct tu_server *s, const struct cut *c, size_t from, size_t to,
			 const char *run, size_t part)
{
	size_t body = (size_t)(c->ev[to] - c->ev[from]);
	char *buf = malloc(c->nhead + body + c->ntail + 1), url[256];
	size_t len = 0;

	memcpy(buf, c->head, c->nhead);
	len = c->nhead;
	memcpy(buf + len, c->ev[from], body);
	len += body;
	while (len > c->nhead && buf[len - 1] != '}')	/* the comma after the last event */
		len--;
	memcpy(buf + len, c->tail, c->ntail);
	len += c->ntail;
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=part%zu.json", run, part);
	{
		struct tu_resp r;
		ck_assert_int_eq(tu_http(s, "POST", url, buf, len, NULL, &r), 0);
		ck_assert_msg(r.status == 201, "POST %s: %ld %s", url, r.status, r.body);
		tu_resp_free(&r);
	}
	free(buf);
}

/* GET tail of run whole through sa and of run cut through sb: the same bytes. */
void ru_same_answer_via(const struct tu_server *sa, const char *whole, const struct tu_server *sb,
			const char *cut, const char *tail)
{
	char a[256], b[256];
	struct tu_resp ra, rb;

	snprintf(a, sizeof(a), "/api/v1/runs/%s%s", whole, tail);
	snprintf(b, sizeof(b), "/api/v1/runs/%s%s", cut, tail);
	ck_assert_int_eq(tu_http(sa, "GET", a, NULL, 0, NULL, &ra), 0);
	ck_assert_int_eq(tu_http(sb, "GET", b, NULL, 0, NULL, &rb), 0);
	ck_assert_msg(ra.status == 200 && rb.status == 200, "%s: %ld / %ld: %s", tail, ra.status, rb.status, rb.body);
	if (ra.len != rb.len || memcmp(ra.body, rb.body, ra.len)) {
		size_t i = 0;
		while (i < ra.len && i < rb.len && ra.body[i] == rb.body[i])
			i++;
		ck_abort_msg("%s differs at byte %zu of %zu/%zu:\n whole: %.160s\n   cut: %.160s", tail, i, ra.len, rb.len,
			     ra.body + (i > 40 ? i - 40 : 0), rb.body + (i > 40 ? i - 40 : 0));
	}
	tu_resp_free(&ra);
	tu_resp_free(&rb);
}

void ru_same_answer(const char *whole, const char *cut, const char *tail)
{
	ru_same_answer_via(&ru_srv, whole, &ru_srv, cut, tail);
}

/* what ru_same_answer() compares, every run answer */
const char *const ru_answers[] = {
	"/steps", "/ops?device=cpu&limit=100000", "/ops?device=gpu&limit=100000", "/kernels?kind=kernel&limit=100000",
	"/kernels?kind=memcpy&limit=100000", "/kernels?kind=memset&limit=100000", "/ranks", "/diagnosis",
	"/memory?points=0", "/memory/peak",
};
const size_t ru_nanswers = sizeof(ru_answers) / sizeof(ru_answers[0]);

/* A trace of one profiling cycle: steps first..first+2, each dur_ms long, from start_s seconds. */
long long ru_upload_cycle(const char *run, int first, int start_s, int dur_ms)
{
	char body[2048], url[256];
	size_t len = 0;
	long long id;
	json_t *j;

	len += (size_t)snprintf(body + len, sizeof(body) - len, "{\"traceEvents\":[");
	for (int k = 0; k < 3; k++)
		len += (size_t)snprintf(body + len, sizeof(body) - len,
					"%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\",\"pid\":1,"
					"\"tid\":1,\"ts\":%lld,\"dur\":%d}", k ? "," : "", first + k,
					(long long)start_s * 1000000 + (long long)k * dur_ms * 1000, dur_ms * 1000);
	len += (size_t)snprintf(body + len, sizeof(body) - len, "]}");
	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=cycle%d.json", run, first);
	j = ru_call("POST", url, body, len, 201);
	id = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
	json_decref(j);
	return id;
}

/* the value of a metric line "name value" in /metrics, -1 when absent */
double ru_metric_on(const struct tu_server *s, const char *name)
{
	struct tu_resp r;
	double v = -1;
	size_t n = strlen(name);

	ck_assert_int_eq(tu_http(s, "GET", "/metrics", NULL, 0, NULL, &r), 0);
	for (const char *p = r.body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			v = strtod(p + n + 1, NULL);
	tu_resp_free(&r);
	return v;
}

double ru_metric(const char *name)
{
	return ru_metric_on(&ru_srv, name);
}
