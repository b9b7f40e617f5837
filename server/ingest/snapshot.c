/*
 * snapshot.c: memory timelines from a memory snapshot (snapshot.h).
 *
 * The caching allocator records, per device, a ring of trace entries
 * (alloc, free_requested, free_completed, segment_alloc/free/map/unmap,
 * oom...) and, at dump time, its segments with their blocks. The timeline
 * replays the entries: allocated bytes move at alloc and at free_requested
 * (where the allocator's own allocated_bytes moves; free_completed only
 * closes a block that no free_requested announced, as in older snapshots),
 * reserved bytes at segment entries, counted back from the segments' sizes
 * at dump time. Memory allocated before recording began shows as blocks
 * freed without an alloc, or blocks alive at dump time that no alloc made:
 * with allocation frames they get a category like any allocation, without
 * them they are the pre-existing baseline, reported under parameter as the
 * trace source does.
 *
 * Categories come from the Python frames of each allocation and its free,
 * by the rule table in categorize(); entries without frames in a snapshot
 * that has frames elsewhere were made by a thread with no Python on it,
 * which in training is the autograd engine's.
 *
 * The entries are read as the pickle runs (a hook on every list append):
 * each becomes a 24-byte record, paired with its allocation by address,
 * and its dict is released; a frame list becomes a summary once (what
 * categorize and op_name read), however many entries name it. So what is
 * held grows with the records, not with the pickle's object tree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hmap.h"
#include "memmodel.h"
#include "ingest/snapshot.h"
#include "utf8.h"

const char *const snap_rule_names[SNAP_NRULES] = {
	"same_line", "module_init", "zero_grad", "optimizer", "backward", "data_loading", "forward",
	"forward_alive", "no_phase", "before_recording",
};

/* A_BASE: a free of a block allocated before recording (its record holds the size) */
enum { A_OTHER, A_ALLOC, A_FREE, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE, A_BASE };

/* What the frames of one entry say about where the program was. */
enum {
	PH_FORWARD = 1 << 0,	/* a module's forward (forward, _call_impl) */
	PH_BACKWARD = 1 << 1,	/* backward(), or no Python frame: the autograd engine's thread */
	PH_OPT = 1 << 2,	/* optimizer code (a file under an optim path, optimizer.py...) */
	PH_ZERO_GRAD = 1 << 3,	/* zero_grad */
	PH_DATA = 1 << 4,	/* data loading (torch/utils/data, pin_memory) */
	PH_INIT = 1 << 5,	/* building or moving a module (__init__, reset_parameters, _apply) */
};

/*
 * An entry that changes something is a record in a byte stream: a byte of
 * its action (and D1000: its time step is in whole microseconds), the step
 * from the time before as a varint, then for a free the allocation it frees
 * (counted back from the newest), for a segment or a pre-recording free its
 * bytes. An allocation is numbered in order, so its record names nothing.
 */
#define D1000 0x08
#define REC_MAX 21			/* the longest record: a byte and two 10-byte varints */

/*
 * Allocations, by number: bytes, frames at allocation, and category. A
 * free decides the category at once, as the frames of both ends are there:
 * for a snapshot without frames anywhere (bits 0-2) and with (bits 3-5,
 * entries without frames being the autograd engine's), CAT_DECIDED set.
 * At the end, the others are decided and the byte holds the category.
 */
#define CAT_DECIDED 0x40

/*
 * What a frame list says, made once per list and kept once per distinct
 * summary (index 0: no frames): lists of other frames above the same
 * innermost and user frames with the same phases share one.
 */
struct fsum {
	const struct pk_obj *inner;	/* the innermost frame */
	const struct pk_obj *user;	/* the frame op_name() names */
	unsigned ph;			/* phase() of the frames */
	struct pk_obj *canon;		/* the value the memo names a taken list by */
};

/* The entries one list received, read as they came. */
struct dtrace {
	const struct pk_obj *list;
	uint8_t *rec;			/* the records */
	size_t nrec, caprec;		/* bytes */
	size_t nents;			/* records */
	int64_t *asize;			/* allocations */
	uint32_t *afa;
	uint8_t *acat;
	size_t nal, capal;
	struct mem_amap m;
	uint64_t seen;			/* entries, every action: an entry's place stands for a missing time */
	uint64_t tree;			/* the values they hold and ENTRY_HELD each: what the list costs used again */
	uint64_t allocs, frees_completed;
	int64_t base;			/* freed without an alloc: allocated before recording */
	int64_t last_t;			/* of the entries with a time */
	int64_t first_t, last_rec_t;	/* of the records */
	int has_t;
	int used;			/* by a device, at the end */
};

#define MAX_DEVICES 64

/*
 * What a copy of an entry holds until the upload is stored (its record, its
 * allocation's slots, its point in the series), in the cap's values (24-byte
 * pickle nodes): a list of 74,000 entries used by 64 devices (4.7 million
 * copies, 130 KB gzip'd) peaked at 257 MiB, 55 bytes a copy. Copies (an
 * entry named again, a list used by another device) count it and the values
 * a copy would hold; entries the pickle wrote once count 1 as they always have.
 */
#define ENTRY_HELD 3

struct snap_reader {
	struct pickle_parser *p;
	uint64_t max_entries, entries;
	struct dtrace tr[MAX_DEVICES];
	size_t ntr;
	struct dtrace *last;
	struct fsum *fs;
	size_t nfs, capfs;
	uint32_t *fsh;			/* summary indexes by content, open addressing, at most half full */
	struct pk_obj *none;		/* what the memo names a taken empty frame list by */
	size_t fshcap;
	struct hmap phases;		/* frame dict -> frame_phase() */
	int any_frames;
};

/* What a device's points are replayed from: its records and the state before the first. */
struct snap_dev {
	struct dtrace own;		/* a device with no trace list, or one that shares it: tr points here */
	const struct dtrace *tr;
	int64_t live0[MEM_NCAT], base0, reserved0;
};

struct snap_result {
	struct mem_series *series;
	size_t nseries;
	struct snap_dev *dev;		/* ndev of them: a series' replay source */
	size_t ndev;
	struct mem_group **groups;
	struct mem_segment **segs;
	struct mem_block **blocks;
	char **names;			/* group and block op names */
	size_t nnames, capnames;
};

static void trace_free(struct dtrace *d)
{
	tp_free(d->rec);
	tp_free(d->asize);
	tp_free(d->afa);
	tp_free(d->acat);
	mem_amap_free(&d->m);
}

void snap_result_free(struct snap_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; r->dev && i < r->ndev; i++)
		trace_free(&r->dev[i].own);
	for (size_t i = 0; i < r->nseries; i++) {
		tp_free(r->groups[i]);
		tp_free(r->segs[i]);
		tp_free(r->blocks[i]);
	}
	for (size_t i = 0; i < r->nnames; i++)
		tp_free(r->names[i]);
	tp_free(r->names);
	tp_free(r->series);
	tp_free(r->dev);
	tp_free(r->groups);
	tp_free(r->segs);
	tp_free(r->blocks);
	tp_free(r);
}

/* ---- frames ---- */

/* needle in s, '\\' and '/' alike (Windows paths) */
static int path_has(const char *s, const char *needle)
{
	for (; *s; s++) {
		size_t i;
		for (i = 0; needle[i] && s[i]; i++)
			if ((s[i] == '\\' ? '/' : s[i]) != needle[i])
				break;
		if (!needle[i])
			return 1;
	}
	return 0;
}

static const char *frame_str(const struct pk_obj *f, const char *key)
{
	const char *s = pk_str(pk_get(f, key));

	return s ? s : "";
}

static int has_frames(const struct pk_obj *frames)
{
	return frames && frames->type == PK_LIST && frames->n > 0;
}

#define PH_LIBRARY (1 << 6)		/* not a phase: the frame is in installed code (library_file) */

static int library_file(const char *file);

/* the phases one frame names, and whether it is the user's own code */
static unsigned frame_phase(const struct pk_obj *f)
{
	const char *name = frame_str(f, "name"), *file = frame_str(f, "filename");
	unsigned ph = library_file(file) ? PH_LIBRARY : 0;

	if (!strcmp(name, "zero_grad"))
		ph |= PH_ZERO_GRAD;
	if (path_has(file, "optim"))
		ph |= PH_OPT;
	if (!strcmp(name, "backward") || !strcmp(name, "_engine_run_backward"))
		ph |= PH_BACKWARD;
	if (path_has(file, "torch/utils/data/") || !strcmp(name, "pin_memory"))
		ph |= PH_DATA;
	if (!strcmp(name, "forward") || !strcmp(name, "_call_impl"))
		ph |= PH_FORWARD;
	if (!strcmp(name, "__init__") || !strcmp(name, "_apply") || !strcmp(name, "reset_parameters") ||
	    path_has(file, "torch/nn/init.py"))
		ph |= PH_INIT;
	return ph;
}

/* frame_phase(f), looked up once per frame (a frame dict is named by many lists); > 255: out of memory */
static unsigned frame_info(struct snap_reader *rd, const struct pk_obj *f)
{
	uint64_t key = (uint64_t)(uintptr_t)f;
	uint32_t v = hmap_get(&rd->phases, key);

	if (v == UINT32_MAX && !hmap_put(&rd->phases, key, v = frame_phase(f)))
		return 256;
	return v;
}

static unsigned phase(const struct snap_reader *rd, uint32_t f, int any_frames)
{
	if (!f)
		return any_frames ? PH_BACKWARD : 0;
	return rd->fs[f].ph;
}

/* the same innermost frame (function, file, line) */
static int same_line(const struct snap_reader *rd, uint32_t fa, uint32_t fb)
{
	const struct pk_obj *a, *b;
	int64_t la, lb;

	if (!fa || !fb)
		return 0;
	a = rd->fs[fa].inner;
	b = rd->fs[fb].inner;
	return pk_int(pk_get(a, "line"), &la) && pk_int(pk_get(b, "line"), &lb) && la == lb &&
	       !strcmp(frame_str(a, "name"), frame_str(b, "name")) &&
	       !strcmp(frame_str(a, "filename"), frame_str(b, "filename"));
}

/*
 * The rules, in order; the first that matches wins. "Freed" means freed
 * while recording; the phases are those of the frames at the allocation (a)
 * and at the free (f). *rule (may be NULL): the SNAP_RULE_* that decided.
 */
static int categorize(const struct snap_reader *rd, uint32_t fa, uint32_t ff, int freed, int any_frames, int *rule)
{
	unsigned a = phase(rd, fa, any_frames), f = freed ? phase(rd, ff, any_frames) : 0;
	int k, cat;

	/* 1. made and released by the same line of Python: a temporary of that statement
	 *    (PyTorch: TEMPORARY, allocated and freed inside one operator) */
	if (freed && same_line(rd, fa, ff))
		k = SNAP_RULE_SAME_LINE, cat = CAT_TEMPORARY;
	/* 2. made while a module is built or moved (__init__, reset_parameters, .to()/.cuda()
	 *    through _apply) and not in forward, backward or the optimizer: its parameters */
	else if ((a & PH_INIT) && !(a & (PH_FORWARD | PH_BACKWARD | PH_OPT)))
		k = SNAP_RULE_MODULE_INIT, cat = CAT_PARAMETER;
	/* 3. released by zero_grad(set_to_none=True): only gradients are */
	else if (freed && (f & PH_ZERO_GRAD))
		k = SNAP_RULE_ZERO_GRAD, cat = CAT_GRADIENT;
	/* 4. made in optimizer code and kept after it: its state (exp_avg, momentum; Adam's
	 *    _init_group); released inside it: the update's temporaries */
	else if (a & PH_OPT)
		k = SNAP_RULE_OPTIMIZER, cat = freed && (f & PH_OPT) ? CAT_TEMPORARY : CAT_OPTIMIZER_STATE;
	/* 5. made in backward and alive after it: a gradient; released inside it:
	 *    the backward's own intermediates */
	else if (a & PH_BACKWARD)
		k = SNAP_RULE_BACKWARD, cat = freed && (f & PH_BACKWARD) ? CAT_AUTOGRAD_DETAIL : CAT_GRADIENT;
	/* 6. made while loading data: the batch */
	else if (a & PH_DATA)
		k = SNAP_RULE_DATA, cat = CAT_INPUT;
	/* 7. made in forward and released later (by backward, or by a later line of
	 *    forward): an activation */
	else if ((a & PH_FORWARD) && freed)
		k = SNAP_RULE_FORWARD, cat = CAT_ACTIVATION;
	/* 8. made in forward and alive at the end: an output of forward (the logits the
	 *    loop still holds) or a tensor saved for a backward not run yet; PyTorch calls
	 *    both activations (on a path from the loss's gradient) */
	else if (a & PH_FORWARD)
		k = SNAP_RULE_FORWARD_ALIVE, cat = CAT_ACTIVATION;
	/* 9. anything else (no frame names a phase): nothing tells */
	else
		k = SNAP_RULE_NONE, cat = CAT_UNKNOWN;
	if (rule)
		*rule = k;
	return cat;
}

/* installed code (torch, einops...) rather than the user's own */
static int library_file(const char *file)
{
	return path_has(file, "site-packages/") || path_has(file, "dist-packages/") || path_has(file, "/torch/") ||
	       path_has(file, "/lib/python");
}

static size_t fsum_hash(const struct fsum *x, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)x->inner * 0x9e3779b97f4a7c15ULL ^
		     (uint64_t)(uintptr_t)x->user * 0xc2b2ae3d27d4eb4fULL ^ x->ph;

	return (size_t)(h ^ h >> 29) & (cap - 1);
}

/* x's index among the summaries, added when new; UINT32_MAX: out of memory */
static uint32_t fsum_intern(struct snap_reader *rd, const struct fsum *x)
{
	size_t j;

	if (2 * (rd->nfs + 1) > rd->fshcap) {
		size_t cap = rd->fshcap ? rd->fshcap * 2 : 1024;
		uint32_t *n = tp_calloc(cap, sizeof(*n));
		if (!n)
			return UINT32_MAX;
		for (size_t i = 1; i < rd->nfs; i++) {
			for (j = fsum_hash(&rd->fs[i], cap); n[j]; j = (j + 1) & (cap - 1))
				;
			n[j] = (uint32_t)i;
		}
		tp_free(rd->fsh);
		rd->fsh = n;
		rd->fshcap = cap;
	}
	for (j = fsum_hash(x, rd->fshcap); rd->fsh[j]; j = (j + 1) & (rd->fshcap - 1)) {
		const struct fsum *y = &rd->fs[rd->fsh[j]];
		if (y->inner == x->inner && y->user == x->user && y->ph == x->ph)
			return rd->fsh[j];
	}
	if (rd->nfs == rd->capfs) {
		size_t cap = rd->capfs ? rd->capfs * 2 : 256;
		struct fsum *n = cap < UINT32_MAX / 2 ? tp_realloc(rd->fs, cap * sizeof(*n)) : NULL;
		if (!n)
			return UINT32_MAX;
		rd->fs = n;
		rd->capfs = cap;
		if (!rd->nfs)
			rd->fs[rd->nfs++] = (struct fsum){ 0 };	/* 0: no frames */
	}
	rd->fs[rd->nfs] = *x;
	if (rd->p && !(rd->fs[rd->nfs].canon = pk_new_taken(rd->p, (int64_t)rd->nfs)))
		return UINT32_MAX;
	rd->fsh[j] = (uint32_t)rd->nfs;
	return (uint32_t)rd->nfs++;
}

/*
 * The summary of a frames value: a list with frames gets one, made once
 * (the list is then taken: its slots freed, every reference to it sees the
 * summary); anything else is 0, no frames. UINT32_MAX: out of memory.
 */
static uint32_t frames_of(struct snap_reader *rd, const struct pk_obj *frames)
{
	struct fsum x = { 0 };
	uint32_t k;

	if (frames && frames->type == PK_TAKEN && frames->u.i > 0 && (size_t)frames->u.i < rd->nfs)
		return (uint32_t)frames->u.i;
	if (!has_frames(frames)) {
		/* an empty list (a thread without Python) is taken too, or each would stay in the memo */
		if (frames && frames->type == PK_LIST && rd->p) {
			if (!rd->none && !(rd->none = pk_new_taken(rd->p, 0)))
				return UINT32_MAX;
			pk_take(rd->p, (struct pk_obj *)frames, 0, rd->none);
		}
		return 0;
	}
	x.inner = frames->u.items[0];
	for (uint32_t i = 0; i < frames->n; i++) {
		unsigned ph = frame_info(rd, frames->u.items[i]);
		if (ph > 255)
			return UINT32_MAX;
		/* the innermost frame of the user's own code, else the innermost */
		if (!x.user && !(ph & PH_LIBRARY))
			x.user = frames->u.items[i];
		x.ph |= ph & ~(unsigned)PH_LIBRARY;
	}
	if (!x.user)
		x.user = x.inner;
	if ((k = fsum_intern(rd, &x)) == UINT32_MAX)
		return k;
	if (rd->p)
		pk_take(rd->p, (struct pk_obj *)frames, (int64_t)k, rd->fs[k].canon);
	return k;
}

/* "function (file:line)" of summary f's user frame; NULL: no frames */
static const char *op_name(const struct snap_reader *rd, uint32_t fi, char *buf, size_t size)
{
	const struct pk_obj *f;
	const char *file, *base;
	int64_t line = 0;

	if (!fi)
		return NULL;
	f = rd->fs[fi].user;
	file = frame_str(f, "filename");
	for (base = file; *file; file++)
		if (*file == '/' || *file == '\\')
			base = file + 1;
	pk_int(pk_get(f, "line"), &line);
	snprintf(buf, size, "%s (%s:%lld)", frame_str(f, "name"), base, (long long)line);
	/* a pickle's str is not checked: what is not UTF-8 (or cut by the buffer) becomes '?', as JSON must */
	for (unsigned char *p = (unsigned char *)buf, *end = p + strlen(buf); p < end;) {
		size_t n = tp_utf8_len(p, end);
		if (!n) {
			*p = '?';
			n = 1;
		}
		p += n;
	}
	return buf;
}

/* ---- reading the dict ---- */

static int action_of(const char *s)
{
	static const struct { const char *name; int a; } tab[] = {
		{ "alloc", A_ALLOC }, { "free_requested", A_FREE }, { "free", A_FREE },
		{ "free_completed", A_FREE_DONE }, { "segment_alloc", A_SEG_ALLOC }, { "segment_map", A_SEG_ALLOC },
		{ "segment_free", A_SEG_FREE }, { "segment_unmap", A_SEG_FREE },
	};
	for (size_t i = 0; s && i < sizeof(tab) / sizeof(tab[0]); i++)
		if (!strcmp(s, tab[i].name))
			return tab[i].a;
	return A_OTHER;
}

static int64_t us_to_ns(int64_t us)
{
	int64_t ns;

	return __builtin_mul_overflow(us, 1000, &ns) ? (us < 0 ? INT64_MIN : INT64_MAX) : ns;
}

static uint8_t *put_varint(uint8_t *b, uint64_t v)
{
	for (; v >= 0x80; v >>= 7)
		*b++ = (uint8_t)(v | 0x80);
	*b++ = (uint8_t)v;
	return b;
}

static const uint8_t *get_varint(const uint8_t *b, uint64_t *v)
{
	uint64_t x = 0;
	int sh = 0;

	for (; *b & 0x80; sh += 7)
		x |= (uint64_t)(*b++ & 0x7f) << sh;
	*v = x | (uint64_t)*b++ << sh;
	return b;
}

/* A record of action at t (not before the last), with v unless it is an allocation. */
static int put_rec(struct dtrace *d, int action, int64_t t, uint64_t v)
{
	uint64_t step = d->nents ? (uint64_t)t - (uint64_t)d->last_rec_t : 0;
	uint8_t *b;

	if (tp_grow((void **)&d->rec, &d->caprec, d->nrec + REC_MAX, 1))
		return -1;
	b = d->rec + d->nrec;
	*b++ = (uint8_t)(action | (step % 1000 ? 0 : D1000));
	b = put_varint(b, step % 1000 ? step : step / 1000);
	if (action != A_ALLOC)
		b = put_varint(b, v);
	if (!d->nents)
		d->first_t = t;
	d->nrec = (size_t)(b - d->rec);
	d->last_rec_t = t;
	d->nents++;
	return 0;
}

/* Reading the records back, in order: v is the allocation (numbered as they come) or the bytes. */
struct cursor {
	const uint8_t *b;
	int64_t t;
	uint64_t nal;
};

static void next_rec(struct cursor *c, int *action, int64_t *v)
{
	uint8_t head = *c->b;
	uint64_t step, x = 0;

	*action = head & 7;
	c->b = get_varint(c->b + 1, &step);
	if (head & D1000)
		step *= 1000;
	c->t = (int64_t)((uint64_t)c->t + step);
	if (*action == A_ALLOC) {
		*v = (int64_t)c->nal++;
		return;
	}
	c->b = get_varint(c->b, &x);
	*v = *action == A_FREE || *action == A_FREE_DONE ? (int64_t)(c->nal - x) : (int64_t)x;
}

/* room for need allocations */
static int al_grow(struct dtrace *d, size_t need)
{
	size_t cap = d->capal ? d->capal : 1024;
	void *a, *f, *c;

	if (need <= d->capal)
		return 0;
	while (cap < need)
		cap *= 2;
	if (!(a = tp_realloc(d->asize, cap * sizeof(*d->asize))))
		return -1;
	d->asize = a;
	if (!(f = tp_realloc(d->afa, cap * sizeof(*d->afa))))
		return -1;
	d->afa = f;
	if (!(c = tp_realloc(d->acat, cap)))
		return -1;
	d->acat = c;
	d->capal = cap;
	return 0;
}

static struct dtrace *trace_of(struct snap_reader *rd, const struct pk_obj *list)
{
	for (size_t i = 0; i < rd->ntr; i++)
		if (rd->tr[i].list == list)
			return &rd->tr[i];
	return NULL;
}

/*
 * The hook: a dict with an 'action' (a trace entry), or any dict a list of
 * them receives, becomes a record of its list, paired with its allocation
 * by address as the device trace goes, and is released.
 */
static int take_entry(void *ctx, struct pickle_parser *p, const struct pk_obj *list, struct pk_obj *e,
		      struct tp_errbuf *err)
{
	struct snap_reader *rd = ctx;
	struct dtrace *d = rd->last && rd->last->list == list ? rd->last : NULL;
	const struct pk_obj *act;
	int64_t addr, size, us, t;
	int action;
	uint32_t fs;
	uint64_t cost;

	if (e->type != PK_DICT)
		return 0;
	act = pk_get(e, "action");
	if (!d && !(d = trace_of(rd, list))) {
		if (!act)
			return 0;
		if (rd->ntr == MAX_DEVICES)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "more than %d lists of trace entries",
				       MAX_DEVICES);
		d = &rd->tr[rd->ntr++];
		d->list = list;
		if (mem_amap_init(&d->m, 64))
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	rd->last = d;
	/*
	 * An entry counts 1; one the pickle names more than once (a memo GET)
	 * counts, each time, the values a copy would hold and ENTRY_HELD: one
	 * entry dict named 498,000 times in a list used by 64 devices (1,835
	 * bytes gzip'd) was 31.9 million entries under a cap of 32 million.
	 */
	cost = pk_tree_values(e) + ENTRY_HELD;
	d->tree += cost;
	if ((rd->entries += pk_shared(e) ? cost : 1) > rd->max_entries)
		return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
			       "the devices' trace entries pass the cap of %llu values (a list counts each time it is "
			       "used, an entry named again counts the values it holds)",
			       (unsigned long long)rd->max_entries);
	d->seen++;
	/* every entry's frames summarized (and taken), so no frame list outlives its entry */
	if ((fs = frames_of(rd, pk_get(e, "frames"))) == UINT32_MAX)
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	rd->any_frames |= fs > 0;
	action = action_of(pk_str(act));
	if (action == A_OTHER)
		goto done;
	if (!pk_int(pk_get(e, "addr"), &addr) || !pk_int(pk_get(e, "size"), &size) || size < 0)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot",
			       "trace entry %llu of its device: a '%s' entry without an integer addr and size",
			       (unsigned long long)(d->seen - 1), pk_str(act));
	/* no time_us in older snapshots: the entry's place stands for its time */
	t = pk_int(pk_get(e, "time_us"), &us) ? us_to_ns(us) : (int64_t)(d->seen - 1) * 1000;
	if (d->has_t && t < d->last_t)
		t = d->last_t;	/* TSC-converted times may step back a little */
	d->last_t = t;
	d->has_t = 1;
	d->allocs += action == A_ALLOC;
	d->frees_completed += action == A_FREE_DONE;
	if (al_grow(d, d->nal + 1))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (d->nal >= INT32_MAX)
		return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big", "a device has more than 2^31 allocations");
	if (action == A_SEG_ALLOC || action == A_SEG_FREE) {
		if (put_rec(d, action, t, (uint64_t)size))
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	} else {
		/* pair allocations and frees by address; a free of a block never allocated here is pre-existing */
		int32_t *slot = mem_amap_put(&d->m, addr);
		int rc = 0;
		if (!slot)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		if (action == A_ALLOC) {
			d->asize[d->nal] = size;
			d->afa[d->nal] = fs;
			d->acat[d->nal] = 0;
			*slot = (int32_t)d->nal++;
			rc = put_rec(d, A_ALLOC, t, 0);
		} else if (*slot >= 0) {
			/* both ends' frames are here: its category, with and without frames elsewhere */
			uint32_t fa = d->afa[*slot];
			d->acat[*slot] = (uint8_t)(CAT_DECIDED | categorize(rd, fa, fs, 1, 0, NULL) |
						      categorize(rd, fa, fs, 1, 1, NULL) << 3);
			rc = put_rec(d, action, t, d->nal - (size_t)*slot);
			*slot = -2;
		} else if (action == A_FREE || *slot == -1) {
			d->base = tp_sat_add(d->base, size);	/* allocated before recording began */
			*slot = -2;
			rc = put_rec(d, A_BASE, t, (uint64_t)size);
		}
		/* else the completion of a free already counted */
		if (rc)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
done:
	pk_release(p, e);
	return 1;
}

struct snap_reader *snap_reader_new(struct pickle_parser *p, uint64_t max_entries)
{
	struct snap_reader *rd = tp_calloc(1, sizeof(*rd));

	if (!rd)
		return NULL;
	rd->p = p;
	rd->max_entries = max_entries;
	if (p)
		pickle_parser_on_append(p, take_entry, rd);
	return rd;
}

void snap_reader_free(struct snap_reader *rd)
{
	if (!rd)
		return;
	for (size_t i = 0; i < rd->ntr; i++)
		trace_free(&rd->tr[i]);
	tp_free(rd->fs);
	tp_free(rd->fsh);
	hmap_free(&rd->phases);
	tp_free(rd);
}

struct dev {
	int id;
	struct dtrace *tr;		/* the entries of device_traces[id], or NULL */
	int copy;			/* tr is another device's too: each works on a copy */
	int64_t reserved_end;
	size_t nblocks;			/* blocks alive at dump time */
};

static int is_live_block(const struct pk_obj *b)
{
	const char *s = pk_str(pk_get(b, "state"));

	return s && (!strcmp(s, "active_allocated") || !strcmp(s, "active_pending_free"));
}

/* ---- one device ---- */

/* A copy of name owned by r, or NULL when out of memory. */
static const char *keep_name(struct snap_result *r, const char *name)
{
	char *copy;

	if (r->nnames == r->capnames) {
		size_t cap = r->capnames ? r->capnames * 2 : 64;
		char **nn = tp_realloc(r->names, cap * sizeof(*nn));
		if (!nn)
			return NULL;
		r->names = nn;
		r->capnames = cap;
	}
	if (!(copy = tp_malloc(strlen(name) + 1)))
		return NULL;
	strcpy(copy, name);
	return r->names[r->nnames++] = copy;
}

static int block_state(const struct pk_obj *b)
{
	const char *s = pk_str(pk_get(b, "state"));

	if (!s || !strcmp(s, "inactive"))
		return MEM_BLOCK_INACTIVE;
	if (!strcmp(s, "active_allocated"))
		return MEM_BLOCK_ALLOCATED;
	return strcmp(s, "active_pending_free") ? MEM_BLOCK_OTHER : MEM_BLOCK_PENDING_FREE;
}

static int cmp_seg(const void *a, const void *b)
{
	const struct mem_segment *x = a, *y = b;

	return x->address < y->address ? -1 : x->address > y->address;
}

/*
 * Device d's segments at dump time, by address, each with its blocks: a live
 * block's category is its allocation's (m maps the addresses of live blocks to
 * al, -3 to the pre-existing baseline, reported under parameter as in the
 * timeline). A block without an address follows the one before it.
 */
static int dump_layout(struct snap_result *r, const struct snap_reader *rd, const struct pk_obj *segments,
		       const struct dev *d, struct dtrace *tr, struct mem_series *s)
{
	size_t nseg = 0, nbl = 0, i;
	struct mem_segment *sv;
	struct mem_block *bv;

	for (i = 0; i < segments->n; i++) {
		const struct pk_obj *sg = segments->u.items[i], *blocks = pk_get(sg, "blocks");
		int64_t dev = 0;
		pk_int(pk_get(sg, "device"), &dev);
		if (dev != d->id)
			continue;
		nseg++;
		nbl += blocks && blocks->type == PK_LIST ? blocks->n : 0;
	}
	if (!(sv = tp_calloc(nseg + 1, sizeof(*sv))) || !(bv = tp_calloc(nbl + 1, sizeof(*bv)))) {
		tp_free(sv);
		return -1;
	}
	nseg = nbl = 0;
	for (i = 0; i < segments->n; i++) {
		const struct pk_obj *sg = segments->u.items[i], *blocks = pk_get(sg, "blocks");
		struct mem_segment *x = &sv[nseg];
		int64_t dev = 0, off = 0;
		const char *type = pk_str(pk_get(sg, "segment_type"));
		pk_int(pk_get(sg, "device"), &dev);
		if (dev != d->id)
			continue;
		pk_int(pk_get(sg, "address"), &x->address);
		pk_int(pk_get(sg, "total_size"), &x->total_size);
		pk_int(pk_get(sg, "stream"), &x->stream);
		snprintf(x->type, sizeof(x->type), "%s", type && (!strcmp(type, "large") || !strcmp(type, "small")) ? type : "");
		x->blocks = &bv[nbl];
		for (uint32_t b = 0; blocks && blocks->type == PK_LIST && b < blocks->n; b++) {
			const struct pk_obj *bl = blocks->u.items[b];
			struct mem_block *y = &bv[nbl];
			int64_t addr;
			char buf[256];
			if (!pk_int(pk_get(bl, "size"), &y->size) || y->size < 0)
				continue;
			if (!pk_int(pk_get(bl, "requested_size"), &y->requested) || y->requested < 0)
				y->requested = y->size;
			if (!pk_int(pk_get(bl, "address"), &addr) || __builtin_sub_overflow(addr, x->address, &y->offset) ||
			    y->offset < 0 || y->offset > x->total_size) {
				y->offset = off;
				addr = tp_sat_add(x->address, off);
			}
			off = tp_sat_add(y->offset, y->size);
			y->state = block_state(bl);
			y->cat = -1;
			if (is_live_block(bl)) {
				int32_t slot = *mem_amap_slot(&tr->m, addr);
				int rule = SNAP_RULE_BASELINE;
				y->cat = slot >= 0 ? tr->acat[slot] : CAT_PARAMETER;
				/* alive at dump time, so never freed: the rule as the category was decided */
				if (slot >= 0)
					categorize(rd, tr->afa[slot], 0, 0, rd->any_frames, &rule);
				y->rule = snap_rule_names[rule];
				const char *op = slot >= 0 ? op_name(rd, tr->afa[slot], buf, sizeof(buf)) : NULL;
				if (op && !(y->op = keep_name(r, op))) {
					tp_free(sv);
					tp_free(bv);
					return -1;
				}
			}
			nbl++;
			x->nblocks++;
		}
		nseg++;
	}
	qsort(sv, nseg, sizeof(*sv), cmp_seg);
	r->segs[r->nseries] = sv;
	r->blocks[r->nseries] = bv;
	s->segs = sv;
	s->nsegs = nseg;
	return 0;
}

/* d's records into the empty t, for a device that shares its list with another: each adds its own blocks */
static int trace_copy(struct dtrace *t, const struct dtrace *d)
{
	*t = *d;
	t->rec = NULL;
	t->asize = NULL;
	t->afa = NULL;
	t->acat = NULL;
	t->caprec = t->capal = 0;
	t->m = (struct mem_amap){ 0 };
	if (!(t->rec = tp_malloc(d->nrec + 1)) || al_grow(t, d->nal + 1) || mem_amap_copy(&t->m, &d->m))
		return -1;
	t->caprec = d->nrec + 1;
	/* a list of entries none of which made a record (all 'snapshot' or 'oom') has no arrays yet */
	if (d->nrec)
		memcpy(t->rec, d->rec, d->nrec);
	if (d->nal) {
		memcpy(t->asize, d->asize, d->nal * sizeof(*t->asize));
		memcpy(t->afa, d->afa, d->nal * sizeof(*t->afa));
		memcpy(t->acat, d->acat, d->nal);
	}
	return 0;
}

/*
 * Device v's points, in order, to fn (NULL: none), from the state before
 * its first record: a point after each (each changes something), or one of
 * what is alive when there is none (a state-only snapshot). *peak (may be
 * NULL): the record of the highest, and the baseline there.
 */
struct peak {
	size_t at, n;
	int64_t base;
};

static int replay_dev(const struct snap_dev *v, mem_point_fn fn, void *arg, struct peak *pk)
{
	const struct dtrace *tr = v->tr;
	struct cursor c = { tr->rec, tr->first_t, 0 };
	size_t nent = tr->nents, i;
	int64_t live[MEM_NCAT], base = v->base0, reserved = v->reserved0, best = INT64_MIN, x;
	struct mem_point p;
	int rc, action;

	memcpy(live, v->live0, sizeof(live));
	for (i = 0; i < nent || (!nent && !i); i++) {
		if (i < nent) {
			next_rec(&c, &action, &x);
			if (action == A_SEG_ALLOC || action == A_SEG_FREE) {
				reserved = action == A_SEG_ALLOC ? tp_sat_add(reserved, x) : tp_sat_sub(reserved, x);
			} else if (action == A_BASE) {
				base = tp_sat_sub(base, x);
			} else {	/* a free as large as its allocation, whatever it says */
				int cat = tr->acat[x];
				live[cat] = action == A_ALLOC ? tp_sat_add(live[cat], tr->asize[x])
							      : tp_sat_sub(live[cat], tr->asize[x]);
			}
		}
		p.t_ns = i < nent ? c.t : 0;
		memcpy(p.cat, live, sizeof(live));
		p.cat[CAT_PARAMETER] = tp_sat_add(p.cat[CAT_PARAMETER], base);
		p.reserved = reserved;
		if (pk && mem_point_total(&p) > best) {
			best = mem_point_total(&p);
			pk->at = i;
			pk->base = base;
		}
		if (fn && (rc = fn(arg, &p)))
			return rc;
	}
	if (pk)
		pk->n = i;
	return 0;
}

static int replay(const void *src, mem_point_fn fn, void *arg)
{
	return replay_dev(src, fn, arg, NULL);
}

/* The allocations of tr's records alive after record at (bit per allocation) */
static void alive_after(const struct dtrace *tr, size_t at, uint8_t *bits)
{
	struct cursor c = { tr->rec, tr->first_t, 0 };
	int64_t x;
	int action;

	for (size_t i = 0; i <= at && i < tr->nents; i++) {
		next_rec(&c, &action, &x);
		if (action == A_ALLOC)
			bits[x / 8] |= (uint8_t)(1u << (x % 8));
		else if (action == A_FREE || action == A_FREE_DONE)
			bits[x / 8] &= (uint8_t)~(1u << (x % 8));
	}
}

static int one_device(struct snap_result *r, struct snap_reader *rd, const struct pk_obj *segments,
		      const struct dev *d, struct snap_stats *st, struct tp_errbuf *err)
{
	struct snap_dev *v = &r->dev[r->nseries];
	struct dtrace *tr = d->tr && !d->copy ? d->tr : &v->own;
	struct mem_group *g = tp_calloc(MEM_MAX_GROUPS + 2, sizeof(*g));
	struct mem_series *s = &r->series[r->nseries];
	int64_t base, reserved, x;
	struct cursor c;
	struct peak pk = { 0 };
	size_t ng = 0, ntrace, i;
	uint8_t *alive = NULL;
	int rc = TP_ERR_NOMEM, action;

	if (!g || (!d->tr && mem_amap_init(&tr->m, 64)) || (d->copy && trace_copy(tr, d->tr)) ||
	    al_grow(tr, tr->nal + d->nblocks + 1))
		goto out;
	st->entries += tr->seen;
	st->allocs += tr->allocs;
	st->frees_completed += tr->frees_completed;
	base = tr->base;
	ntrace = tr->nal;

	/* reserved at dump time, counted back to the start */
	reserved = d->reserved_end;
	c = (struct cursor){ tr->rec, tr->first_t, 0 };
	for (i = 0; i < tr->nents; i++) {
		next_rec(&c, &action, &x);
		if (action == A_SEG_ALLOC || action == A_SEG_FREE)
			reserved = action == A_SEG_ALLOC ? tp_sat_sub(reserved, x) : tp_sat_add(reserved, x);
	}
	/* blocks alive at dump time that no alloc here made: from before recording */
	for (i = 0; segments && i < segments->n; i++) {
		const struct pk_obj *sg = segments->u.items[i], *blocks = pk_get(sg, "blocks");
		int64_t dev = 0, addr, size;
		int32_t *slot;
		pk_int(pk_get(sg, "device"), &dev);
		if (dev != d->id || !blocks || blocks->type != PK_LIST)
			continue;
		for (uint32_t b = 0; b < blocks->n; b++) {
			const struct pk_obj *bl = blocks->u.items[b];
			uint32_t fs;
			if (!is_live_block(bl) || !pk_int(pk_get(bl, "address"), &addr) ||
			    !pk_int(pk_get(bl, "size"), &size) || size < 0)
				continue;
			if (!(slot = mem_amap_put(&tr->m, addr)) || (fs = frames_of(rd, pk_get(bl, "frames"))) == UINT32_MAX)
				goto out;
			if (*slot >= 0)
				continue;
			if (fs) {
				*slot = (int32_t)tr->nal;
				tr->asize[tr->nal] = size;
				tr->afa[tr->nal] = fs;
				tr->acat[tr->nal++] = 0;
			} else {
				*slot = -3;	/* the baseline */
				base = tp_sat_add(base, size);
			}
		}
	}
	/* every category decided, now that any_frames is known; what was alive before recording counted */
	v->tr = tr;
	v->base0 = base;
	v->reserved0 = reserved;
	for (i = 0; i < tr->nal; i++) {
		uint8_t k = tr->acat[i];
		int cat = !(k & CAT_DECIDED) ? categorize(rd, tr->afa[i], 0, 0, rd->any_frames, NULL)
					     : rd->any_frames ? k >> 3 & 7 : k & 7;
		tr->acat[i] = (uint8_t)cat;
		if (i >= ntrace)
			v->live0[cat] = tp_sat_add(v->live0[cat], tr->asize[i]);
	}
	s->baseline = base;
	replay_dev(v, NULL, NULL, &pk);

	/* what was alive at the peak, by category and the frame that made it */
	if (!(alive = tp_calloc(ntrace / 8 + 1, 1)))
		goto out;
	alive_after(tr, pk.at, alive);
	for (i = 0; i < tr->nal; i++) {
		char buf[256];
		int is_new;
		if (i < ntrace && !(alive[i / 8] & (1u << (i % 8))))
			continue;
		struct mem_group *y = mem_group_add(g, &ng, tr->acat[i], op_name(rd, tr->afa[i], buf, sizeof(buf)),
						    &is_new);
		if (!y)
			continue;
		if (is_new && y->op && !(y->op = keep_name(r, y->op)))
			goto out;
		y->bytes = tp_sat_add(y->bytes, tr->asize[i]);
		y->count++;
	}
	if (pk.base > 0 && ng < MEM_MAX_GROUPS + 2)
		g[ng++] = (struct mem_group){ .cat = CAT_PARAMETER, .bytes = pk.base, .count = -1 };
	mem_groups_sort(g, ng);
	if (segments && dump_layout(r, rd, segments, d, tr, s))
		goto out;

	snprintf(s->device, sizeof(s->device), "cuda:%d", d->id);
	s->source = "snapshot";
	s->pts = NULL;
	s->n = pk.n;
	s->replay = replay;
	s->src = v;
	s->groups = r->groups[r->nseries] = g;
	s->ngroups = ng;
	r->nseries++;
	g = NULL;
	rc = TP_OK;
out:
	tp_free(alive);
	tp_free(g);
	return rc == TP_ERR_NOMEM ? tp_fail(err, rc, NULL, "out of memory") : rc;
}

int snap_timeline(struct snap_reader *rd, const struct pk_obj *root, struct snap_result **out,
		  const struct mem_series **series, size_t *nseries, struct snap_stats *st, struct tp_errbuf *err)
{
	const struct pk_obj *segments, *traces = NULL;
	struct dev devs[MAX_DEVICES];
	size_t ndev = 0, i, k;
	uint64_t entries = rd->entries;	/* trace entries and blocks, each use of a list counted */
	int rc;
	struct snap_result *r;

	memset(st, 0, sizeof(*st));
	if (root->type == PK_LIST) {
		segments = root;	/* a bare list: segments only, as memory_viz reads it */
	} else {
		segments = pk_get(root, "segments");
		traces = pk_get(root, "device_traces");
	}
	if (!segments || segments->type != PK_LIST)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot",
			       "a memory snapshot is a dict with a 'segments' list (torch.cuda.memory._snapshot())");
	if (traces && traces->type != PK_LIST)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "'device_traces' is not a list");

	/* the devices: those with trace entries, then those with segments */
	for (i = 0; traces && i < traces->n; i++) {
		const struct pk_obj *t = traces->u.items[i];
		struct dtrace *d;
		if (t->type != PK_LIST)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "device_traces[%zu] is not a list", i);
		/* what the hook did not take: dicts without an action before the first with one */
		for (k = 0; k < t->n; k++) {
			const struct pk_obj *e = t->u.items[k];
			if (e->type != PK_DICT)
				return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "device_traces[%zu][%zu] is not a dict",
					       i, k);
			rd->any_frames |= has_frames(pk_get(e, "frames"));
		}
		d = trace_of(rd, t);
		if (!t->n && !(d && d->seen))
			continue;
		if (ndev == MAX_DEVICES)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "more than %d devices", MAX_DEVICES);
		devs[ndev++] = (struct dev){ .id = (int)i, .tr = d };
		if (d)
			d->used++;
		st->entries += t->n;
		/* the entries the hook took are counted once; a list used again counts again */
		if ((entries += t->n + (d && d->used > 1 ? d->tree : 0)) > rd->max_entries)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
				       "the devices' trace entries pass the cap of %llu values (a list used again "
				       "counts the values its entries hold)", (unsigned long long)rd->max_entries);
	}
	for (i = 0; i < segments->n; i++) {
		const struct pk_obj *sg = segments->u.items[i], *blocks = pk_get(sg, "blocks");
		int64_t dev = 0, total = 0;
		if (sg->type != PK_DICT)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "segments[%zu] is not a dict", i);
		pk_int(pk_get(sg, "device"), &dev);
		if (!pk_int(pk_get(sg, "total_size"), &total) || total < 0 || dev < 0 || dev >= 65536)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot",
				       "segments[%zu] lacks a valid device and total_size", i);
		for (k = 0; k < ndev && devs[k].id != dev; k++)
			;
		if (k == ndev) {
			struct dtrace *d = traces && (uint64_t)dev < traces->n ? trace_of(rd, traces->u.items[dev]) : NULL;
			if (ndev == MAX_DEVICES)
				return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "more than %d devices", MAX_DEVICES);
			devs[ndev++] = (struct dev){ .id = (int)dev, .tr = d };
			if (d)
				d->used++;
			if (d && d->used > 1 && (entries += d->tree) > rd->max_entries)
				return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
					       "the devices' trace entries pass the cap of %llu values (a list used again "
					       "counts the values its entries hold)", (unsigned long long)rd->max_entries);
		}
		devs[k].reserved_end = tp_sat_add(devs[k].reserved_end, total);
		st->reserved_end = tp_sat_add(st->reserved_end, total);
		if (blocks && blocks->type == PK_LIST && (entries += blocks->n) > rd->max_entries)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
				       "the segments' blocks pass the cap of %llu values (a list counts each time "
				       "it is used)", (unsigned long long)rd->max_entries);
		for (uint32_t b = 0; blocks && blocks->type == PK_LIST && b < blocks->n; b++)
			devs[k].nblocks += is_live_block(blocks->u.items[b]);
	}
	if (!ndev)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "the snapshot has no trace entries and no segments");
	for (k = 0; k < ndev; k++)
		devs[k].copy = devs[k].tr && devs[k].tr->used > 1;

	if (!(r = tp_calloc(1, sizeof(*r))) || !(r->series = tp_calloc(ndev, sizeof(*r->series))) ||
	    !(r->dev = tp_calloc(r->ndev = ndev, sizeof(*r->dev))) || !(r->groups = tp_calloc(ndev, sizeof(*r->groups))) ||
	    !(r->segs = tp_calloc(ndev, sizeof(*r->segs))) || !(r->blocks = tp_calloc(ndev, sizeof(*r->blocks)))) {
		snap_result_free(r);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	for (i = 0; i < ndev; i++)
		if ((rc = one_device(r, rd, segments, &devs[i], st, err))) {
			snap_result_free(r);
			return rc;
		}
	*out = r;
	*series = r->series;
	*nseries = r->nseries;
	return TP_OK;
}
