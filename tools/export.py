"""Export a detector to ONNX, checked with onnxruntime.

`vispe export` (vispe.cli.export) run from a checkout; its arguments:
`vispe export --help`.
"""
from vispe.cli.export import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
