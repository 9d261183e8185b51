"""Write model-zoo cards from a work dir and an eval JSON.

`vispe zoo-card` (vispe.cli.zoo_card) run from a checkout; its arguments:
`vispe zoo-card --help`.
"""
from vispe.cli.zoo_card import main
from vispe.engine.arguments import run_main

if __name__ == '__main__':
    run_main(main)
