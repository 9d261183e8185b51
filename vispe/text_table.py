"""Plain-text tables for the terminal: the encodings and hosts listings, benchmark and sweep tables."""
from __future__ import annotations

from typing import Sequence

__all__ = ['aligned_table']


def aligned_table(lines: Sequence[Sequence[str]], left_columns: int | None = None) -> str:
    """Rows of cells (the first the header) as text under a rule, each column as wide as its widest cell: the first
    ``left_columns`` left-aligned and the rest right-aligned (None: all left-aligned)."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    left = len(widths) if left_columns is None else left_columns
    text = ['  '.join(cell.ljust(width) if i < left else cell.rjust(width) for i, (cell, width) in
                      enumerate(zip(line, widths))).rstrip() for line in lines]
    return '\n'.join([text[0], '  '.join('-' * width for width in widths), *text[1:]])
