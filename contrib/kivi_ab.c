/* kivi_ab.c — KIVI 2-bit decode (vq_kivi_fused_attend: 2-bit keys
 * and values, g 32, f16 scales, B 1, Hq 32, D 128, 2 threads) with its CPU
 * paths alternated call by call in one process, and the f16 SDPA
 * (vq_fused_sdpa, plain f16 keys and values) as the reference of the
 * speed-up ratios: AUTO; value_accum F32 (the f32 p.V); INT8 (integer p.V, and the
 * fused block kernel where the ISA has one); INT8 with VQ_ATTN_UNFUSED=1
 * (the separate kernels). Median / least / quartiles of the process CPU
 * time per call and thread (the cpu-ms of vq bench attention), and
 * whether the outputs of each pair of paths agree. Calls alternate, so the
 * clock and the other work on the machine touch all paths alike
 * (docs/PERFORMANCE.md). Public API only:
 *
 *   gcc -O2 -Iinclude contrib/kivi_ab.c -Lbuild -lveloxquant -lm -Wl,-rpath,$PWD/build -o kivi_ab
 *   ./kivi_ab [Hkv (8)] [Skv (65536)] [calls per path (21, at most 1000)] [no-f16]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <veloxquant.h>

static DLTensor mk(void *data, DLDataType dt, int nd, const int64_t *shape)
{
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = nd;
    t.dtype = dt;
    t.shape = (int64_t *)shape;
    return t;
}
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static uint16_t h(float f) /* f32 -> f16, round to nearest, normal range only */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint32_t s = (u >> 16) & 0x8000u;
    const int e = (int)((u >> 23) & 0xff) - 127 + 15;
    uint32_t m = u & 0x7fffffu;
    if (e <= 0) return (uint16_t)s;
    uint32_t r = s | (uint32_t)e << 10 | m >> 13;
    if ((m & 0x1fffu) > 0x1000u || ((m & 0x1fffu) == 0x1000u && (r & 1u))) r++;
    return (uint16_t)r;
}
static float urand(void) { return rand() / (float)RAND_MAX; }

enum { NP = 5 };

int main(int argc, char **argv)
{
    const int64_t Hkv = argc > 1 ? atoi(argv[1]) : 8, Skv = argc > 2 ? atoll(argv[2]) : 65536, Hq = 32, D = 128;
    int N = argc > 3 ? atoi(argv[3]) : 21;
    const int with_f16 = !(argc > 4 && strcmp(argv[4], "no-f16") == 0);
    if (N < 1 || N > 1000) N = 21;
    const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, U8 = {kDLUInt, 8, 1};
    const int64_t G = Skv / 32, HS = Hkv * Skv;
    static int64_t sq[4], sc[4], sk[4], sv[4], sf[4];
    sq[0] = 1, sq[1] = Hq, sq[2] = 1, sq[3] = D;
    sc[0] = 1, sc[1] = Hkv, sc[2] = Skv, sc[3] = D / 4;
    sk[0] = 1, sk[1] = Hkv, sk[2] = G, sk[3] = D;
    sv[0] = 1, sv[1] = Hkv, sv[2] = Skv, sv[3] = D / 32;
    sf[0] = 1, sf[1] = Hkv, sf[2] = Skv, sf[3] = D;
    float *q = malloc(4 * Hq * D), *out = malloc(4 * Hq * D);
    uint8_t *kc = malloc(HS * D / 4), *vc = malloc(HS * D / 4);
    uint16_t *ks = malloc(2 * Hkv * G * D), *kz = malloc(2 * Hkv * G * D), *vs = malloc(2 * HS * 4),
             *vz = malloc(2 * HS * 4);
    uint16_t *k16 = with_f16 ? malloc(2 * HS * D) : NULL, *v16 = with_f16 ? malloc(2 * HS * D) : NULL;
    srand(1);
    for (int64_t i = 0; i < Hq * D; i++) q[i] = urand() - 0.5f;
    for (int64_t i = 0; i < HS * D / 4; i++) kc[i] = (uint8_t)rand(), vc[i] = (uint8_t)rand();
    for (int64_t i = 0; i < Hkv * G * D; i++) ks[i] = h(0.05f + 0.3f * urand()), kz[i] = h(-0.5f + 0.2f * urand());
    for (int64_t i = 0; i < HS * 4; i++) vs[i] = h(0.05f + 0.3f * urand()), vz[i] = h(-0.5f + 0.2f * urand());
    if (with_f16)
        for (int64_t i = 0; i < HS * D; i++) k16[i] = h(urand() - 0.5f), v16[i] = h(urand() - 0.5f);
    DLTensor tq = mk(q, F32, 4, sq), to = mk(out, F32, 4, sq), tkc = mk(kc, U8, 4, sc), tvc = mk(vc, U8, 4, sc),
             tks = mk(ks, F16, 4, sk), tkz = mk(kz, F16, 4, sk), tvs = mk(vs, F16, 4, sv), tvz = mk(vz, F16, 4, sv),
             tk16 = mk(k16, F16, 4, sf), tv16 = mk(v16, F16, 4, sf);
    vq_ctx *ctx;
    vq_ctx_config cfg = {0};
    cfg.num_threads = 2;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) return 1;
    printf("isa %s, Hkv %lld, Skv %lld, Hq %lld, D %lld, 2 threads, %d calls per path, alternated\n", vq_ctx_isa(ctx),
           (long long)Hkv, (long long)Skv, (long long)Hq, (long long)D, N);
    static const char *name[NP] = {"kivi auto", "kivi f32 p.V", "kivi int8 p.V", "kivi int8 unfused", "f16 sdpa"};
    static const vq_value_accum va[4] = {VQ_VALUE_ACCUM_AUTO, VQ_VALUE_ACCUM_F32, VQ_VALUE_ACCUM_INT8,
                                         VQ_VALUE_ACCUM_INT8};
    static double t[NP][1000];
    static float ref[NP][32 * 128];
    const int np = with_f16 ? NP : NP - 1;
    const float scale = 1.0f / sqrtf((float)D);
    for (int i = -2; i < N; i++)
        for (int e = 0; e < np; e++) {
            if (e == 3) setenv("VQ_ATTN_UNFUSED", "1", 1);
            const double c0 = cpu_now();
            vq_status s;
            if (e < 4) {
                const vq_scalar_attend_opts o = {.bits = 2, .value_accum = va[e]};
                s = vq_kivi_fused_attend(ctx, &tq, &tkc, &tks, &tkz, &tvc, &tvs, &tvz, 32, scale, 0, &to, &o);
            } else {
                const vq_encoded_keys ek = {.format = VQ_KEYS_F16, .f16.keys = &tk16};
                const vq_encoded_values ev = vq_f16_values(&tv16);
                s = vq_fused_sdpa(ctx, &tq, &ek, &ev, scale, NULL, &to, NULL);
            }
            const double c1 = cpu_now();
            if (e == 3) unsetenv("VQ_ATTN_UNFUSED");
            if (s != VQ_OK) {
                fprintf(stderr, "%s: %s\n", name[e], vq_last_error());
                return 2;
            }
            if (i >= 0) t[e][i] = (c1 - c0) / 2 * 1e3; /* per thread, as vq bench attention's cpu-ms */
            memcpy(ref[e], out, sizeof ref[e]);
        }
    /* read bytes of the KIVI cache per call */
    const double bytes = (double)HS * (D / 4 * 2 + 16) + 2.0 * Hkv * G * D * 2;
    for (int e = 0; e < np; e++) {
        qsort(t[e], N, sizeof(double), cmp);
        const double b = e < 4 ? bytes : 4.0 * HS * D;
        printf("%-18s median %8.3f cpu-ms/call/thread  least %8.3f  q1 %8.3f q3 %8.3f  %6.2f GB/s by cpu time\n", name[e],
               t[e][N / 2], t[e][0], t[e][N / 4], t[e][3 * N / 4], b / (t[e][N / 2] * 1e-3) / 1e9);
    }
    for (int e = 1; e < 4; e++) {
        double md = 0.0;
        for (int i = 0; i < Hq * D; i++) md = fmax(md, fabs((double)ref[e][i] - ref[0][i]));
        printf("max |%s - auto| = %.3g%s\n", name[e], md, memcmp(ref[e], ref[0], sizeof ref[0]) == 0 ? " (same)" : "");
    }
    if (with_f16) printf("f16 / kivi auto (median): %.2fx\n", t[4][N / 2] / t[0][N / 2]);
    vq_ctx_free(ctx);
    return 0;
}
