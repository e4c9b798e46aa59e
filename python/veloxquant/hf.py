"""veloxquant.hf: a Hugging Face ``transformers`` Cache that stores the KV cache
compressed and runs attention on the compressed bytes.

    import veloxquant.hf
    cache = veloxquant.hf.Cache(model, method="kivi2", sink_tokens=4, center_keys=True, smooth=True)
    out = model.generate(ids, **veloxquant.hf.cache_kwargs(model, cache), max_new_tokens=64)

(:func:`cache_kwargs` is ``{"cache": cache}`` where the installed transformers
takes ``cache=``, else ``{"past_key_values": cache}``, the older name.)

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

import inspect
import json
import os

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache as _HFCache
from transformers.cache_utils import CacheLayerMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._cache import KVCache, _recipe
from ._errors import UnsupportedError

__all__ = ["Cache", "attention", "install", "uninstall", "gguf_tokenizer", "token_nll", "cache_kwargs",
           "ATTENTION_NAME"]

ATTENTION_NAME = "veloxquant"


class _Handle:
    """What ``Cache.update`` returns in place of the key and value tensors: the
    cache and the layer the attention function reads."""

    __slots__ = ("cache", "layer")

    def __init__(self, cache, layer):
        self.cache, self.layer = cache, layer


def cache_kwargs(model, cache):
    """The keyword argument that hands ``cache`` to ``model(...)`` and
    ``model.generate(...)``: ``cache=`` where the model's forward takes it
    (the current transformers name), else ``past_key_values=`` (older
    transformers)."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        params = {}
    return {"cache" if "cache" in params else "past_key_values": cache}


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
    layer = cache.layers[key.layer]
    if layer.pending is not None:  # smooth: the first chunk's key scales need its queries
        k, v = layer.pending
        layer.pending = None
        cache.vq.fit_transforms(key.layer, cache.seq_ids, k, v, q)
        cache.vq.append(key.layer, cache.seq_ids, k, v)
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
        self.pending = None  # smooth: the first chunk, appended by attention() once its queries are known

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
        want = k.dtype if k.dtype in (torch.float16, torch.float32) else o.other_dtype
        if k.dtype != want:
            k, v = k.to(want), v.to(want)  # the new tokens only: bf16 -> f16 on CUDA, -> f32 on a CPU
        if o.smooth and self.n == 0:
            self.pending = (k, v)
        else:
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
        self.pending = None
        self.is_initialized = False

    def reorder_cache(self, beam_idx):
        raise UnsupportedError("veloxquant.hf.Cache: beam search (reorder_cache) is not supported")

    def batch_select_indices(self, indices):
        raise UnsupportedError("veloxquant.hf.Cache: batch_select_indices is not supported")



class Cache(_HFCache):
    """A transformers ``Cache`` whose keys and values live compressed in a
    :class:`veloxquant.KVCache` (one per model), attended by the library's
    kernels. ``method`` is a cache preset: one named by what it buys
    ("quality-4bit", "balanced-3bit", "compact-2.5bit": with its sink,
    transforms and residual window) or a method ("kivi2", "kivi4", "turbo3",
    "rvq22", "rabitq", "qjl", "f16", ...; ``veloxquant.presets()``), or pass
    ``layers`` (a list of preset names / LayerConfig per layer). Other
    arguments are KVCache's (f16_layers, residual_tokens, page_size,
    capacity_pages, grow_pages, max_sequences, sink_tokens, center_keys,
    center_values, smooth, transform_tables: the sink tokens and exact
    transforms); ``residual_tokens`` defaults to 128 (the preset's
    with one named by what it buys), the newest
    tokens kept in f16 as in KIVI and transformers' QuantizedCache
    (residual_length=128). With ``smooth`` a layer's first chunk is appended
    by the attention call, which has the queries its key scales are fitted
    from. ``profile`` (a profile file's path or bytes, ``vq profile``) gives
    the methods, sliding windows and residual window instead: method,
    layers, f16_layers and residual_tokens are then left unset. The device
    is the model's. Pass it with :func:`cache_kwargs`."""

    def __init__(self, model, method=None, *, layers=None, f16_layers=None, residual_tokens=None, page_size=0,
                 capacity_pages=0, grow_pages=64, max_sequences=0, profile=None, device=None, sink_tokens=0,
                 center_keys=False, center_values=False, smooth=False, transform_tables=None):
        if profile is None:
            method = "kivi2" if method is None and layers is None else method
            # a preset named by what it buys brings its own residual window (0 here: the preset's)
            recipe = layers is None and _recipe(method) is not None
            residual_tokens = (0 if recipe else 128) if residual_tokens is None else residual_tokens
        cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        hq = cfg.num_attention_heads
        hkv = getattr(cfg, "num_key_value_heads", None) or hq
        d = getattr(cfg, "head_dim", None) or cfg.hidden_size // hq
        if device is None:
            device = next(model.parameters()).device
        device = torch.device(device)
        self.vq = KVCache(cfg.num_hidden_layers, hkv, d, n_q_heads=hq, method=method, layers=layers,
                          f16_layers=f16_layers, page_size=page_size, capacity_pages=capacity_pages,
                          grow_pages=grow_pages, max_sequences=max_sequences, residual_tokens=residual_tokens or 0,
                          profile=profile, device=str(device), sink_tokens=sink_tokens, center_keys=center_keys,
                          center_values=center_values, smooth=smooth, transform_tables=transform_tables)
        # smooth fits key scales from a first chunk's queries unless every layer's are given
        self.smooth = self.vq.smooth and (transform_tables is None or
                                          any((t or {}).get("key_scale") is None for t in transform_tables))
        # tokens go in f16 or f32 as they come; other dtypes (a bf16 model's) as f16 on CUDA (exact
        # within f16's range, half the bytes of f32; the cache stores f16) and as f32 on a CPU
        self.other_dtype = torch.float16 if device.type == "cuda" else torch.float32
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
                layer.n = min(layer.n, keep)  # keep 0: the library forgets fitted tables, the next chunk refits

    def reset(self):
        for s in self.seq_ids:
            self.vq.remove(s)
        self.seq_ids = []
        super().reset()

    def memory(self):
        """The KVCache's memory report (bytes, bits per element)."""
        return self.vq.memory()


# tokenizer.ggml.pre values whose original tokenizer splits every digit into
# its own piece (Digits(individual_digits=True) before ByteLevel): llama.cpp's
# list, and the C runtime's (tools/model/tokenizer.c)
_DIGIT_SPLIT_PRE = ("smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva")


def gguf_tokenizer(path):
    """transformers' tokenizer of the GGUF file ``path``, with the digit split
    of the model's original tokenizer restored.

    transformers (5.x) rebuilds a GGUF file's BPE tokenizer with a plain
    ByteLevel pre-tokenizer and ignores ``tokenizer.ggml.pre``; for
    "smollm" (SmolLM2) and the other digit-splitting pre-tokenizers of
    llama.cpp's list the original tokenizer first splits every digit off
    (``Digits(individual_digits=True)``), so any text with numbers tokenizes
    differently (the shipped novel: 179605 tokens instead of 179510; the C
    runtime, llama.cpp and the original tokenizer give 179510). This puts the
    digit split back when the file asks for it and the tokenizer lacks it."""
    from gguf import GGUFReader
    from tokenizers import pre_tokenizers
    from transformers import AutoTokenizer
    path = os.fspath(path)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path) or ".", gguf_file=os.path.basename(path))
    field = GGUFReader(path).fields.get("tokenizer.ggml.pre")
    pre = bytes(field.parts[field.data[0]]).decode("utf-8") if field is not None else ""
    backend = getattr(tok, "backend_tokenizer", None)
    if pre in _DIGIT_SPLIT_PRE and backend is not None:
        current = json.loads(backend.to_str()).get("pre_tokenizer") or {}
        if "Digits" not in json.dumps(current):
            steps = [pre_tokenizers.Digits(individual_digits=True)]
            if backend.pre_tokenizer is not None:
                steps.append(backend.pre_tokenizer)
            backend.pre_tokenizer = pre_tokenizers.Sequence(steps)
    return tok


def token_nll(model, ids, method="f16", *, ctx=512, windows=0, chunk=256, **cache_options):
    """Per-token negative log-likelihoods of ``ids`` (a 1-D sequence of token
    ids) under the protocol of the C runtime's ``vq perplexity``
    (llama-perplexity's): non-overlapping windows of ``ctx`` tokens from the
    start (at most ``windows``, 0 = all), each from an empty cache, prefilled
    in chunks of ``chunk`` tokens (``vq perplexity --batch``, 256); the
    second half of each window is scored (the logits of positions
    ctx/2 - 1 .. ctx - 2 predict tokens ctx/2 .. ctx - 1).

    ``method`` is a :class:`Cache` preset, with ``cache_options`` passed to
    :class:`Cache`, or None for transformers' own DynamicCache. Returns a
    float64 tensor [windows, ctx / 2]; perplexity is ``exp(nll.mean())``.
    ``vq perplexity --residual N`` is ``residual_tokens=N`` here (its
    default 0; Cache's default is 128); its keys and values are centered
    unless ``--no-center``: ``center_keys=True, center_values=True`` here
    (``--center-keys``: center_keys only), ``--smooth`` is ``smooth=True``
    and ``--sink N`` is ``sink_tokens=N``."""
    from transformers import DynamicCache
    ids = torch.as_tensor(ids).reshape(-1)
    if ctx < 2 or ctx % 2 or chunk < 1:
        raise ValueError(f"token_nll: ctx must be even and >= 2, chunk >= 1; got ctx {ctx}, chunk {chunk}")
    nw = ids.numel() // ctx
    if windows:
        nw = min(nw, windows)
    if nw == 0:
        raise ValueError(f"token_nll: {ids.numel()} tokens are fewer than one window of {ctx}")
    first = ctx // 2 - 1
    out = torch.empty(nw, ctx // 2, dtype=torch.float64)
    device = next(model.parameters()).device
    with torch.no_grad():
        for w in range(nw):
            win = ids[w * ctx:(w + 1) * ctx].to(device)
            cache = Cache(model, method=method, **cache_options) if method is not None else DynamicCache()
            for p0 in range(0, ctx, chunk):
                t = min(chunk, ctx - p0)
                lo = max(first, p0)
                n_out = p0 + t - lo if lo < p0 + t else 0
                logits = model(win[None, p0:p0 + t], **cache_kwargs(model, cache), logits_to_keep=max(n_out, 1)).logits
                if n_out == 0:
                    continue
                n_sc = min(n_out, ctx - 1 - lo)  # the last position's logits predict nothing in the window
                lp = torch.log_softmax(logits[0, -n_out:][:n_sc].double(), dim=-1)
                target = win[lo + 1:lo + 1 + n_sc]
                out[w, lo - first:lo - first + n_sc] = -lp.gather(1, target[:, None])[:, 0].cpu()
    return out
