/* model_cli.c — shared by the model commands (see model_cli.h). */
#include "model_cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


/* The last message, and whether messages also go to stderr (per thread:
 * a library caller asks for quiet and reads them back). */
static _Thread_local char last_error[512];
static _Thread_local bool quiet;

void vqm_cli_set_quiet(bool on) { quiet = on; }
const char *vqm_cli_last_error(void) { return last_error; }

/* A message of the model commands: kept as the last error, and printed on
 * stderr (with a newline, when it has none) unless quiet. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    const size_t n = strlen(last_error);
    if (n > 0 && last_error[n - 1] == '\n') last_error[n - 1] = 0;
    if (!quiet) fprintf(stderr, "%s\n", last_error);
}

const char *const vqm_cli_kivi_arith[] = {"auto", "f32", "int8", NULL};

/* --kivi-arith's choice as the cache's two fields (same order as the names) */
static const vq_key_scores kivi_key_scores[] = {VQ_KEY_SCORES_AUTO, VQ_KEY_SCORES_F32, VQ_KEY_SCORES_INT8};
static const vq_value_accum kivi_value_accum[] = {VQ_VALUE_ACCUM_AUTO, VQ_VALUE_ACCUM_F32, VQ_VALUE_ACCUM_INT8};

void vqm_cli_list_presets(FILE *f)
{
    fprintf(f, "  named by what they buy (methods + 4 sink tokens, centering, smoothing, window):\n"
               "  %-15s %5s  %s\n", "name", "bits", "(all-in at head_dim 64, 2048 tokens)");
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (p->recipe) fprintf(f, "  %-15s %5.2f  %s\n", p->name, p->bits, p->description);
    }
    fprintf(f, "  methods (keys + values bits in the pages at head_dim 128; no sink, transforms or window):\n");
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (!p->recipe)
            fprintf(f, "  %-15s %5.2f + %5.2f bits%s  %s\n", p->name, p->key_bits, p->value_bits,
                    p->needs_tables ? " (needs fitted tables)" : "", p->description);
    }
}

/* The preset called name[0..len), or NULL after a message. */
static const vq_cache_preset_info *find_preset(const char *cmd, const char *name, size_t len, bool tables)
{
    const vq_cache_preset_info *found = NULL;
    for (int i = 0; i < vq_cache_preset_count(); i++)
        if (strlen(vq_cache_preset(i)->name) == len && memcmp(vq_cache_preset(i)->name, name, len) == 0)
            found = vq_cache_preset(i);
    if (found == NULL || (found->needs_tables && !tables)) {
        say("vq %s: --kv '%.*s' is %s; the presets are (or KEYS/VALUES of two):\n", cmd, (int)len, name,
                found ? "a preset that needs fitted tables: give --calibration FILE (vq capture-kv, then vq calibrate)"
                      : "not a preset");
        if (!quiet) vqm_cli_list_presets(stderr);
        return NULL;
    }
    return found;
}

/* The KIVI_MIX modifiers m[0..len) (":wideN", ":widebitsN", each after a
 * ':') -> *wide, *widebits (0 where not given). Returns 0 or 2 after a
 * message naming spec[0..slen). */
static int parse_key_modifiers(const char *cmd, const char *spec, size_t slen, const char *m, size_t len, int head_dim,
                               long *wide, long *widebits)
{
    *wide = *widebits = 0;
    for (const char *p = m; p < m + len;) {
        const char *end = memchr(p + 1, ':', (size_t)(m + len - p - 1));
        if (end == NULL) end = m + len;
        char mod[24] = {0}, *e = NULL;
        const size_t n = (size_t)(end - p - 1);
        if (n < sizeof mod) memcpy(mod, p + 1, n);
        const bool bits = strncmp(mod, "widebits", 8) == 0, count = !bits && strncmp(mod, "wide", 4) == 0;
        const char *digits = mod + (bits ? 8 : 4);
        const long v = (bits || count) && *digits >= '0' && *digits <= '9' ? strtol(digits, &e, 10) : -1;
        if (v < 1 || *e != 0 || (count && (v >= head_dim || *wide)) || (bits && (v < 2 || v > 8 || *widebits))) {
            say("vq %s: --kv '%.*s': modifier ':%.*s' is not :wideN (N in 1..%d: KIVI_MIX wide channels) "
                            "or :widebitsN (N in 2..8: their bits), each at most once\n",
                    cmd, (int)slen, spec, (int)n, p + 1, head_dim - 1);
            return VQ_EXIT_USAGE;
        }
        *(bits ? widebits : wide) = v;
        p = end;
    }
    return VQ_EXIT_OK;
}

/* KEYS[:MODS]/VALUES or PRESET[:MODS] in name[0..len) -> *out (keys and
 * values of the layer config; MODS: the KIVI_MIX keys' ":wideN" wide
 * channels and ":widebitsN" their bits). Returns 0 or 2 after a message. */
static int parse_pair(const char *cmd, const char *name, size_t len, int head_dim, bool tables,
                      vq_cache_layer_config *out)
{
    const char *slash = memchr(name, '/', len);
    size_t klen = slash ? (size_t)(slash - name) : len;
    const char *colon = memchr(name, ':', klen);
    long wide = 0, widebits = 0;
    if (colon != NULL) {
        const int st = parse_key_modifiers(cmd, name, len, colon, klen - (size_t)(colon - name), head_dim, &wide,
                                           &widebits);
        if (st != VQ_EXIT_OK) return st;
        klen = (size_t)(colon - name);
    }
    const vq_cache_preset_info *kp = find_preset(cmd, name, klen, tables);
    const vq_cache_preset_info *vp = slash ? find_preset(cmd, slash + 1, len - (size_t)(slash + 1 - name), tables) : kp;
    if (kp == NULL || vp == NULL) return VQ_EXIT_USAGE;
    vq_cache_layer_config kc, vc;
    if (vq_cache_preset_layer_config(kp->name, head_dim, &kc) != VQ_OK ||
        vq_cache_preset_layer_config(vp->name, head_dim, &vc) != VQ_OK) {
        say("vq %s: --kv '%.*s': no layer config at head dim %d\n", cmd, (int)len, name, head_dim);
        return VQ_EXIT_USAGE;
    }
    if (colon != NULL && kc.keys.method != VQ_KEY_KIVI_MIX) {
        say("vq %s: --kv '%.*s': ':wide...' needs KIVI_MIX keys (kivimix-...)\n", cmd, (int)len, name);
        return VQ_EXIT_USAGE;
    }
    if (wide) kc.keys.wide_channels = (int)wide;
    if (widebits) kc.keys.bits2 = (int)widebits;
    *out = (vq_cache_layer_config){kc.keys, vc.values};
    return VQ_EXIT_OK;
}

/* One override "A-B.C=METHOD" (layers A..B and C take METHOD) of s[0..len). */
static int parse_override(const char *cmd, const char *s, size_t len, int n_layers, int head_dim, bool tables,
                          vq_cache_layer_config *layers)
{
    const char *eq = memchr(s, '=', len);
    vq_cache_layer_config lc;
    if (eq == NULL || eq == s) {
        say("vq %s: --kv: layer override '%.*s' is not LAYERS=METHOD (e.g. 0-3.18=kivi4)\n", cmd, (int)len,
                s);
        return VQ_EXIT_USAGE;
    }
    const int st = parse_pair(cmd, eq + 1, len - (size_t)(eq + 1 - s), head_dim, tables, &lc);
    if (st != VQ_EXIT_OK) return st;
    for (const char *p = s; p < eq;) {
        char *e = NULL;
        const long a = strtol(p, &e, 10);
        long b = a;
        if (e != NULL && *e == '-') b = strtol(e + 1, &e, 10);
        if (e == p || e > eq || (e != eq && *e != '.') || a < 0 || b < a || b >= n_layers) {
            say("vq %s: --kv: layers '%.*s' are not A-B.C... indices in 0..%d\n", cmd, (int)(eq - s), s,
                    n_layers - 1);
            return VQ_EXIT_USAGE;
        }
        for (long l = a; l <= b; l++) layers[l] = lc;
        p = e == eq ? eq : e + 1;
    }
    return VQ_EXIT_OK;
}

/* "+wideN" and "+vs16" (wide > 0, vs16) onto every layer that reads them
 * (+wideN: those without their own ":wideN"); a suffix no layer reads is a
 * usage error. */
static int apply_layer_suffixes(const char *cmd, const char *name, int wide, bool vs16, int n_layers,
                                vq_cache_layer_config *layers)
{
    bool mix = false, turbo = false;
    for (int l = 0; l < n_layers; l++) {
        /* a layer with its own width (":wideN", or a preset's) does not read the suffix */
        if (layers[l].keys.method == VQ_KEY_KIVI_MIX && layers[l].keys.wide_channels == 0) {
            layers[l].keys.wide_channels = wide;
            mix = true;
        }
        if (layers[l].values.method == VQ_VALUE_TURBO) {
            layers[l].values.scale_f16 |= vs16;
            turbo = true;
        }
    }
    if ((wide > 0 && !mix) || (vs16 && !turbo)) {
        say("vq %s: --kv '%s': %s, but no layer has %s\n", cmd, name, wide > 0 && !mix ? "+wideN" : "+vs16",
                wide > 0 && !mix ? "KIVI_MIX keys without a width of their own (kivimix-..., not :wideN or a "
                                   "recipe preset's)"
                                 : "TurboQuant values (...-turbo2, turbo3, ...)");
        return VQ_EXIT_USAGE;
    }
    return VQ_EXIT_OK;
}

/* Profiles loaded for --kv FILE: a method's config points at its profile,
 * and the methods live until the command ends. */
enum { MAX_PROFILES = 64 };
static vq_profile *profiles[MAX_PROFILES];
static int n_profiles;

static void free_profiles(void)
{
    for (int i = 0; i < n_profiles; i++) vq_profile_free(profiles[i]);
    n_profiles = 0;
}

/* --kv FILE: m from the profile at path (vq_profile_save). */
static int method_from_profile(vqm_cli_method *m, const char *cmd, const char *path, const char *f16, bool tables)
{
    if (f16 != NULL) {
        say("vq %s: --kv %s is a profile, which gives every layer's methods: drop --f16-layers\n", cmd,
                path);
        return VQ_EXIT_USAGE;
    }
    if (n_profiles == MAX_PROFILES) {
        say("vq %s: --kv: more than %d profiles\n", cmd, MAX_PROFILES);
        return VQ_EXIT_USAGE;
    }
    vq_ctx *ctx = NULL;
    vq_profile *p = NULL;
    vq_status st = vq_ctx_create(&(vq_ctx_config){.num_threads = 1}, &ctx);
    if (st == VQ_OK) st = vq_profile_load(ctx, path, &p);
    if (st != VQ_OK) {
        say("vq %s: --kv %s: %s\n", cmd, path, ctx ? vq_ctx_last_error(ctx) : "cannot create a ctx");
        vq_ctx_free(ctx);
        return VQ_EXIT_USAGE;
    }
    vq_ctx_free(ctx);
    if (n_profiles == 0) atexit(free_profiles);
    profiles[n_profiles++] = p;
    vq_profile_config pc;
    vq_profile_get(p, &pc);
    for (int l = 0; l < pc.n_layers; l++) {
        const vq_key_method km = pc.layers[l].keys.method;
        m->needs_tables |= km == VQ_KEY_VECINFER || km == VQ_KEY_COMMVQ || pc.layers[l].values.method == VQ_VALUE_CODEBOOK;
    }
    if (m->needs_tables && !tables) {
        say("vq %s: --kv %s: the profile's methods need fitted tables: pass --calibration FILE\n", cmd,
                path);
        return VQ_EXIT_USAGE;
    }
    m->residual = pc.residual_tokens;
    m->cfg.profile = p;
    m->profile_recipe = !pc.no_recipe;
    m->profile_sink = pc.sink_tokens;
    for (int l = 0; l < pc.n_layers; l++) {
        m->profile_smooth |= pc.transforms[l].smooth;
        m->profile_center_keys |= pc.transforms[l].center_keys;
        m->profile_center_values |= pc.transforms[l].center_values;
    }
    return VQ_EXIT_OK;
}

int vqm_cli_method_init(vqm_cli_method *m, const char *cmd, const char *name, const char *f16, int residual,
                        int n_layers, int head_dim, bool tables)
{
    memset(m, 0, sizeof *m);
    struct stat sb;
    vq_cache_layer_config preset;
    if (vq_cache_preset_layer_config(name, head_dim, &preset) != VQ_OK && stat(name, &sb) == 0 && S_ISREG(sb.st_mode) &&
        strlen(name) < sizeof m->name) {
        snprintf(m->name, sizeof m->name, "%s", name);
        snprintf(m->spec, sizeof m->spec, "%s", name);
        return method_from_profile(m, cmd, name, f16, tables);
    }
    if (strlen(name) >= sizeof m->name || n_layers > VQM_CLI_MAX_LAYERS) {
        say("vq %s: --kv '%s': name too long or model too deep\n", cmd, name);
        return VQ_EXIT_USAGE;
    }
    snprintf(m->name, sizeof m->name, "%s", name);
    /* trailing suffixes (model_cli.h), in any order, each at most once;
     * preset names have no '+' */
    snprintf(m->spec, sizeof m->spec, "%s", name);
    bool seen_r = false, vs16 = false;
    long wide = 0;
    for (char *plus; (plus = strrchr(m->spec, '+')) != NULL; *plus = 0) {
        char *e = NULL;
        const long r = plus[1] == 'r' && plus[2] >= '0' && plus[2] <= '9' ? strtol(plus + 2, &e, 10) : -1;
        const bool wide_digits = strncmp(plus, "+wide", 5) == 0 && plus[5] >= '0' && plus[5] <= '9';
        const long w = wide_digits ? strtol(plus + 5, &e, 10) : -1;
        const bool w8 = strcmp(plus, VQM_CLI_WINDOW8) == 0, s16 = strcmp(plus, "+vs16") == 0;
        /* "+w1" .. "+w7": a VQ_WINDOW_TURBO window of that many bits */
        const int wbits = plus[1] == 'w' && plus[2] >= '1' && plus[2] <= '7' && plus[3] == 0 ? plus[2] - '0' : 0;
        if (((w8 || wbits) && m->cfg.window != VQ_WINDOW_F16) || (r >= 0 && seen_r) || (w >= 0 && wide > 0) ||
            (s16 && vs16)) {
            say("vq %s: --kv '%s': suffix '%s' given twice (or a second window)\n", cmd, m->name, plus);
            return VQ_EXIT_USAGE;
        }
        if (w8) {
            m->cfg.window = VQ_WINDOW_TURBO8;
        } else if (wbits) {
            m->cfg.window = VQ_WINDOW_TURBO;
            m->cfg.window_bits = wbits;
        } else if (s16) {
            vs16 = true;
        } else if (r >= 0 && *e == 0 && r <= (1 << 20)) {
            residual = (int)r;
            seen_r = true;
        } else if (w >= 1 && *e == 0 && w < head_dim) {
            wide = w;
        } else {
            say("vq %s: --kv '%s': suffix '%s' is none of +w8 / +w1..+w7 (the window at 8 or 1..7 bits), "
                            "+rN (N in 0..%d: the window's newest tokens), +wideN (N in 1..%d: KIVI_MIX wide "
                            "channels), +vs16 (f16 TurboQuant value scales)\n", cmd, m->name, plus, 1 << 20,
                    head_dim - 1);
            return VQ_EXIT_USAGE;
        }
    }
    name = m->spec;
    /* BASE[@LAYERS=METHOD]...: per-layer configs when BASE is KEYS/VALUES or
     * has overrides; a plain preset name stays a preset (cfg.preset) */
    const char *at = strchr(name, '@');
    const size_t blen = at ? (size_t)(at - name) : strlen(name);
    const bool mixed = at != NULL || memchr(name, '/', blen) != NULL || memchr(name, ':', blen) != NULL ||
                       wide > 0 || vs16;
    vq_cache_layer_config base;
    int st = parse_pair(cmd, name, blen, head_dim, tables, &base);
    if (st != VQ_EXIT_OK) return st;
    /* a preset named by what it buys as the base (or its keys): its window
     * and residual tokens unless a suffix or --residual gives them, its sink
     * and transforms in vqm_cli_session */
    const size_t klen = strcspn(name, "/:@");
    for (int i = 0; i < vq_cache_preset_count(); i++) {
        const vq_cache_preset_info *p = vq_cache_preset(i);
        if (p->recipe && strlen(p->name) == klen && memcmp(p->name, name, klen) == 0) m->recipe = p;
    }
    if (m->recipe && m->cfg.window == VQ_WINDOW_F16) {
        m->cfg.window = m->recipe->window;
        m->cfg.window_bits = m->recipe->window_bits;
    }
    if (m->recipe && !seen_r && residual == 0) residual = m->recipe->residual_tokens;
    if (mixed)
        for (int l = 0; l < n_layers; l++) m->layers[l] = base;
    for (const char *o = at; o != NULL;) {
        const char *next = strchr(o + 1, '@');
        const size_t olen = next ? (size_t)(next - o - 1) : strlen(o + 1);
        if ((st = parse_override(cmd, o + 1, olen, n_layers, head_dim, tables, m->layers)) != VQ_EXIT_OK) return st;
        o = next;
    }
    for (const char *p = f16; p != NULL && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char word[32];
        if (len == 0 || len >= sizeof word || m->n_f16_layers == VQM_CLI_MAX_F16_LAYERS) {
            say("vq %s: --f16-layers: bad list '%s'\n", cmd, f16);
            return VQ_EXIT_USAGE;
        }
        memcpy(word, p, len);
        word[len] = 0;
        char *e = NULL;
        const long l = strcmp(word, "first") == 0 ? 0 : strcmp(word, "last") == 0 ? n_layers - 1 : strtol(word, &e, 10);
        if ((e != NULL && *e != 0) || l < 0 || l >= n_layers) {
            say("vq %s: --f16-layers: '%s' is not a layer index in 0..%d (or first, last)\n", cmd, word,
                    n_layers - 1);
            return VQ_EXIT_USAGE;
        }
        m->f16_layers[m->n_f16_layers++] = (int)l;
        p = end ? end + 1 : p + len;
    }
    if ((st = apply_layer_suffixes(cmd, m->name, (int)wide, vs16, n_layers, m->layers)) != VQ_EXIT_OK) return st;
    m->residual = residual;
    for (int l = 0; l < (mixed ? n_layers : 1); l++) {
        const vq_key_method km = mixed ? m->layers[l].keys.method : base.keys.method;
        m->needs_tables |= km == VQ_KEY_VECINFER || km == VQ_KEY_COMMVQ;
    }
    m->cfg.preset = mixed ? NULL : m->spec;
    m->cfg.layers = mixed ? m->layers : NULL;
    m->cfg.f16_layers = m->n_f16_layers ? m->f16_layers : NULL;
    m->cfg.n_f16_layers = m->n_f16_layers;
    m->cfg.residual_tokens = residual;
    return VQ_EXIT_OK;
}

vqm_model *vqm_cli_load(const char *cmd, const char *path)
{
    char err[VQM_ERR_LEN];
    vqm_model *m = NULL;
    if (vqm_model_load(path, &m, err) != VQ_OK) {
        say("vq %s: %s\n", cmd, err);
        if (strcmp(path, VQM_DEFAULT_MODEL) == 0)
            say("vq %s: 'sh tools/fetch_model.sh' (or 'make model') installs it\n", cmd);
        return NULL;
    }
    return m;
}

vqm_cli_recipe vqm_cli_recipe_of(const vqm_cli_method *m, const vqm_cli_common *c)
{
    if (m != NULL && m->profile_recipe) return (vqm_cli_recipe){.center_keys_only = c->center_keys};
    /* a preset named by what it buys: its sink and transforms where the
     * options leave them (--sink 0; --no-center and --center-keys still
     * turn centering off) */
    const vq_cache_preset_info *rp = m != NULL ? m->recipe : NULL;
    return (vqm_cli_recipe){.sink = c->sink == 0 && rp != NULL ? rp->sink_tokens : (int)c->sink,
                            .center = !c->no_center && (rp == NULL || rp->transforms.center_keys),
                            .center_keys_only = c->center_keys || (rp != NULL && !rp->transforms.center_values),
                            .smooth = c->smooth || (rp != NULL && rp->transforms.smooth)};
}

vqm_session *vqm_cli_session(const char *cmd, const vqm_model *model, vq_ctx *ctx, const vqm_cli_method *m,
                             int max_tokens, const vqm_cli_common *c)
{
    /* only for the methods that need tables (not the f16 reference); the
     * cache copies them, so the calibration lives only as long as the
     * session's creation */
    vq_cache_config cc = m != NULL ? m->cfg : (vq_cache_config){0};
    vq_calibration *cal = NULL;
    if (m != NULL && m->needs_tables && c->calibration != NULL) {
        if (vq_calibration_load(ctx, c->calibration, &cal) != VQ_OK) {
            say("vq %s: --calibration %s: %s\n", cmd, c->calibration, vq_ctx_last_error(ctx));
            return NULL;
        }
        cc.calibration = cal;
    }
    /* a profile with its recipe gives the sinks and transforms: the flags may
     * only repeat them */
    const bool recipe = m != NULL && m->profile_recipe;
    if (recipe) {
        const char *bad = c->sink != 0 && c->sink != m->profile_sink ? "--sink"
                          : c->smooth && !m->profile_smooth          ? "--smooth"
                          : c->no_center && (m->profile_center_keys || m->profile_center_values) ? "--no-center"
                          : c->center_keys && m->profile_center_values ? "--center-keys"
                                                                       : NULL;
        if (bad != NULL) {
            say("vq %s: --kv %s: %s differs from the profile, which gives the sink tokens (%d) and the "
                            "transforms (center keys %s, values %s, smooth %s); leave it out\n", cmd, m->name, bad,
                    m->profile_sink, m->profile_center_keys ? "on" : "off", m->profile_center_values ? "on" : "off",
                    m->profile_smooth ? "on" : "off");
            vq_calibration_free(cal);
            return NULL;
        }
    }
    const vqm_cli_recipe rc = vqm_cli_recipe_of(m, c);
    const vqm_session_config sc = {.max_tokens = max_tokens, .max_batch = (int)c->batch,
                                   .attn = m != NULL ? VQM_ATTN_CACHE : VQM_ATTN_F32,
                                   .cache = m != NULL ? &cc : NULL, .center = rc.center,
                                   .center_keys_only = rc.center_keys_only, .smooth = rc.smooth, .sink = rc.sink,
                                   .key_scores = kivi_key_scores[c->kivi_arith],
                                   .value_accum = kivi_value_accum[c->kivi_arith]};
    char err[VQM_ERR_LEN];
    vqm_session *s = NULL;
    const vq_status st = vqm_session_create(model, ctx, &sc, &s, err);
    vq_calibration_free(cal);
    if (st != VQ_OK) {
        say("vq %s: --kv %s: %s\n", cmd, m != NULL ? m->name : "f32", err);
        return NULL;
    }
    return s;
}
