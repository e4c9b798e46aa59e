/* cache_formats.c — two attention formats that exist only because of the
 * cache's residual window and query handling, built on the skeleton's
 * format interface (attention/attn_skeleton.h):
 *
 *   RaBitQ with the Hamming score on raw queries: the library's Hamming
 *   binder takes pre-rotated queries and a caller's per-row q_scale; the
 *   cache gets raw queries, so prep_q rotates the row (the key signs' diag)
 *   and sets q_scale = softmax scale * ||rot(q)||_1 / D (the L1 fit of
 *   rot(q) by its signs, the query scale vq_rabitq_hamming_score takes).
 *
 *   f16 values in a rotated basis: the TurboQuant value pages accumulate
 *   P.V in the rotated basis and rotate each output row back once (their
 *   finish()); the window's f16 values must then be accumulated rotated too,
 *   o += p . rot(v) (a few tokens, one rotation each).
 *
 *   TurboQuant values in the plain basis: the converse, a TurboQuant window
 *   (VQ_WINDOW_TURBO8 / VQ_WINDOW_TURBO) next to pages whose values are not TurboQuant: a
 *   block's P.V is accumulated rotated into scratch and each row rotated
 *   back, o += rot^-1(p . y_hat) (linear, so equal to p . v_hat). */
#include <math.h>
#include <string.h>

#include "cache/cache_formats.h"
#include "codecs/hadamard.h"

static void hamming_prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const vq_cache_hamming_keys *k = desc;
    float y[256]; /* D <= 256 */
    memcpy(y, q, sizeof(float) * (size_t)k->D);
    k->rotate(y, k->D, k->diag, false);
    double l1 = 0;
    for (int64_t c = 0; c < k->D; c++) l1 += fabsf(y[c]);
    k->inner->ops->prep_q(k->inner->desc, y, row, qp);
    /* the Hamming layout of attn_keys_rabitq.c: qp[0] = q_scale, then the sign bytes */
    qp[0] = k->scale * (float)(l1 / (double)k->D);
}

static void hamming_score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                          int R, float *s)
{
    const vq_cache_hamming_keys *k = desc;
    k->inner->ops->score(k->inner->desc, th, blk, qp, R, s);
}

static const vq_attn_key_ops hamming_ops = {hamming_prep_q, hamming_score, NULL, NULL};

vq_status vq_cache_bind_hamming(vq_ctx *ctx, const DLTensor *bits, const DLTensor *mag, const float *diag,
                                float scale, const vq_attn_dims *dims, vq_cache_hamming_keys *desc,
                                vq_attn_keys *inner, vq_attn_keys *out)
{
    static const float one = 1.0f;
    VQ_FORWARD_IF_ERROR(vq_attn_bind_keys_rabitq(ctx, bits, mag, NULL, false, NULL, &one, dims, inner));
    *desc = (vq_cache_hamming_keys){inner, vq_hadamard_kernels_for(ctx->isa)->rotate_row, diag, dims->D, scale};
    *out = *inner;
    out->ops = &hamming_ops;
    out->desc = desc;
    return VQ_OK;
}

/* p [R][BN] -> o [R][D] += p . rot(v[t0 .. t0+n)) */
static void rotated_accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                               int R, float *o)
{
    const vq_cache_rotated_values *v = desc;
    for (int j = 0; j < blk->n; j++) {
        float *row = th->tile + (int64_t)j * v->D;
        th->kern->cvt_f16(v->D, (const uint16_t *)vq_attn_at(&v->v, blk->b, blk->hk, blk->t0 + j), row);
        v->rotate(row, v->D, v->diag, false);
    }
    th->kern->pv[VQ_ATTN_F32](R, blk->n, v->D, p, VQ_ATTN_BN, th->tile, v->D, o, v->D);
}

static const vq_attn_value_ops rotated_ops = {rotated_accumulate, NULL, NULL, NULL};

void vq_cache_bind_rotated_values(vq_ctx *ctx, const DLTensor *v, const float *diag, vq_cache_rotated_values *desc,
                                  vq_attn_values *out)
{
    *desc = (vq_cache_rotated_values){vq_attn_view_of(v), vq_hadamard_kernels_for(ctx->isa)->rotate_row, diag,
                                      vq_dim(v, -1)};
    out->ops = &rotated_ops;
    out->desc = desc;
    out->thread_floats = 0;
}

/* p [R][BN] -> o [R][D] += rot^-1(p . y_hat[t0 .. t0+n)) */
static void unrotated_accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                                 int R, float *o)
{
    const vq_cache_unrotated_values *v = desc;
    const int64_t D = v->D;
    float *acc = th->extra; /* [R][D], then the inner format's scratch */
    vq_attn_thread inner = *th;
    inner.extra = th->extra + VQ_ATTN_MAX_ROWS * D;
    memset(acc, 0, sizeof(float) * (size_t)(R * D));
    v->inner->ops->accumulate(v->inner->desc, &inner, blk, p, R, acc);
    for (int r = 0; r < R; r++) {
        float *a = acc + (int64_t)r * D, *dst = o + (int64_t)r * D;
        v->rotate(a, D, v->diag, true);
        for (int64_t c = 0; c < D; c++) dst[c] += a[c];
    }
}

static const vq_attn_value_ops unrotated_ops = {unrotated_accumulate, NULL, NULL, NULL};

void vq_cache_bind_unrotated_values(vq_ctx *ctx, const vq_attn_values *inner, const float *diag, int64_t D,
                                    vq_cache_unrotated_values *desc, vq_attn_values *out)
{
    *desc = (vq_cache_unrotated_values){inner, vq_hadamard_kernels_for(ctx->isa)->rotate_row, diag, D};
    out->ops = &unrotated_ops;
    out->desc = desc;
    /* extra is 64-byte aligned and R <= VQ_ATTN_MAX_ROWS; D is a multiple of 8, so inner's part stays 32-byte aligned */
    out->thread_floats = VQ_ATTN_MAX_ROWS * D + inner->thread_floats;
}
