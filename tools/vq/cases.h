/* cases.h — every codec of the library as one uniform "case": set up
 * (allocate, train shared tables; not timed), encode a cache, decode it back.
 * `vq demo` measures accuracy over the cases and `vq bench codecs` times
 * them, so both see exactly the same calls. Public API only. */
#ifndef VQ_TOOL_CASES_H
#define VQ_TOOL_CASES_H

#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"

/* What a case compresses: x [1,H,S,D] f32, plus what some codecs need. */
typedef struct case_input {
    const DLTensor *x;          /* [1,H,S,D] f32: the cache (keys after RoPE, or values) */
    const DLTensor *x_pre;      /* [1,H,S,D] f32: keys before RoPE (CommVQ encodes these) */
    const DLTensor *calib;      /* [N,D] f32 calibration rows drawn like x (not x itself) */
    const DLTensor *calib_pre;  /* [N,D] f32: the same rows before RoPE */
    const DLTensor *rope_cos;   /* [S, D/2] f32, the RoPE table that maps x_pre to x */
    const DLTensor *rope_sin;   /* [S, D/2] f32 */
    const DLTensor *positions;  /* [S] i32, 0..S-1 */
    uint64_t seed;
} case_input;

/* The cache's dims: [1, H, S, D]. */
static inline int64_t case_h(const case_input *in) { return in->x->shape[1]; }
static inline int64_t case_s(const case_input *in) { return in->x->shape[2]; }
static inline int64_t case_d(const case_input *in) { return in->x->shape[3]; }

enum { CASE_KEYS = 1, CASE_VALUES = 2, CASE_MAX_TENSORS = 6 };

typedef struct codec_case codec_case;
struct codec_case {
    const char *name;    /* table row, e.g. "KIVI 2-bit" */
    const char *detail;  /* what the bits are made of, in a few words */
    unsigned roles;      /* CASE_KEYS | CASE_VALUES: the caches it is meant for */
    int bits, variant;   /* parameters read by the case's functions */
    /* Allocates the tensors below and trains shared tables (not timed). */
    void (*setup)(codec_case *c, vq_ctx *ctx, const case_input *in);
    vq_status (*encode)(codec_case *c, vq_ctx *ctx, const case_input *in);
    /* Writes x_hat; NULL when the format has no decoder (QJL). */
    vq_status (*decode)(codec_case *c, vq_ctx *ctx, const case_input *in);
    /* 0 when encode / decode is (partly) a loop in this tool rather than a
     * library call: such an operation is not benchmarked. */
    int encode_in_library, decode_in_library;
    /* Estimates q.k for queries [1,H,Nq,D] f32 into out [1,H,Nq,S] f32;
     * NULL means q . x_hat (computed by the caller). */
    vq_status (*scores)(codec_case *c, vq_ctx *ctx, const DLTensor *queries, DLTensor *out);

    /* Describes the encoded cache to vq_fused_sdpa (key formats only; NULL for
     * value-only cases). The description points at c's and in's tensors. */
    void (*bind)(const codec_case *c, const case_input *in, vq_encoded_keys *out);
    /* The same for value formats (NULL for key-only cases). */
    void (*bind_values)(const codec_case *c, const case_input *in, vq_encoded_values *out);

    /* Owned tensors, filled by setup (NULL-terminated where shorter): */
    DLTensor *cache[CASE_MAX_TENSORS];  /* the compressed cache: what bits/element counts */
    DLTensor *work[CASE_MAX_TENSORS];   /* intermediates (unpacked indices), not stored */
    DLTensor *shared[CASE_MAX_TENSORS]; /* trained or seeded once per layer (codebooks, signs) */
    DLTensor *x_hat;                    /* [1,H,S,D] f32, the decoded cache */
};

/* The case templates, in table order; copy one before setup. */
int case_count(void);
const codec_case *case_template(int i);

/* Frees every tensor of a set-up case (the struct itself is the caller's). */
void case_release(codec_case *c);
/* All-in bits per element of x: 8 * (bytes of c->cache) / numel(x). */
double case_bits(const codec_case *c, const DLTensor *x);
/* Bytes of the shared tables (stated apart: one copy serves every cache of a layer). */
size_t case_shared_bytes(const codec_case *c);

/* Builds a case input of shape [1,H,S,D]: keys (Gaussian with `outliers`
 * large-magnitude channels, RoPE applied) or values (Gaussian), a
 * calibration set of n_calib rows drawn the same way, and RoPE tables.
 * Free with case_input_free. */
case_input *case_input_new(int heads, int seq, int dim, int outliers, int n_calib, int keys, uint64_t seed);
void case_input_free(case_input *in);

/* The templates, defined by the case_*.c files. */
extern const codec_case CASE_F16_KEYS, CASE_F16_VALUES, CASE_KIVI2_KEYS, CASE_KIVI4_KEYS, CASE_KIVI2_VALUES,
    CASE_KIVI4_VALUES, CASE_TURBO2, CASE_TURBO3, CASE_TURBO4, CASE_TURBO2_NC, CASE_RVQ22, CASE_RABITQ_L1,
    CASE_RABITQ_UNBIASED, CASE_CODEBOOK4_VALUES, CASE_QJL, CASE_VECINFER, CASE_COMMVQ;

#endif
