"""Draw the 3D points of a multi-view detector's camera encoding.

`vispe vis-positions` (vispe.cli.vis_positions) run from a checkout; its arguments:
`vispe vis-positions --help`.
"""
from vispe.cli.vis_positions import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
