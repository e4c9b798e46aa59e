/* test_affine.c — the KIVI group-affine layout (format_affine.h): packed and
 * one-per-byte code rows decode identically, against a bit-by-bit reference. */
#include "formats/format_affine.h"
#include "harness.h"

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
            uint8_t codes[256], row[256], unpacked[256];
            memset(row, 0xA5, sizeof row);
            for (int64_t c = 0; c < d; c++) codes[c] = (uint8_t)(vq_rng_next(&rng) & vq_affine_code_mask(bits));
            vq_affine_pack_row(codes, d, bits, row);
            const int64_t nbytes = vq_affine_packed_row_bytes(d, bits);
            VT_CHECK(nbytes == d * bits / 8, "row bytes");
            VT_CHECK(row[nbytes] == 0xA5, "pack_row wrote past the row (bits %d, d %lld)", bits, (long long)d);
            int bad = 0;
            for (int64_t c = 0; c < d; c++) {
                /* unpacked row with garbage high bits: masked away */
                unpacked[c] = (uint8_t)(codes[c] | (bits < 8 ? (uint8_t)(vq_rng_next(&rng) << bits) : 0));
                bad += ref_packed_code(row, c, bits) != codes[c];
                bad += vq_affine_code(row, c, bits, 1) != codes[c];
                bad += vq_affine_code(unpacked, c, bits, 0) != codes[c];
                bad += vq_affine_dequant(vq_affine_code(row, c, bits, 1), 0.25f, -1.0f) !=
                       vq_affine_dequant(vq_affine_code(unpacked, c, bits, 0), 0.25f, -1.0f);
            }
            VT_CHECK(bad == 0, "%d code mismatches (bits %d, d %lld)", bad, bits, (long long)d);
        }
    }
    VT_CHECK(vq_affine_packable_bits(2) && vq_affine_packable_bits(4) && vq_affine_packable_bits(8) &&
                 !vq_affine_packable_bits(3) && !vq_affine_packable_bits(1),
             "packable widths");
    /* hand-made byte: codes 1,2,3,0 at 2 bits = 0b00111001 */
    const uint8_t b = 0x39;
    VT_CHECK(vq_affine_code_packed(&b, 0, 2) == 1 && vq_affine_code_packed(&b, 1, 2) == 2 &&
                 vq_affine_code_packed(&b, 2, 2) == 3 && vq_affine_code_packed(&b, 3, 2) == 0,
             "LSB-first order");
    VT_CHECK(vq_affine_dequant(3, 0.5f, 1.0f) == 2.5f, "dequant");
    VT_CHECK(vq_affine_key_param_index(7, 5, 4, 64) == 1 * 64 + 5, "key param index");
    VT_CHECK(vq_affine_value_param_index(7, 5, 4, 16) == 7 * 16 + 1, "value param index");
}

int main(void)
{
    VT_RUN(test_format_codes);
    return vt_finish();
}
