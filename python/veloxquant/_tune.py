"""veloxquant.tune(): the tuner of ``vq tune`` (the same C code, tools/tune)."""
import os

from . import _vq
from ._cache import _KIVI_ARITH
from ._errors import InvalidArgumentError

# The default calibration text of `vq tune`, relative to the working directory
# (the repository's root).
DEFAULT_TEXT = "data/pride_and_prejudice.txt"


class TunedProfile(bytes):
    """The bytes of the profile file ``vq tune`` writes for the same arguments:
    pass it as ``KVCache(profile=...)`` or ``hf.Cache(profile=...)``, or save it
    (``save(path)``) for ``vq ... --kv FILE``. What the tuner measured comes
    with it:

    - ``kv``: the plan as a ``--kv`` string;
    - ``bits``, ``predicted_kl``, ``measured_kl``: the profile's plan's bits
      per element (all bytes counted, at ``bits_ctx`` tokens), its predicted
      KL and the KL measured on the calibration windows;
    - ``layers``: per layer ``(keys, keys_kl, values, values_kl)``, the chosen
      candidates and the KL measured with that part at its pick and every
      other part at the base (``base``: "cheapest", every other part at its
      cheapest candidate; "f16", every other part f16, so the KL the part
      costs alone);
    - ``base``, ``base_kl``: the plan the losses were measured around
      ("cheapest" or "f16") and its KL (the cheapest plan's; 0 for f16); a
      plan's predicted KL is ``base_kl`` plus each part's loss at its pick
      less ``base_kl``;
    - ``keys``, ``values``: the candidates as ``(name, bits)``, f16 first
      (with ``base="cheapest"`` f16 is picked only where named);
    - ``checks``: ``(bits, predicted_kl, measured_kl)`` of the allocation's
      plan and of the plans for budgets 0.5 and 0.25 bits around it;
    - ``searched``, ``search_rounds``, ``search_runs``, ``chose_search``: with
      ``search``, the search's plan as ``(bits, predicted_kl, measured_kl)``,
      the upgrades it kept and the runs it took, and whether it is the
      profile's plan (its measured KL below the allocation's);
    - ``min_bits`` (the cheapest plan), ``tokens``, ``ctx``, ``n_windows``,
      ``bits_ctx``, ``measured`` (False when the losses came from
      ``measurements``) and ``seconds``.
    """

    def save(self, path):
        """Writes the profile file (``vq --kv FILE``, ``KVCache(profile=path)``)."""
        with open(path, "wb") as f:
            f.write(self)


def tune(model, bits, text=None, *, tokens=1024, ctx=512, bits_ctx=0, window="", keys=None, values=None,
         measurements=None, base="f16", residual=0, sink=0, no_center=False, center_keys=False, smooth=False,
         batch=64, threads=0, kivi_arith="auto", search=0, progress=None):
    """A per-layer plan of key and value methods for a bit budget, chosen from
    what each layer's keys and values cost the model: ``vq tune`` from Python,
    over the same C code, so the same arguments give the same profile bytes.

    The keywords are ``vq tune``'s flags (``--bits-ctx`` is ``bits_ctx``, ...).

    Args:
        model: path of the GGUF model (``-m``; the runtime of ``vq``: SmolLM2
            and Gemma 3 GGUF files).
        bits: the budget in bits per element, keys and values, all bytes
            counted as ``KVCache.memory()`` counts them, at ``bits_ctx`` tokens.
        text: path of the calibration text, whose last ``tokens`` tokens are
            read; None reads ``data/pride_and_prejudice.txt`` relative to the
            working directory, as ``vq tune`` does.
        tokens: calibration tokens (64 .. 2**20).
        ctx: window length of the runs and of the bit count (even, 64 ..
            ``tokens``).
        bits_ctx: tokens of the cache whose bits meet ``bits`` (0 = ``ctx``;
            the length of the windows you score, e.g. 2048).
        window: every plan's residual window as ``--kv`` suffixes, e.g.
            ``"+w8+r64"`` ("" = f16, ``residual`` tokens).
        keys, values: comma lists of presets whose key (value) methods are the
            candidates, optionally refined (``"kivimix-turbo2:wide20"``,
            ``"turbo2+vs16"``); f16 is one too where the list names it ("f16")
            or with ``base="f16"``; None = ``vq tune``'s defaults, "" = f16
            only.
        measurements: path of a sensitivities file: read when it exists (same
            model, layers, candidates and base; only the checks run), else
            measured and written there.
        base: the plan each part's candidates are measured around (``--base``):
            "cheapest" (every other part at its cheapest candidate, where the
            plan will be) or "f16" (every other part f16, as the shipped
            measurement files were measured).
        residual, sink, no_center, center_keys, smooth: the residual window's
            tokens, the f16 sink tokens and the exact transforms of every run,
            which the profile carries.
        batch: prefill chunk in tokens. threads: CPU threads (0 = all cores).
        kivi_arith: "auto", "f32" or "int8" (KIVI pages' arithmetic).
        search: 0, or K (1 .. 8) to build a second plan by measured upgrades
            (``--search``): from the cheapest plan, each round runs the plan
            with each of the K best-ranked upgrades of the keys and of the
            values and keeps the one that lowers the KL most per bit; the
            profile is the plan of the two with the lower measured KL.
        progress: None, or a callable ``progress(done, total, step)`` called
            before each run of the model (``step`` names it, e.g. "layer 3
            keys kivi2"); an exception it raises stops the tuner and comes
            out of ``tune``.

    Returns:
        a ``TunedProfile``: the profile's bytes, with what was measured.

    Raises:
        InvalidArgumentError (a ValueError) naming the value: a model that
        does not load, a text that cannot be read or is shorter than
        ``tokens``, a budget below the cheapest plan, an unknown candidate,
        window suffix or base, a measurements file for other layers,
        candidates or base, an option out of range; FileIOError (an OSError) when
        ``measurements`` cannot be written.

    The model runs over ``tokens`` tokens (L layers), with base "cheapest"
    2 + L x (candidates besides each part's cheapest) + 5 times (SmolLM2-135M
    with the default candidates: 217 runs, minutes on 2 cores at the default
    1024 tokens), with base "f16" 1 + L x (candidates besides f16) + 5 times
    (276 runs), from a ``measurements`` file 1 + 5 times; a search adds up to
    2K runs a round, one round for each upgrade it keeps.
    """
    path = DEFAULT_TEXT if text is None else os.fspath(text)
    if not isinstance(model, (str, os.PathLike)):
        raise InvalidArgumentError(f"argument 'model': {model!r}, expected the path of a GGUF model")
    model = os.fspath(model)
    if not os.path.isfile(model):
        raise InvalidArgumentError(f"argument 'model': '{model}' is not a file (a GGUF model)")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InvalidArgumentError(f"argument 'text': cannot read '{path}' ({e.strerror})") from None
    if kivi_arith not in _KIVI_ARITH:
        raise InvalidArgumentError(f"argument 'kivi_arith': {kivi_arith!r}, expected one of {list(_KIVI_ARITH)}")
    if measurements is not None:
        measurements = os.fspath(measurements)
    ctx_capsule = _vq.ctx_create(_vq.BACKEND_CPU, 0, None, int(threads))
    r = _vq.tune(ctx_capsule, model, data, path, float(bits), int(tokens), int(ctx), int(bits_ctx), window, keys,
                 values, measurements, int(residual), int(sink), bool(no_center), bool(center_keys), bool(smooth),
                 int(batch), _KIVI_ARITH[kivi_arith], progress, base, int(search))
    out = TunedProfile(r.pop("profile"))
    out.bits, out.predicted_kl, out.measured_kl = r["searched"] if r["chose_search"] else r["checks"][0]
    out.budget = float(bits)
    for k, v in r.items():
        setattr(out, k, v)
    return out
