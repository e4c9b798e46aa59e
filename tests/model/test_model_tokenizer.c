/* test_model_tokenizer.c — the byte-level BPE tokenizer: a tiny vocabulary
 * built here (merges by rank, digit splitting, the GPT-2 regex on spaces),
 * then SmolLM2's tokenizer against the ids of Hugging Face tokenizers
 * (tests/model/data/tokenizer_golden.txt, non-ASCII included) and a byte-exact
 * round trip over a part of the novel. Skips (77) the model part when the
 * model file is absent (tools/fetch_model.sh installs it). */
#include "harness.h"
#include "model_golden.h"
#include "model_tiny.h"
#include "vqm.h"

static int64_t encode(const vqm_tokenizer *t, const char *s, int32_t *ids, int64_t cap)
{
    return vqm_tokenize(t, s, strlen(s), true, ids, cap);
}

static void test_tiny_vocab(void)
{
    tiny_model m;
    tiny_build(&m, 1, true, 3);
    tg_buf b = tiny_gguf(&m);
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    vqm_tokenizer *t = NULL;
    VT_CHECK(vqm_gguf_parse(b.p, b.n, &g, err) == VQ_OK, "%s", err);
    VT_CHECK(g != NULL && vqm_tokenizer_load(g, &t, err) == VQ_OK, "%s", err);
    if (t != NULL) {
        int32_t ids[32];
        int64_t n = encode(t, "hello", ids, 32);
        VT_CHECK(n == 1 && ids[0] == 259, "hello -> %lld ids, first %d", (long long)n, ids[0]);
        n = encode(t, "hellhe", ids, 32);
        VT_CHECK(n == 2 && ids[0] == 258 && ids[1] == 256, "hellhe -> %lld ids %d %d", (long long)n, ids[0], ids[1]);
        /* " hello": the space stays its own byte token ('Ġ' = byte 32), the word merges */
        n = encode(t, " hello", ids, 32);
        VT_CHECK(n == 2 && ids[0] == 32 && ids[1] == 259, " hello -> %lld ids %d %d", (long long)n, ids[0], ids[1]);
        /* "ll" across pieces must not merge: "l l" is two letter pieces split by a space */
        n = encode(t, "l l", ids, 32);
        VT_CHECK(n == 3 && ids[0] == 'l' && ids[1] == ' ' && ids[2] == 'l', "l l -> %lld", (long long)n);
        /* digits one by one */
        n = encode(t, "a123", ids, 32);
        VT_CHECK(n == 4 && ids[1] == '1' && ids[2] == '2' && ids[3] == '3', "a123 -> %lld", (long long)n);
        /* a count past cap: ids beyond cap are not written */
        ids[1] = -7;
        n = vqm_tokenize(t, "abc", 3, false, ids, 1);
        VT_CHECK(n == 3 && ids[1] == -7, "cap 1: n %lld, ids[1] %d", (long long)n, ids[1]);
        /* every byte string round-trips */
        char text[256], back[1024];
        for (int i = 0; i < 255; i++) text[i] = (char)(i + 1);
        n = vqm_tokenize(t, text, 255, false, NULL, 0);
        int32_t *many = malloc(sizeof(int32_t) * (size_t)n);
        vqm_tokenize(t, text, 255, false, many, n);
        size_t w = 0;
        for (int64_t i = 0; i < n; i++) w += vqm_detokenize(t, many[i], back + w, sizeof back - w);
        VT_CHECK(w == 255 && memcmp(back, text, 255) == 0, "round trip of bytes 1..255: %zu bytes", w);
        free(many);
        VT_CHECK(vqm_detokenize(t, -1, back, 8) == 0 && vqm_detokenize(t, 260, back, 8) == 0, "bad ids");
        VT_CHECK(vqm_tokenizer_bos(t) == 1 && vqm_tokenizer_eos(t) == 2, "bos/eos");
    }
    vqm_tokenizer_free(t);
    vqm_gguf_free(g);
    free(b.p);
    tiny_free(&m);
}

static vqm_model *g_model;

static void test_golden_ids(void)
{
    const char *dir = getenv("VQM_TESTDATA");
    size_t len = 0;
    char *txt = golden_read(dir ? dir : "tests/model/data", "tokenizer_golden.txt", &len);
    VT_CHECK(txt != NULL, "cannot read tokenizer_golden.txt under %s", dir ? dir : "tests/model/data");
    if (txt == NULL) return;
    char *text = malloc(4 * len + 4);
    size_t tlen = 0;
    int cases = 0;
    for (char *line = strtok(txt, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == 'T' && line[1] == ' ') {
            tlen = golden_unescape(line + 2, strlen(line + 2), text);
        } else if (line[0] == 'I' && line[1] == ' ') {
            int32_t want[4096];
            int nw = 0;
            for (char *p = line + 2; *p && nw < 4096;) {
                char *end;
                want[nw++] = (int32_t)strtol(p, &end, 10);
                if (end == p) break;
                p = end;
            }
            int32_t got[4096];
            const int64_t n = vqm_tokenize(g_model->tok, text, tlen, true, got, 4096);
            bool same = n == nw;
            int64_t first = -1;
            for (int64_t i = 0; i < n && i < nw; i++)
                if (got[i] != want[i]) { same = false; if (first < 0) first = i; }
            VT_CHECK(same, "text '%.40s': %lld ids vs %d expected; first difference at %lld (%d vs %d)", text,
                     (long long)n, nw, (long long)first, first >= 0 ? got[first] : -1, first >= 0 ? want[first] : -1);
            cases++;
        }
    }
    VT_CHECK(cases >= 5, "only %d golden texts", cases);
    free(text);
    free(txt);
}

static void test_novel_round_trip(void)
{
    const char *dir = getenv("VQM_TESTDATA");
    char path[1024];
    snprintf(path, sizeof path, "%s/../../../data", dir ? dir : "tests/model/data");
    size_t len = 0;
    char *txt = golden_read(path, "pride_and_prejudice.txt", &len);
    VT_CHECK(txt != NULL, "cannot read data/pride_and_prejudice.txt");
    if (txt == NULL) return;
    const size_t n = len < 60000 ? len : 60000;
    const int64_t nt = vqm_tokenize(g_model->tok, txt, n, false, NULL, 0);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)nt);
    vqm_tokenize(g_model->tok, txt, n, false, ids, nt);
    char *back = malloc(n + 64);
    size_t w = 0;
    for (int64_t i = 0; i < nt && w <= n; i++) w += vqm_detokenize(g_model->tok, ids[i], back + w, n + 64 - w);
    VT_CHECK(w == n && memcmp(back, txt, n) == 0, "round trip of %zu bytes gave %zu", n, w);
    VT_CHECK(nt > (int64_t)n / 8 && nt < (int64_t)n / 2, "%lld tokens for %zu bytes", (long long)nt, n);
    printf("  %zu bytes of the novel -> %lld tokens\n", n, (long long)nt);
    free(back);
    free(ids);
    free(txt);
}

int main(void)
{
    VT_RUN(test_tiny_vocab);
    if ((g_model = golden_model()) == NULL) return vt_failures ? 1 : 77;
    VT_RUN(test_golden_ids);
    VT_RUN(test_novel_round_trip);
    vqm_model_free(g_model);
    return vt_finish();
}
