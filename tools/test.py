"""Evaluate a checkpoint on a config's test set.

`vispe test` (vispe.cli.test) run from a checkout; its arguments:
`vispe test --help`.
"""
from vispe.cli.test import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
