/*
 * spool.c: chunks into the spool folder, atomically and bounded (spool.h).
 * Called only from the library's worker thread, never from the training
 * thread, so plain blocking file I/O is fine here; what must not happen is
 * waiting for space: a full spool drops.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spool.h"

int spool_open(struct spool *s, const char *dir, uint64_t max)
{
	memset(s, 0, sizeof(*s));
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	if (!(s->dir = strdup(dir)))
		return -1;
	s->max = max ? max : SPOOL_DEFAULT_MAX;
	s->pid = getpid();
	return 0;
}

void spool_set_tag(struct spool *s, const char *tag)
{
	snprintf(s->tag, sizeof(s->tag), "%s", tag ? tag : "");
}

uint64_t spool_used(const struct spool *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;
	struct stat st;
	uint64_t used = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (!fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode))
			used += (uint64_t)st.st_size;
	closedir(d);
	return used;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int spool_write(struct spool *s, const void *data, size_t len)
{
	char tmp[4096], final[4096];
	int fd, rc;

	if (spool_used(s) + len > s->max) {
		if (!s->warned++)
			fprintf(stderr, "trainscope-cupti: spool %s is full (TRAINSCOPE_SPOOL_MAX=%llu bytes): "
				"dropping chunks until the agent ships some; the count comes at exit\n",
				s->dir, (unsigned long long)s->max);
		s->dropped++;
		s->dropped_bytes += len;
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s/.trace-%d-%llu.tmp", s->dir, (int)s->pid, s->seq);
	snprintf(final, sizeof(final), "%s/trace-%d-%llu%s%s.pt.trace.json", s->dir, (int)s->pid, s->seq,
		 s->tag[0] ? "-" : "", s->tag);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	rc = fd < 0 ? -1 : write_all(fd, data, len);
	if (fd >= 0 && close(fd))
		rc = -1;
	if (!rc && rename(tmp, final))
		rc = -1;
	if (rc) {
		if (!s->warned++)
			fprintf(stderr, "trainscope-cupti: cannot write %s: %s; dropping chunks, the count comes at exit\n",
				final, strerror(errno));
		unlink(tmp);
		s->dropped++;
		s->dropped_bytes += len;
		return -1;
	}
	s->seq++;
	return 0;
}

void spool_release(struct spool *s)
{
	if (s->dropped)
		fprintf(stderr, "trainscope-cupti: %llu chunks (%llu bytes) dropped: spool %s full or unwritable\n",
			s->dropped, s->dropped_bytes, s->dir);
	free(s->dir);
	memset(s, 0, sizeof(*s));
}
