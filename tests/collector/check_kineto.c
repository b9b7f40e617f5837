/*
 * check_kineto.c: collector/kineto.c, the collector as the node's Kineto
 * daemon, against fake_kineto (a process that speaks Kineto's side of the
 * IPC fabric byte for byte) and against raw datagrams. Each test binds its
 * own endpoint name, never "dynolog", and a spool under /tmp.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kineto.h"
#include "suites.h"

static char name[64];
static char spool[64];
static struct kineto k;

struct child {
	const char *env[6];	/* "K=V", NULL-ended: its whole environment besides the wait */
	const char *argv[12];	/* the steps after the daemon's name, NULL-ended */
	pid_t pid;
	int out;		/* its stdout, read while it runs */
	int status;
	char text[8192];
	size_t len;
};

static void setup(void)
{
	snprintf(name, sizeof(name), "trainscope-test-kineto-%d", (int)getpid());
	snprintf(spool, sizeof(spool), "/tmp/tskineto-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(spool));
	ck_assert_int_eq(kineto_open(&k, name, NULL, spool), 0);
}

static void teardown(void)
{
	char cmd[128];

	kineto_close(&k);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", spool);
	ck_assert_int_eq(system(cmd), 0);
}

static void start(struct child *c)
{
	const char *argv[16] = { FAKE_KINETO_BIN, name };
	const char *env[8];
	int p[2], n = 0, a = 2;

	for (; c->env[n]; n++)
		env[n] = c->env[n];
	env[n++] = "FAKE_KINETO_WAIT_MS=10000";
	env[n] = NULL;
	for (int i = 0; c->argv[i]; i++)
		argv[a++] = c->argv[i];
	argv[a] = NULL;
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	c->pid = fork();
	ck_assert_int_ge(c->pid, 0);
	if (c->pid == 0) {
		dup2(p[1], 1);
		execve(FAKE_KINETO_BIN, (char *const *)argv, (char *const *)env);
		_exit(127);
	}
	close(p[1]);
	/* read while serving: never wait on a child that waits on the daemon */
	ck_assert_int_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	c->out = p[0];
	c->len = 0;
	c->text[0] = 0;
}

/* Serve the daemon until every child has exited and said all; their exit statuses in c[i].status. */
static void serve(struct child *c, int n)
{
	time_t deadline = time(NULL) + 30;
	int open_ = n;

	while (open_ > 0) {
		struct pollfd pf[8];
		int m = 0;

		ck_assert_msg(time(NULL) < deadline, "fake_kineto did not finish in 30 s");
		pf[m].fd = k.fd;
		pf[m++].events = POLLIN;
		for (int i = 0; i < n; i++) {
			pf[m].fd = c[i].out;
			pf[m++].events = POLLIN;
		}
		poll(pf, (nfds_t)m, 20);
		while (kineto_handle(&k) == 1)
			;
		for (int i = 0; i < n; i++) {
			ssize_t got;

			if (c[i].out < 0)
				continue;
			got = read(c[i].out, c[i].text + c[i].len, sizeof(c[i].text) - 1 - c[i].len);
			if (got > 0) {
				c[i].len += (size_t)got;
				c[i].text[c[i].len] = 0;
			} else if (got == 0 || errno != EAGAIN) {
				close(c[i].out);
				c[i].out = -1;
				ck_assert_int_eq(waitpid(c[i].pid, &c[i].status, 0), c[i].pid);
				open_--;
			}
		}
	}
}

static void run1(struct child *c)
{
	start(c);
	serve(c, 1);
	ck_assert_msg(WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0,
		      "fake_kineto failed (%d): %s", c->status, c->text);
}

/* the value of KEY in a config text, or NULL (static buffer) */
static const char *key(const char *cfg, const char *key)
{
	static char v[4096];
	size_t kl = strlen(key);

	for (const char *l = cfg; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == '=') {
			size_t n = strcspn(l + kl + 1, "\n");

			snprintf(v, sizeof(v), "%.*s", (int)n, l + kl + 1);
			return v;
		}
	return NULL;
}

/* the config a child printed after "config N\n" */
static const char *config_of(const struct child *c, int nth)
{
	const char *at = c->text;

	for (int i = 0; i <= nth; i++) {
		at = strstr(at, "config ");
		ck_assert_ptr_nonnull(at);
		if (i < nth)
			at++;
	}
	return at;
}

START_TEST(registers_and_counts_the_job)
{
	struct child a = { .env = { "SLURM_JOB_ID=77", "RANK=3", NULL }, .argv = { "ctxt", "5", NULL } };
	struct child b = { .env = { "SLURM_JOB_ID=77", "LOCAL_RANK=1", NULL }, .argv = { "ctxt", "1", NULL } };
	struct child c = { .env = { "SLURM_JOB_ID=78", NULL }, .argv = { "ctxt", "0", NULL } };

	/* dynolog answers a registration with the number of the job's processes */
	run1(&a);
	ck_assert_str_eq(a.text, "ctxt 1\n");
	run1(&b);
	ck_assert_str_eq(b.text, "ctxt 2\n");
	run1(&c);
	ck_assert_str_eq(c.text, "ctxt 1\n");
	ck_assert_uint_eq(k.registered, 3);
	ck_assert_uint_eq(k.dropped, 0);
}
END_TEST

START_TEST(poll_with_nothing_armed_gets_an_empty_config)
{
	struct child a = { .env = { "RANK=0", NULL }, .argv = { "req", "req", NULL } };

	run1(&a);
	/* a Metadata of size 0, type "req": Kineto reads "" and keeps going */
	ck_assert_str_eq(a.text, "config 0\nconfig 0\n");
	ck_assert_uint_eq(k.polls, 2);
	ck_assert_uint_eq(k.registered, 1);
	ck_assert_uint_eq(k.handed, 0);
}
END_TEST

START_TEST(armed_capture_by_steps_key_by_key)
{
	struct child a = { .env = { "RANK=2", NULL }, .argv = { "req", "req", NULL } };
	char want[256];
	const char *cfg;

	ck_assert_int_eq(kineto_arm(&k, 2, "42", 3, 0, "cpu,cuda,stacks"), 0);
	run1(&a);
	cfg = config_of(&a, 0);
	ck_assert_msg(strncmp(cfg, "config 0\n", 9) != 0, "no config: %s", a.text);
	snprintf(want, sizeof(want), "%s/kineto-%d-c42.trace", spool, (int)a.pid);
	ck_assert_str_eq(key(cfg, "ACTIVITIES_LOG_FILE"), want);
	ck_assert_str_eq(key(cfg, "PROFILE_START_ITERATION"), "0");
	ck_assert_str_eq(key(cfg, "PROFILE_START_ITERATION_ROUNDUP"), "1");
	ck_assert_str_eq(key(cfg, "ACTIVITIES_ITERATIONS"), "3");
	ck_assert_str_eq(key(cfg, "PROFILE_REPORT_INPUT_SHAPES"), "true");
	ck_assert_str_eq(key(cfg, "PROFILE_PROFILE_MEMORY"), "false");
	ck_assert_str_eq(key(cfg, "PROFILE_WITH_STACK"), "true");
	ck_assert_str_eq(key(cfg, "REQUEST_TRACE_ID"), "42");
	ck_assert_ptr_null(key(cfg, "ACTIVITIES_DURATION_MSECS"));
	ck_assert_ptr_null(key(cfg, "ACTIVITY_TYPES"));
	/* PROFILE_MEMORY would send the trace to Kineto's memory snapshot file */
	ck_assert_ptr_null(key(cfg, "PROFILE_MEMORY"));
	/* handed once: the second poll is empty again */
	ck_assert_str_eq(config_of(&a, 1), "config 0\n");
	ck_assert_uint_eq(k.handed, 1);
	ck_assert_uint_eq(k.narms, 0);
}
END_TEST

START_TEST(armed_capture_by_seconds_key_by_key)
{
	struct child a = { .env = { "RANK=0", NULL }, .argv = { "req", NULL } };
	const char *cfg;

	ck_assert_int_eq(kineto_arm(&k, 0, "c-7", 0, 7, "cuda,memory"), 0);
	run1(&a);
	cfg = config_of(&a, 0);
	ck_assert_str_eq(key(cfg, "PROFILE_START_TIME"), "0");
	ck_assert_str_eq(key(cfg, "ACTIVITIES_DURATION_MSECS"), "7000");
	ck_assert_ptr_null(key(cfg, "ACTIVITIES_ITERATIONS"));
	ck_assert_ptr_null(key(cfg, "PROFILE_START_ITERATION"));
	ck_assert_str_eq(key(cfg, "PROFILE_REPORT_INPUT_SHAPES"), "false");
	ck_assert_str_eq(key(cfg, "PROFILE_PROFILE_MEMORY"), "true");
	ck_assert_str_eq(key(cfg, "PROFILE_WITH_STACK"), "false");
	ck_assert_ptr_nonnull(strstr(key(cfg, "ACTIVITY_TYPES"), "kernel"));
	ck_assert_ptr_null(strstr(key(cfg, "ACTIVITY_TYPES"), "cpu_op"));
	ck_assert_ptr_nonnull(strstr(key(cfg, "ACTIVITIES_LOG_FILE"), "-cc-7.trace"));
}
END_TEST

START_TEST(two_ranks_only_the_armed_one_traces)
{
	struct child c[2] = {
		{ .env = { "RANK=0", NULL }, .argv = { "req", NULL } },
		{ .env = { "LOCAL_RANK=1", NULL }, .argv = { "req", "write", NULL } },
	};
	struct kineto_done d;
	char want[256];
	struct stat st;

	ck_assert_int_eq(kineto_arm(&k, 1, "9", 2, 0, NULL), 0);
	start(&c[0]);
	start(&c[1]);
	serve(c, 2);
	/* rank 0 got nothing */
	ck_assert_str_eq(c[0].text, "config 0\n");
	ck_assert_int_eq(WEXITSTATUS(c[0].status), 0);
	ck_assert_int_eq(WEXITSTATUS(c[1].status), 0);
	ck_assert_ptr_nonnull(strstr(c[1].text, "\nwrote "));
	ck_assert_int_eq(kineto_check(&k, &d), 1);
	ck_assert_int_eq(d.ok, 1);
	ck_assert_str_eq(d.id, "9");
	ck_assert_int_eq(d.rank, 1);
	ck_assert_int_eq(d.pid, c[1].pid);
	snprintf(want, sizeof(want), "%s/kineto-%d-c9.pt.trace.json", spool, (int)c[1].pid);
	ck_assert_str_eq(d.path, want);
	ck_assert_int_eq(kineto_json_complete(d.path), 1);
	snprintf(want, sizeof(want), "%s/kineto-%d-c9.trace", spool, (int)c[1].pid);
	ck_assert_int_eq(stat(want, &st), -1);
	ck_assert_int_eq(kineto_check(&k, &d), 0);
}
END_TEST

START_TEST(a_capture_goes_to_its_run_and_rank)
{
	struct child c[3] = {
		{ .env = { "TRAINSCOPE_RUN=other", "RANK=0", NULL }, .argv = { "req", NULL } },
		/* TRAINSCOPE_RANK first, as the collector takes its own rank */
		{ .env = { "TRAINSCOPE_RUN=mine", "TRAINSCOPE_RANK=0", "RANK=5", NULL },
		  .argv = { "req", NULL } },
		{ .env = { "RANK=7", NULL }, .argv = { "req", NULL } },
	};
	int ranks[4] = { -9, -9, -9, -9 };

	k.run = "mine";
	ck_assert_int_eq(kineto_arm(&k, 0, "r1", 1, 0, NULL), 0);
	start(&c[0]);
	start(&c[1]);
	start(&c[2]);
	serve(c, 3);
	ck_assert_str_eq(c[0].text, "config 0\n");
	ck_assert_str_eq(key(config_of(&c[1], 0), "REQUEST_TRACE_ID"), "r1");
	ck_assert_str_eq(c[2].text, "config 0\n");
	ck_assert_uint_eq(k.handed, 1);
	/* the ranks this run's processes have, the other run's left out */
	ck_assert_uint_eq(kineto_ranks(&k, ranks, 4), 2);
	ck_assert_int_eq(ranks[0], 0);
	ck_assert_int_eq(ranks[1], 7);
	ck_assert_int_eq(ranks[2], -9);
	ck_assert_uint_eq(kineto_ranks(&k, ranks, 1), 2);
}
END_TEST

START_TEST(a_process_whose_kineto_writes_elsewhere_is_warned_of)
{
	struct child a = { .env = { "RANK=0", "KINETO_ONDEMAND_TRACE_DIR=/var/traces", NULL },
			   .argv = { "req", NULL } };
	struct child b = { .env = { "RANK=1", "KINETO_ONDEMAND_TRACE_DIR=/tmp", NULL },
			   .argv = { "req", NULL } };

	/* the spool is under /tmp/: rank 1's folder holds it, rank 0's does not */
	ck_assert_int_eq(kineto_arm(&k, 0, "w0", 1, 0, NULL), 0);
	ck_assert_int_eq(kineto_arm(&k, 1, "w1", 1, 0, NULL), 0);
	run1(&a);
	ck_assert_uint_eq(k.handed, 1);
	ck_assert_uint_eq(k.misplaced, 1);
	run1(&b);
	ck_assert_uint_eq(k.handed, 2);
	ck_assert_uint_eq(k.misplaced, 1);
}
END_TEST

START_TEST(an_unfinished_trace_is_not_taken)
{
	struct child a = { .env = { "RANK=4", NULL }, .argv = { "req", "half", "sleep", "3000", NULL } };
	struct kineto_done d;

	ck_assert_int_eq(kineto_arm(&k, KINETO_ANY_RANK, "5", 1, 0, "cpu"), 0);
	start(&a);
	/* serve until the half file is there, check while the process still lives */
	for (int i = 0; i < 500 && !strstr(a.text, "wrote "); i++) {
		ssize_t got;

		usleep(10000);
		while (kineto_handle(&k) == 1)
			;
		got = read(a.out, a.text + a.len, sizeof(a.text) - 1 - a.len);
		if (got > 0) {
			a.len += (size_t)got;
			a.text[a.len] = 0;
		}
	}
	ck_assert_ptr_nonnull(strstr(a.text, "wrote "));
	ck_assert_str_eq(key(config_of(&a, 0), "ACTIVITY_TYPES"),
			 "cpu_op,user_annotation,python_function,cpu_instant_event");
	ck_assert_int_eq(kineto_check(&k, &d), 0);
	serve(&a, 1);
	/* the process exited with its trace unfinished: failed, with why */
	ck_assert_int_eq(kineto_check(&k, &d), 1);
	ck_assert_int_eq(d.ok, 0);
	ck_assert_str_eq(d.id, "5");
	ck_assert_ptr_nonnull(strstr(d.why, "exited before its trace was written"));
}
END_TEST

START_TEST(a_process_that_goes_away)
{
	struct child a = { .env = { "RANK=0", NULL }, .argv = { "req", NULL } };
	struct child b = { .env = { "RANK=1", NULL }, .argv = { "req", NULL } };
	struct kineto_done d;

	ck_assert_int_eq(kineto_arm(&k, 0, "11", 0, 2, NULL), 0);
	run1(&a);
	run1(&b);
	ck_assert_uint_eq(k.handed, 1);
	/* both exited: a's capture failed, b forgotten */
	ck_assert_int_eq(kineto_check(&k, &d), 1);
	ck_assert_int_eq(d.ok, 0);
	ck_assert_int_eq(d.pid, a.pid);
	ck_assert_ptr_nonnull(strstr(d.why, "exited"));
	ck_assert_int_eq(kineto_check(&k, &d), 0);
	ck_assert_uint_eq(k.gone, 2);
	ck_assert_uint_eq(k.nprocs, 0);
}
END_TEST

/* a raw datagram from a socket bound to an abstract name (or unbound) */
static void raw(int fd, const void *b, size_t n)
{
	struct sockaddr_un to;

	memset(&to, 0, sizeof(to));
	to.sun_family = AF_UNIX;
	memcpy(to.sun_path + 1, name, strlen(name));
	ck_assert_int_eq(sendto(fd, b, n, 0, (struct sockaddr *)&to,
				(socklen_t)(sizeof(sa_family_t) + strlen(name) + 2)), (ssize_t)n);
}

START_TEST(malformed_and_oversized_datagrams_are_dropped)
{
	struct child a = { .env = { "RANK=0", NULL }, .argv = { "req", NULL } };
	unsigned char b[8192];
	uint64_t sz;
	struct sockaddr_un me;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0), anon = socket(AF_UNIX, SOCK_DGRAM, 0);
	char answer[64];
	int32_t req[5] = { 2, 1, 0, 0, 1234 };

	memset(&me, 0, sizeof(me));
	me.sun_family = AF_UNIX;
	snprintf(me.sun_path + 1, sizeof(me.sun_path) - 1, "%s-raw", name);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&me,
			      (socklen_t)(sizeof(sa_family_t) + strlen(me.sun_path + 1) + 2)), 0);
	memset(b, 0, sizeof(b));
	raw(fd, b, 10);					/* shorter than Metadata */
	sz = 100;
	memcpy(b, &sz, 8);
	memcpy(b + 8, "req", 4);
	raw(fd, b, 40 + 16);				/* size says 100, 16 came */
	sz = sizeof(b) - 40;
	memcpy(b, &sz, 8);
	raw(fd, b, sizeof(b));				/* 8 KiB */
	sz = 4;
	memcpy(b, &sz, 8);
	memcpy(b + 8, "hello", 6);
	raw(fd, b, 44);					/* unknown type */
	memset(b + 8, 'x', 32);
	raw(fd, b, 44);					/* type without NUL */
	sz = 20;
	memcpy(b, &sz, 8);
	memset(b + 8, 0, 32);
	memcpy(b + 8, "req", 4);
	req[1] = 3;
	memcpy(b + 40, req, 20);
	raw(fd, b, 60);					/* n = 3 pids in room for 1 */
	req[1] = 1;
	req[4] = -5;
	memcpy(b + 40, req, 20);
	raw(fd, b, 60);					/* pid -5 */
	sz = 8;
	memcpy(b, &sz, 8);
	memcpy(b + 8, "ctxt", 5);
	raw(fd, b, 48);					/* ctxt of 8 bytes, not 16 */
	req[4] = 1234;
	sz = 20;
	memcpy(b, &sz, 8);
	memcpy(b + 8, "req", 4);
	memcpy(b + 40, req, 20);
	raw(anon, b, 60);				/* well formed, from an unnamed socket */
	for (int i = 0; i < 9; i++)
		ck_assert_int_eq(kineto_handle(&k), 1);
	ck_assert_int_eq(kineto_handle(&k), 0);
	ck_assert_uint_eq(k.dropped, 9);
	ck_assert_ptr_nonnull(strstr(k.last_error, "unnamed"));
	ck_assert_uint_eq(k.registered, 0);
	/* nothing was answered */
	ck_assert_int_eq(recv(fd, answer, sizeof(answer), MSG_DONTWAIT), -1);
	/* and the daemon still serves */
	run1(&a);
	ck_assert_str_eq(a.text, "config 0\n");
	close(fd);
	close(anon);
}
END_TEST

START_TEST(the_kernel_names_the_sender_not_its_message)
{
	unsigned char b[64], answer[4096];
	struct sockaddr_un me;
	uint64_t sz = 20;
	int32_t req[5] = { 2, 1, 0, 0, 1 };	/* claims to be pid 1 */
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	char want[128];
	ssize_t got;

	memset(&me, 0, sizeof(me));
	me.sun_family = AF_UNIX;
	snprintf(me.sun_path + 1, sizeof(me.sun_path) - 1, "%s-spoof", name);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&me,
			      (socklen_t)(sizeof(sa_family_t) + strlen(me.sun_path + 1) + 2)), 0);
	ck_assert_int_eq(kineto_arm(&k, KINETO_ANY_RANK, "s1", 1, 0, NULL), 0);
	memset(b, 0, sizeof(b));
	memcpy(b, &sz, 8);
	memcpy(b + 8, "req", 4);
	memcpy(b + 40, req, 20);
	raw(fd, b, 60);
	ck_assert_int_eq(kineto_handle(&k), 1);
	got = recv(fd, answer, sizeof(answer) - 1, 0);
	ck_assert_int_gt(got, 40);
	answer[got] = 0;
	ck_assert_str_eq((char *)answer + 8, "req");
	/* the trace is asked for under the sender's real pid */
	snprintf(want, sizeof(want), "%s/kineto-%d-cs1.trace", spool, (int)getpid());
	ck_assert_str_eq(key((char *)answer + 40, "ACTIVITIES_LOG_FILE"), want);
	close(fd);
}
END_TEST

START_TEST(a_config_that_does_not_reach_its_process_is_kept)
{
	struct child a = { .env = { "RANK=0", NULL }, .argv = { "req", NULL } };
	unsigned char b[64];
	struct sockaddr_un me;
	uint64_t sz = 20;
	int32_t req[5] = { 2, 1, 0, 0, 1 };
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);

	memset(&me, 0, sizeof(me));
	me.sun_family = AF_UNIX;
	snprintf(me.sun_path + 1, sizeof(me.sun_path) - 1, "%s-gone", name);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&me,
			      (socklen_t)(sizeof(sa_family_t) + strlen(me.sun_path + 1) + 2)), 0);
	ck_assert_int_eq(kineto_arm(&k, KINETO_ANY_RANK, "g1", 1, 0, NULL), 0);
	ck_assert_int_eq(kineto_arm(&k, KINETO_ANY_RANK, "g2", 1, 0, NULL), 0);
	memset(b, 0, sizeof(b));
	memcpy(b, &sz, 8);
	memcpy(b + 8, "req", 4);
	memcpy(b + 40, req, 20);
	raw(fd, b, 60);
	close(fd);	/* the poller is gone before its answer: sendmsg fails */
	ck_assert_int_eq(kineto_handle(&k), 1);
	ck_assert_uint_eq(k.handed, 0);
	ck_assert_uint_eq(k.narms, 2);
	/* kept first in line: the next process takes g1, not g2 */
	run1(&a);
	ck_assert_str_eq(key(config_of(&a, 0), "REQUEST_TRACE_ID"), "g1");
	ck_assert_uint_eq(k.handed, 1);
	ck_assert_uint_eq(k.narms, 1);
}
END_TEST

START_TEST(another_daemon_holds_the_name)
{
	struct kineto k2;
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	char other[80];

	/* a second collector on the same name */
	ck_assert_int_eq(kineto_open(&k2, name, NULL, spool), -1);
	ck_assert_int_eq(errno, EADDRINUSE);
	ck_assert_int_eq(k2.fd, -1);
	/* dynolog's way of binding (Endpoint.h): "\0name\0" */
	snprintf(other, sizeof(other), "%s-dyno", name);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path + 1, other, strlen(other));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a,
			      (socklen_t)(sizeof(sa_family_t) + strlen(other) + 2)), 0);
	ck_assert_int_eq(kineto_open(&k2, other, NULL, spool), -1);
	ck_assert_int_eq(errno, EADDRINUSE);
	close(fd);
	/* once it is gone the name is free */
	ck_assert_int_eq(kineto_open(&k2, other, NULL, spool), 0);
	kineto_close(&k2);
}
END_TEST

START_TEST(bad_arguments)
{
	struct kineto k2;

	ck_assert_int_eq(kineto_arm(&k, 0, "a/b", 1, 0, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "", 1, 0, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 1, 1, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 0, 0, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 10001, 0, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 0, 3601, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 1, 0, "cpu,gpu"), -1);
	ck_assert_ptr_nonnull(strstr(k.last_error, "gpu"));
	ck_assert_int_eq(kineto_arm(&k, -2, "1", 1, 0, NULL), -1);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 1, 0, NULL), 0);
	ck_assert_int_eq(kineto_arm(&k, 0, "1", 1, 0, NULL), -1);
	ck_assert_int_eq(kineto_cancel(&k, "1"), 1);
	ck_assert_int_eq(kineto_cancel(&k, "1"), 0);
	ck_assert_uint_eq(k.narms, 0);
	ck_assert_int_eq(kineto_open(&k2, "x", NULL, "relative"), -1);
	ck_assert_int_eq(kineto_open(&k2, "x", NULL, "/tmp/no-such-folder-for-kineto"), -1);
	ck_assert_int_eq(kineto_open(&k2, "x", NULL, "/tmp/a.json"), -1);
}
END_TEST

START_TEST(json_end_check)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/t.trace", spool);
	ck_assert_int_eq(kineto_json_complete(path), 0);
	f = fopen(path, "w");
	fputs("{\"traceEvents\": [", f);
	fclose(f);
	ck_assert_int_eq(kineto_json_complete(path), 0);
	f = fopen(path, "a");
	fputs("{\"name\": \"a\", \"args\": {}}", f);
	fclose(f);
	/* cut after an event: it ends with '}' too */
	ck_assert_int_eq(kineto_json_complete(path), 0);
	f = fopen(path, "a");
	fputs("],\"traceName\": \"x\" }\n\n", f);
	fclose(f);
	ck_assert_int_eq(kineto_json_complete(path), 1);
	f = fopen(path, "w");
	fputs("{\"traceEvents\": [{\"ph\": \"X\"}] }", f);
	fclose(f);
	ck_assert_int_eq(kineto_json_complete(path), 1);
	ck_assert_int_eq(kineto_parse_activities("memory,cpu"), KINETO_ACT_MEMORY | KINETO_ACT_CPU);
	ck_assert_int_eq(kineto_parse_activities(NULL), KINETO_ACT_CPU | KINETO_ACT_CUDA);
	ck_assert_int_eq(kineto_parse_activities("cpu,"), KINETO_ACT_CPU);
	ck_assert_int_eq(kineto_parse_activities("cp"), -1);
}
END_TEST

Suite *suite_kineto(void)
{
	Suite *s = suite_create("kineto");
	TCase *tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, registers_and_counts_the_job);
	tcase_add_test(tc, poll_with_nothing_armed_gets_an_empty_config);
	tcase_add_test(tc, armed_capture_by_steps_key_by_key);
	tcase_add_test(tc, armed_capture_by_seconds_key_by_key);
	tcase_add_test(tc, two_ranks_only_the_armed_one_traces);
	tcase_add_test(tc, a_capture_goes_to_its_run_and_rank);
	tcase_add_test(tc, a_process_whose_kineto_writes_elsewhere_is_warned_of);
	tcase_add_test(tc, an_unfinished_trace_is_not_taken);
	tcase_add_test(tc, a_process_that_goes_away);
	tcase_add_test(tc, malformed_and_oversized_datagrams_are_dropped);
	tcase_add_test(tc, the_kernel_names_the_sender_not_its_message);
	tcase_add_test(tc, a_config_that_does_not_reach_its_process_is_kept);
	tcase_add_test(tc, another_daemon_holds_the_name);
	tcase_add_test(tc, bad_arguments);
	tcase_add_test(tc, json_end_check);
	suite_add_tcase(s, tc);
	return s;
}
