/* vqm.h — the model runtime: a small GGUF Llama runtime in C on the
 * veloxquant KV cache. It lives in tools/model/ beside the `vq`
 * command because, like tools/, it uses the library only through
 * include/veloxquant.h (attention goes through vq_cache); it is a static
 * library (vq_model) that `vq generate`, `vq perplexity` and the tests link.
 *
 * Reads like llama2.c's run.c: a config, weights that point into the mapped
 * GGUF file (quantized blocks stay quantized: the GGUF/ggml block layouts),
 * a run state, one forward function. Every function returning vq_status
 * writes a sentence naming the problem into `err` (VQM_ERR_LEN bytes) on
 * failure and leaves its outputs untouched (NULL / zeroed). */
#ifndef VQM_H
#define VQM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

#define VQM_ERR_LEN 256

/* Writes the printf-style message into err (VQM_ERR_LEN bytes; err may be
 * NULL) and returns s: the runtime's one error path (gguf.c). */
vq_status vqm_fail(char *err, vq_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ======================================================================
 * GGUF files (gguf.c)
 * ====================================================================== */

/* GGUF metadata value types (the file format's numbering). */
typedef enum vqm_gguf_type {
    VQM_GGUF_U8 = 0, VQM_GGUF_I8 = 1, VQM_GGUF_U16 = 2, VQM_GGUF_I16 = 3,
    VQM_GGUF_U32 = 4, VQM_GGUF_I32 = 5, VQM_GGUF_F32 = 6, VQM_GGUF_BOOL = 7,
    VQM_GGUF_STRING = 8, VQM_GGUF_ARRAY = 9, VQM_GGUF_U64 = 10, VQM_GGUF_I64 = 11,
    VQM_GGUF_F64 = 12
} vqm_gguf_type;

/* A string inside the file: not NUL-terminated; points into the file bytes. */
typedef struct vqm_str {
    const char *s;
    size_t len;
} vqm_str;

/* One metadata entry. Scalars are widened into u64/i64/f64 (bool -> u64 0/1).
 * Arrays: arr_type, arr_n and either arr_data (raw little-endian elements,
 * inside the file) or arr_strs (arr_n strings, owned by the vqm_gguf). */
typedef struct vqm_gguf_kv {
    vqm_str key;
    vqm_gguf_type type;
    uint64_t u64;
    int64_t i64;
    double f64;
    vqm_str str;
    vqm_gguf_type arr_type;
    uint64_t arr_n;
    const uint8_t *arr_data;
    vqm_str *arr_strs;
} vqm_gguf_kv;

/* Weight (tensor) types: ggml's numbering. Only these are computed with;
 * the reader also knows the sizes of the other common ggml types so that a
 * file using them opens, and loading a model that needs one is an error. */
typedef enum vqm_wtype {
    VQM_W_F32 = 0, VQM_W_F16 = 1, VQM_W_Q4_0 = 2, VQM_W_Q4_1 = 3,
    VQM_W_Q5_0 = 6, VQM_W_Q8_0 = 8, VQM_W_Q4_K = 12, VQM_W_Q6_K = 14, VQM_W_BF16 = 30
} vqm_wtype;

/* One tensor: up to 4 dims, ne[0] the contiguous one (a row); data points
 * into the mapped file, nbytes checked to lie inside it. */
typedef struct vqm_gguf_tensor {
    vqm_str name;
    int n_dims;
    int64_t ne[4];     /* unused dims are 1 */
    uint32_t type;     /* ggml type number */
    uint64_t offset;   /* from the start of the data section */
    uint64_t nbytes;
    const uint8_t *data;
} vqm_gguf_tensor;

typedef struct vqm_gguf {
    uint32_t version;
    uint64_t n_kv, n_tensors;
    vqm_gguf_kv *kv;
    vqm_gguf_tensor *tensors;
    uint64_t alignment;
    const uint8_t *bytes;  /* the whole file */
    size_t size;
    void *map;             /* mmap of the file (NULL when parsed from memory) */
    size_t map_size;
} vqm_gguf;

/* Parses a GGUF (version 2 or 3) held in memory: every count, length,
 * type, dimension and tensor extent is checked against the buffer; a bad or
 * truncated buffer is VQ_ERR_CORRUPT_DATA with the reason in err, never an
 * over-read. `bytes` must outlive the result (strings and tensors point in). */
vq_status vqm_gguf_parse(const uint8_t *bytes, size_t size, vqm_gguf **out, char *err);
/* Maps a file read-only and parses it (VQ_ERR_IO when it cannot be read). */
vq_status vqm_gguf_open(const char *path, vqm_gguf **out, char *err);
void vqm_gguf_free(vqm_gguf *g);  /* NULL is a no-op */
/* Gives back the process's memory of the whole pages inside [p, p + n) of
 * a mapped file (the data stays valid: touched again, it is read again from
 * the file); a no-op for a vqm_gguf parsed from memory. The model calls it
 * on the matrices it has packed. */
void vqm_gguf_release(const vqm_gguf *g, const void *p, size_t n);

/* True when s equals the NUL-terminated z. */
bool vqm_str_eq(vqm_str s, const char *z);
/* Lookups by exact key / tensor name; NULL when absent. */
const vqm_gguf_kv *vqm_gguf_find(const vqm_gguf *g, const char *key);
const vqm_gguf_tensor *vqm_gguf_tensor_find(const vqm_gguf *g, const char *name);
/* Bytes of n elements (n a multiple of the block size) of a ggml type; 0
 * for an unknown type. Block size (elements per block) via *block. */
uint64_t vqm_wtype_row_bytes(uint32_t type, int64_t n, int64_t *block);
/* "Q4_1" etc.; "unknown" for others. */
const char *vqm_wtype_name(uint32_t type);
/* True for the types this runtime computes with. */
bool vqm_wtype_supported(uint32_t type);

/* ======================================================================
 * Threads and kernels (pool.c, matmul.c, quant*.c)
 * ====================================================================== */

typedef struct vqm_pool vqm_pool;
/* The ctx's threads (vq_ctx_parallel_for), as many parts as it has threads;
 * VQ_ERR_INVALID_ARGUMENT for a NULL ctx. */
vq_status vqm_pool_create(vq_ctx *ctx, vqm_pool **out);
void vqm_pool_free(vqm_pool *p);
int vqm_pool_size(const vqm_pool *p);
/* Runs fn(arg, i, n) for i = 0..n-1 on the pool's threads (i = the part,
 * n = the thread count: part i may run on any thread, so per-part state is
 * indexed by i) and returns when all are done. */
void vqm_pool_run(vqm_pool *p, void (*fn)(void *arg, int i, int n), void *arg);

/* A weight matrix [rows, cols] of one type, rows contiguous (row_bytes).
 * packed: NULL, or the same weights re-laid out for the tile kernels by
 * vqm_matrix_pack (every supported type); data stays valid either way (the
 * embedding lookup and the scalar row kernels read it). An unpacked matrix
 * is multiplied by the scalar row kernels on every ISA. */
typedef struct vqm_matrix {
    uint32_t type;
    int64_t rows, cols;
    size_t row_bytes;
    const uint8_t *data;
    const uint8_t *packed;
} vqm_matrix;

/* The dot kernel: out[j] = dot(row, x + j * x_stride) for j < nx <= 4.
 * xsum[j * (cols / 32) + b] = sum of block b of x_j (used by Q4_1/Q4_0). */
typedef void (*vqm_dot_fn)(int64_t cols, const uint8_t *row, int nx, const float *x, size_t x_stride,
                           const float *xsum, float *out);

/* Rows per tile of the packed layout. */
#define VQM_TILE 16

/* The tile kernel on the packed layout: out[j * VQM_TILE + r] = dot(row r of
 * the tile, x + j * x_stride) for r < VQM_TILE, j < nx <= 4 (xsum as above).
 * One weight vector lane per row: no per-row reduction, no per-block scale
 * broadcast (quant.h has the layout). */
typedef void (*vqm_tile_fn)(int64_t cols, const uint8_t *tile, int nx, const float *x, size_t x_stride,
                            const float *xsum, float *out);

typedef struct vqm_kernels {
    const char *isa;
    vqm_dot_fn dot[31];   /* by ggml type, unpacked matrices (scalar); NULL = unsupported */
    vqm_tile_fn tile[31]; /* by ggml type, packed matrices (the ISA's); NULL = unsupported */
} vqm_kernels;

/* Kernel set for an ISA name as vq_ctx_isa gives it ("scalar", "avx2",
 * "avx512", "amx": the AVX-512 set; other names give scalar, ISAs not
 * compiled in the best available that is not above it). */
void vqm_kernels_init(vqm_kernels *k, const char *isa);

/* Bytes of w's packed layout (the same as its data: the 16 rows of a tile
 * keep their bytes, reordered; the last tile padded with zero rows), or 0
 * when its type has no packed layout. */
size_t vqm_matrix_packed_bytes(const vqm_matrix *w);
/* Writes w's packed layout into dst (vqm_matrix_packed_bytes(w) bytes);
 * the caller then sets w->packed = dst. */
void vqm_matrix_pack(const vqm_matrix *w, uint8_t *dst);

/* Y[n, rows] = X[n, cols] * W^T (f32 activations, weights in their type;
 * y_stride between output rows, x compact; cols a multiple of 32). Threads
 * split the rows. xsum: scratch of n * cols / 32 floats. */
void vqm_matmul(vqm_pool *pool, const vqm_kernels *k, const vqm_matrix *w, int64_t n, const float *x,
                float *y, size_t y_stride, float *xsum);
/* count (<= 4) matmuls of the same X in one parallel step (one thread
 * dispatch instead of count): Y_i = X W_i^T into y[i] (stride y_stride[i]);
 * every w[i] has the same cols. Q, K, V and gate, up share their input. */
void vqm_matmuls(vqm_pool *pool, const vqm_kernels *k, int count, const vqm_matrix *const *w, int64_t n,
                 const float *x, float *const *y, const size_t *y_stride, float *xsum);
/* Dequantizes row r of w to f32 (cols floats). */
void vqm_matrix_row(const vqm_matrix *w, int64_t r, float *out);

/* ======================================================================
 * Tokenizer (tokenizer.c, tokenizer_spm.c): GPT-2 style byte-level BPE or
 * SentencePiece BPE from GGUF metadata
 * ====================================================================== */

typedef struct vqm_tokenizer vqm_tokenizer;

/* From tokenizer.ggml.{model = gpt2, tokens, token_type, merges, pre,
 * bos/eos ids}. Pre-tokenizer rules by tokenizer.ggml.pre: "smollm",
 * "starcoder", "refact", ... (digits split one by one, then GPT-2's
 * regex), "gpt2"/"default" (GPT-2's regex). Others: VQ_ERR_UNSUPPORTED.
 * Or tokenizer.ggml.model = llama (SentencePiece: tokens, scores,
 * token_type, add_space_prefix; tokenizer_spm.c has the algorithm); its
 * user-defined tokens are cut out of every text, not only with
 * parse_special. */
vq_status vqm_tokenizer_load(const vqm_gguf *g, vqm_tokenizer **out, char *err);
void vqm_tokenizer_free(vqm_tokenizer *t);
/* Encodes UTF-8 text (invalid bytes are encoded as their byte tokens).
 * parse_special: control/user-defined token strings in the text become
 * their ids (like transformers' tokenizers). Returns the number of ids,
 * writing at most cap of them (call again with a larger buffer if more). */
int64_t vqm_tokenize(const vqm_tokenizer *t, const char *text, size_t len, bool parse_special, int32_t *ids,
                     int64_t cap);
/* Appends the bytes of token id to buf (byte-level decoding), returns the
 * byte count written (<= cap), 0 for ids out of range. Control tokens give
 * their text. */
size_t vqm_detokenize(const vqm_tokenizer *t, int32_t id, char *buf, size_t cap);
int32_t vqm_tokenizer_vocab(const vqm_tokenizer *t);
int32_t vqm_tokenizer_bos(const vqm_tokenizer *t);
int32_t vqm_tokenizer_eos(const vqm_tokenizer *t);
bool vqm_tokenizer_add_bos(const vqm_tokenizer *t);
/* A window of a text's tokens as the model reads a text: its first token
 * made BOS where the model starts every text with one (Gemma), as the
 * evaluations (vq perplexity, vq tune) give it; else unchanged. */
void vqm_tokenizer_start_window(const vqm_tokenizer *t, int32_t *win);
/* True for control tokens (<|im_end|>, <|endoftext|>, ...): a chat turn's end. */
bool vqm_tokenizer_is_control(const vqm_tokenizer *t, int32_t id);

/* ======================================================================
 * The model (model.c, forward.c)
 * ====================================================================== */

typedef struct vqm_config {
    int n_layers, dim, hidden_dim, n_heads, n_kv_heads, head_dim, vocab;
    int context_length;
    float rope_base, norm_eps;
    int rope_dim;       /* rotated dims per head (head_dim for Llama) */
    bool tied_output;   /* no output.weight: the embedding is the output */
    /* Gemma 3 (general.architecture "gemma3"): RMS norms of each head's
     * query and key, norms after attention and after the FFN (before their
     * residual adds), GeGLU (tanh GELU), RoPE on (i, i + rope_dim / 2) pairs,
     * and the sliding-window layers. False for the Llama family. */
    bool gemma;
    float embed_scale;      /* the embedding row times this: sqrt(dim) for Gemma, 1 for Llama */
    float attn_scale;       /* softmax scale of q.k: 1 / sqrt(key_length) */
    /* Sliding-window ("local") layers attend to the newest sliding_window
     * tokens (themselves and sliding_window - 1 before) with RoPE base
     * rope_base_local; the others ("global") see every token with
     * rope_base. Gemma 3: every layer but each swa_pattern-th is local
     * (5 local : 1 global), window from <arch>.attention.sliding_window.
     * sliding_window 0: no local layers. */
    int sliding_window;
    int swa_pattern;
    float rope_base_local;
} vqm_config;

typedef struct vqm_layer_weights {
    const float *attn_norm, *ffn_norm; /* [dim] */
    const float *q_norm, *k_norm;      /* Gemma: [head_dim], applied per head; else NULL */
    const float *post_attn_norm, *post_ffn_norm; /* Gemma: [dim]; else NULL */
    bool local;                        /* a sliding-window layer (vqm_config.sliding_window) */
    vqm_matrix wq, wk, wv, wo;         /* [Hq*D, dim], [Hkv*D, dim] x2, [dim, Hq*D] */
    vqm_matrix w_gate, w_up, w_down;   /* [hidden, dim] x2, [dim, hidden] */
} vqm_layer_weights;

typedef struct vqm_model {
    vqm_config cfg;
    vqm_gguf *gguf;
    vqm_tokenizer *tok;
    vqm_matrix embed;                  /* [vocab, dim] */
    vqm_matrix output;                 /* [vocab, dim] (== embed when tied) */
    const float *output_norm;          /* [dim] */
    vqm_layer_weights *layers;
    const float *rope_freqs;           /* [head_dim/2] divisors of the rotation frequencies, or NULL */
    float *norm_storage;               /* owned f32 copies of the norm vectors */
    uint8_t *packed_storage;           /* owned packed layouts of the matrices (vqm_matrix_pack) */
    uint64_t weight_bytes;             /* bytes of all weights read per token */
} vqm_model;

/* Opens a GGUF model of the Llama family (general.architecture "llama",
 * "mistral", "granite") or Gemma 3 ("gemma3"), checks every tensor's
 * presence, type and shape. */
vq_status vqm_model_load(const char *path, vqm_model **out, char *err);
vq_status vqm_model_from_gguf(vqm_gguf *g, vqm_model **out, char *err); /* takes g on success */
void vqm_model_free(vqm_model *m);
/* Layer l's sliding window in tokens: cfg.sliding_window for a local
 * layer, 0 (full attention) otherwise; what the cache and a profile take
 * per layer (vq_cache_config.sliding_windows). */
int vqm_layer_window(const vqm_model *m, int l);

/* Where attention keeps its keys and values. VQM_ATTN_CACHE is the
 * runtime's attention: the library's vq_cache with any method.
 * VQM_ATTN_F32 is an uncompressed in-runtime f32 store with plain loops,
 * kept as the test oracle. */
typedef enum vqm_attn_kind { VQM_ATTN_CACHE = 0, VQM_ATTN_F32 = 1 } vqm_attn_kind;

struct vq_cache_config;
typedef struct vq_cache vq_cache;

typedef struct vqm_session_config {
    int max_tokens;        /* context capacity of the sequence */
    int max_batch;         /* prefill chunk (tokens per forward step), >= 1 */
    vqm_attn_kind attn;
    /* VQM_ATTN_CACHE: the cache's methods (preset or per-layer configs, f16
     * layers, residual window, page size; NULL = f16); the session sets
     * n_layers, heads, head dim, a fixed capacity of max_tokens and one
     * sequence. A model with sliding-window layers (Gemma 3) sets
     * vq_cache_config.sliding_windows for its local layers (cache == NULL
     * or its sliding_windows NULL; windows given there or by a profile must
     * be the model's, else VQ_ERR_INVALID_ARGUMENT): the cache masks the
     * tokens past the window and returns their pages. */
    const struct vq_cache_config *cache;
    /* VQM_ATTN_CACHE: store keys and values minus a per-(layer, channel)
     * mean, frozen from the first chunk after a reset. Exact in arithmetic:
     * softmax(q.(k - mk)) = softmax(q.k) (q.mk is the same for every key of
     * a query) and sum_i p_i (v_i - mv) + mv = sum_i p_i v_i (the p_i sum to
     * 1); but the quantizers then see only what varies between tokens, not a
     * shared offset that dominates the norm (the "key bias"). The cache's
     * vq_cache_transforms (center_keys, center_values) on every layer. */
    bool center;
    /* With center: keep the values raw, centering the keys only. The value
     * mean is dominated by a few tokens of large norm, so subtracting it
     * moves most values away from zero, while centering the keys is what
     * helps TurboQuant keys. It depends on the value codec (docs/QUALITY.md,
     * SmolLM2-135M at 2048 tokens): kivi4-turbo2 +12.3 % -> +9.5 %
     * perplexity, kivi2 +88 % -> +69 %, but kivi4 +1.0 % -> +2.6 %. */
    bool center_keys_only;
    /* VQM_ATTN_CACHE: also balance key and query channels: keys are stored
     * times s_j and queries divided by s_j (exact: q.k unchanged), with
     * s_j = sqrt(rms q_j / rms k_j) from the first chunk (geometric mean 1,
     * within [1/8, 8]), so that the key quantizers' error, which follows the
     * key's norm, falls less on the channels where queries are large
     * (SmoothQuant's balance for the "outlier channels"). The cache's
     * vq_cache_transforms.smooth on every layer. */
    bool smooth;
    /* VQM_ATTN_CACHE: the sequence's first `sink` tokens (the attention
     * sink: every head puts much of its weight there, so an error in their
     * scores moves every other weight) are kept in f16 outside the pages
     * (vq_cache_config.sink_tokens); attention over them is merged exactly
     * with the rest through the log-sum-exp. 0 = off. */
    int sink;
    /* VQM_ATTN_CACHE: the CPU arithmetic of KIVI pages (vq_cache_attend_opts;
     * 0 = AUTO, the integer kernels where the layout allows). */
    vq_key_scores key_scores;
    vq_value_accum value_accum;
} vqm_session_config;

typedef struct vqm_session vqm_session;

/* A run state for one sequence on ctx's threads and ISA. */
vq_status vqm_session_create(const vqm_model *m, vq_ctx *ctx, const vqm_session_config *cfg, vqm_session **out,
                             char *err);
void vqm_session_free(vqm_session *s);
/* Forgets every token (cache emptied). */
vq_status vqm_session_reset(vqm_session *s, char *err);
int64_t vqm_session_length(const vqm_session *s);
/* The vq_cache (NULL for VQM_ATTN_F32). */
vq_cache *vqm_session_cache(const vqm_session *s);
/* vq_cache_memory of the session's cache (the sink tokens are residual
 * bytes there). VQM_ATTN_F32: VQ_ERR_INVALID_ARGUMENT. */
vq_status vqm_session_memory(const vqm_session *s, vq_cache_memory_report *out, char *err);

/* Speed measurements only: appends n tokens of N(0,1) keys and values
 * (seeded) to every layer of the cache and advances the session by n, as
 * if a prompt had run (attention's cost depends on the length and format,
 * not on the values). VQM_ATTN_CACHE only; with sink tokens the first
 * tokens filled are the sinks, in the cache as any prompt's. */
vq_status vqm_session_fill_random(vqm_session *s, int64_t n, uint64_t seed, char *err);

/* Runs n tokens (n >= 1; chunks of max_batch) at the next positions and
 * writes logits [n_out, vocab] of the last n_out of them (0 <= n_out <= n)
 * into logits (row stride vocab). */
vq_status vqm_forward(vqm_session *s, const int32_t *tokens, int64_t n, int64_t n_out, float *logits, char *err);

/* ======================================================================
 * Sampling (sample.c)
 * ====================================================================== */

typedef struct vqm_sampler_config {
    float temperature;  /* 0 = greedy (argmax) */
    int top_k;          /* 0 = off */
    float top_p;        /* 1 = off */
    uint64_t seed;
} vqm_sampler_config;

typedef struct vqm_sampler vqm_sampler;
vq_status vqm_sampler_create(const vqm_sampler_config *cfg, int vocab, vqm_sampler **out, char *err);
void vqm_sampler_free(vqm_sampler *s);
/* Draws a token from logits[vocab] (not modified). */
int32_t vqm_sample(vqm_sampler *s, const float *logits);

#endif
