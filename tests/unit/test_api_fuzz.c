/* test_api_fuzz.c — the header's error promise under mutated arguments:
 * "on failure no output byte is written, nothing aborts, never reads out of
 * bounds — whatever the input".
 *
 * One table row per public function taking DLTensors (sdpa once per key
 * format): build() makes a valid call (small shapes, exact-size buffers so
 * ASan sees any out-of-bounds read), call() runs it. The valid call must give
 * VQ_OK; then a fixed-seed loop (every ISA) applies one mutation, one call
 * in four a second, to a fresh copy of the arguments: a tensor NULL, ndim
 * +-1, one dim 0/1/-3/larger/1<<40, a size shared by several tensors set to
 * 0 or 1 in all, dtype code/bits/lanes, device kDLCUDA, non-compact strides,
 * data NULL, an input's values (0xFF/0x80 bytes, NaN, +-inf, 3e38), an input
 * reached through a byte_offset of 1..3, or a scalar -1/0/17/99/1<<30.
 * A mutated call may succeed (some are harmless); if it fails, the message
 * must start with the function's name and every output must hold its
 * pre-call bytes. Dims no other tensor ties (samples N, centroids C) are
 * never made larger: that call is valid and lies about its buffer. */
#include "harness.h"

enum { FZ_MAXT = 10, FZ_MAXS = 4, FZ_MAXD = 6, FZ_ITERS = 5000 };

/* The argument set of one call: tensor headers (own shape storage), which
 * are NULL, and integer scalars. */
typedef struct fz_args {
    int n, ns;
    DLTensor t[FZ_MAXT];
    int64_t shape[FZ_MAXT][FZ_MAXD];
    int64_t strides[FZ_MAXT][FZ_MAXD];
    bool null[FZ_MAXT];
    unsigned outputs;             /* bit i: t[i] is written by the call */
    unsigned iters_scalars;       /* bit k: s[k] counts rounds, so 1<<30 is valid, only slow: not tried */
    unsigned free_dims[FZ_MAXT];  /* bit d: no other tensor ties dim d, so a larger value is a lie, not an error */
    int64_t s[FZ_MAXS];
    size_t bytes[FZ_MAXT];        /* exact size of t[i].data */
    void *owned;                  /* a mutated copy of one input's data, freed after the call */
} fz_args;

#define T(i) (a->null[i] ? NULL : &a->t[i])
#define S(i) ((int)a->s[i])

typedef struct fz_case {
    const char *label;  /* row name (sdpa rows name their format) */
    const char *fn;     /* the public function: the message prefix */
    void (*build)(fz_args *a);
    vq_status (*call)(vq_ctx *ctx, fz_args *a);
} fz_case;

/* Points the headers of `a` at its own shape/stride storage (after a copy). */
static void fz_rebase(fz_args *a)
{
    for (int i = 0; i < a->n; i++) {
        a->t[i].shape = a->shape[i];
        if (a->t[i].strides) a->t[i].strides = a->strides[i];
    }
}

/* Adds a compact tensor of exactly numel * elem bytes; floats ~ N(0,1),
 * integers uniform in 0..3 (a valid code, index or position everywhere). */
static DLTensor *fz_add(fz_args *a, bool out, DLDataType dt, int ndim, const int64_t *shape)
{
    const int i = a->n++;
    DLTensor *t = &a->t[i];
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) { a->shape[i][d] = shape[d]; n *= shape[d]; }
    *t = (DLTensor){.ndim = ndim, .shape = a->shape[i], .dtype = dt, .device = {kDLCPU, 0}};
    a->bytes[i] = (size_t)n * dt.bits / 8;
    t->data = malloc(a->bytes[i]);
    static vq_rng rng;
    if (i == 0) vq_rng_seed(&rng, 1234);
    if (out) {
        a->outputs |= 1u << i;
        vt_poison(t);
    } else if (dt.code == kDLFloat || dt.code == kDLBfloat) {
        vt_fill_normal(t, &rng, 0.0, 1.0);
    } else {
        vt_fill_uniform_int(t, &rng, 0, 3);
    }
    return t;
}
#define IN(dt, ...) fz_add(a, false, dt, VT_DIMS(__VA_ARGS__))
#define OUT(dt, ...) fz_add(a, true, dt, VT_DIMS(__VA_ARGS__))

static void fz_free(fz_args *a)
{
    for (int i = 0; i < a->n; i++) free(a->t[i].data);
}

static void fz_signs(DLTensor *t)
{
    for (int64_t i = 0; i < vt_numel(t); i++) vt_set(t, i, (i * 7 % 3) ? 1.0 : -1.0);
}
static void fz_fill(DLTensor *t, double v0, double step)
{
    for (int64_t i = 0; i < vt_numel(t); i++) vt_set(t, i, v0 + step * (double)i);
}
static void fz_scalars(fz_args *a, int ns, const int64_t *s)
{
    a->ns = ns;
    for (int i = 0; i < ns; i++) a->s[i] = s[i];
}
#define SCALARS(...) fz_scalars(a, VT_DIMS(__VA_ARGS__))

/* Shapes: B=1, H=2, S=5, D=16; attention Hq=2, Hkv=1, Sq=2, Skv=5. */
#define D 16

/* ---- codecs ---- */
static void b_bit_pack(fz_args *a) { IN(VT_U8, 2, 5); OUT(VT_U32, 2, 1); SCALARS(4); }
static vq_status c_bit_pack(vq_ctx *c, fz_args *a) { return vq_bit_pack(c, T(0), S(0), T(1)); }

static void b_bit_unpack(fz_args *a) { IN(VT_U32, 2, 1); OUT(VT_I32, 2, 5); SCALARS(4, 5); }
static vq_status c_bit_unpack(vq_ctx *c, fz_args *a) { return vq_bit_unpack(c, T(0), S(0), a->s[1], T(1)); }

static void b_hadamard(fz_args *a) { IN(VT_F32, 2, 3, D); fz_signs(IN(VT_F32, D)); OUT(VT_F32, 2, 3, D); }
static vq_status c_hadamard(vq_ctx *c, fz_args *a) { return vq_hadamard(c, T(0), T(1), false, T(2)); }

static void b_ts_quant(fz_args *a) { IN(VT_F32, 2, 5); OUT(VT_U8, 2, 5); SCALARS(3); }
static vq_status c_ts_quant(vq_ctx *c, fz_args *a) { return vq_turboquant_scalar_quantize(c, T(0), S(0), T(1)); }

static void b_ts_dequant(fz_args *a) { IN(VT_U8, 2, 5); OUT(VT_F32, 2, 5); SCALARS(3); }
static vq_status c_ts_dequant(vq_ctx *c, fz_args *a)
{
    return vq_turboquant_scalar_dequantize(c, T(0), S(0), 0.5f, T(1));
}

static void b_th_quant(fz_args *a)
{
    IN(VT_F32, 2, 5, D); fz_signs(IN(VT_F32, D)); OUT(VT_U8, 2, 5, D); OUT(VT_F32, 2, 5); SCALARS(3);
}
static vq_status c_th_quant(vq_ctx *c, fz_args *a)
{
    return vq_turboquant_hadamard_quantize(c, T(0), T(1), S(0), T(2), T(3), NULL);
}

static void b_th_dequant(fz_args *a)
{
    IN(VT_U8, 2, 5, D); IN(VT_F32, 2, 5); fz_signs(IN(VT_F32, D)); OUT(VT_F32, 2, 5, D); SCALARS(3);
}
static vq_status c_th_dequant(vq_ctx *c, fz_args *a)
{
    return vq_turboquant_hadamard_dequantize(c, T(0), T(1), T(2), S(0), T(3));
}

static void b_rvq_encode(fz_args *a)
{
    IN(VT_F32, 2, 5, D); fz_signs(IN(VT_F32, D));
    OUT(VT_U8, 2, 5, D); OUT(VT_F32, 2, 5); OUT(VT_U8, 2, 5, D); OUT(VT_F32, 2, 5);
    SCALARS(3, 2);
}
static vq_status c_rvq_encode(vq_ctx *c, fz_args *a)
{
    return vq_turboquant_rvq_encode(c, T(0), T(1), S(0), S(1), T(2), T(3), T(4), T(5));
}

static void b_rvq_decode(fz_args *a)
{
    IN(VT_U8, 2, 5, D); IN(VT_F32, 2, 5); IN(VT_U8, 2, 5, D); IN(VT_F32, 2, 5); fz_signs(IN(VT_F32, D));
    OUT(VT_F32, 2, 5, D); SCALARS(3, 2);
}
static vq_status c_rvq_decode(vq_ctx *c, fz_args *a)
{
    return vq_turboquant_rvq_decode(c, T(0), T(1), T(2), T(3), T(4), S(0), S(1), T(5));
}

/* Keys: g = 2 tokens per group -> 3 groups; values: g = 4 channels -> 4. */
static void b_aff_qk(fz_args *a)
{
    IN(VT_F32, 1, 2, 5, D); OUT(VT_U8, 1, 2, 5, D / 2); OUT(VT_F32, 1, 2, 3, D); OUT(VT_F32, 1, 2, 3, D);
    SCALARS(4, 2);
}
static vq_status c_aff_qk(vq_ctx *c, fz_args *a)
{
    return vq_kivi_quantize_keys(c, T(0), S(0), S(1), T(1), T(2), T(3));
}
static void b_aff_qv(fz_args *a)
{
    IN(VT_F32, 1, 2, 5, D); OUT(VT_U8, 1, 2, 5, D); OUT(VT_F16, 1, 2, 5, 4); OUT(VT_F16, 1, 2, 5, 4);
    SCALARS(4, 4);
}
static vq_status c_aff_qv(vq_ctx *c, fz_args *a)
{
    return vq_kivi_quantize_values(c, T(0), S(0), S(1), T(1), T(2), T(3));
}
static void b_aff_dk(fz_args *a)
{
    IN(VT_U8, 1, 2, 5, D / 2); IN(VT_F32, 1, 2, 3, D); IN(VT_F32, 1, 2, 3, D); OUT(VT_F32, 1, 2, 5, D);
    SCALARS(4, 2);
}
static vq_status c_aff_dk(vq_ctx *c, fz_args *a)
{
    return vq_kivi_dequantize_keys(c, T(0), T(1), T(2), S(0), S(1), T(3));
}
static void b_aff_dv(fz_args *a)
{
    IN(VT_U8, 1, 2, 5, D); IN(VT_F16, 1, 2, 5, 4); IN(VT_F16, 1, 2, 5, 4); OUT(VT_F16, 1, 2, 5, D);
    SCALARS(4, 4);
}
static vq_status c_aff_dv(vq_ctx *c, fz_args *a)
{
    return vq_kivi_dequantize_values(c, T(0), T(1), T(2), S(0), S(1), T(3));
}

static void b_rq_encode(fz_args *a)
{
    IN(VT_F32, 2, 5, D); fz_signs(IN(VT_F32, D)); OUT(VT_U8, 2, 5, D / 8); OUT(VT_F32, 2, 5);
}
static vq_status c_rq_encode(vq_ctx *c, fz_args *a)
{
    return vq_rabitq_encode(c, T(0), T(1), T(2), T(3), NULL);
}

static void b_rq_hamming(fz_args *a)
{
    IN(VT_U8, D / 8); IN(VT_U8, 5, D / 8); IN(VT_F32, 5); IN(VT_F32, 1); OUT(VT_F32, 5);
}
static vq_status c_rq_hamming(vq_ctx *c, fz_args *a)
{
    return vq_rabitq_hamming_score(c, T(0), T(1), T(2), T(3), T(4));
}

static void b_rq_pack(fz_args *a) { IN(VT_U8, 2, D); OUT(VT_U8, 2, D / 2); }
static vq_status c_rq_pack(vq_ctx *c, fz_args *a) { return vq_rabitq_pack_values(c, T(0), T(1)); }

static void b_cb_quant(fz_args *a)
{
    IN(VT_F32, 2, 5); fz_fill(IN(VT_F32, 4), -1.5, 1.0); OUT(VT_U8, 2, 5);
    a->free_dims[1] = 1;
}
static vq_status c_cb_quant(vq_ctx *c, fz_args *a) { return vq_codebook_quantize(c, T(0), T(1), T(2)); }

static void b_lm_fit(fz_args *a)
{
    IN(VT_F32, 40); OUT(VT_F32, 4); SCALARS(4, 3);
    a->iters_scalars = 1u << 1;
    a->free_dims[0] = 1;
}
static vq_status c_lm_fit(vq_ctx *c, fz_args *a) { return vq_lloyd_max_fit(c, T(0), S(0), S(1), T(1)); }

/* QJL: sketch m = 32 rows, one u32 word per key. */
static void b_qjl_encode(fz_args *a) { IN(VT_F32, 2, 5, D); IN(VT_F32, 32, D); OUT(VT_U32, 2, 5, 1); }
static vq_status c_qjl_encode(vq_ctx *c, fz_args *a) { return vq_qjl_encode(c, T(0), T(1), T(2)); }

static void b_qjl_ip(fz_args *a)
{
    IN(VT_U32, 2, 1); IN(VT_U32, 2, 5, 1); OUT(VT_F32, 2, 5); IN(VT_F32, 2); IN(VT_F32, 2, 5);
    SCALARS(D, 32);
}
static vq_status c_qjl_ip(vq_ctx *c, fz_args *a)
{
    const vq_qjl_inner_product_opts o = {.query_norm = T(3), .key_norm = T(4)};
    return vq_qjl_inner_product(c, T(0), T(1), S(0), S(1), T(2), &o);
}

static void b_qjl_score(fz_args *a)
{
    IN(VT_F32, 2, D); IN(VT_F32, 32, D); IN(VT_U32, 2, 5, 1); IN(VT_F32, 2, 5); OUT(VT_F32, 2, 5);
}
static vq_status c_qjl_score(vq_ctx *c, fz_args *a)
{
    return vq_qjl_score(c, T(0), T(1), T(2), T(3), T(4));
}

/* VecInfer: M = 4 subspaces of 4 channels, C = 8 centroids (free: no other
 * tensor carries C except a LUT). */
static void fz_vecinfer_tables(fz_args *a, bool c_free)
{
    IN(VT_F32, 4, 8, 4);
    fz_fill(IN(VT_F32, D), 0.5, 0.1);
    if (c_free) a->free_dims[a->n - 2] = 1u << 1;
}
static void b_vi_quant(fz_args *a)
{
    IN(VT_F32, 1, 2, 5, D); fz_vecinfer_tables(a, true); OUT(VT_U8, 1, 2, 5, 4); SCALARS(4);
}
static vq_status c_vi_quant(vq_ctx *c, fz_args *a)
{
    return vq_vecinfer_quantize(c, T(0), T(1), T(2), S(0), T(3));
}
static void b_vi_dequant(fz_args *a) { IN(VT_U8, 1, 2, 5, 4); fz_vecinfer_tables(a, true); OUT(VT_F32, 1, 2, 5, D); }
static vq_status c_vi_dequant(vq_ctx *c, fz_args *a)
{
    return vq_vecinfer_dequant(c, T(0), T(1), T(2), T(3));
}
static void b_vi_encdec(fz_args *a)
{
    IN(VT_F32, 1, 2, 5, D); fz_vecinfer_tables(a, true); OUT(VT_U8, 1, 2, 5, 4); OUT(VT_F32, 1, 2, 5, D);
    SCALARS(4);
}
static vq_status c_vi_encdec(vq_ctx *c, fz_args *a)
{
    return vq_vecinfer_encode_decode(c, T(0), T(1), T(2), S(0), T(3), T(4));
}
static void b_vi_lut(fz_args *a) { IN(VT_F32, 1, 2, D); fz_vecinfer_tables(a, false); OUT(VT_F32, 1, 2, 4, 8); }
static vq_status c_vi_lut(vq_ctx *c, fz_args *a)
{
    return vq_vecinfer_query_lut(c, T(0), T(1), T(2), T(3));
}
static void b_vi_smooth(fz_args *a) { IN(VT_F32, 10, D); OUT(VT_F32, D); a->free_dims[0] = 1; }
static vq_status c_vi_smooth(vq_ctx *c, fz_args *a) { return vq_vecinfer_smooth_factors(c, T(0), T(1)); }

static void b_kmeans(fz_args *a) { IN(VT_F32, 20, 4); OUT(VT_F32, 3, 4); SCALARS(3, 2); a->free_dims[0] = 1; a->iters_scalars = 1u << 1; }
static vq_status c_kmeans(vq_ctx *c, fz_args *a) { return vq_kmeans(c, T(0), S(0), S(1), 7, T(1)); }

/* CommVQ: R = 2 stages of C = 4 centroids, P = 8 positions. */
static void b_cvq_decode(fz_args *a)
{
    IN(VT_U8, 1, 2, 5, 2); IN(VT_F32, 2, 4, D); IN(VT_F32, 8, D / 2); IN(VT_F32, 8, D / 2); IN(VT_I32, 5);
    OUT(VT_F32, 1, 2, 5, D); IN(VT_F32, 1, 2, 5);
    a->free_dims[1] = 1u << 1;
}
static vq_status c_cvq_decode(vq_ctx *c, fz_args *a)
{
    const vq_commvq_opts o = {.rope = VQ_ROPE_INTERLEAVED, .scale = T(6)};
    return vq_commvq_decode(c, T(0), T(1), T(2), T(3), T(4), T(5), &o);
}
static void b_cvq_train(fz_args *a) { IN(VT_F32, 20, D); OUT(VT_F32, 2, 4, D); SCALARS(2, 4, 2); a->free_dims[0] = 1; a->iters_scalars = 1u << 2; }
static vq_status c_cvq_train(vq_ctx *c, fz_args *a)
{
    return vq_commvq_train(c, T(0), S(0), S(1), S(2), 9, T(1));
}
static void b_cvq_encode(fz_args *a)
{
    IN(VT_F32, 1, 2, 5, D); IN(VT_F32, 2, 4, D); OUT(VT_U8, 1, 2, 5, 2);
    a->free_dims[1] = 1u << 1;
}
static vq_status c_cvq_encode(vq_ctx *c, fz_args *a) { return vq_commvq_encode(c, T(0), T(1), T(2)); }

/* ---- attention: queries t0 [1,2,2,D], values t1 [1,1,5,D], out t2, key
 * members from t3 on; scalar s0 is the format. ---- */
static void fz_sdpa_head(fz_args *a, vq_keys_format f)
{
    IN(VT_F32, 1, 2, 2, D); IN(VT_F32, 1, 1, 5, D); OUT(VT_F32, 1, 2, 2, D);
    a->ns = 1;
    a->s[0] = f;
}
static void b_sd_f16(fz_args *a) { fz_sdpa_head(a, VQ_KEYS_F16); IN(VT_F16, 1, 1, 5, D); IN(VT_F32, 1, 2, 2, 5); }
static void b_sd_turbo(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_TURBO); IN(VT_U8, 1, 1, 5, D); IN(VT_F32, 1, 1, 5); fz_signs(IN(VT_F32, D));
    a->ns = 2; a->s[1] = 3;
}
static void b_sd_rvq(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_TURBO_RVQ); IN(VT_U8, 1, 1, 5, D); IN(VT_F32, 1, 1, 5);
    IN(VT_U32, 1, 1, 5, 1); IN(VT_F32, 1, 1, 5); fz_signs(IN(VT_F32, D));
    a->ns = 3; a->s[1] = 3; a->s[2] = 2;
}
static void b_sd_kivi(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_KIVI); IN(VT_U8, 1, 1, 5, D / 2); IN(VT_F32, 1, 1, 3, D); IN(VT_F32, 1, 1, 3, D);
    a->ns = 3; a->s[1] = 4; a->s[2] = 2;
}
static void b_sd_rabitq(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_RABITQ); IN(VT_U8, 1, 1, 5, D / 8); IN(VT_F32, 1, 1, 5); IN(VT_F32, 1, 1, 5);
    fz_signs(IN(VT_F32, D));
}
static void b_sd_qjl(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_QJL); IN(VT_U32, 1, 1, 5, 1); IN(VT_F32, 1, 1, 5); IN(VT_F32, 32, D);
}
static void b_sd_vecinfer(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_VECINFER); IN(VT_U8, 1, 1, 5, 4); fz_vecinfer_tables(a, true);
}
static void b_sd_commvq(fz_args *a)
{
    fz_sdpa_head(a, VQ_KEYS_COMMVQ); IN(VT_U8, 1, 1, 5, 2); IN(VT_F32, 2, 4, D); IN(VT_F32, 8, D / 2);
    IN(VT_F32, 8, D / 2); IN(VT_I32, 5); IN(VT_F32, 1, 1, 5);
    a->free_dims[4] = 1u << 1;
}

/* The vq_encoded_keys of an sdpa row: members t3.. in the order built. */
static vq_encoded_keys fz_keys(const fz_args *a)
{
    const vq_encoded_keys k = {.format = (vq_keys_format)a->s[0]};
    return k;
}

static vq_status c_sd_f16(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.f16.keys = T(3);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, T(4), T(2), NULL);
}
static vq_status c_sd_turbo(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.turbo.idx = T(3); k.turbo.scale = T(4); k.turbo.diag = T(5); k.turbo.bits = S(1);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}
static vq_encoded_keys fz_rvq(const fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.rvq.idx1 = T(3); k.rvq.scale1 = T(4); k.rvq.idx2 = T(5); k.rvq.scale2 = T(6); k.rvq.diag = T(7);
    k.rvq.b1 = S(1); k.rvq.b2 = S(2);
    return k;
}
static vq_status c_sd_rvq(vq_ctx *c, fz_args *a)
{
    const vq_encoded_keys k = fz_rvq(a);
    const vq_attend_opts o = {.causal = true, .num_splits = 2};
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), &o);
}
static vq_status c_rvq_attend(vq_ctx *c, fz_args *a)
{
    const vq_encoded_keys k = fz_rvq(a);
    return vq_turboquant_fused_rvq_decode_attend(c, T(0), &k, T(1), 0.25f, T(2), NULL);
}
static vq_status c_sd_kivi(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.kivi.codes = T(3); k.kivi.scale = T(4); k.kivi.zero = T(5);
    k.kivi.bits = S(1); k.kivi.group_size = S(2);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}
static vq_status c_sd_rabitq(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.rabitq.bits = T(3); k.rabitq.mag = T(4); k.rabitq.cnst = T(5); k.rabitq.diag = T(6);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}
static vq_status c_sd_qjl(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.qjl.bits = T(3); k.qjl.norm = T(4); k.qjl.projection = T(5);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}
static vq_status c_sd_vecinfer(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.vecinfer.idx = T(3); k.vecinfer.codebook = T(4); k.vecinfer.smooth = T(5);
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}
static vq_status c_sd_commvq(vq_ctx *c, fz_args *a)
{
    vq_encoded_keys k = fz_keys(a);
    k.commvq.idx = T(3); k.commvq.codebook = T(4); k.commvq.cos_freqs = T(5); k.commvq.sin_freqs = T(6);
    k.commvq.positions = T(7); k.commvq.scale = T(8); k.commvq.rope = VQ_ROPE_HALF;
    return vq_fused_sdpa(c, T(0), &k, VT_F16_VALUES(T(1)), 0.25f, NULL, T(2), NULL);
}

/* Encoded values: q t0, plain f16 keys t1, out t2, the value format's members
 * from t3, lse_out last; s0 bits, s1 group size. */
static void fz_values_head(fz_args *a)
{
    IN(VT_F32, 1, 2, 2, D); IN(VT_F16, 1, 1, 5, D); OUT(VT_F32, 1, 2, 2, D);
}
static void b_sv_kivi(fz_args *a)
{
    fz_values_head(a); IN(VT_U8, 1, 1, 5, D / 2); IN(VT_F32, 1, 1, 5, D / 4); IN(VT_F32, 1, 1, 5, D / 4);
    OUT(VT_F32, 1, 2, 2); SCALARS(4, 4);
}
static vq_status c_sv_kivi(vq_ctx *c, fz_args *a)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_F16, .f16.keys = T(1)};
    const vq_encoded_values v = {.format = VQ_VALUES_KIVI, .kivi = {T(3), T(4), T(5), S(0), S(1)}};
    const vq_attend_opts o = {.causal = true, .lse_out = T(6)};
    return vq_fused_sdpa(c, T(0), &k, &v, 0.25f, NULL, T(2), &o);
}
static void b_sv_codebook(fz_args *a)
{
    fz_values_head(a); IN(VT_U8, 1, 1, 5, D / 2); IN(VT_F32, 16); IN(VT_F32, 1, 1, 5); OUT(VT_F32, 1, 2, 2);
}
static vq_status c_sv_codebook(vq_ctx *c, fz_args *a)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_F16, .f16.keys = T(1)};
    const vq_encoded_values v = {.format = VQ_VALUES_CODEBOOK, .codebook = {T(3), T(4), T(5)}};
    const vq_attend_opts o = {.lse_out = T(6)};
    return vq_fused_sdpa(c, T(0), &k, &v, 0.25f, NULL, T(2), &o);
}
static void b_sv_turbo(fz_args *a)
{
    fz_values_head(a); IN(VT_U8, 1, 1, 5, D); IN(VT_F32, 1, 1, 5); fz_signs(IN(VT_F32, D)); OUT(VT_F32, 1, 2, 2);
    SCALARS(3);
}
static vq_status c_sv_turbo(vq_ctx *c, fz_args *a)
{
    const vq_encoded_keys k = {.format = VQ_KEYS_F16, .f16.keys = T(1)};
    const vq_encoded_values v = {.format = VQ_VALUES_TURBO, .turbo = {T(3), T(4), T(5), S(0)}};
    const vq_attend_opts o = {.lse_out = T(6)};
    return vq_fused_sdpa(c, T(0), &k, &v, 0.25f, NULL, T(2), &o);
}
/* Merge: out_a t0, lse_a t1, out_b t2 (f16), lse_b t3, out t4, lse_out t5. */
static void b_merge(fz_args *a)
{
    IN(VT_F32, 1, 2, 3, D); IN(VT_F32, 1, 2, 3); IN(VT_F16, 1, 2, 3, D); IN(VT_F32, 1, 2, 3);
    OUT(VT_F32, 1, 2, 3, D); OUT(VT_F32, 1, 2, 3);
}
static vq_status c_merge(vq_ctx *c, fz_args *a) { return vq_attention_merge(c, T(0), T(1), T(2), T(3), T(4), T(5)); }

/* Affine decode: q t0, k_codes/k_scale/k_zero t1..3 (g = 2 tokens),
 * v_codes/v_scale/v_zero t4..6 (g = 2 channels), out t7. */
static void b_aff_attend(fz_args *a)
{
    IN(VT_F32, 1, 2, 2, D);
    IN(VT_U8, 1, 1, 5, D); IN(VT_F32, 1, 1, 3, D); IN(VT_F32, 1, 1, 3, D);
    IN(VT_U8, 1, 1, 5, D); IN(VT_F16, 1, 1, 5, D / 2); IN(VT_F16, 1, 1, 5, D / 2);
    OUT(VT_F32, 1, 2, 2, D);
    SCALARS(2, 0);
}
static vq_status c_aff_attend(vq_ctx *c, fz_args *a)
{
    return vq_kivi_fused_attend(c, T(0), T(1), T(2), T(3), T(4), T(5), T(6), S(0), 0.25f, S(1),
                                         T(7), NULL);
}

/* RaBitQ: q t0, q_scale/scale t1, k_bits t2, k_mag t3, k_const t4, v_idx
 * (nibble-packed) t5, v_cents t6 (16, free), out t7, v_scale t8. */
static void fz_rq_attend(fz_args *a, bool prefill, int64_t d)
{
    IN(VT_F32, 1, 2, 2, d);
    if (prefill) IN(VT_F32, 1); else IN(VT_F32, 1, 2, 2);
    IN(VT_U8, 1, 1, 5, d / 8); IN(VT_F32, 1, 1, 5); IN(VT_F32, 1, 1, 5); IN(VT_U8, 1, 1, 5, d / 2);
    IN(VT_F32, 16); OUT(VT_F32, 1, 2, 2, d); IN(VT_F32, 1, 1, 5);
    a->free_dims[6] = 1;
}
static void b_rq_attend(fz_args *a) { fz_rq_attend(a, false, D); }
static void b_rq_prefill(fz_args *a) { fz_rq_attend(a, true, D); }
/* D = 128: the integer p.V of the codebook values (vq_value_accum INT8) */
static void b_rq_attend128(fz_args *a) { fz_rq_attend(a, false, 128); }
static vq_status c_rq_attend_int8(vq_ctx *c, fz_args *a)
{
    const vq_rabitq_attend_opts o = {.v_scale = T(8), .value_accum = VQ_VALUE_ACCUM_INT8};
    return vq_rabitq_fused_attend(c, T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7), &o);
}
static vq_status c_rq_attend(vq_ctx *c, fz_args *a)
{
    const vq_rabitq_attend_opts o = {.score = VQ_RABITQ_SCORE_EXACT, .v_scale = T(8), .num_splits = 2};
    return vq_rabitq_fused_attend(c, T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7), &o);
}
static vq_status c_rq_prefill(vq_ctx *c, fz_args *a)
{
    const vq_rabitq_attend_opts o = {.v_scale = T(8)};
    return vq_rabitq_prefill_attend(c, T(0), T(1), T(2), T(3), T(4), T(5), T(6), T(7), &o);
}

/* ---- the KV cache: a fresh cache per call (1 layer, Hkv 1, Hq 2, pages of
 * 32, two sequences); s0 = layer, s1 = n_seq. kind 0: KIVI 2-bit keys (g 8)
 * and values with a window of 3; kind 1: CommVQ keys (R 2, C 4, P 8); kind
 * 2: kind 0 with the window at 8 bits (VQ_WINDOW_TURBO8); kind 3: at 3 bits
 * (VQ_WINDOW_TURBO: packed codes, f16 scales). A failed append
 * must leave both sequences empty. ---- */
static vq_cache *fz_cache(vq_ctx *c, int kind, int64_t *ids, bool tokens)
{
    static float cb[2 * 4 * D], cs[8 * D / 2], sn[8 * D / 2];
    static int64_t cb_shape[3] = {2, 4, D}, rope_shape[2] = {8, D / 2};
    for (int i = 0; i < 2 * 4 * D; i++) cb[i] = (float)((i * 7) % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 8 * D / 2; i++) cs[i] = 1.0f, sn[i] = 0.0f;
    static DLTensor tcb, tcs, tsn;
    tcb = (DLTensor){.data = cb, .device = {kDLCPU, 0}, .ndim = 3, .dtype = {kDLFloat, 32, 1}, .shape = cb_shape};
    tcs = (DLTensor){.data = cs, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = rope_shape};
    tsn = tcs;
    tsn.data = sn;
    const vq_cache_layer_config lc[4] = {
        {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 8}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 8}},
        {{.method = VQ_KEY_COMMVQ, .codebook = &tcb, .cos_freqs = &tcs, .sin_freqs = &tsn}, {.method = VQ_VALUE_F16}},
        {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 8}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 8}},
        {{.method = VQ_KEY_KIVI, .bits = 2, .group_size = 8}, {.method = VQ_VALUE_KIVI, .bits = 2, .group_size = 8}}};
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = 1, .n_q_heads = 2, .head_dim = D, .page_size = 32,
                                 .capacity_pages = 2, .residual_tokens = kind == 1 ? 0 : 3, .layers = &lc[kind],
                                 .window = kind == 2 ? VQ_WINDOW_TURBO8 : kind == 3 ? VQ_WINDOW_TURBO : VQ_WINDOW_F16,
                                 .window_bits = kind == 3 ? 3 : 0};
    vq_cache *cache = NULL;
    if (vq_cache_create(c, &cfg, &cache) != VQ_OK) return NULL;
    for (int i = 0; i < 2; i++) (void)vq_cache_seq_add(cache, &ids[i]);
    if (tokens) {
        DLTensor *k = vt_new(VT_F32, VT_DIMS(2, 1, 5, D)), *v = vt_like(k, VT_F32);
        vt_fill_uniform_int(k, &(vq_rng){{1, 2, 3, 4}}, -2, 2);
        vt_fill_uniform_int(v, &(vq_rng){{5, 6, 7, 8}}, -2, 2);
        (void)vq_cache_append(cache, 0, 2, ids, k, v, NULL);
        vt_free(k), vt_free(v);
    }
    return cache;
}
static void b_ca_append(fz_args *a) { IN(VT_F32, 2, 1, 3, D); IN(VT_F32, 2, 1, 3, D); IN(VT_I32, 2, 3); SCALARS(0, 2); }
static vq_status fz_append(vq_ctx *c, fz_args *a, int kind)
{
    int64_t ids[2] = {-1, -1};
    vq_cache *cache = fz_cache(c, kind, ids, false);
    const vq_status s = vq_cache_append(cache, S(0), S(1), ids, T(0), T(1), T(2));
    if (s != VQ_OK)
        VT_CHECK(vq_cache_seq_length(cache, ids[0], 0) == 0 && vq_cache_seq_length(cache, ids[1], 0) == 0,
                 "a failed vq_cache_append changed a sequence");
    vq_cache_free(cache);
    return s;
}
static vq_status c_ca_append(vq_ctx *c, fz_args *a) { return fz_append(c, a, 0); }
static vq_status c_ca_append_cvq(vq_ctx *c, fz_args *a) { return fz_append(c, a, 1); }
static vq_status c_ca_append_w8(vq_ctx *c, fz_args *a) { return fz_append(c, a, 2); }
static vq_status c_ca_append_w3(vq_ctx *c, fz_args *a) { return fz_append(c, a, 3); }
static void b_ca_attend(fz_args *a) { IN(VT_F32, 2, 2, 2, D); OUT(VT_F32, 2, 2, 2, D); OUT(VT_F32, 2, 2, 2); SCALARS(0, 2); }
static vq_status fz_attend(vq_ctx *c, fz_args *a, int kind)
{
    int64_t ids[2] = {-1, -1};
    vq_cache *cache = fz_cache(c, kind, ids, true);
    const vq_cache_attend_opts o = {.causal = true, .lse_out = T(2)};
    const vq_status s = vq_cache_attend(cache, S(0), S(1), ids, T(0), T(1), &o);
    vq_cache_free(cache);
    return s;
}
static vq_status c_ca_attend(vq_ctx *c, fz_args *a) { return fz_attend(c, a, 0); }
static vq_status c_ca_attend_w8(vq_ctx *c, fz_args *a) { return fz_attend(c, a, 2); }
static vq_status c_ca_attend_w3(vq_ctx *c, fz_args *a) { return fz_attend(c, a, 3); }

/* Calibration: keys, values [L=1, Hkv=2, N=5, D]; scalars = VECINFER subspaces,
 * VECINFER centroids, value centroids, iters. A fitted calibration is freed at
 * once (the call has no tensor output). */
static void b_cal_fit(fz_args *a) { IN(VT_F32, 1, 2, 5, D); IN(VT_F16, 1, 2, 5, D); SCALARS(4, 2, 2, 2); }
static vq_status c_cal_fit(vq_ctx *c, fz_args *a)
{
    const vq_calibration_config cfg = {.vecinfer_subspaces = S(0), .vecinfer_centroids = S(1), .value_centroids = S(2),
                                       .iters = S(3), .seed = 3};
    vq_calibration *cal = NULL;
    const vq_status st = vq_calibration_fit(c, &cfg, T(0), T(1), &cal);
    if ((st == VQ_OK) != (cal != NULL)) return VQ_ERR_DEVICE;  /* a status no row expects */
    vq_calibration_free(cal);
    return st;
}

#define ROW(label, fn, b, c) {label, fn, b, c}
#define FN(fn, b, c) {#fn, #fn, b, c}
static const fz_case fz_cases[] = {
    FN(vq_bit_pack, b_bit_pack, c_bit_pack),
    FN(vq_calibration_fit, b_cal_fit, c_cal_fit),
    FN(vq_bit_unpack, b_bit_unpack, c_bit_unpack),
    FN(vq_hadamard, b_hadamard, c_hadamard),
    FN(vq_turboquant_scalar_quantize, b_ts_quant, c_ts_quant),
    FN(vq_turboquant_scalar_dequantize, b_ts_dequant, c_ts_dequant),
    FN(vq_turboquant_hadamard_quantize, b_th_quant, c_th_quant),
    FN(vq_turboquant_hadamard_dequantize, b_th_dequant, c_th_dequant),
    FN(vq_turboquant_rvq_encode, b_rvq_encode, c_rvq_encode),
    FN(vq_turboquant_rvq_decode, b_rvq_decode, c_rvq_decode),
    FN(vq_kivi_quantize_keys, b_aff_qk, c_aff_qk),
    FN(vq_kivi_quantize_values, b_aff_qv, c_aff_qv),
    FN(vq_kivi_dequantize_keys, b_aff_dk, c_aff_dk),
    FN(vq_kivi_dequantize_values, b_aff_dv, c_aff_dv),
    FN(vq_rabitq_encode, b_rq_encode, c_rq_encode),
    FN(vq_rabitq_hamming_score, b_rq_hamming, c_rq_hamming),
    FN(vq_rabitq_pack_values, b_rq_pack, c_rq_pack),
    FN(vq_codebook_quantize, b_cb_quant, c_cb_quant),
    FN(vq_lloyd_max_fit, b_lm_fit, c_lm_fit),
    FN(vq_qjl_encode, b_qjl_encode, c_qjl_encode),
    FN(vq_qjl_inner_product, b_qjl_ip, c_qjl_ip),
    FN(vq_qjl_score, b_qjl_score, c_qjl_score),
    FN(vq_vecinfer_quantize, b_vi_quant, c_vi_quant),
    FN(vq_vecinfer_dequant, b_vi_dequant, c_vi_dequant),
    FN(vq_vecinfer_encode_decode, b_vi_encdec, c_vi_encdec),
    FN(vq_vecinfer_query_lut, b_vi_lut, c_vi_lut),
    FN(vq_vecinfer_smooth_factors, b_vi_smooth, c_vi_smooth),
    FN(vq_kmeans, b_kmeans, c_kmeans),
    FN(vq_commvq_decode, b_cvq_decode, c_cvq_decode),
    FN(vq_commvq_train, b_cvq_train, c_cvq_train),
    FN(vq_commvq_encode, b_cvq_encode, c_cvq_encode),
    ROW("vq_fused_sdpa/plain+mask", "vq_fused_sdpa", b_sd_f16, c_sd_f16),
    ROW("vq_fused_sdpa/turbo", "vq_fused_sdpa", b_sd_turbo, c_sd_turbo),
    ROW("vq_fused_sdpa/rvq", "vq_fused_sdpa", b_sd_rvq, c_sd_rvq),
    ROW("vq_fused_sdpa/affine", "vq_fused_sdpa", b_sd_kivi, c_sd_kivi),
    ROW("vq_fused_sdpa/rabitq", "vq_fused_sdpa", b_sd_rabitq, c_sd_rabitq),
    ROW("vq_fused_sdpa/qjl", "vq_fused_sdpa", b_sd_qjl, c_sd_qjl),
    ROW("vq_fused_sdpa/pq", "vq_fused_sdpa", b_sd_vecinfer, c_sd_vecinfer),
    ROW("vq_fused_sdpa/commvq", "vq_fused_sdpa", b_sd_commvq, c_sd_commvq),
    ROW("vq_fused_sdpa/values affine+lse", "vq_fused_sdpa", b_sv_kivi, c_sv_kivi),
    ROW("vq_fused_sdpa/values codebook", "vq_fused_sdpa", b_sv_codebook, c_sv_codebook),
    ROW("vq_fused_sdpa/values turbo", "vq_fused_sdpa", b_sv_turbo, c_sv_turbo),
    FN(vq_attention_merge, b_merge, c_merge),
    FN(vq_turboquant_fused_rvq_decode_attend, b_sd_rvq, c_rvq_attend),
    FN(vq_kivi_fused_attend, b_aff_attend, c_aff_attend),
    FN(vq_rabitq_fused_attend, b_rq_attend, c_rq_attend),
    FN(vq_rabitq_prefill_attend, b_rq_prefill, c_rq_prefill),
    ROW("vq_rabitq_fused_attend/int8 values", "vq_rabitq_fused_attend", b_rq_attend128, c_rq_attend_int8),
    ROW("vq_cache_append/kivi", "vq_cache_append", b_ca_append, c_ca_append),
    ROW("vq_cache_append/commvq", "vq_cache_append", b_ca_append, c_ca_append_cvq),
    ROW("vq_cache_append/kivi window8", "vq_cache_append", b_ca_append, c_ca_append_w8),
    ROW("vq_cache_append/kivi window3", "vq_cache_append", b_ca_append, c_ca_append_w3),
    FN(vq_cache_attend, b_ca_attend, c_ca_attend),
    ROW("vq_cache_attend/window8", "vq_cache_attend", b_ca_attend, c_ca_attend_w8),
    ROW("vq_cache_attend/window3", "vq_cache_attend", b_ca_attend, c_ca_attend_w3),
};

/* Applies one random mutation to `m` (a copy of the valid arguments) and
 * describes it in `what`. Never makes a call that is valid yet lies about
 * its buffers (a free dim made larger, a dtype made wider but accepted).
 * allow_larger is false for a second mutation: it may not grow a dim, nor
 * replace an input's data (the header may no longer be the valid one). */
static void fz_mutate(fz_args *m, vq_rng *rng, bool allow_larger, char *what, size_t cap)
{
    static const int64_t scalar_values[] = {-1, 0, 17, 99, (int64_t)1 << 30};
    const int i = (int)(vq_rng_next(rng) % (uint64_t)m->n);
    DLTensor *t = &m->t[i];
    const int kind = (int)(vq_rng_next(rng) % 11);
    const int d = t->ndim > 0 ? (int)(vq_rng_next(rng) % (uint64_t)t->ndim) : 0;
    switch (kind) {
    case 0:
        m->null[i] = true;
        snprintf(what, cap, "t%d NULL", i);
        return;
    case 1:
        if (t->ndim < FZ_MAXD && (vq_rng_next(rng) & 1)) {
            m->shape[i][t->ndim++] = 1;
        } else {
            t->ndim--;
        }
        snprintf(what, cap, "t%d ndim %d", i, t->ndim);
        return;
    case 2: {
        const bool free_dim = (m->free_dims[i] >> d) & 1;
        const int64_t values[] = {0, 1, -3, t->shape[d] * 2 + 1, (int64_t)1 << 40};
        const int v = (int)(vq_rng_next(rng) % (free_dim || !allow_larger ? 3 : 5));
        t->shape[d] = values[v];
        snprintf(what, cap, "t%d dim %d = %lld", i, d, (long long)values[v]);
        return;
    }
    case 3: {
        /* Same width, odd width, half width, 64 bits, lanes 2 or 0: never an
         * accepted wider dtype. */
        const int v = (int)(vq_rng_next(rng) % 6);
        if (v == 0) t->dtype.code = t->dtype.code == kDLFloat ? kDLInt : kDLFloat;
        if (v == 1) t->dtype.bits = 12;
        if (v == 2) t->dtype.bits = (uint8_t)(t->dtype.bits > 8 ? t->dtype.bits / 2 : 8);
        if (v == 3) t->dtype.bits = 64;
        if (v == 4) t->dtype.lanes = 2;
        if (v == 5) t->dtype.lanes = 0;
        snprintf(what, cap, "t%d dtype %d/%d/%d", i, t->dtype.code, t->dtype.bits, t->dtype.lanes);
        return;
    }
    case 4:
        t->device.device_type = kDLCUDA;
        snprintf(what, cap, "t%d on kDLCUDA", i);
        return;
    case 5: {
        /* Strides that stay inside the buffer (the attention entry points
         * take strided views, so a larger outer stride would be a valid call
         * that lies about its buffer): the last axis doubled (never
         * contiguous: refused everywhere), axis d's stride 0 (a broadcast:
         * valid for an input view, an overlapping output) or negative. */
        if (t->ndim == 0) break;
        int64_t s = 1;
        for (int k = t->ndim - 1; k >= 0; k--) { m->strides[i][k] = s; s *= t->shape[k]; }
        const int v = (int)(vq_rng_next(rng) % 3);
        if (v == 0) m->strides[i][t->ndim - 1] *= 2;
        if (v == 1) m->strides[i][d] = 0;
        if (v == 2) m->strides[i][d] = -m->strides[i][d];
        t->strides = m->strides[i];
        snprintf(what, cap, "t%d stride %s", i, v == 0 ? "last doubled" : v == 1 ? "d = 0" : "d negated");
        return;
    }
    case 6:
        t->data = NULL;
        snprintf(what, cap, "t%d data NULL", i);
        return;
    case 7: {
        /* A size shared by several tensors set to 0 or 1 in all of them: a
         * consistent empty or smaller call, never a larger one. */
        if (t->ndim == 0) break;
        const int64_t from = t->shape[d], to = (int64_t)(vq_rng_next(rng) & 1);
        for (int k = 0; k < m->n; k++)
            for (int e = 0; e < m->t[k].ndim; e++)
                if (m->shape[k][e] == from) m->shape[k][e] = to;
        snprintf(what, cap, "every dim %lld = %lld", (long long)from, (long long)to);
        return;
    }
    case 8: {
        /* An input's values replaced (first mutation only, so the header is
         * still the valid one): bytes 0xFF or 0x80 (index -1, 255, 65535,
         * huge), or floats NaN, +-inf, 3e38. */
        if (!allow_larger || ((m->outputs >> i) & 1)) break;
        static const double fills[] = {NAN, INFINITY, -INFINITY, 3e38};
        m->owned = malloc(m->bytes[i]);
        t->data = m->owned;
        const int v = (int)(vq_rng_next(rng) % 6);
        if (v < 2 || (t->dtype.code != kDLFloat && t->dtype.code != kDLBfloat)) {
            memset(t->data, v & 1 ? 0x80 : 0xFF, m->bytes[i]);
            snprintf(what, cap, "t%d bytes 0x%s", i, v & 1 ? "80" : "FF");
        } else {
            for (int64_t e = 0; e < vt_numel(t); e++) vt_set(t, e, fills[v - 2]);
            snprintf(what, cap, "t%d values %g", i, fills[v - 2]);
        }
        return;
    }
    case 9: {
        /* An input copied 1..3 bytes into its buffer, reached by byte_offset:
         * a misaligned view for wider dtypes (refused), valid for u8. */
        if (!allow_larger || ((m->outputs >> i) & 1)) break;
        const int off = 1 + (int)(vq_rng_next(rng) % 3);
        m->owned = malloc(m->bytes[i] + off);
        memcpy((char *)m->owned + off, t->data, m->bytes[i]);
        t->data = m->owned; t->byte_offset = off;
        snprintf(what, cap, "t%d byte_offset %d", i, off);
        return;
    }
    default:
        break;
    }
    {
        if (m->ns == 0) { m->null[i] = true; snprintf(what, cap, "t%d NULL", i); return; }
        const int k = (int)(vq_rng_next(rng) % (uint64_t)m->ns);
        const int v = (int)(vq_rng_next(rng) % ((m->iters_scalars >> k) & 1 ? 4 : 5));
        m->s[k] = scalar_values[v];
        snprintf(what, cap, "scalar %d = %lld", k, (long long)scalar_values[v]);
    }
}

/* One row: the valid call, then FZ_ITERS mutated calls. */
static void fz_run_case(vq_ctx *ctx, const fz_case *fc, vq_rng *rng)
{
    fz_args valid;
    memset(&valid, 0, sizeof valid);
    fc->build(&valid);
    VT_OK(ctx, fc->call(ctx, &valid));

    void *snap[FZ_MAXT] = {0};
    int failed = 0;
    for (int it = 0; it < FZ_ITERS; it++) {
        for (int i = 0; i < valid.n; i++) {
            if (!((valid.outputs >> i) & 1)) continue;
            free(snap[i]);
            snap[i] = vt_snapshot(&valid.t[i]);
        }
        fz_args m = valid;
        fz_rebase(&m);
        /* One call in four gets a second mutation (never a larger dim, which
         * could match the first and make a valid call over too small a buffer). */
        char what[200];
        fz_mutate(&m, rng, true, what, sizeof what);
        if (vq_rng_next(rng) % 4 == 0) {
            const size_t len = strlen(what);
            snprintf(what + len, sizeof what - len, ", ");
            fz_mutate(&m, rng, false, what + len + 2, sizeof what - len - 2);
        }
        const vq_status st = fc->call(ctx, &m);
        free(m.owned);
        if (st == VQ_OK) continue;
        failed++;
        const char *msg = vq_ctx_last_error(ctx);
        VT_CHECK(strncmp(msg, fc->fn, strlen(fc->fn)) == 0 && msg[strlen(fc->fn)] == ':',
                 "%s (%s): %s, message \"%s\"", fc->label, what, vq_status_string(st), msg);
        for (int i = 0; i < valid.n; i++) {
            if (!((valid.outputs >> i) & 1)) continue;
            VT_CHECK(vt_unchanged(&valid.t[i], snap[i]), "%s (%s): %s but output t%d written", fc->label,
                     what, vq_status_string(st), i);
        }
    }
    printf("  %-40s %d calls, %d rejected\n", fc->label, FZ_ITERS + 1, failed);
    for (int i = 0; i < FZ_MAXT; i++) free(snap[i]);
    fz_free(&valid);
}

static void fz_run_all(vq_ctx *ctx, const char *isa)
{
    printf(" isa %s\n", isa);
    vq_rng rng;
    vq_rng_seed(&rng, 20261130);
    for (size_t c = 0; c < sizeof fz_cases / sizeof fz_cases[0]; c++) fz_run_case(ctx, &fz_cases[c], &rng);
}

static void test_mutated_arguments(void) { vt_for_each_isa(2, fz_run_all); }

int main(void)
{
    VT_RUN(test_mutated_arguments);
    return vt_finish();
}
