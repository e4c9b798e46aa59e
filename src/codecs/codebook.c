/* codebook.c — the scalar value encoder of docs/FORMATS.md §11: nearest centroid of an
 * arbitrary ascending codebook, and the 1-D Lloyd-Max / k-means trainer
 * that fits such a codebook to samples. */
#include <math.h>
#include <stdlib.h>

#include "turboquant.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

/* Checks cents [n] f32, 1 <= n <= 256; returns n. */
static vq_status check_cents(vq_ctx *ctx, const DLTensor *cents, const char *name, int *n_out)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cents, name, VQ_DTM_F32, 1, 1));
    VQ_RETURN_IF(ctx, cents->shape[0] > 256, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s': at most 256 centroids (u8 indices), got %lld", name, (long long)cents->shape[0]);
    *n_out = (int)cents->shape[0];
    return VQ_OK;
}

vq_status vq_codebook_quantize(vq_ctx *ctx, const DLTensor *x, const DLTensor *cents, DLTensor *idx_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, "x", VQ_DTM_F16_F32, 1, 8));
    int n = 0;
    VQ_FORWARD_IF_ERROR(check_cents(ctx, cents, "cents", &n));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, idx_out, "idx_out", VQ_DTM_U8, 1, 8));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, idx_out, "idx_out", x->ndim, x->shape));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_codebook_quantize(ctx, x, cents, idx_out);
#endif

    /* Over the distinct centroid values (a repeated value is always won by
     * its lowest index, ties going lower), the nearest is the number of
     * midpoints below x, midpoints rounded once from float64. The
     * data-dependent check that makes this true (finite, ascending) scans
     * the host codebook. */
    const float *c = vq_data(cents);
    uint8_t lut[256];
    float mid[255];
    int distinct = 0;
    for (int i = 0; i < n; i++) {
        VQ_RETURN_IF(ctx, !isfinite(c[i]), VQ_ERR_INVALID_ARGUMENT, "argument 'cents': element %d is not finite", i);
        VQ_RETURN_IF(ctx, i > 0 && c[i] < c[i - 1], VQ_ERR_INVALID_ARGUMENT,
                     "argument 'cents' must be ascending: element %d (%g) < element %d (%g)", i, (double)c[i], i - 1,
                     (double)c[i - 1]);
        if (i > 0 && c[i] == c[i - 1]) continue;
        if (distinct > 0) mid[distinct - 1] = (float)(0.5 * ((double)c[lut[distinct - 1]] + (double)c[i]));
        lut[distinct++] = (uint8_t)i;
    }
    vq_boundaries q;
    vq_boundaries_init(&q, mid, distinct - 1);
    return vq_turbo_quantize_elements(ctx, x, &q, distinct < n ? lut : NULL, idx_out);
}

/* ---- trainer ---- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Number of sorted[] <= v (sorted ascending, n long). */
static int64_t count_at_most(const float *sorted, int64_t n, double v)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((double)sorted[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Lloyd rounds on sorted samples: cell i is (b_{i-1}, b_i] with b the
 * midpoints (a sample on a midpoint belongs to the lower centroid, as in
 * the quantizer), its mean is a difference of prefix sums, so a round costs
 * O(n_cents log N) after one O(N log N) sort. */
static void lloyd_rounds(const float *sorted, const double *prefix, int64_t N, int n, int iters, double *c)
{
    for (int it = 0; it < iters; it++) {
        int64_t lo = 0;
        for (int i = 0; i < n; i++) {
            const int64_t hi = i == n - 1 ? N : count_at_most(sorted, N, 0.5 * (c[i] + c[i + 1]));
            if (hi > lo) c[i] = (prefix[hi] - prefix[lo]) / (double)(hi - lo); /* empty: keep */
            lo = hi > lo ? hi : lo;
        }
    }
}

vq_status vq_lloyd_max_fit(vq_ctx *ctx, const DLTensor *samples, int n_cents, int iters, DLTensor *cents_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, samples, "samples", VQ_DTM_F16_F32, 1, 1));
    const int64_t N = samples->shape[0];
    VQ_RETURN_IF(ctx, n_cents < 1 || n_cents > 256, VQ_ERR_INVALID_ARGUMENT, "n_cents must be in 1..256, got %d",
                 n_cents);
    VQ_RETURN_IF(ctx, N < n_cents, VQ_ERR_INVALID_ARGUMENT,
                 "argument 'samples' has %lld elements, fewer than n_cents = %d", (long long)N, n_cents);
    VQ_RETURN_IF(ctx, iters < 1, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 1, got %d", iters);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, cents_out, "cents_out", VQ_DTM_F32, 1, 1));
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, cents_out, "cents_out", 0, n_cents, "n_cents"));
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED,
                 "this trainer runs on CPU contexts only: train on host tensors and copy the result to the device");

    /* scratch: sorted samples [N] f32, then prefix sums [N + 1] f64 */
    const size_t sorted_bytes = ((size_t)N * sizeof(float) + 7) & ~(size_t)7;
    char *mem = vq_ctx_scratch(ctx, sorted_bytes + ((size_t)N + 1) * sizeof(double));
    VQ_RETURN_IF(ctx, mem == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %lld samples of scratch", (long long)N);
    float *sorted = (float *)mem;
    double *prefix = (double *)(mem + sorted_bytes);
    vq_row_to_f32(vq_data(samples), vq_dtype_of(samples), N, sorted);
    for (int64_t i = 0; i < N; i++)
        VQ_RETURN_IF(ctx, !isfinite(sorted[i]), VQ_ERR_INVALID_ARGUMENT,
                     "argument 'samples': element %lld is not finite", (long long)i);
    qsort(sorted, (size_t)N, sizeof(float), cmp_float);
    prefix[0] = 0.0;
    for (int64_t i = 0; i < N; i++) prefix[i + 1] = prefix[i] + sorted[i];

    double c[256];
    for (int i = 0; i < n_cents; i++) c[i] = sorted[(int64_t)((i + 0.5) * (double)N / n_cents)];
    lloyd_rounds(sorted, prefix, N, n_cents, iters, c);
    float *out = vq_data(cents_out);
    for (int i = 0; i < n_cents; i++) out[i] = (float)c[i];
    return VQ_OK;
}
