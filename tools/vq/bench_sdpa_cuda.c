/* bench_sdpa_cuda.c — the vq_fused_sdpa part of `vq bench attention
 * --backend cuda`: every key format of vq_encoded_keys with f16 values, and
 * plain f16 keys (the control against PyTorch's f16 SDPA), at Hq = 32, D =
 * 128, Sq = 1, B 1 / 8, Hkv 32 / 8, Skv 4K / 32K / 128K; then every key
 * format with each compressed value format at B 1, 128K. Bytes are the cache's
 * (keys + values; shared tables excluded), against the copy bandwidth of the
 * same run. CUDA events, median of 20 after 3 warm-ups; inputs rotated over
 * enough copies to overflow the 60 MB L2. Codes are random bytes: the
 * kernels mask (TurboQuant) or clamp (VECINFER, CommVQ positions) them. */
#ifdef VQ_TOOL_CUDA
#include <math.h>
#include <string.h>

#include "bench_cuda.h"

/* K_F16CC: the f16 control on the CUDA-core skeleton (VQ_CUDA_MMA=0), timed
 * beside the tensor-core one in the same run */
enum { K_F16, K_F16CC, K_TURBO4, K_RVQ22, K_AFFINE2, K_RABITQ, K_QJL, K_VECINFER, K_COMMVQ, K_COUNT };
static const char *kname[K_COUNT] = {"f16 (control)", "f16 (cuda cores)", "turbo 4-bit",  "rvq 2+2-bit",
                                     "affine 2-bit g32", "rabitq 1-bit",  "qjl m=128",    "pq M32 C256",
                                     "commvq R2 C256"};

enum { D = 128, Hq = 32, QJL_M = 128, VECINFER_M = 32, VECINFER_C = 256, CV_R = 2, CV_C = 256, NT = 8 };

/* Value formats timed: f16, KIVI 2-bit (g 32, f16 scale/zero per token),
 * 4-bit codebook nibbles with a per-token scale, TurboQuant 4-bit. */
enum { V_F16, V_AFFINE2, V_NIBBLE, V_TURBO4, V_COUNT };
static const char *vname[V_COUNT] = {"f16", "kivi 2-bit", "nibble+scale", "turbo 4-bit"};

/* One input set: queries, out, the value tensors (vt[]), the key tensors (tt[]). */
typedef struct kset {
    dten q, out, vt[3], tt[NT];
    vq_encoded_keys k;
    vq_encoded_values v;
} kset;

static double value_bytes_per_token(int vf)
{
    switch (vf) {
    case V_F16: return 2.0 * D;
    case V_AFFINE2: return D / 4 + 2 * 2.0 * D / 32;
    case V_NIBBLE: return D / 2 + 4;
    default: return D / 2 + 4;
    }
}

static void build_values(kset *x, int vf, int B, int Hkv, int Skv)
{
    dten *t = x->vt;
    vq_encoded_values *v = &x->v;
    memset(v, 0, sizeof *v);
    switch (vf) {
    case V_F16: *v = vq_f16_values(vqb_cu_dnew(&t[0], F16, B, Hkv, Skv, D, 1)); break;
    case V_AFFINE2:
        v->format = VQ_VALUES_KIVI;
        v->kivi.codes = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, D / 4, 0);
        v->kivi.scale = vqb_cu_dnew(&t[1], F16, B, Hkv, Skv, D / 32, 1);
        v->kivi.zero = vqb_cu_dnew(&t[2], F16, B, Hkv, Skv, D / 32, 1);
        v->kivi.bits = 2;
        v->kivi.group_size = 32;
        break;
    case V_NIBBLE:
        v->format = VQ_VALUES_CODEBOOK;
        v->codebook.idx = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, D / 2, 0);
        v->codebook.cents = vqb_cu_dnew(&t[1], F32, 16, 0, 0, 0, 2);
        v->codebook.scale = vqb_cu_dnew(&t[2], F32, B, Hkv, Skv, 0, 3);
        break;
    default:
        v->format = VQ_VALUES_TURBO;
        v->turbo.idx = vqb_cu_dnew(&t[0], U32, B, Hkv, Skv, D * 4 / 32, 0);
        v->turbo.scale = vqb_cu_dnew(&t[1], F32, B, Hkv, Skv, 0, 3);
        v->turbo.bits = 4;
        break;
    }
}

static double key_bytes_per_token(int f)
{
    switch (f) {
    case K_F16:
    case K_F16CC: return 2.0 * D;
    case K_TURBO4: return D * 4 / 8 + 4;
    case K_RVQ22: return 2 * (D * 2 / 8 + 4);
    case K_AFFINE2: return D * 2 / 8 + 2 * 2.0 * D / 32; /* codes + f16 scale/zero per group of 32 */
    case K_RABITQ: return D / 8 + 8;
    case K_QJL: return QJL_M / 8 + 4;
    case K_VECINFER: return VECINFER_M;
    default: return CV_R + 4;
    }
}

/* Builds set x's keys of format f (device tensors in x->tt). */
static void build(kset *x, int f, int B, int Hkv, int Skv)
{
    dten *t = x->tt;
    vq_encoded_keys *k = &x->k;
    memset(k, 0, sizeof *k);
    switch (f) {
    case K_F16:
    case K_F16CC:
        k->format = VQ_KEYS_F16;
        k->f16.keys = vqb_cu_dnew(&t[0], F16, B, Hkv, Skv, D, 1);
        break;
    case K_TURBO4:
        k->format = VQ_KEYS_TURBO;
        k->turbo.idx = vqb_cu_dnew(&t[0], U32, B, Hkv, Skv, D * 4 / 32, 0);
        k->turbo.scale = vqb_cu_dnew(&t[1], F32, B, Hkv, Skv, 0, 3);
        k->turbo.bits = 4;
        break;
    case K_RVQ22:
        k->format = VQ_KEYS_TURBO_RVQ;
        k->rvq.idx1 = vqb_cu_dnew(&t[0], U32, B, Hkv, Skv, D * 2 / 32, 0);
        k->rvq.scale1 = vqb_cu_dnew(&t[1], F32, B, Hkv, Skv, 0, 3);
        k->rvq.idx2 = vqb_cu_dnew(&t[2], U32, B, Hkv, Skv, D * 2 / 32, 0);
        k->rvq.scale2 = vqb_cu_dnew(&t[3], F32, B, Hkv, Skv, 0, 3);
        k->rvq.b1 = k->rvq.b2 = 2;
        break;
    case K_AFFINE2:
        k->format = VQ_KEYS_KIVI;
        k->kivi.codes = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, D / 4, 0);
        k->kivi.scale = vqb_cu_dnew(&t[1], F16, B, Hkv, (Skv + 31) / 32, D, 1);
        k->kivi.zero = vqb_cu_dnew(&t[2], F16, B, Hkv, (Skv + 31) / 32, D, 1);
        k->kivi.bits = 2;
        k->kivi.group_size = 32;
        break;
    case K_RABITQ:
        k->format = VQ_KEYS_RABITQ;
        k->rabitq.bits = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, D / 8, 0);
        k->rabitq.mag = vqb_cu_dnew(&t[1], F32, B, Hkv, Skv, 0, 3);
        k->rabitq.cnst = vqb_cu_dnew(&t[2], F32, B, Hkv, Skv, 0, 2);
        break;
    case K_QJL:
        k->format = VQ_KEYS_QJL;
        k->qjl.bits = vqb_cu_dnew(&t[0], U32, B, Hkv, Skv, QJL_M / 32, 0);
        k->qjl.norm = vqb_cu_dnew(&t[1], F32, B, Hkv, Skv, 0, 3);
        k->qjl.projection = vqb_cu_dnew(&t[2], F32, QJL_M, D, 0, 0, 2);
        break;
    case K_VECINFER:
        k->format = VQ_KEYS_VECINFER;
        k->vecinfer.idx = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, VECINFER_M, 0);
        k->vecinfer.codebook = vqb_cu_dnew(&t[1], F32, VECINFER_M, VECINFER_C, D / VECINFER_M, 0, 2);
        k->vecinfer.smooth = vqb_cu_dnew(&t[2], F32, D, 0, 0, 0, 3);
        break;
    default: {
        k->format = VQ_KEYS_COMMVQ;
        k->commvq.idx = vqb_cu_dnew(&t[0], U8, B, Hkv, Skv, CV_R, 0);
        k->commvq.codebook = vqb_cu_dnew(&t[1], F32, CV_R, CV_C, D, 0, 2);
        k->commvq.cos_freqs = vqb_cu_dnew(&t[2], F32, Skv, D / 2, 0, 0, 2);
        k->commvq.sin_freqs = vqb_cu_dnew(&t[3], F32, Skv, D / 2, 0, 0, 2);
        /* positions 0..Skv-1 (random words would all clamp to the last row) */
        k->commvq.positions = vqb_cu_dnew(&t[4], I32, Skv, 0, 0, 0, 0);
        int32_t *pos = malloc(sizeof(int32_t) * (size_t)Skv);
        for (int i = 0; i < Skv; i++) pos[i] = i;
        CK(cudaMemcpy(t[4].t.data, pos, sizeof(int32_t) * (size_t)Skv, cudaMemcpyHostToDevice));
        free(pos);
        k->commvq.scale = vqb_cu_dnew(&t[5], F32, B, Hkv, Skv, 0, 3);
        k->commvq.rope = VQ_ROPE_HALF;
        break;
    }
    }
}

static void release(kset *x)
{
    cudaFree(x->q.t.data);
    cudaFree(x->out.t.data);
    for (int i = 0; i < 3; i++)
        if (x->vt[i].t.data) cudaFree(x->vt[i].t.data);
    for (int i = 0; i < NT; i++)
        if (x->tt[i].t.data) cudaFree(x->tt[i].t.data);
}

void vqb_bench_sdpa_cuda(vq_ctx *ctx, double bw, int quick, int only_skv, int only_hkv, vqr *rep)
{
    if (!rep) printf("\nvq_fused_sdpa (Hq %d, D %d, Sq 1); MB = keys + values\n", Hq, D);
    if (!rep) printf("%-18s %-13s %2s %4s %7s %9s %9s %8s %7s\n", "keys", "values", "B", "Hkv", "Skv", "MB", "us", "GB/s", "%copy");
    const int skvs[] = {4096, 32768, 131072}, bs[] = {1, 8}, hkvs[] = {32, 8};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    /* f16 values over the whole grid; the compressed value formats at B 1, 128K */
    for (int vf = 0; vf < V_COUNT; vf++)
    for (int f = 0; f < K_COUNT; f++)
        for (int si = 0; si < 3; si++)
            for (int bi = 0; bi < 2; bi++)
                for (int hi = 0; hi < 2; hi++) {
                    const int Skv = skvs[si], B = bs[bi], Hkv = hkvs[hi];
                    if ((quick && B != 1) || (only_skv && Skv != only_skv) || (only_hkv && Hkv != only_hkv)) continue;
                    if (vf != V_F16 && (B != 1 || Skv != 131072 || f == K_F16CC)) continue;
                    if (f == K_F16CC) setenv("VQ_CUDA_MMA", "0", 1);
                    const double bytes = (double)B * Hkv * Skv * (key_bytes_per_token(f) + value_bytes_per_token(vf));
                    int nset = (int)ceil(200e6 / bytes);
                    nset = nset < 1 ? 1 : nset > 32 ? 32 : nset;
                    kset *S = calloc((size_t)nset, sizeof *S);
                    for (int s = 0; s < nset; s++) {
                        vqb_cu_dnew(&S[s].q, F16, B, Hq, 1, D, 1);
                        vqb_cu_dnew(&S[s].out, F16, B, Hq, 1, D, 0);
                        build_values(&S[s], vf, B, Hkv, Skv);
                        build(&S[s], f, B, Hkv, Skv);
                    }
                    float ts[20];
                    vq_status st = VQ_OK;
                    for (int it = 0; it < 23 && st == VQ_OK; it++) {
                        kset *x = &S[it % nset];
                        CK(cudaEventRecord(e0, 0));
                        st = vq_fused_sdpa(ctx, &x->q.t, &x->k, &x->v, 0.0883883f, NULL, &x->out.t, NULL);
                        CK(cudaEventRecord(e1, 0));
                        CK(cudaEventSynchronize(e1));
                        if (it >= 3) CK(cudaEventElapsedTime(&ts[it - 3], e0, e1));
                    }
                    if (st != VQ_OK) {
                        fprintf(stderr, "vq bench attention: fused_sdpa %s: %s: %s\n", kname[f], vq_status_string(st),
                                vq_ctx_last_error(ctx));
                        exit(VQ_EXIT_FAILURE);
                    }
                    if (f == K_F16CC) unsetenv("VQ_CUDA_MMA");
                    qsort(ts, 20, sizeof ts[0], vqb_cu_cmp_f);
                    const double sec = 0.5 * (ts[9] + ts[10]) * 1e-3;
                    if (rep) {
                        vqr_row(rep);
                        vqr_str(rep, "format", "fused_sdpa");
                        vqr_str(rep, "values", vname[vf]);
                        vqr_str(rep, "keys", kname[f]);
                        vqb_cu_report_shape(rep, B, Hq, Hkv, Skv, D, bytes, sec, bw);
                    } else {
                        printf("%-18s %-13s %2d %4d %7d %9.1f %9.1f %8.0f %6.1f%%\n", kname[f], vname[vf], B, Hkv, Skv, bytes / 1e6,
                               sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / bw);
                        fflush(stdout);
                    }
                    for (int s = 0; s < nset; s++) release(&S[s]);
                    free(S);
                }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
}
#endif
