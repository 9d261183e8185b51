"""A point-cloud 3D detector (V-DETR, Shen et al. ICLR 2024) measured across point density and scene scale, for
``tools/eval_resolution.py``: how a 3D encoding "extrapolates" is how the detector holds up on clouds sparser or
denser than in training, and in rooms larger or smaller than in training.

A sweep point has two axes, both options of :class:`~vispe.datasets.PointScenes`:

- point density d: each scene gives round(num_points · d) points (the config's num_points at d = 1; the same
  fixed, seeded sample of the scene at every evaluation). The backbone still keeps its num_samples tokens, so a
  denser cloud fills their neighbourhoods and a sparser one thins them.
- scene scale s: point coordinates, box centres and box sizes times s (a room and its objects s times larger).

The metric is the config's :class:`~vispe.evaluation.IndoorAP` (3DETR's VOC-style AP at 3D IoU 0.25 and 0.5); the
table shows ``indoor/mAP25`` and ``indoor/mAP50``, CSV and JSON hold every metric (per class, AR; with rotated
boxes the heading error ``indoor/mAOE25``, which the JSON's table metrics then list too). Runs named
``<name>_s<seed>`` group as mean and spread (max − min) with ``--group-seeds`` (:mod:`vispe.evaluation.sweep`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mmengine.config import Config

from vispe.datasets.point_scenes import PointScenes
from vispe.evaluation.indoor_ap import IndoorAP
from vispe.evaluation.sweep import (SeedGroup, SweepKind, evaluate_runs, format_cell, pyplot,
                                    save_figure, table_entries, write_outputs)
from vispe.models.vdetr import VDETR
from vispe.registry import DATASETS
from vispe.text_table import aligned_table

__all__ = ['POINTS', 'TABLE_METRICS', 'PointSweepPoint', 'evaluate_point_runs', 'point_dataset_cfg',
           'point_sweep_points', 'point_table', 'write_point_outputs']

TABLE_METRICS = ('indoor/mAP25', 'indoor/mAP50')
POINTS = SweepKind(runs='point-cloud runs', model=VDETR, dataset=PointScenes, metric=IndoorAP,
                   flags=('--point-density', '--scene-scale'), configs='configs/vdetr/', unit='scene',
                   columns=('point_density', 'scene_scale'), dataset_axes=('point_density', 'scene_scale'))

Results = Mapping[str, Mapping['PointSweepPoint', Mapping[str, float]]]
Summaries = Mapping[str, Mapping['PointSweepPoint', Mapping[str, tuple[float, float]]]]


@dataclass(frozen=True)
class PointSweepPoint:
    """One evaluation setting of a point-cloud detector: the point density and the scene scale."""

    point_density: float
    scene_scale: float

    def record(self) -> dict[str, float]:
        return dict(point_density=self.point_density, scene_scale=self.scene_scale)


def point_sweep_points(densities: Sequence[float], scales: Sequence[float]) -> list[PointSweepPoint]:
    """Every (density, scale), scale outermost (one table row per scale)."""
    return [PointSweepPoint(float(density), float(scale)) for scale in scales for density in densities]


def point_dataset_cfg(cfg: Config, point: PointSweepPoint) -> dict[str, Any]:
    """The config's test set at ``point``, without augmentation."""
    dataset = dict(cfg.test_dataloader.dataset)
    dataset.update(point_density=point.point_density, scene_scale=point.scene_scale, train_augment=False)
    return dataset


def evaluate_point_runs(runs: Sequence[Any], configs: Mapping[str, Config], densities: Sequence[float],
                        scales: Sequence[float], batch_size: int | None, evaluate: Callable[..., dict[str, float]],
                        progress: bool = True) -> None:
    """Fill each run's ``results`` {PointSweepPoint: metrics} with its config's IndoorAP at every (scale, density)
    (:func:`~vispe.evaluation.sweep.evaluate_runs`)."""
    points = point_sweep_points(densities, scales)
    evaluate_runs(POINTS, runs, configs, {run.label: points for run in runs},
                  lambda cfg, point, label: DATASETS.build(point_dataset_cfg(cfg, point)), batch_size, evaluate,
                  lambda point: f'density {point.point_density:g} scale {point.scene_scale:g}', progress=progress)


def point_table(results: Results, groups: Sequence[SeedGroup] | None = None,
                summaries: Summaries | None = None) -> str:
    """mAP25 and mAP50 per run (or seed group: mean±spread) and scene scale, one column pair per point density."""
    entries, title = table_entries(results, groups, summaries)
    densities = list(dict.fromkeys(point.point_density for per_run in results.values() for point in per_run))
    lines = [[title, 'scale', *[f'{name.split("/")[-1]} @ density {density:g}' for density in densities
                                for name in TABLE_METRICS]]]
    for label, per_point in entries:
        rows: dict[float, dict[float, Mapping[str, Any]]] = {}
        for point, metrics in per_point.items():
            rows.setdefault(point.scene_scale, {})[point.point_density] = metrics
        for scale, cells in rows.items():
            lines.append([label, f'{scale:g}', *[format_cell(cells[density].get(name, math.nan)) if density in cells
                                                   else '' for density in densities for name in TABLE_METRICS]])
    return aligned_table(lines, left_columns=1)


def plot_points(path: Path, results: Results, groups: Sequence[SeedGroup] | None,
                summaries: Summaries | None) -> Path:
    """mAP25 and mAP50 against point density, one line per run (or seed group, with its min–max band) and scene
    scale (scales as line styles); dotted: the training density 1. Written atomically."""
    plt = pyplot()
    figure, axes = plt.subplots(1, len(TABLE_METRICS), figsize=(5 * len(TABLE_METRICS), 3.6), dpi=110, squeeze=False)
    styles = ['-', '--', ':', '-.']
    scales = list(dict.fromkeys(point.scene_scale for per_run in results.values() for point in per_run))
    for axis, metric in zip(axes[0], TABLE_METRICS):
        colours: dict[str, Any] = {}
        series = ([(group.label, group.members) for group in groups] if groups is not None and summaries is not None
                  else [(label, (label,)) for label in results])
        for label, members in series:
            for scale_index, scale in enumerate(scales):
                points = sorted((p for p in results[members[0]] if p.scene_scale == scale),
                                key=lambda p: p.point_density)
                values = [[results[member][p][metric] for member in members] for p in points]
                mean = [sum(v) / len(v) for v in values]
                line, = axis.plot([p.point_density for p in points], mean, marker='o',
                                  linestyle=styles[scale_index % len(styles)], color=colours.get(label),
                                  label=f'{label} (n={len(members)}), scale {scale:g}')
                colours[label] = line.get_color()
                if len(members) > 1:
                    axis.fill_between([p.point_density for p in points], [min(v) for v in values],
                                      [max(v) for v in values], color=line.get_color(), alpha=0.15)
        axis.axvline(1.0, color='grey', linestyle=':', linewidth=1)
        axis.set_xscale('log', base=2)
        axis.set_xlabel('point density (x the training points per scene)')
        axis.set_ylabel(metric)
        axis.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=6)
    figure.suptitle('3D detection AP vs point density and scene scale (dotted: training density)', fontsize=10)
    figure.tight_layout()
    return save_figure(figure, path)


def write_point_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                        groups: Sequence[SeedGroup] | None, summaries: Summaries | None) -> list[Path]:
    """The sweep's CSV, seed-group CSV, JSON and PNG (:func:`~vispe.evaluation.sweep.write_outputs`)."""
    results = {run.label: run.results for run in runs}
    rotated = any(cfg.get('test_evaluator', {}).get('rotated', False) for cfg in configs.values())
    report = dict(command=command, metrics=[*TABLE_METRICS, *(['indoor/mAOE25'] if rotated else [])],
                  axes=dict(point_density='points per scene = round(num_points * point_density)',
                            scene_scale='coordinates, box centres and sizes times scene_scale'))
    return write_outputs(POINTS, out, report, runs, configs, groups, summaries,
                         lambda path: plot_points(path, results, groups, summaries))
