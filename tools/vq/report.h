/* report.h — the one JSON schema of every `vq ... --json` ("The document",
 * below), and the progress lines of long runs.
 *
 * A command that was given --json opens a report, adds rows, and closes it;
 * the JSON goes to stdout at vqr_end, all at once:
 *
 *     vqr *r = vqr_begin("bench thing", argc, argv, ctx, o.json);   // NULL ctx: no isa/threads
 *     vqr_info_num(r, "read_bandwidth", 11.9, "GB/s");
 *     for (...) {
 *         vqr_row(r);
 *         vqr_str(r, "format", "kivi");
 *         vqr_int(r, "skv", 8192, "tokens");
 *         vqr_num(r, "time", 1.25, "ms");
 *     }
 *     vqr_end(r);   // prints (when json) and frees
 *
 * When json is false every call is a no-op, so a command calls them
 * unconditionally and prints its table itself. A numeric field has one unit
 * across the report ("units" maps field name to unit); giving the same name
 * two units is a programming error and aborts. Numbers that are not finite
 * are written as null.
 *
 * The document:
 *   {"schema": "vq-report/1", "tool": "vq", "version": "0.1.0",
 *    "commit": "<git commit of the build, or unknown>", "date": "<UTC ISO 8601>",
 *    "command": "bench attention", "args": ["--max-skv", "8K"],
 *    "machine": {"cpu": "...", "logical_cpus": 2, "os": "Linux 6.1.0", "arch": "x86_64", "gpu": "..." | null},
 *    "backend": "cpu" | "cuda:0", "isa": "avx2", "threads": 2,
 *    "info": {...}, "units": {"time": "ms", ...}, "rows": [{...}, ...]} */
#ifndef VQ_TOOL_REPORT_H
#define VQ_TOOL_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "veloxquant.h"

typedef struct vqr vqr;

/* argv[0] is the command's own name; argv[1..argc) are recorded as "args".
 * Returns NULL when !json (all functions accept NULL). Exits on out of memory. */
vqr *vqr_begin(const char *command, int argc, char **argv, const vq_ctx *ctx, bool json);

/* Keys and units must outlive the report (string literals). */

/* Report-wide values ("info"): unit NULL for a plain count or label. */
void vqr_info_str(vqr *r, const char *key, const char *value);
void vqr_info_num(vqr *r, const char *key, double value, const char *unit);

/* Starts the next row; the fields below go to it. */
void vqr_row(vqr *r);
void vqr_str(vqr *r, const char *key, const char *value);
void vqr_int(vqr *r, const char *key, int64_t value, const char *unit);
void vqr_num(vqr *r, const char *key, double value, const char *unit);
void vqr_bool(vqr *r, const char *key, bool value);

/* Prints the document on stdout and frees the report. NULL is a no-op. */
void vqr_end(vqr *r);

#endif
