/*
 * utf8.h: RFC 3629 validation, header-only so that the CUPTI library (which
 * links nothing of ours) shares it with the server's trace parser.
 */
#ifndef TP_UTF8_H
#define TP_UTF8_H

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (no overlongs, no surrogates, nothing above U+10FFFF); 0 if none. */
static inline size_t tp_utf8_len(const unsigned char *s, const unsigned char *end)
{
	unsigned c = s[0], cp, min;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 1, min = 0x80, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 2, min = 0x800, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 3, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if ((size_t)(end - s) < n + 1)
		return 0;
	for (i = 1; i <= n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return n + 1;
}

#endif
