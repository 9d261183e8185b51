"""3DPPE: the 3D point positional encoding (Shu, Deng, Yu, Liu; ICCV 2023).

Each feature cell becomes one 3D point at its depth (PETR lifts D points along the ray); the point, normalised
to the position range and inverse-sigmoided, goes through ``pos2posemb3d`` and an MLP that the object queries
share, so keys and queries live in one embedding space. The depth comes from a camera-aware hybrid depth net
(direct + categorical, mixed by a learnable σ(λ)) supervised by LiDAR depth. Exact to drilistbox/3DPPE
(``PETRDepthHeadV2`` with ``share_pe_encoder``, ``CameraAwareDepthNet``).
"""
from __future__ import annotations

from typing import Any, ClassVar, Sequence

import torch

from vispe.encodings.base import apply_learned
from vispe.encodings.camera import (CameraEncoding, FeatureEncoding, adapted_sine, check_camera_batch, inverse_sigmoid,
                                    multiview_grid, pixel_stride, pointwise_mlp, pos2posemb3d, query_mlp)
from vispe.encodings.options import Option, model_fact
from vispe.encodings.petr import NUSCENES_POSITION_RANGE, RANGE_OPTION, check_position_range
from vispe.encodings.ppe3d.depth_loss import depth_losses, sparse_depth_targets
from vispe.encodings.ppe3d.depth_net import CameraAwareDepthNet
from vispe.geometry import Positions, depth_map_points, normalize_points
from vispe.registry import ENCODINGS

DEPTH_SOURCES = ('predicted', 'gt', 'hybrid')


@ENCODINGS.register_module()
class PPE3D(CameraEncoding):
    """3DPPE's point embedding of camera tokens, with the hybrid depth net and its depth losses.

    For cell (i, j) with depth d̂ (pixel: the cell's top-left corner as PETR), the point
    ``img2lidar·(u·max(d̂, 1e-5), v·max(d̂, 1e-5), d̂, 1)`` is normalised to the position range and
    inverse-sigmoided; keys get ``position_encoder(pos2posemb3d(p))`` (Linear 3C/2 -> C, ReLU, Linear C -> C)
    plus the adapted multi-view sine (``with_multiview``); queries get the same ``position_encoder`` of
    ``pos2posemb3d(inverse_sigmoid(r))`` (``query_embedding`` is the same module, as the reference's
    ``share_pe_encoder``). The depth net (:class:`~vispe.encodings.ppe3d.depth_net.CameraAwareDepthNet`) reads
    the backbone features and the cameras and returns the context features that become the memory.

    Depth sources (the paper's ablations): 'predicted' (the hybrid depth, 3DPPE), 'gt' (per-cell LiDAR depth from
    ``pos.camera.depth``, cells without a point at ``position_range[3]`` as the reference's ground-truth-depth head), 'hybrid'
    (LiDAR depth where a cell has one, predicted elsewhere).

    Args:
        embed_dim: C.
        in_channels: channels of the backbone features (filled in by the detector).
        depth_num: depth bins of the categorical head (3DPPE: 16; uniform, both ends included).
        depth_start: first bin (1 m); the last is ``position_range[3]``.
        position_range: see :data:`vispe.encodings.petr.NUSCENES_POSITION_RANGE`.
        with_multiview: add the multi-view 2D sine branch (True in 3DPPE's configs).
        depth_source: see above.
        mid_channels, context_channels: the depth net's widths (3DPPE: 256, 256; 0 = embed_dim).
        with_dcn, with_aspp, with_pgd: the depth net's deformable heads, ASPP, and direct head + mix.
        depth_loss_weights: (SmoothL1, DFL) weights (0.1, 0.25).

    Shapes: encode_features((B·V, in_channels, h, w), pos) -> (B·V, context_channels, h, w) and extras;
    key_embedding(pos, B, extras) -> (B, V·h·w, C); encode_queries((..., Q, 3)) -> (..., Q, C).
    """

    paper: ClassVar[str] = '3DPPE, Shu et al. ICCV 2023'
    examples: ClassVar[tuple[dict[str, Any], ...]] = (dict(mid_channels=32, with_dcn=False),)
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=2, doc='The token width C (even: the sine tables have '
                                                               'C/2 features per axis).'),
        'in_channels': model_fact('in_channels'),
        'depth_num': Option(int, ge=2, doc='Categorical depth bins (3DPPE: 16).'),
        'depth_start': Option(float, gt=0, doc='The first depth bin in metres (3DPPE: 1).'),
        'position_range': RANGE_OPTION,
        'with_multiview': Option(bool, doc='Add the multi-view 2D sine branch (True in 3DPPE).'),
        'depth_source': Option(str, choices=DEPTH_SOURCES, doc="Where the points' depth comes from: 'predicted' "
                                                               "(3DPPE), 'gt' (LiDAR) or 'hybrid' (LiDAR where known)."),
        'mid_channels': Option(int, ge=0, multiple_of=4, doc='Width of the depth net (3DPPE: 256; 0 = embed_dim); '
                                                             'a multiple of 4 (its heads have 4 groups).'),
        'context_channels': Option(int, ge=0, doc='Width of the context features (3DPPE: 256; 0 = embed_dim).'),
        'with_dcn': Option(bool, doc='Deformable 3x3 convolutions in the depth heads (3DPPE: True).'),
        'with_aspp': Option(bool, doc='ASPP at the end of the depth stem (3DPPE: True).'),
        'with_pgd': Option(bool, doc='The direct depth head and the learnable mix (3DPPE: True).'),
        'depth_loss_weights': Option(float, ge=0, sequence=True, length=2,
                                     doc='(SmoothL1, DFL) depth loss weights (3DPPE: 0.1, 0.25).'),
    }

    def __init__(self, embed_dim: int, in_channels: int, depth_num: int = 16, depth_start: float = 1.0,
                 position_range: Sequence[float] = NUSCENES_POSITION_RANGE, with_multiview: bool = True,
                 depth_source: str = 'predicted', mid_channels: int = 0, context_channels: int = 0,
                 with_dcn: bool = True, with_aspp: bool = True, with_pgd: bool = True,
                 depth_loss_weights: Sequence[float] = (0.1, 0.25)) -> None:
        super().__init__()
        check_position_range('PPE3D', position_range, depth_start)
        self.embed_dim = embed_dim
        self.in_channels = in_channels
        self.depth_num = depth_num
        self.depth_start = depth_start
        self.position_range = tuple(position_range)
        self.with_multiview = with_multiview
        self.depth_source = depth_source
        self.mid_channels = mid_channels or embed_dim
        self.context_channels = context_channels or embed_dim
        self.with_dcn, self.with_aspp, self.with_pgd = with_dcn, with_aspp, with_pgd
        self.depth_loss_weights = tuple(depth_loss_weights)
        self.depth_net = CameraAwareDepthNet(in_channels, self.mid_channels, self.context_channels, depth_num,
                                             depth_start, self.position_range[3], with_aspp=with_aspp,
                                             with_dcn=with_dcn, with_pgd=with_pgd)
        self.position_encoder = query_mlp(embed_dim * 3 // 2, embed_dim)
        self.query_embedding = self.position_encoder
        if with_multiview:
            self.adapt_pos3d = pointwise_mlp(embed_dim * 3 // 2, embed_dim * 4, embed_dim)

    def out_channels(self, in_channels: int) -> int:
        return self.context_channels

    def encode_features(self, features: torch.Tensor, pos: Positions) -> FeatureEncoding:
        views, height, width = multiview_grid(pos, 'PPE3D')
        cameras = pos.camera.cameras
        output = self.depth_net(features, cameras.intrinsics, cameras.extrinsics)
        depth = output.depth.view(cameras.num_samples, views, height, width)
        return FeatureEncoding(output.context, dict(depth_logits=output.logits, depth=depth))

    def cell_depth(self, pos: Positions, predicted: torch.Tensor) -> torch.Tensor:
        """(B, V, h, w) the depth the points use (see ``depth_source``)."""
        if self.depth_source == 'predicted':
            return predicted
        if not pos.has('depth'):
            raise ValueError(f"PPE3D depth_source={self.depth_source!r} reads LiDAR depth from the positions; the batch "
                             f"has none. Load it with MultiViewDetection(with_depth=True) (also for evaluation), or "
                             f"use depth_source='predicted'.")
        measured = self.measured_depth(pos)
        fallback = torch.full_like(predicted, self.position_range[3]) if self.depth_source == 'gt' else predicted
        return torch.where(measured > 0, measured, fallback)

    def measured_depth(self, pos: Positions) -> torch.Tensor:
        """(B, V, h, w) each cell's LiDAR depth from ``pos.camera.depth`` (:func:`sparse_depth_targets` at the grid's
        stride, checked against the image size by :func:`pixel_stride`), 0 where the cell has none in range."""
        stride = pixel_stride(pos, 'PPE3D (its measured depth)')
        height, width = pos.grid_size
        measured = sparse_depth_targets(pos.camera.depth, stride, self.depth_start, self.position_range[3])
        return measured[..., :height, :width]

    def points(self, pos: Positions, extras: dict[str, Any]) -> torch.Tensor:
        """(B, V, h, w, 3) the normalised scene-frame points of the cells."""
        # measured depth is checked where it is read (sparse_depth_targets); the predicted depth is lifted as is
        points = depth_map_points(pos.camera.cameras, self.cell_depth(pos, extras['depth']), check_values=False)
        return normalize_points(points, self.position_range)

    def key_embedding(self, pos: Positions, batch: int, extras: dict[str, Any]) -> torch.Tensor:
        if 'depth' not in extras:
            raise ValueError('PPE3D embeds points at the depth its depth net predicts: call encode_features on the '
                             'backbone features first and pass its extras.')
        check_camera_batch(pos, batch, 'PPE3D')
        points = inverse_sigmoid(self.points(pos, extras))
        key_embed = apply_learned(self.position_encoder, pos2posemb3d(points, self.embed_dim // 2)).flatten(1, 3)
        if self.with_multiview:
            key_embed = key_embed + adapted_sine(self.adapt_pos3d, pos, self.embed_dim)
        return key_embed

    def encode_queries(self, reference: torch.Tensor) -> torch.Tensor:
        return apply_learned(self.position_encoder, pos2posemb3d(inverse_sigmoid(reference), self.embed_dim // 2))

    def losses(self, extras: dict[str, Any], pos: Positions) -> dict[str, torch.Tensor]:
        """SmoothL1 on the predicted depth and DFL on the logits against the per-cell LiDAR depth of the positions'
        ``camera.depth`` (none when the batch has no depth)."""
        if not pos.has('depth') or 'depth_logits' not in extras:
            return {}
        predicted = extras['depth']
        targets = self.measured_depth(pos)
        l1_weight, dfl_weight = self.depth_loss_weights
        return depth_losses(extras['depth_logits'], predicted.flatten(0, 1), targets, self.depth_start,
                            self.position_range[3], l1_weight, dfl_weight)

    def extra_repr(self) -> str:
        return (f'embed_dim={self.embed_dim}, depth_num={self.depth_num}, depth_source={self.depth_source!r}, '
                f'position_range={self.position_range}')
