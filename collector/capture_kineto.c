/*
 * capture_kineto.c: the capture backend for processes our CUPTI library
 * does not trace (capture.h's capture_other_backend): the collector as its
 * node's Kineto daemon (kineto.h), for a PyTorch process started with
 * KINETO_USE_DAEMON=1. open binds the daemon's name (TRAINSCOPE_KINETO_NAME,
 * default "dynolog"; in KINETO_IPC_SOCKET_DIR when that is set, as Kineto
 * does) and the main loop answers every config poll from then on; start
 * arms the capture for this collector's rank and run; poll reports its
 * trace once kineto_check has renamed it to kineto-<pid>-c<ID>.pt.trace.json
 * in dir, where the watcher ships it with &capture=ID. A capture no process
 * has taken after UNTAKEN_S (Kineto polls every 5 s) is dropped and failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture.h"
#include "kineto.h"

#define UNTAKEN_S 30

static struct kineto k = { .fd = -1 };
static int rank;
static unsigned handed_before;
static long long armed_at;

static int kb_open(const char *dir, const struct client *c, char *why, size_t size)
{
	const char *name = getenv("TRAINSCOPE_KINETO_NAME"), *sockdir = getenv("KINETO_IPC_SOCKET_DIR");

	if (kineto_open(&k, name && *name ? name : NULL, sockdir && *sockdir ? sockdir : NULL, dir)) {
		snprintf(why, size, "this collector could not be the node's Kineto daemon (said at its start)");
		return -1;
	}
	k.run = c->run;
	rank = c->rank;
	return 0;
}

static int kb_fd(void)
{
	return k.fd;
}

static void kb_turn(void)
{
	while (k.fd >= 0 && kineto_handle(&k) > 0)
		;
}

static void kb_close(void)
{
	kineto_close(&k);
}

static int kb_start(const struct capture_req *req, const char *dir, char *why, size_t size)
{
	(void)dir;
	if (kineto_arm(&k, rank, req->id, (int)req->steps, (int)req->seconds, req->activities)) {
		snprintf(why, size, "%s", k.last_error);
		return -1;
	}
	handed_before = k.handed;
	armed_at = watch_now_ms();
	return 0;
}

static int kb_poll(const struct capture_req *req, const char *dir, char *why, size_t size)
{
	struct kineto_done d;

	(void)dir;
	while (kineto_check(&k, &d))
		if (!strcmp(d.id, req->id)) {
			if (d.ok)
				return 1;
			snprintf(why, size, "%s", d.why);
			return -1;
		}
	if (k.handed == handed_before && watch_now_ms() - armed_at > UNTAKEN_S * 1000LL && kineto_cancel(&k, req->id)) {
		snprintf(why, size, "no PyTorch process of rank %d (KINETO_USE_DAEMON=1) asked for a config in %d s", rank,
			 UNTAKEN_S);
		return -1;
	}
	return 0;
}

const struct capture_backend capture_kineto_backend = {
	.name = "the Kineto daemon",
	.open = kb_open,
	.fd = kb_fd,
	.turn = kb_turn,
	.close = kb_close,
	.start = kb_start,
	.poll = kb_poll,
};
