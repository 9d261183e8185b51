"""Pairwise 3D IoU of gravity-aligned boxes ``(x, y, z, l, w, h, yaw)`` (:mod:`vispe.geometry.boxes`).

(x, y, z) is the gravity centre, l the extent along the heading, w across it, h vertical (z up), yaw the heading
counter-clockwise about +z from +x. Boxes only turn about z, so the intersection of two boxes is their
bird's-eye-view (BEV) intersection polygon times their vertical overlap.
"""
from __future__ import annotations

import torch

from vispe.geometry.cameras import no_autocast

__all__ = ['axis_aligned_iou3d', 'rotated_giou3d', 'rotated_iou3d']


def _check_pair(boxes1: torch.Tensor, boxes2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Both (N, 7) / (M, 7) box sets checked and in one floating dtype (float32, or float64 if either is)."""
    for name, boxes in (('boxes1', boxes1), ('boxes2', boxes2)):
        if not isinstance(boxes, torch.Tensor) or boxes.ndim != 2 or boxes.shape[-1] != 7:
            shape = tuple(boxes.shape) if isinstance(boxes, torch.Tensor) else type(boxes).__name__
            raise ValueError(f'{name} must be a tensor of shape (N, 7) = (x, y, z, l, w, h, yaw), got {shape}; '
                             f'flatten leading dimensions (boxes.reshape(-1, 7)) and slice off extra columns such '
                             f'as velocity ([:, :7])')
        if not torch.isfinite(boxes).all():
            bad = (~torch.isfinite(boxes)).any(-1).nonzero()[:, 0].tolist()
            raise ValueError(f'{name} rows {bad[:5]} hold NaN or inf values; drop or fix those boxes first')
        if not (boxes[:, 3:6] > 0).all():
            bad = (boxes[:, 3:6] <= 0).any(-1).nonzero()[:, 0].tolist()
            raise ValueError(f'{name} rows {bad[:5]} have a size (l, w, h) <= 0; drop those boxes '
                             f'(boxes[(boxes[:, 3:6] > 0).all(1)]) or clamp the sizes ([:, 3:6].clamp(min=1e-3))')
    dtype = torch.promote_types(torch.promote_types(boxes1.dtype, boxes2.dtype), torch.float32)
    return boxes1.to(dtype), boxes2.to(dtype)


def _vertical_overlap(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """(N, M) overlap of the [z - h/2, z + h/2] extents."""
    top = torch.minimum((boxes1[:, 2] + boxes1[:, 5] / 2)[:, None], (boxes2[:, 2] + boxes2[:, 5] / 2)[None])
    bottom = torch.maximum((boxes1[:, 2] - boxes1[:, 5] / 2)[:, None], (boxes2[:, 2] - boxes2[:, 5] / 2)[None])
    return (top - bottom).clamp(min=0)


def _iou_from_intersection(inter: torch.Tensor, boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    volume1 = boxes1[:, 3:6].prod(-1)
    volume2 = boxes2[:, 3:6].prod(-1)
    return inter / (volume1[:, None] + volume2[None] - inter)


def axis_aligned_iou3d(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """IoU of every pair of boxes taken as axis-aligned: **yaw is ignored**, l is the extent along x and w along y.

    This is the ScanNet layout (axis-aligned boxes, yaw 0). A box with yaw pi/2 is *not* turned: use
    :func:`rotated_iou3d` for yawed boxes.

    Args:
        boxes1: (N, 7) boxes (x, y, z, l, w, h, yaw), gravity centre, sizes > 0.
        boxes2: (M, 7) boxes, same layout.

    Returns:
        (N, M) IoU in [0, 1], float32 (float64 if either input is float64).
    """
    boxes1, boxes2 = _check_pair(boxes1, boxes2)
    with no_autocast(boxes1.device):
        low = torch.maximum((boxes1[:, :3] - boxes1[:, 3:6] / 2)[:, None], (boxes2[:, :3] - boxes2[:, 3:6] / 2)[None])
        high = torch.minimum((boxes1[:, :3] + boxes1[:, 3:6] / 2)[:, None], (boxes2[:, :3] + boxes2[:, 3:6] / 2)[None])
        inter = (high - low).clamp(min=0).prod(-1)
        return _iou_from_intersection(inter, boxes1, boxes2)


def _bev_corners(boxes: torch.Tensor) -> torch.Tensor:
    """(..., 4, 2) BEV corners of (..., 7) boxes, counter-clockwise from the front-right one."""
    signs = boxes.new_tensor([[1, -1], [1, 1], [-1, 1], [-1, -1]])
    offsets = signs * boxes[..., None, 3:5] / 2
    cos, sin = torch.cos(boxes[..., 6:7]), torch.sin(boxes[..., 6:7])
    x = cos * offsets[..., 0] - sin * offsets[..., 1]
    y = sin * offsets[..., 0] + cos * offsets[..., 1]
    return torch.stack([x, y], -1) + boxes[..., None, :2]


def _cross(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """z component of the cross product of (..., 2) vectors."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _inside(points: torch.Tensor, corners: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
    """Whether (N, M, K, 2) points lie in the counter-clockwise rectangles (N, M, 4, 2), up to ``tol`` (N, M)."""
    edges = corners.roll(-1, dims=-2) - corners
    # Left of (or on) every counter-clockwise edge; the distance to the edge line is cross / |edge|.
    side = _cross(edges[..., None, :, :], points[..., :, None, :] - corners[..., None, :, :])
    return (side >= -tol[..., None, None] * edges.norm(dim=-1)[..., None, :]).all(-1)


def _bev_intersection_area(corners1: torch.Tensor, corners2: torch.Tensor) -> torch.Tensor:
    """Area of the intersection of counter-clockwise rectangles (..., 4, 2) and (..., 4, 2) of one shape: (...).

    The intersection is convex and its vertices are among the corners of either rectangle inside the other and the
    16 crossings of their edges. Those 24 candidates (padded with a validity mask) are sorted by angle around the
    mean of the valid ones and the shoelace formula gives the area; repeated points add zero-length edges.
    """
    scale = torch.maximum(corners1.abs().amax((-1, -2)), corners2.abs().amax((-1, -2)))
    tol = 64 * torch.finfo(corners1.dtype).eps * scale.clamp(min=1)
    edges1 = corners1.roll(-1, dims=-2) - corners1
    edges2 = corners2.roll(-1, dims=-2) - corners2
    # Edge i of the first (a_i + t r_i) against edge j of the second (b_j + u s_j): (N, M, 4, 4).
    r, s = edges1[..., :, None, :], edges2[..., None, :, :]
    offset = corners2[..., None, :, :] - corners1[..., :, None, :]
    denom = _cross(r, s)
    parallel = denom.abs() <= tol[..., None, None] * (r.norm(dim=-1) + s.norm(dim=-1))
    safe = torch.where(parallel, torch.ones_like(denom), denom)
    t, u = _cross(offset, s) / safe, _cross(offset, r) / safe
    t_tol = tol[..., None, None] / r.norm(dim=-1)
    u_tol = tol[..., None, None] / s.norm(dim=-1)
    crossing_ok = ~parallel & (t >= -t_tol) & (t <= 1 + t_tol) & (u >= -u_tol) & (u <= 1 + u_tol)
    crossings = corners1[..., :, None, :] + t.clamp(0, 1)[..., None] * r
    points = torch.cat([corners1, corners2, crossings.flatten(-3, -2)], -2)
    valid = torch.cat([_inside(corners1, corners2, tol), _inside(corners2, corners1, tol),
                       crossing_ok.flatten(-2)], -1)
    weights = valid.to(points.dtype)
    centre = (points * weights[..., None]).sum(-2) / weights.sum(-1, keepdim=True).clamp(min=1)
    relative = points - centre[..., None, :]
    angle = torch.atan2(relative[..., 1], relative[..., 0])
    angle = torch.where(valid, angle, torch.full_like(angle, 4.0))  # invalid candidates sort last (> pi)
    order = angle.argsort(-1)
    relative = relative.gather(-2, order[..., None].expand_as(relative))
    valid = valid.gather(-1, order)
    relative = torch.where(valid[..., None], relative, relative[..., :1, :])
    area = _cross(relative, relative.roll(-1, dims=-2)).sum(-1).abs() / 2
    return torch.where(valid.sum(-1) >= 3, area, torch.zeros_like(area))


def rotated_iou3d(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """IoU of every pair of yawed boxes: BEV intersection of the two rotated rectangles times the vertical overlap,
    over the union of the volumes.

    Boxes that only touch (a shared face, edge or corner) have IoU 0. Memory is O(N M) with 24 candidate vertices
    per pair; split large sets into chunks.

    Args:
        boxes1: (N, 7) boxes (x, y, z, l, w, h, yaw), gravity centre, l along the heading, yaw counter-clockwise
            about +z from +x, sizes > 0.
        boxes2: (M, 7) boxes, same layout.

    Returns:
        (N, M) IoU in [0, 1], float32 (float64 if either input is float64).
    """
    boxes1, boxes2 = _check_pair(boxes1, boxes2)
    with no_autocast(boxes1.device):
        num1, num2 = len(boxes1), len(boxes2)
        corners1 = _bev_corners(boxes1)[:, None].expand(num1, num2, 4, 2)
        corners2 = _bev_corners(boxes2)[None].expand(num1, num2, 4, 2)
        # Relative to the first box's centre: fewer digits lost far from the origin.
        origin = boxes1[:, None, None, :2]
        area = _bev_intersection_area(corners1 - origin, corners2 - origin)
        inter = area * _vertical_overlap(boxes1, boxes2)
        return _iou_from_intersection(inter, boxes1, boxes2).clamp(0, 1)


def _aligned_extent_area(corners: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """(...) area of the rectangle at ``yaw`` (...) that holds the points (..., K, 2)."""
    cos, sin = torch.cos(yaw)[..., None], torch.sin(yaw)[..., None]
    along = cos * corners[..., 0] + sin * corners[..., 1]
    across = cos * corners[..., 1] - sin * corners[..., 0]
    return (along.amax(-1) - along.amin(-1)) * (across.amax(-1) - across.amin(-1))


def rotated_giou3d(boxes1: torch.Tensor, boxes2: torch.Tensor, pairwise: bool = False) -> torch.Tensor:
    """Generalised IoU of yawed boxes (Rezatofighi et al., CVPR 2019, in 3D), differentiable: the IoU of
    :func:`rotated_iou3d` minus the part of the enclosing box the union leaves empty.

    The enclosing box is vertical and, in BEV, the smaller of the two rectangles that hold both boxes' corners and
    are aligned with the one box or the other. Identical boxes have GIoU 1 at every yaw and the value does not change
    when the scene turns about z; on boxes of equal yaw (all yaw 0 included) it is the smallest enclosing box aligned
    with their common frame, the GIoU of the paper. 3DETR (Misra et al., ICCV 2021, ``generalized_box3d_iou``)
    encloses yawed boxes in the axis-aligned box of their corners instead, which leaves a perfect prediction of a
    cube at yaw 45° with GIoU 0.5 and a loss that turns it towards the axes.

    A loss term: the inputs are not checked (sizes must be positive, as a predicted ``exp`` size is).

    Args:
        boxes1: (..., 7) boxes (x, y, z, l, w, h, yaw), or (N, 7) with ``pairwise``.
        boxes2: (..., 7) boxes broadcastable against ``boxes1``, or (M, 7) with ``pairwise``.
        pairwise: every pair of the two sets, (N, M).

    Returns:
        GIoU in (-1, 1] of the broadcast shape (or (N, M)), float32 (float64 if either input is float64).
    """
    if pairwise:
        boxes1, boxes2 = boxes1[:, None], boxes2[None]
    dtype = torch.promote_types(torch.promote_types(boxes1.dtype, boxes2.dtype), torch.float32)
    boxes1, boxes2 = torch.broadcast_tensors(boxes1.to(dtype), boxes2.to(dtype))
    with no_autocast(boxes1.device):
        origin = boxes1[..., None, :2]  # relative to the first box's centre, as rotated_iou3d
        corners1, corners2 = _bev_corners(boxes1) - origin, _bev_corners(boxes2) - origin
        area = _bev_intersection_area(corners1, corners2)
        top1, top2 = boxes1[..., 2] + boxes1[..., 5] / 2, boxes2[..., 2] + boxes2[..., 5] / 2
        bottom1, bottom2 = boxes1[..., 2] - boxes1[..., 5] / 2, boxes2[..., 2] - boxes2[..., 5] / 2
        inter = area * (torch.minimum(top1, top2) - torch.maximum(bottom1, bottom2)).clamp(min=0)
        union = boxes1[..., 3:6].prod(-1) + boxes2[..., 3:6].prod(-1) - inter
        corners = torch.cat([corners1, corners2], -2)
        enclosing_bev = torch.minimum(_aligned_extent_area(corners, boxes1[..., 6]),
                                      _aligned_extent_area(corners, boxes2[..., 6]))
        enclosing = enclosing_bev * (torch.maximum(top1, top2) - torch.minimum(bottom1, bottom2))
        return inter / union - (enclosing - union) / enclosing
