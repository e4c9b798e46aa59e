/* test_vecinfer.c — VecInfer product VQ against float64 references: quantize
 * (nearest centroid up to decision-boundary ties), dequant, encode_decode,
 * query LUTs and the identity q . k_hat == sum_m lut[m, idx[m]], smooth
 * factors; every ISA, awkward shapes, shared and per-head models, and every
 * error path. */
#include "formats/format_vecinfer.h"
#include "harness.h"

/* One shape of the case table. */
typedef struct vecinfer_case {
    int64_t B, H, S, D, M, C;
    bool u16, cb_per_head, smooth_per_head, keys_f16;
} vecinfer_case;

static const vecinfer_case CASES[] = {
    {1, 2, 1, 64, 16, 16, false, false, false, false},
    {2, 3, 7, 96, 12, 256, false, true, false, true},
    {1, 2, 97, 128, 32, 300, true, false, true, false},
    {1, 1, 7, 256, 8, 1, false, true, true, false},
    {2, 2, 97, 256, 64, 16, true, false, false, true},
    {1, 4, 7, 64, 1, 300, true, true, true, false},     /* one subspace of 64 channels */
    {1, 2, 97, 96, 48, 256, false, false, false, false}, /* dsub = 2 */
    {1, 1, 1, 128, 128, 300, true, true, false, false},  /* dsub = 1 */
    {2, 16, 130, 64, 16, 16, false, false, true, false}, /* enough rows for several dequant tasks */
};

/* The tensors of one case: keys, model, outputs. */
typedef struct vecinfer_data {
    vecinfer_case c;
    int64_t dsub;
    DLTensor *keys, *codebook, *smooth, *idx, *keys_out;
} vecinfer_data;

static vecinfer_data make_case(const vecinfer_case *c, vq_rng *rng)
{
    vecinfer_data d = {.c = *c, .dsub = c->D / c->M};
    d.keys = vt_new(c->keys_f16 ? VT_F16 : VT_F32, VT_DIMS(c->B, c->H, c->S, c->D));
    vt_fill_keys(d.keys, rng, 2, 6.0);
    d.codebook = c->cb_per_head ? vt_new(VT_F32, VT_DIMS(c->H, c->M, c->C, d.dsub))
                                : vt_new(VT_F32, VT_DIMS(c->M, c->C, d.dsub));
    vt_fill_normal(d.codebook, rng, 0.0, 0.6);
    d.smooth = c->smooth_per_head ? vt_new(VT_F32, VT_DIMS(c->H, c->D)) : vt_new(VT_F32, VT_DIMS(c->D));
    for (int64_t i = 0; i < vt_numel(d.smooth); i++) vt_set(d.smooth, i, 0.5 + 2.0 * vq_rng_uniform(rng));
    d.idx = vt_new(c->u16 ? VT_U16 : VT_U8, VT_DIMS(c->B, c->H, c->S, c->M));
    d.keys_out = vt_new(VT_F32, VT_DIMS(c->B, c->H, c->S, c->D));
    return d;
}

static void free_case(vecinfer_data *d)
{
    vt_free(d->keys);
    vt_free(d->codebook);
    vt_free(d->smooth);
    vt_free(d->idx);
    vt_free(d->keys_out);
}

/* Model lookups of the reference, as float64. */
static double ref_smooth(const vecinfer_data *d, int64_t h, int64_t ch)
{
    return vt_get(d->smooth, (d->c.smooth_per_head ? h * d->c.D : 0) + ch);
}
static double ref_cent(const vecinfer_data *d, int64_t h, int64_t m, int64_t c, int64_t j)
{
    const int64_t base = d->c.cb_per_head ? h * d->c.M * d->c.C * d->dsub : 0;
    return vt_get(d->codebook, base + (m * d->c.C + c) * d->dsub + j);
}

/* ||k'[m-th slice] - codebook[m, c]||^2 in float64, k' = k / s. */
static double ref_dist(const vecinfer_data *d, const DLTensor *keys, int64_t row, int64_t m, int64_t c)
{
    const int64_t h = (row / d->c.S) % d->c.H;
    double acc = 0.0;
    for (int64_t j = 0; j < d->dsub; j++) {
        const int64_t ch = m * d->dsub + j;
        const double e = vt_get(keys, row * d->c.D + ch) / ref_smooth(d, h, ch) - ref_cent(d, h, m, c, j);
        acc += e * e;
    }
    return acc;
}

/* Counts indices that are not a nearest centroid: an index is right when it
 * is the float64 argmin, or when its distance is within 1e-6 relative of the
 * argmin's (a decision-boundary tie, docs/FORMATS.md §1). */
static int64_t count_wrong_indices(const vecinfer_data *d)
{
    int64_t wrong = 0;
    const int64_t rows = d->c.B * d->c.H * d->c.S;
    for (int64_t row = 0; row < rows; row++)
        for (int64_t m = 0; m < d->c.M; m++) {
            const int64_t got = (int64_t)vt_get(d->idx, row * d->c.M + m);
            if (got < 0 || got >= d->c.C) { wrong++; continue; }
            double best = INFINITY;
            int64_t best_c = 0;
            for (int64_t c = 0; c < d->c.C; c++) {
                const double e = ref_dist(d, d->keys, row, m, c);
                if (e < best) { best = e; best_c = c; }
            }
            const double mine = ref_dist(d, d->keys, row, m, got);
            if (got != best_c && mine - best > 1e-6 * best + 1e-12) wrong++;
        }
    return wrong;
}

/* float64 dequant of d->idx: k_hat [rows, D]. */
static double *ref_dequant(const vecinfer_data *d)
{
    const int64_t rows = d->c.B * d->c.H * d->c.S;
    double *ref = malloc((size_t)(rows * d->c.D) * sizeof *ref);
    for (int64_t row = 0; row < rows; row++) {
        const int64_t h = (row / d->c.S) % d->c.H;
        for (int64_t m = 0; m < d->c.M; m++) {
            const int64_t c = (int64_t)vt_get(d->idx, row * d->c.M + m);
            for (int64_t j = 0; j < d->dsub; j++)
                ref[row * d->c.D + m * d->dsub + j] = ref_cent(d, h, m, c, j) * ref_smooth(d, h, m * d->dsub + j);
        }
    }
    return ref;
}

static void check_quantize_dequant(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 101);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        vecinfer_data d = make_case(&CASES[i], &rng);
        VT_OK(ctx, vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, (int)d.c.M, d.idx));
        VT_CHECK(count_wrong_indices(&d) == 0, "%s case %zu: %lld indices are not nearest", isa, i,
                 (long long)count_wrong_indices(&d));
        double *ref = ref_dequant(&d);
        VT_OK(ctx, vq_vecinfer_dequant(ctx, d.idx, d.codebook, d.smooth, d.keys_out));
        VT_CHECK(vt_rel_l2(d.keys_out, ref) <= vt_tol(d.keys_out), "%s case %zu: dequant rel err %g", isa, i,
                 vt_rel_l2(d.keys_out, ref));
        DLTensor *half = vt_like(d.keys_out, VT_F16);
        VT_OK(ctx, vq_vecinfer_dequant(ctx, d.idx, d.codebook, d.smooth, half));
        VT_CHECK(vt_rel_l2(half, ref) <= vt_tol(half), "%s case %zu: f16 dequant rel err %g", isa, i,
                 vt_rel_l2(half, ref));

        /* encode_decode is quantize then dequant, byte for byte */
        DLTensor *idx2 = vt_like(d.idx, d.idx->dtype), *out2 = vt_like(d.keys_out, VT_F32);
        DLTensor *half2 = vt_like(d.keys_out, VT_F16);
        VT_OK(ctx, vq_vecinfer_encode_decode(ctx, d.keys, d.codebook, d.smooth, (int)d.c.M, idx2, out2));
        VT_CHECK(memcmp(idx2->data, d.idx->data, vt_bytes(d.idx)) == 0, "%s case %zu: encode_decode idx", isa, i);
        VT_CHECK(memcmp(out2->data, d.keys_out->data, vt_bytes(out2)) == 0, "%s case %zu: encode_decode keys", isa, i);
        VT_OK(ctx, vq_vecinfer_encode_decode(ctx, d.keys, d.codebook, d.smooth, (int)d.c.M, idx2, half2));
        VT_CHECK(memcmp(half2->data, half->data, vt_bytes(half)) == 0, "%s case %zu: encode_decode f16", isa, i);
        vt_free(idx2);
        vt_free(out2);
        vt_free(half);
        vt_free(half2);
        free(ref);
        free_case(&d);
    }
}

/* Duplicate centroids: the lower index wins. Centroid c holds (c % 32) / 2
 * everywhere, so each value appears in neighbouring lanes (2i, 2i + 1) and
 * again every 32 centroids (the same lane of a later SIMD block); the key
 * with value v must get 2v. */
static void check_ties(vq_ctx *ctx, const char *isa)
{
    const int64_t C = 70, D = 8, K = 16;
    DLTensor *cb = vt_new(VT_F32, VT_DIMS(1, C, D)), *s = vt_new(VT_F32, VT_DIMS(D));
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(1, 1, K, D)), *idx = vt_new(VT_U8, VT_DIMS(1, 1, K, 1));
    for (int64_t c = 0; c < C; c++)
        for (int64_t j = 0; j < D; j++) vt_set(cb, c * D + j, (double)((c % 32) / 2));
    for (int64_t v = 0; v < K; v++)
        for (int64_t j = 0; j < D; j++) vt_set(keys, v * D + j, (double)v);
    for (int64_t j = 0; j < D; j++) vt_set(s, j, 1.0);
    VT_OK(ctx, vq_vecinfer_quantize(ctx, keys, cb, s, 1, idx));
    int bad = 0;
    for (int64_t v = 0; v < K; v++) bad += vt_get(idx, v) != (double)(2 * v);
    VT_CHECK(bad == 0, "%s: %d ties did not go to the lower index", isa, bad);
    vt_free(cb);
    vt_free(s);
    vt_free(keys);
    vt_free(idx);
}

/* float64 lut [rows, M, C] of queries [rows, D]. */
static double *ref_lut(const vecinfer_data *d, const DLTensor *q, int64_t rows, int64_t S)
{
    double *ref = malloc((size_t)(rows * d->c.M * d->c.C) * sizeof *ref);
    for (int64_t row = 0; row < rows; row++) {
        const int64_t h = (row / S) % d->c.H;
        for (int64_t m = 0; m < d->c.M; m++)
            for (int64_t c = 0; c < d->c.C; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < d->dsub; j++) {
                    const int64_t ch = m * d->dsub + j;
                    acc += vt_get(q, row * d->c.D + ch) * ref_smooth(d, h, ch) * ref_cent(d, h, m, c, j);
                }
                ref[(row * d->c.M + m) * d->c.C + c] = acc;
            }
    }
    return ref;
}

static void check_query_lut(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 202);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        vecinfer_data d = make_case(&CASES[i], &rng);
        const vecinfer_case *c = &d.c;
        const int64_t Sq = 3;
        /* [B,H,D] decode queries and [B,H,Sq,D] prefill queries */
        DLTensor *q3 = vt_new(c->keys_f16 ? VT_F16 : VT_F32, VT_DIMS(c->B, c->H, c->D));
        DLTensor *q4 = vt_new(VT_F32, VT_DIMS(c->B, c->H, Sq, c->D));
        vt_fill_normal(q3, &rng, 0.0, 1.0);
        vt_fill_normal(q4, &rng, 0.0, 1.0);
        DLTensor *lut3 = vt_new(VT_F32, VT_DIMS(c->B, c->H, c->M, c->C));
        DLTensor *lut4 = vt_new(VT_F32, VT_DIMS(c->B, c->H, Sq, c->M, c->C));
        VT_OK(ctx, vq_vecinfer_query_lut(ctx, q3, d.codebook, d.smooth, lut3));
        VT_OK(ctx, vq_vecinfer_query_lut(ctx, q4, d.codebook, d.smooth, lut4));
        double *r3 = ref_lut(&d, q3, c->B * c->H, 1), *r4 = ref_lut(&d, q4, c->B * c->H * Sq, Sq);
        VT_CHECK(vt_rel_l2(lut3, r3) <= 1e-5, "%s case %zu: lut [B,H,M,C] rel err %g", isa, i, vt_rel_l2(lut3, r3));
        VT_CHECK(vt_rel_l2(lut4, r4) <= 1e-5, "%s case %zu: lut [B,H,Sq,M,C] rel err %g", isa, i, vt_rel_l2(lut4, r4));

        /* q . k_hat == sum_m lut[m, idx[m]] for every query against every
         * cached token of its head, to f32 accuracy (relative to |q||k_hat|) */
        VT_OK(ctx, vq_vecinfer_encode_decode(ctx, d.keys, d.codebook, d.smooth, (int)c->M, d.idx, d.keys_out));
        const vq_vecinfer_layout L = {(int32_t)c->M, (int32_t)d.dsub, (int32_t)c->C, c->u16 ? 2 : 1};
        int bad = 0;
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t h = 0; h < c->H; h++)
                for (int64_t t = 0; t < c->S; t++) {
                    const int64_t krow = (b * c->H + h) * c->S + t, qrow = b * c->H + h;
                    double dot = 0, nq = 0, nk = 0, via_lut = 0;
                    for (int64_t ch = 0; ch < c->D; ch++) {
                        const double qv = vt_get(q3, qrow * c->D + ch), kv = vt_get(d.keys_out, krow * c->D + ch);
                        dot += qv * kv;
                        nq += qv * qv;
                        nk += kv * kv;
                    }
                    for (int64_t m = 0; m < c->M; m++)
                        via_lut += vt_get(lut3, qrow * c->M * c->C + m * c->C + (int64_t)vt_get(d.idx, krow * c->M + m));
                    const float scored = vq_vecinfer_score(&L, (const char *)d.idx->data + krow * c->M * (c->u16 ? 2 : 1),
                                                     (const float *)lut3->data + qrow * c->M * c->C);
                    const double tol = 1e-5 * sqrt(nq * nk) + 1e-30;
                    bad += fabs(dot - via_lut) > tol || fabs(dot - scored) > tol;
                }
        VT_CHECK(bad == 0, "%s case %zu: %d scores differ from q . k_hat", isa, i, bad);
        free(r3);
        free(r4);
        vt_free(q3);
        vt_free(q4);
        vt_free(lut3);
        vt_free(lut4);
        free_case(&d);
    }
}

static void check_smooth_factors(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 303);
    const int64_t N = 4099, D = 96;  /* several tasks per call */
    for (int f16 = 0; f16 < 2; f16++) {
        DLTensor *keys = vt_new(f16 ? VT_F16 : VT_F32, VT_DIMS(N, D)), *s = vt_new(VT_F32, VT_DIMS(D));
        vt_fill_keys(keys, &rng, 3, 8.0);
        for (int64_t t = 0; t < N; t++) vt_set(keys, t * D + 5, 0.0);  /* an all-zero channel */
        VT_OK(ctx, vq_vecinfer_smooth_factors(ctx, keys, s));
        double ref[96];
        for (int64_t ch = 0; ch < D; ch++) {
            double mx = 0;
            for (int64_t t = 0; t < N; t++) mx = fmax(mx, fabs(vt_get(keys, t * D + ch)));
            ref[ch] = mx > 0 ? sqrt(mx) : 1.0;
        }
        VT_CHECK(vt_rel_l2(s, ref) <= 1e-6, "%s: smooth factors rel err %g", isa, vt_rel_l2(s, ref));
        VT_CHECK(vt_get(s, 5) == 1.0, "%s: zero channel gets 1, got %g", isa, vt_get(s, 5));
        vt_free(keys);
        vt_free(s);
    }
}

static void test_quantize_dequant(void) { vt_for_each_isa(3, check_quantize_dequant); }
static void test_ties(void) { vt_for_each_isa(2, check_ties); }
static void test_query_lut(void) { vt_for_each_isa(3, check_query_lut); }
static void test_smooth_factors(void) { vt_for_each_isa(2, check_smooth_factors); }

/* Every error path: status, a message naming the argument, nothing written. */
static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 404);
    const vecinfer_case c = {1, 2, 5, 64, 8, 300, true, false, false, false};
    vecinfer_data d = make_case(&c, &rng);
    DLTensor *idx8 = vt_new(VT_U8, VT_DIMS(1, 2, 5, 8)), *bad_idx = vt_new(VT_U16, VT_DIMS(1, 2, 5, 4));
    DLTensor *keys3 = vt_new(VT_F32, VT_DIMS(2, 5, 64)), *keys_u8 = vt_new(VT_U8, VT_DIMS(1, 2, 5, 64));
    DLTensor *cb_bad = vt_new(VT_F32, VT_DIMS(8, 300, 4)), *cb_heads = vt_new(VT_F32, VT_DIMS(3, 8, 300, 8));
    DLTensor *s_bad = vt_new(VT_F32, VT_DIMS(63)), *out_bad = vt_new(VT_F32, VT_DIMS(1, 2, 4, 64));
    vt_fill_normal(keys3, &rng, 0, 1);
    void *idx_snap = vt_snapshot(d.idx), *out_snap = vt_snapshot(d.keys_out), *idx8_snap = vt_snapshot(idx8);
#define NOTHING_WRITTEN() \
    VT_CHECK(vt_unchanged(d.idx, idx_snap) && vt_unchanged(d.keys_out, out_snap) && vt_unchanged(idx8, idx8_snap), "output written")

    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys' is NULL", vq_vecinfer_quantize(ctx, NULL, d.codebook, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys': expected rank 4", vq_vecinfer_quantize(ctx, keys3, d.codebook, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys': expected dtype", vq_vecinfer_quantize(ctx, keys_u8, d.codebook, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "num_subspaces must be >= 1", vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, 0, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "num_subspaces = 5 must divide D = 64", vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, 5, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook': expected shape [8, *, 8]", vq_vecinfer_quantize(ctx, d.keys, cb_bad, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook': expected shape [2, 8, *, 8]", vq_vecinfer_quantize(ctx, d.keys, cb_heads, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook' is NULL", vq_vecinfer_quantize(ctx, d.keys, NULL, d.smooth, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'smooth': expected shape [64]", vq_vecinfer_quantize(ctx, d.keys, d.codebook, s_bad, 8, d.idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected shape [1, 2, 5, 8]", vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, 8, bad_idx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out' is u8, which holds C <= 256", vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, 8, idx8));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx_out': expected dtype u8/u16", vq_vecinfer_quantize(ctx, d.keys, d.codebook, d.smooth, 8, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys_out': expected shape [1, 2, 5, 64]", vq_vecinfer_encode_decode(ctx, d.keys, d.codebook, d.smooth, 8, d.idx, out_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys_out' is NULL", vq_vecinfer_encode_decode(ctx, d.keys, d.codebook, d.smooth, 8, d.idx, NULL));
    VT_CHECK(vq_vecinfer_quantize(NULL, d.keys, d.codebook, d.smooth, 8, d.idx) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    NOTHING_WRITTEN();

    /* C beyond u16 indices */
    DLTensor *big_cb = vt_new(VT_F32, VT_DIMS(1, 65537, 1)), *k1 = vt_new(VT_F32, VT_DIMS(1, 1, 1, 1));
    DLTensor *s1 = vt_new(VT_F32, VT_DIMS(1)), *i1 = vt_new(VT_U16, VT_DIMS(1, 1, 1, 1));
    vt_set(s1, 0, 1.0);
    vt_set(k1, 0, 1.0);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "C = 65537 centroids per subspace, at most 65536", vq_vecinfer_quantize(ctx, k1, big_cb, s1, 1, i1));
    VT_CHECK(vt_count_poisoned(i1) == 1, "i1 written");

    /* dequant: out-of-range indices, mismatched M, shapes */
    vt_fill_uniform_int(d.idx, &rng, 0, 299);
    vt_set(d.idx, 37, 300);
    free(idx_snap);
    idx_snap = vt_snapshot(d.idx);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx': element 37 is 300, outside [0, C = 300)", vq_vecinfer_dequant(ctx, d.idx, d.codebook, d.smooth, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' has shape [1, 2, 5, 4]: axis 3 must be M", vq_vecinfer_dequant(ctx, bad_idx, d.codebook, d.smooth, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys_out': expected shape [1, 2, 5, 64]", vq_vecinfer_dequant(ctx, d.idx, d.codebook, d.smooth, out_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx': expected dtype u8/u16", vq_vecinfer_dequant(ctx, d.keys, d.codebook, d.smooth, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' is NULL", vq_vecinfer_dequant(ctx, NULL, d.codebook, d.smooth, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'smooth' is NULL", vq_vecinfer_dequant(ctx, d.idx, d.codebook, NULL, d.keys_out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys_out' is NULL", vq_vecinfer_dequant(ctx, d.idx, d.codebook, d.smooth, NULL));
    VT_CHECK(vq_vecinfer_dequant(NULL, d.idx, d.codebook, d.smooth, d.keys_out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    DLTensor *cb_m7 = vt_new(VT_F32, VT_DIMS(7, 300, 9));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "M = 7 subspaces, which does not divide D = 64", vq_vecinfer_dequant(ctx, d.idx, cb_m7, d.smooth, d.keys_out));
    NOTHING_WRITTEN();

    /* query_lut shapes */
    DLTensor *q = vt_new(VT_F32, VT_DIMS(1, 2, 64)), *q2 = vt_new(VT_F32, VT_DIMS(2, 64));
    DLTensor *lut = vt_new(VT_F32, VT_DIMS(1, 2, 8, 300)), *lut_bad = vt_new(VT_F32, VT_DIMS(1, 2, 8, 299));
    DLTensor *lut_f16 = vt_new(VT_F16, VT_DIMS(1, 2, 8, 300)), *q_h3 = vt_new(VT_F32, VT_DIMS(1, 3, 64));
    vt_fill_normal(q, &rng, 0, 1);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'queries': expected rank 3..4", vq_vecinfer_query_lut(ctx, q2, d.codebook, d.smooth, lut));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'queries' is NULL", vq_vecinfer_query_lut(ctx, NULL, d.codebook, d.smooth, lut));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'lut_out' is NULL", vq_vecinfer_query_lut(ctx, q, d.codebook, d.smooth, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook' is NULL", vq_vecinfer_query_lut(ctx, q, NULL, d.smooth, lut));
    VT_CHECK(vq_vecinfer_query_lut(NULL, q, d.codebook, d.smooth, lut) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'lut_out': expected shape [1, 2, 8, 300]", vq_vecinfer_query_lut(ctx, q, d.codebook, d.smooth, lut_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'lut_out': expected dtype f32", vq_vecinfer_query_lut(ctx, q, d.codebook, d.smooth, lut_f16));
    DLTensor *cb_h2 = vt_new(VT_F32, VT_DIMS(2, 8, 300, 8));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook': expected shape [3, 8, *, 8]", vq_vecinfer_query_lut(ctx, q_h3, cb_h2, d.smooth, lut));
    VT_CHECK(vt_count_poisoned(lut) == vt_numel(lut), "lut written");

    /* smooth factors */
    DLTensor *sf = vt_new(VT_F32, VT_DIMS(63)), *calib = vt_new(VT_F32, VT_DIMS(10, 64));
    DLTensor *sf_u16 = vt_new(VT_U16, VT_DIMS(64));
    vt_fill_normal(calib, &rng, 0, 1);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'smooth_out' has shape [63]: axis 0 must be D", vq_vecinfer_smooth_factors(ctx, calib, sf));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys': expected rank 2", vq_vecinfer_smooth_factors(ctx, d.keys, sf));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys' is NULL", vq_vecinfer_smooth_factors(ctx, NULL, sf));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'smooth_out' is NULL", vq_vecinfer_smooth_factors(ctx, calib, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'smooth_out': expected dtype f32", vq_vecinfer_smooth_factors(ctx, calib, sf_u16));
    VT_CHECK(vq_vecinfer_smooth_factors(NULL, calib, sf) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_CHECK(vt_count_poisoned(sf) == 63, "smooth_out written");
    NOTHING_WRITTEN();
#undef NOTHING_WRITTEN

    DLTensor *all[] = {idx8, bad_idx, keys3, keys_u8, cb_bad, cb_heads, s_bad, out_bad, big_cb, k1, s1, i1, cb_m7,
                       q, q2, lut, lut_bad, lut_f16, q_h3, cb_h2, sf, calib, sf_u16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    free(idx_snap);
    free(out_snap);
    free(idx8_snap);
    free_case(&d);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_quantize_dequant);
    VT_RUN(test_ties);
    VT_RUN(test_query_lut);
    VT_RUN(test_smooth_factors);
    VT_RUN(test_errors);
    return vt_finish();
}
