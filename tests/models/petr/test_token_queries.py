"""Queries drawn from the image tokens: heatmap peaks ranked first and padded cells last, content and reference
points from the chosen tokens (so they change with the image), gradients into both, the proposal targets (the box
whose centre projects into a query's cell) and the proposal loss in metres."""
from __future__ import annotations

import pytest
import torch

from vispe.models.petr import PETRDetector
from vispe.geometry import Cameras
from vispe.models.petr.token_queries import heatmap_peak_index, proposal_loss, proposal_targets

from .two_camera_batch import PC_RANGE, batch


def test_heatmap_peaks_come_first_then_other_cells_then_padding() -> None:
    logits = torch.full((2, 2, 3, 3), -6.0)               # B = 1, V = 2 views, K = 2, 3x3 cells: N = 18
    logits[0, 0, 1, 1] = 3.0                               # view 0 peak at token 4
    logits[0, 1, 1, 2] = 2.0                               # its neighbour (token 5): higher than view 1's peak,
    logits[1, 1, 2, 0] = 1.0                               # but not a local maximum; view 1 peak at token 9 + 6 = 15
    assert heatmap_peak_index(logits, 1, 2).tolist() == [[4, 15]]
    valid = torch.ones(1, 18, dtype=torch.bool)
    valid[0, 9:] = False                                   # view 1 missing: its peak goes after every real cell
    assert heatmap_peak_index(logits, 1, 2, valid).tolist() == [[4, 5]]
    with pytest.raises(ValueError, match='cannot draw 19 queries from 18 tokens'):
        heatmap_peak_index(logits, 1, 19)


def token_query_detector(**options) -> PETRDetector:
    torch.manual_seed(0)
    return PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                        encoding=dict(type='PETR', depth_num=4, position_range=(-20, -20, -4, 20, 20, 4)),
                        decoder=dict(depth=2, num_heads=4, mlp_dim=64), num_queries=6, embed_dim=32, code_size=8,
                        pc_range=PC_RANGE, centre_heatmap=dict(weight=1.0), token_queries=dict(), **options)


def test_token_queries_follow_the_image_and_train() -> None:
    images, samples = batch()
    model = token_query_detector(denoising=dict(groups=2)).eval()
    assert model.reference_points is None
    with torch.no_grad():
        first = model.predict_sets(images, None, samples)
        second = model.predict_sets(images.flip(-1), None, samples)
    assert first['reference'].shape == (2, 6, 3) and bool(((first['reference'] > 0) & (first['reference'] < 1)).all())
    assert float((first['reference'] - second['reference']).abs().max()) > 1e-4
    assert float((first['code'] - second['code']).abs().max()) > 1e-4
    losses = model.train()(images, None, samples, mode='loss')
    sum(losses.values()).backward()
    for module in (model.token_queries.content, model.token_queries.reference):
        assert all(parameter.grad is not None and float(parameter.grad.abs().sum()) > 0
                   for parameter in module.parameters())


def test_token_queries_need_the_heatmap() -> None:
    with pytest.raises(ValueError, match='token_queries draws the queries by the centre heatmap'):
        PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                     encoding=dict(type='MultiViewSine'), num_queries=6, embed_dim=32, code_size=8,
                     pc_range=PC_RANGE, token_queries=dict())


def test_proposal_targets_and_loss() -> None:
    """Box 0 of sample 0 (5, 2, -1) projects in the +x camera (view 0, f = 20 px, 32 px images, stride 8) to pixel
    (8, 20.0): cell (row 2, column 1) = token 9; box 1 of sample 0 is behind that camera. A query on token 9 or a
    neighbour (token 14: row 3, column 2) proposes box 0, one two cells away (token 11) none."""
    images, samples = batch()
    cameras = Cameras.from_batch(samples, 'cpu')
    boxes = [sample['gt_boxes'] for sample in samples]
    index = torch.tensor([[9, 14, 11], [0, 1, 2]])
    assigned = proposal_targets(index, cameras, boxes, (4, 4), stride=8)
    assert assigned.tolist() == [[0, 0, -1], [-1, -1, -1]]      # sample 1's box is not near cells 0-2 of view 0
    low, high = torch.tensor(PC_RANGE[:3]), torch.tensor(PC_RANGE[3:])
    reference = torch.full((2, 3, 3), 0.5)
    centre = boxes[0][0, :3]
    reference[0, 0] = (centre - low) / (high - low)                                   # exact
    reference[0, 1] = (centre + torch.tensor([1.0, -2.0, 0.5]) - low) / (high - low)  # 3.5 m off in L1
    reference.requires_grad_(True)
    loss = proposal_loss(reference, index, cameras, boxes, (4, 4), 8, PC_RANGE)
    assert float(loss.detach()) == pytest.approx((0.0 + 3.5) / 2, abs=1e-4)
    loss.backward()
    assert float(reference.grad[0, 2].abs().sum()) == 0.0 and float(reference.grad[0, 1].abs().sum()) > 0
    empty = proposal_loss(reference, index, cameras, [boxes[0][:0], boxes[1][:0]], (4, 4), 8, PC_RANGE)
    assert float(empty.detach()) == 0.0 and empty.requires_grad


def test_token_queries_refuse_a_negative_proposal_weight() -> None:
    with pytest.raises(ValueError, match='proposal_weight must be a finite number >= 0'):
        token_query_detector_with(proposal_weight=-1.0)


def token_query_detector_with(**token_queries) -> PETRDetector:
    return PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                        encoding=dict(type='MultiViewSine'), num_queries=6, embed_dim=32, code_size=8,
                        pc_range=PC_RANGE, centre_heatmap=dict(weight=1.0), token_queries=token_queries)
