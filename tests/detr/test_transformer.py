"""DETR's encoder layer in vispe equals DETR's formulation on torch's nn.MultiheadAttention."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vispe.encodings import detr_sine_embedding
from vispe.models.detr import DETREncoder


def detr_reference_layer(layer, src: torch.Tensor, pos: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """DETR's TransformerEncoderLayer.forward_post with the weights of a vispe EncoderLayer."""
    width = src.shape[-1]
    attention = nn.MultiheadAttention(width, layer.attn.num_heads, batch_first=True)
    attention.in_proj_weight.data.copy_(layer.attn.qkv.weight)
    attention.in_proj_bias.data.copy_(layer.attn.qkv.bias)
    attention.out_proj.load_state_dict(layer.attn.proj.state_dict())
    attention.eval()
    q = k = src + pos
    src = layer.norm1(src + attention(q, k, value=src, key_padding_mask=padding, need_weights=False)[0])
    hidden = layer.mlp[3](F.relu(layer.mlp[0](src)))
    return layer.norm2(src + hidden)


def test_encoder_with_detr_sine_equals_detrs_layers() -> None:
    encoder = DETREncoder(embed_dim=32, depth=2, num_heads=4, mlp_dim=64, dropout=0.1, grid_size=4, stride=32).eval()
    features = torch.randn(2, 32, 4, 5)
    mask = torch.ones(2, 4, 5, dtype=torch.bool)
    mask[1, 3:] = False
    mask[1, :, 4:] = False
    with torch.no_grad():
        ours = encoder(features, mask)
        src = features.flatten(2).transpose(1, 2)
        pos = detr_sine_embedding(mask, 32)
        for layer in encoder.layers:
            src = detr_reference_layer(layer, src, pos, ~mask.flatten(1))
    torch.testing.assert_close(ours, src, atol=1e-5, rtol=1e-5)
