/* consumer.c — a tiny program built against an installed veloxquant (see
 * tests/test_install.sh). It checks that the installed header and library
 * agree and that the public API works end to end: a context, a call that
 * succeeds, and a call that fails with a status and a message. Exit 0 = ok. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <veloxquant.h>

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "consumer: FAILED %s\n", what);
        failures++;
    }
}

int main(void)
{
    char header_version[32];
    snprintf(header_version, sizeof header_version, "%d.%d.%d", VQ_VERSION_MAJOR, VQ_VERSION_MINOR,
             VQ_VERSION_PATCH);
    check(strcmp(header_version, vq_version_string()) == 0, "header version == library version");

    vq_ctx *ctx = NULL;
    const vq_ctx_config cfg = {.backend = VQ_BACKEND_CPU, .num_threads = 2};
    check(vq_ctx_create(&cfg, &ctx) == VQ_OK && ctx != NULL, "vq_ctx_create");
    check(vq_ctx_num_threads(ctx) == 2, "two threads");
    check(strcmp(vq_ctx_last_error(ctx), "") == 0, "no error yet");

    /* A library call that succeeds: the default Hadamard diagonal is ±1. */
    float signs[64];
    check(vq_random_signs(42, 64, signs) == VQ_OK, "vq_random_signs");
    for (int i = 0; i < 64; i++) check(fabsf(signs[i]) == 1.0f, "signs are +-1");
    check(vq_f16_to_f32(vq_f32_to_f16(1.5f)) == 1.5f, "f16 round trip");

    /* And one that fails without aborting. */
    check(vq_random_signs(42, 0, signs) == VQ_ERR_INVALID_ARGUMENT, "d = 0 is rejected");
    check(strcmp(vq_status_string(VQ_ERR_INVALID_ARGUMENT), "VQ_ERR_INVALID_ARGUMENT") == 0,
          "vq_status_string");

    printf("consumer: veloxquant %s, CPU kernels %s: %s\n", vq_version_string(), vq_ctx_isa(ctx),
           failures ? "FAILED" : "ok");
    vq_ctx_free(ctx);
    return failures ? 1 : 0;
}
