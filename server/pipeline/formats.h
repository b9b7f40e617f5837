/*
 * formats.h: the table of the formats an upload may be, one row each
 * (formats.c): the kind's name, how the first bytes tell it, its parser's
 * entry points, what of its result goes to store_final and which store
 * function writes its own rows. ingest.c knows no format by name: it drives
 * whichever row the first bytes pick. docs/internals.md says how to add one.
 */
#ifndef FORMATS_H
#define FORMATS_H

#include <stddef.h>
#include <stdint.h>

#include "ingest/trace.h"
#include "pipeline/ingest.h"
#include "store/store.h"
#include "tp.h"

/* The most bytes detection looks at before it decides (a text report may need a few lines). */
#define FMT_SNIFF 16384

/* An upload's first bytes, as the rows' detect functions see them. */
struct fmt_sniff {
	const uint8_t *p;	/* past leading blank space; n > 0 */
	size_t n;
	int full;		/* 0: more bytes may come; 1: these are all; 2: decide now, the bytes may end
				 * inside a line (FMT_SNIFF of them) */
	int text;		/* textfmt_detect's answer once a row asked; FMT_NOT_ASKED before */
};
#define FMT_NOT_ASKED (-2)

/* What a parser is opened with. */
struct fmt_open {
	const struct ingest_limits *lim;
	const struct trace_sink *sink;	/* where an events format sends its events and strings */
	const char *device;		/* the upload's ?device= ("": none) */
	int arg;			/* the row's arg */
};

struct format {
	const char *name;		/* the kind: ?kind=, the artifact's "kind" */
	const char *expected;		/* its words in 415's list of what is taken; NULL: said by the row before */
	int arg;			/* passed to detect and open (the text formats' TF_* kind) */
	/*
	 * 1: the upload is this format, 0: it is not, -1: more bytes are needed to tell. The
	 * rows' answers exclude one another (at most one says 1), so their order does not matter.
	 */
	int (*detect)(struct fmt_sniff *s, int arg);
	void *(*open)(const struct fmt_open *o);	/* its parser; NULL: out of memory */
	int (*feed)(void *ps, const uint8_t *data, size_t len, struct tp_errbuf *err);
	int (*finish)(void *ps, struct tp_errbuf *err);
	/* after a good finish: what f stores of the result (events, mem/nmem, result); NULL: nothing */
	void (*result)(void *ps, struct store_final *f);
	void (*free)(void *ps);
	store_fmt_fn store;		/* the format's own rows of f->result (store/fmt_*.h); NULL: none */
	int events;			/* its parser is the trace's, sending events to o->sink: ingest.c
					 * analyses and stores them, and reads the trace's metadata */
};

extern const struct format formats[];
extern const size_t nformats;

/*
 * The format of an upload from its first n bytes (at_end: they are all of it; n == FMT_SNIFF:
 * decide now). 1 with *out (NULL: none of the formats), or 0 when more bytes are needed. Blank
 * space alone, at the end, is a trace: its parser says what is wrong.
 */
int format_detect(const uint8_t *p, size_t n, int at_end, const struct format **out);
/* The row named name; NULL: none. */
const struct format *format_named(const char *name);
/* 415's list of what is taken: "a Kineto trace, ... or an rlhf-canary metrics.json". */
void format_expected(char *buf, size_t size);

#endif
