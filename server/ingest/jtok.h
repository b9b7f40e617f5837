/*
 * jtok.h: a streaming JSON tokenizer, the trace parser's (trace.c).
 *
 * Push mode, as yajl's: feed the document in pieces of any size; each token
 * reaches a callback as soon as it is complete, with the same callbacks yajl
 * takes (return 0 from one to cancel the parse). Strict RFC 8259: one value,
 * no comments, no trailing commas, nothing after the value but whitespace.
 *
 * A token is handed over in place when it lies within one piece and has no
 * escapes; one that straddles pieces is copied until it ends, and none may
 * be longer than max_token bytes as written, so what the tokenizer holds is
 * bounded whatever the input. Containers nest at most max_depth deep.
 *
 * Strings are unescaped (\uXXXX to UTF-8, surrogate pairs joined; a lone
 * surrogate or \u0000 becomes U+FFFD) but not checked to be UTF-8: the
 * caller checks the strings it keeps. Numbers come as written, checked
 * against the JSON grammar.
 */
#ifndef JTOK_H
#define JTOK_H

#include <stddef.h>
#include <stdint.h>

struct jtok_callbacks {
	int (*null)(void *ctx);
	int (*boolean)(void *ctx, int value);
	int (*number)(void *ctx, const char *s, size_t len);
	int (*string)(void *ctx, const unsigned char *s, size_t len);
	int (*start_map)(void *ctx);
	int (*map_key)(void *ctx, const unsigned char *s, size_t len);
	int (*end_map)(void *ctx);
	int (*start_array)(void *ctx);
	int (*end_array)(void *ctx);
};

enum jtok_status {
	JTOK_OK = 0,
	JTOK_CANCELLED,		/* a callback returned 0 */
	JTOK_INVALID,		/* not JSON: jtok_message() says why */
	JTOK_TOO_LONG,		/* a token longer than max_token */
	JTOK_TOO_DEEP,		/* nesting past max_depth */
	JTOK_NOMEM,
};

struct jtok;

struct jtok *jtok_new(const struct jtok_callbacks *cb, void *ctx, size_t max_token, unsigned max_depth);
/* Feed the next piece; once one returns an error, every later call returns it. */
int jtok_feed(struct jtok *t, const uint8_t *data, size_t len);
/* The document ended: a value still open is an error. */
int jtok_finish(struct jtok *t);
/* After an error: what went wrong, and the byte it went wrong at (1-based,
 * counted from the start of the document); for JTOK_TOO_LONG, whether the
 * token was a string. */
const char *jtok_message(const struct jtok *t);
uint64_t jtok_error_at(const struct jtok *t);
int jtok_error_in_string(const struct jtok *t);
/* During a callback: how many bytes of the document lie up to the end of the token at hand. */
uint64_t jtok_offset(const struct jtok *t);
void jtok_free(struct jtok *t);

#endif
