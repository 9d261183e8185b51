"""The multi-view 3D detection configs build their model, dataset and metric and take a training step: the mv-scenes
configs on a tiny rendered set, the nuScenes configs on a tiny set in the real nuScenes format (at a small size)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import vispe
from vispe.datasets import multiview_collate
from vispe.datasets.mv_scenes import convert
from vispe.registry import DATASETS, METRICS, MODELS

from ..conftest import REPO_ROOT
from ..datasets.mv_scenes_fixture import TINY_CONFIG
from ..datasets.nuscenes_fixture import write_nuscenes

MV_SCENES = sorted((REPO_ROOT / 'configs' / 'petr').glob('*_mv-scenes.py'))
NUSCENES = sorted((REPO_ROOT / 'configs' / 'petr').glob('*_nuscenes.py'))


@pytest.fixture(scope='module')
def mv_scenes_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('configs') / 'mv-scenes'
    convert(root, 2, 1, 1, config=TINY_CONFIG, progress=False)
    return root


def test_every_encoding_has_a_mv_scenes_config() -> None:
    names = {path.name for path in MV_SCENES}
    assert {f'petr-r18_{pe}_mv-scenes.py' for pe in ('petr-lid', 'petr-ud', '3dppe', 'nope')} <= names
    assert {'petr-r50_petr-lid_nuscenes.py', 'petr-r50_3dppe_nuscenes.py'} <= {path.name for path in NUSCENES}


def training_step(cfg: Config, data_root: Path, image_size: tuple[int, int],
                  num_samples: int = 2) -> dict[str, torch.Tensor]:
    """The losses and gradients of the config's model on ``num_samples`` samples of its training set at
    ``image_size``."""
    cfg.model.backbone.pretrained = False
    dataset_cfg = dict(cfg.train_dataloader.dataset, data_root=str(data_root), image_size=image_size)
    dataset = DATASETS.build(dataset_cfg)
    METRICS.build(dict(cfg.val_evaluator, data_root=str(data_root)))
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).train()
    batch = multiview_collate([dataset[index] for index in range(num_samples)])
    losses = model(batch['inputs'], batch['masks'], batch['data_samples'], mode='loss')
    sum(losses.values()).backward()
    return losses


@pytest.mark.parametrize('path', MV_SCENES, ids=lambda p: p.stem)
def test_mv_scenes_config_trains_a_step(path, mv_scenes_root) -> None:
    cfg = Config.fromfile(str(path))
    losses = training_step(cfg, mv_scenes_root, (45, 80))
    assert all(torch.isfinite(value) for value in losses.values())
    assert ('loss_depth_l1' in losses) == ('3dppe' in path.name)


@pytest.mark.slow
@pytest.mark.parametrize('path', NUSCENES, ids=lambda p: p.stem)
def test_nuscenes_config_trains_a_step_on_the_real_format(path, tmp_path) -> None:
    root = write_nuscenes(tmp_path / 'nuscenes')
    cfg = Config.fromfile(str(path))
    losses = training_step(cfg, root, (64, 176), num_samples=1)
    assert all(torch.isfinite(value) for value in losses.values())
    assert vispe.registry.MODELS.get(cfg.model.type) is vispe.models.PETRDetector
