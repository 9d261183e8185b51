"""mv-scenes: a real-geometry multi-camera 3D detection set in the nuScenes format, ray-cast on the CPU.

    python tools/dataset_converters/multiview_scenes.py                     # datasets/mv-scenes, 2000/300/300
    python tools/dataset_converters/multiview_scenes.py --train 200 --val 50 --root /tmp/mv-small

Real meshes (pymeshlab's sample meshes, Debian's assimp-testmodels; one per class) stand on a ground
plane at random positions, yaws and scales; open3d's RaycastingScene renders six cameras (JPEG RGB,
uint16 millimetre depth PNG) and a 32-beam lidar (.pcd.bin), and the tight boxes of the meshes are the
annotations, written as the nuScenes devkit's json tables (``NuScenes('v1.0-trainval', root)`` loads
them; ``DetectionEval`` runs on ``val`` = the second rig and on the custom split ``test-rig1``).
``datasets/README.md`` describes the set. Seeded: the same arguments give the same files, for any
--workers. The set is written to ``<root>.partial`` and renamed when complete, so an interrupted run
leaves no ``<root>``; a rerun removes the partial folder.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from vispe.datasets.mv_scenes import (LIDAR, ConversionConfig, DatasetExistsError, DegenerateBoxError,  # noqa: E402
                                      EmptySceneError, MeshFileError, RenderError, convert)
from vispe.engine.arguments import (InvalidArgument, non_negative_int, positive_int, reported_by,  # noqa: E402
                                    writable_folder)


def default_workers() -> int:
    """The CPUs this process may use (at most 8)."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; sizes must be positive and the root's parent folder writable."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--root', type=Path, default=REPO / 'datasets' / 'mv-scenes', help='output folder')
    parser.add_argument('--train', type=positive_int, default=2000, help='training samples (rig 1, jittered)')
    parser.add_argument('--val', type=positive_int, default=300, help='val samples (rig 2)')
    parser.add_argument('--test', type=non_negative_int, default=None,
                        help='test-rig1 samples (rig 1, held-out layouts; default: as many as --val)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--workers', type=positive_int, default=default_workers(),
                        help='rendering processes (default: the usable CPUs, at most 8; 1 renders in this process)')
    parser.add_argument('--image-size', type=positive_int, nargs=2, default=(180, 320), metavar=('H', 'W'),
                        help='camera image size (focal lengths scale with it)')
    parser.add_argument('--lidar-azimuths', type=positive_int, default=LIDAR.azimuths,
                        help='lidar rays per ring and turn')
    parser.add_argument('--overwrite', action='store_true', help='replace an existing mv-scenes root')
    parser.add_argument('--quiet', action='store_true', help='no progress bar')
    args = parser.parse_args(argv)
    with reported_by(parser):
        if args.image_size[0] < 8 or args.image_size[1] < 8:
            raise InvalidArgument('--image-size', args.image_size, 'is below 8 pixels', 'give H and W of at least 8')
        if args.root.exists() and not args.root.is_dir():
            raise InvalidArgument('--root', args.root, 'is a file', 'give a folder path')
        writable_folder(args.root.resolve().parent, '--root')
    return args


def folder_size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(item.stat().st_size for item in path.rglob('*') if item.is_file())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = ConversionConfig(seed=args.seed, image_size=tuple(args.image_size),
                              lidar=replace(LIDAR, azimuths=args.lidar_azimuths))
    command = ' '.join(['python', 'tools/dataset_converters/multiview_scenes.py',
                        *(argv if argv is not None else sys.argv[1:])])
    start = time.perf_counter()
    try:
        info = convert(args.root, args.train, args.val, args.test, config=config, workers=args.workers,
                       overwrite=args.overwrite, progress=not args.quiet, command=command)
    except (DatasetExistsError, DegenerateBoxError, EmptySceneError, MeshFileError, RenderError) as error:
        print(f'multiview_scenes.py: error: {error}; {args.root} was left as it was', file=sys.stderr)
        return 2
    seconds = time.perf_counter() - start
    for split, samples in info['samples'].items():
        print(f'{split}: {samples} samples in {info["scenes"][split]} scenes, {info["objects"][split]} objects '
              f'({info["without_lidar_points"][split]} without lidar points)')
    print(f'{args.root}: {folder_size(args.root) / 2 ** 20:.0f} MiB in {seconds:.0f} s with {args.workers} '
          f'worker(s); {info["redraws"]} layouts redrawn (empty-scene rule)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
