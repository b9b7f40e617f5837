/*
 * distributed.h: how the ranks of a run spent their steps and waited for
 * each other, from what analysis stored at ingest (the store gathers it into
 * struct dist_input): per rank and step the computation / exposed
 * communication / overlap / idle split of the step breakdown, the
 * collectives per rank, kind and process group with their bandwidths, and
 * the collectives matched across ranks (stragglers). Pure: no SQL, no HTTP.
 */
#ifndef DISTRIBUTED_H
#define DISTRIBUTED_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* One step of one rank, from the step breakdown (analysis.h). */
struct dist_step {
	int rank;
	int64_t step, start_ns, dur_ns;
	int64_t compute_ns;		/* computation kernels (the breakdown's kernel component) */
	int64_t communication_ns;	/* communication not under computation (exposed) */
	int64_t overlap_ns;		/* communication under computation kernels */
	int64_t idle_ns;
	int64_t comm_total_ns;		/* time any communication kernel runs (HTA's denominator of its overlap); -1: unknown */
	int incomplete, whole_trace;
};

/* One collective of one rank (analysis.h, struct an_coll). */
struct dist_coll {
	int rank;
	int64_t step;			/* -1: in no step */
	int kind;			/* enum an_ckind */
	const char *pg;			/* "" when the trace names none; owned by the input */
	int64_t seq;			/* -1: none written */
	int64_t launch_ns, start_ns, end_ns, time_ns, kernels;
	int64_t bytes;			/* -1: not written */
	int64_t group_size;		/* 0: not written */
	const char *before_op;		/* an_coll.before_op; NULL: none; owned by the input */
	int64_t before_ns;
};

struct dist_input {
	int *ranks;			/* the run's ranks with trace data, ascending */
	size_t nranks;
	struct dist_step *steps;	/* by rank, then start */
	size_t nsteps;
	struct dist_coll *colls;	/* by rank, then launch */
	size_t ncolls;
	char **strs;			/* what pg points into */
	size_t nstrs;
	char device[128];		/* the GPU's name in the traces' deviceProperties; "" when none */
	/* dist_align: by rank position, the rank's clock minus the reference rank's (ranks[0]),
	 * and how many collectives the estimate took (0: none, too few: taken as 0) */
	int64_t *clock_off;
	size_t *clock_n;
};

/* At most this many matched instances are listed, with at most DIST_ENTRIES_MAX ranks in all
 * (all are counted): a few hundred KB of JSON at most. */
#define DIST_INSTANCES_MAX 2000
#define DIST_ENTRIES_MAX 20000

/* nccl-tests' bus bandwidth factor of a collective kind in a group of n ranks. */
double dist_busbw_factor(int kind, int64_t n);

/*
 * Clock offsets between ranks. On several hosts each rank's times come from its own clock,
 * which NTP leaves milliseconds off. A collective ends together on every rank (its
 * communication kernels, or gloo's host spans, return when the last byte arrives), so the
 * offset of rank k from the reference rank (ranks[0]) is the median, over the matched
 * instances both took part in, of k's end minus the reference's; with fewer than
 * DIST_CLOCK_MIN such instances it is not estimated (0). Subtracts each rank's offset from
 * its steps' and collectives' times, once (later calls do nothing); distributed_run calls it.
 * -1 when out of memory.
 */
#define DIST_CLOCK_MIN 3
int dist_align(struct dist_input *in);

/*
 * {"ranks", "collectives", "stragglers", "clock"} (schemas/api/distributed.schema.json)
 * for every step, or for step only when has_step, on clocks aligned by dist_align. New
 * reference; NULL when out of memory.
 */
json_t *distributed_run(struct dist_input *in, int has_step, int64_t step);
void dist_input_release(struct dist_input *in);

/*
 * The instance of each collective matched across ranks, as the stragglers match them:
 * inst[i] (for in->colls[i]) numbers the instance (the same number on every rank's
 * collective of it), SIZE_MAX when no other rank's collective matched it. -1 when out of memory.
 */
int dist_match(const struct dist_input *in, size_t *inst);

/*
 * Findings about the run's ranks together (the shape of diagnosis.h's), from the answer of
 * distributed_run over every step (body):
 *   persistent_straggler  a rank last to launch in DIST_STRAGGLER_PCT of its matched
 *                         collectives or more, and at least 1.5 times its fair share (100/n)
 *                         or the cause of DIST_STRAGGLER_WAIT_SHARE_PCT of all the ranks'
 *                         waits, over DIST_STRAGGLER_MIN matched collectives or more; with the
 *                         steps it was last in, the wait it caused per such step and as a
 *                         share of the others' mean step (step_share_pct; explains_step_time:
 *                         at least DIST_STRAGGLER_EXPLAINS_PCT, where the diagnosis lists it
 *                         first);
 *   exposed_communication_ranks  ranks whose exposed communication passes DIST_EXPOSED_PCT
 *                         of their step time;
 *   compute_imbalance     computation per step of the busiest rank more than DIST_IMBALANCE_PCT
 *                         above the least busy one's;
 *   collective_bandwidth_low  a collective kind of a process group, DIST_BW_MIN_BYTES a call
 *                         or more (bandwidth-bound), whose best rank's bus bandwidth is under
 *                         DIST_BW_PCT of what the device's links reach (device: deviceProperties'
 *                         name; the table is in distributed.c).
 * Nothing with fewer than two ranks. A new array; NULL when out of memory.
 */
#define DIST_STRAGGLER_PCT 50.0
#define DIST_STRAGGLER_MIN 3
#define DIST_STRAGGLER_WAIT_SHARE_PCT 90.0
#define DIST_STRAGGLER_EXPLAINS_PCT 20.0
#define DIST_EXPOSED_PCT 10.0
#define DIST_IMBALANCE_PCT 10.0
#define DIST_BW_PCT 10.0
#define DIST_BW_MIN_BYTES (1 << 20)
json_t *distributed_findings(json_t *body, const char *device);
/* The bus bandwidth (GB/s) the links of a GPU named name reach in nccl-tests' all_reduce within a
 * node, and the link's name; 0 when the name is not in the table. */
double dist_link_busbw(const char *name, const char **link);

/*
 * Two runs' distributed figures side by side (GET /compare's "distributed"), from the answers
 * of distributed_run over every step of each: per run the ranks, their complete steps
 * (rank_steps), the sums of dur / compute / exposed communication / overlap / idle over them,
 * the matched collectives and the rank last to arrive most often; delta_pct: the change of
 * each mean per rank and step. A new object; NULL when out of memory.
 */
json_t *distributed_compare(json_t *base, json_t *target);

#endif
