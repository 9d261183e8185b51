"""3DETR's post-processing: per-class proposals, the confidence threshold and same-class 3D NMS."""
from __future__ import annotations

import torch

from vispe.models.vdetr.postprocess import detections, same_class_nms


def test_nms_drops_overlaps_of_the_same_class_only() -> None:
    boxes = torch.tensor([[0.0, 0, 0, 1, 1, 1, 0], [0.1, 0, 0, 1, 1, 1, 0], [0.1, 0, 0, 1, 1, 1, 0],
                          [3.0, 0, 0, 1, 1, 1, 0]])
    scores = torch.tensor([0.6, 0.9, 0.5, 0.3])
    labels = torch.tensor([0, 0, 1, 0])
    assert same_class_nms(boxes, scores, labels, 0.25).tolist() == [1, 2, 3]
    assert same_class_nms(boxes, scores, labels, 0.95).tolist() == [1, 0, 2, 3]


def test_per_class_proposals_and_threshold() -> None:
    boxes = torch.tensor([[0.0, 0, 0, 1, 1, 1, 0], [5.0, 0, 0, 1, 1, 1, 0], [9.0, 0, 0, 1, 1, 1, 0]])
    probs = torch.tensor([[0.7, 0.2], [0.1, 0.6], [0.03, 0.02]])
    every = detections(boxes, probs, per_class=True, nms_iou=None)
    assert torch.allclose(every['scores'], torch.tensor([0.7, 0.6, 0.2, 0.1]))
    assert every['labels'].tolist() == [0, 1, 1, 0] and every['boxes'][0, 0] == 0 and every['boxes'][1, 0] == 5
    best = detections(boxes, probs, per_class=False, nms_iou=0.25)
    assert best['labels'].tolist() == [0, 1] and torch.allclose(best['scores'], torch.tensor([0.7, 0.6]))
