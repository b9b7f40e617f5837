/*
 * watch.c: see watch.h. The order of watch_add matters: the inotify watch
 * is set before the folder is listed, so a file finished in between is seen
 * twice (queued once: the queue has no duplicates), never missed.
 *
 * An item's life: queued (event or scan) -> at its turn in watch_ship:
 * gone / already shipped (same size and mtime in the state) -> dropped;
 * a symbolic link -> dropped with a message (never followed: a link to a
 * file outside the folder would ship it); found by a scan or closed after
 * writing, and modified within settle_ms or not whole yet (no closing ']' or
 * '}', no pickle STOP, a gzip stream cut short) -> waits (a writer that does
 * not rename may still be at it; one quiet for INCOMPLETE_MS goes as it is,
 * for the server to keep as an error); renamed into the folder -> due at
 * once; else uploaded once: OK or a 4xx
 * -> recorded (keep mode) or deleted (spool mode) and dropped; transient
 * -> stays first in the queue until w->retry_at.
 */
#define _GNU_SOURCE	/* asprintf */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/utf8.h"
#include "capture.h"
#include "collect.h"
#include "upload.h"
#include "watch.h"

#define STATE_NAME ".trainscope-collect.state"
#define INCOMPLETE_MS 60000	/* a file not whole after this long quiet is shipped as it is */
/*
 * How long a .txt or .csv file found by a scan or closed after writing stays
 * quiet before it goes: nvidia-smi -l N appends a row every N seconds through
 * the one open descriptor (no close between rows), a shell loop appends and
 * closes each time; every row ends a line, so only quiet tells that it ended.
 */
#define TEXT_SETTLE_MS 30000
#define STATE_HEADER "# trainscope-collect state 1: size mtime_ns rank run name\n"

/* a file shipped (or rejected) as this version, to this run and rank */
struct watch_done {
	long long size, mtime_ns;
	int rank;
	char *run, *name;
};

struct watch_dir {
	char *path;
	int wd;
	char *state;		/* NULL in spool mode */
	struct watch_done *done;
	size_t ndone, cap;
};

struct watch_item {
	size_t dir;
	char *name;
	int from_scan;
	long long not_before;	/* monotonic ms */
};

long long watch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long mtime_ns(const struct stat *st)
{
	return (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* other profilers' outputs (Lightning reports, key_averages tables, stacks, nvidia-smi logs): the server tells them apart */
static int is_text(const char *name)
{
	return ends_with(name, ".txt") || ends_with(name, ".csv");
}

/* the names watch ships: see watch.h */
static int eligible(const char *name)
{
	const unsigned char *u = (const unsigned char *)name, *end = u + strlen(name);
	size_t i, k;

	if (name[0] == '.' || ends_with(name, ".tmp") || ends_with(name, ".part"))
		return 0;
	if (!(ends_with(name, ".json") || ends_with(name, ".json.gz") || ends_with(name, ".pickle") ||
	      ends_with(name, ".pkl") || is_text(name)))
		return 0;
	for (i = 0; name[i]; i += k) {
		if (!(k = tp_utf8_len(u + i, end))) {
			/* the server refuses it (400): said once, never retried, the files after it go on */
			fprintf(stderr, "trainscope-collect: skipping a file whose name is not UTF-8: ");
			for (k = 0; name[k]; k++)
				fprintf(stderr, (u[k] < 0x80 && u[k] >= 0x20) ? "%c" : "\\x%02x", u[k]);
			fputc('\n', stderr);
			return 0;
		}
		if (u[i] < 0x20 || u[i] == 0x7f || u[i] == '"' || u[i] == '\\')
			return 0;	/* the server refuses such names */
	}
	return i <= 255;
}

/*
 * Whether a file looks whole: JSON ends with ']' or '}', a pickle with its
 * STOP opcode, a gzip stream inflates to its end, text with a line's end. A
 * writer between two appends leaves none of these.
 */
static int looks_whole(int fd, const char *name, off_t size)
{
	char tail[64];
	ssize_t n;

	if (ends_with(name, ".json.gz")) {
		int dup_fd = dup(fd), whole;
		gzFile g = dup_fd >= 0 ? gzdopen(dup_fd, "rb") : NULL;
		static char buf[65536];
		if (!g) {
			if (dup_fd >= 0)
				close(dup_fd);
			return 1;	/* cannot tell: the server will */
		}
		while (gzread(g, buf, sizeof(buf)) > 0)
			;
		gzerror(g, &whole);
		whole = whole == Z_OK;
		gzclose(g);
		return whole;
	}
	if (size <= 0)
		return 0;
	n = pread(fd, tail, sizeof(tail), size > (off_t)sizeof(tail) ? size - (off_t)sizeof(tail) : 0);
	if (is_text(name))
		return n > 0 && tail[n - 1] == '\n';
	while (n > 0 && (tail[n - 1] == ' ' || tail[n - 1] == '\n' || tail[n - 1] == '\r' || tail[n - 1] == '\t'))
		n--;
	if (n <= 0)
		return 0;
	if (ends_with(name, ".json"))
		return tail[n - 1] == ']' || tail[n - 1] == '}';
	return tail[n - 1] == '.';	/* pickle STOP */
}

static void done_free(struct watch_dir *d)
{
	size_t i;

	for (i = 0; i < d->ndone; i++) {
		free(d->done[i].run);
		free(d->done[i].name);
	}
	free(d->done);
	d->done = NULL;
	d->ndone = d->cap = 0;
}

static int done_add(struct watch_dir *d, long long size, long long mtime, int rank, const char *run,
		    const char *name)
{
	struct watch_done *e;

	if (d->ndone == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		if (!(e = realloc(d->done, cap * sizeof(*e))))
			return -1;
		d->done = e;
		d->cap = cap;
	}
	e = &d->done[d->ndone];
	e->size = size;
	e->mtime_ns = mtime;
	e->rank = rank;
	e->run = strdup(run);
	e->name = strdup(name);
	if (!e->run || !e->name) {
		free(e->run);
		free(e->name);
		return -1;
	}
	d->ndone++;
	return 0;
}

static int is_done(const struct watch *w, const struct watch_dir *d, const char *name, const struct stat *st)
{
	size_t i;

	for (i = 0; i < d->ndone; i++) {
		const struct watch_done *e = &d->done[i];
		if (e->size == st->st_size && e->mtime_ns == mtime_ns(st) && e->rank == w->c->rank &&
		    !strcmp(e->run, w->c->run) && !strcmp(e->name, name))
			return 1;
	}
	return 0;
}

/* Rewrite the state file: a temporary beside it, fsync'd, renamed over it. */
static int state_save(const struct watch_dir *d)
{
	char *tmp = NULL;
	FILE *f = NULL;
	size_t i;
	int ok = 0;

	if (asprintf(&tmp, "%s.tmp", d->state) < 0)
		return -1;
	if ((f = fopen(tmp, "w"))) {
		fputs(STATE_HEADER, f);
		for (i = 0; i < d->ndone; i++)
			fprintf(f, "%lld %lld %d %s %s\n", d->done[i].size, d->done[i].mtime_ns, d->done[i].rank,
				d->done[i].run, d->done[i].name);
		ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
		ok = (fclose(f) == 0) && ok && rename(tmp, d->state) == 0;
	}
	if (!ok) {
		fprintf(stderr, "trainscope-collect: cannot write %s: %s\n", d->state, strerror(errno));
		unlink(tmp);
	}
	free(tmp);
	return ok ? 0 : -1;
}

/*
 * Add d's newest entry to the state file: one line appended and fsync'd, not
 * the whole file rewritten (that made a backlog of n files write n^2/2 lines,
 * on the thread that starts the next file). A line cut short by a crash is
 * skipped by state_load(), and watch_add() rewrites the file at the next
 * start; when the file cannot be opened (removed meanwhile) it is rewritten.
 */
static int state_append(const struct watch_dir *d)
{
	const struct watch_done *e = &d->done[d->ndone - 1];
	char *line = NULL;
	int fd, n, ok;

	if ((fd = open(d->state, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
		return state_save(d);
	n = asprintf(&line, "%lld %lld %d %s %s\n", e->size, e->mtime_ns, e->rank, e->run, e->name);
	ok = n > 0 && write(fd, line, (size_t)n) == n && fsync(fd) == 0;
	if (!ok)
		fprintf(stderr, "trainscope-collect: cannot write %s: %s\n", d->state,
			n > 0 ? strerror(errno) : "out of memory");
	close(fd);
	free(n > 0 ? line : NULL);
	return ok ? 0 : -1;
}

/*
 * Read the state file; keep only entries whose file is still there as that
 * version (the others can never match again), so the file stays as small as
 * the folder.
 */
static int state_load(struct watch_dir *d)
{
	FILE *f = fopen(d->state, "r");
	char line[1024], run[129], *path;
	long long size, mtime;
	int rank, n, rc = 0;
	struct stat st;

	if (!f)
		return errno == ENOENT ? 0 : -1;
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (line[0] == '#' || len == 0 || line[len - 1] != '\n')
			continue;	/* a comment, or a line cut short: ignore it */
		line[len - 1] = 0;
		n = 0;
		if (sscanf(line, "%lld %lld %d %128s %n", &size, &mtime, &rank, run, &n) != 4 || n == 0 ||
		    !eligible(line + n) || asprintf(&path, "%s/%s", d->path, line + n) < 0)
			continue;
		if (stat(path, &st) == 0 && st.st_size == size && mtime_ns(&st) == mtime)
			rc = done_add(d, size, mtime, rank, run, line + n);
		free(path);
	}
	fclose(f);
	return rc;
}

static int enqueue(struct watch *w, size_t dir, const char *name, int from_scan)
{
	struct watch_item *q;
	size_t i;

	for (i = 0; i < w->nqueue; i++)
		if (w->queue[i].dir == dir && !strcmp(w->queue[i].name, name)) {
			/* renamed into the folder: finished, no need to wait for it to settle */
			if (!from_scan)
				w->queue[i].from_scan = 0;
			return 0;
		}
	if (!(q = realloc(w->queue, (w->nqueue + 1) * sizeof(*q))))
		return -1;
	w->queue = q;
	q[w->nqueue] = (struct watch_item){ dir, strdup(name), from_scan, 0 };
	if (!q[w->nqueue].name)
		return -1;
	w->nqueue++;
	return 0;
}

static void dequeue(struct watch *w, size_t i)
{
	free(w->queue[i].name);
	memmove(&w->queue[i], &w->queue[i + 1], (w->nqueue - i - 1) * sizeof(*w->queue));
	w->nqueue--;
}

/* Queue every eligible file of the folder, in name order. */
static int scan(struct watch *w, size_t dir)
{
	struct dirent **names;
	int n, i, rc = 0;

	if ((n = scandir(w->dirs[dir].path, &names, NULL, alphasort)) < 0) {
		fprintf(stderr, "trainscope-collect: %s: %s\n", w->dirs[dir].path, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (rc == 0 && eligible(names[i]->d_name))
			rc = enqueue(w, dir, names[i]->d_name, 1);
		free(names[i]);
	}
	free(names);
	return rc;
}

int watch_init(struct watch *w, const struct client *c, int spool)
{
	memset(w, 0, sizeof(*w));
	w->c = c;
	w->spool = spool;
	w->settle_ms = spool ? 0 : 1000;
	if ((w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		fprintf(stderr, "trainscope-collect: inotify: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

void watch_release(struct watch *w)
{
	size_t i;

	for (i = 0; i < w->ndirs; i++) {
		free(w->dirs[i].path);
		free(w->dirs[i].state);
		done_free(&w->dirs[i]);
	}
	free(w->dirs);
	while (w->nqueue)
		dequeue(w, w->nqueue - 1);
	free(w->queue);
	if (w->ifd >= 0)
		close(w->ifd);
	w->ifd = -1;
}

/* FNV-1a of a folder's real path: its state file's name under --state */
static uint64_t path_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

int watch_add(struct watch *w, const char *dir, const char *state_dir)
{
	struct watch_dir *d;
	char real[PATH_MAX];
	int rc;

	if (!realpath(dir, real)) {
		fprintf(stderr, "trainscope-collect: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	if (!(d = realloc(w->dirs, (w->ndirs + 1) * sizeof(*d))))
		return -1;
	w->dirs = d;
	d = &w->dirs[w->ndirs];
	memset(d, 0, sizeof(*d));
	if (!(d->path = strdup(real)))
		return -1;
	w->ndirs++;
	if (!w->spool) {
		rc = state_dir ? asprintf(&d->state, "%s/watch-%016llx.state", state_dir,
					  (unsigned long long)path_hash(real))
			       : asprintf(&d->state, "%s/" STATE_NAME, real);
		if (rc < 0) {
			d->state = NULL;
			return -1;
		}
		if (state_dir && mkdir(state_dir, 0700) && errno != EEXIST) {
			fprintf(stderr, "trainscope-collect: %s: %s\n", state_dir, strerror(errno));
			return -1;
		}
		if (state_load(d)) {
			fprintf(stderr, "trainscope-collect: cannot read %s: %s\n", d->state, strerror(errno));
			return -1;
		}
		/* written back at once: pruned, and a folder we cannot write to is found now, not after a file */
		if (state_save(d))
			return -1;
	}
	d->wd = inotify_add_watch(w->ifd, real, IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR);
	if (d->wd < 0) {
		fprintf(stderr, "trainscope-collect: watch %s: %s\n", real, strerror(errno));
		return -1;
	}
	return scan(w, w->ndirs - 1);
}

int watch_read_events(struct watch *w)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	const struct inotify_event *ev;
	ssize_t n;
	size_t i;
	char *p;

	while ((n = read(w->ifd, buf, sizeof(buf))) > 0) {
		for (p = buf; p < buf + n; p += sizeof(*ev) + ev->len) {
			ev = (const struct inotify_event *)p;
			if (ev->mask & IN_Q_OVERFLOW) {
				/* events were lost: the folders say what is there */
				for (i = 0; i < w->ndirs; i++)
					if (scan(w, i))
						return -1;
				continue;
			}
			for (i = 0; i < w->ndirs && w->dirs[i].wd != ev->wd; i++)
				;
			if (i == w->ndirs)
				continue;
			if (ev->mask & IN_IGNORED) {
				fprintf(stderr, "trainscope-collect: %s is gone\n", w->dirs[i].path);
				w->fatal = CLIENT_EXIT_LOCAL;
				return -1;
			}
			/* closed after writing may be one append of several: it settles like a scanned one */
			if (ev->len && eligible(ev->name) && enqueue(w, i, ev->name, !(ev->mask & IN_MOVED_TO)))
				return -1;
		}
	}
	if (n < 0 && errno != EAGAIN && errno != EINTR) {
		fprintf(stderr, "trainscope-collect: inotify: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int cancelled(const struct watch *w)
{
	struct pollfd p = { .fd = w->c->cancel_fd, .events = POLLIN };

	return w->c->cancel_fd >= 0 && poll(&p, 1, 0) > 0;
}

/*
 * Record a file as shipped (keep mode), or delete it (spool mode; kept: the
 * server has the bytes). A spool file the server did not keep stays, and is
 * remembered so as not to be sent again.
 */
static void record_item(struct watch *w, struct watch_dir *d, const char *name, const char *path,
			const struct stat *st, int kept)
{
	if (w->spool && kept) {
		if (unlink(path) == 0)
			return;
		fprintf(stderr, "trainscope-collect: cannot delete %s: %s\n", path, strerror(errno));
	}
	if (done_add(d, st->st_size, mtime_ns(st), w->c->rank, w->c->run, name) ||
	    (!w->spool && state_append(d)))
		w->fatal = CLIENT_EXIT_LOCAL;
}

/* A due file, opened and checked, to upload (maybe beside another) and then record. */
struct ship_job {
	const struct client *c;
	size_t i;		/* its queue index */
	const char *name;	/* the queue item's */
	char *path;
	int fd;
	struct stat st;
	struct client_resp r;
	char capture[72];	/* "" or the capture whose chunk it is */
};

static void job_release(struct ship_job *j)
{
	if (j->fd >= 0)
		close(j->fd);
	free(j->path);
	j->fd = -1;
	j->path = NULL;
}

/*
 * Look at queue item i: 1 when it is done with (dequeue it), 0 when it
 * waits, 2 when j holds it ready to upload, -1 to stop shipping.
 */
static int ship_prepare(struct watch *w, size_t i, struct ship_job *j)
{
	struct watch_item *it = &w->queue[i];
	struct watch_dir *d = &w->dirs[it->dir];
	struct stat st, fst;
	struct timespec now;
	long long age_ms, settle_ms = w->settle_ms && is_text(it->name) ? TEXT_SETTLE_MS : w->settle_ms;
	int rc = 1;

	*j = (struct ship_job){ .c = w->c, .i = i, .name = it->name, .fd = -1 };
	if (asprintf(&j->path, "%s/%s", d->path, it->name) < 0) {
		j->path = NULL;
		w->fatal = CLIENT_EXIT_LOCAL;
		return -1;
	}
	if (lstat(j->path, &st))
		goto out;	/* gone, or renamed away */
	if (S_ISLNK(st.st_mode)) {
		fprintf(stderr, "trainscope-collect: skipping %s: a symbolic link (never followed)\n", j->path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || is_done(w, d, it->name, &st))
		goto out;	/* not a file, or shipped as this very version */
	/* opened without following a link, and the very file lstat saw (no swap in between) */
	if ((j->fd = open(j->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0 || fstat(j->fd, &fst) ||
	    fst.st_dev != st.st_dev || fst.st_ino != st.st_ino) {
		if (j->fd < 0 && errno == ELOOP) {
			fprintf(stderr, "trainscope-collect: skipping %s: a symbolic link (never followed)\n",
				j->path);
		} else if (j->fd < 0 && errno != ENOENT) {
			/* named and counted: it was once skipped without a word (issue 50) */
			fprintf(stderr, "trainscope-collect: cannot read %s: %s\n", j->path, strerror(errno));
			w->unreadable++;
		}
		goto out;
	}
	j->st = fst;
	if (w->capture_id[0]) {
		char needle[sizeof(w->capture_id) + 4];
		snprintf(needle, sizeof(needle), "-c%s.", w->capture_id);
		if (strstr(it->name, needle))
			snprintf(j->capture, sizeof(j->capture), "%s", w->capture_id);
	}
	clock_gettime(CLOCK_REALTIME, &now);
	age_ms = ((long long)now.tv_sec * 1000000000LL + now.tv_nsec - mtime_ns(&fst)) / 1000000;
	if (it->from_scan && (age_ms < settle_ms ||
			      (age_ms < INCOMPLETE_MS && !looks_whole(j->fd, it->name, fst.st_size)))) {
		it->not_before = watch_now_ms() + (age_ms < settle_ms ? settle_ms - age_ms : w->settle_ms);
		rc = 0;
		goto out;
	}
	return 2;
out:
	job_release(j);
	return rc;
}

/* Upload a prepared job from the descriptor opened there, not the name again; a thread of its own or not. */
static void *ship_upload(void *arg)
{
	struct ship_job *j = arg;
	char fdpath[64];

	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", j->fd);
	if (j->capture[0])
		upload_file_capture(j->c, fdpath, j->name, j->capture, &j->st, &j->r);
	else
		upload_file(j->c, fdpath, j->name, 0, NULL, 0, &j->st, &j->r);
	return NULL;
}

/*
 * Say and record an uploaded job's answer: 1 when it is done with, 0 when it
 * stays queued (a transient failure: the caller schedules the retry), -1 to
 * stop shipping (401, 403). The answer stays in j->r.
 */
static int ship_finish(struct watch *w, struct ship_job *j)
{
	struct watch_dir *d = &w->dirs[w->queue[j->i].dir];
	int kept;

	switch (j->r.outcome) {
	case CLIENT_OK:
		upload_report(j->path, &j->r);
		w->shipped++;
		w->shipped_bytes += j->st.st_size;
		record_item(w, d, j->name, j->path, &j->st, 1);
		return 1;
	case CLIENT_REJECTED:
		kept = upload_report(j->path, &j->r);
		if (upload_fatal(&j->r)) {
			w->fatal = CLIENT_EXIT_REJECTED;
			snprintf(w->last_error, sizeof(w->last_error), "%.511s", j->r.error);
			return -1;
		}
		w->rejected++;
		record_item(w, d, j->name, j->path, &j->st, kept);
		return 1;
	case CLIENT_TRANSIENT:
		return 0;
	case CLIENT_FAILED:
		/* unreadable, or gone between stat and open: nothing a retry would change */
		if (access(j->path, F_OK) == 0) {
			client_print_error(j->path, &j->r);
			w->unreadable++;
		}
		return 1;
	}
	return 1;
}

const char *watch_bytes(long long n, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	int u = -1;

	while (v >= 1024 && u < 3)
		v /= 1024, u++;
	if (u < 0)
		snprintf(buf, size, "%lld bytes", n);
	else
		snprintf(buf, size, "%lld bytes, %.1f %s", n, v, units[u]);
	return buf;
}

/*
 * One line on stderr when watch ends: what it shipped (and its bytes),
 * rejected and left, and the run's page; or that it found nothing.
 */
static void watch_summary(const struct watch *w, const char *how)
{
	char bytes[64], unread[48] = "";

	if (!w->shipped && !w->rejected && !w->nqueue && !w->unreadable) {
		fprintf(stderr, "trainscope-collect: %s: shipped nothing (no .json, .json.gz, .pickle, .pkl, .txt or .csv"
			" file that was not shipped before)\n", how);
		return;
	}
	if (w->unreadable)
		snprintf(unread, sizeof(unread), ", %u unreadable (named above)", w->unreadable);
	fprintf(stderr, "trainscope-collect: %s: %u file(s) shipped (%s), %u rejected%s, %zu left waiting%s; see %s/runs/%s\n",
		how, w->shipped, watch_bytes(w->shipped_bytes, bytes, sizeof(bytes)), w->rejected, unread, w->nqueue,
		w->nqueue ? " (the next start ships them)" : "", w->c->server, w->c->run);
}

/* A job in flight on a thread of its own, or run here when no thread is to be had. */
struct ship_slot {
	struct ship_job j;
	pthread_t th;
	int busy, done, threaded;
	pthread_mutex_t *mu;
	pthread_cond_t *cv;
};

static void *ship_thread(void *arg)
{
	struct ship_slot *s = arg;

	ship_upload(&s->j);
	pthread_mutex_lock(s->mu);
	s->done = 1;
	pthread_cond_signal(s->cv);
	pthread_mutex_unlock(s->mu);
	return NULL;
}

/* A file that met a transient failure: it stays queued. */
struct ship_fail {
	const char *name;	/* the queue item's */
	char error[sizeof(((struct client_resp *)0)->error)];
};

/*
 * A transient failure pauses shipping once the files in flight have
 * finished: an answer among them ends the run of failures before, as one
 * file at a time did, then one failure is counted whichever of them met it
 * (the backoff grows once). Says when each failed file goes again.
 */
static void ship_pause(struct watch *w, const struct ship_fail *failed, size_t nfailed, int answered)
{
	if (answered)
		w->failures = 0;
	w->failures++;
	w->retry_at = watch_now_ms() + client_backoff_ms(w->c, w->failures);
	w->transient += (unsigned)nfailed;
	for (size_t k = 0; k < nfailed; k++) {
		snprintf(w->last_error, sizeof(w->last_error), "%.511s", failed[k].error);
		fprintf(stderr, "trainscope-collect: %s: %s; trying again in %lld ms\n", failed[k].name,
			failed[k].error, w->retry_at - watch_now_ms());
	}
}

size_t watch_ship(struct watch *w)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	struct ship_slot slot[WATCH_IN_FLIGHT];
	struct ship_fail failed[WATCH_IN_FLIGHT];
	size_t i = 0, k, m, busy = 0, nfailed = 0;
	long long now = watch_now_ms();
	int stop = 0, answered = 0, rc;

	if (w->failures && now < w->retry_at)
		return w->nqueue;
	memset(slot, 0, sizeof(slot));
	for (k = 0; k < WATCH_IN_FLIGHT; k++) {
		slot[k].mu = &mu;
		slot[k].cv = &cv;
	}
	for (;;) {
		/*
		 * The next due files, in queue order, as slots free up: each file in
		 * flight is below the cursor i, so dequeuing at i leaves their indices.
		 */
		while (!stop && !w->fatal && busy < WATCH_IN_FLIGHT && i < w->nqueue) {
			if (w->queue[i].not_before > now) {
				i++;
				continue;
			}
			if (cancelled(w)) {
				stop = 1;
				break;
			}
			for (k = 0; slot[k].busy; k++)
				;
			switch (ship_prepare(w, i, &slot[k].j)) {
			case 2:
				slot[k].busy = 1;
				slot[k].done = 0;
				slot[k].threaded = pthread_create(&slot[k].th, NULL, ship_thread, &slot[k]) == 0;
				if (!slot[k].threaded) {	/* no thread to be had: here, one at a time */
					ship_upload(&slot[k].j);
					slot[k].done = 1;
				}
				busy++;
				i++;
				break;
			case 1:
				dequeue(w, i);
				break;
			case 0:
				i++;
				break;
			default:
				stop = 1;
			}
		}
		if (!busy)
			break;
		/* the first file in flight to be answered */
		pthread_mutex_lock(&mu);
		for (;;) {
			for (k = 0; k < WATCH_IN_FLIGHT && !(slot[k].busy && slot[k].done); k++)
				;
			if (k < WATCH_IN_FLIGHT)
				break;
			pthread_cond_wait(&cv, &mu);
		}
		pthread_mutex_unlock(&mu);
		if (slot[k].threaded)
			pthread_join(slot[k].th, NULL);
		slot[k].busy = 0;
		busy--;
		rc = ship_finish(w, &slot[k].j);
		/* an answer ends a run of failures, as it did one file at a time (an unreadable file is none) */
		answered |= slot[k].j.r.outcome == CLIENT_OK || slot[k].j.r.outcome == CLIENT_REJECTED;
		if (rc < 0)
			stop = 1;
		if (rc == 0) {
			/* transient: it stays queued, its answer kept for ship_pause(); no file starts now */
			stop = 1;
			failed[nfailed].name = slot[k].j.name;
			snprintf(failed[nfailed].error, sizeof(failed[nfailed].error), "%s", slot[k].j.r.error);
			nfailed++;
		}
		client_resp_release(&slot[k].j.r);
		if (rc > 0) {
			size_t gone = slot[k].j.i;
			dequeue(w, gone);
			for (m = 0; m < WATCH_IN_FLIGHT; m++)
				if (slot[m].busy && slot[m].j.i > gone)
					slot[m].j.i--;
			if (i > gone)
				i--;
		}
		job_release(&slot[k].j);
		if (!nfailed && answered) {
			w->failures = 0;
			answered = 0;
		}
		now = watch_now_ms();
	}
	if (nfailed)
		ship_pause(w, failed, nfailed, answered);
	return w->nqueue;
}

size_t watch_queued_with(const struct watch *w, const char *needle)
{
	size_t i, n = 0;

	for (i = 0; i < w->nqueue; i++)
		n += strstr(w->queue[i].name, needle) != NULL;
	return n;
}

long watch_timeout_ms(const struct watch *w)
{
	long long now = watch_now_ms(), t = -1;
	size_t i;

	if (w->fatal || !w->nqueue)
		return -1;
	if (w->failures)
		t = w->retry_at;
	else
		for (i = 0; i < w->nqueue; i++)
			if (t < 0 || w->queue[i].not_before < t)
				t = w->queue[i].not_before;
	return t <= now ? 0 : (long)(t - now);
}

static const char watch_help[] =
	"usage: trainscope-collect watch [--server URL] [--run NAME] [--rank R] [--once]\n"
	"                                [--state DIR] [--captures] DIR...\n"
	"\n"
	"Ships every finished file in each DIR as an artifact of the run and rank, once:\n"
	"those there at start that were not shipped before, then each one written and\n"
	"closed, or renamed into DIR (as tensorboard_trace_handler does), found with\n"
	"inotify. Names ending in .json, .json.gz, .pickle or .pkl are shipped, and .txt\n"
	"and .csv ones (Lightning profiler reports, key_averages tables, folded stacks,\n"
	"nvidia-smi logs) once quiet for 30 s (a log appended to ships when it stops);\n"
	"hidden names and .tmp/.part ones are not. The server tells the formats apart:\n"
	"a file it takes for none (415) is said and not sent again, unless it changes.\n"
	"What was shipped is kept in DIR/" STATE_NAME " (or --state DIR), so\n"
	"a restart ships only what is new. While the server is away, files wait and go,\n"
	"in order, when it is back; two at a time when more than one waits. SIGINT or\n"
	"SIGTERM stops it after the files in flight, with exit 0; a 401 or 403, exit 1.\n"
	"\n"
	"  --once         ship what is there now and exit (retried as `upload` is)\n"
	"  --state DIR    keep the state files in DIR instead of in each watched folder\n"
	"  --captures     take this rank's on-demand captures (env TRAINSCOPE_CAPTURES=1)\n";

int watch_main(int argc, char **argv)
{
	static const struct option opts[] = {
		COLLECT_COMMON_OPTIONS,
		{ "once", no_argument, NULL, 'o' },
		{ "state", required_argument, NULL, 't' },
		{ "captures", no_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	const char *state_dir = NULL, *env_cap = getenv("TRAINSCOPE_CAPTURES");
	struct capture cap;
	int captures = env_cap && !strcmp(env_cap, "1"), capturing = 0;
	struct client c;
	struct watch w = { .ifd = -1 };
	sigset_t sigs;
	int opt, i, once = 0, sfd = -1, rc = CLIENT_EXIT_LOCAL;

	if (client_init(&c))
		return CLIENT_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s%s", watch_help, collect_common_help);
			rc = CLIENT_EXIT_OK;
			goto out;
		} else if (opt == 'o') {
			once = 1;
		} else if (opt == 't') {
			state_dir = optarg;
		} else if (opt == 'C') {
			captures = 1;
		} else if (collect_common_option(&c, opt, optarg)) {
			rc = CLIENT_EXIT_USAGE;
			goto out;
		}
	}
	if (optind == argc || collect_need_run(&c)) {
		if (optind == argc)
			fprintf(stderr, "%s", watch_help);
		rc = CLIENT_EXIT_USAGE;
		goto out;
	}
	/* signals become readable events: the file in flight finishes first */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) || (sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		fprintf(stderr, "trainscope-collect: signalfd: %s\n", strerror(errno));
		goto out;
	}
	c.cancel_fd = sfd;
	if (watch_init(&w, &c, 0))
		goto out;
	for (i = optind; i < argc; i++)
		if (watch_add(&w, argv[i], state_dir))
			goto out;
	fprintf(stderr, "trainscope-collect: %s %d folder(s) for run %s rank %d on %s\n",
		once ? "shipping" : "watching", argc - optind, c.run, c.rank, c.server);
	/* the processes watch ships for are not traced by our library: the Kineto daemon backend carries captures out */
	if (captures && !once &&
	    capture_init(&cap, &c, capture_other_backend, "no capture backend for processes our library does not trace",
			 argv[optind]))
		goto out;
	capturing = captures && !once;
	for (;;) {
		struct pollfd p[4] = { { .fd = sfd, .events = POLLIN }, { .fd = w.ifd, .events = POLLIN },
				       { .fd = capturing ? capture_fd(&cap) : -1, .events = POLLIN },
				       { .fd = capturing ? capture_backend_fd(&cap) : -1, .events = POLLIN } };
		long timeout, ct;

		watch_ship(&w);
		if (capturing)
			capture_step(&cap, &w);
		if (w.fatal || (once && !w.nqueue))
			break;
		if (once && c.max_attempts && w.failures >= c.max_attempts) {
			fprintf(stderr, "trainscope-collect: giving up after %d attempts: %s\n", w.failures,
				w.last_error);
			rc = CLIENT_EXIT_UNREACHABLE;
			goto out;
		}
		timeout = watch_timeout_ms(&w);
		ct = capturing ? capture_timeout_ms(&cap) : -1;
		if (ct >= 0 && (timeout < 0 || ct < timeout))
			timeout = ct;
		if (poll(p, once ? 1 : 4, (int)timeout) < 0 && errno != EINTR) {
			fprintf(stderr, "trainscope-collect: poll: %s\n", strerror(errno));
			goto out;
		}
		if (p[0].revents) {
			/* SIGINT or SIGTERM: stop between files; rejections were said as they came */
			rc = w.fatal ? w.fatal : CLIENT_EXIT_OK;
			watch_summary(&w, "stopped by a signal");
			goto out;
		}
		if (!once && p[1].revents && watch_read_events(&w)) {
			rc = w.fatal ? w.fatal : CLIENT_EXIT_LOCAL;
			goto out;
		}
	}
	rc = w.fatal ? w.fatal : w.rejected ? CLIENT_EXIT_REJECTED : CLIENT_EXIT_OK;
	if (w.fatal == CLIENT_EXIT_REJECTED)
		fprintf(stderr, "trainscope-collect: stopped: the server refuses this client (%s)\n", w.last_error);
	else
		watch_summary(&w, once ? "done" : "stopped");
out:
	if (capturing)
		capture_release(&cap);
	watch_release(&w);
	if (sfd >= 0)
		close(sfd);
	client_release(&c);
	return rc;
}
