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
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "memmodel.h"
#include "ingest/snapshot.h"
#include "utf8.h"

enum { A_OTHER, A_ALLOC, A_FREE, A_FREE_DONE, A_SEG_ALLOC, A_SEG_FREE };

/* What the frames of one entry say about where the program was. */
enum {
	PH_FORWARD = 1 << 0,	/* a module's forward (forward, _call_impl) */
	PH_BACKWARD = 1 << 1,	/* backward(), or no Python frame: the autograd engine's thread */
	PH_OPT = 1 << 2,	/* optimizer code (a file under an optim path, optimizer.py...) */
	PH_ZERO_GRAD = 1 << 3,	/* zero_grad */
	PH_DATA = 1 << 4,	/* data loading (torch/utils/data, pin_memory) */
	PH_INIT = 1 << 5,	/* building or moving a module (__init__, reset_parameters, _apply) */
};

struct ent {
	int64_t t, addr, size;
	const struct pk_obj *frames;
	uint8_t action;
};

struct salloc {
	int64_t size;
	int32_t ta, tf;			/* entry indexes; ta -1: before recording; tf -1: alive at the end */
	const struct pk_obj *fa, *ff;	/* frames at allocation and at free */
	int cat;
};

struct snap_result {
	struct mem_series *series;
	size_t nseries;
	struct mem_point **pts;
	struct mem_group **groups;
	struct mem_segment **segs;
	struct mem_block **blocks;
	char **names;			/* group and block op names */
	size_t nnames, capnames;
};

void snap_result_free(struct snap_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nseries; i++) {
		tp_free(r->pts[i]);
		tp_free(r->groups[i]);
		tp_free(r->segs[i]);
		tp_free(r->blocks[i]);
	}
	for (size_t i = 0; i < r->nnames; i++)
		tp_free(r->names[i]);
	tp_free(r->names);
	tp_free(r->series);
	tp_free(r->pts);
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

static unsigned phase(const struct pk_obj *frames, int any_frames)
{
	unsigned ph = 0;

	if (!has_frames(frames))
		return any_frames ? PH_BACKWARD : 0;
	for (uint32_t i = 0; i < frames->n; i++) {
		const char *name = frame_str(frames->u.items[i], "name");
		const char *file = frame_str(frames->u.items[i], "filename");
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
	}
	return ph;
}

/* the same innermost frame (function, file, line) */
static int same_line(const struct pk_obj *a, const struct pk_obj *b)
{
	int64_t la, lb;

	if (!has_frames(a) || !has_frames(b))
		return 0;
	a = a->u.items[0];
	b = b->u.items[0];
	return pk_int(pk_get(a, "line"), &la) && pk_int(pk_get(b, "line"), &lb) && la == lb &&
	       !strcmp(frame_str(a, "name"), frame_str(b, "name")) &&
	       !strcmp(frame_str(a, "filename"), frame_str(b, "filename"));
}

/*
 * The rules, in order; the first that matches wins. "Freed" means freed
 * while recording; the phases are those of the frames at the allocation (a)
 * and at the free (f).
 */
static int categorize(const struct salloc *x, int any_frames)
{
	unsigned a = phase(x->fa, any_frames), f = x->tf >= 0 ? phase(x->ff, any_frames) : 0;
	int freed = x->tf >= 0;

	/* 1. made and released by the same line of Python: a temporary of that statement
	 *    (PyTorch: TEMPORARY, allocated and freed inside one operator) */
	if (freed && same_line(x->fa, x->ff))
		return CAT_TEMPORARY;
	/* 2. made while a module is built or moved (__init__, reset_parameters, .to()/.cuda()
	 *    through _apply) and not in forward, backward or the optimizer: its parameters */
	if ((a & PH_INIT) && !(a & (PH_FORWARD | PH_BACKWARD | PH_OPT)))
		return CAT_PARAMETER;
	/* 3. released by zero_grad(set_to_none=True): only gradients are */
	if (freed && (f & PH_ZERO_GRAD))
		return CAT_GRADIENT;
	/* 4. made in optimizer code and kept after it: its state (exp_avg, momentum);
	 *    released inside it: the update's temporaries */
	if (a & PH_OPT)
		return freed && (f & PH_OPT) ? CAT_TEMPORARY : CAT_OPTIMIZER_STATE;
	/* 5. made in backward and alive after it: a gradient; released inside it:
	 *    the backward's own intermediates */
	if (a & PH_BACKWARD)
		return freed && (f & PH_BACKWARD) ? CAT_AUTOGRAD_DETAIL : CAT_GRADIENT;
	/* 6. made while loading data: the batch */
	if (a & PH_DATA)
		return CAT_INPUT;
	/* 7. made in forward and released later (by backward, or by a later line of
	 *    forward): an activation */
	if ((a & PH_FORWARD) && freed)
		return CAT_ACTIVATION;
	/* 8. anything else, or made in forward and alive at the end: nothing tells */
	return CAT_UNKNOWN;
}

/* installed code (torch, einops...) rather than the user's own */
static int library_file(const char *file)
{
	return path_has(file, "site-packages/") || path_has(file, "dist-packages/") || path_has(file, "/torch/") ||
	       path_has(file, "/lib/python");
}

/* "function (file:line)" of the innermost frame of the user's own code, else the innermost; NULL: no frames */
static const char *op_name(const struct pk_obj *frames, char *buf, size_t size)
{
	const struct pk_obj *f;
	const char *file, *base;
	int64_t line = 0;

	if (!has_frames(frames))
		return NULL;
	f = frames->u.items[0];
	for (uint32_t i = 0; i < frames->n; i++)
		if (!library_file(frame_str(frames->u.items[i], "filename"))) {
			f = frames->u.items[i];
			break;
		}
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

/* device_traces[dev] into ents (n of them) */
static int read_entries(const struct pk_obj *list, int dev, struct ent *ents, size_t *n, struct snap_stats *st,
			struct tp_errbuf *err)
{
	*n = 0;
	if (!list)
		return TP_OK;
	if (list->type != PK_LIST)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "device_traces[%d] is not a list", dev);
	for (uint32_t i = 0; i < list->n; i++) {
		const struct pk_obj *e = list->u.items[i];
		struct ent *x = &ents[*n];
		int64_t us;
		if (e->type != PK_DICT)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "device_traces[%d][%u] is not a dict", dev, i);
		x->action = (uint8_t)action_of(pk_str(pk_get(e, "action")));
		st->entries++;
		if (x->action == A_OTHER)
			continue;
		if (!pk_int(pk_get(e, "addr"), &x->addr) || !pk_int(pk_get(e, "size"), &x->size) || x->size < 0)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot",
				       "device_traces[%d][%u]: a '%s' entry without an integer addr and size", dev, i,
				       pk_str(pk_get(e, "action")));
		/* no time_us in older snapshots: the entry's place stands for its time */
		x->t = pk_int(pk_get(e, "time_us"), &us) ? us_to_ns(us) : (int64_t)i * 1000;
		if (*n && x->t < ents[*n - 1].t)
			x->t = ents[*n - 1].t;	/* TSC-converted times may step back a little */
		x->frames = pk_get(e, "frames");
		st->allocs += x->action == A_ALLOC;
		st->frees_completed += x->action == A_FREE_DONE;
		(*n)++;
	}
	return TP_OK;
}

struct dev {
	int id;
	const struct pk_obj *trace;	/* device_traces[id], or NULL */
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
static int dump_layout(struct snap_result *r, const struct pk_obj *segments, const struct dev *d,
		       struct mem_amap *m, const struct salloc *al, struct mem_series *s)
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
				int32_t slot = *mem_amap_slot(m, addr);
				y->cat = slot >= 0 ? al[slot].cat : CAT_PARAMETER;
				const char *op = slot >= 0 ? op_name(al[slot].fa, buf, sizeof(buf)) : NULL;
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

static int one_device(struct snap_result *r, const struct pk_obj *segments, const struct dev *d, int any_frames,
		      struct snap_stats *st, struct tp_errbuf *err)
{
	size_t nent_max = d->trace && d->trace->type == PK_LIST ? d->trace->n : 0, nent, nal = 0, npts = 0, i;
	struct ent *ents = tp_calloc(nent_max + 1, sizeof(*ents));
	int32_t *aidx = tp_malloc((nent_max + 1) * sizeof(*aidx));
	struct salloc *al = tp_calloc(nent_max + d->nblocks + 1, sizeof(*al));
	struct mem_point *pts = tp_calloc(nent_max + 1, sizeof(*pts));
	struct mem_group *g = tp_calloc(MEM_MAX_GROUPS + 2, sizeof(*g));
	struct mem_series *s = &r->series[r->nseries];
	struct mem_amap m = { 0 };
	int64_t live[MEM_NCAT] = { 0 }, base = 0, reserved, best = INT64_MIN, base_at_peak = 0;
	size_t peak = 0, ng = 0;
	int rc = TP_ERR_NOMEM;

	if (!ents || !aidx || !al || !pts || !g || mem_amap_init(&m, nent_max + d->nblocks))
		goto out;
	if ((rc = read_entries(d->trace, d->id, ents, &nent, st, err)))
		goto out;
	rc = TP_ERR_NOMEM;

	/* pair allocations and frees by address; a free of a block never allocated here is pre-existing */
	reserved = d->reserved_end;
	for (i = 0; i < nent; i++) {
		struct ent *e = &ents[i];
		int32_t *slot;
		aidx[i] = -1;
		if (e->action == A_SEG_ALLOC || e->action == A_SEG_FREE) {
			reserved = e->action == A_SEG_ALLOC ? tp_sat_sub(reserved, e->size)
							     : tp_sat_add(reserved, e->size);	/* counted back to the start */
			continue;
		}
		slot = mem_amap_slot(&m, e->addr);
		if (e->action == A_ALLOC) {
			al[nal] = (struct salloc){ .size = e->size, .ta = (int32_t)i, .tf = -1, .fa = e->frames };
			*slot = (int32_t)nal;
			aidx[i] = (int32_t)nal++;
		} else if (*slot >= 0 && (e->action == A_FREE || e->action == A_FREE_DONE)) {
			al[*slot].tf = (int32_t)i;
			al[*slot].ff = e->frames;
			aidx[i] = *slot;
			*slot = -2;
		} else if (e->action == A_FREE || *slot == -1) {
			base = tp_sat_add(base, e->size);	/* allocated before recording began */
			*slot = -2;
			e->action = A_FREE;	/* aidx -1: out of the baseline */
		} else {
			e->action = A_OTHER;	/* the completion of a free already counted */
		}
	}
	/* blocks alive at dump time that no alloc here made: from before recording */
	for (i = 0; segments && i < segments->n; i++) {
		const struct pk_obj *sg = segments->u.items[i], *blocks = pk_get(sg, "blocks");
		int64_t dev = 0, addr, size;
		pk_int(pk_get(sg, "device"), &dev);
		if (dev != d->id || !blocks || blocks->type != PK_LIST)
			continue;
		for (uint32_t b = 0; b < blocks->n; b++) {
			const struct pk_obj *bl = blocks->u.items[b];
			if (!is_live_block(bl) || !pk_int(pk_get(bl, "address"), &addr) ||
			    !pk_int(pk_get(bl, "size"), &size) || size < 0 || *mem_amap_slot(&m, addr) >= 0)
				continue;
			const struct pk_obj *fr = pk_get(bl, "frames");
			if (has_frames(fr)) {
				*mem_amap_slot(&m, addr) = (int32_t)nal;
				al[nal++] = (struct salloc){ .size = size, .ta = -1, .tf = -1, .fa = fr };
			} else {
				*mem_amap_slot(&m, addr) = -3;	/* the baseline */
				base = tp_sat_add(base, size);
			}
		}
	}
	for (i = 0; i < nal; i++) {
		al[i].cat = categorize(&al[i], any_frames);
		if (al[i].ta < 0)
			live[al[i].cat] = tp_sat_add(live[al[i].cat], al[i].size);
	}
	s->baseline = base;

	/* the timeline: a point after each entry that changed something */
	for (i = 0; i <= nent; i++) {
		struct mem_point *p;
		if (i < nent) {
			const struct ent *e = &ents[i];
			if (e->action == A_OTHER)
				continue;
			if (e->action == A_SEG_ALLOC || e->action == A_SEG_FREE)
				reserved = e->action == A_SEG_ALLOC ? tp_sat_add(reserved, e->size)
								     : tp_sat_sub(reserved, e->size);
			else if (aidx[i] >= 0)	/* a free as large as its allocation, whatever it says */
				live[al[aidx[i]].cat] = e->action == A_ALLOC
								? tp_sat_add(live[al[aidx[i]].cat], al[aidx[i]].size)
								: tp_sat_sub(live[al[aidx[i]].cat], al[aidx[i]].size);
			else
				base = tp_sat_sub(base, e->size);
		} else if (npts) {
			break;
		}
		/* the end with no change at all (a state-only snapshot): one point of what is alive */
		p = &pts[npts];
		p->t_ns = i < nent ? ents[i].t : nent ? ents[nent - 1].t : 0;
		memcpy(p->cat, live, sizeof(live));
		p->cat[CAT_PARAMETER] = tp_sat_add(p->cat[CAT_PARAMETER], base);
		p->reserved = reserved;
		if (mem_point_total(p) > best) {
			best = mem_point_total(p);
			peak = i;
			base_at_peak = base;
		}
		npts++;
	}

	/* what was alive at the peak, by category and the frame that made it */
	for (i = 0; i < nal; i++) {
		char buf[256];
		int is_new;
		if (al[i].ta > (int32_t)peak || (al[i].tf >= 0 && al[i].tf <= (int32_t)peak))
			continue;
		struct mem_group *x = mem_group_add(g, &ng, al[i].cat, op_name(al[i].fa, buf, sizeof(buf)), &is_new);
		if (!x)
			continue;
		if (is_new && x->op && !(x->op = keep_name(r, x->op)))
			goto out;
		x->bytes = tp_sat_add(x->bytes, al[i].size);
		x->count++;
	}
	if (base_at_peak > 0 && ng < MEM_MAX_GROUPS + 2)
		g[ng++] = (struct mem_group){ .cat = CAT_PARAMETER, .bytes = base_at_peak, .count = -1 };
	mem_groups_sort(g, ng);
	if (segments && dump_layout(r, segments, d, &m, al, s))
		goto out;

	snprintf(s->device, sizeof(s->device), "cuda:%d", d->id);
	s->source = "snapshot";
	s->pts = r->pts[r->nseries] = pts;
	s->n = npts;
	s->groups = r->groups[r->nseries] = g;
	s->ngroups = ng;
	r->nseries++;
	pts = NULL;
	g = NULL;
	rc = TP_OK;
out:
	tp_free(ents);
	tp_free(aidx);
	tp_free(al);
	tp_free(pts);
	tp_free(g);
	mem_amap_free(&m);
	return rc == TP_ERR_NOMEM ? tp_fail(err, rc, NULL, "out of memory") : rc;
}

#define MAX_DEVICES 64

int snap_timeline(const struct pk_obj *root, uint64_t max_entries, struct snap_result **out,
		  const struct mem_series **series, size_t *nseries, struct snap_stats *st, struct tp_errbuf *err)
{
	const struct pk_obj *segments, *traces = NULL;
	struct dev devs[MAX_DEVICES];
	size_t ndev = 0, i, k;
	uint64_t entries = 0;	/* trace entries and blocks, each use of a list counted */
	int any_frames = 0, rc;
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
		if (t->type != PK_LIST)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "device_traces[%zu] is not a list", i);
		if (!t->n)
			continue;
		if (ndev == MAX_DEVICES)
			return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "more than %d devices", MAX_DEVICES);
		devs[ndev++] = (struct dev){ .id = (int)i, .trace = t };
		if ((entries += t->n) > max_entries)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
				       "the devices' trace entries pass the cap of %llu values (a list counts each time "
				       "it is used)", (unsigned long long)max_entries);
		for (k = 0; k < t->n && !any_frames; k++)
			any_frames = has_frames(pk_get(t->u.items[k], "frames"));
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
			if (ndev == MAX_DEVICES)
				return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "more than %d devices", MAX_DEVICES);
			devs[ndev++] = (struct dev){ .id = (int)dev, .trace = traces && (uint64_t)dev < traces->n
								      ? traces->u.items[dev] : NULL };
		}
		devs[k].reserved_end = tp_sat_add(devs[k].reserved_end, total);
		st->reserved_end = tp_sat_add(st->reserved_end, total);
		if (blocks && blocks->type == PK_LIST && (entries += blocks->n) > max_entries)
			return tp_fail(err, TP_ERR_TOOBIG, "pickle_too_big",
				       "the segments' blocks pass the cap of %llu values (a list counts each time "
				       "it is used)", (unsigned long long)max_entries);
		for (uint32_t b = 0; blocks && blocks->type == PK_LIST && b < blocks->n; b++)
			devs[k].nblocks += is_live_block(blocks->u.items[b]);
	}
	if (!ndev)
		return tp_fail(err, TP_ERR_INVALID, "bad_snapshot", "the snapshot has no trace entries and no segments");

	if (!(r = tp_calloc(1, sizeof(*r))) || !(r->series = tp_calloc(ndev, sizeof(*r->series))) ||
	    !(r->pts = tp_calloc(ndev, sizeof(*r->pts))) || !(r->groups = tp_calloc(ndev, sizeof(*r->groups))) ||
	    !(r->segs = tp_calloc(ndev, sizeof(*r->segs))) || !(r->blocks = tp_calloc(ndev, sizeof(*r->blocks)))) {
		snap_result_free(r);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	for (i = 0; i < ndev; i++)
		if ((rc = one_device(r, segments, &devs[i], any_frames, st, err))) {
			snap_result_free(r);
			return rc;
		}
	*out = r;
	*series = r->series;
	*nseries = r->nseries;
	return TP_OK;
}
