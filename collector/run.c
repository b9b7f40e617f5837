/*
 * run.c: trainscope-collect run [flags] -- CMD ARGS...: CMD runs with the
 * CUPTI library injected and a private spool folder; the collector ships the
 * chunks the library renames into the spool while CMD runs (a watch in spool
 * mode: shipped chunks are deleted), the rest after CMD exits, and exits
 * with CMD's status.
 *
 * The spool contract with libtrainscope-cupti.so: a chunk is written to a
 * name starting with '.' and renamed to trace-<pid>-<seq>.pt.trace.json[.gz]
 * when complete; the library stops writing when the spool holds
 * TRAINSCOPE_SPOOL_MAX bytes. This side reports a full spool and never
 * deletes a chunk the server did not keep.
 *
 * It says on stderr, first, whether CUDA tracing is on (the library found and
 * injected, a CUDA driver here) or off and why, and last how CMD ended, the
 * rank's steps on the server, the chunks and bytes shipped, the rejected
 * ones, the failed attempts, what is left in the spool, and the run's page.
 *
 * Signals (SIGCHLD, SIGINT, SIGTERM) arrive on a signalfd polled with the
 * inotify descriptor. SIGINT/SIGTERM sent by a process (a scheduler) are
 * passed on to CMD; those from the terminal reached CMD already. After CMD
 * exits, shipping goes on until the spool is empty, --drain-timeout passes,
 * or a signal comes.
 *
 * --captures (issue 52, capture.h): CMD's library starts in on-demand mode
 * (TRAINSCOPE_CAPTURE_MODE=ondemand: nothing is recorded until asked), a
 * thread asks the server for this rank's captures, and each is handed to
 * the library through the spool, or, when CMD is not traced by it, to
 * capture_other_backend (the Kineto daemon). After CMD exits, draining also
 * waits for the end of a capture to be posted.
 */
#define _GNU_SOURCE	/* asprintf */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "collect.h"
#include "watch.h"

#define CUPTI_LIB "libtrainscope-cupti.so"
#define DEFAULT_SPOOL_MAX (1LL << 30)
#define DEFAULT_DRAIN_S 300

static const char run_help[] =
	"usage: trainscope-collect run [--server URL] [--run NAME] [--rank R] [--spool DIR]\n"
	"                              [--spool-max BYTES] [--cupti PATH] [--drain-timeout S]\n"
	"                              [--captures] -- CMD [ARGS...]\n"
	"\n"
	"Runs CMD with the CUPTI library injected (CUDA_INJECTION64_PATH and\n"
	"NVTX_INJECTION64_PATH; whether tracing is on, or why not, is said first) and\n"
	"TRAINSCOPE_SPOOL, TRAINSCOPE_SPOOL_MAX and TRAINSCOPE_RANK set; ships each trace\n"
	"chunk the library finishes in the spool while CMD runs, and the rest after it\n"
	"exits; says steps, chunks, bytes and failures, and exits with CMD's status.\n"
	"While the server is away, chunks wait in the spool; a full spool is said (the\n"
	"library stops writing until there is room). A 401/403 stops shipping, not CMD.\n"
	"\n"
	"  --spool DIR          the spool folder (default: a new one under $TMPDIR)\n"
	"  --spool-max BYTES    its bound (env TRAINSCOPE_SPOOL_MAX, default 1073741824)\n"
	"  --cupti PATH         the library, or none (env TRAINSCOPE_CUPTI_LIB; default\n"
	"                       " CUPTI_LIB " beside this binary or in ../lib)\n"
	"  --drain-timeout S    after CMD exits, how long to keep trying (default 300)\n"
	"  --captures           record only the windows the server asks for (on-demand\n"
	"                       capture; env TRAINSCOPE_CAPTURES=1)\n";

/* Bytes of everything in the spool, the library's unfinished chunks included. */
static long long spool_bytes(const char *dir, int *chunks_out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	long long sum = 0;

	*chunks_out = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			sum += st.st_size;
			*chunks_out += e->d_name[0] != '.';
		}
	closedir(d);
	return sum;
}

/*
 * --cupti, else TRAINSCOPE_CUPTI_LIB, else the first that exists of: the build
 * tree's collector/cupti/, beside this binary, ../lib/ from it (an installed
 * prefix); where it looked goes in looked. NULL when out of memory.
 */
static char *cupti_path(const char *given, char *looked, size_t size)
{
	static const char *const where[] = { "/collector/cupti/", "/", "/../lib/" };
	char self[PATH_MAX], *slash, *p = NULL;
	size_t i, n = 0;
	ssize_t len;

	looked[0] = 0;
	if (given)
		return strdup(given);
	if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return strdup(CUPTI_LIB);
	self[len] = 0;
	if ((slash = strrchr(self, '/')))
		*slash = 0;
	for (i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		free(p);
		if (asprintf(&p, "%s%s" CUPTI_LIB, self, where[i]) < 0)
			return NULL;
		if (access(p, F_OK) == 0)
			return p;
		n += (size_t)snprintf(looked + n, n < size ? size - n : 0, "%s%s", i ? ", " : "", p);
		if (n >= size)
			n = size - 1;
	}
	return p;	/* the last place looked: realpath() says it is not there */
}

/* 1 when the CUDA driver (libcuda.so.1) can be loaded here, else 0 with the loader's reason in why. */
static int cuda_driver(char *why, size_t size)
{
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
	const char *e;

	if (h) {
		dlclose(h);
		return 1;
	}
	e = dlerror();
	snprintf(why, size, "%s", e ? e : "libcuda.so.1 not found");
	return 0;
}

/*
 * The child's environment, set in this process before fork (no allocation
 * after it), and one line on stderr: whether CUDA tracing is on (the library
 * injected, and a CUDA driver here to load it) or off, and why. With the
 * library found it is injected even without a driver here: CMD may find one
 * that this process does not (its own LD_LIBRARY_PATH).
 */
static int child_env(const struct client *c, const char *spool, long long spool_max, const char *lib_flag,
		     int captures, int *traced)
{
	const char *env = getenv("TRAINSCOPE_CUPTI_LIB"), *given = lib_flag ? lib_flag : env && *env ? env : NULL;
	char num[32], real[PATH_MAX], looked[3 * PATH_MAX], why[512], *lib;
	int rc = 0;

	if (given && !strcmp(given, "none")) {
		fprintf(stderr, "trainscope-collect: CUDA tracing off: turned off by %s\n",
			lib_flag ? "--cupti none" : "TRAINSCOPE_CUPTI_LIB=none");
	} else if (!(lib = cupti_path(given, looked, sizeof(looked)))) {
		return -1;
	} else {
		if (!realpath(lib, real)) {
			fprintf(stderr, "trainscope-collect: CUDA tracing off: no CUPTI library at %s (%s); the command runs "
				"untraced\n", looked[0] ? looked : lib, strerror(errno));
		} else {
			*traced = 1;
			rc |= setenv("CUDA_INJECTION64_PATH", real, 1);
			rc |= setenv("NVTX_INJECTION64_PATH", real, 1);
			if (cuda_driver(why, sizeof(why)))
				fprintf(stderr, "trainscope-collect: CUDA tracing on: %s injected (CUDA_INJECTION64_PATH)\n",
					real);
			else
				fprintf(stderr, "trainscope-collect: CUDA tracing off: no CUDA driver here (%s); %s injected all "
					"the same\n", why, real);
		}
		free(lib);
	}
	/* on demand only when someone can ask: without --captures nothing would ever turn it on */
	rc |= captures ? setenv("TRAINSCOPE_CAPTURE_MODE", "ondemand", 1) : unsetenv("TRAINSCOPE_CAPTURE_MODE");
	rc |= setenv("TRAINSCOPE_SPOOL", spool, 1);
	snprintf(num, sizeof(num), "%lld", spool_max);
	rc |= setenv("TRAINSCOPE_SPOOL_MAX", num, 1);
	snprintf(num, sizeof(num), "%d", c->rank);
	rc |= setenv("TRAINSCOPE_RANK", num, 1);
	return rc ? -1 : 0;
}

/* The rank's complete steps on the server (GET /runs/{run}/ranks, one try), or -1 with why. */
static long long server_steps(const struct client *c, char *why, size_t size)
{
	struct client_resp r;
	json_t *k;
	size_t i;
	char path[256];
	long long n = -1;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/ranks", c->run);
	if (client_try(c, "GET", path, NULL, &r) != CLIENT_OK) {
		snprintf(why, size, "%s", r.error);
	} else {
		json_array_foreach(json_object_get(r.json, "ranks"), i, k)
			if (json_integer_value(json_object_get(k, "rank")) == c->rank)
				n = json_integer_value(json_object_get(k, "steps"));
		if (n < 0)
			n = 0;	/* no trace of this rank (yet): no step */
	}
	client_resp_release(&r);
	return n;
}

/*
 * The last line of run: how CMD ended, the rank's steps on the server, the
 * chunks shipped (and bytes), rejected, failed attempts, left in the spool,
 * and the run's page.
 */
static void run_summary(const struct client *c, const struct watch *w, int status, long long ms, int left)
{
	char how[96], steps[600], bytes[64], why[512];
	long long n = -1;

	if (WIFSIGNALED(status))
		snprintf(how, sizeof(how), "the command was ended by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else if (WEXITSTATUS(status) == 127)
		snprintf(how, sizeof(how), "the command exited with 127 (not found or not started)");
	else
		snprintf(how, sizeof(how), "the command exited with %d", WEXITSTATUS(status));
	if (!w->shipped)
		snprintf(steps, sizeof(steps), "no chunk shipped");
	else if (w->failures)
		snprintf(steps, sizeof(steps), "steps unknown (the server is away)");
	else if ((n = server_steps(c, why, sizeof(why))) < 0)
		snprintf(steps, sizeof(steps), "steps unknown (%s)", why);
	else
		snprintf(steps, sizeof(steps), "%lld step(s) on the server", n);
	if (w->shipped)
		snprintf(steps + strlen(steps), sizeof(steps) - strlen(steps), " from %u chunk(s) shipped (%s)", w->shipped,
			 watch_bytes(w->shipped_bytes, bytes, sizeof(bytes)));
	fprintf(stderr, "trainscope-collect: run %s rank %d: %s after %.1f s; %s; %u rejected, %u failed attempt(s), %d left"
		" in the spool; see %s/runs/%s\n", c->run, c->rank, how, (double)ms / 1000, steps, w->rejected,
		w->transient, left, c->server, c->run);
}

static int parse_bytes(const char *s, long long *out)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || *end || n <= 0)
		return -1;
	*out = n;
	return 0;
}

int run_main(int argc, char **argv)
{
	static const struct option opts[] = {
		COLLECT_COMMON_OPTIONS,
		{ "spool", required_argument, NULL, 'p' },
		{ "spool-max", required_argument, NULL, 'm' },
		{ "cupti", required_argument, NULL, 'c' },
		{ "drain-timeout", required_argument, NULL, 'd' },
		{ "captures", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	const char *lib = NULL, *env_max = getenv("TRAINSCOPE_SPOOL_MAX"), *env_cap = getenv("TRAINSCOPE_CAPTURES");
	struct capture cap;
	int captures = env_cap && !strcmp(env_cap, "1"), traced = 0, capturing = 0;
	char *spool = NULL;
	struct client c;
	struct watch w = { .ifd = -1 };
	sigset_t sigs, old;
	long long spool_max = DEFAULT_SPOOL_MAX, drain_s = DEFAULT_DRAIN_S, deadline = 0, bytes, started;
	int opt, made_spool = 0, sfd = -1, status = 0, alive = 0, full = 0, stopped = 0, broken = 0, left;
	int rc = CLIENT_EXIT_USAGE;
	pid_t child;

	if (client_init(&c))
		return CLIENT_EXIT_USAGE;
	if (env_max && *env_max && parse_bytes(env_max, &spool_max)) {
		fprintf(stderr, "trainscope-collect: TRAINSCOPE_SPOOL_MAX=%s: expected a byte count\n", env_max);
		goto out;
	}
	/* '+': options end at CMD, whose own flags are its business */
	while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			printf("%s%s", run_help, collect_common_help);
			rc = CLIENT_EXIT_OK;
			goto out;
		case 'p':
			free(spool);
			spool = strdup(optarg);
			break;
		case 'm':
			if (parse_bytes(optarg, &spool_max)) {
				fprintf(stderr, "trainscope-collect: --spool-max %s: expected a byte count\n", optarg);
				goto out;
			}
			break;
		case 'c':
			lib = optarg;
			break;
		case 'C':
			captures = 1;
			break;
		case 'd':
			if (parse_bytes(optarg, &drain_s)) {
				fprintf(stderr, "trainscope-collect: --drain-timeout %s: expected seconds\n", optarg);
				goto out;
			}
			break;
		default:
			if (collect_common_option(&c, opt, optarg))
				goto out;
		}
	}
	if (optind == argc || collect_need_run(&c)) {
		if (optind == argc)
			fprintf(stderr, "%s", run_help);
		goto out;
	}
	rc = CLIENT_EXIT_LOCAL;
	if (!spool) {
		const char *t = getenv("TMPDIR");
		if (asprintf(&spool, "%s/trainscope-spool-XXXXXX", t && *t ? t : "/tmp") < 0 || !mkdtemp(spool)) {
			fprintf(stderr, "trainscope-collect: cannot make a spool folder: %s\n", strerror(errno));
			goto out;
		}
		made_spool = 1;
	} else {
		char *real;
		/* absolute: CMD may change its working folder */
		if ((mkdir(spool, 0700) && errno != EEXIST) || !(real = realpath(spool, NULL))) {
			fprintf(stderr, "trainscope-collect: %s: %s\n", spool, strerror(errno));
			goto out;
		}
		free(spool);
		spool = real;
	}
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &sigs, &old) || (sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		fprintf(stderr, "trainscope-collect: signalfd: %s\n", strerror(errno));
		goto out;
	}
	c.cancel_fd = sfd;
	if (watch_init(&w, &c, 1) || watch_add(&w, spool, NULL) ||
	    child_env(&c, spool, spool_max, lib, captures, &traced))
		goto out;
	/*
	 * Who carries out a capture: our library when CMD is traced by it, else
	 * the backend for processes it does not trace (capture.h: the Kineto daemon).
	 */
	if (captures && capture_init(&cap, &c, traced ? &capture_spool_backend : capture_other_backend,
				     "CUDA tracing is off for this command, and no other capture backend", spool))
		goto out;
	capturing = captures;
	fprintf(stderr, "trainscope-collect: shipping the spool %s to run %s rank %d on %s\n", spool, c.run, c.rank,
		c.server);
	fflush(NULL);
	started = watch_now_ms();
	if ((child = fork()) < 0) {
		fprintf(stderr, "trainscope-collect: fork: %s\n", strerror(errno));
		goto out;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "trainscope-collect: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	alive = 1;
	for (;;) {
		struct pollfd p[4] = { { .fd = w.ifd, .events = POLLIN }, { .fd = sfd, .events = POLLIN },
				       { .fd = capturing ? capture_fd(&cap) : -1, .events = POLLIN },
				       { .fd = capturing ? capture_backend_fd(&cap) : -1, .events = POLLIN } };
		struct signalfd_siginfo si;
		long timeout, ct;

		if (!stopped)
			watch_ship(&w);
		if (capturing && !stopped)
			capture_step(&cap, &w);
		bytes = spool_bytes(spool, &left);
		if (!full && bytes >= spool_max)
			fprintf(stderr, "trainscope-collect: the spool %s is full (%lld bytes, %d chunk(s), at most %lld): "
				"the tracing library stops writing chunks until the server takes these (%s)\n",
				spool, bytes, left, spool_max, w.last_error[0] ? w.last_error : "server busy");
		else if (full && bytes < spool_max)
			fprintf(stderr, "trainscope-collect: the spool %s has room again\n", spool);
		full = bytes >= spool_max;
		if ((w.fatal || broken) && !stopped) {
			/* CMD goes on: tracing is not worth a training job */
			fprintf(stderr, "trainscope-collect: shipping stopped (%s); chunks stay in %s\n",
				w.fatal == CLIENT_EXIT_REJECTED ? w.last_error : "see above", spool);
			stopped = 1;
		}
		if (!alive && ((!w.nqueue && !(capturing && capture_busy(&cap))) || stopped || watch_now_ms() >= deadline))
			break;
		timeout = stopped ? -1 : watch_timeout_ms(&w);
		ct = capturing && !stopped ? capture_timeout_ms(&cap) : -1;
		if (ct >= 0 && (timeout < 0 || ct < timeout))
			timeout = ct;
		if (!alive && (timeout < 0 || timeout > deadline - watch_now_ms()))
			timeout = deadline - watch_now_ms();
		if (poll(p, 4, (int)(timeout < 0 ? -1 : timeout)) < 0 && errno != EINTR) {
			fprintf(stderr, "trainscope-collect: poll: %s\n", strerror(errno));
			break;
		}
		if (p[0].revents && watch_read_events(&w))
			broken = 1;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (si.ssi_signo == SIGCHLD) {
				if (alive && waitpid(child, &status, WNOHANG) == child) {
					alive = 0;
					deadline = watch_now_ms() + drain_s * 1000;
					if (capturing)
						capture_target_gone(&cap);
					/* its last renames are in inotify's queue by now: take them before deciding we are done */
					if (watch_read_events(&w))
						broken = 1;
				}
			} else if (alive) {
				/* from a process (a scheduler's kill): pass it on; from the terminal CMD has it */
				if (si.ssi_code == SI_USER || si.ssi_code == SI_QUEUE)
					kill(child, (int)si.ssi_signo);
			} else {
				deadline = 0;	/* a signal while draining: stop now */
			}
		}
	}
	if (alive)
		waitpid(child, &status, 0);	/* poll failed: nothing more to ship, but CMD decides */
	bytes = spool_bytes(spool, &left);
	if (left)
		fprintf(stderr, "trainscope-collect: %d chunk(s) not shipped, left in %s; `trainscope-collect upload "
			"--run %s --rank %d %s/*` ships them\n", left, spool, c.run, c.rank, spool);
	if (made_spool && !bytes)
		rmdir(spool);
	run_summary(&c, &w, status, watch_now_ms() - started, left);
	rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
out:
	if (capturing)
		capture_release(&cap);
	watch_release(&w);
	if (sfd >= 0)
		close(sfd);
	free(spool);
	client_release(&c);
	return rc;
}
