/*
 * stats.c: Welch's t-test and Student's t distribution (see stats.h).
 *
 * The two-sided tail of Student's t with df degrees of freedom is the
 * regularized incomplete beta function at x = df / (df + t^2):
 *   P(|T| >= |t|) = I_x(df / 2, 1 / 2)
 * (Abramowitz & Stegun 26.7.1 with 26.5.27). I_x(a, b) comes from its
 * continued fraction, evaluated by the modified Lentz method, on the side of
 * x where it converges fast (Numerical Recipes 6.4; A&S 26.5.8), and the
 * symmetry I_x(a, b) = 1 - I_{1-x}(b, a) on the other. ln Gamma is Lanczos'
 * approximation (g = 7, 9 terms: about 15 significant digits), ours rather
 * than libm's lgamma(), which writes the global signgam from every server
 * thread at once.
 */
#include <math.h>
#include <stdlib.h>

#include "alloc.h"
#include "analysis/stats.h"
#include "tp.h"

#define BETA_EPS 1e-15
#define BETA_TINY 1e-300
/* The fraction needs O(sqrt(max(a, b))) terms; step counts keep a far below 10^6. */
#define BETA_MAX_TERMS 10000

static const double lanczos[9] = {
	0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
	-176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
	1.5056327351493116e-7,
};

double stats_lgamma(double x)
{
	double a, t;
	int i;

	if (!(x > 0) || isinf(x))
		return NAN;
	if (x < 0.5)	/* reflection: Gamma(x) Gamma(1 - x) = pi / sin(pi x) */
		return log(M_PI / sin(M_PI * x)) - stats_lgamma(1 - x);
	x -= 1;
	a = lanczos[0];
	t = x + 7.5;
	for (i = 1; i < 9; i++)
		a += lanczos[i] / (x + i);
	return 0.5 * log(2 * M_PI) + (x + 0.5) * log(t) - t + log(a);
}

static double tiny_guard(double v)
{
	return fabs(v) < BETA_TINY ? BETA_TINY : v;
}

/* The continued fraction of I_x(a, b) (A&S 26.5.8), by modified Lentz. */
static double beta_fraction(double a, double b, double x)
{
	double c = 1, d = 1 / tiny_guard(1 - (a + b) * x / (a + 1)), h = d;
	int m;

	for (m = 1; m <= BETA_MAX_TERMS; m++) {
		double m2 = 2.0 * m;
		double even = m * (b - m) * x / ((a - 1 + m2) * (a + m2));
		d = 1 / tiny_guard(1 + even * d);
		c = tiny_guard(1 + even / c);
		h *= d * c;
		double odd = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));
		d = 1 / tiny_guard(1 + odd * d);
		c = tiny_guard(1 + odd / c);
		h *= d * c;
		if (fabs(d * c - 1) < BETA_EPS)
			break;
	}
	return h;
}

double stats_betai(double a, double b, double x)
{
	double front;

	if (!(a > 0) || !(b > 0) || !(x >= 0) || !(x <= 1) || isinf(a) || isinf(b))
		return NAN;
	if (x == 0 || x == 1)
		return x;
	/* x^a (1 - x)^b / B(a, b), in logs */
	front = exp(stats_lgamma(a + b) - stats_lgamma(a) - stats_lgamma(b) + a * log(x) + b * log1p(-x));
	if (x < (a + 1) / (a + b + 2))
		return front * beta_fraction(a, b, x) / a;
	return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double stats_t_two_sided(double t, double df)
{
	if (!(df > 0) || isnan(t))
		return NAN;
	if (isinf(t))
		return 0;
	/* df / (df + t^2), written so that a huge t gives 0 rather than 0/inf trouble */
	return stats_betai(df / 2, 0.5, 1 / (1 + (t / df) * t));
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

void stats_summarise(int64_t *x, size_t n, struct stats_sample *out)
{
	double sum = 0, ss = 0;
	size_t i;

	out->n = n;
	out->mean = out->var = 0;
	out->median = 0;
	if (!n)
		return;
	qsort(x, n, sizeof(*x), cmp_i64);
	for (i = 0; i < n; i++)
		sum += (double)x[i];
	out->mean = sum / (double)n;
	/* two passes: the squares of deviations, not the difference of two huge sums */
	for (i = 0; i < n; i++)
		ss += ((double)x[i] - out->mean) * ((double)x[i] - out->mean);
	out->var = n > 1 ? ss / (double)(n - 1) : 0;
	out->median = n % 2 ? x[n / 2] : x[n / 2 - 1] + (x[n / 2] - x[n / 2 - 1]) / 2;
}

int stats_welch(const struct stats_sample *a, const struct stats_sample *b, struct stats_welch *out)
{
	double sa, sb, se2;

	if (a->n < 2 || b->n < 2)
		return -1;
	sa = a->var / (double)a->n;
	sb = b->var / (double)b->n;
	se2 = sa + sb;
	if (se2 == 0) {
		out->t = out->df = NAN;
		out->p = a->mean == b->mean ? 1 : 0;
		return 0;
	}
	out->t = (b->mean - a->mean) / sqrt(se2);
	/* Welch-Satterthwaite */
	out->df = se2 * se2 / (sa * sa / (double)(a->n - 1) + sb * sb / (double)(b->n - 1));
	out->p = stats_t_two_sided(out->t, out->df);
	return 0;
}

int stats_ranks(struct rank_steps *v, size_t n)
{
	double *sorted, median = 0, worst = -1;
	size_t m = 0, i;
	int slowest = -1;

	for (i = 0; i < n; i++) {
		struct rank_steps *r = &v[i];
		double sum = 0;
		size_t k = r->n;
		for (size_t j = 0; j < k; j++)	/* in time order, before sorting: the mean as always summed */
			sum += (double)r->dur_ns[j];
		r->mean = k ? sum / (double)k : 0;
		if (k)
			qsort(r->dur_ns, k, sizeof(*r->dur_ns), cmp_i64);
		r->mean_ns = k ? tp_round_i64(r->mean) : -1;
		r->median_ns = !k ? -1 : k % 2 ? r->dur_ns[k / 2] : tp_mid(r->dur_ns[k / 2 - 1], r->dur_ns[k / 2]);
		r->min_ns = k ? r->dur_ns[0] : -1;
		r->max_ns = k ? r->dur_ns[k - 1] : -1;
	}
	/* the median of the means of the ranks with steps (ranks are few: insertion sort) */
	if (!(sorted = tp_malloc((n + 1) * sizeof(*sorted))))
		return -2;
	{
		for (i = 0; i < n; i++)
			if (v[i].mean > 0)
				sorted[m++] = v[i].mean;
		for (size_t a = 1; a < m; a++)
			for (size_t b = a; b > 0 && sorted[b - 1] > sorted[b]; b--) {
				double t = sorted[b];
				sorted[b] = sorted[b - 1];
				sorted[b - 1] = t;
			}
		median = m ? (m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2) : 0;
		tp_free(sorted);
	}
	for (i = 0; i < n; i++) {
		struct rank_steps *r = &v[i];
		double pct = median > 0 && r->mean > 0 ? (r->mean / median - 1) * 100 : 0;
		r->vs_median_pct = r->mean > 0 ? pct : NAN;
		r->straggler = n > 1 && pct > STATS_STRAGGLER_PCT;
		if (r->mean > worst) {
			worst = r->mean;
			slowest = (int)i;
		}
	}
	return worst > 0 ? slowest : -1;
}
