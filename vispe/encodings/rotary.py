"""Shared maths of the rotary encodings: rotation tables as complex numbers, and their application.

Channels (2k, 2k+1) of a head form the complex number k (interleaved pairs, as rope-vit and timm's
non-``rotate_half`` layout). A rotation by angle φ is a multiplication by e^{iφ}; tables hold
``cis = e^{iφ}`` in complex64, built from float32 angles whatever the autocast dtype. Multiplying
complex views costs one read and one write of q (about 6x faster on CPU than timm's real-valued
``apply_rot_embed``, measured in this repository's benchmark notes).
"""
from __future__ import annotations

import torch

from vispe.geometry import Positions


def rotate_pairs(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs of ``x`` by the unit complex numbers ``cis``.

    Args:
        x: (..., N, d) real, d even, pairs interleaved.
        cis: (..., N, d/2) complex, broadcastable against x's leading dims.

    Returns:
        (..., N, d) in x's dtype.
    """
    x32 = x.float()
    if x32.stride(-1) != 1 or any(stride % 2 for stride in x32.stride()[:-1]):
        x32 = x32.contiguous()
    pairs = torch.view_as_complex(x32.unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * cis).flatten(-2).to(x.dtype)


def angles_to_cis(angles: torch.Tensor) -> torch.Tensor:
    """e^{iφ} of float32 angles (computed outside autocast)."""
    angles = angles.float()
    return torch.polar(torch.ones_like(angles), angles)


def with_identity_prefix(cis: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """Prepend ``num_prefix_tokens`` identity rotations (1 + 0i) on the token axis (-2)."""
    if num_prefix_tokens == 0:
        return cis
    ones = torch.ones(*cis.shape[:-2], num_prefix_tokens, cis.shape[-1], dtype=cis.dtype, device=cis.device)
    return torch.cat([ones, cis], dim=-2)


def xy_positions(pos: Positions) -> tuple[torch.Tensor, torch.Tensor]:
    """(t_x, t_y) = (column, row) of the patches in patch units, float32, each (N,) or (B, N)."""
    coords = pos.patch_coords().float()
    return coords[..., 1], coords[..., 0]
