/* test_bitpack.c — vq_bit_pack / vq_bit_unpack and the format_bitpack.h
 * helpers against a bit-by-bit reference: every width 1..16, u8/u16/i32
 * inputs with out-of-range values (masking), words straddled, rows longer
 * than a task block, poisoned outputs, every error path. */
#include "formats/format_bitpack.h"
#include "harness.h"

/* The stream of docs/FORMATS.md §2, one bit at a time: element i's bit k is stream bit
 * s = i*bits + k, which is bit s % 32 of word s / 32. */
static void reference_pack(const int64_t *vals, int64_t n, int bits, uint32_t *words)
{
    memset(words, 0, (size_t)vq_bitpack_words(n, bits) * 4);
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < bits; k++) {
            const int64_t s = i * bits + k;
            if ((vals[i] >> k) & 1) words[s / 32] |= 1u << (s % 32);
        }
}

static int64_t mask_of(int bits) { return ((int64_t)1 << bits) - 1; }

static void check_case(vq_ctx *ctx, DLDataType dt, int bits, int64_t rows, int64_t n, vq_rng *rng)
{
    DLTensor *idx = vt_new(dt, VT_DIMS(rows, n));
    const int64_t w = vq_bitpack_words(n, bits);
    DLTensor *packed = vt_new(VT_U32, VT_DIMS(rows, w));
    /* the dtype's full range, so masking matters (i32 includes negatives) */
    if (dt.bits == 8) vt_fill_uniform_int(idx, rng, 0, 255);
    else if (dt.bits == 16) vt_fill_uniform_int(idx, rng, 0, 65535);
    else vt_fill_uniform_int(idx, rng, -100000, 100000);
    VT_OK(ctx, vq_bit_pack(ctx, idx, bits, packed));
    int64_t *vals = malloc((size_t)n * sizeof *vals);
    uint32_t *ref = malloc((size_t)w * 4);
    int bad_words = 0, bad_get = 0, bad_or = 0;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) vals[i] = (int64_t)vt_get(idx, r * n + i);
        reference_pack(vals, n, bits, ref);
        const uint32_t *got = (const uint32_t *)packed->data + r * w;
        bad_words += memcmp(got, ref, (size_t)w * 4) != 0;
        /* the header helpers on the same stream */
        for (int64_t i = 0; i < n; i++) bad_get += vq_bitpack_get(got, i, bits) != (uint32_t)(vals[i] & mask_of(bits));
        uint32_t *built = calloc((size_t)w, 4);
        for (int64_t i = 0; i < n; i++) vq_bitpack_or(built, i, bits, (uint32_t)vals[i]);
        bad_or += memcmp(built, ref, (size_t)w * 4) != 0;
        free(built);
    }
    VT_CHECK(bad_words == 0, "pack bits %d dtype %d/%d n %lld: %d rows differ", bits, dt.code, dt.bits, (long long)n, bad_words);
    VT_CHECK(bad_get == 0 && bad_or == 0, "helpers bits %d n %lld: get %d or %d", bits, (long long)n, bad_get, bad_or);

    DLTensor *back = vt_new(VT_I32, VT_DIMS(rows, n));
    VT_OK(ctx, vq_bit_unpack(ctx, packed, bits, n, back));
    int bad_back = 0;
    for (int64_t i = 0; i < rows * n; i++) bad_back += (int64_t)vt_get(back, i) != ((int64_t)vt_get(idx, i) & mask_of(bits));
    VT_CHECK(bad_back == 0, "unpack i32 bits %d n %lld: %d wrong", bits, (long long)n, bad_back);
    if (bits <= 8) {
        DLTensor *back8 = vt_new(VT_U8, VT_DIMS(rows, n));
        VT_OK(ctx, vq_bit_unpack(ctx, packed, bits, n, back8));
        int bad8 = 0;
        for (int64_t i = 0; i < rows * n; i++) bad8 += (int64_t)vt_get(back8, i) != ((int64_t)vt_get(idx, i) & mask_of(bits));
        VT_CHECK(bad8 == 0, "unpack u8 bits %d n %lld: %d wrong", bits, (long long)n, bad8);
        vt_free(back8);
    }
    free(vals);
    free(ref);
    vt_free(idx);
    vt_free(packed);
    vt_free(back);
}

static void test_every_width_and_dtype(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 77);
    const DLDataType dts[3] = {VT_U8, VT_U16, VT_I32};
    const int64_t ns[] = {1, 2, 7, 31, 32, 33, 97, 1000};
    for (int bits = 1; bits <= 16; bits++)
        for (int t = 0; t < 3; t++)
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) check_case(ctx, dts[t], bits, 3, ns[k], &rng);
    vq_ctx_free(ctx);
}

/* Rows longer than a task block (16384 elements), and a single long row. */
static void test_long_rows(void)
{
    vq_ctx *ctx = vt_ctx(2);
    vq_rng rng;
    vq_rng_seed(&rng, 78);
    const int widths[] = {1, 3, 8, 13, 16};
    for (int k = 0; k < 5; k++) {
        check_case(ctx, VT_U16, widths[k], 2, 40001, &rng);
        check_case(ctx, VT_I32, widths[k], 1, 65536 + 5, &rng);
    }
    vq_ctx_free(ctx);
}

/* Higher ranks: leading dims are rows. Unused high bits of each row's last
 * word are zero even when the output was poisoned. */
static void test_rank3_and_padding(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(2, 3, 5));
    for (int64_t i = 0; i < 30; i++) vt_set(idx, i, 255);
    DLTensor *packed = vt_new(VT_U32, VT_DIMS(2, 3, 1)); /* 5 * 3 bits = 15 bits */
    VT_OK(ctx, vq_bit_pack(ctx, idx, 3, packed));
    for (int64_t r = 0; r < 6; r++) VT_CHECK(((uint32_t *)packed->data)[r] == 0x7fffu, "row %lld: %08x", (long long)r, ((uint32_t *)packed->data)[r]);
    vt_free(idx);
    vt_free(packed);
    vq_ctx_free(ctx);
}

static void test_errors(void)
{
    vq_ctx *ctx = vt_ctx(2);
    DLTensor *idx = vt_new(VT_U8, VT_DIMS(2, 10)), *out = vt_new(VT_U32, VT_DIMS(2, 2)); /* 10 * 5 bits = 2 words */
    DLTensor *idx_f32 = vt_new(VT_F32, VT_DIMS(2, 10)), *out_i32 = vt_new(VT_I32, VT_DIMS(2, 2));
    DLTensor *out_rank = vt_new(VT_U32, VT_DIMS(4)), *out_lead = vt_new(VT_U32, VT_DIMS(3, 2));
    DLTensor *out_w = vt_new(VT_U32, VT_DIMS(2, 3));
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    vt_fill_uniform_int(idx, &rng, 0, 31);
    void *snap = vt_snapshot(out);
    VT_CHECK(vq_bit_pack(NULL, idx, 5, out) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' is NULL", vq_bit_pack(ctx, NULL, 5, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' is NULL", vq_bit_pack(ctx, idx, 5, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..16, got 0", vq_bit_pack(ctx, idx, 0, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..16, got 17", vq_bit_pack(ctx, idx, 17, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx': expected dtype u8/u16/i32", vq_bit_pack(ctx, idx_f32, 5, out));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected dtype u32", vq_bit_pack(ctx, idx, 5, out_i32));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected rank 2", vq_bit_pack(ctx, idx, 5, out_rank));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'idx' [2, 10] and 'out' [3, 2] disagree", vq_bit_pack(ctx, idx, 5, out_lead));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' has shape [2, 3]: axis 1 must be ceil(N*bits/32) = 2",
             vq_bit_pack(ctx, idx, 5, out_w));
    VT_CHECK(vt_unchanged(out, snap), "failed pack wrote nothing");
    free(snap);

    VT_OK(ctx, vq_bit_pack(ctx, idx, 5, out));
    DLTensor *back = vt_new(VT_I32, VT_DIMS(2, 10)), *back_u8 = vt_new(VT_U8, VT_DIMS(2, 10));
    DLTensor *back_f32 = vt_new(VT_F32, VT_DIMS(2, 10)), *back_n = vt_new(VT_I32, VT_DIMS(2, 11));
    DLTensor *back_lead = vt_new(VT_I32, VT_DIMS(1, 10));
    DLTensor *packed9 = vt_new(VT_U32, VT_DIMS(2, 3)); /* 10 * 9 bits = 3 words */
    memset(packed9->data, 0, vt_bytes(packed9));
    snap = vt_snapshot(back);
    void *snap8 = vt_snapshot(back_u8);
    VT_CHECK(vq_bit_unpack(NULL, out, 5, 10, back) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'packed' is NULL", vq_bit_unpack(ctx, NULL, 5, 10, back));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out' is NULL", vq_bit_unpack(ctx, out, 5, 10, NULL));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'packed': expected dtype u32", vq_bit_unpack(ctx, idx, 5, 10, back));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "bits must be in 1..16, got 17", vq_bit_unpack(ctx, out, 17, 10, back));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "original_length must be >= 1, got 0", vq_bit_unpack(ctx, out, 5, 0, back));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'packed' has shape [2, 2]: axis 1 must be ceil(original_length*bits/32) = 4",
             vq_bit_unpack(ctx, out, 5, 20, back));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': expected dtype u8/i32", vq_bit_unpack(ctx, out, 5, 10, back_f32));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "'out': dtype u8 holds at most 8 bits", vq_bit_unpack(ctx, packed9, 9, 10, back_u8));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "axis 1 must be original_length = 10", vq_bit_unpack(ctx, out, 5, 10, back_n));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "disagree", vq_bit_unpack(ctx, out, 5, 10, back_lead));
    VT_CHECK(vt_unchanged(back, snap) && vt_unchanged(back_u8, snap8), "failed unpack wrote nothing");
    free(snap);
    free(snap8);
    DLTensor *all[] = {idx, out, idx_f32, out_i32, out_rank, out_lead, out_w, back, back_u8, back_f32, back_n, back_lead, packed9};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_every_width_and_dtype);
    VT_RUN(test_long_rows);
    VT_RUN(test_rank3_and_padding);
    VT_RUN(test_errors);
    return vt_finish();
}
