"""RPE2D: randomized sorted positions in training, their expected values (or a draw, or 0..h-1) at evaluation,
reproducible on demand."""
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


def test_eval_positions_default_to_the_expected_sorted_draw() -> None:
    encoding = build().eval()
    rows, cols = encoding.rows_and_cols((3, 5))
    # 3 of 8 rows: (i + 1) * 9 / 4 - 1; 5 of 12 columns: (i + 1) * 13 / 6 - 1.
    assert torch.allclose(rows, torch.tensor([1.25, 3.5, 5.75]))
    assert torch.allclose(cols, torch.tensor([7, 20, 33, 46, 59]) / 6)
    full_rows, full_cols = encoding.rows_and_cols((8, 12))
    assert torch.allclose(full_rows, torch.arange(8.0)) and torch.allclose(full_cols, torch.arange(12.0))


def test_expected_positions_are_the_mean_of_the_training_draws() -> None:
    encoding = build(seed=0).train()
    draws = torch.stack([torch.cat(encoding.rows_and_cols((3, 5))).float() for _ in range(4000)])
    expected = torch.cat(encoding.eval().rows_and_cols((3, 5)))
    assert (draws.mean(0) - expected).abs().max() < 0.12


def test_eval_positions_contiguous_and_random() -> None:
    encoding = build(eval_positions='contiguous').eval()
    pos = Positions((5, 6), num_prefix_tokens=1)
    assert torch.equal(encoding.positions_for_base(pos).coords, grid_coords((5, 6)))
    encoding.eval_positions = 'random'
    torch.manual_seed(0)
    draws = {tuple(torch.cat(encoding.rows_and_cols((5, 6))).tolist()) for _ in range(5)}
    assert len(draws) > 1
    with pytest.raises(ValueError, match="'expected'"):
        encoding.eval_positions = 'expectd'


def test_a_seed_fixes_the_positions() -> None:
    first, second = build(seed=3).train(), build(seed=3).train()
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(first.rows_and_cols((4, 4)), second.rows_and_cols((4, 4))))


def test_positions_from_outside() -> None:
    encoding = build().train()
    rows, cols = torch.tensor([0, 3, 7]), torch.tensor([1, 2, 11])
    x = torch.zeros(1, 1 + 9, 16)
    with encoding.fixed_positions(rows, cols):
        out = encoding.embed(x, Positions((3, 3), num_prefix_tokens=1))
    expected = sincos_2d_embedding(torch.cartesian_prod(rows.float(), cols.float()), 16)
    assert torch.allclose(out[0, 1:], expected)
    given = torch.tensor([[0.0, 0.0], [2.0, 5.0]])
    pos = Positions((1, 2), num_prefix_tokens=1, coords=given)
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
    encoding = build('LearnedAPE', eval_positions='contiguous').eval()
    assert encoding.base.pos_embed.shape == (1, 1 + 8 * 12, 16)
    x = torch.zeros(1, 1 + 6, 16)
    out = encoding.embed(x, Positions((2, 3), num_prefix_tokens=1))
    table = encoding.base.pos_embed[0]
    assert torch.equal(out[0, 0], table[0])
    assert torch.equal(out[0, 1:4], table[1:4]) and torch.equal(out[0, 4:7], table[1 + 12:1 + 12 + 3])
    encoding.eval_positions = 'expected'
    out = encoding.embed(x, Positions((2, 3), num_prefix_tokens=1))
    # rows (i + 1) * 9 / 3 - 1 = 2, 5; columns (i + 1) * 13 / 4 - 1 = 2.25, 5.5, 8.75 rounded to 2, 6 (half to even), 9.
    cells = [1 + row * 12 + col for row in (2, 5) for col in (2, 6, 9)]
    assert torch.equal(out[0, 1:], table[cells])


def test_grid_larger_than_max_is_an_error() -> None:
    with pytest.raises(ValueError, match=r'Grid \(9, 4\) is larger than RPE2D max_grid \(8, 12\)'):
        build().eval().embed(torch.zeros(1, 37, 16), Positions((9, 4), num_prefix_tokens=1))
    with pytest.raises(ValueError, match='larger than RPE2D max_grid'):
        build().train().rows_and_cols((4, 13))


def test_bases_other_than_position_readers_are_refused() -> None:
    with pytest.raises(ValueError, match='one encoding that uses embed or rotate'):
        vispe.build_encoding(dict(type='RPE2D', base=['SinCos2D', 'RoPEAxial'], max_grid=8), **CONTEXT)
