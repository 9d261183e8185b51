"""Boxes that users give a scene (SceneGeometry(boxes=...), which VertexRPE reads) are refused when not finite or
when a size l, w or h is not positive, with the box, its value and the fix; V-DETR's decoder, whose boxes are
positive by construction and may be tiny while it trains, builds them without the check (and without its host
synchronisation), so it keeps training."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.attention import Attention
from vispe.encodings import VertexRPE
from vispe.geometry import Positions, SceneGeometry
from vispe.models.vdetr import VDETR

GOOD = [1.0, 2.0, 0.5, 0.8, 0.6, 1.2, 0.3]


def boxes_with(index: int, value: float) -> torch.Tensor:
    """(2, 3, 7) good boxes except entry ``index`` of box 2 of scene 1."""
    boxes = torch.tensor(GOOD).repeat(2, 3, 1)
    boxes[1, 2, index] = value
    return boxes


@pytest.mark.parametrize('index, value, problem', [
    (3, -0.5, 'has a size l, w or h <= 0'), (4, 0.0, 'has a size l, w or h <= 0'),
    (5, -1e-6, 'has a size l, w or h <= 0'), (0, math.nan, 'has NaN or infinite entries'),
    (5, math.inf, 'has NaN or infinite entries'), (6, -math.inf, 'has NaN or infinite entries'),
    (3, math.nan, 'has NaN or infinite entries'),
])
def test_user_boxes_without_a_positive_finite_size_are_refused(index: int, value: float, problem: str) -> None:
    with pytest.raises(ValueError, match=rf'SceneGeometry.boxes: box 2 of scene 1 {problem}: \(x, y, z, l, w, h, yaw\) '
                                         rf'= \[.*\]; give finite boxes with positive sizes in metres'):
        SceneGeometry(boxes=boxes_with(index, value))


def test_good_and_tiny_boxes_pass_and_give_a_finite_bias() -> None:
    torch.manual_seed(0)
    boxes = boxes_with(4, 1e-6)
    pos_q = Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes))
    pos_k = Positions(coords=torch.rand(2, 6, 3) * 3)
    attention = Attention(16, num_heads=2, num_kv_heads=1)
    out = attention(torch.randn(2, 3, 16), pos_q, VertexRPE(num_heads=2), memory=torch.randn(2, 6, 16), pos_k=pos_k)
    assert torch.isfinite(out).all()


def test_a_host_with_boxes_valid_by_construction_skips_the_value_check() -> None:
    geometry = SceneGeometry(boxes=boxes_with(3, -1.0), check_values=False)
    assert geometry.boxes[1, 2, 3] == -1.0


def test_the_value_check_is_skipped_for_meta_tensors() -> None:
    SceneGeometry(boxes=torch.empty(2, 3, 7, device='meta'))


def test_the_v_detr_decoder_does_not_check_its_predicted_boxes_and_trains() -> None:
    """Predicted sizes are exp of clamped log-scales (positive, possibly tiny): no check fires, no sync is added."""
    torch.manual_seed(0)
    model = VDETR(num_classes=2, embed_dim=32, num_queries=8,
                  backbone=dict(in_channels=3, channels=(16, 32), num_samples=32, radius=0.4, group_size=8),
                  encoder=dict(depth=1, num_heads=2, mlp_dim=32),
                  decoder=dict(depth=2, num_heads=2, mlp_dim=32, encoding=dict(type='VertexRPE')))
    with torch.no_grad():
        model.proposal_head[-1].bias[4:7] = -math.log(1e3)  # the smallest proposal sizes the clamp allows
    generator = torch.Generator().manual_seed(0)
    points = torch.cat([torch.rand(2, 128, 3, generator=generator) * 4, torch.rand(2, 128, 3, generator=generator)], -1)
    samples = [dict(gt_boxes=torch.tensor([[1.0, 1.0, 0.5, 0.6, 0.8, 1.0, 0.0]]), gt_labels=torch.tensor([1]))] * 2
    losses = model(points, samples, mode='loss')
    total = sum(losses.values())
    assert torch.isfinite(total)
    total.backward()
