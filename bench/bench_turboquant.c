/* bench_turboquant.c — throughput of the TurboQuant codecs, the Hadamard
 * rotation and bit packing, per ISA and thread count (best of 5 runs).
 * Not part of the test suite (timings are never asserted). Build and run:
 *   cc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -Itests \
 *      bench/bench_turboquant.c tests/harness.c build/libveloxquant.a -lpthread -lm -o /tmp/bench_tq
 *   /tmp/bench_tq [threads...]        (default: 1 and all cores)
 * GB/s counts the bytes of the larger side (f32/f16 values), read or written. */
#include <time.h>

#include "harness.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define BENCH(label, bytes, call)                                                          \
    do {                                                                                   \
        (void)(call);                                                                      \
        double best_ = 1e30;                                                               \
        for (int rep_ = 0; rep_ < 5; rep_++) {                                             \
            const double t0_ = now();                                                      \
            (void)(call);                                                                  \
            const double dt_ = now() - t0_;                                                \
            if (dt_ < best_) best_ = dt_;                                                  \
        }                                                                                  \
        printf("%-8s %3d  %-44s %9.3f ms %8.2f GB/s\n", isa, threads, label, best_ * 1e3, \
               (double)(bytes) / best_ / 1e9);                                             \
    } while (0)

static void run(const char *isa, int threads)
{
    setenv("VQ_ISA", isa, 1);
    vq_ctx *ctx = vt_ctx(threads);
    if (strcmp(vq_ctx_isa(ctx), isa) != 0) { vq_ctx_free(ctx); return; }
    vq_rng rng;
    vq_rng_seed(&rng, 1);
    const int64_t R = 32768, D = 128;
    const double B32 = 4.0 * R * D, B16 = 2.0 * R * D;
    DLTensor *x = vt_new(VT_F32, VT_DIMS(R, D)), *o = vt_new(VT_F32, VT_DIMS(R, D));
    DLTensor *xh = vt_new(VT_F16, VT_DIMS(R, D)), *oh = vt_new(VT_F16, VT_DIMS(R, D));
    DLTensor *X = vt_new(VT_F32, VT_DIMS(4096, 1024));
    DLTensor *i1 = vt_new(VT_U8, VT_DIMS(R, D)), *s1 = vt_new(VT_F32, VT_DIMS(R));
    DLTensor *i2 = vt_new(VT_U8, VT_DIMS(R, D)), *s2 = vt_new(VT_F32, VT_DIMS(R));
    DLTensor *diag = vt_new(VT_F32, VT_DIMS(D)), *diag1k = vt_new(VT_F32, VT_DIMS(1024));
    vt_fill_signs(diag, &rng);
    vt_fill_signs(diag1k, &rng);
    vt_fill_normal(x, &rng, 0, 1);
    vt_fill_normal(xh, &rng, 0, 1);
    vt_fill_normal(X, &rng, 0, 1);
    BENCH("hadamard f32 [32768,128] -> f32", 2 * B32, vq_hadamard(ctx, x, diag, false, o));
    BENCH("hadamard f16 [32768,128] -> f16", 2 * B16, vq_hadamard(ctx, xh, diag, false, oh));
    BENCH("hadamard f32 [4096,1024] in place", 2 * 4.0 * 4096 * 1024, vq_hadamard(ctx, X, diag1k, false, X));
    char label[64];
    for (int b = 1; b <= 8; b++) {
        snprintf(label, sizeof label, "hadamard_quantize f16 b=%d", b);
        BENCH(label, B16, vq_turboquant_hadamard_quantize(ctx, xh, diag, b, i1, s1, NULL));
    }
    BENCH("hadamard_dequantize b=4 -> f16", B16, vq_turboquant_hadamard_dequantize(ctx, i1, s1, diag, 4, oh));
    BENCH("rvq_encode f16 b=4+4", B16, vq_turboquant_rvq_encode(ctx, xh, diag, 4, 4, i1, s1, i2, s2));
    BENCH("rvq_decode b=4+4 -> f16", B16, vq_turboquant_rvq_decode(ctx, i1, s1, i2, s2, diag, 4, 4, oh));
    /* element-wise codecs on the same 4M values */
    BENCH("scalar_quantize f32 b=4", B32, vq_turboquant_scalar_quantize(ctx, x, 4, i1));
    BENCH("scalar_quantize f32 b=8", B32, vq_turboquant_scalar_quantize(ctx, x, 8, i1));
    BENCH("scalar_dequantize b=4 -> f32", B32, vq_turboquant_scalar_dequantize(ctx, i1, 4, 1.0f, o));
    DLTensor *cents = vt_new(VT_F32, VT_DIMS(16));
    vq_lloyd_max_codebook(4, cents->data, NULL);
    BENCH("codebook_quantize f32 16 cents", B32, vq_codebook_quantize(ctx, x, cents, i1));
    DLTensor *p3 = vt_new(VT_U32, VT_DIMS(R, D * 3 / 32)), *p4 = vt_new(VT_U32, VT_DIMS(R, D * 4 / 32));
    vt_fill_uniform_int(i1, &rng, 0, 15);
    BENCH("bit_pack u8 b=4 (u8 bytes)", R * D, vq_bit_pack(ctx, i1, 4, p4));
    BENCH("bit_unpack b=4 -> u8 (u8 bytes)", R * D, vq_bit_unpack(ctx, p4, 4, D, i1));
    BENCH("bit_pack u8 b=3 (u8 bytes)", R * D, vq_bit_pack(ctx, i1, 3, p3));
    BENCH("bit_unpack b=3 -> u8 (u8 bytes)", R * D, vq_bit_unpack(ctx, p3, 3, D, i1));
    DLTensor *all[] = {x, o, xh, oh, X, i1, s1, i2, s2, diag, diag1k, cents, p3, p4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vt_free(all[i]);
    vq_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    int threads[8] = {1, 0}, n = 2;
    if (argc > 1) {
        n = 0;
        for (int i = 1; i < argc && n < 8; i++) threads[n++] = atoi(argv[i]);
    }
    const char *isas[] = {"scalar", "avx2", "avx512", "neon"};
    for (int t = 0; t < n; t++)
        for (int i = 0; i < 4; i++) run(isas[i], threads[t]);
    return 0;
}
