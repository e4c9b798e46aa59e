/* test_model_kernels.c — the model runtime's weight kernels: vqm_matmul for
 * every weight type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K) on every ISA path
 * (scalar, avx2, avx512 where the CPU has them), awkward shapes, 1 and 3
 * threads, from the row layout and the packed one (tiles of 16 rows,
 * partial last tiles), and vqm_matmuls of three matrices in one
 * dispatch, against a float64 plain loop over the test's own dequantizer;
 * outputs poisoned, the stride padding must stay untouched. */
#include <math.h>

#include "harness.h"
#include "model_tiny.h"
#include "vqm.h"

/* y[n, ys] against the float64 product with t (rows < ys written, the padding still NaN) */
static void check_y(const vqm_kernels *k, const tiny_tensor *t, const float *x, int64_t n, const float *y, size_t ys,
                    const char *what)
{
    const int64_t rows = t->ne1, cols = t->ne0;
    int bad = 0;
    for (int64_t j = 0; j < n && bad < 3; j++) {
        for (int64_t r = 0; r < rows; r++) {
            double ref = 0, mag = 0;
            for (int64_t c = 0; c < cols; c++) {
                const double wv = tiny_get(t, r, c);
                ref += wv * x[j * cols + c];
                mag += fabs(wv * x[j * cols + c]);
            }
            const double got = y[(size_t)j * ys + (size_t)r];
            /* f32 accumulation: a few ulps of the sum of magnitudes */
            if (!(fabs(got - ref) <= 4e-6 * mag + 1e-6)) {
                VT_CHECK(0, "%s %s %s rows %lld cols %lld n %lld: y[%lld,%lld] = %.8g, expected %.8g (mag %.3g)", k->isa,
                         what, vqm_wtype_name(t->type), (long long)rows, (long long)cols, (long long)n, (long long)j,
                         (long long)r, got, ref, mag);
                bad++;
            }
        }
        for (size_t r = (size_t)rows; r < ys; r++)
            VT_CHECK(isnan(y[(size_t)j * ys + r]), "%s %s %s: padding y[%lld, %zu] written", k->isa, what,
                     vqm_wtype_name(t->type), (long long)j, r);
    }
    vt_checks++;
}

/* w's packed copy (vqm_matrix_pack) into *storage, or NULL when its type has none */
static void pack(vqm_matrix *w, uint8_t **storage)
{
    const size_t nb = vqm_matrix_packed_bytes(w);
    *storage = NULL;
    if (nb == 0) return;
    *storage = malloc(nb);
    memset(*storage, 0xA5, nb); /* poison: the packer must write every byte */
    vqm_matrix_pack(w, *storage);
    w->packed = *storage;
}

/* one matmul, from the row layout (scalar row kernels) and the packed one (the ISA's tile kernels) */
static void check_case(vqm_pool *pool, const vqm_kernels *k, uint32_t type, int64_t rows, int64_t cols, int64_t n,
                       vq_rng *rng)
{
    tiny_tensor t = {.type = type, .ne0 = cols, .ne1 = rows};
    tiny_fill(&t, rng, 0.3);
    const size_t ys = (size_t)rows + 3;
    float *x = malloc(sizeof(float) * (size_t)(n * cols));
    float *y = malloc(sizeof(float) * ys * (size_t)n);
    float *xsum = malloc(sizeof(float) * (size_t)(n * cols / 32));
    for (int64_t i = 0; i < n * cols; i++) x[i] = (float)vq_rng_normal(rng);
    for (int packed = 0; packed < 2; packed++) {
        vqm_matrix w = {type, rows, cols, tiny_row_bytes(type, cols), t.data, NULL};
        uint8_t *storage = NULL;
        if (packed) {
            pack(&w, &storage);
            if (storage == NULL) break; /* no packed layout for this type */
        }
        for (size_t i = 0; i < ys * (size_t)n; i++) y[i] = NAN;
        vqm_matmul(pool, k, &w, n, x, y, ys, xsum);
        check_y(k, &t, x, n, y, ys, packed ? "packed" : "rows");
        free(storage);
    }
    free(x);
    free(y);
    free(xsum);
    free(t.data);
}

/* vqm_matmuls: three matrices of the same X in one dispatch (types, row
 * counts and layouts differ; the threads' shares cross matrix boundaries) */
static void check_matmuls(vqm_pool *pool, const vqm_kernels *k, int64_t n, vq_rng *rng, const uint32_t types[3],
                          const int64_t COLS)
{
    static const int64_t rows[3] = {33, 16, 7};
    tiny_tensor t[3];
    vqm_matrix w[3];
    uint8_t *storage[3];
    float *y[3];
    size_t ys[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (tiny_tensor){.type = types[i], .ne0 = COLS, .ne1 = rows[i]};
        tiny_fill(&t[i], rng, 0.3);
        w[i] = (vqm_matrix){types[i], rows[i], COLS, tiny_row_bytes(types[i], COLS), t[i].data, NULL};
        storage[i] = NULL;
        if (i != 1) pack(&w[i], &storage[i]); /* the BF16 one stays unpacked: both paths in one dispatch */
        ys[i] = (size_t)rows[i] + 2;
        y[i] = malloc(sizeof(float) * ys[i] * (size_t)n);
        for (size_t e = 0; e < ys[i] * (size_t)n; e++) y[i][e] = NAN;
    }
    float *x = malloc(sizeof(float) * (size_t)(n * COLS)), *xsum = malloc(sizeof(float) * (size_t)(n * COLS / 32));
    for (int64_t i = 0; i < n * COLS; i++) x[i] = (float)vq_rng_normal(rng);
    const vqm_matrix *wp[3] = {&w[0], &w[1], &w[2]};
    vqm_matmuls(pool, k, 3, wp, n, x, y, ys, xsum);
    for (int i = 0; i < 3; i++) {
        check_y(k, &t[i], x, n, y[i], ys[i], "matmuls");
        free(y[i]);
        free(storage[i]);
        free(t[i].data);
    }
    free(x);
    free(xsum);
}

static void test_matmul_all(void)
{
    static const uint32_t types[] = {0, 1, 30, 8, 2, 3};
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    static const int64_t shapes[][3] = {{1, 32, 1}, {7, 96, 2}, {17, 64, 3}, {33, 576, 4}, {5, 1536, 5}, {40, 160, 9}};
    static const uint32_t kq_types[] = {12, 14};
    static const int64_t kq_shapes[][3] = {{1, 256, 1}, {17, 512, 3}, {33, 1024, 4}, {40, 256, 9}};
    vq_rng rng;
    vq_rng_seed(&rng, 42);
    for (int th = 1; th <= 3; th += 2) {
        vq_ctx *ctx = NULL;
        const vq_ctx_config cfg = {.num_threads = th};
        VT_CHECK(vq_ctx_create(&cfg, &ctx) == VQ_OK, "ctx of %d threads", th);
        vqm_pool *pool = NULL;
        VT_CHECK(vqm_pool_create(ctx, &pool) == VQ_OK, "pool");
        for (size_t ii = 0; ii < 3; ii++) {
            vqm_kernels k;
            vqm_kernels_init(&k, isas[ii]);
            if (strcmp(k.isa, isas[ii]) != 0) continue; /* not compiled in */
            vq_ctx *probe = NULL;
            setenv("VQ_ISA", isas[ii], 1);
            vq_ctx_create(NULL, &probe);
            unsetenv("VQ_ISA");
            const bool cpu_has = probe != NULL && strcmp(vq_ctx_isa(probe), isas[ii]) == 0;
            vq_ctx_free(probe);
            if (!cpu_has) continue; /* the CPU lacks it */
            for (size_t ti = 0; ti < 6; ti++)
                for (size_t si = 0; si < 6; si++) check_case(pool, &k, types[ti], shapes[si][0], shapes[si][1], shapes[si][2], &rng);
            /* Q5_0 on the 32-column shapes; the K-quants (super-blocks of 256) on their own */
            for (size_t si = 0; si < 6; si++) check_case(pool, &k, 6, shapes[si][0], shapes[si][1], shapes[si][2], &rng);
            for (size_t ti = 0; ti < 2; ti++)
                for (size_t si = 0; si < 4; si++)
                    check_case(pool, &k, kq_types[ti], kq_shapes[si][0], kq_shapes[si][1], kq_shapes[si][2], &rng);
            static const uint32_t mixed[3] = {3, 30, 8}, kmixed[3] = {12, 6, 14};
            check_matmuls(pool, &k, 1, &rng, mixed, 96);
            check_matmuls(pool, &k, 6, &rng, mixed, 96);
            check_matmuls(pool, &k, 5, &rng, kmixed, 512);
            if (th == 1) printf("  isa %s checked\n", k.isa);
        }
        vqm_pool_free(pool);
        vq_ctx_free(ctx);
    }
}

static void test_isa_names(void)
{
    vqm_kernels k;
    vqm_kernels_init(&k, "scalar");
    VT_CHECK(strcmp(k.isa, "scalar") == 0, "scalar");
    vqm_kernels_init(&k, "neon");
    VT_CHECK(strcmp(k.isa, "scalar") == 0, "unknown name gives scalar: %s", k.isa);
    vqm_kernels_init(&k, NULL);
    VT_CHECK(strcmp(k.isa, "scalar") == 0 && k.dot[3] != NULL && k.dot[14] != NULL && k.dot[13] == NULL, "NULL gives scalar");
    /* every name vq_ctx_isa gives: "amx" the AVX-512 set (a ctx on an AMX
     * CPU ran the scalar matrix kernels while the name was unknown here) */
    vqm_kernels want;
    vqm_kernels_init(&want, "avx512");
    vqm_kernels_init(&k, "amx");
    VT_CHECK(strcmp(k.isa, want.isa) == 0, "amx gives the %s set, expected %s", k.isa, want.isa);
    vq_ctx *ctx = NULL;
    VT_CHECK(vq_ctx_create(NULL, &ctx) == VQ_OK, "ctx");
    const char *isa = vq_ctx_isa(ctx);
    vqm_kernels_init(&k, isa);
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0 || strcmp(isa, "amx") == 0)
        VT_CHECK(strcmp(k.isa, "scalar") != 0, "the ctx's %s gives the scalar set", isa);
    vq_ctx_free(ctx);
    uint64_t bytes = vqm_wtype_row_bytes(3, 576, NULL);
    VT_CHECK(bytes == 360, "Q4_1 row of 576: %llu", (unsigned long long)bytes);
    VT_CHECK(vqm_wtype_row_bytes(3, 33, NULL) == 0 && vqm_wtype_row_bytes(99, 32, NULL) == 0, "bad rows");
    VT_CHECK(vqm_wtype_row_bytes(12, 512, NULL) == 288 && vqm_wtype_row_bytes(14, 256, NULL) == 210 &&
                 vqm_wtype_row_bytes(6, 64, NULL) == 44 && vqm_wtype_row_bytes(12, 640, NULL) == 0,
             "K-quant rows");
}

int main(void)
{
    VT_RUN(test_isa_names);
    VT_RUN(test_matmul_all);
    return vt_finish();
}
