"""Predicted against true yaw of a multi-view detector's matched boxes, per class.

`vispe vis-orientation` (vispe.cli.vis_orientation) run from a checkout; its arguments:
`vispe vis-orientation --help`.
"""
from vispe.cli.vis_orientation import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
