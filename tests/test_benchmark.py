"""tools/benchmark.py runs in both modes and writes its CSV and JSON."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys

import pytest

from vispe.reporting.provenance import run_stamp


def assert_run_stamped(document: dict, repo_root) -> None:
    """The JSON records when it ran (UTC, within the last hour) and the commit of the checkout that ran it."""
    age = datetime.datetime.now(datetime.timezone.utc) - datetime.datetime.fromisoformat(document['date'])
    assert datetime.timedelta(0) <= age < datetime.timedelta(hours=1)
    assert document['commit'] == run_stamp(repo_root)['commit']


def run_benchmark(repo_root, tmp_path, *args: str, sizes=('32', '64')) -> subprocess.CompletedProcess:
    command = [sys.executable, str(repo_root / 'tools' / 'benchmark.py'), '--arch', 'vit_tiny_patch16_224',
               '--sizes', *sizes, '--batch', '1', '--repeats', '1', '--warmup', '0', '--out', str(tmp_path / 'b'),
               *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_model_benchmark(repo_root, tmp_path) -> None:
    result = run_benchmark(repo_root, tmp_path, '--encodings', 'RoPEAxial', '--configs', '{"type": "LookHere"}',
                           '--memory', sizes=('48',))
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / 'b.json').read_text())
    assert_run_stamped(document, repo_root)
    rows = document['rows']
    assert [row['model'] for row in rows] == ['timm (plain ViT)', 'timm (plain ViT) control', 'NoPE', 'RoPEAxial',
                                             'LookHere']
    assert all(row['ratio_NoPE'] > 0 and row['peak_bytes'] > 0 and row['pass'] == 'forward' for row in rows)
    assert rows[-1]['tables_bytes'] > 0 and rows[2]['tables_bytes'] == 0
    assert rows[0]['ratio_timm (plain ViT)'] == rows[0]['ratio_timm (plain ViT)_high'] == 1.0
    csv_lines = (tmp_path / 'b.csv').read_text().splitlines()
    assert csv_lines[0].startswith('size,model,pass,seconds') and csv_lines[0].endswith(',device')
    assert document['device'] == f"{document['machine']['cpu']}, {document['machine']['usable_cores']} cores"
    assert all(line.endswith(f'"{document["device"]}"') for line in csv_lines[1:])
    nope_params, lookhere_params = rows[2]['params'], rows[-1]['params']
    assert nope_params == lookhere_params and rows[0]['params'] > nope_params  # timm's APE table
    markdown = (tmp_path / 'b.md').read_text().splitlines()
    assert markdown[2].startswith('`python tools/benchmark.py') and markdown[4].startswith('machine: ')
    assert markdown[6].startswith('| size | pass | model |')
    assert len([line for line in markdown if line.startswith('| 48 |')]) == len(rows)


@pytest.mark.slow
def test_forward_backward_benchmark(repo_root, tmp_path) -> None:
    result = run_benchmark(repo_root, tmp_path, '--encodings', 'RoPEMixed', '--backward', sizes=('32',))
    assert result.returncode == 0, result.stderr
    assert 'forward + backward' in result.stdout
    rows = json.loads((tmp_path / 'b.json').read_text())['rows']
    assert rows[-1]['params'] > rows[2]['params']  # RoPEMixed learns its frequencies
    both = run_benchmark(repo_root, tmp_path, '--encodings', 'RoPEAxial', '--passes', 'forward', 'backward',
                         '--repeats', '2', sizes=('32',))
    assert both.returncode == 0, both.stderr
    rows = json.loads((tmp_path / 'b.json').read_text())['rows']
    assert [row['pass'] for row in rows] == ['forward'] * 4 + ['forward + backward'] * 4
    assert all(len(row['samples']) == 2 and row['ratio_NoPE_high'] >= row['ratio_NoPE'] for row in rows)
    compiled = run_benchmark(repo_root, tmp_path, '--encodings', 'none', '--compile', sizes=('32',))
    assert compiled.returncode == 0, compiled.stderr
    assert '(torch.compile)' in compiled.stdout and len(json.loads((tmp_path / 'b.json').read_text())['rows']) == 3
    clash = run_benchmark(repo_root, tmp_path, '--backward', '--passes', 'forward', sizes=('32',))
    assert clash.returncode != 0 and 'the same as --passes backward' in clash.stderr
    layer = run_benchmark(repo_root, tmp_path, '--layer', '--backward', sizes=('32',))
    assert layer.returncode == 0, layer.stderr


@pytest.mark.slow
def test_layer_benchmark_and_unknown_name(repo_root, tmp_path) -> None:
    result = run_benchmark(repo_root, tmp_path, '--layer')
    assert result.returncode == 0, result.stderr
    assert 'ComRoPE LD b=2 dense d×d' in result.stdout
    bad = run_benchmark(repo_root, tmp_path, '--encodings', 'RoPEAxal')
    assert bad.returncode != 0 and "Did you mean 'RoPEAxial'" in bad.stderr


@pytest.mark.slow
def test_point_layer_benchmark_with_decoder_memory(repo_root, tmp_path) -> None:
    command = [sys.executable, str(repo_root / 'tools' / 'benchmark.py'), '--point-layer', '--queries', '8',
               '--points', '64', '--batch', '1', '--repeats', '1', '--warmup', '0', '--backward', '--memory',
               '--out', str(tmp_path / 'p')]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = json.loads((tmp_path / 'p.json').read_text())['rows']
    assert [row['model'] for row in rows] == ['no position (NoPE)', 'NoPE control', 'FourierXYZ', 'SinCosXYZ',
                                              'VertexRPE (table)']
    assert rows[0]['ratio'] == rows[0]['ratio_high'] == 1.0
    assert all(row['decoder8_train_peak_bytes'] > 0 for row in rows)
    assert '| encoding | ms |' in (tmp_path / 'p.md').read_text()


@pytest.mark.slow
def test_view_stack_benchmark_and_a_bad_layout(repo_root, tmp_path) -> None:
    tool = [sys.executable, str(repo_root / 'tools' / 'benchmark.py'), '--view-stack']
    result = subprocess.run([*tool, '2x3x4', '--backward', '--repeats', '1', '--warmup', '0',
                             '--out', str(tmp_path / 'v')], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    document = json.loads((tmp_path / 'v.json').read_text())
    assert_run_stamped(document, repo_root)
    rows = document['rows']
    assert [row['model'] for row in rows] == ['plain SDPA', 'plain SDPA control', "GTA on='qkvo'", "GTA on='qk'"]
    assert rows[0]['ratio'] == rows[0]['ratio_high'] == 1.0 and all(row['layout'] == '2 x 3x4' for row in rows)
    bad = subprocess.run([*tool, '2x14'], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and 'VIEWSxROWSxCOLS' in bad.stderr


def test_fps_benchmark_times_both_backends_and_compares_their_indices(repo_root, tmp_path, capsys,
                                                                    monkeypatch) -> None:
    pytest.importorskip('fpsample')
    from vispe.cli.benchmark import main
    from vispe.engine import benchmark_fps
    argv = ['--fps', '--batch', '2', '--points', '300', '--samples', '40', '--repeats', '2', '--warmup', '1',
            '--device', 'cpu', '--note', 'shared machine', '--out', str(tmp_path / 'f')]
    assert main(argv) == 0
    document = json.loads((tmp_path / 'f.json').read_text())
    assert_run_stamped(document, repo_root)
    assert document['note'] == 'shared machine' and document['machine']['load_average_1min_after'] is not None
    assert document['device'] == f"{document['machine']['cpu']}, {document['machine']['usable_cores']} cores"
    rows = document['rows']
    assert [(row['model'], row['runs_on'], row['same_indices']) for row in rows] == [('torch loop', 'cpu', None),
                                                                                   ('fpsample', 'cpu', True)]
    assert rows[0]['ratio'] == rows[0]['ratio_high'] == 1.0 and all(len(row['samples']) == 2 for row in rows)
    assert all((row['batch'], row['points'], row['num_samples']) == (2, 300, 40) for row in rows)
    markdown = (tmp_path / 'f.md').read_text()
    assert 'note: shared machine' in markdown and '| cpu | fpsample |' in markdown and markdown.count('| yes |') == 1
    assert 'machine: ' in markdown and 'load average' in markdown
    csv_lines = (tmp_path / 'f.csv').read_text().splitlines()
    assert csv_lines[0] == 'runs on,backend,ms,x torch loop,same indices,device'
    assert all(line.endswith(f'"{document["device"]}"') for line in csv_lines[1:])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(['--fps', '--points', '30', '--samples', '40'])
    assert '--samples 40: more than the 30 points of each cloud' in capsys.readouterr().err
    monkeypatch.setattr(benchmark_fps, 'fpsample_importable', lambda: False)
    with pytest.raises(SystemExit):
        main(['--fps', '--points', '30', '--samples', '4'])
    assert 'pip install "vispe[3d]"' in capsys.readouterr().err
