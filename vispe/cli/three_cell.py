"""The Three Cell Experiment (LOOPE, 2025) for any 2D encoding: train a config once per encoding and seed, score the
test split at the best validation average, and write a table, a plot and the JSON behind them.

    vispe three-cell --from-configs configs/vit/vit-t4_*_fmnist-28.py --seeds 0 1 --out models/three_cell
    vispe three-cell --encodings NoPE SinCos2D LOOPE --seeds 0

``--from-configs`` takes the encoding of each config (the zoo's settings, plugins' configs included); ``--encodings``
builds registered encodings (plugins too) with their defaults. Every run trains ``--config`` (default
configs/three_cell/vit-t4_three-cell.py) in ``--work-dir/<label>_s<seed>``; a run whose work dir already holds its
``scores.json`` is read, not trained again. Outputs: ``OUT.json`` (every seed's scores, mean ± spread per encoding,
the command, commit and date), ``OUT.md`` (the table) and ``OUT.png`` (per-family bars).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from mmengine.config import Config

from vispe.engine.arguments import InvalidArgument, existing_file, reported_by

DEFAULT_CONFIG = Path('configs/three_cell/vit-t4_three-cell.py')
COLUMNS = ('distance', 'orientation', 'area', 'vector_sum', 'average')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='vispe three-cell', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--encodings', nargs='*', default=[], help='registered encoding names (default options)')
    parser.add_argument('--from-configs', nargs='*', type=Path, default=[],
                        help='configs whose model.backbone.encoding to test (e.g. the zoo\'s)')
    parser.add_argument('--config', type=Path, default=DEFAULT_CONFIG, help='the Three Cell training config')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
    parser.add_argument('--epochs', type=int, default=None, help='override the config\'s epochs')
    parser.add_argument('--work-dir', type=Path, default=Path('work_dirs/three_cell'))
    parser.add_argument('--out', type=Path, required=True, help='output stem: OUT.json, OUT.md, OUT.png')
    return parser


def encoding_of(config: Path) -> dict[str, Any]:
    """``model.backbone.encoding`` of a classifier config."""
    cfg = Config.fromfile(str(config))
    encoding = cfg.get('model', {}).get('backbone', {}).get('encoding')
    if not isinstance(encoding, dict) or 'type' not in encoding:
        raise InvalidArgument('--from-configs', config, 'has no model.backbone.encoding with a type',
                              'give classifier configs such as configs/vit/vit-t4_*_fmnist-28.py')
    return dict(encoding)


def config_label(config: Path) -> str:
    """The encoding part of a zoo config's name (``vit-t4_rope-axial_fmnist-28.py`` -> ``rope-axial``)."""
    parts = config.stem.split('_')
    return parts[1] if len(parts) == 3 else config.stem


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[tuple[str, dict]]]:
    """The command line and the (label, encoding config) pairs, refused with a message naming the argument."""
    from vispe.encodings.builder import registered_encodings
    parser = build_parser()
    args = parser.parse_args(argv)
    runs: list[tuple[str, dict]] = []
    with reported_by(parser):
        existing_file(args.config, '--config')
        known = registered_encodings()
        for name in args.encodings:
            if name not in known:
                from vispe.registry import unknown_type_message
                parser.error(f'--encodings: {unknown_type_message("encoding", name, sorted(known))}')
            runs.append((name, dict(type=name)))
        for config in args.from_configs:
            existing_file(config, '--from-configs')
            runs.append((config_label(config), encoding_of(config)))
        if not runs:
            raise InvalidArgument('--encodings', '(none)', 'no encoding given',
                                  'name encodings with --encodings or configs with --from-configs')
        if args.epochs is not None and args.epochs < 1:
            raise InvalidArgument('--epochs', args.epochs, 'is below 1', 'give a whole number of epochs >= 1')
    return args, runs


def train_and_score(config: Path, encoding: dict, seed: int, work_dir: Path, epochs: int | None) -> dict[str, Any]:
    """Train ``config`` with ``encoding`` and ``seed`` in ``work_dir`` and score the test split with its best
    validation checkpoint; the scores are written to ``work_dir/scores.json`` (and read from there next time)."""
    from mmengine.runner import Runner

    from vispe import serialization
    from vispe.evaluation.sweep import write_json
    from vispe.files import write_atomically
    done = work_dir / 'scores.json'
    if done.is_file():
        return json.loads(done.read_text())
    cfg = Config.fromfile(str(config))
    cfg.model.backbone.encoding = encoding
    cfg.work_dir = str(work_dir)
    cfg.randomness = dict(seed=seed, deterministic=False)
    if epochs is not None:
        cfg.train_cfg.max_epochs = epochs
        for scheduler in cfg.param_scheduler:
            if scheduler.get('end', 0) > epochs:
                scheduler['end'] = epochs
    runner = Runner.from_cfg(cfg)
    runner.train()
    best = serialization.load(work_dir / 'best.pth', map_location='cpu')
    runner.model.load_state_dict(best['state_dict'])
    metrics = runner.test()
    scores = {name: float(metrics[f'three_cell/{name}']) for name in COLUMNS}
    result = dict(scores=scores, best_epoch=int(best['meta']['epoch']), encoding=encoding, seed=seed)
    write_atomically(done, lambda temporary: write_json(temporary, result))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args, runs = parse_args(argv)
    from vispe.reporting.three_cell import write_three_cell_outputs
    results = {}
    for label, encoding in runs:
        for seed in args.seeds:
            results.setdefault(label, []).append(
                train_and_score(args.config, encoding, seed, args.work_dir / f'{label}_s{seed}', args.epochs))
    paths = write_three_cell_outputs(results, args.out, command=['vispe', 'three-cell', *(argv or sys.argv[1:])],
                                     config=str(args.config))
    print('\n'.join(str(path) for path in paths))
    return 0
