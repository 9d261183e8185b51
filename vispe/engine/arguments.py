"""Argument types and checks shared by the tools, so that a bad argument is refused before any work.

Every refusal says what is wrong, the value seen and how to fix it. The ``type=`` callables raise
``argparse.ArgumentTypeError``, which argparse prints after the option (``argument --sizes: '0' is
not a positive integer; ...``). The checks that need more than one value, the file system or a built
model raise :class:`InvalidArgument` (``--layers 7: ...``); inside ``parse_args`` the context manager
:func:`reported_by` turns it into ``parser.error`` (usage, message, exit status 2), and a tool run by
:func:`run_main` prints one raised later the same way.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NoReturn, Sequence, TextIO


def progress_wanted(quiet: bool, stream: TextIO | None = None) -> bool:
    """Whether a long job shows a progress bar: on a terminal (``stream``, default stderr, is a TTY) unless
    ``--quiet``; never in logs, pipes or CI."""
    stream = sys.stderr if stream is None else stream
    return not quiet and stream.isatty()


class InvalidArgument(ValueError):
    """A command-line value the tool cannot use: ``'{option} {value}: {problem}; {fix}.'``."""

    def __init__(self, option: str, value: Any, problem: str, fix: str) -> None:
        self.option, self.value = option, value
        shown = ' '.join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
        super().__init__(f'{option} {shown}: {problem}; {fix}.')


def run_main(main: Callable[[], int]) -> NoReturn:
    """``sys.exit(main())``, with an :class:`InvalidArgument` raised after parsing (once a model is built)
    printed as argparse prints its errors, without a traceback (exit status 2)."""
    try:
        status = main()
    except InvalidArgument as error:
        print(f'{Path(sys.argv[0]).name}: error: {error}', file=sys.stderr)
        status = 2
    sys.exit(status)


def recorded_command(command: str, argv: Sequence[str] | None, script: str | None = None) -> str:
    """The command line a tool records in what it writes: ``vispe <command> ARGS`` when its ``main`` was given
    ``argv`` (the ``vispe`` command gives it), else the script's own, ``python <script> ARGS`` (``script``: how to
    name it, default ``sys.argv[0]``; e.g. ``tools/benchmark.py`` in a checkout)."""
    if argv is not None:
        return shlex.join(['vispe', *command.split(), *argv])
    return shlex.join(['python', script or Path(sys.argv[0]).as_posix(), *sys.argv[1:]])


@contextlib.contextmanager
def reported_by(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Report an :class:`InvalidArgument` raised in the block as ``parser.error`` (exit status 2)."""
    try:
        yield
    except InvalidArgument as error:
        parser.error(str(error))


def _argument_type(parse: Callable[[str], Any], what: str, fix: str, accept: Callable[[Any], bool],
                   doc: str) -> Callable[[str], Any]:
    """An argparse ``type=``: ``parse`` the text, refuse it unless ``accept``s it (NaN and inf never)."""

    def argument_type(text: str) -> Any:
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or (isinstance(value, float) and not math.isfinite(value)) or not accept(value):
            raise argparse.ArgumentTypeError(f'{text!r} is not {what}; {fix}.')
        return value

    argument_type.__doc__ = doc
    return argument_type


positive_int = _argument_type(int, 'a positive integer', 'give a whole number of at least 1', lambda v: v >= 1,
                              'argparse type: a whole number of at least 1 (sizes, counts, batch sizes).')
non_negative_int = _argument_type(int, 'a non-negative integer', 'give a whole number of at least 0', lambda v: v >= 0,
                                  'argparse type: a whole number of at least 0 (warm-up steps, indices).')
positive_float = _argument_type(float, 'a positive number', 'give a finite number above 0', lambda v: v > 0,
                                'argparse type: a finite number above 0.')
non_negative_float = _argument_type(float, 'a non-negative number', 'give a finite number of at least 0',
                                    lambda v: v >= 0, 'argparse type: a finite number of at least 0.')
unit_fraction = _argument_type(float, 'a number from 0 to 1', 'give a number from 0 to 1', lambda v: 0 <= v <= 1,
                               'argparse type: a number from 0 to 1 (an IoU, a probability).')


def config_dict(text: str) -> dict[str, Any]:
    """argparse type: a JSON object with a ``type`` key, e.g. ``'{"type": "iRPE", "on": "k"}'``."""
    fix = 'give a JSON object with a "type" key, e.g. \'{"type": "iRPE", "on": "k"}\''
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f'{text!r} is not valid JSON ({error.msg} at character {error.pos}); '
                                         f'{fix}.') from None
    if not isinstance(value, dict) or not isinstance(value.get('type'), str):
        raise argparse.ArgumentTypeError(f'{text!r} is not a config with a "type"; {fix}.')
    return value


def name_or_config(text: str) -> str | dict[str, Any]:
    """argparse type: a registered name as given, or (text starting with ``{``) a :func:`config_dict`."""
    return config_dict(text) if text.lstrip().startswith('{') else text


def grid_query(text: str) -> str:
    """argparse type: a query token, ``'cls'``, ``'center'`` or ``'ROW,COL'`` of non-negative integers."""
    fix = "give 'cls', 'center' or ROW,COL (two whole numbers from 0, e.g. 7,7)"
    if text in ('cls', 'center'):
        return text
    parts = text.split(',')
    if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f'{text!r} is not a query; {fix}.')
    return text


def check_query(option: str, query: str, grid_size: Sequence[int] | None, num_prefix_tokens: int,
                grid: str = 'grid') -> str:
    """A :func:`grid_query` that exists on a ``grid_size`` grid (``grid`` names it in the message);
    without ``grid_size`` only whether a class token exists is checked."""
    if query == 'cls' and num_prefix_tokens == 0:
        raise InvalidArgument(option, query, 'this model has no class token',
                              "give 'center' or ROW,COL of a patch")
    if ',' in query and grid_size is not None:
        height, width = grid_size
        row, col = (int(part) for part in query.split(','))
        if not (row < height and col < width):
            raise InvalidArgument(option, query, f'the patch is outside the {height}x{width} {grid}',
                                  f'give ROW from 0 to {height - 1} and COL from 0 to {width - 1}, or \'center\'')
    return query


def check_distinct(option: str, values: Sequence[Any]) -> Sequence[Any]:
    """Every value at most once (each would otherwise be measured and reported twice)."""
    repeated = [value for value, count in Counter(values).items() if count > 1]
    if repeated:
        raise InvalidArgument(option, list(values), f'{", ".join(map(str, repeated))} given more than once',
                              'give each value once')
    return values


def check_indices(option: str, indices: Iterable[int], count: int, what: str, negative: bool = True) -> list[int]:
    """Indices into ``count`` items (``what``: 'attention layers'); with ``negative``, -1 is the last."""
    indices = list(indices)
    low = -count if negative else 0
    outside = [index for index in indices if not low <= index < count]
    if outside:
        valid = f'from {low} to {count - 1}' + (' (negative ones count from the end)' if negative else '')
        raise InvalidArgument(option, indices, f'{", ".join(map(str, outside))} outside the model\'s {count} {what}',
                              f'give indices {valid}')
    return indices


def _created_folder(option: str, value: Path, folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InvalidArgument(option, value, f'cannot create the folder {folder} ({error.strerror or error})',
                              'choose a path whose folders you can create') from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidArgument(option, value, f'the folder {folder} is not writable',
                              'choose a folder you can write to')


def writable_output(path: Path, option: str = '--out', suffixes: Sequence[str] = ()) -> Path:
    """Create the parent folder of an output ``path`` (or fail naming the folder and the OS error).

    With ``suffixes`` the tool writes ``path.with_suffix(s)`` for each (``path`` is a stem such as
    ``results/extrapolation``); none of the files may be an existing folder.
    """
    path = Path(path)
    if not path.name or path.name == '..':
        raise InvalidArgument(option, path, 'names a folder, not a file', 'give a file path such as results/out')
    files = [path.with_suffix(suffix) for suffix in suffixes] or [path]
    for file in files:
        if file.is_dir():
            raise InvalidArgument(option, path, f'{file} is a folder', 'give a file path (the folder is created)')
    _created_folder(option, path, path.parent)
    return path


def output_file(path: Path, option: str, suffix: str) -> Path:
    """An output file that must end in ``suffix`` (e.g. '.ply'); its parent folder is created."""
    if Path(path).suffix.lower() != suffix:
        raise InvalidArgument(option, path, f'is not a {suffix} file', f'give a path ending in {suffix}')
    return writable_output(path, option)


def writable_folder(path: Path, option: str) -> Path:
    """Create an output folder ``path`` (or fail naming the folder and the OS error)."""
    path = Path(path)
    _created_folder(option, path, path)
    return path


def existing_file(path: Path, option: str) -> Path:
    """An input file that exists."""
    path = Path(path)
    if not path.is_file():
        problem = 'is a folder, not a file' if path.is_dir() else 'no such file'
        raise InvalidArgument(option, path, problem, 'give the path of an existing file')
    return path


def existing_config(name: str | Path, option: str) -> Path:
    """The file of a config given as a path or as a packaged name ``vispe::<path>``
    (:func:`vispe.configs.resolve_config`), which must exist."""
    from vispe.configs import UnknownConfigError, resolve_config
    try:
        path = resolve_config(name)
    except UnknownConfigError as error:
        raise InvalidArgument(option, name, str(error).rstrip('.'), 'give a packaged name or a config file') from None
    return existing_file(path, option)


def existing_folder(path: Path, option: str) -> Path:
    """An input folder that exists."""
    path = Path(path)
    if not path.is_dir():
        raise InvalidArgument(option, path, 'no such folder', 'give the path of an existing folder')
    return path
