"""CameraRays: the points it lifts lie on each token's camera ray and project back to the token's pixel at their
depth bins; grid cells use their centres, explicit tokens their pixels; the embedding is added to the tokens."""
from __future__ import annotations

import pytest
import torch

from vispe.encodings import CameraRays
from vispe.encodings.camera import inverse_sigmoid
from vispe.geometry import CameraGeometry, Cameras, Positions, depth_bins

RANGE = (-10.0, -10.0, -10.0, 10.0, 10.0, 10.0)


def cameras(batch: int = 2, views: int = 2) -> Cameras:
    generator = torch.Generator().manual_seed(0)
    q, r = torch.linalg.qr(torch.randn(batch * views, 3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    q[torch.linalg.det(q) < 0, :, 0] *= -1
    extrinsics = torch.eye(4, dtype=torch.float64).repeat(batch * views, 1, 1)
    extrinsics[:, :3, :3], extrinsics[:, :3, 3] = q, torch.randn(batch * views, 3, generator=generator)
    intrinsics = torch.tensor([[40.0, 0, 15.5], [0, 42.0, 11.5], [0, 0, 1]]).expand(batch, views, 3, 3)
    return Cameras(intrinsics, extrinsics.view(batch, views, 4, 4).float(), (24, 32))


def unnormalised_points(encoding: CameraRays, pos: Positions) -> torch.Tensor:
    """(B, N, D, 3) scene points back from the features (sigmoid, then the range)."""
    features = encoding.ray_features(pos).unflatten(-1, (encoding.depth_num, 3))
    low, high = torch.tensor(RANGE[:3]), torch.tensor(RANGE[3:])
    return torch.sigmoid(features) * (high - low) + low


@pytest.mark.parametrize('layout', ['grid', 'rays'])
def test_lifted_points_project_back_to_their_pixels_and_depths(layout: str) -> None:
    encoding = CameraRays(embed_dim=16, depth_num=6, depth_start=1.0, position_range=RANGE)
    rig = cameras()
    if layout == 'grid':
        pos = Positions(grid_size=(3, 4), num_views=2, camera=CameraGeometry(rig))
        rows, cols = torch.meshgrid(torch.arange(3) * 8 + 3.5, torch.arange(4) * 8 + 3.5, indexing='ij')
        pixels = torch.stack([cols, rows], -1).reshape(1, 1, 12, 2).expand(2, 2, 12, 2)
    else:
        coords = torch.tensor([[[0.0, 0.0], [23.0, 31.0], [5.0, 17.0], [12.0, 3.0]]]).expand(2, 4, 2)
        pos = Positions(coords=coords, num_views=2, camera=CameraGeometry(rig))
        pixels = coords.flip(-1).reshape(2, 2, 2, 2)
    points = unnormalised_points(encoding, pos).unflatten(1, (2, -1))            # (B, V, T, D, 3)
    homogeneous = torch.cat([points, torch.ones_like(points[..., :1])], -1)
    in_camera = torch.einsum('bvij,bvtdj->bvtdi', rig.extrinsics, homogeneous)[..., :3]
    projected = torch.einsum('bvij,bvtdj->bvtdi', rig.intrinsics, in_camera)
    depths = depth_bins(6, 1.0, RANGE[3])
    inside = (points.abs() < 9.9).all(-1)                                      # clamped outside the range
    assert inside.float().mean() > 0.5
    assert torch.allclose(in_camera[..., 2][inside], depths.expand_as(in_camera[..., 2])[inside], atol=1e-3)
    uv = projected[..., :2] / projected[..., 2:]
    assert torch.allclose(uv[inside], pixels[:, :, :, None].expand_as(uv)[inside], atol=1e-2)


def test_embedding_is_added_to_the_tokens_after_the_prefix() -> None:
    torch.manual_seed(0)
    encoding = CameraRays(embed_dim=8, depth_num=4, position_range=RANGE)
    pos = Positions(grid_size=(3, 4), num_views=2, num_prefix_tokens=1, camera=CameraGeometry(cameras()))
    x = torch.randn(2, 25, 8)
    out = encoding.embed(x, pos)
    assert torch.equal(out[:, 0], x[:, 0])
    expected = encoding.mlp(inverse_sigmoid(torch.sigmoid(encoding.ray_features(pos))))
    assert torch.allclose(out[:, 1:] - x[:, 1:], expected, atol=1e-5)


def test_bad_positions_name_the_fix() -> None:
    encoding = CameraRays(embed_dim=8, position_range=RANGE)
    with pytest.raises(ValueError, match='needs cameras in its positions'):
        encoding.embed(torch.zeros(1, 12, 8), Positions(grid_size=(3, 4)))
    with pytest.raises(ValueError, match='equal size'):
        encoding.embed(torch.zeros(2, 5, 8), Positions(coords=torch.zeros(2, 5, 2), num_views=2, camera=CameraGeometry(cameras())))
    with pytest.raises(ValueError, match='max > min'):
        CameraRays(embed_dim=8, position_range=(0, 0, 0, -1, 1, 1))
