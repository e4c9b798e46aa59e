/* cache_method.h — a cache method (how a layer stores its keys, or its
 * values) as one descriptor: the validation of its config and its page
 * streams, its tables, its encoder, and the attention format its streams are
 * read as. Each method is one file (src/cache/method_*.c) and one line of the
 * registry (cache_methods.c); the rest of the cache reads methods only
 * through this table. Adding a key method (docs/INTERNALS.md, "Adding a
 * format"): its layout header in src/formats/, its CPU attention operations
 * (src/attention/attn_keys_*.c and the ISA kernels they call), its CUDA
 * policy (src/cuda/), its cache method file, and one registry line. */
#ifndef VQ_CACHE_METHOD_H
#define VQ_CACHE_METHOD_H

#include "cache/cache_internal.h"

typedef struct vq_cache_method {
    const char *name;   /* as messages spell it: "KIVI", "TURBO_RVQ" */
    int id;             /* its vq_key_method or vq_value_method */
    /* Tokens may wait in the residual window. False for the key methods
     * whose tokens are all encoded at once (see the header, section 5). */
    bool window;
    /* Validates the method's part of L->cfg (defaults written in place),
     * sets L->g (keys) and adds the method's streams to L. `name` is the
     * layer's argument name for messages ("cfg->layers[3]"). */
    vq_status (*layout)(vq_cache *c, vq_cache_layer *L, const char *name);
    /* Fills the method's tables of L from the user's config (the tensors of
     * the config, before they were dropped from L->cfg); layer l draws its
     * random tables from seed + l. NULL: no tables. */
    vq_status (*tables)(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l);
    /* Scratch bytes the encoder needs for T tokens (NULL: none). */
    size_t (*scratch)(const vq_cache *c, const vq_cache_layer *L, int64_t T);
    /* Encodes x [1,Hkv,T,D] f16 into staging views of the method's streams,
     * outs[0..] in the order layout added them. On a CUDA cache the views
     * are device memory; a key method whose bytes no public codec writes has
     * its device encoder in its CUDA key format instead (cache_cuda.h). */
    vq_status (*encode)(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T);
    /* The attention format of the method's streams sv[0..] and the layer's
     * tables tb[VQ_CT_COUNT]: keys fill *ek, values *ev (the other NULL).
     * A key method without a public format (KIVI_MIX) leaves ek->format 0
     * and binds itself in cache_attend.c (on CUDA, cuda_cache.c passes its
     * streams as the backend's vq_cuda_kivi_mix_keys). */
    void (*describe)(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev);
} vq_cache_method;

/* The registry (cache_methods.c): the method of a config, NULL when the id
 * is not one. */
const vq_cache_method *vq_cache_key_method(vq_key_method m);
const vq_cache_method *vq_cache_value_method(vq_value_method m);

/* The methods (one file each; only the registry names them). */
extern const vq_cache_method vq_cache_keys_f16, vq_cache_keys_kivi, vq_cache_keys_kivi_mix, vq_cache_keys_turbo,
    vq_cache_keys_turbo_rvq, vq_cache_keys_rabitq, vq_cache_keys_qjl, vq_cache_keys_vecinfer,
    vq_cache_keys_commvq;
extern const vq_cache_method vq_cache_values_f16, vq_cache_values_kivi, vq_cache_values_codebook,
    vq_cache_values_turbo;

/* ---- what the method files share (cache_layout.c, cache_encode.c) ---- */

/* Adds a stream of [rows][last] dt per page (ndim 4: per head; 3: one element
 * per head and row; 2: shared by the heads). */
void vq_cache_add_stream(vq_cache *c, vq_cache_layer *L, const char *name, vq_dtype dt, int64_t rows,
                         int64_t last, int ndim, bool is_key, vq_cache_part part);
/* Codes of `bits` per element over D elements: u8 one per byte at 8 bits,
 * else u32 words (vq_bit_pack). */
void vq_cache_add_turbo_codes(vq_cache *c, vq_cache_layer *L, const char *name, int bits, bool is_key);
/* Checks a host table argument '<layer>.<field>': f32, compact, finite, rank
 * in [lo, hi]. */
vq_status vq_cache_check_table(vq_ctx *ctx, const DLTensor *t, const char *layer, const char *field, int lo,
                               int hi);
/* A table of L: allocated with the shape given, or a copy of src. */
vq_status vq_cache_new_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, int ndim,
                             const int64_t *shape);
vq_status vq_cache_copy_table(vq_cache *c, vq_cache_layer *L, int id, const char *name, const DLTensor *src);
/* The seed of layer l's random tables (0 = the cache's fixed default). */
uint64_t vq_cache_layer_seed(uint64_t seed, int l);
/* A table of L as a tensor on the cache's device. */
void vq_cache_table_view(const vq_cache *c, const vq_cache_layer *L, int id, DLTensor *t, int64_t *shape);
/* idx u8 [1,Hkv,T,D] -> out: bit-packed u32 words, or nothing at 8 bits
 * (the codec wrote out directly). */
vq_status vq_cache_pack_codes(vq_cache *c, DLTensor *idx, int bits, DLTensor *out);
/* The RMS of every row, s = ||x||_2 / sqrt(D) (x f16 [rows][D]), and when
 * xn is not NULL xn = x / s (0 where s = 0). Host. */
void vq_cache_row_rms(const uint16_t *x, int64_t rows, int64_t D, float *s, float *xn);
/* The same on the cache's device (x, s and xn device memory on a CUDA ctx,
 * the bytes the host writes), and vq_cache_scales_to_f16 likewise: what the
 * method encoders call. */
vq_status vq_cache_rms_rows(vq_cache *c, const uint16_t *x, int64_t rows, float *s, float *xn);
vq_status vq_cache_round_scales(vq_cache *c, const float *from, uint16_t *to, int64_t n);
static inline bool vq_cache_in_range(int v, int lo, int hi) { return v >= lo && v <= hi; }

#endif
