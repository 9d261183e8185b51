"""The 3D sweeps of ``vispe eval-resolution``: multi-view detectors over rigs, intrinsics scales and image heights
(:mod:`vispe.evaluation.multiview_sweep`), point-cloud detectors over point density and scene scale
(:mod:`vispe.evaluation.point_sweep`), crop-depth models over focal splits and crop offsets
(:mod:`vispe.evaluation.crop_sweep`)."""
from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any, Callable

from mmengine.config import Config

import vispe
from vispe.cli.eval_runs import Run, evaluate, quiet_logger
from vispe.datasets.crop_depth import OFFSET_BINS
from vispe.engine import named_unknown_types
from vispe.engine.arguments import InvalidArgument, check_distinct, progress_wanted
from vispe.evaluation import crop_sweep, multiview_sweep, point_sweep, sweep
from vispe.evaluation.encoding_options import check_encoding_options, encoding_options_set, parse_encoding_options
from vispe.registry import DATASETS, METRICS, MODELS


def sweep_dataset(cfg: Config, point: multiview_sweep.SweepPoint, label: str) -> Any:
    """The test set at ``point``; a rig whose split the data root lacks names --rigs."""
    try:
        with named_unknown_types():
            return DATASETS.build(multiview_sweep.sweep_dataset_cfg(cfg, point))
    except ValueError as error:
        if point.rig == multiview_sweep.CONFIG_RIG or f'split {point.split!r}' not in str(error):
            raise
        raise InvalidArgument('--rigs', point.rig, f'{label}: {error}', 'the rigs are splits of mv-scenes (train: '
                              'test-rig1, other: val); evaluate an mv-scenes config, or leave out --rigs to use the '
                              'config\'s test split') from None


def evaluate_multiview(args: argparse.Namespace, runs: list[Run], run_configs: list[Config]) -> int:
    """PETR / 3DPPE runs: nuScenes metrics at every (rig, intrinsics scale, image height) of the sweep."""
    if args.eval_mode != 'upsample':
        raise InvalidArgument('--eval-mode', args.eval_mode, 'multi-view 3D runs resize their images and cameras',
                              'leave out --eval-mode')
    if args.subset is not None:
        raise InvalidArgument('--subset', args.subset, 'the nuScenes metric needs every sample of the split',
                              'leave out --subset')
    if args.tune:
        raise InvalidArgument('--tune', True, 'multi-view 3D runs have no held-out split to choose options on',
                              'leave out --tune')
    labels = [run.label for run in runs]
    check_distinct('runs', labels)
    configs = dict(zip(labels, run_configs))
    evaluators = {}
    for run in runs:
        multiview_sweep.MULTIVIEW.check_config(configs[run.label], run.label)
        evaluators[run.label] = multiview_sweep.nuscenes_evaluator(configs[run.label], run.config, 'run')
    groups = sweep.seed_groups(labels, configs) if args.group_seeds else None
    scales = args.intrinsics_scale or [1.0]
    points = {label: multiview_sweep.sweep_points(configs[label], args.sizes, scales, args.rigs) for label in labels}
    options = parse_encoding_options(args.encoding_options, args.sizes)
    models = {}
    for run in runs:
        with named_unknown_types():
            model = MODELS.build(configs[run.label].model).eval()
        stride = model.backbone.stride
        small = [point.image_size for point in points[run.label] if min(point.image_size) < stride]
        if small:
            raise InvalidArgument('--sizes', args.sizes, f'{run.label}: image size {small[0]} is smaller than the '
                                  f'backbone\'s stride {stride}', f'give heights and widths of at least {stride}')
        vispe.load_checkpoint(model, run.checkpoint)
        models[run.label] = model
    check_encoding_options(list(models.items()), options)
    quiet_logger()
    metrics: dict[tuple[str, str], Any] = {}  # one metric per run and split: its ground truth is read once

    def metric(label: str, point: multiview_sweep.SweepPoint) -> Any:
        if (label, point.split) not in metrics:
            metrics[(label, point.split)] = METRICS.build(multiview_sweep.sweep_evaluator_cfg(evaluators[label],
                                                                                              point.split))
        return metrics[(label, point.split)]

    sweep.evaluate_runs(multiview_sweep.MULTIVIEW, runs, configs, points, sweep_dataset, args.batch_size, evaluate,
                        lambda point: f'{point.rig} x{point.intrinsics_scale:g} '
                                      f'{point.image_size[0]}x{point.image_size[1]}',
                        metric=metric, models=models,
                        around=lambda model, point: encoding_options_set(model, options[point.height]),
                        progress=progress_wanted(args.quiet))
    results = {run.label: run.results for run in runs}
    summaries = {group.label: sweep.group_summary(group, results) for group in groups} if groups else None
    print(multiview_sweep.sweep_table(results, groups, summaries))
    axes = dict(heights=args.sizes, intrinsics_scale=scales, rigs={rig: multiview_sweep.RIG_SPLITS[rig] for rig in
                                                                   args.rigs} if args.rigs else 'the config test split')
    written = multiview_sweep.write_sweep_outputs(args.out, args.command, runs, configs, axes, options, groups,
                                                  summaries)
    print(f'wrote {", ".join(map(str, written))}')
    return 0


def refuse_other_axes(args: argparse.Namespace, axes: tuple[str, str], runs: str) -> None:
    """Refuse every given option but ``axes``, the two these ``runs`` are swept over."""
    given = {'--sizes': args.sizes, '--intrinsics-scale': args.intrinsics_scale, '--rigs': args.rigs,
             '--point-density': args.point_density, '--scene-scale': args.scene_scale,
             '--focal-splits': args.focal_splits, '--crop-offsets': args.crop_offsets,
             '--encoding-options': args.encoding_options or None, '--subset': args.subset, '--tune': args.tune or None,
             '--eval-mode': None if args.eval_mode == 'upsample' else args.eval_mode}
    for option, value in given.items():
        if option not in axes and value is not None:
            raise InvalidArgument(option, value, f'{runs} are swept over {axes[0]} and {axes[1]}',
                                  f'leave out {option}')


def evaluate_kind(args: argparse.Namespace, runs: list[Run], run_configs: list[Config], kind: sweep.SweepKind,
                  evaluate_runs: Callable[[list[Run], dict[str, Config]], None], table: Callable[..., str],
                  write: Callable[..., list[Path]]) -> int:
    """A 3D sweep of ``kind``'s two axes: every other option refused, ``evaluate_runs(runs, configs)`` fills the runs'
    results, then the table (per run, or per seed group with --group-seeds) and ``write``'s files."""
    refuse_other_axes(args, kind.flags, kind.runs)
    labels = [run.label for run in runs]
    check_distinct('runs', labels)
    configs = dict(zip(labels, run_configs))
    groups = sweep.seed_groups(labels, configs) if args.group_seeds else None
    quiet_logger()
    evaluate_runs(runs, configs)
    results = {run.label: run.results for run in runs}
    summaries = {group.label: sweep.group_summary(group, results) for group in groups} if groups else None
    print(table(results, groups=groups, summaries=summaries))
    written = write(args.out, args.command, runs, configs, groups=groups, summaries=summaries)
    print(f'wrote {", ".join(map(str, written))}')
    return 0


def evaluate_points(args: argparse.Namespace, runs: list[Run], run_configs: list[Config]) -> int:
    """V-DETR runs: IndoorAP at every (scene scale, point density) of the sweep."""
    def evaluate_runs(runs: list[Run], configs: dict[str, Config]) -> None:
        point_sweep.evaluate_point_runs(runs, configs, args.point_density or [1.0], args.scene_scale or [1.0],
                                        args.batch_size, evaluate, progress=progress_wanted(args.quiet))
    return evaluate_kind(args, runs, run_configs, point_sweep.POINTS, evaluate_runs, point_sweep.point_table,
                         point_sweep.write_point_outputs)


def evaluate_crops(args: argparse.Namespace, runs: list[Run], run_configs: list[Config]) -> int:
    """Crop-depth runs: CropDepthMetric on every chosen split, AbsRel by crop offset."""
    offsets = args.crop_offsets or list(OFFSET_BINS)

    def evaluate_runs(runs: list[Run], configs: dict[str, Config]) -> None:
        crop_sweep.evaluate_crop_runs(runs, configs, args.focal_splits, args.batch_size, evaluate,
                                      progress=progress_wanted(args.quiet))
    return evaluate_kind(args, runs, run_configs, crop_sweep.CROPS, evaluate_runs,
                         functools.partial(crop_sweep.crop_table, offsets=offsets),
                         functools.partial(crop_sweep.write_crop_outputs, offsets=offsets))
