/*
 * check_collect_capture.c: on-demand capture on the collector's side
 * (issue 52): trainscope-collect run --captures and watch --captures
 * against a fake server that speaks the capture contract (docs/api.md), so
 * that the server's failures can be scripted: GET .../captures/next hands
 * out one scripted capture, artifacts and rank ends are recorded. The command is a fake
 * training process playing the CUPTI library's side of the spool contract
 * (.capture in, -c<ID> chunks and .capture-<ID>.done out); --cupti names
 * the script itself, so that run takes the command as traced by the
 * library (nothing loads it: the script has no CUDA). Checked: nothing
 * asked (no upload, no .capture); one capture end to end; the server going
 * away mid-capture; the backoff of the poll, while chunks still ship;
 * watch as the Kineto daemon for a fake PyTorch process; hostile ids. Where the CUPTI library is
 * built, the whole chain with it (cupti_host and the fake libcupti), and
 * the collector killed mid-window. Against the real server: a fresh job
 * with no upload (its poll lists the run) captured through the API.
 */
#define _GNU_SOURCE	/* asprintf */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect_util.h"
#include "suites.h"

/* ---- the fake server ---- */

#define FAKE_LOG 256

static struct fake {
	pthread_mutex_t mu;
	pthread_t th;
	int lfd, port, stop, handlers;
	int next_status;		/* 0: /next as the contract says; else every /next gets it */
	long hold_ms;			/* how long /next holds when there is nothing (300 ms unless said) */
	char capture[512];		/* the capture object /next hands out once; "" none */
	int taken;
	char log[FAKE_LOG][640];	/* "METHOD TARGET" [+ " " body for rank ends] */
	long long at[FAKE_LOG];		/* when, monotonic ms */
	int nlog;
} fk = { .mu = PTHREAD_MUTEX_INITIALIZER };

static long long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int listen_on(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	fk.port = ntohs(a.sin_port);
	return fd;
}

static void answer(int c, int status, const char *body)
{
	char msg[2048];
	int n = snprintf(msg, sizeof(msg), "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n%s", status, strlen(body), body);

	if (write(c, msg, (size_t)n) != n)
		fprintf(stderr, "fake server: short write\n");
}

/* One request on c: read whole (headers, then a Content-Length or chunked body), logged, answered. */
static void *handle(void *arg)
{
	int c = (int)(intptr_t)arg;
	static __thread char buf[1 << 16];
	size_t got = 0, head = 0, clen = 0;
	char method[8] = "", target[512] = "", *q, *body = "";
	int chunked = 0, continued = 0, i;

	for (;;) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		ssize_t n;
		if (poll(&p, 1, 5000) <= 0 || (n = read(c, buf + got, sizeof(buf) - 1 - got)) <= 0)
			goto out;
		got += (size_t)n;
		buf[got] = 0;
		if (!head && (q = strstr(buf, "\r\n\r\n"))) {
			head = (size_t)(q - buf) + 4;
			chunked = strcasestr(buf, "transfer-encoding: chunked") != NULL;
			if ((q = strcasestr(buf, "content-length:")))
				clen = (size_t)atol(q + 15);
		}
		if (head && !continued && strcasestr(buf, "100-continue")) {
			if (write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 25)
				goto out;
			continued = 1;
		}
		if (head && (chunked ? got >= head + 5 && !memcmp(buf + got - 5, "0\r\n\r\n", 5) : got >= head + clen))
			break;
		if (got >= sizeof(buf) - 1)
			goto out;
	}
	body = buf + head;
	sscanf(buf, "%7s %511s", method, target);
	pthread_mutex_lock(&fk.mu);
	if (fk.nlog < FAKE_LOG) {
		fk.at[fk.nlog] = mono_ms();
		snprintf(fk.log[fk.nlog++], sizeof(fk.log[0]), "%s %s%s%.100s", method, target,
			 strstr(target, "/ranks/") ? " " : "", strstr(target, "/ranks/") ? body : "");
	}
	pthread_mutex_unlock(&fk.mu);
	if (strstr(target, "/captures/next?")) {
		char capture[640] = "";
		int status;
		pthread_mutex_lock(&fk.mu);
		status = fk.next_status;
		if (!status && fk.capture[0] && !fk.taken) {
			fk.taken = 1;
			snprintf(capture, sizeof(capture), "{\"capture\":%s}", fk.capture);
		}
		pthread_mutex_unlock(&fk.mu);
		if (status)
			answer(c, status, "{\"error\":{\"code\":\"busy\",\"message\":\"try later\"}}");
		else if (capture[0])
			answer(c, 200, capture);
		else {
			/* a long poll: nothing within it */
			for (i = 0; i < fk.hold_ms / 50 && !fk.stop; i++)
				cl_sleep_ms(50);
			if (write(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n", 45) != 45)
				fprintf(stderr, "fake server: short write\n");
		}
	} else if (strstr(target, "/artifacts?")) {
		answer(c, 201, "{\"artifact\":{\"id\":1,\"status\":\"ready\"}}");
	} else if (strstr(target, "/ranks/")) {
		answer(c, 200, "{\"capture\":{}}");
	} else {
		answer(c, 404, "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}");
	}
out:
	close(c);
	pthread_mutex_lock(&fk.mu);
	fk.handlers--;
	pthread_mutex_unlock(&fk.mu);
	return NULL;
}

static void *acceptor(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p;
		pthread_t th;
		int c, lfd;

		pthread_mutex_lock(&fk.mu);
		lfd = fk.lfd;
		if (fk.stop) {
			pthread_mutex_unlock(&fk.mu);
			return NULL;
		}
		pthread_mutex_unlock(&fk.mu);
		if (lfd < 0) {
			cl_sleep_ms(20);
			continue;
		}
		p = (struct pollfd){ .fd = lfd, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0 || (c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		pthread_mutex_lock(&fk.mu);
		fk.handlers++;
		pthread_mutex_unlock(&fk.mu);
		if (pthread_create(&th, NULL, handle, (void *)(intptr_t)c) == 0)
			pthread_detach(th);
		else
			handle((void *)(intptr_t)c);
	}
}

static char server_env[64];

static void fake_start(void)
{
	cl_dir = tu_tmpdir();
	pthread_mutex_lock(&fk.mu);
	fk.stop = fk.taken = fk.nlog = fk.next_status = 0;
	fk.capture[0] = 0;
	fk.hold_ms = 300;
	pthread_mutex_unlock(&fk.mu);
	fk.lfd = listen_on(0);
	snprintf(server_env, sizeof(server_env), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", fk.port);
	ck_assert_int_eq(pthread_create(&fk.th, NULL, acceptor, NULL), 0);
}

static void fake_stop(void)
{
	int left = 1, i;

	pthread_mutex_lock(&fk.mu);
	fk.stop = 1;
	pthread_mutex_unlock(&fk.mu);
	pthread_join(fk.th, NULL);
	for (i = 0; i < 200 && left; i++) {
		pthread_mutex_lock(&fk.mu);
		left = fk.handlers;
		pthread_mutex_unlock(&fk.mu);
		cl_sleep_ms(10);
	}
	if (fk.lfd >= 0)
		close(fk.lfd);
	fk.lfd = -1;
	tu_rmtree(cl_dir);
	free(cl_dir);
	cl_dir = NULL;
}

/* The server goes away (connections refused), and comes back on the same port. */
static void fake_down(void)
{
	pthread_mutex_lock(&fk.mu);
	close(fk.lfd);
	fk.lfd = -1;
	pthread_mutex_unlock(&fk.mu);
}

static void fake_up(void)
{
	int fd = listen_on(fk.port);

	pthread_mutex_lock(&fk.mu);
	fk.lfd = fd;
	pthread_mutex_unlock(&fk.mu);
}

/* Index of the first log line from `from` on that contains what, or -1. */
static int logged(const char *what, int from)
{
	int i, found = -1;

	pthread_mutex_lock(&fk.mu);
	for (i = from; i < fk.nlog && found < 0; i++)
		if (strstr(fk.log[i], what))
			found = i;
	pthread_mutex_unlock(&fk.mu);
	return found;
}

static int count_logged(const char *what)
{
	int i, n = 0;

	pthread_mutex_lock(&fk.mu);
	for (i = 0; i < fk.nlog; i++)
		n += strstr(fk.log[i], what) != NULL;
	pthread_mutex_unlock(&fk.mu);
	return n;
}

/* Wait up to ms for what to be logged: its index, or -1. */
static int wait_logged(const char *what, long ms)
{
	long long end = mono_ms() + ms;
	int i;

	while ((i = logged(what, 0)) < 0 && mono_ms() < end)
		cl_sleep_ms(20);
	return i;
}

/* ---- the fake training process ---- */

/*
 * $1 the test's folder, $2 the mode, $3 seconds to stay. idle: stays, then
 * fails (3) if a request ever appeared. capture: waits for .capture, keeps
 * a copy, (with $4) says "taken" and waits for "go", writes one -c<ID>
 * chunk, then .capture-<ID>.done and removes .capture, as the library does.
 * Both write the capture mode they were given.
 */
static const char train_script[] =
	"#!/bin/sh\n"
	"s=\"$TRAINSCOPE_SPOOL\"; d=\"$1\"\n"
	"echo \"mode=$TRAINSCOPE_CAPTURE_MODE\" > \"$d/mode\"\n"
	"if [ \"$2\" = idle ]; then sleep \"$3\"; [ -e \"$s/.capture\" ] && exit 3; exit 0; fi\n"
	"i=0; while [ ! -e \"$s/.capture\" ]; do i=$((i+1)); [ $i -gt 400 ] && exit 4; sleep 0.05; done\n"
	"cp \"$s/.capture\" \"$d/request\"\n"
	"id=$(sed -n 's/^id=\\([A-Za-z0-9_-]*\\) .*/\\1/p' \"$s/.capture\")\n"
	"if [ -n \"$4\" ]; then touch \"$d/taken\"; while [ ! -e \"$d/go\" ]; do sleep 0.05; done; fi\n"
	"printf '{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":1,\"tid\":7,\"ts\":1,\"dur\":10}]}'"
	" > \"$s/.t\"\n"
	"mv \"$s/.t\" \"$s/trace-$$-0-c$id.pt.trace.json\"\n"
	"echo ok > \"$s/.d\" && mv \"$s/.d\" \"$s/.capture-$id.done\" && rm -f \"$s/.capture\"\n"
	"sleep \"$3\"\n";

static char *train(void)
{
	char *p = cl_path_in("train.sh");

	ck_assert_int_eq(tu_write_file(p, train_script, strlen(train_script)), 0);
	ck_assert_int_eq(chmod(p, 0700), 0);
	return p;
}

static char *text_in(const char *name)
{
	char *p = cl_path_in(name), *t;
	size_t len;

	t = (char *)tu_read_file(p, &len);
	free(p);
	return t ? t : strdup("");
}

static void wait_file(const char *name, long ms)
{
	char *p = cl_path_in(name);
	long long end = mono_ms() + ms;

	while (access(p, F_OK) && mono_ms() < end)
		cl_sleep_ms(20);
	ck_assert_msg(access(p, F_OK) == 0, "%s never appeared", name);
	free(p);
}

/* ---- the tests ---- */

/*
 * --captures and nothing asked: polls, but no upload, no .capture, the
 * library in on-demand mode; the long poll in flight (held 20 s) does not
 * hold the collector's exit.
 */
START_TEST(test_capture_nothing_asked)
{
	char *sh = train(), *spool = cl_path_in("spool"), *err, *mode;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", sh, "--spool", spool, "--", sh, cl_dir,
			       "idle", "1.5", NULL };
	const char *env[] = { server_env, NULL };
	long long t0 = mono_ms();

	fk.hold_ms = 20000;
	ck_assert_int_eq(cl_collect("run", args, env), 0);
	ck_assert_int_lt(mono_ms() - t0, 5000);
	err = cl_output("run", "err");
	ck_assert_int_eq(count_logged("GET /api/v1/runs/r1/captures/next?rank=0&wait=25"), 1);
	ck_assert_int_eq(count_logged("POST"), 0);
	mode = text_in("mode");
	ck_assert_str_eq(mode, "mode=ondemand\n");
	ck_assert_msg(strstr(err, "captures on: asking") && strstr(err, "; ask for one at http://127.0.0.1:") &&
		      strstr(err, "/runs/r1\n"), "%s", err);
	free(mode);
	free(err);
	free(spool);
	free(sh);
}
END_TEST

/* Without --captures: no poll, and the mode is not on demand even if the caller's shell set it. */
START_TEST(test_capture_off_by_default)
{
	char *sh = train(), *spool = cl_path_in("spool"), *mode;
	const char *args[] = { "run", "--run", "r1", "--cupti", "none", "--spool", spool, "--", sh, cl_dir, "idle",
			       "0.5", NULL };
	const char *env[] = { server_env, "TRAINSCOPE_CAPTURE_MODE=ondemand", NULL };

	ck_assert_int_eq(cl_collect("run", args, env), 0);
	ck_assert_int_eq(count_logged("captures"), 0);
	mode = text_in("mode");
	ck_assert_str_eq(mode, "mode=\n");
	free(mode);
	free(spool);
	free(sh);
}
END_TEST

/* One capture: taken, asked through .capture, its chunk uploaded with &capture=, then the rank's end. */
START_TEST(test_capture_end_to_end)
{
	char *sh = train(), *spool = cl_path_in("spool"), *req, *err, *done;
	const char *args[] = { "run", "--run", "r1", "--rank", "3", "--captures", "--cupti", sh, "--spool", spool,
			       "--", sh, cl_dir, "capture", "1", NULL };
	const char *env[] = { server_env, "TRAINSCOPE_CAPTURES=0", NULL };
	int up, end, rc;

	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":41,\"run\":\"r1\",\"steps\":5,\"seconds\":null,"
		 "\"ranks\":[3],\"activities\":[\"cpu\",\"cuda\",\"memory\"],\"state\":\"pending\"}");
	rc = cl_collect("run", args, env);
	err = cl_output("run", "err");
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	req = text_in("request");
	ck_assert_str_eq(req, "id=41 steps=5 seconds=0 activities=cpu,cuda,memory\n");
	ck_assert_int_ge(logged("GET /api/v1/runs/r1/captures/next?rank=3&wait=25", 0), 0);
	up = logged("POST /api/v1/runs/r1/artifacts?rank=3&name=trace-", 0);
	ck_assert_msg(up >= 0 && strstr(fk.log[up], "-c41.pt.trace.json&capture=41"), "%s", err);
	end = logged("POST /api/v1/captures/41/ranks/3 {\"state\":\"done\",\"reason\":\"\"}", 0);
	ck_assert_msg(end > up, "the end (%d) after the chunk (%d): %s", end, up, err);
	ck_assert_int_eq(count_logged("/ranks/"), 1);
	/* the spool is left clean: the chunk shipped, .done read and removed, .capture removed */
	done = cl_path_in("spool/.capture-41.done");
	ck_assert_int_ne(access(done, F_OK), 0);
	free(done);
	done = cl_path_in("spool/.capture");
	ck_assert_int_ne(access(done, F_OK), 0);
	free(done);
	ck_assert_msg(strstr(err, "capture 41 taken: the next 5 step(s)") && strstr(err, "capture 41: done"), "%s", err);
	free(req);
	free(err);
	free(spool);
	free(sh);
}
END_TEST

/* The server goes away mid-capture: the chunk waits in the spool, and goes, then the end, when it is back. */
START_TEST(test_capture_server_away)
{
	char *sh = train(), *spool = cl_path_in("spool"), *go = cl_path_in("go"), *err, *chunk = NULL;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", sh, "--spool", spool, "--", sh, cl_dir,
			       "capture", "0", "wait", NULL };
	const char *env[] = { server_env, NULL };
	struct dirent **names;
	pid_t pid;
	int n, i, up, end;

	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":\"cap-7\",\"run\":\"r1\",\"steps\":null,\"seconds\":30}");
	pid = cl_spawn("run", args, env);
	wait_file("taken", 10000);
	fake_down();
	ck_assert_int_eq(tu_write_file(go, "", 0), 0);
	/* the command ends; the chunk stays while the collector retries */
	cl_sleep_ms(1500);
	n = scandir(spool, &names, NULL, alphasort);
	ck_assert_int_ge(n, 0);
	for (i = 0; i < n; i++) {
		if (strstr(names[i]->d_name, "-ccap-7.pt.trace.json"))
			chunk = strdup(names[i]->d_name);
		free(names[i]);
	}
	free(names);
	ck_assert_msg(chunk != NULL, "the chunk is kept in the spool while the server is away");
	ck_assert_int_lt(logged("/artifacts", 0), 0);
	fake_up();
	ck_assert_int_eq(cl_reap(pid), 0);
	err = cl_output("run", "err");
	up = logged("&capture=cap-7", 0);
	end = logged("POST /api/v1/captures/cap-7/ranks/0 {\"state\":\"done\"", 0);
	ck_assert_msg(up >= 0 && end > up, "upload %d, end %d: %s", up, end, err);
	free(err);
	free(chunk);
	free(go);
	free(spool);
	free(sh);
}
END_TEST

/* /next failing: the pauses grow (base 100 ms, at most 800 ms here); a chunk ships meanwhile. */
START_TEST(test_capture_backoff)
{
	char *spool = cl_path_in("spool"), *err;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", "none", "--spool", spool, "--", "sh", "-c",
			       "sleep 0.3; printf '{\"traceEvents\":[]}' > \"$TRAINSCOPE_SPOOL/.t\"; "
			       "mv \"$TRAINSCOPE_SPOOL/.t\" \"$TRAINSCOPE_SPOOL/trace-1-0.pt.trace.json\"; sleep 4",
			       NULL };
	/* --cupti none: the Kineto backend binds its name; a private one, never the node's "dynolog" */
	const char *env[] = { server_env, "TRAINSCOPE_RETRY_BASE_MS=100", "TRAINSCOPE_RETRY_MAX_MS=800",
			      "TRAINSCOPE_KINETO_NAME=ts-capture-backoff", NULL };
	long long t[64];
	int n = 0, i, up;

	fk.next_status = 503;
	ck_assert_int_eq(cl_collect("run", args, env), 0);
	err = cl_output("run", "err");
	pthread_mutex_lock(&fk.mu);
	for (i = 0; i < fk.nlog && n < 64; i++)
		if (strstr(fk.log[i], "/captures/next"))
			t[n++] = fk.at[i];
	pthread_mutex_unlock(&fk.mu);
	/* 4 s of 503s: 50-100, 100-200, 200-400, 400-800, then 400-800 ms each (jittered to [d/2, d]) */
	ck_assert_msg(n >= 5 && n <= 14, "%d polls: %s", n, err);
	ck_assert_msg(t[1] - t[0] < 250, "first pause %lld ms", t[1] - t[0]);
	for (i = 4; i < n; i++)
		ck_assert_msg(t[i] - t[i - 1] >= 350 && t[i] - t[i - 1] <= 1200, "pause %d: %lld ms", i,
			      t[i] - t[i - 1]);
	up = logged("name=trace-1-0.pt.trace.json", 0);
	ck_assert_msg(up >= 0 && !strstr(fk.log[up], "capture="), "the chunk ships while polling fails: %s", err);
	ck_assert_msg(strstr(err, "capture polling: 503"), "said once: %s", err);
	ck_assert_ptr_null(strstr(strstr(err, "capture polling: 503") + 1, "capture polling: 503"));
	free(err);
	free(spool);
}
END_TEST

/*
 * watch --captures is the node's Kineto daemon (capture_kineto.c, under a
 * private name here): a PyTorch-like process (fake_kineto, speaking Kineto's
 * IPC) polls, gets the capture's config, writes its trace; the collector
 * ships it with &capture=9 from the watched folder, then ends the rank done.
 */
START_TEST(test_capture_watch_kineto)
{
	char *dir = cl_path_in("w"), *err, name[64], envname[96], *out;
	const char *args[] = { "watch", "--run", "r1", "--captures", dir, NULL };
	const char *env[] = { server_env, envname, NULL };
	pid_t pid, kp;
	int end, up, st;

	snprintf(name, sizeof(name), "ts-capture-test-%d", (int)getpid());
	snprintf(envname, sizeof(envname), "TRAINSCOPE_KINETO_NAME=%s", name);
	ck_assert_int_eq(mkdir(dir, 0700), 0);
	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":9,\"steps\":2,\"activities\":[\"cpu\",\"cuda\"]}");
	pid = cl_spawn("watch", args, env);
	ck_assert_int_ge(wait_logged("/captures/next", 10000), 0);
	cl_sleep_ms(300);
	out = cl_path_in("kineto.out");
	kp = fork();
	ck_assert_int_ge(kp, 0);
	if (kp == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("RANK", "0", 1);
		setenv("TRAINSCOPE_RUN", "r1", 1);
		execl(FAKE_KINETO_BIN, FAKE_KINETO_BIN, name, "req", "write", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(kp, &st, 0), kp);
	end = wait_logged("POST /api/v1/captures/9/ranks/0", 15000);
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	err = cl_output("watch", "err");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fake_kineto: %d; %s", st, err);
	ck_assert_msg(end >= 0, "%s", err);
	ck_assert_msg(strstr(fk.log[end], "{\"state\":\"done\""), "%s / %s", fk.log[end], err);
	up = logged("c9.pt.trace.json&capture=9", 0);
	ck_assert_msg(up >= 0 && up < end, "upload %d, end %d: %s", up, end, err);
	ck_assert_msg(strstr(err, "(the Kineto daemon)"), "%s", err);
	free(out);
	free(err);
	free(dir);
}
END_TEST

/*
 * A hostile capture from the server: an id that would climb out of the
 * spool, and bad activities. Neither reaches the spool; each is said, and
 * polling goes on (with backoff); the command runs on.
 */
START_TEST(test_capture_hostile_ids)
{
	char *sh = train(), *spool = cl_path_in("spool"), *err;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", sh, "--spool", spool, "--", sh, cl_dir,
			       "idle", "1", NULL };
	const char *env[] = { server_env, NULL };

	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":\"../../etc/x\",\"steps\":1}");
	ck_assert_int_eq(cl_collect("run", args, env), 0);
	err = cl_output("run", "err");
	ck_assert_msg(strstr(err, "capture polling: the server's capture has no usable id"), "%s", err);
	ck_assert_int_eq(count_logged("POST"), 0);
	free(err);
	fk.taken = 0;
	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":5,\"seconds\":3,\"activities\":[\"cuda x=1\"]}");
	ck_assert_int_eq(cl_collect("run2", args, env), 0);
	err = cl_output("run2", "err");
	ck_assert_msg(strstr(err, "capture polling: capture 5: bad activities"), "%s", err);
	ck_assert_int_eq(count_logged("POST"), 0);
	free(err);
	free(spool);
	free(sh);
}
END_TEST

/* ---- against the real server (server/h_captures.c) ---- */

/* POST a capture of run with body; its id. */
static long ask(const char *run, const char *body)
{
	struct tu_resp r;
	char path[256];
	json_t *j;
	long id;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/captures", run);
	ck_assert_int_eq(tu_http(&cl_srv, "POST", path, body, strlen(body), "Content-Type: application/json", &r), 0);
	ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
	j = tu_json(&r);
	id = (long)json_integer_value(json_object_get(json_object_get(j, "capture"), "id"));
	json_decref(j);
	tu_resp_free(&r);
	return id;
}

/* GET path on the real server: its JSON (new reference), failing unless 200 */
static json_t *get_json(const char *path)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* Wait up to 10 s for run to be in the runs list, waiting for its first capture (its collector polled). */
static void wait_listed(const char *run)
{
	long long end = mono_ms() + 10000;
	int found = 0;

	while (!found && mono_ms() < end) {
		json_t *j = get_json("/api/v1/runs"), *e;
		size_t i;
		json_array_foreach(json_object_get(j, "runs"), i, e)
			found |= !strcmp(json_string_value(json_object_get(e, "name")), run) &&
				 json_is_true(json_object_get(e, "waiting_for_capture")) &&
				 json_integer_value(json_object_get(e, "artifacts")) == 0;
		json_decref(j);
		if (!found)
			cl_sleep_ms(50);
	}
	ck_assert_msg(found, "run '%s' never listed as waiting for its first capture", run);
}

/*
 * A fresh job, no seed upload (issue 52's gap): run --captures with the fake
 * training process against the real server. The collector's first poll lists
 * the run, waiting for its first capture, with when it polled; a capture
 * asked through the API is taken, its chunk lands in the run with it, the
 * rank ends it done, and the run waits no more.
 */
START_TEST(test_capture_fresh_run)
{
	char *sh = train(), *spool = cl_path_in("spool"), *err, path[128];
	const char *args[] = { "run", "--run", "fresh", "--captures", "--cupti", sh, "--spool", spool, "--", sh, cl_dir,
			       "capture", "1", NULL };
	json_t *j, *c, *rk, *run;
	long id;
	pid_t pid;
	int rc;

	pid = cl_spawn("run", args, NULL);
	wait_listed("fresh");
	j = get_json("/api/v1/runs/fresh/captures");
	ck_assert_uint_eq(json_array_size(json_object_get(j, "captures")), 0);
	ck_assert(json_is_integer(json_object_get(json_object_get(j, "polled"), "ago_s")));
	json_decref(j);
	id = ask("fresh", "{\"steps\": 2, \"requested_by\": \"check\"}");
	rc = cl_reap(pid);
	err = cl_output("run", "err");
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	snprintf(path, sizeof(path), "/api/v1/captures/%ld", id);
	j = get_json(path);
	c = json_object_get(j, "capture");
	ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "state")), "done"), "%s", err);
	rk = json_array_get(json_object_get(c, "by_rank"), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(rk, "rank")), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(rk, "artifacts")), 1);
	json_decref(j);
	j = get_json("/api/v1/runs/fresh");
	run = json_object_get(j, "run");
	ck_assert_int_eq(json_integer_value(json_object_get(run, "artifacts")), 1);
	ck_assert(json_is_false(json_object_get(run, "waiting_for_capture")));
	ck_assert_msg(strstr(json_string_value(json_object_get(json_array_get(json_object_get(j, "artifacts"), 0), "name")),
			     "-c"), "the capture's chunk");
	json_decref(j);
	free(err);
	free(spool);
	free(sh);
}
END_TEST

#ifdef CUPTI_HOST_BIN
/*
 * The whole chain where the CUPTI library is built: run --captures with the
 * real library in cupti_host against the fake libcupti (tests/collector/):
 * the capture asks for 3 steps of a 6-step loop; the library's window
 * closes at the start of the 4th, its chunk goes up with &capture=12, and
 * the rank's end is posted done after it.
 */
START_TEST(test_capture_with_the_library)
{
	char *spool = cl_path_in("spool"), *err;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", CUPTI_LIB, "--spool", spool, "--",
			       CUPTI_HOST_BIN, CUPTI_LIB, FAKE_CUPTI, "sleep:800", "steps:6:100", NULL };
	const char *env[] = { server_env, NULL };
	int rc, up, end;

	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":12,\"steps\":3,\"activities\":[\"cuda\"]}");
	rc = cl_collect("run", args, env);
	err = cl_output("run", "err");
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	ck_assert_msg(strstr(err, "trainscope-cupti: capture 12: 3 of 3 step(s)") && strstr(err, ": ok\n"), "%s", err);
	up = logged("-c12.pt.trace.json&capture=12", 0);
	end = logged("POST /api/v1/captures/12/ranks/0 {\"state\":\"done\"", 0);
	ck_assert_msg(up >= 0 && end > up, "upload %d, end %d: %s", up, end, err);
	/* nothing else was recorded: the library's chunks are the window's only */
	ck_assert_int_eq(count_logged("/artifacts?"), count_logged("&capture=12"));
	free(err);
	free(spool);
}
END_TEST

/*
 * The collector killed (SIGKILL) while the library's window is open: the
 * library closes it by itself after its steps; the chunk and the answer
 * stay in the spool for `upload`, and no end reaches the server.
 */
START_TEST(test_capture_collector_killed)
{
	char *spool = cl_path_in("spool"), *req = cl_path_in("spool/.capture"), *done, *text;
	const char *args[] = { "run", "--run", "r1", "--captures", "--cupti", CUPTI_LIB, "--spool", spool, "--",
			       CUPTI_HOST_BIN, CUPTI_LIB, FAKE_CUPTI, "sleep:800", "steps:8:150", NULL };
	const char *env[] = { server_env, NULL };
	struct dirent **names;
	long long end;
	int n, i, chunks = 0;
	size_t len;
	pid_t pid;

	snprintf(fk.capture, sizeof(fk.capture), "{\"id\":13,\"steps\":3}");
	pid = cl_spawn("run", args, env);
	for (end = mono_ms() + 10000; access(req, F_OK) && mono_ms() < end;)
		cl_sleep_ms(10);
	ck_assert_int_eq(access(req, F_OK), 0);
	kill(pid, SIGKILL);
	ck_assert_int_eq(cl_reap(pid), 128 + SIGKILL);
	done = cl_path_in("spool/.capture-13.done");
	for (end = mono_ms() + 10000; access(done, F_OK) && mono_ms() < end;)
		cl_sleep_ms(20);
	text = (char *)tu_read_file(done, &len);
	ck_assert_msg(text && !strcmp(text, "ok\n"), "the library answered by itself: %s", text ? text : "nothing");
	n = scandir(spool, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		chunks += strstr(names[i]->d_name, "-c13.pt.trace.json") != NULL;
		free(names[i]);
	}
	free(names);
	ck_assert_int_ge(chunks, 1);
	ck_assert_int_eq(count_logged("/ranks/"), 0);
	free(text);
	free(done);
	free(req);
	free(spool);
}
END_TEST

/*
 * The three halves together: the real server, run --captures, the real
 * library in cupti_host (the fake libcupti). A rank's loop of 40 steps is
 * captured twice while it runs, 3 steps then 1 s; both windows end done on
 * the server, each with its artifacts. Nothing is uploaded first: the
 * collector's poll lists the run.
 */
START_TEST(test_capture_real_server_twice)
{
	char *spool = cl_path_in("spool"), *err, want[96];
	const char *args[] = { "run", "--run", "live", "--captures", "--cupti", CUPTI_LIB, "--spool", spool, "--",
			       CUPTI_HOST_BIN, CUPTI_LIB, FAKE_CUPTI, "sleep:1500", "steps:40:100", NULL };
	json_t *caps, *c, *rk;
	struct tu_resp r;
	long first, second;
	size_t i;
	pid_t pid;
	int rc;

	pid = cl_spawn("run", args, NULL);
	wait_listed("live");
	first = ask("live", "{\"steps\": 3, \"requested_by\": \"check\"}");
	cl_sleep_ms(2500);
	second = ask("live", "{\"seconds\": 1, \"activities\": [\"cuda\"]}");
	rc = cl_reap(pid);
	err = cl_output("run", "err");
	ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
	ck_assert_int_eq(tu_http(&cl_srv, "GET", "/api/v1/runs/live/captures", NULL, 0, NULL, &r), 0);
	caps = tu_json(&r);
	ck_assert_uint_eq(json_array_size(json_object_get(caps, "captures")), 2);
	json_array_foreach(json_object_get(caps, "captures"), i, c) {
		long id = (long)json_integer_value(json_object_get(c, "id"));
		ck_assert(id == first || id == second);
		ck_assert_msg(!strcmp(json_string_value(json_object_get(c, "state")), "done"), "%s", r.body);
		rk = json_array_get(json_object_get(c, "by_rank"), 0);
		ck_assert_int_eq(json_integer_value(json_object_get(rk, "rank")), 0);
		ck_assert_uint_ge(json_array_size(json_object_get(rk, "artifacts")), 1);
	}
	snprintf(want, sizeof(want), "trainscope-cupti: capture %ld: 3 of 3 step(s)", first);
	ck_assert_msg(strstr(err, want), "%s", err);
	json_decref(caps);
	tu_resp_free(&r);
	free(err);
	free(spool);
}
END_TEST
#endif

Suite *suite_collect_capture(void)
{
	Suite *s = suite_create("collect_capture");
	TCase *tc = tcase_create("capture");

	tcase_add_checked_fixture(tc, fake_start, fake_stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_capture_nothing_asked);
	tcase_add_test(tc, test_capture_off_by_default);
	tcase_add_test(tc, test_capture_end_to_end);
	tcase_add_test(tc, test_capture_server_away);
	tcase_add_test(tc, test_capture_backoff);
	tcase_add_test(tc, test_capture_watch_kineto);
	tcase_add_test(tc, test_capture_hostile_ids);
#ifdef CUPTI_HOST_BIN
	tcase_add_test(tc, test_capture_with_the_library);
	tcase_add_test(tc, test_capture_collector_killed);
#endif
	suite_add_tcase(s, tc);
	tc = tcase_create("server");
	tcase_add_checked_fixture(tc, cl_start, cl_stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_capture_fresh_run);
#ifdef CUPTI_HOST_BIN
	tcase_add_test(tc, test_capture_real_server_twice);
#endif
	suite_add_tcase(s, tc);
	return s;
}
