"""The generalised Hilbert ("gilbert") curve of a rectangular grid: a path through every cell of any h×w grid in which
consecutive cells are 4-neighbours, Hilbert's curve where both sides are the same power of two. The recursion is Jakub
Červený's ``gilbert2d`` (github.com/jakubcerveny/gilbert, 2018, BSD-2-Clause), which LOOPE's authors use too.

LOOPE (Chowdhury et al., 2025) orders a ViT's patches along it before a 1D sinusoidal encoding reads the order. The
recursion follows the curve's definition: a strip one cell wide is walked straight; a rectangle more than 1.5 times
as long as it is wide is cut in two along its long side; any other is cut in three (the first part along the short
side, the middle part along the long side, the last part turned back), each part's major side made even where an odd
one would break the path. The curve starts at cell (0, 0) along the longer side, as the LOOPE paper's supplement
gives it (its released code always starts along the columns, which is the same curve on square and wide grids and
breaks the path into jumps on tall ones).
"""
from __future__ import annotations

from typing import Iterator

import torch


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def _walk(x: int, y: int, ax: int, ay: int, bx: int, by: int) -> Iterator[tuple[int, int]]:
    """The cells (x, y) of the rectangle at (x, y) spanned by the major vector (ax, ay) and the minor (bx, by)."""
    width, height = abs(ax + ay), abs(bx + by)
    step_a, step_b = (_sign(ax), _sign(ay)), (_sign(bx), _sign(by))
    if height == 1 or width == 1:
        step, count = (step_a, width) if height == 1 else (step_b, height)
        for _ in range(count):
            yield x, y
            x, y = x + step[0], y + step[1]
        return
    half_ax, half_ay, half_bx, half_by = ax // 2, ay // 2, bx // 2, by // 2
    if 2 * width > 3 * height:
        if abs(half_ax + half_ay) % 2 and width > 2:
            half_ax, half_ay = half_ax + step_a[0], half_ay + step_a[1]
        yield from _walk(x, y, half_ax, half_ay, bx, by)
        yield from _walk(x + half_ax, y + half_ay, ax - half_ax, ay - half_ay, bx, by)
        return
    if abs(half_bx + half_by) % 2 and height > 2:
        half_bx, half_by = half_bx + step_b[0], half_by + step_b[1]
    yield from _walk(x, y, half_bx, half_by, half_ax, half_ay)
    yield from _walk(x + half_bx, y + half_by, ax, ay, bx - half_bx, by - half_by)
    yield from _walk(x + (ax - step_a[0]) + (half_bx - step_b[0]), y + (ay - step_a[1]) + (half_by - step_b[1]),
                     -half_bx, -half_by, -(ax - half_ax), -(ay - half_ay))


def gilbert_order(grid_size: tuple[int, int], device: torch.device | str | None = None) -> torch.Tensor:
    """(h, w) int64: each cell's 1-based step along the gilbert curve of the h×w grid, which starts at cell (0, 0)
    along the longer side, the columns when h <= w (LOOPE's indices: 1..h·w, 0 left for a cls token)."""
    height, width = grid_size
    if height < 1 or width < 1:
        raise ValueError(f'A gilbert curve needs a grid of at least 1×1 cells; got {height}×{width}.')
    order = torch.empty(height, width, dtype=torch.int64)
    path = _walk(0, 0, width, 0, 0, height) if width >= height else _walk(0, 0, 0, height, width, 0)
    for step, (col, row) in enumerate(path, start=1):
        order[row, col] = step
    return order.to(device)
