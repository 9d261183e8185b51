"""Fill the known marker blocks of markdown files and tell which are stale (the engine of tools/update_readme.py)."""
from __future__ import annotations

import difflib
from pathlib import Path

from vispe.reporting.blocks import BLOCKS
from vispe.reporting.markers import block_body, block_names, with_block
from vispe.reporting.provenance import ReportSourceError
from vispe.reporting.sources import Sources
from vispe.reporting.stamp import registry_stamp, stamp


def render_block(name: str, sources: Sources) -> str:
    """Block ``name``'s markdown with its stamp; ReportSourceError naming the block and its files when a JSON
    lacks a field the table reads."""
    block = BLOCKS[name]
    files = [path for pattern in block.patterns for path in sources.expand(pattern)]
    try:
        body = block.render(sources, files)
    except ReportSourceError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, StopIteration, AttributeError) as error:
        raise ReportSourceError(f'block {name!r}: {", ".join(files)} lack what the table reads '
                                f'({type(error).__name__}: {error}); regenerate them with the tool that wrote them')\
            from error
    return f'{body}\n\n{registry_stamp(block.registry) if block.registry else stamp(sources, files)}'


def with_current_blocks(text: str, sources: Sources, where: str = 'the file') -> str:
    """``text`` with every marker block regenerated; ValueError for a block name no generator knows (naming the
    closest known one)."""
    for name in block_names(text):
        if name not in BLOCKS:
            close = difflib.get_close_matches(name, BLOCKS, n=1)
            hint = f'; did you mean {close[0]!r}?' if close else f'; known: {", ".join(sorted(BLOCKS))}'
            raise ValueError(f'{where}: unknown marker block {name!r}{hint}')
        text = with_block(text, name, render_block(name, sources))
    return text


def stale_blocks(old: str, new: str) -> list[str]:
    """Names of the blocks whose content differs between ``old`` and ``new``."""
    return [name for name in block_names(new) if block_body(old, name) != block_body(new, name)]


def generated_files(repo_root: Path) -> list[Path]:
    """The files the generator keeps current: README.md and every docs/**/*.md that has marker blocks."""
    candidates = [repo_root / 'README.md', *sorted((repo_root / 'docs').rglob('*.md'))]
    return [path for path in candidates if path.is_file() and block_names(path.read_text())]
