/*
 * memread.c: the memory reads (GET /memory, /memory?points=0, /memory/peak):
 * the series' recordings read from the store point by point, stitched by
 * analysis/memseries.h, shaped by answer.h (reads.h).
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "analysis/memseries.h"
#include "answer.h"
#include "reads.h"

/* A walk over a series' points in time order, every recording stitched, one point at a time. */
struct walk {
	struct store_reader *r;
	const struct store_mem_series *s;
	struct store_mem_points *c;	/* the recording being read */
	size_t rec;			/* recordings opened */
	uint32_t cols;			/* the columns read (store_mem_points_next) */
	struct memstitch st;
	int at_peak;			/* the point just given is the series' peak */
};

/* A walk reading the columns cols names (store_mem_points_next) and what the stitch needs (time, the split's two). */
static void walk_open(struct walk *w, struct store_reader *r, const struct store_mem_series *s, uint32_t cols)
{
	memset(w, 0, sizeof(*w));
	w->r = r;
	w->s = s;
	w->cols = cols | 1u | (s->param_bytes > 0 ? 1u << (1 + CAT_PARAMETER) | 1u << (1 + CAT_OPTIMIZER_STATE) | 1u << (1 + CAT_UNKNOWN) : 0);
	memstitch_init(&w->st, s->param_bytes);
}

static void walk_close(struct walk *w)
{
	store_mem_points_close(w->c);
	w->c = NULL;
	memstitch_free(&w->st);
}

/* The next point kept: 1, 0 at the end, or a tp_err. */
static int walk_next(struct walk *w, int64_t row[MEM_POINT_COLS], uint8_t *reserved_null, struct tp_errbuf *err)
{
	int64_t seq;
	int rc;

	for (;;) {
		if (!w->c) {
			if (w->rec == w->s->nrecordings)
				return 0;
			if ((rc = store_mem_points_open(w->r, w->s->run_id, w->s->rank, w->s->recordings[w->rec], w->s->device,
							-1, &w->c, err)))
				return rc;
			w->rec++;
			memstitch_recording(&w->st);
		}
		if ((rc = store_mem_points_next(w->c, w->cols, row, reserved_null, &seq, err)) < 0)
			return rc;
		if (!rc) {
			store_mem_points_close(w->c);
			w->c = NULL;
			continue;
		}
		if ((rc = memstitch_point(&w->st, w->rec - 1, row)) < 0)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		if (rc) {
			w->at_peak = (w->cols & STORE_MEM_SEQ) && w->s->recordings[w->rec - 1] == w->s->artifact &&
				     seq == w->s->peak_seq;
			return 1;
		}
	}
}

/* What was allocated before the series began: the first recording's baseline (the peak's when none has points). */
static int64_t series_baseline(const struct store_mem_series *s, const struct memstitch *st)
{
	size_t i;

	if (st->kept)
		return s->baselines[st->first];
	for (i = 0; i < s->nrecordings && s->recordings[i] != s->artifact; i++)
		;
	return i < s->nrecordings ? s->baselines[i] : 0;
}

/* The answer's members besides the points; a trace's gaps are between its profiling cycles (cycle_gaps). */
static void mem_head(struct answer_mem *a, const struct store_mem_series *s, const struct memstitch *st, size_t total,
		     const int64_t *peak, const int64_t *cycle_gaps, size_t ncycle_gaps, long window_points)
{
	int trace = !strcmp(s->source, "trace");

	a->s = s;
	a->total = total;
	a->peak = peak;
	a->baseline = series_baseline(s, st);
	a->gaps = trace ? cycle_gaps : st->gaps;
	a->ngaps = trace ? ncycle_gaps : st->ngaps;
	a->window_points = window_points;
}

/*
 * A chart's points, streamed: a first walk counts the points, finds the window
 * and the peak (time and seq alone), a second keeps each bucket's highest
 * point (memseries_buckets), so a read holds a row per point it answers with,
 * not per point of the series. Both walks in one read snapshot.
 */
json_t *read_memory(struct store_reader *r, const char *run, int rank, const char *device, long points,
		    int64_t start_ns, int64_t end_ns, const int64_t *cycle_gaps, size_t ncycle_gaps,
		    struct tp_errbuf *err)
{
	struct store_mem_series s = { 0 };
	struct walk w = { 0 };
	struct answer_mem a;
	int64_t (*pick)[MEM_POINT_COLS] = NULL, row[MEM_POINT_COLS], peak[MEM_POINT_COLS];
	uint8_t *pnul = NULL, nul = 0;
	size_t n = 0, below_start = 0, to_end = 0, w0, w1, nb = 0, b = 0, i, *bounds = NULL, peak_at = SIZE_MAX;
	json_t *o = NULL;
	int rc, snap;

	if ((rc = store_read_snapshot(r, 1, err)))
		return NULL;
	snap = 1;
	if (store_mem_series(r, run, rank, device, &s, err))
		goto out;
	walk_open(&w, r, &s, 1u | STORE_MEM_SEQ);
	while ((rc = walk_next(&w, row, &nul, err)) == 1) {
		below_start += row[0] <= start_ns;
		to_end += row[0] <= end_ns;
		if (w.at_peak)
			peak_at = n;
		n++;
	}
	if (rc < 0)
		goto out;
	/* a window: its points, from the state it opens with to the last at or before its end */
	memseries_window(n, below_start, to_end, &w0, &w1);
	nb = points > 0 && (size_t)points < w1 - w0 ? (size_t)points : w1 - w0;
	if (!(bounds = tp_malloc((nb + 1) * sizeof(*bounds))) || !(pick = tp_malloc((nb ? nb : 1) * sizeof(*pick))) ||
	    !(pnul = tp_malloc(nb ? nb : 1))) {
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		goto out;
	}
	nb = memseries_buckets(w0, w1, (size_t)(points > 0 ? points : 0), bounds);
	walk_close(&w);
	walk_open(&w, r, &s, STORE_MEM_ALL);
	for (i = 0; (rc = walk_next(&w, row, &nul, err)) == 1; i++) {
		if (i == peak_at)
			memcpy(peak, row, sizeof(row));
		if (i < w0 || i >= w1)
			continue;
		while (i >= bounds[b + 1])
			b++;
		if (i == bounds[b] || row[MEM_COL_ALLOCATED] > pick[b][MEM_COL_ALLOCATED]) {
			memcpy(pick[b], row, sizeof(row));
			pnul[b] = nul;
		}
	}
	if (rc < 0)
		goto out;
	mem_head(&a, &s, &w.st, n, peak_at < n ? peak : NULL, cycle_gaps, ncycle_gaps,
		 start_ns != INT64_MIN || end_ns != INT64_MAX ? (long)(w1 - w0) : -1);
	if (!(o = answer_memory(&a, (const int64_t (*)[MEM_POINT_COLS])pick, pnul, nb)))
		tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
out:
	walk_close(&w);
	if (snap)
		store_read_snapshot(r, 0, NULL);
	store_mem_series_free(&s);
	tp_free(bounds);
	tp_free(pick);
	tp_free(pnul);
	return o;
}

json_t *read_memory_peak(struct store_reader *r, const char *run, int rank, const char *device,
			 struct tp_errbuf *err)
{
	struct store_mem_series s;
	struct store_mem_points *c = NULL;
	struct store_rows groups = { 0 };
	int64_t row[MEM_POINT_COLS], seq;
	uint8_t nul;
	json_t *o = NULL;
	int rc;

	if (store_mem_series(r, run, rank, device, &s, err))
		return NULL;
	if (s.peak_seq < 0)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "no_memory_data", "run '%s' has no memory peak for rank %d on %s", run,
			     s.rank, s.device);
	else if (!(rc = store_mem_points_open(r, s.run_id, s.rank, s.artifact, s.device, s.peak_seq, &c, err)) &&
		 (rc = store_mem_points_next(c, STORE_MEM_ALL, row, &nul, &seq, err)) == 0)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "no_memory_data", "run '%s' has no memory peak for rank %d on %s",
			     run, s.rank, s.device);
	if (rc == 1) {
		mem_split_param(row, s.param_bytes);
		if (!store_mem_groups(r, s.run_id, s.rank, s.artifact, s.device, &groups, err) &&
		    !(o = answer_memory_peak(&s, row, &groups)))
			tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	store_mem_points_close(c);
	store_rows_free(&groups);
	store_mem_series_free(&s);
	return o;
}

/* ---- every point, as JSON text made while it is sent ---- */

/*
 * The arrays go column after column, so the points are walked once per
 * column, none of them held: a read of every point of a long run costs one
 * row of memory. The walks run in one read snapshot, so that every column
 * has the same points.
 */
struct mem_text {
	struct store_reader *r;		/* owned */
	int snap;			/* r holds a read snapshot until freed */
	struct store_mem_series s;
	char *head;			/* the object's other members, '{' and no '}' */
	size_t from, to;		/* the points [from, to) */
	int col;			/* -1: the head; 0..MEM_POINT_COLS-1: that column's array; MEM_POINT_COLS: done */
	struct walk w;			/* the walk of the column being sent */
	size_t row;			/* points of it walked */
	int failed;
	char pend[96];			/* text made but not yet taken */
	size_t pend_len, pend_off;
};

/* v in decimal at out (room for 21 bytes); its length */
static int i64_text(char *out, int64_t v)
{
	char tmp[24];
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	int n = 0, k = 0;

	do
		tmp[n++] = (char)('0' + u % 10);
	while (u /= 10);
	if (v < 0)
		out[k++] = '-';
	while (n)
		out[k++] = tmp[--n];
	return k;
}

/* Open column col's walk and skip to the window's first point. */
static int col_walk(struct mem_text *m)
{
	struct tp_errbuf err = { 0 };
	int64_t row[MEM_POINT_COLS];
	uint8_t nul;

	walk_close(&m->w);
	walk_open(&m->w, m->r, &m->s, 1u << m->col);
	for (m->row = 0; m->row < m->from; m->row++)
		if (walk_next(&m->w, row, &nul, &err) != 1)
			return -1;
	return 0;
}

/* The next piece of text into m->pend; 0 at the end (or on failure: m->failed). */
static int mem_text_next(struct mem_text *m)
{
	static const char *const open_col[MEM_POINT_COLS] = {
		"\"t_ns\":[", "\"categories\":{\"parameter\":[", "\"optimizer_state\":[", "\"input\":[",
		"\"temporary\":[", "\"activation\":[", "\"gradient\":[", "\"autograd_detail\":[", "\"unknown\":[",
		"\"allocated\":[", "\"reserved\":[",
	};
	struct tp_errbuf err = { 0 };
	int64_t row[MEM_POINT_COLS];
	uint8_t nul;
	int n;

	if (m->col >= MEM_POINT_COLS || m->failed)
		return 0;
	m->pend_off = 0;
	if (m->col < 0) {
		m->col = 0;
		if (col_walk(m))
			return m->failed = 1, 0;
		n = snprintf(m->pend, sizeof(m->pend), "%s", open_col[0]);
	} else if (m->row < m->to) {
		int col = m->col, first = m->row == m->from;
		if (walk_next(&m->w, row, &nul, &err) != 1)
			return m->failed = 1, 0;
		m->row++;
		n = 0;
		if (!first)
			m->pend[n++] = ',';
		if (col == MEM_COL_RESERVED && nul) {
			memcpy(m->pend + n, "null", 4);
			n += 4;
		} else {
			n += i64_text(m->pend + n, row[col]);
		}
	} else {
		int col = ++m->col;
		if (col == MEM_POINT_COLS) {
			walk_close(&m->w);
			n = snprintf(m->pend, sizeof(m->pend), "]}");
		} else {
			if (col_walk(m))
				return m->failed = 1, 0;
			n = snprintf(m->pend, sizeof(m->pend), "]%s,%s", col == MEM_COL_ALLOCATED ? "}" : "",
				     open_col[col]);
		}
	}
	m->pend_len = n > 0 ? (size_t)n : 0;
	return 1;
}

size_t mem_text_read(struct mem_text *m, char *buf, size_t max)
{
	size_t out = 0;

	if (m->col < 0 && m->head) {
		size_t hl = strlen(m->head + m->pend_off);
		size_t k = hl < max ? hl : max;
		memcpy(buf, m->head + m->pend_off, k);
		m->pend_off += k;
		if (k < hl)
			return k;
		out = k;
		m->pend_off = m->pend_len = 0;
		tp_free(m->head);
		m->head = NULL;
	}
	while (out < max) {
		if (m->pend_off == m->pend_len && !mem_text_next(m))
			break;
		size_t k = m->pend_len - m->pend_off < max - out ? m->pend_len - m->pend_off : max - out;
		memcpy(buf + out, m->pend + m->pend_off, k);
		m->pend_off += k;
		out += k;
	}
	return out;
}

int mem_text_failed(const struct mem_text *m)
{
	return m->failed;
}

void mem_text_free(struct mem_text *m)
{
	if (!m)
		return;
	walk_close(&m->w);
	if (m->snap)
		store_read_snapshot(m->r, 0, NULL);
	store_reader_close(m->r);
	store_mem_series_free(&m->s);
	tp_free(m->head);
	tp_free(m);
}

int read_memory_text(struct store_reader *r, const char *run, int rank, const char *device, int64_t start_ns,
		     int64_t end_ns, const int64_t *cycle_gaps, size_t ncycle_gaps, struct mem_text **out,
		     struct tp_errbuf *err)
{
	struct mem_text *m = tp_calloc(1, sizeof(*m));
	struct answer_mem a;
	int64_t row[MEM_POINT_COLS], peak[MEM_POINT_COLS];
	uint8_t nul;
	size_t n = 0, below_start = 0, to_end = 0;
	json_t *o;
	char *text;
	int rc, got_peak = 0;

	if (!m) {
		store_reader_close(r);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	m->col = -1;
	m->r = r;	/* owned: mem_text_free ends the snapshot and closes it */
	if ((rc = store_read_snapshot(r, 1, err))) {
		mem_text_free(m);
		return rc;
	}
	m->snap = 1;
	if ((rc = store_mem_series(r, run, rank, device, &m->s, err))) {
		mem_text_free(m);
		return rc;
	}
	/* a first walk: how many, the window's bounds, the peak, the gaps */
	walk_open(&m->w, r, &m->s, STORE_MEM_ALL);
	while ((rc = walk_next(&m->w, row, &nul, err)) == 1) {
		n++;
		below_start += row[0] <= start_ns;
		to_end += row[0] <= end_ns;
		if (m->w.at_peak) {
			memcpy(peak, row, sizeof(row));
			got_peak = 1;
		}
	}
	if (rc < 0) {
		mem_text_free(m);
		return rc;
	}
	memseries_window(n, below_start, to_end, &m->from, &m->to);
	mem_head(&a, &m->s, &m->w.st, n, got_peak ? peak : NULL, cycle_gaps, ncycle_gaps,
		 start_ns != INT64_MIN || end_ns != INT64_MAX ? (long)(m->to - m->from) : -1);
	o = answer_memory_head(&a);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	walk_close(&m->w);
	if (!text) {
		mem_text_free(m);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	text[strlen(text) - 1] = ',';	/* the '}' gives way to the arrays */
	m->head = text;
	*out = m;
	return TP_OK;
}
