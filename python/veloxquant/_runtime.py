"""Contexts and array frameworks: the glue between Python arrays and vq_ctx.

* One C context per (thread, device type, device ordinal, stream): a context
  may be used by one thread at a time (include/veloxquant.h), and a CUDA
  context is bound to the stream it enqueues on, so a torch CUDA tensor runs on
  torch's current stream.
* An *adapter* per array type allocates outputs in the caller's framework, on
  the input's device: NumPy in, NumPy out; torch in, torch out (same device);
  CuPy in, CuPy out. Other DLPack producers (JAX, ...) are read zero-copy on
  the CPU and get NumPy outputs (JAX arrays are immutable, so the library
  cannot write into them; ``jax.numpy.asarray(out)`` takes them over).
"""

import threading

import numpy as np

from . import _vq
from ._errors import BY_STATUS, InvalidArgumentError

_vq._set_error_classes(BY_STATUS)

CPU = _vq.BACKEND_CPU    # == kDLCPU
CUDA = _vq.BACKEND_CUDA  # == kDLCUDA

_local = threading.local()
_num_threads = 0  # 0 = all online cores


def set_num_threads(n):
    """Sets the number of CPU threads (caller included) of the contexts created
    from now on, in every thread; 0 means all online cores. Existing contexts of
    the calling thread are dropped so the next call uses the new count."""
    global _num_threads
    if int(n) < 0:
        raise InvalidArgumentError(f"set_num_threads: argument 'n' is {n}, expected >= 0")
    _num_threads = int(n)
    _local.__dict__.clear()


def get_num_threads():
    """The CPU thread count of this thread's CPU context."""
    return _vq.ctx_info(cpu_ctx())[2]


def cpu_ctx():
    """This thread's CPU context (created on first use)."""
    try:
        return _local.cpu
    except AttributeError:
        _local.cpu = _vq.ctx_create(CPU, 0, None, _num_threads)
        _local.cpu_threads = _num_threads
        return _local.cpu


def device_ctx(device_type, device_id, stream):
    """This thread's context for a device and stream (an int cudaStream_t, or None
    for the legacy default stream)."""
    if device_type == CPU:
        return cpu_ctx()
    d = _local.__dict__.setdefault("dev", {})
    key = (device_type, device_id, stream)
    c = d.get(key)
    if c is None:
        if device_type != CUDA:
            raise InvalidArgumentError(f"device type {device_type} (DLPack) is not supported: CPU or CUDA only")
        c = d[key] = _vq.ctx_create(CUDA, device_id, stream, 0)
    return c


def isa():
    """Name of the CPU kernel set in use: 'scalar', 'avx2', 'avx512' or 'neon'."""
    return _vq.ctx_info(cpu_ctx())[1]


# ---- adapters -----------------------------------------------------------------

_NP = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8, "uint16": np.uint16,
       "int32": np.int32, "uint32": np.uint32, "float64": np.float64, "int64": np.int64}


class NumpyAdapter:
    name = "numpy"

    @staticmethod
    def ctx(x):
        try:
            return _local.cpu
        except AttributeError:
            return cpu_ctx()

    @staticmethod
    def empty(shape, dtype, like):
        return np.empty(shape, _NP[dtype])

    @staticmethod
    def asarray(values, dtype, like):
        return np.asarray(values, _NP[dtype])

    @staticmethod
    def dtype(x):
        return x.dtype.name


class TorchAdapter:
    name = "torch"

    def __init__(self, torch):
        self.torch = torch
        self.dt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                   "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
                   "float64": torch.float64}
        # uint16/uint32 tensors exist from torch 2.3 (few ops, but allocation and DLPack work)
        for n in ("uint16", "uint32"):
            if hasattr(torch, n):
                self.dt[n] = getattr(torch, n)
        self.names = {v: k for k, v in self.dt.items()}
        # torch.Tensor.__dlpack__ is Python with checks costing microseconds; the
        # exporter it ends in gives the same capsule.
        to_dlpack = getattr(torch._C, "_to_dlpack", None)
        if to_dlpack is not None:
            _vq._set_exporter(torch.Tensor, to_dlpack)

    def ctx(self, x):
        if x.is_cpu:  # a fast property; x.device builds an object
            try:
                return _local.cpu
            except AttributeError:
                return cpu_ctx()
        if x.device.type != "cuda":
            raise InvalidArgumentError(f"tensors on '{x.device.type}' are not supported: CPU or CUDA only")
        idx = x.device.index if x.device.index is not None else self.torch.cuda.current_device()
        return device_ctx(CUDA, idx, self.torch.cuda.current_stream(x.device).cuda_stream)

    def empty(self, shape, dtype, like):
        try:
            dt = self.dt[dtype]
        except KeyError:
            raise InvalidArgumentError(f"this torch has no {dtype} tensors") from None
        return self.torch.empty(shape, dtype=dt, device=like.device)

    def asarray(self, values, dtype, like):
        return self.torch.tensor(values, dtype=self.dt[dtype], device=like.device)

    def dtype(self, x):
        return self.names.get(x.dtype, str(x.dtype))


class CupyAdapter:
    name = "cupy"

    def __init__(self, cupy):
        self.cupy = cupy

    def ctx(self, x):
        return device_ctx(CUDA, x.device.id, self.cupy.cuda.get_current_stream().ptr or None)

    def empty(self, shape, dtype, like):
        with like.device:
            return self.cupy.empty(shape, _NP[dtype])

    def asarray(self, values, dtype, like):
        with like.device:
            return self.cupy.asarray(values, _NP[dtype])

    @staticmethod
    def dtype(x):
        return x.dtype.name


class GenericAdapter(NumpyAdapter):
    """Any other DLPack producer (JAX, ...): read through __dlpack__ on the CPU,
    outputs allocated by NumPy."""

    name = "generic"

    @staticmethod
    def ctx(x):
        dev = x.__dlpack_device__()
        if int(dev[0]) != CPU:
            raise InvalidArgumentError("arrays of this framework are supported on the CPU only; "
                                       "pass torch or CuPy arrays for CUDA")
        return cpu_ctx()

    @staticmethod
    def dtype(x):
        return str(np.dtype(x.dtype))


_ADAPTERS = {np.ndarray: NumpyAdapter}


def adapter(x):
    """The adapter of x's type (cached per type)."""
    a = _ADAPTERS.get(type(x))
    if a is not None:
        return a
    return _new_adapter(x)


def _new_adapter(x):
    t = type(x)
    if isinstance(x, np.ndarray):
        a = NumpyAdapter
    elif not hasattr(x, "__dlpack__"):
        raise InvalidArgumentError(
            f"expected an array with __dlpack__ (NumPy, PyTorch, CuPy, JAX), got {t.__module__}.{t.__name__}")
    else:
        root = t.__module__.split(".")[0]
        if root == "torch":
            import torch
            a = _ADAPTERS.get(torch.Tensor) or TorchAdapter(torch)
        elif root == "cupy":
            import cupy
            a = CupyAdapter(cupy)
        else:
            a = GenericAdapter
    _ADAPTERS[t] = a
    return a
