/*
 * names.c: the names of a rank's artifacts in one id space (names.h).
 */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "ingest/trace.h"
#include "pipeline/names.h"

uint64_t names_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ULL;
	return h;
}

void names_free(struct names *nm)
{
	for (size_t i = 0; i < nm->n; i++)
		tp_free(nm->s[i]);
	tp_free(nm->s);
	tp_free(nm->slot);
}

static int names_rehash(struct names *nm)
{
	size_t ns = nm->nslot ? nm->nslot * 2 : 4096;
	uint32_t *slot = tp_calloc(ns, sizeof(*slot));

	if (!slot)
		return -1;
	for (size_t id = TRACE_S_KNOWN_END; id < nm->n; id++) {
		size_t j = names_hash(nm->s[id]) & (ns - 1);
		while (slot[j])
			j = (j + 1) & (ns - 1);
		slot[j] = (uint32_t)id;
	}
	tp_free(nm->slot);
	nm->slot = slot;
	nm->nslot = ns;
	return 0;
}

int names_init(struct names *nm)
{
	memset(nm, 0, sizeof(*nm));
	nm->cap = 4096;
	if (!(nm->s = tp_calloc(nm->cap, sizeof(*nm->s))))
		return -1;
	for (nm->n = 1; nm->n < TRACE_S_KNOWN_END; nm->n++)
		if (!(nm->s[nm->n] = tp_strdup(trace_known_string((uint32_t)nm->n))))
			return -1;
	return names_rehash(nm);
}

int names_copy(struct names *to, const struct names *nm)
{
	memset(to, 0, sizeof(*to));
	to->cap = nm->cap;
	to->nslot = nm->nslot;
	if (!(to->s = tp_calloc(nm->cap, sizeof(*to->s))) || !(to->slot = tp_malloc(nm->nslot * sizeof(*to->slot))))
		goto fail;
	memcpy(to->slot, nm->slot, nm->nslot * sizeof(*to->slot));
	for (to->n = 0; to->n < nm->n; to->n++)
		if (nm->s[to->n] && !(to->s[to->n] = tp_strdup(nm->s[to->n])))
			goto fail;
	return 0;
fail:
	names_free(to);
	memset(to, 0, sizeof(*to));
	return -1;
}

uint32_t names_id(struct names *nm, const char *s)
{
	size_t j;

	for (uint32_t k = 1; k < TRACE_S_KNOWN_END; k++)
		if (!strcmp(nm->s[k], s))
			return k;
	for (j = names_hash(s) & (nm->nslot - 1); nm->slot[j]; j = (j + 1) & (nm->nslot - 1))
		if (!strcmp(nm->s[nm->slot[j]], s))
			return nm->slot[j];
	if (nm->n == nm->cap) {
		char **ns = tp_realloc(nm->s, nm->cap * 2 * sizeof(*ns));
		if (!ns)
			return 0;
		nm->s = ns;
		nm->cap *= 2;
	}
	if (!(nm->s[nm->n] = tp_strdup(s)))
		return 0;
	nm->slot[j] = (uint32_t)nm->n;
	if (++nm->n * 2 > nm->nslot && names_rehash(nm))
		return 0;
	return (uint32_t)(nm->n - 1);
}

const char *names_get(void *payload, uint32_t id)
{
	const struct names *nm = payload;

	return id < nm->n && nm->s[id] ? nm->s[id] : "";
}
