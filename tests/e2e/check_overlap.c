/*
 * check_overlap.c: the same events uploaded twice to one rank (issue 50). A
 * trace sent again with a trailing space, chunks that overlap by a fifth, a
 * chunk sent again with one byte of one event changed: each later upload that
 * repeats an event of the rank gets 409 overlapping_upload and leaves nothing
 * (pipeline/overlap.h), so the run answers byte for byte as the file uploaded
 * once; the chunks cut where they do not overlap all join, and a chunk too
 * large for its fingerprints to be kept is still checked against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runs_util.h"
#include "suites.h"
#include "testutil.h"

static struct tu_server srv;

static void setup(void)
{
	ck_assert_int_eq(tu_server_start(&srv, NULL), 0);
}

static void teardown(void)
{
	tu_server_cleanup(&srv);
}

/* A trace's text and where its traceEvents' elements start (ev[n]: the closing ']'). */
struct doc {
	char *text;
	size_t len, nhead, n;
	const char **ev;
};

static void doc_read(char *path, struct doc *d)
{
	size_t glen, cap = 1024;
	uint8_t *gz = tu_read_file(path, &glen);
	const char *p, *end;

	ck_assert_msg(gz != NULL, "cannot read %s", path);
	d->text = (char *)tu_gunzip(gz, glen, &d->len);
	ck_assert_ptr_nonnull(d->text);
	end = d->text + d->len;
	ck_assert_ptr_nonnull(p = strstr(d->text, "\"traceEvents\""));
	p = strchr(p, '[');
	d->nhead = (size_t)(p + 1 - d->text);
	d->ev = malloc(cap * sizeof(*d->ev));
	d->n = 0;
	for (p++;;) {
		while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == ',')
			p++;
		if (*p == ']')
			break;
		ck_assert_int_eq(*p, '{');
		if (d->n + 1 >= cap)
			d->ev = realloc(d->ev, (cap *= 2) * sizeof(*d->ev));
		d->ev[d->n++] = p;
		ck_assert_ptr_nonnull(p = ru_value_end(p, end));
	}
	d->ev[d->n] = p;
	free(gz);
	free(path);
}

static void doc_free(struct doc *d)
{
	free(d->text);
	free(d->ev);
}

/* The file with only the events [from, to) (its other keys kept, as the collector's chunks do). */
static char *chunk(const struct doc *d, size_t from, size_t to, size_t *len)
{
	size_t body = (size_t)(d->ev[to] - d->ev[from]), ntail = (size_t)(d->text + d->len - d->ev[d->n]);
	char *buf = malloc(d->nhead + body + ntail + 1);

	memcpy(buf, d->text, d->nhead);
	*len = d->nhead;
	memcpy(buf + *len, d->ev[from], body);
	*len += body;
	while (*len > d->nhead && buf[*len - 1] != '}')	/* the comma after the last event */
		(*len)--;
	memcpy(buf + *len, d->ev[d->n], ntail);
	*len += ntail;
	buf[*len] = 0;
	return buf;
}

/* POST body to run, rank 0: the status must be want; a refusal says overlapping_upload. */
static void post(const char *run, const char *name, const char *body, size_t len, long want)
{
	char url[256];
	struct tu_resp r;

	snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?rank=0&name=%s", run, name);
	ck_assert_int_eq(tu_http(&srv, "POST", url, body, len, NULL, &r), 0);
	ck_assert_msg(r.status == want, "POST %s: %ld, expected %ld: %.400s", url, r.status, want, r.body);
	if (want == 409) {
		json_t *j = tu_json(&r);
		ck_assert_ptr_nonnull(j);
		ck_assert_str_eq(tu_error_code(j), "overlapping_upload");
		json_decref(j);
	}
	tu_resp_free(&r);
}

static void post_chunk(const struct doc *d, const char *run, const char *name, size_t from, size_t to, long want)
{
	size_t len;
	char *b = chunk(d, from, to, &len);

	post(run, name, b, len, want);
	free(b);
}

static const char *const answers[] = {
	"/steps", "/ops?device=cpu&limit=100000", "/ops?device=gpu&limit=100000",
	"/kernels?kind=kernel&limit=100000", "/kernels?kind=memcpy&limit=100000", "/diagnosis",
	"/memory?points=0", "/memory/peak",
};

/* Every answer of run is whole's, byte for byte. */
static void same_as(const char *whole, const char *run, int memory)
{
	for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		char a[256], b[256];
		struct tu_resp ra, rb;
		if (!memory && !strncmp(answers[i], "/memory", 7))
			continue;
		snprintf(a, sizeof(a), "/api/v1/runs/%s%s", whole, answers[i]);
		snprintf(b, sizeof(b), "/api/v1/runs/%s%s", run, answers[i]);
		ck_assert_int_eq(tu_http(&srv, "GET", a, NULL, 0, NULL, &ra), 0);
		ck_assert_int_eq(tu_http(&srv, "GET", b, NULL, 0, NULL, &rb), 0);
		ck_assert_msg(ra.status == 200 && rb.status == 200, "%s: %ld / %ld: %.300s", answers[i], ra.status,
			      rb.status, rb.body);
		if (ra.len != rb.len || memcmp(ra.body, rb.body, ra.len)) {
			size_t k = 0;
			while (k < ra.len && k < rb.len && ra.body[k] == rb.body[k])
				k++;
			ck_abort_msg("%s of %s differs at byte %zu of %zu/%zu:\n once: %.160s\n  got: %.160s", answers[i],
				     run, k, ra.len, rb.len, ra.body + (k > 40 ? k - 40 : 0),
				     rb.body + (k > 40 ? k - 40 : 0));
		}
		tu_resp_free(&ra);
		tu_resp_free(&rb);
	}
}

/* The four cases on one trace file (path, malloc'd: freed here); p: a prefix for its runs. */
static void overlaps(char *path, const char *p, int memory)
{
	struct doc d;
	char run[64], once[64], *twice;
	size_t n, len;
	const char *at;

	doc_read(path, &d);
	n = d.n;
	ck_assert_uint_gt(n, 1000);
	snprintf(once, sizeof(once), "%s-once", p);
	post(once, "trace.json", d.text, d.len, 201);

	/* the same bytes plus a trailing space: a file of its own, every event the rank's already */
	snprintf(run, sizeof(run), "%s-twice", p);
	post(run, "trace.json", d.text, d.len, 201);
	twice = malloc(d.len + 1);
	memcpy(twice, d.text, d.len);
	twice[d.len] = ' ';
	post(run, "again.json", twice, d.len + 1, 409);
	post(run, "trace.json", d.text, d.len, 200);	/* the same bytes: the same artifact, as before */
	free(twice);
	same_as(once, run, memory);

	/* chunks that overlap by a fifth: the second refused; the events the rank lacks join */
	snprintf(run, sizeof(run), "%s-overlap", p);
	post_chunk(&d, run, "a.json", 0, n * 3 / 5, 201);
	post_chunk(&d, run, "b.json", n * 2 / 5, n, 409);
	post_chunk(&d, run, "c.json", n * 3 / 5, n, 201);
	same_as(once, run, memory);

	/* a chunk sent again with one digit of one event's dur changed */
	snprintf(run, sizeof(run), "%s-changed", p);
	post_chunk(&d, run, "a.json", 0, n / 2, 201);
	post_chunk(&d, run, "b.json", n / 2, n, 201);
	{
		char *b = chunk(&d, n / 2, n, &len), *q;
		ck_assert_ptr_nonnull(at = strstr(b + d.nhead, "\"dur\""));
		q = (char *)at + 5;
		while (*q < '0' || *q > '9')
			q++;
		*q = *q == '9' ? '8' : (char)(*q + 1);
		post(run, "b2.json", b, len, 409);
		free(b);
	}
	same_as(once, run, memory);

	/* cut in seven where nothing overlaps: all join, as the whole */
	snprintf(run, sizeof(run), "%s-seven", p);
	for (size_t k = 0; k < 7; k++) {
		char name[32];
		snprintf(name, sizeof(name), "part%zu.json", k);
		post_chunk(&d, run, name, n * k / 7, n * (k + 1) / 7, 201);
	}
	/* the server holds their fingerprints in segments of 64 K (pipeline/overlap.c): a repeat of
	 * the last part's tail is found in the last, then read from the store and refused */
	post_chunk(&d, run, "tail.json", n - 100, n, 409);
	same_as(once, run, memory);

	/* a chunk of more events than the server keeps the fingerprints of (64 K; V100's middle half
	 * has 108 K: pipeline/overlap.h) is noted by its span of time alone: one that repeats its last
	 * events is read, and refused, all the same */
	snprintf(run, sizeof(run), "%s-span", p);
	post_chunk(&d, run, "a.json", 0, n / 4, 201);
	post_chunk(&d, run, "b.json", n / 4, n * 3 / 4, 201);
	post_chunk(&d, run, "c.json", n * 3 / 4 - 50, n, 409);
	post_chunk(&d, run, "d.json", n * 3 / 4, n, 201);
	same_as(once, run, memory);
	doc_free(&d);
}

START_TEST(test_overlap_h200)
{
	/* a real H200 recording (tests/fixtures/gpu/README.md), with the allocator's [memory] events */
	overlaps(tu_source_path("tests/fixtures/gpu/healthy/healthy.1795786453607760023.pt.trace.json.gz"), "h200", 1);
}
END_TEST

START_TEST(test_overlap_v100)
{
	/* HTA's V100 training trace (216 K events, [memory] events too) */
	overlaps(tu_fixture("traces/hta_v100_train_memory.json.gz"), "v100", 1);
}
END_TEST

Suite *suite_overlap(void)
{
	Suite *s = suite_create("overlap");
	TCase *tc = tcase_create("overlap");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_overlap_h200);
	tcase_add_test(tc, test_overlap_v100);
	suite_add_tcase(s, tc);
	return s;
}
