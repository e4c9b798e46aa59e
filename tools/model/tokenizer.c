/* tokenizer.c — GPT-2 byte-level BPE from GGUF metadata.
 *
 * Pipeline (the same as Hugging Face tokenizers' for these models):
 *   1. special tokens (control / user-defined) are cut out of the text;
 *   2. pre-tokenizer: for "smollm"-like rules every \p{N} code point is its
 *      own piece (HF's Digits(individual_digits)), then GPT-2's regex
 *        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *      splits the rest (hand-written matcher below);
 *   3. each piece's bytes map to GPT-2's printable byte alphabet, start as
 *      one symbol per byte and merge by the lowest merge rank until no
 *      ranked pair is left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_priv.h"
#include "unicode_data.h"

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

int32_t vqm_tok_lookup(const vqm_tokenizer *t, const char *s, size_t n)
{
    size_t i = hash_bytes(s, n) & (t->tok_cap - 1);
    while (t->tok_map[i].id >= 0) {
        if (t->tok_map[i].len == n && memcmp(t->tok_map[i].s, s, n) == 0) return t->tok_map[i].id;
        i = (i + 1) & (t->tok_cap - 1);
    }
    return -1;
}

static const merge_entry *merge_lookup(const vqm_tokenizer *t, int32_t a, int32_t b)
{
    const uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
    size_t i = mix64(key) & (t->merge_cap - 1);
    while (t->merges[i].key != 0) {
        if (t->merges[i].key == key) return &t->merges[i];
        i = (i + 1) & (t->merge_cap - 1);
    }
    return NULL;
}

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256 + n. */
static uint32_t byte_to_cp(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
    return 256u + (uint32_t)n;
}

static int put_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 63)); return 2; }
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 63));
    out[2] = (char)(0x80 | (cp & 63));
    return 3;
}

/* Decodes one UTF-8 code point at s[0..n); invalid sequences give the byte
 * itself as a code point >= 0x110000 marker (len 1) so it still encodes. */
static uint32_t get_utf8(const unsigned char *s, size_t n, int *len)
{
    const unsigned c = s[0];
    int need = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (need == 0) { *len = 1; return c; }
    if (need < 0 || (size_t)need >= n) { *len = 1; return 0x110000u + c; }
    uint32_t cp = c & (0x3Fu >> need);
    for (int i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80) { *len = 1; return 0x110000u + c; }
        cp = (cp << 6) | (s[i] & 63);
    }
    *len = need + 1;
    return cp;
}

static bool in_ranges(const vqm_cp_range *r, int n, uint32_t cp)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

static bool is_letter(uint32_t cp)
{
    if (cp < 0x80) return (cp | 32) >= 'a' && (cp | 32) <= 'z';
    return in_ranges(vqm_unicode_letter, vqm_unicode_letter_count, cp);
}
static bool is_number(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(vqm_unicode_number, vqm_unicode_number_count, cp);
}
/* \s: Unicode White_Space */
static bool is_space(uint32_t cp)
{
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

/* ---- output buffer ---- */
void vqm_tok_emit(out_ids *o, int32_t id)
{
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* BPE over one piece (raw bytes). Symbols are token ids in a small array. */
static void bpe_piece(const vqm_tokenizer *t, const unsigned char *s, size_t n, out_ids *o)
{
    int32_t stack_syms[256];
    int32_t *sym = n <= 256 ? stack_syms : malloc(n * sizeof *sym);
    if (sym == NULL) { /* cannot merge without memory: byte tokens are still a valid encoding */
        for (size_t i = 0; i < n; i++)
            if (t->byte_id[s[i]] >= 0) vqm_tok_emit(o, t->byte_id[s[i]]);
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_id[s[i]] >= 0) sym[m++] = t->byte_id[s[i]];
    while (m > 1) {
        int32_t best_rank = INT32_MAX, best_id = -1;
        size_t best = 0;
        for (size_t i = 0; i + 1 < m; i++) {
            const merge_entry *e = merge_lookup(t, sym[i], sym[i + 1]);
            if (e != NULL && e->rank < best_rank) { best_rank = e->rank; best_id = e->id; best = i; }
        }
        if (best_id < 0) break;
        sym[best] = best_id;
        memmove(sym + best + 1, sym + best + 2, (m - best - 2) * sizeof *sym);
        m--;
    }
    for (size_t i = 0; i < m; i++) vqm_tok_emit(o, sym[i]);
    if (sym != stack_syms) free(sym);
}

/* Length in bytes of the GPT-2 regex match at s[0..n) (n > 0, no digits
 * when split_digits handled them already). */
static size_t regex_match(const unsigned char *s, size_t n)
{
    int l0, l1;
    const uint32_t c0 = get_utf8(s, n, &l0);
    if (c0 == '\'' && n >= 2) {
        const char a = (char)s[1], b = n >= 3 ? (char)s[2] : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    size_t i = 0;
    uint32_t c = c0;
    int lc = l0;
    if (c0 == ' ' && n > 1) {
        c = get_utf8(s + 1, n - 1, &l1);
        lc = l1;
        i = 1;
    }
    /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' */
    for (int cls = 0; cls < 3; cls++) {
        bool (*in)(uint32_t) = cls == 0 ? is_letter : cls == 1 ? is_number : NULL;
        const bool first = in != NULL ? in(c) : !(is_space(c) || is_letter(c) || is_number(c));
        if (!first) continue;
        size_t j = i + (size_t)lc;
        while (j < n) {
            int l;
            const uint32_t d = get_utf8(s + j, n - j, &l);
            const bool ok = in != NULL ? in(d) : !(is_space(d) || is_letter(d) || is_number(d));
            if (!ok) break;
            j += (size_t)l;
        }
        return j;
    }
    if (!is_space(c0)) return (size_t)l0; /* cannot happen: c0 is in one of the classes */
    /* '\s+(?!\S)' then '\s+': a whitespace run, minus its last character when a non-space follows */
    size_t j = 0, last = 0;
    while (j < n) {
        int l;
        const uint32_t d = get_utf8(s + j, n - j, &l);
        if (!is_space(d)) break;
        last = j;
        j += (size_t)l;
    }
    if (j < n && last > 0) return last;
    return j;
}

/* Pre-tokenizes and encodes a text without special tokens. */
static void encode_plain(const vqm_tokenizer *t, const unsigned char *s, size_t n, out_ids *o)
{
    size_t i = 0;
    while (i < n) {
        /* the segment up to the next digit (or the digit itself) */
        size_t end = n;
        if (t->split_digits) {
            int l;
            const uint32_t c = get_utf8(s + i, n - i, &l);
            if (is_number(c)) {
                bpe_piece(t, s + i, (size_t)l, o);
                i += (size_t)l;
                continue;
            }
            for (size_t j = i; j < n;) {
                const uint32_t d = get_utf8(s + j, n - j, &l);
                if (is_number(d)) { end = j; break; }
                j += (size_t)l;
            }
        }
        while (i < end) {
            const size_t len = regex_match(s + i, end - i);
            bpe_piece(t, s + i, len, o);
            i += len;
        }
    }
}

int64_t vqm_tokenize(const vqm_tokenizer *t, const char *text, size_t len, bool parse_special, int32_t *ids,
                     int64_t cap)
{
    if (t == NULL || (text == NULL && len > 0) || cap < 0 || (ids == NULL && cap > 0)) return 0;
    out_ids o = {ids, cap, 0};
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    /* control tokens are cut out with parse_special; SentencePiece's
     * user-defined ones (newline runs, HTML tags: added tokens to Hugging
     * Face, user-defined to llama.cpp) always */
    if ((parse_special || t->spm) && t->n_special > 0) {
        for (size_t i = 0; i < len; i++) {
            for (int32_t k = t->special_at[s[i]]; k < t->special_at[s[i] + 1]; k++) {
                const vqm_str tk = t->tokens[t->special[k]];
                if (!parse_special && t->types[t->special[k]] != 4) continue;
                if (tk.len <= len - i && memcmp(s + i, tk.s, tk.len) == 0) {
                    if (t->spm) vqm_spm_encode(t, s + start, i - start, start == 0, &o);
                    else encode_plain(t, s + start, i - start, &o);
                    vqm_tok_emit(&o, t->special[k]);
                    i += tk.len;
                    start = i;
                    i--; /* the loop's i++ */
                    break;
                }
            }
        }
    }
    if (t->spm) vqm_spm_encode(t, s + start, len - start, start == 0, &o);
    else encode_plain(t, s + start, len - start, &o);
    return o.n;
}

size_t vqm_detokenize(const vqm_tokenizer *t, int32_t id, char *buf, size_t cap)
{
    if (t == NULL || id < 0 || id >= t->n_vocab || buf == NULL) return 0;
    if (t->spm) return vqm_spm_detokenize(t, id, buf, cap);
    const vqm_str tk = t->tokens[id];
    const unsigned char *s = (const unsigned char *)tk.s;
    size_t w = 0;
    if (t->types[id] == 3 || t->types[id] == 4) {
        for (size_t i = 0; i < tk.len && w < cap; i++) buf[w++] = (char)s[i];
        return w;
    }
    for (size_t i = 0; i < tk.len && w < cap;) {
        int l;
        const uint32_t cp = get_utf8(s + i, tk.len - i, &l);
        i += (size_t)l;
        const int b = cp < 324 ? t->cp_byte[cp] : -1;
        if (b >= 0) buf[w++] = (char)b;
    }
    return w;
}

int32_t vqm_tokenizer_vocab(const vqm_tokenizer *t) { return t->n_vocab; }
int32_t vqm_tokenizer_bos(const vqm_tokenizer *t) { return t->bos; }
int32_t vqm_tokenizer_eos(const vqm_tokenizer *t) { return t->eos; }
bool vqm_tokenizer_add_bos(const vqm_tokenizer *t) { return t->add_bos; }
void vqm_tokenizer_start_window(const vqm_tokenizer *t, int32_t *win)
{
    if (t->add_bos) win[0] = t->bos;
}
bool vqm_tokenizer_is_control(const vqm_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->types[id] == 3;
}

void vqm_tokenizer_free(vqm_tokenizer *t)
{
    if (t == NULL) return;
    free(t->types);
    free(t->tok_map);
    free(t->merges);
    free(t->special);
    free(t->scores);
    free(t);
}

/* Order of special tokens: by first byte, then longest first (the longest
 * match wins), then by id. */
static int special_cmp(const vqm_tokenizer *t, int32_t a, int32_t b)
{
    const vqm_str x = t->tokens[a], y = t->tokens[b];
    if ((uint8_t)x.s[0] != (uint8_t)y.s[0]) return (uint8_t)x.s[0] < (uint8_t)y.s[0] ? -1 : 1;
    if (x.len != y.len) return x.len > y.len ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* Sorts the special ids (special_cmp) and indexes them by first byte
 * (special_at). Shell sort: thousands in SentencePiece vocabularies. */
static void sort_special(vqm_tokenizer *t)
{
    for (int gap = t->n_special / 2; gap > 0; gap /= 2)
        for (int i = gap; i < t->n_special; i++) {
            const int32_t v = t->special[i];
            int j = i;
            while (j >= gap && special_cmp(t, t->special[j - gap], v) > 0) {
                t->special[j] = t->special[j - gap];
                j -= gap;
            }
            t->special[j] = v;
        }
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_special && (uint8_t)t->tokens[t->special[k]].s[0] < b) k++;
        t->special_at[b] = k;
    }
}

static int64_t kv_int(const vqm_gguf *g, const char *key, int64_t dflt)
{
    const vqm_gguf_kv *kv = vqm_gguf_find(g, key);
    return kv != NULL && kv->type != VQM_GGUF_STRING && kv->type != VQM_GGUF_ARRAY ? kv->i64 : dflt;
}

vq_status vqm_tokenizer_load(const vqm_gguf *g, vqm_tokenizer **out, char *err)
{
    if (out == NULL || g == NULL) return vqm_fail(err, VQ_ERR_INVALID_ARGUMENT, "tokenizer: NULL argument");
    *out = NULL;
    const vqm_gguf_kv *model = vqm_gguf_find(g, "tokenizer.ggml.model");
    if (model == NULL || model->type != VQM_GGUF_STRING)
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "tokenizer: tokenizer.ggml.model (a string) is missing");
    const bool spm = vqm_str_eq(model->str, "llama");
    if (!spm && !vqm_str_eq(model->str, "gpt2"))
        return vqm_fail(err, VQ_ERR_UNSUPPORTED, "tokenizer: tokenizer.ggml.model must be gpt2 (byte-level BPE) or "
                    "llama (SentencePiece)");
    const vqm_gguf_kv *toks = vqm_gguf_find(g, "tokenizer.ggml.tokens");
    const vqm_gguf_kv *merges = vqm_gguf_find(g, "tokenizer.ggml.merges");
    const vqm_gguf_kv *types = vqm_gguf_find(g, "tokenizer.ggml.token_type");
    if (toks == NULL || toks->type != VQM_GGUF_ARRAY || toks->arr_type != VQM_GGUF_STRING || toks->arr_n == 0 ||
        toks->arr_n > (1u << 24))
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "tokenizer: tokenizer.ggml.tokens must be 1..2^24 strings");
    if (!spm && (merges == NULL || merges->type != VQM_GGUF_ARRAY || merges->arr_type != VQM_GGUF_STRING))
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "tokenizer: tokenizer.ggml.merges (strings) is missing");
    if (types != NULL && (types->type != VQM_GGUF_ARRAY || types->arr_type != VQM_GGUF_I32 ||
                          types->arr_n != toks->arr_n))
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "tokenizer: tokenizer.ggml.token_type must be i32 x n_vocab");
    bool split_digits = false;
    const vqm_gguf_kv *pre = vqm_gguf_find(g, "tokenizer.ggml.pre");
    if (!spm && pre != NULL && pre->type == VQM_GGUF_STRING) {
        static const char *const digit_split[] = {"smollm", "starcoder", "refact", "command-r", "codeshell",
                                                  "exaone", "minerva"};
        static const char *const plain[] = {"gpt2", "default", "gpt-2"};
        bool known = false;
        for (size_t i = 0; i < sizeof digit_split / sizeof *digit_split; i++)
            if (vqm_str_eq(pre->str, digit_split[i])) known = split_digits = true;
        for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
            if (vqm_str_eq(pre->str, plain[i])) known = true;
        if (!known) {
            char name[64];
            snprintf(name, sizeof name, "'%.*s'", (int)(pre->str.len < 40 ? pre->str.len : 40), pre->str.s);
            return vqm_fail(err, VQ_ERR_UNSUPPORTED, "tokenizer: unsupported pre-tokenizer tokenizer.ggml.pre = %s", name);
        }
    }
    vqm_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL) return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    t->n_vocab = (int32_t)toks->arr_n;
    t->tokens = toks->arr_strs;
    t->split_digits = split_digits;
    t->types = calloc((size_t)t->n_vocab, sizeof *t->types);
    t->tok_cap = 1;
    while (t->tok_cap < 2 * (size_t)t->n_vocab) t->tok_cap <<= 1;
    t->spm = spm;
    t->merge_cap = 1;
    while (!spm && t->merge_cap < 2 * (size_t)merges->arr_n + 2) t->merge_cap <<= 1;
    t->tok_map = malloc(t->tok_cap * sizeof *t->tok_map);
    t->merges = calloc(t->merge_cap, sizeof *t->merges);
    t->special = calloc((size_t)t->n_vocab, sizeof *t->special);
    if (t->types == NULL || t->tok_map == NULL || t->merges == NULL || t->special == NULL) {
        vqm_tokenizer_free(t);
        return vqm_fail(err, VQ_ERR_OUT_OF_MEMORY, "tokenizer: out of memory");
    }
    for (size_t i = 0; i < t->tok_cap; i++) t->tok_map[i].id = -1;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        int32_t ty = 1;
        if (types != NULL) memcpy(&ty, types->arr_data + 4 * (size_t)id, 4);
        t->types[id] = ty;
        const vqm_str s = t->tokens[id];
        if (s.len > UINT32_MAX) continue;
        if ((ty == 3 || ty == 4) && s.len > 0) t->special[t->n_special++] = id;
        if (vqm_tok_lookup(t, s.s, s.len) >= 0) continue; /* duplicate string: first id wins */
        size_t k = hash_bytes(s.s, s.len) & (t->tok_cap - 1);
        while (t->tok_map[k].id >= 0) k = (k + 1) & (t->tok_cap - 1);
        t->tok_map[k] = (tok_entry){s.s, (uint32_t)s.len, id};
    }
    sort_special(t);
    int n_bytes = 0;
    for (int c = 0; c < 324; c++) t->cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) {
        t->cp_byte[byte_to_cp(b)] = (int16_t)b;
        char buf[4];
        const int l = put_utf8(byte_to_cp(b), buf);
        t->byte_id[b] = vqm_tok_lookup(t, buf, (size_t)l);
        n_bytes += t->byte_id[b] >= 0;
    }
    if (spm) { /* byte_id from the <0xXX> tokens instead */
        const vq_status st = vqm_spm_load(t, g, err);
        if (st != VQ_OK) {
            vqm_tokenizer_free(t);
            return st;
        }
        n_bytes = 256;
    }
    if (n_bytes < 64) { /* 'a'..'z', 'A'..'Z', digits at least: otherwise this is not byte-level BPE */
        vqm_tokenizer_free(t);
        return vqm_fail(err, VQ_ERR_CORRUPT_DATA, "tokenizer: fewer than 64 of the 256 byte tokens are in the vocabulary "
                    "(not byte-level BPE)");
    }
    char buf[1024];
    for (uint64_t r = 0; !spm && r < merges->arr_n; r++) {
        const vqm_str m = merges->arr_strs[r];
        const char *sp = m.len > 0 ? memchr(m.s, ' ', m.len) : NULL;
        if (sp == NULL || m.len >= sizeof buf) continue; /* not a pair: ignored, as by HF */
        const size_t la = (size_t)(sp - m.s), lb = m.len - la - 1;
        const int32_t a = vqm_tok_lookup(t, m.s, la), b = vqm_tok_lookup(t, sp + 1, lb);
        memcpy(buf, m.s, la);
        memcpy(buf + la, sp + 1, lb);
        const int32_t id = vqm_tok_lookup(t, buf, la + lb);
        if (a < 0 || b < 0 || id < 0 || merge_lookup(t, a, b) != NULL) continue;
        const uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
        size_t k = mix64(key) & (t->merge_cap - 1);
        while (t->merges[k].key != 0) k = (k + 1) & (t->merge_cap - 1);
        t->merges[k] = (merge_entry){key, (int32_t)r, id};
    }
    const int64_t bos = kv_int(g, "tokenizer.ggml.bos_token_id", -1), eos = kv_int(g, "tokenizer.ggml.eos_token_id", -1);
    t->bos = bos >= 0 && bos < t->n_vocab ? (int32_t)bos : -1;
    t->eos = eos >= 0 && eos < t->n_vocab ? (int32_t)eos : -1;
    t->add_bos = kv_int(g, "tokenizer.ggml.add_bos_token", 0) != 0 && t->bos >= 0;
    *out = t;
    return VQ_OK;
}
