/*
 * fuzz_trace.c: libFuzzer target for the upload path before the database:
 * bytes -> inflate (gzip by magic, with caps) -> streaming trace parser
 * -> analysis (steps, breakdowns, operator and kernel tables).
 * The first byte picks the piece size, so token and gzip boundaries land
 * everywhere. Checks what must hold for any input: no crash, no leak, an
 * error code from the documented set, and events that make sense.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/analysis.h"
#include "ingest/inflate.h"
#include "ingest/trace.h"

struct ctx {
	struct trace_parser *p;
	struct analysis *an;
	struct tp_errbuf err;
	unsigned long events;
};

static int on_string(void *payload, uint32_t id, const char *s, size_t len)
{
	if (id == 0 || strlen(s) != len)
		abort();
	(void)payload;
	return TP_OK;
}

static int on_event(void *payload, const struct tp_event *e)
{
	struct ctx *c = payload;

	if (!e->ph || (e->name && !trace_string(c->p, e->name)) || (e->cat && !trace_string(c->p, e->cat)))
		abort();
	if (e->ph != 'M' && !(e->have & TH_TS))
		abort();
	c->events++;
	return analysis_event(c->an, e, &c->err);
}

static const char *str_of(void *payload, uint32_t id)
{
	const char *s = trace_string(payload, id);
	return s ? s : "";
}

/* What analysis promises for any input: components that sum to each step, self <= total. */
static void check_analysis(struct ctx *c)
{
	const struct an_result *r;
	struct tp_errbuf err = { 0 };
	size_t i;

	if (analysis_finish(c->an, &r, &err))
		return;		/* out of memory only */
	for (i = 0; i < r->nsteps; i++) {
		int64_t sum = 0;
		for (int k = 0; k < AN_NCOMP; k++) {
			if (r->steps[i].comp_ns[k] < 0)
				abort();
			sum += r->steps[i].comp_ns[k];
		}
		if (sum != r->steps[i].dur_ns)
			abort();
		/* steps never overlap; the extras stay within the step */
		if (i && r->steps[i].start_ns < tp_sat_add(r->steps[i - 1].start_ns, r->steps[i - 1].dur_ns))
			abort();
		if (r->steps[i].comm_overlap_ns < 0 || r->steps[i].gpu_busy_ns < 0 ||
		    r->steps[i].gpu_busy_ns > r->steps[i].dur_ns || r->steps[i].cpu_dur_ns < 0)
			abort();
	}
	for (i = 0; i < r->nops; i++)
		if (r->ops[i].self_ns < 0 || (r->ops[i].device == AN_DEV_CPU && r->ops[i].self_ns > r->ops[i].total_ns))
			abort();
}

static int to_parser(void *payload, const uint8_t *data, size_t len)
{
	struct ctx *c = payload;
	return trace_parser_feed(c->p, data, len, &c->err);
}

static int allowed(int rc)
{
	return rc == TP_OK || rc == TP_ERR_INVALID || rc == TP_ERR_TOOBIG;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_limits lim = trace_default_limits;
	struct trace_sink sink = { on_string, on_event, NULL };
	struct inflate_stage st;
	struct ctx c = { 0 };
	size_t piece, i;
	int rc = TP_OK;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 97 + 1;
	data++, size--;
	lim.max_token = 1024;
	lim.max_events = 5000;
	lim.max_depth = 32;
	lim.max_strings_bytes = 1 << 16;
	lim.max_meta_bytes = 4096;
	sink.payload = &c;
	c.p = trace_parser_new(&lim, &sink);
	c.an = c.p ? analysis_new(str_of, c.p) : NULL;
	if (!c.an) {
		trace_parser_free(c.p);
		return 0;
	}
	if (piece & 1)	/* half the inputs spill their host spans and [memory] events in runs of 3 */
		analysis_set_run(c.an, 3);
	inflate_init(&st, 1 << 22, 100, to_parser, &c);
	for (i = 0; i < size && rc == TP_OK; i += piece)
		rc = inflate_feed(&st, data + i, size - i < piece ? size - i : piece, &c.err);
	if (rc == TP_OK)
		rc = inflate_finish(&st, &c.err);
	if (rc == TP_OK)
		rc = trace_parser_finish(c.p, &c.err);
	if (!allowed(rc) || (rc != TP_OK && (!c.err.msg[0] || !c.err.code[0])))
		abort();
	if (rc == TP_OK && c.events > trace_event_count(c.p))
		abort();
	if (rc == TP_OK)
		check_analysis(&c);
	analysis_free(c.an);
	inflate_release(&st);
	trace_parser_free(c.p);
	return 0;
}
