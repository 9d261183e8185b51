"""The transformer of a V-DETR-style point-cloud detector: an encoder over the sampled points and a decoder whose
object queries refine 3D boxes layer by layer, with any point encoding in the decoder's cross-attention.

Shen et al., ICLR 2024 (V-DETR) on 3DETR (Misra et al., ICCV 2021): pre-norm layers; cross-attention with keys
and values shared by all heads (``num_kv_heads=1``, V-DETR's multi-query attention); layer l reads the boxes
predicted by layer l − 1, detached (V-DETR's ``reference_point``), through the encoding's positions.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vispe.attention import Attention
from vispe.encodings import (PositionEncoding, build_encoding, check_encoding_fits, register_host,
                             require_position_embedding)
from vispe.geometry import Positions, SceneGeometry
from vispe.models.detr.transformer import feed_forward
from vispe.models.vdetr.yaw_bins import check_num_yaw_bins, decode_yaw

RELATIVE_HOOKS = frozenset({'rotate', 'logits_bias'})
HOST = register_host('V-DETR decoder', provides=('points', 'bounds', 'boxes'),
                     where='vispe.models.vdetr.BoxRefinementDecoder (VDETR configs: decoder.encoding)')


class PointEncoderLayer(nn.Module):
    """Pre-norm self-attention + FFN over point tokens (3DETR's encoder layer; no position, as 3DETR's)."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout)
        self.norm1, self.norm2 = nn.LayerNorm(embed_dim), nn.LayerNorm(embed_dim)
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.attn(self.norm1(x)))
        return x + self.dropout(self.mlp(self.norm2(x)))


class PointDecoderLayer(nn.Module):
    """Pre-norm: self-attention of the queries (``query_pos`` on their queries and keys), cross-attention to the
    point tokens (``query_pos`` on the queries, ``key_embed`` on the keys, the encoding's hooks between the queries'
    and the points' positions; keys and values with ``num_kv_heads`` heads), FFN."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float, num_kv_heads: int) -> None:
        super().__init__()
        self.self_attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout)
        self.cross_attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout,
                                    num_kv_heads=num_kv_heads)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(embed_dim) for _ in range(3))
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, query_pos: torch.Tensor,
                key_embed: torch.Tensor | None, pos_q: Positions, pos_k: Positions,
                encoding: PositionEncoding | None, layer_idx: int) -> torch.Tensor:
        tgt = tgt + self.dropout(self.self_attn(self.norm1(tgt), q_embed=query_pos))
        cross = self.cross_attn(self.norm2(tgt), pos_q, encoding, layer_idx, q_embed=query_pos, memory=memory,
                                pos_k=pos_k, k_embed=key_embed)
        tgt = tgt + self.dropout(cross)
        return tgt + self.dropout(self.mlp(self.norm3(tgt)))


def mlp(in_dim: int, hidden_dim: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(inplace=True), nn.Linear(hidden_dim, out_dim))


class BoxRefinementDecoder(nn.Module):
    """Decoder layers that each predict classes and boxes; the next layer sees the boxes just predicted.

    Boxes are relative to the queries' proposals (V-DETR): centre = proposal centre + Δc·proposal size, size =
    proposal size·exp(Δs); axis-aligned (yaw 0), or with ``num_yaw_bins`` > 0 yawed, each layer predicting the yaw
    afresh in 3DETR's heading code (:mod:`~vispe.models.vdetr.yaw_bins`). The query position embedding is recomputed
    every layer from the current boxes: an MLP of the encoding's position embedding of the box centres when the
    encoding is absolute (3DETR's query projection of its Fourier features), else an MLP of (centre, size)
    normalised by the scene's extent (V-DETR's learned box embedding), with (cos, sin) of the yaw for rotated boxes.
    Absolute encodings also give the point keys their ``position_embedding`` (every layer);
    relative ones (VertexRPE) act in the cross-attention through ``pos_q.scene.boxes`` and ``pos_k.coords``; ``NoPE``
    gives the points no position at all.

    Args:
        embed_dim, depth, num_heads, mlp_dim, dropout: the layers' (V-DETR: 256, 8, 4, 256, 0.1).
        num_classes: K object classes (the heads predict K + 1 logits, the last one no-object).
        encoding: the point encoding of the cross-attention (``dict(type='VertexRPE')``, 'FourierXYZ', 'NoPE').
        num_kv_heads: heads of the cross-attention's keys and values (1 in V-DETR).
        num_yaw_bins: heading bins K_yaw of rotated boxes (12: 3DETR's SUN RGB-D); 0: axis-aligned boxes.

    Shapes: tgt (B, Q, d), memory (B, M, d), pos_k (points (B, M, 3), bounds (B, 2, 3)), proposals (B, Q, 7) ->
    dict(logits (L, B, Q, K+1), boxes (L, B, Q, 7)), with heading bins also yaw_code (L, B, Q, 2·K_yaw) (bin logits
    then normalised residuals).
    """

    def __init__(self, embed_dim: int, num_classes: int, depth: int = 4, num_heads: int = 4, mlp_dim: int = 256,
                 dropout: float = 0.1, encoding: Any = 'VertexRPE', num_kv_heads: int = 1,
                 max_log_scale: float = 4.0, num_yaw_bins: int = 0) -> None:
        super().__init__()
        check_num_yaw_bins(num_yaw_bins, 'BoxRefinementDecoder')
        self.layers = nn.ModuleList(PointDecoderLayer(embed_dim, num_heads, mlp_dim, dropout, num_kv_heads)
                                    for _ in range(depth))
        self.encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                       head_dim=embed_dim // num_heads, depth=depth, num_prefix_tokens=0)
        check_encoding_fits(self.encoding, HOST)
        hooks = self.encoding.active_hooks
        unused = hooks - RELATIVE_HOOKS - {'embed'}
        if unused:
            raise ValueError(f'The point decoder applies embed, rotate and logits_bias hooks; '
                             f'{type(self.encoding).__name__} also uses {sorted(unused)}.')
        self.absolute = 'embed' in hooks
        if self.absolute:
            require_position_embedding(self.encoding, HOST, 'adds it to the point keys and embeds the queries\' box '
                                                            'centres with it')
        self.num_yaw_bins = num_yaw_bins
        self.query_pos = mlp(embed_dim if self.absolute else 8 if num_yaw_bins else 6, embed_dim, embed_dim)
        self.norm = nn.LayerNorm(embed_dim)
        self.class_head = mlp(embed_dim, embed_dim, num_classes + 1)
        self.box_head = mlp(embed_dim, embed_dim, 6 + 2 * num_yaw_bins)
        self.max_log_scale = max_log_scale

    def query_positions(self, boxes: torch.Tensor, bounds: torch.Tensor) -> tuple[Positions, torch.Tensor]:
        """The queries' positions (their current boxes) and their position embedding (B, Q, d)."""
        scene = SceneGeometry(bounds=bounds, boxes=boxes, check_values=False)  # sizes: exp of clamped log-scales
        pos_q = Positions(coords=boxes[..., :3], scene=scene, device=boxes.device)
        if self.absolute:
            return pos_q, self.query_pos(self.encoding.position_embedding(pos_q).to(boxes.dtype))
        low, high = bounds[:, :1].to(boxes.dtype), bounds[:, 1:].to(boxes.dtype)
        extent = high - low
        box_code = [(boxes[..., :3] - low) / extent, boxes[..., 3:6] / extent]
        if self.num_yaw_bins:
            box_code += [boxes[..., 6:7].cos(), boxes[..., 6:7].sin()]
        return pos_q, self.query_pos(torch.cat(box_code, dim=-1))

    def decode_boxes(self, deltas: torch.Tensor, proposals: torch.Tensor) -> torch.Tensor:
        """(B, Q, 7) boxes from (B, Q, 6 + 2·K_yaw) deltas relative to the proposals and heading codes."""
        sizes = proposals[..., 3:6]
        centres = proposals[..., :3] + deltas[..., :3] * sizes
        scales = sizes * deltas[..., 3:6].clamp(-self.max_log_scale, self.max_log_scale).exp()
        if self.num_yaw_bins:
            yaw = decode_yaw(*deltas[..., 6:].chunk(2, dim=-1))[..., None]
        else:
            yaw = torch.zeros_like(centres[..., :1])
        return torch.cat([centres, scales, yaw], dim=-1)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, pos_k: Positions,
                proposals: torch.Tensor) -> dict[str, torch.Tensor]:
        pos_k.require('points', 'bounds', user='The V-DETR decoder (its point tokens)')
        hooks = self.encoding.active_hooks
        key_embed = self.encoding.position_embedding(pos_k).to(memory.dtype) if self.absolute else None
        attention_encoding = self.encoding if hooks & RELATIVE_HOOKS else None
        proposals = proposals.detach()
        boxes, all_logits, all_boxes, all_codes = proposals, [], [], []
        for index, layer in enumerate(self.layers):
            pos_q, query_pos = self.query_positions(boxes, pos_k.scene.bounds)
            tgt = layer(tgt, memory, query_pos, key_embed, pos_q, pos_k, attention_encoding, index)
            hidden = self.norm(tgt)
            deltas = self.box_head(hidden)
            predicted = self.decode_boxes(deltas, proposals)
            all_logits.append(self.class_head(hidden))
            all_boxes.append(predicted)
            if self.num_yaw_bins:
                all_codes.append(deltas[..., 6:])
            boxes = predicted.detach()
        outputs = dict(logits=torch.stack(all_logits), boxes=torch.stack(all_boxes))
        if self.num_yaw_bins:
            outputs['yaw_code'] = torch.stack(all_codes)
        return outputs
