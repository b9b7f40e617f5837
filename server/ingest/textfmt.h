/*
 * textfmt.h: the text reports other profilers write (shared/fixtures/formats/
 * FORMATS.md), streaming, line by line, bounded:
 *   lightning_report  Lightning SimpleProfiler tables (generations A-C, tabs or
 *                     spaces before '|', with or without the '|' before each
 *                     row; each header read for its columns) and
 *                     AdvancedProfiler reports (one action per "Profile stats
 *                     for:" section, its total from "N function calls ... in T
 *                     seconds");
 *   key_averages      prof.key_averages().table() and PyTorchProfiler's
 *                     sections of them: columns cut by the widths of the dash
 *                     line in characters, cells in base units, both footers;
 *   stacks            folded stacks (export_stacks, py-spy): self and total per
 *                     frame; which end is the leaf is decided at the end (the
 *                     end with fewer distinct frames is the root);
 *   gpu_log           nvidia-smi --query-gpu CSV (one header, repeated headers
 *                     or none: columns then named from their units), the plain
 *                     screen (one sample per GPU) and dmon.
 * Text around a whole table is passed over; a UTF-8 BOM and LF, CRLF or CR
 * line ends are taken. Units are converted exactly from the text: times to
 * ns, memory to bytes (Kb/Mb/Gb and KB/MB/GB are 1024-based, MiB too),
 * percentages to hundredths of a percent; a unit or value the tool never
 * prints is an error naming the line. Pure: no SQL.
 */
#ifndef TEXTFMT_H
#define TEXTFMT_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

enum tf_kind { TF_NONE, TF_LIGHTNING, TF_KEYAVG, TF_STACKS, TF_GPULOG };
#define TF_NKINDS 5
extern const char *const tf_kind_names[TF_NKINDS];	/* "none", "lightning_report", ... */

/*
 * The kind of a text from its first bytes: TF_* (TF_NONE: none of them), or
 * -1 when more bytes are needed (never when at_end). at_end 1: the text ends
 * here; 2: decide now, but the bytes may end inside a line (a full sniff);
 * n >= TF_SNIFF with at_end 0 is the same as 2.
 */
int textfmt_detect(const uint8_t *p, size_t n, int at_end);
/* Bytes detect may ask for before deciding: a training log's lines before its table
 * (nanogpt-fp8-mxfp8's profile_output.txt has 4,428 bytes of them, CORPUS.md). */
#define TF_SNIFF 16384

struct tf_limits {
	size_t max_line;		/* bytes in one line */
	uint64_t max_rows;		/* actions, ops, distinct frames, log rows */
	size_t max_held;		/* bytes held: names (each with its pointer and malloc's 16), rows and cells */
};
extern const struct tf_limits tf_default_limits;

/* Lightning: one action. */
struct tf_action {
	const char *name;
	int64_t calls;			/* -1: not printed (AdvancedProfiler, generation A) */
	int64_t mean_ns, total_ns;	/* -1: not printed */
	int64_t share_bp;		/* hundredths of a percent; -1: not printed */
};

/* AdvancedProfiler: a row of an action's cProfile table, the first TF_FUNCTIONS_PER_ACTION
 * rows of each as printed (cProfile orders them by cumulative time). */
#define TF_FUNCTIONS_PER_ACTION 20
struct tf_function {
	size_t action;			/* index into actions */
	const char *location;		/* "file.py:12(name)" or "{built-in method ...}" */
	int64_t ncalls, primitive_calls;	/* "3/1": 3 calls, 1 not recursive; else both the same */
	int64_t tottime_ns, cumtime_ns;
};

/* key_averages: a column's unit. */
enum tf_unit { TF_U_TEXT, TF_U_NS, TF_U_BYTES, TF_U_BP, TF_U_COUNT, TF_U_OTHER };
#define TF_MAX_COLS 24
/* What a key_averages column means, whatever the device word ("Self CUDA", "Self XPU"). */
enum tf_ka_role { TF_KA_CALLS, TF_KA_SELF_CPU, TF_KA_CPU_TOTAL, TF_KA_SELF_DEV, TF_KA_DEV_TOTAL, TF_KA_CPU_MEM,
		  TF_KA_SELF_CPU_MEM, TF_KA_DEV_MEM, TF_KA_SELF_DEV_MEM, TF_KA_NROLES };
struct tf_op {
	const char *name;
	int64_t v[TF_MAX_COLS];		/* per column, in its unit (INT64_MIN: blank or not a number) */
};

struct tf_frame {
	const char *name;
	int64_t self, total;		/* in the file's unit (us for export_stacks, samples for py-spy) */
};

#define TF_GPU_MAX_COLS 256	/* --query-gpu of every property: 212 columns on driver 590 */
struct tf_gpu_row {
	int64_t t_ns;			/* timestamp as written (the screen's time line, dmon -o DT), read as UTC; INT64_MIN: none */
	int gpu;			/* index column (the screen's GPU number), else 0 */
	const double *v;		/* ngpu_cols values in base units (% as %, MiB as bytes, W, degC, MHz as Hz); NaN: n/a or text */
};

struct tf_result {
	int kind;
	/* TF_LIGHTNING */
	const struct tf_action *actions;
	size_t nactions;
	int64_t total_ns;		/* the Total row (SimpleProfiler); -1 none */
	int advanced;			/* 1: AdvancedProfiler report */
	const struct tf_function *functions;	/* its cProfile rows, by action in file order */
	size_t nfunctions;
	/* TF_KEYAVG */
	const char *const *col_names;
	const int *col_units;		/* enum tf_unit */
	size_t ncols;
	const struct tf_op *ops;
	size_t nops;
	int64_t self_cpu_total_ns, self_dev_total_ns;	/* footers; -1 none */
	int ka_col[TF_KA_NROLES];	/* the column of each role (TF_KA_*), -1 when the table has none */
	char ka_device[16];		/* the word of the device columns ("CUDA", "XPU", ...); "" none */
	/* TF_STACKS */
	const struct tf_frame *frames;	/* by total, largest first */
	size_t nframes;
	uint64_t nstacks;
	int64_t stacks_total;		/* sum of the weights */
	int leaf_first;
	/* TF_GPULOG */
	const char *const *gpu_cols;	/* "utilization.gpu" ... (unit stripped) */
	const char *const *gpu_units;	/* "%", "B", "W", "C", "Hz", "s" (the [us] and [ms] counters), "" */
	size_t ngpu_cols;
	int gpu_header;			/* 0: no header, names from the units */
	const struct tf_gpu_row *gpu_rows;
	size_t ngpu_rows;
};

struct textfmt_parser;

struct textfmt_parser *textfmt_parser_new(int kind, const struct tf_limits *lim);
/* TP_ERR_INVALID (with the line), TP_ERR_TOOBIG, TP_ERR_NOMEM. */
int textfmt_parser_feed(struct textfmt_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/* End of input: the result, borrowed until free. */
int textfmt_parser_finish(struct textfmt_parser *p, const struct tf_result **res, struct tp_errbuf *err);
void textfmt_parser_free(struct textfmt_parser *p);

/* The mean of a gpu_log column for one GPU index (NaN when none). */
double tf_gpu_mean(const struct tf_result *r, size_t col, int gpu);
/* The column named so, or -1. */
int tf_col(const struct tf_result *r, const char *name);

#endif
