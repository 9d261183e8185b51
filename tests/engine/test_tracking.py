"""Experiment tracking: ``--vis-backend tensorboard`` makes a training run write TensorBoard events of its loss beside
mmengine's local logs; an unknown or uninstalled tracker gets an error naming the fix."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mmengine.config import Config

from vispe.engine.tracking import set_vis_backends
from vispe.extras import MissingExtraError

from ..conftest import REPO_ROOT

CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_nope_fmnist-28.py'
OPTIONS = ['train_dataloader.dataset.subset=32', 'train_dataloader.batch_size=16', 'train_dataloader.num_workers=0',
           'val_dataloader.dataset.subset=16', 'val_dataloader.num_workers=0', 'train_cfg.max_epochs=1',
           'default_hooks.logger.interval=1', 'log_level=WARNING']


@pytest.mark.slow
def test_a_tiny_run_writes_tensorboard_events_of_its_loss(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    command = [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(CONFIG), '--work-dir', str(tmp_path),
               '--vis-backend', 'tensorboard', '--cfg-options', *OPTIONS]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS='1')
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    events = list(tmp_path.glob('*/vis_data/events.out.tfevents.*'))
    assert len(events) == 1, list(tmp_path.rglob('*'))
    accumulator = EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    assert 'loss' in accumulator.Tags()['scalars']
    assert len(accumulator.Scalars('loss')) == 2   # 32 images in batches of 16, logged every iteration
    assert list(tmp_path.glob('*/vis_data/scalars.json')), 'the local backend is kept'


def test_the_switch_keeps_the_local_backend_first() -> None:
    cfg = Config(dict())
    set_vis_backends(cfg, ['tensorboard', 'tensorboard', 'local'])
    assert cfg.visualizer == dict(type='Visualizer', vis_backends=[dict(type='LocalVisBackend'),
                                                                   dict(type='TensorboardVisBackend')])


def test_an_unknown_tracker_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown tracking backend\(s\) \['tensorbord'\]; vispe offers local, "
                                         r'tensorboard, wandb, mlflow'):
        set_vis_backends(Config(dict()), ['tensorbord'])


def test_a_tracker_that_is_not_installed_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, 'mlflow', None)
    with pytest.raises(MissingExtraError, match=r'tracking with mlflow needs mlflow, .*pip install "vispe\[mlflow\]"'):
        set_vis_backends(Config(dict()), ['mlflow'])

