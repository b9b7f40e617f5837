/*
 * check_collect_watch.c: trainscope-collect watch against the real server
 * on loopback: renamed, in-place, hidden and temporary files; --once; a
 * SIGKILL and a restart, a SIGTERM; other profilers' outputs; unreadable
 * files; two uploads in flight. What arrived is checked through the API,
 * and /metrics says how many uploads the server answered with 200 (a file
 * sent twice).
 */
#define _GNU_SOURCE	/* asprintf */
#include <fcntl.h>
#include <signal.h>
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

/* Write under a temporary name, then rename, as tensorboard_trace_handler and the CUPTI library do. */
static void put_renamed(const char *tmp, const char *name, const char *text)
{
	char *a = cl_path_in(tmp), *b = cl_path_in(name);

	ck_assert_int_eq(tu_write_file(a, text, strlen(text)), 0);
	ck_assert_int_eq(rename(a, b), 0);
	free(a);
	free(b);
}

/* ---- watch ---- */

START_TEST(test_watch_renamed)
{
	const char *args[] = { "watch", "--run", "w", cl_dir, NULL };
	static const char *const shipped[] = { "worker0.1.pt.trace.json", "worker0.2.pt.trace.json.gz",
					       "inplace.json", "snap.pickle", "early.json" };
	char *t, *tmp, *fin, *err;
	json_t *arts;
	size_t len, i;
	uint8_t *gz;
	pid_t pid;

	t = cl_trace_text("early", 0);
	cl_put_file("early.json", t, 5);	/* there before the watch: shipped at start */
	free(t);
	pid = cl_spawn("watch", args, NULL);
	ck_assert_uint_eq(cl_wait_artifacts("w", 1), 1);
	/* tensorboard_trace_handler: a temporary name, then a rename */
	t = cl_trace_text("w", 1);
	put_renamed(".worker0.1.pt.trace.json.tmp", "worker0.1.pt.trace.json", t);
	free(t);
	t = cl_trace_text("w", 2);
	gz = tu_gzip(t, strlen(t), &len);
	tmp = cl_path_in("worker0.2.pt.trace.json.gz.part");
	fin = cl_path_in("worker0.2.pt.trace.json.gz");
	ck_assert_int_eq(tu_write_file(tmp, gz, len), 0);
	ck_assert_int_eq(rename(tmp, fin), 0);
	free(tmp);
	free(fin);
	free(gz);
	free(t);
	/* written in place and closed; a pickle that is no snapshot (kept by the server as an error: 400) */
	t = cl_trace_text("w", 3);
	cl_put_file("inplace.json", t, 0);
	free(t);
	cl_put_file("snap.pickle", "\x80\x04K\x01.", 0);
	/* never: hidden, temporary, or not a profiler file */
	t = cl_trace_text("w", 4);
	cl_put_file(".hidden.json", t, 0);
	cl_put_file("half.json.tmp", t, 0);
	cl_put_file("notes.md", t, 0);
	free(t);
	ck_assert_uint_eq(cl_wait_artifacts("w", 5), 5);
	cl_sleep_ms(300);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	arts = cl_artifacts("w");
	ck_assert_int_eq(json_array_size(arts), 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(cl_named(arts, shipped[i]), 1);
	ck_assert_str_eq(json_string_value(json_object_get(cl_by_name(arts, "worker0.2.pt.trace.json.gz"), "status")),
			 "ready");
	ck_assert_str_eq(json_string_value(json_object_get(cl_by_name(arts, "snap.pickle"), "status")), "error");
	json_decref(arts);
	ck_assert_int_eq(cl_uploads_answered(200), 0);	/* nothing was sent twice */
	err = cl_output("watch", "err");
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
	const char *args[] = { "watch", "--run", "wl", cl_dir, NULL };
	static const char *const parts[] = {
		"{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"g0\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":1}",
		",{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"g1\",\"pid\":0,\"tid\":7,\"ts\":5,\"dur\":1}",
		"]}",
	};
	char *outside = tu_tmpdir(), secret[600], *link = cl_path_in("secret.json"), *grow = cl_path_in("grow.json"), *t, *err;
	json_t *arts;
	pid_t pid;

	snprintf(secret, sizeof(secret), "%s/secret.json", outside);
	t = cl_trace_text("secret", 0);
	ck_assert_int_eq(tu_write_file(secret, t, strlen(t)), 0);
	free(t);
	ck_assert_int_eq(symlink(secret, link), 0);
	t = cl_trace_text("wl", 1);
	cl_put_file("bad\xff.json", t, 10);
	free(t);
	t = cl_trace_text("wl", 2);
	cl_put_file("good.json", t, 10);
	free(t);
	pid = cl_spawn("links", args, NULL);
	ck_assert_uint_eq(cl_wait_artifacts("wl", 1), 1);
	for (size_t i = 0; i < 3; i++) {
		FILE *f = fopen(grow, i ? "a" : "w");
		ck_assert_ptr_nonnull(f);
		fputs(parts[i], f);
		fclose(f);
		cl_sleep_ms(400);
	}
	ck_assert_uint_eq(cl_wait_artifacts("wl", 2), 2);
	cl_sleep_ms(1500);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	arts = cl_artifacts("wl");
	ck_assert_int_eq(json_array_size(arts), 2);
	ck_assert_int_eq(cl_named(arts, "good.json"), 1);
	ck_assert_int_eq(cl_named(arts, "grow.json"), 1);
	ck_assert_str_eq(json_string_value(json_object_get(cl_by_name(arts, "grow.json"), "status")), "ready");
	ck_assert_int_eq(json_integer_value(json_object_get(cl_by_name(arts, "grow.json"), "events")), 2);
	json_decref(arts);
	ck_assert_int_eq(cl_uploads_answered(200) + cl_uploads_answered(201), 2);
	err = cl_output("links", "err");
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
	const char *args[] = { "watch", "--once", "--run", "once", cl_dir, NULL };
	char *t, *state, *sdir = cl_path_in("state"), *moved;
	const char *elsewhere[] = { "watch", "--once", "--run", "once", "--state", sdir, cl_dir, NULL };
	const char *other_run[] = { "watch", "--once", "--run", "once2", cl_dir, NULL };
	char *badstate = cl_path_in("t0.json/state"), *err;
	const char *nostate[] = { "watch", "--once", "--run", "once3", "--state", badstate, cl_dir, NULL };
	struct stat st;
	int i;

	for (i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "t%d.json", i);
		t = cl_trace_text("once", i);
		cl_put_file(name, t, 10);
		free(t);
	}
	ck_assert_int_eq(cl_collect("first", args, NULL), 0);
	ck_assert_int_eq(cl_count_artifacts("once"), 3);
	ck_assert_int_eq(cl_answered(201, 3), 3);
	state = cl_path_in(".trainscope-collect.state");
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
	ck_assert_int_eq(cl_collect("second", args, NULL), 0);
	ck_assert_int_eq(cl_answered(201, 3) + cl_uploads_answered(200), 3);
	ck_assert_int_eq(state_lines(state), 1 + 3);
	/* a new file: only it goes */
	t = cl_trace_text("once", 3);
	cl_put_file("t3.json", t, 10);
	free(t);
	ck_assert_int_eq(cl_collect("third", args, NULL), 0);
	ck_assert_int_eq(cl_count_artifacts("once"), 4);
	ck_assert_int_eq(cl_answered(201, 4) + cl_uploads_answered(200), 4);
	ck_assert_int_eq(state_lines(state), 1 + 4);
	/* another run is another destination: everything goes there */
	ck_assert_int_eq(cl_collect("other", other_run, NULL), 0);
	ck_assert_int_eq(cl_count_artifacts("once2"), 4);
	/* --state elsewhere: that state is empty, so all four go again (answered 200), and it is kept there */
	moved = cl_path_in("moved.state");
	ck_assert_int_eq(rename(state, moved), 0);
	ck_assert_int_eq(cl_collect("elsewhere", elsewhere, NULL), 0);
	ck_assert_int_eq(cl_answered(200, 4), 4);
	ck_assert_int_eq(stat(state, &st), -1);
	ck_assert_int_eq(cl_count_artifacts("once"), 4);
	ck_assert_int_eq(stat(sdir, &st), 0);	/* made for us */
	/* a state that cannot be kept is said at cl_start, before anything is sent: exit 4 */
	ck_assert_int_eq(cl_collect("nostate", nostate, NULL), 4);
	err = cl_output("nostate", "err");
	ck_assert_msg(strstr(err, "t0.json/state"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_uploads_answered(200) + cl_uploads_answered(201), 12);	/* as before */
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
		cl_put_file(name, t, 10);
	}
	free(t);
}

START_TEST(test_watch_sigkill)
{
	const char *args[] = { "watch", "--run", "kill", cl_dir, NULL };
	const char *once[] = { "watch", "--once", "--run", "kill", cl_dir, NULL };
	enum { N = 8, LATE = 2 };
	char name[32];
	json_t *arts;
	size_t before;
	int i;
	pid_t pid;

	put_big_files(N);
	pid = cl_spawn("watch", args, NULL);
	cl_wait_artifacts("kill", 1);
	kill(pid, SIGKILL);
	ck_assert_int_eq(cl_reap(pid), 128 + SIGKILL);
	before = cl_count_artifacts("kill");
	/* files that appear while it is down go at the next start */
	for (i = 0; i < LATE; i++) {
		char *t = cl_trace_text("late", i);
		snprintf(name, sizeof(name), "late%d.json", i);
		cl_put_file(name, t, 10);
		free(t);
	}
	ck_assert_int_eq(cl_collect("restart", once, NULL), 0);
	arts = cl_artifacts("kill");
	ck_assert_int_eq(json_array_size(arts), N + LATE);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "big%d.json", i);
		ck_assert_int_eq(cl_named(arts, name), 1);
	}
	for (i = 0; i < LATE; i++) {
		snprintf(name, sizeof(name), "late%d.json", i);
		ck_assert_int_eq(cl_named(arts, name), 1);
	}
	json_decref(arts);
	/* at most the files in flight at the kill (two) were sent again */
	ck_assert_int_eq(cl_answered(201, N + LATE), N + LATE);
	ck_assert_int_le(cl_uploads_answered(200), 2);
	fprintf(stderr, "watch SIGKILL: %zu of %d files were shipped before the kill\n", before, N);
}
END_TEST

START_TEST(test_watch_sigterm)
{
	const char *args[] = { "watch", "--run", "term", cl_dir, NULL };
	const char *once[] = { "watch", "--once", "--run", "term", cl_dir, NULL };
	enum { N = 6 };
	size_t before;
	pid_t pid;

	put_big_files(N);
	pid = cl_spawn("watch", args, NULL);
	cl_wait_artifacts("term", 1);
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	/* the file in flight was finished and recorded: a restart sends none of them again */
	before = cl_count_artifacts("term");
	ck_assert_int_eq(cl_answered(201, (long)before), (long)before);
	ck_assert_int_eq(cl_collect("restart", once, NULL), 0);
	ck_assert_int_eq(cl_count_artifacts("term"), N);
	ck_assert_int_eq(cl_uploads_answered(200), 0);
	ck_assert_int_eq(cl_answered(201, N), N);
}
END_TEST

START_TEST(test_watch_says_what_it_did)
{
	char *sub = cl_path_in("says"), *t, *err, want[256];
	const char *once[] = { "watch", "--once", "--run", "says", sub, NULL };
	size_t bytes = 0;
	const char *watch[] = { "watch", "--run", "says", sub, NULL };
	pid_t pid;

	ck_assert_int_eq(mkdir(sub, 0700), 0);
	/* nothing there: it says so */
	ck_assert_int_eq(cl_collect("empty", once, NULL), 0);
	err = cl_output("empty", "err");
	ck_assert_msg(strstr(err, "done: shipped nothing"), "%s", err);
	free(err);
	/* two files: it says it shipped them */
	t = cl_trace_text("says", 1);
	cl_put_file("says/a.json", t, 10);
	bytes += strlen(t);
	free(t);
	t = cl_trace_text("says", 2);
	cl_put_file("says/b.json", t, 10);
	bytes += strlen(t);
	free(t);
	ck_assert_int_eq(cl_collect("two", once, NULL), 0);
	err = cl_output("two", "err");
	/* with their bytes and where the run can be seen */
	snprintf(want, sizeof(want), "done: 2 file(s) shipped (%zu bytes), 0 rejected, 0 left waiting; see %s/runs/says\n",
		 bytes, cl_srv.base);
	ck_assert_msg(strstr(err, want), "want %s got %s", want, err);
	free(err);
	/* stopped by a signal after one more */
	pid = cl_spawn("term", watch, NULL);
	t = cl_trace_text("says", 3);
	put_renamed("says/.c.tmp", "says/c.json", t);
	free(t);
	ck_assert_int_eq(cl_wait_artifacts("says", 3), 3);
	cl_sleep_ms(100);
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	err = cl_output("term", "err");
	ck_assert_msg(strstr(err, "stopped by a signal: 1 file(s) shipped"), "%s", err);
	free(err);
	free(sub);
}
END_TEST

/* The fixture rel put in cl_dir as name, age_s old; returns how many lines it has. */
static size_t put_fixture(const char *rel, const char *name, int age_s)
{
	char *p = tu_fixture(rel), *t;
	size_t len, lines = 0;

	ck_assert_ptr_nonnull(t = (char *)tu_read_file(p, &len));
	ck_assert_uint_eq(strlen(t), len);
	for (size_t i = 0; i < len; i++)
		lines += t[i] == '\n';
	cl_put_file(name, t, age_s);
	free(t);
	free(p);
	return lines;
}

static const char *field(json_t *arts, const char *name, const char *key)
{
	return json_string_value(json_object_get(cl_by_name(arts, name), key));
}

/*
 * watch ships other profilers' outputs too (.txt, .csv), the server telling the
 * kinds apart; text it takes for none gets a 415 that is said once and not sent
 * again; a text file still written to (a line cut short, or changed within
 * 30 s) waits, one renamed into the folder goes at once.
 */
START_TEST(test_watch_formats)
{
	const char *args[] = { "watch", "--run", "wf", cl_dir, NULL };
	const char *again[] = { "watch", "--run", "wf", cl_dir, NULL };
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
	cl_put_file("requirements.txt", "torch==2.5.1\nlightning==2.4.0\n", 40);
	/* a row cut short, 40 s ago: the writer may be mid-line, it waits (60 s before it goes as it is) */
	cl_put_file("cut.csv", "2026/04/25 16:06:06.780, 0 %, 0 %, 2 MiB, 20146 MiB, 27, 11.64 W\n2026/04/25 16:06:11.7", 40);
	pid = cl_spawn("formats", args, NULL);
	ck_assert_uint_eq(cl_wait_artifacts("wf", 5), 5);
	/* renamed in: finished, at once; written in place now: waits 30 s of quiet */
	put_renamed(".smi.csv.part", "smi.csv", row);
	ck_assert_uint_eq(cl_wait_artifacts("wf", 6), 6);
	cl_put_file("live.csv", row, 0);
	cl_sleep_ms(2500);	/* anything more would show now */
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	arts = cl_artifacts("wf");
	ck_assert_int_eq(json_array_size(arts), 6);
	ck_assert_str_eq(field(arts, "profile.txt", "kind"), "lightning_report");
	ck_assert_str_eq(field(arts, "gpu_usage.csv", "kind"), "gpu_log");
	ck_assert_str_eq(field(arts, "stacks.txt", "kind"), "stacks");
	ck_assert_str_eq(field(arts, "key_averages.txt", "kind"), "key_averages");
	ck_assert_str_eq(field(arts, "smi.csv", "kind"), "gpu_log");
	ck_assert_str_eq(field(arts, "requirements.txt", "status"), "error");
	ck_assert_int_eq(cl_named(arts, "cut.csv") + cl_named(arts, "live.csv"), 0);
	/* whole: every row of the log is an event */
	ck_assert_int_eq(json_integer_value(json_object_get(cl_by_name(arts, "gpu_usage.csv"), "events")), (json_int_t)rows);
	json_decref(arts);
	err = cl_output("formats", "err");
	ck_assert_msg(strstr(err, "requirements.txt: 415 unsupported_format"), "%s", err);
	ck_assert_msg(strstr(err, "stopped by a signal: 5 file(s) shipped (") && strstr(err, "), 1 rejected, 2 left waiting"),
		      "%s", err);
	free(err);
	/* started again: the 415 is not sent again, nor anything else; the two still wait */
	pid = cl_spawn("again", again, NULL);
	cl_sleep_ms(1500);
	kill(pid, SIGTERM);
	ck_assert_int_eq(cl_reap(pid), 0);
	err = cl_output("again", "err");
	ck_assert_msg(!strstr(err, "requirements.txt"), "%s", err);
	ck_assert_msg(strstr(err, "stopped by a signal: 0 file(s) shipped (0 bytes), 0 rejected, 2 left waiting"), "%s", err);
	free(err);
	ck_assert_int_eq(cl_uploads_answered(201) + cl_uploads_answered(200), 5);	/* the 415 is counted apart */
	ck_assert_int_eq(cl_count_artifacts("wf"), 6);
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
	const char *args[] = { "watch", "--once", "--run", "unread", cl_dir, NULL };
	char *t = cl_trace_text("unread", 0), *u = cl_trace_text("unread", 1), *p = cl_path_in("locked.json"), *err;

	cl_put_file("ok.json", t, 10);
	cl_put_file("locked.json", u, 10);
	ck_assert_int_eq(chmod(p, 0), 0);
	if (geteuid() == 0) {
		ck_assert_int_eq(cl_collect("unread", args, NULL), 0);
		ck_assert_int_eq(cl_count_artifacts("unread"), 2);
	} else {
		ck_assert_int_eq(cl_collect("unread", args, NULL), 0);
		ck_assert_int_eq(cl_count_artifacts("unread"), 1);
		err = cl_output("unread", "err");
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
		char *t = cl_trace_text("two", i);
		snprintf(name, sizeof(name), "t%d.json", i);
		cl_put_file(name, t, 10);
		free(t);
	}
	lfd = cl_slow_listener(&port);
	ck_assert_int_eq(listen(lfd, 8), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	pid = cl_spawn("two", (const char *[]){ "watch", "--once", "--server", url, "--run", "two", cl_dir, NULL }, NULL);
	/* t0 and t1, the queue's first two */
	cl_accept_pair(lfd, "t0.json", "t1.json", &c0, &c1);
	/* t1 answered first: t2 goes at once, while t0 is still in flight */
	cl_answer_upload(c1, 201, "t1.json");
	ck_assert_int_ge(c = cl_accept_within(lfd, 10000), 0);
	cl_read_upload(c, got[ngot], sizeof(got[0]));
	ck_assert_str_eq(got[ngot], "t2.json");
	cl_answer_upload(c0, 503, "t0.json");
	cl_answer_upload(c, 201, got[ngot]);
	shipped[1] = shipped[2] = 1;
	ngot++;
	/* the rest, t0 again among them, each answered as it comes */
	for (;;) {
		if ((c = cl_accept_within(lfd, 100)) < 0) {
			if (waitpid(pid, &status, WNOHANG) == pid)
				break;
			continue;
		}
		ck_assert_int_lt(ngot, N - 1);
		cl_read_upload(c, got[ngot], sizeof(got[0]));
		cl_answer_upload(c, 201, got[ngot]);
		ck_assert_int_eq(sscanf(got[ngot], "t%d.json", &k), 1);
		ck_assert(k >= 0 && k < N && !shipped[k]);
		shipped[k] = 1;
		ngot++;
	}
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(ngot, N - 1);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(shipped[i], 1);
	out = cl_output("two", "out");
	err = cl_output("two", "err");
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

Suite *suite_collect_watch(void)
{
	Suite *s = suite_create("collect_watch");
	TCase *tc = tcase_create("collect");

	tcase_add_checked_fixture(tc, cl_start, cl_stop);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_watch_renamed);
	tcase_add_test(tc, test_watch_once);
	tcase_add_test(tc, test_watch_links_names_and_unfinished);
	tcase_add_test(tc, test_watch_sigkill);
	tcase_add_test(tc, test_watch_sigterm);
	tcase_add_test(tc, test_watch_two_in_flight);
	tcase_add_test(tc, test_watch_says_what_it_did);
	tcase_add_test(tc, test_watch_formats);
	tcase_add_test(tc, test_watch_names_unreadable);
	suite_add_tcase(s, tc);
	return s;
}
