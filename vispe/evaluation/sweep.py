"""The scaffold of every 3D sweep of ``tools/eval_resolution.py`` (multi-view detectors, point-cloud detectors,
crop-depth models): which configs a sweep takes, the evaluation of runs × sweep points, runs that differ only by their
seed grouped as mean and spread, and the outputs (CSV, seed-group CSV, JSON, PNG, the printed table).

A sweep module defines its :class:`SweepKind`, its sweep point (a frozen dataclass with ``record()``), the test set
of each point, its table and its figure; the rest is here. Results are ``{run label: {point: {metric: value}}}``; a
seed group's are ``{point: {metric: (mean, spread)}}`` (:func:`group_summary`, spread = max - min).
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ContextManager, Hashable, Mapping, Sequence

from mmengine.config import Config
from torch import nn
from tqdm import tqdm

from vispe.checkpoint import load_checkpoint
from vispe.engine import named_unknown_types
from vispe.engine.arguments import InvalidArgument
from vispe.files import write_atomically
from vispe.registry import DATASETS, METRICS, MODELS
from vispe.reporting.provenance import run_stamp
from vispe.text_table import aligned_table

__all__ = ['SEED_SUFFIX', 'SPREAD', 'SeedGroup', 'SweepKind', 'evaluate_runs', 'format_cell',
           'format_number', 'group_summary', 'json_safe', 'pyplot', 'registered', 'save_figure', 'seed_groups',
           'sha256', 'table_entries', 'write_atomically', 'write_csv', 'write_json', 'write_outputs']

SPREAD = 'max - min over seeds'
SEED_SUFFIX = re.compile(r'^(?P<group>.+?)(?:[_-]s|_seed)(?P<seed>\d+)$')

Results = Mapping[str, Mapping[Any, Mapping[str, float]]]
Summaries = Mapping[str, Mapping[Any, Mapping[str, tuple[float, float]]]]


def registered(registry: Any, kind: Any) -> type | None:
    """The class a config's ``type`` names (a class, or a registered name with or without scope)."""
    found = kind if isinstance(kind, type) else registry.get(kind) if isinstance(kind, str) else None
    return found if isinstance(found, type) else None


@dataclass(frozen=True)
class SweepKind:
    """One kind of model a sweep evaluates.

    Attributes:
        runs: how messages name its runs ('point-cloud runs').
        model: the model class its configs build (subclasses included).
        dataset: the test-set class whose options are the sweep's axes.
        metric: the test metric class (None: the sweep module checks the evaluator itself).
        flags: the command-line options of its axes ('--point-density', '--scene-scale').
        configs: where its configs live ('configs/vdetr/').
        unit: what its test sets count ('scene').
        columns: the keys of its points' ``record()``, the CSV columns.
        dataset_axes: the test-set options the sweep sets (left out of the runs' JSON dataset records).
    """

    runs: str
    model: type
    dataset: type
    metric: type | None
    flags: tuple[str, ...]
    configs: str
    unit: str
    columns: tuple[str, ...]
    dataset_axes: tuple[str, ...]

    def is_config(self, cfg: Config) -> bool:
        """Whether the config's model is of this kind."""
        model = cfg.get('model')
        kind = registered(MODELS, model.get('type')) if isinstance(model, Mapping) else None
        return kind is not None and issubclass(kind, self.model)

    def check_config(self, cfg: Config, label: str) -> None:
        """The config's test set must be of this kind's dataset (its options are the axes), and its test evaluator
        this kind's metric."""
        dataset_type = cfg.test_dataloader.dataset.get('type')
        kind = registered(DATASETS, dataset_type)
        if kind is None or not issubclass(kind, self.dataset):
            raise ValueError(f'{label}: the test dataset is {dataset_type!r}; the axes {", ".join(self.flags)} need '
                             f'a {self.dataset.__name__} test set. Evaluate a config of {self.configs} or set '
                             f"test_dataloader.dataset.type='{self.dataset.__name__}'.")
        if self.metric is None:
            return
        evaluator = cfg.get('test_evaluator')
        metric = registered(METRICS, evaluator.get('type')) if isinstance(evaluator, Mapping) else None
        if metric is None or not issubclass(metric, self.metric):
            raise ValueError(f"{label}: the test evaluator is {evaluator!r}, not {self.metric.__name__}; set "
                             f"test_evaluator=dict(type='{self.metric.__name__}', ...) in the config.")


def evaluate_runs(kind: SweepKind, runs: Sequence[Any], configs: Mapping[str, Config],
                  points: Mapping[str, Sequence[Hashable]], dataset: Callable[[Config, Any, str], Any],
                  batch_size: int | None, evaluate: Callable[..., dict[str, float]], describe: Callable[[Any], str],
                  metric: Callable[[str, Any], Any] | None = None, models: Mapping[str, nn.Module] | None = None,
                  around: Callable[[nn.Module, Any], ContextManager[Any]] | None = None, progress: bool = True
                  ) -> None:
    """Fill each run's ``results`` {point: metrics} at every one of its ``points``.

    Every run's config is checked and every point's test set built (its files checked) before any model runs; then
    each run's model (from ``models``, or built from its config with its checkpoint loaded) is evaluated at each of
    its points: ``evaluate(model, cfg, dataset, batch_size, progress, metric)``, the tool's loop over a dataset.

    Args:
        dataset: ``(cfg, point, label) -> test set`` of a point.
        describe: a point as the progress bar shows it.
        metric: ``(label, point) -> metric`` (default: the config's ``test_evaluator``, built per point).
        around: ``(model, point) -> context`` entered around each evaluation (test-time options of a point).
        progress: show a progress bar on stderr (the tools pass ``progress_wanted(args.quiet)``).
    """
    for run in runs:
        kind.check_config(configs[run.label], run.label)
    datasets = {run.label: [dataset(configs[run.label], point, run.label) for point in points[run.label]]
                for run in runs}
    total = sum(len(built) for per_run in datasets.values() for built in per_run)
    with tqdm(total=total, unit=kind.unit, desc=f'eval {kind.runs}', file=sys.stderr, disable=not progress) as bar:
        for run in runs:
            cfg = configs[run.label]
            if models is not None:
                model = models[run.label]
            else:
                with named_unknown_types():
                    model = MODELS.build(cfg.model).eval()
                load_checkpoint(model, run.checkpoint)
            size = batch_size or cfg.test_dataloader.get('batch_size', 1)
            for point, built in zip(points[run.label], datasets[run.label]):
                bar.set_postfix_str(f'{run.label} {describe(point)}')
                scorer = metric(run.label, point) if metric is not None else METRICS.build(cfg.test_evaluator)
                with around(model, point) if around is not None else contextlib.nullcontext():
                    run.results[point] = evaluate(model, cfg, built, size, bar, scorer)


@dataclass(frozen=True)
class SeedGroup:
    """Runs that differ only by their seed: the group's label, its members' labels and their seeds."""

    label: str
    members: tuple[str, ...]
    seeds: tuple[int | None, ...]


def _first_difference(a: Any, b: Any, where: str = '') -> str | None:
    """The first key path (``decoder.depth``) where two config values differ, or None."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            inner = f'{where}.{key}' if where else str(key)
            if key not in a or key not in b:
                return inner
            found = _first_difference(a[key], b[key], inner)
            if found is not None:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return next((found for i, (x, y) in enumerate(zip(a, b))
                     if (found := _first_difference(x, y, f'{where}[{i}]')) is not None), None)
    return None if a == b else (where or '<root>')


def seed_groups(labels: Sequence[str], configs: Mapping[str, Config]) -> list[SeedGroup]:
    """Group runs whose labels differ only by a seed suffix (``_s0``, ``-s1``, ``_seed2``), in first-seen order;
    a label without one is a group of its own.

    Raises:
        InvalidArgument: two runs of a group have the same seed, or their models or test sets differ.
    """
    members: dict[str, list[tuple[str, int | None]]] = {}
    for label in labels:
        match = SEED_SUFFIX.match(label)
        group, seed = (match.group('group'), int(match.group('seed'))) if match else (label, None)
        members.setdefault(group, []).append((label, seed))
    groups = []
    for group, items in members.items():
        seeds = [seed for _, seed in items]
        if len(items) > 1 and len(set(seeds)) != len(seeds):
            raise InvalidArgument('--group-seeds', [label for label, _ in items],
                                  f'these runs of {group!r} repeat a seed', 'give each seed of a group once')
        first = items[0][0]
        for label, _ in items[1:]:
            for part in ('model', 'test_dataloader'):
                difference = _first_difference(configs[first].get(part), configs[label].get(part))
                if difference is not None:
                    raise InvalidArgument('--group-seeds', [first, label],
                                          f'they group as seeds of {group!r} but their configs differ at '
                                          f'{part}.{difference}', 'group only seeds of one config (rename the work '
                                          'dirs), or leave out --group-seeds')
        groups.append(SeedGroup(group, tuple(label for label, _ in items), tuple(seeds)))
    return groups


def group_summary(group: SeedGroup, results: Results) -> dict[Any, dict[str, tuple[float, float]]]:
    """Per point and metric (mean, max - min) over the group's runs; NaN when any run's value is NaN."""
    first = results[group.members[0]]
    summary = {}
    for point, metrics in first.items():
        summary[point] = {}
        for name in metrics:
            values = [float(results[label][point].get(name, math.nan)) for label in group.members]
            if any(math.isnan(value) for value in values):
                summary[point][name] = (math.nan, math.nan)
            else:
                summary[point][name] = (sum(values) / len(values), max(values) - min(values))
    return summary


def table_entries(results: Results, groups: Sequence[SeedGroup] | None, summaries: Summaries | None,
                  metric: str | None = None) -> tuple[list[tuple[str, Mapping[Any, Mapping[str, Any]]]], str]:
    """The rows of a table, per run or per seed group (mean±spread), and the title of its first column ('model',
    with the tabulated ``metric`` when the table shows one)."""
    shown = [metric] if metric else []
    if groups is not None and summaries is not None:
        entries = [(group.label, summaries[group.label]) for group in groups]
        return entries, f'model ({", ".join([*shown, f"mean±spread, spread = {SPREAD}"])})'
    return list(results.items()), f'model ({metric})' if metric else 'model'


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


def run_csv_rows(results: Results, columns: Sequence[str]) -> list[list[Any]]:
    """Header and one row per run and point: model, the point's ``columns`` (its ``record()``), every metric."""
    names = metric_names(results)
    rows: list[list[Any]] = [['model', *columns, *names]]
    for label, per_run in results.items():
        for point, metrics in per_run.items():
            rows.append([label, *point.record().values(),
                         *[format_number(float(metrics[name])) if name in metrics else '' for name in names]])
    return rows


def group_csv_rows(groups: Sequence[SeedGroup], summaries: Summaries, columns: Sequence[str]) -> list[list[Any]]:
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


def run_record(run: Any, cfg: Config, axes: Sequence[str], **extra: Any) -> dict[str, Any]:
    """A run's JSON record: label, config, checkpoint and its SHA-256, ``extra``, the test set's options but the
    swept ``axes``, and per point its ``record()`` and metrics."""
    return dict(label=run.label, config=str(run.config), checkpoint=str(run.checkpoint),
                checkpoint_sha256=sha256(run.checkpoint), **extra,
                dataset={k: v for k, v in cfg.test_dataloader.dataset.items() if k not in axes},
                results=[dict(**point.record(), metrics=metrics) for point, metrics in run.results.items()])


def seed_group_records(groups: Sequence[SeedGroup], summaries: Summaries) -> list[dict[str, Any]]:
    """Per seed group its JSON record: members, seeds, and per point the mean and spread of every metric."""
    return [dict(label=group.label, members=group.members, seeds=group.seeds, spread=SPREAD,
                 results=[dict(**point.record(), mean={k: v[0] for k, v in metrics.items()},
                               spread={k: v[1] for k, v in metrics.items()})
                          for point, metrics in summaries[group.label].items()])
            for group in groups]


def write_outputs(kind: SweepKind, out: Path, report: Mapping[str, Any], runs: Sequence[Any],
                  configs: Mapping[str, Config], groups: Sequence[SeedGroup] | None, summaries: Summaries | None,
                  plot: Callable[[Path], Path], run_extra: Callable[[Any], Mapping[str, Any]] | None = None
                  ) -> list[Path]:
    """``<out>.csv`` (every metric per run and point), ``<out>.seeds.csv`` (mean and spread per seed group),
    ``<out>.json`` (``report`` — command, metrics, axes —, the date and commit of the run, and the runs with config, checkpoint hash, test set and
    results, and the seed groups) and ``<out>.png`` (``plot(path)``), each written atomically. ``runs`` have
    ``label``, ``config``, ``checkpoint`` and ``results`` {point: metrics}."""
    out = Path(out)
    results = {run.label: run.results for run in runs}
    written = [write_atomically(out.with_suffix('.csv'),
                                lambda path: write_csv(path, run_csv_rows(results, kind.columns)))]
    if groups:
        written.append(write_atomically(out.with_suffix('.seeds.csv'),
                                        lambda path: write_csv(path, group_csv_rows(groups, summaries, kind.columns))))
    records = [run_record(run, configs[run.label], kind.dataset_axes, **(run_extra(run) if run_extra else {}))
               for run in runs]
    document: dict[str, Any] = dict(report, **run_stamp(), runs=records)
    if groups:
        document['seed_groups'] = seed_group_records(groups, summaries)
    written.append(write_atomically(out.with_suffix('.json'), lambda path: write_json(path, document)))
    written.append(plot(out.with_suffix('.png')))
    return written


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def save_figure(figure: Any, path: Path) -> Path:
    """Write ``figure`` as a PNG at ``path`` atomically and close it."""
    try:
        return write_atomically(Path(path), lambda temporary: figure.savefig(temporary, format='png'))
    finally:
        pyplot().close(figure)
