"""Grid helpers and Positions."""
from __future__ import annotations

import pytest
import torch

from vispe.geometry import Positions, feature_grid_size, grid_coords


def test_grid_coords_are_row_major_row_col() -> None:
    coords = grid_coords((2, 3))
    assert coords.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    centred = grid_coords((2, 4), offset=0.5, normalize=True)
    assert torch.allclose(centred[-1], torch.tensor([0.75, 0.875]))


def test_feature_grid_size() -> None:
    assert feature_grid_size((224, 160), (16, 16)) == (14, 10)
    assert feature_grid_size((230, 250), (16, 16), dynamic_img_pad=True) == (15, 16)
    with pytest.raises(ValueError, match=r'width 250 is not a multiple of the patch size 16 \(nearest: 240 or 256\)'):
        feature_grid_size((224, 250), (16, 16))
    with pytest.raises(ValueError, match=r'height 10 .*\(nearest: 16\)'):
        feature_grid_size((10, 16), (16, 16))


def test_positions_memo_builds_once_per_forward() -> None:
    pos = Positions((3, 4), 1)
    calls = []
    for _ in range(3):
        pos.memo('table', lambda: calls.append(1) or torch.zeros(1))
    assert len(calls) == 1
    assert pos.num_patches == 12 and pos.num_tokens == 13
    assert pos.patch_coords() is pos.patch_coords()


def test_positions_check_explicit_coords() -> None:
    with pytest.raises(ValueError, match='N = 12 patches'):
        Positions((3, 4), 1, coords=torch.zeros(10, 2))
    assert not Positions((1, 2), 0, coords=torch.zeros(2, 2)).has_default_coords
