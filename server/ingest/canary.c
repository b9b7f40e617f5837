/*
 * canary.c: rlhf-canary metrics.json (see canary.h).
 *
 * What is required is what every file the canary writes has: run_id, and
 * perf with step_time.count and max_mem_mb; with steps counted, their mean.
 * The rest may be null or absent (the profiler block is absent in files
 * from the canary's first commit, null when training ended before the
 * profiled steps). Figures are refused outside what the writer can produce
 * (negative seconds or memory) or past what the API's ns and bytes hold.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "ingest/canary.h"

/* ---- detection ---- */

static const char *const canary_keys[] = { "run_id", "duration_seconds", "perf", "stability",	/* the canary's own */
					   "timestamp", "env", "config", "profiler", "status" };
#define CANARY_OWN_KEYS 4

static const uint8_t *skip_space(const uint8_t *p, const uint8_t *e)
{
	while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
		p++;
	return p;
}

/* Past the string that opens at p; NULL when it does not close before e. */
static const uint8_t *string_end(const uint8_t *p, const uint8_t *e)
{
	for (p++; p < e; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* The ',' or '}' that ends the value at p (strings and nesting skipped); NULL when not before e. */
static const uint8_t *value_end(const uint8_t *p, const uint8_t *e)
{
	int depth = 0;

	while (p < e) {
		if (*p == '"') {
			if (!(p = string_end(p, e)))
				return NULL;
			continue;
		}
		if (*p == '{' || *p == '[')
			depth++;
		else if ((*p == '}' || *p == ']') && !depth--)
			return p;
		else if (*p == ',' && !depth)
			return p;
		p++;
	}
	return NULL;
}

/* Which canary key k is (its index), or -1. */
static int canary_key(const uint8_t *k, size_t n)
{
	for (size_t i = 0; i < sizeof(canary_keys) / sizeof(canary_keys[0]); i++)
		if (strlen(canary_keys[i]) == n && !memcmp(k, canary_keys[i], n))
			return (int)i;
	return -1;
}

int canary_detect(const uint8_t *p, size_t n, int at_end)
{
	const uint8_t *e = p + n, *q;
	int k;

	p = skip_space(p, e);
	if (p < e && *p != '{')
		return 0;
	for (p = p < e ? p + 1 : p;;) {
		p = skip_space(p, e);
		if (p == e)
			break;
		if (*p != '"')
			return 0;	/* the object ends, or it is not JSON */
		if (!(q = string_end(p, e)))
			break;
		if ((k = canary_key(p + 1, (size_t)(q - p - 2))) < 0)
			return 0;
		if (k < CANARY_OWN_KEYS)
			return 1;
		p = skip_space(q, e);
		if (p < e && *p != ':')
			return 0;
		if (p == e || !(q = value_end(skip_space(p + 1, e), e)))
			break;
		if (*q != ',')
			return 0;
		p = q + 1;
	}
	return at_end ? 0 : -1;
}

/* ---- parsing ---- */

struct canary_parser {
	uint8_t *buf;
	size_t n, cap, max;
	json_t *root;
	struct canary_metrics m;
	struct tp_errbuf *err;
};

struct canary_parser *canary_parser_new(size_t max_bytes)
{
	struct canary_parser *p = tp_calloc(1, sizeof(*p));

	if (p)
		p->max = max_bytes;
	return p;
}

void canary_parser_free(struct canary_parser *p)
{
	if (!p)
		return;
	canary_metrics_clear(&p->m);
	json_decref(p->root);
	tp_free(p->buf);
	tp_free(p);
}

int canary_parser_feed(struct canary_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err)
{
	if (len > p->max - p->n)
		return tp_fail(err, TP_ERR_TOOBIG, "canary_too_large",
			       "canary metrics.json: more than %zu bytes (the canary writes a few KB)", p->max);
	if (p->n + len > p->cap) {
		size_t cap = p->cap ? p->cap : 16384;
		while (cap < p->n + len)
			cap *= 2;
		uint8_t *nb = tp_realloc(p->buf, cap);
		if (!nb)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		p->buf = nb;
		p->cap = cap;
	}
	memcpy(p->buf + p->n, data, len);
	p->n += len;
	return TP_OK;
}

static int invalid(struct canary_parser *p, const char *path, const char *what)
{
	return tp_fail(p->err, TP_ERR_INVALID, "invalid_canary", "canary metrics.json: %s: %s", path, what);
}

/*
 * A number member in [lo, hi] into *out: NaN when null or absent and optional,
 * else an error naming the path.
 */
static int number(struct canary_parser *p, const json_t *o, const char *key, const char *path, int required,
		  double lo, double hi, double *out)
{
	const json_t *v = json_object_get(o, key);

	*out = NAN;
	if (!v || json_is_null(v))
		return required ? invalid(p, path, "required, a number") : TP_OK;
	if (!json_is_number(v))
		return invalid(p, path, "not a number");
	*out = json_number_value(v);
	if (!(*out >= lo && *out <= hi))
		return invalid(p, path, *out < lo ? "below what the canary writes" : "past what it can hold");
	return TP_OK;
}

/* A whole number >= 0 (-1 when optional and null or absent). */
static int count(struct canary_parser *p, const json_t *o, const char *key, const char *path, int required,
		 int64_t *out)
{
	const json_t *v = json_object_get(o, key);

	*out = -1;
	if (!v || json_is_null(v))
		return required ? invalid(p, path, "required, a whole number") : TP_OK;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return invalid(p, path, "not a whole number >= 0");
	*out = json_integer_value(v);
	return TP_OK;
}

/* A string member (NULL when null or absent and optional), copied. */
static int string(struct canary_parser *p, const json_t *o, const char *key, const char *path, int required,
		  char **out)
{
	const json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v))
		return required ? invalid(p, path, "required, a string") : TP_OK;
	if (!json_is_string(v))
		return invalid(p, path, "not a string");
	if (!(*out = tp_strdup(json_string_value(v))))
		return tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory");
	return TP_OK;
}

/* An object member (NULL when null or absent and optional). */
static int object(struct canary_parser *p, const json_t *o, const char *key, const char *path, int required,
		  const json_t **out)
{
	const json_t *v = json_object_get(o, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return required ? invalid(p, path, "required, an object") : TP_OK;
	if (!json_is_object(v))
		return invalid(p, path, "not an object");
	*out = v;
	return TP_OK;
}

/* env and config, kept as they are (compact JSON) */
static int keep_object(struct canary_parser *p, const char *key, char **out)
{
	const json_t *v;
	int rc;

	if ((rc = object(p, p->root, key, key, 0, &v)) || !v)
		return rc;
	if (!(*out = json_dumps(v, JSON_COMPACT)))
		return tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory");
	return TP_OK;
}

/* Seconds in ns, MiB in bytes and ms in ns must fit int64 (the API's units). */
#define MAX_S 9.2e9
#define MAX_MB 8.7e12
#define MAX_MS 9.2e12

static int read_step_time(struct canary_parser *p, const json_t *perf)
{
	const json_t *st;
	char path[64];
	int rc;

	if ((rc = object(p, perf, "step_time", "perf.step_time", 1, &st)) ||
	    (rc = count(p, st, "count", "perf.step_time.count", 1, &p->m.perf.steps)))
		return rc;
	for (int i = 0; i < CANARY_NSTAT; i++) {
		snprintf(path, sizeof(path), "perf.step_time.%s", canary_stat_names[i]);
		/* with steps counted the mean is there; the warm-up-only case keeps every step */
		if ((rc = number(p, st, canary_stat_names[i], path, i == CANARY_MEAN && p->m.perf.steps > 0, 0, MAX_S,
				 &p->m.perf.step_s[i])))
			return rc;
	}
	return TP_OK;
}

static int read_perf(struct canary_parser *p)
{
	const json_t *perf;
	struct canary_perf *f = &p->m.perf;
	int rc;

	if ((rc = object(p, p->root, "perf", "perf", 1, &perf)) || (rc = read_step_time(p, perf)) ||
	    (rc = number(p, perf, "approx_tokens_per_sec", "perf.approx_tokens_per_sec", 0, 0, 1e18, &f->tokens_per_s)) ||
	    (rc = number(p, perf, "max_mem_mb", "perf.max_mem_mb", 1, 0, MAX_MB, &f->max_mem_mb)) ||
	    (rc = number(p, perf, "gpu_utilization_avg", "perf.gpu_utilization_avg", 0, 0, 100, &f->gpu_util_pct)))
		return rc;
	return number(p, perf, "dataloader_wait_pct", "perf.dataloader_wait_pct", 0, 0, 1e18, &f->dataloader_wait_pct);
}

static int read_stability(struct canary_parser *p)
{
	const json_t *s, *d;
	int rc;

	p->m.loss_diverged = -1;
	if ((rc = object(p, p->root, "stability", "stability", 0, &s)) || !s) {
		p->m.nan_steps = p->m.inf_steps = -1;
		p->m.final_loss = NAN;
		return rc;
	}
	if ((rc = count(p, s, "nan_steps", "stability.nan_steps", 0, &p->m.nan_steps)) ||
	    (rc = count(p, s, "inf_steps", "stability.inf_steps", 0, &p->m.inf_steps)) ||
	    (rc = number(p, s, "final_loss", "stability.final_loss", 0, -HUGE_VAL, HUGE_VAL, &p->m.final_loss)))
		return rc;
	if ((d = json_object_get(s, "loss_diverged")) && !json_is_null(d)) {
		if (!json_is_boolean(d))
			return invalid(p, "stability.loss_diverged", "not true or false");
		p->m.loss_diverged = json_is_true(d);
	}
	return TP_OK;
}

/* profiler.top_cpu_ops or top_cuda_ops */
static int read_ops(struct canary_parser *p, const json_t *prof, int dev)
{
	static const char *const list[] = { "top_cpu_ops", "top_cuda_ops" };
	static const char *const ms[] = { "self_cpu_time_ms", "self_cuda_time_ms" };
	const json_t *a = json_object_get(prof, list[dev]), *o;
	char path[96];
	size_t i;
	int rc;

	if (!a || json_is_null(a))
		return TP_OK;
	snprintf(path, sizeof(path), "profiler.%s", list[dev]);
	if (!json_is_array(a))
		return invalid(p, path, "not an array");
	if (json_array_size(a) > CANARY_MAX_OPS)
		return invalid(p, path, "more ops than the canary lists (at most 10)");
	if (!(p->m.ops[dev] = tp_calloc(json_array_size(a) + 1, sizeof(*p->m.ops[dev]))))
		return tp_fail(p->err, TP_ERR_NOMEM, NULL, "out of memory");
	json_array_foreach(a, i, o) {
		struct canary_op *op = &p->m.ops[dev][i];
		snprintf(path, sizeof(path), "profiler.%s[%zu]", list[dev], i);
		if (!json_is_object(o))
			return invalid(p, path, "not an object");
		p->m.nops[dev]++;
		if ((rc = string(p, o, "name", path, 1, &op->name)) ||
		    (rc = number(p, o, ms[dev], path, 1, -MAX_MS, MAX_MS, &op->self_ms)) ||
		    (rc = count(p, o, "count", path, 1, &op->count)))
			return rc;
	}
	return TP_OK;
}

static int read_profiler(struct canary_parser *p)
{
	const json_t *prof;
	struct canary_perf *f = &p->m.perf;
	int rc;

	if ((rc = object(p, p->root, "profiler", "profiler", 0, &prof)) || !prof)
		return rc;
	f->has_profiler = 1;
	if ((rc = string(p, prof, "trace_path", "profiler.trace_path", 0, &p->m.trace_path)) ||
	    (rc = number(p, prof, "cuda_time_total_ms", "profiler.cuda_time_total_ms", 1, -MAX_MS, MAX_MS,
			 &f->cuda_total_ms)) ||
	    (rc = number(p, prof, "cpu_time_total_ms", "profiler.cpu_time_total_ms", 1, -MAX_MS, MAX_MS,
			 &f->cpu_total_ms)) ||
	    (rc = number(p, prof, "self_cuda_time_total_ms", "profiler.self_cuda_time_total_ms", 0, -MAX_MS, MAX_MS,
			 &f->self_cuda_total_ms)) ||
	    (rc = read_ops(p, prof, CANARY_CPU)))
		return rc;
	return read_ops(p, prof, CANARY_CUDA);
}

static int read_root(struct canary_parser *p)
{
	int rc;

	if ((rc = string(p, p->root, "run_id", "run_id", 1, &p->m.run_id)) ||
	    (rc = string(p, p->root, "timestamp", "timestamp", 0, &p->m.timestamp)) ||
	    (rc = string(p, p->root, "status", "status", 0, &p->m.status)) ||
	    (rc = number(p, p->root, "duration_seconds", "duration_seconds", 0, 0, MAX_S, &p->m.duration_s)) ||
	    (rc = keep_object(p, "env", &p->m.env_json)) || (rc = keep_object(p, "config", &p->m.config_json)) ||
	    (rc = read_perf(p)) || (rc = read_stability(p)))
		return rc;
	return read_profiler(p);
}

int canary_parser_finish(struct canary_parser *p, const struct canary_metrics **out, struct tp_errbuf *err)
{
	json_error_t je;
	int rc;

	p->err = err;
	if (!(p->root = json_loadb((const char *)p->buf, p->n, JSON_REJECT_DUPLICATES, &je)))
		return tp_fail(err, TP_ERR_INVALID, "invalid_canary", "canary metrics.json: line %d, column %d: %s",
			       je.line, je.column, je.text);
	if (!json_is_object(p->root))
		return invalid(p, "the document", "not an object");
	if ((rc = read_root(p)))
		return rc;
	*out = &p->m;
	return TP_OK;
}
