"""3DPPE's point embedding: the points re-project to their pixels at their depths, keys and queries share one
MLP, the depth sources, and the depth losses."""
from __future__ import annotations

import pytest
import torch

import vispe
from vispe.encodings.camera import inverse_sigmoid, pos2posemb3d
from vispe.geometry import CameraGeometry, Positions

from ..geometry.rigs import cameras as rig_cameras

RANGE = (-80.0, -80.0, -20.0, 80.0, 80.0, 20.0)


def build(**options) -> vispe.encodings.PPE3D:
    torch.manual_seed(0)
    return vispe.build_encoding(dict(type='PPE3D', mid_channels=16, with_dcn=False, position_range=RANGE, **options),
                                embed_dim=32, in_channels=24).eval()


def positions(seeds=(0, 1), depth=None) -> Positions:
    cameras = rig_cameras(*seeds)
    return Positions((4, 10), patch_size=(80, 80), device='cpu', num_views=6, camera=CameraGeometry(cameras, depth=depth))


def test_points_reproject_to_their_pixels_at_their_depths() -> None:
    encoding = build()
    pos = positions()
    depth = torch.rand(2, 6, 4, 10) * 40 + 2
    normalised = encoding.points(pos, dict(depth=depth))
    low, high = torch.tensor(RANGE[:3]), torch.tensor(RANGE[3:])
    pixels, projected = pos.camera.cameras.project((normalised * (high - low) + low).flatten(2, 3))
    rows, cols = torch.meshgrid(torch.arange(4) * 80.0, torch.arange(10) * 80.0, indexing='ij')
    expected = torch.stack([cols, rows], -1).reshape(1, 1, 40, 2).expand_as(pixels)
    torch.testing.assert_close(pixels, expected, atol=2e-2, rtol=0)
    torch.testing.assert_close(projected, depth.flatten(2), atol=2e-3, rtol=1e-5)


def test_keys_and_queries_share_one_position_encoder() -> None:
    encoding = build()
    assert encoding.query_embedding is encoding.position_encoder
    state = encoding.state_dict()
    assert torch.equal(state['query_embedding.0.weight'], state['position_encoder.0.weight'])
    reference = torch.rand(7, 3)
    expected = encoding.position_encoder(pos2posemb3d(inverse_sigmoid(reference), 16))
    torch.testing.assert_close(encoding.encode_queries(reference), expected)


def test_the_mix_starts_at_sigma_of_1e_minus_4() -> None:
    assert float(build().depth_net.alpha.detach()) == pytest.approx(0.500025, abs=1e-7)


def test_encode_features_returns_context_and_depth_per_cell() -> None:
    encoding = build()
    pos = positions()
    encoded = encoding.encode_features(torch.randn(12, 24, 4, 10), pos)
    assert encoded.features.shape == (12, 32, 4, 10)
    assert encoded.extras['depth'].shape == (2, 6, 4, 10) and encoded.extras['depth_logits'].shape == (12, 16, 4, 10)
    key_embed = encoding.key_embedding(pos, 2, encoded.extras)
    assert key_embed.shape == (2, 240, 32) and torch.isfinite(key_embed).all()


def test_ground_truth_depth_sources() -> None:
    depth_maps = torch.zeros(1, 6, 320, 800)
    depth_maps[0, :, 0, 0] = 7.5  # the pixel of cell (0, 0) of every view
    predicted = torch.full((1, 6, 4, 10), 3.0)
    pos = positions((0,), depth_maps)
    gt = build(depth_source='gt').cell_depth(pos, predicted)
    hybrid = build(depth_source='hybrid').cell_depth(pos, predicted)
    assert torch.all(gt[..., 0, 0] == 7.5) and torch.all(hybrid[..., 0, 0] == 7.5)
    assert torch.all(gt[..., 1:, :] == RANGE[3]) and torch.all(hybrid[..., 1:, :] == 3.0)
    assert torch.equal(build().cell_depth(pos, predicted), predicted)


def test_ground_truth_source_without_depth_names_the_fix() -> None:
    with pytest.raises(ValueError, match='with_depth=True'):
        build(depth_source='gt').cell_depth(positions((0,)), torch.ones(1, 6, 4, 10))


def test_depth_losses_fall_when_the_prediction_matches() -> None:
    encoding = build().train()
    depth_maps = torch.zeros(2, 6, 320, 800)
    depth_maps[..., ::80, ::80] = 10.0
    pos = positions((0, 1), depth_maps)
    extras = encoding.encode_features(torch.randn(12, 24, 4, 10), pos).extras
    losses = encoding.losses(extras, pos)
    assert set(losses) == {'loss_depth_l1', 'loss_depth_dfl'} and all(v > 0 for v in losses.values())
    sum(losses.values()).backward()
    assert encoding.depth_net.fuse_lambda.grad is not None
    assert encoding.losses(extras, positions((0, 1))) == {}
