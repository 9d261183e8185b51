"""Train small ViTs on Fashion-MNIST and compare them across sizes.

`vispe demo` (vispe.cli.demo) run from a checkout; its arguments:
`vispe demo --help`.
"""
from vispe.cli.demo import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
