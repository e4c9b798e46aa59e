/* report.c — the JSON report of `vq ... --json` (see report.h). Rows and
 * info are written into memory streams as they come and printed at the end,
 * so a command may add info after rows. */
#include "report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "vq_build_info.h"  /* VQ_BUILD_COMMIT, generated at build time */

#ifdef VQ_TOOL_CUDA
#include <cuda_runtime_api.h>
#endif

enum { MAX_UNITS = 128 };

struct vqr {
    const char *command;
    int argc;
    char **argv;
    const vq_ctx *ctx;
    FILE *rows, *info;
    char *rows_buf, *info_buf;
    size_t rows_len, info_len;
    int n_rows, n_fields, n_info;
    int n_units;
    const char *unit_key[MAX_UNITS], *unit[MAX_UNITS];
};

static void die(const char *what)
{
    fprintf(stderr, "vq: internal error in the JSON report: %s\n", what);
    abort();
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_number(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

/* Records key's unit; one unit per key across the report. */
static void note_unit(vqr *r, const char *key, const char *unit)
{
    if (unit == NULL) return;
    for (int i = 0; i < r->n_units; i++)
        if (strcmp(r->unit_key[i], key) == 0) {
            if (strcmp(r->unit[i], unit) != 0) die("a field with two units");
            return;
        }
    if (r->n_units == MAX_UNITS) die("too many units");
    r->unit_key[r->n_units] = key;
    r->unit[r->n_units++] = unit;
}

vqr *vqr_begin(const char *command, int argc, char **argv, const vq_ctx *ctx, bool json)
{
    if (!json) return NULL;
    vqr *r = calloc(1, sizeof *r);
    if (r == NULL) die("out of memory");
    r->command = command;
    r->argc = argc;
    r->argv = argv;
    r->ctx = ctx;
    r->rows = open_memstream(&r->rows_buf, &r->rows_len);
    r->info = open_memstream(&r->info_buf, &r->info_len);
    if (r->rows == NULL || r->info == NULL) die("out of memory");
    return r;
}

static void info_key(vqr *r, const char *key)
{
    fprintf(r->info, "%s", r->n_info++ ? ", " : "");
    json_string(r->info, key);
    fputs(": ", r->info);
}

void vqr_info_str(vqr *r, const char *key, const char *value)
{
    if (r == NULL) return;
    info_key(r, key);
    json_string(r->info, value);
}

void vqr_info_num(vqr *r, const char *key, double value, const char *unit)
{
    if (r == NULL) return;
    note_unit(r, key, unit);
    info_key(r, key);
    json_number(r->info, value);
}

void vqr_row(vqr *r)
{
    if (r == NULL) return;
    fprintf(r->rows, "%s\n    {", r->n_rows ? "}," : "");
    r->n_rows++;
    r->n_fields = 0;
}

static void field_key(vqr *r, const char *key)
{
    if (r->n_rows == 0) die("a field before vqr_row");
    fprintf(r->rows, "%s", r->n_fields++ ? ", " : "");
    json_string(r->rows, key);
    fputs(": ", r->rows);
}

void vqr_str(vqr *r, const char *key, const char *value)
{
    if (r == NULL) return;
    field_key(r, key);
    json_string(r->rows, value);
}

void vqr_int(vqr *r, const char *key, int64_t value, const char *unit)
{
    if (r == NULL) return;
    note_unit(r, key, unit);
    field_key(r, key);
    fprintf(r->rows, "%lld", (long long)value);
}

void vqr_num(vqr *r, const char *key, double value, const char *unit)
{
    if (r == NULL) return;
    note_unit(r, key, unit);
    field_key(r, key);
    json_number(r->rows, value);
}

void vqr_bool(vqr *r, const char *key, bool value)
{
    if (r == NULL) return;
    field_key(r, key);
    fputs(value ? "true" : "false", r->rows);
}

/* "model name" of /proc/cpuinfo (x86) or "unknown". */
static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *colon = strchr(line, ':');
        if (colon == NULL) continue;
        colon++;
        while (*colon == ' ' || *colon == '\t') colon++;
        snprintf(buf, n, "%s", colon);
        buf[strcspn(buf, "\n")] = '\0';
        break;
    }
    fclose(f);
}

static void print_machine(const vqr *r)
{
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    struct utsname u;
    const bool have_uname = uname(&u) == 0;
    printf("  \"machine\": {\"cpu\": ");
    json_string(stdout, cpu);
    printf(", \"logical_cpus\": %ld, \"os\": ", sysconf(_SC_NPROCESSORS_ONLN));
    char os[160];
    snprintf(os, sizeof os, "%s %s", have_uname ? u.sysname : "unknown", have_uname ? u.release : "");
    json_string(stdout, os);
    printf(", \"arch\": ");
    json_string(stdout, have_uname ? u.machine : "unknown");
    printf(", \"gpu\": ");
    const char *gpu = NULL;
#ifdef VQ_TOOL_CUDA
    struct cudaDeviceProp prop;
    if (r->ctx && vq_ctx_backend(r->ctx) == VQ_BACKEND_CUDA && cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
        gpu = prop.name;
#endif
    (void)r;
    if (gpu) json_string(stdout, gpu);
    else printf("null");
    printf("},\n");
}

void vqr_end(vqr *r)
{
    if (r == NULL) return;
    if (r->n_rows) fputs("}", r->rows);
    fclose(r->rows);
    fclose(r->info);
    char date[32];
    const time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("{\n  \"schema\": \"vq-report/1\",\n  \"tool\": \"vq\",\n  \"version\": ");
    json_string(stdout, vq_version_string());
    printf(",\n  \"commit\": ");
    json_string(stdout, VQ_BUILD_COMMIT);
    printf(",\n  \"date\": \"%s\",\n  \"command\": ", date);
    json_string(stdout, r->command);
    printf(",\n  \"args\": [");
    for (int i = 1; i < r->argc; i++) {
        if (i > 1) printf(", ");
        json_string(stdout, r->argv[i]);
    }
    printf("],\n");
    print_machine(r);
    if (r->ctx) {
        printf("  \"backend\": \"%s\",\n  \"isa\": ", vq_ctx_backend(r->ctx) == VQ_BACKEND_CUDA ? "cuda" : "cpu");
        json_string(stdout, vq_ctx_isa(r->ctx));
        printf(",\n  \"threads\": %d,\n", vq_ctx_num_threads(r->ctx));
    } else {
        printf("  \"backend\": null,\n  \"isa\": null,\n  \"threads\": null,\n");
    }
    printf("  \"info\": {%s},\n  \"units\": {", r->info_buf);
    for (int i = 0; i < r->n_units; i++) {
        printf("%s", i ? ", " : "");
        json_string(stdout, r->unit_key[i]);
        printf(": ");
        json_string(stdout, r->unit[i]);
    }
    printf("},\n  \"rows\": [%s\n  ]\n}\n", r->rows_buf);
    fflush(stdout);
    free(r->rows_buf);
    free(r->info_buf);
    free(r);
}
