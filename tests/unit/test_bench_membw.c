/* test_bench_membw.c — the read-bandwidth loop of `vq bench` (tools/vq/
 * bench_membw.c): a positive figure with and without the optional CPU-time
 * output (NULL per_cpu once crashed it), and 0 with the figure cleared when
 * there is nothing to measure; the stream object's passes, sizes and
 * refusals. Small buffers: this checks the contract, not the machine. */
#include "harness.h"

#include "bench_attention.h"

static void test_per_cpu_optional(void)
{
    double per_cpu = -1.0;
    const double bw = vqb_read_bandwidth(1, (size_t)1 << 20, &per_cpu);
    VT_CHECK(bw > 0.0 && per_cpu > 0.0, "bw %g per_cpu %g", bw, per_cpu);
    VT_CHECK(vqb_read_bandwidth(2, (size_t)1 << 20, NULL) > 0.0, "NULL per_cpu");
}

static void test_nothing_to_measure(void)
{
    double per_cpu = -1.0;
    VT_CHECK(vqb_read_bandwidth(0, (size_t)1 << 20, &per_cpu) == 0.0 && per_cpu == 0.0, "0 threads: per_cpu %g",
             per_cpu);
    VT_CHECK(vqb_read_bandwidth(0, (size_t)1 << 20, NULL) == 0.0, "0 threads, NULL per_cpu");
}

static void test_stream(void)
{
    vqb_stream *s = vqb_stream_create(2, (size_t)3 << 20, NULL);
    VT_CHECK(s != NULL, "stream of 3 MiB on 2 threads");
    if (s == NULL) return;
    const size_t n = vqb_stream_size(s);
    VT_CHECK(n <= (size_t)3 << 20 && n > ((size_t)3 << 20) - 2 * 512 && n % (2 * 512) == 0, "size %zu", n);
    const int bits = vqb_stream_load_bits(s);
    VT_CHECK(bits == 128 || bits == 256 || bits == 512, "load bits %d", bits);
    double per_cpu = -1.0;
    int64_t passes = -1;
    VT_CHECK(vqb_stream_best(s, &per_cpu, &passes) == 0.0 && per_cpu == 0.0 && passes == 0, "before any pass");
    VT_CHECK(vqb_stream_pass(s) && vqb_stream_pass(s), "two passes");
    VT_CHECK(vqb_stream_best(s, &per_cpu, &passes) > 0.0 && per_cpu > 0.0 && passes == 2, "passes %lld",
             (long long)passes);
    VT_CHECK(vqb_stream_best(s, NULL, NULL) > 0.0, "NULL outputs");
    vqb_stream_free(s);
    vqb_stream_free(NULL);
    vq_ctx *ctx = NULL;
    const vq_ctx_config cfg = {.num_threads = 3};
    VT_CHECK(vq_ctx_create(&cfg, &ctx) == VQ_OK, "ctx");
    s = vqb_stream_create(1, (size_t)3 << 20, ctx); /* the ctx's 3 threads, not 1 */
    VT_CHECK(s != NULL && vqb_stream_size(s) % (3 * 512) == 0 && vqb_stream_pass(s) &&
                 vqb_stream_best(s, NULL, &passes) > 0.0 && passes == 1,
             "a pass on the ctx's threads");
    vqb_stream_free(s);
    vq_ctx_free(ctx);
    VT_CHECK(vqb_stream_create(0, (size_t)1 << 20, NULL) == NULL, "0 threads");
    VT_CHECK(vqb_stream_create(257, (size_t)1 << 30, NULL) == NULL, "257 threads");
    VT_CHECK(vqb_stream_create(2, 1000, NULL) == NULL, "under one slice unit per thread");
}

int main(void)
{
    VT_RUN(test_per_cpu_optional);
    VT_RUN(test_nothing_to_measure);
    VT_RUN(test_stream);
    return vt_finish();
}
