"""Compress a 3DGS .ply into a .vgs bitstream: Gaussian centres on a 16-bit grid, attributes entropy-coded (ANS,
constriction) under Gaussians that a tri-plane context model predicts from each Gaussian's position and its
nearest neighbours (TC-GS), trained on the scene; or one of the baselines.

    vispe compress scene.ply scene.vgs --steps 3000 [--tri-resolution 64 --knn 4]
    vispe compress scene.ply scene_f.vgs --codec factorized --step-scale 2

``--step-scale`` multiplies every group's base quantisation step (f_dc 0.02, f_rest 0.02, opacity 0.05, scale 0.02,
rotation 0.01): the rate point. Normals are not coded (3DGS writes zeros). Prints the size, bits per Gaussian and
the bytes of each section. ``--key-file`` signs the file (see vispe.gaussians.bitstream: a CRC-32 detects damage,
only a signature checked with the key detects tampering). On a terminal a progress bar shows the context model's
training (``--quiet``: none).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

from vispe.engine.arguments import (InvalidArgument, existing_file, output_file, positive_float, progress_wanted,
                                   reported_by, run_main)
from vispe.gaussians import read_gaussians_ply
from vispe.gaussians.bitstream import key_option, unpack, write_bitstream
from vispe.gaussians.codec import CODECS, CodecConfig, compress


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe compress``."""
    parser = argparse.ArgumentParser(prog='vispe compress', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('ply', type=Path, help='a 3DGS .ply')
    parser.add_argument('out', type=Path, help='the bitstream (.vgs)')
    parser.add_argument('--codec', choices=CODECS, default='triplane', help='triplane (default) or a baseline')
    parser.add_argument('--step-scale', type=positive_float, default=1.0,
                        help='multiplies every quantisation step (1)')
    parser.add_argument('--steps', type=int, default=3000, help='training steps of the context model (3000)')
    parser.add_argument('--batch', type=int, default=4096, help='Gaussians per training step (4096)')
    parser.add_argument('--tri-resolution', type=int, default=None,
                        help='plane cells per side R (default: by scene size, 32 for 343k Gaussians, 16 for 14k)')
    parser.add_argument('--tri-channels', type=int, default=None, help='features per plane C (default: by scene size)')
    parser.add_argument('--knn', type=int, default=4, help='the Gaussian and its K-1 nearest (4)')
    parser.add_argument('--hidden', type=int, default=None,
                        help="the context MLP's hidden width (default: by scene size)")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--quiet', action='store_true', help='no progress bar (none is shown outside a terminal)')
    parser.add_argument('--key-file', type=Path, default=None,
                        help='sign the file with HMAC-SHA256 under the bytes of this file (tamper-evidence; '
                             'decompress.py --key-file verifies it)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        existing_file(args.ply, 'ply')
        output_file(args.out, 'out', '.vgs')
        args.key = key_option(args.key_file)
        for option in ('steps', 'tri_resolution', 'tri_channels', 'knn', 'hidden', 'batch'):
            minimum = 0 if option == 'steps' else (2 if option == 'tri_resolution' else 1)
            if getattr(args, option) is not None and getattr(args, option) < minimum:
                raise InvalidArgument('--' + option.replace('_', '-'), getattr(args, option),
                                      f'is below {minimum}', f'give at least {minimum}')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cloud = read_gaussians_ply(args.ply)
    if args.codec == 'triplane' and args.knn > len(cloud):
        raise InvalidArgument('--knn', args.knn, f'exceeds the {len(cloud)} Gaussian(s) of {args.ply}',
                              f'give at most {len(cloud)} (the Gaussian and its K-1 nearest)')
    config = CodecConfig(codec=args.codec, step_scale=args.step_scale, steps=args.steps, batch=args.batch,
                         tri_channels=args.tri_channels, tri_resolution=args.tri_resolution, knn=args.knn,
                         hidden=args.hidden, seed=args.seed)
    start = time.perf_counter()
    data = compress(cloud, config, args.key, progress=progress_wanted(args.quiet))
    seconds = time.perf_counter() - start
    write_bitstream(args.out, data)
    header, parts = unpack(data, str(args.out), args.key)
    sections = ', '.join(f'{name} {len(part)}' for name, part in parts.items())
    model = header['config']
    context = (f"; context C {model['tri_channels']}, R {model['tri_resolution']}, hidden {model['hidden']}, "
               f"K {model['knn']}" if args.codec == 'triplane' else '')
    print(f'{len(cloud)} Gaussians -> {args.out}: {len(data)} bytes, {8 * len(data) / len(cloud):.2f} bits per '
          f'Gaussian ({args.codec}, step scale {args.step_scale:g}, {seconds:.1f} s{context}'
          f'{", signed (HMAC-SHA256)" if args.key else ""}); sections (bytes): '
          f'{sections}')
    return 0


if __name__ == '__main__':
    run_main(main)
