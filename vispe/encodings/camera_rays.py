"""CameraRays: PETR's 3D position embedding of camera rays as a token encoding for any tokens with a camera and a
pixel: the grid cells of V views, or rays given by their pixels (a novel-view decoder's target rays).

Each token's ray through its pixel (u, v) is sampled at D depths (PETR's LID or UD bins), lifted to the scene frame
by the view's ``img2lidar``, normalised to ``position_range``, inverse-sigmoided (clamped at 1e-5) and laid out as
D·3 values (3k + axis); an MLP (Linear 3D → 4C, ReLU, Linear 4C → C; PETR's 1×1-conv ``position_encoder``) maps
them to the token width and the ``embed`` hook adds the result. Unlike :class:`~vispe.encodings.PETR` (a detector's
key embedding of feature maps, at cell corners), a cell's pixel is its centre, (i + ½)·H/h − ½ in pixel-index
units, and tokens may sit anywhere: ``coords`` (B, N, 2) hold (row, col) pixel indices.
"""
from __future__ import annotations

from typing import ClassVar, Sequence

import torch
from torch import nn

from vispe.encodings.base import apply_learned
from vispe.encodings.camera import CameraEncoding, inverse_sigmoid
from vispe.encodings.options import Option, model_fact
from vispe.encodings.petr import RANGE_OPTION, check_position_range
from vispe.geometry import Positions, depth_bins, frustum_pixels, homogeneous_pixels, lift, normalize_points
from vispe.registry import ENCODINGS

__all__ = ['CameraRays']


@ENCODINGS.register_module()
class CameraRays(CameraEncoding):
    """PETR-style embedding of the camera ray through each token's pixel, added to the tokens: a camera encoding
    whose key embedding is its :meth:`position_embedding` and that has no query embedding of 3D points.

    Args:
        embed_dim: token width C, filled in by the model.
        depth_num: D points per ray (PETR: 64).
        depth_start: the first depth bin in metres (PETR: 1).
        depth_mode: 'LID' or 'UD' bins up to ``position_range[3]`` (as PETR).
        position_range: (xmin, ymin, zmin, xmax, ymax, zmax) of the scene frame in metres.

    Shapes: embed x (B, prefix + N, C) -> same; position_embedding (B, N, C); positions need ``cameras`` and a grid
    of V views or ``coords``.
    """

    paper: ClassVar[str] = 'PETR (Liu et al., ECCV 2022) ray embedding for any camera tokens'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim'),
        'depth_num': Option(int, ge=1, doc='Points per ray (PETR: 64).'),
        'depth_start': Option(float, gt=0, doc='The first depth bin in metres (PETR: 1).'),
        'depth_mode': Option(str, choices=('LID', 'UD'), doc="Depth bins: 'LID' (PETR's default) or 'UD'."),
        'position_range': RANGE_OPTION,
    }

    def __init__(self, embed_dim: int, depth_num: int = 16, depth_start: float = 0.5, depth_mode: str = 'LID',
                 position_range: Sequence[float] = (-12.0, -12.0, -12.0, 12.0, 12.0, 12.0)) -> None:
        super().__init__()
        check_position_range('CameraRays', position_range, depth_start)
        self.depth_num, self.depth_start, self.depth_mode = depth_num, depth_start, depth_mode
        self.position_range = tuple(float(value) for value in position_range)
        self.mlp = nn.Sequential(nn.Linear(3 * depth_num, 4 * embed_dim), nn.ReLU(),
                                 nn.Linear(4 * embed_dim, embed_dim))

    def pixels(self, pos: Positions) -> tuple[torch.Tensor, int]:
        """(B|1, V, T, 2) (u, v) pixels of the positioned tokens, T per view, and V."""
        pos.require('cameras', user='CameraRays')
        views = pos.num_views
        if pos.grid_size is not None and pos.coords is None:
            uv = frustum_pixels(pos.grid_size, pos.camera.cameras.image_size, 'center', pos.device).reshape(1, 1, -1, 2)
            return uv.expand(1, views, -1, 2), views
        if pos.coords is None or pos.coords.shape[-1] != 2:
            raise ValueError('CameraRays needs each token\'s pixel: a grid of views, or Positions.coords (row, col) '
                             'in pixels.')
        if pos.num_positions % views:
            raise ValueError(f'CameraRays reads tokens view-major: {pos.num_positions} tokens do not split into '
                             f'{views} views of equal size.')
        coords = pos.coords if pos.coords.ndim == 3 else pos.coords[None]
        return coords.flip(-1).float().unflatten(1, (views, -1)), views

    def ray_features(self, pos: Positions) -> torch.Tensor:
        """(B, N, 3D) normalised, inverse-sigmoided points along each token's ray (built once per forward)."""
        def build() -> torch.Tensor:
            uv, _ = self.pixels(pos)
            depths = depth_bins(self.depth_num, self.depth_start, self.position_range[3], self.depth_mode, pos.device)
            homogeneous = homogeneous_pixels(uv[..., None, :].expand(*uv.shape[:-1], self.depth_num, 2),
                                             depths.expand(*uv.shape[:-1], -1))
            cameras = pos.camera.cameras
            batch, views, tokens = cameras.num_samples, uv.shape[1], uv.shape[2]
            points = lift(cameras.img2lidar, homogeneous.flatten(2, 3))
            normalised = inverse_sigmoid(normalize_points(points, self.position_range))
            return normalised.reshape(batch, views * tokens, self.depth_num * 3)
        return self.cached_table('ray_features', pos, build)

    def prepare(self, pos: Positions) -> None:
        self.ray_features(pos)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        return apply_learned(self.mlp, self.ray_features(pos))

    def extra_repr(self) -> str:
        return (f'depth_num={self.depth_num}, depth_start={self.depth_start}, depth_mode={self.depth_mode!r}, '
                f'position_range={self.position_range}')
