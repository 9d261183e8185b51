"""A multi-view 3D detector (PETR, Liu et al. ECCV 2022; 3DPPE, Shu et al. ICCV 2023) measured across camera
changes, for ``tools/eval_resolution.py``: the axes, the test set and nuScenes metric of each point, and runs
that differ only by their seed grouped as mean and spread.

A sweep point has three axes; images and intrinsics always change together (``MultiViewDetection`` updates
the cameras with every resize, crop and zoom):

- image size (H, W): ``--sizes`` are image heights; W = round(H · W0 / H0), rounded half up, with (H0, W0) the
  config's test ``image_size`` (PETR's mv-scenes configs: (90, 160), so 72 -> (72, 128), 126 -> (126, 224)).
- intrinsics scale s: ``MultiViewDetection(intrinsics_scale=s)`` zooms every view about its principal point
  (fx, fy times s, the image resampled with them; s > 1 zooms in).
- rig: ``'train'`` is split ``'test-rig1'`` (the training rig on held-out scenes), ``'other'`` is split ``'val'``
  (mv-scenes' second rig: other yaws, heights and focal lengths); without a rig the config's own test split is
  used. The metric evaluates the split the dataset reads.

Seed groups: work dirs named ``<name>_s<seed>`` (or ``-s<seed>``, ``_seed<seed>``) with the same model and test
set form one group ``<name>``; each metric is reported as the mean over the seeds and the spread, max - min
(:mod:`vispe.evaluation.sweep`). The table shows one metric (nuScenes mAP) per run and rig/zoom row, one column per
image height; the figure draws it against image height, one panel per rig and intrinsics scale.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from mmengine.config import Config

from vispe.datasets.multiview_detection import MultiViewDetection
from vispe.engine.arguments import InvalidArgument
from vispe.evaluation.nuscenes_metric import NuScenesMetric
from vispe.evaluation.sweep import (SeedGroup, SweepKind, format_cell, pyplot, registered, save_figure,
                                    table_entries, write_outputs)
from vispe.models.petr import PETRDetector
from vispe.registry import METRICS
from vispe.text_table import aligned_table

__all__ = ['MULTIVIEW', 'PRIMARY_METRIC', 'RIG_SPLITS', 'SweepPoint', 'image_size_for_height', 'nuscenes_evaluator',
           'plot_sweep', 'rig_name', 'sweep_dataset_cfg', 'sweep_evaluator_cfg', 'sweep_points', 'sweep_table',
           'write_sweep_outputs']

RIG_SPLITS: dict[str, str] = {'train': 'test-rig1', 'other': 'val'}
CONFIG_RIG = 'config'  # the rig label of points on the config's own test split (no --rigs)
PRIMARY_METRIC = 'nusc/mAP'
MULTIVIEW = SweepKind(runs='multi-view 3D runs', model=PETRDetector, dataset=MultiViewDetection, metric=None,
                      flags=('--sizes', '--intrinsics-scale', '--rigs'), configs='configs/petr/', unit='sample',
                      columns=('rig', 'split', 'intrinsics_scale', 'height', 'width'),
                      dataset_axes=('image_size', 'intrinsics_scale', 'split'))


def rig_name(text: str) -> str:
    """argparse type: a rig, ``'train'`` (split test-rig1) or ``'other'`` (split val)."""
    if text not in RIG_SPLITS:
        choices = ', '.join(f'{name} (split {split})' for name, split in RIG_SPLITS.items())
        raise argparse.ArgumentTypeError(f'{text!r} is not a rig; give {choices}.')
    return text


def nuscenes_evaluator(cfg: Config, config_path: str | Path, option: str) -> dict[str, Any]:
    """A copy of the config's ``test_evaluator`` when it is one :class:`NuScenesMetric` (a dict, or a list of
    one); else :class:`InvalidArgument` naming ``option``, the config and what to set."""
    evaluator = cfg.get('test_evaluator')
    if isinstance(evaluator, (list, tuple)) and len(evaluator) == 1:
        evaluator = evaluator[0]
    kind = registered(METRICS, evaluator.get('type')) if isinstance(evaluator, Mapping) else None
    if kind is None or not issubclass(kind, NuScenesMetric):
        seen = (evaluator.get('type') if isinstance(evaluator, Mapping) else
                [item.get('type') if isinstance(item, Mapping) else item for item in evaluator]
                if isinstance(evaluator, (list, tuple)) else evaluator)
        raise InvalidArgument(option, config_path, f'the config\'s test_evaluator is {seen!r}, not a NuScenesMetric',
                              'use a multi-view 3D config (configs/petr/), or set test_evaluator=dict('
                              'type=\'NuScenesMetric\', data_root=..., split=...) in the config')
    return dict(evaluator)


@dataclass(frozen=True)
class SweepPoint:
    """One evaluation setting: the rig (its name and split), the intrinsics scale and the image size (H, W)."""

    rig: str
    split: str
    intrinsics_scale: float
    image_size: tuple[int, int]

    @property
    def height(self) -> int:
        return self.image_size[0]

    @property
    def panel(self) -> tuple[str, str, float]:
        """(rig, split, intrinsics scale): the points that share a table row and a plot panel."""
        return self.rig, self.split, self.intrinsics_scale

    def record(self) -> dict[str, Any]:
        return dict(rig=self.rig, split=self.split, intrinsics_scale=self.intrinsics_scale,
                    height=self.image_size[0], width=self.image_size[1])


def image_size_for_height(height: int, reference: Sequence[int]) -> tuple[int, int]:
    """(H, W) at image height ``height`` with the aspect ratio of ``reference`` (H0, W0): W = round(H · W0 / H0),
    rounded half up."""
    reference_height, reference_width = reference
    return height, max(1, math.floor(height * reference_width / reference_height + 0.5))


def reference_size(cfg: Config) -> tuple[int, int]:
    """The config's test ``image_size`` (H0, W0) (the training one when the test set has none)."""
    for loader in ('test_dataloader', 'train_dataloader'):
        size = cfg.get(loader, {}).get('dataset', {}).get('image_size')
        if isinstance(size, Sequence) and len(size) == 2:
            return int(size[0]), int(size[1])
    raise ValueError('A multi-view config sets test_dataloader.dataset.image_size = (H, W); this one has none, so '
                     '--sizes (heights) have no aspect ratio to follow. Add image_size to its test dataset.')


def sweep_points(cfg: Config, heights: Sequence[int], scales: Sequence[float],
                 rigs: Sequence[str] | None) -> list[SweepPoint]:
    """Every combination of rig, intrinsics scale and height, in that nesting order; without ``rigs`` the
    config's test split (rig ``'config'``)."""
    reference = reference_size(cfg)
    rig_splits = ([(rig, RIG_SPLITS[rig]) for rig in rigs] if rigs else
                  [(CONFIG_RIG, cfg.test_dataloader.dataset.get('split'))])
    return [SweepPoint(rig, split, float(scale), image_size_for_height(height, reference))
            for rig, split in rig_splits for scale in scales for height in heights]


def sweep_dataset_cfg(cfg: Config, point: SweepPoint) -> dict[str, Any]:
    """The config's test set at ``point``: its image size, intrinsics scale and split, without augmentation."""
    dataset = dict(cfg.test_dataloader.dataset)
    dataset.update(image_size=point.image_size, intrinsics_scale=point.intrinsics_scale, split=point.split,
                   train_augment=False)
    return dataset


def sweep_evaluator_cfg(evaluator: Mapping[str, Any], split: str) -> dict[str, Any]:
    """A NuScenesMetric config (:func:`nuscenes_evaluator`) on ``split``, computing metrics (never format-only)."""
    return dict(evaluator, split=split, format_only=False, outfile_prefix=None)


Results = Mapping[str, Mapping[SweepPoint, Mapping[str, float]]]
Summaries = Mapping[str, Mapping[SweepPoint, Mapping[str, tuple[float, float]]]]


def _size_headers(points: Sequence[SweepPoint]) -> dict[int, str]:
    """Column header per height: 'HxW' when every run has the same width there, else 'H'."""
    widths: dict[int, set[int]] = {}
    for point in points:
        widths.setdefault(point.height, set()).add(point.image_size[1])
    return {height: f'{height}x{next(iter(w))}' if len(w) == 1 else str(height) for height, w in widths.items()}


def sweep_table(results: Results, groups: Sequence[SeedGroup] | None = None, summaries: Summaries | None = None,
                metric: str = PRIMARY_METRIC) -> str:
    """``metric`` per run (or seed group: mean±spread) and rig/zoom row, one column per image height."""
    points = [point for per_run in results.values() for point in per_run]
    headers = _size_headers(points)
    heights = list(headers)
    entries, title = table_entries(results, groups, summaries, metric)
    lines = [[title, 'rig', 'split', 'zoom', *headers.values()]]
    for label, per_point in entries:
        panels: dict[tuple[str, str, float], dict[int, Any]] = {}
        for point, metrics in per_point.items():
            panels.setdefault(point.panel, {})[point.height] = metrics.get(metric, math.nan)
        for (rig, split, scale), cells in panels.items():
            row = [label, rig, split, f'{scale:g}']
            lines.append(row + [format_cell(cells[height]) if height in cells else '' for height in heights])
    return aligned_table(lines, left_columns=3)


def plot_sweep(path: Path, results: Results, train_heights: Mapping[str, int | None],
               groups: Sequence[SeedGroup] | None = None, summaries: Summaries | None = None,
               metric: str = PRIMARY_METRIC) -> Path:
    """``metric`` against image height, one panel per (rig, intrinsics scale): a line per run, or per seed group
    its mean with the band from the lowest to the highest seed. Dotted: the training heights. Written atomically."""
    plt = pyplot()
    panels = list(dict.fromkeys(point.panel for per_run in results.values() for point in per_run))
    rigs = list(dict.fromkeys((rig, split) for rig, split, _ in panels))
    scales = list(dict.fromkeys(scale for _, _, scale in panels))
    figure, axes = plt.subplots(len(rigs), len(scales), figsize=(4.2 * len(scales), 3.2 * len(rigs)), dpi=110,
                                sharex=True, sharey=True, squeeze=False)
    for (rig, split, scale) in panels:
        axis = axes[rigs.index((rig, split)), scales.index(scale)]
        if groups is not None and summaries is not None:
            for group in groups:
                points = [p for p in summaries[group.label] if p.panel == (rig, split, scale)]
                heights = [p.height for p in points]
                mean = [summaries[group.label][p][metric][0] for p in points]
                spread = [summaries[group.label][p][metric][1] for p in points]
                lows = [min(results[label][p][metric] for label in group.members) for p in points]
                highs = [max(results[label][p][metric] for label in group.members) for p in points]
                line, = axis.plot(heights, mean, marker='o', label=f'{group.label} (n={len(group.members)})')
                if any(s > 0 for s in spread if not math.isnan(s)):
                    axis.fill_between(heights, lows, highs, color=line.get_color(), alpha=0.2)
        else:
            for label, per_run in results.items():
                points = [p for p in per_run if p.panel == (rig, split, scale)]
                axis.plot([p.height for p in points], [per_run[p][metric] for p in points], marker='o', label=label)
        for height in {h for h in train_heights.values() if h is not None}:
            axis.axvline(height, color='grey', linestyle=':', linewidth=1)
        axis.set_title(f'rig {rig} ({split}), intrinsics ×{scale:g}', fontsize=9)
        axis.grid(alpha=0.3)
    for axis in axes[-1]:
        axis.set_xlabel('image height (px; width keeps the aspect ratio)')
    for axis in axes[:, 0]:
        axis.set_ylabel(metric)
    axes[0, 0].legend(fontsize=7)
    figure.suptitle(f'{metric} vs image size (dotted: training height)', fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)


def write_sweep_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                        axes: Mapping[str, Any], options: Mapping[int, Mapping[str, Any]],
                        groups: Sequence[SeedGroup] | None, summaries: Summaries | None) -> list[Path]:
    """The sweep's CSV, seed-group CSV, JSON (with the test-time encoding options per height and each run's training
    image size) and PNG (:func:`~vispe.evaluation.sweep.write_outputs`)."""
    results = {run.label: run.results for run in runs}
    train_sizes = {run.label: configs[run.label].get('train_dataloader', {}).get('dataset', {}).get('image_size')
                   for run in runs}
    report = dict(command=command, metric=PRIMARY_METRIC,
                  axes=dict(axes, size_rule='W = round(H * W0 / H0), half up; (H0, W0) = the config test image_size'),
                  encoding_options={str(k): v for k, v in options.items() if v})
    train_heights = {label: size[0] if isinstance(size, (list, tuple)) else None for label, size in train_sizes.items()}
    return write_outputs(MULTIVIEW, out, report, runs, configs, groups, summaries,
                         lambda path: plot_sweep(path, results, train_heights, groups, summaries),
                         run_extra=lambda run: dict(train_size=train_sizes[run.label]))
