"""Initialise 3DGS Gaussians from a coloured point cloud.

`vispe gaussians-from-points` (vispe.cli.gaussians.from_points) run from a checkout; its arguments:
`vispe gaussians-from-points --help`.
"""
from vispe.cli.gaussians.from_points import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
