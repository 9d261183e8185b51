"""Grid helpers and Positions."""
from __future__ import annotations

import pytest
import torch

from vispe.geometry import CameraGeometry, Positions, SceneGeometry, feature_grid_size, grid_coords


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
    pos = Positions((3, 4), num_prefix_tokens=1)
    calls = []
    for _ in range(3):
        pos.memo('table', lambda: calls.append(1) or torch.zeros(1))
    assert len(calls) == 1
    assert pos.num_patches == 12 and pos.num_tokens == 13
    assert pos.patch_coords() is pos.patch_coords()


def test_positions_check_explicit_coords() -> None:
    with pytest.raises(ValueError, match='has 10 rows but the sequence has 12 positioned tokens'):
        Positions((3, 4), num_prefix_tokens=1, coords=torch.zeros(10, 2))
    assert not Positions((1, 2), coords=torch.zeros(2, 2)).has_default_coords


def test_positions_describe_tokens_of_any_dimension() -> None:
    points = Positions(coords=torch.randn(2, 50, 3))
    assert points.num_tokens == 50 and points.coord_dim == 3 and points.grid_size is None
    queries = Positions(num_positions=7)
    assert queries.num_tokens == 7 and queries.coord_dim is None
    views = Positions((2, 3), num_views=4)
    assert views.num_tokens == 24
    assert views.view_ids().tolist() == [v for v in range(4) for _ in range(6)]
    with pytest.raises(ValueError, match='needs a grid_size, coords or num_positions'):
        Positions()


@pytest.mark.parametrize('kwargs, message', [
    (dict(coords=torch.zeros(2, 3, 4, 2)), r'coords must be \(N, D\) or \(B, N, D\); got a tensor of rank 4'),
    (dict(coords=torch.zeros(5)), 'got a tensor of rank 1'),
    (dict(grid_size=(2, 2), scene=SceneGeometry(boxes=torch.zeros(1, 4, 6))), r'boxes must be \(B, 4, 7\)'),
    (dict(grid_size=(2, 2), valid_mask=torch.ones(1, 2, 3, dtype=torch.bool)), r'valid_mask must be a bool tensor'),
    (dict(grid_size=(2, 2), valid_mask=torch.ones(1, 2, 2)), 'got torch.float32'),
    (dict(grid_size=(2, 2), num_views=0), 'num_views must be at least 1'),
])
def test_positions_refuse_wrong_shapes_with_the_fix(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        Positions(**kwargs)


def test_positions_refuse_cameras_of_another_view_count() -> None:
    class TwoCameras:
        num_views = 2
    with pytest.raises(ValueError, match='3 views but its cameras have 2'):
        Positions((2, 2), num_views=3, camera=CameraGeometry(TwoCameras()))


def test_multi_view_and_point_positions_are_refused_by_grid_encodings() -> None:
    with pytest.raises(ValueError, match='works on the 2D grid of one image; these positions describe 2 views'):
        Positions((2, 2), num_views=2).require_grid('LookHere')
    with pytest.raises(ValueError, match='A 2D encoding reads .row, col. coordinates; these positions have D = 3'):
        Positions(coords=torch.zeros(4, 3)).patch_coords()


def test_positions_take_the_grid_positionally_and_the_rest_by_keyword() -> None:
    with pytest.raises(TypeError, match=r'Positions takes only the grid size positionally; pass the rest by keyword: '
                                        r'Positions\(\(4, 4\), num_prefix_tokens=1, patch_size=\(16, 16\)\)'):
        Positions((4, 4), 1, (16, 16))
    with pytest.raises(TypeError, match=r'Positions.camera must be a CameraGeometry .*; got Tensor'):
        Positions((4, 4), camera=torch.zeros(1, 3, 3))
    with pytest.raises(ValueError, match='CameraGeometry needs the cameras'):
        CameraGeometry(None, depth=torch.zeros(1, 1, 4, 4))
    pos = Positions((4, 4), num_prefix_tokens=1, scene=SceneGeometry(bounds=torch.zeros(1, 2, 3)))
    assert pos.geometry() == ('grid', 'bounds') and pos.has('bounds') and not pos.has('cameras')
    with pytest.raises(ValueError, match=r"KPE needs cameras, crop_boxes in its positions, which carry grid, bounds\. "
                                         r'Give cameras: the cameras of the views'):
        pos.require('grid', 'cameras', 'crop_boxes', user='KPE')


def test_updated_positions_carry_the_next_layer_state_with_a_fresh_memo() -> None:
    boxes = torch.cat([torch.zeros(1, 3, 3), torch.ones(1, 3, 3), torch.zeros(1, 3, 1)], dim=-1)  # unit boxes
    pos = Positions(coords=torch.zeros(1, 3, 3), scene=SceneGeometry(boxes=boxes))
    pos.memo('table', lambda: 1)
    refined = pos.updated(scene=SceneGeometry(boxes=boxes + 1))
    assert refined.scene.boxes[0, 0, 0] == 1 and pos.scene.boxes[0, 0, 0] == 0
    assert refined.memo('table', lambda: 2) == 2 and pos.memo('table', lambda: 3) == 1
    assert refined.coords is pos.coords
