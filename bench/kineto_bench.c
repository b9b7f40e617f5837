/*
 * kineto_bench.c: what the collector's Kineto daemon endpoint
 * (collector/kineto.c) costs a poll. One process plays both sides: a client
 * socket sends Kineto's "req" (56 + 4 bytes of pids, as
 * IpcFabricConfigClient does), kineto_handle reads and answers it, the
 * client reads the answer. Kineto polls once every 5 s a process, and waits
 * about 90 ms for the answer.
 *
 *   build/bench/kineto_bench [POLLS]       (default 100000)
 *
 * Prints the round trip and the daemon's part (kineto_handle alone), wall
 * and CPU, per poll; best of 3. Exits 1 if an answer is missing or wrong.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kineto.h"

static double clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static socklen_t address(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, strlen(name));
	return (socklen_t)(sizeof(sa_family_t) + strlen(name) + 2);
}

int main(int argc, char **argv)
{
	long polls = argc > 1 ? atol(argv[1]) : 100000;
	char name[64], me_name[80], spool[] = "/tmp/kineto-bench-XXXXXX";
	struct sockaddr_un daemon, me;
	socklen_t daemon_len;
	unsigned char req[60], ans[4096];
	uint64_t sz = 20;
	int32_t body[5] = { 2, 1, 0, 0, 0 };
	double best_rt = 1e9, best_rt_cpu = 1e9, best_h = 1e9, best_h_cpu = 1e9;
	struct kineto k;
	int fd;

	if (polls <= 0 || !mkdtemp(spool))
		return 2;
	snprintf(name, sizeof(name), "kineto-bench-%d", (int)getpid());
	snprintf(me_name, sizeof(me_name), "%s-client", name);
	if (kineto_open(&k, name, NULL, spool) != 0)
		return 1;
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, address(&me, me_name)) != 0)
		return 1;
	daemon_len = address(&daemon, name);
	body[4] = (int32_t)getpid();
	memset(req, 0, sizeof(req));
	memcpy(req, &sz, 8);
	memcpy(req + 8, "req", 4);
	memcpy(req + 40, body, 20);
	for (int round = 0; round < 3; round++) {
		double h = 0, h_cpu = 0;
		double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);

		for (long i = 0; i < polls; i++) {
			double a, ac;

			if (sendto(fd, req, sizeof(req), 0, (struct sockaddr *)&daemon, daemon_len) != 60)
				return 1;
			a = clock_s(CLOCK_MONOTONIC);
			ac = clock_s(CLOCK_PROCESS_CPUTIME_ID);
			if (kineto_handle(&k) != 1)
				return 1;
			h += clock_s(CLOCK_MONOTONIC) - a;
			h_cpu += clock_s(CLOCK_PROCESS_CPUTIME_ID) - ac;
			/* the empty config: a 40-byte Metadata of size 0, type "req" */
			if (recv(fd, ans, sizeof(ans), 0) != 40 || strcmp((char *)ans + 8, "req") != 0) {
				fprintf(stderr, "kineto_bench: a wrong answer at poll %ld\n", i);
				return 1;
			}
		}
		if ((clock_s(CLOCK_MONOTONIC) - t0) / (double)polls < best_rt)
			best_rt = (clock_s(CLOCK_MONOTONIC) - t0) / (double)polls;
		if ((clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)polls < best_rt_cpu)
			best_rt_cpu = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)polls;
		if (h / (double)polls < best_h)
			best_h = h / (double)polls;
		if (h_cpu / (double)polls < best_h_cpu)
			best_h_cpu = h_cpu / (double)polls;
	}
	printf("kineto daemon, %ld polls x 3, best: round trip %.2f us (cpu %.2f us), "
	       "kineto_handle %.2f us (cpu %.2f us); at Kineto's one poll per 5 s a process: "
	       "%.5f%% of a core per process\n", polls, best_rt * 1e6, best_rt_cpu * 1e6,
	       best_h * 1e6, best_h_cpu * 1e6, best_h_cpu / 5.0 * 100.0);
	close(fd);
	kineto_close(&k);
	rmdir(spool);
	return 0;
}
