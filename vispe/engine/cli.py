"""Command-line arguments shared by the tools that run configs (mmengine conventions)."""
from __future__ import annotations

import argparse

from mmengine.config import DictAction


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """--work-dir, --cfg-options, --launcher, --local-rank."""
    parser.add_argument('--work-dir', default=None, help='default: work_dirs/<config name>')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, default={},
                        help='override config entries, e.g. train_cfg.max_epochs=2')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)
