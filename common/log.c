/*
 * log.c: one-line structured logs on stderr:
 *   2026-11-22T17:20:01.123Z level=info mod=http msg="..."
 * The threshold is checked by the macros in tp.h before any formatting.
 */
#include <stdarg.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "tp.h"

int tp_log_threshold = TP_LOG_INFO;

static const char *level_names[] = { "error", "warn", "info", "debug" };

void tp_log_write(int level, const char *prefix, const char *fmt, ...)
{
	char raw[1024], msg[2048], stamp[32];
	size_t i, o = 0;
	struct timespec ts;
	struct tm tm;
	va_list ap;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	/* one line whatever the message holds: quote, backslash and control bytes escaped */
	for (i = 0; raw[i] && o + 5 < sizeof(msg); i++) {
		unsigned char c = (unsigned char)raw[i];
		if (c == '"' || c == '\\') {
			msg[o++] = '\\';
			msg[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			o += (size_t)snprintf(msg + o, sizeof(msg) - o, "\\x%02x", c);
		} else {
			msg[o++] = (char)c;
		}
	}
	msg[o] = 0;
	/* one fprintf so that lines from different threads do not interleave */
	fprintf(stderr, "%s.%03ldZ level=%s mod=%s msg=\"%s\"\n", stamp, ts.tv_nsec / 1000000,
		level_names[level < 0 ? 0 : level > 3 ? 3 : level], prefix, msg);
}

void tp_thread_name(const char *name)
{
	char n[16];

	snprintf(n, sizeof(n), "%s", name);
	prctl(PR_SET_NAME, n, 0, 0, 0);
}
