"""DETR's transformer with vispe encodings in the encoder and in the decoder's cross-attention (Carion et
al., ECCV 2020).

Every attention (encoder self-attention, decoder self- and cross-attention) is
:class:`vispe.attention.Attention`, so any registered 2D encoding plugs in through its hooks; DETR's own
sine embedding is :class:`~vispe.encodings.DETRSine`. Layers are post-norm as in DETR. Padded cells (``valid_mask`` False) are never attended to, and the
encodings see each image's real grid through ``Positions.valid_mask``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vispe.attention import Attention
from vispe.encodings import (PositionEncoding, build_encoding, check_encoding_fits, register_host,
                             require_position_embedding)
from vispe.geometry import CameraGeometry, Cameras, Positions, to_2tuple
from vispe.geometry.device_constants import device_constant


ENCODER_HOST = register_host('DETR encoder', provides=('grid', 'cameras'),
                             where='vispe.models.detr.DETREncoder (DETR configs: encoder.encoding); cameras when the '
                                   'data samples carry them')
DECODER_HOST = register_host('DETR decoder', provides=('grid',),
                             where='vispe.models.detr.DETRDecoder (DETR configs: decoder.encoding)')


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
        check_encoding_fits(self.encoding, ENCODER_HOST)
        if absolute_mode == 'every_layer':
            require_position_embedding(self.encoding, ENCODER_HOST, "absolute_mode='every_layer' adds it to the "
                                                                    "queries and keys of every layer")

    def positions(self, features: torch.Tensor, valid_mask: torch.Tensor | None,
                  cameras: Cameras | None = None) -> Positions:
        """The memory's positions: the feature grid, its padding and the images' cameras (if the data has any)."""
        return Positions(features.shape[-2:], patch_size=(self.stride, self.stride), device=features.device,
                         valid_mask=valid_mask, camera=None if cameras is None else CameraGeometry(cameras))

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
                qk_embed = self.encoding.position_embedding(pos).to(x.dtype)
            else:
                x = self.encoding.embed(x, pos)
        for index, layer in enumerate(self.layers):
            x = layer(x, pos, self.encoding, index, key_mask, qk_embed)
            if 'between_blocks' in hooks:
                x = self.encoding.between_blocks(x, pos, index)
        return x


LEGACY_PROJECTIONS = ('q_proj', 'k_proj', 'v_proj')
RELATIVE_HOOKS = frozenset({'rotate', 'logits_bias', 'transform_v', 'transform_out'})


def merge_legacy_projections(state_dict: dict[str, Any], prefix: str) -> None:
    """Checkpoints of vispe < 0.2 hold the decoder attentions as ``q_proj``/``k_proj``/``v_proj``/``out_proj``;
    rename them to the fused ``qkv`` and ``proj`` of :class:`vispe.attention.Attention` (rows q | k | v)."""
    for kind in ('weight', 'bias'):
        names = [f'{prefix}{projection}.{kind}' for projection in LEGACY_PROJECTIONS]
        if all(name in state_dict for name in names):
            state_dict[f'{prefix}qkv.{kind}'] = torch.cat([state_dict.pop(name) for name in names])
        if f'{prefix}out_proj.{kind}' in state_dict:
            state_dict[f'{prefix}proj.{kind}'] = state_dict.pop(f'{prefix}out_proj.{kind}')


class DecoderLayer(nn.Module):
    """Post-norm: self-attention of the queries, cross-attention to the memory, FFN (DETR).

    Both attentions are :class:`vispe.attention.Attention`. Queries carry ``query_pos`` (learned object
    queries) on their queries and keys in self-attention and on their queries in cross-attention; the memory's
    keys carry ``key_embed`` (the decoder encoding's absolute table); values carry no position (DETR). The
    decoder encoding's attention hooks act in the cross-attention with the queries' and the memory's positions.
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout)
        self.cross_attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True, attn_drop=dropout)
        self.norm1, self.norm2, self.norm3 = (nn.LayerNorm(embed_dim) for _ in range(3))
        self.mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.dropout = nn.Dropout(dropout)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        for name in ('self_attn', 'cross_attn'):
            merge_legacy_projections(state_dict, f'{prefix}{name}.')
        super()._load_from_state_dict(state_dict, prefix, *args)

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, query_pos: torch.Tensor,
                key_embed: torch.Tensor | None, key_mask: torch.Tensor | None, pos_q: Positions | None = None,
                pos_k: Positions | None = None, encoding: PositionEncoding | None = None,
                layer_idx: int = 0, self_attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``self_attn_mask``: optional (Nq, Nq) bool, True where a query may attend to another (denoising)."""
        tgt = self.norm1(tgt + self.dropout(self.self_attn(tgt, attn_mask=self_attn_mask, q_embed=query_pos)))
        cross = self.cross_attn(tgt, pos_q, encoding, layer_idx, key_mask, query_pos, memory=memory, pos_k=pos_k,
                                k_embed=key_embed)
        tgt = self.norm2(tgt + self.dropout(cross))
        return self.norm3(tgt + self.dropout(self.mlp(tgt)))


class DETRDecoder(nn.Module):
    """DETR's decoder with any vispe encoding in its cross-attention; returns every layer's output through the
    shared final LayerNorm (auxiliary losses).

    The encoding's ``embed`` (DETRSine, SinCos2D, LearnedAPE, Fourier) gives the memory keys' absolute
    embedding, added to the keys of every layer (DETR: its sine embedding, the default). Its attention hooks
    (rotations and biases: RoPE, ComRoPE, iRPE, LookHere, ALiBi2D) act between each object query, placed at a
    reference point, and the memory cells: as in Deformable DETR the reference point is
    ``sigmoid(Linear(query_pos))``, (x, y) in [0, 1] of each image's real extent, which the decoder turns into
    (row, col) in cell units of the memory grid, ``y·h − 0.5`` and ``x·w − 0.5`` (cell centres). Reference
    points exist only when the encoding has attention hooks.

    Args:
        embed_dim, depth, num_heads, mlp_dim, dropout: DETR's (256, 6, 8, 2048, 0.1).
        encoding: encoding config of the cross-attention (``'DETRSine'``, DETR's own).
        grid_size: the training memory grid, for encodings with a learned table or a reference grid.
        stride: pixels per memory cell.

    Shapes: query_pos (B, Q, d), memory (B, N, d), pos_k the memory's positions (its grid, padding) ->
    (L, B, Q, d).
    """

    def __init__(self, embed_dim: int = 256, depth: int = 6, num_heads: int = 8, mlp_dim: int = 2048,
                 dropout: float = 0.1, encoding: Any = 'DETRSine', grid_size: int | tuple[int, int] = 25,
                 stride: int = 32) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(embed_dim, num_heads, mlp_dim, dropout) for _ in range(depth))
        self.norm = nn.LayerNorm(embed_dim)
        self.encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                       head_dim=embed_dim // num_heads, depth=depth, grid_size=to_2tuple(grid_size),
                                       patch_size=(stride, stride), num_prefix_tokens=0)
        check_encoding_fits(self.encoding, DECODER_HOST)
        hooks = self.encoding.active_hooks
        if not hooks & (RELATIVE_HOOKS | {'embed'}):
            raise ValueError(f'The decoder encoding {type(self.encoding).__name__} uses {sorted(hooks)}, which do not '
                             f'reach cross-attention; give the decoder an encoding with embed, rotate or logits_bias '
                             f'hooks (its default is DETRSine), and put between-block encodings such as PEG in the '
                             f'encoder.')
        if not self.encoding.reaches_cross_attention():
            raise ValueError(f'The decoder encoding {self.encoding!r} works within one token set only, not between the '
                             f'queries and the memory of cross-attention; give the decoder another encoding (its '
                             f'default is DETRSine; SeqPE with method=\'add\' works there).')
        if 'embed' in hooks:
            require_position_embedding(self.encoding, DECODER_HOST, 'adds it to the memory keys of every layer')
        self.reference_points = nn.Linear(embed_dim, 2) if hooks & RELATIVE_HOOKS else None

    def query_positions(self, query_pos: torch.Tensor, pos_k: Positions) -> Positions:
        """The queries' positions: their reference points in cell units of each image's real grid, or only
        their count when the encoding needs none."""
        if self.reference_points is None:
            return Positions(num_positions=query_pos.shape[1], device=query_pos.device)
        xy = self.reference_points(query_pos).float().sigmoid()
        sizes = pos_k.real_grid_sizes()
        extent = device_constant(pos_k.require_grid('The decoder reference points'), xy) if sizes is None else \
            sizes[:, None, :].to(xy.dtype)
        coords = xy.flip(-1) * extent - 0.5
        return Positions(num_positions=query_pos.shape[1], device=query_pos.device, coords=coords)

    def forward(self, query_pos: torch.Tensor, memory: torch.Tensor, pos_k: Positions,
                key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Args:
            query_pos: (B, Q, d) learned object queries.
            memory: (B, N, d) encoder output.
            pos_k: the memory's positions (the encoder's).
            key_mask: (B, N) bool, True on real memory cells.
        """
        hooks = self.encoding.active_hooks
        self.encoding.prepare(pos_k)
        key_embed = self.encoding.position_embedding(pos_k).to(memory.dtype) if 'embed' in hooks else None
        pos_q = self.query_positions(query_pos, pos_k)
        attention_encoding = self.encoding if hooks & RELATIVE_HOOKS else None
        mask = None if key_mask is None else key_mask[:, None, None, :]
        tgt = torch.zeros_like(query_pos)
        outputs = []
        for index, layer in enumerate(self.layers):
            tgt = layer(tgt, memory, query_pos, key_embed, mask, pos_q, pos_k, attention_encoding, index)
            outputs.append(self.norm(tgt))
        return torch.stack(outputs)
