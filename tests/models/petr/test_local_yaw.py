"""The local-yaw auxiliary head: each object's yaw relative to the ray from each camera that sees it, binned at its
projected centre cell (golden values from two cameras looking along +x and -x); the loss is the cross-entropy there;
the detector trains it and does not run it at inference."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.geometry import Cameras
from vispe.models.petr.local_yaw import LocalYawHead, local_yaw_targets

from .two_camera_batch import batch, tiny_detector


def cameras_of(samples: list[dict]) -> Cameras:
    return Cameras.from_batch(samples, 'cpu')


def test_targets_are_the_yaw_relative_to_each_cameras_ray() -> None:
    _, samples = batch()
    boxes = [torch.tensor([[5.0, 0.0, 1.5, 1.0, 1.0, 1.0, 0.0],              # ahead of camera 0, α = 0
                           [5.0, 2.0, 1.5, 1.0, 1.0, 1.0, math.atan2(2, 5) + math.pi / 4 + 0.1],  # α = π/4 + 0.1
                           [-5.0, 0.0, 1.5, 1.0, 1.0, 1.0, 0.3]]),             # behind: camera 1, α = 0.3 − π
             torch.zeros(0, 7)]
    flat, bins, keep = local_yaw_targets(cameras_of(samples), boxes, (4, 4), 8, 8)
    assert keep.shape == (2, 2, 3)
    assert keep[0].tolist() == [[True, True, False], [False, False, True]] and not keep[1].any()
    assert bins[0, 0, :2].tolist() == [0, 1]
    assert bins[0, 1, 2].item() == math.floor((0.3 + math.pi) / (2 * math.pi / 8))
    pixels, _ = cameras_of(samples).project(torch.stack([boxes[0][:, :3], boxes[0][:, :3]]))
    cell = torch.floor(pixels[0, 0, 0] / 8)
    assert flat[0, 0, 0].item() == int(cell[1] * 4 + cell[0])


def test_loss_is_the_cross_entropy_at_the_centre_cells() -> None:
    _, samples = batch()
    boxes = [torch.tensor([[5.0, 0.0, 1.5, 1.0, 1.0, 1.0, 0.0]]), torch.tensor([[5.0, 0.0, 1.5, 1.0, 1.0, 1.0, 0.0]])]
    head = LocalYawHead(in_channels=4, bins=8)
    logits = torch.zeros(4, 8, 4, 4)
    assert head.loss(logits, cameras_of(samples), boxes, 8).item() == pytest.approx(math.log(8))
    flat, _, _ = local_yaw_targets(cameras_of(samples), boxes, (4, 4), 8, 8)
    row, col = divmod(int(flat[0, 0, 0]), 4)
    logits[[0, 2], 0, row, col] = 10.0                      # bin 0 at the centre cell of view 0 of both samples
    assert head.loss(logits, cameras_of(samples), boxes, 8).item() < 1e-3
    valid = torch.ones(2, 2, 4, 4, dtype=torch.bool)
    valid[:, 0, row, col] = False
    assert head.loss(torch.zeros(4, 8, 4, 4), cameras_of(samples), boxes, 8, valid).item() == 0.0
    with pytest.raises(ValueError, match='whole number >= 2'):
        LocalYawHead(4, bins=1)


def test_detector_trains_the_head_and_skips_it_at_inference() -> None:
    images, samples = batch()
    detector = tiny_detector(local_yaw=dict(bins=8))
    losses = detector(images, None, samples, mode='loss')
    losses['loss_local_yaw'].backward()
    assert detector.local_yaw.layers[-1].weight.grad.abs().sum() > 0
    assert sum(p.grad.abs().sum() for p in detector.backbone.parameters() if p.grad is not None) > 0
    detector.eval()
    with torch.no_grad():
        assert detector.predict_sets(images, None, samples)['local_yaw'] is None
