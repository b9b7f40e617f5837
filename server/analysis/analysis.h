/*
 * analysis.h: what a trace says about where time went, computed once while
 * it is ingested (server/pipeline/ingest.c feeds every event) and stored with
 * it: steps and their breakdown, operator and kernel tables. Pure: no SQL,
 * no HTTP. The read side (diagnosis.h) works from the stored tables.
 *
 * Times are as written in the trace (before baseTimeNanoseconds).
 *
 * Memory: nesting, step windows and CPU->GPU correlation can only be
 * resolved once every event has been seen (a trace's events are not in time
 * order, and a kernel may come before the call that launched it). Every
 * kind of record that grows with the trace (host spans, GPU activities,
 * runtime calls, communication records, collectives, [memory] events) is
 * kept in sorted runs of about 5 MiB (runs.h), spilled to temporary files
 * ($TMPDIR) and read back merged, so the analysis holds about the same
 * whatever the trace's size; analysis.c's analysis_finish() says what
 * still grows. The events cap (--max-events) bounds the rest.
 */
#ifndef ANALYSIS_H
#define ANALYSIS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/runs.h"
#include "event.h"
#include "memmodel.h"
#include "tp.h"

/* The components of a step, in priority order (see analysis.c). AN_KERNEL is
 * computation kernels; AN_COMM communication kernels not under one. */
enum an_comp {
	AN_KERNEL, AN_MEMCPY, AN_MEMSET, AN_COMM, AN_RUNTIME, AN_DATALOADER, AN_CPU, AN_IDLE, AN_NCOMP
};
extern const char *const an_comp_names[AN_NCOMP];

/* A kernel shorter than this is "tiny" (launch-bound); HTA's launch stats
 * call 5-20 us the usual CPU launch cost of one kernel. */
#define AN_TINY_KERNEL_NS 10000

/*
 * A step: ProfilerStep#N's CPU span extended to the end of the GPU work it
 * launched (analysis.c says exactly how), or the whole trace when it has no
 * steps (whole_trace, step 0).
 */
struct an_step {
	int64_t step, start_ns, dur_ns;
	int64_t cpu_dur_ns;		/* the ProfilerStep#N span as written */
	int64_t comp_ns[AN_NCOMP];	/* sums to dur_ns */
	int64_t comm_overlap_ns;	/* communication under computation kernels */
	int64_t gpu_busy_ns;		/* any kernel it launched running, computation or communication */
	int64_t gpu_calls;		/* GPU spans the step launched */
	int64_t cpu_end_ns;		/* where the ProfilerStep#N span ends (the host's step end) */
	int64_t sync_calls, sync_ns;	/* runtime calls that wait for the GPU (an_is_sync()) started in the span */
	int incomplete;			/* enum an_incomplete; 0: complete */
	int64_t unrec_ns;		/* the latest launch in it no GPU span names (analysis_merge()) */
	int whole_trace;
};

/* Why a step is left out of means, medians, compare and drift. */
enum an_incomplete { AN_COMPLETE = 0, AN_INC_NO_GPU = 1, AN_INC_CUT = 2 };
extern const char *const an_incomplete_notes[3];

/* Kernel classes, as HTA classes them. */
enum an_kclass { AN_KC_COMPUTATION = 0, AN_KC_COMMUNICATION = 1, AN_KC_MEMORY = 2 };
extern const char *const an_kclass_names[3];
/* The class of a GPU span by its name and kind (enum an_gpu_kind). */
int an_kernel_class(const char *name, int kind);
/* 1 when a runtime or driver call of this name blocks the host until the GPU
 * is done (cudaStreamSynchronize, cudaMemcpy, ...): the waits gpu_sync counts */
int an_is_sync(const char *name);
/* 1 when a host operator is a collective (nccl:*, gloo:*, c10d::*, record_param_comms). */
int an_op_is_comm(const char *name);

/* Collective kinds, as nccl-tests names its benchmarks (an_coll_kind). */
enum an_ckind {
	AN_CK_ALL_REDUCE, AN_CK_ALL_GATHER, AN_CK_REDUCE_SCATTER, AN_CK_ALL_TO_ALL, AN_CK_BROADCAST,
	AN_CK_REDUCE, AN_CK_SEND, AN_CK_RECV, AN_CK_SEND_RECV, AN_CK_GATHER, AN_CK_SCATTER, AN_CK_BARRIER,
	AN_CK_OTHER, AN_NCKIND
};
extern const char *const an_ckind_names[AN_NCKIND];
/*
 * The kind a collective's name says: PyTorch's "Collective name" (allreduce,
 * _allgather_base, reduce_scatter_tensor_coalesced, ...), a host range
 * (nccl:all_reduce, gloo:broadcast) or an NCCL kernel
 * (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv); -1 when it names none.
 */
int an_coll_kind(const char *name);
/* Bytes per element of a dtype as PyTorch writes it ("Float", "BFloat16", "c10::Half", "long int"); 0: unknown. */
int an_dtype_size(const char *dtype);

/*
 * One collective as one rank ran it: the outermost communication operator
 * (record_param_comms, nccl:*, c10d::*) around the launch of communication
 * kernels, with every kernel it launched; a communication kernel with no
 * such operator is a collective of its own. gloo runs collectives on host
 * threads: a gloo:* span with no kernel is one, its span for its launch,
 * start, end and time (kernels 0).
 */
struct an_coll {
	int64_t step;			/* the step whose CPU span holds the launch; -1: none */
	int kind;			/* enum an_ckind */
	uint32_t pg;			/* "Process Group Name" (string id); 0: none written */
	int64_t seq;			/* "Seq" in the group; -1: none written */
	int64_t launch_ns;		/* the host operator's start (the rank's arrival), else the launch call's, else the kernel's */
	int64_t start_ns, end_ns;	/* first kernel start, last kernel end */
	int64_t time_ns;		/* sum of its kernels' durations */
	int64_t kernels;
	int64_t bytes;			/* max(In, Out msg nelems) x dtype size; -1: not written */
	int64_t group_size;		/* "Group size"; 0: not written */
	/* what the launching thread did before it: the top-level host operator (not a collective)
	 * with the most time between the thread's previous collective launch (or the step's start,
	 * whichever is later) and this one; 0 / 0 when none */
	uint32_t before_op;
	int64_t before_ns;
	uint32_t thread;		/* the launching thread (analysis' numbering); UINT32_MAX: none known */
};

enum an_device { AN_DEV_CPU = 0, AN_DEV_GPU = 1 };

struct an_op {
	uint32_t name;			/* interned string id */
	int device;			/* enum an_device */
	int64_t calls, self_ns, total_ns;
};

enum an_gpu_kind { AN_GPU_KERNEL = 0, AN_GPU_MEMCPY = 1, AN_GPU_MEMSET = 2 };

struct an_kernel {
	uint32_t name;
	int kind;			/* enum an_gpu_kind */
	int64_t calls, total_ns, min_ns, max_ns;
	int64_t tiny_calls, tiny_ns;	/* shorter than AN_TINY_KERNEL_NS */
	/* duration-weighted sums, over the calls that gave the field */
	int64_t bps_ns, occ_ns;
	double bps_sum, occ_sum;	/* sum of value * dur_ns */
};

/*
 * Work inside the complete steps (compare's "in_steps"): an operator's calls
 * that start inside its step's ProfilerStep#N span on the host and their
 * self time (gpu 0, kind 0), or a GPU span's (gpu 1, kind: enum
 * an_gpu_kind) calls that start inside a step's span and its time clipped to
 * the steps' spans, summed over the complete steps that are not a whole
 * trace. Computed per step as the passes go (inside.c), summed once the
 * steps' completeness is known: at finish, and again at each merge of parts.
 */
struct an_inside {
	uint32_t name;
	uint8_t gpu, kind;
	int64_t calls, ns;
};

struct an_result {
	struct an_step *steps;
	size_t nsteps;
	struct an_op *ops;
	size_t nops;
	struct an_kernel *kernels;
	size_t nkernels;
	/* memory timelines by category from [memory] events, one per device (memory.h) */
	const struct mem_series *mem_series;
	size_t nmem_series;
	/* collectives, by launch time: kept in sorted runs, read with an_colls_open() */
	const struct runs *colls;
	size_t ncolls;
	/* host self time per thread, threads numbered by their first host span */
	int64_t *thread_self_ns;
	size_t nthreads;
	/* the operators and GPU spans inside the complete steps, by first appearance */
	struct an_inside *inside;
	size_t ninside;
};

/*
 * The collectives in order, one at a time: rcur_next() gives a
 * const struct an_coll *, NULL at the end or when a read failed (c->err).
 * -1: out of memory or a read failed; rcur_close() either way.
 */
int an_colls_open(const struct an_result *r, struct rcur *c);

/* Resolves an interned string id to its text (never NULL). */
typedef const char *(*an_string_fn)(void *payload, uint32_t id);

struct analysis;

struct analysis *analysis_new(an_string_fn str, void *payload);
/* Host spans per sorted run (runs past the first are spilled to a temporary
 * file in $TMPDIR; the other records in runs, GPU spans, runtime calls,
 * [memory] events..., take as many bytes a run): an's, before its first
 * event, and every new analysis's (default 128K, 5 MiB; the server's
 * --spill-at), before any starts. */
void analysis_set_run(struct analysis *an, size_t spans);
void analysis_set_default_run(size_t spans);
/* Tests: the filter of communication kernels' ids says yes to every id (as its false positives do). */
void analysis_comm_filter_all(int on);
/* One parsed event; only complete ('X') events matter. */
int analysis_event(struct analysis *an, const struct tp_event *e, struct tp_errbuf *err);
/*
 * A copy of an as it is, to finish while an goes on taking events (a
 * rank's analysis that grows chunk by chunk: server/pipeline/runrank.c):
 * finishing the copy gives what finishing an would have. an must not be
 * finished, nor take events while the copy is finished and read (they
 * share an's temporary files). The copy's strings are payload's (a copy
 * of an's that may go on apart from them; NULL: an's own). NULL with err
 * set.
 */
struct analysis *analysis_fork(const struct analysis *an, void *payload, struct tp_errbuf *err);
/*
 * Its host spans' full runs sorted and written by a thread of their own
 * (runs.h: runs_behind()), so that the thread that feeds an events does
 * not wait for them: the upload's parser (pipeline/ingest.c). -1: out of
 * memory (an goes on without).
 */
int analysis_spill_behind(struct analysis *an);
/* Write out what an holds of its runs beyond about keep bytes each (between forks). */
int analysis_hold(struct analysis *an, size_t keep, struct tp_errbuf *err);
/* What an's runs and memory model take, in memory and in its temporary files. */
uint64_t analysis_held_bytes(const struct analysis *an);
/* Compute; *out stays owned by an (valid until analysis_free). */
int analysis_finish(struct analysis *an, const struct an_result **out, struct tp_errbuf *err);

/*
 * Parts. A rank's trace artifacts that follow one another in time with
 * nothing between them (profiling cycles) are analysed as parts: each
 * finished once, and their results merged (analysis_merge()) into what
 * one analysis of them all would have given, byte for byte. So a new cycle
 * costs its own finish and a merge of results, not a finish of the run
 * (server/pipeline/runrank.c). So are the events of one trace before and
 * after an instant that nothing crosses (analysis_new_like()).
 *
 * analysis_new_after(): the part after prev (finished as a part): it numbers
 * threads and adds to the kernel table where prev left them, and knows
 * prev's last step. analysis_set_part(): its finish keeps what the merge
 * reads (the [memory] events with their context, for one memory model over
 * all parts) instead of running the memory model (a fork of a part is one).
 * analysis_bounds(): the instants the events its passes read cover ([INT64_MAX, INT64_MIN]:
 * none).
 */
struct analysis *analysis_new_after(const struct analysis *prev, struct tp_errbuf *err);
void analysis_set_part(struct analysis *an);
/*
 * A part made as an was (by analysis_new() or analysis_new_after(), not
 * finished) that numbers threads as an does now and adds to kt's kernel
 * table (NULL: an empty one; else the merge an was made after): a trace that
 * an took whole can be taken again in two parts, the events before an instant
 * into this one and those after into analysis_new_after() of it
 * (server/pipeline/runrank.c), the threads numbered as an numbered them.
 * analysis_follows(): 1 when b (finished as a part, made after a, a part
 * finished) follows a as analysis_merge() asks of parts.
 */
struct analysis *analysis_new_like(const struct analysis *an, const struct analysis *kt, struct tp_errbuf *err);
int analysis_follows(const struct analysis *a, const struct analysis *b);
void analysis_bounds(const struct analysis *an, int64_t *lo, int64_t *hi);
/* Its ProfilerStep#... spans so far (a part has some: analysis_merge()), and the i-th's
 * start and end as written, in the order they came. */
size_t analysis_steps(const struct analysis *an);
void analysis_step_span(const struct analysis *an, size_t i, int64_t *start, int64_t *end);
/*
 * Merges of parts. analysis_absorb(): b, finished as a part, into *acc (a
 * merge of the parts before it; NULL: b is the first, and *acc is made), to
 * merge with the part after b. analysis_merge(): a (a merge; NULL: none) and
 * b, the part after a's last (finished as a part), as one analysis of all
 * their events would give them, into *out (analysis_free() it; its strings
 * are b's), the memory model over every part's [memory] events; a and b
 * are read, not changed. The model is a's (absorb keeps one) going on with b's
 * events when that is what the model of them all gives, and made again from
 * every part's events when not: a thread whose events a placed without
 * knowing it (its spans, backward) that b tells more of. TP_ERR_UNSUPPORTED (code "parts_overlap") when
 * something crosses from a to b, so that only one analysis of them all gives
 * the answer: their times or correlation ids overlap, a GPU span of one falls
 * back on an External id the other's operators have, b was not made after a's last part
 * (analysis_new_after()), one has GPU work or [memory] events and the other
 * none, b has no steps, or one of b's collectives is outside a step (it
 * could look back into a: before_op()). On another failure of absorb *acc
 * is left half changed: free it.
 */
int analysis_absorb(struct analysis **acc, const struct analysis *b, struct tp_errbuf *err);
int analysis_merge(const struct analysis *a, const struct analysis *b, struct analysis **out, struct tp_errbuf *err);
/* A final merge's result (owned by it). */
const struct an_result *analysis_merged(const struct analysis *an);
/* Its memory model went on from a's (1) or was made again from all the events (0); -1: it has none. */
int analysis_memory_went_on(const struct analysis *an);
/*
 * A merge's memory series once stored, marked for the next merge of the same
 * parts gone on (memory.h: mem_result_mark(); NULL: none), and that next
 * merge's series told which of their points the mark's stored already
 * (mem_result_follow(); -1: out of memory).
 */
struct mem_mark;
struct mem_mark *analysis_memory_mark(struct analysis *an);
int analysis_memory_follow(struct analysis *an, const struct mem_mark *m);
void analysis_free(struct analysis *an);

#endif
