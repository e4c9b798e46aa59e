"""Quantizer classes: one object per method holding its parameters and tables,
with encode/decode (and fit where the method is trained), over the kernel
functions. Encoded results are the key/value classes that ``fused_sdpa``
takes, so ``fused_sdpa(q, quantizer.encode(k), v, scale)`` runs attention on
the codes. Tables (Hadamard signs, projections) are made once per head
dimension and device, with the library's seeded generators."""

import numpy as np

from . import _kernels as K
from ._errors import InvalidArgumentError
from ._keys import KIVIKeys, KIVIValues, VecInferKeys, QJLKeys, RaBitQKeys, TurboKeys, TurboValues, CommVQKeys

__all__ = ["KIVIQuantizer", "TurboQuantizer", "RaBitQQuantizer", "QJLQuantizer", "VecInferQuantizer",
           "CommVQQuantizer"]


def _like(table, x):
    """A NumPy table moved to x's framework and device (torch: same device)."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        import torch
        return torch.from_numpy(table).to(x.device)
    if mod == "cupy":
        import cupy
        with x.device:
            return cupy.asarray(table)
    return table


class _Tables:
    """Per (head_dim, device) cache of a NumPy table made by `make(d)`."""

    def __init__(self, make):
        self.make, self.by = make, {}

    def get(self, x, d):
        dev = str(getattr(x, "device", "cpu"))
        key = (type(x).__module__.split(".")[0], dev, d)
        t = self.by.get(key)
        if t is None:
            t = self.by[key] = _like(self.make(d), x)
        return t


class KIVIQuantizer:
    """KIVI group-affine: keys per channel over groups of ``group_size`` tokens,
    values per token over groups of ``group_size`` channels; ``bits`` 2/4/8
    (bit-packed along D when ``packed``), f16 or f32 scale/zero."""

    def __init__(self, bits=2, group_size=32, *, packed=True, param_dtype="float16"):
        self.bits, self.group_size, self.packed, self.param_dtype = int(bits), int(group_size), packed, param_dtype

    def encode_keys(self, k):
        """k [B,H,S,D] -> KIVIKeys."""
        c, s, z = K.kivi_quantize_keys(k, self.bits, self.group_size, packed=self.packed,
                                         param_dtype=self.param_dtype)
        return KIVIKeys(c, s, z, self.bits, self.group_size)

    def encode_values(self, v):
        """v [B,H,S,D] -> KIVIValues."""
        c, s, z = K.kivi_quantize_values(v, self.bits, self.group_size, packed=self.packed,
                                           param_dtype=self.param_dtype)
        return KIVIValues(c, s, z, self.bits, self.group_size)

    encode = encode_keys

    def decode_keys(self, keys, *, dtype="float32"):
        return K.kivi_dequantize_keys(keys.codes, keys.scale, keys.zero, keys.bits, keys.group_size, dtype=dtype)

    decode = decode_keys

    def decode_values(self, values, head_dim, *, dtype="float32"):
        return K.kivi_dequantize_values(values.codes, values.scale, values.zero, values.bits, values.group_size,
                                          head_dim=head_dim, dtype=dtype)


class TurboQuantizer:
    """TurboQuant: randomized Hadamard rotation (signs from ``seed``) + Lloyd-Max
    codes of ``bits`` bits; ``bits2`` > 0 adds the residual stage (RVQ)."""

    def __init__(self, bits=3, *, bits2=0, seed=0, norm_correct=False):
        self.bits, self.bits2, self.seed, self.norm_correct = int(bits), int(bits2), seed, norm_correct
        self._diag = _Tables(lambda d: K.random_signs(self.seed, d))

    def diag(self, x):
        return self._diag.get(x, x.shape[-1])

    def encode(self, x):
        """x [..., D] -> TurboKeys (or EncodedVector with bits2)."""
        diag = self.diag(x)
        if self.bits2:
            return K.turboquant_rvq_encode(x, self.bits, self.bits2, diag=diag)
        idx, scale = K.turboquant_hadamard_quantize(x, self.bits, diag=diag, norm_correct=self.norm_correct)
        return TurboKeys(idx, scale, self.bits, diag)

    def encode_values(self, v):
        """v [B,H,S,D] -> TurboValues (single stage)."""
        idx, scale = K.turboquant_hadamard_quantize(v, self.bits, diag=self.diag(v))
        return TurboValues(idx, scale, self.bits, self.diag(v))

    def decode(self, enc, *, dtype="float32"):
        if hasattr(enc, "idx1"):
            return K.turboquant_rvq_decode(enc, dtype=dtype)
        return K.turboquant_hadamard_dequantize(enc.idx, enc.scale, enc.bits, diag=enc.diag, dtype=dtype)


class RaBitQQuantizer:
    """RaBitQ 1-bit keys: signs of the rotated key and one magnitude per key
    (``mag`` 'l1', the default, or 'unbiased')."""

    def __init__(self, *, seed=0, mag="l1"):
        self.seed, self.mag = seed, mag
        self._diag = _Tables(lambda d: K.random_signs(self.seed, d))

    def encode(self, keys):
        """keys [..., N, D] -> RaBitQKeys (const None)."""
        diag = self._diag.get(keys, keys.shape[-1])
        bits, mag = K.rabitq_encode(keys, diag, mag=self.mag)
        return RaBitQKeys(bits, mag, None, diag)

    def decode(self, keys):
        """k_hat = rot^-1(mag * sign), [..., N, D] f32 (D a multiple of 32)."""
        d = keys.bits.shape[-1] * 8
        if d % 32:
            raise InvalidArgumentError(f"RaBitQQuantizer.decode: D = {d} must be a multiple of 32")
        mod = type(keys.bits).__module__.split(".")[0]
        if mod == "torch":
            import torch
            words = keys.bits.contiguous().view(torch.uint32)
            signs = K.turboquant_bit_unpack(words, 1, d).float() * 2 - 1
            y = signs * keys.mag[..., None]
        else:
            words = np.ascontiguousarray(keys.bits).view(np.uint32)
            signs = K.turboquant_bit_unpack(words, 1, d).astype(np.float32) * 2 - 1
            y = signs * keys.mag[..., None]
        return K.hadamard(y, keys.diag, inverse=True)


class QJLQuantizer:
    """QJL sign sketches of ``sketch_dim`` rows (None = 2*D) from a seeded
    Gaussian projection; keys keep their norm for the unbiased score."""

    def __init__(self, sketch_dim=None, *, seed=0):
        self.sketch_dim, self.seed = sketch_dim, seed
        self._proj = _Tables(lambda d: K.qjl_projection(self.seed, self.sketch_dim or 2 * d, d))

    def encode(self, keys):
        """keys [..., D] -> QJLKeys (bits, norm, projection)."""
        proj = self._proj.get(keys, keys.shape[-1])
        bits = K.qjl_encode(keys, proj)
        mod = type(keys).__module__.split(".")[0]
        if mod == "torch":
            import torch
            norm = torch.linalg.vector_norm(keys.float(), dim=-1)
        else:
            norm = np.linalg.norm(np.asarray(keys, np.float32), axis=-1).astype(np.float32)
        return QJLKeys(bits, norm, proj)

    def score(self, query, keys):
        """Unbiased estimates of <q, k> for every key: [..., N] f32."""
        return K.qjl_score(query, keys.projection, keys.bits, keys.norm)


class VecInferQuantizer:
    """VecInfer product VQ: ``num_subspaces`` M slices of D/M channels, each
    coded by one of ``num_centroids`` C centroids, after dividing by smooth
    factors. Trained by :meth:`fit` (CPU, deterministic for a seed)."""

    def __init__(self, num_subspaces, num_centroids=256, *, iters=20, seed=0):
        self.M, self.C, self.iters, self.seed = int(num_subspaces), int(num_centroids), iters, seed
        self.codebook = self.smooth = None

    def fit(self, samples):
        """samples [N, D] f32 (host) -> self, with smooth [D] and codebook [M,C,D/M]."""
        x = np.ascontiguousarray(np.asarray(samples, np.float32))
        n, d = x.shape
        if d % self.M:
            raise InvalidArgumentError(f"VecInferQuantizer.fit: D = {d} is not a multiple of M = {self.M}")
        self.smooth = np.asarray(K.vecinfer_smooth_factors(x))
        xs = (x / self.smooth).reshape(n, self.M, d // self.M)
        self.codebook = np.stack([np.asarray(K.kmeans(np.ascontiguousarray(xs[:, m]), self.C, self.iters,
                                                      self.seed + m)) for m in range(self.M)])
        return self

    def _tables(self, x):
        if self.codebook is None:
            raise InvalidArgumentError("VecInferQuantizer: call fit() (or set codebook and smooth) first")
        return _like(self.codebook, x), _like(self.smooth, x)

    def encode(self, keys):
        """keys [B,H,S,D] -> VecInferKeys."""
        cb, sm = self._tables(keys)
        return VecInferKeys(K.vecinfer_quantize(keys, cb, sm, self.M), cb, sm)

    def decode(self, keys, *, dtype="float32"):
        return K.vecinfer_dequant(keys.idx, keys.codebook, keys.smooth, dtype=dtype)


class CommVQQuantizer:
    """CommVQ additive codebooks (R stages of C centroids) on pre-RoPE keys;
    RoPE is applied at decode from cos/sin tables. Trained by :meth:`fit`."""

    def __init__(self, R=2, C=256, *, iters=20, seed=0, rope="half"):
        self.R, self.C, self.iters, self.seed, self.rope = int(R), int(C), iters, seed, rope
        self.codebook = None

    def fit(self, samples):
        """samples [N, D] f32 pre-RoPE keys (host) -> self, with codebook [R,C,D]."""
        x = np.ascontiguousarray(np.asarray(samples, np.float32))
        self.codebook = np.asarray(K.commvq_train(x, self.R, self.C, self.iters, self.seed))
        return self

    def _codebook(self, x):
        if self.codebook is None:
            raise InvalidArgumentError("CommVQQuantizer: call fit() (or set codebook) first")
        return _like(self.codebook, x)

    def encode(self, keys):
        """pre-RoPE keys [B,H,S,D] -> indices [B,H,S,R]."""
        return K.commvq_encode(keys, self._codebook(keys))

    def keys(self, indices, cos_freqs, sin_freqs, positions):
        """The CommVQKeys that fused_sdpa reads (RoPE applied per token)."""
        return CommVQKeys(indices, self._codebook(indices), cos_freqs, sin_freqs, positions, rope=self.rope)

    def decode(self, indices, cos_freqs, sin_freqs, positions, *, dtype="float32"):
        """Keys with RoPE at their positions, [B,H,S,D]."""
        return K.commvq_decode(indices, self._codebook(indices), cos_freqs, sin_freqs, positions, rope=self.rope,
                                dtype=dtype)
