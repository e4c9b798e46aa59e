/* main.c — the `vq` command: entry point and sub-command dispatch. */
#include <stdio.h>
#include <string.h>

#include "veloxquant.h"

static int usage(FILE *f)
{
    fprintf(f,
            "usage: vq <command> [options]\n"
            "  version            print the library version and the CPU kernel set\n");
    return f == stdout ? 0 : 2;
}

static int cmd_version(void)
{
    vq_ctx *ctx = NULL;
    if (vq_ctx_create(NULL, &ctx) != VQ_OK) return 1;
    printf("veloxquant %s, CPU kernels: %s, %d threads, CUDA: %s\n", vq_version_string(), vq_ctx_isa(ctx),
           vq_ctx_num_threads(ctx), vq_backend_available(VQ_BACKEND_CUDA) ? "available" : "not available");
    vq_ctx_free(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage(stderr);
    if (strcmp(argv[1], "version") == 0) return cmd_version();
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) return usage(stdout);
    fprintf(stderr, "vq: unknown command '%s'\n", argv[1]);
    return usage(stderr);
}
