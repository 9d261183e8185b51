"""PETR frustum points: depth bins, pixel conventions, re-projection through lidar2img, per-sample rigs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vispe.geometry import depth_bins, depth_map_points, frustum_pixels, frustum_points, normalize_points

from .rigs import IMAGE_SIZE, cameras

FEAT = (20, 50)


def test_depth_bins_match_petr_values() -> None:
    lid = depth_bins(64, 1.0, 61.2, 'LID')
    assert lid.dtype == torch.float32 and lid.shape == (64,)
    assert torch.allclose(lid[:3], torch.tensor([1.0, 1.0289, 1.0868]), atol=1e-4)
    assert abs(lid[-1].item() - 59.3477) < 1e-3
    ud = depth_bins(64, 1.0, 61.2, 'UD')
    assert ud[0].item() == 1.0 and abs(ud[-1].item() - 60.2594) < 1e-3
    assert torch.allclose(ud.diff(), torch.full((63,), 60.2 / 64))
    with pytest.raises(ValueError, match="'LID' or 'UD'"):
        depth_bins(4, 1.0, 2.0, 'SID')


def test_frustum_pixels_corner_and_center() -> None:
    corner = frustum_pixels(FEAT, IMAGE_SIZE)
    assert corner.shape == (20, 50, 2)
    assert corner[0, 0].tolist() == [0.0, 0.0] and corner[1, 2].tolist() == [32.0, 16.0]  # stride 16
    center = frustum_pixels(FEAT, IMAGE_SIZE, pixel='center')
    assert center[0, 0].tolist() == [7.5, 7.5] and center[-1, -1].tolist() == [791.5, 311.5]


def test_frustum_points_reproject_to_their_pixel_and_depth() -> None:
    cams = cameras(1, 2)  # two samples with different rigs
    depths = depth_bins(64, 1.0, 61.2)
    points = frustum_points(cams, FEAT, depths)
    assert points.shape == (2, 6, 20, 50, 64, 3) and points.dtype == torch.float32
    hom = torch.einsum('bvij,bvhwdj->bvhwdi', cams.lidar2img.double(),
                       torch.cat([points.double(), torch.ones_like(points[..., :1]).double()], -1))
    depth = hom[..., 2]
    pixels = hom[..., :2] / depth[..., None]
    expected = frustum_pixels(FEAT, IMAGE_SIZE).double()[:, :, None].expand(20, 50, 64, 2)
    assert (pixels - expected).abs().max() <= 1e-2
    assert (depth - depths.double()).abs().max() <= 1e-3
    # Same through Cameras.project.
    uv, z = cams.project(points.flatten(2, 4))
    assert (uv - expected.reshape(-1, 2).float()).abs().max() <= 1e-2
    assert (z.view(2, 6, 20, 50, 64) - depths).abs().max() <= 1e-3


def test_frustum_points_equal_petr_formula() -> None:
    cams = cameras(3, 4)
    depths = depth_bins(8, 1.0, 61.2, 'UD')
    points = frustum_points(cams, (4, 10), depths)
    # PETR: per sample and view, inv(lidar2img) @ [u·max(d, eps), v·max(d, eps), d, 1] with u = j·pad_w/w.
    lidar2img = cams.lidar2img.double().numpy()
    u = np.arange(10) * 800 / 10
    v = np.arange(4) * 320 / 4
    d = depths.double().numpy()
    for b in range(2):
        for view in range(6):
            img2lidar = np.linalg.inv(lidar2img[b, view])
            for i in (0, 3):
                for j in (0, 9):
                    hom = np.stack([u[j] * d, v[i] * d, d, np.ones_like(d)])
                    np.testing.assert_allclose(points[b, view, i, j].numpy(), (img2lidar @ hom)[:3].T, atol=2e-4)


def test_each_sample_uses_its_own_rig() -> None:
    cams = cameras(5, 6, 7)
    depths = depth_bins(4, 1.0, 40.0)
    points = frustum_points(cams, (5, 8), depths)
    perm = [2, 0, 1]
    assert torch.equal(frustum_points(cams.index_samples(perm), (5, 8), depths), points[perm])
    single = frustum_points(cameras(6), (5, 8), depths)
    assert torch.allclose(single[0], points[1], atol=1e-5)
    assert not torch.allclose(points[0], points[1], atol=1e-2)


def test_depth_map_points_match_frustum_bins() -> None:
    cams = cameras(1, 2)
    depths = depth_bins(16, 1.0, 61.2)
    frustum = frustum_points(cams, FEAT, depths, pixel='center')
    index = torch.randint(0, 16, (2, 6, *FEAT))
    points = depth_map_points(cams, depths[index], pixel='center')
    assert points.shape == (2, 6, *FEAT, 3)
    expected = frustum.gather(4, index[..., None, None].expand(-1, -1, -1, -1, 1, 3)).squeeze(4)
    assert torch.allclose(points, expected, atol=1e-5)
    with pytest.raises(ValueError, match=r'depth must have shape \(B, V, h, w\) = \(2, 6, h, w\)'):
        depth_map_points(cams, torch.ones(6, *FEAT))


def test_normalize_points() -> None:
    pr = (-61.2, -61.2, -10.0, 61.2, 61.2, 10.0)
    points = torch.tensor([[-61.2, 0.0, 10.0], [61.2, 30.6, -10.0]])
    assert torch.allclose(normalize_points(points, pr), torch.tensor([[0.0, 0.5, 1.0], [1.0, 0.75, 0.0]]))
    with pytest.raises(ValueError, match='max > min'):
        normalize_points(points, (0, 0, 0, 1, 1, 0))
    with pytest.raises(ValueError, match=r'points must have shape \(\.\.\., 3\)'):
        normalize_points(torch.zeros(4, 2), pr)
