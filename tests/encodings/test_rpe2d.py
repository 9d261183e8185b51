"""RPE2D: randomized sorted positions in training, contiguous at evaluation, reproducible on demand."""
from __future__ import annotations

import pytest
import torch

import vispe
from vispe.encodings import RPE2D, sincos_2d_embedding
from vispe.geometry import Positions, grid_coords

CONTEXT = dict(embed_dim=16, num_heads=2, head_dim=8, depth=1, grid_size=(4, 4), num_prefix_tokens=1)


def build(base: str = 'SinCos2D', **kwargs) -> RPE2D:
    return vispe.build_encoding(dict(type='RPE2D', base=dict(type=base), max_grid=(8, 12), **kwargs), **CONTEXT)


def test_training_positions_are_sorted_distinct_in_range_and_change() -> None:
    encoding = build().train()
    draws = []
    for _ in range(5):
        rows, cols = encoding.rows_and_cols((5, 6))
        assert len(rows) == 5 and len(cols) == 6
        assert torch.all(rows[1:] > rows[:-1]) and torch.all(cols[1:] > cols[:-1])
        assert rows.min() >= 0 and rows.max() < 8 and cols.min() >= 0 and cols.max() < 12
        draws.append(torch.cat([rows, cols]))
    assert len({tuple(d.tolist()) for d in draws}) > 1


def test_eval_positions_are_contiguous() -> None:
    encoding = build().eval()
    pos = Positions((5, 6), 1)
    assert torch.equal(encoding.positions_for_base(pos).coords, grid_coords((5, 6)))


def test_a_seed_fixes_the_positions() -> None:
    first, second = build(seed=3).train(), build(seed=3).train()
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(first.rows_and_cols((4, 4)), second.rows_and_cols((4, 4))))


def test_positions_from_outside() -> None:
    encoding = build().train()
    rows, cols = torch.tensor([0, 3, 7]), torch.tensor([1, 2, 11])
    x = torch.zeros(1, 1 + 9, 16)
    with encoding.fixed_positions(rows, cols):
        out = encoding.embed(x, Positions((3, 3), 1))
    expected = sincos_2d_embedding(torch.cartesian_prod(rows.float(), cols.float()), 16)
    assert torch.allclose(out[0, 1:], expected)
    given = torch.tensor([[0.0, 0.0], [2.0, 5.0]])
    pos = Positions((1, 2), 1, coords=given)
    assert encoding.positions_for_base(pos) is pos


def test_each_forward_draws_once_for_all_layers() -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=4, depth=3, num_classes=2,
                           encoding=dict(type='RPE2D', base=dict(type='RoPEMixed'), max_grid=16)).train()
    draws = []
    original = vit.encoding.sample_positions
    vit.encoding.sample_positions = lambda grid, generator=None: draws.append(grid) or original(grid, generator)
    vit(torch.randn(2, 3, 32, 32))
    assert draws == [(8, 8)]


def test_learned_ape_base_reads_cells_of_its_max_table() -> None:
    encoding = build('LearnedAPE').eval()
    assert encoding.base.pos_embed.shape == (1, 1 + 8 * 12, 16)
    x = torch.zeros(1, 1 + 6, 16)
    out = encoding.embed(x, Positions((2, 3), 1))
    table = encoding.base.pos_embed[0]
    assert torch.equal(out[0, 0], table[0])
    assert torch.equal(out[0, 1:4], table[1:4]) and torch.equal(out[0, 4:7], table[1 + 12:1 + 12 + 3])


def test_grid_larger_than_max_is_an_error() -> None:
    with pytest.raises(ValueError, match=r'Grid \(9, 4\) is larger than RPE2D max_grid \(8, 12\)'):
        build().eval().embed(torch.zeros(1, 37, 16), Positions((9, 4), 1))
    with pytest.raises(ValueError, match='larger than RPE2D max_grid'):
        build().train().rows_and_cols((4, 13))


def test_bases_other_than_position_readers_are_refused() -> None:
    with pytest.raises(ValueError, match='one encoding that uses embed or rotate'):
        vispe.build_encoding(dict(type='RPE2D', base=['SinCos2D', 'RoPEAxial'], max_grid=8), **CONTEXT)
