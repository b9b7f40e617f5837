/*
 * kineto.h: the collector as its node's Kineto daemon (in place of dynolog),
 * so that a PyTorch process started with KINETO_USE_DAEMON=1, with no code
 * change, can be traced on demand.
 *
 * Kineto's config loader thread sends a datagram to the abstract Unix socket
 * "dynolog" every ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS (5 s by default) and
 * waits about 90 ms for the answer; this module binds that name, answers each
 * poll with an empty config, or, once a capture is armed for the process's
 * rank, with an on-demand trace config whose ACTIVITIES_LOG_FILE is in the
 * spool folder. The protocol, as read in pytorch/kineto and dynolog, is
 * written down in docs/collector.md ("Kineto daemon").
 *
 *   kineto_open(&k, NULL, NULL, spool)  binds "dynolog"; fails if dynolog holds it
 *   k.run = run                    captures only for this run's processes
 *   loop: poll(k.fd, ...)
 *         kineto_handle(&k)        when k.fd is readable: one datagram read, answered
 *         kineto_arm(&k, rank, id, steps, seconds, "cpu,cuda")
 *         kineto_check(&k, &done)  until 0: finished captures, gone processes
 *   kineto_close(&k)
 *
 * A capture's trace: Kineto writes <spool>/kineto-<pid>-c<ID>.trace (as
 * <name>.tmp first, renamed when closed); kineto_check sees it whole (it
 * ends as Kineto ends a trace, kineto_json_complete) and renames it to
 * kineto-<pid>-c<ID>.pt.trace.json, which a spool watcher ships (neither the
 * .tmp nor the .trace name is one it ships). The name asked for has no
 * ".json" in it on purpose: Kineto inserts _<pid> before ".pt.trace.json" or
 * ".json" in the name it is given, and the file would not end in -c<ID>.
 *
 * Kineto (since June 2026, kineto #1426) writes an on-demand trace only under
 * /tmp/ or under the process's KINETO_ONDEMAND_TRACE_DIR, else to its own
 * default file: the spool must be there. The config is handed over anyway
 * (older Kineto writes anywhere) with a warning on stderr that names the fix.
 * A handed capture whose trace has not come KINETO_TRACE_WAIT_S after the
 * window could have ended (its seconds, or 3600 s for steps) is reported
 * failed.
 *
 * A process is known by the pid the kernel gives for the sender
 * (SO_PASSCRED), not the one its message holds: no process can take
 * another's capture by naming its pid, and a job in another pid namespace is
 * known by its pid here, where /proc and kill() look.
 *
 * Single-threaded; nothing here blocks (the socket is non-blocking).
 */
#ifndef KINETO_H
#define KINETO_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

/* Kineto's endpoint name for its daemon (kDynoIpcName, IpcFabricConfigClient.cpp) */
#define KINETO_DAEMON_NAME "dynolog"
/* a capture id: 1..64 of [A-Za-z0-9_-] (it goes into a file name and the config) */
#define KINETO_ID_MAX 64
/* the largest datagram read; bigger ones are dropped (Kineto's are 56 to 100 bytes) */
#define KINETO_DGRAM_MAX 4096
/* a process that has not polled for this long is forgotten (dynolog: kKeepAliveTimeSecs) */
#define KINETO_KEEPALIVE_MS 60000
/* how long after its window a handed capture's trace may take (warm-up, flush, steps) */
#define KINETO_TRACE_WAIT_S 600
/* processes known at once; a poll from one more is dropped (kineto_check forgets dead ones) */
#define KINETO_PROCS_MAX 1024
/* any process, whatever its rank (kineto_arm) */
#define KINETO_ANY_RANK (-1)

enum kineto_act {
	KINETO_ACT_CPU = 1,
	KINETO_ACT_CUDA = 2,
	KINETO_ACT_MEMORY = 4,
	KINETO_ACT_STACKS = 8,
};

struct kineto_proc;
struct kineto_arm;

struct kineto {
	int fd;			/* the bound datagram socket, to poll; -1 when closed */
	/* borrowed, set by the caller after kineto_open; non-NULL: a capture goes only to a
	 * process whose TRAINSCOPE_RUN is this or is unset (the node's daemon serves every job) */
	const char *run;
	char spool[PATH_MAX - 128];	/* where traces are asked to go, no trailing '/' */
	struct kineto_proc *procs;
	size_t nprocs;
	struct kineto_arm *arms;	/* armed captures no process has taken yet, oldest first */
	size_t narms;
	/* counters, for the caller's messages and the tests */
	unsigned registered;	/* processes first seen */
	unsigned polls;		/* "req" answered */
	unsigned handed;	/* configs handed to a process */
	unsigned misplaced;	/* of which the process's Kineto would write elsewhere (warned) */
	unsigned dropped;	/* datagrams ignored (malformed, too big, unknown type, unanswerable) */
	unsigned gone;		/* processes forgotten: exited, or silent KINETO_KEEPALIVE_MS */
	char last_error[256];	/* why the last datagram was dropped */
};

/* a capture finished (kineto_check) */
struct kineto_done {
	char id[KINETO_ID_MAX + 1];
	int rank;		/* the process's rank; -1 unknown */
	pid_t pid;
	int ok;			/* 1: path is the complete trace; 0: failed, why says */
	char path[PATH_MAX + 16];
	char why[PATH_MAX + 256];
};

/*
 * Bind the daemon endpoint: name NULL is KINETO_DAEMON_NAME, in the abstract
 * namespace as Kineto addresses it; socket_dir non-NULL binds
 * socket_dir/name instead (Kineto's KINETO_IPC_SOCKET_DIR). spool: an
 * existing folder, absolute. 0, or -1 after a message on stderr (the name is
 * taken: dynolog or another collector runs; a bad spool).
 */
int kineto_open(struct kineto *k, const char *name, const char *socket_dir, const char *spool);
void kineto_close(struct kineto *k);

/*
 * Read one datagram and answer it: "ctxt" (registration) with the number of
 * processes of its job, "req" (config poll) with the config armed for it or
 * an empty one. A malformed, oversized or unknown datagram is dropped and
 * counted (k->dropped, k->last_error, one line on stderr). 1: one handled or
 * dropped; 0: nothing to read; -1: the socket failed (errno).
 */
int kineto_handle(struct kineto *k);

/*
 * Arm a capture: the next config poll of a process of rank (TRAINSCOPE_RANK,
 * else RANK, else LOCAL_RANK, in its /proc/PID/environ, as the collector
 * takes its own; KINETO_ANY_RANK: any process) and of k->run gets
 * an on-demand trace config; one process takes it. steps (1..10000) or
 * seconds (1..3600), exactly one non-zero; activities: comma-separated
 * cpu,cuda,memory,stacks (NULL or "": cpu,cuda). 0, or -1 with why in
 * k->last_error (bad argument, id already armed).
 */
int kineto_arm(struct kineto *k, int rank, const char *id, int steps, int seconds,
	       const char *activities);
/*
 * The distinct known ranks of the processes polling now (of k->run or no
 * run), ascending, at most max of them into out: how many there are. A
 * collector that holds the node's endpoint serves the ranks of the node
 * whose own collectors could not bind it.
 */
size_t kineto_ranks(const struct kineto *k, int *out, size_t max);
/* Drop an armed capture no process has taken yet: 1 dropped, 0 none such. */
int kineto_cancel(struct kineto *k, const char *id);

/*
 * One finished capture into *d: its trace complete and renamed (ok), or its
 * process gone or its trace going elsewhere (failed). Also forgets the
 * processes that exited or stopped polling. 1: *d filled (call again); 0: none.
 */
int kineto_check(struct kineto *k, struct kineto_done *d);

/* The config text for a capture (for kineto_arm and the tests): 0, or -1 if it does not fit. */
int kineto_config(char *buf, size_t size, const char *path, const char *id, int steps,
		  int seconds, unsigned acts);
/* cpu,cuda,memory,stacks -> KINETO_ACT_* bits; -1 on an unknown name */
int kineto_parse_activities(const char *s);
/*
 * 1 when the file at path is a whole trace: its last byte but whitespace is
 * '}' and its last 8 KiB hold Kineto's closing "traceName" member (or the
 * '}' follows a ']'); 0 otherwise (missing, empty, cut after an event).
 */
int kineto_json_complete(const char *path);

#endif
