"""pt-scenes: a real-geometry point-cloud 3D detection set in ScanNet's preprocessed layout, scanned on the CPU.

    vispe dataset point-scenes                        # datasets/pt-scenes, 800/100/100
    vispe dataset point-scenes --train 50 --val 10 --test 0 --out /tmp/pt-small
    vispe dataset point-scenes --rotated --out datasets/pt-scenes-rotated

Real meshes (pymeshlab's sample meshes, Debian's assimp-testmodels; seven classes) stand in rectangular
rooms (4-7 m a side, 2.5 m walls), 4-12 a room, against walls and one another; open3d's RaycastingScene
scans each room from 2-4 positions; the merged, 2 cm voxel-down-sampled, coloured points are written as
``<scene>_{vert,ins_label,sem_label,bbox}.npy`` with ``meta_data/scannetv2_{train,val,test}.txt`` and
``pt-scenes.json`` (read by ``vispe.datasets.point_scenes.PointScenes``; ``datasets/README.md`` describes
the set).
Boxes are axis-aligned (objects turned by multiples of 90°) unless --rotated (any yaw, (K, 8) boxes).
Seeded: the same arguments give the same files, for any --workers. The set is written to ``<out>.partial``
and renamed when complete, so an interrupted run leaves no ``<out>``; a rerun removes the partial folder.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from vispe.datasets.pt_scenes import MAX_SCENES, ConversionConfig, RoomConfig, convert
from vispe.engine.arguments import InvalidArgument, non_negative_int, positive_int, recorded_command, reported_by
from vispe.engine.converters import (dataset_folder_argument, default_workers, folder_size,
                                     run_conversion)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe dataset point-scenes``."""
    parser = argparse.ArgumentParser(prog='vispe dataset point-scenes', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', type=Path, default=Path('datasets') / 'pt-scenes', help='output folder')
    parser.add_argument('--train', type=positive_int, default=800, help='training scenes')
    parser.add_argument('--val', type=positive_int, default=100, help='validation scenes')
    parser.add_argument('--test', type=non_negative_int, default=100, help='test scenes (held-out rooms)')
    parser.add_argument('--seed', type=non_negative_int, default=0, help='seed of all scenes (>= 0)')
    parser.add_argument('--rotated', action='store_true',
                        help='objects at any yaw, boxes (K, 8) with the yaw (default: multiples of 90°, (K, 7))')
    parser.add_argument('--workers', type=positive_int, default=default_workers(),
                        help='processes writing scenes (default: the usable CPUs, at most 8; 1: in this process)')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing pt-scenes folder')
    parser.add_argument('--quiet', action='store_true', help='no progress bar')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; counts must be 1..10000 (test 0..10000) and the output's parent folder writable."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        for option in ('train', 'val', 'test'):
            if getattr(args, option) > MAX_SCENES:
                raise InvalidArgument(f'--{option}', getattr(args, option), f'exceeds {MAX_SCENES} scenes',
                                      f'scene names hold a 4-digit index; give at most {MAX_SCENES}')
        dataset_folder_argument(args.out, '--out')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = ConversionConfig(seed=args.seed, room=replace(RoomConfig(), rotated=args.rotated))
    command = recorded_command('dataset point-scenes', argv, 'tools/dataset_converters/point_scenes.py')
    done = run_conversion('point_scenes.py', args.out, lambda: convert(
        args.out, args.train, args.val, args.test, config=config, workers=args.workers, overwrite=args.overwrite,
        progress=not args.quiet, command=command))
    if done is None:
        return 2
    info, seconds = done
    for split, counts in info['splits'].items():
        points, objects = counts['points_per_scene'], counts['objects_per_scene']
        print(f'{split}: {counts["scenes"]} scenes, {counts["objects"]} boxes ({objects["min"]:.0f}-'
              f'{objects["max"]:.0f} a scene, {counts["dropped_objects"]} objects under the point minimum left '
              f'without a box), {points["mean"]:.0f} points a scene ({points["min"]:.0f}-{points["max"]:.0f})')
    print('boxes per class: ' + ', '.join(f'{item["name"]} {sum(item["boxes"].values())}' for item in info['classes']))
    print(f'{args.out}: {folder_size(args.out) / 2 ** 20:.0f} MiB in {seconds:.0f} s with {args.workers} '
          f'worker(s); {len(info["redrawn"])} rooms redrawn (empty-scene rule)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
