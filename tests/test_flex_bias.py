"""The FlexAttention path of the grid-offset biases (LookHere, 2D-ALiBi, iRPE bias): its tables give exactly the
dense bias of the SDPA path, attention through it equals SDPA with that bias, and it runs only where it should."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import vispe
from vispe.encodings import ALiBi2D, LookHere, iRPE
from vispe.encodings.lookhere import MASKED_PENALTY
from vispe.flex_bias import OffsetBias, flex_offset_attention, flex_supported, grid_offsets
from vispe.geometry import Positions

from .helpers import max_diff

LOOKHERE = [dict(directions='halves', num_heads=4), dict(directions='corners', distance='sqrt', num_heads=4),
            dict(directions='triangles', fill_with='max', num_heads=4), dict(directions='halves-zero', num_heads=6),
            dict(directions='center', fill_with='zero', num_heads=4),
            dict(directions='zerotriangles', fill_with='max', distance='square', num_heads=4)]
IRPE = [dict(method='product', on='k'), dict(method='cross', on='qk', shared_head=False),
        dict(method='euclidean', on='q', ratio=2.0), dict(method='quant', on='qk', num_prefix_tokens=0)]


def flex_encodings() -> list[tuple[str, vispe.encodings.PositionEncoding]]:
    torch.manual_seed(0)
    built = [(f'LookHere-{cfg["directions"]}', LookHere(depth=3, kernel='flex', **cfg)) for cfg in LOOKHERE]
    built.append(('ALiBi2D', ALiBi2D(num_heads=4, distance_scale=0.7, kernel='flex')))
    for cfg in IRPE:
        encoding = iRPE(head_dim=8, num_heads=4, depth=3, mode='bias', kernel='flex', **cfg)
        for parameter in encoding.parameters():
            torch.nn.init.normal_(parameter)
        built.append((f'iRPE-{cfg["method"]}-{cfg["on"]}', encoding))
    return built


@pytest.mark.parametrize('name, encoding', flex_encodings(), ids=lambda value: value if isinstance(value, str) else '')
def test_offset_tables_give_the_dense_bias_of_every_layer(name, encoding) -> None:
    """Every layer: the tables' dense bias equals logits_bias, masked keys (−inf) exactly where LookHere puts its
    largest-bfloat16 penalty; on a non-square grid, prefix tokens included."""
    pos = Positions((3, 5), num_prefix_tokens=getattr(encoding, 'num_prefix_tokens', 1))
    for layer in range(3):
        offset_bias, block_mask = encoding.flex_bias(pos, pos, layer)
        dense = offset_bias.dense()
        q = torch.randn(1, dense.shape[1], pos.num_tokens, 8)
        expected = encoding.logits_bias(q, q, pos, pos, layer).expand_as(dense)
        masked = expected == -MASKED_PENALTY
        assert torch.equal(torch.isinf(dense), masked)
        assert (dense[~masked] - expected[~masked]).abs().max() <= 1e-5
        assert (block_mask is not None) == bool(masked.any())


@pytest.mark.parametrize('encoding', [dict(type='LookHere'), dict(type='LookHere', directions='center'),
                                      dict(type='ALiBi2D'), dict(type='iRPE', mode='bias', method='cross', on='qk')],
                         ids=lambda cfg: '-'.join(str(value) for value in cfg.values()))
def test_flex_attention_equals_the_sdpa_path_in_a_vit(encoding) -> None:
    """Inference of a ViT: kernel='flex' (block mask, per-key values, prefix token, two layers) gives the logits
    of kernel='sdpa'."""
    torch.manual_seed(0)
    vit = vispe.create_vit('vit_tiny_patch16_224', encoding=encoding, num_classes=5, depth=2, img_size=64,
                           patch_size=8).eval()
    for parameter in vit.encoding.parameters():
        torch.nn.init.normal_(parameter)
    images = torch.randn(2, 3, 64, 56)
    with torch.no_grad():
        vit.encoding.kernel = 'sdpa'
        reference = vit(images)
        vit.encoding.kernel = 'flex'
        flex = vit(images)
    assert max_diff(flex, reference) <= 1e-5


def test_flex_kernel_skips_masked_tiles_and_matches_sdpa() -> None:
    """A 24×24 grid (577 tokens, five 128-token tiles): heads that look up skip the tiles below them."""
    torch.manual_seed(0)
    encoding = LookHere(num_heads=4, depth=1, directions='halves')
    pos = Positions((24, 24), num_prefix_tokens=1)
    encoding.kernel = 'flex'
    offset_bias, block_mask = encoding.flex_bias(pos, pos, 0)
    tiles = 4 * 5 * 5  # heads x query tiles x key tiles (torch 2.12 and older miscount BlockMask.sparsity())
    visited = block_mask.kv_num_blocks.sum() + block_mask.full_kv_num_blocks.sum()
    assert visited < tiles
    assert encoding.table_cache.nbytes() >= sum(t.numel() * t.element_size() for t in block_mask.as_tuple()
                                           if isinstance(t, torch.Tensor))
    q, k, v = (torch.randn(1, 4, pos.num_tokens, 16) for _ in range(3))
    with torch.no_grad():
        out = flex_offset_attention(q, k, v, offset_bias, 0.25, block_mask)
    reference = F.scaled_dot_product_attention(q, k, v, attn_mask=offset_bias.dense(), scale=0.25)
    assert max_diff(out, reference) <= 1e-5


def test_auto_kernel_takes_flex_only_where_measured_faster() -> None:
    small, large = Positions((32, 32), num_prefix_tokens=1), Positions((48, 48), num_prefix_tokens=1)
    lookhere = LookHere(num_heads=4, depth=1)
    assert lookhere.flex_bias(small, small, 0) is None and lookhere.flex_bias(large, large, 0) is not None
    lookhere.kernel = 'sdpa'
    assert lookhere.flex_bias(large, large, 0) is None
    lookhere.kernel, lookhere.reference_rounding = 'flex', True
    assert lookhere.flex_bias(small, small, 0) is None
    alibi = ALiBi2D(num_heads=4)
    assert alibi.flex_bias(large, large, 0) is None
    contextual = iRPE(head_dim=8, num_heads=4, depth=1, mode='contextual', kernel='flex')
    assert contextual.flex_bias(small, small, 0) is None
    with pytest.raises(ValueError, match="kernel must be one of"):
        ALiBi2D(num_heads=4, kernel='triton')


def test_training_on_the_cpu_takes_the_sdpa_path() -> None:
    """FlexAttention has no CPU backward: with gradients (or inside torch.compile) the SDPA path runs and trains."""
    q = torch.randn(1, 2, 5, 8, requires_grad=True)
    assert not flex_supported(q, q, q)
    with torch.no_grad():
        assert flex_supported(q, q, q)
    torch.manual_seed(0)
    vit = vispe.create_vit('vit_tiny_patch16_224', encoding=dict(type='LookHere', kernel='flex'), num_classes=5,
                           depth=1, img_size=32, patch_size=8)
    vit(torch.randn(2, 3, 32, 32)).sum().backward()
    assert all(parameter.grad is not None for parameter in vit.blocks.parameters())


def test_grid_offsets_layout() -> None:
    offsets = grid_offsets((2, 3))
    assert offsets.shape == (3, 5, 2)
    assert offsets[0, 0].tolist() == [-1.0, -2.0] and offsets[1, 2].tolist() == [0.0, 0.0]
    bias = OffsetBias((2, 3), 0, offsets[..., 1].unsqueeze(0), torch.zeros(1))
    assert bias.dense()[0, 0, 0].tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
