/* fuzz_cache.c — libFuzzer target for the cache loader
 * (vq_cache_load_buffer). Each input is loaded as it is and with its
 * checksums and size rewritten (vq_container_fixup), so that mutations reach
 * the checks behind the CRCs. Properties: no crash, no over-read, no leak,
 * no allocation beyond libFuzzer's -malloc_limit_mb; a status agrees with the
 * output pointer; an accepted cache attends (one zero query per sequence and
 * layer, up to 64 query heads: the kernels must stay in bounds on whatever
 * codes the file held)
 * and saves to a file that loads and saves back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "cache/cache_internal.h"
#include "fuzz_twice.h"
#include "veloxquant.h"

static vq_ctx *ctx;

static uint8_t *save(const vq_cache *c, size_t *n)
{
    if (vq_cache_save_buffer(c, -1, NULL, 0, n) != VQ_OK) abort();
    uint8_t *b = malloc(*n);
    if (vq_cache_save_buffer(c, -1, b, *n, n) != VQ_OK) abort();
    return b;
}

static void attend_every(vq_cache *c)
{
    /* a file may declare up to 65536 query heads (valid): attention over them
     * is slow but says nothing new, and would starve the fuzzer */
    if (c->Hq > 64) return;
    const int64_t shape[4] = {1, c->Hq, 1, c->D};
    float *q = calloc((size_t)(c->Hq * c->D), sizeof(float)), *o = malloc(sizeof(float) * (size_t)(c->Hq * c->D));
    DLTensor tq = {.data = q, .device = {kDLCPU, 0}, .ndim = 4, .dtype = {kDLFloat, 32, 1}, .shape = (int64_t *)shape};
    DLTensor to = tq;
    to.data = o;
    for (int i = 0; i < c->max_seqs; i++) {
        if (c->seqs[i].id < 0) continue;
        for (int l = 0; l < c->L; l++) {
            const vq_status s = vq_cache_attend(c, l, 1, &c->seqs[i].id, &tq, &to, NULL);
            if (s != VQ_OK && s != VQ_ERR_INVALID_ARGUMENT && s != VQ_ERR_UNSUPPORTED) abort();
        }
    }
    free(q);
    free(o);
}

static void check(const uint8_t *data, size_t size)
{
    vq_cache *c = (vq_cache *)&c;
    const vq_status s = vq_cache_load_buffer(ctx, data, size, &c);
    if ((s == VQ_OK) != (c != NULL)) abort();
    if (s != VQ_OK) {
        if (s != VQ_ERR_CORRUPT_DATA && s != VQ_ERR_UNSUPPORTED && s != VQ_ERR_OUT_OF_MEMORY) abort();
        if (vq_ctx_last_error(ctx)[0] == '\0') abort();
        return;
    }
    attend_every(c);
    size_t n1, n2;
    uint8_t *a = save(c, &n1);
    vq_cache_free(c);
    if (vq_cache_load_buffer(ctx, a, n1, &c) != VQ_OK) abort();
    uint8_t *b = save(c, &n2);
    if (n1 != n2 || memcmp(a, b, n1) != 0) abort();
    free(a);
    free(b);
    vq_cache_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ctx = fuzz_ctx();
    fuzz_twice(data, size, check);
    return 0;
}
