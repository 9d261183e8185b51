"""Reading checkpoint files without running code from them.

A torch checkpoint is a pickle, and unpickling can call any function the file names: a crafted
``.pth`` runs code as it loads. vispe therefore reads every file through an allow-list unpickler
(:func:`load`): tensors and plain containers (torch's own weights-only list), mmengine's training
state (its ``HistoryBuffer`` logs, numpy arrays and scalars, the numpy RNG state) and nothing else.
That covers every file a vispe run writes: ``best.pth``/``last.pth`` and mmengine's epoch
checkpoints, so resuming needs no trust. Python's full unpickler runs only on request
(``trusted=True``), which a user gives for a file they wrote themselves.

Files that are not checkpoints, or were cut short, are reported as corrupt with their path.
"""
from __future__ import annotations

import argparse
import os
import pickle
import types
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import torch

# The first bytes of the files torch.load reads: a zip archive (torch >= 1.6) or the legacy format,
# which starts with the pickled magic number (protocol 2).
ZIP_MAGIC = b'PK\x03\x04'
LEGACY_MAGIC = b'\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19'


class UnsafeCheckpointError(pickle.UnpicklingError):
    """The file names a Python object outside the allow-list; loading it could run code."""


class CorruptCheckpointError(RuntimeError):
    """The file is not a readable checkpoint (truncated, damaged, or another kind of file)."""


class _RefusedGlobal(pickle.UnpicklingError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _numpy_globals() -> dict[str, Any]:
    import numpy as np
    multiarray = np._core.multiarray if hasattr(np, '_core') else np.core.multiarray
    allowed: dict[str, Any] = {'numpy.ndarray': np.ndarray, 'numpy.dtype': np.dtype}
    for module in ('numpy.core.multiarray', 'numpy._core.multiarray'):
        allowed[f'{module}._reconstruct'] = multiarray._reconstruct
        allowed[f'{module}.scalar'] = multiarray.scalar
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        for name in dir(dtypes):
            value = getattr(dtypes, name)
            if isinstance(value, type) and issubclass(value, np.dtype):
                allowed[f'numpy.dtypes.{name}'] = value
    return allowed


def _mmengine_globals() -> dict[str, Any]:
    from mmengine.logging.history_buffer import HistoryBuffer
    return {'mmengine.logging.history_buffer.HistoryBuffer': HistoryBuffer}


def _plain_data_globals() -> dict[str, Any]:
    """Classes that hold attributes only: ``argparse.Namespace`` (the training arguments that 3DETR, V-DETR and DeiT
    save next to the weights; unpickled by ``__new__`` and a ``__dict__`` update, which runs no code)."""
    return {'argparse.Namespace': argparse.Namespace}


@lru_cache(maxsize=1)
def allowed_globals() -> dict[str, Any]:
    """``'module.name'`` -> object for everything the allow-list unpickler may construct."""
    from torch._weights_only_unpickler import _get_allowed_globals
    return {**_get_allowed_globals(), **_numpy_globals(), **_mmengine_globals(), **_plain_data_globals()}


def _classes_with_methods() -> tuple[type, ...]:
    """Classes whose own methods a checkpoint may name through ``getattr`` (mmengine pickles the
    ``HistoryBuffer`` statistics methods that way)."""
    return tuple(value for key, value in allowed_globals().items() if key.startswith('mmengine.'))


def _restricted_getattr(owner: Any, name: str) -> Any:
    """``getattr`` for pickles: only a plain function defined on an allow-listed mmengine class."""
    if (isinstance(owner, type) and owner in _classes_with_methods() and isinstance(name, str)
            and isinstance(owner.__dict__.get(name), (types.FunctionType, staticmethod, classmethod))):
        return getattr(owner, name)
    raise _RefusedGlobal(f'builtins.getattr({getattr(owner, "__name__", type(owner).__name__)}, {name!r})')


class Unpickler(pickle.Unpickler):
    """A pickle ``Unpickler`` that constructs only allow-listed globals."""

    def find_class(self, module: str, name: str) -> Any:
        if module in ('builtins', '__builtin__') and name == 'getattr':
            return _restricted_getattr
        key = f'{module}.{name}'
        allowed = allowed_globals()
        if key in allowed:
            return allowed[key]
        raise _RefusedGlobal(key)


def _pickle_load(file: BinaryIO, **kwargs: Any) -> Any:
    return Unpickler(file, **kwargs).load()


# What torch.load takes as ``pickle_module``: the allow-list Unpickler and a matching ``load``.
allowlist_pickle = types.SimpleNamespace(__name__='vispe.serialization.allowlist_pickle', Unpickler=Unpickler,
                                         load=_pickle_load)


def _check_format(path: Path) -> None:
    with open(path, 'rb') as handle:
        head = handle.read(len(LEGACY_MAGIC))
    if head.startswith(ZIP_MAGIC):
        if not zipfile.is_zipfile(path):
            raise CorruptCheckpointError(f'Checkpoint {path} is corrupt or truncated: it starts as a torch zip archive '
                                         f'but its directory is missing ({path.stat().st_size} bytes). Write it again '
                                         f'or use another copy.')
        return
    if head != LEGACY_MAGIC:
        raise CorruptCheckpointError(
            f'{path} is not a torch checkpoint: it starts with {head[:8]!r}, neither a torch zip archive nor the legacy '
            f'torch format ({path.stat().st_size} bytes). It may be corrupt or truncated, or another kind of file '
            f'(a .safetensors file must end in .safetensors).')


def load(path: str | os.PathLike, map_location: Any = 'cpu', trusted: bool = False,
         refusal_hint: str | None = None) -> Any:
    """Read a torch checkpoint file without running code from it.

    Args:
        path: a local ``.pth``/``.pt``/``.bin`` file written by ``torch.save``.
        map_location: as in ``torch.load``.
        trusted: the file is the user's own: if the allow-list refuses it, unpickle it in full
            (which runs any code a crafted file contains).
        refusal_hint: what the caller's user can do when the allow-list refuses the file (appended
            to the error; the default names no way to trust the file).

    Raises:
        FileNotFoundError: no such file.
        UnsafeCheckpointError: the file names a Python object outside the allow-list.
        CorruptCheckpointError: not a torch file, truncated or damaged.
    """
    path = Path(os.fspath(path)).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f'Checkpoint not found: {path}' + (' (it is a directory)' if path.is_dir() else ''))
    _check_format(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=False, pickle_module=allowlist_pickle)
    except _RefusedGlobal as refused:
        if trusted:
            return _load_trusted(path, map_location)
        hint = refusal_hint or ('If the file comes from elsewhere, ask for its weights as a state dict of tensors or a '
                                '.safetensors file.')
        raise UnsafeCheckpointError(
            f'{path} holds a Python object ({refused.name}) that vispe does not unpickle: loading it could run code '
            f'written into the file. vispe reads tensors, plain containers and mmengine\'s training state only. '
            f'{hint}') from None
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError, IndexError,
            AttributeError, TypeError, zipfile.BadZipFile) as exc:
        raise CorruptCheckpointError(f'Checkpoint {path} is corrupt or truncated ({type(exc).__name__}: '
                                     f'{_first_line(exc)}). Write it again or use another copy.') from None


def _load_trusted(path: Path, map_location: Any) -> Any:
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile) as exc:
        raise CorruptCheckpointError(f'Checkpoint {path} is corrupt or truncated ({type(exc).__name__}: '
                                     f'{_first_line(exc)}).') from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ''

