"""Write fmnist-det, Fashion-MNIST items pasted on a canvas (2D detection).

`vispe dataset fmnist-detection` (vispe.cli.dataset_converters.fmnist_detection) run from a checkout; its arguments:
`vispe dataset fmnist-detection --help`.
"""
from vispe.cli.dataset_converters.fmnist_detection import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
