"""``make gpu-check`` on a machine without CUDA: it refuses with the reason, and the CUDA suite skips, saying why."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from .conftest import REPO_ROOT
from .helpers import load_developer_tool


@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has CUDA: `make gpu-check` runs here')
def test_gpu_check_refuses_without_cuda(capsys) -> None:
    assert load_developer_tool('gpu_check').main([]) == 2
    assert 'gpu-check needs a CUDA device' in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has CUDA: the suite runs instead')
def test_the_cuda_suite_skips_with_its_reason() -> None:
    result = subprocess.run([sys.executable, '-m', 'pytest', 'tests/cuda', '-m', 'cuda', '-q', '-rs',
                             '-p', 'no:cacheprovider', '-k', 'LookHere or detr or amp'], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:]
    assert ' passed' not in result.stdout and 'needs a CUDA device: run `make gpu-check`' in result.stdout


def test_the_gaussian_steps_are_commands_vispe_accepts() -> None:
    import importlib

    from vispe.cli.main import COMMANDS

    steps = load_developer_tool('gpu_check').gaussian_steps()
    assert [step[3] for step in steps] == ['gaussians-from-points', *['compress'] * 4, 'gaussians-report']
    for step in steps:
        module = importlib.import_module(f'vispe.cli.{COMMANDS[step[3]].module}')
        module.build_parser().parse_args(step[4:])
    report = steps[-1]
    assert report[report.index('--renderer') + 1] == 'gsplat' and report[report.index('--device') + 1] == 'cuda'
