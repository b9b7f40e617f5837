/*
 * router.c: the matcher over a route table (see routes.h). It names no
 * handler: the table, in routes.c, is handed to it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "routes.h"

int route_index(const struct route_table *t, const struct route *r)
{
	return r && t && r >= t->route && r < t->route + t->n ? (int)(r - t->route) : -1;
}

int route_valid_run_name(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
		if (n >= 128)
			return 0;
	}
	/* "." and ".." are valid by the pattern but read as path steps everywhere else */
	return n > 0 && strcmp(s, ".") && strcmp(s, "..");
}

static int valid_id(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (s[n] < '0' || s[n] > '9' || n >= 18)
			return 0;
	return n > 0;
}

/* Match path against pattern; captures point into path (lengths in caplen). */
static int match_one(const char *pattern, const char *path, const char *cap[], size_t caplen[], int *ncap)
{
	const char *p = pattern, *s = path;

	*ncap = 0;
	while (*p && *s) {
		if (*p == '{') {
			const char *pend = strchr(p, '}');
			const char *send = strchr(s, '/');
			if (!send)
				send = s + strlen(s);
			if (send == s || *ncap >= ROUTE_MAX_PARAMS)
				return 0;
			cap[*ncap] = s;
			caplen[(*ncap)++] = (size_t)(send - s);
			p = pend + 1;
			s = send;
		} else if (*p == *s) {
			p++, s++;
		} else {
			return 0;
		}
	}
	return !*p && !*s;
}

enum route_match route_match(const struct route_table *t, const char *method, const char *path,
			     const struct route **out, char *params[], char *allow, size_t allow_size,
			     const char **bad_param)
{
	const char *cap[ROUTE_MAX_PARAMS];
	size_t caplen[ROUTE_MAX_PARAMS], i, used = 0;
	int ncap, k, path_found = 0;

	if (allow_size)
		allow[0] = 0;
	for (i = 0; i < t->n; i++) {
		const struct route *rt = &t->route[i];
		if (!match_one(rt->pattern, path, cap, caplen, &ncap))
			continue;
		if (strcmp(rt->method, method) && !(!strcmp(method, "HEAD") && !strcmp(rt->method, "GET"))) {
			if (allow_size && used + strlen(rt->method) + 3 < allow_size)
				used += (size_t)snprintf(allow + used, allow_size - used, "%s%s",
							 used ? ", " : "", rt->method);
			path_found = 1;
			continue;
		}
		/* validate the captures by their placeholder names */
		const char *ph = rt->pattern;
		for (k = 0; k < ncap; k++) {
			char *v;
			ph = strchr(ph, '{');
			v = tp_strndup(cap[k], caplen[k]);
			params[k] = v;
			if (!v || (!strncmp(ph, "{run}", 5) && !route_valid_run_name(v)) ||
			    (!strncmp(ph, "{id}", 4) && !valid_id(v))) {
				*bad_param = !strncmp(ph, "{run}", 5) ? "run" : "id";
				return ROUTE_BAD_PARAM;
			}
			ph++;
		}
		*out = rt;
		return ROUTE_FOUND;
	}
	return path_found ? ROUTE_NO_METHOD : ROUTE_NO_PATH;
}
