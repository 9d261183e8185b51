"""Generated results and benchmark tables: no figure in README.md or docs/ is typed by hand.

Each table is built from the JSON the tools wrote (``benchmarks/`` from ``tools/benchmark.py`` and
``tools/compare_trees.py``, ``models/`` from ``tools/eval_resolution.py``, ``tools/zoo_card.py`` and
``tools/gaussians/report.py``) and stamped with the date and commit of the run: recorded in the JSON where the tool
records them (``run_stamp()``), else the commit that last changed the file (``git log``), and the stamp says which.
A markdown file asks for a table with a marker block, ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->``; the names
are the keys of ``BLOCKS``. ``python tools/update_readme.py`` fills every block of README.md and docs/*.md;
``--check`` exits 1 naming each stale block.
"""
from vispe.reporting.provenance import Provenance, ReportSourceError, run_stamp

__all__ = ['Provenance', 'ReportSourceError', 'run_stamp']
