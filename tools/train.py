"""Train a model from a config.

`vispe train` (vispe.cli.train) run from a checkout; its arguments:
`vispe train --help`.
"""
from vispe.cli.train import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
