/*
 * check_cupti_ondemand.c: the injection library's on-demand mode
 * (TRAINSCOPE_CAPTURE_MODE=ondemand, issue 52) without a GPU: cupti_host
 * loads the library against the fake libcupti (fake_cupti.c), which logs
 * every cuptiActivityEnable/Disable, hands the kernels "run" while the
 * kernel kind is enabled back through the library's buffer callbacks, and
 * passes NVTX pushes to its callback while the NVTX domain is enabled.
 * Checked: no request, no collection; a steps request turns collection on
 * for exactly N steps and off, writes -c<ID> chunks and .capture-<ID>.done;
 * a seconds request; a bad request is answered; an exit mid-window ends it.
 */
#define _GNU_SOURCE	/* asprintf */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cupti.h>

#include "ondemand.h"
#include "suites.h"
#include "testutil.h"

#define MAX_ARGS 256

struct host {
	int status;
	char err[8192];
};

/* cupti_host against the fake with the on-demand environment and cmds (NULL-terminated), stderr kept. */
static void run_fake(const char *spool, const char *const *cmds, struct host *h)
{
	char log[4096], errpath[4096];
	const char *argv[MAX_ARGS];
	int n = 0, fd;
	size_t len;
	pid_t pid;
	char *err;

	snprintf(log, sizeof(log), "%s/../fake-cupti.log", spool);
	snprintf(errpath, sizeof(errpath), "%s/../host.err", spool);
	argv[n++] = CUPTI_HOST_BIN;
	argv[n++] = CUPTI_LIB;
	argv[n++] = FAKE_CUPTI;
	for (; *cmds && n < MAX_ARGS - 1; cmds++)
		argv[n++] = *cmds;
	argv[n] = NULL;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if ((fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0)
			_exit(126);
		dup2(fd, 2);
		setenv("TRAINSCOPE_SPOOL", spool, 1);
		setenv("TRAINSCOPE_CAPTURE_MODE", "ondemand", 1);
		setenv("TRAINSCOPE_CAPTURE_STEPLESS_S", "2", 1);
		setenv("FAKE_CUPTI_LOG", log, 1);
		unsetenv("TRAINSCOPE_STEP_PATTERN");
		execv(CUPTI_HOST_BIN, (char *const *)argv);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &h->status, 0), pid);
	err = (char *)tu_read_file(errpath, &len);
	snprintf(h->err, sizeof(h->err), "%.*s", err ? (int)len : 0, err ? err : "");
	free(err);
	ck_assert_msg(WIFEXITED(h->status) && WEXITSTATUS(h->status) == 0, "status %d, stderr %s", h->status, h->err);
}

/* A fresh folder holding spool/; the spool's path (malloc'd); *top gets the folder. */
static char *new_spool(char **top)
{
	char *spool;

	*top = tu_tmpdir();
	ck_assert_int_ne(asprintf(&spool, "%s/spool", *top), -1);
	ck_assert_int_eq(mkdir(spool, 0755), 0);
	return spool;
}

static void put_request(const char *spool, const char *line)
{
	char tmp[4096], final[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s/.capture.tmp", spool);
	snprintf(final, sizeof(final), "%s/.capture", spool);
	ck_assert_ptr_nonnull(f = fopen(tmp, "w"));
	fprintf(f, "%s\n", line);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(rename(tmp, final), 0);
}

/* The file's text, "" when it is not there (malloc'd). */
static char *text_of(const char *dir, const char *name)
{
	char path[4096], *s;
	size_t len;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	s = (char *)tu_read_file(path, &len);
	return s ? s : strdup("");
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

/* Whether the fake's log has the line "WHAT KIND" (what: enable or disable). */
static int logged(const char *log, const char *what, CUpti_ActivityKind kind)
{
	char line[64];

	snprintf(line, sizeof(line), "%s %d\n", what, (int)kind);
	return strstr(log, line) != NULL;
}

/* Chunks in spool: how many, how many carry tag in their name, and the kernels in those (all without tag). */
static void chunks(const char *spool, const char *tag, int *n, int *tagged, int *kernels)
{
	DIR *d = opendir(spool);
	struct dirent *e;

	*n = *tagged = *kernels = 0;
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d))) {
		char *text;
		if (strncmp(e->d_name, "trace-", 6))
			continue;
		(*n)++;
		*tagged += tag && strstr(e->d_name, tag) != NULL;
		text = text_of(spool, e->d_name);
		if (!tag || strstr(e->d_name, tag))
			*kernels += count(text, "\"cat\":\"kernel\"");
		free(text);
	}
	closedir(d);
}

/* Without a request nothing is ever enabled, whatever the host does. */
START_TEST(test_ondemand_nothing_asked)
{
	const char *cmds[] = { "step:ProfilerStep#1", "kernel", "sleep:150", "step:ProfilerStep#2", "kernel",
			       "sleep:150", "step:ProfilerStep#3", "kernel", NULL };
	char *top, *spool = new_spool(&top), *log;
	int n, tagged, kernels;
	struct host h;

	run_fake(spool, cmds, &h);
	log = text_of(top, "fake-cupti.log");
	ck_assert_msg(!strstr(log, "enable"), "%s", log);
	chunks(spool, NULL, &n, &tagged, &kernels);
	ck_assert_int_eq(n, 0);
	ck_assert_ptr_nonnull(strstr(h.err, "on-demand mode"));
	free(log);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* steps=3: on at the request, the kernels of steps 1 to 3 recorded, off at the start of step 4. */
START_TEST(test_ondemand_steps)
{
	/* the first kernel comes before the worker's first look (100 ms after start), the last two after step 13 began */
	const char *cmds[] = { "kernel", "sleep:400", "step:ProfilerStep#10", "sleep:30", "kernel",
			       "step:ProfilerStep#11", "sleep:30", "kernel", "step:ProfilerStep#12", "sleep:30", "kernel",
			       "step:ProfilerStep#13", "sleep:300", "kernel", "step:ProfilerStep#14", "kernel", NULL, NULL };
	char *top, *spool = new_spool(&top), *log, *done, *req, wait[4096];
	int n, tagged, kernels;
	struct host h;

	snprintf(wait, sizeof(wait), "wait:%s/.capture-7.done", spool);
	cmds[16] = wait;
	put_request(spool, "id=7 steps=3 seconds=0 activities=cpu,cuda");
	run_fake(spool, cmds, &h);
	log = text_of(top, "fake-cupti.log");
	/* the kinds of cpu and cuda on, the NVTX domain on, then all off again */
	ck_assert_msg(logged(log, "enable", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
		      logged(log, "enable", CUPTI_ACTIVITY_KIND_RUNTIME) && strstr(log, "domain nvtx 1\n"), "%s", log);
	ck_assert_msg(logged(log, "disable", CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
		      logged(log, "disable", CUPTI_ACTIVITY_KIND_RUNTIME) && strstr(log, "domain nvtx 0\n"), "%s", log);
	/* each kind enabled is disabled again; memory was not asked */
	ck_assert_int_eq(count(log, "enable "), count(log, "disable "));
	ck_assert_msg(!logged(log, "enable", CUPTI_ACTIVITY_KIND_MEMORY2), "%s", log);
	done = text_of(spool, ".capture-7.done");
	ck_assert_str_eq(done, "ok\n");
	req = text_of(spool, ".capture");
	ck_assert_str_eq(req, "");
	chunks(spool, "-c7.pt.trace.json", &n, &tagged, &kernels);
	ck_assert_int_ge(n, 1);
	ck_assert_int_eq(tagged, n);
	ck_assert_msg(kernels == 3, "%d kernels; stderr %s", kernels, h.err);
	ck_assert_msg(strstr(h.err, "capture 7: 3 of 3 step(s)"), "%s", h.err);
	free(log);
	free(done);
	free(req);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* seconds=1: on for about a second whatever the steps, then off; a second request later works too. */
START_TEST(test_ondemand_seconds_then_again)
{
	const char *cmds[64];
	char *top, *spool = new_spool(&top), *log, *done, waits[3][4096];
	int i, k = 0, n, tagged, kernels, first;
	struct host h;

	snprintf(waits[0], sizeof(waits[0]), "gone:%s/.capture", spool);
	snprintf(waits[1], sizeof(waits[1]), "wait:%s/.capture-8.done", spool);
	snprintf(waits[2], sizeof(waits[2]), "wait:%s/.capture-8b.done", spool);
	put_request(spool, "id=8 steps=0 seconds=1 activities=cuda");
	cmds[k++] = "sleep:300";
	for (i = 0; i < 20; i++) {
		cmds[k++] = "kernel";
		cmds[k++] = "sleep:100";
	}
	cmds[k++] = waits[0];
	cmds[k++] = waits[1];
	/* the same process, a second request: on again for 2 steps */
	cmds[k++] = "capture:id=8b steps=2 seconds=0 activities=cuda";
	cmds[k++] = "sleep:400";
	for (i = 0; i < 4; i++) {
		cmds[k++] = "step:step";
		cmds[k++] = "sleep:30";
		cmds[k++] = "kernel";
	}
	cmds[k++] = waits[2];
	cmds[k] = NULL;
	run_fake(spool, cmds, &h);
	log = text_of(top, "fake-cupti.log");
	ck_assert_int_eq(count(log, "enable 10\n"), 2);
	ck_assert_int_eq(count(log, "disable 10\n"), 2);
	ck_assert_msg(!logged(log, "enable", CUPTI_ACTIVITY_KIND_RUNTIME), "cpu was not asked: %s", log);
	/* the NVTX domain only for the steps window */
	ck_assert_int_eq(count(log, "domain nvtx 1\n"), 1);
	done = text_of(spool, ".capture-8.done");
	ck_assert_str_eq(done, "ok\n");
	chunks(spool, "-c8.", &n, &tagged, &kernels);
	ck_assert_int_ge(tagged, 1);
	first = tagged;
	/* 1 s of kernels every 100 ms (a loaded machine stretches the sleeps, never the window) */
	ck_assert_msg(kernels >= 3 && kernels <= 11, "%d kernels", kernels);
	free(done);
	done = text_of(spool, ".capture-8b.done");
	ck_assert_str_eq(done, "ok\n");
	chunks(spool, "-c8b.", &n, &tagged, &kernels);
	ck_assert_int_ge(tagged, 1);
	/* every chunk is one window's or the other's */
	ck_assert_int_eq(n, first + tagged);
	ck_assert_msg(kernels == 2, "%d kernels in the steps window; %s", kernels, h.err);
	free(log);
	free(done);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* A request the library cannot follow is answered failed and removed; nothing is enabled. */
START_TEST(test_ondemand_bad_request)
{
	const char *cmds[] = { NULL, NULL };
	char *top, *spool = new_spool(&top), *log, *done, wait[4096];
	struct host h;

	snprintf(wait, sizeof(wait), "wait:%s/.capture-9.done", spool);
	cmds[0] = wait;
	put_request(spool, "id=9 steps=0 seconds=0 activities=cpu");
	run_fake(spool, cmds, &h);
	done = text_of(spool, ".capture-9.done");
	ck_assert_str_eq(done, "failed: bad request: expected exactly one of steps and seconds above 0\n");
	free(done);
	done = text_of(spool, ".capture");
	ck_assert_str_eq(done, "");
	log = text_of(top, "fake-cupti.log");
	ck_assert_msg(!strstr(log, "enable"), "%s", log);
	free(log);
	free(done);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* steps=100 and the process exits after 2: the exit closes the window, its chunk and answer are written. */
START_TEST(test_ondemand_exit_mid_window)
{
	const char *cmds[] = { NULL, "sleep:300", "step:step 1", "kernel", "step:step 2", "kernel", NULL };
	char *top, *spool = new_spool(&top), *done, wait[4096];
	int n, tagged, kernels;
	struct host h;

	snprintf(wait, sizeof(wait), "wait:%s/.capture", spool);
	cmds[0] = wait;
	put_request(spool, "id=abc-1 steps=100 seconds=0 activities=cuda,memory,stacks");
	run_fake(spool, cmds, &h);
	done = text_of(spool, ".capture-abc-1.done");
	ck_assert_str_eq(done, "ok\n");
	chunks(spool, "-cabc-1.", &n, &tagged, &kernels);
	ck_assert_int_eq(kernels, 2);
	ck_assert_int_eq(tagged, n);
	ck_assert_msg(strstr(h.err, "ended by the exit"), "%s", h.err);
	free(done);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* A steps window in which no step range begins ends after TRAINSCOPE_CAPTURE_STEPLESS_S (2 here). */
START_TEST(test_ondemand_stepless)
{
	const char *cmds[] = { "sleep:300", "kernel", NULL, NULL };
	char *top, *spool = new_spool(&top), *done, wait[4096];
	struct host h;

	snprintf(wait, sizeof(wait), "wait:%s/.capture-5.done", spool);
	cmds[2] = wait;
	put_request(spool, "id=5 steps=10 seconds=0 activities=cuda");
	run_fake(spool, cmds, &h);
	done = text_of(spool, ".capture-5.done");
	ck_assert_str_eq(done, "ok\n");
	ck_assert_msg(strstr(h.err, "without a step range"), "%s", h.err);
	free(done);
	tu_rmtree(top);
	free(top);
	free(spool);
}
END_TEST

/* The request line: what is taken, what is refused and why. */
START_TEST(test_ondemand_parse)
{
	struct ondemand_req r;
	char why[128];

	ck_assert_int_eq(ondemand_parse("id=42 steps=5 seconds=0 activities=cpu,cuda,memory,stacks\n", &r, why,
					sizeof(why)), 0);
	ck_assert_str_eq(r.id, "42");
	ck_assert_int_eq(r.steps, 5);
	ck_assert_uint_eq(r.activities, ONDEMAND_CPU | ONDEMAND_CUDA | ONDEMAND_MEMORY | ONDEMAND_STACKS);
	ck_assert_int_eq(ondemand_parse("id=x seconds=3600 steps=0 activities=cuda later=1", &r, why, sizeof(why)), 0);
	ck_assert_int_eq(r.seconds, 3600);
	ck_assert_int_eq(ondemand_parse("id=x steps=0 seconds=3601 activities=cuda", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(r.id, "x");
	ck_assert_int_eq(ondemand_parse("id=x steps=1 seconds=0 activities=cuda,gpu", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "unknown activity 'gpu'");
	ck_assert_int_eq(ondemand_parse("id=x steps=1 seconds=0 activities=stacks", &r, why, sizeof(why)), -1);
	ck_assert_int_eq(ondemand_parse("id=../x steps=1 seconds=0 activities=cuda", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(r.id, "");
	ck_assert_int_eq(ondemand_parse("steps=1 seconds=0 activities=cuda", &r, why, sizeof(why)), -1);
	ck_assert_str_eq(why, "no id");
	ck_assert_int_eq(ondemand_parse("id=1 steps=1", &r, why, sizeof(why)), -1);
	ck_assert_int_eq(ondemand_parse("", &r, why, sizeof(why)), -1);
}
END_TEST

Suite *suite_cupti_ondemand(void)
{
	Suite *s = suite_create("cupti_ondemand");
	TCase *tc = tcase_create("ondemand");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_ondemand_parse);
	tcase_add_test(tc, test_ondemand_nothing_asked);
	tcase_add_test(tc, test_ondemand_steps);
	tcase_add_test(tc, test_ondemand_seconds_then_again);
	tcase_add_test(tc, test_ondemand_bad_request);
	tcase_add_test(tc, test_ondemand_exit_mid_window);
	tcase_add_test(tc, test_ondemand_stepless);
	suite_add_tcase(s, tc);
	return s;
}
