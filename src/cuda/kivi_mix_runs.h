/* kivi_mix_runs.h — which mixed-width KIVI keys (VQ_KEY_KIVI_MIX,
 * formats/format_kivi_mix.h) the CUDA decode scores in their run form
 * (keys_kivi_mix_runs.cu) rather than chunk by chunk through the width mask
 * (keys_kivi_mix.cu). Read by C (the device tests check which form their
 * cases reach) and by nvcc. */
#ifndef VQ_CUDA_KIVI_MIX_RUNS_H
#define VQ_CUDA_KIVI_MIX_RUNS_H

#include <stdbool.h>
#include <stdint.h>

/* The run form needs: a 32-token tile inside one key group (group a multiple
 * of 32; the skeleton's tiles start at multiples of 32 and pages hold whole
 * groups), so the warp can put the group's channels in stream order once per
 * tile; widths 2 and 4, so 8 codes are 2 or 4 whole bytes; whole 8-code
 * chunks in each run (wide a multiple of 8), so no chunk mixes widths and
 * both runs start on a byte (rows then have an even byte count). The row
 * base must also be 2-byte aligned (checked at fill). */
static inline bool vq_cu_kivi_mix_runs(int64_t d, int64_t wide, int bits, int bits2, int64_t group)
{
    return bits == 2 && bits2 == 4 && d % 8 == 0 && wide % 8 == 0 && group % 32 == 0;
}

#endif
