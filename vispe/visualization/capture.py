"""Capture attention probabilities from any model built on vispe's attention module."""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vispe.attention import Attention


@torch.no_grad()
def capture_attention(model: nn.Module, images: torch.Tensor, **forward_kwargs: Any) -> list[torch.Tensor]:
    """Run ``model(images)`` once and return every attention layer's probabilities.

    Only during this call do the attention layers take the explicit path and keep their
    probabilities; afterwards they are back on SDPA with nothing stored. The model's train/eval
    mode is left as it is (call ``model.eval()`` first for dropout-free maps).

    Args:
        model: a module containing vispe :class:`~vispe.attention.Attention` layers.
        images: its input.

    Returns:
        One (B, heads, N, N) tensor per attention layer, in module order; N counts the prefix tokens
        first, then the patches row-major.
    """
    layers = [module for module in model.modules() if isinstance(module, Attention)]
    if not layers:
        raise ValueError(f'{type(model).__name__} has no vispe attention layer; build it with vispe.create_vit '
                         f'or convert a timm ViT with vispe.retrofit.')
    for layer in layers:
        layer.capture_probs = True
    try:
        model(images, **forward_kwargs)
        return [layer.attn_probs for layer in layers]
    finally:
        for layer in layers:
            layer.capture_probs = False
            layer.attn_probs = None
