"""The positions SeqPE's two regularisers read each step (Li et al., 2025, §3.3; ghrua/seqpe ``pe_sampler.py``).

Contrastive: pivots drawn from the whole position space [0, E)² (E = 10^max_digits), each with K candidates; the
"positive" is simply the candidate nearest the pivot (squared Euclidean distance, the first on ties). The candidates
are K + 1 uniform draws, to which half of the pivots add nothing, 30 % add "hard negatives" (positions whose digits
are a few edits away from the pivot's, kept only when farther than the nearest uniform draw) and 20 % add the
positions of a random window (not centred on the pivot); the pivot itself and repeats are dropped, K kept.

Distillation: windows of the training grid's size placed away from its own corner (starts in [0, E − h) × [0, E − w)
with row >= h or column >= w), a few of each window's cells; the teacher of a cell (i + r, j + c) is the cell (r, c)
of the training grid.

All draws come from a ``random.Random`` the caller seeds (vispe seeds it from torch's generator, so a seeded run draws
the same positions).
"""
from __future__ import annotations

import math
import random

import torch

HARD_NEGATIVE_SHARE = 0.2        # of the K candidates, tries at hard negatives
MODE_SHARES = (0.5, 0.8)         # u below 0.5: uniform only; below 0.8: hard negatives; else a window
WINDOW_SIDE = 14                 # the window's least side (the reference's fixed range of 196 cells)


def _insert_digit(digits: str, limit: int, max_length: int, rng: random.Random) -> str | None:
    """A random digit inserted (not a leading zero), or None at ``max_length`` digits or at ``limit``."""
    if len(digits) == max_length:
        return None
    where = rng.randint(0, len(digits))
    edited = digits[:where] + str(rng.randint(1 if where == 0 else 0, 9)) + digits[where:]
    return edited if int(edited) < limit else None


def _delete_digit(digits: str, limit: int, max_length: int, rng: random.Random) -> str | None:
    """One digit removed (never leaving a leading zero), or None for a single digit."""
    if len(digits) == 1:
        return None
    where = rng.randint(0, len(digits) - 1)
    while where == 0 and digits[1] == '0':                     # no leading zero after deleting the first digit
        where = rng.randint(1, len(digits) - 1)
    return digits[:where] + digits[where + 1:]


def _swap_digits(digits: str, limit: int, max_length: int, rng: random.Random) -> str | None:
    """Two digits exchanged (no leading zero, a change), within 11 tries; None otherwise or at ``limit``."""
    if len(digits) == 1 or (len(digits) == 2 and (digits[1] == '0' or digits[0] == digits[1])):
        return None
    for _ in range(11):
        first, second = sorted(rng.sample(range(len(digits)), 2))
        chars = list(digits)
        chars[first], chars[second] = chars[second], chars[first]
        edited = ''.join(chars)
        if not (first == 0 and digits[second] == '0') and edited != digits:
            return edited if int(edited) < limit else None
    return None


def _substitute_digit(digits: str, limit: int, max_length: int, rng: random.Random) -> str | None:
    """One digit replaced by another (not a leading zero), or None at ``limit``."""
    while True:
        where, value = rng.randint(0, len(digits) - 1), rng.randint(0, 9)
        if not (where == 0 and value == 0) and str(value) != digits[where]:
            break
    edited = digits[:where] + str(value) + digits[where + 1:]
    return edited if int(edited) < limit else None


EDITS = (_insert_digit, _swap_digits, _substitute_digit, _delete_digit)


def hard_negative(pivot: tuple[int, int], max_digits: int, rng: random.Random) -> tuple[int, int]:
    """A position whose digits are 1–3 edits (insert, swap, substitute, delete) from the pivot's, its coordinates
    written one after the other without padding, as one number ((3, 12) -> "312", (0, 12) -> "12"), cut back into
    two coordinates at a random place that leaves each at most ``max_digits`` digits (a one-digit result gets a zero
    before or after it). As the reference, an insertion is refused once the number has ``max_digits`` digits (its
    check compares the concatenated length with one coordinate's)."""
    start = str(int(''.join(str(value) for value in pivot)))
    limit, max_length = 10 ** (2 * max_digits), max_digits
    edits, digits = rng.randint(1, 3), start
    done = 0
    while done != edits:
        edited = EDITS[rng.randint(0, 3)](digits, limit, max_length, rng)
        if edited is not None and edited != start:
            digits, done = edited, done + 1
    digits = str(int(digits))
    if len(digits) < 2:
        digits = digits + '0' if rng.uniform(0, 1) < 0.5 else '0' + digits
    while True:
        cut = rng.sample(range(1, max_digits + 1), 1)[0]
        if 0 < len(digits) - cut <= max_digits:
            return int(digits[:cut]), int(digits[cut:])


def window_positions(extent: int, side: int, count: int, rng: random.Random) -> list[tuple[int, int]]:
    """``count`` distinct cells of a side×side window (side at most ``extent``) at a uniform random start in
    [0, extent − side)²."""
    side = min(side, extent)
    row, col = int((extent - side) * rng.uniform(0, 1)), int((extent - side) * rng.uniform(0, 1))
    cells = [(r, c) for r in range(row, min(row + side, extent)) for c in range(col, min(col + side, extent))]
    return cells if len(cells) < count else rng.sample(cells, count)


def squared_distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2


def contrastive_positions(num_pivots: int, num_candidates: int, max_digits: int,
                          rng: random.Random) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Pivots (P, 2), candidates (P, K, 2) and the index of each pivot's nearest candidate (P,), int64, all in
    [0, 10^max_digits)² (module docstring)."""
    extent = 10 ** max_digits
    if num_candidates + 1 > extent * extent:
        raise ValueError(f'{num_candidates} contrastive candidates need more than the {extent * extent} positions of '
                         f'max_digits={max_digits}; choose fewer candidates or more digits.')
    hard_tries = int(num_candidates * HARD_NEGATIVE_SHARE)
    side = max(WINDOW_SIDE, math.isqrt(5 * num_candidates))
    pivots, candidates = [], []
    for _ in range(num_pivots):
        pivot = (rng.randrange(extent), rng.randrange(extent))
        uniform = [divmod(index, extent) for index in rng.sample(range(extent * extent), num_candidates + 1)]
        share = rng.uniform(0, 1)
        special: list[tuple[int, int]] = []
        if MODE_SHARES[0] < share <= MODE_SHARES[1]:
            nearest = min(squared_distance(pivot, cell) for cell in uniform[:len(uniform) - hard_tries])
            tries = (hard_negative(pivot, max_digits, rng) for _ in range(hard_tries))
            special = [cell for cell in tries if squared_distance(pivot, cell) > nearest]
        elif share > MODE_SHARES[1]:
            special = window_positions(extent, side, num_candidates, rng)
        chosen = list(dict.fromkeys(cell for cell in special + uniform if cell != pivot))[:num_candidates]
        pivots.append(pivot)
        candidates.append(chosen)
    pivots_t, candidates_t = torch.tensor(pivots), torch.tensor(candidates)
    labels = ((candidates_t - pivots_t[:, None]) ** 2).sum(-1).argmin(-1)
    return pivots_t, candidates_t, labels


def distillation_positions(num_windows: int, num_cells: int, grid_size: tuple[int, int], max_digits: int,
                           rng: random.Random) -> tuple[torch.Tensor, torch.Tensor]:
    """Students (W, n, 2): cells of windows placed away from the training grid's corner, and their teachers (W, n):
    the flat index r·w + c of the same cell in the training grid (module docstring)."""
    height, width = grid_size
    extent = 10 ** max_digits
    if not (extent - height > height or extent - width > width) or min(extent - height, extent - width) < 1:
        raise ValueError(f'Distillation windows of the {height}×{width} training grid fit nowhere outside its corner '
                         f'within {extent} positions a side (max_digits={max_digits}); build SeqPE with more '
                         f'max_digits or leave the distillation loss off.')
    starts = []
    while len(starts) < num_windows:
        start = (rng.randrange(extent - height), rng.randrange(extent - width))
        if start[0] >= height or start[1] >= width:
            starts.append(start)
    teachers = torch.tensor([rng.sample(range(height * width), num_cells) for _ in starts])
    offsets = torch.stack([teachers // width, teachers % width], dim=-1)
    return torch.tensor(starts)[:, None] + offsets, teachers
