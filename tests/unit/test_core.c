/* test_core.c — status strings, ctx lifecycle, f16/bf16, PRNG, tensor checks,
 * thread pool and its public entry. */
#include <pthread.h>

#include "harness.h"

static void test_status_strings(void)
{
    VT_CHECK(strcmp(vq_status_string(VQ_OK), "VQ_OK") == 0, "VQ_OK");
    VT_CHECK(strcmp(vq_status_string(VQ_ERR_CORRUPT_DATA), "VQ_ERR_CORRUPT_DATA") == 0, "corrupt");
    VT_CHECK(strcmp(vq_status_string((vq_status)99), "VQ_ERR_UNKNOWN") == 0, "unknown");
    VT_CHECK(strcmp(vq_version_string(), "0.1.0") == 0, "%s", vq_version_string());
}

static void test_ctx_lifecycle(void)
{
    vq_ctx *ctx = (vq_ctx *)1;
    VT_CHECK(vq_ctx_create(NULL, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL out");
    vq_ctx_config bad = {.backend = (vq_backend)7};
    VT_CHECK(vq_ctx_create(&bad, &ctx) == VQ_ERR_INVALID_ARGUMENT && ctx == NULL, "bad backend");
    vq_ctx_config neg = {.num_threads = -1};
    VT_CHECK(vq_ctx_create(&neg, &ctx) == VQ_ERR_INVALID_ARGUMENT, "negative threads");
    VT_CHECK(vq_ctx_create(NULL, &ctx) == VQ_OK && ctx != NULL, "default ctx");
    VT_CHECK(vq_ctx_num_threads(ctx) >= 1, "threads %d", vq_ctx_num_threads(ctx));
    VT_CHECK(vq_ctx_backend(ctx) == VQ_BACKEND_CPU, "backend");
    VT_CHECK(strcmp(vq_ctx_last_error(ctx), "") == 0, "fresh ctx has no error");
    VT_CHECK(vq_ctx_synchronize(ctx) == VQ_OK, "sync");
    vq_ctx_free(ctx);
    vq_ctx_free(NULL);
    VT_CHECK(vq_backend_available(VQ_BACKEND_CPU), "cpu available");
    VT_CHECK(!vq_backend_available((vq_backend)9), "unknown backend unavailable");
    if (!vq_backend_available(VQ_BACKEND_CUDA)) {
        vq_ctx_config cuda = {.backend = VQ_BACKEND_CUDA};
        VT_CHECK(vq_ctx_create(&cuda, &ctx) == VQ_ERR_BACKEND_UNAVAILABLE, "cuda unavailable");
    }
}

/* vq_ctx_create has no context to hold a message: vq_last_error, the
 * thread's last failure, says why, naming the field and the device. */
static bool has(const char *haystack, const char *needle) { return strstr(haystack, needle) != NULL; }

static void *other_thread(void *arg)
{
    *(int *)arg = vq_last_error()[0] == '\0';
    return NULL;
}

static void test_ctx_create_messages(void)
{
    vq_ctx *ctx = NULL;
    VT_CHECK(vq_ctx_create(NULL, NULL) == VQ_ERR_INVALID_ARGUMENT && has(vq_last_error(), "vq_ctx_create: out is NULL"),
             "NULL out: '%s'", vq_last_error());
    vq_ctx_config bad = {.backend = (vq_backend)7};
    VT_CHECK(vq_ctx_create(&bad, &ctx) == VQ_ERR_INVALID_ARGUMENT && has(vq_last_error(), "cfg->backend is 7"),
             "bad backend: '%s'", vq_last_error());
    vq_ctx_config threads = {.num_threads = 5000};
    VT_CHECK(vq_ctx_create(&threads, &ctx) == VQ_ERR_INVALID_ARGUMENT && has(vq_last_error(), "cfg->num_threads is 5000"),
             "threads: '%s'", vq_last_error());
    vq_ctx_config dev = {.backend = VQ_BACKEND_CUDA, .device = -2};
    VT_CHECK(vq_ctx_create(&dev, &ctx) == VQ_ERR_INVALID_ARGUMENT && has(vq_last_error(), "cfg->device is -2"),
             "device: '%s'", vq_last_error());
    if (!vq_backend_available(VQ_BACKEND_CUDA)) {
        vq_ctx_config cuda = {.backend = VQ_BACKEND_CUDA, .device = 1};
        VT_CHECK(vq_ctx_create(&cuda, &ctx) == VQ_ERR_BACKEND_UNAVAILABLE && has(vq_last_error(), "cuda:1"),
                 "unavailable: '%s'", vq_last_error());
    }
    /* a later success leaves the message (like errno); a failing call on a
     * ctx puts its message in both places */
    const char *before = vq_last_error();
    VT_CHECK(vq_ctx_create(NULL, &ctx) == VQ_OK && strcmp(vq_last_error(), before) == 0, "success keeps it");
    VT_CHECK(vq_ctx_synchronize(NULL) == VQ_ERR_INVALID_ARGUMENT && has(vq_last_error(), "ctx is NULL"),
             "NULL ctx: '%s'", vq_last_error());
    /* thread-local: a fresh thread has no message */
    pthread_t t;
    int empty = 0;
    VT_CHECK(pthread_create(&t, NULL, other_thread, &empty) == 0 && pthread_join(t, NULL) == 0, "thread");
    VT_CHECK(empty, "another thread's message is its own");
    vq_ctx_free(ctx);
}

static void test_isa_override(void)
{
    setenv("VQ_ISA", "scalar", 1);
    vq_ctx *ctx = vt_ctx(1);
    VT_CHECK(strcmp(vq_ctx_isa(ctx), "scalar") == 0, "VQ_ISA=scalar gives %s", vq_ctx_isa(ctx));
    vq_ctx_free(ctx);
    setenv("VQ_ISA", "nonsense", 1);
    ctx = vt_ctx(1);
    VT_CHECK(strcmp(vq_ctx_isa(ctx), vq_isa_name(vq_cpu_best_isa())) == 0, "unknown VQ_ISA ignored");
    vq_ctx_free(ctx);
    unsetenv("VQ_ISA");
    VT_CHECK(vq_isa_includes(VQ_ISA_AVX512, VQ_ISA_AVX2) && !vq_isa_includes(VQ_ISA_AVX2, VQ_ISA_AVX512) &&
                 !vq_isa_includes(VQ_ISA_AVX2, VQ_ISA_NEON) && vq_isa_includes(VQ_ISA_NEON, VQ_ISA_SCALAR),
             "isa order");
}

/* float64 reference of f16 rounding: the nearest representable half, ties to
 * even mantissa, by exhaustive search over the 65536 encodings. */
static void test_half_roundtrip(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = vq_f16_to_f32((uint16_t)h);
        if (isnan(f)) { bad += !isnan(vq_f16_to_f32(vq_f32_to_f16(f))); continue; }
        bad += vq_f32_to_f16(f) != (uint16_t)h && !(f == 0.0f && (vq_f32_to_f16(f) & 0x7fff) == 0);
    }
    VT_CHECK(bad == 0, "%d halves do not round-trip", bad);
    /* ties and rounding: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 -> even (1) */
    VT_CHECK(vq_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "tie to even down");
    VT_CHECK(vq_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02, "tie to even up");
    VT_CHECK(vq_f32_to_f16(65520.0f) == 0x7c00 && vq_f32_to_f16(65519.0f) == 0x7bff, "overflow edge");
    VT_CHECK(vq_f32_to_f16(0x1p-24f) == 0x0001 && vq_f32_to_f16(0x1p-25f) == 0x0000, "subnormal edge");
    VT_CHECK(vq_f32_to_f16(0x1.8p-25f) == 0x0001, "above half of the smallest subnormal rounds up");
    VT_CHECK(vq_f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal");
    VT_CHECK(vq_f32_to_f16(-2.0f) == 0xc000, "negative");
    VT_CHECK(isinf(vq_f16_to_f32(vq_f32_to_f16(INFINITY))), "inf");
    VT_CHECK(isnan(vq_f16_to_f32(vq_f32_to_f16(NAN))), "nan");
    /* random floats against the float64 definition of nearest-even */
    vq_rng rng;
    vq_rng_seed(&rng, 11);
    int wrong = 0;
    for (int i = 0; i < 200000; i++) {
        const float f = (float)(vq_rng_normal(&rng) * pow(2.0, (double)(vq_rng_next(&rng) % 40) - 24.0));
        const uint16_t h = vq_f32_to_f16(f);
        const double got = vq_f16_to_f32(h);
        /* neighbours */
        const double up = vq_f16_to_f32((uint16_t)(h + 1)), dn = vq_f16_to_f32((uint16_t)(h - 1));
        const double e = fabs(got - f);
        if ((h & 0x7fff) != 0x7c00 && (h & 0x7fff) != 0 && (fabs(up - f) < e || fabs(dn - f) < e)) wrong++;
    }
    VT_CHECK(wrong == 0, "%d random floats not rounded to nearest", wrong);
}

static void test_bf16(void)
{
    VT_CHECK(vq_f32_to_bf16(1.0f) == 0x3f80, "one");
    VT_CHECK(vq_bf16_to_f32(0x3f80) == 1.0f, "one back");
    /* 1 + 2^-8 is a tie between 1 and 1 + 2^-7: even -> 1 */
    VT_CHECK(vq_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie even");
    VT_CHECK(vq_f32_to_bf16(1.0f + 0x1.8p-8f) == 0x3f81, "above tie");
    VT_CHECK(isnan(vq_bf16_to_f32(vq_f32_to_bf16(NAN))), "nan stays nan");
}

static void test_prng(void)
{
    vq_rng a, b;
    vq_rng_seed(&a, 42);
    vq_rng_seed(&b, 42);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= vq_rng_next(&a) == vq_rng_next(&b);
    VT_CHECK(same, "same seed, same stream");
    /* Golden values pin the algorithm across platforms (SplitMix64 -> xoshiro256**). */
    vq_rng_seed(&a, 0);
    const uint64_t first = vq_rng_next(&a);
    VT_CHECK(first == 0x99ec5f36cb75f2b4ull, "golden first draw %016llx", (unsigned long long)first);
    /* moments of the normal generator: mean within 5 sigma of 0, variance near 1 */
    vq_rng_seed(&a, 7);
    const int n = 200000;
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) { const double x = vq_rng_normal(&a); s += x; s2 += x * x; }
    const double mean = s / n, var = s2 / n - mean * mean;
    VT_CHECK(fabs(mean) < 5.0 / sqrt(n), "normal mean %g", mean);
    VT_CHECK(fabs(var - 1.0) < 5.0 * sqrt(2.0 / n), "normal variance %g", var);
    float signs[64];
    VT_CHECK(vq_random_signs(3, 64, signs) == VQ_OK, "signs");
    int plus = 0;
    for (int i = 0; i < 64; i++) { VT_CHECK(signs[i] == 1.0f || signs[i] == -1.0f, "sign %g", signs[i]); plus += signs[i] > 0; }
    VT_CHECK(plus > 10 && plus < 54, "signs balanced (%d of 64)", plus);
    VT_CHECK(vq_random_signs(3, 0, signs) == VQ_ERR_INVALID_ARGUMENT, "d = 0");
    VT_CHECK(vq_random_signs(3, 4, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL out");
}

static void test_tensor_checks(void)
{
    vq_ctx *ctx = vt_ctx(1);
    VT_CHECK(vq_enter(ctx, "vq_test") == VQ_OK, "enter");
    DLTensor *t = vt_new(VT_F32, VT_DIMS(2, 3, 4));
    VT_CHECK(vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3) == VQ_OK, "valid: %s", vq_ctx_last_error(ctx));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "argument 'x' is NULL", vq_check_tensor(ctx, NULL, "x", VQ_DTM_F32, 1, 4));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "expected rank 4, got rank 3", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 4, 4));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "expected dtype f16/u8, got f32",
             vq_check_tensor(ctx, t, "x", VQ_DTM_F16 | VQ_DTM_U8, 1, 4));
    VT_CHECK(strncmp(vq_ctx_last_error(ctx), "vq_test: ", 9) == 0, "message names the function: %s", vq_ctx_last_error(ctx));
    t->shape[1] = 0;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "dimension 1 is 0", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3));
    t->shape[1] = 3;
    int64_t strides[3] = {12, 1, 3};
    t->strides = strides;
    VT_FAILS(ctx, VQ_ERR_UNSUPPORTED, "axis 2 has stride 3", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3));
    strides[0] = 12; strides[1] = 4; strides[2] = 1;
    VT_CHECK(vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3) == VQ_OK, "compact strides accepted");
    t->strides = NULL;
    t->device.device_type = kDLCUDA;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "lives on cuda:0, expected the context's device cpu", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3));
    t->device.device_type = kDLCPU;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "expected shape [2, *, 5], got [2, 3, 4]",
             vq_check_shape(ctx, t, "x", 3, (const int64_t[]){2, -1, 5}));
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "axis 2 must be D/8 = 16", vq_check_dim(ctx, t, "x", -1, 16, "D/8"));
    void *data = t->data;
    t->data = NULL;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "data pointer is NULL", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3));
    t->data = data;
    int64_t huge[3] = {INT64_MAX / 2, 4, 4};
    int64_t *saved = t->shape;
    t->shape = huge;
    VT_FAILS(ctx, VQ_ERR_INVALID_ARGUMENT, "overflows", vq_check_tensor(ctx, t, "x", VQ_DTM_F32, 3, 3));
    t->shape = saved;
    vt_free(t);
    vq_ctx_free(ctx);
}

/* Every ISA's row converters equal the portable core conversion bit for bit
 * (NaN for NaN: the hardware quiets signalling NaNs): on every half in; on
 * floats around every half (the tie between neighbours, just above and just
 * below), the overflow and subnormal edges, NaNs with payloads and infinities
 * out; at every length 1..37 so vector bodies and tails both run; and other
 * dtypes pass through to the core. */
static void check_row_kernels(const char *isa, const vq_row_kernels *k)
{
    const int64_t n = 65536 + 5;
    uint16_t *h = malloc(n * 2), *got_h = malloc(n * 8), *want_h = malloc(n * 8);
    float *got = malloc(n * 4), *want = malloc(n * 4), *f = malloc(n * 4 * 4);
    for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)i;
    k->to_f32(h, VQ_DT_F16, n, got);
    vq_row_to_f32(h, VQ_DT_F16, n, want);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += isnan(want[i]) ? !isnan(got[i]) : memcmp(&got[i], &want[i], 4) != 0;
    VT_CHECK(bad == 0, "%s: %lld f16 -> f32 conversions differ from the core", isa, (long long)bad);
    int64_t m = 0;
    for (int64_t i = 0; i < 65536; i++) {
        const float a = vq_half_to_float((uint16_t)i), b = vq_half_to_float((uint16_t)(i + 1));
        f[m++] = a;
        f[m++] = 0.5f * (a + b); /* the tie */
        f[m++] = nextafterf(0.5f * (a + b), INFINITY);
        f[m++] = nextafterf(0.5f * (a + b), -INFINITY);
    }
    const float edges[] = {65519.0f, 65520.0f, 65536.0f, 1e30f, 0x1p-24f, 0x1p-25f,
                           0x1.8p-25f, 0x1p-26f, -0.0f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) f[i * 4 + 1] = edges[i];
    const uint32_t qnan = 0x7fc00001u, snan = 0xff812345u;
    memcpy(&f[3], &qnan, 4);
    memcpy(&f[7], &snan, 4);
    k->from_f32(f, m - 3, VQ_DT_F16, got_h);
    vq_row_from_f32(f, m - 3, VQ_DT_F16, want_h);
    bad = 0;
    for (int64_t i = 0; i < m - 3; i++)
        bad += (want_h[i] & 0x7fff) > 0x7c00 ? (got_h[i] & 0x7fff) <= 0x7c00 : got_h[i] != want_h[i];
    VT_CHECK(bad == 0, "%s: %lld f32 -> f16 conversions differ from the core", isa, (long long)bad);
    for (int64_t len = 1; len <= 37; len++) {
        k->from_f32(f + 4, len, VQ_DT_F16, got_h);
        k->to_f32(h + 1000, VQ_DT_F16, len, got);
        for (int64_t i = 0; i < len; i++) {
            bad += got_h[i] != vq_f32_to_f16(f[4 + i]) && !isnan(f[4 + i]);
            bad += got[i] != vq_f16_to_f32((uint16_t)(1000 + i));
        }
    }
    VT_CHECK(bad == 0, "%s: %lld conversions differ at short lengths", isa, (long long)bad);
    k->to_f32(f, VQ_DT_F32, 7, got); /* other dtypes go to the core */
    VT_CHECK(memcmp(got, f, 28) == 0, "%s: f32 rows are copied", isa);
    const uint16_t bf[3] = {0x3f80, 0xc000, 0x0000};
    k->to_f32(bf, VQ_DT_BF16, 3, got);
    VT_CHECK(got[0] == 1.0f && got[1] == -2.0f && got[2] == 0.0f, "%s: bf16 rows", isa);
    free(h);
    free(got_h);
    free(want_h);
    free(got);
    free(want);
    free(f);
}

static void test_row_kernels(void)
{
    for (int isa = 0; isa < VQ_ISA_COUNT; isa++)
        if (vq_isa_includes(vq_cpu_best_isa(), (vq_isa)isa))
            check_row_kernels(vq_isa_name((vq_isa)isa), vq_row_kernels_for((vq_isa)isa));
}

typedef struct { _Atomic int hits[1000]; _Atomic int max_thread; } pool_probe;

static void count_task(void *arg, int64_t task, int thread)
{
    pool_probe *p = arg;
    p->hits[task]++;
    int m = p->max_thread;
    while (thread > m && !__atomic_compare_exchange_n((int *)&p->max_thread, &m, thread, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
}

static void test_thread_pool(void)
{
    vq_ctx *ctx = vt_ctx(4);
    VT_CHECK(vq_ctx_num_threads(ctx) == 4, "4 threads");
    for (int round = 0; round < 50; round++) {
        static pool_probe p;
        memset(&p, 0, sizeof p);
        vq_parallel_for(ctx, 1000, count_task, &p);
        int ok = 1;
        for (int i = 0; i < 1000; i++) ok &= p.hits[i] == 1;
        VT_CHECK(ok, "each task exactly once (round %d)", round);
        VT_CHECK(p.max_thread < 4, "thread ids in range");
    }
    vq_ctx_free(ctx);
}

typedef struct nest_probe {
    vq_ctx *ctx;
    _Atomic int refused, ran;
} nest_probe;

static void nested_task(void *arg, int64_t task, int thread)
{
    (void)thread;
    (void)task;
    nest_probe *p = arg;
    p->refused += vq_ctx_parallel_for(p->ctx, 4, count_task, NULL) == VQ_ERR_INVALID_ARGUMENT;
    p->ran++;
}

/* The public entry: every task once, thread ids in range, with and without
 * the spin (VQ_SPIN_US=0 sleeps at once), short jobs back to back (the
 * spin's hand-over), and the errors: NULL ctx or fn, n_tasks < 0, a task
 * that starts another loop. */
static void test_ctx_parallel_for(void)
{
    static const char *const spins[] = {"0", "100"};
    for (int sp = 0; sp < 2; sp++) {
        setenv("VQ_SPIN_US", spins[sp], 1);
        vq_ctx *ctx = vt_ctx(3);
        unsetenv("VQ_SPIN_US");
        for (int round = 0; round < 2000; round++) {
            static pool_probe p;
            memset(&p, 0, sizeof p);
            const int64_t n = 1 + round % 7;
            VT_CHECK(vq_ctx_parallel_for(ctx, n, count_task, &p) == VQ_OK, "round %d", round);
            int ok = 1;
            for (int64_t i = 0; i < 1000; i++) ok &= p.hits[i] == (i < n);
            if (!ok || p.max_thread >= 3) {
                VT_CHECK(0, "spin %s round %d: each of %lld tasks once, thread %d < 3", spins[sp], round, (long long)n,
                         (int)p.max_thread);
                break;
            }
        }
        VT_CHECK(vq_ctx_parallel_for(ctx, 0, count_task, NULL) == VQ_OK, "0 tasks");
        VT_CHECK(vq_ctx_parallel_for(ctx, -1, count_task, NULL) == VQ_ERR_INVALID_ARGUMENT &&
                     strstr(vq_ctx_last_error(ctx), "n_tasks must be >= 0, got -1") != NULL,
                 "n_tasks -1: %s", vq_ctx_last_error(ctx));
        VT_CHECK(vq_ctx_parallel_for(ctx, 4, NULL, NULL) == VQ_ERR_INVALID_ARGUMENT &&
                     strstr(vq_ctx_last_error(ctx), "fn") != NULL,
                 "fn NULL: %s", vq_ctx_last_error(ctx));
        nest_probe np = {ctx, 0, 0};
        VT_CHECK(vq_ctx_parallel_for(ctx, 5, nested_task, &np) == VQ_OK && np.ran == 5 && np.refused == 5,
                 "nested calls refused: %d of %d", (int)np.refused, (int)np.ran);
        VT_CHECK(vq_ctx_parallel_for(ctx, 1, nested_task, &np) == VQ_OK && np.refused == 6,
                 "nested call refused on the inline path too");
        vq_ctx_free(ctx);
    }
    VT_CHECK(vq_ctx_parallel_for(NULL, 4, count_task, NULL) == VQ_ERR_INVALID_ARGUMENT, "NULL ctx");
}

int main(void)
{
    VT_RUN(test_status_strings);
    VT_RUN(test_ctx_lifecycle);
    VT_RUN(test_ctx_create_messages);
    VT_RUN(test_isa_override);
    VT_RUN(test_half_roundtrip);
    VT_RUN(test_bf16);
    VT_RUN(test_row_kernels);
    VT_RUN(test_prng);
    VT_RUN(test_tensor_checks);
    VT_RUN(test_thread_pool);
    VT_RUN(test_ctx_parallel_for);
    return vt_finish();
}
