"""mv-scenes: a real-geometry multi-camera 3D detection set in the nuScenes format, ray-cast on the CPU.

    vispe dataset multiview-scenes                     # datasets/mv-scenes, 2000/300/300
    vispe dataset multiview-scenes --train 200 --val 50 --root /tmp/mv-small
    vispe dataset multiview-scenes --task nvs          # datasets/mv-scenes-nvs, 4000/100/100
    vispe dataset multiview-scenes --task crops        # datasets/mv-crops-depth, 2000/200/...

Real meshes (pymeshlab's sample meshes, Debian's assimp-testmodels; one per class) stand on a ground
plane at random positions, yaws and scales; open3d's RaycastingScene renders six cameras (JPEG RGB,
uint16 millimetre depth PNG) and a 32-beam lidar (.pcd.bin), and the tight boxes of the meshes are the
annotations, written as the nuScenes devkit's json tables (``NuScenes('v1.0-trainval', root)`` loads
them; ``DetectionEval`` runs on ``val`` = the second rig and on the custom split ``test-rig1``).
``datasets/README.md`` describes the set. Seeded: the same arguments give the same files, for any
--workers. The set is written to ``<root>.partial`` and renamed when complete, so an interrupted run
leaves no ``<root>``; a rerun removes the partial folder.

``--task nvs`` renders scenes for novel-view synthesis instead (``vispe.datasets.mv_scenes.nvs``): a few objects
of the same meshes at table-top size, ``--input-views`` cameras around them and ``--target-views`` cameras not
among them, 48 x 64 images with depth, object masks and cameras, one ``.npz`` per scene. ``--task crops`` renders
single 96 x 128 images with dense depth at many focal lengths for depth-from-crops (KPE's task;
``vispe.datasets.mv_scenes.crops``): train / val / test at 45-75 degrees of horizontal field of view, test-wide
(90-100) and test-tele (30-35) at fields of view never seen in training; --test counts each test split.
"""
from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from vispe.datasets.mv_scenes import LIDAR, ConversionConfig, convert
from vispe.datasets.mv_scenes.crops import CropsConfig, convert_crops
from vispe.datasets.mv_scenes.nvs import NVSConfig, convert_nvs
from vispe.engine.arguments import InvalidArgument, non_negative_int, positive_int, recorded_command, reported_by
from vispe.engine.converters import (dataset_folder_argument, default_workers, folder_size,
                                     run_conversion)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe dataset multiview-scenes``."""
    parser = argparse.ArgumentParser(prog='vispe dataset multiview-scenes', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--task', choices=('detection', 'nvs', 'crops'), default='detection',
                        help='detection (nuScenes layout, default), nvs (input and target views per scene) or crops '
                             '(single images with depth at many focal lengths)')
    parser.add_argument('--root', type=Path, default=None,
                        help='output folder (default datasets/mv-scenes, with --task nvs datasets/mv-scenes-nvs, '
                             'with --task crops datasets/mv-crops-depth)')
    parser.add_argument('--train', type=positive_int, default=None,
                        help='training samples (rig 1, jittered; default 2000; nvs: scenes, 4000; crops: 2000)')
    parser.add_argument('--val', type=positive_int, default=None,
                        help='val samples (rig 2; default 300; nvs: 100; crops: 200)')
    parser.add_argument('--test', type=non_negative_int, default=None,
                        help='test-rig1 samples (rig 1, held-out layouts; default: as many as --val; nvs: 100; '
                             'crops: 200 in each of test, test-wide, test-tele)')
    parser.add_argument('--input-views', type=positive_int, default=3, help='nvs: input cameras per scene (3)')
    parser.add_argument('--target-views', type=positive_int, default=2, help='nvs: target cameras per scene (2)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--workers', type=positive_int, default=default_workers(),
                        help='rendering processes (default: the usable CPUs, at most 8; 1 renders in this process)')
    parser.add_argument('--image-size', type=positive_int, nargs=2, default=None, metavar=('H', 'W'),
                        help='camera image size (focal lengths scale with it; default 180 320, nvs: 48 64)')
    parser.add_argument('--lidar-azimuths', type=positive_int, default=LIDAR.azimuths,
                        help='lidar rays per ring and turn')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing mv-scenes root')
    parser.add_argument('--quiet', action='store_true', help='no progress bar')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; sizes must be positive and the root's parent folder writable."""
    parser = build_parser()
    args = parser.parse_args(argv)
    nvs, crops = args.task == 'nvs', args.task == 'crops'
    args.root = args.root or Path('datasets') / {'nvs': 'mv-scenes-nvs', 'crops': 'mv-crops-depth'}.get(
        args.task, 'mv-scenes')
    args.train = args.train or {'nvs': 4000}.get(args.task, 2000)
    args.val = args.val or {'nvs': 100, 'crops': 200}.get(args.task, 300)
    args.test = {'nvs': 100, 'crops': 200}.get(args.task) if args.test is None else args.test
    args.image_size = args.image_size or {'nvs': (48, 64), 'crops': (96, 128)}.get(args.task, (180, 320))
    with reported_by(parser):
        if not nvs and (args.input_views, args.target_views) != (3, 2):
            raise InvalidArgument('--input-views' if args.input_views != 3 else '--target-views',
                                  args.input_views if args.input_views != 3 else args.target_views,
                                  'counts the cameras of --task nvs scenes', 'add --task nvs, or leave it out')
        if args.image_size[0] < 8 or args.image_size[1] < 8:
            raise InvalidArgument('--image-size', args.image_size, 'is below 8 pixels', 'give H and W of at least 8')
        dataset_folder_argument(args.root, '--root')
    return args


def nvs_task(args: argparse.Namespace) -> tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any]], str]]:
    """--task nvs: the conversion of the NVS scenes (the common options left to bind) and its summary line."""
    config = NVSConfig(seed=args.seed, image_size=tuple(args.image_size), input_views=args.input_views,
                       target_views=args.target_views)

    def summary(info: dict[str, Any]) -> str:
        fractions = ', '.join(f'{split} {fraction:.1%}' for split, fraction in info['object_pixel_fraction'].items())
        return (f'scenes {info["scenes"]}, {args.input_views} input + {args.target_views} target views, object pixels '
                f'{fractions}')
    return functools.partial(convert_nvs, args.root, args.train, args.val, args.test, config=config), summary


def crops_task(args: argparse.Namespace) -> tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any]], str]]:
    """--task crops: the conversion of the depth-from-crops images and its summary line."""
    config = CropsConfig(seed=args.seed, image_size=tuple(args.image_size))
    counts = dict(train=args.train, val=args.val, test=args.test) | {'test-wide': args.test, 'test-tele': args.test}
    return (functools.partial(convert_crops, args.root, counts, config=config),
            lambda info: f'images {info["images"]}')


def scenes_task(args: argparse.Namespace) -> tuple[Callable[..., dict[str, Any]], Callable[[dict[str, Any]], str]]:
    """--task detection: the conversion of mv-scenes and its summary (a line per split, then the redraws)."""
    config = ConversionConfig(seed=args.seed, image_size=tuple(args.image_size),
                              lidar=replace(LIDAR, azimuths=args.lidar_azimuths))

    def summary(info: dict[str, Any]) -> str:
        lines = [f'{split}: {samples} samples in {info["scenes"][split]} scenes, {info["objects"][split]} objects '
                 f'({info["without_lidar_points"][split]} without lidar points)'
                 for split, samples in info['samples'].items()]
        return '\n'.join([*lines, f'{info["redraws"]} layouts redrawn (empty-scene rule)'])
    return functools.partial(convert, args.root, args.train, args.val, args.test, config=config), summary


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = recorded_command('dataset multiview-scenes', argv, 'tools/dataset_converters/multiview_scenes.py')
    task = {'nvs': nvs_task, 'crops': crops_task}.get(args.task, scenes_task)
    conversion, summary = task(args)
    done = run_conversion('multiview_scenes.py', args.root, lambda: conversion(
        workers=args.workers, overwrite=args.overwrite, progress=not args.quiet, command=command))
    if done is None:
        return 2
    info, seconds = done
    print(summary(info))
    print(f'{args.root}: {folder_size(args.root) / 2 ** 20:.0f} MiB in {seconds:.0f} s with {args.workers} worker(s)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
