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
    assert f'{top1:.2f}' in card and 'python tools/train.py configs/vit/vit-t2_ape_fmnist-28.py' in card
    assert (zoo / 'ape' / 'ape.pth').is_file()
    assert '| [ape](ape/README.md) |' in (zoo / 'README.md').read_text()
