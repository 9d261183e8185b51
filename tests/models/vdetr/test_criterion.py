"""The point detector's losses: 3D GIoU by hand, point-in-box, the matching and the proposal targets."""
from __future__ import annotations

import math

import torch

from vispe.models.vdetr import BoxSetCriterion, aligned_giou3d, points_in_aligned_boxes


def box(x: float, y: float, z: float, l: float, w: float, h: float) -> list[float]:
    return [x, y, z, l, w, h, 0.0]


def test_giou_by_hand() -> None:
    unit = torch.tensor([box(0, 0, 0, 1, 1, 1)])
    shifted = torch.tensor([box(0.5, 0, 0, 1, 1, 1)])
    far = torch.tensor([box(3, 0, 0, 1, 1, 1)])
    assert math.isclose(aligned_giou3d(unit, unit).item(), 1.0)
    assert math.isclose(aligned_giou3d(unit, shifted).item(), 1 / 3, rel_tol=1e-6)  # enclosing = union
    # disjoint: IoU 0, enclosing 4 × 1 × 1, union 2: GIoU = −(4 − 2) / 4
    assert math.isclose(aligned_giou3d(unit, far).item(), -0.5, rel_tol=1e-6)
    pairwise = aligned_giou3d(torch.cat([unit, far]), torch.cat([unit, shifted, far]), pairwise=True)
    assert pairwise.shape == (2, 3) and math.isclose(pairwise[1, 2].item(), 1.0)


def test_points_in_boxes() -> None:
    boxes = torch.tensor([box(0, 0, 0, 2, 2, 2), box(5, 0, 0, 1, 1, 1)])
    points = torch.tensor([[0.9, -0.9, 0.0], [5.4, 0.0, 0.4], [2.0, 0.0, 0.0]])
    assert points_in_aligned_boxes(points, boxes).tolist() == [[True, False], [False, True], [False, False]]


def test_matching_pairs_each_target_with_its_query_and_losses_vanish_there() -> None:
    criterion = BoxSetCriterion(num_classes=2, eos_coef=1.0)
    gt = torch.tensor([box(0, 0, 0, 1, 1, 1), box(4, 4, 0, 2, 1, 1)])
    target = dict(gt_boxes=gt, gt_labels=torch.tensor([1, 0]))
    boxes = torch.stack([gt[1], torch.tensor(box(9, 9, 9, 1, 1, 1)), gt[0]])[None]
    logits = torch.full((1, 3, 3), -10.0)
    logits[0, 0, 0] = logits[0, 2, 1] = logits[0, 1, 2] = 10.0
    (queries, targets), = criterion.match(logits, boxes, [target])
    assert dict(zip(queries.tolist(), targets.tolist())) == {0: 1, 2: 0}
    losses = criterion.set_losses(logits, boxes, [target], num_boxes=2.0)
    assert all(value.item() < 1e-6 for value in losses.values())


def test_proposal_targets_are_the_smallest_box_a_point_lies_in() -> None:
    criterion = BoxSetCriterion(num_classes=1)
    gt = torch.tensor([box(0, 0, 0, 4, 4, 4), box(0.5, 0, 0, 1, 1, 1)])
    xyz = torch.tensor([[[0.5, 0.0, 0.0], [1.5, 1.5, 0.0], [9.0, 9.0, 9.0]]])
    proposals = torch.stack([gt[1], gt[0], torch.tensor(box(9, 9, 9, 1, 1, 1))])[None]
    objectness = torch.tensor([[20.0, 20.0, -20.0]])
    losses = criterion.proposal_losses(xyz, objectness, proposals, [dict(gt_boxes=gt, gt_labels=torch.zeros(2))])
    assert losses['loss_proposal_center'].item() < 1e-6 and losses['loss_proposal_size'].item() < 1e-6
    assert losses['loss_objectness'].item() < 1e-6
    swapped = proposals[:, [1, 0, 2]]
    assert criterion.proposal_losses(xyz, objectness, swapped, [dict(gt_boxes=gt, gt_labels=torch.zeros(2))])[
        'loss_proposal_center'].item() > 0.1
