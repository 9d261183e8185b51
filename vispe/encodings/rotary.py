"""Shared maths of the rotary encodings: rotation tables as complex numbers, and their application.

Channels (2k, 2k+1) of a head form the complex number k (interleaved pairs, as rope-vit and timm's
non-``rotate_half`` layout). A rotation by angle φ is a multiplication by e^{iφ}; tables hold
``cis = e^{iφ}`` in complex64, built from float32 angles whatever the autocast dtype. Multiplying
complex views costs one read and one write of q (about 6x faster on CPU than timm's real-valued
``apply_rot_embed``, measured in this repository's benchmark notes). While torch.compile or torch.export
trace a model the tables take a real form, (cos φ, sin φ) on a trailing axis, since exporters (ONNX) lack
complex numbers; the compiler fuses the real arithmetic.
"""
from __future__ import annotations

import torch

from vispe.encodings.tables import TableCache
from vispe.geometry import Positions


def rotate_pairs(x: torch.Tensor, cis: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs of ``x`` by the unit complex numbers ``cis``.

    Args:
        x: (..., N, d) real, d even, pairs interleaved.
        cis: (..., N, d/2) complex, or its real form (..., N, d/2, 2) (cos, sin), broadcastable against x's
            leading dims.

    Returns:
        (..., N, d) in x's dtype.
    """
    x32 = x.float()
    if not cis.is_complex():
        pairs = x32.unflatten(-1, (-1, 2))
        first, second = pairs[..., 0], pairs[..., 1]
        cos, sin = cis[..., 0], cis[..., 1]
        return torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-1).flatten(-2).to(x.dtype)
    if x32.stride(-1) != 1 or any(stride % 2 for stride in x32.stride()[:-1]):
        x32 = x32.contiguous()
    pairs = torch.view_as_complex(x32.unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * cis).flatten(-2).to(x.dtype)


def angles_to_cis(angles: torch.Tensor) -> torch.Tensor:
    """e^{iφ} of float32 angles (computed outside autocast): complex in eager mode; while torch.compile or
    torch.export trace, the real form (..., 2) = (cos φ, sin φ), which ONNX and every exporter can represent."""
    angles = angles.float()
    if TableCache.tracing():
        return torch.stack([angles.cos(), angles.sin()], dim=-1)
    return torch.polar(torch.ones_like(angles), angles)


def rotation_ndim(cis: torch.Tensor) -> int:
    """The dimensions of a rotation table without the real form's trailing (cos, sin) axis."""
    return cis.ndim if cis.is_complex() else cis.ndim - 1


def with_identity_prefix(cis: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    """Prepend ``num_prefix_tokens`` identity rotations (1 + 0i) on the token axis (-2 of the rotations)."""
    if num_prefix_tokens == 0:
        return cis
    token_axis = rotation_ndim(cis) - 2
    identity = angles_to_cis(cis.new_zeros(cis.shape[:token_axis] + (num_prefix_tokens, cis.shape[token_axis + 1]),
                                           dtype=torch.float32))
    return torch.cat([identity.to(cis.dtype), cis], dim=token_axis)


def xy_positions(pos: Positions) -> tuple[torch.Tensor, torch.Tensor]:
    """(t_x, t_y) = (column, row) of the patches in patch units, float32, each (N,) or (B, N)."""
    coords = pos.patch_coords().float()
    return coords[..., 1], coords[..., 0]
