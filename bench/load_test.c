/*
 * load_test.c: uploaders and readers against a running server, then a check
 * that every acknowledged upload is there, whole (bench/load_test.sh runs it).
 *
 *   load_test URL SECONDS UPLOADERS READERS FILE...
 *
 * Each uploader POSTs the files in turn, each to a run of its own
 * (load-U-N, rank U), and remembers what the server acknowledged (201 or 200
 * with an artifact id) with the sha256 of the bytes it sent. Each reader
 * GETs the read endpoints of acknowledged runs, timing every request. After
 * SECONDS, every acknowledged artifact is read back (status ready, and the
 * sha256 of its raw bytes as downloaded equals the one sent). Prints counts,
 * read latency percentiles and the verdict; exits 1 on a missing or changed
 * artifact or any 5xx.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sha256.h"

struct file {
	char *data;
	size_t len;
	char sha[65];
};

struct acked {
	int u;			/* its uploader */
	char run[64];
	long long id;
	const struct file *f;
};

/* the servers (URL is a comma-separated list: several servers on one PostgreSQL); worker i uses
 * bases[i % nbases], and the final check reads each artifact through another server than its uploader's */
static char *bases[8];
static int nbases;
static struct file *files;
static size_t nfiles;
static double deadline;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct acked *acks;
static size_t nacks, capacks;
static long long up_status[6], read_status[6], read_errors, up_errors, too_many;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct buf {
	char *p;
	size_t n;
};

static size_t sink(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct buf *b = ud;
	size_t n = size * nmemb;
	char *np = realloc(b->p, b->n + n + 1);

	if (!np)
		return 0;
	memcpy(np + b->n, ptr, n);
	b->p = np;
	b->n += n;
	b->p[b->n] = 0;
	return n;
}

/* One request; returns the status (0: transport error), body in *b. */
static long request(CURL *c, const char *url, const struct file *post, struct buf *b)
{
	long status = 0;

	b->n = 0;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
	if (post) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, post->data);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)post->len);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

static void *uploader(void *arg)
{
	int u = (int)(long)arg;
	CURL *c = curl_easy_init();
	struct buf b = { 0 };
	char url[512];

	for (int i = 0; now() < deadline; i++) {
		const struct file *f = &files[(size_t)(u + i) % nfiles];
		struct acked a = { .f = f, .u = u };
		snprintf(a.run, sizeof(a.run), "load-%d-%d", u, i);
		snprintf(url, sizeof(url), "%s/api/v1/runs/%s/artifacts?rank=%d&name=f%zu", bases[u % nbases], a.run, u,
			 (size_t)(f - files));
		long st = request(c, url, f, &b);
		json_t *j = st == 200 || st == 201 ? json_loads(b.p, 0, NULL) : NULL;
		a.id = json_integer_value(json_object_get(json_object_get(j, "artifact"), "id"));
		json_decref(j);
		pthread_mutex_lock(&mu);
		if (!st)
			up_errors++;
		else
			up_status[st / 100 < 6 ? st / 100 : 0]++;
		too_many += st == 429;
		if (a.id > 0) {
			if (nacks == capacks) {
				capacks = capacks ? capacks * 2 : 1024;
				acks = realloc(acks, capacks * sizeof(*acks));
			}
			acks[nacks++] = a;
		}
		pthread_mutex_unlock(&mu);
		if (st == 429) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
	free(b.p);
	curl_easy_cleanup(c);
	return NULL;
}

struct reader {
	unsigned seed;
	double *lat;
	size_t n, cap;
};

static void *reader(void *arg)
{
	static const char *const paths[] = { "", "/steps", "/ops?limit=20", "/kernels?limit=20", "/diagnosis",
					     "/memory?points=500", "/ranks" };
	struct reader *r = arg;
	CURL *c = curl_easy_init();
	struct buf b = { 0 };
	char url[512], run[64];

	while (now() < deadline) {
		unsigned k = (unsigned)rand_r(&r->seed);
		pthread_mutex_lock(&mu);
		size_t n = nacks;
		if (n)
			snprintf(run, sizeof(run), "%s", acks[k % n].run);
		pthread_mutex_unlock(&mu);
		if (!n || k % 8 == 7)
			snprintf(url, sizeof(url), "%s/api/v1/runs", bases[k % (unsigned)nbases]);
		else
			snprintf(url, sizeof(url), "%s/api/v1/runs/%s%s", bases[k % (unsigned)nbases], run,
				 paths[(k >> 8) % 7]);
		double t0 = now();
		long st = request(c, url, NULL, &b);
		double dt = now() - t0;
		if (r->n == r->cap) {
			r->cap = r->cap ? r->cap * 2 : 4096;
			r->lat = realloc(r->lat, r->cap * sizeof(*r->lat));
		}
		r->lat[r->n++] = dt;
		pthread_mutex_lock(&mu);
		if (!st)
			read_errors++;
		else
			read_status[st / 100 < 6 ? st / 100 : 0]++;
		pthread_mutex_unlock(&mu);
	}
	free(b.p);
	curl_easy_cleanup(c);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(p = malloc((size_t)n + 1)) || fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		p = NULL;
	}
	if (f)
		fclose(f);
	*len = p ? (size_t)n : 0;
	return p;
}

int main(int argc, char **argv)
{
	int seconds, nup, nrd, missing = 0;
	pthread_t th[256];
	struct reader *rd;
	size_t total = 0, i;
	double *all, t0;
	CURL *c;
	struct buf b = { 0 };
	char url[512];

	if (argc < 6 || (seconds = atoi(argv[2])) <= 0 || (nup = atoi(argv[3])) < 0 || (nrd = atoi(argv[4])) < 1 ||
	    nup + nrd > 256) {
		fprintf(stderr, "usage: load_test URL[,URL...] SECONDS UPLOADERS READERS FILE...\n");
		return 2;
	}
	for (char *save = NULL, *t = strtok_r(argv[1], ",", &save); t && nbases < 8; t = strtok_r(NULL, ",", &save))
		bases[nbases++] = t;
	if (!nbases) {
		fprintf(stderr, "usage: load_test URL[,URL...] SECONDS UPLOADERS READERS FILE...\n");
		return 2;
	}
	nfiles = (size_t)(argc - 5);
	files = calloc(nfiles, sizeof(*files));
	for (i = 0; i < nfiles; i++) {
		struct sha256 s;
		if (!(files[i].data = slurp(argv[5 + i], &files[i].len))) {
			fprintf(stderr, "load_test: cannot read %s\n", argv[5 + i]);
			return 2;
		}
		sha256_init(&s);
		sha256_update(&s, files[i].data, files[i].len);
		sha256_final_hex(&s, files[i].sha);
	}
	curl_global_init(CURL_GLOBAL_ALL);
	rd = calloc((size_t)nrd, sizeof(*rd));
	t0 = now();
	deadline = t0 + seconds;
	for (i = 0; i < (size_t)nup; i++)
		pthread_create(&th[i], NULL, uploader, (void *)(long)i);
	for (i = 0; i < (size_t)nrd; i++) {
		rd[i].seed = (unsigned)(i * 2654435761u + 1);
		pthread_create(&th[nup + i], NULL, reader, &rd[i]);
	}
	for (i = 0; i < (size_t)(nup + nrd); i++)
		pthread_join(th[i], NULL);
	double elapsed = now() - t0;

	for (i = 0; i < (size_t)nrd; i++)
		total += rd[i].n;
	all = malloc((total + 1) * sizeof(*all));
	total = 0;
	for (i = 0; i < (size_t)nrd; i++) {
		memcpy(all + total, rd[i].lat, rd[i].n * sizeof(*all));
		total += rd[i].n;
		free(rd[i].lat);
	}
	qsort(all, total, sizeof(*all), cmp_d);

	/* every acknowledged artifact: ready, and its raw bytes are the bytes sent */
	c = curl_easy_init();
	for (i = 0; i < nacks; i++) {
		struct sha256 s;
		char hex[65];
		const char *base = bases[(acks[i].u + 1) % nbases];	/* another server than the one it went to */
		snprintf(url, sizeof(url), "%s/api/v1/runs/%s/artifacts/%lld", base, acks[i].run, acks[i].id);
		long st = request(c, url, NULL, &b);
		json_t *j = st == 200 ? json_loads(b.p, 0, NULL) : NULL;
		const char *status = json_string_value(json_object_get(json_object_get(j, "artifact"), "status"));
		int ready = status && !strcmp(status, "ready");
		json_decref(j);
		snprintf(url, sizeof(url), "%s/api/v1/runs/%s/artifacts/%lld/raw", base, acks[i].run, acks[i].id);
		st = request(c, url, NULL, &b);
		sha256_init(&s);
		sha256_update(&s, b.p ? b.p : "", b.n);
		sha256_final_hex(&s, hex);
		if (!ready || st != 200 || strcmp(hex, acks[i].f->sha)) {
			fprintf(stderr, "MISSING or CHANGED: run %s artifact %lld (ready %d, raw %ld)\n", acks[i].run,
				acks[i].id, ready, st);
			missing++;
		}
	}
	curl_easy_cleanup(c);

	printf("duration            %.1f s, %d uploaders, %d readers, %zu files\n", elapsed, nup, nrd, nfiles);
	printf("uploads             %lld 2xx (%zu acknowledged), %lld 4xx (%lld of them 429), %lld 5xx, %lld transport errors\n",
	       up_status[2], nacks, up_status[4], too_many, up_status[5], up_errors);
	printf("reads               %zu: %lld 2xx, %lld 4xx, %lld 5xx, %lld transport errors, %.0f/s\n", total,
	       read_status[2], read_status[4], read_status[5], read_errors, (double)total / elapsed);
	if (total)
		printf("read latency (ms)   p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", all[total / 2] * 1e3,
		       all[total * 9 / 10] * 1e3, all[total * 99 / 100] * 1e3, all[total - 1] * 1e3);
	printf("verified            %zu of %zu acknowledged artifacts ready with the sha256 sent\n", nacks - (size_t)missing,
	       nacks);
	free(all);
	free(b.p);
	curl_global_cleanup();
	return missing || up_status[5] || read_status[5] || up_errors || read_errors ? 1 : 0;
}
