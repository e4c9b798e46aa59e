/* attn_keys_rabitq.c — RaBitQ 1-bit keys, two scores:
 *   Hamming (seed): s = (D - 2 popcount(sign(q) XOR bits)) * q_scale * mag + cnst,
 *                   straight from the bits (kern->hamming), no tile;
 *   exact:          s = (q . sign) * q_scale * mag + cnst, the block's signs
 *                   decoded to ±mag in the f32 tile and scored by all rows. */
#include <string.h>

#include "attention/attn_formats.h"

typedef struct rabitq_keys {
    vq_attn_view bits;        /* [B,Hkv,Skv,D/8] */
    vq_attn_view mag, cnst;   /* [B,Hkv,Skv]; cnst.base NULL when absent */
    vq_attn_view q_scale_t;   /* [B,Hq,Sq], base NULL when absent */
    const float *q_scale_one; /* used when q_scale_t is absent */
    bool exact;
    int64_t Hq, Sq, D, qp_floats, Skv;
} rabitq_keys;
_Static_assert(sizeof(rabitq_keys) <= sizeof(vq_attn_desc_storage), "rabitq_keys too big");

/* q [D] -> exact: qp [D] = q * q_scale; Hamming: qp[0] = q_scale, then the
 * D/8 sign bytes of q (bit = q >= 0) */
static void prep_q(const void *desc, const float *q, int64_t row, float *qp)
{
    const rabitq_keys *k = desc;
    /* row = (b*Hq + h)*Sq + i */
    const float qs = k->q_scale_t.base ? *(const float *)vq_attn_at(&k->q_scale_t, row / (k->Hq * k->Sq),
                                                                   row / k->Sq % k->Hq, row % k->Sq)
                                       : *k->q_scale_one;
    if (k->exact) {
        for (int64_t c = 0; c < k->D; c++) qp[c] = q[c] * qs;
        return;
    }
    qp[0] = qs;
    uint8_t *qb = (uint8_t *)(qp + 1);
    memset(qb, 0, (size_t)(k->qp_floats - 1) * sizeof(float));
    for (int64_t c = 0; c < k->D; c++) qb[c / 8] |= (uint8_t)((q[c] >= 0.0f) << (c % 8));
}

/* qp [R][qp_floats] -> s [R][BN] */
static void score(const void *desc, const vq_attn_thread *th, const vq_attn_block *blk, const float *qp, int R,
                  float *s)
{
    const rabitq_keys *k = desc;
    const int64_t nb = k->D / 8;
    const uint8_t *bits = vq_attn_at(&k->bits, blk->b, blk->hk, blk->t0);
    const float *mag = vq_attn_at(&k->mag, blk->b, blk->hk, blk->t0);
    const float *cn = k->cnst.base ? vq_attn_at(&k->cnst, blk->b, blk->hk, blk->t0) : NULL;
    const bool rows = k->bits.st == nb;  /* token rows contiguous */
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    if (rows && ahead + VQ_ATTN_BN <= k->Skv) { /* the bits and magnitudes of a later block */
        vq_attn_prefetch(vq_attn_at(&k->bits, blk->b, blk->hk, ahead), VQ_ATTN_BN * nb);
        if (k->mag.st == 4) vq_attn_prefetch(vq_attn_at(&k->mag, blk->b, blk->hk, ahead), VQ_ATTN_BN * 4);
    }
    if (k->exact) {
        if (rows) th->kern->sign_tile(blk->n, k->D, bits, mag, th->tile);
        else
            for (int j = 0; j < blk->n; j++) th->kern->sign_tile(1, k->D, bits + j * k->bits.st, mag + j, th->tile + j * k->D);
        th->kern->qk[VQ_ATTN_F32](R, blk->n, k->D, qp, k->D, th->tile, k->D, s, VQ_ATTN_BN);
        if (cn)
            for (int r = 0; r < R; r++)
                for (int j = 0; j < blk->n; j++) s[r * VQ_ATTN_BN + j] += cn[j];
        return;
    }
    int32_t *ham = (int32_t *)th->extra;
    const int64_t ldq = k->qp_floats * (int64_t)sizeof(float);
    if (rows && th->kern->hamming_score) {
        th->kern->hamming_score(R, blk->n, k->D, (const uint8_t *)(qp + 1), ldq, qp, k->qp_floats, bits, mag, cn, s,
                                VQ_ATTN_BN);
        return;
    }
    if (rows) th->kern->hamming(R, blk->n, nb, (const uint8_t *)(qp + 1), ldq, bits, ham, VQ_ATTN_BN);
    else
        for (int j = 0; j < blk->n; j++)
            th->kern->hamming(R, 1, nb, (const uint8_t *)(qp + 1), ldq, bits + j * k->bits.st, ham + j, VQ_ATTN_BN);
    for (int r = 0; r < R; r++) {
        const float qs = qp[r * k->qp_floats];
        for (int j = 0; j < blk->n; j++)
            s[r * VQ_ATTN_BN + j] =
                (float)(k->D - 2 * ham[r * VQ_ATTN_BN + j]) * qs * mag[j] + (cn ? cn[j] : 0.0f);
    }
}

static const vq_attn_key_ops rabitq_ops = {prep_q, score, NULL, NULL};

bool vq_attn_rabitq_keys_block(const vq_attn_keys *keys, const vq_attn_block *blk, int64_t count,
                               vq_attn_rabitq_block *b, int64_t *ldq, int64_t *ldqs)
{
    const rabitq_keys *k = keys->desc;
    if (keys->ops != &rabitq_ops || k->exact || k->D != 128 || k->bits.st != 16 || k->mag.st != 4 ||
        (k->cnst.base && k->cnst.st != 4) || blk->n != VQ_ATTN_BN || count < 1)
        return false;
    const int64_t ahead = blk->t0 + VQ_ATTN_PREFETCH_AHEAD;
    const bool pf = ahead + VQ_ATTN_BN <= k->Skv; /* what score() prefetches, for the kernel to */
    b->kbits = vq_attn_at(&k->bits, blk->b, blk->hk, blk->t0);
    b->mag = vq_attn_at(&k->mag, blk->b, blk->hk, blk->t0);
    b->cnst = k->cnst.base ? vq_attn_at(&k->cnst, blk->b, blk->hk, blk->t0) : NULL;
    b->pf[0] = pf ? vq_attn_at(&k->bits, blk->b, blk->hk, ahead) : NULL;
    b->pf[1] = pf ? vq_attn_at(&k->mag, blk->b, blk->hk, ahead) : NULL;
    b->pf_bytes[0] = VQ_ATTN_BN * 16;
    b->pf_bytes[1] = VQ_ATTN_BN * 4;
    b->nb = count;
    b->pf_nb = vq_attn_prefetch_blocks(blk->t0, count, k->Skv);
    b->step[0] = VQ_ATTN_BN * 16;
    b->step[1] = b->step[2] = VQ_ATTN_BN * 4;
    *ldq = k->qp_floats * (int64_t)sizeof(float);
    *ldqs = k->qp_floats;
    return true;
}

vq_status vq_attn_bind_keys_rabitq(vq_ctx *ctx, const DLTensor *bits, const DLTensor *mag, const DLTensor *cnst,
                                   bool exact, const DLTensor *q_scale_t, const float *q_scale_one,
                                   const vq_attn_dims *dims, vq_attn_keys *out)
{
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, bits, "k_bits", VQ_DTM_U8, dims, dims->D / 8));
    VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, mag, "k_mag", VQ_DTM_F32, dims, 0));
    if (cnst) VQ_FORWARD_IF_ERROR(vq_attn_check_per_token(ctx, cnst, "k_const", VQ_DTM_F32, dims, 0));
    rabitq_keys *d = (rabitq_keys *)(void *)out->storage.bytes;
    const int64_t qpf = exact ? dims->D : 1 + (dims->D / 8 + 3) / 4;
    *d = (rabitq_keys){vq_attn_view_of(bits),
                       vq_attn_view_of(mag),
                       cnst ? vq_attn_view_of(cnst) : (vq_attn_view){0},
                       q_scale_t ? vq_attn_view_of(q_scale_t) : (vq_attn_view){0},
                       q_scale_one,
                       exact,
                       dims->Hq,
                       dims->Sq,
                       dims->D,
                       qpf,
                       dims->Skv};
    out->ops = &rabitq_ops;
    out->desc = d;
    out->qp_floats = qpf;
    out->thread_floats = exact ? 0 : VQ_ATTN_MAX_ROWS * VQ_ATTN_BN;
    return VQ_OK;
}
