"""Gravity-aligned 3D boxes ``(x, y, z, l, w, h, yaw)`` in the scene frame, and nuScenes / mmdet3d layouts.

* (x, y, z) is the gravity (volume) centre, as nuScenes ``Box.center``; mmdet3d's
  ``LiDARInstance3DBoxes`` store the bottom centre instead.
* l is the extent along the heading, w across it, h vertical.
* yaw is the heading angle counter-clockwise about +z from +x (right-handed), wrapped to [-pi, pi).

Corner order (:func:`box_corners`) is the nuScenes devkit's ``Box.corners()``: the four front corners
(heading side) then the four rear ones, each as left-top, right-top, right-bottom, left-bottom.
"""
from __future__ import annotations

import math

import torch
from kornia.geometry.conversions import axis_angle_to_quaternion, quaternion_to_rotation_matrix
from kornia.geometry.linalg import transform_points

from vispe.geometry.cameras import no_autocast
from vispe.geometry.device_constants import device_constant

__all__ = ['BOX_CORNER_SIGNS', 'box_corners', 'boxes_from_mmdet3d_legacy', 'boxes_from_nuscenes', 'boxes_to_nuscenes',
           'check_boxes', 'check_gravity_similarity', 'transform_boxes', 'wrap_angle']

# (8, 3) signs of the (l/2, w/2, h/2) offsets of each corner in the box frame (x ahead, y left, z up).
BOX_CORNER_SIGNS = torch.tensor([
    [1, 1, 1], [1, -1, 1], [1, -1, -1], [1, 1, -1],
    [-1, 1, 1], [-1, -1, 1], [-1, -1, -1], [-1, 1, -1],
], dtype=torch.float32)


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Angles wrapped to [-pi, pi)."""
    return angle - 2 * math.pi * torch.floor(angle / (2 * math.pi) + 0.5)


def check_boxes(boxes: torch.Tensor, name: str = 'boxes') -> torch.Tensor:
    """Check (..., 7) boxes and return them in float32 (or float64 if given)."""
    if not isinstance(boxes, torch.Tensor) or boxes.ndim < 1 or boxes.shape[-1] != 7:
        shape = tuple(boxes.shape) if isinstance(boxes, torch.Tensor) else type(boxes).__name__
        raise ValueError(f'{name} must be a tensor of shape (..., 7) = (x, y, z, l, w, h, yaw), got {shape}; '
                         f'slice off extra columns such as velocity ([..., :7])')
    return boxes.to(torch.promote_types(boxes.dtype, torch.float32))


def box_corners(boxes: torch.Tensor) -> torch.Tensor:
    """The 8 corners of (..., 7) boxes: (..., 8, 3), in the order of :data:`BOX_CORNER_SIGNS`."""
    boxes = check_boxes(boxes)
    signs = device_constant(BOX_CORNER_SIGNS, boxes)
    offsets = signs * boxes[..., None, 3:6] / 2
    cos, sin = torch.cos(boxes[..., 6:7]), torch.sin(boxes[..., 6:7])
    x = cos * offsets[..., 0] - sin * offsets[..., 1]
    y = sin * offsets[..., 0] + cos * offsets[..., 1]
    return torch.stack([x, y, offsets[..., 2]], -1) + boxes[..., None, :3]


def check_gravity_similarity(matrix: torch.Tensor, name: str = 'scene transform') -> None:
    """Refuse (..., 4, 4) matrices that do not keep boxes gravity-aligned.

    Accepted: ``[[s·Q, 0, t], [0, s, tz], [0, 0, 0, 1]]`` with Q a 2×2 orthogonal matrix (a rotation
    about +z, possibly times a flip of x or y) and a uniform scale s > 0.
    """
    if matrix.ndim < 2 or matrix.shape[-2:] != (4, 4):
        raise ValueError(f'{name} must have shape (..., 4, 4), got {tuple(matrix.shape)}')
    m = matrix.double()
    scale = m[..., 2, 2]
    with no_autocast(m.device):
        gram = m[..., :2, :2].mT @ m[..., :2, :2]
    eye = torch.eye(2, dtype=m.dtype, device=m.device)
    err = torch.cat([
        (gram - scale[..., None, None] ** 2 * eye).flatten(-2) / scale[..., None].abs().clamp(min=1e-12) ** 2,
        m[..., 2, :2], m[..., :2, 2], m[..., 3, :3], m[..., 3, 3:] - 1,
    ], -1).abs().amax(-1)
    bad = ~(err <= 1e-5) | ~(scale > 0)
    if bad.any():
        raise ValueError(f'{name} must be a rotation about +z, a uniform scale > 0, flips of x/y and a translation '
                         f'(so boxes stay gravity-aligned), got '
                         f'{[[round(float(x), 4) for x in row] for row in matrix[bad][0]]}; '
                         f'build it with SceneTransform.rotation / scaling / flip / translation')


def transform_boxes(boxes: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """Move (B, N, 7) boxes by per-sample (B, 4, 4) gravity-aligned similarities ``A``.

    Centres go to ``A @ c``, sizes scale by s, the heading (cos yaw, sin yaw) goes through the
    2×2 block (so a flip of y gives -yaw, a flip of x gives pi - yaw). The box as a set of points is
    ``A`` times the old one; under a flip the corner order mirrors (left and right swap).
    """
    boxes = check_boxes(boxes)
    if boxes.ndim != 3 or matrix.shape != (boxes.shape[0], 4, 4):
        raise ValueError(f'transform_boxes needs boxes (B, N, 7) and matrices (B, 4, 4) with the same B, got '
                         f'{tuple(boxes.shape)} and {tuple(matrix.shape)}')
    check_gravity_similarity(matrix)
    with no_autocast(boxes.device):
        matrix = matrix.to(boxes)
        centre = transform_points(matrix, boxes[..., :3])
        heading = torch.stack([torch.cos(boxes[..., 6]), torch.sin(boxes[..., 6])], -1)
        heading = heading @ matrix[:, :2, :2].mT
        yaw = torch.atan2(heading[..., 1], heading[..., 0])
        size = boxes[..., 3:6] * matrix[:, 2, 2, None, None]
    return torch.cat([centre, size, wrap_angle(yaw)[..., None]], -1)


def boxes_to_nuscenes(boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(..., 7) boxes -> nuScenes devkit ``Box`` fields.

    Returns:
        center (..., 3) (gravity centre), wlh (..., 3) (the devkit's size order: width, length,
        height) and orientation (..., 4) quaternion (w, x, y, z) = (cos(yaw/2), 0, 0, sin(yaw/2)).
    """
    boxes = check_boxes(boxes)
    yaw = wrap_angle(boxes[..., 6])
    axis_angle = torch.stack([torch.zeros_like(yaw), torch.zeros_like(yaw), yaw], -1)
    return boxes[..., :3], boxes[..., [4, 3, 5]], axis_angle_to_quaternion(axis_angle)


def boxes_from_nuscenes(center: torch.Tensor, wlh: torch.Tensor, quaternion: torch.Tensor,
                        max_tilt: float = 0.1) -> torch.Tensor:
    """nuScenes devkit ``Box`` fields -> (..., 7) boxes.

    Args:
        center: (..., 3) gravity centre in the scene frame.
        wlh: (..., 3) size as (width, length, height).
        quaternion: (..., 4) unit quaternion (w, x, y, z), a rotation about +z.
        max_tilt: the largest angle (radians) between the rotated z axis and +z that is accepted; the
            small pitch/roll of boxes moved into the lidar frame is dropped. A larger tilt means a frame
            mix-up (e.g. a camera-frame box).

    yaw is the heading of the rotated x axis projected on the ground, ``atan2(R[1, 0], R[0, 0])``, the
    devkit's ``quaternion_yaw`` (nuScenes evaluation). mmdet3d's converters use pyquaternion's
    ``yaw_pitch_roll[0]`` = ``atan2(-R[0, 1], R[0, 0])``: equal for rotations about z, second-order
    different in the tilt otherwise (4e-4 rad at 2° pitch and roll).

    Returns:
        (..., 7) boxes (x, y, z, l, w, h, yaw).
    """
    if center.shape[-1:] != (3,) or wlh.shape != center.shape or quaternion.shape != (*center.shape[:-1], 4):
        raise ValueError(f'boxes_from_nuscenes needs center (..., 3), wlh (..., 3) and quaternion (..., 4) '
                         f'(w, x, y, z) with the same leading shape, got {tuple(center.shape)}, '
                         f'{tuple(wlh.shape)}, {tuple(quaternion.shape)}')
    dtype = torch.promote_types(center.dtype, torch.float32)
    quaternion = quaternion.to(dtype)
    norm = quaternion.norm(dim=-1)
    bad = ~((norm - 1).abs() <= 1e-3)
    if bad.any():
        raise ValueError(f'quaternion {bad.nonzero()[0].tolist()} has norm {float(norm[bad][0]):.6g}, not 1: '
                         f'pass unit quaternions (w, x, y, z), e.g. pyquaternion Quaternion.elements')
    rot = quaternion_to_rotation_matrix(quaternion)
    tilt = torch.acos(rot[..., 2, 2].clamp(-1, 1))
    bad = ~(tilt <= max_tilt)
    if bad.any():
        raise ValueError(f'quaternion {bad.nonzero()[0].tolist()} is not a rotation about +z: it tilts the z axis by '
                         f'{float(tilt[bad][0]):.4g} rad > max_tilt={max_tilt}; boxes here are gravity-aligned in '
                         f'the scene frame (x forward, y left, z up): convert camera-frame boxes to the scene frame '
                         f'first, or raise max_tilt to keep only the yaw')
    yaw = torch.atan2(rot[..., 1, 0], rot[..., 0, 0])
    wlh = wlh.to(dtype)
    return torch.cat([center.to(dtype), wlh[..., [1, 0, 2]], wrap_angle(yaw)[..., None]], -1)


def boxes_from_mmdet3d_legacy(boxes: torch.Tensor, bottom_center: bool = True) -> torch.Tensor:
    """LiDAR boxes of mmdet3d < 1.0 (before its v1.0.0rc0 coordinate refactoring) -> (..., 7) boxes.

    The legacy layout is ``(x, y, z, x_size=w, y_size=l, z_size=h, r)`` with ``r = -yaw - pi/2``
    (mmdet3d 0.x ``output_to_nusc_box`` exports ``-r - pi/2`` as the nuScenes yaw and the sizes as wlh;
    its ``tools/update_data_coords.py`` swaps sizes and sets ``-r - pi/2``). The map is its own inverse.

    Args:
        boxes: (..., 7) legacy boxes.
        bottom_center: True for ``LiDARInstance3DBoxes.tensor`` (bottom centre), False for the
            ``gt_boxes`` of legacy info files (gravity centre, as the devkit's ``Box.center``).
    """
    boxes = check_boxes(boxes)
    x, y, z, w, l, h, r = boxes.unbind(-1)
    if bottom_center:
        z = z + h / 2
    return torch.stack([x, y, z, l, w, h, wrap_angle(-r - math.pi / 2)], -1)
