/*
 * memory.h: memory timelines by category from a trace's [memory] events
 * (source "trace"). Kineto records each allocation and free with its
 * address, size and the allocator's totals, but no category: memory.c
 * infers one per allocation from its lifetime and the operators around its
 * allocation and its free (the rule table in memory.c). Pure: no SQL.
 */
#ifndef MEMORY_H
#define MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "memmodel.h"
#include "tp.h"

/* What a host span means for memory (set by analysis.c from its name and cat). */
enum {
	MS_RUNTIME = 1 << 0,	/* a CUDA runtime/driver call */
	MS_ANNOTATION = 1 << 1,	/* a user annotation, not an operator */
	MS_OPT_STEP = 1 << 2,	/* Optimizer.step#... */
	MS_ZERO_GRAD = 1 << 3,	/* Optimizer.zero_grad#... */
	MS_BACKWARD = 1 << 4,	/* autograd::engine::evaluate_function: ... */
	MS_ACCUM_GRAD = 1 << 5,	/* ...AccumulateGrad */
	MS_COPY = 1 << 6,	/* aten::to / aten::_to_copy / aten::copy_ */
	MS_DATALOADER = 1 << 7,	/* enumerate(DataLoader)#... */
};

/*
 * What was around one moment on one thread: the host spans enclosing it,
 * from the last span of the thread that starts at or before it out to the
 * top level, past those that ended before it (analysis.c finds it).
 */
struct mem_ctx {
	int32_t top;		/* the outermost operator (not an annotation) enclosing it, by its place; -1: none */
	uint32_t op_name;	/* the innermost operator or annotation: who allocated (when op) */
	uint32_t opt;		/* the Optimizer.step#... span enclosing it: 1 + its index in opt_ends; 0: none */
	uint16_t flags;		/* MS_* of every span enclosing it, or-ed */
	uint8_t backward;	/* in backward: an evaluate_function span, or the autograd thread */
	uint8_t op;
};

struct mem_event {
	int64_t ts, ev_idx, addr, bytes, total_alloc, total_res;
	union {
		uint64_t thread_key;	/* the caller's, to find thread, */
		uint32_t thread;	/* which replaces it: the thread's number; MEM_NO_SPANS | i: the i-th
					 * thread of the [memory] events that has no spans (analysis.c) */
	};
	int32_t dev_type, dev_id;
	uint32_t ord;		/* arrival order: the sort's last tie-break (ev_idx repeats across chunks) */
	uint8_t has_addr, has_totals;
};

#define MEM_NO_SPANS 0x80000000u

/* An event with its context, as the model reads them. */
struct mem_rec {
	struct mem_event ev;
	struct mem_ctx ctx;
};

/* The model's order: by device, time, Ev Idx, arrival (for runs.h). */
int mem_rec_less(const void *a, const void *b);
void mem_rec_sort(void *v, size_t n);

struct runs;

struct mem_input {
	const int64_t *opt_starts;	/* the Optimizer.step#... spans' starts, sorted */
	const int64_t *opt_ends;	/* and their ends, in the order mem_ctx.opt counts them */
	size_t nopt;
	const struct runs *recs;	/* the events (struct mem_rec), sealed */
	const char *(*str)(void *payload, uint32_t id);
	void *payload;
};

struct mem_result;

/*
 * Infer, reading the events once; series stay owned by *out until
 * mem_result_free, and replay from temporary files of their own.
 */
int mem_infer(const struct mem_input *in, struct mem_result **out, const struct mem_series **series,
	      size_t *nseries, struct tp_errbuf *err);
void mem_result_free(struct mem_result *r);

/*
 * The same model, fed an event at a time, so that it can go on later with the
 * events after those fed (a run's parts, analysis.c): mem_infer() is
 * mem_model_new(), mem_model_add() of each event in order, and
 * mem_model_result(). in's optimizer steps are read at each event (a free's
 * category); its recs are not.
 */
struct mem_model;

struct mem_model *mem_model_new(void);
void mem_model_free(struct mem_model *m);
/* TP_OK; TP_ERR_UNSUPPORTED when x is before its device's latest event (m is then left as it was) */
int mem_model_add(struct mem_model *m, const struct mem_input *in, const struct mem_rec *x, struct tp_errbuf *err);
/* The records added so far written out, as a copy needs them. */
int mem_model_sync(struct mem_model *m, struct tp_errbuf *err);
/*
 * A copy of m (synced, and not a copy itself) that goes on apart from it: it
 * shares the records m has written (m may go on writing after them, or be freed).
 */
int mem_model_copy(const struct mem_model *m, struct mem_model **out, struct tp_errbuf *err);
/* What m takes, in memory and in its own temporary files (not those it shares with the model it copies). */
uint64_t mem_model_bytes(const struct mem_model *m);
/* The series of what m was fed, as mem_infer() gives them; m is freed, even on failure. */
int mem_model_result(struct mem_model *m, const struct mem_input *in, struct mem_result **out,
		     const struct mem_series **series, size_t *nseries, struct tp_errbuf *err);

/*
 * Marks: what a result's series were when the store last wrote them
 * (mem_result_mark(), once the store's walk went over them: the walk keeps
 * its state at each block's first point), so that the next result of a copy
 * of the same model, gone on since, tells how many of its points are the
 * same (mem_result_follow() sets mem_series.same) and is replayed from there.
 */
struct mem_mark;

/* r's marks, taken from it (NULL: nothing to mark, or out of memory); r's series still replay */
struct mem_mark *mem_result_mark(struct mem_result *r);
/* r's series' same from m (NULL: none); -1: out of memory */
int mem_result_follow(struct mem_result *r, const struct mem_mark *m);
void mem_mark_free(struct mem_mark *m);
uint64_t mem_mark_bytes(const struct mem_mark *m);

/*
 * Tests: walk != 0 has every result walk its records for the peak, as a trace without the
 * allocator's totals does, instead of taking the one the model kept as they came; returns how
 * many results took the kept one since the last call.
 */
unsigned long mem_peak_test(int walk);

#endif
