/*
 * upload.h: one file to POST /api/v1/runs/{run}/artifacts, streamed from
 * disk and gzip'd on the fly unless it already is gzip (used by upload,
 * watch and run).
 */
#ifndef UPLOAD_H
#define UPLOAD_H

#include <pthread.h>
#include <sys/stat.h>

#include "client.h"

/* Files upload runs at once: one file's work does not keep the server's two cores busy (watch.h). */
#define UPLOAD_IN_FLIGHT 2

/*
 * A progress bar on stderr over the files of one upload command: one
 * file's name, or "K/N files" for several, the bytes read of them all, the
 * rate and the time left. Workers update it from their threads.
 */
struct upload_bar {
	pthread_mutex_t mu;
	const char *label;		/* the one file's name; NULL: several */
	size_t nfiles, finished;
	off_t size, done;		/* all files' bytes; those of the finished files */
	off_t slot[UPLOAD_IN_FLIGHT];	/* bytes read of the file in each slot */
	double started_at, drawn_at;	/* monotonic seconds: first progress call, last bar drawn */
};

/*
 * Upload path as artifact `name` of c->run / c->rank. retry: 1 retries
 * transient failures (client_request), 0 tries once (client_try). bar (may
 * be NULL): the bar to draw this file's progress in, in slot (below
 * UPLOAD_IN_FLIGHT). st_out (may be NULL) gets the file's fstat at open,
 * i.e. the version that was sent. out is always filled: release it with
 * client_resp_release. A file that cannot be read is CLIENT_FAILED with
 * out->error saying why.
 */
enum client_outcome upload_file(const struct client *c, const char *path, const char *name, int retry,
				struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out);

/*
 * upload_file, with the rank's origin: rank_given 0 sends no rank (the
 * server takes a trace's distributedInfo.rank, else 0); 1 sends c->rank,
 * and unless force_rank a trace that names another rank is not sent
 * (CLIENT_FAILED, out->error says both ranks). upload_file is (1, 1).
 */
enum client_outcome upload_file_rank(const struct client *c, const char *path, const char *name, int retry,
				     struct upload_bar *bar, int slot, struct stat *st_out, struct client_resp *out,
				     int rank_given, int force_rank);

/*
 * upload_file of a capture's chunk, tried once: the URL carries
 * &capture=ID (ID: [A-Za-z0-9_-], as the collector checked it), and the
 * server records the artifact as that capture's (issue 52).
 */
enum client_outcome upload_file_capture(const struct client *c, const char *path, const char *name,
					const char *capture, struct stat *st_out, struct client_resp *out);

/*
 * Print the answer of an upload: "FILE: artifact ID STATUS (new)" on stdout,
 * and the server's error on stderr when it rejected the file. Returns 1
 * when the answer carries an artifact (the server kept the bytes).
 */
int upload_report(const char *file, const struct client_resp *r);

/* 1 for a 4xx that every later upload would get too (401, 403): stop trying. */
int upload_fatal(const struct client_resp *r);

#endif
