/*
 * textfmt_int.h: what textfmt.c (detection, the line loop), textfmt_units.c
 * (units, lines, strings, errors) and the per-format files (fmt_lightning.c,
 * fmt_keyavg.c, fmt_stacks.c, fmt_gpulog.c) share: the parser's state and the
 * small helpers. The interface is textfmt.h.
 */
#ifndef TEXTFMT_INT_H
#define TEXTFMT_INT_H

#include "alloc.h"
#include "ingest/textfmt.h"

struct fslot {
	uint32_t idx1;			/* frame index + 1; 0: empty */
};

struct textfmt_parser {
	int kind;
	struct tf_limits lim;
	char *line;
	size_t nline;
	uint64_t lineno;
	int bom;			/* bytes of a UTF-8 BOM passed over; 3: done looking */
	int after_cr;			/* the last line ended at CR: an LF next is its CRLF's */
	int failed;
	struct tf_result r;
	/* strings */
	char **strs;
	size_t nstrs, capstrs;
	size_t held;			/* bytes held, against lim.max_held: tf_keep_str, tf_grow, tf_held */
	/* lightning */
	struct tf_action *act;
	size_t cap_act;
	struct tf_function *fn;
	size_t cap_fn;
	int fn_rows;			/* -1: before the current action's table header; else its rows kept */
	int lcol[5];			/* header: which '|' cell holds name, mean, calls, total, share */
	int lin;			/* SimpleProfiler: 0 outside a table, 1 after its header, 2 in its rows */
	/* key_averages */
	int ka_tables;			/* tables read (PyTorchProfiler prints one per action) */
	int ka_header;			/* the current table's header was read */
	int ka_state;			/* 0 before, 1 header seen, 2 rows, 3 after */
	size_t cs[TF_MAX_COLS], ce[TF_MAX_COLS];	/* the current table's columns, in characters */
	size_t ka_nc;			/* the current table's column count */
	int ka_map[TF_MAX_COLS];	/* the current table's column k is the result's column ka_map[k] */
	char *colname[TF_MAX_COLS];	/* every title the tables have shown, first seen first */
	int colunit[TF_MAX_COLS];
	struct tf_op *ops;
	size_t cap_ops;
	/* stacks */
	struct tf_frame *fr;
	int64_t *first_sum, *last_sum;
	uint64_t *stamp;
	uint8_t *ends;			/* 1: some stack's first frame, 2: some stack's last */
	size_t cap_fr;
	struct fslot *ht;
	size_t htcap;
	/* gpu */
	char *gcol[TF_GPU_MAX_COLS];
	const char *gunit[TF_GPU_MAX_COLS];
	double gscale[TF_GPU_MAX_COLS];
	int gidx_col;
	int gperm[TF_GPU_MAX_COLS];	/* CSV: the first header's column of each column of the last header */
	struct tf_gpu_row *grows;
	size_t cap_grows;
	char *ghdr;			/* the header line as first seen */
	double *gvals;			/* ngpu_cols values per row */
	size_t cap_gvals;
	int64_t gtime;			/* the screen's time line; INT64_MIN none */
	int gform;			/* 0 not yet told, 1 CSV, 2 the screen, 3 dmon */
	int gscreen;			/* screen: 1 in the GPU table, 2 in the processes table, 3 in the MIG devices table */
	size_t gscreen_first;		/* screen: the first row of the current screen */
	int gpend;			/* screen: GPU index + 1 whose figures line comes next; 0 none */
	int gdmon_units;		/* dmon: 1 its units line read, 2 a repeated header read */
	const char *gdmon_want[TF_GPU_MAX_COLS];	/* dmon: the unit its header must give per column */
};

/* The plain nvidia-smi screen's columns (fmt_gpulog.c). */
enum { SCR_UTIL, SCR_USED, SCR_TOTAL, SCR_TEMP, SCR_PDRAW, SCR_PCAP, SCR_FAN, SCR_PROCS, SCR_NCOLS };

/* text */
int tf_is_sp(int c);
void tf_trim(const char **s, size_t *n);
int tf_starts(const char *s, size_t n, const char *pre);
const char *tf_find(const char *s, size_t n, const char *needle);
int tf_is_dashes(const char *s, size_t n);
int tf_gpu_header_like(const char *s, size_t n);
int tf_is_smi_time(const char *s, size_t n);
int tf_dmon_header(const char *s, size_t n);
int tf_next_line(const uint8_t **p, const uint8_t *end, int at_end, const char **ls, size_t *ln);
/* units: a decimal times 10^scale, exactly; times to ns, memory to bytes, % to hundredths */
int tf_dec_scaled(const char *s, size_t n, int scale, int64_t *out);
int tf_parse_time(const char *s, size_t n, int64_t *ns);
int tf_parse_mem(const char *s, size_t n, int64_t *b);
int tf_parse_pct(const char *s, size_t n, int64_t *bp);
/* parser state */
char *tf_keep_str(struct textfmt_parser *p, const char *s, size_t n);
/* Room for element n of *arr (a row: at most lim.max_rows), counted against lim.max_held; -1 past either. */
int tf_grow(struct textfmt_parser *p, void **arr, size_t *cap, size_t n, size_t sz);
/* bytes more held (an array grown by other means); -1 past lim.max_held */
int tf_held(struct textfmt_parser *p, size_t bytes);
int tf_bad(struct textfmt_parser *p, struct tp_errbuf *err, const char *what);
int tf_toobig(struct textfmt_parser *p, struct tp_errbuf *err);
/* one line of each format; the stacks' end of input */
int tf_lightning_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err);
int tf_keyavg_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err);
int tf_stacks_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err);
int tf_stacks_finish(struct textfmt_parser *p, struct tp_errbuf *err);
int tf_gpu_line(struct textfmt_parser *p, const char *s, size_t n, struct tp_errbuf *err);

#endif
