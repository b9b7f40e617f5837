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

void memseries_window(const int64_t (*row)[MEM_POINT_COLS], size_t n, int64_t start_ns, int64_t end_ns, size_t *w0,
		      size_t *w1)
{
	size_t a = 0, b;

	for (b = n; b > 1 && row[b - 1][0] > end_ns; b--)
		;
	while (a + 1 < b && row[a + 1][0] <= start_ns)
		a++;
	*w0 = a;
	*w1 = b;
}

size_t memseries_downsample(const int64_t (*row)[MEM_POINT_COLS], size_t w0, size_t w1, size_t buckets, size_t *pick)
{
	size_t n = w1 - w0;

	if (!buckets || buckets >= n)
		buckets = n;
	int ends = buckets < n && buckets >= 3;
	size_t inner = ends ? buckets - 2 : buckets, from = w0 + (ends ? 1 : 0), span = ends ? n - 2 : n;
	for (size_t b = 0; b < buckets; b++) {
		size_t best;
		if (ends && (b == 0 || b == buckets - 1)) {
			best = b == 0 ? w0 : w1 - 1;
		} else {
			size_t k = ends ? b - 1 : b, lo = from + k * span / inner, hi = from + (k + 1) * span / inner;
			best = lo;
			for (size_t i = lo + 1; i < hi; i++)
				if (row[i][MEM_COL_ALLOCATED] > row[best][MEM_COL_ALLOCATED])
					best = i;
		}
		pick[b] = best;
	}
	return buckets;
}
