/*
 * fuzz_port.c: libFuzzer target for the port checks of --listen and
 * --server (common/port.c): no read past the string, and an accepted port
 * is the decimal number the text ends in, within range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "port.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	int p;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if ((p = tp_listen_port(s)) >= 0 && (p > 65535 || atoi(strrchr(s, ':') + 1) != p))
		abort();
	if ((p = tp_url_port(s)) > 65535 || (p > 0 && !strstr(s, "://")))
		abort();
	free(s);
	return 0;
}
