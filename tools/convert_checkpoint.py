"""Convert a released checkpoint into vispe's module names.

`vispe convert` (vispe.cli.convert_checkpoint) run from a checkout; its arguments:
`vispe convert --help`.
"""
from vispe.cli.convert_checkpoint import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
