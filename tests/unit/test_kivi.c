/* test_kivi.c — KIVI group-affine codec: the layout helpers of
 * format_kivi.h, the quantizers and dequantizers against float64 plain-loop
 * references on every ISA, awkward shapes, packed vs one-per-byte codes, f16
 * parameters, every error path; and the f16 row converters the codec drivers
 * use (every ISA against vq_f16_to_f32 / vq_f32_to_f16). */
#include "formats/format_kivi.h"
#include "harness.h"

/* ---------------------------------------------------------------- layout */

/* Reference: code c of a packed row, assembled one stream bit at a time from
 * the library's bit order (stream bit s = bit s % 8 of byte s / 8). */
static uint32_t ref_packed_code(const uint8_t *row, int64_t c, int bits)
{
    uint32_t v = 0;
    for (int k = 0; k < bits; k++) {
        const int64_t s = c * bits + k;
        v |= (uint32_t)((row[s / 8] >> (s % 8)) & 1) << k;
    }
    return v;
}

static void test_format_codes(void)
{
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    const int widths[] = {2, 4, 8};
    for (int w = 0; w < 3; w++) {
        const int bits = widths[w];
        for (int64_t d = 8; d <= 256; d += 88) {
            uint8_t codes[256], row[256];
            memset(row, 0xA5, sizeof row);
            for (int64_t c = 0; c < d; c++) codes[c] = (uint8_t)(vq_rng_next(&rng) & vq_kivi_code_mask(bits));
            vq_kivi_pack_row(codes, d, bits, row);
            const int64_t nbytes = vq_kivi_packed_row_bytes(d, bits);
            VT_CHECK(nbytes == d * bits / 8, "row bytes");
            VT_CHECK(nbytes == 256 || row[nbytes] == 0xA5, "pack_row wrote past the row (bits %d, d %lld)", bits,
                     (long long)d);
            int bad = 0;
            for (int64_t c = 0; c < d; c++) {
                bad += ref_packed_code(row, c, bits) != codes[c];
                bad += vq_kivi_code(row, c, bits, 1) != codes[c];
                bad += vq_kivi_code(codes, c, bits, 0) != codes[c];
                bad += vq_kivi_dequant(vq_kivi_code(row, c, bits, 1), 0.25f, -1.0f) !=
                       vq_kivi_dequant(vq_kivi_code(codes, c, bits, 0), 0.25f, -1.0f);
            }
            uint8_t back[256];
            vq_kivi_unpack_row(row, d, bits, back);
            bad += memcmp(back, codes, (size_t)d) != 0;
            VT_CHECK(bad == 0, "%d code mismatches (bits %d, d %lld)", bad, bits, (long long)d);
        }
    }
    VT_CHECK(vq_kivi_packable_bits(2) && vq_kivi_packable_bits(4) && vq_kivi_packable_bits(8) &&
                 !vq_kivi_packable_bits(3) && !vq_kivi_packable_bits(1),
             "packable widths");
    /* hand-made byte: codes 1,2,3,0 at 2 bits = 0b00111001 */
    const uint8_t b = 0x39;
    VT_CHECK(vq_kivi_code_packed(&b, 0, 2) == 1 && vq_kivi_code_packed(&b, 1, 2) == 2 &&
                 vq_kivi_code_packed(&b, 2, 2) == 3 && vq_kivi_code_packed(&b, 3, 2) == 0,
             "LSB-first order");
    VT_CHECK(vq_kivi_dequant(3, 0.5f, 1.0f) == 2.5f, "dequant");
    const uint8_t wide = 0xB7;
    VT_CHECK(vq_kivi_code(&wide, 0, 2, 0) == 0xB7, "a one-per-byte code is read whole");
    VT_CHECK(vq_kivi_key_param_index(7, 5, 4, 64) == 1 * 64 + 5, "key param index");
    VT_CHECK(vq_kivi_value_param_index(7, 5, 4, 16) == 7 * 16 + 1, "value param index");
}

/* ---------------------------------------------------------------- references */

/* One case: x [B,H,S,D], keys (per channel over g tokens) or values (per token
 * over g channels). */
typedef struct {
    int keys;
    int64_t b, h, s, d, g;
    int bits;
} acase;

static int64_t gs_of(const acase *k) { return k->keys ? (k->s + k->g - 1) / k->g : k->s; }
static int64_t gd_of(const acase *k) { return k->keys ? k->d : (k->d + k->g - 1) / k->g; }

/* Index of the scale/zero element that element (bh, t, c) belongs to. */
static int64_t param_index(const acase *k, int64_t bh, int64_t t, int64_t c)
{
    return k->keys ? (bh * gs_of(k) + t / k->g) * k->d + c : (bh * k->s + t) * gd_of(k) + c / k->g;
}

/* float64 reference of the group statistics: ref_scale = (max - min) /
 * (2^bits - 1) and ref_zero = min over every group. */
static void ref_params(const acase *k, const DLTensor *x, double *ref_scale, double *ref_zero)
{
    const int64_t np = k->b * k->h * gs_of(k) * gd_of(k);
    double *mx = malloc((size_t)np * sizeof *mx);
    for (int64_t p = 0; p < np; p++) { ref_zero[p] = INFINITY; mx[p] = -INFINITY; }
    for (int64_t bh = 0; bh < k->b * k->h; bh++)
        for (int64_t t = 0; t < k->s; t++)
            for (int64_t c = 0; c < k->d; c++) {
                const int64_t p = param_index(k, bh, t, c);
                const double v = vt_get(x, (bh * k->s + t) * k->d + c);
                if (v < ref_zero[p]) ref_zero[p] = v;
                if (v > mx[p]) mx[p] = v;
            }
    for (int64_t p = 0; p < np; p++) ref_scale[p] = (mx[p] - ref_zero[p]) / ((1 << k->bits) - 1);
    free(mx);
}

/* Code of element (bh, t, c) of a codes tensor in either layout. */
static uint32_t code_at(const acase *k, const DLTensor *codes, int64_t row, int64_t c)
{
    const int64_t cd = codes->shape[3];
    const uint8_t *r = (const uint8_t *)codes->data + row * cd;
    return cd == k->d ? r[c] : ref_packed_code(r, c, k->bits);
}

/* float64 reference of the codes against the stored scale/zero: round((x -
 * zero) / scale) clamped, 0 when scale == 0. A mismatch is accepted only
 * where the quotient lies within 1e-6 relative of a rounding boundary
 * (docs/FORMATS.md §1). Returns the number of wrong codes. */
static int64_t check_codes(const acase *k, const DLTensor *x, const DLTensor *codes, const DLTensor *scale,
                           const DLTensor *zero)
{
    const int maxq = (1 << k->bits) - 1;
    int64_t wrong = 0;
    for (int64_t bh = 0; bh < k->b * k->h; bh++)
        for (int64_t t = 0; t < k->s; t++)
            for (int64_t c = 0; c < k->d; c++) {
                const int64_t p = param_index(k, bh, t, c), row = bh * k->s + t;
                const double s = vt_get(scale, p), z = vt_get(zero, p);
                const double q = s == 0 ? 0 : (vt_get(x, row * k->d + c) - z) / s;
                const double qc = q < 0 ? 0 : q > maxq ? maxq : q;
                const double want = nearbyint(qc);
                const double dist = fabs(fabs(qc - floor(qc)) - 0.5);
                const uint32_t got = code_at(k, codes, row, c);
                if (got != (uint32_t)want && dist > 1e-6 * (qc > 1 ? qc : 1)) wrong++;
            }
    return wrong;
}

/* float64 reference of the dequantizer: code * scale + zero. */
static double *ref_dequant(const acase *k, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero)
{
    double *ref = malloc((size_t)(k->b * k->h * k->s * k->d) * sizeof *ref);
    for (int64_t bh = 0; bh < k->b * k->h; bh++)
        for (int64_t t = 0; t < k->s; t++)
            for (int64_t c = 0; c < k->d; c++) {
                const int64_t p = param_index(k, bh, t, c), row = bh * k->s + t;
                ref[row * k->d + c] = code_at(k, codes, row, c) * vt_get(scale, p) + vt_get(zero, p);
            }
    return ref;
}

/* ---------------------------------------------------------------- library vs reference */

typedef vq_status (*quantize_fn)(vq_ctx *, const DLTensor *, int, int, DLTensor *, DLTensor *, DLTensor *);
typedef vq_status (*dequantize_fn)(vq_ctx *, const DLTensor *, const DLTensor *, const DLTensor *, int, int,
                                   DLTensor *);

/* Runs one case in one layout and dtype combination; returns the codes and
 * the dequantized tensor (f32) for the packed-vs-unpacked comparison. */
static void run_case(vq_ctx *ctx, const char *isa, const acase *k, DLDataType x_dt, DLDataType p_dt, int packed,
                     uint64_t seed, DLTensor **codes_keep, DLTensor **deq_keep)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    DLTensor *x = vt_new(x_dt, VT_DIMS(k->b, k->h, k->s, k->d));
    vt_fill_keys(x, &rng, 2, 8.0);
    /* a flat group: max == min gives scale 0 and codes 0 */
    for (int64_t i = 0; i < (k->keys ? k->s : (k->g < k->d ? k->g : k->d)); i++)
        vt_set(x, k->keys ? i * k->d + 1 : i, 0.75);
    const int64_t cd = packed ? k->d * k->bits / 8 : k->d;
    DLTensor *codes = vt_new(VT_U8, VT_DIMS(k->b, k->h, k->s, cd));
    DLTensor *scale = vt_new(p_dt, VT_DIMS(k->b, k->h, gs_of(k), gd_of(k)));
    DLTensor *zero = vt_like(scale, p_dt);
    const quantize_fn q = k->keys ? vq_kivi_quantize_keys : vq_kivi_quantize_values;
    const dequantize_fn dq = k->keys ? vq_kivi_dequantize_keys : vq_kivi_dequantize_values;
    VT_OK(ctx, q(ctx, x, k->bits, (int)k->g, codes, scale, zero));
    char what[160];
    /* unwritten outputs: a second run over a different fill must give the same bytes
     * (a single poison pattern is a legal u8 code and a legal f16 value) */
    void *c_first = vt_snapshot(codes), *s_first = vt_snapshot(scale), *z_first = vt_snapshot(zero);
    memset(codes->data, 0x5A, vt_bytes(codes));
    memset(scale->data, 0x5A, vt_bytes(scale));
    memset(zero->data, 0x5A, vt_bytes(zero));
    VT_OK(ctx, q(ctx, x, k->bits, (int)k->g, codes, scale, zero));
    snprintf(what, sizeof what, "%s %s S=%lld D=%lld g=%lld bits=%d x=%s p=%s %s", isa, k->keys ? "keys" : "values",
             (long long)k->s, (long long)k->d, (long long)k->g, k->bits, x_dt.bits == 16 ? "f16" : "f32",
             p_dt.bits == 16 ? "f16" : "f32", packed ? "packed" : "bytes");
    VT_CHECK(vt_unchanged(scale, s_first) && vt_unchanged(zero, z_first), "%s: unwritten params", what);
    VT_CHECK(vt_unchanged(codes, c_first), "%s: unwritten codes", what);
    free(c_first);
    free(s_first);
    free(z_first);

    /* parameters: within the storage dtype's tolerance of the float64 statistics */
    const int64_t np = vt_numel(scale);
    double *rs = malloc((size_t)np * sizeof *rs), *rz = malloc((size_t)np * sizeof *rz);
    ref_params(k, x, rs, rz);
    VT_CHECK(vt_rel_l2(scale, rs) <= vt_tol(scale), "%s: scale rel err %g", what, vt_rel_l2(scale, rs));
    VT_CHECK(vt_rel_l2(zero, rz) <= vt_tol(zero), "%s: zero rel err %g", what, vt_rel_l2(zero, rz));
    const int64_t flat = param_index(k, 0, 0, k->keys ? 1 : 0);
    VT_CHECK(vt_get(scale, flat) == 0.0 && code_at(k, codes, 0, k->keys ? 1 : 0) == 0, "%s: flat group", what);

    /* codes against the stored (possibly f16-rounded) parameters */
    const int64_t wrong = check_codes(k, x, codes, scale, zero);
    VT_CHECK(wrong == 0, "%s: %lld wrong codes", what, (long long)wrong);

    /* dequantize into f32 and f16 */
    double *ref = ref_dequant(k, codes, scale, zero);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(k->b, k->h, k->s, k->d)), *out16 = vt_like(out, VT_F16);
    VT_OK(ctx, dq(ctx, codes, scale, zero, k->bits, (int)k->g, out));
    VT_OK(ctx, dq(ctx, codes, scale, zero, k->bits, (int)k->g, out16));
    VT_CHECK(vt_count_poisoned(out) == 0, "%s: unwritten dequant output", what);  /* f16 0xA5A5 is a legal value */
    VT_CHECK(vt_rel_l2(out, ref) <= 1e-6, "%s: dequant rel err %g", what, vt_rel_l2(out, ref));
    VT_CHECK(vt_rel_l2(out16, ref) <= vt_tol(out16), "%s: f16 dequant rel err %g", what, vt_rel_l2(out16, ref));
    /* Round trip. With f32 parameters every element is within scale/2 (plus
     * f32 rounding). With f16 parameters the codes are computed against the
     * rounded scale_h, zero_h, so inside [zero_h, zero_h + maxq scale_h] the
     * error is still scale_h/2; outside it the clamp adds at most the distance
     * to the true range, |min - zero_h| + maxq |scale - scale_h| <= 2^-11
     * (|zero_h| + maxq scale_h) for normal halves (2^-25 absolute below). */
    {
        const int maxq = (1 << k->bits) - 1;
        const double u = p_dt.bits == 16 ? 0x1p-11 : 0x1p-24;
        int64_t far = 0;
        for (int64_t i = 0; i < vt_numel(x); i++) {
            const int64_t row = i / k->d, c = i % k->d, p = param_index(k, row / k->s, row % k->s, c);
            const double s = vt_get(scale, p), z = vt_get(zero, p);
            const double bound = s * 0.5 * (1 + 1e-5) + u * (fabs(z) + maxq * s) + 0x1p-25 + 1e-6 * fabs(vt_get(x, i));
            far += fabs(vt_get(out, i) - vt_get(x, i)) > bound;
        }
        VT_CHECK(far == 0, "%s: %lld elements further than the round-trip bound from x", what, (long long)far);
    }
    free(ref);
    free(rs);
    free(rz);
    vt_free(out16);
    vt_free(x);
    vt_free(scale);
    vt_free(zero);
    *codes_keep = codes;
    *deq_keep = out;
}

static void kivi_all_cases(vq_ctx *ctx, const char *isa)
{
    static const int64_t lens[] = {1, 7, 97};
    static const int64_t dims[] = {64, 96, 128, 256};
    static const struct { int64_t g; int bits; } params[] = {{1, 2}, {32, 4}, {5, 8}, {128, 2}, {3, 3}, {16, 1}};
    int n = 0;
    for (int keys = 0; keys < 2; keys++)
        for (int si = 0; si < 3; si++)
            for (int di = 0; di < 4; di++) {
                const int pi = n++ % 6;
                const acase k = {keys, 1 + si % 2, 2, lens[si], dims[di], params[pi].g, params[pi].bits};
                const DLDataType x_dt = n % 2 ? VT_F32 : VT_F16, p_dt = n % 3 ? VT_F32 : VT_F16;
                DLTensor *c1, *o1, *c2, *o2;
                run_case(ctx, isa, &k, x_dt, p_dt, 0, 100 + (uint64_t)n, &c1, &o1);
                if (vq_kivi_packable_bits(k.bits)) {
                    /* packed codes: same codes, bit-identical decode */
                    run_case(ctx, isa, &k, x_dt, p_dt, 1, 100 + (uint64_t)n, &c2, &o2);
                    int64_t diff = 0;
                    for (int64_t row = 0; row < k.b * k.h * k.s; row++)
                        for (int64_t c = 0; c < k.d; c++) diff += code_at(&k, c1, row, c) != code_at(&k, c2, row, c);
                    VT_CHECK(diff == 0, "%s: %lld packed codes differ", isa, (long long)diff);
                    VT_CHECK(memcmp(o1->data, o2->data, vt_bytes(o1)) == 0, "%s: packed decode differs", isa);
                    vt_free(c2);
                    vt_free(o2);
                }
                vt_free(c1);
                vt_free(o1);
            }
}

static void test_kivi_vs_reference(void) { vt_for_each_isa(2, kivi_all_cases); }

/* Every ISA produces the same codes and decodes as the scalar path. */
static void test_kivi_isas_agree(void)
{
    const acase k = {1, 1, 3, 97, 96, 7, 4};
    DLTensor *c[VQ_ISA_COUNT] = {0}, *o[VQ_ISA_COUNT] = {0};
    int n = 0;
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++) {
        if (!vq_isa_includes(vq_cpu_best_isa(), (vq_isa)isa)) continue;
        setenv("VQ_ISA", vq_isa_name((vq_isa)isa), 1);
        vq_ctx *ctx = vt_ctx(2);
        run_case(ctx, vq_ctx_isa(ctx), &k, VT_F32, VT_F32, 1, 5, &c[n], &o[n]);
        vq_ctx_free(ctx);
        n++;
    }
    unsetenv("VQ_ISA");
    for (int i = 1; i < n; i++) {
        VT_CHECK(memcmp(c[0]->data, c[i]->data, vt_bytes(c[0])) == 0, "codes differ between ISAs");
        VT_CHECK(memcmp(o[0]->data, o[i]->data, vt_bytes(o[0])) == 0, "decodes differ between ISAs");
    }
    for (int i = 0; i < n; i++) { vt_free(c[i]); vt_free(o[i]); }
}

/* ---------------------------------------------------------------- errors */

static void test_kivi_errors(void)
{
    vq_ctx *ctx = vt_ctx(1);
    DLTensor *k = vt_new(VT_F32, VT_DIMS(1, 2, 9, 64));
    vq_rng rng;
    vq_rng_seed(&rng, 3);
    vt_fill_normal(k, &rng, 0, 1);
    DLTensor *codes = vt_new(VT_U8, VT_DIMS(1, 2, 9, 64)), *packed = vt_new(VT_U8, VT_DIMS(1, 2, 9, 16));
    DLTensor *ks = vt_new(VT_F32, VT_DIMS(1, 2, 3, 64)), *kz = vt_like(ks, VT_F32);
    DLTensor *vs = vt_new(VT_F32, VT_DIMS(1, 2, 9, 22)), *vz = vt_like(vs, VT_F32);
    DLTensor *out = vt_new(VT_F32, VT_DIMS(1, 2, 9, 64));
    DLTensor *bad3 = vt_new(VT_F32, VT_DIMS(2, 9, 64)), *u8x = vt_like(k, VT_U8), *f16z = vt_like(kz, VT_F16);
    DLTensor *wrong_lead = vt_new(VT_U8, VT_DIMS(1, 2, 8, 64)), *wrong_gk = vt_new(VT_F32, VT_DIMS(1, 2, 2, 64));
    DLTensor *odd_cd = vt_new(VT_U8, VT_DIMS(1, 2, 9, 20));
    void *s_codes = vt_snapshot(codes), *s_packed = vt_snapshot(packed), *s_ks = vt_snapshot(ks),
         *s_kz = vt_snapshot(kz), *s_vs = vt_snapshot(vs), *s_out = vt_snapshot(out);
    const vq_status E = VQ_ERR_INVALID_ARGUMENT;

    VT_CHECK(vq_kivi_quantize_keys(NULL, k, 4, 3, codes, ks, kz) == E, "NULL ctx");
    VT_FAILS(ctx, E, "'k' is NULL", vq_kivi_quantize_keys(ctx, NULL, 4, 3, codes, ks, kz));
    VT_FAILS(ctx, E, "'codes_out' is NULL", vq_kivi_quantize_keys(ctx, k, 4, 3, NULL, ks, kz));
    VT_FAILS(ctx, E, "'scale_out' is NULL", vq_kivi_quantize_keys(ctx, k, 4, 3, codes, NULL, kz));
    VT_FAILS(ctx, E, "'zero_out' is NULL", vq_kivi_quantize_keys(ctx, k, 4, 3, codes, ks, NULL));
    VT_FAILS(ctx, E, "'k': expected rank 4", vq_kivi_quantize_keys(ctx, bad3, 4, 3, codes, ks, kz));
    VT_FAILS(ctx, E, "'v': expected dtype f32/f16", vq_kivi_quantize_values(ctx, u8x, 4, 3, codes, vs, vz));
    VT_FAILS(ctx, E, "'bits' must be in 1..8, got 0", vq_kivi_quantize_keys(ctx, k, 0, 3, codes, ks, kz));
    VT_FAILS(ctx, E, "'bits' must be in 1..8, got 9", vq_kivi_quantize_keys(ctx, k, 9, 3, codes, ks, kz));
    VT_FAILS(ctx, E, "'group_size' must be >= 1, got 0", vq_kivi_quantize_keys(ctx, k, 4, 0, codes, ks, kz));
    VT_FAILS(ctx, E, "'codes_out'", vq_kivi_quantize_keys(ctx, k, 4, 3, wrong_lead, ks, kz));
    VT_FAILS(ctx, E, "'scale_out'", vq_kivi_quantize_keys(ctx, k, 4, 3, codes, wrong_gk, kz));
    VT_FAILS(ctx, E, "'scale_out'", vq_kivi_quantize_keys(ctx, k, 4, 3, codes, ks, kz) == VQ_OK
                                         ? vq_kivi_quantize_values(ctx, k, 4, 3, codes, ks, kz) : VQ_OK);
    vt_poison(codes); vt_poison(ks); vt_poison(kz);   /* the previous line's keys call succeeded */
    VT_FAILS(ctx, E, "'zero_out' has dtype f16 but 'scale_out' has f32",
             vq_kivi_quantize_keys(ctx, k, 4, 3, codes, ks, f16z));
    VT_FAILS(ctx, E, "D*bits/8 = 16 (bit-packed)", vq_kivi_quantize_keys(ctx, k, 2, 3, odd_cd, ks, kz));
    VT_FAILS(ctx, E, "bit-packed codes need bits 2, 4 or 8", vq_kivi_quantize_keys(ctx, k, 3, 3, packed, ks, kz));
    VT_FAILS(ctx, E, "'codes'", vq_kivi_dequantize_keys(ctx, packed, ks, kz, 3, 3, out));
    VT_FAILS(ctx, E, "'out': expected dtype f32/f16", vq_kivi_dequantize_keys(ctx, codes, ks, kz, 4, 3, u8x));
    VT_FAILS(ctx, E, "'scale'", vq_kivi_dequantize_values(ctx, codes, ks, kz, 4, 3, out));
    VT_FAILS(ctx, E, "'group_size' must be >= 1", vq_kivi_dequantize_values(ctx, codes, vs, vz, 4, -2, out));
    VT_FAILS(ctx, E, "'zero' is NULL", vq_kivi_dequantize_values(ctx, codes, vs, NULL, 4, 3, out));
    VT_CHECK(vt_unchanged(codes, s_codes) && vt_unchanged(packed, s_packed) && vt_unchanged(ks, s_ks) &&
                 vt_unchanged(kz, s_kz) && vt_unchanged(vs, s_vs) && vt_unchanged(out, s_out),
             "a failing call wrote output");
    free(s_codes); free(s_packed); free(s_ks); free(s_kz); free(s_vs); free(s_out);
    DLTensor *all[] = {k, codes, packed, ks, kz, vs, vz, out, bad3, u8x, f16z, wrong_lead, wrong_gk, odd_cd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_format_codes);
    VT_RUN(test_kivi_vs_reference);
    VT_RUN(test_kivi_isas_agree);
    VT_RUN(test_kivi_errors);
    return vt_finish();
}
