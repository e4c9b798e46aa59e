"""The original Metal API's functions and the rest of the codec API against float64
references (tests/ref.py), for NumPy and PyTorch inputs, f16 and f32, odd
shapes; outputs land in the caller's framework; bad input raises the C message
and writes nothing."""

import math

import numpy as np
import pytest

import veloxquant as vq
from conftest import np_
import ref

EPS32 = np.finfo(np.float32).eps
EPS16 = np.finfo(np.float16).eps


# ---- availability, tables -------------------------------------------------------

def test_availability_and_version():
    assert vq.backend_available("cpu") is True
    assert vq.cuda_available() == vq.backend_available("cuda")
    assert vq.version() == "0.1.0"
    assert vq.isa() in ("scalar", "avx2", "avx512", "amx", "neon")
    with pytest.raises(vq.InvalidArgumentError):
        vq.backend_available("metal")


def test_supports_shape():
    assert vq.supports_shape(1, 8, 100, 128)
    assert vq.supports_shape(1, 8, 100, 48)
    assert not vq.supports_shape(1, 8, 100, 44)
    assert not vq.supports_shape(1, 8, 100, 288)
    assert not vq.supports_shape(0, 8, 100, 128)


def test_lloyd_max_codebook_mse():
    # MSE of the N(0,1) quantizer by exact integration over its cells (float64):
    # the header's 0.3634, 0.1175, 0.03455, 0.009501.
    for bits, want in [(1, 0.3634), (2, 0.1175), (3, 0.03455), (4, 0.009501)]:
        c, b = vq.lloyd_max_codebook(bits)
        assert c.shape == (2 ** bits,) and b.shape == (2 ** bits - 1,)
        assert np.all(np.diff(c) > 0)
        edges = np.concatenate([[-np.inf], b.astype(np.float64), [np.inf]])
        phi = lambda x: np.where(np.isinf(x), 0.0, np.exp(-x * x / 2) / math.sqrt(2 * math.pi))
        Phi = lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        lo, hi = edges[:-1], edges[1:]
        m0 = Phi(hi) - Phi(lo)
        m1 = phi(lo) - phi(hi)
        with np.errstate(invalid="ignore"):  # inf * 0 at the outer edges, replaced by 0
            m2 = m0 + np.where(np.isinf(lo), 0, lo * phi(lo)) - np.where(np.isinf(hi), 0, hi * phi(hi))
        cc = c.astype(np.float64)
        mse = np.sum(m2 - 2 * cc * m1 + cc * cc * m0)
        assert abs(mse - want) < 1e-4 * max(want, 0.01) / 0.01
    with pytest.raises(vq.InvalidArgumentError, match="bits"):
        vq.lloyd_max_codebook(9)


def test_random_signs_and_projection():
    s = vq.random_signs(7, 64)
    assert s.dtype == np.float32 and set(np.unique(s)) <= {-1.0, 1.0}
    assert np.array_equal(s, vq.random_signs(7, 64)) and not np.array_equal(s, vq.random_signs(8, 64))
    p = vq.qjl_projection(3, 256, 64)
    assert p.shape == (256, 64) and abs(p.mean()) < 0.02 and abs(p.std() - 1) < 0.02
    with pytest.raises(vq.InvalidArgumentError):
        vq.random_signs(7, 0)


# ---- bit packing --------------------------------------------------------------------

@pytest.mark.parametrize("bits,n", [(1, 7), (3, 33), (5, 97), (16, 3), (8, 64)])
def test_bit_pack_roundtrip(fw, rng, bits, n):
    idx = rng.integers(0, 2 ** bits, size=(3, n)).astype(np.int32)
    packed = vq.turboquant_bit_pack(fw(idx), bits)
    assert fw.is_native(packed)
    assert np.array_equal(np_(packed), ref.bit_pack(idx, bits))
    back = vq.turboquant_bit_unpack(packed, bits, n)
    assert np.array_equal(np_(back), idx)


def test_bit_pack_error_leaves_out_untouched(fw):
    out = fw.empty_poisoned((2, 1), np.uint32)
    with pytest.raises(vq.InvalidArgumentError, match="bits") as e:
        vq.turboquant_bit_pack(fw(np.zeros((2, 4), np.int32)), 0, out=out)
    assert e.value.status == "VQ_ERR_INVALID_ARGUMENT"
    assert np.all(np_(out) == 0xFFFFFFFF)


# ---- Hadamard, TurboQuant ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_hadamard(fw, rng, dtype):
    x = rng.standard_normal((5, 64)).astype(dtype)
    diag = vq.random_signs(1, 64)
    y = vq.hadamard(fw(x), fw(diag))
    tol = (EPS16 if dtype == np.float16 else EPS32) * 8 * np.abs(x).max() * math.sqrt(64)
    assert np.abs(np_(y) - ref.rot(x, diag)).max() < tol
    back = vq.hadamard(y, fw(diag), inverse=True)
    assert np.abs(np_(back) - ref.rot_inv(np_(y), diag)).max() < tol


def test_turboquant_scalar(fw, rng):
    x = rng.standard_normal((7, 33)).astype(np.float32)
    for bits in (1, 2, 3, 4, 8):
        c, _ = vq.lloyd_max_codebook(bits)
        idx = vq.turboquant_scalar_quantize(fw(x), bits)
        want = ref.nearest(x, c)
        ok = (np_(idx) == want) | ref.near_boundary(x, c, 1e-6)
        assert ok.all()
        deq = vq.turboquant_scalar_dequantize(idx, bits, 0.5)
        assert np.allclose(np_(deq), 0.5 * c[np_(idx)], rtol=0, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bits", [2, 3, 4])
def test_turboquant_hadamard(fw, rng, dtype, bits):
    x = rng.standard_normal((3, 5, 128)).astype(dtype)
    diag = vq.random_signs(5, 128)
    idx, scale = vq.turboquant_hadamard_quantize(fw(x), bits, diag=fw(diag))
    y = ref.rot(x.astype(np.float64), diag)
    want_scale = np.linalg.norm(y, axis=-1) / math.sqrt(128)
    assert np.abs(np_(scale) - want_scale).max() < 1e-5 * want_scale.max()
    c, _ = vq.lloyd_max_codebook(bits)
    u = y / want_scale[..., None]
    assert ((np_(idx) == ref.nearest(u, c)) | ref.near_boundary(u, c, 1e-4)).all()
    deq = vq.turboquant_hadamard_dequantize(idx, scale, bits, diag=fw(diag))
    want = ref.rot_inv(np_(scale)[..., None].astype(np.float64) * c[np_(idx)], diag)
    assert np.abs(np_(deq) - want).max() < 1e-5 * np.abs(want).max()


def test_turboquant_rvq_roundtrip(fw, rng):
    x = rng.standard_normal((2, 3, 9, 64)).astype(np.float32)
    enc = vq.turboquant_rvq_encode(fw(x), 2, 2)
    assert isinstance(enc, vq.EncodedVector) and tuple(enc.scale1.shape) == (2, 3, 9)
    x_hat = np_(vq.turboquant_rvq_decode(enc))
    # two stages of 2 bits: the residual MSE is about 0.1175^2 of the energy
    rel = np.sum((x_hat - x) ** 2) / np.sum(x ** 2)
    assert rel < 0.1175 * 0.2


# ---- KIVI affine -------------------------------------------------------------------------

@pytest.mark.parametrize("packed,bits", [(False, 3), (True, 2), (True, 4)])
@pytest.mark.parametrize("pdt", ["float32", "float16"])
def test_kivi_keys_values(fw, rng, packed, bits, pdt):
    B, H, S, D, g = 1, 2, 37, 64, 16
    k = rng.standard_normal((B, H, S, D)).astype(np.float32)
    codes, scale, zero = vq.kivi_quantize_keys(fw(k), bits, g, packed=packed, param_dtype=pdt)
    assert tuple(scale.shape) == (B, H, math.ceil(S / g), D)
    k_hat = np_(vq.kivi_dequantize_keys(codes, scale, zero, bits, g))
    # every element within half a step of its group (plus the f16 rounding of scale/zero)
    step = np.repeat(np_(scale).astype(np.float64), g, axis=2)[:, :, :S]
    slack = 0.5 + (2 ** bits) * (EPS16 if pdt == "float16" else EPS32)
    zt = np.repeat(np_(zero).astype(np.float64), g, axis=2)[:, :, :S]
    assert np.all(np.abs(k_hat - k) <= step * slack + 2 * EPS16 * np.abs(zt) + 1e-6)
    # the group parameters are the group's min and (max - min) / (2^bits - 1)
    kg = np.pad(k, ((0, 0), (0, 0), (0, math.ceil(S / g) * g - S), (0, 0)), mode="edge").reshape(B, H, -1, g, D)
    lo, hi = kg.min(3), kg.max(3)
    tol = EPS16 * 2 if pdt == "float16" else 1e-6
    assert np.allclose(np_(zero), lo, rtol=tol, atol=tol)
    assert np.allclose(np_(scale), (hi - lo) / (2 ** bits - 1), rtol=tol, atol=tol)

    v = rng.standard_normal((B, H, S, D)).astype(np.float32)
    vc, vs, vz = vq.kivi_quantize_values(fw(v), bits, g, packed=packed, param_dtype=pdt)
    assert tuple(vs.shape) == (B, H, S, D // g)
    v_hat = np_(vq.kivi_dequantize_values(vc, vs, vz, bits, g, head_dim=D))
    step = np.repeat(np_(vs).astype(np.float64), g, axis=3)
    zt = np.repeat(np_(vz).astype(np.float64), g, axis=3)
    assert np.all(np.abs(v_hat - v) <= step * slack + 2 * EPS16 * np.abs(zt) + 1e-6)


# ---- RaBitQ ---------------------------------------------------------------------------

def test_rabitq_encode(fw, rng):
    keys = rng.standard_normal((2, 9, 64)).astype(np.float32)
    diag = vq.random_signs(2, 64)
    bits, mag = vq.rabitq_encode(fw(keys), fw(diag))
    y = ref.rot(keys, diag)
    assert np.array_equal(np_(bits), ref.pack_bits_u8(y >= 0))
    assert np.allclose(np_(mag), np.abs(y).sum(-1) / 64, rtol=1e-5)
    _, mag_u = vq.rabitq_encode(fw(keys), fw(diag), mag="unbiased")
    assert np.allclose(np_(mag_u), (y ** 2).sum(-1) / np.abs(y).sum(-1), rtol=1e-5)


def test_rabitq_hamming_and_pack(fw, rng):
    qbits = rng.integers(0, 256, 16, dtype=np.uint8)
    bits = rng.integers(0, 256, (11, 16), dtype=np.uint8)
    cx = rng.standard_normal(11).astype(np.float32)
    sc = np.array([0.25], np.float32)
    out = vq.rabitq_hamming_score(fw(qbits), fw(bits), fw(cx), fw(sc))
    ham = ref.popcount_u8(qbits ^ bits).sum(-1)
    assert np.allclose(np_(out), ham * 0.25 + cx, rtol=1e-6, atol=1e-6)
    idx = rng.integers(0, 16, (3, 10), dtype=np.uint8)
    p = np_(vq.rabitq_pack_values(fw(idx)))
    assert np.array_equal(p, idx[:, 0::2] | (idx[:, 1::2] << 4))


def _rabitq_case(rng, B=1, Hq=4, Hkv=2, Sq=1, Skv=77, D=64, nc=16):
    q = rng.standard_normal((B, Hq, Sq, D)).astype(np.float32)
    k_bits = rng.integers(0, 256, (B, Hkv, Skv, D // 8), dtype=np.uint8)
    k_mag = rng.uniform(0.5, 1.5, (B, Hkv, Skv)).astype(np.float32)
    k_const = (0.1 * rng.standard_normal((B, Hkv, Skv))).astype(np.float32)
    v_idx = rng.integers(0, nc, (B, Hkv, Skv, D), dtype=np.uint8)
    v_cents = np.sort(rng.standard_normal(nc)).astype(np.float32)
    return q, k_bits, k_mag, k_const, v_idx, v_cents


@pytest.mark.parametrize("score", ["hamming", "exact"])
def test_rabitq_fused_attend(fw, rng, score):
    q, k_bits, k_mag, k_const, v_idx, v_cents = _rabitq_case(rng)
    D = q.shape[-1]
    q_scale = np.full(q.shape[:3], 1 / math.sqrt(D), np.float32)
    out = vq.rabitq_fused_attend(fw(q), fw(q_scale), fw(k_bits), fw(k_mag), fw(k_const), fw(v_idx), fw(v_cents),
                                 score=score)
    signs = np.unpackbits(k_bits[..., None], axis=-1, bitorder="little").reshape(k_bits.shape[:-1] + (D,))
    sign = np.repeat(2.0 * signs - 1, 2, axis=1)
    if score == "hamming":
        dots = np.einsum("bhqd,bhkd->bhqk", np.where(q >= 0, 1.0, -1.0), sign)  # D - 2 ham
    else:
        dots = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), sign)
    s = dots * q_scale[..., None] * np.repeat(k_mag, 2, axis=1)[:, :, None, :] + \
        np.repeat(k_const, 2, axis=1)[:, :, None, :]
    want = ref.attention_scores(s, v_cents[v_idx].astype(np.float64), 2)
    assert np.abs(np_(out) - want).max() < 1e-5 * np.abs(v_cents).max()
    # packed values give bit-identical outputs
    packed = vq.rabitq_pack_values(fw(v_idx))
    out_p = vq.rabitq_fused_attend(fw(q), fw(q_scale), fw(k_bits), fw(k_mag), fw(k_const), packed, fw(v_cents),
                                   score=score)
    assert np.array_equal(np_(out), np_(out_p))



@pytest.mark.parametrize("value_accum", ["f32", "int8"])
def test_rabitq_fused_attend_value_accum(fw, rng, value_accum):
    # D = 128 and 16 centroids: the shape the int8 p . v kernel takes (AVX-512
    # VNNI + VBMI; the scalar reference of the same arithmetic elsewhere)
    q, k_bits, k_mag, k_const, v_idx, v_cents = _rabitq_case(rng, Skv=300, D=128)
    D = q.shape[-1]
    q_scale = np.full(q.shape[:3], 1 / math.sqrt(D), np.float32)
    v_scale = rng.uniform(0.5, 2.0, k_mag.shape).astype(np.float32)
    out = vq.rabitq_fused_attend(fw(q), fw(q_scale), fw(k_bits), fw(k_mag), fw(k_const), fw(v_idx), fw(v_cents),
                                 v_scale=fw(v_scale), value_accum=value_accum)
    signs = np.unpackbits(k_bits[..., None], axis=-1, bitorder="little").reshape(k_bits.shape[:-1] + (D,))
    dots = np.einsum("bhqd,bhkd->bhqk", np.where(q >= 0, 1.0, -1.0), np.repeat(2.0 * signs - 1, 2, axis=1))
    s = dots * q_scale[..., None] * np.repeat(k_mag, 2, axis=1)[:, :, None, :] + \
        np.repeat(k_const, 2, axis=1)[:, :, None, :]
    want = ref.attention_scores(s, v_cents[v_idx].astype(np.float64) * v_scale[..., None], 2)
    err = np.abs(np_(out) - want).max()
    cs = np.abs(v_cents).max() * v_scale.max()
    if value_accum == "f32":
        assert err < 1e-5 * cs
    else:
        # header (vq_value_accum, "Codebook values"): at most 0.131 C S per
        # output channel in the worst case, ~1e-3 C S typically; 1e-2 C S
        # fails an f32 kernel that ignored the codes' order or a weight
        assert 0 < err < 1e-2 * cs

def test_rabitq_prefill_attend(fw, rng):
    q, k_bits, k_mag, k_const, v_idx, v_cents = _rabitq_case(rng, Sq=9, Skv=40)
    D = q.shape[-1]
    packed = vq.rabitq_pack_values(fw(v_idx))
    out = vq.rabitq_prefill_attend(fw(q), 1 / math.sqrt(D), fw(k_bits), fw(k_mag), fw(k_const), packed, fw(v_cents))
    signs = np.unpackbits(k_bits[..., None], axis=-1, bitorder="little").reshape(k_bits.shape[:-1] + (D,))
    kk = (2.0 * signs - 1) * k_mag[..., None]
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), np.repeat(kk, 2, axis=1)) / math.sqrt(D) + \
        np.repeat(k_const, 2, axis=1)[:, :, None, :]
    want = ref.attention_scores(s, v_cents[v_idx].astype(np.float64), 2)
    assert np.abs(np_(out) - want).max() < 1e-5 * np.abs(v_cents).max()


# ---- group-affine attention -------------------------------------------------------------

@pytest.mark.parametrize("qdt", [np.float32, np.float16])
@pytest.mark.parametrize("Skv,Sq,causal", [(1, 1, False), (97, 1, False), (40, 5, True)])
@pytest.mark.parametrize("key_scores", ["f32", "auto"])
def test_scalar_fused_decode_attend(fw, rng, qdt, Skv, Sq, causal, key_scores):
    B, Hq, Hkv, D, g, bits = 2, 4, 2, 64, 32, 4
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, Sq, D)).astype(qdt)
    kc, ks, kz = vq.kivi_quantize_keys(fw(k), bits, g, packed=True)
    vc, vs, vz = vq.kivi_quantize_values(fw(v), bits, g, packed=True)
    scale = 1 / math.sqrt(D)
    out = vq.scalar_fused_decode_attend(fw(q), kc, ks, kz, vc, vs, vz, g, scale, causal=causal,
                                        key_scores=key_scores)
    assert out.dtype == fw(q).dtype
    k_hat = np_(vq.kivi_dequantize_keys(kc, ks, kz, bits, g))
    v_hat = np_(vq.kivi_dequantize_values(vc, vs, vz, bits, g, head_dim=D))
    want = ref.attention(q, k_hat, v_hat, scale, causal=causal)
    tol = (EPS16 * 4 if qdt == np.float16 else 1e-5) * np.abs(v_hat).max()
    if key_scores == "auto":
        # int8 query dots (4-bit codes, D*bits % 256 == 0): each score is off by at
        # most eps = max_c |scale q_c k_scale_c| / 254 * sum_c code_c (header,
        # vq_key_scores); the softmax then moves an output by at most
        # (exp(2 eps) - 1) * max|v_hat - out| of its channel
        codes = np_(vq.kivi_dequantize_keys(kc, np.ones_like(np_(ks)), np.zeros_like(np_(kz)), bits, g))
        x = np.abs(scale * q.astype(np.float64)[:, :, :, None, :] *
                   np.repeat(np_(ks).astype(np.float64), Hq // Hkv, 1)[:, :, None, :, :]).max(-1)  # [B,Hq,Sq,G]
        eps = (x.max(-1) / 254 * np.repeat(codes.sum(-1), Hq // Hkv, 1).max(-1)[:, :, None]).max()
        tol += (math.exp(2 * eps) - 1) * 2 * np.abs(v_hat).max()
    assert np.abs(np_(out).astype(np.float64) - want).max() < tol



@pytest.mark.parametrize("value_accum", ["f32", "int8"])
def test_scalar_fused_decode_attend_value_accum(fw, rng, value_accum):
    # 2-bit values, g 32, D 128: the shape of the int8 p . v kernel
    B, Hq, Hkv, Skv, D, g, bits = 1, 8, 2, 333, 128, 32, 2
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, 1, D)).astype(np.float32)
    kc, ks, kz = vq.kivi_quantize_keys(fw(k), bits, g, packed=True)
    vc, vs, vz = vq.kivi_quantize_values(fw(v), bits, g, packed=True)
    scale = 1 / math.sqrt(D)
    out = vq.scalar_fused_decode_attend(fw(q), kc, ks, kz, vc, vs, vz, g, scale, key_scores="f32",
                                        value_accum=value_accum)
    k_hat = np_(vq.kivi_dequantize_keys(kc, ks, kz, bits, g))
    v_hat = np_(vq.kivi_dequantize_values(vc, vs, vz, bits, g, head_dim=D))
    err = np.abs(np_(out).astype(np.float64) - ref.attention(q, k_hat, v_hat, scale)).max()
    S = np.abs(np_(vs)).max()
    if value_accum == "f32":
        assert err < 1e-5 * np.abs(v_hat).max()
    else:
        # header (vq_value_accum): at most 0.38 S per output channel in the
        # worst case, ~1e-3 S typically
        assert 0 < err < 1e-2 * S


def test_value_accum_rejects_unknown(fw, rng):
    q, k_bits, k_mag, k_const, v_idx, v_cents = _rabitq_case(rng)
    with pytest.raises(ValueError, match="value_accum"):
        vq.rabitq_fused_attend(fw(q), fw(np.ones(q.shape[:3], np.float32)), fw(k_bits), fw(k_mag), fw(k_const),
                               fw(v_idx), fw(v_cents), value_accum="int4")

# ---- fused SDPA over every key format ---------------------------------------------------

def _keys_for(fmt, fw, rng, k):
    """(encoded keys, their decoded f64 stand-in or None for score-only formats)."""
    B, H, S, D = k.shape
    if fmt == "f16":
        return vq.F16Keys(fw(k)), k.astype(np.float64)
    if fmt == "turbo":
        diag = vq.random_signs(3, D)
        idx, sc = vq.turboquant_hadamard_quantize(fw(k), 4, diag=fw(diag))
        return vq.TurboKeys(idx, sc, 4, fw(diag)), np_(vq.turboquant_hadamard_dequantize(idx, sc, 4, diag=fw(diag)))
    if fmt == "rvq":
        e = vq.turboquant_rvq_encode(fw(k), 3, 2)
        return e, np_(vq.turboquant_rvq_decode(e))
    if fmt == "kivi":
        c, s, z = vq.kivi_quantize_keys(fw(k), 4, 16, packed=True)
        return vq.KIVIKeys(c, s, z, 4, 16), np_(vq.kivi_dequantize_keys(c, s, z, 4, 16))
    if fmt == "vecinfer":
        M, C = 8, 16
        cb = rng.standard_normal((M, C, D // M)).astype(np.float32)
        sm = rng.uniform(0.5, 2, D).astype(np.float32)
        idx = vq.vecinfer_quantize(fw(k), fw(cb), fw(sm), M)
        return vq.VecInferKeys(idx, fw(cb), fw(sm)), np_(vq.vecinfer_dequant(idx, fw(cb), fw(sm)))
    if fmt == "commvq":
        R, C, P = 2, 8, S + 3
        cb = rng.standard_normal((R, C, D)).astype(np.float32)
        idx = vq.commvq_encode(fw(k), fw(cb))
        ang = np.arange(P)[:, None] * (10000.0 ** (-np.arange(D // 2) / (D // 2)))[None, :]
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        pos = (np.arange(S) + 2).astype(np.int32)
        keys = vq.CommVQKeys(idx, fw(cb), fw(cos), fw(sin), fw(pos))
        return keys, np_(vq.commvq_decode(idx, fw(cb), fw(cos), fw(sin), fw(pos)))
    raise AssertionError(fmt)


@pytest.mark.parametrize("fmt", ["f16", "turbo", "rvq", "kivi", "vecinfer", "commvq"])
@pytest.mark.parametrize("Sq,causal,masked", [(1, False, False), (3, True, False), (2, False, True)])
def test_fused_sdpa_formats(fw, rng, fmt, Sq, causal, masked):
    B, Hq, Hkv, Skv, D = 1, 4, 2, 33, 64
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, Sq, D)).astype(np.float32)
    keys, k_hat = _keys_for(fmt, fw, rng, k)
    mask = (rng.standard_normal((1, 1, Sq, Skv)) * 2).astype(np.float32) if masked else None
    out = vq.fused_sdpa(fw(q), keys, fw(v), 1 / math.sqrt(D), None if mask is None else fw(mask), causal=causal)
    want = ref.attention(q, k_hat, v, 1 / math.sqrt(D), mask=mask, causal=causal)
    # f32 accumulation over D and Skv: a few ulps of the largest logit/value
    assert np.abs(np_(out) - want).max() < 2e-5 * np.abs(v).max() * max(1, np.abs(k_hat).max())


def test_fused_sdpa_rabitq_qjl(fw, rng):
    B, Hq, Hkv, Skv, D, m = 1, 2, 1, 50, 64, 128
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, 1, D)).astype(np.float32)
    diag = vq.random_signs(9, D)
    kb, km = vq.rabitq_encode(fw(k), fw(diag))
    out = vq.fused_sdpa(fw(q), vq.RaBitQKeys(kb, km, None, fw(diag)), fw(v), 0.125)
    # RaBitQ: score = scale * (rot(q) . sign) * mag
    sign = 2.0 * np.unpackbits(np_(kb)[..., None], axis=-1, bitorder="little").reshape(B, Hkv, Skv, D) - 1
    s = 0.125 * np.einsum("bhqd,bhkd->bhqk", ref.rot(q, diag), np.repeat(sign, 2, 1)) * \
        np.repeat(np_(km), 2, 1)[:, :, None, :]
    assert np.abs(np_(out) - ref.attention_scores(s, v, 2)).max() < 2e-5 * np.abs(v).max()
    # QJL: score = scale * sqrt(pi/2)/m * ||k|| * sum_j (S q)_j sign_j
    proj = vq.qjl_projection(1, m, D)
    bits = vq.qjl_encode(fw(k), fw(proj))
    norm = np.linalg.norm(k, axis=-1).astype(np.float32)
    out = vq.fused_sdpa(fw(q), vq.QJLKeys(bits, fw(norm), fw(proj)), fw(v), 0.125)
    sg = 2.0 * np.unpackbits(np_(bits).view(np.uint8)[..., None], axis=-1, bitorder="little").reshape(
        B, Hkv, Skv, -1)[..., :m] - 1
    est = math.sqrt(math.pi / 2) / m * np.einsum("bhqm,bhkm->bhqk", q.astype(np.float64) @ proj.T.astype(np.float64),
                                                  np.repeat(sg, 2, 1)) * np.repeat(norm, 2, 1)[:, :, None, :]
    assert np.abs(np_(out) - ref.attention_scores(0.125 * est, v, 2)).max() < 2e-5 * np.abs(v).max()


def test_turboquant_fused_rvq_decode_attend(fw, rng):
    k = rng.standard_normal((1, 2, 21, 128)).astype(np.float32)
    v = rng.standard_normal((1, 2, 21, 128)).astype(np.float32)
    q = rng.standard_normal((1, 8, 1, 128)).astype(np.float32)
    e = vq.turboquant_rvq_encode(fw(k), 2, 2)
    out = vq.turboquant_fused_rvq_decode_attend(fw(q), e, fw(v), 0.1)
    want = ref.attention(q, np_(vq.turboquant_rvq_decode(e)), v, 0.1)
    assert np.abs(np_(out) - want).max() < 2e-5 * np.abs(v).max()
    with pytest.raises(vq.InvalidArgumentError, match="EncodedVector"):
        vq.turboquant_fused_rvq_decode_attend(fw(q), vq.F16Keys(fw(k)), fw(v), 0.1)


# ---- QJL ---------------------------------------------------------------------------------

def test_qjl(fw, rng):
    D, m = 64, 96
    keys = rng.standard_normal((3, 10, D)).astype(np.float32)
    proj = vq.qjl_projection(4, m, D)
    bits = vq.qjl_encode(fw(keys), fw(proj))
    assert tuple(bits.shape) == (3, 10, 3)
    sk = keys.astype(np.float64) @ proj.T.astype(np.float64)
    got = np.unpackbits(np_(bits).view(np.uint8)[..., None], axis=-1, bitorder="little").reshape(3, 10, -1)[..., :m]
    assert ((got == (sk >= 0)) | (np.abs(sk) < 1e-4)).all()
    qb = vq.qjl_encode(fw(keys[:, 0]), fw(proj))
    ip = np_(vq.qjl_inner_product(qb, bits, D, m))
    ham = (got != got[:, :1]).sum(-1)
    assert np.allclose(ip, np.cos(np.pi * ham / m), atol=1e-6)
    norm = np.linalg.norm(keys, axis=-1).astype(np.float32)
    sc = np_(vq.qjl_score(fw(keys[:, 0]), fw(proj), bits, fw(norm)))
    sq = keys[:, 0].astype(np.float64) @ proj.T.astype(np.float64)
    want = math.sqrt(math.pi / 2) / m * norm * np.einsum("am,anm->an", sq, 2.0 * got - 1)
    assert np.allclose(sc, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


# ---- VecInfer, CommVQ, codebooks, trainers -------------------------------------------------

def test_vecinfer(fw, rng):
    B, H, S, D, M, C = 1, 2, 13, 32, 4, 8
    keys = rng.standard_normal((B, H, S, D)).astype(np.float32)
    cb = rng.standard_normal((M, C, D // M)).astype(np.float32)
    sm = rng.uniform(0.5, 2, D).astype(np.float32)
    idx = vq.vecinfer_quantize(fw(keys), fw(cb), fw(sm), M)
    assert np_(idx).dtype == np.uint8
    ks = (keys / sm).reshape(B, H, S, M, 1, D // M).astype(np.float64)
    want = np.argmin(((ks - cb[None, None, None].astype(np.float64)) ** 2).sum(-1), axis=-1)
    assert np.array_equal(np_(idx), want)
    deq = np_(vq.vecinfer_dequant(idx, fw(cb), fw(sm)))
    want_k = cb[np.arange(M), want].reshape(B, H, S, D) * sm
    assert np.allclose(deq, want_k, rtol=1e-6, atol=1e-6)
    i2, k2 = vq.vecinfer_encode_decode(fw(keys), fw(cb), fw(sm), M)
    assert np.array_equal(np_(i2), want) and np.allclose(np_(k2), want_k, rtol=1e-6, atol=1e-6)
    q = rng.standard_normal((B, H, D)).astype(np.float32)
    lut = np_(vq.compute_query_lut(fw(q), fw(cb), fw(sm)))
    want_lut = np.einsum("bhmd,mcd->bhmc", (q * sm).reshape(B, H, M, D // M).astype(np.float64), cb)
    assert np.allclose(lut, want_lut, rtol=1e-5, atol=1e-5)
    f = np_(vq.vecinfer_smooth_factors(fw(keys.reshape(-1, D))))
    assert np.allclose(f, np.sqrt(np.abs(keys.reshape(-1, D)).max(0)), rtol=1e-6)


def test_commvq(fw, rng):
    B, H, S, D, R, C, P = 1, 2, 6, 16, 2, 4, 10
    idx = rng.integers(0, C, (B, H, S, R)).astype(np.int32)
    cb = rng.standard_normal((R, C, D)).astype(np.float32)
    ang = rng.uniform(0, 6, (P, D // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = rng.integers(0, P, S).astype(np.int32)
    out = np_(vq.commvq_decode(fw(idx), fw(cb), fw(cos), fw(sin), fw(pos)))
    k = cb[np.arange(R), idx].sum(-2).astype(np.float64)
    a, b = k[..., : D // 2], k[..., D // 2:]
    c, s = cos[pos].astype(np.float64), sin[pos].astype(np.float64)
    want = np.concatenate([a * c - b * s, a * s + b * c], -1)
    assert np.allclose(out, want, rtol=1e-5, atol=1e-5)
    bad = pos.copy()
    bad[0] = P
    with pytest.raises(vq.InvalidArgumentError, match="position"):
        vq.commvq_decode(fw(idx), fw(cb), fw(cos), fw(sin), fw(bad))
    samples = rng.standard_normal((200, D)).astype(np.float32)
    book = vq.commvq_train(fw(samples), 2, 8, iters=5, seed=1)
    assert tuple(book.shape) == (2, 8, D)
    assert np.array_equal(np_(book), np_(vq.commvq_train(fw(samples), 2, 8, iters=5, seed=1)))


def test_codebook_and_trainers(fw, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    cents = vq.lloyd_max_fit(fw(x), 8, iters=30)
    assert np.all(np.diff(np_(cents)) > 0)
    idx = np_(vq.codebook_quantize(fw(x), cents))
    c = np_(cents)
    assert ((idx == ref.nearest(x, c)) | ref.near_boundary(x, c, 1e-6)).all()
    # a fitted 8-level quantizer of N(0,1) samples is close to Lloyd-Max's MSE 0.03455
    assert np.mean((c[idx] - x) ** 2) < 0.04
    pts = rng.standard_normal((300, 4)).astype(np.float32)
    cen = np_(vq.kmeans(fw(pts), 5, iters=10, seed=3))
    assert cen.shape == (5, 4) and np.array_equal(cen, np_(vq.kmeans(fw(pts), 5, iters=10, seed=3)))


# ---- outputs, zero copy, errors ---------------------------------------------------------

def test_out_is_written_in_place(fw, rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    idx = fw.empty_poisoned((4, 64), np.uint8)
    sc = fw.empty_poisoned((4,), np.float32)
    ptr_before = np_(idx).__array_interface__["data"][0] if fw.name == "numpy" else idx.data_ptr()
    r = vq.turboquant_hadamard_quantize(fw(x), 3, out=(idx, sc))
    assert r[0] is idx and r[1] is sc
    assert (idx.data_ptr() if fw.name == "torch" else idx.__array_interface__["data"][0]) == ptr_before
    want_idx, want_sc = vq.turboquant_hadamard_quantize(fw(x), 3)
    assert np.array_equal(np_(idx), np_(want_idx)) and np.array_equal(np_(sc), np_(want_sc))


def test_inputs_are_read_in_place_not_copied(fw, rng):
    # a strided view would be accepted by a binding that copies; the library
    # reads the caller's memory as it is, so it refuses the strides instead
    x = rng.standard_normal((8, 128)).astype(np.float32)
    view = fw(x)[:, ::2]
    with pytest.raises(vq.UnsupportedError, match="stride"):
        vq.turboquant_scalar_quantize(view, 3)


def test_errors_carry_the_c_message_and_write_nothing(fw, rng):
    x = fw(rng.standard_normal((4, 48)).astype(np.float32))
    idx = fw.empty_poisoned((4, 48), np.uint8)
    sc = fw.empty_poisoned((4,), np.float32)
    with pytest.raises(vq.InvalidArgumentError) as e:
        vq.turboquant_hadamard_quantize(x, 3, out=(idx, sc))
    assert "vq_turboquant_hadamard_quantize" in str(e.value) and "power of two" in str(e.value)
    assert isinstance(e.value, ValueError) and isinstance(e.value, vq.VeloxQuantError)
    assert np.all(np_(idx) == 0xFF) and np.all(np.isnan(np_(sc)))
    with pytest.raises(vq.InvalidArgumentError, match="__dlpack__"):
        vq.turboquant_scalar_quantize([1.0, 2.0], 3)
    with pytest.raises(vq.InvalidArgumentError, match="bits"):
        vq.turboquant_scalar_quantize(fw(np.zeros(4, np.float32)), 9)
    q = fw(np.zeros((1, 1, 1, 288), np.float32))
    with pytest.raises(vq.UnsupportedError):
        vq.fused_sdpa(q, q, q, 1.0)


def test_numpy_and_torch_agree(rng):
    torch = pytest.importorskip("torch")
    k = rng.standard_normal((1, 2, 50, 64)).astype(np.float32)
    a = vq.kivi_quantize_keys(k, 2, 32, packed=True)
    b = vq.kivi_quantize_keys(torch.from_numpy(k), 2, 32, packed=True)
    for x, y in zip(a, b):
        assert np.array_equal(x, y.numpy())


# ---- value formats, log-sum-exp, merge, strided views ------------------------------------

def _values_for(fmt, fw, rng, v):
    """(encoded values, their decoded f64 stand-in)."""
    B, H, S, D = v.shape
    if fmt == "f16":
        return fw(v), v.astype(np.float64)
    if fmt == "kivi":
        c, s, z = vq.kivi_quantize_values(fw(v), 4, 16, packed=True)
        return vq.KIVIValues(c, s, z, 4, 16), np_(vq.kivi_dequantize_values(c, s, z, 4, 16, head_dim=D))
    if fmt == "codebook":
        cents, _ = vq.lloyd_max_codebook(4)
        scale = (np.linalg.norm(v, axis=-1) / math.sqrt(D)).astype(np.float32)
        idx = vq.codebook_quantize(fw((v / scale[..., None]).astype(np.float32)), fw(cents))
        packed = vq.rabitq_pack_values(idx)
        return vq.CodebookValues(packed, fw(cents), fw(scale)), cents[np_(idx)] * scale[..., None].astype(np.float64)
    if fmt == "turbo":
        diag = vq.random_signs(11, D)
        idx, sc = vq.turboquant_hadamard_quantize(fw(v), 4, diag=fw(diag))
        return vq.TurboValues(idx, sc, 4, fw(diag)), np_(vq.turboquant_hadamard_dequantize(idx, sc, 4,
                                                                                           diag=fw(diag)))
    raise AssertionError(fmt)


@pytest.mark.parametrize("vfmt", ["kivi", "codebook", "turbo"])
@pytest.mark.parametrize("kfmt", ["f16", "kivi", "turbo"])
def test_fused_sdpa_value_formats(fw, rng, kfmt, vfmt):
    B, Hq, Hkv, Skv, Sq, D = 1, 6, 2, 45, 2, 64
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, Sq, D)).astype(np.float32)
    keys, k_hat = _keys_for(kfmt, fw, rng, k)
    vals, v_hat = _values_for(vfmt, fw, rng, v)
    out = vq.fused_sdpa(fw(q), keys, vals, 0.125, causal=True)
    want = ref.attention(q, k_hat, v_hat, 0.125, causal=True)
    assert np.abs(np_(out) - want).max() < 2e-5 * np.abs(v_hat).max() * max(1, np.abs(k_hat).max())


@pytest.mark.parametrize("kfmt,vfmt", [("turbo", "f16"), ("rvq", "f16"), ("f16", "turbo")])
def test_fused_sdpa_int8(fw, rng, kfmt, vfmt):
    # key_scores / value_accum "int8": the integer paths at D = 128 (TurboQuant and RVQ keys, TurboQuant
    # values); "auto" is f32 in fused_sdpa, bit for bit
    B, Hq, Hkv, Skv, D = 1, 8, 2, 300, 128
    k = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, Hkv, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, Hq, 1, D)).astype(np.float32)
    keys, k_hat = _keys_for(kfmt, fw, rng, k)
    vals, v_hat = _values_for(vfmt, fw, rng, v)
    arith = {"key_scores": "int8"} if kfmt != "f16" else {"value_accum": "int8"}
    f32 = np_(vq.fused_sdpa(fw(q), keys, vals, 1 / math.sqrt(D)))
    auto = np_(vq.fused_sdpa(fw(q), keys, vals, 1 / math.sqrt(D), key_scores="auto", value_accum="auto"))
    i8 = np_(vq.fused_sdpa(fw(q), keys, vals, 1 / math.sqrt(D), **arith))
    want = ref.attention(q, k_hat, v_hat, 1 / math.sqrt(D))
    assert np.array_equal(auto, f32)
    assert not np.array_equal(i8, f32)
    # the keys: the query's int8 rounding moves scores by <= ~0.8 % of the largest term (typically far
    # less); the values: ~1e-3 of the centroid range times the scale; both well inside 3 % relative here
    assert np.linalg.norm(i8 - want) <= 0.03 * np.linalg.norm(want)
    with pytest.raises(ValueError, match="key_scores"):
        vq.fused_sdpa(fw(q), keys, vals, 0.1, key_scores="int4")


def test_lse_and_attention_merge(fw, rng):
    B, H, Skv, D = 1, 2, 60, 32
    k = rng.standard_normal((B, H, Skv, D)).astype(np.float32)
    v = rng.standard_normal((B, H, Skv, D)).astype(np.float32)
    q = rng.standard_normal((B, H, 1, D)).astype(np.float32)
    lse = fw.empty_poisoned((B, H, 1), np.float32)
    full = vq.fused_sdpa(fw(q), fw(k), fw(v), 0.2, lse_out=lse)
    s = 0.2 * np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64))
    want_lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    assert np.abs(np_(lse) - want_lse).max() < 1e-5 * max(1, np.abs(want_lse).max())
    # two halves merged give the whole
    la, lb = fw.empty_poisoned((B, H, 1), np.float32), fw.empty_poisoned((B, H, 1), np.float32)
    a = vq.fused_sdpa(fw(q), fw(k[:, :, :25]), fw(v[:, :, :25]), 0.2, lse_out=la)
    b = vq.fused_sdpa(fw(q), fw(k[:, :, 25:]), fw(v[:, :, 25:]), 0.2, lse_out=lb)
    lm = fw.empty_poisoned((B, H, 1), np.float32)
    m = vq.attention_merge(a, la, b, lb, lse_out=lm)
    assert np.abs(np_(m) - np_(full)).max() < 1e-5 * np.abs(v).max()
    assert np.abs(np_(lm) - np_(lse)).max() < 1e-5 * max(1, np.abs(want_lse).max())


def test_attention_takes_views_with_outer_strides(rng):
    # a transformers-style [B, S, H, D] buffer seen as [B, H, S, D] without a copy
    torch = pytest.importorskip("torch")
    B, H, S, D = 1, 4, 10, 64
    qkv = torch.from_numpy(rng.standard_normal((B, S, 3 * H, D)).astype(np.float32))
    q, k, v = (qkv[:, :, i * H:(i + 1) * H].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    out = torch.empty(B, S, H, D).transpose(1, 2)
    r = vq.fused_sdpa(q, k, v, 0.125, causal=True, out=out)
    assert r is out
    want = ref.attention(q.numpy(), k.numpy(), v.numpy(), 0.125, causal=True)
    assert np.abs(out.numpy() - want).max() < 2e-5 * 4


def test_earlier_names_are_the_same_objects():
    # One idea, one name; the earlier spellings stay importable (deprecated)
    # and the original Metal API's names keep working.
    assert vq.PlainKeys is vq.F16Keys and vq.PlainValues is vq.F16Values
    assert vq.AffineKeys is vq.KIVIKeys and vq.AffineValues is vq.KIVIValues and vq.PQKeys is vq.VecInferKeys
    assert vq.affine_quantize_keys is vq.kivi_quantize_keys
    assert vq.affine_dequantize_values is vq.kivi_dequantize_values
    assert vq.comm_vq_decode is vq.commvq_decode and vq.comm_vq_encode is vq.commvq_encode
    assert vq.kivi_fused_attend is vq.scalar_fused_decode_attend
    for name in ("PlainKeys", "AffineKeys", "comm_vq_decode", "kivi_fused_attend", "commvq_train"):
        assert name in vq.__all__
