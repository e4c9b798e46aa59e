/* args.h — the one option parser of every `vq` command and sub-command.
 *
 * A command describes its options in a table and calls vqa_parse once:
 *
 *     typedef struct my_opts { int64_t skv, repeats; bool json; int backend; } my_opts;
 *     my_opts o = {.skv = 8192, .repeats = 5};                  // defaults first
 *     static const char *const backends[] = {"cpu", "cuda", NULL};
 *     const vqa_opt opts[] = {
 *         {"skv", VQA_SIZE, &o.skv, 1, 1 << 24, "N", "kv length (2K = 2048)"},
 *         {"repeats", VQA_INT, &o.repeats, 1, 1000, "N", "timed calls per case"},
 *         {"backend", VQA_CHOICE, &o.backend, .choices = backends, .help = "where to run"},
 *         VQA_JSON_OPT(&o.json),
 *     };
 *     const vqa_cmd cmd = {"bench thing", "what it measures, one line", opts, VQA_COUNT(opts)};
 *     const int rc = vqa_parse(&cmd, argc, argv);
 *     if (rc != VQA_RUN) return rc;                 // --help (0) or a usage error (2)
 *     if (o.skv % 64) return vqa_usage_error(&cmd, "--skv must be a multiple of 64, got %lld", ...);
 *
 * What every command gets from it, the same way:
 *   --name value and --name=value; a flag takes no value (--json=1 is an error);
 *   --help / -h anywhere: the usage (generated from the table, with each
 *     option's default taken from *dst before parsing) on stdout, exit 0;
 *   strict values: integers are decimal, whole and in range; VQA_SIZE accepts
 *     the suffixes k/K (x 1024), m/M (x 2^20), g/G (x 2^30): 10k = 10240,
 *     64K = 65536; an error names the option, the bad value and what was
 *     expected, followed by "try 'vq CMD --help'", exit 2;
 *   unknown options name the closest known one ("did you mean --max-skv?");
 *   an option given twice: the last one wins (as with getopt_long);
 *   "--" ends the options; positional arguments are errors unless the command
 *     accepts them (pos / max_pos).
 *
 * Sub-commands ("vq bench <what>", and the top level "vq <command>") use
 * vqa_dispatch with a table of vqa_sub.
 *
 * Messages go to stderr and start with "vq CMD: ". The parser never exits the
 * process; it returns the status to exit with. */
#ifndef VQ_TOOL_ARGS_H
#define VQ_TOOL_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* vqa_parse's "go on and run the command"; anything else is an exit status. */
#define VQA_RUN (-1)

#define VQA_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

typedef enum vqa_kind {
    VQA_FLAG,    /* bool *: present = true; takes no value */
    VQA_INT,     /* int64_t *: decimal integer in [lo, hi] */
    VQA_SIZE,    /* int64_t *: integer with an optional k/K, m/M, g/G suffix (powers of 1024), in [lo, hi] */
    VQA_SIZES,   /* vqa_sizes *: comma-separated VQA_SIZE values, each in [lo, hi] */
    VQA_REAL,    /* double *: finite decimal number in [lo, hi] */
    VQA_STRING,  /* const char **: any non-empty value (points into argv) */
    VQA_CHOICE,  /* int *: index of the value in choices (exact match) */
    /* const char **: a file the command writes (often only at its end, after
     * minutes of work): checked when parsed, so a typo fails at once. Its
     * directory must exist and be writable; an existing file must be a
     * regular file we may write. Nothing is created. */
    VQA_OUT_FILE,
    /* const char **: a directory the command writes files into: created when
     * parsed if missing (with its parents, like mkdir -p); it must end up a
     * writable directory. */
    VQA_OUT_DIR
} vqa_kind;

enum { VQA_MAX_SIZES = 16 };

/* The value of a VQA_SIZES option, in the order given. */
typedef struct vqa_sizes {
    int n;
    int64_t v[VQA_MAX_SIZES];
} vqa_sizes;

typedef struct vqa_opt {
    const char *name;              /* long name without the dashes, e.g. "max-skv" */
    vqa_kind kind;
    void *dst;                     /* where the value goes; its type follows kind */
    double lo, hi;                 /* inclusive range for VQA_INT, VQA_SIZE, VQA_SIZES, VQA_REAL */
    const char *metavar;           /* the value's name in the usage ("N"); NULL: from the kind */
    const char *help;              /* one line; the default is appended from *dst */
    const char *const *choices;    /* VQA_CHOICE: NULL-terminated list of accepted values */
    char short_name;               /* optional one-letter alias: -t 4 or -t4 */
} vqa_opt;

/* --json: the same wording on every command. */
#define VQA_JSON_OPT(dst) \
    {"json", VQA_FLAG, (dst), 0, 0, NULL, "one JSON report on stdout (schema: tools/vq/report.h)", NULL, 0}

typedef struct vqa_cmd {
    const char *name;              /* as typed after "vq": "demo", "bench attention" */
    const char *summary;           /* one line: what the command does */
    const vqa_opt *opts;
    int n_opts;
    const char *details;           /* optional paragraph(s) printed after the options */
    /* Positional arguments: NULL pos = none accepted. */
    const char *pos_usage;         /* e.g. "FILE..." for the usage line */
    const char **pos;              /* receives up to max_pos pointers into argv */
    int max_pos;
    int *n_pos;                    /* receives how many were given */
} vqa_cmd;

/* Parses argv[1..argc) (argv[0] is the command's own name) into the dsts.
 * Returns VQA_RUN, or 0 after printing --help, or 2 after a usage error. A
 * failed parse may have stored some values already. */
int vqa_parse(const vqa_cmd *cmd, int argc, char **argv);

/* The usage text of cmd (what --help prints) on f. */
void vqa_print_usage(const vqa_cmd *cmd, FILE *f);

/* For checks after parsing that involve several options: prints
 * "vq NAME: <message>" and the --help hint on stderr; returns 2. */
int vqa_usage_error(const vqa_cmd *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A value formatted as a size with a suffix when exact ("64K", "3M", "100"). */
const char *vqa_size_string(int64_t v, char buf[32]);

/* ---- sub-commands ---------------------------------------------------------- */

/* One entry of a command group. run gets argv[0] = the sub-command's name. */
typedef struct vqa_sub {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;           /* one line for the group's help */
} vqa_sub;

typedef struct vqa_group {
    const char *name;              /* "" for the top level ("vq <command>"), "bench" for "vq bench <what>" */
    const char *summary;
    const vqa_sub *subs;
    int n_subs;
    const char *details;           /* optional text printed after the list */
} vqa_group;

/* argv[0] is the group's name, argv[1] the sub-command. --help / -h / help
 * (or no sub-command: then on stderr, exit 2) prints the list; an unknown
 * name exits 2 naming the closest one. Otherwise returns run(argc-1, argv+1). */
int vqa_dispatch(const vqa_group *g, int argc, char **argv);

#endif
