"""Checks of geometry where it enters vispe (image sizes, depths, depth ranges), in the one error style: what is
wrong, the value seen, and how to fix it.

Value checks read tensors back to the host, so they run only where :func:`checking_values` allows it: never while
torch.compile, torch.export, torch.fx or torch.jit trace a model, nor on meta tensors, and, by default, only for
tensors in host memory: a read-back of a GPU tensor makes the host wait for the GPU (a sync per check, per forward).
Data is checked where it enters, on the CPU (the collate functions and the data preprocessor), so a model on a GPU
forwards without waiting; :func:`set_value_checks` ``('always')`` checks GPU tensors too (for debugging). Checks of
shapes, sizes and Python numbers are free and always run.
"""
from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import os
from collections.abc import Iterator
from typing import Any, Sequence

import torch
import torch.fx

__all__ = ['VALUE_CHECK_MODES', 'check_boxes', 'check_choice', 'check_depth_range', 'check_finite', 'check_poses',
           'checking_values', 'host_scalar', 'on_host', 'positive_int', 'set_value_checks', 'size_pair', 'tracing',
           'value_checks']

VALUE_CHECK_MODES = ('host', 'always')
HOST_DEVICES = frozenset({'cpu'})
_mode = {'value_checks': 'host'}


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``, else a ValueError naming ``name`` and the closest choice."""
    if value in choices:
        return value
    close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.5)
    hint = f' Did you mean {close[0]!r}?' if close else ''
    raise ValueError(f'{name} must be one of {tuple(choices)}; got {value!r}.{hint}')


def set_value_checks(mode: str) -> str:
    """Where vispe's value checks (finite pixels, mask layouts, camera calibrations, point clouds...) run, and
    return the previous mode:

    - ``'host'`` (default): on tensors in host memory, that is on the CPU and where data enters (collate functions,
      the data preprocessor); a forward on a GPU never waits for the host;
    - ``'always'``: on GPU tensors too; each check reads a value back, so the GPU waits for the host at every check
      (for debugging inputs built on the GPU). The environment variable ``VISPE_VALUE_CHECKS`` sets the default.
    """
    previous, _mode['value_checks'] = _mode['value_checks'], check_choice('value checks', mode, VALUE_CHECK_MODES)
    return previous


@contextlib.contextmanager
def value_checks(mode: str) -> Iterator[None]:
    """:func:`set_value_checks` for the ``with`` block."""
    previous = set_value_checks(mode)
    try:
        yield
    finally:
        set_value_checks(previous)


_read_item = torch.Tensor.item


def host_scalar(x: torch.Tensor) -> int | float | bool:
    """The Python number of a one-element tensor that lives on the host by construction (a draw from torch's CPU
    generator deciding a training step's branch): reading it makes no device wait. A tensor elsewhere is refused."""
    if x.device.type != 'cpu':
        raise ValueError(f'host_scalar reads host tensors only; this one is on {x.device} (reading it would make the '
                         f'host wait for the device): draw it on the CPU.')
    return _read_item(x)


if os.environ.get('VISPE_VALUE_CHECKS'):
    set_value_checks(os.environ['VISPE_VALUE_CHECKS'])


def tracing() -> bool:
    """Whether torch.compile, torch.export or torch.fx trace the code: checks that read values back to the host are
    skipped then, and derived matrices are computed in the traced code rather than read from the instance."""
    return torch.compiler.is_compiling() or torch.fx._symbolic_trace.is_fx_symbolic_tracing()


def checking_values(x: torch.Tensor) -> bool:
    """Whether value checks that read ``x`` back to the host run: not while a model is traced or compiled (torch.jit
    included), not for meta tensors, and for a tensor off the host (a GPU's) only with :func:`set_value_checks`
    ``('always')``."""
    if tracing() or torch.jit.is_tracing() or x.device.type == 'meta':
        return False
    return on_host(x) or _mode['value_checks'] == 'always'


def on_host(x: torch.Tensor | torch.device) -> bool:
    """Whether ``x`` (a tensor, or a device) is in host memory, where reading values makes no device wait."""
    return (x if isinstance(x, torch.device) else x.device).type in HOST_DEVICES


def positive_int(value: Any, name: str, fix: str, minimum: int = 1) -> int:
    """``value`` as an int of at least ``minimum``: an integer, an integral float (32.0) or a 0-d tensor / array /
    numpy scalar of one. Refuses bools, fractions, NaN, infinities, strings and values below ``minimum`` with an
    error naming ``name`` and ``fix``."""
    if isinstance(value, torch.SymInt):
        return value
    number = value.item() if hasattr(value, 'item') and getattr(value, 'ndim', 0) == 0 else value
    integral = isinstance(number, numbers.Integral) and not isinstance(number, bool)
    if not integral and isinstance(number, float) and math.isfinite(number) and number.is_integer():
        integral = True
    if not integral:
        raise TypeError(f'{name} must be a whole number, got {value!r} '
                        f'({type(value).__name__}); {fix}')
    if number < minimum:
        raise ValueError(f'{name} must be at least {minimum}, got {value!r}; {fix}')
    return int(number)


def size_pair(value: Any, name: str, fix: str) -> tuple[int, int]:
    """``value`` as an (H, W) pair of positive ints (see :func:`positive_int`), or an error naming ``name``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, torch.Tensor)) or len(value) != 2:
        raise ValueError(f'{name} must be (H, W), two positive whole numbers, got {value!r}; {fix}')
    return positive_int(value[0], f'{name}[0] (H)', fix), positive_int(value[1], f'{name}[1] (W)', fix)


def check_depth_range(owner: str, num: Any, start: float, stop: float, min_num: int = 1) -> int:
    """Refuse a depth-bin range that gives no camera-frame depths: ``num`` a whole number >= ``min_num``,
    ``0 < start < stop``, both finite. Returns ``num`` as an int."""
    count = positive_int(num, f'{owner}: num (the bin count)', f'give a whole number of at least {min_num}')
    if count < min_num:
        raise ValueError(f'{owner} needs num >= {min_num} bins, got num={num}; give more bins')
    if not (isinstance(start, numbers.Real) and isinstance(stop, numbers.Real)):
        raise TypeError(f'{owner}: start and stop must be numbers (metres), got start={start!r}, stop={stop!r}')
    if not (math.isfinite(start) and math.isfinite(stop) and 0 < start < stop):
        raise ValueError(f'{owner} needs finite depths 0 < start < stop (metres in front of the camera), got '
                         f'start={start}, stop={stop}; e.g. start=1.0 and stop=position_range[3] as PETR')
    return count


def check_finite(values: torch.Tensor, name: str, fix: str, positive: bool = False) -> None:
    """Refuse NaN or infinite values (and, with ``positive``, depths <= 0, which lie at or behind the camera), naming
    the first bad one and ``fix``; a value check (skipped where :func:`checking_values` says so)."""
    if not checking_values(values):
        return
    bad = ~(torch.isfinite(values) & (values > 0)) if positive else ~torch.isfinite(values)
    if bool(bad.any()):
        where = tuple(int(i) for i in bad.nonzero()[0])
        what = 'finite and positive (in front of the camera)' if positive else 'finite (no NaN or inf)'
        raise ValueError(f'{name} must be {what}; got {float(values[where])} at index {list(where)}; {fix}')


def check_poses(poses: torch.Tensor, name: str, atol: float = 1e-4) -> None:
    """Refuse (..., 4, 4) poses that are not finite rigid transforms ``[[R, t], [0, 0, 0, 1]]`` (R orthonormal with
    det +1 within ``atol``), naming the first bad one; a value check (skipped where :func:`checking_values` says so)."""
    if not checking_values(poses):
        return
    flat = poses.detach().reshape(-1, 4, 4).double()
    rotation = flat[:, :3, :3]
    eye = torch.eye(3, dtype=flat.dtype, device=flat.device)
    last_row = flat.new_tensor([0.0, 0.0, 0.0, 1.0])
    finite = torch.isfinite(flat).flatten(1).all(1)
    safe = torch.where(finite[:, None, None], rotation, eye)
    rigid = (((safe.mT @ safe - eye).abs().amax((-2, -1)) <= atol) & ((torch.linalg.det(safe) - 1).abs() <= atol)
             & (flat[:, 3] == last_row).all(1))
    bad = ~(finite & rigid)
    if bool(bad.any()):
        index = int(bad.nonzero()[0, 0])
        where = tuple(int(i) for i in torch.unravel_index(torch.tensor(index), poses.shape[:-2]))
        problem = 'has NaN or infinite entries' if not bool(finite[index]) else 'is not rigid'
        raise ValueError(f'{name}: pose {where} {problem}; give [[R, t], [0, 0, 0, 1]] with R a rotation (orthonormal, '
                         f'det +1) and finite t, for column vectors (transpose a row-vector matrix).')


def check_boxes(boxes: torch.Tensor, name: str) -> None:
    """Refuse (B, N, 7) boxes (x, y, z, l, w, h, yaw) with NaN or infinite entries or a size l, w or h <= 0, naming
    the first bad box, its value and the fix; a value check (skipped where :func:`checking_values` says so)."""
    if not checking_values(boxes):
        return
    finite = torch.isfinite(boxes).all(-1)
    bad = ~finite | (finite & (boxes[..., 3:6] <= 0).any(-1))
    if bool(bad.any()):
        scene, box = (int(i) for i in bad.nonzero()[0])
        value = [round(float(v), 6) for v in boxes[scene, box]]
        problem = 'has NaN or infinite entries' if not bool(finite[scene, box]) else 'has a size l, w or h <= 0'
        raise ValueError(f'{name}: box {box} of scene {scene} {problem}: (x, y, z, l, w, h, yaw) = {value}; give '
                         f'finite boxes with positive sizes in metres (drop degenerate boxes, or clamp predicted sizes '
                         f'to a small positive minimum as V-DETR does with exp of a clamped log-scale).')
