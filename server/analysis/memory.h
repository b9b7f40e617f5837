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

/* Host spans sorted by (thread, start, longer first), nested: parent < child. */
struct mem_span {
	int64_t s, e;
	uint32_t thread, name;
	int32_t parent;		/* -1: top level */
	uint16_t flags;
};

struct mem_event {
	int64_t ts, ev_idx, addr, bytes, total_alloc, total_res;
	union {
		uint64_t thread_key;	/* the caller's, to find thread, */
		uint32_t thread;	/* which replaces it: number of the thread's spans; >= nthreads: none */
	};
	int32_t dev_type, dev_id;
	uint32_t ord;		/* arrival order: the sort's last tie-break (ev_idx repeats across chunks) */
	uint8_t has_addr, has_totals;
};

struct mem_input {
	const struct mem_span *spans;
	size_t nspans;
	const size_t *thread_first;	/* spans of thread t: [thread_first[t], thread_first[t + 1]) */
	size_t nthreads;
	struct mem_event *ev;		/* reordered in place */
	size_t nev;
	const char *(*str)(void *payload, uint32_t id);
	void *payload;
};

struct mem_result;


/* Infer; series stay owned by *out until mem_result_free. */
int mem_infer(const struct mem_input *in, struct mem_result **out, const struct mem_series **series,
	      size_t *nseries, struct tp_errbuf *err);
void mem_result_free(struct mem_result *r);

#endif
