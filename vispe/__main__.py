"""``python -m vispe``: the ``vispe`` command (:mod:`vispe.cli.main`)."""
import sys

from vispe.cli.main import main

sys.exit(main())
