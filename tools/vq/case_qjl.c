/* case_qjl.c — QJL: m = 2D Gaussian projections of each key kept as sign
 * bits (u32 words) plus the key's f32 norm; q.k is estimated by the
 * asymmetric unbiased estimator (vq_qjl_score), there is no key decoder. */
#include <math.h>
#include <string.h>

#include "cases.h"
#include "tool.h"

static int64_t sketch_dim(const case_input *in) { return 2 * case_d(in); }

/* shared: projection [m, D]; cache: bits [1,H,S,m/32] u32, norm [1,H,S] f32.
 * The norms are a plain loop over x done here, so that encode times the
 * library's sketch alone. */
static void qjl_setup(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    const int64_t h = case_h(in), s = case_s(in), d = case_d(in), m = sketch_dim(in);
    c->shared[0] = tool_tensor(TOOL_F32, TOOL_DIMS(m, d));
    tool_check(ctx, vq_qjl_projection(in->seed ^ 0x716a, m, d, tool_f32(c->shared[0])), "vq_qjl_projection");
    c->cache[0] = tool_tensor(TOOL_U32, TOOL_DIMS(1, h, s, (m + 31) / 32));
    c->cache[1] = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    const float *x = tool_f32(in->x);
    for (int64_t r = 0; r < h * s; r++) {
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)x[r * d + j] * x[r * d + j];
        tool_f32(c->cache[1])[r] = (float)sqrt(ss);
    }
}

static vq_status qjl_encode(codec_case *c, vq_ctx *ctx, const case_input *in)
{
    return vq_qjl_encode(ctx, in->x, c->shared[0], c->cache[0]);
}

/* One vq_qjl_score call per query index: query [1,H,D] against [1,H,S]. */
static vq_status qjl_scores(codec_case *c, vq_ctx *ctx, const DLTensor *queries, DLTensor *out)
{
    const int64_t h = queries->shape[1], nq = queries->shape[2], d = queries->shape[3];
    const int64_t s = c->cache[1]->shape[2];
    DLTensor *q1 = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, d));
    DLTensor *s1 = tool_tensor(TOOL_F32, TOOL_DIMS(1, h, s));
    vq_status st = VQ_OK;
    for (int64_t i = 0; i < nq && st == VQ_OK; i++) {
        for (int64_t hh = 0; hh < h; hh++)
            memcpy(tool_f32(q1) + hh * d, tool_f32(queries) + (hh * nq + i) * d, (size_t)d * sizeof(float));
        st = vq_qjl_score(ctx, q1, c->shared[0], c->cache[0], c->cache[1], s1);
        for (int64_t hh = 0; hh < h && st == VQ_OK; hh++)
            memcpy(tool_f32(out) + (hh * nq + i) * s, tool_f32(s1) + hh * s, (size_t)s * sizeof(float));
    }
    tool_tensor_free(q1);
    tool_tensor_free(s1);
    return st;
}

static void qjl_bind(const codec_case *c, const case_input *in, vq_encoded_keys *out)
{
    *out = (vq_encoded_keys){.format = VQ_KEYS_QJL,
                             .qjl = {.bits = c->cache[0], .norm = c->cache[1], .projection = c->shared[0]}};
}

const codec_case CASE_QJL = {.name = "QJL m=2D", .detail = "2D sign bits of S k, f32 norm",
                             .roles = CASE_KEYS, .setup = qjl_setup, .encode = qjl_encode,
                             .scores = qjl_scores, .encode_in_library = 1, .bind = qjl_bind};
