"""Batched point sampling and grouping in pure torch, as PointNet++'s CUDA ops define them (Qi et al., NeurIPS 2017;
the ``pointnet2`` ops that 3DETR and V-DETR compile), on any device; farthest-point sampling of float32 clouds on the
CPU goes through the compiled fpsample library where it is installed (:mod:`vispe.geometry.fpsample_backend`), with
the same indices."""
from __future__ import annotations

import torch

from vispe.geometry.checks import check_finite, checking_values
from vispe.geometry.fpsample_backend import fpsample_farthest_points, fpsample_importable, fpsample_module

__all__ = ['FPS_BACKENDS', 'ball_query', 'farthest_point_sample', 'group_points']

FPS_BACKENDS = ('auto', 'fpsample', 'torch')


def _check_points(name: str, xyz: torch.Tensor) -> None:
    if not isinstance(xyz, torch.Tensor) or xyz.ndim != 3 or xyz.shape[-1] != 3:
        shape = tuple(xyz.shape) if isinstance(xyz, torch.Tensor) else type(xyz).__name__
        raise ValueError(f'{name} must be (B, N, 3) point coordinates; got {shape}.')


def farthest_point_sample(xyz: torch.Tensor, num_samples: int, backend: str = 'auto') -> torch.Tensor:
    """Indices (B, num_samples) int64 on xyz's device of farthest-point sampling, starting from point 0 as
    PointNet++'s op: each next index is the point farthest (squared Euclidean distance) from those already chosen;
    ties take the lowest index.

    Args:
        xyz: (B, N, 3) points.
        num_samples: how many to keep, at most N.
        backend: ``'torch'``: a loop of ``num_samples`` torch steps, on any device and dtype (the reference);
            ``'fpsample'``: the fpsample library, one compiled call per cloud, for float32 CPU clouds of finite
            points, not while torch.compile / torch.export trace (the same indices: its float32 arithmetic is the
            loop's and its ties are put in the loop's order); ``'auto'``: fpsample where it applies and is
            installed, else torch. Other dtypes stay with torch, since fpsample's float32 distances could order
            float64 points otherwise.
    """
    _check_points('farthest_point_sample: xyz', xyz)
    count = xyz.shape[1]
    if not 1 <= num_samples <= count:
        raise ValueError(f'farthest_point_sample: asked for {num_samples} samples of clouds of {count} points; ask '
                         f'for 1 to {count}, or give the scenes more points (a larger point budget).')
    if backend not in FPS_BACKENDS:
        raise ValueError(f"farthest_point_sample: unknown backend {backend!r}; choose 'auto' (fpsample for float32 "
                         f"CPU clouds where it is installed, else torch), 'fpsample' or 'torch'.")
    if backend == 'fpsample':
        _check_fpsample_applies(xyz)
        return fpsample_farthest_points(xyz, num_samples)
    if backend == 'auto' and _fpsample_applies(xyz):
        return fpsample_farthest_points(xyz, num_samples)
    return _torch_farthest_points(xyz, num_samples)


def _fpsample_applies(xyz: torch.Tensor) -> bool:
    """Whether ``'auto'`` hands ``xyz`` to fpsample: a float32 CPU cloud of finite points, not traced, fpsample
    installed."""
    return (checking_values(xyz) and xyz.device.type == 'cpu' and xyz.dtype == torch.float32
            and fpsample_importable() and bool(torch.isfinite(xyz).all()))


def _check_fpsample_applies(xyz: torch.Tensor) -> None:
    """Refuse, naming the fix, a cloud that ``backend='fpsample'`` cannot sample as the torch loop does."""
    where = "farthest_point_sample(backend='fpsample')"
    if xyz.device.type != 'cpu':
        raise ValueError(f"{where} samples CPU tensors; xyz is on {xyz.device}. Use backend='torch' (or 'auto'), "
                         f"which samples on any device.")
    if xyz.dtype != torch.float32:
        raise ValueError(f"{where} computes in float32; xyz is {xyz.dtype}, whose distances could order the points "
                         f"otherwise. Use backend='torch' (or 'auto') for {xyz.dtype}, or give xyz.float().")
    if not checking_values(xyz):
        raise RuntimeError(f"{where} calls a compiled library, which torch.compile, torch.export and torch.jit cannot "
                           f"trace; use backend='torch' (or 'auto', which does so while tracing).")
    fpsample_module()
    check_finite(xyz, f'{where}: xyz', "fpsample skips or fails on NaN and inf; drop those points or use "
                                       "backend='torch'")


def _torch_farthest_points(xyz: torch.Tensor, num_samples: int) -> torch.Tensor:
    """The reference: ``num_samples`` steps of batched torch ops, on xyz's device and in its dtype."""
    batch, count, _ = xyz.shape
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
