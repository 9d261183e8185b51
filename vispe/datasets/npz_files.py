"""Reading the ``.npz`` files vispe's converters write, never unpickling, with errors that name the file."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ['load_npz']


def load_npz(path: str | Path, keys: Sequence[str], what: str, fix: str) -> dict[str, np.ndarray]:
    """The arrays ``keys`` of ``path`` (``allow_pickle=False``).

    Args:
        what: what the file should be, with its article ('a readable NVS scene').
        fix: how to make it again ('rewrite the set with multiview_scenes.py --task nvs --overwrite').

    Raises:
        ValueError: the file is missing a key, truncated, not an .npz, or holds pickled data; the message names the
            path, the error and ``fix``.
    """
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in keys}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(f'{path} is not {what} ({type(error).__name__}: {error}); {fix}') from None
