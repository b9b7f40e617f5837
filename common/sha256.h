/*
 * sha256.h: streaming SHA-256 (FIPS 180-4), used to name uploads by content
 * so that a retried upload of the same bytes finds its first artifact.
 */
#ifndef SHA256_H
#define SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len;		/* bytes hashed so far */
	uint8_t buf[64];
	size_t fill;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/*
 * For tests: on = 1 forces the portable code, on = 0 restores the fastest.
 * Returns 1 when the hardware path is in use afterwards. Not thread-safe.
 */
int sha256_use_portable(int on);
/* Writes 64 lowercase hex digits and a NUL into hex_out. */
void sha256_final_hex(struct sha256 *s, char hex_out[65]);

#endif
