/* cache_internal.h — the state of a vq_cache (include/veloxquant.h section
 * 5), all of it in the structs below so that persistence can walk it.
 * Internal.
 *
 * Layout of one layer's pool. A layer stores its formats as "streams" (key
 *  codes, key scales, value codes, ...; each method file, method_*.c, adds its own).
 * Pages are numbered 0, 1, ... per layer and live in chunks allocated once
 * and never moved: chunk 0 holds capacity_pages pages, every later chunk
 * grow_pages. Inside a chunk of N pages each stream is one compact array
 *     stream s:  [N][Hkv][rows_s][last_s]   of dtype_s   (per_head streams)
 *                [N][rows_s][last_s]                      (shared by the heads)
 * at byte offset N * stream_off_s from the chunk base (stream_off_s = sum of
 * the earlier streams' page_bytes), so page i of the chunk is batch row i of a
 * [N, Hkv, rows, last] tensor and one attention binding covers a whole chunk.
 * rows_s is P for per-token streams and P / g for KIVI key scale/zero.
 *
 * Tokens of a sequence's layer: [0, n_enc) encoded, token t in page
 * pages[t / P] at row t % P (row (t % P) / g of group streams); [n_enc, n)
 * in the residual window, token t at row t - n_enc of every window stream
 * (vq_cache_wstream): res holds stream w as [Hkv][res_cap][row_bytes_w] at
 * byte offset off_w. VQ_WINDOW_F16: "k", "v" f16 [D] (so res is
 * [2][Hkv][res_cap][D] f16, keys then values: what cache_cuda.c reads);
 * VQ_WINDOW_TURBO8: "k_idx" u8 [D], "k_scale" f32, "v_idx" u8 [D],
 * "v_scale" f32; VQ_WINDOW_TURBO: "k_idx", "v_idx" u32 [ceil(D*bits/32)]
 * bit-packed, then "k_scale", "v_scale" f16 (cache_window.c).
 *
 * On a CUDA ctx every chunk, residual window and device table is device
 * memory (cudaMalloc); the host keeps the page tables and all counters, and
 * the sinks and transform tables with a device copy of each. */
#ifndef VQ_CACHE_INTERNAL_H
#define VQ_CACHE_INTERNAL_H

#include "attention/attn_skeleton.h"
#include "cache/cache_formats.h"
#include "core/core.h"

#define VQ_CACHE_MAX_STREAMS 8
#define VQ_CACHE_MAX_TABLES 6

/* What a stream's bytes are, for the memory report. */
typedef enum vq_cache_part { VQ_CACHE_PART_CODE = 0, VQ_CACHE_PART_PARAM = 1 } vq_cache_part;

typedef struct vq_cache_stream {
    const char *name;   /* "k_codes", "k_scale", ..., for messages and persistence */
    vq_dtype dtype;     /* element type */
    int64_t rows;       /* rows per head per page: P, or P / g */
    int64_t last;       /* elements per row (1 for a per-token scalar) */
    int ndim;           /* rank of the chunk view: 4 [N,Hkv,rows,last], 3 [N,Hkv,rows] (last = 1),
                           2 [N,rows] (shared by the heads, last = 1) */
    bool per_head;      /* ndim > 2 */
    bool is_key;        /* key or value stream (accounting) */
    vq_cache_part part; /* codes or parameters (accounting) */
    int64_t page_bytes; /* bytes per page: (per_head ? Hkv : 1) * rows * last * size, a multiple of 16 */
    int64_t page_off;   /* sum of page_bytes of the streams before it */
} vq_cache_stream;

/* A table owned by a layer: f32 (or i32) host array, mirrored on the device
 * on a CUDA ctx. Shape as the codec expects it. */
typedef struct vq_cache_table {
    const char *name;
    int ndim;
    int64_t shape[4];
    float *host;        /* numel floats */
    void *dev;          /* CUDA: device copy; CPU: == host */
} vq_cache_table;

/* Indices into vq_cache_layer.tables. */
enum {
    VQ_CT_KDIAG = 0,   /* [D] ±1: TURBO / RVQ / RABITQ keys */
    VQ_CT_QJL_PROJ,    /* [m, D] QJL projection */
    VQ_CT_CODEBOOK,    /* VECINFER [M,C,D/M] or [Hkv,M,C,D/M]; CommVQ [R,C,D] */
    VQ_CT_SMOOTH,      /* VECINFER [D] or [Hkv,D] */
    VQ_CT_COS, VQ_CT_SIN, /* CommVQ [Pmax, D/2] */
    VQ_CT_VDIAG,       /* [D] ±1: TURBO values */
    VQ_CT_VCENTS,      /* [n <= 16] CODEBOOK value centroids */
    VQ_CT_COUNT
};

typedef struct vq_cache_chunk {
    unsigned char *base; /* n_pages * layer page bytes; host or device */
    int64_t first_page;  /* global page index of its page 0 */
    int64_t n_pages;
} vq_cache_chunk;

/* Cached attention bindings of one chunk (CPU): valid while (scale, Sq,
 * key_scores, value_accum) equal what they were bound for. Descriptors
 * point into the struct itself, so moving one (growing the array)
 * invalidates it. */
typedef struct vq_cache_binding {
    bool valid;
    float scale;
    int64_t Sq;
    vq_key_scores ks;
    vq_value_accum va;
    vq_attn_keys keys;
    vq_attn_values values;
    vq_attn_keys inner;               /* RaBitQ Hamming: the wrapped binding */
    vq_cache_hamming_keys hamming;
} vq_cache_binding;

/* One stream of a residual window (see the head of this file). */
typedef struct vq_cache_wstream {
    const char *name;
    vq_dtype dtype;
    int64_t last;       /* elements per token and head */
    int64_t row_bytes;  /* last * element size */
    int64_t off;        /* byte offset in the window: Hkv * res_cap * (row_bytes of the streams before) */
    bool is_key;
} vq_cache_wstream;

#define VQ_CACHE_MAX_WSTREAMS 4

typedef struct vq_cache_layer {
    vq_cache_layer_config cfg;  /* resolved; tensor pointers NULL (tables below) */
    int64_t g;                  /* key group: KIVI group_size, else 1 */
    int64_t res_cap;            /* residual window capacity in tokens: R + g - 1, 0 for CommVQ and
                                   when R = 0 and g = 1 */
    int n_wstreams;             /* window streams (0 when res_cap == 0) */
    vq_cache_wstream wstreams[VQ_CACHE_MAX_WSTREAMS];
    int64_t win_token_bytes;    /* bytes of one window token of one head, keys and values */
    int n_streams;
    vq_cache_stream streams[VQ_CACHE_MAX_STREAMS];
    int64_t page_bytes;         /* all streams of one page */
    /* Pool layout of a chunk of N pages: stream by stream (page_off), each
     * stream [Hkv][N][rows][last] when head_major (host pools: a run of
     * consecutive pages of one head is contiguous, so the attention streams
     * it as one segment, as the raw kernel streams a contiguous [B,Hkv,S,..]
     * tensor), else [N][Hkv][rows][last] (device pools: cache_cuda.c gathers
     * whole pages). Streams shared by the heads are [N][rows] either way. */
    bool head_major;
    int64_t sliding;            /* sliding window W in tokens, 0 = full attention (veloxquant.h) */
    vq_cache_table tables[VQ_CT_COUNT];  /* host == NULL: not used by this layer */
    /* pool */
    vq_cache_chunk *chunks;
    int n_chunks, cap_chunks;
    int64_t n_pages;            /* pages in all chunks */
    int32_t *refcount;          /* [n_pages]: sequences whose page table holds the page; 0 = free */
    int32_t *free_list;         /* [n_pages] stack of free pages, n_free on top */
    int64_t n_free;
    vq_cache_binding *bindings; /* [n_chunks] (CPU) */
    /* exact transforms (cache_recipe.c): switches, and the tables a
     * sequence starts from, [3][Hkv * D] key mean, value mean, key scale
     * (0, 0, 1 where not given); NULL when every switch is off */
    vq_cache_transforms xf;     /* table pointers NULL */
    bool xf_given[3];
    float *xf_tables;
} vq_cache_layer;

/* Indices of the three transform tables. */
enum { VQ_XF_KEY_MEAN = 0, VQ_XF_VALUE_MEAN = 1, VQ_XF_KEY_SCALE = 2 };

typedef struct vq_cache_seq_layer {
    int64_t n;          /* tokens */
    int64_t n_enc;      /* tokens in pages, a multiple of g; n - n_enc <= res_cap */
    int64_t p0;         /* pages evicted by the sliding window: tokens [0, p0 * P) are gone, and
                           pages[i] holds the sequence's page p0 + i (tokens from (p0 + i) * P) */
    int64_t n_pages;    /* ceil(n_enc / P) - p0 entries of pages[] in use */
    int64_t cap_pages;  /* entries allocated */
    int32_t *pages;     /* page table */
    void *res;          /* the window streams, Hkv * res_cap * win_token_bytes; NULL when res_cap == 0 */
    /* Sink tokens (cache_recipe.c): the sequence's first n_sink <= S tokens,
     * [2][Hkv][S][D] f16 host (keys then values, transformed), NULL when
     * S = 0. n and n_enc above count the tokens after them. */
    int64_t n_sink;
    uint16_t *sink;
    /* the layer's transform tables for this sequence, [3][Hkv * D] (as
     * vq_cache_layer.xf_tables), valid when xf_set; NULL without transforms */
    float *xf;
    bool xf_set;
    /* CUDA: device copies of sink and xf (same layouts), which the device
     * attention and append read; the host arrays above stay what fork,
     * truncate and persistence read and write. dev_stale: the copies may
     * differ from the host arrays (a fresh, forked or loaded sequence, a
     * commit of sinks or fitted tables); the next CUDA append or attend
     * uploads them (vq_cache_recipe_sync_cuda). */
    void *sink_dev;
    float *xf_dev;
    bool dev_stale;
} vq_cache_seq_layer;

typedef struct vq_cache_seq {
    int64_t id;         /* -1: free slot */
    vq_cache_seq_layer *layers;  /* [n_layers] */
} vq_cache_seq;

/* Host or device scratch grown on demand and kept (staging of appends). */
typedef struct vq_cache_buf {
    void *p;
    size_t size;
} vq_cache_buf;

/* Device copies batched into one launch (CUDA; cache_alloc.c,
 * src/cuda/cuda_copies.c). A decode step's appends and window decodes are
 * a few small copies per sequence; as one API call each they were most of
 * the step's host time. */
enum { VQ_CACHE_COPIES_MAX = 256 }; /* queued copies at most (a decode step queues at most 4 a sequence) */
typedef struct vq_cache_copies {
    void *jobs;       /* host: the queued copies (vq_cu_copy_job[VQ_CACHE_COPIES_MAX]) */
    int n;
    int64_t max_height;
    int open;         /* vq_cache_copies_begin calls not yet ended */
    vq_cache_buf dev; /* device: the jobs of a flush */
} vq_cache_copies;

struct vq_cache {
    vq_ctx *ctx;
    bool cuda;
    int L, Hkv, Hq, D;
    int64_t P;
    int64_t capacity_pages, grow_pages;
    int max_seqs;
    int R;
    int S;                   /* sink tokens per sequence (cache_recipe.c) */
    vq_cache_buf recipe;     /* host staging of the sinks and transforms, kept */
    vq_cache_buf recipe_dev; /* CUDA: device staging of the sinks and transforms, kept */
    vq_cache_buf wdec;       /* CUDA: the TurboQuant windows decoded to f16 for an attend, kept */
    vq_cache_window window;  /* storage of the residual windows */
    int window_bits;         /* VQ_WINDOW_TURBO's code bits; 0 otherwise */
    int64_t next_id;
    vq_cache_layer *layers;  /* [L] */
    vq_cache_seq *seqs;      /* [max_seqs] slots */
    int n_live;
    vq_cache_buf stage;      /* append staging, on the cache's device */
    vq_cache_buf host[2];    /* per-call host scratch, kept: [0] plans / segment lists, [1] the
                                sequence list of an attend */
    struct vq_cache_cuda_pages *cuda_pages; /* CUDA: [L] device page tables (cache_cuda.c), made on first use */
    vq_cache_copies copies;  /* CUDA: the open batch of device copies */
};

/* ---- cache_profile.c ---- */

struct vq_profile {
    vq_profile_config cfg;          /* layers, sliding_windows and transforms point at the arrays below */
    vq_cache_layer_config *layers;  /* [n_layers], table pointers NULL */
    int *sliding;                   /* [n_layers] */
    vq_cache_transforms *xf;        /* [n_layers]; tables point at xf_tensors or are NULL */
    DLTensor *xf_tensors;           /* [n_layers][3] over xf_data */
    float *xf_data;                 /* [n_layers][3][Hkv * D]: the tables given (others unused) */
    int64_t xf_shape[2];            /* [Hkv, D] */
    bool states_recipe;             /* false for a version 1 file: sink_tokens and transforms are the cache's */
};

/* Validates a profile's contents as vq_profile_create documents (messages
 * name "cfg->..."). */
vq_status vq_profile_check(vq_ctx *ctx, const vq_profile_config *cfg);

/* ---- cache.c ---- */

/* The sizes and cache-wide fields of a config (not its layers), as
 * vq_cache_create checks them. */
vq_status vq_cache_check_sizes(vq_ctx *ctx, const vq_cache_config *cfg);

/* ---- cache_presets.c ---- */

/* The preset called name (NULL if none); fills *out (when not NULL) as
 * vq_cache_preset_layer_config does. */
const vq_cache_preset_info *vq_cache_preset_find(const char *name, vq_cache_layer_config *out, int head_dim);
/* "f16, kivi2, ..." into buf. */
void vq_cache_preset_names(char *buf, size_t cap);
/* *out = *cfg with what the preset cfg->preset names sets beside its
 * methods (a preset named by what it buys: sink, transforms, residual
 * window) in the fields cfg leaves 0 / NULL (header, "Presets"); *xf
 * receives the transforms array it allocated (free it after create), or
 * NULL. Only with cfg->layers NULL; otherwise *out = *cfg. */
vq_status vq_cache_preset_apply(vq_ctx *ctx, const vq_cache_config *cfg, vq_cache_config *out,
                                vq_cache_transforms **xf);

/* ---- cache_layout.c: methods -> streams and tables ---- */

/* Validates layer config `lc` (named `name` in messages) for the cache's
 * sizes and fills L's cfg, g, res_cap and streams (no memory yet). */
vq_status vq_cache_layout_layer(vq_cache *c, const vq_cache_layer_config *lc, const char *name, vq_cache_layer *L);
/* Builds L's tables (host, then device copies) from the user's config. */
vq_status vq_cache_build_tables(vq_cache *c, const vq_cache_layer_config *user, const char *name, int l,
                                vq_cache_layer *L);
void vq_cache_free_tables(vq_cache *c, vq_cache_layer *L);

/* ---- cache_alloc.c: memory on the cache's device ---- */

void *vq_cache_mem_alloc(vq_cache *c, size_t bytes);          /* NULL on failure (message set) */
/* A pool chunk: vq_cache_mem_alloc, on huge pages where the host allows (cache_alloc.c). */
void *vq_cache_mem_alloc_pool(vq_cache *c, size_t bytes);
void vq_cache_mem_free(vq_cache *c, void *p);
/* height rows of width bytes, from src (pitch spitch) to dst (pitch dpitch), both on the device.
 * Inside a batch on a CUDA cache the copy is queued (below). */
vq_status vq_cache_mem_copy2d(vq_cache *c, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                              size_t height);
/* A batch of device copies: between begin and end, vq_cache_mem_copy2d
 * queues its copy, and end runs the queue as one launch. The result is that
 * of the copies in their order: a copy that reads or writes bytes a queued
 * one writes, or writes bytes one reads, runs the queue first. Code that
 * launches a kernel reading or writing those bytes, or frees memory, inside
 * a batch flushes it first (vq_cache_copies_flush; the cache's own frees and
 * staging growth do). Batches nest; on a CPU cache copies run at once.
 * end returns st when it is an error (the queue still runs), else the
 * flush's status. */
void vq_cache_copies_begin(vq_cache *c);
vq_status vq_cache_copies_flush(vq_cache *c);
vq_status vq_cache_copies_end(vq_cache *c, vq_status st);
vq_status vq_cache_mem_upload(vq_cache *c, void *dst, const void *src, size_t bytes);
vq_status vq_cache_mem_zero(vq_cache *c, void *dst, size_t bytes);
/* A staging area of >= bytes on the device (host on CPU), kept. NULL on failure. */
void *vq_cache_stage(vq_cache *c, size_t bytes);
/* The same over buffer b (another staging area of the cache, for callers
 * whose staging must outlive calls that use c->stage). */
void *vq_cache_stage_buf(vq_cache *c, vq_cache_buf *b, size_t bytes);
/* Host scratch buffer `which` (0 or 1) of >= bytes, kept (never device
 * memory). Growing it moves it. NULL on failure. */
void *vq_cache_host_scratch(vq_cache *c, int which, size_t bytes);

/* ---- cache_pool.c ---- */

/* The chunk index of `page` and the page's index in that chunk. */
int vq_cache_chunk_index(const vq_cache_layer *L, int64_t page, int64_t *idx);
/* Address of stream s of page `page` of layer L (row 0, head 0); head h's
 * rows follow at h * vq_cache_head_pitch(L, page, s) bytes from there. */
unsigned char *vq_cache_page_stream(const vq_cache_layer *L, int64_t page, int s);
/* Bytes from one head's rows of a page to the next head's (rows * row bytes
 * unless head_major). */
int64_t vq_cache_head_pitch(const vq_cache_layer *L, int64_t page, int s);
/* Makes sure n more pages can be taken (grows the pool if allowed). */
vq_status vq_cache_pool_reserve(vq_cache *c, int l, int64_t n);
int32_t vq_cache_pool_take(vq_cache_layer *L);        /* after reserve; refcount 1 */
void vq_cache_pool_release(vq_cache_layer *L, int32_t page);
/* Copies every stream of page src to page dst (copy-on-write). */
vq_status vq_cache_pool_copy_page(vq_cache *c, int l, int32_t dst, int32_t src);

/* ---- cache_window.c: the residual window's streams ---- */

/* Fills L's window streams for c->window (after res_cap is known). */
void vq_cache_window_layout(const vq_cache *c, vq_cache_layer *L);
/* Bytes of one sequence's window of layer L. */
size_t vq_cache_window_bytes(const vq_cache *c, const vq_cache_layer *L);
/* Rows [src_row, src_row + count) of every window stream of a block in the
 * window layout with capacity src_cap rows (a window: res_cap; a staging
 * block: its own) -> rows [dst_row, ..) of a block of capacity dst_cap. */
vq_status vq_cache_window_copy(vq_cache *c, const vq_cache_layer *L, unsigned char *dst, int64_t dst_cap,
                               int64_t dst_row, const unsigned char *src, int64_t src_cap, int64_t src_row,
                               int64_t count);
/* Bytes of one window token of one head, keys and values (the streams
 * vq_cache_window_layout gives): f16, 8-bit codes + f32 scales, or
 * packed codes + f16 scales. */
static inline int64_t vq_cache_window_token_bytes(vq_cache_window w, int bits, int64_t D)
{
    if (w == VQ_WINDOW_TURBO8) return 2 * (D + 4);
    if (w == VQ_WINDOW_TURBO) return 2 * (4 * ((D * bits + 31) / 32) + 2);
    return 4 * D;
}

/* f32 -> f16 of n host scales (the f16-scale formats encode with the
 * public f32 codecs and round after; on a CUDA ctx vq_cache_round_scales
 * does it on the device). */
static inline void vq_cache_scales_to_f16(const float *from, uint16_t *to, int64_t n)
{
    for (int64_t i = 0; i < n; i++) to[i] = vq_f32_to_f16(from[i]);
}

/* True for the TurboQuant windows (VQ_WINDOW_TURBO8, VQ_WINDOW_TURBO). */
static inline bool vq_cache_coded_window(const vq_cache *c) { return c->window != VQ_WINDOW_F16; }
/* The window streams of a TurboQuant window's codes and scales of half
 * 0 (keys) or 1 (values): TURBO8 k_idx, k_scale, v_idx, v_scale; TURBO
 * k_idx, v_idx, k_scale, v_scale (the u32 streams first, so that each
 * stream of a block is aligned). */
int vq_cache_window_idx_stream(const vq_cache *c, int half);
int vq_cache_window_scale_stream(const vq_cache *c, int half);
/* Scratch bytes the window codec needs for N rows (0 for TURBO8). */
size_t vq_cache_window_scratch(const vq_cache *c, int64_t N);
/* A TurboQuant window: x [2][Hkv][N][D] f16 (keys then values) -> the
 * window layout of capacity N at w (all N rows); scratch of
 * vq_cache_window_scratch(c, N) bytes, 4-byte aligned. */
vq_status vq_cache_window_encode(vq_cache *c, const vq_cache_layer *L, const uint16_t *x, int64_t N, unsigned char *w,
                                 unsigned char *scratch);
/* A TurboQuant window: all N rows of a window-layout block of capacity N ->
 * f16 keys and values ek, ev [Hkv][N][D] (decoded, rounded to f16). */
vq_status vq_cache_window_decode(vq_cache *c, const vq_cache_layer *L, const unsigned char *w, int64_t N,
                                 uint16_t *ek, uint16_t *ev, unsigned char *scratch);

/* ---- cache_recipe.c: sink tokens and exact transforms ---- */

/* True when layer l stores sinks or transforms (its appends and attends
 * go through cache_recipe.c). */
static inline bool vq_cache_recipe_on(const vq_cache *c, int l)
{
    return c->S > 0 || c->layers[l].xf_tables != NULL;
}
/* Validates cfg->sink_tokens and cfg->transforms and fills c->S and every
 * layer's xf (create). */
vq_status vq_cache_recipe_config(vq_cache *c, const vq_cache_config *cfg);
/* Checks a sink count and transforms[L] (NULL: none) for a cache or
 * profile of Hkv x D, as vq_cache_create documents them (not what depends
 * on the layers' methods or the device); messages name "cfg->sink_tokens"
 * and "cfg->transforms[l]...". */
vq_status vq_cache_recipe_check(vq_ctx *ctx, int sink, const vq_cache_transforms *transforms, int L, int Hkv, int D);
/* A sequence layer's sink and transform buffers (seq add; tables copied
 * from the layer's, xf_set when none is to be fitted); false on OOM. */
bool vq_cache_recipe_seq_alloc(const vq_cache *c, int l, vq_cache_seq_layer *sl);
/* Frees what vq_cache_recipe_seq_alloc allocated. */
void vq_cache_recipe_seq_free(vq_cache *c, vq_cache_seq_layer *sl);
/* Back to the tables a new sequence has (truncate to 0 tokens). */
void vq_cache_recipe_forget_tables(const vq_cache *c, int l, vq_cache_seq_layer *sl);
/* Bytes of a sequence layer's sink buffer, and of its tables. */
size_t vq_cache_sink_bytes(const vq_cache *c);
size_t vq_cache_xf_bytes(const vq_cache *c, int l);
/* The append and attend of a layer with sinks or transforms (after the
 * public entry point's VQ_ENTER and argument checks of layer and ids). */
vq_status vq_cache_recipe_append(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                                 const DLTensor *v, const DLTensor *positions);
vq_status vq_cache_recipe_attend(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                 DLTensor *out, const vq_cache_attend_opts *opts);
/* The page path of a recipe attend over one group of n_g sequences (ids)
 * with Si rows each past their sinks: staged f32 queries gq [n_g,Hq,Si,D]
 * (the cache's memory) -> out go and lse gl, causal where opts is and Si > 1
 * (shared by both backends' recipe attends). */
vq_status vq_cache_recipe_pages(vq_cache *c, int layer, int n_g, const int64_t *ids, float *gq, float *go, float *gl,
                                int64_t Si, const vq_cache_attend_opts *opts);
/* The sequences of a recipe attend, both backends: sls[i] the layer of
 * seq_ids[i] (repeats allowed), ns[i] its leading rows that sit at sink
 * positions and see no page or window token (Sq when it has no token past
 * its sinks; 0 unless causal), done[i] = 0. */
vq_status vq_cache_recipe_rows(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, int64_t Sq, bool causal,
                               vq_cache_seq_layer **sls, int64_t *ns, int64_t *done);
/* The page and window path of vq_cache_append / vq_cache_attend (no
 * VQ_ENTER: the public entry point has entered the ctx). */
vq_status vq_cache_append_tokens(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *k,
                                 const DLTensor *v, const DLTensor *positions);
vq_status vq_cache_attend_tokens(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids, const DLTensor *q,
                                 DLTensor *out, const vq_cache_attend_opts *opts);
/* The attend's checks of q, out and opts (Sq and the lse view out). */
vq_status vq_cache_attend_check_io(vq_cache *c, int n_seq, const DLTensor *q, const DLTensor *out,
                                   const vq_cache_attend_opts *opts, int64_t *Sq, vq_attn_view *lse);

/* ---- cache_seq.c ---- */

/* Sliding window of layer L: returns to the pool every page of sl whose
 * tokens are all encoded and below token `below` (no-op without a window). */
void vq_cache_evict(vq_cache *c, vq_cache_layer *L, vq_cache_seq_layer *sl, int64_t below);
/* The first token a sliding-window layer has not evicted (p0 * P). */
static inline int64_t vq_cache_first_token(const vq_cache *c, const vq_cache_seq_layer *sl) { return sl->p0 * c->P; }

vq_cache_seq *vq_cache_find_seq(const vq_cache *c, int64_t id);
/* The layer, n_seq and seq_ids arguments of an append (ids not looked up). */
vq_status vq_cache_check_batch(vq_cache *c, int layer, int n_seq, const int64_t *seq_ids);
/* Layer `layer` of sequence ids[i], which must be live and differ from
 * ids[0..i) (an append's ids). */
vq_status vq_cache_seq_layer_of(vq_cache *c, int layer, const int64_t *ids, int i, vq_cache_seq_layer **out);
/* n_enc for n tokens of layer l before truncation: max(0, floor((n - R) / g) * g). */
int64_t vq_cache_target_enc(const vq_cache *c, const vq_cache_layer *L, int64_t n);

/* ---- cache_encode.c ---- */

/* Encodes T tokens (T a multiple of L->g) of k, v [1,Hkv,T,D] f16 compact
 * staging tensors into outs[s] = compact staging views of the layer's
 * streams over T tokens ([1,Hkv,T*rows_s/P,last_s], [1,Hkv,T*rows_s/P] or
 * [T] for shared streams; the values' streams start at outs + n_key_streams).
 * CommVQ positions (its k_pos stream) are filled by the caller. scratch holds
 * vq_cache_encode_scratch bytes. */
vq_status vq_cache_encode(vq_cache *c, vq_cache_layer *L, const DLTensor *k, const DLTensor *v,
                          DLTensor *const *outs, int n_key_streams, unsigned char *scratch, int64_t T);
size_t vq_cache_encode_scratch(const vq_cache *c, const vq_cache_layer *L, int64_t T);

/* ---- method_kivi_mix.c: mixed-width KIVI keys (formats/format_kivi_mix.h) ---- */

/* The attention binding of the method's streams codes, scale, zero and
 * mask (chunk views [B,Hkv,Skv,...] and
 * [B,Hkv,ceil(Skv/g),...], validated) with the softmax scale. */
vq_status vq_cache_bind_kivi_mix(vq_ctx *ctx, const DLTensor *codes, const DLTensor *scale, const DLTensor *zero,
                                 const DLTensor *mask, const vq_key_config *kc, const vq_attn_dims *dims,
                                 float softmax_scale, vq_attn_keys *out);

/* ---- cache_attend.c ---- */

/* The layer's formats over stream tensors sv[] (one per stream, any leading
 * [B, Hkv, Skv] the caller chose) and table tensors tb[VQ_CT_COUNT]. The
 * QJL norm stream holds ||k|| / sqrt(D): multiply the softmax scale by
 * sqrt(D). RaBitQ is described as VQ_KEYS_RABITQ (the exact score). */
void vq_cache_describe(const vq_cache *c, const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb,
                       vq_encoded_keys *ek, vq_encoded_values *ev);
/* Tensors over the layer's (device) tables, shapes held in shapes[]. */
void vq_cache_table_tensors(const vq_cache *c, const vq_cache_layer *L, DLTensor *tb, int64_t (*shapes)[4]);

/* ---- helpers ---- */

/* After a public function called inside a cache entry point failed with s:
 * the message becomes "<fn>: <its message>" (so it names the cache call
 * first) and s is returned. */
vq_status vq_cache_forward(vq_ctx *ctx, vq_status s, const char *fn);

/* A tensor header over device/host memory p (compact, the cache's device). */
void vq_cache_view(const vq_cache *c, DLTensor *t, int64_t *shape, int ndim, vq_dtype dt, void *p);

#endif /* VQ_CACHE_INTERNAL_H */
