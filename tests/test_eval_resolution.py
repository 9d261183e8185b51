"""tools/eval_resolution.py on tiny checkpoints: rows per size and model, outputs, errors."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from mmengine.config import Config

from vispe.registry import MODELS

from .conftest import REPO_ROOT

TOOL = REPO_ROOT / 'tools' / 'eval_resolution.py'


def make_work_dir(root: Path, name: str, seed: int | None = None, **options: Any) -> Path:
    """A work dir as training leaves it: the dumped config and a weights-only best.pth (a ``seed`` names it
    ``<name>_s<seed>``, sets the config's seed and initialises the weights with it; ``options`` are merged into the
    config as ``--cfg-options`` are)."""
    config = REPO_ROOT / 'configs' / 'vit' / f'vit-t4_{name}_fmnist-28.py'
    work_dir = root / (name if seed is None else f'{name}_s{seed}')
    work_dir.mkdir()
    cfg = Config.fromfile(str(config))
    cfg.merge_from_dict(options)
    if seed is not None:
        cfg.randomness = dict(seed=seed)
    cfg.dump(str(work_dir / config.name))
    torch.manual_seed(seed or 0)
    model = MODELS.build(cfg.model)
    torch.save({'state_dict': model.state_dict(), 'meta': {'epoch': 0}}, work_dir / 'best.pth')
    return work_dir


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_rows_per_model_and_size_and_outputs(tmp_path) -> None:
    runs = [make_work_dir(tmp_path, name) for name in ('ape', 'lookhere')]
    out = tmp_path / 'results' / 'extra'
    result = run_tool(*map(str, runs), '--sizes', '28', '56', '--subset', '30', '--out', str(out),
                      '--encoding-options', '56:global_slope=0.5')
    assert result.returncode == 0, result.stderr
    table = result.stdout.splitlines()
    assert table[0].split() == ['model', '(top-1', '%)', '28', '56']
    assert [line.split()[0] for line in table[2:4]] == ['ape', 'lookhere']
    with open(out.with_suffix('.csv')) as handle:
        rows = list(csv.DictReader(handle))
    assert [(row['model'], row['size']) for row in rows] == [('ape', '28'), ('ape', '56'), ('lookhere', '28'),
                                                             ('lookhere', '56')]
    report = json.loads(out.with_suffix('.json').read_text())
    assert report['encoding_options'] == {'56': {'global_slope': 0.5}}
    assert report['date'][:2] == '20' and (report['commit'] is None or len(report['commit']) == 40)
    assert len(report['runs'][0]['checkpoint_sha256']) == 64 and report['runs'][0]['dataset']['subset'] == 30
    assert report['runs'][0]['train_size'] == 28
    assert out.with_suffix('.png').read_bytes()[:4] == b'\x89PNG'


@pytest.mark.slow
def test_sizes_not_multiple_of_the_patch_and_unknown_options(tmp_path) -> None:
    run = make_work_dir(tmp_path, 'ape')
    odd = run_tool(str(run), '--sizes', '28', '35', '--subset', '10', '--out', str(tmp_path / 'o'))
    assert odd.returncode != 0 and 'not multiples of the patch size 4' in odd.stderr and '--pad' in odd.stderr
    padded = run_tool(str(run), '--sizes', '35', '--subset', '10', '--pad', '--out', str(tmp_path / 'p'))
    assert padded.returncode == 0, padded.stderr
    typo = run_tool(str(run), '--sizes', '28', '--subset', '10', '--encoding-options', 'all:global_slop=1',
                    '--out', str(tmp_path / 't'))
    assert typo.returncode != 0 and "has a test-time option 'global_slop'" in typo.stderr


@pytest.mark.slow
def test_config_and_checkpoint_pair(tmp_path) -> None:
    run = make_work_dir(tmp_path, 'sincos')
    config = next(run.glob('*.py'))
    shutil.move(config, tmp_path / config.name)
    result = run_tool(f'{tmp_path / config.name}::{run / "best.pth"}', '--sizes', '28', '--subset', '10',
                      '--out', str(tmp_path / 'pair'))
    assert result.returncode == 0, result.stderr
    assert 'vit-t4_sincos_fmnist-28' in result.stdout


@pytest.mark.slow
def test_tune_chooses_options_on_held_out_data_beside_the_untuned_row(tmp_path) -> None:
    on_test = make_work_dir(tmp_path, 'sincos', **{'val_dataloader.dataset.split': 'test'})
    refused = run_tool(str(on_test), '--sizes', '28', '--subset', '10', '--tune', '--out', str(tmp_path / 'r'))
    assert refused.returncode == 2 and "validates on its test set (split 'test'" in refused.stderr
    runs = [make_work_dir(tmp_path, 'sincos', seed, **{'val_dataloader.dataset.split': 'minival'})
            for seed in (0, 1)]
    out = tmp_path / 'tuned'
    result = run_tool(*map(str, runs), '--sizes', '28', '56', '--subset', '20', '--tune', '--tune-subset', '20',
                      '--group-seeds', '--out', str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.with_suffix('.json').read_text())
    assert [run['label'] for run in report['runs']] == ['sincos_s0', 'sincos+tuned_s0', 'sincos_s1', 'sincos+tuned_s1']
    assert [group['label'] for group in report['seed_groups']] == ['sincos', 'sincos+tuned']
    record = report['tuning']['sincos_s0']['56']
    assert set(record['options']) == {'backbone.encoding.resize'} and record['built'] == {
        'backbone.encoding.resize': 'extend'}
    assert record['held_out_set']['split'] == 'minival' and record['held_out_set']['subset'] == 20
    assert record['settings_tried'] == 2 and record['held_out_score'] >= record['held_out_score_built']
    at_train_size = report['tuning']['sincos_s0']['28']
    assert at_train_size['options'] == at_train_size['built']  # 'interpolate' ties at the training grid
    assert report['runs'][1]['tuned_from'] == 'sincos_s0' and 'tuned_from' not in report['runs'][0]
    untuned, tuned = report['runs'][0]['results'], report['runs'][1]['results']
    assert tuned['28'] == untuned['28']
    assert 'sincos+tuned' in result.stdout
