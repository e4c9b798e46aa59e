/* args.c — the option parser of the vq commands (see args.h). */
#include "args.h"

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2

/* ---- helpers ---------------------------------------------------------------- */

/* Why `path` cannot be written as a file (VQA_OUT_FILE), or NULL when it can. */
static const char *out_file_problem(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return "it is a directory";
        return access(path, W_OK) == 0 ? NULL : "the file exists and is not writable";
    }
    char copy[4096];
    if (strlen(path) >= sizeof copy) return "the path is too long";
    strcpy(copy, path);
    const char *dir = dirname(copy);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return "its directory does not exist";
    return access(dir, W_OK | X_OK) == 0 ? NULL : "its directory is not writable";
}

/* Creates directory `path` and its missing parents (VQA_OUT_DIR); NULL when
 * it is a writable directory afterwards, else why not. */
static const char *out_dir_problem(const char *path)
{
    char p[4096];
    if (strlen(path) >= sizeof p) return "the path is too long";
    strcpy(p, path);
    for (char *at = p + 1;; at++) {
        const char c = *at;
        if (c != '/' && c != '\0') continue;
        *at = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) return strerror(errno);
        *at = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) return "it exists and is not a directory";
    return access(path, W_OK | X_OK) == 0 ? NULL : "the directory is not writable";
}

/* Levenshtein distance of two short strings (longer ones count as far apart). */
static int edit_distance(const char *a, const char *b)
{
    enum { MAX = 48 };
    const size_t n = strlen(a), m = strlen(b);
    if (n >= MAX || m >= MAX) return MAX;
    int row[MAX + 1];
    for (size_t j = 0; j <= m; j++) row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            const int up = row[j];
            const int sub = diag + (a[i - 1] != b[j - 1]);
            int best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[m];
}

/* The candidate closest to `word`, when it is plausibly a typo of it (or
 * `word` is a prefix of it); NULL otherwise. */
static const char *closest(const char *word, const char *const *cands, int n)
{
    const char *best = NULL;
    int best_d = 1 << 30;
    const size_t wl = strlen(word);
    for (int i = 0; i < n; i++) {
        int d = edit_distance(word, cands[i]);
        if (wl >= 2 && strncmp(word, cands[i], wl) == 0) d = 1;  /* a prefix: "--max" for "--max-skv" */
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    const int limit = wl < 6 ? 2 : (int)wl / 3;
    return best_d <= limit ? best : NULL;
}

static void vmsg(const char *name, const char *fmt, va_list ap)
{
    fprintf(stderr, "vq%s%s: ", *name ? " " : "", name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\ntry 'vq%s%s --help'\n", *name ? " " : "", name);
}

static int usage_error(const char *name, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int usage_error(const char *name, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(name, fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

int vqa_usage_error(const vqa_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vmsg(cmd->name, fmt, ap);
    va_end(ap);
    return EXIT_USAGE;
}

const char *vqa_size_string(int64_t v, char buf[32])
{
    static const char suffix[] = "KMG";
    int s = -1;
    int64_t x = v;
    while (s < 2 && x != 0 && x % 1024 == 0) {
        x /= 1024;
        s++;
    }
    if (s < 0) snprintf(buf, 32, "%lld", (long long)v);
    else snprintf(buf, 32, "%lld%c", (long long)x, suffix[s]);
    return buf;
}

/* Strict integer: optional sign, decimal digits, and (sizes) one suffix. */
static bool parse_integer(const char *s, bool size, int64_t *out)
{
    if (*s == '\0') return false;
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return false;
    int shift = 0;
    if (size && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        default: return false;
        }
        end++;
    }
    if (*end != '\0') return false;
    if (shift && (v > (INT64_MAX >> shift) || v < -(INT64_MAX >> shift))) return false;
    *out = (int64_t)(v * ((long long)1 << shift));
    return true;
}

/* "[lo, hi]" with sizes written with suffixes when exact. */
static void range_text(const vqa_opt *o, char *buf, size_t n)
{
    char a[32], b[32];
    if (o->kind == VQA_REAL) {
        snprintf(buf, n, "[%g, %g]", o->lo, o->hi);
    } else if (o->kind == VQA_INT) {
        snprintf(buf, n, "[%lld, %lld]", (long long)o->lo, (long long)o->hi);
    } else {
        snprintf(buf, n, "[%s, %s]", vqa_size_string((int64_t)o->lo, a), vqa_size_string((int64_t)o->hi, b));
    }
}

static bool in_range(const vqa_opt *o, double v) { return v >= o->lo && v <= o->hi; }

static const char *expected_text(const vqa_opt *o)
{
    switch (o->kind) {
    case VQA_INT: return "an integer";
    case VQA_SIZE: return "an integer with an optional suffix k/K (x 1024), M (x 2^20) or G (x 2^30)";
    case VQA_SIZES: return "comma-separated integers with optional suffixes k/K, M, G (x 1024, 2^20, 2^30)";
    case VQA_REAL: return "a number";
    default: return "a value";
    }
}

/* Stores `val` for option o (named `given` on the command line). */
static int store(const vqa_cmd *cmd, const vqa_opt *o, const char *given, const char *val)
{
    char range[96];
    range_text(o, range, sizeof range);
    switch (o->kind) {
    case VQA_FLAG:
        *(bool *)o->dst = true;
        return VQA_RUN;
    case VQA_INT:
    case VQA_SIZE: {
        int64_t v = 0;
        if (!parse_integer(val, o->kind == VQA_SIZE, &v) || !in_range(o, (double)v))
            return usage_error(cmd->name, "%s: bad value '%s': expected %s in %s", given, val, expected_text(o), range);
        *(int64_t *)o->dst = v;
        return VQA_RUN;
    }
    case VQA_SIZES: {
        vqa_sizes list = {0};
        const char *p = val;
        for (;;) {
            char item[64];
            const char *comma = strchr(p, ',');
            const size_t len = comma ? (size_t)(comma - p) : strlen(p);
            int64_t v = 0;
            bool ok = len > 0 && len < sizeof item;
            if (ok) {
                memcpy(item, p, len);
                item[len] = '\0';
                ok = parse_integer(item, true, &v) && in_range(o, (double)v);
            }
            if (!ok)
                return usage_error(cmd->name, "%s: bad value '%s': expected %s each in %s", given, val,
                                   expected_text(o), range);
            if (list.n == VQA_MAX_SIZES)
                return usage_error(cmd->name, "%s: bad value '%s': at most %d entries", given, val, VQA_MAX_SIZES);
            list.v[list.n++] = v;
            if (!comma) break;
            p = comma + 1;
        }
        *(vqa_sizes *)o->dst = list;
        return VQA_RUN;
    }
    case VQA_REAL: {
        char *end = NULL;
        errno = 0;
        const double v = strtod(val, &end);
        if (errno != 0 || end == val || *end != '\0' || !isfinite(v) || !in_range(o, v))
            return usage_error(cmd->name, "%s: bad value '%s': expected %s in %s", given, val, expected_text(o), range);
        *(double *)o->dst = v;
        return VQA_RUN;
    }
    case VQA_STRING:
    case VQA_OUT_FILE:
    case VQA_OUT_DIR: {
        if (*val == '\0') return usage_error(cmd->name, "%s: the value must not be empty", given);
        const char *why = o->kind == VQA_OUT_FILE ? out_file_problem(val)
                          : o->kind == VQA_OUT_DIR ? out_dir_problem(val) : NULL;
        if (why) return usage_error(cmd->name, "%s: cannot write '%s': %s", given, val, why);
        *(const char **)o->dst = val;
        return VQA_RUN;
    }
    case VQA_CHOICE: {
        char list[256] = "";
        for (int i = 0; o->choices[i]; i++) {
            if (strcmp(val, o->choices[i]) == 0) {
                *(int *)o->dst = i;
                return VQA_RUN;
            }
            if (strlen(list) + strlen(o->choices[i]) + 3 < sizeof list) {
                if (i) strcat(list, ", ");
                strcat(list, o->choices[i]);
            }
        }
        return usage_error(cmd->name, "%s: bad value '%s': expected one of %s", given, val, list);
    }
    }
    return usage_error(cmd->name, "%s: internal error: option kind %d", given, (int)o->kind);
}

/* ---- usage -------------------------------------------------------------------- */

static const char *metavar(const vqa_opt *o)
{
    if (o->metavar) return o->metavar;
    switch (o->kind) {
    case VQA_INT: case VQA_SIZE: return "N";
    case VQA_SIZES: return "N[,N...]";
    case VQA_REAL: return "X";
    case VQA_CHOICE: return "WHICH";
    default: return "VALUE";
    }
}

/* " (default: X)" from *dst, or "" when there is nothing to show. */
static void default_text(const vqa_opt *o, char *buf, size_t n)
{
    char a[32];
    buf[0] = '\0';
    switch (o->kind) {
    case VQA_INT: snprintf(buf, n, " (default %lld)", (long long)*(const int64_t *)o->dst); break;
    case VQA_SIZE: snprintf(buf, n, " (default %s)", vqa_size_string(*(const int64_t *)o->dst, a)); break;
    case VQA_REAL: snprintf(buf, n, " (default %g)", *(const double *)o->dst); break;
    case VQA_STRING:
    case VQA_OUT_FILE:
    case VQA_OUT_DIR:
        if (*(const char *const *)o->dst) snprintf(buf, n, " (default %s)", *(const char *const *)o->dst);
        break;
    case VQA_CHOICE: snprintf(buf, n, " (default %s)", o->choices[*(const int *)o->dst]); break;
    case VQA_SIZES: {
        const vqa_sizes *l = o->dst;
        size_t at = 0;
        if (l->n == 0) break;
        at += (size_t)snprintf(buf + at, n - at, " (default ");
        for (int i = 0; i < l->n && at < n; i++)
            at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? "," : "", vqa_size_string(l->v[i], a));
        if (at < n) snprintf(buf + at, n - at, ")");
        break;
    }
    default: break;
    }
}

void vqa_print_usage(const vqa_cmd *cmd, FILE *f)
{
    fprintf(f, "usage: vq %s [options]%s%s\n", cmd->name, cmd->pos_usage ? " " : "",
            cmd->pos_usage ? cmd->pos_usage : "");
    if (cmd->summary) fprintf(f, "  %s\n", cmd->summary);
    fprintf(f, "\noptions:\n");
    for (int i = 0; i < cmd->n_opts; i++) {
        const vqa_opt *o = &cmd->opts[i];
        char head[96], def[160];
        int at = 0;
        if (o->short_name) at += snprintf(head, sizeof head, "-%c, ", o->short_name);
        if (o->kind == VQA_FLAG) {
            snprintf(head + at, sizeof head - (size_t)at, "--%s", o->name);
        } else if (o->kind == VQA_CHOICE) {
            char list[128] = "";
            for (int c = 0; o->choices[c]; c++)
                if (strlen(list) + strlen(o->choices[c]) + 2 < sizeof list) {
                    if (c) strcat(list, "|");
                    strcat(list, o->choices[c]);
                }
            snprintf(head + at, sizeof head - (size_t)at, "--%s %s", o->name, list);
        } else {
            snprintf(head + at, sizeof head - (size_t)at, "--%s %s", o->name, metavar(o));
        }
        default_text(o, def, sizeof def);
        fprintf(f, "  %-24s %s%s", head, o->help ? o->help : "", def);
        if (o->kind == VQA_INT || o->kind == VQA_SIZE || o->kind == VQA_SIZES || o->kind == VQA_REAL) {
            char range[96];
            range_text(o, range, sizeof range);
            fprintf(f, ", in %s", range);
        }
        fputc('\n', f);
    }
    fprintf(f, "  %-24s %s\n", "-h, --help", "this help");
    if (cmd->details) fprintf(f, "\n%s", cmd->details);
}

/* ---- parsing -------------------------------------------------------------------- */

static const vqa_opt *find_long(const vqa_cmd *cmd, const char *name, size_t len)
{
    for (int i = 0; i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && strncmp(cmd->opts[i].name, name, len) == 0) return &cmd->opts[i];
    return NULL;
}

static const vqa_opt *find_short(const vqa_cmd *cmd, char c)
{
    for (int i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].short_name == c) return &cmd->opts[i];
    return NULL;
}

static int unknown_option(const vqa_cmd *cmd, const char *arg)
{
    enum { MAX = 64 };
    char names[MAX][48];
    const char *cands[MAX + 1];
    int n = 0;
    for (int i = 0; i < cmd->n_opts && n < MAX; i++) {
        snprintf(names[n], sizeof names[n], "--%s", cmd->opts[i].name);
        cands[n] = names[n];
        n++;
    }
    cands[n++] = "--help";
    char word[64];
    snprintf(word, sizeof word, "%s", arg);
    char *eq = strchr(word, '=');
    if (eq) *eq = '\0';
    const char *near = closest(word, cands, n);
    if (near) return usage_error(cmd->name, "unknown option '%s' (did you mean %s?)", word, near);
    return usage_error(cmd->name, "unknown option '%s'", word);
}

int vqa_parse(const vqa_cmd *cmd, int argc, char **argv)
{
    /* --help wins wherever it is, so that "vq x --bad --help" still helps. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            vqa_print_usage(cmd, stdout);
            return 0;
        }
    int npos = 0;
    bool options_done = false;
    if (cmd->n_pos) *cmd->n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            if (cmd->pos == NULL || npos >= cmd->max_pos)
                return usage_error(cmd->name, "unexpected argument '%s'", arg);
            cmd->pos[npos++] = arg;
            if (cmd->n_pos) *cmd->n_pos = npos;
            continue;
        }
        const vqa_opt *o = NULL;
        const char *val = NULL;
        char given[64];
        if (arg[1] == '-') {
            const char *name = arg + 2, *eq = strchr(name, '=');
            const size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(cmd, name, len);
            if (o == NULL) return unknown_option(cmd, arg);
            snprintf(given, sizeof given, "--%s", o->name);
            if (eq) {
                if (o->kind == VQA_FLAG) return usage_error(cmd->name, "%s takes no value (got '%s')", given, arg);
                val = eq + 1;
            }
        } else {
            o = find_short(cmd, arg[1]);
            if (o == NULL) return unknown_option(cmd, arg);
            snprintf(given, sizeof given, "-%c", arg[1]);
            if (arg[2] != '\0') {
                if (o->kind == VQA_FLAG) return usage_error(cmd->name, "%s takes no value (got '%s')", given, arg);
                val = arg + 2;
            }
        }
        if (o->kind != VQA_FLAG && val == NULL) {
            if (i + 1 >= argc) return usage_error(cmd->name, "%s needs a value (%s)", given, metavar(o));
            val = argv[++i];
        }
        const int rc = store(cmd, o, given, val);
        if (rc != VQA_RUN) return rc;
    }
    return VQA_RUN;
}

/* ---- groups ------------------------------------------------------------------------ */

static void group_usage(const vqa_group *g, FILE *f)
{
    fprintf(f, "usage: vq%s%s <%s> [options]\n", *g->name ? " " : "", g->name, *g->name ? "what" : "command");
    if (g->summary) fprintf(f, "  %s\n", g->summary);
    fprintf(f, "\n%s:\n", *g->name ? "sub-commands" : "commands");
    for (int i = 0; i < g->n_subs; i++) fprintf(f, "  %-18s %s\n", g->subs[i].name, g->subs[i].summary);
    fprintf(f, "\nEach takes --help: vq%s%s <%s> --help\n", *g->name ? " " : "", g->name,
            *g->name ? "what" : "command");
    if (g->details) fprintf(f, "%s", g->details);
}

int vqa_dispatch(const vqa_group *g, int argc, char **argv)
{
    if (argc < 2) {
        group_usage(g, stderr);
        return EXIT_USAGE;
    }
    const char *w = argv[1];
    if (strcmp(w, "--help") == 0 || strcmp(w, "-h") == 0 || strcmp(w, "help") == 0) {
        group_usage(g, stdout);
        return 0;
    }
    for (int i = 0; i < g->n_subs; i++)
        if (strcmp(w, g->subs[i].name) == 0) return g->subs[i].run(argc - 1, argv + 1);
    enum { MAX = 64 };
    const char *cands[MAX];
    int n = 0;
    for (int i = 0; i < g->n_subs && n < MAX; i++) cands[n++] = g->subs[i].name;
    const char *near = closest(w, cands, n);
    const char *what = *g->name ? "sub-command" : "command";
    if (w[0] == '-') return usage_error(g->name, "unknown option '%s' (a %s comes first)", w, what);
    if (near) return usage_error(g->name, "unknown %s '%s' (did you mean '%s'?)", what, w, near);
    return usage_error(g->name, "unknown %s '%s'", what, w);
}
