"""Same-class NMS measures yawed boxes by their rotated IoU, and axis-aligned boxes exactly as 3DETR does."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.geometry.iou3d import axis_aligned_iou3d
from vispe.models.vdetr import VDETR
from vispe.models.vdetr.postprocess import check_test_cfg, detections, same_class_nms

TINY = dict(backbone=dict(in_channels=0, channels=(16,), num_samples=16, radius=0.4, group_size=4), embed_dim=32,
            encoder=dict(depth=1, num_heads=2, mlp_dim=32), decoder=dict(depth=1, num_heads=2, mlp_dim=32),
            num_queries=8)


def reference_nms(boxes: torch.Tensor, scores: torch.Tensor, labels: torch.Tensor, threshold: float) -> list[int]:
    """The NMS before yaw was read: one axis-aligned IoU matrix over all boxes, masked by class."""
    order = scores.argsort(descending=True, stable=True)
    boxes, labels = boxes[order], labels[order]
    overlapping = (axis_aligned_iou3d(boxes, boxes) > threshold) & (labels[:, None] == labels[None, :])
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for index in range(len(order)):
        if not suppressed[index]:
            keep.append(index)
            suppressed |= overlapping[index]
    return order[keep].tolist()


def test_the_same_box_written_turned_is_suppressed() -> None:
    boxes = torch.tensor([[0.0, 0, 0, 4, 1, 1, 0], [0.0, 0, 0, 1, 4, 1, math.pi / 2]])
    scores, labels = torch.tensor([0.9, 0.8]), torch.tensor([0, 0])
    assert axis_aligned_iou3d(boxes, boxes)[0, 1] < 0.25  # what the axis-aligned NMS saw
    assert same_class_nms(boxes, scores, labels, 0.25).tolist() == [0]
    assert same_class_nms(boxes, scores, labels, 0.25, rotated=False).tolist() == [0, 1]


@pytest.mark.parametrize('yaw', [math.pi / 4, -math.pi / 3, math.pi])
def test_turned_duplicates_are_suppressed_at_any_yaw(yaw: float) -> None:
    boxes = torch.tensor([[1.0, 2, 0.5, 3, 1, 1, yaw], [1.05, 2, 0.5, 3, 1, 1, yaw + 1e-3], [6.0, 2, 0.5, 3, 1, 1, 0]])
    kept = same_class_nms(boxes, torch.tensor([0.5, 0.9, 0.4]), torch.tensor([2, 2, 2]), 0.25)
    assert kept.tolist() == [1, 2]


def test_rotated_boxes_that_do_not_overlap_are_both_kept() -> None:
    # Two thin boxes crossing at 45 degrees would overlap axis-aligned (their axis-aligned extents coincide);
    # turned, they only meet near the centre.
    boxes = torch.tensor([[0.0, 0, 0, 4, 0.2, 1, math.pi / 4], [0.0, 0, 0, 4, 0.2, 1, -math.pi / 4],
                          [10.0, 0, 0, 2, 1, 1, 0.3], [12.5, 0, 0, 2, 1, 1, -0.3]])
    kept = same_class_nms(boxes, torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.zeros(4, dtype=torch.int64), 0.25)
    assert kept.tolist() == [0, 1, 2, 3]


def test_other_classes_are_never_suppressed() -> None:
    boxes = torch.tensor([[0.0, 0, 0, 4, 1, 1, 0], [0.0, 0, 0, 1, 4, 1, math.pi / 2]])
    assert same_class_nms(boxes, torch.tensor([0.9, 0.8]), torch.tensor([0, 1]), 0.25).tolist() == [0, 1]


def test_axis_aligned_results_are_unchanged() -> None:
    generator = torch.Generator().manual_seed(0)
    centres = torch.rand(60, 3, generator=generator) * 4
    sizes = 0.3 + torch.rand(60, 3, generator=generator)
    boxes = torch.cat([centres, sizes, torch.zeros(60, 1)], 1)
    scores = torch.rand(60, generator=generator)
    labels = torch.randint(0, 3, (60,), generator=generator)
    for threshold in (0.0, 0.1, 0.25, 0.5):
        assert same_class_nms(boxes, scores, labels, threshold).tolist() == reference_nms(boxes, scores, labels,
                                                                                          threshold)
    probs = torch.rand(60, 3, generator=generator).softmax(-1)
    rotated = detections(boxes, probs, rotated=True)
    aligned = detections(boxes, probs)
    assert aligned['labels'].tolist() == rotated['labels'].tolist()  # the two IoUs agree on yaw-0 boxes


def test_detections_pass_rotated_through() -> None:
    boxes = torch.tensor([[0.0, 0, 0, 4, 1, 1, 0], [0.0, 0, 0, 1, 4, 1, math.pi / 2]])
    probs = torch.tensor([[0.9, 0.05], [0.8, 0.1]])
    assert len(detections(boxes, probs, per_class=False)['boxes']) == 1
    assert len(detections(boxes, probs, per_class=False, rotated=False)['boxes']) == 2


@pytest.mark.parametrize('test_cfg, match', [
    (dict(nms_iou=float('nan')), r'nms_iou must be a number from 0 to 1 or None; got nan\. Give e\.g\. nms_iou=0\.25'),
    (dict(nms_iou=1.5), r'nms_iou .* got 1\.5'),
    (dict(score_threshold=-0.1), r'score_threshold must be a number from 0 to 1; got -0\.1'),
    (dict(score_threshold=None), r'score_threshold .* got None'),
    (dict(rotated='yes'), r"rotated must be one of \(None, True, False\); got 'yes'"),
    (dict(per_class=1), r'per_class must be one of \(True, False\); got 1'),
    (dict(nms=0.25), r"unknown keys \['nms'\]; the post-processing takes"),
])
def test_bad_test_cfg_is_refused_when_the_model_is_built(test_cfg: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_test_cfg(test_cfg)
    with pytest.raises(ValueError, match=match):
        VDETR(num_classes=2, test_cfg=test_cfg, **TINY)


def test_good_test_cfg_is_kept() -> None:
    assert check_test_cfg(dict(nms_iou=None, rotated=True)) == dict(nms_iou=None, rotated=True)
