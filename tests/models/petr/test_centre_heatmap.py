"""The 2D auxiliary centre heatmap: its targets peak at the projected box centre, its loss rewards the peaks and it
trains the backbone."""
from __future__ import annotations

import pytest
import torch

from vispe.geometry import Cameras
from vispe.models.petr import PETRDetector
from vispe.models.petr.centre_heatmap import CentreHeatmapHead, centre_heatmap_loss, centre_heatmaps

from .two_camera_batch import PC_RANGE, batch


def test_centre_heatmap_peaks_at_the_projected_centre_cell() -> None:
    """A box 10 m ahead of the +x camera (f = 20 px, 32 px images, stride 8) projects to pixel (16, 19.6): cell
    (column 2, row 2) of the 4x4 grid holds the peak 1 in the box's class channel, nothing in the other view."""
    images, samples = batch()
    cameras = Cameras.from_batch(samples, 'cpu')
    boxes = [torch.tensor([[10.0, 0.0, -0.5, 4.0, 2.0, 1.5, 0.0]])] * 2
    labels = [torch.tensor([3])] * 2
    heat = centre_heatmaps(cameras, boxes, labels, 5, (4, 4), stride=8)
    assert heat.shape == (2, 2, 5, 4, 4)
    assert float(heat[0, 0, 3, 2, 2]) == 1.0 and int(heat[0, 0, 3].eq(1).sum()) == 1
    assert float(heat[0, 0, [0, 1, 2, 4]].abs().sum()) == 0.0 and float(heat[0, 1].abs().sum()) == 0.0
    assert 0 < float(heat[0, 0, 3, 2, 3]) < 1
    strong = torch.where(heat == 1, 20.0, -20.0)
    assert float(centre_heatmap_loss(strong, heat)) < float(centre_heatmap_loss(torch.zeros_like(heat), heat))


def test_centre_heatmap_trains_the_backbone() -> None:
    images, samples = batch()
    model = PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                         encoding=dict(type='MultiViewSine'), decoder=dict(depth=1, num_heads=4, mlp_dim=64),
                         num_queries=7, embed_dim=32, code_size=8, pc_range=PC_RANGE,
                         centre_heatmap=dict(weight=1.0)).train()
    losses = model(images, None, samples, mode='loss')
    assert 'loss_heatmap' in losses and bool(torch.isfinite(losses['loss_heatmap']))
    losses['loss_heatmap'].backward()
    assert next(model.backbone.parameters()).grad.abs().sum() > 0
    with pytest.raises(ValueError, match='weight'):
        CentreHeatmapHead(8, 5, weight=-1.0)
