"""Absolute encodings of 3D coordinates for point tokens and box queries: 3DETR's Fourier features and sine
embedding of normalised xyz (Misra et al., ICCV 2021, ``PositionEmbeddingCoordsSine``).

Both normalise each scene's coordinates to [0, 1]³ by its extent (``SceneGeometry.bounds``, 3DETR's
``point_cloud_dims``: the minimum and maximum corner of the input cloud), so that the same scene drawn
larger or denser reads the same positions; a DETR-style decoder adds them to the keys (points) and, through
its query projection, to the queries (box centres) of every layer.
"""
from __future__ import annotations

import math
from typing import ClassVar

import torch

from vispe.encodings.base import AbsoluteEncoding
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions
from vispe.registry import ENCODINGS

__all__ = ['FourierXYZ', 'SinCosXYZ', 'normalized_coords', 'points_and_bounds', 'sincos_xyz_embedding']

EVEN_EMBED_DIM = model_fact('embed_dim', multiple_of=2, doc='The token width C holds sine-cosine pairs, so it must be '
                                                            'even.')


def points_and_bounds(pos: Positions, user: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The positioned tokens' 3D coordinates (B, N, 3) and each scene's extent ``pos.scene.bounds`` (B, 2, 3), or an
    error naming what ``user`` (an encoding's name) lacks."""
    pos.require('points', 'bounds', user=user)
    bounds = pos.scene.bounds
    if tuple(bounds.shape[1:]) != (2, 3):
        raise ValueError(f"{user} normalises coordinates by the scene's extent: SceneGeometry.bounds must be (B, 2, 3), "
                         f"the minimum and maximum corner of each point cloud (3DETR's point_cloud_dims); got "
                         f'{tuple(bounds.shape)}.')
    return pos.coords.expand(bounds.shape[0], -1, -1), bounds


def normalized_coords(pos: Positions, user: str) -> torch.Tensor:
    """(B, N, 3) coordinates of the positioned tokens shifted and scaled by their scene's bounds to [0, 1]³."""
    coords, bounds = points_and_bounds(pos, user)
    low, high = bounds[:, :1].to(coords.dtype), bounds[:, 1:].to(coords.dtype)
    return (coords - low) / (high - low)


def sincos_xyz_embedding(unit_xyz: torch.Tensor, dim: int, temperature: float = 10000.0) -> torch.Tensor:
    """3DETR's sine embedding of (..., 3) coordinates in [0, 1]: (..., dim).

    Each axis gets an even share of the channels (``dim // 3`` rounded down to even; the remainder goes to the
    first axes, two channels at a time); within an axis, channel pair j holds ``sin(2π·c / T^(2j/n))`` and
    ``cos(2π·c / T^(2j/n))``, n the axis's channel count; the axes follow one another (x, y, z).
    """
    share = (dim // 3) // 2 * 2
    remainder = dim - 3 * share
    parts = []
    for axis in range(3):
        channels = share + (2 if remainder >= 2 * (axis + 1) else 0)
        index = torch.arange(channels, dtype=torch.float32, device=unit_xyz.device)
        periods = temperature ** (2 * torch.div(index, 2, rounding_mode='floor') / channels)
        angles = unit_xyz[..., axis:axis + 1].float() * (2 * math.pi) / periods
        parts.append(torch.stack([angles[..., 0::2].sin(), angles[..., 1::2].cos()], dim=-1).flatten(-2))
    return torch.cat(parts, dim=-1)


class XYZEncoding(AbsoluteEncoding):
    """An absolute encoding of normalised xyz: a subclass's ``embedding(unit_xyz)`` ((B, N, 3) in [0, 1] -> (B, N, C))
    of the positioned tokens, built once per forward by :meth:`position_embedding` and added to them by
    :meth:`embed` (prefix tokens unchanged)."""

    requires: ClassVar[tuple[str, ...]] = ('points', 'bounds')

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, N, C) float32 embedding of the positioned tokens (per forward)."""
        return self.cached_table('embedding', pos,
                                 lambda: self.embedding(normalized_coords(pos, type(self).__name__).float()))


@ENCODINGS.register_module()
class FourierXYZ(XYZEncoding):
    """3DETR's Fourier features (its default, ``pos_embed='fourier'``): ``[sin(2π·u·B), cos(2π·u·B)]`` of the
    normalised coordinates u ∈ [0, 1]³ with a fixed Gaussian matrix B (3, C/2) ~ N(0, gauss_scale²), drawn at
    build from torch's generator and kept in the state dict (``gauss_B``), as 3DETR's buffer.

    Args:
        embed_dim: token width C (even).
        gauss_scale: the standard deviation of B (1.0 in 3DETR).

    Shapes: embed (B, prefix + N, C) -> same; position_embedding (B, N, C).
    """

    paper: ClassVar[str] = 'Misra et al., ICCV 2021 (3DETR); Tancik et al., NeurIPS 2020 (Fourier features)'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': EVEN_EMBED_DIM,
        'gauss_scale': Option(float, gt=0, doc='The spread of the Fourier matrix is positive (1.0 in 3DETR); the '
                                               'trained model depends on it, so it is fixed at build.'),
    }

    def __init__(self, embed_dim: int, gauss_scale: float = 1.0) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.register_buffer('gauss_B', torch.randn(3, embed_dim // 2) * gauss_scale)

    def embedding(self, unit_xyz: torch.Tensor) -> torch.Tensor:
        projected = (unit_xyz * (2 * math.pi)) @ self.gauss_B.float()
        return torch.cat([projected.sin(), projected.cos()], dim=-1)

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}'


@ENCODINGS.register_module()
class SinCosXYZ(XYZEncoding):
    """3DETR's sine embedding of normalised xyz (``pos_embed='sine'``, :func:`sincos_xyz_embedding`).

    Args:
        embed_dim: token width C (even).
        temperature: frequency base (10000).

    Shapes: embed (B, prefix + N, C) -> same; position_embedding (B, N, C).
    """

    paper: ClassVar[str] = 'Misra et al., ICCV 2021 (3DETR, sine position embedding)'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': EVEN_EMBED_DIM,
        'temperature': Option(float, gt=0, doc='The frequency base is positive (3DETR uses 10000); the trained model '
                                               'depends on the table, so it is fixed at build.'),
    }

    def __init__(self, embed_dim: int, temperature: float = 10000.0) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature

    def embedding(self, unit_xyz: torch.Tensor) -> torch.Tensor:
        return sincos_xyz_embedding(unit_xyz, self.embed_dim, self.temperature)

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}, temperature={self.temperature}'
