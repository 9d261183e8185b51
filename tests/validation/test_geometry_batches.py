"""Geometry that belongs to some samples is never applied to a batch of another size: every encoding that reads
cameras, depth, crop boxes or a scene's boxes and bounds refuses a batch whose sample count differs, naming both
counts and the fix (Positions.check_tokens); crop boxes that are not finite or have no area are refused."""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.attention import Attention
from vispe.encodings import GTA, KPE, VertexRPE
from vispe.geometry import CameraGeometry, Cameras, Positions, SceneGeometry

from ..geometry.rigs import cameras as rig_cameras

MISMATCH = r'the {what} of its positions describe {samples} samples but the tokens have a batch of {batch}; give the ' \
           r'geometry of every sample'


def mismatch(what: str, samples: int, batch: int) -> str:
    return MISMATCH.format(what=what, samples=samples, batch=batch)


def small_rig(batch: int, views: int = 2) -> Cameras:
    intrinsics = torch.tensor([[40.0, 0, 24], [0, 40.0, 16], [0, 0, 1]]).expand(batch, views, 3, 3)
    return Cameras(intrinsics, torch.eye(4).expand(batch, views, 4, 4), (32, 48))


def multiview(batch: int, views: int = 2, grid=(4, 6), **camera) -> Positions:
    return Positions(grid, num_views=views, patch_size=(8, 8), camera=CameraGeometry(small_rig(batch, views), **camera))


@pytest.mark.parametrize('samples, batch', [(1, 2), (2, 1), (3, 2)])
def test_gta_refuses_cameras_of_another_sample_count(samples: int, batch: int) -> None:
    torch.manual_seed(0)
    gta = GTA(head_dim=16, depth=1)
    pos = multiview(samples)
    q = torch.randn(batch, 2, pos.num_tokens, 16)
    with pytest.raises(ValueError, match='GTA: ' + mismatch('cameras', samples, batch)):
        gta.rotate(q, q, pos, pos, 0)
    with pytest.raises(ValueError, match=r'GTA in attention \(the queries\): ' + mismatch('cameras', samples, batch)):
        Attention(32, num_heads=2)(torch.randn(batch, pos.num_tokens, 32), pos, gta)


def test_gta_of_matching_cameras_still_runs() -> None:
    pos = multiview(2)
    out = Attention(32, num_heads=2)(torch.randn(2, pos.num_tokens, 32), pos, GTA(head_dim=16, depth=1))
    assert out.shape == (2, pos.num_tokens, 32) and torch.isfinite(out).all()


@pytest.mark.parametrize('config', ['PETR', 'MultiViewSine', 'CameraRays'])
def test_camera_encodings_refuse_one_rig_for_a_batch_of_two(config: str) -> None:
    torch.manual_seed(0)
    encoding = vispe.build_encoding(config, embed_dim=32)
    pos = multiview(1)
    with pytest.raises(ValueError, match=f'{config}: ' + mismatch('cameras', 1, 2)):
        encoding.embed(torch.zeros(2, pos.num_tokens, 32), pos)
    with pytest.raises(ValueError, match=f'{config}: ' + mismatch('cameras', 1, 2)):
        encoding.key_embedding(pos, 2, {})


def test_ppe3d_refuses_one_rig_for_a_batch_of_two() -> None:
    encoding = vispe.build_encoding(dict(type='PPE3D', mid_channels=16, with_dcn=False), embed_dim=32,
                                    in_channels=8)
    pos = multiview(1)
    with pytest.raises(ValueError, match='PPE3D: ' + mismatch('cameras', 1, 2)):
        encoding.key_embedding(pos, 2, {'depth': torch.ones(1, 2, 4, 6)})


def test_depth_of_another_sample_count_than_the_cameras_is_refused() -> None:
    with pytest.raises(ValueError, match=r'depth must be \(B, V, H, W\) = \(2, 2, 32, 48\): one map per sample and '
                                         r'view .* got \(1, 2, 32, 48\)'):
        CameraGeometry(small_rig(2), depth=torch.zeros(1, 2, 32, 48))


def crop_positions(samples: int, boxes: torch.Tensor, grid=(2, 3)) -> Positions:
    intrinsics = torch.tensor([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]]).expand(samples, 1, 3, 3)
    cameras = Cameras(intrinsics, torch.eye(4).expand(samples, 1, 4, 4), (480, 640))
    return Positions(grid, camera=CameraGeometry(cameras, crop_boxes=boxes))


def test_kpe_refuses_one_crop_box_for_two_cameras() -> None:
    with pytest.raises(ValueError, match=r'crop_boxes has 1 boxes but the cameras describe 2 samples; give one crop '
                                         r'box per sample'):
        crop_positions(2, torch.tensor([[10.0, 10.0, 50.0, 50.0]]))


@pytest.mark.parametrize('mode', ['dense', 'center-corner'])
def test_kpe_refuses_one_crop_for_a_batch_of_two(mode: str) -> None:
    encoding = KPE(embed_dim=8, num_freqs=2, mode=mode)
    pos = crop_positions(1, torch.tensor([[10.0, 10.0, 50.0, 50.0]]))
    with pytest.raises(ValueError, match='KPE: ' + mismatch('cameras', 1, 2)):
        encoding.embed(torch.zeros(2, 6, 8), pos)


@pytest.mark.parametrize('box, message', [
    ([10.0, math.nan, 50.0, 50.0], 'has NaN or infinite corners; give'),
    ([10.0, 10.0, math.inf, 50.0], 'has NaN or infinite corners'),
    ([-math.inf, 10.0, 50.0, 50.0], 'has NaN or infinite corners'),
    ([50.0, 10.0, 10.0, 50.0], r'has zero or negative size; give x1 > x0'),
    ([10.0, 50.0, 50.0, 10.0], 'has zero or negative size'),
    ([10.0, 10.0, 10.0, 50.0], 'has zero or negative size'),
])
def test_kpe_refuses_crop_boxes_without_a_finite_area(box: list[float], message: str) -> None:
    encoding = KPE(embed_dim=8, num_freqs=2)
    pos = crop_positions(1, torch.tensor([box]))
    with pytest.raises(ValueError, match=r'Crop 0 \[.*\] ' + message):
        encoding.embed(torch.zeros(1, 6, 8), pos)


def test_vertex_rpe_refuses_boxes_of_one_scene_for_a_batch_of_two() -> None:
    boxes = torch.tensor([[[0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]] * 3])
    pos_q = Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes))
    pos_k = Positions(coords=torch.rand(2, 5, 3))
    attention = Attention(16, num_heads=2, num_kv_heads=1)
    with pytest.raises(ValueError, match=r'VertexRPE in attention \(the queries\): ' + mismatch('boxes', 1, 2)):
        attention(torch.zeros(2, 3, 16), pos_q, VertexRPE(num_heads=2), memory=torch.zeros(2, 5, 16), pos_k=pos_k)


def test_point_encodings_refuse_bounds_of_one_scene_for_a_batch_of_two() -> None:
    encoding = vispe.build_encoding('SinCosXYZ', embed_dim=12)
    pos = Positions(coords=torch.rand(5, 3), scene=SceneGeometry(bounds=torch.tensor([[[0.0] * 3, [1.0] * 3]])))
    with pytest.raises(ValueError, match='SinCosXYZ: ' + mismatch('bounds', 1, 2)):
        encoding.embed(torch.zeros(2, 5, 12), pos)
