/*
 * check_collect.c: trainscope-collect upload against the real server on
 * loopback: every fixture kind the server takes, the rank from the
 * environment, the faults (a bad token, the server away), the file stored
 * as it was sent, ports checked, the progress bar, a hostile server, and two
 * uploads in flight. watch is in check_collect_watch.c, run, compare and
 * the usage in check_collect_run.c; the helpers in collect_util.c.
 */
#define _GNU_SOURCE	/* asprintf */
#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect_util.h"
#include "sha256.h"
#include "suites.h"

/* ---- upload ---- */

START_TEST(test_upload_fixtures)
{
	char *gz = tu_fixture("traces/hta_cpu_only.json.gz"), *mem = tu_fixture("memory/hta_memory_timeline.raw.json.gz");
	char *alex = tu_fixture("traces/hta_alexnet.json.gz"), *plain = cl_path_in("alexnet.pt.trace.json");
	const char *args[] = { "upload", "--run", "up", plain, gz, mem, NULL };
	size_t zlen, len, rawlen;
	uint8_t *z = tu_read_file(alex, &zlen), *text = tu_gunzip(z, zlen, &len), *raw;
	struct tu_resp r;
	json_t *arts, *a, *j;
	char *out, path[128];

	/* the plain trace is gzip'd on the way, the two gzip files go as they are */
	ck_assert_int_eq(tu_write_file(plain, text, len), 0);
	ck_assert_int_eq(cl_collect("up", args, NULL), 0);
	out = cl_output("up", "out");
	ck_assert_msg(strstr(out, "alexnet.pt.trace.json: artifact ") && strstr(out, " ready (new)"), "%s", out);
	free(out);
	arts = cl_artifacts("up");
	ck_assert_int_eq(json_array_size(arts), 3);
	a = cl_by_name(arts, "alexnet.pt.trace.json");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "trace");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 1408);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "rank")), 0);
	/* gzip'd in transit only: the download is the file, byte for byte, and its size the file's */
	ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), (json_int_t)len);
	snprintf(path, sizeof(path), "/api/v1/runs/up/artifacts/%" JSON_INTEGER_FORMAT "/raw",
		 json_integer_value(json_object_get(a, "id")));
	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(r.len == len && !memcmp(r.body, text, len), "the download is not the file");
	tu_resp_free(&r);
	/* a client that takes gzip gets it gzip-encoded, and it inflates to the file */
	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, "Accept-Encoding: gzip", &r), 0);
	ck_assert_str_eq(r.content_encoding, "gzip");
	raw = tu_gunzip(r.body, r.len, &rawlen);
	ck_assert_msg(raw && rawlen == len && !memcmp(raw, text, len), "stored bytes do not inflate to the file");
	free(raw);
	tu_resp_free(&r);
	a = cl_by_name(arts, "hta_cpu_only.json.gz");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(a, "events")), 30);
	a = cl_by_name(arts, "hta_memory_timeline.raw.json.gz");
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "memory_timeline");
	ck_assert_str_eq(json_string_value(json_object_get(a, "status")), "ready");
	json_decref(arts);
	/* the timeline is queryable: 7,721 distinct time points (fixtures/README.md) */
	j = cl_get("/api/v1/runs/up/memory?points=0");
	ck_assert_int_eq(json_array_size(json_object_get(j, "t_ns")), 7721);
	json_decref(j);

	/* again: the server has these bytes, nothing new */
	ck_assert_int_eq(cl_collect("again", args, NULL), 0);
	out = cl_output("again", "out");
	ck_assert_msg(strstr(out, "(already there)"), "%s", out);
	free(out);
	ck_assert_int_eq(cl_count_artifacts("up"), 3);
	ck_assert_int_eq(cl_answered(200, 3), 3);
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

	t = cl_trace_text("r", 1);
	cl_put_file("a.json", t, 0);
	free(t);
	t = cl_trace_text("r", 2);
	cl_put_file("b.json", t, 0);
	free(t);
	t = cl_trace_text("r", 3);
	cl_put_file("c.json", t, 0);
	free(t);
	args[3] = cl_path_in("a.json");
	ck_assert_int_eq(cl_collect("a", args, both), 0);
	free((char *)args[3]);
	args[3] = cl_path_in("b.json");
	ck_assert_int_eq(cl_collect("b", args, torchrun), 0);
	free((char *)args[3]);
	flag[3] = cl_path_in("c.json");
	ck_assert_int_eq(cl_collect("c", flag, run_env), 0);
	free((char *)flag[3]);
	arts = cl_artifacts("ranks");
	ck_assert_int_eq(json_integer_value(json_object_get(cl_by_name(arts, "a.json"), "rank")), 5);
	ck_assert_int_eq(json_integer_value(json_object_get(cl_by_name(arts, "b.json"), "rank")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(cl_by_name(arts, "c.json"), "rank")), 9);
	json_decref(arts);
}
END_TEST

START_TEST(test_upload_bad_token)
{
	char *tokfile = cl_path_in("tokens"), *f, *err;
	const char *extra[] = { "--token-file", tokfile, NULL };
	const char *args[] = { "upload", "--run", "tok", NULL, NULL };
	const char *wrong[] = { "TRAINSCOPE_TOKEN=not-the-token-0123456789", NULL };
	const char *right[] = { "TRAINSCOPE_TOKEN=secret-token-0123456789", NULL };
	const char *watch[] = { "watch", "--run", "tok", cl_dir, NULL };
	char *t = cl_trace_text("tok", 0);

	ck_assert_int_eq(tu_write_file(tokfile, "secret-token-0123456789\n", 24), 0);
	tu_server_stop(&cl_srv);
	ck_assert_int_eq(tu_server_restart(&cl_srv, extra), 0);
	cl_put_file("t.json", t, 0);
	args[3] = f = cl_path_in("t.json");
	/* a 401 is not retried: the server's message, exit 1, at once */
	ck_assert_int_eq(cl_collect("wrong", args, wrong), 1);
	err = cl_output("wrong", "err");
	ck_assert_msg(strstr(err, "401 unauthorized"), "%s", err);
	ck_assert_msg(!strstr(err, "retrying"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_collect("none", args, NULL), 1);
	ck_assert_int_eq(cl_answered(401, 2), 2);
	/* watch stops too, rather than knock for ever */
	ck_assert_int_eq(cl_collect("watch", watch, wrong), 1);
	err = cl_output("watch", "err");
	ck_assert_msg(strstr(err, "401 unauthorized"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_count_artifacts("tok"), 0);
	/* the token is sent */
	ck_assert_int_eq(cl_collect("right", args, right), 0);
	ck_assert_int_eq(cl_count_artifacts("tok"), 1);
	free(f);
	free(t);
	free(tokfile);
}
END_TEST

START_TEST(test_upload_server_away)
{
	const char *args[] = { "upload", "--run", "away", NULL, NULL };
	const char *three[] = { "TRAINSCOPE_RETRY_ATTEMPTS=3", NULL }, *forever[] = { "TRAINSCOPE_RETRY_ATTEMPTS=0", NULL };
	char *t = cl_trace_text("away", 0), *err;
	pid_t pid;

	cl_put_file("t.json", t, 0);
	args[3] = cl_path_in("t.json");
	tu_server_stop(&cl_srv);
	/* three attempts, then exit 3 with curl's reason */
	ck_assert_int_eq(cl_collect("three", args, three), 3);
	err = cl_output("three", "err");
	ck_assert_msg(strstr(err, "retrying") && strstr(err, "onnect"), "%s", err);
	free(err);
	/* retried until the server is back */
	pid = cl_spawn("forever", args, forever);
	cl_sleep_ms(300);
	ck_assert_int_eq(tu_server_restart_same_port(&cl_srv, NULL), 0);
	ck_assert_int_eq(cl_reap(pid), 0);
	ck_assert_int_eq(cl_count_artifacts("away"), 1);
	free((char *)args[3]);
	free(t);
}
END_TEST

/* ---- the file as it was, and what the CLI says ---- */

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
	ck_assert_int_eq(cl_collect("pk", args, NULL), 0);
	arts = cl_artifacts("rawpk");
	ck_assert_int_eq(json_array_size(arts), 1);
	a = json_array_get(arts, 0);
	ck_assert_str_eq(json_string_value(json_object_get(a, "sha256")), sha);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "bytes")), (json_int_t)len);
	ck_assert_str_eq(json_string_value(json_object_get(a, "kind")), "memory_snapshot");
	/* the download is the file (memory_viz opens it), under its name */
	snprintf(path, sizeof(path), "/api/v1/runs/rawpk/artifacts/%" JSON_INTEGER_FORMAT "/raw",
		 json_integer_value(json_object_get(a, "id")));
	ck_assert_int_eq(tu_http(&cl_srv, "GET", path, NULL, 0, NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.content_encoding, "");
	ck_assert_uint_eq(r.len, len);
	sha256_hex(r.body, r.len, got);
	ck_assert_str_eq(got, sha);
	ck_assert_ptr_nonnull(strstr(r.headers, "filename=\"cs336_memory_snapshot.pickle\""));
	tu_resp_free(&r);
	/* the same file by plain HTTP (curl --data-binary) is the same artifact */
	ck_assert_int_eq(tu_http(&cl_srv, "POST", "/api/v1/runs/rawpk/artifacts?name=again.pickle", file, len, NULL, &r), 0);
	ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
	tu_resp_free(&r);
	ck_assert_int_eq(cl_count_artifacts("rawpk"), 1);
	/* and the other way round: the collector after curl */
	ck_assert_int_eq(tu_http(&cl_srv, "POST", "/api/v1/runs/rawpk2/artifacts?name=a.pickle", file, len, NULL, &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	args[2] = "rawpk2";
	ck_assert_int_eq(cl_collect("pk2", args, NULL), 0);
	char *out = cl_output("pk2", "out");
	ck_assert_msg(strstr(out, "(already there)"), "%s", out);
	free(out);
	ck_assert_int_eq(cl_count_artifacts("rawpk2"), 1);
	/* an encoding the server does not take is refused before anything is kept */
	ck_assert_int_eq(tu_http(&cl_srv, "POST", "/api/v1/runs/rawpk3/artifacts?name=b.pickle", file, len,
				 "Content-Encoding: br", &r), 0);
	ck_assert_int_eq(r.status, 415);
	tu_resp_free(&r);
	ck_assert_int_eq(cl_count_artifacts("rawpk3"), 0);
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
	char *err, *db = cl_path_in("p.db");
	int st;

	ck_assert_int_eq(cl_collect("port", up, NULL), 2);
	err = cl_output("port", "err");
	ck_assert_msg(strstr(err, "127.0.0.1:70000") && strstr(err, "65535"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_collect("portenv", cmp, badenv), 2);
	ck_assert_int_eq(cl_collect("port0", zero, NULL), 2);
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
		cl_sleep_ms(10);
	}
	snprintf(answer, sizeof(answer), "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_int_eq(write(c, answer, strlen(answer)), (ssize_t)strlen(answer));
	close(c);
}

START_TEST(test_upload_progress)
{
	char *big = cl_path_in("big.json.gz"), url[64];
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
	lfd = cl_slow_listener(&port);
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
	ck_assert_int_eq(cl_reap(pid), 0);
	close(pty);
	ck_assert_msg(strstr(out, "big.json.gz  ") && strstr(out, "/s  ETA ") && strstr(out, "\r\033[K"), "%s", out);
	/* not on a terminal: no bar at all */
	pid = cl_spawn("notty", (const char *[]){ "upload", "--server", url, "--run", "slow", big, NULL }, NULL);
	serve_slowly(lfd, len);
	ck_assert_int_eq(cl_reap(pid), 0);
	char *err = cl_output("notty", "err");
	ck_assert_msg(!strchr(err, '\r') && !strstr(err, "ETA"), "%s", err);
	free(err);
	close(lfd);
	free(b);
	free(big);
}
END_TEST

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
	char *t = cl_trace_text("hostile", 0), *err, url[80], name[64], msg[512], *senv, *qenv;
	const char *env[3];
	struct timespec t0, t1;
	int lfd, port, c;
	pid_t pid;

	cl_put_file("t.json", t, 0);
	args[3] = cl_path_in("t.json");
	lfd = cl_slow_listener(&port);
	snprintf(url, sizeof(url), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", port);
	ck_assert_int_ge(asprintf(&senv, "%s", url), 0);
	env[0] = senv, env[1] = NULL;
	pid = cl_spawn("escapes", args, env);
	ck_assert_int_ge(c = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c, name, sizeof(name));
	snprintf(msg, sizeof(msg), "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s", strlen(body), body);
	ck_assert_int_eq(write(c, msg, strlen(msg)), (ssize_t)strlen(msg));
	close(c);
	ck_assert_int_eq(cl_reap(pid), 1);
	err = cl_output("escapes", "err");
	ck_assert_msg(!strchr(err, 0x1b) && !strchr(err, 0x07) && !strstr(err, "\xc2\x9b"), "raw control bytes: %s", err);
	ck_assert_msg(strstr(err, "400 bad\\x1b[2J: x\\x1b[2J\\x9b31my\\x07"), "%s", err);
	free(err);

	/* silent: the upload is read whole and never answered */
	ck_assert_int_ge(asprintf(&qenv, "TRAINSCOPE_SILENCE_S=2"), 0);
	env[1] = qenv, env[2] = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = cl_spawn("silent", args, env);
	ck_assert_int_ge(c = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c, name, sizeof(name));
	ck_assert_int_eq(cl_reap(pid), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_lt(cl_accept_within(lfd, 100), 0);	/* not sent again */
	close(c);
	ck_assert_int_lt(t1.tv_sec - t0.tv_sec, 10);
	err = cl_output("silent", "err");
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
 * `upload` of n trace files (PREFIX0.json, PREFIX1.json, ...) to run, started as tag against a
 * listener of its own (*lfd, slow: cl_slow_listener) before it answers; path[i] gets each
 * file's path (malloc'd). The collector's pid.
 */
static pid_t upload_spawn(const char *tag, const char *prefix, const char *run, int n, char **path, int *lfd)
{
	char url[64], name[32];
	const char *args[16] = { "upload", "--server", url, "--run", run };
	int port;

	ck_assert_int_le(n, 10);
	for (int i = 0; i < n; i++) {
		char *t = cl_trace_text(tag, i);
		snprintf(name, sizeof(name), "%s%d.json", prefix, i);
		cl_put_file(name, t, 10);
		free(t);
		args[5 + i] = path[i] = cl_path_in(name);
	}
	*lfd = cl_slow_listener(&port);
	ck_assert_int_eq(listen(*lfd, 8), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	return cl_spawn(tag, args, NULL);
}

/*
 * upload FILE... sends two files at a time (UPLOAD_IN_FLIGHT), never three,
 * and says each answer in the files' order whatever order they come in; a
 * rejected file (415) does not stop the others, and makes the exit code 1.
 */
START_TEST(test_upload_two_in_flight)
{
	enum { N = 4 };
	char n[64], *path[N];
	int lfd, c0, c1, c, i, status = 0;
	pid_t pid = upload_spawn("uptwo", "u", "two", N, path, &lfd);
	char *out, *err;

	cl_accept_pair(lfd, "u0.json", "u1.json", &c0, &c1);
	/* u1 answered first */
	cl_answer_upload(c1, 201, "u1.json");
	/* u2 comes while u0 waits: u1's worker took it */
	ck_assert_int_ge(c = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c, n, sizeof(n));
	ck_assert_str_eq(n, "u2.json");
	cl_answer_upload(c0, 201, "u0.json");
	cl_answer_upload(c, 415, "u2.json");
	ck_assert_int_ge(c = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c, n, sizeof(n));
	ck_assert_str_eq(n, "u3.json");
	cl_answer_upload(c, 201, "u3.json");
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	out = cl_output("uptwo", "out");
	err = cl_output("uptwo", "err");
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

/*
 * A server that keeps its connections open gets the next files on them: upload's two workers
 * each keep the connection of their last answer, so the third and fourth files open none.
 */
START_TEST(test_upload_keeps_connections)
{
	enum { N = 4 };
	char n[64], *path[N];
	int lfd, c0, c1, i, status = 0;
	pid_t pid = upload_spawn("upkept", "k", "kept", N, path, &lfd);

	cl_accept_pair(lfd, "k0.json", "k1.json", &c0, &c1);
	cl_answer_upload_keep(c1, 201, "k1.json", 1);
	/* k2 comes on k1's connection, none new */
	cl_read_upload(c1, n, sizeof(n));
	ck_assert_str_eq(n, "k2.json");
	cl_answer_upload_keep(c0, 201, "k0.json", 1);
	cl_read_upload(c0, n, sizeof(n));
	ck_assert_str_eq(n, "k3.json");
	ck_assert_int_lt(cl_accept_within(lfd, 300), 0);
	cl_answer_upload_keep(c1, 201, "k2.json", 1);
	cl_answer_upload_keep(c0, 201, "k3.json", 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(c0);
	close(c1);
	for (i = 0; i < N; i++)
		free(path[i]);
	close(lfd);
}
END_TEST

Suite *suite_collect(void)
{
	Suite *s = suite_create("collect");
	TCase *tc = tcase_create("collect");

	tcase_add_checked_fixture(tc, cl_start, cl_stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_upload_fixtures);
	tcase_add_test(tc, test_upload_rank_from_env);
	tcase_add_test(tc, test_upload_bad_token);
	tcase_add_test(tc, test_upload_server_away);
	tcase_add_test(tc, test_upload_two_in_flight);
	tcase_add_test(tc, test_upload_keeps_connections);
	tcase_add_test(tc, test_raw_is_the_file);
	tcase_add_test(tc, test_ports_checked);
	tcase_add_test(tc, test_upload_progress);
	tcase_add_test(tc, test_upload_hostile_server);
	suite_add_tcase(s, tc);
	return s;
}
