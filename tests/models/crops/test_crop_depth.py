"""The crop-depth ViT (KPE's task): the encoding reads the crop box and K through Positions, the loss skips pixels
without depth, every config builds the encoding it names, and train.py -> test.py runs on a tiny set; the metric's
errors are the textbook ones."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from tests.conftest import REPO_ROOT
from vispe.datasets.mv_scenes.crops import CROPS_SPLITS, CropsConfig, convert_crops
from vispe.evaluation import CropDepthMetric
from vispe.evaluation.crop_depth_metric import crop_depth_errors
from vispe.models import CropDepthViT
from vispe.registry import MODELS

CONFIGS = sorted((REPO_ROOT / 'configs' / 'crops').glob('*.py'))


def tiny_model(encoding: dict) -> CropDepthViT:
    return CropDepthViT(dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=16, patch_size=4,
                             embed_dim=32, depth=1, num_heads=2, num_classes=0, class_token=False, global_pool='avg',
                             encoding=encoding))


def crop_inputs(batch: int = 2, focal: float = 100.0) -> dict[str, torch.Tensor]:
    return dict(image=torch.rand(batch, 3, 16, 16), crop_box=torch.tensor([[0., 0., 31., 31.]]).repeat(batch, 1),
                intrinsics=torch.tensor([[focal, 0, 63.5], [0, focal, 47.5], [0, 0, 1]]).repeat(batch, 1, 1),
                image_size=torch.tensor([[96, 128]]).repeat(batch, 1), depth=torch.rand(batch, 16, 16) * 5 + 1)


def test_kpe_sees_the_focal_length_and_the_crop_box_baseline_does_not() -> None:
    torch.manual_seed(0)
    for use_intrinsics in (True, False):
        model = tiny_model(dict(type='KPE', mode='center-corner', use_intrinsics=use_intrinsics)).eval()
        inputs = crop_inputs()
        depth, other_focal = model(inputs), model(crop_inputs(focal=300.0) | dict(image=inputs['image']))
        assert depth.shape == (2, 16, 16) and (depth > 0).all()
        assert torch.equal(depth, other_focal) != use_intrinsics
        moved = model(inputs | dict(crop_box=torch.tensor([[90., 60., 121., 91.]]).repeat(2, 1)))
        assert not torch.allclose(moved, depth)


def test_loss_is_log_l1_over_known_pixels_only() -> None:
    torch.manual_seed(0)
    model = tiny_model(dict(type='NoPE'))
    inputs = crop_inputs()
    predicted = model(inputs)
    target = predicted.detach() * math.e
    target[:, :8] = 0
    loss = model(inputs | dict(depth=target), mode='loss')['loss']
    assert torch.allclose(loss, torch.tensor(1.0), atol=1e-5)
    loss.backward()
    assert model.head.weight.grad.abs().sum() > 0
    empty = model(inputs | dict(depth=torch.zeros(2, 16, 16)), mode='loss')['loss']
    assert float(empty.detach()) == 0.0


def test_errors_and_offset_bins_of_the_metric() -> None:
    target = torch.tensor([[2.0, 4.0], [0.0, 1.0]])
    errors = crop_depth_errors(target * 2, target)
    assert errors['absrel'] == pytest.approx(1.0) and errors['delta1'] == 0.0
    assert errors['rmse_log'] == pytest.approx(math.log(2))
    close = crop_depth_errors(torch.tensor([[2.2, 4.0], [9.0, 1.0]]), target)
    assert close['absrel'] == pytest.approx(0.1 / 3) and close['delta1'] == 1.0
    assert math.isnan(crop_depth_errors(target, torch.zeros(2, 2))['absrel'])
    metric = CropDepthMetric()
    metric.process({}, [dict(pred=target * 2, target=target, offset_bin='corner'),
                        dict(pred=target, target=target, offset_bin='center')])
    metrics = metric.compute_metrics(metric.results)
    assert metrics['absrel'] == pytest.approx(0.5) and metrics['absrel_corner'] == pytest.approx(1.0)
    assert metrics['absrel_center'] == 0.0 and 'absrel_edge' not in metrics


@pytest.mark.parametrize('config', CONFIGS, ids=lambda path: path.stem)
def test_every_config_builds_the_encoding_it_names(config: Path) -> None:
    cfg = Config.fromfile(config)
    model = MODELS.build(cfg.model)
    expected = {'kpe-center-corner': ('KPE', 'center-corner', True), 'kpe-dense': ('KPE', 'dense', True),
                'crop-box': ('KPE', 'center-corner', False), 'ape': ('LearnedAPE', None, None),
                'nope': ('NoPE', None, None)}
    name, mode, use_intrinsics = expected[config.stem.split('_')[1]]
    encoding = model.backbone.encoding
    assert type(encoding).__name__ == name and getattr(encoding, 'mode', None) == mode
    assert getattr(encoding, 'use_intrinsics', None) == use_intrinsics
    assert cfg.val_evaluator['type'] == 'CropDepthMetric' and cfg.default_hooks['checkpoint']['rule'] == 'less'
    assert len(CONFIGS) == 5


@pytest.mark.slow
def test_train_and_test_tools_on_a_tiny_set(tmp_path) -> None:
    root = tmp_path / 'crops'
    convert_crops(root, {split: 1 for split in CROPS_SPLITS}, config=CropsConfig(image_size=(24, 32)),
                  progress=False)
    config = REPO_ROOT / 'configs' / 'crops' / 'vit-t4_kpe-dense_mv-crops-depth.py'
    options = [f'{loader}.dataset.data_root={root}' for loader in ('train_dataloader', 'val_dataloader',
                                                                    'test_dataloader')]
    options += ['train_dataloader.batch_size=2', 'test_dataloader.dataset.split=test-tele', 'train_cfg.max_epochs=1',
                'param_scheduler.0.end=1', 'param_scheduler.1.end=1']
    train = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(config), '--work-dir',
                            str(tmp_path / 'run'), '--cfg-options', *options], capture_output=True, text=True,
                           timeout=600)
    assert train.returncode == 0, train.stderr[-3000:]
    test = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'test.py'), str(config),
                           str(tmp_path / 'run' / 'best.pth'), '--work-dir', str(tmp_path / 'test'), '--cfg-options',
                           *options], capture_output=True, text=True, timeout=600)
    assert test.returncode == 0, test.stderr[-3000:]
    metrics = json.loads(test.stdout.strip().splitlines()[-1])
    assert {'depth/absrel', 'depth/absrel_center', 'depth/absrel_edge', 'depth/absrel_corner'} <= set(metrics)
    assert 0 < metrics['depth/absrel'] < 100
