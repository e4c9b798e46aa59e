/* test_attention_formats.c — vq_fused_sdpa over every compressed key format
 * (and vq_turboquant_fused_rvq_decode_attend) against a float64 reference.
 *
 * For each case the key cache is built with the library's public encoders;
 * the reference then decodes k_hat from the encoded tensors with plain loops
 * (the format's math written out, in double), and runs
 * softmax(scale q.k_hat^T + cnst + mask) v in double (attention_ref.h). The
 * library runs on every ISA with poisoned outputs. Each format's error paths
 * are checked for status, message and an untouched output. */
#include "attention_ref.h"
#include "harness.h"

/* ---- one test case ---- */

typedef struct fcase {
    int64_t B, Hq, Hkv, Sq, Skv, D;
    char qt, vt, ot;  /* 'f' f32, 'h' f16: queries, values, out */
    bool causal;
    int mask;         /* 0 none, 1 [1,1,Sq,Skv] f32, 2 [B,Hq,Sq,Skv] f16 */
    int splits;
    int k1, k2, k3;   /* format knobs (see each encoder) */
} fcase;

static DLDataType dt_of(char c) { return c == 'h' ? VT_F16 : VT_F32; }

/* An encoded cache: the keys struct, the tensors it owns, and what the
 * reference needs: k_hat [B,Hkv,Skv,D] and an additive per-token term (or
 * NULL), both decoded in double from the encoded tensors. */
typedef struct built {
    vq_encoded_keys ek;
    DLTensor *own[16];
    int n_own;
    double *khat, *cnst;
} built;

static DLTensor *own(built *bk, DLTensor *t)
{
    bk->own[bk->n_own++] = t;
    return t;
}

static void built_free(built *bk)
{
    for (int i = 0; i < bk->n_own; i++) vt_free(bk->own[i]);
    free(bk->khat);
    free(bk->cnst);
    memset(bk, 0, sizeof *bk);
}

/* keys [B,Hkv,Skv,D] f32 raw -> an encoded cache */
typedef void (*encoder_fn)(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk);

/* ---- plain-loop helpers of the reference ---- */

/* Element i of a u32 bit stream of `bits`-bit elements, bit by bit. */
static unsigned ref_stream_get(const DLTensor *words, int64_t row_words, int64_t row, int64_t i, int bits)
{
    const uint32_t *w = (const uint32_t *)words->data + row * row_words;
    unsigned v = 0;
    for (int b = 0; b < bits; b++) {
        const int64_t s = i * bits + b;
        v |= ((w[s / 32] >> (s % 32)) & 1u) << b;
    }
    return v;
}

/* y [D] -> rot^-1(y) = diag ⊙ (H_D y) / sqrt(D), in place (diag NULL = ones). */
static void ref_unrotate(const DLTensor *diag, int64_t D, double *y)
{
    for (int64_t h = 1; h < D; h *= 2)
        for (int64_t i = 0; i < D; i += 2 * h)
            for (int64_t j = i; j < i + h; j++) {
                const double a = y[j], b = y[j + h];
                y[j] = a + b;
                y[j + h] = a - b;
            }
    for (int64_t j = 0; j < D; j++) y[j] *= (diag ? vt_get(diag, j) : 1.0) / sqrt((double)D);
}

static DLTensor *random_diag(built *bk, int64_t D, uint64_t seed)
{
    DLTensor *d = own(bk, vt_new(VT_F32, VT_DIMS(D)));
    vq_random_signs(seed, D, d->data);
    return d;
}

/* ---- TurboQuant (VQ_KEYS_TURBO): k1 bits, k2 codes bit-packed (u32),
 * k3 bit 0 norm_correct scales, bit 1 the scales stored in f16 ---- */

/* One stage of Hadamard codes: idx u8 [.., D] and (packed) its u32 stream. */
static const DLTensor *maybe_pack(vq_ctx *ctx, built *bk, const DLTensor *idx, int bits, bool packed)
{
    if (!packed) return idx;
    const int64_t W = (idx->shape[3] * bits + 31) / 32;
    DLTensor *p = own(bk, vt_new(VT_U32, VT_DIMS(idx->shape[0], idx->shape[1], idx->shape[2], W)));
    VT_OK(ctx, vq_bit_pack(ctx, idx, bits, p));
    return p;
}

/* Adds scale[t] * c_bits[code(t, c)] to y [N, D], the codes read from the
 * format's own tensor (u8 or u32 stream). */
static void ref_add_stage(const DLTensor *idx, const DLTensor *scale, int bits, int64_t N, int64_t D, double *y)
{
    float cents[256];
    vq_lloyd_max_codebook(bits, cents, NULL);
    const bool packed = vq_dtype_of(idx) == VQ_DT_U32;
    for (int64_t t = 0; t < N; t++)
        for (int64_t c = 0; c < D; c++) {
            const unsigned code = packed ? ref_stream_get(idx, idx->shape[3], t, c, bits)
                                         : (unsigned)vt_get(idx, t * D + c) & ((1u << bits) - 1u);
            y[t * D + c] += vt_get(scale, t) * cents[code];
        }
}

static void ref_unrotate_all(const DLTensor *diag, int64_t N, int64_t D, double *y)
{
    for (int64_t t = 0; t < N; t++) ref_unrotate(diag, D, y + t * D);
}

static void encode_turbo(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    (void)rng;
    const int bits = c->k1;
    DLTensor *diag = random_diag(bk, c->D, 11);
    DLTensor *idx = own(bk, vt_new(VT_U8, VT_DIMS(c->B, c->Hkv, c->Skv, c->D)));
    DLTensor *scale = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
    const vq_turboquant_opts o = {.norm_correct = (c->k3 & 1) != 0};
    VT_OK(ctx, vq_turboquant_hadamard_quantize(ctx, keys, diag, bits, idx, scale, &o));
    if (c->k3 & 2) { /* f16 scales: the reference reads the rounded values */
        DLTensor *s16 = own(bk, vt_like(scale, VT_F16));
        for (int64_t i = 0; i < vt_numel(scale); i++) vt_set(s16, i, vt_get(scale, i));
        scale = s16;
    }
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO};
    bk->ek.turbo.idx = maybe_pack(ctx, bk, idx, bits, c->k2 != 0);
    bk->ek.turbo.scale = scale;
    bk->ek.turbo.diag = diag;
    bk->ek.turbo.bits = bits;
    const int64_t N = c->B * c->Hkv * c->Skv;
    bk->khat = calloc((size_t)(N * c->D), sizeof(double));
    ref_add_stage(bk->ek.turbo.idx, scale, bits, N, c->D, bk->khat);
    ref_unrotate_all(diag, N, c->D, bk->khat);
}

/* ---- TurboQuant RVQ (VQ_KEYS_TURBO_RVQ): k1 = b1, k2 = b2, k3 bit 0: stage 1
 * packed, bit 1: stage 2 packed, bit 2: diag NULL ---- */

static void encode_rvq(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    (void)rng;
    DLTensor *diag = c->k3 & 4 ? NULL : random_diag(bk, c->D, 12);
    DLTensor *idx1 = own(bk, vt_new(VT_U8, VT_DIMS(c->B, c->Hkv, c->Skv, c->D)));
    DLTensor *idx2 = own(bk, vt_new(VT_U8, VT_DIMS(c->B, c->Hkv, c->Skv, c->D)));
    DLTensor *s1 = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
    DLTensor *s2 = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
    VT_OK(ctx, vq_turboquant_rvq_encode(ctx, keys, diag, c->k1, c->k2, idx1, s1, idx2, s2));
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_TURBO_RVQ};
    bk->ek.rvq.idx1 = maybe_pack(ctx, bk, idx1, c->k1, c->k3 & 1);
    bk->ek.rvq.idx2 = maybe_pack(ctx, bk, idx2, c->k2, c->k3 & 2);
    bk->ek.rvq.scale1 = s1;
    bk->ek.rvq.scale2 = s2;
    bk->ek.rvq.diag = diag;
    bk->ek.rvq.b1 = c->k1;
    bk->ek.rvq.b2 = c->k2;
    const int64_t N = c->B * c->Hkv * c->Skv;
    bk->khat = calloc((size_t)(N * c->D), sizeof(double));
    ref_add_stage(bk->ek.rvq.idx1, s1, c->k1, N, c->D, bk->khat);
    ref_add_stage(bk->ek.rvq.idx2, s2, c->k2, N, c->D, bk->khat);
    ref_unrotate_all(diag, N, c->D, bk->khat);
}

/* ---- RaBitQ (VQ_KEYS_RABITQ): k1 magnitude (vq_rabitq_mag), k2 with cnst,
 * k3 diag NULL ---- */

static void encode_rabitq(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    DLTensor *diag = c->k3 ? NULL : random_diag(bk, c->D, 13);
    DLTensor *bits = own(bk, vt_new(VT_U8, VT_DIMS(c->B, c->Hkv, c->Skv, c->D / 8)));
    DLTensor *mag = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
    const vq_rabitq_encode_opts o = {.mag = (vq_rabitq_mag)c->k1};
    VT_OK(ctx, vq_rabitq_encode(ctx, keys, diag, bits, mag, &o));
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_RABITQ};
    bk->ek.rabitq.bits = bits;
    bk->ek.rabitq.mag = mag;
    bk->ek.rabitq.diag = diag;
    const int64_t N = c->B * c->Hkv * c->Skv, D = c->D;
    if (c->k2) {
        DLTensor *cn = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
        vt_fill_normal(cn, rng, 0.0, 0.5);
        bk->ek.rabitq.cnst = cn;
        bk->cnst = malloc(sizeof(double) * (size_t)N);
        for (int64_t t = 0; t < N; t++) bk->cnst[t] = vt_get(cn, t);
    }
    bk->khat = malloc(sizeof(double) * (size_t)(N * D));
    const uint8_t *b = bits->data;
    for (int64_t t = 0; t < N; t++)
        for (int64_t j = 0; j < D; j++)
            bk->khat[t * D + j] = vt_get(mag, t) * (((b[t * (D / 8) + j / 8] >> (j % 8)) & 1) ? 1.0 : -1.0);
    ref_unrotate_all(diag, N, D, bk->khat);
}

/* ---- KIVI affine (VQ_KEYS_KIVI): k1 bits, k2 codes bit-packed along D,
 * k3 group size (negative: f16 scale/zero) ---- */

static void encode_kivi(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    (void)rng;
    const int bits = c->k1;
    const int64_t g = c->k3 < 0 ? -c->k3 : c->k3, GK = (c->Skv + g - 1) / g, D = c->D;
    const int64_t cd = c->k2 ? D * bits / 8 : D;
    const DLDataType pt = c->k3 < 0 ? VT_F16 : VT_F32;
    DLTensor *codes = own(bk, vt_new(VT_U8, VT_DIMS(c->B, c->Hkv, c->Skv, cd)));
    DLTensor *sc = own(bk, vt_new(pt, VT_DIMS(c->B, c->Hkv, GK, D)));
    DLTensor *ze = own(bk, vt_new(pt, VT_DIMS(c->B, c->Hkv, GK, D)));
    VT_OK(ctx, vq_kivi_quantize_keys(ctx, keys, bits, (int)g, codes, sc, ze));
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_KIVI};
    bk->ek.kivi.codes = codes;
    bk->ek.kivi.scale = sc;
    bk->ek.kivi.zero = ze;
    bk->ek.kivi.bits = bits;
    bk->ek.kivi.group_size = (int)g;
    const int64_t BH = c->B * c->Hkv;
    bk->khat = malloc(sizeof(double) * (size_t)(BH * c->Skv * D));
    const uint8_t *cb = codes->data;
    for (int64_t bh = 0; bh < BH; bh++)
        for (int64_t t = 0; t < c->Skv; t++)
            for (int64_t ch = 0; ch < D; ch++) {
                const uint8_t *row = cb + (bh * c->Skv + t) * cd;
                const unsigned code = c->k2 ? (row[ch * bits / 8] >> (ch * bits % 8)) & ((1u << bits) - 1u) : row[ch];
                const int64_t pi = (bh * GK + t / g) * D + ch;
                bk->khat[(bh * c->Skv + t) * D + ch] = code * vt_get(sc, pi) + vt_get(ze, pi);
            }
}

/* ---- QJL (VQ_KEYS_QJL): k1 sketch size m ---- */

static void encode_qjl(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    (void)rng;
    const int64_t m = c->k1, W = (m + 31) / 32, D = c->D, N = c->B * c->Hkv * c->Skv;
    DLTensor *S = own(bk, vt_new(VT_F32, VT_DIMS(m, D)));
    vq_qjl_projection(77, m, D, S->data);
    DLTensor *bits = own(bk, vt_new(VT_U32, VT_DIMS(c->B, c->Hkv, c->Skv, W)));
    DLTensor *norm = own(bk, vt_new(VT_F32, VT_DIMS(c->B, c->Hkv, c->Skv)));
    VT_OK(ctx, vq_qjl_encode(ctx, keys, S, bits));
    for (int64_t t = 0; t < N; t++) {
        double ss = 0.0;
        for (int64_t ch = 0; ch < D; ch++) ss += vt_get(keys, t * D + ch) * vt_get(keys, t * D + ch);
        vt_set(norm, t, sqrt(ss));
    }
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_QJL};
    bk->ek.qjl.bits = bits;
    bk->ek.qjl.norm = norm;
    bk->ek.qjl.projection = S;
    /* k_hat = sqrt(pi/2)/m * ||k|| * S^T sign, so that q . k_hat is the estimator */
    bk->khat = calloc((size_t)(N * D), sizeof(double));
    const uint32_t *w = bits->data;
    for (int64_t t = 0; t < N; t++) {
        const double f = sqrt(acos(-1.0) / 2.0) / (double)m * vt_get(norm, t);
        for (int64_t j = 0; j < m; j++) {
            const double sg = (w[t * W + j / 32] >> (j % 32)) & 1u ? 1.0 : -1.0;
            for (int64_t ch = 0; ch < D; ch++) bk->khat[t * D + ch] += f * sg * vt_get(S, j * D + ch);
        }
    }
}

/* ---- VecInfer product VQ (VQ_KEYS_VECINFER): k1 subspaces M, k2 centroids C,
 * k3 bit 0: per-head codebooks, bit 1: per-head smooth, bit 2: u16 indices ---- */

static void encode_vecinfer(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    const int64_t M = c->k1, C = c->k2, D = c->D, dsub = D / M, Hkv = c->Hkv;
    DLTensor *cb = own(bk, c->k3 & 1 ? vt_new(VT_F32, VT_DIMS(Hkv, M, C, dsub)) : vt_new(VT_F32, VT_DIMS(M, C, dsub)));
    DLTensor *sm = own(bk, c->k3 & 2 ? vt_new(VT_F32, VT_DIMS(Hkv, D)) : vt_new(VT_F32, VT_DIMS(D)));
    vt_fill_normal(cb, rng, 0.0, 1.0);
    for (int64_t i = 0; i < vt_numel(sm); i++) vt_set(sm, i, 0.5 + 1.5 * vq_rng_uniform(rng));
    DLTensor *idx = own(bk, vt_new(c->k3 & 4 ? VT_U16 : VT_U8, VT_DIMS(c->B, Hkv, c->Skv, M)));
    VT_OK(ctx, vq_vecinfer_quantize(ctx, keys, cb, sm, (int)M, idx));
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_VECINFER};
    bk->ek.vecinfer.idx = idx;
    bk->ek.vecinfer.codebook = cb;
    bk->ek.vecinfer.smooth = sm;
    bk->khat = malloc(sizeof(double) * (size_t)(c->B * Hkv * c->Skv * D));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++)
            for (int64_t t = 0; t < c->Skv; t++) {
                const int64_t tok = (b * Hkv + hk) * c->Skv + t;
                for (int64_t m = 0; m < M; m++) {
                    const int64_t code = (int64_t)vt_get(idx, tok * M + m);
                    for (int64_t j = 0; j < dsub; j++) {
                        const int64_t ch = m * dsub + j;
                        const double cv = vt_get(cb, (((c->k3 & 1 ? hk * M : 0) + m) * C + code) * dsub + j);
                        bk->khat[tok * D + ch] = cv * vt_get(sm, (c->k3 & 2 ? hk * D : 0) + ch);
                    }
                }
            }
}

/* ---- CommVQ (VQ_KEYS_COMMVQ): k1 stages R, k2 centroids C, k3 bit 0:
 * interleaved RoPE, bit 1: positions [B,Skv], bit 2: per-token scale,
 * bit 3: u16 codes, bit 4: i32 codes ---- */

static void encode_commvq(vq_ctx *ctx, const DLTensor *keys, const fcase *c, vq_rng *rng, built *bk)
{
    const int64_t R = c->k1, C = c->k2, D = c->D, Hkv = c->Hkv, P = c->Skv + 9;
    DLTensor *cb = own(bk, vt_new(VT_F32, VT_DIMS(R, C, D)));
    vt_fill_normal(cb, rng, 0.0, 1.0);
    const DLDataType it = c->k3 & 8 ? VT_U16 : c->k3 & 16 ? VT_I32 : VT_U8;
    DLTensor *idx = own(bk, vt_new(it, VT_DIMS(c->B, Hkv, c->Skv, R)));
    VT_OK(ctx, vq_commvq_encode(ctx, keys, cb, idx));
    DLTensor *cs = own(bk, vt_new(VT_F32, VT_DIMS(P, D / 2))), *sn = own(bk, vt_new(VT_F32, VT_DIMS(P, D / 2)));
    for (int64_t p = 0; p < P; p++)
        for (int64_t i = 0; i < D / 2; i++) {
            const double th = (double)p * pow(10000.0, -2.0 * (double)i / (double)D);
            vt_set(cs, p * (D / 2) + i, cos(th));
            vt_set(sn, p * (D / 2) + i, sin(th));
        }
    DLTensor *pos = own(bk, c->k3 & 2 ? vt_new(VT_I32, VT_DIMS(c->B, c->Skv)) : vt_new(VT_I32, VT_DIMS(c->Skv)));
    vt_fill_uniform_int(pos, rng, 0, P - 1);
    DLTensor *ts = NULL;
    if (c->k3 & 4) {
        ts = own(bk, vt_new(VT_F32, VT_DIMS(c->B, Hkv, c->Skv)));
        for (int64_t t = 0; t < vt_numel(ts); t++) vt_set(ts, t, 0.25 + vq_rng_uniform(rng));
    }
    bk->ek = (vq_encoded_keys){.format = VQ_KEYS_COMMVQ};
    bk->ek.commvq.idx = idx;
    bk->ek.commvq.codebook = cb;
    bk->ek.commvq.cos_freqs = cs;
    bk->ek.commvq.sin_freqs = sn;
    bk->ek.commvq.positions = pos;
    bk->ek.commvq.scale = ts;
    bk->ek.commvq.rope = c->k3 & 1 ? VQ_ROPE_INTERLEAVED : VQ_ROPE_HALF;
    bk->khat = malloc(sizeof(double) * (size_t)(c->B * Hkv * c->Skv * D));
    double *k = malloc(sizeof(double) * (size_t)D);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++)
            for (int64_t t = 0; t < c->Skv; t++) {
                const int64_t tok = (b * Hkv + hk) * c->Skv + t;
                const double sc = ts ? vt_get(ts, tok) : 1.0;
                for (int64_t ch = 0; ch < D; ch++) {
                    double acc = 0.0;
                    for (int64_t r = 0; r < R; r++)
                        acc += vt_get(cb, (r * C + (int64_t)vt_get(idx, tok * R + r)) * D + ch);
                    k[ch] = sc * acc;
                }
                const int64_t p = (int64_t)vt_get(pos, (c->k3 & 2 ? b * c->Skv : 0) + t);
                double *out = bk->khat + tok * D;
                for (int64_t i = 0; i < D / 2; i++) {
                    const int64_t a = c->k3 & 1 ? 2 * i : i, e = c->k3 & 1 ? 2 * i + 1 : i + D / 2;
                    const double co = vt_get(cs, p * (D / 2) + i), si = vt_get(sn, p * (D / 2) + i);
                    out[a] = k[a] * co - k[e] * si;
                    out[e] = k[a] * si + k[e] * co;
                }
            }
    free(k);
}

/* ---- running a case ---- */

typedef struct prepared {
    const fcase *c;
    const char *fmt;
    const DLTensor *q, *v, *mask;
    built bk;
    double *ref;
    float scale;
    bool rvq_entry;
} prepared;

static const prepared *g_cur;

typedef struct score_arg {
    const DLTensor *q;
    const built *bk;
    ref_dims d;
    double scale;
} score_arg;

static double ref_score(const void *varg, int64_t b, int64_t h, int64_t i, int64_t t)
{
    const score_arg *a = varg;
    const int64_t D = a->d.D, hk = h / (a->d.Hq / a->d.Hkv), kt = (b * a->d.Hkv + hk) * a->d.Skv + t;
    double acc = 0.0;
    const int64_t qrow = ((b * a->d.Hq + h) * a->d.Sq + i) * D;
    for (int64_t c = 0; c < D; c++) acc += vt_get(a->q, qrow + c) * a->bk->khat[kt * D + c];
    return acc * a->scale + (a->bk->cnst ? a->bk->cnst[kt] : 0.0);
}

static void report(const char *isa, const char *what, const DLTensor *out)
{
    const prepared *p = g_cur;
    const fcase *c = p->c;
    const double err = vt_rel_l2(out, p->ref);
    VT_CHECK(err <= vt_tol(out),
             "%s %s %s: B%lld Hq%lld Hkv%lld Sq%lld Skv%lld D%lld q%c v%c o%c causal %d mask %d splits %d "
             "knobs %d %d %d: rel err %.3g",
             p->fmt, what, isa, (long long)c->B, (long long)c->Hq, (long long)c->Hkv, (long long)c->Sq,
             (long long)c->Skv, (long long)c->D, c->qt, c->vt, c->ot, c->causal, c->mask, c->splits, c->k1, c->k2,
             c->k3, err);
    VT_CHECK(vt_count_poisoned(out) == 0, "%s %s %s: %lld output elements unwritten", p->fmt, what, isa,
             (long long)vt_count_poisoned(out));
}

static void check_isa(vq_ctx *ctx, const char *isa)
{
    const prepared *p = g_cur;
    const fcase *c = p->c;
    DLTensor *out = vt_new(dt_of(c->ot), VT_DIMS(c->B, c->Hq, c->Sq, c->D));
    const vq_attend_opts opts = {.causal = c->causal, .num_splits = c->splits};
    VT_OK(ctx, vq_fused_sdpa(ctx, p->q, &p->bk.ek, VT_F16_VALUES(p->v), p->scale, p->mask, out, &opts));
    report(isa, "vq_fused_sdpa", out);
    if (p->rvq_entry && !p->mask) {
        vt_poison(out);
        VT_OK(ctx, vq_turboquant_fused_rvq_decode_attend(ctx, p->q, &p->bk.ek, p->v, p->scale, out, &opts));
        report(isa, "rvq_decode_attend", out);
    }
    vt_free(out);
}

static void run_case(const char *fmt, encoder_fn enc, const fcase *c, uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    vq_ctx *ctx = vt_ctx(2);
    const ref_dims d = {c->B, c->Hq, c->Hkv, c->Sq, c->Skv, c->D};
    DLTensor *q = vt_new(dt_of(c->qt), VT_DIMS(d.B, d.Hq, d.Sq, d.D));
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    DLTensor *v = vt_new(dt_of(c->vt), VT_DIMS(d.B, d.Hkv, d.Skv, d.D));
    vt_fill_normal(q, &rng, 0.0, 1.0);
    vt_fill_keys(keys, &rng, 2, 4.0);
    vt_fill_normal(v, &rng, 0.0, 1.0);
    DLTensor *mask = NULL;
    int64_t msb = 0, msh = 0;
    if (c->mask == 1) mask = vt_new(VT_F32, VT_DIMS(1, 1, d.Sq, d.Skv));
    if (c->mask == 2) {
        mask = vt_new(VT_F16, VT_DIMS(d.B, d.Hq, d.Sq, d.Skv));
        msh = d.Sq * d.Skv;
        msb = d.Hq * msh;
    }
    double *mref = NULL;
    if (mask) {
        vt_fill_normal(mask, &rng, 0.0, 2.0);
        mref = malloc(sizeof(double) * (size_t)vt_numel(mask));
        for (int64_t x = 0; x < vt_numel(mask); x++) {
            if (x % 5 == 3) vt_set(mask, x, -INFINITY); /* fully masked tokens too */
            mref[x] = vt_get(mask, x);
        }
    }
    prepared p = {.c = c, .fmt = fmt, .q = q, .v = v, .mask = mask,
                  .scale = (float)(1.0 / sqrt((double)d.D)), .rvq_entry = enc == encode_rvq};
    enc(ctx, keys, c, &rng, &p.bk);
    const int64_t nv = vt_numel(v);
    double *vh = malloc(sizeof(double) * (size_t)nv);
    for (int64_t x = 0; x < nv; x++) vh[x] = vt_get(v, x);
    p.ref = malloc(sizeof(double) * (size_t)(d.B * d.Hq * d.Sq * d.D));
    const score_arg arg = {q, &p.bk, d, (double)p.scale};
    ref_attention(&d, ref_score, &arg, vh, mref, msb, msh, c->causal, p.ref);
    g_cur = &p;
    vt_for_each_isa(2, check_isa);
    g_cur = NULL;
    built_free(&p.bk);
    free(p.ref);
    free(vh);
    free(mref);
    vt_free(q);
    vt_free(keys);
    vt_free(v);
    vt_free(mask);
    vq_ctx_free(ctx);
}

static void run_cases(const char *fmt, encoder_fn enc, const fcase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) run_case(fmt, enc, &cases[i], 1000 + i);
}

/* ---- the case tables ----
 * Shapes are spread over the cases rather than crossed: Skv 1, 7, 97, 4097;
 * GQA 1, 3, 4, 8; D 64, 96 (non-Hadamard formats), 128, 256; Sq 1, 4, 33;
 * causal and masks on and off; f16/f32 queries, values and outputs. */

static void test_turbo(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split bits packed nc */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 4, 1, 0},
        {1, 3, 1, 4, 7, 128, 'h', 'h', 'f', true, 1, 0, 3, 1, 0},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 2, 1, 1},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 8, 0, 0},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 1, 1, 0},
        {1, 2, 2, 33, 33, 8, 'f', 'f', 'f', false, 0, 0, 5, 1, 1},
        {1, 6, 2, 1, 200, 256, 'h', 'f', 'f', false, 2, 0, 7, 1, 0},
        {1, 4, 1, 4, 97, 128, 'f', 'f', 'f', true, 0, 0, 4, 0, 1},
        {1, 4, 2, 4, 70, 64, 'f', 'f', 'f', false, 1, 0, 8, 1, 0},
        {1, 4, 2, 1, 150, 64, 'f', 'f', 'f', false, 0, 0, 5, 1, 2},
        {2, 6, 3, 3, 77, 128, 'h', 'f', 'f', true, 0, 2, 8, 0, 3},
    };
    run_cases("turbo", encode_turbo, cases, sizeof cases / sizeof cases[0]);
}

static void test_rvq(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split b1 b2 packed/diag */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 4, 2, 0},
        {1, 3, 1, 4, 7, 128, 'h', 'f', 'f', true, 0, 0, 3, 3, 3},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 0, 2, 4, 3},
        {1, 4, 2, 4, 50, 128, 'f', 'f', 'f', false, 0, 0, 4, 4, 1},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 1, 8, 2},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', false, 1, 3, 8, 1, 4 | 3},
        {2, 4, 4, 1, 50, 256, 'h', 'h', 'f', false, 0, 0, 5, 3, 4},
    };
    run_cases("rvq", encode_rvq, cases, sizeof cases / sizeof cases[0]);
}

static void test_rabitq(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split mag cnst nodiag */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 0, 0, 0},
        {1, 3, 1, 4, 7, 128, 'h', 'h', 'f', true, 1, 0, 1, 1, 0},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 0, 1, 1},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 1, 0, 0},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 1, 1, 1},
        {1, 2, 2, 33, 33, 8, 'f', 'f', 'f', false, 0, 0, 0, 1, 0},
    };
    run_cases("rabitq", encode_rabitq, cases, sizeof cases / sizeof cases[0]);
}

static void test_kivi(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split bits packed g */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 4, 1, 32},
        {1, 3, 1, 4, 7, 96, 'h', 'h', 'f', true, 1, 0, 2, 1, -7},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 3, 0, 16},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 8, 0, -64},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 2, 0, 128},
        {1, 6, 2, 33, 40, 96, 'f', 'f', 'f', false, 0, 0, 4, 0, 1},
        {2, 4, 4, 1, 70, 128, 'h', 'f', 'h', false, 2, 0, 8, 1, 32},
    };
    run_cases("affine", encode_kivi, cases, sizeof cases / sizeof cases[0]);
}

static void test_qjl(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split m */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 64, 0, 0},
        {1, 3, 1, 4, 7, 96, 'h', 'h', 'f', true, 1, 0, 100, 0, 0},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 256, 0, 0},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 128, 0, 0},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 33, 0, 0},
        {1, 6, 2, 1, 40, 128, 'f', 'f', 'h', false, 0, 0, 1, 0, 0},
        {2, 4, 4, 4, 60, 96, 'h', 'f', 'f', false, 2, 0, 512, 0, 0},
    };
    run_cases("qjl", encode_qjl, cases, sizeof cases / sizeof cases[0]);
}

static void test_vecinfer(void)
{
    /* C <= Skv scores through per-row tables (dsub % 8 == 0 via kern->qk, or
     * plain loops), C > Skv decodes tokens into the tile: both are here */
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split M  C  heads/u16 */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 8, 16, 0},
        {1, 3, 1, 4, 7, 96, 'h', 'h', 'f', true, 1, 0, 12, 4, 1 | 4},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 32, 64, 3},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 16, 256, 0},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 64, 300, 4 | 2},
        {1, 6, 2, 33, 40, 96, 'f', 'f', 'f', false, 0, 0, 3, 32, 1},
        {2, 4, 4, 1, 600, 128, 'h', 'f', 'h', false, 2, 0, 8, 512, 7},
    };
    run_cases("pq", encode_vecinfer, cases, sizeof cases / sizeof cases[0]);
}

static void test_commvq(void)
{
    static const fcase cases[] = {
        /* B Hq Hkv Sq Skv  D    q    v    o  causal mask split R  C  flags */
        {1, 1, 1, 1, 1, 64, 'f', 'f', 'f', false, 0, 0, 1, 16, 0},
        {1, 3, 1, 4, 7, 96, 'h', 'h', 'f', true, 1, 0, 2, 8, 1 | 4},
        {2, 8, 2, 33, 97, 64, 'f', 'h', 'h', true, 2, 3, 4, 32, 2 | 8},
        {1, 8, 1, 1, 4097, 128, 'f', 'f', 'f', false, 0, 0, 2, 256, 1 | 2 | 4},
        {1, 4, 1, 4, 97, 256, 'f', 'f', 'f', true, 1, 2, 3, 300, 16 | 4},
        {2, 6, 2, 33, 40, 96, 'f', 'f', 'f', false, 0, 0, 1, 64, 2 | 1},
        {2, 4, 4, 1, 60, 128, 'h', 'f', 'h', false, 2, 0, 2, 16, 16 | 2},
    };
    run_cases("commvq", encode_commvq, cases, sizeof cases / sizeof cases[0]);
}

/* ---- error paths ---- */

/* A small valid problem (B 1, Hq 4, Hkv 2, Sq 2, Skv 10, D) and its output. */
typedef struct small {
    DLTensor *q, *v, *out;
    void *snap;
} small;

static small small_new(int64_t D)
{
    small s = {vt_new(VT_F32, VT_DIMS(1, 4, 2, D)), vt_new(VT_F32, VT_DIMS(1, 2, 10, D)),
               vt_new(VT_F32, VT_DIMS(1, 4, 2, D)), NULL};
    vq_rng rng;
    vq_rng_seed(&rng, 5);
    vt_fill_normal(s.q, &rng, 0, 1);
    vt_fill_normal(s.v, &rng, 0, 1);
    s.snap = vt_snapshot(s.out);
    return s;
}

static void small_free(small *s)
{
    VT_CHECK(vt_unchanged(s->out, s->snap), "a failing call wrote to out");
    free(s->snap);
    vt_free(s->q);
    vt_free(s->v);
    vt_free(s->out);
}

#define SDPA_FAILS(ctx, s, ek, status, needle) \
    VT_FAILS(ctx, status, needle, vq_fused_sdpa(ctx, (s).q, &(ek), VT_F16_VALUES((s).v), 0.125f, NULL, (s).out, NULL))

static void test_turbo_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    small s = small_new(64);
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, 2, 10, 64)), *sc = vt_new(VT_F32, VT_DIMS(1, 2, 10));
    DLTensor *idx_bad = vt_new(VT_U8, VT_DIMS(1, 2, 9, 64)), *idx_i32 = vt_new(VT_I32, VT_DIMS(1, 2, 10, 64));
    DLTensor *words_bad = vt_new(VT_U32, VT_DIMS(1, 2, 10, 8)); /* 4 bits need 8 words: fine for bits 4 */
    DLTensor *sc_f16 = vt_new(VT_F16, VT_DIMS(1, 2, 10)), *diag_bad = vt_new(VT_F32, VT_DIMS(32));
    DLTensor *sc_bf16 = vt_new(VT_BF16, VT_DIMS(1, 2, 10));
    memset(idx->data, 0x35, vt_bytes(idx));
    for (int64_t t = 0; t < vt_numel(sc); t++) vt_set(sc, t, 1.0);
    vq_encoded_keys ek = {.format = VQ_KEYS_TURBO};
    ek.turbo.idx = idx;
    ek.turbo.scale = sc;
    ek.turbo.bits = 0;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.bits must be in 1..8, got 0");
    ek.turbo.bits = 9;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.bits must be in 1..8, got 9");
    ek.turbo.bits = 3; /* 64 * 3 bits = 6 words, not 8 */
    ek.turbo.idx = words_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.idx");
    ek.turbo.bits = 4;
    ek.turbo.idx = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.idx");
    ek.turbo.idx = idx_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.idx");
    ek.turbo.idx = idx_i32;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "dtype");
    ek.turbo.idx = idx;
    ek.turbo.scale = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.scale");
    ek.turbo.scale = sc_bf16; /* f32, or f16 on the CPU */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.scale");
    ek.turbo.scale = sc;
    ek.turbo.diag = diag_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.turbo.diag");
    ek.turbo.diag = NULL;
    VT_OK(ctx, vq_fused_sdpa(ctx, s.q, &ek, VT_F16_VALUES(s.v), 0.125f, NULL, s.out, NULL)); /* the valid baseline */
    vt_poison(s.out);
    free(s.snap);
    s.snap = vt_snapshot(s.out);

    /* D = 96 is no power of two */
    small s96 = small_new(96);
    DLTensor *idx96 = vt_new(VT_U8, VT_DIMS(1, 2, 10, 96));
    vq_encoded_keys e96 = ek;
    e96.turbo.idx = idx96;
    SDPA_FAILS(ctx, s96, e96, VQ_ERR_INVALID_ARGUMENT, "power of two");
    small_free(&s96);
    vt_free(idx96);

    /* the RVQ entry point: only VQ_KEYS_TURBO_RVQ, and its stage checks */
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "VQ_KEYS_TURBO_RVQ",
             vq_turboquant_fused_rvq_decode_attend(ctx, s.q, &ek, s.v, 0.125f, s.out, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys'",
             vq_turboquant_fused_rvq_decode_attend(ctx, s.q, NULL, s.v, 0.125f, s.out, NULL));
    vq_encoded_keys er = {.format = VQ_KEYS_TURBO_RVQ};
    er.rvq.idx1 = idx;
    er.rvq.scale1 = sc;
    er.rvq.idx2 = idx;
    er.rvq.scale2 = sc;
    er.rvq.b1 = 4;
    er.rvq.b2 = 9;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "keys.rvq.b2 must be in 1..8",
             vq_turboquant_fused_rvq_decode_attend(ctx, s.q, &er, s.v, 0.125f, s.out, NULL));
    er.rvq.b2 = 2;
    er.rvq.scale2 = NULL;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "keys.rvq.scale2",
             vq_turboquant_fused_rvq_decode_attend(ctx, s.q, &er, s.v, 0.125f, s.out, NULL));
    er.rvq.scale2 = sc;
    er.rvq.idx1 = idx_bad;
    SDPA_FAILS(ctx, s, er, VQ_ERR_INVALID_ARGUMENT, "keys.rvq.idx1");
    er.rvq.idx1 = idx;
    er.rvq.b1 = 0;
    SDPA_FAILS(ctx, s, er, VQ_ERR_INVALID_ARGUMENT, "keys.rvq.b1");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "vq_turboquant_fused_rvq_decode_attend",
             vq_turboquant_fused_rvq_decode_attend(ctx, s.q, &er, s.v, 0.125f, s.out, NULL));
    VT_CHECK(vq_turboquant_fused_rvq_decode_attend(NULL, s.q, &er, s.v, 0.125f, s.out, NULL) ==
                 VQ_ERR_INVALID_ARGUMENT, "NULL ctx");

    /* RaBitQ */
    DLTensor *bits = vt_new(VT_U8, VT_DIMS(1, 2, 10, 8)), *bits_bad = vt_new(VT_U8, VT_DIMS(1, 2, 10, 64));
    vq_encoded_keys eb = {.format = VQ_KEYS_RABITQ};
    eb.rabitq.bits = bits;
    eb.rabitq.mag = NULL;
    SDPA_FAILS(ctx, s, eb, VQ_ERR_INVALID_ARGUMENT, "keys.rabitq.mag");
    eb.rabitq.mag = sc_f16;
    SDPA_FAILS(ctx, s, eb, VQ_ERR_INVALID_ARGUMENT, "keys.rabitq.mag");
    eb.rabitq.mag = sc;
    eb.rabitq.bits = bits_bad;
    SDPA_FAILS(ctx, s, eb, VQ_ERR_INVALID_ARGUMENT, "keys.rabitq.bits");
    eb.rabitq.bits = bits;
    eb.rabitq.cnst = idx_bad;
    SDPA_FAILS(ctx, s, eb, VQ_ERR_INVALID_ARGUMENT, "keys.rabitq.cnst");
    eb.rabitq.cnst = NULL;
    eb.rabitq.diag = diag_bad;
    SDPA_FAILS(ctx, s, eb, VQ_ERR_INVALID_ARGUMENT, "keys.rabitq.diag");

    small_free(&s);
    DLTensor *all[] = {idx, sc, idx_bad, idx_i32, words_bad, sc_f16, sc_bf16, diag_bad, bits, bits_bad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

static void test_kivi_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    small s = small_new(64);
    DLTensor *codes = vt_new(VT_U8, VT_DIMS(1, 2, 10, 64)), *packed3 = vt_new(VT_U8, VT_DIMS(1, 2, 10, 24));
    DLTensor *sc = vt_new(VT_F32, VT_DIMS(1, 2, 3, 64)), *sc_bad = vt_new(VT_F32, VT_DIMS(1, 2, 2, 64));
    DLTensor *ze16 = vt_new(VT_F16, VT_DIMS(1, 2, 3, 64)), *codes16 = vt_new(VT_U16, VT_DIMS(1, 2, 10, 64));
    vq_encoded_keys ek = {.format = VQ_KEYS_KIVI};
    ek.kivi.codes = codes;
    ek.kivi.scale = sc;
    ek.kivi.zero = sc;
    ek.kivi.bits = 9;
    ek.kivi.group_size = 4;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.bits must be in 1..8, got 9");
    ek.kivi.bits = 0;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.bits must be in 1..8, got 0");
    ek.kivi.bits = 3;
    ek.kivi.group_size = 0;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.group_size");
    ek.kivi.group_size = 4;
    ek.kivi.codes = packed3; /* 3-bit codes cannot be packed */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.codes");
    ek.kivi.codes = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.codes");
    ek.kivi.codes = codes16;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "dtype");
    ek.kivi.codes = codes;
    ek.kivi.scale = sc_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.scale");
    ek.kivi.scale = sc;
    ek.kivi.zero = ze16;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.zero");
    ek.kivi.zero = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.kivi.zero");
    small_free(&s);
    DLTensor *all[] = {codes, packed3, sc, sc_bad, ze16, codes16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

static void test_qjl_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    small s = small_new(64);
    DLTensor *S = vt_new(VT_F32, VT_DIMS(40, 64)), *S_bad = vt_new(VT_F32, VT_DIMS(40, 32));
    DLTensor *bits = vt_new(VT_U32, VT_DIMS(1, 2, 10, 2)), *bits_bad = vt_new(VT_U32, VT_DIMS(1, 2, 10, 1));
    DLTensor *bits_u8 = vt_new(VT_U8, VT_DIMS(1, 2, 10, 2)), *norm = vt_new(VT_F32, VT_DIMS(1, 2, 10));
    DLTensor *norm_bad = vt_new(VT_F32, VT_DIMS(1, 2, 11)), *S16 = vt_new(VT_F16, VT_DIMS(40, 64));
    vq_encoded_keys ek = {.format = VQ_KEYS_QJL};
    ek.qjl.bits = bits;
    ek.qjl.norm = norm;
    ek.qjl.projection = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.projection");
    ek.qjl.projection = S_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.projection");
    ek.qjl.projection = S16;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "dtype");
    ek.qjl.projection = S;
    ek.qjl.bits = bits_bad; /* m = 40 needs 2 words */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.bits");
    ek.qjl.bits = bits_u8;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.bits");
    ek.qjl.bits = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.bits");
    ek.qjl.bits = bits;
    ek.qjl.norm = norm_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.norm");
    ek.qjl.norm = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.qjl.norm");
    small_free(&s);
    DLTensor *all[] = {S, S_bad, bits, bits_bad, bits_u8, norm, norm_bad, S16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

static void test_vecinfer_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    small s = small_new(64);
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, 2, 10, 8)), *idx7 = vt_new(VT_U8, VT_DIMS(1, 2, 10, 7));
    DLTensor *idx32 = vt_new(VT_I32, VT_DIMS(1, 2, 10, 8)), *cb = vt_new(VT_F32, VT_DIMS(8, 16, 8));
    DLTensor *cb_bad = vt_new(VT_F32, VT_DIMS(8, 16, 4)), *cb_heads = vt_new(VT_F32, VT_DIMS(3, 8, 16, 8));
    DLTensor *sm = vt_new(VT_F32, VT_DIMS(64)), *sm_heads = vt_new(VT_F32, VT_DIMS(3, 64));
    vq_encoded_keys ek = {.format = VQ_KEYS_VECINFER};
    ek.vecinfer.idx = NULL;
    ek.vecinfer.codebook = cb;
    ek.vecinfer.smooth = sm;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.idx");
    ek.vecinfer.idx = idx32;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "dtype");
    ek.vecinfer.idx = idx7;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "do not divide");
    ek.vecinfer.idx = idx;
    ek.vecinfer.codebook = cb_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.codebook");
    ek.vecinfer.codebook = cb_heads; /* 3 heads, the cache has 2 */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.codebook");
    ek.vecinfer.codebook = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.codebook");
    ek.vecinfer.codebook = cb;
    ek.vecinfer.smooth = sm_heads;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.smooth");
    ek.vecinfer.smooth = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.vecinfer.smooth");
    small_free(&s);
    DLTensor *all[] = {idx, idx7, idx32, cb, cb_bad, cb_heads, sm, sm_heads};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

static void test_commvq_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    small s = small_new(64);
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(1, 2, 10, 2)), *idx_f = vt_new(VT_F32, VT_DIMS(1, 2, 10, 2));
    DLTensor *cb = vt_new(VT_F32, VT_DIMS(2, 16, 64)), *cb_bad = vt_new(VT_F32, VT_DIMS(3, 16, 64));
    DLTensor *cs = vt_new(VT_F32, VT_DIMS(20, 32)), *sn = vt_new(VT_F32, VT_DIMS(20, 32));
    DLTensor *sn_bad = vt_new(VT_F32, VT_DIMS(21, 32)), *cs_bad = vt_new(VT_F32, VT_DIMS(20, 64));
    DLTensor *pos = vt_new(VT_I32, VT_DIMS(10)), *pos_bad = vt_new(VT_I32, VT_DIMS(2, 10));
    DLTensor *ts_bad = vt_new(VT_F32, VT_DIMS(1, 2, 9));
    memset(idx->data, 0, vt_bytes(idx));
    for (int64_t t = 0; t < 10; t++) vt_set(pos, t, (double)t);
    vq_encoded_keys ek = {.format = VQ_KEYS_COMMVQ};
    ek.commvq.idx = idx;
    ek.commvq.codebook = cb;
    ek.commvq.cos_freqs = cs;
    ek.commvq.sin_freqs = sn;
    ek.commvq.positions = pos;
    ek.commvq.rope = (vq_rope_layout)2;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.rope");
    ek.commvq.rope = VQ_ROPE_HALF;
    ek.commvq.idx = idx_f;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "dtype");
    ek.commvq.idx = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.idx");
    ek.commvq.idx = idx;
    ek.commvq.codebook = cb_bad; /* R = 3, the codes have 2 stages */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.codebook");
    ek.commvq.codebook = cb;
    ek.commvq.cos_freqs = cs_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.cos_freqs");
    ek.commvq.cos_freqs = cs;
    ek.commvq.sin_freqs = sn_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.sin_freqs");
    ek.commvq.sin_freqs = NULL;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.sin_freqs");
    ek.commvq.sin_freqs = sn;
    ek.commvq.positions = pos_bad; /* [2, 10] for a batch of 1 */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.positions");
    ek.commvq.positions = pos;
    vt_set(pos, 7, 20.0); /* P = 20 */
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "element 7 is 20, outside [0, P = 20)");
    vt_set(pos, 7, -1.0);
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "element 7 is -1");
    vt_set(pos, 7, 7.0);
    ek.commvq.scale = ts_bad;
    SDPA_FAILS(ctx, s, ek, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.scale");
    small_free(&s);
    DLTensor *all[] = {idx, idx_f, cb, cb_bad, cs, sn, sn_bad, cs_bad, pos, pos_bad, ts_bad};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_turbo);
    VT_RUN(test_rvq);
    VT_RUN(test_rabitq);
    VT_RUN(test_kivi);
    VT_RUN(test_qjl);
    VT_RUN(test_vecinfer);
    VT_RUN(test_commvq);
    VT_RUN(test_turbo_errors);
    VT_RUN(test_kivi_errors);
    VT_RUN(test_qjl_errors);
    VT_RUN(test_vecinfer_errors);
    VT_RUN(test_commvq_errors);
    return vt_finish();
}
