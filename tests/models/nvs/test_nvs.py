"""The novel-view pipeline: NVSScenes items (canonical cameras, view-major rays), the SRT-style model with each
camera encoding, its defining properties (NoPE cannot tell rays apart; GTA's rendering ignores a common rigid change
of every camera), and clear errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config

from vispe.datasets import NVSScenes, nvs_collate
from vispe.datasets.mv_scenes.nvs import NVSConfig, convert_nvs
from vispe.models import NovelViewTransformer
from vispe.registry import MODELS

from ...conftest import REPO_ROOT
from ...helpers import untrained_work_dir

TINY = NVSConfig(image_size=(24, 32))
ENCODINGS = ['GTA', dict(type='GTA', on='qk'), dict(type='CameraRays', depth_num=4), 'NoPE']


@pytest.fixture(scope='module')
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('nvs') / 'mv-scenes-nvs'
    convert_nvs(root, train=3, val=2, test=0, config=TINY, progress=False)
    return root


def model(encoding, seed: int = 0) -> NovelViewTransformer:
    torch.manual_seed(seed)
    return NovelViewTransformer(encoding, embed_dim=32, num_heads=2, encoder_depth=1, decoder_depth=1, mlp_dim=32,
                                cnn_channels=(8, 8, 16, 16))


def test_items_hold_canonical_cameras_and_view_major_rays(root) -> None:
    torch.manual_seed(0)
    item = NVSScenes(root, 'train', rays_per_view=10)[0]
    inputs, samples = item['inputs'], item['data_samples']
    assert inputs['images'].shape == (3, 3, 24, 32) and 0 <= inputs['images'].min() <= inputs['images'].max() <= 1
    assert torch.allclose(inputs['extrinsics'][0], torch.eye(4), atol=1e-6)
    with np.load(root / 'train' / '00000.npz', allow_pickle=False) as scene:
        cam2world, images = scene['cam2world'], scene['images']
    relative = np.linalg.inv(cam2world[1]) @ cam2world[2]
    canonical = inputs['extrinsics'][1].double() @ torch.linalg.inv(inputs['extrinsics'][2].double())
    assert np.allclose(canonical.numpy(), relative, atol=1e-5)
    rays = samples['rays']
    assert rays.shape == (20, 2) and len({tuple(r) for r in rays[:10].tolist()}) == 10
    views = np.repeat([3, 4], 10)
    expected = images[views, rays[:, 0].numpy(), rays[:, 1].numpy()] / 255
    assert torch.allclose(samples['rgb'], torch.from_numpy(expected).float())
    assert not torch.allclose(samples['rgb'], torch.from_numpy(images[views[::-1], rays[:, 0].numpy(),
                                                                      rays[:, 1].numpy()] / 255).float())
    every = NVSScenes(root, 'val')[0]['data_samples']['rays']
    assert every.shape == (2 * 24 * 32, 2) and every[24 * 32 + 33].tolist() == [1, 1]


@pytest.mark.parametrize('encoding', ENCODINGS, ids=['gta', 'gta-qk', 'ray-pe', 'nope'])
def test_loss_backward_and_predict_for_each_encoding(root, encoding) -> None:
    torch.manual_seed(0)
    net = model(encoding)
    batch = nvs_collate([NVSScenes(root, 'train', rays_per_view=16)[i] for i in range(2)])
    loss = net(batch['inputs'], batch['data_samples'], 'loss')['loss']
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in net.parameters() if p.requires_grad)
    evaluation = nvs_collate([NVSScenes(root, 'val')[0]])
    with torch.no_grad():
        [result] = net(evaluation['inputs'], evaluation['data_samples'], 'predict')
    assert result['pred'].shape == result['target'].shape == (2, 3, 24, 32) and result['scene_id'] == 'val/00000'
    with pytest.raises(ValueError, match='rays_per_view=None'):
        net(batch['inputs'], batch['data_samples'], 'predict')


def test_without_position_every_ray_of_a_view_gets_one_colour(root) -> None:
    net = model('NoPE')
    batch = nvs_collate([NVSScenes(root, 'val')[0]])
    with torch.no_grad():
        colours = net(batch['inputs'], mode='tensor')[0]
    assert torch.allclose(colours, colours[:1].expand_as(colours), atol=1e-6)
    with torch.no_grad():
        varied = model('GTA')(batch['inputs'], mode='tensor')[0]
    assert (varied - varied[:1]).abs().max() > 1e-4


def test_gta_rendering_ignores_a_common_rigid_change_of_every_camera(root) -> None:
    net = model('GTA').eval()
    inputs = nvs_collate([NVSScenes(root, 'val')[1]])['inputs']
    angle = 0.7
    change = torch.eye(4)
    change[:2, :2] = torch.tensor([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    change[:3, 3] = torch.tensor([1.5, -2.0, 0.3])
    moved = dict(inputs, extrinsics=inputs['extrinsics'] @ change,
                 target_extrinsics=inputs['target_extrinsics'] @ change)
    with torch.no_grad():
        before, after = net(inputs, mode='tensor'), net(moved, mode='tensor')
    assert torch.allclose(before, after, atol=1e-4)
    with torch.no_grad():
        rays = model(dict(type='CameraRays', depth_num=4)).eval()
        assert (rays(inputs, mode='tensor') - rays(moved, mode='tensor')).abs().max() > 1e-3


def test_bad_input_names_the_fix(root, tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match='--task nvs'):
        NVSScenes(tmp_path, 'train')
    broken = tmp_path / 'broken'
    (broken / 'train').mkdir(parents=True)
    (broken / 'train' / '00000.npz').write_bytes((root / 'train' / '00000.npz').read_bytes()[:200])
    with pytest.raises(ValueError, match='00000.npz is not a readable NVS scene'):
        NVSScenes(broken, 'train')[0]
    with pytest.raises(ValueError, match='exceeds the 24x32 pixels'):
        NVSScenes(root, 'train', rays_per_view=10000)[0]
    inputs = nvs_collate([NVSScenes(root, 'val')[0]])['inputs']
    odd = dict(inputs, images=inputs['images'][..., :20])
    with pytest.raises(ValueError, match='CNN stride 8'):
        model('NoPE')(odd, mode='tensor')


@pytest.mark.parametrize('config', sorted((REPO_ROOT / 'configs' / 'nvs').glob('*.py')), ids=lambda path: path.stem)
def test_every_config_builds_its_model_and_names_its_encoding(config) -> None:
    cfg = Config.fromfile(config)
    net = MODELS.build(cfg.model)
    expected = {'gta': ('GTA', 'qkvo'), 'gta-qk': ('GTA', 'qk'), 'ray-pe': ('CameraRays', None), 'nope': ('NoPE', None)}
    name, on = expected[config.stem.split('_')[1]]
    assert type(net.encoding).__name__ == name and getattr(net.encoding, 'on', None) == on
    assert cfg.val_evaluator['type'] == 'NVSMetric' and cfg.default_hooks['checkpoint']['save_best'] == 'nvs/psnr'


@pytest.mark.slow
def test_train_and_test_tools_on_a_tiny_set(root, tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'nvs' / 'srt-s_gta_mv-scenes.py'
    options = [f'{loader}.dataset.data_root={root}' for loader in ('train_dataloader', 'val_dataloader',
                                                                    'test_dataloader')]
    options += ['train_dataloader.batch_size=2', 'val_dataloader.batch_size=2', 'test_dataloader.dataset.split=val',
                'train_cfg.max_epochs=1', 'train_cfg.val_interval=1', 'param_scheduler.1.end=1']
    train = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(config), '--work-dir',
                            str(tmp_path), '--cfg-options', *options], capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr[-3000:]
    test = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'test.py'), str(config),
                           str(tmp_path / 'best.pth'), '--work-dir', str(tmp_path / 'test'), '--cfg-options', *options],
                          capture_output=True, text=True, timeout=600)
    assert test.returncode == 0, test.stderr[-3000:]
    metrics = json.loads(test.stdout.strip().splitlines()[-1])
    assert set(metrics) == {'nvs/psnr', 'nvs/ssim', 'nvs/psnr_objects', 'nvs/ssim_objects'}
    assert 5 < metrics['nvs/psnr'] < 60


def test_vis_nvs_draws_inputs_targets_renderings_and_errors(root, tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'nvs' / 'srt-s_nope_mv-scenes.py'
    work_dir = untrained_work_dir(tmp_path, 'nope', Config.fromfile(config), 0, config.name)
    command = [sys.executable, str(REPO_ROOT / 'tools' / 'vis_nvs.py'), str(config), str(work_dir / 'best.pth'),
               '--scenes', '0', '1', '--out', str(tmp_path / 'nvs.png'), '--cfg-options',
               f'test_dataloader.dataset.data_root={root}', 'test_dataloader.dataset.split=val']
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert 'nvs.png: 2 scenes, 3 input and 2 target views each' in result.stdout
    assert (tmp_path / 'nvs.png').stat().st_size > 10_000
    beyond = subprocess.run(command[:4] + ['--scenes', '5'] + command[7:], capture_output=True, text=True, timeout=600)
    assert beyond.returncode != 0 and 'beyond the 2 scenes' in beyond.stderr



def test_mean_image_floor_is_the_training_targets_mean(root, tmp_path) -> None:
    """tools/nvs_mean_image.py scores the per-pixel mean of the training target views with NVSMetric; a view's PSNR
    is 10·log10(1 / MSE) against that mean, computed here by hand."""
    views = {}
    for split in ('train', 'val'):
        views[split] = [view.astype(np.float64) / 255 for path in sorted((root / split).glob('*.npz'))
                        for view in np.load(path)['images'][TINY.input_views:]]
    mean = np.mean(views['train'], axis=0)
    expected = np.mean([10 * np.log10(1 / ((mean - view) ** 2).mean()) for view in views['val']])
    out = tmp_path / 'mean.json'
    result = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'nvs_mean_image.py'),
                             str(REPO_ROOT / 'configs' / 'nvs' / 'srt-s_gta_mv-scenes.py'), '--split', 'val',
                             '--data-root', str(root), '--out', str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    assert metrics['nvs/psnr'] == pytest.approx(expected, abs=2e-4)
    assert json.loads(out.read_text())['metrics'] == metrics
