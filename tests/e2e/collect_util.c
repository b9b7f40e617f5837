/*
 * collect_util.c: the collector suites' shared helpers (collect_util.h).
 */
#define _GNU_SOURCE	/* asprintf, strcasestr */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect_util.h"

struct tu_server cl_srv;

char *cl_dir;	/* a fresh temporary folder per test */

void cl_start(void)
{
	if (tu_server_start(&cl_srv, NULL)) {
		fprintf(stderr, "cannot start %s\n", SERVER_BIN);
		abort();
	}
	cl_dir = tu_tmpdir();
}

void cl_stop(void)
{
	tu_server_cleanup(&cl_srv);
	tu_rmtree(cl_dir);
	free(cl_dir);
	cl_dir = NULL;
}

char *cl_path_in(const char *name)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/%s", cl_dir, name), 0);
	return p;
}

/*
 * Start trainscope-collect with args (NULL-terminated) and extra environment
 * entries "K=V" (NULL-terminated, may be NULL), stdout and stderr to
 * cl_dir/<tag>.out and cl_dir/<tag>.err. The environment is made hermetic: this
 * server, short backoffs, no token/run/rank from the caller's shell.
 */
pid_t cl_spawn(const char *tag, const char *const args[], const char *const env[])
{
	char *out = NULL, *err = NULL;
	const char *argv[32];
	int n = 0, i;
	pid_t pid;

	ck_assert_int_ge(asprintf(&out, "%s/%s.out", cl_dir, tag), 0);
	ck_assert_int_ge(asprintf(&err, "%s/%s.err", cl_dir, tag), 0);
	argv[n++] = COLLECT_BIN;
	for (i = 0; args[i] && n < 31; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600), 1);
		dup2(open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600), 2);
		unsetenv("TRAINSCOPE_TOKEN");
		unsetenv("TRAINSCOPE_RUN");
		unsetenv("TRAINSCOPE_RANK");
		unsetenv("RANK");
		unsetenv("TRAINSCOPE_SPOOL_MAX");
		unsetenv("TRAINSCOPE_CUPTI_LIB");
		setenv("TRAINSCOPE_SERVER", cl_srv.base, 1);
		setenv("TRAINSCOPE_RETRY_BASE_MS", "20", 1);
		setenv("TRAINSCOPE_RETRY_MAX_MS", "200", 1);
		for (i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(COLLECT_BIN, (char *const *)argv);
		_exit(126);
	}
	free(out);
	free(err);
	return pid;
}

/* Exit status as a shell gives it: the code, or 128 + the signal. */
int cl_reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

int cl_collect(const char *tag, const char *const args[], const char *const env[])
{
	return cl_reap(cl_spawn(tag, args, env));
}

/* What the collector wrote: cl_dir/<tag>.out or .err (malloc'd, NUL-terminated). */
char *cl_output(const char *tag, const char *ext)
{
	char *p, *name;
	size_t len;
	uint8_t *b;

	ck_assert_int_ge(asprintf(&name, "%s.%s", tag, ext), 0);
	p = cl_path_in(name);
	b = tu_read_file(p, &len);
	ck_assert_msg(b != NULL, "no %s", p);
	free(p);
	free(name);
	return (char *)b;
}

json_t *cl_get(const char *path)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* The run's artifacts (new reference); an empty array when the run does not exist yet. */
json_t *cl_artifacts(const char *run)
{
	struct tu_resp r;
	char path[256];
	json_t *j, *a;

	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, NULL, &r), 0);
	if (r.status == 404) {
		tu_resp_free(&r);
		return json_array();
	}
	ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	a = json_incref(json_object_get(j, "artifacts"));
	json_decref(j);
	ck_assert(json_is_array(a));
	return a;
}

size_t cl_count_artifacts(const char *run)
{
	json_t *a = cl_artifacts(run);
	size_t n = json_array_size(a);

	json_decref(a);
	return n;
}

/* How many artifacts of the run have this name. */
int cl_named(json_t *arts, const char *name)
{
	size_t i;
	json_t *a;
	int n = 0;

	json_array_foreach(arts, i, a)
		n += !strcmp(json_string_value(json_object_get(a, "name")), name);
	return n;
}

json_t *cl_by_name(json_t *arts, const char *name)
{
	size_t i;
	json_t *a;

	json_array_foreach(arts, i, a)
		if (!strcmp(json_string_value(json_object_get(a, "name")), name))
			return a;
	ck_abort_msg("no artifact named %s", name);
	return NULL;
}

void cl_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Poll until the run has at least n artifacts (10 s at most); returns how many it has. */
size_t cl_wait_artifacts(const char *run, size_t n)
{
	size_t have = 0;
	int i;

	for (i = 0; i < 1000 && (have = cl_count_artifacts(run)) < n; i++)
		cl_sleep_ms(10);
	return have;
}

/* Uploads the server answered with this status, from /metrics. */
long cl_uploads_answered(int status)
{
	struct tu_resp r;
	char key[128], *p;
	long n = 0;

	snprintf(key, sizeof(key), "route=\"POST /api/v1/runs/{run}/artifacts\",status=\"%d\"} ", status);
	ck_assert_int_eq(tu_http(&cl_srv, "GET", "/metrics", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	if ((p = strstr(r.body, key)))
		n = atol(p + strlen(key));
	tu_resp_free(&r);
	return n;
}

/*
 * cl_uploads_answered, once it has reached n (2 s at most): the server counts a
 * request when its connection is done with, which may be just after the
 * client has its answer.
 */
long cl_answered(int status, long n)
{
	long have = 0;
	int i;

	for (i = 0; i < 200 && (have = cl_uploads_answered(status)) < n; i++)
		cl_sleep_ms(10);
	return have;
}

/* A small Kineto-form trace whose bytes are unique to (tag, i). */
char *cl_trace_text(const char *tag, int i)
{
	char *t;

	ck_assert_int_ge(asprintf(&t,
				  "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s_%d\","
				  "\"pid\":0,\"tid\":7,\"ts\":%d,\"dur\":10}]}",
				  tag, i, 1000 * (i + 1)),
			 0);
	return t;
}

/* Write name in cl_dir, with its mtime age_s seconds in the past (0: now). */
void cl_put_file(const char *name, const char *text, int age_s)
{
	char *p = cl_path_in(name);

	ck_assert_int_eq(tu_write_file(p, text, strlen(text)), 0);
	if (age_s) {
		struct timespec t[2];
		clock_gettime(CLOCK_REALTIME, &t[0]);
		t[0].tv_sec -= age_s;
		t[1] = t[0];
		ck_assert_int_eq(utimensat(AT_FDCWD, p, t, 0), 0);
	}
	free(p);
}

int cl_starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/*
 * A server that reads slowly (32 KiB every 10 ms, about 3 MB/s, from a small
 * receive buffer), so that an upload takes seconds, then answers 201:
 * upload's progress bar has a rate and an ETA to show.
 */
int cl_slow_listener(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), small = 16384;

	ck_assert_int_ge(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 1), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A connection on lfd within ms, or -1. */
int cl_accept_within(int lfd, int ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	return poll(&p, 1, ms) > 0 ? accept(lfd, NULL, NULL) : -1;
}

/*
 * Read one upload from c as the collector sends a plain file (chunked,
 * gzip'd on the way) and put its name= into name.
 */
void cl_read_upload(int c, char *name, size_t cap)
{
	static char buf[1 << 18];
	size_t got = 0, head = 0;
	int continued = 0;
	char *q, *end;

	for (;;) {
		ssize_t n;
		ck_assert_uint_lt(got, sizeof(buf) - 1);
		n = read(c, buf + got, sizeof(buf) - 1 - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
		if (!head && (q = memmem(buf, got, "\r\n\r\n", 4)))
			head = (size_t)(q - buf) + 4;
		if (head && !continued && memmem(buf, head, "100-continue", 12)) {
			ck_assert_int_eq(write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25), 25);
			continued = 1;
		}
		if (head && got >= head + 7 && !memcmp(buf + got - 7, "\r\n0\r\n\r\n", 7))
			break;
	}
	buf[got] = 0;
	/* ?name= or &name= (a rank, when sent, comes first) */
	ck_assert_ptr_nonnull(q = strstr(buf, "name="));
	q += 5;
	end = q + strcspn(q, " &");
	ck_assert_uint_lt((size_t)(end - q), cap);
	memcpy(name, q, (size_t)(end - q));
	name[end - q] = 0;
}

void cl_answer_upload(int c, int status, const char *name)
{
	cl_answer_upload_keep(c, status, name, 0);
}

void cl_answer_upload_keep(int c, int status, const char *name, int keep)
{
	char body[256], msg[512];

	if (status == 201)
		snprintf(body, sizeof(body), "{\"artifact\":{\"id\":1,\"status\":\"ready\",\"name\":\"%s\"}}", name);
	else if (status == 415)
		snprintf(body, sizeof(body), "{\"error\":{\"code\":\"unknown_format\",\"message\":\"not a profile\"}}");
	else
		snprintf(body, sizeof(body), "{\"error\":{\"code\":\"busy\",\"message\":\"try later\"}}");
	snprintf(msg, sizeof(msg), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "%s\r\n%s", status, status == 201 ? "Created" : status == 415 ? "Unsupported Media Type" :
		 "Service Unavailable", strlen(body), keep ? "" : "Connection: close\r\n", body);
	ck_assert_int_eq(write(c, msg, strlen(msg)), (ssize_t)strlen(msg));
	if (!keep)
		close(c);
}

/*
 * The first two uploads on lfd, sent before either is answered, with no
 * third opened meanwhile: those of names a and b, in either order (each on
 * a connection of its own). *ca and *cb get their connections.
 */
void cl_accept_pair(int lfd, const char *a, const char *b, int *ca, int *cb)
{
	char n1[64], n2[64];
	int c1, c2;

	ck_assert_int_ge(c1 = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c1, n1, sizeof(n1));
	ck_assert_int_ge(c2 = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c2, n2, sizeof(n2));
	ck_assert_int_lt(cl_accept_within(lfd, 300), 0);
	ck_assert_msg((!strcmp(n1, a) && !strcmp(n2, b)) || (!strcmp(n1, b) && !strcmp(n2, a)), "%s %s", n1, n2);
	*ca = strcmp(n1, a) ? c2 : c1;
	*cb = strcmp(n1, a) ? c1 : c2;
}
