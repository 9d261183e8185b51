"""The main job: trains each chosen encoding, evaluates at several sizes, prints the table, writes the plot."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_trains_evaluates_and_plots(repo_root, tmp_path) -> None:
    out = tmp_path / 'results' / 'extra'
    result = subprocess.run(
        [sys.executable, str(repo_root / 'tools' / 'demo.py'), '--encodings', 'ape', 'alibi2d', '--epochs', '2',
         '--train-subset', '64', '--test-subset', '20', '--sizes', '28', '56', '--work-root', str(tmp_path / 'wd'),
         '--out', str(out)], capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'trained vit-t4_ape_fmnist-28: 2 epochs of 64 images' in result.stdout
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith('vit-t4_')]
    assert [row[0] for row in rows] == ['vit-t4_ape_fmnist-28', 'vit-t4_alibi2d_fmnist-28']
    assert all(len(row) == 3 for row in rows)
    assert out.with_suffix('.png').is_file() and out.with_suffix('.json').is_file()
    assert (out.parent / 'attention_vit-t4_alibi2d_fmnist-28.png').read_bytes()[:4] == b'\x89PNG'


@pytest.mark.slow
def test_demo_names_unknown_encodings(repo_root) -> None:
    result = subprocess.run([sys.executable, str(repo_root / 'tools' / 'demo.py'), '--encodings', 'rope'],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "No config for ['rope']" in result.stderr and 'rope-mixed' in result.stderr
