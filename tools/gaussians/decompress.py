"""Decompress a .vgs bitstream into a 3DGS .ply.

`vispe decompress` (vispe.cli.gaussians.decompress) run from a checkout; its arguments:
`vispe decompress --help`.
"""
from vispe.cli.gaussians.decompress import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
