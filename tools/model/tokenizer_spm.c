/* tokenizer_spm.c — SentencePiece BPE from GGUF metadata
 * (tokenizer.ggml.model = llama: tokens with scores, <0xXX> byte tokens),
 * the tokenizer of Gemma and the first Llamas. After the special tokens are
 * cut out (tokenizer.c):
 *   1. every space becomes U+2581 ("\xe2\x96\x81", SentencePiece's space),
 *      and one goes before the text when add_space_prefix;
 *   2. the text starts as one symbol per UTF-8 character; repeatedly the
 *      adjacent pair whose concatenation is a vocabulary token of the
 *      highest score merges (the leftmost on ties), until no pair forms a
 *      token (SentencePiece's BPE; llama.cpp's llm_tokenizer_spm);
 *   3. each symbol is its token, or, not in the vocabulary, the byte tokens
 *      of its bytes (byte fallback).
 * A heap of candidate pairs keeps this O(n log n) on a whole novel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_priv.h"

typedef struct spm_sym {
    int32_t prev, next;  /* -1 at the ends */
    uint32_t start, len; /* bytes in the escaped text; len 0 once merged into its left neighbour */
} spm_sym;

typedef struct spm_pair {
    int32_t left, right;
    float score;
    uint32_t len; /* the two symbols' bytes when pushed: a pair whose symbols changed since is stale */
} spm_pair;

typedef struct spm_heap {
    spm_pair *a;
    size_t n;
} spm_heap;

/* a before b: the higher score, then the leftmost */
static bool pair_first(const spm_pair *a, const spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_heap *h, spm_pair p)
{
    size_t i = h->n++;
    while (i > 0 && pair_first(&p, &h->a[(i - 1) / 2])) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = p;
}

static spm_pair heap_pop(spm_heap *h)
{
    const spm_pair top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pair_first(&h->a[c + 1], &h->a[c])) c++;
        if (!pair_first(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

/* Pushes (l, r) when their concatenation is a token. */
static void try_pair(const vqm_tokenizer *t, const char *text, const spm_sym *sym, spm_heap *h, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const int32_t id = vqm_tok_lookup(t, text + sym[l].start, len);
    if (id < 0 || t->types[id] == 3) return; /* control tokens come only from the text's special tokens */
    heap_push(h, (spm_pair){l, r, t->scores[id], len});
}

/* The symbol's token, or its bytes' tokens. */
static void emit_symbol(const vqm_tokenizer *t, const char *s, uint32_t n, out_ids *o)
{
    const int32_t id = vqm_tok_lookup(t, s, n);
    if (id >= 0) {
        vqm_tok_emit(o, id);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        if (t->byte_id[(uint8_t)s[i]] >= 0) vqm_tok_emit(o, t->byte_id[(uint8_t)s[i]]);
}

/* Bytes of the UTF-8 character starting with byte c (1 for a stray byte). */
static uint32_t utf8_len(uint8_t c)
{
    return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
}

void vqm_spm_encode(const vqm_tokenizer *t, const unsigned char *s, size_t n, bool at_start, out_ids *o)
{
    if (n == 0) return;
    const size_t cap = 3 * n + 3;
    char *text = malloc(cap);
    spm_sym *sym = malloc((n + 1) * sizeof *sym);
    spm_heap h = {malloc((3 * n + 4) * sizeof *h.a), 0};
    if (text == NULL || sym == NULL || h.a == NULL) { /* cannot merge without memory: bytes are still an encoding */
        for (size_t i = 0; i < n; i++)
            if (t->byte_id[s[i]] >= 0) vqm_tok_emit(o, t->byte_id[s[i]]);
        free(text);
        free(sym);
        free(h.a);
        return;
    }
    size_t len = 0;
    if (at_start && t->add_space_prefix) {
        memcpy(text, "\xe2\x96\x81", 3);
        len = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(text + len, "\xe2\x96\x81", 3);
            len += 3;
        } else {
            text[len++] = (char)s[i];
        }
    }
    int32_t m = 0;
    for (size_t i = 0; i < len; m++) {
        uint32_t l = utf8_len((uint8_t)text[i]);
        if (l > len - i) l = (uint32_t)(len - i);
        sym[m] = (spm_sym){m - 1, m + 1, (uint32_t)i, l};
        i += l;
    }
    sym[m - 1].next = -1;
    for (int32_t i = 0; i + 1 < m; i++) try_pair(t, text, sym, &h, i, i + 1);
    while (h.n > 0) {
        const spm_pair p = heap_pop(&h);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.len) continue; /* stale */
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        try_pair(t, text, sym, &h, l->prev, p.left);
        try_pair(t, text, sym, &h, p.left, l->next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) emit_symbol(t, text + sym[i].start, sym[i].len, o);
    free(text);
    free(sym);
    free(h.a);
}

size_t vqm_spm_detokenize(const vqm_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    const vqm_str tk = t->tokens[id];
    size_t w = 0;
    if (t->types[id] == 6 && tk.len == 6 && cap > 0) { /* <0xXX> */
        char hex[3] = {tk.s[3], tk.s[4], 0};
        buf[w++] = (char)strtoul(hex, NULL, 16);
        return w;
    }
    for (size_t i = 0; i < tk.len && w < cap;) {
        if (t->types[id] != 3 && i + 3 <= tk.len && memcmp(tk.s + i, "\xe2\x96\x81", 3) == 0) {
            buf[w++] = ' ';
            i += 3;
        } else {
            buf[w++] = tk.s[i++];
        }
    }
    return w;
}

vq_status vqm_spm_load(vqm_tokenizer *t, const vqm_gguf *g, char *err)
{
    const vqm_gguf_kv *sc = vqm_gguf_find(g, "tokenizer.ggml.scores");
    if (sc == NULL || sc->type != VQM_GGUF_ARRAY || sc->arr_type != VQM_GGUF_F32 || sc->arr_n != (uint64_t)t->n_vocab)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA,
                        "tokenizer: SentencePiece (tokenizer.ggml.model = llama) needs tokenizer.ggml.scores, f32 x %d",
                        (int)t->n_vocab);
    t->scores = malloc((size_t)t->n_vocab * sizeof *t->scores);
    if (t->scores == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    memcpy(t->scores, sc->arr_data, (size_t)t->n_vocab * sizeof *t->scores);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = vqm_tok_lookup(t, name, 6);
    }
    const vqm_gguf_kv *asp = vqm_gguf_find(g, "tokenizer.ggml.add_space_prefix");
    t->add_space_prefix = asp == NULL || asp->type == VQM_GGUF_STRING || asp->type == VQM_GGUF_ARRAY || asp->u64 != 0;
    return VQ_OK;
}
