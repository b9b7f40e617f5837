/*
 * num.h: numbers from their JSON text, exactly.
 *
 * Trace timestamps are microseconds written as decimals ("1712195495519689.047");
 * 19 significant digits do not survive a double, so they are converted from the
 * text straight into int64 nanoseconds.
 */
#ifndef NUM_H
#define NUM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Microseconds as JSON number text -> nanoseconds, rounded half away from zero
 * past the third decimal. Accepts an exponent. Returns 0, or -1 when the text
 * is not a number or the result does not fit in int64.
 */
int num_us_to_ns(const char *s, size_t len, int64_t *out);

/*
 * An integer as JSON number text -> int64. Values above INT64_MAX that fit in
 * uint64 (ids such as "Comms Id") are returned bit for bit as int64, so that
 * equal ids stay equal. Returns 0, 1 when the text had a fraction or exponent
 * (then *out is the truncated value if it fits), or -1 when it is not a number
 * or does not fit in 64 bits.
 */
int num_to_i64(const char *s, size_t len, int64_t *out);

/* JSON number text -> double. Returns 0 or -1. */
int num_to_double(const char *s, size_t len, double *out);

#endif
