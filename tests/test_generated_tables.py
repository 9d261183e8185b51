"""Every results and benchmark table of README.md and docs/ is generated, current and stamped (tools/update_readme.py
and vispe.reporting), and result JSON records the date and commit of its run."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from vispe.reporting.benchmark_tables import UNRECORDED, canonical_model, device_of, vit_table
from vispe.reporting.markers import block_body, block_names, markers
from vispe.reporting.provenance import Provenance, run_stamp

from .helpers import load_developer_tool, load_tool

STAMP = re.compile(r'<sub>Source: .*\d{4}-\d{2}-\d{2}, (commit [0-9a-f]{7}|no commit recorded) \(.*</sub>|'
                   r'<sub>Source: the encoding registry')
# A figure of a measurement: a decimal ratio (1.52×), a time or size (34 ms, 142 MB), a mean ± spread; or a header
# that names a ratio to a baseline (× NoPE).
MEASURED = re.compile(r'\d\.\d+\s*×|\d\s*(?:ms|MB|GB)\b|\d\.\d+\s*±\s*\d|×\s*[A-Za-z]')


def documents(repo_root: Path) -> list[Path]:
    return [repo_root / 'README.md', *sorted((repo_root / 'docs').rglob('*.md'))]


def without_blocks(text: str) -> str:
    for name in block_names(text):
        start, end = markers(name)
        head, rest = text.split(start, 1)
        text = head + rest.split(end, 1)[1]
    return text


def hand_typed_tables(text: str) -> list[str]:
    """Markdown tables outside marker blocks whose rows hold a measured figure (their first matching row each)."""
    found, table = [], []
    for line in [*without_blocks(text).splitlines(), '']:
        if line.lstrip().startswith('|'):
            table.append(line)
            continue
        hits = [row for row in table if MEASURED.search(row)]
        found += hits[:1]
        table = []
    return found


def write_json(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def flex_json(lookhere_ratio: float = 1.5) -> dict:
    def row(model: str, value: float, peak: float) -> dict:
        return {'size': 1024, 'model': model, 'pass': 'forward', 'seconds': value, 'peak_bytes': peak * 2 ** 20,
                'ratio_NoPE': value, 'ratio_NoPE_high': value + 0.1}
    return {'command': 'python tools/benchmark.py --batch 1', 'date': '2026-01-02T03:04:05+00:00',
            'commit': 'abcdef1234567890', 'title': 'a test run',
            'rows': [row('NoPE', 1.0, 100), row('LookHere', lookhere_ratio, 142)]}


def test_readme_and_docs_tables_are_current(repo_root, capsys) -> None:
    assert load_developer_tool('update_readme').main(['--check']) == 0, capsys.readouterr().err


def test_every_marker_block_has_a_stamp(repo_root) -> None:
    blocks = {(path.name, name): block_body(path.read_text(), name)
              for path in documents(repo_root) for name in block_names(path.read_text())}
    assert ('results.md', 'zoo') in blocks and ('benchmarks.md', 'bench-1024') in blocks
    assert [key for key, body in blocks.items() if not STAMP.search(body)] == []


def test_no_results_table_outside_marker_blocks(repo_root) -> None:
    found = {path.relative_to(repo_root).as_posix(): hand_typed_tables(path.read_text())
             for path in documents(repo_root)}
    assert {name: rows for name, rows in found.items() if rows} == {}


def test_the_hand_typed_table_check_can_fail() -> None:
    generated = '<!-- bench-1024:start -->\n| model | 1024 px |\n|---|---|\n| LookHere | 1.52×, 142 MB |\n' \
                '<!-- bench-1024:end -->\n'
    typed = '| encoding | mAP |\n|---|---|\n| PETR | 0.368 ± 0.026 |\n'
    sizes = '| config | image |\n|---|---|\n| petr-r18 | 90 × 160, a 4×4 matrix |\n'
    assert hand_typed_tables(generated + sizes) == []
    assert hand_typed_tables(generated + typed) == ['| PETR | 0.368 ± 0.026 |']
    assert hand_typed_tables('| model | × NoPE |\n|---|---|\n| a | 1.2 |\n') == ['| model | × NoPE |']


def test_blocks_of_any_file_are_filled_and_checked(repo_root, tmp_path, capsys) -> None:
    tool = load_developer_tool('update_readme')
    write_json(tmp_path / 'benchmarks' / 'flex_1024_vit-s16_cpu1.json', flex_json())
    readme = tmp_path / 'README.md'
    readme.write_text('# x\n\nprose\n\n<!-- bench-1024:start -->\n<!-- bench-1024:end -->\n\nmore prose\n')
    arguments = ['--root', str(tmp_path), '--files', str(readme)]
    assert tool.main([*arguments, '--check']) == 1
    assert 'README.md: bench-1024' in capsys.readouterr().err
    assert tool.main(arguments) == 0
    text = readme.read_text()
    assert '| LookHere | 1.50× (1.60), 142 MB |' in text and text.endswith('<!-- bench-1024:end -->\n\nmore prose\n')
    assert ('`benchmarks/flex_1024_vit-s16_cpu1.json`: run 2026-01-02, commit abcdef1 (recorded in the JSON)'
            in text)
    assert tool.main([*arguments, '--check']) == 0
    write_json(tmp_path / 'benchmarks' / 'flex_1024_vit-s16_cpu1.json', flex_json(lookhere_ratio=1.7))
    assert tool.main([*arguments, '--check']) == 1


@pytest.mark.parametrize('content, message', [(None, 'flex_1024_vit-s16_cpu1.json: missing'),
                                              ('{"rows": [', 'flex_1024_vit-s16_cpu1.json: malformed JSON'),
                                              ('{"date": "2026-01-02", "rows": [{"model": "NoPE"}]}',
                                               "block 'bench-1024': benchmarks/flex_1024_vit-s16_cpu1.json lack")])
def test_a_missing_or_malformed_json_is_named(repo_root, tmp_path, capsys, content, message) -> None:
    if content is not None:
        (tmp_path / 'benchmarks').mkdir()
        (tmp_path / 'benchmarks' / 'flex_1024_vit-s16_cpu1.json').write_text(content)
    readme = tmp_path / 'README.md'
    readme.write_text('<!-- bench-1024:start -->\n<!-- bench-1024:end -->\n')
    assert load_developer_tool('update_readme').main(['--root', str(tmp_path), '--files', str(readme)]) == 2
    assert message in capsys.readouterr().err


def test_an_unknown_block_gets_the_closest_name(repo_root, tmp_path, capsys) -> None:
    readme = tmp_path / 'README.md'
    readme.write_text('<!-- bench-1042:start -->\n<!-- bench-1042:end -->\n')
    assert load_developer_tool('update_readme').main(['--root', str(tmp_path), '--files', str(readme)]) == 2
    assert "unknown marker block 'bench-1042'; did you mean 'bench-1024'?" in capsys.readouterr().err


def test_a_newer_run_of_the_same_configuration_replaces_the_older_row() -> None:
    assert canonical_model('iRPE method=product mode=contextual on=k') == 'iRPE'
    assert canonical_model('PEG after_blocks=(0, 1)') == 'PEG after_blocks=(0, 1)'
    assert canonical_model('timm (plain ViT) control') == 'timm (plain ViT) control'
    older = flex_json(lookhere_ratio=2.35)
    older['rows'].append({**older['rows'][1], 'model': 'ALiBi2D', 'ratio_NoPE': 1.2})
    newer = flex_json(lookhere_ratio=1.52)
    newer['rows'][1]['model'] = 'LookHere directions=halves'
    text = vit_table(older, 'NoPE', [('new.json', newer)])
    assert '2.35' not in text and '| ALiBi2D | 1.20×' in text and '| NoPE |' in text
    assert 'Measured again by the newer run `new.json`, dropped here: LookHere at 1024 px.' in text


def test_each_table_names_its_device_and_a_run_on_another_device_replaces_nothing() -> None:
    older = flex_json(lookhere_ratio=2.35)
    newer = {**flex_json(lookhere_ratio=1.1), 'device': 'NVIDIA H100 80GB HBM3'}
    text = vit_table(older, 'NoPE', [('cuda.json', newer)])
    assert '2.35' in text and 'Measured again' not in text and f'Device: {UNRECORDED}.' in text
    assert 'Device: NVIDIA H100 80GB HBM3.' in vit_table(newer, 'NoPE')
    cpu = {'cpu': 'AMD EPYC', 'usable_cores': 2, 'gpu': None}
    assert device_of({'machine': cpu}) == 'AMD EPYC, 2 cores'
    assert device_of({'machine': {**cpu, 'gpu': 'NVIDIA H200'}}) == 'NVIDIA H200'
    line = 'machine: AMD EPYC, 2 of 2 cores, Linux-6.1-x86_64-with-glibc2.36, Python 3.11.7, torch 2.14.1, 1 threads'
    assert device_of({'machine': line}) == 'AMD EPYC, 2 cores'
    assert device_of({'machine': line.replace('2 cores,', '2 cores, NVIDIA H200,')}) == 'NVIDIA H200'


def test_run_stamp_and_provenance_from_git(tmp_path) -> None:
    assert run_stamp(tmp_path)['commit'] is None
    git = ['git', '-C', str(tmp_path), '-c', 'user.name=t', '-c', 'user.email=t@t']
    subprocess.run([*git, 'init', '-q'], check=True)
    write_json(tmp_path / 'old.json', {'rows': []})
    subprocess.run([*git, 'add', 'old.json'], check=True)
    subprocess.run([*git, 'commit', '-qm', 'a run'], check=True)
    head = subprocess.run([*git, 'rev-parse', 'HEAD'], capture_output=True, text=True, check=True).stdout.strip()
    stamp = run_stamp(tmp_path)
    assert stamp['commit'] == head and stamp['date'].endswith('+00:00')
    (tmp_path / 'sub').mkdir()
    assert run_stamp(tmp_path / 'sub')['commit'] is None  # inside a work tree, not its top
    provenance = Provenance.of(tmp_path / 'old.json', {'rows': []}, tmp_path)
    assert (provenance.commit, provenance.how) == (head[:7], 'git log')
    assert 'git log: the last commit that changed the file' in provenance.describe()
    recorded = Provenance.of(tmp_path / 'new.json', {'date': stamp['date'], 'commit': head}, tmp_path)
    assert recorded.describe() == f'run {stamp["date"][:10]}, commit {head[:7]} (recorded in the JSON)'


def test_compare_trees_records_the_date_and_both_commits(repo_root, tmp_path, monkeypatch) -> None:
    tool = load_tool('compare_trees')
    rows = [{'size': 32, 'model': name, 'ratio_timm (plain ViT)': value}
            for name, value in (('timm (plain ViT)', 1.0), ('NoPE', 1.1))]
    monkeypatch.setattr(tool, 'tree_environment', lambda tree: {})
    monkeypatch.setattr(tool, 'run_once', lambda tree, env, args, out: {'rows': rows, 'device': 'AMD EPYC, 2 cores'})
    monkeypatch.setattr('sys.argv', ['compare_trees.py', str(repo_root), str(repo_root), '--rounds', '1',
                                     '--out', str(tmp_path / 'c')])
    assert tool.main() == 0
    document = json.loads((tmp_path / 'c.json').read_text())
    head = run_stamp(repo_root)['commit']
    assert document['commit'] == document['commit_before'] == head and document['date'].endswith('+00:00')
    assert document['rounds']['after'] == [rows] and document['device'] == 'AMD EPYC, 2 cores'
    assert 'device: AMD EPYC, 2 cores' in (tmp_path / 'c.md').read_text()


def test_a_stamp_copied_from_git_log_needs_no_history(tmp_path) -> None:
    """The committed result files carry their git-log stamp, so a clone without history (shallow CI) stamps them
    the same."""
    document = {'date': '2026-12-04T10:00:00+00:00', 'commit': '0c22443' + '0' * 33, 'date_source': 'git log'}
    provenance = Provenance.of(tmp_path / 'old.json', document, tmp_path)
    assert provenance.describe() == '2026-12-04, commit 0c22443 (git log: the last commit that changed the file)'


def test_every_committed_result_json_records_its_date(repo_root) -> None:
    undated = [path.relative_to(repo_root).as_posix()
               for folder in ('benchmarks', 'models') for path in sorted((repo_root / folder).rglob('*.json'))
               if not json.loads(path.read_text()).get('date')]
    assert not undated, f'result JSON without "date"/"commit" (re-run its tool, which records them): {undated}'


def _multiview_document(date: str, commit: str, groups: dict[str, float], rig: str = 'config') -> dict:
    result = dict(rig=rig, height=90, width=160, intrinsics_scale=1.0)
    metrics = lambda value: {'nusc/mAP': value, 'nusc/NDS': value, 'nusc/mATE': 1.0, 'nusc/mASE': 0.5,  # noqa: E731
                             'nusc/mAOE': 1.5, 'nusc/car_AOE': 1.4, 'nusc/pedestrian_AOE': 0.7,
                             **{f'nusc/devkit/{name}': value for name in ('mAP', 'NDS', 'NDS_official')}}
    return dict(date=date, commit=commit, seed_groups=[
        dict(label=label, results=[dict(result, mean=metrics(value), spread=dict.fromkeys(metrics(value), 0.0))])
        for label, value in groups.items()])


def test_a_seed_group_comes_from_its_latest_evaluation_whole() -> None:
    """A configuration evaluated again (a newer commit) replaces all its cells, and an older document keeps the
    groups nobody measured again; the per-class orientation table reads the classes the JSON records."""
    from vispe.reporting.result_tables import latest_groups, multiview_table, orientation_table
    old = _multiview_document('2026-12-02T00:00:00+00:00', 'a' * 40, {'lid': 0.3, 'ud': 0.2})
    old_rig2 = _multiview_document('2026-12-02T00:00:01+00:00', 'a' * 40, {'lid': 0.25}, rig='other')
    new = _multiview_document('2026-12-06T00:00:00+00:00', 'b' * 40, {'lid': 0.4})
    kept = [(document['commit'][0], group['label']) for document, group in latest_groups([old, old_rig2, new])]
    assert kept == [('a', 'ud'), ('b', 'lid')]
    text = multiview_table([old, old_rig2, new])
    assert '| `lid` | 0.400 ± 0.000 |' in text and '0.250' not in text and '| `ud` | 0.200 ± 0.000 |' in text
    orientation = orientation_table([old, new], height=90)
    assert orientation.splitlines()[0] == '| seed group | rig | car | pedestrian | mAOE |'
    assert '| `lid` | config | 1.40 ± 0.00 | 0.70 ± 0.00 | 1.50 ± 0.00 |' in orientation


def test_latest_evaluation_with_a_rerun_at_one_commit_ties_and_no_commit() -> None:
    """A re-run evaluated at the same commit replaces the earlier one (no duplicate row); equal dates go to the later
    document of the list; documents without a commit never join another's batch."""
    from vispe.reporting.result_tables import latest_groups, nuscenes_table
    first = _multiview_document('2026-12-06T01:00:00+00:00', 'c' * 40, {'lid': 0.3})
    rerun = _multiview_document('2026-12-06T02:00:00+00:00', 'c' * 40, {'lid': 0.4})
    for documents in ([first, rerun], [rerun, first]):
        rows = [line for line in nuscenes_table(documents, 90).splitlines() if line.startswith('| `lid`')]
        assert len(rows) == 1 and '0.400 ± 0.000' in rows[0]
    tie_a = _multiview_document('2026-12-06T03:00:00+00:00', 'a' * 40, {'ud': 0.1})
    tie_b = _multiview_document('2026-12-06T03:00:00+00:00', 'b' * 40, {'ud': 0.2})
    assert [document['commit'][0] for document, _ in latest_groups([tie_a, tie_b])] == ['b']
    assert [document['commit'][0] for document, _ in latest_groups([tie_b, tie_a])] == ['a']
    loose = [_multiview_document(f'2026-12-0{day}T00:00:00+00:00', None, {'nope': value})
             for day, value in ((1, 0.1), (2, 0.2))]
    assert [group['results'][0]['mean']['nusc/mAP'] for _, group in latest_groups(loose)] == [0.2]
