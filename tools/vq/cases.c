/* cases.c — the case table, its bookkeeping, and the synthetic caches the
 * cases run on (see cases.h). */
#include "cases.h"

#include <math.h>
#include <stdlib.h>

#include "tool.h"

static const codec_case *const templates[] = {
    &CASE_F16_KEYS,     &CASE_F16_VALUES,     &CASE_KIVI2_KEYS,      &CASE_KIVI4_KEYS,
    &CASE_KIVI2_VALUES, &CASE_KIVI4_VALUES,   &CASE_TURBO2,          &CASE_TURBO3,
    &CASE_TURBO4,       &CASE_TURBO2_NC,      &CASE_RVQ22,           &CASE_RABITQ_L1,
    &CASE_RABITQ_UNBIASED, &CASE_CODEBOOK4_VALUES, &CASE_QJL,        &CASE_VECINFER,
    &CASE_COMMVQ,
};

int case_count(void) { return (int)(sizeof templates / sizeof templates[0]); }

const codec_case *case_template(int i) { return templates[i]; }

static void free_list(DLTensor **list)
{
    for (int i = 0; i < CASE_MAX_TENSORS; i++) {
        tool_tensor_free(list[i]);
        list[i] = NULL;
    }
}

void case_release(codec_case *c)
{
    free_list(c->cache);
    free_list(c->work);
    free_list(c->shared);
    tool_tensor_free(c->x_hat);
    c->x_hat = NULL;
}

static size_t list_bytes(DLTensor *const *list)
{
    size_t n = 0;
    for (int i = 0; i < CASE_MAX_TENSORS && list[i] != NULL; i++) n += tool_bytes(list[i]);
    return n;
}

double case_bits(const codec_case *c, const DLTensor *x)
{
    return 8.0 * (double)list_bytes(c->cache) / (double)tool_numel(x);
}

size_t case_shared_bytes(const codec_case *c) { return list_bytes(c->shared); }

/* ---- synthetic caches ---- */

/* Outlier channels sit in the slowly rotating half of the RoPE pairs, as
 * in real models; each has a large mean (alternating sign) and spread. */
static int is_outlier(int c, int dim, int outliers)
{
    for (int o = 0; o < outliers; o++) {
        const int ch = (o % 2 ? dim - 1 : dim / 2 - 1) - 3 * (o / 2);
        if (ch == c) return o % 4 < 2 ? 1 : -1;
    }
    return 0;
}

/* row [dim] = one key before RoPE (keys) or one value. */
static void draw_row(float *row, int dim, int outliers, int keys, vq_rng *rng)
{
    for (int c = 0; c < dim; c++) {
        const double z = vq_rng_normal(rng);
        const int o = keys ? is_outlier(c, dim, outliers) : 0;
        row[c] = (float)(o ? 10.0 * o + 4.0 * z : z);
    }
}

/* RoPE, half layout (pairs (i, i + dim/2)), at table row `pos`. */
static void rope_row(const float *in, float *out, int dim, const float *cos_row, const float *sin_row)
{
    const int h = dim / 2;
    for (int i = 0; i < h; i++) {
        const float a = in[i], b = in[i + h];
        out[i] = a * cos_row[i] - b * sin_row[i];
        out[i + h] = a * sin_row[i] + b * cos_row[i];
    }
}

case_input *case_input_new(int heads, int seq, int dim, int outliers, int n_calib, int keys, uint64_t seed)
{
    case_input *in = tool_calloc(1, sizeof *in);
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    const int half = dim / 2;
    DLTensor *cos_t = tool_tensor(TOOL_F32, TOOL_DIMS(seq, half));
    DLTensor *sin_t = tool_tensor(TOOL_F32, TOOL_DIMS(seq, half));
    DLTensor *pos_t = tool_tensor(TOOL_I32, TOOL_DIMS(seq));
    for (int t = 0; t < seq; t++) {
        ((int32_t *)pos_t->data)[t] = t;
        for (int i = 0; i < half; i++) {
            const double angle = t * pow(10000.0, -2.0 * i / dim);
            tool_f32(cos_t)[(int64_t)t * half + i] = (float)cos(angle);
            tool_f32(sin_t)[(int64_t)t * half + i] = (float)sin(angle);
        }
    }
    DLTensor *x = tool_tensor(TOOL_F32, TOOL_DIMS(1, heads, seq, dim));
    DLTensor *x_pre = keys ? tool_tensor(TOOL_F32, TOOL_DIMS(1, heads, seq, dim)) : NULL;
    for (int64_t r = 0; r < (int64_t)heads * seq; r++) {
        float *row = tool_f32(x) + r * dim;
        if (!keys) {
            draw_row(row, dim, outliers, 0, &rng);
            continue;
        }
        const int t = (int)(r % seq);
        float *pre = tool_f32(x_pre) + r * dim;
        draw_row(pre, dim, outliers, 1, &rng);
        rope_row(pre, row, dim, tool_f32(cos_t) + (int64_t)t * half, tool_f32(sin_t) + (int64_t)t * half);
    }
    DLTensor *calib = tool_tensor(TOOL_F32, TOOL_DIMS(n_calib, dim));
    DLTensor *calib_pre = tool_tensor(TOOL_F32, TOOL_DIMS(n_calib, dim));
    for (int r = 0; r < n_calib; r++) {
        float *pre = tool_f32(calib_pre) + (int64_t)r * dim, *row = tool_f32(calib) + (int64_t)r * dim;
        draw_row(pre, dim, outliers, keys, &rng);
        const int64_t t = (int64_t)(vq_rng_uniform(&rng) * seq);
        if (keys) rope_row(pre, row, dim, tool_f32(cos_t) + t * half, tool_f32(sin_t) + t * half);
        else for (int c = 0; c < dim; c++) row[c] = pre[c];
    }
    *in = (case_input){.x = x, .x_pre = x_pre, .calib = calib, .calib_pre = calib_pre, .rope_cos = cos_t,
                        .rope_sin = sin_t, .positions = pos_t, .seed = seed};
    return in;
}

void case_input_free(case_input *in)
{
    if (in == NULL) return;
    DLTensor *owned[] = {(DLTensor *)in->x, (DLTensor *)in->x_pre, (DLTensor *)in->calib,
                         (DLTensor *)in->calib_pre, (DLTensor *)in->rope_cos, (DLTensor *)in->rope_sin,
                         (DLTensor *)in->positions};
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) tool_tensor_free(owned[i]);
    free(in);
}
