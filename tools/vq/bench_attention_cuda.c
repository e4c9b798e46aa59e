/* bench_attention_cuda.c — `vq bench attention --backend cuda`: the CUDA
 * decode-attention kernels (KIVI affine 2-bit with f16 scales, RaBitQ Hamming
 * and exact with nibble values) at Hq = 32, D = 128, Skv = 4K, 32K, 128K,
 * B = 1 and 8, Hkv = 32 and 8, next to the device's copy bandwidth measured in
 * the same run, then a sweep of the kv split count. Public API plus cudart
 * (device buffers). The uncompressed f16 SDPA baseline is PyTorch's, from
 * tools/torch_sdpa.py (bench/results/h200.md puts them side by side).
 * Timing: CUDA events around each call, median of 30 after 5 warm-ups,
 * rotating over enough input copies that they overflow the 60 MB L2. */
#include <stdio.h>
#include <string.h>

#include "bench_attention.h"
#include "commands.h"
#include "progress.h"
#include "report.h"

#ifndef VQ_TOOL_CUDA
int vqb_bench_attention_cuda(const vqb_cuda_args *a, int argc, char **argv)
{
    (void)a;
    (void)argc;
    (void)argv;
    fprintf(stderr, "vq bench attention: --backend cuda needs a build with the CUDA backend "
                    "(make CUDA=1, or cmake -DVQ_CUDA=ON)\n");
    return VQ_EXIT_FAILURE;
}
#else
#include <math.h>
#include <stdlib.h>

#include "bench_cuda.h"

int vqb_cu_cmp_f(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}


static unsigned long long lcg = 88172645463325252ull;
void vqb_cu_fill_random(void *d, size_t bytes, int kind)
{
    /* past 64 MB (more than the L2) the first 64 MB repeat: filling gigabytes on the host is slow */
    const size_t full = bytes, chunk = (size_t)64 << 20;
    if (bytes > chunk) bytes = chunk;
    /* kind 0: random bytes; 1: f16 values in [0.05, 0.3); 2: f32 N-ish(0,1); 3: f32 in [0.5, 1) */
    unsigned char *h = calloc(bytes, 1);
    if (h == NULL) {
        fprintf(stderr, "vq bench attention: out of host memory (%zu bytes of test data)\n", bytes);
        exit(VQ_EXIT_FAILURE);
    }
    for (size_t i = 0; i < bytes; i += 8) {
        lcg ^= lcg << 13; lcg ^= lcg >> 7; lcg ^= lcg << 17;
        memcpy(h + i, &lcg, bytes - i < 8 ? bytes - i : 8);
    }
    if (kind == 1)
        for (size_t i = 0; i + 1 < bytes; i += 2) {
            const uint16_t v = vq_f32_to_f16(0.05f + 0.25f * (float)h[i] / 255.0f);
            memcpy(h + i, &v, 2);
        }
    if (kind == 2 || kind == 3)
        for (size_t i = 0; i + 3 < bytes; i += 4) {
            const float u = (float)(h[i] | h[i + 1] << 8) / 65536.0f;
            const float v = kind == 2 ? (u - 0.5f) * 3.4f : 0.5f + 0.5f * u;
            memcpy(h + i, &v, 4);
        }
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    free(h);
    for (size_t off = bytes; off < full; off += bytes)
        CK(cudaMemcpy((char *)d + off, d, full - off < bytes ? full - off : bytes, cudaMemcpyDeviceToDevice));
}

DLTensor *vqb_cu_dnew(dten *x, DLDataType dt, int64_t a, int64_t b, int64_t c, int64_t d, int kind)
{
    memset(x, 0, sizeof *x);
    x->shape[0] = a; x->shape[1] = b; x->shape[2] = c; x->shape[3] = d;
    int nd = 4;
    while (nd > 1 && x->shape[nd - 1] == 0) nd--;
    x->t.ndim = nd;
    x->t.shape = x->shape;
    x->t.dtype = dt;
    x->t.device.device_type = kDLCUDA;
    size_t n = (size_t)(dt.bits / 8);
    for (int i = 0; i < nd; i++) n *= (size_t)x->shape[i];
    CK(cudaMalloc(&x->t.data, n));
    vqb_cu_fill_random(x->t.data, n, kind);
    return &x->t;
}
void vqb_cu_report_shape(vqr *rep, int B, int Hq, int Hkv, int Skv, int D, double bytes, double sec, double bw)
{
    vqr_int(rep, "b", B, NULL);
    vqr_int(rep, "hq", Hq, NULL);
    vqr_int(rep, "hkv", Hkv, NULL);
    vqr_int(rep, "skv", Skv, "tokens");
    vqr_int(rep, "d", D, NULL);
    vqr_num(rep, "bytes", bytes, "B");
    vqr_num(rep, "time", sec * 1e6, "us");
    vqr_num(rep, "bandwidth", bytes / sec / 1e9, "GB/s");
    vqr_num(rep, "copy_fraction", bytes / sec / bw, NULL);
}

size_t vqb_cu_dbytes(const DLTensor *t)
{
    size_t n = t->dtype.bits / 8;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}


/* Device-to-device copy bandwidth (bytes read + written per second). */
double vqb_cu_copy_bw(void)
{
    const size_t n = (size_t)2 << 30;
    void *a, *b;
    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    float ts[20];
    for (int i = 0; i < 23; i++) {
        cudaEventRecord(e0, 0);
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0));
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        if (i >= 3) cudaEventElapsedTime(&ts[i - 3], e0, e1);
    }
    qsort(ts, 20, sizeof ts[0], vqb_cu_cmp_f);
    cudaFree(a); cudaFree(b);
    return 2.0 * n / (ts[10] * 1e-3);
}

enum { FMT_KIVI, FMT_RQ_HAM, FMT_RQ_EXACT, FMT_CACHE /* --format cache: bench_sdpa_mix_cuda.c only */ };
static const char *fmt_name[] = {"kivi-2bit g32 f16", "rabitq hamming", "rabitq exact"};

typedef struct set {
    dten q, qs, a[6], out;
} set;

/* RaBitQ at Skv = 128K, B = 1: time against the number of kv splits (0 =
 * the library's choice), to check the grid heuristic. */
static void sweep_splits(vq_ctx *ctx, double bw, vqr *rep)
{
    const int D = 128, Hq = 32, Skv = 131072, splits[] = {0, 8, 16, 33, 66, 132, 264};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    if (!rep) printf("split sweep (rabitq exact, B 1, Skv %d)\n%4s %6s %9s %7s\n", Skv, "Hkv", "splits", "us", "%copy");
    for (int hk = 0; hk < 2; hk++) {
        const int Hkv = hk ? 8 : 32;
        dten q, qs, kb, km, vi, ce, out;
        vqb_cu_dnew(&q, F16, 1, Hq, 1, D, 1);
        vqb_cu_dnew(&out, F16, 1, Hq, 1, D, 0);
        vqb_cu_dnew(&qs, F32, 1, Hq, 1, 0, 3);
        vqb_cu_dnew(&kb, U8, 1, Hkv, Skv, D / 8, 0);
        vqb_cu_dnew(&km, F32, 1, Hkv, Skv, 0, 3);
        vqb_cu_dnew(&vi, U8, 1, Hkv, Skv, D / 2, 0);
        vqb_cu_dnew(&ce, F32, 16, 0, 0, 0, 2);
        const double bytes = (double)Hkv * Skv * (D / 8 + 4 + D / 2);
        for (size_t si = 0; si < sizeof splits / sizeof splits[0]; si++) {
            vq_rabitq_attend_opts o = {.score = VQ_RABITQ_SCORE_EXACT, .num_splits = splits[si]};
            float ts[20];
            for (int it = 0; it < 23; it++) {
                cudaEventRecord(e0, 0);
                vq_rabitq_fused_attend(ctx, &q.t, &qs.t, &kb.t, &km.t, NULL, &vi.t, &ce.t, &out.t, &o);
                cudaEventRecord(e1, 0);
                cudaEventSynchronize(e1);
                if (it >= 3) cudaEventElapsedTime(&ts[it - 3], e0, e1);
            }
            qsort(ts, 20, sizeof ts[0], vqb_cu_cmp_f);
            if (rep) {
                vqr_row(rep);
                vqr_str(rep, "format", "rabitq exact, split sweep");
                vqr_int(rep, "b", 1, NULL);
                vqr_int(rep, "hq", Hq, NULL);
                vqr_int(rep, "hkv", Hkv, NULL);
                vqr_int(rep, "skv", Skv, "tokens");
                vqr_int(rep, "d", D, NULL);
                vqr_int(rep, "splits", splits[si], NULL);
                vqr_num(rep, "bytes", bytes, "B");
                vqr_num(rep, "time", ts[10] * 1e3, "us");
                vqr_num(rep, "copy_fraction", bytes / (ts[10] * 1e-3) / bw, NULL);
            } else {
                printf("%4d %6d %9.1f %6.1f%%\n", Hkv, splits[si], ts[10] * 1e3,
                       100.0 * bytes / (ts[10] * 1e-3) / bw);
            }
        }
        cudaFree(q.t.data); cudaFree(out.t.data); cudaFree(qs.t.data); cudaFree(kb.t.data);
        cudaFree(km.t.data); cudaFree(vi.t.data); cudaFree(ce.t.data);
    }
}

int vqb_bench_attention_cuda(const vqb_cuda_args *a, int argc, char **argv)
{
    const int quick = a->b1, only_fmt = a->format - 1; /* -1 = all */
    const int only_skv = (int)a->skv, only_hkv = (int)a->hkv;
    vq_ctx_config cfg = {.backend = VQ_BACKEND_CUDA};
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) {
        fprintf(stderr, "vq bench attention: %s\n", vq_last_error());
        return VQ_EXIT_FAILURE;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const double bw = vqb_cu_copy_bw();
    vqr *rep = vqr_begin("bench attention", argc, argv, ctx, a->json);
    vqr_info_num(rep, "copy_bandwidth", bw / 1e9, "GB/s");
    if (!rep) printf("device: %s, %d SMs, L2 %d MB; copy bandwidth (read+write) %.0f GB/s\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, bw / 1e9);
    const char *env_mode = getenv("VQ_CUDA_DECODE_STAGED");
    if (rep) vqr_info_str(rep, "VQ_CUDA_DECODE_STAGED", env_mode ? env_mode : "");
    else if (env_mode)
        printf("VQ_CUDA_DECODE_STAGED=%s: that load path only\n", env_mode);
    else
        printf("us, GB/s and %%copy: the default kernels; last column: tiles staged in shared memory (kivi: the "
               "tensor-core skeleton, VQ_CUDA_MMA=1)\n");
    if (!rep) printf("%-20s %2s %3s %4s %7s %9s %9s %8s %7s %9s\n", "format", "B", "Hq", "Hkv", "Skv", "MB", "us", "GB/s",
           "%copy", "staged us");
    const int skvs[] = {4096, 32768, 131072}, bs[] = {1, 8}, hkvs[] = {32, 8};
    const int D = 128, Hq = 32, g = 32;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    vqp p;
    vqp_begin(&p, "bench attention", 0);
    for (int f = 0; f < 3; f++)
        for (int si = 0; si < 3; si++)
            for (int bi = 0; bi < 2; bi++)
                for (int hi = 0; hi < 2; hi++) {
                    const int Skv = skvs[si], B = bs[bi], Hkv = hkvs[hi];
                    if (quick && B != 1) continue;
                    if ((only_fmt >= 0 && f != only_fmt) || (only_skv && Skv != only_skv) ||
                        (only_hkv && Hkv != only_hkv))
                        continue;
                    vqp_step(&p, "%s B %d Hkv %d Skv %d", fmt_name[f], B, Hkv, Skv);
                    /* bytes of one input set */
                    const double tok = (double)B * Hkv * Skv;
                    const double per_tok = f == FMT_KIVI ? D / 4 * 2 + 2.0 * 2 * D / g + 2.0 * 2 * D / g
                                                           : D / 8 + 4 + D / 2;
                    const double bytes = tok * per_tok;
                    int nset = (int)ceil(400e6 / bytes);
                    if (nset < 1) nset = 1;
                    if (nset > 64) nset = 64;
                    set *S = calloc((size_t)nset, sizeof *S);
                    for (int s = 0; s < nset; s++) {
                        vqb_cu_dnew(&S[s].q, F16, B, Hq, 1, D, 0);
                        vqb_cu_fill_random(S[s].q.t.data, vqb_cu_dbytes(&S[s].q.t), 1);
                        vqb_cu_dnew(&S[s].out, F16, B, Hq, 1, D, 0);
                        if (f == FMT_KIVI) {
                            vqb_cu_dnew(&S[s].a[0], U8, B, Hkv, Skv, D / 4, 0);
                            vqb_cu_dnew(&S[s].a[1], F16, B, Hkv, (Skv + g - 1) / g, D, 1);
                            vqb_cu_dnew(&S[s].a[2], F16, B, Hkv, (Skv + g - 1) / g, D, 1);
                            vqb_cu_dnew(&S[s].a[3], U8, B, Hkv, Skv, D / 4, 0);
                            vqb_cu_dnew(&S[s].a[4], F16, B, Hkv, Skv, D / g, 1);
                            vqb_cu_dnew(&S[s].a[5], F16, B, Hkv, Skv, D / g, 1);
                        } else {
                            vqb_cu_dnew(&S[s].qs, F32, B, Hq, 1, 0, 3);
                            vqb_cu_dnew(&S[s].a[0], U8, B, Hkv, Skv, D / 8, 0);
                            vqb_cu_dnew(&S[s].a[1], F32, B, Hkv, Skv, 0, 3);
                            vqb_cu_dnew(&S[s].a[2], U8, B, Hkv, Skv, D / 2, 0);
                            vqb_cu_dnew(&S[s].a[3], F32, 16, 0, 0, 0, 2);
                        }
                    }
                    /* both load paths of the fast kernels, in one run (VQ_CUDA_DECODE_STAGED),
                     * unless the caller fixed one (for a profiler) */
                    double sec_mode[2] = {0, 0};
                    for (int mode = 0; mode < 2; mode++) {
                        if (env_mode) {
                            if (mode == 1) break;
                        } else {
                            setenv("VQ_CUDA_DECODE_STAGED", mode && f != FMT_KIVI ? "1" : "0", 1);
                        }
                        /* KIVI's second column: the tensor-core skeleton beside the fast kernel */
                        if (f == FMT_KIVI && mode) setenv("VQ_CUDA_MMA", "1", 1);
                        else unsetenv("VQ_CUDA_MMA");
                        float ts[30];
                        vq_status st = VQ_OK;
                        for (int it = 0; it < 35 && st == VQ_OK; it++) {
                            set *x = &S[it % nset];
                            cudaEventRecord(e0, 0);
                            if (f == FMT_KIVI) {
                                vq_scalar_attend_opts o = {.bits = 2};
                                st = vq_kivi_fused_attend(ctx, &x->q.t, &x->a[0].t, &x->a[1].t, &x->a[2].t,
                                                                   &x->a[3].t, &x->a[4].t, &x->a[5].t, g, 0.0883883f,
                                                                   0, &x->out.t, &o);
                            } else {
                                vq_rabitq_attend_opts o = {.score = f == FMT_RQ_EXACT ? VQ_RABITQ_SCORE_EXACT
                                                                                      : VQ_RABITQ_SCORE_HAMMING};
                                st = vq_rabitq_fused_attend(ctx, &x->q.t, &x->qs.t, &x->a[0].t, &x->a[1].t, NULL,
                                                            &x->a[2].t, &x->a[3].t, &x->out.t, &o);
                            }
                            cudaEventRecord(e1, 0);
                            cudaEventSynchronize(e1);
                            if (it >= 5) cudaEventElapsedTime(&ts[it - 5], e0, e1);
                        }
                        if (st != VQ_OK) {
                            fprintf(stderr, "vq bench attention: %s: %s\n", vq_status_string(st),
                                    vq_ctx_last_error(ctx));
                            return VQ_EXIT_FAILURE;
                        }
                        qsort(ts, 30, sizeof ts[0], vqb_cu_cmp_f);
                        sec_mode[mode] = ts[15] * 1e-3;
                    }
                    if (!env_mode) unsetenv("VQ_CUDA_DECODE_STAGED");
                    unsetenv("VQ_CUDA_MMA");
                    const double sec = sec_mode[0];
                    vqp_clear(&p);
                    if (rep) {
                        vqr_row(rep);
                        vqr_str(rep, "format", fmt_name[f]);
                        vqb_cu_report_shape(rep, B, Hq, Hkv, Skv, D, bytes, sec, bw);
                        vqr_num(rep, "time_staged", env_mode ? NAN : sec_mode[1] * 1e6, "us");
                    } else {
                        printf("%-20s %2d %3d %4d %7d %9.1f %9.1f %8.0f %6.1f%% %9.1f\n", fmt_name[f], B, Hq, Hkv,
                               Skv, bytes / 1e6, sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / bw,
                               env_mode ? 0.0 : sec_mode[1] * 1e6);
                        fflush(stdout);
                    }
                    for (int s = 0; s < nset; s++) {
                        cudaFree(S[s].q.t.data); cudaFree(S[s].out.t.data);
                        if (S[s].qs.t.data) cudaFree(S[s].qs.t.data);
                        for (int k = 0; k < 6; k++)
                            if (S[s].a[k].t.data) cudaFree(S[s].a[k].t.data);
                    }
                    free(S);
                }
    vqp_end(&p);
    if (!quick && only_fmt < 0 && !only_skv && !only_hkv) sweep_splits(ctx, bw, rep);
    if (only_fmt < 0) vqb_bench_sdpa_cuda(ctx, bw, quick, only_skv, only_hkv, rep);
    if (only_fmt < 0 || only_fmt == FMT_CACHE) vqb_bench_sdpa_mix_cuda(ctx, bw, quick, only_skv, only_hkv, rep);
    vqr_end(rep);
    vq_ctx_free(ctx);
    return VQ_EXIT_OK;
}
#endif
