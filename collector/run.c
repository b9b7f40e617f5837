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
 * Signals (SIGCHLD, SIGINT, SIGTERM) arrive on a signalfd polled with the
 * inotify descriptor. SIGINT/SIGTERM sent by a process (a scheduler) are
 * passed on to CMD; those from the terminal reached CMD already. After CMD
 * exits, shipping goes on until the spool is empty, --drain-timeout passes,
 * or a signal comes.
 */
#define _GNU_SOURCE	/* asprintf */
#include <dirent.h>
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

#include "collect.h"
#include "watch.h"

#define CUPTI_LIB "libtrainscope-cupti.so"
#define DEFAULT_SPOOL_MAX (1LL << 30)
#define DEFAULT_DRAIN_S 300

static const char run_help[] =
	"usage: trainscope-collect run [--server URL] [--run NAME] [--rank R] [--spool DIR]\n"
	"                              [--spool-max BYTES] [--cupti PATH] [--drain-timeout S]\n"
	"                              -- CMD [ARGS...]\n"
	"\n"
	"Runs CMD with the CUPTI library injected (CUDA_INJECTION64_PATH and\n"
	"NVTX_INJECTION64_PATH) and TRAINSCOPE_SPOOL, TRAINSCOPE_SPOOL_MAX and\n"
	"TRAINSCOPE_RANK set; ships each trace chunk the library finishes in the spool\n"
	"as an artifact of the run and rank while CMD runs, and the rest after it exits;\n"
	"exits with CMD's status. While the server is away, chunks wait in the spool and\n"
	"go when it is back; a full spool is said on stderr (the library then stops\n"
	"writing until there is room). A 401/403 stops shipping, not CMD.\n"
	"\n"
	"  --spool DIR          the spool folder (default: a new one under $TMPDIR, removed\n"
	"                       when empty at the end)\n"
	"  --spool-max BYTES    its bound (env TRAINSCOPE_SPOOL_MAX, default 1073741824)\n"
	"  --cupti PATH         the library (env TRAINSCOPE_CUPTI_LIB, default " CUPTI_LIB "\n"
	"                       beside trainscope-collect); missing: CMD runs untraced\n"
	"  --drain-timeout S    after CMD exits, how long to keep trying (default 300)\n";

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

/* --cupti, else TRAINSCOPE_CUPTI_LIB, else beside this binary (or in the build tree's collector/cupti/). */
static char *cupti_path(const char *flag)
{
	const char *env = getenv("TRAINSCOPE_CUPTI_LIB");
	char self[PATH_MAX], *slash, *p = NULL;
	ssize_t n;

	if (flag || (env && *env))
		return strdup(flag ? flag : env);
	if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
		return strdup(CUPTI_LIB);
	self[n] = 0;
	if ((slash = strrchr(self, '/')))
		*slash = 0;
	if (asprintf(&p, "%s/collector/cupti/" CUPTI_LIB, self) >= 0 && access(p, F_OK) == 0)
		return p;
	free(p);
	return asprintf(&p, "%s/" CUPTI_LIB, self) < 0 ? NULL : p;
}

/* The child's environment, set in this process before fork (no allocation after it). */
static int child_env(const struct client *c, const char *spool, long long spool_max, const char *lib_flag)
{
	char num[32], real[PATH_MAX], *lib = cupti_path(lib_flag);
	int rc = 0;

	if (!lib)
		return -1;
	if (realpath(lib, real)) {
		rc |= setenv("CUDA_INJECTION64_PATH", real, 1);
		rc |= setenv("NVTX_INJECTION64_PATH", real, 1);
	} else {
		fprintf(stderr, "trainscope-collect: no CUPTI library at %s (%s): running the command without GPU "
			"tracing\n", lib, strerror(errno));
	}
	free(lib);
	rc |= setenv("TRAINSCOPE_SPOOL", spool, 1);
	snprintf(num, sizeof(num), "%lld", spool_max);
	rc |= setenv("TRAINSCOPE_SPOOL_MAX", num, 1);
	snprintf(num, sizeof(num), "%d", c->rank);
	rc |= setenv("TRAINSCOPE_RANK", num, 1);
	return rc ? -1 : 0;
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
		{ NULL, 0, NULL, 0 },
	};
	const char *lib = NULL, *env_max = getenv("TRAINSCOPE_SPOOL_MAX");
	char *spool = NULL;
	struct client c;
	struct watch w = { .ifd = -1 };
	sigset_t sigs, old;
	long long spool_max = DEFAULT_SPOOL_MAX, drain_s = DEFAULT_DRAIN_S, deadline = 0, bytes;
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
	if (watch_init(&w, &c, 1) || watch_add(&w, spool, NULL) || child_env(&c, spool, spool_max, lib))
		goto out;
	fflush(NULL);
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
		struct pollfd p[2] = { { .fd = w.ifd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		struct signalfd_siginfo si;
		long timeout;

		if (!stopped)
			watch_ship(&w);
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
		if (!alive && (!w.nqueue || stopped || watch_now_ms() >= deadline))
			break;
		timeout = stopped ? -1 : watch_timeout_ms(&w);
		if (!alive && (timeout < 0 || timeout > deadline - watch_now_ms()))
			timeout = deadline - watch_now_ms();
		if (poll(p, 2, (int)(timeout < 0 ? -1 : timeout)) < 0 && errno != EINTR) {
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
	rc = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
out:
	watch_release(&w);
	if (sfd >= 0)
		close(sfd);
	free(spool);
	client_release(&c);
	return rc;
}
