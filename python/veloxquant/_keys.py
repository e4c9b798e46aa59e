"""Encoded key and value caches: one class per key format and per value format
of ``fused_sdpa`` (``EncodedVector`` and its siblings keep the original Metal API's names). Each holds the arrays of one format with
the shapes of ``vq_encoded_keys`` in include/veloxquant.h (leading dimensions
[B, Hkv, Skv]); nothing is copied. ``_vq_args()`` gives the (format, tensors,
ints) triple that the extension module turns into a ``vq_encoded_keys``.
"""

__all__ = ["F16Keys", "TurboKeys", "EncodedVector", "TurboRVQKeys", "KIVIKeys", "RaBitQKeys",
           "QJLKeys", "VecInferKeys", "CommVQKeys", "F16Values", "KIVIValues", "CodebookValues", "TurboValues",
           "ROPE_LAYOUTS"]

from ._errors import InvalidArgumentError

ROPE_LAYOUTS = {"half": 0, "neox": 0, "interleaved": 1, "gptj": 1}


def choice(table, value, name):
    """The C enum value of a named option (an int passes through)."""
    if isinstance(value, int):
        return value
    try:
        return table[value]
    except KeyError:
        raise InvalidArgumentError(f"argument '{name}': {value!r}, expected one of {sorted(table)}") from None


def rope_code(rope):
    return choice(ROPE_LAYOUTS, rope, "rope")


class _Keys:
    __slots__ = ()
    format = 0

    def __repr__(self):
        fields = ", ".join(f"{n}={_describe(getattr(self, n))}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


def _describe(v):
    shape = getattr(v, "shape", None)
    if shape is not None:
        return f"<{type(v).__name__} {tuple(shape)} {getattr(v, 'dtype', '')}>"
    return repr(v)


class F16Keys(_Keys):
    """Uncompressed keys [B,Hkv,Skv,D] f16/f32/bf16 (VQ_KEYS_F16)."""

    __slots__ = ("keys",)
    format = 1

    def __init__(self, keys):
        self.keys = keys

    def _vq_args(self):
        return 1, (self.keys,), ()


class TurboKeys(_Keys):
    """TurboQuant Hadamard codes (VQ_KEYS_TURBO): idx [B,Hkv,Skv,D] u8 (or u32
    bit-packed [.., ceil(D*bits/32)]), scale [B,Hkv,Skv] f32, diag [D] f32 ±1 or
    None, bits 1..8. Keys live in the rotated basis."""

    __slots__ = ("idx", "scale", "bits", "diag")
    format = 2

    def __init__(self, idx, scale, bits, diag=None):
        self.idx, self.scale, self.bits, self.diag = idx, scale, int(bits), diag

    def _vq_args(self):
        return 2, (self.idx, self.scale, self.diag), (self.bits,)


class EncodedVector(_Keys):
    """TurboQuant two-stage residual codes (VQ_KEYS_TURBO_RVQ; the original Metal
    API's EncodedVector): idx1/idx2 [..., D] u8, scale1/scale2 [...] f32, b1/b2 bits,
    diag [D] f32 or None. Made by ``turboquant_rvq_encode``."""

    __slots__ = ("idx1", "scale1", "idx2", "scale2", "b1", "b2", "diag")
    format = 3

    def __init__(self, idx1, scale1, idx2, scale2, b1, b2, diag=None):
        self.idx1, self.scale1, self.idx2, self.scale2 = idx1, scale1, idx2, scale2
        self.b1, self.b2, self.diag = int(b1), int(b2), diag

    def _vq_args(self):
        return 3, (self.idx1, self.scale1, self.idx2, self.scale2, self.diag), (self.b1, self.b2)


TurboRVQKeys = EncodedVector


class KIVIKeys(_Keys):
    """KIVI per-channel group-affine codes (VQ_KEYS_KIVI): codes [B,Hkv,Skv,D]
    u8 (or bit-packed [.., D*bits/8]), scale/zero [B,Hkv,ceil(Skv/g),D] f32/f16,
    bits, group_size g (tokens per group). k_hat = code * scale + zero."""

    __slots__ = ("codes", "scale", "zero", "bits", "group_size")
    format = 4

    def __init__(self, codes, scale, zero, bits, group_size):
        self.codes, self.scale, self.zero = codes, scale, zero
        self.bits, self.group_size = int(bits), int(group_size)

    def _vq_args(self):
        return 4, (self.codes, self.scale, self.zero), (self.bits, self.group_size)


class RaBitQKeys(_Keys):
    """1-bit RaBitQ keys (VQ_KEYS_RABITQ): bits [B,Hkv,Skv,D/8] u8 signs of
    rot(k), mag [B,Hkv,Skv] f32, const [B,Hkv,Skv] f32 or None, diag [D] f32 or
    None (the one used at encode time)."""

    __slots__ = ("bits", "mag", "const", "diag")
    format = 5

    def __init__(self, bits, mag, const=None, diag=None):
        self.bits, self.mag, self.const, self.diag = bits, mag, const, diag

    def _vq_args(self):
        return 5, (self.bits, self.mag, self.const, self.diag), ()


class QJLKeys(_Keys):
    """QJL sign sketches (VQ_KEYS_QJL): bits [B,Hkv,Skv,ceil(m/32)] u32, norm
    [B,Hkv,Skv] f32 (||k||), projection [m, D] f32."""

    __slots__ = ("bits", "norm", "projection")
    format = 6

    def __init__(self, bits, norm, projection):
        self.bits, self.norm, self.projection = bits, norm, projection

    def _vq_args(self):
        return 6, (self.bits, self.norm, self.projection), ()


class VecInferKeys(_Keys):
    """VecInfer product-VQ keys (VQ_KEYS_VECINFER): idx [B,Hkv,Skv,M] u8/u16, codebook
    [M,C,D/M] or [Hkv,M,C,D/M] f32, smooth [D] or [Hkv,D] f32."""

    __slots__ = ("idx", "codebook", "smooth")
    format = 7

    def __init__(self, idx, codebook, smooth):
        self.idx, self.codebook, self.smooth = idx, codebook, smooth

    def _vq_args(self):
        return 7, (self.idx, self.codebook, self.smooth), ()


class CommVQKeys(_Keys):
    """CommVQ additive codes (VQ_KEYS_COMMVQ): idx [B,Hkv,Skv,R] u8/u16/i32,
    codebook [R,C,D] f32, cos_freqs/sin_freqs [P, D/2] f32, positions [Skv] or
    [B,Skv] i32, scale [B,Hkv,Skv] f32 or None, rope 'half' (Hugging Face/NeoX)
    or 'interleaved' (GPT-J/Meta). RoPE is applied per token at decode."""

    __slots__ = ("idx", "codebook", "cos_freqs", "sin_freqs", "positions", "scale", "rope")
    format = 8

    def __init__(self, idx, codebook, cos_freqs, sin_freqs, positions, scale=None, rope="half"):
        self.idx, self.codebook, self.cos_freqs, self.sin_freqs = idx, codebook, cos_freqs, sin_freqs
        self.positions, self.scale, self.rope = positions, scale, rope

    def _vq_args(self):
        return 8, (self.idx, self.codebook, self.cos_freqs, self.sin_freqs, self.positions, self.scale), \
            (rope_code(self.rope),)


# ---- values (vq_encoded_values) ---------------------------------------------------------

class F16Values(_Keys):
    """Uncompressed values [B,Hkv,Skv,D] f16/f32 (VQ_VALUES_F16)."""

    __slots__ = ("values",)
    format = 1

    def __init__(self, values):
        self.values = values

    def _vq_args(self):
        return 1, (self.values,), ()


class KIVIValues(_Keys):
    """KIVI per-token group-affine values (VQ_VALUES_KIVI): codes
    [B,Hkv,Skv,D] u8 or bit-packed [.., D*bits/8], scale/zero
    [B,Hkv,Skv,ceil(D/g)] f32/f16, bits 2/4/8, group_size g channels."""

    __slots__ = ("codes", "scale", "zero", "bits", "group_size")
    format = 2

    def __init__(self, codes, scale, zero, bits, group_size):
        self.codes, self.scale, self.zero = codes, scale, zero
        self.bits, self.group_size = int(bits), int(group_size)

    def _vq_args(self):
        return 2, (self.codes, self.scale, self.zero), (self.bits, self.group_size)


class CodebookValues(_Keys):
    """Scalar-codebook values (VQ_VALUES_CODEBOOK): idx [B,Hkv,Skv,D] u8 or
    nibble-packed [.., D/2], cents [n] f32, scale [B,Hkv,Skv] f32 or None;
    v_hat = cents[idx] * scale."""

    __slots__ = ("idx", "cents", "scale")
    format = 3

    def __init__(self, idx, cents, scale=None):
        self.idx, self.cents, self.scale = idx, cents, scale

    def _vq_args(self):
        return 3, (self.idx, self.cents, self.scale), ()


class TurboValues(_Keys):
    """TurboQuant Hadamard values (VQ_VALUES_TURBO): idx [B,Hkv,Skv,D] u8 (or u32
    packed), scale [B,Hkv,Skv] f32, diag [D] f32 or None, bits 1..8."""

    __slots__ = ("idx", "scale", "bits", "diag")
    format = 4

    def __init__(self, idx, scale, bits, diag=None):
        self.idx, self.scale, self.bits, self.diag = idx, scale, int(bits), diag

    def _vq_args(self):
        return 4, (self.idx, self.scale, self.diag), (self.bits,)
