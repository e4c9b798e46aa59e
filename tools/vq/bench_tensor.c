/* bench_tensor.c — owned tensors, fills and a pthread loop for the
 * benchmarks (the tool sees only the public API, not the library's pool). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench_attention.h"

size_t vqb_bytes(const vqb_tensor *x)
{
    size_t n = (size_t)x->t.dtype.bits / 8;
    for (int i = 0; i < x->t.ndim; i++) n *= (size_t)x->shape[i];
    return n;
}

bool vqb_alloc(vqb_tensor *x, DLDataType dt, int ndim, const int64_t *shape)
{
    memset(x, 0, sizeof *x);
    for (int i = 0; i < ndim; i++) x->shape[i] = shape[i];
    x->t.ndim = ndim;
    x->t.shape = x->shape;
    x->t.dtype = dt;
    x->t.device = (DLDevice){kDLCPU, 0};
    const size_t bytes = (vqb_bytes(x) + 63) & ~(size_t)63;
    x->t.data = aligned_alloc(64, bytes ? bytes : 64);
    return x->t.data != NULL;
}

void vqb_release(vqb_tensor *x)
{
    free(x->t.data);
    x->t.data = NULL;
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

void vqb_fill(vqb_tensor *x, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    const size_t n = vqb_bytes(x);
    if (x->t.dtype.code == kDLUInt) {
        uint8_t *p = x->t.data;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            const uint64_t r = next(&s);
            memcpy(p + i, &r, 8);
        }
        for (; i < n; i++) p[i] = (uint8_t)next(&s);
    } else if (x->t.dtype.bits == 16) {
        uint16_t *p = x->t.data;
        for (size_t i = 0; i < n / 2; i++) p[i] = vq_f32_to_f16((float)((int64_t)(next(&s) >> 40) - (1 << 23)) / (float)(1 << 23));
    } else {
        float *p = x->t.data;
        for (size_t i = 0; i < n / 4; i++) p[i] = (float)((int64_t)(next(&s) >> 40) - (1 << 23)) / (float)(1 << 23);
    }
}

typedef struct par {
    void (*fn)(void *, int64_t, int64_t);
    void *arg;
    int64_t lo, hi;
} par;

static void *par_main(void *a)
{
    par *p = a;
    p->fn(p->arg, p->lo, p->hi);
    return NULL;
}

void vqb_parallel(int threads, int64_t n, void (*fn)(void *arg, int64_t lo, int64_t hi), void *arg)
{
    if (threads > 64) threads = 64;
    if (threads < 1) threads = 1;
    pthread_t th[64];
    par ps[64];
    for (int t = 0; t < threads; t++) {
        ps[t] = (par){fn, arg, n * t / threads, n * (t + 1) / threads};
        if (t > 0) pthread_create(&th[t], NULL, par_main, &ps[t]);
    }
    par_main(&ps[0]);
    for (int t = 1; t < threads; t++) pthread_join(th[t], NULL);
}
