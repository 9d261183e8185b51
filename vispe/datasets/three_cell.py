"""The Three Cell Experiment (Chowdhury et al., LOOPE, 2025, §3.2 and its supplement's Algorithm 4): a black image
on a G×G grid of cells, three of them pure red, green and blue, and six yes/no questions about where they are.

Cell coordinates p = (x, y) are (row, column) from the top-left cell. The six answers, as the authors' training and
validation code reads them (six independent sigmoid outputs):

====  ===========  ==========================================================================
bit   family       1 when
====  ===========  ==========================================================================
0     distance     d(R, G) > d(R, B)          (Euclidean distances between the cells)
1     distance     d(R, B) > d(R, G)          (a tie sets neither bit)
2     orientation  Δ = (x_g − x_r)(y_b − y_r) − (y_g − y_r)(x_b − x_r) > 0   (R, G, B counter-clockwise)
3     area         A_RG > A_RB, A_RG = ½·|(y_r + y_g)(x_g − x_r)| (the trapezium under RG down to the x axis)
4     area         A_RB > A_RG                (a tie sets neither bit)
5     vector sum   x_r + x_g + x_b > G − 1 and y_r + y_g + y_b > G − 1
====  ===========  ==========================================================================

Distance and orientation ask for relative position, area and vector sum for absolute position. The sampler is the
supplement's: a mode is drawn among {equal distances, d(R, G) ≤ d(R, B), d(R, G) ≥ d(R, B)}, red uniformly, and green
and blue at offsets from red drawn from the squared radii a² + b² ≤ 2(G − 1)² (two different offsets of one radius,
drawn once per red cell, for the tie; two different radii otherwise), within ``max_attempts`` tries per red cell. Where the supplement is
silent or its text and sampler disagree, vispe's choices (docs/tasks/three-cell.md): the two radii differ, 100
attempts, and a collinear draw (Δ = 0, which the paper excludes but the sampler allows, ~4 % of draws) is redrawn
whole.
"""
from __future__ import annotations

import math
import random
from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from vispe.datasets.options import check_choice, check_non_negative_int, check_positive_int
from vispe.registry import DATASETS

FAMILIES = {'distance': (0, 1), 'orientation': (2,), 'area': (3, 4), 'vector_sum': (5,)}
BITS = 6
SPLITS = {'train': (0.0, 0.8), 'val': (0.8, 0.9), 'test': (0.9, 1.0)}
COLOURS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


@lru_cache(maxsize=8)
def offsets_by_squared_radius(grid: int) -> dict[int, tuple[tuple[int, int], ...]]:
    """Integer offsets (a, b) ≠ (0, 0) with a² + b² ≤ 2(G − 1)², grouped by a² + b² (radii with one offset only, the
    zero radius, are left out as the supplement drops them)."""
    limit = 2 * (grid - 1) ** 2
    reach = math.isqrt(limit)
    groups: dict[int, list[tuple[int, int]]] = {}
    for a in range(-reach, reach + 1):
        for b in range(-reach, reach + 1):
            if a * a + b * b <= limit:
                groups.setdefault(a * a + b * b, []).append((a, b))
    return {key: tuple(value) for key, value in groups.items() if len(value) > 1}


def three_cell_labels(red: tuple[int, int], green: tuple[int, int], blue: tuple[int, int], grid: int) -> list[int]:
    """The six answers for cells (row, column) of a G×G grid, in exact integer arithmetic (module docstring)."""
    (xr, yr), (xg, yg), (xb, yb) = red, green, blue
    d_rg, d_rb = (xg - xr) ** 2 + (yg - yr) ** 2, (xb - xr) ** 2 + (yb - yr) ** 2
    delta = (xg - xr) * (yb - yr) - (yg - yr) * (xb - xr)
    area_rg, area_rb = abs((yr + yg) * (xg - xr)), abs((yr + yb) * (xb - xr))
    return [int(d_rg > d_rb), int(d_rb > d_rg), int(delta > 0), int(area_rg > area_rb), int(area_rb > area_rg),
            int(xr + xg + xb > grid - 1 and yr + yg + yb > grid - 1)]


def _inside(cell: tuple[int, int], grid: int) -> bool:
    return 0 <= cell[0] < grid and 0 <= cell[1] < grid


def _try_red(rng: random.Random, grid: int, mode: int, max_attempts: int) -> tuple | None:
    """Green and blue for one red cell in the drawn mode, or None after ``max_attempts`` failed tries."""
    groups = offsets_by_squared_radius(grid)
    keys = sorted(groups)
    red = (rng.randrange(grid), rng.randrange(grid))
    tie_key = rng.choice(keys) if mode == 0 else None          # the tie's radius: one per red cell
    for _ in range(max_attempts):
        if mode == 0:
            first, second = rng.sample(groups[tie_key], 2)
        else:
            near, far = sorted(rng.sample(keys, 2))
            green_key, blue_key = (near, far) if mode == 1 else (far, near)
            first, second = rng.choice(groups[green_key]), rng.choice(groups[blue_key])
        green, blue = (red[0] + first[0], red[1] + first[1]), (red[0] + second[0], red[1] + second[1])
        if _inside(green, grid) and _inside(blue, grid) and green != blue:
            return red, green, blue
    return None


def sample_three_cells(rng: random.Random, grid: int, max_attempts: int = 100) -> tuple[tuple[int, int], ...]:
    """One (red, green, blue) draw of the supplement's sampler, non-collinear (module docstring)."""
    while True:
        mode = rng.randrange(3)
        cells = None
        while cells is None:
            cells = _try_red(rng, grid, mode, max_attempts)
        red, green, blue = cells
        if (green[0] - red[0]) * (blue[1] - red[1]) != (green[1] - red[1]) * (blue[0] - red[0]):
            return cells


@lru_cache(maxsize=4)
def three_cell_set(count: int, grid: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``count`` draws: cells (count, 3, 2) int64 as (row, column) of red, green, blue, and labels (count, 6) int64
    (cached: the three splits of a set share one draw; treat the arrays as read-only)."""
    rng = random.Random(seed)
    cells = np.array([sample_three_cells(rng, grid) for _ in range(count)], dtype=np.int64).reshape(count, 3, 2)
    labels = np.array([three_cell_labels(*map(tuple, triple), grid) for triple in cells.tolist()], dtype=np.int64)
    return cells, labels


def render_three_cells(cells: np.ndarray | torch.Tensor, grid: int, cell_size: int) -> torch.Tensor:
    """(3, G·s, G·s) float32 image: black, cells (3, 2) painted pure red, green and blue, s×s pixels each."""
    image = torch.zeros(3, grid, grid)
    for (row, col), colour in zip(torch.as_tensor(cells).tolist(), COLOURS):
        image[:, row, col] = torch.tensor(colour)
    return image.repeat_interleave(cell_size, 1).repeat_interleave(cell_size, 2)


@DATASETS.register_module()
class ThreeCells(Dataset):
    """The Three Cell Experiment's images and six answers, generated in memory from a seed.

    ``count`` draws are made once from ``seed`` and divided 80/10/10 into 'train', 'val' and 'test' (the paper: 10k
    images of a 14×14 grid of 16 px cells, 224 px). Items are ``dict(inputs=(3, G·s, G·s), label=(6,) float32)``
    (bits as in the module docstring), for :class:`~vispe.models.ImageClassifier` with ``loss='bce'`` and
    :class:`~vispe.evaluation.ThreeCellMetric`. Pixels are 0 or 1, not normalised, and there is no augmentation: a flip
    or a turn would change the answers.

    Args:
        split: 'train', 'val' or 'test'.
        grid: G, cells per side (14 in the paper).
        cell_size: s, pixels per cell side (16 in the paper); a ViT's patch size should equal it.
        count: draws over the three splits (10000 in the paper).
        seed: the draw's seed (the same for the three splits of one set).
    """

    def __init__(self, split: str = 'train', grid: int = 14, cell_size: int = 16, count: int = 10000,
                 seed: int = 0) -> None:
        check_choice('ThreeCells', 'split', split, tuple(SPLITS))
        check_positive_int('ThreeCells', 'cell_size', cell_size)
        check_positive_int('ThreeCells', 'count', count)
        check_non_negative_int('ThreeCells', 'seed', seed)
        if isinstance(grid, bool) or not isinstance(grid, int) or grid < 3:
            raise ValueError(f'ThreeCells grid must be a whole number of cells >= 3 (three non-collinear cells); got '
                             f'{grid!r}.')
        cells, labels = three_cell_set(count, grid, seed)
        start, stop = (round(fraction * count) for fraction in SPLITS[split])
        self.cells = torch.from_numpy(cells[start:stop])
        self.labels = torch.from_numpy(labels[start:stop]).float()
        self.grid, self.cell_size = grid, cell_size
        self.metainfo = dict(split=split, grid=grid, cell_size=cell_size, count=count, seed=seed)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(inputs=render_three_cells(self.cells[index], self.grid, self.cell_size), label=self.labels[index])
