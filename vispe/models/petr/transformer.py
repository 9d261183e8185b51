"""PETR's transformer decoder: object queries attend to the tokens of all cameras.

The layers are DETR's post-norm decoder layers (:class:`vispe.models.detr.DecoderLayer`: self-attention, norm,
cross-attention, norm, FFN, norm), whose order and residuals are those of PETR's
``PETRTransformerDecoderLayer``; every layer's output passes the shared final LayerNorm (PETR's ``post_norm``,
``return_intermediate``). Queries carry ``query_pos`` on their queries and keys in self-attention and on their
queries in cross-attention; the memory's keys carry ``key_embed``; values carry no position. An attention
encoding (GTA) may act in the cross-attention between the queries' positions (their poses) and the memory's.
"""
from __future__ import annotations

import torch
from torch import nn

from vispe.encodings import PositionEncoding
from vispe.geometry import Positions
from vispe.models.detr.transformer import DecoderLayer


class PETRDecoder(nn.Module):
    """PETR's decoder (6 layers, 8 heads, width 256, FFN 2048, dropout 0.1).

    Shapes: query_pos (B, Q, d), memory (B, N, d), key_embed (B, N, d), key_mask (B, N) bool True on real tokens,
    self_attn_mask (Q, Q) bool True where a query may attend (denoising groups), content (B, Q, d) the queries'
    initial content (PETR: zeros, the default) -> (L, B, Q, d). With ``encoding`` (its hooks in every layer's
    cross-attention), ``pos_q`` and ``pos_k`` are the queries' and the memory's positions.
    """

    def __init__(self, embed_dim: int = 256, depth: int = 6, num_heads: int = 8, mlp_dim: int = 2048,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(embed_dim, num_heads, mlp_dim, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, query_pos: torch.Tensor, memory: torch.Tensor, key_embed: torch.Tensor,
                key_mask: torch.Tensor | None = None, self_attn_mask: torch.Tensor | None = None,
                content: torch.Tensor | None = None, encoding: PositionEncoding | None = None,
                pos_q: Positions | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        mask = None if key_mask is None else key_mask[:, None, None, :]
        tgt = torch.zeros_like(query_pos) if content is None else content
        outputs = []
        for index, layer in enumerate(self.layers):
            tgt = layer(tgt, memory, query_pos, key_embed, mask, pos_q, pos_k, encoding, index,
                        self_attn_mask=self_attn_mask)
            outputs.append(self.norm(tgt))
        return torch.stack(outputs)
