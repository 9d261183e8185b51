"""DETR's transformer with vispe encodings in the encoder (Carion et al., ECCV 2020).

The encoder's self-attention is :class:`vispe.attention.Attention`, so any registered 2D encoding
plugs in through its hooks; DETR's own sine embedding is :class:`~vispe.encodings.DETRSine`.
Layers are post-norm as in DETR. Padded cells (``valid_mask`` False) are never attended to, and the
encodings see each image's real grid through ``Positions.valid_mask``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from vispe.attention import Attention
from vispe.encodings import PositionEncoding, build_encoding
from vispe.geometry import Positions, to_2tuple


def feed_forward(embed_dim: int, mlp_dim: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(embed_dim, mlp_dim), nn.ReLU(inplace=True), nn.Dropout(dropout),
                         nn.Linear(mlp_dim, embed_dim))


class EncoderLayer(nn.Module):
    """Post-norm self-attention + FFN; the attention carries the encoding's hooks."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout)
        self.norm1 = nn.LayerNorm(embed_dim)
        self.norm2 = nn.LayerNorm(embed_dim)
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pos: Positions, encoding: PositionEncoding, layer_idx: int,
                key_mask: torch.Tensor | None, qk_embed: torch.Tensor | None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.attn(x, pos, encoding, layer_idx, key_mask, qk_embed)))
        return self.norm2(x + self.dropout(self.mlp(x)))


class DETREncoder(nn.Module):
    """DETR's encoder over a feature map, with any vispe encoding.

    Absolute encodings (those with an ``embed`` hook: DETRSine, SinCos2D, LearnedAPE, Fourier) are added
    to the queries and keys of every layer and not to the values, as DETR does with its sine embedding
    (``absolute_mode='every_layer'``), or once to the input tokens as a ViT does (``'input'``).
    Rotary and bias encodings act inside every attention; PEG between layers.

    Args:
        embed_dim: d (256 in DETR).
        depth: number of layers (6).
        num_heads: heads (8).
        mlp_dim: FFN width (2048).
        dropout: dropout on attention probabilities, residual branches and FFN (0.1).
        encoding: encoding config (``dict(type='DETRSine')`` is DETR's own).
        grid_size: the training feature grid, for encodings with a learned table or a reference grid.
        stride: pixels per feature cell (the backbone's reduction).
        absolute_mode: 'every_layer' or 'input' (see above).

    Shapes: features (B, d, h, w), valid_mask (B, h, w) bool -> memory (B, h·w, d).
    """

    def __init__(self, embed_dim: int = 256, depth: int = 6, num_heads: int = 8, mlp_dim: int = 2048,
                 dropout: float = 0.1, encoding: Any = 'DETRSine', grid_size: int | tuple[int, int] = 25,
                 stride: int = 32, absolute_mode: str = 'every_layer') -> None:
        super().__init__()
        if absolute_mode not in ('every_layer', 'input'):
            raise ValueError(f"absolute_mode must be 'every_layer' or 'input'; got {absolute_mode!r}.")
        self.stride = stride
        self.absolute_mode = absolute_mode
        self.layers = nn.ModuleList(EncoderLayer(embed_dim, num_heads, mlp_dim, dropout) for _ in range(depth))
        self.encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                       head_dim=embed_dim // num_heads, depth=depth, grid_size=to_2tuple(grid_size),
                                       patch_size=(stride, stride), num_prefix_tokens=0)

    def positions(self, features: torch.Tensor, valid_mask: torch.Tensor | None) -> Positions:
        return Positions(features.shape[-2:], 0, (self.stride, self.stride), features.device, valid_mask=valid_mask)

    def forward(self, features: torch.Tensor, valid_mask: torch.Tensor | None = None,
                pos: Positions | None = None) -> torch.Tensor:
        x = features.flatten(2).transpose(1, 2)
        pos = pos if pos is not None else self.positions(features, valid_mask)
        hooks = self.encoding.active_hooks
        self.encoding.prepare(pos)
        key_mask = None if valid_mask is None else valid_mask.flatten(1)[:, None, None, :]
        qk_embed = None
        if 'embed' in hooks:
            if self.absolute_mode == 'every_layer':
                qk_embed = self.encoding.embed(torch.zeros_like(x), pos)
            else:
                x = self.encoding.embed(x, pos)
        for index, layer in enumerate(self.layers):
            x = layer(x, pos, self.encoding, index, key_mask, qk_embed)
            if 'between_blocks' in hooks:
                x = self.encoding.between_blocks(x, pos, index)
        return x


class MultiheadAttention(nn.Module):
    """Multi-head attention between two sequences, with SDPA (DETR's decoder attentions).

    Shapes: query (B, Nq, C), key and value (B, Nk, C), key_mask (B, Nk) bool (True = attend)
    -> (B, Nq, C). With ``capture_probs`` the probabilities (B, heads, Nq, Nk) are kept in ``attn_probs``.
    """

    capture_probs: bool = False
    attn_probs: torch.Tensor | None = None

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f'embed_dim {embed_dim} is not divisible by num_heads {num_heads}.')
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = dropout

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        return x.unflatten(-1, (self.num_heads, -1)).transpose(1, 2)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_mask: torch.Tensor | None = None) -> torch.Tensor:
        q, k, v = self.split_heads(self.q_proj(query)), self.split_heads(self.k_proj(key)), \
            self.split_heads(self.v_proj(value))
        mask = None if key_mask is None else key_mask[:, None, None, :]
        if self.capture_probs:
            logits = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
            if mask is not None:
                logits = logits.masked_fill(~mask, float('-inf'))
            probs = logits.softmax(-1)
            self.attn_probs = probs.detach()
            out = F.dropout(probs, self.dropout, self.training) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                 dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(out.transpose(1, 2).flatten(2))


class DecoderLayer(nn.Module):
    """Post-norm: self-attention of the queries, cross-attention to the memory, FFN.

    Queries carry ``query_pos`` (learned object queries) in self- and cross-attention; memory keys carry
    ``key_pos``; values carry no position (DETR).
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = MultiheadAttention(embed_dim, num_heads, dropout)
        self.cross_attn = MultiheadAttention(embed_dim, num_heads, dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(embed_dim) for _ in range(3))
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor,
                key_mask: torch.Tensor | None) -> torch.Tensor:
        q = tgt + query_pos
        tgt = self.norm1(tgt + self.dropout(self.self_attn(q, q, tgt)))
        tgt = self.norm2(tgt + self.dropout(self.cross_attn(tgt + query_pos, memory + key_pos, memory, key_mask)))
        return self.norm3(tgt + self.dropout(self.mlp(tgt)))


class DETRDecoder(nn.Module):
    """DETR's decoder; returns every layer's output through the shared final LayerNorm (auxiliary losses).

    Shapes: query_pos (B, Q, d), memory (B, N, d), key_pos (B|1, N, d), key_mask (B, N) -> (L, B, Q, d).
    """

    def __init__(self, embed_dim: int = 256, depth: int = 6, num_heads: int = 8, mlp_dim: int = 2048,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(embed_dim, num_heads, mlp_dim, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, query_pos: torch.Tensor, memory: torch.Tensor, key_pos: torch.Tensor,
                key_mask: torch.Tensor | None = None) -> torch.Tensor:
        tgt = torch.zeros_like(query_pos)
        outputs = []
        for layer in self.layers:
            tgt = layer(tgt, memory, query_pos, key_pos, key_mask)
            outputs.append(self.norm(tgt))
        return torch.stack(outputs)
