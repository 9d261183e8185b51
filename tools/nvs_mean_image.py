"""Score the mean-image floor of novel-view synthesis.

`vispe nvs-mean-image` (vispe.cli.nvs_mean_image) run from a checkout; its arguments:
`vispe nvs-mean-image --help`.
"""
from vispe.cli.nvs_mean_image import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
