"""Scan pt-scenes (point-cloud 3D detection, ScanNet layout).

`vispe dataset point-scenes` (vispe.cli.dataset_converters.point_scenes) run from a checkout; its arguments:
`vispe dataset point-scenes --help`.
"""
from vispe.cli.dataset_converters.point_scenes import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
