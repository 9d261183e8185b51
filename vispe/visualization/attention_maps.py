"""Attention maps for one query: per head or averaged, attention rollout, drawn over the image."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F


def query_index(query: str, grid_size: Sequence[int], num_prefix_tokens: int) -> int:
    """Token index of a query: 'cls' (the first prefix token), 'center', or 'ROW,COL' of a patch."""
    height, width = grid_size
    if query == 'cls':
        if num_prefix_tokens == 0:
            raise ValueError("query 'cls' needs a class token; the model has no prefix tokens.")
        return 0
    if query == 'center':
        return num_prefix_tokens + (height // 2) * width + width // 2
    try:
        row, col = (int(part) for part in query.split(','))
    except ValueError:
        raise ValueError(f"query must be 'cls', 'center' or 'ROW,COL'; got {query!r}.") from None
    if not (0 <= row < height and 0 <= col < width):
        raise ValueError(f'query patch ({row}, {col}) is outside the {height}x{width} grid.')
    return num_prefix_tokens + row * width + col


def attention_rollout(maps: Sequence[torch.Tensor]) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema, ACL 2020): heads averaged, identity added for the residual,
    rows renormalised, and the layers multiplied in order. maps: per layer (B, heads, N, N) -> (B, N, N)."""
    rollout = None
    for probs in maps:
        layer = probs.mean(dim=1)
        layer = layer + torch.eye(layer.shape[-1], dtype=layer.dtype, device=layer.device)
        layer = layer / layer.sum(dim=-1, keepdim=True)
        rollout = layer if rollout is None else layer @ rollout
    if rollout is None:
        raise ValueError('attention_rollout needs at least one layer of attention maps.')
    return rollout


def query_map(probs: torch.Tensor, query: int, grid_size: Sequence[int], num_prefix_tokens: int) -> torch.Tensor:
    """The attention of one query over the patch keys, as a grid.

    Args:
        probs: (heads, N, N) or (N, N) probabilities of one image, prefix tokens first.

    Returns:
        (heads, h, w) or (h, w); the prefix keys' share is left out (the grid sums to 1 minus it).
    """
    row = probs[..., query, num_prefix_tokens:]
    return row.reshape(*row.shape[:-1], *grid_size)


def overlay(image: np.ndarray, heat: torch.Tensor, alpha: float = 0.6) -> np.ndarray:
    """An RGB float image in [0, 1] with a heat map (h, w) upsampled onto it (bilinear) in 'inferno'."""
    from matplotlib import colormaps
    height, width = image.shape[:2]
    heat = F.interpolate(heat[None, None].float(), size=(height, width), mode='bilinear', align_corners=False)[0, 0]
    heat = (heat - heat.min()) / (heat.max() - heat.min() + 1e-12)
    coloured = colormaps['inferno'](heat.numpy())[..., :3]
    base = image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=-1)
    return (1 - alpha) * base + alpha * coloured
