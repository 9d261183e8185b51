"""PETR: the 3D position embedding of camera rays (Liu, Wang, Zhang, Sun; ECCV 2022).

Every feature cell of every camera is lifted to D points along its ray (LID or UD depth bins), normalised to
the position range, passed through an inverse sigmoid and a 1×1-conv MLP over the D·3 values; the result,
plus the adapted multi-view 2D sine embedding, is added to the decoder's keys. Queries come from learnable 3D
reference points through ``pos2posemb3d`` and an MLP. Exact to megvii-research/PETR
(``PETRHead.position_embeding``, ``_init_layers``, ``forward``).
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch

from vispe.encodings.base import apply_learned
from vispe.encodings.camera import (CameraEncoding, adapted_sine, inverse_sigmoid, multiview_grid, pointwise_mlp,
                                    pos2posemb3d, query_mlp)
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions, depth_bins, frustum_pixels, homogeneous_pixels, lift, normalize_points
from vispe.registry import ENCODINGS

NUSCENES_POSITION_RANGE = (-61.2, -61.2, -10.0, 61.2, 61.2, 10.0)
RANGE_OPTION = Option(float, sequence=True, length=6, doc='(xmin, ymin, zmin, xmax, ymax, zmax) in metres of the '
                                                          'scene frame, max > min (PETR on nuScenes: ±61.2, ±10); '
                                                          'the trained model depends on it, so it is fixed at build.')


def check_position_range(owner: str, position_range: Sequence[float], depth_start: float) -> None:
    """Max above min on every axis, and a depth range that the x range can hold."""
    low, high = position_range[:3], position_range[3:]
    if any(hi <= lo for lo, hi in zip(low, high)):
        raise ValueError(f'{owner} position_range must be (xmin, ymin, zmin, xmax, ymax, zmax) with max > min on '
                         f'every axis; got {tuple(position_range)}.')
    if not high[0] > depth_start:
        raise ValueError(f'{owner} depth bins run from depth_start={depth_start} to position_range[3]={high[0]} (as '
                         f'PETR); make position_range[3] larger than depth_start.')


def frustum_homogeneous(feat_size: tuple[int, int], image_size: tuple[int, int], depths: torch.Tensor,
                        pixel: str) -> torch.Tensor:
    """(h·w·D, 4) PETR's homogeneous frustum ``(u·max(d, 1e-5), v·max(d, 1e-5), d, 1)`` of every cell and bin."""
    uv = frustum_pixels(feat_size, image_size, pixel, depths.device)[:, :, None, :].expand(*feat_size, len(depths), 2)
    return homogeneous_pixels(uv, depths.expand(*feat_size, -1)).reshape(-1, 4)


@ENCODINGS.register_module()
class PETR(CameraEncoding):
    """PETR's 3D position embedding of camera rays, with its multi-view 2D sine branch.

    For cell (i, j) of an h×w feature map of (H, W) padded images, the pixel is the cell's top-left corner
    ``(u, v) = (j·W/w, i·H/h)``; depths ``d_0..d_{D-1}`` are LID bins ``d_0 + (d_max − d_0)·k(k+1)/(D(D+1))`` or UD
    bins ``d_0 + k(d_max − d_0)/D`` with ``d_max = position_range[3]``. Each ``img2lidar·(u·d, v·d, d, 1)`` is
    normalised to the position range, inverse-sigmoided (clamped at 1e-5) and laid out as D·3 channels
    (channel 3k + axis); ``position_encoder`` = 1×1 conv (3D -> 4C), ReLU, 1×1 conv (4C -> C). Keys: that, plus
    ``adapt_pos3d`` of the multi-view sine table (``with_multiview``). Queries: ``query_embedding(pos2posemb3d(r))``
    of reference points r in [0, 1] (PETR's learnable ``reference_points``).

    The camera-independent frustum (pixels × depths) is cached per feature and image size, and the MLP's input
    (the frustum lifted by the rig's ``img2lidar``, normalised and inverse-sigmoided) per rig: at inference with
    a fixed rig only the MLP runs; in training each new rig costs one batched matrix product. PETR's
    ``coords_mask`` (points outside the range) is computed but never used by the reference, so it is not computed
    here; padded cells are masked out of attention by the detector.

    Args:
        embed_dim: C.
        depth_num: D bins (64).
        depth_start: d_0 (1 m).
        position_range: see :data:`NUSCENES_POSITION_RANGE`.
        depth_mode: 'LID' (PETR's default in every config) or 'UD'.
        with_multiview: add the multi-view 2D sine branch (True in every PETR config).
        use_inverse_sigmoid: the inverse sigmoid before the MLP (PETR: True; False feeds the normalised points).
        pixel: 'corner' (PETR) or 'center' (cell centres).
        temperature: the sine base (10000).

    Shapes: key_embedding(pos with V views of (h, w) and cameras, B) -> (B, V·h·w, C);
    encode_queries((..., Q, 3)) -> (..., Q, C).
    """

    paper: ClassVar[str] = 'PETR, Liu et al. ECCV 2022'
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({}, dict(depth_mode='UD'))
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=2, doc='The token width C (even: the sine branch has 3 x '
                                                               'C/2 features).'),
        'depth_num': Option(int, ge=1, doc='Depth bins per ray (PETR: 64); the MLP input has 3 x depth_num channels.'),
        'depth_start': Option(float, gt=0, doc='The first depth bin in metres (PETR: 1).'),
        'position_range': RANGE_OPTION,
        'depth_mode': Option(str, choices=('LID', 'UD'), doc="The bins: 'LID' (linear-increasing, PETR's default) "
                                                             "or 'UD' (uniform)."),
        'with_multiview': Option(bool, doc='Add the multi-view 2D sine branch (True in every PETR config).'),
        'use_inverse_sigmoid': Option(bool, doc='Inverse sigmoid of the normalised points before the MLP (PETR: '
                                                'True).'),
        'pixel': Option(str, choices=('corner', 'center'), doc="The pixel of a feature cell: 'corner' (PETR) or "
                                                               "'center'."),
        'temperature': Option(float, gt=0, doc='The sine base is positive (PETR uses 10000); fixed at build.'),
    }

    def __init__(self, embed_dim: int, depth_num: int = 64, depth_start: float = 1.0,
                 position_range: Sequence[float] = NUSCENES_POSITION_RANGE, depth_mode: str = 'LID',
                 with_multiview: bool = True, use_inverse_sigmoid: bool = True, pixel: str = 'corner',
                 temperature: float = 10000.) -> None:
        super().__init__()
        check_position_range('PETR', position_range, depth_start)
        self.embed_dim = embed_dim
        self.depth_num = depth_num
        self.depth_start = depth_start
        self.position_range = tuple(position_range)
        self.depth_mode = depth_mode
        self.with_multiview = with_multiview
        self.use_inverse_sigmoid = use_inverse_sigmoid
        self.pixel = pixel
        self.temperature = temperature
        self.position_encoder = pointwise_mlp(depth_num * 3, embed_dim * 4, embed_dim)
        if with_multiview:
            self.adapt_pos3d = pointwise_mlp(embed_dim * 3 // 2, embed_dim * 4, embed_dim)
        self.query_embedding = query_mlp(embed_dim * 3 // 2, embed_dim)
        self.register_buffer('depths', depth_bins(depth_num, depth_start, self.position_range[3], depth_mode),
                             persistent=False)

    def frustum(self, pos: Positions) -> torch.Tensor:
        """(B, V, h, w, D, 3) scene-frame points of every cell and depth bin, normalised to the position range."""
        views, height, width = multiview_grid(pos, 'PETR')
        cameras = pos.camera.cameras
        image_size = tuple(int(s) for s in cameras.image_size)
        depths = self.depths.to(pos.device)
        homogeneous = self.cached_table('frustum', pos, lambda: frustum_homogeneous((height, width), image_size, depths,
                                                                                   self.pixel),
                                        across_forwards=True, key=image_size)
        points = lift(cameras.img2lidar, homogeneous[None, None])
        points = points.view(cameras.num_samples, views, height, width, self.depth_num, 3)
        return normalize_points(points, self.position_range)

    def ray_inputs(self, pos: Positions) -> torch.Tensor:
        """(B·V, 3·D, h, w) the input of ``position_encoder``: the normalised frustum, inverse-sigmoided, channel
        3k + axis. It depends on the rig alone, so it is cached per rig (:meth:`Cameras.host_fingerprint`) and
        grid: a fixed rig at inference pays for it once. Cameras whose fingerprint would make the host wait for a
        GPU (built there, not moved from the CPU) and traced models build it in every forward."""
        multiview_grid(pos, 'PETR')
        rig = pos.camera.cameras.host_fingerprint()
        if rig is None:
            return self._build_ray_inputs(pos)
        return self.cached_table('ray_inputs', pos, lambda: self._build_ray_inputs(pos), across_forwards=True,
                                 key=rig)

    def _build_ray_inputs(self, pos: Positions) -> torch.Tensor:
        frustum = self.frustum(pos)
        if self.use_inverse_sigmoid:
            frustum = inverse_sigmoid(frustum)
        batch, views, height, width = frustum.shape[:4]
        return frustum.permute(0, 1, 4, 5, 2, 3).reshape(batch * views, self.depth_num * 3, height, width)

    def ray_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, V·h·w, C): ``position_encoder`` of the (inverse-sigmoided) normalised frustum."""
        views, height, width = multiview_grid(pos, 'PETR')
        embedding = apply_learned(self.position_encoder, self.ray_inputs(pos))
        embedding = embedding.view(pos.camera.cameras.num_samples, views, self.embed_dim, height, width)
        return embedding.permute(0, 1, 3, 4, 2).flatten(1, 3)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, V·h·w, C): the rays' embedding plus, with ``with_multiview``, the adapted multi-view sine."""
        embedding = self.ray_embedding(pos)
        if self.with_multiview:
            embedding = embedding + adapted_sine(self.adapt_pos3d, pos, self.embed_dim, self.temperature)
        return embedding

    def encode_queries(self, reference: torch.Tensor) -> torch.Tensor:
        return apply_learned(self.query_embedding, pos2posemb3d(reference, self.embed_dim // 2, self.temperature))

    def extra_repr(self) -> str:
        return (f'embed_dim={self.embed_dim}, depth_num={self.depth_num}, depth_mode={self.depth_mode!r}, '
                f'position_range={self.position_range}, with_multiview={self.with_multiview}')
