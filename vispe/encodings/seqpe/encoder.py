"""SeqPE's sequential position encoder: a small causal transformer that reads a position's digits and returns its
embedding (Li et al., "SeqPE: Transformer with Sequential Position Encoding", 2025; ghrua/seqpe)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import nn

from vispe.encodings.seqpe.tokens import BASE


class SequenceBlock(nn.Module):
    """GPT-2's pre-norm block: causal multi-head attention and an MLP (ratio 4, tanh-GELU), dropout after each
    projection. Shapes: (S, L, C) -> same, or (S, 1, C) with ``last_only``: only the last token's output (its query
    sees every key, so no mask), which is all the encoder's last block has to give."""

    def __init__(self, dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        if dim % num_heads:
            raise ValueError(f'SeqPE encoder width {dim} does not split into {num_heads} heads.')
        self.num_heads = num_heads
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-5), nn.LayerNorm(dim, eps=1e-5)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        q, k, v = self.qkv(self.norm1(x)).unflatten(-1, (3, self.num_heads, -1)).permute(2, 0, 3, 1, 4)
        if last_only:
            q, x = q[:, :, -1:], x[:, -1:]
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=not last_only).transpose(1, 2).flatten(2)
        x = x + self.dropout(self.proj(attended))
        return x + self.dropout(self.fc2(F.gelu(self.fc1(self.norm2(x)), approximate='tanh')))


class SequentialPositionEncoder(nn.Module):
    """Digits of an n-D position -> its embedding.

    Each of the L = D·max_digits digit tokens gets a digit embedding, an embedding of its index in the sequence
    (0..L−1 over all coordinates) and one of its coordinate (the dimension); a learned summary token goes last, the
    causal blocks run, a final LayerNorm, and the summary token's state is projected to ``out_dim``.

    Args:
        data_dim: D, coordinates per position (2 for images).
        max_digits: digits per coordinate.
        dim: the encoder's width (SeqPE: 384).
        out_dim: the embedding's width.
        depth, num_heads: blocks and heads (SeqPE: 2 and dim / 64).
        dropout: after each block's projections (SeqPE: 0.1 for ViT-S, 0.3 for ViT-B).

    Shapes: digits (S, L) int64 -> (S, out_dim).
    """

    def __init__(self, data_dim: int, max_digits: int, dim: int, out_dim: int, depth: int = 2,
                 num_heads: int | None = None, dropout: float = 0.1) -> None:
        super().__init__()
        self.data_dim, self.max_digits = data_dim, max_digits
        length = data_dim * max_digits
        self.digit_embed = nn.Embedding(BASE, dim)
        self.index_embed = nn.Embedding(length, dim)
        self.dim_embed = nn.Parameter(torch.zeros(data_dim, dim))
        self.summary_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.blocks = nn.ModuleList(SequenceBlock(dim, num_heads or max(1, dim // 64), dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-5)
        self.out_proj = nn.Linear(dim, out_dim)
        self.register_buffer('dims', torch.arange(data_dim).repeat_interleave(max_digits), persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """SeqPE's init: normal(0.02) (timm's trunc_normal_, bounds ±2) for embeddings and weights, zero biases,
        LayerNorms at 1 and 0."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                trunc_normal_(module.weight, std=.02)
                if getattr(module, 'bias', None) is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        trunc_normal_(self.dim_embed, std=.02)
        trunc_normal_(self.summary_token, std=.02)

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        tokens = self.digit_embed(digits) + self.index_embed.weight + self.dim_embed[self.dims]
        x = torch.cat([tokens, self.summary_token.expand(len(digits), -1, -1).to(tokens.dtype)], dim=1)
        for index, block in enumerate(self.blocks):
            x = block(x, last_only=index == len(self.blocks) - 1)
        return self.out_proj(self.norm(x[:, -1]))
