"""PETR's ray embedding and the multi-view sine: defining properties and golden values by hand."""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.encodings.camera import inverse_sigmoid, multiview_sine_embedding, pos2posemb3d
from vispe.geometry import CameraGeometry, Positions, depth_bins

from ..geometry.rigs import cameras as rig_cameras


def memory_positions(cameras, feat=(4, 10), valid=None) -> Positions:
    return Positions(feat, patch_size=(16, 16), device='cpu', valid_mask=valid, num_views=cameras.num_views, camera=CameraGeometry(cameras))


def test_inverse_sigmoid_clamps_as_mmdet() -> None:
    x = torch.tensor([-1.0, 0.0, 0.5, 0.9, 1.0, 2.0])
    expected = torch.tensor([math.log(1e-5), math.log(1e-5), 0.0, math.log(9.0), -math.log(1e-5), -math.log(1e-5)])
    torch.testing.assert_close(inverse_sigmoid(x), expected)


def test_pos2posemb3d_orders_y_x_z_and_interleaves_by_hand() -> None:
    # num_feats 2: one frequency (tau = 1); x = 0.25 -> angle pi/2, y = z = 0.
    out = pos2posemb3d(torch.tensor([[0.25, 0.0, 0.0]]), num_feats=2)
    torch.testing.assert_close(out, torch.tensor([[0.0, 1.0, 1.0, 0.0, 0.0, 1.0]]), atol=1e-6, rtol=0)


def test_multiview_sine_puts_sines_then_cosines_per_axis_as_the_reference() -> None:
    # 2 views of one cell: camera positions 1/2 and 2/2 of 2pi; rows and columns 2pi. num_feats 4: taus 1, 1, 100, 100.
    table = multiview_sine_embedding(torch.ones(1, 2, 1, 1, dtype=torch.bool), 4)[0, :, :, 0, 0]

    def axis(angle: float) -> list[float]:
        return [math.sin(angle), math.sin(angle / 100), math.cos(angle), math.cos(angle / 100)]
    two_pi = 2 * math.pi * (1 / (1 + 1e-6))
    expected = torch.tensor([axis(math.pi * 2 / (2 + 1e-6)) + axis(two_pi) * 2,
                             axis(2 * math.pi * 2 / (2 + 1e-6)) + axis(two_pi) * 2])
    torch.testing.assert_close(table, expected, atol=1e-5, rtol=0)


def test_multiview_sine_ignores_padding_and_missing_views() -> None:
    valid = torch.ones(1, 3, 2, 3, dtype=torch.bool)
    valid[0, 1] = False  # a missing view
    valid[0, :, :, 2] = False  # a padded column
    table = multiview_sine_embedding(valid, 8)
    full = multiview_sine_embedding(torch.ones(1, 2, 2, 2, dtype=torch.bool), 8)
    torch.testing.assert_close(table[:, [0, 2], :, :, :2], full)


@pytest.mark.parametrize('mode', ['LID', 'UD'])
def test_frustum_points_reproject_to_their_pixels_and_bin_depths(mode) -> None:
    cameras = rig_cameras(0, 1)
    petr = vispe.build_encoding(dict(type='PETR', depth_mode=mode, position_range=(-80, -80, -20, 80, 80, 20)),
                                embed_dim=32)
    pos = memory_positions(cameras, (4, 10))
    normalised = petr.frustum(pos)
    points = normalised * 160 + torch.tensor([-80.0, -80.0, -20.0])
    points[..., 2] = normalised[..., 2] * 40 - 20
    pixels, depth = cameras.project(points.flatten(2, 4))
    rows, cols = torch.meshgrid(torch.arange(4) * 320 / 4, torch.arange(10) * 800 / 10, indexing='ij')
    expected = torch.stack([cols, rows], -1)[:, :, None].expand(4, 10, 64, 2).reshape(-1, 2)
    torch.testing.assert_close(pixels, expected.expand_as(pixels), atol=2e-2, rtol=0)
    bins = depth_bins(64, 1.0, 80.0, mode).expand(40, 64).reshape(-1)
    torch.testing.assert_close(depth, bins.expand_as(depth), atol=1e-3, rtol=1e-5)


def test_lid_bins_match_petr_formula() -> None:
    bins = depth_bins(64, 1.0, 61.2, 'LID')
    assert bins[0] == 1.0
    torch.testing.assert_close(bins[1], torch.tensor(1.0 + 60.2 / (64 * 65) * 2))
    assert bins[-1] < 61.2


@pytest.mark.parametrize('config', [dict(type='PETR'), dict(type='PETR', with_multiview=False),
                                    dict(type='PETR', use_inverse_sigmoid=False), dict(type='MultiViewSine')],
                         ids=str)
def test_key_and_query_embeddings_have_token_shapes_and_gradients(config) -> None:
    cameras = rig_cameras(0, 1)
    encoding = vispe.build_encoding(config, embed_dim=32)
    key_embed = encoding.key_embedding(memory_positions(cameras), 2, {})
    queries = encoding.encode_queries(torch.rand(5, 3))
    assert key_embed.shape == (2, 6 * 4 * 10, 32) and queries.shape == (5, 32)
    (key_embed.sum() + queries.sum()).backward()
    for name, parameter in encoding.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_each_sample_keeps_its_own_rig() -> None:
    petr = vispe.build_encoding('PETR', embed_dim=32)
    both = petr.key_embedding(memory_positions(rig_cameras(0, 1)), 2, {})
    second = petr.key_embedding(memory_positions(rig_cameras(1)), 1, {})
    torch.testing.assert_close(both[1:], second)
    assert not torch.allclose(both[0], both[1])


def test_embed_adds_the_key_embedding_to_multiview_tokens() -> None:
    petr = vispe.build_encoding('PETR', embed_dim=32)
    pos = memory_positions(rig_cameras(0))
    tokens = torch.randn(1, 240, 32)
    torch.testing.assert_close(petr.embed(tokens, pos), tokens + petr.key_embedding(pos, 1, {}))


def test_camera_encodings_refuse_positions_without_cameras() -> None:
    petr = vispe.build_encoding('PETR', embed_dim=32)
    with pytest.raises(ValueError, match='PETR needs cameras in its positions, which carry grid'):
        petr.embed(torch.zeros(1, 40, 32), Positions((4, 10), patch_size=(16, 16)))


def test_camera_encodings_are_listed_as_needing_cameras() -> None:
    table = {info.name: info for info in vispe.list_encodings()}
    assert table['PETR'].requires == ('grid', 'cameras') and table['MultiViewSine'].family == 'camera'
    assert 'PETR' not in {info.name for info in vispe.list_encodings(image_only=True)}


def test_position_range_must_hold_the_depth_bins() -> None:
    with pytest.raises(ValueError, match='position_range'):
        vispe.build_encoding(dict(type='PETR', position_range=(0, -1, -1, 0.5, 1, 1)), embed_dim=32)


def test_ray_inputs_are_built_once_per_rig() -> None:
    """PETR caches its MLP input per rig: equal cameras built anew hit the cache (the same embedding bit for
    bit), another rig builds again, and the cached values are those of a fresh build."""
    from vispe.engine.benchmark_detector import table_builds
    petr = vispe.build_encoding('PETR', embed_dim=32)
    first = petr.key_embedding(memory_positions(rig_cameras(0, 1)), 2, {})
    assert table_builds(petr) == 2  # the camera-independent frustum and this rig's MLP input
    again = petr.key_embedding(memory_positions(rig_cameras(0, 1)), 2, {})
    assert table_builds(petr) == 2 and torch.equal(first, again)
    swapped = petr.key_embedding(memory_positions(rig_cameras(1, 0)), 2, {})
    assert table_builds(petr) == 3 and torch.equal(swapped[0], first[1])
    fresh = vispe.build_encoding('PETR', embed_dim=32)
    fresh.load_state_dict(petr.state_dict())
    assert torch.equal(fresh.key_embedding(memory_positions(rig_cameras(0, 1)), 2, {}), first)
