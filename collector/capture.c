/*
 * capture.c: see capture.h. The thread does the network, the main loop
 * the files: the thread only ever writes one byte to wake[1] and changes
 * state under mu; the backend and the watch are the main loop's alone.
 *
 * A capture's life on this side: IDLE -> (the long poll answers 200: the
 * server marked it taken by this rank) TAKEN -> (capture_step: the backend
 * starts it, or cannot: ended failed) ACTIVE -> (the backend says it ended,
 * and no file of it is queued any more) ENDING -> (the server answered the
 * end, 2xx or 4xx) IDLE.
 */
#define _GNU_SOURCE	/* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture.h"

const struct capture_backend *capture_other_backend = &capture_kineto_backend;

/* ---- the spool backend: our CUPTI library in on-demand mode ---- */

static int spool_start(const struct capture_req *req, const char *dir, char *why, size_t size)
{
	char tmp[4200], final[4200];
	FILE *f;
	int ok;

	snprintf(tmp, sizeof(tmp), "%s/.capture.tmp", dir);
	snprintf(final, sizeof(final), "%s/.capture", dir);
	if (!(f = fopen(tmp, "w"))) {
		snprintf(why, size, "cannot write %s: %s", tmp, strerror(errno));
		return -1;
	}
	ok = fprintf(f, "id=%s steps=%ld seconds=%ld activities=%s\n", req->id, req->steps, req->seconds,
		     req->activities) > 0;
	ok = (fclose(f) == 0) && ok && rename(tmp, final) == 0;
	if (!ok) {
		snprintf(why, size, "cannot write %s: %s", final, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int spool_poll(const struct capture_req *req, const char *dir, char *why, size_t size)
{
	char path[4200], text[300];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/.capture-%s.done", dir, req->id);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	text[n > 0 ? n : 0] = 0;
	text[strcspn(text, "\n")] = 0;
	unlink(path);	/* read: the spool keeps only chunks */
	if (!strcmp(text, "ok"))
		return 1;
	snprintf(why, size, "%s", !strncmp(text, "failed: ", 8) ? text + 8 : text[0] ? text : "the library said nothing");
	return -1;
}

const struct capture_backend capture_spool_backend = {
	.name = "the CUPTI library", .start = spool_start, .poll = spool_poll,
};

/* ---- the thread: long poll, end posts ---- */

/* The capture object of a /next answer into req: 0, or -1 with why. */
static int parse_capture(json_t *cap, struct capture_req *req, char *why, size_t size)
{
	json_t *id = json_object_get(cap, "id"), *acts = json_object_get(cap, "activities"), *a;
	const char *s;
	size_t i, n = 0;

	memset(req, 0, sizeof(*req));
	if (json_is_integer(id)) {
		snprintf(req->id, sizeof(req->id), "%lld", (long long)json_integer_value(id));
	} else if ((s = json_string_value(id)) && strlen(s) >= 1 && strlen(s) <= CAPTURE_ID_MAX &&
		   strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == strlen(s)) {
		snprintf(req->id, sizeof(req->id), "%s", s);
	} else {
		snprintf(why, size, "the server's capture has no usable id");
		return -1;
	}
	req->steps = json_is_integer(json_object_get(cap, "steps")) ? (long)json_integer_value(json_object_get(cap, "steps")) : 0;
	req->seconds = json_is_integer(json_object_get(cap, "seconds")) ? (long)json_integer_value(json_object_get(cap, "seconds"))
									: 0;
	if ((req->steps > 0) == (req->seconds > 0) || req->steps < 0 || req->seconds < 0) {
		snprintf(why, size, "capture %s: expected steps or seconds above 0", req->id);
		return -1;
	}
	if (!json_is_array(acts) || !json_array_size(acts)) {
		snprintf(req->activities, sizeof(req->activities), "cpu,cuda");
		return 0;
	}
	json_array_foreach(acts, i, a) {
		if (!(s = json_string_value(a)) || strspn(s, "abcdefghijklmnopqrstuvwxyz") != strlen(s) || !*s ||
		    n + strlen(s) + 2 > sizeof(req->activities)) {
			snprintf(why, size, "capture %s: bad activities", req->id);
			return -1;
		}
		n += (size_t)snprintf(req->activities + n, sizeof(req->activities) - n, "%s%s", n ? "," : "", s);
	}
	return 0;
}

struct mem_body {
	const char *p;
	size_t len, off;
};

static size_t mem_read(char *buf, size_t size, size_t nitems, void *payload)
{
	struct mem_body *m = payload;
	size_t n = size * nitems;

	if (n > m->len - m->off)
		n = m->len - m->off;
	memcpy(buf, m->p + m->off, n);
	m->off += n;
	return n;
}

static int mem_rewind(void *payload)
{
	((struct mem_body *)payload)->off = 0;
	return 0;
}

/* POST the rank's end, one try: the outcome; 2xx and 4xx are said here. */
static enum client_outcome post_end(struct capture *cap, const struct capture_req *req, int ok, const char *reason)
{
	json_t *j = json_pack("{s:s, s:s}", "state", ok ? "done" : "failed", "reason", reason);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL, path[256];
	struct mem_body m = { text, text ? strlen(text) : 0, 0 };
	struct client_body body = { mem_read, mem_rewind, (curl_off_t)m.len, &m, NULL, NULL };
	struct client_resp r;
	enum client_outcome o;

	json_decref(j);
	if (!text) {
		fprintf(stderr, "trainscope-collect: capture %s: out of memory\n", req->id);
		return CLIENT_FAILED;
	}
	snprintf(path, sizeof(path), "/api/v1/captures/%s/ranks/%d", req->id, cap->c.rank);
	o = client_try(&cap->c, "POST", path, &body, &r);
	if (o == CLIENT_OK)
		fprintf(stderr, "trainscope-collect: capture %s: rank %d ended %s on the server\n", req->id, cap->c.rank,
			ok ? "done" : "failed");
	else if (o == CLIENT_REJECTED)
		fprintf(stderr, "trainscope-collect: capture %s: the server refused its end: %s\n", req->id, r.error);
	else if (o == CLIENT_TRANSIENT)
		fprintf(stderr, "trainscope-collect: capture %s: ending it on the server: %s; trying again\n", req->id,
			r.error);
	client_resp_release(&r);
	free(text);
	return o;
}

/* Sleep ms or until stopped: 1 when stopped. */
static int pause_ms(struct capture *cap, long ms)
{
	return client_sleep(&cap->c, ms);
}

static void *poller(void *arg)
{
	struct capture *cap = arg;
	struct capture_req req;
	struct client_resp r;
	char path[512], why[256], reason[256];
	int failures = 0, away = 0, ok, stopped = 0;
	long long t0;

	snprintf(path, sizeof(path), "/api/v1/runs/%s/captures/next?rank=%d&wait=%d", cap->c.run, cap->c.rank,
		 CAPTURE_WAIT_S);
	pthread_mutex_lock(&cap->mu);
	while (!stopped && !cap->stopping) {
		enum client_outcome o;

		if (cap->state == CAPTURE_ENDING) {
			req = cap->req;
			ok = cap->end_ok;
			snprintf(reason, sizeof(reason), "%s", cap->end_reason);
			pthread_mutex_unlock(&cap->mu);
			o = post_end(cap, &req, ok, reason);
			if (o == CLIENT_TRANSIENT)
				stopped = pause_ms(cap, client_backoff_ms(&cap->c, ++failures));
			else
				failures = 0;
			pthread_mutex_lock(&cap->mu);
			/* the main loop may be waiting for this end to leave (run, after CMD) */
			if (o == CLIENT_OK || o == CLIENT_REJECTED) {
				cap->state = CAPTURE_IDLE;
				if (write(cap->wake[1], "e", 1) != 1)
					fprintf(stderr, "trainscope-collect: capture %s: cannot wake the main loop\n", req.id);
			}
			if (o == CLIENT_FAILED)
				stopped = 1;	/* cut by the stop, or out of memory */
			continue;
		}
		if (cap->state != CAPTURE_IDLE || cap->no_more) {
			pthread_cond_wait(&cap->cv, &cap->mu);
			continue;
		}
		pthread_mutex_unlock(&cap->mu);
		t0 = watch_now_ms();
		o = client_try(&cap->c, "GET", path, NULL, &r);
		why[0] = 0;
		if (o == CLIENT_OK && r.status == 200 && parse_capture(json_object_get(r.json, "capture"), &req, why,
								       sizeof(why)) == 0) {
			pthread_mutex_lock(&cap->mu);
			cap->req = req;
			cap->state = CAPTURE_TAKEN;
			pthread_mutex_unlock(&cap->mu);
			if (write(cap->wake[1], "t", 1) != 1)
				fprintf(stderr, "trainscope-collect: capture %s: cannot wake the main loop\n", req.id);
		}
		if (o == CLIENT_OK && !why[0]) {
			if (away)
				fprintf(stderr, "trainscope-collect: capture polling: the server answers again\n");
			away = failures = 0;
			/* a 204 at once (the server holds enough waiting requests): not a busy loop */
			if (r.status == 204 && watch_now_ms() - t0 < 1000)
				stopped = pause_ms(cap, 5000);
		} else if (o == CLIENT_REJECTED && (r.status == 401 || r.status == 403)) {
			fprintf(stderr, "trainscope-collect: capture polling stopped: %s\n", r.error);
			pthread_mutex_lock(&cap->mu);
			cap->no_more = 1;
			pthread_mutex_unlock(&cap->mu);
		} else if (o == CLIENT_FAILED) {
			stopped = 1;
		} else {
			/* away, 5xx, another 4xx (a run not there yet: 404), or a capture we cannot read */
			long ms = client_backoff_ms(&cap->c, ++failures);
			if (!away++)
				fprintf(stderr, "trainscope-collect: capture polling: %s; trying again with backoff (up to %ld s)\n",
					why[0] ? why : r.error, cap->c.retry_max_ms / 1000);
			stopped = pause_ms(cap, ms);
		}
		client_resp_release(&r);
		pthread_mutex_lock(&cap->mu);
	}
	pthread_mutex_unlock(&cap->mu);
	return NULL;
}

/* ---- the main loop's side ---- */

int capture_init(struct capture *cap, const struct client *c, const struct capture_backend *backend,
		 const char *why_none, const char *dir)
{
	const char *max = getenv("TRAINSCOPE_RETRY_MAX_MS");

	memset(cap, 0, sizeof(*cap));
	cap->wake[0] = cap->wake[1] = cap->stop[0] = cap->stop[1] = -1;
	pthread_mutex_init(&cap->mu, NULL);
	pthread_cond_init(&cap->cv, NULL);
	cap->backend = backend;
	snprintf(cap->why_none, sizeof(cap->why_none), "%s", why_none ? why_none : "no capture backend");
	if (backend && backend->open && backend->open(dir, c, cap->why_none, sizeof(cap->why_none)))
		cap->backend = NULL;	/* each capture then ends failed with why */
	snprintf(cap->dir, sizeof(cap->dir), "%s", dir);
	cap->c = *c;
	cap->c.conns = client_conns_new();	/* its own: the capture thread's requests run beside the others */
	/* the server's pause: up to 60 s, shorter only when TRAINSCOPE_RETRY_MAX_MS says so */
	if (!(max && *max) || cap->c.retry_max_ms > CAPTURE_BACKOFF_MAX_MS)
		cap->c.retry_max_ms = CAPTURE_BACKOFF_MAX_MS;
	if (!(cap->c.server = strdup(c->server)) || pipe2(cap->wake, O_CLOEXEC | O_NONBLOCK) ||
	    pipe2(cap->stop, O_CLOEXEC | O_NONBLOCK)) {
		fprintf(stderr, "trainscope-collect: captures: %s\n", strerror(errno));
		return -1;
	}
	cap->c.cancel_fd = cap->stop[0];
	cap->c.cancel_aborts = 1;
	cap->c.verbose = 0;
	/* the long poll waits CAPTURE_WAIT_S without a byte: not a stall */
	if (cap->c.silence_s <= CAPTURE_WAIT_S)
		cap->c.silence_s = CAPTURE_WAIT_S + 10;
	if ((errno = pthread_create(&cap->th, NULL, poller, cap))) {
		fprintf(stderr, "trainscope-collect: captures: cannot start a thread: %s\n", strerror(errno));
		return -1;
	}
	cap->started = 1;
	/* the server lists the run from the first poll, upload or not: its page has the capture control */
	fprintf(stderr, "trainscope-collect: captures on: asking %s for run %s rank %d's (%s); ask for one at %s/runs/%s\n",
		c->server, c->run, c->rank, cap->backend ? cap->backend->name : cap->why_none, c->server, c->run);
	return 0;
}

int capture_fd(const struct capture *cap)
{
	return cap->wake[0];
}

int capture_backend_fd(const struct capture *cap)
{
	return cap->backend && cap->backend->fd ? cap->backend->fd() : -1;
}

long capture_timeout_ms(struct capture *cap)
{
	long ms;

	pthread_mutex_lock(&cap->mu);
	ms = cap->state == CAPTURE_ACTIVE ? 1000 : -1;
	pthread_mutex_unlock(&cap->mu);
	return ms;
}

/* The end of the capture in hand, for the thread to post. */
static void end(struct capture *cap, struct watch *w, int ok, const char *reason)
{
	pthread_mutex_lock(&cap->mu);
	cap->state = CAPTURE_ENDING;
	cap->end_ok = ok;
	snprintf(cap->end_reason, sizeof(cap->end_reason), "%s", reason);
	pthread_cond_signal(&cap->cv);
	pthread_mutex_unlock(&cap->mu);
	w->capture_id[0] = 0;
	cap->ended++;
	fprintf(stderr, "trainscope-collect: capture %s: %s%s\n", cap->req.id, ok ? "done" : "failed: ", ok ? "" : reason);
}

void capture_step(struct capture *cap, struct watch *w)
{
	char buf[16], why[sizeof(cap->result_why)] = "", needle[CAPTURE_ID_MAX + 4];
	enum capture_state st;
	int rc;

	while (read(cap->wake[0], buf, sizeof(buf)) > 0)
		;
	if (cap->backend && cap->backend->turn)
		cap->backend->turn();
	pthread_mutex_lock(&cap->mu);
	st = cap->state;
	pthread_mutex_unlock(&cap->mu);
	if (st == CAPTURE_TAKEN) {
		cap->taken++;
		fprintf(stderr, "trainscope-collect: capture %s taken: %s%ld %s, activities %s\n", cap->req.id,
			cap->req.steps ? "the next " : "", cap->req.steps ? cap->req.steps : cap->req.seconds,
			cap->req.steps ? "step(s)" : "s", cap->req.activities);
		if (cap->target_gone) {
			end(cap, w, 0, "the traced command has exited");
			return;
		}
		if (!cap->backend) {
			end(cap, w, 0, cap->why_none);
			return;
		}
		if (cap->backend->start(&cap->req, cap->dir, why, sizeof(why))) {
			end(cap, w, 0, why);
			return;
		}
		pthread_mutex_lock(&cap->mu);
		cap->state = st = CAPTURE_ACTIVE;
		pthread_mutex_unlock(&cap->mu);
		snprintf(w->capture_id, sizeof(w->capture_id), "%s", cap->req.id);
	}
	if (st != CAPTURE_ACTIVE)
		return;
	if (!cap->result) {
		rc = cap->backend->poll(&cap->req, cap->dir, why, sizeof(why));
		if (!rc && cap->target_gone) {
			rc = -1;
			snprintf(why, sizeof(why), "the traced command exited before its window closed (%s gave no answer)",
				 cap->backend->name);
		}
		if (!rc)
			return;
		cap->result = rc;
		snprintf(cap->result_why, sizeof(cap->result_why), "%s", why);
		/*
		 * Its chunks were renamed in before the answer: their events are
		 * in inotify's queue by now. Once none of them is queued, all are shipped.
		 */
		watch_read_events(w);
	}
	snprintf(needle, sizeof(needle), "-c%s.", cap->req.id);
	if (watch_queued_with(w, needle))
		return;
	end(cap, w, cap->result > 0, cap->result > 0 ? "" : cap->result_why);
	cap->result = 0;
}

int capture_busy(struct capture *cap)
{
	enum capture_state st;

	pthread_mutex_lock(&cap->mu);
	st = cap->state;
	pthread_mutex_unlock(&cap->mu);
	return st != CAPTURE_IDLE;
}

void capture_target_gone(struct capture *cap)
{
	cap->target_gone = 1;
	pthread_mutex_lock(&cap->mu);
	cap->no_more = 1;
	pthread_mutex_unlock(&cap->mu);
}

void capture_release(struct capture *cap)
{
	if (cap->started) {
		if (write(cap->stop[1], "s", 1) != 1)
			fprintf(stderr, "trainscope-collect: captures: cannot stop the thread\n");
		pthread_mutex_lock(&cap->mu);
		cap->stopping = 1;
		pthread_cond_signal(&cap->cv);
		pthread_mutex_unlock(&cap->mu);
		pthread_join(cap->th, NULL);
		cap->started = 0;
	}
	if (cap->state == CAPTURE_ENDING)
		fprintf(stderr, "trainscope-collect: capture %s: its end was never taken by the server; it stays running "
			"there until it expires\n", cap->req.id);
	for (int i = 0; i < 2; i++) {
		if (cap->wake[i] >= 0)
			close(cap->wake[i]);
		if (cap->stop[i] >= 0)
			close(cap->stop[i]);
	}
	if (cap->backend && cap->backend->close)
		cap->backend->close();
	client_release(&cap->c);
	pthread_mutex_destroy(&cap->mu);
	pthread_cond_destroy(&cap->cv);
}
