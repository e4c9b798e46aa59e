/* lloyd_max.c — Lloyd-Max quantizers of the standard normal, computed once.
 *
 * The quantizer with 2^b levels is symmetric, so only the K = 2^(b-1)
 * positive centroids c_0 < ... < c_{K-1} are unknowns. With t_0 = 0,
 * t_i = (c_{i-1} + c_i) / 2 and t_K = +inf, optimality is the fixed point
 *     c_i = G_i(c) = E[X | t_i < X < t_{i+1}] = (phi(t_i) - phi(t_{i+1})) / (Q(t_i) - Q(t_{i+1}))
 * (phi the pdf, Q the upper tail). Plain Lloyd iteration converges linearly
 * and slowly for 128 levels, but G_i depends only on c_{i-1}, c_i, c_{i+1},
 * so Newton's method needs just a tridiagonal solve per step and converges
 * quadratically from the companding initial guess. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>

#include "veloxquant.h"
#include "formats/lloyd_max.h"

#define LM_MAX_BITS 8
#define LM_MAX_K (1 << (LM_MAX_BITS - 1))

static const double INV_SQRT2 = 0.70710678118654752440;
static const double INV_SQRT2PI = 0.39894228040143267794;

static double pdf(double x) { return isinf(x) ? 0.0 : INV_SQRT2PI * exp(-0.5 * x * x); }

/* P(a < X < b) for 0 <= a < b <= inf, without cancellation: erf differences
 * near the centre, erfc differences in the tail. */
static double mass(double a, double b)
{
    if (isinf(b)) return 0.5 * erfc(a * INV_SQRT2);
    if (b < 1.0) return 0.5 * (erf(b * INV_SQRT2) - erf(a * INV_SQRT2));
    return 0.5 * (erfc(a * INV_SQRT2) - erfc(b * INV_SQRT2));
}

/* phi(a) - phi(b) for 0 <= a < b, via expm1 so narrow cells stay exact. */
static double pdf_drop(double a, double b)
{
    if (isinf(b)) return pdf(a);
    return -pdf(a) * expm1(-0.5 * (b - a) * (b + a));
}

/* Inverse normal CDF by bisection (only for the initial guess). */
static double probit(double p)
{
    double lo = -40.0, hi = 40.0;
    for (int it = 0; it < 200; it++) {
        const double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(-mid * INV_SQRT2) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* One Newton step on F(c) = G(c) - c for the K positive centroids; returns
 * max |step|. Scratch arrays are K long. */
static double newton_step(double *c, int K)
{
    double t[LM_MAX_K + 1], F[LM_MAX_K], lo[LM_MAX_K], di[LM_MAX_K], up[LM_MAX_K];
    t[0] = 0.0;
    t[K] = INFINITY;
    for (int i = 1; i < K; i++) t[i] = 0.5 * (c[i - 1] + c[i]);
    for (int i = 0; i < K; i++) {
        const double a = t[i], b = t[i + 1], P = mass(a, b);
        const double m = pdf_drop(a, b) / P;
        const double dm_da = pdf(a) * (m - a) / P;                 /* moving the lower edge */
        const double dm_db = isinf(b) ? 0.0 : pdf(b) * (b - m) / P; /* moving the upper edge */
        F[i] = m - c[i];
        /* A = I - J, with t_i = (c_{i-1} + c_i) / 2 and t_{i+1} = (c_i + c_{i+1}) / 2 */
        lo[i] = i > 0 ? -0.5 * dm_da : 0.0;
        up[i] = i < K - 1 ? -0.5 * dm_db : 0.0;
        di[i] = 1.0 - (i > 0 ? 0.5 * dm_da : 0.0) - (i < K - 1 ? 0.5 * dm_db : 0.0);
    }
    /* Thomas algorithm: A delta = F. A is diagonally dominant (dm/da, dm/db < 1). */
    for (int i = 1; i < K; i++) {
        const double w = lo[i] / di[i - 1];
        di[i] -= w * up[i - 1];
        F[i] -= w * F[i - 1];
    }
    double step = 0.0;
    F[K - 1] /= di[K - 1];
    for (int i = K - 2; i >= 0; i--) F[i] = (F[i] - up[i] * F[i + 1]) / di[i];
    for (int i = 0; i < K; i++) {
        c[i] += F[i];
        step = fmax(step, fabs(F[i]));
    }
    return step;
}

static float g_cents[LM_MAX_BITS + 1][1 << LM_MAX_BITS];
static float g_bounds[LM_MAX_BITS + 1][1 << LM_MAX_BITS];
static double g_cents64[LM_MAX_BITS + 1][1 << LM_MAX_BITS];
static double g_bounds64[LM_MAX_BITS + 1][1 << LM_MAX_BITS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void solve_bits(int bits)
{
    const int K = 1 << (bits - 1), n = 2 * K;
    double c[LM_MAX_K];
    /* Companding guess: the optimal point density of a Gaussian is
     * proportional to pdf^(1/3), i.e. N(0, 3); place centroids at its
     * quantiles. Newton from here converges in a handful of steps. */
    for (int i = 0; i < K; i++) c[i] = sqrt(3.0) * probit((K + i + 0.5) / n);
    for (int it = 0; it < 100; it++) {
        if (newton_step(c, K) < 1e-15) break;
    }
    for (int i = 0; i < K; i++) {
        g_cents64[bits][K + i] = c[i];
        g_cents64[bits][K - 1 - i] = -c[i];
    }
    for (int i = 0; i + 1 < n; i++)
        g_bounds64[bits][i] = 0.5 * (g_cents64[bits][i] + g_cents64[bits][i + 1]);
    g_bounds64[bits][K - 1] = 0.0; /* exactly, not -c + c rounding */
    for (int i = 0; i < n; i++) g_cents[bits][i] = (float)g_cents64[bits][i];
    for (int i = 0; i + 1 < n; i++) g_bounds[bits][i] = (float)g_bounds64[bits][i];
}

static void solve_all(void)
{
    for (int bits = 1; bits <= LM_MAX_BITS; bits++) solve_bits(bits);
}

static bool valid_bits(int bits)
{
    if (bits < 1 || bits > LM_MAX_BITS) return false;
    pthread_once(&g_once, solve_all);
    return true;
}

const float *vq_lloyd_max_centroids(int bits) { return valid_bits(bits) ? g_cents[bits] : NULL; }
const float *vq_lloyd_max_boundaries(int bits) { return valid_bits(bits) ? g_bounds[bits] : NULL; }
const double *vq_lloyd_max_centroids_f64(int bits) { return valid_bits(bits) ? g_cents64[bits] : NULL; }
const double *vq_lloyd_max_boundaries_f64(int bits) { return valid_bits(bits) ? g_bounds64[bits] : NULL; }

vq_status vq_lloyd_max_codebook(int bits, float *centroids_out, float *boundaries_out)
{
    if (!valid_bits(bits) || centroids_out == NULL) return VQ_ERR_INVALID_ARGUMENT;
    const int n = 1 << bits;
    for (int i = 0; i < n; i++) centroids_out[i] = g_cents[bits][i];
    if (boundaries_out != NULL)
        for (int i = 0; i + 1 < n; i++) boundaries_out[i] = g_bounds[bits][i];
    return VQ_OK;
}
