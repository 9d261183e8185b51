"""PointNet++ set abstraction in pure torch (Qi et al., NeurIPS 2017), the pre-encoder of 3DETR (Misra et al.,
ICCV 2021; its ``PointnetSAModuleVotes`` with ``normalize_xyz=True``), with no compiled extension."""
from __future__ import annotations

import torch
from torch import nn

from vispe.geometry.point_sampling import ball_query, farthest_point_sample, group_points
from vispe.registry import MODELS


@MODELS.register_module()
class PointSetAbstraction(nn.Module):
    """Sample ``num_samples`` centres by farthest-point sampling, group the ``group_size`` first points within
    ``radius`` of each (PointNet++'s ball query), and run a shared MLP (1×1 conv, BatchNorm, ReLU per layer)
    on each neighbour's (offset / radius, features), max-pooled over the group.

    Args:
        in_channels: point features besides xyz (3 for colour, 0 for none).
        channels: widths of the shared MLP (3DETR: 64, 128, 256).
        num_samples: centres kept (3DETR: 2048 on ScanNet's 40k points).
        radius: ball radius in metres (0.2).
        group_size: neighbours per centre (64).

    Shapes: points (B, N, 3 + in_channels) -> (xyz (B, M, 3), features (B, M, channels[-1]), indices (B, M)).
    """

    def __init__(self, in_channels: int = 3, channels: tuple[int, ...] = (64, 128, 256), num_samples: int = 2048,
                 radius: float = 0.2, group_size: int = 64) -> None:
        super().__init__()
        if radius <= 0 or num_samples < 1 or group_size < 1 or not channels:
            raise ValueError(f'PointSetAbstraction needs radius > 0, num_samples >= 1, group_size >= 1 and at least '
                             f'one MLP width; got radius={radius}, num_samples={num_samples}, '
                             f'group_size={group_size}, channels={channels}.')
        self.in_channels = in_channels
        self.num_samples = num_samples
        self.radius = radius
        self.group_size = group_size
        self.channels = channels[-1]
        layers: list[nn.Module] = []
        width = in_channels + 3
        for out in channels:
            layers += [nn.Conv2d(width, out, 1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            width = out
        self.mlp = nn.Sequential(*layers)

    def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if points.ndim != 3 or points.shape[-1] != 3 + self.in_channels:
            raise ValueError(f'PointSetAbstraction takes points (B, N, {3 + self.in_channels}) = xyz and '
                             f'{self.in_channels} feature channels; got {tuple(points.shape)}. Set in_channels to '
                             f'the features the dataset gives (use_color: 3).')
        xyz = points[..., :3].contiguous()
        with torch.no_grad():
            centres_index = farthest_point_sample(xyz.detach(), self.num_samples)
            centres = torch.gather(xyz, 1, centres_index[..., None].expand(-1, -1, 3))
            neighbours = ball_query(self.radius, self.group_size, xyz.detach(), centres)
        offsets = (group_points(xyz, neighbours) - centres[:, :, None]) / self.radius
        grouped = offsets if self.in_channels == 0 else torch.cat([offsets, group_points(points[..., 3:],
                                                                                        neighbours)], dim=-1)
        features = self.mlp(grouped.permute(0, 3, 1, 2)).amax(dim=-1)
        return centres, features.transpose(1, 2), centres_index


@MODELS.register_module()
class PointNet2Backbone(nn.Module):
    """PointNet++'s hierarchy (Qi et al., NeurIPS 2017; VoteNet's backbone): set-abstraction levels, each grouping the
    centres and features of the level before, so the last level's tokens see a larger neighbourhood (its radius)
    through relative positions only.

    Args:
        levels: :class:`PointSetAbstraction` arguments per level; level i > 0 takes the channels of level i − 1
            (its ``in_channels`` is set from them).
        in_channels: point features besides xyz of the input (3 for colour).

    Shapes: points (B, N, 3 + in_channels) -> (xyz (B, M, 3), features (B, M, C), indices (B, M) into the input's
    points), M and C those of the last level.
    """

    def __init__(self, levels: list[dict], in_channels: int = 3) -> None:
        super().__init__()
        if not levels:
            raise ValueError('PointNet2Backbone needs at least one level (PointSetAbstraction arguments).')
        modules = []
        for index, level in enumerate(levels):
            if 'in_channels' in level:
                raise ValueError(f'PointNet2Backbone level {index} sets in_channels; the levels take theirs from the '
                                 f'input (in_channels) and from the level before: leave it out.')
            modules.append(PointSetAbstraction(in_channels=in_channels, **level))
            in_channels = modules[-1].channels
        self.levels = nn.ModuleList(modules)
        for before, after in zip(modules, modules[1:]):
            if after.num_samples > before.num_samples:
                raise ValueError(f'PointNet2Backbone levels keep fewer centres each; got {before.num_samples} then '
                                 f'{after.num_samples}.')
        self.in_channels = modules[0].in_channels
        self.num_samples = modules[-1].num_samples
        self.channels = modules[-1].channels

    def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        indices = None
        for level in self.levels:
            xyz, features, level_indices = level(points)
            indices = level_indices if indices is None else torch.gather(indices, 1, level_indices)
            points = torch.cat([xyz, features], dim=-1)
        return xyz, features, indices
