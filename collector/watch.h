/*
 * watch.h: folders watched with inotify, and their finished files shipped
 * once each (used by `watch` and by `run` for its spool).
 *
 *   watch_init(&w, &client, spool)
 *   watch_add(&w, dir, state_dir)     inotify first, then the files already there
 *   loop: poll(w.ifd, ..., watch_timeout_ms(&w))
 *         watch_read_events(&w)        when w.ifd is readable
 *         watch_ship(&w)               ships what is due
 *   watch_release(&w)
 *
 * Files go up to WATCH_IN_FLIGHT at a time, each on its own connection, in
 * queue order (a backlog, say chunks kept while the server was away, then
 * keeps both of the server's cores busy: one 1 MiB chunk's work does not,
 * bench/chunks_bench.py); the next due file starts as soon as one in flight
 * is answered, and each is said and recorded as its answer comes. (Rounds
 * of two, each waiting for both answers, took 1.59x the whole file's time
 * for 1,015 chunks of 1 MiB; now 1.23x, upload FILE... 1.18x:
 * bench/results/chunks_bench-20261127e.txt.)
 *
 * A file is due when it is closed after writing (IN_CLOSE_WRITE) or renamed
 * into the folder (IN_MOVED_TO), or was there when watching began. Only
 * names ending in .json, .json.gz, .pickle, .pkl, .txt or .csv are shipped
 * (the server tells the formats apart; a 4xx is said once and recorded, like
 * a file shipped); hidden names ('.' first) and .tmp/.part ones never are. A
 * .txt or .csv waits until it has been quiet for 30 s (a log appended to).
 *
 * Keep mode (watch): what was shipped is recorded as (size, mtime, rank, run,
 * name) in a state file, a line appended and fsync'd after each file (the
 * file is rewritten atomically, write, fsync, rename, at each start, with
 * only the files still there), so a restart, even after SIGKILL, ships
 * exactly what is not there yet. A SIGKILL between a server's answer and
 * the line can send the files then in flight (WATCH_IN_FLIGHT at most)
 * again; the server answers that with 200 and the same artifact.
 * Spool mode (run): a shipped file is deleted; what is left is not shipped.
 */
#ifndef WATCH_H
#define WATCH_H

#include <stddef.h>
#include <sys/types.h>

#include "client.h"

/* files uploaded at once when more than one is due */
#define WATCH_IN_FLIGHT 2

struct watch_dir;
struct watch_item;

struct watch {
	const struct client *c;	/* borrowed; c->cancel_fd readable stops watch_ship between files */
	int spool;		/* 1: delete each file once shipped, no state file */
	long settle_ms;		/* a file found by a scan, modified less than this ago, waits */
	int ifd;		/* the inotify descriptor, to poll */
	struct watch_dir *dirs;
	size_t ndirs;
	struct watch_item *queue;
	size_t nqueue;
	int failures;		/* transient failures in a row; 0 after a success */
	long long retry_at;	/* monotonic ms of the next attempt after a failure */
	int fatal;		/* 0, or why shipping stopped as an exit code: 1 after 401/403, 4 local */
	unsigned rejected;	/* files the server answered with a 4xx (not 401/403) */
	unsigned shipped;	/* files the server took */
	unsigned unreadable;	/* files that could not be opened or read (named on stderr) */
	long long shipped_bytes;	/* their sizes on disk */
	unsigned transient;	/* uploads that met a transient failure (each retried later) */
	char last_error[512];	/* the last transient failure, for messages */
	/*
	 * A capture in progress (capture.h), "" when none: a file whose name
	 * holds -c<ID>. is uploaded with &capture=ID. Set and read on the
	 * thread that calls watch_ship.
	 */
	char capture_id[72];
};

/* 0, or -1 after a message on stderr (no inotify). */
int watch_init(struct watch *w, const struct client *c, int spool);
void watch_release(struct watch *w);
/*
 * Watch dir and queue the files in it not shipped yet. state_dir: where the
 * state file goes (NULL: dir/.trainscope-collect.state); unused in spool
 * mode. 0, or -1 after a message on stderr.
 */
int watch_add(struct watch *w, const char *dir, const char *state_dir);
/* Read what inotify has; 0, or -1 after a message (a watched folder is gone). */
int watch_read_events(struct watch *w);
/*
 * Ship every due file, in order and WATCH_IN_FLIGHT at a time, until the
 * queue is done, a transient failure (the next try is after
 * watch_timeout_ms), w->fatal, or c->cancel_fd is readable (the files in
 * flight finish first). Returns the files still queued.
 */
size_t watch_ship(struct watch *w);
/* How many queued files have a name holding needle. */
size_t watch_queued_with(const struct watch *w, const char *needle);
/* How long poll may sleep before watch_ship has something to do: -1 for ever. */
long watch_timeout_ms(const struct watch *w);
/* Monotonic milliseconds (the clock of retry_at). */
long long watch_now_ms(void);
/* n bytes for a message: "812 bytes", "1234567 bytes, 1.2 MiB"; returns buf. */
const char *watch_bytes(long long n, char *buf, size_t size);

#endif
