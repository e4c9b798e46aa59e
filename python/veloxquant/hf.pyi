# Type stubs of veloxquant.hf (the transformers integration).
import os
from typing import Any, Optional, Sequence, Tuple, Union

import torch
from transformers.cache_utils import Cache as _HFCache

from . import KVCache, LayerConfig

ATTENTION_NAME: str

def attention(module: torch.nn.Module, query: torch.Tensor, key: Any, value: Any,
              attention_mask: Optional[torch.Tensor], scaling: Optional[float] = None, dropout: float = 0.0,
              **kwargs: Any) -> Tuple[torch.Tensor, None]: ...
def install(model: Any) -> None: ...
def uninstall(model: Any) -> None: ...

class Cache(_HFCache):
    vq: KVCache
    seq_ids: list
    def __init__(self, model: Any, method: Optional[str] = None, *,
                 layers: Optional[Sequence[Union[str, LayerConfig]]] = None,
                 f16_layers: Optional[Sequence[int]] = None, residual_tokens: Optional[int] = None,
                 page_size: int = 0, capacity_pages: int = 0, grow_pages: int = 64, max_sequences: int = 0,
                 profile: Union[str, bytes, None] = None, device: Any = None) -> None: ...
    def memory(self) -> dict: ...

def gguf_tokenizer(path: Union[str, "os.PathLike[str]"]) -> Any: ...
def token_nll(model: Any, ids: Any, method: Optional[str] = "f16", *, ctx: int = 512, windows: int = 0,
              chunk: int = 256, **cache_options: Any) -> torch.Tensor: ...
