"""The one attention module every encoding plugs into, for self- and cross-attention.

It is timm's ``Attention`` (same constructor, same parameter names ``qkv``, ``q_norm``, ``k_norm``,
``norm``, ``proj``, so timm checkpoints load unchanged) with a forward that calls the encoding's
hooks with the query-side and the key-side positions. Self-attention: ``attn(x, pos, encoding, layer)``
(the same positions on both sides). Cross-attention: ``attn(x, pos, encoding, layer, memory=m, pos_k=...)``
where the queries come from ``x`` and the keys and values from ``memory``, projected by the same fused
``qkv`` weight (rows q | k | v, as ``torch.nn.MultiheadAttention``'s ``in_proj_weight``).

The kernel is ``F.scaled_dot_product_attention``; rotations act on q/k before it, biases go in as its
additive ``attn_mask`` and keys shared by several query heads use its ``enable_gqa``. An encoding whose bias is a
table of grid offsets (LookHere, 2D-ALiBi, iRPE in bias mode) may instead hand its tables to FlexAttention
(:meth:`~vispe.encodings.PositionEncoding.flex_bias`, :mod:`vispe.flex_bias`), so that no (heads, L, L) bias
is built; it does so only when its ``kernel`` option chooses it, no probabilities are needed, no extra mask is
given, no attention dropout is active and FlexAttention runs on the inputs (:func:`vispe.flex_bias.flex_supported`). The explicit
``softmax(q·kᵀ·scale + bias)`` path runs only when the probabilities are needed: an encoding hook asks for
them (iRPE on values), they are being captured for visualisation, or ``fused_attn`` is off. The
probabilities pass through ``attn_drop``, so timm's ``AttentionExtract`` hooks work on the explicit path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from timm.layers import Attention as TimmAttention
from torch import nn

from vispe.flex_bias import flex_offset_attention, flex_supported

if TYPE_CHECKING:
    from vispe.encodings.base import PositionEncoding
    from vispe.geometry import Positions


def additive_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean keep-mask (True = attend) becomes an additive float mask; float masks pass through."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float('-inf'))


def attention_probs(q: torch.Tensor, k: torch.Tensor, scale: float,
                    bias: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q·scale·kᵀ + bias) over keys; q (B, heads, Nq, d), k (B, heads, Nk, d) -> (B, heads, Nq, Nk)."""
    logits = (q * scale) @ k.transpose(-2, -1)
    if bias is not None:
        logits = logits + bias
    return logits.softmax(dim=-1)


def _repeat_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, kv_heads, N, d) -> (B, num_heads, N, d), each key head serving num_heads / kv_heads query heads."""
    return x if x.shape[1] == num_heads else x.repeat_interleave(num_heads // x.shape[1], dim=1)


class Attention(TimmAttention):
    """Multi-head self- or cross-attention with position-encoding hooks (timm ``Attention`` subclass).

    Shapes: x (B, Nq, C) [, memory (B, Nk, C)] -> (B, Nq, C); in self-attention Nk = Nq.

    Args:
        num_kv_heads: heads of the keys and values (default ``num_heads``); fewer key heads are shared by
            groups of query heads (multi-query attention with 1, as V-DETR's decoder). The fused ``qkv``
            weight then has ``(num_heads + 2·num_kv_heads)·head_dim`` rows. Other arguments are timm's.

    Attributes:
        capture_probs: store the probabilities of the next forwards in ``attn_probs``
            (B, heads, Nq, Nk); off by default, and then nothing is materialised.
    """

    capture_probs: bool = False
    attn_probs: torch.Tensor | None = None
    num_kv_heads: int | None = None

    def __init__(self, dim: int, num_heads: int = 8, *args: Any, num_kv_heads: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(dim, num_heads, *args, **kwargs)
        if num_kv_heads is not None and num_kv_heads != num_heads:
            if num_kv_heads < 1 or num_heads % num_kv_heads:
                raise ValueError(f'num_kv_heads must divide num_heads {num_heads} (each key head serves a group of '
                                 f'query heads); got {num_kv_heads}.')
            self.num_kv_heads = num_kv_heads
            old = self.qkv
            self.qkv = nn.Linear(dim, (num_heads + 2 * num_kv_heads) * self.head_dim, bias=old.bias is not None,
                                 device=old.weight.device, dtype=old.weight.dtype)

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values): kv_heads · head_dim."""
        return (self.num_kv_heads or self.num_heads) * self.head_dim

    def _split(self, x: torch.Tensor, heads: int) -> torch.Tensor:
        return x.unflatten(-1, (heads, self.head_dim)).transpose(1, 2)

    def project(self, x: torch.Tensor, memory: torch.Tensor | None, q_embed: torch.Tensor | None,
                k_embed: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q (B, heads, Nq, d), k and v (B, kv_heads, Nk, d). The embeddings are added to the inputs of the
        query and key projections only (DETR's positions), never to the values."""
        kv_heads = self.num_kv_heads or self.num_heads
        q_rows, kv_rows = self.attn_dim, self.kv_dim
        weight, bias = self.qkv.weight, self.qkv.bias
        if memory is None and kv_heads == self.num_heads and k_embed is q_embed:
            B, N, _ = x.shape
            qkv = self.qkv(x)
            if q_embed is not None:
                qkv = qkv + F.pad(F.linear(q_embed.to(x.dtype), weight[:2 * q_rows]), (0, q_rows))
            q, k, v = qkv.reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            return q, k, v
        source = x if memory is None else memory
        q_bias, k_bias, v_bias = (None, None, None) if bias is None else bias.split([q_rows, kv_rows, kv_rows])
        q_weight, k_weight, v_weight = weight.split([q_rows, kv_rows, kv_rows])
        q_input = x if q_embed is None else x + q_embed.to(x.dtype)
        k_input = source if k_embed is None else source + k_embed.to(source.dtype)
        q = self._split(F.linear(q_input, q_weight, q_bias), self.num_heads)
        k = self._split(F.linear(k_input, k_weight, k_bias), kv_heads)
        v = self._split(F.linear(source, v_weight, v_bias), kv_heads)
        return q, k, v

    def forward(
            self,
            x: torch.Tensor,
            pos: Positions | None = None,
            encoding: PositionEncoding | None = None,
            layer_idx: int = 0,
            attn_mask: torch.Tensor | None = None,
            q_embed: torch.Tensor | None = None,
            *,
            memory: torch.Tensor | None = None,
            pos_k: Positions | None = None,
            k_embed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Args:
            x: (B, Nq, C) tokens of the queries (and of the keys and values in self-attention).
            pos: the queries' positions (required when ``encoding`` is given).
            encoding: the encoding; its hooks run on q, k, v, the logits and the output.
            layer_idx: index of the layer, for per-layer encodings.
            attn_mask: optional extra mask, bool (True = attend) or additive float, broadcastable to
                (B, heads, Nq, Nk).
            q_embed: optional (B|1, Nq, C) added to the input of the query projection (and, in
                self-attention without ``k_embed``, of the key projection), never to the values (DETR adds
                its position embedding this way in every layer).
            memory: (B, Nk, C) tokens of the keys and values: cross-attention. None: self-attention.
            pos_k: the keys' positions in cross-attention (default: ``pos``).
            k_embed: optional (B|1, Nk, C) added to the input of the key projection.
        """
        B, Nq, _ = x.shape
        if memory is None and k_embed is None:
            k_embed = q_embed
        pos_k = pos if pos_k is None else pos_k
        gate = self.gate(x).sigmoid() if self.gate is not None else None
        q, k, v = self.project(x, memory, q_embed, k_embed)
        q, k = self.q_norm(q), self.k_norm(k)

        hooks = encoding.active_hooks if encoding is not None else frozenset()
        if hooks - {'embed', 'between_blocks'}:
            name = type(encoding).__name__
            pos.check_tokens(B, Nq, f'{name} in attention (the queries)')
            pos_k.check_tokens(k.shape[0], k.shape[2], f'{name} in attention (the keys)')
        if 'rotate' in hooks:
            q, k = encoding.rotate(q, k, pos, pos_k, layer_idx)
        if 'transform_v' in hooks:
            v = encoding.transform_v(v, pos_k, layer_idx)
        hook_needs_probs = 'transform_out' in hooks and encoding.needs_probs(layer_idx)
        explicit = self.capture_probs or hook_needs_probs or not self.fused_attn
        flex = None
        if ('logits_bias' in hooks and attn_mask is None and not explicit and not (self.training and self.attn_drop.p)
                and flex_supported(q, k, v)):
            flex = encoding.flex_bias(pos, pos_k, layer_idx)
        bias = None
        if flex is None:
            bias = additive_mask(attn_mask, q.dtype)
            if 'logits_bias' in hooks:
                encoding_bias = encoding.logits_bias(q, k, pos, pos_k, layer_idx)
                if encoding_bias is not None:
                    bias = encoding_bias if bias is None else bias + encoding_bias
            if bias is not None:
                bias = bias.to(q.dtype)

        probs = None
        if flex is not None:
            offset_bias, block_mask = flex
            out = flex_offset_attention(q, k, v, offset_bias, self.scale, block_mask,
                                        enable_gqa=k.shape[1] != self.num_heads)
        elif explicit:
            k, v = _repeat_heads(k, self.num_heads), _repeat_heads(v, self.num_heads)
            probs = attention_probs(q, k, self.scale, bias)
            if self.capture_probs:
                self.attn_probs = probs.detach()
            probs = self.attn_drop(probs)
            out = probs @ v
        else:
            shared = k.shape[1] != self.num_heads
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, dropout_p=self.attn_drop.p if self.training else 0., enable_gqa=shared)
        if 'transform_out' in hooks:
            out = encoding.transform_out(out, pos, layer_idx, probs, pos_k)

        out = out.transpose(1, 2).reshape(B, Nq, self.attn_dim)
        out = self.norm(out)
        if gate is not None:
            out = out * gate
        return self.proj_drop(self.proj(out))
