"""Fixtures shared by the Python tests: the array frameworks under test and
helpers that move test data between them."""

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the NumPy tests still run
    torch = None

FRAMEWORKS = ["numpy"] + (["torch"] if torch is not None else [])


class Framework:
    """Moves float64/NumPy test data to one framework and back."""

    def __init__(self, name, device="cpu"):
        self.name, self.device = name, device

    def __call__(self, a):
        a = np.ascontiguousarray(a)
        if self.name == "numpy":
            return a
        if a.dtype == np.uint16:
            return torch.from_numpy(a.view(np.int16)).view(torch.uint16).to(self.device)
        if a.dtype == np.uint32:
            return torch.from_numpy(a.view(np.int32)).view(torch.uint32).to(self.device)
        return torch.from_numpy(a).to(self.device)

    def empty_poisoned(self, shape, dtype):
        """An output buffer filled with 0xFF bytes (NaN for floats)."""
        a = np.full(int(np.prod(shape)) * np.dtype(dtype).itemsize, 0xFF, np.uint8).view(dtype).reshape(shape)
        return self(a)

    def is_native(self, x):
        return isinstance(x, np.ndarray) if self.name == "numpy" else isinstance(x, torch.Tensor)


def np_(x):
    """Any test result as NumPy (float results as float64)."""
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype in (torch.uint16, torch.uint32):
            x = x.view(torch.int16 if x.dtype == torch.uint16 else torch.int32).numpy().view(
                np.uint16 if x.dtype == torch.uint16 else np.uint32)
        elif x.dtype == torch.bfloat16:
            x = x.float().numpy()
        else:
            x = x.numpy()
    return np.asarray(x)


@pytest.fixture(params=FRAMEWORKS)
def fw(request):
    return Framework(request.param)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
