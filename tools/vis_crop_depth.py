"""Draw depth-from-crops predictions on one image.

`vispe vis-crop-depth` (vispe.cli.vis_crop_depth) run from a checkout; its arguments:
`vispe vis-crop-depth --help`.
"""
from vispe.cli.vis_crop_depth import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
