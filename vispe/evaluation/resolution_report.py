"""Reports of a single-view resolution sweep (``tools/eval_resolution.py`` on classifiers and 2D detectors): the
printed table of the primary metric by test size, ``<out>.csv`` (every metric per run and size), ``<out>.seeds.csv``
(mean and spread per seed group), ``<out>.json`` and the figure.

Results are ``{size: {metric name: value}}`` per run; a seed group's summary is ``{size: {metric name: (mean,
spread)}}`` (:func:`~vispe.evaluation.multiview_sweep.group_summary`, spread = max - min over the seeds).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from vispe.evaluation.sweep import SPREAD, SeedGroup, sha256, write_atomically, write_csv, write_json
from vispe.reporting.provenance import run_stamp

__all__ = ['formatted', 'primary_metric', 'resolution_table', 'write_resolution_outputs']

Summaries = Mapping[str, Mapping[int, Mapping[str, tuple[float, float]]]]


def primary_metric(runs: Sequence[Any]) -> str:
    """The first metric of the first run's results (top1, bbox_mAP), shared by every run.

    Raises:
        ValueError: a run does not report it (classifiers and detectors mixed).
    """
    name = next(iter(next(iter(runs[0].results.values()))))
    for run in runs:
        for size, results in run.results.items():
            if name not in results:
                raise ValueError(f'Runs measure different metrics: {runs[0].label} reports {name!r}, {run.label} at '
                                 f'{size} reports {sorted(results)}; compare classifiers and detectors separately.')
    return name


def formatted(name: str, value: float) -> str:
    return f'{value:.3f}' if name.startswith('bbox') else f'{value:.2f}'


def resolution_table(runs: Sequence[Any], sizes: Sequence[int], groups: Sequence[SeedGroup] | None = None,
                     summaries: Summaries | None = None) -> str:
    """The primary metric per run (or per seed group, as mean±spread) and test size, as aligned text."""
    metric = primary_metric(runs)
    name = 'top-1 %' if metric == 'top1' else metric
    if groups and summaries:
        header = [f'model ({name}, mean±spread, spread = {SPREAD})', *map(str, sizes)]
        rows = [[group.label, *[f'{formatted(metric, summaries[group.label][size][metric][0])}±'
                                f'{formatted(metric, summaries[group.label][size][metric][1])}' for size in sizes]]
                for group in groups]
    else:
        header = [f'model ({name})', *map(str, sizes)]
        rows = [[run.label, *[formatted(metric, run.results[size][metric]) for size in sizes]] for run in runs]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ['  '.join(cell.rjust(width) if j else cell.ljust(width) for j, (cell, width) in
                       enumerate(zip(row, widths))) for row in [header, *rows]]
    lines.insert(1, '  '.join('-' * width for width in widths))
    return '\n'.join(lines)


def write_resolution_outputs(out: Path, command: str, eval_mode: str, sizes: Sequence[int], runs: Sequence[Any],
                             options: Mapping[int, Mapping[str, Any]], datasets: Mapping[str, Mapping[str, Any]],
                             train_sizes: Mapping[str, Any], groups: Sequence[SeedGroup] | None = None,
                             summaries: Summaries | None = None,
                             tuning: Mapping[str, Mapping[str, Any]] | None = None) -> list[Path]:
    """Write ``<out>.csv``, ``<out>.seeds.csv`` (with groups), ``<out>.json`` and ``<out>.png`` atomically; ``runs``
    have ``label``, ``config``, ``checkpoint`` and ``results`` {size: metrics}; ``tuning`` is the record of
    ``--tune`` per run label and size (the chosen options and their held-out scores)."""
    out = Path(out)
    names = list(next(iter(runs[0].results.values())))
    rows = [['model', 'size', *names]]
    rows += [[run.label, size, *[formatted(name, run.results[size][name]) for name in names]]
             for run in runs for size in sizes]
    written = [write_atomically(out.with_suffix('.csv'), lambda path: write_csv(path, rows))]
    report: dict[str, Any] = dict(
        command=command, **run_stamp(), sizes=list(sizes), eval_mode=eval_mode,
        encoding_options={str(k): v for k, v in options.items() if v},
        runs=[dict(label=run.label, config=str(run.config), checkpoint=str(run.checkpoint),
                   checkpoint_sha256=sha256(run.checkpoint), train_size=train_sizes[run.label],
                   dataset=datasets[run.label], results={str(k): v for k, v in run.results.items()},
                   **({'tuned_from': run.tuned_from} if getattr(run, 'tuned_from', None) else {}))
              for run in runs])
    if tuning:
        report['tuning'] = {label: dict(per_size) for label, per_size in tuning.items()}
    if groups and summaries:
        seed_rows = [['group', 'members', 'size', *[f'{name}_{part}' for name in names for part in ('mean', 'spread')]]]
        seed_rows += [[group.label, ' '.join(group.members), size,
                       *[formatted(name, value) for name in names for value in summaries[group.label][size][name]]]
                      for group in groups for size in sizes]
        written.append(write_atomically(out.with_suffix('.seeds.csv'), lambda path: write_csv(path, seed_rows)))
        report['seed_groups'] = [
            dict(label=group.label, members=list(group.members), seeds=list(group.seeds), spread=SPREAD,
                 results={str(size): dict(mean={k: v[0] for k, v in summaries[group.label][size].items()},
                                          spread={k: v[1] for k, v in summaries[group.label][size].items()})
                          for size in sizes})
            for group in groups]
    written.append(write_atomically(out.with_suffix('.json'), lambda path: write_json(path, report)))
    written.append(plot_resolution(out.with_suffix('.png'), eval_mode, sizes, runs, train_sizes, groups, summaries))
    return written


def plot_resolution(path: Path, eval_mode: str, sizes: Sequence[int], runs: Sequence[Any],
                    train_sizes: Mapping[str, Any], groups: Sequence[SeedGroup] | None = None,
                    summaries: Summaries | None = None) -> Path:
    """The primary metric against test size, one line per run (per seed group: the mean, the band its spread)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    metric = primary_metric(runs)
    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    if groups and summaries:
        for group in groups:
            mean = [summaries[group.label][size][metric][0] for size in sizes]
            spread = [summaries[group.label][size][metric][1] for size in sizes]
            line, = axis.plot(sizes, mean, marker='o', label=f'{group.label} ({len(group.members)} seeds)')
            axis.fill_between(sizes, [m - s / 2 for m, s in zip(mean, spread)],
                              [m + s / 2 for m, s in zip(mean, spread)], color=line.get_color(), alpha=0.2)
    else:
        for run in runs:
            axis.plot(sizes, [run.results[size][metric] for size in sizes], marker='o', label=run.label)
    for size in {s for s in train_sizes.values() if isinstance(s, int)}:
        axis.axvline(size, color='grey', linestyle=':', linewidth=1)
    axis.set_xlabel(f'test size (px, {eval_mode})')
    axis.set_ylabel('top-1 accuracy (%)' if metric == 'top1' else metric)
    title = f'{metric} vs input size (dotted: training size)'
    axis.set_title(title + ('\nline: mean over seeds, band: their spread (max - min)' if groups else ''), fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    try:
        return write_atomically(path, lambda target: figure.savefig(target, format='png'))
    finally:
        plt.close(figure)
