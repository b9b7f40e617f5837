/*
 * names.h: the names of all of a rank's artifacts in one id space, as a
 * derivation replays them (runrank.c): the trace parser's known ids
 * (ingest/trace.h) stay, the others are interned by their text.
 */
#ifndef NAMES_H
#define NAMES_H

#include <stddef.h>
#include <stdint.h>

struct names {
	char **s;		/* by id; s[0] unused */
	size_t n, cap;
	uint32_t *slot;		/* open addressing: id, 0 empty */
	size_t nslot;
};

/* FNV-1a of s. */
uint64_t names_hash(const char *s);
/* The known ids' names: 0, or -1 when out of memory (names_free it then). */
int names_init(struct names *nm);
void names_free(struct names *nm);
/* to: a copy of nm, to go on apart from it; -1 when out of memory (to then freed). */
int names_copy(struct names *to, const struct names *nm);
/* The id of text s (interned when new); 0 when out of memory. */
uint32_t names_id(struct names *nm, const char *s);
/* The name of id ("" when none): an an_string_fn (analysis.h), payload the struct names. */
const char *names_get(void *payload, uint32_t id);

#endif
