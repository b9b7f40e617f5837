/*
 * workers.h: threads kept between short jobs.
 *
 * An upload runs its parser and its writer on threads of their own
 * (pipeline/ingest.c). Made and joined for every upload, they cost each
 * 2 MiB chunk of a collector 0.13 ms before its body was read and 0.11 ms
 * after it, in the time its client waits for the answer; kept, 0.02 and
 * 0.04 ms (medians of 20 chunks, timers not kept, this project's 2-core VM).
 * A job runs on an idle kept thread, or on a new one when none is idle;
 * once waited for, its thread is kept for the next job (WORKERS_IDLE at
 * most) or ended.
 */
#ifndef TP_WORKERS_H
#define TP_WORKERS_H

struct worker;

/* Run fn(arg) on a worker: 0, or -1 (no thread could be made; nothing runs). */
int worker_start(struct worker **out, void *(*fn)(void *), void *arg);

/* Wait for the job of w to return; w is no longer the caller's. */
void worker_wait(struct worker *w);

/* End the idle workers (at exit, after the last upload). */
void workers_drain(void);

#endif
