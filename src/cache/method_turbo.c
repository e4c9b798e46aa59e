/* method_turbo.c — TurboQuant keys (Hadamard rotation with the layer's random
 * signs, Lloyd-Max codes of bits bits, one scale per token), its two-stage
 * residual form (TURBO_RVQ: stage 2 codes the stage-1 residual) and
 * TurboQuant values, whose scale may be stored in f16. Codes below 8 bits
 * are bit-packed u32 words (formats/format_bitpack.h). */
#include "cache/cache_method.h"

static vq_status layout_keys(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_key_config *k = &L->cfg.keys;
    const bool rvq = k->method == VQ_KEY_TURBO_RVQ;
    VQ_RETURN_IF(c->ctx, !vq_is_pow2(c->D), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->head_dim': %s keys need a power of two, got %d", rvq ? "TURBO_RVQ" : "TURBO",
                 c->D);
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range(k->bits, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.bits': expected 1..8, got %d", name, k->bits);
    VQ_RETURN_IF(c->ctx, rvq && !vq_cache_in_range(k->bits2, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.keys.bits2': expected 1..8, got %d", name, k->bits2);
    vq_cache_add_turbo_codes(c, L, rvq ? "k_idx1" : "k_idx", k->bits, true);
    vq_cache_add_stream(c, L, rvq ? "k_scale1" : "k_scale", VQ_DT_F32, c->P, 1, 3, true, VQ_CACHE_PART_PARAM);
    if (rvq) {
        vq_cache_add_turbo_codes(c, L, "k_idx2", k->bits2, true);
        vq_cache_add_stream(c, L, "k_scale2", VQ_DT_F32, c->P, 1, 3, true, VQ_CACHE_PART_PARAM);
    }
    return VQ_OK;
}

static vq_status layout_values(vq_cache *c, vq_cache_layer *L, const char *name)
{
    vq_value_config *v = &L->cfg.values;
    VQ_RETURN_IF(c->ctx, !vq_is_pow2(c->D), VQ_ERR_INVALID_ARGUMENT,
                 "argument 'cfg->head_dim': TURBO values need a power of two, got %d", c->D);
    VQ_RETURN_IF(c->ctx, !vq_cache_in_range(v->bits, 1, 8), VQ_ERR_INVALID_ARGUMENT,
                 "argument '%s.values.bits': expected 1..8, got %d", name, v->bits);
    vq_cache_add_turbo_codes(c, L, "v_idx", v->bits, false);
    vq_cache_add_stream(c, L, "v_scale", v->scale_f16 ? VQ_DT_F16 : VQ_DT_F32, c->P, 1, 3, false,
                        VQ_CACHE_PART_PARAM);
    return VQ_OK;
}

/* the random signs of the rotation (the residual window's TurboQuant codes
 * draw theirs from the same seed: cache_layout.c) */
static vq_status tables_keys(vq_cache *c, vq_cache_layer *L, const vq_cache_layer_config *user, int l)
{
    VQ_FORWARD_IF_ERROR(vq_cache_new_table(c, L, VQ_CT_KDIAG, "k_diag", 1, (const int64_t[]){c->D}));
    (void)vq_random_signs(vq_cache_layer_seed(L->cfg.keys.seed, l), c->D, L->tables[VQ_CT_KDIAG].host);
    return VQ_OK;
}

/* u8 codes before packing: one plane per stage */
static size_t scratch_keys(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    return 2 * (size_t)((int64_t)c->Hkv * T * c->D);
}

/* u8 codes before packing, and the f32 scales that scale_f16 rounds */
static size_t scratch_values(const vq_cache *c, const vq_cache_layer *L, int64_t T)
{
    const size_t n = (size_t)((int64_t)c->Hkv * T * c->D);
    return n + (L->cfg.values.scale_f16 ? 4 * n / (size_t)c->D : 0);
}

static vq_status encode_keys(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                             unsigned char *scratch, int64_t T)
{
    const vq_key_config *kc = &L->cfg.keys;
    int64_t sh[4] = {1, c->Hkv, T, c->D}, tsh[4];
    DLTensor idx, idx2, tab;
    vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scratch);
    vq_cache_view(c, &idx2, sh, 4, VQ_DT_U8, scratch + (size_t)(c->Hkv * T * c->D));
    vq_cache_table_view(c, L, VQ_CT_KDIAG, &tab, tsh);
    if (kc->method == VQ_KEY_TURBO) {
        const vq_turboquant_opts o = {.norm_correct = kc->norm_correct};
        VQ_FORWARD_IF_ERROR(vq_turboquant_hadamard_quantize(c->ctx, x, &tab, kc->bits,
                                                            kc->bits == 8 ? outs[0] : &idx, outs[1], &o));
        return vq_cache_pack_codes(c, &idx, kc->bits, outs[0]);
    }
    VQ_FORWARD_IF_ERROR(vq_turboquant_rvq_encode(c->ctx, x, &tab, kc->bits, kc->bits2, kc->bits == 8 ? outs[0] : &idx,
                                                 outs[1], kc->bits2 == 8 ? outs[2] : &idx2, outs[3]));
    VQ_FORWARD_IF_ERROR(vq_cache_pack_codes(c, &idx, kc->bits, outs[0]));
    return vq_cache_pack_codes(c, &idx2, kc->bits2, outs[2]);
}

static vq_status encode_values(vq_cache *c, vq_cache_layer *L, const DLTensor *x, DLTensor *const *outs,
                               unsigned char *scratch, int64_t T)
{
    const vq_value_config *vc = &L->cfg.values;
    const int64_t n = c->Hkv * T * c->D;
    int64_t sh[4] = {1, c->Hkv, T, c->D}, tsh[4];
    DLTensor idx, s32, tab;
    vq_cache_view(c, &idx, sh, 4, VQ_DT_U8, scratch);
    vq_cache_view(c, &s32, sh, 3, VQ_DT_F32, scratch + n);
    vq_cache_table_view(c, L, VQ_CT_VDIAG, &tab, tsh);
    VQ_FORWARD_IF_ERROR(vq_turboquant_hadamard_quantize(c->ctx, x, &tab, vc->bits, vc->bits == 8 ? outs[0] : &idx,
                                                        vc->scale_f16 ? &s32 : outs[1], NULL));
    if (vc->scale_f16) VQ_FORWARD_IF_ERROR(vq_cache_round_scales(c, s32.data, outs[1]->data, n / c->D));
    return vq_cache_pack_codes(c, &idx, vc->bits, outs[0]);
}

static void describe_keys(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                          vq_encoded_values *ev)
{
    const vq_key_config *kc = &L->cfg.keys;
    if (kc->method == VQ_KEY_TURBO) {
        ek->format = VQ_KEYS_TURBO;
        ek->turbo.idx = &sv[0], ek->turbo.scale = &sv[1], ek->turbo.diag = &tb[VQ_CT_KDIAG];
        ek->turbo.bits = kc->bits;
        return;
    }
    ek->format = VQ_KEYS_TURBO_RVQ;
    ek->rvq.idx1 = &sv[0], ek->rvq.scale1 = &sv[1], ek->rvq.idx2 = &sv[2], ek->rvq.scale2 = &sv[3];
    ek->rvq.diag = &tb[VQ_CT_KDIAG], ek->rvq.b1 = kc->bits, ek->rvq.b2 = kc->bits2;
}

static void describe_values(const vq_cache_layer *L, const DLTensor *sv, const DLTensor *tb, vq_encoded_keys *ek,
                            vq_encoded_values *ev)
{
    ev->format = VQ_VALUES_TURBO;
    ev->turbo.idx = &sv[0], ev->turbo.scale = &sv[1], ev->turbo.diag = &tb[VQ_CT_VDIAG];
    ev->turbo.bits = L->cfg.values.bits;
}

const vq_cache_method vq_cache_keys_turbo = {
    .name = "TURBO", .id = VQ_KEY_TURBO, .window = true, .layout = layout_keys, .tables = tables_keys,
    .scratch = scratch_keys, .encode = encode_keys, .describe = describe_keys,
};

const vq_cache_method vq_cache_keys_turbo_rvq = {
    .name = "TURBO_RVQ", .id = VQ_KEY_TURBO_RVQ, .window = true, .layout = layout_keys, .tables = tables_keys,
    .scratch = scratch_keys, .encode = encode_keys, .describe = describe_keys,
};

/* The value signs are made by cache_layout.c, which a TurboQuant window
 * needs as well (vq_cache_build_tables). */
const vq_cache_method vq_cache_values_turbo = {
    .name = "TURBO", .id = VQ_VALUE_TURBO, .window = true, .layout = layout_values,
    .scratch = scratch_values, .encode = encode_values, .describe = describe_values,
};
