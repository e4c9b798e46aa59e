/*
 * veloxquant.h — compressed KV caches and attention directly over them.
 *
 * This header is the documentation of the library. Read it top to bottom once.
 * It is in two files: this one, the stable API (sections 1 and 5-7: what an
 * inference engine calls), and veloxquant_kernels.h (sections 2-4: the
 * primitives under it, for those who keep their own cache layout), which
 * this one includes; include <veloxquant.h> alone.
 *
 *   1. Conventions: status codes, the context, tensors, bit order, rotation.
 *   2. Utilities (veloxquant_kernels.h): f16/bf16 conversion, the portable PRNG, Lloyd-Max tables.
 *   3. Codecs (veloxquant_kernels.h): bit packing, Hadamard, TurboQuant (scalar, Hadamard, RVQ),
 *      KIVI affine, RaBitQ, QJL, VecInfer product VQ, CommVQ, k-means.
 *   4. Attention (veloxquant_kernels.h): fused SDPA over every key format, the specialised decode
 *      kernels (affine, RaBitQ, RVQ) and RaBitQ prefill.
 *   5. The KV cache: every method behind one paged, multi-sequence cache.
 *   6. Calibration: VecInfer, CommVQ and value tables fitted on samples.
 *   7. Persistence: calibrations (and caches) saved and loaded, validated.
 *
 * ---------------------------------------------------------------------------
 * Conventions that hold for every function
 * ---------------------------------------------------------------------------
 * Tensors are DLPack `DLTensor`s (<dlpack/dlpack.h>). `strides == NULL` or
 * compact row-major strides are accepted; any other stride pattern returns
 * VQ_ERR_UNSUPPORTED — except for the attention entry points (section 4),
 * whose tensors may be strided views on a CPU context: any non-negative
 * strides on every axis but the last, which must be contiguous (stride 1);
 * an axis of size 1 may have any stride. Such an output (out, lse_out) must
 * not overlap itself: a view in which two elements could share memory gives
 * VQ_ERR_INVALID_ARGUMENT (checked on the strides alone: taken in increasing
 * stride order, each axis of size > 1 must step past everything the axes
 * before it span). On a CUDA context they must still be compact
 * (vq_attention_merge there takes strided views too). `byte_offset` is honoured; data +
 * byte_offset must be aligned to the element size, else VQ_ERR_UNSUPPORTED.
 * Every tensor of a
 * call must live on the context's device (kDLCPU for a CPU context, kDLCUDA
 * with the context's ordinal for a CUDA context).
 *
 * dtypes are written f32, f16 (IEEE binary16), bf16, u8, u16, i32, u32 (all
 * with lanes = 1). "f16/f32" means either is accepted. Outputs are allocated by
 * the caller with the documented shape; their dtype picks the output precision
 * where several are listed.
 *
 * Shape names: B batch, H heads (Hq query heads, Hkv cache heads), S sequence
 * (Sq queries, Skv cached tokens), D head dimension. GQA is native wherever a
 * query meets a cache: Hq % Hkv == 0 and query head h reads kv head
 * h / (Hq / Hkv). Each kv head's cache is read once per call, not once per
 * query head.
 *
 * Bit order everywhere: element i's bits come before element i+1's, least
 * significant bit first within a byte or word. A packed sign bit is 1 when the
 * value is >= 0 (+1) and 0 when it is < 0 (-1); element j is bit j % 8 of
 * byte j / 8 (u8 streams) or bit j % 32 of word j / 32 (u32 streams).
 *
 * Rotation: H_D is the Sylvester Walsh-Hadamard matrix (H_1 = [1],
 * H_2n = [[H_n, H_n], [H_n, -H_n]]), D a power of two. The randomized rotation
 * is rot(x) = H_D (diag ⊙ x) / sqrt(D) with diag a ±1 vector; it is
 * orthonormal, so rot^-1(y) = diag ⊙ (H_D y) / sqrt(D). A NULL diag means all
 * ones.
 *
 * Rounding is round-half-to-even; nearest-centroid ties go to the lower index.
 *
 * Non-finite inputs (NaN, +inf, -inf), attention (every entry point of
 * section 4, every CPU instruction set alike; the CUDA kernels follow the
 * same rule, see tests/cuda/test_cuda_nonfinite.c). A row is one query row:
 *   - a query row holding a NaN or ±inf element gives a row of NaN;
 *   - a score (scale * q.k_hat, plus the mask entry and any additive key
 *     term) that is NaN or +inf makes its row NaN: NaN or ±inf in keys, key
 *     scales, zeros, magnitudes, norms, codebooks or projections reach the
 *     scores they take part in, and a NaN or +inf mask entry does the same;
 *   - a score of -inf, from the mask or from the data, excludes its token;
 *     a row whose every score is -inf gives 0 (and lse -inf);
 *   - values are data: a NaN or ±inf in column c of the decoded value of a
 *     token makes column c (and no other column) of every row that can see
 *     the token non-finite (NaN or ±inf). A token excluded by the mask is
 *     still read, with weight 0 (0 * NaN is NaN); tokens past a row's causal
 *     limit are never read;
 *   - lse_out is NaN for a NaN row.
 * Codecs (section 3): non-finite inputs never crash or read out of bounds,
 * every code is written and stays in its range, and rows (groups, for KIVI
 * keys) without a non-finite element get the codes they get alone; the
 * codes, scales and norms of a row or group holding one are otherwise
 * unspecified (tests/unit/test_codecs_nonfinite.c, every ISA).
 * Trainers reject non-finite samples where stated.
 *
 * Errors: every function returns a vq_status. On failure no output byte is
 * written, nothing aborts, and vq_ctx_last_error() names the argument and the
 * expected vs actual value (vq_last_error() holds the same sentence for the
 * calling thread, and is where vq_ctx_create, which has no context yet,
 * explains itself). Messages spell dtypes f32, f16, bf16, u8, ... and
 * devices cpu, cuda:0. Functions keep no pointer to their arguments after
 * they return.
 *
 * Threads: a context may be used by one thread at a time. Different contexts
 * are independent. Kernels on a CPU context use the context's thread pool.
 * Kernels on a CUDA context are enqueued on the context's stream and do not
 * synchronise unless stated.
 */
#ifndef VELOXQUANT_H
#define VELOXQUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public functions: the only symbols the shared library exports
 * (everything else is built with hidden visibility). */
#if defined(_WIN32)
#define VQ_API
#elif defined(__GNUC__) || defined(__clang__)
#define VQ_API __attribute__((visibility("default")))
#else
#define VQ_API
#endif

#define VQ_VERSION_MAJOR 0
#define VQ_VERSION_MINOR 1
#define VQ_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
VQ_API const char *vq_version_string(void);

/* =========================================================================
 * 1. Status, context, backends
 * ========================================================================= */

typedef enum vq_status {
    VQ_OK = 0,
    VQ_ERR_INVALID_ARGUMENT = 1,   /* NULL, wrong rank/shape/dtype, shapes that disagree, scalar out of range */
    VQ_ERR_UNSUPPORTED = 2,        /* valid, but outside what this backend handles (e.g. D > 256) */
    VQ_ERR_BACKEND_UNAVAILABLE = 3,/* backend not compiled in, or no device present */
    VQ_ERR_OUT_OF_MEMORY = 4,
    VQ_ERR_DEVICE = 5,             /* a CUDA runtime failure; the message names the CUDA error */
    VQ_ERR_IO = 6,
    VQ_ERR_CORRUPT_DATA = 7        /* a file or buffer that fails validation */
} vq_status;

/* Static name of a status, e.g. "VQ_ERR_INVALID_ARGUMENT"; "VQ_ERR_UNKNOWN"
 * for values outside the enum. */
VQ_API const char *vq_status_string(vq_status status);

/* Backends. The values equal DLPack's device types (kDLCPU, kDLCUDA). */
typedef enum vq_backend {
    VQ_BACKEND_CPU = 1,
    VQ_BACKEND_CUDA = 2
} vq_backend;

/* True when the backend is compiled in and usable now: the CPU always; CUDA
 * when the library was built with CUDA and a device is visible. */
VQ_API bool vq_backend_available(vq_backend backend);

/* Configuration of a context. Zero-initialise and set what you need. */
typedef struct vq_ctx_config {
    vq_backend backend;  /* 0 means VQ_BACKEND_CPU */
    int device;          /* CUDA device ordinal; ignored on the CPU */
    void *stream;        /* cudaStream_t to enqueue on; NULL = the legacy default stream */
    int num_threads;     /* CPU worker threads including the caller; 0 = all online cores */
} vq_ctx_config;

/* Opaque per-caller state: backend, thread pool, scratch memory, last error. */
typedef struct vq_ctx vq_ctx;

/* Creates a context. cfg NULL = CPU with all cores.
 * The CPU instruction set is detected at run time (scalar, AVX2+FMA+F16C,
 * AVX-512, AVX-512 with AMX tiles on x86; NEON on ARM). The environment
 * variable VQ_ISA = scalar|avx2|avx512|amx|neon caps it, for testing every
 * path on one machine; amx (where the CPU has AMX-INT8 and Linux grants the
 * tile state, which the library asks for once) loads its own tile
 * configuration in the calls that use the tiles and releases the tiles when
 * they return, so a caller's tile registers do not survive those calls;
 * asking for an ISA the CPU lacks falls back to the best one it has.
 * On a CUDA context, VQ_CUDA_DECODE_STAGED=1 makes the fast decode kernels
 * (vq_kivi_fused_attend, vq_rabitq_fused_attend at D = 64/128/256)
 * stage tiles in shared memory (cp.async) instead of loading them straight
 * into registers; both give the same results (for benchmarking).
 * Errors: VQ_ERR_INVALID_ARGUMENT (out NULL, bad backend, thread count or
 * device ordinal), VQ_ERR_BACKEND_UNAVAILABLE, VQ_ERR_OUT_OF_MEMORY,
 * VQ_ERR_DEVICE. *out is NULL on failure, and vq_last_error() says why. */
VQ_API vq_status vq_ctx_create(const vq_ctx_config *cfg, vq_ctx **out);

/* Frees a context and joins its threads. NULL is a no-op. */
VQ_API void vq_ctx_free(vq_ctx *ctx);

/* The sentence describing the last failure on this context ("" if none).
 * Valid until the next call on the context. NULL ctx gives a static string. */
VQ_API const char *vq_ctx_last_error(const vq_ctx *ctx);

/* The sentence describing the last failure of any call on the calling thread
 * (thread-local, like errno: meaningful right after a call that failed, not
 * cleared by calls that succeed; "" before any failure). This is where
 * vq_ctx_create, which has no context to hold a message, explains itself:
 * "vq_ctx_create: cuda:0: no CUDA device is visible". Valid until the
 * thread's next failing call. */
VQ_API const char *vq_last_error(void);

/* The backend of the context. */
VQ_API vq_backend vq_ctx_backend(const vq_ctx *ctx);

/* Name of the CPU kernel set in use: "scalar", "avx2", "avx512", "amx" or "neon". */
VQ_API const char *vq_ctx_isa(const vq_ctx *ctx);

/* Number of CPU threads the context computes with (caller included). */
VQ_API int vq_ctx_num_threads(const vq_ctx *ctx);

/* A task of vq_ctx_parallel_for: task in [0, n_tasks), thread in
 * [0, vq_ctx_num_threads(ctx)), the thread running it (0 = the caller). */
typedef void (*vq_parallel_fn)(void *arg, int64_t task, int thread);

/* Runs fn(arg, task, thread) for every task in [0, n_tasks) on the
 * context's CPU threads, the caller being thread 0, and returns when all
 * are done: the threads the library computes with, lent to the caller's own
 * parallel work (a model's matrix products between attention calls), so an
 * engine need not keep a second pool whose threads would contend with these
 * for the cores. Tasks are handed out one at a time from a shared counter,
 * so uneven tasks balance themselves; a task's index, not its thread,
 * should pick any per-task state when tasks may land on any thread. Waiting
 * threads spin up to VQ_SPIN_US microseconds (environment, read when the
 * ctx is created; default 100, 0 = sleep at once: for cores shared with
 * other busy processes) before they sleep, since a decode step is many
 * short jobs and a sleeping thread's wake-up costs more than most of them.
 * Tasks must not call the library with this ctx (they would share its
 * scratch memory and threads). n_tasks = 0 is a no-op.
 * Errors: VQ_ERR_INVALID_ARGUMENT (ctx or fn NULL, n_tasks < 0, called from
 * inside a task of any ctx). */
VQ_API vq_status vq_ctx_parallel_for(vq_ctx *ctx, int64_t n_tasks, vq_parallel_fn fn, void *arg);

/* Waits for all work enqueued on the context (CUDA); returns at once on CPU. */
VQ_API vq_status vq_ctx_synchronize(vq_ctx *ctx);

/* Memory on the hot path. CPU kernels take their temporary memory from the
 * context's scratch: one block, grown when a call needs more and then kept,
 * so after a first (warm-up) call of each shape no kernel allocates — the
 * attention entry points, every codec's encode/decode and vq_attention_merge.
 * The exceptions allocate per call: the trainers (vq_kmeans,
 * vq_commvq_train, vq_lloyd_max_fit, vq_vecinfer_smooth_factors) and the
 * vq_cache and vq_calibration functions that add pages or tables.
 * vq_ctx_set_workspace hands the context caller-owned memory instead: mem
 * (64-byte aligned) of `bytes` becomes the scratch, the context never
 * allocates scratch again, and a call that needs more fails with
 * VQ_ERR_OUT_OF_MEMORY before writing anything, naming the size it needed.
 * mem NULL, bytes 0 returns to the context's own growing scratch. The memory
 * must outlive its use by the context; the context never frees it.
 * vq_ctx_workspace_peak: the most scratch any call on this context asked for
 * so far (run the calls once, then size the workspace with it). Both concern
 * host memory; a CUDA context keeps its own device scratch, grown once and
 * reused. Errors: VQ_ERR_INVALID_ARGUMENT (NULL ctx, mem misaligned, mem NULL
 * with bytes > 0). */
VQ_API vq_status vq_ctx_set_workspace(vq_ctx *ctx, void *mem, size_t bytes);
VQ_API size_t vq_ctx_workspace_peak(const vq_ctx *ctx);

/* Sections 2-4, the kernel primitives the cache is built from (codecs and
 * attention over caller-owned tensors), are in veloxquant_kernels.h. */
#include "veloxquant_kernels.h"

/* =========================================================================
 * 5. The KV cache: every method behind one paged, multi-sequence cache
 *
 * A vq_cache holds the keys and values of every layer of a model for many
 * sequences at once (continuous batching), each compressed with the key and
 * value method chosen for its layer, and answers one attention call per layer
 * per step for a batch of sequences of different lengths.
 *
 * Storage. Each layer has a pool of pages of P tokens (page_size). A page
 * holds every stream of the layer's formats (codes, scales, norms, ...) for
 * P tokens of all Hkv heads, in chunks of pages that are allocated once and
 * never move. On the CPU each stream of a chunk is stored head-major,
 * [Hkv][page][P][bytes per token], so consecutive pages of a sequence (a
 * fresh pool hands pages out in order) are one contiguous run per head,
 * attended as one run; on CUDA page-major, [page][Hkv][P][bytes per token].
 * On Linux a CPU chunk of 2 MB or more is advised onto transparent huge pages
 * (MADV_HUGEPAGE; where THP is enabled for madvise), which streams it faster;
 * its memory is then committed in 2 MB steps of each head's rows of each
 * stream as sequences grow, rather than 4 KB ones.
 * Every sequence owns a page table per layer. Tokens [0, n_enc) of a
 * sequence are encoded in its pages; tokens [n_enc, n) are its residual
 * window, kept in f16 (or at 8 bits: vq_cache_window). Every append of a
 * layer of n tokens sets
 *     n_enc = max(n_enc, f(n)),   f(n) = max(0, floor((n - R) / g) * g),
 * g the layer's key group (KIVI: group_size tokens; 1 for every other key
 * method) and R = residual_tokens. So a KIVI layer keeps the tokens of a
 * group not yet complete in f16 and encodes a group the moment it fills, and
 * R > 0 keeps the newest R tokens of any method in f16, except in CommVQ
 * layers (keys arrive before RoPE: a window could not be attended as plain
 * keys) and RaBitQ layers (their scores estimate q.k up to a scale, about
 * 2/pi of it with the L1 magnitude or the Hamming score, so exact window
 * scores beside them would mix two softmax temperatures): those encode every
 * token at once and ignore R. Attention covers the pages and the residual window and merges them
 * exactly (the online-softmax state), so a query always sees every token.
 * Because n_enc depends only on n (truncation aside), appending tokens one by
 * one or all at once gives the same cache, bit for bit.
 *
 * Precision. Appended keys and values are rounded to f16 first; the codecs
 * encode the f16 values (so the residual window and the pages agree).
 *
 * Devices. A cache lives on the device of the ctx it was created with: on a
 * CUDA ctx its pools, tables and residual windows are device memory, the
 * codecs run on the device and attention runs the CUDA kernels, all on the
 * ctx's stream, without synchronising. Every call on a cache runs on that
 * ctx (vq_cache_ctx), whose messages it sets: as for the ctx, one thread at
 * a time. The cache must be freed before its ctx.
 *
 * Errors. Every mutating call validates everything first and then commits:
 * a call that fails (any status) leaves every sequence as it was (the pools
 * may keep chunks they grew). Messages name the argument and the expected vs
 * actual value, as everywhere in the library.
 *
 * Allocation. vq_cache_create allocates the pools (capacity_pages per
 * layer), the tables and the page tables. Afterwards vq_cache_append and
 * vq_cache_attend allocate only (a) when a growing pool is full (a chunk of
 * grow_pages pages), (b) when a call needs more staging or scratch than any
 * call before it (kept for the next calls; attention scratch comes from the
 * ctx, or from its caller-owned workspace, vq_ctx_set_workspace), (c) when
 * a sequence's page table outgrows what it held before (doubling), (d) on a
 * CUDA ctx, the first decode attend of a layer (its device page tables:
 * max_sequences x the first chunk's pages, int32). A decode loop at steady
 * state allocates nothing. vq_cache_seq_add allocates the
 * sequence's residual windows; vq_cache_seq_fork also copies them.
 *
 * Sinks and transforms (cfg->sink_tokens, cfg->transforms; on both
 * backends). Both change how the tokens are stored, never what attention
 * computes in exact arithmetic:
 *   - Sink tokens: the first S = sink_tokens tokens of every sequence (the
 *     attention sink: most heads put much of their weight there, so an
 *     error in their scores moves every other weight) are kept in f16 in
 *     the sequence, outside the pages and the residual window; the pages
 *     and the window hold tokens [S, n) by the rules above (n_enc counts
 *     from token S). vq_cache_attend attends them in float64 (in f32 on a
 *     CUDA ctx) and merges them with the rest through the log-sum-exp
 *     state, exactly. Which
 *     tokens are sinks depends only on their positions, so appending token
 *     by token still equals appending all at once, bit for bit. Counted by
 *     vq_cache_memory as residual bytes (f16 keys and values).
 *   - Key centering: keys are stored as k - mk (mk per kv head and
 *     channel): the scores of a query row all move by q.mk, so its softmax
 *     is unchanged; lse_out reports the uncentered scores' log-sum-exp.
 *   - Value centering: values are stored as v - mv and mv is added to every
 *     output row (the weights sum to 1), in f32.
 *   - Smoothing: keys are stored times s and queries are divided by s
 *     (per kv head and channel, f32): q.k is unchanged in exact arithmetic,
 *     but the key quantizers' error, which follows the key's magnitude,
 *     falls less on the channels where queries are large.
 *   Each stored key is (float)((k - mk) * s), each stored value
 *   (float)(v - mv) (f32 arithmetic on the input, then rounded to f16 as
 *   every token is); sinks are stored transformed too.
 *   Tables: given in cfg->transforms[l], or fitted per sequence and layer
 *   from the sequence's first append (its first chunk), as follows, T the
 *   chunk's tokens, leaving out token 0 (the sink) when T > 1: mk and mv
 *   the chunk's means; s_j = sqrt(rms(q_j) / rms(k_j - mk_j)) over the
 *   chunk's queries of the kv head's query heads and its centered keys,
 *   divided by the geometric mean of the head's s and clamped to
 *   [1/8, 8]. Keys and values alone fit the means on vq_cache_append; the
 *   scales need queries: call vq_cache_fit_transforms with the first
 *   chunk's keys, values and queries before appending it (an append that
 *   needs a scale that is neither given nor fitted fails). Fitted tables
 *   can be read back (vq_cache_get_transforms) and given to another cache.
 *   State: a fork copies the sink tokens and the tables; a truncate keeps
 *   the first n_tokens tokens, sinks included, and the tables, except that
 *   a truncate to 0 tokens forgets fitted tables (the next append refits);
 *   vq_cache_save/load keep both (file format version 4).
 *   One append or attend call may mix sequences inside and past their
 *   sinks, except that an append whose sequences would each put some, but
 *   a different number, of its tokens in the pages is refused with
 *   VQ_ERR_UNSUPPORTED (append them in separate calls).
 *   On a CUDA ctx (as above, f16 appends): the fits and the sink rows are
 *   computed on the host from the appended rows, which a sequence's first
 *   S tokens and its first chunk download (that append waits for the ctx's
 *   stream); the other rows are transformed on the device, to the same f16
 *   bits as on the CPU. A decode step transfers nothing.
 *
 * Sliding windows (vq_cache_config.sliding_windows). A layer with window W
 * masks, for a query at position p, every token older than p - W + 1; for a
 * sequence of n tokens a decode query (Sq = 1) sees tokens [n - W, n), a
 * causal prefill's query i (of Sq) tokens [n - Sq + i + 1 - W, n - Sq + i +
 * 1), and every row of a non-causal attend [n - W, n). The mask cuts through
 * pages and the residual window alike (W need not be a multiple of anything;
 * W < R masks tokens still in the residual window). Eviction: an append of
 * m tokens to a sequence of n0 returns to the pool every page whose tokens
 * are all encoded and older than n0 + 1 - W, the window of the first
 * appended token, so the attend that follows it (Sq <= m causal rows) sees
 * everything it needs, and so does any later call. The layer then holds
 * tokens from a page boundary at most P - 1 tokens below the window on; a
 * prefill of m tokens holds all of them until the next append. An attend
 * that would need an evicted token (causal rows older than the last append's
 * first token, or Sq > 1 without causal after it) is refused with
 * VQ_ERR_INVALID_ARGUMENT, and vq_cache_seq_truncate refuses a rollback
 * below the window of the next token (VQ_ERR_UNSUPPORTED). A query's output
 * does not depend on when pages were evicted: the pages that remain hold the
 * bytes they were written with. vq_cache_seq_length still counts every
 * token of the sequence (positions go on); vq_cache_memory counts only the
 * tokens the layer holds. A cache with a sliding window is saved as file
 * format version 5.
 * With sink tokens (cfg->sink_tokens = S), a sliding-window layer masks the
 * sinks as any other token: a query at position p sees sink j < S only when
 * j >= p - W + 1 (non-causal rows: j >= n - W), so once a sequence is past
 * S + W tokens its local layers no longer attend the sinks, while its
 * full-attention layers (W = 0) attend them from every query. Sinks change
 * how tokens are stored, never what attention computes (previous
 * paragraph), and a model whose layers attend a sliding window (Gemma 3's
 * local layers) never sees a token older than the window: a cache that kept
 * the sinks visible there would compute another model (StreamingLLM's
 * sinks, which keep the first tokens visible to every query to run a
 * full-attention model past its length, are that other attention, and not
 * what this cache does). The pages and the residual window hold tokens
 * [S, n) by the rules above, whose positions the window masks the same way.
 * Every layer keeps its sinks stored (S f16 tokens a sequence and layer,
 * counted by vq_cache_memory), so a local layer holds at most S tokens more
 * than without sinks.
 * ========================================================================= */

/* How keys are stored. */
typedef enum vq_key_method {
    VQ_KEY_F16 = 1,       /* uncompressed f16 (the reference) */
    VQ_KEY_KIVI = 2,      /* KIVI per-channel group affine over group_size tokens, bits 2/4/8, f16 scale/zero */
    VQ_KEY_TURBO = 3,     /* TurboQuant Hadamard + Lloyd-Max, bits 1..8 (bit-packed), norm_correct option */
    VQ_KEY_TURBO_RVQ = 4, /* TurboQuant residual: bits (stage 1) + bits2 (stage 2) */
    VQ_KEY_RABITQ = 5,    /* 1-bit signs of rot(k) + f32 magnitude; rabitq_score Hamming or exact */
    VQ_KEY_QJL = 6,       /* QJL sign sketch of qjl_sketch rows + the key's norm */
    VQ_KEY_VECINFER = 7,        /* VecInfer product VQ: codebook (+ smooth) passed in */
    VQ_KEY_COMMVQ = 8,    /* CommVQ additive codes: codebook + RoPE tables passed in; keys appended
                             before RoPE, with positions */
    /* KIVI with two code widths per group (a cache-only format, CPU and CUDA):
     * per group of group_size tokens and per channel, as VQ_KEY_KIVI, but in
     * each group the W channels of the widest range (max - min over the
     * group's tokens; ties to the lower channel) get codes of bits2 bits and
     * the other D - W codes of bits bits, 1 <= bits < bits2 <= 8, W =
     * wide_channels (0 = D/2): (W * bits2 + (D - W) * bits) / D code bits
     * per element. Per token and head the codes are one bit stream of
     * ceil((W * bits2 + (D - W) * bits) / 8) bytes: the wide
     * channels' codes in channel order, then the narrow ones'; code i of a
     * part at its bits [i*w, (i+1)*w) (bit j of the stream is bit j % 8 of
     * byte j / 8). Per group and channel an f16 scale and zero,
     * scale = (max - min) / (2^w - 1) for the channel's width w (0 for a
     * flat channel), zero = min; per group a width mask of D/8 bytes (bit
     * c % 8 of byte c / 8 set: channel c is wide). k_hat = code * scale +
     * zero. So a key group spends its bits where its range is: on
     * SmolLM2-135M, 4/2 bits (3.0 code bits) beside TurboQuant 2-bit values
     * lose about what 4-bit KIVI keys lose, uniform 3-bit KIVI keys about
     * three times more (docs/QUALITY.md). Bits: the code bits +
     * 32 / group_size + 1 / group_size per element. */
    VQ_KEY_KIVI_MIX = 9
} vq_key_method;

/* How values are stored. */
typedef enum vq_value_method {
    VQ_VALUE_F16 = 1,      /* uncompressed f16 */
    VQ_VALUE_KIVI = 2,     /* KIVI per-token affine over groups of group_size channels, bits 2/4, f16 scale/zero */
    VQ_VALUE_CODEBOOK = 3, /* 4-bit codebook nibbles of v / s, s = ||v||_2 / sqrt(D) per token (f32) */
    VQ_VALUE_TURBO = 4     /* TurboQuant Hadamard + Lloyd-Max, bits 1..8 (bit-packed) */
} vq_value_method;

/* Key method of one layer. Zero-initialise and set what the method reads;
 * fields a method does not read are ignored. */
typedef struct vq_key_config {
    vq_key_method method;
    int bits;                 /* KIVI 2/4/8; TURBO 1..8; TURBO_RVQ stage-1 bits 1..8; KIVI_MIX the
                                 narrow width 1..7 */
    int bits2;                /* TURBO_RVQ stage-2 bits 1..8; KIVI_MIX the wide width bits+1..8 */
    int group_size;           /* KIVI, KIVI_MIX: tokens per channel group g; divides page_size; 0 = 32 */
    int wide_channels;        /* KIVI_MIX: W channels per group at bits2, 1..D-1 (0 = D/2) */
    bool norm_correct;        /* TURBO: norm-corrected scale (vq_turboquant_opts) */
    vq_rabitq_score rabitq_score; /* RABITQ: Hamming (the default) or exact scoring */
    vq_rabitq_mag rabitq_mag;     /* RABITQ: magnitude estimator */
    int qjl_sketch;           /* QJL: sketch rows m, 1..1024 (0 = 2*D) */
    uint64_t seed;            /* TURBO/RVQ/RABITQ random signs, QJL projection; 0 = a fixed default.
                                 Layer l uses seed + l, so layers are independent. */
    const DLTensor *codebook; /* VECINFER [M,C,D/M] or [Hkv,M,C,D/M] f32 (C <= 65536);
                                 CommVQ [R,C,D] f32 (C <= 65536). Host memory; copied at create. */
    const DLTensor *smooth;   /* VECINFER [D] or [Hkv,D] f32 > 0, or NULL (ones); host; copied */
    const DLTensor *cos_freqs, *sin_freqs; /* CommVQ [Pmax, D/2] f32 (positions < Pmax); host; copied */
    vq_rope_layout rope;      /* CommVQ pairing */
} vq_key_config;

/* Value method of one layer (as vq_key_config). */
typedef struct vq_value_config {
    vq_value_method method;
    int bits;                 /* KIVI 2/4; TURBO 1..8; CODEBOOK 4 (0 = 4) */
    int group_size;           /* KIVI: channels per group, divides D; 0 = 32 (or D if smaller) */
    const DLTensor *centroids;/* CODEBOOK: [n <= 16] f32 ascending, host, copied; NULL = the Lloyd-Max
                                 N(0,1) 4-bit table (vq_lloyd_max_codebook(4)) */
    uint64_t seed;            /* TURBO random signs (0 = a fixed default; layer l draws them from
                                 seed + l, xor a constant so they differ from the keys') */
    bool scale_f16;           /* TURBO: each token's scale stored in f16 (2 bytes, not 4: 0.25 bits
                                 per element less at D = 64; relative rounding <= 2^-11 of the
                                 token's whole vector, far below the codes' error) */
} vq_value_config;

typedef struct vq_cache_layer_config {
    vq_key_config keys;
    vq_value_config values;
} vq_cache_layer_config;

/* How the residual window (tokens [n_enc, n) of a sequence, section head)
 * is stored. */
typedef enum vq_cache_window {
    /* f16 keys and values (the default): the window is exact up to the f16
     * rounding every appended token gets. */
    VQ_WINDOW_F16 = 0,
    /* TurboQuant 8-bit keys and values per token: y = rot(x) with the
     * layer's signs (the k_diag / v_diag its TurboQuant keys / values use;
     * a layer whose methods have none gets them, drawn from the same seeds),
     * D u8 Lloyd-Max codes of y / s and s = ||y||_2 / sqrt(D) as f32
     * (vq_turboquant_hadamard_quantize with bits 8): D + 4 bytes per token,
     * head and half, 8.5 bits per element at D = 64, 8.25 at D = 128
     * (f16: 16). Relative MSE about 4e-5 (8-bit Lloyd-Max on N(0,1)).
     * Attention scores the window keys as TurboQuant keys (rotated queries)
     * and accumulates its values in the rotated basis, which the pages'
     * TurboQuant values share; over other value methods each output row's
     * window part is rotated back per block.
     * A token leaving the window is encoded into the pages from what the
     * window holds: its 8-bit codes decoded and rounded to f16
     * (vq_turboquant_hadamard_dequantize). Tokens that never wait in the
     * window (a prefill longer than it) take the same round trip, so a
     * token's page codes depend only on its own values and appending token
     * by token still equals appending all at once, bit for bit; the pages
     * then encode tokens with that extra 8-bit error (~0.6 % RMS).
     * Needs a power-of-two head_dim. A CUDA ctx stores the same codes and
     * decodes the window rows to f16 before attending them (its window
     * scores differ from the CPU's f32 ones by that rounding, 2^-11 of a
     * key). Layers without a window (RaBitQ, CommVQ, or R = 0 with a key
     * group of 1) are unaffected. */
    VQ_WINDOW_TURBO8 = 1,
    /* As VQ_WINDOW_TURBO8 with codes of window_bits bits (1..8), bit-packed
     * as the pages' TurboQuant codes (ceil(D * bits / 32) u32 words per
     * token, head and half), and s stored in f16: at D = 64 and 6 bits
     * 6.25 bits per element (TURBO8: 8.5), 100 bytes per token and head
     * instead of 136. The tokens leaving the window take the same round
     * trip (decoded at window_bits bits). Same requirements as TURBO8. */
    VQ_WINDOW_TURBO = 2
} vq_cache_window;

/* Exact transforms of one layer's keys and values (section head, "Sinks
 * and transforms"). Zero-initialise and set what you need; all off = none.
 * Tables are [Hkv, D] f32 host tensors (compact), copied at create; a NULL
 * table of a transform that is on is fitted per sequence from its first
 * append (vq_cache_fit_transforms). A table given for a transform that is
 * off is an error. */
typedef struct vq_cache_transforms {
    bool center_keys;         /* store k - mk (mk: per kv head and channel key mean) */
    bool center_values;       /* store v - mv; mv is added back to every output row */
    bool smooth;              /* store keys times s and attend queries divided by s, per kv head and
                                 channel (SmoothQuant's key/query balance; q.k unchanged) */
    const DLTensor *key_mean;   /* mk [Hkv, D] f32, finite, or NULL = fitted */
    const DLTensor *value_mean; /* mv [Hkv, D] f32, finite, or NULL = fitted */
    const DLTensor *key_scale;  /* s [Hkv, D] f32 in [2^-24, 2^24], or NULL = fitted */
} vq_cache_transforms;

/* Largest vq_cache_config.sink_tokens. */
#define VQ_CACHE_MAX_SINK_TOKENS 1024

/* A profile (opaque): a per-layer plan of a cache for one model shape —
 * each layer's key and value methods with their parameters (widths, KIVI
 * groups, KIVI_MIX wide channels, TurboQuant seeds, ...), sliding window and
 * transforms (switches and optionally their fitted tables), the cache-wide
 * residual window (its length R, storage and bits) and the sink tokens — as
 * one object that saves to a file (section 7) and that vq_cache_create
 * applies (vq_cache_config.profile). Host memory, independent of any ctx,
 * immutable once created. The codec tables (VECINFER and CommVQ codebooks,
 * value centroids) are not part of it: a layer whose method needs them
 * takes them from vq_cache_config.calibration, as a preset would. A profile
 * loaded from a version 1 file (which held no sinks or transforms) states
 * no recipe: the cache then takes sink_tokens and transforms from its own
 * config. */
typedef struct vq_profile vq_profile;

/* Description of a cache. Zero-initialise and set what you need. */
typedef struct vq_cache_config {
    int n_layers;             /* >= 1 */
    int n_kv_heads;           /* Hkv >= 1 */
    int n_q_heads;            /* Hq, a multiple of Hkv */
    int head_dim;             /* D: a multiple of 8, <= 256; TURBO/RVQ/RABITQ/TURBO values need a power
                                 of two, RABITQ D >= 8, CODEBOOK values D even */
    int page_size;            /* P tokens per page: a multiple of 32 and of every KIVI key group; 0 = 256 */
    int64_t capacity_pages;   /* pages per layer allocated at create (>= 1; 0 = 64) */
    int64_t grow_pages;       /* pages added when a pool is full; 0 = fixed capacity */
    int max_sequences;        /* live sequences at most (>= 1; 0 = 256) */
    int residual_tokens;      /* R >= 0: newest tokens of every sequence kept in the window (see above) */
    /* Methods: either a preset name (vq_cache_preset) used for every layer, or
     * explicit configs, layers[n_layers], which override preset when non-NULL.
     * A preset that needs tables (vq_cache_preset_info.needs_tables) can be
     * named here only with a calibration (below); otherwise fill a layer
     * config with vq_cache_preset_layer_config, set its tables and pass it in
     * layers. NULL preset and NULL layers = "f16". */
    const char *preset;
    const vq_cache_layer_config *layers;
    const int *f16_layers;    /* layer indices stored as F16/F16 whatever the method (e.g. first and
                                 last), or NULL; each in [0, n_layers) */
    int n_f16_layers;
    /* Fitted tables (section 6), or NULL. A layer whose method needs a table
     * its config leaves NULL takes layer l's from here: VECINFER keys the codebook
     * and smooth factors, CommVQ keys the codebook, CODEBOOK values the
     * centroids (at most 16). They are copied: the calibration may be freed
     * after vq_cache_create. */
    const struct vq_calibration *calibration;
    /* Storage of the residual window (vq_cache_window; 0 = VQ_WINDOW_F16).
     * Errors at create: a value outside the enum, VQ_WINDOW_TURBO8 or
     * VQ_WINDOW_TURBO with a head_dim that is not a power of two, or
     * VQ_WINDOW_TURBO with window_bits outside 1..8 ->
     * VQ_ERR_INVALID_ARGUMENT. */
    vq_cache_window window;
    int window_bits;          /* VQ_WINDOW_TURBO: code bits 1..8; ignored (0) otherwise */
    /* The first sink_tokens tokens of every sequence, every layer, kept in
     * f16 outside the pages and the window (section head, "Sinks and
     * transforms"; a sliding-window layer masks them past its window,
     * "Sliding windows"): 0..VQ_CACHE_MAX_SINK_TOKENS, 0 = none. */
    int sink_tokens;
    /* Per-layer exact transforms, transforms[n_layers], or NULL = none
     * (section head, "Sinks and transforms"). Copied at create. */
    const vq_cache_transforms *transforms;
    /* Sliding-window attention per layer (local layers, e.g. five of every
     * six of Gemma 3): sliding_windows[n_layers], W = sliding_windows[l] in
     * 0..2^30, 0 = full attention; NULL = every layer full. Copied at
     * create. In a layer with W > 0 a query at position p attends only the
     * tokens at positions p - W + 1 .. p of its sequence (the newest W, itself
     * included), and the pages whose tokens are all older than that go back
     * to the pool, so the layer holds at most about W + page_size + R tokens
     * of a sequence whatever its length (see "Sliding windows" above).
     * Both backends (on a CUDA ctx the kernels mask each query row's window
     * themselves, inside pages and the residual window alike; the
     * tensor-core kernels of VQ_CUDA_MMA=1 take no window, so such layers
     * run on the CUDA-core ones). Errors at create: a W < 0 or > 2^30 ->
     * VQ_ERR_INVALID_ARGUMENT naming the entry ("cfg->sliding_windows[3]"). */
    const int *sliding_windows;
    /* A profile (vq_profile_create / vq_profile_load), or NULL. It gives
     * every layer's methods, sliding window and transforms, the residual
     * window (residual_tokens, window, window_bits) and the sink tokens, so
     * preset, layers, f16_layers, sliding_windows, residual_tokens, window
     * and window_bits must then be left 0 / NULL, and sink_tokens and
     * transforms either left 0 / NULL or equal to the profile's (sink_tokens
     * the same number; transforms the same switches on every layer and no
     * tables: the profile's tables apply); n_layers, n_kv_heads and
     * head_dim must be the profile's (n_q_heads, page_size, capacities and
     * the calibration stay the caller's). A profile of a version 1 file
     * states no sinks or transforms: sink_tokens and transforms are then the
     * caller's. It is copied: it may be freed after vq_cache_create. The
     * cache then is exactly the one those fields would make (vq_cache_memory
     * counts it the same). Errors: VQ_ERR_INVALID_ARGUMENT naming the field
     * set beside it (with both values where they differ: "cfg->sink_tokens
     * is 2 beside cfg->profile, whose sink_tokens is 4"), or the size that
     * differs ("cfg->profile: a profile for head_dim 128, cfg->head_dim is
     * 64"); the profile's layers are then checked as any config (a KIVI
     * group that does not divide page_size, ...). */
    const vq_profile *profile;
} vq_cache_config;

/* The cache (opaque). */
typedef struct vq_cache vq_cache;

/* ---- Presets ---- */

/* A preset: a named configuration for all layers. Two kinds:
 *
 * Presets named by what they buy (recipe = true), the ones to start from:
 * each is a key + value method plus the attention sink, the exact
 * transforms, the residual window and its storage, chosen by measurement
 * on SmolLM2-135M (docs/QUALITY.md, "Presets"):
 *   quality-4bit   near-lossless at about 4 bits: KIVI 4-bit keys per
 *                  channel over 128 tokens, TurboQuant 3-bit values with
 *                  f16 scales, the 8-bit window;
 *   balanced-3bit  about 3 bits for a loss of one to two percent in
 *                  perplexity there: mixed-width KIVI keys
 *                  (VQ_KEY_KIVI_MIX, 24 of 64 channels of each 128-token
 *                  group at 4 bits, the rest at 2), TurboQuant 2-bit values
 *                  with f16 scales, the 8-bit window holding 64 tokens;
 *   compact-2.5bit the fewest bits that still hold: mixed-width keys with
 *                  8 of 64 wide channels, TurboQuant 2-bit values with f16
 *                  scales, a 6-bit window.
 * Each sets sink_tokens = 4, center_keys, center_values and smooth on every
 * layer (tables fitted per sequence from its first chunk: smooth needs its
 * queries, vq_cache_fit_transforms), and the residual window (residual_tokens,
 * window, window_bits) given in its vq_cache_preset_info. Naming one in
 * cfg->preset (with cfg->layers NULL) applies each of those to the fields
 * the caller left 0 / NULL: sink_tokens 0, transforms NULL, residual_tokens
 * 0, window VQ_WINDOW_F16 with window_bits 0; a field the caller set stays
 * the caller's (a method preset, below, gives the same methods with none of
 * the rest). Wide-channel counts are for D = 64 and scale with D (a fraction
 * of the channels: 24/64 and 8/64). They need a power-of-two head_dim
 * (TurboQuant values and window); they run on a CPU or a CUDA ctx.
 *
 * Method presets (recipe = false): a key + value method and nothing else:
 * f16; kivi2, kivi4 (KIVI keys per channel over 32 tokens, values per token);
 * kivi4-turbo3, kivi4-turbo2 (KIVI 4-bit keys per channel over 128 tokens,
 * TurboQuant 3- or 2-bit values: keys and values take different quantizers
 * and bits because they fail differently — per-token rotated codes lose most
 * on keys, whose channels carry large offsets and outliers, and least on
 * values; measured on SmolLM2-135M in docs/QUALITY.md);
 * kivimix-turbo2 (VQ_KEY_KIVI_MIX keys over 128 tokens, 4 bits in the half
 * of each group's channels of the widest range and 2 in the other half:
 * 3.26 + 2.25 bits), kivi2-turbo2
 * (the same split with 2-bit keys over 128 tokens: 2.25 + 2.25 bits at D = 128;
 * on that model 2-bit keys need kivi2's 32-token groups, so it is meant for a
 * few layers of a per-layer mix); turbo2/3/4;
 * rvq22; rabitq, rabitq-exact; qjl; vecinfer2 and commvq (fitted tables).
 * vq_cache_preset(i)->description names each one's parameters. */
typedef struct vq_cache_preset_info {
    const char *name;         /* "quality-4bit", "f16", "kivi2", ... */
    const char *description;  /* one line: the methods and their parameters */
    double key_bits, value_bits; /* stored bits per element, all-in (codes + scales/norms), in the pages,
                                    at head_dim = 128 (the residual window is not counted) */
    bool needs_tables;        /* VECINFER / CommVQ: codebooks must be passed in (layers[].keys.codebook, or
                                 cfg->calibration) */
    /* What a preset named by what it buys sets beside the methods (0 / false
     * for method presets): */
    bool recipe;              /* true for quality-4bit, balanced-3bit, compact-2.5bit */
    int sink_tokens;          /* cfg->sink_tokens */
    vq_cache_transforms transforms; /* the switches of cfg->transforms[l], every layer; tables NULL (fitted) */
    int residual_tokens;      /* cfg->residual_tokens */
    vq_cache_window window;   /* cfg->window */
    int window_bits;          /* cfg->window_bits (VQ_WINDOW_TURBO) */
    /* Bits per element of the whole cache as vq_cache_memory counts them
     * (pages, window and sinks) for one sequence of 2048 tokens at head_dim
     * 64 (SmolLM2-135M's heads; the quality measurements' windows); 0 for
     * method presets, whose bits depend on the window the caller picks. At
     * longer contexts the fixed window and sinks weigh less: the bits fall
     * towards the pages' (key_bits + value_bits) / 2 at D = 64. */
    double bits;
} vq_cache_preset_info;

/* Number of presets, and preset i (0 <= i < count; NULL otherwise). The
 * returned struct is static. */
VQ_API int vq_cache_preset_count(void);
VQ_API const vq_cache_preset_info *vq_cache_preset(int i);

/* Fills *out with the layer config of preset `name` at head_dim (which picks
 * D-dependent parameters: QJL sketch 2*D, KIVI value group min(32, D); VECINFER
 * and CommVQ take their sizes from the codebook). Table pointers are left
 * NULL.
 * Errors (no ctx, so no message): VQ_ERR_INVALID_ARGUMENT (name or out
 * NULL, unknown name, head_dim < 8 or not a multiple of 8); *out is then
 * unchanged. */
VQ_API vq_status vq_cache_preset_layer_config(const char *name, int head_dim, vq_cache_layer_config *out);

/* ---- Lifetime ---- */

/* Creates a cache on ctx's device (see the section head). The config and its
 * tensors are copied; nothing is kept after return. The cache must be used
 * with this ctx only, and freed before the ctx.
 * Errors: VQ_ERR_INVALID_ARGUMENT (ctx, cfg or out NULL; a size out of range;
 * an unknown method or preset; bits, group sizes or head_dim outside what a
 * method takes; a table with the wrong shape/dtype/device (tables are host
 * memory), with the argument named, e.g. "cfg->layers[3].keys.codebook"),
 * VQ_ERR_UNSUPPORTED (D > 256),
 * VQ_ERR_OUT_OF_MEMORY. Sinks and transforms: sink_tokens outside
 * 0..VQ_CACHE_MAX_SINK_TOKENS, a table not [Hkv, D] f32 host compact, a mean
 * not finite or a scale outside [2^-24, 2^24] (the element named), a table
 * given for a transform that is off, either on a layer with CommVQ keys ->
 * VQ_ERR_INVALID_ARGUMENT. *out is NULL on failure. */
VQ_API vq_status vq_cache_create(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache **out);

/* Frees the cache and all its memory (waits for its queued device work on a
 * CUDA ctx). NULL is a no-op. */
VQ_API void vq_cache_free(vq_cache *cache);

/* The ctx a cache was created with. */
VQ_API vq_ctx *vq_cache_ctx(const vq_cache *cache);

/* The sliding window of `layer` (vq_cache_config.sliding_windows; 0 = full
 * attention) into *out. Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer out
 * of range); *out is unchanged on failure. */
VQ_API vq_status vq_cache_get_sliding_window(const vq_cache *cache, int layer, int *out);

/* The resolved method of `layer` (f16_layers and defaults applied; table
 * pointers NULL). Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer out of
 * range). */
VQ_API vq_status vq_cache_get_layer_config(const vq_cache *cache, int layer, vq_cache_layer_config *out);

/* The cache's sizes as resolved at create or load: n_layers, n_kv_heads,
 * n_q_heads, head_dim, page_size, capacity_pages (pages per layer now, after
 * any growth), grow_pages, max_sequences, residual_tokens, window,
 * window_bits, sink_tokens. The methods are per layer
 * (vq_cache_get_layer_config), and so are the transforms
 * (vq_cache_get_transforms) and the sliding windows
 * (vq_cache_get_sliding_window): preset, layers, f16_layers, calibration,
 * transforms, sliding_windows and profile are NULL / 0. This is how a caller
 * learns the shape of a cache it loaded from a file. Errors: VQ_ERR_INVALID_ARGUMENT (NULLs);
 * *out is unchanged on failure. */
VQ_API vq_status vq_cache_get_config(const vq_cache *cache, vq_cache_config *out);

/* The transforms of `layer` (section head, "Sinks and transforms"): *out
 * (may be NULL) receives its switches (table pointers NULL). key_mean,
 * value_mean, key_scale (each may be NULL): caller-owned [Hkv, D] f32 host
 * compact tensors that receive the tables sequence seq_id uses for the
 * layer (given or fitted); a transform that is off reads as 0 (means) or 1
 * (scales). With any table asked for, seq_id must be a live sequence whose
 * tables exist (given, or fitted by its first append); otherwise seq_id is
 * not read. Errors: VQ_ERR_INVALID_ARGUMENT (NULL cache, layer out of
 * range, unknown seq_id, a sequence whose tables are not fitted yet, a
 * table of the wrong shape/dtype/device); nothing is written then. */
VQ_API vq_status vq_cache_get_transforms(const vq_cache *cache, int64_t seq_id, int layer, vq_cache_transforms *out,
                                         DLTensor *key_mean, DLTensor *value_mean, DLTensor *key_scale);

/* Fits the tables of `layer` for each sequence of seq_ids [n_seq] (distinct
 * live ids) that has none yet, from its first chunk: k, v [n_seq, Hkv, T,
 * D] and q [n_seq, Hq, T, D] f16/f32 on the cache's device (q may be NULL
 * when the layer needs no scale fitted), as the section head says; on a
 * CUDA ctx the rows of the sequences it fits are downloaded (the call waits
 * for the ctx's stream). Sequences that have their tables already, and
 * layers without transforms, are left as they are (so a model may call it
 * before every append). Nothing is appended.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer, ids, shapes, dtypes, T < 1,
 * q NULL where scales are to be fitted), VQ_ERR_DEVICE; no sequence
 * changes on failure. */
VQ_API vq_status vq_cache_fit_transforms(vq_cache *cache, int layer, int n_seq, const int64_t *seq_ids,
                                         const DLTensor *k, const DLTensor *v, const DLTensor *q);

/* ---- Sequences ----
 * A sequence id is an int64 >= 0, unique over the cache's lifetime (never
 * reused after remove). Every layer of a sequence has its own length; a
 * model appends layer by layer, so lengths differ during a step. */

/* Adds an empty sequence; *seq_id_out receives its id.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs; max_sequences live already),
 * VQ_ERR_OUT_OF_MEMORY. */
VQ_API vq_status vq_cache_seq_add(vq_cache *cache, int64_t *seq_id_out);

/* Removes a sequence: its pages return to the pools (a page shared with a
 * fork stays with the fork). Errors: VQ_ERR_INVALID_ARGUMENT (unknown id). */
VQ_API vq_status vq_cache_seq_remove(vq_cache *cache, int64_t seq_id);

/* Keeps the first n_tokens tokens of every layer of the sequence (a layer
 * with fewer tokens is left as it is), for speculative-decoding rollback.
 * Pages past the new end return to the pool.
 * Per layer, with n_enc its encoded tokens and f(n) the n_enc that n
 * tokens would have (section head; with sink tokens n_tokens counts them
 * and n, n_enc count the tokens after them): when f(n_tokens) == n_enc, or
 * n_tokens <= n_enc with n_tokens a multiple of g, the result is bit for bit
 * the cache that never saw the cut tokens (also after later appends). This
 * always holds for R = 0 and g = 1 (every key method but KIVI), and for
 * rollbacks that stay inside the residual window. Otherwise a cut below
 * n_enc keeps the kept tokens encoded (n_enc becomes n_tokens rounded down
 * to g) where the other cache would hold some in f16, until the window
 * passes them; and a KIVI layer cut inside an encoded group (its other f16
 * tokens are gone) is refused with VQ_ERR_UNSUPPORTED, changing nothing.
 * A sliding-window layer (W > 0) that evicted tokens at or above
 * n_tokens + 1 - W (the window of the next token to come) is refused too,
 * VQ_ERR_UNSUPPORTED; a rollback to at or after the first token of the last
 * append always passes. Its attention outputs then equal the other cache's
 * (the cache that never saw the cut tokens may have evicted fewer pages).
 * Errors: VQ_ERR_INVALID_ARGUMENT (unknown id, n_tokens < 0),
 * VQ_ERR_UNSUPPORTED (as above). */
VQ_API vq_status vq_cache_seq_truncate(vq_cache *cache, int64_t seq_id, int64_t n_tokens);

/* Forks a sequence: the new sequence *dst_seq_id_out holds the same tokens of
 * every layer. Pages are shared copy-on-write (reference counted; a shared
 * page is copied the first time either sequence writes into it: only a last
 * page that is partly filled, or made so by a truncate, is ever written);
 * the residual windows, sink tokens and transform tables are copied.
 * Errors: VQ_ERR_INVALID_ARGUMENT (unknown id, NULL, max_sequences live),
 * VQ_ERR_OUT_OF_MEMORY. */
VQ_API vq_status vq_cache_seq_fork(vq_cache *cache, int64_t src_seq_id, int64_t *dst_seq_id_out);

/* Tokens of `layer` of a sequence; -1 for an unknown id, a layer out of
 * range or a NULL cache. */
VQ_API int64_t vq_cache_seq_length(const vq_cache *cache, int64_t seq_id, int layer);

/* ---- Append ---- */

/* Appends n tokens of one layer to each of n_seq sequences:
 * seq_ids [n_seq] host array of distinct live ids; k, v [n_seq, Hkv, n, D]
 * f16/f32 (same dtype) on the ctx's device, any non-negative strides on the
 * first three dims, the last contiguous;
 * positions [n_seq, n] i32 on the ctx's device (compact), or NULL = each
 * sequence's current length + i. Positions are read by CommVQ layers only
 * (the RoPE row of each key, in [0, Pmax): checked on the CPU, clamped on
 * CUDA) and ignored otherwise. Keys of CommVQ layers are pre-RoPE.
 * Tokens are rounded to f16, written to the residual window and encoded into
 * pages as groups complete (see the section head); with sinks or transforms
 * the first tokens go to the sinks and every token is transformed first
 * (section head, "Sinks and transforms").
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer out of range, n_seq < 1,
 * unknown or repeated id, shapes/dtypes/devices, positions out of range),
 * VQ_ERR_UNSUPPORTED (data not aligned to its element size or
 * a last axis that is not contiguous, as for the attention entry points;
 * sequences that would put different, nonzero numbers of their tokens past
 * their sinks), VQ_ERR_INVALID_ARGUMENT also for a sequence whose key
 * scales are to be fitted and are not (vq_cache_fit_transforms),
 * VQ_ERR_OUT_OF_MEMORY (a fixed pool is full, or growing it failed): in
 * every case no sequence changes. */
VQ_API vq_status vq_cache_append(vq_cache *cache, int layer, int n_seq, const int64_t *seq_ids,
                                 const DLTensor *k, const DLTensor *v, const DLTensor *positions);

/* ---- Attention ---- */

typedef struct vq_cache_attend_opts {
    float scale;        /* softmax scale > 0; 0 = 1/sqrt(D) */
    bool causal;        /* Sq > 1: query i of a sequence of n tokens sees its tokens < n - Sq + i + 1
                           (the Sq queries are its last Sq tokens) */
    DLTensor *lse_out;  /* [n_seq, Hq, Sq] f32 natural-log log-sum-exp of each row's scaled scores
                           (-inf for a row that sees no token), or NULL */
    /* CPU arithmetic of KIVI pages (VQ_KEY_KIVI and VQ_KEY_KIVI_MIX keys,
     * VQ_VALUE_KIVI values) and of TurboQuant pages (VQ_KEY_TURBO,
     * VQ_KEY_TURBO_RVQ keys, VQ_VALUE_TURBO values), as for
     * vq_kivi_fused_attend (see vq_key_scores and vq_value_accum);
     * 0 = AUTO: integer KIVI key scores wherever the layout allows (2/4-bit
     * codes, D a multiple of 64; mixed 2/4-bit keys with a multiple of 4
     * wide channels), integer TurboQuant key scores (2-4 bits at D = 128)
     * and integer p.V (KIVI: 2-bit values, group 32, D = 128; TurboQuant:
     * 2-4 bits at D = 64, 128 and 256) where the CPU has the SIMD kernels, so at D = 128
     * with 2-bit keys of group 32 and 2-bit values a decode with up to four
     * query rows per kv head runs the fused block kernel. Other methods, the
     * residual window and CUDA contexts ignore them. VQ_KEY_SCORES_F32 /
     * VQ_VALUE_ACCUM_F32 keep f32 arithmetic for all of them (the quality
     * tables are measured with it). */
    vq_key_scores key_scores;
    vq_value_accum value_accum;
} vq_cache_attend_opts;

/* Attention of each sequence's queries over all its cached tokens of
 * `layer` (pages and residual window, merged exactly):
 * seq_ids [n_seq] host array of live ids (repeats allowed), q [n_seq, Hq,
 * Sq, D] f16/f32 raw (unrotated, post-RoPE), out [n_seq, Hq, Sq, D] f16/f32
 * (not overlapping q), outer strides as in vq_cache_append. opts NULL =
 * defaults. Query head h reads kv head h / (Hq / Hkv); each kv head's pages
 * are read once per call for all its query heads and rows. A sequence with
 * no token gives rows of 0 (lse -inf). With sink tokens or transforms the
 * queries are divided by the key scales, the rows that see tokens past the
 * sinks are attended as below and merged with the sinks in float64, and the
 * value mean is added (section head, "Sinks and transforms"); lse_out is
 * then that of the untransformed scores, q.k * scale, up to rounding.
 * Decode (Sq = 1) and prefill (Sq > 1, causal or not) go through the same
 * call; the pages and the window are splits of the split-KV attention
 * skeleton, so one call covers every sequence of the batch.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer, unknown id, shapes, dtypes,
 * devices, an output whose elements overlap or that overlaps q, scale not
 * finite or < 0, rows of a sliding-window layer that would see tokens it
 * evicted: section head),
 * VQ_ERR_OUT_OF_MEMORY (scratch), VQ_ERR_UNSUPPORTED (misaligned data or a
 * last axis that is not contiguous; on a CUDA ctx also what its kernels do
 * not run yet, named in the message: a sequence with
 * no token, a causal prefill over pages and a window whose q, out or lse_out
 * is not compact, and whatever the CUDA attention entry points refuse). Nothing but out and lse_out is written.
 * CPU: one skeleton run for the whole batch (pages bound once per pool chunk
 * and kept while scale and Sq stay the same). CUDA decode (Sq = 1): one
 * attention launch and one merge per layer for up to 16 sequences, reading
 * the pages in place through a device copy of each sequence's page table
 * (uploaded only where it changed, on the ctx's stream), the residual window
 * attended inside the merge; taken when the layer's pool is still its first
 * chunk and the key method is not CommVQ, nor KIVI over other values than
 * KIVI of the same bits and group. Otherwise (prefill, a grown pool, those
 * methods) per sequence its pages are gathered into one run in device
 * scratch (a device copy of its encoded bytes per call), attended with
 * vq_fused_sdpa, and the window merged in with vq_attention_merge.
 * VQ_CACHE_CUDA_GATHER=1 in the environment forces the gathered path. */
VQ_API vq_status vq_cache_attend(vq_cache *cache, int layer, int n_seq, const int64_t *seq_ids,
                                 const DLTensor *q, DLTensor *out, const vq_cache_attend_opts *opts);

/* ---- Accounting ---- */

typedef struct vq_cache_memory_report {
    int64_t code_bytes;      /* key and value codes of the tokens in pages */
    int64_t param_bytes;     /* their scales, zeros, norms, magnitudes, positions */
    int64_t residual_bytes;  /* keys and values of the residual windows' tokens, as stored (f16, or
                                the 8-bit codes and f32 scales of VQ_WINDOW_TURBO8), and of the sink
                                tokens (f16) */
    int64_t table_bytes;     /* per-layer tables (signs, projections, codebooks, RoPE tables, the
                                transforms' tables of the layer and of every sequence) */
    int64_t slack_bytes;     /* everything else allocated: free pages, unfilled page tails, unused
                                residual capacity, page tables */
    int64_t total_bytes;     /* the sum of the five above */
    int64_t tokens;          /* sum over sequences and layers of cached tokens (a sliding-window layer
                                counts the tokens it holds, not those it evicted) */
    int64_t sequences;       /* live sequences */
    double bits_per_element; /* (code + param + residual) * 8 / (tokens * Hkv * D * 2); 0 with no token */
    double key_bits_per_element, value_bits_per_element; /* the same for keys and values alone */
} vq_cache_memory_report;

/* Memory of the cache now. Pages shared by forks count once.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs). */
VQ_API vq_status vq_cache_memory(const vq_cache *cache, vq_cache_memory_report *out);

/* ---- Profiles ---- */

/* What a profile holds: the model shape it is for, and the plan. */
typedef struct vq_profile_config {
    int n_layers, n_kv_heads, head_dim; /* as vq_cache_config's; the caches it makes must have them */
    /* layers[n_layers]: each layer's methods and their scalar parameters, as
     * vq_cache_config.layers takes them (fields a method does not read are
     * kept as given; table pointers must be NULL: fitted tables come from
     * the cache's calibration). Required. */
    const vq_cache_layer_config *layers;
    const int *sliding_windows; /* [n_layers] or NULL (all 0: full attention) */
    int residual_tokens;        /* R, as vq_cache_config */
    vq_cache_window window;     /* residual window storage, as vq_cache_config */
    int window_bits;            /* VQ_WINDOW_TURBO's bits, else 0 */
    /* The recipe (section 5 head, "Sinks and transforms"): the sink tokens
     * (as vq_cache_config.sink_tokens, 0..VQ_CACHE_MAX_SINK_TOKENS) and
     * each layer's transforms, transforms[n_layers] or NULL = none: the
     * switches and, optionally, fitted tables [Hkv, D] f32 host compact
     * (key_mean, value_mean, key_scale; checked as vq_cache_create checks
     * them, copied). A layer whose switch is on and whose table is NULL
     * fits it per sequence, as a cache does. */
    int sink_tokens;
    const vq_cache_transforms *transforms;
    /* Read only (vq_profile_get; vq_profile_create ignores it): true for a
     * profile loaded from a version 1 file, which states no sink tokens or
     * transforms (sink_tokens 0, every transform off: a cache made from it
     * takes its own config's). */
    bool no_recipe;
} vq_profile_config;

/* Creates a profile from cfg (copied; the arrays may be freed after).
 * Validated as vq_cache_create validates the same fields, every layer laid
 * out at head_dim (a KIVI key group must divide some page size: 1..65536
 * with a multiple of 32 divisible by it; the page size is the cache's, and
 * vq_cache_create checks it again). Errors: VQ_ERR_INVALID_ARGUMENT (ctx,
 * cfg, cfg->layers or out NULL; sizes out of range; a method or parameter a
 * cache would refuse, named as "cfg->layers[3].keys.bits"; a table pointer
 * set), VQ_ERR_UNSUPPORTED (head_dim > 256), VQ_ERR_OUT_OF_MEMORY. *out is
 * NULL on failure. */
VQ_API vq_status vq_profile_create(vq_ctx *ctx, const vq_profile_config *cfg, vq_profile **out);

/* The profile's contents: *out's arrays point into the profile (valid
 * until vq_profile_free; sliding_windows and transforms are never NULL,
 * transforms' tables point into the profile or are NULL). Errors:
 * VQ_ERR_INVALID_ARGUMENT (NULLs; no ctx, so no message). */
VQ_API vq_status vq_profile_get(const vq_profile *profile, vq_profile_config *out);

/* Frees a profile; NULL is a no-op. */
VQ_API void vq_profile_free(vq_profile *profile);

/* =========================================================================
 * 6. Calibration: tables fitted on a model's keys and values
 *
 * Methods such as VecInfer (product VQ), CommVQ and codebook values need
 * tables fitted on sample keys and values. A vq_calibration holds them for
 * every layer (and kv head where the method wants it); pass it to
 * vq_cache_config.calibration, read its tables with vq_calibration_get_table, or
 * save it (section 7). It is host memory, independent of any ctx, immutable
 * once fitted or loaded, and may be shared by any number of caches and
 * threads.
 * ========================================================================= */

typedef struct vq_calibration vq_calibration;

/* What vq_calibration_fit fits. Zero-initialise, set what you need; a
 * method whose count is 0 is not fitted. */
typedef struct vq_calibration_config {
    /* VecInfer product VQ: M subspaces (D % M == 0) of C centroids each,
     * fitted on the smoothed keys k / s, with smooth factors s per kv head
     * (vq_vecinfer_smooth_factors). 0 = no VECINFER tables. */
    int vecinfer_subspaces;
    int vecinfer_centroids;      /* C in 1..65536; 0 = 256 */
    bool vecinfer_shared;        /* one codebook [M,C,D/M] and smooth [D] for all kv
                              heads, fitted on their pooled keys, instead of one
                              per kv head ([Hkv,M,C,D/M], [Hkv,D]) */
    /* CommVQ additive codebook [R,C,D] per layer (vq_commvq_train) on the
     * pooled keys of all kv heads, as given (pass pre-RoPE keys: CommVQ
     * applies RoPE at decode). 0 = none. */
    int commvq_stages;     /* R in 0..64 */
    int commvq_centroids;  /* C in 1..65536; 0 = 256 */
    /* Lloyd-Max value codebook per layer (vq_lloyd_max_fit) of this many
     * centroids (1..256; 16 for 4-bit nibbles), fitted on every element of
     * the values normalised per token by their RMS, v / (||v||_2 / sqrt(D))
     * (tokens with ||v|| = 0 are skipped): the normalisation under which the
     * default table is Lloyd-Max N(0,1). 0 = none (values may be NULL). */
    int value_centroids;
    int iters;             /* k-means / Lloyd rounds, 1..1000; 0 = 25 */
    /* Tokens per fit, taken evenly spaced (token i * n / max_samples) from the
     * N (per head) or Hkv * N (pooled) available; 0 = 16384. A fit with
     * fewer tokens than centroids gives VQ_ERR_INVALID_ARGUMENT. */
    int64_t max_samples;
    uint64_t seed;         /* k-means++ seeds: fit (layer, head, subspace)
                              draws its own seed from this one */
    /* Called after each layer (from the calling thread), e.g. for progress
     * on stderr; NULL for none. */
    void (*progress)(void *user, int layers_done, int n_layers);
    void *progress_user;
} vq_calibration_config;

/* Fits a calibration on a CPU ctx: keys and values [L, Hkv, N, D] f16/f32
 * (host, compact), L layers of N sample tokens per kv head. values may be
 * NULL when cfg->value_centroids is 0. The result is deterministic: the same
 * inputs, config and seed give bit-identical tables for a given CPU
 * instruction set (VQ_ISA) whatever the thread count. Runs on the ctx's
 * thread pool; time and memory are dominated by k-means, O(samples * C * D *
 * iters) per layer for each method. *out is freed with vq_calibration_free.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, shapes, counts out of range, D not
 * divisible by M, fewer samples than centroids, non-finite samples),
 * VQ_ERR_UNSUPPORTED (a CUDA ctx), VQ_ERR_OUT_OF_MEMORY. *out is NULL on
 * failure. */
VQ_API vq_status vq_calibration_fit(vq_ctx *ctx, const vq_calibration_config *cfg, const DLTensor *keys,
                                    const DLTensor *values, vq_calibration **out);

/* Frees a calibration. NULL is a no-op. A cache created with it keeps its
 * own copy of the tables, so it may be freed while caches live. */
VQ_API void vq_calibration_free(vq_calibration *cal);

/* What a calibration holds: its dimensions and the config it was fitted with
 * (defaults resolved, progress NULL). */
typedef struct vq_calibration_info {
    int n_layers, n_kv_heads, head_dim;
    int64_t n_samples;           /* N, sample tokens per kv head it was fitted on */
    vq_calibration_config config;
} vq_calibration_info;

/* Errors: VQ_ERR_INVALID_ARGUMENT (cal or out NULL). */
VQ_API vq_status vq_calibration_get_info(vq_ctx *ctx, const vq_calibration *cal, vq_calibration_info *out);

typedef enum vq_calibration_table {
    VQ_CAL_VECINFER_SMOOTH = 1,       /* [Hkv, D] f32 > 0, or [D] when vecinfer_shared */
    VQ_CAL_VECINFER_CODEBOOK = 2,     /* [Hkv, M, C, D/M] f32, or [M, C, D/M] when vecinfer_shared */
    VQ_CAL_COMMVQ_CODEBOOK = 3, /* [R, C, D] f32 */
    VQ_CAL_VALUE_CENTROIDS = 4  /* [n] f32 ascending */
} vq_calibration_table;

/* A view of one layer's table: fills *out (a host f32 DLTensor, compact,
 * shape as listed above) pointing into the calibration, valid until
 * vq_calibration_free; do not write through it. The shapes match what
 * vq_vecinfer_quantize / vq_fused_sdpa (pq), vq_commvq_encode (commvq) and
 * vq_codebook_quantize (values) take.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs, layer outside [0, L), a table
 * that was not fitted, an unknown `which`). */
VQ_API vq_status vq_calibration_get_table(vq_ctx *ctx, const vq_calibration *cal, int layer,
                                          vq_calibration_table which, DLTensor *out);

/* =========================================================================
 * 7. Persistence: calibrations and caches saved and loaded
 *
 * The file format is docs/FILE_FORMAT.md: a versioned header, sections with
 * a CRC-32C each, little-endian on every platform. A load validates every
 * size and count against the data's size and sane limits before allocating,
 * and every checksum and table value before trusting it: a truncated,
 * corrupted or hostile input gives VQ_ERR_CORRUPT_DATA (a file written by
 * a newer format version: VQ_ERR_UNSUPPORTED), with a message, never a
 * crash or an over-read, and allocates at most a small multiple of the
 * data's size. A load gives back bit-identical tables and caches.
 * Saving to a path is atomic: the bytes go to a temporary file next to it
 * (path + ".XXXXXX", mode 0644), are flushed to disk, then renamed over
 * path, so a crash mid-save never leaves a damaged file under that name.
 * ========================================================================= */

/* Serialises into buf[0..cap): *size_out = the bytes the file takes. buf
 * NULL (cap 0) only computes *size_out. Errors: VQ_ERR_INVALID_ARGUMENT
 * (cal or size_out NULL; cap smaller than the size, with the size in
 * *size_out and nothing written). */
VQ_API vq_status vq_calibration_save_buffer(vq_ctx *ctx, const vq_calibration *cal, void *buf, size_t cap,
                                            size_t *size_out);
/* Saves to a file, atomically. Errors: VQ_ERR_INVALID_ARGUMENT, VQ_ERR_IO
 * (with errno's text), VQ_ERR_OUT_OF_MEMORY. */
VQ_API vq_status vq_calibration_save(vq_ctx *ctx, const vq_calibration *cal, const char *path);
/* Loads from size bytes at buf (not kept). Errors: VQ_ERR_INVALID_ARGUMENT
 * (NULLs), VQ_ERR_CORRUPT_DATA, VQ_ERR_UNSUPPORTED, VQ_ERR_OUT_OF_MEMORY.
 * *out is NULL on failure. */
VQ_API vq_status vq_calibration_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_calibration **out);
/* Loads a file (read whole; at most 2^36 bytes). Errors: those of
 * vq_calibration_load_buffer, VQ_ERR_IO. */
VQ_API vq_status vq_calibration_load(vq_ctx *ctx, const char *path, vq_calibration **out);

/* ---- profiles ----
 * A profile file (docs/FILE_FORMAT.md, "Profile files") holds a vq_profile
 * whole; a load validates it as vq_profile_create does (a value a cache
 * would refuse: VQ_ERR_CORRUPT_DATA naming it) and gives back the same
 * profile, which saves to the same bytes. */

/* Serialises into buf[0..cap) as vq_calibration_save_buffer does. Errors:
 * VQ_ERR_INVALID_ARGUMENT (profile or size_out NULL; cap too small, with
 * the size in *size_out and nothing written). */
VQ_API vq_status vq_profile_save_buffer(vq_ctx *ctx, const vq_profile *profile, void *buf, size_t cap,
                                        size_t *size_out);
/* Saves to a file, atomically. Errors: VQ_ERR_INVALID_ARGUMENT, VQ_ERR_IO,
 * VQ_ERR_OUT_OF_MEMORY. */
VQ_API vq_status vq_profile_save(vq_ctx *ctx, const vq_profile *profile, const char *path);
/* Loads from size bytes at buf (not kept). Errors: VQ_ERR_INVALID_ARGUMENT
 * (NULLs), VQ_ERR_CORRUPT_DATA, VQ_ERR_UNSUPPORTED (a newer format version,
 * or head_dim > 256), VQ_ERR_OUT_OF_MEMORY. *out is NULL on failure. */
VQ_API vq_status vq_profile_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_profile **out);
/* Loads a file (read whole; at most 2^30 bytes). Errors: those of
 * vq_profile_load_buffer, VQ_ERR_IO. */
VQ_API vq_status vq_profile_load(vq_ctx *ctx, const char *path, vq_profile **out);

/* ---- caches ----
 * A cache file holds the cache's sizes, every layer's resolved config,
 * tables and page layout, and for each saved sequence (all live ones, or
 * the one named) its counters, the bytes of its filled pages and its f16
 * residual window. Loading gives a cache whose attention outputs are
 * bit-identical to the saved one's (the same bytes, on the CPU; the CUDA
 * kernels' own rounding on CUDA), on either backend: a CPU-saved file loads
 * on a CUDA ctx and the reverse (the cache's own backend rules apply),
 * sliding windows and their evicted pages included. Pages shared by forked sequences are saved
 * once per sequence and load unshared. A loaded cache allocates only the pages its
 * sequences fill (plus one per layer); it grows by the saved grow_pages, and
 * a fixed-capacity one (grow_pages 0) may grow back up to its saved
 * capacity. A save on a CUDA cache synchronises the ctx's stream. */

/* Serialises the whole cache (seq_id -1) or one sequence into buf[0..cap):
 * *size_out = the bytes the file takes; buf NULL (cap 0) only computes it.
 * Errors: VQ_ERR_INVALID_ARGUMENT (cache or size_out NULL, seq_id neither -1
 * nor a live sequence, cap smaller than the size: the size is in *size_out,
 * nothing written), VQ_ERR_DEVICE. */
VQ_API vq_status vq_cache_save_buffer(const vq_cache *cache, int64_t seq_id, void *buf, size_t cap,
                                      size_t *size_out);
/* The same to a file, atomically. Errors: as above, VQ_ERR_IO,
 * VQ_ERR_OUT_OF_MEMORY. */
VQ_API vq_status vq_cache_save(const vq_cache *cache, int64_t seq_id, const char *path);

/* A new cache on ctx (CPU or CUDA) from size bytes at buf (not kept), with
 * the saved sequences under their saved ids (the next vq_cache_seq_add
 * continues after the saved ones). *out is NULL on failure.
 * Errors: VQ_ERR_INVALID_ARGUMENT (NULLs), VQ_ERR_CORRUPT_DATA (anything that
 * fails validation, including a config vq_cache_create refuses),
 * VQ_ERR_UNSUPPORTED (a newer format; a method this backend does not run),
 * VQ_ERR_OUT_OF_MEMORY, VQ_ERR_DEVICE. */
VQ_API vq_status vq_cache_load_buffer(vq_ctx *ctx, const void *buf, size_t size, vq_cache **out);
/* The same from a file (read whole, at most 2^40 bytes); also VQ_ERR_IO. */
VQ_API vq_status vq_cache_load(vq_ctx *ctx, const char *path, vq_cache **out);

/* Adds the one sequence of a sequence file (vq_cache_save with a seq_id) to
 * an existing cache as a new sequence, *seq_id_out its id: prompt reuse. The
 * cache must have the file's sizes and, layer by layer, the same config and
 * tables (else VQ_ERR_CORRUPT_DATA naming the layer). On failure the cache's
 * sequences are as before. Errors: those of vq_cache_load_buffer, and
 * VQ_ERR_INVALID_ARGUMENT for a file of several sequences or a cache already
 * holding max_sequences. */
VQ_API vq_status vq_cache_seq_load_buffer(vq_cache *cache, const void *buf, size_t size, int64_t *seq_id_out);
VQ_API vq_status vq_cache_seq_load(vq_cache *cache, const char *path, int64_t *seq_id_out);

/* =========================================================================
 * Earlier names (deprecated; they go in the release after next)
 *
 * One idea, one name: KIVI (the group-affine method, once also "affine" and
 * "scalar"), f16 (the uncompressed path, once "plain"), VecInfer (the
 * product-VQ keys, once "pq") and CommVQ (once "comm_vq"). The earlier
 * spellings below still compile to the same thing; the struct members
 * `plain`, `affine` and `pq` of vq_encoded_keys / vq_encoded_values alias
 * the new ones through anonymous unions. Define VQ_NO_DEPRECATED_NAMES to
 * leave these out.
 * ========================================================================= */
#ifndef VQ_NO_DEPRECATED_NAMES
#define VQ_KEYS_AFFINE VQ_KEYS_KIVI
#define VQ_KEYS_PQ VQ_KEYS_VECINFER
#define VQ_VALUES_PLAIN VQ_VALUES_F16
#define VQ_VALUES_AFFINE VQ_VALUES_KIVI
#define VQ_KEY_PQ VQ_KEY_VECINFER
#define vq_plain_values vq_f16_values
#define vq_affine_quantize_keys vq_kivi_quantize_keys
#define vq_affine_quantize_values vq_kivi_quantize_values
#define vq_affine_dequantize_keys vq_kivi_dequantize_keys
#define vq_affine_dequantize_values vq_kivi_dequantize_values
#define vq_scalar_fused_decode_attend vq_kivi_fused_attend
#define vq_comm_vq_opts vq_commvq_opts
#define vq_comm_vq_decode vq_commvq_decode
#define vq_comm_vq_train vq_commvq_train
#define vq_comm_vq_encode vq_commvq_encode
#endif

#ifdef __cplusplus
}
#endif

#endif /* VELOXQUANT_H */
