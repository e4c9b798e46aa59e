/* bench_prefill_cuda.c — `vq bench prefill --backend cuda`: vq_rabitq_prefill_attend
 * on the GPU at B = 1, Hq = 32, Hkv = 32 and 8, D = 128, Sq = Skv = 4096 (by
 * default), f16 q and out, without and with k_const + v_scale. Reports the
 * median of CUDA-event timings (30 runs after 5 warm-ups) and TFLOP/s counting
 * 4 * Sq * Skv * D * Hq (two matrix products), the count PyTorch's SDPA figure
 * in tools/torch_sdpa.py uses. Public API plus cudart (device buffers). */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "report.h"
#include "veloxquant.h"

typedef struct prefill_args {
    int64_t sq, skv, d;
    int backend;  /* 0 cpu (refused), 1 cuda */
    bool json;
} prefill_args;

static int run_prefill(const prefill_args *a, int argc, char **argv);

int vq_cmd_bench_prefill(int argc, char **argv)
{
    static const char *const backends[] = {"cpu", "cuda", NULL};
    prefill_args a = {.sq = 4096, .skv = 4096, .d = 128};
    const vqa_opt opts[] = {
        {"backend", VQA_CHOICE, &a.backend, .choices = backends, .help = "must be cuda (the CPU prefill rows are in "
                                                                          "'vq bench attention')"},
        {"sq", VQA_SIZE, &a.sq, 1, 1 << 20, "N", "query rows"},
        {"skv", VQA_SIZE, &a.skv, 1, 1 << 20, "N", "kv length"},
        {"d", VQA_INT, &a.d, 8, 256, "D", "head dimension, a multiple of 8"},
        VQA_JSON_OPT(&a.json),
    };
    const vqa_cmd cmd = {"bench prefill", "RaBitQ prefill attention (vq_rabitq_prefill_attend) on the GPU: time "
                                          "and TFLOP/s at B 1, Hq 32, Hkv 32 and 8",
                         opts, VQA_COUNT(opts)};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (a.backend != 1) return vqa_usage_error(&cmd, "needs --backend cuda");
    if (a.d % 8 != 0) return vqa_usage_error(&cmd, "--d must be a multiple of 8, got %lld", (long long)a.d);
    return run_prefill(&a, argc, argv);
}

#ifndef VQ_TOOL_CUDA
static int run_prefill(const prefill_args *a, int argc, char **argv)
{
    (void)a;
    (void)argc;
    (void)argv;
    fprintf(stderr, "vq bench prefill: needs a build with the CUDA backend (make CUDA=1, or cmake -DVQ_CUDA=ON)\n");
    return VQ_EXIT_FAILURE;
}
#else
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>

#define PCK(x)                                                                                   \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_));     \
            exit(VQ_EXIT_FAILURE);                                                               \
        }                                                                                        \
    } while (0)

typedef struct ptensor {
    DLTensor t;
    int64_t shape[4];
} ptensor;

static unsigned long long prng = 0x9E3779B97F4A7C15ull;
static uint32_t next32(void)
{
    prng ^= prng << 13;
    prng ^= prng >> 7;
    prng ^= prng << 17;
    return (uint32_t)(prng >> 16);
}

/* kind: 0 random bytes, 1 f16 in [-2, 2), 2 f32 in [lo, hi) */
static DLTensor *pnew(ptensor *x, DLDataType dt, int nd, const int64_t *shape, int kind, float lo, float hi)
{
    memset(x, 0, sizeof *x);
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)(x->shape[i] = shape[i]);
    x->t.ndim = nd;
    x->t.shape = x->shape;
    x->t.dtype = dt;
    x->t.device.device_type = kDLCUDA;
    const size_t bytes = n * (dt.bits / 8);
    unsigned char *h = malloc(bytes);
    for (size_t i = 0; i < n; i++) {
        const float u = (float)(next32() & 0xFFFFFF) / 16777216.0f;
        if (kind == 0) h[i] = (unsigned char)next32();
        else if (kind == 1) {
            const uint16_t v = vq_f32_to_f16(4.0f * u - 2.0f);
            memcpy(h + 2 * i, &v, 2);
        } else {
            const float v = lo + (hi - lo) * u;
            memcpy(h + 4 * i, &v, 4);
        }
    }
    PCK(cudaMalloc(&x->t.data, bytes));
    PCK(cudaMemcpy(x->t.data, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    return &x->t;
}

static int cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static int run_prefill(const prefill_args *a, int argc, char **argv)
{
    const int Sq = (int)a->sq, Skv = (int)a->skv, D = (int)a->d;
    vq_ctx_config cfg = {.backend = VQ_BACKEND_CUDA};
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) {
        fprintf(stderr, "vq bench prefill: %s\n", vq_last_error());
        return VQ_EXIT_FAILURE;
    }
    struct cudaDeviceProp prop;
    PCK(cudaGetDeviceProperties(&prop, 0));
    vqr *rep = vqr_begin("bench prefill", argc, argv, ctx, a->json);
    if (!rep) printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    if (!rep) printf("%3s %4s %6s %6s %4s %-16s %9s %9s\n", "Hq", "Hkv", "Sq", "Skv", "D", "extras", "us", "TFLOP/s");
    const DLDataType F32 = {kDLFloat, 32, 1}, F16 = {kDLFloat, 16, 1}, U8 = {kDLUInt, 8, 1};
    const int Hq = 32, hkvs[] = {32, 8};
    cudaEvent_t e0, e1;
    PCK(cudaEventCreate(&e0));
    PCK(cudaEventCreate(&e1));
    int rc = VQ_EXIT_OK;
    for (int hi = 0; hi < 2; hi++) {
        const int Hkv = hkvs[hi];
        ptensor q, sc, kb, km, kc, vi, ce, vs, out;
        pnew(&q, F16, 4, (const int64_t[]){1, Hq, Sq, D}, 1, 0, 0);
        pnew(&out, F16, 4, (const int64_t[]){1, Hq, Sq, D}, 0, 0, 0);
        const float s = 1.0f / sqrtf((float)D);
        pnew(&sc, F32, 1, (const int64_t[]){1}, 2, s, s);
        pnew(&kb, U8, 4, (const int64_t[]){1, Hkv, Skv, D / 8}, 0, 0, 0);
        pnew(&km, F32, 3, (const int64_t[]){1, Hkv, Skv}, 2, 0.5f, 1.0f);
        pnew(&kc, F32, 3, (const int64_t[]){1, Hkv, Skv}, 2, -0.5f, 0.5f);
        pnew(&vs, F32, 3, (const int64_t[]){1, Hkv, Skv}, 2, 0.5f, 1.5f);
        pnew(&vi, U8, 4, (const int64_t[]){1, Hkv, Skv, D / 2}, 0, 0, 0);
        pnew(&ce, F32, 1, (const int64_t[]){16}, 2, -2.0f, 2.0f);
        for (int extra = 0; extra < 2; extra++) {
            const vq_rabitq_attend_opts o = {.v_scale = extra ? &vs.t : NULL};
            float ts[30];
            for (int it = 0; it < 35; it++) {
                PCK(cudaEventRecord(e0, 0));
                const vq_status st = vq_rabitq_prefill_attend(ctx, &q.t, &sc.t, &kb.t, &km.t, extra ? &kc.t : NULL,
                                                              &vi.t, &ce.t, &out.t, &o);
                PCK(cudaEventRecord(e1, 0));
                PCK(cudaEventSynchronize(e1));
                if (st != VQ_OK) {
                    fprintf(stderr, "vq bench prefill: %s\n", vq_ctx_last_error(ctx));
                    rc = VQ_EXIT_FAILURE;
                    break;
                }
                if (it >= 5) PCK(cudaEventElapsedTime(&ts[it - 5], e0, e1));
            }
            if (rc != VQ_EXIT_OK) break;
            qsort(ts, 30, sizeof ts[0], cmp_f);
            const double us = 0.5 * (ts[14] + ts[15]) * 1e3;
            const double flops = 4.0 * Sq * Skv * (double)D * Hq;
            if (rep) {
                vqr_row(rep);
                vqr_int(rep, "hq", Hq, NULL);
                vqr_int(rep, "hkv", Hkv, NULL);
                vqr_int(rep, "sq", Sq, "tokens");
                vqr_int(rep, "skv", Skv, "tokens");
                vqr_int(rep, "d", D, NULL);
                vqr_str(rep, "extras", extra ? "k_const+v_scale" : "");
                vqr_num(rep, "time", us, "us");
                vqr_num(rep, "compute", flops / (us * 1e-6) / 1e12, "TFLOP/s");
            } else {
                printf("%3d %4d %6d %6d %4d %-16s %9.1f %9.1f\n", Hq, Hkv, Sq, Skv, D,
                       extra ? "k_const+v_scale" : "-", us, flops / (us * 1e-6) / 1e12);
            }
        }
        cudaFree(q.t.data); cudaFree(out.t.data); cudaFree(sc.t.data); cudaFree(kb.t.data);
        cudaFree(km.t.data); cudaFree(kc.t.data); cudaFree(vs.t.data); cudaFree(vi.t.data); cudaFree(ce.t.data);
        if (rc != VQ_EXIT_OK) break;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (rc == VQ_EXIT_OK) vqr_end(rep);
    vq_ctx_free(ctx);
    return rc;
}
#endif
