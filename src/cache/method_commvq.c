/* method_commvq.c — CommVQ keys: R additive codebook indices per token of the
 * key before RoPE, and the token's position (i32), with RoPE applied at
 * decode from the cos/sin tables passed in (formats/format_commvq.h). Every
 * token is encoded at once: keys arrive before RoPE, so a window of them
 * could not be attended as plain keys. */
#include "cache/cache_method.h"

static vq_status layout(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_ctx *ctx = c->ctx;
    const vq_key_config *k = &L->cfg.keys;
    const int D = c->D;
    VQ_FORWARD_IF_ERROR(vq_cache_check_table(ctx, k->codebook, name, "keys.codebook", 3, 3));
    const DLTensor *cb = k->codebook;
    VQ_RETURN_IF(ctx, cb->shape[2] != D || cb->shape[1] > 65536, VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.codebook': expected [R, C <= 65536, D = %d]", name, D);
    VQ_FORWARD_IF_ERROR(vq_cache_check_table(ctx, k->cos_freqs, name, "keys.cos_freqs", 2, 2));
    VQ_FORWARD_IF_ERROR(vq_cache_check_table(ctx, k->sin_freqs, name, "keys.sin_freqs", 2, 2));
    VQ_RETURN_IF(ctx, k->cos_freqs->shape[1] != D / 2 || k->sin_freqs->shape[1] != D / 2 ||
                          k->sin_freqs->shape[0] != k->cos_freqs->shape[0],
                 VQ_ERR_INVALID_ARGUMENT, "argument '%s.keys.cos_freqs/sin_freqs': expected both [Pmax, D/2 = %d]",
                 name, D / 2);
    VQ_RETURN_IF(ctx, !vq_cache_in_range((int)k->rope, 0, 1), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.rope': unknown layout %d", name, (int)k->rope);
    vq_cache_add_stream(c, L, "k_idx", cb->shape[1] <= 256 ? VQ_DT_U8 : VQ_DT_U16, c->P, cb->shape[0], 4, true,
                        VQ_CACHE_PART_CODE);
    vq_cache_add_stream(c, L, "k_pos", VQ_DT_I32, c->P, 1, 2, true, VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

static vq_status tables(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    VQ_FORWARD_IF_ERROR(vq_cache_copy_table(c, L, VQ_CT_CODEBOOK, "commvq_codebook", user->keys.codebook));
    VQ_FORWARD_IF_ERROR(vq_cache_copy_table(c, L, VQ_CT_COS, "commvq_cos", user->keys.cos_freqs));
    return vq_cache_copy_table(c, L, VQ_CT_SIN, "commvq_sin", user->keys.sin_freqs);
}

/* outs[1] (the positions) is filled by the caller, which knows them */
static vq_status encode(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                        unsigned char *scratch, int64_t T)
{
    int64_t tsh[4];
    DLTensor tab;
    vq_cache_table_view(c, L, VQ_CT_CODEBOOK, &tab, tsh);
    return vq_commvq_encode(c->ctx, x, &tab, outs[0]);
}

static void describe(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                     vq_encoded_values *ev)
{
    ek->format = VQ_KEYS_COMMVQ;
    ek->commvq.idx = &sv[0], ek->commvq.positions = &sv[1], ek->commvq.codebook = &tb[VQ_CT_CODEBOOK];
    ek->commvq.cos_freqs = &tb[VQ_CT_COS], ek->commvq.sin_freqs = &tb[VQ_CT_SIN];
    ek->commvq.rope = L->cfg.keys.rope;
}

const vq_cache_method vq_cache_keys_commvq = {
    .name = "COMMVQ", .id = VQ_KEY_COMMVQ, .window = false,
    .layout = layout, .tables = tables, .encode = encode, .describe = describe,
};
