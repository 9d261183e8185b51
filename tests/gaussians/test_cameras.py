"""Cameras to render Gaussians from: 3DGS's cameras.json read and written (its implicit principal point, errors that
name the entry), resizing and moving a camera, the held-out cameras of the stereo pair (Middlebury's disparity
relation), and the 3DGS SSIM against an independent filter."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from vispe.gaussians.cameras import PinholeCamera, read_cameras_json, write_cameras_json
from vispe.gaussians.image_quality import psnr, ssim
from vispe.gaussians.sources import STEREO_MOTORCYCLE, held_out_cameras


def project(camera: PinholeCamera, point) -> np.ndarray:
    pixel = camera.intrinsics @ (camera.world_to_camera[:3, :3] @ np.asarray(point) + camera.world_to_camera[:3, 3])
    return pixel[:2] / pixel[2]


def three_dgs_entry(**changes) -> dict:
    angle = math.radians(30)
    rotation = [[math.cos(angle), 0, math.sin(angle)], [0, 1, 0], [-math.sin(angle), 0, math.cos(angle)]]
    return dict(id=0, img_name='00001', width=64, height=48, position=[1.0, 2.0, 3.0], rotation=rotation,
                fx=50.0, fy=51.0) | changes


def test_a_3dgs_cameras_json_reads_with_the_centre_as_principal_point(tmp_path: Path) -> None:
    path = tmp_path / 'cameras.json'
    path.write_text(json.dumps([three_dgs_entry()]))
    camera, = read_cameras_json(path)
    np.testing.assert_allclose(camera.centre, [1, 2, 3])
    np.testing.assert_allclose(camera.intrinsics, [[50, 0, 31.5], [0, 51, 23.5], [0, 0, 1]])
    # the camera's optical axis is the third column of 3DGS's camera-to-world rotation
    axis = np.array(three_dgs_entry()['rotation'])[:, 2]
    np.testing.assert_allclose(project(camera, camera.centre + 5 * axis), [31.5, 23.5], atol=1e-9)
    again, = read_cameras_json(write_cameras_json(tmp_path / 'again.json', [camera]))
    np.testing.assert_allclose(again.world_to_camera, camera.world_to_camera, atol=1e-12)
    assert again.name == '00001' and (again.width, again.height) == (64, 48)


@pytest.mark.parametrize('entry, message', [
    (dict(three_dgs_entry(), fx=None), 'fx is None'),
    ({key: value for key, value in three_dgs_entry().items() if key != 'rotation'}, 'lacks rotation'),
    (three_dgs_entry(rotation=[[2, 0, 0], [0, 1, 0], [0, 0, 1]]), 'not a rotation matrix'),
    (three_dgs_entry(width=0), 'positive whole numbers'),
    (three_dgs_entry(fy=-1.0), 'must be positive'),
    (three_dgs_entry(position=[1, 2]), 'position must be 3 numbers'),
])
def test_a_bad_camera_is_an_error_naming_the_file_and_entry(tmp_path: Path, entry: dict, message: str) -> None:
    path = tmp_path / 'cameras.json'
    path.write_text(json.dumps([three_dgs_entry(), entry]))
    with pytest.raises(ValueError, match=f'cameras.json: camera 1.*{message}'):
        read_cameras_json(path)
    path.write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match='non-empty list of cameras'):
        read_cameras_json(path)


def test_a_scaled_camera_sees_a_point_at_the_scaled_pixel() -> None:
    camera = PinholeCamera('c', np.eye(4), np.array([[40.0, 0, 30.2], [0, 41, 22.7], [0, 0, 1]]), 61, 45)
    point = [0.3, -0.2, 2.0]
    half = camera.scaled(0.5)
    assert (half.width, half.height) == (30, 22)               # round(30.5) = 30 (banker's), round(22.5) = 22
    sx, sy = 30 / 61, 22 / 45
    u, v = project(camera, point)
    np.testing.assert_allclose(project(half, point), [sx * (u + 0.5) - 0.5, sy * (v + 0.5) - 0.5])


def test_a_moved_camera_keeps_its_intrinsics_and_turns_about_its_own_axis() -> None:
    camera = PinholeCamera('c', np.eye(4), np.array([[40.0, 0, 30], [0, 40, 20], [0, 0, 1]]), 61, 41)
    turned = camera.moved('turned', yaw_degrees=90.0)
    np.testing.assert_allclose(turned.centre, [0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(project(turned, [1.0, 0.0, 0.0]), [30, 20], atol=1e-9)   # turned right: +x ahead
    shifted = camera.moved('shifted', offset=(0.5, 0.0, 0.0))
    np.testing.assert_allclose(project(shifted, [0.5, 0.0, 4.0]), [30, 20], atol=1e-9)


def test_the_stereo_pairs_right_camera_sees_the_disparity_the_depth_came_from() -> None:
    pytest.importorskip('skimage')
    from vispe.datasets.stereo_motorcycle import MOTORCYCLE

    right, up, down = held_out_cameras(STEREO_MOTORCYCLE)
    assert [camera.name for camera in (right, up, down)] == ['right', 'up', 'down']
    left = PinholeCamera('left', np.eye(4), right.intrinsics.copy(), right.width, right.height)
    left.intrinsics[0, 2] = MOTORCYCLE['cx']
    point = np.array([0.2, -0.1, 3.0])
    disparity = project(left, point)[0] - project(right, point)[0]
    # Middlebury: Z = f·B / (d + doffs)
    assert MOTORCYCLE['focal'] * MOTORCYCLE['baseline_mm'] / 1000 / (disparity + MOTORCYCLE['doffs']) == \
        pytest.approx(3.0)
    np.testing.assert_allclose(up.centre, [0, -MOTORCYCLE['baseline_mm'] / 1000, 0])
    with pytest.raises(ValueError, match='a point file names no camera'):
        held_out_cameras('cloud.ply')


def reference_ssim(first: np.ndarray, second: np.ndarray) -> float:
    """SSIM with scipy's Gaussian filter (σ 1.5, radius 5, zeros outside), per channel."""
    blur = lambda values: gaussian_filter(values, sigma=(1.5, 1.5, 0), mode='constant', truncate=5 / 1.5)  # noqa
    mu1, mu2 = blur(first), blur(second)
    var1, var2, cov = blur(first ** 2) - mu1 ** 2, blur(second ** 2) - mu2 ** 2, blur(first * second) - mu1 * mu2
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    return float((((2 * mu1 * mu2 + c1) * (2 * cov + c2)) / ((mu1 ** 2 + mu2 ** 2 + c1) * (var1 + var2 + c2))).mean())


def test_psnr_and_ssim_as_3dgs_reports_them() -> None:
    generator = torch.Generator().manual_seed(0)
    image = torch.rand(20, 24, 3, generator=generator, dtype=torch.float64)
    noisy = (image + 0.1 * torch.randn(20, 24, 3, generator=generator, dtype=torch.float64)).clamp(0, 1)
    assert psnr(image, image) == math.inf and ssim(image, image) == pytest.approx(1.0)
    assert psnr(image, (image + 0.1).clamp(0, 1)) == pytest.approx(
        -10 * math.log10(float(((image - (image + 0.1).clamp(0, 1)) ** 2).mean())))
    assert ssim(noisy, image) == pytest.approx(reference_ssim(noisy.numpy(), image.numpy()), abs=1e-10)
    assert psnr(torch.full((4, 4, 3), 1.5), torch.ones(4, 4, 3)) == math.inf        # clamped to [0, 1] first
