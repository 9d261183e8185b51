"""Rate-distortion report of Gaussian bitstreams.

`vispe gaussians-report` (vispe.cli.gaussians.report) run from a checkout; its arguments:
`vispe gaussians-report --help`.
"""
from vispe.cli.gaussians.report import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
