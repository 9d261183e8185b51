"""A hook that kills the training process (``os._exit``, no clean-up), for the resume tests."""
from __future__ import annotations

import os
from typing import Any

from mmengine.hooks import Hook

from vispe.registry import HOOKS

KILLED_EXIT_CODE = 137


@HOOKS.register_module()
class KillProcessHook(Hook):
    """Ends the process right after training iteration ``at_iter`` (1-based, after every other hook of
    that iteration ran), or right after epoch ``after_epoch`` was checkpointed."""

    priority = 'LOWEST'

    def __init__(self, at_iter: int | None = None, after_epoch: int | None = None) -> None:
        self.at_iter = at_iter
        self.after_epoch = after_epoch

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None, outputs: Any = None) -> None:
        if self.at_iter is not None and runner.iter + 1 == self.at_iter:
            os._exit(KILLED_EXIT_CODE)

    def after_train_epoch(self, runner: Any) -> None:
        if self.after_epoch is not None and runner.epoch + 1 == self.after_epoch:
            os._exit(KILLED_EXIT_CODE)
