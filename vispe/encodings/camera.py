"""What the camera encodings of multi-view 3D detectors share (PETR, 3DPPE and the multi-view 2D sine).

These encodings give the memory tokens of V camera images a key embedding from the cameras (added to the
keys of every cross-attention layer, not to the values) and give object queries their embedding from 3D
reference points (:class:`CameraEncoding`, the camera protocol); the ``embed`` hook (tokens + key embedding) serves
any other model of multi-view tokens.

Functions here follow megvii-research/PETR (``pos2posemb3d`` of ``petr_head.py``,
``SinePositionalEncoding3D``) and mmdet's ``inverse_sigmoid``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding, add_to_positioned, apply_learned, default_method, defines
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """mmdet's ``inverse_sigmoid``: ``log(x / (1 - x))`` of ``x`` clamped to [0, 1], each side at least ``eps``."""
    x = x.clamp(0, 1)
    return torch.log(x.clamp(min=eps) / (1 - x).clamp(min=eps))


def sine_features(values: torch.Tensor, num_feats: int, temperature: float, interleave: bool = True) -> torch.Tensor:
    """(...,) -> (..., num_feats): ``values / τ_j`` with ``τ_j = temperature^(2⌊j/2⌋/num_feats)``, sine of the
    even j and cosine of the odd j, interleaved (``pos2posemb3d``, DETR) or as a sine half then a cosine half
    (``SinePositionalEncoding3D``, whose stack runs over the 5-D tensor's fourth axis)."""
    steps = torch.arange(num_feats, dtype=torch.float32, device=values.device)
    inverse = temperature ** (2 * torch.div(steps, 2, rounding_mode='floor') / num_feats)
    angles = values[..., None].float() / inverse
    parts = (angles[..., 0::2].sin(), angles[..., 1::2].cos())
    return torch.stack(parts, -1).flatten(-2) if interleave else torch.cat(parts, -1)


def pos2posemb3d(points: torch.Tensor, num_feats: int = 128, temperature: float = 10000.) -> torch.Tensor:
    """PETR's ``pos2posemb3d``: (..., 3) points ``(x, y, z)`` scaled by 2π -> (..., 3·num_feats) sine features
    concatenated in the order (y, x, z)."""
    scaled = points * (2 * math.pi)
    x, y, z = (sine_features(scaled[..., axis], num_feats, temperature) for axis in range(3))
    return torch.cat([y, x, z], -1)


def multiview_sine_embedding(valid_mask: torch.Tensor, num_feats: int, temperature: float = 10000.,
                             scale: float = 2 * math.pi, eps: float = 1e-6) -> torch.Tensor:
    """PETR's ``SinePositionalEncoding3D`` (normalised, offset 0) over (camera, row, column).

    Each real cell's camera, row and column positions are running counts of real cells over the views, the
    rows and the columns (1-based), divided by the count at the last view / row / column and scaled by
    ``scale``; each becomes ``num_feats`` features (sine half, then cosine half), concatenated as
    (camera, row, column).

    Args:
        valid_mask: (B, V, h, w) bool, True on real cells.
        num_feats: features per axis (PETR: 128 = embed_dim / 2).

    Returns:
        (B, V, 3·num_feats, h, w) float32.
    """
    real = valid_mask.to(torch.float32)
    view = real.cumsum(1)
    row = real.cumsum(2)
    col = real.cumsum(3)
    view = view / (view[:, -1:] + eps) * scale
    row = row / (row[:, :, -1:] + eps) * scale
    col = col / (col[:, :, :, -1:] + eps) * scale
    features = [sine_features(axis, num_feats, temperature, interleave=False) for axis in (view, row, col)]
    return torch.cat(features, -1).permute(0, 1, 4, 2, 3)


def pointwise_mlp(in_channels: int, hidden: int, out_channels: int) -> nn.Sequential:
    """1×1 convolution, ReLU, 1×1 convolution (PETR's ``position_encoder`` and ``adapt_pos3d``)."""
    return nn.Sequential(nn.Conv2d(in_channels, hidden, 1), nn.ReLU(inplace=True), nn.Conv2d(hidden, out_channels, 1))


def query_mlp(in_features: int, embed_dim: int) -> nn.Sequential:
    """Linear, ReLU, Linear (PETR's ``query_embedding``; 3DPPE's shared ``position_encoder``)."""
    return nn.Sequential(nn.Linear(in_features, embed_dim), nn.ReLU(inplace=True), nn.Linear(embed_dim, embed_dim))


@dataclass
class FeatureEncoding:
    """What :meth:`CameraEncoding.encode_features` returns.

    Attributes:
        features: (B·V, C', h, w) the feature maps the memory is projected from (3DPPE: its depth net's context
            features; the others return their input).
        extras: what :meth:`~CameraEncoding.key_embedding` and :meth:`~CameraEncoding.losses` need (3DPPE: the
            depth predictions).
    """

    features: torch.Tensor
    extras: dict[str, Any] = field(default_factory=dict)


def multiview_grid(pos: Positions, user: str) -> tuple[int, int, int]:
    """(V, h, w) of positions that describe V camera grids with cameras, or an error naming what is missing."""
    pos.require('cameras', user=user)
    if pos.grid_size is None:
        raise ValueError(f'{user} encodes the feature grids of camera images; these positions have no grid. Build '
                         f'Positions(grid_size=(h, w), num_views=V, camera=CameraGeometry(cameras=Cameras(...))) (the '
                         f'multi-view detectors do it from the data samples: intrinsics, lidar2cam, pad_shape).')
    return pos.num_views, *pos.grid_size


def check_camera_batch(pos: Positions, batch: int, user: str) -> None:
    """Refuse positions without cameras, or whose cameras (depth, crop boxes) describe another sample count than the
    ``batch`` of the tokens ``user`` encodes (:meth:`~vispe.geometry.Positions.check_tokens`)."""
    pos.require('cameras', user=user)
    pos.check_tokens(batch, None, user)


def pixel_stride(pos: Positions, user: str) -> int:
    """The image pixels per cell s of the camera grids of ``pos`` (its ``patch_size``), where ``user`` reads images or
    depth maps per cell: the grid (h, w) at stride s must cover the cameras' (H, W) images to within a cell
    (h = floor or ceil of H / s, as a backbone of stride s gives), or an error names the grid, the patch size, the
    image size and the fix (a grid whose patch_size is left at (1, 1) would read the top-left pixels)."""
    _, height, width = multiview_grid(pos, user)
    image_h, image_w = pos.camera.cameras.image_size
    stride_h, stride_w = pos.patch_size
    covers = abs(height * stride_h - image_h) < stride_h and abs(width * stride_w - image_w) < stride_w
    if stride_h != stride_w or not covers:
        raise ValueError(f'{user} reads the images\' pixels per cell, but a {height}x{width} grid at patch_size '
                         f'{tuple(pos.patch_size)} covers {height * stride_h}x{width * stride_w} pixels of the '
                         f'{image_h}x{image_w} images (cameras.image_size): its cells would read the wrong pixels. Set '
                         f'Positions(patch_size=(s, s)) to the feature stride s of the backbone (here about '
                         f'{image_h / height:g} x {image_w / width:g}), one s for both axes.')
    return stride_h


def views_valid(pos: Positions) -> torch.Tensor:
    """(B|1, V, h, w) validity of the cells of ``pos`` (all True, one row, without a mask)."""
    views, height, width = multiview_grid(pos, 'The multi-view sine embedding')
    if pos.valid_mask is None:
        return torch.ones(1, views, height, width, dtype=torch.bool, device=pos.device)
    return pos.valid_mask.reshape(-1, views, height, width)


def adapted_sine(adapt_pos3d: nn.Module, pos: Positions, embed_dim: int, temperature: float = 10000.) -> torch.Tensor:
    """(B|1, V·h·w, C): ``adapt_pos3d`` of the multi-view sine table of ``pos`` (C/2 features per axis)."""
    sine = multiview_sine_embedding(views_valid(pos), embed_dim // 2, temperature)
    adapted = apply_learned(adapt_pos3d, sine.flatten(0, 1)).unflatten(0, sine.shape[:2])
    return adapted.permute(0, 1, 3, 4, 2).flatten(1, 3)


class CameraEncoding(PositionEncoding):
    """The camera protocol: the base of the encodings of camera tokens (PETR, PPE3D, MultiViewSine, CameraRays).

    A host of camera tokens (the multi-view detector; the novel-view model through :meth:`embed`) calls, once per
    forward:

    * :meth:`encode_features` on the backbone's feature maps (B·V, C_in, h, w), before its input projection (whose
      input width is :meth:`out_channels`): identity, or 3DPPE's depth net, which returns context features and
      extras (its depth predictions);
    * :meth:`key_embedding` (B, V·h·w, C) for the memory's keys: by default the :meth:`position_embedding` of the
      positions, which a subclass implements (PPE3D overrides it: its points depend on the predicted depth);
    * :meth:`encode_queries` for object queries placed at 3D reference points in [0, 1] of the encoding's position
      range (PETR, PPE3D, MultiViewSine; a host that calls it checks at build that the encoding has it);
    * :meth:`losses`, auxiliary losses from the extras (3DPPE's depth losses).

    :meth:`embed` serves any other host of camera tokens: encoded features plus the key embedding. Positions must
    carry a grid (or pixel coordinates) and cameras, one per sample and view.
    """

    family: ClassVar[str] = 'camera'
    requires: ClassVar[tuple[str, ...]] = ('grid', 'cameras')

    @default_method
    def out_channels(self, in_channels: int) -> int:
        """Channels of :meth:`encode_features`' output for backbone features of ``in_channels``."""
        return in_channels

    @default_method
    def encode_features(self, features: torch.Tensor, pos: Positions) -> FeatureEncoding:
        """(B·V, C, h, w) backbone features of the cameras of ``pos`` -> :class:`FeatureEncoding` (unchanged here)."""
        return FeatureEncoding(features)

    def key_embedding(self, pos: Positions, batch: int, extras: dict[str, Any]) -> torch.Tensor:
        """(B, V·h·w, C) key embedding of the memory tokens (view-major) of ``pos``; here its
        :meth:`position_embedding`, for a batch whose cameras are given per sample."""
        check_camera_batch(pos, batch, type(self).__name__)
        embedding = self.position_embedding(pos)
        if embedding is None:
            raise NotImplementedError(f'{type(self).__name__} implements neither position_embedding nor key_embedding; '
                                      f'a camera encoding implements one of them.')
        return embedding.expand(batch, -1, -1)

    @default_method
    def encode_queries(self, reference: torch.Tensor) -> torch.Tensor:
        """(..., Q, 3) reference points in [0, 1] -> (..., Q, C) query embeddings."""
        raise NotImplementedError(f'{type(self).__name__} has no query embedding of 3D reference points; a host that '
                                  f'embeds its queries with the encoding needs one that has (PETR, PPE3D, '
                                  f'MultiViewSine).')

    @default_method
    def losses(self, extras: dict[str, Any], pos: Positions) -> dict[str, torch.Tensor]:
        """Auxiliary losses from :attr:`FeatureEncoding.extras` and ``pos`` (e.g. its measured depth); none by
        default."""
        return {}

    def implements(self, method: str) -> bool:
        if method == 'key_embedding' and not defines(type(self), 'position_embedding'):
            return type(self).key_embedding is not CameraEncoding.key_embedding
        return super().implements(method)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Camera tokens (B, prefix + N, C) -> encoded features + key embedding (as an absolute encoding); the
        features are encoded on the grid of the views (:meth:`encode_features`) when the encoding does that."""
        batch, extras = x.shape[0], {}
        pos.check_tokens(batch, x.shape[1], type(self).__name__)
        if self.implements('encode_features'):
            views, height, width = multiview_grid(pos, type(self).__name__)
            prefix = pos.num_prefix_tokens
            grid = x[:, prefix:].reshape(batch * views, height, width, -1).permute(0, 3, 1, 2)
            encoded = self.encode_features(grid, pos)
            tokens = encoded.features.view(batch, views, -1, height, width).permute(0, 1, 3, 4, 2).flatten(1, 3)
            x, extras = torch.cat([x[:, :prefix], tokens], dim=1), encoded.extras
        return add_to_positioned(x, pos, self.key_embedding(pos, batch, extras), type(self).__name__)


@ENCODINGS.register_module()
class MultiViewSine(CameraEncoding):
    """PETR's multi-view 2D sine embedding alone: which camera, which row, which column (no 3D). The "no 3D PE"
    baseline of the multi-view detectors (PETR's 2D-PE ablation), and the 2D branch PETR and 3DPPE add.

    Keys: ``adapt_pos3d(sine(camera, row, column))``, ``adapt_pos3d`` = 1×1 conv (3C/2 -> 4C), ReLU, 1×1 conv
    (4C -> C). Queries: ``query_embedding(pos2posemb3d(reference))``, Linear (3C/2 -> C), ReLU, Linear (C -> C),
    PETR's query embedding of its learnable reference points. Padded cells (``pos.valid_mask``) do not count.

    Args:
        embed_dim: C (even).
        temperature: the sine base (10000).

    Shapes: position_embedding(pos of V grids (h, w)) -> (B|1, V·h·w, C); encode_queries((..., Q, 3)) -> (..., Q, C).
    """

    paper: ClassVar[str] = 'PETR (2D multi-view branch), Liu et al. ECCV 2022'
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=2, doc='The token width C: the sine table has 3 x C/2 '
                                                               'features, so it must be even.'),
        'temperature': Option(float, gt=0, doc='The sine base is positive (PETR uses 10000); fixed at build.'),
    }

    def __init__(self, embed_dim: int, temperature: float = 10000.) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature
        self.adapt_pos3d = pointwise_mlp(embed_dim * 3 // 2, embed_dim * 4, embed_dim)
        self.query_embedding = query_mlp(embed_dim * 3 // 2, embed_dim)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        return adapted_sine(self.adapt_pos3d, pos, self.embed_dim, self.temperature)

    def encode_queries(self, reference: torch.Tensor) -> torch.Tensor:
        return apply_learned(self.query_embedding, pos2posemb3d(reference, self.embed_dim // 2))

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}'
