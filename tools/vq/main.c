/* main.c — the `vq` command: entry point and sub-command dispatch.
 * Exit status: 0 ok, 1 failure, 2 bad arguments (see commands.h). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "veloxquant.h"

static const char usage_text[] =
    "usage: vq <command> [options]\n"
    "\n"
    "commands:\n"
    "  version            print the library version, CPU kernel set, threads and CUDA availability\n"
    "  demo [options]     compress a synthetic KV cache with every codec; table of bits and errors\n"
    "  bench codecs [options]  encode/decode throughput, optimized vs scalar, 1 vs all threads\n"
    "  bench attention [options]  attention over every cache format: fused vs dequantize-then-attend\n"
    "                     vs uncompressed, GB/s against the measured memory bandwidth\n"
    "  bench prefill --backend cuda  RaBitQ prefill attention on the GPU: time and TFLOP/s\n"
    "  help, --help       print this help\n"
    "\n"
    "Each command takes --help.\n"
    "Environment: VQ_ISA=scalar|avx2|avx512|neon caps the CPU kernel set.\n";

static int usage(FILE *f)
{
    fputs(usage_text, f);
    return f == stdout ? VQ_EXIT_OK : VQ_EXIT_USAGE;
}

static int cmd_version(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "vq version: unexpected argument '%s'\n", argv[1]);
        return VQ_EXIT_USAGE;
    }
    vq_ctx *ctx = NULL;
    const vq_status s = vq_ctx_create(NULL, &ctx);
    if (s != VQ_OK) {
        fprintf(stderr, "vq version: vq_ctx_create failed: %s\n", vq_status_string(s));
        return VQ_EXIT_FAILURE;
    }
    printf("veloxquant %s, CPU kernels: %s, %d threads, CUDA: %s\n", vq_version_string(), vq_ctx_isa(ctx),
           vq_ctx_num_threads(ctx), vq_backend_available(VQ_BACKEND_CUDA) ? "available" : "not available");
    vq_ctx_free(ctx);
    return VQ_EXIT_OK;
}

/* vq bench <what> [options] */
static int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "vq bench: which benchmark? (codecs, attention, prefill)\n");
        return VQ_EXIT_USAGE;
    }
    if (strcmp(argv[1], "codecs") == 0) return vq_cmd_bench_codecs(argc - 1, argv + 1);
    if (strcmp(argv[1], "attention") == 0) return vq_cmd_bench_attention(argc - 1, argv + 1);
    if (strcmp(argv[1], "prefill") == 0) return vq_cmd_bench_prefill(argc - 1, argv + 1);
    fprintf(stderr, "vq bench: unknown benchmark '%s' (codecs, attention, prefill)\n", argv[1]);
    return VQ_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    const char *cmd = argv[1];
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return usage(stdout);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) return cmd_version(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0) return vq_cmd_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0) return cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "vq: unknown command '%s' (try 'vq --help')\n", cmd);
    return VQ_EXIT_USAGE;
}
