/*
 * runs.c: records in sorted runs, spilled and merged back (runs.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "analysis/runs.h"

#define MERGE_BUF_BYTES (40u << 10)	/* read at once from each run */
#define MERGE_ALL_BYTES (8u << 20)	/* and from all: many runs read less at once */

static long fail_after = -1;

void spill_fail_after(long n)
{
	fail_after = n;
}

int spill_fail(struct tp_errbuf *err, const char *what)
{
	return tp_fail(err, TP_ERR_IO, "temp_file", "analysis: %s its temporary file: %s", what, strerror(errno));
}

static int spill_create(int *fd, const char *what, struct tp_errbuf *err)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];

	if (*fd >= 0)
		return TP_OK;
	if (fail_after >= 0 && fail_after-- == 0) {
		fail_after = 0;
		errno = ENOSPC;
		return spill_fail(err, "cannot create");
	}
	snprintf(path, sizeof(path), "%s/trainscope-%s-XXXXXX", dir && *dir ? dir : "/tmp", what);
	if ((*fd = mkstemp(path)) < 0)
		return spill_fail(err, "cannot create");
	unlink(path);
	(void)fcntl(*fd, F_SETFD, FD_CLOEXEC);
	return TP_OK;
}

/* Write len bytes at off, or at the file's offset when off < 0; 0 or an errno value. */
static int write_at(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t w = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? errno : EIO;
		p += w;
		len -= (size_t)w;
		if (off >= 0)
			off += w;
	}
	return 0;
}

static int spill_write(int *fd, const char *what, const void *buf, size_t len, off_t off, struct tp_errbuf *err)
{
	int rc;

	if ((rc = spill_create(fd, what, err)))
		return rc;
	if ((rc = write_at(*fd, buf, len, off))) {
		errno = rc;
		return spill_fail(err, "cannot write");
	}
	return TP_OK;
}

int spill_append(int *fd, const char *what, const void *buf, size_t len, struct tp_errbuf *err)
{
	return spill_write(fd, what, buf, len, -1, err);
}

int spill_read(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, p + got, len - got, off + (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		got += (size_t)n;
	}
	return 0;
}

void runs_init(struct runs *r, size_t size, size_t limit, const char *what, runs_less_fn less, runs_sort_fn sort)
{
	*r = (struct runs){ .size = size, .limit = limit ? limit : 1, .what = what, .less = less, .sort = sort, .fd = -1 };
}

static int behind_end(struct runs *r, struct tp_errbuf *err);

void runs_free(struct runs *r)
{
	struct tp_errbuf ignored = { 0 };

	(void)behind_end(r, &ignored);
	tp_free(r->buf);
	tp_free(r->run_n);
	if (r->fd >= 0)
		close(r->fd);
	r->buf = NULL;
	r->run_n = NULL;
	r->fd = -1;
	r->n = r->cap = r->nruns = r->runcap = 0;
	r->end = 0;
}

/* Sort a run, unless it came in order (many do: runtime calls by id, intervals by start). */
static void sort_run(const struct runs *r, char *buf, size_t n)
{
	size_t i;

	for (i = 1; i < n && !r->less(buf + i * r->size, buf + (i - 1) * r->size); i++)
		;
	if (i < n)
		r->sort(buf, n);
}

static void runs_sort(struct runs *r)
{
	sort_run(r, r->buf, r->n);
}

/* Sort the run being filled and append it to the file. */
static int runs_spill(struct runs *r, struct tp_errbuf *err)
{
	int rc;

	runs_sort(r);
	if ((rc = spill_write(&r->fd, r->what, r->buf, r->n * r->size, r->end, err)))
		return rc;
	r->end += (off_t)(r->n * r->size);
	for (size_t i = 0, from = 0; i < r->n; i++)
		if (i + 1 == r->n || (r->split && r->split(r->buf + i * r->size, r->buf + (i + 1) * r->size))) {
			if (tp_grow((void **)&r->run_n, &r->runcap, r->nruns + 1, sizeof(*r->run_n)))
				return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			r->run_n[r->nruns++] = i + 1 - from;
			from = i + 1;
		}
	r->n = 0;
	return TP_OK;
}

/*
 * Runs spilled behind (runs_behind()). The thread sorts and writes the run
 * in hand and allocates nothing (the tests fail allocation N, one thread's);
 * r's run_n and end are the caller's, taken at the hand-over: a run with no
 * split() is one run.
 */
struct runs_behind {
	pthread_t t;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int busy, stop;		/* a run in hand; the thread to end */
	char *job;		/* the run in hand (once written: the buffer the next hand-over fills) */
	size_t jn, jcap;	/* its records, and the room it has */
	off_t joff;
	int werr;		/* errno of its failed write */
};

static void *behind_main(void *arg)
{
	struct runs *r = arg;	/* read here: size, less, sort and fd, which stay as they are */
	struct runs_behind *b = r->bg;

	tp_thread_name("ts-spill");
	pthread_mutex_lock(&b->mu);
	for (;;) {
		while (!b->busy && !b->stop)
			pthread_cond_wait(&b->cv, &b->mu);
		if (!b->busy)
			break;
		pthread_mutex_unlock(&b->mu);
		sort_run(r, b->job, b->jn);
		int e = write_at(r->fd, b->job, b->jn * r->size, b->joff);
		pthread_mutex_lock(&b->mu);
		if (e && !b->werr)
			b->werr = e;
		b->busy = 0;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

int runs_behind(struct runs *r)
{
	if (r->bg || r->split)
		return 0;
	if (!(r->bg = tp_calloc(1, sizeof(*r->bg))))
		return -1;
	pthread_mutex_init(&r->bg->mu, NULL);
	pthread_cond_init(&r->bg->cv, NULL);
	return 0;
}

/* Wait for the run in hand to be written; its write's failure, if it failed. */
static int behind_wait(struct runs *r, struct tp_errbuf *err)
{
	struct runs_behind *b = r->bg;
	int e;

	if (!b || !b->started)
		return TP_OK;
	pthread_mutex_lock(&b->mu);
	while (b->busy)
		pthread_cond_wait(&b->cv, &b->mu);
	e = b->werr;
	pthread_mutex_unlock(&b->mu);
	if (!e)
		return TP_OK;
	errno = e;
	return spill_fail(err, "cannot write");
}

/* Wait, end the thread and free what it had: r spills as runs without it do. */
static int behind_end(struct runs *r, struct tp_errbuf *err)
{
	struct runs_behind *b = r->bg;
	int rc;

	if (!b)
		return TP_OK;
	rc = behind_wait(r, err);
	if (b->started) {
		pthread_mutex_lock(&b->mu);
		b->stop = 1;
		pthread_cond_broadcast(&b->cv);
		pthread_mutex_unlock(&b->mu);
		pthread_join(b->t, NULL);
	}
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	tp_free(b->job);
	tp_free(b);
	r->bg = NULL;
	return rc;
}

/* Hand the full run to the thread (made at the first), and fill its last buffer meanwhile. */
static int spill_behind(struct runs *r, struct tp_errbuf *err)
{
	struct runs_behind *b = r->bg;
	char *next;
	size_t next_cap;
	int rc;

	if ((rc = behind_wait(r, err)) || (rc = spill_create(&r->fd, r->what, err)))
		return rc;
	if (tp_grow((void **)&r->run_n, &r->runcap, r->nruns + 1, sizeof(*r->run_n)))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	if (!b->started) {
		if (pthread_create(&b->t, NULL, behind_main, r))
			return runs_spill(r, err);	/* no thread: as runs without one do */
		b->started = 1;
	}
	next = b->job;
	next_cap = b->jcap;
	pthread_mutex_lock(&b->mu);
	b->job = r->buf;
	b->jn = r->n;
	b->jcap = r->cap;
	b->joff = r->end;
	b->busy = 1;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	r->run_n[r->nruns++] = r->n;
	r->end += (off_t)(r->n * r->size);
	r->buf = next;
	r->cap = next_cap;
	r->n = 0;
	return TP_OK;
}

void *runs_reserve(struct runs *r, size_t k, struct tp_errbuf *err)
{
	if (r->n && r->n + k > r->limit && (r->bg ? spill_behind(r, err) : runs_spill(r, err)))
		return NULL;
	if (tp_grow((void **)&r->buf, &r->cap, r->n + k, r->size)) {
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		return NULL;
	}
	return r->buf + r->n * r->size;
}

void runs_commit(struct runs *r, size_t k)
{
	r->n += k;
}

int runs_add(struct runs *r, const void *rec, struct tp_errbuf *err)
{
	void *p = runs_reserve(r, 1, err);

	if (!p)
		return err->rc;
	memcpy(p, rec, r->size);
	runs_commit(r, 1);
	return TP_OK;
}

int runs_seal(struct runs *r, struct tp_errbuf *err)
{
	int rc;

	if ((rc = behind_end(r, err)))
		return rc;
	if (!r->nruns) {
		runs_sort(r);
		return TP_OK;
	}
	if (r->n && (rc = runs_spill(r, err)))
		return rc;
	tp_free(r->buf);
	r->buf = NULL;
	r->cap = 0;
	return TP_OK;
}

int runs_fork(struct runs *to, const struct runs *r, struct tp_errbuf *err)
{
	int rc;

	/* the run r has in hand written first: waiting changes none of r's records */
	if ((rc = behind_wait((struct runs *)r, err)))
		return rc;
	*to = *r;
	to->bg = NULL;
	to->buf = NULL;
	to->run_n = NULL;
	to->cap = to->runcap = 0;
	to->fd = -1;
	if ((r->n && tp_grow((void **)&to->buf, &to->cap, r->n, r->size)) ||
	    (r->nruns && tp_grow((void **)&to->run_n, &to->runcap, r->nruns, sizeof(*to->run_n)))) {
		runs_free(to);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	if (r->n) {
		/* fresh pages, most of them: faulted in one call rather than one by one in the copy (the
		 * first read after 20 chunks of 2 MiB: 160-610 fewer page faults, 5-8 ms less in three
		 * sittings of four, bench/results/fork_prefault-20261130.txt) */
		tp_prefault(to->buf, r->n * r->size);
		memcpy(to->buf, r->buf, r->n * r->size);
	}
	if (r->nruns)
		memcpy(to->run_n, r->run_n, r->nruns * sizeof(*to->run_n));
	if (r->fd >= 0 && (to->fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		runs_free(to);
		return spill_fail(err, "cannot share");
	}
	return TP_OK;
}

int runs_flush(struct runs *r, size_t keep, struct tp_errbuf *err)
{
	int rc;

	if ((rc = behind_wait(r, err)))
		return rc;
	if (r->n * r->size > keep && (rc = runs_spill(r, err)))
		return rc;
	if (r->cap * r->size > keep) {	/* the room a full run took goes too */
		void *b = r->n ? tp_realloc(r->buf, r->n * r->size) : NULL;
		if (r->n && !b)
			return TP_OK;	/* kept as it is */
		if (!r->n)
			tp_free(r->buf);
		r->buf = b;
		r->cap = r->n;
	}
	return TP_OK;
}

struct rsrc {			/* one run, as the merge reads it */
	char *b;
	size_t i, n;		/* b's records [i, n) are read and not yet merged */
	size_t left;		/* in the file after them */
	off_t off;
};

static size_t merge_recs(const struct runs *r)
{
	size_t m = MERGE_BUF_BYTES / r->size, all = MERGE_ALL_BYTES / r->size / (r->nruns ? r->nruns : 1);

	m = all < m ? all : m;
	return m ? m : 1;
}

static int rsrc_fill(struct rcur *c, struct rsrc *s)
{
	size_t m = merge_recs(c->r), want = s->left < m ? s->left : m;

	if ((c->err = spill_read(c->r->fd, s->b, want * c->r->size, s->off)))
		return -1;
	if (c->r->fix)
		c->r->fix(c->r->fixctx, s->b, want);
	s->off += (off_t)(want * c->r->size);
	s->left -= want;
	s->i = 0;
	s->n = want;
	return 0;
}

static inline const void *rsrc_rec(const struct rcur *c, uint32_t k)
{
	const struct rsrc *s = &c->src[k];

	return s->b + s->i * c->r->size;
}

static void heap_sift(struct rcur *c, size_t i)
{
	runs_less_fn less = c->r->less;

	for (;;) {
		size_t m = i, l = 2 * i + 1, r = l + 1;
		if (l < c->nheap && less(rsrc_rec(c, c->heap[l]), rsrc_rec(c, c->heap[m])))
			m = l;
		if (r < c->nheap && less(rsrc_rec(c, c->heap[r]), rsrc_rec(c, c->heap[m])))
			m = r;
		if (m == i)
			return;
		uint32_t t = c->heap[i];
		c->heap[i] = c->heap[m];
		c->heap[m] = t;
		i = m;
	}
}

void rcur_close(struct rcur *c)
{
	int e = c->err;

	tp_free(c->src);
	tp_free(c->bufs);
	tp_free(c->heap);
	memset(c, 0, sizeof(*c));
	c->err = e;
}

int rcur_open(struct rcur *c, const struct runs *r)
{
	size_t k = r->nruns, m = merge_recs(r), i;
	off_t off = 0;

	memset(c, 0, sizeof(*c));
	c->r = r;
	if (!k)
		return 0;
	c->src = tp_calloc(k, sizeof(*c->src));
	c->bufs = tp_malloc(k * m * r->size);
	c->heap = tp_malloc(k * sizeof(*c->heap));
	if (!c->src || !c->bufs || !c->heap)
		goto fail;
	for (i = 0; i < k; i++) {
		c->src[i] = (struct rsrc){ .b = c->bufs + i * m * r->size, .left = r->run_n[i], .off = off };
		off += (off_t)(r->run_n[i] * r->size);
		if (!r->run_n[i])
			continue;
		if (rsrc_fill(c, &c->src[i]))
			goto fail;
		c->heap[c->nheap++] = (uint32_t)i;
	}
	for (i = c->nheap / 2; i-- > 0;)
		heap_sift(c, i);
	return 0;
fail:
	rcur_close(c);
	return -1;
}

const void *rcur_next(struct rcur *c)
{
	if (!c->r->nruns)
		return c->i < c->r->n ? c->r->buf + c->i++ * c->r->size : NULL;
	if (c->advance) {
		struct rsrc *s = &c->src[c->heap[0]];
		c->advance = 0;
		if (++s->i == s->n && (!s->left || rsrc_fill(c, s))) {
			if (c->err)
				return NULL;
			c->heap[0] = c->heap[--c->nheap];
		}
		if (c->nheap > 1)
			heap_sift(c, 0);
	}
	if (!c->nheap)
		return NULL;
	c->advance = 1;
	return rsrc_rec(c, c->heap[0]);
}
