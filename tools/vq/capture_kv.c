/* capture_kv.c — `vq capture-kv`: runs a GGUF Llama model (the runtime in
 * tools/model) over a text and writes the keys and values that attention
 * stores, with RoPE applied, and the queries of the tokens that follow, as
 * .npy files for `vq cache-eval` and `vq calibrate`:
 *     keys.npy, values.npy  [L, Hkv, S, D] f16   (the first S tokens)
 *     queries.npy           [L, Hq, Sq, D] f16   (tokens S .. S + Sq - 1)
 * It observes the runtime through its attention back-end seam
 * (session.h's attn_step, documented there as where a back end sees each
 * layer's q, k and v): the hook copies what it needs and calls the f32 back
 * end, so the forward pass is exactly the runtime's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "npy.h"
#include "progress.h"
#include "session.h"
#include "tool.h"
#include "vqm.h"

/* What the hook fills (the session carries no user pointer: one capture per
 * process, so a static is enough). */
static struct capture {
    vq_status (*inner)(vqm_session *s, int layer, int64_t T, char *err);
    const int64_t *layers;  /* model layer of each captured layer */
    int n_layers;
    int64_t S, Sq, Hkv, Hq, D;
    uint16_t *k, *v, *q;    /* [n_layers][H][S or Sq][D] f16 */
} cap;

static vq_status hook(vqm_session *s, int layer, int64_t T, char *err)
{
    for (int i = 0; i < cap.n_layers; i++) {
        if (cap.layers[i] != layer) continue;
        for (int64_t t = 0; t < T; t++) {
            const int64_t pos = s->n_past + t;
            for (int64_t h = 0; h < cap.Hkv && pos < cap.S; h++)
                for (int64_t d = 0; d < cap.D; d++) {
                    const int64_t at = ((i * cap.Hkv + h) * cap.S + pos) * cap.D + d;
                    cap.k[at] = vq_f32_to_f16(s->kb[t * cap.Hkv * cap.D + h * cap.D + d]);
                    cap.v[at] = vq_f32_to_f16(s->vb[t * cap.Hkv * cap.D + h * cap.D + d]);
                }
            for (int64_t h = 0; h < cap.Hq && pos >= cap.S && pos < cap.S + cap.Sq; h++)
                for (int64_t d = 0; d < cap.D; d++)
                    cap.q[((i * cap.Hq + h) * cap.Sq + pos - cap.S) * cap.D + d] =
                        vq_f32_to_f16(s->q[t * cap.Hq * cap.D + h * cap.D + d]);
        }
    }
    return cap.inner(s, layer, T, err);
}

static char *read_text(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    rewind(f);
    char *t = tool_calloc((size_t)len + 1, 1);
    *n = fread(t, 1, (size_t)len, f);
    fclose(f);
    return t;
}

int vq_cmd_capture_kv(int argc, char **argv)
{
    const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf", *text = "data/pride_and_prejudice.txt";
    const char *out = NULL;
    int64_t tokens = 256, queries = 8, offset = 0, threads = 0;
    vqa_sizes layers = {0};
    const vqa_opt opts[] = {
        {"model", VQA_STRING, &model, 0, 0, "FILE", "GGUF model"},
        {"text", VQA_STRING, &text, 0, 0, "FILE", "UTF-8 text to run"},
        {"out", VQA_OUT_DIR, &out, 0, 0, "DIR", "directory for keys.npy, values.npy, queries.npy (created if missing; required)",
         NULL, 'o'},
        {"tokens", VQA_SIZE, &tokens, 1, 1 << 20, "S", "tokens whose keys and values are written"},
        {"queries", VQA_INT, &queries, 1, 4096, "Sq", "following tokens whose queries are written"},
        {"offset", VQA_SIZE, &offset, 0, 1 << 30, "N", "tokens of the text skipped first"},
        {"layers", VQA_SIZES, &layers, 0, 4096, "LIST", "model layers to write, e.g. 0,10,20,29 (default all)"},
        {"threads", VQA_INT, &threads, 0, 1024, "T", "CPU threads, 0 = all cores"},
    };
    const vqa_cmd cmd = {"capture-kv", "run a GGUF model over a text; write its keys, values and queries as .npy",
                         opts, VQA_COUNT(opts)};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (!out) return vqa_usage_error(&cmd, "--out is required");
    char err[VQM_ERR_LEN];
    vqm_model *m = NULL;
    if (vqm_model_load(model, &m, err) != VQ_OK) {
        fprintf(stderr, "vq capture-kv: %s\n", err);
        return VQ_EXIT_FAILURE;
    }
    const vqm_config *c = &m->cfg;
    int64_t all[4096];
    if (layers.n == 0) {
        for (int l = 0; l < c->n_layers && l < 4096; l++) all[l] = l;
        cap.n_layers = c->n_layers < 4096 ? c->n_layers : 4096;
        cap.layers = all;
    } else {
        for (int i = 0; i < layers.n; i++)
            if (layers.v[i] >= c->n_layers) {
                vqm_model_free(m);
                return vqa_usage_error(&cmd, "--layers: the model has %d layers, got %lld", c->n_layers,
                                       (long long)layers.v[i]);
            }
        cap.layers = layers.v;
        cap.n_layers = layers.n;
    }
    size_t text_n = 0;
    char *txt = read_text(text, &text_n);
    if (!txt) {
        fprintf(stderr, "vq capture-kv: cannot read --text %s\n", text);
        vqm_model_free(m);
        return VQ_EXIT_FAILURE;
    }
    const int64_t need = offset + tokens + queries, cap_ids = need + 16;
    int32_t *ids = tool_calloc((size_t)cap_ids, sizeof *ids);
    /* tokenize a prefix long enough (about 3 bytes a token; grow until it is) */
    int64_t n_ids = 0;
    for (size_t len = (size_t)need * 4; n_ids < need; len *= 2) {
        n_ids = vqm_tokenize(m->tok, txt, len < text_n ? len : text_n, false, ids, cap_ids);
        if (len >= text_n) break;
    }
    free(txt);
    if (n_ids < need) {
        fprintf(stderr, "vq capture-kv: the text has %lld tokens, --offset + --tokens + --queries = %lld\n",
                (long long)n_ids, (long long)need);
        vqm_model_free(m);
        free(ids);
        return VQ_EXIT_FAILURE;
    }
    vq_ctx *ctx = tool_ctx((int)threads, NULL);
    const vqm_session_config scfg = {.max_tokens = (int)(tokens + queries), .max_batch = 64, .attn = VQM_ATTN_F32};
    vqm_session *s = NULL;
    if (vqm_session_create(m, ctx, &scfg, &s, err) != VQ_OK) {
        fprintf(stderr, "vq capture-kv: %s\n", err);
        return VQ_EXIT_FAILURE;
    }
    cap.S = tokens;
    cap.Sq = queries;
    cap.Hkv = c->n_kv_heads;
    cap.Hq = c->n_heads;
    cap.D = c->head_dim;
    const size_t kv = (size_t)(cap.n_layers * cap.Hkv * cap.S * cap.D), qn = (size_t)(cap.n_layers * cap.Hq * cap.Sq * cap.D);
    cap.k = tool_calloc(kv, 2);
    cap.v = tool_calloc(kv, 2);
    cap.q = tool_calloc(qn, 2);
    cap.inner = s->attn_step;
    s->attn_step = hook;
    vqp p;
    vqp_begin(&p, "capture-kv", 1);
    vqp_step(&p, "%lld tokens through %d layers", (long long)(tokens + queries), c->n_layers);
    const vq_status st = vqm_forward(s, ids + offset, tokens + queries, 0, NULL, err);
    vqp_end(&p);
    int ret = VQ_EXIT_OK;
    if (st != VQ_OK) {
        fprintf(stderr, "vq capture-kv: %s\n", err);
        ret = VQ_EXIT_FAILURE;
    } else {
        char path[1024], e[256];
        const int64_t ks[4] = {cap.n_layers, cap.Hkv, cap.S, cap.D}, qs[4] = {cap.n_layers, cap.Hq, cap.Sq, cap.D};
        const struct { const char *name; const int64_t *shape; const void *data; } files[3] = {
            {"keys", ks, cap.k}, {"values", ks, cap.v}, {"queries", qs, cap.q}};
        for (int i = 0; i < 3 && ret == VQ_EXIT_OK; i++) {
            snprintf(path, sizeof path, "%s/%s.npy", out, files[i].name);
            if (vq_npy_save(path, 2, 4, files[i].shape, files[i].data, e, sizeof e) != 0) {
                fprintf(stderr, "vq capture-kv: %s\n", e);
                ret = VQ_EXIT_FAILURE;
            }
        }
        if (ret == VQ_EXIT_OK)
            printf("vq capture-kv: %s: %d layers x Hkv %lld x %lld tokens x D %lld (+ %lld queries x Hq %lld) "
                   "-> %s/{keys,values,queries}.npy\n",
                   model, cap.n_layers, (long long)cap.Hkv, (long long)cap.S, (long long)cap.D, (long long)cap.Sq,
                   (long long)cap.Hq, out);
    }
    free(cap.k);
    free(cap.v);
    free(cap.q);
    free(ids);
    vqm_session_free(s);
    vqm_model_free(m);
    vq_ctx_free(ctx);
    return ret;
}
