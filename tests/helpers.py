"""Helpers shared by tests (not fixtures)."""
from __future__ import annotations

import torch

import vispe
from vispe.geometry import Positions

from .conftest import TINY_VIT


def tiny_vit(encoding=None, **overrides) -> vispe.VisionTransformer:
    """The tiny ViT of conftest.TINY_VIT with an encoding, in eval mode."""
    cfg = {**TINY_VIT, **overrides}
    return vispe.create_vit(cfg.pop('model_name'), encoding=encoding, **cfg).eval()


def positions(grid, num_prefix_tokens=1) -> Positions:
    return Positions(grid, num_prefix_tokens)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()
