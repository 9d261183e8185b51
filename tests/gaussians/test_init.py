"""Gaussians initialised from coloured points as 3DGS does: scales from the three nearest neighbours, SH DC from the
colour, identity rotations, opacity 0.1; and the real RGB-D pair of scikit-image back-projected."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vispe.datasets.stereo_motorcycle import motorcycle_rgbd, rgbd_points
from vispe.gaussians.init import (SH_C0, fit_to_neighbours, gaussians_from_points, rgb_to_sh, rotation_to_quaternion,
                                  sh_to_rgb)


def test_golden_values_on_a_line_of_points() -> None:
    xyz = np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [4, 0, 0]])
    rgb = np.array([[0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.25, 0.75, 1]])
    cloud = gaussians_from_points(xyz, rgb)
    # point 0: neighbours at 1, 2, 3 -> mean squared distance 14/3; point 2: at 1, 1, 2 -> 2
    assert cloud.scale[0] == pytest.approx([0.5 * math.log(14 / 3)] * 3, abs=1e-6)
    assert cloud.scale[2] == pytest.approx([0.5 * math.log(2)] * 3, abs=1e-6)
    assert cloud.f_dc[1] == pytest.approx([0.5 / SH_C0, -0.5 / SH_C0, -0.5 / SH_C0], abs=1e-5)
    assert np.allclose(sh_to_rgb(cloud.f_dc), rgb, atol=1e-6) and np.allclose(rgb_to_sh(rgb), cloud.f_dc, atol=1e-5)
    assert cloud.opacity == pytest.approx(math.log(0.1 / 0.9), abs=1e-6)
    assert (cloud.rotation == [1, 0, 0, 0]).all() and cloud.sh_degree == 3 and not cloud.f_rest.any()
    # duplicates: the mean squared distance is clamped at 1e-7, never log(0)
    assert np.isfinite(gaussians_from_points(np.zeros((5, 3)), np.zeros((5, 3))).scale).all()


def test_bad_points_are_named() -> None:
    with pytest.raises(ValueError, match='at least 4 points'):
        gaussians_from_points(np.zeros((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match='divide 8-bit colours by 255'):
        gaussians_from_points(np.random.rand(10, 3), np.full((10, 3), 200.0))
    with pytest.raises(ValueError, match='must both be'):
        gaussians_from_points(np.random.rand(10, 3), np.random.rand(9, 3))


def test_the_real_rgbd_pair_back_projects_onto_its_pixels() -> None:
    image, depth, intrinsics = motorcycle_rgbd()
    xyz, rgb = rgbd_points(image, depth, intrinsics)
    assert len(xyz) == (depth > 0).sum() and 300_000 < len(xyz) < 400_000
    pixels = xyz @ intrinsics.T.astype(np.float64)
    rows, cols = np.nonzero(depth > 0)
    assert np.allclose(pixels[:, 0] / pixels[:, 2], cols, atol=1e-3)
    assert np.allclose(pixels[:, 1] / pixels[:, 2], rows, atol=1e-3)
    assert np.allclose(rgb[100], image[rows[100], cols[100]] / 255.0, atol=1e-7)


def test_quaternions_of_rotations_and_the_neighbour_fit_on_a_coloured_plane() -> None:
    from scipy.spatial.transform import Rotation
    rotations = Rotation.random(50, random_state=0)
    expected = rotations.as_quat(scalar_first=True)
    assert np.allclose(rotation_to_quaternion(rotations.as_matrix()), expected * np.sign(expected[:, :1]), atol=1e-12)
    # a tilted plane of points (normal n), red growing along +x: every Gaussian is flat along n, its colour slope
    # shows in the degree-1 SH coefficient of x (Y ∝ −x), and the opacities vary with the spacing
    rng = np.random.default_rng(0)
    uv = rng.random((400, 2)) * [4.0, 2.0]
    tilt = Rotation.from_euler('x', 30, degrees=True).as_matrix()
    xyz = np.c_[uv, np.zeros(400)] @ tilt.T
    rgb = np.c_[0.2 + 0.15 * uv[:, 0], np.full(400, 0.5), np.full(400, 0.5)]
    fitted = fit_to_neighbours(gaussians_from_points(xyz, rgb, sh_degree=1), rgb)
    normal = tilt[:, 2]
    axes = Rotation.from_quat(fitted.rotation, scalar_first=True).as_matrix()          # columns: the principal axes
    flattest = axes[np.arange(400), :, fitted.scale.argmin(1)]
    assert np.median(np.abs(flattest @ normal)) > 0.99
    assert np.median(fitted.f_rest[:, 0, 2]) < -0.01 and np.abs(np.median(fitted.f_rest[:, 1, 2])) < 1e-3
    assert fitted.opacity.std() > 0.05 and np.isfinite(fitted.as_rows()).all()
