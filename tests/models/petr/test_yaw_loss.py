"""The von Mises yaw loss: the yaw's negative log-likelihood (golden values from its formula), whose gradient at the
L1 loss's fixed point (channels at their median 0) still points to the objects' mean direction; selected by
PETRDetector(yaw_loss=...)."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models.petr.criterion import von_mises_loss

from .two_camera_batch import batch, tiny_detector


def test_von_mises_loss_is_the_negative_log_likelihood() -> None:
    theta, mu, kappa = 0.5, 1.2, 3.0
    predicted = torch.tensor([[kappa * math.sin(mu), kappa * math.cos(mu)]])
    target = torch.tensor([[math.sin(theta), math.cos(theta)]])
    expected = math.log(torch.special.i0(torch.tensor(kappa)).item()) - kappa * math.cos(theta - mu)
    assert von_mises_loss(predicted, target).item() == pytest.approx(expected, rel=1e-5)


def test_gradient_at_the_median_points_to_the_mean_yaw_where_l1_gives_none() -> None:
    """Two objects of yaws 1.0 and -0.4 (sines 0.84 and -0.39): at channels (0, 0), L1's sign gradients on the sine
    cancel, though the mean yaw's sine is positive; the von Mises gradient is minus the sum of the targets' unit
    vectors, magnitudes included."""
    yaws = torch.tensor([1.0, -0.4])
    target = torch.stack([yaws.sin(), yaws.cos()], -1)
    predicted = torch.zeros(2, 2, requires_grad=True)
    von_mises_loss(predicted, target).sum().backward()
    assert torch.allclose(predicted.grad.sum(0), -target.sum(0), atol=1e-6)
    l1 = torch.full((2, 2), 1e-9, requires_grad=True)
    (l1 - target).abs().sum().backward()
    assert l1.grad.sum(0)[0] == 0 and predicted.grad.sum(0)[0] == pytest.approx(-(math.sin(1.0) + math.sin(-0.4)))


def test_detector_trains_with_the_von_mises_loss() -> None:
    images, samples = batch()
    detector = tiny_detector(yaw_loss='von_mises')
    losses = detector(images, None, samples, mode='loss')
    assert torch.isfinite(losses['loss_bbox'])
    losses['loss_bbox'].backward()
    assert detector.reg_branches[0][-1].weight.grad[6:8].abs().sum() > 0
    with pytest.raises(ValueError, match="yaw_loss must be 'l1'"):
        tiny_detector(yaw_loss='cosine')


def test_matching_reads_a_von_mises_yaw_by_its_direction() -> None:
    """Two queries at one target: the one pointing the right way wins, however long the other's yaw vector."""
    from vispe.models.petr.criterion import HungarianMatcher3D
    target = torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])          # yaw 0
    code = target.repeat(2, 1)
    code[0, 6:8] = torch.tensor([0.0, 8.0])                                      # right way, long vector
    code[1, 6:8] = torch.tensor([0.3, 0.9])                                      # 0.32 rad off, short
    logits = torch.zeros(2, 1)
    labels = torch.zeros(1, dtype=torch.int64)
    assert HungarianMatcher3D(unit_yaw=True)(logits, code, labels, target)[0].tolist() == [0]
    assert HungarianMatcher3D()(logits, code, labels, target)[0].tolist() == [1]
