"""Where a data-set converter writes: an existing set is replaced only on request, and a stale partial folder (left by
an interrupted conversion) is cleared, never a folder the converter did not make."""
from __future__ import annotations

import shutil
from pathlib import Path

from vispe.datasets.mv_scenes.errors import DatasetExistsError


def prepare_output_folder(root: Path, partial: Path, overwrite: bool, info_file: str, partial_marker: str,
                          set_name: str, option: str) -> None:
    """Refuse an existing ``root`` (unless ``overwrite`` and it holds ``info_file``, i.e. it is a data set of this
    converter) and remove a stale ``partial`` folder that holds ``partial_marker``. For the messages: ``set_name``
    with its article ('an mv-scenes') and ``option``, the command-line flag that names the output."""
    if root.exists():
        if not overwrite:
            raise DatasetExistsError(f'{root} already exists: pass --overwrite (overwrite=True) to replace it, or '
                                     f'choose another {option}')
        if not (root / info_file).is_file():
            raise DatasetExistsError(f'{root} exists but is not {set_name} data set (no {info_file}); it is '
                                     f'not replaced: remove it yourself or choose another {option}')
    if partial.exists():
        if not (partial / partial_marker).is_file():
            raise DatasetExistsError(f'{partial} exists but was not left by {set_name} conversion (no '
                                     f'{partial_marker}); remove it yourself or choose another {option}')
        shutil.rmtree(partial)


def publish_output_folder(partial: Path, root: Path, partial_marker: str) -> None:
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
