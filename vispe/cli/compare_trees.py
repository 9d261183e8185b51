"""Benchmark two checkouts of vispe side by side: has a change made any encoding slower?

Each round runs ``tools/benchmark.py`` of every tree once, in turn (a fresh process each, importing that
tree's vispe), so slow drifts of a shared machine hit both trees alike. Within each process the
benchmark times every encoding beside plain timm, so the figure compared is each encoding's ratio to
timm's ViT measured in the same process; the table gives its median over the rounds for each tree and
the relative change (new / old − 1).

    git worktree add /tmp/before <commit-before>
    vispe compare-trees /tmp/before . --sizes 224 512 --batch 4 --rounds 3 --out benchmarks/redesign

Options after the trees and ``--rounds``/``--out`` go to ``tools/benchmark.py`` unchanged (``--arch``,
``--encodings``, ``--sizes``, ``--batch``, ``--repeats``, ``--threads``, ...). ``--out PATH`` writes PATH.json
(with the command and every round's rows) and PATH.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from vispe.engine.arguments import positive_int, recorded_command, reported_by, writable_output
from vispe.reporting.provenance import run_stamp

BASELINE = 'timm (plain ViT)'


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe compare-trees``."""
    parser = argparse.ArgumentParser(prog='vispe compare-trees', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('before', type=Path, help='the checkout to compare against (e.g. a git worktree)')
    parser.add_argument('after', type=Path, help='the checkout with the change')
    parser.add_argument('--rounds', type=positive_int, default=3)
    parser.add_argument('--out', type=Path, default=None, help='write <out>.json and <out>.md')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = build_parser()
    args, benchmark_args = parser.parse_known_args(argv)
    with reported_by(parser):
        for name in ('before', 'after'):
            tree = getattr(args, name)
            if not (tree / 'tools' / 'benchmark.py').is_file() or not (tree / 'vispe' / '__init__.py').is_file():
                parser.error(f'{name} {tree} is not a vispe checkout (no tools/benchmark.py and vispe/); give the '
                             f'root of a clone or a git worktree.')
        if args.out is not None:
            writable_output(args.out, '--out', suffixes=('.json', '.md'))
    return args, benchmark_args


def tree_environment(tree: Path) -> dict[str, str]:
    """The environment in which ``import vispe`` loads ``tree``'s package, checked."""
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    found = subprocess.run([sys.executable, '-c', 'import vispe; print(vispe.__file__)'], env=env, cwd=tree,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f'Python imports vispe from {found}, not from {tree}: check PYTHONPATH handling.')
    return env


def run_once(tree: Path, env: dict[str, str], benchmark_args: list[str], out: Path) -> dict:
    """One benchmark run of ``tree``: its JSON document."""
    command = [sys.executable, str(tree / 'tools' / 'benchmark.py'), *benchmark_args, '--out', str(out)]
    result = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f'benchmark of {tree} failed:\n{result.stderr[-3000:]}')
    return json.loads(out.with_suffix('.json').read_text())


def median_ratios(rounds: list[list[dict]]) -> dict[tuple[int, str, str], float]:
    """(size, pass, model) -> median over rounds of its time over timm's in the same process (rows of a tree whose
    benchmark has no passes are forward passes)."""
    ratios: dict[tuple[int, str, str], list[float]] = {}
    for rows in rounds:
        for row in rows:
            key = (row['size'], row.get('pass', 'forward'), row['model'])
            ratios.setdefault(key, []).append(row[f'ratio_{BASELINE}'])
    return {key: statistics.median(values) for key, values in ratios.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args, benchmark_args = parse_args(argv)
    trees = {'before': args.before, 'after': args.after}
    envs = {name: tree_environment(tree) for name, tree in trees.items()}
    rounds: dict[str, list[list[dict]]] = {name: [] for name in trees}
    devices = set()
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(args.rounds):
            for name, tree in trees.items():
                document = run_once(tree, envs[name], benchmark_args, Path(scratch) / f'{name}{index}')
                rounds[name].append(document['rows'])
                devices.add(document.get('device') or 'not recorded by the before tree')
                print(f'round {index + 1}/{args.rounds}: {name} done', file=sys.stderr)
    before, after = median_ratios(rounds['before']), median_ratios(rounds['after'])
    lines = [['size', 'pass', 'model', 'x timm before', 'x timm after', 'change']]
    for key in sorted(before.keys() & after.keys()):
        if key[2] == BASELINE:
            continue
        lines.append([str(key[0]), key[1], key[2], f'{before[key]:.3f}', f'{after[key]:.3f}',
                      f'{after[key] / before[key] - 1:+.1%}'])
    command = recorded_command('compare-trees', argv, 'tools/compare_trees.py')
    header = f'median over {args.rounds} interleaved rounds of each model\'s time / timm\'s in the same process'
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    print(header)
    print('\n'.join('  '.join(cell.ljust(width) for cell, width in zip(line, widths)) for line in lines))
    device = ' / '.join(sorted(devices))
    print(f'device: {device}')
    if args.out:
        args.out.with_suffix('.json').write_text(json.dumps(dict(command=command, **run_stamp(args.after),
                                                                commit_before=run_stamp(args.before)['commit'],
                                                                device=device, rounds=rounds), indent=1))
        table = ['| ' + ' | '.join(lines[0]) + ' |', '|' + '---|' * len(lines[0])]
        table += ['| ' + ' | '.join(line) + ' |' for line in lines[1:]]
        args.out.with_suffix('.md').write_text(f'{header}\n\n`{command}`\n\ndevice: {device}\n\n'
                                               + '\n'.join(table) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
