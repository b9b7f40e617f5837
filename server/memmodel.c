/*
 * memmodel.c: the memory model's names and shared structures (memmodel.h).
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "memmodel.h"
#include "tp.h"

const char *const mem_cat_names[MEM_NCAT] = {
	"parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail",
	"unknown",
};

const char *const mem_block_states[4] = { "inactive", "active_allocated", "active_pending_free", "other" };

void mem_split_param(int64_t row[MEM_POINT_COLS], int64_t param_bytes)
{
	if (param_bytes <= 0)
		return;
	int64_t pre = row[1 + CAT_PARAMETER], param = pre < param_bytes ? pre : param_bytes,
		state = pre - param < tp_sat_add(param_bytes, param_bytes) ? pre - param : tp_sat_add(param_bytes, param_bytes);
	row[1 + CAT_PARAMETER] = param;
	row[1 + CAT_OPTIMIZER_STATE] = tp_sat_add(row[1 + CAT_OPTIMIZER_STATE], state);
	row[1 + CAT_UNKNOWN] = tp_sat_add(row[1 + CAT_UNKNOWN], pre - param - state);
}

int64_t mem_point_total(const struct mem_point *p)
{
	int64_t sum = 0;

	for (int c = 0; c < MEM_NCAT; c++)
		sum = tp_sat_add(sum, p->cat[c]);
	return sum;
}

int64_t mem_prefix_add(struct mem_prefix *x, const struct mem_point *p)
{
	int64_t sum = mem_point_total(p);

	if (!x->n)
		x->first_t = p->t_ns;
	if (sum > x->best) {
		x->best = sum;
		x->best_at = x->n;
	}
	if (p->reserved > x->max_reserved)
		x->max_reserved = p->reserved;
	x->n++;
	return sum;
}

int mem_series_each_from(const struct mem_series *s, size_t from, mem_point_fn fn, void *arg)
{
	if (!from)
		return mem_series_each(s, fn, arg);
	if (from != s->same || !s->replay_from)
		return TP_ERR_UNSUPPORTED;
	return s->replay_from(s->src, from, fn, arg);
}

int mem_series_each(const struct mem_series *s, mem_point_fn fn, void *arg)
{
	int rc = 0;

	if (!s->pts && s->replay)
		return s->replay(s->src, fn, arg);
	for (size_t i = 0; i < s->n && !rc; i++)
		rc = fn(arg, &s->pts[i]);
	return rc;
}

int mem_amap_init(struct mem_amap *m, size_t n)
{
	for (m->cap = 64; m->cap < 2 * n + 2; m->cap *= 2)
		;
	m->key = tp_malloc(m->cap * sizeof(*m->key));
	m->val = tp_malloc(m->cap * sizeof(*m->val));
	if (!m->key || !m->val) {
		mem_amap_free(m);
		return -1;
	}
	memset(m->val, 0xff, m->cap * sizeof(*m->val));
	m->n = 0;
	return 0;
}

/* dst: src's keys in a map for n, dst->n src's count */
static int amap_rehash(struct mem_amap *dst, const struct mem_amap *src, size_t n)
{
	if (mem_amap_init(dst, n))
		return -1;
	for (size_t j = 0; j < src->cap; j++)
		if (src->val[j] != -1)
			*mem_amap_slot(dst, src->key[j]) = src->val[j];
	dst->n = src->n;
	return 0;
}

int mem_amap_copy(struct mem_amap *dst, const struct mem_amap *src)
{
	return amap_rehash(dst, src, src->cap / 2);	/* cap >= 2 * n + 2: twice the slots */
}

void mem_amap_free(struct mem_amap *m)
{
	tp_free(m->key);
	tp_free(m->val);
	m->key = NULL;
	m->val = NULL;
}

int32_t *mem_amap_slot(struct mem_amap *m, int64_t key)
{
	/* every bit of the address into the low bits (murmur3's finalizer): addresses i << 40
	 * all fell in one slot with a multiply alone, and 400,000 of them took 93 s */
	uint64_t h = (uint64_t)key;
	size_t j;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	j = (size_t)h & (m->cap - 1);

	while (m->val[j] != -1 && m->key[j] != key)
		j = (j + 1) & (m->cap - 1);
	m->key[j] = key;
	return &m->val[j];
}

int32_t *mem_amap_put(struct mem_amap *m, int64_t key)
{
	int32_t *slot = mem_amap_slot(m, key);
	struct mem_amap n;

	if (*slot != -1 || ++m->n <= m->cap / 2)
		return slot;
	if (mem_amap_copy(&n, m)) {
		m->n--;
		return NULL;
	}
	mem_amap_free(m);
	*m = n;
	return mem_amap_slot(m, key);
}

static int group_cmp(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	return x->bytes > y->bytes ? -1 : x->bytes < y->bytes;
}

void mem_groups_sort(struct mem_group *g, size_t n)
{
	if (n > 1)
		qsort(g, n, sizeof(*g), group_cmp);
}

static int same_op(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

struct mem_group *mem_group_add(struct mem_group *g, size_t *ng, int cat, const char *op, int *is_new)
{
	static const char other[] = "(other)";
	size_t k;

	if (is_new)
		*is_new = 0;
	for (k = 0; k < *ng && !(g[k].cat == cat && same_op(g[k].op, op)); k++)
		;
	if (k < *ng)
		return &g[k];
	if (*ng >= MEM_MAX_GROUPS) {	/* the rest, by category */
		for (k = 0; k < *ng && !(g[k].cat == cat && same_op(g[k].op, other)); k++)
			;
		if (k < *ng)
			return &g[k];
		if (*ng >= MEM_MAX_GROUPS + 1)
			return NULL;
		op = other;
	} else if (is_new) {
		*is_new = 1;
	}
	g[*ng] = (struct mem_group){ .cat = cat, .op = op };
	return &g[(*ng)++];
}
