"""Tri-plane features of 3D positions, as TC-GS samples them (Wang, Yu, Xu, arXiv 2503.20221; timwang2001/TC-GS).

Three learnable planes (3, C, R, R) hold features; a point reads plane 0 at its (y, z), plane 1 at (x, z) and
plane 2 at (x, y), each bilinearly (``grid_sample``, ``align_corners=False``, zero padding). Before the
lookup each 2D projection p is normalised the reference's way::

    u = contract(6 · (2 · 2p / r − 1)) / 2         contract(v) = v if ‖v‖ ≤ 1 else (2 − 1/‖v‖) · v/‖v‖

(Mip-NeRF 360's contraction over the 2D norm, so u ∈ (−1, 1)), with r² per plane the smaller of the squared
norms of the scene's minimum and maximum corners projected on that plane and, given a ``radius``, of
(radius / 2)². The reference projects the corners with the plane pairs (x, y), (x, z), (z, x), not with the
points' (y, z), (x, z), (x, y); vispe keeps that pairing so that trained planes read the same cells
(:func:`triplane_coords`, ``corner_axes``). With K > 1 a point also reads the planes at its K − 1 nearest
neighbours (itself first): K × 3 × C features, flattened neighbour-major, then plane, then channel.
"""
from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from vispe.encodings.base import AbsoluteEncoding
from vispe.encodings.options import Option, model_fact
from vispe.encodings.tables import TableCache
from vispe.encodings.xyz import points_and_bounds
from vispe.geometry import Positions
from vispe.geometry.checks import checking_values
from vispe.registry import ENCODINGS

__all__ = ['TriPlane', 'contract', 'nearest_neighbors', 'sample_triplane', 'triplane_coords']

# The coordinate pairs each plane is read at (grid_sample's (x, y) = (width, height) axes), and the pairs the
# reference projects the scene's corners on when it sizes the planes.
PLANE_AXES = ((1, 2), (0, 2), (0, 1))
CORNER_AXES = ((0, 1), (0, 2), (2, 0))


def contract(x: torch.Tensor) -> torch.Tensor:
    """Mip-NeRF 360's contraction over the last axis (Barron et al., CVPR 2022, eq. 10): identity inside the unit
    ball, ``(2 − 1/‖x‖)·x/‖x‖`` outside it, so every output lies inside the ball of radius 2. (..., D) -> same."""
    norm_sq = x.square().sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float32).eps)
    return torch.where(norm_sq <= 1, x, (2 * norm_sq.sqrt() - 1) / norm_sq * x)


def triplane_coords(xyz: torch.Tensor, low: torch.Tensor, high: torch.Tensor,
                    radius: float | None = None) -> torch.Tensor:
    """TC-GS's plane coordinates of points: (..., 3) xyz -> (..., 3, 2) in (−1, 1), plane-major.

    Args:
        xyz: (..., 3) points in scene units.
        low, high: (3,) or (..., 3) minimum and maximum corner of the scene (broadcast against ``xyz``).
        radius: optional scene radius; the planes span at most radius / 2 (the reference's
            ``0.5 · spatial_lr_scale``).
    """
    corners_sq = torch.stack([torch.stack([corner[..., a].square() + corner[..., b].square()
                                           for a, b in CORNER_AXES], dim=-1) for corner in (low, high)]).amin(0)
    if radius is not None:
        corners_sq = corners_sq.clamp_max((radius / 2) ** 2)
    if checking_values(corners_sq) and not bool((corners_sq > 0).all()):  # a check that reads a value back
        raise ValueError('TriPlane sizes each plane by the nearer of the scene\'s two corners to the origin, and a '
                         'corner lies on an axis plane through the origin (zero extent): give points around the '
                         'origin, as TC-GS\'s scenes are, or build the encoding with centered=True.')
    projected = torch.stack([xyz[..., list(axes)] for axes in PLANE_AXES], dim=-2)
    return contract(6 * (4 * projected / corners_sq.sqrt().unsqueeze(-1) - 1)) / 2


def sample_triplane(planes: torch.Tensor, uv: torch.Tensor) -> torch.Tensor:
    """Bilinear features of three planes: planes (3, C, R, R), uv (..., 3, 2) in [−1, 1] -> (..., 3, C); outside
    the planes reads zeros (``grid_sample``, ``align_corners=False``)."""
    lead = uv.shape[:-2]
    grid = uv.reshape(-1, 3, 2).transpose(0, 1).unsqueeze(2)                     # (3, M, 1, 2)
    features = F.grid_sample(planes, grid.to(planes.dtype), mode='bilinear', padding_mode='zeros',
                             align_corners=False)                                # (3, C, M, 1)
    return features.squeeze(-1).permute(2, 0, 1).reshape(*lead, 3, planes.shape[1])


def nearest_neighbors(xyz: torch.Tensor, k: int, chunk: int = 4096) -> torch.Tensor:
    """Indices (B, N, k) of each point's k nearest points in its own cloud (B, N, 3), itself first; ties by
    index. Distances in chunks of ``chunk`` queries, so memory stays O(chunk · N); while a model is traced they are
    squared distances from the coordinate differences (the same order), since ONNX has no ``torch.cdist``."""
    if k > xyz.shape[1]:
        raise ValueError(f'{k} nearest neighbours asked of a cloud of {xyz.shape[1]} points; lower knn to at most '
                         f'the number of points.')
    parts = []
    for start in range(0, xyz.shape[1], chunk):
        queries = xyz[:, start:start + chunk].float()
        if TableCache.tracing():
            distances = (queries[:, :, None] - xyz.float()[:, None]).square().sum(-1)
        else:
            distances = torch.cdist(queries, xyz.float())
        rows = torch.arange(start, start + distances.shape[1], device=xyz.device)
        distances[:, torch.arange(distances.shape[1], device=xyz.device), rows] = -1.0
        parts.append(distances.topk(k, dim=-1, largest=False, sorted=True).indices)
    return torch.cat(parts, dim=1)


@ENCODINGS.register_module()
class TriPlane(AbsoluteEncoding):
    """TC-GS's tri-plane context as an absolute encoding of 3D point tokens: the K × 3 × C features of each
    point (:func:`triplane_coords`, :func:`sample_triplane`) through a linear layer to the token width, added to
    the tokens.

    Args:
        embed_dim: token width, filled in by the model.
        channels: C, features per plane (50, TC-GS's ``tri_feat_dim``).
        resolution: R, cells per plane side (32, the authors' Mip-NeRF 360 script; 256 their default).
        knn: K, the point and its K − 1 nearest neighbours in the cloud (1: the point alone; TC-GS trains with 4).
        radius: optional scene radius capping the planes' extent at radius / 2 (TC-GS: the cameras' extent).
        centered: read coordinates relative to the centre of the scene's bounds (for clouds that do not surround
            the origin, such as a room in [0, X]³); False reads them as given, as TC-GS.
        init_range: planes start uniform in ±init_range (0.01).

    Shapes: embed (B, prefix + N, embed_dim) -> same; position_embedding (B, N, embed_dim); features (B, N, K·3·C);
    the scene's extent from ``SceneGeometry.bounds`` (B, 2, 3).
    """

    paper: ClassVar[str] = 'Wang, Yu, Xu, arXiv 2503.20221 (TC-GS tri-plane context)'
    requires: ClassVar[tuple[str, ...]] = ('points', 'bounds')
    examples: ClassVar[tuple[dict, ...]] = ({}, {'knn': 4})
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim'),
        'channels': Option(int, ge=1, doc='Features per plane C, at least 1 (50 in TC-GS).'),
        'resolution': Option(int, ge=2, doc='Cells per plane side R, at least 2 (32 in the authors\' Mip-NeRF 360 '
                                            'script).'),
        'knn': Option(int, ge=1, doc='Neighbours read per point K, the point included (1: no context; 4 in TC-GS).'),
        'radius': Option(float, gt=0, optional=True, doc='The scene radius capping the planes\' extent at radius / 2, '
                                                         'positive (None: the scene\'s corners alone).'),
        'centered': Option(bool, doc='Whether coordinates are read relative to the centre of the scene\'s bounds '
                                     '(False: as given, as TC-GS).'),
        'init_range': Option(float, gt=0, doc='Half-width of the planes\' uniform initialisation, positive (0.01).'),
    }

    def __init__(self, embed_dim: int, channels: int = 50, resolution: int = 32, knn: int = 1,
                 radius: float | None = None, centered: bool = False, init_range: float = 0.01) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.knn = knn
        self.radius = radius
        self.centered = centered
        self.planes = nn.Parameter(torch.empty(3, channels, resolution, resolution).uniform_(-init_range, init_range))
        self.proj = nn.Linear(knn * 3 * channels, embed_dim)

    def features(self, pos: Positions) -> torch.Tensor:
        """(B, N, K·3·C) tri-plane features of the positioned points (per forward)."""
        def build() -> torch.Tensor:
            coords, bounds = points_and_bounds(pos, 'TriPlane')
            xyz = coords.float()
            low, high = bounds[:, None, 0].float(), bounds[:, None, 1].float()
            if self.centered:
                center = (low + high) / 2
                xyz, low, high = xyz - center, low - center, high - center
            if self.knn > 1:
                index = nearest_neighbors(xyz, self.knn)                           # (B, N, K)
                xyz = xyz[torch.arange(xyz.shape[0], device=xyz.device)[:, None, None], index]   # (B, N, K, 3)
            else:
                xyz = xyz.unsqueeze(2)
            uv = triplane_coords(xyz, low.unsqueeze(1), high.unsqueeze(1), self.radius)   # (B, N, K, 3, 2)
            return sample_triplane(self.planes, uv).flatten(-3)
        return self.cached_table('features', pos, build)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, N, embed_dim) embedding of the positioned points: the features through the linear layer."""
        return self.proj(self.features(pos))

    def extra_repr(self) -> str:
        channels, resolution = self.planes.shape[1], self.planes.shape[-1]
        return (f'planes 3 x {channels} x {resolution}^2, knn={self.knn}, radius={self.radius}, '
                f'centered={self.centered}')
