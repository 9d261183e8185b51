"""`vispe three-cell`: trains a config per encoding and seed, scores the test split at the best validation average,
writes the JSON, the table generated from it and the plot; finished runs are read back, not retrained; bad
arguments are refused naming the fix."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vispe.cli.three_cell import main, run_config
from vispe.reporting.three_cell import three_cell_table

from .conftest import REPO_ROOT


@pytest.fixture
def small_config(tmp_path):
    config = tmp_path / 'three_cell_small.py'
    config.write_text(f"_base_ = ['{REPO_ROOT / 'configs/three_cell/vit-t4_three-cell.py'}']\n"
                      "data = dict(type='ThreeCells', grid=5, cell_size=2, count=120, seed=0)\n"
                      "model = dict(backbone=dict(img_size=10, patch_size=2, embed_dim=16, depth=1, num_heads=2))\n"
                      "train_dataloader = dict(batch_size=32, dataset=dict(data, split='train'))\n"
                      "val_dataloader = dict(dataset=dict(data, split='val'))\n"
                      "test_dataloader = dict(dataset=dict(data, split='test'))\n"
                      "default_hooks = dict(logger=dict(interval=1))\n")
    return config


@pytest.mark.slow
def test_trains_scores_and_writes_the_table_from_its_json(small_config, tmp_path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(REPO_ROOT / 'tests' / 'plugins' / 'vispe_example_plugin'))
    plugin = str(REPO_ROOT / 'tests' / 'plugins' / 'configs' / 'vit_factorized_ape.py')
    out = tmp_path / 'three_cell'
    zoo_configs = [str(REPO_ROOT / f'configs/vit/vit-t4_{name}_fmnist-28.py') for name in ('sincos', 'irpe-ctx')]
    zoo_configs.append('vispe::vit/vit-t4_seqpe_fmnist-28.py')
    arguments = ['--encodings', 'NoPE', 'LOOPE', '--from-configs', *zoo_configs, plugin,
                 '--config', str(small_config), '--epochs', '2', '--seeds', '0', '1',
                 '--work-dir', str(tmp_path / 'runs'), '--out', str(out)]
    assert main(arguments) == 0
    document = json.loads(out.with_suffix('.json').read_text())
    assert set(document['encodings']) == {'NoPE', 'LOOPE', 'sincos', 'irpe-ctx', 'seqpe', 'vit_factorized_ape'}
    assert document['encodings']['seqpe']['runs'][0]['settings']['encoding_losses'] == dict(contrastive=0.1,
                                                                                            distillation=0.1)
    assert [member['type'] for member in document['encodings']['irpe-ctx']['encoding']] == ['LearnedAPE', 'iRPE']
    entry = document['encodings']['sincos']
    assert entry['encoding']['type'] == 'SinCos2D' and entry['seeds'] == [0, 1]
    for family in ('distance', 'orientation', 'area', 'vector_sum', 'average'):
        values = [run['scores'][family] for run in entry['runs']]
        assert entry['mean'][family] == pytest.approx(sum(values) / 2)
        assert 0 <= min(values) <= max(values) <= 100
    assert out.with_suffix('.md').read_text() == three_cell_table(document) + '\n'
    assert out.with_suffix('.png').stat().st_size > 0
    scores = tmp_path / 'runs' / 'NoPE_s0' / 'scores.json'
    written = scores.stat().st_mtime_ns
    assert main(arguments) == 0                                  # finished runs are read back
    assert scores.stat().st_mtime_ns == written
    with pytest.raises(SystemExit):                              # but not those of other settings
        main([*arguments[:arguments.index('--epochs')], '--epochs', '3', *arguments[arguments.index('--seeds'):]])
    assert scores.stat().st_mtime_ns == written


def test_epochs_stretch_the_schedule() -> None:
    run = dict(encoding=dict(type='SeqPE'), encoding_losses=dict(contrastive=0.1), imports=[])
    cfg = run_config('vispe::three_cell/vit-t4_three-cell.py', run, 3, Path('w'), 150)
    assert cfg.train_cfg.max_epochs == 150 and cfg.param_scheduler[0]['end'] == 150
    assert cfg.randomness['seed'] == 3 and cfg.model.backbone.encoding == dict(type='SeqPE')
    assert cfg.model.encoding_losses == dict(contrastive=0.1)


def test_refusals(small_config, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(['--encodings', 'SinCos2d', '--out', str(tmp_path / 'x')])
    assert "Did you mean 'SinCos2D'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(['--out', str(tmp_path / 'x')])
    assert 'no encoding given' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(['--encodings', 'NoPE', 'NoPE', '--out', str(tmp_path / 'x')])
    assert 'names two runs' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(['--encodings', 'KPE', '--config', str(small_config), '--out', str(tmp_path / 'x')])
    assert 'does not build in the Three Cell model' in capsys.readouterr().err
