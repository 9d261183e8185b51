"""The ImageNet-1k configs build their model and dataset, and take a training step, on a fake ImageFolder."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from vispe.engine import load_config
from vispe.registry import DATASETS, MODELS

from ..conftest import REPO_ROOT

CONFIGS = sorted((REPO_ROOT / 'configs' / 'vit').glob('vit-b16_*_in1k-224.py'))


@pytest.fixture(scope='module')
def fake_imagenet(tmp_path_factory):
    root = tmp_path_factory.mktemp('imagenet')
    rng = np.random.default_rng(0)
    for split in ('train', 'val'):
        for cls in ('n01440764', 'n01443537'):
            (root / split / cls).mkdir(parents=True)
            for index in range(2):
                pixels = rng.integers(0, 256, size=(96 + 8 * index, 128, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / split / cls / f'{index}.JPEG')
    return root


def test_there_are_imagenet_configs() -> None:
    assert len(CONFIGS) >= 6


@pytest.mark.slow
@pytest.mark.parametrize('config', CONFIGS, ids=lambda p: p.stem)
def test_builds_and_steps_on_a_fake_imagefolder(config, fake_imagenet) -> None:
    cfg = load_config(config, {'train_dataloader.dataset.root': str(fake_imagenet),
                               'val_dataloader.dataset.root': str(fake_imagenet)})
    train = DATASETS.build(cfg.train_dataloader.dataset)
    val = DATASETS.build(cfg.val_dataloader.dataset)
    assert len(train) == len(val) == 4 and train.metainfo['classes'] == ['n01440764', 'n01443537']
    assert train[0]['inputs'].shape == val[0]['inputs'].shape == (3, 224, 224)
    steps = repr(train.transform)
    assert 'Solarize' in steps and 'Desaturate' in steps and 'GaussianBlurRand' in steps  # 3-Augment
    assert 'ColorJitter(brightness=(0.7, 1.3)' in steps
    model = MODELS.build(cfg.model)
    assert torch.all(model.backbone.head.bias == -6.9)
    assert model.backbone.blocks[-1].drop_path1.drop_prob == pytest.approx(0.1)
    batch = torch.stack([train[i]['inputs'] for i in range(2)])
    loss = model(batch, torch.tensor([0, 1]), mode='loss')['loss']
    assert torch.isfinite(loss)
    assert cfg.optim_wrapper.optimizer.lr == 3e-3 and cfg.train_cfg.max_epochs == 150
    assert cfg.param_scheduler[0].end == 15
