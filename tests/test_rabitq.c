/* test_rabitq.c — the RaBitQ layout (format_rabitq.h): sign bits, nibbles,
 * Hamming distances and logits against plain reference loops. */
#include "formats/format_rabitq.h"
#include "harness.h"

static void test_format_rabitq(void)
{
    vq_rng rng;
    vq_rng_seed(&rng, 2);
    uint8_t a[128], b[128];
    for (int i = 0; i < 128; i++) { a[i] = (uint8_t)vq_rng_next(&rng); b[i] = (uint8_t)vq_rng_next(&rng); }
    int bad = 0, ham = 0;
    for (int j = 0; j < 1024; j++) {
        const int bit = (a[j / 8] >> (j % 8)) & 1;
        bad += vq_rabitq_sign(a, j) != (bit ? 1.0f : -1.0f);
        ham += bit != ((b[j / 8] >> (j % 8)) & 1);
        bad += vq_rabitq_nibble(a, j % 256) != (uint32_t)((j % 256) % 2 ? a[(j % 256) / 2] >> 4 : a[(j % 256) / 2] & 15);
    }
    VT_CHECK(bad == 0, "%d sign/nibble mismatches", bad);
    VT_CHECK(vq_rabitq_hamming(a, b, 128) == ham, "hamming %d vs %d", vq_rabitq_hamming(a, b, 128), ham);
    VT_CHECK(vq_popcount32(0xffffffffu) == 32 && vq_popcount32(0x80000001u) == 2, "popcount");
    const uint32_t w[2] = {0x80000001u, 0x2u};
    VT_CHECK(vq_bit_u32(w, 0) == 1 && vq_bit_u32(w, 31) == 1 && vq_bit_u32(w, 30) == 0 && vq_bit_u32(w, 33) == 1,
             "u32 stream order");
    VT_CHECK(vq_rabitq_pack_pair(0x13, 0x2f) == 0xf3, "pack pair masks and orders nibbles");
    VT_CHECK(vq_rabitq_clamp_index(20, 16) == 15 && vq_rabitq_clamp_index(3, 16) == 3, "clamp");
    VT_CHECK(vq_rabitq_hamming_logit(64, 10, 0.5f, 2.0f, 1.0f) == 45.0f, "hamming logit (64-20)*.5*2+1");
    VT_CHECK(vq_rabitq_exact_logit(3.0f, 0.5f, 2.0f, -1.0f) == 2.0f, "exact logit");
}

int main(void)
{
    VT_RUN(test_format_rabitq);
    return vt_finish();
}
