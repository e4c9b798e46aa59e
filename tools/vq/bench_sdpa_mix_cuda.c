/* bench_sdpa_mix_cuda.c — the cache part of `vq bench attention --backend
 * cuda`: key formats that only the KV cache holds (mixed-width KIVI keys,
 * VQ_KEY_KIVI_MIX, have no public vq_keys_format for vq_fused_sdpa), timed
 * through a CUDA cache's decode attend at the shapes of the vq_fused_sdpa
 * table (Hq 32, D 128, Sq 1, B 1 / 8, Hkv 32 / 8, Skv 4K / 32K / 128K),
 * beside f16 keys and values and KIVI 4-bit keys through the same cache (the
 * controls on the same path). The methods are the presets' layer configs
 * (vq_cache_preset_layer_config: their key and value methods only; no sinks,
 * transforms or window). With no residual tokens and Skv a whole number of
 * key groups, the window is empty, so an attend is the paged decode kernel
 * and the merge, the launches vq_fused_sdpa makes besides the query prep.
 * Bytes are the pages' codes and parameters (vq_cache_memory) against the
 * copy bandwidth of the same run. CUDA events, median of 20 after 3
 * warm-ups; each set of B sequences is one of enough sets in the cache to
 * overflow the 60 MB L2, attended in turn. The tokens are one random chunk
 * of 4096 appended over and over. */
#ifdef VQ_TOOL_CUDA
#include <math.h>
#include <string.h>

#include "bench_cuda.h"

enum { D = 128, Hq = 32, PAGE = 256, CHUNK = 4096 };

/* preset (layer config) -> the row's key and value columns */
static const struct {
    const char *preset, *keys, *values;
} methods[] = {
    {"f16", "f16 (cache)", "f16"},
    {"quality-4bit", "kivi 4-bit g128", "turbo 3-bit f16s"},
    {"balanced-3bit", "kivimix 48/128 4b", "turbo 2-bit f16s"},
    {"compact-2.5bit", "kivimix 16/128 4b", "turbo 2-bit f16s"},
};

static void check(vq_ctx *ctx, vq_status st, const char *what)
{
    if (st == VQ_OK) return;
    fprintf(stderr, "vq bench attention: %s: %s: %s\n", what, vq_status_string(st), vq_ctx_last_error(ctx));
    exit(VQ_EXIT_FAILURE);
}

/* Bytes per token and kv head in the pages (the preset's key_bits and
 * value_bits, which are for D = 128). */
static double token_bytes(const char *preset)
{
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (strcmp(p->name, preset) == 0) return (p->key_bits + p->value_bits) * D / 8;
    }
    return 4.0 * D;
}

/* One (method, B, Hkv, Skv): the median seconds of a decode attend and the
 * bytes it reads. */
static double time_one(vq_ctx *ctx, const char *preset, int B, int Hkv, int Skv, double *bytes)
{
    vq_cache_layer_config lc;
    check(ctx, vq_cache_preset_layer_config(preset, D, &lc), preset);
    int nset = (int)ceil(200e6 / ((double)B * Hkv * Skv * token_bytes(preset)));
    nset = nset < 1 ? 1 : nset > 32 ? 32 : nset;
    const int64_t pages = (int64_t)nset * B * ((Skv + PAGE - 1) / PAGE + 1);
    const vq_cache_config cfg = {.n_layers = 1, .n_kv_heads = Hkv, .n_q_heads = Hq, .head_dim = D,
                                 .page_size = PAGE, .capacity_pages = pages, .max_sequences = nset * B,
                                 .layers = &lc};
    vq_cache *cache = NULL;
    check(ctx, vq_cache_create(ctx, &cfg, &cache), "vq_cache_create");
    const int m = Skv < CHUNK ? Skv : CHUNK;
    dten k, v, q, out;
    vqb_cu_dnew(&k, F16, B, Hkv, m, D, 1);
    vqb_cu_dnew(&v, F16, B, Hkv, m, D, 1);
    vqb_cu_dnew(&q, F16, B, Hq, 1, D, 1);
    vqb_cu_dnew(&out, F16, B, Hq, 1, D, 0);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)nset * B);
    for (int i = 0; i < nset * B; i++) check(ctx, vq_cache_seq_add(cache, &ids[i]), "vq_cache_seq_add");
    for (int s = 0; s < nset; s++)
        for (int t = 0; t < Skv; t += m)
            check(ctx, vq_cache_append(cache, 0, B, ids + s * B, &k.t, &v.t, NULL), "vq_cache_append");
    vq_cache_memory_report mem;
    check(ctx, vq_cache_memory(cache, &mem), "vq_cache_memory");
    *bytes = (double)(mem.code_bytes + mem.param_bytes) / nset;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    float ts[20];
    for (int it = 0; it < 23; it++) {
        CK(cudaEventRecord(e0, 0));
        check(ctx, vq_cache_attend(cache, 0, B, ids + (it % nset) * B, &q.t, &out.t, NULL), "vq_cache_attend");
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        if (it >= 3) CK(cudaEventElapsedTime(&ts[it - 3], e0, e1));
    }
    qsort(ts, 20, sizeof ts[0], vqb_cu_cmp_f);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(ids);
    vq_cache_free(cache);
    cudaFree(k.t.data), cudaFree(v.t.data), cudaFree(q.t.data), cudaFree(out.t.data);
    return 0.5 * (ts[9] + ts[10]) * 1e-3;
}

void vqb_bench_sdpa_mix_cuda(vq_ctx *ctx, double bw, int quick, int only_skv, int only_hkv, vqr *rep)
{
    if (!rep) printf("\nKV cache decode attend (Hq %d, D %d, Sq 1, pages of %d, no window); MB = keys + values\n", Hq,
                     D, PAGE);
    if (!rep)
        printf("%-18s %-16s %2s %4s %7s %9s %9s %8s %7s\n", "keys", "values", "B", "Hkv", "Skv", "MB", "us", "GB/s",
               "%copy");
    const int skvs[] = {4096, 32768, 131072}, bs[] = {1, 8}, hkvs[] = {32, 8};
    for (size_t f = 0; f < sizeof methods / sizeof methods[0]; f++)
        for (int si = 0; si < 3; si++)
            for (int bi = 0; bi < 2; bi++)
                for (int hi = 0; hi < 2; hi++) {
                    const int Skv = skvs[si], B = bs[bi], Hkv = hkvs[hi];
                    if ((quick && B != 1) || (only_skv && Skv != only_skv) || (only_hkv && Hkv != only_hkv)) continue;
                    double bytes = 0.0;
                    const double sec = time_one(ctx, methods[f].preset, B, Hkv, Skv, &bytes);
                    if (rep) {
                        vqr_row(rep);
                        vqr_str(rep, "format", "cache_attend");
                        vqr_str(rep, "preset", methods[f].preset);
                        vqr_str(rep, "keys", methods[f].keys);
                        vqr_str(rep, "values", methods[f].values);
                        vqb_cu_report_shape(rep, B, Hq, Hkv, Skv, D, bytes, sec, bw);
                    } else {
                        printf("%-18s %-16s %2d %4d %7d %9.1f %9.1f %8.0f %6.1f%%\n", methods[f].keys,
                               methods[f].values, B, Hkv, Skv, bytes / 1e6, sec * 1e6, bytes / sec / 1e9,
                               100.0 * bytes / sec / bw);
                        fflush(stdout);
                    }
                }
}
#endif
