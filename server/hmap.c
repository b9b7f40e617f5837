/*
 * hmap.c: the u64 -> u32 map (hmap.h).
 */
#include <string.h>

#include "alloc.h"
#include "hmap.h"

uint64_t hmap_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static int hmap_grow(struct hmap *m, size_t cap)
{
	size_t i;
	uint64_t *k = tp_malloc(cap * sizeof(*k));
	uint32_t *v = tp_malloc(cap * sizeof(*v));

	if (!k || !v) {
		tp_free(k);
		tp_free(v);
		return -1;
	}
	memset(v, 0xff, cap * sizeof(*v));
	for (i = 0; i < m->cap; i++) {
		if (m->v[i] == UINT32_MAX)
			continue;
		size_t j = hmap_mix(m->k[i]) & (cap - 1);
		while (v[j] != UINT32_MAX)
			j = (j + 1) & (cap - 1);
		k[j] = m->k[i];
		v[j] = m->v[i];
	}
	tp_free(m->k);
	tp_free(m->v);
	m->k = k;
	m->v = v;
	m->cap = cap;
	return 0;
}

int hmap_reserve(struct hmap *m, size_t n)
{
	size_t cap = m->cap ? m->cap : 256;

	while (n * 2 > cap)
		cap *= 2;
	return cap > m->cap ? hmap_grow(m, cap) : 0;
}

uint32_t *hmap_put(struct hmap *m, uint64_t key, uint32_t val)
{
	size_t j;

	if ((m->n + 1) * 2 > m->cap && hmap_grow(m, m->cap ? m->cap * 2 : 256))
		return NULL;
	for (j = hmap_mix(key) & (m->cap - 1); m->v[j] != UINT32_MAX; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == key)
			return &m->v[j];
	m->k[j] = key;
	m->v[j] = val;
	m->n++;
	return &m->v[j];
}

/* key's slot; m->cap when missing */
static size_t slot_of(const struct hmap *m, uint64_t key)
{
	size_t j;

	if (!m->cap)
		return 0;
	for (j = hmap_mix(key) & (m->cap - 1); m->v[j] != UINT32_MAX; j = (j + 1) & (m->cap - 1))
		if (m->k[j] == key)
			return j;
	return m->cap;
}

uint32_t *hmap_find(struct hmap *m, uint64_t key)
{
	size_t j = slot_of(m, key);

	return j < m->cap ? &m->v[j] : NULL;
}

uint32_t hmap_get(const struct hmap *m, uint64_t key)
{
	size_t j = slot_of(m, key);

	return j < m->cap ? m->v[j] : UINT32_MAX;
}

int hmap_copy(struct hmap *to, const struct hmap *m)
{
	memset(to, 0, sizeof(*to));
	if (!m->cap)
		return 0;
	to->k = tp_malloc(m->cap * sizeof(*to->k));
	to->v = tp_malloc(m->cap * sizeof(*to->v));
	if (!to->k || !to->v) {
		hmap_free(to);
		return -1;
	}
	memcpy(to->k, m->k, m->cap * sizeof(*to->k));
	memcpy(to->v, m->v, m->cap * sizeof(*to->v));
	to->cap = m->cap;
	to->n = m->n;
	return 0;
}

void hmap_free(struct hmap *m)
{
	tp_free(m->k);
	tp_free(m->v);
	memset(m, 0, sizeof(*m));
}
