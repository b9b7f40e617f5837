/*
 * main.c: trainscope-server. Flags, signals, start and stop; nothing else.
 *
 * Signals are blocked before any thread starts, so that every thread
 * inherits the mask and only the main thread takes SIGINT/SIGTERM, with
 * sigwait(); it then stops the server: no new connections, requests in
 * flight finish (up to --grace seconds), the database is checkpointed and
 * closed.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "http.h"
#include "analysis/analysis.h"
#include "pipeline/runrank.h"
#include "pipeline/ingest.h"
#include "port.h"
#include "store/db.h"

#define LOG_PREFIX "main"

#define DEFAULT_LISTEN "127.0.0.1:8470"
#define DEFAULT_DB "data/trainscope.db"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: trainscope-server [options]\n"
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
		"                         not (default 2; 0: only reads analyse)\n"
		"  --derive-parts on|off  a profiling cycle that begins after the rank's last ended is\n"
		"                         analysed as a part of its own, so that a derivation finishes the\n"
		"                         cycles that joined, not the run (default on; off: the whole rank)\n"
		"  --derive-split SIZE    and a part (the chunks of one trace) that holds more than SIZE is\n"
		"                         cut in two at a step that nothing crosses: a derivation finishes\n"
		"                         the steps since (default 16M; 0: never)\n"
		"  --log-level LEVEL      error, warn, info or debug (default info)\n"
		"  --help\n"
		"Sizes take a K, M or G suffix (powers of 1024).\n");
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

int main(int argc, char **argv)
{
	enum { O_LISTEN = 1, O_DB, O_TOKENS, O_MAX_BODY, O_MAX_INFL, O_MAX_RATIO, O_MAX_DEPTH,
	       O_MAX_STRING, O_MAX_EVENTS, O_MAX_PICKLE, O_MAX_UPLOADS, O_MAX_CLIENT_UPLOADS, O_THREADS, O_TIMEOUT, O_GRACE, O_LOG, O_HELP,
	       O_MAX_CLIENT_CONNS, O_DERIVE_PACE, O_DERIVE_KEEP, O_DERIVE_QUIET, O_DERIVE_PARTS, O_DERIVE_SPLIT, O_SPILL_AT };
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
		{ NULL, 0, NULL, 0 },
	};
	static const struct derive_hooks derive = { runrank_kick, runrank_settle, runrank_drain };
	struct server_config cfg = {
		.routes = &server_routes,
		.derive = &derive,
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
	int c, sig;

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
				runrank_set_pace((unsigned)k);
			else
				runrank_set_quiet((unsigned)k);
			break;
		}
		case O_DERIVE_PARTS:
			if (!(bad = strcmp(optarg, "on") && strcmp(optarg, "off")))
				runrank_set_parts(!strcmp(optarg, "on"));
			break;
		case O_DERIVE_SPLIT:	/* 0: never */
			if (!(bad = strcmp(optarg, "0") && parse_size(optarg, &v)))
				runrank_set_split(strcmp(optarg, "0") ? v : 0);
			break;
		case O_DERIVE_KEEP:	/* 0 is a size here: keep none */
			if (!(bad = strcmp(optarg, "0") && parse_size(optarg, &v)))
				runrank_set_kept_bytes(strcmp(optarg, "0") ? v : 0);
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
		case O_HELP: usage(stdout); return 0;
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
	 * and unmapped when freed: 282-283 MiB every time. (glibc would raise the
	 * trim threshold with it; left at 128 KiB, the arenas give back their
	 * free tops as they go: 8 MiB held 288, 293, 295 MiB.)
	 */
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (!db_is_postgres(cfg.db_path))
		make_parent(cfg.db_path);
	if (server_start(&cfg, &srv, &err)) {
		fprintf(stderr, "trainscope-server: %s\n", err.msg);
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
	server_stop(srv);
	ingest_pool_drain();
	tp_info("stopped cleanly");
	return 0;
}
