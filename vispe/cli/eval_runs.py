"""What every sweep of ``vispe eval-resolution`` shares: a run (a trained model's config and checkpoint, and the
results gathered for it), resolving one from the command line, and evaluating a model on a dataset with the config's
test metric."""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from torch.utils.data import DataLoader
from tqdm import tqdm

from vispe.registry import METRICS


@dataclass
class Run:
    """One trained model: its label, config and checkpoint."""

    label: str
    config: Path
    checkpoint: Path
    results: dict[Any, dict[str, float]] = field(default_factory=dict)  # by size, or by SweepPoint (3D)
    tuned_from: str | None = None  # the label of the run whose options --tune chose


def resolve_run(spec: str, checkpoint_name: str) -> Run:
    if '::' in spec:
        config, checkpoint = (Path(part) for part in spec.split('::', 1))
        return Run(config.stem, config, checkpoint)
    work_dir = Path(spec)
    if not work_dir.is_dir():
        raise FileNotFoundError(f'{work_dir} is not a work dir; pass a work dir or CONFIG::CHECKPOINT.')
    configs = sorted(work_dir.glob('*.py'))
    if len(configs) != 1:
        raise FileNotFoundError(f'{work_dir} should hold exactly one config (.py) dumped by training; found '
                                f'{[c.name for c in configs]}. Pass CONFIG::CHECKPOINT instead.')
    return Run(work_dir.name, configs[0], work_dir / checkpoint_name)


def collate_function(cfg: Config) -> Any:
    """The test dataloader's collate function (mmengine's FUNCTIONS registry, scoped names allowed)."""
    from mmengine.registry import FUNCTIONS
    collate = dict(cfg.test_dataloader.get('collate_fn', dict(type='pseudo_collate')))
    function = FUNCTIONS.get(collate.pop('type'))
    return function if not collate else (lambda batch: function(batch, **collate))


@torch.inference_mode()
def evaluate(model: torch.nn.Module, cfg: Config, dataset: Any, batch_size: int, progress: tqdm,
             metric: Any = None, workers: int = 0) -> dict[str, float]:
    """The config's test metric on ``dataset``, through the model's ``test_step`` (any task, on the model's device:
    its data preprocessor moves each batch there), the images decoded by ``workers`` processes (0: in this one); a
    given ``metric`` (an mmengine metric) is evaluated instead, its names with its prefix (``nusc/mAP``)."""
    prefixed = metric is not None
    metric = metric if prefixed else METRICS.build(cfg.test_evaluator)
    for batch in DataLoader(dataset, batch_size=batch_size, shuffle=False, collate_fn=collate_function(cfg),
                            num_workers=workers):
        outputs = model.test_step(batch)
        metric.process(batch, outputs)
        progress.update(len(outputs))
    return metric.evaluate(len(dataset)) if prefixed else metric.compute_metrics(metric.results)


def quiet_logger() -> None:
    """Metrics log through mmengine's current logger: keep their warnings, on stderr, and drop their INFO tables
    (one per point) so that stdout holds the result table only."""
    logger = MMLogger.get_instance(f'eval_resolution_{time.monotonic_ns()}', log_level='WARNING')
    for handler in logger.handlers:
        if type(handler) is logging.StreamHandler:
            handler.setStream(sys.stderr)
