/* fuzz_gguf.c — libFuzzer target on the GGUF reader and the model /
 * tokenizer loaders that validate what it returns (cmake -DVQ_FUZZ=ON with
 * clang; test_model_gguf also calls it on seeded mutations in every run).
 * Any input must give VQ_OK or a clean error, never a crash or over-read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vqm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy: an over-read past `size` is then visible to ASan */
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL) return 0;
    if (size > 0) memcpy(copy, data, size);
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    if (vqm_gguf_parse(copy, size, &g, err) == VQ_OK) {
        /* touch everything the reader claims is inside the buffer */
        volatile uint8_t sink = 0;
        for (uint64_t i = 0; i < g->n_tensors; i++)
            if (g->tensors[i].nbytes > 0) sink ^= g->tensors[i].data[g->tensors[i].nbytes - 1];
        for (uint64_t i = 0; i < g->n_kv; i++)
            if (g->kv[i].str.len > 0) sink ^= (uint8_t)g->kv[i].str.s[g->kv[i].str.len - 1];
        (void)sink;
        vqm_model *m = NULL;
        if (vqm_model_from_gguf(g, &m, err) == VQ_OK) {
            int32_t ids[64];
            vqm_tokenize(m->tok, "Hello 123 world", 15, true, ids, 64);
            vqm_model_free(m); /* frees g */
        } else {
            /* a file that is not a whole model still reaches the tokenizer loaders */
            vqm_tokenizer *t = NULL;
            if (vqm_tokenizer_load(g, &t, err) == VQ_OK) {
                static const char text[] = "Hello  123\n\nworld <x> \xc3\xa9\xff";
                int32_t ids[64];
                const int64_t n = vqm_tokenize(t, text, sizeof text - 1, true, ids, 64);
                char out[64];
                for (int64_t i = 0; i < n && i < 64; i++) vqm_detokenize(t, ids[i], out, sizeof out);
                vqm_tokenizer_free(t);
            }
            vqm_gguf_free(g);
        }
    }
    free(copy);
    return 0;
}
