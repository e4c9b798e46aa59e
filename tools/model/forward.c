/* forward.c — the Llama forward pass over a chunk of tokens (llama2.c's
 * forward(), batched): embedding, then per layer
 *   x += Wo attn(rope(Wq rmsnorm(x)), rope(Wk rmsnorm(x)), Wv rmsnorm(x))
 *   x += Wdown (silu(Wgate rmsnorm(x)) * Wup rmsnorm(x))
 * then the final norm and the output matrix for the rows that need logits.
 * RoPE rotates adjacent pairs (2i, 2i+1) of each head: the GGUF layout
 * (llama.cpp's converter permutes Wq/Wk rows so that this equals the Hugging
 * Face rotate-half form on the original weights).
 * Gemma 3 (vqm_config.gemma): the embedding times sqrt(dim); q and k
 * RMS-normed per head before RoPE, which rotates (i, i + D/2) pairs (its
 * GGUF keeps Hugging Face's order); the attention and FFN outputs RMS-normed
 * before their residual adds; GeGLU with the tanh GELU; the sliding-window
 * layers' RoPE base. Its GGUF norm weights already hold Gemma's 1 + w. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"

void vqm_session_free(vqm_session *s)
{
    if (s == NULL) return;
    if (s->attn_free != NULL) s->attn_free(s);
    vqm_pool_free(s->pool);
    free(s->x); free(s->xb); free(s->q); free(s->att); free(s->kb); free(s->vb);
    free(s->h1); free(s->h3); free(s->xsum); free(s->rope_cos); free(s->rope_sin); free(s->inv_freq);
    free(s->rope_cos_l); free(s->rope_sin_l); free(s->inv_freq_l);
    free(s->kc); free(s->vc); free(s->scores);
    free(s);
}

static float *falloc(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

vq_status vqm_session_create(const vqm_model *m, vq_ctx *ctx, const vqm_session_config *cfg, vqm_session **out,
                             char *err)
{
    if (out == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: out is NULL");
    *out = NULL;
    if (m == NULL || ctx == NULL || cfg == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: model, ctx and cfg are required");
    if (cfg->max_tokens < 1 || cfg->max_batch < 1)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: max_tokens %d and max_batch %d must be >= 1",
                    cfg->max_tokens, cfg->max_batch);
    if (cfg->attn != VQM_ATTN_CACHE && cfg->attn != VQM_ATTN_F32)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session: attn is %d, expected VQM_ATTN_CACHE or VQM_ATTN_F32",
                        (int)cfg->attn);
    if (vq_ctx_backend(ctx) != VQ_BACKEND_CPU)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "session: the model runtime computes on the CPU; ctx is not a CPU ctx");
    const vqm_config *c = &m->cfg;
    vqm_session *s = calloc(1, sizeof *s);
    if (s == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "session: out of memory");
    s->m = m;
    s->ctx = ctx;
    s->cfg = *cfg;
    s->seq = -1;
    if (s->cfg.max_batch > s->cfg.max_tokens) s->cfg.max_batch = s->cfg.max_tokens;
    vqm_kernels_init(&s->k, vq_ctx_isa(ctx));
    const size_t B = (size_t)s->cfg.max_batch;
    const size_t qd = (size_t)c->n_heads * c->head_dim, kvd = (size_t)c->n_kv_heads * c->head_dim;
    const size_t widest = (size_t)(c->hidden_dim > c->dim ? c->hidden_dim : c->dim);
    const size_t wq = qd > widest ? qd : widest;
    s->x = falloc(B * c->dim);
    s->xb = falloc(B * c->dim);
    s->q = falloc(B * qd);
    s->att = falloc(B * qd);
    s->kb = falloc(B * kvd);
    s->vb = falloc(B * kvd);
    s->h1 = falloc(B * c->hidden_dim);
    s->h3 = falloc(B * c->hidden_dim);
    s->xsum = falloc(B * wq / 32);
    s->rope_cos = falloc(B * (size_t)c->rope_dim / 2);
    s->rope_sin = falloc(B * (size_t)c->rope_dim / 2);
    s->inv_freq = malloc((size_t)c->rope_dim / 2 * sizeof(double));
    s->rope_cos_l = falloc(B * (size_t)c->rope_dim / 2);
    s->rope_sin_l = falloc(B * (size_t)c->rope_dim / 2);
    s->inv_freq_l = malloc((size_t)c->rope_dim / 2 * sizeof(double));
    vq_status st = vqm_pool_create(ctx, &s->pool);
    if (st == VQ_OK && (!s->x || !s->xb || !s->q || !s->att || !s->kb || !s->vb || !s->h1 || !s->h3 || !s->xsum ||
                        !s->rope_cos || !s->rope_sin || !s->inv_freq || !s->rope_cos_l || !s->rope_sin_l ||
                        !s->inv_freq_l))
        st = VQ_ERR_OUT_OF_MEMORY;
    if (st != VQ_OK) {
        vqm_session_free(s);
        return vqm_fail(err, st, "session: out of memory for %d-token chunks", cfg->max_batch);
    }
    /* inv_freq_i = base^(-2i / rope_dim) (divided by rope_freqs when the model has them) */
    for (int i = 0; i < c->rope_dim / 2; i++) {
        s->inv_freq[i] = pow((double)c->rope_base, -2.0 * i / c->rope_dim);
        s->inv_freq_l[i] = pow((double)c->rope_base_local, -2.0 * i / c->rope_dim);
        if (m->rope_freqs != NULL) {
            s->inv_freq[i] /= m->rope_freqs[i];
            s->inv_freq_l[i] /= m->rope_freqs[i];
        }
    }
    st = cfg->attn == VQM_ATTN_CACHE ? vqm_attn_cache_init(s, err) : vqm_attn_f32_init(s, err);
    if (st != VQ_OK) {
        vqm_session_free(s);
        return st;
    }
    *out = s;
    return VQ_OK;
}

int64_t vqm_session_length(const vqm_session *s) { return s->n_past; }
vq_cache *vqm_session_cache(const vqm_session *s) { return s->cache; }

vq_status vqm_session_reset(vqm_session *s, char *err)
{
    if (s == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "session is NULL");
    if (s->attn_reset != NULL) {
        const vq_status st = s->attn_reset(s, err);
        if (st != VQ_OK) return st;
    }
    s->n_past = 0;
    return VQ_OK;
}

/* out[t] = x[t] / rms(x[t]) * w, for T rows of n. */
static void rmsnorm(float *out, const float *x, const float *w, int64_t T, int n, float eps)
{
    for (int64_t t = 0; t < T; t++) {
        const float *xt = x + t * n;
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)xt[i] * xt[i];
        const float r = (float)(1.0 / sqrt(ss / n + eps));
        for (int i = 0; i < n; i++) out[t * n + i] = xt[i] * r * w[i];
    }
}

/* Rotates pairs (2i, 2i+1) (Gemma: (i, i + rope_dim/2)), i < rope_dim/2, of
 * each of the n_heads heads of T rows, by the local or the global angles. */
static void rope(const vqm_session *s, float *v, int64_t T, int n_heads, bool local)
{
    const vqm_config *c = &s->m->cfg;
    const int half = c->rope_dim / 2, stride = c->gemma ? 1 : 2, off = c->gemma ? half : 1;
    const float *cs = local ? s->rope_cos_l : s->rope_cos, *sn = local ? s->rope_sin_l : s->rope_sin;
    for (int64_t t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float *p = v + (t * n_heads + h) * c->head_dim;
            for (int i = 0; i < half; i++) {
                const float co = cs[t * half + i], si = sn[t * half + i];
                const float a = p[stride * i], b = p[stride * i + off];
                p[stride * i] = a * co - b * si;
                p[stride * i + off] = a * si + b * co;
            }
        }
}

/* GELU, tanh form (Gemma's gelu_pytorch_tanh). */
static inline float gelu_tanh(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* One chunk of T <= max_batch tokens; logits of rows [T - n_out, T) into logits. */
static vq_status forward_chunk(vqm_session *s, const int32_t *tokens, int64_t T, int64_t n_out, float *logits,
                               char *err)
{
    const vqm_model *m = s->m;
    const vqm_config *c = &m->cfg;
    const int dim = c->dim, qd = c->n_heads * c->head_dim;
    const int half = c->rope_dim / 2;
    for (int64_t t = 0; t < T; t++) {
        vqm_matrix_row(&m->embed, tokens[t], s->x + t * dim);
        if (c->embed_scale != 1.0f)
            for (int i = 0; i < dim; i++) s->x[t * dim + i] *= c->embed_scale;
        const double pos = (double)(s->n_past + t);
        for (int i = 0; i < half; i++) {
            const double a = pos * s->inv_freq[i], al = pos * s->inv_freq_l[i];
            s->rope_cos[t * half + i] = (float)cos(a);
            s->rope_sin[t * half + i] = (float)sin(a);
            s->rope_cos_l[t * half + i] = (float)cos(al);
            s->rope_sin_l[t * half + i] = (float)sin(al);
        }
    }
    for (int l = 0; l < c->n_layers; l++) {
        const vqm_layer_weights *w = &m->layers[l];
        rmsnorm(s->xb, s->x, w->attn_norm, T, dim, c->norm_eps);
        {
            const vqm_matrix *qkv[] = {&w->wq, &w->wk, &w->wv};
            float *const out[] = {s->q, s->kb, s->vb};
            const size_t ys[] = {(size_t)qd, (size_t)w->wk.rows, (size_t)w->wv.rows};
            vqm_matmuls(s->pool, &s->k, 3, qkv, T, s->xb, out, ys, s->xsum);
        }
        if (w->q_norm != NULL) { /* per head: rows of head_dim */
            rmsnorm(s->q, s->q, w->q_norm, T * c->n_heads, c->head_dim, c->norm_eps);
            rmsnorm(s->kb, s->kb, w->k_norm, T * c->n_kv_heads, c->head_dim, c->norm_eps);
        }
        rope(s, s->q, T, c->n_heads, w->local);
        rope(s, s->kb, T, c->n_kv_heads, w->local);
        const vq_status st = s->attn_step(s, l, T, err);
        if (st != VQ_OK) return st;
        vqm_matmul(s->pool, &s->k, &w->wo, T, s->att, s->xb, (size_t)dim, s->xsum);
        if (w->post_attn_norm != NULL) rmsnorm(s->xb, s->xb, w->post_attn_norm, T, dim, c->norm_eps);
        for (int64_t i = 0; i < T * dim; i++) s->x[i] += s->xb[i];
        rmsnorm(s->xb, s->x, w->ffn_norm, T, dim, c->norm_eps);
        {
            const vqm_matrix *gu[] = {&w->w_gate, &w->w_up};
            float *const out[] = {s->h1, s->h3};
            const size_t ys[] = {(size_t)c->hidden_dim, (size_t)c->hidden_dim};
            vqm_matmuls(s->pool, &s->k, 2, gu, T, s->xb, out, ys, s->xsum);
        }
        for (int64_t i = 0; i < T * c->hidden_dim; i++) {
            const float g = s->h1[i];
            s->h1[i] = (c->gemma ? gelu_tanh(g) : g / (1.0f + expf(-g))) * s->h3[i];
        }
        vqm_matmul(s->pool, &s->k, &w->w_down, T, s->h1, s->xb, (size_t)dim, s->xsum);
        if (w->post_ffn_norm != NULL) rmsnorm(s->xb, s->xb, w->post_ffn_norm, T, dim, c->norm_eps);
        for (int64_t i = 0; i < T * dim; i++) s->x[i] += s->xb[i];
    }
    s->n_past += T;
    if (n_out > 0) {
        rmsnorm(s->xb, s->x + (T - n_out) * dim, m->output_norm, n_out, dim, c->norm_eps);
        vqm_matmul(s->pool, &s->k, &m->output, n_out, s->xb, logits, (size_t)c->vocab, s->xsum);
    }
    return VQ_OK;
}

vq_status vqm_forward(vqm_session *s, const int32_t *tokens, int64_t n, int64_t n_out, float *logits, char *err)
{
    if (s == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "forward: session is NULL");
    if (tokens == NULL || n < 1) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "forward: need n >= 1 tokens, got %lld", (long long)n);
    if (n_out < 0 || n_out > n || (n_out > 0 && logits == NULL))
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "forward: n_out %lld must be in 0..n = %lld with logits not NULL",
                    (long long)n_out, (long long)n);
    if (s->n_past + n > s->cfg.max_tokens)
        return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "forward: %lld + %lld tokens exceed the session's max_tokens %d",
                    (long long)s->n_past, (long long)n, s->cfg.max_tokens);
    const vqm_config *c = &s->m->cfg;

    const int vocab = c->vocab;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "forward: tokens[%lld] = %d is outside the vocabulary 0..%d",
                        (long long)i, tokens[i], vocab - 1);
    const int64_t first_out = n - n_out;
    for (int64_t i0 = 0; i0 < n; i0 += s->cfg.max_batch) {
        const int64_t T = n - i0 < s->cfg.max_batch ? n - i0 : s->cfg.max_batch;
        /* rows of this chunk at or after first_out need logits */
        const int64_t lo = first_out > i0 ? first_out : i0;
        const int64_t nout = lo < i0 + T ? i0 + T - lo : 0;
        const vq_status st =
            forward_chunk(s, tokens + i0, T, nout, nout > 0 ? logits + (size_t)(lo - first_out) * vocab : NULL, err);
        if (st != VQ_OK) return st;
    }
    return VQ_OK;
}
