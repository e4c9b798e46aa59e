/* kmeans.c — k-means for codebook training (docs/FORMATS.md §8, §10): k-means++ seeding
 * from the library PRNG, then Lloyd rounds. The expensive parts (distances
 * to the newest seed, nearest-centroid assignment) run per sample on the
 * thread pool; every reduction (the seeding weights' total, the centroid
 * sums) runs in sample order in float64, so the result does not depend on
 * how tasks were spread over threads. */
#include <stdatomic.h>
#include <string.h>

#include "codecs/kmeans.h"
#include "codecs/centroids.h"

/* Bytes rounded up to whole cache lines, so every region starts aligned. */
static size_t lines(size_t bytes) { return (bytes + 63) / 64 * 64; }

/* The scratch regions of one run, in order. */
typedef struct km_scratch {
    float *cbt;       /* [d, ld] transposed centroids */
    int32_t *assign;  /* [N] cluster of each sample; -1 before the first round */
    float *weight;    /* [N] squared distance to the nearest seed so far */
    double *sums;     /* [C, d] */
    int64_t *counts;  /* [C] */
} km_scratch;

size_t vq_kmeans_scratch_bytes(int64_t N, int64_t d, int64_t C)
{
    return lines((size_t)(d * vq_centroids_ld(C)) * sizeof(float)) + lines((size_t)N * sizeof(int32_t)) +
           lines((size_t)N * sizeof(float)) + lines((size_t)(C * d) * sizeof(double)) +
           lines((size_t)C * sizeof(int64_t));
}

static void carve(char *base, int64_t N, int64_t d, int64_t C, km_scratch *s)
{
    s->cbt = (float *)base;
    base += lines((size_t)(d * vq_centroids_ld(C)) * sizeof(float));
    s->assign = (int32_t *)base;
    base += lines((size_t)N * sizeof(int32_t));
    s->weight = (float *)base;
    base += lines((size_t)N * sizeof(float));
    s->sums = (double *)base;
    base += lines((size_t)(C * d) * sizeof(double));
    s->counts = (int64_t *)base;
}

typedef struct km_job {
    const vq_centroids_kernels *k;
    const float *x;        /* [N, d] */
    int64_t N, d, C, ld, chunk;  /* chunk: rows per task of the phase running */
    km_scratch s;
    const float *seed;     /* the newest seed [d] (seeding phase) */
    bool first_seed;
    atomic_int changed;    /* an assignment changed this round */
} km_job;


/* weight[i] = min(weight[i], ||x_i - seed||^2) for the task's samples. */
static void weight_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    km_job *j = arg;
    for (int64_t i = task * j->chunk; i < vq_centroids_task_end(task, j->chunk, j->N); i++) {
        const float *xi = j->x + i * j->d;
        float acc = 0.0f;
        for (int64_t c = 0; c < j->d; c++) {
            const float diff = xi[c] - j->seed[c];
            acc += diff * diff;
        }
        if (j->first_seed || acc < j->s.weight[i]) j->s.weight[i] = acc;
    }
}

/* assign[i] = the nearest centroid of sample i. */
static void assign_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    km_job *j = arg;
    bool changed = false;
    for (int64_t i = task * j->chunk; i < vq_centroids_task_end(task, j->chunk, j->N); i++) {
        const int32_t c = j->k->nearest(j->x + i * j->d, j->s.cbt, (int32_t)j->C, j->ld, (int32_t)j->d);
        changed |= c != j->s.assign[i];
        j->s.assign[i] = c;
    }
    if (changed) atomic_store_explicit(&j->changed, 1, memory_order_relaxed);
}

/* Sample drawn with probability weight[i] / total (k-means++), or uniformly
 * when every weight is 0 (fewer distinct samples than centroids). */
static int64_t draw_seed(const km_job *j, vq_rng *rng)
{
    double total = 0.0;
    for (int64_t i = 0; i < j->N; i++) total += j->s.weight[i];
    const double u = vq_rng_uniform(rng);
    if (!(total > 0.0)) {
        const int64_t i = (int64_t)(u * (double)j->N);
        return i < j->N ? i : j->N - 1;
    }
    const double r = u * total;
    double cum = 0.0;
    int64_t last = 0;
    for (int64_t i = 0; i < j->N; i++) {
        if (j->s.weight[i] <= 0.0f) continue;
        cum += j->s.weight[i];
        last = i;
        if (cum > r) return i;
    }
    return last;  /* rounding left r at the very top of the total */
}

static void seed_centroids(vq_ctx *ctx, km_job *j, uint64_t seed, int64_t tasks, float *cents)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    for (int64_t k = 0; k < j->C; k++) {
        int64_t pick;
        if (k == 0) {
            pick = (int64_t)(vq_rng_uniform(&rng) * (double)j->N);
            if (pick >= j->N) pick = j->N - 1;
        } else {
            pick = draw_seed(j, &rng);
        }
        memcpy(cents + k * j->d, j->x + pick * j->d, (size_t)j->d * sizeof(float));
        if (k + 1 == j->C) break;  /* the last seed's distances are never used */
        j->seed = cents + k * j->d;
        j->first_seed = k == 0;
        vq_parallel_for(ctx, tasks, weight_task, j);
    }
}

/* Centroids = means of their samples, summed in sample order. Empty clusters
 * keep their centroid. */
static void update_centroids(const km_job *j, float *cents)
{
    memset(j->s.sums, 0, (size_t)(j->C * j->d) * sizeof(double));
    memset(j->s.counts, 0, (size_t)j->C * sizeof(int64_t));
    for (int64_t i = 0; i < j->N; i++) {
        const int32_t c = j->s.assign[i];
        double *sum = j->s.sums + c * j->d;
        const float *xi = j->x + i * j->d;
        for (int64_t t = 0; t < j->d; t++) sum[t] += xi[t];
        j->s.counts[c]++;
    }
    for (int64_t c = 0; c < j->C; c++) {
        if (j->s.counts[c] == 0) continue;
        for (int64_t t = 0; t < j->d; t++)
            cents[c * j->d + t] = (float)(j->s.sums[c * j->d + t] / (double)j->s.counts[c]);
    }
}

vq_status vq_kmeans_run(vq_ctx *ctx, const float *x, int64_t N, int64_t d, int64_t C, int iters, uint64_t seed,
                        float *cents)
{
    const size_t bytes = vq_kmeans_scratch_bytes(N, d, C);
    char *base = vq_ctx_scratch(ctx, bytes);
    VQ_RETURN_IF(ctx, base == NULL, VQ_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes of k-means scratch", bytes);
    km_job j = {.k = vq_centroids_kernels_for(ctx->isa), .x = x, .N = N, .d = d, .C = C, .ld = vq_centroids_ld(C)};
    carve(base, N, d, C, &j.s);
    int64_t assign_chunk;
    const int64_t assign_tasks = vq_centroids_tasks(ctx, N, d * C, &assign_chunk);
    const int64_t weight_tasks = vq_centroids_tasks(ctx, N, d, &j.chunk);
    seed_centroids(ctx, &j, seed, weight_tasks, cents);
    j.chunk = assign_chunk;
    for (int64_t i = 0; i < N; i++) j.s.assign[i] = -1;
    for (int it = 0; it < iters; it++) {
        vq_centroids_transpose(ctx, cents, 1, C, d, j.s.cbt);
        atomic_store(&j.changed, 0);
        vq_parallel_for(ctx, assign_tasks, assign_task, &j);
        if (!atomic_load(&j.changed)) break;  /* a fixed point: further rounds change nothing */
        update_centroids(&j, cents);
    }
    return VQ_OK;
}

vq_status vq_kmeans(vq_ctx *ctx, const DLTensor *samples, int C, int iters, uint64_t seed, DLTensor *centroids_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, samples, "samples", VQ_DTM_F32, 2, 2));
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, centroids_out, "centroids_out", VQ_DTM_F32, 2, 2));
    const int64_t N = vq_dim(samples, 0), d = vq_dim(samples, 1);
    VQ_RETURN_IF(ctx, C < 1 || C > N, VQ_ERR_INVALID_ARGUMENT, "C must be in 1..N = %lld (the samples), got %d",
                 (long long)N, C);
    VQ_RETURN_IF(ctx, iters < 0, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 0, got %d", iters);
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, centroids_out, "centroids_out", 2, (const int64_t[]){C, d}));
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED,
                 "this trainer runs on CPU contexts only: train on host tensors and copy the result to the device");
    return vq_kmeans_run(ctx, vq_data(samples), N, d, C, iters, seed, vq_data(centroids_out));
}
