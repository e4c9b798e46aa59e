/* attn_merge.c — vq_attention_merge: two attention results over disjoint
 * token sets of the same queries, each with its log-sum-exp, combined into
 * the result over the union (FlashInfer's merge_state): with
 * m = max(lse_a, lse_b), wa = e^(lse_a - m), wb = e^(lse_b - m),
 *   out = (wa out_a + wb out_b) / (wa + wb),   lse = m + log(wa + wb).
 * Rows are read whole before they are written, so out may alias out_a or
 * out_b (and lse_out lse_a or lse_b). */
#include <math.h>

#include "attention/attn_formats.h"
#ifdef VQ_WITH_CUDA
#include "attention/attn_cuda.h"
#endif

typedef struct merge_job {
    vq_attn_view a, b, o;            /* [B,H,S,D] */
    vq_attn_view la, lb, lo;         /* [B,H,S] f32; lo.base NULL when not wanted */
    vq_dtype a_dt, b_dt, o_dt;
    int64_t H, S, D;
} merge_job;

/* One (batch, head): its S rows. */
static void merge_rows(void *arg, int64_t bh, int thread)
{
    const merge_job *j = arg;
    (void)thread;
    const int64_t b = bh / j->H, h = bh % j->H;
    float ra[256], rb[256]; /* D <= 256 */
    for (int64_t i = 0; i < j->S; i++) {
        const float la = *(const float *)vq_attn_at(&j->la, b, h, i), lb = *(const float *)vq_attn_at(&j->lb, b, h, i);
        vq_row_to_f32(vq_attn_at(&j->a, b, h, i), j->a_dt, j->D, ra);
        vq_row_to_f32(vq_attn_at(&j->b, b, h, i), j->b_dt, j->D, rb);
        const float m = la > lb ? la : lb;
        float lse;
        if (isnan(la) || isnan(lb)) { /* a poisoned side (non-finite inputs): first, as m drops NaN */
            for (int64_t c = 0; c < j->D; c++) ra[c] = NAN;
            lse = NAN;
        } else if (m == -INFINITY) { /* neither side saw a token */
            for (int64_t c = 0; c < j->D; c++) ra[c] = 0.0f;
            lse = -INFINITY;
        } else {
            const float wa = expf(la - m), wb = expf(lb - m), inv = 1.0f / (wa + wb);
            for (int64_t c = 0; c < j->D; c++) ra[c] = (wa * ra[c] + wb * rb[c]) * inv;
            lse = m + logf(wa + wb);
        }
        vq_row_from_f32(ra, j->D, j->o_dt, (void *)vq_attn_at(&j->o, b, h, i));
        if (j->lo.base) *(float *)vq_attn_at(&j->lo, b, h, i) = lse;
    }
}

/* t [B,H,S,D] f16/f32 named `name`, with the shape of `like` when given */
static vq_status check_out(vq_ctx *ctx, const DLTensor *t, const char *name, const DLTensor *like)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, t, name, VQ_DTM_F16_F32, 4, 4));
    if (like) VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, t, name, 4, like->shape));
    return VQ_OK;
}

static vq_status check_lse(vq_ctx *ctx, const DLTensor *t, const char *name, const DLTensor *out)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, t, name, VQ_DTM_F32, 3, 3));
    return vq_check_shape(ctx, t, name, 3, out->shape);
}

vq_status vq_attention_merge(vq_ctx *ctx, const DLTensor *out_a, const DLTensor *lse_a, const DLTensor *out_b,
                             const DLTensor *lse_b, DLTensor *out, DLTensor *lse_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(check_out(ctx, out_a, "out_a", NULL));
    VQ_FORWARD_IF_ERROR(check_out(ctx, out_b, "out_b", out_a));
    VQ_FORWARD_IF_ERROR(check_out(ctx, out, "out", out_a));
    VQ_FORWARD_IF_ERROR(vq_check_no_overlap(ctx, out, "out"));
    VQ_RETURN_IF(ctx, out_a->shape[3] > 256, VQ_ERR_UNSUPPORTED,
                 "argument 'out_a': head dim D = %lld > 256 is not supported", (long long)out_a->shape[3]);
    VQ_FORWARD_IF_ERROR(check_lse(ctx, lse_a, "lse_a", out_a));
    VQ_FORWARD_IF_ERROR(check_lse(ctx, lse_b, "lse_b", out_a));
    if (lse_out) {
        VQ_FORWARD_IF_ERROR(check_lse(ctx, lse_out, "lse_out", out_a));
        VQ_FORWARD_IF_ERROR(vq_check_no_overlap(ctx, lse_out, "lse_out"));
    }
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_attention_merge(ctx, out_a, lse_a, out_b, lse_b, out, lse_out);
#else
    VQ_RETURN_IF(ctx, vq_ctx_is_cuda(ctx), VQ_ERR_UNSUPPORTED, "this build has no CUDA backend");
#endif
    const merge_job j = {vq_attn_view_of(out_a), vq_attn_view_of(out_b), vq_attn_view_of(out),
                         vq_attn_view_of(lse_a), vq_attn_view_of(lse_b),
                         lse_out ? vq_attn_view_of(lse_out) : (vq_attn_view){0},
                         vq_dtype_of(out_a), vq_dtype_of(out_b), vq_dtype_of(out),
                         out_a->shape[1], out_a->shape[2], out_a->shape[3]};
    vq_parallel_for(ctx, out_a->shape[0] * out_a->shape[1], merge_rows, (void *)&j);
    return VQ_OK;
}
