"""KVCache: the library's paged, multi-sequence compressed KV cache (vq_cache,
section 5 of include/veloxquant.h) for Python arrays.

A cache holds the keys and values of every layer of a model for many sequences,
each layer compressed with its own key and value method (a preset name such as
"kivi2", "turbo3", "rabitq", or an explicit :class:`LayerConfig`). Attention
runs on the compressed pages and the f16 residual window, merged exactly; no
dequantized copy of the cache is made.
"""

import dataclasses

import numpy as np

from . import _vq
from ._errors import InvalidArgumentError
from ._keys import ROPE_LAYOUTS, choice
from ._runtime import CPU, CUDA, adapter, cpu_ctx, device_ctx

__all__ = ["KVCache", "LayerConfig", "presets", "KEY_METHODS", "VALUE_METHODS"]

# "pq" is VecInfer's earlier name (deprecated): accepted, never reported
KEY_METHODS = {"f16": 1, "kivi": 2, "turbo": 3, "turbo_rvq": 4, "rabitq": 5, "qjl": 6, "vecinfer": 7, "commvq": 8,
               "kivi_mix": 9, "pq": 7}
VALUE_METHODS = {"f16": 1, "kivi": 2, "codebook": 3, "turbo": 4}
_RABITQ_SCORE = {"hamming": 0, "exact": 1}
_RABITQ_MAG = {"l1": 0, "unbiased": 1}


def _name(table, code):
    for k, v in table.items():
        if v == code:
            return k
    return code


@dataclasses.dataclass
class LayerConfig:
    """The key and value method of one layer (vq_cache_layer_config). Tables
    (codebook, smooth, cos_freqs, sin_freqs, value_centroids) are host f32
    arrays, copied when the cache is created."""

    key_method: str = "f16"
    key_bits: int = 0
    key_bits2: int = 0
    key_group_size: int = 0
    norm_correct: bool = False
    rabitq_score: str = "hamming"
    rabitq_mag: str = "l1"
    qjl_sketch: int = 0
    key_seed: int = 0
    codebook: object = None
    smooth: object = None
    cos_freqs: object = None
    sin_freqs: object = None
    rope: str = "half"
    value_method: str = "f16"
    value_bits: int = 0
    value_group_size: int = 0
    value_centroids: object = None
    value_seed: int = 0
    key_wide_channels: int = 0  # KIVI_MIX: wide channels per group (0 = head_dim / 2)
    value_scale_f16: bool = False  # TurboQuant values: f16 scales (CPU only)

    @classmethod
    def preset(cls, name, head_dim):
        """The layer config of preset ``name`` at ``head_dim`` (tables empty)."""
        return cls._from_tuple(_vq.cache_preset_layer_config(name, head_dim))

    @classmethod
    def _from_tuple(cls, t):
        return cls(_name(KEY_METHODS, t[0]), t[1], t[2], t[3], bool(t[4]), _name(_RABITQ_SCORE, t[5]),
                   _name(_RABITQ_MAG, t[6]), t[7], t[8], None, None, None, None, _name(ROPE_LAYOUTS, t[13]),
                   _name(VALUE_METHODS, t[14]), t[15], t[16], None, t[18], t[19], bool(t[20]))

    def _tuple(self):
        return (choice(KEY_METHODS, self.key_method, "key_method"), self.key_bits, self.key_bits2,
                self.key_group_size, self.norm_correct, choice(_RABITQ_SCORE, self.rabitq_score, "rabitq_score"),
                choice(_RABITQ_MAG, self.rabitq_mag, "rabitq_mag"), self.qjl_sketch, self.key_seed, self.codebook,
                self.smooth, self.cos_freqs, self.sin_freqs, choice(ROPE_LAYOUTS, self.rope, "rope"),
                choice(VALUE_METHODS, self.value_method, "value_method"), self.value_bits, self.value_group_size,
                self.value_centroids, self.value_seed, self.key_wide_channels, self.value_scale_f16)


def _table(a, name):
    """A transform table as a contiguous f32 host array (None stays None)."""
    if a is None:
        return None
    if hasattr(a, "detach"):  # torch
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.dtype != np.float32:
        raise InvalidArgumentError(f"argument '{name}': dtype {a.dtype}, expected float32")
    return np.ascontiguousarray(a)


def presets():
    """The cache presets (vq_cache_preset), those named by what they buy
    first: a list of dicts with name, description, key_bits and value_bits
    (the pages' bits per element all-in at head_dim 128), needs_tables, and
    what a preset named by what it buys sets beside its methods: recipe
    (True for those), bits (the whole cache's bits per element as
    :meth:`KVCache.memory` counts them, one 2048-token sequence at head_dim
    64; 0 for method presets), sink_tokens, center_keys, center_values,
    smooth, residual_tokens and window (KVCache's argument names)."""
    keys = ("name", "description", "key_bits", "value_bits", "needs_tables", "recipe", "bits", "sink_tokens",
            "center_keys", "center_values", "smooth", "residual_tokens", "window")
    return [dict(zip(keys, p)) for p in _vq.cache_presets()]


def _recipe(name):
    """The dict of presets() for a preset named by what it buys, or None."""
    return next((p for p in presets() if p["name"] == name and p["recipe"]), None) if isinstance(name, str) else None


def _device_ctx(device):
    """The context for a device given as 'cpu', 'cuda', 'cuda:N' or a torch.device."""
    if device is None or str(device) == "cpu":
        return cpu_ctx()
    s = str(device)
    if not s.startswith("cuda"):
        raise InvalidArgumentError(f"argument 'device': {device!r}, expected 'cpu' or 'cuda[:N]'")
    idx = int(s.split(":")[1]) if ":" in s else 0
    stream = None
    try:
        import torch
        if torch.cuda.is_available():
            stream = torch.cuda.current_stream(idx).cuda_stream
    except ImportError:
        pass
    return device_ctx(CUDA, idx, stream)


# vq_cache_window (and window_bits) by name: turbo8 is VQ_WINDOW_TURBO8, turbo1..turbo7 VQ_WINDOW_TURBO
# vq_cache_attend_opts key_scores / value_accum by name (both enums: AUTO 0, F32 1, INT8 2)
_KIVI_ARITH = {"auto": 0, "f32": 1, "int8": 2}
_WINDOWS = {"f16": (0, 0), "turbo8": (1, 0), **{f"turbo{b}": (2, b) for b in range(1, 8)}}


def make_profile(n_layers, n_kv_heads, head_dim, *, method="f16", layers=None, f16_layers=None,
                 sliding_windows=None, residual_tokens=0, window="f16"):
    """The bytes of a profile file (vq_profile_save): every layer's methods
    (``method`` for all, or ``layers``: preset names / :class:`LayerConfig`
    without tables, ``f16_layers`` kept uncompressed), their sliding windows
    and the residual window, for a model of that shape. Write them to a file
    for ``vq --kv FILE``, or pass them as ``KVCache(profile=...)``."""
    if window not in _WINDOWS:
        raise InvalidArgumentError(f"argument 'window': expected one of {sorted(_WINDOWS)}, got {window!r}")
    if layers is None:
        layers = [method] * int(n_layers)
    configs = [LayerConfig.preset(c, head_dim) if isinstance(c, str) else c for c in layers]
    for l in f16_layers or ():
        configs[l] = LayerConfig.preset("f16", head_dim)
    return _vq.profile_bytes(_device_ctx("cpu"), int(n_layers), int(n_kv_heads), int(head_dim),
                             tuple(c._tuple() for c in configs),
                             None if sliding_windows is None else tuple(sliding_windows), int(residual_tokens),
                             *_WINDOWS[window])


class KVCache:
    """A compressed KV cache for ``n_layers`` layers of ``n_kv_heads`` heads of
    ``head_dim`` (D) channels.

    Args:
        method: a preset name for every layer: one named by what it buys
            ("quality-4bit", "balanced-3bit", "compact-2.5bit") or a method
            ("f16", "kivi2", "kivi4", "turbo3", ...; see :func:`presets`).
            A preset named by what it buys also sets sink_tokens,
            center_keys, center_values, smooth, residual_tokens and window
            (its dict in :func:`presets`) where they are left at their
            defaults here (0, False, None, "f16"); its smooth needs
            :meth:`fit_transforms` with the first chunk's queries before that
            chunk's :meth:`append` (:mod:`veloxquant.hf` does that).
        layers: per-layer choice instead: a list of n_layers preset names or
            :class:`LayerConfig` objects (overrides ``method``).
        n_q_heads: query heads Hq (a multiple of Hkv; default Hkv).
        f16_layers: layer indices kept uncompressed whatever the method.
        page_size: tokens per page (a multiple of 32; 0 = 256).
        capacity_pages, grow_pages: pages per layer at creation (0 = 64) and
            added when full (0 = fixed capacity; default 64).
        max_sequences: live sequences at most (0 = 256).
        residual_tokens: newest tokens of every sequence kept in the residual
            window (with KIVI keys' partial group).
        window: how the residual window is stored: "f16" (default),
            "turbo8" (TurboQuant 8-bit keys and values per token, D + 4 bytes
            per token and head: 8.5 bits per element at D = 64) or "turbo1"
            .. "turbo7" (that many bits, packed, f16 scales); CPU only;
            vq_cache_config.window and window_bits.
        sliding_windows: per-layer sliding-window attention, n_layers ints
            (0 = full attention): a query sees only the newest W tokens of
            its sequence and older pages go back to the pool (CPU and
            CUDA; vq_cache_config.sliding_windows).
        profile: a profile (a path, or the bytes of a file written by
            ``vq profile`` or vq_profile_save) giving every layer's methods,
            sliding windows and the residual window: then leave method,
            layers, f16_layers, sliding_windows, residual_tokens and window
            unset; n_layers, n_kv_heads and head_dim must be the profile's.
        device: 'cpu' (default) or 'cuda[:N]' (the cache runs on torch's
            current stream of that device at creation).
        sink_tokens: the first N tokens of every sequence kept in f16
            outside the pages, merged exactly (vq_cache_config.sink_tokens).
        center_keys, center_values, smooth: the exact transforms on every
            layer (vq_cache_transforms): keys and values stored
            minus their per-channel mean, keys times and queries divided by
            key/query balancing channel scales. The tables are fitted on each
            sequence's first chunk (smooth needs its queries:
            :meth:`fit_transforms` before that chunk's :meth:`append`), or
            given by ``transform_tables``.
        transform_tables: None, or a list of n_layers dicts (or None) with
            any of "key_mean", "value_mean", "key_scale": [Hkv, D] f32 host
            arrays, e.g. what :meth:`transforms` read from another cache.

    Arrays (k, v, q, out) are any DLPack arrays on the cache's device:
    k, v [n_seq, Hkv, n, D] f16/f32, q/out [n_seq, Hq, Sq, D]; views with
    outer strides (the last axis contiguous) are read in place.
    """

    def __init__(self, n_layers, n_kv_heads, head_dim, *, method=None, layers=None, n_q_heads=None,
                 f16_layers=None, page_size=0, capacity_pages=0, grow_pages=64, max_sequences=0,
                 residual_tokens=0, window="f16", sliding_windows=None, profile=None, device="cpu", sink_tokens=0,
                 center_keys=False, center_values=False, smooth=False, transform_tables=None):
        self.n_layers, self.n_kv_heads, self.head_dim = int(n_layers), int(n_kv_heads), int(head_dim)
        self.n_q_heads = int(n_q_heads) if n_q_heads is not None else self.n_kv_heads
        self.device = str(device)
        self._ctx = _device_ctx(device)
        if profile is not None:
            given = [name for name, v in (("method", method), ("layers", layers), ("f16_layers", f16_layers),
                                          ("sliding_windows", sliding_windows), ("residual_tokens", residual_tokens),
                                          ("window", None if window == "f16" else window)) if v]
            if given:
                raise InvalidArgumentError(f"argument '{given[0]}' is set beside 'profile', which gives it")
            if not isinstance(profile, bytes):
                profile = str(profile)
        elif method is None:
            method = "f16"
        if window not in _WINDOWS:
            raise InvalidArgumentError(f"argument 'window': expected one of {sorted(_WINDOWS)}, got {window!r}")
        layer_tuples = None
        if layers is not None:
            layer_tuples = tuple((LayerConfig.preset(c, head_dim) if isinstance(c, str) else c)._tuple()
                                 for c in layers)
        transforms = None
        if center_keys or center_values or smooth or transform_tables is not None:
            tables = transform_tables if transform_tables is not None else [None] * self.n_layers
            if len(tables) != self.n_layers:
                raise InvalidArgumentError(f"argument 'transform_tables': {len(tables)} entries, expected n_layers = "
                                           f"{self.n_layers}")
            transforms = tuple((bool(center_keys), bool(center_values), bool(smooth),
                                *(_table((t or {}).get(name), f"transform_tables[{i}]['{name}']")
                                  for name in ("key_mean", "value_mean", "key_scale")))
                               for i, t in enumerate(tables))
        self._cache = _vq.cache_create(self._ctx, self.n_layers, self.n_kv_heads, self.n_q_heads, self.head_dim,
                                       page_size, capacity_pages, grow_pages, max_sequences, residual_tokens,
                                       None if layers is not None else method, layer_tuples,
                                       None if f16_layers is None else tuple(f16_layers), *_WINDOWS[window],
                                       int(sink_tokens), transforms,
                                       None if sliding_windows is None else tuple(sliding_windows), profile)
        self.method = "profile" if profile is not None else method if layers is None else "per-layer"
        # what the library applied (vq_cache_create): smooth needs fit_transforms before the first append
        recipe = _recipe(method) if layers is None and profile is None else None
        self.smooth = bool(smooth) or (recipe is not None and transforms is None and recipe["smooth"])

    def __repr__(self):
        return (f"KVCache(method={self.method!r}, n_layers={self.n_layers}, n_kv_heads={self.n_kv_heads}, "
                f"n_q_heads={self.n_q_heads}, head_dim={self.head_dim}, device={self.device!r})")

    # ---- sequences ----

    def add_sequence(self):
        """Adds an empty sequence; returns its id (an int, never reused)."""
        return _vq.cache_seq_add(self._cache)

    def remove(self, seq_id):
        """Removes a sequence; its pages return to the pool."""
        _vq.cache_seq_remove(self._cache, seq_id)

    def truncate(self, seq_id, n_tokens):
        """Keeps the first n_tokens tokens of every layer of a sequence
        (speculative-decoding rollback; see vq_cache_seq_truncate)."""
        _vq.cache_seq_truncate(self._cache, seq_id, n_tokens)

    def fork(self, seq_id):
        """A new sequence holding the same tokens (pages shared copy-on-write);
        returns its id."""
        return _vq.cache_seq_fork(self._cache, seq_id)

    def length(self, seq_id, layer=0):
        """Tokens of ``layer`` of a sequence (-1 for an unknown id or layer)."""
        return _vq.cache_seq_length(self._cache, seq_id, layer)

    # ---- data ----

    def append(self, layer, seq_ids, k, v, positions=None):
        """Appends n tokens of ``layer`` to each sequence of ``seq_ids``:
        k, v [len(seq_ids), Hkv, n, D] f16/f32 (f16 on CUDA); positions
        [n_seq, n] i32 (CommVQ layers; None = current length + i)."""
        _vq.cache_append(self._cache, layer, seq_ids, k, v, positions)

    def attend(self, layer, seq_ids, q, *, scale=0.0, causal=False, lse_out=None, out=None, kivi_arith="auto"):
        """Attention of each sequence's queries q [n_seq, Hq, Sq, D] f16/f32 over
        all its cached tokens of ``layer``; returns out (same shape, q's dtype,
        allocated in q's framework unless given). ``scale`` 0 = 1/sqrt(D);
        ``causal`` for Sq > 1 (the queries are each sequence's last Sq tokens);
        ``lse_out`` [n_seq, Hq, Sq] f32 receives the log-sum-exps.
        ``kivi_arith`` is the CPU arithmetic of KIVI pages and of TurboQuant
        value pages at D = 128 (vq_cache_attend_opts key_scores and
        value_accum): "auto" (integer where the layout allows, the fastest),
        "f32" (float, relative error ~1e-6) or "int8" (the integer paths; error
        bounds in the header at vq_key_scores and vq_value_accum)."""
        if kivi_arith not in _KIVI_ARITH:
            raise InvalidArgumentError(f"argument 'kivi_arith': expected one of {sorted(_KIVI_ARITH)}, got {kivi_arith!r}")
        if out is None:
            ad = adapter(q)
            out = ad.empty(tuple(q.shape), ad.dtype(q), q)
        _vq.cache_attend(self._cache, layer, seq_ids, q, out, scale, causal, lse_out, _KIVI_ARITH[kivi_arith])
        return out

    def fit_transforms(self, layer, seq_ids, k, v, q=None):
        """Fits the transform tables of ``layer`` for the sequences that have
        none yet from their first chunk (vq_cache_fit_transforms): k, v
        [n_seq, Hkv, T, D], q [n_seq, Hq, T, D] (needed when smooth fits its
        scales). Appends nothing; a no-op for sequences that have tables."""
        _vq.cache_fit_transforms(self._cache, layer, seq_ids, k, v, q)

    def transforms(self, seq_id, layer):
        """The transforms of ``layer`` as sequence ``seq_id`` uses them
        (vq_cache_get_transforms): a dict of center_keys, center_values,
        smooth and the tables key_mean, value_mean, key_scale ([Hkv, D] f32
        numpy arrays; 0 / 1 where a transform is off), which
        ``transform_tables`` of another cache takes."""
        tabs = [np.empty((self.n_kv_heads, self.head_dim), np.float32) for _ in range(3)]
        flags = _vq.cache_get_transforms(self._cache, seq_id, layer, *tabs)
        return dict(zip(("center_keys", "center_values", "smooth", "key_mean", "value_mean", "key_scale"),
                        (*flags, *tabs)))

    # ---- persistence (vq_cache_save / vq_cache_load) ----

    def save(self, path=None, seq_id=-1):
        """Writes the whole cache (seq_id -1) or one sequence to ``path``
        atomically; with path None returns the bytes instead."""
        if path is None:
            return _vq.cache_save_bytes(self._cache, seq_id)
        _vq.cache_save(self._cache, seq_id, str(path))
        return None

    @classmethod
    def load(cls, source, *, device="cpu"):
        """A cache from a file path or bytes written by :meth:`save`, with its
        sequences under their saved ids, on ``device``; its sizes
        (n_layers, n_kv_heads, n_q_heads, head_dim, :meth:`config`) are the
        file's."""
        self = cls.__new__(cls)
        self._ctx = _device_ctx(device)
        self._cache = _vq.cache_load(self._ctx, source if isinstance(source, bytes) else str(source))
        self.device, self.method = str(device), "loaded"
        cfg = self.config()
        self.n_layers, self.n_kv_heads = cfg["n_layers"], cfg["n_kv_heads"]
        self.n_q_heads, self.head_dim = cfg["n_q_heads"], cfg["head_dim"]
        return self

    def config(self):
        """The cache's sizes (vq_cache_get_config) as a dict: n_layers,
        n_kv_heads, n_q_heads, head_dim, page_size, capacity_pages (now),
        grow_pages, max_sequences, residual_tokens, window ("f16", "turbo8",
        "turbo1".."turbo7"), sink_tokens. Methods per layer:
        :meth:`layer_config`; transforms: :meth:`transforms`."""
        names = ("n_layers", "n_kv_heads", "n_q_heads", "head_dim", "page_size", "capacity_pages", "grow_pages",
                 "max_sequences", "residual_tokens")
        t = _vq.cache_config(self._cache)
        cfg = dict(zip(names, t))
        cfg["window"] = {v: k for k, v in _WINDOWS.items()}[(t[9], t[10])]
        cfg["sink_tokens"] = t[11]
        return cfg

    def load_sequence(self, source):
        """Adds the one sequence of a sequence file/bytes (save(seq_id=...)) as a
        new sequence of this cache (same config); returns its id."""
        return _vq.cache_seq_load(self._cache, source if isinstance(source, bytes) else str(source))

    # ---- inspection ----

    def layer_config(self, layer):
        """The resolved :class:`LayerConfig` of a layer (tables not returned)."""
        return LayerConfig._from_tuple(_vq.cache_layer_config(self._cache, layer))

    def memory(self):
        """Memory report (vq_cache_memory_report) as a dict: code_bytes,
        param_bytes, residual_bytes, table_bytes, slack_bytes, total_bytes,
        tokens, sequences, bits_per_element, key_bits_per_element,
        value_bits_per_element."""
        return _vq.cache_memory(self._cache)
