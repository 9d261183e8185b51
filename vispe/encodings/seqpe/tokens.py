"""SeqPE's symbols: an n-dimensional integer position written as the decimal digits of each coordinate."""
from __future__ import annotations

import torch

BASE = 10


def digit_tokens(positions: torch.Tensor, max_digits: int) -> torch.Tensor:
    """(..., D) non-negative integer positions -> (..., D·max_digits) int64 digits: each coordinate left-padded with
    zeros to ``max_digits`` digits, most significant first, the coordinates in order (SeqPE writes (3, 12) with two
    digits as 0 3 1 2). A padding zero is the digit 0 (the reference masks nothing)."""
    powers = BASE ** torch.arange(max_digits - 1, -1, -1, device=positions.device)
    digits = torch.div(positions.long()[..., None], powers, rounding_mode='floor') % BASE
    return digits.flatten(-2)


def check_positions_fit(largest: int, max_digits: int, user: str) -> None:
    """Refuse a coordinate that needs more than ``max_digits`` digits (SeqPE's vocabulary ends there)."""
    if largest >= BASE ** max_digits:
        raise ValueError(f'{user} writes each coordinate with max_digits={max_digits} digits, so positions reach at '
                         f'most {BASE ** max_digits - 1}; this grid needs {largest}. Build it with more max_digits '
                         f"(training changes), or set extrapolation='interpolate' to resample the training grid.")
