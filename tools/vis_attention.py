"""Draw where a query attends, at several input sizes.

`vispe vis-attention` (vispe.cli.vis_attention) run from a checkout; its arguments:
`vispe vis-attention --help`.
"""
from vispe.cli.vis_attention import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
