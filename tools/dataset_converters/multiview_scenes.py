"""Render mv-scenes (multi-camera 3D detection; --task nvs|crops for the others).

`vispe dataset multiview-scenes` (vispe.cli.dataset_converters.multiview_scenes) run from a checkout; its arguments:
`vispe dataset multiview-scenes --help`.
"""
from vispe.cli.dataset_converters.multiview_scenes import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
