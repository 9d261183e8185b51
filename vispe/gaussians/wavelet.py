"""TC-GS's adaptive wavelet loss between a rendered image and its ground truth (``utils/loss_utils.wavelet_loss``),
for Gaussian-splatting training loops that render (the loss needs images; vispe's codec itself renders none).

A 2-level Haar DWT with zero padding (pytorch_wavelets' ``DWTForward(J=2, wave='haar', mode='zero')``) of both
images; with λ₁ = 1 − s/30000 and λ₂ = s/30000 at training step s:

- s ≤ 25000: λ₁·L1(LL₂) + λ₂·0.2·Σ L1 of the six detail bands (LH, HL, HH of levels 1 and 2);
- s > 25000: λ₁·(0.4, 0.3, 0.3)·L1(LH₁, HL₁, HH₁) + λ₂·(0.4, 0.3, 0.3)·L1(LH₂, HL₂, HH₂),

so the emphasis moves from the coarse image to its details over training (L1: mean absolute difference).
"""
from __future__ import annotations

import functools
import importlib.resources
import importlib.util
import sys
import types

import torch

from vispe.extras import import_extra

__all__ = ['haar_dwt', 'wavelet_loss']

TOTAL_STEPS = 30_000
SWITCH_STEP = 25_000


@functools.lru_cache(maxsize=1)
def _dwt_class() -> type:
    """pytorch_wavelets' ``DWTForward``. The package imports ``pkg_resources.resource_stream`` at import time (for
    its dual-tree filters, unused here), which setuptools ≥ 81 no longer ships; a stand-in reading package data
    through importlib.resources serves that one import and is removed again."""
    stand_in = None
    if importlib.util.find_spec('pkg_resources') is None:
        stand_in = types.ModuleType('pkg_resources')
        stand_in.resource_stream = lambda package, name: importlib.resources.files(package).joinpath(name).open('rb')
        sys.modules['pkg_resources'] = stand_in
    try:
        DWTForward = import_extra('pytorch_wavelets', 'the wavelet loss').DWTForward
    finally:
        if stand_in is not None and sys.modules.get('pkg_resources') is stand_in:
            del sys.modules['pkg_resources']
    return DWTForward


def haar_dwt(images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """2-level Haar DWT, zero padding: (B, C, H, W) -> low band (B, C, h₂, w₂) and the detail bands per level,
    each (B, C, 3, h_l, w_l) in the order LH, HL, HH (pytorch_wavelets' layout)."""
    transform = _dwt_class()(J=2, mode='zero', wave='haar').to(device=images.device, dtype=images.dtype)
    return transform(images)


def wavelet_loss(render: torch.Tensor, target: torch.Tensor, step: int) -> torch.Tensor:
    """TC-GS's adaptive wavelet loss of one image pair, each (C, H, W), at training step ``step`` (≥ 0)."""
    if render.shape != target.shape or render.ndim != 3:
        raise ValueError(f'wavelet_loss compares two (C, H, W) images of one shape; got {tuple(render.shape)} and '
                         f'{tuple(target.shape)}.')
    if step < 0:
        raise ValueError(f'wavelet_loss: the training step is {step}; give a step ≥ 0.')
    low_render, details_render = haar_dwt(render[None])
    low_target, details_target = haar_dwt(target[None])

    def band(level: int, index: int) -> torch.Tensor:
        return (details_render[level][0, :, index] - details_target[level][0, :, index]).abs().mean()

    coarse, fine = 1 - step / TOTAL_STEPS, step / TOTAL_STEPS
    if step > SWITCH_STEP:
        return coarse * (0.4 * band(0, 0) + 0.3 * band(0, 1) + 0.3 * band(0, 2)) \
            + fine * (0.4 * band(1, 0) + 0.3 * band(1, 1) + 0.3 * band(1, 2))
    details = sum(band(level, index) for level in (0, 1) for index in range(3))
    return coarse * (low_render - low_target).abs().mean() + fine * 0.2 * details
