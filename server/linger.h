/*
 * linger.h: lingering close for connections answered before their body was read.
 *
 * A 413 for a Content-Length past the cap, or a 429, is answered as soon as
 * the headers arrive, while the client is still sending its body. Were the
 * socket closed then, the kernel would answer the bytes still arriving with a
 * reset, and a client that writes its body before it looks for an answer
 * (libcurl does) gets a send error instead of the 413. A lingering socket has
 * its write side shut, so the answer ends with a FIN, and what still arrives is
 * read and dropped until the client closes, nothing has come for 2 s, or 10 s
 * have passed.
 */
#ifndef LINGER_H
#define LINGER_H

struct lingering;

/* A lingerer with its thread; NULL when it cannot start (sockets are then closed at once). */
struct lingering *linger_new(void);
/* Takes fd, a connected socket the caller no longer uses: lingered, or closed at once when l is NULL or full. */
void linger_add(struct lingering *l, int fd);
/* Closes every socket still lingering and stops the thread. */
void linger_free(struct lingering *l);

#endif
