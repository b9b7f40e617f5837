/*
 * schedule.c: a deriver (runrank.h: deriver_new, deriver_free) and its
 * background derivations (runrank_kick, runrank_uploaded, runrank_drain),
 * their pace and the quiet they wait for; runrank.c derives.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#define LOG_PREFIX "runrank"

#include "alloc.h"
#include "pipeline/names.h"
#include "pipeline/runrank.h"
#include "pipeline/runrank_int.h"
#include "tp.h"

/*
 * Background derivations (runrank_kick): one thread per run at most, each
 * settling its run as a read would, counted so that runrank_drain can wait
 * for them before the store closes.
 *
 * Paced: a derivation replays the whole rank (about 1 s of CPU for 1 GB of
 * trace), and a page open on a run that is still uploading asks for one
 * every second, so they ran back to back and took a core from the uploads
 * (1,015 chunks of 1 MiB: 5.3-5.8 s alone, 8.4-10.0 s with such a reader).
 * A run's next background derivation starts no sooner than k times the last
 * one's length after it ended (--derive-pace k, RUNRANK_PACE by default):
 * derivations take at most 1 / (1 + k) of a core per growing run (the
 * chunks with the reader: 6.9 s), and a page follows a large run a few
 * seconds behind instead of one. Reads that wait derive at once, as
 * before; runrank_drain cuts the pause short.
 *
 * Quiet: an upload that marks a rank starts one too (runrank_uploaded),
 * which first waits until the run has had no upload for --derive-quiet
 * seconds, so that the first read after a run's uploads end answers from
 * tables already derived (a 1 GB run of chunks: 1.4 s otherwise), and a
 * burst of chunks costs one derivation, not one each. While it waits, it
 * replays each trace that joins the run's marked ranks into their kept
 * analyses (runrank_grow), so that derivation, or a read's before it, finds
 * them replayed. A read with ?wait=0
 * cuts that wait short; runrank_drain drops it, deriving nothing (the next
 * read will).
 */

/* Background derivations (kick()), and the pace of each run's (see above). */
#define MAX_KICKED 64
#define MAX_PACED 64		/* runs remembered (by hash: two sharing a slot share a pace) */
#define GROW_RANKS RUNRANK_KEPT_RANKS	/* ranks grown ahead at once: those runrank.c keeps */
struct kick_set {
	pthread_mutex_t mu;
	pthread_cond_t idle, wake;
	int hurry;		/* runrank_drain is waiting: no pause */
	struct kicked {
		char *run;		/* NULL: free slot; "" stands for every run */
		struct store *st;
		struct deriver *dv;
		int quiet;		/* an upload's: waits for the run to go quiet first */
		int grow[GROW_RANKS];	/* and the ranks traces joined since it last grew them (runrank_grow) */
		int ngrow;
	} k[MAX_KICKED];
	struct paced {
		uint64_t run;		/* names_hash() of the run's name */
		struct timespec end;	/* the last background derivation's end (CLOCK_MONOTONIC, runrank_since()) */
		double dur;		/* and its length, s */
		struct timespec up;	/* the run's last upload that marked a rank (runrank_uploaded) */
	} pace[MAX_PACED];
};

struct deriver *deriver_new(const struct deriver_opts *o)
{
	struct kick_set *ks = tp_calloc(1, sizeof(*ks));
	struct deriver *dv;

	if (!ks)
		return NULL;
	if (!(dv = runrank_new(o, ks))) {
		tp_free(ks);
		return NULL;
	}
	pthread_mutex_init(&ks->mu, NULL);
	pthread_cond_init(&ks->idle, NULL);
	pthread_cond_init(&ks->wake, NULL);
	return dv;
}

void deriver_free(struct deriver *dv)
{
	struct kick_set *ks;

	if (!dv)
		return;
	ks = runrank_kicks(dv);
	runrank_free(dv);
	pthread_mutex_destroy(&ks->mu);
	pthread_cond_destroy(&ks->idle);
	pthread_cond_destroy(&ks->wake);
	tp_free(ks);
}


/* run's slot of ks->pace, taken over when another run had it (ks->mu held) */
static struct paced *paced_of(struct deriver *dv, const char *run)
{
	struct paced *p = &runrank_kicks(dv)->pace[names_hash(run) % MAX_PACED];

	if (p->run != names_hash(run))
		*p = (struct paced){ .run = names_hash(run) };
	return p;
}

/* How long run's next background derivation waits, s (ks->mu held). */
static double pace_wait(struct deriver *dv, const char *run)
{
	const struct paced *p = paced_of(dv, run);

	return p->dur ? p->dur * runrank_opts(dv)->pace_k - runrank_since(&p->end) : 0;
}

/* Until run has been quiet for --derive-quiet seconds, s (ks->mu held). */
static double quiet_wait(struct deriver *dv, const char *run)
{
	const struct paced *p = paced_of(dv, run);

	return p->up.tv_sec || p->up.tv_nsec ? runrank_opts(dv)->quiet_s - runrank_since(&p->up) : 0;
}

/* Wait on ks->wake for s seconds at most (ks->mu held): a kick or a drain may end it sooner. */
static void wake_wait(struct deriver *dv, double s)
{
	struct timespec at;

	/* the condition variable's clock is the wall clock; the pause was measured on the monotonic one */
	clock_gettime(CLOCK_REALTIME, &at);
	int64_t ns = at.tv_nsec + (int64_t)(s * 1e9);
	at.tv_sec += (time_t)(ns / 1000000000);
	at.tv_nsec = ns % 1000000000;
	(void)pthread_cond_timedwait(&runrank_kicks(dv)->wake, &runrank_kicks(dv)->mu, &at);
}

/* rank, to grow ahead (ks->mu held): 1 when newly noted; past GROW_RANKS, left to the read. */
static int grow_add(struct kicked *k, int rank)
{
	for (int i = 0; i < k->ngrow; i++)
		if (k->grow[i] == rank)
			return 0;
	if (k->ngrow == GROW_RANKS)
		return 0;
	k->grow[k->ngrow++] = rank;
	return 1;
}

static void *kick_main(void *arg)
{
	struct kicked *k = arg;
	struct deriver *dv = k->dv;
	struct kick_set *ks = runrank_kicks(dv);
	struct timespec t0;
	double wait;
	int skip;

	tp_thread_name("ts-derive");
	pthread_mutex_lock(&ks->mu);
	for (;;) {
		struct tp_errbuf err = { 0 };
		while (k->quiet && !ks->hurry && (wait = quiet_wait(dv, k->run)) > 0) {
			int ranks[GROW_RANKS];
			size_t n = (size_t)k->ngrow;
			if (!n) {
				wake_wait(dv, wait);
				continue;
			}
			memcpy(ranks, k->grow, n * sizeof(*ranks));
			k->ngrow = 0;	/* traces joined: replayed now, not at the read */
			pthread_mutex_unlock(&ks->mu);
			runrank_grow(dv, k->st, k->run, ranks, n);
			pthread_mutex_lock(&ks->mu);
		}
		while (!ks->hurry && (wait = pace_wait(dv, k->run)) > 0)
			wake_wait(dv, wait);
		skip = k->quiet && ks->hurry;	/* the server stops: the next read derives */
		pthread_mutex_unlock(&ks->mu);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (!skip && runrank_settle(dv, k->st, *k->run ? k->run : NULL, &err))
			tp_warn("deriving run '%s' in the background failed (%s); the next read tries again",
				*k->run ? k->run : "*", err.msg);
		double dur = runrank_since(&t0);
		pthread_mutex_lock(&ks->mu);
		struct paced *p = paced_of(dv, k->run);
		clock_gettime(CLOCK_MONOTONIC, &p->end);
		p->dur = skip ? p->dur : dur;
		/* an upload came while it settled (runrank_uploaded left it to us): once quiet, again */
		if (skip || ks->hurry || !runrank_opts(dv)->quiet_s || !(p->up.tv_sec || p->up.tv_nsec) ||
		    runrank_since(&p->up) >= runrank_since(&t0))
			break;
		k->quiet = 1;
	}
	tp_free(k->run);
	k->run = NULL;
	pthread_cond_broadcast(&ks->idle);
	pthread_mutex_unlock(&ks->mu);
	return NULL;
}

/* Start run's background derivation (quiet: an upload's, runrank_uploaded), unless one is under way. */
static int kick(struct deriver *dv, struct store *st, const char *run, int quiet, int rank)
{
	struct kick_set *ks = runrank_kicks(dv);
	pthread_attr_t attr;
	pthread_t t;
	int i, free_slot = -1, rc = 0;
	struct store_pending *p = NULL;
	struct tp_errbuf err = { 0 };
	size_t n = 0;

	if (!store_maybe_pending(st))
		return 0;
	/*
	 * Nothing to derive now: no thread. (Sharing a PostgreSQL database, a store cannot rule
	 * marks out without asking, and a thread started for nothing could derive what lands
	 * after this read, racing the read that should.)
	 */
	if (runrank_pending_of(st, run, &p, &n, &err))
		return -1;
	store_pending_free(p, n);
	if (!n)
		return 0;
	pthread_mutex_lock(&ks->mu);
	for (i = 0; i < MAX_KICKED; i++) {
		if (!ks->k[i].run) {
			free_slot = free_slot < 0 ? i : free_slot;
			continue;
		}
		/* under way already: it settles what joined before it claimed the run, the next kick the rest */
		if (ks->k[i].st == st && !strcmp(ks->k[i].run, run ? run : "")) {
			if (ks->k[i].quiet && !quiet) {	/* a page follows the run: no waiting for quiet */
				ks->k[i].quiet = 0;
				pthread_cond_broadcast(&ks->wake);
			}
			goto out;
		}
	}
	if (free_slot < 0 && quiet)	/* 64 runs deriving or waiting already: this one's next read derives */
		goto out;
	if (free_slot < 0 || !(ks->k[free_slot].run = tp_strdup(run ? run : ""))) {
		rc = -1;
		goto out;
	}
	ks->k[free_slot].st = st;
	ks->k[free_slot].quiet = quiet;
	ks->k[free_slot].ngrow = 0;
	if (quiet)
		grow_add(&ks->k[free_slot], rank);
	ks->k[free_slot].dv = dv;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, kick_main, &ks->k[free_slot])) {
		tp_free(ks->k[free_slot].run);
		ks->k[free_slot].run = NULL;
		rc = -1;
	}
	pthread_attr_destroy(&attr);
out:
	pthread_mutex_unlock(&ks->mu);
	return rc;
}

int runrank_kick(struct deriver *dv, struct store *st, const char *run)
{
	return kick(dv, st, run, 0, 0);
}

int runrank_uploaded(struct deriver *dv, struct store *st, const char *run, int rank)
{
	struct kick_set *ks = runrank_kicks(dv);
	int under_way = 0;

	pthread_mutex_lock(&ks->mu);
	if (!runrank_opts(dv)->quiet_s) {
		pthread_mutex_unlock(&ks->mu);
		return 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &paced_of(dv, run)->up);
	for (int i = 0; i < MAX_KICKED && !under_way; i++)
		if ((under_way = ks->k[i].run && ks->k[i].st == st && !strcmp(ks->k[i].run, run)) &&
		    grow_add(&ks->k[i], rank))
			pthread_cond_broadcast(&ks->wake);
	pthread_mutex_unlock(&ks->mu);
	/* one under way waits for this upload's quiet too, or goes round again once it is done (kick_main) */
	return under_way ? 0 : kick(dv, st, run, 1, rank);
}

void runrank_drain(struct deriver *dv, struct store *st)
{
	struct kick_set *ks = runrank_kicks(dv);
	runrank_forget(dv, st, NULL);
	pthread_mutex_lock(&ks->mu);
	ks->hurry++;
	pthread_cond_broadcast(&ks->wake);
	for (;;) {
		int busy = 0;
		for (int i = 0; i < MAX_KICKED; i++)
			busy |= ks->k[i].run && ks->k[i].st == st;
		if (!busy)
			break;
		pthread_cond_wait(&ks->idle, &ks->mu);
	}
	ks->hurry--;
	pthread_mutex_unlock(&ks->mu);
}
