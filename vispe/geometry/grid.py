"""2D patch-grid helpers: token coordinates in row-major order and grid sizes from image sizes."""
from __future__ import annotations

from typing import Sequence

import torch


def to_2tuple(value: int | Sequence[int]) -> tuple[int, int]:
    """``16 -> (16, 16)``; ``(16, 8) -> (16, 8)``."""
    if isinstance(value, int):
        return value, value
    first, second = value
    return int(first), int(second)


def grid_coords(
        grid_size: Sequence[int],
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        offset: float = 0.0,
        normalize: bool = False,
) -> torch.Tensor:
    """Coordinates of the tokens of an h×w grid, row-major (token n = row·w + col).

    Args:
        grid_size: (h, w).
        offset: added to the integer indices (0.5 gives patch centres).
        normalize: divide rows by h and columns by w, so (i + 0.5)/n lies in (0, 1).

    Returns:
        (h·w, 2) tensor of (row, col).
    """
    height, width = grid_size
    rows = torch.arange(height, device=device, dtype=dtype) + offset
    cols = torch.arange(width, device=device, dtype=dtype) + offset
    if normalize:
        rows = rows / height
        cols = cols / width
    grid = torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1)
    return grid.reshape(height * width, 2)


def feature_grid_size(
        img_size: Sequence[int],
        patch_size: Sequence[int],
        dynamic_img_pad: bool = False,
) -> tuple[int, int]:
    """The patch grid of an image, or an error that says which sizes work.

    Args:
        img_size: (H, W) in pixels.
        patch_size: (ph, pw).
        dynamic_img_pad: the patch embedding pads the image up to a multiple of the patch.

    Raises:
        ValueError: the size is not a multiple of the patch size and padding is off.
    """
    height, width = img_size
    patch_h, patch_w = patch_size
    if dynamic_img_pad:
        return -(-height // patch_h), -(-width // patch_w)
    bad = [(name, size, patch) for name, size, patch in (('height', height, patch_h), ('width', width, patch_w))
           if size % patch != 0]
    if bad:
        parts = []
        for name, size, patch in bad:
            lower, upper = size // patch * patch, (size // patch + 1) * patch
            nearest = f'{lower} or {upper}' if lower > 0 else f'{upper}'
            parts.append(f'{name} {size} is not a multiple of the patch size {patch} (nearest: {nearest})')
        raise ValueError(
            f'Image size {height}x{width}: ' + '; '.join(parts) +
            '. Resize or crop to a multiple of the patch size, or build the model with dynamic_img_pad=True '
            'to pad the image.')
    return height // patch_h, width // patch_w


def relative_offsets(grid_size: Sequence[int], device: torch.device | str | None = None) -> torch.Tensor:
    """Offsets between the patches of a grid: (N, N, 2) int64 of (row_i − row_j, col_i − col_j) for
    query i and key j (row-major tokens)."""
    coords = grid_coords(grid_size, device=device, dtype=torch.int64)
    return coords[:, None, :] - coords[None, :, :]


def pad_prefix(table: torch.Tensor, num_prefix_tokens: int, value: float | bool = 0,
               num_key_prefix_tokens: int | None = None) -> torch.Tensor:
    """Pad the last two (query, key) axes of a (..., Nq, Nk) table with leading rows (``num_prefix_tokens``) and
    columns (``num_key_prefix_tokens``, default the same) of ``value``: the table of the whole sequences."""
    key_prefix = num_prefix_tokens if num_key_prefix_tokens is None else num_key_prefix_tokens
    if num_prefix_tokens == 0 and key_prefix == 0:
        return table
    return torch.nn.functional.pad(table, (key_prefix, 0, num_prefix_tokens, 0), value=value)


def pairwise_offsets(coords_q: torch.Tensor, coords_k: torch.Tensor) -> torch.Tensor:
    """Offsets query − key between two sets of (row, col) coordinates.

    Args:
        coords_q: (Nq, 2) or (B, Nq, 2).
        coords_k: (Nk, 2) or (B, Nk, 2).

    Returns:
        (B|1, Nq, Nk, 2) float32.
    """
    coords_q = coords_q.float() if coords_q.ndim == 3 else coords_q.float().unsqueeze(0)
    coords_k = coords_k.float() if coords_k.ndim == 3 else coords_k.float().unsqueeze(0)
    return coords_q[:, :, None, :] - coords_k[:, None, :, :]
