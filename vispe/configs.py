"""The configs shipped inside the package, named ``vispe::<path>`` as mmdet names its own (``mmdet::...``).

The repository's ``configs/`` folder is the source; the package sees it as ``vispe/.mim/configs``, the place
mmengine's ``pkg::path`` resolution reads (``<package dir>/.mim/configs/<path>``). In a checkout (editable
install) ``vispe/.mim/configs`` is a committed symlink to ``../../configs``; the wheel holds real copies
(setuptools' package data follows the link, see pyproject.toml).

    >>> from vispe.configs import packaged_configs, resolve_config
    >>> packaged_configs('vit/*rope*')[:1]
    ['vit/vit-t4_rope-axial_fmnist-28.py']
    >>> resolve_config('vispe::vit/vit-t4_rope-mixed_fmnist-28.py')   # the file's absolute path
"""
from __future__ import annotations

import difflib
import fnmatch
from pathlib import Path

PREFIX = 'vispe::'
CONFIG_ROOT = Path(__file__).resolve().parent / '.mim' / 'configs'


class UnknownConfigError(FileNotFoundError):
    """A ``vispe::`` name that is not a packaged config (the message names the closest ones)."""


def packaged_configs(pattern: str | None = None, include_bases: bool = False) -> list[str]:
    """The packaged config names (paths under ``configs/``, e.g. ``'vit/vit-t4_ape_fmnist-28.py'``), sorted;
    ``pattern`` filters them as a shell glob (a pattern without a wildcard matches names containing it).
    The ``_base_/`` fragments, which are not runnable, are left out unless ``include_bases``."""
    names = sorted(path.relative_to(CONFIG_ROOT).as_posix() for path in CONFIG_ROOT.rglob('*.py'))
    if not include_bases:
        names = [name for name in names if not name.startswith('_base_/')]
    if pattern is not None:
        glob = pattern if any(char in pattern for char in '*?[') else f'*{pattern}*'
        names = [name for name in names if fnmatch.fnmatchcase(name, glob)]
    return names


def resolve_config(name: str | Path) -> Path:
    """The file of a config: ``vispe::<path>`` is a packaged config, anything else a path as given.

    Raises:
        UnknownConfigError: a ``vispe::`` name without such a packaged config (names the closest ones).
    """
    text = str(name)
    if not text.startswith(PREFIX):
        return Path(name)
    relative = text[len(PREFIX):]
    path = CONFIG_ROOT / relative
    if relative and path.is_file():
        return path
    known = packaged_configs(include_bases=True)
    if not known:
        raise UnknownConfigError(f'Config {text!r}: this vispe install has no packaged configs under {CONFIG_ROOT}; '
                                 f'reinstall vispe from a wheel or a checkout with its configs/ folder.')
    close = difflib.get_close_matches(relative, known, n=3, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(PREFIX + c) for c in close)}?" if close else ''
    raise UnknownConfigError(f'Config {text!r} is not a packaged config.{hint} List them with `vispe list configs`.')
