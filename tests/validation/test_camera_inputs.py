"""Bad camera geometry is refused where it enters, with the value seen and the fix: image sizes that are not whole
positive pixels, depth bins outside (0, inf), frustum depths at or behind the camera, non-finite depth maps,
feature sizes below one cell, non-finite points and pixels; valid inputs still work."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vispe.encodings.ppe3d.depth_net import uniform_depth_bins
from vispe.geometry import Cameras, depth_bins, depth_map_points, frustum_pixels, frustum_points

K = torch.tensor([[30.0, 0.0, 16.0], [0.0, 30.0, 16.0], [0.0, 0.0, 1.0]])


def rig(batch: int = 1, views: int = 1, image_size=(32, 32)) -> Cameras:
    return Cameras(K.expand(batch, views, 3, 3), torch.eye(4).expand(batch, views, 4, 4), image_size)


@pytest.mark.parametrize('size, error, match', [
    ((32.7, 32), TypeError, r'image_size\[0\] \(H\) must be a whole number, got 32\.7 .*give the \(H, W\)'),
    ((32, 31.5), TypeError, r'image_size\[1\] \(W\) must be a whole number, got 31\.5'),
    ((True, 32), TypeError, r'must be a whole number, got True \(bool\)'),
    ((math.nan, 32), TypeError, r'must be a whole number, got nan'),
    ((math.inf, 32), TypeError, r'must be a whole number, got inf'),
    (('32', 32), TypeError, r"must be a whole number, got '32' \(str\)"),
    ((0, 32), ValueError, r'must be at least 1, got 0; give the \(H, W\)'),
    ((-32, 32), ValueError, r'must be at least 1, got -32'),
    ((32,), ValueError, r'must be \(H, W\), two positive whole numbers, got \(32,\)'),
    ((32, 32, 3), ValueError, r'must be \(H, W\)'),
    ('32x32', ValueError, r"must be \(H, W\), two positive whole numbers, got '32x32'"),
])
def test_cameras_refuse_image_sizes_that_are_not_whole_positive_pixels(size, error, match) -> None:
    with pytest.raises(error, match=match):
        rig(image_size=size)


@pytest.mark.parametrize('size', [(32.0, 32), (np.int64(32), 32), (torch.tensor(32), 32), torch.Size([32, 32]),
                                  [32, np.float32(32.0)]])
def test_cameras_take_integral_sizes_in_any_number_type(size) -> None:
    assert rig(image_size=size).image_size == (32, 32)


@pytest.mark.parametrize('shape, match', [
    ((32.7, 32), r'sample 0 img_shape\[0\] \(H\) must be a whole number, got 32\.7'),
    ((32, 32.5, 3), r'sample 0 img_shape\[1\] \(W\) must be a whole number, got 32\.5'),
    ([(32, 32), (32, -1)], r'sample 0 img_shape\[1\] \(W\) must be at least 1, got -1'),
])
def test_data_samples_refuse_image_shapes_that_are_not_whole_positive_pixels(shape, match) -> None:
    sample = {'intrinsics': K.expand(2, 3, 3).numpy(), 'lidar2cam': torch.eye(4).expand(2, 4, 4).numpy(),
              'img_shape': shape}
    with pytest.raises((TypeError, ValueError), match=match):
        Cameras.from_data_samples([sample])


@pytest.mark.parametrize('args, error, match', [
    ((16, 1.0, math.inf), ValueError, r'finite depths 0 < start < stop .*got start=1\.0, stop=inf; e\.g\. start=1'),
    ((16, math.inf, 60.0), ValueError, r'got start=inf, stop=60\.0'),
    ((16, math.nan, 60.0), ValueError, r'got start=nan'),
    ((16, 0.0, 60.0), ValueError, r'got start=0\.0, stop=60\.0'),
    ((16, -1.0, 60.0), ValueError, r'got start=-1\.0'),
    ((16, 60.0, 1.0), ValueError, r'got start=60\.0, stop=1\.0'),
    ((2.5, 1.0, 60.0), TypeError, r'num \(the bin count\) must be a whole number, got 2\.5'),
    ((True, 1.0, 60.0), TypeError, r'must be a whole number, got True'),
    ((0, 1.0, 60.0), ValueError, r'must be at least 1, got 0; give a whole number of at least 1'),
    ((16, '1', 60.0), TypeError, r"start and stop must be numbers \(metres\), got start='1'"),
])
def test_depth_bins_refuse_ranges_without_depths_in_front_of_the_camera(args, error, match) -> None:
    with pytest.raises(error, match=match):
        depth_bins(*args)


def test_depth_bins_take_an_integral_float_count_and_keep_their_values() -> None:
    assert torch.equal(depth_bins(4.0, 1.0, 61.2), depth_bins(4, 1.0, 61.2))


@pytest.mark.parametrize('args, match', [((1, 1.0, 60.0), 'needs num >= 2 bins, got num=1'),
                                         ((16, 0.0, 60.0), 'got start=0.0'), ((16, 1.0, math.inf), 'stop=inf')])
def test_uniform_depth_bins_refuse_the_same_ranges(args, match) -> None:
    with pytest.raises(ValueError, match=match):
        uniform_depth_bins(*args)


@pytest.mark.parametrize('depths, match', [
    ([1.0, math.nan], r'depths must be finite and positive \(in front of the camera\); got nan at index \[1\]; give '),
    ([1.0, math.inf], r'got inf at index \[1\]'),
    ([0.0, 1.0], r'got 0\.0 at index \[0\]'),
    ([-2.0], r'got -2\.0 at index \[0\]'),
])
def test_frustum_points_refuse_depths_at_or_behind_the_camera(depths, match) -> None:
    with pytest.raises(ValueError, match=match):
        frustum_points(rig(), (4, 4), torch.tensor(depths))


def test_frustum_points_refuse_no_depths() -> None:
    with pytest.raises(ValueError, match=r'shape \(D,\) with D >= 1, got \(0,\)'):
        frustum_points(rig(), (4, 4), torch.zeros(0))


@pytest.mark.parametrize('feat_size, image_size, match', [
    ((0, 4), (32, 32), r'feat_size\[0\] \(H\) must be at least 1, got 0; give the \(h, w\) cells'),
    ((4, -1), (32, 32), r'feat_size\[1\] \(W\) must be at least 1, got -1'),
    ((2.5, 4), (32, 32), r'feat_size\[0\] \(H\) must be a whole number, got 2\.5'),
    ((4, 4), (0, 32), r'image_size\[0\] \(H\) must be at least 1, got 0; give the \(H, W\) pixels'),
])
def test_frustum_pixels_refuse_sizes_below_one_cell(feat_size, image_size, match) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        frustum_pixels(feat_size, image_size)


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
def test_depth_map_points_refuse_non_finite_depth(bad: float) -> None:
    depth = torch.full((1, 1, 4, 4), 5.0)
    depth[0, 0, 2, 1] = bad
    with pytest.raises(ValueError, match=rf'depth must be finite \(no NaN or inf\); got {bad} at index \[0, 0, 2, 1\]; '
                                         r'write 0 for cells without a depth'):
        depth_map_points(rig(), depth)


def test_depth_map_points_of_a_models_prediction_skip_the_value_check() -> None:
    depth = torch.full((1, 1, 2, 2), math.inf)
    assert not torch.isfinite(depth_map_points(rig(), depth, check_values=False)).all()


def test_depth_map_points_lift_zero_and_negative_depth_as_given() -> None:
    """0 marks "unknown" in measured maps (callers mask those cells) and 3DPPE's predicted depth may be negative:
    both are lifted, to the camera centre and behind it."""
    depth = torch.tensor([0.0, -1.0, 2.0, 3.0]).view(1, 1, 2, 2)
    points = depth_map_points(rig(), depth)
    assert torch.isfinite(points).all()
    assert torch.allclose(points[0, 0, :, :, 2], depth[0, 0])


@pytest.mark.parametrize('method', ['project', 'unproject_pixels', 'unproject_depth'])
def test_projections_refuse_non_finite_inputs(method: str) -> None:
    cameras = rig()
    bad = torch.tensor([[[1.0, math.nan, 3.0]]])
    with pytest.raises(ValueError, match=r'must be finite \(no NaN or inf\); got nan at index \[0, (0, )?1\]; '
                                         r'drop or '):
        if method == 'project':
            cameras.project(bad)
        elif method == 'unproject_pixels':
            cameras.unproject(bad[..., :2], torch.ones(1, 1))
        else:
            cameras.unproject(torch.zeros(1, 2, 2), torch.tensor([[1.0, math.nan]]))


def test_projections_of_finite_inputs_round_trip() -> None:
    cameras = rig()
    points = torch.tensor([[[0.5, -0.25, 4.0], [1.0, 2.0, 9.0]]])
    pixels, depth = cameras.project(points)
    assert torch.allclose(cameras.unproject(pixels, depth)[:, 0], points, atol=1e-5)
