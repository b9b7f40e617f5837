/*
 * critpath.h: the critical path of one step across a run's ranks, from the
 * complete events of each rank's step window (the caller reads them from the
 * store and adds them here) and the collectives matched across ranks
 * (distributed.h: dist_match).
 *
 * The path is walked back from the event that ends last in the step, on any
 * rank. At each event the walk goes to the predecessor that let it start
 * last:
 *   host operators and runtime calls: the previous event of the same thread
 *     (ready at its end), or the enclosing one (ready at its start); at the
 *     top of a thread idle before it, another thread of the rank: the
 *     innermost event running there at its start (not a collective nor a
 *     sync), which handed it the work (ready at its start), else the one
 *     that ended last before it (a collective's return woke it; ready at
 *     its end);
 *   host operators of collectives (gloo:*, nccl:*, record_param_comms,
 *     c10d::*; the one starting at the collective's arrival and those inside
 *     it): also the last rank's arrival, while the rank was still in it;
 *   synchronizations (cudaStreamSynchronize, cudaDeviceSynchronize,
 *     cudaEventSynchronize): also the rank's GPU work that ended last
 *     before the call returned (ready at its end);
 *   kernels, copies, sets: the previous one on the same stream (ready at its
 *     end) and the runtime call that launched it (the same correlation id;
 *     ready at its end, or at the kernel's start when that is earlier);
 *   a collective's kernel: also the last rank's arrival (the start of its
 *     host operator of the collective), where the walk moves to that rank.
 * Each event on the path owns the time from when its predecessor was ready
 * (or its own start, whichever is later) to where the walk left it; the time
 * between a predecessor's readiness and an event's start is "host_gap"
 * before a host event (its rank ran no operator then: a sleep, work outside
 * the profiler) and "idle" before a device event. The
 * segments tile the path without overlap, from its first rank's step start
 * (idle until the first event) to the last end.
 * Pure: no SQL, no HTTP.
 */
#ifndef CRITPATH_H
#define CRITPATH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"

enum cp_kind { CP_CPU_OP, CP_RUNTIME, CP_SYNC, CP_KERNEL, CP_MEMCPY, CP_MEMSET, CP_COLLECTIVE, CP_IDLE,
	       CP_HOST_GAP, CP_NKINDS };

struct cp_node {
	int rank;
	int kind;			/* enum cp_kind */
	int dev;			/* on the device (kernels, copies, sets); else on a host thread */
	char *name;			/* owned */
	int64_t start_ns, end_ns;	/* absolute */
	int64_t pid, tid;		/* host events: the thread */
	int64_t device, stream;		/* device events */
	int64_t corr;			/* -1: none */
	size_t inst;			/* a collective's kernel, or its host operator starting at its arrival:
					 * its instance (dist_match); SIZE_MAX: none */
};

/* A collective of one rank matched across ranks: its first kernel's start, its arrival, its instance. */
struct cp_coll {
	int rank;
	int64_t start_ns, launch_ns;
	size_t inst;
};

struct cp_window {
	int rank;
	int64_t start_ns, end_ns;	/* the rank's step, absolute */
};

struct cp_input {
	struct cp_node *nodes;
	size_t n, cap;
	struct cp_coll *colls;
	size_t ncolls, ccap;
	struct cp_window *win;
	size_t nwin, wcap;
	size_t wlast;			/* the window cp_add_event found last: events come rank by rank */
};

/* The step window of a rank; -1 when out of memory. */
int cp_add_window(struct cp_input *in, int rank, int64_t start_ns, int64_t end_ns);
/* A matched collective (inst != SIZE_MAX); -1 when out of memory. */
int cp_add_coll(struct cp_input *in, int rank, int64_t start_ns, int64_t launch_ns, size_t inst);
/*
 * One trace event of rank (times as written, base_ns added), name and cat its texts. Keeps
 * complete events with a duration of host operators (cpu_op, user_annotation but
 * ProfilerStep#), runtime and driver calls, kernels, copies and sets that overlap the rank's
 * window (added before), but host events around the whole window (its context). 0 when kept
 * or skipped; -1 when out of memory.
 */
int cp_add_event(struct cp_input *in, int rank, const struct tp_event *e, int64_t base_ns, const char *name,
		 const char *cat);
void cp_input_release(struct cp_input *in);

/* The name of a kind ("cpu_op", "runtime", ...). */
const char *cp_kind_name(int kind);

/*
 * {"step", "ranks", "start_ns", "end_ns", "dur_ns", "segments", "by_kind", "by_category"}
 * (schemas/api/critical_path.schema.json); NULL when out of memory. in's nodes are sorted.
 */
json_t *critpath_run(struct cp_input *in, int64_t step);

#endif
