"""No load path runs code from a crafted checkpoint; corrupt files are called corrupt.

Each crafted file, when unpickled in full, creates a marker file. Every way vispe reads checkpoints is
tried: ``vispe.load_checkpoint``, ``tools/test.py``, ``load_from`` in a config, ``tools/train.py
--resume`` (automatic and with a path), ``tools/eval_resolution.py`` and ``tools/vis_attention.py``.
"""
from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import vispe
from vispe.engine import build_runner, load_config
from vispe.registry import MODELS
from vispe.serialization import CorruptCheckpointError, UnsafeCheckpointError

from ..conftest import REPO_ROOT

CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'
SMALL = {'train_dataloader.dataset.subset': 32, 'train_dataloader.batch_size': 16, 'val_dataloader.dataset.subset': 20,
         'train_cfg.max_epochs': 1, 'log_level': 'WARNING'}


class WritesAFile:
    """Unpickling this runs code: it creates the file ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (exec, (f'open({str(self.marker)!r}, "w").write("ran")',))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / 'code_ran.txt'


def model_state() -> dict[str, torch.Tensor]:
    return MODELS.build(Config.fromfile(str(CONFIG)).model).state_dict()


def crafted(path: Path, marker: Path, legacy: bool = False) -> Path:
    """A checkpoint that looks like vispe's own (state dict, meta) with a code-running object inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({'meta': {'epoch': 1, 'iter': 2}, 'state_dict': model_state(), 'extra': WritesAFile(marker)}, path,
               _use_new_zipfile_serialization=not legacy)
    return path


def run_tool(name: str, *args: str) -> None:
    """Run tools/<name> in this process, as `python tools/<name> args` would."""
    argv = sys.argv
    sys.argv = [str(REPO_ROOT / 'tools' / name), *args]
    try:
        runpy.run_path(sys.argv[0], run_name='__main__')
    finally:
        sys.argv = argv


@pytest.mark.parametrize('legacy', [False, True], ids=['zip', 'legacy'])
def test_load_checkpoint_refuses_code(tmp_path: Path, marker: Path, legacy: bool) -> None:
    path = crafted(tmp_path / 'model.pth', marker, legacy)
    model = MODELS.build(Config.fromfile(str(CONFIG)).model)
    with pytest.raises(UnsafeCheckpointError, match=r"holds a Python object \(__builtin__.exec\).*could run code") as info:
        vispe.load_checkpoint(model, path)
    assert 'weights_only=False' not in str(info.value)
    assert not marker.exists()


def test_test_tool_refuses_code(tmp_path: Path, marker: Path) -> None:
    path = crafted(tmp_path / 'best.pth', marker)
    with pytest.raises(UnsafeCheckpointError, match='does not unpickle'):
        run_tool('test.py', str(CONFIG), str(path), '--work-dir', str(tmp_path / 'test'))
    assert not marker.exists()


def test_load_from_refuses_code(tmp_path: Path, marker: Path) -> None:
    path = crafted(tmp_path / 'pretrained.pth', marker)
    cfg = load_config(CONFIG, {**SMALL, 'load_from': str(path)}, tmp_path / 'work')
    cfg.experiment_name = 'load_from_refuses_code'
    with pytest.raises(UnsafeCheckpointError, match='state dict of tensors or a .safetensors file'):
        build_runner(cfg).train()
    assert not marker.exists()


@pytest.mark.parametrize('legacy', [False, True], ids=['zip', 'legacy'])
def test_resume_from_the_work_dir_refuses_code(tmp_path: Path, marker: Path, legacy: bool) -> None:
    work_dir = tmp_path / 'work'
    crafted(work_dir / 'epoch_1.pth', marker, legacy)
    (work_dir / 'last_checkpoint').write_text(str(work_dir / 'epoch_1.pth'))
    with pytest.raises(UnsafeCheckpointError, match='--trust-checkpoint'):
        run_tool('train.py', str(CONFIG), '--work-dir', str(work_dir), '--resume', '--cfg-options',
                 *[f'{key}={value}' for key, value in SMALL.items()])
    assert not marker.exists()


def test_resume_from_outside_the_work_dir_needs_trust(tmp_path: Path, marker: Path) -> None:
    path = crafted(tmp_path / 'elsewhere' / 'epoch_1.pth', marker)
    with pytest.raises(PermissionError, match=r'outside this run\'s work dir.*--trust-checkpoint'):
        run_tool('train.py', str(CONFIG), '--work-dir', str(tmp_path / 'work'), '--resume', str(path))
    assert not marker.exists()


def test_trust_needs_resume(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        run_tool('train.py', str(CONFIG), '--work-dir', str(tmp_path / 'work'), '--trust-checkpoint')
    assert info.value.code == 2 and '--trust-checkpoint applies to --resume' in capsys.readouterr().err


def test_resume_never_executes_the_stored_config(tmp_path: Path, marker: Path) -> None:
    """mmengine's Runner.resume runs Config.fromstring on meta['config']: Python code, which a file of
    plain data (accepted by the allow-list) could carry."""
    work_dir = tmp_path / 'work'
    work_dir.mkdir()
    code = f'open({str(marker)!r}, "w").write("ran")\nx = 1\n'
    torch.save({'meta': {'epoch': 1, 'iter': 2, 'config': code}, 'state_dict': model_state(),
                'message_hub': {}}, work_dir / 'epoch_1.pth')
    cfg = load_config(CONFIG, SMALL, work_dir)
    cfg.resume = True
    cfg.load_from = str(work_dir / 'epoch_1.pth')
    cfg.experiment_name = 'resume_never_executes'
    runner = build_runner(cfg)
    with pytest.raises(Exception):  # the file holds no optimizer state worth the name; what matters is the marker
        runner.train()
    assert not marker.exists()


def test_evaluation_and_visualisation_tools_refuse_code(tmp_path: Path, marker: Path) -> None:
    path = crafted(tmp_path / 'best.pth', marker)
    with pytest.raises(UnsafeCheckpointError):
        run_tool('eval_resolution.py', f'{CONFIG}::{path}', '--sizes', '28', '--out', str(tmp_path / 'out'))
    with pytest.raises(UnsafeCheckpointError):
        run_tool('vis_attention.py', str(CONFIG), str(path), '--sizes', '28', '--out', str(tmp_path / 'a.png'))
    assert not marker.exists()
    assert not (tmp_path / 'out.csv').exists() and not (tmp_path / 'a.png').exists()


def test_corrupt_and_truncated_files_are_called_corrupt(tmp_path: Path) -> None:
    model = MODELS.build(Config.fromfile(str(CONFIG)).model)
    random_bytes = tmp_path / 'random.pth'
    random_bytes.write_bytes(os.urandom(4096))
    with pytest.raises(CorruptCheckpointError, match='is not a torch checkpoint') as info:
        vispe.load_checkpoint(model, random_bytes)
    assert 'pickled' not in str(info.value) and 'weights_only' not in str(info.value)
    good = tmp_path / 'good.pth'
    torch.save({'state_dict': model.state_dict()}, good)
    for cut in (100, good.stat().st_size // 2, good.stat().st_size - 10):
        truncated = tmp_path / f'cut_{cut}.pth'
        truncated.write_bytes(good.read_bytes()[:cut])
        with pytest.raises(CorruptCheckpointError, match=f'{truncated} is corrupt or truncated'):
            vispe.load_checkpoint(model, truncated)
    empty = tmp_path / 'empty.pth'
    empty.write_bytes(b'')
    with pytest.raises(CorruptCheckpointError, match='not a torch checkpoint'):
        vispe.load_checkpoint(model, empty)
