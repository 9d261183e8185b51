"""The multi-view detector's optional encoder: GTA between the views' tokens before the decoder makes the
predictions depend on where the cameras are (with the 2D sine encoding alone they do not), it trains, and missing
views are not attended to."""
from __future__ import annotations

import torch

from vispe.models import PETRDetector
from vispe.models.multiview_encoder import MultiViewEncoder

from .two_camera_batch import PC_RANGE, batch, first_camera_turned


def gta_detector(encoder_encoding: dict | None = None) -> PETRDetector:
    torch.manual_seed(0)
    return PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                        encoding=dict(type='MultiViewSine'), num_queries=7, embed_dim=32, code_size=8,
                        pc_range=PC_RANGE, decoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0),
                        encoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0,
                                     encoding=encoder_encoding or dict(type='GTA')))


def test_encoder_runs_gta_over_all_views_and_trains() -> None:
    images, samples = batch()
    detector = gta_detector()
    assert isinstance(detector.encoder, MultiViewEncoder) and type(detector.encoder_encoding).__name__ == 'GTA'
    assert detector.encoder_encoding.depth == 2
    losses = detector(images, None, samples, mode='loss')
    sum(value for key, value in losses.items() if 'loss' in key).backward()
    assert detector.encoder_encoding.trans_coeff.grad is not None
    assert detector.encoder.layers[0].attn.qkv.weight.grad.abs().sum() > 0


def test_gta_encoder_sees_the_cameras_where_nope_does_not() -> None:
    images, samples = batch()
    turned = first_camera_turned(samples)
    for encoding, changes in ((dict(type='GTA'), True), (dict(type='NoPE'), False)):
        detector = gta_detector(encoding).eval()
        with torch.no_grad():
            before = detector(images, None, samples)['logits']
            after = detector(images, None, turned)['logits']
        assert (before - after).abs().max() > 1e-5 if changes else torch.allclose(before, after, atol=1e-6)


def test_missing_views_are_not_attended_to() -> None:
    images, samples = batch()
    masks = torch.ones(2, 2, 32, 32, dtype=torch.bool)
    masks[:, 1] = False
    detector = gta_detector().eval()
    noisy = images.clone()
    noisy[:, 1] = torch.randn_like(noisy[:, 1]) * 5
    with torch.no_grad():
        first = detector(images, masks, samples)['logits']
        second = detector(noisy, masks, samples)['logits']
    assert torch.allclose(first, second, atol=1e-5)
