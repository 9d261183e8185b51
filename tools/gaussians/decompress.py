"""Decompress a .vgs bitstream (tools/gaussians/compress.py) into a standard 3DGS .ply.

    python tools/gaussians/decompress.py scene.vgs scene_rec.ply

The Gaussians come out in Morton order of their centres (the order of a 3DGS scene does not change its
rendering), on the 16-bit grid of the scene's box, with the quantised attributes; a corrupt or cut-short file is
an error naming it, never a wrong scene.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from vispe.engine.arguments import existing_file, output_file, reported_by, run_main
from vispe.gaussians import write_gaussians_ply
from vispe.gaussians.codec import decompress


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('bitstream', type=Path, help='a .vgs file')
    parser.add_argument('out', type=Path, help='the Gaussians (.ply)')
    args = parser.parse_args(argv)
    with reported_by(parser):
        existing_file(args.bitstream, 'bitstream')
        output_file(args.out, 'out', '.ply')
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    cloud = decompress(args.bitstream.read_bytes(), str(args.bitstream))
    seconds = time.perf_counter() - start
    write_gaussians_ply(args.out, cloud)
    print(f'{args.bitstream} -> {args.out}: {len(cloud)} Gaussians, SH degree {cloud.sh_degree} ({seconds:.1f} s)')
    return 0


if __name__ == '__main__':
    run_main(main)
