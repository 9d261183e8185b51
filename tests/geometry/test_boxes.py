"""Boxes (x, y, z, l, w, h, yaw): corners, nuScenes devkit fields, legacy mmdet3d boxes."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from pyquaternion import Quaternion

from vispe.geometry import (box_corners, boxes_from_mmdet3d_legacy, boxes_from_nuscenes, boxes_to_nuscenes,
                            check_boxes, transform_boxes)


def _random_boxes(num: int = 20) -> torch.Tensor:
    centre = torch.randn(num, 3, dtype=torch.float64) * 10
    size = torch.rand(num, 3, dtype=torch.float64) * 4 + 0.3
    yaw = (torch.rand(num, 1, dtype=torch.float64) * 2 - 1) * math.pi
    return torch.cat([centre, size, yaw], -1)


def test_golden_box_at_yaw_90() -> None:
    box = torch.tensor([1.0, 2.0, 3.0, 4.0, 2.0, 1.0, math.pi / 2], dtype=torch.float64)
    # Heading +y: the front face is at y = 2 + l/2 = 4, its left side (-x of a car facing +y) at x = 1 - w/2 = 0.
    expected = torch.tensor([
        [0.0, 4.0, 3.5], [2.0, 4.0, 3.5], [2.0, 4.0, 2.5], [0.0, 4.0, 2.5],  # front: left-top, right-top, ...
        [0.0, 0.0, 3.5], [2.0, 0.0, 3.5], [2.0, 0.0, 2.5], [0.0, 0.0, 2.5],  # rear
    ], dtype=torch.float64)
    assert torch.allclose(box_corners(box), expected, atol=1e-12)
    centre, wlh, quaternion = boxes_to_nuscenes(box)
    assert centre.tolist() == [1.0, 2.0, 3.0] and wlh.tolist() == [2.0, 4.0, 1.0]
    c45 = math.cos(math.pi / 4)
    assert torch.allclose(quaternion, torch.tensor([c45, 0.0, 0.0, c45], dtype=torch.float64))


def test_nuscenes_round_trip() -> None:
    boxes = _random_boxes()
    back = boxes_from_nuscenes(*boxes_to_nuscenes(boxes))
    assert torch.allclose(back, boxes, atol=1e-9)
    batched = _random_boxes(12).view(2, 2, 3, 7).float()
    assert torch.allclose(boxes_from_nuscenes(*boxes_to_nuscenes(batched)), batched, atol=1e-5)


def _devkit_corners(centre: np.ndarray, wlh: np.ndarray, orientation: Quaternion) -> np.ndarray:
    """nuScenes devkit ``Box.corners()``, re-derived: (3, 8), front four then rear four."""
    w, l, h = wlh
    x = l / 2 * np.array([1, 1, 1, 1, -1, -1, -1, -1])
    y = w / 2 * np.array([1, -1, -1, 1, 1, -1, -1, 1])
    z = h / 2 * np.array([1, 1, -1, -1, 1, 1, -1, -1])
    return orientation.rotation_matrix @ np.vstack([x, y, z]) + centre[:, None]


def test_corners_and_quaternions_match_the_devkit() -> None:
    boxes = _random_boxes()
    centre, wlh, quaternion = boxes_to_nuscenes(boxes)
    corners = box_corners(boxes)
    for i, box in enumerate(boxes.tolist()):
        orientation = Quaternion(axis=[0, 0, 1], angle=box[6])
        np.testing.assert_allclose(quaternion[i].numpy(), orientation.elements, atol=1e-12)
        devkit = _devkit_corners(centre[i].numpy(), wlh[i].numpy(), orientation)
        np.testing.assert_allclose(corners[i].numpy(), devkit.T, atol=1e-9)


def test_yaw_of_slightly_tilted_boxes() -> None:
    # Boxes moved into the lidar frame carry the ego's small pitch/roll; yaw is the devkit's quaternion_yaw
    # (the rotated x axis projected on the ground), within second order of pyquaternion's yaw_pitch_roll[0].
    for yaw, pitch, roll in [(0.4, 0.02, -0.03), (-2.9, -0.05, 0.01), (3.1, 0.0, 0.04), (-1.0, 0.0, 0.0)]:
        q = (Quaternion(axis=[0, 0, 1], angle=yaw) * Quaternion(axis=[0, 1, 0], angle=pitch)
             * Quaternion(axis=[1, 0, 0], angle=roll))
        box = boxes_from_nuscenes(torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64),
                                  torch.tensor(q.elements))
        heading = q.rotation_matrix @ np.array([1.0, 0.0, 0.0])
        assert abs(box[6].item() - math.atan2(heading[1], heading[0])) < 1e-12
        assert abs(box[6].item() - q.yaw_pitch_roll[0]) < pitch ** 2 + roll ** 2 + abs(pitch * roll) + 1e-12


def test_nuscenes_refuses_rotations_off_z() -> None:
    camera_frame = torch.tensor(Quaternion(axis=[1, 0, 0], angle=math.pi / 2).elements)
    with pytest.raises(ValueError, match=r'quaternion \[1\] is not a rotation about \+z: it tilts the z axis by '
                                         r'1.571 rad > max_tilt=0.1.*convert camera-frame boxes'):
        boxes_from_nuscenes(torch.zeros(2, 3), torch.ones(2, 3), torch.stack([torch.tensor([1.0, 0, 0, 0]),
                                                                              camera_frame.float()]))
    with pytest.raises(ValueError, match=r'norm 2, not 1: pass unit quaternions'):
        boxes_from_nuscenes(torch.zeros(3), torch.ones(3), torch.tensor([2.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r'center \(\.\.\., 3\), wlh \(\.\.\., 3\) and quaternion \(\.\.\., 4\)'):
        boxes_from_nuscenes(torch.zeros(3), torch.ones(3), torch.zeros(3))


def _legacy_corners(box: list[float]) -> np.ndarray:
    """Corners of an mmdet3d 0.x LiDAR box (x, y, z_bottom, x_size, y_size, z_size, r), re-derived from its
    definition: the size is along the axes of the box frame and the frame is rotated clockwise by r."""
    x, y, z, dx, dy, dz, r = box
    offsets = np.array([[sx * dx / 2, sy * dy / 2, (sz + 1) * dz / 2]
                        for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    clockwise = np.array([[math.cos(r), math.sin(r), 0], [-math.sin(r), math.cos(r), 0], [0, 0, 1]])
    return offsets @ clockwise.T + np.array([x, y, z])


def test_mmdet3d_legacy_boxes() -> None:
    yaw = 0.3
    legacy = torch.tensor([[5.0, -2.0, -1.0, 1.8, 4.5, 1.6, -yaw - math.pi / 2]], dtype=torch.float64)
    box = boxes_from_mmdet3d_legacy(legacy)
    assert torch.allclose(box, torch.tensor([[5.0, -2.0, -0.2, 4.5, 1.8, 1.6, yaw]], dtype=torch.float64))
    info = boxes_from_mmdet3d_legacy(legacy, bottom_center=False)  # legacy info gt_boxes: gravity centre
    assert info[0, 2].item() == -1.0
    for row in _random_boxes().tolist():
        corners = box_corners(boxes_from_mmdet3d_legacy(torch.tensor(row, dtype=torch.float64)))
        expected = _legacy_corners(row)
        dist = np.linalg.norm(corners.numpy()[:, None] - expected[None], axis=-1)
        assert dist.min(1).max() < 1e-9 and dist.min(0).max() < 1e-9  # the same 8 points
    # mmdet3d 0.x info files: gt_boxes = (devkit centre, devkit wlh, -yaw - pi/2) of the devkit boxes.
    boxes = _random_boxes()
    centre, wlh, quaternion = boxes_to_nuscenes(boxes)
    info_yaw = torch.tensor([-Quaternion(q.tolist()).yaw_pitch_roll[0] - math.pi / 2 for q in quaternion])
    info = torch.cat([centre, wlh, info_yaw[:, None].double()], -1)
    assert torch.allclose(boxes_from_mmdet3d_legacy(info, bottom_center=False), boxes, atol=1e-9)
    # The map is its own inverse on (sizes, yaw).
    twice = boxes_from_mmdet3d_legacy(boxes_from_mmdet3d_legacy(legacy, False), False)
    assert torch.allclose(twice, legacy)  # its yaw is already in [-pi, pi)


def test_box_checks() -> None:
    with pytest.raises(ValueError, match=r'boxes must be a tensor of shape \(\.\.\., 7\).*got \(4, 9\); slice off'):
        box_corners(torch.zeros(4, 9))
    with pytest.raises(ValueError, match=r'boxes must be a tensor of shape \(\.\.\., 7\)'):
        check_boxes(torch.zeros(()))
    with pytest.raises(ValueError, match=r'boxes \(B, N, 7\) and matrices \(B, 4, 4\) with the same B'):
        transform_boxes(torch.zeros(5, 7), torch.eye(4)[None])
