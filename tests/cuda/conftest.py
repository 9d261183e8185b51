"""The CUDA suite (``make gpu-check``): every test here is marked ``cuda`` and skips, with the reason, where torch
sees no CUDA device."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).parent
NO_CUDA = 'needs a CUDA device: run `make gpu-check` on a machine with one'


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.cuda)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason=NO_CUDA))


def to_device(value: Any, device: torch.device | str) -> Any:
    """Every tensor of a (nested) input moved to ``device``."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, dict):
        return {key: to_device(item, device) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and not (value and all(isinstance(item, int) for item in value)):
        return type(value)(to_device(item, device) for item in value)
    return value
