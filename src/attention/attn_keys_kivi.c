/* attn_keys_kivi.c — KIVI group-affine keys (per channel over groups of g
 * tokens): k_hat[t,c] = code[t,c] * scale[t/g,c] + zero[t/g,c]. A block is
 * decoded group segment by group segment into the thread's f32 tile, then
 * scored by all rows at once (kern->qk); few rows score straight from the
 * codes (kern->kivi_qk). With integer scores (use_int8)
 * each segment instead quantises the rows' q * scale once to int8 planes and
 * scores every token with exact integer dots (kern->kivi_q8 / kivi_qk8):
 * q . k_hat = q . (code * scale) + q . zero = step * (xq . code) + q . zero
 * up to the rounding of xq, whose bound veloxquant.h states. */
#include "attention/attn_formats.h"

typedef struct kivi_keys {
    vq_attn_view codes;          /* [B,Hkv,Skv,*] rows of D codes */
    vq_attn_view scale, zero;    /* [B,Hkv,GK,D] f32/f16 */
    vq_dtype sz_dt;
    int bits;                    /* 2, 4 (packed) or 8 (one code per byte) */
    int64_t g, D, Skv;
    float softmax_scale;
    bool int8;                   /* integer scores (kivi_q8 / kivi_qk8) */
} kivi_keys;

/* Thread scratch: f16 -> f32 group rows [2][D]. Integer scores keep the
 * quantised rows (int8 [VQ_ATTN_MAX_ROWS][D]) and their steps and zero
 * terms ([VQ_ATTN_MAX_ROWS][2]) in the thread's memo, one group's at a time. */
_Static_assert(sizeof(kivi_keys) <= sizeof(vq_attn_desc_storage), "kivi_keys too big");
_Static_assert(VQ_ATTN_KIVI_INT8_N == VQ_ATTN_BN, "the fused KIVI kernel takes whole skeleton blocks");

/* q [D] -> qp [D] = softmax_scale * q */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const kivi_keys *k = desc;
    (void)row;
    for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * k->softmax_scale;
}

/* Row `grp` of scale/zero of one (b, hk) as f32: in place when f32, else
 * converted into buf [2][D]. */
static void group_rows(const kivi_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, int64_t grp,
                       float *buf, const float **sc, const float **ze)
{
    const void *s = vq_attn_at(&k->scale, blk->b, blk->hk, grp), *z = vq_attn_at(&k->zero, blk->b, blk->hk, grp);
    if (k->sz_dt == VQ_DT_F32) {
        *sc = s;
        *ze = z;
        return;
    }
    th->kern->cvt_f16(k->D, s, buf);
    th->kern->cvt_f16(k->D, z, buf + k->D);
    *sc = buf;
    *ze = buf + k->D;
}

/* The rows quantised against group grp (kivi_q8), once per group (the
 * memo), not once per block; *dz their steps and zero terms. */
static const int8_t *group_q8(const kivi_keys *k, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                              int R, int64_t grp, const float **dz)
{
    int8_t *xq = (int8_t *)th->memo_data;
    float *z = th->memo_data + VQ_ATTN_MAX_ROWS * k->D / 4;
    *dz = z;
    if (!vq_attn_memo_hit(th, k, blk->b, blk->hk, grp, qp, R)) {
        const float *sc, *ze;
        group_rows(k, th, blk, grp, th->extra, &sc, &ze);
        th->kern->kivi_q8(R, k->D, k->bits, qp, k->D, sc, ze, xq, z);
    }
    return xq;
}

/* qp [R][D] -> s [R][BN]: decode the block's keys into the tile, one group
 * segment at a time, then score all rows against the tile */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const kivi_keys *k = desc;
    const int64_t ldc = k->codes.st;
    const bool direct = R <= VQ_ATTN_DIRECT_ROWS;
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    if (k->int8 && ahead + VQ_ATTN_BN <= k->Skv) { /* codes of a later block, its group's scale and zero rows */
        const int64_t row = k->D * (k->sz_dt == VQ_DT_F32 ? 4 : 2);
        vq_attn_prefetch(vq_attn_at(&k->codes, blk->b, blk->hk, ahead), VQ_ATTN_BN * ldc);
        vq_attn_prefetch(vq_attn_at(&k->scale, blk->b, blk->hk, ahead / k->g), row);
        vq_attn_prefetch(vq_attn_at(&k->zero, blk->b, blk->hk, ahead / k->g), row);
    }
    for (int64_t t = blk->t0; t < blk->t0 + blk->n;) {
        const int64_t grp = t / k->g;
        int64_t end = (grp + 1) * k->g;
        if (end > blk->t0 + blk->n) end = blk->t0 + blk->n;
        const float *sc, *ze;
        const uint8_t *codes = vq_attn_at(&k->codes, blk->b, blk->hk, t);
        if (k->int8) {
            const float *dz;
            const int8_t *xq = group_q8(k, th, blk, qp, R, grp, &dz);
            th->kern->kivi_qk8(R, (int)(end - t), k->D, k->bits, codes, ldc, xq, dz, s + (t - blk->t0), VQ_ATTN_BN);
            t = end;
            continue;
        }
        group_rows(k, th, blk, grp, th->extra, &sc, &ze);
        if (direct)
            th->kern->kivi_qk(R, (int)(end - t), k->D, k->bits, codes, ldc, sc, ze, qp, k->D, s + (t - blk->t0),
                                VQ_ATTN_BN);
        else
            th->kern->kivi_k_tile((int)(end - t), k->D, k->bits, codes, ldc, sc, ze, th->tile + (t - blk->t0) * k->D);
        t = end;
    }
    if (!direct && !k->int8) th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
}

static bool use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked);
/* integer scores under AUTO wherever the layout allows: faster on every ISA */
/* The keys' part of the fused block with TurboQuant values (kivi_turbo_keys
 * in attn_skeleton.h): integer scores of 4-bit codes at D = 64 in
 * contiguous 32-byte rows, a whole block inside one group. */
static bool kivi_turbo_keys(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp,
                            int R, vq_attn_kivi_turbo_block *b)
{
    const kivi_keys *k = desc;
    if (!k->int8 || k->bits != 4 || k->D != 64 || k->codes.st != 32 || blk->n != VQ_ATTN_BN ||
        k->g % VQ_ATTN_BN != 0 || blk->t0 % VQ_ATTN_BN != 0 || R > VQ_ATTN_DIRECT_ROWS)
        return false;
    b->xc = group_q8(k, th, blk, qp, R, blk->t0 / k->g, &b->dz);
    b->sidx = NULL;
    b->kcodes = vq_attn_at(&k->codes, blk->b, blk->hk, blk->t0);
    return true;
}

static const vq_attn_key_ops kivi_ops = {prep_q, score, use_int8, kivi_turbo_keys};

bool vq_attn_kivi_keys_kivi_int8(const vq_attn_keys *keys, const vq_attn_block *blk, int64_t count,
                               vq_attn_kivi_int8_block *b)
{
    const kivi_keys *k = keys->desc;
    if (keys->ops != &kivi_ops || !k->int8 || k->bits != 2 || k->D != 128 || k->g != VQ_ATTN_KIVI_INT8_N ||
        blk->n != VQ_ATTN_KIVI_INT8_N || blk->t0 % VQ_ATTN_KIVI_INT8_N != 0 || count < 1 || k->codes.st != 32)
        return false;
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD, grp = blk->t0 / k->g;
    const bool pf = ahead + VQ_ATTN_BN <= k->Skv; /* what score() prefetches, for the kernel to */
    const int64_t row = k->D * (k->sz_dt == VQ_DT_F32 ? 4 : 2);
    b->nb = count;
    b->pf_nb = vq_attn_prefetch_blocks(blk->t0, count, k->Skv);
    b->step[0] = VQ_ATTN_BN * k->codes.st; /* one group (g = BN) per block */
    b->step[1] = k->scale.st;
    b->step[2] = k->zero.st;
    b->pf[0] = pf ? vq_attn_at(&k->codes, blk->b, blk->hk, ahead) : NULL;
    b->pf[1] = pf ? vq_attn_at(&k->scale, blk->b, blk->hk, ahead / k->g) : NULL;
    b->pf[2] = pf ? vq_attn_at(&k->zero, blk->b, blk->hk, ahead / k->g) : NULL;
    b->pf_bytes[0] = VQ_ATTN_BN * k->codes.st;
    b->pf_bytes[1] = b->pf_bytes[2] = row;
    b->kcodes = vq_attn_at(&k->codes, blk->b, blk->hk, blk->t0);
    b->kscale = vq_attn_at(&k->scale, blk->b, blk->hk, grp);
    b->kzero = vq_attn_at(&k->zero, blk->b, blk->hk, grp);
    b->f16 = k->sz_dt != VQ_DT_F32;
    return true;
}

vq_status vq_attn_kivi_layout(vq_ctx *ctx, const DLTensor *codes, const char *name, const vq_attn_dims *dims,
                                int bits, int *layout_bits)
{
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, codes, name, VQ_DTM_U8, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, codes, name, 4, (const int64_t[]){dims->B, dims->Hkv, dims->Skv, -1}));
    const int64_t last = codes->shape[3], D = dims->D;
    if (bits == 0) {
        bits = last == D ? 8 : last == D / 2 ? 4 : last == D / 4 ? 2 : 0;
        VQ_RETURN_IF(ctx, bits == 0, VQ_ERR_INVALID_ARGUMENT,
                     "argument '%s': last dim %lld is none of D = %lld (one code per byte), D/2 (4-bit packed), "
                     "D/4 (2-bit packed)",
                     name, (long long)last, (long long)D);
    }
    VQ_RETURN_IF(ctx, bits != 2 && bits != 4 && bits != 8, VQ_ERR_INVALID_ARGUMENT,
                 "bits must be 2, 4 or 8 (0 = detect), got %d", bits);
    VQ_FORWARD_IF_ERROR(vq_check_dim(ctx, codes, name, 3, D * bits / 8, "D*bits/8"));
    *layout_bits = bits;
    return VQ_OK;
}

vq_status vq_attn_bind_keys_kivi(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                   int bits, int64_t g, const vq_attn_dims *dims, float softmax_scale,
                                   vq_attn_keys *out)
{
    int lb = 0;
    VQ_FORWARD_IF_ERROR(vq_attn_kivi_layout(ctx, codes, "k_codes", dims, bits, &lb));
    VQ_RETURN_IF(ctx, g < 1, VQ_ERR_INVALID_ARGUMENT, "group_size must be >= 1, got %lld", (long long)g);
    const int64_t GK = vq_ceil_div(dims->Skv, g);
    const int64_t want[4] = {dims->B, dims->Hkv, GK, dims->D};
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, scale, "k_scale", VQ_DTM_F16_F32, 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, scale, "k_scale", 4, want));
    VQ_FORWARD_IF_ERROR(vq_check_tensor_view(ctx, zero, "k_zero", VQ_DTM(vq_dtype_of(scale)), 4, 4));
    VQ_FORWARD_IF_ERROR(vq_check_shape(ctx, zero, "k_zero", 4, want));
    kivi_keys *d = (kivi_keys *)(void *)out->storage.bytes;
    *d = (kivi_keys){vq_attn_view_of(codes), vq_attn_view_of(scale), vq_attn_view_of(zero), vq_dtype_of(scale), lb,
                       g, dims->D, dims->Skv, softmax_scale, false};
    out->ops = &kivi_ops;
    out->desc = d;
    out->qp_floats = dims->D;
    out->thread_floats = 2 * dims->D;
    return VQ_OK;
}

/* The switch to integer scores (the query quantised to int8 once per key
 * group and block, exact integer dots: kern->kivi_q8 / kivi_qk8); false,
 * changing nothing, where the kernels do not apply (bits 8, or D % 64 != 0:
 * vq_attn_q8_supported). */
static bool use_int8(vq_attn_keys *keys, const vq_attn_kernels *kern, bool asked)
{
    (void)kern, (void)asked;
    kivi_keys *d = (kivi_keys *)(void *)keys->storage.bytes;
    if (!vq_attn_q8_supported(d->bits, d->D)) return false;
    d->int8 = true;
    return true;
}
