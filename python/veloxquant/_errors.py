"""The exceptions of veloxquant: one class per vq_status of the C library.

Every failing call raises a subclass of :class:`VeloxQuantError` whose message is
the C library's own sentence (``vq_ctx_last_error``): it names the argument and
the expected vs actual value. Invalid arguments are also ``ValueError``s, so
code that catches ``ValueError`` keeps working.
"""

__all__ = [
    "VeloxQuantError", "InvalidArgumentError", "UnsupportedError", "BackendUnavailableError",
    "MetalUnavailableError", "OutOfMemoryError", "DeviceError", "FileIOError", "CorruptDataError",
]


class VeloxQuantError(Exception):
    """Base class of every error the library reports. ``status`` is the C
    ``vq_status`` name (e.g. ``"VQ_ERR_INVALID_ARGUMENT"``)."""

    status = "VQ_ERR_UNKNOWN"


class InvalidArgumentError(VeloxQuantError, ValueError):
    """VQ_ERR_INVALID_ARGUMENT: a wrong rank, shape, dtype or device, shapes that
    disagree, a scalar out of range, or an object that is not an array."""

    status = "VQ_ERR_INVALID_ARGUMENT"


class UnsupportedError(VeloxQuantError, ValueError):
    """VQ_ERR_UNSUPPORTED: valid, but outside what this backend handles
    (e.g. D > 256 in attention, non-row-major strides)."""

    status = "VQ_ERR_UNSUPPORTED"


class BackendUnavailableError(VeloxQuantError, RuntimeError):
    """VQ_ERR_BACKEND_UNAVAILABLE: the backend is not compiled in or no device is
    present (``MetalUnavailableError`` in the original Metal API)."""

    status = "VQ_ERR_BACKEND_UNAVAILABLE"


#: The original Metal API's name for :class:`BackendUnavailableError`.
MetalUnavailableError = BackendUnavailableError


class OutOfMemoryError(VeloxQuantError, MemoryError):
    """VQ_ERR_OUT_OF_MEMORY: an allocation failed, or a fixed-capacity cache is full."""

    status = "VQ_ERR_OUT_OF_MEMORY"


class DeviceError(VeloxQuantError, RuntimeError):
    """VQ_ERR_DEVICE: a CUDA runtime failure; the message names the CUDA error."""

    status = "VQ_ERR_DEVICE"


class FileIOError(VeloxQuantError, OSError):
    """VQ_ERR_IO: reading or writing a file failed."""

    status = "VQ_ERR_IO"


class CorruptDataError(VeloxQuantError, ValueError):
    """VQ_ERR_CORRUPT_DATA: a file or buffer failed validation."""

    status = "VQ_ERR_CORRUPT_DATA"


#: Indexed by the numeric vq_status (VQ_OK = 0 has no class).
BY_STATUS = (None, InvalidArgumentError, UnsupportedError, BackendUnavailableError, OutOfMemoryError,
             DeviceError, FileIOError, CorruptDataError)
