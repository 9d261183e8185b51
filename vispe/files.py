"""Writing files so that a failure never leaves half of one."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

__all__ = ['write_atomically']


def write_atomically(path: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` on a file beside ``path`` (same suffix), then rename it over ``path``: a failure
    leaves no half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f'.{path.stem}.', suffix=path.suffix or '.tmp', dir=path.parent)
    os.close(handle)
    umask = os.umask(0)
    os.umask(umask)
    try:
        write(Path(temporary))
        os.chmod(temporary, 0o666 & ~umask)  # mkstemp's 0600 -> what open() would have given
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
