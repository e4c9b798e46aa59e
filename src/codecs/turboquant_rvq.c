/* turboquant_rvq.c — the two-stage residual TurboQuant codec: stage 1 is
 * the Hadamard codec with b1 bits; stage 2 quantizes the residual of the
 * rotated row with b2 bits, normalised by its own RMS. */
#include "turboquant.h"
#ifdef VQ_WITH_CUDA
#include "codecs/codecs_cuda.h"
#endif

/* rows -> rot -> (idx1, scale1) -> residual -> (idx2, scale2) */
static void rvq_encode_task(void *arg, int64_t task, int thread)
{
    const vq_turbo_rows_job *j = arg;
    const vq_turbo_stage *s1 = &j->stage[0], *s2 = &j->stage[1];
    int64_t r0, r1;
    vq_task_rows(task, j->rows_per_task, j->n_rows, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = vq_turbo_load_row(j, r, thread);
        uint8_t *i1 = s1->idx + r * j->d, *i2 = s2->idx + r * j->d;
        j->rotate(y, j->d, j->diag, false);
        const float a = vq_turbo_quantize_rotated(j->k, y, j->d, &s1->q, s1->cents, false, i1);
        j->k->gather_row(i1, j->d, s1->cents, s1->mask, -a, true, y); /* y <- y - a * c1[idx1] */
        s1->scale[r] = a;
        s2->scale[r] = vq_turbo_quantize_rotated(j->k, y, j->d, &s2->q, s2->cents, false, i2);
    }
}

/* (idx1, scale1, idx2, scale2) -> y_hat -> rot^-1 -> rows */
static void rvq_decode_task(void *arg, int64_t task, int thread)
{
    const vq_turbo_rows_job *j = arg;
    const vq_turbo_stage *s1 = &j->stage[0], *s2 = &j->stage[1];
    int64_t r0, r1;
    vq_task_rows(task, j->rows_per_task, j->n_rows, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float *y = vq_turbo_out_row(j, r, thread);
        j->k->gather_row(s1->idx + r * j->d, j->d, s1->cents, s1->mask, s1->scale[r], false, y);
        j->k->gather_row(s2->idx + r * j->d, j->d, s2->cents, s2->mask, s2->scale[r], true, y);
        vq_turbo_store_row(j, r, y);
    }
}

vq_status vq_turboquant_rvq_encode(vq_ctx *ctx, const DLTensor *x, const DLTensor *diag, int b1, int b2,
                                   DLTensor *idx1_out, DLTensor *scale1_out, DLTensor *idx2_out,
                                   DLTensor *scale2_out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, x, "x", VQ_DTM_F16_F32, 1, 8));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, x, "x", diag, &d));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, b1, "b1"));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, b2, "b2"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx1_out, "idx1_out", scale1_out, "scale1_out", x, "x"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx2_out, "idx2_out", scale2_out, "scale2_out", x, "x"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_rvq_encode(
            ctx, x, diag, b1, b2, idx1_out, scale1_out, idx2_out, scale2_out);
#endif

    vq_turbo_rows_job j = {.rows = vq_data(x), .rows_dt = vq_dtype_of(x), .diag = diag ? vq_data(diag) : NULL,
                           .n_rows = vq_numel(x) / d, .d = d};
    vq_turbo_stage_init(&j.stage[0], b1, idx1_out, scale1_out);
    vq_turbo_stage_init(&j.stage[1], b2, idx2_out, scale2_out);
    return vq_turbo_run_rows(ctx, &j, true, rvq_encode_task);
}

vq_status vq_turboquant_rvq_decode(vq_ctx *ctx, const DLTensor *idx1, const DLTensor *scale1,
                                   const DLTensor *idx2, const DLTensor *scale2, const DLTensor *diag,
                                   int b1, int b2, DLTensor *out)
{
    VQ_ENTER(ctx);
    VQ_FORWARD_IF_ERROR(vq_check_tensor(ctx, out, "out", VQ_DTM_F16_F32, 1, 8));
    int64_t d;
    VQ_FORWARD_IF_ERROR(vq_check_rotation(ctx, out, "out", diag, &d));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, b1, "b1"));
    VQ_FORWARD_IF_ERROR(vq_check_bits8(ctx, b2, "b2"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx1, "idx1", scale1, "scale1", out, "out"));
    VQ_FORWARD_IF_ERROR(vq_check_turbo_codes(ctx, idx2, "idx2", scale2, "scale2", out, "out"));
#ifdef VQ_WITH_CUDA
    if (vq_ctx_is_cuda(ctx)) return vq_cuda_turboquant_rvq_decode(ctx, idx1, scale1, idx2, scale2, diag, b1, b2, out);
#endif

    vq_turbo_rows_job j = {.rows = vq_data(out), .rows_dt = vq_dtype_of(out), .diag = diag ? vq_data(diag) : NULL,
                           .n_rows = vq_numel(out) / d, .d = d};
    vq_turbo_stage_init(&j.stage[0], b1, idx1, scale1);
    vq_turbo_stage_init(&j.stage[1], b2, idx2, scale2);
    return vq_turbo_run_rows(ctx, &j, j.rows_dt != VQ_DT_F32, rvq_decode_task);
}
