"""Cross-attention through vispe's one attention module: equal to torch's MultiheadAttention, shared key
heads (GQA), 2D encodings between query and key positions, and the refusal of one-position hooks."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import vispe
from vispe.attention import Attention
from vispe.encodings import PositionEncoding
from vispe.geometry import Positions

from .helpers import max_diff

DIM, HEADS = 32, 4


def attention_pair() -> tuple[Attention, nn.MultiheadAttention]:
    ours = Attention(DIM, num_heads=HEADS, qkv_bias=True).eval()
    torch_mha = nn.MultiheadAttention(DIM, HEADS, batch_first=True).eval()
    torch_mha.in_proj_weight.data.copy_(ours.qkv.weight)
    torch_mha.in_proj_bias.data.copy_(ours.qkv.bias)
    torch_mha.out_proj.weight.data.copy_(ours.proj.weight)
    torch_mha.out_proj.bias.data.copy_(ours.proj.bias)
    return ours, torch_mha


@pytest.mark.parametrize('fused', [True, False])
def test_cross_attention_equals_torch_multihead_attention_with_masks(fused) -> None:
    torch.manual_seed(0)
    ours, theirs = attention_pair()
    ours.fused_attn = fused
    tgt, query_pos = torch.randn(2, 5, DIM), torch.randn(2, 5, DIM)
    memory, key_pos = torch.randn(2, 9, DIM), torch.randn(1, 9, DIM)
    key_padding = torch.zeros(2, 9, dtype=torch.bool)
    key_padding[1, 6:] = True
    extra = torch.randn(5, 9)
    padding = torch.zeros(2, 9).masked_fill(key_padding, float('-inf'))
    expected, _ = theirs(tgt + query_pos, memory + key_pos, memory, key_padding_mask=padding, attn_mask=extra)
    mask = (~key_padding)[:, None, None, :]
    out = ours(tgt, q_embed=query_pos, memory=memory, k_embed=key_pos,
               attn_mask=extra + torch.zeros(2, 1, 5, 9).masked_fill(~mask, float('-inf')))
    assert max_diff(out, expected) <= 1e-5


def test_self_attention_with_query_embedding_equals_torch_multihead_attention() -> None:
    torch.manual_seed(1)
    ours, theirs = attention_pair()
    tgt, query_pos = torch.randn(2, 6, DIM), torch.randn(2, 6, DIM)
    expected, _ = theirs(tgt + query_pos, tgt + query_pos, tgt)
    assert max_diff(ours(tgt, q_embed=query_pos), expected) <= 1e-5


@pytest.mark.parametrize('kv_heads', [1, 2])
def test_shared_key_heads_equal_repeated_keys(kv_heads) -> None:
    torch.manual_seed(2)
    shared = Attention(DIM, num_heads=HEADS, qkv_bias=True, num_kv_heads=kv_heads).eval()
    head_dim = DIM // HEADS
    assert shared.qkv.weight.shape == ((HEADS + 2 * kv_heads) * head_dim, DIM)
    full = Attention(DIM, num_heads=HEADS, qkv_bias=True).eval()
    q_w, k_w, v_w = shared.qkv.weight.split([DIM, kv_heads * head_dim, kv_heads * head_dim])
    q_b, k_b, v_b = shared.qkv.bias.split([DIM, kv_heads * head_dim, kv_heads * head_dim])

    def repeat(w: torch.Tensor) -> torch.Tensor:
        return w.unflatten(0, (kv_heads, head_dim)).repeat_interleave(HEADS // kv_heads, 0).flatten(0, 1)
    full.qkv.weight.data.copy_(torch.cat([q_w, repeat(k_w), repeat(v_w)]))
    full.qkv.bias.data.copy_(torch.cat([q_b, repeat(k_b), repeat(v_b)]))
    full.proj.load_state_dict(shared.proj.state_dict())
    x, memory, bias = torch.randn(2, 5, DIM), torch.randn(2, 11, DIM), torch.randn(2, HEADS, 5, 11)
    expected = full(x, memory=memory, attn_mask=bias)
    assert max_diff(shared(x, memory=memory, attn_mask=bias), expected) <= 1e-5
    shared.fused_attn = False
    assert max_diff(shared(x, memory=memory, attn_mask=bias), expected) <= 1e-5
    with pytest.raises(ValueError, match='num_kv_heads must divide num_heads 4'):
        Attention(DIM, num_heads=HEADS, num_kv_heads=3)


def relative_logits(encoding: PositionEncoding, pos_q: Positions, pos_k: Positions, q: torch.Tensor,
                    k: torch.Tensor) -> torch.Tensor:
    rotated_q, rotated_k = encoding.rotate(q, k, pos_q, pos_k, 0)
    logits = rotated_q @ rotated_k.transpose(-1, -2)
    bias = encoding.logits_bias(rotated_q, rotated_k, pos_q, pos_k, 0)
    return logits if bias is None else logits + bias


RELATIVE = [dict(type='RoPEAxial'), dict(type='RoPEMixed'), dict(type='ComRoPE', variant='LD'),
            dict(type='ALiBi2D'), dict(type='LookHere', directions='halves'),
            dict(type='LookHere', directions='corners', fill_with='max'),
            dict(type='iRPE', method='product', mode='contextual', on='qk'),
            dict(type='iRPE', method='cross', mode='bias', on='qk', shared_head=False),
            dict(type='iRPE', method='euclidean', mode='contextual', on='k')]


def build(cfg: dict, prefix: int = 1) -> PositionEncoding:
    torch.manual_seed(3)
    encoding = vispe.build_encoding(cfg, embed_dim=DIM, num_heads=HEADS, head_dim=DIM // HEADS, depth=1,
                                    grid_size=(4, 5), num_prefix_tokens=prefix).eval()
    for parameter in encoding.parameters():
        nn.init.normal_(parameter)
    return encoding


@pytest.mark.parametrize('cfg', RELATIVE, ids=lambda c: '-'.join(str(v) for v in c.values()))
def test_two_positions_on_the_same_grid_equal_self_attention(cfg) -> None:
    """The cross-attention path (query and key positions apart, built from coordinates) gives the same
    logits as the self-attention path (cached grid tables) when both sides are the same grid."""
    encoding = build(cfg)
    pos, twin = Positions((4, 5), num_prefix_tokens=1), Positions((4, 5), num_prefix_tokens=1)
    q, k = torch.randn(2, HEADS, 21, DIM // HEADS), torch.randn(2, HEADS, 21, DIM // HEADS)
    assert max_diff(relative_logits(encoding, pos, twin, q, k), relative_logits(encoding, pos, pos, q, k)) <= 1e-4


@pytest.mark.parametrize('cfg', RELATIVE, ids=lambda c: '-'.join(str(v) for v in c.values()))
def test_cross_attention_logits_follow_the_query_key_offset(cfg) -> None:
    """Queries at reference points against the memory grid: moving queries and keys by the same whole-cell
    offset leaves the logits unchanged (relative encodings), while moving only the queries changes them. ComRoPE
    normalises both sides by the keys' grid, so the same holds in its normalised units."""
    encoding = build(cfg, prefix=0)
    grid = (4, 5)
    references = torch.tensor([[0.3, 1.7], [2.0, 2.0], [3.2, 0.4]])
    keys = Positions(grid)
    queries = Positions(coords=references)
    moved_keys = Positions(grid, coords=keys.patch_coords() + torch.tensor([2.0, -3.0]))
    moved_queries = Positions(coords=references + torch.tensor([2.0, -3.0]))
    q, k = torch.randn(1, HEADS, 3, DIM // HEADS), torch.randn(1, HEADS, 20, DIM // HEADS)
    logits = relative_logits(encoding, queries, keys, q, k)
    assert max_diff(relative_logits(encoding, moved_queries, moved_keys, q, k), logits) <= 1e-4
    assert max_diff(relative_logits(encoding, moved_queries, keys, q, k), logits) > 1e-2


@pytest.mark.parametrize('hook, source', [
    ('rotate', 'def rotate(self, q, k, pos, layer_idx):\n    return q, k'),
    ('logits_bias', 'def logits_bias(self, q, k, pos, layer_idx):\n    return None'),
    ('transform_out', 'def transform_out(self, out, pos, layer_idx, probs=None):\n    return out'),
])
def test_a_plugin_with_one_position_hooks_is_refused_with_the_new_signature(hook, source) -> None:
    namespace: dict = {}
    exec(source, namespace)
    with pytest.raises(TypeError, match=rf'MyPE.{hook}\(self, .*\) has the one-position signature .*'
                                        rf'Hooks now receive the query-side and the key-side positions: write '
                                        rf'{hook}\(self, .*pos_q'):
        type('MyPE', (PositionEncoding,), {hook: namespace[hook]})


def test_a_hook_is_judged_by_its_parameter_names_not_their_count() -> None:
    """A correct transform_out that leaves out pos_k (four positional parameters, as the old one-position hook had)
    is accepted and called without it; an old hook named pos with the new count is refused."""
    calls = []

    class Halved(PositionEncoding):
        def transform_out(self, out, pos_q, layer_idx, probs=None):
            calls.append((pos_q.num_positions, probs is None))
            return out * 0.5

    attention = Attention(DIM, num_heads=HEADS)
    x, pos = torch.randn(1, 5, DIM), Positions((2, 2), num_prefix_tokens=1)
    plain = attention(x, pos, None)
    halved = attention(x, pos, Halved())
    assert calls == [(4, True)]
    bias = attention.proj.bias
    assert max_diff(halved, 0.5 * (plain - bias) + bias) <= 1e-5  # the output projection is linear
    with pytest.raises(TypeError, match=r'Old.rotate\(self, q, k, pos, layer_idx, extra\) has the one-position'):
        class Old(PositionEncoding):
            def rotate(self, q, k, pos, layer_idx, extra=None):
                return q, k
