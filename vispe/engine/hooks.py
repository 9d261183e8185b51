"""Hooks for mmengine's Runner: weights-only best/last checkpoints, the random state of a run, and mmengine's
CheckpointHook without the deprecation warnings it raises itself."""
from __future__ import annotations

import contextlib
import logging
import math
import os
from pathlib import Path
from typing import Any, Iterator

import mmengine.hooks
import torch
from mmengine.hooks import Hook
from mmengine.logging import MMLogger

from vispe.checkpoint import model_encodings
from vispe.engine import random_state
from vispe.registry import HOOKS


def save_atomically(obj: Any, path: Path) -> None:
    """torch.save to a temporary file in the same folder, then rename: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    torch.save(obj, tmp)
    os.replace(tmp, path)


def temporary_path(path: Path) -> Path:
    """Where :func:`save_atomically` writes ``path`` before renaming it."""
    return path.with_name(f'.{path.name}.tmp')


def _unwrapped(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if hasattr(model, 'module') else model


# What mmengine 0.10.7 logs about its own deprecated classes when CheckpointHook builds a FileClient that it never
# uses (it does so even without file_client_args).
MMENGINE_SELF_DEPRECATIONS = ('"FileClient" will be deprecated in future', '"HardDiskBackend" is the alias of')


@contextlib.contextmanager
def dropped_log_records(prefixes: tuple[str, ...]) -> Iterator[None]:
    """Drop records of mmengine's current logger whose message starts with one of ``prefixes`` (nothing else)."""
    logger = MMLogger.get_current_instance()

    def keep(record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(prefixes)

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


@HOOKS.register_module()
class CheckpointHook(mmengine.hooks.CheckpointHook):
    """mmengine's ``CheckpointHook`` (same arguments, same files) without the two deprecation warnings that its
    ``before_train`` logs on every run about the ``FileClient`` it builds and never uses; a config under
    ``default_scope='vispe'`` that names ``CheckpointHook`` gets this one."""

    def before_train(self, runner: Any) -> None:
        with dropped_log_records(MMENGINE_SELF_DEPRECATIONS):
            super().before_train(runner)


@HOOKS.register_module()
class WeightsCheckpointHook(Hook):
    """Writes ``best.pth`` (on each new best of ``metric``) and ``last.pth`` (at the end of training) into
    the work dir: the model's state dict and plain metadata only (epoch, iteration, metrics, the
    training config and the model's encodings), so they load with ``torch.load(weights_only=True)``.
    Written atomically; temporaries left by a killed run are removed when a run starts.

    The best score so far is kept in mmengine's message hub, which every epoch checkpoint saves, so
    a resumed run replaces ``best.pth`` only with a better model.

    Args:
        metric: validation metric to compare (e.g. 'accuracy/top1').
        rule: 'greater' (default) or 'less': which values are better, as mmengine's ``CheckpointHook`` says it.
    """

    priority = 'LOW'
    FILES = ('best.pth', 'last.pth')

    def __init__(self, metric: str = 'accuracy/top1', rule: str = 'greater') -> None:
        if rule not in ('greater', 'less'):
            raise ValueError(f"WeightsCheckpointHook rule must be 'greater' or 'less'; got {rule!r}.")
        self.metric = metric
        self.sign = 1.0 if rule == 'greater' else -1.0
        self.best = -math.inf

    @property
    def info_key(self) -> str:
        return f'vispe_best/{self.metric}'

    def _payload(self, runner: Any, metrics: dict[str, float] | None) -> dict[str, Any]:
        model = _unwrapped(runner.model)
        state = {key: value.detach().cpu() for key, value in model.state_dict().items()}
        meta = dict(epoch=runner.epoch, iter=runner.iter, config=runner.cfg.pretty_text,
                    encodings=model_encodings(model), metrics={k: float(v) for k, v in (metrics or {}).items()})
        return dict(state_dict=state, meta=meta)

    def before_run(self, runner: Any) -> None:
        if runner.rank == 0:
            for name in self.FILES:
                temporary_path(Path(runner.work_dir) / name).unlink(missing_ok=True)

    def before_train(self, runner: Any) -> None:
        self.best = float(runner.message_hub.get_info(self.info_key, -math.inf))

    def after_val_epoch(self, runner: Any, metrics: dict[str, float] | None = None) -> None:
        if not metrics or self.metric not in metrics:
            return
        value = self.sign * float(metrics[self.metric])
        if value > self.best:
            self.best = value
            runner.message_hub.update_info(self.info_key, value)
            if runner.rank == 0:
                save_atomically(self._payload(runner, metrics), Path(runner.work_dir) / 'best.pth')

    def after_train(self, runner: Any) -> None:
        if runner.rank == 0:
            save_atomically(self._payload(runner, None), Path(runner.work_dir) / 'last.pth')


@HOOKS.register_module()
class RandomStateHook(Hook):
    """Saves the random generators' state into every checkpoint, and keeps validation off the training's
    random stream (validation draws numbers, e.g. a data-loader seed; without this, a run that
    validates after an epoch and a run resumed from that epoch's checkpoint would draw different
    numbers next). :class:`vispe.engine.VispeRunner` registers it and restores the state on resume.
    """

    priority = 'VERY_HIGH'
    CHECKPOINT_KEY = 'random_state'

    def __init__(self) -> None:
        self._before_validation: dict[str, Any] | None = None

    def before_val(self, runner: Any) -> None:
        self._before_validation = random_state.capture()

    def after_val(self, runner: Any) -> None:
        if self._before_validation is not None:
            random_state.restore(self._before_validation)
            self._before_validation = None

    def before_save_checkpoint(self, runner: Any, checkpoint: dict) -> None:
        checkpoint[self.CHECKPOINT_KEY] = self._before_validation or random_state.capture()
