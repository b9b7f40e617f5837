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
 *
 * A consumer can read as the pickle runs instead of after it: a hook sees
 * each value a list receives, and may take it (the list does not keep it)
 * and release it, so a list of millions of records never exists whole. A
 * value the pickle may name again (memoized, or DUP'ed) stays valid: one
 * only memoized is released with its memo slot closed (a later reference is
 * an error), one referenced twice is not released at all.
 * Pure: no SQL.
 */
#ifndef PICKLE_H
#define PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

/* PK_TAKEN: a container a consumer kept only a summary of (pk_take); u.i is its handle */
enum pk_type { PK_NONE, PK_BOOL, PK_INT, PK_FLOAT, PK_STR, PK_BYTES, PK_LIST, PK_TUPLE, PK_DICT, PK_TAKEN };

struct pk_obj {
	uint8_t type;
	uint8_t big;			/* PK_INT wider than 64 bits: u.i is saturated */
	uint8_t flags;			/* the parser's: memoized, referenced more than once */
	uint32_t n;			/* STR/BYTES: bytes; LIST/TUPLE: items; DICT: 2 x pairs */
	uint32_t cap;
	uint32_t memo;			/* its memo index, when memoized */
	union {
		int64_t i;		/* BOOL, INT; TAKEN: the consumer's handle */
		double f;
		char *s;		/* STR/BYTES, NUL-terminated */
		struct pk_obj **items;	/* LIST/TUPLE; DICT: key, value, key, value, ... */
		struct pk_obj *next;	/* the parser's list of free nodes */
	} u;
};

struct pk_limits {
	uint64_t max_objects;		/* values held: made or stored in containers, less those released */
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

/*
 * The hook: called as list receives item (APPEND, APPENDS, LIST). It returns
 * 1 when it took item (the list does not store it; the hook releases it or
 * keeps a pointer to it), 0 to let the list store it, or an error (with err
 * set), which stops the parser.
 */
typedef int (*pk_list_hook)(void *ctx, struct pickle_parser *p, const struct pk_obj *list, struct pk_obj *item,
			    struct tp_errbuf *err);
void pickle_parser_on_append(struct pickle_parser *p, pk_list_hook hook, void *ctx);
/*
 * Done with o, a value the hook took: unless the pickle can name it again
 * (DUP'ed or referenced from the memo), o, its item slots and those of its
 * items that nothing else names are freed; a memoized o's slot is closed.
 */
void pk_release(struct pickle_parser *p, struct pk_obj *o);
/*
 * A container the consumer has summarized, kept as PK_TAKEN with handle h
 * (every reference to it, earlier or later, sees that): its item slots are
 * freed, the items themselves stay. Anything else is left alone. With canon
 * (from pk_new_taken, the same handle), an o that only the memo and one
 * container name is freed with that container, and the memo names canon.
 */
void pk_take(struct pickle_parser *p, struct pk_obj *o, int64_t h, struct pk_obj *canon);
/* What p holds now: nodes, container slots, memo pages (4096 slots: 32 KiB, compact 8 KiB). */
struct pk_usage {
	uint64_t nodes, slots, memo_pages, memo_compact;
};
void pickle_parser_usage(const struct pickle_parser *p, struct pk_usage *u);
/* A PK_TAKEN value with handle h, never released; NULL when out of memory. */
struct pk_obj *pk_new_taken(struct pickle_parser *p, int64_t h);

/* Whether the pickle names o more than once (DUP, a memo GET): each use is a copy to whoever reads it. */
int pk_shared(const struct pk_obj *o);
/* The values o holds, two levels down, itself included: what a list of it used again costs. */
uint64_t pk_tree_values(const struct pk_obj *o);
/* The value of a dict's str key, or NULL (not a dict, no such key). */
const struct pk_obj *pk_get(const struct pk_obj *dict, const char *key);
/* An int (or bool) value into *out: 1, else 0. */
int pk_int(const struct pk_obj *o, int64_t *out);
/* A str value, or NULL. */
const char *pk_str(const struct pk_obj *o);

#endif
