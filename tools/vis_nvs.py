"""Draw novel-view renderings beside the ground truth.

`vispe vis-nvs` (vispe.cli.vis_nvs) run from a checkout; its arguments:
`vispe vis-nvs --help`.
"""
from vispe.cli.vis_nvs import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
