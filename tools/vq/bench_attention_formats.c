/* bench_attention_formats.c — vq_fused_sdpa over each compressed key format
 * at its usual width, values f16 (the format only compresses keys): fused,
 * and dequantize-then-SDPA where the library has a decoder (keys decoded to
 * f32 with the public decoders, then the uncompressed SDPA). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_attention_cases.h"
#include "tool.h"

enum { FMT_TURBO, FMT_RVQ, FMT_KIVI, FMT_RABITQ, FMT_QJL, FMT_VECINFER, FMT_COMMVQ, FMT_COUNT };
enum { TURBO_BITS = 4, RVQ_B1 = 2, RVQ_B2 = 2, QJL_M = 256, VECINFER_M = 32, VECINFER_C = 256, CVQ_R = 2, CVQ_C = 256 };

typedef struct vqb_format {
    vqb_data *d;
    vq_encoded_keys ek;
    vq_status (*decode)(struct vqb_format *f, vq_ctx *ctx); /* keys -> d->k32, or NULL */
} vqb_format;

struct vqb_formats {
    vqb_format f[FMT_COUNT];
    vqb_tensor idx, scale;                          /* turbo: 4-bit codes in u32 words, per-token scale */
    vqb_tensor idx1, idx2, scale2;                  /* rvq: two 2-bit stages (scale1 = scale) */
    vqb_tensor u8a, u8b;                            /* codes unpacked for the decoders */
    vqb_tensor qjl_bits, qjl_norm, qjl_proj;
    vqb_tensor vecinfer_idx, vecinfer_book, vecinfer_smooth;
    vqb_tensor cvq_idx, cvq_book, cvq_cos, cvq_sin, cvq_pos;
};

static const DLDataType F32 = {kDLFloat, 32, 1}, U8 = {kDLUInt, 8, 1}, U32 = {kDLUInt, 32, 1},
                        I32 = {kDLInt, 32, 1};

static vq_status run_fused(vqb_case *c, vq_ctx *ctx)
{
    vqb_format *f = c->arg;
    vqb_data *d = f->d;
    return vq_fused_sdpa(ctx, &d->q.t, &f->ek, VQ_TOOL_F16(&d->v16.t), 1.0f / sqrtf((float)d->sh.D), NULL, &d->out.t, NULL);
}

/* The same with integer key scores (vq_attend_opts.key_scores INT8: the
 * TurboQuant, RVQ and KIVI keys' integer path; AUTO is F32 in vq_fused_sdpa). */
static vq_status run_fused_int8(vqb_case *c, vq_ctx *ctx)
{
    vqb_format *f = c->arg;
    vqb_data *d = f->d;
    const vq_attend_opts o = {.key_scores = VQ_KEY_SCORES_INT8};
    return vq_fused_sdpa(ctx, &d->q.t, &f->ek, VQ_TOOL_F16(&d->v16.t), 1.0f / sqrtf((float)d->sh.D), NULL, &d->out.t, &o);
}

static vq_status run_decoded(vqb_case *c, vq_ctx *ctx)
{
    vqb_format *f = c->arg;
    const vq_status s = f->decode(f, ctx);
    return s == VQ_OK ? vqb_sdpa(f->d, &f->d->k32.t, &f->d->v16.t, ctx) : s;
}

static vq_status decode_turbo(vqb_format *f, vq_ctx *ctx)
{
    struct vqb_formats *x = f->d->formats;
    const vq_status s = vq_bit_unpack(ctx, &x->idx.t, TURBO_BITS, f->d->sh.D, &x->u8a.t);
    return s == VQ_OK ? vq_turboquant_hadamard_dequantize(ctx, &x->u8a.t, &x->scale.t, NULL, TURBO_BITS, &f->d->k32.t)
                      : s;
}

static vq_status decode_rvq(vqb_format *f, vq_ctx *ctx)
{
    struct vqb_formats *x = f->d->formats;
    const int64_t D = f->d->sh.D;
    vq_status s = vq_bit_unpack(ctx, &x->idx1.t, RVQ_B1, D, &x->u8a.t);
    if (s == VQ_OK) s = vq_bit_unpack(ctx, &x->idx2.t, RVQ_B2, D, &x->u8b.t);
    return s == VQ_OK ? vq_turboquant_rvq_decode(ctx, &x->u8a.t, &x->scale.t, &x->u8b.t, &x->scale2.t, NULL, RVQ_B1,
                                                 RVQ_B2, &f->d->k32.t)
                      : s;
}

static vq_status decode_kivi(vqb_format *f, vq_ctx *ctx)
{
    vqb_data *d = f->d;
    return vq_kivi_dequantize_keys(ctx, &d->kc.t, &d->ks.t, &d->kz.t, 2, 32, &d->k32.t);
}

/* ±mag in the rotated domain, then the inverse rotation (diag = ones). */
static vq_status decode_rabitq(vqb_format *f, vq_ctx *ctx)
{
    vqb_data *d = f->d;
    vqb_parallel(d->threads, d->sh.B * d->sh.Hkv * d->sh.Skv, vqb_decode_signs, d);
    return vq_hadamard(ctx, &d->k32.t, NULL, true, &d->k32.t);
}

static vq_status decode_vecinfer(vqb_format *f, vq_ctx *ctx)
{
    struct vqb_formats *x = f->d->formats;
    return vq_vecinfer_dequant(ctx, &x->vecinfer_idx.t, &x->vecinfer_book.t, &x->vecinfer_smooth.t, &f->d->k32.t);
}

static vq_status decode_commvq(vqb_format *f, vq_ctx *ctx)
{
    struct vqb_formats *x = f->d->formats;
    return vq_commvq_decode(ctx, &x->cvq_idx.t, &x->cvq_book.t, &x->cvq_cos.t, &x->cvq_sin.t, &x->cvq_pos.t,
                             &f->d->k32.t, NULL);
}

#define ADD(x, dt, ...) \
    vqb_data_add(d, &x, dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__})

/* The tensors of every format: codes random (any bit pattern is a valid
 * code), scales and norms positive, positions 0..Skv-1. */
static bool make_tensors(vqb_data *d, struct vqb_formats *x)
{
    const int64_t B = d->sh.B, H = d->sh.Hkv, S = d->sh.Skv, D = d->sh.D;
    const bool ok =
        ADD(x->idx, U32, B, H, S, (D * TURBO_BITS + 31) / 32) && ADD(x->scale, F32, B, H, S) &&
        ADD(x->idx1, U32, B, H, S, (D * RVQ_B1 + 31) / 32) && ADD(x->idx2, U32, B, H, S, (D * RVQ_B2 + 31) / 32) &&
        ADD(x->scale2, F32, B, H, S) &&
        ADD(x->u8a, U8, B, H, S, D) && ADD(x->u8b, U8, B, H, S, D) && ADD(x->qjl_bits, U32, B, H, S, QJL_M / 32) &&
        ADD(x->qjl_norm, F32, B, H, S) && ADD(x->qjl_proj, F32, QJL_M, D) && ADD(x->vecinfer_idx, U8, B, H, S, VECINFER_M) &&
        ADD(x->vecinfer_book, F32, VECINFER_M, VECINFER_C, D / VECINFER_M) && ADD(x->vecinfer_smooth, F32, D) && ADD(x->cvq_idx, U8, B, H, S, CVQ_R) &&
        ADD(x->cvq_book, F32, CVQ_R, CVQ_C, D) && ADD(x->cvq_cos, F32, S, D / 2) && ADD(x->cvq_sin, F32, S, D / 2) &&
        ADD(x->cvq_pos, I32, S);
    if (!ok) return false;
    vqb_set_floats(&x->scale, 0.2f);
    vqb_set_floats(&x->scale2, 0.05f);
    vqb_set_floats(&x->qjl_norm, 1.0f);
    vqb_set_floats(&x->vecinfer_smooth, 1.0f);
    int32_t *pos = x->cvq_pos.t.data;
    for (int64_t t = 0; t < S; t++) pos[t] = (int32_t)t;
    return true;
}

bool vqb_add_format_cases(vqb_data *d, vqb_case *cases, int *n)
{
    struct vqb_formats *x = calloc(1, sizeof *x);
    if (x == NULL) return false;
    d->formats = x;
    if (!make_tensors(d, x)) return false;
    const size_t v16 = vqb_bytes(&d->v16);
    static const char *const names[FMT_COUNT] = {"sdpa-turbo-4b", "sdpa-rvq-2+2b", "sdpa-affine-2b", "sdpa-rabitq-1b",
                                                 "sdpa-qjl-256", "sdpa-pq-32x8b", "sdpa-commvq-2x8b"};
    vqb_format *f = x->f;
    f[FMT_TURBO] = (vqb_format){d, {.format = VQ_KEYS_TURBO, .turbo = {&x->idx.t, &x->scale.t, NULL, TURBO_BITS}},
                                decode_turbo};
    f[FMT_RVQ] = (vqb_format){
        d, {.format = VQ_KEYS_TURBO_RVQ, .rvq = {&x->idx1.t, &x->scale.t, &x->idx2.t, &x->scale2.t, NULL, RVQ_B1, RVQ_B2}},
        decode_rvq};
    f[FMT_KIVI] = (vqb_format){d, {.format = VQ_KEYS_KIVI, .kivi = {&d->kc.t, &d->ks.t, &d->kz.t, 2, 32}},
                                 decode_kivi};
    f[FMT_RABITQ] = (vqb_format){d, {.format = VQ_KEYS_RABITQ, .rabitq = {&d->kbits.t, &d->kmag.t, NULL, NULL}},
                                 decode_rabitq};
    f[FMT_QJL] = (vqb_format){d, {.format = VQ_KEYS_QJL, .qjl = {&x->qjl_bits.t, &x->qjl_norm.t, &x->qjl_proj.t}},
                              NULL};
    f[FMT_VECINFER] = (vqb_format){d, {.format = VQ_KEYS_VECINFER, .vecinfer = {&x->vecinfer_idx.t, &x->vecinfer_book.t, &x->vecinfer_smooth.t}},
                             decode_vecinfer};
    f[FMT_COMMVQ] = (vqb_format){d,
                                 {.format = VQ_KEYS_COMMVQ,
                                  .commvq = {&x->cvq_idx.t, &x->cvq_book.t, &x->cvq_cos.t, &x->cvq_sin.t,
                                             &x->cvq_pos.t, NULL, VQ_ROPE_HALF}},
                                 decode_commvq};
    const size_t key_bytes[FMT_COUNT] = {
        vqb_bytes(&x->idx) + vqb_bytes(&x->scale),
        vqb_bytes(&x->idx1) + vqb_bytes(&x->idx2) + vqb_bytes(&x->scale) + vqb_bytes(&x->scale2),
        vqb_bytes(&d->kc) + vqb_bytes(&d->ks) + vqb_bytes(&d->kz),
        vqb_bytes(&d->kbits) + vqb_bytes(&d->kmag),
        vqb_bytes(&x->qjl_bits) + vqb_bytes(&x->qjl_norm),
        vqb_bytes(&x->vecinfer_idx),
        vqb_bytes(&x->cvq_idx)};
    for (int i = 0; i < FMT_COUNT; i++) {
        cases[(*n)++] = (vqb_case){names[i], "fused", key_bytes[i] + v16, run_fused, d, &f[i]};
        if (i == FMT_TURBO || i == FMT_RVQ || i == FMT_KIVI)
            cases[(*n)++] = (vqb_case){names[i], "fused-int8", key_bytes[i] + v16, run_fused_int8, d, &f[i]};
        if (f[i].decode) cases[(*n)++] = (vqb_case){names[i], "dequant+sdpa", key_bytes[i] + v16, run_decoded, d, &f[i]};
    }
    return true;
}
