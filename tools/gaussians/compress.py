"""Compress a 3DGS .ply into a .vgs bitstream.

`vispe compress` (vispe.cli.gaussians.compress) run from a checkout; its arguments:
`vispe compress --help`.
"""
from vispe.cli.gaussians.compress import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
