/*
 * check_collect_run.c: trainscope-collect run against the real server on
 * loopback, with a command that writes chunks into its spool as the CUPTI
 * library does (the server stopped and restarted mid-run, SIGTERM passed
 * on, what it says it did); compare and its gates; the usage.
 */
#define _GNU_SOURCE	/* asprintf */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "collect_util.h"
#include "suites.h"

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
	char *p = cl_path_in("cmd.sh");

	ck_assert_int_eq(tu_write_file(p, chunk_script, strlen(chunk_script)), 0);
	ck_assert_int_eq(chmod(p, 0700), 0);
	return p;
}

/* The value of name in the environment the command saw, or NULL (malloc'd). */
static char *env_of(const char *name)
{
	char *p = cl_path_in("env.out"), *text, *all, *line, *v = NULL, key[64];
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
	char *cmd = script(), *spool = cl_path_in("spool"), *envout = cl_path_in("env.out"), *e, *err, *real;
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
	ck_assert_int_eq(cl_collect("run", args, env), 3);	/* the command's status */
	arts = cl_artifacts("chunks");
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
	ck_assert_int_eq(cl_collect("missing", missing, env), 0);
	err = cl_output("missing", "err");
	ck_assert_msg(strstr(err, "no CUPTI library at /nonexistent/lib.so") &&
			      !strstr(strstr(err, "no CUPTI") + 1, "no CUPTI"), "%s", err);
	free(err);
	ck_assert_ptr_null(env_of("CUDA_INJECTION64_PATH"));
	e = env_of("TRAINSCOPE_SPOOL");
	ck_assert_int_eq(stat(e, &st), -1);
	free(e);
	ck_assert_int_eq(cl_count_artifacts("chunks"), 6);

	/* killed by a signal: 128 + N; not startable: 127 */
	ck_assert_int_eq(cl_collect("killed", killed, NULL), 128 + SIGTERM);
	ck_assert_int_eq(cl_collect("absent", absent, NULL), 127);
	free(cmd);
	free(spool);
	free(envout);
}
END_TEST

START_TEST(test_run_passes_sigterm)
{
	char *started = cl_path_in("started"), line[600];
	const char *args[] = { "run", "--run", "sig", "--", "sh", "-c", line, NULL };
	struct stat st;
	pid_t pid;
	int i;

	/* a scheduler's SIGTERM to the collector reaches the command, whose status comes back */
	snprintf(line, sizeof(line), "touch %s; while :; do sleep 0.02; done", started);
	pid = cl_spawn("sig", args, NULL);
	for (i = 0; i < 500 && stat(started, &st); i++)
		cl_sleep_ms(10);
	ck_assert_int_eq(stat(started, &st), 0);
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 128 + SIGTERM);
	free(started);
}
END_TEST

START_TEST(test_run_server_restart)
{
	char *cmd = script(), *spool = cl_path_in("spool"), *flag = cl_path_in("go"), *envout = cl_path_in("env.out"), *err;
	char waitline[600], envline[600];
	const char *env[] = { "FIRST=3", "ALL=8", "CODE=7", waitline, envline, NULL };
	/* about three chunks' worth: the spool fills while the server is away */
	const char *args[] = { "run", "--run", "restart", "--spool", spool, "--spool-max", "300", "--", cmd, NULL };
	json_t *arts;
	int i, chunks;
	pid_t pid;

	snprintf(waitline, sizeof(waitline), "WAIT=%s", flag);
	snprintf(envline, sizeof(envline), "ENVOUT=%s", envout);
	pid = cl_spawn("run", args, env);
	ck_assert_uint_eq(cl_wait_artifacts("restart", 3), 3);
	ck_assert_int_eq(tu_server_stop(&cl_srv), 0);
	cl_put_file("go", "", 0);
	/* the command writes the other five into the spool, where they wait */
	for (i = 0, chunks = 0; i < 500 && chunks < 5; i++) {
		char ls[700];
		FILE *p;
		cl_sleep_ms(10);
		snprintf(ls, sizeof(ls), "ls %s | grep -c '^trace-'", spool);
		p = popen(ls, "r");
		if (fscanf(p, "%d", &chunks) != 1)
			chunks = 0;
		pclose(p);
	}
	ck_assert_int_eq(chunks, 5);
	cl_sleep_ms(200);
	ck_assert_int_eq(tu_server_restart_same_port(&cl_srv, NULL), 0);
	ck_assert_int_eq(cl_reap(pid), 7);
	arts = cl_artifacts("restart");
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
	ck_assert_int_eq(cl_answered(201, 5), 5);
	ck_assert_int_eq(cl_uploads_answered(200), 0);
	err = cl_output("run", "err");
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

/* Each line of text starts with "trainscope-collect: "; returns how many lines. */
static int collector_lines(const char *text)
{
	int n = 0;

	for (const char *p = text; *p; n++) {
		const char *nl = strchr(p, '\n');
		ck_assert_msg(cl_starts(p, "trainscope-collect: "), "line %d: %s", n + 1, p);
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
	char *cmd = cl_path_in("says.sh"), *spool = cl_path_in("spool"), *lib = NULL, *err, *line, want[1024], text[4096];
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
	char *src = cl_path_in("src");

	ck_assert_int_eq(mkdir(src, 0700), 0);
	snprintf(srcline, sizeof(srcline), "SRC=%s", src);
	snprintf(server, sizeof(server), "TRAINSCOPE_SERVER=%s", cl_srv.base);
	/* three steps and two more, as two chunks; a third that is not a trace, rejected */
	a = steps_text(text, sizeof(text), 0, 3, 1700000000000000LL);
	cl_put_file("src/c1.json", text, 0);
	b = steps_text(text, sizeof(text), 3, 2, 1700000000030000LL);
	cl_put_file("src/c2.json", text, 0);
	cl_put_file("src/bad.json", "{\"traceEvents\": [{\"ph\": ", 0);
	ck_assert_int_eq(tu_write_file(cmd, script_text, strlen(script_text)), 0);
	ck_assert_int_eq(chmod(cmd, 0700), 0);
	ck_assert_ptr_nonnull(lib = realpath(cmd, NULL));

	ck_assert_int_eq(cl_collect("says", args, env), 4);
	err = cl_output("says", "err");
	ck_assert_int_eq(collector_lines(err), 3 + 1);	/* tracing, spool, the bad chunk's 4xx, summary */
	/* the library given is injected: tracing is on, or off for want of a driver on this machine */
	snprintf(want, sizeof(want), "trainscope-collect: CUDA tracing on: %s injected (CUDA_INJECTION64_PATH)\n", lib);
	if (strncmp(err, want, strlen(want))) {
		snprintf(want, sizeof(want), "; %s injected all the same\n", lib);
		ck_assert_msg(cl_starts(err, "trainscope-collect: CUDA tracing off: no CUDA driver here (") &&
				      strstr(err, want) && strstr(err, want) < strchr(err, '\n') + 1, "%s", err);
	}
	ck_assert_msg(strstr(err, "shipping the spool ") && strstr(err, " to run says rank 3 on http://127.0.0.1:"), "%s", err);
	/* the summary is the last line, with the right counts */
	ck_assert_ptr_nonnull(line = strstr(err, "trainscope-collect: run says rank 3: "));
	ck_assert_msg(strstr(line, "the command exited with 4 after "), "%s", line);
	snprintf(want, sizeof(want), "; 5 step(s) on the server from 2 chunk(s) shipped (%zu bytes); 1 rejected, 0 failed"
		 " attempt(s), 0 left in the spool; see %s/runs/says\n", a + b, cl_srv.base);
	len = strlen(want);
	ck_assert_msg(strlen(line) >= len && !strcmp(line + strlen(line) - len, want), "want ...%s got %s", want, line);
	ck_assert_uint_eq(cl_count_artifacts("says"), 3);
	free(err);

	/* the server away: the chunk stays in the spool, the attempts that failed are counted */
	snprintf(server, sizeof(server), "TRAINSCOPE_SERVER=http://127.0.0.1:%d", port);
	steps_text(text, sizeof(text), 0, 1, 1700000000000000LL);
	cl_put_file("src/c1.json", text, 0);
	cl_put_file("src/c2.json", text, 0);
	cl_put_file("src/bad.json", text, 0);
	ck_assert_int_eq(cl_collect("away", away, env), 4);
	err = cl_output("away", "err");
	ck_assert_msg(strstr(err, "trainscope-collect: run says rank 0: the command exited with 4 after ") &&
			      strstr(err, " s; no chunk shipped; 0 rejected, ") &&
			      !strstr(err, " 0 failed attempt(s)") && strstr(err, " failed attempt(s), 3 left in the spool; see "),
		      "%s", err);
	free(err);

	/* turned off, by the flag or the environment; nothing shipped */
	ck_assert_int_eq(cl_collect("off", off, NULL), 0);
	err = cl_output("off", "err");
	ck_assert_int_eq(collector_lines(err), 3);
	ck_assert_msg(cl_starts(err, "trainscope-collect: CUDA tracing off: turned off by --cupti none\n") &&
			      strstr(err, "trainscope-collect: run says rank 0: the command exited with 0 after ") &&
			      strstr(err, " s; no chunk shipped; 0 rejected, 0 failed attempt(s), 0 left in the spool; see "),
		      "%s", err);
	free(err);
	ck_assert_int_eq(cl_collect("offenv", off_by_env, off_env), 0);
	err = cl_output("offenv", "err");
	ck_assert_msg(cl_starts(err, "trainscope-collect: CUDA tracing off: turned off by TRAINSCOPE_CUPTI_LIB=none\n"),
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
		ck_assert_int_eq(cl_collect("help", help, NULL), 0);
		out = cl_output("help", "out");
		for (char *p = out; (p = strchr(p, '\n')); p++)
			lines++;
		ck_assert_msg(strstr(out, "usage: trainscope-collect ") && strstr(out, "--server URL") &&
				      strstr(out, "trainscope-collect --help") && !strstr(out, "Exit codes") &&
				      !strstr(out, "TRAINSCOPE_RETRY") && lines <= 26,
			      "%s: %d lines: %s", subs[i], lines, out);
		free(out);
	}
	help[0] = "--help";
	ck_assert_int_eq(cl_collect("help", help, NULL), 0);
	out = cl_output("help", "out");
	ck_assert_msg(strstr(out, "Exit codes") && strstr(out, "TRAINSCOPE_TOKEN") && strstr(out, "6 the runs cannot be"),
		      "%s", out);
	free(out);
	ck_assert_int_eq(cl_collect("unknown", unknown, NULL), 2);
	ck_assert_int_eq(cl_collect("badrank", badrank, NULL), 2);
	ck_assert_int_eq(cl_collect("badenv", norun, badenv), 2);
	err = cl_output("badenv", "err");
	ck_assert_msg(strstr(err, "TRAINSCOPE_RANK=x"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_collect("badrun", badrun, NULL), 2);
	ck_assert_int_eq(cl_collect("norun", norun, NULL), 2);
	err = cl_output("norun", "err");
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
	ck_assert_int_eq(tu_http(&cl_srv, "POST", path, text, n, NULL, &r), 0);
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
	ck_assert_int_eq(cl_collect("slow", slower, NULL), 5);
	out = cl_output("slow", "out");
	ck_assert_msg(strstr(out, "cbase -> cslow: regression") && strstr(out, "step time") && strstr(out, "+100.0%"),
		      "%s", out);
	free(out);
	/* a run against itself: no change, exit 0 */
	ck_assert_int_eq(cl_collect("same", same, NULL), 0);
	out = cl_output("same", "out");
	ck_assert_msg(strstr(out, "cbase -> cbase: no_change"), "%s", out);
	free(out);
	/* the threshold is the caller's */
	ck_assert_int_eq(cl_collect("lenient", lenient, NULL), 0);
	/* no base: the project's baseline, once there is one */
	ck_assert_int_eq(cl_collect("nobase", baseline, NULL), 1);
	ck_assert_int_eq(tu_http(&cl_srv, "PATCH", "/api/v1/runs/cbase", patch, strlen(patch), NULL, &r), 0);
	ck_assert_int_eq(r.status, 200);
	tu_resp_free(&r);
	ck_assert_int_eq(cl_collect("baseline", baseline, NULL), 5);
	/* a run without steps against one with them: not comparable, exit 6, and why */
	static const char nosteps[] = "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"
				      "\"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,"
				      " at::detail::Array<char*, 3> >(int)\",\"pid\":1,\"tid\":1,\"ts\":1700000000000000,"
				      "\"dur\":10}]}";
	ck_assert_int_eq(tu_http(&cl_srv, "POST", "/api/v1/runs/cnone/artifacts?name=n.json", nosteps, strlen(nosteps), NULL,
				 &r), 0);
	ck_assert_int_eq(r.status, 201);
	tu_resp_free(&r);
	ck_assert_int_eq(cl_collect("nc", (const char *[]){ "compare", "cbase", "cnone", NULL }, NULL), 6);
	out = cl_output("nc", "out");
	ck_assert_msg(strstr(out, "cbase -> cnone: not_comparable") && strstr(out, "not comparable: target 'cnone' has no"),
		      "%s", out);
	/* no step time where a run has none, tables per trace as the answer says, long names cut in the middle */
	ck_assert_msg(!strstr(out, "step time    ") && strstr(out, "operators, per trace") &&
			      strstr(out, "void at::native::vectorized_...etail::") && strstr(out, "Array<char*, 3> >(int)"),
		      "%s", out);
	free(out);
	/* the server's 404, and a bad flag */
	ck_assert_int_eq(cl_collect("unknown", unknown, NULL), 1);
	out = cl_output("unknown", "err");
	ck_assert_msg(strstr(out, "404"), "%s", out);
	free(out);
	ck_assert_int_eq(cl_collect("bad", bad, NULL), 2);
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
		ck_assert_int_eq(tu_http(&cl_srv, "POST", url, d, len, NULL, &r), 0);
		ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
		tu_resp_free(&r);
		free(d);
		free(path);
	}
	/* (0.64 - 0.512) / 0.512 = +25.0 %, (6400 - 8000) / 8000 = -20.0 %, 1792.5 - 2048.5 = -256 MB */
	ck_assert_int_eq(cl_collect("canary", (const char *[]){ "compare", "kbase", "kslow", NULL }, NULL), 5);
	out = cl_output("canary", "out");
	ck_assert_msg(strstr(out, "kbase -> kslow: regression") && strstr(out, "rlhf-canary metrics") &&
			      strstr(out, "0.5120") && strstr(out, "0.6400") && strstr(out, "+25.0%") &&
			      strstr(out, "-20.0%") && strstr(out, "-256"), "%s", out);
	free(out);
}
END_TEST

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
	ck_assert_int_eq(cl_collect("four", args, four), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	/* three waits of 20, 40 and 80 ms, jittered to half of each at least: 70 to 140 ms, and the start */
	ck_assert_msg(s >= 0.07 && s < 0.14 + 2, "%.3f s", s);
	err = cl_output("four", "err");
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
	out = cl_output("four", "out");
	ck_assert_str_eq(out, "");
	free(out);
	/* the default 8 attempts: 20+40+80+160+200+200+200 ms at most */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(cl_collect("eight", args, dflt), 3);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s >= 0.45 && s < 0.9 + 2, "%.3f s", s);
	err = cl_output("eight", "err");
	ck_assert_int_eq(count_of(err, "; retrying in "), 7);
	ck_assert_msg(strstr(err, "(attempt 7 of 8, at most 0.9 s of waiting in all)\n") &&
			      strstr(err, "compare: gave up after 8 attempts in "), "%s", err);
	free(err);
	close(fd);
}
END_TEST

Suite *suite_collect_run(void)
{
	Suite *s = suite_create("collect_run");
	TCase *tc = tcase_create("collect");

	tcase_add_checked_fixture(tc, cl_start, cl_stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_run_chunks);
	tcase_add_test(tc, test_run_passes_sigterm);
	tcase_add_test(tc, test_run_server_restart);
	tcase_add_test(tc, test_run_says_what_it_did);
	tcase_add_test(tc, test_usage);
	tcase_add_test(tc, test_compare_gates);
	tcase_add_test(tc, test_compare_canary);
	tcase_add_test(tc, test_compare_server_away);
	suite_add_tcase(s, tc);
	return s;
}
