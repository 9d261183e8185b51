"""PSNR and SSIM of rendered views as the 3DGS line of work reports them (3DGS's ``metrics.py``, which TC-GS and
its baselines use, on the renders it saved as 8-bit PNGs): images clamped to [0, 1] and rounded to 8 bits as
torchvision's ``save_image`` rounds them (:func:`to_8_bit`); SSIM with an 11×11 Gaussian window of σ 1.5 applied per
channel with zero padding, C1 = 0.01², C2 = 0.03², averaged over the whole map (kornia's SSIM, which
vispe.evaluation uses for novel views, pads by reflection instead and differs near the borders). :func:`psnr` and
:func:`ssim` take the images as given (clamped); rounding is the caller's step.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = ['psnr', 'ssim', 'to_8_bit']

WINDOW = 11
SIGMA = 1.5
C1, C2 = 0.01 ** 2, 0.03 ** 2


def to_8_bit(image: torch.Tensor) -> torch.Tensor:
    """``image`` as an 8-bit PNG stores it, back in [0, 1]: ⌊255·clamp(x, 0, 1) + 0.5⌋ / 255."""
    return torch.floor(image.clamp(0, 1) * 255 + 0.5) / 255


def psnr(image: torch.Tensor, reference: torch.Tensor) -> float:
    """PSNR (dB) of an (H, W, 3) ``image`` against ``reference`` in [0, 1]; ∞ when they are equal."""
    mse = float(((image.clamp(0, 1).double() - reference.clamp(0, 1).double()) ** 2).mean())
    return math.inf if mse == 0 else -10 * math.log10(mse)


def ssim(image: torch.Tensor, reference: torch.Tensor) -> float:
    """SSIM of an (H, W, 3) ``image`` against ``reference`` in [0, 1] (the module docstring)."""
    first, second = (view.clamp(0, 1).double().permute(2, 0, 1)[None] for view in (image, reference))
    channels = first.shape[1]
    offsets = torch.arange(WINDOW, dtype=torch.float64) - WINDOW // 2
    weights = torch.exp(-offsets ** 2 / (2 * SIGMA ** 2))
    weights = weights / weights.sum()
    window = (weights[:, None] * weights[None, :]).expand(channels, 1, WINDOW, WINDOW).to(first.device)
    blur = lambda values: F.conv2d(values, window, padding=WINDOW // 2, groups=channels)   # noqa: E731
    mean_first, mean_second = blur(first), blur(second)
    variance_first = blur(first * first) - mean_first ** 2
    variance_second = blur(second * second) - mean_second ** 2
    covariance = blur(first * second) - mean_first * mean_second
    index = ((2 * mean_first * mean_second + C1) * (2 * covariance + C2)) / (
        (mean_first ** 2 + mean_second ** 2 + C1) * (variance_first + variance_second + C2))
    return float(index.mean())
