/*
 * memseries.c: stitching, splitting and downsampling a memory series
 * (memseries.h).
 */
#include <string.h>

#include "alloc.h"
#include "memseries.h"

void memstitch_init(struct memstitch *m, int64_t param_bytes)
{
	memset(m, 0, sizeof(*m));
	m->param_bytes = param_bytes > 0 ? param_bytes : 0;
}

void memstitch_recording(struct memstitch *m)
{
	m->here = 0;
	m->seen = 0;
}

/* [start, end) onto m's gaps; -1 when out of memory */
static int add_gap(struct memstitch *m, int64_t start, int64_t end)
{
	int64_t *g = tp_realloc(m->gaps, (m->ngaps + 1) * 2 * sizeof(*g));

	if (!g)
		return -1;
	g[m->ngaps * 2] = start;
	g[m->ngaps * 2 + 1] = end;
	m->gaps = g;
	m->ngaps++;
	return 0;
}

int memstitch_point(struct memstitch *m, size_t rec, int64_t row[MEM_POINT_COLS])
{
	int64_t t = row[0];
	int opens = !m->seen++;

	/*
	 * Before this recording's first point kept, last_t is the earlier ones'
	 * end: a gap only where it began after they ended, not where it overlapped.
	 */
	if (m->kept && !m->here) {
		if (t <= m->last_t)
			return 0;
		if (opens && add_gap(m, m->last_t, t))
			return -1;
	}
	mem_split_param(row, m->param_bytes);
	if (!m->kept)
		m->first = rec;
	m->kept++;
	m->here++;
	m->last_t = t;
	return 1;
}

void memstitch_free(struct memstitch *m)
{
	tp_free(m->gaps);
	m->gaps = NULL;
	m->ngaps = 0;
}

void memseries_window(size_t n, size_t below_start, size_t to_end, size_t *w0, size_t *w1)
{
	*w1 = to_end > 1 ? to_end : (n ? 1 : 0);
	*w0 = below_start > 1 ? below_start - 1 : 0;
	if (*w1 && *w0 >= *w1)
		*w0 = *w1 - 1;
}

size_t memseries_buckets(size_t w0, size_t w1, size_t buckets, size_t *bounds)
{
	size_t n = w1 - w0;

	if (!buckets || buckets >= n)
		buckets = n;
	int ends = buckets < n && buckets >= 3;
	size_t inner = ends ? buckets - 2 : buckets, from = w0 + (ends ? 1 : 0), span = ends ? n - 2 : n;
	for (size_t b = 0; b < buckets; b++) {
		if (ends && (b == 0 || b == buckets - 1))
			bounds[b] = b == 0 ? w0 : w1 - 1;
		else
			bounds[b] = from + (ends ? b - 1 : b) * span / inner;
	}
	bounds[buckets] = w1;
	return buckets;
}
