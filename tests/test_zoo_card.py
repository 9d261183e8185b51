"""tools/zoo_card.py turns a work dir and an eval_resolution JSON into a card and an index row."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .test_eval_resolution import make_work_dir


@pytest.mark.slow
def test_card_from_tool_outputs(repo_root, tmp_path) -> None:
    run = make_work_dir(tmp_path, 'ape')
    out = tmp_path / 'eval'
    evaluated = subprocess.run([sys.executable, str(repo_root / 'tools' / 'eval_resolution.py'), str(run), '--sizes',
                                '28', '56', '--subset', '20', '--out', str(out)], capture_output=True, text=True,
                               timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr
    zoo = tmp_path / 'zoo'
    zoo.mkdir()
    (zoo / 'README.md').write_text('# zoo\n<!-- zoo:start -->\n<!-- zoo:end -->\n')
    result = subprocess.run([sys.executable, str(repo_root / 'tools' / 'zoo_card.py'), str(run), '--eval',
                             str(out.with_suffix('.json')), '--zoo', str(zoo)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    top1 = json.loads(out.with_suffix('.json').read_text())['runs'][0]['results']['56']['top1']
    card = (zoo / 'ape' / 'README.md').read_text()
    assert f'{top1:.2f}' in card and 'python tools/train.py configs/vit/vit-t4_ape_fmnist-28.py' in card
    assert (zoo / 'ape' / 'ape.pth').is_file()
    assert '| [ape](ape/README.md) |' in (zoo / 'README.md').read_text()
    evaluation, results = (json.loads(path.read_text())
                           for path in (out.with_suffix('.json'), zoo / 'ape' / 'results.json'))
    assert (results['date'], results['commit']) == (evaluation['date'], evaluation['commit']) and results['date']


@pytest.mark.slow
def test_seed_group_makes_one_card_with_mean_spread_and_tuned_rows(repo_root, tmp_path) -> None:
    runs = [make_work_dir(tmp_path, 'ape', seed) for seed in (0, 1)]
    out = tmp_path / 'eval'
    evaluated = subprocess.run([sys.executable, str(repo_root / 'tools' / 'eval_resolution.py'), *map(str, runs),
                                '--sizes', '28', '56', '--subset', '20', '--group-seeds', '--tune', '--tune-subset',
                                '20', '--out', str(out)],
                               capture_output=True, text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr
    report = json.loads(out.with_suffix('.json').read_text())
    per_run = [run['results']['56']['top1'] for run in report['runs'] if 'tuned_from' not in run]
    group, tuned_group = report['seed_groups']
    assert group['members'] == ['ape_s0', 'ape_s1'] and group['seeds'] == [0, 1]
    assert group['results']['56']['mean']['top1'] == pytest.approx(sum(per_run) / 2)
    assert group['results']['56']['spread']['top1'] == pytest.approx(max(per_run) - min(per_run))
    assert 'ape  ' in evaluated.stdout and '±' in evaluated.stdout
    assert out.with_suffix('.seeds.csv').read_text().startswith('group,members,size,top1_mean,top1_spread')
    zoo = tmp_path / 'zoo'
    zoo.mkdir()
    (zoo / 'README.md').write_text('# zoo\n<!-- zoo:start -->\n<!-- zoo:end -->\n')
    command = [sys.executable, str(repo_root / 'tools' / 'zoo_card.py'), '--eval', str(out.with_suffix('.json')),
               '--zoo', str(zoo)]
    partial = subprocess.run([*command, str(runs[0])], capture_output=True, text=True, timeout=300)
    assert partial.returncode == 2 and "the seed group 'ape' has 2 runs" in partial.stderr
    result = subprocess.run([*command, *map(str, runs)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    card = (zoo / 'ape' / 'README.md').read_text()
    assert f'--work-dir {runs[1].as_posix()} --cfg-options randomness.seed=1' in card
    assert (zoo / 'ape' / 'ape_s0.pth').is_file() and (zoo / 'ape' / 'ape_s1.pth').is_file()
    mean, spread = group['results']['56']['mean']['top1'], group['results']['56']['spread']['top1']
    assert f'{mean:.2f} ± {spread:.2f}' in card
    assert '| [ape](ape/README.md) | ' in (zoo / 'README.md').read_text()
    assert f'{mean:.2f} ± {spread:.2f} |' in (zoo / 'README.md').read_text()
    tuned_mean = tuned_group['results']['56']['mean']['top1']
    tuned_spread = tuned_group['results']['56']['spread']['top1']
    assert '| ape+tuned_s1 | ' in card and '| tuned: mean ± spread | ' in card
    chosen = [report['tuning']['ape_s0'][size]['options']['backbone.encoding.interpolation'] for size in ('28', '56')]
    assert f'| ape_s0 | interpolation={chosen[0]} | interpolation={chosen[1]} |' in card
    results = json.loads((zoo / 'ape' / 'results.json').read_text())
    assert results['tuned']['top1']['56'] == pytest.approx(tuned_mean)
    assert results['tuned']['options']['ape_s0']['56'] == {'backbone.encoding.interpolation': chosen[1]}
    assert '| [ape](ape/README.md) +tuned | ' in (zoo / 'README.md').read_text()
    assert f'{tuned_mean:.2f} ± {tuned_spread:.2f} |' in (zoo / 'README.md').read_text()
