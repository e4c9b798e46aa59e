/* generate.c — `vq generate`: text from a GGUF Llama model with attention
 * through a vq_cache of the chosen method; streams the text, then prompt
 * and generation tokens/s and the cache's memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "model_cli.h"
#include "report.h"
#include "tool.h"

typedef struct gen_opts {
    vqm_cli_common c;
    const char *kv;
    int64_t n, top_k, seed;
    double temperature, top_p;
    bool chat, json;
} gen_opts;

int vq_cmd_generate(int argc, char **argv)
{
    gen_opts o = {.c = VQM_CLI_COMMON_DEFAULTS, .kv = "f16", .n = 128, .top_k = 40, .seed = 1, .temperature = 0,
                  .top_p = 0.95};
    const vqa_opt opts[] = {
        {"kv", VQA_STRING, &o.kv, 0, 0, "METHOD", "cache method: a vq_cache preset (vq generate --help lists them) or a profile FILE (vq_profile_save); a last +w8 (or +w1..+w7) keeps the residual window at 8 (1..7) bits, +rN sets its --residual, +wideN the KIVI_MIX wide channels, +vs16 f16 TurboQuant value scales"},
        {"n", VQA_INT, &o.n, 1, 1 << 20, "N", "tokens to generate", .short_name = 'n'},
        {"temperature", VQA_REAL, &o.temperature, 0, 100, "T", "0 = greedy"},
        {"top-k", VQA_INT, &o.top_k, 0, 1 << 20, "K", "sample among the K most likely (0 = all)"},
        {"top-p", VQA_REAL, &o.top_p, 1e-6, 1, "P", "nucleus: smallest set of probability >= P"},
        {"seed", VQA_INT, &o.seed, 0, 1e18, "S", "sampling seed"},
        {"chat", VQA_FLAG, &o.chat, .help = "wrap the prompt in the model's chat template (user turn)"},
        VQM_CLI_COMMON_OPTS(o.c),
        VQA_JSON_OPT(&o.json),
    };
    const char *pos[1];
    int n_pos = 0;
    const vqa_cmd cmd = {"generate", "generate text with attention through the compressed KV cache", opts,
                         VQA_COUNT(opts),
                         "Streams the text on stdout, then a line with prompt and generation tokens/s and the\n"
                         "cache's memory. Stops after -n tokens or at an end-of-turn token.\n"
                         "The model: sh tools/fetch_model.sh installs SmolLM2-135M-Instruct (the default).\n",
                         "PROMPT", pos, 1, &n_pos};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (n_pos != 1) return vqa_usage_error(&cmd, "one PROMPT argument is required");
    vqm_model *model = vqm_cli_load("generate", o.c.model);
    if (model == NULL) return VQ_EXIT_FAILURE;
    vqm_cli_method method;
    int st = vqm_cli_method_init(&method, "generate", o.kv, o.c.f16_layers, (int)o.c.residual, model->cfg.n_layers,
                                 model->cfg.head_dim, o.c.calibration != NULL);
    if (st != VQ_EXIT_OK) {
        vqm_model_free(model);
        return st;
    }
    /* the prompt, in the chat template when asked */
    const char *prompt = pos[0];
    char *text = NULL;
    if (o.chat) {
        /* ChatML (SmolLM2) or Gemma's turns */
        const bool g = model->cfg.gemma;
        const char *pre = g ? "<start_of_turn>user\n" : "<|im_start|>user\n";
        const char *post = g ? "<end_of_turn>\n<start_of_turn>model\n" : "<|im_end|>\n<|im_start|>assistant\n";
        const size_t cap = strlen(prompt) + strlen(pre) + strlen(post) + 1;
        text = tool_calloc(cap, 1);
        snprintf(text, cap, "%s%s%s", pre, prompt, post);
        prompt = text;
    }
    const int64_t n_prompt = vqm_tokenize(model->tok, prompt, strlen(prompt), true, NULL, 0);
    const bool bos = vqm_tokenizer_add_bos(model->tok);
    int32_t *ids = tool_calloc((size_t)(n_prompt + 1 + o.n), sizeof *ids);
    if (bos) ids[0] = vqm_tokenizer_bos(model->tok);
    vqm_tokenize(model->tok, prompt, strlen(prompt), true, ids + bos, n_prompt);
    const int64_t np = n_prompt + bos;
    if (np == 0) {
        fprintf(stderr, "vq generate: the prompt gives no tokens\n");
        return VQ_EXIT_USAGE;
    }
    vq_ctx *ctx = tool_ctx((int)o.c.threads, NULL);
    vqm_session *s = vqm_cli_session("generate", model, ctx, &method, (int)(np + o.n), &o.c);
    if (s == NULL) return VQ_EXIT_FAILURE;
    const vqm_sampler_config scfg = {(float)o.temperature, (int)o.top_k, (float)o.top_p, (uint64_t)o.seed};
    vqm_sampler *smp = NULL;
    char err[VQM_ERR_LEN];
    if (vqm_sampler_create(&scfg, model->cfg.vocab, &smp, err) != VQ_OK) {
        fprintf(stderr, "vq generate: %s\n", err);
        return VQ_EXIT_USAGE;
    }
    float *logits = tool_calloc((size_t)model->cfg.vocab, sizeof *logits);
    double t0 = tool_now();
    if (vqm_forward(s, ids, np, 1, logits, err) != VQ_OK) {
        fprintf(stderr, "vq generate: %s\n", err);
        return VQ_EXIT_FAILURE;
    }
    const double t_prompt = tool_now() - t0;
    size_t out_cap = 4096, out_len = 0;
    char *out = tool_calloc(out_cap, 1);
    int64_t n_gen = 0;
    t0 = tool_now();
    for (; n_gen < o.n; n_gen++) {
        int32_t tok = vqm_sample(smp, logits);
        if (tok == vqm_tokenizer_eos(model->tok) || vqm_tokenizer_is_control(model->tok, tok)) break;
        char piece[256];
        const size_t k = vqm_detokenize(model->tok, tok, piece, sizeof piece);
        if (out_len + k + 1 > out_cap) {
            out_cap = 2 * (out_len + k + 1);
            out = realloc(out, out_cap);
            if (out == NULL) exit(VQ_EXIT_FAILURE);
        }
        memcpy(out + out_len, piece, k);
        out_len += k;
        out[out_len] = 0;
        if (!o.json) {
            fwrite(piece, 1, k, stdout);
            fflush(stdout);
        }
        if (n_gen + 1 == o.n) { n_gen++; break; } /* no forward for a token nobody reads */
        if (vqm_forward(s, &tok, 1, 1, logits, err) != VQ_OK) {
            fprintf(stderr, "\nvq generate: %s\n", err);
            return VQ_EXIT_FAILURE;
        }
    }
    const double t_gen = tool_now() - t0;
    vq_cache_memory_report mem;
    if (vqm_session_memory(s, &mem, err) != VQ_OK) {
        fprintf(stderr, "vq generate: %s\n", err);
        return VQ_EXIT_FAILURE;
    }
    const int64_t used = mem.code_bytes + mem.param_bytes + mem.residual_bytes;
    const double pps = (double)np / t_prompt, gps = n_gen > 0 ? (double)n_gen / t_gen : 0;
    if (o.json) {
        vqr *r = vqr_begin("generate", argc, argv, ctx, true);
        vqr_info_str(r, "model", o.c.model);
        vqr_info_str(r, "kv", method.name);
        vqr_row(r);
        vqr_str(r, "text", out);
        vqr_int(r, "prompt_tokens", np, "tokens");
        vqr_int(r, "generated_tokens", n_gen, "tokens");
        vqr_num(r, "prompt_speed", pps, "tokens/s");
        vqr_num(r, "generation_speed", gps, "tokens/s");
        vqr_int(r, "cache_bytes", used, "bytes");
        vqr_int(r, "cache_allocated_bytes", mem.total_bytes, "bytes");
        vqr_num(r, "bits_per_element", mem.bits_per_element, "bits");
        vqr_end(r);
    } else {
        printf("\n\n[prompt %lld tokens, %.1f tokens/s; generation %lld tokens, %.1f tokens/s; cache %s: %lld tokens, "
               "%lld bytes, %.2f bits per element (%lld bytes allocated); %d threads, %s]\n",
               (long long)np, pps, (long long)n_gen, gps, method.name, (long long)mem.tokens / model->cfg.n_layers,
               (long long)used, mem.bits_per_element, (long long)mem.total_bytes, vq_ctx_num_threads(ctx),
               vq_ctx_isa(ctx));
    }
    free(out);
    free(logits);
    free(ids);
    free(text);
    vqm_sampler_free(smp);
    vqm_session_free(s);
    vq_ctx_free(ctx);
    vqm_model_free(model);
    return VQ_EXIT_OK;
}
