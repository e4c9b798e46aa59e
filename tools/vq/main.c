/* main.c — the `vq` command: entry point and the command tables.
 * Exit status: 0 ok, 1 failure, 2 bad arguments (see commands.h).
 * A new command: a function in its own file, declared in commands.h, one row
 * in a table below; it parses its options with vqa_parse (args.h) and
 * reports --json through report.h. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "report.h"
#include "veloxquant.h"

static int cmd_version(int argc, char **argv)
{
    bool json = false;
    const vqa_opt opts[] = {VQA_JSON_OPT(&json)};
    const vqa_cmd cmd = {"version", "the library version, CPU kernel set, threads and CUDA availability", opts,
                         VQA_COUNT(opts)};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    vq_ctx *ctx = NULL;
    const vq_status s = vq_ctx_create(NULL, &ctx);
    if (s != VQ_OK) {
        fprintf(stderr, "vq version: vq_ctx_create failed: %s: %s\n", vq_status_string(s), vq_last_error());
        return VQ_EXIT_FAILURE;
    }
    const bool cuda = vq_backend_available(VQ_BACKEND_CUDA);
    if (json) {
        vqr *r = vqr_begin("version", argc, argv, ctx, true);
        vqr_row(r);
        vqr_str(r, "library_version", vq_version_string());
        vqr_bool(r, "cuda_available", cuda);
        vqr_end(r);
    } else {
        printf("veloxquant %s, CPU kernels: %s, %d threads, CUDA: %s\n", vq_version_string(), vq_ctx_isa(ctx),
               vq_ctx_num_threads(ctx), cuda ? "available" : "not available");
    }
    vq_ctx_free(ctx);
    return VQ_EXIT_OK;
}

static const vqa_sub bench_subs[] = {
    {"codecs", vq_cmd_bench_codecs, "encode/decode throughput, optimized vs scalar, 1 vs all threads"},
    {"attention", vq_cmd_bench_attention,
     "attention over every cache format: fused vs dequantize-then-attend vs f16, GB/s vs memory bandwidth"},
    {"cache", vq_cmd_bench_cache, "one decode step through the KV cache: f16 vs each method, cache vs raw kernel"},
    {"prefill", vq_cmd_bench_prefill, "RaBitQ prefill attention on the GPU (--backend cuda): time and TFLOP/s"},
    {"model", vq_cmd_bench_model, "model runtime decode: weight bandwidth, long-context speed-up per cache method"},
};

static int cmd_bench(int argc, char **argv)
{
    const vqa_group g = {"bench", "benchmarks; each prints a table, or one JSON report with --json", bench_subs,
                         VQA_COUNT(bench_subs), NULL};
    return vqa_dispatch(&g, argc, argv);
}

static const vqa_sub commands[] = {
    {"version", cmd_version, "library version, CPU kernel set, threads and CUDA availability"},
    {"demo", vq_cmd_demo, "compress a synthetic KV cache with every codec; table of bits and errors"},
    {"capture-kv", vq_cmd_capture_kv, "run a GGUF model over a text; write its keys, values, queries as .npy"},
    {"calibrate", vq_cmd_calibrate, "fit VecInfer / CommVQ / value tables on .npy keys and values; save them"},
    {"cache-eval", vq_cmd_cache_eval, "grade every cache method on .npy keys/values/queries; table, --json, --plot"},
    {"bench", cmd_bench, "benchmarks: codecs, attention, cache, model, prefill (vq bench --help)"},
    {"generate", vq_cmd_generate, "generate text with a GGUF Llama model on the compressed KV cache"},
    {"perplexity", vq_cmd_perplexity, "perplexity, KL and top-1 agreement of cache methods against f16 on a text"},
    {"presets", vq_cmd_presets, "the cache presets (--kv NAME) with their bits; --json"},
    {"profile", vq_cmd_profile, "write the per-layer plan of a --kv method for a model as a profile file"},
    {"tune", vq_cmd_tune, "choose each layer's key and value methods for a bit budget, written as a profile"},
};

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--version") == 0) return cmd_version(argc - 1, argv + 1);
    const vqa_group top = {"", "veloxquant: KV-cache compression and attention on compressed bytes", commands,
                           VQA_COUNT(commands),
                           "Options are --name value or --name=value; sizes take k/K, M, G (x 1024): 64K = 65536.\n"
                           "Every command takes --json (one schema, tools/vq/report.h) and --help.\n"
                           "Environment: VQ_ISA=scalar|avx2|avx512|amx|neon caps the CPU kernel set;\n"
                           "VQ_PROGRESS=0 silences the progress lines on stderr.\n"};
    return vqa_dispatch(&top, argc, argv);
}
