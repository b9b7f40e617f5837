/*
 * tp.h: what every Trainscope module shares: the error codes, the error
 * detail buffer, and the logging macros.
 *
 * Functions return 0 (TP_OK) on success and a negative enum tp_err otherwise.
 * Detail goes into an optional struct tp_errbuf, filled where the failure is
 * understood and never overwritten by a caller (the first message wins).
 * HTTP status codes are derived from enum tp_err in one place, http.c.
 */
#ifndef TP_H
#define TP_H

#include <stddef.h>
#include <stdint.h>

enum tp_err {
	TP_OK = 0,
	TP_ERR_NOMEM = -1,
	TP_ERR_INVALID = -2,	/* the input is malformed: client's fault */
	TP_ERR_TOOBIG = -3,	/* a configured cap was exceeded */
	TP_ERR_NOTFOUND = -4,
	TP_ERR_IO = -5,
	TP_ERR_DB = -6,
	TP_ERR_UNSUPPORTED = -7,	/* well-formed but not something we take */
	TP_ERR_CONFLICT = -8,
	TP_ERR_UNAVAILABLE = -9,	/* a service we need (the database server) is down: try again */
};

/* A short machine-readable name ("invalid", "too_big", ...). */
const char *tp_strerror(int rc);

#define TP_ERRBUF_SIZE 256
struct tp_errbuf {
	int rc;			/* the enum tp_err of the first failure, 0 if none */
	char code[48];		/* snake_case error code for the API */
	char msg[TP_ERRBUF_SIZE];
};

/*
 * Set code and message unless a message is already there (first wins).
 * Returns rc so that callers can write `return tp_fail(err, rc, ...)`.
 * err may be NULL.
 */
int tp_fail(struct tp_errbuf *err, int rc, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
#include <stdarg.h>
int tp_failv(struct tp_errbuf *err, int rc, const char *code, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
void tp_errbuf_clear(struct tp_errbuf *err);

/* Logging: one line per message, level checked before formatting. */
enum tp_log_level { TP_LOG_ERR = 0, TP_LOG_WARN, TP_LOG_INFO, TP_LOG_DEBUG };
extern int tp_log_threshold;
void tp_log_write(int level, const char *prefix, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Name the calling thread (at most 15 bytes show: top -H, perf, gdb); best effort. */
void tp_thread_name(const char *name);

#define tp_log(lvl, ...) \
	do { if ((lvl) <= tp_log_threshold) tp_log_write((lvl), LOG_PREFIX, __VA_ARGS__); } while (0)
#define tp_err(...) tp_log(TP_LOG_ERR, __VA_ARGS__)
#define tp_warn(...) tp_log(TP_LOG_WARN, __VA_ARGS__)
#define tp_info(...) tp_log(TP_LOG_INFO, __VA_ARGS__)
#define tp_dbg(...) tp_log(TP_LOG_DEBUG, __VA_ARGS__)

/* Nanoseconds since the Unix epoch, wall clock. */
int64_t tp_now_ns(void);

/* a + b, saturated at the int64 range: sums of durations from untrusted traces */
static inline int64_t tp_sat_add(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* a - b, saturated likewise */
static inline int64_t tp_sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}

/* The midpoint of a and b (rounded down), which a + b may not hold: medians */
static inline int64_t tp_mid(int64_t a, int64_t b)
{
	return (a >> 1) + (b >> 1) + (a & b & 1);
}

/* A double rounded to int64, saturated (NaN gives 0): means of int64 values */
static inline int64_t tp_round_i64(double x)
{
	if (x != x)
		return 0;
	if (x >= 9223372036854775807.0)	/* 2^63 as a double */
		return INT64_MAX;
	if (x <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)(x < 0 ? x - 0.5 : x + 0.5);
}

#endif
