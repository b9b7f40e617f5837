/*
 * pickle.h: a reader for the part of Python's pickle format that memory
 * snapshots use (shared/reference/formats.md 3.2): protocols 2 to 5, with
 * dicts, lists, tuples, sets (read as lists), str and bytes, ints of any
 * width, floats, bools, None and the memo. Anything that would name a Python
 * class or call one (GLOBAL, REDUCE, BUILD, NEWOBJ, persistent ids, out-of-
 * band buffers) is refused: a snapshot never holds one, and this reads
 * untrusted uploads.
 *
 * The input comes in pieces (it is inflated as it arrives); objects go to an
 * arena freed with the parser. The machine has no recursion: nesting costs
 * a stack slot, not a C frame, and is capped like everything else.
 * Pure: no SQL.
 */
#ifndef PICKLE_H
#define PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

enum pk_type { PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES, PK_LIST, PK_TUPLE, PK_DICT };

struct pk_obj {
	uint8_t type;
	uint8_t big;			/* PK_INT wider than 64 bits: u.i is saturated */
	uint32_t n;			/* STR/BYTES: bytes; LIST/TUPLE: items; DICT: 2 x pairs */
	uint32_t cap;
	union {
		int64_t i;		/* BOOL, INT */
		double f;
		char *s;		/* STR/BYTES, NUL-terminated */
		struct pk_obj **items;	/* LIST/TUPLE; DICT: key, value, key, value, ... */
	} u;
};

struct pk_limits {
	uint64_t max_objects;		/* values made, plus items stored in containers */
	uint64_t max_string;		/* bytes in one str or bytes */
	uint32_t max_marks;		/* open MARKs at once */
};

struct pickle_parser;

/* New parser; NULL when out of memory. */
struct pickle_parser *pickle_parser_new(const struct pk_limits *lim);
/* The next piece. TP_ERR_INVALID (not a pickle we read, with what and at which byte), TP_ERR_TOOBIG, TP_ERR_NOMEM. */
int pickle_parser_feed(struct pickle_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/* End of input: the value STOP returned (borrowed until free); fails on a truncated pickle. */
int pickle_parser_finish(struct pickle_parser *p, const struct pk_obj **root, struct tp_errbuf *err);
void pickle_parser_free(struct pickle_parser *p);

/* The value of a dict's str key, or NULL (not a dict, no such key). */
const struct pk_obj *pk_get(const struct pk_obj *dict, const char *key);
/* An int (or bool) value into *out: 1, else 0. */
int pk_int(const struct pk_obj *o, int64_t *out);
/* A str value, or NULL. */
const char *pk_str(const struct pk_obj *o);

#endif
