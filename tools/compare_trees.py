"""Benchmark two checkouts of vispe side by side.

`vispe compare-trees` (vispe.cli.compare_trees) run from a checkout; its arguments:
`vispe compare-trees --help`.
"""
from vispe.cli.compare_trees import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
