"""PETR and 3DPPE against their authors' code: outputs of megvii-research/PETR and drilistbox/3DPPE recorded once
on the same cameras and weights (tests/data/README_parity.md says how; no reference code is in the repository)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import vispe
from vispe.encodings.camera import multiview_sine_embedding, pos2posemb3d
from vispe.encodings.ppe3d import categorical_depth, depth_losses, fuse_depth
from vispe.encodings.ppe3d.depth_net import uniform_depth_bins
from vispe.geometry import CameraGeometry, Cameras, Positions
from vispe.geometry.cameras import viewpad

DATA = Path(__file__).resolve().parents[1] / 'data'
PETR_GOLDEN = torch.load(DATA / 'petr_parity.pt', weights_only=True)
PPE3D_GOLDEN = torch.load(DATA / 'ppe3d_parity.pt', weights_only=True)
TOLERANCE = dict(atol=1e-5, rtol=0)


def recipe_weights(golden: dict) -> dict[str, torch.Tensor]:
    """The reference's seeded weights, rebuilt and checked against their stored sums and first values."""
    weights = {}
    for key, recipe in golden['weights']['recipe'].items():
        array = np.random.RandomState(recipe['seed']).uniform(recipe['low'], recipe['high'], size=recipe['shape'])
        tensor = torch.from_numpy(array.astype(np.float32))
        check = golden['weights']['check'][key]
        assert abs(float(tensor.double().sum()) - check['sum']) < 1e-6 * max(1.0, abs(check['sum'])), key
        torch.testing.assert_close(tensor.flatten()[:8], check['first'])
        weights[key] = tensor
    return weights


def golden_cameras(golden: dict) -> Cameras:
    """The reference's rig: K and ``lidar2cam = viewpad(K)^-1 · lidar2img`` of its float64 ``lidar2img``."""
    cameras = golden['cameras']
    intrinsics = cameras['intrinsics_f64']
    lidar2cam = torch.linalg.inv(viewpad(intrinsics)) @ cameras['lidar2img_f64']
    return Cameras(intrinsics[None], lidar2cam[None], tuple(golden['config']['pad_hw']))


def golden_positions(golden: dict, case: str) -> Positions:
    valid = ~golden['cases'][case]['masks']
    return Positions(tuple(golden['config']['feat_hw']), patch_size=(16, 16), device='cpu', valid_mask=valid, num_views=6, camera=CameraGeometry(golden_cameras(golden)))


def token_rows(golden: dict) -> torch.Tensor:
    """Row of each stored token (camera, h, w) in vispe's view-major (B, V·h·w, C) layout."""
    height, width = golden['config']['feat_hw']
    tokens = golden['tokens']
    return tokens[:, 0] * height * width + tokens[:, 1] * width + tokens[:, 2]


def test_cameras_rebuild_the_references_img2lidar() -> None:
    cameras = golden_cameras(PETR_GOLDEN)
    torch.testing.assert_close(cameras.img2lidar[0], PETR_GOLDEN['cameras']['img2lidar_f32'], atol=1e-7, rtol=2e-7)
    torch.testing.assert_close(cameras.lidar2img[0], PETR_GOLDEN['cameras']['lidar2img_f32'])


@pytest.mark.parametrize('case', ['nopad', 'padded'])
def test_multiview_sine_and_its_adapter_match(case) -> None:
    golden, rows = PETR_GOLDEN, token_rows(PETR_GOLDEN)
    valid = ~golden['cases'][case]['masks']
    sine = multiview_sine_embedding(valid, 128).permute(0, 1, 3, 4, 2).flatten(1, 3)[0]
    torch.testing.assert_close(sine[rows], golden['cases'][case]['sine_tokens'], **TOLERANCE)
    encoding = vispe.build_encoding('MultiViewSine', embed_dim=256)
    encoding.load_state_dict(recipe_weights(golden), strict=False)
    with torch.no_grad():
        adapted = encoding.key_embedding(golden_positions(golden, case), 1, {})[0]
    torch.testing.assert_close(adapted[rows], golden['cases'][case]['adapt_tokens'], **TOLERANCE)


@pytest.mark.parametrize('mode', ['lid', 'ud'])
def test_petr_frustum_ray_embedding_and_keys_match(mode) -> None:
    golden, rows = PETR_GOLDEN, token_rows(PETR_GOLDEN)
    config = golden['config']
    petr = vispe.build_encoding(dict(type='PETR', depth_num=config['depth_num'], depth_start=config['depth_start'],
                                     position_range=config['position_range'], depth_mode=mode.upper()),
                                embed_dim=config['embed_dims'])
    petr.load_state_dict(recipe_weights(golden))
    torch.testing.assert_close(petr.depths, golden[mode]['bins'])
    pos = golden_positions(golden, 'padded')
    with torch.no_grad():
        frustum = petr.frustum(pos)[0].flatten(0, 2)
        torch.testing.assert_close(frustum[rows], golden[mode]['frustum_norm_tokens'], atol=1e-6, rtol=0)
        torch.testing.assert_close(petr.ray_embedding(pos)[0, rows], golden[mode]['pe3d_tokens'], **TOLERANCE)
        key_pos = petr.key_embedding(pos, 1, {})[0]
    torch.testing.assert_close(key_pos[rows], golden[mode]['key_pos_tokens_padded'], **TOLERANCE)


def test_petr_query_embedding_matches() -> None:
    golden = PETR_GOLDEN
    petr = vispe.build_encoding('PETR', embed_dim=256)
    petr.load_state_dict(recipe_weights(golden))
    reference = golden['weights']['reference_points'][golden['queries']['index']]
    torch.testing.assert_close(pos2posemb3d(reference), golden['queries']['pos2posemb3d'], **TOLERANCE)
    with torch.no_grad():
        torch.testing.assert_close(petr.encode_queries(reference), golden['queries']['query_embeds'], **TOLERANCE)


def ppe3d_reference_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The depth logits (rebuilt from their recipe and checked) and the direct depth the reference's head read."""
    recipe = PPE3D_GOLDEN['inputs']['depth_logits_recipe']
    logits = torch.from_numpy(np.random.RandomState(recipe['seed']).normal(
        recipe['loc'], recipe['scale'], size=recipe['shape']).astype(np.float32))
    torch.testing.assert_close(logits.flatten()[:8], PPE3D_GOLDEN['inputs']['depth_logits_check']['first'])
    return logits, PPE3D_GOLDEN['inputs']['depth_direct']


def test_ppe3d_hybrid_depth_matches() -> None:
    golden = PPE3D_GOLDEN
    logits, direct = ppe3d_reference_inputs()
    bins = uniform_depth_bins(16, 1.0, golden['config']['position_range'][3])
    torch.testing.assert_close(bins, golden['weights']['depth_bins'])
    categorical = categorical_depth(logits, bins)
    torch.testing.assert_close(categorical[:, 0], golden['depth']['categorical'], **TOLERANCE)
    fused = fuse_depth(direct, categorical, golden['weights']['fuse_lambda'])
    torch.testing.assert_close(fused[:, 0], golden['depth']['fused'], **TOLERANCE)


def build_ppe3d() -> vispe.encodings.PPE3D:
    config = PPE3D_GOLDEN['config']
    encoding = vispe.build_encoding(dict(type='PPE3D', depth_num=config['depth_num'], with_dcn=False,
                                         position_range=config['position_range']), embed_dim=256, in_channels=32)
    missing, unexpected = encoding.load_state_dict(recipe_weights(PPE3D_GOLDEN), strict=False)
    assert not unexpected and all(key.startswith(('depth_net.', 'query_embedding.')) for key in missing)
    return encoding


@pytest.mark.parametrize('case', ['nopad', 'padded'])
def test_ppe3d_points_and_keys_match(case) -> None:
    golden, rows = PPE3D_GOLDEN, token_rows(PPE3D_GOLDEN)
    encoding = build_ppe3d()
    extras = dict(depth=golden['depth']['fused'][None])
    pos = golden_positions(golden, case)
    with torch.no_grad():
        points = encoding.points(pos, extras)[0]
        torch.testing.assert_close(points, golden['points_norm'], atol=1e-6, rtol=0)
        key_pos = encoding.key_embedding(pos, 1, extras)[0]
    torch.testing.assert_close(key_pos[rows], golden['cases'][case]['key_pos_tokens'], **TOLERANCE)


def test_ppe3d_queries_go_through_the_shared_encoder() -> None:
    golden = PPE3D_GOLDEN
    encoding = build_ppe3d()
    reference = golden['weights']['reference_points'][golden['queries']['index']]
    with torch.no_grad():
        torch.testing.assert_close(encoding.encode_queries(reference), golden['queries']['query_embeds'], **TOLERANCE)


def test_ppe3d_depth_losses_match() -> None:
    golden = PPE3D_GOLDEN
    logits, direct = ppe3d_reference_inputs()
    fused = golden['depth']['fused']
    targets = golden['depth_loss']['target'] * golden['depth_loss']['target_mask']
    losses = depth_losses(logits, fused, targets, 1.0, golden['config']['position_range'][3])
    torch.testing.assert_close(losses['loss_depth_l1'], golden['depth_loss']['loss_depth'], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(losses['loss_depth_dfl'], golden['depth_loss']['loss_dfl'], atol=1e-6, rtol=1e-5)
