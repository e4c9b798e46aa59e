/* model_cli.h — what `vq generate`, `vq perplexity`, `vq bench model` and
 * the tuner (tools/tune) share: the default model path, the --kv method (a
 * vq_cache preset, plus layers kept in f16 and a residual window), and
 * session creation. Failures print a message on stderr, which is also kept
 * as the thread's last error (vqm_cli_last_error); a library caller turns
 * the printing off (vqm_cli_set_quiet) and reads the message back. */
#ifndef VQ_TOOL_MODEL_CLI_H
#define VQ_TOOL_MODEL_CLI_H

#include <stdio.h>

#include "vqm.h"

/* The exit statuses of the vq commands (as commands.h defines them), which
 * vqm_cli_method_init returns. */
#define VQ_EXIT_OK 0
#define VQ_EXIT_FAILURE 1
#define VQ_EXIT_USAGE 2

/* The calling thread's last message of these functions ("" before any). */
const char *vqm_cli_last_error(void);
/* Messages on stderr (the default) or only kept as the last error (on). */
void vqm_cli_set_quiet(bool on);

/* The model tools/fetch_model.sh installs, relative to the repository. */
#define VQM_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

enum { VQM_CLI_MAX_F16_LAYERS = 64, VQM_CLI_MAX_LAYERS = 256 };

/* One --kv method: a preset name, or KEYS/VALUES (the key method of one
 * preset with the value method of another, e.g. turbo3/turbo2), and the
 * options that refine it. */
/* The --kv suffix that stores the residual window at 8 bits. */
#define VQM_CLI_WINDOW8 "+w8"

typedef struct vqm_cli_method {
    char name[256];                      /* as given */
    char spec[256];                      /* name without its "+..." suffixes */
    vq_cache_layer_config layers[VQM_CLI_MAX_LAYERS]; /* KEYS/VALUES mixes */
    int f16_layers[VQM_CLI_MAX_F16_LAYERS];
    int n_f16_layers;
    int residual;                        /* residual_tokens */
    bool needs_tables;                   /* some layer's keys need fitted tables (VECINFER, CommVQ) */
    /* a profile that states its sink tokens and transforms (version 2): the
     * session takes them from it, and --sink / --smooth / --no-center /
     * --center-keys must agree with it or be left out */
    bool profile_recipe;
    int profile_sink;
    bool profile_smooth, profile_center_keys, profile_center_values; /* on in any layer */
    const vq_cache_preset_info *recipe;  /* the preset named by what it buys that the base names, or NULL */
    vq_cache_config cfg;                 /* points into this struct: do not copy */
} vqm_cli_method;

/* Fills m for `name`: a profile file (vq_profile_save; any name that is a
 * regular file: its plan, loaded and kept until exit, with no suffixes and
 * no --f16-layers; --residual is the profile's), or a preset or KEYS/VALUES of two presets, optionally
 * followed by per-layer overrides "@LAYERS=METHOD" (LAYERS: indices and
 * ranges joined by '.', e.g. "kivi4-turbo2@0.18-20=kivi4-turbo3" or
 * "f16@5=kivi2"; later overrides win), and optionally a last "+w8": the
 * residual window (KIVI's partial key group, --residual tokens) stored at 8
 * bits (vq_cache_config.window = VQ_WINDOW_TURBO8) instead of f16, or
 * "+w1" .. "+w7" at that many bits (VQ_WINDOW_TURBO, window_bits), and
 * optionally "+rN" (before or after "+w8"): this method's residual window
 * holds the newest N tokens, overriding `residual` (--residual), so one run
 * can compare methods at their own R; "+wideN": every KIVI_MIX layer keeps
 * N wide channels per key group (vq_key_config.wide_channels), except those
 * whose KEYS name carries its own ":wideN" (e.g. "kivimix-turbo2:wide32",
 * base or override; ":widebitsN" sets their bits, bits2); "+vs16":
 * every TurboQuant-value layer stores f16 scales (vq_value_config.scale_f16).
 * The suffixes come last, in any order, each at most once (names checked
 * against vq_cache_preset: unknown names give 2 after a message naming the
 * presets, and so do presets that need fitted tables unless `tables`, i.e.
 * the command has a --calibration file). f16 layers from the comma list `f16` (NULL = none; "first,last"
 * words allowed) for a model of n_layers. Returns 0 or 2 (usage error). */
int vqm_cli_method_init(vqm_cli_method *m, const char *cmd, const char *name, const char *f16, int residual,
                        int n_layers, int head_dim, bool tables);

/* Loads the model, printing the reason on failure (NULL). */
vqm_model *vqm_cli_load(const char *cmd, const char *path);

/* The options every model command takes, and their table entries (needs args.h). */
typedef struct vqm_cli_common {
    const char *model, *f16_layers;
    const char *calibration; /* a vq_calibration file (vq calibrate) for presets that need fitted tables */
    int64_t residual, sink, threads, batch;
    bool no_center, center_keys, smooth;
    int kivi_arith; /* index in vqm_cli_kivi_arith: auto, f32, int8 */
} vqm_cli_common;
extern const char *const vqm_cli_kivi_arith[];
#define VQM_CLI_COMMON_DEFAULTS {.model = VQM_DEFAULT_MODEL, .batch = 64}
#define VQM_CLI_COMMON_OPTS(c)                                                                                 \
    {"model", VQA_STRING, &(c).model, 0, 0, "FILE", "GGUF model", .short_name = 'm'},                          \
    {"calibration", VQA_STRING, &(c).calibration, 0, 0, "FILE",                                              \
     "fitted tables (vq capture-kv, then vq calibrate) for presets that need them: vecinfer2, commvq"},       \
    {"f16-layers", VQA_STRING, &(c).f16_layers, 0, 0, "LIST", "layers kept in f16, e.g. 0,last (default none)"}, \
    {"residual", VQA_INT, &(c).residual, 0, 1 << 20, "N", "newest N tokens kept in the window (f16; +w8: 8-bit)"}, \
    {"sink", VQA_INT, &(c).sink, 0, 64, "N", "first N tokens kept in f16 outside the cache (attention sink)"}, \
    {"no-center", VQA_FLAG, &(c).no_center, .help = "store raw keys/values (default: minus their mean, exact)"}, \
    {"center-keys", VQA_FLAG, &(c).center_keys, .help = "center keys only, store values raw"},             \
    {"smooth", VQA_FLAG, &(c).smooth, .help = "balance key/query channels before quantizing (exact)"},       \
    {"batch", VQA_INT, &(c).batch, 1, 4096, "N", "prefill chunk in tokens"},                                 \
    {"threads", VQA_INT, &(c).threads, 0, 1024, "T", "CPU threads, 0 = all cores"},                          \
    {"kivi-arith", VQA_CHOICE, &(c).kivi_arith, .choices = vqm_cli_kivi_arith,                               \
     .help = "KIVI (and mixed, TurboQuant) pages' arithmetic (vq_cache_attend_opts): auto = integer where the layout allows, f32 exact"}

/* The sink tokens and transforms of m's cache under the options c: none
 * when m is a profile that states them (the cache takes them from it); a
 * preset named by what it buys (m->recipe) gives its own where the options
 * leave them (--sink 0; --no-center and --center-keys still turn centering
 * off); else the options' (m NULL: the options'). */
typedef struct vqm_cli_recipe {
    int sink;
    bool center, center_keys_only, smooth;
} vqm_cli_recipe;
vqm_cli_recipe vqm_cli_recipe_of(const vqm_cli_method *m, const vqm_cli_common *c);

/* A session with m's cache (m NULL = the f32 oracle) refined by c (center,
 * smooth, sink: vqm_session_config; the tables of c->calibration, loaded on
 * ctx), or NULL after a message. */
vqm_session *vqm_cli_session(const char *cmd, const vqm_model *model, vq_ctx *ctx, const vqm_cli_method *m,
                             int max_tokens, const vqm_cli_common *c);

/* Prints the presets, one per line, on f. */
void vqm_cli_list_presets(FILE *f);

#endif
