"""SinCos2D equals MAE's closed form on any grid; golden values by hand."""
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
    table = encoding.table(Positions(grid, 1))
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
    out = encoding.embed(tokens, Positions((3, 4), 1))
    assert torch.equal(out[:, 0], torch.zeros(2, 16))
    assert torch.equal(out[0, 1:], encoding.table(Positions((3, 4), 1)))
    encoding.embed(tokens, Positions((3, 4), 1))
    encoding.embed(torch.zeros(1, 1 + 20, 16), Positions((4, 5), 1))
    assert encoding._cache.builds == 2


def test_explicit_coordinates_are_evaluated_not_interpolated() -> None:
    coords = torch.tensor([[0.5, 0.25], [3.0, 7.0]])
    encoding = SinCos2D(embed_dim=8)
    table = encoding.table(Positions((1, 2), 0, coords=coords))
    assert torch.allclose(table, sincos_2d_embedding(coords, 8))


def test_width_not_divisible_by_four_is_refused() -> None:
    with pytest.raises(ValueError, match='divisible by 4'):
        SinCos2D(embed_dim=30)
