/*
 * stats.h: the statistics run comparison needs: Welch's t-test over two
 * samples of step durations, and the distribution function behind its
 * p-value (Student's t through the regularized incomplete beta function),
 * written here rather than taken from a numerics library the server would
 * otherwise not need. Pure: no SQL, no HTTP, no allocation; thread-safe.
 */
#ifndef STATS_H
#define STATS_H

#include <stddef.h>
#include <stdint.h>

/* ln Gamma(x) for x > 0 (Lanczos); NaN otherwise. */
double stats_lgamma(double x);
/* The regularized incomplete beta function I_x(a, b), a, b > 0, 0 <= x <= 1; NaN otherwise. */
double stats_betai(double a, double b, double x);
/* P(|T| >= |t|) for Student's t with df > 0 degrees of freedom (df need not be an integer); NaN for df <= 0. */
double stats_t_two_sided(double t, double df);

struct stats_sample {
	size_t n;
	double mean, var;	/* var: the unbiased sample variance (0 when n < 2) */
	int64_t median;		/* the mean of the middle two when n is even */
};

/* Summarise x[0..n), sorting it in place (for the median); zeros when n == 0. */
void stats_summarise(int64_t *x, size_t n, struct stats_sample *out);

struct stats_welch {
	double t, df, p;	/* t: (mean b - mean a) / se; NaN where undefined (see stats_welch) */
};

/*
 * Welch's t-test of a against b (two-sided). Returns 0 with *out filled, or
 * -1 when either sample has fewer than 2 values (no variance to test against).
 * When both variances are 0 there is no noise: p is 1 when the means are
 * equal and 0 when they differ, with t and df NaN.
 */
int stats_welch(const struct stats_sample *a, const struct stats_sample *b, struct stats_welch *out);

/* A rank is a straggler when its mean step time is this much above the median rank's. */
#define STATS_STRAGGLER_PCT 5.0

/* One rank's complete steps, and what ranks_compare says of them. */
struct rank_steps {
	int64_t *dur_ns;		/* in time order; sorted in place by ranks_compare */
	size_t n;
	/* out: the figures of GET /ranks (-1: no steps) */
	int64_t mean_ns, median_ns, min_ns, max_ns;
	double mean;			/* 0: no steps */
	double vs_median_pct;		/* how far the mean is above the median rank's mean; NaN: no steps */
	int straggler;			/* over STATS_STRAGGLER_PCT above it, with more than one rank */
};

/* Each rank's summary, the median of the ranks' means, the stragglers; the index of the
 * slowest rank (the first with the highest mean), -1 when no rank has steps, -2 when out of
 * memory. */
int stats_ranks(struct rank_steps *v, size_t n);

#endif
