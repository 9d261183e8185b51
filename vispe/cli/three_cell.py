"""The Three Cell Experiment (LOOPE, 2025) for any 2D encoding: train a config once per encoding and seed, score the
test split at the best validation average, and write a table, a plot and the JSON behind them.

    vispe three-cell --from-configs configs/vit/vit-t4_*_fmnist-28.py --seeds 0 1 --out models/three_cell
    vispe three-cell --encodings NoPE SinCos2D LOOPE --seeds 0

``--from-configs`` takes the encoding of each config (the zoo's settings, stacks, and plugins' through the config's
``custom_imports``; labelled by the config's name); ``--encodings`` builds registered encodings (plugins too) with their defaults. Every
run trains ``--config`` (default the packaged vispe::three_cell/vit-t4_three-cell.py) in
``--work-dir/<label>_s<seed>``; a run whose work dir holds a ``scores.json`` of the same config, encoding and epochs
is read, not trained again (one of other settings is refused). Outputs: ``OUT.json`` (every seed's scores, mean ±
spread per encoding, the command, commit and date), ``OUT.md`` (the table) and ``OUT.png`` (per-family bars).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence

from mmengine.config import Config

from vispe.engine.arguments import InvalidArgument, recorded_command, reported_by

DEFAULT_CONFIG = 'vispe::three_cell/vit-t4_three-cell.py'
COLUMNS = ('distance', 'orientation', 'area', 'vector_sum', 'average')


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe three-cell``."""
    parser = argparse.ArgumentParser(prog='vispe three-cell', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--encodings', nargs='*', default=[], help='registered encoding names (default options)')
    parser.add_argument('--from-configs', nargs='*', default=[],
                        help='configs (paths or vispe:: names) whose model.backbone.encoding to test (the zoo\'s)')
    parser.add_argument('--config', default=DEFAULT_CONFIG, help='the Three Cell training config (a path or vispe::)')
    parser.add_argument('--seeds', nargs='+', type=int, default=[0])
    parser.add_argument('--epochs', type=int, default=None, help='override the config\'s epochs')
    parser.add_argument('--work-dir', type=Path, default=Path('work_dirs/three_cell'))
    parser.add_argument('--out', type=Path, required=True, help='output stem: OUT.json, OUT.md, OUT.png')
    return parser


def encoding_of(config: Path) -> dict[str, Any]:
    """The encoding of a model config, ``model.backbone.encoding`` (a classifier) or ``model.encoding`` (a ViT): a config
    dict with a type, or a list (a stack); the weights of its regularisers, ``model.encoding_losses`` (SeqPE's); and
    its ``custom_imports`` (a plugin's module, imported here): ``dict(encoding=..., encoding_losses=..., imports=...)``.
    """
    from vispe.engine.runner import load_config
    cfg = load_config(config)
    model = cfg.get('model', {})
    encoding = model.get('backbone', {}).get('encoding') or model.get('encoding')
    found = dict(encoding_losses=dict(model.get('encoding_losses') or {}),
                 imports=list((cfg.get('custom_imports') or {}).get('imports', [])))
    if isinstance(encoding, dict) and 'type' in encoding:
        return dict(encoding=dict(encoding), **found)
    if isinstance(encoding, (list, tuple)) and encoding:
        return dict(encoding=[dict(member) for member in encoding], **found)
    raise InvalidArgument('--from-configs', config, 'has no model.backbone.encoding or model.encoding (a dict with a '
                          'type, or a list)', 'give model configs such as configs/vit/vit-t4_*_fmnist-28.py')


def config_label(config: Path) -> str:
    """The encoding part of a zoo-style config name, ``<model>_<encoding>_<data>`` with a size in the model and data
    parts (``vit-t4_rope-axial_fmnist-28.py`` -> ``rope-axial``); any other config's own name."""
    parts = config.stem.split('_')
    if len(parts) == 3 and '-' in parts[0] and '-' in parts[2]:
        return parts[1]
    return config.stem


def run_config(config: str, run: dict[str, Any], seed: int, work_dir: Path, epochs: int | None) -> Config:
    """``config`` with the run's encoding and regulariser weights, ``seed``, ``work_dir`` and, given ``epochs``, the
    schedule stretched to them (every scheduler that ended with training ends with the new count)."""
    from vispe.engine.runner import load_config
    cfg = load_config(config, work_dir=work_dir)
    cfg.model.backbone.encoding = run['encoding']
    if run['encoding_losses']:
        cfg.model.encoding_losses = run['encoding_losses']
    if run['imports']:
        cfg.custom_imports = dict(imports=run['imports'], allow_failed_imports=False)
    cfg.randomness = dict(seed=seed, deterministic=False)
    # mmengine keeps a run's state (the best score so far) under its experiment name, by default a timestamp that two
    # runs of one process may share
    cfg.experiment_name = f'{Path(work_dir).name}_{time.strftime("%Y%m%d_%H%M%S")}'
    if epochs is not None:
        trained = cfg.train_cfg.max_epochs
        cfg.train_cfg.max_epochs = epochs
        schedulers = cfg.get('param_scheduler') or []
        for scheduler in [schedulers] if isinstance(schedulers, dict) else schedulers:
            if scheduler.get('end') == trained or scheduler.get('end', 0) > epochs:
                scheduler['end'] = epochs
    return cfg


def parse_args(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, list[tuple[str, dict[str, Any]]]]:
    """The command line and the (label, run) pairs (a run: its encoding config and regulariser weights), refused with a message naming the argument: unknown
    or unusable encodings (each is built into the config's model first), repeated labels or seeds, bad epochs."""
    from vispe.configs import UnknownConfigError, resolve_config
    from vispe.encodings.builder import registered_encodings
    from vispe.registry import MODELS
    parser = build_parser()
    args = parser.parse_args(argv)
    runs: list[tuple[str, dict[str, Any]]] = []
    with reported_by(parser):
        try:
            if not resolve_config(args.config).is_file():
                raise InvalidArgument('--config', args.config, 'is not a file', 'give a config path or vispe:: name')
        except UnknownConfigError as error:
            raise InvalidArgument('--config', args.config, str(error), 'see vispe list configs') from None
        known = registered_encodings()
        for name in args.encodings:
            if name not in known:
                from vispe.registry import unknown_type_message
                parser.error(f'--encodings: {unknown_type_message("encoding", name, sorted(known))}')
            runs.append((name, dict(encoding=dict(type=name), encoding_losses={}, imports=[])))
        for name in args.from_configs:
            try:
                config = resolve_config(name)
            except UnknownConfigError as error:
                raise InvalidArgument('--from-configs', name, str(error), 'see vispe list configs') from None
            if not config.is_file():
                raise InvalidArgument('--from-configs', name, 'is not a file', 'give model config files')
            runs.append((config_label(config), encoding_of(config)))
        if not runs:
            raise InvalidArgument('--encodings', '(none)', 'no encoding given',
                                  'name encodings with --encodings or configs with --from-configs')
        labels = [label for label, _ in runs]
        for label in labels:
            if labels.count(label) > 1:
                raise InvalidArgument('--encodings/--from-configs', label, 'names two runs',
                                      'give each encoding once (configs are labelled by their names)')
        if len(set(args.seeds)) != len(args.seeds):
            raise InvalidArgument('--seeds', args.seeds, 'repeats a seed', 'give each seed once')
        if args.epochs is not None and args.epochs < 1:
            raise InvalidArgument('--epochs', args.epochs, 'is below 1', 'give a whole number of epochs >= 1')
        for label, run in runs:
            cfg = run_config(args.config, run, args.seeds[0], args.work_dir / label, args.epochs)
            try:
                MODELS.build(cfg.model)
            except (ValueError, TypeError, KeyError) as error:
                raise InvalidArgument('encoding', label, f'does not build in the Three Cell model: {error}',
                                      'choose a 2D encoding the ViT hosts') from None
    return args, runs


def train_and_score(config: str, run: dict[str, Any], seed: int, work_dir: Path, epochs: int | None) -> dict[str, Any]:
    """Train ``config`` with the run's encoding (and regularisers) and ``seed`` in ``work_dir`` and score the test split with its best
    validation checkpoint; the scores are written to ``work_dir/scores.json`` with the settings, and read from
    there next time when the settings are the same."""
    from vispe import serialization
    from vispe.engine.runner import build_runner
    from vispe.evaluation.sweep import write_json
    from vispe.files import write_atomically
    settings = json.loads(json.dumps(dict(config=str(config), **run, seed=seed, epochs=epochs)))
    done = work_dir / 'scores.json'
    if done.is_file():
        result = json.loads(done.read_text())
        if result.get('settings') != settings:
            raise InvalidArgument('--work-dir', work_dir, f'holds a finished run of other settings '
                                  f'({result.get("settings")})', 'use another --work-dir, or remove that run')
        return result
    runner = build_runner(run_config(config, run, seed, work_dir, epochs))
    runner.train()
    best = serialization.load(work_dir / 'best.pth', map_location='cpu')
    runner.model.load_state_dict(best['state_dict'])
    metrics = runner.test()
    scores = {name: float(metrics[f'three_cell/{name}']) for name in COLUMNS}
    result = dict(scores=scores, best_epoch=int(best['meta']['epoch']), encoding=run['encoding'], seed=seed,
                  settings=settings)
    write_atomically(done, lambda temporary: write_json(temporary, result))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args, runs = parse_args(argv)
    from vispe.reporting.three_cell import write_three_cell_outputs
    results = {}
    with reported_by(build_parser()):
        for label, run in runs:
            for seed in args.seeds:
                results.setdefault(label, []).append(
                    train_and_score(args.config, run, seed, args.work_dir / f'{label}_s{seed}', args.epochs))
    paths = write_three_cell_outputs(results, args.out, command=recorded_command('three-cell', argv),
                                     config=str(args.config))
    print('\n'.join(str(path) for path in paths))
    return 0
