"""3DETR's heading code for rotated boxes (Misra et al., ICCV 2021, SUN RGB-D; V-DETR keeps it): the yaw is one of
K bins, centred at k·2π/K, plus a residual within the bin predicted in units of half a bin (π/K).

A head predicts (..., 2K) numbers: K bin logits, then K normalised residuals, one per bin; the yaw is the centre of
the most likely bin plus that bin's residual. The loss is a cross-entropy over the bins and a Huber loss (δ = 1) of
the true bin's normalised residual (:class:`~vispe.models.vdetr.BoxSetCriterion`).
"""
from __future__ import annotations

import math

import torch

__all__ = ['check_num_yaw_bins', 'decode_yaw', 'yaw_bin_targets']


def check_num_yaw_bins(num_yaw_bins: object, owner: str) -> int:
    """``num_yaw_bins`` checked: an int >= 0 (0: axis-aligned boxes, no heading code)."""
    if isinstance(num_yaw_bins, bool) or not isinstance(num_yaw_bins, int) or num_yaw_bins < 0:
        raise ValueError(f'{owner} num_yaw_bins is the number of heading bins of rotated boxes (12 as 3DETR), or 0 '
                         f'for axis-aligned boxes; got {num_yaw_bins!r}.')
    return num_yaw_bins


def yaw_bin_targets(yaw: torch.Tensor, num_bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(...) yaw in radians -> its bin (...) int64 in 0..K-1 and its normalised residual (...) in [-1, 1)."""
    width = 2 * math.pi / num_bins
    shifted = torch.remainder(yaw + width / 2, 2 * math.pi)
    bins = torch.div(shifted, width, rounding_mode='floor').long().clamp(max=num_bins - 1)
    residual = shifted - bins.to(shifted.dtype) * width - width / 2
    return bins, residual / (width / 2)


def decode_yaw(logits: torch.Tensor, residuals: torch.Tensor) -> torch.Tensor:
    """Bin logits (..., K) and normalised residuals (..., K) -> yaw (...) in [-π, π): the best bin's centre plus
    its residual (differentiable through the residual); float32 at least (half precision would lose ~0.01 rad)."""
    num_bins = logits.shape[-1]
    width = 2 * math.pi / num_bins
    bins = logits.argmax(-1, keepdim=True)
    residuals = residuals.float() if residuals.dtype in (torch.float16, torch.bfloat16) else residuals
    yaw = bins.squeeze(-1).to(residuals.dtype) * width + residuals.gather(-1, bins).squeeze(-1) * (width / 2)
    return torch.remainder(yaw + math.pi, 2 * math.pi) - math.pi
