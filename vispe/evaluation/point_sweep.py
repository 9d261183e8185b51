"""A point-cloud 3D detector (V-DETR, Shen et al. ICLR 2024) measured across point density and scene scale, for
``tools/eval_resolution.py``: how a 3D encoding "extrapolates" is how the detector holds up on clouds sparser or
denser than in training, and in rooms larger or smaller than in training.

A sweep point has two axes, both options of :class:`~vispe.datasets.PointScenes`:

- point density d: each scene gives round(num_points · d) points (the config's num_points at d = 1; the same
  fixed, seeded sample of the scene at every evaluation). The backbone still keeps its num_samples tokens, so a
  denser cloud fills their neighbourhoods and a sparser one thins them.
- scene scale s: point coordinates, box centres and box sizes times s (a room and its objects s times larger).

The metric is the config's :class:`~vispe.evaluation.IndoorAP` (3DETR's VOC-style AP at 3D IoU 0.25 and 0.5); the
table shows ``indoor/mAP25`` and ``indoor/mAP50``, CSV and JSON hold every metric (per class, AR). Runs named
``<name>_s<seed>`` group as mean and spread (max − min) with ``--group-seeds``
(:func:`~vispe.evaluation.multiview_sweep.seed_groups`).
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
from vispe.datasets.point_scenes import PointScenes
from vispe.engine import named_unknown_types
from vispe.evaluation.indoor_ap import IndoorAP
from vispe.evaluation.multiview_sweep import SPREAD, SeedGroup, _registered
from vispe.evaluation.sweep_report import (format_cell, format_number, metric_names, run_record, seed_group_records,
                                           write_atomically, write_csv, write_json)
from vispe.models.vdetr import VDETR
from vispe.registry import DATASETS, METRICS, MODELS

__all__ = ['TABLE_METRICS', 'PointSweepPoint', 'check_point_config', 'evaluate_point_runs', 'is_point_config',
           'point_dataset_cfg', 'point_sweep_points', 'point_table', 'write_point_outputs']

TABLE_METRICS = ('indoor/mAP25', 'indoor/mAP50')

Results = Mapping[str, Mapping['PointSweepPoint', Mapping[str, float]]]
Summaries = Mapping[str, Mapping['PointSweepPoint', Mapping[str, tuple[float, float]]]]


@dataclass(frozen=True)
class PointSweepPoint:
    """One evaluation setting of a point-cloud detector: the point density and the scene scale."""

    point_density: float
    scene_scale: float

    def record(self) -> dict[str, float]:
        return dict(point_density=self.point_density, scene_scale=self.scene_scale)


def is_point_config(cfg: Config) -> bool:
    """Whether the config's model is a :class:`~vispe.models.vdetr.VDETR` (or a subclass)."""
    model = cfg.get('model')
    kind = _registered(MODELS, model.get('type')) if isinstance(model, Mapping) else None
    return kind is not None and issubclass(kind, VDETR)


def check_point_config(cfg: Config, label: str) -> None:
    """The test set must be :class:`PointScenes` (its point_density and scene_scale are the axes) and the test
    metric :class:`IndoorAP`."""
    kind = _registered(DATASETS, cfg.test_dataloader.dataset.get('type'))
    if kind is None or not issubclass(kind, PointScenes):
        raise ValueError(f'{label}: the test dataset is {cfg.test_dataloader.dataset.get("type")!r}; the point axes '
                         f'(--point-density, --scene-scale) need a PointScenes test set. Evaluate a config of '
                         f'configs/vdetr/ or set test_dataloader.dataset.type=\'PointScenes\'.')
    evaluator = cfg.get('test_evaluator')
    metric = _registered(METRICS, evaluator.get('type')) if isinstance(evaluator, Mapping) else None
    if metric is None or not issubclass(metric, IndoorAP):
        raise ValueError(f'{label}: the test evaluator is {evaluator!r}, not IndoorAP; set '
                         f'test_evaluator=dict(type=\'IndoorAP\', classes=...) in the config.')


def point_sweep_points(densities: Sequence[float], scales: Sequence[float]) -> list[PointSweepPoint]:
    """Every (density, scale), scale outermost (one table row per scale)."""
    return [PointSweepPoint(float(density), float(scale)) for scale in scales for density in densities]


def point_dataset_cfg(cfg: Config, point: PointSweepPoint) -> dict[str, Any]:
    """The config's test set at ``point``, without augmentation."""
    dataset = dict(cfg.test_dataloader.dataset)
    dataset.update(point_density=point.point_density, scene_scale=point.scene_scale, train_augment=False)
    return dataset


def evaluate_point_runs(runs: Sequence[Any], configs: Mapping[str, Config], densities: Sequence[float],
                        scales: Sequence[float], batch_size: int | None, evaluate: Callable[..., dict[str, float]]
                        ) -> None:
    """Fill each run's ``results`` {PointSweepPoint: metrics} with its config's IndoorAP at every (scale, density).

    Every run's config is checked and every setting's test set built (its scenes' files checked) before any
    model runs. ``runs`` have ``label`` and ``checkpoint``; ``evaluate(model, cfg, dataset, batch_size, progress,
    metric)`` is ``tools/eval_resolution.py``'s loop over a dataset.
    """
    for run in runs:
        check_point_config(configs[run.label], run.label)
    points = point_sweep_points(densities, scales)
    datasets = {run.label: [DATASETS.build(point_dataset_cfg(configs[run.label], point)) for point in points]
                for run in runs}
    total = sum(len(dataset) for per_run in datasets.values() for dataset in per_run)
    with tqdm(total=total, unit='scene', desc='eval points', file=sys.stderr) as progress:
        for run in runs:
            cfg = configs[run.label]
            with named_unknown_types():
                model = MODELS.build(cfg.model).eval()
            load_checkpoint(model, run.checkpoint)
            size = batch_size or cfg.test_dataloader.get('batch_size', 1)
            for point, dataset in zip(points, datasets[run.label]):
                progress.set_postfix_str(f'{run.label} density {point.point_density:g} scale {point.scene_scale:g}')
                run.results[point] = evaluate(model, cfg, dataset, size, progress, METRICS.build(cfg.test_evaluator))


def point_table(results: Results, groups: Sequence[SeedGroup] | None = None,
                summaries: Summaries | None = None) -> str:
    """mAP25 and mAP50 per run (or seed group: mean±spread) and scene scale, one column pair per point density."""
    entries: list[tuple[str, Mapping[PointSweepPoint, Mapping[str, Any]]]]
    if groups is not None and summaries is not None:
        entries = [(group.label, summaries[group.label]) for group in groups]
        title = f'model (mean±spread, spread = {SPREAD})'
    else:
        entries = list(results.items())
        title = 'model'
    densities = list(dict.fromkeys(point.point_density for per_run in results.values() for point in per_run))
    header = [title, 'scale', *[f'{name.split("/")[-1]} @ density {density:g}' for density in densities
                                for name in TABLE_METRICS]]
    lines = [header]
    for label, per_point in entries:
        rows: dict[float, dict[float, Mapping[str, Any]]] = {}
        for point, metrics in per_point.items():
            rows.setdefault(point.scene_scale, {})[point.point_density] = metrics
        for scale, cells in rows.items():
            lines.append([label, f'{scale:g}', *[format_cell(cells[density].get(name, math.nan)) if density in cells
                                                   else '' for density in densities for name in TABLE_METRICS]])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ['  '.join(cell.rjust(width) if i > 0 else cell.ljust(width) for i, (cell, width) in
                      enumerate(zip(line, widths))).rstrip() for line in lines]
    return '\n'.join([text[0], '  '.join('-' * width for width in widths), *text[1:]])


def plot_points(path: Path, results: Results, groups: Sequence[SeedGroup] | None,
                summaries: Summaries | None) -> Path:
    """mAP25 and mAP50 against point density, one line per run (or seed group, with its min–max band) and scene
    scale (scales as line styles); dotted: the training density 1. Written atomically."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
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
    try:
        return write_atomically(Path(path), lambda temporary: figure.savefig(temporary, format='png'))
    finally:
        plt.close(figure)


def _run_rows(results: Results) -> list[list[Any]]:
    names = metric_names(results)
    rows: list[list[Any]] = [['model', 'point_density', 'scene_scale', *names]]
    for label, per_run in results.items():
        for point, metrics in per_run.items():
            rows.append([label, point.point_density, point.scene_scale,
                         *[format_number(float(metrics[name])) if name in metrics else '' for name in names]])
    return rows


def _group_rows(groups: Sequence[SeedGroup], summaries: Summaries) -> list[list[Any]]:
    names = list(dict.fromkeys(name for summary in summaries.values() for metrics in summary.values()
                               for name in metrics))
    rows: list[list[Any]] = [['group', 'seeds', 'members', 'point_density', 'scene_scale',
                              *[f'{name}_{kind}' for name in names for kind in ('mean', 'spread')]]]
    for group in groups:
        for point, metrics in summaries[group.label].items():
            rows.append([group.label, ' '.join('-' if seed is None else str(seed) for seed in group.seeds),
                         ' '.join(group.members), point.point_density, point.scene_scale,
                         *[format_number(metrics[name][i]) if name in metrics else '' for name in names
                           for i in (0, 1)]])
    return rows


def write_point_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                        groups: Sequence[SeedGroup] | None, summaries: Summaries | None) -> list[Path]:
    """``<out>.csv`` (every metric per run and point), ``<out>.seeds.csv`` (mean and spread per seed group),
    ``<out>.json`` (command, axes, runs with config, checkpoint hash, test set and results, seed groups) and
    ``<out>.png``, each written atomically. ``runs`` have ``label``, ``config``, ``checkpoint`` and ``results``
    {PointSweepPoint: metrics}."""
    out = Path(out)
    results = {run.label: run.results for run in runs}
    rows = _run_rows(results)
    written = [write_atomically(out.with_suffix('.csv'), lambda path: write_csv(path, rows))]
    if groups:
        written.append(write_atomically(out.with_suffix('.seeds.csv'),
                                        lambda path: write_csv(path, _group_rows(groups, summaries))))
    report: dict[str, Any] = dict(
        command=command, metrics=list(TABLE_METRICS),
        axes=dict(point_density='points per scene = round(num_points * point_density)',
                  scene_scale='coordinates, box centres and sizes times scene_scale'),
        runs=[run_record(run, configs[run.label], ('point_density', 'scene_scale')) for run in runs])
    if groups:
        report['seed_groups'] = seed_group_records(groups, summaries)
    written.append(write_atomically(out.with_suffix('.json'), lambda path: write_json(path, report)))
    written.append(plot_points(out.with_suffix('.png'), results, groups, summaries))
    return written
