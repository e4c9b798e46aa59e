/* recipe_launch.h — the launchers of the KV cache's per-channel kernels
 * (cache_recipe.cu) as seen from the host glue (cuda_recipe.c): the sink
 * tokens' and the exact transforms' elementwise steps, and the dtype
 * conversion of the TurboQuant windows' scales. Read by the C compiler and
 * by nvcc. Each enqueues one kernel on `stream` and returns the launch's
 * cudaError_t as an int (0 = success). Strides are in elements. */
#ifndef VQ_CUDA_RECIPE_LAUNCH_H
#define VQ_CUDA_RECIPE_LAUNCH_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Query rows of H query heads, T tokens, D channels (f16 or f32; head h,
 * token t at q + h * sh + t * st) -> dst [H][T][D] f32 compact:
 * x / scale[h / G] in f32, scale [H / G][D] or NULL (a copy). */
int vq_cu_recipe_query(const void *q, bool q_f16, int64_t sh, int64_t st, int H, int64_t T, int D, int G,
                       const float *scale, float *dst, void *stream);

/* The last step of a recipe attend for the rows of one sequence at sink
 * positions (H query heads, T rows): out = src + value_mean[h / G] (f16 or f32 at out + h * osh + t *
 * ost), lse_out (at lse + h * lsh + t * lst, or NULL) = lse_src + scale *
 * sum_c q_c key_mean[h / G][c] (in double; q as in vq_cu_recipe_query). src [H][T][D] and
 * lse_src [H][T] f32 compact; src NULL: every row sees no token (out 0, lse
 * -inf); zero_empty: so does a row whose lse_src is -inf. value_mean,
 * key_mean [H / G][D] f32 or NULL. */
int vq_cu_recipe_finish(const float *src, const float *lse_src, bool zero_empty, const void *q, bool q_f16,
                        int64_t qsh, int64_t qst, void *out, bool out_f16, int64_t osh, int64_t ost, float *lse,
                        int64_t lsh, int64_t lst, int H, int64_t T, int D, int G, const float *value_mean,
                        const float *key_mean, double scale, void *stream);

/* One sequence of a recipe append or attend, as the device reads it. */
typedef struct vq_cu_recipe_seq {
    const float *xf;   /* its tables [3][Hkv * D] (key mean, value mean, key scale), or NULL */
    const void *sink;  /* its sinks [2][Hkv][S][D] f16, or NULL */
    int64_t b;         /* its batch row in q, out and lse */
    int64_t n_sink;    /* sinks held, <= S */
    int64_t n_tok;     /* its tokens, the sinks included (a sliding window's rows end there) */
} vq_cu_recipe_seq;

/* The rows of a recipe append that go to the pages: rows [ns, ns + T) of
 * sequences seqs[0..n) (device; .b the batch row in k and v, .xf the tables
 * or NULL) of k (x[0]) and v (x[1]), f16 or f32, element [b, h, t, 0] at
 * x + b * xs[0] + h * xs[1] + t * xs[2], H kv heads -> dst[0], dst[1]
 * [n][H][T][D] f16 compact: keys f16((k - mean) * scale), values
 * f16(v - mean) in f32, the CPU cache's transform_row then its rounding. */
typedef struct vq_cu_recipe_rows {
    const vq_cu_recipe_seq *seqs;
    int n, H, D;
    int64_t ns, T;
    const void *x[2];
    bool f16;
    int64_t xs[2][3];
    void *dst[2];
} vq_cu_recipe_rows;

int vq_cu_recipe_group_rows(const vq_cu_recipe_rows *r, void *stream);

/* The shapes, switches and tensors of one group of a recipe attend: n_g
 * sequences (seqs, device), each with rows [ns, ns + T) of Hq query heads. */
typedef struct vq_cu_recipe_group {
    const vq_cu_recipe_seq *seqs;
    int n_g, Hq, G, D;
    int64_t S, ns, T;
    int64_t Sq, W;     /* the call's query rows; the layer's sliding window (0: none), which masks sinks too */
    bool causal;
    bool center_keys, center_values, smooth;
    double scale;
    const void *q;     /* the caller's queries, element [b, h, t, 0] at q + b * qs[0] + h * qs[1] + t * qs[2] */
    bool q_f16;
    int64_t qs[3];
    void *out;         /* the caller's output, as q */
    bool out_f16;
    int64_t os[3];
    float *lse;        /* the caller's lse, element [b, h, t] at lse + b * ls[0] + h * ls[1] + t * ls[2], or NULL */
    int64_t ls[3];
} vq_cu_recipe_group;

/* Queries of a group divided by each sequence's key scales (smooth) -> gq
 * [n_g][Hq][T][D] f32 compact. */
int vq_cu_recipe_group_query(const vq_cu_recipe_group *g, float *gq, void *stream);

/* The rows of a group after its page path (go [n_g][Hq][T][D], gl
 * [n_g][Hq][T] f32, over the staged queries gq): merged with every sink of
 * their sequence through the log-sum-exp in double (the CPU cache's
 * merge_rows), the value mean added, written to out in its dtype, the lse
 * moved back to the untransformed scores. One CTA of 128 threads per row. */
int vq_cu_recipe_group_merge(const vq_cu_recipe_group *g, const float *gq, const float *go, const float *gl,
                             void *stream);

/* rows x width elements f16 <-> f32 (either way; the same dtype copies),
 * rounding to nearest even; row r at src + r * src_pitch and dst + r *
 * dst_pitch (elements). */
int vq_cu_convert(const void *src, bool src_f16, int64_t src_pitch, void *dst, bool dst_f16, int64_t dst_pitch,
                  int64_t width, int64_t rows, void *stream);

#ifdef __cplusplus
}
#endif

#endif
