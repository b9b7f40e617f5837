/*
 * capture.h: on-demand capture on the collector's side (issue 52), with
 * --captures on `run` and `watch`. A thread of its own asks the server for
 * the rank's next capture (GET /api/v1/runs/{run}/captures/next?rank=R&wait=25,
 * a long poll), backing off exponentially up to 60 s while the server is
 * away or failing; chunk shipping never waits for it. The main loop hands a
 * capture to a backend, which carries it out:
 *   - the spool backend (capture.c): our CUPTI library in CMD, asked through
 *     $TRAINSCOPE_SPOOL/.capture and answering with .capture-<ID>.done;
 *   - capture_other_backend: for processes our library does not trace, the
 *     node's Kineto daemon (capture_kineto.c over kineto.c).
 * Chunks whose name holds -c<ID>. go up with &capture=ID (watch.h); once the
 * backend says the window ended and those chunks are shipped, the thread
 * posts the rank's end (POST /api/v1/captures/{id}/ranks/{R}), retried with
 * the same backoff until the server answers.
 *
 *   capture_init(&cap, &client, backend, dir)   the thread starts polling
 *   loop: poll(capture_fd(&cap), ...) with at most capture_timeout_ms(&cap)
 *         capture_step(&cap, &w)                 each turn, after watch_ship
 *   capture_target_gone(&cap)                    CMD exited: take no more
 *   capture_release(&cap)                        stops and joins the thread
 */
#ifndef CAPTURE_H
#define CAPTURE_H

#include <pthread.h>
#include <stddef.h>

#include "client.h"
#include "watch.h"

#define CAPTURE_ID_MAX 64
#define CAPTURE_WAIT_S 25		/* the long poll's wait= */
#define CAPTURE_BACKOFF_MAX_MS 60000	/* the longest pause between polls while the server is away */

/* A capture the server handed this rank. */
struct capture_req {
	char id[CAPTURE_ID_MAX + 1];	/* [A-Za-z0-9_-], as the server's id reads in a file name */
	long steps, seconds;		/* one of them above 0 */
	char activities[128];		/* comma-separated: cpu,cuda,memory,stacks */
};

/*
 * Where a capture is carried out. dir: the spool (run) or the first folder
 * watched (watch). Every function is called on the main loop's thread; the
 * optional ones (NULL) are for a backend that serves an endpoint all along.
 */
struct capture_backend {
	const char *name;
	/* Optional: set up before any capture (c: run and rank): 0, or -1 with why (then unused). */
	int (*open)(const char *dir, const struct client *c, char *why, size_t size);
	/* Optional: a descriptor for the main loop to poll (-1: none) ... */
	int (*fd)(void);
	/* ... and what to do at each turn of the loop (read what came, without blocking) */
	void (*turn)(void);
	/* Optional: undo open */
	void (*close)(void);
	/* Start req: 0, or -1 with why (the capture is then ended failed with it). */
	int (*start)(const struct capture_req *req, const char *dir, char *why, size_t size);
	/* 0 still going, 1 ended well, -1 ended failed (why says). */
	int (*poll)(const struct capture_req *req, const char *dir, char *why, size_t size);
};

/* Our CUPTI library through the spool folder (.capture, .capture-<ID>.done). */
extern const struct capture_backend capture_spool_backend;
/*
 * The backend for a process our library does not trace: the node's Kineto
 * daemon (capture_kineto.c over kineto.h), for PyTorch processes started
 * with KINETO_USE_DAEMON=1.
 */
extern const struct capture_backend *capture_other_backend;
extern const struct capture_backend capture_kineto_backend;

enum capture_state {
	CAPTURE_IDLE,		/* the thread polls */
	CAPTURE_TAKEN,		/* the thread got one: the main loop starts it */
	CAPTURE_ACTIVE,		/* the backend carries it out */
	CAPTURE_ENDING,		/* the thread posts its end */
};

struct capture {
	struct client c;	/* the thread's own (its server string, cancel_fd = stop[0]) */
	const struct capture_backend *backend;	/* NULL: each capture ends failed, why_none says why */
	char why_none[256];
	char dir[4096];
	pthread_t th;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int wake[2];		/* the thread -> the main loop: a capture was taken */
	int stop[2];		/* the main loop -> the thread: stop now */
	/* under mu */
	enum capture_state state;
	int no_more;		/* take no new capture (CMD is gone, or 401/403) */
	int stopping;		/* capture_release: the thread ends */
	struct capture_req req;
	int end_ok;
	char end_reason[256];
	/* the main loop's */
	int target_gone;
	int result;		/* the backend's answer (1 ended well, -1 failed), its chunks not all shipped yet */
	char result_why[256];
	unsigned taken, ended;
};

/*
 * Start polling for c's run and rank. backend NULL: every capture taken
 * ends failed with why_none. 0, or -1 after a message on stderr.
 */
int capture_init(struct capture *cap, const struct client *c, const struct capture_backend *backend,
		 const char *why_none, const char *dir);
/* The descriptor to poll: readable when a capture was taken. */
int capture_fd(const struct capture *cap);
/* The backend's descriptor to poll as well (-1: none). */
int capture_backend_fd(const struct capture *cap);
/* How long the main loop may sleep: 1000 ms while a capture runs, else -1. */
long capture_timeout_ms(struct capture *cap);
/* Start what was taken, follow what runs, end what is done and shipped. */
void capture_step(struct capture *cap, struct watch *w);
/* 1 while a capture runs or its end is not posted yet (run keeps draining). */
int capture_busy(struct capture *cap);
/* The traced process is gone: a capture still running ends failed, none is taken any more. */
void capture_target_gone(struct capture *cap);
/* Stop the thread (a long poll in flight is cut) and free. */
void capture_release(struct capture *cap);

#endif
