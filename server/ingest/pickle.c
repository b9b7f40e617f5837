/*
 * pickle.c: the pickle subset reader (pickle.h).
 *
 * A pickle is a program for a stack machine: each opcode pushes a value,
 * or builds a container from the values above the last MARK, or stores and
 * fetches values in the memo. This runs that program over bytes as they
 * come: an opcode whose arguments are not all here yet waits in buf for the
 * next piece. Every count that the input chooses (string lengths, memo
 * indexes, marks, objects) is checked against a cap before anything is
 * allocated for it.
 */
#include <string.h>

#include "alloc.h"
#include "ingest/pickle.h"

#define NODE_CHUNK 4096
#define BYTE_CHUNK 65536

#define F_MEMO 1		/* in the memo: the pickle may name it again */
#define F_SHARED 2		/* referenced more than once (DUP, memo GET, PUT twice): never released */
#define F_CANON 4		/* pk_new_taken's: its memo field is its index in canon */

/*
 * The memo in pages of MEMO_PAGE slots. Once the writer has numbered past a
 * page, it is freed if all its slots were closed (released values), or kept
 * in 8 KiB instead of 32 if what its open slots hold is canonical (pk_take):
 * a snapshot's memo is mostly its trace entries, read and released, and
 * their frame lists, taken.
 */
#define MEMO_PAGE 4096

struct memo_page {
	uint32_t live;			/* slots holding a value not released */
	uint32_t plain;			/* of those, values not canonical */
	struct pk_obj *slot[MEMO_PAGE];
};

/* A page: none written, full, compact (a canonical value's index + 1 per slot, 0 closed), or freed. */
struct memo_ref {
	struct memo_page *full;
	uint16_t *compact;
	int gone;
};

/* what a page costs, in values (a node is 24 bytes) */
#define PAGE_VALUES (sizeof(struct memo_page) / 24)
#define CPAGE_VALUES (MEMO_PAGE * sizeof(uint16_t) / 24)

struct nodes {
	struct nodes *next;
	size_t n;
	struct pk_obj o[NODE_CHUNK];
};

struct bytes {
	struct bytes *next;
	size_t used, cap;
	char data[];
};

struct pickle_parser {
	struct pk_limits lim;
	uint8_t *buf;			/* an opcode still waiting for its arguments */
	size_t nbuf, capbuf;
	uint64_t off;			/* input offset of buf[0] */
	int started, stopped;
	struct pk_obj **stack;
	size_t nstack, capstack;
	size_t *marks;			/* stack heights at each open MARK */
	size_t nmarks;
	struct memo_ref *memo;		/* pages */
	size_t nmemo, npages;
	struct pk_obj **canon;		/* pk_new_taken's values, by index */
	size_t ncanon, capcanon;
	/* what is held, in values: nodes, container slots, stack slots, memo slots (see held()) */
	uint64_t nodes_live, slots, memo_live, pages_full, pages_compact;
	uint64_t made;			/* values made, ever */
	struct nodes *nodes;
	struct pk_obj *free_nodes;	/* released, for reuse */
	pk_list_hook hook;
	void *hook_ctx;
	struct bytes *bytes;
	struct pk_obj none, yes, no, gone;	/* gone: a closed memo slot */
	const struct pk_obj *root;
};

struct pickle_parser *pickle_parser_new(const struct pk_limits *lim)
{
	struct pickle_parser *p = tp_calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->lim = *lim;
	p->none.type = PK_NONE;
	p->yes = (struct pk_obj){ .type = PK_BOOL, .u.i = 1 };
	p->no = (struct pk_obj){ .type = PK_BOOL, .u.i = 0 };
	p->gone = (struct pk_obj){ .type = PK_TAKEN, .u.i = -1 };
	if (!(p->marks = tp_malloc((lim->max_marks + 1) * sizeof(*p->marks)))) {
		tp_free(p);
		return NULL;
	}
	return p;
}

void pickle_parser_free(struct pickle_parser *p)
{
	if (!p)
		return;
	while (p->nodes) {
		struct nodes *c = p->nodes;
		for (size_t i = 0; i < c->n; i++)
			if (c->o[i].type >= PK_LIST && c->o[i].type <= PK_DICT)
				tp_free(c->o[i].u.items);
		p->nodes = c->next;
		tp_free(c);
	}
	while (p->bytes) {
		struct bytes *b = p->bytes;
		p->bytes = b->next;
		tp_free(b);
	}
	tp_free(p->buf);
	tp_free(p->stack);
	tp_free(p->marks);
	for (size_t i = 0; i < p->npages; i++) {
		tp_free(p->memo[i].full);
		tp_free(p->memo[i].compact);
	}
	tp_free(p->memo);
	tp_free(p->canon);
	tp_free(p);
}

/* ---- values ---- */

/*
 * The values held, each costing memory whatever made it: nodes not
 * released, slots in containers, on the stack and in the memo (a memo page
 * counted whole, as the values its 32 KiB would hold). A value
 * pushed again (DUP, a memo GET, None) costs a stack slot, then a container
 * slot; a released container gives back its slots and the nodes freed.
 */
static int held(struct pickle_parser *p, uint64_t more, struct tp_errbuf *err)
{
	if (p->nodes_live + p->slots + p->nstack + p->memo_live + p->pages_full * PAGE_VALUES +
		    p->pages_compact * CPAGE_VALUES + more > p->lim.max_objects)
		return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big", "the pickle holds more than %llu values",
			       (unsigned long long)p->lim.max_objects);
	return TP_OK;
}

/* a value made, about to be pushed or stored */
static int count(struct pickle_parser *p, struct tp_errbuf *err)
{
	p->made++;
	return held(p, 1, err);
}

static struct pk_obj *node(struct pickle_parser *p, int type)
{
	struct nodes *c = p->nodes;
	struct pk_obj *o;

	if ((o = p->free_nodes)) {
		p->free_nodes = o->u.next;
		memset(o, 0, sizeof(*o));
		o->type = (uint8_t)type;
		p->nodes_live++;
		return o;
	}
	if (!c || c->n == NODE_CHUNK) {
		if (!(c = tp_malloc(sizeof(*c))))
			return NULL;
		c->n = 0;
		c->next = p->nodes;
		p->nodes = c;
	}
	o = &c->o[c->n++];
	memset(o, 0, sizeof(*o));
	o->type = (uint8_t)type;
	p->nodes_live++;
	return o;
}

static char *bytes_copy(struct pickle_parser *p, const uint8_t *s, size_t len)
{
	struct bytes *b = p->bytes;

	if (!b || b->cap - b->used < len + 1) {
		size_t cap = len + 1 > BYTE_CHUNK ? len + 1 : BYTE_CHUNK;
		if (!(b = tp_malloc(sizeof(*b) + cap)))
			return NULL;
		b->used = 0;
		b->cap = cap;
		if (!p->bytes || len + 1 > BYTE_CHUNK / 4) {
			/* a big string gets a chunk of its own, behind the current one */
			b->next = p->bytes ? p->bytes->next : NULL;
			if (p->bytes)
				p->bytes->next = b;
			else
				p->bytes = b;
		} else {
			b->next = p->bytes;
			p->bytes = b;
		}
	}
	char *d = b->data + b->used;
	memcpy(d, s, len);
	d[len] = 0;
	b->used += len + 1;
	return d;
}

static int push(struct pickle_parser *p, struct pk_obj *o, struct tp_errbuf *err)
{
	if (!o)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (p->nstack == p->capstack) {
		size_t cap = p->capstack ? p->capstack * 2 : 64;
		struct pk_obj **ns = tp_realloc(p->stack, cap * sizeof(*ns));
		if (!ns)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		p->stack = ns;
		p->capstack = cap;
	}
	p->stack[p->nstack++] = o;
	return TP_OK;
}

/* A new value (counted) pushed. */
static int push_new(struct pickle_parser *p, struct pk_obj *o, struct tp_errbuf *err)
{
	int rc = count(p, err);

	return rc ? rc : push(p, o, err);
}

static int add_item(struct pickle_parser *p, struct pk_obj *c, struct pk_obj *v, struct tp_errbuf *err)
{
	int rc;

	/* the hook may take a list the pickle names twice: c itself, while it is being filled */
	if (c->type < PK_LIST || c->type > PK_DICT)
		return tp_fail(err, TP_ERR_INVALID, "bad_pickle", "a list taken while it was being filled");
	if (c->type == PK_LIST && p->hook) {
		if ((rc = p->hook(p->hook_ctx, p, c, v, err)))
			return rc < 0 ? rc : TP_OK;
		if (c->type != PK_LIST)
			return tp_fail(err, TP_ERR_INVALID, "bad_pickle", "a list taken while it was being filled");
	}
	if ((rc = held(p, 1, err)))
		return rc;
	if (c->cap == c->n) {
		uint32_t cap = c->cap ? c->cap * 2 : 8;
		if (c->cap > UINT32_MAX / 4)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big", "a container is too large");
		struct pk_obj **ni = tp_realloc(c->u.items, (size_t)cap * sizeof(*ni));
		if (!ni)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		c->u.items = ni;
		c->cap = cap;
	}
	c->u.items[c->n++] = v;
	p->slots++;
	return TP_OK;
}

/* ---- the machine ---- */

static uint64_t le(const uint8_t *b, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

/* A little-endian two's complement integer of n bytes (LONG1/LONG4). */
static void set_long(struct pk_obj *o, const uint8_t *b, uint64_t n)
{
	int neg = n && (b[n - 1] & 0x80);
	uint64_t v = 0;

	o->type = PK_INT;
	for (uint64_t i = n > 8 ? 8 : n; i-- > 0;)
		v = v << 8 | b[i];
	if (n && n < 8 && neg)
		v |= ~0ULL << (8 * n);
	/* wider than 8 bytes: it fits only if the high bytes are sign extension */
	for (uint64_t i = 8; i < n && !o->big; i++)
		if (b[i] != (neg ? 0xff : 0x00))
			o->big = 1;
	if (n > 8 && ((v >> 63) != (uint64_t)neg))
		o->big = 1;
	if (o->big)
		v = neg ? (uint64_t)INT64_MIN : (uint64_t)INT64_MAX;
	o->u.i = (int64_t)v;
}

static int fail_at(struct pickle_parser *p, size_t at, struct tp_errbuf *err, const char *what, int op)
{
	return tp_fail(err, TP_ERR_INVALID, "bad_pickle", "%s (opcode 0x%02x at byte %llu)", what, op,
		       (unsigned long long)(p->off + at));
}

/* The top of the stack above the last mark: how many values, and where they start. */
static int since_mark(struct pickle_parser *p, size_t *from)
{
	if (!p->nmarks)
		return -1;
	*from = p->marks[--p->nmarks];
	return 0;
}

/*
 * Argument bytes opcode op needs after itself, read from b[1..avail): the
 * width of its fixed argument, plus a length it announces. Returns 0 and sets
 * *need, or 1 when the length itself is not here yet, or an error.
 */
static int arg_len(struct pickle_parser *p, const uint8_t *b, size_t avail, size_t at, uint64_t *need,
		   struct tp_errbuf *err)
{
	int op = b[0], w = 0;
	uint64_t n;

	switch (op) {
	case 'K': case 'h': case 'q': case 0x80: *need = 1; return 0;	/* BININT1 BINGET BINPUT PROTO */
	case 'M': *need = 2; return 0;					/* BININT2 */
	case 'J': case 'j': case 'r': *need = 4; return 0;		/* BININT LONG_BINGET LONG_BINPUT */
	case 'G': case 0x95: *need = 8; return 0;			/* BINFLOAT FRAME */
	case 0x8a: case 'C': case 'U': case 0x8c: w = 1; break;	/* LONG1 SHORT_BINBYTES SHORT_BINSTRING SHORT_BINUNICODE */
	case 0x8b: case 'B': case 'T': case 'X': w = 4; break;		/* LONG4 BINBYTES BINSTRING BINUNICODE */
	case 0x8d: case 0x8e: w = 8; break;				/* BINUNICODE8 BINBYTES8 */
	default: *need = 0; return 0;
	}
	if (avail < 1 + (size_t)w)
		return 1;
	n = le(b + 1, w);
	if ((op == 0x8b || op == 'T') && (n & 0x80000000u))
		return fail_at(p, at, err, "a negative length", op);
	if (n > p->lim.max_string)
		return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
			       "a value of %llu bytes at byte %llu passes the cap of %llu",
			       (unsigned long long)n, (unsigned long long)(p->off + at),
			       (unsigned long long)p->lim.max_string);
	*need = (uint64_t)w + n;
	return 0;
}

/* Build a container of type t from the values above the last mark. */
static int from_mark(struct pickle_parser *p, int t, size_t at, int op, struct tp_errbuf *err)
{
	size_t from, i;
	struct pk_obj *c;
	int rc;

	if (since_mark(p, &from))
		return fail_at(p, at, err, "no MARK to build from", op);
	if (t == PK_DICT && (p->nstack - from) % 2)
		return fail_at(p, at, err, "a dict from an odd number of values", op);
	if (!(c = node(p, t)))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if ((rc = count(p, err)))
		return rc;
	for (i = from; i < p->nstack; i++)
		if ((rc = add_item(p, c, p->stack[i], err)))
			return rc;
	p->nstack = from;
	return push(p, c, err);
}

/* APPENDS, ADDITEMS, SETITEMS: the values above the mark into the container below it. */
static int into_below_mark(struct pickle_parser *p, int t, size_t at, int op, struct tp_errbuf *err)
{
	size_t from, i;
	struct pk_obj *c;
	int rc;

	if (since_mark(p, &from) || from == 0)
		return fail_at(p, at, err, "no MARK with a container below it", op);
	c = p->stack[from - 1];
	if (c->type != t)
		return fail_at(p, at, err, t == PK_DICT ? "SETITEMS on what is not a dict" : "APPENDS on what is not a list", op);
	if (t == PK_DICT && (p->nstack - from) % 2)
		return fail_at(p, at, err, "SETITEMS with an odd number of values", op);
	for (i = from; i < p->nstack; i++)
		if ((rc = add_item(p, c, p->stack[i], err)))
			return rc;
	p->nstack = from;
	return TP_OK;
}

/* page k, once the writer has numbered past it: freed if every slot was closed, or made compact */
static void memo_trim(struct pickle_parser *p, size_t k)
{
	struct memo_ref *r = k < p->npages ? &p->memo[k] : NULL;
	uint16_t *c;
	size_t j;

	if (!r || !r->full || p->nmemo < (k + 1) * MEMO_PAGE)
		return;
	if (!r->full->live) {
		tp_free(r->full);
		r->full = NULL;
		r->gone = 1;
		p->pages_full--;
		return;
	}
	if (r->full->plain || p->ncanon >= UINT16_MAX)
		return;
	if (!(c = tp_malloc(MEMO_PAGE * sizeof(*c))))
		return;	/* it stays full */
	for (j = 0; j < MEMO_PAGE; j++) {
		const struct pk_obj *o = r->full->slot[j];
		c[j] = o && o != &p->gone ? (uint16_t)(o->memo + 1) : 0;
	}
	p->memo_live -= r->full->live;	/* counted in the page's cost from now */
	tp_free(r->full);
	r->full = NULL;
	r->compact = c;
	p->pages_full--;
	p->pages_compact++;
}

/* the value in memo slot i; NULL: unset; &p->gone: released */
static struct pk_obj *memo_get(struct pickle_parser *p, uint64_t i)
{
	const struct memo_ref *r = i < p->nmemo ? &p->memo[i / MEMO_PAGE] : NULL;

	if (!r)
		return NULL;
	if (r->full)
		return r->full->slot[i % MEMO_PAGE];
	if (r->compact)
		return r->compact[i % MEMO_PAGE] ? p->canon[r->compact[i % MEMO_PAGE] - 1] : &p->gone;
	return r->gone ? &p->gone : NULL;
}

/* page k full again (a PUT into it after the writer moved on): 0, or TP_ERR_NOMEM */
static int memo_unpack(struct pickle_parser *p, size_t k)
{
	struct memo_ref *r = &p->memo[k];
	struct memo_page *pg = tp_calloc(1, sizeof(*pg));

	if (!pg)
		return TP_ERR_NOMEM;
	if (r->compact) {
		/* a freed page's closed slots read as unset from now: a later GET fails either way */
		for (size_t j = 0; j < MEMO_PAGE; j++)
			if (r->compact[j]) {
				pg->slot[j] = p->canon[r->compact[j] - 1];
				pg->live++;
			}	/* canonical: not plain */
		tp_free(r->compact);
		r->compact = NULL;
		p->pages_compact--;
		p->memo_live += pg->live;
	}
	r->full = pg;
	r->gone = 0;
	p->pages_full++;
	return TP_OK;
}

static int memo_put(struct pickle_parser *p, uint64_t i, size_t at, int op, struct tp_errbuf *err)
{
	struct memo_page *pg;
	struct pk_obj *o, *old;
	int rc;

	if (!p->nstack)
		return fail_at(p, at, err, "nothing to memoize", op);
	/* a writer numbers memo entries as it makes objects: more entries than objects is hostile */
	if (i > p->made)
		return fail_at(p, at, err, "a memo index out of range", op);
	if (i > UINT32_MAX)
		return fail_at(p, at, err, "a memo index past 2^32", op);
	if (i / MEMO_PAGE >= p->npages) {
		size_t n = p->npages ? p->npages : 16;
		while (n <= i / MEMO_PAGE)
			n *= 2;
		struct memo_ref *nm = tp_realloc(p->memo, n * sizeof(*nm));
		if (!nm)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		memset(nm + p->npages, 0, (n - p->npages) * sizeof(*nm));
		p->memo = nm;
		p->npages = n;
	}
	if ((rc = held(p, 1 + (p->memo[i / MEMO_PAGE].full ? 0 : PAGE_VALUES), err)))
		return rc;
	if (!p->memo[i / MEMO_PAGE].full && memo_unpack(p, i / MEMO_PAGE))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	pg = p->memo[i / MEMO_PAGE].full;
	/* the writer is past the page before: free it if nothing there is held */
	if (i % MEMO_PAGE == 0 && i)
		memo_trim(p, i / MEMO_PAGE - 1);
	o = p->stack[p->nstack - 1];
	old = pg->slot[i % MEMO_PAGE];
	/* released, a value in two slots would leave one open; one that loses its slot, one closed */
	if (o->flags & F_MEMO)
		o->flags |= F_SHARED;
	if (old && old != o)
		old->flags |= F_SHARED;
	if (!old || old == &p->gone) {
		pg->live++;
		p->memo_live++;
	} else {
		pg->plain -= !(old->flags & F_CANON);
	}
	pg->plain += !(o->flags & F_CANON);
	o->flags |= F_MEMO;
	if (!(o->flags & F_CANON))	/* a canonical value's memo field is its index: it is never released */
		o->memo = (uint32_t)i;
	pg->slot[i % MEMO_PAGE] = o;
	if (i >= p->nmemo)
		p->nmemo = i + 1;
	return TP_OK;
}

/* Run the opcode at b (all its bytes are there: 1 + need). */
static int exec(struct pickle_parser *p, const uint8_t *b, uint64_t need, size_t at, struct tp_errbuf *err)
{
	int op = b[0], rc;
	const uint8_t *a = b + 1;
	struct pk_obj *o, *v, *k;

	if (!p->started && op != 0x80)
		return fail_at(p, at, err, "a pickle of protocol 2 to 5 starts with PROTO", op);
	switch (op) {
	case 0x80:	/* PROTO */
		if (p->started || a[0] < 2 || a[0] > 5)
			return fail_at(p, at, err, p->started ? "a second PROTO" : "only protocols 2 to 5 are read", op);
		p->started = 1;
		return TP_OK;
	case 0x95:	/* FRAME: a hint for buffered readers */
		return TP_OK;
	case '.':	/* STOP */
		if (p->nstack != 1 || p->nmarks)
			return fail_at(p, at, err, "STOP with other than one value on the stack", op);
		p->root = p->stack[0];
		p->stopped = 1;
		return TP_OK;
	case '(':	/* MARK */
		if (p->nmarks == p->lim.max_marks)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_deep", "more than %u nested MARKs at byte %llu",
				       p->lim.max_marks, (unsigned long long)(p->off + at));
		p->marks[p->nmarks++] = p->nstack;
		return TP_OK;
	case '0':	/* POP: the top value, or the mark when the top is one */
		if (p->nmarks && p->marks[p->nmarks - 1] == p->nstack)
			p->nmarks--;
		else if (p->nstack)
			p->nstack--;
		else
			return fail_at(p, at, err, "POP on an empty stack", op);
		return TP_OK;
	case '1': {	/* POP_MARK */
		size_t from;
		if (since_mark(p, &from))
			return fail_at(p, at, err, "POP_MARK without a MARK", op);
		p->nstack = from;
		return TP_OK;
	}
	case '2':	/* DUP */
		if (!p->nstack)
			return fail_at(p, at, err, "DUP on an empty stack", op);
		p->stack[p->nstack - 1]->flags |= F_SHARED;
		return push_new(p, p->stack[p->nstack - 1], err);
	/* shared values cost no node, but a stack slot each: counted like any value */
	case 'N':
		return push_new(p, &p->none, err);
	case 0x88:
		return push_new(p, &p->yes, err);
	case 0x89:
		return push_new(p, &p->no, err);
	case 'J': case 'K': case 'M':	/* BININT BININT1 BININT2 */
		if (!(o = node(p, PK_INT)))
			return push(p, NULL, err);
		o->u.i = op == 'J' ? (int64_t)(int32_t)(uint32_t)le(a, 4) : (int64_t)le(a, op == 'K' ? 1 : 2);
		return push_new(p, o, err);
	case 0x8a: case 0x8b:	/* LONG1 LONG4 */
		if (!(o = node(p, PK_INT)))
			return push(p, NULL, err);
		set_long(o, a + (op == 0x8a ? 1 : 4), need - (op == 0x8a ? 1 : 4));
		return push_new(p, o, err);
	case 'G': {	/* BINFLOAT: big-endian double */
		uint64_t bits = 0;
		for (int i = 0; i < 8; i++)
			bits = bits << 8 | a[i];
		if (!(o = node(p, PK_FLOAT)))
			return push(p, NULL, err);
		memcpy(&o->u.f, &bits, sizeof(bits));
		return push_new(p, o, err);
	}
	case 'X': case 0x8c: case 0x8d: case 'T': case 'U':	/* str (BINSTRING: a Python 2 str) */
	case 'B': case 'C': case 0x8e: {			/* bytes */
		int w = op == 0x8c || op == 'U' || op == 'C' ? 1 : op == 0x8d || op == 0x8e ? 8 : 4;
		int t = op == 'B' || op == 'C' || op == 0x8e ? PK_BYTES : PK_STR;
		if (!(o = node(p, t)) || !(o->u.s = bytes_copy(p, a + w, need - (uint64_t)w)))
			return push(p, NULL, err);
		o->n = (uint32_t)(need - (uint64_t)w);
		return push_new(p, o, err);
	}
	case ']': case '}': case ')': case 0x8f:	/* EMPTY_LIST EMPTY_DICT EMPTY_TUPLE EMPTY_SET */
		return push_new(p, node(p, op == '}' ? PK_DICT : op == ')' ? PK_TUPLE : PK_LIST), err);
	case 'l': case 0x91:	/* LIST FROZENSET */
		return from_mark(p, PK_LIST, at, op, err);
	case 't':
		return from_mark(p, PK_TUPLE, at, op, err);
	case 'd':
		return from_mark(p, PK_DICT, at, op, err);
	case 0x85: case 0x86: case 0x87: {	/* TUPLE1 TUPLE2 TUPLE3 */
		size_t n = (size_t)(op - 0x84);
		if (p->nstack < n || (p->nmarks && p->marks[p->nmarks - 1] > p->nstack - n))
			return fail_at(p, at, err, "a tuple from values that are not there", op);
		if (!(o = node(p, PK_TUPLE)))
			return push(p, NULL, err);
		if ((rc = count(p, err)))
			return rc;
		for (size_t i = p->nstack - n; i < p->nstack; i++)
			if ((rc = add_item(p, o, p->stack[i], err)))
				return rc;
		p->nstack -= n;
		return push(p, o, err);
	}
	case 'a':	/* APPEND */
		if (p->nstack < 2 || (p->nmarks && p->marks[p->nmarks - 1] > p->nstack - 2))
			return fail_at(p, at, err, "APPEND without a list and a value", op);
		v = p->stack[--p->nstack];
		if (p->stack[p->nstack - 1]->type != PK_LIST)
			return fail_at(p, at, err, "APPEND to what is not a list", op);
		return add_item(p, p->stack[p->nstack - 1], v, err);
	case 'e': case 0x90:	/* APPENDS ADDITEMS */
		return into_below_mark(p, PK_LIST, at, op, err);
	case 's':	/* SETITEM */
		if (p->nstack < 3 || (p->nmarks && p->marks[p->nmarks - 1] > p->nstack - 3))
			return fail_at(p, at, err, "SETITEM without a dict, a key and a value", op);
		v = p->stack[--p->nstack];
		k = p->stack[--p->nstack];
		o = p->stack[p->nstack - 1];
		if (o->type != PK_DICT)
			return fail_at(p, at, err, "SETITEM on what is not a dict", op);
		if ((rc = add_item(p, o, k, err)))
			return rc;
		return add_item(p, o, v, err);
	case 'u':	/* SETITEMS */
		return into_below_mark(p, PK_DICT, at, op, err);
	case 'q': case 'r':	/* BINPUT LONG_BINPUT */
		return memo_put(p, le(a, op == 'q' ? 1 : 4), at, op, err);
	case 0x94:	/* MEMOIZE */
		return memo_put(p, p->nmemo, at, op, err);
	case 'h': case 'j': {	/* BINGET LONG_BINGET */
		uint64_t i = le(a, op == 'h' ? 1 : 4);
		if (!(o = memo_get(p, i)))
			return fail_at(p, at, err, "a memo index out of range", op);
		if (o == &p->gone)
			return fail_at(p, at, err, "a reference to a value already read and released", op);
		o->flags |= F_SHARED;
		return push_new(p, o, err);
	}
	case 'c': case 0x93: case 'R': case 'b': case 0x81: case 0x92: case 'i': case 'o':
	case 'P': case 'Q': case 0x82: case 0x83: case 0x84: case 0x97: case 0x98:
		return fail_at(p, at, err, "an opcode that makes Python objects (a snapshot has none)", op);
	default:
		return fail_at(p, at, err, "an opcode this reader does not know", op);
	}
}

/* Run every whole opcode in b[0..n); *used: bytes consumed. */
static int run(struct pickle_parser *p, const uint8_t *b, size_t n, size_t *used, struct tp_errbuf *err)
{
	size_t i = 0;
	int rc;

	while (i < n) {
		uint64_t need = 0;
		if (p->stopped)
			return tp_fail(err, TP_ERR_INVALID, "bad_pickle", "data after the end of the pickle at byte %llu",
				       (unsigned long long)(p->off + i));
		if ((rc = arg_len(p, b + i, n - i, i, &need, err)) < 0)
			return rc;
		if (rc == 1 || n - i - 1 < need)
			break;
		if ((rc = exec(p, b + i, need, i, err)))
			return rc;
		i += 1 + (size_t)need;
	}
	*used = i;
	return TP_OK;
}

int pickle_parser_feed(struct pickle_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	size_t used;
	int rc;

	if (!p->nbuf) {
		/* the common case: whole opcodes straight from the piece, the tail kept */
		if ((rc = run(p, data, len, &used, err)))
			return rc;
		data += used;
		len -= used;
		p->off += used;
		if (!len)
			return TP_OK;
	}
	if (p->nbuf + len > p->capbuf) {
		size_t cap = p->capbuf ? p->capbuf : 4096;
		while (cap < p->nbuf + len)
			cap *= 2;
		uint8_t *nb = tp_realloc(p->buf, cap);
		if (!nb)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		p->buf = nb;
		p->capbuf = cap;
	}
	memcpy(p->buf + p->nbuf, data, len);
	p->nbuf += len;
	if ((rc = run(p, p->buf, p->nbuf, &used, err)))
		return rc;
	memmove(p->buf, p->buf + used, p->nbuf - used);
	p->nbuf -= used;
	p->off += used;
	/* what waits is one opcode's arguments, so buf stays within max_string */
	if (p->capbuf > 65536 && p->nbuf < p->capbuf / 4) {
		uint8_t *nb = tp_realloc(p->buf, p->capbuf / 2);
		if (nb) {
			p->buf = nb;
			p->capbuf /= 2;
		}
	}
	return TP_OK;
}

int pickle_parser_finish(struct pickle_parser *p, const struct pk_obj **root, struct tp_errbuf *err)
{
	if (!p->stopped)
		return tp_fail(err, TP_ERR_INVALID, "truncated_pickle", "the pickle ends at byte %llu before its STOP",
			       (unsigned long long)(p->off + p->nbuf));
	*root = p->root;
	return TP_OK;
}

/* ---- consumers that read as it runs ---- */

void pickle_parser_on_append(struct pickle_parser *p, pk_list_hook hook, void *ctx)
{
	p->hook = hook;
	p->hook_ctx = ctx;
}

static int own(const struct pickle_parser *p, const struct pk_obj *o)
{
	return o != &p->none && o != &p->yes && o != &p->no && o != &p->gone;
}

static void recycle(struct pickle_parser *p, struct pk_obj *o)
{
	p->nodes_live--;
	o->type = PK_NONE;
	o->u.next = p->free_nodes;
	p->free_nodes = o;
}

/* o's item slots freed; with free_items, the items only o names (a scalar, or a container already taken) */
static void drop_items(struct pickle_parser *p, struct pk_obj *o, int free_items)
{
	for (uint32_t i = 0; free_items && i < o->n; i++) {
		struct pk_obj *c = o->u.items[i];
		if (own(p, c) && (c->type < PK_LIST || c->type == PK_TAKEN) && !(c->flags & (F_MEMO | F_SHARED)))
			recycle(p, c);
	}
	p->slots -= o->n;
	tp_free(o->u.items);
	o->u.items = NULL;
	o->n = o->cap = 0;
}

void pk_release(struct pickle_parser *p, struct pk_obj *o)
{
	if (!own(p, o) || o->flags & F_SHARED)
		return;
	if (o->type >= PK_LIST && o->type <= PK_DICT)
		drop_items(p, o, 1);
	if (o->flags & F_MEMO) {
		/* its page is full: a page is made compact only when all it holds is canonical */
		struct memo_page *pg = p->memo[o->memo / MEMO_PAGE].full;
		pg->slot[o->memo % MEMO_PAGE] = &p->gone;
		pg->live--;
		pg->plain--;
		p->memo_live--;
		memo_trim(p, o->memo / MEMO_PAGE);
	}
	recycle(p, o);
}

void pk_take(struct pickle_parser *p, struct pk_obj *o, int64_t h, struct pk_obj *canon)
{
	if (!own(p, o) || o->type < PK_LIST || o->type > PK_DICT)
		return;
	drop_items(p, o, 0);
	o->type = PK_TAKEN;
	o->u.i = h;
	if (canon && (o->flags & (F_MEMO | F_SHARED)) == F_MEMO) {
		/* named only by the memo and the container being read: the memo names canon from now */
		p->memo[o->memo / MEMO_PAGE].full->slot[o->memo % MEMO_PAGE] = canon;
		p->memo[o->memo / MEMO_PAGE].full->plain--;
		memo_trim(p, o->memo / MEMO_PAGE);
		o->flags = 0;
	}
}

void pickle_parser_usage(const struct pickle_parser *p, struct pk_usage *u)
{
	u->nodes = p->nodes_live;
	u->slots = p->slots;
	u->memo_pages = p->pages_full;
	u->memo_compact = p->pages_compact;
}

struct pk_obj *pk_new_taken(struct pickle_parser *p, int64_t h)
{
	struct pk_obj *o;

	if (p->ncanon == p->capcanon) {
		size_t cap = p->capcanon ? p->capcanon * 2 : 64;
		struct pk_obj **n = tp_realloc(p->canon, cap * sizeof(*n));
		if (!n)
			return NULL;
		p->canon = n;
		p->capcanon = cap;
	}
	if (!(o = node(p, PK_TAKEN)))
		return NULL;
	o->u.i = h;
	o->flags = F_SHARED | F_CANON;
	o->memo = (uint32_t)p->ncanon;
	p->canon[p->ncanon++] = o;
	return o;
}

static uint64_t tree_values(const struct pk_obj *o, int depth)
{
	uint64_t n = 1;

	if ((o->type == PK_LIST || o->type == PK_TUPLE || o->type == PK_DICT) && o->u.items)
		for (uint32_t i = 0; i < o->n; i++)
			n += depth ? tree_values(o->u.items[i], depth - 1) : 1;
	return n;
}

uint64_t pk_tree_values(const struct pk_obj *o)
{
	return tree_values(o, 2);
}

int pk_shared(const struct pk_obj *o)
{
	return (o->flags & F_SHARED) != 0;
}

const struct pk_obj *pk_get(const struct pk_obj *d, const char *key)
{
	if (!d || d->type != PK_DICT)
		return NULL;
	for (uint32_t i = 0; i + 1 < d->n; i += 2) {
		const struct pk_obj *k = d->u.items[i];
		if (k->type == PK_STR && !strcmp(k->u.s, key))
			return d->u.items[i + 1];
	}
	return NULL;
}

int pk_int(const struct pk_obj *o, int64_t *out)
{
	if (!o || (o->type != PK_INT && o->type != PK_BOOL))
		return 0;
	*out = o->u.i;
	return 1;
}

const char *pk_str(const struct pk_obj *o)
{
	return o && o->type == PK_STR ? o->u.s : NULL;
}
