/*
 * port.c: ports of listen addresses and URLs (see port.h).
 */
#include <string.h>

#include "port.h"

/* Digits s[0..n) as a port, at most 65535; -1 when not 1 to 5 digits or too large. */
static int decimal_port(const char *s, size_t n)
{
	long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v <= 65535 ? (int)v : -1;
}

int tp_listen_port(const char *hostport)
{
	const char *colon = strrchr(hostport, ':');

	if (!colon || (hostport[0] == '[' && colon < strchr(hostport, ']')))
		return -1;
	return decimal_port(colon + 1, strlen(colon + 1));
}

int tp_url_port(const char *url)
{
	const char *host = strstr(url, "://"), *end, *at, *colon;
	int port;

	if (!host || host == url)
		return -1;
	host += 3;
	end = host + strcspn(host, "/?#");
	at = memchr(host, '@', (size_t)(end - host));
	if (at)
		host = at + 1;
	if (host < end && *host == '[') {
		const char *rb = memchr(host, ']', (size_t)(end - host));
		if (!rb)
			return -1;
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
		if (!colon && rb + 1 != end)
			return -1;
	} else {
		colon = memchr(host, ':', (size_t)(end - host));
	}
	if ((colon ? colon : end) == host)
		return -1;	/* no host */
	if (!colon)
		return 0;
	port = decimal_port(colon + 1, (size_t)(end - colon - 1));
	return port == 0 ? -1 : port;
}
