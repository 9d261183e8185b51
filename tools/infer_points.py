"""Detect 3D boxes in your own point cloud.

`vispe infer-points` (vispe.cli.infer_points) run from a checkout; its arguments:
`vispe infer-points --help`.
"""
from vispe.cli.infer_points import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
