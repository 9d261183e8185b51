"""Training on CUDA from the command line: 20 steps of AMP (mmengine's AmpOptimWrapper) and a one-process NCCL run of
tools/dist_train.sh, on the Three Cell config (its data is generated, so nothing is downloaded)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..conftest import REPO_ROOT

CONFIG = 'configs/three_cell/vit-t4_three-cell.py'
# 1600 draws split 8:1:1: 1280 training images, 20 steps of 64.
SHORT = ['train_cfg.max_epochs=1', 'train_dataloader.dataset.count=1600', 'val_dataloader.dataset.count=1600',
         'test_dataloader.dataset.count=1600']


def train(command: list[str], work_dir: Path, *options: str) -> None:
    result = subprocess.run([*command, '--work-dir', str(work_dir), '--cfg-options', *SHORT, *options], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=580,
                            env=dict(os.environ, PYTHON=sys.executable))
    assert result.returncode == 0, result.stderr[-4000:]
    assert (work_dir / 'last_checkpoint').is_file()


def test_twenty_amp_steps(tmp_path: Path) -> None:
    train([sys.executable, 'tools/train.py', CONFIG, '--amp'], tmp_path / 'amp')


def test_one_process_nccl_run(tmp_path: Path) -> None:
    train(['bash', 'tools/dist_train.sh', CONFIG, '1'], tmp_path / 'nccl', 'env_cfg.dist_cfg.backend=nccl')
