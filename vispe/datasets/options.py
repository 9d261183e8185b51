"""Checks of dataset constructor options, with errors that name the option, the value seen and the fix.

They run before any file is read, so a bad config fails at once, and change nothing for valid values.
"""
from __future__ import annotations

import numbers
from typing import Any, Sequence

from vispe.geometry import checks


def check_positive_int(owner: str, name: str, value: Any) -> int:
    """``value`` if it is an int ≥ 1 (not a bool), else TypeError / ValueError naming ``owner``'s option ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        hint = f' (use {int(value)})' if isinstance(value, float) and value.is_integer() else ''
        raise TypeError(f'{owner} {name} must be an int; got {value!r} ({type(value).__name__}){hint}.')
    if value <= 0:
        raise ValueError(f'{owner} {name} must be ≥ 1; got {value}. Set it to a positive number of '
                         f'{"pixels" if "size" in name or "scale" in name else "items"}.')
    return int(value)


def check_bool(owner: str, name: str, value: Any) -> bool:
    """``value`` if it is True or False (a string such as 'no' would count as true), else a TypeError."""
    if not isinstance(value, bool):
        raise TypeError(f'{owner} {name} must be True or False; got {value!r} ({type(value).__name__}).')
    return value


def check_non_negative_int(owner: str, name: str, value: Any) -> int:
    """``value`` if it is an int ≥ 0 (seeds), else TypeError / ValueError naming ``owner``'s option ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f'{owner} {name} must be an int; got {value!r} ({type(value).__name__}).')
    if value < 0:
        raise ValueError(f'{owner} {name} must be ≥ 0; got {value}. Use a non-negative seed.')
    return int(value)


def check_choice(owner: str, name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming the closest choice."""
    return checks.check_choice(f'{owner} {name}', value, choices)


def check_crop_scale(owner: str, name: str, value: Any) -> tuple[float, float]:
    """Two numbers ``(low, high)`` with 0 < low ≤ high ≤ 1: the area range of a random resized crop."""
    fix = f'Pass two fractions of the image area, e.g. {name}=(0.35, 1.0).'
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2:
        raise ValueError(f'{owner} {name} must be (low, high); got {value!r}. {fix}')
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in value):
        raise TypeError(f'{owner} {name} must hold two numbers; got {value!r}. {fix}')
    low, high = value
    if not (0 < low <= 1 and 0 < high <= 1):
        raise ValueError(f'{owner} {name} values must lie in (0, 1] (fractions of the image area); got {value!r}. '
                         f'{fix}')
    if low > high:
        raise ValueError(f'{owner} {name} must have low ≤ high; got {value!r}. Swap them: ({high}, {low}).')
    return low, high


def check_normalisation(owner: str, mean: Any, std: Any, channels: int) -> None:
    """``mean`` and ``std`` hold one number per channel and every std is > 0 (the pixels are divided by it)."""
    for name, values in (('mean', mean), ('std', std)):
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != channels:
            raise ValueError(f'{owner} {name} must hold {channels} numbers, one per channel; got {values!r}.')
    if not all(isinstance(v, numbers.Real) and v > 0 for v in std):
        raise ValueError(f'{owner} std must be > 0 for every channel (pixels are divided by it, a 0 gives inf); '
                         f'got {std!r}.')
