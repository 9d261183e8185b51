"""3DETR's detection post-processing (``parse_predictions`` of its AP calculator): per-class proposals and a
same-class 3D non-maximum suppression over axis-aligned IoU."""
from __future__ import annotations

import torch

from vispe.geometry.iou3d import axis_aligned_iou3d


def same_class_nms(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor,
                   iou_threshold: float) -> torch.Tensor:
    """Indices, best first, that greedy NMS keeps: a box is dropped when a kept box of its class with a higher score
    overlaps it by an axis-aligned 3D IoU above ``iou_threshold``. boxes (N, 7), scores (N,), labels (N,)."""
    order = scores.argsort(descending=True, stable=True)
    boxes, labels = boxes[order], labels[order]
    overlapping = (axis_aligned_iou3d(boxes, boxes) > iou_threshold) & (labels[:, None] == labels[None, :])
    suppressed = torch.zeros(len(order), dtype=torch.bool, device=boxes.device)
    keep = []
    for index in range(len(order)):
        if not suppressed[index]:
            keep.append(index)
            suppressed |= overlapping[index]
    return order[torch.as_tensor(keep, dtype=torch.int64, device=boxes.device)]


def detections(boxes: torch.Tensor, class_probs: torch.Tensor, per_class: bool = True, nms_iou: float | None = 0.25,
               score_threshold: float = 0.05) -> dict[str, torch.Tensor]:
    """One scene's detections from its queries' boxes (Q, 7) and class probabilities (Q, K) (no-object removed).

    With ``per_class`` every query proposes its box once per class, scored by that class's probability (3DETR's
    ``per_class_proposal``, which raises AP by letting an uncertain query count for each candidate class); else once,
    for its best class. Queries whose best class scores below ``score_threshold`` propose nothing (3DETR's
    ``conf_thresh``); then same-class NMS at ``nms_iou`` (None: none).

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
        keep = same_class_nms(boxes, scores, labels, nms_iou)
    else:
        keep = scores.argsort(descending=True, stable=True)
    return dict(boxes=boxes[keep], scores=scores[keep], labels=labels[keep])
