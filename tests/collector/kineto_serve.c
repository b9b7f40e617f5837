/*
 * kineto_serve.c: collector/kineto.c alone, as the node's Kineto daemon, for
 * a check against a real PyTorch process on a GPU machine
 * (tests/gpu/kineto_daemon.sh) before the collector's capture polling
 * drives it.
 *
 *   kineto_serve [--name NAME] [--timeout S] SPOOL CAPTURE...
 *     CAPTURE: RANK:ID:steps=N[:ACTIVITIES] or RANK:ID:seconds=S[:ACTIVITIES]
 *              (RANK -1: any process; ACTIVITIES: cpu,cuda,memory,stacks)
 *
 * Arms every capture at once (a process takes one at a time, so two for the
 * same rank run one after the other), serves until each has finished or
 * --timeout (600 s) passes, and prints one line per capture:
 * "done ID rank R pid P ok PATH" or "done ID rank R pid P failed WHY".
 * Exit 0 when every capture gave a whole trace, 1 otherwise, 2 on bad usage.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kineto.h"

int main(int argc, char **argv)
{
	const char *name = NULL, *spool;
	long timeout_s = 600;
	struct kineto k;
	int i = 1, armed = 0, finished = 0, ok = 0;
	time_t end;

	for (; i < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (i + 1 >= argc)
			break;
		if (!strcmp(argv[i], "--name"))
			name = argv[i + 1];
		else if (!strcmp(argv[i], "--timeout"))
			timeout_s = atol(argv[i + 1]);
		else
			break;
	}
	if (argc - i < 2) {
		fprintf(stderr, "usage: kineto_serve [--name NAME] [--timeout S] SPOOL "
			"RANK:ID:steps=N|seconds=S[:ACTIVITIES]...\n");
		return 2;
	}
	spool = argv[i++];
	if (kineto_open(&k, name, getenv("KINETO_IPC_SOCKET_DIR"), spool) != 0)
		return 1;
	for (; i < argc; i++) {
		char buf[256], *rank, *id, *when, *acts;
		int steps = 0, seconds = 0;

		snprintf(buf, sizeof(buf), "%s", argv[i]);
		rank = strtok(buf, ":");
		id = strtok(NULL, ":");
		when = strtok(NULL, ":");
		acts = strtok(NULL, ":");
		if (!rank || !id || !when) {
			fprintf(stderr, "kineto_serve: bad capture %s\n", argv[i]);
			return 2;
		}
		if (!strncmp(when, "steps=", 6))
			steps = atoi(when + 6);
		else if (!strncmp(when, "seconds=", 8))
			seconds = atoi(when + 8);
		if (kineto_arm(&k, atoi(rank), id, steps, seconds, acts) != 0) {
			fprintf(stderr, "kineto_serve: %s\n", k.last_error);
			return 2;
		}
		armed++;
	}
	fprintf(stderr, "kineto_serve: serving %s with %d capture(s) armed\n",
		name ? name : KINETO_DAEMON_NAME, armed);
	end = time(NULL) + timeout_s;
	while (finished < armed && time(NULL) < end) {
		struct pollfd pf = { k.fd, POLLIN, 0 };
		struct kineto_done d;

		poll(&pf, 1, 200);
		while (kineto_handle(&k) == 1)
			;
		while (kineto_check(&k, &d) == 1) {
			finished++;
			ok += d.ok;
			printf("done %s rank %d pid %d %s %s\n", d.id, d.rank, (int)d.pid,
			       d.ok ? "ok" : "failed", d.ok ? d.path : d.why);
			fflush(stdout);
		}
	}
	fprintf(stderr, "kineto_serve: %d of %d capture(s) finished, %d whole; %u poll(s), "
		"%u datagram(s) dropped\n", finished, armed, ok, k.polls, k.dropped);
	kineto_close(&k);
	return ok == armed ? 0 : 1;
}
