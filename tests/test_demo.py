"""The demo runs every registered encoding at 1x, 2x and 4x and prints the table."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_prints_a_row_per_encoding(repo_root) -> None:
    result = subprocess.run(
        [sys.executable, str(repo_root / 'tools' / 'demo.py'), '--img-size', '32', '--batch', '1', '--repeats', '1'],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert 'time/NoPE @128' in lines[1]
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert {'NoPE', 'LearnedAPE', 'SinCos2D', 'FourierFeatures'} <= set(rows)
    assert rows['NoPE'][-1] == '1.00'
