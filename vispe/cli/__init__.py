"""The ``vispe`` command and its tools, one module per subcommand (:mod:`vispe.cli.main` dispatches)."""
