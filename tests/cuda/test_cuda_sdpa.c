/* test_cuda_sdpa.c — vq_fused_sdpa (and vq_turboquant_fused_rvq_decode_attend)
 * on a CUDA ctx against the CPU vq_fused_sdpa on the same inputs (the CPU path
 * is itself tested against float64 references in test_attention_sdpa.c).
 * Every key format with its layout variants (packed/unpacked codes, code
 * widths, shared/per-head tables, index dtypes, RoPE layouts, optional
 * tensors), f16/f32 queries and outputs, GQA 1 and 4, Sq = 1 and > 1 with
 * causal (including rows that see no token), masks of every broadcast shape
 * with -inf entries and fully masked rows, awkward Skv (1, 31, 33, 1000+),
 * D in {64, 96, 128, 256}, explicit split counts. Outputs are poisoned (NaN)
 * before each run; fresh random data each run (seed printed).
 *
 * Tolerance. Both backends compute in f32 and differ only in the order of
 * additions (and FMA contraction) in the dots, the rotation/projection of the
 * query and the softmax sums. A dot of D terms summed in another order moves
 * by a few ulps times sqrt(D) (random-walk rounding) times sum_c |q_c k_c|,
 * and sum_c |q_c k_c| <= ||scale q|| ||k_hat|| (Cauchy-Schwarz), bounded per
 * case from how the inputs were built (kmag below). So a score moves by at
 * most delta = 16 eps sqrt(D) kmag max||scale q|| (+ a few eps of the mask
 * and RaBitQ constant). A softmax-weighted mean moves by at most
 * 2 delta max|v| when every score moves by <= delta; the output store adds
 * one rounding of the output dtype on each side. A wrong token, row, mask
 * element or code shifts outputs by O(0.1), far above this bound.
 *
 * VQ_TEST_QUICK=1 (compute-sanitizer) keeps the small cases only. */
#include "skip_without_cuda.h"
#ifdef VQ_TEST_HAVE_CUDA
#include <float.h>

#include "formats/lloyd_max.h"
#include "cuda/cuda_backend.h"
#include "cuda/sdpa_params.h"
#include "cuda_test_util.h"

static vq_rng rng;
static vq_ctx *ctx, *cpu;

/* ---- tensors of one case: host copy, device copy, freed together ---- */

#define MAX_T 24
typedef struct pool {
    DLTensor *h[MAX_T], *d[MAX_T];
    int n;
} pool;

static DLTensor *take(pool *pl, DLTensor *h)
{
    pl->h[pl->n] = h;
    pl->d[pl->n] = NULL;
    pl->n++;
    return h;
}

/* The device twin of a host tensor of the pool (uploaded once). */
static const DLTensor *dev(pool *pl, const DLTensor *h)
{
    if (!h) return NULL;
    for (int i = 0; i < pl->n; i++)
        if (pl->h[i] == h) {
            if (!pl->d[i]) pl->d[i] = ct_upload(h);
            return pl->d[i];
        }
    fprintf(stderr, "tensor not in pool\n");
    exit(1);
}

static void pool_free(pool *pl)
{
    for (int i = 0; i < pl->n; i++) {
        ct_free(pl->d[i]);
        vt_free(pl->h[i]);
    }
    pl->n = 0;
}

static double max_abs_of(const DLTensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < vt_numel(t); i++) m = fmax(m, fabs(vt_get(t, i)));
    return m;
}

static int64_t rnd(int64_t n) { return (int64_t)(vq_rng_next(&rng) % (uint64_t)n); }

/* ---- one case ---- */

typedef struct sdpa_case {
    int fmt, B, Hq, Hkv, Sq, Skv, D;
    bool f16_q, f16_out, causal;
    int mask;    /* 0 none, 1 [1,1,Sq,Skv] f32, 2 [B,Hq,..] f16, 3 [B,1,..] f32, 4 [1,Hq,..] f16 */
    int variant; /* picks the format's layout variant */
    int nsplit;
    bool rvq_entry; /* through vq_turboquant_fused_rvq_decode_attend */
    int vfmt;       /* vq_values_format; 0 = plain */
} sdpa_case;

static const char *vfmt_name[] = {"plain", "plain", "affine", "codebook", "turbo"};

/* indexed by vq_keys_format (VQ_KEYS_F16 = 1 .. VQ_KEYS_COMMVQ = 8) */
static const char *fmt_name[] = {"(none)", "F16", "TURBO", "TURBO_RVQ", "KIVI", "RABITQ", "QJL", "VECINFER", "COMMVQ"};
_Static_assert(sizeof fmt_name / sizeof fmt_name[0] == VQ_KEYS_COMMVQ + 1, "one name per key format");

/* A TurboQuant stage: codes u8 (any byte: the high bits must be masked) or a
 * packed u32 stream of random words. Returns the bound on |scale * cent|. */
static double turbo_stage(pool *pl, const sdpa_case *tc, int bits, bool packed, const DLTensor **idx,
                          const DLTensor **scale)
{
    const int B = tc->B, Hkv = tc->Hkv, Skv = tc->Skv, D = tc->D;
    DLTensor *i = take(pl, packed ? vt_new(VT_U32, VT_DIMS(B, Hkv, Skv, (D * bits + 31) / 32))
                                  : vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D)));
    if (packed)
        for (int64_t k = 0; k < vt_numel(i); k++) ((uint32_t *)i->data)[k] = (uint32_t)vq_rng_next(&rng);
    else
        vt_fill_uniform_int(i, &rng, 0, 255);
    DLTensor *s = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
    vt_fill_normal(s, &rng, 1.0, 0.2);
    *idx = i;
    *scale = s;
    const float *c = vq_lloyd_max_centroids(bits);
    double cm = 0;
    for (int k = 0; k < (1 << bits); k++) cm = fmax(cm, fabs(c[k]));
    return cm * max_abs_of(s);
}

static DLTensor *maybe_diag(pool *pl, const sdpa_case *tc)
{
    if (tc->variant % 2) return NULL;
    DLTensor *d = take(pl, vt_new(VT_F32, VT_DIMS(tc->D)));
    vt_fill_signs(d, &rng);
    return d;
}

/* Builds keys (host tensors in pl) and returns a bound on max ||k_hat||
 * (for QJL: on the score of a unit-scale query, see run_case). */
static double build_keys(pool *pl, const sdpa_case *tc, vq_encoded_keys *k)
{
    const int B = tc->B, Hkv = tc->Hkv, Skv = tc->Skv, D = tc->D, v = tc->variant;
    const double sD = sqrt((double)D);
    memset(k, 0, sizeof *k);
    k->format = (vq_keys_format)tc->fmt;
    switch (tc->fmt) {
    case VQ_KEYS_F16: {
        const DLDataType dts[3] = {VT_F32, VT_F16, VT_BF16};
        DLTensor *t = take(pl, vt_new(dts[v % 3], VT_DIMS(B, Hkv, Skv, D)));
        vt_fill_normal(t, &rng, 0, 1);
        k->f16.keys = t;
        return max_abs_of(t) * sD;
    }
    case VQ_KEYS_TURBO: {
        k->turbo.bits = 1 + v % 8;
        k->turbo.diag = maybe_diag(pl, tc);
        return turbo_stage(pl, tc, k->turbo.bits, v % 3 != 0, &k->turbo.idx, &k->turbo.scale) * sD;
    }
    case VQ_KEYS_TURBO_RVQ: {
        k->rvq.b1 = 1 + (v * 3) % 8;
        k->rvq.b2 = 1 + (v * 5 + 2) % 8;
        k->rvq.diag = maybe_diag(pl, tc);
        const double a = turbo_stage(pl, tc, k->rvq.b1, v % 2 == 0, &k->rvq.idx1, &k->rvq.scale1);
        const double b = turbo_stage(pl, tc, k->rvq.b2, v % 3 == 0, &k->rvq.idx2, &k->rvq.scale2);
        return (a + b) * sD;
    }
    case VQ_KEYS_KIVI: {
        /* variants: packed 2 / 4 bits, one code per byte with widths 1..8 */
        const bool packed = v % 3 != 2;
        const int bits = packed ? (v % 3 == 0 ? 2 : 4) : 1 + v % 8;
        const int g = (int[]){1, 3, 32, 128}[v % 4];
        k->kivi.bits = bits;
        k->kivi.group_size = g;
        DLTensor *c = take(pl, vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, packed ? D * bits / 8 : D)));
        vt_fill_uniform_int(c, &rng, 0, packed ? 255 : (1 << bits) - 1);
        const DLDataType sdt = v % 2 ? VT_F16 : VT_F32;
        const int64_t GK = (Skv + g - 1) / g;
        DLTensor *s = take(pl, vt_new(sdt, VT_DIMS(B, Hkv, GK, D))), *z = take(pl, vt_new(sdt, VT_DIMS(B, Hkv, GK, D)));
        vt_fill_normal(s, &rng, 0, 1.0 / (1 << bits));
        vt_fill_normal(z, &rng, 0, 0.5);
        k->kivi.codes = c;
        k->kivi.scale = s;
        k->kivi.zero = z;
        return ((1 << bits) - 1) * max_abs_of(s) * sD + max_abs_of(z) * sD;
    }
    case VQ_KEYS_RABITQ: {
        DLTensor *bits = take(pl, vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D / 8)));
        vt_fill_uniform_int(bits, &rng, 0, 255);
        DLTensor *mag = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
        vt_fill_normal(mag, &rng, 0.8, 0.1);
        k->rabitq.bits = bits;
        k->rabitq.mag = mag;
        k->rabitq.diag = maybe_diag(pl, tc);
        if (v % 3 != 1) {
            DLTensor *cn = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
            vt_fill_normal(cn, &rng, 0, 0.5);
            k->rabitq.cnst = cn;
        }
        return max_abs_of(mag) * sD;
    }
    case VQ_KEYS_QJL: {
        const int m = (int[]){64, 100, 256, 33}[v % 4];
        DLTensor *S = take(pl, vt_new(VT_F32, VT_DIMS(m, D)));
        vt_fill_normal(S, &rng, 0, 1);
        DLTensor *bits = take(pl, vt_new(VT_U32, VT_DIMS(B, Hkv, Skv, (m + 31) / 32)));
        for (int64_t i = 0; i < vt_numel(bits); i++) ((uint32_t *)bits->data)[i] = (uint32_t)vq_rng_next(&rng);
        DLTensor *nrm = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
        vt_fill_normal(nrm, &rng, sD, 0.1 * sD);
        k->qjl.projection = S;
        k->qjl.bits = bits;
        k->qjl.norm = nrm;
        /* |score| <= scale sqrt(pi/2)/m norm sum_j |(S q)_j| and |(S q)_j| <=
         * max|S| ||q||_1 <= max|S| sqrt(D) ||q||: the "key norm" is
         * norm sqrt(pi/2) max|S| sqrt(D) */
        return max_abs_of(nrm) * sqrt(acos(-1.0) / 2.0) * max_abs_of(S) * sD;
    }
    case VQ_KEYS_VECINFER: {
        const int M = (int[]){D / 8, D / 4, D / 16, D / 32 > 0 ? D / 32 : 1}[v % 4];
        const int C = (int[]){16, 256, 300, 7}[v % 4];
        const bool u16 = C > 256 || v % 5 == 4;
        DLTensor *idx = take(pl, u16 ? vt_new(VT_U16, VT_DIMS(B, Hkv, Skv, M)) : vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, M)));
        /* indices up to C + 2 where the dtype allows: both backends read C - 1 */
        vt_fill_uniform_int(idx, &rng, 0, u16 || C + 2 <= 255 ? C + 2 : 255);
        DLTensor *cb = take(pl, v % 2 ? vt_new(VT_F32, VT_DIMS(Hkv, M, C, D / M)) : vt_new(VT_F32, VT_DIMS(M, C, D / M)));
        vt_fill_normal(cb, &rng, 0, 1);
        DLTensor *sm = take(pl, v % 3 == 1 ? vt_new(VT_F32, VT_DIMS(Hkv, D)) : vt_new(VT_F32, VT_DIMS(D)));
        vt_fill_normal(sm, &rng, 1.0, 0.2);
        k->vecinfer.idx = idx;
        k->vecinfer.codebook = cb;
        k->vecinfer.smooth = sm;
        return max_abs_of(cb) * max_abs_of(sm) * sD;
    }
    default: { /* COMMVQ */
        const int R = 1 + v % 3, C = (int[]){16, 300, 5}[v % 3], P = Skv + 7;
        const DLDataType idt = (DLDataType[]){VT_U8, VT_U16, VT_I32}[v % 3];
        DLTensor *idx = take(pl, vt_new(idt, VT_DIMS(B, Hkv, Skv, R)));
        /* codes outside [0, C) where the dtype allows: both backends clamp */
        vt_fill_uniform_int(idx, &rng, idt.code == kDLInt ? -3 : 0, C + 2 <= 255 || idt.bits > 8 ? C + 2 : 255);
        DLTensor *cb = take(pl, vt_new(VT_F32, VT_DIMS(R, C, D)));
        vt_fill_normal(cb, &rng, 0, 1);
        DLTensor *cs = take(pl, vt_new(VT_F32, VT_DIMS(P, D / 2))), *sn = take(pl, vt_new(VT_F32, VT_DIMS(P, D / 2)));
        for (int64_t i = 0; i < (int64_t)P * (D / 2); i++) {
            const double a = 6.283185307179586 * (double)(vq_rng_next(&rng) >> 11) / 9007199254740992.0;
            vt_set(cs, i, cos(a));
            vt_set(sn, i, sin(a));
        }
        DLTensor *pos = take(pl, v % 2 ? vt_new(VT_I32, VT_DIMS(B, Skv)) : vt_new(VT_I32, VT_DIMS(Skv)));
        vt_fill_uniform_int(pos, &rng, 0, P - 1);
        DLTensor *ts = NULL;
        if (v % 4 != 3) {
            ts = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
            vt_fill_normal(ts, &rng, 1.0, 0.2);
        }
        k->commvq.idx = idx;
        k->commvq.codebook = cb;
        k->commvq.cos_freqs = cs;
        k->commvq.sin_freqs = sn;
        k->commvq.positions = pos;
        k->commvq.scale = ts;
        k->commvq.rope = v % 2 ? VQ_ROPE_INTERLEAVED : VQ_ROPE_HALF;
        return R * max_abs_of(cb) * (ts ? max_abs_of(ts) : 1.0) * sD * 1.001;
    }
    }
}

/* Builds the values of format tc->vfmt (host tensors in pl) and returns a
 * bound on max |v_hat| (for TurboQuant values: of the rotated-back values). */
static double build_values(pool *pl, const sdpa_case *tc, vq_encoded_values *ev)
{
    const int B = tc->B, Hkv = tc->Hkv, Skv = tc->Skv, D = tc->D, v = tc->variant;
    memset(ev, 0, sizeof *ev);
    switch (tc->vfmt) {
    case VQ_VALUES_KIVI: {
        /* packed 2 / 4 bits or one code per byte (8); groups of 1, 3, 32 or D channels */
        const int bits = (int[]){2, 4, 8}[v % 3], g = (int[]){1, 3, 32, D}[v % 4];
        DLTensor *c = take(pl, vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, D * bits / 8)));
        vt_fill_uniform_int(c, &rng, 0, 255);
        const DLDataType sdt = v % 2 ? VT_F16 : VT_F32;
        const int GV = (D + g - 1) / g;
        DLTensor *sc = take(pl, vt_new(sdt, VT_DIMS(B, Hkv, Skv, GV))), *z = take(pl, vt_new(sdt, VT_DIMS(B, Hkv, Skv, GV)));
        vt_fill_normal(sc, &rng, 0, 1.0 / (1 << bits));
        vt_fill_normal(z, &rng, 0, 0.5);
        ev->format = VQ_VALUES_KIVI;
        ev->kivi.codes = c;
        ev->kivi.scale = sc;
        ev->kivi.zero = z;
        ev->kivi.bits = bits;
        ev->kivi.group_size = g;
        return ((1 << bits) - 1) * max_abs_of(sc) + max_abs_of(z);
    }
    case VQ_VALUES_CODEBOOK: {
        const bool packed = v % 2 == 0;
        const int n = packed ? (int[]){16, 5}[v % 4 / 2] : (int[]){256, 40}[v % 4 / 2];
        DLTensor *idx = take(pl, vt_new(VT_U8, VT_DIMS(B, Hkv, Skv, packed ? D / 2 : D)));
        vt_fill_uniform_int(idx, &rng, 0, 255); /* indices >= n clamp to n - 1 on both backends */
        DLTensor *cents = take(pl, vt_new(VT_F32, VT_DIMS(n)));
        vt_fill_normal(cents, &rng, 0, 1);
        DLTensor *sc = NULL;
        if (v % 3 != 2) {
            sc = take(pl, vt_new(VT_F32, VT_DIMS(B, Hkv, Skv)));
            vt_fill_normal(sc, &rng, 1.0, 0.2);
        }
        ev->format = VQ_VALUES_CODEBOOK;
        ev->codebook.idx = idx;
        ev->codebook.cents = cents;
        ev->codebook.scale = sc;
        return max_abs_of(cents) * (sc ? max_abs_of(sc) : 1.0);
    }
    case VQ_VALUES_TURBO: {
        const int bits = 1 + (v * 3 + 1) % 8;
        ev->format = VQ_VALUES_TURBO;
        ev->turbo.bits = bits;
        ev->turbo.diag = maybe_diag(pl, tc);
        /* |rot^-1 y|_c <= sum_j |y_j| / sqrt(D) <= max|y| sqrt(D) */
        return turbo_stage(pl, tc, bits, v % 3 != 0, &ev->turbo.idx, &ev->turbo.scale) * sqrt((double)D);
    }
    default: {
        DLTensor *t = take(pl, vt_new(v % 2 ? VT_F16 : VT_F32, VT_DIMS(B, Hkv, Skv, D)));
        vt_fill_normal(t, &rng, 0, 1);
        *ev = vq_f16_values(t);
        return max_abs_of(t);
    }
    }
}

static vq_encoded_values device_values(pool *pl, const vq_encoded_values *h)
{
    vq_encoded_values d = *h;
    d.f16.values = dev(pl, h->f16.values);
    d.kivi.codes = dev(pl, h->kivi.codes), d.kivi.scale = dev(pl, h->kivi.scale);
    d.kivi.zero = dev(pl, h->kivi.zero);
    d.codebook.idx = dev(pl, h->codebook.idx), d.codebook.cents = dev(pl, h->codebook.cents);
    d.codebook.scale = dev(pl, h->codebook.scale);
    d.turbo.idx = dev(pl, h->turbo.idx), d.turbo.scale = dev(pl, h->turbo.scale), d.turbo.diag = dev(pl, h->turbo.diag);
    return d;
}

/* The same keys with every tensor replaced by its device twin. */
static vq_encoded_keys device_keys(pool *pl, const vq_encoded_keys *h)
{
    vq_encoded_keys d = *h;
    d.f16.keys = dev(pl, h->f16.keys);
    d.turbo.idx = dev(pl, h->turbo.idx), d.turbo.scale = dev(pl, h->turbo.scale), d.turbo.diag = dev(pl, h->turbo.diag);
    d.rvq.idx1 = dev(pl, h->rvq.idx1), d.rvq.scale1 = dev(pl, h->rvq.scale1);
    d.rvq.idx2 = dev(pl, h->rvq.idx2), d.rvq.scale2 = dev(pl, h->rvq.scale2), d.rvq.diag = dev(pl, h->rvq.diag);
    d.kivi.codes = dev(pl, h->kivi.codes), d.kivi.scale = dev(pl, h->kivi.scale);
    d.kivi.zero = dev(pl, h->kivi.zero);
    d.rabitq.bits = dev(pl, h->rabitq.bits), d.rabitq.mag = dev(pl, h->rabitq.mag);
    d.rabitq.cnst = dev(pl, h->rabitq.cnst), d.rabitq.diag = dev(pl, h->rabitq.diag);
    d.qjl.bits = dev(pl, h->qjl.bits), d.qjl.norm = dev(pl, h->qjl.norm), d.qjl.projection = dev(pl, h->qjl.projection);
    d.vecinfer.idx = dev(pl, h->vecinfer.idx), d.vecinfer.codebook = dev(pl, h->vecinfer.codebook), d.vecinfer.smooth = dev(pl, h->vecinfer.smooth);
    d.commvq.idx = dev(pl, h->commvq.idx), d.commvq.codebook = dev(pl, h->commvq.codebook);
    d.commvq.cos_freqs = dev(pl, h->commvq.cos_freqs), d.commvq.sin_freqs = dev(pl, h->commvq.sin_freqs);
    d.commvq.positions = dev(pl, h->commvq.positions), d.commvq.scale = dev(pl, h->commvq.scale);
    return d;
}

static DLTensor *build_mask(pool *pl, const sdpa_case *tc)
{
    const int B = tc->B, Hq = tc->Hq, Sq = tc->Sq, Skv = tc->Skv;
    DLTensor *m = NULL;
    switch (tc->mask) {
    case 0: return NULL;
    case 1: m = vt_new(VT_F32, VT_DIMS(1, 1, Sq, Skv)); break;
    case 2: m = vt_new(VT_F16, VT_DIMS(B, Hq, Sq, Skv)); break;
    case 3: m = vt_new(VT_F32, VT_DIMS(B, 1, Sq, Skv)); break;
    default: m = vt_new(VT_F16, VT_DIMS(1, Hq, Sq, Skv)); break;
    }
    take(pl, m);
    vt_fill_normal(m, &rng, 0, 1);
    for (int64_t i = 0; i < vt_numel(m); i++)
        if (rnd(10) == 0) vt_set(m, i, -INFINITY);
    /* the first query row of the first mask slice sees nothing */
    for (int t = 0; t < Skv; t++) vt_set(m, t, -INFINITY);
    return m;
}

static double mask_max(const DLTensor *m)
{
    double mx = 0;
    if (!m) return 0;
    for (int64_t i = 0; i < vt_numel(m); i++) {
        const double x = vt_get(m, i);
        if (isfinite(x)) mx = fmax(mx, fabs(x));
    }
    return mx;
}

/* VQ_TEST_QUICK=1 (compute-sanitizer) keeps the small cases only. */
static bool skip(const sdpa_case *tc)
{
    return getenv("VQ_TEST_QUICK") != NULL && (tc->Skv > 300 || tc->Sq > 40 || (int64_t)tc->B * tc->Hq > 8);
}

static void run_case(sdpa_case tc)
{
    if (skip(&tc)) return;
    const int B = tc.B, Hq = tc.Hq, Hkv = tc.Hkv, Sq = tc.Sq, Skv = tc.Skv, D = tc.D;
    pool pl = {0};
    DLTensor *q = take(&pl, vt_new(tc.f16_q ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D)));
    vt_fill_normal(q, &rng, 0, 1);
    vq_encoded_values hv;
    const double vmax = build_values(&pl, &tc, &hv);
    const DLTensor *v = hv.f16.values; /* plain values only (the rvq entry point) */
    vq_encoded_keys hk;
    const double kmag = build_keys(&pl, &tc, &hk);
    const DLTensor *mask = tc.rvq_entry ? NULL : build_mask(&pl, &tc);
    const float scale = (float)(1.0 / sqrt((double)D));
    /* every other case also asks for the rows' log-sum-exps (not the rvq entry point: no lse there) */
    const bool want_lse = !tc.rvq_entry && tc.variant % 2 == 0;
    DLTensor *lse_ref = want_lse ? take(&pl, vt_new(VT_F32, VT_DIMS(B, Hq, Sq))) : NULL;
    DLTensor *lse_got = want_lse ? take(&pl, vt_new(VT_F32, VT_DIMS(B, Hq, Sq))) : NULL;
    vq_attend_opts opts = {.causal = tc.causal, .num_splits = tc.nsplit, .lse_out = lse_ref};

    DLTensor *ref = take(&pl, vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D)));
    DLTensor *got = take(&pl, vt_new(tc.f16_out ? VT_F16 : VT_F32, VT_DIMS(B, Hq, Sq, D)));
    if (tc.rvq_entry) VT_OK(cpu, vq_turboquant_fused_rvq_decode_attend(cpu, q, &hk, v, scale, ref, &opts));
    else VT_OK(cpu, vq_fused_sdpa(cpu, q, &hk, &hv, scale, mask, ref, &opts));

    const vq_encoded_keys dk = device_keys(&pl, &hk);
    const vq_encoded_values dv = device_values(&pl, &hv);
    DLTensor *dout = (DLTensor *)dev(&pl, got);
    ct_poison(dout);
    DLTensor *dlse = want_lse ? (DLTensor *)dev(&pl, lse_got) : NULL;
    if (dlse) ct_poison(dlse);
    opts.lse_out = dlse;
    if (tc.rvq_entry)
        VT_OK(ctx, vq_turboquant_fused_rvq_decode_attend(ctx, dev(&pl, q), &dk, dev(&pl, v), scale, dout, &opts));
    else
        VT_OK(ctx, vq_fused_sdpa(ctx, dev(&pl, q), &dk, &dv, scale, dev(&pl, mask), dout, &opts));
    VT_OK(ctx, vq_ctx_synchronize(ctx));
    ct_download(dout, got);
    if (dlse) ct_download(dlse, lse_got);

    /* the bound of the header comment */
    double qn = 0;
    for (int64_t r = 0; r < (int64_t)B * Hq * Sq; r++) {
        double s = 0;
        for (int c = 0; c < D; c++) s += vt_get(q, r * D + c) * vt_get(q, r * D + c);
        qn = fmax(qn, sqrt(s));
    }
    const double eps = FLT_EPSILON;
    double smag = scale * qn * kmag + mask_max(mask);
    if (tc.fmt == VQ_KEYS_RABITQ && hk.rabitq.cnst) smag += max_abs_of(hk.rabitq.cnst);
    /* a QJL score sums m sign terms, not D */
    const double terms = tc.fmt == VQ_KEYS_QJL && vq_dim(hk.qjl.projection, 0) > D ? (double)vq_dim(hk.qjl.projection, 0) : D;
    const double delta = 16 * eps * sqrt(terms) * smag;
    const double out_ulp = tc.f16_out ? 1.0 / 1024 : 2 * eps;
    const double tol = 2 * delta * vmax + 2 * out_ulp * vmax;
    double maxerr = 0;
    int64_t bad_at = -1;
    for (int64_t i = 0; i < vt_numel(got); i++) {
        const double e = fabs(vt_get(got, i) - vt_get(ref, i));
        if (!(e <= maxerr)) {
            maxerr = isnan(e) ? INFINITY : e;
            bad_at = i;
        }
    }
    /* a row's log-sum-exp moves by at most the largest score move (delta), plus its own rounding */
    double lse_err = 0;
    bool lse_ok = true;
    for (int64_t i = 0; want_lse && i < vt_numel(lse_got); i++) {
        const double a = vt_get(lse_got, i), b = vt_get(lse_ref, i);
        if (isinf(b) || isinf(a)) lse_ok &= a == b;
        else lse_err = fmax(lse_err, fabs(a - b) / (delta + 4 * eps * (fabs(b) + 1)));
    }
    VT_CHECK(lse_ok && lse_err <= 1.0, "%s values %s v%d B%d Hq%d Sq%d Skv%d D%d: lse off (%.3g of its bound%s)",
             fmt_name[tc.fmt], vfmt_name[tc.vfmt], tc.variant, B, Hq, Sq, Skv, D, lse_err,
             lse_ok ? "" : "; an -inf row differs");
    VT_CHECK(ct_count_nan(got) == 0 && maxerr <= tol,
             "%s%s values %s v%d B%d Hq%d Hkv%d Sq%d Skv%d D%d q%s out%s%s mask%d ns%d: max err %.3g (at %lld) > tol %.3g, "
             "%lld unwritten",
             fmt_name[tc.fmt], tc.rvq_entry ? "(rvq entry)" : "", vfmt_name[tc.vfmt], tc.variant, B, Hq, Hkv, Sq, Skv, D,
             tc.f16_q ? "f16" : "f32", tc.f16_out ? "f16" : "f32", tc.causal ? " causal" : "", tc.mask, tc.nsplit,
             maxerr, (long long)bad_at, tol, (long long)ct_count_nan(got));
    pool_free(&pl);
}

/* Every format over the same grid of shapes; the layout variant cycles with
 * the case so that every variant of every format runs. */
static void test_formats(void)
{
    /* fmt filled in below; D 0 = the format's second size (96, or 64 where D
     * must be a power of two) */
    const sdpa_case shapes[] = {
        /* fmt B Hq Hkv Sq Skv D f16q f16o causal mask variant nsplit */
        {0, 1, 1, 1, 1, 1, 64, false, false, false, 0, 0, 0, false, 0},
        {0, 2, 8, 2, 1, 1029, 128, true, true, false, 1, 1, 0, false, 0},
        {0, 1, 4, 4, 5, 33, 0, false, false, true, 2, 2, 0, false, 0},
        {0, 2, 4, 1, 37, 31, 0, true, false, true, 3, 3, 0, false, 0},
        {0, 1, 8, 2, 200, 260, 128, false, true, true, 0, 4, 0, false, 0},
        {0, 1, 2, 1, 3, 100, 256, false, false, false, 4, 5, 0, false, 0},
        {0, 1, 4, 1, 4, 1000, 128, true, false, true, 1, 6, 3, false, 0},
        {0, 3, 4, 4, 1, 31, 64, false, true, false, 2, 7, 1, false, 0},
        {0, 1, 16, 4, 2, 2048, 128, false, false, true, 0, 8, 0, false, 0},
        {0, 1, 4, 1, 1, 33, 0, true, true, false, 3, 9, 0, false, 0},
        {0, 2, 2, 2, 9, 64, 64, false, false, true, 4, 10, 5, false, 0},
        {0, 1, 4, 1, 1, 5000, 128, false, false, false, 0, 11, 0, false, 0},
    };
    for (int fmt = VQ_KEYS_F16; fmt <= VQ_KEYS_COMMVQ; fmt++) {
        const bool pow2 = fmt == VQ_KEYS_TURBO || fmt == VQ_KEYS_TURBO_RVQ || fmt == VQ_KEYS_RABITQ;
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            sdpa_case tc = shapes[i];
            tc.fmt = fmt;
            if (tc.D == 0) tc.D = pow2 ? 64 : 96;
            run_case(tc);
        }
    }
}

/* Every key format with every encoded value format (affine, codebook,
 * turbo) over a few shapes; the layout variants of both cycle with the case. */
static void test_value_formats(void)
{
    const sdpa_case shapes[] = {
        /* fmt B Hq Hkv Sq Skv D f16q f16o causal mask variant nsplit rvq vfmt */
        {0, 1, 4, 1, 1, 97, 64, false, false, false, 0, 0, 0, false, 0},
        {0, 2, 8, 2, 3, 300, 128, true, true, true, 1, 1, 0, false, 0},
        {0, 1, 2, 2, 1, 33, 256, false, false, false, 3, 2, 2, false, 0},
        {0, 1, 8, 1, 1, 1500, 128, false, true, false, 0, 3, 0, false, 0},
    };
    int k = 0;
    for (int fmt = VQ_KEYS_F16; fmt <= VQ_KEYS_COMMVQ; fmt++)
        for (int vf = VQ_VALUES_KIVI; vf <= VQ_VALUES_TURBO; vf++)
            for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
                sdpa_case tc = shapes[i];
                tc.fmt = fmt;
                tc.vfmt = vf;
                tc.variant = k++ % 12;
                run_case(tc);
            }
}

/* vq_attention_merge on CUDA against the CPU's, on random halves with -inf
 * rows, f16/f32 mixes, out aliasing out_a and lse_out aliasing lse_a. */
static void test_merge(void)
{
    const int shapes[][4] = {{1, 1, 1, 8}, {2, 3, 5, 64}, {1, 8, 7, 256}, {3, 2, 1, 96}};
    for (int si = 0; si < 4; si++) {
        const int B = shapes[si][0], H = shapes[si][1], S = shapes[si][2], D = shapes[si][3];
        for (int alias = 0; alias < 2; alias++) {
            pool pl = {0};
            const bool fa = si % 2, fb = si % 3 == 0, fo = alias ? fa : (si + 1) % 2;
            DLTensor *a = take(&pl, vt_new(fa ? VT_F16 : VT_F32, VT_DIMS(B, H, S, D)));
            DLTensor *b = take(&pl, vt_new(fb ? VT_F16 : VT_F32, VT_DIMS(B, H, S, D)));
            DLTensor *la = take(&pl, vt_new(VT_F32, VT_DIMS(B, H, S))), *lb = take(&pl, vt_new(VT_F32, VT_DIMS(B, H, S)));
            vt_fill_normal(a, &rng, 0, 1);
            vt_fill_normal(b, &rng, 0, 1);
            vt_fill_normal(la, &rng, 0, 3);
            vt_fill_normal(lb, &rng, 0, 3);
            for (int64_t i = 0; i < vt_numel(la); i++) {
                if (rnd(5) == 0) vt_set(la, i, -INFINITY);
                if (rnd(5) == 0) vt_set(lb, i, -INFINITY);
            }
            vt_set(la, 0, -INFINITY); /* one row with neither side */
            vt_set(lb, 0, -INFINITY);
            DLTensor *o = take(&pl, vt_new(fo ? VT_F16 : VT_F32, VT_DIMS(B, H, S, D)));
            DLTensor *lo = take(&pl, vt_new(VT_F32, VT_DIMS(B, H, S)));
            DLTensor *og = take(&pl, vt_new(fo ? VT_F16 : VT_F32, VT_DIMS(B, H, S, D)));
            DLTensor *lg = take(&pl, vt_new(VT_F32, VT_DIMS(B, H, S)));
            VT_OK(cpu, vq_attention_merge(cpu, a, la, b, lb, o, lo));
            DLTensor *da = (DLTensor *)dev(&pl, a), *dla = (DLTensor *)dev(&pl, la);
            DLTensor *dout = alias ? da : (DLTensor *)dev(&pl, og), *dlse = alias ? dla : (DLTensor *)dev(&pl, lg);
            if (!alias) {
                ct_poison(dout);
                ct_poison(dlse);
            }
            VT_OK(ctx, vq_attention_merge(ctx, da, dla, dev(&pl, b), dev(&pl, lb), dout, dlse));
            VT_OK(ctx, vq_ctx_synchronize(ctx));
            ct_download(dout, og);
            ct_download(dlse, lg);
            double e = 0, el = 0;
            bool inf_ok = true;
            for (int64_t i = 0; i < vt_numel(o); i++) e = fmax(e, fabs(vt_get(o, i) - vt_get(og, i)));
            for (int64_t i = 0; i < vt_numel(lo); i++) {
                const double x = vt_get(lo, i), y = vt_get(lg, i);
                if (isinf(x) || isinf(y)) inf_ok &= x == y;
                else el = fmax(el, fabs(x - y) / (fabs(x) + 1));
            }
            /* both compute in f32 from the same inputs (expf/logf differ by an ulp or two) */
            const double tol = fo ? 2.0 / 1024 * 4 : 1e-5 * 4;
            VT_CHECK(ct_count_nan(og) == 0 && e <= tol && el <= 1e-5 && inf_ok,
                     "merge B%d H%d S%d D%d alias%d: out err %.3g (tol %.3g), lse rel err %.3g%s", B, H, S, D, alias, e,
                     tol, el, inf_ok ? "" : ", -inf rows differ");
            pool_free(&pl);
        }
    }
}

/* vq_turboquant_fused_rvq_decode_attend on CUDA (shares the sdpa path). */
static void test_rvq_entry(void)
{
    const sdpa_case cases[] = {
        {VQ_KEYS_TURBO_RVQ, 1, 8, 2, 1, 777, 128, false, false, false, 0, 0, 0, true, 0},
        {VQ_KEYS_TURBO_RVQ, 2, 4, 4, 6, 65, 64, true, true, true, 0, 3, 0, true, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(cases[i]);
}

/* CommVQ positions outside [0, P): the CPU refuses them, the CUDA backend
 * cannot read them before launching and clamps them to [0, P) (as the
 * header says); the result equals the CPU's with clamped positions. */
static void test_commvq_clamp(void)
{
    const sdpa_case tc = {VQ_KEYS_COMMVQ, 1, 4, 2, 2, 40, 64, false, false, true, 0, 0, 0, false, 0};
    pool pl = {0};
    DLTensor *q = take(&pl, vt_new(VT_F32, VT_DIMS(1, 4, 2, 64))), *v = take(&pl, vt_new(VT_F32, VT_DIMS(1, 2, 40, 64)));
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(v, &rng, 0, 1);
    vq_encoded_keys hk;
    build_keys(&pl, &tc, &hk);
    DLTensor *pos = (DLTensor *)hk.commvq.positions;
    const int64_t P = vq_dim(hk.commvq.cos_freqs, 0);
    vt_set(pos, 3, (double)(P + 5));
    vt_set(pos, 17, -4);
    const vq_encoded_keys dk = device_keys(&pl, &hk); /* uploads the out-of-range positions */
    const vq_attend_opts opts = {.causal = true};
    DLTensor *ref = take(&pl, vt_new(VT_F32, VT_DIMS(1, 4, 2, 64))), *got = take(&pl, vt_new(VT_F32, VT_DIMS(1, 4, 2, 64)));
    VT_FAILS(cpu, VQ_ERR_INVALID_ARGUMENT, "keys.commvq.positions", vq_fused_sdpa(cpu, q, &hk, VT_F16_VALUES(v), 0.125f, NULL, ref, &opts));
    DLTensor *dout = (DLTensor *)dev(&pl, got);
    ct_poison(dout);
    VT_OK(ctx, vq_fused_sdpa(ctx, dev(&pl, q), &dk, VT_F16_VALUES(dev(&pl, v)), 0.125f, NULL, dout, &opts));
    ct_download(dout, got);
    vt_set(pos, 3, (double)(P - 1));
    vt_set(pos, 17, 0);
    VT_OK(cpu, vq_fused_sdpa(cpu, q, &hk, VT_F16_VALUES(v), 0.125f, NULL, ref, &opts));
    double maxerr = 0;
    for (int64_t i = 0; i < vt_numel(got); i++) maxerr = fmax(maxerr, fabs(vt_get(got, i) - vt_get(ref, i)));
    VT_CHECK(ct_count_nan(got) == 0 && maxerr < 1e-4, "commvq clamped positions: max err %.3g", maxerr);
    pool_free(&pl);
}

/* What a CUDA ctx refuses: tensors on the host, D > 256, a QJL sketch too
 * large for the kernel's shared memory. Outputs stay untouched. */
static void test_errors(void)
{
    pool pl = {0};
    const sdpa_case tc = {VQ_KEYS_QJL, 1, 2, 1, 1, 8, 64, false, false, false, 0, 0, 0, false, 0};
    DLTensor *q = take(&pl, vt_new(VT_F32, VT_DIMS(1, 2, 1, 64))), *v = take(&pl, vt_new(VT_F32, VT_DIMS(1, 1, 8, 64)));
    DLTensor *out = take(&pl, vt_new(VT_F32, VT_DIMS(1, 2, 1, 64)));
    vt_fill_normal(q, &rng, 0, 1);
    vt_fill_normal(v, &rng, 0, 1);
    vq_encoded_keys hk;
    build_keys(&pl, &tc, &hk);
    DLTensor *S = take(&pl, vt_new(VT_F32, VT_DIMS(VQ_CU_SDPA_MAX_QJL_M + 1, 64)));
    DLTensor *bits = take(&pl, vt_new(VT_U32, VT_DIMS(1, 1, 8, (VQ_CU_SDPA_MAX_QJL_M + 32) / 32)));
    vt_fill_normal(S, &rng, 0, 1);
    vt_fill_uniform_int(bits, &rng, 0, 1000);
    vq_encoded_keys big = hk;
    big.qjl.projection = S;
    big.qjl.bits = bits;
    vq_encoded_keys dk = device_keys(&pl, &big);
    DLTensor *dout = (DLTensor *)dev(&pl, out);
    ct_poison(dout);
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "sketch rows", vq_fused_sdpa(ctx, dev(&pl, q), &dk, VT_F16_VALUES(dev(&pl, v)), 0.1f, NULL, dout, NULL));
    /* host tensors on a CUDA ctx */
    dk = device_keys(&pl, &hk);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "device", vq_fused_sdpa(ctx, q, &dk, VT_F16_VALUES(dev(&pl, v)), 0.1f, NULL, dout, NULL));
    ct_download(dout, out);
    VT_CHECK(ct_count_nan(out) == vt_numel(out), "a refused call wrote its output");
    pool_free(&pl);

    /* D > 256 */
    DLTensor *q2 = vt_new(VT_F32, VT_DIMS(1, 1, 1, 264)), *k2 = vt_new(VT_F32, VT_DIMS(1, 1, 4, 264));
    DLTensor *o2 = vt_new(VT_F32, VT_DIMS(1, 1, 1, 264));
    DLTensor *dq2 = ct_upload(q2), *dk2 = ct_upload(k2), *do2 = ct_upload(o2);
    vq_encoded_keys pk = {.format = VQ_KEYS_F16};
    pk.f16.keys = dk2;
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "256", vq_fused_sdpa(ctx, dq2, &pk, VT_F16_VALUES(dk2), 0.1f, NULL, do2, NULL));
    ct_free(dq2); ct_free(dk2); ct_free(do2);
    vt_free(q2); vt_free(k2); vt_free(o2);
}

int main(void)
{
    ct_require_device();
    vq_rng_seed(&rng, ct_seed());
    ctx = ct_ctx();
    cpu = vt_ctx(2);
    if (!ctx || !cpu) {
        printf("FAIL: ctx creation\n");
        return 1;
    }
    VT_RUN(test_formats);
    VT_RUN(test_value_formats);
    VT_RUN(test_rvq_entry);
    VT_RUN(test_merge);
    VT_RUN(test_commvq_clamp);
    VT_RUN(test_errors);
    vq_ctx_free(ctx);
    vq_ctx_free(cpu);
    return vt_finish();
}
#endif
