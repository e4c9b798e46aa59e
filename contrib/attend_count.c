/* attend_count.c — the instructions of vq_cache_attend for a named preset at
 * one layer of a model's shape (default SmolLM2-135M's: Hkv 3, Hq 9, D 64;
 * Gemma 3 270M's: 1 4 256), load-independent where
 * the machine is shared: N tokens appended in chunks of 256 (the first
 * fits the transforms), then STEPS decode steps of one append and one
 * attend, 1 thread (or THREADS, an optional 7th argument, for wall times
 * of the split kv axis). Built with -DVQ_BUILD_CONTRIB=ON; count with
 *   valgrind --tool=callgrind --toggle-collect=vq_cache_attend \
 *       build/contrib/attend_count balanced-3bit 8192 4 [HKV HQ D [THREADS]]
 * (bench/results/model/presets_speed_zen3.md). The checksum of the outputs
 * lets two builds be compared for the same answers. */
#include <stdio.h>
#include <stdlib.h>

#include "veloxquant.h"

enum { CHUNK = 256 };
static DLTensor t4(float *d, int64_t *s)
{
    return (DLTensor){.data = d, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 32, 1}, .shape = s};
}
static void ck(vq_ctx *c, vq_status s, const char *w)
{
    if (s != VQ_OK) {
        fprintf(stderr, "%s: %s\n", w, vq_ctx_last_error(c));
        exit(1);
    }
}
/* xorshift64; rn: a sum of four uniforms, about normal */
static uint64_t st = 88172645463325252ull;
static float rn(void)
{
    double u = 0;
    for (int i = 0; i < 4; i++) {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        u += (double)(st >> 11) / 9007199254740992.0;
    }
    return (float)((u - 2.0) * 1.7);
}
int main(int argc, char **argv)
{
    const char *preset = argc > 1 ? argv[1] : "f16";
    const int64_t n = argc > 2 ? atol(argv[2]) : 8192, steps = argc > 3 ? atol(argv[3]) : 4;
    const int HKV = argc > 4 ? atoi(argv[4]) : 3, HQ = argc > 5 ? atoi(argv[5]) : 9, D = argc > 6 ? atoi(argv[6]) : 64;
    const int threads = argc > 7 ? atoi(argv[7]) : 1;
    vq_ctx_config cc = {.backend = VQ_BACKEND_CPU, .num_threads = threads};
    vq_ctx *ctx;
    ck(NULL, vq_ctx_create(&cc, &ctx), "ctx");
    vq_cache_config cfg = {.n_layers = 1,
                           .n_kv_heads = HKV,
                           .n_q_heads = HQ,
                           .head_dim = D,
                           .preset = preset,
                           .capacity_pages = 64,
                           .grow_pages = 16};
    vq_cache *c;
    ck(ctx, vq_cache_create(ctx, &cfg, &c), "create");
    int64_t seq;
    ck(ctx, vq_cache_seq_add(c, &seq), "seq");
    float *k = malloc(sizeof(float) * HKV * CHUNK * D), *v = malloc(sizeof(float) * HKV * CHUNK * D);
    float *q = malloc(sizeof(float) * HQ * D), *o = malloc(sizeof(float) * HQ * D);
    float *qq = malloc(sizeof(float) * HQ * CHUNK * D);
    for (int64_t done = 0; done < n; done += CHUNK) {
        for (int i = 0; i < HKV * CHUNK * D; i++) {
            k[i] = rn() + 0.3f * (i % D); /* channels of unequal offsets, as real keys */
            v[i] = rn();
        }
        int64_t s[4] = {1, HKV, CHUNK, D};
        DLTensor K = t4(k, s), V = t4(v, s);
        if (done == 0) {
            for (int i = 0; i < HQ * CHUNK * D; i++)
                qq[i] = rn();
            int64_t sq2[4] = {1, HQ, CHUNK, D};
            DLTensor Q2 = t4(qq, sq2);
            ck(ctx, vq_cache_fit_transforms(c, 0, 1, &seq, &K, &V, &Q2), "fit");
        }
        ck(ctx, vq_cache_append(c, 0, 1, &seq, &K, &V, NULL), "append");
    }
    int64_t s1[4] = {1, HKV, 1, D}, sq[4] = {1, HQ, 1, D};
    DLTensor K = t4(k, s1), V = t4(v, s1), Q = t4(q, sq), O = t4(o, sq);
    for (int i = 0; i < HQ * D; i++)
        q[i] = rn();
    double sum = 0;
    for (int64_t t = 0; t < steps; t++) {
        ck(ctx, vq_cache_append(c, 0, 1, &seq, &K, &V, NULL), "append1");
        ck(ctx, vq_cache_attend(c, 0, 1, &seq, &Q, &O, NULL), "attend");
        for (int i = 0; i < HQ * D; i++)
            sum += o[i];
    }
    printf("%s: %lld tokens, checksum %.6f\n", preset, (long long)vq_cache_seq_length(c, seq, 0), sum);
    free(k);
    free(v);
    free(qq);
    free(q);
    free(o);
    vq_cache_free(c);
    vq_ctx_free(ctx);
    return 0;
}
