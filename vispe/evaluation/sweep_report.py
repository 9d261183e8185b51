"""Reports of a multi-view 3D sweep (:mod:`vispe.evaluation.multiview_sweep`): the printed table of one metric
(nuScenes mAP), CSV rows of every metric per run and per seed group, the figure (the metric against image
height, one panel per rig and intrinsics scale) and atomic file writing.

Results are ``{run label: {SweepPoint: {metric name: value}}}``; a seed group's are ``{SweepPoint: {metric name:
(mean, spread)}}`` (:func:`~vispe.evaluation.multiview_sweep.group_summary`, spread = max - min).
"""
from __future__ import annotations

import csv
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from mmengine.config import Config

from vispe.evaluation.multiview_sweep import PRIMARY_METRIC, SPREAD, SeedGroup, SweepPoint
from vispe.files import write_atomically

__all__ = ['format_cell', 'format_number', 'group_csv_rows', 'json_safe', 'metric_names', 'plot_sweep', 'run_csv_rows',
           'run_record',
           'seed_group_records', 'sha256', 'sweep_table', 'write_atomically', 'write_csv', 'write_json',
           'write_sweep_outputs']

Results = Mapping[str, Mapping[SweepPoint, Mapping[str, float]]]
Summaries = Mapping[str, Mapping[SweepPoint, Mapping[str, tuple[float, float]]]]
POINT_COLUMNS = ['rig', 'split', 'intrinsics_scale', 'height', 'width']


def write_csv(path: Path, rows: list[list[Any]]) -> None:
    with open(path, 'w', newline='') as handle:
        csv.writer(handle).writerows(rows)


def write_json(path: Path, report: Mapping[str, Any]) -> None:
    """Strict JSON (NaN as null)."""
    Path(path).write_text(json.dumps(json_safe(report), indent=1, default=str, allow_nan=False))


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def json_safe(value: Any) -> Any:
    """``value`` with NaN and infinite floats as None (strict JSON), tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def metric_names(results: Results) -> list[str]:
    """Every metric name of the results, in first-seen order."""
    return list(dict.fromkeys(name for per_run in results.values() for metrics in per_run.values() for name in metrics))


def format_number(value: float) -> str:
    """A metric as the tables and CSVs write it: 4 decimals, or 'nan'."""
    return 'nan' if math.isnan(value) else f'{value:.4f}'


def format_cell(value: Any) -> str:
    """A table cell: a number, or a (mean, spread) pair as 'mean±spread'."""
    if isinstance(value, tuple):
        return f'{format_number(value[0])}±{format_number(value[1])}'
    return format_number(float(value))


def run_csv_rows(results: Results, columns: Sequence[str] = POINT_COLUMNS) -> list[list[Any]]:
    """Header and one row per run and point: model, the point's ``columns`` (its ``record()``; by default rig,
    split, intrinsics_scale, height, width), every metric."""
    names = metric_names(results)
    rows: list[list[Any]] = [['model', *columns, *names]]
    for label, per_run in results.items():
        for point, metrics in per_run.items():
            rows.append([label, *point.record().values(),
                         *[format_number(float(metrics[name])) if name in metrics else '' for name in names]])
    return rows


def group_csv_rows(groups: Sequence[SeedGroup], summaries: Summaries,
                   columns: Sequence[str] = POINT_COLUMNS) -> list[list[Any]]:
    """Header and one row per seed group and point: group, seeds, members, the point, then ``<metric>_mean`` and
    ``<metric>_spread`` (max - min over the seeds) of every metric."""
    names = list(dict.fromkeys(name for summary in summaries.values() for metrics in summary.values()
                               for name in metrics))
    header = ['group', 'seeds', 'members', *columns,
              *[f'{name}_{kind}' for name in names for kind in ('mean', 'spread')]]
    rows: list[list[Any]] = [header]
    for group in groups:
        for point, metrics in summaries[group.label].items():
            values = [format_number(metrics[name][i]) if name in metrics else '' for name in names for i in (0, 1)]
            rows.append([group.label, ' '.join('-' if seed is None else str(seed) for seed in group.seeds),
                         ' '.join(group.members), *point.record().values(), *values])
    return rows


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
    entries: list[tuple[str, Mapping[SweepPoint, Any]]]
    if groups is not None and summaries is not None:
        entries = [(group.label, summaries[group.label]) for group in groups]
        title = f'model ({metric}, mean±spread, spread = {SPREAD})'
    else:
        entries = list(results.items())
        title = f'model ({metric})'
    lines = [[title, 'rig', 'split', 'zoom', *headers.values()]]
    for label, per_point in entries:
        panels: dict[tuple[str, str, float], dict[int, Any]] = {}
        for point, metrics in per_point.items():
            panels.setdefault(point.panel, {})[point.height] = metrics.get(metric, math.nan)
        for (rig, split, scale), cells in panels.items():
            row = [label, rig, split, f'{scale:g}']
            for height in heights:
                value = cells.get(height)
                if value is None:
                    row.append('')
                elif isinstance(value, tuple):
                    row.append(f'{format_number(value[0])}±{format_number(value[1])}')
                else:
                    row.append(format_number(float(value)))
            lines.append(row)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ['  '.join(cell.rjust(width) if i > 2 else cell.ljust(width) for i, (cell, width) in
                      enumerate(zip(line, widths))).rstrip() for line in lines]
    return '\n'.join([text[0], '  '.join('-' * width for width in widths), *text[1:]])


def plot_sweep(path: Path, results: Results, train_heights: Mapping[str, int | None],
               groups: Sequence[SeedGroup] | None = None, summaries: Summaries | None = None,
               metric: str = PRIMARY_METRIC) -> Path:
    """``metric`` against image height, one panel per (rig, intrinsics scale): a line per run, or per seed group
    its mean with the band from the lowest to the highest seed. Dotted: the training heights. Written atomically."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
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
    try:
        return write_atomically(Path(path), lambda temporary: figure.savefig(temporary, format='png'))
    finally:
        plt.close(figure)


def run_record(run: Any, cfg: Config, axes: Sequence[str], **extra: Any) -> dict[str, Any]:
    """A run's JSON record: label, config, checkpoint and its SHA-256, ``extra``, the test set's options but the
    swept ``axes``, and per point its ``record()`` and metrics."""
    return dict(label=run.label, config=str(run.config), checkpoint=str(run.checkpoint),
                checkpoint_sha256=sha256(run.checkpoint), **extra,
                dataset={k: v for k, v in cfg.test_dataloader.dataset.items() if k not in axes},
                results=[dict(**point.record(), metrics=metrics) for point, metrics in run.results.items()])


def seed_group_records(groups: Sequence[SeedGroup], summaries: Mapping[str, Mapping[Any, Mapping[str, tuple]]]
                       ) -> list[dict[str, Any]]:
    """Per seed group its JSON record: members, seeds, and per point the mean and spread of every metric."""
    return [dict(label=group.label, members=group.members, seeds=group.seeds, spread=SPREAD,
                 results=[dict(**point.record(), mean={k: v[0] for k, v in metrics.items()},
                               spread={k: v[1] for k, v in metrics.items()})
                          for point, metrics in summaries[group.label].items()])
            for group in groups]


def write_sweep_outputs(out: Path, command: str, runs: Sequence[Any], configs: Mapping[str, Config],
                        axes: Mapping[str, Any], options: Mapping[int, Mapping[str, Any]],
                        groups: Sequence[SeedGroup] | None, summaries: Summaries | None) -> list[Path]:
    """``<out>.csv`` (every metric per run and point), ``<out>.seeds.csv`` (mean and spread per seed group),
    ``<out>.json`` (command, axes, runs with config, checkpoint hash and results, seed groups) and ``<out>.png``,
    each written atomically. ``runs`` have ``label``, ``config``, ``checkpoint`` and ``results`` {SweepPoint:
    metrics}."""
    out = Path(out)
    results = {run.label: run.results for run in runs}
    written = [write_atomically(out.with_suffix('.csv'), lambda path: write_csv(path, run_csv_rows(results)))]
    if groups:
        written.append(write_atomically(out.with_suffix('.seeds.csv'),
                                        lambda path: write_csv(path, group_csv_rows(groups, summaries))))
    train_sizes = {run.label: configs[run.label].get('train_dataloader', {}).get('dataset', {}).get('image_size')
                   for run in runs}
    report: dict[str, Any] = dict(
        command=command, metric=PRIMARY_METRIC,
        axes=dict(axes, size_rule='W = round(H * W0 / H0), half up; (H0, W0) = the config test image_size'),
        encoding_options={str(k): v for k, v in options.items() if v},
        runs=[run_record(run, configs[run.label], ('image_size', 'intrinsics_scale', 'split'),
                         train_size=train_sizes[run.label]) for run in runs])
    if groups:
        report['seed_groups'] = seed_group_records(groups, summaries)
    written.append(write_atomically(out.with_suffix('.json'), lambda path: write_json(path, report)))
    train_heights = {label: size[0] if isinstance(size, (list, tuple)) else None for label, size in train_sizes.items()}
    written.append(plot_sweep(out.with_suffix('.png'), results, train_heights, groups, summaries))
    return written
