/*
 * web_assets.h: the dashboards' files, compiled in. The table is generated at
 * build time by web/build.mjs (server/CMakeLists.txt runs it through
 * scripts/web-build.sh); h_web.c serves it.
 */
#ifndef WEB_ASSETS_H
#define WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
	const char *name;		/* "index.html", "assets/app-HASH.js" */
	const char *type;		/* Content-Type */
	const unsigned char *data;	/* the file */
	size_t len;
	const unsigned char *gz;	/* the file, gzip-compressed */
	size_t gzlen;
	const char *etag;		/* quoted: '"hex"', from its SHA-256 */
};

extern const struct web_asset web_assets[];
extern const size_t web_nassets;

#endif
