/* model.c — loads a Llama-family or Gemma 3 GGUF: hyper-parameters from
 * "<arch>.*" metadata, every tensor checked for presence, type and shape.
 * Matrices stay in the mapped file in their GGUF type and also get a
 * packed copy for the tile kernels (same bytes, tiles of 16 rows:
 * quant.h); norm vectors are copied to f32. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vqm.h"

static const vqm_gguf_kv *arch_kv(const vqm_gguf *g, const char *arch, const char *key)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    return vqm_gguf_find(g, name);
}

static bool is_scalar(const vqm_gguf_kv *kv)
{
    return kv != NULL && kv->type != VQM_GGUF_STRING && kv->type != VQM_GGUF_ARRAY;
}

/* A matrix [rows, cols] named `name`, of a computable type. */
static vq_status get_matrix(const vqm_gguf *g, const char *name, int64_t rows, int64_t cols, vqm_matrix *m,
                            char *err)
{
    const vqm_gguf_tensor *t = vqm_gguf_tensor_find(g, name);
    if (t == NULL) return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tensor '%s' is missing", name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tensor '%s' has shape [%lld, %lld] (ne0, ne1), expected [%lld, %lld]",
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)cols, (long long)rows);
    if (!vqm_wtype_supported(t->type))
        return vqm_fail(err, VQ_ERR_UNSUPPORTED,
                        "model: tensor '%s' has type %s; supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K",
                        name, vqm_wtype_name(t->type));
    if (vqm_wtype_row_bytes(t->type, cols, NULL) == 0)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "model: tensor '%s' of type %s has %lld columns, not a multiple of its block",
                        name, vqm_wtype_name(t->type), (long long)cols);
    m->type = t->type;
    m->rows = rows;
    m->cols = cols;
    m->row_bytes = (size_t)vqm_wtype_row_bytes(t->type, cols, NULL);
    m->data = t->data;
    m->packed = NULL;
    return VQ_OK;
}

/* A vector [n] copied to f32 into dst. */
static vq_status get_vector(const vqm_gguf *g, const char *name, int64_t n, float *dst, char *err)
{
    const vqm_gguf_tensor *t = vqm_gguf_tensor_find(g, name);
    if (t == NULL) return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tensor '%s' is missing", name);
    if (t->n_dims != 1 || t->ne[0] != n)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tensor '%s' has %lld elements in dim 0, expected %lld", name,
                    (long long)t->ne[0], (long long)n);
    if (t->type != VQM_W_F32 && t->type != VQM_W_F16 && t->type != VQM_W_BF16)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "model: vector '%s' must be F32, F16 or BF16, not %s", name,
                    vqm_wtype_name(t->type));
    const vqm_matrix m = {t->type, 1, n, (size_t)t->nbytes, t->data, NULL};
    vqm_matrix_row(&m, 0, dst);
    return VQ_OK;
}

/* The packed copies of every matrix the forward pass multiplies by (the
 * embedding is only looked up by row: it keeps its file layout), in one
 * 64-byte aligned allocation. */
static vq_status pack_matrices(vqm_model *m, const vqm_gguf *g, char *err)
{
    const int nm = 7 * m->cfg.n_layers + 1;
    vqm_matrix **all = malloc((size_t)nm * sizeof *all);
    if (all == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "model: out of memory");
    /* the output first: the largest, so that the file pages of at most one layer's matrix are in
     * memory beside the packed weights at any time (the peak) */
    int k = 0;
    all[k++] = &m->output;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        vqm_layer_weights *w = &m->layers[l];
        vqm_matrix *ms[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++) all[k++] = ms[i];
    }
    size_t total = 0;
    for (int i = 0; i < nm; i++) total += (vqm_matrix_packed_bytes(all[i]) + 63) / 64 * 64;
    if (total > 0) {
        m->packed_storage = aligned_alloc(64, total);
        if (m->packed_storage == NULL) {
            free(all);
            return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "model: out of memory for the packed weights (%zu bytes)", total);
        }
    }
    size_t at = 0;
    for (int i = 0; i < nm; i++) {
        const size_t nbytes = vqm_matrix_packed_bytes(all[i]);
        if (nbytes == 0) continue;
        vqm_matrix_pack(all[i], m->packed_storage + at);
        all[i]->packed = m->packed_storage + at;
        at += (nbytes + 63) / 64 * 64;
        /* the file's copy is read no more (the embedding's rows, when the output is tied, a row
         * per token: a page fault from the page cache): its pages leave the process's memory,
         * which then holds the weights once */
        vqm_gguf_release(g, all[i]->data, (size_t)all[i]->rows * all[i]->row_bytes);
    }
    free(all);
    return VQ_OK;
}

void vqm_model_free(vqm_model *m)
{
    if (m == NULL) return;
    vqm_tokenizer_free(m->tok);
    vqm_gguf_free(m->gguf);
    free(m->layers);
    free(m->norm_storage);
    free(m->packed_storage);
    free(m);
}

int vqm_layer_window(const vqm_model *m, int l) { return m->layers[l].local ? m->cfg.sliding_window : 0; }

vq_status vqm_model_load(const char *path, vqm_model **out, char *err)
{
    if (out == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "model: out is NULL");
    *out = NULL;
    vqm_gguf *g = NULL;
    vq_status s = vqm_gguf_open(path, &g, err);
    if (s != VQ_OK) return s;
    s = vqm_model_from_gguf(g, out, err);
    if (s != VQ_OK) vqm_gguf_free(g);
    return s;
}

vq_status vqm_model_from_gguf(vqm_gguf *g, vqm_model **out, char *err)
{
    if (out == NULL || g == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "model: NULL argument");
    *out = NULL;
    const vqm_gguf_kv *a = vqm_gguf_find(g, "general.architecture");
    if (a == NULL || a->type != VQM_GGUF_STRING || a->str.len == 0 || a->str.len > 32)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: general.architecture (a string) is missing");
    char arch[40];
    memcpy(arch, a->str.s, a->str.len);
    arch[a->str.len] = 0;
    static const char *const llama_like[] = {"llama", "mistral", "granite"};
    vqm_config c = {0};
    c.gemma = strcmp(arch, "gemma3") == 0;
    bool ok = c.gemma;
    for (size_t i = 0; i < sizeof llama_like / sizeof *llama_like; i++) ok |= strcmp(arch, llama_like[i]) == 0;
    if (!ok)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED,
                        "model: architecture '%s' is not supported (llama, mistral, granite, gemma3)", arch);
    const char *need[] = {"block_count", "embedding_length", "feed_forward_length", "attention.head_count"};
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        const vqm_gguf_kv *kv = arch_kv(g, arch, need[i]);
        if (!is_scalar(kv) || kv->i64 < 1 || kv->i64 > (1 << 20))
            return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: %s.%s must be an integer in 1..2^20", arch, need[i]);
        v[i] = kv->i64;
    }
    c.n_layers = (int)v[0];
    c.dim = (int)v[1];
    c.hidden_dim = (int)v[2];
    c.n_heads = (int)v[3];
    const vqm_gguf_kv *kvh = arch_kv(g, arch, "attention.head_count_kv");
    c.n_kv_heads = is_scalar(kvh) && kvh->i64 >= 0 && kvh->i64 <= (1 << 20) ? (int)kvh->i64 : c.n_heads;
    const vqm_gguf_kv *kl = arch_kv(g, arch, "attention.key_length");
    c.head_dim = is_scalar(kl) && kl->i64 >= 0 && kl->i64 <= 4096 ? (int)kl->i64 : c.dim / c.n_heads;
    if (c.n_kv_heads < 1 || c.n_heads % c.n_kv_heads != 0 || c.head_dim < 2 || c.head_dim % 2 != 0 ||
        c.head_dim > 256 || c.dim % 32 != 0 || c.hidden_dim % 32 != 0 || (c.n_heads * c.head_dim) % 32 != 0)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED,
                    "model: %d heads, %d kv heads, head dim %d, dim %d, hidden %d: expected heads a multiple of kv "
                    "heads, an even head dim <= 256, dims multiples of 32",
                    c.n_heads, c.n_kv_heads, c.head_dim, c.dim, c.hidden_dim);
    const vqm_gguf_kv *ctxl = arch_kv(g, arch, "context_length");
    c.context_length = is_scalar(ctxl) && ctxl->i64 > 0 && ctxl->i64 <= (1 << 30) ? (int)ctxl->i64 : 2048;
    const vqm_gguf_kv *rb = arch_kv(g, arch, "rope.freq_base");
    c.rope_base = is_scalar(rb) && rb->f64 > 0 && rb->f64 < 1e30 ? (float)rb->f64 : 10000.0f;
    const vqm_gguf_kv *eps = arch_kv(g, arch, "attention.layer_norm_rms_epsilon");
    c.norm_eps = is_scalar(eps) && eps->f64 > 0 && eps->f64 < 1 ? (float)eps->f64 : 1e-5f;
    const vqm_gguf_kv *rd = arch_kv(g, arch, "rope.dimension_count");
    c.rope_dim = is_scalar(rd) && rd->i64 >= 0 && rd->i64 <= 4096 ? (int)rd->i64 : c.head_dim;
    if (c.rope_dim < 2 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "model: rope.dimension_count %d must be even and <= head dim %d",
                    c.rope_dim, c.head_dim);
    const vqm_gguf_kv *rs = arch_kv(g, arch, "rope.scaling.type");
    if (rs != NULL && rs->type == VQM_GGUF_STRING && !(rs->str.len == 4 && memcmp(rs->str.s, "none", 4) == 0))
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "model: %s.rope.scaling.type other than none is not supported",
                    arch);
    c.embed_scale = c.gemma ? sqrtf((float)c.dim) : 1.0f;
    c.attn_scale = 1.0f / sqrtf((float)c.head_dim);
    c.rope_base_local = c.rope_base;
    if (c.gemma) {
        const vqm_gguf_kv *sw = arch_kv(g, arch, "attention.sliding_window");
        if (sw != NULL && (!is_scalar(sw) || sw->i64 < 1 || sw->i64 > (1 << 30)))
            return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: %s.attention.sliding_window must be an integer in 1..2^30",
                            arch);
        c.sliding_window = sw != NULL ? (int)sw->i64 : 0;
        /* not in the GGUF of Gemma 3: llama.cpp and transformers fix the
         * pattern at 6 (five local layers, then a global one) and the local
         * layers' RoPE base at 10000 */
        const vqm_gguf_kv *pat = arch_kv(g, arch, "attention.sliding_window_pattern");
        c.swa_pattern = is_scalar(pat) && pat->i64 >= 1 && pat->i64 <= 1024 ? (int)pat->i64 : 6;
        c.rope_base_local = 10000.0f;
    }
    const vqm_gguf_tensor *bias = vqm_gguf_tensor_find(g, "blk.0.attn_q.bias");
    if (bias != NULL) return vqm_fail(err, VQ_ERR_UNSUPPORTED, "model: attention biases are not supported");

    /* The file must hold 2 norm vectors per layer plus the output norm, each
     * of dim elements of at least 2 bytes: a header that claims more layers
     * or a wider model than the file can hold is refused before anything is
     * sized from it. */
    const uint64_t norm_bytes = ((c.gemma ? 4u : 2u) * (uint64_t)c.n_layers + 1u) * (uint64_t)c.dim * 2u;
    if (norm_bytes > g->size)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA,
                    "model: %d layers of dim %d need at least %llu bytes of norm weights, the file has %llu bytes",
                    c.n_layers, c.dim, (unsigned long long)norm_bytes, (unsigned long long)g->size);
    vqm_model *m = calloc(1, sizeof *m);
    if (m == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "model: out of memory");
    m->layers = calloc((size_t)c.n_layers, sizeof *m->layers);
    /* attn/ffn norms (+ Gemma's post norms), the output norm; Gemma's q/k norms; rope_freqs */
    m->norm_storage = calloc((size_t)(4 * c.n_layers + 1) * (size_t)c.dim + (size_t)(2 * c.n_layers + 1) * (size_t)c.head_dim,
                             sizeof(float));
    vq_status s = m->layers != NULL && m->norm_storage != NULL ? VQ_OK : VQ_ERR_OUT_OF_MEMORY;
    if (s != VQ_OK) vqm_fail(err, s, "model: out of memory");
    const vqm_gguf_tensor *emb = vqm_gguf_tensor_find(g, "token_embd.weight");
    if (s == VQ_OK && emb == NULL) s = vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tensor '%s' is missing",
                                             "token_embd.weight");
    if (s == VQ_OK) {
        c.vocab = (int)emb->ne[1];
        s = get_matrix(g, "token_embd.weight", c.vocab, c.dim, &m->embed, err);
    }
    if (s == VQ_OK) {
        if (vqm_gguf_tensor_find(g, "output.weight") != NULL) {
            s = get_matrix(g, "output.weight", c.vocab, c.dim, &m->output, err);
        } else {
            c.tied_output = true;
            m->output = m->embed;
        }
    }
    float *norms = m->norm_storage;
    if (s == VQ_OK) s = get_vector(g, "output_norm.weight", c.dim, norms, err);
    m->output_norm = norms;
    norms += c.dim;
    const int qd = c.n_heads * c.head_dim, kvd = c.n_kv_heads * c.head_dim;
    for (int l = 0; l < c.n_layers && s == VQ_OK; l++) {
        vqm_layer_weights *w = &m->layers[l];
        char name[64];
#define T(field, suffix, rows, cols)                                        \
    if (s == VQ_OK) {                                                       \
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, suffix);         \
        s = get_matrix(g, name, rows, cols, &w->field, err);                \
    }
        T(wq, "attn_q", qd, c.dim)
        T(wk, "attn_k", kvd, c.dim)
        T(wv, "attn_v", kvd, c.dim)
        T(wo, "attn_output", c.dim, qd)
        T(w_gate, "ffn_gate", c.hidden_dim, c.dim)
        T(w_up, "ffn_up", c.hidden_dim, c.dim)
        T(w_down, "ffn_down", c.dim, c.hidden_dim)
#undef T
        if (s == VQ_OK) {
            snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
            s = get_vector(g, name, c.dim, norms, err);
            w->attn_norm = norms;
            norms += c.dim;
        }
        if (s == VQ_OK) {
            snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
            s = get_vector(g, name, c.dim, norms, err);
            w->ffn_norm = norms;
            norms += c.dim;
        }
        if (c.gemma) {
            const struct { const char *suffix; int64_t n; const float **dst; } gv[] = {
                {"attn_q_norm", c.head_dim, &w->q_norm},
                {"attn_k_norm", c.head_dim, &w->k_norm},
                {"post_attention_norm", c.dim, &w->post_attn_norm},
                {"post_ffw_norm", c.dim, &w->post_ffn_norm},
            };
            for (int i = 0; i < 4 && s == VQ_OK; i++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, gv[i].suffix);
                s = get_vector(g, name, gv[i].n, norms, err);
                *gv[i].dst = norms;
                norms += gv[i].n;
            }
            w->local = c.sliding_window > 0 && (l + 1) % c.swa_pattern != 0;
        }
    }
    if (s == VQ_OK && vqm_gguf_tensor_find(g, "rope_freqs.weight") != NULL) {
        s = get_vector(g, "rope_freqs.weight", c.rope_dim / 2, norms, err);
        m->rope_freqs = norms;
    }
    if (s == VQ_OK) s = vqm_tokenizer_load(g, &m->tok, err);
    if (s == VQ_OK && vqm_tokenizer_vocab(m->tok) != c.vocab) {
        s = vqm_fail(err, VQ_ERR_CORRUPT_DATA, "model: tokenizer has %d tokens, the embedding %d rows",
                 (int)vqm_tokenizer_vocab(m->tok), c.vocab);
    }
    if (s != VQ_OK) {
        m->gguf = NULL;
        vqm_model_free(m);
        return s;
    }
    uint64_t bytes = (uint64_t)m->output.row_bytes * (uint64_t)c.vocab;
    for (int l = 0; l < c.n_layers; l++) {
        const vqm_layer_weights *w = &m->layers[l];
        const vqm_matrix *ms[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (int i = 0; i < 7; i++) bytes += (uint64_t)ms[i]->row_bytes * (uint64_t)ms[i]->rows;
    }
    m->weight_bytes = bytes;
    m->cfg = c;
    s = pack_matrices(m, g, err);
    if (s != VQ_OK) {
        m->gguf = NULL;
        vqm_model_free(m);
        return s;
    }
    m->cfg = c;
    m->gguf = g;
    *out = m;
    return VQ_OK;
}
