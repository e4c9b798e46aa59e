/* harness.c — see harness.h. */
#include "harness.h"

#include "attention/attn_kernels.h"

int vt_failures = 0;
int vt_checks = 0;
const char *vt_current = "";

const DLDataType VT_F32 = {kDLFloat, 32, 1}, VT_F16 = {kDLFloat, 16, 1}, VT_BF16 = {kDLBfloat, 16, 1},
                 VT_U8 = {kDLUInt, 8, 1}, VT_U16 = {kDLUInt, 16, 1}, VT_I32 = {kDLInt, 32, 1},
                 VT_U32 = {kDLUInt, 32, 1};

int vt_finish(void)
{
    printf("%d passed, %d failed\n", vt_checks - vt_failures, vt_failures);
    return vt_failures ? 1 : 0;
}

static size_t elem_size(DLDataType dt) { return (size_t)(dt.bits / 8) * dt.lanes; }

DLTensor *vt_new(DLDataType dt, int ndim, const int64_t *shape)
{
    DLTensor *t = calloc(1, sizeof *t);
    int64_t *sh = calloc((size_t)(ndim > 0 ? ndim : 1), sizeof *sh);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) { sh[i] = shape[i]; n *= shape[i] > 0 ? shape[i] : 1; }
    t->ndim = ndim;
    t->shape = sh;
    t->dtype = dt;
    t->device.device_type = kDLCPU;
    t->data = malloc((size_t)n * elem_size(dt) + 64);
    vt_poison(t);
    return t;
}

DLTensor *vt_like(const DLTensor *t, DLDataType dt) { return vt_new(dt, t->ndim, t->shape); }

void vt_free(DLTensor *t)
{
    if (!t) return;
    free(t->data);
    free(t->shape);
    free(t);
}

DLTensor *vt_view(DLTensor *t, int ndim, const int64_t *shape)
{
    DLTensor *v = calloc(1, sizeof *v);
    *v = *t;
    int64_t *sh = calloc((size_t)(ndim > 0 ? ndim : 1), sizeof *sh);
    for (int i = 0; i < ndim; i++) sh[i] = shape[i];
    v->ndim = ndim;
    v->shape = sh;
    return v;
}

void vt_free_view(DLTensor *t)
{
    if (!t) return;
    free(t->shape);
    free(t);
}

int64_t vt_numel(const DLTensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i] > 0 ? t->shape[i] : 1;
    return n;
}

size_t vt_bytes(const DLTensor *t) { return (size_t)vt_numel(t) * elem_size(t->dtype); }

void vt_poison(DLTensor *t) { memset(t->data, 0xA5, vt_bytes(t)); }

double vt_get(const DLTensor *t, int64_t i)
{
    const vq_dtype dt = vq_dtype_of(t);
    switch (dt) {
    case VQ_DT_F32: case VQ_DT_F16: case VQ_DT_BF16: return vq_load_f(t->data, dt, i);
    default: return (double)vq_load_i(t->data, dt, i);
    }
}

void vt_set(DLTensor *t, int64_t i, double v)
{
    const vq_dtype dt = vq_dtype_of(t);
    switch (dt) {
    case VQ_DT_F32: case VQ_DT_F16: case VQ_DT_BF16: vq_store_f(t->data, dt, i, (float)v); break;
    default: vq_store_i(t->data, dt, i, (int64_t)v); break;
    }
}

void vt_fill_normal(DLTensor *t, vq_rng *rng, double mean, double sigma)
{
    const int64_t n = vt_numel(t);
    for (int64_t i = 0; i < n; i++) vt_set(t, i, mean + sigma * vq_rng_normal(rng));
}

void vt_fill_uniform_int(DLTensor *t, vq_rng *rng, int64_t lo, int64_t hi)
{
    const int64_t n = vt_numel(t);
    const uint64_t span = (uint64_t)(hi - lo + 1);
    for (int64_t i = 0; i < n; i++) vt_set(t, i, (double)(lo + (int64_t)(vq_rng_next(rng) % span)));
}

void vt_fill_signs(DLTensor *t, vq_rng *rng)
{
    const int64_t n = vt_numel(t);
    for (int64_t i = 0; i < n; i++) vt_set(t, i, (vq_rng_next(rng) >> 63) ? -1.0 : 1.0);
}

void vt_fill_keys(DLTensor *t, vq_rng *rng, int n_outlier_channels, double outlier)
{
    const int64_t d = t->shape[t->ndim - 1];
    const int64_t n = vt_numel(t);
    /* outlier channels are spread evenly over the head dimension */
    const int64_t stride = n_outlier_channels > 0 && d / n_outlier_channels > 0 ? d / n_outlier_channels : d;
    for (int64_t i = 0; i < n; i++) {
        const int64_t c = i % d;
        const int is_outlier = n_outlier_channels > 0 && c % stride == 0 && c / stride < n_outlier_channels;
        vt_set(t, i, vq_rng_normal(rng) * (is_outlier ? outlier : 1.0));
    }
}

double vt_rel_l2(const DLTensor *out, const double *ref)
{
    const int64_t n = vt_numel(out);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double o = vt_get(out, i);
        if (isnan(o)) return INFINITY;
        num += (o - ref[i]) * (o - ref[i]);
        den += ref[i] * ref[i];
    }
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

double vt_max_abs(const DLTensor *out, const double *ref)
{
    const int64_t n = vt_numel(out);
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        const double e = fabs(vt_get(out, i) - ref[i]);
        if (isnan(e)) return INFINITY;
        if (e > m) m = e;
    }
    return m;
}

double vt_tol(const DLTensor *out)
{
    const vq_dtype dt = vq_dtype_of(out);
    return (dt == VQ_DT_F16 || dt == VQ_DT_BF16) ? 2e-3 : 1e-5;
}

int64_t vt_count_poisoned(const DLTensor *t)
{
    const size_t es = elem_size(t->dtype);
    const int64_t n = vt_numel(t);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)t->data + (size_t)i * es;
        size_t k = 0;
        while (k < es && p[k] == 0xA5) k++;
        if (k == es) bad++;
    }
    return bad;
}

void *vt_snapshot(const DLTensor *t)
{
    void *s = malloc(vt_bytes(t) + 1);
    memcpy(s, t->data, vt_bytes(t));
    return s;
}

int vt_unchanged(const DLTensor *t, const void *snapshot) { return memcmp(t->data, snapshot, vt_bytes(t)) == 0; }

vq_ctx *vt_ctx(int threads)
{
    vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = threads};
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(&cfg, &ctx) != VQ_OK) {
        fprintf(stderr, "cannot create a CPU context\n");
        exit(1);
    }
    return ctx;
}

void vt_for_each_isa(int threads, void (*fn)(vq_ctx *ctx, const char *isa))
{
    const vq_isa best = vq_cpu_best_isa();
    const char *saved = getenv("VQ_ISA");
    char *saved_copy = saved ? strdup(saved) : NULL;
    for (int i = 0; i < VQ_ISA_COUNT; i++) {
        if (!vq_isa_includes(best, (vq_isa)i)) continue;
        setenv("VQ_ISA", vq_isa_name((vq_isa)i), 1);
        vq_ctx *ctx = vt_ctx(threads);
        if (strcmp(vq_ctx_isa(ctx), vq_isa_name((vq_isa)i)) == 0) fn(ctx, vq_ctx_isa(ctx));
        vq_ctx_free(ctx);
    }
    if (saved_copy) { setenv("VQ_ISA", saved_copy, 1); free(saved_copy); }
    else unsetenv("VQ_ISA");
}

void vt_check_block_state(const char *isa, const char *what, int it, int R, int nb, int D, bool (*bad)[4],
                          float (*m)[4], float (*d)[4], const float *o0, const float *o1)
{
    for (int r = 0; r < R; r++) {
        VT_CHECK(bad[0][r] == bad[1][r], "%s %s it %d row %d: poison %d, sequence %d", isa, what, it, r, bad[0][r],
                 bad[1][r]);
        VT_CHECK(vt_same_float(m[0][r], m[1][r]) && vt_same_float(d[0][r], d[1][r]),
                 "%s %s it %d row %d: m %g d %g, sequence m %g d %g", isa, what, it, r, (double)m[0][r],
                 (double)d[0][r], (double)m[1][r], (double)d[1][r]);
        for (int c = 0; c < D; c++)
            VT_CHECK(vt_same_float(o0[r * D + c], o1[r * D + c]), "%s %s it %d R %d nb %d o[%d][%d]: %g, sequence %g",
                     isa, what, it, R, nb, r, c, (double)o0[r * D + c], (double)o1[r * D + c]);
    }
}

void vt_init_block_state(vq_rng *rng, int it, int R, int D, bool (*bad)[4], float (*m)[4], float (*d)[4], float *o0,
                         float *o1)
{
    for (int r = 0; r < R; r++) {
        const bool first = it % 7 < 2;
        m[0][r] = m[1][r] = first ? -INFINITY : (float)vq_rng_normal(rng) * 3.0f;
        d[0][r] = d[1][r] = first ? 0.0f : 1.0f + (float)(vq_rng_next(rng) % 100);
        bad[0][r] = bad[1][r] = it % 11 == 0 && r == 0;
        for (int c = 0; c < D; c++) o0[r * D + c] = o1[r * D + c] = (float)vq_rng_normal(rng);
    }
}

void vt_softmax_step(const struct vq_attn_kernels *k, int R, int n, float *s, int64_t lds, bool *bad, float *m,
                     float *d, float *alpha, float *o, int D)
{
    k->poison(R, n, s, lds, bad);
    k->softmax(R, n, s, lds, m, d, alpha);
    k->rescale(R, D, o, D, alpha);
}
