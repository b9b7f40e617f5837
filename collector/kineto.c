/*
 * kineto.c: the collector as its node's Kineto daemon (kineto.h). The wire
 * format is dynolog's IPC fabric as Kineto speaks it (docs/collector.md,
 * "Kineto daemon", says from which files): one datagram per message, a
 * 40-byte Metadata {size_t size; char type[32]} then size bytes of payload.
 */
#define _GNU_SOURCE	/* memmem */
#include "kineto.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* dynolog::ipcfabric::Metadata (FabricManager.h): TYPE_SIZE 32 */
struct kineto_meta {
	uint64_t size;
	char type[32];
};
/* dynolog::ipcfabric::LibkinetoContext (Utils.h) */
struct kineto_ctxt {
	int32_t gpu;
	int32_t pid;
	int64_t jobid;
};
/* dynolog::ipcfabric::LibkinetoRequest (Utils.h), then n int32 pids, the sender first */
struct kineto_req {
	int32_t type;
	int32_t n;
	int64_t jobid;
};
_Static_assert(sizeof(size_t) == 8, "Kineto's Metadata.size is a 64-bit size_t here");
_Static_assert(sizeof(struct kineto_meta) == 40, "Metadata is 40 bytes");
_Static_assert(sizeof(struct kineto_ctxt) == 16, "LibkinetoContext is 16 bytes");
_Static_assert(sizeof(struct kineto_req) == 16, "LibkinetoRequest is 16 bytes before its pids");

/* LibkinetoConfigType (IpcFabricConfigClient.h) */
#define KINETO_CONFIG_ACTIVITIES 0x2

struct kineto_arm {
	char id[KINETO_ID_MAX + 1];
	int rank;
	int steps, seconds;
	unsigned acts;
};

struct kineto_proc {
	pid_t pid;		/* the process that polls: the kernel's word (SCM_CREDENTIALS) */
	int64_t jobid;
	int gpu;		/* from "ctxt"; -1 until then */
	int rank;		/* TRAINSCOPE_RANK, else RANK, else LOCAL_RANK; -1 unknown */
	char run[256];		/* TRAINSCOPE_RUN; "" unset */
	char allowed[PATH_MAX];	/* where its Kineto writes on-demand traces */
	long long last_ms;	/* monotonic ms of its last datagram */
	/* the capture handed to it; id[0] == 0: none */
	char id[KINETO_ID_MAX + 1];
	char path[PATH_MAX];	/* the file asked for */
	long long deadline_ms;	/* its trace is given up after this */
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 2, 3)))
static void drop(struct kineto *k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(k->last_error, sizeof(k->last_error), fmt, ap);
	va_end(ap);
	k->dropped++;
	/* the first ten, then the 16th, 32nd, ...: a process that floods the socket does not flood the log */
	if (k->dropped <= 10 || (k->dropped & (k->dropped - 1)) == 0)
		fprintf(stderr, "trainscope-collect: kineto: ignored a datagram (%u so far): %s\n",
			k->dropped, k->last_error);
}

int kineto_parse_activities(const char *s)
{
	static const struct { const char *name; unsigned bit; } names[] = {
		{ "cpu", KINETO_ACT_CPU }, { "cuda", KINETO_ACT_CUDA },
		{ "memory", KINETO_ACT_MEMORY }, { "stacks", KINETO_ACT_STACKS },
	};
	unsigned acts = 0;

	if (!s || !*s)
		return KINETO_ACT_CPU | KINETO_ACT_CUDA;
	while (*s) {
		size_t len = strcspn(s, ",");
		size_t i;

		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (strlen(names[i].name) == len && !strncmp(s, names[i].name, len))
				break;
		if (i == sizeof(names) / sizeof(names[0]))
			return -1;
		acts |= names[i].bit;
		s += len;
		if (*s == ',')
			s++;
	}
	return (int)acts;
}

/*
 * The on-demand config, in the keys Kineto's Config.cpp reads; the trigger
 * lines as dynolog's CLI writes them (cli/src/commands/gputrace.rs): by
 * iteration, PROFILE_START_ITERATION=0 with ROUNDUP 1 starts at the next
 * step; by time, PROFILE_START_TIME=0 starts after Kineto's warm-up.
 * ACTIVITY_TYPES is written only when cpu or cuda is left out (absent,
 * Kineto traces every type it has), with names every Kineto since 2022
 * knows: one it does not know makes it throw the whole config away.
 */
int kineto_config(char *buf, size_t size, const char *path, const char *id, int steps,
		  int seconds, unsigned acts)
{
	char trigger[128], types[160] = "";
	int n;

	if (steps > 0)
		snprintf(trigger, sizeof(trigger),
			 "PROFILE_START_ITERATION=0\nPROFILE_START_ITERATION_ROUNDUP=1\n"
			 "ACTIVITIES_ITERATIONS=%d\n", steps);
	else
		snprintf(trigger, sizeof(trigger),
			 "PROFILE_START_TIME=0\nACTIVITIES_DURATION_MSECS=%lld\n",
			 (long long)seconds * 1000);
	if ((acts & (KINETO_ACT_CPU | KINETO_ACT_CUDA)) == KINETO_ACT_CPU)
		snprintf(types, sizeof(types),
			 "ACTIVITY_TYPES=cpu_op,user_annotation,python_function,cpu_instant_event\n");
	else if ((acts & (KINETO_ACT_CPU | KINETO_ACT_CUDA)) == KINETO_ACT_CUDA)
		snprintf(types, sizeof(types),
			 "ACTIVITY_TYPES=kernel,gpu_memcpy,gpu_memset,cuda_runtime,"
			 "gpu_user_annotation\n");
	n = snprintf(buf, size,
		     "ACTIVITIES_LOG_FILE=%s\n%s%s"
		     "PROFILE_REPORT_INPUT_SHAPES=%s\nPROFILE_PROFILE_MEMORY=%s\n"
		     "PROFILE_WITH_STACK=%s\nREQUEST_TRACE_ID=%s\n",
		     path, trigger, types,
		     (acts & KINETO_ACT_CPU) ? "true" : "false",
		     (acts & KINETO_ACT_MEMORY) ? "true" : "false",
		     (acts & KINETO_ACT_STACKS) ? "true" : "false", id);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

int kineto_json_complete(const char *path)
{
	char tail[8192 + 1];
	struct stat st;
	off_t at;
	ssize_t got, end;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		close(fd);
		return 0;
	}
	at = st.st_size > (off_t)(sizeof(tail) - 1) ? st.st_size - (off_t)(sizeof(tail) - 1) : 0;
	got = pread(fd, tail, sizeof(tail) - 1, at);
	close(fd);
	if (got <= 0)
		return 0;
	tail[got] = 0;
	end = got;
	while (end > 0 && strchr(" \t\r\n", tail[end - 1]))
		end--;
	if (end == 0 || tail[end - 1] != '}')
		return 0;	/* an event's '}' also ends a file cut short: more is asked below */
	/* Kineto's last member (output_json.cpp finalizeTrace): "traceName": "<file>" } */
	if (memmem(tail, (size_t)end, "\"traceName\"", 11))
		return 1;
	/* else a plain {"traceEvents": [...]}: ']' before the last '}' */
	end--;
	while (end > 0 && strchr(" \t\r\n", tail[end - 1]))
		end--;
	return end > 0 && tail[end - 1] == ']';
}

static int valid_id(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > KINETO_ID_MAX)
		return 0;
	return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int kineto_open(struct kineto *k, const char *name, const char *socket_dir, const char *spool)
{
	struct sockaddr_un addr;
	socklen_t len;
	struct stat st;
	size_t n;

	memset(k, 0, sizeof(*k));
	k->fd = -1;
	if (!name)
		name = KINETO_DAEMON_NAME;
	n = strlen(spool);
	while (n > 1 && spool[n - 1] == '/')
		n--;
	if (spool[0] != '/' || n >= sizeof(k->spool)) {
		fprintf(stderr, "trainscope-collect: kineto: the spool must be an absolute path "
			"shorter than %zu bytes: %s\n", sizeof(k->spool), spool);
		return -1;
	}
	memcpy(k->spool, spool, n);
	k->spool[n] = 0;
	/* Kineto inserts _<pid> before the first ".json" of the path it is given */
	if (strstr(k->spool, ".json")) {
		fprintf(stderr, "trainscope-collect: kineto: the spool's path must not hold "
			"\".json\" (Kineto would rename the trace): %s\n", k->spool);
		return -1;
	}
	if (stat(k->spool, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "trainscope-collect: kineto: %s: %s\n", k->spool,
			errno ? strerror(errno) : "not a folder");
		return -1;
	}
	/* Endpoint.h setAddress_: abstract "\0name\0" (the last NUL is part of the
	 * name, addrlen = family + strlen + 2), or socket_dir/name as a path. */
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	if (socket_dir && *socket_dir) {
		if ((size_t)snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", socket_dir,
				     name) >= sizeof(addr.sun_path)) {
			fprintf(stderr, "trainscope-collect: kineto: socket path too long: %s/%s\n",
				socket_dir, name);
			return -1;
		}
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(addr.sun_path) + 1);
	} else {
		if (strlen(name) == 0 || strlen(name) > sizeof(addr.sun_path) - 2) {
			fprintf(stderr, "trainscope-collect: kineto: bad endpoint name \"%s\"\n", name);
			return -1;
		}
		memcpy(addr.sun_path + 1, name, strlen(name));
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(name) + 2);
	}
	k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->fd < 0) {
		fprintf(stderr, "trainscope-collect: kineto: socket: %s\n", strerror(errno));
		return -1;
	}
	if (bind(k->fd, (struct sockaddr *)&addr, len) != 0) {
		int e = errno;

		if (e == EADDRINUSE)
			fprintf(stderr, "trainscope-collect: kineto: the daemon endpoint \"%s\" is "
				"taken: another Kineto daemon (dynolog, or another "
				"trainscope-collect) serves this node%s%s\n", name,
				socket_dir && *socket_dir ? " or the socket file exists: " : "",
				socket_dir && *socket_dir ? addr.sun_path : "");
		else
			fprintf(stderr, "trainscope-collect: kineto: bind \"%s\": %s\n", name,
				strerror(e));
		close(k->fd);
		k->fd = -1;
		errno = e;
		return -1;
	}
	if (socket_dir && *socket_dir)
		chmod(addr.sun_path, 0666);	/* as Endpoint.h: processes of other users poll too */
	/* the kernel's word for each sender's pid (SCM_CREDENTIALS), not the one it writes */
	if (setsockopt(k->fd, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)) != 0) {
		fprintf(stderr, "trainscope-collect: kineto: SO_PASSCRED: %s\n", strerror(errno));
		close(k->fd);
		k->fd = -1;
		return -1;
	}
	return 0;
}

void kineto_close(struct kineto *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	free(k->procs);
	free(k->arms);
	k->procs = NULL;
	k->arms = NULL;
	k->nprocs = k->narms = 0;
}

/* a rank value 0..1000000, else -1 */
static long rank_value(const char *v)
{
	char *end;
	long r = strtol(v, &end, 10);

	return end != v && !*end && r >= 0 && r <= 1000000 ? r : -1;
}

/* the rank, TRAINSCOPE_RUN and KINETO_ONDEMAND_TRACE_DIR from /proc/PID/environ */
static void read_environ(struct kineto_proc *p)
{
	char path[64], *buf = NULL;
	size_t len = 0, cap = 0;
	long ts_rank = -1, rank = -1, local = -1;
	const char *dir = NULL;
	ssize_t got;
	int fd;

	p->rank = -1;
	snprintf(p->allowed, sizeof(p->allowed), "/tmp/");
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "trainscope-collect: kineto: process %d: %s: %s (its rank is "
			"unknown)\n", (int)p->pid, path, strerror(errno));
		return;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *nb;

			if (cap >= (1u << 20))
				break;	/* an environment this big: the first MiB is read */
			nb = realloc(buf, cap + 65536);
			if (!nb)
				break;
			buf = nb;
			cap += 65536;
		}
		got = read(fd, buf + len, 4096);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	if (!buf)
		return;
	buf[len] = 0;
	for (size_t at = 0; at < len; at += strlen(buf + at) + 1) {
		const char *e = buf + at;

		if (!strncmp(e, "TRAINSCOPE_RANK=", 16))
			ts_rank = rank_value(e + 16);
		else if (!strncmp(e, "RANK=", 5))
			rank = rank_value(e + 5);
		else if (!strncmp(e, "LOCAL_RANK=", 11))
			local = rank_value(e + 11);
		else if (!strncmp(e, "TRAINSCOPE_RUN=", 15))
			snprintf(p->run, sizeof(p->run), "%s", e + 15);
		else if (!strncmp(e, "KINETO_ONDEMAND_TRACE_DIR=", 26) && e[26])
			dir = e + 26;
	}
	p->rank = (int)(ts_rank >= 0 ? ts_rank : rank >= 0 ? rank : local);
	if (dir) {
		size_t n = strlen(dir);

		snprintf(p->allowed, sizeof(p->allowed), "%s%s", dir,
			 n && dir[n - 1] == '/' ? "" : "/");
	}
	free(buf);
}

static struct kineto_proc *find_proc(struct kineto *k, pid_t pid, int64_t jobid)
{
	struct kineto_proc *p, *np;

	for (size_t i = 0; i < k->nprocs; i++)
		if (k->procs[i].pid == pid) {
			k->procs[i].jobid = jobid;
			k->procs[i].last_ms = now_ms();
			return &k->procs[i];
		}
	if (k->nprocs >= KINETO_PROCS_MAX) {
		drop(k, "%d processes known already, not one more (pid %d)", KINETO_PROCS_MAX, (int)pid);
		return NULL;
	}
	np = realloc(k->procs, (k->nprocs + 1) * sizeof(*np));
	if (!np)
		return NULL;
	k->procs = np;
	p = &k->procs[k->nprocs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->jobid = jobid;
	p->gpu = -1;
	p->last_ms = now_ms();
	read_environ(p);
	k->registered++;
	fprintf(stderr, "trainscope-collect: kineto: process %d registered (job %lld, rank %d, "
		"run %s)\n", (int)pid, (long long)jobid, p->rank, p->run[0] ? p->run : "unset");
	return p;
}

/* Answer as IPCMonitor.cpp does: Metadata {size, type} then size bytes, to the sender's name. */
static int answer(struct kineto *k, const struct sockaddr_un *to, socklen_t tolen,
		  const char *type, const void *data, size_t size)
{
	struct kineto_meta m;
	struct iovec iov[2];
	struct msghdr mh;

	memset(&m, 0, sizeof(m));
	m.size = size;
	memcpy(m.type, type, strlen(type) + 1);
	iov[0].iov_base = &m;
	iov[0].iov_len = sizeof(m);
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = size;
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = (void *)to;
	mh.msg_namelen = tolen;
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	/* non-blocking, as dynolog's trySendMsg; a client that left or whose queue is full misses it */
	if (sendmsg(k->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		fprintf(stderr, "trainscope-collect: kineto: could not answer \"%s\": %s\n", type,
			strerror(errno));
		return -1;
	}
	return 0;
}

static int jobid_count(const struct kineto *k, int64_t jobid)
{
	int n = 0;

	for (size_t i = 0; i < k->nprocs; i++)
		n += k->procs[i].jobid == jobid;
	return n;
}

/* the armed capture p takes, or -1 */
static long take_arm(struct kineto *k, const struct kineto_proc *p)
{
	if (p->id[0])
		return -1;	/* one capture at a time per process */
	if (k->run && p->run[0] && strcmp(p->run, k->run) != 0)
		return -1;	/* another job's */
	for (size_t i = 0; i < k->narms; i++)
		if (k->arms[i].rank == KINETO_ANY_RANK || (p->rank >= 0 && k->arms[i].rank == p->rank))
			return (long)i;
	return -1;
}

/* Take arm i for p and write its config into cfg; kept_back undoes it when the answer fails. */
static void hand_over(struct kineto *k, struct kineto_proc *p, size_t i, char *cfg, size_t size)
{
	const struct kineto_arm *a = &k->arms[i];

	snprintf(p->path, sizeof(p->path), "%s/kineto-%d-c%s.trace", k->spool, (int)p->pid, a->id);
	if (kineto_config(cfg, size, p->path, a->id, a->steps, a->seconds, a->acts) != 0) {
		cfg[0] = 0;	/* cannot happen with the spool's bounded length */
		return;
	}
	snprintf(p->id, sizeof(p->id), "%s", a->id);
	p->deadline_ms = now_ms() + ((a->steps > 0 ? 3600LL : a->seconds) + KINETO_TRACE_WAIT_S) * 1000;
	memmove(&k->arms[i], &k->arms[i + 1], (k->narms - i - 1) * sizeof(*k->arms));
	k->narms--;
}

/* The config reached p: say so, and warn when its Kineto would write it elsewhere. */
static void handed(struct kineto *k, const struct kineto_proc *p)
{
	k->handed++;
	fprintf(stderr, "trainscope-collect: kineto: capture %s handed to process %d (rank %d): %s\n",
		p->id, (int)p->pid, p->rank, p->path);
	/* Config.cpp isAllowedOnDemandTraceFile: under the folder, and no ".." anywhere */
	if (strncmp(p->path, p->allowed, strlen(p->allowed)) != 0 || strstr(p->path, "..")) {
		k->misplaced++;
		fprintf(stderr, "trainscope-collect: kineto: warning: Kineto since June 2026 writes "
			"on-demand traces only under %s (KINETO_ONDEMAND_TRACE_DIR of process %d, else "
			"/tmp/), not in %s: set the spool there, or KINETO_ONDEMAND_TRACE_DIR=%s in the "
			"job's environment\n", p->allowed, (int)p->pid, k->spool, k->spool);
	}
}

/* The config did not reach p: arm a back where it was, for p's next poll. */
static void kept_back(struct kineto *k, struct kineto_proc *p, size_t i, const struct kineto_arm *a)
{
	/* hand_over removed it, so the array has room for one more */
	memmove(&k->arms[i + 1], &k->arms[i], (k->narms - i) * sizeof(*k->arms));
	k->arms[i] = *a;
	k->narms++;
	p->id[0] = 0;
	fprintf(stderr, "trainscope-collect: kineto: capture %s kept for the next poll\n", a->id);
}

int kineto_handle(struct kineto *k)
{
	union { struct kineto_meta m; char b[KINETO_DGRAM_MAX]; } u;
	union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(struct ucred))]; } ctl;
	struct sockaddr_un from;
	struct iovec iov = { u.b, sizeof(u.b) };
	struct msghdr mh;
	struct cmsghdr *cm;
	pid_t sender = 0;
	ssize_t got;
	size_t fromlen;

	memset(&from, 0, sizeof(from));
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = &from;
	mh.msg_namelen = sizeof(from);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = ctl.b;
	mh.msg_controllen = sizeof(ctl.b);
	/* MSG_TRUNC: the datagram's real length, so an oversized one is seen as such */
	got = recvmsg(k->fd, &mh, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	if (got < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
	fromlen = mh.msg_namelen;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
		    cm->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred uc;

			memcpy(&uc, CMSG_DATA(cm), sizeof(uc));
			sender = uc.pid;
		}
	if ((size_t)got > sizeof(u.b) || (mh.msg_flags & MSG_TRUNC)) {
		drop(k, "%zd bytes, more than %d", got, KINETO_DGRAM_MAX);
		return 1;
	}
	if ((size_t)got < sizeof(u.m)) {
		drop(k, "%zd bytes, shorter than the 40-byte header", got);
		return 1;
	}
	if (u.m.size != (uint64_t)got - sizeof(u.m)) {
		drop(k, "header says %llu bytes of payload, the datagram has %zd",
		     (unsigned long long)u.m.size, got - (ssize_t)sizeof(u.m));
		return 1;
	}
	if (memchr(u.m.type, 0, sizeof(u.m.type)) == NULL) {
		drop(k, "message type not terminated");
		return 1;
	}
	/* an unnamed (unbound) sender cannot be answered; Kineto's endpoint is always named */
	if (fromlen <= offsetof(struct sockaddr_un, sun_path) + 1) {
		drop(k, "\"%s\" from an unnamed socket", u.m.type);
		return 1;
	}
	if (!strcmp(u.m.type, "ctxt")) {
		struct kineto_ctxt c;
		struct kineto_proc *p;
		int32_t count;

		if (u.m.size != sizeof(c)) {
			drop(k, "\"ctxt\" of %llu bytes, not %zu", (unsigned long long)u.m.size,
			     sizeof(c));
			return 1;
		}
		memcpy(&c, u.b + sizeof(u.m), sizeof(c));
		if (c.pid <= 0) {
			drop(k, "\"ctxt\" with pid %d", (int)c.pid);
			return 1;
		}
		p = find_proc(k, sender > 0 ? sender : c.pid, c.jobid);
		if (p)
			p->gpu = c.gpu;
		count = jobid_count(k, c.jobid);
		answer(k, &from, (socklen_t)fromlen, "ctxt", &count, sizeof(count));
		return 1;
	}
	if (!strcmp(u.m.type, "req")) {
		struct kineto_req r;
		struct kineto_proc *p;
		int32_t pid;
		long i = -1;
		struct kineto_arm taken;
		char cfg[PATH_MAX + 1024] = "";

		if (u.m.size < sizeof(r)) {
			drop(k, "\"req\" of %llu bytes, shorter than 16", (unsigned long long)u.m.size);
			return 1;
		}
		memcpy(&r, u.b + sizeof(u.m), sizeof(r));
		if (r.n <= 0 || u.m.size != sizeof(r) + (uint64_t)r.n * sizeof(int32_t)) {
			drop(k, "\"req\" with %d pids in %llu bytes", (int)r.n,
			     (unsigned long long)u.m.size);
			return 1;
		}
		memcpy(&pid, u.b + sizeof(u.m) + sizeof(r), sizeof(pid));
		if (pid <= 0) {
			drop(k, "\"req\" with pid %d", (int)pid);
			return 1;
		}
		k->polls++;
		p = find_proc(k, sender > 0 ? sender : pid, r.jobid);
		if (p && (r.type & KINETO_CONFIG_ACTIVITIES) && (i = take_arm(k, p)) >= 0) {
			taken = k->arms[i];
			hand_over(k, p, (size_t)i, cfg, sizeof(cfg));
		}
		/* nothing pending: an empty config (size 0), as IPCMonitor.cpp answers */
		if (answer(k, &from, (socklen_t)fromlen, "req", cfg, strlen(cfg)) == 0) {
			if (cfg[0])
				handed(k, p);
		} else if (cfg[0]) {
			kept_back(k, p, (size_t)i, &taken);
		}
		return 1;
	}
	drop(k, "unknown message type \"%s\"", u.m.type);
	return 1;
}

int kineto_arm(struct kineto *k, int rank, const char *id, int steps, int seconds,
	       const char *activities)
{
	struct kineto_arm *na;
	int acts;

	if (!id || !valid_id(id)) {
		snprintf(k->last_error, sizeof(k->last_error),
			 "capture id must be 1 to %d of A-Z a-z 0-9 _ -", KINETO_ID_MAX);
		return -1;
	}
	if ((steps > 0) == (seconds > 0) || steps < 0 || seconds < 0 || steps > 10000 ||
	    seconds > 3600) {
		snprintf(k->last_error, sizeof(k->last_error),
			 "capture %s: exactly one of steps (1..10000) or seconds (1..3600)", id);
		return -1;
	}
	if (rank < KINETO_ANY_RANK) {
		snprintf(k->last_error, sizeof(k->last_error), "capture %s: bad rank %d", id, rank);
		return -1;
	}
	acts = kineto_parse_activities(activities);
	if (acts < 0) {
		snprintf(k->last_error, sizeof(k->last_error),
			 "capture %s: activities are cpu, cuda, memory, stacks: %s", id, activities);
		return -1;
	}
	for (size_t i = 0; i < k->narms; i++)
		if (!strcmp(k->arms[i].id, id) && k->arms[i].rank == rank) {
			snprintf(k->last_error, sizeof(k->last_error),
				 "capture %s is already armed for rank %d", id, rank);
			return -1;
		}
	na = realloc(k->arms, (k->narms + 1) * sizeof(*na));
	if (!na) {
		snprintf(k->last_error, sizeof(k->last_error), "out of memory");
		return -1;
	}
	k->arms = na;
	memset(&na[k->narms], 0, sizeof(*na));
	snprintf(na[k->narms].id, sizeof(na[k->narms].id), "%s", id);
	na[k->narms].rank = rank;
	na[k->narms].steps = steps;
	na[k->narms].seconds = seconds;
	na[k->narms].acts = (unsigned)acts;
	k->narms++;
	return 0;
}

size_t kineto_ranks(const struct kineto *k, int *out, size_t max)
{
	size_t n = 0;
	int last = -1;

	/* ascending distinct: each pass takes the smallest rank above the last one */
	for (;;) {
		int next = -1;

		for (size_t i = 0; i < k->nprocs; i++) {
			const struct kineto_proc *p = &k->procs[i];

			if (p->rank > last && (next < 0 || p->rank < next) &&
			    !(k->run && p->run[0] && strcmp(p->run, k->run) != 0))
				next = p->rank;
		}
		if (next < 0)
			return n;
		if (n < max)
			out[n] = next;
		n++;
		last = next;
	}
}

int kineto_cancel(struct kineto *k, const char *id)
{
	for (size_t i = 0; i < k->narms; i++)
		if (!strcmp(k->arms[i].id, id)) {
			memmove(&k->arms[i], &k->arms[i + 1], (k->narms - i - 1) * sizeof(*k->arms));
			k->narms--;
			return 1;
		}
	return 0;
}

static int proc_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

static void fill_done(struct kineto_done *d, const struct kineto_proc *p, int ok)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->id, sizeof(d->id), "%s", p->id);
	d->rank = p->rank;
	d->pid = p->pid;
	d->ok = ok;
}

int kineto_check(struct kineto *k, struct kineto_done *d)
{
	long long now = now_ms();

	for (size_t i = 0; i < k->nprocs; i++) {
		struct kineto_proc *p = &k->procs[i];
		int alive = proc_alive(p->pid);

		if (p->id[0] && kineto_json_complete(p->path)) {
			fill_done(d, p, 1);
			/* kineto-<pid>-c<ID>.trace -> kineto-<pid>-c<ID>.pt.trace.json */
			snprintf(d->path, sizeof(d->path), "%.*s.pt.trace.json",
				 (int)(strlen(p->path) - strlen(".trace")), p->path);
			if (rename(p->path, d->path) != 0) {
				d->ok = 0;
				snprintf(d->why, sizeof(d->why), "cannot rename %s: %s", p->path,
					 strerror(errno));
				d->path[0] = 0;
			}
			p->id[0] = 0;
			return 1;
		}
		if (p->id[0] && (!alive || now > p->deadline_ms)) {
			fill_done(d, p, 0);
			if (!alive)
				snprintf(d->why, sizeof(d->why),
					 "process %d exited before its trace was written", (int)p->pid);
			else
				snprintf(d->why, sizeof(d->why),
					 "no trace from process %d at %s in the time allowed (is its "
					 "KINETO_ONDEMAND_TRACE_DIR, else /tmp/, around the spool?)",
					 (int)p->pid, p->path);
			p->id[0] = 0;
			return 1;
		}
		if (!p->id[0] && (!alive || now - p->last_ms > KINETO_KEEPALIVE_MS)) {
			fprintf(stderr, "trainscope-collect: kineto: process %d (rank %d) %s\n",
				(int)p->pid, p->rank, alive ? "stopped polling" : "exited");
			k->procs[i] = k->procs[--k->nprocs];
			k->gone++;
			i--;
		}
	}
	return 0;
}
