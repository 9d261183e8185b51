"""Measured depth is checked where 3DPPE reads it: negative, NaN and infinite depth are refused (0 stays "no depth"),
depth maps must have the cameras' samples, views and image size, and a grid read at a stride (patch_size) that does
not cover the images is refused with the grid, the patch size, the image size and the fix."""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.encodings.ppe3d import sparse_depth_targets
from vispe.geometry import CameraGeometry, Positions

from ..geometry.rigs import cameras as rig_cameras

RANGE = (-80.0, -80.0, -20.0, 80.0, 80.0, 20.0)
GRID = (4, 10)  # the rigs' 320x800 images at stride 80


def build(depth_source: str = 'gt') -> vispe.encodings.PPE3D:
    torch.manual_seed(0)
    return vispe.build_encoding(dict(type='PPE3D', mid_channels=16, with_dcn=False, position_range=RANGE,
                                     depth_source=depth_source), embed_dim=32, in_channels=24).eval()


def lidar_depth(seed: int = 0) -> torch.Tensor:
    """(1, 6, 320, 800) sparse depth: 0 except about 1 % of the pixels, 2-60 m."""
    generator = torch.Generator().manual_seed(seed)
    depth = 2 + 58 * torch.rand(1, 6, 320, 800, generator=generator)
    return depth * (torch.rand(depth.shape, generator=generator) < 0.01)


def positions(depth: torch.Tensor | None, grid=GRID, patch_size=(80, 80)) -> Positions:
    return Positions(grid, patch_size=patch_size, num_views=6, camera=CameraGeometry(rig_cameras(0), depth=depth))


@pytest.mark.parametrize('bad, what', [(-1.5, 'a negative depth -1.5'), (-1e-3, 'a negative depth -0.001'),
                                       (math.inf, 'an infinite depth inf'), (math.nan, 'NaN')])
def test_depth_targets_refuse_negative_and_non_finite_depth(bad: float, what: str) -> None:
    depth = torch.zeros(1, 2, 8, 8)
    depth[0, 1, 3, 4] = bad
    with pytest.raises(ValueError, match=rf'depth has {what} \(first at index \(0, 1, 3, 4\)\); write 0 for pixels '
                                         r'without a depth'):
        sparse_depth_targets(depth, 4)


@pytest.mark.parametrize('use', ['cell_depth', 'losses'])
def test_ppe3d_refuses_negative_measured_depth(use: str) -> None:
    depth = lidar_depth()
    depth[0, 2, 100, 200] = -3.0
    encoding, pos = build(), positions(depth)
    predicted = torch.full((1, 6, *GRID), 10.0)
    with pytest.raises(ValueError, match=r'depth has a negative depth -3 \(first at index \(0, 2, 100, 200\)\)'):
        if use == 'cell_depth':
            encoding.cell_depth(pos, predicted)
        else:
            encoding.losses({'depth': predicted, 'depth_logits': torch.zeros(6, 16, *GRID)}, pos)


def test_zero_depth_stays_unknown() -> None:
    encoding, pos = build(), positions(torch.zeros(1, 6, 320, 800))
    predicted = torch.full((1, 6, *GRID), 10.0)
    assert torch.equal(encoding.cell_depth(pos, predicted), torch.full_like(predicted, RANGE[3]))
    assert build('hybrid').cell_depth(pos, predicted) is not None


@pytest.mark.parametrize('patch_size, covered', [((1, 1), '4x10'), ((16, 16), '64x160'), ((40, 40), '160x400'),
                                                 ((160, 160), '640x1600')])
def test_a_stride_that_does_not_cover_the_images_is_refused(patch_size, covered: str) -> None:
    encoding, pos = build(), positions(lidar_depth(), patch_size=patch_size)
    with pytest.raises(ValueError, match=rf'PPE3D \(its measured depth\) reads the images\' pixels per cell, but a '
                                         rf'4x10 grid at patch_size {re_tuple(patch_size)} covers {covered} pixels of '
                                         r'the 320x800 images \(cameras.image_size\).* Set Positions\(patch_size=\(s, '
                                         r's\)\) to the feature stride s .*about 80 x 80'):
        encoding.cell_depth(pos, torch.ones(1, 6, *GRID))


def re_tuple(pair: tuple[int, int]) -> str:
    return r'\(' + ', '.join(str(value) for value in pair) + r'\)'


def test_a_non_square_stride_is_refused() -> None:
    pos = positions(lidar_depth(), patch_size=(80, 40))
    with pytest.raises(ValueError, match=r'patch_size \(80, 40\) .* one s for both axes'):
        build().losses({'depth': torch.ones(1, 6, *GRID), 'depth_logits': torch.zeros(6, 16, *GRID)}, pos)


def test_a_grid_within_one_cell_of_the_image_is_accepted() -> None:
    """A backbone of stride s gives floor or ceil of H / s cells; both read the right pixels."""
    depth = lidar_depth()
    exact = build().measured_depth(positions(depth))
    ceil = build().measured_depth(positions(depth, grid=(4, 10), patch_size=(81, 81)))
    assert exact.shape == ceil.shape == (1, 6, *GRID)


@pytest.mark.parametrize('shape', [(1, 6, 160, 400), (1, 6, 320, 801), (1, 5, 320, 800), (2, 6, 320, 800)])
def test_depth_maps_of_another_shape_than_the_cameras_are_refused(shape) -> None:
    with pytest.raises(ValueError, match=rf'CameraGeometry.depth must be \(B, V, H, W\) = \(1, 6, 320, 800\).* got '
                                         rf'{re_tuple(shape)}\. Project the depth into the images'):
        CameraGeometry(rig_cameras(0), depth=torch.zeros(shape))
