/*
 * linger.c: lingering close (see linger.h).
 *
 * One thread polls the lingering sockets and a pipe that wakes it when one
 * is added. At most LINGER_MAX linger at once; past that a socket is closed
 * at once, as before, so a client cannot hold more than that many sockets
 * open by making the server answer early.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "linger.h"
#include "tp.h"

#define LOG_PREFIX "http"

#define LINGER_MAX 64
#define LINGER_IDLE_MS 2000	/* a socket is closed once nothing has come for this long */
#define LINGER_MOST_MS 10000	/* or once it has lingered this long */

struct lingering {
	pthread_mutex_t mu;
	pthread_t thread;
	int wake[2];		/* a byte on wake[1] wakes the thread */
	/* under mu: sockets added and not yet taken by the thread; how many are held in all; stop */
	int added[LINGER_MAX];
	int n_added, held, stop;
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read and drop what has arrived: -1 when the socket is done (the client closed, or it failed), else whether any came. */
static int drain(int fd)
{
	char buf[16384];
	int got = 0;

	for (;;) {
		ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (k > 0)
			got = 1;
		else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return got;
		else if (k == 0 || errno != EINTR)
			return -1;
	}
}

static void *linger_main(void *arg)
{
	struct lingering *l = arg;
	struct pollfd pfd[LINGER_MAX + 1];
	long long since[LINGER_MAX + 1], until[LINGER_MAX + 1];	/* added; closed at */
	int n = 1, i, stop = 0;		/* pfd[0] is the pipe */

	tp_thread_name("ts-linger");
	pfd[0] = (struct pollfd){ .fd = l->wake[0], .events = POLLIN };
	while (!stop) {
		long long now = now_ms(), wait = -1;
		int closed = 0;

		pthread_mutex_lock(&l->mu);
		stop = l->stop;
		/* room for all: held counts these and those in pfd, and stays within LINGER_MAX */
		for (i = 0; i < l->n_added; i++) {
			pfd[n] = (struct pollfd){ .fd = l->added[i], .events = POLLIN };
			since[n] = now;
			until[n++] = now + LINGER_IDLE_MS;
		}
		l->n_added = 0;
		pthread_mutex_unlock(&l->mu);
		for (i = 1; i < n; i++)
			if (wait < 0 || until[i] - now < wait)
				wait = until[i] > now ? until[i] - now : 0;
		if (!stop && poll(pfd, (nfds_t)n, (int)wait) < 0 && errno != EINTR)
			break;
		if (pfd[0].revents & POLLIN) {
			char buf[64];
			while (read(l->wake[0], buf, sizeof(buf)) > 0)
				;
		}
		now = now_ms();
		for (i = 1; i < n;) {
			int got = pfd[i].revents & (POLLIN | POLLHUP | POLLERR) ? drain(pfd[i].fd) : 0;
			if (got > 0 && (until[i] = now + LINGER_IDLE_MS) > since[i] + LINGER_MOST_MS)
				until[i] = since[i] + LINGER_MOST_MS;
			if (stop || got < 0 || now >= until[i]) {
				close(pfd[i].fd);
				n--;
				pfd[i] = pfd[n];
				since[i] = since[n];
				until[i] = until[n];
				closed++;
			} else {
				pfd[i++].revents = 0;
			}
		}
		if (closed) {
			pthread_mutex_lock(&l->mu);
			l->held -= closed;
			pthread_mutex_unlock(&l->mu);
		}
	}
	for (i = 1; i < n; i++)
		close(pfd[i].fd);
	return NULL;
}

struct lingering *linger_new(void)
{
	struct lingering *l = tp_calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	if (pipe(l->wake)) {
		tp_free(l);
		return NULL;
	}
	for (int i = 0; i < 2; i++) {
		fcntl(l->wake[i], F_SETFD, FD_CLOEXEC);
		fcntl(l->wake[i], F_SETFL, O_NONBLOCK);
	}
	pthread_mutex_init(&l->mu, NULL);
	if (pthread_create(&l->thread, NULL, linger_main, l)) {
		close(l->wake[0]);
		close(l->wake[1]);
		pthread_mutex_destroy(&l->mu);
		tp_free(l);
		return NULL;
	}
	return l;
}

void linger_add(struct lingering *l, int fd)
{
	int taken = 0;

	/* the answer ends here: a FIN after it, whatever the client still sends */
	shutdown(fd, SHUT_WR);
	if (l) {
		pthread_mutex_lock(&l->mu);
		if (!l->stop && l->held < LINGER_MAX) {
			l->added[l->n_added++] = fd;
			l->held++;
			taken = 1;
		}
		pthread_mutex_unlock(&l->mu);
	}
	if (!taken)
		close(fd);
	else if (write(l->wake[1], "", 1) < 0 && errno != EAGAIN)
		tp_warn("cannot wake the lingering thread: %s", strerror(errno));
}

void linger_free(struct lingering *l)
{
	int i;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = 1;
	pthread_mutex_unlock(&l->mu);
	if (write(l->wake[1], "", 1) < 0 && errno != EAGAIN)
		tp_warn("cannot wake the lingering thread: %s", strerror(errno));
	pthread_join(l->thread, NULL);
	/* added after the thread's last look */
	for (i = 0; i < l->n_added; i++)
		close(l->added[i]);
	close(l->wake[0]);
	close(l->wake[1]);
	pthread_mutex_destroy(&l->mu);
	tp_free(l);
}
