"""The Three Cell Experiment (LOOPE, 2025) for any 2D encoding: train, score, tabulate and plot.

`vispe three-cell` (vispe.cli.three_cell) run from a checkout; its arguments: `vispe three-cell --help`.
"""
from vispe.cli.three_cell import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
