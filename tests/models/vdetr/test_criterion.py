"""The point detector's losses: 3D GIoU by hand, point-in-box (yawed boxes too), the matching and the proposal
targets, the heading losses of rotated boxes."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models.vdetr import BoxSetCriterion, aligned_giou3d, points_in_boxes, yaw_bin_targets


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
    assert points_in_boxes(points, boxes).tolist() == [[True, False], [False, True], [False, False]]
    # A 4 x 1 m box turned by 90° runs along y: (0, 1.5) is inside it, (1.5, 0) (inside the unturned box) is not.
    turned = torch.tensor([[0.0, 0.0, 0.0, 4.0, 1.0, 1.0, math.pi / 2]])
    points = torch.tensor([[0.0, 1.5, 0.0], [1.5, 0.0, 0.0], [0.3, -1.9, 0.4]])
    assert points_in_boxes(points, turned)[:, 0].tolist() == [True, False, True]
    # Counter-clockwise yaw: 1.8 m along a heading of 0.5 rad is inside; the clockwise reading (-0.5) would miss it.
    heading = torch.tensor([[0.0, 0.0, 0.0, 4.0, 1.0, 1.0, 0.5]])
    along = torch.tensor([[1.8 * math.cos(0.5), 1.8 * math.sin(0.5), 0.0],
                          [1.8 * math.cos(0.5), -1.8 * math.sin(0.5), 0.0]])
    assert points_in_boxes(along, heading)[:, 0].tolist() == [True, False]


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


def heading_code(yaw: torch.Tensor, num_bins: int = 12) -> torch.Tensor:
    """(N, 2K) bin logits (confident in the true bin) then residuals (the true one in every bin) of (N,) yaws."""
    bins, residuals = yaw_bin_targets(yaw, num_bins)
    return torch.cat([torch.nn.functional.one_hot(bins, num_bins) * 40.0 - 20.0,
                      residuals[:, None].expand(-1, num_bins)], -1)


def test_rotated_boxes_matched_exactly_have_no_loss_and_a_wrong_heading_costs() -> None:
    criterion = BoxSetCriterion(num_classes=2, eos_coef=1.0, num_yaw_bins=12)
    gt = torch.tensor([[0.0, 0.0, 0.0, 2.0, 1.0, 1.0, 0.7], [4.0, 4.0, 0.0, 2.0, 1.0, 1.0, -2.9]])
    target = dict(gt_boxes=gt, gt_labels=torch.tensor([1, 0]))
    boxes = gt[[1, 0]][None]
    logits = torch.full((1, 2, 3), -10.0)
    logits[0, 0, 0] = logits[0, 1, 1] = 10.0
    code = heading_code(gt[[1, 0], 6])[None]
    losses = criterion.set_losses(logits, boxes, [target], num_boxes=2.0, yaw_code=code)
    assert {'loss_yaw_cls', 'loss_yaw_reg'} <= set(losses)
    assert all(value.item() < 1e-6 for value in losses.values()), losses
    flipped = boxes.clone()
    flipped[..., 6] += math.pi  # the same boxes, the headings reversed: only the heading losses see it
    wrong = criterion.set_losses(logits, flipped, [target], 2.0, heading_code(flipped[0, :, 6])[None])
    assert wrong['loss_giou'].item() < 1e-5 and wrong['loss_yaw_cls'].item() > 10
    turned = boxes.clone()
    turned[..., 6] += math.pi / 2
    assert criterion.set_losses(logits, turned, [target], 2.0, heading_code(turned[0, :, 6])[None])[
        'loss_giou'].item() > 0.5


def test_rotated_proposals_learn_the_heading_of_the_box_they_lie_in() -> None:
    criterion = BoxSetCriterion(num_classes=1, num_yaw_bins=12)
    gt = torch.tensor([[0.0, 0.0, 0.0, 4.0, 1.0, 1.0, math.pi / 2]])
    xyz = torch.tensor([[[0.0, 1.5, 0.0], [1.5, 0.0, 0.0]]])  # inside the turned box, inside only the unturned one
    proposals = gt[[0, 0]][None]
    objectness = torch.tensor([[20.0, -20.0]])
    code = heading_code(gt[[0, 0], 6])[None]
    losses = criterion.proposal_losses(xyz, objectness, proposals, [dict(gt_boxes=gt, gt_labels=torch.zeros(1))],
                                       code)
    assert all(value.item() < 1e-6 for value in losses.values()), losses
    assert {'loss_proposal_yaw_cls', 'loss_proposal_yaw_reg'} <= set(losses)


def test_rotated_criterion_needs_both_heading_codes_of_its_width() -> None:
    criterion = BoxSetCriterion(num_classes=1, num_yaw_bins=12)
    outputs = dict(logits=torch.zeros(1, 1, 2, 2), boxes=torch.ones(1, 1, 2, 7), yaw_code=torch.zeros(1, 1, 2, 24))
    with pytest.raises(ValueError, match="'proposal_yaw_code' of 24 numbers"):
        criterion(outputs, [])
    with pytest.raises(ValueError, match=r'got widths \[16, 24\]'):
        criterion(dict(outputs, proposal_yaw_code=torch.zeros(1, 5, 16)), [])
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match='heading bins'):
            BoxSetCriterion(num_classes=1, num_yaw_bins=bad)
