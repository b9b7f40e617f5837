/*
 * check_collect.c: trainscope-collect against the real server on loopback:
 * upload of every fixture kind the server takes, watch (renamed, in-place,
 * hidden and temporary files; --once; a SIGKILL and a restart), run with a
 * command that writes chunks into its spool as the CUPTI library does, and
 * the faults: the server stopped and restarted mid-run, a bad token. What
 * arrived is checked through the API, and /metrics says how many uploads
 * the server answered with 200 (a file sent twice).
 */
#define _GNU_SOURCE	/* asprintf, strcasestr */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
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

#include "sha256.h"
#include "suites.h"
#include "testutil.h"

static struct tu_server srv;
static char *dir;	/* a fresh temporary folder per test */

static void start(void)
{
	if (tu_server_start(&srv, NULL)) {
		fprintf(stderr, "cannot start %s\n", SERVER_BIN);
		abort();
	}
	dir = tu_tmpdir();
}

static void stop(void)
{
	tu_server_cleanup(&srv);
	tu_rmtree(dir);
	free(dir);
	dir = NULL;
}

static char *path_in(const char *name)
{
	char *p;

	ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
	return p;
}

/*
 * Start trainscope-collect with args (NULL-terminated) and extra environment
 * entries "K=V" (NULL-terminated, may be NULL), stdout and stderr to
 * dir/<tag>.out and dir/<tag>.err. The environment is made hermetic: this
 * server, short backoffs, no token/run/rank from the caller's shell.
 */
static pid_t spawn(const char *tag, const char *const args[], const char *const env[])
{
	char *out = NULL, *err = NULL;
	const char *argv[32];
	int n = 0, i;
	pid_t pid;

	ck_assert_int_ge(asprintf(&out, "%s/%s.out", dir, tag), 0);
	ck_assert_int_ge(asprintf(&err, "%s/%s.err", dir, tag), 0);
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
		setenv("TRAINSCOPE_SERVER", srv.base, 1);
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
static int reap(pid_t pid)
{
	int st;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int collect(const char *tag, const char *const args[], const char *const env[])
{
	return reap(spawn(tag, args, env));
}

/* What the collector wrote: dir/<tag>.out or .err (malloc'd, NUL-terminated). */
static char *output(const char *tag, const char *ext)
{
	char *p, *name;
	size_t len;
	uint8_t *b;

	ck_assert_int_ge(asprintf(&name, "%s.%s", tag, ext), 0);
	p = path_in(name);
	b = tu_read_file(p, &len);
	ck_assert_msg(b != NULL, "no %s", p);
	free(p);
	free(name);
	return (char *)b;
}

static json_t *get(const char *path)
{
	struct tu_resp r;
	json_t *j;

	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
	j = tu_json(&r);
	tu_resp_free(&r);
	return j;
}

/* The run's artifacts (new reference); an empty array when the run does not exist yet. */
static json_t *artifacts(const char *run)
{
	struct tu_resp r;
	char path[256];
	json_t *j, *a;

	snprintf(path, sizeof(path), "/api/v1/runs/%s", run);
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
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

static size_t count_artifacts(const char *run)
{
	json_t *a = artifacts(run);
	size_t n = json_array_size(a);

	json_decref(a);
	return n;
}

/* How many artifacts of the run have this name. */
static int named(json_t *arts, const char *name)
{
	size_t i;
	json_t *a;
	int n = 0;

	json_array_foreach(arts, i, a)
		n += !strcmp(json_string_value(json_object_get(a, "name")), name);
	return n;
}

static json_t *by_name(json_t *arts, const char *name)
{
	size_t i;
	json_t *a;

	json_array_foreach(arts, i, a)
		if (!strcmp(json_string_value(json_object_get(a, "name")), name))
			return a;
	ck_abort_msg("no artifact named %s", name);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Poll until the run has at least n artifacts (10 s at most); returns how many it has. */
static size_t wait_artifacts(const char *run, size_t n)
{
	size_t have = 0;
	int i;

	for (i = 0; i < 1000 && (have = count_artifacts(run)) < n; i++)
		sleep_ms(10);
	return have;
}

/* Uploads the server answered with this status, from /metrics. */
static long uploads_answered(int status)
{
	struct tu_resp r;
	char key[128], *p;
	long n = 0;

	snprintf(key, sizeof(key), "route=\"POST /api/v1/runs/{run}/artifacts\",status=\"%d\"} ", status);
	ck_assert_int_eq(tu_http(&srv, "GET", "/metrics", NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	if ((p = strstr(r.body, key)))
		n = atol(p + strlen(key));
	tu_resp_free(&r);
	return n;
}

/*
 * uploads_answered, once it has reached n (2 s at most): the server counts a
 * request when its connection is done with, which may be just after the
 * client has its answer.
 */
static long answered(int status, long n)
{
	long have = 0;
	int i;

	for (i = 0; i < 200 && (have = uploads_answered(status)) < n; i++)
		sleep_ms(10);
	return have;
}

/* A small Kineto-form trace whose bytes are unique to (tag, i). */
static char *trace_text(const char *tag, int i)
{
	char *t;

	ck_assert_int_ge(asprintf(&t,
				  "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"%s_%d\","
				  "\"pid\":0,\"tid\":7,\"ts\":%d,\"dur\":10}]}",
				  tag, i, 1000 * (i + 1)),
			 0);
	return t;
}

/* Write name in dir, with its mtime age_s seconds in the past (0: now). */
static void put_file(const char *name, const char *text, int age_s)
{
	char *p = path_in(name);

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

/* Write under a temporary name, then rename, as tensorboard_trace_handler and the CUPTI library do. */
static void put_renamed(const char *tmp, const char *name, const char *text)
{
	char *a = path_in(tmp), *b = path_in(name);

	ck_assert_int_eq(tu_write_file(a, text, strlen(text)), 0);
	ck_assert_int_eq(rename(a, b), 0);
	free(a);
	free(b);
}

/* ---- upload ---- */

START_TEST(test_upload_fixtures)
{
	char *gz = tu_fixture("traces/hta_cpu_only.json.gz"), *mem = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	char *alex = tu_fixture("traces/hta_alexnet.json.gz"), *plain = path_in("alexnet.pt.trace.json");
	const char *args[] = { "upload", "--run", "up", plain, gz, mem, NULL };
	size_t zlen, len, rawlen;
	uint8_t *z = tu_read_file(alex, &zlen), *text = tu_gunzip(z, zlen, &len), *raw;
	struct tu_resp r;
	json_t *arts, *a, *j;
	char *out, path[128];

	/* the plain trace is gzip'd on the way, the two gzip files go as they are */
	ck_assert_int_eq(tu_write_file(plain, text, len), 0);
	ck_assert_int_eq(collect("up", args, NULL), 0);
	out = output("up", "out");
	ck_assert_msg(strstr(out, "alexnet.pt.trace.json: artifact ") && strstr(out, " ready (new)"), "%s", out);
	free(out);
	arts = artifacts("up");
	ck_assert_int_eq(json_array_size(arts), 3);
	a = by_name(arts, "alexnet.pt.trace.json");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "trace");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 1408);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "rank")), 0);
	/* gzip'd in transit only: the download is the file, byte for byte, and its size the file's */
	ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), (json_int_t)len);
	snprintf(path, sizeof(path), "/api/v1/runs/up/artifacts/%" JSON_INTEGER_FORMAT "/raw",
		 json_integer_value(json_object_get(a, "id")));
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(r.len == len && !memcmp(r.body, text, len), "the download is not the file");
	tu_resp_free(&r);
	/* a client that takes gzip gets it gzip-encoded, and it inflates to the file */
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, "Accept-Encoding: gzip", &r), 0);
	ck_assert_str_eq(r.content_encoding, "gzip");
	raw = tu_gunzip(r.body, r.len, &rawlen);
	ck_assert_msg(raw && rawlen == len && !memcmp(raw, text, len), "stored bytes do not inflate to the file");
	free(raw);
	tu_resp_free(&r);
	a = by_name(arts, "hta_cpu_only.json.gz");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 30);
	a = by_name(arts, "hta_memory_timeline.raw.json.gz");
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "memory_timeline");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	json_decref(arts);
	/* the timeline is queryable: 7,721 distinct time points (fixtures/README.md) */
	j = get("/api/v1/runs/up/memory?points=0");
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 7721);
	json_decref(j);

	/* again: the server has these bytes, nothing new */
	ck_assert_int_eq(collect("again", args, NULL), 0);
	out = output("again", "out");
	ck_assert_msg(strstr(out, "(already there)"), "%s", out);
	free(out);
	ck_assert_int_eq(count_artifacts("up"), 3);
	ck_assert_int_eq(answered(200, 3), 3);
	free(z);
	free(text);
	free(gz);
	free(mem);
	free(alex);
	free(plain);
}
END_TEST

START_TEST(test_upload_rank_from_env)
{
	const char *args[] = { "upload", "--run", "ranks", NULL, NULL };
	const char *both[] = { "TRAINSCOPE_RANK=5", "RANK=3", NULL }, *torchrun[] = { "RANK=3", NULL };
	const char *run_env[] = { "TRAINSCOPE_RUN=ranks", "RANK=3", NULL };
	const char *flag[] = { "upload", "--rank", "9", NULL, NULL };
	char *t;
	json_t *arts;

	t = trace_text("r", 1);
	put_file("a.json", t, 0);
	free(t);
	t = trace_text("r", 2);
	put_file("b.json", t, 0);
	free(t);
	t = trace_text("r", 3);
	put_file("c.json", t, 0);
	free(t);
	args[3] = path_in("a.json");
	ck_assert_int_eq(collect("a", args, both), 0);
	free((char *)args[3]);
	args[3] = path_in("b.json");
	ck_assert_int_eq(collect("b", args, torchrun), 0);
	free((char *)args[3]);
	flag[3] = path_in("c.json");
	ck_assert_int_eq(collect("c", flag, run_env), 0);
	free((char *)flag[3]);
	arts = artifacts("ranks");
	ck_assert_int_eq(json_integer_value(json_object_get(by_name(arts, "a.json"), "rank")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(by_name(arts, "b.json"), "rank")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(by_name(arts, "c.json"), "rank")), 9);
	json_decref(arts);
}
END_TEST

START_TEST(test_upload_bad_token)
{
	char *tokfile = path_in("tokens"), *f, *err;
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char *args[] = { "upload", "--run", "tok", NULL, NULL };
	const char *wrong[] = { "TRAINSCOPE_TOKEN=not-the-token-0123456789", NULL };
	const char *right[] = { "TRAINSCOPE_TOKEN=secret-token-0123456789", NULL };
	const char *watch[] = { "watch", "--run", "tok", dir, NULL };
	char *t = trace_text("tok", 0);

	ck_assert_int_eq(tu_write_file(tokfile, "secret-token-0123456789\n", 24), 0);
	tu_server_stop(&srv);
	ck_assert_int_eq(tu_server_restart(&srv, extra), 0);
	put_file("t.json", t, 0);
	args[3] = f = path_in("t.json");
	/* a 401 is not retried: the server's message, exit 1, at once */
	ck_assert_int_eq(collect("wrong", args, wrong), 1);
	err = output("wrong", "err");
	ck_assert_msg(strstr(err, "401 unauthorized"), "%s", err);
	ck_assert_msg(!strstr(err, "retrying"), "%s", err);
	free(err);
	ck_assert_int_eq(collect("none", args, NULL), 1);
	ck_assert_int_eq(answered(401, 2), 2);
	/* watch stops too, rather than knock for ever */
	ck_assert_int_eq(collect("watch", watch, wrong), 1);
	err = output("watch", "err");
	ck_assert_msg(strstr(err, "401 unauthorized"), "%s", err);
	free(err);
	ck_assert_int_eq(count_artifacts("tok"), 0);
	/* the token is sent */
	ck_assert_int_eq(collect("right", args, right), 0);
	ck_assert_int_eq(count_artifacts("tok"), 1);
	free(f);
	free(t);
	free(tokfile);
}
END_TEST

START_TEST(test_upload_server_away)
{
	const char *args[] = { "upload", "--run", "away", NULL, NULL };
	const char *three[] = { "TRAINSCOPE_RETRY_ATTEMPTS=3", NULL }, *forever[] = { "TRAINSCOPE_RETRY_ATTEMPTS=0", NULL };
	char *t = trace_text("away", 0), *err;
	pid_t pid;

	put_file("t.json", t, 0);
	args[3] = path_in("t.json");
	tu_server_stop(&srv);
	/* three attempts, then exit 3 with curl's reason */
	ck_assert_int_eq(collect("three", args, three), 3);
	err = output("three", "err");
	ck_assert_msg(strstr(err, "retrying") && strstr(err, "onnect"), "%s", err);
	free(err);
	/* retried until the server is back */
	pid = spawn("forever", args, forever);
	sleep_ms(300);
	ck_assert_int_eq(tu_server_restart_same_port(&srv, NULL), 0);
	ck_assert_int_eq(reap(pid), 0);
	ck_assert_int_eq(count_artifacts("away"), 1);
	free((char *)args[3]);
	free(t);
}
END_TEST

/* ---- watch ---- */

START_TEST(test_watch_renamed)
{
	const char *args[] = { "watch", "--run", "w", dir, NULL };
	static const char *const shipped[] = { "worker0.1.pt.trace.json", "worker0.2.pt.trace.json.gz",
					       "inplace.json", "snap.pickle", "early.json" };
	char *t, *tmp, *fin, *err;
	json_t *arts;
	size_t len, i;
	uint8_t *gz;
	pid_t pid;

	t = trace_text("early", 0);
	put_file("early.json", t, 5);	/* there before the watch: shipped at start */
	free(t);
	pid = spawn("watch", args, NULL);
	ck_assert_uint_eq(wait_artifacts("w", 1), 1);
	/* tensorboard_trace_handler: a temporary name, then a rename */
	t = trace_text("w", 1);
	put_renamed(".worker0.1.pt.trace.json.tmp", "worker0.1.pt.trace.json", t);
	free(t);
	t = trace_text("w", 2);
	gz = tu_gzip(t, strlen(t), &len);
	tmp = path_in("worker0.2.pt.trace.json.gz.part");
	fin = path_in("worker0.2.pt.trace.json.gz");
	ck_assert_int_eq(tu_write_file(tmp, gz, len), 0);
	ck_assert_int_eq(rename(tmp, fin), 0);
	free(tmp);
	free(fin);
	free(gz);
	free(t);
	/* written in place and closed; a pickle that is no snapshot (kept by the server as an error: 400) */
	t = trace_text("w", 3);
	put_file("inplace.json", t, 0);
	free(t);
	put_file("snap.pickle", "\x80\x04K\x01.", 0);
	/* never: hidden, temporary, or not a profiler file */
	t = trace_text("w", 4);
	put_file(".hidden.json", t, 0);
	put_file("half.json.tmp", t, 0);
	put_file("notes.md", t, 0);
	free(t);
	ck_assert_uint_eq(wait_artifacts("w", 5), 5);
	sleep_ms(300);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	arts = artifacts("w");
	ck_assert_int_eq(json_array_size(arts), 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(named(arts, shipped[i]), 1);
	ck_assert_str_eq(json_string_value(json_object_get(by_name(arts, "worker0.2.pt.trace.json.gz"), "status")),
			 "ready");
	ck_assert_str_eq(json_string_value(json_object_get(by_name(arts, "snap.pickle"), "status")), "error");
	json_decref(arts);
	ck_assert_int_eq(uploads_answered(200), 0);	/* nothing was sent twice */
	err = output("watch", "err");
	ck_assert_msg(strstr(err, "snap.pickle: 4"), "%s", err);	/* its 4xx, said */
	free(err);
}
END_TEST

/*
 * watch never follows a symbolic link (one to a file outside the folder was
 * shipped, then served by /raw), skips a name that is not UTF-8 with a word
 * and goes on, and ships a file appended over several open/close cycles once,
 * whole (each close shipped it, the first ones as errors).
 */
START_TEST(test_watch_links_names_and_unfinished)
{
	const char *args[] = { "watch", "--run", "wl", dir, NULL };
	static const char *const parts[] = {
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"g0\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":1}",
		",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"g1\",\"pid\":0,\"tid\":7,\"ts\":5,\"dur\":1}",
		"]}",
	};
	char *outside = tu_tmpdir(), secret[600], *link = path_in("secret.json"), *grow = path_in("grow.json"), *t, *err;
	json_t *arts;
	pid_t pid;

	snprintf(secret, sizeof(secret), "%s/secret.json", outside);
	t = trace_text("secret", 0);
	ck_assert_int_eq(tu_write_file(secret, t, strlen(t)), 0);
	free(t);
	ck_assert_int_eq(symlink(secret, link), 0);
	t = trace_text("wl", 1);
	put_file("bad\xff.json", t, 10);
	free(t);
	t = trace_text("wl", 2);
	put_file("good.json", t, 10);
	free(t);
	pid = spawn("links", args, NULL);
	ck_assert_uint_eq(wait_artifacts("wl", 1), 1);
	for (size_t i = 0; i < 3; i++) {
		FILE *f = fopen(grow, i ? "a" : "w");
		ck_assert_ptr_nonnull(f);
		fputs(parts[i], f);
		fclose(f);
		sleep_ms(400);
	}
	ck_assert_uint_eq(wait_artifacts("wl", 2), 2);
	sleep_ms(1500);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	arts = artifacts("wl");
	ck_assert_int_eq(json_array_size(arts), 2);
	ck_assert_int_eq(named(arts, "good.json"), 1);
	ck_assert_int_eq(named(arts, "grow.json"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(by_name(arts, "grow.json"), "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(by_name(arts, "grow.json"), "events")), 2);
	json_decref(arts);
	ck_assert_int_eq(uploads_answered(200) + uploads_answered(201), 2);
	err = output("links", "err");
	ck_assert_msg(strstr(err, "secret.json: a symbolic link"), "%s", err);
	ck_assert_msg(strstr(err, "not UTF-8: bad\\xff.json"), "%s", err);
	free(err);
	tu_rmtree(outside);
	free(outside);
	free(link);
	free(grow);
}
END_TEST

/* The lines of a state file, each ending in a newline (-1: one does not, or no file). */
static int state_lines(const char *path)
{
	size_t len, i;
	uint8_t *b = tu_read_file(path, &len);
	int n = 0;

	if (!b)
		return -1;
	for (i = 0; i < len; i++)
		n += b[i] == '\n';
	if (len && b[len - 1] != '\n')
		n = -1;
	free(b);
	return n;
}

START_TEST(test_watch_once)
{
	const char *args[] = { "watch", "--once", "--run", "once", dir, NULL };
	char *t, *state, *sdir = path_in("state"), *moved;
	const char *elsewhere[] = { "watch", "--once", "--run", "once", "--state", sdir, dir, NULL };
	const char *other_run[] = { "watch", "--once", "--run", "once2", dir, NULL };
	char *badstate = path_in("t0.json/state"), *err;
	const char *nostate[] = { "watch", "--once", "--run", "once3", "--state", badstate, dir, NULL };
	struct stat st;
	int i;

	for (i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "t%d.json", i);
		t = trace_text("once", i);
		put_file(name, t, 10);
		free(t);
	}
	ck_assert_int_eq(collect("first", args, NULL), 0);
	ck_assert_int_eq(count_artifacts("once"), 3);
	ck_assert_int_eq(answered(201, 3), 3);
	state = path_in(".trainscope-collect.state");
	ck_assert_int_eq(stat(state, &st), 0);
	/* the header, then a line per file (appended as each was answered) */
	ck_assert_int_eq(state_lines(state), 1 + 3);
	/* a line cut short by a crash is skipped, and the start rewrites the file without it */
	{
		FILE *f = fopen(state, "a");
		ck_assert_ptr_nonnull(f);
		fputs("123 456 0 once t9", f);
		fclose(f);
	}
	/* again: the state says all is there, nothing is sent */
	ck_assert_int_eq(collect("second", args, NULL), 0);
	ck_assert_int_eq(answered(201, 3) + uploads_answered(200), 3);
	ck_assert_int_eq(state_lines(state), 1 + 3);
	/* a new file: only it goes */
	t = trace_text("once", 3);
	put_file("t3.json", t, 10);
	free(t);
	ck_assert_int_eq(collect("third", args, NULL), 0);
	ck_assert_int_eq(count_artifacts("once"), 4);
	ck_assert_int_eq(answered(201, 4) + uploads_answered(200), 4);
	ck_assert_int_eq(state_lines(state), 1 + 4);
	/* another run is another destination: everything goes there */
	ck_assert_int_eq(collect("other", other_run, NULL), 0);
	ck_assert_int_eq(count_artifacts("once2"), 4);
	/* --state elsewhere: that state is empty, so all four go again (answered 200), and it is kept there */
	moved = path_in("moved.state");
	ck_assert_int_eq(rename(state, moved), 0);
	ck_assert_int_eq(collect("elsewhere", elsewhere, NULL), 0);
	ck_assert_int_eq(answered(200, 4), 4);
	ck_assert_int_eq(stat(state, &st), -1);
	ck_assert_int_eq(count_artifacts("once"), 4);
	ck_assert_int_eq(stat(sdir, &st), 0);	/* made for us */
	/* a state that cannot be kept is said at start, before anything is sent: exit 4 */
	ck_assert_int_eq(collect("nostate", nostate, NULL), 4);
	err = output("nostate", "err");
	ck_assert_msg(strstr(err, "t0.json/state"), "%s", err);
	free(err);
	ck_assert_int_eq(uploads_answered(200) + uploads_answered(201), 12);	/* as before */
	free(moved);
	free(state);
	free(sdir);
	free(badstate);
}
END_TEST

/* n distinct traces big%d.json of about 1.6 MB each, 10 s old: large enough that a signal lands while some are still to go */
static void put_big_files(int n)
{
	enum { EVENTS = 20000 };
	size_t cap = (size_t)EVENTS * 96 + 64;
	char name[32], *t = malloc(cap);
	int i, k;

	for (i = 0; i < n; i++) {
		size_t off = (size_t)snprintf(t, cap, "{\"traceEvents\":[");
		for (k = 0; k < EVENTS; k++)
			off += (size_t)snprintf(t + off, cap - off,
						"%s{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k%d\",\"pid\":0,"
						"\"tid\":%d,\"ts\":%d,\"dur\":1}",
						k ? "," : "", k % 50, i, 1000 + k);
		snprintf(t + off, cap - off, "]}");
		snprintf(name, sizeof(name), "big%d.json", i);
		put_file(name, t, 10);
	}
	free(t);
}

START_TEST(test_watch_sigkill)
{
	const char *args[] = { "watch", "--run", "kill", dir, NULL };
	const char *once[] = { "watch", "--once", "--run", "kill", dir, NULL };
	enum { N = 8, LATE = 2 };
	char name[32];
	json_t *arts;
	size_t before;
	int i;
	pid_t pid;

	put_big_files(N);
	pid = spawn("watch", args, NULL);
	wait_artifacts("kill", 1);
	kill(pid, SIGKILL);
	ck_assert_int_eq(reap(pid), 128 + SIGKILL);
	before = count_artifacts("kill");
	/* files that appear while it is down go at the next start */
	for (i = 0; i < LATE; i++) {
		char *t = trace_text("late", i);
		snprintf(name, sizeof(name), "late%d.json", i);
		put_file(name, t, 10);
		free(t);
	}
	ck_assert_int_eq(collect("restart", once, NULL), 0);
	arts = artifacts("kill");
	ck_assert_int_eq(json_array_size(arts), N + LATE);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "big%d.json", i);
		ck_assert_int_eq(named(arts, name), 1);
	}
	for (i = 0; i < LATE; i++) {
		snprintf(name, sizeof(name), "late%d.json", i);
		ck_assert_int_eq(named(arts, name), 1);
	}
	json_decref(arts);
	/* at most the files in flight at the kill (two) were sent again */
	ck_assert_int_eq(answered(201, N + LATE), N + LATE);
	ck_assert_int_le(uploads_answered(200), 2);
	fprintf(stderr, "watch SIGKILL: %zu of %d files were shipped before the kill\n", before, N);
}
END_TEST

START_TEST(test_watch_sigterm)
{
	const char *args[] = { "watch", "--run", "term", dir, NULL };
	const char *once[] = { "watch", "--once", "--run", "term", dir, NULL };
	enum { N = 6 };
	size_t before;
	pid_t pid;

	put_big_files(N);
	pid = spawn("watch", args, NULL);
	wait_artifacts("term", 1);
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	/* the file in flight was finished and recorded: a restart sends none of them again */
	before = count_artifacts("term");
	ck_assert_int_eq(answered(201, (long)before), (long)before);
	ck_assert_int_eq(collect("restart", once, NULL), 0);
	ck_assert_int_eq(count_artifacts("term"), N);
	ck_assert_int_eq(uploads_answered(200), 0);
	ck_assert_int_eq(answered(201, N), N);
}
END_TEST

/* ---- run ---- */

/*
 * A command that writes chunks as libtrainscope-cupti.so does: a hidden
 * temporary, renamed to trace-<pid>-<seq>.pt.trace.json; FIRST chunks, then
 * (when WAIT is set) waits for that file to exist, then the rest up to ALL,
 * then dumps its environment and exits with CODE.
 */
static const char chunk_script[] =
	"#!/bin/sh\n"
	"chunk() {\n"
	"  printf '{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k%d\",\"pid\":%d,\"tid\":7,"
	"\"ts\":%d,\"dur\":10}]}' $1 $$ $(($1*1000)) > \"$TRAINSCOPE_SPOOL/.chunk-$1\"\n"
	"  mv \"$TRAINSCOPE_SPOOL/.chunk-$1\" \"$TRAINSCOPE_SPOOL/trace-$$-$1.pt.trace.json\"\n"
	"}\n"
	"i=1; while [ $i -le $FIRST ]; do chunk $i; i=$((i+1)); done\n"
	"if [ -n \"$WAIT\" ]; then while [ ! -e \"$WAIT\" ]; do sleep 0.02; done; fi\n"
	"while [ $i -le $ALL ]; do chunk $i; i=$((i+1)); done\n"
	"env > \"$ENVOUT\"\n"
	"exit $CODE\n";

static char *script(void)
{
	char *p = path_in("cmd.sh");

	ck_assert_int_eq(tu_write_file(p, chunk_script, strlen(chunk_script)), 0);
	ck_assert_int_eq(chmod(p, 0700), 0);
	return p;
}

/* The value of name in the environment the command saw, or NULL (malloc'd). */
static char *env_of(const char *name)
{
	char *p = path_in("env.out"), *text, *all, *line, *v = NULL, key[64];
	size_t len;

	text = (char *)tu_read_file(p, &len);
	ck_assert_msg(text != NULL, "the command did not run");
	ck_assert_int_ge(asprintf(&all, "\n%s", text), 0);	/* every line, the first too, after a newline */
	snprintf(key, sizeof(key), "\n%s=", name);
	if ((line = strstr(all, key)))
		v = strndup(line + strlen(key), strcspn(line + strlen(key), "\n"));
	free(all);
	free(text);
	free(p);
	return v;
}

START_TEST(test_run_chunks)
{
	char *cmd = script(), *spool = path_in("spool"), *envout = path_in("env.out"), *e, *err, *real;
	char envline[600];
	const char *env[] = { "FIRST=5", "ALL=5", "CODE=3", envline, NULL };
	const char *args[] = { "run", "--run", "chunks", "--rank", "2", "--spool", spool, "--cupti", cmd, "--", cmd, NULL };
	const char *missing[] = { "run", "--run", "chunks", "--cupti", "/nonexistent/lib.so", "--", cmd, NULL };
	const char *killed[] = { "run", "--run", "chunks", "--", "sh", "-c", "kill -TERM $$", NULL };
	const char *absent[] = { "run", "--run", "chunks", "--", "/nonexistent/cmd", NULL };
	json_t *arts, *a;
	size_t i;
	struct stat st;

	snprintf(envline, sizeof(envline), "ENVOUT=%s", envout);
	ck_assert_int_eq(collect("run", args, env), 3);	/* the command's status */
	arts = artifacts("chunks");
	ck_assert_int_eq(json_array_size(arts), 5);
	json_array_foreach(arts, i, a) {
		const char *name = json_string_value(json_object_get(a, "name"));
		ck_assert_msg(!strncmp(name, "trace-", 6) && strstr(name, ".pt.trace.json"), "%s", name);
		ck_assert_int_eq(json_integer_value(json_object_get(a, "rank")), 2);
		ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
		ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 1);
	}
	for (i = 1; i <= 5; i++) {
		char suffix[32];
		size_t n = 0, k;
		snprintf(suffix, sizeof(suffix), "-%zu.pt.trace.json", i);
		json_array_foreach(arts, k, a) {
			const char *name = json_string_value(json_object_get(a, "name"));
			n += strlen(name) > strlen(suffix) && !strcmp(name + strlen(name) - strlen(suffix), suffix);
		}
		ck_assert_uint_eq(n, 1);
	}
	json_decref(arts);
	/* shipped chunks are gone from the spool; the spool given is kept */
	ck_assert_int_eq(rmdir(spool), 0);
	/* what the command saw */
	ck_assert_ptr_nonnull(real = realpath(cmd, NULL));
	ck_assert_str_eq(e = env_of("CUDA_INJECTION64_PATH"), real);
	free(e);
	ck_assert_str_eq(e = env_of("NVTX_INJECTION64_PATH"), real);
	free(e);
	ck_assert_str_eq(e = env_of("TRAINSCOPE_SPOOL"), spool);
	free(e);
	ck_assert_str_eq(e = env_of("TRAINSCOPE_RANK"), "2");
	free(e);
	ck_assert_str_eq(e = env_of("TRAINSCOPE_SPOOL_MAX"), "1073741824");
	free(e);
	free(real);

	/* no library: said once, and the command runs untraced in a spool of its own, removed after */
	env[0] = "FIRST=0";
	env[1] = "ALL=1";
	env[2] = "CODE=0";
	ck_assert_int_eq(collect("missing", missing, env), 0);
	err = output("missing", "err");
	ck_assert_msg(strstr(err, "no CUPTI library at /nonexistent/lib.so") &&
			      !strstr(strstr(err, "no CUPTI") + 1, "no CUPTI"), "%s", err);
	free(err);
	ck_assert_ptr_null(env_of("CUDA_INJECTION64_PATH"));
	e = env_of("TRAINSCOPE_SPOOL");
	ck_assert_int_eq(stat(e, &st), -1);
	free(e);
	ck_assert_int_eq(count_artifacts("chunks"), 6);

	/* killed by a signal: 128 + N; not startable: 127 */
	ck_assert_int_eq(collect("killed", killed, NULL), 128 + SIGTERM);
	ck_assert_int_eq(collect("absent", absent, NULL), 127);
	free(cmd);
	free(spool);
	free(envout);
}
END_TEST

START_TEST(test_run_passes_sigterm)
{
	char *started = path_in("started"), line[600];
	const char *args[] = { "run", "--run", "sig", "--", "sh", "-c", line, NULL };
	struct stat st;
	pid_t pid;
	int i;

	/* a scheduler's SIGTERM to the collector reaches the command, whose status comes back */
	snprintf(line, sizeof(line), "touch %s; while :; do sleep 0.02; done", started);
	pid = spawn("sig", args, NULL);
	for (i = 0; i < 500 && stat(started, &st); i++)
		sleep_ms(10);
	ck_assert_int_eq(stat(started, &st), 0);
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 128 + SIGTERM);
	free(started);
}
END_TEST

START_TEST(test_run_server_restart)
{
	char *cmd = script(), *spool = path_in("spool"), *flag = path_in("go"), *envout = path_in("env.out"), *err;
	char waitline[600], envline[600];
	const char *env[] = { "FIRST=3", "ALL=8", "CODE=7", waitline, envline, NULL };
	/* about three chunks' worth: the spool fills while the server is away */
	const char *args[] = { "run", "--run", "restart", "--spool", spool, "--spool-max", "300", "--", cmd, NULL };
	json_t *arts;
	int i, chunks;
	pid_t pid;

	snprintf(waitline, sizeof(waitline), "WAIT=%s", flag);
	snprintf(envline, sizeof(envline), "ENVOUT=%s", envout);
	pid = spawn("run", args, env);
	ck_assert_uint_eq(wait_artifacts("restart", 3), 3);
	ck_assert_int_eq(tu_server_stop(&srv), 0);
	put_file("go", "", 0);
	/* the command writes the other five into the spool, where they wait */
	for (i = 0, chunks = 0; i < 500 && chunks < 5; i++) {
		char ls[700];
		FILE *p;
		sleep_ms(10);
		snprintf(ls, sizeof(ls), "ls %s | grep -c '^trace-'", spool);
		p = popen(ls, "r");
		if (fscanf(p, "%d", &chunks) != 1)
			chunks = 0;
		pclose(p);
	}
	ck_assert_int_eq(chunks, 5);
	sleep_ms(200);
	ck_assert_int_eq(tu_server_restart_same_port(&srv, NULL), 0);
	ck_assert_int_eq(reap(pid), 7);
	arts = artifacts("restart");
	ck_assert_int_eq(json_array_size(arts), 8);
	for (i = 1; i <= 8; i++) {
		char suffix[32];
		size_t n = 0, k;
		json_t *a;
		snprintf(suffix, sizeof(suffix), "-%d.pt.trace.json", i);
		json_array_foreach(arts, k, a) {
			const char *name = json_string_value(json_object_get(a, "name"));
			n += strlen(name) > strlen(suffix) && !strcmp(name + strlen(name) - strlen(suffix), suffix);
		}
		ck_assert_uint_eq(n, 1);
	}
	json_decref(arts);
	/* the restarted server saw each of the five once */
	ck_assert_int_eq(answered(201, 5), 5);
	ck_assert_int_eq(uploads_answered(200), 0);
	err = output("run", "err");
	ck_assert_msg(strstr(err, "is full") && strstr(err, "has room again"), "%s", err);
	/* the summary: all eight shipped in the end, the attempts made while the server was away counted */
	ck_assert_msg(strstr(err, "trainscope-collect: run restart rank 0: the command exited with 7 after ") &&
			      strstr(err, "; 0 step(s) on the server from 8 chunk(s) shipped (") &&
			      !strstr(err, " 0 failed attempt(s)") && strstr(err, " failed attempt(s), 0 left in the spool; see "),
		      "%s", err);
	free(err);
	ck_assert_int_eq(rmdir(spool), 0);	/* empty */
	free(cmd);
	free(spool);
	free(flag);
	free(envout);
}
END_TEST

/* A loopback port bound and never listened on: connections to it are refused. Returns the socket. */
static int refused_port(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static int count_of(const char *text, const char *what)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, what)); p++)
		n++;
	return n;
}

/* A Kineto-form trace of steps ProfilerStep#first .. first+n-1, 10 ms each from t0_us; returns its length. */
static size_t steps_text(char *text, size_t size, int first, int n, long long t0_us)
{
	size_t len = (size_t)snprintf(text, size, "{\"traceEvents\":[");

	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, size - len, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
					"\"ProfilerStep#%d\",\"pid\":1,\"tid\":1,\"ts\":%lld,\"dur\":10000}",
					i ? "," : "", first + i, t0_us + 10000LL * i);
	len += (size_t)snprintf(text + len, size - len, "]}");
	ck_assert_uint_lt(len, size);
	return len;
}

static int starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* Each line of text starts with "trainscope-collect: "; returns how many lines. */
static int collector_lines(const char *text)
{
	int n = 0;

	for (const char *p = text; *p; n++) {
		const char *nl = strchr(p, '\n');
		ck_assert_msg(starts(p, "trainscope-collect: "), "line %d: %s", n + 1, p);
		ck_assert_msg(nl != NULL, "the last line does not end: %s", p);
		p = nl + 1;
	}
	return n;
}

/*
 * run says whether CUDA tracing is on, then at its end the steps the server
 * has for the rank, the chunks and bytes shipped, the rejected ones, the
 * failed attempts, what is left in the spool, and the run's page.
 */
START_TEST(test_run_says_what_it_did)
{
	char *cmd = path_in("says.sh"), *spool = path_in("spool"), *lib = NULL, *err, *line, want[1024], text[4096];
	const char script_text[] = "#!/bin/sh\n"
				   "for f in c1.json bad.json c2.json; do\n"
				   "  mv \"$SRC/$f\" \"$TRAINSCOPE_SPOOL/trace-$$-$f\"\n"
				   "done\n"
				   "exit 4\n";
	char srcline[600];
	char server[96];
	const char *env[] = { srcline, server, NULL }, *off_env[] = { "TRAINSCOPE_CUPTI_LIB=none", NULL };
	const char *away[] = { "run", "--run", "says", "--spool", spool, "--drain-timeout", "1", "--", cmd, NULL };
	int port, fd = refused_port(&port);
	const char *args[] = { "run", "--run", "says", "--rank", "3", "--cupti", cmd, "--", cmd, NULL };
	const char *off[] = { "run", "--run", "says", "--cupti", "none", "--", "true", NULL };
	const char *off_by_env[] = { "run", "--run", "says", "--", "true", NULL };
	size_t a, b, len;
	char *src = path_in("src");

	ck_assert_int_eq(mkdir(src, 0700), 0);
	snprintf(srcline, sizeof(srcline), "SRC=%s", src);
	snprintf(server, sizeof(server), "TRAINSCOPE_SERVER=%s", srv.base);
	/* three steps and two more, as two chunks; a third that is not a trace, rejected */
	a = steps_text(text, sizeof(text), 0, 3, 1700000000000000LL);
	put_file("src/c1.json", text, 0);
	b = steps_text(text, sizeof(text), 3, 2, 1700000000030000LL);
	put_file("src/c2.json", text, 0);
	put_file("src/bad.json", "{\"traceEvents\": [{\"ph\": ", 0);
	ck_assert_int_eq(tu_write_file(cmd, script_text, strlen(script_text)), 0);
	ck_assert_int_eq(chmod(cmd, 0700), 0);
	ck_assert_ptr_nonnull(lib = realpath(cmd, NULL));

	ck_assert_int_eq(collect("says", args, env), 4);
	err = output("says", "err");
	ck_assert_int_eq(collector_lines(err), 3 + 1);	/* tracing, spool, the bad chunk's 4xx, summary */
	/* the library given is injected: tracing is on, or off for want of a driver on this machine */
	snprintf(want, sizeof(want), "trainscope-collect: CUDA tracing on: %s injected (CUDA_INJECTION64_PATH)\n", lib);
	if (strncmp(err, want, strlen(want))) {
		snprintf(want, sizeof(want), "; %s injected all the same\n", lib);
		ck_assert_msg(starts(err, "trainscope-collect: CUDA tracing off: no CUDA driver here (") &&
				      strstr(err, want) && strstr(err, want) < strchr(err, '\n') + 1, "%s", err);
	}
	ck_assert_msg(strstr(err, "shipping the spool ") && strstr(err, " to run says rank 3 on http://127.0.0.1:"), "%s", err);
	/* the summary is the last line, with the right counts */
	ck_assert_ptr_nonnull(line = strstr(err, "trainscope-collect: run says rank 3: "));
	ck_assert_msg(strstr(line, "the command exited with 4 after "), "%s", line);
	snprintf(want, sizeof(want), "; 5 step(s) on the server from 2 chunk(s) shipped (%zu bytes); 1 rejected, 0 failed"
		 " attempt(s), 0 left in the spool; see %s/runs/says\n", a + b, srv.base);
	len = strlen(want);
	ck_assert_msg(strlen(line) >= len && !strcmp(line + strlen(line) - len, want), "want ...%s got %s", want, line);
	ck_assert_uint_eq(count_artifacts("says"), 3);
	free(err);

	/* the server away: the chunk stays in the spool, the attempts that failed are counted */
	snprintf(server, sizeof(server), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", port);
	steps_text(text, sizeof(text), 0, 1, 1700000000000000LL);
	put_file("src/c1.json", text, 0);
	put_file("src/c2.json", text, 0);
	put_file("src/bad.json", text, 0);
	ck_assert_int_eq(collect("away", away, env), 4);
	err = output("away", "err");
	ck_assert_msg(strstr(err, "trainscope-collect: run says rank 0: the command exited with 4 after ") &&
			      strstr(err, " s; no chunk shipped; 0 rejected, ") &&
			      !strstr(err, " 0 failed attempt(s)") && strstr(err, " failed attempt(s), 3 left in the spool; see "),
		      "%s", err);
	free(err);

	/* turned off, by the flag or the environment; nothing shipped */
	ck_assert_int_eq(collect("off", off, NULL), 0);
	err = output("off", "err");
	ck_assert_int_eq(collector_lines(err), 3);
	ck_assert_msg(starts(err, "trainscope-collect: CUDA tracing off: turned off by --cupti none\n") &&
			      strstr(err, "trainscope-collect: run says rank 0: the command exited with 0 after ") &&
			      strstr(err, " s; no chunk shipped; 0 rejected, 0 failed attempt(s), 0 left in the spool; see "),
		      "%s", err);
	free(err);
	ck_assert_int_eq(collect("offenv", off_by_env, off_env), 0);
	err = output("offenv", "err");
	ck_assert_msg(starts(err, "trainscope-collect: CUDA tracing off: turned off by TRAINSCOPE_CUPTI_LIB=none\n"),
		      "%s", err);
	free(err);
	close(fd);
	free(lib);
	free(cmd);
	free(spool);
	free(src);
}
END_TEST

/* ---- usage ---- */

START_TEST(test_usage)
{
	static const char *const subs[] = { "upload", "watch", "run", "compare" };
	const char *help[] = { NULL, "--help", NULL }, *norun[] = { "upload", "x.json", NULL };
	const char *unknown[] = { "frobnicate", NULL }, *badenv[] = { "TRAINSCOPE_RANK=x", NULL };
	const char *badrank[] = { "upload", "--run", "r", "--rank", "65536", "x.json", NULL };
	const char *badrun[] = { "upload", "--run", "a/b", "x.json", NULL };
	char *out, *err;
	int i;

	/* each subcommand's help is its own (26 to 37 lines before): the shared text is in the top-level help, once */
	for (i = 0; i < 4; i++) {
		int lines = 0;
		help[0] = subs[i];
		ck_assert_int_eq(collect("help", help, NULL), 0);
		out = output("help", "out");
		for (char *p = out; (p = strchr(p, '\n')); p++)
			lines++;
		ck_assert_msg(strstr(out, "usage: trainscope-collect ") && strstr(out, "--server URL") &&
				      strstr(out, "trainscope-collect --help") && !strstr(out, "Exit codes") &&
				      !strstr(out, "TRAINSCOPE_RETRY") && lines <= 26,
			      "%s: %d lines: %s", subs[i], lines, out);
		free(out);
	}
	help[0] = "--help";
	ck_assert_int_eq(collect("help", help, NULL), 0);
	out = output("help", "out");
	ck_assert_msg(strstr(out, "Exit codes") && strstr(out, "TRAINSCOPE_TOKEN") && strstr(out, "6 the runs cannot be"),
		      "%s", out);
	free(out);
	ck_assert_int_eq(collect("unknown", unknown, NULL), 2);
	ck_assert_int_eq(collect("badrank", badrank, NULL), 2);
	ck_assert_int_eq(collect("badenv", norun, badenv), 2);
	err = output("badenv", "err");
	ck_assert_msg(strstr(err, "TRAINSCOPE_RANK=x"), "%s", err);
	free(err);
	ck_assert_int_eq(collect("badrun", badrun, NULL), 2);
	ck_assert_int_eq(collect("norun", norun, NULL), 2);
	err = output("norun", "err");
	ck_assert_msg(strstr(err, "TRAINSCOPE_RUN"), "%s", err);
	free(err);
}
END_TEST

/* ---- compare ---- */

/* Upload a trace of 6 steps of about step_us each (+-1%) as run. */
static void upload_steps(const char *run, int64_t step_us)
{
	char text[2048], path[128];
	size_t n = 0;
	int64_t t = 1700000000000000;
	struct tu_resp r;

	n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"traceEvents\":[");
	for (int i = 0; i < 6; i++) {
		int64_t d = step_us + (i % 3 - 1) * step_us / 100;
		n += (size_t)snprintf(text + n, sizeof(text) - n, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\","
				      "\"name\":\"ProfilerStep#%d\",\"pid\":1,\"tid\":1,\"ts\":%lld,\"dur\":%lld}",
				      i ? "," : "", i, (long long)t, (long long)d);
		t += d;
	}
	n += (size_t)snprintf(text + n, sizeof(text) - n, "]}");
	snprintf(path, sizeof(path), "/api/v1/runs/%s/artifacts?name=t.json", run);
	ck_assert_int_eq(tu_http(&srv, "POST", path, text, n, NULL, &r), 0);
	ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
	tu_resp_free(&r);
}

START_TEST(test_compare_gates)
{
	const char *slower[] = { "compare", "cbase", "cslow", NULL };
	const char *same[] = { "compare", "cbase", "cbase", NULL };
	const char *lenient[] = { "compare", "--threshold-pct", "150", "cbase", "cslow", NULL };
	const char *baseline[] = { "compare", "cslow", NULL };
	const char *unknown[] = { "compare", "cbase", "nosuchrun", NULL };
	const char *bad[] = { "compare", "--alpha", "x", "cbase", "cslow", NULL };
	const char patch[] = "{\"baseline\": true}";
	struct tu_resp r;
	char *out;

	upload_steps("cbase", 10000);
	upload_steps("cslow", 20000);
	/* twice as slow: a regression, exit 5, the verdict and step time printed */
	ck_assert_int_eq(collect("slow", slower, NULL), 5);
	out = output("slow", "out");
	ck_assert_msg(strstr(out, "cbase -> cslow: regression") && strstr(out, "step time") && strstr(out, "+100.0%"),
		      "%s", out);
	free(out);
	/* a run against itself: no change, exit 0 */
	ck_assert_int_eq(collect("same", same, NULL), 0);
	out = output("same", "out");
	ck_assert_msg(strstr(out, "cbase -> cbase: no_change"), "%s", out);
	free(out);
	/* the threshold is the caller's */
	ck_assert_int_eq(collect("lenient", lenient, NULL), 0);
	/* no base: the project's baseline, once there is one */
	ck_assert_int_eq(collect("nobase", baseline, NULL), 1);
	ck_assert_int_eq(tu_http(&srv, "PATCH", "/api/v1/runs/cbase", patch, strlen(patch), NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	ck_assert_int_eq(collect("baseline", baseline, NULL), 5);
	/* a run without steps against one with them: not comparable, exit 6, and why */
	static const char nosteps[] = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"
				      "\"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
				      " at::detail::Array<char*, 3> >(int)\",\"pid\":1,\"tid\":1,\"ts\":1700000000000000,"
				      "\"dur\":10}]}";
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/cnone/artifacts?name=n.json", nosteps, strlen(nosteps), NULL,
				 &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(collect("nc", (const char *[]){ "compare", "cbase", "cnone", NULL }, NULL), 6);
	out = output("nc", "out");
	ck_assert_msg(strstr(out, "cbase -> cnone: not_comparable") && strstr(out, "not comparable: target 'cnone' has no"),
		      "%s", out);
	/* no step time where a run has none, tables per trace as the answer says, long names cut in the middle */
	ck_assert_msg(!strstr(out, "step time    ") && strstr(out, "operators, per trace") &&
			      strstr(out, "void at::native::vectorized_...etail::") && strstr(out, "Array<char*, 3> >(int)"),
		      "%s", out);
	free(out);
	/* the server's 404, and a bad flag */
	ck_assert_int_eq(collect("unknown", unknown, NULL), 1);
	out = output("unknown", "err");
	ck_assert_msg(strstr(out, "404"), "%s", out);
	free(out);
	ck_assert_int_eq(collect("bad", bad, NULL), 2);
}
END_TEST

/* Two rlhf-canary runs (tests/formats: the slow one 25 % slower per step): the notebook's table, exit 5. */
START_TEST(test_compare_canary)
{
	static const char *const files[][2] = { { "kbase", "tests/formats/canary_baseline.json" },
						 { "kslow", "tests/formats/canary_slow.json" } };
	struct tu_resp r;
	char *out;

	for (int i = 0; i < 2; i++) {
		char *path = tu_source_path(files[i][1]), url[128];
		size_t len;
		uint8_t *d = tu_read_file(path, &len);
		ck_assert_ptr_nonnull(d);
		snprintf(url, sizeof(url), "/api/v1/runs/%s/artifacts?name=metrics.json", files[i][0]);
		ck_assert_int_eq(tu_http(&srv, "POST", url, d, len, NULL, &r), 0);
		ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
		tu_resp_free(&r);
		free(d);
		free(path);
	}
	/* (0.64 - 0.512) / 0.512 = +25.0 %, (6400 - 8000) / 8000 = -20.0 %, 1792.5 - 2048.5 = -256 MB */
	ck_assert_int_eq(collect("canary", (const char *[]){ "compare", "kbase", "kslow", NULL }, NULL), 5);
	out = output("canary", "out");
	ck_assert_msg(strstr(out, "kbase -> kslow: regression") && strstr(out, "rlhf-canary metrics") &&
			      strstr(out, "0.5120") && strstr(out, "0.6400") && strstr(out, "+25.0%") &&
			      strstr(out, "-20.0%") && strstr(out, "-256"), "%s", out);
	free(out);
}
END_TEST

/* ---- the file as it was, and what the CLI says ---- */

/*
 * compare with no server: each retry said, as upload says it, with the wait
 * it bounds; then it gives up within that bound with exit 3 and nothing on
 * stdout (spawn's backoff: 20 ms doubling up to 200 ms).
 */
START_TEST(test_compare_server_away)
{
	const char *args[] = { "compare", "cbase", "cslow", NULL };
	char server[64], want[128], *err, *out;
	const char *four[] = { server, "TRAINSCOPE_RETRY_ATTEMPTS=4", NULL }, *dflt[] = { server, NULL };
	struct timespec t0, t1;
	int port, fd = refused_port(&port);
	double s;

	snprintf(server, sizeof(server), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", port);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(collect("four", args, four), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* three waits of 20, 40 and 80 ms, jittered to half of each at least: 70 to 140 ms, and the start */
	ck_assert_msg(s >= 0.07 && s < 0.14 + 2, "%.3f s", s);
	err = output("four", "err");
	ck_assert_int_eq(collector_lines(err), 4);
	ck_assert_int_eq(count_of(err, "server not reachable (http://127.0.0.1:"), 4);
	ck_assert_int_eq(count_of(err, "; retrying in "), 3);
	for (int i = 1; i <= 3; i++) {
		snprintf(want, sizeof(want), " ms (attempt %d of 4, at most 0.1 s of waiting in all)\n", i);
		ck_assert_msg(strstr(err, want), "no '%s' in %s", want, err);
	}
	ck_assert_msg(strstr(err, "trainscope-collect: compare: gave up after 4 attempts in 0.") &&
			      strstr(err, " s: server not reachable (http://127.0.0.1:"), "%s", err);
	free(err);
	out = output("four", "out");
	ck_assert_str_eq(out, "");
	free(out);
	/* the default 8 attempts: 20+40+80+160+200+200+200 ms at most */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(collect("eight", args, dflt), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s >= 0.45 && s < 0.9 + 2, "%.3f s", s);
	err = output("eight", "err");
	ck_assert_int_eq(count_of(err, "; retrying in "), 7);
	ck_assert_msg(strstr(err, "(attempt 7 of 8, at most 0.9 s of waiting in all)\n") &&
			      strstr(err, "compare: gave up after 8 attempts in "), "%s", err);
	free(err);
	close(fd);
}
END_TEST

static void sha256_hex(const void *data, size_t len, char out[65])
{
	struct sha256 h;

	sha256_init(&h);
	sha256_update(&h, data, len);
	sha256_final_hex(&h, out);
}

START_TEST(test_raw_is_the_file)
{
	char *pk = tu_fixture("memory/cs336_memory_snapshot.pickle"), sha[65], got[65], path[160];
	const char *args[] = { "upload", "--run", "rawpk", pk, NULL };
	size_t len;
	uint8_t *file = tu_read_file(pk, &len);
	struct tu_resp r;
	json_t *arts, *a;

	/* the pickle is not gzip: the collector gzips it in transit */
	ck_assert_ptr_nonnull(file);
	ck_assert(file[0] != 0x1f);
	sha256_hex(file, len, sha);
	ck_assert_int_eq(collect("pk", args, NULL), 0);
	arts = artifacts("rawpk");
	ck_assert_int_eq(json_array_size(arts), 1);
	a = json_array_get(arts, 0);
	ck_assert_str_eq(json_string_value(json_object_get(a, "sha256")), sha);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), (json_int_t)len);
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "memory_snapshot");
	/* the download is the file (memory_viz opens it), under its name */
	snprintf(path, sizeof(path), "/api/v1/runs/rawpk/artifacts/%" JSON_INTEGER_FORMAT "/raw",
		 json_integer_value(json_object_get(a, "id")));
	ck_assert_int_eq(tu_http(&srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.content_encoding, "");
	ck_assert_uint_eq(r.len, len);
	sha256_hex(r.body, r.len, got);
	ck_assert_str_eq(got, sha);
	ck_assert_ptr_nonnull(strstr(r.headers, "filename=\"cs336_memory_snapshot.pickle\""));
	tu_resp_free(&r);
	/* the same file by plain HTTP (curl --data-binary) is the same artifact */
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/rawpk/artifacts?name=again.pickle", file, len, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	tu_resp_free(&r);
	ck_assert_int_eq(count_artifacts("rawpk"), 1);
	/* and the other way round: the collector after curl */
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/rawpk2/artifacts?name=a.pickle", file, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	args[2] = "rawpk2";
	ck_assert_int_eq(collect("pk2", args, NULL), 0);
	char *out = output("pk2", "out");
	ck_assert_msg(strstr(out, "(already there)"), "%s", out);
	free(out);
	ck_assert_int_eq(count_artifacts("rawpk2"), 1);
	/* an encoding the server does not take is refused before anything is kept */
	ck_assert_int_eq(tu_http(&srv, "POST", "/api/v1/runs/rawpk3/artifacts?name=b.pickle", file, len,
				 "Content-Encoding: br", &r), 0);
	ck_assert_int_eq(r.status, 415);
	tu_resp_free(&r);
	ck_assert_int_eq(count_artifacts("rawpk3"), 0);
	json_decref(arts);
	free(file);
	free(pk);
}
END_TEST

START_TEST(test_ports_checked)
{
	const char *up[] = { "upload", "--run", "p", "--server", "http://127.0.0.1:70000", "x.json", NULL };
	const char *cmp[] = { "compare", "a", "b", NULL };
	const char *badenv[] = { "TRAINSCOPE_SERVER=http://127.0.0.1:70000/", NULL };
	const char *zero[] = { "upload", "--run", "p", "--server", "http://127.0.0.1:0", "x.json", NULL };
	char *err, *db = path_in("p.db");
	int st;

	ck_assert_int_eq(collect("port", up, NULL), 2);
	err = output("port", "err");
	ck_assert_msg(strstr(err, "127.0.0.1:70000") && strstr(err, "65535"), "%s", err);
	free(err);
	ck_assert_int_eq(collect("portenv", cmp, badenv), 2);
	ck_assert_int_eq(collect("port0", zero, NULL), 2);
	/* the server: exit 2, where it used to listen on 70000 - 65536 = 4464 */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(SERVER_BIN, SERVER_BIN, "--listen", "127.0.0.1:70000", "--db", db, (char *)NULL);
		_exit(126);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 2);
	ck_assert_int_ne(access(db, F_OK), 0);	/* refused before the database is made */
	free(db);
}
END_TEST

START_TEST(test_watch_says_what_it_did)
{
	char *sub = path_in("says"), *t, *err, want[256];
	const char *once[] = { "watch", "--once", "--run", "says", sub, NULL };
	size_t bytes = 0;
	const char *watch[] = { "watch", "--run", "says", sub, NULL };
	pid_t pid;

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	/* nothing there: it says so */
	ck_assert_int_eq(collect("empty", once, NULL), 0);
	err = output("empty", "err");
	ck_assert_msg(strstr(err, "done: shipped nothing"), "%s", err);
	free(err);
	/* two files: it says it shipped them */
	t = trace_text("says", 1);
	put_file("says/a.json", t, 10);
	bytes += strlen(t);
	free(t);
	t = trace_text("says", 2);
	put_file("says/b.json", t, 10);
	bytes += strlen(t);
	free(t);
	ck_assert_int_eq(collect("two", once, NULL), 0);
	err = output("two", "err");
	/* with their bytes and where the run can be seen */
	snprintf(want, sizeof(want), "done: 2 file(s) shipped (%zu bytes), 0 rejected, 0 left waiting; see %s/runs/says\n",
		 bytes, srv.base);
	ck_assert_msg(strstr(err, want), "want %s got %s", want, err);
	free(err);
	/* stopped by a signal after one more */
	pid = spawn("term", watch, NULL);
	t = trace_text("says", 3);
	put_renamed("says/.c.tmp", "says/c.json", t);
	free(t);
	ck_assert_int_eq(wait_artifacts("says", 3), 3);
	sleep_ms(100);
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	err = output("term", "err");
	ck_assert_msg(strstr(err, "stopped by a signal: 1 file(s) shipped"), "%s", err);
	free(err);
	free(sub);
}
END_TEST

/* The fixture rel put in dir as name, age_s old; returns how many lines it has. */
static size_t put_fixture(const char *rel, const char *name, int age_s)
{
	char *p = tu_fixture(rel), *t;
	size_t len, lines = 0;

	ck_assert_ptr_nonnull(t = (char *)tu_read_file(p, &len));
	ck_assert_uint_eq(strlen(t), len);
	for (size_t i = 0; i < len; i++)
		lines += t[i] == '\n';
	put_file(name, t, age_s);
	free(t);
	free(p);
	return lines;
}

static const char *field(json_t *arts, const char *name, const char *key)
{
	return json_string_value(json_object_get(by_name(arts, name), key));
}

/*
 * watch ships other profilers' outputs too (.txt, .csv), the server telling the
 * kinds apart; text it takes for none gets a 415 that is said once and not sent
 * again; a text file still written to (a line cut short, or changed within
 * 30 s) waits, one renamed into the folder goes at once.
 */
START_TEST(test_watch_formats)
{
	const char *args[] = { "watch", "--run", "wf", dir, NULL };
	const char *again[] = { "watch", "--run", "wf", dir, NULL };
	static const char row[] = "2026/04/25 16:06:06.780, 0 %, 0 %, 2 MiB, 20146 MiB, 27, 11.64 W\n";
	size_t rows;
	json_t *arts;
	char *err;
	pid_t pid;

	/* quiet for 40 s: due (the state-of-the-art writer, nvidia-smi -l, has stopped) */
	put_fixture("formats/lightning_simple_pl1.2_hannah.txt", "profile.txt", 40);
	rows = put_fixture("formats/nvidia_smi_noheader_plato.csv", "gpu_usage.csv", 40);
	put_fixture("formats/export_stacks_gpt2_profile.txt", "stacks.txt", 40);
	put_fixture("formats/key_averages_cuda_kernelheim.txt", "key_averages.txt", 40);
	put_file("requirements.txt", "torch==2.5.1\nlightning==2.4.0\n", 40);
	/* a row cut short, 40 s ago: the writer may be mid-line, it waits (60 s before it goes as it is) */
	put_file("cut.csv", "2026/04/25 16:06:06.780, 0 %, 0 %, 2 MiB, 20146 MiB, 27, 11.64 W\n2026/04/25 16:06:11.7", 40);
	pid = spawn("formats", args, NULL);
	ck_assert_uint_eq(wait_artifacts("wf", 5), 5);
	/* renamed in: finished, at once; written in place now: waits 30 s of quiet */
	put_renamed(".smi.csv.part", "smi.csv", row);
	ck_assert_uint_eq(wait_artifacts("wf", 6), 6);
	put_file("live.csv", row, 0);
	sleep_ms(2500);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	arts = artifacts("wf");
	ck_assert_int_eq(json_array_size(arts), 6);
	ck_assert_str_eq(field(arts, "profile.txt", "kind"), "lightning_report");
	ck_assert_str_eq(field(arts, "gpu_usage.csv", "kind"), "gpu_log");
	ck_assert_str_eq(field(arts, "stacks.txt", "kind"), "stacks");
	ck_assert_str_eq(field(arts, "key_averages.txt", "kind"), "key_averages");
	ck_assert_str_eq(field(arts, "smi.csv", "kind"), "gpu_log");
	ck_assert_str_eq(field(arts, "requirements.txt", "status"), "error");
	ck_assert_int_eq(named(arts, "cut.csv") + named(arts, "live.csv"), 0);
	/* whole: every row of the log is an event */
	ck_assert_int_eq(json_integer_value(json_object_get(by_name(arts, "gpu_usage.csv"), "events")), (json_int_t)rows);
	json_decref(arts);
	err = output("formats", "err");
	ck_assert_msg(strstr(err, "requirements.txt: 415 unsupported_format"), "%s", err);
	ck_assert_msg(strstr(err, "stopped by a signal: 5 file(s) shipped (") && strstr(err, "), 1 rejected, 2 left waiting"),
		      "%s", err);
	free(err);
	/* started again: the 415 is not sent again, nor anything else; the two still wait */
	pid = spawn("again", again, NULL);
	sleep_ms(1500);
	kill(pid, SIGTERM);
	ck_assert_int_eq(reap(pid), 0);
	err = output("again", "err");
	ck_assert_msg(!strstr(err, "requirements.txt"), "%s", err);
	ck_assert_msg(strstr(err, "stopped by a signal: 0 file(s) shipped (0 bytes), 0 rejected, 2 left waiting"), "%s", err);
	free(err);
	ck_assert_int_eq(uploads_answered(201) + uploads_answered(200), 5);	/* the 415 is counted apart */
	ck_assert_int_eq(count_artifacts("wf"), 6);
}
END_TEST

/*
 * A server that reads slowly (32 KiB every 10 ms, about 3 MB/s, from a small
 * receive buffer), so that an upload takes seconds, then answers 201:
 * upload's progress bar has a rate and an ETA to show.
 */
static int slow_listener(int *port)
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

static void serve_slowly(int lfd, size_t body_len)
{
	static const char body[] = "{\"artifact\":{\"id\":1,\"status\":\"ready\",\"name\":\"big.json.gz\"}}";
	char buf[32768], answer[256];
	size_t got = 0, head = 0;
	int c = accept(lfd, NULL, NULL);

	ck_assert_int_ge(c, 0);
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf));
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
		if (!head) {
			char *end = memmem(buf, (size_t)n, "\r\n\r\n", 4);
			if (end)
				head = (size_t)(end - buf) + 4;
			if (memmem(buf, (size_t)n, "100-continue", 12))
				ck_assert_int_eq(write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25), 25);
		}
		if (head && got >= head + body_len)
			break;
		sleep_ms(10);
	}
	snprintf(answer, sizeof(answer), "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_int_eq(write(c, answer, strlen(answer)), (ssize_t)strlen(answer));
	close(c);
}

START_TEST(test_upload_progress)
{
	char *big = path_in("big.json.gz"), url[64];
	size_t len = 12u << 20;	/* 4 s at 3 MB/s: the bar shows a rate after 1 s, with most of the file to go */
	uint8_t *b = malloc(len);
	char out[65536];
	size_t n = 0;
	int lfd, port, pty;
	pid_t pid;

	for (size_t i = 0; i < len; i++)
		b[i] = (uint8_t)(i * 2654435761u >> 13);
	b[0] = 0x1f, b[1] = 0x8b;	/* gzip by its magic: sent as it is, len bytes (the fake server reads no further) */
	ck_assert_int_eq(tu_write_file(big, b, len), 0);
	lfd = slow_listener(&port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	/* on a terminal: the bar with a rate and an ETA */
	pid = forkpty(&pty, NULL, NULL, NULL);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		unsetenv("TRAINSCOPE_TOKEN");
		execl(COLLECT_BIN, COLLECT_BIN, "upload", "--server", url, "--run", "slow", big, (char *)NULL);
		_exit(126);
	}
	serve_slowly(lfd, len);
	for (;;) {
		ssize_t r = read(pty, out + n, sizeof(out) - 1 - n);
		if (r <= 0)
			break;	/* EIO once the collector is gone */
		n += (size_t)r;
	}
	out[n] = 0;
	ck_assert_int_eq(reap(pid), 0);
	close(pty);
	ck_assert_msg(strstr(out, "big.json.gz  ") && strstr(out, "/s  ETA ") && strstr(out, "\r\033[K"), "%s", out);
	/* not on a terminal: no bar at all */
	pid = spawn("notty", (const char *[]){ "upload", "--server", url, "--run", "slow", big, NULL }, NULL);
	serve_slowly(lfd, len);
	ck_assert_int_eq(reap(pid), 0);
	char *err = output("notty", "err");
	ck_assert_msg(!strchr(err, '\r') && !strstr(err, "ETA"), "%s", err);
	free(err);
	close(lfd);
	free(b);
	free(big);
}
END_TEST

/* A connection on lfd within ms, or -1. */
static int accept_within(int lfd, int ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	return poll(&p, 1, ms) > 0 ? accept(lfd, NULL, NULL) : -1;
}

/*
 * Read one upload from c as the collector sends a plain file (chunked,
 * gzip'd on the way) and put its name= into name.
 */
static void read_upload(int c, char *name, size_t cap)
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

static void answer_upload(int c, int status, const char *name)
{
	char body[256], msg[512];

	if (status == 201)
		snprintf(body, sizeof(body), "{\"artifact\":{\"id\":1,\"status\":\"ready\",\"name\":\"%s\"}}", name);
	else if (status == 415)
		snprintf(body, sizeof(body), "{\"error\":{\"code\":\"unknown_format\",\"message\":\"not a profile\"}}");
	else
		snprintf(body, sizeof(body), "{\"error\":{\"code\":\"busy\",\"message\":\"try later\"}}");
	snprintf(msg, sizeof(msg), "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s", status, status == 201 ? "Created" : status == 415 ? "Unsupported Media Type" :
		 "Service Unavailable", strlen(body), body);
	ck_assert_int_eq(write(c, msg, strlen(msg)), (ssize_t)strlen(msg));
	close(c);
}

/*
 * A hostile server (issue 50): a message with terminal escapes (ESC [2J,
 * and CSI as the C1 U+009B) is printed with each control character as
 * \xNN; a server that takes the upload and then says nothing is given up
 * on after TRAINSCOPE_SILENCE_S, once, not retried for minutes.
 */
START_TEST(test_upload_hostile_server)
{
	static const char body[] = "{\"error\":{\"code\":\"bad\\u001b[2J\",\"message\":\"x\\u001b[2J\\u009b31my\\u0007\"}}";
	const char *args[] = { "upload", "--run", "hostile", NULL, NULL };
	char *t = trace_text("hostile", 0), *err, url[80], name[64], msg[512], *senv, *qenv;
	const char *env[3];
	struct timespec t0, t1;
	int lfd, port, c;
	pid_t pid;

	put_file("t.json", t, 0);
	args[3] = path_in("t.json");
	lfd = slow_listener(&port);
	snprintf(url, sizeof(url), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", port);
	ck_assert_int_ge(asprintf(&senv, "%s", url), 0);
	env[0] = senv, env[1] = NULL;
	pid = spawn("escapes", args, env);
	ck_assert_int_ge(c = accept_within(lfd, 10000), 0);
	read_upload(c, name, sizeof(name));
	snprintf(msg, sizeof(msg), "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_int_eq(write(c, msg, strlen(msg)), (ssize_t)strlen(msg));
	close(c);
	ck_assert_int_eq(reap(pid), 1);
	err = output("escapes", "err");
	ck_assert_msg(!strchr(err, 0x1b) && !strchr(err, 0x07) && !strstr(err, "\xc2\x9b"), "raw control bytes: %s", err);
	ck_assert_msg(strstr(err, "400 bad\\x1b[2J: x\\x1b[2J\\x9b31my\\x07"), "%s", err);
	free(err);

	/* silent: the upload is read whole and never answered */
	ck_assert_int_ge(asprintf(&qenv, "TRAINSCOPE_SILENCE_S=2"), 0);
	env[1] = qenv, env[2] = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = spawn("silent", args, env);
	ck_assert_int_ge(c = accept_within(lfd, 10000), 0);
	read_upload(c, name, sizeof(name));
	ck_assert_int_eq(reap(pid), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(accept_within(lfd, 100), 0);	/* not sent again */
	close(c);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 10);
	err = output("silent", "err");
	ck_assert_msg(strstr(err, "sent nothing for 2 s (TRAINSCOPE_SILENCE_S); gave up"), "%s", err);
	free(err);
	close(lfd);
	free(senv);
	free(qenv);
	free((char *)args[3]);
	free(t);
}
END_TEST

/*
 * A file watch cannot open is named on stderr and counted in its last line
 * (it was skipped without a word: "1 file(s) shipped, 0 rejected"). Root
 * reads a file of mode 000, so only the other users see the refusal; a
 * folder named like a trace is not a file and is passed over either way.
 */
START_TEST(test_watch_names_unreadable)
{
	const char *args[] = { "watch", "--once", "--run", "unread", dir, NULL };
	char *t = trace_text("unread", 0), *u = trace_text("unread", 1), *p = path_in("locked.json"), *err;

	put_file("ok.json", t, 10);
	put_file("locked.json", u, 10);
	ck_assert_int_eq(chmod(p, 0), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(collect("unread", args, NULL), 0);
		ck_assert_int_eq(count_artifacts("unread"), 2);
	} else {
		ck_assert_int_eq(collect("unread", args, NULL), 0);
		ck_assert_int_eq(count_artifacts("unread"), 1);
		err = output("unread", "err");
		ck_assert_msg(strstr(err, "cannot read ") && strstr(err, "locked.json: Permission denied"), "%s", err);
		ck_assert_msg(strstr(err, "1 file(s) shipped (") && strstr(err, "0 rejected, 1 unreadable (named above)"),
			      "%s", err);
		free(err);
	}
	chmod(p, 0600);
	free(p);
	free(t);
	free(u);
}
END_TEST

/*
 * The first two uploads on lfd, sent before either is answered, with no
 * third opened meanwhile: those of names a and b, in either order (each on
 * a connection of its own). *ca and *cb get their connections.
 */
static void accept_pair(int lfd, const char *a, const char *b, int *ca, int *cb)
{
	char n1[64], n2[64];
	int c1, c2;

	ck_assert_int_ge(c1 = accept_within(lfd, 10000), 0);
	read_upload(c1, n1, sizeof(n1));
	ck_assert_int_ge(c2 = accept_within(lfd, 10000), 0);
	read_upload(c2, n2, sizeof(n2));
	ck_assert_int_lt(accept_within(lfd, 300), 0);
	ck_assert_msg((!strcmp(n1, a) && !strcmp(n2, b)) || (!strcmp(n1, b) && !strcmp(n2, a)), "%s %s", n1, n2);
	*ca = strcmp(n1, a) ? c2 : c1;
	*cb = strcmp(n1, a) ? c1 : c2;
}

/*
 * A backlog goes two at a time (WATCH_IN_FLIGHT), in queue order, never
 * three; a transient failure of one of a pair retries it alone of the two
 * (the other was recorded), and every file is shipped once. A file starts
 * as soon as one in flight is answered: t2 is sent while t1 waits.
 */
START_TEST(test_watch_two_in_flight)
{
	enum { N = 5 };
	char url[64], got[N][64], name[32];
	int lfd, port, c0, c1, c, i, k, status = 0, ngot = 0, shipped[N] = { 0 };
	pid_t pid;
	char *out, *err;

	for (i = 0; i < N; i++) {
		char *t = trace_text("two", i);
		snprintf(name, sizeof(name), "t%d.json", i);
		put_file(name, t, 10);
		free(t);
	}
	lfd = slow_listener(&port);
	ck_assert_int_eq(listen(lfd, 8), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	pid = spawn("two", (const char *[]){ "watch", "--once", "--server", url, "--run", "two", dir, NULL }, NULL);
	/* t0 and t1, the queue's first two */
	accept_pair(lfd, "t0.json", "t1.json", &c0, &c1);
	/* t1 answered first: t2 goes at once, while t0 is still in flight */
	answer_upload(c1, 201, "t1.json");
	ck_assert_int_ge(c = accept_within(lfd, 10000), 0);
	read_upload(c, got[ngot], sizeof(got[0]));
	ck_assert_str_eq(got[ngot], "t2.json");
	answer_upload(c0, 503, "t0.json");
	answer_upload(c, 201, got[ngot]);
	shipped[1] = shipped[2] = 1;
	ngot++;
	/* the rest, t0 again among them, each answered as it comes */
	for (;;) {
		if ((c = accept_within(lfd, 100)) < 0) {
			if (waitpid(pid, &status, WNOHANG) == pid)
				break;
			continue;
		}
		ck_assert_int_lt(ngot, N - 1);
		read_upload(c, got[ngot], sizeof(got[0]));
		answer_upload(c, 201, got[ngot]);
		ck_assert_int_eq(sscanf(got[ngot], "t%d.json", &k), 1);
		ck_assert(k >= 0 && k < N && !shipped[k]);
		shipped[k] = 1;
		ngot++;
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(ngot, N - 1);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(shipped[i], 1);
	out = output("two", "out");
	err = output("two", "err");
	/* said as answered: t1 first, t0 (it failed first) after t2, each once */
	{
		static const char *const order[3] = { "t1.json: artifact", "t2.json: artifact", "t0.json: artifact" };
		const char *at = out;
		for (i = 0; i < 3; i++) {
			ck_assert_msg((at = strstr(at, order[i])), "%s not in order in: %s", order[i], out);
			at++;
		}
		for (i = 0; i < N; i++) {
			snprintf(name, sizeof(name), "t%d.json: artifact", i);
			ck_assert_msg((at = strstr(out, name)) && !strstr(at + 1, name), "%s not once in: %s", name, out);
		}
	}
	ck_assert_msg(strstr(err, "t0.json: 503 busy: try later; trying again in"), "%s", err);
	ck_assert_msg(strstr(err, "5 file(s) shipped (") && strstr(err, "), 0 rejected, 0 left waiting"), "%s", err);
	free(out);
	free(err);
	close(lfd);
}
END_TEST

/*
 * upload FILE... sends two files at a time (UPLOAD_IN_FLIGHT), never three,
 * and says each answer in the files' order whatever order they come in; a
 * rejected file (415) does not stop the others, and makes the exit code 1.
 */
START_TEST(test_upload_two_in_flight)
{
	enum { N = 4 };
	char url[64], n[64], name[32], *path[N];
	const char *args[N + 6] = { "upload", "--server", url, "--run", "two" };
	int lfd, port, c0, c1, c, i, status = 0;
	pid_t pid;
	char *out, *err;

	for (i = 0; i < N; i++) {
		char *t = trace_text("uptwo", i);
		snprintf(name, sizeof(name), "u%d.json", i);
		put_file(name, t, 10);
		free(t);
		args[5 + i] = path[i] = path_in(name);
	}
	lfd = slow_listener(&port);
	ck_assert_int_eq(listen(lfd, 8), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	pid = spawn("uptwo", args, NULL);
	accept_pair(lfd, "u0.json", "u1.json", &c0, &c1);
	/* u1 answered first */
	answer_upload(c1, 201, "u1.json");
	/* u2 comes while u0 waits: u1's worker took it */
	ck_assert_int_ge(c = accept_within(lfd, 10000), 0);
	read_upload(c, n, sizeof(n));
	ck_assert_str_eq(n, "u2.json");
	answer_upload(c0, 201, "u0.json");
	answer_upload(c, 415, "u2.json");
	ck_assert_int_ge(c = accept_within(lfd, 10000), 0);
	read_upload(c, n, sizeof(n));
	ck_assert_str_eq(n, "u3.json");
	answer_upload(c, 201, "u3.json");
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	out = output("uptwo", "out");
	err = output("uptwo", "err");
	{
		static const char *const order[] = { "u0.json: artifact", "u1.json: artifact", "u3.json: artifact" };
		const char *at = out;
		for (i = 0; i < 3; i++) {
			ck_assert_msg((at = strstr(at, order[i])), "%s not in order in: %s", order[i], out);
			at++;
		}
	}
	ck_assert_msg(!strstr(out, "u2.json"), "%s", out);
	ck_assert_msg(strstr(err, "u2.json: 415 unknown_format: not a profile"), "%s", err);
	free(out);
	free(err);
	for (i = 0; i < N; i++)
		free(path[i]);
	close(lfd);
}
END_TEST

Suite *suite_collect(void)
{
	Suite *s = suite_create("collect");
	TCase *tc = tcase_create("collect");

	tcase_add_checked_fixture(tc, start, stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_upload_fixtures);
	tcase_add_test(tc, test_upload_rank_from_env);
	tcase_add_test(tc, test_upload_bad_token);
	tcase_add_test(tc, test_upload_server_away);
	tcase_add_test(tc, test_watch_renamed);
	tcase_add_test(tc, test_watch_once);
	tcase_add_test(tc, test_watch_links_names_and_unfinished);
	tcase_add_test(tc, test_watch_sigkill);
	tcase_add_test(tc, test_watch_sigterm);
	tcase_add_test(tc, test_watch_two_in_flight);
	tcase_add_test(tc, test_upload_two_in_flight);
	tcase_add_test(tc, test_run_chunks);
	tcase_add_test(tc, test_run_passes_sigterm);
	tcase_add_test(tc, test_run_server_restart);
	tcase_add_test(tc, test_run_says_what_it_did);
	tcase_add_test(tc, test_usage);
	tcase_add_test(tc, test_compare_gates);
	tcase_add_test(tc, test_compare_canary);
	tcase_add_test(tc, test_compare_server_away);
	tcase_add_test(tc, test_raw_is_the_file);
	tcase_add_test(tc, test_ports_checked);
	tcase_add_test(tc, test_watch_says_what_it_did);
	tcase_add_test(tc, test_watch_formats);
	tcase_add_test(tc, test_upload_progress);
	tcase_add_test(tc, test_upload_hostile_server);
	tcase_add_test(tc, test_watch_names_unreadable);
	suite_add_tcase(s, tc);
	return s;
}
