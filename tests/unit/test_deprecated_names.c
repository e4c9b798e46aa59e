/* test_deprecated_names.c — the earlier public names (the header's last
 * section) still compile to the same enumerators, types, functions and
 * struct members as the names that replaced them, and give the same results. */
#include "harness.h"

static void test_enumerators(void)
{
    VT_CHECK(VQ_KEYS_AFFINE == VQ_KEYS_KIVI, "VQ_KEYS_AFFINE");
    VT_CHECK(VQ_KEYS_PQ == VQ_KEYS_VECINFER, "VQ_KEYS_PQ");
    VT_CHECK(VQ_VALUES_PLAIN == VQ_VALUES_F16, "VQ_VALUES_PLAIN");
    VT_CHECK(VQ_VALUES_AFFINE == VQ_VALUES_KIVI, "VQ_VALUES_AFFINE");
    VT_CHECK(VQ_KEY_PQ == VQ_KEY_VECINFER, "VQ_KEY_PQ");
}

/* The old member names alias the new ones: a write through one is read
 * through the other. */
static void test_struct_members(void)
{
    const DLTensor *t = (const DLTensor *)&t;
    vq_encoded_keys k = {0};
    k.affine.group_size = 32;
    k.plain.keys = t;
    k.pq.smooth = t;
    VT_CHECK(k.kivi.group_size == 32 && k.f16.keys == t && k.vecinfer.smooth == t, "keys members");
    vq_encoded_values v = vq_plain_values(t);
    VT_CHECK(v.format == VQ_VALUES_F16 && v.f16.values == t && v.plain.values == t, "vq_plain_values");
    v.affine.bits = 4;
    VT_CHECK(v.kivi.bits == 4, "values members");
    vq_commvq_opts o = {0};
    vq_comm_vq_opts *po = &o;
    VT_CHECK(po == &o, "vq_comm_vq_opts");
}

/* The old function names call the new functions: same codes, bit for bit. */
static void test_functions(void)
{
    vq_ctx *ctx = NULL;
    VT_CHECK(vq_ctx_create(NULL, &ctx) == VQ_OK, "ctx");
    DLTensor *k = vt_new(VT_F32, VT_DIMS(1, 2, 40, 16));
    vq_rng rng;
    vq_rng_seed(&rng, 7);
    vt_fill_normal(k, &rng, 0.0, 1.0);
    DLTensor *codes[2], *scale[2], *zero[2];
    for (int i = 0; i < 2; i++) {
        codes[i] = vt_new(VT_U8, VT_DIMS(1, 2, 40, 16));
        scale[i] = vt_new(VT_F32, VT_DIMS(1, 2, 2, 16));
        zero[i] = vt_new(VT_F32, VT_DIMS(1, 2, 2, 16));
    }
    VT_OK(ctx, vq_affine_quantize_keys(ctx, k, 4, 32, codes[0], scale[0], zero[0]));
    VT_OK(ctx, vq_kivi_quantize_keys(ctx, k, 4, 32, codes[1], scale[1], zero[1]));
    VT_CHECK(memcmp(codes[0]->data, codes[1]->data, 1 * 2 * 40 * 16) == 0, "same codes");
    VT_CHECK(memcmp(scale[0]->data, scale[1]->data, 1 * 2 * 2 * 16 * 4) == 0, "same scales");
    for (int i = 0; i < 2; i++) {
        vt_free(codes[i]);
        vt_free(scale[i]);
        vt_free(zero[i]);
    }
    vt_free(k);
    vq_ctx_free(ctx);
}

int main(void)
{
    VT_RUN(test_enumerators);
    VT_RUN(test_struct_members);
    VT_RUN(test_functions);
    return vt_finish();
}
