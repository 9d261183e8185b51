"""What the data-set converter commands (``vispe dataset``) share: the default worker count, the output
folder argument, one conversion run with its known errors reported, and the size of what it wrote."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from vispe.datasets.mv_scenes.errors import (DatasetExistsError, DegenerateBoxError, EmptySceneError, MeshFileError,
                                             RenderError)
from vispe.engine.arguments import InvalidArgument, writable_folder

__all__ = ['CONVERSION_ERRORS', 'dataset_folder_argument', 'default_workers', 'folder_size', 'run_conversion']

# What a conversion raises for a problem of its inputs or output folder (reported in one line, exit status 2).
CONVERSION_ERRORS = (DatasetExistsError, DegenerateBoxError, EmptySceneError, MeshFileError, RenderError)


def default_workers() -> int:
    """The CPUs this process may use (at most 8)."""
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count() or 1))


def dataset_folder_argument(path: Path, option: str) -> Path:
    """A data set's output folder given as ``option``: not a file, its parent creatable (the set itself is written
    atomically beside it)."""
    if path.exists() and not path.is_dir():
        raise InvalidArgument(option, path, 'is a file', 'give a folder path')
    writable_folder(path.resolve().parent, option)
    return path


def folder_size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(item.stat().st_size for item in path.rglob('*') if item.is_file())


def run_conversion(tool: str, root: Path, convert: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], float] | None:
    """``convert()`` and the seconds it took, or None after printing a conversion error (``tool: error: ...``) that
    says ``root`` was left as it was."""
    start = time.perf_counter()
    try:
        info = convert()
    except CONVERSION_ERRORS as error:
        print(f'{tool}: error: {error}; {root} was left as it was', file=sys.stderr)
        return None
    return info, time.perf_counter() - start
