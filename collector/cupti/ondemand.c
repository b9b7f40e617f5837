/*
 * ondemand.c: the .capture request and the .capture-<ID>.done answer
 * (ondemand.h). Called on the library's worker thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ondemand.h"

static int valid_id(const char *s, size_t n)
{
	size_t i;

	if (n < 1 || n > ONDEMAND_ID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '_' || s[i] == '-'))
			return 0;
	return 1;
}

static int number(const char *s, size_t n, long max, long *out)
{
	long v = 0;
	size_t i;

	if (n < 1 || n > 9)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static int activities(const char *s, size_t n, unsigned *out, char *why, size_t size)
{
	static const struct {
		const char *name;
		unsigned bit;
	} names[] = { { "cpu", ONDEMAND_CPU }, { "cuda", ONDEMAND_CUDA }, { "memory", ONDEMAND_MEMORY },
		      { "stacks", ONDEMAND_STACKS } };
	size_t i, k, len;

	*out = 0;
	for (i = 0; i < n; i += len + 1) {
		len = strcspn(s + i, ",");
		if (i + len > n)
			len = n - i;
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
			if (strlen(names[k].name) == len && !strncmp(names[k].name, s + i, len))
				break;
		if (k == sizeof(names) / sizeof(names[0])) {
			snprintf(why, size, "unknown activity '%.*s'", (int)(len > 32 ? 32 : len), s + i);
			return -1;
		}
		*out |= names[k].bit;
	}
	return 0;
}

int ondemand_parse(const char *line, struct ondemand_req *r, char *why, size_t size)
{
	const char *p = line;
	int have_steps = 0, have_seconds = 0, have_acts = 0;

	memset(r, 0, sizeof(*r));
	while (*p && *p != '\n') {
		size_t n = strcspn(p, " \n"), k = strcspn(p, "=");
		const char *v = p + k + 1;
		size_t vn = n - k - 1;

		if (k >= n) {
			snprintf(why, size, "expected key=value, got '%.*s'", (int)(n > 32 ? 32 : n), p);
			return -1;
		}
		if (k == 2 && !strncmp(p, "id", 2)) {
			if (!valid_id(v, vn)) {
				snprintf(why, size, "bad id (expected 1 to %d of A-Z a-z 0-9 _ -)", ONDEMAND_ID_MAX);
				return -1;
			}
			memcpy(r->id, v, vn);
			r->id[vn] = 0;
		} else if (k == 5 && !strncmp(p, "steps", 5)) {
			if (number(v, vn, 10000, &r->steps)) {
				snprintf(why, size, "bad steps (expected 0 to 10000)");
				return -1;
			}
			have_steps = 1;
		} else if (k == 7 && !strncmp(p, "seconds", 7)) {
			if (number(v, vn, ONDEMAND_MAX_S, &r->seconds)) {
				snprintf(why, size, "bad seconds (expected 0 to %d)", ONDEMAND_MAX_S);
				return -1;
			}
			have_seconds = 1;
		} else if (k == 10 && !strncmp(p, "activities", 10)) {
			if (activities(v, vn, &r->activities, why, size))
				return -1;
			have_acts = 1;
		}	/* other keys: a later collector's; ignored */
		p += n;
		while (*p == ' ')
			p++;
	}
	if (!r->id[0]) {
		snprintf(why, size, "no id");
		return -1;
	}
	if (!have_steps || !have_seconds || !have_acts) {
		snprintf(why, size, "expected id, steps, seconds and activities");
		return -1;
	}
	if ((r->steps > 0) == (r->seconds > 0)) {
		snprintf(why, size, "expected exactly one of steps and seconds above 0");
		return -1;
	}
	if (!(r->activities & (ONDEMAND_CPU | ONDEMAND_CUDA | ONDEMAND_MEMORY))) {
		snprintf(why, size, "none of the activities asked is one CUPTI records (cpu, cuda, memory)");
		return -1;
	}
	return 0;
}

int ondemand_read(const char *dir, struct ondemand_req *r, int *valid, char *why, size_t size)
{
	char path[4096], line[512];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/" ONDEMAND_REQUEST, dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	line[n > 0 ? n : 0] = 0;
	*valid = ondemand_parse(line, r, why, size) == 0;
	return 1;
}

int ondemand_done(const char *dir, const char *id, const char *text)
{
	char tmp[4096], final[4096];
	int fd, ok;
	size_t len = strlen(text);

	snprintf(tmp, sizeof(tmp), "%s/.capture-%s.done.tmp", dir, id);
	snprintf(final, sizeof(final), "%s/.capture-%s.done", dir, id);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return -1;
	ok = write(fd, text, len) == (ssize_t)len && write(fd, "\n", 1) == 1;
	ok = (close(fd) == 0) && ok && rename(tmp, final) == 0;
	if (!ok) {
		int e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}
