/* cuda_sdpa.c — host glue of vq_fused_sdpa on a CUDA context (and so of
 * vq_turboquant_fused_rvq_decode_attend): launch parameters from the already
 * validated tensors, the split plan, one device scratch region (partial
 * states, then prepared queries), three launches on the ctx's stream (query
 * prep, the key format's decode-skeleton instance, merge). Nothing here
 * reads device memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formats/lloyd_max.h"
#include "cuda/cuda_backend.h"
#include "cuda/keys_registry.h"
#include "cuda/values_registry.h"

int vq_cu_elt_of(const DLTensor *t)
{
    const vq_dtype dt = vq_dtype_of(t);
    return dt == VQ_DT_F16 ? VQ_CU_F16 : dt == VQ_DT_BF16 ? VQ_CU_BF16 : VQ_CU_F32;
}

void vq_cu_fill_stage(const DLTensor *idx, const DLTensor *scale, int bits, int64_t D, vq_cu_sdpa_stage *st)
{
    st->idx = vq_data(idx);
    st->scale = vq_data(scale);
    st->scale_f16 = vq_dtype_of(scale) == VQ_DT_F16;
    st->bits = bits;
    st->packed = vq_dtype_of(idx) == VQ_DT_U32;
    st->ld = (int)(st->packed ? vq_ceil_div(D * bits, 32) : D);
    memcpy(st->cents, vq_lloyd_max_centroids(bits), sizeof(float) * ((size_t)1 << bits));
}

/* p->fmt is keys->format itself: the kernel's format constants must be the
 * public values (an off-by-one here once sent plain keys down the TurboQuant
 * decoder, which read the NULL code pointer). */
_Static_assert(VQ_CU_SDPA_F16 == (int)VQ_KEYS_F16 && VQ_CU_SDPA_TURBO == (int)VQ_KEYS_TURBO &&
                   VQ_CU_SDPA_TURBO_RVQ == (int)VQ_KEYS_TURBO_RVQ && VQ_CU_SDPA_KIVI == (int)VQ_KEYS_KIVI &&
                   VQ_CU_SDPA_RABITQ == (int)VQ_KEYS_RABITQ && VQ_CU_SDPA_QJL == (int)VQ_KEYS_QJL &&
                   VQ_CU_SDPA_VECINFER == (int)VQ_KEYS_VECINFER && VQ_CU_SDPA_COMMVQ == (int)VQ_KEYS_COMMVQ,
               "VQ_CU_SDPA_* must equal vq_keys_format");
_Static_assert(VQ_CU_SDPA_KIVI_MIX == VQ_CUDA_KEYS_KIVI_MIX && VQ_CU_SDPA_RABITQ_HAMMING == VQ_CUDA_KEYS_RABITQ_HAMMING,
               "the internal key formats");

/* The key format's fields of p (formats validated by their binders): its
 * descriptor's fill, after what every format starts from. */
static vq_status fill_keys(vq_ctx *ctx, const vq_cu_key_format *kf, const vq_encoded_keys *keys, float scale,
                           vq_cu_sdpa_params *p)
{
    p->fmt = (int)keys->format;
    p->qpf = p->c.D;
    p->qmul = scale * 1.4426950408889634f;
    p->q_prep = VQ_CU_QPREP_SCALE;
    return kf->fill(ctx, keys, scale, p);
}

/* Splits of the kv axis: with opts->num_splits, that many (at most one per
 * 32-token tile); else enough CTAs for one full wave at the kernel's
 * occupancy. Each split is a whole number of tiles, none is empty. */
static void plan_splits(const vq_ctx *ctx, int requested, int occupancy, vq_cu_attend_common *c)
{
    const int64_t tiles = vq_ceil_div(c->Skv, 32);
    int64_t ns = requested;
    if (ns <= 0) {
        const int64_t ctas = (int64_t)c->B * c->Hkv * c->row_chunks;
        ns = vq_ceil_div((int64_t)(occupancy > 0 ? occupancy : 1) * vq_cuda_sm_count(ctx), ctas);
    }
    if (ns > tiles) ns = tiles;
    if (ns < 1) ns = 1;
    c->split_len = (int)(32 * vq_ceil_div(tiles, ns));
    c->nsplit = (int)vq_ceil_div(c->Skv, c->split_len);
}

/* The tensor-core skeleton (decode_mma.cuh) at D = 128 without a mask or a
 * causal limit inside the kv axis (Sq = 1 or not causal), only with
 * VQ_CUDA_MMA=1: f16 keys with f16 values (1.0-1.8x the CUDA-core skeleton on
 * an H100, bench/NOTES.md) and KIVI 2/4-bit keys with KIVI values of
 * 32-channel groups (1.2-4.5x slower than the fast KIVI kernel). It stays
 * opt-in: every device test that reaches it passes with it on (attend,
 * cache, sdpa, nonfinite), but for KIVI it is slower than the fast kernel,
 * and its f16 speed has not been measured end to end. Without it every call
 * runs the CUDA-core kernels. */
static int mma_mode(void)
{
    const char *e = getenv("VQ_CUDA_MMA");
    return e != NULL && e[0] == '1';
}

static vq_cu_sdpa_launcher mma_launcher(const vq_cu_sdpa_params *p, int64_t Sq)
{
    /* a sliding window's bound runs on the CUDA-core skeleton */
    if (!mma_mode() || p->c.D != 128 || p->mask != NULL || p->c.bound.on || (p->c.causal && Sq != 1)) return NULL;
    if (p->fmt == VQ_CU_SDPA_F16 && p->k_elt == VQ_CU_F16 && p->v_fmt == VQ_VALUES_F16 && p->v_f16)
        return vq_cu_launch_mma_f16;
    if (p->fmt == VQ_CU_SDPA_KIVI && p->v_fmt == VQ_VALUES_KIVI && (p->a_bits == 2 || p->a_bits == 4) &&
        p->va_bits == p->a_bits && p->a_g % 32 == 0 && p->va_g == 32)
        return vq_cu_launch_mma_kivi;
    return NULL;
}

/* The launches of one call. Contiguous (pg NULL): the kv axis is the
 * values' [B,Hkv,Skv]. Paged: the formats' tensors are a pool chunk's
 * [pages,Hkv,P,...] views, row b of the queries reads pg's pages, and win
 * (or NULL) is folded in by the merge. bd (or NULL) bounds the tokens each
 * row sees from below. */
static vq_status sdpa_run(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                          const vq_encoded_values *ev, float scale, const DLTensor *mask, DLTensor *out, DLTensor *lse,
                          int num_splits, bool causal, const vq_cu_paging *pg, const vq_cu_window *win,
                          const vq_cu_bound *bd)
{
    const vq_cu_value_format *vf = vq_cu_value_format_of((int)ev->format);
    if (vf == NULL)
        return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument 'values': unknown format %d", (int)ev->format);
    const DLTensor *values = vf->lead(ev); /* [B,Hkv,Skv,...]: Hkv and Skv */
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    const int64_t B = vq_dim(queries, 0), Hq = vq_dim(queries, 1), Sq = vq_dim(queries, 2), D = vq_dim(queries, 3);
    const int64_t Hkv = vq_dim(values, 1);
    const int64_t Skv = pg ? vq_cu_paging_skv(pg, B) : vq_dim(values, 2);
    VQ_RETURN_IF(ctx, D > 256, VQ_ERR_UNSUPPORTED, "D = %lld > 256 is not supported", (long long)D);
    VQ_RETURN_IF(ctx, Skv > INT32_MAX - 64 || Hq / Hkv * Sq > INT32_MAX / 2 || B * Hq * Sq > INT32_MAX,
                 VQ_ERR_UNSUPPORTED, "sequence too long for the CUDA kernels (Skv = %lld, Hq*Sq = %lld)",
                 (long long)Skv, (long long)(Hq * Sq));

    vq_cu_sdpa_params p;
    memset(&p, 0, sizeof p);
    vq_cu_attend_common *c = &p.c;
    c->B = (int)B;
    c->Hq = (int)Hq;
    c->Sq = (int)Sq;
    c->D = (int)D;
    c->Hkv = (int)Hkv;
    c->Skv = (int)Skv;
    c->rows = (int)(Hq / Hkv * Sq);
    c->row_chunks = (int)vq_ceil_div(c->rows, VQ_CU_ROWS_MAX);
    VQ_RETURN_IF(ctx, Hkv * c->row_chunks > 65535 || B > 65535, VQ_ERR_UNSUPPORTED,
                 "grid too large: Hkv * ceil(Hq/Hkv*Sq/8) = %lld, B = %lld (limit 65535 each)",
                 (long long)(Hkv * c->row_chunks), (long long)B);
    c->causal = causal;
    if (pg) c->pg = *pg;
    if (bd && bd->on) {
        VQ_RETURN_IF(ctx, B > VQ_CU_PAGED_MAX_B, VQ_ERR_UNSUPPORTED,
                     "a sliding-window bound takes at most %d batch rows, got B = %lld", VQ_CU_PAGED_MAX_B, (long long)B);
        c->bound = *bd;
    }
    c->q = vq_data(queries);
    c->q_f16 = vq_dtype_of(queries) == VQ_DT_F16;
    const vq_cu_key_format *kf = vq_cu_key_format_of((int)keys->format);
    if (kf == NULL) return vq_fail(ctx, VQ_ERR_INVALID_ARGUMENT, "argument 'keys': unknown format %d", (int)keys->format);
    VQ_FORWARD_IF_ERROR(fill_keys(ctx, kf, keys, scale, &p));
    p.v_fmt = (int)ev->format;
    VQ_FORWARD_IF_ERROR(vf->fill(ctx, ev, &p));
    if (mask) { /* shape checked by the caller: [B or 1, Hq or 1, Sq, Skv] */
        p.mask = vq_data(mask);
        p.mask_f16 = vq_dtype_of(mask) == VQ_DT_F16;
        p.mask_sh = vq_dim(mask, 1) == 1 ? 0 : Sq * Skv;
        p.mask_sb = vq_dim(mask, 0) == 1 ? 0 : vq_dim(mask, 1) * Sq * Skv;
    }

    const vq_cu_sdpa_launcher mma = mma_launcher(&p, Sq);
    const vq_cu_sdpa_launcher launch = mma ? mma : p.v_fmt != VQ_VALUES_F16 ? kf->launch_enc : kf->launch;
    int occ = 0;
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch(&p, NULL, &occ), "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    plan_splits(ctx, num_splits, occ, c);

    const size_t nrows = (size_t)(B * Hq * Sq);
    const size_t part = nrows * (size_t)c->nsplit * (size_t)(D + 2), qfl = nrows * (size_t)p.qpf;
    void *scr = NULL;
    VQ_FORWARD_IF_ERROR(vq_cuda_scratch(ctx, (part + qfl) * sizeof(float), &scr));
    c->part_acc = scr;
    c->part_m = c->part_acc + nrows * (size_t)c->nsplit * (size_t)D;
    c->part_l = c->part_m + nrows * (size_t)c->nsplit;
    p.qp = c->part_l + nrows * (size_t)c->nsplit;

    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, vq_cu_launch_sdpa_prep(&p, ctx->stream), "sdpa query-prep kernel launch"));
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch(&p, ctx->stream, NULL), "sdpa attention kernel launch"));
    if (win == NULL) return vq_cuda_merge_splits(ctx, c, out, lse);
    return vq_cuda_check(ctx,
                         vq_cu_launch_merge_window(c, win, vq_data(out), vq_dtype_of(out) == VQ_DT_F16,
                                                   lse ? (float *)vq_data(lse) : NULL, ctx->stream),
                         "split-KV merge kernel launch");
}

/* KIVI keys and values the fast KIVI kernel runs exactly as the skeleton's
 * KIVIKeys x KIVIValues would (4-11x faster, bench/NOTES.md): packed
 * codes of one width, one group size (a multiple of 32) for the keys'
 * tokens and the values' channels, one scale/zero dtype, D 64/128/256, no
 * mask, every tensor 16-byte aligned (the fast kernel's loads). */
static bool kivi_pair(const DLTensor *q, const vq_encoded_keys *k, const vq_encoded_values *v, const DLTensor *mask,
                      const DLTensor *out, const DLTensor *lse)
{
    if (k->format != VQ_KEYS_KIVI || v->format != VQ_VALUES_KIVI || mask) return false;
    const int64_t D = vq_dim(q, 3);
    const int bits = k->kivi.bits, g = k->kivi.group_size;
    if ((D != 64 && D != 128 && D != 256) || (bits != 2 && bits != 4) || v->kivi.bits != bits ||
        v->kivi.group_size != g || g % 32 != 0 || vq_dim(k->kivi.codes, 3) != D * bits / 8 ||
        vq_dim(v->kivi.codes, 3) != D * bits / 8)
        return false;
    const vq_dtype sd = vq_dtype_of(k->kivi.scale);
    if (vq_dtype_of(k->kivi.zero) != sd || vq_dtype_of(v->kivi.scale) != sd || vq_dtype_of(v->kivi.zero) != sd)
        return false;
    const DLTensor *ts[] = {q, k->kivi.codes, k->kivi.scale, k->kivi.zero, v->kivi.codes, v->kivi.scale,
                            v->kivi.zero, out, lse};
    for (int i = 0; i < 9; i++)
        if (ts[i] && ((uintptr_t)vq_data(ts[i]) & 15) != 0) return false;
    return true;
}

static vq_status fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                            const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                            const vq_attend_opts *opts, const vq_cu_bound *bd)
{
    DLTensor *lse = opts ? opts->lse_out : NULL;
    if (kivi_pair(queries, keys, values, mask, out, lse))
        return vq_cuda_kivi_attend(ctx, queries, keys->kivi.codes, keys->kivi.scale, keys->kivi.zero,
                                   values->kivi.codes, values->kivi.scale, values->kivi.zero,
                                   keys->kivi.group_size, keys->kivi.bits, scale, opts ? opts->num_splits : 0,
                                   opts && opts->causal, NULL, NULL, bd, out, lse);
    return sdpa_run(ctx, queries, keys, values, scale, mask, out, opts ? opts->lse_out : NULL,
                    opts ? opts->num_splits : 0, opts && opts->causal, NULL, NULL, bd);
}

vq_status vq_cuda_fused_sdpa(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                             const vq_encoded_values *values, float scale, const DLTensor *mask, DLTensor *out,
                             const vq_attend_opts *opts)
{
    return fused_sdpa(ctx, queries, keys, values, scale, mask, out, opts, NULL);
}

vq_status vq_cuda_fused_sdpa_bounded(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                                     const vq_encoded_values *values, float scale, DLTensor *out,
                                     const vq_attend_opts *opts, const vq_cu_bound *bd)
{
    return fused_sdpa(ctx, queries, keys, values, scale, NULL, out, opts, bd);
}

vq_status vq_cuda_fused_sdpa_paged(vq_ctx *ctx, const DLTensor *queries, const vq_encoded_keys *keys,
                                   const vq_encoded_values *values, float scale, const vq_cu_paging *pg,
                                   const vq_cu_window *win, const vq_cu_bound *bd, DLTensor *out, DLTensor *lse)
{
    return sdpa_run(ctx, queries, keys, values, scale, NULL, out, lse, 0, false, pg, win, bd);
}

bool vq_cuda_kivi_mma_takes(const DLTensor *q, const DLTensor *k_codes, int group_size, int bits, bool causal)
{
    const int64_t D = vq_dim(q, 3);
    return mma_mode() == 1 && D == 128 && group_size == 32 && (bits == 2 || bits == 4) &&
           vq_dim(k_codes, 3) == D * bits / 8 && (!causal || vq_dim(q, 2) == 1);
}

vq_status vq_cuda_kivi_mma(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes, const DLTensor *k_scale,
                           const DLTensor *k_zero, const DLTensor *v_codes, const DLTensor *v_scale,
                           const DLTensor *v_zero, int group_size, int bits, float scale, int num_splits, bool causal,
                           const vq_cu_paging *pg, const vq_cu_window *win, DLTensor *out, DLTensor *lse)
{
    vq_encoded_keys k;
    vq_encoded_values v;
    memset(&k, 0, sizeof k);
    memset(&v, 0, sizeof v);
    k.format = VQ_KEYS_KIVI;
    k.kivi.codes = k_codes;
    k.kivi.scale = k_scale;
    k.kivi.zero = k_zero;
    k.kivi.bits = bits;
    k.kivi.group_size = group_size;
    v.format = VQ_VALUES_KIVI;
    v.kivi.codes = v_codes;
    v.kivi.scale = v_scale;
    v.kivi.zero = v_zero;
    v.kivi.bits = bits;
    v.kivi.group_size = group_size;
    return sdpa_run(ctx, q, &k, &v, scale, NULL, out, lse, num_splits, causal, pg, win, NULL);
}
