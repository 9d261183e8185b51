"""Time every encoding at every resolution.

`vispe benchmark` (vispe.cli.benchmark) run from a checkout; its arguments:
`vispe benchmark --help`.
"""
from vispe.cli.benchmark import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
