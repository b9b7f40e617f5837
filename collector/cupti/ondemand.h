/*
 * ondemand.h: the injection library's side of on-demand capture (issue 52),
 * the files it shares with trainscope-collect in the spool folder:
 *   .capture                 the collector's request, one line, written
 *                            atomically: id=ID steps=N seconds=S activities=cpu,cuda,...
 *   .capture-<ID>.done       the library's answer once the window's chunks
 *                            are in the spool: "ok" or "failed: why"
 * Pure file and string work; inject.c decides when.
 */
#ifndef CUPTI_ONDEMAND_H
#define CUPTI_ONDEMAND_H

#include <stddef.h>

#define ONDEMAND_REQUEST ".capture"
#define ONDEMAND_MAX_S 3600		/* a window never lasts longer */
#define ONDEMAND_ID_MAX 64

/* The activities a request may name (bits of ondemand_req.activities). */
enum {
	ONDEMAND_CPU = 1,	/* runtime API calls, NVTX ranges */
	ONDEMAND_CUDA = 2,	/* kernels, copies, sets, synchronisations, overhead, devices */
	ONDEMAND_MEMORY = 4,	/* allocations and frees */
	ONDEMAND_STACKS = 8,	/* accepted; CUPTI records no Python stacks */
};

struct ondemand_req {
	char id[ONDEMAND_ID_MAX + 1];	/* [A-Za-z0-9_-]{1,64} */
	long steps, seconds;		/* one of them above 0 */
	unsigned activities;
};

/*
 * Parse a request line (a trailing newline is fine). 0, or -1 with why
 * filled; r->id is set whenever a valid id was read (the answer's name).
 */
int ondemand_parse(const char *line, struct ondemand_req *r, char *why, size_t size);
/*
 * Read dir/.capture into r: 1 a request (valid or not: why says, r->id may
 * be ""), 0 none there.
 */
int ondemand_read(const char *dir, struct ondemand_req *r, int *valid, char *why, size_t size);
/* Write dir/.capture-<id>.done holding text and a newline, atomically. 0 or -1 (errno). */
int ondemand_done(const char *dir, const char *id, const char *text);

#endif
