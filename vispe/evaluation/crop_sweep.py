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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mmengine.config import Config

from vispe.datasets.crop_depth import CROP_SPLITS, OFFSET_BINS, CropDepth
from vispe.evaluation.crop_depth_metric import CropDepthMetric
from vispe.evaluation.sweep import (SeedGroup, SweepKind, evaluate_runs, format_cell, pyplot,
                                    save_figure, table_entries, write_outputs)
from vispe.models.crop_depth import CropDepthViT
from vispe.registry import DATASETS
from vispe.text_table import aligned_table

__all__ = ['CROPS', 'CropSweepPoint', 'crop_table', 'evaluate_crop_runs', 'write_crop_outputs']

CROPS = SweepKind(runs='crop-depth runs', model=CropDepthViT, dataset=CropDepth, metric=CropDepthMetric,
                  flags=('--focal-splits', '--crop-offsets'), configs='configs/crops/', unit='crop', columns=('split',),
                  dataset_axes=('split',))

Results = Mapping[str, Mapping['CropSweepPoint', Mapping[str, float]]]
Summaries = Mapping[str, Mapping['CropSweepPoint', Mapping[str, tuple[float, float]]]]


@dataclass(frozen=True)
class CropSweepPoint:
    """One evaluation setting of a crop-depth model: the split (its fields of view)."""

    split: str

    def record(self) -> dict[str, str]:
        return dict(split=self.split)


def evaluate_crop_runs(runs: Sequence[Any], configs: Mapping[str, Config], splits: Sequence[str] | None,
                       batch_size: int | None, evaluate: Callable[..., dict[str, float]], progress: bool = True
                       ) -> None:
    """Fill each run's ``results`` {CropSweepPoint: metrics} with its config's CropDepthMetric on every split
    (default: the config's test split), evaluation crops only (:func:`~vispe.evaluation.sweep.evaluate_runs`)."""
    points = {run.label: [CropSweepPoint(split) for split in
                          splits or [configs[run.label].test_dataloader.dataset.get('split', 'test')]] for run in runs}
    evaluate_runs(CROPS, runs, configs, points, lambda cfg, point, label: DATASETS.build(
        dict(cfg.test_dataloader.dataset, split=point.split, random_crops=False)), batch_size, evaluate,
        lambda point: point.split, progress=progress)


def table_metrics(offsets: Sequence[str]) -> list[str]:
    """The tabulated metrics: AbsRel of all crops, then of each chosen offset bin."""
    return ['depth/absrel', *[f'depth/absrel_{name}' for name in offsets]]


def crop_table(results: Results, offsets: Sequence[str] = OFFSET_BINS, groups: Sequence[SeedGroup] | None = None,
               summaries: Summaries | None = None) -> str:
    """AbsRel per run (or seed group: mean±spread) and split, one column for all crops and one per offset bin."""
    entries, title = table_entries(results, groups, summaries)
    names = table_metrics(offsets)
    lines = [[title, 'split', *[name.split('/')[-1] for name in names]]]
    for label, per_point in entries:
        for point, metrics in per_point.items():
            lines.append([label, point.split, *[format_cell(metrics.get(name, math.nan)) for name in names]])
    return aligned_table(lines, left_columns=2)


def plot_crops(path: Path, results: Results, offsets: Sequence[str], groups: Sequence[SeedGroup] | None) -> Path:
    """AbsRel by crop offset, one panel per split, one line per run (or seed group: mean with its min–max band).
    Written atomically."""
    plt = pyplot()
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
    return save_figure(figure, path)


def write_crop_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                       offsets: Sequence[str], groups: Sequence[SeedGroup] | None,
                       summaries: Summaries | None) -> list[Path]:
    """The sweep's CSV, seed-group CSV, JSON and PNG (:func:`~vispe.evaluation.sweep.write_outputs`)."""
    results = {run.label: run.results for run in runs}
    report = dict(command=command, metrics=table_metrics(offsets),
                  axes=dict(split={split: 'fields of view as in training' if split in ('train', 'val', 'test') else
                                   'fields of view never seen in training' for split in CROP_SPLITS},
                            crop_offsets='the 3x3 grid crops: centre, edge (4), corner (4)'))
    return write_outputs(CROPS, out, report, runs, configs, groups, summaries,
                         lambda path: plot_crops(path, results, offsets, groups))
