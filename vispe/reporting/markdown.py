"""Formatting of generated tables: markdown tables, mean ± spread, ratios and megabytes."""
from __future__ import annotations

import math
from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table; the first column left-aligned, the others right-aligned."""
    rule = ['---'] + ['---:'] * (len(header) - 1)
    return '\n'.join('| ' + ' | '.join(line) + ' |' for line in [list(header), rule, *[list(r) for r in rows]])


def mean_spread(mean: float, spread: float | None, digits: int) -> str:
    """``0.368 ± 0.026`` (``spread`` None: the mean alone)."""
    return f'{mean:.{digits}f}' if spread is None else f'{mean:.{digits}f} ± {spread:.{digits}f}'


def ratio(value: float, high: float | None = None) -> str:
    """``1.52×`` or, with the highest round, ``1.52× (1.60)``."""
    return f'{value:.2f}×' if high is None else f'{value:.2f}× ({high:.2f})'


def megabytes(value: float | None) -> str | None:
    """``142 MB``; None for a missing or NaN byte count."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return f'{value / 2 ** 20:.0f} MB'
