"""Depth-from-crops models (a :class:`~vispe.models.CropDepthViT` config, KPE's task) measured by where the crop lies
in its camera and at focal lengths not seen in training, for ``tools/eval_resolution.py``.

A sweep point is a split of the crops set (``--focal-splits``: 'test' has the training fields of view, 'test-wide'
and 'test-tele' unseen ones); each split's 3 × 3 grid crops are binned by offset from the principal point
(``--crop-offsets``: centre, edge, corner). The table shows AbsRel overall and per chosen bin; CSV and JSON hold every
metric of :class:`~vispe.evaluation.CropDepthMetric` (AbsRel, log RMSE, δ < 1.25, per bin). Runs named
``<name>_s<seed>`` group as mean and spread (max − min) with ``--group-seeds``.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mmengine.config import Config
from tqdm import tqdm

from vispe.checkpoint import load_checkpoint
from vispe.datasets.crop_depth import CROP_SPLITS, OFFSET_BINS, CropDepth
from vispe.engine import named_unknown_types
from vispe.evaluation.crop_depth_metric import CropDepthMetric
from vispe.evaluation.multiview_sweep import SPREAD, SeedGroup, _registered
from vispe.evaluation.sweep_report import (format_cell, group_csv_rows, run_csv_rows, run_record, seed_group_records,
                                           write_atomically, write_csv, write_json)
from vispe.models.crop_depth import CropDepthViT
from vispe.registry import DATASETS, METRICS, MODELS

__all__ = ['CropSweepPoint', 'check_crop_config', 'crop_table', 'evaluate_crop_runs', 'is_crop_config',
           'write_crop_outputs']

Results = Mapping[str, Mapping['CropSweepPoint', Mapping[str, float]]]
Summaries = Mapping[str, Mapping['CropSweepPoint', Mapping[str, tuple[float, float]]]]


@dataclass(frozen=True)
class CropSweepPoint:
    """One evaluation setting of a crop-depth model: the split (its fields of view)."""

    split: str

    def record(self) -> dict[str, str]:
        return dict(split=self.split)


def is_crop_config(cfg: Config) -> bool:
    """Whether the config's model is a :class:`~vispe.models.CropDepthViT` (or a subclass)."""
    model = cfg.get('model')
    kind = _registered(MODELS, model.get('type')) if isinstance(model, Mapping) else None
    return kind is not None and issubclass(kind, CropDepthViT)


def check_crop_config(cfg: Config, label: str) -> None:
    """The test set must be :class:`CropDepth` (its split is the axis) and the test metric :class:`CropDepthMetric`."""
    kind = _registered(DATASETS, cfg.test_dataloader.dataset.get('type'))
    if kind is None or not issubclass(kind, CropDepth):
        raise ValueError(f'{label}: the test dataset is {cfg.test_dataloader.dataset.get("type")!r}; the crop axes '
                         f'(--focal-splits, --crop-offsets) need a CropDepth test set. Evaluate a config of '
                         f'configs/crops/.')
    evaluator = cfg.get('test_evaluator')
    metric = _registered(METRICS, evaluator.get('type')) if isinstance(evaluator, Mapping) else None
    if metric is None or not issubclass(metric, CropDepthMetric):
        raise ValueError(f"{label}: the test evaluator is {evaluator!r}, not CropDepthMetric; set "
                         f"test_evaluator=dict(type='CropDepthMetric') in the config.")


def evaluate_crop_runs(runs: Sequence[Any], configs: Mapping[str, Config], splits: Sequence[str] | None,
                       batch_size: int | None, evaluate: Callable[..., dict[str, float]]) -> None:
    """Fill each run's ``results`` {CropSweepPoint: metrics} with its config's CropDepthMetric on every split
    (default: the config's test split), evaluation crops only. Every test set is built (its folder checked) before
    any model runs; ``evaluate(model, cfg, dataset, batch_size, progress, metric)`` is the tool's loop."""
    for run in runs:
        check_crop_config(configs[run.label], run.label)
    datasets: dict[str, list[tuple[CropSweepPoint, Any]]] = {}
    for run in runs:
        cfg = configs[run.label]
        chosen = splits or [cfg.test_dataloader.dataset.get('split', 'test')]
        datasets[run.label] = [(CropSweepPoint(split), DATASETS.build(
            dict(cfg.test_dataloader.dataset, split=split, random_crops=False))) for split in chosen]
    total = sum(len(dataset) for per_run in datasets.values() for _, dataset in per_run)
    with tqdm(total=total, unit='crop', desc='eval crops', file=sys.stderr) as progress:
        for run in runs:
            cfg = configs[run.label]
            with named_unknown_types():
                model = MODELS.build(cfg.model).eval()
            load_checkpoint(model, run.checkpoint)
            size = batch_size or cfg.test_dataloader.get('batch_size', 1)
            for point, dataset in datasets[run.label]:
                progress.set_postfix_str(f'{run.label} {point.split}')
                run.results[point] = evaluate(model, cfg, dataset, size, progress, METRICS.build(cfg.test_evaluator))


def table_metrics(offsets: Sequence[str]) -> list[str]:
    """The tabulated metrics: AbsRel of all crops, then of each chosen offset bin."""
    return ['depth/absrel', *[f'depth/absrel_{name}' for name in offsets]]


def crop_table(results: Results, offsets: Sequence[str] = OFFSET_BINS, groups: Sequence[SeedGroup] | None = None,
               summaries: Summaries | None = None) -> str:
    """AbsRel per run (or seed group: mean±spread) and split, one column for all crops and one per offset bin."""
    if groups is not None and summaries is not None:
        entries = [(group.label, summaries[group.label]) for group in groups]
        title = f'model (mean±spread, spread = {SPREAD})'
    else:
        entries = list(results.items())
        title = 'model'
    names = table_metrics(offsets)
    lines = [[title, 'split', *[name.split('/')[-1] for name in names]]]
    for label, per_point in entries:
        for point, metrics in per_point.items():
            lines.append([label, point.split, *[format_cell(metrics.get(name, math.nan)) for name in names]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ['  '.join(cell.rjust(width) if i > 1 else cell.ljust(width) for i, (cell, width) in
                      enumerate(zip(line, widths))).rstrip() for line in lines]
    return '\n'.join([text[0], '  '.join('-' * width for width in widths), *text[1:]])


def plot_crops(path: Path, results: Results, offsets: Sequence[str], groups: Sequence[SeedGroup] | None) -> Path:
    """AbsRel by crop offset, one panel per split, one line per run (or seed group: mean with its min–max band).
    Written atomically."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    splits = list(dict.fromkeys(point.split for per_run in results.values() for point in per_run))
    figure, axes = plt.subplots(1, len(splits), figsize=(4.2 * len(splits), 3.4), dpi=110, squeeze=False,
                                sharey=True)
    series = ([(group.label, group.members) for group in groups] if groups
              else [(label, (label,)) for label in results])
    names = [f'depth/absrel_{name}' for name in offsets]
    for axis, split in zip(axes[0], splits):
        point = CropSweepPoint(split)
        for label, members in series:
            values = [[results[member][point].get(name, math.nan) for member in members] for name in names]
            line, = axis.plot(list(offsets), [sum(v) / len(v) for v in values], marker='o',
                              label=f'{label} (n={len(members)})')
            if len(members) > 1:
                axis.fill_between(list(offsets), [min(v) for v in values], [max(v) for v in values],
                                  color=line.get_color(), alpha=0.15)
        axis.set_title(split, fontsize=9)
        axis.set_xlabel('crop offset from the principal point')
        axis.grid(alpha=0.3)
    axes[0, 0].set_ylabel('AbsRel (lower is better)')
    axes[0, -1].legend(fontsize=6)
    figure.suptitle('depth from crops: error by where the crop lies, per field-of-view split', fontsize=10)
    figure.tight_layout()
    try:
        return write_atomically(Path(path), lambda temporary: figure.savefig(temporary, format='png'))
    finally:
        plt.close(figure)


def write_crop_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                       offsets: Sequence[str], groups: Sequence[SeedGroup] | None,
                       summaries: Summaries | None) -> list[Path]:
    """``<out>.csv`` (every metric per run and split), ``<out>.seeds.csv`` (mean and spread per seed group),
    ``<out>.json`` (command, axes, runs with config, checkpoint hash and results, seed groups) and ``<out>.png``,
    each written atomically."""
    out = Path(out)
    results = {run.label: run.results for run in runs}
    written = [write_atomically(out.with_suffix('.csv'),
                                lambda path: write_csv(path, run_csv_rows(results, ['split'])))]
    if groups:
        written.append(write_atomically(out.with_suffix('.seeds.csv'), lambda path: write_csv(
            path, group_csv_rows(groups, summaries, ['split']))))
    report: dict[str, Any] = dict(
        command=command, metrics=table_metrics(offsets),
        axes=dict(split={split: 'fields of view as in training' if split in ('train', 'val', 'test') else
                         'fields of view never seen in training' for split in CROP_SPLITS},
                  crop_offsets='the 3x3 grid crops: centre, edge (4), corner (4)'),
        runs=[run_record(run, configs[run.label], ('split',)) for run in runs])
    if groups:
        report['seed_groups'] = seed_group_records(groups, summaries)
    written.append(write_atomically(out.with_suffix('.json'), lambda path: write_json(path, report)))
    written.append(plot_crops(out.with_suffix('.png'), results, offsets, groups))
    return written
