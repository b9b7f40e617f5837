/*
 * workers.c: threads kept between short jobs (workers.h).
 */
#include <pthread.h>

#include "alloc.h"
#include "pipeline/workers.h"

#define WORKERS_IDLE 4	/* two uploads' parser and writer */

enum { W_IDLE, W_RUN, W_DONE, W_QUIT };

struct worker {
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void *(*fn)(void *);
	void *arg;
	int state;		/* under mu */
	struct worker *next;	/* in the idle list */
};

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static struct worker *idle;
static int nidle;

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (w->state == W_IDLE || w->state == W_DONE)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->state == W_QUIT)
			break;
		pthread_mutex_unlock(&w->mu);
		w->fn(w->arg);
		pthread_mutex_lock(&w->mu);
		w->state = W_DONE;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* Tell idle w to end, and free it once it has. */
static void worker_end(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->state = W_QUIT;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->t, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	tp_free(w);
}

int worker_start(struct worker **out, void *(*fn)(void *), void *arg)
{
	struct worker *w;

	pthread_mutex_lock(&idle_mu);
	if ((w = idle)) {
		idle = w->next;
		nidle--;
	}
	pthread_mutex_unlock(&idle_mu);
	if (!w) {
		if (!(w = tp_calloc(1, sizeof(*w))))
			return -1;
		pthread_mutex_init(&w->mu, NULL);
		pthread_cond_init(&w->cv, NULL);
		w->state = W_IDLE;
		if (pthread_create(&w->t, NULL, worker_main, w)) {
			pthread_cond_destroy(&w->cv);
			pthread_mutex_destroy(&w->mu);
			tp_free(w);
			return -1;
		}
	}
	pthread_mutex_lock(&w->mu);
	w->fn = fn;
	w->arg = arg;
	w->state = W_RUN;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	*out = w;
	return 0;
}

void worker_wait(struct worker *w)
{
	pthread_mutex_lock(&w->mu);
	while (w->state != W_DONE)
		pthread_cond_wait(&w->cv, &w->mu);
	w->state = W_IDLE;
	pthread_mutex_unlock(&w->mu);
	pthread_mutex_lock(&idle_mu);
	if (nidle < WORKERS_IDLE) {
		w->next = idle;
		idle = w;
		nidle++;
		w = NULL;
	}
	pthread_mutex_unlock(&idle_mu);
	if (w)
		worker_end(w);
}

void workers_drain(void)
{
	struct worker *w;

	pthread_mutex_lock(&idle_mu);
	w = idle;
	idle = NULL;
	nidle = 0;
	pthread_mutex_unlock(&idle_mu);
	while (w) {
		struct worker *next = w->next;
		worker_end(w);
		w = next;
	}
}
