"""Attention maps: query choice, rollout, a figure from tools/vis_attention.py, capture leaves outputs unchanged."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import vispe
from vispe.visualization import attention_rollout, query_index, query_map

from .helpers import tiny_vit
from .test_eval_resolution import make_work_dir


def test_query_indices() -> None:
    assert query_index('cls', (4, 6), 1) == 0
    assert query_index('center', (4, 6), 1) == 1 + 2 * 6 + 3
    assert query_index('1,2', (4, 6), 2) == 2 + 6 + 2
    with pytest.raises(ValueError, match='outside the 4x6 grid'):
        query_index('4,0', (4, 6), 1)
    with pytest.raises(ValueError, match='no prefix tokens'):
        query_index('cls', (4, 6), 0)


def test_drawn_attention_sums_to_one_over_keys_and_capture_changes_nothing() -> None:
    vit = tiny_vit('LookHere')
    images = torch.randn(1, 3, 40, 56)
    before = vit(images)
    maps = vispe.capture_attention(vit, images)
    after = vit(images)
    assert torch.equal(before, after)
    pos = vit.positions(images)
    grid = query_map(maps[-1][0], query_index('center', pos.grid_size, 1), pos.grid_size, 1)
    prefix_share = maps[-1][0, :, query_index('center', pos.grid_size, 1), 0]
    assert grid.shape == (4, 10, 14)
    assert torch.allclose(grid.sum((-1, -2)) + prefix_share, torch.ones(4), atol=1e-5)
    rollout = attention_rollout(maps)
    assert rollout.shape == (1, 141, 141) and torch.allclose(rollout.sum(-1), torch.ones(1, 141), atol=1e-5)


@pytest.mark.slow
def test_tool_writes_a_figure(repo_root, tmp_path) -> None:
    run = make_work_dir(tmp_path, 'lookhere')
    out = tmp_path / 'attention.png'
    result = subprocess.run([sys.executable, str(repo_root / 'tools' / 'vis_attention.py'), str(next(run.glob('*.py'))),
                             str(run / 'best.pth'), '--image', 'fmnist:3', '--sizes', '28', '56', '--heads', 'all',
                             '--query', '3,3', '--out', str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:4] == b'\x89PNG'
    rollout = subprocess.run([sys.executable, str(repo_root / 'tools' / 'vis_attention.py'),
                              str(next(run.glob('*.py'))), str(run / 'best.pth'), '--image', 'no-such.png',
                              '--sizes', '28', '--out', str(out)], capture_output=True, text=True, timeout=600)
    assert rollout.returncode != 0 and "not a file, and not 'fmnist:INDEX'" in rollout.stderr


def test_photos_of_any_size_go_through_the_test_pipeline() -> None:
    from vispe.datasets.transforms import classification_transform
    photo = torch.randint(0, 256, (1, 512, 384), dtype=torch.uint8)
    assert classification_transform(42, 28)(photo).shape == (1, 42, 42)
