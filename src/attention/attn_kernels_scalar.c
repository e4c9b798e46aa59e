/* attn_kernels_scalar.c — the portable attention kernels: the readable
 * definition of every entry of vq_attn_kernels, and the fallback of every ISA. */
#include <math.h>

#include "attention/attn_kernels.h"
#include "formats/format_bitpack.h"

/* Element j*ld + c of a plain key/value block as f32. */
static inline float elt_load(const void *base, vq_attn_elt e, int64_t i)
{
    switch (e) {
    case VQ_ATTN_F16: return vq_half_to_float(((const uint16_t *)base)[i]);
    case VQ_ATTN_BF16: return vq_bf16_to_float(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

/* [R][D] . [n][D]^T -> s [R][n] */
static inline void qk_any(vq_attn_elt e, int R, int n, int64_t D, const float *q, int64_t ldq, const void *k,
                          int64_t ldk, float *s, int64_t lds)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t c = 0; c < D; c++) acc += q[r * ldq + c] * elt_load(k, e, j * ldk + c);
            s[r * lds + j] = acc;
        }
}

/* o [R][D] += p [R][n] . v [n][D] */
static inline void pv_any(vq_attn_elt e, int R, int n, int64_t D, const float *p, int64_t ldp, const void *v,
                          int64_t ldv, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            const float w = p[r * ldp + j];
            for (int64_t c = 0; c < D; c++) o[r * ldo + c] += w * elt_load(v, e, j * ldv + c);
        }
}

VQ_ATTN_DEFINE_F16_KERNELS

/* s [R][lds]: one online-softmax step per row (see attn_kernels.h). */
static void softmax_scalar(int R, int n, float *s, int64_t lds, float *m, float *d, float *alpha)
{
    for (int r = 0; r < R; r++) {
        float *row = s + r * lds;
        float mx = m[r];
        for (int j = 0; j < n; j++) mx = row[j] > mx ? row[j] : mx;
        if (mx == -INFINITY) {  /* nothing visible yet: keep the empty state */
            for (int j = 0; j < n; j++) row[j] = 0.0f;
            alpha[r] = 1.0f;
            continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < n; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        alpha[r] = expf(m[r] - mx);  /* exp(-inf) = 0 on the first visible block */
        d[r] = d[r] * alpha[r] + sum;
        m[r] = mx;
    }
}

/* s [R][lds]: NaN / +inf scores -> -inf, their rows marked bad. */
static void poison_scalar(int R, int n, float *s, int64_t lds, bool *bad)
{
    for (int r = 0; r < R; r++) {
        float *row = s + r * lds;
        for (int j = 0; j < n; j++)
            if (!(row[j] < INFINITY)) { /* NaN or +inf */
                bad[r] = true;
                row[j] = -INFINITY;
            }
    }
}

/* o [R][ldo] *= alpha[r] where alpha[r] != 1 */
static void rescale_scalar(int R, int64_t D, float *o, int64_t ldo, const float *alpha)
{
    for (int r = 0; r < R; r++) {
        if (alpha[r] == 1.0f) continue;
        for (int64_t c = 0; c < D; c++) o[r * ldo + c] *= alpha[r];
    }
}

/* Integer p.V (attn_kernels.h, kivi_pv8): the definition every ISA follows. */
static void kivi_pv8_scalar(int R, int n, const uint8_t *codes, int64_t ldc, const float *vs, const float *vz,
                              const float *p, int64_t ldp, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r++) {
        const float *pr = p + r * ldp;
        for (int gi = 0; gi < 4; gi++) {
            float amax = 0.0f, zs = 0.0f;
            bool finite = true;
            for (int j = 0; j < n; j++) {
                const float w = pr[j] * vs[4 * j + gi];
                finite = finite && isfinite(w);
                amax = fabsf(w) > amax ? fabsf(w) : amax;
            }
            const float inv = vq_attn_q8_inv(amax, finite), step = finite ? amax / 127.0f : NAN;
            int32_t isum[32] = {0};
            for (int j = 0; j < n; j++) {
                const float x = rintf(pr[j] * vs[4 * j + gi] * inv);
                const int32_t wq = finite ? (int32_t)(x > 127.0f ? 127.0f : x < -127.0f ? -127.0f : x) : 0;
                zs += pr[j] * vz[4 * j + gi];
                for (int c = 0; c < 32; c++) isum[c] += wq * (int32_t)vq_attn_code(codes + j * ldc, 2, 32 * gi + c);
            }
            for (int c = 0; c < 32; c++) o[r * ldo + vq_attn_pv8_pos(32 * gi + c)] += step * (float)isum[c] + zs;
        }
    }
}

/* Integer p.V of codebook values (attn_kernels.h, codebook_pv8 and
 * codebook_pv8_64): the definition every ISA follows, D = 128 or 64. */
static void codebook_pv8_d(int D, int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                           const float *w, int64_t ldw, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r++) {
        const float *wr = w + r * ldw;
        float amax = 0.0f;
        bool finite = true, nonneg = true;
        for (int j = 0; j < n; j++) {
            finite = finite && isfinite(wr[j]);
            nonneg = nonneg && !(wr[j] < 0.0f);
            amax = fabsf(wr[j]) > amax ? fabsf(wr[j]) : amax;
        }
        /* uint8 weights where none is negative: half the rounding step */
        const float L = nonneg ? 255.0f : 127.0f, lo = nonneg ? 0.0f : -127.0f;
        const float inv = vq_attn_q8_inv_levels(L, amax, finite), step = finite ? amax / L : NAN;
        int32_t isum[128] = {0};
        for (int j = 0; j < n; j++) {
            const float x = rintf(wr[j] * inv);
            const int32_t wq = finite ? (int32_t)(x > L ? L : x < lo ? lo : x) : 0;
            const uint8_t *row = idx + j * ldi;
            for (int c = 0; c < D; c++) isum[c] += wq * (int32_t)cq[(row[c / 2] >> (4 * (c & 1))) & 15];
        }
        const float sv = step * cstep;
        for (int c = 0; c < D; c++) o[r * ldo + c] += sv * (float)isum[c];
    }
}

static void codebook_pv8_scalar(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                const float *w, int64_t ldw, float *o, int64_t ldo)
{
    codebook_pv8_d(128, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

static void codebook_pv8_64_scalar(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, float cstep,
                                   const float *w, int64_t ldw, float *o, int64_t ldo)
{
    codebook_pv8_d(64, R, n, idx, ldi, cq, cstep, w, ldw, o, ldo);
}

/* Integer scores against codebook keys (attn_kernels.h, codebook_qk8): the
 * reference the SIMD kernels equal. */
static void codebook_qk8_scalar(int R, int n, const uint8_t *idx, int64_t ldi, const int8_t *cq, const int8_t *xq,
                                int64_t ldx, int32_t *isum, int64_t lds)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            const uint8_t *row = idx + j * ldi;
            const int8_t *x = xq + r * ldx;
            int32_t acc = 0;
            for (int k = 0; k < 64; k++)
                acc += (int32_t)x[k] * cq[row[k] & 15] + (int32_t)x[64 + k] * cq[row[k] >> 4];
            isum[r * lds + j] = acc;
        }
}

static void nibbles3_scalar(int n, const uint8_t *rows, int64_t ldr, uint8_t *out)
{
    for (int j = 0; j < n; j++) vq_bitpack_spread3_nibbles(rows + j * ldr, 128, out + j * 64);
}

static void mix_nibbles_scalar(int n, const uint8_t *rows, int64_t ldr, int64_t nwb, int64_t nb2, uint8_t *out)
{
    for (int j = 0; j < n; j++) {
        const uint8_t *row = rows + j * ldr;
        uint8_t *dst = out + j * (nwb + 2 * nb2);
        for (int64_t i = 0; i < nwb; i++) dst[i] = row[i];
        vq_bitpack_spread2_nibbles(row + nwb, nb2, dst + nwb);
    }
}

/* codes [n][ldc] -> out [n][D] = code * scale[c] + zero[c] */
static void kivi_k_tile_scalar(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc,
                                 const float *scale, const float *zero, float *out)
{
    for (int j = 0; j < n; j++)
        for (int64_t c = 0; c < D; c++)
            out[j * D + c] = (float)vq_attn_code(codes + j * ldc, bits, c) * scale[c] + zero[c];
}

/* codes [n][ldc], vs/vz [n][GV] -> out [n][D] = code * vs[c/g] + vz[c/g] */
static void kivi_v_tile_scalar(int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                                 const float *vz, int64_t GV, int64_t g, float *out)
{
    for (int j = 0; j < n; j++)
        for (int64_t c = 0; c < D; c++)
            out[j * D + c] =
                (float)vq_attn_code(codes + j * ldc, bits, c) * vs[j * GV + c / g] + vz[j * GV + c / g];
}

/* qb [R][ldq] bytes, kb [n][nbytes] -> ham [R][ldh] */
static void hamming_scalar(int R, int n, int64_t nbytes, const uint8_t *qb, int64_t ldq, const uint8_t *kb,
                           int32_t *ham, int64_t ldh)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            int32_t h = 0;
            for (int64_t i = 0; i < nbytes; i++) {
                unsigned x = (unsigned)(qb[r * ldq + i] ^ kb[j * nbytes + i]);
                while (x) { h += (int32_t)(x & 1u); x >>= 1; }
            }
            ham[r * ldh + j] = h;
        }
}

/* bits [n][D/8], mag [n] -> out [n][D] = ±mag */
static void sign_tile_scalar(int n, int64_t D, const uint8_t *bits, const float *mag, float *out)
{
    for (int j = 0; j < n; j++)
        for (int64_t c = 0; c < D; c++)
            out[j * D + c] = (bits[j * (D / 8) + c / 8] >> (c % 8)) & 1 ? mag[j] : -mag[j];
}

/* idx [n][D/2 or D] -> out [n][D] = cents[min(idx, n_cents - 1)] * vscale */
static void codebook_tile_scalar(int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                                 int n_cents, const float *vscale, float *out)
{
    for (int j = 0; j < n; j++) {
        const float sc = vscale ? vscale[j] : 1.0f;
        for (int64_t c = 0; c < D; c++) {
            out[j * D + c] = cents[vq_attn_cb_index(idx, packed, D, j, c, n_cents)] * sc;
        }
    }
}

/* codes [n][ldc], q [R][ldq] -> s [R][lds] = q . (code * scale + zero) */
static void kivi_qk_scalar(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc,
                             const float *scale, const float *zero, const float *q, int64_t ldq, float *s,
                             int64_t lds)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t c = 0; c < D; c++)
                acc += q[r * ldq + c] * ((float)vq_attn_code(codes + j * ldc, bits, c) * scale[c] + zero[c]);
            s[r * lds + j] = acc;
        }
}

/* o [R][ldo] += p [R][n] . (codes [n][D] * vs + vz by channel group) */
static void kivi_pv_scalar(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const float *vs,
                             const float *vz, int64_t GV, int64_t g, const float *p, int64_t ldp, float *o,
                             int64_t ldo)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++)
            for (int64_t c = 0; c < D; c++)
                o[r * ldo + c] += p[r * ldp + j] * ((float)vq_attn_code(codes + j * ldc, bits, c) * vs[j * GV + c / g] +
                                                    vz[j * GV + c / g]);
}

/* o [R][ldo] += w [R][n] . cents[idx [n][D]] */
static void codebook_pv_scalar(int R, int n, int64_t D, bool packed, const uint8_t *idx, const float *cents,
                               int n_cents, const float *w, int64_t ldw, float *o, int64_t ldo)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++)
            for (int64_t c = 0; c < D; c++)
                o[r * ldo + c] += w[r * ldw + j] * cents[vq_attn_cb_index(idx, packed, D, j, c, n_cents)];
}

/* The reference of the integer key scores (see attn_kernels.h): q rows
 * against one key group -> int8 planes xq [R][D] and dz [R][2]. */
static void kivi_q8_scalar(int R, int64_t D, int bits, const float *q, int64_t ldq, const float *scale,
                             const float *zero, int8_t *xq, float *dz)
{
    for (int r = 0; r < R; r++) {
        const float *qr = q + r * ldq;
        float amax = 0.0f, qz = 0.0f;
        bool finite = true;
        for (int64_t c = 0; c < D; c++) {
            const float x = qr[c] * scale[c], a = fabsf(x);
            finite = finite && isfinite(x);
            amax = a > amax ? a : amax;
            qz += qr[c] * zero[c];
        }
        finite = finite && isfinite(qz);
        const float inv = vq_attn_q8_inv(amax, finite);
        for (int64_t c = 0; c < D; c++) {
            const float x = qr[c] * scale[c];
            xq[r * D + vq_attn_q8_pos(c, bits, D)] = (int8_t)(finite ? lrintf(x * inv) : 0);
        }
        dz[2 * r] = finite ? amax / 127.0f : NAN;
        dz[2 * r + 1] = qz;
    }
}

/* s [R][lds] = step * (xq . codes) + qz, the dots in exact integers */
static void kivi_qk8_scalar(int R, int n, int64_t D, int bits, const uint8_t *codes, int64_t ldc, const int8_t *xq,
                              const float *dz, float *s, int64_t lds)
{
    for (int r = 0; r < R; r++)
        for (int j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int64_t c = 0; c < D; c++)
                acc += xq[r * D + vq_attn_q8_pos(c, bits, D)] * (int32_t)vq_attn_code(codes + j * ldc, bits, c);
            s[r * lds + j] = dz[2 * r] * (float)acc + dz[2 * r + 1];
        }
}

static void cvt_f16_scalar(int64_t n, const uint16_t *src, float *dst)
{
    for (int64_t i = 0; i < n; i++) dst[i] = vq_half_to_float(src[i]);
}

void vq_attn_kernels_init_scalar(vq_attn_kernels *k)
{
    VQ_ATTN_SET_F16_KERNELS(k);
    k->softmax = softmax_scalar;
    k->poison = poison_scalar;
    k->kivi_pv8 = kivi_pv8_scalar;
    k->pv8_fast = false;
    k->codebook_pv8 = codebook_pv8_scalar;
    k->codebook_pv8_64 = codebook_pv8_64_scalar;
    k->cb8_fast = false;
    k->codebook_qk8 = codebook_qk8_scalar;
    k->cbqk8_fast = false;
    k->nibbles3 = nibbles3_scalar;
    k->mix_nibbles = mix_nibbles_scalar;
    k->nibbles3_fast = false;
    k->kivi_int8_block = NULL; /* the formats run the separate kernels */
    k->rescale = rescale_scalar;
    k->kivi_k_tile = kivi_k_tile_scalar;
    k->kivi_v_tile = kivi_v_tile_scalar;
    k->hamming = hamming_scalar;
    k->sign_tile = sign_tile_scalar;
    k->codebook_tile = codebook_tile_scalar;
    k->kivi_qk = kivi_qk_scalar;
    k->kivi_pv = kivi_pv_scalar;
    k->codebook_pv = codebook_pv_scalar;
    k->cvt_f16 = cvt_f16_scalar;
    k->kivi_q8 = kivi_q8_scalar;
    k->kivi_qk8 = kivi_qk8_scalar;
}
