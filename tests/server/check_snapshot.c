/*
 * check_snapshot.c: the pickle reader (server/ingest/pickle.c) and memory
 * timelines from snapshots (server/ingest/snapshot.c): the real snapshot
 * fixtures against figures computed from them with Python's pickle, a
 * protocol 2 pickle as torch's C++ pickler writes, one synthetic snapshot per
 * category rule, and hostile pickles.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/memory.h"
#include "ingest/snapshot.h"
#include "ingest/pickle.h"
#include "suites.h"
#include "testutil.h"

static const struct pk_limits lim = { .max_objects = 1u << 24, .max_string = 1u << 20, .max_marks = 64 };

/*
 * Feed in pieces of `piece` bytes; the parser is left in *out for the root,
 * with a snapshot reader attached in *rd unless rd is NULL.
 */
static int feed(const void *data, size_t len, size_t piece, const struct pk_limits *l, struct pickle_parser **out,
		struct snap_reader **rd, const struct pk_obj **root, struct tp_errbuf *err)
{
	struct pickle_parser *p = pickle_parser_new(l);
	const uint8_t *b = data;
	int rc = TP_OK;

	ck_assert_ptr_nonnull(p);
	if (rd)
		ck_assert_ptr_nonnull(*rd = snap_reader_new(p, l->max_objects));
	for (size_t i = 0; i < len && !rc; i += piece)
		rc = pickle_parser_feed(p, b + i, len - i < piece ? len - i : piece, err);
	if (!rc)
		rc = pickle_parser_finish(p, root, err);
	*out = p;
	return rc;
}

static int64_t total(const struct mem_point *p)
{
	return mem_point_total(p);
}

/* Every point's categories sum to its allocated bytes by construction; check none is negative. */
static void check_points(const struct mem_series *s)
{
	for (size_t i = 0; i < s->n; i++)
		for (int c = 0; c < MEM_NCAT; c++)
			ck_assert_msg(s->pts[i].cat[c] >= 0, "point %zu category %s: %lld", i, mem_cat_names[c],
				      (long long)s->pts[i].cat[c]);
}

/* A snapshot read and turned into timelines, both expected to succeed. */
struct snap {
	struct pickle_parser *p;
	struct snap_reader *rd;
	struct snap_result *r;
	const struct mem_series *s;	/* copies of r's, their points held */
	size_t n;
	struct snap_stats st;
};

struct held {
	struct mem_point *pts;
	size_t n;
};

static int hold(void *arg, const struct mem_point *p)
{
	struct held *h = arg;

	h->pts[h->n++] = *p;
	return 0;
}

/* The series in x->s, replayed into points held; each replay gives the same points. */
static void hold_points(struct snap *x)
{
	struct mem_series *copy = calloc(x->n + 1, sizeof(*copy));

	ck_assert_ptr_nonnull(copy);
	for (size_t i = 0; i < x->n; i++) {
		struct held h = { calloc(x->s[i].n + 1, sizeof(*h.pts)), 0 }, again = h;
		copy[i] = x->s[i];
		ck_assert_ptr_null(x->s[i].pts);
		ck_assert_ptr_nonnull(h.pts);
		ck_assert_int_eq(mem_series_each(&x->s[i], hold, &h), 0);
		ck_assert_uint_eq(h.n, x->s[i].n);
		again.pts = calloc(h.n + 1, sizeof(*again.pts));
		again.n = 0;
		ck_assert_int_eq(mem_series_each(&x->s[i], hold, &again), 0);
		ck_assert_int_eq(memcmp(h.pts, again.pts, h.n * sizeof(*h.pts)), 0);
		free(again.pts);
		copy[i].pts = h.pts;
	}
	x->s = copy;
}

static void free_points(struct snap *x)
{
	for (size_t i = 0; i < x->n; i++)
		free((void *)x->s[i].pts);
	free((void *)x->s);
}

static void snap_read(const void *data, size_t len, size_t piece, struct snap *x)
{
	const struct pk_obj *root;
	struct tp_errbuf err = { 0 };

	ck_assert_msg(feed(data, len, piece, &lim, &x->p, &x->rd, &root, &err) == 0, "%s", err.msg);
	ck_assert_msg(snap_timeline(x->rd, root, &x->r, &x->s, &x->n, &x->st, &err) == 0, "%s", err.msg);
	hold_points(x);
}

static void snap_done(struct snap *x)
{
	free_points(x);
	snap_result_free(x->r);
	snap_reader_free(x->rd);
	pickle_parser_free(x->p);
}

/* ---- the real snapshots ---- */

START_TEST(test_cs336_fixture)
{
	/* figures from Python's pickle over the same file (shared/fixtures/README.md, formats.md 3.2) */
	static const size_t pieces[] = { 1, 13, 65536, 1 << 22 };
	size_t len;
	char *path = tu_fixture("memory/cs336_memory_snapshot.pickle");
	uint8_t *data = tu_read_file(path, &len);
	struct snap x;
	const struct mem_series *s;
	int64_t peak = 0;

	ck_assert_ptr_nonnull(data);
	snap_read(data, len, pieces[_i], &x);
	s = x.s;
	ck_assert_uint_eq(x.n, 1);
	ck_assert_str_eq(s->device, "cuda:0");
	ck_assert_str_eq(s->source, "snapshot");
	ck_assert_uint_eq(x.st.entries, 5163);
	ck_assert_uint_eq(x.st.allocs, 1721);
	ck_assert_uint_eq(x.st.frees_completed, 1721);
	ck_assert_int_eq(x.st.reserved_end, 14180941824LL);
	/* one point per alloc and free_requested */
	ck_assert_uint_eq(s->n, 3442);
	ck_assert_int_eq(s->pts[s->n - 1].reserved, 14180941824LL);
	/* before recording: 327,680,004 bytes freed without an alloc plus the blocks alive at dump time
	 * that no alloc made; allocated goes back to it at the end */
	ck_assert_int_eq(s->baseline, 1377753092LL);
	ck_assert_int_eq(total(&s->pts[s->n - 1]), 1377753092LL);
	for (size_t i = 0; i < s->n; i++)
		if (total(&s->pts[i]) > peak)
			peak = total(&s->pts[i]);
	ck_assert_int_eq(peak, 13927831556LL);
	check_points(s);
	/* at the peak (the end of forward) activations dominate, and a user frame names them */
	ck_assert_int_gt(s->ngroups, 1);
	ck_assert_int_eq(s->groups[0].cat, CAT_ACTIVATION);
	ck_assert_ptr_nonnull(s->groups[0].op);
	ck_assert_ptr_nonnull(strstr(s->groups[0].op, "model.py:"));
	/* the segments at dump time (Python: 216 segments, 14180941824 bytes; 229 blocks alive of 455,
	 * 1377753600 bytes; the live ones' categories add up to the end of the timeline but for the
	 * allocator's rounding: 508 bytes) */
	{
		int64_t reserved = 0, alive = 0, bycat[MEM_NCAT] = { 0 };
		size_t nalive = 0, nblocks = 0;
		ck_assert_uint_eq(s->nsegs, 216);
		for (size_t i = 0; i < s->nsegs; i++) {
			const struct mem_segment *g = &s->segs[i];
			int64_t off = 0;
			if (i)
				ck_assert_int_gt(g->address, s->segs[i - 1].address);
			reserved += g->total_size;
			for (size_t k = 0; k < g->nblocks; k++, nblocks++) {
				const struct mem_block *b = &g->blocks[k];
				ck_assert_int_eq(b->offset, off);	/* the blocks tile the segment */
				off += b->size;
				ck_assert_int_eq(b->cat >= 0, b->state != MEM_BLOCK_INACTIVE);
				if (b->cat >= 0) {
					nalive++;
					alive += b->size;
					bycat[b->cat] += b->size;
				}
			}
			ck_assert_int_eq(off, g->total_size);
		}
		ck_assert_int_eq(reserved, 14180941824LL);
		ck_assert_uint_eq(nblocks, 455);
		ck_assert_uint_eq(nalive, 229);
		ck_assert_int_eq(alive, 1377753600LL);
		for (int c = 0; c < MEM_NCAT; c++)
			ck_assert_int_le(llabs(bycat[c] - s->pts[s->n - 1].cat[c]), 512);
	}
	snap_done(&x);
	free(data);
	free(path);
}
END_TEST

/* The H200 training run's snapshot (tests/fixtures/gpu/train): every active block has a category from
 * its own frames and the rule that gave it. Python over the pickle: 588,812,800 bytes in 166 active
 * blocks; 303,038,464 allocated under a module's forward (the vocabulary head's 256 MiB logits among
 * them), 168,058,880 under torch/optim (Adam's _init_group), 84,029,440 under Module.to's _apply,
 * 33,554,432 in one block without frames, 131,584 in 3 blocks whose frames name none of these (the
 * loop's torch.randint and cross_entropy). */
START_TEST(test_train_snapshot_categories)
{
	size_t len;
	char *path = tu_source_path("tests/fixtures/gpu/train/train.snapshot.pickle");
	uint8_t *data = tu_read_file(path, &len);
	int64_t alive = 0, bycat[MEM_NCAT] = { 0 };
	size_t nalive = 0, nlogits = 0;
	struct snap x;

	ck_assert_ptr_nonnull(data);
	snap_read(data, len, len, &x);
	ck_assert_uint_eq(x.n, 1);
	for (size_t i = 0; i < x.s->nsegs; i++)
		for (size_t k = 0; k < x.s->segs[i].nblocks; k++) {
			const struct mem_block *b = &x.s->segs[i].blocks[k];
			if (b->cat < 0) {
				ck_assert_ptr_null(b->rule);
				continue;
			}
			ck_assert_ptr_nonnull(b->rule);
			/* unknown only where no rule decides */
			ck_assert_int_eq(b->cat == CAT_UNKNOWN, !strcmp(b->rule, "no_phase"));
			nalive++;
			alive += b->size;
			bycat[b->cat] += b->size;
			if (b->size == 268435456) {	/* the logits: made in linear.py's forward, alive at the dump */
				nlogits++;
				ck_assert_int_eq(b->cat, CAT_ACTIVATION);
				ck_assert_str_eq(b->rule, "forward_alive");
				ck_assert_ptr_nonnull(b->op);
				ck_assert_ptr_nonnull(strstr(b->op, "record.py:68"));
			}
		}
	ck_assert_uint_eq(nalive, 166);
	ck_assert_uint_eq(nlogits, 1);
	ck_assert_int_eq(alive, 588812800LL);
	ck_assert_int_eq(bycat[CAT_ACTIVATION], 303038464LL);
	ck_assert_int_eq(bycat[CAT_OPTIMIZER_STATE], 168058880LL);
	ck_assert_int_eq(bycat[CAT_UNKNOWN], 131584);
	/* the frameless block is a gradient (the autograd engine's thread) or the baseline (parameter) */
	ck_assert_int_eq(bycat[CAT_PARAMETER] + bycat[CAT_GRADIENT], 84029440LL + 33554432LL);
	ck_assert_int_ge(bycat[CAT_PARAMETER], 84029440LL);
	/* the same rules over its trace entries (device_traces): the timeline ends in the blocks' state
	 * but for the allocator's rounding of small blocks (508 bytes), and over its 26,647 points
	 * unknown is 0.34% of the bytes */
	{
		const struct mem_point *end = &x.s->pts[x.s->n - 1];
		double unk = 0, all = 0;
		for (int c = 0; c < MEM_NCAT; c++)
			ck_assert_int_le(llabs(end->cat[c] - bycat[c]), 512);
		for (size_t i = 0; i < x.s->n; i++) {
			unk += (double)x.s->pts[i].cat[CAT_UNKNOWN];
			all += (double)total(&x.s->pts[i]);
		}
		ck_assert_double_lt(unk / all, 0.01);
	}
	snap_done(&x);
	free(data);
	free(path);
}
END_TEST

START_TEST(test_state_only_fixture)
{
	size_t len;
	char *path = tu_fixture("memory/docubox_state_only_snapshot.pickle");
	uint8_t *data = tu_read_file(path, &len);
	struct snap x;

	snap_read(data, len, len, &x);
	ck_assert_uint_eq(x.n, 1);
	ck_assert_uint_eq(x.st.entries, 0);
	/* one point: the 105 live blocks, 12 segments reserved */
	ck_assert_uint_eq(x.s->n, 1);
	ck_assert_int_eq(total(&x.s->pts[0]), 90861056);
	ck_assert_int_eq(x.s->pts[0].reserved, 109051904);
	ck_assert_int_eq(x.s->pts[0].cat[CAT_PARAMETER], 90861056);	/* no frames: pre-existing */
	ck_assert_uint_eq(x.s->ngroups, 1);
	ck_assert_int_eq(x.s->groups[0].bytes, 90861056);
	/* its 12 segments (9 small, 3 large), 116 blocks: 105 alive (all parameter: no frames), 11 free */
	{
		size_t small = 0, alive = 0, blocks = 0;
		int64_t bytes = 0;
		ck_assert_uint_eq(x.s->nsegs, 12);
		for (size_t i = 0; i < x.s->nsegs; i++) {
			small += !strcmp(x.s->segs[i].type, "small");
			for (size_t k = 0; k < x.s->segs[i].nblocks; k++, blocks++)
				if (x.s->segs[i].blocks[k].cat >= 0) {
					ck_assert_int_eq(x.s->segs[i].blocks[k].cat, CAT_PARAMETER);
					ck_assert_ptr_null(x.s->segs[i].blocks[k].op);
					alive++;
					bytes += x.s->segs[i].blocks[k].size;
				}
		}
		ck_assert_uint_eq(small, 9);
		ck_assert_uint_eq(blocks, 116);
		ck_assert_uint_eq(alive, 105);
		ck_assert_int_eq(bytes, 90861056);
	}
	snap_done(&x);
	free(data);
	free(path);
}
END_TEST

/* ---- protocol 2, as torch::jit::Pickler writes: BINPUT, BINUNICODE, TUPLE2, LONG1 ---- */

/* pickle.dumps(obj, protocol=2) of a one-device snapshot; see the test for obj */
static const char p2[] =
	"\x80\x02\x7d\x71\x00\x28\x58\x08\x00\x00\x00\x73\x65\x67\x6d\x65\x6e\x74\x73\x71\x01\x5d\x71\x02"
	"\x7d\x71\x03\x28\x58\x06\x00\x00\x00\x64\x65\x76\x69\x63\x65\x71\x04\x4b\x00\x58\x07\x00\x00\x00"
	"\x61\x64\x64\x72\x65\x73\x73\x71\x05\x8a\x06\x00\x00\x00\x00\x00\x01\x58\x0a\x00\x00\x00\x74\x6f"
	"\x74\x61\x6c\x5f\x73\x69\x7a\x65\x71\x06\x4a\x00\x00\x40\x00\x58\x0f\x00\x00\x00\x73\x65\x67\x6d"
	"\x65\x6e\x74\x5f\x70\x6f\x6f\x6c\x5f\x69\x64\x71\x07\x4b\x00\x4b\x00\x86\x71\x08\x58\x0d\x00\x00"
	"\x00\x69\x73\x5f\x65\x78\x70\x61\x6e\x64\x61\x62\x6c\x65\x71\x09\x89\x58\x06\x00\x00\x00\x62\x6c"
	"\x6f\x63\x6b\x73\x71\x0a\x5d\x71\x0b\x28\x7d\x71\x0c\x28\x68\x05\x8a\x06\x00\x00\x00\x00\x00\x01"
	"\x58\x04\x00\x00\x00\x73\x69\x7a\x65\x71\x0d\x4a\x00\x00\x10\x00\x58\x05\x00\x00\x00\x73\x74\x61"
	"\x74\x65\x71\x0e\x58\x10\x00\x00\x00\x61\x63\x74\x69\x76\x65\x5f\x61\x6c\x6c\x6f\x63\x61\x74\x65"
	"\x64\x71\x0f\x58\x06\x00\x00\x00\x66\x72\x61\x6d\x65\x73\x71\x10\x5d\x71\x11\x75\x7d\x71\x12\x28"
	"\x68\x05\x8a\x06\x00\x00\x10\x00\x00\x01\x68\x0d\x4a\x00\x00\x30\x00\x68\x0e\x58\x08\x00\x00\x00"
	"\x69\x6e\x61\x63\x74\x69\x76\x65\x71\x13\x68\x10\x5d\x71\x14\x75\x65\x75\x61\x58\x0d\x00\x00\x00"
	"\x64\x65\x76\x69\x63\x65\x5f\x74\x72\x61\x63\x65\x73\x71\x15\x5d\x71\x16\x5d\x71\x17\x28\x7d\x71"
	"\x18\x28\x58\x06\x00\x00\x00\x61\x63\x74\x69\x6f\x6e\x71\x19\x58\x05\x00\x00\x00\x61\x6c\x6c\x6f"
	"\x63\x71\x1a\x58\x04\x00\x00\x00\x61\x64\x64\x72\x71\x1b\x8a\x06\x00\x00\x10\x00\x00\x01\x68\x0d"
	"\x4d\x00\x02\x58\x06\x00\x00\x00\x73\x74\x72\x65\x61\x6d\x71\x1c\x4b\x00\x58\x07\x00\x00\x00\x74"
	"\x69\x6d\x65\x5f\x75\x73\x71\x1d\x8a\x07\x00\x40\x1e\x18\x24\x0a\x06\x68\x10\x5d\x71\x1e\x7d\x71"
	"\x1f\x28\x58\x04\x00\x00\x00\x6e\x61\x6d\x65\x71\x20\x58\x07\x00\x00\x00\x66\x6f\x72\x77\x61\x72"
	"\x64\x71\x21\x58\x08\x00\x00\x00\x66\x69\x6c\x65\x6e\x61\x6d\x65\x71\x22\x58\x04\x00\x00\x00\x6d"
	"\x2e\x70\x79\x71\x23\x58\x04\x00\x00\x00\x6c\x69\x6e\x65\x71\x24\x4b\x03\x75\x61\x75\x7d\x71\x25"
	"\x28\x68\x19\x58\x0e\x00\x00\x00\x66\x72\x65\x65\x5f\x72\x65\x71\x75\x65\x73\x74\x65\x64\x71\x26"
	"\x68\x1b\x8a\x06\x00\x00\x10\x00\x00\x01\x68\x0d\x4d\x00\x02\x68\x1c\x4b\x00\x68\x1d\x8a\x07\x0a"
	"\x40\x1e\x18\x24\x0a\x06\x68\x10\x5d\x71\x27\x75\x7d\x71\x28\x28\x68\x19\x58\x0e\x00\x00\x00\x66"
	"\x72\x65\x65\x5f\x63\x6f\x6d\x70\x6c\x65\x74\x65\x64\x71\x29\x68\x1b\x8a\x06\x00\x00\x10\x00\x00"
	"\x01\x68\x0d\x4d\x00\x02\x68\x1c\x4b\x00\x68\x1d\x8a\x07\x0b\x40\x1e\x18\x24\x0a\x06\x68\x10\x5d"
	"\x71\x2a\x75\x65\x61\x58\x12\x00\x00\x00\x61\x6c\x6c\x6f\x63\x61\x74\x6f\x72\x5f\x73\x65\x74\x74"
	"\x69\x6e\x67\x73\x71\x2b\x7d\x71\x2c\x28\x58\x02\x00\x00\x00\x67\x63\x71\x2d\x47\x3f\xe0\x00\x00"
	"\x00\x00\x00\x00\x58\x03\x00\x00\x00\x6e\x65\x67\x71\x2e\x4a\xfb\xff\xff\xff\x58\x03\x00\x00\x00"
	"\x62\x69\x67\x71\x2f\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x40\x75\x75\x2e";

START_TEST(test_protocol2)
{
	struct snap x;
	const struct pk_obj *root, *set, *pool;
	const struct mem_series *s;
	struct tp_errbuf err = { 0 };
	int64_t v;

	snap_read(p2, sizeof(p2) - 1, 5, &x);
	ck_assert_int_eq(pickle_parser_finish(x.p, &root, &err), 0);
	/* the values themselves */
	set = pk_get(root, "allocator_settings");
	ck_assert_ptr_nonnull(set);
	ck_assert_int_eq(pk_get(set, "gc")->type, PK_FLOAT);
	ck_assert(pk_get(set, "gc")->u.f == 0.5);
	ck_assert(pk_int(pk_get(set, "neg"), &v) && v == -5);
	ck_assert_int_eq(pk_get(set, "big")->big, 1);	/* 2**70 */
	pool = pk_get(pk_get(root, "segments")->u.items[0], "segment_pool_id");
	ck_assert_int_eq(pool->type, PK_TUPLE);
	ck_assert_uint_eq(pool->n, 2);
	ck_assert(pk_int(pk_get(pk_get(root, "segments")->u.items[0], "address"), &v) && v == 1LL << 40);
	ck_assert_ptr_null(pk_get(root, "nothing"));
	/* the timeline: 1 MiB alive before recording, 512 bytes allocated in forward and freed */
	s = x.s;
	ck_assert_uint_eq(s->n, 2);
	ck_assert_int_eq(s->baseline, 1048576);
	ck_assert_int_eq(total(&s->pts[0]), 1048576 + 512);
	ck_assert_int_eq(s->pts[0].cat[CAT_ACTIVATION], 512);
	ck_assert_int_eq(s->pts[0].t_ns, 1700000000000000000LL);
	ck_assert_int_eq(total(&s->pts[1]), 1048576);
	ck_assert_int_eq(s->pts[1].reserved, 4194304);
	snap_done(&x);
}
END_TEST

START_TEST(test_truncated)
{
	/* every proper prefix fails cleanly */
	for (size_t len = 0; len < sizeof(p2) - 1; len++) {
		struct pickle_parser *p;
		const struct pk_obj *root;
		struct tp_errbuf err = { 0 };
		ck_assert_int_eq(feed(p2, len, 3, &lim, &p, NULL, &root, &err), TP_ERR_INVALID);
		pickle_parser_free(p);
	}
}
END_TEST

START_TEST(test_object_cap)
{
	struct pk_limits small = lim;
	struct pickle_parser *p;
	const struct pk_obj *root;
	struct tp_errbuf err = { 0 };

	small.max_objects = 20;
	ck_assert_int_eq(feed(p2, sizeof(p2) - 1, 64, &small, &p, NULL, &root, &err), TP_ERR_TOOBIG);
	ck_assert_str_eq(err.code, "pickle_too_big");
	pickle_parser_free(p);
	/* values that cost no node cost a stack slot: DUP, None, True, False, a memo GET (5 MB of
	 * these reached 1.5 GB before the cap) count like the rest */
	static const struct { const char *b; size_t n; } ops[] = {
		{ "2", 1 }, { "N", 1 }, { "\x88", 1 }, { "\x89", 1 }, { "h\x00", 2 },
	};
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		uint8_t b[1024];
		size_t n, w = ops[k].n;
		memcpy(b, "\x80\x04]\x94", 4);
		n = 4;
		while (n + w < sizeof(b)) {
			memcpy(b + n, ops[k].b, w);
			n += w;
		}
		memset(&err, 0, sizeof(err));
		ck_assert_msg(feed(b, n, 64, &small, &p, NULL, &root, &err) == TP_ERR_TOOBIG, "op %zu: %s", k, err.msg);
		ck_assert_str_eq(err.code, "pickle_too_big");
		pickle_parser_free(p);
	}
}
END_TEST

/* ---- a small pickle writer (protocol 4 opcodes) for synthetic snapshots ---- */

struct pw {
	uint8_t b[16384];
	size_t n;
};

static void pw_put(struct pw *w, const void *s, size_t n)
{
	ck_assert_uint_le(w->n + n, sizeof(w->b));
	memcpy(w->b + w->n, s, n);
	w->n += n;
}

static void pw_op(struct pw *w, uint8_t op)
{
	pw_put(w, &op, 1);
}

static void pw_str(struct pw *w, const char *s, size_t n)
{
	uint8_t h[2] = { 0x8c, (uint8_t)n };	/* SHORT_BINUNICODE */
	pw_put(w, h, 2);
	pw_put(w, s, n);
}

static void pw_int(struct pw *w, int64_t v)
{
	uint8_t h[10] = { 0x8a, 8 };	/* LONG1, 8 bytes */
	for (int i = 0; i < 8; i++)
		h[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
	pw_put(w, h, 10);
}

/* frames "name@file@line|name@file@line" innermost first; "" none */
static void pw_frames(struct pw *w, const char *spec)
{
	pw_op(w, ']');
	while (*spec) {
		const char *at1 = strchr(spec, '@'), *at2 = strchr(at1 + 1, '@'), *end = strchr(spec, '|');
		if (!end)
			end = spec + strlen(spec);
		pw_op(w, '}');
		pw_op(w, '(');
		pw_str(w, "name", 4);
		pw_str(w, spec, (size_t)(at1 - spec));
		pw_str(w, "filename", 8);
		pw_str(w, at1 + 1, (size_t)(at2 - at1 - 1));
		pw_str(w, "line", 4);
		pw_int(w, atoi(at2 + 1));
		pw_op(w, 'u');
		pw_op(w, 'a');
		spec = *end ? end + 1 : end;
	}
}

struct entry {
	const char *action;
	int64_t addr, size;
	const char *frames;
};

/* {"segments": [], "device_traces": [[entries]]} */
static size_t pw_snapshot(struct pw *w, const struct entry *e, size_t n)
{
	static const uint8_t head[] = { 0x80, 4 };
	w->n = 0;
	pw_put(w, head, 2);
	pw_op(w, '}');
	pw_op(w, '(');
	pw_str(w, "segments", 8);
	pw_op(w, ']');
	pw_str(w, "device_traces", 13);
	pw_op(w, ']');
	pw_op(w, ']');
	for (size_t i = 0; i < n; i++) {
		pw_op(w, '}');
		pw_op(w, '(');
		pw_str(w, "action", 6);
		pw_str(w, e[i].action, strlen(e[i].action));
		pw_str(w, "addr", 4);
		pw_int(w, e[i].addr);
		pw_str(w, "size", 4);
		pw_int(w, e[i].size);
		pw_str(w, "time_us", 7);
		pw_int(w, 1000 + (int64_t)i);
		pw_str(w, "frames", 6);
		pw_frames(w, e[i].frames);
		pw_op(w, 'u');
		pw_op(w, 'a');
	}
	pw_op(w, 'a');
	pw_op(w, 'u');
	pw_op(w, '.');
	return w->n;
}

#define FWD "forward@/home/u/model.py@10|_call_impl@/venv/lib/python3.11/site-packages/torch/nn/modules/module.py@1790|train@/home/u/train.py@40"
#define FWD2 "forward@/home/u/model.py@12|_call_impl@/venv/lib/python3.11/site-packages/torch/nn/modules/module.py@1790|train@/home/u/train.py@40"
#define OPT "_single_tensor_adamw@/venv/site-packages/torch/optim/adamw.py@300|step@/venv/site-packages/torch/optim/adamw.py@200|train@/home/u/train.py@44"
#define OPT2 "_single_tensor_adamw@/venv/site-packages/torch/optim/adamw.py@310|step@/venv/site-packages/torch/optim/adamw.py@200|train@/home/u/train.py@44"
#define ZERO "zero_grad@C:\\venv\\Lib\\site-packages\\torch\\optim\\optimizer.py@900|train@C:\\u\\train.py@38"
#define INIT "reset_parameters@/venv/site-packages/torch/nn/modules/linear.py@110|__init__@/venv/site-packages/torch/nn/modules/linear.py@100|__init__@/home/u/model.py@5"
#define DATA "pin_memory@/venv/site-packages/torch/utils/data/_utils/pin_memory.py@60|train@/home/u/train.py@30"
#define BWD "backward@/venv/site-packages/torch/_tensor.py@600|train@/home/u/train.py@42"

/* One rule each: the first entry's allocation X (0x1000, 4096 bytes), what follows, and its category. */
static const struct {
	const char *rule;
	struct entry e[3];
	int cat;
} rules[] = {
	{ "same line: temporary", { { "alloc", 0x1000, 4096, FWD }, { "free_requested", 0x1000, 4096, FWD } }, CAT_TEMPORARY },
	{ "module init: parameter", { { "alloc", 0x1000, 4096, INIT } }, CAT_PARAMETER },
	{ "zero_grad frees: gradient", { { "alloc", 0x1000, 4096, "" }, { "alloc", 0x2000, 8, FWD },
					  { "free_requested", 0x1000, 4096, ZERO } }, CAT_GRADIENT },
	{ "optimizer, kept: state", { { "alloc", 0x1000, 4096, OPT } }, CAT_OPTIMIZER_STATE },
	{ "optimizer, freed in it: temporary", { { "alloc", 0x1000, 4096, OPT }, { "free_requested", 0x1000, 4096, OPT2 } },
	  CAT_TEMPORARY },
	{ "backward thread, kept: gradient", { { "alloc", 0x1000, 4096, "" }, { "alloc", 0x2000, 8, BWD } }, CAT_GRADIENT },
	{ "backward, freed in it: autograd detail", { { "alloc", 0x1000, 4096, "" }, { "alloc", 0x2000, 8, FWD },
						       { "free_requested", 0x1000, 4096, "" } }, CAT_AUTOGRAD_DETAIL },
	{ "data loading: input", { { "alloc", 0x1000, 4096, DATA } }, CAT_INPUT },
	{ "forward, freed in backward: activation", { { "alloc", 0x1000, 4096, FWD }, { "free_requested", 0x1000, 4096, "" } },
	  CAT_ACTIVATION },
	{ "forward, freed by a later line: activation", { { "alloc", 0x1000, 4096, FWD }, { "free_requested", 0x1000, 4096, FWD2 } },
	  CAT_ACTIVATION },
	{ "forward, alive at the end: activation", { { "alloc", 0x1000, 4096, FWD } }, CAT_ACTIVATION },
	{ "loop code, no phase: unknown", { { "alloc", 0x1000, 4096, "train@/home/u/train.py@40" } }, CAT_UNKNOWN },
};

START_TEST(test_rule)
{
	struct pw w;
	struct snap x;
	size_t ne = 0;

	while (ne < 3 && rules[_i].e[ne].action)
		ne++;
	pw_snapshot(&w, rules[_i].e, ne);
	snap_read(w.b, w.n, w.n, &x);
	ck_assert_msg(x.s->pts[0].cat[rules[_i].cat] == 4096, "%s: the allocation is not %s", rules[_i].rule,
		      mem_cat_names[rules[_i].cat]);
	ck_assert_int_eq(total(&x.s->pts[0]), 4096);
	snap_done(&x);
}
END_TEST

START_TEST(test_pre_existing_free)
{
	static const struct entry e[] = { { "free_requested", 0x5000, 100, FWD }, { "free_completed", 0x5000, 100, "" },
					  { "alloc", 0x6000, 50, FWD } };
	struct pw w;
	struct snap x;

	pw_snapshot(&w, e, 3);
	snap_read(w.b, w.n, 7, &x);
	ck_assert_int_eq(x.s->baseline, 100);
	ck_assert_uint_eq(x.s->n, 2);	/* the free_completed changes nothing */
	ck_assert_int_eq(total(&x.s->pts[0]), 0);
	ck_assert_int_eq(total(&x.s->pts[1]), 50);
	snap_done(&x);
}
END_TEST

START_TEST(test_free_size_differs)
{
	/* found by fuzz_pickle: a free that names another size than its alloc drove a category negative */
	static const struct entry e[] = { { "alloc", 0x1000, 4096, FWD }, { "free_requested", 0x1000, 999999, "" } };
	struct pw w;
	struct snap x;

	pw_snapshot(&w, e, 2);
	snap_read(w.b, w.n, w.n, &x);
	check_points(x.s);
	ck_assert_int_eq(total(&x.s->pts[1]), 0);
	snap_done(&x);
}
END_TEST

/* ---- hostile pickles ---- */

static const struct {
	const char *what;
	const char *bytes;
	size_t len;
	int rc;		/* from the reader; TP_OK: it reads, and snap_timeline refuses */
} hostile[] = {
#define H(w, b, rc) { w, b, sizeof(b) - 1, rc }
	H("GLOBAL: a class by name", "\x80\x02" "c__builtin__\neval\n(S'1'\ntR.", TP_ERR_INVALID),
	H("REDUCE", "\x80\x04N)R.", TP_ERR_INVALID),
	H("an unknown opcode", "\x80\x04\xff.", TP_ERR_INVALID),
	H("a 2**60-byte string", "\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x10", TP_ERR_TOOBIG),
	H("a 4 GiB string", "\x80\x04X\xff\xff\xff\xff", TP_ERR_TOOBIG),
	H("a negative LONG4", "\x80\x04\x8b\xff\xff\xff\xff", TP_ERR_INVALID),
	H("deep nesting", "\x80\x04((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((", TP_ERR_TOOBIG),
	H("BINGET of an empty memo", "\x80\x04h\x05.", TP_ERR_INVALID),
	H("LONG_BINGET far out", "\x80\x04]\x94j\xff\xff\xff\x7f.", TP_ERR_INVALID),
	H("BINPUT far out", "\x80\x04]q\x05.", TP_ERR_INVALID),
	H("LONG_BINPUT with nothing", "\x80\x04r\xff\xff\xff\xff", TP_ERR_INVALID),
	H("protocol 6", "\x80\x06}.", TP_ERR_INVALID),
	H("protocol 0", "(dp0\n.", TP_ERR_INVALID),
	H("no PROTO", "}.", TP_ERR_INVALID),
	H("two PROTOs", "\x80\x04\x80\x04}.", TP_ERR_INVALID),
	H("STOP with two values", "\x80\x04}}.", TP_ERR_INVALID),
	H("STOP on an empty stack", "\x80\x04.", TP_ERR_INVALID),
	H("data after STOP", "\x80\x04}.x", TP_ERR_INVALID),
	H("APPEND to a dict", "\x80\x04}K\x01" "a.", TP_ERR_INVALID),
	H("SETITEMS with an odd count", "\x80\x04}(K\x01u.", TP_ERR_INVALID),
	H("SETITEMS on a list", "\x80\x04](K\x01K\x02u.", TP_ERR_INVALID),
	H("APPENDS without a mark", "\x80\x04]K\x01" "e.", TP_ERR_INVALID),
	H("TUPLE2 across a mark", "\x80\x04K\x01(K\x02\x86.", TP_ERR_INVALID),
	H("POP on an empty stack", "\x80\x04" "0.", TP_ERR_INVALID),
	H("DUP on an empty stack", "\x80\x04" "2.", TP_ERR_INVALID),
	H("only PROTO", "\x80\x04", TP_ERR_INVALID),
	H("not a snapshot: None", "\x80\x04N.", TP_OK),
	H("not a snapshot: a dict without segments", "\x80\x04}\x8c\x01" "aK\x01s.", TP_OK),
	H("a list that holds itself", "\x80\x04]\x94h\x00" "a.", TP_OK),
	H("segments that are not dicts", "\x80\x04}\x8c\x08segments](K\x01" "es.", TP_OK),
	H("a trace entry that is not a dict", "\x80\x04}(\x8c\x08segments]\x8c\x0d" "device_traces]]K\x01" "aau.", TP_OK),
	/* the entries are read as the pickle runs: a bad one stops the reader */
	H("an alloc without a size", "\x80\x04}(\x8c\x08segments]\x8c\x0d" "device_traces]]}(\x8c\x06" "action\x8c\x05" "allocuaau.",
	  TP_ERR_INVALID),
	H("a trace entry named again once read", "\x80\x04}(\x8c\x08segments]\x8c\x0d" "device_traces]]}\x94(\x8c\x06"
	  "action\x8c\x03" "oomuah\x00" "aau.", TP_ERR_INVALID),
	H("a trace list that is its own entry's frames", "\x80\x04}(\x8c\x08segments]\x8c\x0d" "device_traces](]\x94(}(\x8c\x06"
	  "action\x8c\x05" "alloc\x8c\x04" "addrK\x01\x8c\x04" "sizeK\x01\x8c\x06" "framesh\x00u}(\x8c\x06" "action\x8c\x05"
	  "allocueeu.", TP_ERR_INVALID),
	H("a frame list appended to once summarized", "\x80\x04}(\x8c\x08segments]\x8c\x0d" "device_traces]]}(\x8c\x06"
	  "action\x8c\x05" "alloc\x8c\x04" "addrK\x01\x8c\x04" "sizeK\x01\x8c\x06" "frames]\x94}\x94" "aua" "h\x00h\x01" "a"
	  "aau.", TP_ERR_INVALID),
	H("a segment with a huge device", "\x80\x04}\x8c\x08segments]}(\x8c\x06" "device\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40"
	  "\x8c\x0atotal_sizeK\x01u" "as.", TP_OK),
#undef H
};

START_TEST(test_hostile)
{
	struct pickle_parser *p;
	struct snap_reader *rd;
	const struct pk_obj *root;
	const struct mem_series *s;
	struct snap_result *r = NULL;
	struct snap_stats st;
	struct tp_errbuf err = { 0 };
	size_t n;
	int rc;

	for (size_t piece = 1; piece <= 64; piece *= 64) {
		memset(&err, 0, sizeof(err));
		rc = feed(hostile[_i].bytes, hostile[_i].len, piece, &lim, &p, &rd, &root, &err);
		ck_assert_msg(rc == hostile[_i].rc, "%s: rc %d (%s), want %d", hostile[_i].what, rc, err.msg,
			      hostile[_i].rc);
		if (!rc) {
			rc = snap_timeline(rd, root, &r, &s, &n, &st, &err);
			ck_assert_msg(rc == TP_ERR_INVALID, "%s: the timeline took it (%d)", hostile[_i].what, rc);
			ck_assert_str_eq(err.code, "bad_snapshot");
		}
		ck_assert_msg(err.msg[0], "%s: no message", hostile[_i].what);
		snap_reader_free(rd);
		pickle_parser_free(p);
	}
}
END_TEST

/* ---- entries read as the pickle runs ---- */

/* a growing buffer of pickle bytes */
struct dw {
	uint8_t *b;
	size_t n, cap;
};

static void dw_put(struct dw *w, const void *s, size_t n)
{
	if (w->n + n > w->cap) {
		w->cap = (w->n + n) * 2;
		ck_assert_ptr_nonnull(w->b = realloc(w->b, w->cap));
	}
	memcpy(w->b + w->n, s, n);
	w->n += n;
}

static void dw_s(struct dw *w, const char *s)
{
	dw_put(w, s, strlen(s));
}

/* SHORT_BINUNICODE s, memoized */
static void dw_str(struct dw *w, const char *s)
{
	uint8_t h[2] = { 0x8c, (uint8_t)strlen(s) };
	dw_put(w, h, 2);
	dw_s(w, s);
	dw_s(w, "\x94");
}

static void dw_int(struct dw *w, int64_t v)
{
	uint8_t h[10] = { 0x8a, 8 };
	for (int i = 0; i < 8; i++)
		h[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
	dw_put(w, h, 10);
}

static void dw_get(struct dw *w, uint32_t i)
{
	uint8_t h[5] = { 'j', (uint8_t)i, (uint8_t)(i >> 8), (uint8_t)(i >> 16), (uint8_t)(i >> 24) };
	dw_put(w, h, 5);
}

/*
 * A trace of n entries, alloc and free_requested of 100 bytes in turn at 64
 * addresses, each naming one frame list and its keys from the memo, as
 * Python's pickler writes them, appended 1,000 at a time: the values held
 * at once are about one batch's, however long the trace, so a cap of 40,000
 * values reads 20,000 entries (held whole, they are 340,000 values).
 */
START_TEST(test_entries_released)
{
	struct pk_limits small = lim;
	struct dw w = { 0 };
	struct snap x;
	const struct pk_obj *root;
	struct tp_errbuf err = { 0 };
	struct pk_usage u;
	const size_t n = 20000;
	const int own_list = _i;	/* 1: each entry its own frame list (memo one more each), all alike */
	/* memo: 0 root, 1 "segments", 2 its list, 3 "device_traces", 4 its list, 5 the device's list,
	 * 6 the first entry, 7 "frames", 8 the frame list, 9 the frame, 10-14 its keys and values,
	 * 15 "action", 16 "alloc", 17 "addr", 18 "size", 19 "time_us", 20 the second entry,
	 * 21 "free_requested", then one per entry */
	dw_s(&w, "\x80\x04}\x94(");
	dw_str(&w, "segments");
	dw_s(&w, "]\x94");
	dw_str(&w, "device_traces");
	dw_s(&w, "]\x94]\x94(");
	for (size_t i = 0; i < n; i++) {
		dw_s(&w, "}\x94(");
		if (i == 0) {
			dw_str(&w, "frames");
			dw_s(&w, "]\x94}\x94(");
			dw_str(&w, "name");
			dw_str(&w, "f");
			dw_str(&w, "filename");
			dw_str(&w, "/u/a.py");
			dw_str(&w, "line");
			dw_int(&w, 3);
			dw_s(&w, "ua");
			dw_str(&w, "action");
			dw_str(&w, "alloc");
		} else {
			dw_get(&w, 7);
			if (own_list) {
				dw_s(&w, "]\x94");
				dw_get(&w, 9);
				dw_s(&w, "a");
			} else {
				dw_get(&w, 8);
			}
			dw_get(&w, 15);
			if (i == 1)
				dw_str(&w, "free_requested");
			else
				dw_get(&w, i % 2 ? 21 + (uint32_t)own_list : 16);
		}
		if (i == 0) {
			dw_str(&w, "addr");
			dw_int(&w, 4096);
			dw_str(&w, "size");
			dw_int(&w, 100);
			dw_str(&w, "time_us");
		} else {
			dw_get(&w, 17);
			dw_int(&w, 4096 * (int64_t)(1 + (i / 2) % 64));
			dw_get(&w, 18);
			dw_int(&w, 100);
			dw_get(&w, 19);
		}
		dw_int(&w, 1000 + (int64_t)i);
		dw_s(&w, "u");
		if (i % 1000 == 999)
			dw_s(&w, "e(");	/* APPENDS in batches, as Python's pickler */
	}
	dw_s(&w, "eau.");
	small.max_objects = 40000;
	memset(&x, 0, sizeof(x));
	ck_assert_msg(feed(w.b, w.n, 4096, &small, &x.p, &x.rd, &root, &err) == 0, "%s", err.msg);
	/* what is held does not grow with the entries: the frame lists' summary is one (the lists are
	 * alike) and their nodes are freed with their entries; a page of the memo is freed once every
	 * entry in it is read, or made compact (2 bytes a slot) when what is left in it is taken lists */
	pickle_parser_usage(x.p, &u);
	ck_assert_uint_lt(u.nodes, 100);
	ck_assert_uint_lt(u.slots, 100);
	ck_assert_uint_le(u.memo_pages, 2);
	ck_assert_uint_le(u.memo_compact, own_list ? 2 * n / 4096 + 1 : 0);
	ck_assert_msg(snap_timeline(x.rd, root, &x.r, &x.s, &x.n, &x.st, &err) == 0, "%s", err.msg);
	hold_points(&x);
	ck_assert_uint_eq(x.n, 1);
	ck_assert_uint_eq(x.st.entries, n);
	ck_assert_uint_eq(x.st.allocs, n / 2);
	ck_assert_uint_eq(x.s->n, n);
	for (size_t i = 0; i < n; i++) {
		/* made and freed by the same line: temporaries, 100 bytes then none */
		ck_assert_int_eq(x.s->pts[i].cat[CAT_TEMPORARY], i % 2 ? 0 : 100);
		ck_assert_int_eq(x.s->pts[i].t_ns, (1000 + (int64_t)i) * 1000);
	}
	ck_assert_uint_eq(x.s->ngroups, 1);
	ck_assert_str_eq(x.s->groups[0].op, "f (a.py:3)");
	snap_done(&x);
	/* the same, held whole (no reader): over the cap */
	{
		struct pickle_parser *p;
		ck_assert_int_eq(feed(w.b, w.n, 4096, &small, &p, NULL, &root, &err), TP_ERR_TOOBIG);
		pickle_parser_free(p);
	}
	free(w.b);
}
END_TEST

/*
 * A segment with a live block, and a device trace: an entry DUP'ed, then a
 * second entry, memoized at 29, left on the stack to be appended; all three
 * and the block name one frame list. Memo: 0 root, 1 "segments", 2
 * segments, 3 the segment, 4 "device", 5 "total_size", 6 "blocks", 7 blocks,
 * 8 the block, 9 "address", 10 "size", 11 "state", 12 "active_allocated",
 * 13 "frames", 14 the frame list, 15 the frame, 16-20 its keys and values,
 * 21 "device_traces", 22 traces, 23 the device's list, 24 the first entry,
 * 25 "action", 26 "alloc", 27 "addr", 28 "time_us", 29 the second entry.
 */
static void shared_prefix(struct dw *w)
{
	dw_s(w, "\x80\x04}\x94(");
	dw_str(w, "segments");
	dw_s(w, "]\x94}\x94(");
	dw_str(w, "device");
	dw_int(w, 0);
	dw_str(w, "total_size");
	dw_int(w, 1 << 20);
	dw_str(w, "blocks");
	dw_s(w, "]\x94}\x94(");
	dw_str(w, "address");
	dw_int(w, 8192);
	dw_str(w, "size");
	dw_int(w, 512);
	dw_str(w, "state");
	dw_str(w, "active_allocated");
	dw_str(w, "frames");
	dw_s(w, "]\x94}\x94(");
	dw_str(w, "name");
	dw_str(w, "g");
	dw_str(w, "filename");
	dw_str(w, "/u/b.py");
	dw_str(w, "line");
	dw_int(w, 7);
	dw_s(w, "ua");		/* the frame into its list */
	dw_s(w, "ua");		/* the block into blocks */
	dw_s(w, "ua");		/* the segment into segments */
	dw_str(w, "device_traces");
	dw_s(w, "]\x94]\x94(}\x94(");
	dw_str(w, "action");
	dw_str(w, "alloc");
	dw_str(w, "addr");
	dw_int(w, 4096);
	dw_get(w, 10);
	dw_int(w, 100);
	dw_str(w, "time_us");
	dw_int(w, 5);
	dw_get(w, 13);
	dw_get(w, 14);
	dw_s(w, "u2");		/* DUP: the same entry twice */
	dw_s(w, "}\x94(");
	dw_get(w, 25);
	dw_get(w, 26);
	dw_get(w, 27);
	dw_int(w, 16384);
	dw_get(w, 10);
	dw_int(w, 200);
	dw_get(w, 28);
	dw_int(w, 6);
	dw_get(w, 13);
	dw_get(w, 14);
	dw_s(w, "u");
}

/*
 * Values the pickle names twice are not released under it; one named after
 * it was read and released is refused. (Under ASan a release too many is a
 * use after free.)
 */
START_TEST(test_shared_values_kept)
{
	struct dw w = { 0 };
	struct snap x;
	const struct pk_obj *root, *kept;
	struct tp_errbuf err = { 0 };
	int64_t v;

	/* the second entry read, then named again */
	shared_prefix(&w);
	dw_s(&w, "ea");
	dw_str(&w, "kept");
	dw_get(&w, 29);
	dw_s(&w, "u.");
	ck_assert_int_eq(feed(w.b, w.n, 7, &lim, &x.p, &x.rd, &root, &err), TP_ERR_INVALID);
	ck_assert_str_eq(err.code, "bad_pickle");
	ck_assert_msg(strstr(err.msg, "already read"), "%s", err.msg);
	snap_reader_free(x.rd);
	pickle_parser_free(x.p);

	/* named before it is read: kept whole for the other reference */
	w.n = 0;
	shared_prefix(&w);
	dw_s(&w, "0");		/* off the stack, */
	dw_get(&w, 29);		/* named from the memo, */
	dw_s(&w, "ea");		/* read, */
	dw_str(&w, "kept");
	dw_get(&w, 29);		/* and named again */
	dw_s(&w, "u.");
	memset(&x, 0, sizeof(x));
	ck_assert_msg(feed(w.b, w.n, 7, &lim, &x.p, &x.rd, &root, &err) == 0, "%s", err.msg);
	kept = pk_get(root, "kept");
	ck_assert_ptr_nonnull(kept);
	ck_assert_str_eq(pk_str(pk_get(kept, "action")), "alloc");
	ck_assert(pk_int(pk_get(kept, "addr"), &v));
	ck_assert_int_eq(v, 16384);
	ck_assert_msg(snap_timeline(x.rd, root, &x.r, &x.s, &x.n, &x.st, &err) == 0, "%s", err.msg);
	hold_points(&x);
	ck_assert_uint_eq(x.st.entries, 3);
	ck_assert_uint_eq(x.st.allocs, 3);
	/* the block alive at dump time that no alloc made (512), then 100, 100 again, 200; none freed:
	 * nothing tells their category */
	ck_assert_uint_eq(x.s->n, 3);
	ck_assert_int_eq(x.s->pts[0].cat[CAT_UNKNOWN], 612);
	ck_assert_int_eq(x.s->pts[2].cat[CAT_UNKNOWN], 912);
	/* the frame list, summarized when the first entry was read, still names the block */
	ck_assert_uint_eq(x.s->ngroups, 1);
	ck_assert_str_eq(x.s->groups[0].op, "g (b.py:7)");
	ck_assert_int_eq(x.s->groups[0].count, 4);
	snap_done(&x);
	free(w.b);
}
END_TEST

/* One memoized trace list named by two devices: each gets the whole timeline, the entries counted twice. */
START_TEST(test_list_for_two_devices)
{
	struct dw w = { 0 };
	struct snap x;
	const struct pk_obj *root;
	struct tp_errbuf err = { 0 };

	/* memo: 0 root, 1 "segments", 2 segments, 3 "device_traces", 4 traces, 5 the list */
	dw_s(&w, "\x80\x04}\x94(");
	dw_str(&w, "segments");
	dw_s(&w, "]\x94");
	dw_str(&w, "device_traces");
	dw_s(&w, "]\x94(]\x94(");
	for (int i = 0; i < 2; i++) {
		dw_s(&w, "}(");
		dw_s(&w, "\x8c\x06" "action");
		dw_s(&w, i ? "\x8c\x0e" "free_requested" : "\x8c\x05" "alloc");
		dw_s(&w, "\x8c\x04" "addr");
		dw_int(&w, 4096);
		dw_s(&w, "\x8c\x04" "size");
		dw_int(&w, 100);
		dw_s(&w, "\x8c\x07" "time_us");
		dw_int(&w, 10 + i);
		dw_s(&w, "u");
	}
	dw_s(&w, "e");
	dw_get(&w, 5);
	dw_s(&w, "eu.");
	memset(&x, 0, sizeof(x));
	ck_assert_msg(feed(w.b, w.n, 5, &lim, &x.p, &x.rd, &root, &err) == 0, "%s", err.msg);
	ck_assert_msg(snap_timeline(x.rd, root, &x.r, &x.s, &x.n, &x.st, &err) == 0, "%s", err.msg);
	hold_points(&x);
	ck_assert_uint_eq(x.n, 2);
	ck_assert_uint_eq(x.st.entries, 4);
	for (size_t d = 0; d < 2; d++) {
		ck_assert_uint_eq(x.s[d].n, 2);
		ck_assert_int_eq(total(&x.s[d].pts[0]), 100);
		ck_assert_int_eq(total(&x.s[d].pts[1]), 0);
	}
	ck_assert_str_eq(x.s[0].device, "cuda:0");
	ck_assert_str_eq(x.s[1].device, "cuda:1");
	snap_done(&x);
	/* counted each time it is used: its 2 entries pass a cap of 3 as the second device's */
	{
		struct pickle_parser *p = pickle_parser_new(&lim);
		struct snap_reader *rd = snap_reader_new(p, 3);
		struct snap_result *r;
		const struct mem_series *ss;
		size_t ns;
		struct snap_stats st;
		ck_assert_ptr_nonnull(rd);
		ck_assert_int_eq(pickle_parser_feed(p, w.b, w.n, &err), 0);
		ck_assert_int_eq(pickle_parser_finish(p, &root, &err), 0);
		ck_assert_int_eq(snap_timeline(rd, root, &r, &ss, &ns, &st, &err), TP_ERR_TOOBIG);
		ck_assert_str_eq(err.code, "pickle_too_big");
		snap_reader_free(rd);
		pickle_parser_free(p);
	}
	free(w.b);
}
END_TEST

/* Addresses that differ only in high bits (i << 40) spread over the table, not one run of slots. */
START_TEST(test_amap_high_bits)
{
	struct mem_amap m;
	size_t n = 20000, run = 0, longest = 0;

	ck_assert_int_eq(mem_amap_init(&m, n), 0);
	for (size_t i = 0; i < n; i++)
		*mem_amap_slot(&m, (int64_t)((uint64_t)i << 40)) = (int32_t)i;
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(*mem_amap_slot(&m, (int64_t)((uint64_t)i << 40)), (int32_t)i);
	for (size_t j = 0; j < 2 * m.cap; j++) {
		run = m.val[j & (m.cap - 1)] != -1 ? run + 1 : 0;
		if (run > longest)
			longest = run;
	}
	/* linear probing at load <= 1/2 keeps clusters short; the multiply alone made one of 20000 */
	ck_assert_msg(longest < 100, "longest cluster %zu", longest);
	mem_amap_free(&m);
}
END_TEST

static void pw_kv_int(struct pw *w, const char *key, int64_t v)
{
	pw_str(w, key, strlen(key));
	pw_int(w, v);
}

static void pw_kv_str(struct pw *w, const char *key, const char *v)
{
	pw_str(w, key, strlen(key));
	pw_str(w, v, strlen(v));
}

/* a block dict {size, state[, address][, requested_size]}; address or requested < 0: left out */
static void pw_block(struct pw *w, int64_t address, int64_t size, int64_t requested, const char *state)
{
	pw_op(w, '}');
	pw_op(w, '(');
	if (address >= 0)
		pw_kv_int(w, "address", address);
	pw_kv_int(w, "size", size);
	if (requested >= 0)
		pw_kv_int(w, "requested_size", requested);
	pw_kv_str(w, "state", state);
	pw_op(w, 'u');
	pw_op(w, 'a');
}

/*
 * Segments at dump time: by address whatever their order in the pickle; a
 * block's category from the allocation that made it (traced: its frames;
 * before recording without frames: parameter, as the timeline has it); a
 * block without an address, or with one outside its segment, follows the one
 * before it; free blocks have no category.
 */
START_TEST(test_segments_layout)
{
	struct pw w = { .n = 0 };
	static const uint8_t head[] = { 0x80, 4 };
	struct snap x;
	const struct mem_segment *g;

	pw_put(&w, head, 2);
	pw_op(&w, '}');
	pw_op(&w, '(');
	pw_str(&w, "segments", 8);
	pw_op(&w, ']');
	/* the second segment by address first */
	pw_op(&w, '}');
	pw_op(&w, '(');
	pw_kv_int(&w, "device", 0);
	pw_kv_int(&w, "address", 0x20000);
	pw_kv_int(&w, "total_size", 8192);
	pw_kv_int(&w, "stream", 0);
	pw_kv_str(&w, "segment_type", "small");
	pw_str(&w, "blocks", 6);
	pw_op(&w, ']');
	pw_block(&w, 0x20000, 1024, 1000, "active_allocated");
	pw_block(&w, -1, 512, -1, "inactive");
	pw_block(&w, 0x20000 + 1536, 2560, 2560, "active_pending_free");
	pw_block(&w, 0x7000000000LL, 4096, 0, "inactive");
	pw_op(&w, 'u');
	pw_op(&w, 'a');
	pw_op(&w, '}');
	pw_op(&w, '(');
	pw_kv_int(&w, "device", 0);
	pw_kv_int(&w, "address", 0x10000);
	pw_kv_int(&w, "total_size", 2048);
	pw_kv_int(&w, "stream", 7);
	pw_kv_str(&w, "segment_type", "bogus");
	pw_str(&w, "blocks", 6);
	pw_op(&w, ']');
	pw_block(&w, 0x10000, 2048, 2048, "active_allocated");
	pw_op(&w, 'u');
	pw_op(&w, 'a');
	/* one traced allocation, in the optimizer: the block at 0x10000 */
	pw_str(&w, "device_traces", 13);
	pw_op(&w, ']');
	pw_op(&w, ']');
	pw_op(&w, '}');
	pw_op(&w, '(');
	pw_kv_str(&w, "action", "alloc");
	pw_kv_int(&w, "addr", 0x10000);
	pw_kv_int(&w, "size", 2048);
	pw_kv_int(&w, "time_us", 1000);
	pw_str(&w, "frames", 6);
	pw_frames(&w, OPT);
	pw_op(&w, 'u');
	pw_op(&w, 'a');
	pw_op(&w, 'a');
	pw_op(&w, 'u');
	pw_op(&w, '.');

	snap_read(w.b, w.n, w.n, &x);
	ck_assert_uint_eq(x.n, 1);
	ck_assert_uint_eq(x.s->nsegs, 2);
	g = &x.s->segs[0];
	ck_assert_int_eq(g->address, 0x10000);
	ck_assert_int_eq(g->stream, 7);
	ck_assert_str_eq(g->type, "");
	ck_assert_uint_eq(g->nblocks, 1);
	ck_assert_int_eq(g->blocks[0].cat, CAT_OPTIMIZER_STATE);
	ck_assert_str_eq(g->blocks[0].op, "train (train.py:44)");
	g = &x.s->segs[1];
	ck_assert_int_eq(g->address, 0x20000);
	ck_assert_str_eq(g->type, "small");
	ck_assert_uint_eq(g->nblocks, 4);
	ck_assert_int_eq(g->blocks[0].offset, 0);
	ck_assert_int_eq(g->blocks[0].requested, 1000);
	ck_assert_int_eq(g->blocks[0].state, MEM_BLOCK_ALLOCATED);
	ck_assert_int_eq(g->blocks[0].cat, CAT_PARAMETER);
	ck_assert_ptr_null(g->blocks[0].op);
	ck_assert_int_eq(g->blocks[1].offset, 1024);
	ck_assert_int_eq(g->blocks[1].requested, 512);	/* not given: its size */
	ck_assert_int_eq(g->blocks[1].cat, -1);
	ck_assert_int_eq(g->blocks[2].offset, 1536);
	ck_assert_int_eq(g->blocks[2].state, MEM_BLOCK_PENDING_FREE);
	ck_assert_int_eq(g->blocks[2].cat, CAT_PARAMETER);
	ck_assert_int_eq(g->blocks[3].offset, 4096);
	ck_assert_int_eq(g->blocks[3].state, MEM_BLOCK_INACTIVE);
	/* the timeline's end agrees: 2048 of optimizer state, 1024 + 2560 from before recording */
	ck_assert_int_eq(x.s->pts[x.s->n - 1].cat[CAT_OPTIMIZER_STATE], 2048);
	ck_assert_int_eq(x.s->pts[x.s->n - 1].cat[CAT_PARAMETER], 3584);
	snap_done(&x);
}
END_TEST

Suite *suite_snapshot(void)
{
	Suite *s = suite_create("snapshot");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_cs336_fixture, 0, 4);
	tcase_add_test(tc, test_state_only_fixture);
	tcase_add_test(tc, test_train_snapshot_categories);
	tcase_add_test(tc, test_segments_layout);
	tcase_add_test(tc, test_protocol2);
	tcase_add_test(tc, test_truncated);
	tcase_add_test(tc, test_object_cap);
	tcase_add_test(tc, test_amap_high_bits);
	tcase_add_loop_test(tc, test_entries_released, 0, 2);
	tcase_add_test(tc, test_shared_values_kept);
	tcase_add_test(tc, test_list_for_two_devices);
	tcase_add_loop_test(tc, test_rule, 0, (int)(sizeof(rules) / sizeof(rules[0])));
	tcase_add_test(tc, test_pre_existing_free);
	tcase_add_test(tc, test_free_size_differs);
	tcase_add_loop_test(tc, test_hostile, 0, (int)(sizeof(hostile) / sizeof(hostile[0])));
	suite_add_tcase(s, tc);
	return s;
}
