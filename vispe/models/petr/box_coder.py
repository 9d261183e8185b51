"""PETR's box code and its NMS-free decoding (mmdet3d's ``normalize_bbox`` and ``NMSFreeCoder``, in vispe's box layout).

A box ``(x, y, z, l, w, h, yaw)`` (scene frame, gravity centre, yaw counter-clockwise about +z) is coded as
``(x, y, log l, log w, z, log h, sin yaw, cos yaw)`` and, with velocities, ``(…, vx, vy)``: the centre keeps
PETR's channels 0, 1 and 4, so the reference points are added to the same outputs as in PETR. Released PETR
weights code mmdet3d 0.x boxes ``(x, y, log w, log l, z, log h, sin r, cos r, vx, vy)`` with ``r = −yaw − π/2``;
:func:`vispe.models.petr.convert.legacy_regression_rows` maps their last layer onto this code exactly.
"""
from __future__ import annotations

from typing import Sequence

import torch

from vispe.geometry.device_constants import device_constant

CENTER_CHANNELS = (0, 1, 4)


def encode_boxes(boxes: torch.Tensor, code_size: int = 8, velocity: torch.Tensor | None = None) -> torch.Tensor:
    """(..., 7) boxes -> (..., code_size) targets; ``code_size`` 10 appends ``velocity`` (..., 2), (vx, vy) m/s."""
    if code_size not in (8, 10):
        raise ValueError(f'code_size must be 8 (no velocity) or 10 (with vx, vy, as nuScenes); got {code_size}.')
    x, y, z, length, width, height, yaw = boxes.unbind(-1)
    parts = [x, y, length.log(), width.log(), z, height.log(), yaw.sin(), yaw.cos()]
    if code_size == 10:
        if velocity is None:
            raise ValueError('a 10-channel box code holds velocities: pass velocity (..., 2).')
        parts += list(velocity.unbind(-1))
    return torch.stack(parts, -1)


def yaw_from_ray_frame(code: torch.Tensor) -> torch.Tensor:
    """A code whose yaw channels (6, 7) hold (sin α, cos α) of the yaw relative to the viewing ray, α = yaw − β with
    β = atan2(y, x) the bearing of its centre from the scene origin (the ego car, where the cameras are), made
    ego-frame: the (sin α, cos α) turned by β (``β`` without gradient). What a camera sees of an object fixes α
    (its "local" or allocentric yaw, Mousavian et al., CVPR 2017), not the yaw: two cars of one yaw at two
    bearings look different, two of one α alike. (..., C) with centres in metres -> (..., C)."""
    bearing = torch.atan2(code[..., 1], code[..., 0]).detach()
    sin_a, cos_a = code[..., 6], code[..., 7]
    sin_b, cos_b = bearing.sin(), bearing.cos()
    turned = torch.stack([sin_a * cos_b + cos_a * sin_b, cos_a * cos_b - sin_a * sin_b], -1)
    return torch.cat([code[..., :6], turned, code[..., 8:]], -1)


def decode_boxes(code: torch.Tensor) -> torch.Tensor:
    """(..., 8 | 10) code -> (..., 7) boxes (sizes exp'd, yaw = atan2(sin, cos)); velocities are dropped."""
    x, y, log_l, log_w, z, log_h, sin, cos = code[..., :8].unbind(-1)
    return torch.stack([x, y, z, log_l.exp(), log_w.exp(), log_h.exp(), torch.atan2(sin, cos)], -1)


def denormalize_centers(code: torch.Tensor, pc_range: Sequence[float]) -> torch.Tensor:
    """Centres in [0, 1] of ``pc_range`` (channels 0, 1, 4) -> metres; other channels unchanged."""
    low = device_constant(pc_range[:3], code)
    extent = device_constant(pc_range[3:], code) - low
    index = list(CENTER_CHANNELS)
    out = code.clone()
    out[..., index] = code[..., index] * extent + low
    return out


def nms_free_decode(logits: torch.Tensor, code: torch.Tensor, max_num: int = 300,
                    post_center_range: Sequence[float] | None = None,
                    score_threshold: float | None = None) -> list[dict[str, torch.Tensor]]:
    """mmdet3d's ``NMSFreeCoder``: per sample the top ``max_num`` (query, class) sigmoid scores, their boxes.

    Args:
        logits: (B, Q, K) class logits (sigmoid, no background class).
        code: (B, Q, code_size) box code with centres in metres.
        post_center_range: keep boxes whose centre lies inside (xmin, ymin, zmin, xmax, ymax, zmax).
        score_threshold: keep scores above it (None: all).

    Returns:
        per sample ``dict(boxes_3d (k, 7), scores (k,), labels_3d (k,))``, highest score first; with a 10-channel
        code ``boxes_3d`` is (k, 9), the velocity (vx, vy) appended.
    """
    num_classes = logits.shape[-1]
    scores, index = logits.float().sigmoid().flatten(1).topk(min(max_num, logits.shape[1] * num_classes), dim=1)
    labels = index % num_classes
    queries = torch.div(index, num_classes, rounding_mode='floor')
    selected = torch.gather(code.float(), 1, queries[..., None].expand(-1, -1, code.shape[-1]))
    boxes = decode_boxes(selected)
    if code.shape[-1] == 10:
        boxes = torch.cat([boxes, selected[..., 8:10]], -1)
    keep = torch.ones_like(scores, dtype=torch.bool)
    if score_threshold is not None:
        keep &= scores > score_threshold
    if post_center_range is not None:
        low, high = device_constant(post_center_range[:3], boxes), device_constant(post_center_range[3:], boxes)
        keep &= ((boxes[..., :3] >= low) & (boxes[..., :3] <= high)).all(-1)
    return [dict(boxes_3d=b[k], scores=s[k], labels_3d=c[k]) for b, s, c, k in zip(boxes, scores, labels, keep)]
