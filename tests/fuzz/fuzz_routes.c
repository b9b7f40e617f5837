/*
 * fuzz_routes.c: libFuzzer target for the route matcher and run-name check:
 * "METHOD\0PATH". A match's captures must be valid for their placeholders.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 2), *path, *params[ROUTE_MAX_PARAMS] = { 0 }, allow[64];
	const struct route *r = NULL;
	const char *bad = NULL;
	enum route_match m;
	int i;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = 0;
	path = buf + strlen(buf) + 1;
	if (path > buf + size)
		path = buf + size;
	m = route_match(&server_routes, buf, path, &r, params, allow, sizeof(allow), &bad);
	if (m == ROUTE_FOUND && (!r || (strstr(r->pattern, "{run}") && !route_valid_run_name(params[0]))))
		abort();
	if (m == ROUTE_BAD_PARAM && !bad)
		abort();
	route_valid_run_name(path);
	for (i = 0; i < ROUTE_MAX_PARAMS; i++)
		free(params[i]);
	free(buf);
	return 0;
}
