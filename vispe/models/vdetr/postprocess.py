"""3DETR's detection post-processing (``parse_predictions`` of its AP calculator): per-class proposals and a
same-class 3D non-maximum suppression.

NMS measures overlap with :func:`~vispe.geometry.axis_aligned_iou3d` (3DETR's, exact for ScanNet's axis-aligned
boxes) when every box has yaw 0, and with :func:`~vispe.geometry.rotated_iou3d` (the yawed boxes' BEV intersection
times their vertical overlap) as soon as one box has a non-zero yaw: an axis-aligned IoU of yawed boxes is wrong (a
4 x 1 m box at yaw 0 and the same box written as 1 x 4 m at yaw pi/2 would overlap by 0.14 and both survive). The
two agree on yaw-0 boxes, so axis-aligned results are those of 3DETR.
"""
from __future__ import annotations

import math
import numbers

import torch

from vispe.geometry.iou3d import axis_aligned_iou3d, rotated_iou3d

__all__ = ['check_test_cfg', 'detections', 'same_class_nms']

TEST_CFG_KEYS = ('per_class', 'nms_iou', 'score_threshold', 'rotated')


def _uses_rotated_iou(boxes: torch.Tensor, rotated: bool | None) -> bool:
    """``rotated`` if given, else whether any box has a non-zero yaw (reads one flag back to the host)."""
    return bool((boxes[:, 6] != 0).any()) if rotated is None else rotated


def same_class_nms(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor,
                   iou_threshold: float, rotated: bool | None = None) -> torch.Tensor:
    """Indices, best first, that greedy NMS keeps: a box is dropped when a kept box of its class with a higher score
    overlaps it by a 3D IoU above ``iou_threshold``. boxes (N, 7) (x, y, z, l, w, h, yaw), scores (N,), labels (N,).

    ``rotated``: True measures overlap by :func:`~vispe.geometry.rotated_iou3d`, False by
    :func:`~vispe.geometry.axis_aligned_iou3d` (yaw ignored); None (default) chooses the rotated IoU when any box
    has a non-zero yaw (module docstring). The IoU is computed per class, as one matrix of its boxes.
    """
    order = scores.argsort(descending=True, stable=True)
    boxes, labels = boxes[order], labels[order]
    iou = rotated_iou3d if _uses_rotated_iou(boxes, rotated) else axis_aligned_iou3d
    overlapping = torch.zeros(len(order), len(order), dtype=torch.bool, device=boxes.device)
    for label in labels.unique():
        members = (labels == label).nonzero()[:, 0]
        overlapping[members[:, None], members[None]] = iou(boxes[members], boxes[members]) > iou_threshold
    suppressed = torch.zeros(len(order), dtype=torch.bool, device=boxes.device)
    keep = []
    for index in range(len(order)):
        if not suppressed[index]:
            keep.append(index)
            suppressed |= overlapping[index]
    return order[torch.as_tensor(keep, dtype=torch.int64, device=boxes.device)]


def check_test_cfg(test_cfg: dict) -> dict:
    """``test_cfg`` (the keyword arguments of :func:`detections`) checked: known keys, ``nms_iou`` None or in
    [0, 1], ``score_threshold`` in [0, 1], ``per_class`` a bool, ``rotated`` None or a bool. Returns a copy."""
    unknown = sorted(set(test_cfg) - set(TEST_CFG_KEYS))
    if unknown:
        raise ValueError(f'VDETR test_cfg has unknown keys {unknown}; the post-processing takes {list(TEST_CFG_KEYS)} '
                         f'(vispe.models.vdetr.postprocess.detections).')
    for name, optional in (('nms_iou', True), ('score_threshold', False)):
        value = test_cfg.get(name, 0.0)
        if value is None and optional:
            continue
        if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)
                or not 0 <= value <= 1):
            raise ValueError(f'VDETR test_cfg {name} must be a number from 0 to 1{" or None" if optional else ""}; '
                             f'got {value!r}. Give e.g. {name}={0.25 if optional else 0.05} (3DETR\'s).')
    for name, allowed in (('per_class', (True, False)), ('rotated', (None, True, False))):
        if name in test_cfg and not any(test_cfg[name] is value for value in allowed):
            raise ValueError(f'VDETR test_cfg {name} must be one of {allowed}; got {test_cfg[name]!r}.')
    return dict(test_cfg)


def detections(boxes: torch.Tensor, class_probs: torch.Tensor, per_class: bool = True, nms_iou: float | None = 0.25,
               score_threshold: float = 0.05, rotated: bool | None = None) -> dict[str, torch.Tensor]:
    """One scene's detections from its queries' boxes (Q, 7) and class probabilities (Q, K) (no-object removed).

    With ``per_class`` every query proposes its box once per class, scored by that class's probability (3DETR's
    ``per_class_proposal``, which raises AP by letting an uncertain query count for each candidate class); else once,
    for its best class. Queries whose best class scores below ``score_threshold`` propose nothing (3DETR's
    ``conf_thresh``); then same-class NMS at ``nms_iou`` (None: none), by rotated IoU when ``rotated`` or (None)
    when any box has a non-zero yaw (:func:`same_class_nms`).

    Returns dict(boxes (D, 7), scores (D,), labels (D,)), best first.
    """
    best_scores, best_labels = class_probs.max(-1)
    confident = best_scores >= score_threshold
    boxes, class_probs = boxes[confident], class_probs[confident]
    if per_class:
        num_classes = class_probs.shape[-1]
        labels = torch.arange(num_classes, device=boxes.device).repeat(len(boxes))
        scores = class_probs.reshape(-1)
        boxes = boxes.repeat_interleave(num_classes, dim=0)
    else:
        scores, labels = best_scores[confident], best_labels[confident]
    if nms_iou is not None and len(boxes):
        keep = same_class_nms(boxes, scores, labels, nms_iou, rotated)
    else:
        keep = scores.argsort(descending=True, stable=True)
    return dict(boxes=boxes[keep], scores=scores[keep], labels=labels[keep])
