"""A transformer encoder over the tokens of several camera views, with any encoding in its self-attention (GTA's
SE(3) × SO(2) transforms between views): the encoder of the novel-view model and the optional encoder of the
multi-view detector.
"""
from __future__ import annotations

import torch
from torch import nn

from vispe.attention import Attention
from vispe.encodings import PositionEncoding
from vispe.geometry import Positions
from vispe.models.detr.transformer import feed_forward

__all__ = ['MultiViewEncoder', 'ViewEncoderLayer']


class ViewEncoderLayer(nn.Module):
    """Pre-norm self-attention (the encoding's hooks between the tokens of all views) and FFN."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pos: Positions, encoding: PositionEncoding | None, layer_idx: int,
                attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), pos, encoding, layer_idx, attn_mask))
        return x + self.dropout(self.mlp(self.norm2(x)))


class MultiViewEncoder(nn.Module):
    """``depth`` :class:`ViewEncoderLayer` s and a final LayerNorm; the encoding's layers are ``first_layer`` onwards.

    Shapes: tokens (B, V·h·w, d) view-major, ``key_valid`` (B, V·h·w) True on real tokens (padding and missing views
    are not attended to) -> (B, V·h·w, d).
    """

    def __init__(self, embed_dim: int, depth: int, num_heads: int, mlp_dim: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(ViewEncoderLayer(embed_dim, num_heads, mlp_dim, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, tokens: torch.Tensor, pos: Positions, encoding: PositionEncoding | None,
                key_valid: torch.Tensor | None = None, first_layer: int = 0) -> torch.Tensor:
        mask = None if key_valid is None else key_valid[:, None, None, :]
        for index, layer in enumerate(self.layers):
            tokens = layer(tokens, pos, encoding, first_layer + index, mask)
        return self.norm(tokens)
