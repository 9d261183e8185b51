"""KPE: golden values of the viewing-ray angles and their features for a known crop, invariance to scaling the
image and its intrinsics together, parity with the reference's functions (tests/data/README_parity.md), the
token encoding in a ViT, and clear errors for bad crops."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.encodings import KPE, kpe_center_corner, kpe_dense
from vispe.encodings.kpe import kpe_angles, kpe_features
from vispe.geometry import CameraGeometry, Cameras, Positions

from ..conftest import REPO_ROOT

GOLDEN = torch.load(REPO_ROOT / 'tests' / 'data' / 'kpe_parity.pt', weights_only=True)


def camera_matrix(fx: float, fy: float, cx: float, cy: float, batch: int = 1) -> torch.Tensor:
    return torch.tensor([[fx, 0, cx], [0, fy, cy], [0, 0, 1]]).expand(batch, 3, 3)


def test_golden_values_of_a_known_crop() -> None:
    """f = 100, principal point (50, 40); crop (50, 40, 250, 140): centre (150, 90) looks 45° right and
    atan(0.5) down; corner (50, 40) looks straight ahead."""
    intrinsics = camera_matrix(100, 100, 50, 40)
    latent = kpe_center_corner(torch.tensor([[50., 40., 250., 140.]]), intrinsics, num_freqs=2)
    theta_x, theta_y = math.pi / 4, math.atan(0.5)
    center = [math.sin(theta_x), math.cos(theta_x), math.sin(theta_y), math.cos(theta_y),
              math.sin(2 * theta_x), math.cos(2 * theta_x), math.sin(2 * theta_y), math.cos(2 * theta_y)]
    assert torch.allclose(latent[0, :8], torch.tensor(center), atol=1e-6)
    first_corner_l0 = latent[0, 8:12]   # l = 0, angles 0 and 1 of the corner block: corner (50, 40)
    assert torch.allclose(first_corner_l0, torch.tensor([0., 1., 0., 1.]), atol=1e-6)
    assert latent.shape == (1, 20 * 2)
    assert torch.allclose(kpe_angles(torch.tensor([150., 140.]), intrinsics[0]), torch.tensor([math.pi / 4] * 2))


def test_features_order_frequency_then_angle_then_sin_cos() -> None:
    features = kpe_features(torch.tensor([0.1, 0.2]), num_freqs=2)
    expected = [math.sin(0.1), math.cos(0.1), math.sin(0.2), math.cos(0.2),
                math.sin(0.2), math.cos(0.2), math.sin(0.4), math.cos(0.4)]
    assert torch.allclose(features, torch.tensor(expected), atol=1e-7)


def test_center_corner_features_unchanged_when_image_and_intrinsics_scale_together() -> None:
    boxes, intrinsics = GOLDEN['boxes'], GOLDEN['intrinsics'].expand(5, 3, 3)
    scale = torch.diag(torch.tensor([2.5, 2.5, 1.0]))
    before = kpe_center_corner(boxes, intrinsics)
    assert torch.allclose(before, kpe_center_corner(boxes * 2.5, scale @ intrinsics), atol=1e-5)
    assert not torch.allclose(before, kpe_center_corner(boxes * 2.5, intrinsics), atol=1e-2)


def test_dense_map_unchanged_when_image_intrinsics_and_crop_grid_scale_together() -> None:
    """Sampled where the scaled crop's integer pixels coincide with the original ones, the dense map is the same."""
    boxes = torch.tensor([[0., 0., 128., 96.], [100., 60., 300., 210.]])   # widths 4k, heights 3k: 5 x 4 samples
    intrinsics = GOLDEN['intrinsics'].expand(2, 3, 3)
    scale = torch.diag(torch.tensor([2.0, 2.0, 1.0]))
    before = kpe_dense(boxes, intrinsics, (4, 5))
    assert torch.allclose(before, kpe_dense(boxes * 2, scale @ intrinsics, (4, 5)), atol=1e-5)
    assert not torch.allclose(before, kpe_dense(boxes * 2, intrinsics, (4, 5)), atol=1e-2)


def test_equals_the_reference_functions() -> None:
    intrinsics = GOLDEN['intrinsics'].expand(5, 3, 3)
    corners = GOLDEN['boxes'][:, [[0, 1], [0, 3], [2, 1], [2, 3]]]
    assert torch.allclose(kpe_angles(corners, intrinsics[:, None]).flatten(1), GOLDEN['corner_angle'], atol=1e-6)
    assert torch.allclose(kpe_center_corner(GOLDEN['boxes'], intrinsics), GOLDEN['latent'], atol=1e-5)
    grid = tuple(GOLDEN['grid_size'].tolist())
    assert torch.allclose(kpe_dense(GOLDEN['boxes'], intrinsics, grid), GOLDEN['dense'], atol=1e-5)


def crop_positions(boxes: torch.Tensor, intrinsics: torch.Tensor, grid: tuple[int, int] = (6, 8),
                   prefix: int = 1) -> Positions:
    batch = boxes.shape[0]
    cameras = Cameras(intrinsics=intrinsics[:, None], lidar2cam=torch.eye(4).expand(batch, 1, 4, 4),
                      image_size=(480, 640))
    return Positions(grid_size=grid, num_prefix_tokens=prefix, camera=CameraGeometry(cameras, crop_boxes=boxes))


@pytest.mark.parametrize('mode', ['dense', 'center-corner'])
def test_token_encoding_adds_to_patches_only(mode: str) -> None:
    torch.manual_seed(0)
    encoding = KPE(embed_dim=16, num_freqs=4, mode=mode, hidden_dim=32)
    pos = crop_positions(GOLDEN['boxes'][:2], GOLDEN['intrinsics'].expand(2, 3, 3))
    x = torch.randn(2, 1 + 48, 16)
    out = encoding.embed(x, pos)
    assert torch.equal(out[:, 0], x[:, 0])
    added = out[:, 1:] - x[:, 1:]
    assert (added >= 0).all() and added.abs().sum() > 0
    spread = (added - added.mean(1, keepdim=True)).abs().max()
    assert (spread > 1e-4) if mode == 'dense' else (spread < 1e-6)
    moved = crop_positions(GOLDEN['boxes'][[1, 0]], GOLDEN['intrinsics'].expand(2, 3, 3))
    assert not torch.allclose(encoding.embed(x, moved), out)


@pytest.mark.parametrize('box, fx, message', [
    ([10., 10., 10., 50.], 500., 'zero or negative size'),
    ([600., 10., 700., 50.], 500., 'outside its 480x640 image'),
    ([10., 10., 50., 50.], -500., 'fx or fy <= 0'),
])
def test_bad_crops_name_the_fix(box: list[float], fx: float, message: str) -> None:
    encoding = KPE(embed_dim=8, num_freqs=2)
    pos = crop_positions(torch.tensor([box]), camera_matrix(fx, 500., 320., 240.), prefix=0)
    with pytest.raises(ValueError, match=message):
        encoding.embed(torch.zeros(1, 48, 8), pos)


def test_missing_crop_boxes_name_the_field() -> None:
    with pytest.raises(ValueError, match='needs cameras, crop_boxes in its positions'):
        KPE(embed_dim=8).embed(torch.zeros(1, 4, 8), Positions(grid_size=(2, 2)))


def test_without_intrinsics_the_features_read_the_crop_box_in_pixels_only() -> None:
    """use_intrinsics=False (the crop-box baseline): the features are KPE's under a nominal camera of the image size
    (fx = fy = W, principal point at the centre), the same whatever K the cameras carry."""
    torch.manual_seed(0)
    boxes = torch.tensor([[100., 50., 259., 209.], [0., 0., 319., 319.]])
    wide, tele = camera_matrix(300, 300, 320, 240, 2), camera_matrix(900, 900, 300, 250, 2)
    blind = KPE(embed_dim=8, num_freqs=4, mode='center-corner', use_intrinsics=False)
    nominal = camera_matrix(640, 640, 319.5, 239.5, 2)
    assert torch.allclose(blind.features(crop_positions(boxes, wide))[:, 0], kpe_center_corner(boxes, nominal, 4))
    assert torch.equal(blind.features(crop_positions(boxes, wide)), blind.features(crop_positions(boxes, tele)))
    seeing = KPE(embed_dim=8, num_freqs=4, mode='center-corner')
    assert not torch.allclose(seeing.features(crop_positions(boxes, wide)), seeing.features(crop_positions(boxes, tele)))
