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
