"""Evaluate a checkpoint with a config's test set.

    vispe test configs/vit/vit-t4_rope-mixed_fmnist-28.py work_dirs/vit-t4_rope-mixed_fmnist-28/best.pth
        [--cfg-options test_dataloader.dataset.image_size=56 ...] [--work-dir DIR]

The checkpoint loads with vispe.load_checkpoint (best.pth/last.pth written by training, an epoch
checkpoint, or a timm/vispe state dict), read without running code from the file; learned position
tables are resampled to the model's grid, and a checkpoint trained with another encoding than the
config's is refused.

A multi-view 3D config (its test_evaluator a NuScenesMetric) can write the nuScenes submission json of its
test split instead of scoring it (written atomically; the path is printed):

    vispe test configs/petr/petr-r18_petr-lid_mv-scenes.py work_dirs/petr-r18_petr-lid_mv-scenes/best.pth \\
        --format-only --out results_nusc.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from mmengine.config import Config

import vispe
from vispe.engine import add_runner_arguments, build_runner, load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, existing_config, reported_by, run_main, writable_folder,
                                    writable_output)
from vispe.evaluation.multiview_sweep import nuscenes_evaluator


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe test``."""
    parser = argparse.ArgumentParser(prog='vispe test', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    add_runner_arguments(parser)
    parser.add_argument('--format-only', action='store_true',
                        help='write the nuScenes submission json of the test split (--out) instead of scoring it; '
                             'needs a NuScenesMetric test evaluator')
    parser.add_argument('--out', type=Path, default=None,
                        help='with --format-only: the submission json (default: <work dir>/results_nusc.json)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless the config exists."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        if args.out is not None:
            if not args.format_only:
                raise InvalidArgument('--out', args.out, 'names the submission json of --format-only',
                                      'add --format-only, or leave out --out (metrics print to stdout)')
            if args.out.suffix != '.json':
                raise InvalidArgument('--out', args.out, 'is not a .json file', 'give a path ending in .json, e.g. '
                                      'results_nusc.json')
            writable_output(args.out, '--out')
    return args


def submission_evaluator(cfg: Config, config_path: str, out: Path) -> dict:
    """The config's NuScenesMetric set to write only the submission to ``out`` (atomically, by the metric);
    :class:`InvalidArgument` when the test evaluator is not a NuScenesMetric."""
    evaluator = nuscenes_evaluator(cfg, config_path, '--format-only')
    evaluator.update(format_only=True, outfile_prefix=str(out))
    return evaluator


def file_identity(path: Path | None) -> tuple[int, int] | None:
    """(inode, modification time) of a file, None when absent: tells whether the run wrote it anew."""
    if path is None or not path.is_file():
        return None
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.vis_backend)
    out = None
    if args.format_only:
        out = args.out if args.out is not None else Path(cfg.work_dir) / 'results_nusc.json'
        cfg.test_evaluator = submission_evaluator(cfg, args.config, out)
    writable_folder(Path(cfg.work_dir), '--work-dir')
    previous = file_identity(out)
    cfg.launcher = args.launcher
    cfg.load_from = None
    runner = build_runner(cfg)
    vispe.load_checkpoint(runner.model, args.checkpoint)
    with named_unknown_types():
        metrics = runner.test()
    if out is None:
        print(json.dumps({key: round(float(value), 4) for key, value in metrics.items()}))
        return 0
    if file_identity(out) in (None, previous):
        raise RuntimeError(f'The test run finished but wrote no submission at {out}; the test evaluator '
                           f'({cfg.test_evaluator["type"]}) ignored format_only/outfile_prefix.')
    print(f'nuScenes submission written to {out}')
    return 0


if __name__ == '__main__':
    run_main(main)
