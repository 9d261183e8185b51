"""Decompress a .vgs bitstream (vispe compress) into a standard 3DGS .ply.

    vispe decompress scene.vgs scene_rec.ply

The Gaussians come out in Morton order of their centres (the order of a 3DGS scene does not change its
rendering), on the 16-bit grid of the scene's box, with the quantised attributes. A damaged or cut-short file is an
error naming it (its CRC-32); a file edited on purpose with its CRC recomputed is detected only when it was signed
(compress.py --key-file) and is read with ``--key-file``: then any change, another key or a missing signature is an
error. A signed file read without a key decodes with a warning that its signature was not verified.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Sequence

from vispe.engine.arguments import existing_file, output_file, reported_by, run_main
from vispe.gaussians.bitstream import key_option
from vispe.gaussians import write_gaussians_ply
from vispe.gaussians.codec import decompress


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe decompress``."""
    parser = argparse.ArgumentParser(prog='vispe decompress', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('bitstream', type=Path, help='a .vgs file')
    parser.add_argument('out', type=Path, help='the Gaussians (.ply)')
    parser.add_argument('--key-file', type=Path, default=None,
                        help='verify the HMAC-SHA256 signature under the bytes of this file (an unsigned file fails)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        existing_file(args.bitstream, 'bitstream')
        output_file(args.out, 'out', '.ply')
        args.key = key_option(args.key_file)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    cloud = decompress(args.bitstream.read_bytes(), str(args.bitstream), args.key)
    seconds = time.perf_counter() - start
    write_gaussians_ply(args.out, cloud)
    print(f'{args.bitstream} -> {args.out}: {len(cloud)} Gaussians, SH degree {cloud.sh_degree} ({seconds:.1f} s)')
    return 0


if __name__ == '__main__':
    run_main(main)
