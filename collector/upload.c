/*
 * upload.c: see upload.h. The body is produced by curl's read callback from
 * a 64 KiB window of the file: a gzip file (magic 1f 8b) goes as it is, with
 * its length; anything else goes through zlib deflate in the same callback,
 * chunked. Memory stays constant whatever the file's size, and a retry
 * starts again from the first byte (rewind: seek to 0, deflateReset). The
 * gzip header has no time or name in it, so the same file always gives the
 * same bytes, and the server's idempotence (same bytes, same artifact) holds
 * for retries.
 *
 * The upload command runs UPLOAD_IN_FLIGHT workers, each taking the next
 * file, and says each answer in the files' order as it comes.
 */
#define _GNU_SOURCE	/* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "collect.h"
#include "upload.h"

struct source {
	int fd;
	int plain;		/* not gzip: deflate on the way */
	int eof, zdone;
	z_stream zs;
	off_t size, consumed;	/* file bytes read so far */
	struct upload_bar *bar;	/* NULL: none */
	int slot;		/* in bar */
	char error[256];
	unsigned char in[65536];
};

static size_t read_plain(struct source *s, char *buf, size_t n)
{
	ssize_t r = read(s->fd, buf, n);

	if (r < 0) {
		snprintf(s->error, sizeof(s->error), "read: %s", strerror(errno));
		return CURL_READFUNC_ABORT;
	}
	s->consumed += r;
	return (size_t)r;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *payload)
{
	struct source *s = payload;
	size_t n = size * nitems;

	if (!s->plain)
		return read_plain(s, buf, n);
	s->zs.next_out = (Bytef *)buf;
	s->zs.avail_out = (uInt)n;
	while (s->zs.avail_out > 0 && !s->zdone) {
		if (s->zs.avail_in == 0 && !s->eof) {
			ssize_t r = read(s->fd, s->in, sizeof(s->in));
			if (r < 0) {
				snprintf(s->error, sizeof(s->error), "read: %s", strerror(errno));
				return CURL_READFUNC_ABORT;
			}
			s->eof = r == 0;
			s->consumed += r;
			s->zs.next_in = s->in;
			s->zs.avail_in = (uInt)r;
		}
		int zr = deflate(&s->zs, s->eof ? Z_FINISH : Z_NO_FLUSH);
		if (zr == Z_STREAM_END)
			s->zdone = 1;
		else if (zr != Z_OK && zr != Z_BUF_ERROR) {
			snprintf(s->error, sizeof(s->error), "deflate: %s", s->zs.msg ? s->zs.msg : "failed");
			return CURL_READFUNC_ABORT;
		}
	}
	return n - s->zs.avail_out;
}

static int on_rewind(void *payload)
{
	struct source *s = payload;

	if (lseek(s->fd, 0, SEEK_SET) != 0)
		return -1;
	s->consumed = 0;
	s->eof = s->zdone = 0;
	return s->plain && deflateReset(&s->zs) != Z_OK ? -1 : 0;
}

static void human(char *out, size_t n, double bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int u = 0;

	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(out, n, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

/* seconds as "42s", "3m05s" or "1h02m" */
static void eta(char *out, size_t n, double secs)
{
	long s = secs > 359999 ? 359999 : (long)(secs + 0.5);

	if (s < 60)
		snprintf(out, n, "%lds", s);
	else if (s < 3600)
		snprintf(out, n, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(out, n, "%ldh%02ldm", s / 3600, s % 3600 / 60);
}

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Draw the bar (under its lock), at most every 0.1 s. */
static void bar_draw(struct upload_bar *bar)
{
	char a[32], b[32], label[64], rate[48] = "", left[48] = "";
	double now = mono_now(), secs;
	off_t consumed = bar->done;

	if (!bar->started_at)
		bar->started_at = now;
	if (now - bar->drawn_at < 0.1)
		return;
	bar->drawn_at = now;
	for (int k = 0; k < UPLOAD_IN_FLIGHT; k++)
		consumed += bar->slot[k];
	human(a, sizeof(a), (double)consumed);
	human(b, sizeof(b), (double)bar->size);
	if (bar->label)
		snprintf(label, sizeof(label), "%.40s", bar->label);
	else
		snprintf(label, sizeof(label), "%zu/%zu files", bar->finished, bar->nfiles);
	/* the rate of the files' bytes (read from disk, before gzip), once there is a second to go by */
	secs = now - bar->started_at;
	if (secs >= 1 && consumed > 0) {
		double bps = (double)consumed / secs;
		human(rate, sizeof(rate) - 2, bps);
		strcat(rate, "/s");
		if (consumed < bar->size) {
			char e[24];
			eta(e, sizeof(e), (double)(bar->size - consumed) / bps);
			snprintf(left, sizeof(left), "  ETA %s", e);
		}
	}
	/* after the last byte the server is still parsing: say so rather than sit at 100% */
	fprintf(stderr, "\r\033[K%s  %s / %s  %3d%%%s%s%s", label, a, b,
		bar->size ? (int)(100 * consumed / bar->size) : 100, *rate ? "  " : "", rate,
		consumed >= bar->size ? "  (server ingesting)" : left);
}

static int on_progress(curl_off_t sent, void *payload)
{
	struct source *s = payload;

	(void)sent;
	pthread_mutex_lock(&s->bar->mu);
	s->bar->slot[s->slot] = s->consumed;
	bar_draw(s->bar);
	pthread_mutex_unlock(&s->bar->mu);
	return 0;
}

/* How much of a trace is read for its distributedInfo (Kineto writes it before traceEvents). */
#define RANK_HEAD (1 << 20)

/*
 * The rank a trace names in its top-level "distributedInfo" object (its
 * "rank" key, not "ranks" of a process group), read from the file's first
 * RANK_HEAD bytes, inflated when gzip'd: -1 when it names none (a report, a
 * snapshot, a single-process trace).
 */
static int trace_rank(const char *path)
{
	gzFile f = gzopen(path, "rb");	/* plain files are read as they are */
	char *buf = malloc(RANK_HEAD + 1), *p;
	int n, depth = 0, rank = -1;

	if (!f || !buf) {
		if (f)
			gzclose(f);
		free(buf);
		return -1;
	}
	n = gzread(f, buf, RANK_HEAD);
	gzclose(f);
	buf[n > 0 ? n : 0] = 0;
	p = strstr(buf, "\"distributedInfo\"");
	if (p)
		p = strchr(p, '{');
	for (; p && *p && rank < 0; p++) {
		if (*p == '"') {	/* a string: a key at depth 1 may be "rank" */
			char *e = p + 1;
			while (*e && *e != '"')
				e += e[0] == '\\' && e[1] ? 2 : 1;
			if (!*e)
				break;
			if (depth == 1 && e - p == 5 && !memcmp(p + 1, "rank", 4)) {
				char *v = e + 1, *end;
				while (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t' || *v == ':')
					v++;
				long r = strtol(v, &end, 10);
				if (end > v && r >= 0 && r <= 65535)
					rank = (int)r;
			}
			p = e;
		} else if (*p == '{' || *p == '[') {
			depth++;
		} else if (*p == '}' || *p == ']') {
			if (--depth == 0)
				break;
		}
	}
	free(buf);
	return rank;
}

static enum client_outcome upload_one(const struct client *c, const char *path, const char *name, int retry,
				      struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out,
				      int rank_given, int force_rank, const char *capture);

enum client_outcome upload_file(const struct client *c, const char *path, const char *name, int retry,
				struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out)
{
	return upload_one(c, path, name, retry, bar, slot, st_out, out, 1, 1, NULL);
}

enum client_outcome upload_file_rank(const struct client *c, const char *path, const char *name, int retry,
				     struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out,
				     int rank_given, int force_rank)
{
	return upload_one(c, path, name, retry, bar, slot, st_out, out, rank_given, force_rank, NULL);
}

enum client_outcome upload_file_capture(const struct client *c, const char *path, const char *name,
					const char *capture, struct stat *st_out, struct client_resp *out)
{
	return upload_one(c, path, name, 0, NULL, 0, st_out, out, 1, 1, capture);
}

static enum client_outcome upload_one(const struct client *c, const char *path, const char *name, int retry,
				      struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out,
				      int rank_given, int force_rank, const char *capture)
{
	struct source *s = calloc(1, sizeof(*s));
	struct client_body body = { on_read, on_rewind, -1, s, NULL, NULL };
	unsigned char magic[2];
	char *esc = NULL, *url = NULL;
	struct stat st;

	memset(out, 0, sizeof(*out));
	out->outcome = CLIENT_FAILED;
	if (!s) {
		snprintf(out->error, sizeof(out->error), "out of memory");
		return out->outcome;
	}
	if ((s->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(s->fd, &st)) {
		snprintf(out->error, sizeof(out->error), "%s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(out->error, sizeof(out->error), "not a regular file");
		goto out;
	}
	s->size = st.st_size;
	s->plain = !(pread(s->fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b);
	if (s->plain) {
		/*
		 * gzip'd in transit only (Content-Encoding): the server keeps and
		 * hashes the file as it is, so its download and sha256 are the file's.
		 * Fastest level: on a training node the CPU is the job's; JSON still shrinks 5-10x.
		 */
		body.encoding = "gzip";
		if (deflateInit2(&s->zs, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			s->plain = 0;	/* nothing to end */
			snprintf(out->error, sizeof(out->error), "out of memory");
			goto out;
		}
	} else {
		body.size = st.st_size;
	}
	if (bar) {
		s->bar = bar;
		s->slot = slot;
		body.progress = on_progress;
	}
	if (!rank_given || !force_rank) {
		int tr = trace_rank(path);
		if (rank_given && tr >= 0 && tr != c->rank) {
			snprintf(out->error, sizeof(out->error),
				 "the trace is rank %d (its distributedInfo) but the rank given is %d; "
				 "--force-rank stores it as rank %d",
				 tr, c->rank, c->rank);
			goto out;
		}
	}
	/* no rank given: none sent, and the server takes the trace's own (else 0), as it does for any client */
	if (!(esc = curl_easy_escape(NULL, name, 0)) ||
	    (rank_given ? asprintf(&url, "/api/v1/runs/%s/artifacts?rank=%d&name=%s%s%s", c->run, c->rank, esc,
				   capture ? "&capture=" : "", capture ? capture : "")
			: asprintf(&url, "/api/v1/runs/%s/artifacts?name=%s", c->run, esc)) < 0) {
		url = NULL;
		snprintf(out->error, sizeof(out->error), "out of memory");
		goto out;
	}
	if (retry)
		client_request(c, "POST", url, &body, out);
	else
		client_try(c, "POST", url, &body, out);
	if (bar) {
		pthread_mutex_lock(&bar->mu);
		bar->slot[slot] = 0;
		bar->done += st.st_size;
		bar->finished++;
		pthread_mutex_unlock(&bar->mu);
	}
	if (s->error[0])
		snprintf(out->error, sizeof(out->error), "%s", s->error);
	if (st_out)
		*st_out = st;
out:
	if (s->plain)
		deflateEnd(&s->zs);
	if (s->fd >= 0)
		close(s->fd);
	curl_free(esc);
	free(url);
	free(s);
	return out->outcome;
}

int upload_fatal(const struct client_resp *r)
{
	return r->outcome == CLIENT_REJECTED && (r->status == 401 || r->status == 403);
}

int upload_report(const char *file, const struct client_resp *r)
{
	json_t *a = json_object_get(r->json, "artifact");
	const char *status = json_string_value(json_object_get(a, "status"));
	char shown[64];

	if (r->outcome != CLIENT_OK)
		fprintf(stderr, "trainscope-collect: %s: %s\n", file, r->error[0] ? r->error : "failed");
	if (!a || !status)
		return 0;
	client_escape(shown, sizeof(shown), status);	/* the server's word: no escape sequence reaches the terminal */
	printf("%s: artifact %" JSON_INTEGER_FORMAT " %s (%s)\n", file,
	       json_integer_value(json_object_get(a, "id")), shown,
	       r->outcome != CLIENT_OK ? "kept by the server" : r->status == 201 ? "new" : "already there");
	fflush(stdout);
	return 1;
}

static const char upload_help[] =
	"usage: trainscope-collect upload [--server URL] [--run NAME] [--rank R [--force-rank]] FILE...\n"
	"\n"
	"Uploads each FILE (a trace, a memory timeline export, a memory snapshot, a\n"
	"Lightning profiler report, a key_averages table, folded stacks, an nvidia-smi\n"
	"CSV log: the server tells them apart by content) as an artifact of the run and\n"
	"rank named after its file name, streamed from disk and gzip'd on the way unless\n"
	"it is gzip already, two at a time, and prints each artifact's id and status, in\n"
	"the files' order. A progress bar is drawn when stderr is a terminal. After a\n"
	"rejected file (4xx) the next ones are still tried; after 401 or 403, or a server\n"
	"that stays away through the retries, no further file is started.\n"
	"\n"
	"Without --rank (or TRAINSCOPE_RANK, RANK) a trace goes as the rank its\n"
	"distributedInfo names, as the server reads it, and other files as rank 0. A\n"
	"rank given that disagrees with the trace's own is an error for that file,\n"
	"unless --force-rank.\n";

/* The files of one upload command, and where its workers are. */
struct up_pool {
	const struct client *c;
	char **paths;
	struct client_resp *r;		/* per file */
	unsigned char *state;		/* per file: 0 not started, 1 in flight, 2 answered */
	size_t n, next;
	int stop;			/* start no further file */
	struct upload_bar *bar;
	int rank_given;			/* --rank, TRAINSCOPE_RANK or RANK */
	int force_rank;			/* --force-rank */
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

/* A worker and its bar slot. */
struct up_worker {
	struct up_pool *p;
	int slot;
};

static void *up_work(void *arg)
{
	const struct up_worker *wk = arg;
	struct up_pool *p = wk->p;

	for (;;) {
		size_t i;
		pthread_mutex_lock(&p->mu);
		if (p->stop || p->next == p->n) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		i = p->next++;
		p->state[i] = 1;
		pthread_mutex_unlock(&p->mu);
		upload_file_rank(p->c, p->paths[i], base_name(p->paths[i]), 1, p->bar, wk->slot, NULL, &p->r[i],
				 p->rank_given, p->force_rank);
		pthread_mutex_lock(&p->mu);
		p->state[i] = 2;
		/* 401/403 answer every file alike; a server that stays away after the retries too */
		if (upload_fatal(&p->r[i]) || p->r[i].outcome == CLIENT_TRANSIENT)
			p->stop = 1;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
}

/* Say file i's answer (the bar's line cleared first); its exit code folded into rc. */
static void up_report(struct up_pool *p, size_t i, int *rc)
{
	struct client_resp *r = &p->r[i];

	if (p->bar) {
		pthread_mutex_lock(&p->bar->mu);
		fprintf(stderr, "\r\033[K");
		p->bar->drawn_at = 0;	/* drawn again at the next progress */
	}
	switch (r->outcome) {
	case CLIENT_OK:
	case CLIENT_REJECTED:
		upload_report(p->paths[i], r);
		if (r->outcome == CLIENT_REJECTED)
			*rc = CLIENT_EXIT_REJECTED;
		break;
	case CLIENT_TRANSIENT:
		client_print_error(p->paths[i], r);
		*rc = *rc ? *rc : CLIENT_EXIT_UNREACHABLE;
		break;
	case CLIENT_FAILED:
		client_print_error(p->paths[i], r);
		*rc = *rc ? *rc : CLIENT_EXIT_LOCAL;
		break;
	}
	fflush(stdout);
	if (p->bar)
		pthread_mutex_unlock(&p->bar->mu);
}

int upload_main(int argc, char **argv)
{
	static const struct option opts[] = { COLLECT_COMMON_OPTIONS, { "force-rank", no_argument, NULL, 'F' },
					      { NULL, 0, NULL, 0 } };
	const char *env_rank = getenv("TRAINSCOPE_RANK");
	struct client c;
	struct upload_bar bar = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct up_pool p = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	pthread_t th[UPLOAD_IN_FLIGHT];
	struct up_worker wk[UPLOAD_IN_FLIGHT];
	size_t i, nth = 0;
	int opt, rc = CLIENT_EXIT_OK;

	if (client_init(&c))
		return CLIENT_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (opt == 'h') {
			printf("%s%s", upload_help, collect_common_help);
			client_release(&c);
			return CLIENT_EXIT_OK;
		}
		if (opt == 'F') {
			p.force_rank = 1;
			continue;
		}
		if (opt == 'K')
			p.rank_given = 1;
		if (collect_common_option(&c, opt, optarg)) {
			client_release(&c);
			return CLIENT_EXIT_USAGE;
		}
	}
	if ((env_rank && *env_rank) || ((env_rank = getenv("RANK")) && *env_rank))
		p.rank_given = 1;	/* as client_init read it */
	if (p.force_rank && !p.rank_given) {
		fprintf(stderr, "trainscope-collect: --force-rank needs --rank\n");
		client_release(&c);
		return CLIENT_EXIT_USAGE;
	}
	if (optind == argc || collect_need_run(&c)) {
		if (optind == argc)
			fprintf(stderr, "%s", upload_help);
		client_release(&c);
		return CLIENT_EXIT_USAGE;
	}
	c.verbose = 1;
	p.c = &c;
	p.paths = argv + optind;
	p.n = (size_t)(argc - optind);
	p.r = calloc(p.n, sizeof(*p.r));
	p.state = calloc(p.n, 1);
	if (!p.r || !p.state) {
		fprintf(stderr, "trainscope-collect: out of memory\n");
		free(p.r);
		free(p.state);
		client_release(&c);
		return CLIENT_EXIT_LOCAL;
	}
	if (isatty(2)) {
		struct stat st;
		for (i = 0; i < p.n; i++)
			if (stat(p.paths[i], &st) == 0 && S_ISREG(st.st_mode))
				bar.size += st.st_size;
		bar.nfiles = p.n;
		bar.label = p.n == 1 ? base_name(p.paths[0]) : NULL;
		p.bar = &bar;
	}
	for (i = 0; i < UPLOAD_IN_FLIGHT && i < p.n; i++) {
		wk[nth] = (struct up_worker){ &p, (int)nth };
		if (pthread_create(&th[nth], NULL, up_work, &wk[nth]) == 0)
			nth++;
	}
	if (!nth) {
		wk[0] = (struct up_worker){ &p, 0 };
		up_work(&wk[0]);	/* no thread to be had: one file at a time, here */
	}
	/* each answer in the files' order, as soon as it and those before it are in */
	for (i = 0; i < p.n; i++) {
		pthread_mutex_lock(&p.mu);
		while (p.state[i] != 2 && !(p.stop && p.state[i] == 0))
			pthread_cond_wait(&p.cv, &p.mu);
		int answered = p.state[i] == 2;
		pthread_mutex_unlock(&p.mu);
		if (!answered)
			break;	/* not started, and never will be */
		up_report(&p, i, &rc);
		client_resp_release(&p.r[i]);
	}
	for (i = 0; i < nth; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < p.n; i++)	/* those not said, after a stop */
		client_resp_release(&p.r[i]);
	if (p.bar)
		fprintf(stderr, "\r\033[K");
	free(p.r);
	free(p.state);
	client_release(&c);
	return rc;
}
