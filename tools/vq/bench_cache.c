/* bench_cache.c — `vq bench cache`: one decode step through the KV cache
 * (append one token and attend, every layer, a batch of sequences of Skv
 * tokens each), for the f16 method and each compressed one, and the cache's
 * attention against the raw kernel (vq_fused_sdpa over the same tokens
 * encoded into one contiguous run per sequence: the cache's own overhead),
 * all in one run. Bytes are what a step's attention reads (codes, scales and
 * window, from vq_cache_memory), against the measured read bandwidth. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bench_attention.h"
#include "commands.h"
#include "progress.h"
#include "report.h"
#include "veloxquant.h"
#ifdef VQ_TOOL_CUDA
#include "bench_cuda.h"
#endif

typedef struct bc_opts {
    int backend;        /* 0 cpu, 1 cuda */
    vqa_sizes skv, batch;
    const char *methods;
    int64_t layers, hkv, hq, dim, page, residual, repeats;
    int clock;          /* 0 wall, 1 cpu: how attend and raw are timed */
    bool json;
} bc_opts;

static const DLDataType BC_F16 = {kDLFloat, 16, 1}, BC_F32 = {kDLFloat, 32, 1}, BC_U8 = {kDLUInt, 8, 1},
                        BC_U32 = {kDLUInt, 32, 1};

/* Memory on the bench's device. */
static void *bc_alloc(bool cuda, size_t bytes)
{
#ifdef VQ_TOOL_CUDA
    if (cuda) {
        void *p = NULL;
        CK(cudaMalloc(&p, bytes));
        return p;
    }
#endif
    (void)cuda;
    void *p = malloc(bytes);
    if (p == NULL) {
        fprintf(stderr, "vq bench cache: out of memory (%zu bytes)\n", bytes);
        exit(VQ_EXIT_FAILURE);
    }
    return p;
}

static void bc_free(bool cuda, void *p)
{
#ifdef VQ_TOOL_CUDA
    if (cuda) {
        cudaFree(p);
        return;
    }
#endif
    free(p);
}

static void bc_upload(bool cuda, void *dst, const void *src, size_t bytes)
{
#ifdef VQ_TOOL_CUDA
    if (cuda) {
        CK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

/* A tensor header over p (compact unless strides given). */
typedef struct bc_tensor {
    DLTensor t;
    int64_t shape[4], strides[4];
} bc_tensor;

static DLTensor *bc_view(bc_tensor *x, bool cuda, void *p, DLDataType dt, int nd, const int64_t *shape)
{
    memset(x, 0, sizeof *x);
    memcpy(x->shape, shape, sizeof(int64_t) * (size_t)nd);
    x->t = (DLTensor){.data = p, .device = {cuda ? kDLCUDA : kDLCPU, 0}, .ndim = nd, .dtype = dt, .shape = x->shape};
    return &x->t;
}

static size_t bc_bytes(DLDataType dt, int nd, const int64_t *shape)
{
    size_t n = dt.bits / 8;
    for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
    return n;
}

/* A device tensor of dt [a,b,c,d] (nd dims), its memory owned by the list. */
typedef struct bc_pool {
    bool cuda;
    void *p[32];
    int n;
} bc_pool;

static DLTensor *bc_new(bc_pool *pool, bc_tensor *x, DLDataType dt, int nd, int64_t a, int64_t b, int64_t c,
                        int64_t d)
{
    const int64_t shape[4] = {a, b, c, d};
    void *p = bc_alloc(pool->cuda, bc_bytes(dt, nd, shape));
    pool->p[pool->n++] = p;
    return bc_view(x, pool->cuda, p, dt, nd, shape);
}

static void bc_pool_free(bc_pool *pool)
{
    for (int i = 0; i < pool->n; i++) bc_free(pool->cuda, pool->p[i]);
    pool->n = 0;
}

/* Pseudo-random f16 in about [-2, 2): the keys and values of every layer. */
static void fill_f16(uint16_t *x, size_t n, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = vq_f32_to_f16((float)((double)(s >> 11) * (4.0 / 9007199254740992.0) - 2.0));
    }
}

static void check(vq_ctx *ctx, vq_status s, const char *what)
{
    if (s == VQ_OK) return;
    fprintf(stderr, "vq bench cache: %s: %s: %s\n", what, vq_status_string(s), vq_ctx_last_error(ctx));
    exit(VQ_EXIT_FAILURE);
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* The same tokens encoded as one contiguous run per sequence for the raw
 * kernel: keys and values [B,Hkv,S,D] f16 (on the device) encoded as the
 * preset's layer config says. Methods without a plain codec path here (QJL
 * norms, RaBitQ, codebook values) give false (not measured). */
typedef struct bc_raw {
    bc_pool pool;
    bc_tensor t[12];
    vq_encoded_keys ek;
    vq_encoded_values ev;
} bc_raw;

static bool raw_encode(vq_ctx *ctx, bool cuda, const vq_cache_layer_config *lc, const DLTensor *k, const DLTensor *v,
                       bc_raw *r)
{
    const int64_t B = k->shape[0], H = k->shape[1], S = k->shape[2], D = k->shape[3];
    memset(r, 0, sizeof *r);
    r->pool.cuda = cuda;
    bc_pool *pool = &r->pool;
    bc_tensor *t = r->t;
    const vq_key_config *kc = &lc->keys;
    const vq_value_config *vc = &lc->values;
    float diag_h[256];
    for (int i = 0; i < D; i++) diag_h[i] = (i * 5 % 3) ? 1.0f : -1.0f;
    DLTensor *diag = bc_new(pool, &t[0], BC_F32, 1, D, 0, 0, 0);
    bc_upload(cuda, diag->data, diag_h, sizeof(float) * (size_t)D);
    switch (kc->method) {
    case VQ_KEY_F16: r->ek = (vq_encoded_keys){.format = VQ_KEYS_F16, .f16 = {k}}; break;
    case VQ_KEY_KIVI: {
        DLTensor *codes = bc_new(pool, &t[1], BC_U8, 4, B, H, S, D * kc->bits / 8);
        DLTensor *sc = bc_new(pool, &t[2], BC_F16, 4, B, H, S / kc->group_size, D);
        DLTensor *z = bc_new(pool, &t[3], BC_F16, 4, B, H, S / kc->group_size, D);
        check(ctx, vq_kivi_quantize_keys(ctx, k, kc->bits, kc->group_size, codes, sc, z), "raw keys");
        r->ek.format = VQ_KEYS_KIVI;
        r->ek.kivi.codes = codes, r->ek.kivi.scale = sc, r->ek.kivi.zero = z, r->ek.kivi.bits = kc->bits;
        r->ek.kivi.group_size = kc->group_size;
        break;
    }
    case VQ_KEY_TURBO:
    case VQ_KEY_TURBO_RVQ: {
        const bool rvq = kc->method == VQ_KEY_TURBO_RVQ;
        DLTensor *i1 = bc_new(pool, &t[1], BC_U8, 4, B, H, S, D), *s1 = bc_new(pool, &t[2], BC_F32, 3, B, H, S, 0);
        DLTensor *i2 = bc_new(pool, &t[3], BC_U8, 4, B, H, S, D), *s2 = bc_new(pool, &t[4], BC_F32, 3, B, H, S, 0);
        DLTensor *p1 = bc_new(pool, &t[5], BC_U32, 4, B, H, S, (D * kc->bits + 31) / 32);
        DLTensor *p2 = bc_new(pool, &t[6], BC_U32, 4, B, H, S, (D * (rvq ? kc->bits2 : 1) + 31) / 32);
        const vq_turboquant_opts o = {.norm_correct = kc->norm_correct};
        if (rvq) check(ctx, vq_turboquant_rvq_encode(ctx, k, diag, kc->bits, kc->bits2, i1, s1, i2, s2), "raw keys");
        else check(ctx, vq_turboquant_hadamard_quantize(ctx, k, diag, kc->bits, i1, s1, &o), "raw keys");
        check(ctx, vq_bit_pack(ctx, i1, kc->bits, p1), "raw pack");
        if (rvq) check(ctx, vq_bit_pack(ctx, i2, kc->bits2, p2), "raw pack");
        if (rvq) {
            r->ek.format = VQ_KEYS_TURBO_RVQ;
            r->ek.rvq.idx1 = p1, r->ek.rvq.scale1 = s1, r->ek.rvq.idx2 = p2, r->ek.rvq.scale2 = s2;
            r->ek.rvq.diag = diag, r->ek.rvq.b1 = kc->bits, r->ek.rvq.b2 = kc->bits2;
        } else {
            r->ek.format = VQ_KEYS_TURBO;
            r->ek.turbo.idx = p1, r->ek.turbo.scale = s1, r->ek.turbo.diag = diag, r->ek.turbo.bits = kc->bits;
        }
        break;
    }
    default: bc_pool_free(pool); return false;
    }
    switch (vc->method) {
    case VQ_VALUE_F16: r->ev = vq_f16_values(v); break;
    case VQ_VALUE_KIVI: {
        DLTensor *codes = bc_new(pool, &t[7], BC_U8, 4, B, H, S, D * vc->bits / 8);
        DLTensor *sc = bc_new(pool, &t[8], BC_F16, 4, B, H, S, D / vc->group_size);
        DLTensor *z = bc_new(pool, &t[9], BC_F16, 4, B, H, S, D / vc->group_size);
        check(ctx, vq_kivi_quantize_values(ctx, v, vc->bits, vc->group_size, codes, sc, z), "raw values");
        r->ev.format = VQ_VALUES_KIVI;
        r->ev.kivi.codes = codes, r->ev.kivi.scale = sc, r->ev.kivi.zero = z, r->ev.kivi.bits = vc->bits;
        r->ev.kivi.group_size = vc->group_size;
        break;
    }
    case VQ_VALUE_TURBO: {
        DLTensor *i1 = bc_new(pool, &t[7], BC_U8, 4, B, H, S, D), *s1 = bc_new(pool, &t[8], BC_F32, 3, B, H, S, 0);
        DLTensor *p1 = bc_new(pool, &t[9], BC_U32, 4, B, H, S, (D * vc->bits + 31) / 32);
        check(ctx, vq_turboquant_hadamard_quantize(ctx, v, diag, vc->bits, i1, s1, NULL), "raw values");
        check(ctx, vq_bit_pack(ctx, i1, vc->bits, p1), "raw pack");
        r->ev.format = VQ_VALUES_TURBO;
        r->ev.turbo.idx = p1, r->ev.turbo.scale = s1, r->ev.turbo.diag = diag, r->ev.turbo.bits = vc->bits;
        break;
    }
    default: bc_pool_free(pool); return false;
    }
    return true;
}

/* The raw kernel over every layer's copy (one call per layer, as the
 * cache attends), or false when this backend's kernels do not run it. */
static bool raw_step(vq_ctx *ctx, const bc_raw *raw, int L, const DLTensor *q, DLTensor *out, float scale)
{
    for (int l = 0; l < L; l++)
        if (vq_fused_sdpa(ctx, q, &raw[l].ek, &raw[l].ev, scale, NULL, out, NULL) != VQ_OK) return false;
    return true;
}

typedef struct bc_result {
    double step, attend, raw, bytes;
    bool ok;
} bc_result;

/* One (method, B, Skv): a cache of `layers` layers filled with B sequences
 * of Skv tokens, then timed decode steps. */
static bc_result run_one(vq_ctx *ctx, const bc_opts *o, const char *method, int64_t B, int64_t S)
{
    bc_result res = {0};
    const bool cuda = o->backend == 1;
    const int64_t H = o->hkv, Hq = o->hq, D = o->dim, L = o->layers;
    const int steps = (int)o->repeats + 2;
    vq_cache_layer_config lc;
    if (vq_cache_preset_layer_config(method, (int)D, &lc) != VQ_OK) return res;
    const int64_t pages = B * ((S + steps * 2 + o->residual + o->page - 1) / o->page + 1);
    /* a preset named by what it buys keeps its sink, centering and window;
     * its smoothing is off here: the key scales are fitted from queries,
     * which the random prefill has not, and attend only scales the query */
    vq_cache_transforms xf[8] = {{0}};
    const vq_cache_preset_info *named = NULL;
    for (int i = 0; i < vq_cache_preset_count(); i++)
        if (vq_cache_preset(i)->recipe && strcmp(vq_cache_preset(i)->name, method) == 0) named = vq_cache_preset(i);
    for (int64_t l = 0; named != NULL && l < L; l++) {
        xf[l] = named->transforms;
        xf[l].smooth = false;
    }
    const vq_cache_config cfg = {.n_layers = (int)L, .n_kv_heads = (int)H, .n_q_heads = (int)Hq, .head_dim = (int)D,
                                 .page_size = (int)o->page, .capacity_pages = pages, .max_sequences = (int)B,
                                 .residual_tokens = (int)o->residual, .preset = method,
                                 .transforms = named != NULL ? xf : NULL};
    vq_cache *cache = NULL;
    if (vq_cache_create(ctx, &cfg, &cache) != VQ_OK) {
        fprintf(stderr, "vq bench cache: %s: %s (skipped)\n", method, vq_ctx_last_error(ctx));
        return res;
    }
    /* the tokens: [B,Hkv,S,D] f16, other tokens in every layer (as in a model;
     * identical layers would also let page deduplication below the VM share
     * the raw copies' memory) */
    const size_t n = (size_t)(B * H * S * D);
    uint16_t *host = malloc(n * 2);
    bc_pool pool = {.cuda = cuda};
    bc_tensor tk[8], tv[8], tq, to, t1k, t1v;
    DLTensor *Kl[8], *Vl[8]; /* one copy per layer (the raw kernel's; the cache copies what it stores) */
    for (int64_t l = 0; l < L; l++) {
        Kl[l] = bc_new(&pool, &tk[l], BC_F16, 4, B, H, S, D), Vl[l] = bc_new(&pool, &tv[l], BC_F16, 4, B, H, S, D);
        fill_f16(host, n, 42 + 2 * (uint64_t)l);
        bc_upload(cuda, Kl[l]->data, host, n * 2);
        fill_f16(host, n, 43 + 2 * (uint64_t)l);
        bc_upload(cuda, Vl[l]->data, host, n * 2);
    }
    DLTensor *Q = bc_new(&pool, &tq, BC_F16, 4, B, Hq, 1, D), *O = bc_new(&pool, &to, BC_F16, 4, B, Hq, 1, D);
    fill_f16(host, (size_t)(B * Hq * D), 44);
    bc_upload(cuda, Q->data, host, (size_t)(B * Hq * D) * 2);
    DLTensor *k1 = bc_new(&pool, &t1k, BC_F16, 4, B, H, 1, D), *v1 = bc_new(&pool, &t1v, BC_F16, 4, B, H, 1, D);
    fill_f16(host, (size_t)(B * H * D), 45);
    bc_upload(cuda, k1->data, host, (size_t)(B * H * D) * 2);
    bc_upload(cuda, v1->data, host, (size_t)(B * H * D) * 2);
    free(host);
    int64_t *ids = malloc(sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++) check(ctx, vq_cache_seq_add(cache, &ids[b]), "vq_cache_seq_add");
    /* prefill in chunks of 4096 tokens, through strided views of each layer's K and V */
    for (int64_t l = 0; l < L; l++)
        for (int64_t t0 = 0; t0 < S; t0 += 4096) {
            const int64_t m = S - t0 < 4096 ? S - t0 : 4096;
            bc_tensor ck, cv;
            const int64_t shape[4] = {B, H, m, D};
            DLTensor *kc = bc_view(&ck, cuda, Kl[l]->data, BC_F16, 4, shape);
            DLTensor *vc = bc_view(&cv, cuda, Vl[l]->data, BC_F16, 4, shape);
            const int64_t st[4] = {H * S * D, S * D, D, 1};
            memcpy(ck.strides, st, sizeof st), memcpy(cv.strides, st, sizeof st);
            kc->strides = ck.strides, vc->strides = cv.strides;
            kc->byte_offset = vc->byte_offset = (uint64_t)(t0 * D * 2);
            check(ctx, vq_cache_append(cache, (int)l, (int)B, ids, kc, vc, NULL), "prefill append");
        }
    vq_cache_memory_report mem;
    check(ctx, vq_cache_memory(cache, &mem), "vq_cache_memory");
    res.bytes = (double)(mem.code_bytes + mem.param_bytes + mem.residual_bytes) / (double)L;
    double ts[64], ta[64];
    bool failed = false;
    for (int r = -2; r < o->repeats && !failed; r++) {
        const double t0 = vqb_now();
        for (int64_t l = 0; l < L && !failed; l++) {
            failed |= vq_cache_append(cache, (int)l, (int)B, ids, k1, v1, NULL) != VQ_OK;
            failed |= !failed && vq_cache_attend(cache, (int)l, (int)B, ids, Q, O, NULL) != VQ_OK;
        }
        check(ctx, vq_ctx_synchronize(ctx), "synchronize");
        if (r >= 0) ts[r] = vqb_now() - t0;
    }
    if (failed) {
        fprintf(stderr, "vq bench cache: %s: %s (skipped)\n", method, vq_ctx_last_error(ctx));
    } else {
        /* attention alone, every layer: the cache and the raw kernel over one
         * copy of the tokens per layer, timed alternately so that the load of
         * the machine weighs on both alike */
        bc_raw *raw = calloc((size_t)L, sizeof *raw);
        int enc = 0;
        while (enc < L && raw_encode(ctx, cuda, &lc, Kl[enc], Vl[enc], &raw[enc])) enc++;
        bool raw_ok = enc == L;
        const float scale = 1.0f / sqrtf((float)D);
        /* --clock cpu: CPU seconds of the process (every pool thread), which a
         * loaded machine inflates far less than the wall clock */
        double (*const now)(void) = o->clock == 1 ? vqb_cpu_now : vqb_now;
        double tr[64];
        for (int r = -2; r < o->repeats; r++) {
            double t0 = now();
            for (int64_t l = 0; l < L; l++) check(ctx, vq_cache_attend(cache, (int)l, (int)B, ids, Q, O, NULL), "attend");
            check(ctx, vq_ctx_synchronize(ctx), "synchronize");
            if (r >= 0) ta[r] = (now() - t0) / (double)L;
            if (!raw_ok) continue;
            t0 = now();
            raw_ok = raw_step(ctx, raw, (int)L, Q, O, scale);
            check(ctx, vq_ctx_synchronize(ctx), "synchronize");
            if (r >= 0) tr[r] = (now() - t0) / (double)L;
        }
        for (int l = 0; l < enc; l++) bc_pool_free(&raw[l].pool);
        free(raw);
        res.step = median(ts, (int)o->repeats);
        res.attend = median(ta, (int)o->repeats);
        res.raw = raw_ok ? median(tr, (int)o->repeats) : -1.0;
        res.ok = true;
    }
    free(ids);
    vq_cache_free(cache);
    bc_pool_free(&pool);
    return res;
}

int vq_cmd_bench_cache(int argc, char **argv)
{
    static const char *const backends[] = {"cpu", "cuda", NULL}, *const clocks[] = {"wall", "cpu", NULL};
    bc_opts o = {.methods = "f16,kivi2,kivi4,turbo2,turbo3,turbo4,rvq22,rabitq-exact,qjl",
                 .layers = 2, .hkv = 8, .hq = 32, .dim = 128, .page = 256, .residual = 0, .repeats = 7};
    const vqa_opt opts[] = {
        {"backend", VQA_CHOICE, &o.backend, .choices = backends, .help = "where the cache lives"},
        {"skv", VQA_SIZES, &o.skv, 1, 1 << 20, "N,..", "tokens per sequence (default 4K,32K; cuda 4K,32K,128K)"},
        {"batch", VQA_SIZES, &o.batch, 1, 256, "B,..", "sequences per step (default 1; cuda 1,8)"},
        {"methods", VQA_STRING, &o.methods, .metavar = "P,..", .help = "presets (vq_cache_preset names; the named ones with their sink, centering and window, not smoothing), f16 first; all = every preset that needs no fitted tables"},
        {"layers", VQA_INT, &o.layers, 1, 8, "N", "layers per step"},
        {"hkv", VQA_INT, &o.hkv, 1, 64, "N", "kv heads"},
        {"hq", VQA_INT, &o.hq, 1, 256, "N", "query heads (a multiple of hkv)"},
        {"dim", VQA_INT, &o.dim, 8, 256, "D", "head dim"},
        {"page", VQA_INT, &o.page, 32, 4096, "P", "page size in tokens (multiple of 32)"},
        {"residual", VQA_INT, &o.residual, 0, 4096, "R", "f16 residual window"},
        {"repeats", VQA_INT, &o.repeats, 1, 60, "N", "timed steps (median)"},
        {"clock", VQA_CHOICE, &o.clock, .choices = clocks,
         .help = "time attend and raw by the wall clock or by the process's CPU seconds (cpu backend)"},
        VQA_JSON_OPT(&o.json),
    };
    const vqa_cmd cmd = {"bench cache",
                         "one decode step (append + attend, every layer) through the KV cache: f16 vs each method, "
                         "cache vs the raw kernel",
                         opts, VQA_COUNT(opts),
                         "A step appends one token to each of B sequences of Skv tokens and attends, in every layer. "
                         "'attend' is the cache's attention per layer; 'raw' is vq_fused_sdpa over the same tokens "
                         "encoded into one contiguous run (n/a where the bench has no plain codec path: QJL, "
                         "codebook values); overhead = attend / raw - 1. KIVI, and TurboQuant values at D = 128: the "
                         "cache runs the integer kernels (vq_cache_attend_opts AUTO) and vq_fused_sdpa the F32 ones "
                         "(its AUTO), so their overhead compares two arithmetics. Bytes: what one layer's attention "
                         "reads."};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (o.hq % o.hkv != 0) return vqa_usage_error(&cmd, "--hq %lld is not a multiple of --hkv %lld", (long long)o.hq, (long long)o.hkv);
    if (o.page % 32 != 0) return vqa_usage_error(&cmd, "--page must be a multiple of 32, got %lld", (long long)o.page);
    const bool cuda = o.backend == 1;
    if (cuda && o.clock == 1) return vqa_usage_error(&cmd, "--clock cpu times CPU work: it needs --backend cpu");
#ifndef VQ_TOOL_CUDA
    if (cuda) {
        fprintf(stderr, "vq bench cache: this build has no CUDA backend\n");
        return VQ_EXIT_FAILURE;
    }
#endif
    if (o.skv.n == 0) {
        o.skv = cuda ? (vqa_sizes){3, {4096, 32768, 131072}} : (vqa_sizes){2, {4096, 32768}};
    }
    if (o.batch.n == 0) o.batch = cuda ? (vqa_sizes){2, {1, 8}} : (vqa_sizes){1, {1}};
    char list[512];
    if (strcmp(o.methods, "all") == 0) {
        /* f16 first (every ratio's reference), then the presets in their listed order */
        int at = snprintf(list, sizeof list, "f16");
        for (int i = 0; i < vq_cache_preset_count(); i++) {
            const vq_cache_preset_info *p = vq_cache_preset(i);
            if (!p->needs_tables && strcmp(p->name, "f16") != 0 && at < (int)sizeof list)
                at += snprintf(list + at, sizeof list - (size_t)at, ",%s", p->name);
        }
    } else {
        snprintf(list, sizeof list, "%s", o.methods);
    }
    const char *names[32];
    int nm = 0;
    for (char *tok = strtok(list, ","); tok && nm < 32; tok = strtok(NULL, ",")) names[nm++] = tok;
    if (nm == 0 || strcmp(names[0], "f16") != 0)
        return vqa_usage_error(&cmd, "--methods must start with f16 (the reference of every ratio)");
    for (int i = 0; i < nm; i++)
        if (vq_cache_preset_layer_config(names[i], (int)o.dim, &(vq_cache_layer_config){0}) != VQ_OK)
            return vqa_usage_error(&cmd, "--methods: unknown preset '%s'", names[i]);

    vq_ctx *ctx = NULL;
    const vq_ctx_config cc = {.backend = cuda ? VQ_BACKEND_CUDA : VQ_BACKEND_CPU};
    if (vq_ctx_create(&cc, &ctx) != VQ_OK) {
        fprintf(stderr, "vq bench cache: vq_ctx_create: %s\n", vq_last_error());
        return VQ_EXIT_FAILURE;
    }
    double bw = 0.0, per_cpu = 0.0;
#ifdef VQ_TOOL_CUDA
    if (cuda) bw = vqb_cu_copy_bw() / 2.0; /* read bytes per second of a copy */
#endif
    if (!cuda) bw = 1e9 * vqb_read_bandwidth(vq_ctx_num_threads(ctx), vqb_stream_bytes(), &per_cpu); /* GB/s -> B/s */
    vqr *rep = vqr_begin("bench cache", argc, argv, ctx, o.json);
    vqr_info_num(rep, "read_bandwidth", bw / 1e9, "GB/s");
    vqr_info_num(rep, "layers", (double)o.layers, NULL);
    vqr_info_str(rep, "clock", clocks[o.clock]);
    if (!o.json) {
        printf("vq bench cache: %s, %d threads, isa %s; Hkv %lld, Hq %lld, D %lld, page %lld, R %lld, %lld layers; "
               "read bandwidth %.1f GB/s; attend/raw by the %s clock\n",
               cuda ? "cuda" : "cpu", vq_ctx_num_threads(ctx), vq_ctx_isa(ctx), (long long)o.hkv, (long long)o.hq,
               (long long)o.dim, (long long)o.page, (long long)o.residual, (long long)o.layers, bw / 1e9,
               clocks[o.clock]);
        printf("%-13s %3s %7s %10s %10s %10s %9s %9s %9s %7s %6s\n", "method", "B", "Skv", "step ms", "attend ms",
               "raw ms", "overhead", "vs f16", "MB/layer", "GB/s", "of bw");
    }
    vqp prog;
    vqp_begin(&prog, "bench cache", (int64_t)o.skv.n * o.batch.n * nm);
    for (int si = 0; si < o.skv.n; si++)
        for (int bi = 0; bi < o.batch.n; bi++) {
            double f16_step = 0;
            for (int mi = 0; mi < nm; mi++) {
                const int64_t S = o.skv.v[si], B = o.batch.v[bi];
                vqp_step(&prog, "%s B %lld Skv %lld", names[mi], (long long)B, (long long)S);
                const bc_result r = run_one(ctx, &o, names[mi], B, S);
                vqp_clear(&prog);
                if (!r.ok) continue;
                if (mi == 0) f16_step = r.step;
                const double gbs = r.bytes / r.attend / 1e9, over = r.raw > 0 ? r.attend / r.raw - 1.0 : NAN;
                if (!o.json) {
                    char raw[16], ov[16];
                    snprintf(raw, sizeof raw, r.raw > 0 ? "%.3f" : "n/a", r.raw * 1e3);
                    snprintf(ov, sizeof ov, r.raw > 0 ? "%+.1f%%" : "n/a", over * 100);
                    printf("%-13s %3lld %7lld %10.3f %10.3f %10s %9s %8.2fx %9.1f %7.1f %5.0f%%\n", names[mi],
                           (long long)B, (long long)S, r.step * 1e3, r.attend * 1e3, raw, ov, f16_step / r.step,
                           r.bytes / 1e6, gbs, 100.0 * gbs * 1e9 / bw);
                    fflush(stdout);
                }
                vqr_row(rep);
                vqr_str(rep, "method", names[mi]);
                vqr_int(rep, "batch", B, NULL);
                vqr_int(rep, "skv", S, "tokens");
                vqr_num(rep, "step", r.step * 1e3, "ms");
                vqr_num(rep, "attend", r.attend * 1e3, "ms");
                vqr_num(rep, "raw", r.raw > 0 ? r.raw * 1e3 : NAN, "ms");
                vqr_num(rep, "overhead", over, NULL);
                vqr_num(rep, "speedup_vs_f16", f16_step / r.step, NULL);
                vqr_num(rep, "bytes_per_layer", r.bytes, "B");
                vqr_num(rep, "attend_bandwidth", gbs, "GB/s");
            }
        }
    vqp_end(&prog);
    vqr_end(rep);
    vq_ctx_free(ctx);
    (void)per_cpu;
    return VQ_EXIT_OK;
}
