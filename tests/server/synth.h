/*
 * synth.h: what the analysis suites (check_analysis*.c) share: a store
 * opened per test, ingest and query helpers over it, synthetic traces with
 * one knob per diagnosis rule, and sinks that feed a parse into an analysis.
 */
#ifndef SYNTH_H
#define SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/analysis.h"
#include "ingest/trace.h"
#include "testutil.h"

/* The store the current test ingests into: opened by synth_setup(), closed by synth_teardown(). */
extern struct store *synth_st;
void synth_setup(void);
void synth_teardown(void);

/* Ingest bytes (or a fixture file) as rank 0 of run; fails the test on an error. */
void synth_ingest(const char *run, const void *data, size_t len);
void synth_ingest_fixture(const char *run, const char *rel);

enum synth_q { Q_STEPS, Q_OPS_CPU, Q_OPS_GPU, Q_KERNELS, Q_MEMCPY, Q_RANKS };
/* One of run's read answers (new reference); fails the test on an error. */
json_t *synth_query(const char *run, enum synth_q what);
/* o's integer member key; fails the test when it is not one. */
json_int_t synth_iget(json_t *o, const char *key);
/* Every step's components are non-negative and sum to its duration. */
void synth_check_breakdown_sums(const char *run, size_t nsteps);

/* A parse fed to an analysis: each thread's host spans kept as well (busy_event() in check_analysis.c), or not
 * (synth_spill_event()). */
struct busy {
	struct trace_parser *tp;
	struct analysis *an;
	int64_t key[256][2];		/* (pid, tid) in first-seen order */
	size_t nthreads;
	int64_t (*span)[2];		/* per thread: spans, appended */
	size_t *nspan, *cap;
	int64_t **spans;
	int fail_ok;			/* synth_spill_event(): an analysis error stops the parse */
	struct tp_errbuf an_err;
};

/* trace_string() of parser p, "" for none */
const char *synth_str_of(void *p, uint32_t id);
/* The result's collectives, read back from their runs into an array the caller frees. */
struct an_coll *synth_colls_of(const struct an_result *r);
/* A trace sink's string callback that keeps nothing. */
int synth_busy_string(void *p, uint32_t id, const char *s, size_t len);
/* A trace sink's event callback (payload a struct busy): every event to the analysis only. */
int synth_spill_event(void *p, const struct tp_event *e);
/* qsort() order of (start, end) pairs by start */
int synth_cmp_pair(const void *a, const void *b);
/* The length of the union of the n / 2 (start, end) pairs in v (sorted in place). */
int64_t synth_union_len(int64_t *v, size_t n);

/* ---- synthetic traces: one knob per diagnosis rule ---- */

struct synth {
	int steps;
	int64_t step_us, drift_us;	/* step i lasts step_us + i * drift_us */
	int kernels;
	int64_t kernel_us;
	int64_t dataloader_us, cpu_us, sync_us, memcpy_us;
	const char *memcpy_name;	/* NULL: "Memcpy DtoH (Device -> Pageable)" */
	int64_t start_us;		/* added to the first step's start */
	int64_t act_bytes;		/* per step: allocated at its start, freed at its end */
	int64_t leak_bytes;		/* per step: allocated and never freed */
	int64_t capacity;		/* deviceProperties totalGlobalMem of device 0; 0: none */
	int64_t stub_us;		/* a last ProfilerStep this long that launches nothing */
	int64_t nccl_us;		/* per step: an all-reduce on stream 8 from 1 ms before the kernels end */
	int no_steps;			/* leave out the ProfilerStep spans */
	int cut;			/* the last step's last kernels: launched, never recorded */
};

/* A healthy loop: 10 ms steps, the GPU busy 90% of it with 1 ms kernels. */
extern const struct synth synth_healthy;

/* A growing trace text. */
struct text {
	char *p;
	size_t n, cap;
};

/* Append printf-style text to t, growing it. */
void synth_emit(struct text *t, const char *fmt, ...);
/* Append one complete ("X") event. */
void synth_span(struct text *t, const char *cat, const char *name, int pid, int tid, int64_t ts, int64_t dur,
		const char *args);
/* Append one [memory] instant event of device 0. */
void synth_mem_event(struct text *t, int tid, int64_t ts, int64_t addr, int64_t bytes, int64_t total, int idx);
/* The trace of s (malloc'd, *len bytes). */
char *synth_trace(const struct synth *s, size_t *len);
/* Ingest s as run and diagnose it; returns the findings (new reference). */
json_t *synth_diagnose(const char *run, const struct synth *s);
/* The finding with this id in d, NULL for none. */
json_t *synth_finding(json_t *d, const char *id);

#endif
