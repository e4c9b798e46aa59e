"""The quantizer classes: encode/decode/fit over the kernels, tables made once
per head dimension, encoded results usable by fused_sdpa."""

import math

import numpy as np
import pytest

import veloxquant as vq
from conftest import np_
import ref


def _x(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_kivi(fw, rng):
    qz = vq.KIVIQuantizer(bits=4, group_size=16)
    k, v = _x(rng, 1, 2, 40, 64), _x(rng, 1, 2, 40, 64)
    ek, ev = qz.encode_keys(fw(k)), qz.encode_values(fw(v))
    k_hat, v_hat = np_(qz.decode_keys(ek)), np_(qz.decode_values(ev, 64))
    # 4 bits over a group's range: within half a step (range / 15 / 2) plus f16 parameter rounding
    step_k = np.repeat(np_(ek.scale).astype(np.float64), 16, 2)[:, :, :40]
    assert np.all(np.abs(k_hat - k) <= 0.5 * step_k * 1.01 + 4e-3)
    q = _x(rng, 1, 4, 1, 64)
    out = vq.fused_sdpa(fw(q), ek, ev, 0.125)
    assert np.abs(np_(out) - ref.attention(q, k_hat, v_hat, 0.125)).max() < 1e-4


@pytest.mark.parametrize("bits,bits2", [(3, 0), (2, 2)])
def test_turbo(fw, rng, bits, bits2):
    qz = vq.TurboQuantizer(bits, bits2=bits2, seed=5)
    x = _x(rng, 2, 3, 50, 128)
    enc = qz.encode(fw(x))
    assert np.array_equal(np_(enc.diag), vq.random_signs(5, 128))
    x_hat = np_(qz.decode(enc))
    mse = np.mean((x_hat - x) ** 2) / np.mean(x ** 2)
    # Lloyd-Max MSE of N(0,1) at 3 bits is 0.03455 (the rotated coordinates are
    # close to Gaussian); two 2-bit stages (4 bits) must do better than that and
    # worse than one 4-bit stage (0.009501), the residual being far from Gaussian
    if bits2 == 0:
        assert 0.03455 * 0.8 < mse < 0.03455 * 1.2, mse
    else:
        assert 0.009501 < mse < 0.03455, mse


def test_rabitq_decode(fw, rng):
    qz = vq.RaBitQQuantizer(seed=2)
    k = _x(rng, 1, 2, 30, 64)
    enc = qz.encode(fw(k))
    k_hat = np_(qz.decode(enc))
    y = ref.rot(k, vq.random_signs(2, 64))
    want = ref.rot_inv(np.where(y >= 0, 1.0, -1.0) * (np.abs(y).sum(-1, keepdims=True) / 64), vq.random_signs(2, 64))
    assert np.abs(k_hat - want).max() < 1e-5 * np.abs(want).max()


def test_qjl_score_is_unbiased(fw, rng):
    qz = vq.QJLQuantizer(sketch_dim=256, seed=3)
    k = _x(rng, 400, 64)
    q = _x(rng, 64)
    est = np_(qz.score(fw(q), qz.encode(fw(k))))
    exact = k.astype(np.float64) @ q
    # per-key estimator variance <= pi/2 * |q|^2 |k|^2 / m: the mean error over 400 keys is within 4 sigma
    sigma = math.sqrt(math.pi / 2 / 256) * np.linalg.norm(q) * np.linalg.norm(k, axis=1).mean() / math.sqrt(400)
    assert abs(np.mean(est - exact)) < 4 * sigma
    # corr(est, exact) = sqrt(var(q.k) / (var(q.k) + noise)) = (1 + pi D / (2 m))^-1/2 = 0.85 here
    assert np.corrcoef(est, exact)[0, 1] > 0.75


def test_vecinfer_fit_encode_decode(fw, rng):
    samples = _x(rng, 2000, 32)
    qz = vq.VecInferQuantizer(8, 64, iters=10, seed=1).fit(samples)
    assert qz.codebook.shape == (8, 64, 4) and qz.smooth.shape == (32,)
    k = _x(rng, 1, 2, 20, 32)
    enc = qz.encode(fw(k))
    k_hat = np_(qz.decode(enc))
    # 64 centroids per 4-dim slice of N(0,1) data: well under half the energy lost
    assert np.mean((k_hat - k) ** 2) / np.mean(k ** 2) < 0.5
    assert np.array_equal(np.asarray(vq.VecInferQuantizer(8, 64, iters=10, seed=1).fit(samples).codebook),
                          qz.codebook)
    with pytest.raises(vq.InvalidArgumentError, match="fit"):
        vq.VecInferQuantizer(8).encode(fw(k))


def test_commvq_fit_encode_decode(fw, rng):
    samples = _x(rng, 500, 16)
    qz = vq.CommVQQuantizer(R=2, C=16, iters=5).fit(samples)
    k = _x(rng, 1, 1, 12, 16)
    idx = qz.encode(fw(k))
    ang = np.arange(20)[:, None] * 0.1 * (np.arange(8) + 1)[None, :]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = np.arange(12, dtype=np.int32)
    dec = np_(qz.decode(idx, fw(cos), fw(sin), fw(pos)))
    want = np_(vq.commvq_decode(idx, fw(qz.codebook), fw(cos), fw(sin), fw(pos)))
    assert np.array_equal(dec, want)
    q, v = _x(rng, 1, 2, 1, 16), _x(rng, 1, 1, 12, 16)
    out = vq.fused_sdpa(fw(q), qz.keys(idx, fw(cos), fw(sin), fw(pos)), fw(v), 0.25)
    assert np.abs(np_(out) - ref.attention(q, dec, v, 0.25)).max() < 1e-4
