"""The one attention module every encoding plugs into.

It is timm's ``Attention`` (same constructor, same parameter names ``qkv``, ``q_norm``, ``k_norm``,
``norm``, ``proj``, so timm checkpoints load unchanged) with a forward that calls the encoding's
hooks. The kernel is ``F.scaled_dot_product_attention``; rotations act on q/k before it and biases go
in as its additive ``attn_mask``. The explicit ``softmax(q·kᵀ·scale + bias)`` path runs only when the
probabilities are needed: an encoding hook asks for them (iRPE on values), they are being captured
for visualisation, or ``fused_attn`` is off. The probabilities pass through ``attn_drop``, so timm's
``AttentionExtract`` hooks work on the explicit path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from timm.layers import Attention as TimmAttention

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
    """softmax(q·scale·kᵀ + bias) over keys; q, k (B, heads, N, d) -> (B, heads, N, N)."""
    logits = (q * scale) @ k.transpose(-2, -1)
    if bias is not None:
        logits = logits + bias
    return logits.softmax(dim=-1)


class Attention(TimmAttention):
    """Multi-head self-attention with position-encoding hooks (timm ``Attention`` subclass).

    Shapes: x (B, N, C) -> (B, N, C), N = prefix tokens + patches.

    Attributes:
        capture_probs: store the probabilities of the next forwards in ``attn_probs``
            (B, heads, N, N); off by default, and then nothing is materialised.
    """

    capture_probs: bool = False
    attn_probs: torch.Tensor | None = None

    def forward(
            self,
            x: torch.Tensor,
            pos: Positions | None = None,
            encoding: PositionEncoding | None = None,
            layer_idx: int = 0,
            attn_mask: torch.Tensor | None = None,
            qk_embed: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Args:
            x: (B, N, C) tokens.
            pos: positions of this forward (required when ``encoding`` is given).
            encoding: the model's encoding; its hooks run on q, k, v, the logits and the output.
            layer_idx: index of the block, for per-layer encodings.
            attn_mask: optional extra mask, bool (True = attend) or additive float,
                broadcastable to (B, heads, N, N).
            qk_embed: optional (B|1, N, C) added to the input of the query and key projections only,
                not of the values (DETR adds its position embedding this way in every layer).
        """
        B, N, _ = x.shape
        gate = self.gate(x).sigmoid() if self.gate is not None else None
        qkv = self.qkv(x)
        if qk_embed is not None:
            query_key = F.linear(qk_embed.to(x.dtype), self.qkv.weight[:2 * self.attn_dim])
            qkv = qkv + F.pad(query_key, (0, self.attn_dim))
        q, k, v = qkv.reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)

        hooks = encoding.active_hooks if encoding is not None else frozenset()
        if 'rotate' in hooks:
            q, k = encoding.rotate(q, k, pos, layer_idx)
        if 'transform_v' in hooks:
            v = encoding.transform_v(v, pos, layer_idx)
        bias = additive_mask(attn_mask, q.dtype)
        if 'logits_bias' in hooks:
            encoding_bias = encoding.logits_bias(q, k, pos, layer_idx)
            if encoding_bias is not None:
                bias = encoding_bias if bias is None else bias + encoding_bias
        if bias is not None:
            bias = bias.to(q.dtype)
        hook_needs_probs = 'transform_out' in hooks and encoding.needs_probs(layer_idx)

        probs = None
        if self.capture_probs or hook_needs_probs or not self.fused_attn:
            probs = attention_probs(q, k, self.scale, bias)
            if self.capture_probs:
                self.attn_probs = probs.detach()
            probs = self.attn_drop(probs)
            out = probs @ v
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, dropout_p=self.attn_drop.p if self.training else 0.)
        if 'transform_out' in hooks:
            out = encoding.transform_out(out, pos, layer_idx, probs)

        out = out.transpose(1, 2).reshape(B, N, self.attn_dim)
        out = self.norm(out)
        if gate is not None:
            out = out * gate
        return self.proj_drop(self.proj(out))
