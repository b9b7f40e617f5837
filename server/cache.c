/*
 * cache.c: a direct-mapped table of answers (cache.h). A key hashes to one
 * slot; a newer answer replaces whatever was there. Entries of an older
 * generation are dropped when met. Simple on purpose: the working set of a
 * dashboard is a few dozen URLs.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cache.h"

#define SLOTS 1024
#define MAX_ENTRY (1u << 20)	/* bigger answers are not kept */

struct entry {
	char *key;
	uint64_t gen;
	char *data;
	size_t len;
	char content_type[64];
	int gzip;
};

struct cache {
	pthread_mutex_t mu;
	struct entry slot[SLOTS];
	size_t bytes, max_bytes;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static void drop(struct cache *c, struct entry *e)
{
	if (!e->key)
		return;
	c->bytes -= e->len + strlen(e->key);
	tp_free(e->key);
	tp_free(e->data);
	memset(e, 0, sizeof(*e));
}

struct cache *cache_new(size_t max_bytes)
{
	struct cache *c = tp_calloc(1, sizeof(*c));

	if (c) {
		pthread_mutex_init(&c->mu, NULL);
		c->max_bytes = max_bytes;
	}
	return c;
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < SLOTS; i++)
		drop(c, &c->slot[i]);
	pthread_mutex_destroy(&c->mu);
	tp_free(c);
}

int cache_get(struct cache *c, const char *key, uint64_t gen, struct cache_hit *hit)
{
	struct entry *e;
	int found = 0;

	if (!c)
		return 0;
	e = &c->slot[fnv1a(key) % SLOTS];
	pthread_mutex_lock(&c->mu);
	if (e->key && e->gen != gen)
		drop(c, e);
	if (e->key && !strcmp(e->key, key) && (hit->data = tp_malloc(e->len ? e->len : 1))) {
		memcpy(hit->data, e->data, e->len);
		hit->len = e->len;
		snprintf(hit->content_type, sizeof(hit->content_type), "%s", e->content_type);
		hit->gzip = e->gzip;
		found = 1;
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

void cache_put(struct cache *c, const char *key, uint64_t gen, const char *data, size_t len,
	       const char *content_type, int gzip)
{
	struct entry *e, n = { .gen = gen, .len = len, .gzip = gzip };

	if (!c || len > MAX_ENTRY)
		return;
	n.key = tp_strdup(key);
	n.data = tp_malloc(len ? len : 1);
	if (!n.key || !n.data) {
		tp_free(n.key);
		tp_free(n.data);
		return;
	}
	memcpy(n.data, data, len);
	snprintf(n.content_type, sizeof(n.content_type), "%s", content_type);
	e = &c->slot[fnv1a(key) % SLOTS];
	pthread_mutex_lock(&c->mu);
	drop(c, e);
	if (c->bytes + len + strlen(key) <= c->max_bytes) {
		*e = n;
		c->bytes += len + strlen(key);
		n.key = n.data = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	tp_free(n.key);
	tp_free(n.data);
}
