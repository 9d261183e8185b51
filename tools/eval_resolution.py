"""Evaluate trained models at several input sizes.

`vispe eval-resolution` (vispe.cli.eval_resolution) run from a checkout; its arguments:
`vispe eval-resolution --help`.
"""
from vispe.cli.eval_resolution import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
