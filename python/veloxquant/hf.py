"""veloxquant.hf: a Hugging Face ``transformers`` Cache that stores the KV cache
compressed and runs attention on the compressed bytes.

    import veloxquant.hf
    cache = veloxquant.hf.Cache(model, method="kivi2")
    out = model.generate(ids, past_key_values=cache, max_new_tokens=64)

How it plugs in (transformers' public interfaces only):

* :class:`Cache` subclasses ``transformers.Cache`` with one layer object per
  model layer over one :class:`veloxquant.KVCache`. ``update()`` appends the new
  keys/values (only those) to the compressed cache and returns a handle instead
  of the full key/value tensors, so no dequantized copy is ever made.
* ``attention()`` is registered through ``AttentionInterface`` under the name
  "veloxquant" (and its mask function through ``AttentionMaskInterface``, as
  sdpa's). For a handle it calls ``KVCache.attend`` (``vq_cache_attend``: GQA
  native, causal prefill, the library's CPU or CUDA kernels) and writes the
  output straight into the [B, S, Hq, D] layout the model expects; for plain
  tensors (any other cache) it is transformers' sdpa attention, so the model
  keeps working with other caches.
* Creating a Cache switches the model to the "veloxquant" attention
  (``model.set_attn_implementation``); :func:`uninstall` switches it back.

Limits: a batch of unpadded sequences of equal length (a padded batch raises
:class:`UnsupportedError`); greedy/sampling decoding (beam search raises);
decoder-only Llama-family models (GQA, RoPE) — the model's rotary embedding is
applied by the model before the cache sees the keys.
"""

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache as _HFCache
from transformers.cache_utils import CacheLayerMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._cache import KVCache
from ._errors import UnsupportedError

__all__ = ["Cache", "attention", "install", "uninstall", "ATTENTION_NAME"]

ATTENTION_NAME = "veloxquant"


class _Handle:
    """What ``Cache.update`` returns in place of the key and value tensors: the
    cache and the layer the attention function reads."""

    __slots__ = ("cache", "layer")

    def __init__(self, cache, layer):
        self.cache, self.layer = cache, layer


_last_mask = [None, False]  # the mask object checked last (every layer of a forward gets the same one)


def _is_causal(mask):
    """True when a [B, 1, Sq, Skv] mask (bool, or additive float) is exactly the
    causal mask of the last Sq positions, which the cache applies itself
    (transformers passes one whenever Sq > 1 and Sq != Skv)."""
    if _last_mask[0] is mask:
        return _last_mask[1]
    sq, skv = mask.shape[-2], mask.shape[-1]
    allowed = mask if mask.dtype == torch.bool else mask == 0
    want = torch.ones(sq, skv, dtype=torch.bool, device=mask.device).tril(skv - sq)
    ok = bool(torch.equal(allowed, want.expand_as(allowed)))
    _last_mask[0], _last_mask[1] = mask, ok
    return ok


def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers attention function: over a veloxquant cache for handles,
    sdpa for tensors. query [B, Hq, Sq, D]; returns ([B, Sq, Hq, D], None)."""
    if not isinstance(key, _Handle):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    if attention_mask is not None and not _is_causal(attention_mask):
        raise UnsupportedError("veloxquant.hf.Cache: padded batches are not supported (the attention mask is not "
                               "purely causal); pass sequences of equal length without padding")
    if dropout:
        raise UnsupportedError("veloxquant.hf.Cache: attention dropout (training) is not supported")
    cache = key.cache
    B, Hq, Sq, D = query.shape
    q = query if query.dtype in (torch.float16, torch.float32) else query.to(torch.float16)
    out = torch.empty(B, Sq, Hq, D, dtype=q.dtype, device=q.device)
    # the library writes [B, Hq, Sq, D] through a strided view of the [B, Sq, Hq, D] buffer
    cache.vq.attend(key.layer, cache.seq_ids, q, scale=float(scaling) if scaling else 0.0, causal=Sq > 1,
                    out=out.transpose(1, 2))
    return (out if out.dtype == query.dtype else out.to(query.dtype)), None


def install(model):
    """Registers the "veloxquant" attention and mask functions and switches the
    model to them. Done by :class:`Cache`; harmless to repeat."""
    AttentionInterface.register(ATTENTION_NAME, attention)
    AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)
    if model.config._attn_implementation != ATTENTION_NAME:
        model._veloxquant_previous_attention = model.config._attn_implementation
        model.set_attn_implementation(ATTENTION_NAME)


def uninstall(model):
    """Switches the model back to the attention it had before :func:`install`."""
    prev = getattr(model, "_veloxquant_previous_attention", None)
    if prev is not None:
        model.set_attn_implementation(prev)
        del model._veloxquant_previous_attention


class _Layer(CacheLayerMixin):
    """One model layer of a :class:`Cache` (all layers share its KVCache and
    sequence ids)."""

    is_sliding = False
    is_compileable = False
    is_croppable = True

    def __init__(self, owner, layer):
        super().__init__()
        self.owner, self.layer = owner, layer
        self.n = 0
        self.handle = _Handle(owner, layer)

    def lazy_initialization(self, key_states, value_states):
        self.device, self.dtype = key_states.device, key_states.dtype
        self.owner._ensure_sequences(key_states.shape[0])
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        o = self.owner
        if key_states.shape[0] != len(o.seq_ids):
            raise UnsupportedError(f"veloxquant.hf.Cache: batch of {key_states.shape[0]} sequences, the cache holds "
                                   f"{len(o.seq_ids)}")
        k, v = key_states, value_states
        if o.append_dtype is not None and k.dtype != o.append_dtype:
            k, v = k.to(o.append_dtype), v.to(o.append_dtype)  # the new tokens only (f16 on CUDA)
        o.vq.append(self.layer, o.seq_ids, k, v)
        self.n += key_states.shape[-2]
        return self.handle, self.handle

    def get_mask_sizes(self, query_length):
        return self.n + query_length, 0

    def get_seq_length(self):
        return self.n

    def get_max_length(self):
        return -1

    def reset(self):
        self.n = 0
        self.is_initialized = False

    def reorder_cache(self, beam_idx):
        raise UnsupportedError("veloxquant.hf.Cache: beam search (reorder_cache) is not supported")

    def batch_select_indices(self, indices):
        raise UnsupportedError("veloxquant.hf.Cache: batch_select_indices is not supported")



class Cache(_HFCache):
    """A transformers ``Cache`` whose keys and values live compressed in a
    :class:`veloxquant.KVCache` (one per model), attended by the library's
    kernels. ``method`` is a cache preset ("kivi2", "kivi4", "turbo3",
    "rvq22", "rabitq", "qjl", "f16", ...; ``veloxquant.presets()``), or pass
    ``layers`` (a list of preset names / LayerConfig per layer). Other
    arguments are KVCache's (f16_layers, residual_tokens, page_size,
    capacity_pages, grow_pages, max_sequences); ``residual_tokens`` defaults
    to 128, the newest tokens kept in f16 as in KIVI and transformers'
    QuantizedCache (residual_length=128). The device is the model's."""

    def __init__(self, model, method="kivi2", *, layers=None, f16_layers=None, residual_tokens=128, page_size=0,
                 capacity_pages=0, grow_pages=64, max_sequences=0, device=None):
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        hq = cfg.num_attention_heads
        hkv = getattr(cfg, "num_key_value_heads", None) or hq
        d = getattr(cfg, "head_dim", None) or cfg.hidden_size // hq
        if device is None:
            device = next(model.parameters()).device
        device = torch.device(device)
        self.vq = KVCache(cfg.num_hidden_layers, hkv, d, n_q_heads=hq, method=method, layers=layers,
                          f16_layers=f16_layers, page_size=page_size, capacity_pages=capacity_pages,
                          grow_pages=grow_pages, max_sequences=max_sequences, residual_tokens=residual_tokens,
                          device=str(device))
        # the CUDA cache takes f16 tokens; the CPU one f16 or f32 as they come
        self.append_dtype = torch.float16 if device.type == "cuda" else None
        self.seq_ids = []
        super().__init__(layers=[_Layer(self, i) for i in range(cfg.num_hidden_layers)])
        install(model)

    def __repr__(self):
        return f"veloxquant.hf.Cache({self.vq!r}, sequences={len(self.seq_ids)}, tokens={self.get_seq_length()})"

    def _ensure_sequences(self, batch):
        if not self.seq_ids:
            self.seq_ids = [self.vq.add_sequence() for _ in range(batch)]

    def batch_repeat_interleave(self, repeats):
        """Each sequence repeated ``repeats`` times in place (generate's
        num_return_sequences / expansion): forks, pages shared copy-on-write."""
        self.seq_ids = [s if r == 0 else self.vq.fork(s) for s in self.seq_ids for r in range(repeats)]

    def crop(self, max_length):
        """Keeps the first ``max_length`` tokens (a negative value removes that
        many), as DynamicCache.crop."""
        n = self.get_seq_length()
        keep = n + max_length if max_length < 0 else max_length
        if 0 <= keep < n:
            for s in self.seq_ids:
                self.vq.truncate(s, keep)
            for layer in self.layers:
                layer.n = min(layer.n, keep)

    def reset(self):
        for s in self.seq_ids:
            self.vq.remove(s)
        self.seq_ids = []
        super().reset()

    def memory(self):
        """The KVCache's memory report (bytes, bits per element)."""
        return self.vq.memory()
