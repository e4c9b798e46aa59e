/* test_commvq.c — CommVQ: decode (gather + scale + RoPE, both pairings)
 * against a float64 reference on awkward shapes and every index dtype; RoPE
 * with cos = 1, sin = 0 is the identity and real rotations keep norms; the
 * greedy encoder picks nearest centroids stage by stage; training + encoding
 * reconstructs better as R grows; every ISA and every error path. */
#include "harness.h"

/* One decode shape. */
typedef struct cv_case {
    int64_t B, H, S, D, R, C, P;
    DLDataType idx_dt;
    bool pos_per_batch, with_scale, out_f16;
} cv_case;

/* Tensors of one decode call. */
typedef struct cv_data {
    cv_case c;
    DLTensor *idx, *codebook, *cos, *sin, *pos, *scale, *out;
} cv_data;

/* The usual RoPE tables: pair i at position p turns by p * 10000^(-2i/D). */
static void fill_rope_tables(DLTensor *cs, DLTensor *sn, int64_t P, int64_t D)
{
    for (int64_t p = 0; p < P; p++)
        for (int64_t i = 0; i < D / 2; i++) {
            const double theta = (double)p * pow(10000.0, -2.0 * (double)i / (double)D);
            vt_set(cs, p * (D / 2) + i, cos(theta));
            vt_set(sn, p * (D / 2) + i, sin(theta));
        }
}

static cv_data make_case(const cv_case *c, vq_rng *rng)
{
    cv_data d = {.c = *c};
    d.idx = vt_new(c->idx_dt, VT_DIMS(c->B, c->H, c->S, c->R));
    vt_fill_uniform_int(d.idx, rng, 0, c->C - 1);
    d.codebook = vt_new(VT_F32, VT_DIMS(c->R, c->C, c->D));
    vt_fill_normal(d.codebook, rng, 0.0, 1.0);
    d.cos = vt_new(VT_F32, VT_DIMS(c->P, c->D / 2));
    d.sin = vt_new(VT_F32, VT_DIMS(c->P, c->D / 2));
    fill_rope_tables(d.cos, d.sin, c->P, c->D);
    d.pos = c->pos_per_batch ? vt_new(VT_I32, VT_DIMS(c->B, c->S)) : vt_new(VT_I32, VT_DIMS(c->S));
    vt_fill_uniform_int(d.pos, rng, 0, c->P - 1);
    d.scale = c->with_scale ? vt_new(VT_F32, VT_DIMS(c->B, c->H, c->S)) : NULL;
    if (d.scale) for (int64_t i = 0; i < vt_numel(d.scale); i++) vt_set(d.scale, i, 0.25 + vq_rng_uniform(rng));
    d.out = vt_new(c->out_f16 ? VT_F16 : VT_F32, VT_DIMS(c->B, c->H, c->S, c->D));
    return d;
}

static void free_case(cv_data *d)
{
    vt_free(d->idx);
    vt_free(d->codebook);
    vt_free(d->cos);
    vt_free(d->sin);
    vt_free(d->pos);
    vt_free(d->scale);
    vt_free(d->out);
}

/* float64 reference decode: [rows, D]. rope < 0: no rotation. */
static double *ref_decode(const cv_data *d, int rope)
{
    const cv_case *c = &d->c;
    const int64_t rows = c->B * c->H * c->S, D = c->D, half = D / 2;
    double *ref = malloc((size_t)(rows * D) * sizeof *ref), *k = malloc((size_t)D * sizeof *k);
    for (int64_t row = 0; row < rows; row++) {
        const int64_t b = row / (c->H * c->S), s = row % c->S;
        const int64_t p = (int64_t)vt_get(d->pos, (c->pos_per_batch ? b * c->S : 0) + s);
        const double scale = d->scale ? vt_get(d->scale, row) : 1.0;
        for (int64_t j = 0; j < D; j++) {
            double acc = 0;
            for (int64_t r = 0; r < c->R; r++)
                acc += vt_get(d->codebook, (r * c->C + (int64_t)vt_get(d->idx, row * c->R + r)) * D + j);
            k[j] = scale * acc;
        }
        for (int64_t j = 0; j < D; j++) ref[row * D + j] = k[j];
        if (rope < 0) continue;
        for (int64_t i = 0; i < half; i++) {
            const int64_t ia = rope == VQ_ROPE_HALF ? i : 2 * i, ib = rope == VQ_ROPE_HALF ? i + half : 2 * i + 1;
            const double cs = vt_get(d->cos, p * half + i), sn = vt_get(d->sin, p * half + i);
            ref[row * D + ia] = k[ia] * cs - k[ib] * sn;
            ref[row * D + ib] = k[ia] * sn + k[ib] * cs;
        }
    }
    free(k);
    return ref;
}

static const cv_case CASES[] = {
    {1, 2, 1, 64, 1, 16, 8, {kDLUInt, 8, 1}, false, false, false},
    {2, 3, 7, 96, 2, 256, 50, {kDLUInt, 8, 1}, true, true, false},
    {1, 2, 97, 128, 4, 300, 200, {kDLUInt, 16, 1}, false, true, true},
    {2, 1, 7, 256, 3, 1, 7, {kDLInt, 32, 1}, true, false, false},
    {1, 1, 97, 2, 2, 16, 97, {kDLInt, 32, 1}, false, false, true},   /* one RoPE pair */
    {1, 2, 7, 10, 1, 300, 9, {kDLUInt, 16, 1}, true, true, false},    /* D/2 odd: vector tails */
    {2, 8, 97, 128, 4, 256, 200, {kDLUInt, 8, 1}, true, true, true},  /* several tasks per call */
};

static void check_decode(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 21);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        for (int rope = 0; rope < 2; rope++) {
            cv_data d = make_case(&CASES[i], &rng);
            const vq_commvq_opts opts = {.rope = (vq_rope_layout)rope, .scale = d.scale};
            VT_OK(ctx, vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
            double *ref = ref_decode(&d, rope);
            VT_CHECK(vt_rel_l2(d.out, ref) <= vt_tol(d.out), "%s case %zu rope %d: rel err %g", isa, i, rope,
                     vt_rel_l2(d.out, ref));
            free(ref);
            if (!d.scale && rope == VQ_ROPE_HALF) {  /* NULL opts is the half layout without scale */
                DLTensor *again = vt_like(d.out, d.out->dtype);
                VT_OK(ctx, vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, again, NULL));
                VT_CHECK(memcmp(again->data, d.out->data, vt_bytes(again)) == 0, "%s case %zu: NULL opts", isa, i);
                vt_free(again);
            }
            free_case(&d);
        }
}

/* cos = 1, sin = 0 leaves scale * sum_r codebook[r, idx_r]; a real rotation
 * keeps every token's norm. */
static void check_rope_properties(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 22);
    const cv_case c = {2, 2, 97, 96, 3, 40, 120, {kDLUInt, 8, 1}, true, true, false};
    for (int rope = 0; rope < 2; rope++) {
        cv_data d = make_case(&c, &rng);
        const vq_commvq_opts opts = {.rope = (vq_rope_layout)rope, .scale = d.scale};
        double *plain = ref_decode(&d, -1);
        VT_OK(ctx, vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
        const int64_t rows = c.B * c.H * c.S;
        int bad_norm = 0;
        for (int64_t row = 0; row < rows; row++) {
            double n_out = 0, n_in = 0;
            for (int64_t j = 0; j < c.D; j++) {
                n_out += pow(vt_get(d.out, row * c.D + j), 2);
                n_in += pow(plain[row * c.D + j], 2);
            }
            bad_norm += fabs(sqrt(n_out) - sqrt(n_in)) > 1e-5 * sqrt(n_in);
        }
        VT_CHECK(bad_norm == 0, "%s rope %d: %d tokens changed norm", isa, rope, bad_norm);
        for (int64_t i = 0; i < vt_numel(d.cos); i++) { vt_set(d.cos, i, 1.0); vt_set(d.sin, i, 0.0); }
        VT_OK(ctx, vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
        VT_CHECK(vt_rel_l2(d.out, plain) <= 1e-6, "%s rope %d: identity rotation rel err %g", isa, rope,
                 vt_rel_l2(d.out, plain));
        free(plain);
        free_case(&d);
    }
}

/* For every token, replays the encoder's choices in float64: at stage r the
 * chosen centroid must be nearest the residual of stages < r, up to 1e-6
 * relative ties (docs/FORMATS.md §1). Returns the mean squared reconstruction error per
 * element. */
static double check_greedy(const DLTensor *keys, const DLTensor *codebook, const DLTensor *idx, int64_t *wrong)
{
    const int64_t rows = vt_numel(keys) / keys->shape[3], D = keys->shape[3];
    const int64_t R = codebook->shape[0], C = codebook->shape[1];
    double *res = malloc((size_t)D * sizeof *res), err = 0;
    for (int64_t row = 0; row < rows; row++) {
        for (int64_t j = 0; j < D; j++) res[j] = vt_get(keys, row * D + j);
        for (int64_t r = 0; r < R; r++) {
            double best = INFINITY, mine = INFINITY;
            const int64_t got = (int64_t)vt_get(idx, row * R + r);
            for (int64_t c = 0; c < C; c++) {
                double e = 0;
                for (int64_t j = 0; j < D; j++) e += pow(res[j] - vt_get(codebook, (r * C + c) * D + j), 2);
                best = fmin(best, e);
                if (c == got) mine = e;
            }
            *wrong += !(mine - best <= 1e-6 * best + 1e-12);
            if (got >= 0 && got < C)
                for (int64_t j = 0; j < D; j++) res[j] -= vt_get(codebook, (r * C + got) * D + j);
        }
        for (int64_t j = 0; j < D; j++) err += res[j] * res[j];
    }
    free(res);
    return err / (double)(rows * D);
}

static void check_encode(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 23);
    const DLDataType dts[] = {VT_U8, VT_U16, VT_I32};
    const int64_t Cs[] = {1, 16, 256, 300};
    for (int k = 0; k < 4; k++) {
        const int64_t S = k == 0 ? 1 : k == 1 ? 7 : 97, D = 64 + 32 * k, R = 1 + k % 3, C = Cs[k];
        DLTensor *keys = vt_new(k % 2 ? VT_F16 : VT_F32, VT_DIMS(1, 2, S, D));
        vt_fill_keys(keys, &rng, 2, 5.0);
        DLTensor *cb = vt_new(VT_F32, VT_DIMS(R, C, D));
        vt_fill_normal(cb, &rng, 0.0, 1.0);
        DLTensor *idx = vt_new(dts[C > 256 ? 1 + k % 2 : k % 3], VT_DIMS(1, 2, S, R));
        VT_OK(ctx, vq_commvq_encode(ctx, keys, cb, idx));
        int64_t wrong = 0;
        check_greedy(keys, cb, idx, &wrong);
        VT_CHECK(wrong == 0, "%s shape %d: %lld stage choices are not nearest", isa, k, (long long)wrong);
        vt_free(keys);
        vt_free(cb);
        vt_free(idx);
    }
}

/* Train R = 4 stages once; stage r of it is what an R = r + 1 training
 * would give (stage r sees only the residuals of stages < r), so encoding
 * held-out keys with the first r + 1 stages measures the error at each R.
 * k-means on residuals must cut the error at every added stage (5% is far
 * below what a trained stage of 16 centroids removes on Gaussian data). */
static void check_train_reduces_error(vq_ctx *ctx, const char *isa)
{
    vq_rng rng;
    vq_rng_seed(&rng, 24);
    const int64_t N = 1200, D = 32, C = 16, R = 4, S = 97;
    DLTensor *train = vt_new(VT_F32, VT_DIMS(N, D)), *cb = vt_new(VT_F32, VT_DIMS(R, C, D));
    vt_fill_keys(train, &rng, 2, 4.0);
    VT_OK(ctx, vq_commvq_train(ctx, train, (int)R, (int)C, 8, 99, cb));
    DLTensor *cb2 = vt_new(VT_F32, VT_DIMS(2, C, D));
    VT_OK(ctx, vq_commvq_train(ctx, train, 2, (int)C, 8, 99, cb2));
    VT_CHECK(memcmp(cb2->data, cb->data, vt_bytes(cb2)) == 0, "%s: an R = 2 training is not the first 2 stages of R = 4", isa);
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(1, 1, S, D));
    vt_fill_keys(keys, &rng, 2, 4.0);
    double prev = 0;
    for (int64_t i = 0; i < S * D; i++) prev += pow(vt_get(keys, i), 2);
    prev /= (double)(S * D);
    for (int64_t r = 1; r <= R; r++) {
        DLTensor *stages = vt_view(cb, VT_DIMS(r, C, D)), *idx = vt_new(VT_U8, VT_DIMS(1, 1, S, r));
        VT_OK(ctx, vq_commvq_encode(ctx, keys, stages, idx));
        int64_t wrong = 0;
        const double err = check_greedy(keys, stages, idx, &wrong);
        VT_CHECK(wrong == 0 && err < 0.95 * prev, "%s: R = %lld error %g vs %g before (%lld wrong)", isa, (long long)r,
                 err, prev, (long long)wrong);
        prev = err;
        vt_free_view(stages);
        vt_free(idx);
    }
    vt_free(train);
    vt_free(cb);
    vt_free(cb2);
    vt_free(keys);
}

static void test_decode(void) { vt_for_each_isa(3, check_decode); }
static void test_rope_properties(void) { vt_for_each_isa(2, check_rope_properties); }
static void test_encode(void) { vt_for_each_isa(3, check_encode); }
static void test_train_reduces_error(void) { vt_for_each_isa(2, check_train_reduces_error); }

static void test_decode_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 25);
    const cv_case c = {2, 2, 5, 16, 2, 300, 10, {kDLUInt, 16, 1}, true, true, false};
    cv_data d = make_case(&c, &rng);
    void *snap = vt_snapshot(d.out);
    vq_commvq_opts opts = {.rope = VQ_ROPE_HALF, .scale = d.scale};
    DLTensor *odd = vt_new(VT_F32, VT_DIMS(2, 2, 5, 15)), *cb_r3 = vt_new(VT_F32, VT_DIMS(3, 300, 16));
    DLTensor *cos_bad = vt_new(VT_F32, VT_DIMS(10, 7)), *sin_bad = vt_new(VT_F32, VT_DIMS(11, 8));
    DLTensor *pos_bad = vt_new(VT_I32, VT_DIMS(2, 4)), *pos_f = vt_new(VT_F32, VT_DIMS(5));
    DLTensor *scale_bad = vt_new(VT_F32, VT_DIMS(2, 2, 4)), *idx_f = vt_new(VT_F32, VT_DIMS(2, 2, 5, 2));
    DLTensor *out_bad = vt_new(VT_F32, VT_DIMS(2, 2, 6, 16));
    VT_CHECK(vq_commvq_decode(NULL, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices' is NULL", vq_commvq_decode(ctx, NULL, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices': expected dtype u8/u16/i32", vq_commvq_decode(ctx, idx_f, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' is NULL", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, NULL, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "D = 15 must be even", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, odd, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook': expected shape [2, *, 16]", vq_commvq_decode(ctx, d.idx, cb_r3, d.cos, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected shape [2, 2, 5, 16]", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, out_bad, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cos_freqs' has shape [10, 7]: axis 1 must be D/2 = 8", vq_commvq_decode(ctx, d.idx, d.codebook, cos_bad, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'sin_freqs': expected shape [10, 8]", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, sin_bad, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook' is NULL", vq_commvq_decode(ctx, d.idx, NULL, d.cos, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'cos_freqs' is NULL", vq_commvq_decode(ctx, d.idx, d.codebook, NULL, d.sin, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'positions' is NULL", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, NULL, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'sin_freqs' is NULL", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, NULL, d.pos, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'positions': expected shape [2, 5]", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, pos_bad, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'positions': expected dtype i32", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, pos_f, d.out, &opts));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'opts->scale': expected shape [2, 2, 5]", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &(vq_commvq_opts){.scale = scale_bad}));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "opts->rope must be VQ_ROPE_HALF (0) or VQ_ROPE_INTERLEAVED (1), got 2", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &(vq_commvq_opts){.rope = (vq_rope_layout)2}));
    /* data-dependent: codes and positions out of range */
    vt_set(d.idx, 13, 300);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices': element 13 is 300, outside [0, C = 300)", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    vt_set(d.idx, 13, 0);
    DLTensor *idx32 = vt_new(VT_I32, VT_DIMS(2, 2, 5, 2));
    vt_fill_uniform_int(idx32, &rng, 0, 299);
    vt_set(idx32, 3, -1);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices': element 3 is -1", vq_commvq_decode(ctx, idx32, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    vt_set(d.pos, 7, 10);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'positions': element 7 is 10, outside [0, P = 10)", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    vt_set(d.pos, 7, -3);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'positions': element 7 is -3", vq_commvq_decode(ctx, d.idx, d.codebook, d.cos, d.sin, d.pos, d.out, &opts));
    VT_CHECK(vt_unchanged(d.out, snap), "out written on failure");
    VT_CHECK(vt_count_poisoned(odd) == vt_numel(odd) && vt_count_poisoned(out_bad) == vt_numel(out_bad), "bad out written");
    DLTensor *all[] = {odd, cb_r3, cos_bad, sin_bad, pos_bad, pos_f, scale_bad, idx_f, out_bad, idx32};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    free(snap);
    free_case(&d);
    vq_ctx_free(ctx);
}

static void test_encode_train_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 26);
    DLTensor *keys = vt_new(VT_F32, VT_DIMS(1, 2, 3, 8)), *cb = vt_new(VT_F32, VT_DIMS(2, 300, 8));
    DLTensor *i8 = vt_new(VT_U8, VT_DIMS(1, 2, 3, 2)), *i16 = vt_new(VT_U16, VT_DIMS(1, 2, 3, 2));
    DLTensor *i_bad = vt_new(VT_U16, VT_DIMS(1, 2, 3, 3)), *cb_d = vt_new(VT_F32, VT_DIMS(2, 300, 9));
    DLTensor *huge = vt_new(VT_F32, VT_DIMS(1, 65537, 8)), *i16_1 = vt_new(VT_U16, VT_DIMS(1, 2, 3, 1));
    DLTensor *k3 = vt_new(VT_F32, VT_DIMS(2, 3, 8));
    vt_fill_normal(keys, &rng, 0, 1);
    vt_fill_normal(cb, &rng, 0, 1);
    VT_CHECK(vq_commvq_encode(NULL, keys, cb, i16) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys' is NULL", vq_commvq_encode(ctx, NULL, cb, i16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook' is NULL", vq_commvq_encode(ctx, keys, NULL, i16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices_out' is NULL", vq_commvq_encode(ctx, keys, cb, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices_out': expected dtype u8/u16/i32", vq_commvq_encode(ctx, keys, cb, keys));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'keys': expected rank 4", vq_commvq_encode(ctx, k3, cb, i16));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices_out' is u8, which holds C <= 256 centroids, but the codebook has C = 300", vq_commvq_encode(ctx, keys, cb, i8));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices_out' is u16, which holds C <= 65536", vq_commvq_encode(ctx, keys, huge, i16_1));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'indices_out': expected shape [1, 2, 3, 2]", vq_commvq_encode(ctx, keys, cb, i_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook': expected shape [*, *, 8]", vq_commvq_encode(ctx, keys, cb_d, i16));
    VT_CHECK(vt_count_poisoned(i8) == vt_numel(i8) && vt_count_poisoned(i16) == vt_numel(i16) &&
                 vt_count_poisoned(i16_1) == vt_numel(i16_1) && vt_count_poisoned(i_bad) == vt_numel(i_bad),
             "indices written");

    DLTensor *samples = vt_new(VT_F32, VT_DIMS(20, 8)), *out = vt_new(VT_F32, VT_DIMS(2, 4, 8));
    DLTensor *out_bad = vt_new(VT_F32, VT_DIMS(2, 4, 9)), *s_h = vt_new(VT_F16, VT_DIMS(20, 8));
    vt_fill_normal(samples, &rng, 0, 1);
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples' is NULL", vq_commvq_train(ctx, NULL, 2, 4, 3, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook_out' is NULL", vq_commvq_train(ctx, samples, 2, 4, 3, 0, NULL));
    VT_CHECK(vq_commvq_train(NULL, samples, 2, 4, 3, 0, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'samples': expected dtype f32", vq_commvq_train(ctx, s_h, 2, 4, 3, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "R must be >= 1, got 0", vq_commvq_train(ctx, samples, 0, 4, 3, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "C must be in 1..N = 20 (the samples), got 21", vq_commvq_train(ctx, samples, 2, 21, 3, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "iters must be >= 0, got -2", vq_commvq_train(ctx, samples, 2, 4, -2, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook_out': expected shape [2, 4, 8], got [2, 4, 9]", vq_commvq_train(ctx, samples, 2, 4, 3, 0, out_bad));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'codebook_out': expected shape [3, 4, 8]", vq_commvq_train(ctx, samples, 3, 4, 3, 0, out));
    VT_CHECK(vt_count_poisoned(out) == vt_numel(out) && vt_count_poisoned(out_bad) == vt_numel(out_bad), "codebook written");
    DLTensor *all[] = {keys, cb, i8, i16, i_bad, cb_d, huge, i16_1, k3, samples, out, out_bad, s_h};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_decode);
    VT_RUN(test_rope_properties);
    VT_RUN(test_encode);
    VT_RUN(test_train_reduces_error);
    VT_RUN(test_decode_errors);
    VT_RUN(test_encode_train_errors);
    return vt_finish();
}
