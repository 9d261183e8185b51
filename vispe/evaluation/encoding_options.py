"""Test-time encoding options of ``tools/eval_resolution.py --encoding-options SIZE:NAME=VALUE``: parsed per size,
checked against what the runs' encodings declare (:class:`vispe.encodings.Option` with ``test_time=True``) before any
evaluation, and set on a model (and restored) around each size."""
from __future__ import annotations

import ast
import contextlib
from typing import Any, Iterator

import torch

import vispe

__all__ = ['check_encoding_options', 'encoding_options_set', 'option_owners', 'parse_encoding_options',
           'set_encoding_options']


def parse_encoding_options(items: list[str], sizes: list[int]) -> dict[int, dict[str, Any]]:
    """``SIZE:NAME=VALUE`` (or ``all:NAME=VALUE``) items -> {size: {name: value}}; values are Python literals,
    else strings. Names and values are checked against the encodings later (:func:`check_encoding_options`)."""
    options: dict[int, dict[str, Any]] = {size: {} for size in sizes}
    for item in items:
        try:
            where, assignment = item.split(':', 1)
            name, text = assignment.split('=', 1)
        except ValueError:
            raise ValueError(f'--encoding-options takes SIZE:NAME=VALUE (or all:NAME=VALUE); got {item!r}.') from None
        if where != 'all' and not where.isdigit():
            raise ValueError(f'--encoding-options {item!r}: the size before ":" is one of --sizes {sizes} or all; '
                             f'got {where!r}.')
        if not name.isidentifier():
            raise ValueError(f'--encoding-options {item!r}: {name!r} is not an option name; write SIZE:NAME=VALUE, '
                             f'e.g. all:theta=160.')
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        targets = sizes if where == 'all' else [int(where)]
        for size in targets:
            if size not in options:
                raise ValueError(f'--encoding-options names size {size}, which is not in --sizes {sizes}.')
            options[size][name] = value
    return options


def option_owners(model: torch.nn.Module, name: str) -> list[vispe.PositionEncoding]:
    """The model's encodings that declare ``name`` as a test-time option."""
    return [m for m in model.modules() if isinstance(m, vispe.PositionEncoding) and name in type(m).test_time_options()]


def set_encoding_options(model: torch.nn.Module, options: dict[str, Any]) -> dict[tuple[Any, str], Any]:
    """Set the test-time options the model's encodings declare; returns what to restore."""
    previous = {}
    for name, value in options.items():
        for owner in option_owners(model, name):
            previous[(owner, name)] = getattr(owner, name)
            setattr(owner, name, value)
    return previous


@contextlib.contextmanager
def encoding_options_set(model: torch.nn.Module, options: dict[str, Any]) -> Iterator[None]:
    """The test-time ``options`` set on the model's encodings for the block (:func:`set_encoding_options`), the
    previous values back after it."""
    previous = set_encoding_options(model, options)
    try:
        yield
    finally:
        for (owner, name), value in previous.items():
            setattr(owner, name, value)


def check_encoding_options(models: list[tuple[str, torch.nn.Module]], options: dict[int, dict[str, Any]]) -> None:
    """Check every option against the declarations of the runs' encodings, before any evaluation.

    Raises:
        ValueError: no encoding of the runs has the option at test time: an unknown name (the message
            names the closest test-time option) or an option fixed at build.
        TypeError, ValueError: a value the declaration refuses (the message names the option and value).
    """
    encodings = [m for _, model in models for m in model.modules() if isinstance(m, vispe.PositionEncoding)]
    kinds = ', '.join(sorted({type(m).__name__ for m in encodings}))
    test_time = list(dict.fromkeys(name for m in encodings for name in type(m).test_time_options()))
    available = f'Test-time options of these runs: {", ".join(test_time) or "none"}.'
    undeclared = sorted({type(m).__name__ for m in encodings if not type(m).declares_options})
    if undeclared:
        available += (f' {", ".join(undeclared)} declare no options: an encoding offers test-time options by '
                      f'declaring them in its class attribute options (vispe.encodings.Option(..., test_time=True)).')
    for size, per_size in options.items():
        for name, value in per_size.items():
            where = f'--encoding-options {size}:{name}={value!r}'
            owners = [m for m in encodings if name in type(m).test_time_options()]
            if not owners:
                fixed = [m for m in encodings if name in type(m).options]
                if fixed:
                    raise ValueError(f'{where}: no encoding of these runs ({kinds}) may change {name} at test time. '
                                     f'{vispe.encodings.options.fixed_at_build_message(fixed[0], name)}')
                raise ValueError(f'No encoding of these runs ({kinds}) has a test-time option {name!r}.'
                                 f'{vispe.encodings.options.closest_suggestion(name, test_time)} {available}')
            for owner in owners:
                try:
                    vispe.encodings.check_test_time_option(owner, name, value)
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f'{where}: {exc}') from None
