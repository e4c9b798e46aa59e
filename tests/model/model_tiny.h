/* model_tiny.h — builds small GGUF files in memory for the model runtime's
 * tests: a writer for metadata and tensors, and a tiny random Llama (one or
 * two layers, every weight type, GQA, tied or untied output, a byte-level
 * vocabulary with a few merges). Also the test's own float64 dequantizer of
 * the ggml block layouts (written from the format, not from tools/model). */
#ifndef VQ_TEST_MODEL_TINY_H
#define VQ_TEST_MODEL_TINY_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_ref.h"
#include "veloxquant.h"

typedef struct tg_buf {
    uint8_t *p;
    size_t n, cap;
} tg_buf;

static inline void tg_put(tg_buf *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL) abort();
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static inline void tg_u32(tg_buf *b, uint32_t v) { tg_put(b, &v, 4); }
static inline void tg_u64(tg_buf *b, uint64_t v) { tg_put(b, &v, 8); }
static inline void tg_str(tg_buf *b, const char *s) { tg_u64(b, strlen(s)); tg_put(b, s, strlen(s)); }
static inline void tg_kv_u32(tg_buf *b, const char *k, uint32_t v) { tg_str(b, k); tg_u32(b, 4); tg_u32(b, v); }
static inline void tg_kv_f32(tg_buf *b, const char *k, float v) { tg_str(b, k); tg_u32(b, 6); tg_put(b, &v, 4); }
static inline void tg_kv_str(tg_buf *b, const char *k, const char *v) { tg_str(b, k); tg_u32(b, 8); tg_str(b, v); }

/* ---- the tiny model ---- */
enum { TINY_DIM = 64, TINY_HIDDEN = 96, TINY_HEADS = 4, TINY_KV = 2, TINY_HD = 16, TINY_MAXT = 6 };

typedef struct tiny_tensor {
    char name[48];
    uint32_t type;
    int64_t ne0, ne1;  /* ne1 = 1 for vectors */
    uint8_t *data;
    size_t nbytes;
} tiny_tensor;

typedef struct tiny_model {
    int n_layers, vocab;
    bool tied;
    bool gemma;  /* tiny_build_gemma: architecture gemma3 */
    tiny_tensor t[32];
    int nt;
} tiny_model;

static inline size_t tiny_row_bytes(uint32_t type, int64_t n)
{
    switch (type) {
    case 0: return (size_t)n * 4;
    case 1: case 30: return (size_t)n * 2;
    case 2: return (size_t)n / 32 * 18;
    case 3: return (size_t)n / 32 * 20;
    case 8: return (size_t)n / 32 * 34;
    case 6: return (size_t)n / 32 * 22;
    case 12: return (size_t)n / 256 * 144;
    case 14: return (size_t)n / 256 * 210;
    default: return 0;
    }
}

/* Random but valid contents: block scales small, codes random. */
static inline void tiny_fill(tiny_tensor *t, vq_rng *rng, double scale)
{
    const size_t row = tiny_row_bytes(t->type, t->ne0);
    t->nbytes = row * (size_t)t->ne1;
    t->data = malloc(t->nbytes);
    if (t->type == 0) {
        for (int64_t i = 0; i < t->ne0 * t->ne1; i++) {
            const float v = (float)(vq_rng_normal(rng) * scale);
            memcpy(t->data + 4 * i, &v, 4);
        }
        return;
    }
    if (t->type == 1 || t->type == 30) {
        for (int64_t i = 0; i < t->ne0 * t->ne1; i++) {
            const float v = (float)(vq_rng_normal(rng) * scale);
            const uint16_t h = t->type == 1 ? vq_f32_to_f16(v) : vq_f32_to_bf16(v);
            memcpy(t->data + 2 * i, &h, 2);
        }
        return;
    }
    if (t->type == 12 || t->type == 14) { /* Q4_K: d, dmin first; Q6_K: d last */
        const size_t bs = t->type == 12 ? 144 : 210;
        for (size_t b = 0; b < t->nbytes / bs; b++) {
            uint8_t *p = t->data + b * bs;
            for (size_t i = 0; i < bs; i++) p[i] = (uint8_t)(vq_rng_next(rng) >> 56);
            const uint16_t d = vq_f32_to_f16((float)(scale * (t->type == 12 ? 0.006 : 0.001) * (0.5 + vq_rng_uniform(rng))));
            memcpy(p + (t->type == 12 ? 0 : 208), &d, 2);
            if (t->type == 12) {
                const uint16_t m = vq_f32_to_f16((float)(scale * 0.01 * vq_rng_uniform(rng)));
                memcpy(p + 2, &m, 2);
            }
        }
        return;
    }
    const size_t bs = t->type == 2 ? 18 : t->type == 3 ? 20 : t->type == 6 ? 22 : 34;
    for (size_t b = 0; b < t->nbytes / bs; b++) {
        uint8_t *p = t->data + b * bs;
        for (size_t i = 0; i < bs; i++) p[i] = (uint8_t)(vq_rng_next(rng) >> 56);
        const uint16_t d = vq_f32_to_f16((float)(scale * (t->type == 8 ? 0.02 : 0.25) * (0.5 + vq_rng_uniform(rng))));
        memcpy(p, &d, 2);
        if (t->type == 3) {
            const uint16_t m = vq_f32_to_f16((float)(-scale * 2 * vq_rng_uniform(rng)));
            memcpy(p + 2, &m, 2);
        }
    }
}

/* x = the float64 value of element c of row r (the test's own dequantizer). */
static inline double tiny_get(const tiny_tensor *t, int64_t r, int64_t c)
{
    const uint8_t *row = t->data + (size_t)r * tiny_row_bytes(t->type, t->ne0);
    uint16_t h;
    switch (t->type) {
    case 0: { float f; memcpy(&f, row + 4 * c, 4); return f; }
    case 1: memcpy(&h, row + 2 * c, 2); return vq_f16_to_f32(h);
    case 30: memcpy(&h, row + 2 * c, 2); return vq_bf16_to_f32(h);
    default: break;
    }
    if (t->type == 12) { /* Q4_K: 6-bit scale and min of sub-block j packed in 12 bytes */
        const uint8_t *b = row + (size_t)(c / 256) * 144, *sc = b + 4, *qs = b + 16;
        const int i = (int)(c % 256), j = i / 32, l = i % 64;
        const int s6 = j < 4 ? sc[j] & 63 : (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
        const int m6 = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        const uint8_t byte = qs[32 * (i / 64) + l % 32];
        const int q = l < 32 ? byte & 15 : byte >> 4;
        uint16_t dm;
        memcpy(&h, b, 2);
        memcpy(&dm, b + 2, 2);
        return (double)vq_f16_to_f32(h) * s6 * q - (double)vq_f16_to_f32(dm) * m6;
    }
    if (t->type == 14) { /* Q6_K: ql[128], qh[64], scales[16] int8, d */
        const uint8_t *b = row + (size_t)(c / 256) * 210, *ql = b, *qh = b + 128;
        const int i = (int)(c % 256), hh = i / 128, qd = (i % 128) / 32, l = i % 32;
        const uint8_t lb = ql[64 * hh + l + (qd & 1) * 32];
        const int q = ((qd >= 2 ? lb >> 4 : lb & 15) | (((qh[32 * hh + l] >> (2 * qd)) & 3) << 4)) - 32;
        memcpy(&h, b + 208, 2);
        return (double)vq_f16_to_f32(h) * (int8_t)b[192 + i / 16] * q;
    }
    const size_t bs = t->type == 2 ? 18 : t->type == 3 ? 20 : t->type == 6 ? 22 : 34;
    const uint8_t *b = row + (size_t)(c / 32) * bs;
    const int e = (int)(c % 32);
    memcpy(&h, b, 2);
    const double d = vq_f16_to_f32(h);
    if (t->type == 8) return d * (int8_t)b[2 + e];
    if (t->type == 6) { /* Q5_0: bit e of the 32-bit qh is element e's fifth bit */
        const uint8_t *qs = b + 6;
        const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        const int q = (e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4)) | (int)(((qh >> e) & 1) << 4);
        return d * (q - 16);
    }
    const uint8_t *qs = b + (t->type == 3 ? 4 : 2);
    const int q = e < 16 ? (qs[e] & 15) : (qs[e - 16] >> 4);
    if (t->type == 2) return d * (q - 8);
    memcpy(&h, b + 2, 2);
    return d * q + vq_f16_to_f32(h);
}

static inline tiny_tensor *tiny_add(tiny_model *m, const char *name, uint32_t type, int64_t ne0, int64_t ne1, vq_rng *rng,
                             double scale)
{
    tiny_tensor *t = &m->t[m->nt++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->ne0 = ne0;
    t->ne1 = ne1;
    tiny_fill(t, rng, scale);
    return t;
}

static inline const tiny_tensor *tiny_find(const tiny_model *m, const char *name)
{
    for (int i = 0; i < m->nt; i++)
        if (strcmp(m->t[i].name, name) == 0) return &m->t[i];
    return NULL;
}

/* Builds the tiny model: layer l's matrices cycle through every weight type. */
static inline void tiny_build(tiny_model *m, int n_layers, bool tied, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->n_layers = n_layers;
    m->vocab = 256 + 4;
    m->tied = tied;
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    static const uint32_t types[] = {2, 3, 8, 1, 30, 0};
    int k = 0;
    tiny_add(m, "token_embd.weight", 8, TINY_DIM, m->vocab, &rng, 1.0);
    for (int l = 0; l < n_layers; l++) {
        char name[48];
        const struct { const char *n; int64_t ne0, ne1; } mats[] = {
            {"attn_q", TINY_DIM, TINY_HEADS * TINY_HD}, {"attn_k", TINY_DIM, TINY_KV * TINY_HD},
            {"attn_v", TINY_DIM, TINY_KV * TINY_HD},    {"attn_output", TINY_HEADS * TINY_HD, TINY_DIM},
            {"ffn_gate", TINY_DIM, TINY_HIDDEN},        {"ffn_up", TINY_DIM, TINY_HIDDEN},
            {"ffn_down", TINY_HIDDEN, TINY_DIM}};
        for (int i = 0; i < 7; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[i].n);
            tiny_add(m, name, types[k++ % 6], mats[i].ne0, mats[i].ne1, &rng, 0.15);
        }
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        tiny_add(m, name, 0, TINY_DIM, 1, &rng, 1.0);
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        tiny_add(m, name, 0, TINY_DIM, 1, &rng, 1.0);
    }
    tiny_add(m, "output_norm.weight", 0, TINY_DIM, 1, &rng, 1.0);
    if (!tied) tiny_add(m, "output.weight", 1, TINY_DIM, m->vocab, &rng, 0.2);
}

/* Gemma 3's layout of a tiny model (tied output; Q5_0 Q and K weights; its
 * q/k and post norms), with a sliding window of TINY_WINDOW tokens and a
 * pattern of 2: layer 0 local, layer 1 global. */
enum { TINY_WINDOW = 3, TINY_SWA_PATTERN = 2 };
static inline void tiny_build_gemma(tiny_model *m, int n_layers, uint64_t seed)
{
    tiny_build(m, n_layers, true, seed);
    m->gemma = true;
    vq_rng rng;
    vq_rng_seed(&rng, seed + 100);
    for (int i = 0; i < m->nt; i++)
        if (strstr(m->t[i].name, "attn_q.") != NULL || strstr(m->t[i].name, "attn_k.") != NULL) {
            free(m->t[i].data);
            m->t[i].type = 6;
            tiny_fill(&m->t[i], &rng, 0.15);
        }
    for (int l = 0; l < n_layers; l++) {
        char name[48];
        static const char *const norms[] = {"attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm"};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, norms[i]);
            tiny_add(m, name, 0, i < 2 ? TINY_HD : TINY_DIM, 1, &rng, 1.0);
        }
    }
}

/* ---- float64 reference pieces of the tests' forward passes ---- */

/* y = W x for the named tensor (the test's own dequantizer). */
static inline void tiny_matvec(const tiny_model *m, const char *name, const double *x, double *y)
{
    const tiny_tensor *t = tiny_find(m, name);
    for (int64_t r = 0; r < t->ne1; r++) {
        double s = 0;
        for (int64_t c = 0; c < t->ne0; c++) s += tiny_get(t, r, c) * x[c];
        y[r] = s;
    }
}

/* att = softmax(q k_j / sqrt(D)) v over keys j0..t, every query head on its
 * kv head: the scores here, the attention by the tests' one float64
 * reference (attention_ref.h). */
static inline void tiny_attend(const double *q, const double (*K)[TINY_KV * TINY_HD],
                               const double (*V)[TINY_KV * TINY_HD], int j0, int t, double *att)
{
    const int n = t - j0 + 1;
    static double sc[TINY_HEADS * TINY_MAXT], vhat[TINY_KV * TINY_MAXT * TINY_HD];
    for (int h = 0; h < TINY_HEADS; h++)
        for (int j = j0; j <= t; j++) {
            const int kh = h / (TINY_HEADS / TINY_KV);
            double d = 0;
            for (int e = 0; e < TINY_HD; e++) d += q[h * TINY_HD + e] * K[j][kh * TINY_HD + e];
            sc[h * n + (j - j0)] = d / sqrt((double)TINY_HD);
        }
    for (int kh = 0; kh < TINY_KV; kh++)
        for (int j = j0; j <= t; j++)
            for (int e = 0; e < TINY_HD; e++) vhat[(kh * n + (j - j0)) * TINY_HD + e] = V[j][kh * TINY_HD + e];
    const ref_dims d = {1, TINY_HEADS, TINY_KV, 1, n, TINY_HD};
    const ref_table_arg scores = {sc, d};
    ref_attention(&d, ref_table_score, &scores, vhat, NULL, 0, 0, false, att, NULL);
}

static inline void tiny_free(tiny_model *m)
{
    for (int i = 0; i < m->nt; i++) free(m->t[i].data);
}

/* GPT-2 byte alphabet: the UTF-8 of byte b's printable stand-in. */
static inline int tiny_byte_utf8(int b, char *out)
{
    int cp = b, n = 0;
    const int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    if (!printable) {
        for (int c = 0; c < b; c++)
            if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 63));
    return 2;
}

/* The GGUF bytes of m (caller frees .p). */
static inline tg_buf tiny_gguf(const tiny_model *m)
{
    tg_buf b = {0};
    tg_put(&b, "GGUF", 4);
    tg_u32(&b, 3);
    tg_u64(&b, (uint64_t)m->nt);
    tg_u64(&b, m->gemma ? 18 : 16); /* metadata entries below */
    const char *a = m->gemma ? "gemma3" : "llama";
    char k[64];
#define KEY(name) (snprintf(k, sizeof k, "%s.%s", a, name), k)
    tg_kv_str(&b, "general.architecture", a);
    tg_kv_u32(&b, KEY("block_count"), (uint32_t)m->n_layers);
    tg_kv_u32(&b, KEY("embedding_length"), TINY_DIM);
    tg_kv_u32(&b, KEY("feed_forward_length"), TINY_HIDDEN);
    tg_kv_u32(&b, KEY("attention.head_count"), TINY_HEADS);
    tg_kv_u32(&b, KEY("attention.head_count_kv"), TINY_KV);
    tg_kv_u32(&b, KEY("context_length"), 64);
    tg_kv_f32(&b, KEY("rope.freq_base"), m->gemma ? 1e6f : 10000.0f);
    tg_kv_f32(&b, KEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (m->gemma) {
        tg_kv_u32(&b, KEY("attention.sliding_window"), TINY_WINDOW);
        tg_kv_u32(&b, KEY("attention.sliding_window_pattern"), TINY_SWA_PATTERN);
    }
#undef KEY
    tg_kv_str(&b, "tokenizer.ggml.model", "gpt2");
    tg_kv_str(&b, "tokenizer.ggml.pre", "smollm");
    /* tokens: 256 byte tokens, then "he", "ll", "hell", "hello" */
    tg_str(&b, "tokenizer.ggml.tokens");
    tg_u32(&b, 9);
    tg_u32(&b, 8);
    tg_u64(&b, (uint64_t)m->vocab);
    for (int i = 0; i < 256; i++) {
        char s[3];
        const int n = tiny_byte_utf8(i, s);
        tg_u64(&b, (uint64_t)n);
        tg_put(&b, s, (size_t)n);
    }
    tg_str(&b, "he");
    tg_str(&b, "ll");
    tg_str(&b, "hell");
    tg_str(&b, "hello");
    tg_str(&b, "tokenizer.ggml.merges");
    tg_u32(&b, 9);
    tg_u32(&b, 8);
    tg_u64(&b, 4);
    tg_str(&b, "h e");
    tg_str(&b, "l l");
    tg_str(&b, "he ll");
    tg_str(&b, "hell o");
    tg_kv_u32(&b, "tokenizer.ggml.bos_token_id", 1);
    tg_kv_u32(&b, "tokenizer.ggml.eos_token_id", 2);
    tg_kv_u32(&b, "general.alignment", 32);
    uint64_t off = 0;
    for (int i = 0; i < m->nt; i++) {
        const tiny_tensor *t = &m->t[i];
        tg_str(&b, t->name);
        const bool vec = t->ne1 == 1;
        tg_u32(&b, vec ? 1 : 2);
        tg_u64(&b, (uint64_t)t->ne0);
        if (!vec) tg_u64(&b, (uint64_t)t->ne1);
        tg_u32(&b, t->type);
        tg_u64(&b, off);
        off += (t->nbytes + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    tg_put(&b, zeros, (32 - b.n % 32) % 32);
    for (int i = 0; i < m->nt; i++) {
        tg_put(&b, m->t[i].data, m->t[i].nbytes);
        tg_put(&b, zeros, (32 - m->t[i].nbytes % 32) % 32);
    }
    return b;
}

static inline void tiny_put_str_array(tg_buf *b, const char *key, const char *const *v, int n)
{
    tg_str(b, key);
    tg_u32(b, 9);
    tg_u32(b, 8);
    tg_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) tg_str(b, v[i]);
}

/* A GGUF holding only a SentencePiece tokenizer (tokenizer.ggml.model =
 * llama): <unk>, <bos>, <eos>, the 256 <0xXX> byte tokens, then words[]
 * (ids from 3 + TINY_SPM_BYTES): U+2581, a, b, c, ab, bc, U+2581 a, cab
 * with scores, a user-defined "\n\n" and a control "<x>"; no space prefix. */
enum { TINY_SPM_BYTES = 256 };
static inline tg_buf tiny_spm_gguf(void)
{
    enum { NB = TINY_SPM_BYTES, NW = 10 };
    static const char *const words[NW] = {"\xe2\x96\x81", "a", "b", "c", "ab", "bc", "\xe2\x96\x81" "a", "cab",
                                          "\n\n", "<x>"};
    static const float wscore[NW] = {-1, -2, -2, -2, -5, -3, -4, -9, 0, 0};
    static const int32_t wtype[NW] = {1, 1, 1, 1, 1, 1, 1, 1, 4, 3};
    const int n = 3 + NB + NW;
    const char *toks[3 + NB + NW];
    char bytes[NB][8];
    float *scores = calloc((size_t)n, sizeof *scores);
    int32_t *types = calloc((size_t)n, sizeof *types);
    toks[0] = "<unk>"; toks[1] = "<bos>"; toks[2] = "<eos>";
    types[0] = 2; types[1] = 3; types[2] = 3;
    for (int i = 0; i < NB; i++) {
        snprintf(bytes[i], sizeof bytes[i], "<0x%02X>", i);
        toks[3 + i] = bytes[i];
        types[3 + i] = 6;
    }
    for (int i = 0; i < NW; i++) {
        toks[3 + NB + i] = words[i];
        scores[3 + NB + i] = wscore[i];
        types[3 + NB + i] = wtype[i];
    }
    tg_buf b = {0};
    tg_put(&b, "GGUF", 4);
    tg_u32(&b, 3);
    tg_u64(&b, 0);
    tg_u64(&b, 5);
    tg_kv_str(&b, "tokenizer.ggml.model", "llama");
    tiny_put_str_array(&b, "tokenizer.ggml.tokens", toks, n);
    tg_str(&b, "tokenizer.ggml.scores");
    tg_u32(&b, 9);
    tg_u32(&b, 6);
    tg_u64(&b, (uint64_t)n);
    tg_put(&b, scores, (size_t)n * 4);
    tg_str(&b, "tokenizer.ggml.token_type");
    tg_u32(&b, 9);
    tg_u32(&b, 5);
    tg_u64(&b, (uint64_t)n);
    tg_put(&b, types, (size_t)n * 4);
    tg_str(&b, "tokenizer.ggml.add_space_prefix");
    tg_u32(&b, 7);
    tg_put(&b, "\0", 1);
    free(scores);
    free(types);
    return b;
}

#endif
