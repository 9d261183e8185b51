"""GTA in the multi-view detector's decoder: object queries posed at their reference points read the camera tokens
through the query-to-camera transform, so the predictions depend on where the cameras are (with the 2D sine keys
alone they do not); the poses are the reference points in metres; it trains. And the ray-relative yaw code."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models import PETRDetector
from vispe.models.petr.box_coder import yaw_from_ray_frame

from .two_camera_batch import PC_RANGE, batch, first_camera_turned, tiny_detector


def detector(decoder_encoding: dict | None = None, **options) -> PETRDetector:
    decoder = dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0)
    if decoder_encoding is not None:
        decoder['encoding'] = decoder_encoding
    return tiny_detector(decoder=decoder, **options)


def test_decoder_gta_trains() -> None:
    images, samples = batch()
    model = detector(dict(type='GTA'))
    assert type(model.decoder_encoding).__name__ == 'GTA' and model.decoder_encoding.depth == 2
    losses = model(images, None, samples, mode='loss')
    sum(value for key, value in losses.items() if 'loss' in key).backward()
    assert model.decoder_encoding.trans_coeff.grad.abs().min() > 0
    assert model.decoder.layers[0].cross_attn.qkv.weight.grad.abs().sum() > 0


def test_query_poses_are_the_reference_points_in_metres() -> None:
    model = detector(dict(type='GTA'))
    reference = torch.tensor([[[0.5, 0.25, 1.0], [0.0, 1.0, 0.5]]])
    poses = model.query_positions(reference).scene.poses
    low, high = torch.tensor(PC_RANGE[:3]), torch.tensor(PC_RANGE[3:])
    metres = low + reference[0] * (high - low)
    assert torch.equal(poses[0, :, :3, :3], torch.eye(3).expand(2, 3, 3))
    assert torch.allclose(poses[0, :, :3, 3], -metres)
    assert torch.equal(poses[0, :, 3], torch.tensor([0.0, 0.0, 0.0, 1.0]).expand(2, 4))


def test_decoder_gta_sees_the_cameras_where_the_2d_sine_does_not() -> None:
    images, samples = batch()
    turned = first_camera_turned(samples)
    for encoding, changes in ((dict(type='GTA'), True), (None, False)):
        model = detector(encoding).eval()
        with torch.no_grad():
            before = model(images, None, samples)['logits']
            after = model(images, None, turned)['logits']
        assert (before - after).abs().max() > 1e-5 if changes else torch.allclose(before, after, atol=1e-6)


def test_decoder_encoding_must_fit_the_decoder() -> None:
    """The camera tokens' geometry is checked as in every host; posed queries need an encoding that reads them
    with attention hooks (an embed-only one would do nothing there, RoPE would fail on the queries)."""
    with pytest.raises(ValueError, match='FourierXYZ requires points and bounds in its positions'):
        detector(dict(type='FourierXYZ'))
    for encoding in ('SinCos2D', 'RoPEAxial', 'CameraRays'):
        with pytest.raises(ValueError, match=f'{encoding} cannot act in PETRDetector decoder: .* Encodings that do: '
                                             f'GTA'):
            detector(dict(type=encoding))


def test_ray_frame_yaw_is_the_local_yaw_turned_by_the_bearing() -> None:
    """A box at bearing β whose heads say α has yaw α + β (golden values)."""
    alpha = torch.tensor([0.3, -2.0, 1.0])
    centres = torch.tensor([[3.0, 3.0], [-2.0, 0.0], [0.0, -5.0]])     # β = π/4, π, −π/2
    bearing = torch.tensor([math.pi / 4, math.pi, -math.pi / 2])
    code = torch.zeros(3, 8)
    code[:, :2], code[:, 6], code[:, 7] = centres, alpha.sin(), alpha.cos()
    turned = yaw_from_ray_frame(code)
    yaw = torch.atan2(turned[:, 6], turned[:, 7])
    expected = torch.remainder(alpha + bearing + math.pi, 2 * math.pi) - math.pi
    assert torch.allclose(yaw, expected, atol=1e-6)
    assert torch.equal(turned[:, :6], code[:, :6])


def test_ray_frame_detector_decodes_in_the_scene_frame() -> None:
    images, samples = batch()
    ego, ray = detector(), detector(yaw_frame='ray')
    ray.load_state_dict(ego.state_dict())
    with torch.no_grad():
        code_ego, code_ray = ego.eval()(images, None, samples)['code'], ray.eval()(images, None, samples)['code']
    assert torch.equal(code_ego[..., :6], code_ray[..., :6])
    assert torch.allclose(yaw_from_ray_frame(code_ego), code_ray, atol=1e-6)
    with pytest.raises(ValueError, match="yaw_frame must be 'ego'"):
        detector(yaw_frame='camera')
