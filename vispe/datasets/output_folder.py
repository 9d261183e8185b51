"""Where a data-set converter writes, atomically: into ``<root>.partial``, renamed to ``root`` once complete. An
existing set is replaced only on request and only once the new one is complete; a stale partial folder (left by an
interrupted conversion) is cleared, never a folder the converter did not make."""
from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from vispe.datasets.mv_scenes.errors import DatasetExistsError

__all__ = ['DatasetFolder', 'atomic_dataset_folder']


@dataclass(frozen=True)
class DatasetFolder:
    """What a converter's output looks like, for its checks and messages.

    Attributes:
        info_file: the summary every finished set holds (it marks a folder as a set of this converter).
        partial_marker: the file a partial folder holds while the converter writes it.
        name: the set's name with its article ('an mv-scenes').
        option: the command-line flag that names the output ('--root').
    """

    info_file: str
    partial_marker: str
    name: str
    option: str


def _prepare(root: Path, partial: Path, overwrite: bool, folder: DatasetFolder) -> None:
    """Refuse an existing ``root`` (unless ``overwrite`` and it holds the info file, i.e. it is a data set of this
    converter) and remove a stale ``partial`` folder that holds the partial marker."""
    if root.exists():
        if not overwrite:
            raise DatasetExistsError(f'{root} already exists: pass --overwrite (overwrite=True) to replace it, or '
                                     f'choose another {folder.option}')
        if not (root / folder.info_file).is_file():
            raise DatasetExistsError(f'{root} exists but is not {folder.name} data set (no {folder.info_file}); it is '
                                     f'not replaced: remove it yourself or choose another {folder.option}')
    if partial.exists():
        if not (partial / folder.partial_marker).is_file():
            raise DatasetExistsError(f'{partial} exists but was not left by {folder.name} conversion (no '
                                     f'{folder.partial_marker}); remove it yourself or choose another {folder.option}')
        shutil.rmtree(partial)


def _publish(partial: Path, root: Path, partial_marker: str) -> None:
    """Move a finished ``partial`` folder (its marker removed) to ``root``, replacing an existing set only once the
    new one is complete: the old set is renamed aside, the new one renamed into place, then the old one removed."""
    (partial / partial_marker).unlink()
    if root.exists():
        old = root.with_name(root.name + '.old')
        shutil.rmtree(old, ignore_errors=True)
        root.rename(old)
        partial.rename(root)
        shutil.rmtree(old)
    else:
        partial.rename(root)


@contextlib.contextmanager
def atomic_dataset_folder(root: str | Path, overwrite: bool, folder: DatasetFolder) -> Iterator[Path]:
    """The folder to write a data set into (``<root>.partial``, marked as partial); when the block ends it becomes
    ``root``, and when the block raises (or is interrupted) it is removed.

    Raises:
        DatasetExistsError: ``root`` exists (without ``overwrite``, or it is not a set of this converter), or a
            folder ``<root>.partial`` exists that the converter did not leave.
    """
    root = Path(root)
    partial = root.with_name(root.name + '.partial')
    _prepare(root, partial, overwrite, folder)
    partial.mkdir(parents=True)
    (partial / folder.partial_marker).write_text(f'{folder.name} conversion is writing here; a rerun removes this '
                                                 f'folder\n')
    try:
        yield partial
        _publish(partial, root, folder.partial_marker)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
