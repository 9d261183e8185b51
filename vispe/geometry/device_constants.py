"""Small constant tensors (a grid's size, a box's corner signs) on the device that needs them, made once.

``torch.tensor(values, device='cuda')`` or ``constant.to('cuda')`` in a forward copies from pageable host memory,
and such a copy makes the host wait for the GPU's stream, every call. :func:`device_constant` keeps one copy per
(values, dtype, device), so only a forward that meets new values pays for the copy; while torch.compile or
torch.export trace a model the values become constants of the graph instead. :func:`host_to_device` moves data
that a forward receives on the host (cameras, depth maps of the data samples) through pinned memory, a copy the
host does not wait for.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from vispe.geometry.checks import tracing

__all__ = ['device_constant', 'host_to_device']

MAX_CONSTANTS = 512
_constants: dict[tuple, torch.Tensor] = {}


def _key(values: Sequence | torch.Tensor) -> tuple:
    """Nested numbers as a tuple; a (module-level, CPU) tensor by its identity and version."""
    if isinstance(values, torch.Tensor):
        return ('tensor', id(values), values._version)
    return tuple(_key(value) if isinstance(value, (list, tuple)) else value for value in values)


def device_constant(values: Sequence | torch.Tensor, like: torch.Tensor,
                    dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values`` (nested numbers, or a module-level CPU tensor, keyed by its identity) as a tensor of ``dtype``
    (default ``like``'s) on ``like``'s device, from a cache that holds the latest :data:`MAX_CONSTANTS` of them. Treat the result as read-only."""
    dtype = dtype or like.dtype
    if tracing():
        return torch.as_tensor(values, dtype=dtype).to(like.device)
    key = (_key(values), dtype, like.device)
    found = _constants.get(key)
    if found is None:
        if len(_constants) >= MAX_CONSTANTS:
            _constants.pop(next(iter(_constants)))
        with torch.inference_mode(False):  # a normal tensor, usable inside and outside inference mode alike
            found = _constants[key] = torch.as_tensor(values, dtype=dtype).to(like.device)
    return found


def host_to_device(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """``tensor`` on ``device``; from the host to a GPU through pinned memory without waiting (``non_blocking``),
    other moves as ``Tensor.to``."""
    device = torch.device(device)
    if tensor.device.type == 'cpu' and device.type == 'cuda' and not tracing():
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
