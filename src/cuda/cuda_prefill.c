/* cuda_prefill.c — host glue of the CUDA RaBitQ prefill kernel
 * (prefill_rabitq.cu): backend limits, shapes from the (already validated)
 * DLTensors, the launch. One kernel, no scratch, no split of the kv axis
 * (opts->num_splits is a CPU hint and is ignored here: at prefill sizes the
 * query rows alone fill the device). */
#include <stdint.h>

#include "cuda/cuda_backend.h"
#include "cuda/prefill_params.h"

vq_status vq_cuda_rabitq_prefill_attend(vq_ctx *ctx, const DLTensor *q, const DLTensor *scale,
                                        const DLTensor *k_bits, const DLTensor *k_mag, const DLTensor *k_const,
                                        const DLTensor *v_idx, const DLTensor *v_cents, DLTensor *out,
                                        const vq_rabitq_attend_opts *opts)
{
    VQ_FORWARD_IF_ERROR(vq_cuda_begin(ctx));
    const int64_t D = vq_dim(q, 3);
    VQ_RETURN_IF(ctx, D % 8 != 0 || D > VQ_CU_PREFILL_MAX_D, VQ_ERR_UNSUPPORTED,
                 "the CUDA prefill kernel needs D %% 8 == 0 and D <= %d, got D = %lld", VQ_CU_PREFILL_MAX_D,
                 (long long)D);
    const DLTensor *vs = opts ? opts->v_scale : NULL;
    const DLTensor *ts[] = {q, scale, k_bits, k_mag, k_const, v_idx, v_cents, out, vs};
    static const char *const names[] = {"q", "scale", "k_bits", "k_mag", "k_const",
                                        "v_idx", "v_cents", "out", "opts->v_scale"};
    VQ_FORWARD_IF_ERROR(vq_cuda_check_aligned16(ctx, ts, names, 9));

    vq_cu_prefill_params p = {0};
    const int64_t B = vq_dim(q, 0), Hq = vq_dim(q, 1), Sq = vq_dim(q, 2);
    const int64_t Hkv = vq_dim(k_bits, 1), Skv = vq_dim(k_bits, 2);
    const int64_t rows = Hq / Hkv * Sq;
    VQ_RETURN_IF(ctx, rows > INT32_MAX - VQ_CU_PREFILL_ROWS || Skv > INT32_MAX - 64, VQ_ERR_UNSUPPORTED,
                 "sequence too long for the CUDA prefill kernel: Hq/Hkv*Sq = %lld, Skv = %lld", (long long)rows,
                 (long long)Skv);
    VQ_RETURN_IF(ctx, Hkv > 65535 || B > 65535, VQ_ERR_UNSUPPORTED,
                 "grid too large: Hkv = %lld, B = %lld (limit 65535 each)", (long long)Hkv, (long long)B);
    p.B = (int)B;
    p.Hq = (int)Hq;
    p.Hkv = (int)Hkv;
    p.Sq = (int)Sq;
    p.Skv = (int)Skv;
    p.D = (int)D;
    p.G = (int)(Hq / Hkv);
    p.rows = (int)rows;
    p.q = vq_data(q);
    p.q_f16 = vq_dtype_of(q) == VQ_DT_F16;
    p.scale = vq_data(scale);
    p.k_bits = vq_data(k_bits);
    p.k_mag = vq_data(k_mag);
    p.k_const = k_const ? vq_data(k_const) : NULL;
    p.v_idx = vq_data(v_idx);
    p.v_cents = vq_data(v_cents);
    p.n_cents = (int)vq_numel(v_cents);
    p.v_scale = vs ? vq_data(vs) : NULL;
    p.out = vq_data(out);
    p.out_f16 = vq_dtype_of(out) == VQ_DT_F16;
    return vq_cuda_check(ctx, vq_cu_launch_rabitq_prefill(&p, ctx->stream), "RaBitQ prefill kernel launch");
}
