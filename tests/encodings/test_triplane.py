"""TriPlane (TC-GS): the contraction's properties, plane sampling golden values by hand, parity with the reference's
``Triplane.sample`` (tests/data/tcgs_triplane_parity.pt), the K-nearest context and the encoding in a model."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vispe.encodings import TriPlane, build_encoding
from vispe.encodings.triplane import contract, nearest_neighbors, sample_triplane, triplane_coords
from vispe.geometry import Positions, SceneGeometry

GOLDEN = torch.load(Path(__file__).parents[1] / 'data' / 'tcgs_triplane_parity.pt', weights_only=True)


def test_contract_is_identity_inside_the_unit_disc_and_bounded_by_two_outside() -> None:
    torch.manual_seed(0)
    inside = torch.randn(500, 2)
    inside = inside / inside.norm(dim=-1, keepdim=True) * torch.rand(500, 1)
    assert torch.equal(contract(inside), inside)
    outside = torch.randn(500, 2) * 100
    outside = outside[outside.norm(dim=-1) > 1]
    norms = contract(outside).norm(dim=-1)
    assert (norms > 1).all() and (norms < 2).all()
    # along a ray the contraction is (2 − 1/r)·direction: continuous at r = 1, 1.5 at r = 2, → 2 as r → ∞
    radii = torch.tensor([1.0, 1.0 + 1e-6, 2.0, 1e6])
    direction = torch.tensor([0.6, 0.8])
    out = contract(radii[:, None] * direction).norm(dim=-1)
    assert torch.allclose(out, torch.tensor([1.0, 1.0, 1.5, 2.0]), atol=1e-5)
    assert torch.allclose(contract(direction * 3), direction * (2 - 1 / 3))


def test_sample_triplane_golden_values_by_hand() -> None:
    # one channel, 2x2 cells; with align_corners=False the cell centres sit at ±0.5
    planes = torch.tensor([[1.0, 2.0], [3.0, 4.0]]).expand(3, 1, 2, 2).clone()
    planes[1] *= 10
    uv = torch.tensor([[[0.0, 0.0], [-0.5, -0.5], [0.5, -0.5]], [[0.0, 0.5], [1.0, 1.0], [-2.0, 0.0]]])
    features = sample_triplane(planes, uv)
    # centre: mean of the four; (-0.5, -0.5): top-left cell; (0.5, -0.5) (x = column, y = row): top-right cell;
    # (0, 0.5): between the bottom cells; (1, 1): a quarter of the bottom-right cell (zero padding); outside: 0
    expected = torch.tensor([[[2.5], [10.0], [2.0]], [[3.5], [10.0], [0.0]]])
    assert torch.allclose(features, expected)


def test_triplane_coords_golden_values_by_hand() -> None:
    # corners ±(2, 2, 2): every plane's r² = 8; the point (0.5, 1, 0): plane 0 reads (y, z) = (1, 0):
    # 6·(4·(1, 0)/√8 − 1) = (2.485, −6), contracted
    uv = triplane_coords(torch.tensor([0.5, 1.0, 0.0]), torch.full((3,), -2.0), torch.full((3,), 2.0))
    v = 6 * (4 * torch.tensor([1.0, 0.0]) / 8 ** 0.5 - 1)
    assert torch.allclose(uv[0], (2 - 1 / v.norm()) * v / v.norm() / 2)
    # a radius of 2 caps r at 1: plane 2 reads (x, y) = (0.5, 1): 6·(4·(0.5, 1) − 1) = (6, 18)
    capped = triplane_coords(torch.tensor([0.5, 1.0, 0.0]), torch.full((3,), -2.0), torch.full((3,), 2.0), radius=2.0)
    v = torch.tensor([6.0, 18.0])
    assert torch.allclose(capped[2], (2 - 1 / v.norm()) * v / v.norm() / 2)
    assert (uv.norm(dim=-1) < 1).all()


def test_parity_with_the_reference_sampling() -> None:
    xyz, low, high, planes = GOLDEN['xyz'], GOLDEN['low'], GOLDEN['high'], GOLDEN['planes']
    self_only = torch.arange(xyz.shape[0])[:, None].expand(-1, GOLDEN['knn'].shape[1])
    for radius in ('radius_large', 'radius_small'):
        for kind, index in (('knn', GOLDEN['knn']), ('self', self_only)):
            features = sample_triplane(planes, triplane_coords(xyz[index], low, high, GOLDEN[radius])).flatten(-3)
            torch.testing.assert_close(features, GOLDEN[f'features_{kind}_{radius}'], atol=1e-5, rtol=0)
    torch.testing.assert_close(contract(GOLDEN['contract_in']), GOLDEN['contract_out'], atol=1e-6, rtol=0)


def test_nearest_neighbors_match_the_reference_and_put_each_point_first() -> None:
    assert torch.equal(nearest_neighbors(GOLDEN['xyz'][None], 4, chunk=37)[0], GOLDEN['knn'])
    duplicates = torch.zeros(1, 5, 3)
    assert torch.equal(nearest_neighbors(duplicates, 2)[0, :, 0], torch.arange(5))
    with pytest.raises(ValueError, match='lower knn'):
        nearest_neighbors(duplicates, 6)


def point_positions(xyz: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> Positions:
    return Positions(coords=xyz, scene=SceneGeometry(bounds=torch.stack([low, high]).expand(xyz.shape[0], 2, 3)))


def test_encoding_features_equal_the_functional_with_knn_context() -> None:
    torch.manual_seed(0)
    encoding = build_encoding(dict(type='TriPlane', channels=6, resolution=16, knn=4, radius=40.0), embed_dim=32)
    with torch.no_grad():
        encoding.planes.copy_(GOLDEN['planes'])
    pos = point_positions(GOLDEN['xyz'][None], GOLDEN['low'], GOLDEN['high'])
    torch.testing.assert_close(encoding.features(pos)[0], GOLDEN['features_knn_radius_large'], atol=1e-5, rtol=0)
    x = torch.randn(1, 2 + 96, 32)
    out = encoding.embed(x, Positions(coords=pos.coords, num_prefix_tokens=2, scene=SceneGeometry(bounds=pos.scene.bounds)))
    assert torch.equal(out[:, :2], x[:, :2])
    torch.testing.assert_close(out[:, 2:], x[:, 2:] + encoding.proj(GOLDEN['features_knn_radius_large'])[None])


def test_encoding_trains_its_planes_and_refuses_missing_geometry() -> None:
    encoding = TriPlane(embed_dim=8, channels=4, resolution=8)
    assert encoding.planes.abs().max() <= 0.01
    xyz = torch.rand(2, 10, 3) * 2 - 1
    pos = point_positions(xyz, -torch.ones(3), torch.ones(3))
    encoding.embed(torch.zeros(2, 10, 8), pos).square().sum().backward()
    assert encoding.planes.grad.abs().sum() > 0
    # a room in [0, 4]³ has a corner at the origin: a clear error, and centered=True reads it around its centre,
    # exactly as the same room shifted to surround the origin
    room = point_positions(xyz * 2 + 2, torch.zeros(3), torch.full((3,), 4.0))
    with pytest.raises(ValueError, match='centered=True'):
        encoding.features(room)
    centered = TriPlane(embed_dim=8, channels=4, resolution=8, centered=True)
    around_origin = point_positions(xyz * 2, torch.full((3,), -2.0), torch.full((3,), 2.0))
    torch.testing.assert_close(centered.features(room), centered.features(around_origin))
    with pytest.raises(ValueError, match='needs bounds in its positions'):
        encoding.embed(torch.zeros(2, 10, 8), Positions(coords=xyz))
    with pytest.raises(ValueError, match='at least 2'):
        TriPlane(embed_dim=8, resolution=1)
