"""Image and scene augmentations keep cameras, points and boxes consistent."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from vispe.geometry import (SceneTransform, box_corners, crop_cameras, hflip_cameras, resize_cameras,
                            transform_intrinsics)

from .rigs import IMAGE_SIZE, cameras

MIRROR = [1, 0, 3, 2, 5, 4, 7, 6]  # corner order after a reflection: left and right swap


def _pixels_and_depths(batch: int = 2, views: int = 6, num: int = 200) -> tuple[torch.Tensor, torch.Tensor]:
    uv = torch.rand(batch, views, num, 2) * torch.tensor([IMAGE_SIZE[1] - 1, IMAGE_SIZE[0] - 1])
    return uv, torch.rand(batch, views, num) * 59 + 1


def _boxes(batch: int = 2, num: int = 10) -> torch.Tensor:
    centre = torch.randn(batch, num, 3) * torch.tensor([15.0, 15.0, 0.5])
    size = torch.rand(batch, num, 3) * 3 + 0.5
    return torch.cat([centre, size, (torch.rand(batch, num, 1) * 2 - 1) * math.pi], -1)


@pytest.mark.parametrize('size', [(160, 400), (480, 1200), (256, 704)])
def test_resize_keeps_the_3d_point_of_a_physical_pixel(size: tuple[int, int]) -> None:
    cams = cameras(1, 2)
    uv, depth = _pixels_and_depths()
    resized = resize_cameras(cams, size)
    assert resized.image_size == size
    scale = torch.tensor([size[1] / IMAGE_SIZE[1], size[0] / IMAGE_SIZE[0]])
    moved = scale * (uv + 0.5) - 0.5
    assert (resized.unproject(moved, depth) - cams.unproject(uv, depth)).abs().max() < 1e-3
    assert torch.allclose(resized.project(cams.unproject(uv, depth))[0], moved, atol=1e-2)


def test_resize_matches_interpolate_sampling() -> None:
    # A ramp image whose value is its column: after F.interpolate, column u' holds the source column it sampled.
    height, width = 4, 10
    ramp = torch.arange(width, dtype=torch.float64).expand(1, 1, height, width)
    for new_w in (25, 7):
        out = F.interpolate(ramp, size=(height, new_w), mode='bilinear', align_corners=False)[0, 0, 0]
        cams = resize_cameras(cameras(1).index_views([0]), (height * 0 + IMAGE_SIZE[0], new_w * 80))
        sx = new_w / width
        interior = (out > 0) & (out < width - 1)
        # The camera's pixel map u' = sx (u + 0.5) - 0.5 sends each sampled source column to its new column.
        assert torch.allclose(sx * (out[interior] + 0.5) - 0.5, torch.arange(new_w, dtype=torch.float64)[interior])
        assert cams.image_size == (IMAGE_SIZE[0], new_w * 80)


def test_crop_and_pad_keep_the_3d_point_of_a_physical_pixel() -> None:
    cams = cameras(1, 2)
    uv, depth = _pixels_and_depths()
    top, left = torch.tensor([30.0, -10.0]), torch.tensor([100.0, 0.0])  # per sample; -10 pads on top
    cropped = crop_cameras(cams, top, left, (256, 704))
    assert cropped.image_size == (256, 704)
    moved = uv - torch.stack([left, top], -1)[:, None, None]
    assert (cropped.unproject(moved, depth) - cams.unproject(uv, depth)).abs().max() < 1e-3


def test_flip_keeps_the_3d_point_of_a_physical_pixel() -> None:
    cams = cameras(1, 2)
    uv, depth = _pixels_and_depths()
    flip = torch.rand(2, 6) > 0.5
    flipped = hflip_cameras(cams, flip)
    mirrored = torch.stack([IMAGE_SIZE[1] - 1 - uv[..., 0], uv[..., 1]], -1)
    moved = torch.where(flip[..., None, None], mirrored, uv)
    assert (flipped.unproject(moved, depth) - cams.unproject(uv, depth)).abs().max() < 1e-3
    assert torch.det(flipped.intrinsics[flip].double()).lt(0).all()  # a flipped K is still a valid camera
    image = torch.rand(3, *IMAGE_SIZE)
    assert torch.equal(image.flip(-1)[:, 5, IMAGE_SIZE[1] - 1 - 17], image[:, 5, 17])  # the u' = W - 1 - u convention


def test_image_augment_then_project_equals_project_then_augment() -> None:
    cams = cameras(3, 4)
    corners = box_corners(_boxes()).flatten(1, 2)
    uv, depth = cams.project(corners)
    augmented = hflip_cameras(crop_cameras(resize_cameras(cams, (400, 1000)), 50, 100, (320, 800)), True)
    scale = torch.tensor([1000 / 800, 400 / 320])
    expected = scale * (uv + 0.5) - 0.5 - torch.tensor([100.0, 50.0])
    expected = torch.stack([799 - expected[..., 0], expected[..., 1]], -1)
    got, got_depth = augmented.project(corners)
    front = depth > 1
    assert (got - expected)[front].abs().max() < 1e-2 and torch.allclose(got_depth, depth, atol=1e-4)


def test_transform_intrinsics_checks_shape() -> None:
    with pytest.raises(ValueError, match=r'pixel_transform must have shape \(3, 3\), \(B, 3, 3\) or \(B, V, 3, 3\)'):
        transform_intrinsics(cameras(1), torch.eye(3)[None, None, None], IMAGE_SIZE)


def _scenes() -> list[tuple[SceneTransform, torch.Tensor]]:
    """Scene transforms and, per sample, whether they mirror the scene."""
    angle, scale = torch.tensor([0.7, -2.5]), torch.tensor([1.1, 0.9])
    rot_scale = SceneTransform.rotation(angle).then(SceneTransform.scaling(scale))
    flip = SceneTransform.flip(y=torch.tensor([True, False]), x=torch.tensor([False, False]))
    both = SceneTransform.flip(x=True, y=True)  # a rotation by pi
    move = SceneTransform.translation(torch.tensor([[1.0, -2.0, 0.3], [0.0, 5.0, 0.0]]))
    return [(rot_scale, torch.tensor([False, False])),
            (flip.then(rot_scale).then(move), torch.tensor([True, False])),
            (SceneTransform.flip(x=True).then(both), torch.tensor([True, True]))]


@pytest.mark.parametrize('case', range(3))
def test_boxes_move_with_the_scene(case: int) -> None:
    scene, mirrored = _scenes()[case]
    boxes = _boxes()
    moved = scene.apply_boxes(boxes)
    corners_then_move = scene.apply_points(box_corners(boxes).flatten(1, 2)).view(2, 10, 8, 3)
    move_then_corners = box_corners(moved)
    expected = torch.where(mirrored[:, None, None, None], corners_then_move[:, :, MIRROR], corners_then_move)
    assert torch.allclose(move_then_corners, expected, atol=1e-4)
    assert moved[..., 6].ge(-math.pi).all() and moved[..., 6].lt(math.pi).all()


@pytest.mark.parametrize('case', range(3))
def test_scene_transform_leaves_projections_unchanged(case: int) -> None:
    scene, _ = _scenes()[case]
    cams, boxes = cameras(1, 2), _boxes()
    moved_cams = scene.apply_cameras(cams)
    points = box_corners(boxes).flatten(1, 2)
    uv, depth = cams.project(points)
    moved_uv, moved_depth = moved_cams.project(scene.apply_points(points))
    visible = (depth > 1) & (uv.abs() < 2000).all(-1)  # in front of the camera and near the image
    assert (moved_uv - uv)[visible].abs().max() < 1e-2 and torch.allclose(moved_depth, depth, atol=1e-4)
    # Box corners projected after moving boxes and cameras together are the same pixels (as a set).
    corner_uv = moved_cams.project(box_corners(scene.apply_boxes(boxes)).flatten(1, 2))[0]
    diff = (corner_uv.view(2, 6, 10, 8, 1, 2) - uv.view(2, 6, 10, 1, 8, 2)).norm(dim=-1).amin(-1).flatten(2)
    assert visible.sum() > 50 and diff[visible].max() < 1e-2
    # The calibrated rig is kept; the extrinsics of the moved scene are lidar2cam @ A^-1.
    assert torch.equal(moved_cams.lidar2cam, cams.lidar2cam)
    inverse = torch.linalg.inv(scene.matrix.expand(2, 4, 4))[:, None]
    assert torch.allclose(moved_cams.extrinsics.double(), cams.lidar2cam.double() @ inverse, atol=1e-5)


def test_scene_transform_composition_and_checks() -> None:
    scene = SceneTransform.rotation(math.pi / 2).then(SceneTransform.translation([1.0, 0.0, 0.0]))
    point = torch.tensor([[[1.0, 0.0, 2.0]]])
    assert torch.allclose(scene.apply_points(point), torch.tensor([[[1.0, 1.0, 2.0]]]), atol=1e-6)
    box = torch.tensor([[[1.0, 0.0, 2.0, 4.0, 2.0, 1.5, 0.0]]])
    assert torch.allclose(SceneTransform.flip(y=True).apply_boxes(box), box, atol=1e-6)  # yaw 0 -> -0
    assert torch.allclose(SceneTransform.flip(x=True).apply_boxes(box)[..., [0, 6]], torch.tensor([[[-1.0, -math.pi]]]))
    tilt = torch.eye(4, dtype=torch.float64)[None].clone()
    tilt[0, 1:3, 1:3] = torch.tensor([[0.0, -1.0], [1.0, 0.0]])  # 90° about x
    with pytest.raises(ValueError, match='must be a rotation about \\+z, a uniform scale > 0.*SceneTransform.rotation'):
        SceneTransform(tilt)
    with pytest.raises(ValueError, match='uniform scale > 0'):
        SceneTransform.scaling(0.0)
    with pytest.raises(ValueError, match='holds B=2 samples but the input has B=3'):
        SceneTransform.rotation(torch.tensor([0.1, 0.2])).apply_points(torch.zeros(3, 4, 3))
    with pytest.raises(ValueError, match=r'offset must be \(3,\) or \(B, 3\), got shape \(2,\)'):
        SceneTransform.translation([1.0, 2.0])
