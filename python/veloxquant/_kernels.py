"""The original Metal API's kernel functions by their names (``_metal`` dropped), and every
other public C codec, over any array with ``__dlpack__``.

Conventions of every function here:

* Inputs are read zero-copy through DLPack (NumPy, PyTorch CPU/CUDA, CuPy, JAX
  on the CPU); all of a call's arrays must be on one device. They must be
  row-major contiguous (the C library refuses other strides with
  :class:`UnsupportedError`; call ``.contiguous()`` / ``np.ascontiguousarray``).
* Outputs are allocated in the framework of the first array argument and on its
  device (torch in, torch out), unless ``out=`` is given (one array, or a tuple
  for functions with several outputs), which the library writes in place.
* Torch CUDA tensors run on torch's current stream, without synchronising.
* Errors raise :class:`VeloxQuantError` subclasses carrying the C message; on
  failure no output byte is written.

Shape names: B batch, H heads (Hq query heads, Hkv cache heads), S sequence,
D head dimension; dtypes f16, f32, u8, u16, i32, u32.
"""

from . import _vq
from ._errors import InvalidArgumentError
from ._keys import F16Keys, F16Values, EncodedVector, choice as _code, rope_code
from ._runtime import adapter, CPU, CUDA

__all__ = [
    # the original Metal API's names
    "vecinfer_quantize", "vecinfer_dequant", "vecinfer_encode_decode", "compute_query_lut",
    "rabitq_hamming_score", "rabitq_fused_attend", "rabitq_pack_values", "rabitq_encode",
    "rabitq_prefill_attend", "scalar_fused_decode_attend", "comm_vq_decode",
    "turboquant_scalar_quantize", "turboquant_scalar_dequantize", "turboquant_hadamard_quantize",
    "turboquant_fused_rvq_decode_attend", "fused_sdpa", "supports_shape", "attention_merge", "turboquant_bit_pack",
    "turboquant_bit_unpack", "qjl_encode", "qjl_inner_product", "backend_available", "cuda_available",
    # the rest of the C API
    "hadamard", "turboquant_hadamard_dequantize", "turboquant_rvq_encode", "turboquant_rvq_decode",
    "kivi_quantize_keys", "kivi_quantize_values", "kivi_dequantize_keys", "kivi_dequantize_values",
    "codebook_quantize", "lloyd_max_fit", "lloyd_max_codebook", "random_signs", "qjl_projection",
    "qjl_score", "vecinfer_smooth_factors", "kmeans", "commvq_decode", "commvq_train", "commvq_encode", "version",
    "kivi_fused_attend",
    # earlier names of the C API's functions (deprecated; they go in the release after next)
    "affine_quantize_keys", "affine_quantize_values", "affine_dequantize_keys", "affine_dequantize_values",
    "comm_vq_train", "comm_vq_encode",
]

_RABITQ_SCORE = {"hamming": 0, "exact": 1}
_RABITQ_MAG = {"l1": 0, "unbiased": 1}
_KEY_SCORES = {"auto": 0, "f32": 1, "int8": 2}
_VALUE_ACCUM = {"auto": 0, "f32": 1, "int8": 2}


def _shape(x, name):
    try:
        return tuple(x.shape)
    except AttributeError:
        raise InvalidArgumentError(f"argument '{name}': expected an array, got {type(x).__name__}") from None


# ---- availability ---------------------------------------------------------------

def backend_available(backend="cpu"):
    """True when the backend ('cpu' or 'cuda') is compiled in and usable now (the
    original Metal API's ``metal_available``): the CPU always; CUDA when the library was built
    with CUDA and a device is visible."""
    b = {"cpu": CPU, "cuda": CUDA}.get(backend, backend)
    if b not in (CPU, CUDA):
        raise InvalidArgumentError(f"argument 'backend': {backend!r}, expected 'cpu' or 'cuda'")
    return _vq.backend_available(b)


def cuda_available():
    """True when the CUDA backend is compiled in and a device is visible (the
    original Metal API's ``metal_available``)."""
    return _vq.backend_available(CUDA)


def version():
    """The C library's "MAJOR.MINOR.PATCH"."""
    return _vq.version()


def supports_shape(batch, heads, seq_len, head_dim):
    """True iff ``fused_sdpa`` accepts this shape with plain keys: head_dim % 8 == 0
    and head_dim <= 256, all sizes positive (other key formats add their own rules)."""
    return _vq.fused_sdpa_supports_shape(batch, heads, seq_len, head_dim)


# ---- host-memory tables (NumPy results) ------------------------------------------

def random_signs(seed, d):
    """[d] f32 of ±1: the library's default Hadamard diagonal for ``seed``
    (NumPy array, the same on every platform)."""
    import numpy as np
    out = np.empty(int(d) if int(d) > 0 else 0, np.float32)
    _vq.random_signs(seed, d, out)
    return out


def qjl_projection(seed, m, d):
    """[m, d] f32 i.i.d. N(0, 1) QJL projection drawn from ``seed`` (NumPy)."""
    import numpy as np
    out = np.empty((max(int(m), 0), max(int(d), 0)), np.float32)
    _vq.qjl_projection(seed, m, d, out)
    return out


def lloyd_max_codebook(bits):
    """The Lloyd-Max quantizer of N(0, 1) with 2**bits levels (bits 1..8):
    (centroids [2**bits] f32 ascending, boundaries [2**bits - 1] f32), NumPy."""
    import numpy as np
    n = 1 << int(bits) if 1 <= int(bits) <= 8 else 1
    c, b = np.empty(n, np.float32), np.empty(max(n - 1, 1), np.float32)
    _vq.lloyd_max_codebook(bits, c, b)
    return c, b[: n - 1]


# ---- bit packing ---------------------------------------------------------------

def turboquant_bit_pack(indices, bits, *, out=None):
    """Packs ``bits``-bit indices [..., N] (u8/u16/i32) into u32 words
    [..., ceil(N*bits/32)]; element i occupies stream bits [i*bits, (i+1)*bits),
    least significant first; values are masked to ``bits``."""
    ad = adapter(indices)
    s = _shape(indices, "indices")
    if out is None:
        out = ad.empty(s[:-1] + ((s[-1] * int(bits) + 31) // 32,) if s else (0,), "uint32", indices)
    _vq.bit_pack(ad.ctx(indices), indices, bits, out)
    return out


def turboquant_bit_unpack(packed, bits, original_length, *, dtype="int32", out=None):
    """Unpacks u32 words [..., W] (W == ceil(original_length*bits/32)) back to
    indices [..., original_length], int32 (seed) or uint8 (bits <= 8)."""
    ad = adapter(packed)
    s = _shape(packed, "packed")
    if out is None:
        out = ad.empty(s[:-1] + (int(original_length),), dtype, packed)
    _vq.bit_unpack(ad.ctx(packed), packed, bits, original_length, out)
    return out


# ---- Hadamard / TurboQuant ---------------------------------------------------------

def hadamard(x, diag=None, inverse=False, *, out=None):
    """Randomized Hadamard rotation rot(x) = H_D (diag * x) / sqrt(D) of x
    [..., D] f16/f32 (D a power of two <= 1024), or its inverse. ``out`` may be
    x itself (in place)."""
    ad = adapter(x)
    if out is None:
        out = ad.empty(_shape(x, "x"), ad.dtype(x), x)
    _vq.hadamard(ad.ctx(x), x, diag, inverse, out)
    return out


def turboquant_scalar_quantize(x, bits, *, out=None):
    """Lloyd-Max scalar quantization: x [...] f16/f32 -> indices [...] u8, the
    nearest N(0,1) Lloyd-Max centroid of each element (bits 1..8)."""
    ad = adapter(x)
    if out is None:
        out = ad.empty(_shape(x, "x"), "uint8", x)
    _vq.turboquant_scalar_quantize(ad.ctx(x), x, bits, out)
    return out


def turboquant_scalar_dequantize(indices, bits, scale, *, dtype="float32", out=None):
    """indices [...] u8 -> centroid[indices] * scale, [...] f32 (or f16)."""
    ad = adapter(indices)
    if out is None:
        out = ad.empty(_shape(indices, "indices"), dtype, indices)
    _vq.turboquant_scalar_dequantize(ad.ctx(indices), indices, bits, scale, out)
    return out


def turboquant_hadamard_quantize(x, bits, *, diag=None, norm_correct=False, out=None):
    """Fused rotation + Lloyd-Max quantization of x [..., D] f16/f32 (D a power
    of two <= 1024). Returns (indices [..., D] u8, scale [...] f32; [1] for 1-D
    x): y = rot(x), scale = ||y|| / sqrt(D), idx = nearest centroid of y/scale.
    ``diag`` [D] f32 ±1 (None = ones); ``norm_correct`` rescales so that
    <y_hat, y> = ||y||^2."""
    ad = adapter(x)
    s = _shape(x, "x")
    idx, sc = out if out is not None else (ad.empty(s, "uint8", x), ad.empty(s[:-1] or (1,), "float32", x))
    _vq.turboquant_hadamard_quantize(ad.ctx(x), x, diag, bits, idx, sc, norm_correct)
    return idx, sc


def turboquant_hadamard_dequantize(indices, scale, bits, *, diag=None, dtype="float32", out=None):
    """Inverse of ``turboquant_hadamard_quantize``: rot^-1(scale * centroid[idx]),
    [..., D] f32 (or f16)."""
    ad = adapter(indices)
    if out is None:
        out = ad.empty(_shape(indices, "indices"), dtype, indices)
    _vq.turboquant_hadamard_dequantize(ad.ctx(indices), indices, scale, diag, bits, out)
    return out


def turboquant_rvq_encode(x, b1, b2, *, diag=None):
    """Two-stage residual TurboQuant codes of x [..., D] f16/f32: an
    :class:`EncodedVector` (idx1/idx2 [..., D] u8, scale1/scale2 [...] f32)."""
    ad = adapter(x)
    s = _shape(x, "x")
    ss = s[:-1] or (1,)
    i1, s1, i2, s2 = (ad.empty(s, "uint8", x), ad.empty(ss, "float32", x), ad.empty(s, "uint8", x),
                      ad.empty(ss, "float32", x))
    _vq.turboquant_rvq_encode(ad.ctx(x), x, diag, b1, b2, i1, s1, i2, s2)
    return EncodedVector(i1, s1, i2, s2, b1, b2, diag)


def turboquant_rvq_decode(encoded, *, dtype="float32", out=None):
    """Decodes an :class:`EncodedVector` to [..., D] f32 (or f16):
    rot^-1(scale1 c1[idx1] + scale2 c2[idx2])."""
    e = encoded
    ad = adapter(e.idx1)
    if out is None:
        out = ad.empty(_shape(e.idx1, "idx1"), dtype, e.idx1)
    _vq.turboquant_rvq_decode(ad.ctx(e.idx1), e.idx1, e.scale1, e.idx2, e.scale2, e.diag, e.b1, e.b2, out)
    return out


# ---- KIVI affine -------------------------------------------------------------------

def _kivi_codes_shape(s, bits, packed):
    if not packed:
        return s
    return s[:-1] + (s[-1] * int(bits) // 8,)


def kivi_quantize_keys(k, bits, group_size, *, packed=False, param_dtype="float32", out=None):
    """KIVI keys, per channel over groups of ``group_size`` tokens: k [B,H,S,D]
    f16/f32 -> (codes [B,H,S,D] u8, or bit-packed [B,H,S,D*bits/8] with
    ``packed`` (bits 2/4/8), scale, zero [B,H,ceil(S/g),D] f32/f16)."""
    ad = adapter(k)
    s = _shape(k, "k")
    if out is None:
        ps = s[:-2] + (-(-s[-2] // int(group_size)) if int(group_size) > 0 else 0, s[-1]) if len(s) == 4 else s
        out = (ad.empty(_kivi_codes_shape(s, bits, packed), "uint8", k), ad.empty(ps, param_dtype, k),
               ad.empty(ps, param_dtype, k))
    _vq.kivi_quantize_keys(ad.ctx(k), k, bits, group_size, *out)
    return out


def kivi_quantize_values(v, bits, group_size, *, packed=False, param_dtype="float32", out=None):
    """KIVI values, per token over groups of ``group_size`` channels: v [B,H,S,D]
    -> (codes as for keys, scale, zero [B,H,S,ceil(D/g)] f32/f16)."""
    ad = adapter(v)
    s = _shape(v, "v")
    if out is None:
        ps = s[:-1] + (-(-s[-1] // int(group_size)) if int(group_size) > 0 else 0,) if len(s) == 4 else s
        out = (ad.empty(_kivi_codes_shape(s, bits, packed), "uint8", v), ad.empty(ps, param_dtype, v),
               ad.empty(ps, param_dtype, v))
    _vq.kivi_quantize_values(ad.ctx(v), v, bits, group_size, *out)
    return out


def kivi_dequantize_keys(codes, scale, zero, bits, group_size, *, dtype="float32", out=None):
    """codes, scale, zero of ``kivi_quantize_keys`` -> k_hat [B,H,S,D] f32/f16
    (code * scale + zero)."""
    ad = adapter(codes)
    # D is the scale's last axis (the codes' may be bit-packed)
    if out is None:
        out = ad.empty(_shape(codes, "codes")[:-1] + _shape(scale, "scale")[-1:], dtype, codes)
    _vq.kivi_dequantize_keys(ad.ctx(codes), codes, scale, zero, bits, group_size, out)
    return out


def kivi_dequantize_values(codes, scale, zero, bits, group_size, *, head_dim=None, dtype="float32", out=None):
    """codes, scale, zero of ``kivi_quantize_values`` -> v_hat [B,H,S,D]
    f32/f16. ``head_dim`` D is needed when the codes are bit-packed (it is the
    codes' last axis otherwise)."""
    ad = adapter(codes)
    s = _shape(codes, "codes")
    d = int(head_dim) if head_dim is not None else s[-1]
    if out is None:
        out = ad.empty(s[:-1] + (d,), dtype, codes)
    _vq.kivi_dequantize_values(ad.ctx(codes), codes, scale, zero, bits, group_size, out)
    return out


# ---- RaBitQ --------------------------------------------------------------------

def rabitq_encode(keys, diag=None, *, mag="l1", out=None):
    """Fused rotate + binarize + bit-pack + magnitude: keys [..., N, D] f16/f32
    (raw, D a power of two, 8 <= D <= 1024), diag [D] f32 ±1 (None = ones).
    Returns (k_bits [..., N, D/8] u8, k_mag [..., N] f32). ``mag`` 'l1' (seed:
    ||y||_1/D) or 'unbiased' (||y||^2/||y||_1, RaBitQ's estimator)."""
    ad = adapter(keys)
    s = _shape(keys, "keys")
    if out is None:
        out = (ad.empty(s[:-1] + (s[-1] // 8,), "uint8", keys), ad.empty(s[:-1], "float32", keys))
    _vq.rabitq_encode(ad.ctx(keys), keys, diag, out[0], out[1], _code(_RABITQ_MAG, mag, "mag"))
    return out


def rabitq_hamming_score(qbits, bits, Cx, scale, *, out=None):
    """XOR + popcount scoring of N candidates against one query: qbits [D/8] u8,
    bits [N, D/8] u8, Cx [N] f32, scale [1] f32 -> [N] f32,
    score[i] = popcount(qbits ^ bits[i]) * scale + Cx[i] (lower = closer)."""
    ad = adapter(bits)
    if out is None:
        out = ad.empty(_shape(bits, "bits")[:-1], "float32", bits)
    _vq.rabitq_hamming_score(ad.ctx(bits), qbits, bits, Cx, scale, out)
    return out


def rabitq_pack_values(v_idx, *, out=None):
    """Packs 4-bit value indices two per byte along the last axis (low nibble =
    even element; masked to 4 bits): [..., 2n] u8 -> [..., n] u8."""
    ad = adapter(v_idx)
    s = _shape(v_idx, "v_idx")
    if out is None:
        out = ad.empty(s[:-1] + (s[-1] // 2,) if s else (0,), "uint8", v_idx)
    _vq.rabitq_pack_values(ad.ctx(v_idx), v_idx, out)
    return out


def rabitq_fused_attend(q, q_scale, k_bits, k_mag, k_const, v_idx, v_cents, *, score="hamming", v_scale=None,
                        causal=False, num_splits=0, lse_out=None, value_accum="auto", out=None):
    """Attention over 1-bit keys and codebook values in one pass.

    q [B,Hq,Sq,D] f16/f32 pre-rotated, q_scale [B,Hq,Sq] f32 (fold 1/sqrt(D) in),
    k_bits [B,Hkv,Skv,D/8] u8, k_mag [B,Hkv,Skv] f32, k_const [B,Hkv,Skv] f32 or
    None, v_idx [B,Hkv,Skv,D] u8 or nibble-packed [B,Hkv,Skv,D/2], v_cents
    [n_cents] f32. score 'hamming' (seed: (D - 2 ham) q_scale k_mag + k_const)
    or 'exact'; v_scale [B,Hkv,Skv] f32 per-token value scale. ``value_accum``
    (CPU) 'auto' (int8 p . v on CPUs with AVX-512 VNNI + VBMI at D = 128 and
    <= 16 centroids: each output channel within 0.131 max|v_cents| max|v_scale|,
    typically ~1e-3 of that, see vq_value_accum), 'f32' (~1e-6) or 'int8'.
    Returns [B,Hq,Sq,D] in q's dtype. D % 8 == 0, D <= 256."""
    ad = adapter(q)
    if out is None:
        out = ad.empty(_shape(q, "q"), ad.dtype(q), q)
    _vq.rabitq_fused_attend(ad.ctx(q), q, q_scale, k_bits, k_mag, k_const, v_idx, v_cents, out,
                            _code(_RABITQ_SCORE, score, "score"), v_scale, causal, num_splits, lse_out,
                            _code(_VALUE_ACCUM, value_accum, "value_accum"))
    return out


def rabitq_prefill_attend(q, scale, k_bits, k_mag, k_const, v_idx, v_cents, *, v_scale=None, out=None):
    """Prefill-shaped RaBitQ attention (large Sq, no causal mask): q [B,Hq,Sq,D]
    f16/f32, scale [1] f32 array or a float (softmax scale), k_bits, k_mag,
    k_const as in ``rabitq_fused_attend``, v_idx nibble-packed [B,Hkv,Skv,D/2],
    v_cents [<= 16] f32. Exact scores (q . sign*k_mag) * scale + k_const.
    Returns [B,Hq,Sq,D] in q's dtype."""
    ad = adapter(q)
    if isinstance(scale, (int, float)):
        scale = ad.asarray([float(scale)], "float32", q)
    if out is None:
        out = ad.empty(_shape(q, "q"), ad.dtype(q), q)
    _vq.rabitq_prefill_attend(ad.ctx(q), q, scale, k_bits, k_mag, k_const, v_idx, v_cents, out, 0, v_scale,
                              False, 0, None, 0)
    return out


# ---- group-affine attention --------------------------------------------------------

def scalar_fused_decode_attend(q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size, scale, nsg=4,
                               *, bits=0, causal=False, key_scores="auto", value_accum="auto", lse_out=None,
                               out=None):
    """Attention straight over a KIVI group-affine cache.

    q [B,Hq,Sq,D] f16/f32, k_codes/v_codes [B,Hkv,Skv,D] u8 (or bit-packed
    [.., D*bits/8]), k_scale/k_zero [B,Hkv,ceil(Skv/g),D] f32/f16, v_scale/v_zero
    [B,Hkv,Skv,ceil(D/g)] f32/f16; k_hat = code*scale + zero decoded in
    registers. ``nsg`` splits of the kv axis (1..32, 0 = automatic); ``bits``
    the packed code width (0 = detect). ``key_scores`` 'auto' (int8 query
    dots for 2/4-bit codes with D*bits % 256 == 0: score error at most
    max|scale q k_scale| / 254 per unit of code, see vq_key_scores), 'f32'
    (float dots, ~1e-6) or 'int8' (CPU; CUDA uses its own 22-bit query).
    ``value_accum`` (CPU) 'auto' (int8 p . v for 2-bit values, g 32, D 128 on
    CPUs with AVX-512 VNNI + VBMI: each output channel within 0.38
    max|v_scale|, typically ~1e-3 of it, see vq_value_accum), 'f32' or 'int8'.
    Returns [B,Hq,Sq,D] in q's dtype. D <= 256; q must be 4-D."""
    ad = adapter(q)
    if out is None:
        out = ad.empty(_shape(q, "q"), ad.dtype(q), q)
    _vq.scalar_fused_decode_attend(ad.ctx(q), q, k_codes, k_scale, k_zero, v_codes, v_scale, v_zero, group_size,
                                   scale, nsg, out, causal, bits, lse_out,
                                   _code(_KEY_SCORES, key_scores, "key_scores"),
                                   _code(_VALUE_ACCUM, value_accum, "value_accum"))
    return out


# ---- fused SDPA over every key format ---------------------------------------------------

def fused_sdpa(queries, encoded_keys, values, scale, mask=None, *, causal=False, num_splits=0, lse_out=None,
               out=None, key_scores="auto", value_accum="auto"):
    """Fused dequantize + scaled dot-product attention over any key and value format.

    queries [B,Hq,Sq,D] f16/f32 (raw: rotations are applied inside),
    encoded_keys one of F16Keys, TurboKeys, EncodedVector, KIVIKeys,
    RaBitQKeys, QJLKeys, VecInferKeys, CommVQKeys (a plain array means F16Keys),
    values [B,Hkv,Skv,D] f16/f32 or one of F16Values, KIVIValues,
    CodebookValues, TurboValues; mask [B|1, Hq|1, Sq, Skv] f32/f16 additive or
    None. GQA when Hq % Hkv == 0; ``causal`` for Sq > 1 (the queries are the
    last Sq positions); ``lse_out`` [B,Hq,Sq] f32 receives each row's
    log-sum-exp (for ``attention_merge``). Returns [B,Hq,Sq,D] in the queries'
    dtype. D % 8 == 0, D <= 256. Tensors may be views with outer strides (the
    last axis contiguous). ``key_scores`` / ``value_accum`` ("auto", "f32",
    "int8"; vq_attend_opts): the CPU arithmetic of KIVI and TurboQuant/RVQ
    keys and of KIVI and TurboQuant values; "auto" is f32 here, "int8" the
    integer paths (error bounds in the header at vq_key_scores and
    vq_value_accum)."""
    keys = encoded_keys if hasattr(encoded_keys, "_vq_args") else F16Keys(encoded_keys)
    vals = values if hasattr(values, "_vq_args") else F16Values(values)
    kf, kt, ki = keys._vq_args()
    vf, vt, vi = vals._vq_args()
    ad = adapter(queries)
    if out is None:
        out = ad.empty(_shape(queries, "queries"), ad.dtype(queries), queries)
    _vq.fused_sdpa(ad.ctx(queries), queries, kf, kt, ki, vf, vt, vi, scale, mask, out, causal, num_splits, lse_out,
                   _code(_KEY_SCORES, key_scores, "key_scores"), _code(_VALUE_ACCUM, value_accum, "value_accum"))
    return out


def attention_merge(out_a, lse_a, out_b, lse_b, *, out=None, lse_out=None):
    """Exact merge of two attention results over disjoint token sets of the same
    queries (FlashInfer's merge_state): out_a/out_b [B,H,S,D] f16/f32 with their
    log-sum-exps lse_a/lse_b [B,H,S] f32 (``lse_out=`` of the attention calls).
    out_a, out_b and out may differ in dtype (each f16 or f32; the merge runs in
    f32). Returns the attention over the union, in out_a's dtype unless ``out``
    is given; ``out`` may be out_a (in place),
    ``lse_out`` receives the merged log-sum-exp."""
    ad = adapter(out_a)
    if out is None:
        out = ad.empty(_shape(out_a, "out_a"), ad.dtype(out_a), out_a)
    _vq.attention_merge(ad.ctx(out_a), out_a, lse_a, out_b, lse_b, out, lse_out)
    return out


def turboquant_fused_rvq_decode_attend(queries, encoded_keys, values, scale, *, causal=False, num_splits=0,
                                       lse_out=None, out=None):
    """Two-stage RVQ decode + attention in one pass: ``fused_sdpa`` specialised
    to an :class:`EncodedVector` key cache (no mask). Returns [B,Hq,Sq,D]."""
    if not isinstance(encoded_keys, EncodedVector):
        raise InvalidArgumentError("argument 'encoded_keys': expected an EncodedVector (turboquant_rvq_encode), "
                                   f"got {type(encoded_keys).__name__}")
    fmt, kt, ki = encoded_keys._vq_args()
    ad = adapter(queries)
    if out is None:
        out = ad.empty(_shape(queries, "queries"), ad.dtype(queries), queries)
    _vq.turboquant_fused_rvq_decode_attend(ad.ctx(queries), queries, fmt, kt, ki, values, scale, out, causal,
                                           num_splits, lse_out)
    return out


# ---- QJL ---------------------------------------------------------------------------

def qjl_encode(keys, projection, *, out=None):
    """Project + sign: keys [..., D] f16/f32, projection [m, D] f32 -> packed
    sign bits [..., ceil(m/32)] u32 (bit j = (S k)_j >= 0)."""
    ad = adapter(keys)
    m = _shape(projection, "projection")[0]
    if out is None:
        out = ad.empty(_shape(keys, "keys")[:-1] + ((m + 31) // 32,), "uint32", keys)
    _vq.qjl_encode(ad.ctx(keys), keys, projection, out)
    return out


def qjl_inner_product(query_bits, key_bits, head_dim, sketch_dim, *, query_norm=None, key_norm=None, out=None):
    """Symmetric estimate of <q, k> from two sketches: query_bits [..., W] u32,
    key_bits [..., N, W] u32 -> [..., N] f32 = cos(pi * ham / sketch_dim), times
    ``query_norm`` [...] and ``key_norm`` [..., N] when given."""
    ad = adapter(key_bits)
    if out is None:
        out = ad.empty(_shape(key_bits, "key_bits")[:-1], "float32", key_bits)
    _vq.qjl_inner_product(ad.ctx(key_bits), query_bits, key_bits, head_dim, sketch_dim, out, query_norm,
                          key_norm)
    return out


def qjl_score(query, projection, key_bits, key_norm, *, out=None):
    """The QJL paper's unbiased asymmetric estimate: query [..., D] f16/f32,
    projection [m, D] f32, key_bits [..., N, ceil(m/32)] u32, key_norm [..., N]
    f32 -> [..., N] f32 = sqrt(pi/2)/m * ||k|| * sum_j (S q)_j sign_j."""
    ad = adapter(query)
    if out is None:
        out = ad.empty(_shape(key_bits, "key_bits")[:-1], "float32", query)
    _vq.qjl_score(ad.ctx(query), query, projection, key_bits, key_norm, out)
    return out


# ---- VecInfer product VQ -----------------------------------------------------------

def _vecinfer_index_dtype(codebook):
    return "uint8" if _shape(codebook, "codebook")[-2] <= 256 else "uint16"


def vecinfer_quantize(keys, codebook, smooth_factors, num_subspaces, *, out=None):
    """Product-VQ encoding: keys [B,H,S,D] f16/f32, codebook [M,C,D/M] (or
    [H,M,C,D/M]) f32, smooth_factors [D] (or [H,D]) f32 -> indices [B,H,S,M]
    (u8 when C <= 256, else u16) of the nearest centroid of each smoothed slice."""
    ad = adapter(keys)
    if out is None:
        out = ad.empty(_shape(keys, "keys")[:-1] + (int(num_subspaces),), _vecinfer_index_dtype(codebook), keys)
    _vq.vecinfer_quantize(ad.ctx(keys), keys, codebook, smooth_factors, num_subspaces, out)
    return out


def vecinfer_dequant(indices, codebook, smooth_factors, *, dtype="float32", out=None):
    """Codebook gather + smooth-factor inverse: indices [B,H,S,M] -> keys
    [B,H,S,D] f32 (or f16)."""
    ad = adapter(indices)
    cs = _shape(codebook, "codebook")
    s = _shape(indices, "indices")
    if out is None:
        out = ad.empty(s[:-1] + (s[-1] * cs[-1],), dtype, indices)
    _vq.vecinfer_dequant(ad.ctx(indices), indices, codebook, smooth_factors, out)
    return out


def vecinfer_encode_decode(keys, codebook, smooth_factors, num_subspaces, *, out=None):
    """Encode then decode in one pass: (indices [B,H,S,M], reconstructed keys
    [B,H,S,D] in keys' dtype)."""
    ad = adapter(keys)
    s = _shape(keys, "keys")
    if out is None:
        out = (ad.empty(s[:-1] + (int(num_subspaces),), _vecinfer_index_dtype(codebook), keys),
               ad.empty(s, ad.dtype(keys), keys))
    _vq.vecinfer_encode_decode(ad.ctx(keys), keys, codebook, smooth_factors, num_subspaces, out[0], out[1])
    return out


def compute_query_lut(queries, codebook, smooth_factors, *, out=None):
    """Query-codebook inner-product table for asymmetric MIPS: queries [B,H,D] or
    [B,H,Sq,D] -> [B,H,M,C] or [B,H,Sq,M,C] f32, lut[m,c] = (q*s)[slice m] .
    codebook[m,c], so q . k_hat = sum_m lut[m, idx[m]]."""
    ad = adapter(queries)
    cs = _shape(codebook, "codebook")
    if out is None:
        out = ad.empty(_shape(queries, "queries")[:-1] + (cs[-3], cs[-2]), "float32", queries)
    _vq.vecinfer_query_lut(ad.ctx(queries), queries, codebook, smooth_factors, out)
    return out


def vecinfer_smooth_factors(keys, *, out=None):
    """Smooth factors from calibration keys [N, D] f16/f32: s_c = sqrt(max_t
    |k[t,c]|) (1 for an all-zero channel), [D] f32. CPU only (a trainer)."""
    ad = adapter(keys)
    if out is None:
        out = ad.empty(_shape(keys, "keys")[-1:], "float32", keys)
    _vq.vecinfer_smooth_factors(ad.ctx(keys), keys, out)
    return out


def kmeans(samples, C, iters=25, seed=0, *, out=None):
    """k-means++ then Lloyd rounds: samples [N, d] f32 -> centroids [C, d] f32.
    Deterministic for a seed. CPU only (a trainer)."""
    ad = adapter(samples)
    if out is None:
        out = ad.empty((int(C), _shape(samples, "samples")[-1]), "float32", samples)
    _vq.kmeans(ad.ctx(samples), samples, C, iters, seed, out)
    return out


# ---- scalar codebooks ------------------------------------------------------------------

def codebook_quantize(x, cents, *, out=None):
    """Nearest-centroid indices of x [...] f16/f32 in cents [n] f32 ascending
    (1 <= n <= 256; ties to the lower index) -> [...] u8."""
    ad = adapter(x)
    if out is None:
        out = ad.empty(_shape(x, "x"), "uint8", x)
    _vq.codebook_quantize(ad.ctx(x), x, cents, out)
    return out


def lloyd_max_fit(samples, n_cents, iters=20, *, out=None):
    """1-D Lloyd-Max / k-means on samples [N] f16/f32 -> [n_cents] f32 ascending
    centroids (initialised at quantiles; deterministic). CPU only."""
    ad = adapter(samples)
    if out is None:
        out = ad.empty((int(n_cents),), "float32", samples)
    _vq.lloyd_max_fit(ad.ctx(samples), samples, n_cents, iters, out)
    return out


# ---- CommVQ ------------------------------------------------------------------------

def commvq_decode(indices, codebook, cos_freqs, sin_freqs, positions, *, scale=None, rope="half",
                   dtype="float32", out=None):
    """Centroid gather + RoPE in one pass: indices [B,H,S,R] u8/u16/i32, codebook
    [R,C,D] f32, cos_freqs/sin_freqs [P, D/2] f32, positions [S] or [B,S] i32 ->
    keys [B,H,S,D] f32 (or f16) = RoPE(scale * sum_r codebook[r, idx_r]).
    ``rope`` 'half' (Hugging Face/NeoX pairs (i, i+D/2)) or 'interleaved'."""
    ad = adapter(indices)
    if out is None:
        out = ad.empty(_shape(indices, "indices")[:-1] + (_shape(codebook, "codebook")[-1],), dtype, indices)
    _vq.commvq_decode(ad.ctx(indices), indices, codebook, cos_freqs, sin_freqs, positions, out,
                       rope_code(rope), scale)
    return out


def commvq_train(samples, R, C, iters=25, seed=0, *, out=None):
    """Residual k-means on pre-RoPE keys [N, D] f32: codebook [R, C, D] f32.
    CPU only (a trainer)."""
    ad = adapter(samples)
    if out is None:
        out = ad.empty((int(R), int(C), _shape(samples, "samples")[-1]), "float32", samples)
    _vq.commvq_train(ad.ctx(samples), samples, R, C, iters, seed, out)
    return out


def commvq_encode(keys, codebook, *, dtype=None, out=None):
    """Greedy residual encoding of pre-RoPE keys [B,H,S,D] f16/f32 with codebook
    [R,C,D] f32 -> indices [B,H,S,R] (u8 when C <= 256, else u16, or ``dtype``)."""
    ad = adapter(keys)
    cs = _shape(codebook, "codebook")
    dt = dtype or ("uint8" if cs[1] <= 256 else "uint16")
    if out is None:
        out = ad.empty(_shape(keys, "keys")[:-1] + (cs[0],), dt, keys)
    _vq.commvq_encode(ad.ctx(keys), keys, codebook, out)
    return out


# One idea, one name: KIVI (once "affine" and "scalar") and CommVQ (once
# "comm_vq"). The original Metal API's names (scalar_fused_decode_attend,
# comm_vq_decode) stay, since code written against it calls them; the C API's
# earlier names are deprecated aliases.
kivi_fused_attend = scalar_fused_decode_attend
comm_vq_decode = commvq_decode
affine_quantize_keys = kivi_quantize_keys
affine_quantize_values = kivi_quantize_values
affine_dequantize_keys = kivi_dequantize_keys
affine_dequantize_values = kivi_dequantize_values
comm_vq_train = commvq_train
comm_vq_encode = commvq_encode
