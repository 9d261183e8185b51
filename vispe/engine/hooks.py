"""Hooks for mmengine's Runner."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import torch
from mmengine.hooks import Hook

from vispe.registry import HOOKS


def save_atomically(obj: Any, path: Path) -> None:
    """torch.save to a temporary file in the same folder, then rename: a crash never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f'.{path.name}.tmp')
    torch.save(obj, tmp)
    os.replace(tmp, path)


@HOOKS.register_module()
class WeightsCheckpointHook(Hook):
    """Writes ``best.pth`` (on each new best of ``metric``) and ``last.pth`` (at the end of training) into
    the work dir: the model's state dict and plain metadata only, so they load with
    ``torch.load(weights_only=True)`` (mmengine's own epoch checkpoints, for resuming, pickle Python
    objects and do not). Written atomically.

    Args:
        metric: validation metric to maximise (e.g. 'accuracy/top1').
    """

    priority = 'LOW'

    def __init__(self, metric: str = 'accuracy/top1') -> None:
        self.metric = metric
        self.best = -math.inf

    def _payload(self, runner: Any, metrics: dict[str, float] | None) -> dict[str, Any]:
        model = runner.model.module if hasattr(runner.model, 'module') else runner.model
        state = {key: value.detach().cpu() for key, value in model.state_dict().items()}
        meta = dict(epoch=runner.epoch, iter=runner.iter, config=runner.cfg.pretty_text,
                    metrics={k: float(v) for k, v in (metrics or {}).items()})
        return dict(state_dict=state, meta=meta)

    def after_val_epoch(self, runner: Any, metrics: dict[str, float] | None = None) -> None:
        if not metrics or self.metric not in metrics:
            return
        value = float(metrics[self.metric])
        if value > self.best:
            self.best = value
            if runner.rank == 0:
                save_atomically(self._payload(runner, metrics), Path(runner.work_dir) / 'best.pth')

    def after_train(self, runner: Any) -> None:
        if runner.rank == 0:
            save_atomically(self._payload(runner, None), Path(runner.work_dir) / 'last.pth')

    def state_dict(self) -> dict[str, float]:
        return {'best': self.best}
