/*
 * main.c: trainscope-server. Flags, signals, start and stop; nothing else.
 *
 * Signals are blocked before any thread starts, so that every thread
 * inherits the mask and only the main thread takes SIGINT/SIGTERM, with
 * sigwait(); it then stops the server: no new connections, requests in
 * flight finish (up to --grace seconds), the database is checkpointed and
 * closed.
 *
 * The listen address is bound (and let go) before the database is created,
 * opened or migrated, so that a port in use leaves no database behind.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "http.h"
#include "analysis/analysis.h"
#include "pipeline/runrank.h"
#include "pipeline/ingest.h"
#include "port.h"
#include "store/db.h"
#include "tp_version.h"

#define LOG_PREFIX "main"

#define DEFAULT_LISTEN "127.0.0.1:8470"
#define DEFAULT_DB "data/trainscope.db"

/* --help: laid out as man/trainscope-server.1 is (tests/cli.sh holds the two to the same options) */
static void help(void)
{
	printf("NAME\n"
	       "  trainscope-server - a team server for PyTorch training performance data\n"
	       "\n"
	       "SYNOPSIS\n"
	       "  trainscope-server [--listen HOST:PORT] [--db PATH|URI] [--token-file FILE] [options]\n"
	       "  trainscope-server --version | --help\n"
	       "\n"
	       "DESCRIPTION\n"
	       "  Takes uploads of profiler traces, memory snapshots and timelines and other\n"
	       "  profilers' reports, keeps them in SQLite or PostgreSQL, and serves the JSON API\n"
	       "  (/api/v1/, described at /api/v1/openapi.yaml) and the dashboards (/). It binds\n"
	       "  its address first, then opens (or creates and migrates) the database, and runs\n"
	       "  until SIGINT or SIGTERM: requests in flight finish (up to --grace seconds).\n"
	       "\n"
	       "OPTIONS\n"
	       "  --listen HOST:PORT     address to serve on (default " DEFAULT_LISTEN "; port 0 = any free)\n"
	       "  --db PATH|URI          SQLite database file, created if missing (default " DEFAULT_DB "),\n"
	       "                         or a PostgreSQL connection URI (postgresql://...), which\n"
	       "                         several servers may share; TRAINSCOPE_DB sets the default\n"
	       "  --token-file FILE      tokens, one per line (at most 32, 16 to 512 characters,\n"
	       "                         '#' comments): a line 'TOKEN' is a write token, uploads\n"
	       "                         then need 'Authorization: Bearer TOKEN'; a line\n"
	       "                         'read TOKEN' is a read token, reads then need one too\n"
	       "  --max-body BYTES       largest upload as sent (default 16G)\n"
	       "  --max-inflated BYTES   largest upload after gunzip (default 64G)\n"
	       "  --max-ratio N          largest gzip ratio past 16 MiB (default 250)\n"
	       "  --max-depth N          deepest JSON nesting (default 64)\n"
	       "  --max-string BYTES     longest JSON string or token (default 8M)\n"
	       "  --max-events N         most events in one upload (default 2147483648)\n"
	       "  --max-pickle-values N  most values a memory snapshot holds at once, and trace entries (default 32M)\n"
	       "  --threads N            HTTP worker threads (default 16; an upload holds one while it ingests)\n"
	       "  --max-uploads N        uploads at once (default half the threads, so reads keep the rest)\n"
	       "  --max-client-uploads N uploads at once from one address (default 4); more get 429\n"
	       "  --max-client-connections N  open connections from one address (default 64); more\n"
	       "                         are closed at once\n"
	       "  --timeout SECONDS      a connection idle this long is closed, and so is one whose\n"
	       "                         request headers take longer, or whose body, past this long,\n"
	       "                         averages under 1 KiB/s (default 120; 0: never)\n"
	       "  --grace SECONDS        how long a stop waits for requests in flight (default 30)\n"
	       "  --spill-at N           host spans an analysis holds before it sorts them into runs in\n"
	       "                         a temporary file in $TMPDIR, and GPU spans, runtime calls,\n"
	       "                         [memory] events and collectives as many bytes' worth (default\n"
	       "                         128K: 5 MiB each; communication records a quarter of it)\n"
	       "  --derive-pace N        a run's background analysis (reads with ?wait=0) starts no sooner\n"
	       "                         than N times the last one's length after it (default 3; 0: at once)\n"
	       "  --derive-keep SIZE     what the analyses of the ranks derived last may hold between their\n"
	       "                         derivations, memory and temporary files in $TMPDIR, so that the\n"
	       "                         next replays only the traces that joined (default 2G; 0: none)\n"
	       "  --derive-quiet SECONDS a run whose uploads joined a rank is analysed in the background\n"
	       "                         once it has had none for this long, so that the next read need\n"
	       "                         not; until then each upload is replayed as it joins (default 2;\n"
	       "                         0: only reads analyse)\n"
	       "  --derive-parts on|off  a profiling cycle that begins after the rank's last ended is\n"
	       "                         analysed as a part of its own, so that a derivation finishes the\n"
	       "                         cycles that joined, not the run (default on; off: the whole rank)\n"
	       "  --derive-split SIZE    and a part (the chunks of one trace) that holds more than SIZE is\n"
	       "                         cut in two at a step that nothing crosses: a derivation finishes\n"
	       "                         the steps since (default 16M; 0: never)\n"
	       "  --log-level LEVEL      error, warn, info or debug (default info)\n"
	       "  --healthcheck          ask GET /healthz of the server at --listen (0.0.0.0 and :: as\n"
	       "                         127.0.0.1 and ::1) and exit 0 when it answers 200, 1 otherwise\n"
	       "                         (the Docker image's HEALTHCHECK: the image has no curl)\n"
	       "  --version              print the version and exit\n"
	       "  --help                 this text\n"
	       "  Sizes take a K, M or G suffix (powers of 1024).\n"
	       "\n"
	       "ENVIRONMENT\n"
	       "  TRAINSCOPE_DB          the default of --db\n"
	       "  TMPDIR                 where analyses spill (see --spill-at, --derive-keep)\n"
	       "\n"
	       "FILES\n"
	       "  " DEFAULT_DB "    the default database, its folder created if missing\n"
	       "\n"
	       "EXAMPLES\n"
	       "  trainscope-server                                   # http://127.0.0.1:8470/\n"
	       "  trainscope-server --listen 0.0.0.0:8470 --token-file /etc/trainscope/tokens\n"
	       "  trainscope-server --db postgresql://trainscope@db/trainscope\n");
}

static void usage(FILE *f)
{
	fprintf(f, "usage: trainscope-server [--listen HOST:PORT] [--db PATH|URI] [--token-file FILE] [options]\n"
		   "       trainscope-server --version | --help   (--help: every option)\n");
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s < '0' || *s > '9')	/* strtoull takes "-1" (as ULLONG_MAX) */
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	}
	if (*end || v == 0)
		return -1;
	*out = v;
	return 0;
}

/* mkdir -p of the folder holding path */
static void make_parent(const char *path)
{
	char buf[4096], *p;

	if (strlen(path) >= sizeof(buf))
		return;
	strcpy(buf, path);
	for (p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0750);
			*p = '/';
		}
}

/*
 * The address of "HOST:PORT" or "[V6]:PORT" (an empty HOST: any), as
 * http.c's resolve() reads it; with loopback set, 0.0.0.0 and :: become
 * 127.0.0.1 and ::1 (what --healthcheck connects to). NULL when it does not
 * resolve; freeaddrinfo() the result.
 */
static struct addrinfo *address_of(const char *listen, int loopback)
{
	char host[256];
	const char *colon = strrchr(listen, ':');
	struct addrinfo hints = { 0 }, *ai = NULL;
	size_t hl;

	if (!colon)
		return NULL;
	hl = (size_t)(colon - listen);
	if (hl >= 2 && listen[0] == '[' && listen[hl - 1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl >= sizeof(host))
		return NULL;
	memcpy(host, listen, hl);
	host[hl] = 0;
	if (loopback && (!hl || !strcmp(host, "0.0.0.0")))
		strcpy(host, "127.0.0.1");
	else if (loopback && !strcmp(host, "::"))
		strcpy(host, "::1");
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = (loopback ? 0 : AI_PASSIVE) | AI_NUMERICSERV;
	if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai) || !ai)
		return NULL;
	return ai;
}

/*
 * Binds a socket to the --listen address as libmicrohttpd will (SO_REUSEADDR,
 * no listen()) and closes it: the check that the address can be served before
 * the database is touched. 0, or -1 with errno (EADDRINUSE, EACCES, ...).
 */
static int can_bind(const char *listen)
{
	struct addrinfo *ai = address_of(listen, 0);
	int fd, one = 1, rc = -1, saved;

	if (!ai) {
		errno = EINVAL;
		return -1;
	}
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
		saved = errno;
		close(fd);
		errno = saved;
	}
	freeaddrinfo(ai);
	return rc;
}

/* --healthcheck: 0 when GET /healthz at listen answers 200 within 5 s, else 1 (said on stderr). */
static int healthcheck(const char *listen)
{
	struct addrinfo *ai = address_of(listen, 1);
	struct timeval tv = { .tv_sec = 5 };
	char buf[64];
	const char req[] = "GET /healthz HTTP/1.0\r\n\r\n";
	ssize_t n = -1;
	size_t got = 0;
	int fd;

	if (!ai) {
		fprintf(stderr, "trainscope-server: --healthcheck: cannot resolve '%s'\n", listen);
		return 1;
	}
	if ((fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen) && write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1)
			while (got < sizeof(buf) - 1 && (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0)
				got += (size_t)n;
		close(fd);
	}
	freeaddrinfo(ai);
	buf[got] = 0;
	/* "HTTP/1.x 200 OK" */
	if (got >= 12 && !strncmp(buf, "HTTP/1.", 7) && !strncmp(buf + 8, " 200", 4))
		return 0;
	fprintf(stderr, "trainscope-server: --healthcheck: http://%s/healthz %s\n", listen,
		got ? "did not answer 200" : "did not answer");
	return 1;
}

int main(int argc, char **argv)
{
	enum { O_LISTEN = 1, O_DB, O_TOKENS, O_MAX_BODY, O_MAX_INFL, O_MAX_RATIO, O_MAX_DEPTH,
	       O_MAX_STRING, O_MAX_EVENTS, O_MAX_PICKLE, O_MAX_UPLOADS, O_MAX_CLIENT_UPLOADS, O_THREADS, O_TIMEOUT, O_GRACE, O_LOG, O_HELP,
	       O_MAX_CLIENT_CONNS, O_DERIVE_PACE, O_DERIVE_KEEP, O_DERIVE_QUIET, O_DERIVE_PARTS, O_DERIVE_SPLIT, O_SPILL_AT,
	       O_VERSION, O_HEALTHCHECK };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "db", required_argument, NULL, O_DB },
		{ "token-file", required_argument, NULL, O_TOKENS },
		{ "max-body", required_argument, NULL, O_MAX_BODY },
		{ "max-inflated", required_argument, NULL, O_MAX_INFL },
		{ "max-ratio", required_argument, NULL, O_MAX_RATIO },
		{ "max-depth", required_argument, NULL, O_MAX_DEPTH },
		{ "max-string", required_argument, NULL, O_MAX_STRING },
		{ "max-events", required_argument, NULL, O_MAX_EVENTS },
		{ "max-pickle-values", required_argument, NULL, O_MAX_PICKLE },
		{ "max-uploads", required_argument, NULL, O_MAX_UPLOADS },
		{ "max-client-uploads", required_argument, NULL, O_MAX_CLIENT_UPLOADS },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "grace", required_argument, NULL, O_GRACE },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "help", no_argument, NULL, O_HELP },
		{ "max-client-connections", required_argument, NULL, O_MAX_CLIENT_CONNS },
		{ "derive-pace", required_argument, NULL, O_DERIVE_PACE },
		{ "derive-keep", required_argument, NULL, O_DERIVE_KEEP },
		{ "derive-quiet", required_argument, NULL, O_DERIVE_QUIET },
		{ "derive-parts", required_argument, NULL, O_DERIVE_PARTS },
		{ "derive-split", required_argument, NULL, O_DERIVE_SPLIT },
		{ "spill-at", required_argument, NULL, O_SPILL_AT },
		{ "version", no_argument, NULL, O_VERSION },
		{ "healthcheck", no_argument, NULL, O_HEALTHCHECK },
		{ NULL, 0, NULL, 0 },
	};
	struct deriver_opts dopts;
	struct derive_hooks derive = { NULL, runrank_kick, runrank_settle, runrank_drain };
	struct server_config cfg = {
		.routes = &server_routes,
		.derive = &derive,	/* its deriver made once the flags are read */
		.listen = DEFAULT_LISTEN,
		.db_path = DEFAULT_DB,
		.threads = 16,
		.conn_timeout_s = 120,
		.grace_s = 30,
		.limits = ingest_default_limits,
	};
	struct tp_errbuf err = { 0 };
	struct server *srv;
	sigset_t sigs;
	uint64_t v;
	int c, sig, check = 0;

	deriver_opts_default(&dopts);
	if (getenv("TRAINSCOPE_DB") && *getenv("TRAINSCOPE_DB"))
		cfg.db_path = getenv("TRAINSCOPE_DB");
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		int bad = 0;
		switch (c) {
		case O_LISTEN:
			cfg.listen = optarg;
			if (tp_listen_port(optarg) < 0) {
				fprintf(stderr, "trainscope-server: --listen %s: expected HOST:PORT with a port from 0 to"
					" 65535\n", optarg);
				return 2;
			}
			break;
		case O_DB: cfg.db_path = optarg; break;
		case O_TOKENS: cfg.token_file = optarg; break;
		case O_MAX_BODY: bad = parse_size(optarg, &cfg.limits.max_body); break;
		case O_MAX_INFL: bad = parse_size(optarg, &cfg.limits.max_inflated); break;
		case O_MAX_RATIO:
			bad = parse_size(optarg, &v) || v > 100000;
			cfg.limits.max_ratio = (uint32_t)v;
			break;
		case O_MAX_DEPTH:
			bad = parse_size(optarg, &v) || v > 64;
			cfg.limits.trace.max_depth = (uint32_t)v;
			break;
		case O_MAX_STRING: bad = parse_size(optarg, &cfg.limits.trace.max_token); break;
		case O_MAX_EVENTS:
			bad = parse_size(optarg, &cfg.limits.trace.max_events) ||
			      cfg.limits.trace.max_events > (1ull << 32) - 1;
			break;
		case O_MAX_PICKLE: bad = parse_size(optarg, &cfg.limits.max_pickle_values); break;
		case O_MAX_UPLOADS:
		case O_MAX_CLIENT_UPLOADS:
			bad = parse_size(optarg, &v) || v < 1 || v > 4096;
			*(c == O_MAX_UPLOADS ? &cfg.max_uploads : &cfg.max_client_uploads) = (unsigned)v;
			break;
		case O_MAX_CLIENT_CONNS:
			bad = parse_size(optarg, &v) || v < 1 || v > 512;
			cfg.max_client_connections = (unsigned)v;
			break;
		case O_THREADS:
			bad = parse_size(optarg, &v) || v > 256;
			cfg.threads = (unsigned)v;
			break;
		case O_TIMEOUT:
			bad = parse_size(optarg, &v) || v > 86400;
			cfg.conn_timeout_s = (unsigned)v;
			break;
		case O_GRACE:
			bad = parse_size(optarg, &v) || v > 3600;
			cfg.grace_s = (unsigned)v;
			break;
		case O_DERIVE_PACE:
		case O_DERIVE_QUIET: {	/* a count, 0 included */
			char *end;
			errno = 0;
			unsigned long k = strtoul(optarg, &end, 10);
			if ((bad = errno || end == optarg || *end || *optarg == '-' || k > (c == O_DERIVE_PACE ? 1000 : 86400)))
				break;
			if (c == O_DERIVE_PACE)
				dopts.pace_k = (unsigned)k;
			else
				dopts.quiet_s = (unsigned)k;
			break;
		}
		case O_DERIVE_PARTS:
			if (!(bad = strcmp(optarg, "on") && strcmp(optarg, "off")))
				dopts.parts = !strcmp(optarg, "on");
			break;
		case O_DERIVE_SPLIT:	/* 0: never */
			if (!(bad = strcmp(optarg, "0") && parse_size(optarg, &v)))
				dopts.split_bytes = strcmp(optarg, "0") ? v : 0;
			break;
		case O_DERIVE_KEEP:	/* 0 is a size here: keep none */
			if (!(bad = strcmp(optarg, "0") && parse_size(optarg, &v)))
				dopts.kept_bytes = strcmp(optarg, "0") ? v : 0;
			break;
		case O_SPILL_AT:
			if (!(bad = parse_size(optarg, &v) || v < 1 || v > (1ULL << 30)))
				analysis_set_default_run((size_t)v);
			break;
		case O_LOG:
			if (!strcmp(optarg, "error")) tp_log_threshold = TP_LOG_ERR;
			else if (!strcmp(optarg, "warn")) tp_log_threshold = TP_LOG_WARN;
			else if (!strcmp(optarg, "info")) tp_log_threshold = TP_LOG_INFO;
			else if (!strcmp(optarg, "debug")) tp_log_threshold = TP_LOG_DEBUG;
			else bad = 1;
			break;
		case O_HELP: help(); return 0;
		case O_VERSION: printf("trainscope-server " TP_VERSION_STRING "\n"); return 0;
		case O_HEALTHCHECK: check = 1; break;
		default: usage(stderr); return 2;
		}
		if (bad) {
			fprintf(stderr, "trainscope-server: bad value '%s' for --%s\n", optarg,
				opts[c - 1].name);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "trainscope-server: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if (check)
		return healthcheck(cfg.listen);

	/*
	 * glibc gives each thread that allocates under contention an arena of its
	 * own, up to 8 per core, and keeps what is freed in each: 16 workers and
	 * the ingest threads held 430 MB after 60 uploads of a 54 MB trace. Four
	 * arenas, and the heap given back after every 16 MiB of uploads (http.c),
	 * keep a long-running server under 150 MB (bench/soak.sh).
	 */
	mallopt(M_ARENA_MAX, 4);
	/*
	 * And a fixed mmap threshold: glibc's own rises to the largest block
	 * freed (up to 32 MiB), so after one large upload the next one grows its
	 * arrays inside the arenas, copying on each realloc and leaving the old
	 * blocks as holes: the same 1 GB trace peaked at 283, 330, then 349 MiB
	 * in one server. Fixed, larger blocks are mapped, grown in place (mremap)
	 * and unmapped when freed: 282-283 MiB every time.
	 */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	/*
	 * And the free top of an arena kept up to 4 MiB, not glibc's 128 KiB
	 * (fixed with the mmap threshold): at 128 KiB a block of a few MiB freed
	 * at a top went back to the kernel, and the next upload faulted its pages
	 * in again, about 11 us each on this project's VM. With the heap given
	 * back only once uploads pause (http.c: trim_after), three runs of 20
	 * chunks of 2 MiB took 17-18 k page faults, not 39-40 k, and 1.22-1.31 s
	 * of CPU, not 1.42-1.72 (bench/results/chunk_faults-20261130.txt); 32
	 * MiB saved no more CPU and peaked at 182 MB in bench/soak.sh.
	 */
	mallopt(M_TRIM_THRESHOLD, 4 << 20);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	/*
	 * The address first: a port in use must not leave a database, nor its
	 * folder, behind. server_start() binds again, for good, before it opens
	 * the store, so one taken between the two fails as cleanly.
	 */
	if (can_bind(cfg.listen)) {
		fprintf(stderr, "trainscope-server: cannot listen on %s: %s%s\n", cfg.listen, strerror(errno),
			errno == EADDRINUSE ? " (another server there? pick another with --listen HOST:PORT)" : "");
		return 1;
	}
	if (!db_is_postgres(cfg.db_path))
		make_parent(cfg.db_path);
	/* the derivations' object: the server's, handed to http.c with the hooks */
	if (!(derive.deriver = deriver_new(&dopts))) {
		fprintf(stderr, "trainscope-server: out of memory\n");
		return 1;
	}
	if (server_start(&cfg, &srv, &err)) {
		fprintf(stderr, "trainscope-server: %s\n", err.msg);
		deriver_free(derive.deriver);
		return 1;
	}
	{
		const char *colon = strrchr(cfg.listen, ':');
		/* a URI may hold a password: only its engine is printed */
		printf("trainscope-server listening on http://%.*s:%u (database %s)\n",
		       (int)(colon - cfg.listen), cfg.listen, server_port(srv),
		       db_is_postgres(cfg.db_path) ? "PostgreSQL" : cfg.db_path);
		fflush(stdout);
	}
	tp_info("serving; SIGINT or SIGTERM stops");
	sigwait(&sigs, &sig);
	tp_info("signal %d: stopping", sig);
	server_stop(srv);	/* drains the derivations (derive_hooks.drain) */
	deriver_free(derive.deriver);
	ingest_pool_drain();
	tp_info("stopped cleanly");
	return 0;
}
