"""The process's random number generators as one value: captured into checkpoints, restored on resume.

A run draws from four generators: Python's ``random`` and numpy's global generator (augmentations,
timm's mixup), torch's CPU generator (dropout, drop-path, data-loader seeds) and each CUDA device's.
Restoring all four at the point where they were captured makes a resumed run draw the numbers an
uninterrupted one would.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

KEYS = ('python', 'numpy', 'torch', 'cuda')


def capture() -> dict[str, Any]:
    """The state of every generator, in a form vispe's checkpoint reader loads (tuples, numpy, tensors)."""
    return dict(python=random.getstate(), numpy=np.random.get_state(), torch=torch.get_rng_state(),
                cuda=torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [])


def restore(state: dict[str, Any]) -> None:
    """Set every generator to ``state`` (from :func:`capture`).

    Raises:
        ValueError: ``state`` lacks a generator or was captured with another number of CUDA devices.
    """
    missing = [key for key in KEYS if key not in state]
    if missing:
        raise ValueError(f'The saved random state lacks {missing}; it was not written by vispe.engine.random_state. '
                         f'Resume from a checkpoint of a vispe run, or start the run again.')
    python_state = state['python']
    random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))
    np.random.set_state(state['numpy'])
    torch.set_rng_state(state['torch'])
    devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if state['cuda']:
        if len(state['cuda']) != devices:
            raise ValueError(f'The saved random state holds {len(state["cuda"])} CUDA generators, this process sees '
                             f'{devices} devices. Resume with the devices of the run that wrote the checkpoint.')
        torch.cuda.set_rng_state_all(state['cuda'])
