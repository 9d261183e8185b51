"""3DPPE's depth supervision: per-cell LiDAR depth targets, SmoothL1 on the hybrid depth, and DFL on the logits.

Targets (drilistbox/3DPPE ``LoadDepthByMapplingPoints2Images`` and ``PETRDepthHeadV2.depth_loss``): every cell
of the stride-s feature map keeps the *nearest* LiDAR point that falls in it; the cell is then used only when
that depth lies in ``[depth_start, depth_stop)`` (the reference keeps ``start <= d < stop``: a nearest point
outside the range drops the cell, it does not promote a farther point).

Cells: the reference assigns a projected point at pixel u to cell ``round(u / s)``, i.e. the cell centred on
pixel ``j·s``, which is where PETR and 3DPPE place token j (the 'corner' convention of
:func:`vispe.geometry.frustum_pixels`). With vispe's pixel centres at integers, pixel x goes to cell
``floor((x + s/2) / s)`` (ties upward); ``pixel='center'`` uses the block ``[j·s, j·s + s)`` instead, which is
centred on the 'center' token pixel.

Losses (3DPPE's main config): ``SmoothL1(β = 1/9)`` × 0.1 on the hybrid (or any) depth and
``DistributionFocalLoss`` × 0.25 on the logits with the fractional bin ``(d − start)/bin_size`` as target,
``bin_size = (stop − start)/(D − 1)``; each is summed over valid cells and divided by ``max(#valid, 1)``.
"""
from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F

from vispe.geometry.checks import checking_values

__all__ = ['depth_losses', 'distribution_focal_loss', 'sparse_depth_targets']


def _check_no_nan(depth: torch.Tensor, name: str) -> None:
    if torch.isnan(depth).any():
        where = tuple(torch.nonzero(torch.isnan(depth))[0].tolist())
        raise ValueError(f'{name} has NaN (first at index {where}); write 0 for pixels without a depth (the depth '
                         f'PNGs and the LiDAR projection use 0 = no hit) before making depth targets')


def _check_depth_map(depth: torch.Tensor, name: str) -> None:
    """Refuse NaN, infinite or negative measured depth (0 marks a pixel without one); a value check, skipped while a
    model is traced."""
    if not checking_values(depth):
        return
    bad = ~torch.isfinite(depth) | (depth < 0)
    if bool(bad.any()):
        where = tuple(torch.nonzero(bad)[0].tolist())
        value = float(depth[where])
        kind = ('NaN' if math.isnan(value) else f'a negative depth {value:.6g}' if value < 0 else
                f'an infinite depth {value}')
        raise ValueError(f'{name} has {kind} (first at index {where}); write 0 for pixels without a depth (the depth '
                         f'PNGs and the LiDAR projection use 0 = no hit; measured depth is finite and >= 0 metres) '
                         f'before making depth targets')


def sparse_depth_targets(depth: torch.Tensor, stride: int, depth_start: float = 1.0, depth_stop: float = 61.2,
                         pixel: Literal['corner', 'center'] = 'corner') -> torch.Tensor:
    """Per-cell depth targets of a stride-``stride`` feature map from a per-pixel depth map.

    Args:
        depth: (..., H, W) metres, e.g. (B, V, H, W); 0 marks pixels without depth, negative, NaN and infinite
            depths are refused (except while a model is traced). Sparse (projected LiDAR) or dense (rendered) depth
            both work.
        stride: s, image pixels per feature cell.
        depth_start, depth_stop: the valid range ``[start, stop)``.
        pixel: 'corner' (the reference: cells centred on pixel j·s) or 'center' (blocks [j·s, j·s + s)).

    Returns:
        (..., ceil(H/s), ceil(W/s)) float32: the smallest positive depth of each cell, 0 where the cell has
        none or that depth is outside ``[start, stop)``. Pixels beyond the map count as empty (a map smaller
        than a multiple of s behaves as zero-padded at the bottom and right).
    """
    if depth.ndim < 2 or depth.shape[-1] == 0 or depth.shape[-2] == 0:
        raise ValueError(f'depth must have shape (..., H, W) with H, W > 0, got {tuple(depth.shape)}')
    if stride < 1:
        raise ValueError(f'stride must be a positive integer, got {stride}')
    if pixel not in ('corner', 'center'):
        raise ValueError(f"pixel must be 'corner' (the reference) or 'center', got {pixel!r}")
    _check_depth_map(depth, 'depth')
    *leading, height, width = depth.shape
    cells_h, cells_w = math.ceil(height / stride), math.ceil(width / stride)
    before = stride // 2 if pixel == 'corner' else 0
    # pad (crop where negative) so that row y lands in cell (y + before) // s of exactly cells_h cells
    padding = (before, cells_w * stride - width - before, before, cells_h * stride - height - before)
    depth = depth.float().reshape(-1, 1, height, width)
    positive = torch.where(depth > 0, depth, torch.full_like(depth, math.inf))
    nearest = -F.max_pool2d(-F.pad(positive, padding, value=math.inf), stride, stride)
    valid = (nearest >= depth_start) & (nearest < depth_stop)
    return torch.where(valid, nearest, torch.zeros_like(nearest)).reshape(*leading, cells_h, cells_w)


def distribution_focal_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Distribution Focal Loss (Li et al., "Generalized Focal Loss", NeurIPS 2020; mmdet's definition).

    With ``l = floor(t)`` and ``r = l + 1``: ``(r − t)·CE(logits, l) + (t − l)·CE(logits, r)``, per row.

    Args:
        logits: (N, D) bin logits, D >= 2.
        target: (N,) fractional bin index in [0, D − 1]. At ``t = D − 1`` (where mmdet would index bin D)
            the pair is (D − 2, D − 1), which gives the same limit, ``CE(logits, D − 1)``.

    Returns:
        (N,) float32 losses.
    """
    if logits.ndim != 2 or logits.shape[1] < 2 or target.shape != logits.shape[:1]:
        raise ValueError(f'distribution_focal_loss needs logits (N, D >= 2) and target (N,), got '
                         f'{tuple(logits.shape)} and {tuple(target.shape)}')
    num_bins = logits.shape[1]
    target = target.detach().float()
    _check_no_nan(target, 'target')
    if ((target < 0) | (target > num_bins - 1)).any():
        raise ValueError(f'distribution_focal_loss: target bins must lie in [0, {num_bins - 1}], got '
                         f'[{target.min().item():.4g}, {target.max().item():.4g}]; map depths with '
                         f'(d - depth_start) / bin_size and keep only depths in [depth_start, depth_stop)')
    left = target.floor().long().clamp(max=num_bins - 2)
    right = left + 1
    log_probs = logits.float().log_softmax(dim=-1)
    loss_left = -log_probs.gather(1, left[:, None])[:, 0]
    loss_right = -log_probs.gather(1, right[:, None])[:, 0]
    return (right.float() - target) * loss_left + (target - left.float()) * loss_right


def depth_losses(logits: torch.Tensor, depth: torch.Tensor, targets: torch.Tensor, depth_start: float = 1.0,
                 depth_stop: float = 61.2, l1_weight: float = 0.1, dfl_weight: float = 0.25,
                 beta: float = 1.0 / 9.0) -> dict[str, torch.Tensor]:
    """3DPPE's depth losses against per-cell targets (:func:`sparse_depth_targets`).

    Args:
        logits: (N, D, h, w) depth-bin logits (uniform bins from ``depth_start`` to ``depth_stop``, both included).
        depth: (N, 1, h, w) or (N, h, w) predicted depth in metres (3DPPE: the hybrid depth).
        targets: (..., h, w) holding N·h·w cells, e.g. (B, V, h, w) with N = B·V; 0 (or anything outside
            ``[depth_start, depth_stop)``) marks cells without a target.
        l1_weight, beta: SmoothL1 weight and β (0.1 and 1/9 in 3DPPE).
        dfl_weight: Distribution Focal Loss weight (0.25 in 3DPPE).

    Returns:
        ``dict(loss_depth_l1=..., loss_depth_dfl=...)``, float32 scalars: weighted sums over valid cells divided
        by ``max(#valid, 1)``; 0, still connected to the graph, when no cell is valid.
    """
    if logits.ndim != 4 or logits.shape[1] < 2:
        raise ValueError(f'logits must have shape (N, D >= 2, h, w), got {tuple(logits.shape)}')
    num, num_bins, height, width = logits.shape
    if depth.shape not in ((num, 1, height, width), (num, height, width)):
        raise ValueError(f'depth must have shape ({num}, 1, {height}, {width}) or ({num}, {height}, {width}) to '
                         f'match the logits, got {tuple(depth.shape)}')
    if targets.shape[-2:] != (height, width) or targets.numel() != num * height * width:
        raise ValueError(f'targets must hold {num} maps of {height}x{width} cells, e.g. (B, V, {height}, {width}) '
                         f'with B·V = {num}, got {tuple(targets.shape)}; make them with sparse_depth_targets at '
                         f'the stride of these features')
    _check_no_nan(targets, 'depth targets')
    target = targets.detach().float().reshape(-1)
    valid = (target >= depth_start) & (target < depth_stop)
    count = valid.sum().clamp(min=1)
    target = torch.where(valid, target, torch.full_like(target, depth_start))

    pred = depth.float().reshape(-1)
    l1 = F.smooth_l1_loss(pred, target, reduction='none', beta=beta)
    loss_l1 = torch.where(valid, l1, torch.zeros_like(l1)).sum() / count

    bin_size = (depth_stop - depth_start) / (num_bins - 1)
    # rounding guard: a depth just below depth_stop may divide to a hair above D - 1
    bins = ((target - depth_start) / bin_size).clamp(0, num_bins - 1)
    flat_logits = logits.permute(0, 2, 3, 1).reshape(-1, num_bins)
    dfl = distribution_focal_loss(flat_logits, bins)
    loss_dfl = torch.where(valid, dfl, torch.zeros_like(dfl)).sum() / count
    return dict(loss_depth_l1=l1_weight * loss_l1, loss_depth_dfl=dfl_weight * loss_dfl)
