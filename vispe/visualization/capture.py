"""Capture attention probabilities from any model built on vispe's attention modules."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from vispe.attention import Attention


def _run_capturing(model: nn.Module, layers: Sequence[nn.Module], images: torch.Tensor,
                   forward_kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """Switch capture on for ``layers`` during one forward; nothing stays stored or switched on after."""
    for layer in layers:
        layer.capture_probs = True
    try:
        model(images, **forward_kwargs)
        return [layer.attn_probs for layer in layers]
    finally:
        for layer in layers:
            layer.capture_probs = False
            layer.attn_probs = None


@torch.no_grad()
def capture_attention(model: nn.Module, images: torch.Tensor, **forward_kwargs: Any) -> list[torch.Tensor]:
    """Run ``model(images)`` once and return the probabilities of every self-attention layer over the image
    tokens (a ViT's blocks, a DETR encoder; decoder attentions are :func:`capture_cross_attention`'s).

    Only during this call do the attention layers take the explicit path and keep their
    probabilities; afterwards they are back on SDPA with nothing stored. The model's train/eval
    mode is left as it is (call ``model.eval()`` first for dropout-free maps).

    Args:
        model: a module containing vispe :class:`~vispe.attention.Attention` layers (a ViT, or the
            encoder of a DETR).
        images: its input.

    Returns:
        One (B, heads, N, N) tensor per attention layer, in module order; N counts the prefix tokens
        first, then the patches row-major.
    """
    from vispe.models.detr.transformer import DecoderLayer
    in_decoders = {id(attention) for layer in model.modules() if isinstance(layer, DecoderLayer)
                   for attention in (layer.self_attn, layer.cross_attn)}
    layers = [module for module in model.modules() if isinstance(module, Attention) and id(module) not in in_decoders]
    if not layers:
        raise ValueError(f'{type(model).__name__} has no vispe attention layer; build it with vispe.create_vit '
                         f'or convert a timm ViT with vispe.retrofit.')
    return _run_capturing(model, layers, images, forward_kwargs)


@torch.no_grad()
def capture_cross_attention(model: nn.Module, images: torch.Tensor, **forward_kwargs: Any) -> list[torch.Tensor]:
    """Run ``model(images)`` once and return the cross-attention of every DETR decoder layer (2D DETR, PETR's,
    V-DETR's point decoder).

    Returns:
        One (B, heads, queries, N) tensor per decoder layer; N are the encoder's tokens, row-major.
    """
    from vispe.models.detr.transformer import DecoderLayer
    from vispe.models.vdetr.transformer import PointDecoderLayer
    layers = [module.cross_attn for module in model.modules() if isinstance(module, (DecoderLayer, PointDecoderLayer))]
    if not layers:
        raise ValueError(f'{type(model).__name__} has no DETR decoder layer to capture cross-attention from.')
    return _run_capturing(model, layers, images, forward_kwargs)
