/* method_vecinfer.c — VecInfer keys: product VQ over M subspaces of D/M
 * channels, one index per subspace (u8 for C <= 256 centroids, else u16),
 * with the fitted codebook and per-channel smoothing factors passed in
 * (formats/format_vecinfer.h). */
#include "cache/cache_method.h"

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_ctx *ctx = c->ctx;
    const vq_key_config *k = &L->cfg.keys;
    const int D = c->D;
    VQ_FORWARD_IF_ERROR(vq_cache_check_table(ctx, k->codebook, name, "keys.codebook", 3, 4));
    const DLTensor *cb = k->codebook;
    const int64_t M = vq_dim(cb, -3), C = vq_dim(cb, -2), sub = vq_dim(cb, -1);
    VQ_RETURN_IF(ctx, M * sub != D || (cb->ndim == 4 && cb->shape[0] != c->Hkv), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.codebook': expected [M, C, D/M] or [Hkv, M, C, D/M] with D = %d, Hkv = %d",
                 name, D, c->Hkv);
    VQ_RETURN_IF(ctx, C > 65536, VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.codebook': C = %lld > 65536", name,
                 (long long)C);
    if (k->smooth) {
        VQ_FORWARD_IF_ERROR(vq_cache_check_table(ctx, k->smooth, name, "keys.smooth", 1, 2));
        const DLTensor *sm = k->smooth;
        VQ_RETURN_IF(ctx, vq_dim(sm, -1) != D || (sm->ndim == 2 && sm->shape[0] != c->Hkv),
                     VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.smooth': expected [D] or [Hkv, D]", name);
        const float *x = (const float *)vq_data(sm);
        for (int64_t i = 0; i < vq_numel(sm); i++)
            VQ_RETURN_IF(ctx, !(x[i] > 0.0f), VQ_ERR_INVALID_ARGUMENT,
                         "argument '%s.keys.smooth': element %lld is not > 0", name, (long long)i);
    }
    vq_cache_add_stream(c, L, "k_idx", C <= 256 ? VQ_DT_U8 : VQ_DT_U16, c->P, M, 4, true, VQ_CACHE_PART_CODE);
    return VQ_OK;
}

static vq_status tables(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    VQ_FORWARD_IF_ERROR(vq_cache_copy_table(c, L, VQ_CT_CODEBOOK, "vecinfer_codebook", user->keys.codebook));
    if (user->keys.smooth) return vq_cache_copy_table(c, L, VQ_CT_SMOOTH, "vecinfer_smooth", user->keys.smooth);
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_SMOOTH, "vecinfer_smooth", 1, (const int64_t[]){c->D}));
    for (int64_t i = 0; i < c->D; i++) L->tables[VQ_CT_SMOOTH].host[i] = 1.0f;
    return VQ_OK;
}

static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    int64_t tsh[4], tsh2[4];
    DLTensor tab, tab2;
    vq_cache_table_view(c, L, VQ_CT_CODEBOOK, &tab, tsh);
    vq_cache_table_view(c, L, VQ_CT_SMOOTH, &tab2, tsh2);
    return vq_vecinfer_quantize(c->ctx, x, &tab, &tab2, (int)vq_dim(&tab, -3), outs[0]);
}

static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_VECINFER;
    ek->vecinfer.idx = &sv[0], ek->vecinfer.codebook = &tb[VQ_CT_CODEBOOK];
    ek->vecinfer.smooth = &tb[VQ_CT_SMOOTH];
}

const vq_cache_method vq_cache_keys_vecinfer = {
    .name = "VECINFER", .id = VQ_KEY_VECINFER, .window = true,
    .layout = layout, .tables = tables, .encode = encode, .describe = describe,
};
