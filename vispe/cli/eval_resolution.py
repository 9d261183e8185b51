"""Evaluate trained models at several input sizes: which encoding holds up beyond the training size?

    vispe eval-resolution work_dirs/vit-t4_ape_fmnist-28 work_dirs/vit-t4_rope-mixed_fmnist-28 \\
        --sizes 28 42 56 84 --out results/extrapolation [--encoding-options 56:global_slope=0.95 ...]

A run is a work dir (its dumped config and best.pth) or ``CONFIG::CHECKPOINT``. For each run and size
the config's test set is rebuilt at that size (``--eval-mode upsample`` resizes the image: an ImageNet-layout set as
its ``eval_protocol`` says, LookHere's pipeline in ``configs/_base_/datasets/imagenet-224.py``, see
:mod:`vispe.evaluation`; ``canvas`` pastes it on a larger canvas) and the config's test metric is measured:
top-1/top-5 for classifiers, COCO box mAP for detectors (the size is then the shorter image side, and the cap on
the longer side, 1333 at DETR's 800, scales with it):

    vispe eval-resolution work_dirs/detr-r18_sine_fmnist-det work_dirs/detr-r18_irpe-ctx_fmnist-det \\
        --sizes 128 192 256 --out results/detr_extrapolation

Released checkpoints converted by ``vispe convert`` load into eval-only configs: a file of the backbone alone (its
keys without ``backbone.``, as converted ViTs are, or timm's own ViT file) into an ``ImageClassifier``, the prefix
added when every key is the backbone's (:func:`vispe.checkpoint.backbone_state_dict`); the file's
``meta['encodings']`` must name the config's encodings and its ``meta['model']`` agree with the config's model
(:func:`vispe.checkpoint.check_converted_model`: a head count or slope changes no tensor shape). ``--data-root``
reads the test set (and the validation set of ``--tune``) under another folder than the config's ``data_root``,
after checking its layout; ``--device`` (default: the GPU when there is one) and ``--workers`` (default: the config's
``num_workers``) say where the model runs and how many processes decode the images:

    vispe eval-resolution configs/released/<family>_<variant>_in1k.py::converted.pth \\
        --sizes 224 320 384 448 512 640 768 1024 --data-root /data/imagenet    # /data/imagenet/val/<wnid>/*.JPEG
    vispe eval-resolution configs/released/detr-r50_coco-val.py::detr-r50.pth \\
        --sizes 512 640 800 960 1024 --data-root /data/coco     # val2017/, annotations/instances_val2017.json

The first metric of the evaluator (top1, or bbox_mAP) is the one tabulated and plotted; CSV and JSON
hold all of them. Test-time
encoding options (RoPE ``theta``, ALiBi ``distance_scale``, LookHere ``global_slope``) are set per
size with ``SIZE:name=value`` (or ``all:name=value``), on every run whose encodings have that
option (an option no run has is an error). Prints a table; writes ``<out>.csv``,
``<out>.json`` (command, configs, checkpoint hashes, dataset subset) and ``<out>.png``. ``--group-seeds`` reports
runs named ``<name>_s<seed>`` (the same config trained with other seeds) as mean and spread (max - min over the
seeds) per group, in the table, ``<out>.seeds.csv``, the JSON (``seed_groups``) and the figure (a band):

    vispe eval-resolution work_dirs/zoo/vit-t4_ape_fmnist-28_s0 work_dirs/zoo/vit-t4_ape_fmnist-28_s1 \\
        --sizes 28 42 56 84 --group-seeds --out results/zoo/extrapolation

``--tune`` chooses, per run and size, the values of the encodings' tunable test-time options (each declares its
candidates: LookHere/ALiBi slopes, RoPE theta and position scale, RPE2D evaluation positions, LearnedAPE and
SinCos2D resampling; :mod:`vispe.evaluation.tuning`) by coordinate ascent on the config's held-out validation set
(``--tune-subset`` images; a config that validates on its test set is refused), then measures the test set with
them: the table and files get a ``<name>+tuned`` row beside each run, and the JSON records the choice (``tuning``).

Encodings that draw positions at evaluation (RPE2D with ``eval_positions='random'``) draw anew for each batch from
torch's RNG, seeded to 0 before each size: the accuracy averages over the draws of the batches, reproducibly.

Multi-view 3D detectors (PETR / 3DPPE, a PETRDetector config) have three axes, and every combination is
evaluated (:mod:`vispe.evaluation.multiview_sweep`): ``--sizes`` are image heights (the width follows the
config's aspect ratio, W = round(H * W0 / H0): for (90, 160), 72 -> 72x128 and 126 -> 126x224),
``--intrinsics-scale`` zooms every camera (images and intrinsics together), ``--rigs train other`` evaluates the
training rig on held-out scenes (split test-rig1) and the second rig (split val):

    vispe eval-resolution work_dirs/petr-r18_*_mv-scenes_s* --sizes 72 90 126 \\
        --intrinsics-scale 0.8 1.0 1.25 --rigs train other --group-seeds --out results/petr_sweep

The table shows nuScenes mAP (nusc/mAP); CSV and JSON hold every metric (NDS, mATE, mASE, mAOE, per-class AP,
the devkit's devkit/*). ``--group-seeds`` reports runs named ``<name>_s<seed>`` as mean and spread
(max - min over the seeds) per group, in the table, ``<out>.seeds.csv`` and the JSON; the figure has one panel
per rig and intrinsics scale.

Point-cloud 3D detectors (V-DETR, a VDETR config) have two axes, and every combination is evaluated
(:mod:`vispe.evaluation.point_sweep`): ``--point-density`` scales the points per scene (0.5: half the config's
``num_points``), ``--scene-scale`` multiplies the room, its objects and their boxes. The table shows IndoorAP's
mAP25 and mAP50 (3DETR's AP at 3D IoU 0.25 / 0.5); CSV and JSON hold per-class AP and AR:

    vispe eval-resolution work_dirs/vdetr-s_*_pt-scenes_s* --point-density 0.5 1 2 \
        --scene-scale 1 1.5 --group-seeds --out results/vdetr_sweep

Depth-from-crops models (KPE's task, a CropDepthViT config; :mod:`vispe.evaluation.crop_sweep`) are measured on the
3 x 3 grid crops of each ``--focal-splits`` split (test: the training fields of view; test-wide, test-tele: unseen),
binned by ``--crop-offsets`` (centre, edge, corner: how far the crop lies from the principal point); the table
shows AbsRel:

    vispe eval-resolution work_dirs/vit-t4_*_mv-crops-depth_s* --crop-offsets center edge corner \
        --focal-splits test test-wide test-tele --group-seeds --out results/crops_sweep
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import torch
from mmengine.config import Config
from tqdm import tqdm

import vispe
from vispe.checkpoint import check_converted_model, read_checkpoint
from vispe.cli.eval_runs import Run, evaluate, resolve_run
from vispe.cli.eval_sweeps_3d import evaluate_crops, evaluate_multiview, evaluate_points
from vispe.engine import load_config, named_unknown_types
from vispe.cli.benchmark import torch_device
from vispe.engine.arguments import (InvalidArgument, check_distinct, non_negative_int, positive_float, positive_int,
                                    progress_wanted, recorded_command, reported_by, run_main, writable_output)
from vispe.evaluation import crop_sweep, multiview_sweep, point_sweep, sweep
from vispe.evaluation.data_root import move_data_roots
from vispe.evaluation.encoding_options import check_encoding_options, encoding_options_set, parse_encoding_options
from vispe.evaluation.resolution_report import resolution_table, write_resolution_outputs
from vispe.evaluation.tuning import Knob, applied, check_held_out, coordinate_search, tunable_knobs
from vispe.datasets.crop_depth import CROP_SPLITS, OFFSET_BINS
from vispe.registry import DATASETS, METRICS, MODELS


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe eval-resolution``."""
    parser = argparse.ArgumentParser(prog='vispe eval-resolution', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('runs', nargs='+', help='work dirs, or CONFIG::CHECKPOINT pairs')
    parser.add_argument('--sizes', type=positive_int, nargs='+', default=None,
                        help='image runs (required for them): test sizes: the image side (classifiers), the shorter '
                             'side (DETR), or for multi-view 3D '
                             'runs the image height, the width following the config\'s test aspect ratio: W = '
                             'round(H * W0 / H0), e.g. (90, 160): 72 -> 72x128, 126 -> 126x224')
    parser.add_argument('--encoding-options', nargs='*', default=[], metavar='SIZE:NAME=VALUE',
                        help='test-time encoding attributes per size, e.g. 56:global_slope=0.95 all:theta=160')
    parser.add_argument('--eval-mode', choices=['upsample', 'canvas'], default='upsample')
    parser.add_argument('--subset', type=positive_int, default=None,
                        help='balanced test subset (default: the config\'s)')
    parser.add_argument('--batch-size', type=positive_int, default=None,
                        help='default: 128, or the config\'s test batch size for multi-view 3D runs')
    parser.add_argument('--checkpoint-name', default='best.pth', help='checkpoint file inside a work dir')
    parser.add_argument('--pad', action='store_true', help='pad sizes that are not a multiple of the patch size')
    parser.add_argument('--intrinsics-scale', type=positive_float, nargs='+', default=None, metavar='SCALE',
                        help='multi-view 3D runs: zoom every camera by SCALE about its principal point (images and '
                             'intrinsics together; > 1 zooms in). Default: 1')
    parser.add_argument('--rigs', type=multiview_sweep.rig_name, nargs='+', default=None, metavar='RIG',
                        help='multi-view 3D runs: train (the training rig on held-out scenes, split test-rig1) and/or '
                             'other (the second rig, split val). Default: the config\'s test split')
    parser.add_argument('--point-density', type=positive_float, nargs='+', default=None, metavar='D',
                        help='point-cloud runs: points per scene times D (default 1)')
    parser.add_argument('--scene-scale', type=positive_float, nargs='+', default=None, metavar='S',
                        help='point-cloud runs: scenes (points and boxes) times S (default 1)')
    parser.add_argument('--crop-offsets', choices=OFFSET_BINS, nargs='+', default=None,
                        help='crop-depth runs: the offset bins tabulated (default: center edge corner)')
    parser.add_argument('--focal-splits', choices=CROP_SPLITS, nargs='+', default=None,
                        help="crop-depth runs: the splits measured (default: the config's test split)")
    parser.add_argument('--group-seeds', action='store_true',
                        help='report runs named <name>_s<seed> as the mean and spread (max - min) over their seeds')
    parser.add_argument('--tune', action='store_true',
                        help='per run and size, choose the encodings\' test-time options on the config\'s held-out '
                             'validation set and report the test metric with them beside the untuned row')
    parser.add_argument('--tune-subset', type=positive_int, default=1000,
                        help='validation images per setting tried by --tune (a balanced subset, where the validation '
                             'set has a subset option)')
    parser.add_argument('--data-root', type=Path, default=None, metavar='PATH',
                        help='classifiers and 2D detectors: read the test set (and the validation set of --tune) '
                             'under PATH instead of the config\'s data_root, e.g. ImageNet as '
                             'PATH/val/<class>/<image>, COCO as PATH/val2017/ and '
                             'PATH/annotations/instances_val2017.json (checked first)')
    parser.add_argument('--device', type=torch_device, default='cuda' if torch.cuda.is_available() else 'cpu',
                        help='classifiers and 2D detectors: where the model runs (default: cuda when there is a GPU)')
    parser.add_argument('--workers', type=non_negative_int, default=None,
                        help='classifiers and 2D detectors: processes that decode and resize the images (default: the '
                             'config\'s test_dataloader.num_workers; 0 decodes in this process)')
    parser.add_argument('--out', type=Path, default=Path('results/extrapolation'))
    parser.add_argument('--quiet', action='store_true', help='no progress bar (none either when stderr is not a '
                                                             'terminal)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless sizes are distinct positive
    integers, counts are positive and the output folder can be created."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        check_distinct('--sizes', args.sizes or [])
        check_distinct('--point-density', args.point_density or [])
        check_distinct('--scene-scale', args.scene_scale or [])
        check_distinct('--intrinsics-scale', args.intrinsics_scale or [])
        check_distinct('--rigs', args.rigs or [])
        check_distinct('--crop-offsets', args.crop_offsets or [])
        check_distinct('--focal-splits', args.focal_splits or [])
        writable_output(args.out, '--out', suffixes=('.csv', '.seeds.csv', '.json', '.png'))
        if args.device.type == 'cuda' and not torch.cuda.is_available():
            raise InvalidArgument('--device', args.device, 'torch sees no CUDA GPU here', 'pass --device cpu')
    return args


def dataset_cfg(cfg: Config, size: int, eval_mode: str, subset: int | None) -> dict[str, Any]:
    """The test set at ``size``; a detection set's cap on the longer side (``max_size``) scales with the
    size, so that every size keeps the config's aspect-ratio limit instead of being capped below itself."""
    dataset = dict(cfg.test_dataloader.dataset)
    if dataset.get('max_size') is not None and dataset.get('image_size'):
        dataset['max_size'] = max(size, round(dataset['max_size'] * size / dataset['image_size']))
    dataset.update(image_size=size, eval_mode=eval_mode, train_augment=False)
    if subset is not None:
        dataset['subset'] = subset
    return dataset


def tuned_label(label: str) -> str:
    """'<name>_s0' -> '<name>+tuned_s0' (a seed suffix stays last, so that tuned runs group by seed too)."""
    match = sweep.SEED_SUFFIX.match(label)
    if match:
        return f'{match.group("group")}+tuned{label[len(match.group("group")):]}'
    return f'{label}+tuned'


def loader_workers(args: argparse.Namespace, cfg: Config) -> int:
    """``--workers``, else the config's test dataloader's ``num_workers`` (0 when it names none)."""
    return args.workers if args.workers is not None else int(cfg.test_dataloader.get('num_workers', 0))


def tune_at_size(model: torch.nn.Module, cfg: Config, knobs: list[Knob], size: int, args: argparse.Namespace,
                 batch_size: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The knob values that score best on the held-out validation set at ``size``, and the record of the search."""
    dataset_options = dict(cfg.val_dataloader.dataset)
    dataset_options.update(image_size=size, eval_mode=args.eval_mode, train_augment=False)
    if 'subset' in dataset_options:
        dataset_options['subset'] = args.tune_subset
    dataset = DATASETS.build(dataset_options)
    quiet = tqdm(disable=True)

    def score() -> float:
        torch.manual_seed(0)
        results = evaluate(model, cfg, dataset, batch_size, quiet, metric=METRICS.build(cfg.val_evaluator),
                           workers=loader_workers(args, cfg))
        return results[next(iter(results))]

    values, best, built, tried = coordinate_search(knobs, score)
    record = dict(options={knob.path: value for knob, value in zip(knobs, values)},
                  built={knob.path: knob.candidates[0] for knob in knobs}, held_out_score=best,
                  held_out_score_built=built, settings_tried=tried,
                  held_out_set={k: v for k, v in dataset_options.items() if k != 'image_size'})
    return values, record


def evaluate_single_view(args: argparse.Namespace, runs: list[Run], configs: list[Config]) -> int:
    """Classifiers and 2D detectors: the config's test metric at each size."""
    options = parse_encoding_options(args.encoding_options, args.sizes)
    batch_size = args.batch_size or 128
    datasets: dict[str, dict[str, Any]] = {}
    train_sizes: dict[str, Any] = {}
    labels = [run.label for run in runs]
    check_distinct('runs', labels)
    configs_by_label = dict(zip(labels, configs))
    groups = sweep.seed_groups(labels, configs_by_label) if args.group_seeds else None
    if args.tune:
        if any(options.values()):
            raise InvalidArgument('--tune', True, 'it chooses the test-time options itself',
                                  'leave out --encoding-options, or --tune')
        for label, cfg in configs_by_label.items():
            check_held_out(cfg, label)
    loaded = []
    for run, cfg in zip(runs, configs):
        with named_unknown_types():
            model = MODELS.build(cfg.model).eval()
        vispe.load_checkpoint(model, run.checkpoint)
        check_converted_model(cfg.model, read_checkpoint(run.checkpoint)[1], str(run.checkpoint))
        model.to(args.device)
        patch = getattr(getattr(model, 'backbone', model), 'patch_embed', None)
        if patch is not None:
            bad = [size for size in args.sizes if size % patch.patch_size[0]]
            if bad and not args.pad:
                raise ValueError(f'{run.label}: sizes {bad} are not multiples of the patch size {patch.patch_size[0]}; '
                                 f'choose multiples, or pass --pad to pad images up to the next multiple.')
            patch.dynamic_img_pad = args.pad
        train_sizes[run.label] = cfg.get('train_dataloader', {}).get('dataset', {}).get('image_size')
        loaded.append((run, cfg, model))
    check_encoding_options([(run.label, model) for run, _, model in loaded], options)
    total = sum(len(DATASETS.build(dataset_cfg(cfg, args.sizes[0], args.eval_mode, args.subset)))
                for _, cfg, _ in loaded)
    tuned_runs: list[Run] = []
    tuning: dict[str, dict[str, Any]] = {}
    with tqdm(total=total * len(args.sizes), unit='img', desc='eval', file=sys.stderr,
              disable=not progress_wanted(args.quiet)) as progress:
        for run, cfg, model in loaded:
            knobs = tunable_knobs(model) if args.tune else []
            tuned = Run(tuned_label(run.label), run.config, run.checkpoint, tuned_from=run.label) if knobs else None
            for size in args.sizes:
                progress.set_postfix_str(f'{run.label} @ {size}')
                dataset_options = dataset_cfg(cfg, size, args.eval_mode, args.subset)
                dataset = DATASETS.build(dataset_options)
                datasets[run.label] = {k: v for k, v in dataset_options.items() if k != 'image_size'}
                torch.manual_seed(0)  # encodings that draw positions in evaluation (RPE2D 'random') draw the same
                with encoding_options_set(model, options[size]):
                    run.results[size] = evaluate(model, cfg, dataset, batch_size, progress,
                                                 workers=loader_workers(args, cfg))
                if tuned is not None:
                    progress.set_postfix_str(f'{run.label} @ {size}: tuning {len(knobs)} options on held-out data')
                    values, record = tune_at_size(model, cfg, knobs, size, args, batch_size)
                    with applied(knobs, values):
                        torch.manual_seed(0)
                        tuned.results[size] = evaluate(model, cfg, dataset, batch_size, progress,
                                                       workers=loader_workers(args, cfg))
                    tuning.setdefault(run.label, {})[str(size)] = record
            if tuned is not None:
                tuned_runs.append(tuned)
                datasets[tuned.label], train_sizes[tuned.label] = datasets[run.label], train_sizes[run.label]
                configs_by_label[tuned.label] = cfg
    runs = [item for run in runs for item in [run, *[t for t in tuned_runs if t.label == tuned_label(run.label)]]]
    if groups is not None:
        groups = sweep.seed_groups([run.label for run in runs], configs_by_label)
    summaries = None
    if groups:
        results = {run.label: run.results for run in runs}
        summaries = {group.label: sweep.group_summary(group, results) for group in groups}
    print(resolution_table(runs, args.sizes, groups, summaries))
    written = write_resolution_outputs(args.out, args.command, args.eval_mode, args.sizes, runs, options, datasets,
                                       train_sizes, groups, summaries, tuning)
    print(f'wrote {", ".join(map(str, written))}')
    return 0


def one_kind(runs: list[Run], configs: list[Config], is_kind: Any, kind: str) -> bool:
    """Whether the runs are all of a kind (``is_kind(cfg)``); a mix is refused."""
    of_kind = [run.label for run, cfg in zip(runs, configs) if is_kind(cfg)]
    if of_kind and len(of_kind) < len(runs):
        raise InvalidArgument('runs', [run.label for run in runs], f'{", ".join(of_kind)} are {kind} and the others '
                              f'are not', 'evaluate them in separate calls')
    return bool(of_kind)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.command = recorded_command('eval-resolution', argv)
    runs = [resolve_run(spec, args.checkpoint_name) for spec in args.runs]
    configs = [load_config(run.config) for run in runs]
    if args.data_root is not None and any(kind.is_config(cfg) for cfg in configs for kind in
                                          (point_sweep.POINTS, crop_sweep.CROPS, multiview_sweep.MULTIVIEW)):
        raise InvalidArgument('--data-root', args.data_root, 'it moves the data of classifiers and 2D detectors, '
                              'and these runs are 3D', 'leave out --data-root and set the data root in the config')
    if one_kind(runs, configs, point_sweep.POINTS.is_config, 'point-cloud detectors'):
        return evaluate_points(args, runs, configs)
    if one_kind(runs, configs, crop_sweep.CROPS.is_config, 'crop-depth models'):
        return evaluate_crops(args, runs, configs)
    given = [name for name, value in (('--crop-offsets', args.crop_offsets), ('--focal-splits', args.focal_splits))
             if value]
    if given:
        raise InvalidArgument(given[0], [run.label for run in runs], f'{given[0]} is for crop-depth runs '
                              f'(CropDepthViT configs) and these runs are not', f'leave out {given[0]}')
    given = [name for name, value in (('--point-density', args.point_density), ('--scene-scale', args.scene_scale))
             if value]
    if given:
        raise InvalidArgument(given[0], [run.label for run in runs], f'{given[0]} is for point-cloud runs (VDETR '
                              f'configs) and these runs are not', f'leave out {given[0]}')
    if args.sizes is None:
        raise InvalidArgument('--sizes', '(none)', 'image runs are evaluated at given input sizes',
                              'give them, e.g. --sizes 28 42 56')
    if one_kind(runs, configs, multiview_sweep.MULTIVIEW.is_config, 'multi-view 3D detectors'):
        return evaluate_multiview(args, runs, configs)
    given = [name for name, value in (('--intrinsics-scale', args.intrinsics_scale), ('--rigs', args.rigs)) if value]
    if given:
        raise InvalidArgument(given[0], [run.label for run in runs], f'{given[0]} is for multi-view 3D runs '
                              f'(PETRDetector configs) and these runs are not', f'leave out {given[0]}')
    if args.data_root is not None:
        move_data_roots(args.data_root, [run.label for run in runs], configs)
    return evaluate_single_view(args, runs, configs)


if __name__ == '__main__':
    run_main(main)
