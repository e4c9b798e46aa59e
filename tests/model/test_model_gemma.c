/* test_model_gemma.c — the Gemma 3 architecture and SentencePiece tokenizer
 * of the model runtime.
 *  - a tiny random Gemma 3 (tests/model_tiny.h: Q5_0 and other weight
 *    types, GQA 4:2, tied output, one sliding-window layer of 3 tokens and
 *    one global layer) against a float64 forward written here from the
 *    architecture's definition (embedding times sqrt(dim), per-head q/k
 *    norms, RoPE on (i, i + D/2) pairs with the local / global bases, post
 *    norms, GeGLU with the tanh GELU, the window's mask) on every ISA, chunk
 *    sizes 1, 4 and all, on the f32 oracle and through vq_cache (f16), whose
 *    sliding window masks the local layer's old tokens, with the memory
 *    accounting;
 *  - a tiny SentencePiece vocabulary built here: merges by score, the
 *    leftmost on ties, byte fallback, U+2581 for spaces, user-defined
 *    tokens always cut out, control tokens only with parse_special;
 *  - Gemma 3 270M (models/gemma-3-270m-q4_k_m.gguf) against transformers
 *    (tests/model/model_reference_gemma.py): token ids of every text of
 *    tests/model/data/gemma_tokenizer_golden.txt, and logits (gemma_logits_golden.txt)
 *    within 1e-3 of max |logit| per position through vq_cache f16 and the
 *    f32 oracle; vq_cache f16 also on a 600-token prompt past the 512-token
 *    window, whose last chunks evict the local layers' first 64-token page
 *    (release builds: it takes seconds).
 * The Gemma part skips (77) when the model file is absent
 * (sh tools/fetch_model.sh --gemma installs it). */
#include <math.h>

#include "harness.h"
#include "model_golden.h"
#include "model_tiny.h"
#include "vqm.h"

/* ---- the float64 reference forward of the tiny Gemma ---- */

/* y[0..n) = x / rms(x) * w (Gemma's GGUF holds 1 + w already) */
static void ref_norm(const tiny_model *m, const char *name, const double *x, double *y, int n)
{
    const tiny_tensor *t = tiny_find(m, name);
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * tiny_get(t, 0, i);
}

/* rotate-half RoPE: pairs (i, i + D/2) */
static void ref_rope_neox(double *v, int heads, int pos, double base)
{
    for (int h = 0; h < heads; h++)
        for (int i = 0; i < TINY_HD / 2; i++) {
            const double a = pos * pow(base, -2.0 * i / TINY_HD);
            double *p = v + h * TINY_HD;
            const double x0 = p[i], x1 = p[i + TINY_HD / 2];
            p[i] = x0 * cos(a) - x1 * sin(a);
            p[i + TINY_HD / 2] = x0 * sin(a) + x1 * cos(a);
        }
}

static void ref_forward(const tiny_model *m, const int32_t *tok, int T, double *logits)
{
    enum { QD = TINY_HEADS * TINY_HD, KVD = TINY_KV * TINY_HD };
    static double K[2][TINY_MAXT][KVD], V[2][TINY_MAXT][KVD];
    const tiny_tensor *emb = tiny_find(m, "token_embd.weight");
    for (int t = 0; t < T; t++) {
        double x[TINY_DIM], xb[TINY_DIM], q[QD], att[QD], o[TINY_DIM], h1[TINY_HIDDEN], h3[TINY_HIDDEN];
        for (int i = 0; i < TINY_DIM; i++) x[i] = tiny_get(emb, tok[t], i) * sqrt((double)TINY_DIM);
        for (int l = 0; l < m->n_layers; l++) {
            char n[64];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s.weight", l, s), n)
            const bool local = (l + 1) % TINY_SWA_PATTERN != 0;
            ref_norm(m, NAME("attn_norm"), x, xb, TINY_DIM);
            tiny_matvec(m, NAME("attn_q"), xb, q);
            tiny_matvec(m, NAME("attn_k"), xb, K[l][t]);
            tiny_matvec(m, NAME("attn_v"), xb, V[l][t]);
            for (int h = 0; h < TINY_HEADS; h++) ref_norm(m, NAME("attn_q_norm"), q + h * TINY_HD, q + h * TINY_HD, TINY_HD);
            for (int h = 0; h < TINY_KV; h++)
                ref_norm(m, NAME("attn_k_norm"), K[l][t] + h * TINY_HD, K[l][t] + h * TINY_HD, TINY_HD);
            ref_rope_neox(q, TINY_HEADS, t, local ? 10000.0 : 1e6);
            ref_rope_neox(K[l][t], TINY_KV, t, local ? 10000.0 : 1e6);
            const int j0 = local && t >= TINY_WINDOW ? t - TINY_WINDOW + 1 : 0;
            tiny_attend(q, (const double (*)[KVD])K[l], (const double (*)[KVD])V[l], j0, t, att);
            tiny_matvec(m, NAME("attn_output"), att, o);
            ref_norm(m, NAME("post_attention_norm"), o, o, TINY_DIM);
            for (int i = 0; i < TINY_DIM; i++) x[i] += o[i];
            ref_norm(m, NAME("ffn_norm"), x, xb, TINY_DIM);
            tiny_matvec(m, NAME("ffn_gate"), xb, h1);
            tiny_matvec(m, NAME("ffn_up"), xb, h3);
            for (int i = 0; i < TINY_HIDDEN; i++) {
                const double g = h1[i];
                h1[i] = 0.5 * g * (1 + tanh(sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * h3[i];
            }
            tiny_matvec(m, NAME("ffn_down"), h1, o);
            ref_norm(m, NAME("post_ffw_norm"), o, o, TINY_DIM);
            for (int i = 0; i < TINY_DIM; i++) x[i] += o[i];
#undef NAME
        }
        ref_norm(m, "output_norm.weight", x, xb, TINY_DIM);
        tiny_matvec(m, "token_embd.weight", xb, logits + (size_t)t * m->vocab);
    }
}

static vq_ctx *make_ctx(int threads, const char *isa)
{
    const char *env = getenv("VQ_ISA");
    char saved[32] = "";
    if (env != NULL) snprintf(saved, sizeof saved, "%s", env);
    if (isa != NULL) setenv("VQ_ISA", isa, 1);
    vq_ctx *ctx = NULL;
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = threads};
    vq_ctx_create(&cfg, &ctx);
    if (env != NULL) setenv("VQ_ISA", saved, 1);
    else unsetenv("VQ_ISA");
    return ctx;
}

static double max_diff(const float *lg, const double *ref, int n, double *mx)
{
    double worst = 0;
    *mx = 0;
    for (int i = 0; i < n; i++) {
        *mx = fmax(*mx, fabs(ref[i]));
        worst = fmax(worst, isnan(lg[i]) ? INFINITY : fabs(lg[i] - ref[i]));
    }
    return worst;
}

static void test_tiny_gemma(void)
{
    tiny_model m;
    tiny_build_gemma(&m, 2, 21);
    tg_buf b = tiny_gguf(&m);
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    vqm_model *model = NULL;
    VT_CHECK(vqm_gguf_parse(b.p, b.n, &g, err) == VQ_OK && vqm_model_from_gguf(g, &model, err) == VQ_OK, "%s", err);
    if (model == NULL) return;
    const vqm_config *c = &model->cfg;
    VT_CHECK(c->gemma && c->tied_output && c->sliding_window == TINY_WINDOW && c->swa_pattern == TINY_SWA_PATTERN &&
                 model->layers[0].local && !model->layers[1].local && c->rope_base_local == 10000.0f &&
                 c->rope_base == 1e6f && fabsf(c->embed_scale - 8.0f) < 1e-6f,
             "config: gemma %d tied %d window %d pattern %d local %d %d", c->gemma, c->tied_output, c->sliding_window,
             c->swa_pattern, model->layers[0].local, model->layers[1].local);
    const int32_t tok[TINY_MAXT] = {259, 17, 200, 3, 259, 88};
    enum { NV = 260 };
    double ref[TINY_MAXT * NV];
    ref_forward(&m, tok, TINY_MAXT, ref);
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    for (int ii = 0; ii < 3; ii++) {
        vq_ctx *ctx = make_ctx(2, isas[ii]);
        const int batches[] = {1, 4, TINY_MAXT};
        for (int bi = 0; bi < 3; bi++) {
            /* the f32 oracle over all six tokens: the local layer masks the oldest */
            float *lg = golden_run(model, ctx, NULL, tok, TINY_MAXT, batches[bi], true);
            double mx = 0;
            const double d = lg != NULL ? max_diff(lg, ref, TINY_MAXT * NV, &mx) : INFINITY;
            VT_CHECK(d <= 1e-4 * mx, "%s f32 batch %d: max |diff| %.3g, max |logit| %.3g", vq_ctx_isa(ctx),
                     batches[bi], d, mx);
            free(lg);
            /* vq_cache f16, a session longer than the window: the cache's window masks
             * the local layer's oldest tokens */
            lg = golden_run(model, ctx, "f16", tok, TINY_MAXT, batches[bi], true);
            const double dh = lg != NULL ? max_diff(lg, ref, TINY_MAXT * NV, &mx) : INFINITY;
            VT_CHECK(dh <= 2e-3 * mx, "%s vq_cache f16 batch %d: max |diff| %.3g, max |logit| %.3g",
                     vq_ctx_isa(ctx), batches[bi], dh, mx);
            free(lg);
        }
        vq_ctx_free(ctx);
    }
    /* sessions no longer and longer than the window: every layer in the cache,
     * the window's tokens held (six tokens fill no page, so none is evicted) */
    vq_ctx *ctx = make_ctx(1, NULL);
    const vq_cache_config cc = {.preset = "f16"};
    for (int mt = TINY_WINDOW; mt <= TINY_MAXT; mt += TINY_MAXT - TINY_WINDOW) {
        const vqm_session_config sc = {.max_tokens = mt, .max_batch = 2, .attn = VQM_ATTN_CACHE, .cache = &cc};
        vqm_session *s = NULL;
        VT_CHECK(vqm_session_create(model, ctx, &sc, &s, err) == VQ_OK, "%s", err);
        if (s == NULL) continue;
        float *lg = malloc(sizeof(float) * TINY_MAXT * NV);
        VT_CHECK(vqm_forward(s, tok, mt, mt, lg, err) == VQ_OK, "%s", err);
        double mx = 0;
        const double d = max_diff(lg, ref, mt * NV, &mx);
        VT_CHECK(d <= 2e-3 * mx, "max_tokens %d: max |diff| %.3g, max |logit| %.3g", mt, d, mx);
        int w0 = -1, w1 = -1;
        vq_cache_get_sliding_window(vqm_session_cache(s), 0, &w0);
        vq_cache_get_sliding_window(vqm_session_cache(s), 1, &w1);
        VT_CHECK(w0 == TINY_WINDOW && w1 == 0, "the cache's windows %d %d", w0, w1);
        vq_cache_memory_report mem;
        VT_CHECK(vqm_session_memory(s, &mem, err) == VQ_OK, "%s", err);
        const int64_t kv_bytes = (int64_t)TINY_KV * TINY_HD * 2 * 2; /* keys and values of a token, f16 */
        const int64_t want = 2 * mt * kv_bytes;
        VT_CHECK(mem.tokens == 2 * mt && mem.code_bytes + mem.param_bytes + mem.residual_bytes == want,
                 "max_tokens %d: %lld tokens, %lld bytes, expected %lld", mt, (long long)mem.tokens,
                 (long long)(mem.code_bytes + mem.param_bytes + mem.residual_bytes), (long long)want);
        free(lg);
        vqm_session_free(s);
    }
    vq_ctx_free(ctx);
    vqm_model_free(model);
    free(b.p);
    tiny_free(&m);
}

/* A Gemma file without a post norm, and with a bad window, is refused by name. */
static void test_gemma_errors(void)
{
    tiny_model m;
    tiny_build_gemma(&m, 2, 22);
    for (int i = 0; i < m.nt; i++)
        if (strcmp(m.t[i].name, "blk.1.post_ffw_norm.weight") == 0) m.t[i].name[6] = 'X';
    tg_buf b = tiny_gguf(&m);
    char err[VQM_ERR_LEN] = "";
    vqm_gguf *g = NULL;
    vqm_model *model = (vqm_model *)1;
    VT_CHECK(vqm_gguf_parse(b.p, b.n, &g, err) == VQ_OK, "%s", err);
    VT_CHECK(vqm_model_from_gguf(g, &model, err) == VQ_ERR_CORRUPT_DATA && model == NULL &&
                 strstr(err, "'blk.1.post_ffw_norm.weight' is missing"),
             "missing post norm: %s", err);
    vqm_gguf_free(g);
    free(b.p);
    tiny_free(&m);
    tiny_build_gemma(&m, 2, 23);
    b = tiny_gguf(&m);
    const char key[] = "gemma3.attention.sliding_window";
    for (size_t i = 0; i + sizeof key + 12 < b.n; i++)
        if (memcmp(b.p + i, key, sizeof key - 1) == 0 && b.p[i + sizeof key - 1] != '_') {
            memset(b.p + i + sizeof key - 1 + 4, 0, 4); /* the u32 after the type: 0 */
            break;
        }
    g = NULL;
    model = (vqm_model *)1;
    VT_CHECK(vqm_gguf_parse(b.p, b.n, &g, err) == VQ_OK, "%s", err);
    VT_CHECK(vqm_model_from_gguf(g, &model, err) == VQ_ERR_CORRUPT_DATA && model == NULL &&
                 strstr(err, "sliding_window must be"),
             "window 0: %s", err);
    vqm_gguf_free(g);
    free(b.p);
    tiny_free(&m);
}

/* ---- a tiny SentencePiece vocabulary (model_tiny.h) ---- */

static void test_spm_tiny(void)
{
    enum { NB = TINY_SPM_BYTES };
    tg_buf b = tiny_spm_gguf();
    char err[VQM_ERR_LEN];
    vqm_gguf *g = NULL;
    vqm_tokenizer *t = NULL;
    VT_CHECK(vqm_gguf_parse(b.p, b.n, &g, err) == VQ_OK && vqm_tokenizer_load(g, &t, err) == VQ_OK, "%s", err);
    if (t != NULL) {
        const int W = 3 + NB; /* id of words[0] */
        static const struct { const char *text; bool special; int n; int ids[8]; } cases[] = {
            /* "bc" (-3) merges before "ab" (-5) */
            {"abc", false, 2, {W + 1, W + 5}},
            /* " a": U+2581 and a merge to "\u2581a" (-4), which then wins over "ab" (-5) */
            {" a", false, 1, {W + 6}},
            {" ab", false, 2, {W + 6, W + 2}},
            /* merges chain: "ab", then "c" + "ab" = "cab" */
            {"cab", false, 1, {W + 7}},
            /* byte fallback: 'z' and the two bytes of e-acute are not in the vocabulary */
            {"z\xc3\xa9", false, 3, {3 + 'z', 3 + 0xc3, 3 + 0xa9}},
            /* user-defined tokens are cut out always, control ones only when parsing specials */
            {"a\n\nb", false, 3, {W + 1, W + 8, W + 2}},
            {"<x>", false, 3, {3 + '<', 3 + 'x', 3 + '>'}},
            {"a<x>", true, 2, {W + 1, W + 9}},
        };
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            int32_t ids[16];
            const int64_t got = vqm_tokenize(t, cases[k].text, strlen(cases[k].text), cases[k].special, ids, 16);
            bool same = got == cases[k].n;
            for (int i = 0; same && i < got; i++) same = ids[i] == cases[k].ids[i];
            VT_CHECK(same, "'%s': %lld ids, first %d (expected %d ids, first %d)", cases[k].text, (long long)got,
                     got > 0 ? ids[0] : -1, cases[k].n, cases[k].ids[0]);
        }
        char out[16];
        VT_CHECK(vqm_detokenize(t, W + 6, out, 16) == 2 && memcmp(out, " a", 2) == 0, "detokenize \\u2581a");
        VT_CHECK(vqm_detokenize(t, 3 + 0xc3, out, 16) == 1 && (uint8_t)out[0] == 0xc3, "detokenize <0xC3>");
        vqm_tokenizer_free(t);
    }
    vqm_gguf_free(g);
    free(b.p);
}

/* ---- Gemma 3 270M against transformers ---- */

static vqm_model *g_model;

static void test_golden_tokenizer(void)
{
    const char *dir = getenv("VQM_TESTDATA");
    char *txt = golden_read(dir ? dir : "tests/model/data", "gemma_tokenizer_golden.txt", NULL);
    VT_CHECK(txt != NULL, "cannot read gemma_tokenizer_golden.txt");
    if (txt == NULL) return;
    int texts = 0;
    char *text = NULL;
    size_t tlen = 0;
    for (char *line = strtok(txt, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        if (line[0] == 'T') {
            free(text);
            const size_t n = strlen(line + 2);
            text = malloc(4 * n + 1);
            tlen = golden_unescape(line + 2, n, text);
        } else if (line[0] == 'I' && text != NULL) {
            int32_t want[512], got[512];
            int nw = 0;
            char *q = line + 1, *end;
            while (nw < 512 && (want[nw] = (int32_t)strtol(q, &end, 10), end != q)) { nw++; q = end; }
            const int64_t ng = vqm_tokenize(g_model->tok, text, tlen, true, got, 512);
            int first = -1;
            for (int i = 0; i < nw && i < ng && first < 0; i++)
                if (got[i] != want[i]) first = i;
            VT_CHECK(ng == nw && first < 0, "text %d: %lld ids vs %d, first difference at %d", texts, (long long)ng,
                     nw, first);
            /* byte-exact round trip */
            char back[4096];
            size_t bl = 0;
            for (int64_t i = 0; i < ng && i < 512; i++) bl += vqm_detokenize(g_model->tok, got[i], back + bl, sizeof back - bl);
            VT_CHECK(bl == tlen && memcmp(back, text, tlen) == 0, "text %d: round trip differs", texts);
            texts++;
        }
    }
    free(text);
    free(txt);
    VT_CHECK(texts == 6, "%d golden texts", texts);
}

static void test_golden_logits(void)
{
    static golden_prompt gp[5];
    const int np = golden_read_logits("gemma_logits_golden.txt", gp, 5);
    VT_CHECK(np == 4, "%d golden prompts", np);
    vq_ctx *ctx = make_ctx(0, NULL);
    const int V = g_model->cfg.vocab;
    for (int i = 0; i < np; i++) {
#if defined(__SANITIZE_ADDRESS__)
        if (gp[i].first > 0) continue; /* the long prompt: seconds in a release build, minutes under ASan */
#endif
        for (int pass = 0; pass < 2; pass++) {
            /* the deliverable: attention through vq_cache with the f16 cache (past the
             * window: the cache's sliding windows); and the f32 oracle on the short
             * prompts (seconds more on the long one, which the golden logits check) */
            const char *preset = pass == 0 ? "f16" : NULL;
            if (preset == NULL && gp[i].first > 0) continue;
            /* 64-token pages: the long prompt's last chunks (from 576 on) evict the local
             * layers' first page */
            const vq_cache_config cc = {.preset = preset, .page_size = 64};
            const vqm_session_config sc = {.max_tokens = gp[i].n, .max_batch = 64,
                                           .attn = preset != NULL ? VQM_ATTN_CACHE : VQM_ATTN_F32, .cache = &cc};
            vqm_session *s = NULL;
            char err[VQM_ERR_LEN];
            VT_CHECK(vqm_session_create(g_model, ctx, &sc, &s, err) == VQ_OK, "%s", err);
            if (s == NULL) continue;
            float *lg = malloc(sizeof(float) * (size_t)gp[i].rows * (size_t)V);
            for (size_t e = 0; e < (size_t)gp[i].rows * (size_t)V; e++) lg[e] = NAN;
            VT_CHECK(vqm_forward(s, gp[i].ids, gp[i].n, gp[i].rows, lg, err) == VQ_OK, "%s", err);
            int wp = -1;
            const double e = golden_error(&gp[i], lg, V, 4099, &wp);
            printf("  prompt %d (%d tokens, %s): %s, max rel diff %.2e (position %d)\n", i, gp[i].n, vq_ctx_isa(ctx),
                   preset ? "vq_cache f16" : "f32 oracle", e, wp);
            VT_CHECK(e <= 1e-3, "prompt %d %s: rel diff %.3g at position %d > 1e-3", i, preset ? "f16" : "f32", e, wp);
            vq_cache_memory_report mem;
            if (preset != NULL && gp[i].n > 576 && vqm_session_memory(s, &mem, err) == VQ_OK)
                VT_CHECK(mem.tokens < (int64_t)g_model->cfg.n_layers * gp[i].n, "prompt %d: %lld tokens held, none evicted",
                         i, (long long)mem.tokens);
            free(lg);
            vqm_session_free(s);
        }
    }
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_tiny_gemma);
    VT_RUN(test_gemma_errors);
    VT_RUN(test_spm_tiny);
    const char *path = getenv("VQM_GEMMA");
    char err[VQM_ERR_LEN];
    if (path == NULL || vqm_model_load(path, &g_model, err) != VQ_OK) {
        printf("SKIP: Gemma model %s not loadable (sh tools/fetch_model.sh --gemma installs it)\n",
               path ? path : "(VQM_GEMMA unset)");
        return vt_failures ? 1 : 77;
    }
    VT_RUN(test_golden_tokenizer);
    VT_RUN(test_golden_logits);
    vqm_model_free(g_model);
    return vt_finish();
}
