"""3DGS-layout Gaussians initialised from a real coloured point cloud, as 3DGS initialises them from SfM points
(centre = point, SH DC = colour, isotropic scale from the three nearest neighbours, identity rotation, opacity 0.1).

    vispe gaussians-from-points stereo-motorcycle motorcycle.ply               # scikit-image's RGB-D pair
    vispe gaussians-from-points datasets/mv-scenes scene0.ply --sample 0       # a rendered sample's lidar
    vispe gaussians-from-points cloud.ply out.ply --voxel-size 0.01           # any coloured .ply/.pcd/.npy
    vispe gaussians-from-points stereo-motorcycle fitted.ply --fit neighbours  # attributes that vary
    vispe gaussians-from-points stereo-motorcycle m.ply --cameras m.cameras.json  # + held-out cameras to render from

SOURCE is 'stereo-motorcycle' (343k points back-projected from the ground-truth disparity and the calibration in
skimage's docstring), an mv-scenes root (the lidar sweep of ``--sample`` in ``--split``, each point coloured by the
first camera that sees it), or a point-cloud file with colours. The output is a standard 3DGS .ply. Initialised
Gaussians have one opacity, identity rotations and zero higher SH, which any codec codes for almost nothing;
``--fit neighbours`` fits rotation, scales, opacity, colour and degree-1 SH to each point's neighbourhood.
``--cameras`` writes, as 3DGS's cameras.json, cameras that did not make the points, for ``gaussians-report
--cameras``: the pair's real right camera and the left one moved up and down by the baseline, or each camera of the
mv-scenes sample turned 30° right (vispe.gaussians.sources.held_out_cameras).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np

from vispe.engine.arguments import InvalidArgument, non_negative_int, output_file, positive_float, reported_by, run_main
from vispe.gaussians import write_gaussians_ply
from vispe.gaussians.cameras import write_cameras_json
from vispe.gaussians.init import fit_to_neighbours, gaussians_from_points
from vispe.gaussians.sources import STEREO_MOTORCYCLE, coloured_points, held_out_cameras
from vispe.geometry.point_cloud import voxel_down_sample


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe gaussians-from-points``."""
    parser = argparse.ArgumentParser(prog='vispe gaussians-from-points', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('source', help=f"'{STEREO_MOTORCYCLE}', an mv-scenes root, or a coloured .ply/.pcd/.npy")
    parser.add_argument('out', type=Path, help='the Gaussians (.ply)')
    parser.add_argument('--sample', type=non_negative_int, default=0, help='mv-scenes: the sample index in --split (0)')
    parser.add_argument('--split', default='test-rig1', help='mv-scenes: the split (test-rig1)')
    parser.add_argument('--sh-degree', type=int, choices=range(4), default=3, help='SH degree of the file (3)')
    parser.add_argument('--voxel-size', type=positive_float, default=None,
                        help='first thin the cloud on this voxel grid')
    parser.add_argument('--fit', choices=('none', 'neighbours'), default='none',
                        help="'neighbours': fit every attribute to the 16 nearest points (varied attributes; "
                             "vispe.gaussians.init.fit_to_neighbours); 'none': 3DGS's initialisation")
    parser.add_argument('--cameras', type=Path, default=None,
                        help="write held-out cameras of the source here (3DGS's cameras.json; not for point files)")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        output_file(args.out, 'out', '.ply')
        if args.source != STEREO_MOTORCYCLE and not Path(args.source).exists():
            raise InvalidArgument('source', args.source, 'is neither a file, a folder nor '
                                  f"'{STEREO_MOTORCYCLE}'", 'give a coloured point cloud or an mv-scenes root')
        if args.cameras is not None:
            if args.source != STEREO_MOTORCYCLE and not Path(args.source).is_dir():
                raise InvalidArgument('--cameras', args.cameras, f'a point file ({args.source}) names no camera',
                                      "write your scene's cameras.json yourself (3DGS's format) or drop --cameras")
            output_file(args.cameras, '--cameras', '.json')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    xyz, rgb = coloured_points(args.source, args.sample, args.split)
    if args.voxel_size is not None:
        xyz, rgb = (part.numpy() for part in voxel_down_sample(xyz, args.voxel_size, colors=rgb))
    cloud = gaussians_from_points(xyz, rgb, sh_degree=args.sh_degree)
    if args.fit == 'neighbours':
        cloud = fit_to_neighbours(cloud, rgb)
    write_gaussians_ply(args.out, cloud)
    scale = np.exp(cloud.scale[:, 0])
    print(f'{len(cloud)} Gaussians (SH degree {cloud.sh_degree}) from {args.source} -> {args.out}; scale median '
          f'{np.median(scale):.4g}, range {scale.min():.3g}..{scale.max():.3g}')
    if args.cameras is not None:
        cameras = held_out_cameras(args.source, args.sample, args.split)
        write_cameras_json(args.cameras, cameras)
        print(f'{len(cameras)} held-out cameras ({", ".join(camera.name for camera in cameras)}) -> {args.cameras}')
    return 0


if __name__ == '__main__':
    run_main(main)
