/*
 * compare.c: trainscope-collect compare [BASE] TARGET, for CI pipelines: asks
 * the server's GET /api/v1/compare, prints the verdict, its reasons and the
 * largest changes as a table, and exits COMPARE_EXIT_REGRESSION on a
 * regression so that a training job can gate on it, and
 * COMPARE_EXIT_NOT_COMPARABLE when the runs cannot be compared (a gate must
 * not pass on a comparison that never happened).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect.h"

#define COMPARE_EXIT_REGRESSION 5
#define COMPARE_EXIT_NOT_COMPARABLE 6

static const char compare_help[] =
	"usage: trainscope-collect compare [flags] [BASE] TARGET\n"
	"Compares run TARGET with run BASE (without BASE: with TARGET's project baseline,\n"
	"set by PATCH /api/v1/runs/{run} {\"baseline\": true}) on the server, prints the\n"
	"verdict with its reasons, step time, peak memory and the largest operator and\n"
	"kernel changes (with rlhf-canary metrics.json uploaded: its step time, tokens/s\n"
	"and memory). Exits 5 on a regression, 6 when the runs cannot be compared\n"
	"(no steps in one, nothing shared, different models), 0 otherwise.\n"
	"\n"
	"  --threshold-pct P  a change counts past P percent (server default 5)\n"
	"  --alpha A          and when its p-value is under A (server default 0.05)\n"
	"  --top N            rows of each table (default 10)\n"
	"  --json             print the server's answer as it is instead\n";

static double num(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* ns as "12.3 ms" (signed when sign) */
static const char *dur(double ns, int sign, char *buf, size_t size)
{
	const char *unit = "ns";
	double v = ns, a = ns < 0 ? -ns : ns;

	if (a >= 1e9)
		v = ns / 1e9, unit = "s";
	else if (a >= 1e6)
		v = ns / 1e6, unit = "ms";
	else if (a >= 1e3)
		v = ns / 1e3, unit = "us";
	snprintf(buf, size, sign ? "%+.1f %s" : "%.1f %s", v, unit);
	return buf;
}

/* a table cell: the duration, or "-" where the run has none (added, removed) */
static const char *cell(const json_t *row, const char *key, int sign, char *buf, size_t size)
{
	const json_t *v = json_object_get(row, key);

	return json_is_number(v) ? dur(json_number_value(v), sign, buf, size) : "-";
}

/*
 * name in at most NAME_COLS columns: shortened in the middle ("void at::native::vec...Array<char*, 3>)"),
 * so that the start and the end, where kernels differ, both stay
 */
#define NAME_COLS 60
static const char *short_name(const char *name, char *buf, size_t size)
{
	size_t n = strlen(name), head = (NAME_COLS - 3) / 2, tail = NAME_COLS - 3 - head;

	if (n <= NAME_COLS || size < NAME_COLS + 1)
		return name;
	snprintf(buf, size, "%.*s...%s", (int)head, name, name + n - tail);
	return buf;
}

static void table(const json_t *rows, const char *title, const char *per, long top)
{
	size_t i, n = json_array_size(rows);
	const json_t *r;
	char b[32], t[32], d[32], nb[NAME_COLS + 1];

	if (!n)
		return;
	printf("\n%s, per %s (largest changes first):\n", title, per);
	printf("  %-60s %-9s %12s %12s %12s\n", "name", "status", "base", "target", "change");
	json_array_foreach(rows, i, r) {
		if ((long)i == top)
			break;
		const char *name = json_string_value(json_object_get(r, "name"));
		const char *status = json_string_value(json_object_get(r, "status"));
		if (status && !strcmp(status, "unchanged"))
			break;	/* sorted by the size of the change: the rest are the same */
		printf("  %-60s %-9s %12s %12s %12s\n", name ? short_name(name, nb, sizeof(nb)) : "?", status ? status : "",
		       cell(r, "base_ns_per_step", 0, b, sizeof(b)), cell(r, "target_ns_per_step", 0, t, sizeof(t)),
		       cell(r, "delta_ns_per_step", 1, d, sizeof(d)));
	}
}

/* The canary's figures as its profiler notebook prints them: seconds, tokens/s and MB. */
static void print_canary(const json_t *c)
{
	const json_t *st = json_object_get(c, "step_time"), *tok = json_object_get(c, "tokens_per_s");
	const json_t *mem = json_object_get(c, "max_mem");

	if (!json_is_object(c))
		return;
	printf("\nrlhf-canary metrics        %15s %15s %15s\n", "base", "target", "change");
	if (json_is_number(json_object_get(st, "delta_pct")))
		printf("  %-24s %15.4f %15.4f %+14.1f%%\n", "step time (s)", num(st, "base_ns") / 1e9,
		       num(st, "target_ns") / 1e9, num(st, "delta_pct"));
	if (json_is_number(json_object_get(tok, "delta_pct")))
		printf("  %-24s %15.0f %15.0f %+14.1f%%\n", "tokens/s", num(tok, "base"), num(tok, "target"),
		       num(tok, "delta_pct"));
	printf("  %-24s %15.0f %15.0f %+15.0f\n", "memory (MB)", num(mem, "base_bytes") / (1 << 20),
	       num(mem, "target_bytes") / (1 << 20), num(mem, "delta_mb"));
}

static void print(const json_t *j, long top)
{
	const json_t *st = json_object_get(j, "step_time"), *mem = json_object_get(j, "memory"), *v;
	const char *verdict = json_string_value(json_object_get(j, "verdict")), *per;
	char a[32], b[32];
	size_t i;

	printf("%s -> %s: %s\n", json_string_value(json_object_get(j, "base")),
	       json_string_value(json_object_get(j, "target")), verdict ? verdict : "?");
	json_array_foreach(json_object_get(j, "reasons"), i, v)
		printf("  - %s\n", json_string_value(v));
	if (json_is_number(json_object_get(st, "base_ns")) && json_is_number(json_object_get(st, "target_ns"))) {
		const json_t *p = json_object_get(st, "p_value");
		printf("\nstep time    %s -> %s", dur(num(st, "base_ns"), 0, a, sizeof(a)),
		       dur(num(st, "target_ns"), 0, b, sizeof(b)));
		if (json_is_number(json_object_get(st, "delta_pct")))
			printf("  %+.1f%%", num(st, "delta_pct"));
		if (json_is_number(p))
			printf("  p=%.2g", json_number_value(p));
		printf("\n");
	}
	if (json_is_object(mem)) {
		printf("peak memory  %.2f GiB -> %.2f GiB", num(mem, "base_peak_bytes") / (1 << 30),
		       num(mem, "target_peak_bytes") / (1 << 30));
		if (json_is_number(json_object_get(mem, "delta_pct")))
			printf("  %+.1f%%", num(mem, "delta_pct"));
		printf("\n");
	}
	print_canary(json_object_get(j, "canary"));
	per = json_string_value(json_object_get(j, "per"));
	per = per && !strcmp(per, "trace") ? "trace" : "step";
	table(json_object_get(j, "kernels"), "kernels", per, top);
	table(json_object_get(j, "ops"), "operators", per, top);
}

/* a number flag: its text as given, checked */
static int number_flag(const char *name, const char *arg, const char **out)
{
	char *end;

	strtod(arg, &end);
	if (end == arg || *end) {
		fprintf(stderr, "trainscope-collect: --%s %s: expected a number\n", name, arg);
		return -1;
	}
	*out = arg;
	return 0;
}

int compare_main(int argc, char **argv)
{
	enum { O_THRESHOLD = 256, O_ALPHA, O_TOP, O_JSON };
	static const struct option opts[] = {
		COLLECT_COMMON_OPTIONS,
		{ "threshold-pct", required_argument, NULL, O_THRESHOLD },
		{ "alpha", required_argument, NULL, O_ALPHA },
		{ "top", required_argument, NULL, O_TOP },
		{ "json", no_argument, NULL, O_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const char *threshold = NULL, *alpha = NULL, *base, *target;
	struct client c;
	struct client_resp r;
	long top = 10;
	int opt, json = 0, rank_given = 0, rc;
	char path[640];

	if (client_init(&c))
		return CLIENT_EXIT_USAGE;
	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		int bad = 0;
		if (opt == 'h') {
			printf("%s%s", compare_help, collect_common_help);
			client_release(&c);
			return CLIENT_EXIT_OK;
		}
		if (opt == O_THRESHOLD)
			bad = number_flag("threshold-pct", optarg, &threshold);
		else if (opt == O_ALPHA)
			bad = number_flag("alpha", optarg, &alpha);
		else if (opt == O_TOP)
			bad = (top = strtol(optarg, NULL, 10)) < 1;
		else if (opt == O_JSON)
			json = 1;
		else if (!(bad = collect_common_option(&c, opt, optarg)))
			rank_given |= opt == 'K';
		if (bad) {
			client_release(&c);
			return CLIENT_EXIT_USAGE;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		fprintf(stderr, "%s", compare_help);
		client_release(&c);
		return CLIENT_EXIT_USAGE;
	}
	base = argc - optind == 2 ? argv[optind] : NULL;
	target = argv[argc - 1];
	if ((base && !client_valid_run(base)) || !client_valid_run(target)) {
		fprintf(stderr, "trainscope-collect: run names are 1 to 128 of A-Z a-z 0-9 . _ -\n");
		client_release(&c);
		return CLIENT_EXIT_USAGE;
	}
	c.verbose = 1;	/* a server away is said at each retry, as upload says it */
	snprintf(path, sizeof(path), "/api/v1/compare?target=%s%s%s%s%s%s%s&limit=%ld", target,
		 base ? "&base=" : "", base ? base : "", threshold ? "&threshold_pct=" : "",
		 threshold ? threshold : "", alpha ? "&alpha=" : "", alpha ? alpha : "", top);
	if (rank_given)
		snprintf(path + strlen(path), sizeof(path) - strlen(path), "&rank=%d", c.rank);
	switch (client_request(&c, "GET", path, NULL, &r)) {
	case CLIENT_OK: {
		const char *verdict = json_string_value(json_object_get(r.json, "verdict"));
		if (!verdict) {
			fprintf(stderr, "trainscope-collect: compare: the answer has no verdict\n");
			rc = CLIENT_EXIT_UNREACHABLE;
			break;
		}
		if (json)
			printf("%s\n", r.body);
		else
			print(r.json, top);
		rc = !strcmp(verdict, "regression") ? COMPARE_EXIT_REGRESSION
		     : !strcmp(verdict, "not_comparable") ? COMPARE_EXIT_NOT_COMPARABLE : CLIENT_EXIT_OK;
		break;
	}
	case CLIENT_REJECTED:
		client_print_error("compare", &r);
		rc = CLIENT_EXIT_REJECTED;
		break;
	case CLIENT_TRANSIENT:
		client_print_error("compare", &r);
		rc = CLIENT_EXIT_UNREACHABLE;
		break;
	default:
		client_print_error("compare", &r);
		rc = CLIENT_EXIT_LOCAL;
	}
	client_resp_release(&r);
	client_release(&c);
	return rc;
}
