"""The attention module: timm parity, SDPA vs explicit probabilities, hooks, capture."""
from __future__ import annotations

import pytest
import torch
from timm.layers import Attention as TimmAttention

import vispe
from vispe.attention import Attention, additive_mask
from vispe.encodings import PositionEncoding
from vispe.geometry import Positions

from .helpers import max_diff, tiny_vit

DIM, HEADS = 32, 4


class HookProbe(PositionEncoding):
    """Exercises every attention hook with simple, checkable maths."""

    def __init__(self, probs_at: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.probs_at = probs_at
        self.seen_probs: list[torch.Tensor] = []

    def rotate(self, q, k, pos_q, pos_k, layer_idx):
        return q.flip(-1), k.flip(-1)

    def transform_v(self, v, pos_k, layer_idx):
        return v * 2

    def logits_bias(self, q, k, pos_q, pos_k, layer_idx):
        index_q = torch.arange(q.shape[-2], dtype=q.dtype)
        index_k = torch.arange(k.shape[-2], dtype=q.dtype)
        return -(index_q[:, None] - index_k[None, :]).abs().expand(1, q.shape[1], len(index_q), len(index_k))

    def needs_probs(self, layer_idx):
        return layer_idx in self.probs_at

    def transform_out(self, out, pos_q, layer_idx, probs=None, pos_k=None):
        if probs is not None:
            self.seen_probs.append(probs)
        return out - 1


def make_pair(**kwargs) -> tuple[Attention, Attention]:
    fused = Attention(DIM, num_heads=HEADS, qkv_bias=True, **kwargs).eval()
    explicit = Attention(DIM, num_heads=HEADS, qkv_bias=True, **kwargs).eval()
    explicit.load_state_dict(fused.state_dict())
    fused.fused_attn, explicit.fused_attn = True, False
    return fused, explicit


def test_same_parameter_names_and_output_as_timm() -> None:
    ours = Attention(DIM, num_heads=HEADS, qkv_bias=True, qk_norm=True, norm_layer=torch.nn.LayerNorm).eval()
    theirs = TimmAttention(DIM, num_heads=HEADS, qkv_bias=True, qk_norm=True, norm_layer=torch.nn.LayerNorm).eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    theirs.load_state_dict(ours.state_dict())
    x = torch.randn(2, 17, DIM)
    assert max_diff(ours(x), theirs(x)) == 0.0


@pytest.mark.parametrize('encoding', [None, 'NoPE', 'LearnedAPE', 'SinCos2D', 'FourierFeatures', 'probe'])
@pytest.mark.parametrize('mask', [None, 'float', 'bool'])
def test_sdpa_path_equals_explicit_path(encoding, mask) -> None:
    fused, explicit = make_pair()
    pos = Positions((4, 4), num_prefix_tokens=1)
    if encoding == 'probe':
        built = HookProbe()
    elif encoding is None:
        built = None
    else:
        built = vispe.build_encoding(encoding, embed_dim=DIM, grid_size=(4, 4), num_prefix_tokens=1)
    x = torch.randn(2, 17, DIM)
    attn_mask = None
    if mask == 'float':
        attn_mask = torch.randn(2, 1, 17, 17)
    elif mask == 'bool':
        attn_mask = torch.rand(2, 1, 17, 17) > 0.3
        attn_mask[..., 0] = True
    out_fused = fused(x, pos, built, 0, attn_mask)
    out_explicit = explicit(x, pos, built, 0, attn_mask)
    assert max_diff(out_fused, out_explicit) <= 1e-5


def test_hooks_change_the_output_as_their_maths_says() -> None:
    layer = Attention(DIM, num_heads=HEADS).eval()
    probe = HookProbe()
    pos = Positions((4, 4), num_prefix_tokens=1)
    x = torch.randn(2, 17, DIM)
    q, k, v = layer.qkv(x).reshape(2, 17, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
    q, k, v = q.flip(-1), k.flip(-1), v * 2
    bias = probe.logits_bias(q, k, pos, pos, 0)
    probs = torch.softmax(q @ k.transpose(-1, -2) * layer.scale + bias, dim=-1)
    out = (probs @ v - 1).transpose(1, 2).reshape(2, 17, DIM)
    assert max_diff(layer(x, pos, probe, 0), layer.proj(out)) <= 1e-5


def test_probabilities_reach_transform_out_only_when_asked() -> None:
    layer = Attention(DIM, num_heads=HEADS).eval()
    probe = HookProbe(probs_at=(1,))
    pos = Positions((4, 4), num_prefix_tokens=1)
    x = torch.randn(2, 17, DIM)
    layer(x, pos, probe, 0)
    assert probe.seen_probs == []
    layer(x, pos, probe, 1)
    assert len(probe.seen_probs) == 1 and probe.seen_probs[0].shape == (2, HEADS, 17, 17)
    assert torch.allclose(probe.seen_probs[0].sum(-1), torch.ones(2, HEADS, 17))


def test_capture_is_off_by_default_and_cleared_after_capture() -> None:
    vit = tiny_vit('SinCos2D')
    images = torch.randn(2, 3, 56, 56)
    vit(images)
    layers = [m for m in vit.modules() if isinstance(m, Attention)]
    assert all(layer.attn_probs is None and not layer.capture_probs for layer in layers)
    maps = vispe.capture_attention(vit, images)
    assert len(maps) == len(layers) == 2
    assert maps[0].shape == (2, 4, 1 + 14 * 14, 1 + 14 * 14)
    assert torch.allclose(maps[0].sum(-1), torch.ones(2, 4, 197), atol=1e-5)
    assert all(layer.attn_probs is None and not layer.capture_probs for layer in layers)


def test_captured_probabilities_match_timm_attention_extract() -> None:
    from timm.utils import AttentionExtract
    vit = tiny_vit('LearnedAPE')
    for layer in vit.modules():
        if isinstance(layer, Attention):
            layer.fused_attn = False
    images = torch.randn(1, 3, 56, 40)
    extracted = AttentionExtract(vit, names=['blocks.*.attn.attn_drop'], method='hook')(images)
    captured = vispe.capture_attention(vit, images)
    for ours, theirs in zip(captured, extracted.values()):
        assert max_diff(ours, theirs) <= 1e-6


def test_additive_mask() -> None:
    keep = torch.tensor([[True, False]])
    assert torch.equal(additive_mask(keep, torch.float32), torch.tensor([[0.0, float('-inf')]]))
    bias = torch.randn(2, 2)
    assert additive_mask(bias, torch.float32) is bias
