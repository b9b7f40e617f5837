/*
 * fuzz_num.c: libFuzzer target for the exact number conversions: no
 * overflow, and agreement with plain integer arithmetic where it applies.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/num.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	int64_t a, b;
	double d;
	size_t i;
	int digits = size > 0 && size <= 15;

	for (i = 0; i < size && digits; i++)
		digits = s[i] >= '0' && s[i] <= '9';
	if (num_us_to_ns(s, size, &a) == 0 && digits) {
		char buf[16];
		memcpy(buf, s, size);
		buf[size] = 0;
		if (a != strtoll(buf, NULL, 10) * 1000)
			abort();
	}
	if (num_to_i64(s, size, &b) == 0 && digits && num_us_to_ns(s, size, &a) == 0 && a != b * 1000)
		abort();
	/* up to 18 digits, an optional '-' before them: what strtoll reads */
	{
		size_t k = size > 0 && s[0] == '-';
		int plain = size > k && size - k <= 18;
		for (i = k; i < size && plain; i++)
			plain = s[i] >= '0' && s[i] <= '9';
		if (plain) {
			char buf[24];
			memcpy(buf, s, size);
			buf[size] = 0;
			if (num_to_i64(s, size, &b) != 0 || b != strtoll(buf, NULL, 10))
				abort();
		}
	}
	num_to_double(s, size, &d);
	return 0;
}
