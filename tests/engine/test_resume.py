"""A run killed at any point and resumed gives the uninterrupted run's weights, bit for bit.

The runs are real: `tools/train.py` on a config of configs/vit (random-resized-crop augmentation,
drop-path, AdamW with warm-up and cosine decay), with two data-loader worker processes, on the CPU
with deterministic kernels. The killed run (that config plus a hook) dies with ``os._exit`` (no
clean-up) at an epoch boundary or within an epoch, with epoch or iteration checkpoints; ``--resume``
with the config itself continues it.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.logging import MessageHub

from vispe.engine import WeightsCheckpointHook
from vispe.engine.hooks import temporary_path

from ..conftest import REPO_ROOT
from .kill_hook import KILLED_EXIT_CODE

CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_rope-mixed_fmnist-28.py'
# 64 images in batches of 16: 4 iterations per epoch, 2 epochs.
OPTIONS = ['train_dataloader.dataset.subset=64', 'train_dataloader.batch_size=16', 'train_dataloader.num_workers=2',
           'val_dataloader.dataset.subset=40', 'train_cfg.max_epochs=2', 'randomness.deterministic=True',
           'log_level=WARNING']
ITERATION_CHECKPOINTS = ['default_hooks.checkpoint.by_epoch=False', 'default_hooks.checkpoint.interval=3']


def killing_config(work_dir: Path, kill: str) -> Path:
    """The config with a hook that kills the process (written next to the work dir)."""
    path = work_dir.parent / f'{work_dir.name}_killed.py'
    path.write_text(f"_base_ = [{str(CONFIG)!r}]\ncustom_imports = dict(imports=['tests.engine.kill_hook'])\n"
                    f"custom_hooks = [dict(type='WeightsCheckpointHook', metric='accuracy/top1'), {kill}]\n")
    return path


def train(work_dir: Path, *options: str, resume: bool = False, kill: str | None = None) -> subprocess.CompletedProcess:
    config = CONFIG if kill is None else killing_config(work_dir, kill)
    command = [sys.executable, str(REPO_ROOT / 'tools' / 'train.py'), str(config), '--work-dir', str(work_dir),
               *(['--resume'] if resume else []), '--cfg-options', *OPTIONS, *options]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS='1')
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=REPO_ROOT)


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)['state_dict']


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory) -> Path:
    work_dir = tmp_path_factory.mktemp('uninterrupted')
    result = train(work_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    return work_dir


@pytest.mark.slow
@pytest.mark.parametrize('kill, options', [
    ("dict(type='KillProcessHook', after_epoch=1)", []),
    ("dict(type='KillProcessHook', at_iter=7)", []),
    ("dict(type='KillProcessHook', at_iter=7)", ITERATION_CHECKPOINTS),
], ids=['at-epoch-boundary', 'mid-epoch', 'mid-epoch-iteration-checkpoint'])
def test_killed_and_resumed_equals_uninterrupted(uninterrupted: Path, tmp_path: Path, kill: str, options: list) -> None:
    killed = train(tmp_path, *options, kill=kill)
    assert killed.returncode == KILLED_EXIT_CODE, killed.stderr[-3000:]
    assert not (tmp_path / 'last.pth').exists()
    temporary_path(tmp_path / 'best.pth').write_bytes(b'half a file')  # as a kill while writing best.pth leaves
    resumed = train(tmp_path, *options, resume=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not temporary_path(tmp_path / 'best.pth').exists()
    expected, got = weights(uninterrupted / 'last.pth'), weights(tmp_path / 'last.pth')
    assert expected.keys() == got.keys()
    assert all(torch.equal(expected[key], got[key]) for key in expected)
    best_expected = torch.load(uninterrupted / 'best.pth', weights_only=True)
    best_got = torch.load(tmp_path / 'best.pth', weights_only=True)
    assert best_got['meta']['metrics'] == best_expected['meta']['metrics']
    assert best_got['meta']['epoch'] == best_expected['meta']['epoch']


class FakeRunner:
    """What WeightsCheckpointHook reads of a Runner."""

    def __init__(self, work_dir: Path, message_hub: MessageHub) -> None:
        self.work_dir, self.message_hub, self.rank = str(work_dir), message_hub, 0
        self.model = torch.nn.Linear(2, 2)
        self.epoch = self.iter = 0
        self.cfg = type('Cfg', (), {'pretty_text': 'model = dict(type="X")'})()


@pytest.mark.slow
def test_best_checkpoint_survives_a_resume(tmp_path: Path) -> None:
    """The first validation after a resume must not replace a better best.pth (it did: 21.5 by 19.5)."""
    hub = MessageHub.get_instance('best_survives_resume')
    first = WeightsCheckpointHook('accuracy/top1')
    runner = FakeRunner(tmp_path, hub)
    first.before_train(runner)
    first.after_val_epoch(runner, {'accuracy/top1': 21.5})
    saved_hub = hub.state_dict()
    resumed_hub = MessageHub.get_instance('best_survives_resume_resumed')
    resumed_hub.load_state_dict(saved_hub)
    second = WeightsCheckpointHook('accuracy/top1')
    second.before_train(FakeRunner(tmp_path, resumed_hub))
    assert second.best == 21.5
    second.after_val_epoch(FakeRunner(tmp_path, resumed_hub), {'accuracy/top1': 19.5})
    assert torch.load(tmp_path / 'best.pth', weights_only=True)['meta']['metrics'] == {'accuracy/top1': 21.5}
    second.after_val_epoch(FakeRunner(tmp_path, resumed_hub), {'accuracy/top1': 23.0})
    assert torch.load(tmp_path / 'best.pth', weights_only=True)['meta']['metrics'] == {'accuracy/top1': 23.0}
    fresh = WeightsCheckpointHook('accuracy/top1')
    fresh.before_train(FakeRunner(tmp_path, MessageHub.get_instance('best_fresh_run')))
    assert fresh.best == -math.inf


def test_stale_temporaries_are_removed_when_a_run_starts(tmp_path: Path) -> None:
    for name in WeightsCheckpointHook.FILES:
        temporary_path(tmp_path / name).write_bytes(b'partial')
    WeightsCheckpointHook().before_run(FakeRunner(tmp_path, MessageHub.get_instance('stale')))
    assert not any(temporary_path(tmp_path / name).exists() for name in WeightsCheckpointHook.FILES)


def test_best_checkpoint_of_a_lower_is_better_metric(tmp_path: Path) -> None:
    """rule='less' keeps the lowest value (a depth error); an unknown rule is refused."""
    hook = WeightsCheckpointHook('depth/absrel', rule='less')
    runner = FakeRunner(tmp_path, MessageHub.get_instance('best_less'))
    hook.before_train(runner)
    for value in (0.30, 0.20, 0.25):
        hook.after_val_epoch(runner, {'depth/absrel': value})
    assert torch.load(tmp_path / 'best.pth', weights_only=True)['meta']['metrics'] == {'depth/absrel': 0.20}
    with pytest.raises(ValueError, match="'greater' or 'less'"):
        WeightsCheckpointHook('depth/absrel', rule='lower')
