/*
 * err.c: error names and the first-message-wins error buffer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tp.h"

const char *tp_strerror(int rc)
{
	switch (rc) {
	case TP_OK: return "ok";
	case TP_ERR_NOMEM: return "out_of_memory";
	case TP_ERR_INVALID: return "invalid";
	case TP_ERR_TOOBIG: return "too_big";
	case TP_ERR_NOTFOUND: return "not_found";
	case TP_ERR_IO: return "io_error";
	case TP_ERR_DB: return "database_error";
	case TP_ERR_UNSUPPORTED: return "unsupported";
	case TP_ERR_CONFLICT: return "conflict";
	case TP_ERR_UNAVAILABLE: return "unavailable";
	}
	return "error";
}

int tp_failv(struct tp_errbuf *err, int rc, const char *code, const char *fmt, va_list ap)
{
	if (!err || err->msg[0])
		return rc;
	err->rc = rc;
	snprintf(err->code, sizeof(err->code), "%s", code ? code : tp_strerror(rc));
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	return rc;
}

int tp_fail(struct tp_errbuf *err, int rc, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tp_failv(err, rc, code, fmt, ap);
	va_end(ap);
	return rc;
}

void tp_errbuf_clear(struct tp_errbuf *err)
{
	if (err)
		memset(err, 0, sizeof(*err));
}

int64_t tp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
