/* bench_attention_cases.c — synthetic caches and the calls timed by
 * `vq bench attention`. The dequantize-then-SDPA baselines decode the whole
 * cache to f32 (KIVI with the library's threaded dequantizers, RaBitQ with a
 * threaded table decode here: ±mag signs and a codebook gather) and then run
 * the library's uncompressed SDPA over f32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_attention_cases.h"
#include "tool.h"

enum { KIVI_BITS = 2, KIVI_G = 32, N_CENTS = 16 };


static const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, U8 = {kDLUInt, 8, 1};

bool vqb_data_add(vqb_data *d, vqb_tensor *x, DLDataType dt, int ndim, const int64_t *shape)
{
    if (d->n_all == (int)(sizeof d->all / sizeof d->all[0])) return false;
    if (!vqb_alloc(x, dt, ndim, shape)) return false;
    d->all[d->n_all++] = x;
    vqb_fill(x, (uint64_t)d->n_all);
    return true;
}

#define ADD(x, dt, ...) vqb_data_add(d, &d->x, dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__})

void vqb_set_floats(vqb_tensor *x, float v)
{
    const size_t n = vqb_bytes(x) / (x->t.dtype.bits / 8);
    for (size_t i = 0; i < n; i++) {
        if (x->t.dtype.bits == 16) ((uint16_t *)x->t.data)[i] = vq_f32_to_f16(v);
        else ((float *)x->t.data)[i] = v;
    }
}

vq_status vqb_sdpa(vqb_data *d, const DLTensor *k, const DLTensor *v, vq_ctx *ctx)
{
    const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = k};
    return vq_fused_sdpa(ctx, &d->q.t, &ek, VQ_TOOL_F16(v), 1.0f / sqrtf((float)d->sh.D), NULL, &d->out.t, NULL);
}

static vq_status run_f16(vqb_case *c, vq_ctx *ctx) { return vqb_sdpa(c->data, &c->data->k16.t, &c->data->v16.t, ctx); }
static vq_status run_f32(vqb_case *c, vq_ctx *ctx) { return vqb_sdpa(c->data, &c->data->k32.t, &c->data->v32.t, ctx); }

static vq_status kivi_with(vqb_data *d, vq_ctx *ctx, vq_key_scores ks, vq_value_accum va)
{
    const vq_scalar_attend_opts o = {.bits = KIVI_BITS, .key_scores = ks, .value_accum = va};
    return vq_kivi_fused_attend(ctx, &d->q.t, &d->kc.t, &d->ks.t, &d->kz.t, &d->vc.t, &d->vs.t, &d->vz.t,
                                         KIVI_G, 1.0f / sqrtf((float)d->sh.D), 0, &d->out.t, &o);
}

static vq_status run_kivi(vqb_case *c, vq_ctx *ctx)
{
    return kivi_with(c->data, ctx, VQ_KEY_SCORES_AUTO, VQ_VALUE_ACCUM_AUTO);
}
/* the same kernels one by one (VQ_ATTN_UNFUSED, read per call): what the
 * fused block kernel saves */
static vq_status run_kivi_unfused(vqb_case *c, vq_ctx *ctx)
{
    setenv("VQ_ATTN_UNFUSED", "1", 1);
    const vq_status s = kivi_with(c->data, ctx, VQ_KEY_SCORES_AUTO, VQ_VALUE_ACCUM_AUTO);
    unsetenv("VQ_ATTN_UNFUSED");
    return s;
}
/* the fused kernel called once per block (VQ_ATTN_ONE_BLOCK, read per
 * call): what passing runs of blocks saves */
static vq_status run_kivi_one_block(vqb_case *c, vq_ctx *ctx)
{
    setenv("VQ_ATTN_ONE_BLOCK", "1", 1);
    const vq_status s = kivi_with(c->data, ctx, VQ_KEY_SCORES_AUTO, VQ_VALUE_ACCUM_AUTO);
    unsetenv("VQ_ATTN_ONE_BLOCK");
    return s;
}
/* the same kernels with f32 p.V: what the integer p.V saves */
static vq_status run_kivi_f32v(vqb_case *c, vq_ctx *ctx)
{
    return kivi_with(c->data, ctx, VQ_KEY_SCORES_AUTO, VQ_VALUE_ACCUM_F32);
}
/* ... and with float key scores too: what the integer scores save */
static vq_status run_kivi_f32k(vqb_case *c, vq_ctx *ctx)
{
    return kivi_with(c->data, ctx, VQ_KEY_SCORES_F32, VQ_VALUE_ACCUM_F32);
}

/* The ctx in *slot, made on first use: the bench's thread count on the CPU
 * kernel set `isa` (tool_ctx). */
static vq_ctx *capped_ctx(vqb_data *d, const char *isa, vq_ctx **slot)
{
    if (*slot == NULL) *slot = tool_ctx(d->threads, isa);
    return *slot;
}

/* The baseline before the integer key scores: float key scores on a ctx capped at AVX2
 * (AVX-512 CPUs then ran the AVX2 decode kernels), same thread count. */
static vq_ctx *old_ctx(vqb_data *d) { return capped_ctx(d, "avx2", &d->old_ctx); }

static vq_status run_kivi_old(vqb_case *c, vq_ctx *ctx)
{
    (void)ctx;
    return kivi_with(c->data, old_ctx(c->data), VQ_KEY_SCORES_F32, VQ_VALUE_ACCUM_F32);
}

/* The fused kernel on the vector ports (a ctx capped at AVX-512), where the
 * CPU runs the amx set: what the tiles save. */
static vq_status run_kivi_avx512(vqb_case *c, vq_ctx *ctx)
{
    (void)ctx;
    return kivi_with(c->data, capped_ctx(c->data, "avx512", &c->data->avx512_ctx), VQ_KEY_SCORES_AUTO,
                     VQ_VALUE_ACCUM_AUTO);
}

/* Whether the default ctx runs the amx kernel set. */
static bool runs_amx(int threads)
{
    vq_ctx *ctx = tool_ctx(threads, NULL);
    const bool amx = strcmp(vq_ctx_isa(ctx), "amx") == 0;
    vq_ctx_free(ctx);
    return amx;
}

static vq_status run_kivi_deq(vqb_case *c, vq_ctx *ctx)
{
    vqb_data *d = c->data;
    vq_status s = vq_kivi_dequantize_keys(ctx, &d->kc.t, &d->ks.t, &d->kz.t, KIVI_BITS, KIVI_G, &d->k32.t);
    if (s == VQ_OK) s = vq_kivi_dequantize_values(ctx, &d->vc.t, &d->vs.t, &d->vz.t, KIVI_BITS, KIVI_G, &d->v32.t);
    return s == VQ_OK ? vqb_sdpa(d, &d->k32.t, &d->v32.t, ctx) : s;
}

static vq_status run_rabitq(vqb_case *c, vq_ctx *ctx)
{
    vqb_data *d = c->data;
    return vq_rabitq_fused_attend(ctx, &d->q.t, &d->q_scale.t, &d->kbits.t, &d->kmag.t, NULL, &d->vnib.t,
                                  &d->cents.t, &d->out.t, NULL);
}

/* the separate kernels per block (VQ_ATTN_UNFUSED) and the fused kernel
 * once per block (VQ_ATTN_ONE_BLOCK), as for KIVI */
static vq_status run_rabitq_env(vqb_case *c, vq_ctx *ctx, const char *name)
{
    setenv(name, "1", 1);
    const vq_status s = run_rabitq(c, ctx);
    unsetenv(name);
    return s;
}
static vq_status run_rabitq_unfused(vqb_case *c, vq_ctx *ctx) { return run_rabitq_env(c, ctx, "VQ_ATTN_UNFUSED"); }
static vq_status run_rabitq_one_block(vqb_case *c, vq_ctx *ctx) { return run_rabitq_env(c, ctx, "VQ_ATTN_ONE_BLOCK"); }

/* the same with f32 p.V of the codebook values: what the integer p.V saves */
static vq_status run_rabitq_f32v(vqb_case *c, vq_ctx *ctx)
{
    vqb_data *d = c->data;
    const vq_rabitq_attend_opts o = {.value_accum = VQ_VALUE_ACCUM_F32};
    return vq_rabitq_fused_attend(ctx, &d->q.t, &d->q_scale.t, &d->kbits.t, &d->kmag.t, NULL, &d->vnib.t,
                                  &d->cents.t, &d->out.t, &o);
}

static vq_status run_rabitq_old(vqb_case *c, vq_ctx *ctx)
{
    (void)ctx;
    return run_rabitq(c, old_ctx(c->data));
}

void vqb_decode_signs(void *arg, int64_t lo, int64_t hi)
{
    vqb_data *d = arg;
    const int64_t D = d->sh.D;
    const uint8_t *kb = d->kbits.t.data;
    const float *mag = d->kmag.t.data;
    float *k = d->k32.t.data;
    for (int64_t t = lo; t < hi; t++)
        for (int64_t c = 0; c < D; c++) k[t * D + c] = (kb[t * D / 8 + c / 8] >> (c % 8)) & 1 ? mag[t] : -mag[t];
}

/* Tokens [lo, hi) of the RaBitQ cache to f32: k = ±mag, v = cents[nibble]. */
static void rabitq_decode(void *arg, int64_t lo, int64_t hi)
{
    vqb_data *d = arg;
    const int64_t D = d->sh.D;
    const uint8_t *vn = d->vnib.t.data;
    const float *cents = d->cents.t.data;
    float *v = d->v32.t.data;
    vqb_decode_signs(d, lo, hi);
    for (int64_t t = lo; t < hi; t++) {
        for (int64_t c = 0; c < D; c += 2) {
            const uint8_t b = vn[t * D / 2 + c / 2];
            v[t * D + c] = cents[b & 15];
            v[t * D + c + 1] = cents[b >> 4];
        }
    }
}

static vq_status run_rabitq_deq(vqb_case *c, vq_ctx *ctx)
{
    vqb_data *d = c->data;
    vqb_parallel(d->threads, d->sh.B * d->sh.Hkv * d->sh.Skv, rabitq_decode, d);
    return vqb_sdpa(d, &d->k32.t, &d->v32.t, ctx);
}

static vq_status run_rabitq_prefill(vqb_case *c, vq_ctx *ctx)
{
    vqb_data *d = c->data;
    return vq_rabitq_prefill_attend(ctx, &d->q.t, &d->scale1.t, &d->kbits.t, &d->kmag.t, NULL, &d->vnib.t,
                                    &d->cents.t, &d->out.t, NULL);
}

static void free_data(vqb_data *d)
{
    for (int i = 0; i < d->n_all; i++) vqb_release(d->all[i]);
    vq_ctx_free(d->old_ctx);
    vq_ctx_free(d->avx512_ctx);
    free(d->formats);
    free(d);
}

/* The tensors both decode and prefill use: q, out, f32 caches, RaBitQ. */
static vqb_data *make_data(const vqb_shape *sh, int threads)
{
    vqb_data *d = calloc(1, sizeof *d);
    if (d == NULL) return NULL;
    d->sh = *sh;
    d->threads = threads;
    const int64_t B = sh->B, Hq = sh->Hq, H = sh->Hkv, Sq = sh->Sq, S = sh->Skv, D = sh->D;
    const bool ok = ADD(q, F32, B, Hq, Sq, D) && ADD(out, F32, B, Hq, Sq, D) && ADD(q_scale, F32, B, Hq, Sq) &&
                    ADD(scale1, F32, 1) && ADD(k32, F32, B, H, S, D) && ADD(v32, F32, B, H, S, D) &&
                    ADD(kbits, U8, B, H, S, D / 8) && ADD(kmag, F32, B, H, S) && ADD(vnib, U8, B, H, S, D / 2) &&
                    ADD(cents, F32, N_CENTS);
    if (!ok) {
        free_data(d);
        return NULL;
    }
    vqb_set_floats(&d->q_scale, 1.0f / sqrtf((float)D));
    vqb_set_floats(&d->scale1, 1.0f / sqrtf((float)D));
    vqb_set_floats(&d->kmag, 0.8f);
    return d;
}

bool vqb_make_decode_cases(const vqb_shape *sh, int threads, vqb_case *cases, int *n)
{
    vqb_data *d = make_data(sh, threads);
    if (d == NULL) return false;
    const int64_t B = sh->B, H = sh->Hkv, S = sh->Skv, D = sh->D, GK = (S + KIVI_G - 1) / KIVI_G;
    const bool ok = ADD(k16, F16, B, H, S, D) && ADD(v16, F16, B, H, S, D) &&
                    ADD(kc, U8, B, H, S, D * KIVI_BITS / 8) && ADD(ks, F16, B, H, GK, D) && ADD(kz, F16, B, H, GK, D) &&
                    ADD(vc, U8, B, H, S, D * KIVI_BITS / 8) && ADD(vs, F16, B, H, S, D / KIVI_G) &&
                    ADD(vz, F16, B, H, S, D / KIVI_G);
    if (!ok) {
        free_data(d);
        return false;
    }
    vqb_set_floats(&d->ks, 0.3f);
    vqb_set_floats(&d->kz, -0.45f);
    vqb_set_floats(&d->vs, 0.3f);
    vqb_set_floats(&d->vz, -0.45f);
    const size_t kivi = vqb_bytes(&d->kc) + vqb_bytes(&d->ks) + vqb_bytes(&d->kz) + vqb_bytes(&d->vc) +
                        vqb_bytes(&d->vs) + vqb_bytes(&d->vz);
    const size_t rabitq = vqb_bytes(&d->kbits) + vqb_bytes(&d->kmag) + vqb_bytes(&d->vnib);
    *n = 0;
    cases[(*n)++] = (vqb_case){"f16", "sdpa", vqb_bytes(&d->k16) + vqb_bytes(&d->v16), run_f16, d, NULL};
    cases[(*n)++] = (vqb_case){"f32", "sdpa", vqb_bytes(&d->k32) + vqb_bytes(&d->v32), run_f32, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused", kivi, run_kivi, d, NULL};
    if (runs_amx(threads)) cases[(*n)++] = (vqb_case){"kivi-2b", "fused-avx512", kivi, run_kivi_avx512, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused-blk1", kivi, run_kivi_one_block, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused-unf", kivi, run_kivi_unfused, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused-f32v", kivi, run_kivi_f32v, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused-f32k", kivi, run_kivi_f32k, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "fused-old", kivi, run_kivi_old, d, NULL};
    cases[(*n)++] = (vqb_case){"kivi-2b", "dequant+sdpa", kivi, run_kivi_deq, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "fused", rabitq, run_rabitq, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "fused-blk1", rabitq, run_rabitq_one_block, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "fused-unf", rabitq, run_rabitq_unfused, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "fused-f32v", rabitq, run_rabitq_f32v, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "fused-old", rabitq, run_rabitq_old, d, NULL};
    cases[(*n)++] = (vqb_case){"rabitq-1b/4b", "dequant+sdpa", rabitq, run_rabitq_deq, d, NULL};
    if (!vqb_add_format_cases(d, cases, n)) {
        vqb_free_cases(cases, *n);
        return false;
    }
    return true;
}

bool vqb_make_prefill_cases(const vqb_shape *sh, vqb_case *cases, int *n)
{
    vqb_data *d = make_data(sh, 1);
    if (d == NULL) return false;
    const size_t rabitq = vqb_bytes(&d->kbits) + vqb_bytes(&d->kmag) + vqb_bytes(&d->vnib);
    cases[0] = (vqb_case){"f32", "prefill-sdpa", vqb_bytes(&d->k32) + vqb_bytes(&d->v32), run_f32, d, NULL};
    cases[1] = (vqb_case){"rabitq-1b/4b", "prefill", rabitq, run_rabitq_prefill, d, NULL};
    *n = 2;
    return true;
}

void vqb_free_cases(vqb_case *cases, int n)
{
    if (n < 1 || cases[0].data == NULL) return;
    free_data(cases[0].data);
    for (int i = 0; i < n; i++) cases[i].data = NULL;
}
