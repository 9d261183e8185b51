"""FourierXYZ and SinCosXYZ (3DETR): golden values by hand, the channel split, and invariance to the scene's
placement and size through the normalisation by its extent."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.encodings import FourierXYZ, SinCosXYZ, build_encoding, sincos_xyz_embedding
from vispe.geometry import Positions, SceneGeometry


def point_positions(xyz: torch.Tensor, low: list[float], high: list[float]) -> Positions:
    bounds = torch.tensor([low, high], dtype=xyz.dtype).expand(xyz.shape[0], 2, 3)
    return Positions(coords=xyz, scene=SceneGeometry(bounds=bounds))


def test_sincos_golden_values_and_channel_split() -> None:
    unit = torch.tensor([[0.25, 0.5, 1.0]])
    table = sincos_xyz_embedding(unit, 12, temperature=100.0)
    # 4 channels per axis: (sin, cos) at period 1, then at period 100^(2/4) = 10
    x = 2 * math.pi * 0.25
    assert torch.allclose(table[0, :4], torch.tensor([math.sin(x), math.cos(x), math.sin(x / 10), math.cos(x / 10)]),
                          atol=1e-6)
    z = 2 * math.pi
    assert torch.allclose(table[0, 8:], torch.tensor([math.sin(z), math.cos(z), math.sin(z / 10), math.cos(z / 10)]),
                          atol=1e-6)
    wide = sincos_xyz_embedding(unit, 256)
    # 256 = 86 + 86 + 84: the remainder goes to the first axes; axis y starts at channel 86 with sin(2π·0.5), cos
    assert wide.shape == (1, 256)
    assert torch.allclose(wide[0, 86:88], torch.tensor([math.sin(math.pi), math.cos(math.pi)]), atol=1e-6)
    assert torch.allclose(wide[0, 172:174], torch.tensor([math.sin(z), math.cos(z)]), atol=1e-6)
    assert torch.allclose(wide[0, 84:86], torch.tensor([math.sin(x / 10000 ** (84 / 86)),
                                                        math.cos(x / 10000 ** (84 / 86))]), atol=1e-6)


def test_fourier_golden_values() -> None:
    torch.manual_seed(0)
    encoding = FourierXYZ(embed_dim=4)
    with torch.no_grad():
        encoding.gauss_B.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0], [0.5, 0.0]]))
    xyz = torch.tensor([[[2.0, 1.0, 4.0]]])
    table = encoding.position_embedding(point_positions(xyz, [0, 0, 0], [4, 4, 4]))  # u = (0.5, 0.25, 1)
    projected = [2 * math.pi * (0.5 + 0.5), 2 * math.pi * 0.25 * 2]
    expected = [math.sin(projected[0]), math.sin(projected[1]), math.cos(projected[0]), math.cos(projected[1])]
    assert torch.allclose(table[0, 0], torch.tensor(expected), atol=1e-6)
    assert 'gauss_B' in encoding.state_dict()


@pytest.mark.parametrize('name', ['FourierXYZ', 'SinCosXYZ'])
def test_same_scene_moved_and_scaled_reads_the_same_positions(name: str) -> None:
    torch.manual_seed(0)
    encoding = build_encoding(dict(type=name), embed_dim=32)
    xyz = torch.rand(2, 50, 3) * torch.tensor([4.0, 3.0, 2.0])
    base = encoding.position_embedding(point_positions(xyz, [0, 0, 0], [4, 3, 2]))
    moved = encoding.position_embedding(point_positions(xyz * 1.5 + torch.tensor([1.0, -2.0, 0.5]), [1, -2, 0.5], [7, 2.5, 3.5]))
    assert torch.allclose(base, moved, atol=1e-5)
    tokens = torch.zeros(2, 51, 32)
    pos = Positions(coords=xyz, num_prefix_tokens=1, scene=SceneGeometry(bounds=torch.tensor([[0.0, 0, 0], [4, 3, 2]]).expand(2, 2, 3)))
    out = encoding.embed(tokens, pos)
    assert torch.equal(out[:, 0], tokens[:, 0]) and torch.allclose(out[:, 1:], base)


def test_missing_bounds_or_coordinates_are_named() -> None:
    encoding = SinCosXYZ(embed_dim=12)
    with pytest.raises(ValueError, match=r"SinCosXYZ needs bounds in its positions, which carry points\. Give bounds: "
                                         r"each 3D scene's extent \(Positions\(scene=SceneGeometry\(bounds="):
        encoding.position_embedding(Positions(coords=torch.rand(1, 4, 3)))
    with pytest.raises(ValueError, match=r'needs points in its positions, which carry grid, bounds\. Give points: 3D '
                                         r'coordinates of the tokens'):
        encoding.position_embedding(Positions(coords=torch.rand(1, 4, 2), scene=SceneGeometry(bounds=torch.zeros(1, 2, 3))))
    with pytest.raises(ValueError, match='embed_dim'):
        FourierXYZ(embed_dim=7)
