"""Draw what encodings do before any training.

`vispe vis-encoding` (vispe.cli.vis_encoding) run from a checkout; its arguments:
`vispe vis-encoding --help`.
"""
from vispe.cli.vis_encoding import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
