/* quant_entries.h — the kernel-table entry points of one ISA file, included
 * at its end after it defines dot_q4 (4-bit affine, has_m), dot_q8 and
 * dot_float (F32/F16/BF16), and tile_q4 / tile_q8 on the packed layout, as
 * static inline bodies, and VQM_ISA_NAME / VQM_ISA_INIT. A switch on nx compiles each body with a constant row count. */
#define NX_SWITCH(call) \
    switch (nx) { case 1: call(1); break; case 2: call(2); break; case 3: call(3); break; default: call(4); break; }

#define VQM_ENTRY(fname, body)                                                                                      \
    static void fname(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, const float *xsum,    \
                      float *out)                                                                                   \
    {                                                                                                               \
        (void)xsum;                                                                                                 \
        NX_SWITCH(body)                                                                                             \
    }
#define B_Q4_1(N) dot_q4(cols, row, N, x, xs, xsum, out, 1)
#define B_Q4_0(N) dot_q4(cols, row, N, x, xs, xsum, out, 0)
#define B_Q8_0(N) dot_q8(cols, row, N, x, xs, out)
#define B_F32(N) dot_float(cols, row, N, x, xs, out, VQM_W_F32)
#define B_F16(N) dot_float(cols, row, N, x, xs, out, VQM_W_F16)
#define B_BF16(N) dot_float(cols, row, N, x, xs, out, VQM_W_BF16)
VQM_ENTRY(k_q4_1, B_Q4_1)
VQM_ENTRY(k_q4_0, B_Q4_0)
VQM_ENTRY(k_q8_0, B_Q8_0)
VQM_ENTRY(k_f32, B_F32)
VQM_ENTRY(k_f16, B_F16)
VQM_ENTRY(k_bf16, B_BF16)
#define B_T_Q4_1(N) tile_q4(cols, row, N, x, xs, xsum, out, 1)
#define B_T_Q4_0(N) tile_q4(cols, row, N, x, xs, xsum, out, 0)
#define B_T_Q8_0(N) tile_q8(cols, row, N, x, xs, out)
VQM_ENTRY(t_q4_1, B_T_Q4_1)
VQM_ENTRY(t_q4_0, B_T_Q4_0)
VQM_ENTRY(t_q8_0, B_T_Q8_0)

/* fills k with this ISA's kernels (every type) */
void VQM_ISA_INIT(vqm_kernels *k);
void VQM_ISA_INIT(vqm_kernels *k)
{
    k->isa = VQM_ISA_NAME;
    k->dot[VQM_W_F32] = k_f32;
    k->dot[VQM_W_F16] = k_f16;
    k->dot[VQM_W_BF16] = k_bf16;
    k->dot[VQM_W_Q4_0] = k_q4_0;
    k->dot[VQM_W_Q4_1] = k_q4_1;
    k->dot[VQM_W_Q8_0] = k_q8_0;
    k->tile[VQM_W_Q4_0] = t_q4_0;
    k->tile[VQM_W_Q4_1] = t_q4_1;
    k->tile[VQM_W_Q8_0] = t_q8_0;
}
