"""Experiment tracking: one switch for mmengine's visualizer backends (``tools/train.py --vis-backend``).

mmengine's ``Visualizer`` writes the scalars a run logs (losses, learning rate, validation metrics) to each of its
backends: ``local`` (json under the run's ``vis_data/``, always kept), ``tensorboard`` (event files beside it),
``wandb`` and ``mlflow`` (their services). A config can also name them itself, as mmengine configs do::

    visualizer = dict(type='Visualizer',
                      vis_backends=[dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend')])
"""
from __future__ import annotations

from typing import Sequence

from mmengine.config import Config

from vispe.extras import import_extra

__all__ = ['TRACKERS', 'set_vis_backends']

# Switch name -> (mmengine's backend type, the module it imports, None for none).
TRACKERS: dict[str, tuple[str, str | None]] = {
    'local': ('LocalVisBackend', None),
    'tensorboard': ('TensorboardVisBackend', 'tensorboard'),
    'wandb': ('WandbVisBackend', 'wandb'),
    'mlflow': ('MLflowVisBackend', 'mlflow'),
}


def set_vis_backends(cfg: Config, names: Sequence[str]) -> None:
    """Make ``cfg``'s visualizer write to the backends ``names`` (keys of :data:`TRACKERS`) beside the local one,
    after checking that their packages import (a missing one is an ImportError naming the extra to install)."""
    unknown = [name for name in names if name not in TRACKERS]
    if unknown:
        raise ValueError(f'unknown tracking backend(s) {unknown}; vispe offers {", ".join(TRACKERS)}.')
    backends = []
    for name in ['local', *[name for name in dict.fromkeys(names) if name != 'local']]:
        backend, module = TRACKERS[name]
        if module is not None:
            import_extra(module, f'tracking with {name}')
        backends.append(dict(type=backend))
    cfg.visualizer = dict(type='Visualizer', vis_backends=backends)
