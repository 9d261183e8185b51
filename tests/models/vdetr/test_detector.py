"""The point detector: outputs of every encoding, box refinement across layers, the proposal stage, rotated boxes,
bad input."""
from __future__ import annotations

import sys

import pytest
import torch
from mmengine.config import Config

from vispe.encodings import VertexRPE
from vispe.geometry import fpsample_backend, point_sampling
from vispe.models.vdetr import VDETR, VDETRHead
from vispe.registry import MODELS

from ...conftest import REPO_ROOT

SMALL = dict(backbone=dict(in_channels=3, channels=(16, 32), num_samples=64, radius=0.4, group_size=8),
             embed_dim=32, encoder=dict(depth=1, num_heads=2, mlp_dim=32), num_queries=16)


def small_detector(encoding: str | dict, depth: int = 3, num_yaw_bins: int = 0) -> VDETR:
    torch.manual_seed(0)
    encoding = dict(type=encoding) if isinstance(encoding, str) else encoding
    return VDETR(num_classes=3, decoder=dict(depth=depth, num_heads=2, mlp_dim=32, encoding=encoding),
                 num_yaw_bins=num_yaw_bins, **SMALL)


def scenes(batch: int = 2, points: int = 256) -> tuple[torch.Tensor, list[dict]]:
    generator = torch.Generator().manual_seed(0)
    xyz = torch.rand(batch, points, 3, generator=generator) * torch.tensor([4.0, 4.0, 2.0])
    colour = torch.rand(batch, points, 3, generator=generator)
    samples = [dict(gt_boxes=torch.tensor([[1.0, 1.0, 0.5, 0.6, 0.8, 1.0, 0.0], [3.0, 2.0, 0.3, 1.0, 0.5, 0.6, 0.0]]),
                    gt_labels=torch.tensor([0, 2]), scene_id=f'scene{i}') for i in range(batch)]
    return torch.cat([xyz, colour], dim=-1), samples


@pytest.mark.parametrize('encoding', ['VertexRPE', 'FourierXYZ', 'SinCosXYZ', 'NoPE',
                                      dict(type='TriPlane', channels=4, resolution=8, knn=4, centered=True)],
                         ids=lambda encoding: encoding if isinstance(encoding, str) else encoding['type'])
def test_every_point_encoding_trains_and_predicts(encoding: str | dict) -> None:
    model = small_detector(encoding)
    points, samples = scenes()
    losses = model(points, samples, mode='loss')
    assert {'loss_ce', 'loss_giou', 'd0.loss_center', 'd1.loss_size', 'loss_objectness'} <= set(losses)
    sum(losses.values()).backward()
    assert model.decoder.class_head[0].weight.grad.abs().sum() > 0
    results = model.eval()(points, samples, mode='predict')
    assert len(results) == 2 and results[1]['scene_id'] == 'scene1'
    assert results[0]['boxes'].shape[1] == 7 and results[0]['scores'].shape == results[0]['labels'].shape
    assert (results[0]['boxes'][:, 3:6] > 0).all()


@pytest.mark.parametrize('num_yaw_bins', [0, 12])
def test_each_layer_reads_the_boxes_of_the_layer_before(num_yaw_bins: int) -> None:
    model = small_detector(dict(type='VertexRPE', box_frame=bool(num_yaw_bins)), num_yaw_bins=num_yaw_bins).eval()
    seen = []
    original = VertexRPE.logits_bias

    def record(self, q, k, pos_q, pos_k, layer_idx):
        seen.append((layer_idx, pos_q.scene.boxes.clone()))
        return original(self, q, k, pos_q, pos_k, layer_idx)
    points, _ = scenes()
    try:
        VertexRPE.logits_bias = record
        with torch.no_grad():
            outputs = model(points)
    finally:
        VertexRPE.logits_bias = original
    assert [layer for layer, _ in seen] == [0, 1, 2]
    for layer in (1, 2):
        assert torch.equal(seen[layer][1], outputs['boxes'][layer - 1])
    assert not torch.equal(seen[1][1], seen[2][1])
    # Rotated: the proposals and every layer's boxes carry the yaw of their heading code into the encoding.
    assert (seen[0][1][..., 6] != 0).any().item() is bool(num_yaw_bins)
    assert (outputs['boxes'][..., 6] != 0).any().item() is bool(num_yaw_bins)
    assert ('yaw_code' in outputs) is bool(num_yaw_bins)


@pytest.mark.parametrize('encoding', [dict(type='VertexRPE', box_frame=True), dict(type='FourierXYZ')],
                         ids=lambda encoding: encoding['type'])
def test_rotated_detector_learns_headings_and_predicts_yawed_boxes(encoding: dict) -> None:
    model = small_detector(encoding, num_yaw_bins=12)
    points, samples = scenes()
    yawed = [dict(sample, gt_boxes=sample['gt_boxes'] + torch.tensor([0, 0, 0, 0, 0, 0, 1.1])) for sample in samples]
    losses = model(points, yawed, mode='loss')
    assert {'loss_yaw_cls', 'd1.loss_yaw_reg', 'loss_proposal_yaw_cls', 'loss_proposal_yaw_reg'} <= set(losses)
    sum(losses.values()).backward()
    heading_rows = model.decoder.box_head[-1].weight.grad[6:]
    assert heading_rows.abs().sum() > 0 and model.proposal_head[-1].weight.grad[7:].abs().sum() > 0
    results = model.eval()(points, yawed, mode='predict')
    assert results[0]['boxes'].shape[1] == 7 and (results[0]['boxes'][:, 6] != 0).all()
    assert ((results[0]['boxes'][:, 6] >= -torch.pi) & (results[0]['boxes'][:, 6] < torch.pi)).all()


@pytest.mark.parametrize('num_yaw_bins', [0, 12])
def test_scenes_without_objects_train(num_yaw_bins: int) -> None:
    model = small_detector('VertexRPE', depth=2, num_yaw_bins=num_yaw_bins)
    points, samples = scenes()
    samples[0] = dict(samples[0], gt_boxes=torch.zeros(0, 7), gt_labels=torch.zeros(0, dtype=torch.int64))
    losses = model(points, samples, mode='loss')
    assert all(torch.isfinite(value) for value in losses.values())
    sum(losses.values()).backward()


def test_axis_aligned_parameters_keep_their_order() -> None:
    """Seeded initialisation and saved optimizer state depend on the order the modules are built in."""
    names = [name.split('.')[0] for name in small_detector('NoPE').state_dict()]
    assert list(dict.fromkeys(names)) == ['backbone', 'input_proj', 'encoder', 'encoder_norm', 'proposal_head',
                                          'decoder']


def test_yawed_targets_need_heading_bins() -> None:
    points, samples = scenes()
    yawed = [dict(sample, gt_boxes=sample['gt_boxes'] + torch.tensor([0, 0, 0, 0, 0, 0, 0.3])) for sample in samples]
    with pytest.raises(ValueError, match='num_yaw_bins=12'):
        small_detector('NoPE')(points, yawed, mode='loss')
    with pytest.raises(ValueError, match='to VDETR itself'):
        VDETR(num_classes=3, decoder=dict(num_yaw_bins=12), **SMALL)
    with pytest.raises(ValueError, match='heading bins'):
        small_detector('NoPE', num_yaw_bins=-1)


def test_bad_input_is_named() -> None:
    model = small_detector('NoPE')
    points, samples = scenes()
    with pytest.raises(ValueError, match='backbone samples 64'):
        model(points[:, :32], samples, mode='loss')
    broken = points.clone()
    broken[0, 5, 1] = float('nan')
    with pytest.raises(ValueError, match='NaN'):
        model(broken, samples, mode='loss')
    flat = [dict(sample, gt_boxes=sample['gt_boxes'] * torch.tensor([1, 1, 1, 1, 0, 1, 1.0])) for sample in samples]
    with pytest.raises(ValueError, match='positive size'):
        model(points, flat, mode='loss')
    with pytest.raises(ValueError, match='outside 0..2'):
        model(points, [dict(sample, gt_labels=torch.tensor([0, 3])) for sample in samples], mode='loss')
    with pytest.raises(ValueError, match='num_queries'):
        VDETR(num_classes=3, **{**SMALL, 'num_queries': 65})


@pytest.mark.parametrize('config', sorted((REPO_ROOT / 'configs' / 'vdetr').glob('*.py')), ids=lambda path: path.stem)
def test_every_config_builds_its_model_and_names_its_encoding(config) -> None:
    cfg = Config.fromfile(config)
    model = MODELS.build(cfg.model)
    expected = {'vertex-rpe': 'VertexRPE', 'vertex-rpe-box-frame': 'VertexRPE', 'fourier-xyz': 'FourierXYZ',
                'sincos-xyz': 'SinCosXYZ', 'nope': 'NoPE', 'triplane': 'TriPlane'}
    name = config.stem.split('_')[1]
    assert type(model.decoder.encoding).__name__ == expected[name]
    assert cfg.val_evaluator['type'] == 'IndoorAP' and len(cfg.val_evaluator['classes']) == model.num_classes
    rotated = config.stem.endswith('-rotated')
    assert model.num_yaw_bins == (12 if rotated else 0)
    for evaluator in (cfg.val_evaluator, cfg.test_evaluator):
        assert evaluator.get('rotated', False) is rotated
    assert ('rotated' in cfg.train_dataloader.dataset.data_root) is rotated
    if name.startswith('vertex-rpe'):
        assert model.decoder.encoding.box_frame is name.endswith('box-frame')


def test_pointnet2_hierarchy_keeps_input_points_and_trains() -> None:
    torch.manual_seed(0)
    backbone = MODELS.build(dict(type='PointNet2Backbone', in_channels=3, levels=[
        dict(channels=(16, 16), num_samples=128, radius=0.4, group_size=8),
        dict(channels=(32,), num_samples=32, radius=0.8, group_size=8)]))
    points, samples = scenes()
    xyz, features, indices = backbone(points)
    assert xyz.shape == (2, 32, 3) and features.shape == (2, 32, 32) and backbone.num_samples == 32
    # the last level's centres are input points, found through both levels' indices
    assert torch.equal(xyz, torch.gather(points[..., :3], 1, indices[..., None].expand(-1, -1, 3)))
    model = VDETR(num_classes=3, decoder=dict(depth=2, num_heads=2, mlp_dim=32, encoding=dict(type='VertexRPE')),
                  **dict(SMALL, backbone=dict(type='PointNet2Backbone', levels=[
                      dict(channels=(16,), num_samples=128, radius=0.4, group_size=8),
                      dict(channels=(32,), num_samples=64, radius=0.8, group_size=8)]), embed_dim=32))
    sum(model(points, samples, mode='loss').values()).backward()
    assert model.backbone.levels[0].mlp[0].weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match='leave it out'):
        MODELS.build(dict(type='PointNet2Backbone', levels=[dict(in_channels=3)]))
    with pytest.raises(ValueError, match='fewer centres'):
        MODELS.build(dict(type='PointNet2Backbone', levels=[dict(num_samples=16), dict(num_samples=32)]))


def test_default_sampling_backend_gives_the_torch_loops_outputs(monkeypatch) -> None:
    """The PointNet++ centres and VDETRHead's voxels come from farthest_point_sample's default backend (fpsample on
    the CPU where installed); with fpsample hidden (the torch loop) every output is the same."""
    torch.manual_seed(0)
    model = small_detector('VertexRPE').eval()
    head = VDETRHead(in_channels=3, num_classes=3, embed_dim=32, depth=1, num_heads=2, mlp_dim=32, num_queries=8,
                     num_samples=64).eval()
    points, _ = scenes()
    calls: list[tuple[int, ...]] = []

    def recorded(xyz: torch.Tensor, num_samples: int) -> torch.Tensor:
        calls.append(tuple(xyz.shape))
        return fpsample_backend.fpsample_farthest_points(xyz, num_samples)
    monkeypatch.setattr(point_sampling, 'fpsample_farthest_points', recorded)

    def outputs() -> dict[str, torch.Tensor]:
        with torch.no_grad():
            return {**model(points, mode='tensor'), **{f'head {key}': value for key, value in
                                                       head(points[..., :3], points[..., 3:]).items()}}
    default = outputs()
    if fpsample_backend.fpsample_importable():
        assert calls == [(2, 256, 3), (2, 256, 3)]
    monkeypatch.setitem(sys.modules, 'fpsample', None)
    fpsample_backend.fpsample_importable.cache_clear()
    try:
        loop = outputs()
    finally:
        fpsample_backend.fpsample_importable.cache_clear()
    assert len(calls) in (0, 2) and default.keys() == loop.keys()
    assert default['head sample_index'].shape == (2, 64)
    for key in default:
        assert torch.equal(default[key], loop[key]), key
