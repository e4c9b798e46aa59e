/* calibrate.c — `vq calibrate`: fits a vq_calibration (VecInfer smooth
 * factors and VECINFER codebooks, CommVQ codebooks, Lloyd-Max value tables) on
 * .npy keys/values [L, Hkv, N, D] and saves it (vq_calibration_save,
 * docs/FILE_FORMAT.md). Prints the fitting time; --json reports it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "npy.h"
#include "progress.h"
#include "report.h"
#include "tool.h"

typedef struct cal_opts {
    const char *keys, *values, *out;
    int64_t vecinfer_m, vecinfer_c, commvq_r, commvq_c, value_n, iters, max_samples, seed, threads;
    bool vecinfer_shared, json;
} cal_opts;

/* The .npy as a host DLTensor over its own f16/f32 bytes (copied to aligned memory). */
static DLTensor *load(const char *what, const char *path)
{
    uint8_t *buf;
    vq_npy n;
    char err[512];
    if (vq_npy_load(path, (size_t)1 << 36, &buf, &n, err, sizeof err) != 0) {
        fprintf(stderr, "vq calibrate: --%s: %s\n", what, err);
        return NULL;
    }
    if (n.ndim != 4 || n.numel == 0) {
        fprintf(stderr, "vq calibrate: --%s %s: expected a non-empty [L, Hkv, N, D] array, got %d dimensions\n", what,
                path, n.ndim);
        free(buf);
        return NULL;
    }
    DLTensor *t = tool_tensor(n.elem_bytes == 2 ? TOOL_F16 : TOOL_F32, 4, n.shape);
    memcpy(t->data, n.data, n.data_bytes);
    free(buf);
    return t;
}

static void progress(void *user, int done, int total)
{
    vqp *p = user;
    if (done < total) vqp_step(p, "layer %d of %d", done + 1, total);
}

int vq_cmd_calibrate(int argc, char **argv)
{
    cal_opts o = {.vecinfer_c = 256, .commvq_c = 256, .iters = 25, .max_samples = 16384, .seed = 1};
    const vqa_opt opts[] = {
        {"keys", VQA_STRING, &o.keys, 0, 0, "FILE", "keys .npy [L, Hkv, N, D] f16/f32 (required)"},
        {"values", VQA_STRING, &o.values, 0, 0, "FILE", "values .npy [L, Hkv, N, D] (needed by --value-centroids)"},
        {"out", VQA_OUT_FILE, &o.out, 0, 0, "FILE", "calibration file to write (required)", NULL, 'o'},
        {"pq-subspaces", VQA_INT, &o.vecinfer_m, 0, 4096, "M", "VecInfer VECINFER subspaces (0 = no VECINFER; D % M == 0)"},
        {"pq-centroids", VQA_INT, &o.vecinfer_c, 1, 65536, "C", "centroids per VECINFER subspace"},
        {"pq-shared", VQA_FLAG, &o.vecinfer_shared, .help = "one VECINFER codebook for all kv heads"},
        {"commvq-stages", VQA_INT, &o.commvq_r, 0, 64, "R", "CommVQ additive stages (0 = none)"},
        {"commvq-centroids", VQA_INT, &o.commvq_c, 1, 65536, "C", "centroids per CommVQ stage"},
        {"value-centroids", VQA_INT, &o.value_n, 0, 256, "N", "Lloyd-Max value centroids (0 = none)"},
        {"iters", VQA_INT, &o.iters, 1, 1000, "N", "k-means / Lloyd rounds"},
        {"max-samples", VQA_SIZE, &o.max_samples, 1, 1 << 30, "N", "sample tokens per fit"},
        {"seed", VQA_INT, &o.seed, 0, (double)(1ll << 52), "N", "k-means++ seed"},
        {"threads", VQA_INT, &o.threads, 0, 1024, "T", "CPU threads, 0 = all cores"},
        VQA_JSON_OPT(&o.json),
    };
    const vqa_cmd cmd = {"calibrate",
                         "fit VecInfer / CommVQ / value tables on .npy keys and values and save them",
                         opts, VQA_COUNT(opts),
                         "The file loads with vq_calibration_load and goes to vq_cache_config.calibration.\n"
                         "Pass keys as the cache will receive them (pre-RoPE for CommVQ).\n"};
    const int rc = vqa_parse(&cmd, argc, argv);
    if (rc != VQA_RUN) return rc;
    if (!o.keys || !o.out) return vqa_usage_error(&cmd, "--keys and --out are required");
    if (o.vecinfer_m == 0 && o.commvq_r == 0 && o.value_n == 0)
        return vqa_usage_error(&cmd, "nothing to fit: give --pq-subspaces, --commvq-stages or --value-centroids");
    if (o.value_n > 0 && !o.values) return vqa_usage_error(&cmd, "--value-centroids needs --values");
    DLTensor *k = load("keys", o.keys), *v = o.values ? load("values", o.values) : NULL;
    if (!k || (o.values && !v)) return VQ_EXIT_FAILURE;
    vq_ctx *ctx = tool_ctx((int)o.threads, NULL);
    vqp p;
    vqp_begin(&p, "calibrate", k->shape[0]);
    vqp_step(&p, "layer 1 of %lld", (long long)k->shape[0]);
    const vq_calibration_config cfg = {.vecinfer_subspaces = (int)o.vecinfer_m, .vecinfer_centroids = (int)o.vecinfer_c,
                                       .vecinfer_shared = o.vecinfer_shared, .commvq_stages = (int)o.commvq_r,
                                       .commvq_centroids = (int)o.commvq_c, .value_centroids = (int)o.value_n,
                                       .iters = (int)o.iters, .max_samples = o.max_samples,
                                       .seed = (uint64_t)o.seed, .progress = progress, .progress_user = &p};
    vq_calibration *cal = NULL;
    const double t0 = tool_now();
    tool_check(ctx, vq_calibration_fit(ctx, &cfg, k, v, &cal), "vq_calibration_fit");
    const double fit_s = tool_now() - t0;
    vqp_end(&p);
    tool_check(ctx, vq_calibration_save(ctx, cal, o.out), "vq_calibration_save");
    size_t bytes = 0;
    tool_check(ctx, vq_calibration_save_buffer(ctx, cal, NULL, 0, &bytes), "vq_calibration_save_buffer");
    vqr *r = vqr_begin("calibrate", argc, argv, ctx, o.json);
    if (r) {
        vqr_row(r);
        vqr_int(r, "layers", k->shape[0], NULL);
        vqr_int(r, "kv_heads", k->shape[1], NULL);
        vqr_int(r, "tokens", k->shape[2], "tokens");
        vqr_int(r, "head_dim", k->shape[3], NULL);
        vqr_num(r, "fit_time", fit_s, "s");
        vqr_int(r, "file_bytes", (int64_t)bytes, "B");
        vqr_str(r, "file", o.out);
        vqr_end(r);
    } else {
        printf("vq calibrate: fitted %lld layers x %lld kv heads x %lld tokens x D %lld in %.2f s "
               "(%s, %d threads); wrote %s (%zu bytes)\n",
               (long long)k->shape[0], (long long)k->shape[1], (long long)k->shape[2], (long long)k->shape[3], fit_s,
               vq_ctx_isa(ctx), vq_ctx_num_threads(ctx), o.out, bytes);
    }
    vq_calibration_free(cal);
    tool_tensor_free(k);
    tool_tensor_free(v);
    vq_ctx_free(ctx);
    return VQ_EXIT_OK;
}
