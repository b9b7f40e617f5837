/*
 * main.c: trainscope-collect SUBCOMMAND [flags] ...: the table of
 * subcommands, the flags they share, and the process-wide setup (libcurl,
 * SIGPIPE, the jitter's seed). Everything else is in the subcommands.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect.h"
#include "port.h"
#include "tp_version.h"

static const struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
} subcommands[] = {
	{ "upload", upload_main, "upload files as artifacts of a run, then exit" },
	{ "watch", watch_main, "ship every finished file that appears in folders, each once" },
	{ "run", run_main, "run a command with the CUPTI library and ship its trace chunks" },
	{ "compare", compare_main, "compare two runs (or one with its baseline); exit 5 on a regression,"
				   " 6 when not comparable" },
};

/* the flags every subcommand takes */
#define FLAGS_HELP                                                                                      \
	"\n"                                                                                             \
	"  --server URL   the server (env TRAINSCOPE_SERVER, default " CLIENT_DEFAULT_SERVER ")\n"       \
	"  --run NAME     the run, [A-Za-z0-9._-]{1,128} (env TRAINSCOPE_RUN)\n"                        \
	"  --rank R       the rank, 0 to 65535 (env TRAINSCOPE_RANK, else RANK, else 0)\n"              \
	"  --help         this text\n"

const char collect_common_help[] = FLAGS_HELP "\nToken, retries and exit codes: trainscope-collect --help\n";

int collect_common_option(struct client *c, int opt, const char *arg)
{
	switch (opt) {
	case 'S':
		if (tp_url_port(arg) < 0) {
			fprintf(stderr, "trainscope-collect: --server %s: expected http(s)://HOST[:PORT] with a port from"
				" 1 to 65535\n", arg);
			return -1;
		}
		client_set_server(c, arg);
		return 0;
	case 'R':
		c->run = arg;
		return 0;
	case 'K':
		if (client_parse_rank(arg, &c->rank)) {
			fprintf(stderr, "trainscope-collect: --rank %s: expected 0 to 65535\n", arg);
			return -1;
		}
		return 0;
	default:
		return 1;
	}
}

int collect_need_run(const struct client *c)
{
	if (!c->run) {
		fprintf(stderr, "trainscope-collect: which run? give --run NAME or set TRAINSCOPE_RUN\n");
		return -1;
	}
	if (!client_valid_run(c->run)) {
		fprintf(stderr, "trainscope-collect: run '%s': expected 1 to 128 of A-Z a-z 0-9 . _ -\n", c->run);
		return -1;
	}
	return 0;
}

/* the short usage, on stderr after bad usage */
static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: trainscope-collect SUBCOMMAND [flags] ...\n\n");
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n'trainscope-collect --help' for the manual, 'trainscope-collect SUBCOMMAND --help' for its flags.\n");
}

/* --help: laid out as man/trainscope-collect.1 is (tests/cli.sh holds the two to the same options) */
static void help(void)
{
	size_t i;

	printf("NAME\n"
	       "  trainscope-collect - ship PyTorch profiler output from training nodes to trainscope-server\n"
	       "\n"
	       "SYNOPSIS\n"
	       "  trainscope-collect upload [flags] FILE...\n"
	       "  trainscope-collect watch [flags] [--once] [--state DIR] [--captures] DIR...\n"
	       "  trainscope-collect run [flags] [--spool DIR] [--spool-max BYTES] [--cupti PATH]\n"
	       "                         [--drain-timeout S] [--captures] -- CMD [ARGS...]\n"
	       "  trainscope-collect compare [flags] [--threshold-pct P] [--alpha A] [--top N] [--json]\n"
	       "                         [BASE] TARGET\n"
	       "  trainscope-collect --version | --help\n"
	       "\n"
	       "DESCRIPTION\n");
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		printf("  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
	printf("  'trainscope-collect SUBCOMMAND --help' says what each does and takes.\n"
	       "\n"
	       "OPTIONS\n"
	       "  Every subcommand takes:%s"
	       "  upload takes no other.\n"
	       "  watch:\n"
	       "  --once         ship what is there now and exit (retried as `upload` is)\n"
	       "  --state DIR    keep the state files in DIR instead of in each watched folder\n"
	       "  --captures     take this rank's on-demand captures (env TRAINSCOPE_CAPTURES=1)\n"
	       "  run:\n"
	       "  --spool DIR          the spool folder (default: a new one under $TMPDIR)\n"
	       "  --spool-max BYTES    its bound (env TRAINSCOPE_SPOOL_MAX, default 1073741824)\n"
	       "  --cupti PATH         the CUPTI library (env TRAINSCOPE_CUPTI_LIB)\n"
	       "  --drain-timeout S    after CMD exits, how long to keep trying (default 300)\n"
	       "  --captures           on-demand capture: record only the windows the server asks for\n"
	       "  compare:\n"
	       "  --threshold-pct P  a change counts past P percent (server default 5)\n"
	       "  --alpha A          and when its p-value is under A (server default 0.05)\n"
	       "  --top N            rows of each table (default 10)\n"
	       "  --json             print the server's answer as it is instead\n"
	       "  and alone:\n"
	       "  --version      print the version and exit\n"
	       "\n"
	       "ENVIRONMENT\n"
	       "  TRAINSCOPE_SERVER, TRAINSCOPE_RUN, TRAINSCOPE_RANK (else RANK): the defaults of\n"
	       "  --server, --run and --rank. TRAINSCOPE_TOKEN is sent as 'Authorization: Bearer TOKEN'.\n"
	       "  Connection errors, 5xx and 429 (server busy) answers are retried with exponential\n"
	       "  backoff and jitter, from TRAINSCOPE_RETRY_BASE_MS (500) doubling up to\n"
	       "  TRAINSCOPE_RETRY_MAX_MS (30000); TRAINSCOPE_RETRY_ATTEMPTS (8; 0 = no limit) bounds\n"
	       "  the attempts of `upload` and `compare` (each retry is said on stderr). A request that\n"
	       "  gets no byte for TRAINSCOPE_SILENCE_S (120) seconds is given up, not retried. Any\n"
	       "  other 4xx answer is never retried: the server's message is printed, its control\n"
	       "  characters as \\xNN.\n"
	       "\n"
	       "EXIT STATUS\n"
	       "  Exit codes of upload and watch: 0 everything shipped (watch without --once: stopped\n"
	       "  by SIGINT or SIGTERM); 1 the server rejected something (4xx, its message printed);\n"
	       "  2 bad usage; 3 the server could not be reached or kept failing (5xx) after the\n"
	       "  retries; 4 a local error (file, folder, state file).\n"
	       "  compare: 0 no regression, 5 a regression, 6 the runs cannot be compared, 1 to 4 as above\n"
	       "  (3: the server could not be reached after the retries).\n"
	       "  run: the command's status (128+N when a signal N ended it, 127 when it could not be\n"
	       "  started, 2 for bad usage).\n"
	       "\n"
	       "EXAMPLES\n"
	       "  export TRAINSCOPE_SERVER=http://trainscope:8470 TRAINSCOPE_RUN=resnet50-bs64\n"
	       "  trainscope-collect upload worker0.*.pt.trace.json.gz\n"
	       "  trainscope-collect watch ./log/profiler &\n"
	       "  trainscope-collect run -- python train.py\n"
	       "  trainscope-collect compare resnet50-bs64-main resnet50-bs64\n",
	       FLAGS_HELP);
}

int main(int argc, char **argv)
{
	size_t i;
	int rc;

	if (argc < 2) {
		usage(stderr);
		return CLIENT_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		help();
		return CLIENT_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("trainscope-collect " TP_VERSION_STRING "\n");
		return CLIENT_EXIT_OK;
	}
	for (i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (!strcmp(argv[1], subcommands[i].name))
			break;
	if (i == sizeof(subcommands) / sizeof(subcommands[0])) {
		fprintf(stderr, "trainscope-collect: unknown subcommand '%s'\n", argv[1]);
		usage(stderr);
		return CLIENT_EXIT_USAGE;
	}
	/* a server that closes the connection must not kill us: curl sees EPIPE instead */
	signal(SIGPIPE, SIG_IGN);
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "trainscope-collect: libcurl did not initialise\n");
		return CLIENT_EXIT_LOCAL;
	}
	rc = subcommands[i].main(argc - 1, argv + 1);
	curl_global_cleanup();
	return rc;
}
