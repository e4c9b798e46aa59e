/* test_model_gguf.c — the GGUF reader and the model loader on bad input:
 * every truncation, corrupted fields, wrong tensors, and seeded random
 * mutations through the libFuzzer entry point (tests/fuzz/fuzz_gguf.c). Each
 * failure must be a clean error naming the problem. Also vqm_gguf_release. */
#define _GNU_SOURCE
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model_tiny.h"
#include "vqm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tg_buf g_file;   /* the valid tiny model */
static size_t g_data_end; /* end of the last tensor's bytes */

/* Parses a copy of buf[0..n) and expects status s with `needle` in the message. */
static void expect_parse(const uint8_t *buf, size_t n, vq_status s, const char *needle, const char *what)
{
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, buf, n);
    char err[VQM_ERR_LEN] = "";
    vqm_gguf *g = (vqm_gguf *)1;
    const vq_status got = vqm_gguf_parse(copy, n, &g, err);
    VT_CHECK(got == s, "%s: status %s, expected %s (%s)", what, vq_status_string(got), vq_status_string(s), err);
    if (got != VQ_OK) {
        VT_CHECK(g == NULL, "%s: out not NULL on failure", what);
        VT_CHECK(needle == NULL || strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
    }
    vqm_gguf_free(got == VQ_OK ? g : NULL);
    free(copy);
}

/* Offset just after the first occurrence of string s (as a GGUF string) in the file. */
static size_t after(const char *s)
{
    const uint8_t *p = memmem(g_file.p, g_file.n, s, strlen(s));
    if (p == NULL) abort();
    return (size_t)(p - g_file.p) + strlen(s);
}

static tg_buf patched(size_t off, const void *v, size_t n)
{
    tg_buf b = {malloc(g_file.n), g_file.n, g_file.n};
    memcpy(b.p, g_file.p, g_file.n);
    memcpy(b.p + off, v, n);
    return b;
}

static void test_parse_valid(void)
{
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    VT_CHECK(vqm_gguf_parse(g_file.p, g_file.n, &g, err) == VQ_OK, "%s", err);
    if (g == NULL) return;
    VT_CHECK(g->version == 3 && g->n_kv == 16, "version %u kv %llu", g->version, (unsigned long long)g->n_kv);
    const vqm_gguf_kv *kv = vqm_gguf_find(g, "llama.embedding_length");
    VT_CHECK(kv != NULL && kv->u64 == TINY_DIM, "embedding_length");
    kv = vqm_gguf_find(g, "tokenizer.ggml.tokens");
    VT_CHECK(kv != NULL && kv->arr_n == 260 && kv->arr_strs[259].len == 5 && memcmp(kv->arr_strs[259].s, "hello", 5) == 0,
             "tokens array");
    const vqm_gguf_tensor *t = vqm_gguf_tensor_find(g, "blk.0.attn_k.weight");
    VT_CHECK(t != NULL && t->ne[0] == TINY_DIM && t->ne[1] == TINY_KV * TINY_HD && t->type == 3, "attn_k info");
    VT_CHECK(vqm_gguf_find(g, "no.such.key") == NULL && vqm_gguf_tensor_find(g, "nope") == NULL, "absent lookups");
    vqm_gguf_free(g);
    vqm_gguf_free(NULL);
}

static void test_truncations(void)
{
    for (size_t n = 0; n < g_data_end; n++) {
        char what[64];
        snprintf(what, sizeof what, "prefix of %zu bytes", n);
        expect_parse(g_file.p, n, VQ_ERR_CORRUPT_DATA, n < 4 ? "magic" : "truncated", what);
    }
    expect_parse(g_file.p, g_data_end, VQ_OK, NULL, "the file without its final padding");
}

static void test_bad_fields(void)
{
    const uint32_t v1 = 1, v4 = 4, big_type = 13, nd5 = 5, type99 = 99, type_arr = 9;
    const uint64_t huge = (uint64_t)1 << 62, zero = 0, odd = 8;
    tg_buf b;
    b = patched(0, "GGUG", 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "magic", "bad magic"); free(b.p);
    b = patched(4, &v1, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "version 1", "version 1"); free(b.p);
    b = patched(4, &v4, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "version 4", "version 4"); free(b.p);
    b = patched(8, &huge, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "more than its", "huge tensor count"); free(b.p);
    b = patched(16, &huge, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "more than its", "huge metadata count"); free(b.p);
    b = patched(after("general.architecture"), &big_type, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "type 13", "metadata type 13"); free(b.p);
    b = patched(after("general.architecture") + 4, &huge, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "truncated", "string longer than the file"); free(b.p);
    b = patched(after("tokenizer.ggml.tokens") + 4, &type_arr, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "nested", "nested array"); free(b.p);
    b = patched(after("tokenizer.ggml.tokens") + 8, &huge, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "claims", "array longer than the file"); free(b.p);
    const size_t q = after("blk.0.attn_q.weight");
    b = patched(q, &nd5, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "5 dims", "rank 5"); free(b.p);
    b = patched(q + 4, &zero, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "zero or too large", "dim 0"); free(b.p);
    b = patched(q + 4, &huge, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "zero or too large", "huge dim"); free(b.p);
    b = patched(q + 20, &type99, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "does not know", "type 99"); free(b.p);
    b = patched(q + 24, &odd, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "alignment", "unaligned offset"); free(b.p);
    const uint64_t far = (uint64_t)g_file.n;
    b = patched(q + 24, &far, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "truncated", "offset past the end"); free(b.p);
    const uint32_t align3 = 3;
    b = patched(after("general.alignment") + 4, &align3, 4);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "power of two", "alignment 3"); free(b.p);
    /* a row that is not whole blocks: attn_q's ne0 = 40 for a Q4_0 tensor */
    const uint64_t ne40 = 40;
    b = patched(q + 4, &ne40, 8);
    expect_parse(b.p, b.n, VQ_ERR_CORRUPT_DATA, "block", "partial block"); free(b.p);
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    VT_CHECK(vqm_gguf_parse(g_file.p, g_file.n, NULL, err) == VQ_ERR_INVALID_ARGUMENT, "out NULL");
    VT_CHECK(vqm_gguf_open("/nonexistent/x.gguf", &g, err) == VQ_ERR_IO && strstr(err, "cannot open") && g == NULL,
             "missing file: %s", err);
}

/* Model-level validation on a parsed file: patches make it a wrong model. */
static void expect_model(const tg_buf *b, vq_status s, const char *needle, const char *what)
{
    char err[VQM_ERR_LEN] = "";
    vqm_gguf *g = NULL;
    VT_CHECK(vqm_gguf_parse(b->p, b->n, &g, err) == VQ_OK, "%s: parse: %s", what, err);
    if (g == NULL) return;
    vqm_model *m = (vqm_model *)1;
    const vq_status got = vqm_model_from_gguf(g, &m, err);
    VT_CHECK(got == s, "%s: status %s, expected %s (%s)", what, vq_status_string(got), vq_status_string(s), err);
    if (got == VQ_OK) {
        vqm_model_free(m);
    } else {
        VT_CHECK(m == NULL, "%s: out not NULL", what);
        VT_CHECK(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
        vqm_gguf_free(g);
    }
}

static void test_model_errors(void)
{
    expect_model(&g_file, VQ_OK, NULL, "valid tiny model");
    tg_buf b;
    const size_t q = after("blk.0.attn_q.weight");
    b = patched(q - 6, "X", 1); /* "blk.0.attn_q" -> "blk.0.Xttn_q" */
    expect_model(&b, VQ_ERR_CORRUPT_DATA, "blk.0.attn_q.weight' is missing", "missing attn_q"); free(b.p);
    /* Q5_1 rows are larger than Q4_0's, and attn_q is not the last tensor: the file parses, the model refuses */
    const uint32_t q5_1 = 7;
    b = patched(q + 20, &q5_1, 4);
    expect_model(&b, VQ_ERR_UNSUPPORTED, "type Q5_1; supported", "Q5_1 weights"); free(b.p);
    const uint64_t wrong = TINY_DIM * 2;
    b = patched(q + 12, &wrong, 8);
    expect_model(&b, VQ_ERR_CORRUPT_DATA, "has shape", "attn_q with twice the rows"); free(b.p);
    b = patched(after("general.architecture") + 12, "qwen3", 5); /* replaces "llama" */
    expect_model(&b, VQ_ERR_UNSUPPORTED, "'qwen3' is not supported", "qwen3 architecture"); free(b.p);
    b = patched(after("tokenizer.ggml.model") + 12, "spm!", 4);
    expect_model(&b, VQ_ERR_UNSUPPORTED, "byte-level BPE", "sentencepiece tokenizer"); free(b.p);
    b = patched(after("tokenizer.ggml.pre") + 12, "qwen2!", 6);
    expect_model(&b, VQ_ERR_UNSUPPORTED, "pre-tokenizer", "unknown pre-tokenizer"); free(b.p);
    /* a million layers in a file of a few KB: refused before any buffer is
     * sized from the header (libFuzzer found the 537 MB allocation) */
    const uint32_t huge = 1u << 20;
    b = patched(after("llama.block_count") + 4, &huge, 4);
    expect_model(&b, VQ_ERR_CORRUPT_DATA, "bytes of norm weights", "2^20 layers"); free(b.p);
}

/* Seeded random mutations of the valid file through the fuzz entry point. */
static void fuzz_mutations(const tg_buf *file, size_t data_end, int runs, uint64_t seed)
{
    vq_rng rng;
    vq_rng_seed(&rng, seed);
    const tg_buf g_file = *file;
    const size_t g_data_end = data_end;
    uint8_t *buf = malloc(g_file.n);
    for (int r = 0; r < runs; r++) {
        memcpy(buf, g_file.p, g_file.n);
        size_t n = g_file.n;
        const int kind = (int)(vq_rng_next(&rng) % 4);
        const int edits = 1 + (int)(vq_rng_next(&rng) % 4);
        for (int e = 0; e < edits; e++) {
            /* most of the structure is in the first bytes (header, metadata, tensor infos) */
            const size_t span = vq_rng_next(&rng) % 2 ? g_file.n : (g_data_end < 4096 ? g_data_end : 4096);
            const size_t at = (size_t)(vq_rng_next(&rng) % span);
            if (kind == 0) buf[at] ^= (uint8_t)(1u << (vq_rng_next(&rng) % 8));
            else if (kind == 1) buf[at] = (uint8_t)vq_rng_next(&rng);
            else if (kind == 2 && at + 8 <= n) {
                const uint64_t v = vq_rng_next(&rng) >> (vq_rng_next(&rng) % 64);
                memcpy(buf + at, &v, 8);
            } else n = at;
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    free(buf);
}

/* ... of the tiny Llama, the tiny Gemma (its norms, window keys) and the
 * tiny SentencePiece tokenizer (scores, token types, byte tokens) */
static void test_fuzz_mutations(void)
{
    const int runs = getenv("VQM_FUZZ_RUNS") ? atoi(getenv("VQM_FUZZ_RUNS")) : 1500;
    fuzz_mutations(&g_file, g_data_end, runs, 1234);
    tiny_model m;
    tiny_build_gemma(&m, 2, 5);
    tg_buf gemma = tiny_gguf(&m);
    fuzz_mutations(&gemma, gemma.n, runs / 2, 99);
    tg_buf spm = tiny_spm_gguf();
    fuzz_mutations(&spm, spm.n, runs / 2, 77);
    free(gemma.p);
    free(spm.p);
    tiny_free(&m);
    VT_CHECK(1, "survived");
}

/* vqm_gguf_release: a mapped file's bytes stay readable and the same after
 * their pages are given back (the model releases what it packed); a no-op
 * for a buffer parse and for NULL. */
static void test_release(void)
{
    char path[] = "/tmp/vq_test_gguf_XXXXXX";
    const int fd = mkstemp(path);
    VT_CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    const bool wrote = write(fd, g_file.p, g_file.n) == (ssize_t)g_file.n;
    close(fd);
    VT_CHECK(wrote, "write %s", path);
    char err[VQM_ERR_LEN] = "";
    vqm_gguf *g = NULL;
    VT_CHECK(vqm_gguf_open(path, &g, err) == VQ_OK, "open: %s", err);
    unlink(path); /* the mapping keeps the file */
    if (g == NULL) return;
    vqm_gguf_release(g, g->bytes, g->size);
    VT_CHECK(g->size == g_file.n && memcmp(g->bytes, g_file.p, g_file.n) == 0, "bytes changed after release");
    vqm_gguf_release(g, g->bytes + 1, 0);
    vqm_gguf_release(NULL, g->bytes, g->size);
    vqm_model *m = NULL;
    VT_CHECK(vqm_model_from_gguf(g, &m, err) == VQ_OK, "model: %s", err);
    if (m != NULL) {
        /* it packed and released every matrix: the embedding rows still read back */
        float row[TINY_DIM];
        vqm_matrix_row(&m->embed, 5, row);
        VT_CHECK(isfinite(row[0]) && memcmp(g->bytes, g_file.p, g_file.n) == 0, "after the model's release");
        vqm_model_free(m);
    } else {
        vqm_gguf_free(g);
    }
    vqm_gguf *gm = NULL;
    VT_CHECK(vqm_gguf_parse(g_file.p, g_file.n, &gm, err) == VQ_OK, "parse: %s", err);
    vqm_gguf_release(gm, g_file.p, g_file.n); /* from memory: nothing to give back */
    vqm_gguf_free(gm);
}

/* `test_model_gguf --write-seed FILE llama|gemma|spm` writes the valid tiny
 * Llama, Gemma or SentencePiece tokenizer (the fuzz_gguf seeds in
 * tests/fuzz/corpus/fuzz_gguf/). */
int main(int argc, char **argv)
{
    tiny_model m;
    tiny_build(&m, 1, false, 7);
    g_file = tiny_gguf(&m);
    if (argc == 4 && strcmp(argv[1], "--write-seed") == 0) {
        tiny_model gm;
        tiny_build_gemma(&gm, 2, 5);
        const tg_buf seed = strcmp(argv[3], "gemma") == 0 ? tiny_gguf(&gm)
                            : strcmp(argv[3], "spm") == 0 ? tiny_spm_gguf() : g_file;
        FILE *f = fopen(argv[2], "wb");
        const bool ok = f != NULL && fwrite(seed.p, 1, seed.n, f) == seed.n;
        if (f != NULL) fclose(f);
        return ok ? 0 : 1;
    }
    g_data_end = g_file.n;
    {
        /* the end of the last tensor's bytes: the file minus the final padding */
        const tiny_tensor *last = &m.t[m.nt - 1];
        g_data_end = g_file.n - (32 - last->nbytes % 32) % 32;
    }
    VT_RUN(test_parse_valid);
    VT_RUN(test_truncations);
    VT_RUN(test_bad_fields);
    VT_RUN(test_model_errors);
    VT_RUN(test_fuzz_mutations);
    VT_RUN(test_release);
    free(g_file.p);
    tiny_free(&m);
    return vt_finish();
}
