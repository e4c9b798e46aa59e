/* tokenizer_priv.h — the tokenizer's state, shared by the byte-level BPE
 * (tokenizer.c) and SentencePiece (tokenizer_spm.c). Private. */
#ifndef VQM_TOKENIZER_PRIV_H
#define VQM_TOKENIZER_PRIV_H

#include "vqm.h"

typedef struct merge_entry {
    uint64_t key;   /* left id << 32 | right id; 0 = empty slot (id 0 pairs are offset by 1) */
    int32_t rank, id;
} merge_entry;

typedef struct tok_entry {
    const char *s;
    uint32_t len;
    int32_t id;     /* -1 = empty */
} tok_entry;

struct vqm_tokenizer {
    int32_t n_vocab;
    vqm_str *tokens;          /* into the GGUF */
    int32_t *types;           /* token_type per id (1 normal, 3 control, 4 user-defined, 6 byte) */
    tok_entry *tok_map;       /* string -> id */
    size_t tok_cap;
    merge_entry *merges;      /* (left, right) -> rank, merged id */
    size_t merge_cap;
    int32_t byte_id[256];     /* id of each byte's one-character token; -1 when the vocabulary has none
                                 (bytes never seen in training, e.g. 0xC0): such bytes are dropped,
                                 as by Hugging Face's BPE without an unknown token */
    int16_t cp_byte[324];     /* inverse of byte_to_cp: code point (< 324) -> byte, -1 = none */
    int32_t *special;         /* ids of control/user-defined tokens, longest first */
    int n_special;
    bool split_digits;
    int32_t bos, eos;
    bool add_bos;
    /* tokenizer.ggml.model = llama (SentencePiece, tokenizer_spm.c) */
    bool spm;
    bool add_space_prefix;    /* a U+2581 (SentencePiece's space) before the text */
    float *scores;            /* [n_vocab] merge priorities (higher first) */
    int32_t special_at[257];  /* special[special_at[b] .. special_at[b + 1]) start with byte b */
};

/* The encoder's output: ids written while n < cap, n counts them all. */
typedef struct out_ids {
    int32_t *ids;
    int64_t cap, n;
} out_ids;

void vqm_tok_emit(out_ids *o, int32_t id);
/* id of the token whose string is s[0..n), or -1. */
int32_t vqm_tok_lookup(const vqm_tokenizer *t, const char *s, size_t n);
/* SentencePiece (tokenizer_spm.c): encodes a text without special tokens
 * (at_start: the text's first segment, which gets the space prefix); a
 * token's bytes; reads the scores and byte tokens at load. */
void vqm_spm_encode(const vqm_tokenizer *t, const unsigned char *s, size_t n, bool at_start, out_ids *o);
size_t vqm_spm_detokenize(const vqm_tokenizer *t, int32_t id, char *buf, size_t cap);
vq_status vqm_spm_load(vqm_tokenizer *t, const vqm_gguf *g, char *err);



#endif
