/*
 * formats.c: the table of upload formats (formats.h), the small functions
 * that fit each parser to the table's entry points, and detection.
 *
 * Detection, from the first bytes past blank space: a pickle starts with
 * PROTO (0x80); '{' is rlhf-canary's metrics.json when its first keys are
 * the canary's (canary_detect), else a trace, as is '[' '{'; '[' '[' is
 * PyTorch's memory timeline export; but folded stacks may start with '[' or
 * '{' too (a root frame "[unknown]"): lines that are all "frames weight" are
 * stacks, and '[' or '{' followed by what starts none of those JSON forms is
 * a text report's; anything else is one of the text reports (textfmt_detect) or
 * none of what is taken (415). Each row's detect asks its part of this.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ingest/canary.h"
#include "ingest/pickle.h"
#include "ingest/snapshot.h"
#include "ingest/textfmt.h"
#include "ingest/timeline.h"
#include "pipeline/formats.h"
#include "store/fmt_canary.h"
#include "store/fmt_gpulog.h"
#include "store/fmt_keyavg.h"
#include "store/fmt_lightning.h"
#include "store/fmt_stacks.h"

_Static_assert(FMT_SNIFF == TF_SNIFF, "detection gives textfmt_detect the bytes it may ask for");

static const uint8_t *skip_ws(const uint8_t *p, const uint8_t *end)
{
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* ---- detection: the questions the rows' detect functions share ---- */

/* The text formats' kind (TF_*, TF_NONE: none of them), -1: more bytes needed; asked once. */
static int sniff_text(struct fmt_sniff *s)
{
	if (s->text == FMT_NOT_ASKED)
		s->text = textfmt_detect(s->p, s->n, s->full);
	return s->text;
}

/*
 * '[' or '{' followed by what starts none of the JSON taken ("[unknown frame", "{draft}", "[1] a
 * numbered line", "[1, 2]"): a text report's, or none (415). A trace's top-level array holds
 * event objects and a timeline's arrays, so '[' is JSON here only before '{', '[' or ']'.
 */
static int bracket_text(const struct fmt_sniff *s)
{
	const uint8_t *p = s->p, *end = s->p + s->n, *q = skip_ws(p + 1, end);

	return (*p == '[' || *p == '{') && q < end &&
	       !(*p == '[' ? strchr("{[]", *q) != NULL : *q == '"' || *q == '}');
}

/*
 * JSON that is ours to tell apart (timeline, canary, trace): '[' or '{' that starts JSON and is
 * not folded stacks whose root frame is "[unknown]" or "{built-in ...}". 1, 0, or -1: more bytes.
 */
static int json_start(struct fmt_sniff *s, uint8_t open)
{
	int k;

	if (*s->p != open)
		return 0;
	if ((k = sniff_text(s)) < 0)
		return -1;
	return k != TF_STACKS && !bracket_text(s);
}

/* ---- the trace (pipeline/ingest.c takes its events) ---- */

/* '[' but '[' '[' (a memory timeline), or '{' but a canary's metrics. */
static int trace_detect(struct fmt_sniff *s, int arg)
{
	const uint8_t *q;
	int j, c;

	(void)arg;
	if ((j = json_start(s, '[')) < 0)
		return -1;
	if (j) {
		q = skip_ws(s->p + 1, s->p + s->n);
		if (q == s->p + s->n && !s->full)
			return -1;
		return !(q < s->p + s->n && *q == '[');
	}
	if ((j = json_start(s, '{')) <= 0)
		return j;
	c = canary_detect(s->p, s->n, s->full != 0);
	return c < 0 ? -1 : !c;
}

static void *trace_open(const struct fmt_open *o)
{
	return trace_parser_new(&o->lim->trace, o->sink);
}

static int trace_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return trace_parser_feed(ps, data, len, err);
}

static int trace_finish(void *ps, struct tp_errbuf *err)
{
	return trace_parser_finish(ps, err);
}

static void trace_free(void *ps)
{
	trace_parser_free(ps);
}

/* ---- a memory snapshot (pickle) ---- */

struct snapshot {
	struct pickle_parser *pk;
	struct snap_reader *rd;		/* reads pk's trace entries as they come */
	struct snap_result *res;	/* its timelines, once read */
	const struct mem_series *series;
	size_t nseries;
	struct snap_stats stats;
};

static int snapshot_detect(struct fmt_sniff *s, int arg)
{
	(void)arg;
	return *s->p == 0x80;	/* pickle's PROTO */
}

static void snapshot_free(void *ps)
{
	struct snapshot *x = ps;

	if (!x)
		return;
	snap_reader_free(x->rd);
	pickle_parser_free(x->pk);
	snap_result_free(x->res);
	tp_free(x);
}

static void *snapshot_open(const struct fmt_open *o)
{
	struct pk_limits pl = { .max_objects = o->lim->max_pickle_values, .max_string = o->lim->trace.max_token,
				.max_marks = o->lim->trace.max_depth };
	struct snapshot *x = tp_calloc(1, sizeof(*x));

	if (x && (x->pk = pickle_parser_new(&pl)))
		x->rd = snap_reader_new(x->pk, o->lim->max_pickle_values);
	if (x && !x->rd) {
		snapshot_free(x);
		return NULL;
	}
	return x;
}

static int snapshot_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return pickle_parser_feed(((struct snapshot *)ps)->pk, data, len, err);
}

static int snapshot_finish(void *ps, struct tp_errbuf *err)
{
	struct snapshot *x = ps;
	const struct pk_obj *root;
	int rc;

	if ((rc = pickle_parser_finish(x->pk, &root, err)))
		return rc;
	return snap_timeline(x->rd, root, &x->res, &x->series, &x->nseries, &x->stats, err);
}

static void snapshot_result(void *ps, struct store_final *f)
{
	struct snapshot *x = ps;

	f->events = x->stats.entries;
	f->mem = x->series;
	f->nmem = x->nseries;
}

/* ---- a memory timeline export (export_memory_timeline's .json) ---- */

struct timeline {
	struct timeline_parser *tl;
	struct mem_series export;	/* its points, once parsed */
	const char *form;
};

/* '[' '[' */
static int timeline_detect(struct fmt_sniff *s, int arg)
{
	const uint8_t *q;
	int j;

	(void)arg;
	if ((j = json_start(s, '[')) <= 0)
		return j;
	q = skip_ws(s->p + 1, s->p + s->n);
	if (q == s->p + s->n && !s->full)
		return -1;
	return q < s->p + s->n && *q == '[';
}

static void *timeline_open(const struct fmt_open *o)
{
	struct timeline *x = tp_calloc(1, sizeof(*x));

	if (x && !(x->tl = timeline_parser_new(o->lim->trace.max_events))) {
		tp_free(x);
		return NULL;
	}
	if (x) {
		snprintf(x->export.device, sizeof(x->export.device), "%s", o->device[0] ? o->device : "cuda:0");
		x->export.source = "pytorch";
	}
	return x;
}

static int timeline_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return timeline_parser_feed(((struct timeline *)ps)->tl, data, len, err);
}

static int timeline_finish(void *ps, struct tp_errbuf *err)
{
	struct timeline *x = ps;

	x->export.replay = timeline_replay;	/* the points are held packed */
	x->export.src = x->tl;
	return timeline_parser_finish(x->tl, &x->export.n, &x->form, err);
}

static void timeline_result(void *ps, struct store_final *f)
{
	struct timeline *x = ps;

	f->events = x->export.n;
	f->mem = &x->export;
	f->nmem = 1;
}

static void timeline_free(void *ps)
{
	struct timeline *x = ps;

	if (x)
		timeline_parser_free(x->tl);
	tp_free(x);
}

/* ---- the text reports: Lightning, key_averages, folded stacks, nvidia-smi (arg: TF_*) ---- */

struct text {
	struct textfmt_parser *tf;
	const struct tf_result *res;	/* once parsed */
};

static int text_detect(struct fmt_sniff *s, int arg)
{
	int k;

	if (*s->p == 0x80)
		return 0;
	/* '[' or '{' starting JSON is not text, but folded stacks may start so too (a root frame
	 * "[unknown]"): textfmt_detect tells */
	if ((*s->p == '[' || *s->p == '{') && arg != TF_STACKS && !bracket_text(s))
		return 0;
	if ((k = sniff_text(s)) < 0)
		return -1;
	return k == arg;
}

static void *text_open(const struct fmt_open *o)
{
	/* rows, distinct frames, actions, samples: each counts as an event against --max-events */
	struct tf_limits tl = tf_default_limits;
	struct text *x = tp_calloc(1, sizeof(*x));

	if (tl.max_rows > o->lim->trace.max_events)
		tl.max_rows = o->lim->trace.max_events;
	if (x && !(x->tf = textfmt_parser_new(o->arg, &tl))) {
		tp_free(x);
		return NULL;
	}
	return x;
}

static int text_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return textfmt_parser_feed(((struct text *)ps)->tf, data, len, err);
}

static int text_finish(void *ps, struct tp_errbuf *err)
{
	struct text *x = ps;

	return textfmt_parser_finish(x->tf, &x->res, err);
}

static void text_result(void *ps, struct store_final *f)
{
	const struct tf_result *t = ((struct text *)ps)->res;

	f->events = t->nactions + t->nops + t->nstacks + t->ngpu_rows;
	f->result = t;
}

static void text_free(void *ps)
{
	struct text *x = ps;

	if (x)
		textfmt_parser_free(x->tf);
	tp_free(x);
}

/* ---- an rlhf-canary metrics.json ---- */

struct canary {
	struct canary_parser *cn;
	const struct canary_metrics *res;	/* once parsed */
};

/* '{' with the canary's first top-level keys (canary_detect) */
static int canary_detect_row(struct fmt_sniff *s, int arg)
{
	int j, c;

	(void)arg;
	if ((j = json_start(s, '{')) <= 0)
		return j;
	c = canary_detect(s->p, s->n, s->full != 0);
	return c < 0 ? -1 : c;
}

static void *canary_open(const struct fmt_open *o)
{
	struct canary *x = tp_calloc(1, sizeof(*x));

	(void)o;
	if (x && !(x->cn = canary_parser_new(CANARY_MAX_BYTES))) {
		tp_free(x);
		return NULL;
	}
	return x;
}

static int canary_feed(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	return canary_parser_feed(((struct canary *)ps)->cn, data, len, err);
}

static int canary_finish(void *ps, struct tp_errbuf *err)
{
	struct canary *x = ps;

	return canary_parser_finish(x->cn, &x->res, err);
}

static void canary_result(void *ps, struct store_final *f)
{
	f->events = 1;	/* one run's summary */
	f->result = ((struct canary *)ps)->res;
}

static void canary_free(void *ps)
{
	struct canary *x = ps;

	if (x)
		canary_parser_free(x->cn);
	tp_free(x);
}

/* ---- the table ---- */

#define TEXT(kind) .arg = (kind), .detect = text_detect, .open = text_open, .feed = text_feed, \
	.finish = text_finish, .result = text_result, .free = text_free

const struct format formats[] = {
	{ .name = "trace", .expected = "a Kineto trace", .detect = trace_detect, .open = trace_open,
	  .feed = trace_feed, .finish = trace_finish, .free = trace_free, .events = 1 },
	{ .name = "memory_snapshot", .expected = "a memory snapshot or timeline", .detect = snapshot_detect,
	  .open = snapshot_open, .feed = snapshot_feed, .finish = snapshot_finish, .result = snapshot_result,
	  .free = snapshot_free },
	{ .name = "memory_timeline", .detect = timeline_detect, .open = timeline_open, .feed = timeline_feed,
	  .finish = timeline_finish, .result = timeline_result, .free = timeline_free },
	{ .name = "lightning_report", .expected = "a Lightning profiler report", TEXT(TF_LIGHTNING),
	  .store = store_insert_lightning },
	{ .name = "key_averages", .expected = "a key_averages() table", TEXT(TF_KEYAVG), .store = store_insert_keyavg },
	{ .name = "stacks", .expected = "folded stacks", TEXT(TF_STACKS), .store = store_insert_stacks },
	{ .name = "gpu_log", .expected = "an nvidia-smi log (CSV, screen or dmon)", TEXT(TF_GPULOG),
	  .store = store_insert_gpulog },
	{ .name = "canary_metrics", .expected = "an rlhf-canary metrics.json", .detect = canary_detect_row,
	  .open = canary_open, .feed = canary_feed, .finish = canary_finish, .result = canary_result,
	  .free = canary_free, .store = store_insert_canary },
};
const size_t nformats = sizeof(formats) / sizeof(formats[0]);

int format_detect(const uint8_t *p, size_t n, int at_end, const struct format **out)
{
	const uint8_t *end = p + n;
	struct fmt_sniff s = { .full = at_end ? 1 : n >= FMT_SNIFF ? 2 : 0, .text = FMT_NOT_ASKED };
	size_t i;
	int r;

	s.p = skip_ws(p, end);
	s.n = (size_t)(end - s.p);
	*out = NULL;
	if (!s.n) {
		if (!at_end)
			return 0;
		*out = format_named("trace");	/* blank space only: the trace's parser says what is wrong */
		return 1;
	}
	for (i = 0; i < nformats; i++) {
		if ((r = formats[i].detect(&s, formats[i].arg)) < 0)
			return 0;
		if (r) {
			*out = &formats[i];
			return 1;
		}
	}
	return 1;	/* none of them */
}

const struct format *format_named(const char *name)
{
	for (size_t i = 0; i < nformats; i++)
		if (!strcmp(name, formats[i].name))
			return &formats[i];
	return NULL;
}

/* "a, b, c or d": the rows' names, or their expected words (NULL ones left out) */
static void join(char *buf, size_t size, int names)
{
	size_t i, last = 0, len = 0;

	for (i = 0; i < nformats; i++)
		if (names || formats[i].expected)
			last = i;
	buf[0] = 0;
	for (i = 0; i < nformats && len < size; i++) {
		const char *s = names ? formats[i].name : formats[i].expected;
		int w;
		if (!s)
			continue;
		if ((w = snprintf(buf + len, size - len, "%s%s", !len ? "" : i == last ? " or " : ", ", s)) < 0)
			break;
		len += (size_t)w;
	}
}

void format_expected(char *buf, size_t size)
{
	join(buf, size, 0);
}

int ingest_kind_known(const char *kind)
{
	return format_named(kind) != NULL;
}

void ingest_kind_names(char *buf, size_t size)
{
	join(buf, size, 1);
}
