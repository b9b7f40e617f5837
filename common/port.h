/*
 * port.h: the port of a listen address or a URL, checked: both the server
 * (--listen) and the collector (--server, TRAINSCOPE_SERVER) refuse a port
 * outside 0..65535 rather than let getaddrinfo or libcurl wrap or guess it
 * (127.0.0.1:70000 once listened on 4464).
 */
#ifndef TP_PORT_H
#define TP_PORT_H

/* The port of "HOST:PORT" or "[V6]:PORT", 0 to 65535 (0: any free); -1 when absent, not decimal or too large. */
int tp_listen_port(const char *hostport);
/*
 * The port of a URL "SCHEME://[USER@]HOST[:PORT][/PATH]": the port, 0 when the
 * URL gives none (the scheme's default); -1 when it is not 1 to 65535 in
 * decimal, or the URL has no "SCHEME://HOST".
 */
int tp_url_port(const char *url);

#endif
