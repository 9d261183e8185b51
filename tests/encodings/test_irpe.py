"""iRPE: the piecewise index function, bucket counts, translation invariance, q-side reversal, all terms."""
from __future__ import annotations

import pytest
import torch

import vispe
from vispe.attention import Attention
from vispe.encodings import iRPE
from vispe.encodings.irpe import bucket_ids, num_buckets, piecewise_index
from vispe.geometry import Positions, relative_offsets

from ..helpers import max_diff


def build(**kwargs) -> iRPE:
    options = dict(head_dim=8, num_heads=2, depth=1, num_prefix_tokens=1)
    options.update(kwargs)
    encoding = iRPE(**options)
    with torch.no_grad():
        for param in encoding.parameters():
            param.normal_(std=0.5)
    return encoding


def test_piecewise_index_on_minus_20_to_20_for_ratio_1_9() -> None:
    x = torch.arange(-20, 21)
    expected = [3 if v >= 4 else -3 if v <= -4 else 2 if v == 3 else -2 if v == -3 else v for v in x.tolist()]
    assert piecewise_index(x, 1.9, 3.8, 15.2).tolist() == expected
    assert piecewise_index(x.float(), 1.9, 3.8, 15.2).tolist() == expected


@pytest.mark.parametrize('method, ratio, expected', [('product', 1.9, 50), ('cross', 1.9, 8), ('euclidean', 1.9, 8),
                                                     ('quant', 1.9, 8), ('euclidean', 20, 82), ('quant', 33, 134),
                                                     ('cross', 20, 82)])
def test_bucket_counts_per_method(method, ratio, expected) -> None:
    assert num_buckets(method, ratio, num_prefix_tokens=1) == expected
    assert num_buckets(method, ratio, num_prefix_tokens=0) == expected - 1
    ids = bucket_ids(method, (9, 11), ratio, num_prefix_tokens=1)
    assert ids.min() >= 0 and ids.max() == expected - 1
    assert torch.all(ids[:, 0, :] == expected - 1) and torch.all(ids[:, :, 0] == expected - 1)
    assert ids.shape == ((2 if method == 'cross' else 1), 100, 100)


def test_product_buckets_by_hand() -> None:
    ids = bucket_ids('product', (1, 6), 1.9, num_prefix_tokens=0)[0]
    # query col 0, key col 5: offset (0, -5) -> g = (0, -3) -> (0 + 3)·7 + (-3 + 3) = 21
    assert ids[0, 5] == 21 and ids[5, 0] == 27 and ids[2, 2] == 24


@pytest.mark.parametrize('method', ['product', 'cross', 'euclidean', 'quant'])
def test_bias_is_translation_invariant(method) -> None:
    encoding = build(method=method, mode='bias', on='k', shared_head=False, num_prefix_tokens=0)
    grid = (6, 7)
    pos = Positions(grid)
    bias = encoding.logits_bias(None, None, pos, pos, 0)[0]
    offsets = relative_offsets(grid)
    flat_offsets = (offsets[..., 0] * 100 + offsets[..., 1]).flatten()
    flat_bias = bias.flatten(1)
    for offset in flat_offsets.unique():
        values = flat_bias[:, flat_offsets == offset]
        assert torch.all(values == values[:, :1])


def test_q_side_uses_the_reversed_offset() -> None:
    encoding = build(method='product', mode='bias', on='q', num_prefix_tokens=0)
    pos = Positions((3, 4))
    ids = encoding.bucket_ids(pos)[0]
    table = encoding.lookup_q[0, 0, 0]
    bias = encoding.logits_bias(None, None, pos, pos, 0)[0, 0]
    assert torch.equal(bias, table[ids.T])
    assert not torch.equal(bias, table[ids])


def test_contextual_terms_equal_their_definitions() -> None:
    encoding = build(method='product', mode='contextual', on='qkv', num_prefix_tokens=1)
    pos = Positions((3, 3), num_prefix_tokens=1)
    ids = encoding.bucket_ids(pos)[0]
    q, k = torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8)
    r_k, r_q, r_v = encoding.lookup_k[0, 0, 0], encoding.lookup_q[0, 0, 0], encoding.lookup_v[0, 0, 0]
    s = 8 ** -0.5
    expected = torch.einsum('bhid,dij->bhij', q * s, r_k[:, ids]) + torch.einsum('bhjd,dji->bhij', k * s, r_q[:, ids])
    assert max_diff(encoding.logits_bias(q, k, pos, pos, 0), expected) <= 1e-5
    probs = torch.softmax(torch.randn(2, 2, 10, 10), -1)
    out = torch.randn(2, 2, 10, 8)
    expected_v = out + torch.einsum('bhij,ijd->bhid', probs, r_v[ids])
    assert max_diff(encoding.transform_out(out, pos, 0, probs), expected_v) <= 1e-5


@pytest.mark.parametrize('mode, on', [('bias', 'k'), ('bias', 'qk'), ('contextual', 'k'), ('contextual', 'qk'),
                                      ('contextual', 'qkv')])
def test_sdpa_path_equals_explicit_path(on, mode) -> None:
    encoding = build(method='cross', mode=mode, on=on, head_dim=8, num_heads=4, shared_head=False)
    fused = Attention(32, num_heads=4).eval()
    explicit = Attention(32, num_heads=4).eval()
    explicit.load_state_dict(fused.state_dict())
    explicit.fused_attn = False
    pos = Positions((4, 5), num_prefix_tokens=1)
    x = torch.randn(2, 21, 32)
    assert max_diff(fused(x, pos, encoding, 0), explicit(x, pos, encoding, 0)) <= 1e-5


def test_bucket_ids_are_cached_per_grid() -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=4, depth=3, num_classes=2,
                           encoding=dict(type='iRPE', on='qk')).eval()
    with torch.no_grad():
        vit(torch.randn(1, 3, 32, 32))
        vit(torch.randn(1, 3, 32, 32))
        vit(torch.randn(1, 3, 32, 48))
    assert vit.encoding.table_cache.builds == 2


def test_deit_with_irpe_composition_and_errors() -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=4, depth=2, num_classes=2,
                           encoding=['LearnedAPE', dict(type='iRPE', method='product', mode='ctx', on='qkv')])
    assert [type(e).__name__ for e in vit.encoding.encodings] == ['LearnedAPE', 'iRPE']
    assert vit.encoding.encodings[1].lookup_k.shape == (2, 1, 1, 64, 50)
    with pytest.raises(ValueError, match='only in contextual mode'):
        iRPE(head_dim=8, num_heads=2, depth=1, mode='bias', on='v')
    with pytest.raises(ValueError, match='method must be one of'):
        iRPE(head_dim=8, num_heads=2, depth=1, method='manhattan')
