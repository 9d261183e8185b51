"""SinCos2D equals MAE's closed form on any grid (extend) or resizes the training table (interpolate); golden
values by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vispe.encodings import SinCos2D, sincos_2d_embedding
from vispe.geometry import Positions


def mae_table(dim: int, height: int, width: int) -> np.ndarray:
    """MAE's get_2d_sincos_pos_embed written from its equations (np.meshgrid(w, h): x first)."""
    def one_axis(d: int, positions: np.ndarray) -> np.ndarray:
        omega = 1.0 / 10000 ** (np.arange(d // 2, dtype=np.float64) / (d / 2.0))
        angles = np.outer(positions.reshape(-1), omega)
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    grid_x, grid_y = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    return np.concatenate([one_axis(dim // 2, grid_x), one_axis(dim // 2, grid_y)], axis=1)


@pytest.mark.parametrize('grid', [(14, 14), (5, 9), (1, 7)])
def test_table_equals_mae_closed_form(grid) -> None:
    encoding = SinCos2D(embed_dim=32)
    table = encoding.position_embedding(Positions(grid, num_prefix_tokens=1))[0]
    assert table.shape == (grid[0] * grid[1], 32)
    np.testing.assert_allclose(table.numpy(), mae_table(32, *grid), atol=1e-6)


def test_golden_values_by_hand() -> None:
    # dim 8: ω = (1, 1/100); token (row 1, col 2) -> [sin 2, sin .02, cos 2, cos .02, sin 1, sin .01, cos 1, cos .01]
    value = sincos_2d_embedding(torch.tensor([[1.0, 2.0]]), dim=8)[0]
    expected = [math.sin(2), math.sin(.02), math.cos(2), math.cos(.02), math.sin(1), math.sin(.01), math.cos(1),
                math.cos(.01)]
    assert torch.allclose(value, torch.tensor(expected), atol=1e-7)


def test_added_to_patches_only_and_cached_per_grid() -> None:
    encoding = SinCos2D(embed_dim=16)
    tokens = torch.zeros(2, 1 + 12, 16)
    out = encoding.embed(tokens, Positions((3, 4), num_prefix_tokens=1))
    assert torch.equal(out[:, 0], torch.zeros(2, 16))
    assert torch.equal(out[0, 1:], encoding.position_embedding(Positions((3, 4), num_prefix_tokens=1))[0])
    encoding.embed(tokens, Positions((3, 4), num_prefix_tokens=1))
    encoding.embed(torch.zeros(1, 1 + 20, 16), Positions((4, 5), num_prefix_tokens=1))
    assert encoding.table_cache.builds == 2


def test_explicit_coordinates_are_evaluated_not_interpolated() -> None:
    coords = torch.tensor([[0.5, 0.25], [3.0, 7.0]])
    encoding = SinCos2D(embed_dim=8)
    table = encoding.position_embedding(Positions((1, 2), coords=coords))
    assert torch.allclose(table, sincos_2d_embedding(coords, 8))


def test_width_not_divisible_by_four_is_refused() -> None:
    with pytest.raises(ValueError, match='divisible by 4'):
        SinCos2D(embed_dim=30)


def test_interpolate_equals_extend_on_the_training_grid() -> None:
    extend = SinCos2D(embed_dim=16, grid_size=(3, 5))
    interpolate = SinCos2D(embed_dim=16, grid_size=(3, 5), resize='interpolate')
    pos = Positions((3, 5), num_prefix_tokens=1)
    assert torch.equal(extend.position_embedding(pos), interpolate.position_embedding(pos))
    other = Positions((6, 10), num_prefix_tokens=1)
    assert not torch.allclose(extend.position_embedding(other), interpolate.position_embedding(other))


def test_interpolate_resizes_the_training_table_bilinearly_by_hand() -> None:
    # 2 -> 4 cells, half-pixel centres: output i samples the source at (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75,
    # 1.25, clamped to 0, 0.25, 0.75, 1; so output (row 1, col 2) = bilinear of the four training cells.
    encoding = SinCos2D(embed_dim=8, grid_size=(2, 2), resize='interpolate')
    table = encoding.position_embedding(Positions((4, 4))).reshape(4, 4, 8)
    cell = {(r, c): sincos_2d_embedding(torch.tensor([[float(r), float(c)]]), 8)[0] for r in (0, 1) for c in (0, 1)}
    expected = (0.75 * (0.25 * cell[0, 0] + 0.75 * cell[0, 1]) + 0.25 * (0.25 * cell[1, 0] + 0.75 * cell[1, 1]))
    assert torch.allclose(table[1, 2], expected, atol=1e-6)
    assert torch.allclose(table[0, 0], cell[0, 0]) and torch.allclose(table[3, 3], cell[1, 1])


def test_interpolate_resizes_to_each_padded_image_and_zeroes_the_padding() -> None:
    encoding = SinCos2D(embed_dim=8, grid_size=(2, 2), resize='interpolate')
    mask = torch.zeros(2, 4, 4, dtype=torch.bool)
    mask[0] = True
    mask[1, :2, :3] = True
    table = encoding.position_embedding(Positions((4, 4), valid_mask=mask)).reshape(2, 4, 4, 8)
    assert torch.allclose(table[0], encoding.grid_table((4, 4), torch.device('cpu')).reshape(4, 4, 8))
    assert torch.allclose(table[1, :2, :3], encoding.grid_table((2, 3), torch.device('cpu')).reshape(2, 3, 8))
    assert not table[1][~mask[1]].any()


def test_interpolate_without_a_training_grid_says_how_to_give_one() -> None:
    encoding = SinCos2D(embed_dim=8, resize='interpolate')
    with pytest.raises(ValueError, match='built without grid_size'):
        encoding.position_embedding(Positions((4, 4)))
    with pytest.raises(ValueError, match="'interpolate'"):
        encoding.resize = 'interpolated'
