/* quant_entries.h — the kernel-table entry points of one ISA file: tile
 * kernels of every type (tile_q4 with has_m, tile_linear with the type,
 * defined before as static inline bodies), and VQM_ISA_INIT filling
 * k->tile[] (VQM_ISA_NAME). A switch on nx compiles each body with a
 * constant row count. quant.c also uses VQM_ENTRY for its row kernels. */
#define NX_SWITCH(call) \
    switch (nx) { case 1: call(1); break; case 2: call(2); break; case 3: call(3); break; default: call(4); break; }

#define VQM_ENTRY(fname, body)                                                                                      \
    static void fname(int64_t cols, const uint8_t *row, int nx, const float *x, size_t xs, const float *xsum,    \
                      float *out)                                                                                   \
    {                                                                                                               \
        (void)xsum;                                                                                                 \
        NX_SWITCH(body)                                                                                             \
    }
/* tbl[type] = the entry named prefix + type, for the nine types */
#define VQM_FILL(tbl, prefix)                                                  \
    do {                                                                       \
        (tbl)[VQM_W_F32] = prefix##f32, (tbl)[VQM_W_F16] = prefix##f16;        \
        (tbl)[VQM_W_BF16] = prefix##bf16, (tbl)[VQM_W_Q4_0] = prefix##q4_0;    \
        (tbl)[VQM_W_Q4_1] = prefix##q4_1, (tbl)[VQM_W_Q8_0] = prefix##q8_0;    \
        (tbl)[VQM_W_Q5_0] = prefix##q5_0, (tbl)[VQM_W_Q4_K] = prefix##q4_k;    \
        (tbl)[VQM_W_Q6_K] = prefix##q6_k;                                      \
    } while (0)

/* the scalar file has its own Q5_0 tile; the SIMD ones run it as tile_q4's third kind */
#ifndef VQM_T_Q5_0
#define VQM_T_Q5_0(N) tile_q4(cols, row, N, x, xs, xsum, out, 2)
#endif
#define B_T_Q4_1(N) tile_q4(cols, row, N, x, xs, xsum, out, 1)
#define B_T_Q4_0(N) tile_q4(cols, row, N, x, xs, xsum, out, 0)
#define B_T_Q8_0(N) tile_linear(cols, row, N, x, xs, out, VQM_W_Q8_0)
#define B_T_F32(N) tile_linear(cols, row, N, x, xs, out, VQM_W_F32)
#define B_T_F16(N) tile_linear(cols, row, N, x, xs, out, VQM_W_F16)
#define B_T_BF16(N) tile_linear(cols, row, N, x, xs, out, VQM_W_BF16)
VQM_ENTRY(t_q4_1, B_T_Q4_1)
VQM_ENTRY(t_q4_0, B_T_Q4_0)
VQM_ENTRY(t_q8_0, B_T_Q8_0)
VQM_ENTRY(t_f32, B_T_F32)
VQM_ENTRY(t_f16, B_T_F16)
VQM_ENTRY(t_bf16, B_T_BF16)
#define B_T_Q5_0(N) VQM_T_Q5_0(N)
#define B_T_Q4_K(N) tile_q4_k(cols, row, N, x, xs, xsum, out)
#define B_T_Q6_K(N) tile_q6_k(cols, row, N, x, xs, out)
VQM_ENTRY(t_q5_0, B_T_Q5_0)
VQM_ENTRY(t_q4_k, B_T_Q4_K)
VQM_ENTRY(t_q6_k, B_T_Q6_K)

/* sets this ISA's tile kernels (every type) */
void VQM_ISA_INIT(vqm_kernels *k);
void VQM_ISA_INIT(vqm_kernels *k)
{
    k->isa = VQM_ISA_NAME;
    VQM_FILL(k->tile, t_);
}
