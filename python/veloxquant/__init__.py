"""veloxquant: compressed KV caches and attention directly over the compressed
bytes, for NumPy, PyTorch (CPU and CUDA) and Hugging Face transformers.

The kernel functions keep the names, argument order and defaults of the
original MLX package (``veloxquant_mlx.metal``; the ``_metal`` suffix dropped)
and take any array with ``__dlpack__``. ``KVCache`` is the paged,
multi-sequence compressed cache of the C library; ``veloxquant.hf`` plugs it
into ``transformers``. See docs/PYTHON.md for the name table.
"""

from ._errors import (VeloxQuantError, InvalidArgumentError, UnsupportedError, BackendUnavailableError,
                      MetalUnavailableError, OutOfMemoryError, DeviceError, FileIOError, CorruptDataError)
from ._runtime import set_num_threads, get_num_threads, isa
from ._keys import (F16Keys, TurboKeys, EncodedVector, TurboRVQKeys, KIVIKeys, RaBitQKeys, QJLKeys, VecInferKeys,
                    CommVQKeys, F16Values, KIVIValues, CodebookValues, TurboValues)
from ._cache import KVCache, LayerConfig, presets, make_profile
from ._quantizers import (KIVIQuantizer, TurboQuantizer, RaBitQQuantizer, QJLQuantizer, VecInferQuantizer,
                          CommVQQuantizer)
from ._keys import F16Keys as PlainKeys, F16Values as PlainValues  # earlier names, deprecated
from ._keys import KIVIKeys as AffineKeys, KIVIValues as AffineValues, VecInferKeys as PQKeys  # likewise
from ._kernels import *  # noqa: F401,F403  (the original Metal API's functions and the rest of the C API)
from ._kernels import __all__ as _kernel_names

__version__ = "0.1.0"

__all__ = [
    "VeloxQuantError", "InvalidArgumentError", "UnsupportedError", "BackendUnavailableError",
    "MetalUnavailableError", "OutOfMemoryError", "DeviceError", "FileIOError", "CorruptDataError",
    "set_num_threads", "get_num_threads", "isa",
    "F16Keys", "TurboKeys", "EncodedVector", "TurboRVQKeys", "KIVIKeys", "RaBitQKeys", "QJLKeys", "VecInferKeys",
    "CommVQKeys", "F16Values", "KIVIValues", "CodebookValues", "TurboValues",
    "KVCache", "LayerConfig", "presets", "make_profile",
    "KIVIQuantizer", "TurboQuantizer", "RaBitQQuantizer", "QJLQuantizer", "VecInferQuantizer", "CommVQQuantizer",
    "PlainKeys", "PlainValues", "AffineKeys", "AffineValues", "PQKeys",
] + list(_kernel_names)


def __getattr__(name):
    # veloxquant.hf imports torch and transformers: only when asked for
    if name in ("hf", "patch_transformers_for_fused_sdpa"):
        import importlib
        hf = importlib.import_module(".hf", __name__)
        return hf if name == "hf" else hf.install
    raise AttributeError(f"module 'veloxquant' has no attribute {name!r}")
