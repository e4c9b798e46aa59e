/* commands.h — the sub-commands of the `vq` tool (public API only).
 *
 * Calling convention, shared by every command: argv[0] is the command's own
 * name (e.g. "demo", "codecs", "attention"), argv[1..argc) its options. The
 * return value is the process exit status: 0 success, 1 a library or
 * runtime failure (message on stderr), 2 bad arguments (message and a usage
 * line on stderr). `--help` prints the command's usage on stdout and returns 0.
 */
#ifndef VQ_TOOL_COMMANDS_H
#define VQ_TOOL_COMMANDS_H

#define VQ_EXIT_OK 0
#define VQ_EXIT_FAILURE 1
#define VQ_EXIT_USAGE 2

/* vq demo: every codec on one synthetic KV cache, a table of bits/element and errors (demo.c). */
int vq_cmd_demo(int argc, char **argv);

/* vq bench codecs: encode/decode throughput, optimized vs scalar, 1 vs all threads (bench_codecs.c). */
int vq_cmd_bench_codecs(int argc, char **argv);

/* vq bench attention: fused attention over compressed caches (bench_attention*.c). */
int vq_cmd_bench_attention(int argc, char **argv);

/* vq bench cache: a decode step through the KV cache, f16 vs each method, cache vs raw kernel (bench_cache.c). */
int vq_cmd_bench_cache(int argc, char **argv);

/* vq bench prefill --backend cuda: RaBitQ prefill attention on the GPU (bench_prefill_cuda.c). */
int vq_cmd_bench_prefill(int argc, char **argv);

/* vq cache-eval: every cache method graded on .npy keys/values/queries (cache_eval.c). */
int vq_cmd_cache_eval(int argc, char **argv);

/* vq calibrate: fit a vq_calibration on .npy keys/values and save it (calibrate.c). */
int vq_cmd_calibrate(int argc, char **argv);

/* vq generate: text from a GGUF model through a vq_cache (generate.c, model runtime tools/model). */
int vq_cmd_generate(int argc, char **argv);

/* vq profile: a --kv method's plan for a model, written as a profile file (profile.c). */
int vq_cmd_profile(int argc, char **argv);

/* vq presets: the cache presets with their bits, --json (presets.c). */
int vq_cmd_presets(int argc, char **argv);

/* vq tune: per-layer methods for a bit budget, measured on the model (tune.c). */
int vq_cmd_tune(int argc, char **argv);

/* vq perplexity: quality of cache methods against the f16 cache on a text (perplexity.c). */
int vq_cmd_perplexity(int argc, char **argv);

/* vq capture-kv: a GGUF model's keys, values and queries over a text, as .npy (capture_kv.c). */
int vq_cmd_capture_kv(int argc, char **argv);

/* vq bench model: decode speed of the model runtime (bench_model.c). */
int vq_cmd_bench_model(int argc, char **argv);

#endif
