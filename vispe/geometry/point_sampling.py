"""Batched point sampling and grouping in pure torch, as PointNet++'s CUDA ops define them (Qi et al., NeurIPS 2017;
the ``pointnet2`` ops that 3DETR and V-DETR compile), on any device."""
from __future__ import annotations

import torch

__all__ = ['ball_query', 'farthest_point_sample', 'group_points']


def _check_points(name: str, xyz: torch.Tensor) -> None:
    if not isinstance(xyz, torch.Tensor) or xyz.ndim != 3 or xyz.shape[-1] != 3:
        shape = tuple(xyz.shape) if isinstance(xyz, torch.Tensor) else type(xyz).__name__
        raise ValueError(f'{name} must be (B, N, 3) point coordinates; got {shape}.')


def farthest_point_sample(xyz: torch.Tensor, num_samples: int) -> torch.Tensor:
    """Indices (B, num_samples) int64 of farthest-point sampling, starting from point 0 as PointNet++'s op: each
    next index is the point farthest (squared Euclidean distance) from those already chosen; ties take the
    lowest index.

    Args:
        xyz: (B, N, 3) points.
        num_samples: how many to keep, at most N.
    """
    _check_points('farthest_point_sample: xyz', xyz)
    batch, count, _ = xyz.shape
    if not 1 <= num_samples <= count:
        raise ValueError(f'farthest_point_sample: asked for {num_samples} samples of clouds of {count} points; ask '
                         f'for 1 to {count}, or give the scenes more points (a larger point budget).')
    chosen = torch.zeros(batch, num_samples, dtype=torch.int64, device=xyz.device)
    nearest = torch.full((batch, count), torch.inf, dtype=xyz.dtype, device=xyz.device)
    farthest = torch.zeros(batch, dtype=torch.int64, device=xyz.device)
    rows = torch.arange(batch, device=xyz.device)
    for step in range(num_samples):
        chosen[:, step] = farthest
        centre = xyz[rows, farthest][:, None, :]
        nearest = torch.minimum(nearest, (xyz - centre).square().sum(-1))
        farthest = nearest.argmax(-1)
    return chosen


def ball_query(radius: float, group_size: int, xyz: torch.Tensor, centres: torch.Tensor,
               chunk: int = 512) -> torch.Tensor:
    """Indices (B, M, group_size) int64 of the first ``group_size`` points (in index order) closer than ``radius``
    to each centre (strictly, as PointNet++'s CUDA ball query); a group with fewer points repeats its first one. A
    centre with no point that close (possible only when the centres are not among the points) takes its nearest.

    Memory: ``chunk`` centres at a time, about 13 bytes per (centre, point) pair (float32 distance, bool mask,
    int64 rank): B * chunk * N * 13 bytes, 1 GB at B = 8, N = 20k, chunk = 512, whatever M; lower ``chunk`` for
    larger clouds.

    Args:
        radius: the ball's radius (> 0).
        group_size: points per group.
        xyz: (B, N, 3) points.
        centres: (B, M, 3) ball centres.
    """
    _check_points('ball_query: xyz', xyz)
    _check_points('ball_query: centres', centres)
    if centres.shape[0] != xyz.shape[0]:
        raise ValueError(f'ball_query: centres {tuple(centres.shape)} and xyz {tuple(xyz.shape)} must have the same '
                         f'batch size B.')
    if radius <= 0 or group_size < 1:
        raise ValueError(f'ball_query needs radius > 0 and group_size >= 1; got {radius} and {group_size}.')
    count = xyz.shape[1]
    order = torch.arange(count, device=xyz.device)
    groups = []
    for start in range(0, centres.shape[1], chunk):
        distances = torch.cdist(centres[:, start:start + chunk], xyz)
        ranks = torch.where(distances < radius, order, count)
        first = ranks.topk(min(group_size, count), dim=-1, largest=False, sorted=True).values
        lead = torch.where(first[..., :1] < count, first[..., :1], distances.argmin(-1, keepdim=True))
        first = torch.where(first < count, first, lead)
        if group_size > count:
            first = torch.cat([first, lead.expand(-1, -1, group_size - count)], dim=-1)
        groups.append(first)
    return torch.cat(groups, dim=1)


def group_points(features: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Gather (B, M, k, C) rows of features (B, N, C) at index (B, M, k) int64 (e.g. :func:`ball_query`'s)."""
    if features.ndim != 3 or index.ndim != 3 or index.shape[0] != features.shape[0] or index.dtype != torch.int64:
        raise ValueError(f'group_points takes features (B, N, C) and int64 index (B, M, k) with the same B; got '
                         f'{tuple(features.shape)} and {tuple(index.shape)} {index.dtype}.')
    batch, groups, size = index.shape
    flat = index.reshape(batch, groups * size, 1).expand(-1, -1, features.shape[-1])
    return torch.gather(features, 1, flat).reshape(batch, groups, size, features.shape[-1])
