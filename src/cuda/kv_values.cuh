/* kv_values.cuh — the value policies of the decode skeleton (kv_decode.cuh),
 * one per vq_values_format in its values_<name>.cuh, listed once here: the
 * key formats' launchers (kv_keys.cuh) instantiate every listed policy, and
 * the registry (values_registry.cu) answers the host glue with their
 * descriptors.
 *
 * A value policy P<W, CPL> (W the instance width, CPL the channels a lane
 * owns): Pre, one lane's chunk of one token; load(tok, Pre&) issues its
 * loads; apply(Pre, p[R], acc, accz) adds p[r] * v_hat to acc[r][j].
 * Channels at or past D are never loaded (they read as 0 and are never
 * stored), so any D % 8 == 0 up to W works. Each policy struct also gives
 * its vq_values_format (format), the tensor of its kv axis (lead) and the
 * host-side fill of its fields of vq_cu_sdpa_params (fill).
 *
 * ADDING A VALUE FORMAT: write values_<name>.cuh after these (policy,
 * fields, lead, fill), include it below and add it to
 * VQ_CU_ENCODED_VALUE_FORMATS. */
#ifndef VQ_CUDA_KV_VALUES_CUH
#define VQ_CUDA_KV_VALUES_CUH

#include "cuda/values_f16.cuh"
#include "cuda/values_kivi.cuh"
#include "cuda/values_codebook.cuh"
#include "cuda/values_turbo.cuh"

/* The value formats besides plain values (F16Values, which every key format
 * takes on its own): each key format's launch_enc instantiates these. */
#define VQ_CU_ENCODED_VALUE_FORMATS(X) X(KIVIValues) X(CodebookValues) X(TurboValues)

#endif
