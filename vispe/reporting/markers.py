"""Marker blocks in a markdown file: ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->`` enclose generated text."""
from __future__ import annotations

import re

START = re.compile(r'<!-- ([a-z0-9-]+):start -->')


def markers(name: str) -> tuple[str, str]:
    """The start and end comments of block ``name``."""
    return f'<!-- {name}:start -->', f'<!-- {name}:end -->'


def block_names(text: str) -> list[str]:
    """Names of the marker blocks in ``text``, in order; ValueError naming the block if one has no end marker or
    appears twice."""
    names = START.findall(text)
    for name in names:
        start, end = markers(name)
        if text.count(start) > 1:
            raise ValueError(f'marker block {name!r} appears {text.count(start)} times; keep one')
        if end not in text.split(start, 1)[1]:
            raise ValueError(f'marker block {name!r} has no {end} after its {start}')
    return names


def block_body(text: str, name: str) -> str:
    """The text between block ``name``'s markers."""
    start, end = markers(name)
    return text.split(start, 1)[1].split(end, 1)[0]


def with_block(text: str, name: str, body: str) -> str:
    """``text`` with block ``name``'s content replaced by ``body`` (one newline after the start marker and before
    the end marker)."""
    start, end = markers(name)
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f'{head}{start}\n{body.strip()}\n{end}{tail}'
