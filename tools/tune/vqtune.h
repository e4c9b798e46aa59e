/* vqtune.h — the tuner: a per-layer plan of key and value methods for a
 * bit budget, chosen from what each layer's keys and values cost the model.
 * `vq tune` (tools/vq/tune.c) and Python's veloxquant.tune() are thin
 * front ends over this one function, so the same arguments give the same
 * profile bytes through either. A static library (vq_tune) over the model
 * runtime (vq_model, tools/model); public veloxquant API only.
 *
 * Method (docs/QUALITY.md, "Tuning"):
 * 1. Calibration text: the last `tokens` tokens of the text, cut into
 *    windows of `ctx` tokens; `vq perplexity` scores windows from the start,
 *    so with --max-tokens <= (text tokens - tokens) the two never share one.
 * 2. Reference: the f16 cache's next-token distribution at every scored
 *    position (the second half of each window, as `vq perplexity`).
 * 3. Sensitivity, keys and values apart, around a base plan (`base`):
 *    - "cheapest": the base is the cheapest plan, every part
 *      (a layer's keys, or its values) at its cheapest candidate by the
 *      bits of step 4, run once for its KL (base_kl); then each part at each
 *      of its other candidates, every other part staying at its cheapest,
 *      the plan's mean KL(f16 || trial) over the scored positions. Measured
 *      where the plan will be, so a part's loss includes what the other
 *      parts' errors make of it (around f16 the parts do not add up on
 *      every model: docs/GEMMA.md, "Keys, not values"). f16 is a candidate
 *      here only where the keys (values) list names it, or names nothing
 *      else.
 *    - "f16" (the default): each part at each candidate, every other part
 *      f16 (base_kl = 0). The default because it is what the shipped
 *      profiles were tuned with, and the cheapest base found no better
 *      plan where it was tried (docs/GEMMA.md, "The tuner from the
 *      cheapest plan").
 * 4. Cost: each candidate's bits per element as vq_cache_memory counts them
 *    (codes, scales, the residual window, the sink) in a cache of one layer
 *    filled to `bits_ctx` tokens, once with full attention and, for a model
 *    with sliding-window layers, once with its window (a local layer holds
 *    only its window: the tokens it evicted are not counted).
 * 5. Allocation: the parts' changes from the base are taken as additive: a
 *    plan's predicted KL is base_kl + the sum over parts of (loss of the
 *    part's pick - base_kl) (with base f16: the sum of the losses); a part's
 *    bits weigh by the elements its layer holds (a local layer's fewer), so
 *    a plan's bits are the whole cache's as vq_cache_memory counts them;
 *    starting from every part at its cheapest candidate, the upgrade with
 *    the largest loss saved per bit that still fits the budget is taken
 *    until none fits.
 * 6. Check: the chosen plan (and plans for budgets 0.5 and 0.25 bits around
 *    it) run on the calibration windows: predicted against measured KL.
 * 7. Search (`search` = K > 0): a second plan, built from the cheapest one
 *    by measured upgrades. Each round runs the round's plan with one part
 *    upgraded, for the K upgrades of the keys and the K of the values that
 *    the losses rank highest by loss saved per bit (among those that fit
 *    the budget), and keeps the one whose measured KL falls the most per
 *    bit; it ends when none fits or none lowers the KL. The losses only
 *    choose what is tried: what is kept is measured on whole plans, so parts
 *    that do not add up, or a part's change lost in the noise of the
 *    calibration text, do not mislead it (docs/GEMMA.md). The profile is the
 *    plan, of the two, with the lower measured KL. Its first run measures
 *    the cheapest plan, unless this run measured it (base cheapest, no
 *    measurements file read): the losses of a file may come from other
 *    calibration runs (faster ones: prefill chunks), and only rank.
 * The model runs over `tokens` tokens (L layers): with base cheapest
 * 1 (the f16 reference) + 1 (the cheapest plan) + L x (key and value
 * candidates besides each part's cheapest) + 5 times; with base f16
 * 1 + L x (key and value candidates besides f16) + 5 times; from a
 * measurements file 1 + 5 times; the search adds up to 2K runs a round
 * (and one for the cheapest plan), as many rounds as upgrades it keeps (the
 * progress total grows round by round).
 *
 * Errors: vqt_tune returns VQ_ERR_INVALID_ARGUMENT for arguments no run can
 * take (a budget below the cheapest plan, an unknown candidate or base, a
 * window suffix that is none, text shorter than `tokens`, a measurements
 * file for other layers, candidates or base, a run stopped by the progress
 * callback), and
 * VQ_ERR_IO when the text cannot be read or the measurements file cannot
 * be written; other statuses
 * come from the library. The message, in err (VQT_TUNE_ERR_LEN bytes), names
 * the option and its value; options are named with opt_prefix before them
 * ("--bits" for the command line, "bits" for Python). Nothing is returned
 * on failure (*out stays NULL). */
#ifndef VQ_TUNE_H
#define VQ_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "veloxquant.h"
#include "vqm.h"

#define VQT_TUNE_ERR_LEN 512
/* The candidates when keys / values are NULL: presets whose key (value)
 * method is tried (with base f16, f16 is always a candidate too). */
#define VQT_TUNE_DEFAULT_KEYS "kivi2-turbo2,kivi2,kivimix-turbo2,kivi4-turbo2,kivi4"
#define VQT_TUNE_DEFAULT_VALUES "turbo2,turbo3,turbo4,kivi4"
enum {
    VQT_TUNE_MAX_CAND = 10,  /* candidates of one side, f16 included */
    VQT_TUNE_CHECKS = 5,     /* plans checked: the allocation's, then budgets -0.5, -0.25, +0.25, +0.5 */
    VQT_TUNE_MAX_SEARCH = 8, /* upgrades of each side that one search round may try */
    VQT_TUNE_NAME_LEN = 64
};

/* Called before each run of the model: `done` runs finished of `total`,
 * `step` what the next one measures ("layer 3 keys kivi2"). A nonzero
 * return stops the tuner (VQ_ERR_INVALID_ARGUMENT, "stopped by the progress
 * callback ..."). */
typedef int (*vqt_tune_progress_fn)(void *user, int64_t done, int64_t total, const char *step);

/* The options, named as `vq tune`'s flags; zero fields take the defaults. */
typedef struct vqt_tune_options {
    double bits;             /* the budget: bits per element, keys and values, all bytes counted (> 0, <= 16) */
    /* the calibration text (UTF-8; its last `tokens` tokens are read) and its
     * name in messages; text NULL: read from the file text_name (VQ_ERR_IO
     * when it cannot be) */
    const char *text;
    size_t text_len;
    const char *text_name;
    int64_t tokens;          /* calibration tokens (64 .. 2^20; 0 = 1024) */
    int64_t ctx;             /* window length of the runs and of the bit count (even, 64 .. tokens; 0 = 512) */
    int64_t bits_ctx;        /* tokens of the cache whose bits meet `bits` (0 = ctx) */
    const char *window;      /* every plan's residual window as --kv suffixes, e.g. "+w8+r64" (NULL/"" = f16) */
    const char *keys;        /* comma list of presets, optionally with :wideN / +wideN / +vs16 (NULL = default) */
    const char *values;      /* the same for values ("" or "f16" = f16 only) */
    const char *measurements;/* sensitivities file: read when it exists (same layers, candidates and base), else
                                written */
    const char *base;        /* "f16" (NULL = it) or "cheapest": the plan the sensitivities are measured around */
    int search;              /* upgrades of each side a search round tries (0 = no search, .. VQT_TUNE_MAX_SEARCH) */
    int residual;            /* newest tokens kept in the window (--residual) */
    int sink;                /* first tokens kept in f16 (--sink, 0 .. 64) */
    bool no_center, center_keys, smooth; /* the transforms of every run (--no-center, --center-keys, --smooth) */
    int batch;               /* prefill chunk in tokens (0 = 64) */
    int kivi_arith;          /* 0 auto, 1 f32, 2 int8 (vqm_cli_kivi_arith) */
    const char *opt_prefix;  /* put before option names in messages (NULL = "") */
    vqt_tune_progress_fn progress; /* NULL = none */
    void *progress_user;
} vqt_tune_options;

typedef struct vqt_tune_candidate {
    char name[VQT_TUNE_NAME_LEN]; /* "f16", or as given in keys / values */
    double bits;                  /* bits per element of its side at bits_ctx tokens, all bytes counted */
    double bits_local;            /* the same in a sliding-window layer over the tokens it holds (= bits
                                     for a model without such layers) */
} vqt_tune_candidate;

typedef struct vqt_tune_check {
    double bits, predicted_kl, measured_kl; /* the plan's bits; KL predicted from the losses (step 5); KL of the run */
} vqt_tune_check;

typedef struct vqt_tune_result {
    vq_profile *profile;      /* the chosen plan with the window, sink and transforms of the runs (owned) */
    char kv[4096];            /* the plan as a --kv string */
    int n_layers;
    int n_keys, n_values;     /* candidates, f16 first (with base cheapest a candidate only where its loss is not
                                 NaN) */
    vqt_tune_candidate keys[VQT_TUNE_MAX_CAND], values[VQT_TUNE_MAX_CAND];
    int *key_pick, *value_pick; /* [n_layers]: the profile's candidate of each layer */
    /* [2 n_layers][VQT_TUNE_MAX_CAND]: loss[p][i], the mean KL of the plan
     * with part p at candidate i and every other part at the base: with base
     * cheapest, every other part at its cheapest candidate (loss[p][cheapest]
     * = base_kl; f16 NaN where it is no candidate: never measured nor
     * picked); with base f16, every other part f16 (loss[p][0] = 0). Parts
     * 0..L-1 are the keys of layer l, L..2L-1 its values. */
    double *loss;
    bool base_cheapest;       /* the base of the losses: the cheapest plan (true) or the f16 cache */
    double base_kl;           /* the base plan's mean KL: the cheapest plan's, or 0 for f16 */
    int n_checks;             /* checks[0] is the allocation's plan for the budget */
    vqt_tune_check checks[VQT_TUNE_CHECKS];
    /* the search's plan (step 7; zero without a search): its bits, the KL the
     * losses predict for it and its measured KL; the rounds (upgrades kept)
     * and runs it took; chose_search: it is the profile's plan (its measured
     * KL below checks[0]'s), else the allocation's is */
    vqt_tune_check searched;
    int search_rounds;
    int64_t search_runs;
    bool chose_search;
    unsigned char *local;     /* [n_layers]: 1 for a sliding-window layer */
    double *weight;           /* [n_layers]: the elements the layer holds over the mean layer's (1 when
                                 every layer holds bits_ctx tokens) */
    int sliding_window;       /* the model's local window (0: none) */
    int64_t held_local;       /* tokens a local layer holds at bits_ctx (bits_ctx without local layers) */
    double min_bits;          /* the cheapest plan's bits */
    int64_t tokens, ctx, n_windows, bits_ctx;
    bool measured;            /* false when the losses came from the measurements file */
    double seconds;           /* wall time of the runs */
} vqt_tune_result;

/* The options' ranges alone (what needs no model): VQ_OK, or
 * VQ_ERR_INVALID_ARGUMENT with the message in err. vqt_tune checks them
 * first. */
vq_status vqt_tune_validate(const vqt_tune_options *opt, char *err);
/* Tunes `model` on ctx's threads (see above). */
vq_status vqt_tune(vq_ctx *ctx, const vqm_model *model, const vqt_tune_options *opt, vqt_tune_result **out,
                   char *err);
/* The plan the allocation picks for `budget` from r's losses: its predicted
 * KL (base_kl + the sum of its parts' changes from the base), and its bits
 * in *bits (the frontier of budgets). */
double vqt_tune_predict(const vqt_tune_result *r, double budget, double *bits);
void vqt_tune_result_free(vqt_tune_result *r); /* NULL is a no-op */

#endif
