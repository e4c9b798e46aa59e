/* cuda_attend.c — host glue of the CUDA decode-attention kernels: shapes from
 * the (already validated) DLTensors, the split-KV plan, device scratch for the
 * partial states, the launches. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/attend_params.h"
#include "cuda/cuda_backend.h"

/* Checks what this backend needs beyond the public contract. */
static vq_status check_backend_limits(vq_ctx *ctx, int64_t D, const DLTensor *const *ts,
                                      const char *const *names, int n)
{
    VQ_RETURN_IF(ctx, D % 8 != 0, VQ_ERR_UNSUPPORTED, "the CUDA backend needs D %% 8 == 0, got D = %lld",
                 (long long)D);
    VQ_RETURN_IF(ctx, D > 256, VQ_ERR_UNSUPPORTED, "D = %lld > 256 is not supported", (long long)D);
    return vq_cuda_check_aligned16(ctx, ts, names, n);
}

/* VQ_CUDA_DECODE_STAGED=1 makes the fast decode kernels stage tiles in shared
 * memory with cp.async; the default loads them straight into registers, which
 * measured faster on the H200 in all but one shape (bench/NOTES.md, v6). */
static int decode_staged(void)
{
    const char *e = getenv("VQ_CUDA_DECODE_STAGED");
    return e != NULL && strcmp(e, "1") == 0;
}

/* Fills the shapes of c. */
static vq_status plan_shape(vq_ctx *ctx, const DLTensor *q, int64_t Hkv, int64_t Skv, bool causal,
                            vq_cu_attend_common *c)
{
    c->B = (int)q->shape[0];
    c->Hq = (int)q->shape[1];
    c->Sq = (int)q->shape[2];
    c->D = (int)q->shape[3];
    c->Hkv = (int)Hkv;
    c->Skv = (int)Skv;
    VQ_RETURN_IF(ctx, Skv > INT32_MAX - 64 || (int64_t)c->Hq / c->Hkv * c->Sq > INT32_MAX / 2, VQ_ERR_UNSUPPORTED,
                 "sequence too long for the CUDA kernels");
    c->rows = c->Hq / c->Hkv * c->Sq;
    c->row_chunks = (c->rows + VQ_CU_ROWS_MAX - 1) / VQ_CU_ROWS_MAX;
    VQ_RETURN_IF(ctx, (int64_t)c->Hkv * c->row_chunks > 65535 || c->B > 65535, VQ_ERR_UNSUPPORTED,
                 "grid too large: Hkv * ceil(Hq/Hkv*Sq/8) = %lld, B = %d (limit 65535 each)",
                 (long long)c->Hkv * c->row_chunks, c->B);
    c->causal = causal;
    c->staged = decode_staged();
    c->q = vq_data(q);
    c->q_f16 = vq_dtype_of(q) == VQ_DT_F16;
    return VQ_OK;
}

/* The split plan of c and the partial-state scratch, unless the caller asked
 * for a split count. Measured on the H200 (bench/NOTES.md, v3 vs v4): with GQA
 * (several query rows per CTA, 2 CTAs/SM resident) one full wave of CTAs is
 * best (RaBitQ Hkv = 8, 128K: 159 -> 132 us; 4K: 67 -> 30 us); with one row
 * per CTA (MHA) two waves at the 4 CTAs/SM those kernels reach, i.e. 8 CTAs
 * per SM, beat one wave (KIVI Hkv = 32, 128K: 707 vs 1059 us). ctas_per_sm is
 * the occupancy of the kernel instance. Each split is a multiple of 32 tokens
 * (a warp tile), and none is empty. */
static vq_status plan_splits(vq_ctx *ctx, int nsplit_req, int ctas_per_sm, vq_cu_attend_common *c)
{
    const int64_t tiles = vq_ceil_div(c->Skv, 32);
    int64_t ns = nsplit_req;
    if (ns <= 0) {
        const int64_t base = (int64_t)c->B * c->Hkv * c->row_chunks;
        const int64_t per_sm = c->rows > 1 ? (ctas_per_sm > 0 ? ctas_per_sm : 2) : 8;
        ns = vq_ceil_div(per_sm * vq_cuda_sm_count(ctx), base);
    }
    if (ns > tiles) ns = tiles;
    if (ns < 1) ns = 1;
    const int64_t tiles_per = vq_ceil_div(tiles, ns);
    c->split_len = (int)(32 * tiles_per);
    c->nsplit = (int)vq_ceil_div(c->Skv, c->split_len);

    const int64_t nrows = (int64_t)c->B * c->Hq * c->Sq;
    const size_t floats = (size_t)nrows * c->nsplit * (size_t)(c->D + 2);
    void *scr = NULL;
    VQ_FORWARD_IF_ERROR(vq_cuda_scratch(ctx, floats * sizeof(float), &scr));
    c->part_acc = scr;
    c->part_m = c->part_acc + (size_t)nrows * c->nsplit * c->D;
    c->part_l = c->part_m + (size_t)nrows * c->nsplit;
    return VQ_OK;
}

/* The fast kernels are compiled for these head dims only (constant strides). */
static bool fast_dim(int D) { return D == 64 || D == 128 || D == 256; }

static vq_status finish(vq_ctx *ctx, const vq_cu_attend_common *c, DLTensor *out, DLTensor *lse, int launch_err,
                        const char *what)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch_err, what));
    return vq_cuda_merge_splits(ctx, c, out, lse);
}

vq_status vq_cuda_merge_splits(vq_ctx *ctx, const vq_cu_attend_common *c, DLTensor *out, DLTensor *lse)
{
    return vq_cuda_check(ctx,
                         vq_cu_launch_merge(c, vq_data(out), vq_dtype_of(out) == VQ_DT_F16,
                                            lse ? (float *)vq_data(lse) : NULL, ctx->stream),
                         "split-KV merge kernel launch");
}

/* The rows of a validated [B,H,S,...] tensor (byte strides; NULL strides: compact). */
static vq_cu_view view_of(const DLTensor *t)
{
    const int64_t es = (int64_t)vq_dtype_size(vq_dtype_of(t));
    int64_t st[3] = {0, 0, 0}, run = es;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (i < 3) st[i] = t->strides ? t->strides[i] * es : run;
        run *= t->shape[i];
    }
    return (vq_cu_view){(const char *)vq_data(t), st[0], st[1], st[2]};
}

vq_status vq_cuda_attention_merge(vq_ctx *ctx, const DLTensor *out_a, const DLTensor *lse_a, const DLTensor *out_b,
                                  const DLTensor *lse_b, DLTensor *out, DLTensor *lse_out)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    VQ_RETURN_IF(ctx, out_a->shape[0] * out_a->shape[1] * out_a->shape[2] > INT32_MAX, VQ_ERR_UNSUPPORTED,
                 "argument 'out_a': more than 2^31 - 1 rows");
    const vq_cu_pair_merge p = {view_of(out_a), view_of(out_b), view_of(out), view_of(lse_a), view_of(lse_b),
                                lse_out ? view_of(lse_out) : (vq_cu_view){0},
                                vq_dtype_of(out_a) == VQ_DT_F16, vq_dtype_of(out_b) == VQ_DT_F16,
                                vq_dtype_of(out) == VQ_DT_F16,
                                (int)out_a->shape[0], (int)out_a->shape[1], (int)out_a->shape[2],
                                (int)out_a->shape[3]};
    return vq_cuda_check(ctx, vq_cu_launch_pair_merge(&p, ctx->stream), "attention merge kernel launch");
}

/* The launches of a KIVI decode: contiguous (pg NULL), or paged over a
 * pool chunk's [pages,Hkv,rows,...] streams with the window win (or NULL)
 * folded in by the merge (the fast kernel only: the host checked D, g and
 * the scale dtypes). */
static vq_status kivi_run(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes, const DLTensor *k_scale,
                            const DLTensor *k_zero, const DLTensor *v_codes, const DLTensor *v_scale,
                            const DLTensor *v_zero, int group_size, int bits_opt, float scale, int nsg, bool causal,
                            const vq_cu_paging *pg, const vq_cu_window *win, const vq_cu_bound *bd, DLTensor *out,
                            DLTensor *lse)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    const int64_t D = vq_dim(q, 3);
    const DLTensor *ts[] = {q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, out};
    static const char *const names[] = {"q", "k_codes", "k_scale", "k_zero", "v_codes", "v_scale", "v_zero", "out"};
    VQ_FORWARD_IF_ERROR(check_backend_limits(ctx, D, ts, names, 8));
    /* code width from the codes' last dimension: D = one code per byte (the
     * 8-bit packed layout), D*bits/8 = packed */
    const int64_t last = vq_dim(k_codes, 3);
    int bits = 8;
    if (last != D) bits = bits_opt ? bits_opt : (int)(last * 8 / D);
    VQ_RETURN_IF(ctx, bits != 2 && bits != 4 && bits != 8, VQ_ERR_UNSUPPORTED,
                 "the CUDA backend reads 2-, 4- or 8-bit codes, got %d", bits);

    const int64_t Skv = pg ? vq_cu_paging_skv(pg, vq_dim(q, 0)) : vq_dim(k_codes, 2);
    vq_cu_kivi_params p = {0};
    VQ_FORWARD_IF_ERROR(plan_shape(ctx, q, vq_dim(k_codes, 1), Skv, causal, &p.c));
    if (pg) {
        p.c.pg = *pg;
        p.c.staged = 0; /* the staged loads address contiguous streams only */
    }
    if (bd && bd->on) {
        VQ_RETURN_IF(ctx, p.c.B > VQ_CU_PAGED_MAX_B, VQ_ERR_UNSUPPORTED,
                     "a sliding-window bound takes at most %d batch rows, got B = %d", VQ_CU_PAGED_MAX_B, p.c.B);
        p.c.bound = *bd;
    }
    p.qmul = scale * 1.4426950408889634f;
    p.bits = bits;
    p.group = group_size;
    p.k_codes = vq_data(k_codes);
    p.k_scale = vq_data(k_scale);
    p.k_zero = vq_data(k_zero);
    p.v_codes = vq_data(v_codes);
    p.v_scale = vq_data(v_scale);
    p.v_zero = vq_data(v_zero);
    p.scale_f16 = vq_dtype_of(k_scale) == VQ_DT_F16;
    p.v_scale_f16 = vq_dtype_of(v_scale) == VQ_DT_F16;
    /* the fast kernel folds one key group per 32-token tile and gives a lane's
     * value channels one group: g % 32 == 0; it reads both scale dtypes as one */
    const bool fast = fast_dim(p.c.D) && group_size % 32 == 0 && p.scale_f16 == p.v_scale_f16;
    VQ_RETURN_IF(ctx, (pg || win) && !fast, VQ_ERR_UNSUPPORTED,
                 "paged KIVI decode needs D in {64, 128, 256}, g %% 32 == 0 and one scale dtype");
    int (*const launch)(const vq_cu_kivi_params *, void *, int *) =
        fast ? (bits == 2 ? vq_cu_launch_kivi_fast_b2 : bits == 4 ? vq_cu_launch_kivi_fast_b4
                                                                    : vq_cu_launch_kivi_fast_b8)
             : (bits == 2 ? vq_cu_launch_kivi_decode_b2 : bits == 4 ? vq_cu_launch_kivi_decode_b4
                                                                      : vq_cu_launch_kivi_decode_b8);
    int occ = 0;
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch(&p, NULL, &occ), "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    VQ_FORWARD_IF_ERROR(plan_splits(ctx, nsg, occ, &p.c));
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch(&p, ctx->stream, NULL), "affine decode kernel launch"));
    return vq_cuda_check(ctx,
                         vq_cu_launch_merge_window(&p.c, win, vq_data(out), vq_dtype_of(out) == VQ_DT_F16,
                                                   lse ? (float *)vq_data(lse) : NULL, ctx->stream),
                         "split-KV merge kernel launch");
}

vq_status vq_cuda_kivi_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes,
                                             const DLTensor *k_scale, const DLTensor *k_zero,
                                             const DLTensor *v_codes, const DLTensor *v_scale,
                                             const DLTensor *v_zero, int group_size, float scale, int nsg,
                                             DLTensor *out, const vq_scalar_attend_opts *opts)
{
    /* the code width as kivi_run derives it */
    const int64_t D = vq_dim(q, 3), last = vq_dim(k_codes, 3);
    const int bits = last == D ? 8 : opts && opts->bits ? opts->bits : (int)(last * 8 / D);
    const bool causal = opts && opts->causal;
    if (vq_cuda_kivi_mma_takes(q, k_codes, group_size, bits, causal) && vq_dim(v_codes, 3) == last)
        return vq_cuda_kivi_mma(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size, bits, scale,
                                nsg, causal, NULL, NULL, out, opts ? opts->lse_out : NULL);
    return kivi_run(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size,
                      opts ? opts->bits : 0, scale, nsg, opts && opts->causal, NULL, NULL, NULL, out,
                      opts ? opts->lse_out : NULL);
}

vq_status vq_cuda_kivi_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *k_codes, const DLTensor *k_scale,
                              const DLTensor *k_zero, const DLTensor *v_codes, const DLTensor *v_scale,
                              const DLTensor *v_zero, int group_size, int bits, float scale, int num_splits,
                              bool causal, const vq_cu_paging *pg, const vq_cu_window *win, const vq_cu_bound *bd,
                              DLTensor *out, DLTensor *lse)
{
    /* the tensor-core skeleton takes no sliding-window bound */
    if (!(bd && bd->on) && vq_cuda_kivi_mma_takes(q, k_codes, group_size, bits, causal))
        return vq_cuda_kivi_mma(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size, bits, scale,
                                num_splits, causal, pg, win, out, lse);
    return kivi_run(ctx, q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size, bits, scale,
                      num_splits, causal, pg, win, bd, out, lse);
}

vq_status vq_cuda_rabitq_fused_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *q_scale,
                                      const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                      const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                      const vq_rabitq_attend_opts *opts)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    const int64_t D = vq_dim(q, 3);
    const DLTensor *vs = opts ? opts->v_scale : NULL;
    const DLTensor *ts[] = {q, q_scale, k_bits, k_mag, k_const, v_idx, v_cents, out, vs};
    static const char *const names[] = {"q",     "q_scale", "k_bits", "k_mag",        "k_const",
                                        "v_idx", "v_cents", "out",    "opts->v_scale"};
    VQ_FORWARD_IF_ERROR(check_backend_limits(ctx, D, ts, names, 9));

    vq_cu_rabitq_params p = {0};
    VQ_FORWARD_IF_ERROR(plan_shape(ctx, q, vq_dim(k_bits, 1), vq_dim(k_bits, 2), opts && opts->causal, &p.c));
    p.exact = opts && opts->score == VQ_RABITQ_SCORE_EXACT;
    p.q_scale = vq_data(q_scale);
    p.k_bits = vq_data(k_bits);
    p.k_mag = vq_data(k_mag);
    p.k_const = k_const ? vq_data(k_const) : NULL;
    p.v_idx = vq_data(v_idx);
    p.v_packed = vq_dim(v_idx, 3) != D;
    p.v_cents = vq_data(v_cents);
    p.n_cents = (int)vq_numel(v_cents);
    p.v_scale = vs ? vq_data(vs) : NULL;
    int (*const launch)(const vq_cu_rabitq_params *, void *, int *) =
        fast_dim(p.c.D) ? vq_cu_launch_rabitq_fast : vq_cu_launch_rabitq_decode;
    int occ = 0;
    VQ_FORWARD_IF_ERROR(vq_cuda_check(ctx, launch(&p, NULL, &occ), "cudaOccupancyMaxActiveBlocksPerMultiprocessor"));
    VQ_FORWARD_IF_ERROR(plan_splits(ctx, opts ? opts->num_splits : 0, occ, &p.c));
    return finish(ctx, &p.c, out, opts ? opts->lse_out : NULL, launch(&p, ctx->stream, NULL),
                  "RaBitQ decode kernel launch");
}
