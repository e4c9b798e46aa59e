/* test_bench_membw.c — the read-bandwidth loop of `vq bench` (tools/vq/
 * bench_membw.c): a positive figure with and without the optional CPU-time
 * output (NULL per_cpu once crashed it), and 0 with the figure cleared when
 * there is nothing to measure. Small buffers: this checks the contract, not
 * the machine. */
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

int main(void)
{
    VT_RUN(test_per_cpu_optional);
    VT_RUN(test_nothing_to_measure);
    return vt_finish();
}
