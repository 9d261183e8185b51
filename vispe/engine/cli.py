"""Command-line arguments shared by the tools that run configs (mmengine conventions)."""
from __future__ import annotations

import argparse
from typing import Any, Sequence

from mmengine.config import DictAction

from vispe.engine.tracking import TRACKERS


class ConfigOptionsAction(DictAction):
    """mmengine's ``--cfg-options`` parser, refusing an item without ``=`` by name (mmengine fails with
    a bare unpacking error)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        items = [values] if isinstance(values, str) else list(values or [])
        for item in items:
            if '=' not in item or item.startswith('='):
                parser.error(f'argument {option_string}: {item!r} is not KEY=VALUE; write e.g. '
                             f'train_cfg.max_epochs=2 (no spaces around "=").')
        super().__call__(parser, namespace, values, option_string)


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """--work-dir, --cfg-options, --vis-backend, --launcher, --local-rank."""
    parser.add_argument('--work-dir', default=None, help='default: work_dirs/<config name>')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptionsAction, default={},
                        help='override config entries, e.g. train_cfg.max_epochs=2')
    parser.add_argument('--vis-backend', nargs='+', choices=sorted(TRACKERS), default=[],
                        help='also log the run\'s scalars to these trackers (mmengine visualizer backends): '
                             'tensorboard (pip install "vispe[tensorboard]"), wandb, mlflow')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none')
    parser.add_argument('--local-rank', '--local_rank', type=int, default=0)
