/* attn_values_kivi.c — KIVI group-affine values (per token over groups of g
 * channels): v_hat[t,c] = code[t,c] * vs[t,c/g] + vz[t,c/g], decoded per
 * block into the thread's f32 tile and accumulated by all rows (kern->pv),
 * or for few rows accumulated straight from the codes (kern->kivi_pv).
 * With integer p.V (use_int8) every block goes to
 * kern->kivi_pv8: the weights p * vs rounded to int8 per row, block and
 * group, integer dots with the codes (error bound: veloxquant.h at
 * vq_value_accum). */
#include <stdlib.h>
#include <string.h>

#include "attention/attn_formats.h"

typedef struct kivi_values {
    vq_attn_view codes;         /* [B,Hkv,Skv,*] rows of D codes */
    vq_attn_view scale, zero;   /* [B,Hkv,Skv,GV] f32/f16 */
    vq_dtype sz_dt;
    int bits;
    int64_t g, GV, D, Skv;
    bool int8; /* integer p.V (kivi_pv8) */
} kivi_values;
_Static_assert(sizeof(kivi_values) <= sizeof(vq_attn_desc_storage), "kivi_values too big");

/* p [R][BN] -> o [R][D] += p . v_hat[t0 .. t0+n) */
static void accumulate(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *p,
                       int R, float *o)
{
    const kivi_values *v = desc;
    const int64_t GV = v->GV, nz = blk->n * GV, esz = v->sz_dt == VQ_DT_F32 ? 4 : 2;
    const void *s0 = vq_attn_at(&v->scale, blk->b, blk->hk, blk->t0), *z0 = vq_attn_at(&v->zero, blk->b, blk->hk, blk->t0);
    const float *vs, *vz;
    if (v->sz_dt == VQ_DT_F32 && v->scale.st == GV * esz && v->zero.st == GV * esz) {
        vs = s0;
        vz = z0;
    } else if (v->scale.st == GV * esz && v->zero.st == GV * esz) {
        th->kern->cvt_f16(nz, s0, th->extra);
        th->kern->cvt_f16(nz, z0, th->extra + nz);
        vs = th->extra;
        vz = th->extra + nz;
    } else { /* strided token rows: gathered (and converted) row by row */
        for (int j = 0; j < blk->n; j++) {
            vq_row_to_f32((const char *)s0 + j * v->scale.st, v->sz_dt, GV, th->extra + j * GV);
            vq_row_to_f32((const char *)z0 + j * v->zero.st, v->sz_dt, GV, th->extra + nz + j * GV);
        }
        vs = th->extra;
        vz = th->extra + nz;
    }
    const uint8_t *codes = vq_attn_at(&v->codes, blk->b, blk->hk, blk->t0);
    const int64_t ldc = v->codes.st;
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    if (v->int8 && ahead + VQ_ATTN_BN <= v->Skv) { /* codes, scales and zeros of a later block */
        vq_attn_prefetch(vq_attn_at(&v->codes, blk->b, blk->hk, ahead), VQ_ATTN_BN * ldc);
        vq_attn_prefetch(vq_attn_at(&v->scale, blk->b, blk->hk, ahead), VQ_ATTN_BN * v->scale.st);
        vq_attn_prefetch(vq_attn_at(&v->zero, blk->b, blk->hk, ahead), VQ_ATTN_BN * v->zero.st);
    }
    if (v->int8) {
        th->kern->kivi_pv8(R, blk->n, codes, ldc, vs, vz, p, VQ_ATTN_BN, o, v->D);
        return;
    }
    if (R > VQ_ATTN_DIRECT_ROWS || v->g % 8 != 0) {
        th->kern->kivi_v_tile(blk->n, v->D, v->bits, codes, ldc, vs, vz, GV, v->g, th->tile);
        th->kern->pv[VQ_ATTN_F32](R, blk->n, v->D, p, VQ_ATTN_BN, th->tile, v->D, o, v->D);
        return;
    }
    th->kern->kivi_pv(R, blk->n, v->D, v->bits, codes, ldc, vs, vz, GV, v->g, p, VQ_ATTN_BN, o, v->D);
}

static bool use_int8(vq_attn_values *values, const vq_attn_kernels *kern, bool asked);
static const vq_attn_value_ops kivi_ops = {accumulate, NULL, NULL, use_int8};

/* Integer p.V accumulates o in the kernel's lane order (vq_attn_pv8_pos):
 * back to channel order once per row. */
static void finish_int8(const void *desc, float *o)
{
    (void)desc;
    float tmp[128];
    for (int c = 0; c < 128; c++) tmp[c] = o[vq_attn_pv8_pos(c)];
    for (int c = 0; c < 128; c++) o[c] = tmp[c];
}

static const vq_attn_value_ops kivi_int8_ops = {accumulate, finish_int8, NULL, NULL};

/* A run of whole blocks in one kernel call (kern->kivi_int8_block), where keys,
 * rows and ISA allow; false: the skeleton runs score, softmax and
 * accumulate. */
static int64_t fused_block(const void *desc, const vq_attn_keys *keys, const vq_attn_thread *th,
                           const vq_attn_block *blk, int64_t count, const float *qp, int R, float *o, float *m,
                           float *d, bool *bad)
{
    const kivi_values *v = desc;
    const int64_t esz = v->sz_dt == VQ_DT_F32 ? 4 : 2;
    if (R > 4 || th->kern->kivi_int8_block == NULL || v->scale.st != 4 * esz || v->zero.st != 4 * esz ||
        v->codes.st != 32)
        return 0;
    vq_attn_kivi_int8_block b;
    if (!vq_attn_kivi_keys_kivi_int8(keys, blk, count, &b) || b.f16 != (v->sz_dt != VQ_DT_F32)) return 0;
    const int64_t vpf = vq_attn_prefetch_blocks(blk->t0, count, v->Skv);
    b.pf_nb = vpf < b.pf_nb ? vpf : b.pf_nb;
    b.step[3] = VQ_ATTN_BN * v->codes.st;
    b.step[4] = VQ_ATTN_BN * v->scale.st;
    b.step[5] = VQ_ATTN_BN * v->zero.st;
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    const bool pf = ahead + VQ_ATTN_BN <= v->Skv; /* what accumulate() prefetches */
    b.pf[3] = pf ? vq_attn_at(&v->codes, blk->b, blk->hk, ahead) : NULL;
    b.pf[4] = pf ? vq_attn_at(&v->scale, blk->b, blk->hk, ahead) : NULL;
    b.pf[5] = pf ? vq_attn_at(&v->zero, blk->b, blk->hk, ahead) : NULL;
    b.pf_bytes[3] = VQ_ATTN_BN * v->codes.st;
    b.pf_bytes[4] = VQ_ATTN_BN * v->scale.st;
    b.pf_bytes[5] = VQ_ATTN_BN * v->zero.st;
    b.vcodes = vq_attn_at(&v->codes, blk->b, blk->hk, blk->t0);
    b.vs = vq_attn_at(&v->scale, blk->b, blk->hk, blk->t0);
    b.vz = vq_attn_at(&v->zero, blk->b, blk->hk, blk->t0);
    th->kern->kivi_int8_block(R, &b, qp, v->D, o, v->D, m, d, bad);
    return count;
}

static const vq_attn_value_ops kivi_fused_ops = {accumulate, finish_int8, fused_block, NULL};

vq_status vq_attn_bind_values_kivi(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale,
                                     const DLTensor *zero, int bits, int64_t g, const vq_attn_dims *dims,
                                     vq_attn_values *out)
{
    int lb = 0;
    VQ_FORWARD_IF_ERROR(vq_attn_kivi_layout(ctx, codes, "v_codes", dims, bits, &lb));
    VQ_RETURN_IF(ctx, g < 1, VQ_ERR_INVALID_ARGUMENT, "group_size must be >= 1, got %lld", (long long)g);
    const int64_t GV = vq_ceil_div(dims->D, g);
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, scale, "v_scale", VQ_DTM_F16_F32, dims, GV));
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, zero, "v_zero", VQ_DTM(vq_dtype_of(scale)), dims, GV));
    kivi_values *d = (kivi_values *)(void *)out->storage.bytes;
    *d = (kivi_values){vq_attn_view_of(codes), vq_attn_view_of(scale), vq_attn_view_of(zero), vq_dtype_of(scale),
                         lb, g, GV, dims->D, dims->Skv, false};
    out->ops = &kivi_ops;
    out->desc = d;
    out->thread_floats = 2 * VQ_ATTN_BN * GV;
    return VQ_OK;
}

/* The switch to integer p.V (kern->kivi_pv8): under AUTO only where
 * kivi_pv8 is a SIMD kernel (faster, bench/results/cpu.md); false,
 * changing nothing, where the layout is not one it takes
 * (vq_attn_pv8_supported: 2-bit codes, g = 32, D = 128). With integer keys
 * of the same layout (vq_attn_kivi_keys_kivi_int8) and up to four rows per kv
 * head, runs of whole blocks then go to one kern->kivi_int8_block call each
 * where the ISA has one; the environment variables (read here, for
 * benchmarks and tests) VQ_ATTN_UNFUSED=1 keep the separate kernels,
 * VQ_ATTN_ONE_BLOCK=1 one fused call per block. */
static bool use_int8(vq_attn_values *values, const vq_attn_kernels *kern, bool asked)
{
    kivi_values *d = (kivi_values *)(void *)values->storage.bytes;
    if ((!asked && !kern->pv8_fast) || !vq_attn_pv8_supported(d->bits, d->g, d->D)) return false;
    d->int8 = true;
    values->ops = vq_attn_env_on("VQ_ATTN_UNFUSED") ? &kivi_int8_ops : &kivi_fused_ops;
    return true;
}
