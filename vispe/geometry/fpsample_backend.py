"""Farthest-point sampling on the CPU through the fpsample library (Leonard Lin's, ``pip install "vispe[3d]"``): its
exact ``fps_sampling``, the same O(N·M) algorithm as PointNet++'s op and vispe's torch loop, compiled.

Both compute each squared distance in float32 as ``(dx² + dy²) + dz²`` and keep each point's nearest distance
with ``min``, so on float32 clouds of finite points they pick the same points; they may differ only in which of
several equally far points comes next. vispe's loop (and ``torch.argmax``) takes the lowest index; fpsample 1.0.0
does too, while 0.3.3 and 1.0.1+ take the highest. :func:`fpsample_ties_to_highest` asks the installed version
once, and where it takes the highest the cloud is handed over in reverse order (the highest reversed index is the
lowest original one), so the indices equal the torch loop's in every case.

Only fpsample's exact function is used: its bucket / kd-tree variants (QuickFPS) and NPDU heuristics pick other
points. The equal arithmetic holds where fpsample does not fuse ``d += x * x`` into one multiply-add: 0.3.3 (Rust,
the wheels of ``vispe[3d]``) never does; 1.0.x, C++ built from source, may where the compiler contracts (GCC and clang
on arm64), and could then order two points whose distances differ by a rounding otherwise. Tested on Linux x86-64.
"""
from __future__ import annotations

import functools
from types import ModuleType

import numpy as np
import torch

from vispe.extras import MissingExtraError, import_extra

__all__ = ['fpsample_farthest_points', 'fpsample_importable', 'fpsample_module', 'fpsample_ties_to_highest']


def fpsample_module() -> ModuleType:
    """The fpsample module, or a MissingExtraError naming ``pip install "vispe[3d]"`` and ``backend='torch'``."""
    try:
        return import_extra('fpsample', "farthest_point_sample(backend='fpsample')")
    except MissingExtraError as error:
        raise MissingExtraError(f"{error} (Python 3.11 and 3.12: a wheel; on 3.13+ the extra leaves it out, and `pip "
                                f"install fpsample` builds it with a C++ compiler), or use backend='torch' (or "
                                f"'auto'), vispe's own loop, which gives the same indices.") from error


@functools.cache
def fpsample_importable() -> bool:
    """Whether fpsample imports here (asked once per process)."""
    try:
        fpsample_module()
    except ImportError:
        return False
    return True


@functools.cache
def fpsample_ties_to_highest() -> bool:
    """Whether the installed fpsample takes the highest index among equally far points (asked once, on three points:
    from point 0, points 1 and 2 are both 1 away)."""
    line = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]], dtype=np.float32)
    second = int(fpsample_module().fps_sampling(line, 2, start_idx=0)[1])
    if second not in (1, 2):
        raise RuntimeError(f'fpsample.fps_sampling picked point {second} second on a line of three points (1 or 2 '
                           f'expected): this fpsample version samples differently; use backend=\'torch\'.')
    return second == 2


def fpsample_farthest_points(xyz: torch.Tensor, num_samples: int) -> torch.Tensor:
    """Indices (B, num_samples) int64 of farthest-point sampling from point 0 of each cloud of ``xyz`` (B, N, 3)
    float32 on the CPU, finite, one fpsample call per cloud; ties take the lowest index."""
    fps = fpsample_module()
    reverse = fpsample_ties_to_highest()
    last = xyz.shape[1] - 1
    chosen = []
    for cloud in xyz.detach():
        if reverse:
            picked = last - fps.fps_sampling(cloud.flip(0).numpy(), num_samples, start_idx=last).astype(np.int64)
        else:
            picked = fps.fps_sampling(cloud.numpy(), num_samples, start_idx=0).astype(np.int64)
        chosen.append(torch.from_numpy(picked))
    return torch.stack(chosen)
