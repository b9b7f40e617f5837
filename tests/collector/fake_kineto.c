/*
 * fake_kineto.c: a stand-in for a PyTorch process with KINETO_USE_DAEMON=1,
 * for check_kineto. It speaks to the daemon byte for byte as Kineto's
 * IpcFabricConfigClient does (pytorch/kineto at 114171dfba68, files under
 * libkineto/; lines cited below), without C++ or Kineto:
 *
 *   fake_kineto DAEMON_NAME STEP...
 *     ctxt GPU   registerInstance(GPU): prints "ctxt N" (the daemon's answer)
 *     req        getLibkinetoOndemandConfig(ACTIVITIES): prints "config <bytes>"
 *                then the config text
 *     write      writes the trace the last config asked for as Kineto's
 *                ChromeTraceLogger does: <file>.tmp, closed, renamed
 *     half       writes it cut after an event and renamed, as a Kineto that
 *                wrote in place would leave it mid-write
 *     sleep MS
 *
 * The daemon's name is an argument (Kineto's is "dynolog", kDynoIpcName) so
 * that a test never meets a real dynolog. Kineto waits 9 x 10 ms for an
 * answer (poll_recv(maxIpcRetries = 9, kSleepUs = 10000),
 * IpcFabricConfigClient.cpp:97-99); this fake waits FAKE_KINETO_WAIT_MS
 * (default 5000) so that a loaded CI machine does not fail the test. Exit 0,
 * or 1 with a message (no answer, bad answer).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int fd = -1;
static char config[65536];
static size_t config_len;

/* Endpoint.h setAddress_ (lines 217-240): abstract "\0name\0", addrlen family + len + 2 */
static socklen_t address(struct sockaddr_un *a, const char *name)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, name, strlen(name));
	return (socklen_t)(sizeof(sa_family_t) + strlen(name) + 2);
}

/*
 * FabricManager::sync_send (FabricManager.h:110-137): two iovecs, the
 * 40-byte Metadata {size_t size; char type[32]} (lines 32-35, the type
 * NUL-filled) then size bytes; sendmsg MSG_DONTWAIT, retried on EAGAIN and
 * ECONNREFUSED (Endpoint.h:131-145).
 */
static int send_msg(const char *daemon, const char *type, const void *data, size_t size)
{
	unsigned char meta[40];
	uint64_t sz = size;
	struct sockaddr_un to;
	struct iovec iov[2];
	struct msghdr mh;

	memset(meta, 0, sizeof(meta));
	memcpy(meta, &sz, 8);
	memcpy(meta + 8, type, strlen(type) + 1);
	iov[0].iov_base = meta;
	iov[0].iov_len = sizeof(meta);
	iov[1].iov_base = (void *)data;
	iov[1].iov_len = size;
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = &to;
	mh.msg_namelen = address(&to, daemon);
	mh.msg_iov = iov;
	mh.msg_iovlen = 2;
	for (int i = 0; i < 10; i++) {
		if (sendmsg(fd, &mh, MSG_DONTWAIT) > 0)
			return 0;
		if (errno != EAGAIN && errno != ECONNREFUSED)
			break;
		usleep(10000);
	}
	fprintf(stderr, "fake_kineto: send %s: %s\n", type, strerror(errno));
	return -1;
}

/* FabricManager::recv (lines 139-193): peek the Metadata, then read it with its payload */
static long recv_msg(const char *type, void *buf, size_t cap)
{
	const char *w = getenv("FAKE_KINETO_WAIT_MS");
	long wait_ms = w ? atol(w) : 5000;

	for (long t = 0; t <= wait_ms; t += 10) {
		unsigned char meta[40];
		uint64_t sz;
		struct iovec iov[2];
		struct msghdr mh;
		ssize_t got = recv(fd, meta, sizeof(meta), MSG_DONTWAIT | MSG_PEEK);

		if (got < 0) {
			usleep(10000);
			continue;
		}
		if (got < 40) {
			fprintf(stderr, "fake_kineto: an answer of %zd bytes\n", got);
			return -1;
		}
		memcpy(&sz, meta, 8);
		if (sz > cap || strncmp((char *)meta + 8, type, 32) != 0) {
			fprintf(stderr, "fake_kineto: answer type \"%.32s\" size %llu\n",
				(char *)meta + 8, (unsigned long long)sz);
			return -1;
		}
		iov[0].iov_base = meta;
		iov[0].iov_len = sizeof(meta);
		iov[1].iov_base = buf;
		iov[1].iov_len = sz;
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 2;
		got = recvmsg(fd, &mh, MSG_DONTWAIT);
		if (got != (ssize_t)(40 + sz)) {
			fprintf(stderr, "fake_kineto: read %zd of %llu bytes\n", got,
				(unsigned long long)(40 + sz));
			return -1;
		}
		return (long)sz;
	}
	fprintf(stderr, "fake_kineto: no \"%s\" answer in %ld ms\n", type, wait_ms);
	return -1;
}

/* getJobId (IpcFabricConfigClient.cpp:67-79): SLURM_JOB_ID, else 0 */
static int64_t job_id(void)
{
	const char *id = getenv("SLURM_JOB_ID");

	return id ? strtoll(id, NULL, 10) : 0;
}

/* the parent of pid from /proc/PID/stat, as ThreadUtil.cpp parentPidAndCommand; 0 when unknown */
static int32_t parent_of(int32_t pid)
{
	char path[64], buf[512], *p;
	int32_t ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 1, " %*c %d", &ppid);
	fclose(f);
	return ppid;
}

static int do_ctxt(const char *daemon, int gpu)
{
	/* LibkinetoContext {int32 gpu; pid_t pid; int64 jobid} (Utils.h:15-22), 16 bytes */
	unsigned char c[16];
	int32_t g = gpu, pid = (int32_t)getpid(), answer;
	int64_t job = job_id();

	memcpy(c, &g, 4);
	memcpy(c + 4, &pid, 4);
	memcpy(c + 8, &job, 8);
	if (send_msg(daemon, "ctxt", c, sizeof(c)) != 0)
		return -1;
	/* registerInstance returns *(int*)msg->buf (IpcFabricConfigClient.cpp:137) */
	if (recv_msg("ctxt", &answer, sizeof(answer)) != (long)sizeof(answer))
		return -1;
	printf("ctxt %d\n", answer);
	return 0;
}

static int do_req(const char *daemon)
{
	/*
	 * LibkinetoRequest {int type; int n; int64 jobid; int32 pids[]}
	 * (Utils.h:25-34), type ACTIVITIES = 0x2 (IpcFabricConfigClient.h:60-64,
	 * DaemonConfigLoader.cpp:43-47), the pids of the process and its
	 * ancestors, itself first, at most 11, stopping at pid 1
	 * (ThreadUtil.cpp pidCommandPairsOfAncestors, kMaxParentPids = 10).
	 */
	unsigned char r[16 + 11 * 4];
	int32_t type = 2, n = 0, pid = (int32_t)getpid();
	int64_t job = job_id();
	long got;

	for (int i = 0; i <= 10 && (i == 0 || pid > 1); i++) {
		memcpy(r + 16 + 4 * n, &pid, 4);
		n++;
		pid = parent_of(pid);
	}
	memcpy(r, &type, 4);
	memcpy(r + 4, &n, 4);
	memcpy(r + 8, &job, 8);
	if (send_msg(daemon, "req", r, 16 + 4 * (size_t)n) != 0)
		return -1;
	/* the config is std::string(buf, metadata.size) (IpcFabricConfigClient.cpp:198) */
	got = recv_msg("req", config, sizeof(config) - 1);
	if (got < 0)
		return -1;
	config_len = (size_t)got;
	config[config_len] = 0;
	printf("config %zu\n%s", config_len, config);
	if (config_len && config[config_len - 1] != '\n')
		printf("\n");
	return 0;
}

/*
 * The file a Kineto on-demand trace goes to: ACTIVITIES_LOG_FILE with _<pid>
 * inserted before ".pt.trace.json", else before ".json" (Config.cpp:361-381);
 * written to <file>.tmp, closed, renamed (output_json.cpp:486-487, 1066-1107).
 */
static int do_write(int whole)
{
	char file[4096], tmp[4200], *v = strstr(config, "ACTIVITIES_LOG_FILE="), *at;
	size_t len;
	FILE *f;

	if (!v) {
		fprintf(stderr, "fake_kineto: no ACTIVITIES_LOG_FILE in the config\n");
		return -1;
	}
	v += strlen("ACTIVITIES_LOG_FILE=");
	len = strcspn(v, "\n");
	if (len >= 4000)
		return -1;
	memcpy(file, v, len);
	file[len] = 0;
	if ((at = strstr(file, ".pt.trace.json")) || (at = strstr(file, ".json"))) {
		char rest[64];

		snprintf(rest, sizeof(rest), "%s", at);
		snprintf(at, sizeof(file) - (size_t)(at - file), "_%d%s", (int)getpid(), rest);
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", file);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "fake_kineto: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n"
		"  \"traceEvents\": [\n  {\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", "
		"\"pid\": %d, \"tid\": %d, \"ts\": 10.0, \"dur\": 5.0, \"args\": {}}", (int)getpid(),
		(int)getpid());
	if (whole)
		fprintf(f, ",\n  {\"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", "
			"\"pid\": \"\", \"tid\": \"\", \"ts\": 20.0}\n  ],\"traceName\": \"%s\" }", file);
	fclose(f);
	if (rename(tmp, file) != 0) {
		fprintf(stderr, "fake_kineto: rename %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	printf("wrote %s\n", file);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_un me;
	char name[64];
	unsigned seed;

	if (argc < 3) {
		fprintf(stderr, "usage: fake_kineto DAEMON_NAME ctxt GPU|req|write|half|sleep MS...\n");
		return 2;
	}
	/* "dynoconfigclient" + a uuid v4 (IpcFabricConfigClient.cpp:84) */
	seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	snprintf(name, sizeof(name), "dynoconfigclient%08x-%04x-4%03x-%04x-%012x", rand_r(&seed),
		 rand_r(&seed) & 0xffff, rand_r(&seed) & 0xfff, 0x8000 | (rand_r(&seed) & 0x3fff),
		 rand_r(&seed));
	fd = socket(AF_UNIX, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, address(&me, name)) != 0) {
		fprintf(stderr, "fake_kineto: bind %s: %s\n", name, strerror(errno));
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		int rc = 0;

		if (!strcmp(argv[i], "ctxt") && i + 1 < argc)
			rc = do_ctxt(argv[1], atoi(argv[++i]));
		else if (!strcmp(argv[i], "req"))
			rc = do_req(argv[1]);
		else if (!strcmp(argv[i], "write") || !strcmp(argv[i], "half"))
			rc = do_write(!strcmp(argv[i], "write"));
		else if (!strcmp(argv[i], "sleep") && i + 1 < argc) {
			long ms = atol(argv[++i]);
			struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

			nanosleep(&ts, NULL);
		}
		else {
			fprintf(stderr, "fake_kineto: unknown step %s\n", argv[i]);
			return 2;
		}
		fflush(stdout);
		if (rc != 0)
			return 1;
	}
	return 0;
}
