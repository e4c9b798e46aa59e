/* rabitq_ab.c — RaBitQ decode (vq_rabitq_fused_attend: Hamming keys, 16
 * nibble-packed centroids, B 1, Hq 32, D 128, 2 threads) with its three CPU
 * paths alternated call by call in one process: the fused runs of blocks
 * (default), VQ_ATTN_ONE_BLOCK=1 (one fused call per block),
 * VQ_ATTN_UNFUSED=1 (the separate kernels) and value_accum F32 (the f32
 * p.V: what AUTO runs where cb8_fast is false); median / least / quartiles of
 * the process CPU time per call and thread, and whether the outputs agree.
 * Calls alternate, so the clock and the other work on the machine touch the
 * three alike (docs/PERFORMANCE.md). Public API only:
 *
 *   gcc -O2 -Iinclude contrib/rabitq_ab.c -Lbuild -lveloxquant -Wl,-rpath,$PWD/build -o rabitq_ab
 *   ./rabitq_ab [Hkv (8)] [Skv (65536)] [calls per path (41, at most 1000)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <veloxquant.h>
static DLTensor mk(void *data, DLDataType dt, int nd, const int64_t *shape) {
    DLTensor t; memset(&t, 0, sizeof t); t.data = data; t.device.device_type = kDLCPU; t.ndim = nd; t.dtype = dt;
    t.shape = (int64_t *)shape; return t;
}
static double cpu_now(void) { struct timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    const int64_t Hkv = argc > 1 ? atoi(argv[1]) : 8, Skv = argc > 2 ? atoll(argv[2]) : 65536, Hq = 32, D = 128;
    int N = argc > 3 ? atoi(argv[3]) : 41;
    if (N < 1 || N > 1000) N = 41;
    DLDataType F32 = {kDLFloat, 32, 1}, U8 = {kDLUInt, 8, 1};
    static int64_t sq[4], sqs[3], sb[4], sm[3], sv[4], sc[1], so[4];
    sq[0]=1;sq[1]=Hq;sq[2]=1;sq[3]=D; sqs[0]=1;sqs[1]=Hq;sqs[2]=1; sb[0]=1;sb[1]=Hkv;sb[2]=Skv;sb[3]=D/8;
    sm[0]=1;sm[1]=Hkv;sm[2]=Skv; sv[0]=1;sv[1]=Hkv;sv[2]=Skv;sv[3]=D/2; sc[0]=16; memcpy(so,sq,sizeof so);
    float *q = malloc(4*Hq*D), *qs = malloc(4*Hq), *mag = malloc(4*Hkv*Skv), *cents = malloc(64), *out = malloc(4*Hq*D);
    uint8_t *bits = malloc(Hkv*Skv*D/8), *vi = malloc(Hkv*Skv*D/2);
    srand(1);
    for (int64_t i = 0; i < Hq*D; i++) q[i] = rand() / (float)RAND_MAX - 0.5f;
    for (int64_t i = 0; i < Hq; i++) qs[i] = 0.1f;
    for (int64_t i = 0; i < Hkv*Skv; i++) mag[i] = 0.5f + rand() / (float)RAND_MAX;
    for (int64_t i = 0; i < Hkv*Skv*D/8; i++) bits[i] = rand();
    for (int64_t i = 0; i < Hkv*Skv*D/2; i++) vi[i] = rand();
    for (int i = 0; i < 16; i++) cents[i] = (i - 7.5f) / 8;
    DLTensor tq = mk(q,F32,4,sq), tqs = mk(qs,F32,3,sqs), tb = mk(bits,U8,4,sb), tm = mk(mag,F32,3,sm), tv = mk(vi,U8,4,sv), tc = mk(cents,F32,1,sc), to = mk(out,F32,4,so);
    vq_ctx *ctx; vq_ctx_config cfg = {0}; cfg.num_threads = 2;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) return 1;
    const char *env[4] = {NULL, "VQ_ATTN_ONE_BLOCK", "VQ_ATTN_UNFUSED", NULL};
    const char *name[4] = {"fused (runs)", "VQ_ATTN_ONE_BLOCK", "VQ_ATTN_UNFUSED", "value_accum F32"};
    static double t[4][1000];
    float ref[4][8];
    for (int i = -2; i < N; i++)
        for (int e = 0; e < 4; e++) {
            if (env[e]) setenv(env[e], "1", 1);
            vq_rabitq_attend_opts opts; memset(&opts, 0, sizeof opts);
            opts.value_accum = e == 3 ? VQ_VALUE_ACCUM_F32 : VQ_VALUE_ACCUM_INT8;
            const double c0 = cpu_now();
            if (vq_rabitq_fused_attend(ctx, &tq, &tqs, &tb, &tm, NULL, &tv, &tc, &to, &opts) != VQ_OK) return 2;
            const double c1 = cpu_now();
            if (env[e]) unsetenv(env[e]);
            if (i >= 0) t[e][i] = (c1 - c0) / 2 * 1e3;
            memcpy(ref[e], out, sizeof ref[e]);
        }
    for (int e = 0; e < 4; e++) {
        qsort(t[e], N, sizeof(double), cmp);
        printf("Hkv %lld Skv %lld %-18s median %.3f cpu-ms/call (per thread)  least %.3f  q1 %.3f q3 %.3f  out[0] %a\n", (long long)Hkv, (long long)Skv,
               name[e], t[e][N/2], t[e][0], t[e][N/4], t[e][3*N/4], ref[e][0]);
    }
    printf("same outputs (one block, unfused): %d %d\n", memcmp(ref[0], ref[1], sizeof ref[0]) == 0, memcmp(ref[0], ref[2], sizeof ref[0]) == 0);
    return 0;
}
